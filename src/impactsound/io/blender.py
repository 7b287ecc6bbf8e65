"""Blender files in: rigid bodies, their meshes and their motion, read with Blender's own Python module.

Blender's ``bpy`` (on PyPI as ``bpy``, the ``blender`` extra; about 370 MB) is a whole Blender in a Python
module. It is probed in a subprocess (:func:`bpy_available`; a missing system library can crash the interpreter
on import) and the file is read in a subprocess too (``python -m impactsound.io._blender_worker``), so that
Blender's global state and any crash stay out of the caller. The worker opens the file and, for the frames
frame_start .. frame_end at the file's frame rate (render fps / fps_base), steps the scene (rigid-body
simulation caches are filled in order, as Blender plays them) and records every object's world matrix.

Objects read:
- mesh objects with Rigid Body physics: ACTIVE ones move (their simulated or baked motion); PASSIVE ones that
  do not move are static props, and a flat horizontal PASSIVE plane (no volume) is the ground;
- mesh objects without Rigid Body physics whose transform is keyframed (they move during the frames);
- each one's mesh with its modifiers applied (the evaluated mesh, triangulated), in its own frame times its
  world scale (which must not change), its active material's name and Blender's rigid-body mass (kept in the
  scene TOML as a comment: our mass follows from the mesh and material density), and the scene camera's
  position in every frame (the microphone, moving with the camera, unless the caller gives one).
Units: Blender's metric scene unit (scale_length) times Blender units; +z is up, as ours.
Everything else (lights, empties, meshes that never move and have no physics) is listed in the import
summary as not imported, with the reason.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import InputError

#: seconds a bpy probe or a file read may take
PROBE_TIMEOUT = 120
READ_TIMEOUT = 1800


@lru_cache(maxsize=1)
def bpy_available() -> tuple[bool, str]:
    """(True, Blender's version) when ``import bpy`` works in a subprocess, else (False, why)."""
    try:
        r = subprocess.run([sys.executable, "-c", "import bpy; print(bpy.app.version_string)"],
                           capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, f"importing bpy took over {PROBE_TIMEOUT} s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        return False, f"bpy does not import: {last}"
    return True, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?"


def read_blend_motion(path: str | Path):
    """The rigid objects, motion and camera of a .blend file (module docstring).

    Parameters
    ----------
    path : path-like

    Returns
    -------
    t : ndarray, shape (K,)
        Frame times [s] from the first frame.
    objects : list of scene.motion_import.ImportedObject
    extra : dict
        ``camera``: the camera's world position in every frame (K, 3) [m] (or None); ``ground``: the height of a
        flat passive ground plane [m] (or None); ``skipped``: {object name: why it was not imported}.

    Raises
    ------
    InputError
        bpy missing, the file unreadable, no rigid bodies and nothing animated, a changing scale.
    """
    from ..scene.motion_import import ImportedObject
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: Blender file not found")
    ok, why = bpy_available()
    if not ok:
        raise InputError(f"{path}: reading .blend files needs Blender's Python module: pip install "
                         f"'impactsound[blender]' (Python 3.11) ({why}); or export the animation from Blender "
                         "as glTF (.glb) and import that")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "motion.npz"
        try:
            r = subprocess.run([sys.executable, "-m", "impactsound.io._blender_worker", str(path.resolve()), str(out)],
                               capture_output=True, text=True, timeout=READ_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise InputError(f"{path}: Blender took over {READ_TIMEOUT} s to play the file's frames") from None
        if r.returncode != 0 or not out.is_file():
            msg = r.stdout.strip().splitlines()
            err = next((m[len("ERROR: "):] for m in msg if m.startswith("ERROR: ")), None)
            if err is None:
                tail = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
                err = f"Blender failed to read it ({tail})"
            raise InputError(f"{path}: {err}")
        z = np.load(out, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
        t = np.asarray(z["t"], np.float64)
        objects = []
        for i, m in enumerate(meta["objects"]):
            objects.append(ImportedObject(name=m["name"], vertices=z[f"v{i}"], faces=z[f"f{i}"],
                                          material=m["material"], position=z[f"p{i}"], quaternion=z[f"q{i}"],
                                          static=m["static"], mass=m.get("mass")))
    camera = None if meta.get("camera") is None else np.asarray(meta["camera"], np.float64)
    return t, objects, {"camera": camera, "ground": meta.get("ground"), "skipped": meta["skipped"],
                        "fps": meta["fps"]}
