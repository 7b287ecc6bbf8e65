"""The reduced nonlinear shell: modal coordinates q with u = U q, and the reduced internal force
f~(q) = U^T f_int(U q) (Chadwick, An & James 2009, sec. 2.2), exactly or by cubature (sec. 2.3).

:class:`ReducedShell` ties a :class:`~impactsound.fem.shell.ShellModel` to its linear modes
(:func:`~impactsound.fem.shell.shell_modes`, U^T M U = I, so q has units m sqrt(kg)):

- :meth:`ReducedShell.force` is the exact reduced force (one full internal-force evaluation, O(Nf) per pose);
- :meth:`ReducedShell.element_forces` gives each triangle's reduced force g_i(q) = U_V^T f_V(U q), the callable
  that :func:`~impactsound.sources.shell.cubature.train_cubature` fits; the sum over all triangles is the exact
  force, a cubature evaluates only its chosen triangles (O(r) each, O(r^2) in all).

SI units: q [m sqrt(kg)], forces [N/sqrt(kg)], omega [rad/s].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError, SolverError


@dataclass
class ReducedShell:
    """A shell model reduced to its kept linear modes.

    Attributes
    ----------
    model : ShellModel
    U : ndarray (3 Nv, r)
        Mass-normalised mode shapes [1/sqrt(kg)].
    omega : ndarray (r,)
        Angular frequencies [rad/s].
    """

    model: object
    U: np.ndarray
    omega: np.ndarray

    @classmethod
    def from_modes(cls, model, modes) -> "ReducedShell":
        """From :func:`~impactsound.fem.shell.shell_modes`' result."""
        return cls(model, np.asarray(modes.U, np.float64), np.sqrt(np.asarray(modes.omega2, np.float64)))

    @property
    def r(self) -> int:
        return int(self.U.shape[1])

    def _poses(self, q):
        Q = np.asarray(q, np.float64)
        one = Q.ndim == 1
        Q = np.atleast_2d(Q)
        if Q.shape[1] != self.r or not np.isfinite(Q).all():
            raise InputError(f"reduced shell: q must be finite with {self.r} modal coordinates, got shape "
                             f"{np.shape(q)}")
        return Q, one

    def force(self, q) -> np.ndarray:
        """Exact reduced internal force U^T f_int(U q): (r,) for q (r,), (P, r) for poses (P, r)."""
        Q, one = self._poses(q)
        out = np.stack([self.U.T @ self.model.internal_force(self.U @ qq) for qq in Q])
        return out[0] if one else out

    def element_forces(self, Q, elements) -> np.ndarray:
        """Reduced force of each listed triangle at each pose, g_i(q) = U_V^T f_V(U q): (P, k, r)
        (the callable of :func:`~impactsound.sources.shell.cubature.train_cubature`; its areas are included)."""
        Q, _ = self._poses(Q)
        el = np.asarray(elements, np.int64).reshape(-1)
        m = self.model
        if el.size and (el.min() < 0 or el.max() >= len(m.faces)):
            raise InputError(f"reduced shell: element indices must lie in [0, {len(m.faces)})")
        U3 = self.U.reshape(-1, 3, self.r)                       # (Nv, 3, r)
        Um = U3[m.faces[el]]                                     # (k, 3, 3, r)
        Ub = U3[m.stencil[el]]                                   # (k, 6, 3, r)
        out = np.empty((len(Q), len(el), self.r))
        for p, qq in enumerate(Q):                               # poses: training sets hold about a hundred
            fm, fb = m.element_forces(self.U @ qq)
            out[p] = (np.einsum("kvc,kvcr->kr", fm[el], Um) + np.einsum("kvc,kvcr->kr", fb[el], Ub))
        return out

    def compiled_cubature(self, cub, precision: str = "float64", derivatives=None) -> "CompiledCubature":
        """The cubature force sum_{i in C} w_i g_i(q) as a compiled O(k r) kernel (Chadwick, An & James 2009,
        sec. 2.3): see :class:`CompiledCubature`. ``cub``: a trained
        :class:`~impactsound.sources.shell.cubature.Cubature` (its elements and weights are used);
        ``precision``: how the stencil rows of U are stored, "float64" or "float32"; ``derivatives``: the
        :class:`~impactsound.sources.shell.manifold.ModalDerivatives` of a quadratic-manifold basis (its
        cubature trained on that basis), None for the paper's linear basis."""
        if derivatives is None:
            return CompiledCubature(self, cub.elements, cub.weights, precision=precision)
        basis = ReducedShell(self.model, derivatives.extend(self.U), self.omega)
        return CompiledCubature(basis, cub.elements, cub.weights, precision=precision, pairs=derivatives.pairs,
                                n_coords=self.r)


