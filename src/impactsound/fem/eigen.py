"""Generalised eigenproblem K u = w^2 M u for free-free elastic bodies (modal-sound.md sec. 2).

Method (chosen by measurement, see bench/bench_modal_solve.py):

1. Nondimensionalise (sec. 2): K_hat = K/(E0 L), M_hat = M/(rho0 L^3), w_hat^2 = w^2 rho0 L^2/E0 with the
   material's E0, rho0 and the object size L, so the first elastic w_hat^2 is O(0.01-100) whatever the units.
   The default shift sigma_hat = -1 then lies below the spectrum by about the first eigenvalue: K_hat + M_hat is
   symmetric positive definite, rigid modes (w = 0) are harmless (they map to 1/(0 - sigma_hat) = 1, not to a
   huge Ritz value that swamps a convergence test), and the factorisation needs no pivoting. An in-band shift
   sigma = (2 pi f_shift)^2 is available as the second strategy (indefinite; threshold pivoting).
2. Factor once with SuperLU, but in a *nested-dissection order computed from the node coordinates* (geometric
   bisection of the node graph, separators last), expanded to the 3 dofs of each node, with no pivoting for the
   SPD case so that the order is kept. Measured on a 10 k-node P1 mesh: ~2x faster than SuperLU's own COLAMD
   and less fill.
3. Block shift-invert Lanczos in the M_hat inner product with full reorthogonalisation: each step solves for a
   block of right-hand sides at once (SuperLU's multi-RHS solve is ~3-4x cheaper per vector than one-at-a-time,
   which is all ARPACK can do), followed by Rayleigh-Ritz on K_hat over the whole basis. Thick restart (keep the
   wanted Ritz vectors) bounds memory when many modes are wanted.
4. Accept a pair only if ||K u - w^2 M u|| / (||K u|| + w^2 ||M u||) <= tol (1e-6); pairs that fail are
   re-solved with an in-band shift next to them; still failing raises SolverError.
5. Drop negative eigenvalues, then rigid modes (|f| < 1e-3 f_1): exactly 6 per connected component, else
   SolverError. Mass-normalise (U^T M U = I); keep f <= f_max.

Alternatives measured and not taken (10 k-node P1, 60 modes): plain ``eigsh(K, k, M, sigma)`` is the baseline;
ARPACK with a CHOLMOD factor (cholespy wheel: simplicial, ~5 s factor) only 1.3x; SuperLU with MMD ordering
~1.2x (issue author); LOBPCG + AMG 1.6x (issue author).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import SolverError

SOLVER_VERSION = "block-lanczos-nd-1"   # part of the modal-cache key
RESIDUAL_TOL = 1e-6                     # sec. 2 acceptance
_INNER_TOL = 1e-9                       # internal convergence target, well below the acceptance threshold
_DENSE_MAX_DOF = 900                    # below this a dense generalised eigh is cheaper and exact


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


def nested_dissection(coords: np.ndarray, graph: sp.csr_matrix, leaf: int = 32) -> np.ndarray:
    """Fill-reducing node order: geometric nested dissection.

    Recursively split the node set at the median of its longest coordinate extent; the nodes of the first half
    that touch the second half form the separator, numbered after both halves (so eliminating either half
    creates no fill in the other). Leaves of <= ``leaf`` nodes keep their order. The loop is over subdomains
    (~n/leaf of them), not elements. Returns a permutation of range(n_nodes).
    """
    coords = np.asarray(coords, dtype=np.float64)
    out: list[np.ndarray] = []
    # explicit stack of (ids, separator-after) to emit: A-part, B-part, then separator
    stack: list[tuple[str, np.ndarray]] = [("split", np.arange(len(coords)))]
    while stack:
        kind, ids = stack.pop()
        if kind == "emit" or len(ids) <= leaf:
            out.append(ids)
            continue
        p = coords[ids]
        ax = int(np.argmax(p.max(axis=0) - p.min(axis=0)))
        med = np.median(p[:, ax])
        a = p[:, ax] <= med
        if a.all() or not a.any():
            out.append(ids)
            continue
        ia, ib = ids[a], ids[~a]
        touch = np.diff(graph[ia][:, ib].indptr) > 0
        sep, ia = ia[touch], ia[~touch]
        # LIFO: push in reverse of the emission order
        stack.append(("emit", sep))
        stack.append(("split", ib))
        stack.append(("split", ia))
    perm = np.concatenate(out)
    assert len(perm) == len(coords)
    return perm


# ----------------------------------------------------------------------------------------------------------
# block shift-invert Lanczos

class _ShiftInvert:
    """Solves (K - sigma M) x = b for blocks of b, in the (already permuted) dof order."""

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


def _m_orthonormalise(W, MW_fn, Q, MQ, m, rng):
    """Orthogonalise block W against Q[:, :m] (M inner product; classical Gram-Schmidt, two passes, which is
    what keeps full reorthogonalisation at working precision) and M-orthonormalise it by Cholesky-QR, twice.
    M W is computed once and carried through the triangular updates. Returns (W, M W)."""
    for attempt in range(3):
        for _ in range(2):
            if m:
                W = W - Q[:, :m] @ (MQ[:, :m].T @ W)
        MW = MW_fn(W)
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
            return np.asfortranarray(W), np.asfortranarray(MW)
        # rank-deficient block (an invariant subspace was reached): refill with random directions
        W = rng.standard_normal(W.shape)
    raise SolverError("block Lanczos could not extend its basis (rank deficiency); the problem may be too "
                      "small for the number of modes requested")


def _block_lanczos(Kp, Mp, op: _ShiftInvert, nev: int, *, lam_max: float | None, block: int, tol: float,
                   max_dim: int, seed: int, n_rigid: int, sigma: float, max_steps: int = 400,
                   accept: float = 0.1 * RESIDUAL_TOL):
    """Lowest ``nev`` eigenpairs of Kp x = lam Mp x (nondimensional, permuted order), shift-invert about sigma.

    The basis Q is M-orthonormal, so Rayleigh-Ritz is the dense symmetric eigenproblem of H = Q^T K Q (kept
    up to date one block of columns at a time). With lam_max: stop once every Ritz value <= lam_max (among the
    first nev) has converged together with the next one above it (so none below lam_max is missing).
    Returns (lam, X, residuals, stats).
    """
    n = Kp.shape[0]
    rng = np.random.default_rng(seed)
    max_dim = int(min(max_dim, n))
    # column-major so that Q[:, :m] and blocks of columns are contiguous BLAS operands
    Q = np.empty((n, max_dim), order="F")
    MQ = np.empty((n, max_dim), order="F")
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

    W = np.asfortranarray(rng.standard_normal((n, block)))
    m = 0
    n_solves = n_restarts = 0
    res_w = np.array([np.inf])
    best_prev = np.inf
    for step in range(max_steps):
        b = min(W.shape[1], max_dim - m)
        W, MW = _m_orthonormalise(W[:, :b], Mfn, Q, MQ, m, rng)
        Q[:, m:m + b], MQ[:, m:m + b] = W, MW
        KW = Kp @ W
        H[:m + b, m:m + b] = Q[:, :m + b].T @ KW
        H[m:m + b, :m] = H[:m, m:m + b].T
        last = slice(m, m + b)
        m += b
        Hm = H[:m, :m]
        theta, Y = np.linalg.eigh(0.5 * (Hm + Hm.T))
        k = min(nev, m)
        floor = max(abs(sigma), float(theta[min(n_rigid, k - 1)]))
        need = nev if lam_max is None else min(nev, int(np.searchsorted(theta[:k], lam_max, "right")) + 1)
        done = False
        if need <= k and m >= need + b:
            # the top of the wanted set converges last: check that window first, everything only when it passed
            win = slice(max(0, need - b), need)
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
            MQ[:, :keep] = MQ[:, :m] @ Yr
            H[:] = 0.0
            H[np.arange(keep), np.arange(keep)] = theta[:keep]
            lo = max(0, min(need, keep) - block)
            src = Q[:, lo:lo + block].copy()
            m = keep
            n_restarts += 1
        else:
            src = Q[:, last]
        W = op.solve(Mp @ src)
        n_solves += W.shape[1]
    else:
        raise SolverError(f"block Lanczos did not converge in {max_steps} steps (residual "
                          f"{float(np.max(res_w)):.2e}); re-mesh with better-shaped elements")
    stats = dict(steps=step + 1, basis=m, solves=n_solves, restarts=n_restarts)
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
            perm_n = nested_dissection(coords, node_graph(K))
            perm = (3 * perm_n[:, None] + np.arange(3)).ravel()
        else:
            perm = np.arange(ndof)                     # SuperLU's minimum degree order is used instead
        inv = np.empty_like(perm)
        inv[perm] = np.arange(ndof)
        Kp = Kh[perm][:, perm].tocsr()
        Mp = Mh[perm][:, perm].tocsr()
        A = (Kp - sigma * Mp).tocsc()
        op = _ShiftInvert(A, spd=sigma < 0) if coords is not None else _ShiftInvertMMD(A, spd=sigma < 0)
        info["factor_nnz"] = op.nnz
        # With f_max, the number of modes below it is unknown (thin parts have many, small stiff solids
        # none): start with a small window and double it while every Ritz value found is still below f_max,
        # reusing the one factorisation. Without f_max ask for all nev at once.
        nev_try = nev if lam_max is None else min(nev, n_rigid + 12)
        while True:
            blk = block if block is not None else int(min(max(16, nev_try // 3), 48))
            max_dim = max(3 * nev_try + 2 * blk, 8 * blk)
            lam, Xp, _, stats = _block_lanczos(Kp, Mp, op, nev_try, lam_max=lam_max, block=blk,
                                               tol=_INNER_TOL, max_dim=max_dim, seed=seed,
                                               n_rigid=n_rigid, sigma=sigma)
            for k_, v_ in stats.items():
                info[k_] = info.get(k_, 0) + v_ if k_ != "basis" else v_
            if lam_max is None or nev_try >= nev or len(lam) < nev_try or lam[-1] > lam_max:
                break
            nev_try = min(nev, 2 * nev_try)
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
    E0, rho0, L = scale
    lam_unit = E0 / (rho0 * L**2)
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
    MQ = np.empty((n, max_dim))
    W = rng.standard_normal((n, block))
    m = 0
    Mfn = lambda X: Mp @ X
    for _ in range(steps):
        b = min(block, max_dim - m)
        if b <= 0:
            break
        W, MW = _m_orthonormalise(W[:, :b], Mfn, Q, MQ, m, rng)
        Q[:, m:m + b], MQ[:, m:m + b] = W, MW
        m += b
        W = op.solve(MW)
    H = Q[:, :m].T @ (A @ Q[:, :m])
    mu, Y = np.linalg.eigh(0.5 * (H + H.T))
    o = np.argsort(np.abs(mu))[:count]
    return mu[o], Q[:, :m] @ Y[:, o], None, None
