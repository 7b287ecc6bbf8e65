"""Built-in primitive shapes as closed, outward-oriented triangle meshes (metres, centred as built).

Shells (bowl, mug) are solids of revolution of a closed (r, z) profile, so they are watertight with a real wall
thickness, which the volumetric FEM needs. The mug has no handle (a handle would need a CSG union; bring a mesh
file for that).
"""
from __future__ import annotations

import numpy as np
import trimesh

from ..errors import InputError

# Parameters each primitive takes, with defaults [m]
PRIMITIVES: dict[str, dict[str, float | list]] = {
    "sphere": {"radius": 0.01},
    "box": {"size": [0.02, 0.02, 0.02]},
    "cylinder": {"radius": 0.01, "height": 0.05},
    "capsule": {"radius": 0.01, "height": 0.04},
    "bowl": {"radius": 0.07, "thickness": 0.005, "angle_deg": 75.0},
    "mug": {"radius": 0.04, "height": 0.09, "thickness": 0.005},
}


def _positive(where, key, v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}.{key} = {v!r} is not a number") from None
    if not np.isfinite(f) or f <= 0:
        raise InputError(f"{where}.{key} = {v!r} must be a positive length in metres")
    return f


def make_primitive(shape: str, params: dict | None = None, where: str = "object") -> trimesh.Trimesh:
    """Build primitive ``shape`` with ``params`` (see PRIMITIVES for names and defaults, SI metres)."""
    if shape not in PRIMITIVES:
        raise InputError(f"{where}.shape = {shape!r} is not a built-in primitive; choose one of "
                         f"{', '.join(PRIMITIVES)} or give mesh = 'file.obj'")
    p = dict(PRIMITIVES[shape])
    for k, v in (params or {}).items():
        if k not in p:
            raise InputError(f"{where}.{k}: {shape} takes {', '.join(PRIMITIVES[shape])}, not {k!r}")
        p[k] = v
    if shape == "sphere":
        return trimesh.creation.icosphere(subdivisions=3, radius=_positive(where, "radius", p["radius"]))
    if shape == "box":
        size = p["size"]
        if not (isinstance(size, (list, tuple)) and len(size) == 3):
            raise InputError(f"{where}.size must be [x, y, z] in metres, got {size!r}")
        ext = [_positive(where, "size", s) for s in size]
        return trimesh.creation.box(extents=ext)
    if shape == "cylinder":
        return trimesh.creation.cylinder(radius=_positive(where, "radius", p["radius"]),
                                         height=_positive(where, "height", p["height"]), sections=32)
    if shape == "capsule":
        return trimesh.creation.capsule(radius=_positive(where, "radius", p["radius"]),
                                        height=_positive(where, "height", p["height"]), count=[16, 16])
    if shape == "bowl":
        R = _positive(where, "radius", p["radius"])
        t = _positive(where, "thickness", p["thickness"])
        ang = _positive(where, "angle_deg", p["angle_deg"])
        if t >= 0.5 * R or ang >= 90:
            raise InputError(f"{where}: bowl needs thickness < radius/2 and angle_deg < 90")
        th = np.linspace(0.0, np.radians(ang), 14)
        outer = np.c_[R * np.sin(th), R * (1 - np.cos(th))]
        inner = np.c_[(R - t) * np.sin(th), R - (R - t) * np.cos(th)][::-1]
        return _revolve(np.vstack([outer, inner]), where)
    # mug: flat-bottomed cylindrical cup
    R = _positive(where, "radius", p["radius"])
    H = _positive(where, "height", p["height"])
    t = _positive(where, "thickness", p["thickness"])
    if t >= 0.5 * R or t >= 0.5 * H:
        raise InputError(f"{where}: mug needs thickness < radius/2 and < height/2")
    prof = np.array([[0.0, 0.0], [R, 0.0], [R, H], [R - t, H], [R - t, t], [0.0, t]])
    return _revolve(prof, where)


def _revolve(profile: np.ndarray, where: str) -> trimesh.Trimesh:
    mesh = trimesh.creation.revolve(profile, sections=40)
    mesh.merge_vertices()
    if mesh.volume < 0:
        mesh.invert()
    if not mesh.is_watertight:  # pragma: no cover - guards a trimesh behaviour change
        raise InputError(f"{where}: could not build a watertight shell; report this as a bug")
    return mesh