def curve_order(points) -> np.ndarray:
    """Indices that sort points (k, 3) along a Morton (Z-order) curve on a 1024^3 grid of their bounding box:
    consecutive points are mostly near each other (ties keep the input order)."""
    P = np.asarray(points, np.float64).reshape(-1, 3)
    if len(P) == 0:
        return np.zeros(0, np.int64)
    span = float(np.ptp(P, axis=0).max()) or 1.0
    g = np.clip(((P - P.min(axis=0)) / span * 1023).astype(np.int64), 0, 1023)
    code = np.zeros(len(P), np.int64)
    for b in range(10):
        for d in range(3):
            code |= ((g[:, d] >> b) & 1) << (3 * b + d)
    return np.argsort(code, kind="stable")


def chunk_vertices(stencil, chunk: int):
    """The distinct vertices of each chunk of ``chunk`` consecutive rows of ``stencil`` (k, S), and each slot's
    position among its chunk's: (verts (V,), voff (n_chunks + 1,), slot (k, S)). Chunk c's vertices are
    verts[voff[c]:voff[c + 1]] (ascending, padded with -1 to a multiple of 3)."""
    st = np.asarray(stencil, np.int64)
    k = len(st)
    verts, voff, slot = [], [0], np.empty_like(st)
    for a in range(0, k, chunk):
        u, inv = np.unique(st[a:a + chunk], return_inverse=True)
        slot[a:a + chunk] = inv.reshape(-1, st.shape[1])
        n = -(-len(u) // 3) * 3
        verts.append(np.concatenate([u, np.full(n - len(u), -1, np.int64)]))
        voff.append(voff[-1] + n)
    v = np.concatenate(verts) if verts else np.zeros(0, np.int64)
    return v, np.asarray(voff, np.int64), np.ascontiguousarray(slot)


def chunk_soa(gN, R, theta0, interior, areas, chunk: int):
    """The per-element data of the compiled kernel per chunk of ``chunk`` elements, structure-of-arrays: for each
    array (k, *shape), (n_chunks, prod(shape) x chunk) with the element index fastest (the layout of
    _cubature_kernel.chunk_forces; the last chunk padded with zeros, never read)."""
    k = len(areas)
    nch = -(-k // chunk)

    def soa(a):
        a = np.asarray(a)
        tail = a.shape[1:]
        out = np.zeros((nch * chunk,) + tail, a.dtype)
        out[:k] = a
        out = out.reshape((nch, chunk) + tail)
        return np.ascontiguousarray(np.moveaxis(out, 1, -1)).reshape(nch, chunk * int(np.prod(tail)))

    return soa(gN), soa(R), soa(theta0), soa(interior), soa(np.asarray(areas)[:, None])


def _check_finite(a, what: str) -> None:
    # the element kernel divides without zero checks (Numba's NumPy error model: inf/NaN, no exception), so a
    # triangle folded flat by an extreme pose shows up here
    if not np.isfinite(a).all():
        raise SolverError(f"compiled cubature: non-finite {what}: a pose folds a triangle flat (displacements "
                          "far beyond the shell's thickness, or an unstable time step); lower the amplitude or dt")


class CompiledCubature:
    """Cubature reduced force of a :class:`ReducedShell` in compiled code, O(k r) per evaluation.

    Chadwick, An & James 2009, sec. 2.3. The chosen triangles are stored along a space-filling curve in chunks of
    ``CHUNK``; each chunk keeps the rows of U at its triangles' distinct stencil vertices once (U_V, with their rest
    positions X_V; a "flap" stencil has 6 vertices, a "midedge" one 12 in 24 slots, and nearby triangles share
    some). An evaluation gathers x_V = X_V + U_V q per chunk, computes each triangle's membrane + bending force
    exactly as :meth:`impactsound.fem.shell.ShellModel.element_forces` does (same strains, same free-edge
    handling), adds the weighted forces onto the chunk's vertices and projects U_V^T f_V once. Chunks run in
    parallel (Numba threads), then an ordered sum: bitwise the same on any thread count.

    Parameters
    ----------
    rs : ReducedShell
    elements : int array (k,)
        Triangle indices.
    weights : float array (k,)
        Cubature weights (dimensionless).
    precision : "float64" (default) or "float32"
        Storage of U_V. All arithmetic is float64 either way. "float32" halves the memory a step streams (the
        step is bound by it: 1.1-1.5x faster on the trash-can bench, with the machine's load) and evaluates the
        force of the basis U rounded to float32, exactly: :attr:`U_rounded` is that basis (relative change
        6e-8), so a reference computed with it agrees to round-off.

    pairs : int array (P, 2), optional
        A quadratic-manifold basis (sources/shell/manifold.py): ``rs.U`` is then [U | Psi] with the P modal
        derivatives after the ``n_coords`` modes, the displacement U q + Psi c(q), and the force J(q)^T f_int
        (:func:`~impactsound.sources.shell.manifold.fold_pairs`): the kernel projects on all r + P columns and
        the pairs' rows are folded onto the r coordinates.
    n_coords : int, optional
        With ``pairs``: the number of modal coordinates r.

    Memory: 8 (float64) or 4 (float32) x 3 r bytes per stored vertex: at most 6 ("flap" bending) or 12
    ("midedge") per triangle, about 29 or 14 kB per triangle at r = 200 with "flap", less where they share.
    """

    def __init__(self, rs: ReducedShell, elements, weights, precision: str = "float64", pairs=None,
                 n_coords: int | None = None):
        from . import _cubature_kernel as kern
        m = rs.model
        el = np.asarray(elements, np.int64).reshape(-1)
        w = np.asarray(weights, np.float64).reshape(-1)
        if el.shape != w.shape:
            raise InputError(f"compiled cubature: {el.size} elements but {w.size} weights")
        if el.size and (el.min() < 0 or el.max() >= len(m.faces)):
            raise InputError(f"compiled cubature: element indices must lie in [0, {len(m.faces)})")
        if not np.isfinite(w).all():
            raise InputError("compiled cubature: weights must be finite")
        if precision not in ("float64", "float32"):
            raise InputError(f"compiled cubature: precision must be 'float64' or 'float32', got {precision!r}")
        self.precision = precision
        self._k = kern
        self.rs = rs
        self.elements = el
        self.weights = np.ascontiguousarray(w)
        r = rs.r
        # stored order: along a space-filling curve, so that a chunk's triangles share stencil vertices
        order = curve_order(m.vertices[m.faces[el]].mean(axis=1)) if el.size else np.zeros(0, np.int64)
        self._order = order
        self._inv = np.argsort(order)
        es = el[order]
        self._w = np.ascontiguousarray(w[order])
        # each chunk's distinct stencil vertices (shared by its triangles; the "midedge" stencil's 24 slots hold 12
        # per triangle; a free edge's slot repeats a face vertex), padded with rows of zeros that no slot reads
        verts, self.voff, self.slot = chunk_vertices(m.stencil[es], kern.CHUNK)
        dof = (3 * np.maximum(verts, 0)[:, None] + np.arange(3)).reshape(-1)
        pad = np.repeat(verts < 0, 3)
        Ue = rs.U[dof]
        Ue[pad] = 0.0
        self.Ue = np.ascontiguousarray(Ue, dtype=np.dtype(precision))  # (3 V, r)
        X0 = m.vertices[np.maximum(verts, 0)].reshape(-1)
        X0[pad] = 0.0
        self.X0 = np.ascontiguousarray(X0)
        self.gN = np.ascontiguousarray(m.gN[es])
        # the flaps each triangle's bending reads (its own; with "midedge" also its neighbours'), their rest angles
        # and live hinges (a missing neighbour's flap has none)
        fl = m._flaps_or_self[es]                                      # (k, nf)
        self.R = np.ascontiguousarray(m.Rb[es])                        # (k, 3, nf, 3)
        self.Qm = np.ascontiguousarray(m.Q, dtype=np.float64)
        self.theta0 = np.ascontiguousarray(m.theta0[fl])               # (k, nf, 3)
        self.interior = np.ascontiguousarray(m.interior[fl] & (m.flaps[es] >= 0)[:, :, None])
        self.areas = np.ascontiguousarray(m.areas[es], dtype=np.float64)
        self.c_m, self.c_b = float(m.c_m), float(m.c_b)
        self._part = np.zeros((len(self.voff) - 1, r))                  # one row per chunk
        self._r = r
        self.basis_width = r
        self.pairs = np.zeros((0, 2), np.int64)
        if pairs is not None:
            self.pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
            nq = int(n_coords) if n_coords is not None else r - len(self.pairs)
            if nq + len(self.pairs) != r or (len(self.pairs) and (self.pairs.min() < 0 or self.pairs.max() >= nq)):
                raise InputError(f"compiled cubature: a manifold basis of {r} columns needs r + P = {r} with "
                                 f"{len(self.pairs)} pairs of modes below r = {nq}")
            self._r = nq
        self._soa = chunk_soa(self.gN, self.R, self.theta0, self.interior, self.areas, kern.CHUNK)

    @property
    def r(self) -> int:
        return self._r

    @property
    def U_rounded(self) -> np.ndarray:
        """The basis this kernel evaluates, (3 Nv, r) float64: U rounded to ``precision`` (U itself for float64)."""
        return self.rs.U.astype(self.precision).astype(np.float64)

    def _args(self):
        return (self.gN, self.R, self.Qm, self.theta0, self.interior, self.areas, self.c_m, self.c_b)

    def kernel_args(self) -> tuple:
        """(Uc, X0c, voff, slot, w, gN, R, Qm, theta0, interior, areas, c_m, c_b, part): the arguments of the
        compiled kernels (_cubature_kernel.cubature_force after q, newmark_free), elements in stored order, the
        per-element data per chunk in structure-of-arrays form (:func:`chunk_soa`)."""
        gN, R, th0, interior, A = self._soa
        return (self.Ue, self.X0, self.voff, self.slot, self._w, gN, R, self.Qm, th0, interior, A, self.c_m,
                self.c_b, self._part)

    @staticmethod
    def empty_kernel_args(r: int) -> tuple:
        """kernel_args of a cubature with no elements (zero force), for kernels that take them unused."""
        return (np.zeros((0, r)), np.zeros(0), np.zeros(1, np.int64), np.zeros((0, 6), np.int64), np.zeros(0),
                np.zeros((0, 0)), np.zeros((0, 0)), np.eye(3), np.zeros((0, 0)), np.zeros((0, 0), np.bool_),
                np.zeros((0, 0)), 0.0, 0.0, np.zeros((0, r)))

    def _q(self, q):
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.shape != (self._r,) or not np.isfinite(q).all():
            raise InputError(f"compiled cubature: q must be finite with shape ({self._r},), got {q.shape}")
        return q

    def _basis_coords(self, q):
        """The kernel's coordinates: q itself, or [q, c(q)] on a quadratic manifold."""
        if not len(self.pairs):
            return q
        from .manifold import pair_weights
        return np.concatenate([q, pair_weights(q, self.pairs)])

    def _fold(self, g, q):
        if not len(self.pairs):
            return g
        from .manifold import fold_pairs
        return fold_pairs(g[..., :self._r], g[..., self._r:], q, self.pairs)

    def force(self, q) -> np.ndarray:
        """sum_i w_i g_i(q), (r,) [N/sqrt(kg)] for q (r,) [m sqrt(kg)]."""
        q = self._q(q)
        out = np.empty(self.basis_width)
        if self.elements.size == 0:
            return np.zeros(self._r)
        args = self.kernel_args()
        self._k.cubature_force(*args[:4], self._basis_coords(q), *args[4:], out)
        _check_finite(out, "force")
        return self._fold(out, q)

    def element_forces(self, q) -> np.ndarray:
        """Unweighted reduced forces g_i(q) of the chosen elements, (k, r) [N/sqrt(kg)]."""
        q = self._q(q)
        g = self._k.reduced_element_forces(self.Ue, self.X0, self.voff, self.slot, self._basis_coords(q),
                                           *self._args())
        return self._fold(g[self._inv], q)

    def nodal_forces(self, u):
        """The chosen triangles' (fm (k, 3, 3), fb (k, 6, 3)) [N] at full displacement u (3 Nv,) [m]: the rows
        of ShellModel.element_forces(u) for these elements, computed by the compiled element kernel."""
        x = self.rs.model._as_positions(u)
        xs = np.ascontiguousarray(x[self.rs.model.stencil[self.elements[self._order]]])
        fm, fb = self._k.nodal_forces(xs, *self._args())
        return fm[self._inv], fb[self._inv]

    def newmark(self, q, v, dt: float, n_steps: int, d=None):
        """n_steps unloaded steps of the explicit Newmark of
        :func:`~impactsound.sources.shell.dynamics.integrate` (f_int = this cubature force, damping d = alpha +
        beta omega^2 per mode [1/s], default 0), in compiled code. Returns the new (q, v) (copies)."""
        if len(self.pairs):
            raise InputError("compiled cubature: newmark() steps the linear-mode basis only; a quadratic-manifold "
                             "shell is stepped by the render kernel (sources/shell/_render_kernel.py)")
        q = self._q(q).copy()
        v = self._q(v).copy()
        dd = np.zeros(self._r) if d is None else np.ascontiguousarray(d, dtype=np.float64) * np.ones(self._r)
        fint = self.force(q)
        if self.elements.size and n_steps > 0:
            self._k.newmark_free(*self.kernel_args(), q, v, fint, float(dt), dd, int(n_steps))
            _check_finite(np.concatenate([q, v, fint]), "state after Newmark steps")
        elif n_steps > 0:
            for _ in range(int(n_steps)):   # no elements: zero force
                acc = -dd * v
                q += dt * v + 0.5 * dt * dt * acc
                v[:] = (v + 0.5 * dt * acc) / (1.0 + 0.5 * dt * dd)
        return q, v
