"""Tetrahedral meshing of a closed surface, with the mesher an explicit choice.

:func:`tetrahedralize` is the only entry point the rest of the package uses; its ``mesher`` argument picks one of
:data:`MESHERS` (default :data:`DEFAULT_MESHER`). Each mesher is a separately installed Python package under its
own licence; this package (MIT) only calls it:

- ``"tetgen"``: TetGen (H. Si, 2015, "TetGen, a Delaunay-based quality tetrahedral mesh generator", ACM Trans.
  Math. Softw. 41(2), article 11), pip ``tetgen``. Licence: TetGen is AGPL-3.0-or-later (commercial licences
  from WIAS Berlin); the pip package's Python wrapper is MIT, the TetGen library inside its wheel is AGPL.
  Constrained Delaunay with a radius-edge quality bound (``-q``) and a volume bound (``-a``): the two controls
  modal analysis needs (element shape, since P2 accuracy degrades with slivers, and size, to resolve the
  shortest bending wavelength). It keeps every input vertex and facet (it may split facets), so the volume is
  the surface's exactly; it refuses a self-intersecting surface (it reports the intersecting facets).
  Deterministic; 0.01-0.3 s for the few-cm objects measured below.
- ``"ftetwild"``: fTetWild (Y. Hu, T. Schneider, B. Wang, D. Zorin, D. Panozzo, 2020, "Fast Tetrahedral Meshing
  in the Wild", ACM Trans. Graph. 39(4), article 117), pip ``pytetwild``. Licence: MPL-2.0 (fTetWild and
  pytetwild); the pytetwild wheel also ships GMP as a shared library (LGPL-3.0-or-later or GPL-2.0-or-later).
  It meshes the solid a surface encloses (the union of overlapping shells, by winding number) and tolerates
  self-intersections, re-meshing the surface within an envelope of it (1e-3 of the bounding-box diagonal).
  Not deterministic (see :func:`_ftetwild_mesh`), it can leave zero-volume tets (a MeshError), and it takes
  0.3-7 s where TetGen takes 0.01-0.3 s.
- ``"gmsh"``: Gmsh (C. Geuzaine, J.-F. Remacle, 2009, "Gmsh: a 3-D finite element mesh generator with built-in
  pre- and post-processing facilities", Int. J. Numer. Meth. Engng 79(11), 1309-1331), pip ``gmsh``. Licence:
  GPL-2.0-or-later; the exception in its LICENSE.txt only permits combining it with Netgen, METIS, OpenCASCADE
  and ParaView: it is not a linking exception (commercial licences from the authors). Its 3-D Delaunay
  recovers the boundary with Hang Si's TetGen/BR code, relicensed to Gmsh under Gmsh's licence. The surface is
  classified into patches at sharp edges and re-meshed: flat patches at ``max_edge``, curved ones no coarser
  than the input facets there (see :func:`_gmsh`). Deterministic; 0.02-2 s.
- ``"auto"``: :data:`DEFAULT_MESHER` if its package is installed, else the first installed of
  :data:`AUTO_ORDER` (most permissive licence first).

Whatever the mesher, a surface it refuses (self-intersecting) and a surface made of several overlapping shells
(a mug and its handle) go to fTetWild, which meshes the solid they enclose; a
:class:`~impactsound.mesh.surface.MeshWarning` line says so.

Measured (P2, the first 20 nonrigid modes against a TetGen mesh with half the edge, or half the wall for thin
walls; tetgen 0.8.4, pytetwild 0.4.2, gmsh 4.15.2). All three pass the modal validation checks: the 10 mm
steel sphere's Lamb modes (max_edge 3 mm) within 0.32 / 0.36 / 0.64 % (TetGen / fTetWild / Gmsh; 1 % allowed)
and the 500 mm steel bar's bending modes (max_edge 10 mm) within 0.10 / 0.07 / 0.09 %. At the default
max_edge, the modes at or below 20 kHz are within 1 % on 8 / 7 / 8 of 10 shapes (the demo's bar, bowl, ball and
block, a 2 mm plate, a torus, an L-bracket, a mug with 5 mm walls, and the two above): all miss on the mug
(3.8 / 7.4 / 6.1 %), TetGen and fTetWild on the demo bowl (2.5 / 2.3 %; Gmsh 0.95 %, its surface being finer
there), Gmsh on the demo bar (1.16 %: at the same max_edge it puts fewer nodes on flat faces than TetGen); fTetWild
failed on the torus (zero-volume tets), and a second fTetWild run moved the modes by up to 1.4 %. Thin walls need
a finer max_edge whatever the mesher (the demo bowl at max_edge = its 5 mm wall: 0.68 % with TetGen).

Whatever the mesher, the output goes through :func:`orient_tets`: tets are made positively oriented and
degenerate ones (|V| tiny against the mesh scale) are rejected, since an inverted or flat element makes the
stiffness matrix K indefinite or singular; so are tangled meshes (a mix of orientations, or tets overlapping
across a shared face), which flipping would only hide.
"""
from __future__ import annotations

