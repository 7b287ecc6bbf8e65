"""FDTD "acoustic shader" for the ground: a floor driven by the surface motion of impacts.

Qu & James 2019, "Ground sound" (DAFx): in the wave solver of Wang, Qu, ..., & James 2018 ("Toward wave-based
sound synthesis for computer animation") the ground is a boundary of the air on which the Neumann condition

    dp/dn = -rho_a a_n(x, t)          (n into the air, a_n the ground's upward normal acceleration)

is imposed, a_n the surface motion of an elastic half-space under each impact (Lamb's problem,
:func:`impactsound.sources.ground.impact.surface_motion`), with r the horizontal distance of a boundary face centre
to the impact point, summed over the impacts.

Here the floor is the plane z = 0 of our staggered FDTD grid (:mod:`impactsound.wave.fdtd`): the z faces between
the cell layer below z = 0 (solid) and the first air layer. A face velocity that follows dv_n/dt = a_n is the
Neumann condition above in the staggered scheme (the face's momentum equation, rho dv_z/dt = -dp/dz, with its
left side prescribed), so each step adds dt a_n(x_f, t^n) to the face velocities v^{n-1/2} -> v^{n+1/2}. The floor
is rigid outside the driven patches; it spans the whole grid, under the absorbing side layers too (a rigid wall
inside a PML is still absorbed), and the absorbing layer at the bottom lies under the floor, cut off from the air.

Face values. a_n = g(r, t) / r with g smooth in r (g tends to -J (1 - nu) K''(t) / (2 pi mu) as r -> 0: the
quasi-static Boussinesq load, integrable over the area). Each face gets g at its centre times the exact face
average of 1/r (which is 1/r_c (1 + O(dx^2 / r_c^2)) away from the impact, and finite on the face under it), so
the total flux is right to O(dx^2) and r = 0 needs no special case.

Cost. surface_motion is costly (two Lamb responses per sample for the K4 kernel), so g = r a_n is tabulated once per
impact on a uniform (r, t) grid (spacing c_s eps / 24 in r, eps / 10 in t) and interpolated by bicubic splines
(:class:`DriveTable`; error ~1e-4 of the peak, checked in tests/unit/test_ground_shader.py), to the face centres
and time steps.

Finite patch, finite start. The ground moves everywhere and the force kernel is not causal (K4 precursor ~ t^-4):
each impact drives a disk of radius ``patch_radius`` with a C^1 cosine taper over its outer ``taper`` fraction,
starting ``n_pre`` eps before its force centre with a C^1 ramp over 4 eps (the K4 force 12 eps before its centre
is 2e-4 of its peak). :func:`taper_weights` gives these windows so that a Rayleigh-integral reference can solve the
same problem.

Resolution. The pulse has the time scale eps, so its acoustic length is c_a eps; the grid must resolve it:
``dx <= c_a eps / MIN_CELLS_PER_PULSE``. The scheme is second order: against the Rayleigh integral of the same
drive the error falls as dx^2, and is mostly the scheme's phase error (dispersion), which grows with the path
length; below c_a / (10 dx) it is ~1-2 % once that phase error is accounted for (:func:`axial_dispersion`; the
study in tests/unit/test_ground_shader.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import RectBivariateSpline

from ..constants import AIR_C, AIR_RHO
from ..errors import InputError, SolverError
from ..sources.ground.impact import HalfSpace, surface_motion
from .fdtd import COURANT_LIMIT, DEFAULT_NPML, FDTDSolver, Grid
from .voxel import BodyBoundary

#: the grid must have at least this many cells per acoustic pulse length c_a eps (see the module docstring)
MIN_CELLS_PER_PULSE = 4.0
#: default cells per c_a eps when dx is not given
DEFAULT_CELLS_PER_PULSE = 6.0
#: the highest frequency the comparisons trust, as a fraction of c_a / dx (10 cells per wavelength)
RESOLVED_FRACTION = 0.1
#: table spacings (module docstring)
_R_NODES_PER_CS_EPS = 24
_T_NODES_PER_EPS = 10
#: the ramp of the drive at its start, in eps
_RAMP_EPS = 4.0


@dataclass(frozen=True)
class FloorImpact:
    """One impact on the floor: the point (x, y) [m] on z = 0, impulse J [N s] pushed into the ground, kernel
    width eps [s] (t_c / 4) and force centre t_m [s]."""

    x: float
    y: float
    impulse: float
    eps: float
    t_m: float = 0.0

    def __post_init__(self):
        for name in ("x", "y", "t_m"):
            if not math.isfinite(getattr(self, name)):
                raise InputError(f"floor impact: {name} = {getattr(self, name)} must be finite")
        if not (math.isfinite(self.impulse) and self.impulse >= 0):
            raise InputError(f"floor impact: impulse = {self.impulse} N s must be finite and >= 0")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise InputError(f"floor impact: kernel width eps = {self.eps} s must be finite and > 0")


@dataclass
class GroundPressure:
    """Result of :func:`ground_fdtd_pressure`.

    Attributes
    ----------
    t : ndarray, shape (n,)
        Sample times [s] (p after each step).
    p : ndarray, shape (n_listeners, n)
        Pressure at the listeners [Pa].
    dx, dt : float
        Cell size [m] and step [s].
    f_resolved : float
        c_a / (10 dx) [Hz]: above it the scheme's dispersion is no longer small; low-pass there before comparing.
    grid : Grid
        The grid used.
    """

    t: np.ndarray
    p: np.ndarray
    dx: float
    dt: float
    f_resolved: float
    grid: Grid


def taper_weights(r, t, impact: FloorImpact, patch_radius: float, taper: float = 0.4, n_pre: float = 16.0):
    """The drive's windows: W_r(r) W_t(t) (module docstring), broadcasting r [m] and t [s].

    W_r = 1 for r <= (1 - taper) patch_radius, falling as cos^2 to 0 at patch_radius; W_t = 0 before
    t_m - n_pre eps, rising as sin^2 over 4 eps."""
    r, t = np.broadcast_arrays(np.asarray(r, float), np.asarray(t, float))
    r1 = (1 - taper) * patch_radius
    x = np.clip((r - r1) / max(patch_radius - r1, 1e-300), 0.0, 1.0)
    wr = np.cos(0.5 * np.pi * x) ** 2
    t0 = impact.t_m - n_pre * impact.eps
    y = np.clip((t - t0) / (_RAMP_EPS * impact.eps), 0.0, 1.0)
    return wr * np.sin(0.5 * np.pi * y) ** 2


class DriveTable:
    """g(r, t) = r a_n(r, t) W_r(r) W_t(t) of one impact, tabulated on a uniform (r, t) grid and interpolated by
    bicubic splines; :meth:`accel` gives the windowed a_n = g / r itself (for a Rayleigh-integral reference).

    Parameters
    ----------
    impact : FloorImpact
    ground : HalfSpace
    patch_radius : float
        Radius of the driven disk [m].
    t_end : float
        Last time needed [s].
    taper, n_pre : float
        As in :func:`taper_weights`.
    kernel : {"K4", "lorentzian"}
    """

    def __init__(self, impact: FloorImpact, ground: HalfSpace, patch_radius: float, t_end: float,
                 taper: float = 0.4, n_pre: float = 16.0, kernel: str = "K4"):
        self.impact, self.patch_radius, self.taper, self.n_pre = impact, float(patch_radius), taper, n_pre
        cs_eps = ground.c_s * impact.eps
        nr = max(8, int(math.ceil(patch_radius / (cs_eps / _R_NODES_PER_CS_EPS))))
        self.r = np.linspace(0.0, patch_radius, nr + 1)
        self.t0 = impact.t_m - n_pre * impact.eps
        ht = impact.eps / _T_NODES_PER_EPS
        nt = max(8, int(math.ceil((t_end - self.t0) / ht)) + 4)
        self.t = self.t0 - 3 * ht + ht * np.arange(nt + 3)     # a few nodes before the start (where g = 0)
        r_eval = np.maximum(self.r, 1e-6 * cs_eps)            # r -> 0: the quasi-static limit of r a_n
        g = np.zeros((len(self.r), len(self.t)))
        live = self.t >= self.t0
        if impact.impulse > 0:
            a = surface_motion(r_eval[:, None], self.t[None, live], impact.impulse, impact.eps, ground, order=2,
                               t_m=impact.t_m, kernel=kernel)
            g[:, live] = r_eval[:, None] * a * taper_weights(self.r[:, None], self.t[None, live], impact,
                                                             patch_radius, taper, n_pre)
        self.g = g
        self._spline = RectBivariateSpline(self.r, self.t, g, kx=3, ky=3)

    def g_at(self, r, t) -> np.ndarray:
        """r a_n W_r W_t at points (r [m], t [s]) broadcast together; 0 outside the patch and before the start."""
        r, t = np.broadcast_arrays(np.asarray(r, float), np.asarray(t, float))
        out = self._spline.ev(np.clip(r, 0, self.patch_radius).ravel(), np.clip(t, self.t[0], self.t[-1]).ravel())
        out = out.reshape(r.shape)
        return np.where((r < self.patch_radius) & (t > self.t0), out, 0.0)

    def g_grid(self, r_sorted: np.ndarray, t_sorted: np.ndarray) -> np.ndarray:
        """g on the grid r_sorted x t_sorted (both increasing, inside the table): shape (len(r), len(t))."""
        return self._spline(r_sorted, t_sorted, grid=True)

    def accel(self, r, t) -> np.ndarray:
        """The windowed normal acceleration a_n W_r W_t [m/s^2] (r > 0)."""
        r = np.asarray(r, float)
        return self.g_at(r, t) / r


def inv_r_face_average(px, py, half: float) -> np.ndarray:
    """Exact average of 1/r over the square [px - half, px + half] x [py - half, py + half] (r from the origin).

    Uses int int dx dy / r = F(x2, y2) - F(x1, y2) - F(x2, y1) + F(x1, y1), F = x asinh(y/|x|) + y asinh(x/|y|)."""
    def F(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(x != 0, x * np.arcsinh(y / np.abs(np.where(x != 0, x, 1.0))), 0.0)
            b = np.where(y != 0, y * np.arcsinh(x / np.abs(np.where(y != 0, y, 1.0))), 0.0)
        return a + b
    px, py = np.asarray(px, float), np.asarray(py, float)
    x1, x2, y1, y2 = px - half, px + half, py - half, py + half
    return (F(x2, y2) - F(x1, y2) - F(x2, y1) + F(x1, y1)) / (2 * half) ** 2


def default_dx(impacts, c_a: float = AIR_C) -> float:
    """DEFAULT_CELLS_PER_PULSE cells per c_a eps of the shortest impact [m]."""
    return c_a * min(i.eps for i in impacts) / DEFAULT_CELLS_PER_PULSE


def floor_grid(impacts, listeners: np.ndarray, patch_radius: float, dx: float, npml: int = DEFAULT_NPML,
               margin_cells: int = 4) -> Grid:
    """A grid whose floor (the upper face of cell layer npml) is z = 0; its interior covers every driven disk and
    every listener (plus ``margin_cells``) horizontally and the listeners (plus ``margin_cells``) above the floor.
    The first impact's point is a cell centre in x and y."""
    pts = np.array([[i.x, i.y] for i in impacts])
    lo = np.minimum(pts.min(0) - patch_radius, listeners[:, :2].min(0)) - margin_cells * dx
    hi = np.maximum(pts.max(0) + patch_radius, listeners[:, :2].max(0)) + margin_cells * dx
    a = pts[0]
    # cells on each side of the first impact's cell
    n_lo = np.ceil((a - lo) / dx - 0.5).astype(int) + npml
    n_hi = np.ceil((hi - a) / dx - 0.5).astype(int) + npml
    nx, ny = (n_lo + n_hi + 1).tolist()
    origin_xy = a - (n_lo + 0.5) * dx
    nz_air = int(math.ceil(listeners[:, 2].max() / dx)) + margin_cells
    nz = npml + nz_air + npml
    return Grid((nx, ny, nz), float(dx), np.array([origin_xy[0], origin_xy[1], -npml * dx]), npml)


