"""Acceleration noise of one object from its proxy's soundbank entry (Chadwick, Zheng & James 2012, "Faster
Acceleration Noise for Multibody Animations using Precomputed Soundbanks", sec. 3-4).

The object's rigid-body accelerations are impulses: pulse m at time t_m with body-frame amplitudes (a_m, alpha_m)
(:mod:`.timescale`). Its proxy (sec. 3.3, :func:`.proxy.fit_proxy`) is the bank entry scaled by beta = 2A, so by
the scaling law (sec. 3.1, eq. 10) the pressure at a listener x (body frame, relative to the centre of mass) is

    p(x, t) = sum_m sum_i c_{m,i} p_i(x''/1, (t - t_m)/beta),    c_{m,i} = s_i(beta) u_{m,i}

with u_m = (Z^T a_m, Z^T alpha_m) the accelerations in proxy space (sec. 3.3), s_i = beta for the translation
fields i = 0..2 and beta^2 for the rotation fields i = 3..5 (:func:`.proxy.pressure_scale`), p_i the entry's
fields and x'' = Z^T x / beta the listener in bank space, at distance R'' = |x''| from the centre of mass in the
direction d = x''/R''. The pulse's width is that of the scaled bank, beta h_ref.

Direction. The entry stores its fields on a (theta, phi) grid (cell-centred theta rows, uniform phi columns;
:func:`.field.direction_angles`), folded to the positive octant (sec. 4.3) and unfolded on reading
(:meth:`.soundbank.BankEntry.combined`). :func:`grid_directions` maps d to grid directions and weights:
``"bilinear"`` (default) interpolates in (theta, phi) between the four surrounding nodes, periodic in phi; above
the first row (theta < pi / (2 n_theta)) or below the last it uses that row alone (interpolated in phi), so the
poles are held constant over the polar cap; ``"nearest"`` takes the node of largest d . d_j. The grid is mirror
symmetric, so the weights of a mirrored direction are those of the mirrored nodes, and the octant signs carry
over exactly. The paper interpolates linearly on a triangulation of the octant (sec. 5); the bilinear grid rule is
this package's equivalent on its (theta, phi) grid.

Fast path (:func:`synthesize_proxy`). The listener is fixed in the body frame, so direction and distance are the
same for every pulse, and each field i is one kernel: its wavelet coefficients summed over the weighted grid
directions and the radial terms, sum_k R''^{-k} q^_k (exact: the transform is linear; sec. 4.1, "sum the
coefficients, reconstruct once"), then one reconstruction per field with the high-frequency suppression of
Algorithm 1 and the resampling to the output rate (sec. 4.2; :func:`.wavelet.reconstruct`). Pulses of different
times cannot share coefficients (a shift by n samples commutes with an L-level periodized transform only for n a
multiple of 2^L; :mod:`.wavelet`), so, as in :func:`.wavelet.accumulate`, every pulse is placed on the output grid
at its fractional position x_m = i_m + phi_m, |phi_m| <= 1/2, by the expansion g(n - phi) = sum_r phi^r D_r(n),
D_r the inverse transform of G(w) (-i w)^r / r! (truncation at most (pi/2)^(r+1)/(r+1)! of the spectrum at the
output Nyquist frequency: 6e-8 for the default order 12). Unlike :func:`.wavelet.accumulate`, which convolves over
the whole output by FFT once per field and radial term, the six fields' derivative kernels are stacked and every
pulse's kernel is one matrix product, c_m phi_m^r against D_{i,r} (a (n_pulses, 6 (r+1)) x (6 (r+1), K) product
over blocks of pulses), deposited into the output with one np.bincount per block: the cost is proportional to the
pulses times the kernel length K, not to the output length, which matters for many objects with few pulses each
(a rock pile). The fields' kernels are aligned to a common grid by a phase ramp (their reconstructions may have
different lengths and offsets). The sum equals sum_i :func:`.wavelet.accumulate` (field i, the same directions
and weights) up to the tails of the band-limited differentiator, cut at ``PAD`` samples each side of the kernel.

Reference (:func:`synthesize_proxy_reference`). Plain NumPy, one pulse at a time: the entry's series at the
listener by :meth:`.soundbank.BankEntry.evaluate` (each field and grid direction, full wavelet reconstruction, no
suppression), weighted and scaled, then placed at t_m + beta (t_start + n dt) and resampled to the output rate by
band-limited (Fourier series) interpolation with an ideal low-pass at the lower of the two Nyquist frequencies,
evaluated at the output samples directly. It shares only the geometry (:func:`grid_directions`) with the fast path,
not its suppression, resampling or placement; the two differ by what the db5 half-band cut and the Kaiser window of
the resampler do between f_out/2 and the band edge, and by the expansion's truncation. One convention is shared:
a reconstruction is one period of T aligned samples, and the compression leaves small noise (about eps of the
peak) everywhere in it, its zero padding included; :func:`.wavelet.reconstruct` places the period's last eighth
before its start, so the reference moves that part of each evaluated series there too (without it the two differ
by about 2 % in L2 on the tiny preset at eps 0.04, all of it that noise in one place or the other).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.fft

from ...errors import InputError
from .field import direction_angles
from .proxy import pressure_scale, to_proxy_space
from .wavelet import PHASE_ORDER, reconstruct

N_FIELDS = 6
#: samples of the band-limited differentiator's tails kept on each side of a kernel (module docstring)
PAD = 64
#: pulses per block of the matrix product and deposit (bounds the temporary (block, K) array)
BLOCK = 4096


# ---------------------------------------------------------------------------------------------------------------
def grid_directions(bank_entry, direction, interpolation: str = "bilinear") -> tuple[np.ndarray, np.ndarray]:
    """Full-grid direction indices and weights that stand for a unit direction in bank space (module docstring).

    Parameters
    ----------
    bank_entry : BankEntry
        A folded entry (its full grid n_theta x n_phi is known).
    direction : array_like, shape (3,)
        Direction from the centre of mass, proxy (= bank) axes; normalized here.
    interpolation : {"bilinear", "nearest"}

    Returns
    -------
    directions : ndarray of int64, shape (n,)
        Indices a n_phi + b of the full grid (row a of theta, column b of phi); n = 4 (bilinear) or 1.
    weights : ndarray, shape (n,)
        Non-negative, summing to 1.

    Raises
    ------
    InputError
        On an unfolded entry, a zero or non-finite direction, or an unknown interpolation.
    """
    if not getattr(bank_entry, "folded", False):
        raise InputError("proxy synthesis: the bank entry must know its direction grid (a folded entry)")
    d = np.asarray(direction, np.float64).reshape(3)
    n = float(np.linalg.norm(d))
    if not (math.isfinite(n) and n > 0):
        raise InputError(f"proxy synthesis: listener direction {d} must be finite and non-zero")
    d = d / n
    nt, nph = int(bank_entry.n_theta), int(bank_entry.n_phi)
    if interpolation == "nearest":
        return np.array([int(np.argmax(bank_entry.directions @ d))], np.int64), np.ones(1)
    if interpolation != "bilinear":
        raise InputError(f"proxy synthesis: interpolation {interpolation!r} must be 'bilinear' or 'nearest'")
    theta = math.acos(min(1.0, max(-1.0, d[2])))
    phi = math.atan2(d[1], d[0]) % (2.0 * math.pi)
    th, _ = direction_angles(nt, nph)
    u = theta / (math.pi / nt) - 0.5                            # fractional row (rows at u = 0 .. nt - 1)
    if nt == 1:
        a0, a1, fu = 0, 0, 0.0
    else:
        a0 = min(max(int(math.floor(u)), 0), nt - 2)
        fu = min(max(u - a0, 0.0), 1.0)                         # polar caps: held at the first / last row
        a1 = a0 + 1
    v = phi / (2.0 * math.pi / nph)
    b0 = int(math.floor(v)) % nph
    fv = v - math.floor(v)
    b1 = (b0 + 1) % nph
    dirs = np.array([a0 * nph + b0, a0 * nph + b1, a1 * nph + b0, a1 * nph + b1], np.int64)
    w = np.array([(1 - fu) * (1 - fv), (1 - fu) * fv, fu * (1 - fv), fu * fv])
    return dirs, w


def _geometry(bank_entry, proxy, times, amplitudes, listener, beta, interpolation):
    """Checked inputs in bank terms: times, coefficients c (n, 6) (proxy space, scaling law applied), physical
    distance R, bank distance R'', grid directions and weights."""
    beta = float(proxy.beta if beta is None else beta)
    if not (math.isfinite(beta) and beta > 0):
        raise InputError(f"proxy synthesis: beta = {beta} must be positive")
    t = np.asarray(times, np.float64).reshape(-1)
    A = np.asarray(amplitudes, np.float64)
    if A.ndim != 2 or A.shape != (t.size, 6):
        raise InputError(f"proxy synthesis: amplitudes must have shape (n = {t.size}, 6) [a, alpha], got {A.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(A))):
        raise InputError("proxy synthesis: times and amplitudes must be finite")
    Z = np.asarray(proxy.rotation, np.float64)
    # listener relative to the centre of mass already: rotate only (x' = Z^T x; sec. 3.3)
    xp, ap, alp = to_proxy_space(Z, np.zeros(3), np.asarray(listener, np.float64).reshape(3), A[:, :3], A[:, 3:])
    R = float(np.linalg.norm(xp))
    if not (math.isfinite(R) and R > 0):
        raise InputError(f"proxy synthesis: listener {listener} must be finite and away from the centre of mass")
    dirs, w = grid_directions(bank_entry, xp, interpolation)
    s = np.array([pressure_scale(i, beta) for i in range(N_FIELDS)])
    c = np.concatenate([ap, alp], axis=1) * s[None, :]
    return beta, t, c, R, R / beta, dirs, w


def _check_out(sample_rate, n_samples):
    f_out = float(sample_rate)
    if not (math.isfinite(f_out) and f_out > 0):
        raise InputError(f"proxy synthesis: sample_rate = {sample_rate} must be positive")
    n = int(n_samples)
    if n < 0:
        raise InputError(f"proxy synthesis: n_samples = {n_samples} must be >= 0")
    return f_out, n


# ---------------------------------------------------------------------------------------------------------------
def _field_kernels(bank_entry, fields, dirs, w, Rb, beta, f_out):
    """Per active field: its kernel at f_out (one reconstruction, Algorithm 1) and the output position of the
    kernel's sample 0 relative to the pulse time, in output samples (without R/c)."""
    out = []
    for i in fields:
        wf = bank_entry.fields[i]
        qh = bank_entry.combined(i, dirs, w)                    # (N, T), unfolded and direction-weighted
        sh = (Rb ** -(np.arange(wf.n_terms) + 1.0)) @ qh       # radial terms summed: one reconstruction
        g, off = reconstruct(sh, wf.wavelet, 1.0 / wf.dt, beta, f_out)
        out.append((g, (beta * wf.tau0 + off) * f_out))
    return out


