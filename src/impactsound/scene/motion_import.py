"""An animation turned into a scene folder: meshes, a pose table and a scene TOML that renders it.

``impactsound motion import FILE --out DIR`` reads a glTF/GLB (scene/gltf_motion.py) or a Blender file
(io/blender.py) and writes

- ``DIR/meshes/<object>.obj``: each rigid object's mesh in its own frame (the file's object origin), metres;
- ``DIR/poses.csv``: the pose table (scene/poses.py) at the file's frames, positions of each object's origin;
- ``DIR/listener.csv``: the microphone's trajectory, when it moves with the animation's camera;
- ``DIR/scene.toml``: one ``[[object]]`` per object with ``origin = "mesh"``, its material (mapped from the file's
  material names with ``--material NAME=ours``; an unmapped one is an error that lists them), ``[scene] motion =
  "poses.csv"`` and a duration of the animation plus one second of ring-out, a ground plane and a microphone.

Everything is written into a temporary folder renamed into place at the end: an interrupted import leaves
nothing half-written. The folder can be edited (materials, listeners, sources) and rendered later.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

#: ring-out after the last frame [s]
TAIL = 1.0


@dataclass
class ImportedObject:
    """One rigid object of an imported animation: name; mesh vertices (n, 3) [m] and faces (m, 3) in its own frame;
    the file's material name ("" when none); pose per frame: positions (K, 3) [m] of its frame's origin and
    orientations (K, 4) (w, x, y, z), our world (+z up); ``static`` for a passive body that never moves, ``mass``
    [kg] when the file gives one (None: from mesh and material)."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    material: str
    position: np.ndarray
    quaternion: np.ndarray
    static: bool = False
    mass: float | None = None


