"""Loading and checking closed surface meshes, and loading given volume meshes.

A surface must bound one solid: finite coordinates, watertight, consistently wound with outward normals (positive
volume), no degenerate faces, one body (each separate body adds 6 rigid modes to the free-free modal analysis), sized in
metres. Several closed shells that touch or overlap (a mug and its handle, the parts of a toy) form one solid: they
pass here and are meshed as their union (fTetWild, see :func:`impactsound.mesh.tetra.tetrahedralize`). Shells
that are apart are separate bodies and are refused. Self-intersections of one shell are not searched for here;
TetGen refuses them and the tetrahedraliser falls back to fTetWild.

Files split at texture or normal seams (common in OBJ/glTF exports for game and robotics engines: one vertex per
(position, UV, normal) triple) are welded by position on loading (:func:`merge_seams`), since the physics needs
only the geometry.
"""
from __future__ import annotations

import io
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import MeshError

if TYPE_CHECKING:
    import trimesh

SURFACE_FORMATS = (".obj", ".stl", ".ply", ".off", ".glb", ".gltf")
VOLUME_FORMATS = (".msh", ".vtu", ".vtk", ".mesh", ".xdmf")
TEXT_FORMATS = (".obj", ".stl", ".off", ".gltf")   # read as text by trimesh (ASCII STL; binary STL is sniffed)
MAX_SIZE_M = 10.0      # bounding box larger than this: certainly not metres (an error)
MIN_SIZE_M = 1e-3      # smaller than this: certainly not metres (an error)
# Handheld and impact-sized objects (a bead to a chair): outside this a warning suggests a unit scale
PLAUSIBLE_SIZE_M = (5e-3, 1.0)
SEAM_TOL = 1e-6        # vertices closer than this times the bounding-box diagonal are one (seam welding)
UNIT_SCALES = ((1e-3, "millimetres"), (1e-2, "centimetres"), (0.0254, "inches"))


class MeshWarning(UserWarning):
    """A mesh is usable but probably not what was meant (units), or was repaired on the way (one-line message)."""


# ---- loading ------------------------------------------------------------------------------------------------
def _is_binary_stl(data: bytes) -> bool:
    # binary STL: 80-byte header, uint32 triangle count, 50 bytes per triangle
    return len(data) >= 84 and 84 + 50 * int.from_bytes(data[80:84], "little") == len(data)


def _nonfinite_line(data: bytes) -> int | None:
    """1-based line number of the first text line holding a NaN/inf number, or None (binary or none)."""
    if b"\x00" in data[:4096]:
        return None
    for no, line in enumerate(data.decode("latin-1").splitlines(), start=1):
        for tok in line.replace("/", " ").split():
            try:
                if not math.isfinite(float(tok)):
                    return no
            except ValueError:
                continue
    return None


def load_surface(path) -> "trimesh.Trimesh":
    """Read a triangle surface (OBJ/STL/PLY/OFF/glTF) with trimesh; scenes are merged into one mesh.

    Coordinates are taken as metres. Vertices split at texture/normal seams are welded (:func:`merge_seams`);
    UVs, normals and materials are dropped (the physics needs the geometry only). Text files need not be UTF-8
    (Latin-1 names in an ASCII STL are fine). Raises MeshError naming the file if it is missing, of an unknown
    format, unreadable, or has a vertex with NaN/inf coordinates (naming the vertex and the line).
    """
    import trimesh

    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{p}: mesh file not found")
    suffix = p.suffix.lower()
    if suffix not in SURFACE_FORMATS:
        raise MeshError(f"{p}: unknown surface mesh format {p.suffix!r}; use one of "
                        f"{', '.join(SURFACE_FORMATS)} (volume meshes {', '.join(VOLUME_FORMATS)} go through "
                        f"load_volume_mesh)")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise MeshError(f"{p}: cannot read the file ({exc.strerror or exc})") from None
    source = str(p)
    if suffix in TEXT_FORMATS and not (suffix == ".stl" and _is_binary_stl(data)):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            # trimesh would call on charset_normalizer (not a dependency) to guess the encoding; the numbers and
            # keywords are ASCII, so Latin-1 (which maps every byte) reads any such file losslessly
            source = io.BytesIO(data.decode("latin-1").encode("utf-8"))
    try:
        obj = trimesh.load(source, file_type=suffix[1:], process=False,
                           resolver=trimesh.resolvers.FilePathResolver(str(p)))
    except Exception as exc:  # trimesh raises many types for bad files
        raise MeshError(f"{p}: could not read the mesh ({type(exc).__name__}: {exc})") from None
    if isinstance(obj, trimesh.Scene):
        geoms = [g for g in obj.dump() if isinstance(g, trimesh.Trimesh)]
        if not geoms:
            if suffix == ".stl":
                raise MeshError(f"{p}: not an STL file: not binary ({len(data)} bytes is not 84 + 50 per "
                                f"triangle) and no ASCII 'facet ... vertex x y z' triangles; re-export it")
            raise MeshError(f"{p}: the file holds no triangle mesh")
        obj = geoms[0] if len(geoms) == 1 else trimesh.util.concatenate(geoms)
    if not isinstance(obj, trimesh.Trimesh) or len(obj.faces) == 0:
        raise MeshError(f"{p}: the file holds no triangle faces")
    v = np.asarray(obj.vertices, dtype=np.float64)
    used = np.unique(np.asarray(obj.faces).ravel())
    bad = used[~np.isfinite(v[used]).all(axis=1)]
    if len(bad):
        line = _nonfinite_line(data)
        at = f" (line {line} of the file)" if line is not None else ""
        more = f" ({len(bad)} such vertices)" if len(bad) > 1 else ""
        raise MeshError(f"{p}: vertex #{int(bad[0])}{at} has non-finite coordinates {v[bad[0]].tolist()}{more}; "
                        f"fix or remove it and the faces using it")
    # process=True merges exact duplicates; merge_seams also welds copies that differ by rounding
    mesh = trimesh.Trimesh(v, np.asarray(obj.faces, dtype=np.int64), process=True)
    return merge_seams(mesh)