import functools
import math
import os
import threading

import numpy as np

from ..errors import InputError, MeshError

DEFAULT_MESHER = "tetgen"      # what tetrahedralize(mesher=None) uses; part of the modal-cache key
FALLBACK_MESHER = "ftetwild"   # for what the chosen mesher refuses (self-intersecting, overlapping shells)
DEFAULT_QUALITY = 1.5      # TetGen radius-edge ratio bound (-q); 1.5 keeps dihedral angles away from 0/180

# mesher -> (pip package, licence), as the errors name them
MESHERS: dict[str, tuple[str, str]] = {
    "tetgen": ("tetgen", "AGPL-3.0-or-later (TetGen; the pip package's wrapper is MIT)"),
    "ftetwild": ("pytetwild", "MPL-2.0 (fTetWild, pytetwild)"),
    "gmsh": ("gmsh", "GPL-2.0-or-later (Gmsh; no general linking exception)"),
}
AUTO_ORDER = ("ftetwild", "gmsh", "tetgen")     # "auto" after DEFAULT_MESHER: most permissive licence first


def mesher_available(name: str) -> bool:
    """Whether ``name``'s Python package (see :data:`MESHERS`) is installed and loads."""
    if name == "tetgen":
        import importlib.util
        return importlib.util.find_spec("tetgen") is not None
    if name == "ftetwild":
        return _import_ftetwild() is not None
    if name == "gmsh":
        return _import_gmsh() is not None
    return False


def resolve_mesher(mesher: str | None = None, source: str = "mesh") -> str:
    """The mesher ``tetrahedralize(mesher=...)`` uses: None -> :data:`DEFAULT_MESHER`, ``"auto"`` -> the first
    installed of DEFAULT_MESHER and :data:`AUTO_ORDER`. Raises InputError for an unknown name, or one whose
    package is not installed (naming the pip package and its licence)."""
    name = DEFAULT_MESHER if mesher is None else str(mesher).lower()
    if name == "auto":
        for cand in (DEFAULT_MESHER,) + AUTO_ORDER:
            if mesher_available(cand):
                return cand
        raise InputError(f"{source}: mesher = 'auto' found no tetrahedral mesher installed; install one of: "
                         + "; ".join(f"pip install {pip} ({name_}, licence {lic})"
                                     for name_, (pip, lic) in MESHERS.items()))
    if name not in MESHERS:
        raise InputError(f"{source}: mesher = {mesher!r} is not one of {', '.join(MESHERS)}, auto")
    if not mesher_available(name):
        pip, lic = MESHERS[name]
        raise InputError(f"{source}: mesher = {name!r} needs the Python package {pip!r}, which is not installed "
                         f"(or does not load): pip install {pip} (licence {lic}); or choose another mesher "
                         f"(mesher = 'auto' takes the first installed)")
    return name


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


#: default target edge of a curved thin wall, as a fraction of its thickness 2 V / A, and how much thicker than the
#: wall the object's bounding box must be for the wall to count as curved (see :func:`_default_max_edge`)
WALL_EDGE_FRACTION = 0.8
CURVED_WALL_RATIO = 3.0
#: TetGen's tets per A / t^2 at max_edge = 0.8 t (measured: mug 15.3, demo bowl 15.3, a 3 mm cup 16.4), and the
#: most the wall rule may ask for (P2 ~60 k nodes, ~30 s of eigen-solve on 2 cores); thinner walls get a coarser
#: edge (fewer tets, less accurate) rather than minutes of solve: the thin-shell model is made for them
WALL_TETS_PER_AREA = 15.5
WALL_TET_BUDGET = 40_000


def _box_edge(mesh) -> float:
    """The box rule of :func:`_default_max_edge`: 1/5 of the smallest bounding-box side, at least 1/25 of the
    largest."""
    ext = np.asarray(mesh.extents, dtype=np.float64)
    return float(max(ext.min() / 5.0, ext.max() / 25.0))


