"""Hertz contact: time scale, effective mass, combined modulus and the half-sine force profile.

Equations from specs/pan.md "Contact force from an impulse" (PAN paper sec. 3):

* Hertz law f = K d^{3/2}, K = (4/3) sqrt(r) E*                                           (pan.md, Hertz)
* contact duration tau = 2.87 (m^2 / (r E*^2 V))^{1/5}                                     (pan.md, tau)
  (the exact constant of the Hertz ODE is 2 (15/16)^{2/5} int_0^1 du / sqrt(1 - u^{5/2}) = 2.868266; the
  paper's rounded 2.87 is 0.06 % long; we keep 2.87 as specified)
* 1/m = 1/m1 + 1/m2,  1/r = 1/r1 + 1/r2,  1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2            (pan.md)
* effective mass of one body: 1/m_i = 1/M_i + ((x - x0) x n) . I^{-1} ((x - x0) x n)        (pan.md)
* force f(t) = gamma S(t; t0, tau), S = sin(pi (t - t0)/tau) on [t0, t0 + tau], gamma = pi |J| / (2 tau),
  so that int f dt = |J|                                                                    (pan.md)

All functions are vectorised over events (NumPy broadcasting) and use SI units.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..materials import Material

#: Hertz time-scale constant of pan.md (rounded; exact value 2.868266, see module docstring).
HERTZ_TAU_CONSTANT = 2.87


def combined_modulus(mat1: Material | None, mat2: Material | None) -> float:
    """Contact modulus E* [Pa] of two materials: 1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2 (pan.md).

    ``None`` stands for a rigid body (its term is zero). Both ``None`` raises :class:`InputError`.
    """
    inv = 0.0
    for mat in (mat1, mat2):
        if mat is not None:
            inv += (1.0 - mat.nu**2) / mat.E
    if inv <= 0.0:
        raise InputError("combined_modulus: both contact partners are rigid; give at least one material")
    return 1.0 / inv


def inverse_effective_mass(M, I, x_minus_x0, n) -> np.ndarray:
    """1/m [1/kg] of a rigid body along direction n at a point (pan.md):
    1/m = 1/M + ((x - x0) x n) . I^{-1} ((x - x0) x n).

    M: mass [kg], scalar or (E,); I: inertia about the COM [kg m^2], (3, 3) or (E, 3, 3), in the same frame as
    ``x_minus_x0`` (E, 3) [m] and ``n`` (E, 3) (unit). An infinite mass (the ground, a fixed body) gives 0.
    """
    x = np.asarray(x_minus_x0, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    single = x.ndim == 1
    x = x.reshape(-1, 3)
    nn = np.broadcast_to(nn.reshape(-1, 3), x.shape)
    M = np.broadcast_to(np.asarray(M, dtype=np.float64), (x.shape[0],))
    inf = ~np.isfinite(M)
    out = np.zeros(x.shape[0])
    fin = ~inf
    if fin.any():
        I = np.asarray(I, dtype=np.float64)
        I = np.broadcast_to(I, (x.shape[0], 3, 3))[fin]
        rxn = np.cross(x[fin], nn[fin])                               # (x - x0) x n
        y = np.linalg.solve(I, rxn[..., None])[..., 0]               # I^{-1} (x - x0) x n
        out[fin] = 1.0 / M[fin] + np.einsum("ij,ij->i", rxn, y)
    return out[0] if single else out


def effective_mass(M, I, x_minus_x0, n) -> np.ndarray:
    """Effective mass m [kg] of a rigid body along unit direction n at a point (pan.md); inf for infinite M.

    Same arguments as :func:`inverse_effective_mass`.
    """
    inv = np.asarray(inverse_effective_mass(M, I, x_minus_x0, n))
    with np.errstate(divide="ignore"):
        return np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), np.inf)


def hertz_stiffness(r_eff, E_star):
    """Hertz stiffness K = (4/3) sqrt(r) E* [N/m^{3/2}] (pan.md)."""
    return 4.0 / 3.0 * np.sqrt(r_eff) * E_star


def hertz_tau(m_eff, r_eff, E_star, vn):
    """Hertz contact duration tau = 2.87 (m^2/(r E*^2 V))^{1/5} [s] (pan.md).

    m_eff [kg] (1/m = 1/m1 + 1/m2), r_eff [m] (1/r = 1/r1 + 1/r2), E_star [Pa], vn = normal approach speed
    [m/s]. Vectorised. Non-positive or non-finite inputs raise :class:`InputError` (a zero approach speed has
    no Hertz time: such resting contacts must be removed before synthesis, modal-sound.md sec. 8).
    """
    m, r, E, v = (np.asarray(a, dtype=np.float64) for a in (m_eff, r_eff, E_star, vn))
    for name, a in (("m_eff", m), ("r_eff", r), ("E_star", E), ("vn", v)):
        bad = ~(np.isfinite(a) & (a > 0))
        if np.any(bad):
            val = a.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])] if a.ndim else float(a)
            raise InputError(f"hertz_tau: {name} = {val} must be positive and finite"
                             + (" (drop contacts with v_n below v_min = 5 cm/s before synthesis)"
                                if name == "vn" else ""))
    return HERTZ_TAU_CONSTANT * (m**2 / (r * E**2 * v)) ** 0.2


def half_sine_amplitude(J_abs, tau):
    """Peak force gamma = pi |J| / (2 tau) [N] so that the half-sine integrates to |J| (pan.md)."""
    return np.pi * np.asarray(J_abs, dtype=np.float64) / (2.0 * np.asarray(tau, dtype=np.float64))


def half_sine(t, t0, tau):
    """S(t; t0, tau) = sin(pi (t - t0)/tau) for t0 <= t <= t0 + tau, else 0 (pan.md). Dimensionless."""
    t = np.asarray(t, dtype=np.float64)
    u = (t - t0) / tau
    return np.where((u >= 0) & (u <= 1), np.sin(np.pi * np.clip(u, 0.0, 1.0)), 0.0)


def half_sine_force(t, t0, tau, J_abs):
    """Contact force magnitude f(t) = gamma S(t; t0, tau) [N], gamma = pi |J|/(2 tau) (pan.md)."""
    return half_sine_amplitude(J_abs, tau) * half_sine(t, t0, tau)
