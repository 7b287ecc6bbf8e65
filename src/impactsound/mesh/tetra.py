"""Tetrahedral meshing of a closed surface, behind one swappable function.

:func:`tetrahedralize` is the only entry point the rest of the package uses; replace its body to change mesher.

Why TetGen (pip ``tetgen``, a wheel with the C++ library inside):
- it installs from PyPI with no system libraries (CI requirement) and meshes a few-cm object in well under a
  second at the resolutions modal analysis needs (1-10 k nodes);
- constrained Delaunay with a radius-edge quality bound (``-q``) and a volume bound (``-a``) gives the two
  controls we need: element quality (P2 accuracy degrades with slivers) and size (resolve the bending wavelength,
  modal-sound.md sec. 1);
- it refuses self-intersecting input (it reports intersecting facets), which is how such surfaces are detected.
Licence: TetGen is AGPL-3.0 (the Python wrapper is MIT). Using it as a library from a separately installed
wheel is how this package consumes it; a distribution bundling it must respect the AGPL. Alternatives with the
same interface: ``pytetwild`` (fTetWild, MPL-2.0, robust to dirty/non-manifold input but slower and it
re-meshes the surface) and ``gmsh`` (GPL, large wheel). Both return (nodes, tets) and could be dropped in here.

Whatever the mesher, the output goes through :func:`orient_tets`: tets are made positively oriented and
degenerate ones (|V| tiny against the mesh scale) are rejected, since an inverted or flat element makes K
indefinite or singular (modal-sound.md sec. 1, "Reject inverted tets").
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import MeshError

MESHER = "tetgen"          # part of the modal-cache key: a different mesher gives a different mesh
DEFAULT_QUALITY = 1.5      # TetGen radius-edge ratio bound (-q); 1.5 keeps dihedral angles away from 0/180


def signed_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volume of each tet [m^3]: det[x1-x0, x2-x0, x3-x0]/6 (positive = right-handed)."""
    x = nodes[tets[:, :4]]
    d1, d2, d3 = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]
    return np.einsum("ij,ij->i", d1, np.cross(d2, d3)) / 6.0


def orient_tets(nodes: np.ndarray, tets: np.ndarray, source: str = "mesh", *, allow_flip: bool = True,
                rel_tol: float = 1e-9) -> np.ndarray:
    """Return tets (m, 4) int64 with positive orientation; raise MeshError for degenerate tets.

    A tet counts as degenerate when |V| < rel_tol * L^3 with L its longest edge (a sliver or a flat tet).
    With ``allow_flip=False`` a negatively oriented tet is an error (an inverted element of a given volume mesh
    cannot simply be flipped when it overlaps its neighbours; ``load_volume_mesh`` flips, as mesh files use both
    conventions).
    """
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.array(tets, dtype=np.int64, copy=True)
    if tets.ndim != 2 or tets.shape[1] != 4 or len(tets) == 0:
        raise MeshError(f"{source}: expected a non-empty (m, 4) array of tetrahedra, got shape {tets.shape}")
    if tets.min() < 0 or tets.max() >= len(nodes):
        raise MeshError(f"{source}: tetrahedron node index out of range (0..{len(nodes) - 1})")
    vol = signed_volumes(nodes, tets)
    x = nodes[tets]
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    lmax = np.max(np.stack([np.linalg.norm(x[:, i] - x[:, j], axis=1) for i, j in pairs], axis=1), axis=1)
    bad = np.abs(vol) <= rel_tol * lmax**3
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise MeshError(f"{source}: {int(bad.sum())} degenerate (zero-volume) tetrahedra, first #{i} with nodes "
                        f"{tets[i].tolist()}; re-mesh with a quality bound (e.g. TetGen -q) or remove "
                        f"duplicate/collinear nodes")
    neg = vol < 0
    if neg.any():
        if not allow_flip:
            raise MeshError(f"{source}: {int(neg.sum())} inverted tetrahedra (negative volume); re-mesh")
        tets[neg] = tets[neg][:, [0, 2, 1, 3]]     # swapping two vertices flips the orientation
    return tets


