"""Compiled (Numba) kernels for the cubature reduced force of the thin shell.

Chadwick, An & James 2009, sec. 2.3: one reduced time step evaluates f~(q) ~= sum_{i in C} w_i g_i(q) with
g_i(q) = U_V^T f_V(X_V + U_V q) over the chosen triangles' 6-vertex stencils V only, so a step costs O(k r)
(k chosen triangles, r modes) and never touches the full mesh. Per element:

1. gather   x_V = X_V + U_V q          (18 x r multiply-adds; U_V stored per element, (k, 18, r));
2. the element's membrane (Green strain) and bending (dihedral-angle) force on its 6 stencil vertices, the same
   strain definitions, free-edge handling and rest data as :meth:`impactsound.fem.shell.ShellModel.element_forces`;
3. project  g_i = U_V^T f_V            (18 x r multiply-adds), weighted and summed.

Determinism: elements are split into fixed chunks of ``CHUNK`` consecutive elements whatever the thread count;
each chunk sums its weighted g_i in element order into its own row, and the rows are summed in chunk order, so
the result is bitwise the same on 1 or many threads.

SI units: positions [m], forces [N], q [m sqrt(kg)], U [1/sqrt(kg)], reduced forces [N/sqrt(kg)].
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

CHUNK = 16          # elements per chunk of the parallel sum (fixed: the sum order must not depend on threads)

_TWO_PI = 2.0 * math.pi


@njit(cache=True, nogil=True, inline="always")
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, nogil=True)
def element_force(x, gN, R, Qm, th0, interior, A, c_m, c_b, fm, fb, J):
    """One triangle's share of f_int (Chadwick, An & James 2009, sec. 2.3; the model of ShellModel).

    x (6, 3): stencil positions [m] (face vertices, then the apexes of edges 0, 1, 2; a free edge's slot holds
    any finite point, it gets zero force). gN (3, 2), R (3, 3), Qm (3, 3), th0 (3,), interior (3,) bool: the
    triangle's rest data of ShellModel. A rest area [m^2]; c_m [N/m], c_b [N m] the energy coefficients.
    Writes fm (3, 3) [N] on the face vertices and fb (6, 3) [N] on the stencil; J (3, 6, 3) is scratch (the
    hinge-angle gradients; rows of free edges are not read).
    """
    # membrane: F = sum_k x_k gN_k^T (3x2), eps = (F^T F - I)/2 in Voigt (e11, e22, e12)
    F00 = F01 = F10 = F11 = F20 = F21 = 0.0
    for k in range(3):
        g0 = gN[k, 0]
        g1 = gN[k, 1]
        F00 += x[k, 0] * g0
        F01 += x[k, 0] * g1
        F10 += x[k, 1] * g0
        F11 += x[k, 1] * g1
        F20 += x[k, 2] * g0
        F21 += x[k, 2] * g1
    C00 = F00 * F00 + F10 * F10 + F20 * F20
    C11 = F01 * F01 + F11 * F11 + F21 * F21
    C01 = F00 * F01 + F10 * F11 + F20 * F21
    e0 = 0.5 * (C00 - 1.0)
    e1 = 0.5 * (C11 - 1.0)
    e2 = 0.5 * C01
    s0 = 2.0 * c_m * (e0 * Qm[0, 0] + e1 * Qm[1, 0] + e2 * Qm[2, 0])
    s1 = 2.0 * c_m * (e0 * Qm[0, 1] + e1 * Qm[1, 1] + e2 * Qm[2, 1])
    s2 = 2.0 * c_m * (e0 * Qm[0, 2] + e1 * Qm[1, 2] + e2 * Qm[2, 2])
    sg00 = s0
    sg11 = s1
    sg01 = 0.5 * s2
    # P = F sigma (3x2); fm_k = A P gN_k
    P00 = F00 * sg00 + F01 * sg01
    P01 = F00 * sg01 + F01 * sg11
    P10 = F10 * sg00 + F11 * sg01
    P11 = F10 * sg01 + F11 * sg11
    P20 = F20 * sg00 + F21 * sg01
    P21 = F20 * sg01 + F21 * sg11
    for k in range(3):
        g0 = gN[k, 0]
        g1 = gN[k, 1]
        fm[k, 0] = A * (P00 * g0 + P01 * g1)
        fm[k, 1] = A * (P10 * g0 + P11 * g1)
        fm[k, 2] = A * (P20 * g0 + P21 * g1)

    # bending: signed dihedral angles at the interior edges and their gradients over the stencil
    d0 = d1 = d2 = 0.0
    for k in range(3):
        if not interior[k]:
            continue
        ia = k
        ib = (k + 1) % 3
        ic = (k + 2) % 3
        xa0, xa1, xa2 = x[ia, 0], x[ia, 1], x[ia, 2]
        ex, ey, ez = x[ib, 0] - xa0, x[ib, 1] - xa1, x[ib, 2] - xa2
        cx, cy, cz = x[ic, 0] - xa0, x[ic, 1] - xa1, x[ic, 2] - xa2
        dx, dy, dz = x[3 + k, 0] - xa0, x[3 + k, 1] - xa1, x[3 + k, 2] - xa2
        L2 = ex * ex + ey * ey + ez * ez
        L = math.sqrt(L2)
        N1x, N1y, N1z = _cross(ex, ey, ez, cx, cy, cz)                        # face (a, b, c)
        # neighbour as (b, a, d): (xa - xb) x (xd - xb)
        N2x, N2y, N2z = _cross(-ex, -ey, -ez, dx - ex, dy - ey, dz - ez)
        A1 = math.sqrt(N1x * N1x + N1y * N1y + N1z * N1z)
        A2 = math.sqrt(N2x * N2x + N2y * N2y + N2z * N2z)
        n1x, n1y, n1z = N1x / A1, N1y / A1, N1z / A1
        n2x, n2y, n2z = N2x / A2, N2y / A2, N2z / A2
        mx, my, mz = _cross(n2x, n2y, n2z, n1x, n1y, n1z)
        th = math.atan2((mx * ex + my * ey + mz * ez) / L, n1x * n2x + n1y * n2y + n1z * n2z)
        t = th - th0[k] + math.pi
        t = np.fmod(t, _TWO_PI)                         # NumPy's float modulo (positive divisor)
        if t < 0.0:
            t += _TWO_PI
        if k == 0:
            d0 = t - math.pi
        elif k == 1:
            d1 = t - math.pi
        else:
            d2 = t - math.pi
        for s in range(6):
            for c in range(3):
                J[k, s, c] = 0.0
        sc = L / A1
        sd = L / A2
        gcx, gcy, gcz = n1x * sc, n1y * sc, n1z * sc
        gdx, gdy, gdz = n2x * sd, n2y * sd, n2z * sd
        lc = (cx * ex + cy * ey + cz * ez) / L2
        ld = (dx * ex + dy * ey + dz * ez) / L2
        J[k, ic, 0], J[k, ic, 1], J[k, ic, 2] = gcx, gcy, gcz
        J[k, 3 + k, 0], J[k, 3 + k, 1], J[k, 3 + k, 2] = gdx, gdy, gdz
        J[k, ia, 0] = -((1.0 - lc) * gcx + (1.0 - ld) * gdx)
        J[k, ia, 1] = -((1.0 - lc) * gcy + (1.0 - ld) * gdy)
        J[k, ia, 2] = -((1.0 - lc) * gcz + (1.0 - ld) * gdz)
        J[k, ib, 0] = -(lc * gcx + ld * gdx)
        J[k, ib, 1] = -(lc * gcy + ld * gdy)
        J[k, ib, 2] = -(lc * gcz + ld * gdz)
    # eps_b = R dtheta; dE/dtheta = 2 c_b A R^T Q eps_b
    b0 = R[0, 0] * d0 + R[0, 1] * d1 + R[0, 2] * d2
    b1 = R[1, 0] * d0 + R[1, 1] * d1 + R[1, 2] * d2
    b2 = R[2, 0] * d0 + R[2, 1] * d1 + R[2, 2] * d2
    Q0 = Qm[0, 0] * b0 + Qm[0, 1] * b1 + Qm[0, 2] * b2
    Q1 = Qm[1, 0] * b0 + Qm[1, 1] * b1 + Qm[1, 2] * b2
    Q2 = Qm[2, 0] * b0 + Qm[2, 1] * b1 + Qm[2, 2] * b2
    cb = 2.0 * c_b * A
    for s in range(6):
        for c in range(3):
            fb[s, c] = 0.0
    for k in range(3):
        mk = cb * (R[0, k] * Q0 + R[1, k] * Q1 + R[2, k] * Q2)
        if mk == 0.0 or not interior[k]:
            continue
        for s in range(6):
            for c in range(3):
                fb[s, c] += mk * J[k, s, c]


@njit(cache=True, nogil=True)
def nodal_forces(xs, gN, R, Qm, th0, interior, A, c_m, c_b):
    """element_force over elements: xs (k, 6, 3) stencil positions -> fm (k, 3, 3), fb (k, 6, 3) [N]."""
    k = xs.shape[0]
    fm = np.empty((k, 3, 3))
    fb = np.empty((k, 6, 3))
    J = np.empty((3, 6, 3))
    for e in range(k):
        element_force(xs[e], gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, fm[e], fb[e], J)
    return fm, fb


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _gather(Ue, X0, q, x):
    """x (6, 3) = X0 (18,) + Ue (18, r) q; the r-sum may be vectorised (fixed order per build: deterministic)."""
    r = q.shape[0]
    for j in range(18):
        acc = 0.0
        for p in range(r):
            acc += Ue[j, p] * q[p]
        x[j // 3, j % 3] = X0[j] + acc


@njit(cache=True, nogil=True, fastmath={"contract"})
def _project_add(Ue, f, w, out, a):
    """out (r,) += w Ue^T f, f the (6, 3) stencil force: one pass over out, the 18-term sum per mode in fixed
    order (vectorised over r, no reduction across r); a (18,) is scratch."""
    r = out.shape[0]
    for j in range(18):
        a[j] = w * f[j // 3, j % 3]
    for p in range(r):
        s = out[p]
        for j in range(18):
            s += a[j] * Ue[j, p]
        out[p] = s


@njit(cache=True, nogil=True)
def _one_element(Ue, X0, q, gN, R, Qm, th0, interior, A, c_m, c_b, x, fm, fb, J):
    _gather(Ue, X0, q, x)
    element_force(x, gN, R, Qm, th0, interior, A, c_m, c_b, fm, fb, J)
    for s in range(3):
        for c in range(3):
            fb[s, c] += fm[s, c]


@njit(cache=True, nogil=True)
def reduced_element_forces(Ue, X0, q, gN, R, Qm, th0, interior, A, c_m, c_b):
    """Unweighted g_i(q) = U_V^T f_V(X_V + U_V q) of every element: (k, r) [N/sqrt(kg)]."""
    k, r = Ue.shape[0], Ue.shape[2]
    out = np.zeros((k, r))
    x = np.empty((6, 3))
    fm = np.empty((3, 3))
    fb = np.empty((6, 3))
    J = np.empty((3, 6, 3))
    a = np.empty(18)
    for e in range(k):
        _one_element(Ue[e], X0[e], q, gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, x, fm, fb, J)
        _project_add(Ue[e], fb, 1.0, out[e], a)
    return out


@njit(cache=True, nogil=True, parallel=True)
def cubature_force(Ue, X0, q, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, out):
    """sum_e w_e g_e(q) into out (r,); part (n_chunks, r) is scratch. Chunks of CHUNK elements in parallel, then
    an ordered sum over chunks (bitwise independent of the thread count)."""
    k, r = Ue.shape[0], Ue.shape[2]
    nch = part.shape[0]
    for c in prange(nch):
        x = np.empty((6, 3))
        fm = np.empty((3, 3))
        fb = np.empty((6, 3))
        J = np.empty((3, 6, 3))
        a = np.empty(18)
        row = part[c]
        for p in range(r):
            row[p] = 0.0
        e1 = min(k, (c + 1) * CHUNK)
        for e in range(c * CHUNK, e1):
            _one_element(Ue[e], X0[e], q, gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, x, fm, fb, J)
            _project_add(Ue[e], fb, w[e], row, a)
    for p in range(r):
        out[p] = 0.0
    for c in range(nch):
        for p in range(r):
            out[p] += part[c, p]


@njit(cache=False, nogil=True)     # calls the parallel cubature_force: not cacheable (numba issue #8578)
def newmark_free(Ue, X0, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, q, v, fint, dt, d, n_steps):
    """n_steps explicit central-difference Newmark steps (the variant of dynamics.integrate, no load) with the
    cubature force, in place on q, v and fint (= f~(q) on entry and exit)."""
    h = 0.5 * dt
    r = q.shape[0]
    acc = np.empty(r)
    for _ in range(n_steps):
        for p in range(r):
            acc[p] = -d[p] * v[p] - fint[p]
            q[p] += dt * v[p] + h * dt * acc[p]
        cubature_force(Ue, X0, q, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, fint)
        for p in range(r):
            v[p] = (v[p] + h * acc[p] - h * fint[p]) / (1.0 + h * d[p])
