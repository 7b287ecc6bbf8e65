"""Generalised eigenproblem K u = w^2 M u for free-free elastic bodies (modal-sound.md sec. 2).

Method (chosen by measurement, see bench/bench_modal_solve.py):

1. Nondimensionalise (sec. 2): K_hat = K/(E0 L), M_hat = M/(rho0 L^3), w_hat^2 = w^2 rho0 L^2/E0 with the
   material's E0, rho0 and the object size L, so the first elastic w_hat^2 is O(0.01-100) whatever the units.
   The default shift sigma_hat = -1 then lies below the spectrum by about the first eigenvalue: K_hat + M_hat is
   symmetric positive definite, rigid modes (w = 0) are harmless (they map to 1/(0 - sigma_hat) = 1, not to a
   huge Ritz value that swamps a convergence test), and the factorisation needs no pivoting. An in-band shift
   sigma = (2 pi f_shift)^2 is available as the second strategy (indefinite; threshold pivoting).
2. Order the dofs by *geometric nested dissection* of the node graph (median bisection along the longest extent,
   separators last), which also yields the separator tree; for the SPD case factor K_hat + M_hat = L L^T once,
   multifrontally on that tree (one dense front per leaf/separator, LAPACK/BLAS-3; _MultifrontalCholesky).
   Indefinite (in-band) shifts, or a K that is not positive semi-definite, go to SuperLU in the same order with
   threshold pivoting (no coordinates: SuperLU's MMD order).
3. Block shift-invert Lanczos in the M_hat inner product with full reorthogonalisation: each step solves for a
   block of right-hand sides at once (a block of 8-32 vectors costs 3-9 ms per vector on the bench plate against
   27 ms for one SuperLU solve at a time, which is all ARPACK can do), followed by Rayleigh-Ritz on K_hat over the
   whole basis. The basis is sized (4 nev + 2 block) so that one run needs no restart for typical spectra; thick
   restart (keep the wanted Ritz vectors) still bounds memory. Reorthogonalisation is block classical
   Gram-Schmidt, local pass then one full pass, a second full pass only where the norm test asks for it.
   Pairs are converged to a relative residual of 1e-7 (10x inside the acceptance below; Ritz values are then
   exact to ~1e-14), and residuals are only computed once the Ritz values have settled.
4. Accept a pair only if ||K u - w^2 M u|| / (||K u|| + w^2 ||M u||) <= tol (1e-6); pairs that fail are
   re-solved with an in-band shift next to them; still failing raises SolverError.
5. Drop negative eigenvalues, then rigid modes (|f| < 1e-3 f_1): exactly 6 per connected component, else
   SolverError. Mass-normalise (U^T M U = I); keep f <= f_max (the number of modes below f_max is found by
   growing runs, each started from the pairs of the last).
BLAS runs on one thread inside solve_modes (see impactsound.parallel.single_threaded_blas for why).

Measured on the bench (bench/bench_modal_solve.py: 10 k-node P1 plate, 31 k dofs, 60 modes; shared 2-core
machine, best of 3, one BLAS thread for both): plain ``eigsh(K, k, M, sigma)`` 13.6 s (COLAMD SuperLU factor
4.5-6 s, 168 single-vector solves at ~47 ms); this solver 4.1 s, 3.3x (ordering 0.2 s, factor 0.5-0.7 s,
273 solves in blocks of 13 at ~5.7 ms per vector 1.6 s, reorthogonalisation 0.8 s). On a 41 k-dof P2 plate
(60 modes) 23 s -> 6.4 s against the previous version of this module. Alternatives measured and not taken:
the same block Lanczos on SuperLU (our nested-dissection order, no pivoting) 13.1 s, 1.03x, and still ~7.5 s
at its best tuning (block 8, basis 300, tol 1e-7: factor 2.7 s + Lanczos 4.4 s); SuperLU's MMD_AT_PLUS_A /
COLAMD orders on the same matrix factor in 2.7 / 4.5 s against 2.0 s for ours, and solve slower (12 / 18 ms
per vector); scipy's spsolve_triangular on SuperLU's L and U: 53-70 ms per vector;
LOBPCG + smoothed-aggregation AMG (pyamg, rigid-body near-nullspace, 76-vector block, tol 1e-7): 51 s;
ARPACK with a CHOLMOD factor (cholespy wheel: simplicial, ~5 s factor) only 1.3x (issue author). Not tried:
a float32 factor with refinement (each refined solve is two single-precision solves plus a product with A,
no cheaper than one double solve here), Pardiso (rejected as a dependency).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import blas, lapack
from scipy.sparse.csgraph import maximum_bipartite_matching

from ..errors import SolverError
from ..parallel import single_threaded_blas

SOLVER_VERSION = "block-lanczos-mf-2"   # part of the modal-cache key
RESIDUAL_TOL = 1e-6                     # sec. 2 acceptance
_INNER_TOL_REL = 0.1                    # Lanczos converges pairs to this x the acceptance tol (1e-7 by default)
_DENSE_MAX_DOF = 900                    # below this a dense generalised eigh is cheaper and exact
_ND_LEAF = 32                           # nodes per nested-dissection leaf (dense leaf fronts of 96 dofs)


@dataclass
class EigenResult:
    """Elastic modes of K u = w^2 M u (SI units).

    frequencies_hz (m,) ascending [Hz]; omega2 (m,) [rad^2/s^2]; U (ndof, m) with U^T M U = I [1/sqrt(kg)];
    residuals (m,) relative residuals (sec. 2 measure); rigid (ndof, 6 n_components) mass-normalised rigid-body
    modes as solved; info: solver statistics.
    """

    frequencies_hz: np.ndarray
    omega2: np.ndarray
    U: np.ndarray
    residuals: np.ndarray
    rigid: np.ndarray
    info: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------------
# ordering

def node_graph(A: sp.spmatrix, dofs_per_node: int = 3) -> sp.csr_matrix:
    """Node adjacency (n_nodes x n_nodes, boolean CSR) from the block sparsity of a dof matrix."""
    n = A.shape[0] // dofs_per_node
    S = sp.csr_matrix((np.ones(A.shape[0]), (np.arange(A.shape[0]) // dofs_per_node, np.arange(A.shape[0]))),
                      shape=(n, A.shape[0]))
    Aa = A.tocsr(copy=True)
    Aa.data = np.ones_like(Aa.data)
    G = (S @ Aa @ S.T).tocsr()
    G.data[:] = 1.0
    return G


def _min_vertex_cover(C: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Smallest vertex set touching every edge of a bipartite graph (rows | columns of C), as two boolean masks.

    Koenig's construction from a maximum matching: Z = the vertices reachable from unmatched rows along
    alternating paths (row -> column by any edge, column -> row by its matching edge); the cover is
    (rows not in Z) + (columns in Z), as many vertices as the matching has edges.
    """
    nr, nc = C.shape
    col_of = maximum_bipartite_matching(C, perm_type="column")      # matched column of each row, or -1
    row_of = np.full(nc, -1, dtype=np.int64)
    row_of[col_of[col_of >= 0]] = np.flatnonzero(col_of >= 0)
    CT = C.T.tocsr()
    in_z_row = col_of < 0
    in_z_col = np.zeros(nc, dtype=bool)
    front = in_z_row.copy()
    while front.any():
        new_col = (CT @ front.astype(np.float64) > 0) & ~in_z_col
        in_z_col |= new_col
        rows = row_of[new_col]
        front = np.zeros(nr, dtype=bool)
        front[rows[rows >= 0]] = True
        front &= ~in_z_row
        in_z_row |= front
    return ~in_z_row, in_z_col