def _default_max_edge(mesh) -> float:
    """Default target edge length [m]: 1/5 of the smallest bounding-box side (at least 1/25 of the largest), and at
    most 0.8 x the wall thickness t = 2 V / A.

    TetGen's tets under the regular-tet volume bound come out ~2x shorter than the bound, so a few-cm object
    gets ~1-4 k P2 nodes: seconds to solve. Measured: the P2 bar and sphere of the modal validation checks stay
    within 0.5 % of the analytic modes at this density; 1/8 (the first choice) gave 8x the nodes and 92 s for a
    6 x 5 x 4 cm block for no audible gain.

    Thin walls need more: with one P2 element through the wall (what TetGen makes at the box rule) the demo bowl
    and a mug, both 5 mm walls, have modes below 20 kHz 2.5 % and 3.8 % high. Against TetGen references at half
    the wall (mug, first 20 modes, 2.5-17 kHz): max_edge 8 mm 3.4 %, 6.5 mm 2.5 %, 5 mm 1.9 %, 4.5 mm 1.45 %,
    4.1 mm (0.84 t) 0.66 %, 3.5 mm 0.41 %; the bowl 0.68 % already at 5 mm. The error drops once the bound lets
    TetGen put two elements through the wall, so the bound is 0.8 t for walls bent into a volume (a bounding box
    whose smallest side is over 3 t: cups, bowls, mugs, cans). A flat plate does not need it: the 0.10 x 0.08 x
    0.002 m steel plate is 1.04 % off at the box rule (4 mm, 2.6 s) and 0.06 % at 0.8 t (1.5 mm) for 30x the solve
    time (79 s), against a 1 mm reference. t = 2 V / A is the thickness of a thin wall and at least a third of a
    solid's smallest size (a cube's side / 3, a sphere's diameter / 3), so solid objects keep the box rule.
    The bound is relaxed where it would ask TetGen for more than :data:`WALL_TET_BUDGET` tets (walls much thinner
    than their extent: a 3 mm wall on a 8 cm cup gets 1.2 t, ~2-3 % high modes; a thin shell is the right model)."""
    ext = np.asarray(mesh.extents, dtype=np.float64)
    h = _box_edge(mesh)
    A, V = float(mesh.area), abs(float(mesh.volume))
    if A > 0 and V > 0:
        t = 2.0 * V / A
        if ext.min() > CURVED_WALL_RATIO * t:
            hw = WALL_EDGE_FRACTION * t
            n = WALL_TETS_PER_AREA * A / t**2              # TetGen's tets at hw (two elements through the wall)
            if n > WALL_TET_BUDGET:
                hw *= math.sqrt(n / WALL_TET_BUDGET)        # in-plane refinement only: n ~ 1 / h^2
            h = min(h, hw)
    return h


