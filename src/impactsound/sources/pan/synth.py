"""PAN synthesis: rigid-body acceleration noise of impulses from precomputed fields (Chadwick, Zheng & James 2012,
"Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 4.3 and Fig. 7, with eqs. 18-20).

Per retained impulse e on a body (time t0, Hertz duration tau, peak accelerations amp_i, i = 0..5 from eqs.
11-12, body-frame listener x_L at distance R in direction (theta, phi)):

    z_i(t) = amp_i S(t; t0, tau) ~ amp_i sum_k c_k psi(t - t0 - k h; h),   k = -1 .. ceil(tau/h) + 1   (eqs. 18-19)
    p(t)   = sum_k c_k sum_i amp_i sum_n R^{-n} q_{i,n}(theta, phi; t - t0 - k h - R/c)            (eqs. 18-20)
           = sum_k c_k G_e(t - t0 - k h - R/c)

The paper takes c_k = S(t0 + k h) (samples of the half-sine); the package instead projects the half-sine onto the
pulse grid (pulse.py, :func:`contact_pulse_weights`) with a kernel that keeps the event's impulse (h sum_k c_k =
2 tau / pi) and force centre for any tau/h (sampling keeps none of the impulse for tau <= h, 79 % at tau = 2h,
99.2 % at 10h) and tends to the samples as tau/h grows (interior weights S_k (1 + (pi h/tau)^2/9), which undoes
psi's own smoothing). q is interpolated bilinearly in angle (field.py). G_e, the impulse's directional pulse,
is one weighted sum of the 6 fields x N terms x 4 angle corners.

Output rate (band limiting; the package's choice, the paper does not say how it reaches the output rate). The
fields hold content far above audio rates (dt_q ~ 1 us), so point-sampling p at the output rate would alias.
Because every step is linear and time-invariant, we low-pass each coefficient
series once per (field, output rate): the table

    Q_{i,n}(tau_m) = (q_{i,n} * g)(tau_m),   tau_m = tau_f0 + m dt_f,   dt_f = 1/(U f_s)

with g a Kaiser-windowed sinc low-pass (cut-off 0.45 f_s, half-length 16 output samples, beta 8, unit DC
gain) evaluated exactly on the continuous psi expansion (g * psi by Gauss-Legendre quadrature on psi's four
cubic pieces). The low-passed pressure is then exactly sum_k c_k (G_e * g)(t - ...), and the output samples
are read from the oversampled table (U = 4 by default) with Catmull-Rom cubic interpolation (0.6 % amplitude
error at 0.45 f_s, 0.03 % at 10 kHz for f_s = 48 kHz). Since U is an integer, the interpolation phase of one
pulse k is the same for all its output samples.

Kernel and determinism. Per (impulse, listener) the compiled kernel forms G_e on the table grid (48 weighted
vector sums, SIMD) and adds the K shifted, scaled pulses into the output. Impulses are sorted by time and cut
into fixed chunks of CHUNK impulses (a function of the impulse count only); each chunk runs on a Python thread
(the kernel releases the GIL) into its own partial buffer spanning only its time window; partials are added in
chunk order. Results are bit-identical for any thread count (as sources/modal_kernel.py).

Supported bodies: an event whose log gives the struck body a resting support (EventLog support_* columns, from
the dynamics) adds the support's reaction impulse to the body's accelerations when the impulse pushes the body
into it (timescale.py, "Supported bodies"): a cube resting on the floor and struck from above no longer
accelerates as if it floated. Logs without support columns render every body free, as the paper does.

Choices: free field (no ground reflection), as in the paper; a listener inside a body's bounding sphere R_b
(where the far-field expansion is invalid) raises InputError; the scene air's density rescales the fields
(p is linear in rho), a different speed of sound raises (the fields would be wrong).
"""
from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.special
from numba import njit

from ...errors import InputError
from ..modal_kernel import default_threads
from .field import N_FIELDS, PANField, angle_weights, with_poles
from .pulse import FIRST_PULSE, contact_weight_table, psi_unit

#: impulses per work item (fixed: results do not depend on the thread count)
CHUNK = 2048
#: fine samples per table sample of the filtered pulse kappa = psi * g (PANTable.from_field)
KAPPA_FINE = 16


