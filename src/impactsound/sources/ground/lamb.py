"""Lamb's problem: vertical surface displacement of an elastic half-space under a step point load, any nu.

Kausel 2013, "Lamb's problem at its simplest" (Proc. R. Soc. A 469), the closed form of Pekeris 1955 for nu = 1/4
generalised to every Poisson ratio; used by Qu & James 2019 ("Ground sound") for the floor's motion under an
impact. An upward load P H(t) at the origin of the half-space z < 0 lifts the surface at horizontal distance r by

    u(r, t) = P f(r) U(tau),   f(r) = (1 - nu) / (2 pi mu r)   (Boussinesq's static value),   tau = c_s t / r,

with U = 0 before the P arrival (tau < a = c_s/c_p), U = 1 after the Rayleigh arrival (tau > gamma = c_s/c_R), and
between them

    a < tau < 1:      U = 1/2 [1 - A1/sqrt(tau^2 - x1) - A2/sqrt(tau^2 - x2) - A3/sqrt(x3 - tau^2)]
    1 < tau < gamma:  U = 1 - A3/sqrt(x3 - tau^2)

where x1, x2, x3 are the roots of the rationalised Rayleigh cubic in x = (c_s/c)^2,

    16 (1 - a^2) x^3 - 8 (3 - 2 a^2) x^2 + 8 x - 1 = 0

(the squared Rayleigh equation (2 - xi^2)^4 = 16 (1 - xi^2)(1 - a^2 xi^2), xi = 1/sqrt(x), whose x^4 terms cancel),
x3 = gamma^2 the largest real root, and

    A_j = (x_j - 1/2)^2 sqrt(a^2 - x_j) / prod_{k != j} (x_j - x_k)   (j = 1, 2; principal square roots)
    A3  = (x3 - 1/2)^2 sqrt(x3 - a^2) / ((x3 - x1)(x3 - x2)).

Above nu* = 0.26308 the roots x1, x2 are a complex-conjugate pair and so are A1, A2: their two terms are evaluated
in complex arithmetic and add to a real number. U is continuous, with kinks at tau = a and tau = 1, and tends to
-infinity like (gamma - tau)^(-1/2) just before the Rayleigh arrival, then jumps to 1.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError


def _check_nu(nu: float) -> float:
    nu = float(nu)
    if not (np.isfinite(nu) and 0.0 <= nu < 0.5):
        raise InputError(f"Lamb's problem: Poisson's ratio nu = {nu} must lie in [0, 0.5) for an elastic "
                         "half-space (0.5 is incompressible: no P wave)")
    return nu


def speed_ratio_squared(nu: float) -> float:
    """a^2 = (c_s / c_p)^2 = (1 - 2 nu) / (2 - 2 nu) of an elastic solid with Poisson's ratio ``nu``."""
    nu = _check_nu(nu)
    return (1.0 - 2.0 * nu) / (2.0 - 2.0 * nu)


def rayleigh_roots(nu: float) -> tuple[complex, complex, float]:
    """Roots (x1, x2, x3) of the rationalised Rayleigh cubic (module docstring), Newton-polished.

    Parameters
    ----------
    nu : float
        Poisson's ratio, in [0, 0.5).

    Returns
    -------
    tuple
        x1, x2 (complex; real below nu* = 0.26308, a conjugate pair above), x3 = (c_s / c_R)^2 (float, > 1).
    """
    a2 = speed_ratio_squared(nu)
    c = np.array([16.0 * (1.0 - a2), -8.0 * (3.0 - 2.0 * a2), 8.0, -1.0])
    roots = np.roots(c).astype(np.complex128)
    dc = np.polyder(c)
    for _ in range(3):                                          # polish each root
        roots = roots - np.polyval(c, roots) / np.polyval(dc, roots)
    real = np.abs(roots.imag) < 1e-12
    roots = np.where(real, roots.real + 0j, roots)
    i3 = int(np.argmax(np.where(real, roots.real, -np.inf)))
    x3 = float(roots[i3].real)
    x1, x2 = (complex(r) for k, r in enumerate(roots) if k != i3)
    return x1, x2, x3


def rayleigh_speed_ratio(nu: float) -> float:
    """c_R / c_s = 1 / sqrt(x3): the Rayleigh-wave speed over the shear-wave speed."""
    return 1.0 / np.sqrt(rayleigh_roots(nu)[2])


def residue_weights(nu: float) -> tuple[complex, complex, float]:
    """The weights (A1, A2, A3) of the step response (module docstring)."""
    a2 = speed_ratio_squared(nu)
    x1, x2, x3 = rayleigh_roots(nu)
    A1 = (x1 - 0.5) ** 2 * np.sqrt(complex(a2 - x1)) / ((x1 - x2) * (x1 - x3))
    A2 = (x2 - 0.5) ** 2 * np.sqrt(complex(a2 - x2)) / ((x2 - x1) * (x2 - x3))
    A3 = (x3 - 0.5) ** 2 * np.sqrt(x3 - a2) / ((x3 - x1) * (x3 - x2))
    return complex(A1), complex(A2), float(np.real(A3))


def step_response(tau, nu: float) -> np.ndarray:
    """Dimensionless vertical surface displacement U(tau) under an upward step point load (module docstring).

    Parameters
    ----------
    tau : array_like
        Dimensionless time c_s t / r (t [s] since the load started, r [m] the horizontal distance).
    nu : float
        Poisson's ratio, in [0, 0.5).

    Returns
    -------
    ndarray
        U(tau): the displacement over Boussinesq's static value P (1 - nu) / (2 pi mu r); -inf at tau = gamma.
    """
    t = np.asarray(tau, np.float64)
    a = np.sqrt(speed_ratio_squared(nu))
    x1, x2, x3 = rayleigh_roots(nu)
    A1, A2, A3 = residue_weights(nu)
    gamma = np.sqrt(x3)
    t2 = (t * t).astype(np.complex128)
    out = np.where(t >= gamma, 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s3 = A3 / np.sqrt(np.maximum(x3 - t * t, 0.0))
        pair = np.real(A1 / np.sqrt(t2 - x1) + A2 / np.sqrt(t2 - x2))
        early = 0.5 * (1.0 - pair - s3)
        late = 1.0 - s3
    out = np.where((t > a) & (t < 1.0), early, out)
    out = np.where((t >= 1.0) & (t < gamma), late, out)
    return out