def tetrahedralize(mesh, max_edge: float | None = None, quality: float = DEFAULT_QUALITY,
                   source: str = "mesh", *, progress=None, info: dict | None = None,
                   mesher: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fill a closed, checked surface (trimesh.Trimesh) with tetrahedra.

    max_edge: target edge length [m]; None picks :func:`_default_max_edge`. TetGen: the volume bound
        V_max = max_edge^3/(6 sqrt 2), the volume of a regular tet of that edge (its tets come out ~2x shorter);
        fTetWild: its ideal edge length; Gmsh: its maximum element size.
    quality: radius-edge ratio bound (> 1; smaller = better shaped, more nodes), TetGen only.
    mesher: "tetgen" (AGPL-3.0-or-later), "ftetwild" (MPL-2.0), "gmsh" (GPL-2.0-or-later), "auto", or None for
        :data:`DEFAULT_MESHER`; see the module docstring. InputError if its pip package is not installed.
    A surface the chosen mesher refuses (self-intersections), or a surface of several overlapping shells, is
    meshed by fTetWild instead (the solid they enclose, the union of the shells), told through ``progress``
    (callable(stage: str)) and one :class:`~impactsound.mesh.surface.MeshWarning` line. ``info`` (a dict), if
    given, receives ``mesher`` (the one that made the mesh) and, for the fTetWild fallback, ``reason``.
    Returns nodes (n, 3) float64 [m] and tets (m, 4) int64, positively oriented, every node used, one body.
    """
    say = progress or (lambda stage: None)
    name = resolve_mesher(mesher, source)
    defaulted = max_edge is None
    if defaulted:
        max_edge = _default_max_edge(mesh)
    if not (max_edge > 0 and math.isfinite(max_edge)):
        raise MeshError(f"{source}: max_edge = {max_edge!r} m must be a positive length")
    if not quality > 1.0:
        raise MeshError(f"{source}: quality = {quality!r} must be > 1 (TetGen radius-edge ratio bound)")
    n_shells = int(mesh.body_count)
    reason = ""
    if name == "ftetwild":
        nodes, tets = _ftetwild_mesh(mesh, max_edge, source, "", say)
    elif n_shells > 1:
        # TetGen and Gmsh would refuse crossing shells and mesh touching ones as separate bodies
        reason = f"the surface is {n_shells} overlapping shells"
    else:
        try:
            if name == "tetgen":
                nodes, tets = _tetgen(mesh, max_edge, quality, source)
            else:
                say("Gmsh")
                nodes, tets = _gmsh(mesh, max_edge, source)
        except _Refused as exc:
            reason = f"{_LABEL[name]} refused the surface ({exc})"
    if reason:
        if defaulted:
            # a self-intersecting or multi-shell surface's 2 V / A is not a wall thickness: the box rule
            max_edge = _box_edge(mesh)
        nodes, tets = _ftetwild(mesh, max_edge, source, reason, say)
    if info is not None:
        info["mesher"] = FALLBACK_MESHER if reason else name
        if reason:
            info["reason"] = reason
    return nodes, tets


_LABEL = {"tetgen": "TetGen", "ftetwild": "fTetWild", "gmsh": "Gmsh"}


class _Refused(Exception):
    """The mesher could not mesh this surface as given (self-intersecting, say): fTetWild gets it."""


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
        raise _Refused(" ".join(str(exc).split()).rstrip(".")) from None
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if len(tets) == 0:
        raise _Refused("it produced no tetrahedra")
    nodes, tets = _drop_unused(nodes, tets)
    return nodes, orient_tets(nodes, tets, source)


@functools.lru_cache(maxsize=1)
def _import_gmsh():
    """The ``gmsh`` module, or None if it is not installed or its shared library (libgmsh) is missing."""
    try:
        import gmsh
    except (ImportError, OSError):
        return None
    return gmsh if getattr(gmsh, "libpath", None) else None


_GMSH_LOCK = threading.Lock()        # Gmsh keeps one global state: one meshing at a time
_GMSH_FEATURE_ANGLE = 40.0           # degrees: dihedral angle above which an input edge is a patch boundary
_GMSH_FLAT = 1e-3                    # rad: a patch whose facet normals all lie this close is flat


def _gmsh(mesh, max_edge: float, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Tet mesh of a closed single-shell surface with Gmsh (Geuzaine & Remacle 2009): the STL re-meshing route
    of Gmsh's tutorial t13 (classify the triangles into patches at sharp edges, reparametrise each patch,
    re-mesh the surface, then 3-D Delaunay inside, with Gmsh's default tet optimisation).

    Size: ``max_edge`` everywhere, and on a curved patch (and its curves and corners) no more than the shortest
    input edge at the nearest input vertex, so that the re-meshed surface cuts shallower chords through a
    faceted curved surface: on a 10 mm icosphere of 1.5 mm facets at max_edge 3 mm, the volume came out 2.3 %
    small and the P2 Lamb modes 1.0-1.2 % high with max_edge alone, 0.74 % and 0.64 % with the cap (TetGen,
    which keeps the input vertices: 0 and 0.32 %). Gmsh's curvature-based sizing is no substitute: on faceted
    input it asked for 12-63 k vertices where 1 k do. The interior is not graded from the surface
    (``Mesh.MeshSizeExtendFromBoundary`` off). One thread (two runs gave the same mesh on every shape measured);
    a Gmsh session the caller already has keeps its current model and the options set here.
    """
    gmsh = _import_gmsh()
    v = np.ascontiguousarray(mesh.vertices, dtype=np.float64)
    f = np.ascontiguousarray(mesh.faces, dtype=np.int64)
    # length of the shortest input edge at each input vertex: the size a curved patch gets near it at most
    e = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    e = np.unique(e, axis=0)
    le = np.linalg.norm(v[e[:, 0]] - v[e[:, 1]], axis=1)
    ell = np.full(len(v), np.inf)
    np.minimum.at(ell, e[:, 0], le)
    np.minimum.at(ell, e[:, 1], le)
    from scipy.spatial import cKDTree
    tree = cKDTree(v)
    h = float(max_edge)
    options = {"General.Terminal": 0, "General.Verbosity": 1, "General.NumThreads": 1,
               "Mesh.MeshSizeMax": h, "Mesh.MeshSizeMin": 0.0, "Mesh.MeshSizeFromPoints": 0,
               "Mesh.MeshSizeFromCurvature": 0, "Mesh.MeshSizeExtendFromBoundary": 0, "Mesh.Algorithm3D": 1}
    with _GMSH_LOCK:
        own = not gmsh.isInitialized()
        if own:
            gmsh.initialize(argv=[], readConfigFiles=False, interruptible=False)
            saved, prev = {}, None
        else:
            saved = {k: gmsh.option.getNumber(k) for k in options}
            prev = gmsh.model.getCurrent()
        try:
            for k, val in options.items():
                gmsh.option.setNumber(k, val)
            gmsh.model.add("impactsound_tetrahedralize")
            s = gmsh.model.addDiscreteEntity(2)
            gmsh.model.mesh.addNodes(2, s, np.arange(1, len(v) + 1), v.ravel())
            gmsh.model.mesh.addElementsByType(s, 2, [], (f + 1).ravel())
            try:
                gmsh.model.mesh.classifySurfaces(math.radians(_GMSH_FEATURE_ANGLE), True, True, math.pi)
                gmsh.model.mesh.createGeometry()
                patches = [t for _, t in gmsh.model.getEntities(2)]
                flat = set()
                for t in patches:
                    _, _, tri = gmsh.model.mesh.getElements(2, t)
                    if not len(tri):
                        continue
                    x = v[np.asarray(tri[0], dtype=np.int64).reshape(-1, 3) - 1]
                    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
                    n /= np.linalg.norm(n, axis=1, keepdims=True)
                    if np.all(n @ n.mean(axis=0) >= math.cos(_GMSH_FLAT) * np.linalg.norm(n.mean(axis=0))):
                        flat.add(t)

                # curves and corners where only flat patches meet are flat too
                flat1 = {c for _, c in gmsh.model.getEntities(1)
                         if all(t in flat for t in gmsh.model.getAdjacencies(1, c)[0])}
                flat_dim = {0: {p for _, p in gmsh.model.getEntities(0)
                                if all(c in flat1 for c in gmsh.model.getAdjacencies(0, p)[0])}, 1: flat1, 2: flat}

                def size(dim, tag, x, y, z, lc):
                    if dim == 3 or tag in flat_dim[dim]:
                        return min(lc, h)
                    return min(lc, h, float(ell[tree.query((x, y, z))[1]]))

                gmsh.model.mesh.setSizeCallback(size)
                loop = gmsh.model.geo.addSurfaceLoop(patches)
                gmsh.model.geo.addVolume([loop])
                gmsh.model.geo.synchronize()
                gmsh.model.mesh.generate(3)
            except Exception as exc:       # Gmsh raises a bare Exception with its last error message
                raise _Refused(" ".join(str(exc).split()).rstrip(".") or type(exc).__name__) from None
            tags, xyz, _ = gmsh.model.mesh.getNodes()
            _, conn = gmsh.model.mesh.getElementsByType(4)
        finally:
            if own:
                gmsh.finalize()
            else:
                gmsh.model.mesh.removeSizeCallback()
                gmsh.model.remove()
                if prev:
                    gmsh.model.setCurrent(prev)
                for k, val in saved.items():
                    gmsh.option.setNumber(k, val)
    tags = np.asarray(tags, dtype=np.int64)
    if len(conn) == 0:
        raise _Refused("it produced no tetrahedra")
    index = np.full(int(tags.max()) + 1, -1, dtype=np.int64)
    index[tags] = np.arange(len(tags))
    nodes = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)
    tets = index[np.asarray(conn, dtype=np.int64)].reshape(-1, 4)
    nodes, tets = _drop_unused(nodes, tets)
    return nodes, orient_tets(nodes, tets, source + " (Gmsh mesh)")


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
    """The fallback: fTetWild's mesh of what the chosen mesher refused (``reason``), with one
    :class:`~impactsound.mesh.surface.MeshWarning` line saying so (and the volumes, since the union of
    overlapping shells is smaller than the surface's signed volume)."""
    import time
    import warnings

    from .surface import MeshWarning

    t0 = time.perf_counter()
    nodes, tets = _ftetwild_mesh(mesh, max_edge, source, reason, say)
    vol = float(signed_volumes(nodes, tets).sum())
    warnings.warn(f"{source}: {reason}; {outcome} (fTetWild, licence MPL-2.0: {len(tets)} tets in "
                  f"{time.perf_counter() - t0:.1f} s, volume {vol:.4g} m^3; the surface's signed volume, which "
                  f"counts overlaps twice, is {float(mesh.volume):.4g} m^3)", MeshWarning, stacklevel=3)
    return nodes, tets


