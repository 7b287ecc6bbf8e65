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

import cmath
import functools
import math

import numpy as np
from numba import njit

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


# ---- regularized response: closed form of the Lorentzian-smoothed step response ------------------------------------
# (K_eps * U)(tau) with the Lorentzian K_eps(t) = eps / (pi (t^2 + eps^2)) is Re U(z) at the complex time
# z = tau + i eps, U(z) = (1/(i pi)) int U(s) / (s - z) ds (U is real, so the Cauchy integral is analytic above the
# real axis); its tau-derivatives are Re U^(n)(z), U^(n)(z) = (n!/(i pi)) int U(s) / (s - z)^(n+1) ds. U is
# constants plus inverse square roots on [a, 1] and [1, gamma], so the integrals have closed forms (the I^1, I^3 of
# the functions below) reached by a recurrence in the power of (s - p). This closed form was derived and checked for
# this package (against brute-force quadrature of the convolution); Qu & James 2019 regularize the same way.

_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


def _sqrt_c_minus_s2(gamma: float, s):
    """sqrt(x3 - s^2) as sqrt((gamma - s)(gamma + s)): exactly 0 at s = gamma (a rounded gamma^2 would leave a
    1e-8 error in the I^3 integrals)."""
    return np.sqrt(((gamma - s) * (gamma + s)).astype(np.complex128))


def _delta_log(phi, p, s1: float, s2: float):
    """Continuous change of ln phi(s) for s from s1 to s2, for each p: the sum of principal logs of ratios over a
    partition fine where phi turns (phi vanishes at s = p, so its phase turns by ~pi within a few |Im p| of Re p):
    64 uniform nodes plus Re p + |Im p| tan(theta_k), 64 theta_k uniform in (-pi/2, pi/2), inside [s1, s2]."""
    p = np.asarray(p)
    th = (np.arange(64) + 0.5) / 64 * np.pi - np.pi / 2
    extra = p.real[:, None] + np.abs(p.imag)[:, None] * np.tan(th)[None, :]
    extra = np.clip(extra, s1, s2)
    nodes = np.sort(np.concatenate([np.broadcast_to(np.linspace(s1, s2, 64), (len(p), 64)), extra], axis=1), axis=1)
    f = phi(nodes, p[:, None])
    return np.log(f[:, 1:] / f[:, :-1]).sum(axis=1)


def _inv_root_integrals(p, kind: str, x, s1: float, s2: float, m_max: int, gamma: float):
    """I_m(p) for m = 1..m_max: int_{s1}^{s2} ds / ((s - p)^m sqrt(s^2 - x)) (kind "1") or
    sqrt(x - s^2) (kind "3", x = x3 = gamma^2), by the closed form of I_1 and the recurrence in m."""
    p = np.asarray(p, np.complex128)
    if kind == "1":
        root = lambda s: np.sqrt((s * s - x).astype(np.complex128) if np.ndim(s) else complex(s * s - x))  # noqa: E731
        q = np.sqrt(p * p - x)

        def phi(s, pp):
            qq = np.sqrt(pp * pp - x)
            return (x - pp * s + qq * np.sqrt((s * s - x).astype(np.complex128))) / (s - pp)
        I = [None, _delta_log(phi, p, s1, s2) / q]
        d = p * p - x
    else:
        root = lambda s: _sqrt_c_minus_s2(gamma, np.asarray(s, np.float64))        # noqa: E731
        Q = np.sqrt(x - p * p)

        def phi(s, pp):
            QQ = np.sqrt(x - pp * pp)
            return (x - pp * s + QQ * _sqrt_c_minus_s2(gamma, s)) / (s - pp)
        I = [None, -_delta_log(phi, p, s1, s2) / Q]
        d = x - p * p
    r1, r2 = root(s1), (0.0 if (kind == "3" and s2 == gamma) else root(s2))
    for m in range(1, m_max):
        B = r2 / (s2 - p) ** m - r1 / (s1 - p) ** m
        prev = I[m - 1] if m > 1 else 0.0                         # I_0 enters with weight 0 at m = 1
        if kind == "1":
            I.append(((1 - m) * prev + (1 - 2 * m) * p * I[m] - B) / (m * d))
        else:
            I.append(((m - 1) * prev + (2 * m - 1) * p * I[m] - B) / (m * d))
    return I


