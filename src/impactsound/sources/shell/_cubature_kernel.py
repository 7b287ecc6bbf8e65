"""Compiled (Numba) kernels for the cubature reduced force of the thin shell.

Chadwick, An & James 2009, sec. 2.3: one reduced time step evaluates f~(q) ~= sum_{i in C} w_i g_i(q) with
g_i(q) = U_V^T f_V(X_V + U_V q) over the chosen triangles' stencils V only, so a step costs O(k r) (k chosen
triangles, r modes) and never touches the full mesh. A stencil has S = 6 slots with "flap" bending (the triangle's
own flap) and S = 24 with "midedge" (its flap and its three neighbours'). Per element:

1. gather   x_V = X_V + U_V q          (3 n x r multiply-adds, n <= S the stencil's distinct vertices: 6 for
                                        "flap", 12 for "midedge");
2. the element's membrane (Green strain) and bending (dihedral angles of each flap read) force on its stencil, the
   same strain definitions, free-edge handling and rest data as
   :meth:`impactsound.fem.shell.ShellModel.element_forces` (``element_force``; the step evaluates a chunk's
   elements at once, ``chunk_forces``, the same operations laid out for SIMD lanes across the elements: the same
   bits, 2.6x faster per element);
3. project  g_i = U_V^T f_V            (3 n x r multiply-adds), weighted and summed.

Shared rows: the elements are stored in chunks of CHUNK consecutive ones, ordered along a space-filling curve so
that a chunk's triangles lie near each other, and each chunk stores U's rows once per distinct vertex of its
elements' stencils (Uc (rows, r), chunk c's vertices voff[c] .. voff[c + 1], padded to a multiple of 3; slot (k, S)
each stencil slot's vertex within its chunk). A chunk gathers its vertices once, adds its elements' weighted forces
onto them, and projects once: for 800 random triangles of a 14k-triangle trash can that is 20 % fewer rows than
one copy per element, and the step streams these rows from memory.

Precision: U_V may be stored as float32 (CompiledCubature's ``precision``); every product and sum is still float64.
A step streams U_V from memory once (17.6 MiB at k = 800, r = 200 in float64: more than the L2 caches, so the
step is bound by the L3's bandwidth), and float32 halves that traffic. Rounding U to float32 is a change of basis
by 6e-8 relative, the same rounded basis being used in the gather and the projection: the force stays the exact
Galerkin force of the rounded basis (symmetric, conservative), not a noisy one.

Determinism: elements are split into fixed chunks of ``CHUNK`` consecutive elements whatever the thread count;
each chunk sums its elements' weighted forces in element order and projects them into its own row, and the rows
are summed in chunk order, so the result is bitwise the same on 1 or many threads.

SI units: positions [m], forces [N], q [m sqrt(kg)], U [1/sqrt(kg)], reduced forces [N/sqrt(kg)].
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

CHUNK = 16          # elements per chunk of the parallel sum (fixed: the sum order must not depend on threads), and
                    # the SIMD block of chunk_forces
RUNS = 16           # runs of chunks cubature_force hands to its threads (fixed: not the thread count)
NG_HINGE = 10       # per hinge and element in chunk_forces' scratch: atan2's arguments, gc (3), gd (3), lc, ld

_TWO_PI = 2.0 * math.pi


@njit(cache=True, nogil=True, inline="always")
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _flap_angles(x, f, th0, interior, d, J):
    """Bending-angle changes d[f] (3,) [rad] at the hinges of flap f, whose 6 stencil slots are rows 6 f .. 6 f + 5
    of x (face vertices, then the apexes across edges 0, 1, 2), and their gradients J[f] (3, 6, 3) [1/m] over
    those slots; th0[f] (3,) the rest angles, interior[f] (3,) bool (a free edge: d = 0, its J row is not
    written)."""
    s0 = 6 * f
    for k in range(3):
        if not interior[f, k]:
            d[f, k] = 0.0
            continue
        ia = s0 + k
        ib = s0 + (k + 1) % 3
        ic = s0 + (k + 2) % 3
        idd = s0 + 3 + k
        xa0, xa1, xa2 = x[ia, 0], x[ia, 1], x[ia, 2]
        ex, ey, ez = x[ib, 0] - xa0, x[ib, 1] - xa1, x[ib, 2] - xa2
        cx, cy, cz = x[ic, 0] - xa0, x[ic, 1] - xa1, x[ic, 2] - xa2
        dx, dy, dz = x[idd, 0] - xa0, x[idd, 1] - xa1, x[idd, 2] - xa2
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
        # (th - th0 + pi) mod 2 pi, as NumPy's float modulo: th, th0 lie in [-pi, pi], so t in [-pi, 3 pi] needs
        # at most one step of 2 pi, and t - 2 pi is exact for t >= 2 pi (Sterbenz): the bits of fmod without its cost
        t = th - th0[f, k] + math.pi
        if t >= _TWO_PI:
            t -= _TWO_PI
        elif t < 0.0:
            t += _TWO_PI
        d[f, k] = t - math.pi
        for sl in range(6):
            for c in range(3):
                J[f, k, sl, c] = 0.0
        sc = L / A1
        sd = L / A2
        gcx, gcy, gcz = n1x * sc, n1y * sc, n1z * sc
        gdx, gdy, gdz = n2x * sd, n2y * sd, n2z * sd
        lc = (cx * ex + cy * ey + cz * ez) / L2
        ld = (dx * ex + dy * ey + dz * ez) / L2
        jc = (k + 2) % 3
        jb = (k + 1) % 3
        J[f, k, jc, 0], J[f, k, jc, 1], J[f, k, jc, 2] = gcx, gcy, gcz
        J[f, k, 3 + k, 0], J[f, k, 3 + k, 1], J[f, k, 3 + k, 2] = gdx, gdy, gdz
        J[f, k, k, 0] = -((1.0 - lc) * gcx + (1.0 - ld) * gdx)
        J[f, k, k, 1] = -((1.0 - lc) * gcy + (1.0 - ld) * gdy)
        J[f, k, k, 2] = -((1.0 - lc) * gcz + (1.0 - ld) * gdz)
        J[f, k, jb, 0] = -(lc * gcx + ld * gdx)
        J[f, k, jb, 1] = -(lc * gcy + ld * gdy)
        J[f, k, jb, 2] = -(lc * gcz + ld * gdz)


@njit(cache=True, nogil=True, inline="always")
def _membrane_stress(F00, F01, F10, F11, F20, F21, Qm, c_m):
    """P = F sigma (3x2, row-major) of the deformation gradient F (3x2): Green strain eps = (F^T F - I)/2 in Voigt
    (e11, e22, e12), sigma = 2 c_m Q eps (the membrane energy c_m A eps^T Q eps)."""
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
    return (F00 * sg00 + F01 * sg01, F00 * sg01 + F01 * sg11, F10 * sg00 + F11 * sg01, F10 * sg01 + F11 * sg11,
            F20 * sg00 + F21 * sg01, F20 * sg01 + F21 * sg11)


# error_model="numpy": divisions without Python's zero checks (about 20 % of the element's time, measured); a
# triangle folded flat gives inf/NaN, which the callers report (CompiledCubature, the renderer's non-finite check)
@njit(cache=True, nogil=True, error_model="numpy")
def element_force(x, gN, Rb, Qm, th0, interior, A, c_m, c_b, fm, fb, J, dth):
    """One triangle's share of f_int (Chadwick, An & James 2009, sec. 2.3; the model of ShellModel, either
    bending scheme).

    x (S, 3): stencil positions [m], S = 6 nf: the nf flaps the triangle's bending reads, 6 slots each (face
    vertices, then the apexes of edges 0, 1, 2; a free edge's slot holds any finite point, it gets zero force);
    the first flap is the triangle's own ("flap": nf = 1; "midedge": nf = 4, itself and its neighbours across
    edges 0, 1, 2). gN (3, 2): shape-function gradients; Rb (3, nf, 3): eps_b = sum_f Rb[:, f] dtheta_f;
    Qm (3, 3); th0 (nf, 3) the flaps' rest angles; interior (nf, 3) bool (all False for a missing neighbour).
    A rest area [m^2]; c_m [N/m], c_b [N m] the energy coefficients. Writes fm (3, 3) [N] on the face vertices
    and fb (S, 3) [N] on the stencil; J (>= nf, 3, 6, 3) and dth (>= nf, 3) are scratch.
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
    # P = F sigma (3x2); fm_k = A P gN_k
    P00, P01, P10, P11, P20, P21 = _membrane_stress(F00, F01, F10, F11, F20, F21, Qm, c_m)
    for k in range(3):
        g0 = gN[k, 0]
        g1 = gN[k, 1]
        fm[k, 0] = A * (P00 * g0 + P01 * g1)
        fm[k, 1] = A * (P10 * g0 + P11 * g1)
        fm[k, 2] = A * (P20 * g0 + P21 * g1)

    # bending: signed dihedral angles of every flap read, eps_b = sum_f Rb_f dtheta_f; dE/dtheta_f = 2 c_b A
    # Rb_f^T Q eps_b, spread over each flap's slots by the angle gradients
    nf = Rb.shape[1]
    b0 = b1 = b2 = 0.0
    for f in range(nf):
        _flap_angles(x, f, th0, interior, dth, J)
        for k in range(3):
            dk = dth[f, k]
            b0 += Rb[0, f, k] * dk
            b1 += Rb[1, f, k] * dk
            b2 += Rb[2, f, k] * dk
    Q0 = Qm[0, 0] * b0 + Qm[0, 1] * b1 + Qm[0, 2] * b2
    Q1 = Qm[1, 0] * b0 + Qm[1, 1] * b1 + Qm[1, 2] * b2
    Q2 = Qm[2, 0] * b0 + Qm[2, 1] * b1 + Qm[2, 2] * b2
    cb = 2.0 * c_b * A
    for sl in range(fb.shape[0]):
        for c in range(3):
            fb[sl, c] = 0.0
    for f in range(nf):
        for k in range(3):
            mk = cb * (Rb[0, f, k] * Q0 + Rb[1, f, k] * Q1 + Rb[2, f, k] * Q2)
            if mk == 0.0 or not interior[f, k]:
                continue
            for sl in range(6):
                for c in range(3):
                    fb[6 * f + sl, c] += mk * J[f, k, sl, c]


