"""Scene bodies from an MJCF or URDF file, loaded with MuJoCo's own loader.

MuJoCo resolves everything the file format allows (includes, defaults, compiler settings, mesh scale, ``fromto``,
URDF fixed-joint fusing); this module only reads the compiled ``MjModel`` and turns each free body into one
``[[object]]`` table of the scene format (docs/scene-format.md, "Bodies from an MJCF or URDF file"):

* a free body is a body with a free joint, together with the bodies welded to it (children without joints). For a
  URDF, MuJoCo fixes root links to the world; here a root link floats (as in most URDF object files and
  simulators), unless it hangs from a link named ``world`` by a fixed joint. A URDF ``floating`` joint is a free
  joint in MuJoCo.
* its geometry is its collision geoms (``contype`` or ``conaffinity`` non-zero), or all its geoms if none collides
  (a URDF's visual elements, when kept with ``<mujoco><compiler discardvisual="false"/></mujoco>``, do not).
  One sphere, box, cylinder or capsule becomes ``shape`` + ``size``; anything else (a mesh, an ellipsoid, several
  geoms) becomes a watertight OBJ in the asset cache (``model_meshes/``, keyed by content), several geoms being
  united into one solid (they must touch or overlap).
* its pose and velocity are MuJoCo's at ``qpos0`` (or a keyframe) after ``mj_forward``. The scene's ``position``
  is the world position of the centre of mass of the object's mesh at uniform density, so it is the frame origin
  plus the rotated mesh centre of mass, which equals MuJoCo's ``xipos`` when MuJoCo's inertia also comes from the
  geoms (masses and inertias in the file are not used: ours come from the geometry and the material density).
* a plane in the world (normal +z) is the scene's ground; other colliding geoms fixed to the world become static
  objects (``static = true``: one per body welded to the world, one per geom of the world body itself); a body
  hanging from the world by one hinge or ball joint becomes a jointed object (``joint``, with the joint's world
  ``anchor`` and hinge ``axis``). Bodies on slide joints, or jointed to another moving body, are refused unless
  none of their geoms collides (then they are ignored).
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import ImpactSoundError, InputError

MESH_CACHE_VERSION = 1
_PRIMITIVE = {2: "sphere", 3: "capsule", 5: "cylinder", 6: "box"}   # mjtGeom value -> our primitive
_PLANE, _ELLIPSOID, _MESH = 0, 4, 7
_GEOM_NAMES = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box",
               7: "mesh", 8: "sdf"}
_MODEL_KEYS = ("bodies", "bodies_keyframe")   # [scene] keys this module consumes


class ModelBodies(NamedTuple):
    objects: list[dict]          # [[object]] tables, in MuJoCo's body order
    ground: dict | None          # {"height": z} (+ "material") from a ground plane in the file, else None


def _one_line(exc: Exception) -> str:
    return "; ".join(s.strip() for s in str(exc).splitlines() if s.strip())


def _urdf_free_roots(path: Path) -> list[str] | None:
    """Root links of a URDF file that float (None if the file is not a URDF)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None          # MuJoCo reports the problem
    if root.tag != "robot":
        return None
    children = {j.find("child").get("link") for j in root.findall("joint") if j.find("child") is not None}
    return [l.get("name") for l in root.findall("link") if l.get("name") not in children and l.get("name") != "world"]


def _resolve_package(spec, path: Path, where: str) -> None:
    """URDF ``package://PKG/REST`` mesh paths (which MuJoCo cannot open): PKG/REST or REST in a folder named PKG,
    next to the URDF file or above it, else the file name in the compiler's ``meshdir``."""
    for mesh in spec.meshes:
        if not mesh.file.startswith("package://"):
            continue
        pkg, _, rest = mesh.file[len("package://"):].partition("/")
        looked = []
        # the last try: the file name in the compiler's meshdir (what older MuJoCo versions did)
        in_meshdir = [path.parent / spec.meshdir / Path(rest).name] if spec.meshdir else []
        for folder in [*[path.parent, *path.parent.parents][:6], None]:
            cands = in_meshdir if folder is None else [folder / pkg / rest] + ([folder / rest]
                                                                                if folder.name == pkg else [])
            for cand in cands:
                looked.append(str(cand))
                if cand.is_file():
                    mesh.file = str(cand)
                    break
            else:
                continue
            break
        else:
            raise InputError(f"{where}: mesh '{mesh.file}': no package '{pkg}' holding '{rest}' next to or above "
                             f"{path} (looked at {', '.join(looked[:3])} ...); write the path relative to the "
                             f"URDF file instead")


