"""The scene file (TOML): schema, validation and conversion to :class:`~impactsound.scene.model.Scene`.

See docs/scene-format.md for the format with an example. Everything is validated before any work starts; errors
name the scene file and the field (``object[2].velocity``) and say what would fix it.
"""
from __future__ import annotations


import math
import tomllib
from pathlib import Path
from typing import Literal, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..constants import AIR_C, AIR_RHO
from ..errors import InputError, MeshError
from ..materials import Material, get_material, make_material
from ..mesh.surface import check_surface
from .granular import GranularSpec, parse_granular
from .shell_body import ShellSpec
from .model import Air, Body, Ground, Listener, Scene
from .model_import import expand_model_bodies
from .primitives import make_primitive

#: the sources a scene renders when it does not say (``[scene] sources``)
DEFAULT_SOURCES = ("modal", "acceleration_noise", "ground")
#: added to the default sources when the scene has a ``[granular]`` table
GRANULAR_SOURCES = ("grain_noise", "container")
#: added to the default sources when an object has a ``shell = {...}`` table
SHELL_SOURCE = "shell"
#: source options also spelled in ``[scene]`` (older names, and ``acceleration_noise``, the scene-wide
#: acceleration-noise model): key -> (source kind, option)
SCENE_OPTION_KEYS = {"modal_order": ("modal", "modal_order"), "max_modes": ("modal", "max_modes"),
                     "transfer": ("modal", "transfer"), "transfer_max_modes": ("modal", "transfer_max_modes"),
                     "pan_budget": ("acceleration_noise", "budget"),
                     "acceleration_noise": ("acceleration_noise", "model")}

Vec3 = tuple[float, float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MaterialSpec(_Strict):
    E: float
    nu: float
    rho: float
    alpha: float = 0.0
    beta: float = 0.0
    gamma: float = 0.0
    friction: float = 0.5
    restitution: float = 0.5
    name: str = "custom"


class ObjectSpec(_Strict):
    name: str | None = None
    shape: str | None = None           # built-in primitive
    size: dict[str, Any] = Field(default_factory=dict)   # primitive parameters [m]
    mesh: str | None = None            # mesh file, relative to the scene file
    scale: float = 1.0                 # applied to the mesh file (e.g. 0.001 for millimetres)
    material: str | MaterialSpec
    position: Vec3 = (0.0, 0.0, 0.1)  # world position of the centre of mass [m] (of the mesh origin: origin)
    origin: str = "com"                # what position places: "com" (centre of mass) or "mesh" (the mesh's origin)
    rotation: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)  # quaternion w, x, y, z
    euler_deg: Vec3 | None = None      # alternative to rotation: intrinsic x-y-z angles [deg]
    velocity: Vec3 = (0.0, 0.0, 0.0)   # [m/s]
    angular_velocity: Vec3 = (0.0, 0.0, 0.0)  # world frame [rad/s]
    transfer: str | None = None        # FFAT transfer asset for this object (relative to the scene file), or
                                       # "low_order" (the compact model: large props whose FDTD grid is too big)
    acceleration_noise: str | None = None   # this object's acceleration-noise model (overrides the scene's)
    shell: ShellSpec | None = None     # a thin shell (scene/shell_body.py): thickness, dynamics, radiation
    static: bool = False               # a prop that never moves (a table): collides and sounds
    vibration: Literal["modes", "plate"] = "modes"   # how it rings: FEM modes, or (a static thin box: a table
                                       # top) a simply supported plate struck where it is hit (sources/plate_prop.py)
    joint: str | None = None           # held to the world: fixed | hinge | ball, at anchor (and axis for hinge)
    anchor: Vec3 | None = None         # world point of the joint, on or in the object [m]
    axis: Vec3 | None = None           # hinge axis, world
    clamp_radius: float | None = None  # fixed joint: radius of the clamped patch around the anchor [m]
    parent: str | None = None          # ball joint to this object instead of the world (a key on its ring)
    fracture_group: str | None = None  # pieces of one pre-fractured object: welded until its first hard impact
    break_speed: float | None = None   # that impact's speed [m/s] (default 1.0)


class PlateSpec(_Strict):
    length: float                      # along x [m]
    width: float                       # along y [m]
    thickness: float                   # [m]
    center: tuple[float, float] = (0.0, 0.0)   # its centre on the ground plane (x, y) [m]


class GroundSpec(_Strict):
    material: str | MaterialSpec = "wood_hard"
    height: float = 0.0
    enabled: bool = True
    model: Literal["half_space", "plate"] = "half_space"   # the floor's sound: Lamb's half-space or a ringing plate
    plate: PlateSpec | None = None     # model = "plate": the simply supported plate (sources/ground/plate.py)
    loss_factor: float = 0.0           # half-space: material loss factor eta (complex moduli E (1 + i eta)); 0 lossless


