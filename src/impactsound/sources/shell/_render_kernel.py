"""Compiled time stepping of a struck shell: scheduled contact impulses through the limiter, explicit Newmark,
modal accelerations out (the kernel of sources/shell/render.py).

The scheme is exactly that of :func:`impactsound.sources.shell.dynamics.integrate` (central difference, damping at
the new velocity, Chadwick, An & James 2009, sec. 2.3; impulse limiter of sec. 3, Algorithm 1), with the force

    f(q) = Lambda' q                                  (linear)
    f(q) = Lambda' q + sum_i w_i g_i(q) - K_c q       (nonlinear: cubature, its own linear part K_c replaced)

On a quadratic manifold (``pairs`` non-empty, sources/shell/manifold.py) the cubature evaluates the basis
[U | Psi] at the coordinates [q, c(q)] and its pairs' rows are folded onto q: g = J(q)^T f_int(U q + Psi c(q)).
(render.py explains Lambda' and K_c). The acceleration recorded at step n is q''_n = alpha_n f_ext,n - D v_n -
f(q_n), with v_n after the impulse of step n (also recorded where the radiation needs it, render.py).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._cubature_kernel import cubature_force
from .dynamics import _limiter_alpha


# Not cached (cache=False) on purpose: these call the parallel cubature_force, and a cached non-parallel function
# that calls a parallel one segfaults when it is loaded from Numba's cache in a later process (numba issue #8578,
# reproduced here with numba 0.68: the second render of a shell crashed). They compile in each process instead.
@njit(cache=False, nogil=True)
def _force(q, w2, nonlinear, Kc, Ue, X0, voff, slot, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, pairs, out,
           tmp, qa):
    r = q.shape[0]
    if nonlinear:
        P = pairs.shape[0]
        if P > 0:
            for a in range(r):
                qa[a] = q[a]
            for p in range(P):
                i = pairs[p, 0]
                j = pairs[p, 1]
                qa[r + p] = (0.5 if i == j else 1.0) * q[i] * q[j]
            cubature_force(Ue, X0, voff, slot, qa, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, tmp)
            for p in range(P):
                i = pairs[p, 0]
                j = pairs[p, 1]
                g = tmp[r + p]
                tmp[i] += q[j] * g
                if i != j:
                    tmp[j] += q[i] * g
        else:
            cubature_force(Ue, X0, voff, slot, q, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, tmp)
        for a in range(r):
            s = tmp[a] + w2[a] * q[a]
            for b in range(r):
                s -= Kc[a, b] * q[b]
            out[a] = s
    else:
        for a in range(r):
            out[a] = w2[a] * q[a]


@njit(cache=False, nogil=True)
def run_block(q, v, fint, dt, w2, d, nonlinear, Kc, Ue, X0, voff, slot, wts, gN, R, Qm, th0, interior, A, c_m, c_b,
              part, pairs, n0, sched_step, sched_f, k0, e_max, alphas, branches, qdd, vel):
    """Steps n0 .. n0 + len(qdd) - 1 in place on (q, v, fint = f(q)); scheduled impulses sched_f[k] (force
    [N/sqrt(kg)] held over step sched_step[k], ascending) from index k0; returns the next schedule index.
    alphas/branches get the limiter's factor and branch per schedule row. qdd (nb, r) receives q''_n; vel
    (nb, r), unless it has no rows, receives v_n (the velocity q''_n is taken at). pairs (P, 2): the modal
    derivatives' mode pairs of a quadratic-manifold basis (none: the paper's linear basis)."""
    r = q.shape[0]
    h = 0.5 * dt
    acc = np.empty(r)
    fe = np.zeros(r)
    tmp = np.empty(r + pairs.shape[0])
    qa = np.empty(r + pairs.shape[0])
    k = k0
    K = sched_step.shape[0]
    want_v = vel.shape[0] > 0
    for i in range(qdd.shape[0]):
        n = n0 + i
        have = False
        if k < K and sched_step[k] == n:
            have = True
            vv = 0.0
            vdv = 0.0
            dvdv = 0.0
            pot = 0.0
            for a in range(r):
                dv = dt * sched_f[k, a]
                vv += v[a] * v[a]
                vdv += v[a] * dv
                dvdv += dv * dv
                pot += w2[a] * q[a] * q[a]
            al, br = _limiter_alpha(vv, vdv, dvdv, pot, e_max)
            alphas[k] = al
            branches[k] = br
            for a in range(r):
                fe[a] = al * sched_f[k, a]
                v[a] += dt * fe[a]
            k += 1
        for a in range(r):
            acc[a] = -d[a] * v[a] - fint[a]
            qdd[i, a] = acc[a] + (fe[a] if have else 0.0)
            if want_v:
                vel[i, a] = v[a]
            q[a] += dt * v[a] + h * dt * acc[a]
        _force(q, w2, nonlinear, Kc, Ue, X0, voff, slot, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, pairs,
               fint, tmp, qa)
        for a in range(r):
            v[a] = (v[a] + h * acc[a] - h * fint[a]) / (1.0 + h * d[a])
        if not math.isfinite(q[0]):
            return -1
    return k


@njit(cache=False, nogil=True)
def force_of(q, w2, nonlinear, Kc, Ue, X0, voff, slot, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, pairs):
    """f(q) (module docstring) as a new array."""
    out = np.empty(q.shape[0])
    tmp = np.empty(q.shape[0] + pairs.shape[0])
    qa = np.empty(q.shape[0] + pairs.shape[0])
    _force(q, w2, nonlinear, Kc, Ue, X0, voff, slot, wts, gN, R, Qm, th0, interior, A, c_m, c_b, part, pairs, out,
           tmp, qa)
    return out
