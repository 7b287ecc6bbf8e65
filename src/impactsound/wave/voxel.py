"""Voxelization for the FDTD solver. Which grid cells lie inside a closed triangle mesh: exact ray parity along z, one
ray per (x, y) column.

Generic point-in-mesh queries (trimesh ``contains``: one ray per point, R-tree candidate search) cost minutes and
gigabytes on a 180^3 FDTD grid; the grid's structure makes one ray per column enough. For every triangle, the
columns whose (x, y) centre falls inside its xy projection get the z of the crossing; sorting the crossings of a
column and filling between consecutive pairs gives the cells whose centres are inside (even-odd rule, valid for a
watertight surface). Rays are shifted by a tiny irrational fraction of the cell so that they never pass exactly
through a mesh vertex or edge (double counting there would flip the parity).

Cost: O(triangles x columns under each triangle + cells), compiled; ~0.1 s at 180^3.

:func:`voxelize` turns such a solid (or any inside test) into the rigid-body boundary of the FDTD solver
(:mod:`impactsound.wave.fdtd`): the body faces between solid and air cells, and the solid cells next to them.

Thin walls (:func:`thin_walls`). A wall thinner than a cell can lie between two cell centres: both cells are air,
and the staircase body alone would let air flow through the wall. Along every grid line through cell centres (all
three axes), a stretch of solid that holds no cell centre (a closed mesh's entry and exit between the same two
centres), or any crossing of an open surface (a zero-thickness shell), makes the face between those two centres a
*wall face*: it moves with the wall and the air on both sides sees it (a rigid screen on the staggered grid: the
velocity nodes the wall cuts are held at the wall's velocity). Any path of neighbouring air cells from one side of
a wall to the other crosses it on some centre-to-centre segment, so the wall faces leave no leak, whatever the
wall's thickness or slope. Measured (tests/unit/test_fdtd_thin_walls.py): a sealed shell 0.3 cells thick keeps
a source's sound in exactly; a rigid disk's dipole comes out 1 + ~3 h / a too loud (h the cell, a the radius:
the screen's edge acts about a cell further out), converging to Lamb's as h falls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from ..errors import SolverError

if TYPE_CHECKING:                      # (fdtd imports this module: no import of it at run time)
    from .fdtd import Grid

# ray offsets in units of the column spacing: irrational, far below any meaningful geometric scale
_JITTER = (1.2345678e-7 * np.sqrt(2.0), 1.2345678e-7 * np.sqrt(3.0))


@njit(cache=True)
def _crossings(tri, xs, ys, count_only, counts, offsets, zbuf):
    """For each triangle, the columns (i, j) it covers and the z of the crossing there. With count_only, only
    counts[i, j] is incremented; otherwise the z values are written at offsets[i, j] + running index."""
    nx, ny = xs.size, ys.size
    x0, dxs = xs[0], xs[1] - xs[0] if nx > 1 else 1.0
    y0, dys = ys[0], ys[1] - ys[0] if ny > 1 else 1.0
    for t in range(tri.shape[0]):
        ax, ay, az = tri[t, 0, 0], tri[t, 0, 1], tri[t, 0, 2]
        bx, by, bz = tri[t, 1, 0], tri[t, 1, 1], tri[t, 1, 2]
        cx, cy, cz = tri[t, 2, 0], tri[t, 2, 1], tri[t, 2, 2]
        det = (bx - ax) * (cy - ay) - (cx - ax) * (by - ay)
        if det == 0.0:
            continue                      # vertical (edge-on) triangle: a z-ray never crosses its interior
        i0 = max(int(np.ceil((min(ax, bx, cx) - x0) / dxs)), 0)
        i1 = min(int(np.floor((max(ax, bx, cx) - x0) / dxs)), nx - 1)
        j0 = max(int(np.ceil((min(ay, by, cy) - y0) / dys)), 0)
        j1 = min(int(np.floor((max(ay, by, cy) - y0) / dys)), ny - 1)
        for i in range(i0, i1 + 1):
            px = xs[i]
            for j in range(j0, j1 + 1):
                py = ys[j]
                # barycentric coordinates of (px, py) in the projected triangle
                l1 = ((px - ax) * (cy - ay) - (cx - ax) * (py - ay)) / det
                l2 = ((bx - ax) * (py - ay) - (px - ax) * (by - ay)) / det
                l0 = 1.0 - l1 - l2
                if l0 < 0.0 or l1 < 0.0 or l2 < 0.0:
                    continue
                if count_only:
                    counts[i, j] += 1
                else:
                    zbuf[offsets[i, j] + counts[i, j]] = l0 * az + l1 * bz + l2 * cz
                    counts[i, j] += 1


@njit(cache=True)
def _fill(zs, counts, offsets, zbuf, solid):
    nx, ny = counts.shape
    nz = zs.size
    odd = 0
    for i in range(nx):
        for j in range(ny):
            n = counts[i, j]
            if n == 0:
                continue
            if n % 2 == 1:
                odd += 1
                continue                 # open surface along this ray: leave the column empty, report it
            zc = np.sort(zbuf[offsets[i, j]:offsets[i, j] + n])
            for p in range(0, n, 2):
                lo, hi = zc[p], zc[p + 1]
                for k in range(nz):
                    if lo < zs[k] < hi:
                        solid[i, j, k] = True
    return odd


@njit(cache=True)
def _walls(zs, counts, offsets, zbuf, open_surface, wall):
    """wall[i, j, k] = True where the face between centres zs[k] and zs[k + 1] of column (i, j) is crossed by a
    stretch of solid holding no centre (closed: consecutive crossing pairs) or by any crossing (open_surface)."""
    nx, ny = counts.shape
    nz = zs.size
    for i in range(nx):
        for j in range(ny):
            n = counts[i, j]
            if n == 0 or (n % 2 == 1 and not open_surface):
                continue
            zc = np.sort(zbuf[offsets[i, j]:offsets[i, j] + n])
            step = 1 if open_surface else 2
            for p in range(0, n - step + 1, step):
                lo = zc[p]
                hi = zc[p + step - 1]
                # zs[k] <= lo: no centre strictly inside (lo, hi), the solid's cells as _fill counts them
                k = np.searchsorted(zs, lo, side="right") - 1
                if 0 <= k < nz - 1 and hi <= zs[k + 1]:
                    wall[i, j, k] = True


def _column_crossings(tri, xs, ys):
    """Crossings of z-rays at (xs[i], ys[j]) with the triangles: (counts, offsets, z values)."""
    counts = np.zeros((len(xs), len(ys)), np.int64)
    offsets = np.zeros_like(counts)
    _crossings(tri, xs, ys, True, counts, offsets, np.zeros(0))
    offsets.ravel()[1:] = np.cumsum(counts.ravel())[:-1]
    zbuf = np.empty(int(counts.sum()))
    counts[:] = 0
    _crossings(tri, xs, ys, False, counts, offsets, zbuf)
    return counts, offsets, zbuf


def thin_walls(vertices: np.ndarray, faces: np.ndarray, xs: np.ndarray, ys: np.ndarray, zs: np.ndarray, *,
               open_surface: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The wall faces of a surface on a grid of cell centres (module docstring, "Thin walls").

    Parameters
    ----------
    vertices, faces : ndarray
        The surface: (nv, 3) points [m] and (nf, 3) triangles. Closed (a solid's boundary), or with
        ``open_surface`` any triangle surface, e.g. a shell's mid-surface.
    xs, ys, zs : ndarray
        Uniformly spaced cell-centre coordinates [m].
    open_surface : bool, optional
        Every crossing is a wall (zero thickness) instead of every stretch of solid between two centres.

    Returns
    -------
    wx, wy, wz : ndarray of bool, shapes (nx - 1, ny, nz), (nx, ny - 1, nz), (nx, ny, nz - 1)
        wa[..] True: the face between the centre and its upper neighbour along axis a is a wall face.
    """
    c = [np.ascontiguousarray(a, np.float64) for a in (xs, ys, zs)]
    d = [a[1] - a[0] if len(a) > 1 else 1.0 for a in c]
    base = np.asarray(vertices, np.float64)[np.asarray(faces, np.int64)]
    out = []
    for ax in range(3):
        u, v = [a for a in range(3) if a != ax]
        tri = base[..., [u, v, ax]].copy()       # rays along ax, columns over (u, v)
        tri[..., 0] -= _JITTER[0] * d[u]
        tri[..., 1] -= _JITTER[1] * d[v]
        counts, offsets, zbuf = _column_crossings(tri, c[u], c[v])
        w = np.zeros((len(c[u]), len(c[v]), max(len(c[ax]) - 1, 0)), bool)
        _walls(c[ax], counts, offsets, zbuf, open_surface, w)
        # back to (x, y, z) order: w is indexed (u, v, ax)
        out.append(np.moveaxis(w, 2, ax) if ax != 2 else w)
    return out[0], out[1], out[2]