def parse_material_map(items) -> dict:
    """``["Wood=wood_hard", "Cube=steel"]`` -> {"Wood": "wood_hard", "Cube": "steel"} (keys: the file's material
    or object names)."""
    out = {}
    for it in items or []:
        if "=" not in it:
            raise InputError(f"--material {it!r}: give NAME=MATERIAL (NAME: a material or object name in the file; "
                             "MATERIAL: one of `impactsound materials`)")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _safe(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return keep or "object"


def write_scene_folder(out: str | Path, source: str | Path, t, objects: list[ImportedObject], *,
                       materials: dict | None = None, default_material: str | None = None,
                       ground: float | None | bool = True, listener=None, sample_rate: int = 48000,
                       overwrite: bool = False) -> Path:
    """Write the scene folder of an imported animation (module docstring).

    Parameters
    ----------
    out : path-like
        Folder to create (must not exist unless ``overwrite``).
    source : path-like
        The animation file (named in messages and the TOML's comment).
    t : array_like, shape (K,)
        Frame times [s].
    objects : list of ImportedObject
    materials : dict, optional
        {file material name or object name: our material}; object names win.
    default_material : str, optional
        For objects with no mapping; None: every object must be mapped.
    ground : True, float, None or False
        True: a ground plane at the lowest point any object reaches; a float: at that height [m]; None/False:
        no ground.
    listener : array_like, shape (3,) or (K, 3), optional
        Microphone position [m], or one per frame (a camera that moves: written as the listener's trajectory,
        ``listener.csv``); default 1 m in front of (-y) and 0.5 m above the objects' first centroid.
    sample_rate : int
    overwrite : bool

    Returns
    -------
    Path
        The scene TOML.
    """
    from ..materials import get_material
    from .poses import write_pose_table
    out = Path(out)
    source = Path(source)
    materials = dict(materials or {})
    if out.exists() and not overwrite:
        raise InputError(f"{out}: already exists; choose another --out or pass --overwrite")
    chosen, missing = {}, []
    for o in objects:
        m = materials.get(o.name) or materials.get(o.material) or default_material
        if m is None:
            missing.append(f"'{o.name}' (material '{o.material or 'none'}')")
            continue
        try:
            get_material(m)
        except Exception:
            raise InputError(f"{source}: object '{o.name}': material '{m}' is not one of ours; see "
                             "`impactsound materials`") from None
        chosen[o.name] = m
    if missing:
        raise InputError(f"{source}: no material for {', '.join(missing)}; map them with --material NAME=MATERIAL "
                         "(NAME: the file's material or object name; MATERIAL: one of `impactsound materials`), "
                         "or give --default-material")
    t = np.asarray(t, np.float64)
    P = np.stack([o.position for o in objects], axis=1)
    Q = np.stack([o.quaternion for o in objects], axis=1)
    if ground is True:
        from ..rotation import quat_to_matrix
        lows = []
        for o in objects:
            R = quat_to_matrix(o.quaternion)
            lows.append(float(np.min(np.einsum("kij,nj->kni", R, o.vertices)[..., 2] + o.position[:, None, 2])))
        ground = min(lows)
    if listener is None:
        c = P[0].mean(axis=0)
        listener = [float(c[0]), float(c[1] - 1.0), float(c[2] + 0.5)]
    listener = np.asarray(listener, np.float64)
    track = None
    if listener.ndim == 2:
        # a microphone that moves with the animation's camera: a trajectory at the frames (if it moves at all)
        if np.ptp(listener, axis=0).max() > 1e-9:
            track = listener
        listener = listener[0]
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=parent))
    try:
        import trimesh
        (tmp / "meshes").mkdir()
        lines = [f"# Imported from {source.name} by `impactsound motion import` ({len(t)} frames, "
                 f"{1.0 / np.median(np.diff(t)):.4g} fps).",
                 "# Positions in poses.csv are each object's mesh origin (origin = \"mesh\"); units SI, z up.",
                 "[scene]", f"duration = {float(t[-1]) + TAIL:.6g}", f"sample_rate = {int(sample_rate)}",
                 'motion = "poses.csv"', 'sources = ["modal", "acceleration_noise"]', ""]
        if ground is None or ground is False:
            lines += ["[ground]", "enabled = false", ""]
        else:
            lines += ["[ground]", 'material = "wood_hard"', f"height = {float(ground):.6g}", ""]
        if track is None:
            lines += ["[[listener]]", 'name = "mic"', f"position = [{listener[0]:.6g}, {listener[1]:.6g}, "
                      f"{listener[2]:.6g}]", ""]
        else:
            rows = np.column_stack([t, track])
            (tmp / "listener.csv").write_text("t,x,y,z\n" + "\n".join(",".join(f"{v:.9g}" for v in r)
                                                                      for r in rows) + "\n")
            lines += ["[[listener]]", 'name = "mic"', 'trajectory = "listener.csv"   # the camera, frame by frame', ""]
        names = [o.name for o in objects]
        for o in objects:
            fname = f"meshes/{_safe(o.name)}.obj"
            trimesh.Trimesh(vertices=o.vertices, faces=o.faces, process=False).export(tmp / fname)
            q = o.quaternion[0]
            lines += ["[[object]]", f"name = {o.name!r}".replace("'", '"'), f'mesh = "{fname}"',
                      f'material = "{chosen[o.name]}"', 'origin = "mesh"',
                      "position = [" + ", ".join(f"{v:.9g}" for v in o.position[0]) + "]",
                      "rotation = [" + ", ".join(f"{v:.9g}" for v in q) + "]"]
            if o.static:
                lines.append("static = true")
            if o.mass is not None:
                lines.append(f"# the file gives a mass of {o.mass:.6g} kg; ours follows from the mesh and the "
                             "material's density")
            lines.append("")
        (tmp / "scene.toml").write_text("\n".join(lines))
        moving = [i for i, o in enumerate(objects) if not o.static]
        write_pose_table(tmp / "poses.csv", t, [names[i] for i in moving], P[:, moving], Q[:, moving])
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out / "scene.toml"


def import_animation(path: str | Path, out: str | Path, **kw) -> tuple[Path, dict]:
    """Read an animation file (.glb/.gltf, or .blend with Blender's Python module) and write its scene folder.

    Parameters
    ----------
    path : path-like
    out : path-like
    **kw
        As :func:`write_scene_folder` (materials, default_material, ground, listener, overwrite).

    Returns
    -------
    Path
        The scene TOML.
    dict
        ``objects``, ``frames``, ``fps`` and ``skipped`` ({name: why not imported}).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    skipped = {}
    if suffix in (".glb", ".gltf"):
        from .gltf_motion import read_gltf_motion
        t, objects = read_gltf_motion(path)
    elif suffix == ".blend":
        from ..io.blender import read_blend_motion
        t, objects, extra = read_blend_motion(path)
        if kw.get("listener") is None and extra.get("camera") is not None:
            kw["listener"] = extra["camera"]
        if kw.get("ground", True) is True and extra.get("ground") is not None:
            kw["ground"] = extra["ground"]
        skipped = extra["skipped"]
    else:
        raise InputError(f"{path}: unknown animation type {suffix!r}; use .glb, .gltf or .blend (or write a pose "
                         "table: docs/motion.md)")
    toml = write_scene_folder(out, path, t, objects, **kw)
    fps = float(1.0 / np.median(np.diff(t))) if len(t) > 1 else 0.0
    return toml, {"objects": len(objects), "frames": len(t), "fps": fps, "skipped": skipped}