def floor_boundary(grid: Grid) -> BodyBoundary:
    """The floor z = 0 of :func:`floor_grid` as a body: every z face on top of cell layer npml (air above it), the
    layer itself solid."""
    nx, ny, _ = grid.shape
    k0 = grid.npml
    I, J = np.meshgrid(np.arange(1, nx + 1), np.arange(1, ny + 1), indexing="ij")
    I, J = I.ravel(), J.ravel()
    K = np.full_like(I, k0)
    faces = np.column_stack([np.full_like(I, 2), I, J, K, np.full_like(I, -1)]).astype(np.int64)
    centres = np.column_stack([grid.origin[0] + (I - 0.5) * grid.dx, grid.origin[1] + (J - 0.5) * grid.dx,
                               np.zeros(len(I))])
    return BodyBoundary(solid=np.column_stack([I, J, K]).astype(np.int64), faces=faces, centres=centres)


def _check_inputs(impacts, ground, listeners, duration, dx, c_a):
    if not isinstance(ground, HalfSpace):
        raise InputError("ground_fdtd_pressure: ground must be a HalfSpace (E, nu, rho)")
    L = np.asarray(listeners, float)
    if L.ndim == 1:
        L = L[None, :]
    if L.ndim != 2 or L.shape[1] != 3 or len(L) == 0 or not np.isfinite(L).all():
        raise InputError(f"ground_fdtd_pressure: listeners must be finite points (n, 3) [m], not shape {L.shape}")
    if not (math.isfinite(duration) and duration > 0):
        raise InputError(f"ground_fdtd_pressure: duration = {duration} s must be finite and > 0")
    if not (math.isfinite(dx) and dx > 0):
        raise InputError(f"ground_fdtd_pressure: dx = {dx} m must be finite and > 0")
    eps = min(i.eps for i in impacts)
    if c_a * eps / dx < MIN_CELLS_PER_PULSE * (1 - 1e-9):
        raise InputError(f"ground_fdtd_pressure: dx = {dx:g} m is too coarse for the impact pulse: c_a eps = "
                         f"{c_a * eps:.4g} m spans {c_a * eps / dx:.2f} cells, at least {MIN_CELLS_PER_PULSE:g} "
                         f"are needed; use dx <= {c_a * eps / MIN_CELLS_PER_PULSE:.4g} m (or a longer contact, "
                         "eps)")
    low = L[:, 2] < 0.5 * dx
    if low.any():
        z = L[low, 2].min()
        where = "on or below the floor z = 0" if z <= 0 else f"within half a cell (dx/2 = {dx / 2:g} m) of the floor"
        raise InputError(f"ground_fdtd_pressure: a listener at z = {z:g} m lies {where}; listeners must be above "
                         f"it, at z >= {dx / 2:g} m" + ("" if z <= 0 else " (or use a finer dx)"))
    return L