def inside_grid(vertices: np.ndarray, faces: np.ndarray, xs: np.ndarray, ys: np.ndarray,
                zs: np.ndarray) -> tuple[np.ndarray, int]:
    """Which cell centres (xs[i], ys[j], zs[k]) lie inside a closed mesh (module docstring).

    Parameters
    ----------
    vertices, faces : ndarray
        The closed mesh: (nv, 3) points [m] and (nf, 3) triangles (orientation does not matter).
    xs, ys : ndarray
        Uniformly spaced cell-centre coordinates along x and y [m] (one ray per (x, y) column).
    zs : ndarray
        Cell-centre coordinates along z [m].

    Returns
    -------
    solid : ndarray of bool, shape (len(xs), len(ys), len(zs))
        True inside.
    n_odd_columns : int
        Columns whose ray crossed the surface an odd number of times (open or self-intersecting there); those
        columns are left empty.
    """
    xs = np.ascontiguousarray(xs, np.float64)
    ys = np.ascontiguousarray(ys, np.float64)
    zs = np.ascontiguousarray(zs, np.float64)
    dx = xs[1] - xs[0] if len(xs) > 1 else 1.0
    dy = ys[1] - ys[0] if len(ys) > 1 else 1.0
    tri = np.asarray(vertices, np.float64)[np.asarray(faces, np.int64)].copy()
    # shift the mesh instead of the rays (same thing): rays at exact column centres
    tri[..., 0] -= _JITTER[0] * dx
    tri[..., 1] -= _JITTER[1] * dy
    counts, offsets, zbuf = _column_crossings(tri, xs, ys)
    solid = np.zeros((len(xs), len(ys), len(zs)), bool)
    odd = _fill(zs, counts, offsets, zbuf, solid)
    return solid, int(odd)