def _default_max_edge(mesh) -> float:
    """Default target edge length [m]: 1/5 of the smallest bounding-box side (at least 1/25 of the largest).

    TetGen's tets under the regular-tet volume bound come out ~2x shorter than the bound, so a few-cm object
    gets ~1-4 k P2 nodes: seconds to solve. Measured (tests/validation/test_modal_fem.py values): the P2 bar
    and sphere stay within 0.5 % of the analytic modes at this density; 1/8 (the first choice) gave 8x the
    nodes and 92 s for a 6 x 5 x 4 cm block for no audible gain. Thin walls still get TetGen's
    surface-conforming tets (>= 1 P2 element through the thickness, which P2 bending tolerates)."""
    ext = np.asarray(mesh.extents, dtype=np.float64)
    return float(max(ext.min() / 5.0, ext.max() / 25.0))


def tetrahedralize(mesh, max_edge: float | None = None, quality: float = DEFAULT_QUALITY,
                   source: str = "mesh") -> tuple[np.ndarray, np.ndarray]:
    """Fill a closed, checked surface (trimesh.Trimesh) with tetrahedra.

    max_edge: target edge length [m] (enforced as TetGen's volume bound V_max = max_edge^3/(6 sqrt 2), the
        volume of a regular tet of that edge); None picks :func:`_default_max_edge`.
    quality: radius-edge ratio bound (> 1; smaller = better shaped, more nodes).
    Returns nodes (n, 3) float64 [m] and tets (m, 4) int64, positively oriented, every node used.
    """
    import tetgen

    if max_edge is None:
        max_edge = _default_max_edge(mesh)
    if not (max_edge > 0 and math.isfinite(max_edge)):
        raise MeshError(f"{source}: max_edge = {max_edge!r} m must be a positive length")
    if not quality > 1.0:
        raise MeshError(f"{source}: quality = {quality!r} must be > 1 (TetGen radius-edge ratio bound)")
    v = np.ascontiguousarray(mesh.vertices, dtype=np.float64)
    f = np.ascontiguousarray(mesh.faces, dtype=np.int32)
    maxvol = max_edge**3 / (6.0 * math.sqrt(2.0))
    try:
        tg = tetgen.TetGen(v, f)
        nodes, tets = tg.tetrahedralize(quality=True, minratio=float(quality), maxvolume=float(maxvol), fixedvolume=True,
                                        quiet=True, nowarning=True)[:2]
    except (RuntimeError, ValueError) as exc:
        # TetGen dumps the offending facets to _skipped.{face,node} in the working directory: don't litter
        import os
        for leftover in ("_skipped.face", "_skipped.node"):
            try:
                os.remove(leftover)
            except OSError:
                pass
        raise MeshError(f"{source}: TetGen could not tetrahedralize the surface ({exc}); the surface is "
                        f"probably self-intersecting or not manifold: repair it (e.g. with fTetWild / "
                        f"pytetwild, or MeshLab 'remove self-intersections')") from None
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if len(tets) == 0:
        raise MeshError(f"{source}: TetGen produced no tetrahedra; the surface is probably not closed or is "
                        f"self-intersecting")
    # drop nodes no tet uses (TetGen keeps input points that end up outside/unused)
    used = np.zeros(len(nodes), dtype=bool)
    used[tets.ravel()] = True
    if not used.all():
        remap = -np.ones(len(nodes), dtype=np.int64)
        remap[used] = np.arange(int(used.sum()))
        nodes, tets = nodes[used], remap[tets]
    return nodes, orient_tets(nodes, tets, source)


def boundary_faces(tets: np.ndarray) -> np.ndarray:
    """Faces (k, 3) used by exactly one tet, wound counter-clockwise seen from outside (outward normal).

    For a positively oriented tet (v0..v3) the faces opposite each vertex with outward normals are
    (1,2,3), (0,3,2), (0,1,3), (0,2,1).
    """
    tets = np.asarray(tets, dtype=np.int64)
    loc = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])
    faces = tets[:, loc].reshape(-1, 3)
    key = np.sort(faces, axis=1)
    _, inv, cnt = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    return faces[cnt[inv.ravel()] == 1]