def _compile(path: Path, where: str, keyframe: str | None):
    import mujoco

    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        raise InputError(f"{where}: MuJoCo could not read {path}: {_one_line(exc)}") from None
    roots = _urdf_free_roots(path)
    if roots is not None:
        _resolve_package(spec, path, where)
        for name in roots:
            body = spec.body(name)
            if body is not None and len(body.joints) == 0:
                body.add_freejoint()
    try:
        model = spec.compile()
    except ValueError as exc:
        raise InputError(f"{where}: MuJoCo could not load {path}: {_one_line(exc)}") from None
    data = mujoco.MjData(model)
    if keyframe is not None:
        try:
            key = model.key(keyframe).id
        except KeyError:
            names = [model.key(i).name for i in range(model.nkey)]
            raise InputError(f"{where}: no keyframe '{keyframe}' in {path}; keyframes: {names or 'none'}") from None
        mujoco.mj_resetDataKeyframe(model, data, key)
    mujoco.mj_forward(model, data)
    return model, data


def _mat2quat(R: np.ndarray) -> np.ndarray:
    import mujoco
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).ravel())
    return q / np.linalg.norm(q)


def _primitive_size(gtype: int, s: np.ndarray) -> dict:
    if gtype == 2:
        return {"radius": float(s[0])}
    if gtype == 6:                      # MuJoCo: half-sizes; ours: full edge lengths
        return {"size": [float(2 * s[0]), float(2 * s[1]), float(2 * s[2])]}
    return {"radius": float(s[0]), "height": float(2 * s[1])}    # cylinder, capsule: half-length in MuJoCo


def _geom_mesh(model, g: int, where: str):
    """Geom ``g``'s solid as a trimesh in the geom frame."""
    import trimesh

    from .primitives import make_primitive
    t = int(model.geom_type[g])
    if t in _PRIMITIVE:
        return make_primitive(_PRIMITIVE[t], _primitive_size(t, model.geom_size[g]), where)
    if t == _ELLIPSOID:
        m = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
        m.apply_scale(np.asarray(model.geom_size[g], dtype=np.float64))
        return m
    if t == _MESH:
        k = int(model.geom_dataid[g])
        va, vn = int(model.mesh_vertadr[k]), int(model.mesh_vertnum[k])
        fa, fn = int(model.mesh_faceadr[k]), int(model.mesh_facenum[k])
        v = np.asarray(model.mesh_vert[va:va + vn], dtype=np.float64)
        f = np.asarray(model.mesh_face[fa:fa + fn], dtype=np.int64)
        return trimesh.Trimesh(v, f, process=True)
    raise InputError(f"{where}: geom type '{_GEOM_NAMES.get(t, t)}' is not supported in a free body (use a sphere, "
                     f"box, cylinder, capsule, ellipsoid or mesh geom)")


def _write_obj(mesh, path: Path) -> None:
    lines = [f"v {x:.17g} {y:.17g} {z:.17g}" for x, y, z in np.asarray(mesh.vertices, dtype=np.float64)]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in np.asarray(mesh.faces, dtype=np.int64)]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _cached_mesh(mesh, where: str, hint: str = ""):
    """Check ``mesh`` (one solid; overlapping shells are united), write it to the asset cache; returns the file and
    the mesh as the scene loader will read it back. ``hint`` ends the message of a MeshError."""
    from ..assets import cache_dir, content_hash
    from ..mesh.surface import check_surface, load_surface, merge_seams
    from ..mesh.tetra import union_surface

    v = np.asarray(mesh.vertices, dtype=np.float64)
    f = np.asarray(mesh.faces, dtype=np.int64)
    folder = cache_dir() / "model_meshes"
    folder.mkdir(exist_ok=True)
    path = folder / f"{content_hash('model_import_mesh', MESH_CACHE_VERSION, v, f)[:32]}.obj"
    if not path.is_file():
        mesh = merge_seams(mesh)
        try:
            check_surface(mesh, where, warn=False)
            if int(mesh.body_count) > 1:      # shells that touch or overlap (apart ones are refused above)
                mesh = union_surface(mesh, where)
                check_surface(mesh, where, warn=False)
        except ImpactSoundError as exc:
            raise InputError(f"{exc}{hint}") from None
        _write_obj(mesh, path)
    return path, load_surface(path)


