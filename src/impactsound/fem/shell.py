"""Discrete thin shell (triangle mesh): energy, internal force, stiffness at rest, lumped mass, linear modes.

The model of Chadwick, J. N., An, S. S. & James, D. L. 2009, "Harmonic shells: a practical nonlinear sound
model for near-rigid thin shells", ACM Trans. Graph. 28(5), sec. 2.1: a Koiter-type discrete shell after
Gingold, Y., Secord, A., Han, J. Y., Grinspun, E. & Zorin, D. 2004, "A discrete model for inelastic
deformation of thin shells". The energy is a sum over triangles of a piecewise-constant density,

    E(u) = sum_i A_i W_i(u),   W = W_m + W_b,
    W_m = Y h / (2 (1 - nu^2))    [(1 - nu) tr(eps_m^2) + nu tr(eps_m)^2],
    W_b = Y h^3 / (24 (1 - nu^2)) [(1 - nu) tr(eps_b^2) + nu tr(eps_b)^2],

A_i the rest area, h the thickness, Y (= E) Young's modulus. SI units throughout: positions and displacements
[m], thickness [m], energies [J], forces [N], stiffness [N/m], mass [kg], frequencies [Hz].

Membrane strain (this module's choice, exact for any deformation): the Green strain of the triangle,
eps_m = (F^T F - I)/2 with F = Ds Dm^{-1} the 3x2 deformation gradient from the rest edge vectors Dm (2x2, in an
orthonormal frame of the rest triangle) to the deformed edge vectors Ds (3x2); it depends on the edge lengths
only, hence is invariant under rigid motions.

Bending strain: a discrete shape-operator difference built from the changes of the signed bending (dihedral)
angles theta_k - theta_k^rest at the triangles' edges, each measured on a 6-vertex "flap" (a triangle and its
three edge neighbours' apexes, Gingold et al. 2004). Free edges (boundary edges: one triangle) carry no angle.
Two schemes (``bending``):

* "flap" (default): eps_b of triangle T from T's own flap only: the symmetric 2x2 tensor (in T's rest frame)
  with G_k : eps_b = dtheta_k for T's three edges. The linear functionals G_k are this package's own choice:
  G_k : II is the jump, across edge k, of the normal slope of the piecewise-linear interpolant of the quadratic
  height field z = x^T II x / 2 on the two rest triangles (the neighbour unfolded into T's plane about the shared
  edge), so eps_b = G^{-1} dtheta is the Hessian of the quadratic through the flap's six vertices: exact for
  every constant-curvature field (cylinder, sphere, saddle) whatever the triangle shapes. A triangle with m < 3
  interior edges uses, of the tensors satisfying its m constraints, the one of least bending energy
  (eps_b = Q^{-1} G^T (G Q^{-1} G^T)^{-1} dtheta, Q the energy's quadratic form; the natural free-edge
  condition, this package's choice); one with no interior edge has no bending energy.
  Limitation: six vertex heights always fit a quadratic, so a high-frequency vertex pattern has, in each flap,
  the angles of some constant curvature. The scheme converges only where those curvatures cancel over the mesh,
  i.e. where it passes the constant-moment patch test sum_T A_T eps_b,T(w) = 0 for every w vanishing near the
  boundary (as int Hess w = 0): one-diagonal grids, offset-row / staggered-ring meshes. It fails it on "union
  jack" grids (alternating diagonals), 4-triangle "cross" grids and irregular (Delaunay) meshes, where a
  checkerboard-like pattern of amplitude ~ kappa dx^2 cancels part of a smooth curvature: plate and cylinder
  modes converge to limits up to 20-25 % too low (union jack, cross) or stall 1-7 % low (Delaunay); no choice of
  the per-flap map G can fix this (exactness forces G^{-1}).
* "midedge" (this package's construction, after the mid-edge normals of Grinspun, Gingold, Reisman & Zorin 2006,
  "Computing discrete shape operators on general meshes", and Morley's nonconforming plate triangle):
  eps_b = P_T (1/A_T) sum_k L_k phi_k nu_k nu_k^T, with L_k, nu_k T's rest edge lengths and outward in-plane edge
  normals and phi_k the excess of the normal slope at edge k's midpoint over that of T's linear interpolant.
  The mid-edge slope is one value shared by the edge's two triangles, estimated from the flap quadratics of both
  (the mean of the two estimates; one-sided where one of them has a free edge, dtheta_k / 2 where both have).
  For a quadratic height field each estimate is exact, so eps_b is exact for constant curvature on complete
  triangles as before, and since the slope is shared the patch test holds on every mesh (divergence theorem).
  Free edges' slopes are chosen to minimise W_b (P_T). Each triangle's bending term then reads the angles of
  its own and its three neighbours' flaps: eps_b(T) = sum_i Rb[T, :, i, :] dtheta(flaps[T, i]), a 24-slot
  stencil (``stencil``: the four flap stencils one after the other, 12 distinct vertices).
  On one-diagonal grids and staggered-ring cylinders it gives the same stiffness as "flap" (to rounding).

Stiffness at rest: both strains vanish at u = 0, so K = sum_i A_i (B^T C B) over the strain Jacobians B at rest
(exact: the terms with second derivatives of the strains multiply zero stresses); it is assembled analytically.
Mass: lumped, rho h A / 3 to each vertex of each triangle, in each of the three directions.

Linear modes (Chadwick et al. 2009, sec. 2.2): K u = w^2 M u solved with the package's sparse eigen-solver
(:func:`impactsound.fem.eigen.solve_modes`), the 6 rigid-body modes dropped and checked to be ~0, U^T M U = I;
Rayleigh damping ratios from the material (``Material.damping_ratio``).

Measured (free steel disk, a = 0.1 m, h = 1 mm, nu = 0.33, ring meshes of 6k points on ring k, lumped mass) against
the Kirchhoff values: errors of the (2,0) / (0,1) / (3,0) modes -1.0 / -6.3 / -1.7 % with 10 rings (331 vertices),
-0.5 / -4.5 / -0.7 % with 16, -0.25 / -3.2 / -0.4 % with 24, -0.17 / -2.4 / -0.24 % with 32: from below, the
axisymmetric (0,1) mode converging only about linearly in the edge length (the same with the free-edge curvature
clamped to zero instead of condensed, so not the free-edge treatment: these Delaunay ring meshes fail the flap
scheme's patch test). "midedge": -0.56 / -1.41 / -1.24 % with 10 rings, -0.22 / -0.55 / -0.50 % with 16,
-0.10 / -0.25 / -0.23 % with 24.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import connected_components

from ..errors import InputError, MeshError, SolverError
from .eigen import solve_modes

__all__ = ["ShellModel", "ShellModes", "shell_modes"]

_DEGENERATE_REL = 1e-10     # a triangle with area < this x (longest edge)^2 is degenerate


def _cross(a, b):
    return np.cross(a, b)


def _dot(a, b):
    return np.einsum("...i,...i->...", a, b)


def _norm(a):
    return np.sqrt(_dot(a, a))


@dataclass
class ShellModes:
    """Linear modes of a shell (SI units).

    frequencies_hz (m,) ascending [Hz]; omega2 (m,) [rad^2/s^2]; U (3 Nv, m), dof 3 v + component,
    U^T M U = I [1/sqrt(kg)]; damping_ratios (m,) Rayleigh xi_j (material's alpha, beta); rigid_omega2 (6,)
    the eigenvalues of the dropped rigid-body modes, U^T K U of their mass-normalised vectors [rad^2/s^2];
    info: solver statistics.
    """

    frequencies_hz: np.ndarray
    omega2: np.ndarray
    U: np.ndarray
    damping_ratios: np.ndarray
    rigid_omega2: np.ndarray
    info: dict = field(default_factory=dict)


class ShellModel:
    """Discrete thin shell on a triangle mesh (module docstring).

    Parameters
    ----------
    vertices : array (Nv, 3)
        Rest positions [m].
    faces : int array (Nf, 3)
        Triangles (orientation need not be consistent).
    thickness : float
        Shell thickness h [m], > 0 and smaller than the object's size (bounding-box diagonal).
    material : Material
        Provides E [Pa], nu, rho [kg/m^3] (and alpha, beta for damping).
    bending : "flap" or "midedge"
        Discrete bending strain (module docstring, "Bending strain"). "flap" (default): each triangle's curvature
        from its own 6-vertex flap; converges only on meshes that pass the patch test (one-diagonal grids,
        offset-row / staggered-ring meshes). "midedge": mid-edge normal slopes shared by the two triangles of an
        edge, each triangle coupled to its three neighbours' flaps (24-slot stencil); converges on any mesh.

    Raises
    ------
    InputError
        Bad array shapes, indices out of range, thickness <= 0 or larger than the object.
    MeshError
        Non-manifold edges (shared by more than 2 triangles) or degenerate (near-zero area) triangles.
    """

    def __init__(self, vertices, faces, thickness: float, material, bending: str = "flap"):
        X = np.asarray(vertices, dtype=float)
        F = np.asarray(faces)
        if X.ndim != 2 or X.shape[1] != 3 or len(X) < 3:
            raise InputError(f"shell vertices must be an (Nv, 3) array with Nv >= 3, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise InputError("shell vertices contain NaN or infinite coordinates")
        if F.ndim != 2 or F.shape[1] != 3 or len(F) == 0 or not np.issubdtype(F.dtype, np.integer):
            raise InputError(f"shell faces must be a non-empty integer (Nf, 3) array, got shape {F.shape}, "
                             f"dtype {F.dtype}")
        if F.min() < 0 or F.max() >= len(X):
            raise InputError(f"shell faces index vertices outside 0..{len(X) - 1}")
        F = F.astype(np.int64)
        size = float(np.linalg.norm(X.max(axis=0) - X.min(axis=0)))
        h = float(thickness)
        if not np.isfinite(h) or h <= 0:
            raise InputError(f"shell thickness must be > 0 [m], got {thickness!r}")
        if h >= size:
            raise InputError(f"shell thickness {h:g} m is not smaller than the object's size {size:g} m "
                             f"(bounding-box diagonal): wrong units, or not a thin shell")
        if bending not in ("flap", "midedge"):
            raise InputError(f"shell bending must be 'flap' or 'midedge', got {bending!r}")
        self.bending = bending
        self.vertices = X
        self.faces = F
        self.thickness = h
        self.material = material
        self.size = size
        E, nu = float(material.E), float(material.nu)
        self.c_m = E * h / (2 * (1 - nu**2))            # W_m coefficient [N/m]
        self.c_b = E * h**3 / (24 * (1 - nu**2))        # W_b coefficient [N m]
        # quadratic form of W / c in Voigt order (e11, e22, e12): (1-nu) tr(e^2) + nu tr(e)^2
        self.Q = np.array([[1.0, nu, 0.0], [nu, 1.0, 0.0], [0.0, 0.0, 2 * (1 - nu)]])
        self._check_triangles()
        self._build_topology()
        self._build_rest()

    # ------------------------------------------------------------------ setup
    @property
    def n_vertices(self) -> int:
        return len(self.vertices)

    @property
    def ndof(self) -> int:
        return 3 * len(self.vertices)

    def _check_triangles(self):
        X, F = self.vertices, self.faces
        P = X[F]
        area = 0.5 * _norm(_cross(P[:, 1] - P[:, 0], P[:, 2] - P[:, 0]))
        lmax = np.max(_norm(P - np.roll(P, -1, axis=1)), axis=1)
        repeated = (F[:, 0] == F[:, 1]) | (F[:, 1] == F[:, 2]) | (F[:, 2] == F[:, 0])
        bad = np.flatnonzero(repeated | (area <= _DEGENERATE_REL * np.maximum(lmax, 1e-300)**2))
        if len(bad):
            raise MeshError(f"{len(bad)} degenerate (zero or near-zero area) shell triangle(s), indices "
                            f"{bad[:10].tolist()}{' ...' if len(bad) > 10 else ''}: remove or re-mesh them")
        self.areas = area
        unused = np.flatnonzero(np.bincount(F.ravel(), minlength=len(X)) == 0)
        if len(unused):
            raise MeshError(f"{len(unused)} shell vertices are in no triangle (they would have no mass), "
                            f"indices {unused[:10].tolist()}{' ...' if len(unused) > 10 else ''}: remove them")

    def _build_topology(self):
        F = self.faces
        Nf = len(F)
        a = F.ravel()                                   # edge k of face f: (F[f,k], F[f,k+1]); slot 3 f + k
        b = np.roll(F, -1, axis=1).ravel()
        key = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)
        uniq, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        inv = inv.ravel()
        nm = np.flatnonzero(counts > 2)
        if len(nm):
            msg = []
            for e in nm[:10]:
                tris = (np.flatnonzero(inv == e) // 3).tolist()
                msg.append(f"({uniq[e, 0]}, {uniq[e, 1]}) in triangles {tris}")
            raise MeshError(f"{len(nm)} non-manifold shell edge(s) shared by more than 2 triangles: "
                            f"{'; '.join(msg)}{' ...' if len(nm) > 10 else ''}: split the mesh there")
        # partner slot of each interior edge slot
        order = np.argsort(inv, kind="stable")
        partner = np.full(3 * Nf, -1, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
        two = counts == 2
        s0 = order[starts[two]]
        s1 = order[starts[two] + 1]
        partner[s0] = s1
        partner[s1] = s0
        interior = partner >= 0
        # neighbour apex: the vertex of the partner face opposite the shared edge (slot k -> vertex k+2)
        pf, pk = partner // 3, partner % 3
        apex = np.where(interior, F[pf, (pk + 2) % 3], -1)
        self.interior = interior.reshape(Nf, 3)
        self.apex = apex.reshape(Nf, 3)
        # neighbour across each edge (-1: free edge), the edge's slot there, and +1 / -1 where the two triangles are
        # consistently / inconsistently oriented (the neighbour's signed angles and heights then change sign)
        self.neighbor = np.where(interior, pf, -1).reshape(Nf, 3)
        self.neighbor_slot = np.where(interior, pk, -1).reshape(Nf, 3)
        b2 = F[:, [1, 2, 0]].ravel()
        self.neighbor_sign = np.where(interior & (F[pf, pk] == b2), 1.0, -1.0).reshape(Nf, 3)
        self.n_components = int(connected_components(
            sp.coo_matrix((np.ones(2 * Nf), (np.r_[F[:, 0], F[:, 1]], np.r_[F[:, 1], F[:, 2]])),
                          shape=(self.n_vertices,) * 2), directed=False)[0])
        # stencil: face vertices then the three apexes (a free edge's apex slot points at vertex 0 of the face,
        # with zero weight)
        self.flap_stencil = np.concatenate([F, np.where(interior.reshape(Nf, 3), self.apex, F[:, :1])], axis=1)
        # each triangle's bending term reads the angles of these flaps (-1: none): itself ("flap"), or itself and
        # its neighbours across edges 0, 1, 2 ("midedge"); its stencil is their flap stencils one after the other
        # (a missing neighbour's 6 slots repeat the triangle's own flap, with zero weight)
        if self.bending == "flap":
            self.flaps = np.arange(Nf)[:, None]
        else:
            self.flaps = np.concatenate([np.arange(Nf)[:, None], self.neighbor], axis=1)
        self._flaps_or_self = np.where(self.flaps >= 0, self.flaps, np.arange(Nf)[:, None])
        self.stencil = self.flap_stencil[self._flaps_or_self].reshape(Nf, -1)

    def _build_rest(self):
        X, F = self.vertices, self.faces
        P = X[F]                                        # (Nf, 3, 3)
        e01, e02 = P[:, 1] - P[:, 0], P[:, 2] - P[:, 0]
        n = _cross(e01, e02)
        n /= _norm(n)[:, None]
        t1 = e01 / _norm(e01)[:, None]
        t2 = _cross(n, t1)
        self.frame = np.stack([t1, t2], axis=2)         # (Nf, 3, 2) orthonormal rest frame
        Dm = np.einsum("fij,fik->fjk", self.frame, np.stack([e01, e02], axis=2))   # (Nf, 2, 2)
        Dminv = np.linalg.inv(Dm)
        # gradients of the linear shape functions in the rest frame: F = sum_k x_k gN_k^T
        gN = np.empty((len(F), 3, 2))
        gN[:, 1] = Dminv[:, 0]
        gN[:, 2] = Dminv[:, 1]
        gN[:, 0] = -gN[:, 1] - gN[:, 2]
        self.gN = gN
        self.Dminv = Dminv
        # rest dihedral angles and the curvature map eps_b = R dtheta
        self.theta0 = self._angles(X)[0]
        p2 = np.zeros((len(F), 3, 2))                   # rest vertex positions in the frame
        p2[:, 1] = Dm[:, :, 0]
        p2[:, 2] = Dm[:, :, 1]
        G = np.zeros((len(F), 3, 3))
        for k in range(3):
            a, b, c = k, (k + 1) % 3, (k + 2) % 3
            e2 = p2[:, b] - p2[:, a]                    # full-length edge vector (2D)
            L = _norm(e2)
            t = np.stack([e2[:, 1], -e2[:, 0]], axis=1) / L[:, None]   # outward in-plane edge normal
            lam_c = _dot(p2[:, c] - p2[:, a], e2) / L**2
            h_c = 2 * self.areas / L
            d = np.where(self.interior[:, k], self.apex[:, k], F[:, 0])
            e3 = P[:, b] - P[:, a]
            rd = X[d] - P[:, a]
            lam_d = _dot(rd, e3) / L**2
            h_d = _norm(rd - lam_d[:, None] * e3)
            h_d = np.where(self.interior[:, k], h_d, 1.0)
            w_e = -0.5 * (lam_d * (1 - lam_d) / h_d + lam_c * (1 - lam_c) / h_c)
            Gk = ((lam_d - lam_c)[:, None, None] * 0.5 * (t[:, :, None] * e2[:, None, :]
                                                          + e2[:, :, None] * t[:, None, :])
                  + (0.5 * (h_c + h_d))[:, None, None] * t[:, :, None] * t[:, None, :]
                  + w_e[:, None, None] * e2[:, :, None] * e2[:, None, :])
            G[:, k] = np.stack([Gk[:, 0, 0], Gk[:, 1, 1], 2 * Gk[:, 0, 1]], axis=1)
        if self.bending == "midedge":
            self.Rb = self._midedge_map(G, p2)
            return
        R = np.zeros((len(F), 3, 3))
        Qi = np.linalg.inv(self.Q)
        patterns = self.interior @ np.array([1, 2, 4])
        for pat in np.unique(patterns):
            rows = np.flatnonzero(patterns == pat)
            cols = [k for k in range(3) if pat & (1 << k)]
            if not cols:
                continue
            Gc = G[rows][:, cols]                       # (n, m, 3)
            S = np.einsum("nmi,ij,nlj->nml", Gc, Qi, Gc)
            Rc = np.einsum("ij,nmj,nml->nil", Qi, Gc, np.linalg.inv(S))   # (n, 3, m)
            R[np.ix_(rows, [0, 1, 2], cols)] = Rc
        self._R_flap = R
        self.Rb = R[:, :, None, :]

    @property
    def R(self) -> np.ndarray:
        """(Nf, 3, 3): eps_b = R dtheta over the triangle's own flap (``bending="flap"`` only)."""
        if self.bending != "flap":
            raise AttributeError("ShellModel.R (one flap per triangle) exists only for bending='flap'; "
                                 "bending='midedge' couples each triangle to its neighbours' flaps: use Rb, "
                                 "flaps and stencil")
        return self._R_flap

    def _midedge_map(self, G, p2):
        """Rb (Nf, 3, 4, 3) of the "midedge" scheme: eps_b(T) = sum_i Rb[T, :, i] dtheta(flaps[T, i]).

        Mid-edge slope excess phi_k = s_k - g_T . nu_k of triangle T at edge k (s_k the normal slope at the edge
        midpoint, shared by both triangles of the edge; g_T the gradient of T's linear interpolant; nu_k T's
        outward in-plane edge normal): with d_T,k = Dfit_T[k] . dtheta_T the excess of the quadratic through T's
        flap (Hessian G_T^-1 dtheta_T),
            phi_k = (d_T,k + dtheta_k - sgn d_T',k') / 2     both flaps complete (3 interior edges),
                    d_T,k                                     only T's,
                    dtheta_k - sgn d_T',k'                    only the neighbour's,
                    dtheta_k / 2                              neither,
        and eps_b = P_T (1/A_T) sum_k L_k phi_k nu_k nu_k^T, the free edges' phi chosen to minimise W_b (P_T).
        """
        F = self.faces
        Nf = len(F)
        comp = self.interior.all(axis=1)
        nu = np.empty((Nf, 3, 2))
        L = np.empty((Nf, 3))
        mid = np.empty((Nf, 3, 2))
        for k in range(3):
            e2 = p2[:, (k + 1) % 3] - p2[:, k]
            L[:, k] = _norm(e2)
            nu[:, k] = np.stack([e2[:, 1], -e2[:, 0]], axis=1) / L[:, k, None]
            mid[:, k] = 0.5 * (p2[:, k] + p2[:, (k + 1) % 3])
        # slope excess at the edge midpoints of the quadratic x^T E x / 2 over its linear interpolant, E the
        # Voigt basis tensors (e11, e22, e12)
        Ebas = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
        bq = np.empty((Nf, 3, 3))
        for j in range(3):
            phi_v = 0.5 * np.einsum("fvi,ij,fvj->fv", p2, Ebas[j], p2)
            g = np.einsum("fv,fvi->fi", phi_v, self.gN)
            bq[:, :, j] = np.einsum("fki,fki->fk", nu, np.einsum("ij,fkj->fki", Ebas[j], mid) - g[:, None, :])
        Dfit = np.zeros((Nf, 3, 3))
        Dfit[comp] = bq[comp] @ np.linalg.inv(G[comp])
        inter = self.interior
        nb = np.maximum(self.neighbor, 0)
        own = np.broadcast_to(comp[:, None], inter.shape)
        other = inter & comp[nb]
        both, only_t, only_n = inter & own & other, inter & own & ~other, inter & ~own & other
        neither = inter & ~own & ~other
        a = 0.5 * (both | neither) + 1.0 * only_n
        w1 = 0.5 * both + 1.0 * only_t
        w2 = (0.5 * both + 1.0 * only_n) * self.neighbor_sign
        phi_own = a[:, :, None] * np.eye(3) + w1[:, :, None] * Dfit             # (f, edge k, own angle)
        phi_nb = -w2[:, :, None] * Dfit[nb, np.maximum(self.neighbor_slot, 0)]  # (f, edge k, neighbour's angle)
        C = (L / self.areas[:, None])[:, None, :] * np.stack([nu[..., 0]**2, nu[..., 1]**2, nu[..., 0] * nu[..., 1]],
                                                             axis=1)           # (f, voigt, edge)
        Cp = np.zeros_like(C)
        patterns = inter @ np.array([1, 2, 4])
        for pat in np.unique(patterns):
            rows = np.flatnonzero(patterns == pat)
            cols = [k for k in range(3) if pat & (1 << k)]
            free = [k for k in range(3) if not pat & (1 << k)]
            if not cols:
                continue
            Cr = C[rows]
            if free:
                Cf = Cr[:, :, free]
                Sf = np.einsum("nif,ij,njg->nfg", Cf, self.Q, Cf)
                P = np.eye(3) - np.einsum("nif,nfg,ngj->nij", Cf, np.linalg.inv(Sf),
                                          np.einsum("nkg,kj->ngj", Cf, self.Q))
                Cp[np.ix_(rows, [0, 1, 2], cols)] = np.einsum("nij,njk->nik", P, Cr[:, :, cols])
            else:
                Cp[rows] = Cr
        Rb = np.zeros((Nf, 3, 4, 3))
        Rb[:, :, 0] = Cp @ phi_own
        for k in range(3):
            Rb[:, :, k + 1] = Cp[:, :, k, None] * phi_nb[:, k, None, :]
        return Rb

    # ------------------------------------------------------------------ geometry of the hinges
    def _angles(self, x, grad: bool = False):
        """Signed bending angles theta (Nf, 3) at the faces' edges (0 at free edges) and, with grad, their
        gradients (Nf, 3, 6, 3) over the stencil (face vertices, then apexes)."""
        F = self.faces
        Nf = len(F)
        theta = np.zeros((Nf, 3))
        J = np.zeros((Nf, 3, 6, 3)) if grad else None
        for k in range(3):
            ia, ib, ic = k, (k + 1) % 3, (k + 2) % 3
            m = self.interior[:, k]
            xa, xb, xc = x[F[m, ia]], x[F[m, ib]], x[F[m, ic]]
            xd = x[self.apex[m, k]]
            e = xb - xa
            L = _norm(e)
            N1 = _cross(e, xc - xa)                     # face (a, b, c)
            N2 = _cross(xa - xb, xd - xb)               # neighbour as (b, a, d): same orientation
            A1, A2 = _norm(N1), _norm(N2)
            n1, n2 = N1 / A1[:, None], N2 / A2[:, None]
            theta[m, k] = np.arctan2(_dot(_cross(n2, n1), e / L[:, None]), _dot(n1, n2))
            if grad:
                gc = n1 * (L / A1)[:, None]             # n1 / h_c
                gd = n2 * (L / A2)[:, None]             # n2 / h_d
                lc = _dot(xc - xa, e) / L**2
                ld = _dot(xd - xa, e) / L**2
                Jm = np.zeros((np.count_nonzero(m), 6, 3))
                Jm[:, ic] = gc
                Jm[:, 3 + k] = gd
                Jm[:, ia] = -((1 - lc)[:, None] * gc + (1 - ld)[:, None] * gd)
                Jm[:, ib] = -(lc[:, None] * gc + ld[:, None] * gd)
                J[m, k] = Jm
        return theta, J

    def _as_positions(self, u):
        u = np.asarray(u, dtype=float)
        if u.size != self.ndof:
            raise InputError(f"displacement must have {self.ndof} entries (Nv x 3), got shape {u.shape}")
        return self.vertices + u.reshape(-1, 3)

    # ------------------------------------------------------------------ energy and force
    def _strains(self, x, grad=False):
        P = x[self.faces]
        Fd = np.einsum("fki,fkj->fij", P, self.gN)      # (Nf, 3, 2) deformation gradient
        C = np.einsum("fki,fkj->fij", Fd, Fd)
        em = np.stack([0.5 * (C[:, 0, 0] - 1), 0.5 * (C[:, 1, 1] - 1), 0.5 * C[:, 0, 1]], axis=1)
        theta, J = self._angles(x, grad)
        dth = np.where(self.interior, (theta - self.theta0 + np.pi) % (2 * np.pi) - np.pi, 0.0)
        if self.bending == "flap":
            eb = np.einsum("fij,fj->fi", self._R_flap, dth)
        else:
            dthf = dth[self._flaps_or_self] * (self.flaps >= 0)[:, :, None]
            eb = np.einsum("fiaj,faj->fi", self.Rb, dthf)
        return em, eb, Fd, J

    def element_energies(self, u):
        """Per-triangle energy densities (W_m, W_b), each (Nf,) [J/m^2], for displacement u (3 Nv,) [m]."""
        em, eb, _, _ = self._strains(self._as_positions(u))
        Wm = self.c_m * np.einsum("fi,ij,fj->f", em, self.Q, em)
        Wb = self.c_b * np.einsum("fi,ij,fj->f", eb, self.Q, eb)
        return Wm, Wb

    def energy(self, u) -> float:
        """Elastic energy E(u) = sum_i A_i (W_m + W_b) [J] of displacement u ((3 Nv,) or (Nv, 3)) [m]."""
        Wm, Wb = self.element_energies(u)
        return float(self.areas @ (Wm + Wb))

    def element_forces(self, u):
        """Each triangle's share of f_int: the gradient of A_i W_i(u) over its membrane vertices (``faces``) and
        over its bending stencil (``stencil``: 6 vertices for "flap", 24 slots = 4 flaps for "midedge"; missing
        neighbours contribute zero rows).

        Returns
        -------
        fm : ndarray (Nf, 3, 3)
            [N] on the triangle's 3 vertices.
        fb : ndarray (Nf, S, 3)
            [N] on its S = 6 (flap) or 24 (midedge) stencil slots.
        """
        x = self._as_positions(u)
        em, eb, Fd, J = self._strains(x, grad=True)
        A = self.areas
        # membrane: dW/d eps tensor (sigma), then dE/dx_k = A F sigma gN_k
        s = 2 * self.c_m * (em @ self.Q)                # d W_m / d(e11, e22, e12)
        sig = np.empty((len(A), 2, 2))
        sig[:, 0, 0], sig[:, 1, 1] = s[:, 0], s[:, 1]
        sig[:, 0, 1] = sig[:, 1, 0] = 0.5 * s[:, 2]
        fm = A[:, None, None] * np.einsum("fij,fjl,fkl->fki", Fd, sig, self.gN)   # (Nf, 3 verts, 3)
        # bending: dE/dtheta_k = A 2 c_b (R^T Q eb)_k
        if self.bending == "flap":
            mk = (2 * self.c_b * A)[:, None] * np.einsum("fji,jl,fl->fi", self._R_flap, self.Q, eb)
            fb = np.einsum("fk,fksi->fsi", mk, J)           # (Nf, 6, 3)
            return fm, fb
        mb = (2 * self.c_b * A)[:, None] * (eb @ self.Q)                    # dW/d eps_b, (Nf, 3)
        mk = np.einsum("fiaj,fi->faj", self.Rb, mb)                          # dE/dtheta of each flap's angles
        fb = np.einsum("faj,fajsc->fasc", mk, J[self._flaps_or_self])        # (Nf, 4, 6, 3)
        return fm, fb.reshape(len(A), -1, 3)

    def internal_force(self, u) -> np.ndarray:
        """f_int(u) = dE/du (3 Nv,) [N], dof 3 v + component (analytic gradient)."""
        fm, fb = self.element_forces(u)
        f = np.zeros((self.n_vertices, 3))
        for i in range(3):
            f[:, i] = (np.bincount(self.faces.ravel(), fm[:, :, i].ravel(), minlength=self.n_vertices)
                       + np.bincount(self.stencil.ravel(), fb[:, :, i].ravel(), minlength=self.n_vertices))
        return f.ravel()

    # ------------------------------------------------------------------ linearisation
    def strain_jacobians(self):
        """Strain Jacobians at rest: Bm (Nf, 3, 9) over the face's vertex dofs and Bb (Nf, 3, 3 S) over the
        stencil's dofs (S = 6 or 24 slots), Voigt order (e11, e22, e12)."""
        Fr = self.frame                                 # F at rest = frame
        gN = self.gN
        Nf = len(self.faces)
        Bm = np.zeros((Nf, 3, 3, 3))                    # (f, strain, vertex, comp)
        Bm[:, 0] = gN[:, :, 0, None] * Fr[:, None, :, 0]
        Bm[:, 1] = gN[:, :, 1, None] * Fr[:, None, :, 1]
        Bm[:, 2] = 0.5 * (gN[:, :, 1, None] * Fr[:, None, :, 0] + gN[:, :, 0, None] * Fr[:, None, :, 1])
        _, J = self._angles(self.vertices, grad=True)
        if self.bending == "flap":
            Bb = np.einsum("fij,fjsc->fisc", self._R_flap, J)
        else:
            Bb = np.einsum("fiaj,fajsc->fiasc", self.Rb, J[self._flaps_or_self])
        return Bm.reshape(Nf, 3, 9), Bb.reshape(Nf, 3, -1)

    def stiffness(self) -> sp.csr_matrix:
        """K = d f_int / du at u = 0 (3 Nv, 3 Nv) [N/m], analytic, symmetric positive semi-definite."""
        Bm, Bb = self.strain_jacobians()
        A = self.areas
        Km = (2 * self.c_m * A)[:, None, None] * np.einsum("fai,ab,fbj->fij", Bm, self.Q, Bm)
        dm = (3 * self.faces[:, :, None] + np.arange(3)).reshape(-1, 9)
        if self.bending != "flap":
            # 72 stencil dofs per triangle: assemble K_b = B^T W B from the sparse B (3 Nf, 3 Nv)
            Nf = len(A)
            db = (3 * self.stencil[:, :, None] + np.arange(3)).reshape(Nf, -1)
            B = sp.coo_matrix((Bb.ravel(), (np.repeat(np.arange(3 * Nf), db.shape[1]),
                                             np.repeat(db, 3, axis=0).ravel())),
                              shape=(3 * Nf, self.ndof)).tocsr()
            blk = (3 * np.arange(Nf)[:, None] + np.arange(3))                        # (Nf, 3)
            W = sp.coo_matrix((((2 * self.c_b * A)[:, None, None] * self.Q).ravel(),
                               (np.repeat(blk, 3, axis=1).ravel(), np.tile(blk, (1, 3)).ravel())),
                              shape=(3 * Nf, 3 * Nf)).tocsr()
            Km = sp.coo_matrix((Km.ravel(), (np.repeat(dm, 9, axis=1).ravel(), np.tile(dm, (1, 9)).ravel())),
                               shape=(self.ndof, self.ndof)).tocsr()
            K = Km + (B.T @ (W @ B)).tocsr()
            K.sum_duplicates()
            return ((K + K.T) * 0.5).tocsr()
        Kb = (2 * self.c_b * A)[:, None, None] * np.einsum("fai,ab,fbj->fij", Bb, self.Q, Bb)
        db = (3 * self.stencil[:, :, None] + np.arange(3)).reshape(-1, 18)
        rows = np.concatenate([np.repeat(dm, 9, axis=1).ravel(), np.repeat(db, 18, axis=1).ravel()])
        cols = np.concatenate([np.tile(dm, (1, 9)).ravel(), np.tile(db, (1, 18)).ravel()])
        K = sp.coo_matrix((np.concatenate([Km.ravel(), Kb.ravel()]), (rows, cols)),
                          shape=(self.ndof, self.ndof)).tocsr()
        K.sum_duplicates()
        return ((K + K.T) * 0.5).tocsr()

    def mass(self) -> sp.csr_matrix:
        """Lumped mass (3 Nv, 3 Nv) [kg]: rho h A / 3 per vertex of each triangle, each direction."""
        mv = np.bincount(self.faces.ravel(), np.repeat(float(self.material.rho) * self.thickness
                                                        * self.areas / 3, 3), minlength=self.n_vertices)
        return sp.diags(np.repeat(mv, 3)).tocsr()


def shell_modes(model: ShellModel, f_max: float | None = 20000.0, n_modes: int | None = None,
                **solver_kw) -> ShellModes:
    """Linear modes of a free shell: K u = w^2 M u (Chadwick et al. 2009, sec. 2.2).

    Parameters
    ----------
    model : ShellModel
    f_max : float or None
        Keep modes with f <= f_max [Hz] (default 20 kHz); None: no limit (then give n_modes).
    n_modes : int or None
        At most this many elastic modes (default: all below f_max, capped at 3 Nv - 6 * components).
    solver_kw :
        Passed on to :func:`impactsound.fem.eigen.solve_modes` (shift, tol, seed...).

    Returns
    -------
    ShellModes
        Ascending frequencies [Hz], mass-normalised U (U^T M U = I), Rayleigh damping ratios; the 6 rigid
        modes (per connected piece) are dropped (solve_modes raises SolverError unless exactly that many are
        found below 1e-3 f_1).
    """
    if f_max is None and n_modes is None:
        raise InputError("shell_modes needs f_max or n_modes")
    if f_max is not None and not (f_max > 0):
        raise InputError(f"f_max must be > 0 [Hz], got {f_max!r}")
    n_rigid = 6 * model.n_components
    cap = model.ndof - n_rigid
    n = cap if n_modes is None else min(int(n_modes), cap)
    if n < 1:
        raise InputError(f"n_modes must be >= 1 and the mesh needs more than {n_rigid // 3} vertices")
    K, M = model.stiffness(), model.mass()
    scale = (float(model.material.E), float(model.material.rho), model.size)
    # Guard: with thin shells (membrane stiffness ~ (size/h)^2 above bending) the block-Lanczos driver can
    # return repeated copies of one mode after re-solving pairs that missed its residual test (a set that is not
    # M-orthonormal), or give up on a mode's residual. Then solve again with ARPACK shift-invert and check again.
    try:
        res = solve_modes(K, M, n, scale=scale, f_max=f_max, n_components=model.n_components,
                          coords=model.vertices, **solver_kw)
        freqs, omega2, U, rig, info = res.frequencies_hz, res.omega2, res.U, res.rigid, dict(res.info)
        bad = bool(len(freqs)) and np.abs(U.T @ (M @ U) - np.eye(len(freqs))).max() > 1e-8
    except SolverError as exc:
        info, bad = {"block_lanczos_error": str(exc)}, True
    if bad:
        freqs, omega2, U, rig = _modes_arpack(K, M, n, f_max, n_rigid, model)
        info["fallback"] = "arpack-shift-invert"
    rigid_omega2 = np.einsum("ij,ij->j", rig, K @ rig)
    omega = np.sqrt(omega2)
    xi = np.asarray(model.material.damping_ratio(omega), dtype=float) * np.ones_like(omega)
    # C order, the layout a cached copy reads back with: einsum and friends may sum in another order for another
    # layout, and a run with freshly computed modes must give the bits of one with cached modes
    return ShellModes(frequencies_hz=freqs, omega2=omega2, U=np.ascontiguousarray(U), damping_ratios=xi,
                      rigid_omega2=rigid_omega2, info=info)


def _modes_arpack(K, M, n, f_max, n_rigid, model):
    """Fallback eigen-solve: scipy's ARPACK in shift-invert mode, growing the count until f_max is passed.
    Returns (f, w^2, U, rigid U).

    The shift is minus the plate-bending scale D / (rho h L^4) with D = E h^3 / (12 (1 - nu^2)): below the
    spectrum (K - sigma M positive definite) yet near the lowest elastic modes of a thin shell, so the rigid
    cluster (mu = 1/|sigma|) and the elastic modes (mu = 1/(lambda + |sigma|)) stay far apart. A shift at the
    membrane scale E/(rho L^2) would squeeze them into a relative gap of ~(h/L)^2 and let ARPACK mix them. The
    start vector is fixed, so the result does not depend on what ARPACK was asked before in the process."""
    mat, h, L = model.material, model.thickness, model.size
    sigma = -float(mat.E) * h**2 / (12 * (1 - float(mat.nu)**2) * float(mat.rho) * L**4)
    ndof = K.shape[0]
    v0 = np.random.default_rng(0).standard_normal(ndof)
    k = min(ndof - 1, n + n_rigid if f_max is None else min(n + n_rigid, n_rigid + 40))
    while True:
        lam, X = spla.eigsh(K.tocsc(), k=k, M=M.tocsc(), sigma=sigma, which="LM", v0=v0)
        order = np.argsort(lam)
        lam, X = lam[order], X[:, order]
        if f_max is None or k >= min(ndof - 1, n + n_rigid) or lam[-1] > (2 * np.pi * f_max)**2:
            break
        k = min(ndof - 1, n + n_rigid, 2 * k)
    f1 = np.sqrt(abs(lam[n_rigid])) / (2 * np.pi)
    rigid = np.sqrt(np.abs(lam)) / (2 * np.pi) < 1e-3 * f1
    if int(rigid.sum()) != n_rigid:
        raise SolverError(f"found {int(rigid.sum())} near-zero (rigid-body) shell modes, expected {n_rigid}")
    X = X / np.sqrt(np.einsum("ij,ij->j", X, M @ X))
    lam, U, R = lam[~rigid], X[:, ~rigid], X[:, rigid]
    f = np.sqrt(lam) / (2 * np.pi)
    sel = np.arange(len(f)) < n
    if f_max is not None:
        sel &= f <= f_max
    return f[sel], lam[sel], U[:, sel], R
