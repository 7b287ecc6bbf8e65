"""A reduced shell basis without membrane locking: modal derivatives and the quadratic manifold.

Why. The Harmonic Shells model (Chadwick, An & James 2009, sec. 2.2) reduces the shell to its lowest linear modes,
u = U q. Those modes are bending modes; when a mode bends a curved or a flat shell to a finite amplitude, its
mid-surface must stretch unless in-plane displacements (quadratic in the amplitude) let it relax. A linear basis
has no such directions, so the reduced model pays the full membrane energy: the nonlinear stiffening it predicts
is mostly locking (the paper names it, sec. 3, and bounds the energy with its impulse limiter). Measured on a free
disk, the (2,0) mode's backbone coefficient is 13x too stiff.

What. Modal derivatives (Idelsohn & Cardona 1985; Barbic & James 2005, "Real-Time Subspace Integration for
St. Venant-Kirchhoff Deformable Models", sec. 4) are the second-order static response of the shell to a pair of
modes: differentiating the equilibrium K(u) u = f along phi_i and phi_j gives

    K Psi_ij = - H(phi_i, phi_j),          H(a, b) = d^2 f_int / du^2 [a, b]

(H by a central difference of the exact internal force). The quadratic manifold (Jain, Tiso, Rutzmoser & Rixen
2017, "A quadratic manifold for model order reduction of nonlinear structural dynamics") uses them as the second-
order term of the displacement,

    u(q) = U q + 1/2 sum_{i, j < k} Psi_ij q_i q_j,

keeping r coordinates (no stiff membrane coordinate, so the explicit audio-rate step is unchanged), with the
reduced force f~(q) = J(q)^T f_int(u(q)), J = du/dq = U + sum_j Psi_ij q_j. For a plate this is exactly the von
Karman condensation of the in-plane displacements at leading order; for a curved shell it is the static
condensation to second order. The manifold's extra inertia (J^T M J - I, second order in q) is neglected, as in
Jain et al.: the in-plane motion it slaves is far faster than the bending it follows.

Psi_ij is M-orthogonalised against the kept modes U (their share is a dynamic coordinate already) and the rigid
modes (a free shell's stiffness is singular on them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ...errors import InputError, SolverError


def rigid_modes(model) -> np.ndarray:
    """The rigid-body motions of a free shell, (3 Nv, 6 n_components), M-orthonormal: three translations and three
    infinitesimal rotations about each connected piece's centroid."""
    from scipy.sparse.csgraph import connected_components
    V = np.asarray(model.vertices, np.float64)
    F = np.asarray(model.faces, np.int64)
    n = len(V)
    adj = sp.coo_matrix((np.ones(F.size), (np.repeat(F[:, 0], 3), F.ravel())), shape=(n, n))
    ncomp, label = connected_components(adj + adj.T, directed=False)
    M = model.mass()
    cols = []
    for c in range(ncomp):
        on = (label == c).astype(np.float64)
        x = V - V[label == c].mean(axis=0)
        for d in range(3):
            t = np.zeros((n, 3))
            t[:, d] = on
            cols.append(t.ravel())
        for d in range(3):
            axis = np.zeros(3)
            axis[d] = 1.0
            cols.append((np.cross(axis, x) * on[:, None]).ravel())
    R = np.stack(cols, axis=1)
    # M-orthonormal (a Cholesky of the 6 x 6 Gram matrix per piece; pieces are M-orthogonal already)
    G = R.T @ (M @ R)
    L = np.linalg.cholesky(G)
    return np.linalg.solve(L, R.T).T


class _FreeSolver:
    """x with K x = b and x M-orthogonal to the rigid modes R, for a b orthogonal to R (b is projected first).

    A free shell's K is singular on R, so K + delta M (delta = 1e-3 of the lowest elastic omega^2) is factorised
    once and the shift removed by iterative refinement: each step multiplies the error by delta / (lambda + delta)
    <= 1e-3 on every elastic mode."""

    def __init__(self, model, omega1: float):
        self.K = model.stiffness().tocsc()
        self.M = model.mass().tocsc()
        self.R = rigid_modes(model)
        self.MR = self.M @ self.R
        self.delta = 1e-3 * float(omega1) ** 2
        self.lu = spla.splu((self.K + self.delta * self.M).tocsc())

    def project(self, b):
        return b - self.MR @ (self.R.T @ b)

    def __call__(self, b, steps: int = 4):
        b = self.project(np.asarray(b, np.float64))
        x = np.zeros_like(b)
        for _ in range(steps):
            x = x + self.lu.solve(b - self.K @ x)
            x = x - self.R @ (self.MR.T @ x)
        return x


def force_hessian(model, a, b, step: float) -> np.ndarray:
    """H(a, b) = d^2 f_int / du^2 [a, b] (3 Nv,) by the central difference of the exact internal force,
    [f(s(a+b)) - f(s(a-b)) - f(-s(a-b)) + f(-s(a+b))] / (4 s^2): second order in s, ``step`` = s."""
    f = model.internal_force
    s = float(step)
    p, m = a + b, a - b
    return (f(s * p) - f(s * m) - f(-s * m) + f(-s * p)) / (4.0 * s * s)