class ListenerSpec(_Strict):
    name: str = "mic"
    position: Vec3 | None = None       # world [m] (a fixed listener; or give trajectory)
    trajectory: list[list[float]] | str | None = None   # rows [t, x, y, z(, qw, qx, qy, qz)] or a CSV file
    interpolation: str = "linear"     # of the trajectory's positions: linear or spline
    binaural: bool = False            # two ears (channels NAME.L, NAME.R) with a spherical-head shadow
    right_ear: Vec3 = (1.0, 0.0, 0.0)  # direction of the right ear from the head centre (world)


class AirSpec(_Strict):
    c: float = AIR_C
    rho: float = AIR_RHO


class SceneSpec(_Strict):
    duration: float = 3.0
    sample_rate: int = 48000
    seed: int = 0
    sources: list[str] = Field(default_factory=lambda: list(DEFAULT_SOURCES))
    timestep: float = 2e-4
    event_log: str | None = None
    motion: str | None = None          # pose table replacing the rigid-body engine (scene/poses.py)
    quality: Literal["default", "preview"] = "default"
    # older spellings of [source.modal] / [source.acceleration_noise] options (SCENE_OPTION_KEYS)
    modal_order: Any = None
    max_modes: Any = None
    pan_budget: Any = None
    transfer: Any = None
    transfer_max_modes: Any = None
    acceleration_noise: Any = None     # = [source.acceleration_noise] model

    @field_validator("sources")
    @classmethod
    def _known(cls, v):
        from ..sources import registry
        kinds = registry.available(warn=False)
        bad = [s for s in v if s not in kinds]
        if bad:
            why = {b: registry.broken()[b] for b in bad if b in registry.broken()}
            extra = f" (plugins that failed to load: {why})" if why else ""
            raise ValueError(f"unknown source(s) {bad}; available: {list(kinds)}{extra}")
        if len(set(v)) != len(v):
            raise ValueError(f"a source is listed twice in {v}")
        return v


class SceneFile(_Strict):
    scene: SceneSpec = Field(default_factory=SceneSpec)
    air: AirSpec = Field(default_factory=AirSpec)
    ground: GroundSpec = Field(default_factory=GroundSpec)
    listener: list[ListenerSpec] = Field(default_factory=lambda: [ListenerSpec(position=(0.0, -0.5, 0.3))])
    object: list[ObjectSpec] = Field(default_factory=list)
    source: dict[str, dict[str, Any]] = Field(default_factory=dict)   # [source.<kind>] option tables
    granular: GranularSpec | None = None   # grains poured into a container (scene/granular.py)


def _loc(err: dict) -> str:
    out = ""
    for part in err["loc"]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _models_in(annotation) -> list:
    """The pydantic model classes an annotation can hold (list[X], X | None, str | X ...)."""
    import typing
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _model_at(root, loc) -> "type | None":
    """The model class that holds the last key of ``loc`` (a pydantic error location), walking from ``root``."""
    cls = root
    for part in loc:
        if isinstance(part, int) or cls is None:
            continue
        if part in getattr(cls, "model_fields", {}):
            models = _models_in(cls.model_fields[part].annotation)
            cls = models[0] if models else None
        else:                                    # a union member named by its class (str | MaterialSpec)
            cls = next((m for m in _models_in(cls) if m.__name__ == part), cls if part == cls.__name__ else None)
    return cls


def validation_messages(errors: list, root, prefix: str = "") -> list[str]:
    """Pydantic's errors in the scene's words: an unknown key names the closest valid one and lists them all; an
    incomplete inline material says which of its fields are missing (instead of one error per union member).
    ``prefix`` names the table ``root`` validates (e.g. "source.modal"), else the file's top level."""
    import difflib
    out, seen_material = [], set()
    for e in errors:
        loc = list(e["loc"])
        where = _loc({"loc": ([prefix] if prefix else []) + [p for p in loc if p not in ("str", "MaterialSpec")]})
        if e["type"] == "extra_forbidden":
            parent = _model_at(root, loc[:-1])
            valid = sorted(getattr(parent, "model_fields", {}))
            key = str(loc[-1])
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            listed = f" (valid keys: {', '.join(valid)})" if valid else ""
            parent_where = _loc({"loc": ([prefix] if prefix else []) + loc[:-1]}) or "the file's top level"
            out.append(f"{parent_where}: unknown key '{key}'{hint}{listed}")
        elif "MaterialSpec" in loc or ("str" in loc and loc[-1] == "str"):
            mat_where = _loc({"loc": loc[:loc.index("MaterialSpec" if "MaterialSpec" in loc else "str")]})
            if mat_where in seen_material:
                continue
            seen_material.add(mat_where)
            mine = [x for x in errors if list(x["loc"])[:len(loc) - 1] == loc[:-1] or
                    _loc({"loc": [p for p in x["loc"] if p not in ("str", "MaterialSpec")]}).startswith(mat_where)]
            missing = sorted({str(x["loc"][-1]) for x in mine if x["type"] == "missing"})
            other = [f"{_loc({'loc': [p for p in x['loc'] if p not in ('str', 'MaterialSpec')]})}: {x['msg']}"
                     for x in mine if x["type"] not in ("missing", "string_type", "model_type")
                     and "MaterialSpec" in x["loc"]]
            if missing:
                out.append(f"{mat_where}: an inline material needs E [Pa], nu and rho [kg/m^3]; missing: "
                           f"{', '.join(missing)} (or give a material name: `impactsound materials` lists them)")
            out.extend(other)
            if not missing and not other:
                out.append(f"{mat_where}: give a material name (`impactsound materials`) or a table "
                           "{E = ..., nu = ..., rho = ...}")
        else:
            out.append(f"{where}: {e['msg']}")
    return out