def ground_fdtd_pressure(impacts, ground: HalfSpace, listeners, duration: float, dx: float | None = None, *,
                         patch_radius: float | None = None, taper: float = 0.4, n_pre: float = 16.0,
                         c_a: float = AIR_C, rho_a: float = AIR_RHO, kernel: str = "K4", npml: int = DEFAULT_NPML,
                         dtype=np.float32, threads: int | None = None, progress=None) -> GroundPressure:
    """Pressure at listeners above a floor driven by impacts, by FDTD (module docstring).

    Parameters
    ----------
    impacts : sequence of FloorImpact
        The impacts (their surface motions superpose).
    ground : HalfSpace
        The floor's elastic half-space.
    listeners : array_like, shape (n, 3) or (3,)
        Listener points [m], above the floor (z >= dx / 2).
    duration : float
        Simulated time [s] from the start, min over impacts of t_m - n_pre eps.
    dx : float, optional
        Cell size [m] (default c_a min(eps) / 6; at most c_a min(eps) / 4).
    patch_radius : float, optional
        Radius of each impact's driven disk [m] (default: the largest listener distance, horizontal plus height,
        from an impact, at least 0.1 m).
    taper, n_pre : float, optional
        Outer fraction of the disk that tapers off; start of the drive in eps before t_m (:func:`taper_weights`).
    c_a, rho_a : float, optional
        Air [m/s], [kg/m^3].
    kernel : {"K4", "lorentzian"}
    npml : int, optional
        Absorbing-layer cells per side.
    dtype, threads : optional
        Passed to :class:`~impactsound.wave.fdtd.FDTDSolver`.
    progress : callable, optional
        progress(fraction).

    Returns
    -------
    GroundPressure
        Times [s] and pressures [Pa] (n_listeners, n_steps).

    Raises
    ------
    InputError
        Listener on or below the floor, non-finite or negative impulse, dx too coarse for eps, bad shapes.
    """
    impacts = list(impacts)
    if not impacts or not all(isinstance(i, FloorImpact) for i in impacts):
        raise InputError("ground_fdtd_pressure: impacts must be a non-empty sequence of FloorImpact(x, y, impulse, "
                         "eps, t_m)")
    dx = default_dx(impacts, c_a) if dx is None else float(dx)
    L = _check_inputs(impacts, ground, listeners, duration, dx, c_a)
    if not (math.isfinite(n_pre) and n_pre >= _RAMP_EPS and 0 <= taper <= 1):
        raise InputError(f"ground_fdtd_pressure: n_pre = {n_pre} must be >= {_RAMP_EPS:g} (eps) and taper = {taper} "
                         "in [0, 1]")
    if patch_radius is None:
        d = [math.hypot(l[0] - i.x, l[1] - i.y) + l[2] for i in impacts for l in L]
        patch_radius = max(0.1, max(d))
    if not (math.isfinite(patch_radius) and patch_radius > 2 * dx):
        raise InputError(f"ground_fdtd_pressure: patch_radius = {patch_radius} m must exceed 2 dx = {2 * dx:g} m")
    grid = floor_grid(impacts, L, patch_radius, dx, npml)
    dt = 0.99 * COURANT_LIMIT * dx / c_a
    solver = FDTDSolver(grid, c_a, rho_a, dt, dtype=dtype, threads=threads)
    body = floor_boundary(grid)
    solver.set_body(body)
    solver.set_receivers(L)
    t_start = min(i.t_m - n_pre * i.eps for i in impacts)
    n_steps = int(math.ceil(duration / dt))
    t_acc = t_start + dt * np.arange(n_steps)                # a_n at t^n drives step n (v^{n-1/2} -> v^{n+1/2})
    drives = []
    half = 0.5 * dx
    for imp in impacts:
        px, py = body.centres[:, 0] - imp.x, body.centres[:, 1] - imp.y
        rc = np.hypot(px, py)
        sel = np.flatnonzero(rc < patch_radius)
        if imp.impulse == 0 or not len(sel):
            continue
        tab = DriveTable(imp, ground, patch_radius, t_acc[-1], taper, n_pre, kernel)
        w = inv_r_face_average(px[sel], py[sel], half)
        ru, inv = np.unique(rc[sel], return_inverse=True)
        drives.append((tab, sel, w, ru, inv))
    rec = np.zeros((len(L), n_steps))
    chunk = 64
    inc = np.zeros(len(body.faces))
    for a in range(0, n_steps, chunk):
        b = min(n_steps, a + chunk)
        acc = np.zeros((len(body.faces), b - a))
        for tab, sel, w, ru, inv in drives:
            tt = t_acc[a:b]
            live = (tt > tab.t0) & (tt <= tab.t[-1])
            if live.any():
                acc[np.ix_(sel, np.flatnonzero(live))] += tab.g_grid(ru, tt[live])[inv] * w[:, None]
        for n in range(a, b):
            np.multiply(acc[:, n - a], dt, out=inc)
            solver.step(inc)
            rec[:, n] = solver.receive()
        if not np.isfinite(rec[:, a:b]).all():
            raise SolverError("ground_fdtd_pressure: the FDTD solution stopped being finite; report this as a bug")
        if progress is not None:
            progress(b / n_steps)
    return GroundPressure(t=t_start + dt * np.arange(1, n_steps + 1), p=rec, dx=dx, dt=dt,
                          f_resolved=RESOLVED_FRACTION * c_a / dx, grid=grid)