# ---------------------------------------------------------------------------------------------------------------
@dataclass
class PANTable:
    """Band-limited, oversampled coefficient table of one PAN field for one output rate (module docstring).

    Attributes
    ----------
    table : ndarray, shape (n_theta + 2, n_phi, 6, N, n_f), or (n_cells, 1, 6, N, n_f) with ``cells``
        float64 [Pa m^n per unit acceleration], rows padded with the poles (field.with_poles).
    dt_f : float
        Table spacing 1/(oversample f_s) [s].
    tau_f0 : float
        Retarded time of table sample 0, from the pulse centre [s].
    h : float
        Pulse time scale [s].
    c : float
        Speed of sound of the field [m/s].
    rho : float
        Air density of the field [kg/m^3].
    R_b : float
        Bounding radius [m].
    sample_rate : float
        Output rate f_s [Hz].
    oversample : int
        U.
    cells : ndarray of int64, shape (n_theta + 2, n_phi), optional
        A table of some directions only (PANTable.from_field ``needed``): the row of ``table`` that holds each
        cell of the pole-padded grid (-1: not built).
    """

    table: np.ndarray
    dt_f: float
    tau_f0: float
    h: float
    c: float
    rho: float
    R_b: float
    sample_rate: float
    oversample: int
    cells: np.ndarray | None = None

    @property
    def grid(self) -> tuple[int, int]:
        """(n_theta, n_phi) of the direction grid (without the pole rows)."""
        g = self.table.shape if self.cells is None else self.cells.shape
        return int(g[0]) - 2, int(g[1])

    def read(self, it, ip):
        """The table rows of pole-padded grid cells (it, ip): (table, it', ip') to index ``table`` with.

        Raises
        ------
        InputError
            When a cell was not built (a table of other directions).
        """
        if self.cells is None:
            return self.table, it, ip
        rows = self.cells[it, ip]
        if np.any(rows < 0):
            raise InputError("PAN table: a direction was read that the table was not built for "
                             "(PANTable.from_field needed=...)")
        return self.table, rows.astype(it.dtype), np.zeros_like(ip)

    @classmethod
    def from_field(cls, fld: PANField, sample_rate: float, *, oversample: int = 4, cutoff: float = 0.45,
                   half_width: int = 16, beta: float = 8.0, trim_rel: float = 1e-7,
                   needed=None) -> "PANTable":
        """Low-pass and resample a field for an output rate (module docstring).

        Parameters
        ----------
        fld : PANField
            The fitted fields.
        sample_rate : float
            Output rate [Hz].
        oversample : int, optional
            Table samples per output sample U.
        cutoff : float, optional
            Low-pass cut-off as a fraction of sample_rate.
        half_width : int, optional
            Filter half-length in output samples.
        beta : float, optional
            Kaiser window parameter.
        trim_rel : float, optional
            Leading/trailing table samples below trim_rel x the table's peak are cut (speed; -140 dB by default).
        needed : array_like of bool, shape (n_theta + 2, n_phi), optional
            Cells of the pole-padded grid (field.angle_weights' ``it``, ``ip``) that will be read: only they are
            built, in a compact table (``cells``; a proxy's table serves one render: building only the directions
            its impulses see is what makes hundreds of objects cheap). Default: all.

        Returns
        -------
        PANTable

        Raises
        ------
        InputError
            On a non-positive sample rate or oversample < 1.
        """
        fs = float(sample_rate)
        if not (np.isfinite(fs) and fs > 0):
            raise InputError(f"PAN: sample_rate = {sample_rate} Hz must be positive")
        U = int(oversample)
        if U < 1:
            raise InputError(f"PAN: oversample = {oversample} must be >= 1")
        dt_f = 1.0 / (U * fs)
        Tw = half_width / fs
        dq = fld.dt_q
        g0, dg, gv, gain = _lowpass(fs, float(cutoff), int(half_width), float(beta))
        n_coef = fld.n_coef
        tau_f0 = fld.tau0 - 2.0 * dq - Tw
        n_f = int(np.ceil(((n_coef + 3) * dq + 2.0 * Tw) / dt_f)) + 1
        # Kmat[m, j] = kappa(tau_f0 + m dt_f - tau0 - j dq) with kappa = (psi(.; dq) * g) / gain, nonzero only for
        # |.| < Tw + 2 dq. kappa is tabulated once on a fine grid (spacing dt_f / KAPPA_FINE; Gauss-Legendre over
        # psi's four cubic pieces, g read linearly from its cached fine table) and read with Catmull-Rom cubics:
        # the cost no longer grows with the band of entries (n_f x W quadratures), which matters for small proxies
        # (dq << dt_f). kappa is band-limited below 0.45 f_s, so the cubic reading errs by about
        # (2 pi 0.45 f_s delta)^4 / 16 < 1e-6 of its peak.
        span = Tw + 2.0 * dq
        delta = dt_f / KAPPA_FINE
        n_g = int(np.ceil(2.0 * span / delta)) + 4
        kap = _kappa_table(-span - delta, delta, n_g, dq, g0, dg, gv, gain, _GL_X, _GL_W)
        indptr, indices, vals = _band_csr(n_f, -2.0 * dq - Tw, dt_f, dq, n_coef, span, -span - delta, delta, kap)
        Kmat = scipy.sparse.csr_matrix((vals, indices, indptr), shape=(n_f, n_coef))
        nth, nph = fld.n_theta, fld.n_phi
        if needed is None:
            q = fld.q.astype(np.float64).reshape(-1, n_coef)   # (6 nth nph N, n_coef)
            tab = (Kmat @ q.T).T.reshape(N_FIELDS, nth, nph, fld.n_terms, n_f)
            tab = np.ascontiguousarray(with_poles(np.moveaxis(tab, 0, 2)))   # (nth + 2, nph, 6, N, n_f)
            env = np.abs(tab).reshape(-1, n_f).max(axis=0)
        else:
            tab, m0, cells = _needed_table(fld, Kmat, np.asarray(needed, bool), n_f, trim_rel)
            return cls(table=tab, dt_f=dt_f, tau_f0=tau_f0 + m0 * dt_f, h=fld.h, c=fld.c, rho=fld.rho,
                       R_b=fld.R_b, sample_rate=fs, oversample=U, cells=cells)
        keep = np.flatnonzero(env > trim_rel * env.max()) if env.max() > 0 else np.array([0])
        m0, m1 = int(keep[0]), int(keep[-1]) + 1
        return cls(table=np.ascontiguousarray(tab[..., m0:m1]), dt_f=dt_f, tau_f0=tau_f0 + m0 * dt_f, h=fld.h,
                   c=fld.c, rho=fld.rho, R_b=fld.R_b, sample_rate=fs, oversample=U)