def _material(spec, where: str) -> Material:
    if isinstance(spec, str):
        return get_material(spec, where=where)
    d = spec.model_dump()
    return make_material(d.pop("name"), where=where, **d)


def _finite(vals, where):
    arr = np.asarray(vals, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{where} = {list(vals)} contains NaN or infinity")
    return arr


def quat_from_euler_deg(e) -> np.ndarray:
    """Intrinsic x-y-z Euler angles [deg] to a unit quaternion (w, x, y, z)."""
    from scipy.spatial.transform import Rotation
    x, y, z, w = Rotation.from_euler("XYZ", e, degrees=True).as_quat()
    return np.array([w, x, y, z])


def _mesh_object(o: ObjectSpec, where: str, base: Path, material: Material):
    """Load, scale and check an object's mesh file; errors and warnings name the scene file, the field
    (``object[i].mesh``) and the file. Overlapping shells are replaced by the surface of their union, so that
    mass, centre of mass and inertia count the overlap once."""
    from ..mesh.surface import load_surface
    from ..mesh.tetra import union_surface
    field = f"{where}.mesh = '{o.mesh}'"
    path = (base / o.mesh).resolve()
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "not found"
        raise InputError(f"{field}: {path} {what}; mesh paths are relative to the scene file's folder "
                         f"({base.resolve()}): fix the path or add the file")
    if not (math.isfinite(o.scale) and o.scale > 0):
        raise InputError(f"{where}.scale = {o.scale} must be a positive number")
    try:
        mesh = load_surface(path)
    except MeshError as exc:
        raise MeshError(f"{field}: {exc}") from None
    if o.scale != 1.0:
        mesh.apply_scale(o.scale)
    check_surface(mesh, field, density=material.rho, scale=o.scale, warn=not o.static)
    if int(mesh.body_count) > 1:        # shells that touch or overlap (check_surface refuses separate ones)
        mesh = union_surface(mesh, field)
        check_surface(mesh, field, warn=False)
    return mesh, str(path)


def _body(i: int, o: ObjectSpec, base: Path, src: str) -> Body:
    where = f"{src}: object[{i}]" + (f" ({o.name})" if o.name else "")
    material = _material(o.material, where + ".material")
    if (o.shape is None) == (o.mesh is None):
        raise InputError(f"{where}: give exactly one of shape = '<primitive>' or mesh = '<file>'")
    shell = None
    if o.shell is not None:
        mesh, source, shell, mass, inertia, com = _shell_object(o, where, base, material)
    elif o.shape is not None:
        mesh = make_primitive(o.shape, o.size, where)
        source = f"primitive:{o.shape}:{sorted(o.size.items())}"
        # a static prop (a table, a counter) is allowed to be large: no size warning for it
        check_surface(mesh, where, density=material.rho, warn=not o.static)
    else:
        mesh, source = _mesh_object(o, where, base, material)
    pos = _finite(o.position, where + ".position")
    vel = _finite(o.velocity, where + ".velocity")
    omega = _finite(o.angular_velocity, where + ".angular_velocity")
    if o.euler_deg is not None:
        q = quat_from_euler_deg(_finite(o.euler_deg, where + ".euler_deg"))
    else:
        q = _finite(o.rotation, where + ".rotation")
        nq = np.linalg.norm(q)
        if nq < 1e-9:
            raise InputError(f"{where}.rotation = {list(o.rotation)} is not a rotation (zero quaternion)")
        q = q / nq
    if shell is None:
        com = np.asarray(mesh.center_mass, dtype=np.float64)
        body_mesh = mesh.copy()
        body_mesh.apply_translation(-com)
        mass = float(material.rho * body_mesh.volume)
        inertia = np.asarray(body_mesh.moment_inertia, dtype=np.float64) * material.rho  # trimesh: density 1
    else:
        body_mesh = mesh                # already in the body frame (the shell's centre of mass)
    if o.origin not in ("com", "mesh"):
        raise InputError(f"{where}.origin = {o.origin!r}: use 'com' (position is the centre of mass, the default) "
                         "or 'mesh' (position is where the mesh file's origin goes)")
    if o.origin == "mesh":
        # position and velocity are the mesh origin's: the centre of mass sits at R com from it (com in the scaled
        # file's frame) and moves with v + omega x (R com)
        from ..rotation import quat_to_matrix
        arm = quat_to_matrix(q)[0] @ np.asarray(com, np.float64)
        pos = pos + arm
        vel = vel + np.cross(omega, arm)
    transfer = ""
    if o.transfer == "low_order":
        transfer = "low_order"          # this object radiates with the compact model (large props: table tops)
    elif o.transfer is not None:
        tpath = (base / o.transfer).resolve()
        if not tpath.is_file():
            raise InputError(f"{where}.transfer = '{o.transfer}': {tpath} not found; make it with `impactsound "
                             "transfer precompute MODAL_ASSET --out FILE` (the render prints each object's modal "
                             "asset), or remove the line to use the cache / low-order radiation")
        transfer = str(tpath)
    an = ""
    if o.acceleration_noise is not None:
        from ..sources.pan.source import AN_MODELS
        if o.acceleration_noise not in AN_MODELS:
            raise InputError(f"{where}.acceleration_noise = {o.acceleration_noise!r} is unknown; use one of "
                             f"{', '.join(repr(m) for m in AN_MODELS)} (or leave it out for the scene's model)")
        an = o.acceleration_noise
    mount = _mount(o, where, body_mesh, pos, q, vel, omega)
    from ..assets import content_hash
    mh = content_hash(np.asarray(body_mesh.vertices, np.float64), np.asarray(body_mesh.faces, np.int64))
    group, break_speed = "", 0.0
    if o.fracture_group is not None:
        if mount is not None:
            raise InputError(f"{where}: a piece of fracture_group = '{o.fracture_group}' must be a free object "
                             "(no static or joint)")
        break_speed = 1.0 if o.break_speed is None else float(o.break_speed)
        if not (math.isfinite(break_speed) and break_speed > 0):
            raise InputError(f"{where}.break_speed = {o.break_speed} m/s must be positive")
        group = str(o.fracture_group)
    elif o.break_speed is not None:
        raise InputError(f"{where}.break_speed needs fracture_group = '...' (the pieces it breaks apart)")
    plate, top = _plate_prop(o, where, pos, q, material) if o.vibration == "plate" else (None, 0.0)
    return Body(group=group, break_speed=break_speed, mount=mount, name=o.name or f"object{i}", mesh=body_mesh, material=material, mass=mass, inertia=inertia,
                position=pos, quaternion=q, velocity=vel, angular_velocity=omega, mesh_hash=mh, source=source,
                com_in_file=com, transfer_asset=transfer, acceleration_noise=an, shell=shell, origin=o.origin,
                plate=plate, plate_top=top)


def _plate_prop(o: ObjectSpec, where: str, pos, q, material):
    """vibration = "plate": a static thin box lying flat (a table top) rings as a simply supported plate of its
    size and material (sources/plate_prop.py). Returns (PlateFloor, height of its top face [m])."""
    if not o.static:
        raise InputError(f"{where}.vibration = \"plate\" is for a static prop (a table top): add static = true, "
                         "or use vibration = \"modes\"")
    if o.shape != "box":
        raise InputError(f"{where}.vibration = \"plate\" needs shape = \"box\" (a thin slab lying flat), not "
                         f"{o.shape or 'a mesh'}")
    if abs(abs(float(q[0])) - 1.0) > 1e-9:
        raise InputError(f"{where}.vibration = \"plate\": the box must lie flat and unrotated (its sides along x "
                         "and y); remove its rotation")
    lx, ly, lz = (float(v) for v in make_primitive("box", o.size, where).extents)
    if lz > 0.1 * min(lx, ly):
        raise InputError(f"{where}.vibration = \"plate\": the box is {lz:g} m thick, more than a tenth of its "
                         f"smaller side ({min(lx, ly):g} m): not a thin plate (z is its thickness)")
    from ..sources.ground.plate import PlateFloor
    return PlateFloor(lx, ly, lz, (float(pos[0]), float(pos[1])), material), float(pos[2]) + 0.5 * lz


#: default clamp radius of a fixed joint, as a fraction of the object's bounding diameter
CLAMP_FRACTION = 0.02
#: how far a joint's anchor may lie outside the object's surface, as a fraction of its bounding radius
ANCHOR_TOL = 0.05


def _mount(o: ObjectSpec, where: str, mesh, pos, q, vel, omega):
    """The Mount of a static or jointed object, checked (scene/model.py), or None for a free one."""
    from .model import Mount
    if o.parent is not None and o.joint != "ball":
        raise InputError(f"{where}.parent = '{o.parent}' needs joint = 'ball' (a body tied to another object swings "
                         "freely about the shared anchor)")
    if not o.static and o.joint is None:
        for key in ("anchor", "axis", "clamp_radius"):
            if getattr(o, key) is not None:
                raise InputError(f"{where}.{key} is given but the object has no joint; add joint = 'fixed', "
                                 "'hinge' or 'ball', or remove the line")
        return None
    if o.static and o.joint is not None:
        raise InputError(f"{where}: give static = true (a prop that never moves) or joint = '{o.joint}', not both")
    if o.static:
        if o.anchor is not None or o.axis is not None or o.clamp_radius is not None:
            raise InputError(f"{where}: a static object takes no anchor, axis or clamp_radius (it never moves and "
                             "rings with its free modes); remove them")
        if np.any(vel) or np.any(omega):
            raise InputError(f"{where}: a static object cannot move: remove its velocity / angular_velocity")
        return Mount("static")
    if o.joint not in ("fixed", "hinge", "ball"):
        raise InputError(f"{where}.joint = {o.joint!r} is unknown; use 'fixed', 'hinge' or 'ball' (or static = "
                         "true for a prop that never moves)")
    if o.anchor is None:
        raise InputError(f"{where}: joint = '{o.joint}' needs anchor = [x, y, z], the world point where it is held")
    anchor = _finite(o.anchor, f"{where}.anchor")
    from ..rotation import quat_to_matrix
    R = quat_to_matrix(q)[0]
    a_b = R.T @ (anchor - pos)
    radius = float(np.linalg.norm(mesh.vertices, axis=1).max())
    inside = bool(mesh.contains(a_b[None])[0])
    if not inside:
        import trimesh
        d = float(np.abs(trimesh.proximity.signed_distance(mesh, a_b[None])[0]))
        if d > ANCHOR_TOL * radius:
            raise InputError(f"{where}.anchor = {list(o.anchor)} is {d:.3g} m outside the object (its surface is "
                             f"within {ANCHOR_TOL * radius:.2g} m of a valid anchor): put the anchor on or in the "
                             "object where it is held (a bell: the top of its crown, a cymbal: its centre hole)")
    axis = None
    if o.joint == "hinge":
        if o.axis is None:
            raise InputError(f"{where}: joint = 'hinge' needs axis = [x, y, z], the world direction it turns about")
        axis = _finite(o.axis, f"{where}.axis")
        if np.linalg.norm(axis) == 0:
            raise InputError(f"{where}.axis must be a non-zero direction")
        axis = axis / np.linalg.norm(axis)
    elif o.axis is not None:
        raise InputError(f"{where}.axis is only for joint = 'hinge'; remove it")
    if np.any(vel) and o.parent is None:
        raise InputError(f"{where}: a jointed object's anchor stays put: remove its velocity (give it an "
                         "angular_velocity instead)")
    if o.joint == "fixed" and np.any(omega):
        raise InputError(f"{where}: joint = 'fixed' cannot turn: remove its angular_velocity")
    clamp = 0.0
    if o.joint == "fixed":
        # default: 2 % of the object's size (a 50 cm cymbal: a 1 cm clamp, about its stand's felts and washer)
        clamp = CLAMP_FRACTION * 2 * radius if o.clamp_radius is None else float(o.clamp_radius)
        if not (math.isfinite(clamp) and 0 < clamp < radius):
            raise InputError(f"{where}.clamp_radius = {o.clamp_radius} m must be positive and smaller than the "
                             f"object ({radius:.3g} m)")
    elif o.clamp_radius is not None:
        raise InputError(f"{where}.clamp_radius is only for joint = 'fixed' (hinge, ball and static objects ring "
                         "with free modes); remove it")
    if o.joint == "hinge" and np.linalg.norm(np.cross(omega, axis)) > 1e-9 * max(1.0, np.linalg.norm(omega)):
        raise InputError(f"{where}: a hinge turns about its axis only: give angular_velocity along axis = "
                         f"{[float(v) for v in axis]}")
    return Mount(o.joint, anchor, axis, clamp)


def _tie_to_parent(i: int, o: ObjectSpec, bodies, names, src: str) -> None:
    """A ball joint to another object: the parent must be a free object and the anchor on or in it too."""
    where = f"{src}: object[{i}] ({bodies[i].name}).parent = '{o.parent}'"
    if o.parent not in names:
        raise InputError(f"{where}: no object of that name; objects: {names}")
    k = names.index(o.parent)
    if k == i:
        raise InputError(f"{where}: an object cannot hang from itself")
    parent = bodies[k]
    if parent.mount is not None or parent.group:
        raise InputError(f"{where}: the parent must be a free object (not static, jointed or a fracture piece)")
    from ..rotation import quat_to_matrix
    R = quat_to_matrix(parent.quaternion)[0]
    a_b = R.T @ (bodies[i].mount.anchor - parent.position)
    radius = float(np.linalg.norm(parent.mesh.vertices, axis=1).max())
    if not bool(parent.mesh.contains(a_b[None])[0]):
        import trimesh
        d = float(np.abs(trimesh.proximity.signed_distance(parent.mesh, a_b[None])[0]))
        if d > ANCHOR_TOL * radius + 1e-3:
            raise InputError(f"{where}: the anchor {list(o.anchor)} is {d:.3g} m from '{o.parent}'; put it where "
                             "the two objects meet (a key's hole on its ring's wire)")
    bodies[i].mount.parent = k


def _shell_object(o: ObjectSpec, where: str, base: Path, material: Material):
    """A thin-shell object (scene/shell_body.py): (collision mesh in the body frame, source text, ShellSetup,
    mass [kg], inertia (3, 3) [kg m^2], centre of mass in the mesh's coordinates)."""
    from ..assets import content_hash
    from .shell_body import ShellSetup, shell_body_geometry, shell_surface
    if o.transfer is not None:
        raise InputError(f"{where}.transfer: FFAT transfer assets are for solid modal models; a shell radiates "
                         "through its shell.radiation option (remove transfer = ...)")
    if o.mesh is not None and o.shell.resolution is not None:
        raise InputError(f"{where}.shell.resolution is for built-in shapes; a mesh file is used as stored "
                         "(remesh it to refine it)")
    V, F, source = shell_surface(o.shape, o.size, None if o.mesh is None else (base / o.mesh).resolve(),
                                 o.scale, o.shell, where, material)
    spec = o.shell
    if spec.bending is None:
        # the built-in shapes' meshes pass the patch test, where the paper's flap bending converges; a user's mesh
        # need not, and there only mid-edge bending does (shell_body.ShellSpec.bending)
        spec = spec.model_copy(update={"bending": "flap" if o.mesh is None else "midedge"})
    Vb, F, coll, mass, inertia, com = shell_body_geometry(V, F, spec, material, where)
    setup = ShellSetup(vertices=Vb, faces=F, thickness=float(o.shell.thickness), spec=spec, source=source,
                       surface_hash=content_hash(Vb, F), shape=o.shape, size=dict(o.size or {}), com=com)
    return coll, source, setup, mass, inertia, com


def _plate_floor(g: GroundSpec, material: Material, src: str):
    """The ground's plate (sources/ground/plate.py) for ``model = "plate"``, checked; None for a half-space."""
    if g.model != "plate":
        if g.plate is not None:
            raise InputError(f"{src}: ground.plate is given but ground.model = {g.model!r}; set ground.model = "
                             "\"plate\" to use it, or remove [ground.plate]")
        return None
    if g.plate is None:
        raise InputError(f"{src}: ground.model = \"plate\" needs a [ground.plate] table: length, width, "
                         "thickness [m] (and center = [x, y])")
    p = g.plate
    for k in ("length", "width", "thickness"):
        v = getattr(p, k)
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"{src}: ground.plate.{k} = {v} must be a positive length [m]")
    if not all(math.isfinite(v) for v in p.center):
        raise InputError(f"{src}: ground.plate.center = {list(p.center)} must be finite [m]")
    if p.thickness > 0.1 * min(p.length, p.width):
        raise InputError(f"{src}: ground.plate.thickness = {p.thickness:g} m is more than a tenth of its smaller "
                         f"side ({min(p.length, p.width):g} m): not a thin plate; check the units, or use "
                         "ground.model = \"half_space\"")
    from ..sources.ground.plate import PlateFloor
    return PlateFloor(float(p.length), float(p.width), float(p.thickness), tuple(float(c) for c in p.center),
                      material)