def _quad_inv_root1(p, x, s1: float, s2: float, m: int, eps):
    """int_{s1}^{s2} ds / ((s - p)^m sqrt(s^2 - x)) by 24-point Gauss-Legendre on panels refined towards Re p
    (breakpoints Re p +- eps 2^k): where p^2 is close to x the recurrence above loses accuracy."""
    out = np.empty(len(p), np.complex128)
    eps = np.broadcast_to(np.asarray(eps, np.float64), p.shape)
    for i, pp in enumerate(p):
        e = eps[i]
        bps = pp.real + np.concatenate([-e * 2.0 ** np.arange(12), [0.0], e * 2.0 ** np.arange(12)])
        edges = np.unique(np.clip(np.concatenate([[s1, s2], bps]), s1, s2))
        lo, hi = edges[:-1], edges[1:]
        s = 0.5 * (lo + hi)[:, None] + 0.5 * (hi - lo)[:, None] * _GL_X[None, :]
        w = 0.5 * (hi - lo)[:, None] * _GL_W[None, :]
        out[i] = (w / ((s - pp) ** m * np.sqrt((s * s - x).astype(np.complex128)))).sum()
    return out


def _regularized_args(tau, eps, n: int):
    """(tau, eps) checked, broadcast and flattened, their broadcast shape, and n as an int (regularized_response)."""
    eps_in = np.asarray(eps, np.float64)
    if not (np.all(np.isfinite(eps_in)) and np.all(eps_in > 0)):
        raise InputError(f"regularized Lamb response: eps = {eps} must be positive (the regularization width)")
    if int(n) != n or not 0 <= n <= 3:
        raise InputError(f"regularized Lamb response: derivative order n = {n} must be 0, 1, 2 or 3")
    t, e = np.broadcast_arrays(np.asarray(tau, np.float64), eps_in)
    return np.ascontiguousarray(t.reshape(-1)), np.ascontiguousarray(e.reshape(-1)), t.shape, int(n)


@functools.lru_cache(maxsize=64)
def _lamb_constants(nu: float):
    """(a, x1, x2, x3, A1, A2, A3, gamma) of Poisson's ratio ``nu`` (module docstring), computed once per nu."""
    a = float(np.sqrt(speed_ratio_squared(nu)))
    x1, x2, x3 = rayleigh_roots(nu)
    A1, A2, A3 = residue_weights(nu)
    return a, x1, x2, x3, A1, A2, A3, float(np.sqrt(x3))


def _regularized_response_reference(tau, eps, nu: float, n: int = 0) -> np.ndarray:
    """regularized_response by the partition algorithm of _delta_log and NumPy: slow, kept to check the kernel."""
    t, e, shape, n = _regularized_args(tau, eps, n)
    z = t + 1j * e
    a, x1, x2, x3, A1, A2, A3, gamma = _lamb_constants(_check_nu(nu))
    m = n + 1
    total = np.zeros(len(z), np.complex128)
    for Aj, xj in ((A1, x1), (A2, x2)):
        if Aj == 0:
            continue
        Ij = _inv_root_integrals(z, "1", xj, a, 1.0, m, gamma)[m]
        near = np.abs(z * z - xj) < 0.05
        if near.any():
            Ij[near] = _quad_inv_root1(z[near], xj, a, 1.0, m, e[near])
        total += 0.5 * Aj * Ij
    total += 0.5 * A3 * _inv_root_integrals(z, "3", x3, a, 1.0, m, gamma)[m]
    total += A3 * _inv_root_integrals(z, "3", x3, 1.0, gamma, m, gamma)[m]
    if n == 0:
        U = (-0.5 * np.log(1 - z) - 0.5 * np.log(a - z) - total) / (1j * np.pi)
    else:
        U = 0.5 * math.factorial(n - 1) * ((a - z) ** (-n) + (1 - z) ** (-n)) - math.factorial(n) * total
        U = U / (1j * np.pi)
    out = U.real.reshape(shape)
    return out if out.ndim else float(out)


