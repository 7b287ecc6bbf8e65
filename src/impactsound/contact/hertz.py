"""Hertz contact: time scale, effective mass, combined modulus and the half-sine force profile.

Equations from Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound"
(ACM TOG 31(4)), sec. 3 "Contact Force Estimation", after Hertz (1882) and Johnson, "Contact Mechanics" (1985):

* Hertz law f = K d^{3/2}, K = (4/3) sqrt(r) E*                                    (sec. 3.1, eq. 5)
* half-sine S(t; t0, tau) = sin(pi (t - t0)/tau) on [t0, t0 + tau], else 0          (sec. 3.1, eq. 6)
* contact duration tau = 2.87 (m^2 / (r E*^2 V))^{1/5}                              (sec. 3.1, eq. 7)
  (the exact constant of the Hertz ODE is 2 (15/16)^{2/5} int_0^1 du / sqrt(1 - u^{5/2}) = 2.868266; the
  paper's rounded 2.87 is 0.06 % long; we keep the paper's 2.87)
* 1/m = 1/m1 + 1/m2,  1/r = 1/r1 + 1/r2,  1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2     (sec. 3.1, eq. 8)
* effective mass of one body: 1/m_i = 1/M_i + ((x - x0) x n) . I^{-1} ((x - x0) x n)  (sec. 3.2, eq. 9)
* force f(t) = gamma S(t; t0, tau), gamma = pi |J| / (2 tau), so that int f dt = |J|   (sec. 3.3, eq. 10)

All functions are vectorised over events (NumPy broadcasting) and use SI units.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..materials import Material

#: Hertz time-scale constant of the PAN paper's eq. 7 (rounded; exact value 2.868266, see module docstring).
HERTZ_TAU_CONSTANT = 2.87


def combined_modulus(mat1: Material | None, mat2: Material | None) -> float:
    """Contact modulus E* [Pa] of two materials: 1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2 (PAN paper eq. 8).

    Parameters
    ----------
    mat1, mat2 : Material or None
        The two contact partners (Young's modulus E [Pa], Poisson ratio nu). ``None`` stands for a rigid body
        (its term is zero).

    Returns
    -------
    float
        E* [Pa].

    Raises
    ------
    InputError
        If both are ``None``.
    """
    inv = 0.0
    for mat in (mat1, mat2):
        if mat is not None:
            inv += (1.0 - mat.nu**2) / mat.E
    if inv <= 0.0:
        raise InputError("combined_modulus: both contact partners are rigid; give at least one material")
    return 1.0 / inv


def inverse_effective_mass(M, I, x_minus_x0, n) -> np.ndarray:
    """1/m [1/kg] of a rigid body along direction n at a point (PAN paper sec. 3.2, eq. 9):
    1/m = 1/M + ((x - x0) x n) . I^{-1} ((x - x0) x n).

    Parameters
    ----------
    M : float or array_like, shape (E,)
        Mass [kg]. An infinite mass (the ground, a fixed body) gives 1/m = 0.
    I : array_like, shape (3, 3) or (E, 3, 3)
        Inertia tensor about the centre of mass [kg m^2], in the frame of ``x_minus_x0`` and ``n``.
    x_minus_x0 : array_like, shape (3,) or (E, 3)
        Contact point relative to the centre of mass [m].
    n : array_like, shape (3,) or (E, 3)
        Unit direction.

    Returns
    -------
    float or ndarray, shape (E,)
        1/m [1/kg]; a scalar when ``x_minus_x0`` is a single point.
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
    """Effective mass m [kg] of a rigid body along unit direction n at a point (PAN paper eq. 9).

    Parameters
    ----------
    M, I, x_minus_x0, n
        As for :func:`inverse_effective_mass`.

    Returns
    -------
    ndarray
        m [kg] (0-d for a single point); ``inf`` where 1/m = 0 (infinite M).
    """
    inv = np.asarray(inverse_effective_mass(M, I, x_minus_x0, n))
    with np.errstate(divide="ignore"):
        return np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), np.inf)


def hertz_stiffness(r_eff, E_star):
    """Hertz stiffness K = (4/3) sqrt(r) E* [N/m^{3/2}] (PAN paper sec. 3.1, after eq. 5).

    Parameters
    ----------
    r_eff : float or array_like
        Effective radius r [m], 1/r = 1/r1 + 1/r2.
    E_star : float or array_like
        Contact modulus E* [Pa] (:func:`combined_modulus`).

    Returns
    -------
    float or ndarray
        K [N/m^{3/2}].
    """
    return 4.0 / 3.0 * np.sqrt(r_eff) * E_star


def hertz_tau(m_eff, r_eff, E_star, vn):
    """Hertz contact duration tau = 2.87 (m^2/(r E*^2 V))^{1/5} [s] (PAN paper sec. 3.1, eqs. 7-8).

    Parameters
    ----------
    m_eff : float or array_like
        Effective mass m [kg], 1/m = 1/m1 + 1/m2.
    r_eff : float or array_like
        Effective radius r [m], 1/r = 1/r1 + 1/r2.
    E_star : float or array_like
        Contact modulus E* [Pa].
    vn : float or array_like
        Normal approach speed V [m/s].

    Returns
    -------
    ndarray
        tau [s], broadcast over the inputs.

    Raises
    ------
    InputError
        If any input is non-positive or non-finite. A zero approach speed has no Hertz time: such resting
        contacts must be removed before synthesis (the PAN paper, sec. 4.3, discards impulses below
        v_min = 5 cm/s).
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
    """Peak force gamma = pi |J| / (2 tau) [N], so that the half-sine integrates to |J| (PAN paper eq. 10).

    Parameters
    ----------
    J_abs : float or array_like
        Impulse magnitude |J| [N s].
    tau : float or array_like
        Contact duration [s].

    Returns
    -------
    ndarray
        gamma [N].
    """
    return np.pi * np.asarray(J_abs, dtype=np.float64) / (2.0 * np.asarray(tau, dtype=np.float64))


def half_sine(t, t0, tau):
    """S(t; t0, tau) = sin(pi (t - t0)/tau) for t0 <= t <= t0 + tau, else 0 (PAN paper eq. 6).

    Parameters
    ----------
    t : float or array_like
        Times [s].
    t0 : float or array_like
        Contact start [s].
    tau : float or array_like
        Contact duration [s].

    Returns
    -------
    ndarray
        S (dimensionless), broadcast over the inputs.
    """
    t = np.asarray(t, dtype=np.float64)
    u = (t - t0) / tau
    return np.where((u >= 0) & (u <= 1), np.sin(np.pi * np.clip(u, 0.0, 1.0)), 0.0)


def half_sine_force(t, t0, tau, J_abs):
    """Contact force magnitude f(t) = gamma S(t; t0, tau) [N], gamma = pi |J|/(2 tau) (PAN paper eqs. 6, 10).

    Parameters
    ----------
    t, t0, tau
        As for :func:`half_sine` [s].
    J_abs : float or array_like
        Impulse magnitude |J| [N s].

    Returns
    -------
    ndarray
        f [N].
    """
    return half_sine_amplitude(J_abs, tau) * half_sine(t, t0, tau)