def parse_scene(data: dict, base: Path = Path("."), src: str = "<scene>") -> Scene:
    """Validate a scene dict (as read from TOML) and build the :class:`Scene`. Bodies may come from an MJCF or
    URDF file named by ``[scene] bodies`` (scene/model_import.py)."""
    data = expand_model_bodies(data, base, src)
    try:
        sf = SceneFile.model_validate(data)
    except ValidationError as exc:
        msgs = validation_messages(exc.errors(), SceneFile)
        more = f" (and {len(msgs) - 5} more)" if len(msgs) > 5 else ""
        raise InputError(f"{src}: invalid scene: " + "; ".join(msgs[:5]) + more) from None
    s = sf.scene
    if not (math.isfinite(s.duration) and s.duration > 0):
        raise InputError(f"{src}: scene.duration = {s.duration} s must be positive")
    if s.duration > MAX_DURATION_S:
        # rendering streams in time blocks (memory bounded by a block), but the rigid-body engine keeps a pose
        # record of every body at 1 kHz (56 kB per body per scene second) and runs at ~10x real time per body:
        # a day-long duration is a typo more often than a plan
        raise InputError(f"{src}: scene.duration = {s.duration} s is over the {MAX_DURATION_S:g} s limit (one "
                         "hour); split the scene, or check the units (seconds)")
    if s.sample_rate < 8000:
        raise InputError(f"{src}: scene.sample_rate = {s.sample_rate} Hz is below 8000 Hz; use 48000")
    if s.sample_rate > 384000:
        raise InputError(f"{src}: scene.sample_rate = {s.sample_rate} Hz is above 384000 Hz")
    if not (math.isfinite(s.timestep) and 0 < s.timestep <= 0.01):
        raise InputError(f"{src}: scene.timestep = {s.timestep} s must lie in (0, 0.01]; 2e-4 is a good value")
    sources = tuple(s.sources)
    if sf.granular is not None and "sources" not in s.model_fields_set:
        sources += GRANULAR_SOURCES if sf.granular.container else GRANULAR_SOURCES[:1]
        sf.scene.sources = list(sources)
    if any(o.shell is not None for o in sf.object) and "sources" not in s.model_fields_set:
        sources += (SHELL_SOURCE,)                  # thin shells sound through their own source
        sf.scene.sources = list(sources)
    if any(o.vibration == "plate" for o in sf.object) and "sources" not in s.model_fields_set:
        sources += ("plate",)                       # plate props ring through their own source
        sf.scene.sources = list(sources)
    plates = [o.name or f"object{i}" for i, o in enumerate(sf.object) if o.vibration == "plate"]
    if plates and "plate" not in sources:
        raise InputError(f"{src}: object {plates[0]!r} has vibration = \"plate\" but [scene] sources has no "
                         "\"plate\": add it, or it would be silent")
    if sf.granular is None and set(sources) & set(GRANULAR_SOURCES):
        raise InputError(f"{src}: sources {sorted(set(sources) & set(GRANULAR_SOURCES))} need a [granular] table "
                         "(the grains and their container; docs/granular.md)")
    options = source_options(sf, src)
    if not sf.listener:
        raise InputError(f"{src}: the scene needs at least one [[listener]] with a position")
    if not sf.object:
        raise InputError(f"{src}: the scene has no [[object]]; add at least one")
    if s.motion and s.event_log:
        raise InputError(f"{src}: [scene] gives both motion = '{s.motion}' and event_log = '{s.event_log}'; give "
                         "one (a pose table whose contacts are inferred, or the contact events themselves)")
    if s.motion and not (base / s.motion).is_file():
        raise InputError(f"{src}: [scene] motion = '{s.motion}': {(base / s.motion).resolve()} not found (the path "
                         "is relative to the scene file)")
    air = Air(c=sf.air.c, rho=sf.air.rho)
    if not (air.c > 0 and air.rho > 0 and math.isfinite(air.c) and math.isfinite(air.rho)):
        raise InputError(f"{src}: air.c and air.rho must be positive")
    ground = Ground(material=_material(sf.ground.material, f"{src}: ground.material"),
                    height=float(_finite([sf.ground.height], f"{src}: ground.height")[0]),
                    enabled=sf.ground.enabled)
    eta = sf.ground.loss_factor
    if not (math.isfinite(eta) and 0.0 <= eta < 1.0):
        raise InputError(f"{src}: ground.loss_factor = {eta} must lie in [0, 1) (a floor's material loss factor: "
                         "concrete ~0.01-0.02, wood ~0.01-0.05, soils ~0.05-0.2; 0 for the lossless half-space)")
    if eta > 0 and sf.ground.model != "half_space":
        raise InputError(f"{src}: ground.loss_factor is the half-space's damping; the plate floor is damped by its "
                         "material's alpha and beta")
    ground.loss_factor = float(eta)
    ground.plate = _plate_floor(sf.ground, ground.material, src)
    bodies = [_body(i, o, base, src) for i, o in enumerate(sf.object)]
    names = [b.name for b in bodies]
    for i, o in enumerate(sf.object):
        if o.parent is not None:
            _tie_to_parent(i, o, bodies, names, src)
    groups = {}
    for b in bodies:
        if b.group:
            groups.setdefault(b.group, []).append(b)
    for g, members in groups.items():
        if len(members) < 2:
            raise InputError(f"{src}: fracture_group = '{g}' has one piece ({members[0].name}); a pre-fractured "
                             "object needs at least two")
        if len({m.break_speed for m in members}) > 1:
            raise InputError(f"{src}: the pieces of fracture_group = '{g}' give different break_speed values; give "
                             "one")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"{src}: object names must be unique; repeated: {sorted(dup)}")
    listeners = []
    for i, l in enumerate(sf.listener):
        listeners += _listener_channels(i, l, base, src)
    moving = [l.name for l in listeners if l.moves]
    if moving and set(sources) & set(GRANULAR_SOURCES):
        raise InputError(f"{src}: listener(s) {moving} move, but the sources {sorted(set(sources) & set(GRANULAR_SOURCES))} "
                         "render for fixed listeners only; give the [[listener]] a position instead of a trajectory")
    granular = None if sf.granular is None else parse_granular(sf.granular, base, src, names, _material)
    scene = Scene(bodies=bodies, ground=ground, listeners=listeners, duration=float(s.duration),
                  sample_rate=int(s.sample_rate), seed=int(s.seed), sources=sources, air=air,
                  timestep=float(s.timestep), event_log=str((base / s.event_log).resolve()) if s.event_log
                  else None, motion=str((base / s.motion).resolve()) if s.motion else None, options=options, path=src, granular=granular, quality=str(s.quality))
    _check_listeners(scene)
    return scene