def merge_seams(mesh, rel_tol: float = SEAM_TOL) -> "trimesh.Trimesh":
    """Weld vertices closer than ``rel_tol`` x the bounding-box diagonal, ignoring normals and UVs.

    Exporters split a closed surface at texture and normal seams (one vertex per position/UV/normal triple), and
    the copies may differ in the last bits; welded, the surface is watertight again. Faces that collapse (two
    corners welded) are dropped. Returns ``mesh`` itself when nothing is welded, else a new Trimesh (geometry
    only).
    """
    import trimesh
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    v = np.asarray(mesh.vertices, dtype=np.float64)
    f = np.asarray(mesh.faces, dtype=np.int64)
    if len(v) < 2 or not np.isfinite(v).all():
        return mesh
    tol = rel_tol * float(np.linalg.norm(np.ptp(v, axis=0)))
    pairs = cKDTree(v).query_pairs(tol, output_type="ndarray")
    if len(pairs) == 0:
        return mesh
    g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(v), len(v)))
    n, label = connected_components(g, directed=False)
    first = np.full(n, len(v), dtype=np.int64)
    np.minimum.at(first, label, np.arange(len(v)))          # each cluster keeps its first vertex's position
    f = label[f]
    keep = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 2] != f[:, 0])
    return trimesh.Trimesh(v[first], f[keep], process=False)


# ---- units ----------------------------------------------------------------------------------------------------
def _fmt_len(x: float) -> str:
    if x >= 1.0:
        return f"{x:.3g} m"
    if x >= 0.01:
        return f"{x * 100:.3g} cm"
    return f"{x * 1000:.3g} mm"


def _fmt_mass(m: float) -> str:
    return f"{m:,.0f} kg" if m >= 100 else f"{m:.3g} kg"


def units_advice(size: float, scale: float | None = 1.0) -> str:
    """Which unit scale would bring an object ``size`` [m] across into the plausible range, as a phrase.

    ``scale``: the scale already applied to the file's coordinates (a scene's ``scale``; the advice is then the
    value to set, read as "the file is in millimetres"), or None when the coordinates are used as given (the
    advice is a factor to scale them by).
    """
    lo, hi = PLAUSIBLE_SIZE_M
    raw = size / (scale or 1.0)
    units = ((1.0, "metres"),) + UNIT_SCALES if scale is not None else UNIT_SCALES
    # named units: for a too-large object, or for a file (whose unit may be any); else powers of ten
    named = size > hi or scale is not None
    tips = [(f, unit) for f, unit in units if named and f != scale and lo <= raw * f <= hi]
    if tips:
        if scale is not None:
            return "if the file is " + ", or ".join(f"in {u} set scale = {f:g} ({_fmt_len(raw * f)})"
                                                    for f, u in tips)
        return "if the coordinates are " + ", or ".join(f"in {u} scale them by {f:g} ({_fmt_len(raw * f)})"
                                                        for f, u in tips)
    ups = [f for f in (1e-3, 1e-2, 0.1, 10.0, 100.0, 1000.0) if lo <= size * f <= hi][:2]
    if not ups:
        return "check the units"
    if scale is not None:
        return ", or ".join(f"set scale = {scale * f:g} ({_fmt_len(size * f)})" for f in ups)
    return ", or ".join(f"scale them by {f:g} ({_fmt_len(size * f)})" for f in ups)