def band_limit(p: np.ndarray, dt: float, f_cut: float, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth low-pass (order ``order``, applied forward and backward) along the last axis."""
    from scipy.signal import butter, sosfiltfilt
    sos = butter(order, f_cut, btype="low", fs=1.0 / dt, output="sos")
    return sosfiltfilt(sos, p, axis=-1)


def axial_dispersion(signal: np.ndarray, dt: float, dx: float, distance: float, c: float = AIR_C) -> np.ndarray:
    """A signal as it arrives after travelling ``distance`` [m] along a grid axis of the FDTD scheme instead of in
    the continuum: each frequency is delayed by (k_h(w) - w / c) distance / w, where k_h is the scheme's axial
    wavenumber, sin(k_h dx / 2) / dx = sin(w dt / 2) / (c dt) (the leapfrog Yee dispersion relation, e.g.
    Taflove & Hagness 2005, "Computational electrodynamics", ch. 4). For comparing the solver with a continuum
    reference along its worst-case direction (the axis; the grid diagonal is exact at the Courant limit).

    Parameters
    ----------
    signal : ndarray, shape (..., n)
        Samples every dt [s] along the last axis.
    dt, dx : float
        The scheme's step [s] and cell [m].
    distance : float
        Path length [m].
    c : float, optional
        Speed of sound [m/s].

    Returns
    -------
    ndarray
        The dispersed signal, same shape (zero-padded 4x to keep wraparound out).
    """
    x = np.asarray(signal, float)
    n = 4 * x.shape[-1]
    w = 2 * np.pi * np.fft.rfftfreq(n, dt)
    s = np.clip(dx / (c * dt) * np.sin(0.5 * w * dt), -1.0, 1.0)
    k = 2.0 / dx * np.arcsin(s)
    return np.fft.irfft(np.fft.rfft(x, n) * np.exp(-1j * (k - w / c) * distance), n)[..., :x.shape[-1]]
