"""Generalised eigenproblem K u = w^2 M u for free-free elastic bodies: the driver.

The modes of linear modal sound synthesis (O'Brien, J. F., Shen, C. & Gatchalian, C. M. 2002, "Synthesizing
sounds from rigid-body simulations", Proc. ACM SIGGRAPH/Eurographics Symposium on Computer Animation):
K u_j = w_j^2 M u_j, rigid-body modes (w = 0) discarded, eigenvectors mass-normalised so that U^T M U = I and
U^T K U = diag(w_j^2) (Chadwick, J. N., An, S. S. & James, D. L. 2009, "Harmonic shells: a practical nonlinear
sound model for near-rigid thin shells", ACM Trans. Graph. 28(5), sec. 2.2, eqs. (7)-(8)). The shift-invert
spectral transformation is Ericsson, T. & Ruhe, A. 1980, "The spectral transformation Lanczos method for the
numerical solution of large sparse generalized symmetric eigenvalue problems", Math. Comp. 35(152),
1251-1268. The nondimensional shift, the residual acceptance test and the rigid-mode count below are this
package's own choices, not the papers'.

The parts live in modules of their own: the fill-reducing order in :mod:`impactsound.fem.ordering`, the
factorisations of K - sigma M in :mod:`impactsound.fem.cholesky`, block Lanczos in
:mod:`impactsound.fem.lanczos`; this module scales, orders, factors, runs Lanczos and applies the rigid-mode
and acceptance policy.

Method (chosen by measurement, see the source repository's bench/bench_modal_solve.py):

1. Nondimensionalise: K_hat = K/(E0 L), M_hat = M/(rho0 L^3), w_hat^2 = w^2 rho0 L^2/E0 with the
   material's E0, rho0 and the object size L, so the first elastic w_hat^2 is O(0.01-100) whatever the units.
   The default shift sigma_hat = -1 then lies below the spectrum by about the first eigenvalue: K_hat + M_hat is
   symmetric positive definite, rigid modes (w = 0) are harmless (they map to 1/(0 - sigma_hat) = 1, not to a
   huge Ritz value that swamps a convergence test), and the factorisation needs no pivoting. An in-band shift
   sigma = (2 pi f_shift)^2 is available as the second strategy (indefinite; threshold pivoting).
2. Order the dofs by *geometric nested dissection* of the node graph (median bisection along the longest extent,
   separators last), which also yields the separator tree; for the SPD case factor K_hat + M_hat = L L^T once,
   multifrontally on that tree (one dense front per leaf/separator, LAPACK/BLAS-3; MultifrontalCholesky).
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
ARPACK with a CHOLMOD factor (cholespy wheel: simplicial, ~5 s factor) only 1.3x (a measurement reported to the
project, not repeated here). Not tried: a float32 factor with refinement (each refined solve is two
single-precision solves plus a product with A, no cheaper than one double solve here), Pardiso (rejected as a
dependency).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..errors import SolverError
from ..parallel import single_threaded_blas
from .cholesky import shift_invert_operator
from .lanczos import block_lanczos, block_lanczos_abs
from .ordering import dof_permutation, nested_dissection, nested_dissection_tree, node_graph

# node_graph, nested_dissection and nested_dissection_tree are re-exported (they lived here before)
__all__ = ["SOLVER_VERSION", "RESIDUAL_TOL", "EigenResult", "relative_residuals", "solve_modes",
           "solve_modes_inband", "node_graph", "nested_dissection", "nested_dissection_tree"]

SOLVER_VERSION = "block-lanczos-mf-2"   # part of the modal-cache key
RESIDUAL_TOL = 1e-6                     # acceptance of a pair (relative_residuals)
_INNER_TOL_REL = 0.1                    # Lanczos converges pairs to this x the acceptance tol (1e-7 by default)
_DENSE_MAX_DOF = 900                    # below this a dense generalised eigh is cheaper and exact


@dataclass
class EigenResult:
    """Elastic modes of K u = w^2 M u (SI units).

    frequencies_hz (m,) ascending [Hz]; omega2 (m,) [rad^2/s^2]; U (ndof, m) with U^T M U = I [1/sqrt(kg)];
    residuals (m,) relative residuals (:func:`relative_residuals`); rigid (ndof, 6 n_components)
    mass-normalised rigid-body modes as solved; info: solver statistics.
    """

    frequencies_hz: np.ndarray
    omega2: np.ndarray
    U: np.ndarray
    residuals: np.ndarray
    rigid: np.ndarray
    info: dict = field(default_factory=dict)


def _units(scale) -> tuple[float, float, float]:
    """(E0 [Pa], rho0 [kg/m^3], L [m]) -> the stiffness and mass scales E0 L, rho0 L^3 and the eigenvalue unit
    E0 / (rho0 L^2) [rad^2/s^2] of the nondimensionalisation."""
    E0, rho0, L = (float(v) for v in scale)
    return E0 * L, rho0 * L**3, E0 / (rho0 * L**2)


def _permuted(K, M, kscale, mscale, coords):
    """Nondimensional K, M in the fill-reducing order: (Kp, Mp, inv, tree).

    inv undoes the dof permutation (X = Xp[inv]); tree = (bounds, parent) of the nested-dissection separator
    tree in dofs, or None without coordinates (identity order; SuperLU then orders by minimum degree).
    """
    ndof = K.shape[0]
    if coords is not None:
        perm_n, sizes, parent = nested_dissection_tree(coords, node_graph(K))
        perm = dof_permutation(perm_n)
        tree = (np.concatenate([[0], np.cumsum(3 * sizes)]), parent)
    else:
        perm = np.arange(ndof)
        tree = None
    inv = np.empty_like(perm)
    inv[perm] = np.arange(ndof)
    Kp = (K / kscale)[perm][:, perm].tocsr()
    Mp = (M / mscale)[perm][:, perm].tocsr()
    return Kp, Mp, inv, tree


def relative_residuals(K, M, U, omega2) -> np.ndarray:
    """Relative residual of each eigenpair: ||K u - w^2 M u|| / (||K u|| + |w^2| ||M u||).

    A pair is accepted when this is <= RESIDUAL_TOL (1e-6): scale-free, and for a rigid mode (w^2 ~ 0) it
    measures how far K u is from zero against K u itself.

    Parameters
    ----------
    K : scipy.sparse matrix, (n, n)
        Stiffness [N/m].
    M : scipy.sparse matrix, (n, n)
        Mass [kg].
    U : ndarray, (n, m)
        Eigenvectors (any normalisation).
    omega2 : ndarray, (m,)
        Eigenvalues w^2 [rad^2/s^2].

    Returns
    -------
    ndarray, (m,)
        Relative residuals (dimensionless).
    """
    KU = K @ U
    MU = M @ U
    r = np.linalg.norm(KU - MU * omega2, axis=0)
    return r / (np.linalg.norm(KU, axis=0) + np.abs(omega2) * np.linalg.norm(MU, axis=0))


def solve_modes(K: sp.spmatrix, M: sp.spmatrix, n_modes: int, *, scale: tuple[float, float, float],
                f_max: float | None = None, n_components: int = 1, coords: np.ndarray | None = None,
                shift: str | float = "nondim", tol: float = RESIDUAL_TOL, block: int | None = None,
                seed: int = 0, rigid_rel: float = 1e-3) -> EigenResult:
    """Lowest elastic modes of a free body: K u = w^2 M u.

    Parameters
    ----------
    K : scipy.sparse matrix, (n, n)
        Stiffness [N/m], symmetric, 3 dofs per node (dof = 3 node + component).
    M : scipy.sparse matrix, (n, n)
        Mass [kg], symmetric positive definite, same numbering.
    n_modes : int
        At most this many elastic modes are returned.
    scale : (float, float, float)
        (E0 [Pa], rho0 [kg/m^3], L [m]) for the nondimensionalisation (module docstring, step 1).
    f_max : float or None
        Keep only f <= f_max [Hz] (the solve stops early once all of them are found).
    n_components : int
        Connected components of the mesh: 6 rigid modes each are expected and removed.
    coords : ndarray, (n_nodes, 3) or None
        Node positions [m] for the fill-reducing order (without them SuperLU's minimum degree order is used).
    shift : "nondim" or float
        "nondim" (sigma_hat = -1) or an in-band shift frequency [Hz] (sigma = (2 pi f)^2).
    tol : float
        Residual acceptance (:func:`relative_residuals`).
    block : int or None
        Lanczos block size (default: from the number of modes, 8-32).
    seed : int
        Seed of Lanczos' random start.
    rigid_rel : float
        Modes below rigid_rel times the first elastic frequency count as rigid.

    Returns
    -------
    EigenResult
        Elastic modes in ascending frequency, mass-normalised (U^T M U = I).

    Raises
    ------
    SolverError
        Not exactly 6 rigid modes per component, a pair whose residual stays above tol, or no convergence.
    """
    with single_threaded_blas():
        return _solve_modes(K, M, n_modes, scale=scale, f_max=f_max, n_components=n_components, coords=coords,
                            shift=shift, tol=tol, block=block, seed=seed, rigid_rel=rigid_rel)


def _solve_modes(K, M, n_modes, *, scale, f_max, n_components, coords, shift, tol, block, seed, rigid_rel):
    ndof = K.shape[0]
    K = sp.csr_matrix(K)
    M = sp.csr_matrix(M)
    kscale, mscale, lam_unit = _units(scale)           # w^2 = lam_hat * lam_unit
    n_rigid = 6 * int(n_components)
    nev = int(n_modes) + n_rigid
    lam_max = None if f_max is None else (2 * np.pi * float(f_max))**2 / lam_unit
    if shift == "nondim":
        sigma = -1.0
    else:
        sigma = (2 * np.pi * float(shift))**2 / lam_unit
    info = dict(method="dense" if ndof <= _DENSE_MAX_DOF else "block-lanczos", sigma_hat=sigma,
                lam_unit=lam_unit, ndof=ndof)

    if ndof <= _DENSE_MAX_DOF:
        lam, X = sla.eigh((K / kscale).toarray(), (M / mscale).toarray())
        lam, X = lam[:min(nev, ndof)], X[:, :min(nev, ndof)]
    else:
        Kp, Mp, inv, tree = _permuted(K, M, kscale, mscale, coords)
        A = (Kp - sigma * Mp).tocsc()
        op, info["factor"] = shift_invert_operator(A, sigma, tree)
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
            lam, Xp, _, stats = block_lanczos(Kp, Mp, op, nev_try, lam_max=lam_max, block=blk, start=start,
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

    # negative eigenvalues first, then the rigid cluster at ~0
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

    # acceptance (relative_residuals), measured on the SI matrices
    res = relative_residuals(K, M, U, omega2)
    bad = np.flatnonzero(res > tol)
    if len(bad) and ndof > _DENSE_MAX_DOF:
        omega2, U, res = _resolve(K, M, omega2, U, res, bad, scale=scale, coords=coords, tol=tol, seed=seed)
        info["resolved"] = int(len(bad))
    if np.any(res > tol):
        j = int(np.argmax(res))
        raise SolverError(f"mode {j} ({math.sqrt(max(omega2[j], 0)) / (2 * np.pi):.1f} Hz) has residual "
                          f"{res[j]:.2e} > {tol:g} after re-solving; re-mesh with better-shaped elements")

    # mass-normalise exactly (U^T M U = I)
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


def _resolve(K, M, omega2, U, res, bad, *, scale, coords, tol, seed):
    """Re-solve failing pairs with an in-band shift just below the lowest of them; keep the better of each."""
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
    """``count`` eigenpairs nearest an in-band shift (2 pi f_shift)^2 (indefinite shift-invert).

    The same scaling, order and factor choice as :func:`solve_modes`, then :func:`block_lanczos_abs` (a fixed
    Krylov space, Ritz pairs by distance from the shift); no rigid-mode handling.

    Parameters
    ----------
    K, M : scipy.sparse matrix, (n, n)
        Stiffness [N/m] and mass [kg], as for :func:`solve_modes`.
    count : int
        Pairs wanted.
    scale : (float, float, float)
        (E0 [Pa], rho0 [kg/m^3], L [m]), as for :func:`solve_modes`.
    coords : ndarray, (n_nodes, 3) or None
        Node positions [m] for the fill-reducing order.
    f_shift : float
        Shift frequency [Hz].
    seed : int
        Seed of Lanczos' random start.

    Returns
    -------
    omega2 : ndarray, (count,)
        Eigenvalues w^2 [rad^2/s^2], by distance from the shift.
    U : ndarray, (n, count)
        Eigenvectors, M-normalised [1/sqrt(kg)].
    residuals : ndarray, (count,)
        :func:`relative_residuals` of the pairs.
    """
    kscale, mscale, lam_unit = _units(scale)
    sigma = (2 * np.pi * f_shift)**2 / lam_unit
    K = sp.csr_matrix(K)
    M = sp.csr_matrix(M)
    Kp, Mp, inv, tree = _permuted(K, M, kscale, mscale, coords)
    # shifted problem: (K - sigma M) x = mu M x has its smallest |mu| nearest the shift; Rayleigh-Ritz on the
    # shifted K keeps the ordering by distance when we sort by |mu|
    A = (Kp - sigma * Mp).tocsc()
    op, _ = shift_invert_operator(A, sigma, tree)     # sigma >= 0: SuperLU with threshold pivoting
    blk = int(min(max(8, count), 32))
    mu, Xp = block_lanczos_abs(A, Mp, op, count, block=blk, seed=seed)
    X = Xp[inv] / math.sqrt(mscale)
    omega2 = (mu + sigma) * lam_unit
    return omega2, X, relative_residuals(K, M, X, omega2)
