"""Ground sound against the ball's own sound for one drop: the comparison of Qu & James 2019 ("Ground sound",
DAFx), Table 1.

A ball (radius b, density rho_b, E_b, nu_b) dropped from height h_drop onto an elastic half-space ground (rho_g,
E_g, nu_g) strikes it at v = sqrt(2 g h_drop) (g = 9.81 m/s^2) and leaves with restitution e, so the contact
impulse is J = (1 + e) m v. Hertz contact (Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise", sec.
3.1, eq. 7, with its constant 2.87) gives the contact time t_c = 2.87 (m^2 / (b E^2 v))^(1/5), 1/E = (1 - nu_b^2)
/ E_b + (1 - nu_g^2) / E_g; the contact radius is Hertz's at the mean force m v / t_c; the force is J K(t - t_m)
with the fourth-order kernel K4 of width eps = t_c / 4 (Qu & James 2019), centred at t_m = t_c / 2 after the
contact starts (time 0 of the waveforms).

Two pressures at the listener (impact at the origin, z up, ground z = 0):

* ground: the Rayleigh integral of the surface acceleration (:func:`.impact.surface_motion`) -- on the axis above
  the impact (:func:`.impact.rayleigh_on_axis`), or the (r, phi) form for a listener off the axis
  (:func:`.impact.rayleigh_off_axis`, about a hundred times dearer);
* ball: the compact translating sphere centred at (0, 0, b) with its image in the rigid ground
  (:func:`.ball.ball_pressure`; ``image=False`` for the free ball of the far-field law below).

Sampling. The waveforms span [-20 eps, +40 eps] around the arrival t_m + |listener| / c_a with a step of eps / 4
(the spectrum of the K4 pulse there is ~1e-4 of its maximum). The Rayleigh integral stops at r_max, where the first
(P-wave) motion of the plane would reach the listener 10 eps after the window ends, and gets extra panel edges
wherever the arrival time of a ring's Rayleigh pulse, r / c_R + (R - h) / c_a, advances by 1.4 eps (so that each
24-point panel resolves the pulse; measured on Table 1: half the edge spacing with r_max 20 eps further out changes
the peaks and the intensity ratio by ~1e-9).

Reported numbers. A peak is the maximum of |p| over continuous time, found on a fine grid: the ball's closed form
at spacing eps / 64 over the whole window; the ground's samples, then the Rayleigh integral re-evaluated at spacing
eps / 64 within one sample of its largest local maxima of |p| (the eps / 4 samples alone miss the Table-1 peak by
4 %); the parabola through the largest fine sample and its neighbours refines both (measured: changing the step,
window, r_max or panel edges moves the Table-1 peaks by < 1e-5 and the intensity ratio by < 5e-5). The intensity
ratio is int p_ground^2 dt / int p_ball^2 dt over the window (Qu & James give no formula; this is our choice).

Far field (on axis, h >> c_s^2 eps / c_a): p_ground / p_ball(free) -> -4 rho_b c_a / (3 rho_g c_p); at fixed c_s,
nu_g, t_c and geometry the ground pressure is proportional to J / mu_g, the ball's to J / m, so the intensity ratio
scales as (rho_b / mu_g)^2.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from ...constants import AIR_C, AIR_RHO
from ...contact.hertz import combined_modulus
from ...errors import InputError
from .ball import ball_pressure
from .impact import HalfSpace, contact_radius, contact_time, rayleigh_off_axis, rayleigh_on_axis, surface_motion

#: gravitational acceleration [m/s^2] for the impact speed sqrt(2 g h_drop) (Qu & James 2019, Table 1)
G = 9.81
#: the waveform window around the arrival, in units of eps
WINDOW = (-20.0, 40.0)
#: samples per eps (default sample rate 4 / eps)
SAMPLES_PER_EPS = 4

_NAMES = {k: k for k in ("radius", "drop", "listener", "restitution", "kernel", "sample_rate", "ball.E", "ball.nu",
                         "ball.rho", "ground.E", "ground.nu", "ground.rho")}


def _check(names, key, value, ok, want):
    if not ok:
        raise InputError(f"ground compare: {names[key]} = {value!r} {want}")


def _check_solid(names, which, mat):
    for attr in ("E", "nu", "rho"):
        if not hasattr(mat, attr):
            raise InputError(f"ground compare: {which} {mat!r} has no {attr}; give a Material or a HalfSpace")
    E, nu, rho = float(mat.E), float(mat.nu), float(mat.rho)
    _check(names, f"{which}.E", E, math.isfinite(E) and E > 0, "must be positive (Young's modulus in Pa)")
    _check(names, f"{which}.rho", rho, math.isfinite(rho) and rho > 0, "must be positive (density in kg/m^3)")
    _check(names, f"{which}.nu", nu, math.isfinite(nu) and 0 < nu < 0.5,
           "must lie in (0, 0.5) (Poisson's ratio of the elastic half-space model)")
    return E, nu, rho


def compare(ball, radius: float, drop: float, ground, listener=(0.0, 0.0, 0.2), restitution: float = 0.5,
            kernel: str = "K4", sample_rate: float | None = None, *, image: bool = True, c_a: float = AIR_C,
            rho_a: float = AIR_RHO, names: dict | None = None) -> dict:
    """The ground's and the ball's sound for one drop, as in Qu & James 2019, Table 1 (module docstring).

    Parameters
    ----------
    ball : Material
        The ball's material (anything with ``E`` [Pa], ``nu``, ``rho`` [kg/m^3]).
    radius : float
        Ball radius b [m] (> 0).
    drop : float
        Drop height [m] (> 0); impact speed sqrt(2 g drop).
    ground : Material or HalfSpace
        The ground's constants (``E``, ``nu`` in (0, 0.5), ``rho``).
    listener : sequence of 3 floats
        Listener position [m], z > 0 (the impact is at the origin).
    restitution : float
        Coefficient of restitution e in [0, 1]; J = (1 + e) m v.
    kernel : {"K4", "lorentzian"}
        Force kernel of the ground and the ball.
    sample_rate : float, optional
        Waveform sample rate [Hz]; default 4 / eps (98 kHz for Table 1); at least 2 / eps.
    image : bool
        Add the ball's image in the rigid ground (True, Qu & James's ball); False gives the free ball.
    c_a, rho_a : float
        Air's sound speed [m/s] and density [kg/m^3].
    names : dict, optional
        How error messages name the inputs (keys ``radius``, ``drop``, ``listener``, ``restitution``, ``kernel``,
        ``sample_rate``, ``ball.E``, ``ball.nu``, ``ball.rho``, ``ground.E``, ``ground.nu``, ``ground.rho``; the
        CLI passes its option names).

    Returns
    -------
    dict
        ``t_c_s``, ``contact_radius_m``, ``cs_eps_m``, ``c_s_m_s`` (ground shear speed), ``impulse_Ns``,
        ``eps_s``, ``impact_speed_m_s``, ``mass_kg``, ``ground_peak_pa`` and ``ball_peak_pa`` (max |p| in continuous
        time), ``intensity_ratio`` (int p_ground^2 dt / int p_ball^2 dt), and the waveforms ``time_s`` (0 at the
        contact start), ``p_ground_pa``, ``p_ball_pa``.

    Raises
    ------
    InputError
        A listener at or below the ground, drop or radius <= 0, restitution outside [0, 1], a Poisson ratio
        outside (0, 0.5), an unknown kernel or a sample rate below 2 / eps; the message names the input.
    """
    names = {**_NAMES, **(names or {})}
    E_b, nu_b, rho_b = _check_solid(names, "ball", ball)
    E_g, nu_g, rho_g = _check_solid(names, "ground", ground)
    radius, drop, restitution = float(radius), float(drop), float(restitution)
    _check(names, "radius", radius, math.isfinite(radius) and radius > 0, "m must be positive (the ball's radius)")
    _check(names, "drop", drop, math.isfinite(drop) and drop > 0, "m must be positive (the drop height)")
    _check(names, "restitution", restitution, 0 <= restitution <= 1, "must lie in [0, 1]")
    _check(names, "kernel", kernel, kernel in ("K4", "lorentzian"), "is not a kernel; use 'K4' or 'lorentzian'")
    try:
        x_l = np.asarray(listener, np.float64).reshape(3)
    except (TypeError, ValueError):
        x_l = None
    _check(names, "listener", listener, x_l is not None and bool(np.all(np.isfinite(x_l))),
           "must be three finite coordinates x, y, z [m]")
    _check(names, "listener", tuple(float(c) for c in x_l), x_l[2] > 0,
           "must lie above the ground (z > 0; the impact is at the origin)")

    hs = HalfSpace(E_g, nu_g, rho_g)
    m = rho_b * 4.0 / 3.0 * math.pi * radius**3
    v = math.sqrt(2 * G * drop)
    J = (1 + restitution) * m * v
    E_c = combined_modulus(HalfSpace(E_b, nu_b, rho_b), hs)
    t_c = contact_time(m, radius, E_c, v)
    a_c = contact_radius(m, radius, E_c, v, t_c)
    eps = t_c / 4
    t_m = t_c / 2
    fs = SAMPLES_PER_EPS / eps if sample_rate is None else float(sample_rate)
    _check(names, "sample_rate", sample_rate, math.isfinite(fs) and fs * eps >= 2,
           f"Hz is too coarse for a pulse of width eps = {eps:.4g} s: use at least 2 / eps = {2 / eps:.4g} Hz")

    h, offset = float(x_l[2]), float(math.hypot(x_l[0], x_l[1]))
    dist = math.sqrt(h * h + offset * offset)
    t_arr = t_m + dist / c_a
    dt = 1.0 / fs
    t = t_arr + np.arange(math.ceil(WINDOW[0] * eps * fs), math.floor(WINDOW[1] * eps * fs) + 1) * dt

    def accel(r, tt):
        return surface_motion(r, tt, J, eps, hs, order=2, t_m=t_m, kernel=kernel)

    r_max, breaks = _radial_extent(hs, h, offset, dist, eps, (t[-1] - t_arr) + 10 * eps, c_a)
    kw = dict(r_max=r_max, r_scale=hs.c_s * eps, breaks=breaks, c_a=c_a, rho_a=rho_a)
    if offset == 0:
        def p_ground(tt):
            return rayleigh_on_axis(accel, h, tt, **kw)
    else:
        def p_ground(tt):
            return rayleigh_off_axis(accel, h, offset, tt, **kw)

    def p_ball(tt):
        return ball_pressure(x_l, tt, centre=(0.0, 0.0, radius), impulse=J, mass=m, radius=radius, eps=eps,
                             t_m=t_m, kernel_kind=kernel, image=image, c_a=c_a, rho_a=rho_a)

    pg = p_ground(t)
    pb = p_ball(t)
    fine = t[0] + np.arange(int((t[-1] - t[0]) / (eps / 64)) + 1) * (eps / 64)
    ball_peak = _grid_peak(p_ball(fine))
    ground_peak = _refined_peak(p_ground, t, pg, eps / 64)

    return {
        "t_c_s": t_c, "contact_radius_m": a_c, "cs_eps_m": hs.c_s * eps, "c_s_m_s": hs.c_s,
        "impulse_Ns": J, "eps_s": eps, "impact_speed_m_s": v, "mass_kg": m,
        "ground_peak_pa": ground_peak, "ball_peak_pa": ball_peak,
        "intensity_ratio": float(np.sum(pg * pg) / np.sum(pb * pb)),
        "time_s": t, "p_ground_pa": pg, "p_ball_pa": pb,
    }


def _radial_extent(hs: HalfSpace, h, offset, dist, eps, t_after, c_a):
    """r_max and the extra panel edges of the Rayleigh integral (module docstring, "Sampling").

    Beyond r_max the plane's first motion (the P wave, r / c_p) reaches the listener, at distance >= sqrt(h^2 +
    (r - offset)^2), later than t_after after the direct arrival. Panel edges: where r / c_R + D(r) / c_a grows by
    1.4 eps, with D the distance from the ring to the listener (its nearest point off the axis)."""
    def nearest(r):
        return math.sqrt(h * h + max(r - offset, 0.0) ** 2)

    def first(r):
        return r / hs.c_p + (nearest(r) - dist) / c_a - t_after

    lo = offset
    hi = lo + hs.c_p * t_after + 1.0
    while first(hi) < 0:
        hi *= 2
    r_max = brentq(first, lo, hi) if first(lo) < 0 else lo + hs.c_s * eps
    if offset == 0:
        def slope(r):
            return 1 / hs.c_R + r / (c_a * math.hypot(r, h))
    else:                                    # the fastest change of the distance along a ring
        def slope(r):
            return 1 / hs.c_R + 1 / c_a
    edges, r = [], 0.0
    while True:
        r += 1.4 * eps / slope(r)
        if r >= r_max:
            break
        edges.append(r)
    return r_max, edges


def _grid_peak(a) -> float:
    """max of |a| on a uniform grid, refined by the parabola through the largest sample and its neighbours."""
    a = np.abs(np.asarray(a))
    i = int(np.argmax(a))
    best = float(a[i])
    if 0 < i < len(a) - 1:
        curv = a[i - 1] - 2 * a[i] + a[i + 1]
        if curv < 0:
            best -= (a[i + 1] - a[i - 1]) ** 2 / (8 * curv)
    return float(best)


def _refined_peak(p, t, samples, step) -> float:
    """max |p| in continuous time: p re-evaluated at ``step`` within one sample of the largest local maxima of
    |samples| (the largest and any other above 80 % of it; at most two), then a parabola through the best three."""
    a = np.abs(samples)
    inner = np.flatnonzero((a[1:-1] >= a[:-2]) & (a[1:-1] >= a[2:])) + 1
    cand = [i for i in inner[np.argsort(a[inner])[::-1][:2]] if a[i] >= 0.8 * a.max()]
    best = float(a.max())
    dt = t[1] - t[0]
    n = int(round(dt / step))
    for i in cand:
        best = max(best, _grid_peak(p(t[i] + np.arange(-n, n + 1) * (dt / n))))
    return best
