"""Exact pressure radiated by a rigid sphere in rigid-body translation.

The problem of Koss & Alfredson 1973 (J. Sound Vib. 27(1)), used for grain collisions in M. Marko, "Sound
simulation of granular materials" (thesis), sec. 4.1, eqs. 4.1-4.2. Those equations are garbled in the available
text of the thesis; the forms below were derived for the package from the rigid-sphere boundary condition (a
dipole in retarded time) and, with :func:`hertz_equal_spheres`, reproduce rows of the thesis's Table 6.1 to
within 0.5 %.

A sphere of radius a [m] accelerates along the unit vector e with A(t) [m/s^2] (A = 0 for t < 0). At distance
r >= a from its centre, at polar angle theta from e, the pressure is a dipole in retarded time
T = t - (r - a)/c (as the thesis's t'; l = c/a):

    P(s)/A(s) = rho a^3 cos(theta) (1 + s r/c) / (r^2 [2 + 2 s a/c + (s a/c)^2])      (delay removed)
    p(T) = rho cos(theta) (a c / r) int_0^T A(s) e^{-l(T-s)} [cos l(T-s) - (1 - a/r) sin l(T-s)] ds

i.e. the impulse response of P/A is  g(u) = K Re[(1 + i beta) e^{sigma u}],  K = rho cos(theta) a c / r,
beta = 1 - a/r, sigma = l(-1 + i).

Two evaluations:

* :func:`sphere_pressure_half_sine`: closed form for A = a_m sin(b T) on [0, d], b = pi/d (the thesis's pulse;
  J_R + i J_I = int_0^T sin(b s) e^{(-l + i l)(T - s)} ds in closed form, then its free decay for T > d), exact.
* :func:`sphere_pressure`: any acceleration sampled at spacing dt, taken piecewise linear between samples
  (first-order hold), convolved exactly with g: Z(T) = int_0^T A(s) e^{sigma (T-s)} ds obeys
      Z_{n+1} = E Z_n + w0 A_n + w1 A_{n+1},   E = e^{sigma dt},
      w1 = (E - 1 - sigma dt)/(sigma^2 dt),    w0 = (E - 1)/sigma - w1,
  and p_n = K Re[(1 + i beta) Z_n] (a complex one-pole IIR filter, run by scipy.signal.lfilter: no Python loop).
  Exact for piecewise-linear A; for smooth A the error is O(dt^2).

The compact limit (ka << 1) p ~ rho a^3 cos(theta)/(2 r) [A'(T)/c + A(T)/r] is
:func:`sphere_pressure_compact` (for tests; it overestimates peaks when the pulse is not long against a/c).

SI units throughout: a, r [m], c [m/s], rho [kg/m^3], A [m/s^2], times [s], pressure [Pa]. Retarded times are
measured from the start of the acceleration; add the delay (r - a)/c (:func:`retarded_delay`) for arrival times.
Used to validate the FDTD solver and PAN fields and usable by a granular (sphere) source.
"""
from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from ..errors import InputError


def _check(a, r, c, rho):
    for name, v in (("a", a), ("c", c), ("rho", rho)):
        if not (np.isfinite(v) and v > 0):
            raise InputError(f"rigid sphere: {name} = {v} must be positive and finite")
    r = np.asarray(r, np.float64)
    if np.any(~np.isfinite(r)) or np.any(r < a * (1 - 1e-12)):
        raise InputError(f"rigid sphere: listener distance r must be finite and >= the radius a = {a} m")
    return r


def retarded_delay(r, a, c):
    """Propagation delay between the sphere surface and a listener.

    Parameters
    ----------
    r : float or array_like
        Listener distance from the centre [m].
    a : float
        Sphere radius [m].
    c : float
        Speed of sound [m/s].

    Returns
    -------
    ndarray
        (r - a)/c [s].
    """
    return (np.asarray(r, np.float64) - a) / c


def sphere_pressure_half_sine(T, a, a_m, d, r, cos_theta, rho, c):
    """Exact pressure for a half-sine acceleration A(t) = a_m sin(pi t/d) on [0, d] (module docstring).

    Parameters
    ----------
    T : array_like
        Retarded times [s] (p = 0 for T < 0).
    a : float
        Sphere radius [m].
    a_m : float
        Peak acceleration [m/s^2].
    d : float
        Pulse duration [s].
    r : float or array_like
        Distance from the centre [m], >= a; broadcast against T.
    cos_theta : float or array_like
        e . (x - x_c)/r; broadcast against T.
    rho : float
        Air density [kg/m^3].
    c : float
        Speed of sound [m/s].

    Returns
    -------
    ndarray
        p [Pa].

    Raises
    ------
    InputError
        On a non-positive a, c, rho or d, or r < a.
    """
    r = _check(a, r, c, rho)
    if not (np.isfinite(d) and d > 0):
        raise InputError(f"rigid sphere: pulse duration d = {d} s must be positive and finite")
    T = np.asarray(T, np.float64)
    l = c / a
    b = np.pi / d
    D = b**4 + 4.0 * l**4

    def J(Tc):
        # closed form of J_R + i J_I = int_0^T sin(b s) e^{(-l + i l)(T - s)} ds for 0 <= T <= d
        el = np.exp(-l * Tc)
        NR = l * np.sin(b * Tc) - b * np.cos(b * Tc) + b * el * np.cos(l * Tc)
        NI = -l * np.sin(b * Tc) + b * el * np.sin(l * Tc)
        return (b * b * NR - 2 * l * l * NI) / D, (b * b * NI + 2 * l * l * NR) / D

    Tc = np.clip(T, 0.0, d)
    JR, JI = J(Tc)
    JRd, JId = J(np.float64(d))
    u = np.maximum(T - d, 0.0)                                     # free decay for T > d
    eu = np.exp(-l * u)
    JRf = eu * (JRd * np.cos(l * u) - JId * np.sin(l * u))
    JIf = eu * (JRd * np.sin(l * u) + JId * np.cos(l * u))
    after = T > d
    JR = np.where(after, JRf, JR)
    JI = np.where(after, JIf, JI)
    p = rho * a_m * np.asarray(cos_theta) * (a * c / r) * (JR - (1.0 - a / r) * JI)
    return np.where(T >= 0, p, 0.0)