def _ftetwild_mesh(mesh, max_edge: float, source: str, reason: str, say) -> tuple[np.ndarray, np.ndarray]:
    """Tet mesh of the solid bounded by ``mesh`` (the union of its shells, by generalised winding number) with
    fTetWild (Hu et al. 2020, "Fast Tetrahedral Meshing in the Wild", ACM Trans. Graph. 39(4)); ``reason``
    (why fTetWild, "" when it was chosen) prefixes the errors.

    Its ideal edge length is set to ``max_edge``: measured on a 4 x 3 x 2 cm ABS block, that gives ~0.4x the
    nodes of TetGen at the same ``max_edge`` with the first six P2 modes within 0.15 % of TetGen's; with its
    element optimisation on (the default here) the worst tet is better shaped than TetGen's (radius-ratio-like
    quality 0.34 vs 0.05); without it there are slivers. Its surface lies within 1e-3 of the bounding-box
    diagonal of the input (the envelope), so the volume matches the input's to ~1e-4.
    It is not deterministic (two runs give different meshes, whatever the thread count: the P2 modes of the demo
    bar differed by 0.6 % between two runs) and it can leave zero-volume tets, which :func:`orient_tets` rejects
    (MeshError): on a torus (R 30 mm, r 8 mm, 32 x 32 facets) at the default max_edge, in 5 of 5 runs with
    pytetwild's default thread count (all cores, 2 here) and in 5 of 10 with one thread, those runs taking
    60-95 s against 4-5 s for the clean ones. Hence one thread.
    """
    why = f"{reason}, and " if reason else ""
    tw = _import_ftetwild()
    if tw is None:
        pip, lic = MESHERS["ftetwild"]
        raise MeshError(f"{source}: {why}fTetWild (pip {pip}, licence {lic}) is not installed to mesh it"
                        f"{' instead' if reason else ''}; install {pip}, or repair the surface (e.g. MeshLab "
                        f"'remove self-intersections')")
    say("fTetWild")
    v = np.ascontiguousarray(mesh.vertices, dtype=np.float64)
    f = np.ascontiguousarray(mesh.faces, dtype=np.int32)
    # fTetWild writes its tracked surface to __tracked_surface.stl in the working directory: don't litter
    litter = os.path.abspath("__tracked_surface.stl")
    had = os.path.exists(litter)
    try:
        nodes, tets = tw(v, f, edge_length_abs=float(max_edge), optimize=True, quiet=True, **_one_thread(tw))
    except Exception as exc:
        raise MeshError(f"{source}: {why}fTetWild failed{' too' if reason else ''} ({type(exc).__name__}: "
                        f"{exc}); repair the surface") from None
    finally:
        if not had:
            try:
                os.remove(litter)
            except OSError:
                pass
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if len(tets) == 0:
        raise MeshError(f"{source}: {why}fTetWild found no solid inside it; check that the surface is closed")
    nodes, tets = _drop_unused(nodes, tets)
    tets = orient_tets(nodes, tets, source + " (fTetWild mesh)")      # fTetWild's tets are negatively oriented
    n_comp = _components(len(nodes), tets)
    if n_comp > 1:
        raise MeshError(f"{source}: the solid is {n_comp} separate bodies (shells that neither touch nor "
                        f"overlap); give each its own object (trimesh: mesh.split()), or make the parts overlap")
    return nodes, tets


def _one_thread(tw) -> dict:
    """``num_threads=1`` for a pytetwild that takes it (0.4 does; an older one runs with its own default)."""
    import inspect
    try:
        return {"num_threads": 1} if "num_threads" in inspect.signature(tw).parameters else {}
    except (TypeError, ValueError):  # pragma: no cover - a signature inspect cannot read
        return {}


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
