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

Bending strain: a discrete shape-operator difference built from the changes of the dihedral angles at the
triangle's three edges (the 6-vertex "flap" stencil of Gingold et al. 2004). For edge k of triangle T the signed
bending angle theta_k between T and its edge neighbour is measured; eps_b is the symmetric 2x2 tensor (in T's
rest frame) with G_k : eps_b = theta_k - theta_k^rest for the three edges. The linear functionals G_k are this
package's own choice: G_k : II is the jump, across edge k, of the normal slope of the piecewise-linear
interpolant of the quadratic height field z = x^T II x / 2 on the two rest triangles (the neighbour unfolded
into T's plane about the shared edge). The discrete curvature is therefore exact for every constant-curvature
field (cylinder, sphere, saddle) whatever the triangle shapes, and G depends on the rest geometry only.

Free edges (boundary edges: one triangle) carry no dihedral angle and contribute no bending term. A triangle
with m < 3 interior edges has only m constraints on eps_b; of the tensors that satisfy them the one of least
bending energy is used (eps_b = Q^{-1} G^T (G Q^{-1} G^T)^{-1} dtheta with Q the energy's quadratic form): the
curvature component that the free edge leaves undetermined takes the value whose conjugate bending moment
vanishes, the natural free-edge condition (this package's choice). A triangle with no interior edge has no
bending energy.

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
clamped to zero instead of condensed, so not the free-edge treatment).
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

    Raises
    ------
    InputError
        Bad array shapes, indices out of range, thickness <= 0 or larger than the object.
    MeshError
        Non-manifold edges (shared by more than 2 triangles) or degenerate (near-zero area) triangles.
    """

    def __init__(self, vertices, faces, thickness: float, material):
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
        self.n_components = int(connected_components(
            sp.coo_matrix((np.ones(2 * Nf), (np.r_[F[:, 0], F[:, 1]], np.r_[F[:, 1], F[:, 2]])),
                          shape=(self.n_vertices,) * 2), directed=False)[0])
        # stencil: face vertices then the three apexes (a free edge's apex slot points at vertex 0 of the face,
        # with zero weight)
        self.stencil = np.concatenate([F, np.where(interior.reshape(Nf, 3), self.apex, F[:, :1])], axis=1)

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
        self.R = R

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
        eb = np.einsum("fij,fj->fi", self.R, dth)
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
        over its bending stencil (``stencil``, 6 vertices; missing neighbours contribute zero rows).

        Returns
        -------
        fm : ndarray (Nf, 3, 3)
            [N] on the triangle's 3 vertices.
        fb : ndarray (Nf, 6, 3)
            [N] on its 6 stencil vertices.
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
        mk = (2 * self.c_b * A)[:, None] * np.einsum("fji,jl,fl->fi", self.R, self.Q, eb)
        fb = np.einsum("fk,fksi->fsi", mk, J)           # (Nf, 6, 3)
        return fm, fb

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
        """Strain Jacobians at rest: Bm (Nf, 3, 9) over the face's vertex dofs and Bb (Nf, 3, 18) over the
        stencil's dofs, Voigt order (e11, e22, e12)."""
        Fr = self.frame                                 # F at rest = frame
        gN = self.gN
        Nf = len(self.faces)
        Bm = np.zeros((Nf, 3, 3, 3))                    # (f, strain, vertex, comp)
        Bm[:, 0] = gN[:, :, 0, None] * Fr[:, None, :, 0]
        Bm[:, 1] = gN[:, :, 1, None] * Fr[:, None, :, 1]
        Bm[:, 2] = 0.5 * (gN[:, :, 1, None] * Fr[:, None, :, 0] + gN[:, :, 0, None] * Fr[:, None, :, 1])
        _, J = self._angles(self.vertices, grad=True)
        Bb = np.einsum("fij,fjsc->fisc", self.R, J)
        return Bm.reshape(Nf, 3, 9), Bb.reshape(Nf, 3, 18)

    def stiffness(self) -> sp.csr_matrix:
        """K = d f_int / du at u = 0 (3 Nv, 3 Nv) [N/m], analytic, symmetric positive semi-definite."""
        Bm, Bb = self.strain_jacobians()
        A = self.areas
        Km = (2 * self.c_m * A)[:, None, None] * np.einsum("fai,ab,fbj->fij", Bm, self.Q, Bm)
        Kb = (2 * self.c_b * A)[:, None, None] * np.einsum("fai,ab,fbj->fij", Bb, self.Q, Bb)
        dm = (3 * self.faces[:, :, None] + np.arange(3)).reshape(-1, 9)
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
    return ShellModes(frequencies_hz=freqs, omega2=omega2, U=U, damping_ratios=xi,
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