def _listener_channels(i: int, l: ListenerSpec, base: Path, src: str) -> list[Listener]:
    """The channels of one [[listener]]: a microphone, or two ears; fixed or along a trajectory."""
    from .trajectory import parse_trajectory
    where = f"{src}: listener[{i}]"
    traj = None
    if (l.position is None) == (l.trajectory is None):
        raise InputError(f"{where}: give exactly one of position = [x, y, z] (a fixed listener) or trajectory = "
                         "[[t, x, y, z], ...] / 'path.csv' (a moving one)")
    if l.trajectory is not None:
        traj = parse_trajectory(l.trajectory, f"{where}.trajectory", base, l.interpolation)
        p = traj.position_at(np.zeros(1))[0]
    else:
        p = _finite(l.position, f"{where}.position")
    R0 = np.eye(3)
    if traj is not None and traj.quaternion is not None:
        from ..rotation import quat_to_matrix
        R0 = quat_to_matrix(traj.quaternion_at(np.zeros(1)))[0]
    if not l.binaural:
        return [Listener(l.name, p, trajectory=traj)]
    ax = _finite(l.right_ear, f"{where}.right_ear")
    if np.linalg.norm(ax) == 0:
        raise InputError(f"{where}.right_ear must be a non-zero direction")
    ax = ax / np.linalg.norm(ax)
    # ears on the head's surface (Brown & Duda head radius), one channel each (transfer/hrtf.py); right_ear is
    # the head frame's axis: the world axis while the head is unrotated
    from ..transfer.hrtf import HEAD_RADIUS
    out = []
    for suffix, sign in (("L", -1.0), ("R", 1.0)):
        off = sign * HEAD_RADIUS * ax
        out.append(Listener(f"{l.name}.{suffix}", p + R0 @ off, R0 @ (sign * ax), trajectory=traj, offset=off,
                            ear0=sign * ax))
    return out