# error_model="numpy" as element_force. Indices are unsigned (np.uint64): Numba then skips its negative-index
# wrap-around, and the offsets of a loop's stores differ by constants, which lets LLVM vectorise the loops over the
# chunk's elements (with signed indices or 2-D views it gave up: too many possible overlaps to check).
@njit(cache=True, nogil=True, error_model="numpy")
def chunk_forces(xs, ne, S, nf, gN, Rb, Qm, th0, interior, A, c_m, c_b, fs, G, TH, D, MK, FM, BQ):
    """element_force for the ne <= CHUNK elements of a chunk at once, laid out structure-of-arrays (element index
    fastest, stride CHUNK) so that each step of the formula runs in SIMD lanes across the elements; the same
    operations in the same order per element, so the same bits as element_force (tested).

    Flat inputs: xs[(s 3 + c) CHUNK + e] stencil positions [m] (S slots); gN[(k 2 + j) CHUNK + e];
    Rb[((i nf + f) 3 + k) CHUNK + e]; th0, interior [(f 3 + k) CHUNK + e]; A[e]. Writes fs[(s 3 + c) CHUNK + e]
    = fb + fm [N] (the membrane force on the face slots 0-2 added last, as the callers of element_force do).
    Scratch: G (nf 3 NG CHUNK), TH (CHUNK), D, MK (nf 3 CHUNK), FM (9 CHUNK), BQ (4 CHUNK). The hinges' atan2
    is the one scalar loop (libm has no SIMD atan2 here)."""
    U = np.uint64
    C = U(CHUNK)
    # membrane (Green strain), as element_force
    for e_ in range(ne):
        e = U(e_)
        F00 = F01 = F10 = F11 = F20 = F21 = 0.0
        for k_ in range(3):
            k = U(k_)
            g0 = gN[(U(2) * k) * C + e]
            g1 = gN[(U(2) * k + U(1)) * C + e]
            x0 = xs[(U(3) * k) * C + e]
            x1 = xs[(U(3) * k + U(1)) * C + e]
            x2 = xs[(U(3) * k + U(2)) * C + e]
            F00 += x0 * g0
            F01 += x0 * g1
            F10 += x1 * g0
            F11 += x1 * g1
            F20 += x2 * g0
            F21 += x2 * g1
        P00, P01, P10, P11, P20, P21 = _membrane_stress(F00, F01, F10, F11, F20, F21, Qm, c_m)
        a = A[e]
        for k_ in range(3):
            k = U(k_)
            g0 = gN[(U(2) * k) * C + e]
            g1 = gN[(U(2) * k + U(1)) * C + e]
            FM[(U(3) * k) * C + e] = a * (P00 * g0 + P01 * g1)
            FM[(U(3) * k + U(1)) * C + e] = a * (P10 * g0 + P11 * g1)
            FM[(U(3) * k + U(2)) * C + e] = a * (P20 * g0 + P21 * g1)
    # bending, per hinge: its geometry (SIMD over the elements), the angle (scalar atan2), the wrapped change
    for f_ in range(nf):
        for k_ in range(3):
            fk = U(3 * f_ + k_)
            oa = U(3 * (6 * f_ + k_)) * C
            ob = U(3 * (6 * f_ + (k_ + 1) % 3)) * C
            oc = U(3 * (6 * f_ + (k_ + 2) % 3)) * C
            od = U(3 * (6 * f_ + 3 + k_)) * C
            og = fk * U(NG_HINGE) * C
            for e_ in range(ne):
                e = U(e_)
                xa0 = xs[oa + e]
                xa1 = xs[oa + C + e]
                xa2 = xs[oa + U(2) * C + e]
                ex = xs[ob + e] - xa0
                ey = xs[ob + C + e] - xa1
                ez = xs[ob + U(2) * C + e] - xa2
                cx = xs[oc + e] - xa0
                cy = xs[oc + C + e] - xa1
                cz = xs[oc + U(2) * C + e] - xa2
                dx = xs[od + e] - xa0
                dy = xs[od + C + e] - xa1
                dz = xs[od + U(2) * C + e] - xa2
                L2 = ex * ex + ey * ey + ez * ez
                L = math.sqrt(L2)
                N1x = ey * cz - ez * cy
                N1y = ez * cx - ex * cz
                N1z = ex * cy - ey * cx
                ax, ay, az = -ex, -ey, -ez
                bx, by, bz = dx - ex, dy - ey, dz - ez
                N2x = ay * bz - az * by
                N2y = az * bx - ax * bz
                N2z = ax * by - ay * bx
                A1 = math.sqrt(N1x * N1x + N1y * N1y + N1z * N1z)
                A2 = math.sqrt(N2x * N2x + N2y * N2y + N2z * N2z)
                n1x, n1y, n1z = N1x / A1, N1y / A1, N1z / A1
                n2x, n2y, n2z = N2x / A2, N2y / A2, N2z / A2
                mx = n2y * n1z - n2z * n1y
                my = n2z * n1x - n2x * n1z
                mz = n2x * n1y - n2y * n1x
                G[og + e] = (mx * ex + my * ey + mz * ez) / L
                G[og + C + e] = n1x * n2x + n1y * n2y + n1z * n2z
                sc = L / A1
                sd = L / A2
                G[og + U(2) * C + e] = n1x * sc
                G[og + U(3) * C + e] = n1y * sc
                G[og + U(4) * C + e] = n1z * sc
                G[og + U(5) * C + e] = n2x * sd
                G[og + U(6) * C + e] = n2y * sd
                G[og + U(7) * C + e] = n2z * sd
                G[og + U(8) * C + e] = (cx * ex + cy * ey + cz * ez) / L2
                G[og + U(9) * C + e] = (dx * ex + dy * ey + dz * ez) / L2
            for e_ in range(ne):
                e = U(e_)
                TH[e] = math.atan2(G[og + e], G[og + C + e])
            of = fk * C
            for e_ in range(ne):
                e = U(e_)
                t = TH[e] - th0[of + e] + math.pi
                if t >= _TWO_PI:
                    t -= _TWO_PI
                elif t < 0.0:
                    t += _TWO_PI
                D[of + e] = t - math.pi if interior[of + e] else 0.0
    # eps_b = sum_f Rb_f dtheta_f and its stress Q eps_b (BQ rows 0-2), 2 c_b A (row 3)
    for e_ in range(ne):
        e = U(e_)
        BQ[e] = 0.0
        BQ[C + e] = 0.0
        BQ[U(2) * C + e] = 0.0
    nfk = U(3 * nf)
    for fk_ in range(3 * nf):
        fk = U(fk_)
        for e_ in range(ne):
            e = U(e_)
            dk = D[fk * C + e]
            BQ[e] += Rb[fk * C + e] * dk
            BQ[C + e] += Rb[(nfk + fk) * C + e] * dk
            BQ[U(2) * C + e] += Rb[(U(2) * nfk + fk) * C + e] * dk
    for e_ in range(ne):
        e = U(e_)
        b0 = BQ[e]
        b1 = BQ[C + e]
        b2 = BQ[U(2) * C + e]
        BQ[e] = Qm[0, 0] * b0 + Qm[0, 1] * b1 + Qm[0, 2] * b2
        BQ[C + e] = Qm[1, 0] * b0 + Qm[1, 1] * b1 + Qm[1, 2] * b2
        BQ[U(2) * C + e] = Qm[2, 0] * b0 + Qm[2, 1] * b1 + Qm[2, 2] * b2
        BQ[U(3) * C + e] = 2.0 * c_b * A[e]
    # each live hinge's moment mk, spread over the flap's slots by the angle's gradient (zero on a free edge)
    for q_ in range(3 * S):
        for e_ in range(ne):
            fs[U(q_) * C + U(e_)] = 0.0
    for f_ in range(nf):
        for k_ in range(3):
            fk = U(3 * f_ + k_)
            of = fk * C
            og = fk * U(NG_HINGE) * C
            for e_ in range(ne):
                e = U(e_)
                mk = BQ[U(3) * C + e] * (Rb[of + e] * BQ[e] + Rb[(nfk + fk) * C + e] * BQ[C + e]
                                         + Rb[(U(2) * nfk + fk) * C + e] * BQ[U(2) * C + e])
                MK[of + e] = mk if interior[of + e] else 0.0
            # slot roles: c (the face's third vertex), d (the apex), a and b (the hinge's ends)
            for role in range(4):
                if role == 0:
                    slot = 6 * f_ + (k_ + 2) % 3
                elif role == 1:
                    slot = 6 * f_ + 3 + k_
                elif role == 2:
                    slot = 6 * f_ + k_
                else:
                    slot = 6 * f_ + (k_ + 1) % 3
                os_ = U(3 * slot) * C
                for e_ in range(ne):
                    e = U(e_)
                    m = MK[of + e]
                    gcx = G[og + U(2) * C + e]
                    gcy = G[og + U(3) * C + e]
                    gcz = G[og + U(4) * C + e]
                    gdx = G[og + U(5) * C + e]
                    gdy = G[og + U(6) * C + e]
                    gdz = G[og + U(7) * C + e]
                    lc = G[og + U(8) * C + e]
                    ld = G[og + U(9) * C + e]
                    if role == 0:
                        jx, jy, jz = gcx, gcy, gcz
                    elif role == 1:
                        jx, jy, jz = gdx, gdy, gdz
                    elif role == 2:
                        jx = -((1.0 - lc) * gcx + (1.0 - ld) * gdx)
                        jy = -((1.0 - lc) * gcy + (1.0 - ld) * gdy)
                        jz = -((1.0 - lc) * gcz + (1.0 - ld) * gdz)
                    else:
                        jx = -(lc * gcx + ld * gdx)
                        jy = -(lc * gcy + ld * gdy)
                        jz = -(lc * gcz + ld * gdz)
                    live = m != 0.0
                    fs[os_ + e] += m * jx if live else 0.0
                    fs[os_ + C + e] += m * jy if live else 0.0
                    fs[os_ + U(2) * C + e] += m * jz if live else 0.0
    for q_ in range(9):
        for e_ in range(ne):
            e = U(e_)
            q = U(q_)
            fs[q * C + e] += FM[q * C + e]


