"""Modal synthesis whose radiation follows the body and the listener: compiled kernel.

The impact model is that of sources/modal_kernel.py (O'Brien, Shen & Gatchalian 2002; Hertz half-sine impacts
of Chadwick, Zheng & James 2012, sec. 3): after contact, mode j of a body holds the complex state
    Z_j(T) = sum_e A_ej e^{s_j (T - t0_e)},   A_ej = (G_ej / w_dj) I(tau_e),   q_j = Im Z_j, q_j^{(k)} = Im(s_j^k Z_j)
at *emission* time T. There the static kernel folds each event's radiation weight into its injection, so an
impact's whole ring keeps the pose and delay of its t0. Here the radiation weight moves with time instead:

    p_l(t) = sum_j Im( W_lj(t) Z_j(T_l(t)) ),     T_l(t) = t - d_l(t)

W_lj(t) is the complex weight that turns mode j's state into pressure at listener l, evaluated at the body's pose
at the emission time and the listener's position at t (the compact model W = sum_k c_k s^k, or an FFAT map
W = Re P - Im P s / w; Chadwick, An & James 2009, "Harmonic Shells", sec. 4, whose renderer updates transfer at
1 kHz along the listener's path), times the moving source's convective (Doppler) amplification. d_l(t) = |x_l(t)
- X(T)| / c is the retarded delay: the state is read at the emission time, so the pitch follows the Doppler
factor 1 / (1 - M_r) exactly.

Control frames. W and d are given at control frames t_k = k H / f_s (H samples per frame; H = 48 at 48 kHz is a
1 kHz rate) and interpolated linearly in between, so a pose change is a ramp over one frame, never a click.
Within frame k the emission time advances by the constant
    dT_k = dt - (d_{k+1} - d_k) / H          per sample,
so each mode steps with the pole p_jk = e^{s_j dT_k} (one complex exponential per mode per frame) and reads its
state at exactly T(n): the fractional delay is exact for the free ring (no interpolation filter). With d and W
constant (body and listener at rest) this is the static kernel's computation with the weight applied after the
sum instead of before: the same samples to round-off.

Samples inside a contact (0 <= u < tau, a few samples) come from the static kernel's closed form with the
weights of the event's own arrival (a body does not move measurably within tau ~ 0.1 ms).

Threads and determinism as in sources/modal_kernel.py: fixed mode chunks x listeners, each its own partial,
summed in a fixed order; bit-identical for any thread count.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

from ..errors import InputError
from ..parallel import default_threads
from .modal_kernel import _NEVER, BLOCK, _contact_terms, _I, _scatter_contact, mode_chunks, pool_map


@njit(cache=True, nogil=True, fastmath=True, inline="always")
def _form_weights(Gf, f, l, Br, Bi, j0, ra, ia, rb, ib, shift):
    """rb + i ib = sum_r Gf[f, l, r] (Br + i Bi)[r, j0 + j] over the chunk's modes, after moving the old rb, ib to
    ra, ia when ``shift``: one pass over the modes (vectorised), the compact model's seven factors unrolled."""
    mc = rb.shape[0]
    R = Gf.shape[2]
    if R == 7:
        g0, g1, g2, g3 = Gf[f, l, 0], Gf[f, l, 1], Gf[f, l, 2], Gf[f, l, 3]
        g4, g5, g6 = Gf[f, l, 4], Gf[f, l, 5], Gf[f, l, 6]
        for jj in range(mc):
            j = j0 + jj
            if shift:
                ra[jj] = rb[jj]
                ia[jj] = ib[jj]
            rb[jj] = (g0 * Br[0, j] + g1 * Br[1, j] + g2 * Br[2, j] + g3 * Br[3, j] + g4 * Br[4, j]
                      + g5 * Br[5, j] + g6 * Br[6, j])
            ib[jj] = (g0 * Bi[0, j] + g1 * Bi[1, j] + g2 * Bi[2, j] + g3 * Bi[3, j] + g4 * Bi[4, j]
                      + g5 * Bi[5, j] + g6 * Bi[6, j])
        return
    for jj in range(mc):
        if shift:
            ra[jj] = rb[jj]
            ia[jj] = ib[jj]
        rb[jj] = 0.0
        ib[jj] = 0.0
    for r in range(R):
        gk = Gf[f, l, r]
        for jj in range(mc):
            rb[jj] += gk * Br[r, j0 + jj]
            ib[jj] += gk * Bi[r, j0 + jj]