def nested_dissection_tree(coords: np.ndarray, graph: sp.csr_matrix, leaf: int = _ND_LEAF
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill-reducing node order by geometric nested dissection, with its separator tree.

    Recursively split the node set at the median of its longest coordinate extent; the separator is a minimum
    vertex cover of the edges between the halves (_min_vertex_cover), numbered after both halves, so eliminating
    either half creates no fill in the other. Why the cover rather than "the nodes of one half that touch the
    other" (the earlier choice): on P2 meshes, whose mid-edge nodes couple across whole elements, it cuts the
    factor from 26 M to 19 M entries and its time from 1.7 to 0.9 s (41 k-dof plate), below SuperLU's MMD
    (19.4 M in L); on P1 12.6 -> 11.4 M. Leaves of <= ``leaf`` nodes keep their order. The loop is over
    subdomains (~n/leaf), not elements.

    Returns (perm, sizes, parent): perm, a permutation of range(n_nodes), lists the nodes group by group
    (leaves and separators in postorder: a group comes after every group of its subtree), ``sizes`` nodes each;
    parent[g] is the separator group that split g off (-1 for the root). A separator may be empty (the halves
    do not touch: separate bodies).
    """
    coords = np.asarray(coords, dtype=np.float64)
    groups: list[np.ndarray] = []
    owner: list[list] = []          # per group: the one-element slot that will hold its parent's group index
    # explicit stack (no recursion limit), LIFO, so pushed in reverse of the emission order (A, B, separator).
    # A slot is filled with the separator's group index when the separator is emitted, after its subtrees.
    stack: list[tuple] = [("split", np.arange(len(coords)), [-1], None)]
    while stack:
        kind, ids, up, me = stack.pop()
        if kind == "emit" or len(ids) <= leaf:
            groups.append(ids)
            owner.append(up)
            if me is not None:
                me[0] = len(groups) - 1
            continue
        p = coords[ids]
        ax = int(np.argmax(p.max(axis=0) - p.min(axis=0)))
        med = np.median(p[:, ax])
        a = p[:, ax] <= med
        if a.all():                                  # over half the nodes sit at the maximum: split below it
            a = p[:, ax] < med
        if a.all() or not a.any():                   # all at one coordinate: a (dense) leaf
            groups.append(ids)
            owner.append(up)
            continue
        ia, ib = ids[a], ids[~a]
        C = graph[ia][:, ib].tocsr()
        ta = np.flatnonzero(np.diff(C.indptr) > 0)                   # the nodes of each half on the cut
        tb = np.unique(C.indices)
        cover_a, cover_b = _min_vertex_cover(C[ta][:, tb].tocsr())
        in_a = np.zeros(len(ia), dtype=bool)
        in_a[ta[cover_a]] = True
        in_b = np.zeros(len(ib), dtype=bool)
        in_b[tb[cover_b]] = True
        sep, ia, ib = np.concatenate([ia[in_a], ib[in_b]]), ia[~in_a], ib[~in_b]
        me_ = [-1]
        stack.append(("emit", sep, up, me_))
        stack.append(("split", ib, me_, None))
        stack.append(("split", ia, me_, None))
    perm = np.concatenate(groups)
    assert len(perm) == len(coords)
    parent = np.array([u[0] for u in owner], dtype=np.int64)
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    return perm, sizes, parent


def nested_dissection(coords: np.ndarray, graph: sp.csr_matrix, leaf: int = _ND_LEAF) -> np.ndarray:
    """Node permutation of :func:`nested_dissection_tree`."""
    return nested_dissection_tree(coords, graph, leaf)[0]


# ----------------------------------------------------------------------------------------------------------
# factorisation of K - sigma M

@nb.njit(cache=True, nogil=True)
def _extend_add(F, U, li):
    """F[li, li] += U on the lower triangle (li ascending, so U's lower triangle lands in F's)."""
    n = li.shape[0]
    for j in range(n):
        lj = li[j]
        for i in range(j, n):
            F[li[i], lj] += U[i, j]


class _MultifrontalCholesky:
    """A = L L^T of a symmetric positive definite A given in nested-dissection order (multifrontal).

    Each group of the separator tree is one dense front: its own dofs (s) plus the later dofs its subtree
    couples to (b, the front's structure). The front is assembled from A's columns and the children's update
    matrices, then factored with LAPACK (potrf) and BLAS-3 (trmm, syrk); the Schur complement (b x b) goes up to
    the parent. Why not SuperLU on the same order (measured, single BLAS thread, 31 k-dof P1 bench plate /
    41 k-dof P2 plate): it factors in 2.0-2.7 s / 12 s (6.7 s in its own MMD order) against 0.6-1.0 s / 2.6 s
    here, and its multi-right-hand-side solve walks the U part column by column once per right-hand side:
    11-15 ms per vector in 8-22-vector blocks against 5-8 ms here (P2: 22 vs 14.5 ms). The block solves are
    most of a Lanczos run.

    Stored per front: G = [L_ss^-1; L_bs L_ss^-1] ((s + b) x s), so both triangular sweeps of a block solve are
    plain matrix products plus one gather/scatter of the front's structure rows. Explicit inverses of the
    diagonal blocks cost ~25 % more factor flops and lose accuracy only as cond(L_ss) ~ sqrt(cond(A)); measured
    ||A X - B|| / ||B|| ~ 1e-12, and every accepted pair's true residual is checked anyway (sec. 2).
    Raises np.linalg.LinAlgError when A is not positive definite.
    """

    def __init__(self, A: sp.spmatrix, bounds: np.ndarray, parent: np.ndarray):
        A = sp.csc_matrix(A)
        A.sum_duplicates()
        indptr, indices, data = A.indptr, A.indices, A.data
        ng = len(bounds) - 1
        children: list[list[int]] = [[] for _ in range(ng)]
        for g in range(ng):
            if parent[g] >= 0:
                children[parent[g]].append(g)
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.struct: list[np.ndarray] = [None] * ng       # type: ignore[list-item]
        self.G: list[np.ndarray] = [None] * ng             # type: ignore[list-item]
        update: dict[int, np.ndarray] = {}
        for g in range(ng):
            c0, c1 = int(bounds[g]), int(bounds[g + 1])
            s = c1 - c0
            rows = indices[indptr[c0]:indptr[c1]]
            parts = [rows[rows >= c1]] + [self.struct[c][self.struct[c] >= c1] for c in children[g]]
            st = np.unique(np.concatenate(parts)).astype(np.int64)
            self.struct[g] = st
            b = len(st)
            loc_of = np.concatenate([np.arange(c0, c1), st])          # front row -> global dof (ascending)
            F = np.zeros((s + b, s + b), order="F")
            keep = rows >= c0
            cols = np.repeat(np.arange(s), np.diff(indptr[c0:c1 + 1]))
            F[np.searchsorted(loc_of, rows[keep]), cols[keep]] = data[indptr[c0]:indptr[c1]][keep]
            for c in children[g]:
                if c in update:                                  # (a child coupled to nothing later has none)
                    li = np.searchsorted(loc_of, self.struct[c])
                    if li[-1] >= len(loc_of) or not np.array_equal(loc_of[li], self.struct[c]):
                        # cannot happen for a valid separator tree; never extend-add into the wrong rows
                        raise np.linalg.LinAlgError("separator tree does not match the sparsity")
                    _extend_add(F, update.pop(c), li)
            G = np.empty((s + b, s))
            if s:
                Lss, info = lapack.dpotrf(F[:s, :s], lower=1, clean=1)
                if info != 0:
                    raise np.linalg.LinAlgError("K - sigma M is not positive definite")
                Linv, info = lapack.dtrtri(Lss, lower=1)
                if info != 0:
                    raise np.linalg.LinAlgError("singular diagonal block")
                G[:s] = Linv
                if b:
                    Lbs = blas.dtrmm(1.0, Linv, F[s:, :s], side=1, lower=1, trans_a=1)   # F_bs L_ss^-T
                    G[s:] = blas.dtrmm(1.0, Linv, Lbs, side=1, lower=1)               # L_bs L_ss^-1
                    U = blas.dsyrk(-1.0, Lbs, beta=1.0, c=F[s:, s:], lower=1, overwrite_c=1)
            else:
                U = F
            self.G[g] = G
            if parent[g] >= 0 and b:
                update[g] = np.asfortranarray(U)
        self.nnz = int(sum(G.size for G in self.G))

    def solve(self, B: np.ndarray) -> np.ndarray:
        X = np.array(B, dtype=np.float64, order="C", copy=True)    # rows contiguous: cheap row gathers
        bd, G, S = self.bounds, self.G, self.struct
        ng = len(G)
        for g in range(ng):                                         # L y = b, leaves first
            c0, c1 = bd[g], bd[g + 1]
            s = c1 - c0
            if s == 0:
                continue
            R = G[g] @ X[c0:c1]
            X[c0:c1] = R[:s]
            if len(S[g]):
                X[S[g]] -= R[s:]
        for g in range(ng - 1, -1, -1):                             # L^T x = y, root first
            c0, c1 = bd[g], bd[g + 1]
            s = c1 - c0
            if s == 0:
                continue
            Gg = G[g]
            if len(S[g]):
                X[c0:c1] = Gg[:s].T @ X[c0:c1] - Gg[s:].T @ X[S[g]]
            else:
                X[c0:c1] = Gg[:s].T @ X[c0:c1]
        return X


class _ShiftInvert:
    """Solves (K - sigma M) x = b for blocks of b, in the (already permuted) dof order (SuperLU).

    Used for indefinite shifts (in-band sigma) and as the fallback when the Cholesky factorisation finds
    K - sigma M not positive definite."""

    def __init__(self, A: sp.csc_matrix, spd: bool):
        opts = dict(SymmetricMode=True)
        try:
            if spd:
                # no pivoting: keep the nested-dissection order (SPD needs none)
                self.lu = spla.splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.0, options=opts)
            else:
                self.lu = spla.splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.01, options=opts)
        except RuntimeError as exc:
            raise SolverError(f"factorisation of K - sigma M failed ({exc}); the shift is an eigenvalue or the "
                              f"mesh is degenerate: try another shift or re-mesh") from None
        self.nnz = int(self.lu.L.nnz + self.lu.U.nnz)

    def solve(self, B: np.ndarray) -> np.ndarray:
        return self.lu.solve(np.asfortranarray(B, dtype=np.float64))


def _m_orthonormalise(W, MW_fn, Q, m, rng, local=None):
    """Orthogonalise block W against Q[:, :m] in the M inner product and M-orthonormalise it (Cholesky-QR,
    twice). Returns (W, M W).

    Classical Gram-Schmidt, block-wise (BLAS-3). ``local`` = (Q_l, M Q_l), the last Lanczos blocks and their M
    products: W is first orthogonalised against those alone, since they hold almost all of a new Lanczos block
    (three-term recurrence); one pass against all of Q then removes what is left, rounding included. A further
    full pass is made only where that pass still removed as much as it left (M-norm dropped by more than
    1/sqrt(2): the Daniel-Gragg-Kaufman-Stewart test, "twice is enough"), so full reorthogonalisation stays at
    working precision while the common case reads Q once per coefficient product, not twice. The coefficients
    are Q^T (M W), one sparse product, so M Q need not be stored (half the basis memory).
    """
    for attempt in range(3):
        if m and local is not None:
            Ql, MQl = local
            W = W - Ql @ (MQl.T @ W)
        MW = MW_fn(W)
        for _ in range(3):
            if not m:
                break
            C = Q[:, :m].T @ MW
            W = W - Q[:, :m] @ C
            MW = MW_fn(W)
            if np.all(np.einsum("ij,ij->j", C, C) <= np.einsum("ij,ij->j", W, MW)):
                break
        ok = True
        for _ in range(2):
            G = W.T @ MW
            try:
                Rinv = np.linalg.inv(np.linalg.cholesky(0.5 * (G + G.T)).T)
            except np.linalg.LinAlgError:
                ok = False
                break
            W, MW = W @ Rinv, MW @ Rinv
        if ok and np.all(np.isfinite(W)):
            return np.ascontiguousarray(W), np.ascontiguousarray(MW)
        # rank-deficient block (an invariant subspace was reached): refill with random directions
        W = rng.standard_normal(W.shape)
    raise SolverError("block Lanczos could not extend its basis (rank deficiency); the problem may be too "
                      "small for the number of modes requested")


def _block_lanczos(Kp, Mp, op, nev: int, *, lam_max: float | None, block: int, tol: float,
                   max_dim: int, seed: int, n_rigid: int, sigma: float, max_steps: int = 400,
                   accept: float = 0.1 * RESIDUAL_TOL, start: np.ndarray | None = None):
    """Lowest ``nev`` eigenpairs of Kp x = lam Mp x (nondimensional, permuted order), shift-invert about sigma.

    The basis Q is M-orthonormal, so Rayleigh-Ritz is the dense symmetric eigenproblem of H = Q^T K Q (kept
    up to date one block of columns at a time). With lam_max: stop once every Ritz value <= lam_max (among the
    first nev) has converged together with the next one above it (so none below lam_max is missing).
    start: converged eigenvectors (n, p), M-orthonormal (the pairs of a smaller run), taken as the first p basis
    vectors; the random first block is then orthogonalised against them, so the Krylov space grows in their
    complement (expanding from them instead, as after a thick restart, was measured to stall: they are nearly
    invariant). Returns (lam, X, residuals, stats).
    """
    n = Kp.shape[0]
    rng = np.random.default_rng(seed)
    max_dim = int(min(max_dim, n))
    # Row-major throughout: Q[:, :m] is still a plain BLAS operand (leading dimension max_dim), and scipy's
    # sparse products and the block solve want row-major blocks (measured: M times 12 column-major vectors 9 ms,
    # row-major 3 ms; the layout conversion is what costs).
    Q = np.empty((n, max_dim))
    H = np.zeros((max_dim, max_dim))
    Mfn = lambda X: Mp @ X

    def residuals(Yc, th):
        X = Q[:, :m] @ Yc
        KX = Kp @ X
        MX = Mp @ X
        nk = np.linalg.norm(KX, axis=0)
        nm = np.linalg.norm(MX, axis=0)
        # sec. 2 measure; rigid modes (theta ~ 0) are measured against the first elastic eigenvalue
        den = nk + np.maximum(np.abs(th), floor) * nm
        return np.linalg.norm(KX - MX * th, axis=0) / den, X

    W = rng.standard_normal((n, block))
    m = 0
    local, recent = None, []   # (Q, M Q) of the last two blocks; their M products
    if start is not None and 0 < start.shape[1] <= min(nev, max_dim - 2 * block):
        m = start.shape[1]
        Q[:, :m] = start
        H[:m, :m] = start.T @ (Kp @ start)
    n_solves = n_restarts = 0
    res_w = np.array([np.inf])
    best_prev = np.inf
    prev_theta = None
    for step in range(max_steps):
        b = min(W.shape[1], max_dim - m)
        W, MW = _m_orthonormalise(W[:, :b], Mfn, Q, m, rng, local=local)
        Q[:, m:m + b] = W
        KW = Kp @ W
        H[:m + b, m:m + b] = Q[:, :m + b].T @ KW
        H[m:m + b, :m] = H[:m, m:m + b].T
        m += b
        Hm = H[:m, :m]
        theta, Y = np.linalg.eigh(0.5 * (Hm + Hm.T))
        k = min(nev, m)
        floor = max(abs(sigma), float(theta[min(n_rigid, k - 1)]))
        need = nev if lam_max is None else min(nev, int(np.searchsorted(theta[:k], lam_max, "right")) + 1)
        done = False
        # The top of the wanted set converges last: check that window first, everything only when it passed.
        # A residual costs a pass over Q and two sparse products, so it is computed only once the window's Ritz
        # values have settled (moved < 1e-6 relative since the last step): a Ritz value's error goes as its
        # residual squared (measured: change ~ 10 res^2), so a window that still moves that much cannot meet
        # tol (1e-7) yet, and one that meets tol has long settled below this gate.
        win = slice(max(0, need - b), need)
        settled = (prev_theta is not None and len(prev_theta) >= need and
                   bool(np.all(np.abs(theta[win] - prev_theta[win]) <= 1e-6 * np.maximum(np.abs(theta[win]), floor))))
        prev_theta = theta[:k].copy()
        if need <= k and m >= need + b and settled:
            res_w, _ = residuals(Y[:, win], theta[win])
            # Stagnation: with an in-band shift next to the rigid cluster, rounding in the huge rigid Ritz
            # values 1/(0 - sigma) floors the elastic residuals near 1e-8; once they sit below the accept
            # threshold and stop improving, more steps cannot help, so accept there (sec. 2 threshold holds).
            best = float(np.max(res_w))
            stalled = best > 0.5 * best_prev and best <= accept
            best_prev = min(best_prev, best)
            if np.all(res_w <= tol) or stalled:
                res, X = residuals(Y[:, :need], theta[:need])
                done = bool(np.all(res <= tol)) or (stalled and bool(np.all(res <= accept)))
        if done:
            lam = theta[:need]
            break
        if m + block > max_dim:
            # thick restart: keep the best nev + block Ritz vectors (M-orthonormal; H becomes diagonal), then
            # expand from the top of the wanted window, the part that converges last
            keep = min(m - block, nev + block)
            if keep < min(nev, m):
                raise SolverError(f"block Lanczos basis limit {max_dim} too small for {nev} modes")
            Yr = Y[:, :keep]
            Q[:, :keep] = Q[:, :m] @ Yr
            H[:] = 0.0
            H[np.arange(keep), np.arange(keep)] = theta[:keep]
            lo = max(0, min(need, keep) - block)
            m = keep
            n_restarts += 1
            # the new block couples to every kept Ritz vector (arrowhead), not only to its neighbours: no
            # local pass, the full passes and their norm test take care of it
            recent, local = [], None
            MW = Mp @ Q[:, lo:lo + block]
        else:
            # local pass of the next step: the last two blocks (contiguous in Q) with their M products, of
            # which the orthonormalisation returned this step's
            recent = recent[-1:] + [MW]
            width = sum(x.shape[1] for x in recent)
            local = (Q[:, m - width:m], recent[0] if len(recent) == 1 else np.hstack(recent))
        W = op.solve(MW)
        n_solves += W.shape[1]
    else:
        raise SolverError(f"block Lanczos did not converge in {max_steps} steps (residual "
                          f"{float(np.max(res_w)):.2e}); re-mesh with better-shaped elements")
    # Ritz values are upper bounds on the eigenvalues in order (interlacing), so this many eigenvalues at least
    # lie below lam_max: a safe size for the next, larger run
    n_below = 0 if lam_max is None else int(np.searchsorted(theta, lam_max, "right"))
    stats = dict(steps=step + 1, basis=m, solves=n_solves, restarts=n_restarts, n_below=n_below)
    return lam, X, res, stats


# ----------------------------------------------------------------------------------------------------------

def relative_residuals(K, M, U, omega2) -> np.ndarray:
    """||K u - w^2 M u|| / (||K u|| + w^2 ||M u||) per column (modal-sound.md sec. 2)."""
    KU = K @ U
    MU = M @ U
    r = np.linalg.norm(KU - MU * omega2, axis=0)
    return r / (np.linalg.norm(KU, axis=0) + np.abs(omega2) * np.linalg.norm(MU, axis=0))


def solve_modes(K: sp.spmatrix, M: sp.spmatrix, n_modes: int, *, scale: tuple[float, float, float],
                f_max: float | None = None, n_components: int = 1, coords: np.ndarray | None = None,
                shift: str | float = "nondim", tol: float = RESIDUAL_TOL, block: int | None = None,
                seed: int = 0, rigid_rel: float = 1e-3) -> EigenResult:
    """Lowest elastic modes of a free body: K u = w^2 M u.

    K [N/m], M [kg]: symmetric CSR, 3 dofs per node (dof = 3 node + comp). n_modes: at most this many elastic
    modes. scale = (E0 [Pa], rho0 [kg/m^3], L [m]) for the nondimensionalisation (sec. 2). f_max [Hz]: keep
    only f <= f_max (the solve stops early once all of them are found). n_components: connected components
    (6 rigid modes each are expected and removed). coords (n_nodes, 3) [m]: node positions for the fill-reducing
    order (without them SuperLU's MMD order is used). shift: "nondim" (sigma_hat = -1) or an in-band shift
    frequency [Hz] (sigma = (2 pi f)^2). tol: residual acceptance (sec. 2).
    """
    with single_threaded_blas():
        return _solve_modes(K, M, n_modes, scale=scale, f_max=f_max, n_components=n_components, coords=coords,
                            shift=shift, tol=tol, block=block, seed=seed, rigid_rel=rigid_rel)


def _solve_modes(K, M, n_modes, *, scale, f_max, n_components, coords, shift, tol, block, seed, rigid_rel):
    E0, rho0, L = (float(v) for v in scale)
    ndof = K.shape[0]
    K = sp.csr_matrix(K)
    M = sp.csr_matrix(M)
    kscale, mscale = E0 * L, rho0 * L**3
    lam_unit = E0 / (rho0 * L**2)                      # w^2 = lam_hat * lam_unit
    n_rigid = 6 * int(n_components)
    nev = int(n_modes) + n_rigid
    lam_max = None if f_max is None else (2 * np.pi * float(f_max))**2 / lam_unit
    Kh = K / kscale
    Mh = M / mscale
    if shift == "nondim":
        sigma = -1.0
    else:
        sigma = (2 * np.pi * float(shift))**2 / lam_unit
    info = dict(method="dense" if ndof <= _DENSE_MAX_DOF else "block-lanczos", sigma_hat=sigma,
                lam_unit=lam_unit, ndof=ndof)

    if ndof <= _DENSE_MAX_DOF:
        lam, X = sla.eigh(Kh.toarray(), Mh.toarray())
        lam, X = lam[:min(nev, ndof)], X[:, :min(nev, ndof)]
    else:
        if coords is not None:
            perm_n, sizes, parent = nested_dissection_tree(coords, node_graph(K))
            perm = (3 * perm_n[:, None] + np.arange(3)).ravel()
        else:
            perm = np.arange(ndof)                     # SuperLU's minimum degree order is used instead
        inv = np.empty_like(perm)
        inv[perm] = np.arange(ndof)
        Kp = Kh[perm][:, perm].tocsr()
        Mp = Mh[perm][:, perm].tocsr()
        del Kh, Mh                                     # (peak memory: only the permuted copies are used)
        A = (Kp - sigma * Mp).tocsc()
        op = None
        if coords is not None and sigma < 0:
            try:
                op = _MultifrontalCholesky(A, np.concatenate([[0], np.cumsum(3 * sizes)]), parent)
                info["factor"] = "multifrontal-cholesky"
            except np.linalg.LinAlgError:
                op = None                              # K not positive semi-definite: let SuperLU try
        if op is None:
            op = _ShiftInvert(A, spd=sigma < 0) if coords is not None else _ShiftInvertMMD(A, spd=sigma < 0)
            info["factor"] = "superlu"
        del A
        info["factor_nnz"] = op.nnz
        # With f_max, the number of modes below it is unknown (thin parts have many, small stiff solids
        # none): start with a small window and double it while every Ritz value found is still below f_max,
        # reusing the one factorisation and starting each run from the pairs of the last; the next size comes
        # from the Ritz values below f_max (measured on a 300 x 200 x 3 mm P2 steel plate, 83 k dofs, 170 modes
        # below 20 kHz: 1628 solves with fresh starts and plain doubling, 946 so). Without f_max ask for all nev
        # at once.
        nev_try = nev if lam_max is None else min(nev, n_rigid + 12)
        start = None
        while True:
            blk = block if block is not None else int(min(max(8, nev_try // 5), 32))
            max_dim = max(4 * nev_try + 2 * blk, 8 * blk)
            lam, Xp, _, stats = _block_lanczos(Kp, Mp, op, nev_try, lam_max=lam_max, block=blk, start=start,
                                               tol=_INNER_TOL_REL * tol, accept=tol, max_dim=max_dim,
                                               seed=seed, n_rigid=n_rigid, sigma=sigma)
            n_below = stats.pop("n_below")
            for k_, v_ in stats.items():
                info[k_] = info.get(k_, 0) + v_ if k_ != "basis" else v_
            if lam_max is None or nev_try >= nev or len(lam) < nev_try or lam[-1] > lam_max:
                break
            # at least n_below eigenvalues lie below lam_max; a run that finds exactly nev_try of them must be
            # followed by another to see the next one above, hence the margin
            nev_try = min(nev, max(2 * nev_try, int(1.25 * n_below) + 8))
            start = Xp
        del start
        X = Xp[inv]

    # back to SI: U^T M_hat U = I  ->  U_SI = U / sqrt(rho0 L^3)
    omega2 = lam * lam_unit
    U = X / math.sqrt(mscale)

    # negative eigenvalues first (sec. 2), then the rigid cluster at ~0
    absf = np.sqrt(np.abs(omega2)) / (2 * np.pi)
    if len(omega2) <= n_rigid:
        raise SolverError(f"only {len(omega2)} modes found; a free body has {n_rigid} rigid modes first: "
                          f"the mesh is too coarse")
    f1 = absf[n_rigid]
    is_rigid = absf < rigid_rel * f1
    neg = (omega2 < 0) & ~is_rigid
    n_found_rigid = int(is_rigid.sum())
    if n_found_rigid != n_rigid:
        raise SolverError(f"found {n_found_rigid} near-zero (rigid-body) modes, expected exactly {n_rigid} "
                          f"({n_components} connected component(s) x 6): the mesh has a loose piece, a "
                          f"mechanism (elements joined at a node or edge) or inverted elements; split the mesh "
                          f"into its bodies or re-mesh")
    rigid = U[:, is_rigid]
    keep = ~is_rigid & ~neg
    omega2, U = omega2[keep], U[:, keep]

    # acceptance (sec. 2), measured on the SI matrices
    res = relative_residuals(K, M, U, omega2)
    bad = np.flatnonzero(res > tol)
    if len(bad) and ndof > _DENSE_MAX_DOF:
        omega2, U, res = _resolve(K, M, omega2, U, res, bad, scale=scale, coords=coords, tol=tol, seed=seed)
        info["resolved"] = int(len(bad))
    if np.any(res > tol):
        j = int(np.argmax(res))
        raise SolverError(f"mode {j} ({math.sqrt(max(omega2[j], 0)) / (2 * np.pi):.1f} Hz) has residual "
                          f"{res[j]:.2e} > {tol:g} after re-solving; re-mesh with better-shaped elements")

    # mass-normalise exactly (sec. 2: U^T M U = I)
    U = U / np.sqrt(np.einsum("ij,ij->j", U, M @ U))
    rigid = rigid / np.sqrt(np.einsum("ij,ij->j", rigid, M @ rigid))
    order = np.argsort(omega2)
    omega2, U, res = omega2[order], U[:, order], res[order]
    f = np.sqrt(omega2) / (2 * np.pi)
    sel = np.arange(len(f)) < int(n_modes)
    if f_max is not None:
        sel &= f <= float(f_max)
    return EigenResult(frequencies_hz=f[sel], omega2=omega2[sel], U=U[:, sel], residuals=res[sel],
                       rigid=rigid, info=info)


class _ShiftInvertMMD(_ShiftInvert):
    """Shift-invert without coordinates: SuperLU's minimum degree order on A^T + A."""

    def __init__(self, A, spd):
        opts = dict(SymmetricMode=True)
        try:
            self.lu = spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0 if spd else 0.01,
                                options=opts)
        except RuntimeError as exc:
            raise SolverError(f"factorisation of K - sigma M failed ({exc})") from None
        self.nnz = int(self.lu.L.nnz + self.lu.U.nnz)


def _resolve(K, M, omega2, U, res, bad, *, scale, coords, tol, seed):
    """Re-solve failing pairs with an in-band shift just below the lowest of them (sec. 2)."""
    w2 = omega2[bad].min() * 0.98
    f_shift = math.sqrt(w2) / (2 * np.pi)
    # enough modes above the shift to cover all failing ones
    count = int(np.sum((omega2 >= w2) & (omega2 <= omega2[bad].max() * 1.02))) + 4
    sub = solve_modes_inband(K, M, count, scale=scale, coords=coords, f_shift=f_shift, seed=seed + 1)
    omega2, U, res = omega2.copy(), U.copy(), res.copy()
    for j in bad:
        i = int(np.argmin(np.abs(sub[0] - omega2[j])))
        if sub[2][i] < res[j]:
            omega2[j], U[:, j], res[j] = sub[0][i], sub[1][:, i], sub[2][i]
    return omega2, U, res


def solve_modes_inband(K, M, count, *, scale, coords, f_shift, seed=0):
    """``count`` eigenpairs nearest above an in-band shift (2 pi f_shift)^2 (indefinite shift-invert).

    Returns (omega2, U, residuals) in SI units, U M-normalised; no rigid-mode handling.
    """
    E0, rho0, L = (float(v) for v in scale)
    lam_unit = E0 / (rho0 * L**2)
    kscale, mscale = E0 * L, rho0 * L**3
    sigma = (2 * np.pi * f_shift)**2 / lam_unit
    K = sp.csr_matrix(K)
    M = sp.csr_matrix(M)
    ndof = K.shape[0]
    if coords is not None:
        pn = nested_dissection(coords, node_graph(K))
        perm = (3 * pn[:, None] + np.arange(3)).ravel()
    else:
        perm = np.arange(ndof)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(ndof)
    Kp = (K / kscale)[perm][:, perm].tocsr()
    Mp = (M / mscale)[perm][:, perm].tocsr()
    # shifted problem: (K - sigma M) x = mu M x has its smallest |mu| nearest the shift; Rayleigh-Ritz on the
    # shifted K keeps the ordering by distance when we sort by |mu|
    A = (Kp - sigma * Mp).tocsc()
    op = _ShiftInvert(A, spd=False) if coords is not None else _ShiftInvertMMD(A, spd=False)
    blk = int(min(max(8, count), 32))
    mu, Xp, _, _ = _block_lanczos_abs(A, Mp, op, count, block=blk, seed=seed)
    X = Xp[inv] / math.sqrt(mscale)
    omega2 = (mu + sigma) * lam_unit
    return omega2, X, relative_residuals(K, M, X, omega2)


def _block_lanczos_abs(A, Mp, op, count, *, block, seed, steps=60):
    """Eigenpairs of A x = mu M x with smallest |mu| via block shift-invert Lanczos (A indefinite)."""
    n = A.shape[0]
    rng = np.random.default_rng(seed)
    max_dim = int(min(n, max(4 * count + 2 * block, 8 * block)))
    Q = np.empty((n, max_dim))
    W = rng.standard_normal((n, block))
    m = 0
    Mfn = lambda X: Mp @ X
    local = None
    for _ in range(steps):
        b = min(block, max_dim - m)
        if b <= 0:
            break
        W, MW = _m_orthonormalise(W[:, :b], Mfn, Q, m, rng, local=local)
        Q[:, m:m + b] = W
        local = (Q[:, m:m + b], MW)
        m += b
        W = op.solve(MW)
    H = Q[:, :m].T @ (A @ Q[:, :m])
    mu, Y = np.linalg.eigh(0.5 * (H + H.T))
    o = np.argsort(np.abs(mu))[:count]
    return mu[o], Q[:, :m] @ Y[:, o], None, None