# ---- compiled kernel: the same closed form, with the branch of each logarithm found analytically ------------------
# Kind 3 (s in [a, gamma], x3 = gamma^2): s = gamma cos(theta) and w = tan(theta/2) = sqrt((gamma - s)/(gamma + s))
# turn I_1 into 2/(gamma + p) int dw / (w^2 - r^2), r^2 = (gamma - p)/(gamma + p), so
#     I_1 = -(2 / Q) [atanh(w2 / r) - atanh(w1 / r)],   Q = r (gamma + p)   (either sign of r).
# w is real and r is not (Im p > 0), so w / r runs along a ray from 0 that misses the cuts of the principal atanh.
# Kind 1 (s in [a, 1], x = x1 or x2): Euler's substitution u = s + sqrt(s^2 - x), du / u = ds / sqrt(s^2 - x),
# turns I_1 into int 2 du / ((u - u+)(u - u-)), u+- = p +- q, q = sqrt(p^2 - x), so
#     I_1 = [D ln(u - u+) - D ln(u - u-)] / q,
# D ln g the continuous change along the path. For real x (below nu*; x < a^2), u is real and Im(u - c) = -Im c
# keeps one sign: principal logarithms. For complex x, Im sqrt(s^2 - x) = -Im x / (2 Re sqrt(s^2 - x)) is monotone in
# s (Re sqrt(s^2 - x) grows with s), so u - c crosses the real axis at most once, where Re sqrt(s^2 - x) =
# -Im x / (2 Im c); the branch changes by 2 pi i when it crosses the negative half. This replaces the partition of
# _delta_log (same integrals; both substitutions are the textbook ones for such integrands). Where p^2 is close to x
# the recurrence loses accuracy: kind 1 then takes the panel quadrature of _quad_inv_root1, as the reference does, and
# kind 3 near p = -gamma (tau < -1: before the load, where the reference is off by up to 1e-2 at eps = 1e-4) a
# Gauss-Legendre quadrature in theta.


@njit(cache=True)
def _dlog_euler(g1, g2, x, c):
    """Continuous change of ln(u(s) - c) from g1 = u(s1) - c to g2 = u(s2) - c, u(s) = s + sqrt(s^2 - x), s > 0."""
    d = cmath.log(g2) - cmath.log(g1)
    below1 = math.copysign(1.0, g1.imag) < 0.0             # the side of the cut that the principal log takes
    below2 = math.copysign(1.0, g2.imag) < 0.0
    if below1 != below2 and c.imag != 0.0:
        rw = -x.imag / (2.0 * c.imag)                        # Re sqrt(s^2 - x) where Im u(s) = Im c
        re_g = math.sqrt(max(rw * rw - c.imag * c.imag + x.real, 0.0)) + rw - c.real
        if re_g < 0.0:                                       # crossed the negative real axis
            d += -2j * math.pi if below1 else 2j * math.pi
    return d


@njit(cache=True)
def _kind1(p, x, s1, s2, m):
    """I_m = int_{s1}^{s2} ds / ((s - p)^m sqrt(s^2 - x)) by Euler's substitution and the recurrence in m."""
    r1 = cmath.sqrt(s1 * s1 - x)
    r2 = cmath.sqrt(s2 * s2 - x)
    q = cmath.sqrt(p * p - x)
    up = p + q
    if abs(p - q) > abs(up):                                 # the larger root directly, the other as x / it
        q = -q
        up = p + q
    um = x / up
    u1 = s1 + r1
    u2 = s2 + r2
    cur = (_dlog_euler(u1 - up, u2 - up, x, up) - _dlog_euler(u1 - um, u2 - um, x, um)) / q
    d = p * p - x
    prev = 0j
    w1 = s1 - p
    w2 = s2 - p
    for k in range(1, m):
        B = r2 / w2 - r1 / w1
        cur, prev = ((1 - k) * prev + (1 - 2 * k) * p * cur - B) / (k * d), cur
        w1 *= s1 - p
        w2 *= s2 - p
    return cur


@njit(cache=True)
def _kind3(p, x3, gamma, s1, s2, m):
    """I_m = int_{s1}^{s2} ds / ((s - p)^m sqrt(x3 - s^2)), 0 <= s1 < s2 <= gamma, by the half-angle substitution
    and the recurrence in m."""
    r = cmath.sqrt((gamma - p) / (gamma + p))
    Q = r * (gamma + p)
    w1 = math.sqrt((gamma - s1) / (gamma + s1))
    w2 = math.sqrt((gamma - s2) / (gamma + s2))
    cur = -2.0 / Q * (cmath.atanh(w2 / r) - cmath.atanh(w1 / r))
    r1 = math.sqrt((gamma - s1) * (gamma + s1))
    r2 = math.sqrt((gamma - s2) * (gamma + s2))
    d = x3 - p * p
    prev = 0j
    v1 = s1 - p
    v2 = s2 - p
    for k in range(1, m):
        B = r2 / v2 - r1 / v1
        cur, prev = ((k - 1) * prev + (2 * k - 1) * p * cur - B) / (k * d), cur
        v1 *= s1 - p
        v2 *= s2 - p
    return cur