@njit(cache=True, nogil=True)
def nodal_forces(xs, gN, R, Qm, th0, interior, A, c_m, c_b):
    """element_force over elements: xs (k, S, 3) stencil positions -> fm (k, 3, 3), fb (k, S, 3) [N]."""
    k, S = xs.shape[0], xs.shape[1]
    fm = np.empty((k, 3, 3))
    fb = np.empty((k, S, 3))
    J = np.empty((4, 3, 6, 3))
    dth = np.empty((4, 3))
    for e in range(k):
        element_force(xs[e], gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, fm[e], fb[e], J, dth)
    return fm, fb


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _gather(Ue, X0, q, x):
    """x (n, 3) = X0 (3 n,) + Ue (3 n, r) q, accumulated in float64 whatever Ue's float type (3 n a multiple of 9).

    Nine rows at a time in one pass over r (nine running sums): each q[p] is loaded once per nine rows, and the
    sums vectorise over p (the r-sum order is fixed per build: deterministic). Measured on the trash-can bench,
    this halved the gather's time against one dot product per row when Ue sits in cache."""
    r = q.shape[0]
    for o in range(0, Ue.shape[0], 9):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = 0.0
        for p in range(r):
            qp = q[p]
            a0 += np.float64(Ue[o, p]) * qp
            a1 += np.float64(Ue[o + 1, p]) * qp
            a2 += np.float64(Ue[o + 2, p]) * qp
            a3 += np.float64(Ue[o + 3, p]) * qp
            a4 += np.float64(Ue[o + 4, p]) * qp
            a5 += np.float64(Ue[o + 5, p]) * qp
            a6 += np.float64(Ue[o + 6, p]) * qp
            a7 += np.float64(Ue[o + 7, p]) * qp
            a8 += np.float64(Ue[o + 8, p]) * qp
        v = o // 3                                       # rows o .. o + 8 are vertices v .. v + 2
        x[v, 0] = X0[o] + a0
        x[v, 1] = X0[o + 1] + a1
        x[v, 2] = X0[o + 2] + a2
        x[v + 1, 0] = X0[o + 3] + a3
        x[v + 1, 1] = X0[o + 4] + a4
        x[v + 1, 2] = X0[o + 5] + a5
        x[v + 2, 0] = X0[o + 6] + a6
        x[v + 2, 1] = X0[o + 7] + a7
        x[v + 2, 2] = X0[o + 8] + a8


