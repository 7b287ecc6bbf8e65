"""Block shift-invert Lanczos for K x = lam M x, with full reorthogonalisation in the M inner product.

Shifted block Lanczos: Grimes, R. G., Lewis, J. G. & Simon, H. D. 1994, "A shifted block Lanczos algorithm for
solving sparse symmetric generalized eigenproblems", SIAM J. Matrix Anal. Appl. 15(1), 228-272: the Krylov space
of (K - sigma M)^-1 M, built a block of vectors at a time (one factor solve per block), M-orthonormal, so the
eigenvalues nearest sigma converge first. Here Rayleigh-Ritz is on K itself over the whole basis (the basis is
kept, full reorthogonalisation), with thick restart (Wu, K. & Simon, H. 2000, "Thick-restart Lanczos method for
large symmetric eigenvalue problems", SIAM J. Matrix Anal. Appl. 22(2), 602-616) to bound memory.
Reorthogonalisation is block classical Gram-Schmidt with the Daniel-Gragg-Kaufman-Stewart test (Daniel, J. W.,
Gragg, W. B., Kaufman, L. & Stewart, G. W. 1976, "Reorthogonalization and stable algorithms for updating the
Gram-Schmidt QR factorization", Math. Comp. 30(136), 772-795), and Cholesky-QR applied twice to the block.
"""
from __future__ import annotations

import numpy as np

from ..errors import SolverError


def m_orthonormalise(W, MW_fn, Q, m, rng, local=None):
    """Orthogonalise block W against Q[:, :m] in the M inner product and M-orthonormalise it (Cholesky-QR,
    twice).

    Classical Gram-Schmidt, block-wise (BLAS-3). ``local`` = (Q_l, M Q_l), the last Lanczos blocks and their M
    products: W is first orthogonalised against those alone, since they hold almost all of a new Lanczos block
    (three-term recurrence); one pass against all of Q then removes what is left, rounding included. A further
    full pass is made only where that pass still removed as much as it left (M-norm dropped by more than
    1/sqrt(2): the Daniel-Gragg-Kaufman-Stewart test, "twice is enough"), so full reorthogonalisation stays at
    working precision while the common case reads Q once per coefficient product, not twice. The coefficients
    are Q^T (M W), one sparse product, so M Q need not be stored (half the basis memory).

    Parameters
    ----------
    W : ndarray, (n, b)
        The new block.
    MW_fn : callable
        X -> M X for blocks X (n, k).
    Q : ndarray, (n, >= m)
        The basis; its first m columns are M-orthonormal.
    m : int
        Columns of Q in use.
    rng : numpy.random.Generator
        Source of the random directions that replace a rank-deficient block.
    local : (ndarray (n, l), ndarray (n, l)) or None
        The last Lanczos blocks of Q and their M products, orthogonalised against first.

    Returns
    -------
    W : ndarray, (n, b), C order
        M-orthonormal and M-orthogonal to Q[:, :m].
    MW : ndarray, (n, b), C order
        M W.

    Raises
    ------
    SolverError
        Three random refills in a row were still rank-deficient.
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


def block_lanczos(Kp, Mp, op, nev: int, *, lam_max: float | None, block: int, tol: float, accept: float,
                  max_dim: int, seed: int, n_rigid: int, sigma: float, max_steps: int = 400,
                  start: np.ndarray | None = None):
    """Lowest ``nev`` eigenpairs of Kp x = lam Mp x (nondimensional, permuted order), shift-invert about sigma.

    The basis Q is M-orthonormal, so Rayleigh-Ritz is the dense symmetric eigenproblem of H = Q^T K Q (kept
    up to date one block of columns at a time). With lam_max: stop once every Ritz value <= lam_max (among the
    first nev) has converged together with the next one above it (so none below lam_max is missing).
    start: converged eigenvectors (n, p), M-orthonormal (the pairs of a smaller run), taken as the first p basis
    vectors; the random first block is then orthogonalised against them, so the Krylov space grows in their
    complement (expanding from them instead, as after a thick restart, was measured to stall: they are nearly
    invariant).

    Convergence is measured by the residual ||K x - lam M x|| / (||K x|| + |lam| ||M x||), rigid modes
    (lam ~ 0) against the first elastic eigenvalue (or |sigma| where larger).

    Parameters
    ----------
    Kp, Mp : scipy.sparse.csr_matrix, (n, n)
        Stiffness and mass (nondimensional, in the order of ``op``).
    op : object with ``solve(B)``
        (Kp - sigma Mp)^-1 applied to a block, e.g. from :func:`impactsound.fem.cholesky.shift_invert_operator`.
    nev : int
        Eigenpairs wanted (rigid modes included).
    lam_max : float or None
        Stop early once all eigenvalues <= lam_max (nondimensional) are found.
    block : int
        Block size (vectors per solve).
    tol : float
        Residual every returned pair is converged to.
    accept : float
        The caller's acceptance threshold (>= tol): pairs that stop improving below it are accepted.
    max_dim : int
        Largest basis (thick restart beyond it).
    seed : int
        Seed of the random start block.
    n_rigid : int
        Number of zero eigenvalues expected (they are measured against the first elastic one).
    sigma : float
        The shift of ``op``.
    max_steps : int
        Largest number of block steps before SolverError.
    start : ndarray, (n, p) or None
        M-orthonormal vectors to start from (p <= nev).

    Returns
    -------
    lam : ndarray, (k,)
        Eigenvalues, ascending (nondimensional).
    X : ndarray, (n, k)
        M-orthonormal eigenvectors.
    residuals : ndarray, (k,)
        Their residuals.
    stats : dict
        steps, basis, solves, restarts, n_below (a lower bound on the eigenvalues below lam_max).

    Raises
    ------
    SolverError
        No convergence in max_steps, or a basis limit too small for nev.
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
        # the acceptance measure; rigid modes (theta ~ 0) are measured against the first elastic eigenvalue
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
        W, MW = m_orthonormalise(W[:, :b], Mfn, Q, m, rng, local=local)
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
            # threshold and stop improving, more steps cannot help, so accept there (the threshold holds).
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


