"""Mitchell-Netravali cubic pulse psi(t; h) (Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for
Improved Rigid-Body Sound", sec. 4.2, eq. 17; Mitchell & Netravali 1988).

B = 2/3, C = 1/6 member of the Mitchell-Netravali family; with u = |t|/h:

    psi(t; h) = (15 u^3 - 27 u^2 + 14) / 18          for u <= 1
              = (5 (2 - u)^3 - 3 (2 - u)^2) / 18     for 1 <= u <= 2
              = 0                                    otherwise

Properties (tested): psi(0) = 7/9, psi(h) = 1/9, support [-2h, 2h], sum_k psi(t - k h; h) = 1 for all t
(partition of unity), integral psi dt = h. psi is C^1 (its derivative is continuous), dimensionless.

The paper's form (eq. 17) uses y = 1 - u: (-15 y^3 + 18 y^2 + 9 y + 2)/18 and (5 (1+y)^3 - 3 (1+y)^2)/18, which
is the same polynomial (expand it).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit


def psi(t, h):
    """The pulse psi(t; h) (eq. 17).

    Parameters
    ----------
    t : float or array_like
        Times [s].
    h : float
        Pulse spacing [s], > 0.

    Returns
    -------
    ndarray
        psi (dimensionless), same shape as t.
    """
    u = np.abs(np.asarray(t, dtype=np.float64)) / float(h)
    v = 2.0 - u
    inner = (15.0 * u**3 - 27.0 * u**2 + 14.0) / 18.0
    outer = (5.0 * v**3 - 3.0 * v**2) / 18.0
    return np.where(u <= 1.0, inner, np.where(u <= 2.0, outer, 0.0))


@njit(cache=True, nogil=True)
def psi_unit(u):
    """psi(u; 1) for a scalar u (compiled helper for kernels): eq. 17 with h = 1.

    Parameters
    ----------
    u : float
        Time in units of the spacing.

    Returns
    -------
    float
    """
    u = abs(u)
    if u <= 1.0:
        return (15.0 * u * u * u - 27.0 * u * u + 14.0) / 18.0
    if u <= 2.0:
        v = 2.0 - u
        return (5.0 * v * v * v - 3.0 * v * v) / 18.0
    return 0.0


def psi_weights(x):
    """Weights of the four pulses that overlap a position, so that sum_j c_j psi(x - j) =
    sum_m c[j0 + m] w[..., m] (the 4 pulses whose support [-2, 2] contains x; a fifth pulse would sit exactly on a
    support end where psi = 0).

    Parameters
    ----------
    x : float or array_like
        Positions in units of the spacing.

    Returns
    -------
    j0 : ndarray of int64, shape of x
        floor(x) - 1, the first overlapping pulse.
    w : ndarray, shape (..., 4)
        psi(x - j; 1) for j = j0 .. j0 + 3.
    """
    x = np.asarray(x, dtype=np.float64)
    f = np.floor(x)
    j0 = f.astype(np.int64) - 1
    d = x - f                                                       # in [0, 1)
    # offsets x - j for j = j0..j0+3: 1 + d, d, d - 1, d - 2
    w = np.stack([psi(1.0 + d, 1.0), psi(d, 1.0), psi(d - 1.0, 1.0), psi(d - 2.0, 1.0)], axis=-1)
    return j0, w


# ---------------------------------------------------------------------------------------------------------------
# Pulse weights of one contact (PAN paper sec. 4.2-4.3, eqs. 18-19)
#
# The paper represents an impulse's acceleration z(t) = A S(t; t0, tau) on the pulse grid t_k = t0 + k h as
# sum_k z(t_k) psi(t - t_k; h), i.e. it samples the half-sine. Since psi is a partition of unity with
# integral h, that pulse train has integral h sum_k z(t_k), while the half-sine's is 2 A tau / pi: sampling keeps
# 0 % of it for tau <= h (no grid point inside the contact) and 65 / 79 / 91 / 97 / 99.2 % at tau/h = 1.2 / 2 /
# 3 / 5 / 10. We instead project the half-sine onto the grid with a kernel K (the package's choice):
#
#     c_k = (1/h) integral S(t; t0, tau) K((t - t_k)/h) dt,     z(t) ~ A sum_k c_k psi(t - t_k; h),
#
# K = (5 K_CR - 2 B_3)/3, the Mitchell-Netravali cubic with B = -2/3, C = 5/6 (K_CR Catmull-Rom, B_3 the cubic
# B-spline; psi itself is B = 2/3, C = 1/6). K is a partition of unity (sum_k K(u - k) = 1) that reproduces
# linear functions, so for every tau/h
#   (i)  h sum_k c_k = integral S dt = 2 tau / pi: the pulse train carries the event's impulse;
#   (ii) h sum_k t_k c_k = integral t S dt: and its centre (no timing shift);
# and its second moment, -2 h^2/9, cancels psi's +2 h^2/9, so where S is smooth over K's support
#   (iii) c_k = S(t_k) - (h^2/9) S''(t_k) + O(h^4) and sum_k c_k psi(t - t_k) = S(t) + O(h^4):
# the interior weights are the paper's samples scaled by 1 + (pi h/tau)^2/9 (+1.1 % at tau = 10h, +0.3 % at 20h,
# +4.4 % at the design value 5h), the pulse train follows the half-sine to fourth order instead of being
# smoothed by psi (sampling's is S + (h^2/9) S''), and the ends, where S has kinks, carry the impulse sampling
# loses. Against the exact half-sine's radiation (rigid sphere, 48 kHz, 20 kHz band) the error drops from
# 3.8 % to 0.5 % of the peak at tau = 5.1h and from 1.4 % to 0.26 % at 10h; the synthesized sound differs from
# the sampled version by 3.3 % (5.1h), 1.2 % (10h), 0.6 % (15h) of its peak there. (Projecting with psi itself
# would also keep the impulse but smooth twice: S + (2 h^2/9) S''. Catmull-Rom, B = 0, would keep the samples
# to O(h^4) but also psi's smoothing.) A contact much shorter than h becomes its impulse placed at its centre
# t_c with weights K(t_c - t_k) (11/9 and -1/9, -1/9 on the grid), whose spectrum psi-hat(f) (11/9 -
# 2/9 cos 2 pi f h) is flat to 0.3 % up to f = 0.1/h.
#
# Pulses k = -1 .. ceil(tau/h) + 1 (relative to t0) carry weight: those whose K support (-2h, 2h) overlaps the
# contact. Causality: psi(t - t_k; h) reaches 2h before t_k, so the synthesized acceleration may start 3h before
# t0 (it started h before t0 with sampling, k >= 1); the weight before t0 is small (c_{-1} ~ -0.1 h/tau for
# long contacts) and 3h is 15-80 us, one to four samples at 48 kHz (the output low-pass is itself non-causal by
# 16 samples).
#
# Computation: the breakpoints of K((t - t_k)/h) all lie on the grid t0 + m h, so with x = (t - t0)/h - m in
# grid interval m (0 <= m < ceil(tau/h)), c_k = sum_m sum_p a[m - k, p] M_{m,p}, where K((t - t_k)/h) = sum_p
# a[j, p] x^p on the interval at offset j = m - k in {-2, -1, 0, 1}, and the moments
# M_{m,p} = int_0^{l_m} sin(theta (m + x)) x^p dx (theta = pi h / tau, l_m = min(1, tau/h - m))
#         = sin(theta m) C_p(l_m) + cos(theta m) S_p(l_m),  C_p / S_p = int_0^l cos / sin(theta x) x^p dx,
# summed as power series (theta l <= pi: at most 16 terms to round-off).

#: projection kernel K(j + x) = sum_p KERNEL_PIECES[j + 2, p] x^p on x in [0, 1], j = -2, -1, 0, 1
#: ((5 Catmull-Rom - 2 cubic B-spline)/3, block comment above)
KERNEL_PIECES = np.array([[0.0, 0.0, -5.0 / 6.0, 13.0 / 18.0],
                          [-1.0 / 9.0, 0.5, 3.0, -13.0 / 6.0],
                          [11.0 / 9.0, 0.0, -3.5, 13.0 / 6.0],
                          [-1.0 / 9.0, -0.5, 4.0 / 3.0, -13.0 / 18.0]])
#: index of the first weighted pulse relative to the contact start: t_k = t0 + (FIRST_PULSE + q) h for weight q
FIRST_PULSE = -1


@njit(cache=True, nogil=True)
def n_contact_pulses(tau_over_h):
    """Number of pulse weights of a contact: k = -1 .. ceil(tau/h) + 1.

    Parameters
    ----------
    tau_over_h : float
        Contact duration in units of the pulse spacing h.

    Returns
    -------
    int
        ceil(tau/h) + 3.
    """
    return int(math.ceil(tau_over_h)) + 3


#: power-series coefficients of _trig_moments: C_p = ell^(p+1) sum_n _SERIES_C[p, n] y^(2n),
#: S_p = ell^(p+1) y sum_n _SERIES_S[p, n] y^(2n) (y = theta ell < 1/2: 9 terms leave < 1e-21)
_N_SERIES = 9
_SERIES_C = np.array([[(-1.0) ** n / (math.factorial(2 * n) * (2 * n + p + 1)) for n in range(_N_SERIES)]
                      for p in range(4)])
_SERIES_S = np.array([[(-1.0) ** n / (math.factorial(2 * n + 1) * (2 * n + p + 2)) for n in range(_N_SERIES)]
                      for p in range(4)])


@njit(cache=True, nogil=True)
def _trig_moments(theta, ell, C, S):
    """C[p] = int_0^ell cos(theta x) x^p dx, S[p] = int_0^ell sin(theta x) x^p dx, p = 0..3, theta ell <= pi.

    y = theta ell >= 1/2: integration by parts, C_p = (ell^p sin y - p S_{p-1}) / theta, S_p = (p C_{p-1} -
    ell^p cos y) / theta, from C_0 = sin(y)/theta, S_0 = 2 sin^2(y/2)/theta (relative error <~ 3!/y^3 eps).
    y < 1/2: the power series, 9 terms (the next is below y^18/18! < 1e-21)."""
    y = theta * ell
    if y >= 0.5:
        sy = math.sin(y)
        cy = math.cos(y)
        sh = math.sin(0.5 * y)
        C[0] = sy / theta
        S[0] = 2.0 * sh * sh / theta
        lp = 1.0
        for p in range(1, 4):
            lp *= ell
            C[p] = (lp * sy - p * S[p - 1]) / theta
            S[p] = (p * C[p - 1] - lp * cy) / theta
        return
    y2 = y * y
    lp = ell
    for p in range(4):
        c = _SERIES_C[p, _N_SERIES - 1]
        s = _SERIES_S[p, _N_SERIES - 1]
        for n in range(_N_SERIES - 2, -1, -1):         # Horner in y^2
            c = c * y2 + _SERIES_C[p, n]
            s = s * y2 + _SERIES_S[p, n]
        C[p] = lp * c
        S[p] = lp * y * s
        lp *= ell


@njit(cache=True, nogil=True)
def _contact_pulse_weights(r, out, C1, S1, Cl, Sl):
    nk = n_contact_pulses(r)
    for q in range(nk):
        out[q] = 0.0
    nm = nk - 3                                   # grid intervals m = 0 .. nm - 1 overlap [0, tau)
    theta = math.pi / r
    _trig_moments(theta, 1.0, C1, S1)             # full intervals
    _trig_moments(theta, min(1.0, r - (nm - 1)), Cl, Sl)      # the last (partial) one
    st = math.sin(theta)
    ct = math.cos(theta)
    sm = 0.0                                      # sin(theta m), cos(theta m) by rotation (error ~ m eps)
    cm = 1.0
    for m in range(nm):
        if m == nm - 1:
            M0 = sm * Cl[0] + cm * Sl[0]
            M1 = sm * Cl[1] + cm * Sl[1]
            M2 = sm * Cl[2] + cm * Sl[2]
            M3 = sm * Cl[3] + cm * Sl[3]
        else:
            M0 = sm * C1[0] + cm * S1[0]
            M1 = sm * C1[1] + cm * S1[1]
            M2 = sm * C1[2] + cm * S1[2]
            M3 = sm * C1[3] + cm * S1[3]
        for j in range(-2, 2):                    # pulse k = m - j, weight index q = k - FIRST_PULSE
            out[m - j - FIRST_PULSE] += (KERNEL_PIECES[j + 2, 0] * M0 + KERNEL_PIECES[j + 2, 1] * M1
                                         + KERNEL_PIECES[j + 2, 2] * M2 + KERNEL_PIECES[j + 2, 3] * M3)
        sm, cm = sm * ct + cm * st, cm * ct - sm * st
    return nk


@njit(cache=True, nogil=True)
def contact_pulse_weights(tau_over_h, out):
    """Weights c_k of a half-sine contact on the pulse grid t0 + k h (block comment above).

    Peak-normalised: h sum_k c_k = 2 tau / pi (the half-sine's integral for unit peak).

    Parameters
    ----------
    tau_over_h : float
        Contact duration tau in units of h.
    out : ndarray
        Filled with out[q] = c_{q - 1} for q < n_contact_pulses(tau_over_h); at least that long.

    Returns
    -------
    int
        The number of weights written.
    """
    return _contact_pulse_weights(float(tau_over_h), out, np.empty(4), np.empty(4), np.empty(4), np.empty(4))


def contact_weights(tau, h):
    """Pulse weights of a contact of duration tau on the pulse grid t0 + k h (:func:`contact_pulse_weights`).

    Parameters
    ----------
    tau : float
        Contact duration [s].
    h : float
        Pulse spacing [s].

    Returns
    -------
    k : ndarray of int, shape (n,)
        Pulse indices relative to t0.
    c : ndarray, shape (n,)
        Weights (peak-normalised).

    Raises
    ------
    ValueError
        If tau / h is not positive and finite.
    """
    r = float(tau) / float(h)
    if not (np.isfinite(r) and r > 0):
        raise ValueError(f"contact_weights: tau / h = {r} must be positive and finite")
    out = np.zeros(n_contact_pulses(r))
    n = contact_pulse_weights(r, out)
    return FIRST_PULSE + np.arange(n), out[:n]


@njit(cache=True, nogil=True)
def contact_weight_table(tau_over_h):
    """Pulse weights of many contacts (:func:`contact_pulse_weights`). The synthesis kernel takes this table
    instead of calling into this module (Numba's cache of a caller does not see a changed callee in another file).

    Parameters
    ----------
    tau_over_h : ndarray, shape (E,)
        Contact durations in units of h.

    Returns
    -------
    offsets : ndarray of int64, shape (E + 1,)
        Start of each contact's weights.
    weights : ndarray
        weights[offsets[e]:offsets[e + 1]] = c_k, k = FIRST_PULSE .. of contact e.
    """
    E = tau_over_h.shape[0]
    off = np.empty(E + 1, np.int64)
    off[0] = 0
    for e in range(E):
        off[e + 1] = off[e] + n_contact_pulses(tau_over_h[e])
    w = np.empty(off[E])
    C1 = np.empty(4)
    S1 = np.empty(4)
    Cl = np.empty(4)
    Sl = np.empty(4)
    for e in range(E):
        _contact_pulse_weights(tau_over_h[e], w[off[e]:off[e + 1]], C1, S1, Cl, Sl)
    return off, w