@njit(cache=True, nogil=True, fastmath={"contract"})
def _project_add(Ue, f, out):
    """out (r,) += Ue^T f, f the (n, 3) force on the element's distinct vertices, in float64 whatever Ue's float
    type: nine rows of Ue per pass over out, each pass vectorised over r (no reduction across r; fixed order:
    deterministic)."""
    r = out.shape[0]
    for o in range(0, Ue.shape[0], 9):
        v = o // 3
        b0, b1, b2 = f[v, 0], f[v, 1], f[v, 2]
        b3, b4, b5 = f[v + 1, 0], f[v + 1, 1], f[v + 1, 2]
        b6, b7, b8 = f[v + 2, 0], f[v + 2, 1], f[v + 2, 2]
        for p in range(r):
            out[p] += (b0 * np.float64(Ue[o, p]) + b1 * np.float64(Ue[o + 1, p]) + b2 * np.float64(Ue[o + 2, p])
                       + b3 * np.float64(Ue[o + 3, p]) + b4 * np.float64(Ue[o + 4, p])
                       + b5 * np.float64(Ue[o + 5, p]) + b6 * np.float64(Ue[o + 6, p])
                       + b7 * np.float64(Ue[o + 7, p]) + b8 * np.float64(Ue[o + 8, p]))