def block_lanczos_abs(A, Mp, op, count: int, *, block: int, seed: int, steps: int = 60):
    """Eigenpairs of A x = mu M x with smallest |mu| via block shift-invert Lanczos (A indefinite).

    A fixed number of block steps (no convergence test, no restart), then one Rayleigh-Ritz on A over the whole
    M-orthonormal basis, the Ritz pairs sorted by |mu|. Used to re-solve a few pairs next to an in-band shift,
    where the caller checks every returned pair's residual; :func:`block_lanczos` is the adaptive solver.

    Parameters
    ----------
    A : scipy.sparse matrix, (n, n)
        K - sigma M (nondimensional, in the order of ``op``).
    Mp : scipy.sparse.csr_matrix, (n, n)
        Mass (nondimensional, same order).
    op : object with ``solve(B)``
        A^-1 applied to a block.
    count : int
        Pairs wanted.
    block : int
        Block size.
    seed : int
        Seed of the random start block.
    steps : int
        Block steps (the basis stops growing at max(4 count + 2 block, 8 block) vectors).

    Returns
    -------
    mu : ndarray, (count,)
        Eigenvalues of the shifted problem (lam - sigma), by increasing |mu|.
    X : ndarray, (n, count)
        M-orthonormal Ritz vectors.
    """
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
        W, MW = m_orthonormalise(W[:, :b], Mfn, Q, m, rng, local=local)
        Q[:, m:m + b] = W
        local = (Q[:, m:m + b], MW)
        m += b
        W = op.solve(MW)
    H = Q[:, :m].T @ (A @ Q[:, :m])
    mu, Y = np.linalg.eigh(0.5 * (H + H.T))
    o = np.argsort(np.abs(mu))[:count]
    return mu[o], Q[:, :m] @ Y[:, o]
