"""Exact pressure radiated by a rigid sphere in rigid-body translation (specs/granular.md sec. 2).

A sphere of radius a [m] accelerates along the unit vector e with A(t) [m/s^2] (A = 0 for t < 0). At distance
r >= a from its centre, at polar angle theta from e, the pressure is a dipole in retarded time
T = t - (r - a)/c (granular.md sec. 2; l = c/a):

    P(s)/A(s) = rho a^3 cos(theta) (1 + s r/c) / (r^2 [2 + 2 s a/c + (s a/c)^2])      (delay removed)
    p(T) = rho cos(theta) (a c / r) int_0^T A(s) e^{-l(T-s)} [cos l(T-s) - (1 - a/r) sin l(T-s)] ds

i.e. the impulse response of P/A is  g(u) = K Re[(1 + i beta) e^{sigma u}],  K = rho cos(theta) a c / r,
beta = 1 - a/r, sigma = l(-1 + i).

Two evaluations:

* :func:`sphere_pressure_half_sine`: closed form for A = a_m sin(b T) on [0, d], b = pi/d (granular.md sec. 2,
  with N_R, N_I, J_R, J_I and the free decay for T > d), exact.
* :func:`sphere_pressure`: any acceleration sampled at spacing dt, taken piecewise linear between samples
  (first-order hold), convolved exactly with g: Z(T) = int_0^T A(s) e^{sigma (T-s)} ds obeys
      Z_{n+1} = E Z_n + w0 A_n + w1 A_{n+1},   E = e^{sigma dt},
      w1 = (E - 1 - sigma dt)/(sigma^2 dt),    w0 = (E - 1)/sigma - w1,
  and p_n = K Re[(1 + i beta) Z_n] (a complex one-pole IIR filter, run by scipy.signal.lfilter: no Python loop).
  Exact for piecewise-linear A; for smooth A the error is O(dt^2).

The compact limit (ka << 1, granular.md sec. 2) p ~ rho a^3 cos(theta)/(2 r) [A'(T)/c + A(T)/r] is
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
    """Propagation delay (r - a)/c [s] between the sphere surface and a listener at distance r [m]."""
    return (np.asarray(r, np.float64) - a) / c


def sphere_pressure_half_sine(T, a, a_m, d, r, cos_theta, rho, c):
    """Exact pressure [Pa] at retarded times T (array, [s]) for A(t) = a_m sin(pi t/d) on [0, d] (granular.md sec. 2).

    a radius [m]; a_m peak acceleration [m/s^2]; d pulse duration [s]; r distance from the centre [m] (>= a);
    cos_theta = e . (x - x_c)/r; rho, c air. p = 0 for T < 0. r and cos_theta broadcast against T.
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
    """Exact pressure [Pa] for a piecewise-linear acceleration sampled at spacing dt [s] (module docstring).

    A (..., n) samples A(n dt) [m/s^2] along the last axis, A(t) = 0 before the first sample (the first sample
    should be 0 for a continuous start); returns p at the same retarded times n dt, shape of A. r (distance
    [m]) and cos_theta are scalars.
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
    """Compact-sphere limit (ka << 1): rho a^3 cos(theta)/(2 r) [A'(T)/c + A(T)/r] [Pa] (granular.md sec. 2).

    A, dA: acceleration [m/s^2] and its time derivative [m/s^3] at retarded times T (arrays)."""
    return rho * a**3 * cos_theta / (2.0 * r) * (np.asarray(dA) / c + np.asarray(A) / r)


def hertz_equal_spheres(v0, a, rho_s, E, nu):
    """Equal-sphere Hertz collision parameters of granular.md sec. 2: (d [s], a_m [m/s^2]).

    Two spheres of radius a [m], density rho_s, modulus E [Pa], Poisson nu, approach speed v0 [m/s]:
    m_eff = m/2, r_eff = a/2, E* = E/(2(1 - nu^2)), d = 2.87 (m_eff^2/(r_eff E*^2 v0))^{1/5},
    delta_m = (5 m_eff v0^2/(4K))^{2/5}, K = (4/3) E* sqrt(r_eff), a_m = K delta_m^{3/2} / m.
    """
    from ..contact.hertz import hertz_stiffness, hertz_tau
    m = rho_s * 4.0 / 3.0 * np.pi * a**3
    m_eff, r_eff, E_star = m / 2.0, a / 2.0, E / (2.0 * (1.0 - nu**2))
    d = hertz_tau(m_eff, r_eff, E_star, v0)
    K = hertz_stiffness(r_eff, E_star)
    delta_m = (5.0 * m_eff * v0**2 / (4.0 * K)) ** 0.4
    return float(d), float(K * delta_m**1.5 / m)