#: Gauss-Legendre nodes and weights (8 per cubic piece of psi) of the filtered pulse
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


@njit(cache=True, nogil=True)
def _kappa_table(t0, delta, n, dq, g0, dg, gv, gain, gx, gw):
    """kappa(t0 + i delta) = (psi(.; dq) * g)(t) / gain, i < n: Gauss-Legendre over psi's four cubic pieces, g
    read linearly from its fine table (g0, dg, gv), zero outside it."""
    out = np.zeros(n)
    ng = gv.shape[0]
    for i in range(n):
        t = t0 + i * delta
        acc = 0.0
        for piece in range(4):
            lo = piece - 2.0
            for k in range(gx.shape[0]):
                u = lo + 0.5 + 0.5 * gx[k]                     # node in units of dq
                x = (t - u * dq - g0) / dg
                ix = int(np.floor(x))
                if ix < 0 or ix >= ng - 1:
                    continue
                f = x - ix
                acc += (gv[ix] * (1.0 - f) + gv[ix + 1] * f) * 0.5 * dq * gw[k] * psi_unit(u)
        out[i] = acc / gain
    return out


@njit(cache=True, nogil=True)
def _band_csr(n_f, t_rel0, dt_f, dq, n_coef, span, k0, kdelta, kap):
    """CSR arrays of Kmat[m, j] = kappa(t_rel0 + m dt_f - j dq) (kappa tabulated at k0 + i kdelta, read with
    Catmull-Rom cubics, zero outside |.| < span)."""
    W = int(np.ceil(2.0 * span / dq)) + 2
    indptr = np.zeros(n_f + 1, np.int64)
    indices = np.empty(n_f * W, np.int64)
    data = np.empty(n_f * W)
    nk = kap.shape[0]
    nnz = 0
    for m in range(n_f):
        tm = t_rel0 + m * dt_f
        jlo = int(np.floor((tm - span) / dq))
        for w in range(W):
            j = jlo + w
            if j < 0 or j >= n_coef:
                continue
            x = (tm - j * dq - k0) / kdelta
            i = int(np.floor(x))
            if i < 1 or i >= nk - 2:
                continue
            f = x - i
            p0, p1, p2, p3 = kap[i - 1], kap[i], kap[i + 1], kap[i + 2]
            indices[nnz] = j
            data[nnz] = p1 + 0.5 * f * (p2 - p0 + f * (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3
                                                       + f * (3.0 * (p1 - p2) + p3 - p0)))
            nnz += 1
        indptr[m + 1] = nnz
    return indptr, indices[:nnz], data[:nnz]