# ---- checks ---------------------------------------------------------------------------------------------------
def check_units(vertices, source: str = "mesh", *, scale: float | None = None, warn: bool = True) -> None:
    """The units check alone, for surfaces that need not be closed (thin-shell mid-surfaces): a bounding box
    larger than 10 m or smaller than 1 mm is a MeshError, one outside 5 mm to 1 m a :class:`MeshWarning`
    (if ``warn``), each saying which unit scale would fix it (``scale``: the one the caller already applied)."""
    v = np.asarray(vertices, dtype=np.float64)
    if not np.isfinite(v).all() or len(v) == 0:
        return                                  # the shell model's own checks name the vertex
    size = float(np.ptp(v, axis=0).max())
    if size > MAX_SIZE_M or size < MIN_SIZE_M:
        which = "is" if size > MAX_SIZE_M else "is only"
        raise MeshError(f"{source}: bounding box {which} {size:g} m across; coordinates must be in metres "
                        f"({units_advice(size, scale)})")
    lo, hi = PLAUSIBLE_SIZE_M
    if warn and not lo <= size <= hi:
        what = "large" if size > hi else "small"
        warnings.warn(f"{source}: the object is {_fmt_len(size)} across, {what} for an impact-sound object "
                      f"({_fmt_len(lo)} to {_fmt_len(hi)} expected); {units_advice(size, scale)}", MeshWarning,
                      stacklevel=2)


def check_surface(mesh, source: str = "mesh", *, density: float | None = None, scale: float | None = None,
                  warn: bool = True) -> None:
    """Raise MeshError (naming ``source``) unless ``mesh`` bounds one solid in metres.

    Checks, in order: faces present, finite vertices, units (bounding box between 1 mm and 10 m), degenerate
    faces, watertightness, consistent winding, non-zero volume (not flat), one body (shells that touch or overlap
    count as one), positive enclosed volume. A size outside the handheld/impact range (5 mm to 1 m) gives one
    :class:`MeshWarning` line (if ``warn``) saying which unit scale would fix it; ``density`` [kg/m^3] adds the
    mass to it, ``scale`` (the scale the caller already applied, e.g. a scene's) makes the advice a new scale.
    """
    # trimesh's mass properties divide by the volume: on a broken mesh that warns on stderr before our own,
    # clearer message; keep the output to the one error
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        note = _check_surface(mesh, source, density, scale)
    if note and warn:
        warnings.warn(note, MeshWarning, stacklevel=2)


def _check_surface(mesh, source: str, density, scale) -> str | None:
    if len(mesh.faces) < 4:
        raise MeshError(f"{source}: {len(mesh.faces)} faces cannot bound a solid")
    v = np.asarray(mesh.vertices, dtype=np.float64)
    used = np.unique(np.asarray(mesh.faces).ravel())
    bad = used[~np.isfinite(v[used]).all(axis=1)]
    if len(bad):
        more = f" ({len(bad)} such vertices)" if len(bad) > 1 else ""
        raise MeshError(f"{source}: vertex #{int(bad[0])} has non-finite coordinates {v[bad[0]].tolist()}{more}; "
                        f"fix or remove it and the faces using it")
    ext = np.ptp(v[used], axis=0)
    size = float(ext.max())
    if size > MAX_SIZE_M:
        raise MeshError(f"{source}: bounding box is {size:g} m across; coordinates must be in metres "
                        f"({units_advice(size, scale)})")
    if size < MIN_SIZE_M:
        raise MeshError(f"{source}: bounding box is only {size:g} m across; coordinates must be in metres "
                        f"({units_advice(size, scale)})")
    area = np.asarray(mesh.area_faces)
    tiny = area <= 1e-12 * size**2
    if tiny.any():
        raise MeshError(f"{source}: {int(tiny.sum())} degenerate (zero-area) faces, first #{int(np.argmax(tiny))}"
                        f"; remove them (trimesh: mesh.update_faces(mesh.nondegenerate_faces()); "
                        f"mesh.remove_unreferenced_vertices())")
    if not mesh.is_watertight:
        if merge_seams(mesh).is_watertight:
            raise MeshError(f"{source}: surface is split at seams (duplicate vertices at the same positions, e.g. "
                            f"per-UV/normal copies); weld them with impactsound.mesh.merge_seams(mesh) "
                            f"(load_surface does this)")
        raise MeshError(f"{source}: surface is not watertight ({_open_edges(mesh)}); close it with "
                        f"trimesh.repair.fill_holes(mesh), or re-mesh a closed surface with a robust mesher "
                        f"such as fTetWild (pip pytetwild)")
    if not mesh.is_winding_consistent:
        raise MeshError(f"{source}: faces are inconsistently wound (some normals point in, some out); fix with "
                        f"trimesh.repair.fix_winding(mesh) / fix_normals(mesh)")
    vol = float(mesh.volume)
    if not abs(vol) > 1e-9 * size**3:
        raise MeshError(f"{source}: the surface is flat (encloses {vol:.3g} m^3 inside a "
                        f"{ext[0]:.3g} x {ext[1]:.3g} x {ext[2]:.3g} m box): a sheet or degenerate solid, not a "
                        f"body; give it a thickness (e.g. extrude it) or use a closed solid mesh")
    if int(mesh.body_count) != 1:
        _check_shells(mesh, source, size)
    if not vol > 0:
        raise MeshError(f"{source}: enclosed volume is {vol:g} m^3 (normals point inwards); flip the faces "
                        f"with mesh.invert() or trimesh.repair.fix_inversion(mesh)")
    lo, hi = PLAUSIBLE_SIZE_M
    if lo <= size <= hi:
        return None
    what = "large" if size > hi else "small"
    mass = f", {_fmt_mass(density * vol)}" if density is not None else ""
    return (f"{source}: the object is {_fmt_len(size)} across{mass}, {what} for an impact-sound object "
            f"({_fmt_len(lo)} to {_fmt_len(hi)} expected); {units_advice(size, scale)}")


