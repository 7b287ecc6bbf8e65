"""Loading and checking closed surface meshes, and loading given volume meshes.

A surface must bound one solid: watertight, consistently wound with outward normals (positive volume), no
degenerate faces, one connected body (each body adds 6 rigid modes, modal-sound.md sec. 1), sized in metres.
Self-intersections are not searched for here (no cheap exact test in trimesh); TetGen refuses
self-intersecting input, and :func:`impactsound.mesh.tetra.tetrahedralize` turns that into a MeshError.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import MeshError

if TYPE_CHECKING:
    import trimesh

SURFACE_FORMATS = (".obj", ".stl", ".ply", ".off", ".glb", ".gltf")
VOLUME_FORMATS = (".msh", ".vtu", ".vtk", ".mesh", ".xdmf")
MAX_SIZE_M = 10.0      # bounding box larger than this: probably millimetres read as metres
MIN_SIZE_M = 1e-3      # smaller than this: probably metres scaled down (or microns)


def load_surface(path) -> "trimesh.Trimesh":
    """Read a triangle surface (OBJ/STL/PLY/OFF/glTF) with trimesh; scenes are merged into one mesh.

    Coordinates are taken as metres. Raises MeshError naming the file if it is missing, of an unknown format
    or unreadable.
    """
    import trimesh

    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{p}: mesh file not found")
    if p.suffix.lower() not in SURFACE_FORMATS:
        raise MeshError(f"{p}: unknown surface mesh format {p.suffix!r}; use one of "
                        f"{', '.join(SURFACE_FORMATS)} (volume meshes {', '.join(VOLUME_FORMATS)} go through "
                        f"load_volume_mesh)")
    try:
        obj = trimesh.load(str(p), process=True)
    except Exception as exc:  # trimesh raises many types for bad files
        raise MeshError(f"{p}: could not read the mesh ({type(exc).__name__}: {exc})") from None
    if isinstance(obj, trimesh.Scene):
        geoms = [g for g in obj.dump() if isinstance(g, trimesh.Trimesh)]
        if not geoms:
            raise MeshError(f"{p}: the file holds no triangle mesh")
        obj = trimesh.util.concatenate(geoms)
        obj.merge_vertices()
    if not isinstance(obj, trimesh.Trimesh) or len(obj.faces) == 0:
        raise MeshError(f"{p}: the file holds no triangle faces")
    return obj


def check_surface(mesh, source: str = "mesh") -> None:
    """Raise MeshError (naming ``source``) unless ``mesh`` bounds one solid in metres.

    Checks, in order: faces present, units (bounding box between 1 mm and 10 m), degenerate faces,
    watertightness, consistent winding, one connected body, positive enclosed volume.
    """
    # trimesh's mass properties divide by the volume: on a broken mesh that warns on stderr before our own,
    # clearer message; keep the output to the one error
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        _check_surface(mesh, source)


def _check_surface(mesh, source: str) -> None:
    if len(mesh.faces) < 4:
        raise MeshError(f"{source}: {len(mesh.faces)} faces cannot bound a solid")
    ext = np.asarray(mesh.extents, dtype=np.float64)
    size = float(ext.max())
    if size > MAX_SIZE_M:
        raise MeshError(f"{source}: bounding box is {size:g} m across; coordinates must be in metres (did you "
                        f"mean millimetres? scale by 0.001, e.g. mesh.apply_scale(0.001) or the scene's scale)")
    if size < MIN_SIZE_M:
        raise MeshError(f"{source}: bounding box is only {size:g} m across; coordinates must be in metres "
                        f"(was it scaled twice, or given in kilometres? scale it up)")
    area = np.asarray(mesh.area_faces)
    tiny = area <= 1e-12 * size**2
    if tiny.any():
        raise MeshError(f"{source}: {int(tiny.sum())} degenerate (zero-area) faces, first #{int(np.argmax(tiny))}"
                        f"; remove them (trimesh: mesh.update_faces(mesh.nondegenerate_faces()); "
                        f"mesh.remove_unreferenced_vertices())")
    if not mesh.is_watertight:
        raise MeshError(f"{source}: surface is not watertight (open boundary edges or non-manifold edges); close "
                        f"it with trimesh.repair.fill_holes(mesh), or re-mesh a closed surface with a robust "
                        f"mesher such as fTetWild (pip pytetwild)")
    if not mesh.is_winding_consistent:
        raise MeshError(f"{source}: faces are inconsistently wound (some normals point in, some out); fix with "
                        f"trimesh.repair.fix_winding(mesh) / fix_normals(mesh)")
    n_bodies = int(mesh.body_count)
    if n_bodies != 1:
        raise MeshError(f"{source}: the surface has {n_bodies} disconnected bodies; split them "
                        f"(mesh.split()) and give each its own object, since each body vibrates on its own")
    vol = float(mesh.volume)
    if not vol > 0:
        raise MeshError(f"{source}: enclosed volume is {vol:g} m^3 (normals point inwards); flip the faces "
                        f"with mesh.invert() or trimesh.repair.fix_inversion(mesh)")


def load_volume_mesh(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a tetrahedral volume mesh (.msh, .vtu, ... via meshio) used as given.

    Returns nodes (n, 3) float64 [m] and tets (m, 4) int64, positively oriented (negative ones flipped,
    degenerate ones rejected), only nodes that a tet uses. 10-node tets keep their 4 corners (the P2 mid-edge
    nodes are rebuilt straight by the assembly).
    """
    import meshio

    from .tetra import orient_tets

    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{p}: volume mesh file not found")
    try:
        m = meshio.read(str(p))
    except Exception as exc:
        raise MeshError(f"{p}: could not read the volume mesh ({type(exc).__name__}: {exc}); supported: "
                        f"{', '.join(VOLUME_FORMATS)}") from None
    blocks = [c.data[:, :4] for c in m.cells if c.type in ("tetra", "tetra10")]
    if not blocks:
        kinds = sorted({c.type for c in m.cells})
        raise MeshError(f"{p}: no tetrahedra in the file (cell types: {', '.join(kinds) or 'none'}); export a "
                        f"tetrahedral volume mesh")
    tets = np.concatenate(blocks).astype(np.int64)
    nodes = np.asarray(m.points, dtype=np.float64)
    if nodes.shape[1] == 2:
        raise MeshError(f"{p}: the mesh is 2-D; a 3-D tetrahedral mesh is needed")
    nodes = nodes[:, :3]
    used = np.zeros(len(nodes), dtype=bool)
    used[tets.ravel()] = True
    remap = -np.ones(len(nodes), dtype=np.int64)
    remap[used] = np.arange(int(used.sum()))
    nodes, tets = nodes[used], remap[tets]
    size = float(np.ptp(nodes, axis=0).max())
    if size > MAX_SIZE_M:
        raise MeshError(f"{p}: the mesh is {size:g} m across; coordinates must be in metres (did you mean "
                        f"millimetres? scale by 0.001)")
    if size < MIN_SIZE_M:
        raise MeshError(f"{p}: the mesh is only {size:g} m across; coordinates must be in metres")
    return nodes, orient_tets(nodes, tets, str(p))