@njit(cache=True, nogil=True, fastmath=True)
def _run_moving_block(b0, b1, zr, zi, pr, pim, sr, si, wd, j0, l, order_l, ninj_l, state, t0, tau, imp, dly, H,
                      Wr, Wi, Gf, Br, Bi, factored, wbuf, Ex, has_ex, k0, dt, alive_len, out):
    """Advance one (chunk, listener) item over samples [b0, b1), writing sum_j Im(W_j Z_j) to out[0 : b1 - b0].

    zr, zi: (mc,) emission-time state; pr, pim: (mc,) the pole e^{s dT} of frame state[2] (kept between calls);
    sr, si, wd: (mc,) poles s and w_d; j0: first mode of the chunk; dly: (K, L) delay per control frame [s]; Wr, Wi:
    (Kb, L, m) weights of frames k0 .. k0 + Kb - 1, or with ``factored`` W = Gf (Br + i Bi) from Gf (Kb, L, R) and
    Br, Bi (R, m) (a few geometric factors per frame, formed here per frame: no (frames x modes) array); wbuf
    (6, mc): scratch for the weights at both ends of the current frame and the pole's eighth power; state: int64[3] = (next position in order_l, alive-until
    sample, frame whose pole is in pr/pim; -1: none yet).

    The pole of frame k is that of frame k - 1 times e^{-s (dd_k - dd_{k-1})}, dd_k = (d_{k+1} - d_k) / H: the delay
    rate changes slowly, so the ratio is a short Taylor series (|x| < 1e-3: fourth order, error < 1e-17); a jump
    (or the first frame) takes the exact exponential. With ``has_ex``, Ex (Kb, m) adds a decay rate e_jk [1/s] per
    frame (resting contact damping): the pole is e^{(s - e) dT}; a frame whose e differs from the previous one's
    takes the exact exponential."""
    mc = zr.shape[0]
    n_ev = order_l.shape[0]
    ra = wbuf[0]
    ia = wbuf[1]
    rb = wbuf[2]
    ib = wbuf[3]
    p8r = wbuf[4]
    p8i = wbuf[5]
    smax = 0.0
    for jj in range(mc):
        smax = max(smax, abs(complex(sr[jj], si[jj])))
    kcur = -1
    n = b0
    while n < b1:
        k = n // H
        if k != kcur:
            # frame k: its pole (emission time step dT_k) and weights at both ends
            kp = state[2]
            ddk = (dly[k + 1, l] - dly[k, l]) / H
            changed = False
            if has_ex:
                if k - 1 < k0:
                    changed = True
                else:
                    for jj in range(mc):
                        if Ex[k - k0, j0 + jj] != Ex[k - 1 - k0, j0 + jj]:
                            changed = True
                            break
            pole_moved = True
            if kp < 0 or kp != k - 1 or changed:
                dT = dt - ddk
                for jj in range(mc):
                    ex = Ex[k - k0, j0 + jj] if has_ex else 0.0
                    e = np.exp(complex(sr[jj] - ex, si[jj]) * dT)
                    pr[jj] = e.real
                    pim[jj] = e.imag
            else:
                step = ddk - (dly[kp + 1, l] - dly[kp, l]) / H
                pole_moved = step != 0.0
                if step != 0.0:
                    if smax * abs(step) < 1e-3:
                        # r = e^x, x = -(s - e) step, by Horner in real arithmetic (vectorised over modes): fourth
                        # order (error < 1e-17) or, for |x| < 1e-5, second order (error < 2e-16, at rounding)
                        order4 = smax * abs(step) >= 1e-5
                        for jj in range(mc):
                            ur = sr[jj]
                            if has_ex:
                                ur -= Ex[k - k0, j0 + jj]
                            xr = -step * ur
                            xi = -step * si[jj]
                            ur = 0.5
                            ui = 0.0
                            if order4:
                                ur = 1.0 / 6.0 + xr * (1.0 / 24.0)
                                ui = xi * (1.0 / 24.0)
                                ur, ui = 0.5 + xr * ur - xi * ui, xr * ui + xi * ur
                            ur, ui = 1.0 + xr * ur - xi * ui, xr * ui + xi * ur
                            ur, ui = 1.0 + xr * ur - xi * ui, xr * ui + xi * ur
                            qr = pr[jj]
                            qi = pim[jj]
                            c = qr * ur - qi * ui
                            d = qr * ui + qi * ur
                            pr[jj] = c
                            pim[jj] = d
                            # p^8 by three squarings, in the same pass
                            c, d = c * c - d * d, 2.0 * c * d
                            c, d = c * c - d * d, 2.0 * c * d
                            p8r[jj] = c * c - d * d
                            p8i[jj] = 2.0 * c * d
                        pole_moved = False                   # p^8 done
                    else:
                        dT = dt - ddk
                        for jj in range(mc):
                            ex = Ex[k - k0, j0 + jj] if has_ex else 0.0
                            e = np.exp(complex(sr[jj] - ex, si[jj]) * dT)
                            pr[jj] = e.real
                            pim[jj] = e.imag
            state[2] = k
            if pole_moved:
                for jj in range(mc):
                    # p^8 by three squarings (the eight-sample step of the state)
                    c = pr[jj]
                    d = pim[jj]
                    c, d = c * c - d * d, 2.0 * c * d
                    c, d = c * c - d * d, 2.0 * c * d
                    p8r[jj] = c * c - d * d
                    p8i[jj] = 2.0 * c * d
            if factored:
                # the far end of the previous frame is this frame's near end
                if kcur >= 0 and k == kcur + 1:
                    _form_weights(Gf, k + 1 - k0, l, Br, Bi, j0, ra, ia, rb, ib, True)
                else:
                    _form_weights(Gf, k - k0, l, Br, Bi, j0, rb, ib, ra, ia, False)
                    _form_weights(Gf, k + 1 - k0, l, Br, Bi, j0, ra, ia, rb, ib, False)
            else:
                for jj in range(mc):
                    ra[jj] = Wr[k - k0, l, j0 + jj]
                    ia[jj] = Wi[k - k0, l, j0 + jj]
                    rb[jj] = Wr[k + 1 - k0, l, j0 + jj]
                    ib[jj] = Wi[k + 1 - k0, l, j0 + jj]
            kcur = k
        # injections due at sample n: A e^{s (T_n - t0)}
        ptr = state[0]
        if ptr < n_ev and ninj_l[order_l[ptr]] == n:
            a = (n - k * H) / H
            Tn = n * dt - (dly[k, l] + a * (dly[k + 1, l] - dly[k, l]))
            while ptr < n_ev and ninj_l[order_l[ptr]] == n:
                e = order_l[ptr]
                te = tau[e]
                om_c = math.pi / te
                u = Tn - t0[e]
                for jj in range(mc):
                    s = complex(sr[jj], si[jj])
                    G = math.pi * imp[e, j0 + jj] / (2.0 * te)
                    z = (G / wd[jj]) * _I(s, om_c, te) * np.exp(s * u)
                    zr[jj] += z.real
                    zi[jj] += z.imag
                if alive_len < _NEVER:
                    state[1] = max(state[1], n + alive_len)
                else:
                    state[1] = _NEVER
                ptr += 1
            state[0] = ptr
        nxt = ninj_l[order_l[ptr]] if ptr < n_ev else _NEVER
        if n >= state[1]:
            for jj in range(mc):
                zr[jj] = 0.0
                zi[jj] = 0.0
            stop = min(b1, nxt)
            for i in range(n, stop):
                out[i - b0] = 0.0
            n = stop
            continue
        stop = min(b1, nxt, state[1], (k + 1) * H)
        # Eight samples per pass over the modes (one load/store of the state per eight steps; vectorised over
        # modes), the weight taken at the middle of the eight (a 6 kHz staircase of the 1 kHz ramp: its steps are
        # a sixth of one frame's change). The eights are fixed on the frame's sample grid and a lone sample takes
        # its eight's weight too, so each sample's weight depends on its index alone, not on where injections cut
        # the run: the output is linear in the events to round-off (a render in time blocks adds up to the whole).
        i = n
        while i < stop:
            off = i - k * H
            a = min(1.0, (off - off % 8 + 3.5) / H)
            if off % 8 == 0 and i + 8 <= stop:
                a0 = 0.0
                a1 = 0.0
                a2 = 0.0
                a3 = 0.0
                a4 = 0.0
                a5 = 0.0
                a6 = 0.0
                a7 = 0.0
                for jj in range(mc):
                    c = pr[jj]
                    d = pim[jj]
                    g0 = ra[jj] + a * (rb[jj] - ra[jj])
                    g1 = ia[jj] + a * (ib[jj] - ia[jj])
                    x = zr[jj]
                    y = zi[jj]
                    # Im(W p^n Z) = Im(p^n (W Z)): the weight is constant over the eight, so rotate W Z instead of
                    # Z (one accumulation per sample, as the static kernel), and advance Z by p^8 once
                    u = g0 * x - g1 * y
                    v = g0 * y + g1 * x
                    a0 += v
                    u, v = u * c - v * d, u * d + v * c
                    a1 += v
                    u, v = u * c - v * d, u * d + v * c
                    a2 += v
                    u, v = u * c - v * d, u * d + v * c
                    a3 += v
                    u, v = u * c - v * d, u * d + v * c
                    a4 += v
                    u, v = u * c - v * d, u * d + v * c
                    a5 += v
                    u, v = u * c - v * d, u * d + v * c
                    a6 += v
                    u, v = u * c - v * d, u * d + v * c
                    a7 += v
                    c8 = p8r[jj]
                    d8 = p8i[jj]
                    zr[jj] = x * c8 - y * d8
                    zi[jj] = x * d8 + y * c8
                out[i + 0 - b0] = a0
                out[i + 1 - b0] = a1
                out[i + 2 - b0] = a2
                out[i + 3 - b0] = a3
                out[i + 4 - b0] = a4
                out[i + 5 - b0] = a5
                out[i + 6 - b0] = a6
                out[i + 7 - b0] = a7
                i += 8
            else:
                acc = 0.0
                for jj in range(mc):
                    x = zr[jj]
                    y = zi[jj]
                    acc += (ra[jj] + a * (rb[jj] - ra[jj])) * y + (ia[jj] + a * (ib[jj] - ia[jj])) * x
                    zr[jj] = x * pr[jj] - y * pim[jj]
                    zi[jj] = x * pim[jj] + y * pr[jj]
                out[i - b0] = acc
                i += 1
        n = stop


