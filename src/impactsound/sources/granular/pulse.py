"""Acceleration noise of one grain collision: two rigid spheres, each with a half-sine acceleration pulse (M. Marko,
"Sound simulation of granular materials", ch. 4 and 5.3; the problem of Koss & Alfredson, J. Sound Vib. 27(1), 1973).

A rigid sphere of radius a, centre x_c, accelerating along a unit vector e with A(t) = a_m sin(b t) on [0, d]
(b = pi/d, zero otherwise) radiates, at a listener x_L at distance r = |x_L - x_c| >= a and angle
cos(theta) = e . (x_L - x_c)/r, the exact rigid-surface dipole field. With l = c/a and the retarded time
T = t - t0 - (r - a)/c, its transfer function is

    P(s)/A(s) = rho0 a^3 cos(theta) (1 + s r/c) / (r^2 [2 + 2 s a/c + (s a/c)^2]),

whose poles s = -l (1 -+ i) give the time-domain form

    p(T) = rho0 a_m cos(theta) (a c/r) [J_R(T) - (1 - a/r) J_I(T)],   J_R + i J_I = int_0^T sin(b s) e^{(-l+il)(T-s)} ds.

The integral in closed form (D = b^4 + 4 l^4), for 0 <= T <= d:

    N_R = l sin(bT) - b cos(bT) + b e^{-lT} cos(lT),   N_I = -l sin(bT) + b e^{-lT} sin(lT),
    J_R = (b^2 N_R - 2 l^2 N_I)/D,                      J_I = (b^2 N_I + 2 l^2 N_R)/D,

and for T > d the free decay J(T) = e^{(-l+il)(T-d)} J(d). p = 0 for T < 0, continuous at 0 and d. The split
p = rho0 a_m cos(theta) (a c/r) [W1(T) + (a/r) W2(T)], W1 = J_R - J_I, W2 = J_I, depends on the grain and the
pulse only (a, d): one table per grain type and pulse width serves every listener (scale and delay).

Contact (Hertz, as in the PAN paper): with 1/m_eff = 1/m_A + 1/m_B, 1/r_eff = 1/a_A + 1/a_B,
1/E* = (1 - nu_A^2)/E_A + (1 - nu_B^2)/E_B, K = (4/3) E* sqrt(r_eff) and v0 the relative normal speed,

    d = 2.87 (m_eff^2/(r_eff E*^2 v0))^{1/5},   delta_m = (5 m_eff v0^2/(4K))^{2/5},   F_max = K delta_m^{3/2},

and each grain's peak acceleration a_m,i = F_max/m_i ("peak" scaling, the thesis' choice: it reproduces its Table
6.1; the half-sine then carries 2 a_m d/pi = 1.17 v0 for an equal pair, 17 % above the elastic Delta-v = v0). The
option "impulse" scales a_m = pi Delta-v_i/(2 d) with the elastic Delta-v_i = 2 v0 m_eff/m_i instead (0.853 times
quieter for equal grains).

A pair: contact point x, unit normal n from grain B to grain A, centres x_A = x + a_A n, x_B = x - a_B n; grain A
accelerates along +n, grain B along -n, each with its own distance, angle and delay: p = P_A - P_B with both angles
measured from +n.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError

#: Hertz's contact-time constant (2.868266 rounded as in the thesis)
HERTZ_D = 2.87


@dataclass(frozen=True)
class Contact:
    """Hertz contact of a grain pair at relative normal speed v0 (module docstring).

    Attributes
    ----------
    d : float
        Contact duration [s].
    a_m : tuple of float
        Peak accelerations (grain A, grain B) [m/s^2].
    F_max : float
        Peak force [N].
    """

    d: float
    a_m: tuple
    F_max: float


def _positive(name, v):
    v = float(v)
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"granular pulse: {name} = {v} must be positive and finite")
    return v


def hertz_contact(v0: float, radius_a: float, radius_b: float, rho_a: float, rho_b: float, E_a: float, nu_a: float,
                  E_b: float, nu_b: float, scaling: str = "peak") -> Contact:
    """Hertz contact of two spheres (module docstring). SI units: v0 [m/s], radii [m], densities [kg/m^3], E [Pa].

    Raises
    ------
    InputError
        On a non-positive speed, radius, density or modulus, nu outside (-1, 0.5), or an unknown scaling.
    """
    v0, ra, rb = _positive("v0", v0), _positive("radius_a", radius_a), _positive("radius_b", radius_b)
    rho_a, rho_b, E_a, E_b = (_positive(n, v) for n, v in (("rho_a", rho_a), ("rho_b", rho_b), ("E_a", E_a),
                                                            ("E_b", E_b)))
    for n, v in (("nu_a", nu_a), ("nu_b", nu_b)):
        if not -1.0 < float(v) < 0.5:
            raise InputError(f"granular pulse: {n} = {v} must lie in (-1, 0.5)")
    m_a, m_b = 4.0 / 3.0 * math.pi * ra**3 * rho_a, 4.0 / 3.0 * math.pi * rb**3 * rho_b
    m_eff = 1.0 / (1.0 / m_a + 1.0 / m_b)
    r_eff = 1.0 / (1.0 / ra + 1.0 / rb)
    E_star = 1.0 / ((1.0 - nu_a**2) / E_a + (1.0 - nu_b**2) / E_b)
    K = 4.0 / 3.0 * E_star * math.sqrt(r_eff)
    d = HERTZ_D * (m_eff**2 / (r_eff * E_star**2 * v0)) ** 0.2
    F_max = K * (5.0 * m_eff * v0**2 / (4.0 * K)) ** 0.6
    if scaling == "peak":
        a_m = (F_max / m_a, F_max / m_b)
    elif scaling == "impulse":
        dv = 2.0 * v0 * m_eff                                  # elastic: each grain's Delta-v = 2 v0 m_eff / m_i
        a_m = (math.pi * dv / m_a / (2.0 * d), math.pi * dv / m_b / (2.0 * d))
    else:
        raise InputError(f"granular pulse: scaling {scaling!r} must be 'peak' or 'impulse'")
    return Contact(d=d, a_m=a_m, F_max=F_max)


def pulse_terms(T, radius: float, d: float, c: float) -> tuple[np.ndarray, np.ndarray]:
    """W1(T), W2(T) of the split p = rho0 a_m cos(theta) (a c/r) [W1 + (a/r) W2] (module docstring) [s].

    Parameters
    ----------
    T : array_like
        Retarded times [s] (zero before 0).
    radius, d, c : float
        Grain radius [m], pulse duration [s], speed of sound [m/s].

    Returns
    -------
    W1, W2 : ndarray
        Same shape as T.
    """
    a, d, c = _positive("radius", radius), _positive("d", d), _positive("c", c)
    T = np.asarray(T, np.float64)
    l, b = c / a, math.pi / d
    D = b**4 + 4.0 * l**4

    def during(t):
        el = np.exp(-l * t)
        NR = l * np.sin(b * t) - b * np.cos(b * t) + b * el * np.cos(l * t)
        NI = -l * np.sin(b * t) + b * el * np.sin(l * t)
        return (b * b * NR - 2.0 * l * l * NI) / D, (b * b * NI + 2.0 * l * l * NR) / D

    JR, JI = during(np.clip(T, 0.0, d))
    JRd, JId = during(np.asarray(d))
    u = np.maximum(T - d, 0.0)
    decay = np.exp(-l * u)
    after = T > d
    JR = np.where(after, decay * (JRd * np.cos(l * u) - JId * np.sin(l * u)), JR)
    JI = np.where(after, decay * (JRd * np.sin(l * u) + JId * np.cos(l * u)), JI)
    JR = np.where(T < 0, 0.0, JR)
    JI = np.where(T < 0, 0.0, JI)
    return JR - JI, JI


def sphere_pressure(t, radius: float, a_m: float, d: float, r: float, cos_theta: float, *, t0: float = 0.0,
                    rho: float = 1.2041, c: float = 343.2) -> np.ndarray:
    """Pressure [Pa] of one sphere's half-sine acceleration pulse at a listener (module docstring).

    Parameters
    ----------
    t : array_like
        Times [s].
    radius : float
        Sphere radius a [m].
    a_m : float
        Peak acceleration [m/s^2].
    d : float
        Pulse duration [s].
    r : float
        Listener distance from the centre [m], >= radius.
    cos_theta : float
        Cosine of the angle between the acceleration and the listener direction.
    t0 : float, optional
        Pulse start [s].
    rho, c : float, optional
        Air [kg/m^3], [m/s].

    Raises
    ------
    InputError
        On a listener inside the sphere or non-positive parameters.
    """
    a, r = _positive("radius", radius), _positive("r", r)
    if r < a:
        raise InputError(f"granular pulse: the listener at r = {r} m is inside the grain (radius {a} m)")
    T = np.asarray(t, np.float64) - float(t0) - (r - a) / c
    W1, W2 = pulse_terms(T, a, d, c)
    return rho * float(a_m) * float(cos_theta) * (a * c / r) * (W1 + (a / r) * W2)


def pair_pressure(t, point, normal, radius_a: float, radius_b: float, contact: Contact, listener, *,
                  t0: float = 0.0, rho: float = 1.2041, c: float = 343.2) -> np.ndarray:
    """Pressure [Pa] of a grain pair's collision at a listener: P_A - P_B (module docstring).

    Parameters
    ----------
    t : array_like
        Times [s].
    point, normal : array_like, shape (3,)
        Contact point [m] and the unit normal from grain B to grain A.
    radius_a, radius_b : float
        Radii [m].
    contact : Contact
        From :func:`hertz_contact` (a_m = (grain A, grain B)).
    listener : array_like, shape (3,)
        Listener position [m].
    """
    x = np.asarray(point, np.float64).reshape(3)
    n = np.asarray(normal, np.float64).reshape(3)
    nn = float(np.linalg.norm(n))
    if not (math.isfinite(nn) and nn > 0):
        raise InputError(f"granular pulse: normal {n} must be a non-zero vector")
    n = n / nn
    xl = np.asarray(listener, np.float64).reshape(3)
    out = np.zeros(np.shape(t))
    for sign, centre, a, am in ((1.0, x + radius_a * n, radius_a, contact.a_m[0]),
                                (-1.0, x - radius_b * n, radius_b, contact.a_m[1])):
        v = xl - centre
        r = float(np.linalg.norm(v))
        out = out + sign * sphere_pressure(t, a, am, contact.d, r, float(n @ v) / r, t0=t0, rho=rho, c=c)
    return out