def source_options(sf: SceneFile, src: str) -> dict:
    """Validate the ``[source.<kind>]`` tables (and the older ``[scene]`` spellings of the built-in sources'
    options) against each registered kind's options model: {kind: options object} for every kind the scene
    renders, defaults where the scene says nothing."""
    from ..sources import registry
    tables = {k: dict(v) for k, v in sf.source.items()}
    for key, (kind, opt) in SCENE_OPTION_KEYS.items():
        val = getattr(sf.scene, key)
        if val is None:
            continue
        if opt in tables.get(kind, {}):
            raise InputError(f"{src}: scene.{key} and source.{kind}.{opt} both set; keep one (the [source.{kind}] "
                             "table is the current spelling)")
        tables.setdefault(kind, {})[opt] = val
    out = {}
    for kind in sorted(set(tables) | set(sf.scene.sources)):
        spec = registry.get(kind, where=f"{src}: [source.{kind}]")
        try:
            out[kind] = spec.options.model_validate(tables.get(kind, {}))
        except ValidationError as exc:
            errs = exc.errors()
            msgs = validation_messages(errs, spec.options, prefix=f"source.{kind}")[:5]
            raise InputError(f"{src}: invalid scene: " + "; ".join(msgs)) from None
    return out


def _check_listeners(scene: Scene) -> None:
    """A listener inside an object (at its initial pose) or below the ground hears nothing physical: reject it. A
    moving listener is checked along its path (every 10 ms and at each trajectory sample)."""
    from ..rotation import quat_to_matrix
    for li, l in enumerate(scene.listeners):
        if l.moves:
            t = np.union1d(np.arange(0.0, scene.duration, 0.01), l.trajectory.t[l.trajectory.t <= scene.duration])
        else:
            t = np.zeros(1)
        P = l.position_at(t)
        moving = " on its trajectory at t = {:.4g} s" if l.moves else ""
        below = np.flatnonzero(P[:, 2] < scene.ground.height) if scene.ground.enabled else []
        if len(below):
            k = int(below[0])
            raise InputError(f"{scene.path}: listener[{li}] ({l.name}) is below the ground{moving.format(t[k])} "
                             f"(z = {P[k, 2]:.4g} < {scene.ground.height}); keep it above z = "
                             f"{scene.ground.height}")
        for b in scene.bodies:
            R = quat_to_matrix(b.quaternion)[0]
            xb = (P - b.position) @ R
            near = np.linalg.norm(xb, axis=1) <= np.linalg.norm(b.mesh.vertices, axis=1).max()
            if near.any():
                inside = np.flatnonzero(near)[b.mesh.contains(xb[near])]
                if len(inside):
                    k = int(inside[0])
                    raise InputError(f"{scene.path}: listener[{li}] ({l.name}) at {[float(v) for v in P[k]]} is "
                                     f"inside object {b.name!r}{moving.format(t[k])}; move it outside")


def load_scene(scene: str | Path | dict, base: str | Path = ".") -> Scene:
    """Read and validate a scene.

    Parameters
    ----------
    scene : str, Path or dict
        A scene TOML file (SI units; the format is in docs/scene-format.md), or the same content as a dict (as
        ``tomllib`` would read it; mesh, event-log and transfer paths in it are relative to ``base``).
    base : str or Path
        Folder that relative paths in a dict scene are relative to (a file's own folder for a file).

    Returns
    -------
    Scene
    """
    if isinstance(scene, dict):
        return parse_scene(scene, base=Path(base), src="<scene dict>")
    path = Path(scene)
    return parse_scene(read_toml(path, "scene file"), base=path.parent, src=str(path))


def read_toml(path: str | Path, what: str = "file") -> dict:
    """A TOML file's content; a missing file, invalid TOML or binary content is an :class:`InputError` naming
    the file (``what`` says what it should be: "scene file", "plan file")."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: {what} not found")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None


#: longest scene [s] (see the check in load_scene)
MAX_DURATION_S = 3600.0


def demo_scene_path() -> Path:
    from importlib import resources
    return Path(str(resources.files("impactsound").joinpath("data/demo.toml")))
