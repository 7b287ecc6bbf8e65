"""Compiled kernels of the grain-noise synthesis (synth.py): the row scan (checks, used materials, distinct radii),
the table nodes the rows read, and one chunk of rows rendered into its own partial buffer.

Each sphere of a collision, at each listener, adds one or more *streams*: the tabulated band-limited pulse of one
table node (radius node i, duration node j), scaled, delayed and read with linear interpolation on the table's
oversampled grid. The pulse start in output samples is split into floor(t0 fs) and a fraction before any delay
is added, so a collision moved by a whole number of samples moves its output by exactly that many samples. A
node's table is stored polyphase, (U + 1, 2, Nk): phase p, term (G1, G2), output-sample step k; U being an
integer, the interpolation phase of a stream is the same for all its output samples, so the inner loop reads four
contiguous rows (SIMD). Row preparation (contact, nodes) is recomputed here from the raw columns by the same
functions the node scan uses, so the nodes a row reads are exactly the nodes that were built.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .pulse import HERTZ_D

GRAIN = 0
CONTAINER = 1
#: bounds outside which a row is refused (codes below): pulse duration [s], radius [m]
D_RANGE = (1e-10, 0.1)
RADIUS_RANGE = (1e-7, 1.0)
#: reasons a row is refused (scan_rows / mark_nodes / render_chunk), by code
BAD_T, BAD_POINT, BAD_NORMAL, BAD_V0, BAD_RADIUS_A, BAD_RADIUS_B, BAD_MATERIAL, BAD_CONTAINER, BAD_KIND, \
    BAD_D = range(1, 11)


@njit(cache=True, nogil=True)
def _pair(ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, wall):
    """m_a, 1/m_b, m_eff, r_eff, E* of a Hertz contact (a flat heavy wall when ``wall``: 1/m_b = 1/r_b = 0)."""
    m_a = 4.0 / 3.0 * math.pi * ra * ra * ra * rho_a
    if wall:
        inv_mb = 0.0
        inv_rb = 0.0
    else:
        inv_mb = 1.0 / (4.0 / 3.0 * math.pi * rb * rb * rb * rho_b)
        inv_rb = 1.0 / rb
    E_star = 1.0 / ((1.0 - nu_a * nu_a) / E_a + (1.0 - nu_b * nu_b) / E_b)
    return m_a, inv_mb, 1.0 / (1.0 / m_a + inv_mb), 1.0 / (1.0 / ra + inv_rb), E_star


@njit(cache=True, nogil=True)
def duration(v0, ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, wall):
    """Hertz contact duration d = 2.87 (m_eff^2 / (r_eff E*^2 v0))^(1/5) [s] (pulse.py)."""
    _, _, m_eff, r_eff, E_star = _pair(ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, wall)
    return HERTZ_D * (m_eff * m_eff / (r_eff * E_star * E_star * v0)) ** 0.2


@njit(cache=True, nogil=True)
def contact(v0, ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, wall, impulse):
    """Hertz contact (pulse.py's formulas; a flat heavy wall when ``wall``: m_eff = m_a, r_eff = a): duration d
    [s] and each sphere's acceleration integral 2 a_m d / pi [m/s] ("peak" scaling, or the elastic Delta-v
    2 v0 m_eff / m_i when ``impulse``)."""
    m_a, inv_mb, m_eff, r_eff, E_star = _pair(ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, wall)
    d = HERTZ_D * (m_eff * m_eff / (r_eff * E_star * E_star * v0)) ** 0.2
    if impulse:
        dv = 2.0 * v0 * m_eff
        return d, dv / m_a, dv * inv_mb
    K = 4.0 / 3.0 * E_star * math.sqrt(r_eff)
    F = K * (5.0 * m_eff * v0 * v0 / (4.0 * K)) ** 0.6
    return d, 2.0 / math.pi * F / m_a * d, 2.0 / math.pi * F * inv_mb * d


@njit(cache=True, nogil=True)
def log_node(x, per_decade, g0):
    """Lower node index (relative to global node g0) and the upper node's weight of x on the grid
    10^(g/per_decade)."""
    u = math.log10(x) * per_decade
    g = math.floor(u)
    return int(g) - g0, u - g


@njit(cache=True, nogil=True)
def radius_node(a, radii, per_decade, g0):
    """(node, weight of the next node): the index of a among the exact radii (weight 0), or the log grid."""
    if radii.shape[0] > 0:
        lo, hi = 0, radii.shape[0] - 1
        while lo < hi:                                   # a is one of them (scan_rows collected them)
            mid = (lo + hi) // 2
            if radii[mid] < a:
                lo = mid + 1
            else:
                hi = mid
        return lo, 0.0
    return log_node(a, per_decade, g0)


@njit(cache=True, nogil=True)
def _row_kept(e, kind, v0, v_min, containers):
    k = kind[e]
    return (k == GRAIN or (containers and k == CONTAINER)) and v0[e] >= v_min


@njit(cache=True, nogil=True)
def scan_rows(t, point, normal, v0, kind, id_b, radius_a, radius_b, material_a, material_b, n_mat, n_cont,
              containers, v_min, max_radii):
    """Check the rows a render reads and collect what it needs.

    Returns
    -------
    bad_row, bad_code : int
        First refused row and why (codes above), or -1, 0.
    used_mat, used_cont : bool arrays
        Material indices (0..32767) and containers (n_cont) the kept rows use.
    n_kept : int
    sorted_t : bool
        Whether the kept rows are sorted by t.
    radii : (k,) array
        The sorted distinct radii of the kept rows if there are at most max_radii, else empty.
    """
    used_mat = np.zeros(32768, np.bool_)
    used_cont = np.zeros(max(n_cont, 1), np.bool_)
    radii = np.empty(max_radii + 1)
    n_r = 0
    n_kept = 0
    sorted_t = True
    t_last = -np.inf
    for e in range(t.shape[0]):
        k = kind[e]
        if k != GRAIN and k != CONTAINER:
            return e, BAD_KIND, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        if not math.isfinite(v0[e]):
            return e, BAD_V0, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        if not _row_kept(e, kind, v0, v_min, containers):
            continue
        if not v0[e] > 0.0:
            return e, BAD_V0, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        if not (math.isfinite(t[e]) and t[e] >= 0.0):
            return e, BAD_T, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        nn = 0.0
        for q in range(3):
            if not math.isfinite(point[e, q]):
                return e, BAD_POINT, used_mat, used_cont, n_kept, sorted_t, radii[:0]
            nn += normal[e, q] * normal[e, q]
        if not abs(math.sqrt(nn) - 1.0) <= 1e-6:
            return e, BAD_NORMAL, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        ra = radius_a[e]
        if not (RADIUS_RANGE[0] <= ra <= RADIUS_RANGE[1]):
            return e, BAD_RADIUS_A, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        ma = material_a[e]
        if ma < 0 or (n_mat > 0 and ma >= n_mat):
            return e, BAD_MATERIAL, used_mat, used_cont, n_kept, sorted_t, radii[:0]
        used_mat[ma] = True
        if k == GRAIN:
            rb = radius_b[e]
            if not (RADIUS_RANGE[0] <= rb <= RADIUS_RANGE[1]):
                return e, BAD_RADIUS_B, used_mat, used_cont, n_kept, sorted_t, radii[:0]
            mb = material_b[e]
            if mb < 0 or (n_mat > 0 and mb >= n_mat):
                return e, BAD_MATERIAL, used_mat, used_cont, n_kept, sorted_t, radii[:0]
            used_mat[mb] = True
        else:
            rb = ra
            cb = id_b[e]
            if cb < 0 or cb >= n_cont:
                return e, BAD_CONTAINER, used_mat, used_cont, n_kept, sorted_t, radii[:0]
            used_cont[cb] = True
        if t[e] < t_last:
            sorted_t = False
        t_last = t[e]
        n_kept += 1
        for r in (ra, rb):                              # distinct radii, while there are few
            if n_r <= max_radii:
                found = False
                for q in range(n_r):
                    if radii[q] == r:
                        found = True
                        break
                if not found:
                    radii[n_r] = r
                    n_r += 1
    if n_r > max_radii:
        return -1, 0, used_mat, used_cont, n_kept, sorted_t, radii[:0]
    return -1, 0, used_mat, used_cont, n_kept, sorted_t, np.sort(radii[:n_r])


@njit(cache=True, nogil=True)
def mark_nodes(e0, e1, v0, kind, id_b, radius_a, radius_b, material_a, material_b, containers, v_min, mat, cont,
               impulse, radii, R, i0, B, j0, need):
    """Set need[i, j] for every table node (radius node i, duration node j; relative to i0, j0) that a kept row
    of e0..e1-1 reads. Returns the first row whose contact duration lies outside D_RANGE, else -1. (``impulse``
    is unused, d does not depend on the scaling: the argument list is render_chunk's.)"""
    n_an = 1 if radii.shape[0] > 0 else 2
    for e in range(e0, e1):
        if not _row_kept(e, kind, v0, v_min, containers):
            continue
        wall = kind[e] != GRAIN
        ma = material_a[e]
        if wall:
            cb = id_b[e]
            d = duration(v0[e], radius_a[e], radius_a[e], mat[ma, 2], 1.0, mat[ma, 0], mat[ma, 1], cont[cb, 0],
                         cont[cb, 1], True)
        else:
            mb = material_b[e]
            d = duration(v0[e], radius_a[e], radius_b[e], mat[ma, 2], mat[mb, 2], mat[ma, 0], mat[ma, 1],
                         mat[mb, 0], mat[mb, 1], False)
        if not (D_RANGE[0] <= d <= D_RANGE[1]):
            return e
        jd, _ = log_node(d, B, j0)
        for side in range(2):
            if side == 1 and wall:
                break
            a = radius_a[e] if side == 0 else radius_b[e]
            ri, _ = radius_node(a, radii, R, i0)
            for di in range(n_an):
                need[ri + di, jd] = True
                need[ri + di, jd + 1] = True
    return -1


@njit(cache=True, nogil=True)
def render_chunk(e0, e1, t, point, normal, v0, kind, id_b, radius_a, radius_b, material_a, material_b, containers,
                 v_min, mat, cont, impulse, radii, R, i0, B, j0, a_node, d_node, node_off, node_len, tab, listeners,
                 fs, U, c, rho, tau0, n_samples):
    """Render rows e0..e1-1 (module docstring).

    Parameters
    ----------
    t, point, normal, v0, kind, id_b, radius_a, radius_b, material_a, material_b
        The event table's columns.
    containers : bool
        Whether container hits are rendered (grain A alone).
    mat : (n, 3)
        E [Pa], nu, rho [kg/m^3] per material index; cont (n, 2): E, nu per container.
    impulse : bool
        "impulse" scaling (else "peak").
    radii, R, i0 : exact radii (empty: log grid of R per decade from node i0)
    B, j0 : duration nodes per decade and the first node
    a_node, d_node : node radii [m] and durations [s] (local indices)
    node_off, node_len : (n_r, n_d) int64
        Offset of a node's table in ``tab`` and its length Nk.
    tab : flat float64
        Element (p, term, k) of a node at node_off + (2 p + term) Nk + k.
    listeners : (L, 3)
    fs, U, c, rho, tau0 : sample rate [Hz], oversampling, air [m/s], [kg/m^3], table start [s]
    n_samples : int

    Returns
    -------
    n0 : int
        First output sample of ``part``.
    part : (L, n1 - n0)
        This chunk's pressure [Pa].
    bad_e, bad_l : int
        First (row, listener) with the listener inside a grain, else -1.
    missing : int
        A row that needed a table node not built (an internal error), else -1.
    """
    L = listeners.shape[0]
    n_an = 1 if radii.shape[0] > 0 else 2
    cap = (e1 - e0) * L * 2 * n_an * 2
    s_start = np.empty(cap, np.int64)
    s_off = np.empty(cap, np.int64)
    s_len = np.empty(cap, np.int64)
    s_l = np.empty(cap, np.int64)
    s_c = np.empty((cap, 4))
    ns = 0
    bad_e = -1
    bad_l = -1
    missing = -1
    lo = n_samples
    hi = 0
    for e in range(e0, e1):
        if not _row_kept(e, kind, v0, v_min, containers):
            continue
        wall = kind[e] != GRAIN
        ma = material_a[e]
        if wall:
            cb = id_b[e]
            d, imp_a, imp_b = contact(v0[e], radius_a[e], radius_a[e], mat[ma, 2], 1.0, mat[ma, 0], mat[ma, 1],
                                      cont[cb, 0], cont[cb, 1], True, impulse)
        else:
            mb = material_b[e]
            d, imp_a, imp_b = contact(v0[e], radius_a[e], radius_b[e], mat[ma, 2], mat[mb, 2], mat[ma, 0],
                                      mat[ma, 1], mat[mb, 0], mat[mb, 1], False, impulse)
        jd, wd = log_node(d, B, j0)
        tfs = t[e] * fs
        base = math.floor(tfs)
        frac = tfs - base
        for side in range(2):
            if side == 1 and wall:
                break
            if side == 0:
                a, imp, sgn = radius_a[e], imp_a, 1.0
            else:
                a, imp, sgn = radius_b[e], imp_b, -1.0
            ri0, wa = radius_node(a, radii, R, i0)
            # centre x + a n (grain A) or x - a n (grain B); both angles from +n, grain B subtracted
            cx = point[e, 0] + sgn * a * normal[e, 0]
            cy = point[e, 1] + sgn * a * normal[e, 1]
            cz = point[e, 2] + sgn * a * normal[e, 2]
            for l in range(L):
                vx = listeners[l, 0] - cx
                vy = listeners[l, 1] - cy
                vz = listeners[l, 2] - cz
                r = math.sqrt(vx * vx + vy * vy + vz * vz)
                if not r >= a:
                    if bad_e < 0:
                        bad_e = e
                        bad_l = l
                    continue
                cos_t = (normal[e, 0] * vx + normal[e, 1] * vy + normal[e, 2] * vz) / r
                # p = rho I cos a^3 (c/r) [G1 + G2/r], G normalised per unit impulse and per a^2 (G1), a (G2)
                s1 = sgn * rho * imp * cos_t * a * a * a * c / r
                for ii in range(n_an):
                    w_a = (1.0 - wa) if ii == 0 else wa
                    if w_a == 0.0:
                        continue
                    ri = ri0 + ii
                    for jj in range(2):
                        w_d = (1.0 - wd) if jj == 0 else wd
                        if w_d == 0.0:
                            continue
                        dj = jd + jj
                        nk = node_len[ri, dj]
                        if nk == 0:                  # a node mark_nodes did not see: never, but never silent
                            missing = e
                            continue
                        # align the half-sine's centroid (d/2) and the sphere's response delay (a/c) with the
                        # node's: the interpolation between nodes is then second order
                        shift = 0.5 * (d - d_node[dj]) + (a - a_node[ri]) / c
                        rest = frac + ((r - a) / c + shift + tau0) * fs
                        nf = math.ceil(rest)
                        x0 = (nf - rest) * U
                        p = int(math.floor(x0))
                        f = x0 - p
                        if p >= U:
                            p = U - 1
                            f = 1.0
                        start = int(base) + int(nf)
                        if start >= n_samples or start + nk <= 0:
                            continue
                        w = w_a * w_d * s1
                        s_start[ns] = start
                        s_off[ns] = node_off[ri, dj] + 2 * p * nk
                        s_len[ns] = nk
                        s_l[ns] = l
                        s_c[ns, 0] = (1.0 - f) * w
                        s_c[ns, 1] = (1.0 - f) * w / r
                        s_c[ns, 2] = f * w
                        s_c[ns, 3] = f * w / r
                        ns += 1
                        lo = min(lo, max(start, 0))
                        hi = max(hi, min(start + nk, n_samples))
    if ns == 0 or hi <= lo:
        return 0, np.zeros((L, 0)), bad_e, bad_l, missing
    part = np.zeros((L, hi - lo))
    for s in range(ns):
        start = s_start[s]
        nk = s_len[s]
        o = s_off[s]
        c0, c1, c2, c3 = s_c[s, 0], s_c[s, 1], s_c[s, 2], s_c[s, 3]
        k0 = max(0, lo - start)
        k1 = min(nk, hi - start)
        # contiguous 1-D views: the loop vectorises (3.5x faster than indexing the 2-D arrays)
        g1p = tab[o + k0:o + k1]
        g2p = tab[o + nk + k0:o + nk + k1]
        g1q = tab[o + 2 * nk + k0:o + 2 * nk + k1]
        g2q = tab[o + 3 * nk + k0:o + 3 * nk + k1]
        row = part[s_l[s], start - lo + k0:start - lo + k1]
        for k in range(k1 - k0):
            row[k] += (c0 * g1p[k] + c1 * g2p[k]) + (c2 * g1q[k] + c3 * g2q[k])
    return lo, part, bad_e, bad_l, missing


@njit(cache=True, nogil=True)
def band_limit(hf, h_center, h_rate, tau, s, w1, w2, g):
    """g[m, k] += sum_q h(tau_m - s_q) w_k[q]: the low-pass applied to a pulse given at quadrature nodes s_q
    (weights folded into w1, w2). h is read linearly from its fine table hf (h_rate points per second, h(0) at
    index h_center) and is zero beyond it."""
    n = hf.shape[0]
    for q in range(s.shape[0]):
        for m in range(tau.shape[0]):
            x = h_center + (tau[m] - s[q]) * h_rate
            if x < 0.0 or x >= n - 1:
                continue
            i = int(x)
            f = x - i
            v = hf[i] + f * (hf[i + 1] - hf[i])
            g[m, 0] += v * w1[q]
            g[m, 1] += v * w2[q]