def _derivative_kernels(kernels, order):
    """Stack the fields' kernels on one grid and expand in the sub-sample phase.

    Returns D (n_fields, order + 1, K) and the position (output samples, relative to pulse time) of kernel
    sample 0: D[i, r] is the inverse transform of G_i(w) (-i w)^r / r!, kernel i delayed by its own offset
    relative to the common origin (phase ramp)."""
    starts = np.array([x for _, x in kernels])
    base = math.floor(float(starts.min())) - PAD
    delays = starts - base                                      # >= PAD
    Kmax = max(g.shape[-1] for g, _ in kernels)
    n = scipy.fft.next_fast_len(int(Kmax + math.ceil(float(delays.max())) + PAD + 1), real=True)
    w = 2.0 * np.pi * np.fft.rfftfreq(n)
    G = np.stack([scipy.fft.rfft(g, n=n) for g, _ in kernels])  # (F, n_f)
    G *= np.exp(-1j * w[None, :] * delays[:, None])
    r = np.arange(order + 1)
    fact = np.array([math.factorial(int(k)) for k in r], np.float64)
    M = (-1j * w[None, :]) ** r[:, None] / fact[:, None]      # (r, n_f)
    D = scipy.fft.irfft(G[:, None, :] * M[None, :, :], n=n, axis=-1)
    return D, base