@dataclass
class FactoredWeights:
    """Radiation weights in factored form, W[f, l, j] = sum_r g[f, l, r] basis[r, j]: g (frames, L, R) real, basis
    (R, m) complex. A model with a few geometric factors per frame (the compact model: R = 7) returns this from
    ``weights(frames)`` so the kernel forms each frame's weights itself, instead of a (frames, L, m) array."""

    g: np.ndarray
    basis: np.ndarray


# placeholders for the kernel's arguments of the weight form not in use
_NO_W = np.zeros((1, 1, 1))
_NO_B = np.zeros((1, 1))


def injection_samples(t0, tau, dly, H: int, fs: float):
    """First sample of each event's contact (T_n >= t0) and after it (T_n >= t0 + tau) per listener, with the
    emission time T_n = n / fs - d(n) of frame delays ``dly`` (K, L) interpolated linearly (H samples a frame).
    Returns (nstart, ninj, delay_at_arrival), each (E, L)."""
    K, L = dly.shape
    dt = 1.0 / fs
    kk = np.arange(K)
    Tk = kk[:, None] * H * dt - dly                                # emission time at frame starts (K, L)
    if np.any(np.diff(Tk, axis=0) <= 0):
        raise InputError("a source or listener moves at or above the speed of sound (the emission time stops "
                         "advancing); slow the trajectory down")
    E = len(t0)
    nstart = np.empty((E, L), np.int64)
    ninj = np.empty((E, L), np.int64)
    d_arr = np.empty((E, L))
    for l in range(L):
        for target, dest in ((t0, nstart), (t0 + tau, ninj)):
            # frame containing the target emission time, then the exact fractional sample inside it
            k = np.clip(np.searchsorted(Tk[:, l], target, side="right") - 1, 0, K - 2)
            slope = (Tk[k + 1, l] - Tk[k, l]) / H
            nf = k * H + (target - Tk[k, l]) / slope
            n = np.ceil(nf - 1e-9).astype(np.int64)
            # exact check with the kernel's own formula (round-off near a sample boundary)
            a = (n - k * H) / H
            Tn = n * dt - (dly[k, l] + a * (dly[k + 1, l] - dly[k, l]))
            n = np.where(Tn < target, n + 1, n)
            dest[:, l] = np.maximum(n, 0)
        k = np.clip(np.searchsorted(Tk[:, l], t0, side="right") - 1, 0, K - 2)
        a = np.clip((t0 - Tk[k, l]) / (Tk[k + 1, l] - Tk[k, l]), 0.0, 1.0)
        d_arr[:, l] = dly[k, l] + a * (dly[k + 1, l] - dly[k, l])
    return nstart, ninj, d_arr