@njit(cache=True)
def _quad3(p, gamma, s1, s2, m, gx, gw):
    """The kind-3 I_m by Gauss-Legendre (gx, gw) in theta, s = gamma cos(theta): int dtheta / (gamma cos(theta) - p)^m
    over [arccos(s2 / gamma), arccos(s1 / gamma)]. For p near -gamma, where the recurrence divides by
    x3 - p^2 ~ 0 although the integrand is smooth (its pole lies far from [s1, s2])."""
    lo = math.acos(min(s2 / gamma, 1.0))
    hi = math.acos(min(s1 / gamma, 1.0))
    total = 0j
    for k in range(len(gx)):
        th = 0.5 * (lo + hi) + 0.5 * (hi - lo) * gx[k]
        total += gw[k] / (gamma * math.cos(th) - p) ** m
    return 0.5 * (hi - lo) * total


@njit(cache=True)
def _quad1(p, x, s1, s2, m, e, gx, gw):
    """_quad_inv_root1 at one point: Gauss-Legendre (gx, gw) panels with breakpoints Re p +- e 2^k in [s1, s2]."""
    edges = np.empty(27)
    edges[0] = s1
    edges[1] = s2
    edges[2] = p.real
    for k in range(12):
        edges[3 + k] = p.real - e * 2.0 ** k
        edges[15 + k] = p.real + e * 2.0 ** k
    edges = np.sort(np.minimum(np.maximum(edges, s1), s2))
    total = 0j
    for j in range(26):
        lo = edges[j]
        hi = edges[j + 1]
        if hi <= lo:
            continue
        for k in range(len(gx)):
            s = 0.5 * (lo + hi) + 0.5 * (hi - lo) * gx[k]
            v = s - p
            total += 0.5 * (hi - lo) * gw[k] / (v ** m * cmath.sqrt(s * s - x))
    return total


@njit(cache=True)
def _regularized_kernel(t, e, n, a, x1, x2, x3, A1, A2, A3, gamma, gx, gw, out):
    """out[i] = Re U^(n)(t[i] + i e[i]) (regularized_response), one point at a time."""
    m = n + 1
    fact = (1.0, 1.0, 2.0, 6.0)
    for i in range(len(t)):
        p = complex(t[i], e[i])
        total = 0j
        if A1 != 0:
            I = _quad1(p, x1, a, 1.0, m, e[i], gx, gw) if abs(p * p - x1) < 0.05 else _kind1(p, x1, a, 1.0, m)
            total += 0.5 * A1 * I
        if A2 != 0:
            I = _quad1(p, x2, a, 1.0, m, e[i], gx, gw) if abs(p * p - x2) < 0.05 else _kind1(p, x2, a, 1.0, m)
            total += 0.5 * A2 * I
        if p.real < 0.0 and abs(x3 - p * p) < 0.5:
            total += 0.5 * A3 * _quad3(p, gamma, a, 1.0, m, gx, gw) + A3 * _quad3(p, gamma, 1.0, gamma, m, gx, gw)
        else:
            total += 0.5 * A3 * _kind3(p, x3, gamma, a, 1.0, m) + A3 * _kind3(p, x3, gamma, 1.0, gamma, m)
        if n == 0:
            U = -0.5 * cmath.log(1 - p) - 0.5 * cmath.log(a - p) - total
        else:
            U = 0.5 * fact[n - 1] * ((a - p) ** (-n) + (1 - p) ** (-n)) - fact[n] * total
        out[i] = (U / (1j * math.pi)).real


def regularized_response(tau, eps, nu: float, n: int = 0) -> np.ndarray:
    """n-th tau-derivative of the Lorentzian-regularized step response, d^n/dtau^n (K_eps * U)(tau).

    Parameters
    ----------
    tau : array_like
        Dimensionless time c_s t / r.
    eps : float or array_like
        Dimensionless Lorentzian half-width c_s epsilon / r (> 0; double precision holds down to ~1e-4); an
        array broadcasts with ``tau`` (one width per sample, e.g. one per distance r).
    nu : float
        Poisson's ratio, in [0, 0.5).
    n : int
        Derivative order, 0..3 (displacement, velocity, acceleration, jerk of the surface, in units of
        Boussinesq's static value times (c_s / r)^n).

    Returns
    -------
    ndarray
        Re U^(n)(tau + i eps) (module comment above), a float for scalar tau and eps.
    """
    t, e, shape, n = _regularized_args(tau, eps, n)
    a, x1, x2, x3, A1, A2, A3, gamma = _lamb_constants(_check_nu(nu))
    out = np.empty(len(t))
    _regularized_kernel(t, e, n, a, x1, x2, x3, A1, A2, A3, gamma, _GL_X, _GL_W, out)
    out = out.reshape(shape)
    return out if out.ndim else float(out)