def synthesize_proxy(bank_entry, proxy, times, amplitudes, listener, sample_rate: float, n_samples: int,
                     beta: float | None = None, *, interpolation: str = "bilinear",
                     order: int = PHASE_ORDER) -> np.ndarray:
    """Acceleration noise of one object from its proxy's bank entry (module docstring; paper sec. 3-4).

    Parameters
    ----------
    bank_entry : BankEntry
        The entry that stands for the proxy (:meth:`.soundbank.Soundbank.for_proxy`).
    proxy : Proxy
        The object's proxy (:func:`.proxy.fit_proxy`); its rotation Z maps body to proxy axes.
    times : array_like, shape (n,)
        Pulse centres t_m [s] (output sample 0 at t = 0).
    amplitudes : array_like, shape (n, 6)
        Body-frame [a (m/s^2), alpha (rad/s^2)] of each pulse (:mod:`.timescale`).
    listener : array_like, shape (3,)
        Listener position in the body frame relative to the centre of mass [m].
    sample_rate : float
        Output rate f_out [Hz].
    n_samples : int
        Output length.
    beta : float, optional
        Scale of the proxy relative to the entry, from :func:`.proxy.nearest_entry` (default ``proxy.beta``).
    interpolation : {"bilinear", "nearest"}, optional
        Direction rule (:func:`grid_directions`).
    order : int, optional
        Order of the sub-sample phase expansion.

    Returns
    -------
    ndarray, shape (n_samples,)
        Pressure [Pa].

    Raises
    ------
    InputError
        On mismatched or non-finite inputs, a listener at the centre of mass, non-positive beta or rate.
    """
    f_out, n_out = _check_out(sample_rate, n_samples)
    beta, t, c, R, Rb, dirs, w = _geometry(bank_entry, proxy, times, amplitudes, listener, beta, interpolation)
    out = np.zeros(n_out)
    fields = [i for i in range(N_FIELDS) if np.any(c[:, i] != 0.0)]
    if n_out == 0 or not fields:
        return out
    c = c[:, fields]
    kernels = _field_kernels(bank_entry, fields, dirs, w, Rb, beta, f_out)
    D, base = _derivative_kernels(kernels, int(order))          # (F, r + 1, K)
    F, n_r, K = D.shape
    Dm = D.reshape(F * n_r, K)
    x = t * f_out + base + R / bank_entry.fields[fields[0]].c * f_out
    i0 = np.floor(x + 0.5)
    phi = x - i0
    live = (i0 + K > 0) & (i0 < n_out)
    if not np.any(live):
        return out
    i0, phi, c = i0[live].astype(np.int64), phi[live], c[live]
    order_ = np.argsort(i0, kind="stable")                    # blocks of neighbouring pulses: short deposits
    i0, phi, c = i0[order_], phi[order_], c[order_]
    ph_pow = phi[:, None] ** np.arange(n_r)[None, :]           # (n, r + 1)
    j = np.arange(K)
    for s in range(0, len(i0), BLOCK):
        e = min(s + BLOCK, len(i0))
        coef = (c[s:e, :, None] * ph_pow[s:e, None, :]).reshape(e - s, F * n_r)
        vals = coef @ Dm                                        # (block, K): every pulse's placed kernel
        lo, hi = max(int(i0[s]), 0), min(int(i0[e - 1]) + K, n_out)
        idx = (i0[s:e, None] - lo) + j[None, :]
        ok = (idx >= 0) & (idx < hi - lo)
        if ok.all():
            out[lo:hi] += np.bincount(idx.ravel(), weights=vals.ravel(), minlength=hi - lo)[:hi - lo]
        else:
            out[lo:hi] += np.bincount(idx[ok], weights=vals[ok], minlength=hi - lo)[:hi - lo]
    return out