@njit(cache=True, nogil=True)
def _element_onto(xu, slot, gN, R, Qm, th0, interior, A, c_m, c_b, w, x, fm, fb, fu, J, dth):
    """fu (n, 3) += w x the element's force [N] on the chunk's distinct vertices, at their positions xu (n, 3):
    lay them on the S stencil slots (slot (S,): each slot's row in xu; the "midedge" stencil repeats vertices),
    evaluate, and add the slots' forces back onto the distinct vertices."""
    S = slot.shape[0]
    for sl in range(S):
        i = slot[sl]
        x[sl, 0] = xu[i, 0]
        x[sl, 1] = xu[i, 1]
        x[sl, 2] = xu[i, 2]
    element_force(x, gN, R, Qm, th0, interior, A, c_m, c_b, fm, fb, J, dth)
    for s in range(3):
        for c in range(3):
            fb[s, c] += fm[s, c]
    for sl in range(S):
        i = slot[sl]
        fu[i, 0] += w * fb[sl, 0]
        fu[i, 1] += w * fb[sl, 1]
        fu[i, 2] += w * fb[sl, 2]


@njit(cache=True, nogil=True)
def _chunk_onto(xu, slot, e0, ne, w, gN, R, Qm, th0, interior, A, c_m, c_b, fu, xs, fs, G, TH, D, MK, FM, BQ):
    """fu (n, 3) += sum over the chunk's elements e0 .. e0 + ne - 1 of w_e x their forces [N] on the chunk's
    distinct vertices (positions xu (n, 3)), in element order then slot order (the order of _element_onto: the
    same bits). gN .. A: the chunk's rows of the structure-of-arrays data (CompiledCubature.kernel_args); xs .. BQ
    chunk_forces' scratch (_scratch)."""
    S = slot.shape[1]
    nf = S // 6
    for e in range(ne):
        for sl in range(S):
            i = slot[e0 + e, sl]
            for c in range(3):
                xs[(3 * sl + c) * CHUNK + e] = xu[i, c]
    chunk_forces(xs, ne, S, nf, gN, R, Qm, th0, interior, A, c_m, c_b, fs, G, TH, D, MK, FM, BQ)
    for e in range(ne):
        we = w[e0 + e]
        for sl in range(S):
            i = slot[e0 + e, sl]
            for c in range(3):
                fu[i, c] += we * fs[(3 * sl + c) * CHUNK + e]