def sphere_pressure(A, dt, a, r, cos_theta, rho, c):
    """Exact pressure for a piecewise-linear acceleration (module docstring).

    Parameters
    ----------
    A : array_like, shape (..., n)
        Samples A(n dt) [m/s^2] along the last axis; A(t) = 0 before the first sample (the first sample should be
        0 for a continuous start).
    dt : float
        Sample spacing [s].
    a : float
        Sphere radius [m].
    r : float
        Distance from the centre [m], >= a.
    cos_theta : float
        Cosine of the angle between e and the listener direction.
    rho, c : float
        Air density [kg/m^3] and speed of sound [m/s].

    Returns
    -------
    ndarray, shape of A
        p [Pa] at the retarded times n dt.
    """
    r = float(_check(a, r, c, rho))
    if not (np.isfinite(dt) and dt > 0):
        raise InputError(f"rigid sphere: dt = {dt} s must be positive and finite")
    A = np.asarray(A, np.float64)
    l = c / a
    sig = l * (-1.0 + 1.0j)
    x = sig * dt
    E = np.exp(x)
    if abs(x) < 1e-3:                                              # series avoids cancellation for tiny dt
        w1 = dt * (0.5 + x / 6.0 + x * x / 24.0 + x**3 / 120.0)
        w0 = dt * (1.0 + x / 2.0 + x * x / 6.0 + x**3 / 24.0) - w1
    else:
        w1 = (E - 1.0 - x) / (sig * x)
        w0 = (E - 1.0) / sig - w1
    # Y_n = E Y_{n-1} + w1 A_n + w0 A_{n-1} is Z_n (A_{-1} = 0)
    Z = lfilter(np.array([w1, w0]), np.array([1.0, -E]), A.astype(np.complex128), axis=-1)
    K = rho * cos_theta * a * c / r
    beta = 1.0 - a / r
    return K * (Z.real - beta * Z.imag)


def sphere_pressure_compact(T, A, dA, a, r, cos_theta, rho, c):
    """Compact-sphere limit (ka << 1): rho a^3 cos(theta)/(2 r) [A'(T)/c + A(T)/r].

    Parameters
    ----------
    T : array_like
        Retarded times [s] (unused: A and dA are given at them).
    A : array_like
        Acceleration [m/s^2].
    dA : array_like
        Its time derivative [m/s^3].
    a, r : float
        Sphere radius and listener distance [m].
    cos_theta : float or array_like
        Cosine of the listener angle from e.
    rho, c : float
        Air density [kg/m^3] and speed of sound [m/s].

    Returns
    -------
    ndarray
        p [Pa].
    """
    return rho * a**3 * cos_theta / (2.0 * r) * (np.asarray(dA) / c + np.asarray(A) / r)


def hertz_equal_spheres(v0, a, rho_s, E, nu):
    """Hertz collision of two equal spheres: duration and peak acceleration of each.

    m_eff = m/2, r_eff = a/2, E* = E/(2(1 - nu^2)), d = 2.87 (m_eff^2/(r_eff E*^2 v0))^{1/5} (Chadwick, Zheng &
    James 2012, "Precomputed Acceleration Noise", eq. 7), K = (4/3) E* sqrt(r_eff), peak compression
    delta_m = (5 m_eff v0^2/(4K))^{2/5} (Hertz; Johnson 1985), a_m = K delta_m^{3/2} / m. Scaling by the peak
    force (rather than by the impulse) is the choice that reproduces the thesis's Table 6.1.

    Parameters
    ----------
    v0 : float
        Approach speed [m/s].
    a : float
        Radius [m].
    rho_s : float
        Density of the spheres [kg/m^3].
    E : float
        Young's modulus [Pa].
    nu : float
        Poisson's ratio.

    Returns
    -------
    d : float
        Contact duration [s].
    a_m : float
        Peak acceleration of each sphere [m/s^2].
    """
    from ..contact.hertz import hertz_stiffness, hertz_tau
    m = rho_s * 4.0 / 3.0 * np.pi * a**3
    m_eff, r_eff, E_star = m / 2.0, a / 2.0, E / (2.0 * (1.0 - nu**2))
    d = hertz_tau(m_eff, r_eff, E_star, v0)
    K = hertz_stiffness(r_eff, E_star)
    delta_m = (5.0 * m_eff * v0**2 / (4.0 * K)) ** 0.4
    return float(d), float(K * delta_m**1.5 / m)