# ---------------------------------------------------------------------------------------------------------------
def synthesize_proxy_reference(bank_entry, proxy, times, amplitudes, listener, sample_rate: float, n_samples: int,
                               beta: float | None = None, *, interpolation: str = "bilinear") -> np.ndarray:
    """The same sum as :func:`synthesize_proxy`, one pulse at a time in plain NumPy (module docstring): the
    independent reference of the tests and the baseline of the bench. Slow.

    Parameters and Returns as :func:`synthesize_proxy`.
    """
    f_out, n_out = _check_out(sample_rate, n_samples)
    beta, t, c, R, Rb, dirs, w = _geometry(bank_entry, proxy, times, amplitudes, listener, beta, interpolation)
    out = np.zeros(n_out)
    if n_out == 0:
        return out
    wf0 = bank_entry.fields[0]
    dt, c_snd = wf0.dt, wf0.c
    t_start = wf0.t_start
    T_max = max(f.n_coef for f in bank_entry.fields)
    delay = (Rb - wf0.radii[0]) / (c_snd * dt)                 # bank samples
    n_eval = T_max + int(math.ceil(max(0.0, delay))) + PAD
    n_ser = T_max + n_eval                                      # series index 0 = bank index -T_max
    f_s = 1.0 / (beta * dt)                                     # rate of the scaled series
    n_p = scipy.fft.next_fast_len(2 * n_ser, real=True)        # the series centred in a zero-padded period
    lead = (n_p - n_ser) // 2
    f_k = np.arange(n_p // 2 + 1) * f_s / n_p
    keep = f_k < 0.5 * min(f_s, f_out)                          # ideal low-pass at the lower Nyquist frequency
    f_k = f_k[keep]
    wk = np.where(np.arange(len(f_k)) == 0, 1.0, 2.0) / n_p
    for m in range(t.size):
        if not np.any(c[m] != 0.0):
            continue
        s = np.zeros(n_ser)
        for i in range(N_FIELDS):
            if c[m, i] == 0.0:
                continue
            T = bank_entry.fields[i].n_coef
            n_c = min(int(round(T - T // 8 + delay)), n_eval)   # the period's last eighth precedes (see below)
            for d, wd in zip(dirs, w):
                if wd != 0.0:
                    p = (c[m, i] * wd) * bank_entry.evaluate(i, int(d), Rb, n_eval)
                    s[T_max:T_max + n_c] += p[:n_c]
                    s[T_max + n_c - T:T_max + n_eval - T] += p[n_c:]
        S = np.fft.rfft(np.concatenate([np.zeros(lead), s, np.zeros(n_p - lead - n_ser)]))[keep]
        t0 = t[m] + beta * (t_start - T_max * dt) - lead / f_s  # physical time of padded sample 0
        n_a = max(int(math.ceil(t0 * f_out)), 0)
        n_b = min(int(math.floor((t0 + n_p / f_s) * f_out)), n_out - 1)
        if n_b < n_a:
            continue
        tau = np.arange(n_a, n_b + 1) / f_out - t0
        out[n_a:n_b + 1] += np.real(np.exp(2j * np.pi * tau[:, None] * f_k[None, :]) @ (wk * S))
    return out
