"""Linear-elastic stiffness and consistent mass on tetrahedra, P1 (4-node) and P2 (10-node).

Standard isotropic linear-elastic finite elements (e.g. Hughes, "The Finite Element Method"). Degrees of freedom
are interleaved per node: dof = 3 * node + component (x, y, z).

Stiffness: K_e = ∫ B^T C B dV with the isotropic Voigt C (engineering shear strains). For isotropic C this
product, written per pair of nodes (a, b) and components (i, j), is
    K_e[a i, b j] = ∫ lambda dN_a/dx_i dN_b/dx_j + mu dN_a/dx_j dN_b/dx_i + mu delta_ij grad N_a . grad N_b dV,
which is what is evaluated (no 6 x 3n B matrices are formed; the two are algebraically identical).
- P1: gradients are constant, the integral is V times the integrand.
- P2: gradients are linear on a straight tet, the integrand quadratic, so the 4-point rule (a, b, b, b) with
  weights V/4 is exact (it integrates quadratics exactly).
Mass: exact consistent scalar mass kron I_3; P1 rho V/20 (2 diagonal, 1 off); P2 the exact table of
:func:`_p2_scalar_mass_ref` in units of rho V/420 (never row-lumped: P2 vertex row sums are negative).

Local P2 node order (VTK's quadratic tetra): vertices 0-3, then mid-edge nodes of edges
(0,1), (1,2), (2,0), (0,3), (1,3), (2,3).
Everything is vectorised over elements; elements are processed in fixed-size chunks only to bound memory.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import MeshError

P2_EDGES = np.array([[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]], dtype=np.int64)

# 4-point rule, exact for quadratics on a tet: barycentric (a, b, b, b) and permutations, weight 1/4.
_QA, _QB = 0.5854101966249685, 0.1381966011250105
QUAD4_BARY = np.full((4, 4), _QB) + np.eye(4) * (_QA - _QB)
QUAD4_W = np.full(4, 0.25)

_CHUNK = 8192


def _p2_scalar_mass_ref() -> np.ndarray:
    """Exact P2 scalar mass matrix in units of rho V / 420: vertex-vertex 6 (same) / 1, vertex-edge -4 (the edge
    touches the vertex) / -6, edge-edge 32 (same) / 16 (shared vertex) / 8 (opposite)."""
    m = np.zeros((10, 10))
    for a in range(4):
        for b in range(4):
            m[a, b] = 6.0 if a == b else 1.0
        for e, (i, j) in enumerate(P2_EDGES):
            m[a, 4 + e] = m[4 + e, a] = -4.0 if a in (i, j) else -6.0
    for e, ei in enumerate(P2_EDGES):
        for f, fj in enumerate(P2_EDGES):
            shared = len(set(ei.tolist()) & set(fj.tolist()))
            m[4 + e, 4 + f] = 32.0 if e == f else (16.0 if shared == 1 else 8.0)
    return m


P2_MASS_REF = _p2_scalar_mass_ref()
P1_MASS_REF = (np.ones((4, 4)) + np.eye(4)) * 21.0      # rho V/20 (2 diag, 1 off) in units of rho V/420


def barycentric_gradients(nodes: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of the barycentric coordinates (m, 4, 3) [1/m] and signed volumes (m,) [m^3].

    With D = rows (x1-x0, x2-x0, x3-x0), x - x0 = D^T (l1, l2, l3), so grad l_k (k=1..3) are the rows of
    D^{-T}; grad l0 = -(sum of the others).
    """
    x = nodes[tets[:, :4]]
    d = x[:, 1:4] - x[:, 0:1]                                  # (m, 3, 3)
    det = np.linalg.det(d)
    if np.any(det == 0):
        raise MeshError("degenerate tetrahedron (zero volume) in FEM assembly")
    g123 = np.linalg.inv(d).transpose(0, 2, 1)                 # rows = grad l1, l2, l3
    g = np.concatenate([-g123.sum(axis=1, keepdims=True), g123], axis=1)
    return g, det / 6.0


