"""First-order acoustic FDTD on a staggered (Yee-type) grid with convolutional PML and rigid-body boundaries.

Equations (Chadwick, Zheng & James 2012, "Precomputed acceleration noise for improved rigid-body sound", ACM Trans.
Graph. 31(4), sec. 2, eqs. (3)-(4)): p_t = -rho c^2 div v, v_t = -(1/rho) grad p, and on the body surface the fluid's
normal velocity follows the body (dv_n/dt = a_n, from their eqs. (2) and (4)). Second order in space and time
(leapfrog: v at half steps, p at whole steps, as in their sec. 5). Stable for c dt/dx <= 1/sqrt(3) (checked before
running). The body is voxelized by :func:`impactsound.wave.voxel.voxelize`.

Layout: p at cell centres, vx/vy/vz on the upper x/y/z face of each cell; every array is (nx+2, ny+2, nz+2) with
one ghost layer per side, so the interior update needs no bounds tests. Ghost p stays 0 (pressure-release) and the
lower ghost faces stay 0 (rigid): the outer walls sit behind the PML and only see what it failed to absorb.

One step of a plane: "face plane i" is vx[i]; "cell plane i" is p[i], vy[i], vz[i] (y and z faces only couple
cells of the same plane). Face plane i needs p^n of cell planes i and i+1; cell plane i needs vx^{n+1/2} of face
planes i-1 and i. ``_plane`` advances face plane i then cell plane i in one pass over its rows (each row: the
velocity loops, then the pressure loop, so the inner loops vectorise), with everything else fused into that pass:
- CPML memory terms of the layers the plane, the row or the row's ends lie in (Roden & Gedney 2000; kappa = 1,
  polynomial grading of order 3, target reflection 1e-3), in place of the paper's Liu & Tao (1997) split-field
  PML: both are perfectly matched in the continuum, and the CPML only needs memory inside the layers. The layer is
  in the same pass as the interior, so it costs its extra arithmetic, not extra sweeps over memory.
- Body faces whose air cell is in the plane: the pass updated them as if in air; they are reset to the body's
  velocity and the air cell's pressure is corrected by the difference (p is linear in each face velocity, so
  this is exact); then the solid cells next to the surface are cleared.
- Wall faces (a wall thinner than a cell, between two air cells: wave/voxel.py, "Thin walls"): set to the wall's
  velocity in the row where the pass computes them, before either neighbouring cell reads them, so both cells
  see the wall and the result stays independent of the schedule.
- Point sources, and the receivers' share of the plane (trilinear interpolation split into two planes).

Temporal blocking (``_sweep``): a wavefront advances plane i to level s right after plane i+1 reached level s-1, so
``block_steps`` steps run while a plane is in cache: ~32/block_steps bytes of memory traffic per cell-update in
fp32 instead of >= 32 for a one-pass step, which is what a machine with 2 cores and ~28 GB/s is bound by.
Threads (``_run``) own slabs of planes; next to a slab boundary the wavefront shrinks by one plane per level (a
trapezoid, no reads of the other slab's planes at the wrong level), and ``_seam`` then fills the triangle between
slabs. Every cell gets the same arithmetic in any schedule, so the result is bit-identical for any thread count and
block size (tests/unit/test_fdtd_kernels.py).

Threads: compiled kernels release the GIL and run on a plain Python thread pool (one dispatch per slab and block of
steps), so neither results nor speed depend on Numba's threading layer or on the user's environment (OpenMP's
default wait policy was seen to stall on a fresh machine, and it stalls badly when another process takes a core;
bench/bench_fdtd.py --threading compares prange under each layer).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..constants import AIR_C, AIR_RHO
from ..errors import SolverError
from ..parallel import default_threads
from .voxel import BodyBoundary

COURANT_LIMIT = 1.0 / math.sqrt(3.0)
#: time steps per pass over memory in FDTDSolver.run (temporal blocking; see the module docstring)
DEFAULT_BLOCK_STEPS = 4
#: absorbing-layer cells per side (with the CPML grading of _cpml_profile: -50 dB reflection of a PAN pulse at 10
#: cells per wavelength, -78 dB for the smoother Gaussian of tests/validation/test_fdtd.py; the PAN checks ask for
#: -40 dB. The previous 12 cells (R = 1e-6) gave -55 / -95 dB with 1.5x the layer cells)
DEFAULT_NPML = 8
#: slabs per thread in a pass (more than one lets a thread that got more CPU take more slabs)
SLABS_PER_THREAD = 2

# Threads: see the module docstring.
_POOL: ThreadPoolExecutor | None = None


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
#
# State of a plane during a sweep: "face plane i" is vx[i] (the x faces between cell planes i and i+1); "cell
# plane i" is p[i], vy[i], vz[i] (the y and z faces of a cell plane only couple cells of the same plane). One step
# of face plane i needs p^n of cell planes i and i+1; one step of cell plane i needs vx^{n+1/2} of face planes
# i-1 and i. A sweep over increasing i that advances face plane i and then cell plane i (``_plane``) respects both,
# and so does a wavefront that advances plane i to level s while plane i+1 is at level s-1 (``_sweep``).
# ---------------------------------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def _plane(F, X, Y, Z, B, R, i, lev, do_face, do_cell):
    """Advance face plane i (do_face) and/or cell plane i (do_cell) by one step, to time level ``lev`` of the
    current block (0-based): interior update, then the CPML memory terms of the layers the plane lies in, then
    (cell plane) the body faces whose air cell is in plane i, the solid layer, point sources and receivers.

    F = (p, vx, vy, vz, cv, cp, vcoef, pcoef); X = x-layer (face map, a, b, psi, cell map, a, b, psi) indexed by
    plane; Y = the same indexed by row j (psi[i, m, k]); Z = (face lo end, face hi start, a, b, psi, cell lo end,
    cell hi start, a, b, psi) over k (psi[i, j, m]); B = body and point sources; R = receivers."""
    p, vx, vy, vz, cv, cp, vcoef, pcoef = F
    xfm, xfa, xfb, xfpsi, xcm, xca, xcb, xcpsi = X
    yfm, yfa, yfb, yfpsi, ycm, yca, ycb, ycpsi = Y
    zf0, zf1, zfa, zfb, zfpsi, zc0, zc1, zca, zcb, zcpsi = Z
    ny = p.shape[1] - 2
    nz = p.shape[2] - 2
    mxf = xfm[i]
    mxc = xcm[i]
    bptr, bface, vbl, sptr, solid, scell, sval, wptr = B
    w0 = i * (ny + 2)
    u = np.uint64                      # z layer: faces 1..zf0 are m = k - 1, faces zf1..nz are m = zf0 + k - zf1
    for j in range(1, ny + 1):
        if do_face:
            if mxf < 0:
                for k in range(1, nz + 1):
                    vx[i, j, k] -= cv * (p[i + 1, j, k] - p[i, j, k])
            else:
                a = xfa[mxf]
                b = xfb[mxf]
                for k in range(1, nz + 1):
                    d = p[i + 1, j, k] - p[i, j, k]
                    s = b * xfpsi[mxf, j, k] + a * d
                    xfpsi[mxf, j, k] = s
                    vx[i, j, k] = (vx[i, j, k] - cv * d) - vcoef * s
            # wall faces (air on both sides) take the wall's velocity before either cell reads them
            for m in range(wptr[w0 + j], wptr[w0 + j + 1]):
                if bface[m, 0] == 0:
                    vx[i, j, bface[m, 3]] = vbl[lev, m]
        if do_cell:
            myf = yfm[j]
            if myf < 0:
                for k in range(1, nz + 1):
                    vy[i, j, k] -= cv * (p[i, j + 1, k] - p[i, j, k])
            else:
                a = yfa[myf]
                b = yfb[myf]
                for k in range(1, nz + 1):
                    d = p[i, j + 1, k] - p[i, j, k]
                    s = b * yfpsi[i, myf, k] + a * d
                    yfpsi[i, myf, k] = s
                    vy[i, j, k] = (vy[i, j, k] - cv * d) - vcoef * s
            for k in range(1, nz + 1):
                vz[i, j, k] -= cv * (p[i, j, k + 1] - p[i, j, k])
            # z layer: two runs of k per row. Unsigned indices (no negative-index wraparound) and runs padded to
            # >= 16 (zero-strength entries) let LLVM vectorise these short loops.
            for q in range(zf0):
                k = u(1 + q)
                s = zfb[q] * zfpsi[i, j, q] + zfa[q] * (p[i, j, k + u(1)] - p[i, j, k])
                zfpsi[i, j, q] = s
                vz[i, j, k] -= vcoef * s
            for q in range(nz + 1 - zf1):
                k = u(zf1 + q)
                m = u(zf0 + q)
                s = zfb[m] * zfpsi[i, j, m] + zfa[m] * (p[i, j, k + u(1)] - p[i, j, k])
                zfpsi[i, j, m] = s
                vz[i, j, k] -= vcoef * s
            for m in range(wptr[w0 + j], wptr[w0 + j + 1]):
                if bface[m, 0] == 1:
                    vy[i, j, bface[m, 3]] = vbl[lev, m]
                elif bface[m, 0] == 2:
                    vz[i, j, bface[m, 3]] = vbl[lev, m]
            for k in range(1, nz + 1):
                p[i, j, k] -= cp * ((vx[i, j, k] - vx[i - 1, j, k]) + (vy[i, j, k] - vy[i, j - 1, k])
                                    + (vz[i, j, k] - vz[i, j, k - 1]))
            if mxc >= 0:
                a = xca[mxc]
                b = xcb[mxc]
                for k in range(1, nz + 1):
                    s = b * xcpsi[mxc, j, k] + a * (vx[i, j, k] - vx[i - 1, j, k])
                    xcpsi[mxc, j, k] = s
                    p[i, j, k] -= pcoef * s
            myc = ycm[j]
            if myc >= 0:
                a = yca[myc]
                b = ycb[myc]
                for k in range(1, nz + 1):
                    s = b * ycpsi[i, myc, k] + a * (vy[i, j, k] - vy[i, j - 1, k])
                    ycpsi[i, myc, k] = s
                    p[i, j, k] -= pcoef * s
            for q in range(zc0):
                k = u(1 + q)
                s = zcb[q] * zcpsi[i, j, q] + zca[q] * (vz[i, j, k] - vz[i, j, u(q)])
                zcpsi[i, j, q] = s
                p[i, j, k] -= pcoef * s
            for q in range(nz + 1 - zc1):
                k = u(zc1 + q)
                m = u(zc0 + q)
                s = zcb[m] * zcpsi[i, j, m] + zca[m] * (vz[i, j, k] - vz[i, j, u(zc1 - 1 + q)])
                zcpsi[i, j, m] = s
                p[i, j, k] -= pcoef * s
    if not do_cell:
        return
    # body faces whose air cell is in this plane: reset to the body velocity, correct the air cell (exact: p is
    # linear in each face velocity), then clear the solid cells next to the surface
    for m in range(bptr[i], bptr[i + 1]):
        ax = bface[m, 0]
        fi = bface[m, 1]
        fj = bface[m, 2]
        fk = bface[m, 3]
        vb = vbl[lev, m]
        if ax == 0:
            d = vb - vx[fi, fj, fk]
            vx[fi, fj, fk] = vb
            if bface[m, 4] > 0:
                p[fi, fj, fk] -= cp * d
            else:
                p[fi + 1, fj, fk] += cp * d
        elif ax == 1:
            d = vb - vy[fi, fj, fk]
            vy[fi, fj, fk] = vb
            if bface[m, 4] > 0:
                p[fi, fj, fk] -= cp * d
            else:
                p[fi, fj + 1, fk] += cp * d
        else:
            d = vb - vz[fi, fj, fk]
            vz[fi, fj, fk] = vb
            if bface[m, 4] > 0:
                p[fi, fj, fk] -= cp * d
            else:
                p[fi, fj, fk + 1] += cp * d
    for m in range(sptr[i], sptr[i + 1]):
        p[i, solid[m, 1], solid[m, 2]] = 0.0
    for m in range(scell.shape[0]):
        if scell[m, 0] == i:
            p[i, scell[m, 1], scell[m, 2]] += sval[lev, m]
    # receivers: this plane's bilinear share of each trilinear sample (one output slot per receiver and plane)
    rptr, rslot, rjk, rw, out = R
    for e in range(rptr[i], rptr[i + 1]):
        j0 = rjk[e, 0]
        k0 = rjk[e, 1]
        fy = rw[e, 1]
        fz = rw[e, 2]
        acc = ((1.0 - fy) * ((1.0 - fz) * p[i, j0, k0] + fz * p[i, j0, k0 + 1])
               + fy * ((1.0 - fz) * p[i, j0 + 1, k0] + fz * p[i, j0 + 1, k0 + 1]))
        out[lev, rslot[e]] = rw[e, 0] * acc


@nb.njit(cache=True, nogil=True)
def _sweep(F, X, Y, Z, B, R, a, b, lo_seam, hi_seam, T):
    """T steps of planes a..b-1 as a wavefront (plane i at level s right after plane i+1 at level s-1), so each
    plane is loaded from memory once per T steps. Next to a seam with another thread's slab (lo_seam/hi_seam) the
    region shrinks by one plane per level (a trapezoid); ``_seam`` fills the triangles left between slabs."""
    for it in range(a, b + T - 1):
        for s in range(1, T + 1):
            i = it - s + 1
            if i < a:
                break
            if i >= b:
                continue
            top = b - 1 - s * hi_seam
            df = a + (s - 1) * lo_seam <= i <= top
            dc = a + s * lo_seam <= i <= top
            if df or dc:
                _plane(F, X, Y, Z, B, R, i, s - 1, df, dc)


@nb.njit(cache=True, nogil=True)
def _seam(F, X, Y, Z, B, R, b, T):
    """The triangle left by ``_sweep`` between the slabs below and above plane b: at level s, face planes
    b-s..b+s-2 and cell planes b-s..b+s-1."""
    for s in range(1, T + 1):
        for i in range(b - s, b + s):
            _plane(F, X, Y, Z, B, R, i, s - 1, i <= b + s - 2, True)


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
    """Uniform grid; cell (i, j, k) (1-based, ghosts at 0 and n+1) has its centre at
    origin + (i - 0.5, j - 0.5, k - 0.5) dx.

    Parameters
    ----------
    shape : tuple of int
        Cells (nx, ny, nz), absorbing layer included.
    dx : float
        Cell size [m].
    origin : ndarray, shape (3,), optional
        Lower corner of cell (1, 1, 1) [m].
    npml : int, optional
        Cells of each side that are absorbing layer.
    """

    shape: tuple[int, int, int]
    dx: float
    origin: np.ndarray = field(default_factory=lambda: np.zeros(3))
    npml: int = DEFAULT_NPML

    def cell_centres(self, axis: int) -> np.ndarray:
        """Cell-centre coordinates along one axis.

        Parameters
        ----------
        axis : int
            0, 1 or 2.

        Returns
        -------
        ndarray, shape (n + 2,)
            [m], for padded indices 0..n+1.
        """
        n = self.shape[axis]
        return self.origin[axis] + (np.arange(n + 2) - 0.5) * self.dx

    @property
    def n_cells(self) -> int:
        """nx ny nz."""
        return int(np.prod(self.shape))

    def memory_bytes(self, dtype=np.float32) -> int:
        """Memory of an :class:`FDTDSolver` on this grid (:func:`solver_bytes`).

        Parameters
        ----------
        dtype : dtype, optional
            float32 (default) or float64.

        Returns
        -------
        int
            Bytes of p, v and the CPML memory.
        """
        return solver_bytes(self.shape, self.npml, dtype)


#: FDTDSolver backends
BACKENDS = ("numba", "cuda", "auto")


def _choose_backend(backend: str | None) -> str:
    """"numba" or "cuda" for a solver asked for ``backend`` (None: $IMPACTSOUND_FDTD_BACKEND, else "numba")."""
    import os
    b = backend if backend is not None else os.environ.get("IMPACTSOUND_FDTD_BACKEND", "numba")
    if b not in BACKENDS:
        raise SolverError(f"FDTD backend {b!r} is unknown; use one of {list(BACKENDS)} (IMPACTSOUND_FDTD_BACKEND)")
    if b == "numba":
        return b
    from .fdtd_cuda import fdtd_gpu_problem
    why = fdtd_gpu_problem()
    if why is None:
        return "cuda"
    if b == "cuda":
        raise SolverError(f"FDTD backend 'cuda': no usable CUDA GPU here ({why}); use backend 'numba' (the CPU)")
    return "numba"


def solver_bytes(shape, npml: int, dtype=np.float32) -> int:
    """Bytes of an FDTDSolver's arrays: p, vx, vy, vz and the CPML memory (face and cell layers on each axis).

    Parameters
    ----------
    shape : tuple of int
        Grid cells (nx, ny, nz).
    npml : int
        Absorbing-layer cells per side.
    dtype : dtype, optional
        Field dtype.

    Returns
    -------
    int
    """
    nx, ny, nz = (int(n) + 2 for n in shape)
    layer = 2 * (2 * min(npml, nx // 2)) * ny * nz + 2 * (2 * min(npml, ny // 2)) * nx * nz \
        + 2 * (2 * min(max(npml, Z_LAYER_PAD), nz // 2)) * nx * ny
    return (4 * nx * ny * nz + layer) * np.dtype(dtype).itemsize


def centred_grid(half_width: float, dx: float, npml: int = DEFAULT_NPML, centre=(0.0, 0.0, 0.0)) -> Grid:
    """A cubic grid covering [-half_width, half_width]^3 around ``centre`` (plus the PML outside it).

    Parameters
    ----------
    half_width : float
        [m].
    dx : float
        Cell size [m].
    npml : int, optional
        Absorbing-layer cells per side.
    centre : array_like, shape (3,), optional
        [m].

    Returns
    -------
    Grid
    """
    n = int(math.ceil(2 * half_width / dx)) + 2 * npml
    origin = np.asarray(centre, float) - 0.5 * n * dx
    return Grid((n, n, n), dx, origin, npml)


def _cpml_profile(grid: Grid, axis: int, c: float, dt: float, R: float = 1e-3, order: int = 3):
    """(face indices, a, b) and (cell indices, a, b) of the CPML on both ends of ``axis`` (Roden & Gedney 2000,
    kappa = 1, alpha = 0): psi_{n+1} = b psi_n + a * derivative, b = exp(-sigma dt), a = b - 1.

    sigma grows as (depth / L)^order up to sigma_max = -(order + 1) c ln(R) / (2 L). R = 1e-3 (the continuum
    reflection at normal incidence) balances that against the discretisation's reflection, which dominates in thin
    layers: with 8 cells a point source's reflection measured -50 dB for the PAN pulse at 10 cells per wavelength
    (R = 1e-6: -48 dB) and -78 dB for a Gaussian at 12 (R = 1e-6: -81 dB); at 6 cells -47 / -77 dB, at 4 cells
    -40 / -46 dB (tests/unit/test_fdtd_kernels.py checks the default)."""
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


def _layer_tables(idx: np.ndarray, a: np.ndarray, b: np.ndarray, n: int, dtype, dx: float):
    """Index map (n + 2,) -> position in the layer arrays (-1 outside), and a / dx, b in ``dtype``."""
    m = np.full(n + 2, -1, np.int64)
    m[idx] = np.arange(len(idx))
    return m, (a / dx).astype(dtype), b.astype(dtype)


#: the z layer's runs of k are padded to at least this many entries (zero strength: a = 0, b = 1, so psi stays 0
#: and adds nothing): LLVM only enters the vectorised body of a loop for 16+ iterations (fp32)
Z_LAYER_PAD = 16


def _z_layer(idx: np.ndarray, a: np.ndarray, b: np.ndarray, n: int, dtype, dx: float):
    """z layer as two runs: (lo, hi_start, a / dx, b) with layer entries m = k - 1 for k = 1..lo and
    m = lo + k - hi_start for k = hi_start..n; runs padded to Z_LAYER_PAD with zero-strength entries."""
    lo_idx = idx[idx <= n // 2]
    hi_idx = idx[idx > n // 2]
    lo = int(lo_idx[-1]) if len(lo_idx) else 0
    hi_start = int(hi_idx[0]) if len(hi_idx) else n + 1
    if not (np.array_equal(lo_idx, np.arange(1, lo + 1)) and np.array_equal(hi_idx, np.arange(hi_start, n + 1))):
        raise SolverError("internal: the absorbing layer must be contiguous at both ends of each axis")
    a_lo, b_lo = a[: len(lo_idx)], b[: len(lo_idx)]
    a_hi, b_hi = a[len(lo_idx):], b[len(lo_idx):]
    if lo:
        pad = min(max(lo, Z_LAYER_PAD), n // 2) - lo
        a_lo, b_lo = np.concatenate([a_lo, np.zeros(pad)]), np.concatenate([b_lo, np.ones(pad)])
        lo += pad
    if hi_start <= n:
        pad = min(max(n + 1 - hi_start, Z_LAYER_PAD), n // 2) - (n + 1 - hi_start)
        a_hi, b_hi = np.concatenate([np.zeros(pad), a_hi]), np.concatenate([np.ones(pad), b_hi])
        hi_start -= pad
    return lo, hi_start, (np.concatenate([a_lo, a_hi]) / dx).astype(dtype), np.concatenate([b_lo, b_hi]).astype(dtype)


class FDTDSolver:
    """Leapfrog solver state on ``grid``. Units: c [m/s], rho [kg/m^3], dt [s]; dtype float32 or float64.

    Use: ``s = FDTDSolver(grid, c, rho, dt)``; optionally ``s.set_body(boundary)`` and ``s.set_receivers(points)``;
    then either ``s.step(...)`` per step (reading ``s.receive()``), or ``s.run(n_steps, ...)``, which advances
    ``block_steps`` steps per pass over memory and records the receivers after every step.

    Neither ``threads`` nor ``block_steps`` changes the result: every cell is updated by the same arithmetic in
    any schedule, so the fields are bit-identical for any thread count and block size.

    Parameters
    ----------
    grid : Grid
    c : float, optional
        Speed of sound [m/s].
    rho : float, optional
        Air density [kg/m^3].
    dt : float, optional
        Time step [s] (default 0.99 of the Courant limit dx / (c sqrt(3))).
    dtype : dtype, optional
        float32 (default) or float64.
    threads : int, optional
        Worker threads (default :func:`~impactsound.parallel.default_threads`).
    block_steps : int, optional
        Steps per pass over memory (temporal blocking; default :data:`DEFAULT_BLOCK_STEPS`).
    backend : {"numba", "cuda", "auto"}, optional
        Where the steps run: the CPU kernel (default), a CUDA GPU (wave/fdtd_cuda.py: the same update, equal to
        float round-off), or "auto": the GPU where its probe (:func:`~impactsound.wave.fdtd_cuda.fdtd_gpu_problem`,
        a small solve compared with the CPU's) passes, else the CPU. ``IMPACTSOUND_FDTD_BACKEND`` sets the default.

    Raises
    ------
    SolverError
        On a non-positive or unstable dt, another dtype, an unknown backend, or "cuda" where no GPU works.
    """

    def __init__(self, grid: Grid, c: float = AIR_C, rho: float = AIR_RHO, dt: float | None = None,
                 dtype=np.float32, threads: int | None = None, block_steps: int | None = None,
                 backend: str | None = None):
        if dt is None:
            dt = 0.99 * COURANT_LIMIT * grid.dx / c
        courant = c * dt / grid.dx
        if not (dt > 0 and math.isfinite(dt)):
            raise SolverError(f"time step dt = {dt} s must be positive")
        if courant > COURANT_LIMIT * (1 + 1e-12):
            raise SolverError(f"unstable time step: Courant number c dt/dx = {courant:.4f} exceeds 1/sqrt(3) = "
                              f"{COURANT_LIMIT:.4f}; the largest stable dt for dx = {grid.dx:g} m is "
                              f"{COURANT_LIMIT * grid.dx / c:.6g} s")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise SolverError(f"FDTD dtype must be float32 or float64, not {self.dtype}")
        self.grid, self.c, self.rho, self.dt = grid, float(c), float(rho), float(dt)
        shp = tuple(n + 2 for n in grid.shape)
        self.p = np.zeros(shp, self.dtype)
        self.v = [np.zeros(shp, self.dtype) for _ in range(3)]
        dx = grid.dx
        T = self.dtype.type
        self.cv = T(dt / (rho * dx))
        self.cp = T(rho * c * c * dt / dx)
        self.threads = max(1, int(threads or default_threads()))
        self.block_steps = max(1, int(block_steps or DEFAULT_BLOCK_STEPS))
        nx, ny, nz = grid.shape
        layers = []
        for ax in range(3):
            (fi, fa, fb), (ci, ca, cb) = _cpml_profile(grid, ax, c, dt)
            n = grid.shape[ax]
            layers.append((fi, fa, fb, ci, ca, cb, n))
        # x: per plane; psi (layer planes, ny + 2, nz + 2)
        fi, fa, fb, ci, ca, cb, n = layers[0]
        xf = _layer_tables(fi, fa, fb, n, self.dtype, dx)
        xc = _layer_tables(ci, ca, cb, n, self.dtype, dx)
        self._X = (xf[0], xf[1], xf[2], np.zeros((len(fi), ny + 2, nz + 2), self.dtype),
                   xc[0], xc[1], xc[2], np.zeros((len(ci), ny + 2, nz + 2), self.dtype))
        # y: per row; psi (nx + 2, layer rows, nz + 2)
        fi, fa, fb, ci, ca, cb, n = layers[1]
        yf = _layer_tables(fi, fa, fb, n, self.dtype, dx)
        yc = _layer_tables(ci, ca, cb, n, self.dtype, dx)
        self._Y = (yf[0], yf[1], yf[2], np.zeros((nx + 2, len(fi), nz + 2), self.dtype),
                   yc[0], yc[1], yc[2], np.zeros((nx + 2, len(ci), nz + 2), self.dtype))
        # z: two runs of k per row; psi (nx + 2, ny + 2, layer cells)
        fi, fa, fb, ci, ca, cb, n = layers[2]
        zf0, zf1, zfa, zfb = _z_layer(fi, fa, fb, n, self.dtype, dx)
        zc0, zc1, zca, zcb = _z_layer(ci, ca, cb, n, self.dtype, dx)
        self._Z = (zf0, zf1, zfa, zfb, np.zeros((nx + 2, ny + 2, len(zfa)), self.dtype),
                   zc0, zc1, zca, zcb, np.zeros((nx + 2, ny + 2, len(zca)), self.dtype))
        self.body: BodyBoundary | None = None
        self.vb = np.zeros(0, np.float64)
        self._bperm = np.zeros(0, np.int64)
        self._bptr = np.zeros(nx + 3, np.int64)
        self._bface = np.zeros((0, 5), np.int64)
        self._wptr = np.zeros((nx + 2) * (ny + 2) + 1, np.int64)
        self._n_one_sided = 0
        self._sptr = np.zeros(nx + 3, np.int64)
        self._solid = np.zeros((0, 3), np.int64)
        self._recv_idx = np.zeros((0, 3), np.int64)
        self._recv_w = np.zeros((0, 3), np.float64)
        self._recv_out = np.zeros(0, np.float64)
        self._set_plane_receivers()
        self.n = 0
        self.backend = _choose_backend(backend)
        self._gpu = None                     # CudaState while the GPU holds the fields

    @property
    def courant(self) -> float:
        """Courant number c dt / dx (stable up to 1/sqrt(3))."""
        return self.c * self.dt / self.grid.dx

    def set_body(self, body: BodyBoundary) -> None:
        """Set the rigid body; its face velocities start at 0 and follow :meth:`step` / :meth:`run`.

        Parameters
        ----------
        body : BodyBoundary
            From :func:`~impactsound.wave.voxel.voxelize` on this grid.
        """
        self._sync()
        self.body = body
        self.vb = np.zeros(len(body.faces), np.float64)
        nx, ny = self.grid.shape[:2]
        f = body.faces
        # one-sided faces (solid on one side) first, by the plane of the air cell each drives (corrected after the
        # plane's cells); then wall faces (sign 0), by the plane and row where the sweep computes them (reset
        # before the cells read them)
        one = np.flatnonzero(f[:, 4] != 0)
        wall = np.flatnonzero(f[:, 4] == 0)
        air_plane = f[one, 1] + ((f[one, 0] == 0) & (f[one, 4] < 0))
        wkey = f[wall, 1] * (ny + 2) + f[wall, 2]
        o1, o2 = np.argsort(air_plane, kind="stable"), np.argsort(wkey, kind="stable")
        self._bperm = np.concatenate([one[o1], wall[o2]]).astype(np.int64)
        self._bface = np.ascontiguousarray(f[self._bperm])
        self._n_one_sided = len(one)
        self._bptr = np.searchsorted(air_plane[o1], np.arange(nx + 3)).astype(np.int64)
        self._wptr = (len(one) + np.searchsorted(wkey[o2], np.arange((nx + 2) * (ny + 2) + 1))).astype(np.int64)
        sol = body.solid[np.argsort(body.solid[:, 0], kind="stable")]
        self._solid = np.ascontiguousarray(sol, dtype=np.int64)
        self._sptr = np.searchsorted(sol[:, 0], np.arange(nx + 3)).astype(np.int64)

    def set_receivers(self, points: np.ndarray) -> None:
        """Set receivers, trilinearly interpolated from cell-centred pressure.

        Parameters
        ----------
        points : ndarray, shape (n, 3)
            World points [m] inside the grid interior.

        Raises
        ------
        SolverError
            If a receiver lies outside the grid interior.
        """
        self._sync()
        g = self.grid
        x = (np.asarray(points, float).reshape(-1, 3) - g.origin) / g.dx + 0.5   # padded cell index coordinate
        i0 = np.floor(x).astype(np.int64)
        if np.any(i0 < 1) or np.any(i0 + 1 > np.array(g.shape)):
            raise SolverError("a receiver lies outside the grid interior")
        self._recv_idx, self._recv_w = i0, x - i0
        self._recv_out = np.zeros(len(i0), np.float64)
        self._set_plane_receivers()

    def _set_plane_receivers(self) -> None:
        """Per-plane receiver tables for the sweep: receiver m has slot 2m (plane i0) and 2m + 1 (plane i0 + 1)."""
        nr = len(self._recv_idx)
        nx = self.grid.shape[0]
        plane = np.concatenate([self._recv_idx[:, 0], self._recv_idx[:, 0] + 1])
        slot = np.concatenate([2 * np.arange(nr), 2 * np.arange(nr) + 1])
        wx = np.concatenate([1.0 - self._recv_w[:, 0], self._recv_w[:, 0]])
        jk = np.concatenate([self._recv_idx[:, 1:], self._recv_idx[:, 1:]])
        fyz = np.concatenate([self._recv_w[:, 1:], self._recv_w[:, 1:]])
        o = np.argsort(plane, kind="stable")
        self._rptr = np.searchsorted(plane[o], np.arange(nx + 3)).astype(np.int64)
        self._rslot = slot[o].astype(np.int64)
        self._rjk = np.ascontiguousarray(jk[o], dtype=np.int64)
        self._rw = np.ascontiguousarray(np.column_stack([wx[o], fyz[o]]), dtype=np.float64)

    def receive(self) -> np.ndarray:
        """Pressure at the receivers now.

        Returns
        -------
        ndarray, shape (n,)
            [Pa], float64.
        """
        self._sync()
        _sample(self.p, self._recv_idx, self._recv_w, self._recv_out)
        return self._recv_out.copy()

    def _sync(self) -> None:
        """Bring the fields back from the GPU (their host arrays are stale while it holds them)."""
        if self._gpu is not None:
            self._gpu.to_host()
            self._gpu = None

    def _slabs(self, T: int) -> tuple[np.ndarray, int]:
        """Slab bounds for ``threads`` threads and the block size they allow (each slab >= 2T + 2 planes)."""
        nx = self.grid.shape[0]
        nt = min(self.threads * SLABS_PER_THREAD, max(1, nx // (2 * T + 2))) if self.threads > 1 else 1
        if nt > 1:
            return np.linspace(1, nx + 1, nt + 1).round().astype(np.int64), T
        return np.array([1, nx + 1], np.int64), T

    def _advance(self, T: int, vbl: np.ndarray, scell: np.ndarray, sval: np.ndarray, out: np.ndarray) -> None:
        """T steps; vbl (T, faces in sweep order): body face velocity at each step; sval (T, sources) added to p of
        cells scell after each step; out (T, 2 * receivers) receives the per-plane receiver shares."""
        if self.backend == "cuda":
            if self._gpu is None:
                from .fdtd_cuda import CudaState
                self._gpu = CudaState(self)
            out[:, 0::2] = self._gpu.advance(T, vbl, scell, sval)
            self.n += T
            return
        F = (self.p, self.v[0], self.v[1], self.v[2], self.cv, self.cp, self.cv * self.dtype.type(self.grid.dx),
             self.cp * self.dtype.type(self.grid.dx))
        B = (self._bptr, self._bface, vbl, self._sptr, self._solid, scell, sval, self._wptr)
        R = (self._rptr, self._rslot, self._rjk, self._rw, out)
        args = (F, self._X, self._Y, self._Z, B, R)
        bnd, T = self._slabs(T)
        ns = len(bnd) - 1
        if ns == 1:
            _sweep(*args, 1, self.grid.shape[0] + 1, 0, 0, T)
        else:
            _run([(_sweep, (*args, int(bnd[c]), int(bnd[c + 1]), int(c > 0), int(c < ns - 1), T))
                  for c in range(ns)], self.threads)
            _run([(_seam, (*args, int(bnd[c]), T)) for c in range(1, ns)], self.threads)
        self.n += T

    def step(self, body_velocity_increment: np.ndarray | None = None,
             source: tuple[np.ndarray, float] | None = None) -> None:
        """Advance one step.

        Parameters
        ----------
        body_velocity_increment : ndarray, shape (n_faces,), optional
            dt * a(t^n) along each body face's axis [m/s], added to the body-face velocity (dv_n/dt = a_n).
        source : tuple, optional
            (cell index (3,), volume-velocity rate Q [m^3/s] at t^{n+1/2}) of a point monopole (adds
            rho c^2 dt Q / dx^3 to that cell's p).
        """
        if self.body is not None and body_velocity_increment is not None:
            self.vb += body_velocity_increment
        vbl = self.vb[self._bperm].astype(self.dtype)[None, :]
        if source is not None:
            (i, j, k), q = source
            scell = np.array([[i, j, k]], np.int64)
            sval = self._source_increment([[q]])
        else:
            scell, sval = np.zeros((0, 3), np.int64), np.zeros((1, 0), self.dtype)
        self._advance(1, vbl, scell, sval, np.zeros((1, 2 * len(self._recv_idx))))

    def _source_increment(self, q) -> np.ndarray:
        """p increment of a point monopole of volume-velocity rate q [m^3/s] over one step."""
        return np.asarray(self.rho * self.c**2 * self.dt * np.asarray(q, np.float64) / self.grid.dx**3,
                          self.dtype)

    def run(self, n_steps: int, body_pattern: np.ndarray | None = None, body_scale: np.ndarray | None = None,
            source_cells: np.ndarray | None = None, source_rates: np.ndarray | None = None,
            progress=None, check_finite: bool = True, time_major: bool = False) -> np.ndarray:
        """Advance several steps and record the receivers after each.

        The body faces move with velocity body_pattern * body_scale[n] during step n, or with the sum of several
        such patterns, body_scale[n] @ body_pattern; without them they keep their current velocity.

        Parameters
        ----------
        n_steps : int
            Steps to run.
        body_pattern : ndarray, shape (n_faces,) or (m, n_faces), optional
            Velocity along each face's axis [m/s per unit].
        body_scale : ndarray, shape (n_steps,) or (n_steps, m), optional
            The pattern's scale per step.
        source_cells : ndarray, shape (n_src, 3), optional
            Padded cell indices of point monopoles (as in :meth:`step`).
        source_rates : ndarray, shape (n_steps, n_src), optional
            Their volume-velocity rates Q [m^3/s] at t^{n+1/2}.
        progress : callable, optional
            ``progress(fraction)``, called after each block.
        check_finite : bool, optional
            Check the receivers after each block.
        time_major : bool, optional
            Return the record as (n_steps, n_receivers) instead (as it is recorded: no transposing copy).

        Returns
        -------
        ndarray, shape (n_receivers, n_steps)
            Pressure [Pa], float64 (C-ordered; (n_steps, n_receivers) with ``time_major``).

        Raises
        ------
        SolverError
            On mismatched body arrays, or if the receivers stop being finite.
        """
        n_steps = int(n_steps)
        nr = len(self._recv_idx)
        # recorded step by step into time-major rows (contiguous writes: a block's few steps written into
        # receiver-major rows touched every row's cache line, ~5x the cost of the writes themselves)
        rec = np.zeros((n_steps, nr), np.float64)
        nb_ = len(self._bface)
        Tb = self.block_steps
        if source_cells is not None:
            scell = np.ascontiguousarray(np.asarray(source_cells, np.int64).reshape(-1, 3))
            sinc = self._source_increment(np.asarray(source_rates, np.float64).reshape(n_steps, len(scell)))
        else:
            scell, sinc = np.zeros((0, 3), np.int64), np.zeros((n_steps, 0), self.dtype)
        if body_scale is not None:
            if self.body is None or body_pattern is None:
                raise SolverError("run(): body_scale needs a body (set_body) and a body_pattern")
            pat = np.asarray(body_pattern, np.float64)
            scale = np.asarray(body_scale, np.float64)
            if pat.ndim == 1:
                pat, scale = pat[None, :], scale.reshape(-1, 1)
            if pat.ndim != 2 or pat.shape[1] != nb_ or scale.shape != (n_steps, len(pat)):
                raise SolverError(f"run(): body_pattern must be ({nb_},) or (m, {nb_}) and body_scale ({n_steps},) "
                                  f"or ({n_steps}, m), not {np.shape(body_pattern)} and {np.shape(body_scale)}")
            pat = np.ascontiguousarray(pat[:, self._bperm])
        n = 0
        # face velocities for up to 256 steps at a time: one product instead of one per block of Tb steps (the
        # per-call cost showed at ~25 % of a many-mode transfer run)
        V, v0 = None, 0
        while n < n_steps:
            T = min(Tb, n_steps - n)
            if body_scale is not None:
                if V is None or n + T > v0 + len(V):
                    v0 = n
                    V = (scale[n:min(n_steps, n + max(256, Tb))] @ pat).astype(self.dtype)
                vbl = V[n - v0:n - v0 + T]
            else:
                vbl = np.broadcast_to(self.vb[self._bperm].astype(self.dtype), (T, nb_)).copy()
            out = np.zeros((T, 2 * nr))
            self._advance(T, vbl, scell, np.ascontiguousarray(sinc[n:n + T]), out)
            np.add(out[:, 0::2], out[:, 1::2], out=rec[n:n + T])
            n += T
            if check_finite and not np.isfinite(rec[n - T:n]).all():
                raise SolverError(f"the FDTD solution blew up before step {n}; report this as a bug")
            if progress is not None:
                progress(n / n_steps)
        if body_scale is not None and n_steps:
            self.vb = np.empty(nb_)
            self.vb[self._bperm] = scale[-1] @ pat
        self._sync()
        return rec if time_major else np.ascontiguousarray(rec.T)
