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
    counts = np.zeros((len(xs), len(ys)), np.int64)
    offsets = np.zeros_like(counts)
    zbuf = np.zeros(0)
    _crossings(tri, xs, ys, True, counts, offsets, zbuf)
    offsets.ravel()[1:] = np.cumsum(counts.ravel())[:-1]
    zbuf = np.empty(int(counts.sum()))
    counts[:] = 0
    _crossings(tri, xs, ys, False, counts, offsets, zbuf)
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
        cell is the lower cell (i, j, k), -1: the upper one.
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


def voxelize(grid: Grid, inside) -> BodyBoundary:
    """Voxelize a body on ``grid``: ``inside(points (n, 3)) -> bool (n,)`` tells which cell centres are solid.

    If ``inside`` also has ``grid_solid(xs, ys, zs) -> bool (nx, ny, nz)`` (e.g. a mesh through
    :func:`inside_grid`), that structured query is used instead of one point query per cell.

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
    if hasattr(inside, "grid_solid"):
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
        for sign, mask in ((+1, ~lo & hi), (-1, lo & ~hi)):  # +1: air cell is the lower one
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
    ijk = faces[:, 1:4].copy()
    up = faces[:, 4] > 0                      # air below the face: the solid cell is the upper one
    ijk[up, faces[up, 0]] += 1
    layer = np.unique(ijk, axis=0) if len(ijk) else np.zeros((0, 3), np.int64)
    return BodyBoundary(solid=layer.astype(np.int64), faces=faces, centres=cen)