def _material_value(value: Any, where: str):
    """A [materials] entry checked now, so that errors name it: a material name or a table of constants."""
    from pydantic import ValidationError

    from ..materials import get_material, make_material
    from .schema import MaterialSpec
    if isinstance(value, str):
        get_material(value, where=where)
        return value
    if isinstance(value, dict):
        try:
            d = MaterialSpec.model_validate(value).model_dump()
        except ValidationError as exc:
            msgs = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]]
            raise InputError(f"{where}: {'; '.join(msgs)}; a material table needs E, nu, rho (SI) and may have "
                             "alpha, beta, gamma, friction, restitution, name") from None
        make_material(d.pop("name"), where=where, **d)
        return dict(value)
    raise InputError(f"{where} = {value!r}: give a material name (see `impactsound materials`) or a table "
                     "{E = ..., nu = ..., rho = ...}")


def _geom_label(model, g: int) -> str:
    name = model.geom(g).name
    return f"geom '{name}'" if name else f"geom #{g}"


def _body_name(model, b: int) -> str:
    return model.body(b).name or f"body{b}"


def _geometry(model, data, r: int, geoms: list[int], obj: dict, where: str):
    """Put free body ``r``'s geometry (``geoms``) into ``obj`` (shape + size, or mesh); returns the world pose
    (p, R) of the frame it is given in and its centre of mass in that frame."""
    import trimesh

    if len(geoms) == 1 and int(model.geom_type[geoms[0]]) in _PRIMITIVE:
        g = geoms[0]
        t = int(model.geom_type[g])
        obj.update(shape=_PRIMITIVE[t], size=_primitive_size(t, model.geom_size[g]))
        com = np.asarray(_geom_mesh(model, g, where).center_mass, dtype=np.float64)
        return np.array(data.geom_xpos[g]), np.array(data.geom_xmat[g]).reshape(3, 3), com
    # one geom: its own frame, so that the same mesh in any pose shares its cache file; several: the body's frame
    f = geoms[0] if len(geoms) == 1 else None
    p_f = np.array(data.geom_xpos[f] if f is not None else data.xpos[r])
    R_f = np.array(data.geom_xmat[f] if f is not None else data.xmat[r]).reshape(3, 3)
    parts = []
    for g in geoms:
        m = _geom_mesh(model, g, f"{where}, {_geom_label(model, g)}")
        T = np.eye(4)
        T[:3, :3] = R_f.T @ np.asarray(data.geom_xmat[g]).reshape(3, 3)
        T[:3, 3] = R_f.T @ (np.asarray(data.geom_xpos[g]) - p_f)
        m.apply_transform(T)
        parts.append(m)
    if len(parts) == 1:
        file, loaded = _cached_mesh(parts[0], where)
    else:
        file, loaded = _cached_mesh(trimesh.util.concatenate(parts), f"{where} ({len(geoms)} geoms)",
                                    "; in the model file: make the body's geoms touch or overlap, or give each "
                                    "part its own <freejoint/> body")
    obj["mesh"] = str(file)
    return p_f, R_f, np.asarray(loaded.center_mass, dtype=np.float64)