def _open_edges(mesh) -> str:
    from collections import Counter
    e = np.sort(np.asarray(mesh.edges), axis=1)
    counts = Counter(map(tuple, e.tolist()))
    open_ = sum(1 for c in counts.values() if c == 1)
    over = sum(1 for c in counts.values() if c > 2)
    parts = []
    if open_:
        parts.append(f"{open_} open boundary edges")
    if over:
        parts.append(f"{over} edges shared by more than two faces")
    return ", ".join(parts) or "open or non-manifold edges"


# ---- several shells -------------------------------------------------------------------------------------------
def shell_groups(mesh, tol: float | None = None) -> list[list[int]]:
    """Group the closed shells of ``mesh`` (``mesh.split()`` order) into solids: shells that touch or overlap
    (a vertex on or inside the other, or an edge through the other's faces; ``tol`` [m], default 1e-5 x size)
    are one group. One group = one solid (their union); several = separate bodies."""
    shells = mesh.split(only_watertight=False)
    n = len(shells)
    if tol is None:
        tol = 1e-5 * float(np.ptp(np.asarray(mesh.vertices), axis=0).max())
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    boxes = [np.asarray(s.bounds, dtype=np.float64) for s in shells]
    for i in range(n):
        for j in range(i + 1, n):
            if root(i) == root(j):
                continue
            if np.any(boxes[i][0] > boxes[j][1] + tol) or np.any(boxes[j][0] > boxes[i][1] + tol):
                continue
            if _shells_meet(shells[i], shells[j], tol):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _shells_meet(a, b, tol: float) -> bool:
    import trimesh
    for p, q in ((a, b), (b, a)):
        lo, hi = np.asarray(q.bounds) + np.array([[-tol], [tol]])
        pts = np.asarray(p.vertices)
        pts = pts[np.all((pts >= lo) & (pts <= hi), axis=1)]
        if len(pts):
            # trimesh: positive inside (by ray parity, so for an inverted shell too), so >= -tol is inside or on it
            if np.any(trimesh.proximity.signed_distance(q, pts) >= -tol):
                return True
    return _edges_cross(a, b) or _edges_cross(b, a)


