"""Pre-fractured objects: a convex solid cut into Voronoi pieces that fly as one until their first hard impact.

How we break it (the package's choice; the acceleration-noise paper's breaking plate came from a fracture
simulation, Zheng & James 2010, which we do not run): the object is cut beforehand into the Voronoi cells of
``n`` random seeds inside it (each cell: the object clipped by the bisector planes of its seed and every other
seed), each cell shrunk about its centroid so that neighbours leave a ``gap`` between them. In the scene the
pieces are ordinary objects sharing a ``fracture_group``; the rigid-body engine welds them to the group's first
piece, so they fall, spin and bounce as one, and releases every weld the first time a piece of the group hits
anything else faster than the group's ``break_speed``. From then on each piece is a free body with its own modes
and acceleration noise. The crack itself (the fracture's own sound) is not modelled.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError


def voronoi_pieces(mesh, n: int, *, seed: int = 0, gap: float = 5e-4) -> list:
    """The Voronoi pieces of a convex watertight trimesh.Trimesh: n cells of random seeds inside it (a
    ``numpy.random.default_rng(seed)``), each shrunk about its centroid by ``gap`` [m] (half on each side of a cut).
    Returns a list of watertight convex trimesh.Trimesh pieces (world coordinates of ``mesh``)."""
    import trimesh
    if n < 2:
        raise InputError(f"voronoi_pieces: n = {n} pieces; give at least 2")
    if not mesh.is_watertight or abs(mesh.volume - mesh.convex_hull.volume) > 1e-6 * mesh.convex_hull.volume:
        raise InputError("voronoi_pieces: the object must be a convex watertight solid (cut concave ones into "
                         "convex parts first)")
    rng = np.random.default_rng(seed)
    lo, hi = mesh.bounds
    seeds = np.zeros((0, 3))
    while len(seeds) < n:
        p = rng.uniform(lo, hi, size=(4 * n, 3))
        # seeds kept away from the surface, so that every cell is a solid chunk
        inside = mesh.contains(p)
        seeds = np.vstack([seeds, p[inside]])[:n]
    # a convex cell is the intersection of half-spaces: the object's own (its hull's facets) and, for every other
    # seed t, {x : (x - (s + t) / 2) . (t - s) <= 0}; its seed is an interior point
    from scipy.spatial import ConvexHull, HalfspaceIntersection
    own = ConvexHull(np.asarray(mesh.vertices, np.float64)).equations          # n . x + d <= 0
    pieces = []
    for i, s in enumerate(seeds):
        t = np.delete(seeds, i, axis=0)
        nrm = t - s
        cut = np.hstack([nrm, -np.einsum("ij,ij->i", nrm, 0.5 * (s + t))[:, None]])
        cell_v = HalfspaceIntersection(np.vstack([own, cut]), s).intersections
        cell = trimesh.Trimesh(cell_v).convex_hull
        size = float(np.linalg.norm(cell.extents))
        c = cell.center_mass
        cell.apply_translation(-c)
        cell.apply_scale(max(1.0 - gap / max(size, 1e-12), 0.5))
        cell.apply_translation(c)
        pieces.append(cell)
    return pieces


def fractured_plate_scene(out_dir, *, pieces: int = 6, seed: int = 3) -> Path:
    """Write the breaking-plate scene (a ceramic plate dropped onto concrete, pre-cut into ``pieces`` Voronoi
    pieces that break apart on its first hard impact; the acceleration-noise paper's breaking-plate example) to
    ``out_dir``: one OBJ per piece and ``scene.toml``. Returns the scene file."""
    import trimesh
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plate = trimesh.creation.cylinder(radius=0.1, height=0.006, sections=48)
    parts = voronoi_pieces(plate, pieces, seed=seed)
    lines = ["# A ceramic plate (20 cm, 6 mm) pre-cut into Voronoi pieces, dropped tilted onto concrete: the pieces",
             "# fly welded as one plate and break apart at its first impact faster than 1 m/s (scene/fracture.py).",
             "# Written by `impactsound demo --scene plate`.",
             "[scene]", "duration = 2.0", "sample_rate = 48000", "seed = 1",
             'sources = ["modal", "acceleration_noise", "ground"]', "",
             "[ground]", 'material = "concrete"', "",
             "[[listener]]", 'name = "mic"', "position = [0.5, -0.8, 0.6]", ""]
    from scipy.spatial.transform import Rotation
    R = Rotation.from_euler("XYZ", [25.0, 10.0, 0.0], degrees=True)
    drop = np.array([0.0, 0.0, 0.55])
    for k, p in enumerate(parts):
        name = f"piece{k}"
        com = np.asarray(p.center_mass)
        local = p.copy()
        local.apply_translation(-com)
        local.export(out / f"{name}.obj")
        pos = R.apply(com) + drop
        x, y, z, w = R.as_quat()
        lines += ["[[object]]", f'name = "{name}"', f'mesh = "{name}.obj"', 'material = "ceramic"',
                  f"position = [{pos[0]:.6f}, {pos[1]:.6f}, {pos[2]:.6f}]",
                  f"rotation = [{w:.9f}, {x:.9f}, {y:.9f}, {z:.9f}]",
                  'fracture_group = "plate"', "break_speed = 1.0", ""]
    toml = out / "scene.toml"
    toml.write_text("\n".join(lines))
    return toml
