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
wheel is how this package consumes it; a distribution bundling it must respect the AGPL.

What TetGen refuses (a self-intersecting shell such as many scanned or game-asset meshes) and surfaces made of
several overlapping shells (a mug and its handle) go to fTetWild (pip ``pytetwild``, MPL-2.0), which meshes the
solid the surface encloses (the union of the shells) robustly: slower (about 1 s for a few-cm object on 2
cores against TetGen's 0.1 s) and it re-meshes the surface within a small envelope of it, so it is the fallback
rather than the default.

Whatever the mesher, the output goes through :func:`orient_tets`: tets are made positively oriented and
degenerate ones (|V| tiny against the mesh scale) are rejected, since an inverted or flat element makes K
indefinite or singular (modal-sound.md sec. 1, "Reject inverted tets"); so are tangled meshes (a mix of
orientations, or tets overlapping across a shared face), which flipping would only hide.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np

from ..errors import MeshError

MESHER = "tetgen"          # part of the modal-cache key: a different mesher gives a different mesh
FALLBACK_MESHER = "ftetwild"   # for what TetGen refuses (self-intersecting, overlapping shells)
DEFAULT_QUALITY = 1.5      # TetGen radius-edge ratio bound (-q); 1.5 keeps dihedral angles away from 0/180


def signed_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volume of each tet [m^3]: det[x1-x0, x2-x0, x3-x0]/6 (positive = right-handed)."""
    x = nodes[tets[:, :4]]
    d1, d2, d3 = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]
    return np.einsum("ij,ij->i", d1, np.cross(d2, d3)) / 6.0


def orient_tets(nodes: np.ndarray, tets: np.ndarray, source: str = "mesh", *, allow_flip: bool = True,
                rel_tol: float = 1e-9) -> np.ndarray:
    """Return tets (m, 4) int64 with positive orientation; raise MeshError for a mesh that is not a valid solid.

    Errors (each naming the first tet or node, by its index in ``tets`` / ``nodes``): a used node with NaN/inf
    coordinates; a degenerate tet (|V| < rel_tol * L^3 with L its longest edge: a sliver or a flat tet); a mix of
    orientations (some tets negative while the others are positive: inverted, tangled elements, which flipping
    would only hide, since an inverted element overlaps its neighbours); tets that overlap across a shared face
    (both on the same side of it) or a face shared by more than two tets. A mesh whose tets are all negative
    (the other file convention) is flipped as a whole, unless ``allow_flip=False``.
    """
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.array(tets, dtype=np.int64, copy=True)
    if tets.ndim != 2 or tets.shape[1] != 4 or len(tets) == 0:
        raise MeshError(f"{source}: expected a non-empty (m, 4) array of tetrahedra, got shape {tets.shape}")
    if tets.min() < 0 or tets.max() >= len(nodes):
        raise MeshError(f"{source}: tetrahedron node index out of range (0..{len(nodes) - 1})")
    finite = np.isfinite(nodes).all(axis=1)
    bad_t = ~finite[tets].all(axis=1)
    if bad_t.any():
        t = int(np.argmax(bad_t))
        k = int(tets[t][~finite[tets[t]]][0])
        n_bad = len(np.unique(tets[bad_t][~finite[tets[bad_t]]]))
        more = f"; {n_bad} such nodes" if n_bad > 1 else ""
        raise MeshError(f"{source}: node #{k} has non-finite coordinates {nodes[k].tolist()} (used by tet "
                        f"#{t}{more}); fix the node or re-mesh")
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
    n_neg = int(neg.sum())
    if n_neg and not allow_flip:
        i = int(np.argmax(neg))
        raise MeshError(f"{source}: {n_neg} inverted tetrahedra (negative volume), first #{i} with nodes "
                        f"{tets[i].tolist()}; re-mesh")
    if 0 < n_neg < len(tets):
        odd = neg if 2 * n_neg <= len(tets) else ~neg          # the minority orientation is the suspect one
        i = int(np.argmax(odd))
        sign, rest = ("negative", "positive") if odd is neg else ("positive", "negative")
        raise MeshError(f"{source}: tet #{i} (nodes {tets[i].tolist()}, volume {vol[i]:.3g} m^3) is inverted: "
                        f"{int(odd.sum())} of {len(tets)} tets {'is' if odd.sum() == 1 else 'are'} {sign} while "
                        f"the others are {rest}, so the "
                        f"mesh is tangled; untangle or re-mesh it (only a wholly reversed mesh is flipped)")
    if n_neg:
        tets = tets[:, [0, 2, 1, 3]]                 # swapping two vertices flips the orientation
    _check_conforming(tets, source)
    return tets


_OUT_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])   # outward faces of a positive tet


def _check_conforming(tets: np.ndarray, source: str) -> None:
    """In a valid mesh of positive tets an inner face is shared by two tets that lie on either side of it, so its
    two outward windings are opposite; the same winding twice means the two tets overlap, and a face in three or
    more tets means overlapping or duplicated elements."""
    faces = tets[:, _OUT_FACES].reshape(-1, 3)
    s = np.sort(faces, axis=1)
    # parity of the permutation that sorts each face: its winding relative to the sorted one
    a, b, c = faces[:, 0], faces[:, 1], faces[:, 2]
    parity = ((a > b).astype(np.int8) + (a > c) + (b > c)) % 2
    n = int(tets.max()) + 1
    if n < 2_000_000:
        key = (s[:, 0] * n + s[:, 1]) * n + s[:, 2]
    else:  # pragma: no cover - huge meshes: row-wise unique instead of an int64 key
        key = np.unique(s, axis=0, return_inverse=True)[1].ravel()
    order = np.argsort(key, kind="stable")
    ks = key[order]
    same = ks[1:] == ks[:-1]
    if not same.any():
        return
    triple = same[1:] & same[:-1]
    if triple.any():
        j = int(np.argmax(triple))
        ids = sorted({int(order[j + d]) // 4 for d in range(3)})
        raise MeshError(f"{source}: tets {', '.join('#' + str(i) for i in ids)} share one face (a face may bound "
                        f"at most two tets): overlapping or duplicated elements; re-mesh")
    j = np.flatnonzero(same)
    clash = parity[order[j]] == parity[order[j + 1]]
    if clash.any():
        k = int(j[np.argmax(clash)])
        t1, t2 = sorted((int(order[k]) // 4, int(order[k + 1]) // 4))
        raise MeshError(f"{source}: tets #{t1} and #{t2} overlap (both lie on the same side of their shared face "
                        f"{s[order[k]].tolist()}): the mesh is tangled; untangle or re-mesh it")


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
                   source: str = "mesh", *, progress=None, info: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fill a closed, checked surface (trimesh.Trimesh) with tetrahedra.

    max_edge: target edge length [m] (enforced as TetGen's volume bound V_max = max_edge^3/(6 sqrt 2), the
        volume of a regular tet of that edge; fTetWild's ideal edge length); None picks
        :func:`_default_max_edge`.
    quality: radius-edge ratio bound (> 1; smaller = better shaped, more nodes), TetGen only.
    TetGen meshes the surface as given; when it refuses it (self-intersections), or the surface is several
    overlapping shells, fTetWild meshes the solid (the union of the shells) instead, told through ``progress``
    (callable(stage: str)) and one :class:`~impactsound.mesh.surface.MeshWarning` line. ``info`` (a dict), if
    given, receives ``mesher`` ("tetgen" or "ftetwild") and, for fTetWild, ``reason``.
    Returns nodes (n, 3) float64 [m] and tets (m, 4) int64, positively oriented, every node used, one body.
    """
    say = progress or (lambda stage: None)
    if max_edge is None:
        max_edge = _default_max_edge(mesh)
    if not (max_edge > 0 and math.isfinite(max_edge)):
        raise MeshError(f"{source}: max_edge = {max_edge!r} m must be a positive length")
    if not quality > 1.0:
        raise MeshError(f"{source}: quality = {quality!r} must be > 1 (TetGen radius-edge ratio bound)")
    n_shells = int(mesh.body_count)
    if n_shells > 1:
        # TetGen would refuse crossing shells and mesh touching ones as separate bodies
        reason = f"the surface is {n_shells} overlapping shells"
    else:
        try:
            nodes, tets = _tetgen(mesh, max_edge, quality, source)
            reason = ""
        except _TetGenRefused as exc:
            reason = f"TetGen refused the surface ({exc})"
    if reason:
        nodes, tets = _ftetwild(mesh, max_edge, source, reason, say)
    if info is not None:
        info["mesher"] = FALLBACK_MESHER if reason else MESHER
        if reason:
            info["reason"] = reason
    return nodes, tets


class _TetGenRefused(Exception):
    pass


def _tetgen(mesh, max_edge: float, quality: float, source: str):
    import tetgen

    v = np.ascontiguousarray(mesh.vertices, dtype=np.float64)
    f = np.ascontiguousarray(mesh.faces, dtype=np.int32)
    maxvol = max_edge**3 / (6.0 * math.sqrt(2.0))
    try:
        tg = tetgen.TetGen(v, f)
        nodes, tets = tg.tetrahedralize(quality=True, minratio=float(quality), maxvolume=float(maxvol), fixedvolume=True,
                                        quiet=True, nowarning=True)[:2]
    except (RuntimeError, ValueError) as exc:
        # TetGen dumps the offending facets to _skipped.{face,node} in the working directory: don't litter
        for leftover in ("_skipped.face", "_skipped.node"):
            try:
                os.remove(leftover)
            except OSError:
                pass
        raise _TetGenRefused(" ".join(str(exc).split()).rstrip(".")) from None
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if len(tets) == 0:
        raise _TetGenRefused("it produced no tetrahedra")
    nodes, tets = _drop_unused(nodes, tets)
    return nodes, orient_tets(nodes, tets, source)


def _drop_unused(nodes, tets):
    """Drop nodes no tet uses (meshers keep input points that end up outside or unused)."""
    used = np.zeros(len(nodes), dtype=bool)
    used[tets.ravel()] = True
    if not used.all():
        remap = -np.ones(len(nodes), dtype=np.int64)
        remap[used] = np.arange(int(used.sum()))
        nodes, tets = nodes[used], remap[tets]
    return nodes, tets


@functools.lru_cache(maxsize=1)
def _import_ftetwild():
    """pytetwild's ``tetrahedralize``, or None if it is not installed.

    pytetwild >= 0.3 imports PyVista in its package ``__init__`` (for an optional accessor) although PyVista is
    only an optional dependency of it; without PyVista its mesher module is loaded on its own, without running
    that ``__init__`` (and without leaving a half-initialised ``pytetwild`` in ``sys.modules``).
    """
    try:
        from pytetwild import tetrahedralize as tw
        return tw
    except ImportError as exc:
        if "pyvista" not in str(exc) and getattr(exc, "name", None) != "pyvista":
            return None
    import importlib
    import importlib.util
    import sys
    import types
    spec = importlib.util.find_spec("pytetwild")
    if spec is None or not spec.submodule_search_locations:
        return None
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "pytetwild" or k.startswith("pytetwild.")}
    pkg = types.ModuleType("pytetwild")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["pytetwild"] = pkg
    try:
        return importlib.import_module("pytetwild.pytetwild").tetrahedralize
    except ImportError:
        return None
    finally:
        for k in [k for k in sys.modules if k == "pytetwild" or k.startswith("pytetwild.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def ftetwild_version() -> str:
    """Installed pytetwild version ("none" if absent): part of the modal-cache key."""
    try:
        from importlib.metadata import version
        return version("pytetwild")
    except Exception:
        return "none"


def union_surface(mesh, source: str = "mesh", max_edge: float | None = None, progress=None):
    """The outer surface of the solid that ``mesh``'s shells enclose together (their union), via fTetWild.

    For a surface made of overlapping closed shells (a mug and its handle), whose volume, centre of mass and
    inertia trimesh would count twice where shells overlap. Returns a watertight single-shell trimesh.Trimesh
    (one :class:`~impactsound.mesh.surface.MeshWarning` line says so); raises MeshError if the shells are apart.
    """
    import trimesh

    if max_edge is None:
        max_edge = _default_max_edge(mesh)
    nodes, tets = _ftetwild(mesh, max_edge, source, f"the surface is {int(mesh.body_count)} overlapping shells",
                            progress or (lambda stage: None), outcome="using the surface of their union")
    out = trimesh.Trimesh(nodes, boundary_faces(tets), process=False)
    out.remove_unreferenced_vertices()
    return out


def _ftetwild(mesh, max_edge: float, source: str, reason: str, say,
              outcome: str = "meshed it with fTetWild instead") -> tuple[np.ndarray, np.ndarray]:
    """Tet mesh of the solid bounded by ``mesh`` (the union of its shells, by generalised winding number) with
    fTetWild (Hu et al., "Fast Tetrahedral Meshing in the Wild", ACM TOG 39(4), 2020).

    Its ideal edge length is set to ``max_edge``: measured on a 4 x 3 x 2 cm ABS block, that gives ~0.4x the
    nodes of TetGen at the same ``max_edge`` with the first six P2 modes within 0.15 % of TetGen's; with its
    element optimisation on (the default here) the worst tet is better shaped than TetGen's (radius-ratio-like
    quality 0.34 vs 0.05); without it there are slivers. Its surface lies within 1e-3 of the bounding-box
    diagonal of the input (the envelope), so the volume matches the input's to ~1e-4.
    """
    import time
    import warnings

    from .surface import MeshWarning

    tw = _import_ftetwild()
    if tw is None:
        raise MeshError(f"{source}: {reason}, and fTetWild (pip pytetwild) is not installed to mesh it instead; "
                        f"install pytetwild, or repair the surface (e.g. MeshLab 'remove self-intersections')")
    say("fTetWild")
    t0 = time.perf_counter()
    v = np.ascontiguousarray(mesh.vertices, dtype=np.float64)
    f = np.ascontiguousarray(mesh.faces, dtype=np.int32)
    # fTetWild writes its tracked surface to __tracked_surface.stl in the working directory: don't litter
    litter = os.path.abspath("__tracked_surface.stl")
    had = os.path.exists(litter)
    try:
        nodes, tets = tw(v, f, edge_length_abs=float(max_edge), optimize=True, quiet=True)
    except Exception as exc:
        raise MeshError(f"{source}: {reason}, and fTetWild failed too ({type(exc).__name__}: {exc}); repair the "
                        f"surface") from None
    finally:
        if not had:
            try:
                os.remove(litter)
            except OSError:
                pass
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if len(tets) == 0:
        raise MeshError(f"{source}: {reason}, and fTetWild found no solid inside it; check that the surface is "
                        f"closed")
    nodes, tets = _drop_unused(nodes, tets)
    tets = orient_tets(nodes, tets, source + " (fTetWild mesh)")      # fTetWild's tets are negatively oriented
    n_comp = _components(len(nodes), tets)
    if n_comp > 1:
        raise MeshError(f"{source}: the solid is {n_comp} separate bodies (shells that neither touch nor "
                        f"overlap); give each its own object (trimesh: mesh.split()), or make the parts overlap")
    vol = float(signed_volumes(nodes, tets).sum())
    warnings.warn(f"{source}: {reason}; {outcome} (fTetWild: {len(tets)} tets in "
                  f"{time.perf_counter() - t0:.1f} s, volume {vol:.4g} m^3; the surface's signed volume, which "
                  f"counts overlaps twice, is {float(mesh.volume):.4g} m^3)", MeshWarning, stacklevel=3)
    return nodes, tets


def _components(n_nodes: int, tets: np.ndarray) -> int:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    e = tets[:, [0, 0, 0, 1, 1, 2]].ravel(), tets[:, [1, 2, 3, 2, 3, 3]].ravel()
    g = sp.coo_matrix((np.ones(len(e[0])), e), shape=(n_nodes, n_nodes))
    return int(connected_components(g, directed=False)[0])


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
