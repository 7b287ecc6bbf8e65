"""The ground's sound in the frequency domain: Lamb's impulse response as a spectrum, radiated ring by ring.

Qu & James 2019 ("Ground sound") radiate the regularized Lamb surface motion by the Rayleigh integral in the time
domain (:mod:`.impact`). The same integral is cheaper, and exact for every kernel width at once, per frequency:

1. Lamb's problem is self-similar: under an impulse J (force J delta(t)) the upward surface displacement is
   w(r, t) = -J f(r) (c_s / r) U'(c_s t / r), f(r) = (1 - nu) / (2 pi mu r), U the step response of :mod:`.lamb`.
   With V(x) = int U'(tau) exp(-2 pi i x tau) dtau (the spectrum of U', x a dimensionless frequency), the surface
   acceleration's spectrum is

       A(r, f) = -J (1 - nu) / (2 pi mu) (2 pi i f)^2 V(f r / c_s) / r.

   V is one function per Poisson ratio: V(x) = exp(-2 pi i x gamma) + 2 pi i x int_a^gamma U(tau)
   exp(-2 pi i x tau) dtau (U = 1 after the Rayleigh arrival gamma = c_s / c_R), tabulated once (the inverse
   square root of U at gamma is removed by tau = gamma - u^2).
2. A force J K(t - t_m) instead of an impulse multiplies every spectrum by K's: exp(-2 pi |f| eps) for the
   Lorentzian K_eps, 2 exp(-2 pi |f| eps) - exp(-4 pi |f| eps) for K4_eps = 2 K_eps - K_2eps, and exp(-2 pi i f
   t_m). So one spectrum per geometry serves every eps.
3. The Rayleigh integral of the baffled plane, in polar coordinates (r, phi) about the impact, listener at height
   h and horizontal offset rho from it, D = sqrt(h^2 + rho^2 + r^2 - 2 rho r cos phi):

       P(f) = (rho_a / pi) int_0^inf r A(r, f) G(r, f) dr,   G(r, f) = int_0^pi exp(-2 pi i f D / c_a) / D dphi.

   The r in r A cancels the 1/r of A: P(f) = -(rho_a / pi) J (1 - nu)/(2 pi mu) (2 pi i f)^2 int V(f r / c_s)
   G(r, f) dr. G's integrand is an even, 2 pi-periodic analytic function of phi, so the trapezoidal rule on
   [0, pi] converges exponentially; r uses Gauss-Legendre panels shorter than the shortest wavelength of the
   integrand (Rayleigh wave on the ground plus sound in the air).

4. A lossy half-space (loss factor eta: both moduli E (1 + i eta), so nu stays real and U keeps its shape; the
   correspondence principle of linear viscoelasticity, e.g. Christensen 1982, "Theory of Viscoelasticity", ch. 2)
   has mu (1 + i eta) and every wave speed times sqrt(1 + i eta): V is taken at x / sqrt(1 + i eta) and A is
   divided by 1 + i eta. Its Rayleigh wave then decays as exp(-pi eta f r / c_R) to first order in eta (a
   quality factor Q = 1 / eta; Aki & Richards 2002, "Quantitative Seismology", sec. 5.5). The loss factor is
   frequency-independent (hysteretic damping, the usual model of a floor's material loss factor).

Only frequencies up to the output's Nyquist are computed: the result is the band-limited pressure, what a
sampled signal can hold. Units SI; f in Hz; spectra in Pa s per N s of impulse (the Fourier transform
X(f) = int x(t) exp(-2 pi i f t) dt of the pressure in Pa).
"""
from __future__ import annotations

import cmath
import math
from functools import lru_cache

import numpy as np
from numba import njit, prange

from .lamb import rayleigh_roots, residue_weights, speed_ratio_squared

#: spacing of the tabulated V(x) (x = f r / c_s): about 90 nodes per period of its fastest phase, exp(-2 pi i x
#: gamma) (gamma < 1.2); cubic interpolation is then accurate to ~1e-6 of |V|
X_STEP = 0.01
#: trapezoid nodes in phi per radian of phase spread k (d_max - d_min) of the ring: the integrand's Fourier modes
#: in phi reach ~ k (d_max - d_min) / 2 and m nodes on [0, pi] integrate modes below 2 m exactly; 0.3 agrees with
#: 1.0 to 3e-13 (wood floor, listener 0.35 m high, 0.6 m off)
M_FACTOR = 0.3