def _ringing_frames(ninj, alive: int, H: int, K: int) -> np.ndarray:
    """Frames (K,) whose weights some listener's render reads: from each event's injection until its ring has
    decayed by the cut-off (``alive`` samples), and the frame after each (the interpolation's far end)."""
    mark = np.zeros(K + 2, np.int64)
    start = np.clip(ninj.reshape(-1) // H, 0, K)
    stop = np.clip((ninj.reshape(-1) + min(alive, K * H)) // H + 2, 0, K)
    np.add.at(mark, start, 1)
    np.add.at(mark, stop, -1)
    return np.cumsum(mark)[:K] > 0


def synthesize_moving(omega, xi, t0, tau, impulse, delay_frames, weights: Callable, hop: int,
                      contact_geom, contact_basis, sample_rate: float, n_samples: int, *,
                      cutoff_db: float | None = None, n_threads: int | None = None, damping=None) -> np.ndarray:
    """Modal responses to half-sine impacts radiated with time-varying weights and delays (module docstring).

    Parameters
    ----------
    omega, xi : ndarray, shape (m,)
        Undamped angular frequencies [rad/s] and damping ratios in [0, 1).
    t0, tau : ndarray, shape (E,)
        Event start times and Hertz contact durations [s].
    impulse : ndarray, shape (E, m)
        Modal impulses [N s / sqrt(kg)].
    delay_frames : ndarray, shape (K, L)
        Propagation delay d_l(t_k) [s] at control frames t_k = k hop / sample_rate; K must cover the output:
        K >= ceil(n_samples / hop) + 1.
    weights : callable
        weights(frames) -> complex (len(frames), L, m), its (real, imaginary) parts as a tuple of two real
        arrays, or a :class:`FactoredWeights`: W_lj at the control frames ``frames`` (int array; called
        block by block and only for frames where some mode still rings, so the weights of a long render are never
        all held at once).
    hop : int
        Samples per control frame.
    contact_geom, contact_basis : ndarray, shapes (E, L, K<=4, F) and (F, m)
        Weights of q, q', q'', q''' during each contact (as :func:`~.modal_kernel.synthesize`), at the event's own
        arrival.
    sample_rate : float
        [Hz].
    n_samples : int
        Output length.
    cutoff_db, n_threads
        As :func:`~.modal_kernel.synthesize`.
    damping : callable, optional
        damping(frames) -> (len(frames), m): an extra decay rate [1/s] of every mode at those control frames
        (resting contact damping, sources/resting.py), >= 0; None: none.

    Returns
    -------
    ndarray, shape (L, n_samples)
        Pressure [Pa] per listener.
    """
    omega = np.ascontiguousarray(omega, np.float64).reshape(-1)
    xi = np.ascontiguousarray(xi, np.float64).reshape(-1)
    m = omega.shape[0]
    t0 = np.ascontiguousarray(t0, np.float64).reshape(-1)
    E = t0.shape[0]
    tau = np.ascontiguousarray(tau, np.float64).reshape(E)
    imp = np.ascontiguousarray(impulse, np.float64).reshape(E, m)
    dly = np.ascontiguousarray(delay_frames, np.float64)
    H = int(hop)
    fs = float(sample_rate)
    n_samples = int(n_samples)
    if H < 1:
        raise InputError(f"synthesize_moving: hop = {hop} samples must be >= 1")
    if dly.ndim != 2 or dly.shape[0] < -(-n_samples // H) + 1:
        raise InputError(f"synthesize_moving: delay_frames must have shape (K >= {-(-n_samples // H) + 1}, L), "
                         f"got {dly.shape}")
    if not np.all(np.isfinite(dly)) or np.any(dly < 0):
        raise InputError("synthesize_moving: frame delays must be finite and >= 0")
    if not np.all(np.isfinite(xi) & (xi >= 0) & (xi < 1)) or not np.all(np.isfinite(omega) & (omega > 0)):
        raise InputError("synthesize_moving: modes need 0 <= xi < 1 and positive finite frequencies")
    if not (np.all(np.isfinite(tau) & (tau > 0)) and np.all(np.isfinite(t0)) and np.all(np.isfinite(imp))):
        raise InputError("synthesize_moving: event times, contact durations and impulses must be finite (tau > 0)")
    L = dly.shape[1]
    out = np.zeros((L, n_samples))
    if E == 0 or m == 0 or L == 0 or n_samples == 0:
        return out
    dt = 1.0 / fs
    wd = omega * np.sqrt(1.0 - xi**2)
    s = -xi * omega + 1j * wd
    p = np.exp(s * dt)
    sr, si, pr, pim = s.real.copy(), s.imag.copy(), p.real.copy(), p.imag.copy()
    nstart, ninj, d_arr = injection_samples(t0, tau, dly, H, fs)

    cg = np.ascontiguousarray(contact_geom, np.float64)
    cb = np.ascontiguousarray(contact_basis, np.float64)
    chunks = mode_chunks(m)
    items = [(c, l) for c in range(len(chunks)) for l in range(L)]
    clen = int(max(1, (ninj - nstart).max()))
    cvals = np.zeros((len(chunks), E, L, clen))
    if cutoff_db is None or not np.isfinite(cutoff_db):
        alive = [int(_NEVER)] * len(chunks)
    else:
        sigma = xi * omega
        T = np.log(10.0 ** (float(cutoff_db) / 20.0)) / np.where(sigma > 0, sigma, np.nan)
        alive = [int(_NEVER) if np.any(np.isnan(T[a:b])) else int(np.ceil(T[a:b].max() * fs)) for a, b in chunks]
    order = [np.argsort(ninj[:, l], kind="stable").astype(np.int64) for l in range(L)]
    ninj_c = [np.ascontiguousarray(ninj[:, l]) for l in range(L)]
    zs = [(np.zeros(b - a), np.zeros(b - a)) for a, b in chunks for _ in range(L)]
    ps = [(np.zeros(b - a), np.zeros(b - a)) for a, b in chunks for _ in range(L)]
    states = [np.array([0, -1, -1], np.int64) for _ in items]
    wbufs = [np.zeros((6, chunks[c][1] - chunks[c][0])) for c, _ in items]
    needed = _ringing_frames(ninj, max(alive), H, -(-n_samples // H) + 1)
    polys = [(sr[a:b].copy(), si[a:b].copy(), wd[a:b].copy()) for a, b in chunks]
    B = min(BLOCK, n_samples)
    part = np.zeros((len(items), B))

    def contact(c):
        a, b = chunks[c]
        _contact_terms(cvals[c], a, b, sr, si, pr, pim, xi, omega, wd, t0, tau, imp, d_arr, cg, cb, dt, nstart,
                       ninj)

    nt = min(n_threads or default_threads(), len(items))
    ex = ThreadPoolExecutor(max_workers=nt) if nt > 1 else None
    try:
        pool_map(ex, contact, len(chunks))     # in-contact samples: the static closed form at each arrival
        _scatter_contact(out, cvals.sum(axis=0), nstart, ninj)            # chunks summed in a fixed order
        for b0 in range(0, n_samples, B):
            b1 = min(n_samples, b0 + B)
            k0, k1 = b0 // H, (b1 - 1) // H + 2                   # frames whose weights this block reads
            frames = k0 + np.flatnonzero(needed[k0:k1])           # only where something rings
            factored = False
            if len(frames):
                W = weights(frames)
                if isinstance(W, FactoredWeights):
                    factored = True
                    g = np.asarray(W.g, np.float64)
                    Br = np.ascontiguousarray(W.basis.real, np.float64)
                    Bi = np.ascontiguousarray(W.basis.imag, np.float64)
                    if g.ndim != 3 or g.shape[:2] != (len(frames), L) or Br.shape != (g.shape[2], m):
                        raise InputError(f"synthesize_moving: factored weights need g ({len(frames)}, {L}, R) and "
                                         f"basis (R, {m}), got {g.shape} and {Br.shape}")
                else:
                    wr, wi = (W.real, W.imag) if not isinstance(W, tuple) else W
                    if wr.shape != (len(frames), L, m) or wi.shape != wr.shape:
                        raise InputError(f"synthesize_moving: weights(frames) must have shape "
                                         f"{(len(frames), L, m)}, got {wr.shape}")
            if damping is None:
                Ex = np.zeros((1, 1))
            else:
                Ex = np.ascontiguousarray(damping(np.arange(k0, k1)), np.float64)
                if Ex.shape != (k1 - k0, m) or not np.all(np.isfinite(Ex) & (Ex >= 0)):
                    raise InputError(f"synthesize_moving: damping(frames) must be finite, >= 0 and of shape "
                                     f"{(k1 - k0, m)}")
            if factored:
                Wr = Wi = _NO_W
                G = np.zeros((k1 - k0, L, g.shape[2]))
                G[frames - k0] = g
            elif len(frames) == k1 - k0:
                Wr, Wi = np.ascontiguousarray(wr, np.float64), np.ascontiguousarray(wi, np.float64)
            else:
                Wr = np.zeros((k1 - k0, L, m))
                Wi = np.zeros((k1 - k0, L, m))
                if len(frames):
                    Wr[frames - k0] = wr
                    Wi[frames - k0] = wi
            if not factored:
                G, Br, Bi = _NO_W, _NO_B, _NO_B

            def work(i):
                c, l = items[i]
                a, _ = chunks[c]
                ssr, ssi, wwd = polys[c]
                _run_moving_block(b0, b1, zs[i][0], zs[i][1], ps[i][0], ps[i][1], ssr, ssi, wwd, a, l, order[l],
                                  ninj_c[l], states[i], t0, tau, imp, dly, H, Wr, Wi, G, Br, Bi, factored,
                                  wbufs[i], Ex, damping is not None, k0, dt, alive[c], part[i])

            pool_map(ex, work, len(items))
            for i, (c, l) in enumerate(items):
                out[l, b0:b1] += part[i, : b1 - b0]
    finally:
        if ex is not None:
            ex.shutdown(wait=True)
    return out