@njit(cache=True, nogil=True)
def _scratch(S):
    """chunk_forces' scratch for S-slot stencils: (xs, fs, G, TH, D, MK, FM, BQ)."""
    nf = S // 6
    return (np.empty(S * 3 * CHUNK), np.empty(S * 3 * CHUNK), np.empty(nf * 3 * NG_HINGE * CHUNK), np.empty(CHUNK),
            np.empty(nf * 3 * CHUNK), np.empty(nf * 3 * CHUNK), np.empty(9 * CHUNK), np.empty(4 * CHUNK))


@njit(cache=True, nogil=True)
def reduced_element_forces(Uc, X0c, voff, slot, q, gN, R, Qm, th0, interior, A, c_m, c_b):
    """Unweighted g_i(q) = U_V^T f_V(X_V + U_V q) of every element (in the stored order): (k, r) [N/sqrt(kg)]."""
    k, r = slot.shape[0], Uc.shape[1]
    S = slot.shape[1]
    out = np.zeros((k, r))
    x = np.empty((S, 3))
    fm = np.empty((3, 3))
    fb = np.empty((S, 3))
    J = np.empty((4, 3, 6, 3))
    dth = np.empty((4, 3))
    for e in range(k):
        c = e // CHUNK
        a, b = 3 * voff[c], 3 * voff[c + 1]
        n = voff[c + 1] - voff[c]
        xu = np.empty((n, 3))
        fu = np.zeros((n, 3))
        _gather(Uc[a:b], X0c[a:b], q, xu)
        _element_onto(xu, slot[e], gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, 1.0, x, fm, fb, fu, J,
                      dth)
        _project_add(Uc[a:b], fu, out[e])
    return out