def _gl_panels(edges: np.ndarray, n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights (n per panel) on consecutive panels [edges[k], edges[k + 1]]."""
    x, w = np.polynomial.legendre.leggauss(n)
    lo, hi = edges[:-1, None], edges[1:, None]
    return (0.5 * (lo + hi) + 0.5 * (hi - lo) * x).ravel(), (0.5 * (hi - lo) * w).ravel()


def impulse_spectrum(x, nu: float, loss_factor: float = 0.0) -> np.ndarray:
    """V(x) = int U'(tau) exp(-2 pi i x tau) dtau: the spectrum of Lamb's vertical surface response to an impulse
    (module docstring), at dimensionless frequencies x = f r / c_s >= 0.

    Parameters
    ----------
    x : array_like
        Dimensionless frequencies (>= 0).
    nu : float
        Poisson's ratio, in (0, 0.5).
    loss_factor : float
        eta of a lossy half-space (module docstring, item 4): V is evaluated at x / sqrt(1 + i eta).

    Returns
    -------
    ndarray of complex
        V(x); V(0) = 1 (the static response).
    """
    x = np.atleast_1d(np.asarray(x, np.float64))
    t_all, w_all, gamma = _step_nodes(nu, max(x.max(), 1.0))
    # a lossy half-space: V at the complex frequencies z = x / sqrt(1 + i eta) (Im z < 0: every arrival decays as
    # it travels; module docstring, item 4)
    kappa = 1.0 / np.sqrt(1.0 + 1j * float(loss_factor)) if loss_factor else 1.0 + 0.0j
    z = x * kappa
    dx = x[1] - x[0] if len(x) > 2 else 0.0
    if len(x) > 2 and dx > 0 and np.allclose(x, dx * np.arange(len(x)), rtol=1e-12, atol=1e-12 * dx):
        I = _uniform_fourier(t_all, w_all, complex(dx * kappa), len(x))     # a grid: rotation, no exp per term
    else:
        I = np.empty(len(x), np.complex128)
        for lo in range(0, len(x), 256):
            I[lo:lo + 256] = np.exp(-2j * np.pi * z[lo:lo + 256, None] * t_all[None, :]) @ w_all
    return np.exp(-2j * np.pi * z * gamma) + 2j * np.pi * z * I


@njit(cache=True, parallel=True)
def _uniform_fourier(t, w, dz, n):
    """sum_j w_j exp(-2 pi i k dz t_j) for k = 0 .. n - 1 (dz complex, Im dz <= 0: a lossy ground's rotations also
    decay), by rotating each term (re-seeded every 512 steps)."""
    out = np.zeros(n, np.complex128)
    n_blk = (n + 511) // 512
    for b in prange(n_blk):
        k0 = b * 512
        k1 = min(n, k0 + 512)
        for j in range(t.shape[0]):
            rot = cmath.exp(-2j * math.pi * dz * t[j])
            z = w[j] * cmath.exp(-2j * math.pi * dz * t[j] * k0)
            for k in range(k0, k1):
                out[k] += z
                z *= rot
    return out


def _step_nodes(nu: float, span: float):
    """Quadrature nodes tau and weights (times U) of int U(tau) (.) dtau over [a, gamma] for frequencies up to
    ``span`` (:func:`impulse_spectrum`), and gamma = c_s / c_R."""
    a = math.sqrt(speed_ratio_squared(nu))
    x1, x2, x3 = rayleigh_roots(nu)
    A1, A2, A3 = residue_weights(nu)
    gamma = math.sqrt(x3)
    # [a, 1]: U = (1 - Re(A1/sqrt(tau^2 - x1) + A2/sqrt(tau^2 - x2)) - A3/sqrt(x3 - tau^2)) / 2, analytic on the
    # open interval but with x_j close to a^2 for some nu: panels graded geometrically towards a
    n_uniform = int(math.ceil(span * (1 - a) / 0.5)) + 4            # a panel per half period of exp(...)
    edges = np.unique(np.concatenate([a + (1 - a) * 2.0 ** -np.arange(20.0, 0, -1), np.linspace(a, 1, n_uniform)]))
    t1, w1 = _gl_panels(edges)
    t2c = (t1 * t1).astype(np.complex128)
    u1 = 0.5 * (1 - np.real(A1 / np.sqrt(t2c - x1) + A2 / np.sqrt(t2c - x2)) - A3 / np.sqrt(x3 - t1 * t1))
    # [1, gamma] with tau = gamma - u^2: U dtau = (2u - 2 A3 / sqrt(2 gamma - u^2)) du, smooth
    um = math.sqrt(gamma - 1)
    n_u = int(math.ceil(span * (gamma - 1) / 0.5)) + 4
    s, ws = _gl_panels(np.linspace(0, um, n_u + 1))
    t2 = gamma - s * s
    u2 = 2 * s - 2 * A3 / np.sqrt(2 * gamma - s * s)
    return np.concatenate([t1, t2]), np.concatenate([u1 * w1, u2 * ws]), gamma


@lru_cache(maxsize=8)
def impulse_spectrum_table(nu: float, x_max: float, loss_factor: float = 0.0) -> np.ndarray:
    """V(k X_STEP) for k = -1 .. ceil(x_max / X_STEP) + 2 (one node either side for cubic interpolation;
    V(-x) = conj V(x)), for :func:`_interp_v`. Cached per (nu, x_max, loss_factor)."""
    n = int(math.ceil(x_max / X_STEP)) + 3
    xs = np.arange(n) * X_STEP
    v = impulse_spectrum(xs, nu, loss_factor)
    return np.concatenate([[np.conj(v[1])], v])


@njit(cache=True, inline="always")
def _interp_v(table, x):
    """Cubic (Lagrange, 4 nodes) interpolation of the V table at x >= 0 (table[k + 1] = V(k X_STEP))."""
    s = x / X_STEP
    k = int(s)
    if k > table.shape[0] - 4:
        k = table.shape[0] - 4
    t = s - k
    c0 = -t * (t - 1.0) * (t - 2.0) / 6.0
    c1 = (t + 1.0) * (t - 1.0) * (t - 2.0) / 2.0
    c2 = -(t + 1.0) * t * (t - 2.0) / 2.0
    c3 = (t + 1.0) * t * (t - 1.0) / 6.0
    return c0 * table[k] + c1 * table[k + 1] + c2 * table[k + 2] + c3 * table[k + 3]


@njit(cache=True, parallel=True)
def _ring_integral(freqs, r_nodes, r_weights, split, vtable, c_s, c_a, h, rho, m_factor):
    """int V(f r / c_s) G(r, f) w(r) dr for each f, with w = r_weights (quadrature weight times taper), split into
    the part weighted by ``split`` (near the impact) and the rest: returns (near, far), each (n_f,) complex."""
    nf = freqs.shape[0]
    near = np.zeros(nf, np.complex128)
    far = np.zeros(nf, np.complex128)
    hh = h * h + rho * rho
    for i in prange(nf):
        f = freqs[i]
        k = 2.0 * math.pi * f / c_a
        acc_n = 0.0 + 0.0j
        acc_f = 0.0 + 0.0j
        for j in range(r_nodes.shape[0]):
            r = r_nodes[j]
            d_min = math.sqrt(h * h + (r - rho) * (r - rho))
            d_max = math.sqrt(h * h + (r + rho) * (r + rho))
            # trapezoid on [0, pi] (exponential convergence for a periodic analytic integrand): its Fourier modes in
            # phi reach ~ k rho r / D ~ k (d_max - d_min) / 2, and the peak of 1/D near phi = 0 has width
            # ~ d_min / sqrt(rho r)
            m = 12 + int(m_factor * k * (d_max - d_min)) + int(4.0 * math.sqrt(rho * r) / d_min)
            dphi = math.pi / m
            g = 0.0 + 0.0j
            for q in range(m + 1):
                c = math.cos(q * dphi)
                D = math.sqrt(hh + r * r - 2.0 * rho * r * c)
                wq = 0.5 if (q == 0 or q == m) else 1.0
                g += wq * (math.cos(k * D) - 1j * math.sin(k * D)) / D
            g *= dphi
            val = _interp_v(vtable, f * r / c_s) * g * r_weights[j]
            acc_n += split[j] * val
            acc_f += (1.0 - split[j]) * val
        near[i] = acc_n
        far[i] = acc_f
    return near, far


def r_quadrature(r_max: float, f_max: float, c_R: float, c_a: float, h: float = np.inf, taper: float = 0.3
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes on [0, r_max], 16 per panel of three shortest wavelengths of the ring integrand,
    3 / (f_max (1 / c_R + 1 / c_a)), and at most h / 2 (the listener's height sets the width of the peak of 1/D
    under it); weights times a raised-cosine taper over the last ``taper`` fraction of r_max (the truncated
    plane's edge then radiates no sharp arrival). Three wavelengths per panel agree with one to 3e-7."""
    lam = min(3.0 / (f_max * (1.0 / c_R + 1.0 / c_a)), 0.5 * h)
    n = int(math.ceil(r_max / lam)) + 1
    r, w = _gl_panels(np.linspace(0.0, r_max, n + 1))
    t0 = (1 - taper) * r_max
    tap = np.where(r < t0, 1.0, 0.5 * (1 + np.cos(np.pi * np.clip((r - t0) / (taper * r_max), 0, 1))))
    return r, w * tap


def ring_spectrum(freqs, ground, h: float, offset: float, *, r_max: float, c_a: float, rho_a: float,
                  split_radius: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pressure spectrum [Pa s per N s] at height h and horizontal offset from an impulse on the ground, eps = 0
    (module docstring), optionally split into the plane within ``split_radius`` of the impact and the rest.

    Parameters
    ----------
    freqs : array_like
        Frequencies [Hz] (>= 0).
    ground : HalfSpace
        E, nu, rho of the ground.
    h : float
        Listener height above the ground [m] (> 0).
    offset : float
        Horizontal distance listener - impact [m] (>= 0).
    r_max : float
        Radius of the radiating plane [m] (tapered over its outer 30 %).
    c_a, rho_a : float
        Air [m/s], [kg/m^3].
    split_radius : float, optional
        The near part is the plane within this radius (smooth split over +-25 % of it); None: no split (the far
        part is zero).

    Returns
    -------
    near, far : ndarray of complex
        Spectra of the two parts (their sum is the pressure's), one value per frequency.
    """
    freqs = np.asarray(freqs, np.float64)
    f_max = max(float(freqs.max()), 1.0)
    # one table per power of two of its extent: the bank's nodes (each its own r_max) share it
    x_need = f_max * r_max / ground.c_s + 1.0
    eta = float(getattr(ground, "loss_factor", 0.0))
    vt = impulse_spectrum_table(float(ground.nu), float(2.0 ** math.ceil(math.log2(max(x_need, 8.0)))), eta)
    near = np.zeros(len(freqs), np.complex128)
    far = np.zeros(len(freqs), np.complex128)
    # frequency bands with their own r panels (the integrand's wavelength grows as 1 / f)
    top = f_max
    while True:
        band = (freqs <= top) & (freqs > top / 2) if top > f_max / 8 else (freqs <= top)
        if band.any():
            r, w = r_quadrature(r_max, top, ground.c_R, c_a, h)
            if split_radius is None:
                split = np.ones_like(r)
            else:
                s = np.clip((r - 0.75 * split_radius) / (0.5 * split_radius), 0.0, 1.0)
                split = 0.5 * (1 + np.cos(np.pi * s))
            near[band], far[band] = _ring_integral(freqs[band], r, w, split, vt, ground.c_s, c_a, float(h),
                                                   float(offset), float(M_FACTOR))
        if top <= f_max / 8:
            break
        top /= 2
    pref = -(rho_a / math.pi) * (1 - ground.nu) / (2 * math.pi * ground.mu * (1 + 1j * eta)) * (2j * math.pi * freqs) ** 2
    return pref * near, pref * far