def p2_nodes(nodes: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Add one mid-edge node per unique tet edge: nodes (n + n_edges, 3) and tets10 (m, 10) int64.

    The first n nodes are the input vertices (unchanged); edge nodes follow, at the edge midpoints.
    """
    tets = np.asarray(tets, dtype=np.int64)
    e = np.sort(tets[:, P2_EDGES], axis=2).reshape(-1, 2)      # (m*6, 2), each edge as (low, high)
    uniq, inv = np.unique(e, axis=0, return_inverse=True)
    n = len(nodes)
    mid = 0.5 * (nodes[uniq[:, 0]] + nodes[uniq[:, 1]])
    tets10 = np.concatenate([tets[:, :4], n + inv.reshape(-1, 6)], axis=1)
    return np.concatenate([nodes, mid], axis=0), tets10


def _p2_gradient_coeffs() -> np.ndarray:
    """c[q, a, k]: grad N_a at quadrature point q = sum_k c[q,a,k] grad l_k (P2 gradients: (4 l_a - 1) grad l_a
    for vertex a, 4 (l_i grad l_j + l_j grad l_i) for edge (i, j))."""
    c = np.zeros((4, 10, 4))
    for q in range(4):
        l = QUAD4_BARY[q]
        for a in range(4):
            c[q, a, a] = 4.0 * l[a] - 1.0                      # grad[l(2l-1)] = (4l-1) grad l
        for e, (i, j) in enumerate(P2_EDGES):
            c[q, 4 + e, j] += 4.0 * l[i]                       # grad[4 li lj] = 4(li grad lj + lj grad li)
            c[q, 4 + e, i] += 4.0 * l[j]
    return c


_P2_GC = _p2_gradient_coeffs()


def _elastic_block(g: np.ndarray, w: np.ndarray, lam: float, mu: float) -> np.ndarray:
    """Element stiffness (m, nn*3, nn*3) from shape gradients g (m, q, nn, 3) and weights w (m, q) [m^3]."""
    m, _, nn, _ = g.shape
    gw = g * w[:, :, None, None]
    # a_ij-type products summed over quadrature points: P[a, i, b, j] = sum_q w g_ai g_bj
    P = np.einsum("mqai,mqbj->maibj", gw, g)
    dot = np.einsum("maibi->mab", P)                           # grad N_a . grad N_b
    K = lam * P + mu * P.transpose(0, 1, 4, 3, 2)              # mu g_aj g_bi = P[a, j, b, i]
    K += mu * dot[:, :, None, :, None] * np.eye(3)[None, None, :, None, :]
    return K.reshape(m, nn * 3, nn * 3)


def _scatter(blocks, dofs, ndof):
    """Sum element blocks (m, k, k) into a CSR matrix at element dofs (m, k)."""
    k = dofs.shape[1]
    idx_t = np.int32 if ndof < 2**31 - 1 else np.int64
    rows = np.broadcast_to(dofs[:, :, None], (len(dofs), k, k)).ravel().astype(idx_t)
    cols = np.broadcast_to(dofs[:, None, :], (len(dofs), k, k)).ravel().astype(idx_t)
    return sp.coo_matrix((blocks.ravel(), (rows, cols)), shape=(ndof, ndof)).tocsr()


def assemble(nodes: np.ndarray, tets: np.ndarray, lam: float, mu: float, rho: float, order: int = 2
             ) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray, np.ndarray]:
    """Global stiffness K [N/m] and consistent mass M [kg] (CSR, 3 dofs per node, dof = 3 node + comp).

    nodes (n, 3) [m]; tets (m, 4) positively oriented vertex indices; Lame lambda, mu [Pa]; density rho
    [kg/m^3]; order 1 (P1) or 2 (P2: mid-edge nodes are created here).
    Returns (K, M, nodes_out, elems): for P2 nodes_out has the mid-edge nodes appended and elems is (m, 10);
    for P1 they are the inputs.
    """
    nodes = np.asarray(nodes, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    if order == 1:
        elems, nodes_out, nloc = tets[:, :4], nodes, 4
    elif order == 2:
        nodes_out, elems = p2_nodes(nodes, tets[:, :4])
        nloc = 10
    else:
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    ndof = 3 * len(nodes_out)
    mref = (P1_MASS_REF if order == 1 else P2_MASS_REF) / 420.0
    K = sp.csr_matrix((ndof, ndof))
    M = sp.csr_matrix((ndof, ndof))
    eye3 = np.eye(3)
    for s in range(0, len(elems), _CHUNK):
        el = elems[s:s + _CHUNK]
        gl, vol = barycentric_gradients(nodes_out, el)
        if np.any(vol <= 0):
            raise MeshError("inverted tetrahedron (negative volume) in FEM assembly; orient tets first "
                            "(impactsound.mesh.tetra.orient_tets)")
        if order == 1:
            g = gl[:, None]                                    # (m, 1, 4, 3)
            w = vol[:, None]
        else:
            g = np.einsum("qak,mkj->mqaj", _P2_GC, gl)         # (m, 4, 10, 3)
            w = vol[:, None] * QUAD4_W[None, :]
        Ke = _elastic_block(g, w, lam, mu)
        Me = (rho * vol)[:, None, None, None, None] * mref[None, :, None, :, None] * eye3[None, None, :, None, :]
        dofs = (3 * el[:, :, None] + np.arange(3)[None, None, :]).reshape(len(el), nloc * 3)
        K = K + _scatter(Ke, dofs, ndof)
        M = M + _scatter(Me.reshape(len(el), nloc * 3, nloc * 3), dofs, ndof)
    K.sum_duplicates()
    M.sum_duplicates()
    return K.tocsr(), M.tocsr(), nodes_out, elems