def objects_from_model_file(path, materials: dict, *, default_material=None, where: str | None = None,
                            materials_where: str = "materials", keyframe: str | None = None) -> ModelBodies:
    """``[[object]]`` tables for the free bodies of an MJCF or URDF file, and its ground plane.

    ``materials`` maps body names (MuJoCo's; an unnamed body is ``body<N>`` with N its MuJoCo id) to a material
    name or a table of constants; ``default_material`` serves the bodies not listed; a key naming the ground plane
    geom gives the ground's material. ``where`` prefixes errors about the file (default: its path),
    ``materials_where`` those about ``materials``. ``keyframe``: the name of a keyframe to take the initial
    positions and velocities from (default: ``qpos0`` at rest). Returns ``ModelBodies(objects, ground)``.
    """
    import mujoco

    path = Path(path).resolve()
    where = where or str(path)
    if not path.is_file():
        raise InputError(f"{where}: {path} {'is a folder' if path.is_dir() else 'not found'}; give an MJCF (.xml) "
                         "or URDF (.urdf) file, relative to the scene file")
    model, data = _compile(path, where, keyframe)
    free = mujoco.mjtJoint.mjJNT_FREE
    weld = np.asarray(model.body_weldid)
    collides = (np.asarray(model.geom_contype) != 0) | (np.asarray(model.geom_conaffinity) != 0)
    is_free = [model.body_jntnum[b] > 0 and model.jnt_type[model.body_jntadr[b]] == free for b in range(model.nbody)]
    groups: dict[int, list[int]] = {}
    for g in range(model.ngeom):
        groups.setdefault(int(weld[model.geom_bodyid[g]]), []).append(g)

    ground, plane_name = None, None
    static: dict[str, tuple[int, list[int]]] = {}    # name -> (frame body, geoms): static props
    for g in groups.get(0, []):           # fixed to the world
        if not collides[g]:
            continue
        b = int(model.geom_bodyid[g])
        if int(model.geom_type[g]) != _PLANE:
            # static geometry (a table, a shelf): one static object per welded body, one per world-body geom
            label = _body_name(model, b) if b != 0 else (model.geom(g).name or f"static{g}")
            static.setdefault(label, (b, []))[1].append(g)
            continue
        normal = np.asarray(data.geom_xmat[g]).reshape(3, 3)[:, 2]
        if normal[2] < 1 - 1e-9:
            raise InputError(f"{where}: the plane {_geom_label(model, g)} has normal {np.round(normal, 6).tolist()};"
                             f" the scene's ground is horizontal (normal +z): turn it or remove it")
        if ground is not None:
            raise InputError(f"{where}: {_geom_label(model, g)} is a second ground plane; the scene has one ground")
        plane_name = model.geom(g).name
        ground = {"height": float(data.geom_xpos[g][2])}

    names = {b: _body_name(model, b) for b in range(1, model.nbody) if is_free[b]}
    for r, name in names.items():
        if r not in groups:
            raise InputError(f"{where}: free body '{name}' has no geoms (nor bodies welded to it with geoms); give "
                             "it a geom or remove it")
    jointed: dict[int, str] = {}          # body -> "hinge" | "ball": hangs from the world by that joint
    for r, geoms in groups.items():
        if r == 0 or is_free[r] or not collides[geoms].any():
            continue
        jt = mujoco.mjtJoint(int(model.jnt_type[model.body_jntadr[r]])).name[6:].lower()
        parent = int(model.body_parentid[r])
        if jt in ("hinge", "ball") and model.body_jntnum[r] == 1 and weld[parent] == 0:
            jointed[r] = jt
            continue
        raise InputError(f"{where}: body '{_body_name(model, r)}' hangs from '{_body_name(model, parent)}' by "
                         f"{'a ' + jt + ' joint' if model.body_jntnum[r] == 1 else 'several joints'}; scenes hold "
                         "free bodies, static props and bodies on one hinge or ball joint to the world: remove the "
                         "joint (to weld it to its parent) or make it a <freejoint/> body, or set contype=\"0\" "
                         "conaffinity=\"0\" on its geoms to have it ignored")
    names.update({r: _body_name(model, r) for r in jointed})
    if not names and not static:
        raise InputError(f"{where}: {path} has no bodies (a body with a <freejoint/>, or in a URDF a root link "
                         "or one on a floating joint, static geometry or a hinged body); add one, or describe the "
                         "objects with [[object]] tables")

    known = set(names.values()) | set(static) | ({plane_name} if plane_name else set())
    for key in materials:
        if key not in known:
            raise InputError(f"{materials_where}.{key}: {path.name} has no free body named '{key}'; its free bodies:"
                             f" {sorted(names.values())}" + (f", ground plane: '{plane_name}'" if plane_name else ""))
    if ground is not None and plane_name in materials:
        ground["material"] = _material_value(materials[plane_name], f"{materials_where}.{plane_name}")
    if default_material is not None:
        default_material = _material_value(default_material, f"{materials_where}.default")

    def material_of(name):
        if name in materials:
            return _material_value(materials[name], f"{materials_where}.{name}")
        if default_material is not None:
            return default_material
        raise InputError(f"{materials_where}: no material for body '{name}' of {path.name}; add "
                         f"{name} = \"steel\" (or another material) to [materials], or default = \"...\" for "
                         f"every body not listed")

    objects = []
    for name, (b, geoms) in static.items():
        obj = {"name": name, "material": material_of(name), "static": True}
        p_f, R_f, com = _geometry(model, data, b, geoms, obj, f"{where}: static '{name}'")
        obj.update(position=[float(x) for x in p_f + R_f @ com], rotation=[float(x) for x in _mat2quat(R_f)])
        objects.append(obj)
    for r, name in names.items():
        bwhere = f"{where}: body '{name}'"
        material = material_of(name)
        geoms = [g for g in groups[r] if collides[g]] or groups[r]
        obj: dict[str, Any] = {"name": name, "material": material}
        p_f, R_f, com = _geometry(model, data, r, geoms, obj, bwhere)
        pos = p_f + R_f @ com
        vel = np.zeros(6)          # [angular, linear at the body frame origin], world frame
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, r, vel, 0)
        omega = vel[:3]
        v = vel[3:] + np.cross(omega, pos - np.asarray(data.xpos[r]))
        obj.update(position=[float(x) for x in pos], rotation=[float(x) for x in _mat2quat(R_f)],
                   velocity=[float(x) for x in v], angular_velocity=[float(x) for x in omega])
        if r in jointed:
            j = int(model.body_jntadr[r])
            obj.update(joint=jointed[r], anchor=[float(x) for x in data.xanchor[j]], velocity=[0.0, 0.0, 0.0])
            if jointed[r] == "hinge":
                obj["axis"] = [float(x) for x in data.xaxis[j]]
        if not all(math.isfinite(x) for x in obj["position"] + obj["velocity"] + obj["angular_velocity"]):
            raise InputError(f"{bwhere}: MuJoCo gives a non-finite initial state; check the file's qpos0/keyframe")
        objects.append(obj)
    return ModelBodies(objects, ground)