@functools.lru_cache(maxsize=16)
def _lowpass(fs: float, cutoff: float, half_width: int, beta: float):
    """The Kaiser-windowed sinc low-pass g (cut-off cutoff fs, half-length half_width / fs, Kaiser beta) on a
    grid of spacing 1/(1024 fs), and its gain: (t0, dt, g values, integral of g). Read linearly between nodes, g
    errs by (2 pi 0.45 / 1024)^2 / 8 = 9e-7 of its peak."""
    fc = cutoff * fs
    Tw = half_width / fs

    def g(t):
        x = np.clip(t / Tw, -1.0, 1.0)
        win = scipy.special.i0(beta * np.sqrt(1.0 - x * x)) / scipy.special.i0(beta)
        return np.where(np.abs(t) <= Tw, 2.0 * fc * np.sinc(2.0 * fc * t) * win, 0.0)

    tn = np.linspace(-Tw, Tw, 200001)
    gain = float(np.trapezoid(g(tn), tn))
    n = 1024 * half_width + 1
    dg = Tw / (1024 * half_width)
    return -n * dg, dg, g(dg * np.arange(-n, n + 1)), gain


def _needed_table(fld: PANField, Kmat, needed: np.ndarray, n_f: int, trim_rel: float):
    """The table of the cells ``needed`` of the pole-padded grid only, compact (one row per needed cell), trimmed
    in time like the full one (samples below trim_rel x the peak of the rows computed): (table (n_cells, 1, 6, N,
    n_t), first kept sample, cells (n_theta + 2, n_phi) -> row or -1)."""
    nth, nph, N = fld.n_theta, fld.n_phi, fld.n_terms
    if needed.shape != (nth + 2, nph):
        raise InputError(f"PAN table: needed must have shape {(nth + 2, nph)}, got {needed.shape}")
    grid = needed[1:nth + 1].copy()                            # grid cells read directly
    if needed[0].any():                                        # a pole needs the two rows next to it (with_poles)
        grid[:min(2, nth)] = True
    if needed[nth + 1].any():
        grid[max(nth - 2, 0):] = True
    a, b = np.nonzero(grid)
    r, c = np.nonzero(needed)
    cells = np.full((nth + 2, nph), -1, np.int64)
    cells[r, c] = np.arange(len(r))
    if len(a) == 0:
        return np.zeros((max(len(r), 1), 1, N_FIELDS, N, 1)), 0, cells
    q = np.moveaxis(fld.q[:, a, b], 0, 1).astype(np.float64).reshape(-1, fld.n_coef)   # (n_dir 6 N, n_coef)
    sub = (Kmat @ q.T).T
    env = np.abs(sub).max(axis=0)
    keep = np.flatnonzero(env > trim_rel * env.max()) if env.max() > 0 else np.array([0])
    m0, m1 = int(keep[0]), int(keep[-1]) + 1
    sub = sub[:, m0:m1].reshape(len(a), N_FIELDS, N, m1 - m0)
    row = np.full((nth, nph), -1, np.int64)
    row[a, b] = np.arange(len(a))
    tab = np.empty((len(r), 1, N_FIELDS, N, m1 - m0))
    inner = (r >= 1) & (r <= nth)
    tab[inner, 0] = sub[row[r[inner] - 1, c[inner]]]
    th0 = 0.5 * np.pi / nth
    for pole, first, second in ((0, 0, 1), (nth + 1, nth - 1, nth - 2)):
        at = r == pole
        if at.any():                                           # as field.with_poles
            m_0 = sub[row[first]].mean(axis=0)
            pv = m_0 - (sub[row[second]].mean(axis=0) - m_0) * th0**2 / ((3 * th0) ** 2 - th0**2) if nth >= 2 else m_0
            tab[at, 0] = pv
    return tab, m0, cells


