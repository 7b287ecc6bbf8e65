"""Exact modal synthesis of half-sine impacts: compiled kernel.

Modal sound of rigid-body impacts as in O'Brien, Shen & Gatchalian 2002, "Synthesizing sounds from rigid-body
simulations", driven by the Hertz half-sine force of Chadwick, Zheng & James 2012, "Precomputed Acceleration
Noise for Improved Rigid-Body Sound" (sec. 3, eqs. 6 and 10). The papers time-step the modes with Newmark
schemes (the PAN paper at 192 kHz, sec. 5); the exact closed-form response below is the package's choice (no
pitch error at any sample rate).

Model. Mode j (angular frequency w_j [rad/s], damping ratio xi_j < 1) obeys
    q_j'' + 2 xi_j w_j q_j' + w_j^2 q_j = g_j(t)                        (xi_j from the material, materials.py)
and one impact event e (start t0_e, Hertz duration tau_e, modal impulse I_ej = u_j(x_e) . J_e [N s/sqrt(kg)])
forces it with the half-sine g_j = G_ej sin(Omega_e u), 0 <= u = t - t0_e < tau_e, G_ej = pi I_ej / (2 tau_e),
Omega_e = pi / tau_e (PAN paper eqs. 6 and 10). With s_j = -xi_j w_j + i w_dj the response is q = Im Z,
    Z(u) = (G/w_d) e^{s u} I(min(u, tau)),   I(T) = int_0^T e^{-s v} sin(Omega v) dv          (closed form)
which is exact for any tau versus the sample period. We evaluate I(T) without the removable singularity at
s^2 + Omega^2 = 0 (xi = 0, w tau = pi) as
    I(T) = T [phi((s - i Omega) T) - phi((s + i Omega) T)] / (2 i),    phi(x) = (1 - e^{-x}) / x
(phi by its Taylor series for |x| < 0.1), which equals the usual [Omega - e^{-sT}(s sin + Omega cos)]/(s^2+Omega^2).

Output. Per listener l, the kernel returns
    y_l(t) = sum_e sum_j sum_{k=0..3} c_k[e,l,j] q_ej^{(k)}(t - d_el),   c_k[e,l,j] = sum_f geom[e,l,k,f] basis[f,j]
i.e. any combination of q, q', q'', q''' of every mode, each event with its own delay d_el [s] and weights (the
compact radiation model of transfer/low_order.py is one such combination). After contact (u >= tau),
q^{(k)} = Im(s^k Z), so the weights fold into one complex number per mode, W = sum_k c_k s^k, and every listener
keeps one complex one-pole state per mode:
    Z_{n+1} = p Z_n,  p = e^{s dt};  at the first sample n with u_n >= tau add W (G/w_d) I(tau) e^{s u_n};
    y[n] = sum_j Im Z_j[n].
During contact (u in [0, tau), a few samples) the forced terms are added directly from the closed form:
    q' = Im(s Z), q'' = Im(s^2 Z) + F, q''' = Im(s^3 Z) - 2 xi w F + F',  F = G sin(Omega u), F' = G Omega cos(Omega u).

Performance and determinism. The sample loop is compiled (Numba, ``nogil``), modes innermost in split real /
imaginary arrays (SIMD). Modes are cut into fixed chunks that depend only on the number of modes; each
(chunk, listener) work item runs on a Python thread (the compiled code releases the GIL) over blocks of samples,
writing its own partial output; partials are summed in a fixed order. Results are therefore bit-identical for
any number of threads and independent of Numba's threading layer (none is used: the workqueue layer aborts on
concurrent calls from several threads, OpenMP was seen to stall under its default wait policy). ``fastmath``
lets LLVM vectorise the sum over modes; the summation order is fixed by the compiled code, so a given machine
reproduces its samples exactly (another CPU with other vector widths may differ in the last bits).

Mode cut-off (the package's choice): with ``cutoff_db`` a work item stops updating once every injection it holds
has decayed by that many dB (time ln(10^{dB/20}) / sigma_j for its slowest mode), its state is zeroed, and it
skips ahead to its next injection.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ..errors import InputError
from ..parallel import default_threads

#: samples per block of the threaded driver (partials are (items, BLOCK) float64)
BLOCK = 65536
#: target modes per chunk (chunk count is a function of the mode count only, for reproducibility)
CHUNK_MODES = 128
MAX_CHUNKS = 16
_NEVER = np.iinfo(np.int64).max // 4


# ---------------------------------------------------------------------------------------------------------------
# scalar helpers (compiled)
@njit(cache=True, nogil=True)
def _phi(x):
    """(1 - e^{-x}) / x for complex x, Taylor series near 0."""
    if abs(x) < 0.1:
        # 1 - x/2 + x^2/6 - x^3/24 + ... = sum_k (-x)^k / (k+1)!, truncated after x^8 (error < 3e-16)
        term = 1.0 + 0j
        acc = 1.0 + 0j
        for k in range(1, 9):
            term = term * (-x) / (k + 1)
            acc += term
        return acc
    return (1.0 - np.exp(-x)) / x


@njit(cache=True, nogil=True)
def _I(s, omega_c, T):
    """I(T) = int_0^T e^{-s v} sin(Omega v) dv (module docstring), regular at s = i Omega."""
    io = 1j * omega_c
    return T * (_phi((s - io) * T) - _phi((s + io) * T)) / 2j


# ---------------------------------------------------------------------------------------------------------------
# hot loop: one (chunk, listener) item over one block of samples
@njit(cache=True, nogil=True, fastmath=True)
def _run_item_block(b0, b1, zr, zi, pr, pim, sr, si, wd, j0, l, order_l, ninj_l, state,
                    t0, tau, imp, delay, geom, basis, dt, alive_len, out):
    """Advance item state over samples [b0, b1) writing sum_j Im Z_j to out[0 : b1 - b0].

    zr, zi: (mc,) state of this item's modes; pr, pim, sr, si, wd: (mc,) pole p, s and w_d of those modes;
    j0: first global mode index of the chunk; l: listener; order_l: events sorted by injection sample;
    ninj_l: injection sample per event (this listener); state: int64[2] = (next position in order_l,
    alive-until sample).
    """
    mc = zr.shape[0]
    n_ev = order_l.shape[0]
    K = geom.shape[2]
    F = geom.shape[3]
    n = b0
    while n < b1:
        # injections due at sample n (module docstring: add W A e^{s u_n} once u_n >= tau)
        ptr = state[0]
        while ptr < n_ev and ninj_l[order_l[ptr]] == n:
            e = order_l[ptr]
            te = tau[e]
            om_c = math.pi / te
            u = n * dt - delay[e, l] - t0[e]
            for jj in range(mc):
                j = j0 + jj
                s = complex(sr[jj], si[jj])
                w = 0j
                sk = 1.0 + 0j
                for k in range(K):
                    ck = 0.0
                    for f in range(F):
                        ck += geom[e, l, k, f] * basis[f, j]
                    w += ck * sk
                    sk = sk * s
                G = math.pi * imp[e, j] / (2.0 * te)
                z = w * (G / wd[jj]) * _I(s, om_c, te) * np.exp(s * u)
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
            # every injection has decayed by cutoff_db: zero the state and skip to the next injection
            for jj in range(mc):
                zr[jj] = 0.0
                zi[jj] = 0.0
            stop = min(b1, nxt)
            for k in range(n, stop):
                out[k - b0] = 0.0
            n = stop
            continue
        stop = min(b1, nxt, state[1])
        # exact free decay Z <- p Z, output Im Z before the step; modes innermost (vectorised).
        # Eight samples per pass over the modes: one load/store of the state per eight steps.
        k = n
        while k + 8 <= stop:
            acc0 = 0.0
            acc1 = 0.0
            acc2 = 0.0
            acc3 = 0.0
            acc4 = 0.0
            acc5 = 0.0
            acc6 = 0.0
            acc7 = 0.0
            for jj in range(mc):
                c = pr[jj]
                d = pim[jj]
                a = zr[jj]
                b = zi[jj]
                acc0 += b
                a, b = a * c - b * d, a * d + b * c
                acc1 += b
                a, b = a * c - b * d, a * d + b * c
                acc2 += b
                a, b = a * c - b * d, a * d + b * c
                acc3 += b
                a, b = a * c - b * d, a * d + b * c
                acc4 += b
                a, b = a * c - b * d, a * d + b * c
                acc5 += b
                a, b = a * c - b * d, a * d + b * c
                acc6 += b
                a, b = a * c - b * d, a * d + b * c
                acc7 += b
                a, b = a * c - b * d, a * d + b * c
                zr[jj] = a
                zi[jj] = b
            out[k + 0 - b0] = acc0
            out[k + 1 - b0] = acc1
            out[k + 2 - b0] = acc2
            out[k + 3 - b0] = acc3
            out[k + 4 - b0] = acc4
            out[k + 5 - b0] = acc5
            out[k + 6 - b0] = acc6
            out[k + 7 - b0] = acc7
            k += 8

        for k in range(k, stop):
            acc = 0.0
            for jj in range(mc):
                a = zr[jj]
                b = zi[jj]
                zr[jj] = a * pr[jj] - b * pim[jj]
                zi[jj] = a * pim[jj] + b * pr[jj]
                acc += b
            out[k - b0] = acc
        n = stop


@njit(cache=True, nogil=True)
def _contact_terms(vals, a, b, sr, si, pr, pim, xi, omega, wd, t0, tau, imp, delay, geom, basis, dt, nstart, ninj):
    """Samples inside each contact (0 <= u < tau) from the closed form (module docstring), modes [a, b) only.

    vals[e, l, i] receives the sum over those modes at sample nstart[e, l] + i (an own buffer per chunk, so chunks
    run in parallel and are summed in a fixed order). The forced part e^{s u} I(u) is evaluated as
        e^{s u} I(u) = [(e^{s u} - e^{i Omega u}) / (s - i Omega) - (e^{s u} - e^{-i Omega u}) / (s + i Omega)] / (2 i)
    (from I's phi form and e^{s u} phi(x u) = (e^{s u} - e^{(s - x) u}) / (x u)), with e^{s u} advanced sample to
    sample by the pole p = e^{s dt} and e^{+-i Omega u} shared by all modes; where (s -+ i Omega) u is small the
    phi form (Taylor series, no cancellation) is used instead."""
    n_ev, L = delay.shape
    K = geom.shape[2]
    F = geom.shape[3]
    clen = vals.shape[2]
    c = np.zeros(4)
    us = np.empty(clen)
    sns = np.empty(clen)
    css = np.empty(clen)
    for e in range(n_ev):
        te = tau[e]
        om_c = math.pi / te
        io = 1j * om_c
        for l in range(L):
            n0 = nstart[e, l]
            n1 = ninj[e, l]
            for i in range(n1 - n0):
                vals[e, l, i] = 0.0
                u = (n0 + i) * dt - delay[e, l] - t0[e]
                u = min(max(u, 0.0), te)
                us[i] = u
                sns[i] = math.sin(om_c * u)
                css[i] = math.cos(om_c * u)
            if n1 <= n0:
                continue
            for j in range(a, b):
                s = complex(sr[j], si[j])
                p = complex(pr[j], pim[j])
                c[:] = 0.0
                for k in range(K):
                    ck = 0.0
                    for f in range(F):
                        ck += geom[e, l, k, f] * basis[f, j]
                    c[k] = ck
                w = c[0] + c[1] * s + c[2] * s * s + c[3] * s * s * s
                G = math.pi * imp[e, j] / (2.0 * te)
                gw = G / wd[j]
                c2 = c[2] * G
                c3 = c[3] * G
                damp = 2.0 * xi[j] * omega[j]
                sa = s - io
                sb = s + io
                ia = 1.0 / sa if sa != 0 else 0j      # sa = 0 (xi = 0, w tau = pi): always the phi branch
                ib = 1.0 / sb if sb != 0 else 0j
                eu = np.exp(s * us[0])
                for i in range(n1 - n0):
                    u = us[i]
                    ep = complex(css[i], sns[i])
                    if abs(sa) * u < 0.1 or abs(sb) * u < 0.1:
                        eu = np.exp(s * u)
                        z = eu * u * (_phi(sa * u) - _phi(sb * u)) / 2j
                    else:
                        z = ((eu - ep) * ia - (eu - ep.conjugate()) * ib) / 2j
                    vals[e, l, i] += (w * gw * z).imag + c2 * sns[i] + c3 * (om_c * css[i] - damp * sns[i])
                    eu = eu * p


@njit(cache=True, nogil=True)
def _scatter_contact(out, cv, nstart, ninj):
    """out[l, n] += cv[e, l, n - nstart[e, l]] for the in-contact samples n of every event inside the output."""
    n_ev, L = nstart.shape
    N = out.shape[1]
    for e in range(n_ev):
        for l in range(L):
            n0 = nstart[e, l]
            for n in range(max(n0, 0), min(ninj[e, l], N)):
                out[l, n] += cv[e, l, n - n0]


# ---------------------------------------------------------------------------------------------------------------
def pool_map(ex, fn, n: int) -> None:
    """fn(0), ..., fn(n - 1) on the thread pool ``ex`` (None: in this thread), waiting for all."""
    if ex is None:
        for i in range(n):
            fn(i)
    else:
        for f in [ex.submit(fn, i) for i in range(n)]:
            f.result()


def mode_chunks(m: int) -> list[tuple[int, int]]:
    """Fixed partition of m modes into contiguous chunks (depends on m only: reproducible results)."""
    n = max(1, min(MAX_CHUNKS, -(-m // CHUNK_MODES)))
    edges = np.linspace(0, m, n + 1).round().astype(int)
    return [(int(edges[i]), int(edges[i + 1])) for i in range(n) if edges[i + 1] > edges[i]]


def synthesize(omega, xi, t0, tau, impulse, delay, geom, basis, sample_rate: float, n_samples: int, *,
               cutoff_db: float | None = None, n_threads: int | None = None) -> np.ndarray:
    """Sum over events and modes of weighted modal responses to half-sine impacts (module docstring).

    omega (m,) undamped angular frequencies [rad/s]; xi (m,) damping ratios in [0, 1);
    t0 (E,) event start times [s]; tau (E,) contact durations [s] (> 0); impulse (E, m) modal impulses
    I_ej = u_j(x_e) . J_e [N s / sqrt(kg)]; delay (E, L) propagation delay per event and listener [s] (>= 0);
    geom (E, L, K, F) and basis (F, m), K <= 4: weight of the k-th time derivative of q_j is
    sum_f geom[e, l, k, f] basis[f, j]; sample_rate [Hz]; n_samples.
    Returns (L, n_samples) float64: y_l[n] = sum_{e,j,k} c_k q_ej^{(k)}(n/fs - d_el).
    """
    omega = np.ascontiguousarray(omega, np.float64).reshape(-1)
    xi = np.ascontiguousarray(xi, np.float64).reshape(-1)
    m = omega.shape[0]
    t0 = np.ascontiguousarray(t0, np.float64).reshape(-1)
    E = t0.shape[0]
    tau = np.ascontiguousarray(tau, np.float64).reshape(E)
    imp = np.ascontiguousarray(impulse, np.float64).reshape(E, m)
    delay = np.ascontiguousarray(delay, np.float64)
    if delay.ndim != 2 or delay.shape[0] != E:
        raise InputError(f"synthesize: delay must have shape (events, listeners) = ({E}, L), got {delay.shape}")
    L = delay.shape[1]
    geom = np.ascontiguousarray(geom, np.float64)
    basis = np.ascontiguousarray(basis, np.float64)
    if basis.ndim != 2 or basis.shape[1] != m:
        raise InputError(f"synthesize: basis must have shape (features, {m}), got {basis.shape}")
    if geom.shape[:2] != (E, L) or geom.ndim != 4 or geom.shape[2] > 4 or geom.shape[3] != basis.shape[0]:
        raise InputError(f"synthesize: geom must have shape ({E}, {L}, K<=4, {basis.shape[0]}), got {geom.shape}")
    fs = float(sample_rate)
    n_samples = int(n_samples)
    if not (np.isfinite(fs) and fs > 0):
        raise InputError(f"synthesize: sample_rate = {sample_rate} Hz must be positive")
    if n_samples < 0:
        raise InputError(f"synthesize: n_samples = {n_samples} must not be negative")
    if not np.all(np.isfinite(omega) & (omega > 0)):
        raise InputError("synthesize: modal angular frequencies must be positive and finite")
    if not np.all(np.isfinite(xi) & (xi >= 0) & (xi < 1)):
        j = int(np.flatnonzero(~(np.isfinite(xi) & (xi >= 0) & (xi < 1)))[0])
        raise InputError(f"synthesize: mode {j} has damping ratio xi = {xi[j]}; need 0 <= xi < 1 "
                         "(overdamped modes do not ring and must be dropped)")
    bad = ~(np.isfinite(tau) & (tau > 0))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise InputError(f"synthesize: event {e} has contact duration tau = {tau[e]} s; it must be positive "
                         "and finite (check the event's vn, masses and materials)")
    for name, a in (("t0", t0), ("delay", delay), ("impulse", imp)):
        if not np.all(np.isfinite(a)):
            raise InputError(f"synthesize: {name} has NaN or infinite values")
    if np.any(delay < 0):
        raise InputError("synthesize: delays must not be negative")
    out = np.zeros((L, n_samples))
    if E == 0 or m == 0 or L == 0 or n_samples == 0:
        return out

    dt = 1.0 / fs
    wd = omega * np.sqrt(1.0 - xi**2)                              # w_d = w sqrt(1 - xi^2)
    s = -xi * omega + 1j * wd                                      # pole s_j (module docstring)
    p = np.exp(s * dt)                                             # p = e^{s dt}
    sr, si, pr, pim = s.real.copy(), s.imag.copy(), p.real.copy(), p.imag.copy()

    # sample indices: contact starts at nstart (u >= 0), after-contact injection at ninj (u >= tau)
    start = (t0[:, None] + delay) * fs
    nstart = np.ceil(start - 1e-9).astype(np.int64)
    nstart = np.where(nstart * dt - delay - t0[:, None] < 0, nstart + 1, nstart)
    ninj = np.ceil((t0[:, None] + delay + tau[:, None]) * fs - 1e-9).astype(np.int64)
    ninj = np.where(ninj * dt - delay - t0[:, None] < tau[:, None], ninj + 1, ninj)
    ninj = np.maximum(ninj, 0)

    chunks = mode_chunks(m)
    clen = int(max(1, (ninj - nstart).max()))
    cvals = np.zeros((len(chunks), E, L, clen))
    items = [(c, l) for c in range(len(chunks)) for l in range(L)]
    if cutoff_db is None or not np.isfinite(cutoff_db):
        alive = [int(_NEVER)] * len(chunks)
    else:
        sigma = xi * omega                                         # decay rate sigma_j = xi_j w_j
        T = np.log(10.0 ** (float(cutoff_db) / 20.0)) / np.where(sigma > 0, sigma, np.nan)
        alive = []
        for a, b in chunks:
            Tc = T[a:b]
            alive.append(int(_NEVER) if np.any(np.isnan(Tc)) else int(np.ceil(Tc.max() * fs)))
    order = [np.argsort(ninj[:, l], kind="stable").astype(np.int64) for l in range(L)]
    ninj_c = [np.ascontiguousarray(ninj[:, l]) for l in range(L)]
    zs = [(np.zeros(b - a), np.zeros(b - a)) for a, b in chunks for _ in range(L)]   # item order (c, l)
    states = [np.array([0, -1], np.int64) for _ in items]
    polys = [(pr[a:b].copy(), pim[a:b].copy(), sr[a:b].copy(), si[a:b].copy(), wd[a:b].copy()) for a, b in chunks]
    B = min(BLOCK, n_samples)
    part = np.zeros((len(items), B))

    def work(i, b0, b1):
        c, l = items[i]
        a, _ = chunks[c]
        ppr, ppi, ssr, ssi, wwd = polys[c]
        _run_item_block(b0, b1, zs[i][0], zs[i][1], ppr, ppi, ssr, ssi, wwd, a, l, order[l], ninj_c[l],
                        states[i], t0, tau, imp, delay, geom, basis, dt, alive[c], part[i])

    def contact(c):
        a, b = chunks[c]
        _contact_terms(cvals[c], a, b, sr, si, pr, pim, xi, omega, wd, t0, tau, imp, delay, geom, basis, dt, nstart, ninj)

    nt = min(n_threads or default_threads(), len(items))
    ex = ThreadPoolExecutor(max_workers=nt) if nt > 1 else None
    try:
        pool_map(ex, contact, len(chunks))
        _scatter_contact(out, cvals.sum(axis=0), nstart, ninj)     # chunks summed in a fixed order
        for b0 in range(0, n_samples, B):
            b1 = min(n_samples, b0 + B)
            pool_map(ex, lambda i, b0=b0, b1=b1: work(i, b0, b1), len(items))
            for i, (c, l) in enumerate(items):                     # fixed summation order
                out[l, b0:b1] += part[i, : b1 - b0]
    finally:
        if ex is not None:
            ex.shutdown(wait=True)
    return out


def modal_response(omega, xi, t0, tau, impulse, sample_rate: float, n_samples: int, *, order: int = 0,
                   **kw) -> np.ndarray:
    """Sum over modes of the k-th time derivative (``order`` 0..3) of the displacement responses q_j [m sqrt(kg)
    / s^k ...] to half-sine events (no radiation): (n_samples,) float64. Arguments as :func:`synthesize`."""
    omega = np.asarray(omega, np.float64).reshape(-1)
    t0 = np.asarray(t0, np.float64).reshape(-1)
    E = t0.shape[0]
    geom = np.zeros((E, 1, 4, 1))
    geom[:, 0, order, 0] = 1.0
    return synthesize(omega, xi, t0, tau, impulse, np.zeros((E, 1)), geom, np.ones((1, omega.shape[0])),
                      sample_rate, n_samples, **kw)[0]