def expand_model_bodies(data: dict, base: Path, src: str) -> dict:
    """A scene dict (as read from TOML) with ``scene.bodies`` replaced by the ``[[object]]`` tables (and the ground)
    it describes, ready for ``parse_scene``; the dict unchanged when ``scene.bodies`` is not set.

    ``[materials]`` (body name -> material, ``default`` for the others) and ``scene.bodies_keyframe`` are consumed
    too. Objects given as ``[[object]]`` in the scene stay, before the file's; names must differ. A ground plane in
    the file sets ``ground.height`` (and ``ground.material`` if [materials] names the plane).
    """
    scene = data.get("scene", {})
    bodies = scene.get("bodies") if isinstance(scene, dict) else None
    if bodies is None:
        if "materials" in data:
            raise InputError(f"{src}: [materials] goes with scene.bodies = 'FILE.xml' (an MJCF or URDF file); "
                             "add that, or give each [[object]] its own material")
        if isinstance(scene, dict) and "bodies_keyframe" in scene:
            raise InputError(f"{src}: scene.bodies_keyframe goes with scene.bodies = 'FILE.xml'")
        return data
    if not isinstance(bodies, str) or not bodies:
        raise InputError(f"{src}: scene.bodies = {bodies!r} must be the path of an MJCF or URDF file, relative to "
                         "the scene file")
    keyframe = scene.get("bodies_keyframe")
    if keyframe is not None and not isinstance(keyframe, str):
        raise InputError(f"{src}: scene.bodies_keyframe = {keyframe!r} must be a keyframe name")
    materials = data.get("materials", {})
    if not isinstance(materials, dict):
        raise InputError(f"{src}: materials must be a table [materials] of body name = material")
    materials = dict(materials)
    default = materials.pop("default", None)
    result = objects_from_model_file(Path(base) / bodies, materials, default_material=default,
                                     where=f"{src}: scene.bodies = '{bodies}'", materials_where=f"{src}: materials",
                                     keyframe=keyframe)
    out = {k: v for k, v in data.items() if k != "materials"}
    out["scene"] = {k: v for k, v in scene.items() if k not in _MODEL_KEYS}
    given = data.get("object", [])
    if not isinstance(given, list):
        raise InputError(f"{src}: object must be an array of tables [[object]]")
    out["object"] = list(given) + result.objects
    if result.ground is not None:
        if not isinstance(data.get("ground", {}), dict):
            raise InputError(f"{src}: ground must be a table [ground]")
        ground = dict(data.get("ground", {}))
        h = result.ground["height"]
        if "height" in ground and ground["height"] != h:
            raise InputError(f"{src}: ground.height = {ground['height']}, but {bodies} has a ground plane at z = "
                             f"{h:g}; remove ground.height (the plane sets it) or move the plane")
        if "material" in result.ground and "material" in ground and ground["material"] != result.ground["material"]:
            raise InputError(f"{src}: both ground.material and [materials] (for the ground plane of {bodies}) give "
                             "the ground's material; keep one")
        ground.update(result.ground)
        out["ground"] = ground
    return out
