"""First-order acoustic FDTD on a staggered (Yee-type) grid with convolutional PML and rigid-body boundaries.

Equations (specs/pan.md, "Physics"): p_t = -rho c^2 div v, v_t = -(1/rho) grad p, and on the body surface the fluid's
normal velocity follows the body (dv_n/dt = a_n, eq. 2 of the PAN paper). Second order in space and time (leapfrog:
v at half steps, p at whole steps). Stable for c dt/dx <= 1/sqrt(3) (checked before running).

Layout: p at cell centres, vx/vy/vz on the upper x/y/z face of each cell; every array is (nx+2, ny+2, nz+2) with
one ghost layer per side, so the interior update needs no bounds tests. Ghost p stays 0 (pressure-release) and the
lower ghost faces stay 0 (rigid): the outer walls sit behind the PML and only see what it failed to absorb.

The step is split so that the hot loop is one fused pass that touches each of the 4 arrays once (~32 bytes per
cell in fp32), with everything else applied as exact linear corrections over few cells:
1. PML velocity memory terms (they need p at step n): added to v before the fused pass.
2. Fused pass: v^{n+1/2} from p^n, then p^{n+1} from v^{n+1/2}, plane by plane; threads own slabs of planes and
   the faces between slabs are updated first, so the pass has no races and gives the same bits for any thread
   count.
3. PML pressure memory terms (need v^{n+1/2}): subtracted from p.
4. Body faces: the fused pass updated them as if in air; they are reset to the body's velocity and the adjacent air
   cell's pressure is corrected by the difference (p is linear in each face velocity, so this is exact).

PML: convolutional PML (Roden & Gedney 2000; kappa = 1, polynomial grading of order 3) in place of the paper's
Liu & Tao (1997) split-field PML: both are perfectly matched in the continuum, and the CPML needs memory only
inside the layers, leaving the interior kernel untouched.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import SolverError

COURANT_LIMIT = 1.0 / math.sqrt(3.0)

# Threads: compiled kernels release the GIL and run on a plain thread pool, so the result and the speed do not
# depend on Numba's threading layer (OpenMP's default wait policy was seen to stall on a fresh machine) or on the
# user's environment. Work is split into fixed slabs; every cell is updated by exactly one thread, so results are
# bit-identical for any thread count.
_POOL: ThreadPoolExecutor | None = None


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=default_threads(), thread_name_prefix="impactsound-fdtd")
    return _POOL


def _run(calls, threads: int) -> None:
    """Run [(func, args), ...]; in the pool when threads > 1 (each call touches disjoint cells)."""
    if threads <= 1 or len(calls) <= 1:
        for f, args in calls:
            f(*args)
        return
    for fut in [_pool().submit(f, *args) for f, args in calls]:
        fut.result()


# ---------------------------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def _x_faces_plane(p, vx, cv, i):
    """vx on the plane of faces i (between planes i and i+1) from p at step n."""
    ny = p.shape[1] - 2
    nz = p.shape[2] - 2
    for j in range(1, ny + 1):
        for k in range(1, nz + 1):
            vx[i, j, k] -= cv * (p[i + 1, j, k] - p[i, j, k])


@nb.njit(cache=True, nogil=True)
def _fused_slab(p, vx, vy, vz, cv, cp, a, b, last_x_done):
    """One leapfrog step on planes a..b-1: v^{n+1/2} = v^{n-1/2} - cv grad p^n, then p^{n+1} = p^n - cp div v^{n+1/2},
    row by row (each row's faces first, then its pressures, so the inner loops vectorise). The x faces of plane b-1
    need p of plane b at step n: when another slab owns plane b they were updated beforehand (last_x_done)."""
    ny = p.shape[1] - 2
    nz = p.shape[2] - 2
    for i in range(a, b):
        do_x = not (last_x_done and i == b - 1)
        for j in range(1, ny + 1):
            if do_x:
                for k in range(1, nz + 1):
                    vx[i, j, k] -= cv * (p[i + 1, j, k] - p[i, j, k])
            for k in range(1, nz + 1):
                vy[i, j, k] -= cv * (p[i, j + 1, k] - p[i, j, k])
            for k in range(1, nz + 1):
                vz[i, j, k] -= cv * (p[i, j, k + 1] - p[i, j, k])
            for k in range(1, nz + 1):
                p[i, j, k] -= cp * ((vx[i, j, k] - vx[i - 1, j, k]) + (vy[i, j, k] - vy[i, j - 1, k])
                                    + (vz[i, j, k] - vz[i, j, k - 1]))


@nb.njit(cache=True, nogil=True)
def _pml_velocity(p, v, psi, idx, a, b, coef, axis, m0, m1):
    """CPML memory term for dp/d(axis) on faces idx[m0:m1] (along ``axis``): psi = b psi + a dp, v -= coef psi."""
    n0, n1, n2 = p.shape
    for m in range(m0, m1):
        f = idx[m]
        am = a[m]
        bm = b[m]
        if axis == 0:
            for j in range(1, n1 - 1):
                for k in range(1, n2 - 1):
                    s = bm * psi[m, j, k] + am * (p[f + 1, j, k] - p[f, j, k])
                    psi[m, j, k] = s
                    v[f, j, k] -= coef * s
        elif axis == 1:
            for i in range(1, n0 - 1):
                for k in range(1, n2 - 1):
                    s = bm * psi[m, i, k] + am * (p[i, f + 1, k] - p[i, f, k])
                    psi[m, i, k] = s
                    v[i, f, k] -= coef * s



@nb.njit(cache=True, nogil=True)
def _pml_velocity_z(p, v, psi, idx, a, b, coef, i0, i1):
    """z-axis version of _pml_velocity over planes i0..i1-1; psi is (n0, n1, len(idx)) so the innermost loop
    runs along the contiguous z axis."""
    n1 = p.shape[1]
    for i in range(i0, i1):
        for j in range(1, n1 - 1):
            for m in range(idx.size):
                f = idx[m]
                s = b[m] * psi[i, j, m] + a[m] * (p[i, j, f + 1] - p[i, j, f])
                psi[i, j, m] = s
                v[i, j, f] -= coef * s


@nb.njit(cache=True, nogil=True)
def _pml_pressure_z(p, v, psi, idx, a, b, coef, i0, i1):
    """z-axis version of _pml_pressure over planes i0..i1-1 (psi is (n0, n1, len(idx)))."""
    n1 = p.shape[1]
    for i in range(i0, i1):
        for j in range(1, n1 - 1):
            for m in range(idx.size):
                c = idx[m]
                s = b[m] * psi[i, j, m] + a[m] * (v[i, j, c] - v[i, j, c - 1])
                psi[i, j, m] = s
                p[i, j, c] -= coef * s


@nb.njit(cache=True, nogil=True)
def _pml_pressure(p, v, psi, idx, a, b, coef, axis, m0, m1):
    """CPML memory term for dv/d(axis) in cells idx[m0:m1]: psi = b psi + a dv, p -= coef psi."""
    n0, n1, n2 = p.shape
    for m in range(m0, m1):
        c = idx[m]
        am = a[m]
        bm = b[m]
        if axis == 0:
            for j in range(1, n1 - 1):
                for k in range(1, n2 - 1):
                    s = bm * psi[m, j, k] + am * (v[c, j, k] - v[c - 1, j, k])
                    psi[m, j, k] = s
                    p[c, j, k] -= coef * s
        elif axis == 1:
            for i in range(1, n0 - 1):
                for k in range(1, n2 - 1):
                    s = bm * psi[m, i, k] + am * (v[i, c, k] - v[i, c - 1, k])
                    psi[m, i, k] = s
                    p[i, c, k] -= coef * s



@nb.njit(cache=True)
def _body_faces(p, vx, vy, vz, faces, vb, cp, solid):
    """Reset body faces to the body velocity vb and correct the adjacent air cell's pressure (exact: p^{n+1} is
    linear in each face velocity). faces: (n, 5) int = axis, i, j, k (face index), sign (+1: the air cell is the
    lower cell, i.e. the face is its upper face; -1: the air cell is the upper one). Then p = 0 in solid cells."""
    for m in range(faces.shape[0]):
        ax = faces[m, 0]
        i = faces[m, 1]
        j = faces[m, 2]
        k = faces[m, 3]
        s = faces[m, 4]
        if ax == 0:
            d = vb[m] - vx[i, j, k]
            vx[i, j, k] = vb[m]
            if s > 0:
                p[i, j, k] -= cp * d
            else:
                p[i + 1, j, k] += cp * d
        elif ax == 1:
            d = vb[m] - vy[i, j, k]
            vy[i, j, k] = vb[m]
            if s > 0:
                p[i, j, k] -= cp * d
            else:
                p[i, j + 1, k] += cp * d
        else:
            d = vb[m] - vz[i, j, k]
            vz[i, j, k] = vb[m]
            if s > 0:
                p[i, j, k] -= cp * d
            else:
                p[i, j, k + 1] += cp * d
    for m in range(solid.shape[0]):
        p[solid[m, 0], solid[m, 1], solid[m, 2]] = 0.0


@nb.njit(cache=True)
def _sample(p, idx, w, out):
    """Trilinear interpolation of p at receivers: idx (n, 3) lower cell, w (n, 3) fractional offsets."""
    for m in range(idx.shape[0]):
        i, j, k = idx[m, 0], idx[m, 1], idx[m, 2]
        fx, fy, fz = w[m, 0], w[m, 1], w[m, 2]
        acc = 0.0
        for di in range(2):
            wx = fx if di else 1.0 - fx
            for dj in range(2):
                wy = fy if dj else 1.0 - fy
                for dk in range(2):
                    wz = fz if dk else 1.0 - fz
                    acc += wx * wy * wz * p[i + di, j + dj, k + dk]
        out[m] = acc


# ---------------------------------------------------------------------------------------------------------------
# grid and solver
# ---------------------------------------------------------------------------------------------------------------
def _split(n: int, parts: int) -> list[tuple[int, int]]:
    e = np.linspace(0, n, max(1, min(parts, n)) + 1).round().astype(int) if n else np.array([0, 0])
    return [(int(e[i]), int(e[i + 1])) for i in range(len(e) - 1) if e[i + 1] > e[i]]


@dataclass
class Grid:
    """Uniform grid of n = (nx, ny, nz) cells of size dx [m]; cell (i, j, k) (1-based, ghosts at 0 and n+1) has its
    centre at origin + (i - 0.5, j - 0.5, k - 0.5) dx. ``npml`` cells of each side are absorbing layer."""

    shape: tuple[int, int, int]
    dx: float
    origin: np.ndarray = field(default_factory=lambda: np.zeros(3))
    npml: int = 12

    def cell_centres(self, axis: int) -> np.ndarray:
        """Centre coordinate along ``axis`` of padded index 0..n+1."""
        n = self.shape[axis]
        return self.origin[axis] + (np.arange(n + 2) - 0.5) * self.dx

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape))

    def memory_bytes(self, dtype=np.float32) -> int:
        nx, ny, nz = self.shape
        return 4 * (nx + 2) * (ny + 2) * (nz + 2) * np.dtype(dtype).itemsize


def centred_grid(half_width: float, dx: float, npml: int = 12, centre=(0.0, 0.0, 0.0)) -> Grid:
    """A cubic grid covering [-half_width, half_width]^3 around ``centre`` (plus the PML outside it)."""
    n = int(math.ceil(2 * half_width / dx)) + 2 * npml
    origin = np.asarray(centre, float) - 0.5 * n * dx
    return Grid((n, n, n), dx, origin, npml)


def _cpml_profile(grid: Grid, axis: int, c: float, dt: float, R: float = 1e-6, order: int = 3):
    """(face indices, a, b) and (cell indices, a, b) of the CPML on both ends of ``axis`` (Roden & Gedney 2000,
    kappa = 1, alpha = 0): psi_{n+1} = b psi_n + a * derivative, b = exp(-sigma dt), a = b - 1."""
    n = grid.shape[axis]
    L = grid.npml * grid.dx
    if grid.npml == 0:
        e = np.zeros(0, np.int64)
        z = np.zeros(0)
        return (e, z, z), (e, z, z)
    sigma_max = -(order + 1) * c * math.log(R) / (2 * L)

    def sigma(x):  # x: position in cells from the low domain edge (0 .. n)
        d = np.maximum(np.maximum(grid.npml - x, x - (n - grid.npml)), 0.0) * grid.dx
        return sigma_max * (d / L) ** order

    cells = np.arange(1, n + 1)
    sc = sigma(cells - 0.5)
    # face f is the upper face of cell f (between cells f and f+1); face 0 is the rigid lower wall, never updated
    faces = np.arange(1, n + 1)
    sf = sigma(faces.astype(float))
    out = []
    for idx, s in ((faces, sf), (cells, sc)):
        keep = s > 0
        b = np.exp(-s[keep] * dt)
        out.append((idx[keep].astype(np.int64), b - 1.0, b))
    return tuple(out)


@dataclass
class BodyBoundary:
    """Voxelized rigid body: the solid cells next to air (``solid``) and the body faces between solid and air.

    faces: (n, 5) int64 rows (axis, i, j, k, sign) as in _body_faces; centres: (n, 3) world positions of the face
    centres [m]."""

    solid: np.ndarray
    faces: np.ndarray
    centres: np.ndarray

    @property
    def axis(self) -> np.ndarray:
        return self.faces[:, 0]


def voxelize(grid: Grid, inside) -> BodyBoundary:
    """Voxelize a body on ``grid``: ``inside(points (n, 3)) -> bool (n,)`` tells which cell centres are solid.

    If ``inside`` also has ``grid_solid(xs, ys, zs) -> bool (nx, ny, nz)`` (e.g. a mesh, wave/voxel.py), that
    structured query is used instead of one point query per cell."""
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


class FDTDSolver:
    """Leapfrog solver state on ``grid``. Units: c [m/s], rho [kg/m^3], dt [s]; dtype float32 or float64.

    Use: ``s = FDTDSolver(grid, c, rho, dt)``; optionally ``s.set_body(boundary)`` and ``s.set_receivers(points)``;
    then call ``s.step(body_acceleration=..., source=...)`` per step, reading ``s.receive()``."""

    def __init__(self, grid: Grid, c: float = 343.2, rho: float = 1.2041, dt: float | None = None,
                 dtype=np.float32, threads: int | None = None):
        if dt is None:
            dt = 0.99 * COURANT_LIMIT * grid.dx / c
        courant = c * dt / grid.dx
        if not (dt > 0 and math.isfinite(dt)):
            raise SolverError(f"time step dt = {dt} s must be positive")
        if courant > COURANT_LIMIT * (1 + 1e-12):
            raise SolverError(f"unstable time step: Courant number c dt/dx = {courant:.4f} exceeds 1/sqrt(3) = "
                              f"{COURANT_LIMIT:.4f}; the largest stable dt for dx = {grid.dx:g} m is "
                              f"{COURANT_LIMIT * grid.dx / c:.6g} s")
        self.grid, self.c, self.rho, self.dt = grid, float(c), float(rho), float(dt)
        self.dtype = np.dtype(dtype)
        shp = tuple(n + 2 for n in grid.shape)
        self.p = np.zeros(shp, self.dtype)
        self.v = [np.zeros(shp, self.dtype) for _ in range(3)]
        dx = grid.dx
        self.cv = self.dtype.type(dt / (rho * dx))
        self.cp = self.dtype.type(rho * c * c * dt / dx)
        self.threads = max(1, int(threads or default_threads()))
        nx = grid.shape[0]
        nchunk = max(1, min(self.threads, nx // 2))
        self.bounds = np.linspace(1, nx + 1, nchunk + 1).round().astype(np.int64)
        self._pml = []
        for ax in range(3):
            (fi, fa, fb), (ci, ca, cb) = _cpml_profile(grid, ax, c, dt)
            other = [grid.shape[d] + 2 for d in range(3) if d != ax]
            shp_f, shp_c = ((*other, len(fi)), (*other, len(ci))) if ax == 2 else \
                ((len(fi), *other), (len(ci), *other))
            self._pml.append(dict(
                fi=fi, fa=(fa / dx).astype(self.dtype), fb=fb.astype(self.dtype),
                ci=ci, ca=(ca / dx).astype(self.dtype), cb=cb.astype(self.dtype),
                psi_f=np.zeros(shp_f, self.dtype), psi_c=np.zeros(shp_c, self.dtype)))
        self.body: BodyBoundary | None = None
        self.vb = np.zeros(0, np.float64)
        self._recv_idx = np.zeros((0, 3), np.int64)
        self._recv_w = np.zeros((0, 3), np.float64)
        self._recv_out = np.zeros(0, np.float64)
        self.n = 0

    @property
    def courant(self) -> float:
        return self.c * self.dt / self.grid.dx

    def set_body(self, body: BodyBoundary) -> None:
        self.body = body
        self.vb = np.zeros(len(body.faces), np.float64)

    def set_receivers(self, points: np.ndarray) -> None:
        """Receivers at world points (n, 3) [m], trilinearly interpolated from cell-centred pressure."""
        g = self.grid
        x = (np.asarray(points, float) - g.origin) / g.dx + 0.5   # padded cell index coordinate
        i0 = np.floor(x).astype(np.int64)
        if np.any(i0 < 1) or np.any(i0 + 1 > np.array(g.shape)):
            raise SolverError("a receiver lies outside the grid interior")
        self._recv_idx, self._recv_w = i0, x - i0
        self._recv_out = np.zeros(len(i0), np.float64)

    def receive(self) -> np.ndarray:
        _sample(self.p, self._recv_idx, self._recv_w, self._recv_out)
        return self._recv_out.copy()

    def step(self, body_velocity_increment: np.ndarray | None = None,
             source: tuple[np.ndarray, float] | None = None) -> None:
        """Advance one step.

        body_velocity_increment: (n_faces,) dt * a(t^n) along each body face's axis [m/s], added to the body-face
        velocity (dv_n/dt = a_n). source: (cell index (3,), volume-velocity rate Q [m^3/s] at t^{n+1/2}) for a
        point monopole (adds rho c^2 dt Q / dx^3 to that cell's p)."""
        v = self.v
        nt = self.threads
        vcoef = self.cv * self.dtype.type(self.grid.dx)     # dt / rho
        pcoef = self.cp * self.dtype.type(self.grid.dx)     # rho c^2 dt
        planes = _split(self.grid.shape[0], nt)
        calls = []
        for ax in range(3):
            P = self._pml[ax]
            if not len(P["fi"]):
                continue
            if ax == 2:
                calls += [(_pml_velocity_z, (self.p, v[2], P["psi_f"], P["fi"], P["fa"], P["fb"], vcoef,
                                             i0 + 1, i1 + 1)) for i0, i1 in planes]
            else:
                calls += [(_pml_velocity, (self.p, v[ax], P["psi_f"], P["fi"], P["fa"], P["fb"], vcoef, ax,
                                           m0, m1)) for m0, m1 in _split(len(P["fi"]), nt)]
        _run(calls, nt)          # each call writes its own axis' faces in its own slab range: disjoint
        bnd = self.bounds
        for c in range(len(bnd) - 2):                         # faces between slabs: need p^n of both sides
            _x_faces_plane(self.p, v[0], self.cv, bnd[c + 1] - 1)
        _run([(_fused_slab, (self.p, v[0], v[1], v[2], self.cv, self.cp, bnd[c], bnd[c + 1], c < len(bnd) - 2))
              for c in range(len(bnd) - 1)], nt)
        for ax in range(3):                # the pressure terms of different axes write the same cells
            P = self._pml[ax]
            if not len(P["ci"]):
                continue
            if ax == 2:
                _run([(_pml_pressure_z, (self.p, v[2], P["psi_c"], P["ci"], P["ca"], P["cb"], pcoef,
                                         i0 + 1, i1 + 1)) for i0, i1 in planes], nt)
            else:
                _run([(_pml_pressure, (self.p, v[ax], P["psi_c"], P["ci"], P["ca"], P["cb"], pcoef, ax, m0, m1))
                      for m0, m1 in _split(len(P["ci"]), nt)], nt)
        if self.body is not None:
            if body_velocity_increment is not None:
                self.vb += body_velocity_increment
            _body_faces(self.p, v[0], v[1], v[2], self.body.faces, self.vb.astype(self.dtype), self.cp,
                        self.body.solid)
        if source is not None:
            (i, j, k), q = source
            self.p[i, j, k] += self.dtype.type(self.rho * self.c**2 * self.dt * q / self.grid.dx**3)
        self.n += 1
