"""Compiled core of the event-driven hard-sphere simulator (:mod:`.simulate`); SI units throughout.

Standard event-driven molecular dynamics (Alder & Wainwright 1959; Lubachevsky 1991; the DynamO code the thesis
used, M. Marko, "Sound simulation of granular materials", sec. 6.1 and App. B.2), written for grains under gravity:

* Each grain keeps a *delayed state* (position, velocity, the time they refer to): between events it flies on a
  parabola, x(t) = x + v (t - t_i) + g (t - t_i)^2 / 2, and is brought up to date only when an event involves it.
* Each grain holds only its *earliest* predicted event (a collision or leaving its cell). A complete binary
  tournament tree over the grains gives the global earliest in O(1) and updates in O(log N).
* Stale events are recognised by per-grain collision counters: an event with grain j stores j's counter at
  prediction time; if j collided since, the event is dropped and the grain re-predicts ("invalid pop").
* Cell lists (edge >= the largest contact distance) limit the partners to the 27 neighbouring cells. On every
  cell change the grain re-predicts everything, so all predictions may stop at the next cell crossing (the
  horizon): that bounds the root searches for the curved static surfaces.
* Static things (walls, static spheres) are registered in every cell a grain centre could be in while touching
  them, so a grain only checks the items listed in its own cell.
* Grains at rest (frozen) are static spheres for the others; they never predict events. When a grain freezes,
  its moving neighbours are told (their held event is replaced when the new static obstacle is hit earlier).
* Dormant grains (not yet released, for a pour at a given rate) enter at their release time; an entry point still
  occupied by another grain postpones the release.

Exact contact times: a grain pair under common gravity moves linearly relative to each other (a quadratic in
time); a grain against a static sphere, a cone, a cylinder under tilted gravity or an edge ring gives a polynomial
of degree 4 to 8, whose first entering root is found without missing any: the roots of each derivative bracket
monotonic pieces of the one below (down from the linear one), each piece solved by safeguarded Newton-bisection.

Contact function convention: f(tau) > 0 while apart; an *entry* is a point where f reaches 0 while decreasing (or
f <= 0 at the start of a decreasing piece: touching within round-off and approaching), and that is the event. Thin
two-sided walls (disk, tube, cone) are searched on both faces: the grain's own side, and the far side for proper
crossings only (a grain reaching it round an edge within one horizon).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

INF = math.inf

# grain status
DORMANT, MOVING, FROZEN = 0, 1, 2
# held event types
EV_NONE, EV_GRAIN, EV_SPHERE, EV_PRIM, EV_RELEASE, EV_INIT = 0, 1, 2, 3, 4, 5
# static primitive types (parameters in the rows of ``pprm``)
P_PLANE, P_DISK, P_CYL, P_CONE, P_RING = 0, 1, 2, 3, 4
# integer statistics (``stats``)
ST_POPS, ST_COLL, ST_LOGGED, ST_INVALID, ST_CROSS, ST_FROZEN, ST_RELEASED, ST_POSTPONED, ST_SNAP = range(9)
N_STATS = 9
# float statistics (``fstats``)
FS_TIME, FS_MAXOVL = 0, 1
N_FSTATS = 2
# float parameters (``prm``)
PR_VEL, PR_VREST, PR_COSREST, PR_REST_ON, PR_DEBUG = range(5)
N_PRM = 5

_BIG = 1e150                       # stands for the unbounded side of a border cell in geometric tests


# rows of the scratch array W (shape (W_ROWS, 12)): derivative table, bracketing points, roots, coefficients
R_PA, R_PB, R_ROOT, R_C, R_RHO2, R_S, R_KIND = 9, 10, 11, 12, 13, 14, 15
W_ROWS = 16
# Hot functions take scalars and whole arrays with indices, never array views: every view costs Numba two atomic
# reference-count updates, which were a third of the run time.


# --------------------------------------------------------------------------------------------- root finding
@njit(cache=True, nogil=True)
def entry2(c0, c1, c2, T):
    """First entry of f(tau) = c0 + c1 tau + c2 tau^2 in [0, T] (module docstring), or inf."""
    if c0 <= 0.0:
        if c1 < 0.0:
            return 0.0
        if c2 >= 0.0:
            return INF
        tm = -c1 / (2.0 * c2)                       # the top of the arc
        fm = c0 - c1 * c1 / (4.0 * c2)
        if fm <= 0.0:                               # never clear of contact: touching at the top, then approaching
            return tm if tm <= T else INF
        disc = c1 * c1 - 4.0 * c0 * c2
        q = -0.5 * (c1 + math.sqrt(disc))
        r1 = q / c2
        r2 = c0 / q if q != 0.0 else 0.0
        r = r1 if r1 > r2 else r2                   # the second crossing (down)
        return r if r <= T else INF
    if c2 == 0.0:
        if c1 < 0.0:
            r = -c0 / c1
            return r if r <= T else INF
        return INF
    disc = c1 * c1 - 4.0 * c0 * c2
    if disc < 0.0:
        return INF
    sq = math.sqrt(disc)
    if c2 > 0.0:
        if c1 >= 0.0:
            return INF
        r = c0 / (0.5 * (-c1 + sq))                 # the smaller root, cancellation-free
    else:
        if c1 >= 0.0:
            r = (-0.5 * (c1 + sq)) / c2
        else:
            r = c0 / (0.5 * (-c1 + sq))
    return r if r <= T else INF


@njit(cache=True, nogil=True)
def entry2_proper(c0, c1, c2, T):
    """Like :func:`entry2`, but only a proper crossing (f > 0 before it), never a touch within round-off: for the
    far face of a thin wall, which a grain can only reach by going round an edge."""
    if c0 > 0.0:
        return entry2(c0, c1, c2, T)
    if c2 < 0.0 < c1 and c0 - c1 * c1 / (4.0 * c2) > 0.0:
        return entry2(c0, c1, c2, T)                # rises above 0, then comes down: the second crossing
    return INF


@njit(cache=True, nogil=True)
def _peval(W, k, deg, x):
    s = W[k, deg]
    for j in range(deg - 1, -1, -1):
        s = s * x + W[k, j]
    return s


@njit(cache=True, nogil=True)
def _solve_mono(W, k, deg, a, b, fa):
    """The sign change of the k-th derivative polynomial (row k of W, degree deg, monotonic on [a, b], fa = its
    value at a): safeguarded Newton-bisection to round-off."""
    x = 0.5 * (a + b)
    for _ in range(200):
        f = _peval(W, k, deg, x)
        if f == 0.0:
            return x
        if (f > 0.0) == (fa > 0.0):
            a = x
        else:
            b = x
        df = _peval(W, k + 1, deg - 1, x)
        xn = x - f / df if df != 0.0 else 0.5 * (a + b)
        if not (a < xn < b):
            xn = 0.5 * (a + b)
        if abs(xn - x) <= 2.5e-16 * abs(x) or b - a <= 2.5e-16 * abs(b):
            return xn
        x = xn
    return x


@njit(cache=True, nogil=True)
def entry_roots(W, n, T):
    """All entries in [0, T] (T finite) of the polynomial with coefficients W[R_C, 0..n] (degree <= 8, ascending
    powers), ascending, into W[R_ROOT]; returns their number. W[R_KIND] tells a proper crossing (1: f falls from
    > 0 to 0) from a touch within round-off (0: f <= 0 where it starts to fall). Rows 0..n of W receive the
    derivatives."""
    while n > 0 and W[R_C, n] == 0.0:
        n -= 1
    if n == 0:
        return 0
    for j in range(n + 1):
        W[0, j] = W[R_C, j]
    for k in range(1, n + 1):
        for j in range(n - k + 1):
            W[k, j] = W[k - 1, j + 1] * (j + 1)
    npt = 2
    W[R_PA, 0] = 0.0
    W[R_PA, 1] = T
    # the roots of derivative k are bracketed by those of derivative k + 1 (where derivative k is monotonic)
    for k in range(n - 1, 0, -1):
        deg = n - k
        m = 1
        W[R_PB, 0] = 0.0
        fa = _peval(W, k, deg, W[R_PA, 0])
        for s in range(npt - 1):
            fb = _peval(W, k, deg, W[R_PA, s + 1])
            if (fa < 0.0 < fb) or (fa > 0.0 > fb):
                W[R_PB, m] = _solve_mono(W, k, deg, W[R_PA, s], W[R_PA, s + 1], fa)
                m += 1
            fa = fb
        W[R_PB, m] = T
        m += 1
        for s in range(m):
            W[R_PA, s] = W[R_PB, s]
        npt = m
    cnt = 0
    fa = _peval(W, 0, n, W[R_PA, 0])
    for s in range(npt - 1):
        fb = _peval(W, 0, n, W[R_PA, s + 1])
        if fb < fa:                                 # a decreasing piece
            if fa > 0.0:
                if fb <= 0.0:
                    W[R_ROOT, cnt] = (W[R_PA, s + 1] if fb == 0.0
                                      else _solve_mono(W, 0, n, W[R_PA, s], W[R_PA, s + 1], fa))
                    W[R_KIND, cnt] = 1.0
                    cnt += 1
            else:
                W[R_ROOT, cnt] = W[R_PA, s]
                W[R_KIND, cnt] = 0.0
                cnt += 1
        fa = fb
    return cnt


@njit(cache=True, nogil=True)
def _rho2_poly(hx, hy, vx, vy, gx, gy, W):
    """Coefficients of |h + v tau + g tau^2/2|^2 (horizontal) into W[R_RHO2, 0..4]."""
    ax, ay = 0.5 * gx, 0.5 * gy
    W[R_RHO2, 0] = hx * hx + hy * hy
    W[R_RHO2, 1] = 2.0 * (hx * vx + hy * vy)
    W[R_RHO2, 2] = vx * vx + vy * vy + 2.0 * (hx * ax + hy * ay)
    W[R_RHO2, 3] = 2.0 * (vx * ax + vy * ay)
    W[R_RHO2, 4] = ax * ax + ay * ay


@njit(cache=True, nogil=True)
def _reach(vx, vy, vz, gx, gy, gz, T):
    """An upper bound of the distance a grain with velocity v under gravity g can travel within T."""
    if T == INF:
        return INF
    return math.sqrt(vx * vx + vy * vy + vz * vz) * T + 0.5 * math.sqrt(gx * gx + gy * gy + gz * gz) * T * T


@njit(cache=True, nogil=True)
def seg_dist(rho, z, r0, z0, r1, z1):
    """Distance in a meridian half-plane from (rho, z) to the segment (r0, z0)-(r1, z1): the exact distance to the
    surface of revolution it generates."""
    dr, dz = r1 - r0, z1 - z0
    L2 = dr * dr + dz * dz
    s = 0.0
    if L2 > 0.0:
        s = ((rho - r0) * dr + (z - z0) * dz) / L2
        s = min(1.0, max(0.0, s))
    er, ez = rho - (r0 + s * dr), z - (z0 + s * dz)
    return math.sqrt(er * er + ez * ez)


# ------------------------------------------------------------------------------------- static primitives
@njit(cache=True, nogil=True)
def prim_distance(pt, Q, q, px, py, pz):
    """Gap between the point p and primitive q (parameters Q[q]): the distance to the surface (signed for a plane,
    positive on its free side)."""
    if pt == P_PLANE:
        return (px - Q[q, 0]) * Q[q, 3] + (py - Q[q, 1]) * Q[q, 4] + (pz - Q[q, 2]) * Q[q, 5]
    rho = math.hypot(px - Q[q, 0], py - Q[q, 1])
    if pt == P_DISK:
        return seg_dist(rho, pz, 0.0, Q[q, 2], Q[q, 3], Q[q, 2])
    if pt == P_CYL:
        return seg_dist(rho, pz, Q[q, 2], Q[q, 3], Q[q, 2], Q[q, 4])
    if pt == P_CONE:
        return seg_dist(rho, pz, Q[q, 8], Q[q, 6], Q[q, 9], Q[q, 7])
    return seg_dist(rho, pz, Q[q, 3], Q[q, 2], Q[q, 3], Q[q, 2])     # ring


@njit(cache=True, nogil=True)
def prim_contact(pt, Q, q, px, py, pz, a):
    """Contact point on primitive q and unit normal (from the surface into the grain) for a grain centred at p,
    radius a, touching it: (point x, y, z, normal x, y, z)."""
    if pt == P_PLANE:
        nx, ny, nz = Q[q, 3], Q[q, 4], Q[q, 5]
        return px - a * nx, py - a * ny, pz - a * nz, nx, ny, nz
    ux, uy = px - Q[q, 0], py - Q[q, 1]
    rho = math.hypot(ux, uy)
    if rho > 0.0:
        ux, uy = ux / rho, uy / rho
    else:
        ux, uy = 1.0, 0.0
    if pt == P_DISK:
        s = 1.0 if pz >= Q[q, 2] else -1.0
        return px, py, Q[q, 2], 0.0, 0.0, s
    if pt == P_CYL:
        R = Q[q, 2]
        s = -1.0 if rho < R else 1.0
        return Q[q, 0] + R * ux, Q[q, 1] + R * uy, pz, s * ux, s * uy, 0.0
    if pt == P_CONE:
        za, sn, cs = Q[q, 2], Q[q, 4], Q[q, 5]
        if (pz - za) * sn - rho * cs > 0.0:         # inside
            nx, ny, nz = -cs * ux, -cs * uy, sn
        else:
            nx, ny, nz = cs * ux, cs * uy, -sn
        return px - a * nx, py - a * ny, pz - a * nz, nx, ny, nz
    R = Q[q, 3]                                     # ring
    qx, qy, qz = Q[q, 0] + R * ux, Q[q, 1] + R * uy, Q[q, 2]
    nx, ny, nz = px - qx, py - qy, pz - qz
    nn = math.sqrt(nx * nx + ny * ny + nz * nz)
    if nn == 0.0:
        return qx, qy, qz, 0.0, 0.0, 1.0
    return qx, qy, qz, nx / nn, ny / nn, nz / nn


@njit(cache=True, nogil=True)
def prim_time(pt, Q, q, px, py, pz, vx, vy, vz, gx, gy, gz, a, T, W):
    """Time from now until a grain (centre p, velocity v, radius a, gravity g) hits primitive q, within the
    horizon T (inf: none)."""
    if pt == P_PLANE:
        nx, ny, nz = Q[q, 3], Q[q, 4], Q[q, 5]
        return entry2((px - Q[q, 0]) * nx + (py - Q[q, 1]) * ny + (pz - Q[q, 2]) * nz - a,
                      vx * nx + vy * ny + vz * nz, 0.5 * (gx * nx + gy * ny + gz * nz), T)
    if T == INF or prim_distance(pt, Q, q, px, py, pz) - a > _reach(vx, vy, vz, gx, gy, gz, T):
        return INF                                  # out of reach (curved walls always get a finite horizon)
    hx, hy = px - Q[q, 0], py - Q[q, 1]             # from the axis
    # Thin shells have two faces: the grain's own side (any entry, touches within round-off included) and the far
    # side (proper crossings only: reached round an edge, between two rescans)
    if pt == P_DISK:
        # the same quadratic as a plane at that height, so that a cup standing on a floor wins the tie (its
        # items are listed before planes in each cell)
        best = INF
        for side in range(2):
            s = 1.0 if (pz >= Q[q, 2]) == (side == 0) else -1.0
            if side == 0:
                tau = entry2(s * (pz - Q[q, 2]) - a, s * vz, s * 0.5 * gz, T)
            else:
                tau = entry2_proper(s * (pz - Q[q, 2]) - a, s * vz, s * 0.5 * gz, T)
            if tau < best:
                x = hx + (vx + 0.5 * gx * tau) * tau
                y = hy + (vy + 0.5 * gy * tau) * tau
                if x * x + y * y <= Q[q, 3] * Q[q, 3]:
                    best = tau
        return best
    _rho2_poly(hx, hy, vx, vy, gx, gy, W)
    best = INF
    if pt == P_CYL:
        R = Q[q, 2]
        inside = math.hypot(hx, hy) < R
        for side in range(2):
            for k in range(12):
                W[R_C, k] = 0.0
            if inside == (side == 0):               # the inner face: apart while rho < R - a
                if R <= a:
                    continue
                for j in range(5):
                    W[R_C, j] = -W[R_RHO2, j]
                W[R_C, 0] += (R - a) * (R - a)
            else:
                for j in range(5):
                    W[R_C, j] = W[R_RHO2, j]
                W[R_C, 0] -= (R + a) * (R + a)
            n = entry_roots(W, 4, min(T, best))
            for r in range(n):
                if side == 1 and W[R_KIND, r] == 0.0:
                    continue
                tau = W[R_ROOT, r]
                z = pz + (vz + 0.5 * gz * tau) * tau
                if Q[q, 3] <= z <= Q[q, 4] and tau < best:    # the contact lies on the tube, not its extension
                    best = tau
                    break
        return best
    if pt == P_CONE:
        za, tn, sn, cs = Q[q, 2], Q[q, 3], Q[q, 4], Q[q, 5]
        t2 = tn * tn
        here = (pz - za) * sn - math.hypot(hx, hy) * cs > 0.0
        for side in range(2):
            inside = here == (side == 0)
            zs = za + a / sn if inside else za - a / sn     # apex of the cone the centre slides on
            w0, w1, w2 = pz - zs, vz, 0.5 * gz
            sgn = 1.0 if inside else -1.0
            for k in range(12):
                W[R_C, k] = 0.0
            W[R_C, 0] = sgn * (t2 * w0 * w0 - W[R_RHO2, 0])
            W[R_C, 1] = sgn * (t2 * 2.0 * w0 * w1 - W[R_RHO2, 1])
            W[R_C, 2] = sgn * (t2 * (w1 * w1 + 2.0 * w0 * w2) - W[R_RHO2, 2])
            W[R_C, 3] = sgn * (t2 * 2.0 * w1 * w2 - W[R_RHO2, 3])
            W[R_C, 4] = sgn * (t2 * w2 * w2 - W[R_RHO2, 4])
            n = entry_roots(W, 4, min(T, best))
            for r in range(n):
                if side == 1 and W[R_KIND, r] == 0.0:
                    continue
                tau = W[R_ROOT, r]
                if w0 + (w1 + w2 * tau) * tau <= 0.0:
                    continue                        # the lower nappe of the double cone
                x = hx + (vx + 0.5 * gx * tau) * tau
                y = hy + (vy + 0.5 * gy * tau) * tau
                rc = math.hypot(x, y) + (a * cs if inside else -a * cs)
                if Q[q, 8] <= rc <= Q[q, 9] and tau < best:     # the contact lies on the frustum
                    best = tau
                    break
        return best
    for k in range(12):
        W[R_C, k] = 0.0
    # ring of radius R at height z0: ((rho - R)^2 + dz^2 - a^2) ((rho + R)^2 + dz^2 - a^2)
    #   = (rho^2 + dz^2 + R^2 - a^2)^2 - 4 R^2 rho^2, degree 8
    R = Q[q, 3]
    e0, e1, e2 = pz - Q[q, 2], vz, 0.5 * gz
    W[R_S, 0] = W[R_RHO2, 0] + e0 * e0 + R * R - a * a
    W[R_S, 1] = W[R_RHO2, 1] + 2.0 * e0 * e1
    W[R_S, 2] = W[R_RHO2, 2] + e1 * e1 + 2.0 * e0 * e2
    W[R_S, 3] = W[R_RHO2, 3] + 2.0 * e1 * e2
    W[R_S, 4] = W[R_RHO2, 4] + e2 * e2
    for i in range(5):
        for j in range(5):
            W[R_C, i + j] += W[R_S, i] * W[R_S, j]
    for j in range(5):
        W[R_C, j] -= 4.0 * R * R * W[R_RHO2, j]
    n = entry_roots(W, 8, T)
    for r in range(n):
        tau = W[R_ROOT, r]
        x = hx + (vx + 0.5 * gx * tau) * tau
        y = hy + (vy + 0.5 * gy * tau) * tau
        z = e0 + (e1 + e2 * tau) * tau
        rr = math.hypot(x, y)
        if (rr + R) * (rr + R) + z * z - a * a > 0.0:     # the root belongs to the first factor
            return tau
    return INF


@njit(cache=True, nogil=True)
def sphere_time(dx, dy, dz, vx, vy, vz, gx, gy, gz, sig, T, W):
    """Time until a grain (centre offset d from a static sphere's centre, velocity v, gravity g) reaches the
    contact distance sig, within T."""
    b = dx * vx + dy * vy + dz * vz
    c0 = dx * dx + dy * dy + dz * dz - sig * sig
    if gx == 0.0 and gy == 0.0 and gz == 0.0:
        if b >= 0.0:
            return INF
        if c0 <= 0.0:
            return 0.0
        aa = vx * vx + vy * vy + vz * vz
        disc = b * b - aa * c0
        if disc < 0.0:
            return INF
        r = c0 / (-b + math.sqrt(disc))
        return r if r <= T else INF
    if T == INF or math.sqrt(c0 + sig * sig) - sig > _reach(vx, vy, vz, gx, gy, gz, T):
        return INF
    W[R_C, 0] = c0
    W[R_C, 1] = 2.0 * b
    W[R_C, 2] = vx * vx + vy * vy + vz * vz + dx * gx + dy * gy + dz * gz
    W[R_C, 3] = vx * gx + vy * gy + vz * gz
    W[R_C, 4] = 0.25 * (gx * gx + gy * gy + gz * gz)
    n = entry_roots(W, 4, T)
    return W[R_ROOT, 0] if n > 0 else INF


# ------------------------------------------------------------------------------------------ tournament tree
@njit(cache=True, nogil=True)
def _better(a, b, key):
    if a < 0:
        return b
    if b < 0:
        return a
    ka, kb = key[a], key[b]
    if ka < kb or (ka == kb and a < b):
        return a
    return b


@njit(cache=True, nogil=True)
def tree_update(tree, M, key, i):
    k = (M + i) >> 1
    while k >= 1:
        tree[k] = _better(tree[2 * k], tree[2 * k + 1], key)
        k >>= 1


@njit(cache=True, nogil=True)
def tree_build(tree, M, key, n):
    for i in range(M):
        tree[M + i] = i if i < n else -1
    for k in range(M - 1, 0, -1):
        tree[k] = _better(tree[2 * k], tree[2 * k + 1], key)


# ------------------------------------------------------------------------------------------------- cells
@njit(cache=True, nogil=True)
def cell_of(px, py, pz, org, h, dims):
    """The cell holding point p (border cells reach to infinity)."""
    ix = min(max(int(math.floor((px - org[0]) / h)), 0), dims[0] - 1)
    iy = min(max(int(math.floor((py - org[1]) / h)), 0), dims[1] - 1)
    iz = min(max(int(math.floor((pz - org[2]) / h)), 0), dims[2] - 1)
    return ix + dims[0] * (iy + dims[1] * iz)


@njit(cache=True, nogil=True)
def _cell_insert(i, c, cell, nxt, prv, head):
    cell[i] = c
    j = head[c]
    nxt[i] = j
    prv[i] = -1
    if j >= 0:
        prv[j] = i
    head[c] = i


@njit(cache=True, nogil=True)
def _cell_remove(i, cell, nxt, prv, head):
    c = cell[i]
    a, b = prv[i], nxt[i]
    if a >= 0:
        nxt[a] = b
    else:
        head[c] = b
    if b >= 0:
        prv[b] = a
    cell[i] = -1


@njit(cache=True, nogil=True)
def _exit_axis(x, v, g, lo, h, ix, n, best, ax, dr, k):
    if ix < n - 1:
        t = entry2(lo + h - x, -v, -0.5 * g, INF)
        if t < best:
            best, ax, dr = t, k, 1
    if ix > 0:
        t = entry2(x - lo, v, 0.5 * g, INF)
        if t < best:
            best, ax, dr = t, k, -1
    return best, ax, dr


@njit(cache=True, nogil=True)
def _cell_exit(px, py, pz, vx, vy, vz, gx, gy, gz, c, ox, oy, oz, h, nx, ny, nz):
    """Time until a grain leaves cell c (inf if never), the axis and the direction (+1/-1)."""
    ix, iy, iz = c % nx, (c // nx) % ny, c // (nx * ny)
    best, ax, dr = _exit_axis(px, vx, gx, ox + ix * h, h, ix, nx, INF, -1, 0, 0)
    best, ax, dr = _exit_axis(py, vy, gy, oy + iy * h, h, iy, ny, best, ax, dr, 1)
    best, ax, dr = _exit_axis(pz, vz, gz, oz + iz * h, h, iz, nz, best, ax, dr, 2)
    return best, ax, dr


# ----------------------------------------------------------------------------------------------- kernel
@njit(cache=True, nogil=True)
def _advance(i, t, pos, vel, tloc, g):
    dt = t - tloc[i]
    for k in range(3):
        pos[i, k] += (vel[i, k] + 0.5 * g[k] * dt) * dt
        vel[i, k] += g[k] * dt
    tloc[i] = t


@njit(cache=True, nogil=True)
def _freeze_push(i, t, t_end, pos, vel, tloc, rad, status, count, cell, nxt, head, dims, ev_t, ev_type, ev_j,
                 ev_cnt, cx_t, key, tree, M, g, W):
    """Grain i has just frozen at time t: each moving neighbour that would hit it before its held event now holds
    that collision (frozen grains predict nothing themselves)."""
    nx, ny, nz = dims[0], dims[1], dims[2]
    c = cell[i]
    ix, iy, iz = c % nx, (c // nx) % ny, c // (nx * ny)
    for z in range(max(iz - 1, 0), min(iz + 2, nz)):
        for y in range(max(iy - 1, 0), min(iy + 2, ny)):
            for x in range(max(ix - 1, 0), min(ix + 2, nx)):
                k = head[x + nx * (y + ny * z)]
                while k >= 0:
                    if status[k] == MOVING:
                        dt = t - tloc[k]
                        hz = min(cx_t[k], ev_t[k], t_end) - t
                        tau = sphere_time(pos[k, 0] + (vel[k, 0] + 0.5 * g[0] * dt) * dt - pos[i, 0],
                                          pos[k, 1] + (vel[k, 1] + 0.5 * g[1] * dt) * dt - pos[i, 1],
                                          pos[k, 2] + (vel[k, 2] + 0.5 * g[2] * dt) * dt - pos[i, 2],
                                          vel[k, 0] + g[0] * dt, vel[k, 1] + g[1] * dt, vel[k, 2] + g[2] * dt,
                                          g[0], g[1], g[2], rad[i] + rad[k], hz, W)
                        if t + tau < ev_t[k]:
                            ev_t[k] = t + tau
                            ev_type[k] = EV_GRAIN
                            ev_j[k] = i
                            ev_cnt[k] = count[i]
                            key[k] = min(ev_t[k], cx_t[k])
                            tree_update(tree, M, key, k)
                    k = nxt[k]


@njit(cache=True, nogil=True)
def positions_at(t, pos, vel, tloc, status, g, out):
    """Centres of all grains at time t (>= every state time) into out; NaN for dormant grains."""
    for i in range(pos.shape[0]):
        if status[i] == MOVING:
            dt = t - tloc[i]
            for k in range(3):
                out[i, k] = pos[i, k] + (vel[i, k] + 0.5 * g[k] * dt) * dt
        elif status[i] == FROZEN:
            for k in range(3):
                out[i, k] = pos[i, k]
        else:
            for k in range(3):
                out[i, k] = np.nan


@njit(cache=True, nogil=True)
def max_overlap(P, rad, status, spos, srad, ptype, pprm):
    """Brute force over every pair and every static item (no cells, no predictions): the largest overlap of the
    grains centred at P, relative to the smaller radius (0 when nothing overlaps). O(N^2): for checks."""
    n = P.shape[0]
    worst = 0.0
    for i in range(n):
        if status[i] == DORMANT:
            continue
        for j in range(i + 1, n):
            if status[j] == DORMANT:
                continue
            dx, dy, dz = P[i, 0] - P[j, 0], P[i, 1] - P[j, 1], P[i, 2] - P[j, 2]
            sig = rad[i] + rad[j]
            d2 = dx * dx + dy * dy + dz * dz
            if d2 < sig * sig:
                worst = max(worst, (sig - math.sqrt(d2)) / min(rad[i], rad[j]))
        for s in range(spos.shape[0]):
            d = math.sqrt((P[i, 0] - spos[s, 0]) ** 2 + (P[i, 1] - spos[s, 1]) ** 2 + (P[i, 2] - spos[s, 2]) ** 2)
            worst = max(worst, (rad[i] + srad[s] - d) / rad[i])
        for q in range(ptype.shape[0]):
            worst = max(worst, (rad[i] - prim_distance(ptype[q], pprm, q, P[i, 0], P[i, 1], P[i, 2])) / rad[i])
    return worst


@njit(cache=True, nogil=True)
def init_state(pos, tloc, status, cell, nxt, prv, head, org, h, dims, ev_t, ev_type, key, tree, M):
    """Put the grains present at t = 0 into their cells and queue their first prediction (made by run_chunk's
    first pops, at t = 0); dormant grains wait for their release."""
    n = pos.shape[0]
    for i in range(n - 1, -1, -1):
        if status[i] != DORMANT:
            _cell_insert(i, cell_of(pos[i, 0], pos[i, 1], pos[i, 2], org, h, dims), cell, nxt, prv, head)
    for i in range(n):
        key[i] = INF
        if status[i] == MOVING:
            ev_t[i] = 0.0
            ev_type[i] = EV_INIT
            key[i] = 0.0
        elif status[i] == DORMANT:
            ev_t[i] = tloc[i]
            ev_type[i] = EV_RELEASE
            key[i] = tloc[i]
    tree_build(tree, M, key, n)


@njit(cache=True, nogil=True)
def run_chunk(t_end, max_pops, G, C, E, S, g, e_gg, e_gw, prm, L, snap_t, snap_p, snap_s, stats, fstats, W, P):
    """Process events in time order until the next one lies at or after t_end (returns code 0) or max_pops queue
    pops were made (code 1). Returns (code, number of collisions logged into L this chunk). P (N, 3) is scratch
    for debug overlap checks."""
    pos, vel, tloc, rad, invm, mat, status, count = G
    cell, nxt, prv, head, org, h, dims = C
    ev_t, ev_type, ev_j, ev_cnt, cx_t, cx_ax, cx_dir, key, tree, M = E
    spos, srad, sbody, selem, ptype, pprm, pbody, pelem, cs_off, cs_items, body_rest = S
    lt, lkind, la, lb, lelem, lpoint, lnormal, lv0, le = L
    v_el, v_rest, cos_rest = prm[PR_VEL], prm[PR_VREST], prm[PR_COSREST]
    rest_on = prm[PR_REST_ON] > 0.0
    debug = prm[PR_DEBUG] > 0.0
    gx, gy, gz = g[0], g[1], g[2]
    gn = math.sqrt(gx * gx + gy * gy + gz * gz)
    nxg, nyg, nzg = dims[0], dims[1], dims[2]
    ox, oy, oz = org[0], org[1], org[2]
    ns = spos.shape[0]
    nl = 0
    pops = 0
    code = 0
    while True:
        if pops >= max_pops:
            code = 1
            break
        i = tree[1]
        if i < 0:
            break
        tk = key[i]
        if not (tk < t_end):
            break
        while stats[ST_SNAP] < snap_t.shape[0] and snap_t[stats[ST_SNAP]] <= tk:
            positions_at(snap_t[stats[ST_SNAP]], pos, vel, tloc, status, g, snap_p[stats[ST_SNAP]])
            for k in range(status.shape[0]):
                snap_s[stats[ST_SNAP], k] = status[k]
            stats[ST_SNAP] += 1
        pops += 1
        stats[ST_POPS] += 1
        fstats[FS_TIME] = tk
        r1 = -1                                     # a second grain to re-predict
        if status[i] == DORMANT:                    # a grain of a pour enters
            c = cell_of(pos[i, 0], pos[i, 1], pos[i, 2], org, h, dims)
            ix, iy, iz = c % nxg, (c // nxg) % nyg, c // (nxg * nyg)
            blocked = False
            for z in range(max(iz - 1, 0), min(iz + 2, nzg)):
                for y in range(max(iy - 1, 0), min(iy + 2, nyg)):
                    for x in range(max(ix - 1, 0), min(ix + 2, nxg)):
                        j = head[x + nxg * (y + nyg * z)]
                        while j >= 0:
                            dt = tk - tloc[j] if status[j] == MOVING else 0.0
                            d2 = 0.0
                            for k in range(3):
                                e = pos[i, k] - (pos[j, k] + (vel[j, k] + 0.5 * g[k] * dt) * dt)
                                d2 += e * e
                            if d2 < (rad[i] + rad[j]) ** 2:
                                blocked = True
                            j = nxt[j]
            if blocked:                             # try again once the blocking grain has moved on
                vn = math.sqrt(vel[i, 0] ** 2 + vel[i, 1] ** 2 + vel[i, 2] ** 2)
                ev_t[i] = tk + 0.5 * rad[i] / max(vn, math.sqrt(gn * rad[i]), 1e-6)
                key[i] = ev_t[i]
                tree_update(tree, M, key, i)
                stats[ST_POSTPONED] += 1
                continue
            tloc[i] = tk
            status[i] = MOVING
            count[i] += 1
            _cell_insert(i, c, cell, nxt, prv, head)
            stats[ST_RELEASED] += 1
            t = tk
        elif cx_t[i] < ev_t[i]:                     # leaves its cell
            t = cx_t[i]
            step = 1
            for k in range(cx_ax[i]):
                step *= dims[k]
            c = cell[i] + cx_dir[i] * step
            _cell_remove(i, cell, nxt, prv, head)
            _cell_insert(i, c, cell, nxt, prv, head)
            stats[ST_CROSS] += 1
        elif ev_type[i] == EV_INIT:                # the first prediction
            t = ev_t[i]
        elif ev_type[i] == EV_GRAIN and count[ev_j[i]] != ev_cnt[i]:   # partner changed course since
            t = ev_t[i]
            stats[ST_INVALID] += 1
        else:                                       # a collision
            t = ev_t[i]
            typ = ev_type[i]
            j = ev_j[i]
            _advance(i, t, pos, vel, tloc, g)
            a = rad[i]
            support = False
            body = -1
            elem = -1
            ptx, pty, ptz = 0.0, 0.0, 0.0
            if typ == EV_GRAIN and status[j] == MOVING:
                _advance(j, t, pos, vel, tloc, g)
                dx, dy, dz = pos[i, 0] - pos[j, 0], pos[i, 1] - pos[j, 1], pos[i, 2] - pos[j, 2]
                d = math.sqrt(dx * dx + dy * dy + dz * dz)
                nx, ny, nz = dx / d, dy / d, dz / d
                e = e_gg[mat[i], mat[j]]
                v0 = -((vel[i, 0] - vel[j, 0]) * nx + (vel[i, 1] - vel[j, 1]) * ny + (vel[i, 2] - vel[j, 2]) * nz)
                u = max(e * v0, min(v0, v_el))      # collisions slower than v_el are elastic
                if v0 + u > 0.0:
                    J = (v0 + u) / (invm[i] + invm[j])
                    vel[i, 0] += J * invm[i] * nx
                    vel[i, 1] += J * invm[i] * ny
                    vel[i, 2] += J * invm[i] * nz
                    vel[j, 0] -= J * invm[j] * nx
                    vel[j, 1] -= J * invm[j] * ny
                    vel[j, 2] -= J * invm[j] * nz
                count[j] += 1
                r1 = j
            else:
                if typ == EV_GRAIN:                 # a frozen grain
                    dx, dy, dz = pos[i, 0] - pos[j, 0], pos[i, 1] - pos[j, 1], pos[i, 2] - pos[j, 2]
                    d = math.sqrt(dx * dx + dy * dy + dz * dz)
                    nx, ny, nz = dx / d, dy / d, dz / d
                    e = e_gg[mat[i], mat[j]]
                    support = True
                elif typ == EV_SPHERE:
                    dx, dy, dz = pos[i, 0] - spos[j, 0], pos[i, 1] - spos[j, 1], pos[i, 2] - spos[j, 2]
                    d = math.sqrt(dx * dx + dy * dy + dz * dz)
                    nx, ny, nz = dx / d, dy / d, dz / d
                    ptx, pty, ptz = spos[j, 0] + srad[j] * nx, spos[j, 1] + srad[j] * ny, spos[j, 2] + srad[j] * nz
                    body = sbody[j]
                    elem = selem[j]
                    e = e_gw[mat[i], body]
                    support = body_rest[body] > 0
                else:
                    ptx, pty, ptz, nx, ny, nz = prim_contact(ptype[j], pprm, j, pos[i, 0], pos[i, 1], pos[i, 2], a)
                    body = pbody[j]
                    elem = pelem[j]
                    e = e_gw[mat[i], body]
                    support = body_rest[body] > 0
                v0 = -(vel[i, 0] * nx + vel[i, 1] * ny + vel[i, 2] * nz)
                u = max(e * v0, min(v0, v_el))
                if gx * nx + gy * ny + gz * nz < 0.0:
                    u = max(u, v_el)                # pressed on by gravity: never a rebound below v_el
                if v0 + u > 0.0:
                    vel[i, 0] += (v0 + u) * nx
                    vel[i, 1] += (v0 + u) * ny
                    vel[i, 2] += (v0 + u) * nz
            count[i] += 1
            stats[ST_COLL] += 1
            if v0 > 0.0:                            # log it (a touch without approach makes no sound)
                lt[nl] = t
                lv0[nl] = v0
                le[nl] = min(u / v0, 1.0)
                if typ == EV_GRAIN:
                    lkind[nl] = 0
                    sg = 1.0 if i < j else -1.0     # normal from grain B (the higher index) to grain A
                    la[nl] = min(i, j)
                    lb[nl] = max(i, j)
                    lelem[nl] = -1
                    lnormal[nl, 0], lnormal[nl, 1], lnormal[nl, 2] = sg * nx, sg * ny, sg * nz
                    lpoint[nl, 0] = pos[i, 0] - a * nx
                    lpoint[nl, 1] = pos[i, 1] - a * ny
                    lpoint[nl, 2] = pos[i, 2] - a * nz
                else:
                    lkind[nl] = 1
                    la[nl] = i
                    lb[nl] = body
                    lelem[nl] = elem
                    lnormal[nl, 0], lnormal[nl, 1], lnormal[nl, 2] = nx, ny, nz
                    lpoint[nl, 0], lpoint[nl, 1], lpoint[nl, 2] = ptx, pty, ptz
                nl += 1
                stats[ST_LOGGED] += 1
            froze = False
            if support and rest_on and v0 < v_rest:
                up = -(gx * nx + gy * ny + gz * nz) / gn
                sp = math.sqrt(vel[i, 0] ** 2 + vel[i, 1] ** 2 + vel[i, 2] ** 2)
                froze = up >= cos_rest or sp < v_rest
            if froze:
                status[i] = FROZEN
                vel[i, 0] = vel[i, 1] = vel[i, 2] = 0.0
                invm[i] = 0.0
                ev_t[i] = INF
                cx_t[i] = INF
                ev_type[i] = EV_NONE
                key[i] = INF
                tree_update(tree, M, key, i)
                stats[ST_FROZEN] += 1
                _freeze_push(i, t, t_end, pos, vel, tloc, rad, status, count, cell, nxt, head, dims, ev_t, ev_type,
                             ev_j, ev_cnt, cx_t, key, tree, M, g, W)
                i = -1
            if debug:
                positions_at(t, pos, vel, tloc, status, g, P)
                fstats[FS_MAXOVL] = max(fstats[FS_MAXOVL], max_overlap(P, rad, status, spos, srad, ptype, pprm))
        # re-predict from scratch the grains whose course changed: their earliest collision or cell exit. (Written
        # out here, not called: a call passing these arrays costs Numba two atomic reference counts per array.)
        for r in range(2):
            k = i if r == 0 else r1
            if k < 0:
                continue
            dt = t - tloc[k]
            for m in range(3):
                pos[k, m] += (vel[k, m] + 0.5 * g[m] * dt) * dt
                vel[k, m] += g[m] * dt
            tloc[k] = t
            px, py, pz = pos[k, 0], pos[k, 1], pos[k, 2]
            vx, vy, vz = vel[k, 0], vel[k, 1], vel[k, 2]
            a = rad[k]
            c = cell[k]
            tc, ax, dr = _cell_exit(px, py, pz, vx, vy, vz, gx, gy, gz, c, ox, oy, oz, h, nxg, nyg, nzg)
            cx_t[k] = t + tc
            cx_ax[k] = ax
            cx_dir[k] = dr
            best = min(tc, t_end - t)               # horizon: the cell exit, or the end of the run
            btype, bj, bcnt = EV_NONE, -1, 0
            ix, iy, iz = c % nxg, (c // nxg) % nyg, c // (nxg * nyg)
            for z in range(max(iz - 1, 0), min(iz + 2, nzg)):
                for y in range(max(iy - 1, 0), min(iy + 2, nyg)):
                    for x in range(max(ix - 1, 0), min(ix + 2, nxg)):
                        j = head[x + nxg * (y + nyg * z)]
                        while j >= 0:
                            if j != k:
                                sig = a + rad[j]
                                if status[j] == MOVING:     # relative motion is free flight: a quadratic
                                    dt = t - tloc[j]
                                    dx = px - (pos[j, 0] + (vel[j, 0] + 0.5 * gx * dt) * dt)
                                    dy = py - (pos[j, 1] + (vel[j, 1] + 0.5 * gy * dt) * dt)
                                    dz = pz - (pos[j, 2] + (vel[j, 2] + 0.5 * gz * dt) * dt)
                                    ux = vx - (vel[j, 0] + gx * dt)
                                    uy = vy - (vel[j, 1] + gy * dt)
                                    uz = vz - (vel[j, 2] + gz * dt)
                                    b = dx * ux + dy * uy + dz * uz
                                    if b < 0.0:
                                        c0 = dx * dx + dy * dy + dz * dz - sig * sig
                                        if c0 <= 0.0:
                                            tau = 0.0
                                        else:
                                            disc = b * b - (ux * ux + uy * uy + uz * uz) * c0
                                            tau = c0 / (-b + math.sqrt(disc)) if disc >= 0.0 else INF
                                        if tau < best:
                                            best, btype, bj, bcnt = tau, EV_GRAIN, j, count[j]
                                else:                       # frozen: a static sphere
                                    tau = sphere_time(px - pos[j, 0], py - pos[j, 1], pz - pos[j, 2], vx, vy, vz,
                                                      gx, gy, gz, sig, best, W)
                                    if tau < best:
                                        best, btype, bj, bcnt = tau, EV_GRAIN, j, count[j]
                            j = nxt[j]
            for kk in range(cs_off[c], cs_off[c + 1]):
                it = cs_items[kk]
                if it < ns:
                    tau = sphere_time(px - spos[it, 0], py - spos[it, 1], pz - spos[it, 2], vx, vy, vz, gx, gy, gz,
                                      a + srad[it], best, W)
                    if tau < best:
                        best, btype, bj = tau, EV_SPHERE, it
                else:
                    q = it - ns
                    tau = prim_time(ptype[q], pprm, q, px, py, pz, vx, vy, vz, gx, gy, gz, a, best, W)
                    if tau < best:
                        best, btype, bj = tau, EV_PRIM, q
            ev_t[k] = t + best if btype != EV_NONE else INF
            ev_type[k] = btype
            ev_j[k] = bj
            ev_cnt[k] = bcnt
            key[k] = min(ev_t[k], cx_t[k])
            m = (M + k) >> 1                        # the tournament tree, leaf to root
            while m >= 1:
                tree[m] = _better(tree[2 * m], tree[2 * m + 1], key)
                m >>= 1
    if code == 0:
        while stats[ST_SNAP] < snap_t.shape[0] and snap_t[stats[ST_SNAP]] <= t_end:
            positions_at(snap_t[stats[ST_SNAP]], pos, vel, tloc, status, g, snap_p[stats[ST_SNAP]])
            for k in range(status.shape[0]):
                snap_s[stats[ST_SNAP], k] = status[k]
            stats[ST_SNAP] += 1
    return code, nl


# ------------------------------------------------------------------------------------- set-up helpers
@njit(cache=True, nogil=True)
def _cell_bounds(ix, k, origin, h, dims):
    lo = origin[k] + ix * h if ix > 0 else -_BIG
    hi = origin[k] + (ix + 1) * h if ix < dims[k] - 1 else _BIG
    return lo, hi


@njit(cache=True, nogil=True)
def _rect_seg_dist(r0, r1, z0, z1, a0, b0, a1, b1):
    """Distance between the rectangle [r0, r1] x [z0, z1] and the segment (a0, b0)-(a1, b1) in a plane."""
    # Liang-Barsky: does the segment enter the rectangle?
    da, db = a1 - a0, b1 - b0
    te, tx = 0.0, 1.0
    ok = True
    for pp, qq in ((-da, a0 - r0), (da, r1 - a0), (-db, b0 - z0), (db, z1 - b0)):
        if pp == 0.0:
            if qq < 0.0:
                ok = False
        else:
            r = qq / pp
            if pp < 0.0:
                te = max(te, r)
            else:
                tx = min(tx, r)
    if ok and te <= tx:
        return 0.0
    best = _BIG
    for (x, y) in ((a0, b0), (a1, b1)):
        ex = max(r0 - x, 0.0, x - r1)
        ey = max(z0 - y, 0.0, y - z1)
        best = min(best, math.sqrt(ex * ex + ey * ey))
    for (x, y) in ((r0, z0), (r0, z1), (r1, z0), (r1, z1)):
        best = min(best, seg_dist(x, y, a0, b0, a1, b1))
    return best


@njit(cache=True, nogil=True)
def _item_hits_cell(kind, q, center, R, lo, hi, reach):
    """May a grain centre inside the cell box [lo, hi] come within ``reach`` of static item (kind -1: a sphere of
    radius R at center; else primitive kind with parameters q)? Conservative."""
    if kind < 0:
        d2 = 0.0
        for k in range(3):
            e = max(lo[k] - center[k], 0.0, center[k] - hi[k])
            d2 += e * e
        return math.sqrt(d2) <= R + reach
    if kind == P_PLANE:
        dmin = 0.0
        for k in range(3):
            dmin += q[3 + k] * ((lo[k] if q[3 + k] > 0.0 else hi[k]) - q[k])
        return dmin <= reach
    cx, cy = q[0], q[1]
    ex = max(lo[0] - cx, 0.0, cx - hi[0])
    ey = max(lo[1] - cy, 0.0, cy - hi[1])
    rmin = math.sqrt(ex * ex + ey * ey)
    fx = max(abs(lo[0] - cx), abs(hi[0] - cx))
    fy = max(abs(lo[1] - cy), abs(hi[1] - cy))
    rmax = math.sqrt(fx * fx + fy * fy)
    if kind == P_DISK:
        d = _rect_seg_dist(rmin, rmax, lo[2], hi[2], 0.0, q[2], q[3], q[2])
    elif kind == P_CYL:
        d = _rect_seg_dist(rmin, rmax, lo[2], hi[2], q[2], q[3], q[2], q[4])
    elif kind == P_CONE:
        d = _rect_seg_dist(rmin, rmax, lo[2], hi[2], q[8], q[6], q[9], q[7])
    else:
        d = _rect_seg_dist(rmin, rmax, lo[2], hi[2], q[3], q[2], q[3], q[2])
    return d <= reach


@njit(cache=True, nogil=True)
def register_static(origin, h, dims, spos, srad, ptype, pprm, pbox, reach, order):
    """Per-cell lists (CSR: offsets, items) of the static items a grain centre in that cell could touch: static
    spheres are items 0..S-1, primitives S..S+P-1, listed in each cell in the sequence ``order`` (of all items;
    on equal contact times the item listed first is hit). ``pbox`` holds each primitive's bounding box."""
    ncell = dims[0] * dims[1] * dims[2]
    ns = spos.shape[0]
    cnt = np.zeros(ncell + 1, np.int64)
    lo = np.empty(3)
    hi = np.empty(3)
    blo = np.empty(3)
    bhi = np.empty(3)
    q0 = np.zeros(10)
    for phase in range(2):
        if phase == 1:
            for c in range(ncell):
                cnt[c + 1] += cnt[c]
            items = np.empty(cnt[ncell], np.int64)
            fill = cnt[:ncell].copy()
        for it in order:
            if it < ns:
                for k in range(3):
                    blo[k] = spos[it, k] - srad[it]
                    bhi[k] = spos[it, k] + srad[it]
            else:
                for k in range(3):
                    blo[k] = pbox[it - ns, k]
                    bhi[k] = pbox[it - ns, 3 + k]
            rng = np.empty((3, 2), np.int64)
            for k in range(3):
                a = math.floor((blo[k] - reach - origin[k]) / h) if blo[k] > -_BIG else 0
                b = math.floor((bhi[k] + reach - origin[k]) / h) if bhi[k] < _BIG else dims[k] - 1
                rng[k, 0] = min(max(int(a), 0), dims[k] - 1)
                rng[k, 1] = min(max(int(b), 0), dims[k] - 1)
            for z in range(rng[2, 0], rng[2, 1] + 1):
                lo[2], hi[2] = _cell_bounds(z, 2, origin, h, dims)
                for y in range(rng[1, 0], rng[1, 1] + 1):
                    lo[1], hi[1] = _cell_bounds(y, 1, origin, h, dims)
                    for x in range(rng[0, 0], rng[0, 1] + 1):
                        lo[0], hi[0] = _cell_bounds(x, 0, origin, h, dims)
                        if it < ns:
                            hit = _item_hits_cell(-1, q0, spos[it], srad[it], lo, hi, reach)
                        else:
                            hit = _item_hits_cell(ptype[it - ns], pprm[it - ns], blo, 0.0, lo, hi, reach)
                        if hit:
                            c = x + dims[0] * (y + dims[1] * z)
                            if phase == 0:
                                cnt[c + 1] += 1
                            else:
                                items[fill[c]] = it
                                fill[c] += 1
    return cnt, items


@njit(cache=True, nogil=True)
def first_overlap(pos, rad, active, origin, h, dims):
    """The overlapping pair (i < j, both active) that comes first in (i, j) order, and its overlap [m];
    (-1, -1, 0) if none. Cells as in the simulation."""
    n = pos.shape[0]
    ncell = dims[0] * dims[1] * dims[2]
    head = -np.ones(ncell, np.int64)
    nxt = -np.ones(n, np.int64)
    cell = np.empty(n, np.int64)
    for i in range(n - 1, -1, -1):
        if active[i]:
            c = cell_of(pos[i, 0], pos[i, 1], pos[i, 2], origin, h, dims)
            cell[i] = c
            nxt[i] = head[c]
            head[c] = i
    bi, bj, bo = -1, -1, 0.0
    nx, ny, nz = dims[0], dims[1], dims[2]
    for i in range(n):
        if not active[i]:
            continue
        c = cell[i]
        ix, iy, iz = c % nx, (c // nx) % ny, c // (nx * ny)
        for z in range(max(iz - 1, 0), min(iz + 2, nz)):
            for y in range(max(iy - 1, 0), min(iy + 2, ny)):
                for x in range(max(ix - 1, 0), min(ix + 2, nx)):
                    j = head[x + nx * (y + ny * z)]
                    while j >= 0:
                        if j > i:
                            d = math.sqrt((pos[i, 0] - pos[j, 0]) ** 2 + (pos[i, 1] - pos[j, 1]) ** 2
                                          + (pos[i, 2] - pos[j, 2]) ** 2)
                            ov = rad[i] + rad[j] - d
                            if ov > 1e-9 * min(rad[i], rad[j]):
                                if bi < 0 or (i < bi) or (i == bi and j < bj):
                                    bi, bj, bo = i, j, ov
                        j = nxt[j]
        if bi >= 0:
            return bi, bj, bo
    return bi, bj, bo


@njit(cache=True, nogil=True)
def wall_gaps(pos, rad, ptype, pprm, spos, srad):
    """For each grain, the smallest gap (distance - radius) [m] to any primitive or static sphere, and which item
    (primitives 0..P-1, static spheres P..P+S-1; -1 if there are none)."""
    n = pos.shape[0]
    gap = np.full(n, np.inf)
    which = -np.ones(n, np.int64)
    for i in range(n):
        for q in range(ptype.shape[0]):
            d = prim_distance(ptype[q], pprm, q, pos[i, 0], pos[i, 1], pos[i, 2]) - rad[i]
            if d < gap[i]:
                gap[i] = d
                which[i] = q
        for s in range(spos.shape[0]):
            d = math.sqrt((pos[i, 0] - spos[s, 0]) ** 2 + (pos[i, 1] - spos[s, 1]) ** 2
                          + (pos[i, 2] - spos[s, 2]) ** 2) - srad[s] - rad[i]
            if d < gap[i]:
                gap[i] = d
                which[i] = ptype.shape[0] + s
    return gap, which


@njit(cache=True, nogil=True)
def rsa_place_from(cand, rad, k0, kind, q, gap, origin, h, dims, out):
    """Random sequential addition, going on from grain k0 (out[:k0] are placed): grain k (radius rad[k]) takes
    the first unused candidate centre (rows of ``cand``, in order) that lies inside the region (kind 0 box q = x0,x1,y0,y1,z0,z1; 1 vertical cylinder
    q = cx,cy,R,z0,z1; 2 upward cone q = cx,cy,z_apex,sin,cos,z0,z1) with clearance rad[k] + gap from its boundary
    and overlaps no grain placed before. Returns the number of grains placed (<= len(rad))."""
    n = rad.shape[0]
    ncell = dims[0] * dims[1] * dims[2]
    head = -np.ones(ncell, np.int64)
    nxt = -np.ones(n, np.int64)
    nx, ny, nz = dims[0], dims[1], dims[2]
    for k in range(k0):
        c = cell_of(out[k, 0], out[k, 1], out[k, 2], origin, h, dims)
        nxt[k] = head[c]
        head[c] = k
    u = 0
    for k in range(k0, n):
        a = rad[k]
        cl = a + gap
        placed = False
        while u < cand.shape[0] and not placed:
            p = cand[u]
            u += 1
            if kind == 0:
                ok = (q[0] + cl <= p[0] <= q[1] - cl and q[2] + cl <= p[1] <= q[3] - cl
                      and q[4] + cl <= p[2] <= q[5] - cl)
            elif kind == 1:
                ok = (math.hypot(p[0] - q[0], p[1] - q[1]) <= q[2] - cl and q[3] + cl <= p[2] <= q[4] - cl)
            else:
                rho = math.hypot(p[0] - q[0], p[1] - q[1])
                ok = ((p[2] - q[2]) * q[3] - rho * q[4] >= cl and q[5] + cl <= p[2] <= q[6] - cl)
            if not ok:
                continue
            c = cell_of(p[0], p[1], p[2], origin, h, dims)
            ix, iy, iz = c % nx, (c // nx) % ny, c // (nx * ny)
            for z in range(max(iz - 1, 0), min(iz + 2, nz)):
                for y in range(max(iy - 1, 0), min(iy + 2, ny)):
                    for x in range(max(ix - 1, 0), min(ix + 2, nx)):
                        j = head[x + nx * (y + ny * z)]
                        while j >= 0 and ok:
                            d2 = (p[0] - out[j, 0]) ** 2 + (p[1] - out[j, 1]) ** 2 + (p[2] - out[j, 2]) ** 2
                            if d2 < (a + rad[j] + gap) ** 2:
                                ok = False
                            j = nxt[j]
            if ok:
                out[k, 0], out[k, 1], out[k, 2] = p[0], p[1], p[2]
                nxt[k] = head[c]
                head[c] = k
                placed = True
        if not placed:
            return k
    return n


@njit(cache=True, nogil=True)
def stream_place(cand, noz, e1, e2, rad, rel, vel, g, out):
    """Entry points for a pour from a nozzle: grain k (release rel[k], velocity vel[k]) takes the first candidate
    offset (cand[k, c] along e1, e2 from the nozzle centre) clear of the grains released before it, at their free-
    flight positions at rel[k]; if none is clear, the candidate with the most room. Grains already far below the
    nozzle are not looked at."""
    n, nc = cand.shape[0], cand.shape[1]
    amax = 0.0
    for k in range(n):
        amax = max(amax, rad[k])
    for k in range(n):
        best, best_room = 0, -INF
        for c in range(nc):
            px = noz[0] + cand[k, c, 0] * e1[0] + cand[k, c, 1] * e2[0]
            py = noz[1] + cand[k, c, 0] * e1[1] + cand[k, c, 1] * e2[1]
            pz = noz[2] + cand[k, c, 0] * e1[2] + cand[k, c, 1] * e2[2]
            room = INF
            m = k - 1
            while m >= 0:
                dt = rel[k] - rel[m]
                qx = out[m, 0] + (vel[m, 0] + 0.5 * g[0] * dt) * dt
                qy = out[m, 1] + (vel[m, 1] + 0.5 * g[1] * dt) * dt
                qz = out[m, 2] + (vel[m, 2] + 0.5 * g[2] * dt) * dt
                travel = math.sqrt((qx - out[m, 0]) ** 2 + (qy - out[m, 1]) ** 2 + (qz - out[m, 2]) ** 2)
                if travel > 4.0 * amax:
                    break
                d = math.sqrt((px - qx) ** 2 + (py - qy) ** 2 + (pz - qz) ** 2) - rad[k] - rad[m]
                room = min(room, d)
                m -= 1
            if room > best_room:
                best, best_room = c, room
            if room > 0.0:
                break
        for j in range(3):
            out[k, j] = noz[j] + cand[k, best, 0] * e1[j] + cand[k, best, 1] * e2[j]