# ---------------------------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, fastmath=True)
def _combine(comb, table, it, ip, w, amp, invR):
    """comb[m] = sum_{corner c, i, n} w_c amp_i R^{-(n+1)} table[it_c, ip_c, i, n, m] (module docstring); it, ip,
    w (4,): each corner's theta row, phi column and weight (field.py angle_weights)."""
    nf = comb.shape[0]
    N = table.shape[3]
    for m in range(nf):
        comb[m] = 0.0
    for c in range(4):
        a = it[c]
        b = ip[c]
        wc = w[c]
        if wc == 0.0:
            continue
        for i in range(6):
            ai = amp[i]
            if ai == 0.0:
                continue
            rk = invR
            for n in range(N):
                f = wc * ai * rk
                row = table[a, b, i, n]
                for m in range(nf):
                    comb[m] += f * row[m]
                rk *= invR


@njit(cache=True, nogil=True)
def _pan_chunk(e0, e1, out, n_off, table, t0, woff, wts, amp, delay, invR, it, ip, w, h, tau_f0, dt_f, fs, U):
    """Add the pulses of impulses e0..e1-1 (all listeners) into out (L, width), out[l, n - n_off]; impulse e's
    pulse weights c_k, k = FIRST_PULSE.., are wts[woff[e - e0]:woff[e - e0 + 1]] (pulse.py)."""
    L = out.shape[0]
    width = out.shape[1]
    nf = table.shape[4]
    # G_e on the table grid with P zeros either side: the reads below (table indices -U-3 .. nf+U+3) need no
    # bounds checks
    P = U + 4
    combp = np.zeros(nf + 2 * P)
    comb = combp[P:P + nf]
    for e in range(e0, e1):
        q0 = woff[e - e0]
        nk = woff[e - e0 + 1] - q0
        for l in range(L):
            _combine(comb, table, it[e, l], ip[e, l], w[e, l], amp[e], invR[e, l])
            base = delay[e, l] + tau_f0                        # absolute time of table sample 0 for k = 0
            o = out[l]
            for q in range(nk):
                ck = wts[q0 + q]
                if ck == 0.0:
                    continue
                tk = base + (q + FIRST_PULSE) * h
                # output sample n reads the table at x = (n / fs - tk) / dt_f = (n - nr) U + x0
                nlo = int(math.floor((tk - 2.0 * dt_f) * fs))
                nhi = int(math.ceil((tk + (nf + 1) * dt_f) * fs))
                x0 = (nlo / fs - tk) / dt_f                    # in (-2 - U, -2]
                i0 = int(math.floor(x0))
                f = x0 - i0
                f2 = f * f
                f3 = f2 * f
                cm1 = ck * 0.5 * (-f3 + 2.0 * f2 - f)          # c_k x Catmull-Rom weights of samples i-1..i+2
                c0 = ck * 0.5 * (3.0 * f3 - 5.0 * f2 + 2.0)
                c1 = ck * 0.5 * (-3.0 * f3 + 4.0 * f2 + f)
                c2 = ck * 0.5 * (f3 - f2)
                na = max(nlo, n_off)
                nb = min(nhi + 1, n_off + width)
                i = P + i0 + (na - nlo) * U                    # table index read by sample na
                for n in range(na - n_off, nb - n_off):
                    o[n] += cm1 * combp[i - 1] + c0 * combp[i] + c1 * combp[i + 1] + c2 * combp[i + 2]
                    i += U