@dataclass
class ModalDerivatives:
    """Psi (3 Nv, P): the pairs' modal derivatives [1/(m kg)] (u [m] = Psi c(q), q [m sqrt(kg)]); pairs (P, 2)
    int: mode indices i <= j < k."""

    Psi: np.ndarray
    pairs: np.ndarray

    def extend(self, U) -> np.ndarray:
        """The basis [U | Psi] (3 Nv, r + P), C order: what a kernel projects onto before :func:`fold_pairs`."""
        return np.ascontiguousarray(np.concatenate([np.asarray(U, np.float64), self.Psi], axis=1))


def modal_derivatives(model, U, omega, k: int, progress=None) -> ModalDerivatives:
    """Modal derivatives Psi_ij (module docstring) of the pairs i <= j < k of the mass-normalised modes U (3 Nv, r)
    [1/sqrt(kg)] with angular frequencies omega (r,) [rad/s], M-orthogonal to U and to the rigid modes."""
    U = np.asarray(U, np.float64)
    r = U.shape[1]
    if not (1 <= int(k) <= r):
        raise InputError(f"modal derivatives: k = {k!r} must lie in [1, {r}] (the kept modes)")
    k = int(k)
    solve = _FreeSolver(model, float(np.min(omega)))
    M = solve.M
    h = float(model.thickness)
    pairs = np.array([(i, j) for i in range(k) for j in range(i, k)], np.int64)
    out = np.empty((U.shape[0], len(pairs)))
    peak = np.abs(U[:, :k]).max(axis=0)
    for p, (i, j) in enumerate(pairs):
        # the difference step: displacements of 1e-3 h (the truncation error is O((1e-3)^2) of H, round-off far
        # below: the quadratic force of a thin shell is not small next to the linear one it is taken from)
        s = 1e-3 * h / (peak[i] + peak[j])
        Hij = force_hessian(model, U[:, i], U[:, j], s)
        x = solve(-Hij)
        out[:, p] = x - U @ (U.T @ (M @ x))
        if progress is not None:
            progress(p + 1, len(pairs))
    if not np.isfinite(out).all():
        raise SolverError("modal derivatives: non-finite result (a degenerate triangle in the shell mesh?)")
    return ModalDerivatives(out, pairs)


def pair_weights(q, pairs) -> np.ndarray:
    """c_p(q) with u = U q + Psi c(q): 1/2 q_i^2 on the diagonal pairs, q_i q_j off it (each pair once)."""
    qi, qj = q[..., pairs[:, 0]], q[..., pairs[:, 1]]
    return np.where(pairs[:, 0] == pairs[:, 1], 0.5, 1.0) * qi * qj


def fold_pairs(g_U, g_Psi, q, pairs) -> np.ndarray:
    """J(q)^T f from U^T f (..., r) and Psi^T f (..., P): row i gets sum_j q_j Psi_ij^T f over the pairs holding
    i (a diagonal pair's d c / d q_i = q_i, an off-diagonal one's q_j)."""
    out = np.array(g_U, np.float64, copy=True)
    i, j = pairs[:, 0], pairs[:, 1]
    np.add.at(out.T, i, (g_Psi * q[..., j]).T)
    off = i != j
    np.add.at(out.T, j[off], (g_Psi[..., off] * q[..., i[off]]).T)
    return out


@dataclass
class ManifoldShell:
    """A shell reduced to the quadratic manifold u = U q + Psi c(q) (module docstring).

    Attributes
    ----------
    model : ShellModel
    U : (3 Nv, r) mass-normalised modes [1/sqrt(kg)]
    omega : (r,) [rad/s]
    md : ModalDerivatives
    """

    model: object
    U: np.ndarray
    omega: np.ndarray
    md: ModalDerivatives

    @classmethod
    def from_modes(cls, model, modes, k: int) -> "ManifoldShell":
        U = np.asarray(modes.U, np.float64)
        w = np.sqrt(np.asarray(modes.omega2, np.float64))
        return cls(model, U, w, modal_derivatives(model, U, w, min(int(k), U.shape[1])))

    @property
    def r(self) -> int:
        return int(self.U.shape[1])

    def displacement(self, q) -> np.ndarray:
        q = np.asarray(q, np.float64)
        return self.U @ q + self.md.Psi @ pair_weights(q, self.md.pairs)

    def energy(self, q) -> float:
        return self.model.energy(self.displacement(q))

    def force(self, q) -> np.ndarray:
        """Exact reduced force J(q)^T f_int(u(q)) (r,) [N/sqrt(kg)]."""
        q = np.asarray(q, np.float64)
        f = self.model.internal_force(self.displacement(q))
        return fold_pairs(self.U.T @ f, self.md.Psi.T @ f, q, self.md.pairs)