def _edges_cross(a, b, chunk: int = 200_000) -> bool:
    """Does an edge of ``a`` pass through a triangle of ``b``? (segment-triangle test of Moeller & Trumbore,
    "Fast, minimum storage ray-triangle intersection", J. Graphics Tools 2(1), 1997, restricted to the segment)"""
    from scipy.spatial import cKDTree
    seg = np.asarray(a.vertices)[np.asarray(a.edges_unique)]                 # (ne, 2, 3)
    tri = np.asarray(b.triangles)                                           # (nf, 3, 3)
    c = tri.mean(axis=1)
    rt = float(np.linalg.norm(tri - c[:, None], axis=2).max())
    mid = seg.mean(axis=1)
    rs = 0.5 * np.linalg.norm(seg[:, 1] - seg[:, 0], axis=1)
    near = cKDTree(c).query_ball_point(mid, rs + rt)
    ei = np.repeat(np.arange(len(seg)), [len(x) for x in near])
    if len(ei) == 0:
        return False
    ti = np.concatenate([np.asarray(x, dtype=np.int64) for x in near])
    for s in range(0, len(ei), chunk):
        e, t = seg[ei[s:s + chunk]], tri[ti[s:s + chunk]]
        o, d = e[:, 0], e[:, 1] - e[:, 0]
        e1, e2 = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
        pv = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, pv)
        ok = np.abs(det) > 1e-12 * np.linalg.norm(d, axis=1) * np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1)
        inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
        tv = o - t[:, 0]
        u = np.einsum("ij,ij->i", tv, pv) * inv
        qv = np.cross(tv, e1)
        w = np.einsum("ij,ij->i", d, qv) * inv
        h = np.einsum("ij,ij->i", e2, qv) * inv
        hit = ok & (u >= 0) & (w >= 0) & (u + w <= 1) & (h >= 0) & (h <= 1)
        if hit.any():
            return True
    return False


def _check_shells(mesh, source: str, size: float) -> None:
    groups = shell_groups(mesh)
    if len(groups) == 1:
        return
    n = sum(len(g) for g in groups)
    raise MeshError(f"{source}: the surface is {len(groups)} separate bodies ({n} closed shells, e.g. a convex "
                    f"decomposition) that neither touch nor overlap; give each its own object (trimesh: "
                    f"mesh.split()), or, if they are one object, use the original mesh or make the parts overlap "
                    f"(overlapping shells are meshed as one solid, their union, by fTetWild)")


# ---- volume meshes --------------------------------------------------------------------------------------------
def load_volume_mesh(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a tetrahedral volume mesh (.msh, .vtu, ... via meshio) used as given.

    Returns nodes (n, 3) float64 [m] and tets (m, 4) int64, positively oriented, only nodes that a tet uses.
    A file whose tets are all negatively oriented (the other convention) is flipped; a mix of orientations
    (a tangled mesh), overlapping or degenerate tets and non-finite node coordinates are errors naming the tet or
    node (indices as in the file). 10-node tets keep their 4 corners (the P2 mid-edge nodes are rebuilt straight
    by the assembly).
    """
    import meshio

    from .tetra import orient_tets

    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{p}: volume mesh file not found")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
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
    if nodes.ndim != 2 or nodes.shape[1] < 3:
        raise MeshError(f"{p}: the mesh is 2-D; a 3-D tetrahedral mesh is needed")
    nodes = nodes[:, :3]
    if tets.min() < 0 or tets.max() >= len(nodes):
        i = int(np.flatnonzero((tets < 0).any(axis=1) | (tets >= len(nodes)).any(axis=1))[0])
        raise MeshError(f"{p}: tet #{i} uses node {tets[i].tolist()} outside the file's {len(nodes)} nodes")
    used = np.zeros(len(nodes), dtype=bool)
    used[tets.ravel()] = True
    bad = np.flatnonzero(used & ~np.isfinite(nodes).all(axis=1))
    if len(bad):
        k = int(bad[0])
        t = int(np.flatnonzero((tets == k).any(axis=1))[0])
        more = f"; {len(bad)} such nodes" if len(bad) > 1 else ""
        raise MeshError(f"{p}: node #{k} has non-finite coordinates {nodes[k].tolist()} (used by tet #{t}{more}); "
                        f"fix the node or re-mesh")
    size = float(np.ptp(nodes[used], axis=0).max())
    if size > MAX_SIZE_M:
        raise MeshError(f"{p}: the mesh is {size:g} m across; coordinates must be in metres "
                        f"({units_advice(size, None)})")
    if size < MIN_SIZE_M:
        raise MeshError(f"{p}: the mesh is only {size:g} m across; coordinates must be in metres "
                        f"({units_advice(size, None)})")
    # orient and check with the file's tet and node numbers (so messages point into the file), then compact
    tets = orient_tets(nodes, tets, str(p))
    remap = -np.ones(len(nodes), dtype=np.int64)
    remap[used] = np.arange(int(used.sum()))
    lo, hi = PLAUSIBLE_SIZE_M
    if not lo <= size <= hi:
        warnings.warn(f"{p}: the mesh is {_fmt_len(size)} across, {'large' if size > hi else 'small'} for an "
                      f"impact-sound object ({_fmt_len(lo)} to {_fmt_len(hi)} expected); "
                      f"{units_advice(size, None)}", MeshWarning, stacklevel=2)
    return nodes[used], remap[tets]
