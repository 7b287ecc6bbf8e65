"""Factorisations of a shifted stiffness matrix A = K - sigma M for shift-invert eigensolvers.

:class:`MultifrontalCholesky` factors a symmetric positive definite A = L L^T by the multifrontal method
(Duff, I. S. & Reid, J. K. 1983, "The multifrontal solution of indefinite sparse symmetric linear equations",
ACM Trans. Math. Softw. 9(3), 302-325; Liu, J. W. H. 1992, "The multifrontal method for sparse matrix
solution: theory and practice", SIAM Review 34(1), 82-109) on the separator tree of a nested-dissection order
(:mod:`impactsound.fem.ordering`). :class:`SuperLUShiftInvert` is the general LU (SuperLU, Demmel, Eisenstat,
Gilbert, Li & Liu 1999, "A supernodal approach to sparse partial pivoting", SIAM J. Matrix Anal. Appl. 20(3),
720-755) for indefinite shifts, with threshold pivoting. :func:`shift_invert_operator` picks one.
All operators have ``solve(B)`` (blocks of right-hand sides) and ``nnz``.
"""
from __future__ import annotations

import numba as nb
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import blas, lapack

from ..errors import SolverError


@nb.njit(cache=True, nogil=True)
def _extend_add(F, U, li):
    """F[li, li] += U on the lower triangle (li ascending, so U's lower triangle lands in F's)."""
    n = li.shape[0]
    for j in range(n):
        lj = li[j]
        for i in range(j, n):
            F[li[i], lj] += U[i, j]


class MultifrontalCholesky:
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
    ||A X - B|| / ||B|| ~ 1e-12, and every accepted pair's true residual is checked anyway
    (:func:`impactsound.fem.eigen.relative_residuals`).

    Parameters
    ----------
    A : scipy.sparse matrix, (n, n)
        Symmetric positive definite, already in the order of the separator tree (both triangles stored; the
        lower one is read).
    bounds : ndarray of int, (n_groups + 1,)
        Group g owns the dofs bounds[g]:bounds[g + 1] (groups in postorder, as from
        :func:`impactsound.fem.ordering.nested_dissection_tree`, in dofs).
    parent : ndarray of int, (n_groups,)
        Parent group of each group in the separator tree, -1 for a root.

    Raises
    ------
    numpy.linalg.LinAlgError
        A is not positive definite, or the tree does not match A's sparsity.

    Attributes
    ----------
    nnz : int
        Entries stored for the factor (a measure of its memory: 8 bytes each).
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
        """Solve A X = B.

        Parameters
        ----------
        B : ndarray, (n, k)
            Right-hand sides, in A's order.

        Returns
        -------
        ndarray, (n, k), C order
        """
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


class SuperLUShiftInvert:
    """Solves (K - sigma M) x = b for blocks of b with SuperLU.

    Used for indefinite shifts (in-band sigma), and as the fallback when the Cholesky factorisation finds
    K - sigma M not positive definite.

    Parameters
    ----------
    A : scipy.sparse.csc_matrix, (n, n)
        K - sigma M (nondimensional or SI: the factor does not care).
    spd : bool
        A is expected positive definite: no pivoting (threshold 0), else threshold pivoting (0.01).
    order : {"natural", "mmd"}
        "natural": A is already in a fill-reducing order (nested dissection) and is factored in it; "mmd":
        SuperLU orders A itself (minimum degree on A^T + A).

    Raises
    ------
    SolverError
        The factorisation failed (the shift is an eigenvalue, or the mesh is degenerate).

    Attributes
    ----------
    nnz : int
        Entries of the L and U factors.
    """

    def __init__(self, A: sp.csc_matrix, spd: bool, order: str = "natural"):
        permc_spec = {"natural": "NATURAL", "mmd": "MMD_AT_PLUS_A"}[order]
        opts = dict(SymmetricMode=True)
        try:
            self.lu = spla.splu(A, permc_spec=permc_spec, diag_pivot_thresh=0.0 if spd else 0.01, options=opts)
        except RuntimeError as exc:
            raise SolverError(f"factorisation of K - sigma M failed ({exc}); the shift is an eigenvalue or the "
                              f"mesh is degenerate: try another shift or re-mesh") from None
        self.nnz = int(self.lu.L.nnz + self.lu.U.nnz)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """X = A^-1 B for a block B (n, k) of right-hand sides in A's order (SuperLU's triangular solves)."""
        return self.lu.solve(np.asfortranarray(B, dtype=np.float64))


def shift_invert_operator(A: sp.csc_matrix, sigma: float, tree: tuple[np.ndarray, np.ndarray] | None = None
                          ) -> tuple[MultifrontalCholesky | SuperLUShiftInvert, str]:
    """Factor A = K - sigma M for shift-invert: multifrontal Cholesky where it applies, else SuperLU.

    Parameters
    ----------
    A : scipy.sparse.csc_matrix, (n, n)
        K - sigma M, in the order of ``tree`` when one is given.
    sigma : float
        The shift (in the units of A's eigenvalues). sigma < 0 below a positive semi-definite K makes A positive
        definite: Cholesky (no pivoting). Otherwise A is indefinite: SuperLU with threshold pivoting.
    tree : (bounds, parent) or None
        The separator tree of A's nested-dissection order (see :class:`MultifrontalCholesky`); None when A is
        in no fill-reducing order (SuperLU then orders it by minimum degree).

    Returns
    -------
    op : MultifrontalCholesky or SuperLUShiftInvert
        The factor, with ``solve(B)`` and ``nnz``.
    kind : str
        "multifrontal-cholesky" or "superlu".
    """
    if tree is not None and sigma < 0:
        try:
            return MultifrontalCholesky(A, *tree), "multifrontal-cholesky"
        except np.linalg.LinAlgError:
            pass                                       # K not positive semi-definite: let SuperLU try
    return SuperLUShiftInvert(A, spd=sigma < 0, order="natural" if tree is not None else "mmd"), "superlu"