@njit(cache=True, nogil=True, parallel=True)
def cubature_force(Uc, X0c, voff, slot, q, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, out):
    """sum_e w_e g_e(q) into out (r,); part (n_chunks, r) is scratch. Per chunk of CHUNK consecutive elements:
    gather its distinct vertices once, add its elements' weighted forces onto them (chunk_forces: SIMD across the
    chunk's elements), project once into its own row of part; then an ordered sum over chunks (bitwise
    independent of the thread count). The chunks are dealt out in RUNS runs of consecutive ones (in parallel),
    each allocating its scratch once (allocating it per chunk cost 4-8 % of a step). gN, R, th0, interior, A: per
    chunk, structure-of-arrays (CompiledCubature.kernel_args)."""
    k, r = slot.shape[0], Uc.shape[1]
    nch = part.shape[0]
    nt = min(nch, RUNS)
    nmax = 0
    for c in range(nch):
        nmax = max(nmax, voff[c + 1] - voff[c])
    for t in prange(nt):
        xu_t = np.empty((nmax, 3))
        fu_t = np.empty((nmax, 3))
        xs, fs, G, TH, D, MK, FM, BQ = _scratch(slot.shape[1])
        for c in range((nch * t) // nt, (nch * (t + 1)) // nt):
            a, b = 3 * voff[c], 3 * voff[c + 1]
            n = voff[c + 1] - voff[c]
            xu = xu_t[:n]
            fu = fu_t[:n]
            fu[:] = 0.0
            _gather(Uc[a:b], X0c[a:b], q, xu)
            e0 = c * CHUNK
            _chunk_onto(xu, slot, e0, min(k, e0 + CHUNK) - e0, w, gN[c], R[c], Qm, th0[c], interior[c], A[c], c_m,
                        c_b, fu, xs, fs, G, TH, D, MK, FM, BQ)
            row = part[c]
            for p in range(r):
                row[p] = 0.0
            _project_add(Uc[a:b], fu, row)
    for p in range(r):
        out[p] = 0.0
    for c in range(nch):
        for p in range(r):
            out[p] += part[c, p]


@njit(cache=False, nogil=True)     # calls the parallel cubature_force: not cacheable (numba issue #8578)
def newmark_free(Uc, X0c, voff, slot, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, q, v, fint, dt, d,
                 n_steps):
    """n_steps explicit central-difference Newmark steps (the variant of dynamics.integrate, no load) with the
    cubature force, in place on q, v and fint (= f~(q) on entry and exit)."""
    h = 0.5 * dt
    r = q.shape[0]
    acc = np.empty(r)
    for _ in range(n_steps):
        for p in range(r):
            acc[p] = -d[p] * v[p] - fint[p]
            q[p] += dt * v[p] + h * dt * acc[p]
        cubature_force(Uc, X0c, voff, slot, q, w, gN, R, Qm, th0, interior, A, c_m, c_b, part, fint)
        for p in range(r):
            v[p] = (v[p] + h * acc[p] - h * fint[p]) / (1.0 + h * d[p])