@dataclass
class BodyBoundary:
    """Voxelized rigid body: the solid cells next to air and the body faces between solid and air.

    Cell indices count the grid's cells from 1 (index 0 and n + 1 are a padding layer outside the grid).

    Attributes
    ----------
    solid : ndarray of int64, shape (m, 3)
        The solid cells that touch a body face (i, j, k).
    faces : ndarray of int64, shape (n, 5)
        Rows (axis, i, j, k, sign): the face along ``axis`` on the upper side of cell (i, j, k); sign +1: the air
        cell is the lower cell (i, j, k), -1: the upper one, 0: both are air (a wall face, :func:`thin_walls`).
    centres : ndarray, shape (n, 3)
        World positions of the face centres [m].
    """

    solid: np.ndarray
    faces: np.ndarray
    centres: np.ndarray

    @property
    def axis(self) -> np.ndarray:
        """Axis (0, 1, 2) of each body face."""
        return self.faces[:, 0]


def voxelize(grid: Grid, inside, walls=None) -> BodyBoundary:
    """Voxelize a body on ``grid``: ``inside(points (n, 3)) -> bool (n,)`` tells which cell centres are solid.

    If ``inside`` also has ``grid_solid(xs, ys, zs) -> bool (nx, ny, nz)`` (e.g. a mesh through
    :func:`inside_grid`), that structured query is used instead of one point query per cell. ``walls``, the
    (wx, wy, wz) of :func:`thin_walls` on the grid's interior cell centres (or, when not given, what ``inside``'s
    ``grid_walls(xs, ys, zs)`` returns, if it has one), adds the wall faces between air cells (sign 0); ``inside``
    may be ``None`` (a zero-thickness surface: walls only).

    Parameters
    ----------
    grid : impactsound.wave.fdtd.Grid
        The FDTD grid (cell centres, size dx [m], absorbing-layer width).
    inside : callable
        points (n, 3) [m] -> bool (n,), optionally with a ``grid_solid`` method as above.

    Returns
    -------
    BodyBoundary
        The body faces and the solid surface layer.

    Raises
    ------
    SolverError
        The body reaches into the absorbing layer.
    """
    nx, ny, nz = grid.shape
    xs, ys, zs = (grid.cell_centres(a) for a in range(3))
    solid = np.zeros((nx + 2, ny + 2, nz + 2), dtype=bool)
    if walls is None and hasattr(inside, "grid_walls"):
        walls = inside.grid_walls(xs[1:-1], ys[1:-1], zs[1:-1])
    if inside is None:
        pass
    elif hasattr(inside, "grid_solid"):
        solid[1:-1, 1:-1, 1:-1] = inside.grid_solid(xs[1:-1], ys[1:-1], zs[1:-1])
    else:
        X, Y, Z = np.meshgrid(xs[1:-1], ys[1:-1], zs[1:-1], indexing="ij")
        solid[1:-1, 1:-1, 1:-1] = np.asarray(inside(np.stack([X.ravel(), Y.ravel(), Z.ravel()], 1))
                                             ).reshape(X.shape)
    p = grid.npml
    if solid[: p + 2].any() or solid[-p - 2:].any() or solid[:, : p + 2].any() or solid[:, -p - 2:].any() \
            or solid[:, :, : p + 2].any() or solid[:, :, -p - 2:].any():
        raise SolverError("the body reaches into the absorbing layer; enlarge the grid")
    rows, centres = [], []
    for ax in range(3):
        a = np.moveaxis(solid, ax, 0)
        lo, hi = a[:-1], a[1:]            # face f between cell f (lo) and f+1 (hi)
        masks = [(+1, ~lo & hi), (-1, lo & ~hi)]            # +1: air cell is the lower one
        if walls is not None:
            wm = np.zeros(lo.shape, bool)
            wm[1:-1, 1:-1, 1:-1] = np.moveaxis(np.asarray(walls[ax], bool), ax, 0)
            if wm[: p + 2].any() or wm[-p - 3:].any() or wm[:, : p + 2].any() or wm[:, -p - 2:].any() \
                    or wm[:, :, : p + 2].any() or wm[:, :, -p - 2:].any():
                raise SolverError("the body reaches into the absorbing layer; enlarge the grid")
            masks.append((0, wm & ~lo & ~hi))
        for sign, mask in masks:
            f = np.argwhere(mask)
            if not len(f):
                continue
            ijk = np.empty_like(f)
            ijk[:, ax] = f[:, 0]
            others = [d for d in range(3) if d != ax]
            ijk[:, others[0]] = f[:, 1]
            ijk[:, others[1]] = f[:, 2]
            rows.append(np.column_stack([np.full(len(f), ax), ijk, np.full(len(f), sign)]))
            cen = grid.origin + (ijk - 0.5) * grid.dx
            cen[:, ax] += 0.5 * grid.dx
            centres.append(cen)
    faces = np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 5), np.int64)
    cen = np.concatenate(centres) if centres else np.zeros((0, 3))
    # Only solid cells next to a body face need their (meaningless) pressure cleared each step: deeper solid cells
    # then never change (their faces see zero pressure differences), so the air never sees solid pressure.
    one = faces[:, 4] != 0                    # wall faces have air on both sides: no solid cell
    ijk = faces[one, 1:4].copy()
    up = faces[one, 4] > 0                    # air below the face: the solid cell is the upper one
    ijk[up, faces[one][up, 0]] += 1
    layer = np.unique(ijk, axis=0) if len(ijk) else np.zeros((0, 3), np.int64)
    return BodyBoundary(solid=layer.astype(np.int64), faces=faces, centres=cen)