def synthesize_pan(table: PANTable, t0, tau, amp, listeners_body, n_samples: int, *,
                   n_threads: int | None = None) -> np.ndarray:
    """Acceleration noise of impulses on one body at its listeners (module docstring).

    Parameters
    ----------
    table : PANTable
        The body's field at the output rate.
    t0 : array_like, shape (E,)
        Impulse start times [s] (sample 0 is t = 0).
    tau : array_like, shape (E,)
        Contact durations [s].
    amp : array_like, shape (E, 6)
        Peak accelerations (a_x, a_y, a_z [m/s^2], alpha_x, alpha_y, alpha_z [rad/s^2]) of eqs. 11-12, body frame.
    listeners_body : array_like, shape (E, L, 3)
        Listener positions in the body frame at each impulse [m].
    n_samples : int
        Output length, at ``table.sample_rate``.
    n_threads : int, optional
        Threads (default :func:`~impactsound.parallel.default_threads`); the result does not depend on it.

    Returns
    -------
    ndarray, shape (L, n_samples)
        Pressure [Pa].

    Raises
    ------
    InputError
        On mismatched shapes, a non-positive tau, non-finite inputs, or a listener inside the bounding sphere.
    """
    t0 = np.ascontiguousarray(t0, np.float64).reshape(-1)
    E = t0.shape[0]
    tau = np.ascontiguousarray(tau, np.float64).reshape(-1)
    amp = np.ascontiguousarray(amp, np.float64)
    xl = np.asarray(listeners_body, np.float64)
    if tau.shape != (E,) or amp.shape != (E, 6) or xl.ndim != 3 or xl.shape[0] != E or xl.shape[2] != 3:
        raise InputError(f"synthesize_pan: shapes t0 {t0.shape}, tau {tau.shape}, amp {amp.shape}, "
                         f"listeners_body {xl.shape} do not match (E,), (E,), (E, 6), (E, L, 3)")
    bad = ~(np.isfinite(tau) & (tau > 0))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise InputError(f"synthesize_pan: impulse {e} has contact duration tau = {tau[e]} s; it must be positive "
                         "and finite (check the event's vn, masses and materials)")
    for name, a in (("t0", t0), ("amp", amp), ("listeners_body", xl)):
        if not np.all(np.isfinite(a)):
            e = int(np.flatnonzero(~np.isfinite(a).reshape(E, -1).all(axis=1))[0])
            raise InputError(f"synthesize_pan: {name} of impulse {e} has NaN or infinite values")
    L = xl.shape[1]
    n_samples = int(n_samples)
    out = np.zeros((L, n_samples))
    if E == 0 or L == 0 or n_samples == 0:
        return out
    R, it, ip, w = angle_weights(xl, *table.grid)                          # the table has the pole rows
    tab, it, ip = table.read(it, ip)
    if np.any(R <= table.R_b):
        e, l = (int(v[0]) for v in np.nonzero(R <= table.R_b))
        raise InputError(f"synthesize_pan: listener {l} is {R[e, l]:.4g} m from the centre of mass at impulse {e} "
                         f"(t = {t0[e]} s), inside the bounding sphere R_b = {table.R_b:.4g} m where PAN fields "
                         "are not valid; move the listener further away")
    order = np.argsort(t0, kind="stable")
    t0, tau, amp = t0[order], tau[order], amp[order]
    R, it, ip, w = R[order], np.ascontiguousarray(it[order]), np.ascontiguousarray(ip[order]), \
        np.ascontiguousarray(w[order])
    invR = np.ascontiguousarray(1.0 / R)
    delay = np.ascontiguousarray(t0[:, None] + R / table.c)             # t0 + R/c
    fs = table.sample_rate
    nf = tab.shape[4]
    kmax = np.ceil(tau / table.h) + 1                                    # last weighted pulse (pulse.py)
    lo = np.floor((delay.min(axis=1) + table.tau_f0 + FIRST_PULSE * table.h - 2 * table.dt_f) * fs)
    hi = np.ceil((delay.max(axis=1) + table.tau_f0 + kmax * table.h + (nf + 1) * table.dt_f) * fs) + 1
    chunks = [(a, min(E, a + CHUNK)) for a in range(0, E, CHUNK)]

    def work(ab):
        a, b = ab
        n0 = int(np.clip(lo[a:b].min(), 0, n_samples))
        n1 = int(np.clip(hi[a:b].max(), 0, n_samples))
        part = np.zeros((L, max(n1 - n0, 0)))
        if n1 > n0:
            woff, wts = contact_weight_table(np.ascontiguousarray(tau[a:b] / table.h))
            _pan_chunk(a, b, part, n0, tab, t0, woff, wts, amp, delay, invR, it, ip, w, table.h, table.tau_f0,
                       table.dt_f, fs, table.oversample)
        return n0, part

    nt = min(n_threads or default_threads(), len(chunks))
    if nt <= 1:
        results = map(work, chunks)
        for n0, part in results:                                          # fixed summation order
            out[:, n0:n0 + part.shape[1]] += part
    else:
        with ThreadPoolExecutor(max_workers=nt) as ex:
            for n0, part in ex.map(work, chunks):                         # ex.map yields in chunk order
                out[:, n0:n0 + part.shape[1]] += part
    return out
