"""Radiation of an open thin shell as a vibrating screen: a dipole-layer boundary element method on its mid-surface.

Why. Air touches both faces of an open shell (a cymbal, a sheet, an open can), so the field it radiates is a
double layer whose density is the pressure jump across the wall, mu = p+ - p- (+ the side its normals face):

    p(x) = int_S mu(y) dG(x, y)/dn_y dS_y,      G = e^{ikr} / (4 pi r)       (time convention e^{-i w t}),

and the wall's motion sets the normal derivative on both faces at once, dp/dn = -rho a_n (a_n its normal
acceleration). This is the hypersingular ("screen") equation of the exterior Neumann problem of a zero-thickness
surface; it holds the acoustic short circuit round the free edges that a baffled surface sum (radiation.py)
misses, and needs no thickened wall (ffat.py), so neither the near-singular quadrature across a thin gap nor a
doubled surface. Chadwick, An & James 2009, "Harmonic Shells", sec. 4 radiate shells through BEM solves on the
thickened surface; this solves the same exterior problem on the thin limit of that surface.

Discretisation (collocation, piecewise-constant mu on the mid-surface triangles; the constant-strength doublet
panel of aerodynamic panel methods). For a flat triangle T with constant density, Stokes' theorem turns the
normal derivative of its double layer into a line integral round its edges plus a weakly singular area term
(Maue's identity written for one panel):

    n_x . grad_x int_T dG/dn_y dS_y = n_x . [ - oint_{dT} grad_x G(x, y) x dl_y  +  k^2 n_T int_T G(x, y) dS_y ].

Collocating at the centroids (never on an edge), the k = 0 part of the line integral is the Biot-Savart law of a
straight vortex segment, in closed form; the rest of it, -(e^{ikr}(ikr - 1) + 1)(x - y)/(4 pi r^3) x dl with a
bounded factor O(k^2 r^2), is integrated by Gauss-Legendre points per edge; the area term by a 7-point triangle
rule, or on the triangle's own centroid exactly along rays (int_0^rho e^{ikr}/(4 pi) dr in closed form, Gauss in
the angle). A free edge keeps its unpaired vortex segment, which is how the jump goes to zero there.

Closed surfaces are refused: their jump includes the sealed air inside, whose pressure is ~3 / (ka)^2 times the
outside's at low ka and resonant at the cavity's eigenfrequencies; the exterior field is then a near-cancellation
(ffat.py radiates closed shells from their outside instead).

The listener field is the double layer of the solved jump, 7-point rule per triangle. :meth:`ScreenRadiator.
transfer` returns the convention of :meth:`~impactsound.sources.shell.radiation.ShellRadiator.transfer`: complex
pressure per unit modal ACCELERATION with the bulk delay e^{ik|x|} removed (right-hand side -rho n . u_j).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from ...assets import Asset, cache_dir, content_hash, read_asset, write_asset
from ...errors import AssetError, InputError, MeshError

#: version of this module's numerics (part of the cache key)
CODE_VERSION = "shell-screen-2"
KIND = "shell_screen"
#: default triangle budget of the dense screen solve (complex N x N matrix: 3,000 -> 144 MB, LU ~2-4 s on 2 cores)
MAX_FACES = 3000
#: Gauss-Legendre points per edge for the non-Laplace remainder of the line integral
EDGE_POINTS = 4
#: Gauss-Legendre points in the angle for the self-panel area integral (per sub-triangle)
SELF_POINTS = 8
#: panels farther than FAR_1 (FAR_3) x their longest edge from a collocation point: 1-point (3-point) rule of the
#: hypersingular kernel instead of the exact edge form (errors measured in tests/validation/test_shell_screen.py)
FAR_1 = 8.0
FAR_3 = 3.0
#: listener points farther than FIELD_FAR x a triangle's longest edge see it through its centroid alone (the
#: 1-point rule of a smooth kernel: relative error ~(h / d)^2 / 100 there)
FIELD_FAR = 20.0
#: listeners nearer a triangle's centroid than NEAR x its longest edge are refused (the 7-point field rule is
#: 0.7 % off at 0.5 edges, 7 % at 0.3: measured against a fine sum)
NEAR = 0.5
#: seconds between checkpoints of a solve in progress (finished modes), so an interrupted solve resumes
CHECKPOINT_S = 20.0

# 7-point (degree 5) triangle rule (Strang & Fix), barycentric coordinates and weights summing to 1
_A1, _B1 = 0.059715871789770, 0.470142064105115
_A2, _B2 = 0.797426985353087, 0.101286507323456
TRI_BARY = np.array([[1 / 3, 1 / 3, 1 / 3], [_A1, _B1, _B1], [_B1, _A1, _B1], [_B1, _B1, _A1],
                     [_A2, _B2, _B2], [_B2, _A2, _B2], [_B2, _B2, _A2]])
TRI_W = np.array([0.225] + [0.132394152788506] * 3 + [0.125939180544827] * 3)


def _gauss01(n: int):
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (x + 1.0), 0.5 * w


# ---- kernels ---------------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _laplace_segment(x, a, b, out, scale):
    """out += scale * int_a^b (x - y) x dl_y / (4 pi |x - y|^3) (Biot-Savart of a unit vortex segment); zero when
    x is on the segment's line."""
    r1x, r1y, r1z = x[0] - a[0], x[1] - a[1], x[2] - a[2]
    r2x, r2y, r2z = x[0] - b[0], x[1] - b[1], x[2] - b[2]
    r0x, r0y, r0z = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    cx = r1y * r0z - r1z * r0y
    cy = r1z * r0x - r1x * r0z
    cz = r1x * r0y - r1y * r0x
    c2 = cx * cx + cy * cy + cz * cz
    l1 = math.sqrt(r1x * r1x + r1y * r1y + r1z * r1z)
    l2 = math.sqrt(r2x * r2x + r2y * r2y + r2z * r2z)
    l0 = r0x * r0x + r0y * r0y + r0z * r0z
    if c2 <= 1e-20 * l0 * l1 * l1 or l1 == 0.0 or l2 == 0.0:
        return
    s = (r0x * r1x + r0y * r1y + r0z * r1z) / l1 - (r0x * r2x + r0y * r2y + r0z * r2z) / l2
    f = scale * s / (c2 * 4.0 * math.pi)
    out[0] += f * cx
    out[1] += f * cy
    out[2] += f * cz


@njit(cache=True, inline="always")
def _remainder_factor(k, r):
    """(e^{ikr}(ikr - 1) + 1) / (4 pi r^3), accurate at small kr."""
    z = k * r
    if z < 1e-3:
        num = -0.5 * z * z - 1j * z * z * z / 3.0 + z ** 4 / 8.0
    else:
        num = np.exp(1j * z) * (1j * z - 1.0) + 1.0
    return num / (4.0 * math.pi * r * r * r)


@njit(cache=True, inline="always")
def _ray_integral(k, rho):
    """int_0^rho e^{ikr} / (4 pi) dr."""
    z = k * rho
    if z < 1e-4:
        return rho * (1.0 + 0.5j * z) / (4.0 * math.pi)
    return (np.exp(1j * z) - 1.0) / (1j * k) / (4.0 * math.pi)


@njit(cache=True)
def _self_area(x, P0, P1, P2, k, gt, gw):
    """int_T e^{ik|x - y|} / (4 pi |x - y|) dS_y for x inside T, along rays from x (polar, exact in r)."""
    tot = 0.0 + 0.0j
    for e in range(3):
        if e == 0:
            a, b = P0, P1
        elif e == 1:
            a, b = P1, P2
        else:
            a, b = P2, P0
        ab = b - a
        L = math.sqrt(ab[0] ** 2 + ab[1] ** 2 + ab[2] ** 2)
        t = ab / L
        ax = a - x
        s_a = ax[0] * t[0] + ax[1] * t[1] + ax[2] * t[2]            # foot of the perpendicular at s = 0
        hv = ax - s_a * t
        h = math.sqrt(hv[0] ** 2 + hv[1] ** 2 + hv[2] ** 2)
        phi_a = math.atan2(s_a, h)
        phi_b = math.atan2(s_a + L, h)
        for g in range(gt.shape[0]):
            phi = phi_a + (phi_b - phi_a) * gt[g]
            tot += (phi_b - phi_a) * gw[g] * _ray_integral(k, h / math.cos(phi))
    return tot


@njit(cache=True, inline="always")
def _hypersingular_point(x, nx, y, ny, k):
    """d^2 G(x, y) / dn_x dn_y (both normals unit), x != y."""
    dx, dy, dz = x[0] - y[0], x[1] - y[1], x[2] - y[2]
    r2 = dx * dx + dy * dy + dz * dz
    r = math.sqrt(r2)
    e = np.exp(1j * k * r) / (4.0 * math.pi * r2 * r)
    g1 = e * (1j * k * r - 1.0)                                   # G'(r) / r
    g2 = e * (2.0 - 2j * k * r - k * k * r2)                      # G''(r)
    a = nx[0] * dx + nx[1] * dy + nx[2] * dz
    b = ny[0] * dx + ny[1] * dy + ny[2] * dz
    nn = nx[0] * ny[0] + nx[1] * ny[1] + nx[2] * ny[2]
    return -(g1 * nn + (g2 - g1) * a * b / r2)


@njit(cache=True, parallel=True)
def _matrix(C, Nrm, P0, P1, P2, k, et, ew, st, sw, tb, tw, far1, far3, M):
    """M[i, f] = n_i . [-oint_{dT_f} grad_x G x dl + k^2 n_f int_{T_f} G dS] at centroid x_i (module docstring).

    Panels farther than far1 x their longest edge from x_i: the kernel d^2 G / dn_x dn_y at their centroid
    times their area; farther than far3 x: its degree-2 three-point rule; nearer: the exact edge form."""
    n = C.shape[0]
    ng = tb.shape[0]
    areas = np.empty(P0.shape[0])
    size2 = np.empty(P0.shape[0])
    cen = np.empty((P0.shape[0], 3))
    for f in range(P0.shape[0]):
        e1 = P1[f] - P0[f]
        e2 = P2[f] - P0[f]
        e3 = P2[f] - P1[f]
        areas[f] = 0.5 * math.sqrt((e1[1] * e2[2] - e1[2] * e2[1]) ** 2 + (e1[2] * e2[0] - e1[0] * e2[2]) ** 2
                                  + (e1[0] * e2[1] - e1[1] * e2[0]) ** 2)
        size2[f] = max((e1 ** 2).sum(), (e2 ** 2).sum(), (e3 ** 2).sum())
        cen[f] = (P0[f] + P1[f] + P2[f]) / 3.0
    nf = P0.shape[0]
    for i in prange(n):
        x = C[i]
        lap = np.zeros(3)
        rem = np.zeros(3, np.complex128)
        for f in range(nf):
            d2 = ((x - cen[f]) ** 2).sum()
            if d2 > far1 * far1 * size2[f]:
                M[i, f] = areas[f] * _hypersingular_point(x, Nrm[i], cen[f], Nrm[f], k)
                continue
            if d2 > far3 * far3 * size2[f]:
                acc = 0.0 + 0.0j
                for g in range(3):
                    y = (P0[f] + P1[f] + P2[f]) / 6.0
                    if g == 0:
                        y = y + 0.5 * P0[f]
                    elif g == 1:
                        y = y + 0.5 * P1[f]
                    else:
                        y = y + 0.5 * P2[f]
                    acc += _hypersingular_point(x, Nrm[i], y, Nrm[f], k)
                M[i, f] = areas[f] * acc / 3.0
                continue
            lap[:] = 0.0
            rem[:] = 0.0
            for e in range(3):
                if e == 0:
                    a, b = P0[f], P1[f]
                elif e == 1:
                    a, b = P1[f], P2[f]
                else:
                    a, b = P2[f], P0[f]
                _laplace_segment(x, a, b, lap, 1.0)
                if k > 0.0:
                    r0 = b - a
                    for g in range(et.shape[0]):
                        y = a + et[g] * r0
                        d = x - y
                        r = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
                        fac = -ew[g] * _remainder_factor(k, r)
                        rem[0] += fac * (d[1] * r0[2] - d[2] * r0[1])
                        rem[1] += fac * (d[2] * r0[0] - d[0] * r0[2])
                        rem[2] += fac * (d[0] * r0[1] - d[1] * r0[0])
            val = (Nrm[i, 0] * (lap[0] + rem[0]) + Nrm[i, 1] * (lap[1] + rem[1])
                   + Nrm[i, 2] * (lap[2] + rem[2]))
            if k > 0.0:
                nn = Nrm[i, 0] * Nrm[f, 0] + Nrm[i, 1] * Nrm[f, 1] + Nrm[i, 2] * Nrm[f, 2]
                if f == i:
                    sg = _self_area(x, P0[f], P1[f], P2[f], k, st, sw)
                else:
                    sg = 0.0 + 0.0j
                    for g in range(ng):
                        y = tb[g, 0] * P0[f] + tb[g, 1] * P1[f] + tb[g, 2] * P2[f]
                        d = x - y
                        r = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
                        sg += tw[g] * np.exp(1j * k * r) / (4.0 * math.pi * r)
                    sg *= areas[f]
                val += k * k * nn * sg
            M[i, f] = val


@njit(cache=True, parallel=True)
def _field(X, Nrm, P0, P1, P2, area, k, tb, tw, far1, D):
    """D[p, f] = int_{T_f} dG(x_p, y)/dn_y dS_y, bulk delay e^{ik|x_p|} removed: the 7-point rule, or the
    centroid alone for triangles farther than far1 x their longest edge (listeners usually are)."""
    n_p, n_f = X.shape[0], P0.shape[0]
    for p in prange(n_p):
        x = X[p]
        r_0 = math.sqrt(x[0] ** 2 + x[1] ** 2 + x[2] ** 2)
        for f in range(n_f):
            c0 = (P0[f] + P1[f] + P2[f]) / 3.0
            e1 = ((P1[f] - P0[f]) ** 2).sum()
            e2 = ((P2[f] - P1[f]) ** 2).sum()
            e3 = ((P0[f] - P2[f]) ** 2).sum()
            d2 = ((x - c0) ** 2).sum()
            one = d2 > far1 * far1 * max(e1, e2, e3)
            s = 0.0 + 0.0j
            for g in range(1 if one else tb.shape[0]):
                if one:
                    y = c0
                    wg = 1.0
                else:
                    y = tb[g, 0] * P0[f] + tb[g, 1] * P1[f] + tb[g, 2] * P2[f]
                    wg = tw[g]
                d = x - y
                r = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
                dn = d[0] * Nrm[f, 0] + d[1] * Nrm[f, 1] + d[2] * Nrm[f, 2]
                s += wg * dn * (1.0 - 1j * k * r) * np.exp(1j * k * (r - r_0)) / (4.0 * math.pi * r ** 3)
            D[p, f] = s * area[f]


# ---- the solve -------------------------------------------------------------------------------------------------
def _geometry(V, F):
    P0, P1, P2 = (np.ascontiguousarray(V[F[:, i]]) for i in range(3))
    cr = np.cross(P1 - P0, P2 - P0)
    dbl = np.linalg.norm(cr, axis=1)
    return P0, P1, P2, cr / dbl[:, None], 0.5 * dbl


def screen_matrix(vertices, faces, k: float, far=(FAR_1, FAR_3)) -> np.ndarray:
    """The collocation matrix M (Nf, Nf) of the screen equation M mu = dp/dn at the centroids, wavenumber k
    [1/m] (module docstring); ``far``: the distance thresholds of the point rules (np.inf: exact everywhere)."""
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    P0, P1, P2, N, _ = _geometry(V, F)
    C = (P0 + P1 + P2) / 3.0
    et, ew = _gauss01(EDGE_POINTS)
    st, sw = _gauss01(SELF_POINTS)
    M = np.empty((len(F), len(F)), np.complex128)
    _matrix(C, N, P0, P1, P2, float(k), et, ew, st, sw, TRI_BARY, TRI_W, float(far[0]), float(far[1]), M)
    return M


def double_layer(vertices, faces, k: float, points) -> np.ndarray:
    """D (n, Nf): the field at ``points`` of a unit jump on each triangle, bulk delay e^{ik|x|} removed."""
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    P0, P1, P2, N, A = _geometry(V, F)
    X = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
    D = np.empty((len(X), len(F)), np.complex128)
    _field(X, N, P0, P1, P2, A, float(k), TRI_BARY, TRI_W, float(FIELD_FAR), D)
    return D


def check_screen_surface(vertices, faces, name: str = "shell surface") -> None:
    """An open (some free edge), non-degenerate triangle surface; else MeshError/InputError naming it. (The
    orientation need not be consistent: flipping a triangle flips its jump, its row and its right-hand side
    together.) A nearly closed surface (a small vent) or a part sealed off from the rest passes, and then holds
    sealed air whose pressure the solve includes (module docstring)."""
    from ...scene.shell_body import boundary_edges
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    if V.ndim != 2 or V.shape[1] != 3 or F.ndim != 2 or F.shape[1] != 3 or not len(F):
        raise InputError(f"screen radiation of {name}: vertices (n, 3) and faces (m, 3) expected, got "
                         f"{V.shape}, {F.shape}")
    if not np.isfinite(V).all():
        raise InputError(f"screen radiation of {name}: vertex coordinates must be finite")
    dbl = np.linalg.norm(np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]]), axis=1)
    bad = np.flatnonzero(~(dbl > 1e-14 * max(float(np.ptp(V, axis=0).max()), 1e-300) ** 2))
    if len(bad):
        raise MeshError(f"screen radiation of {name}: {len(bad)} degenerate (zero-area) triangles, e.g. "
                        f"#{', #'.join(str(int(b)) for b in bad[:5])}; remove them from the mesh")
    if len(boundary_edges(F)) == 0:
        raise InputError(f"screen radiation of {name}: the surface is closed (no free edge); a closed shell "
                         "radiates from its outside only: use radiation = \"ffat\" (BEM on the surface) or "
                         "\"low_order\"")


@dataclass
class ScreenRadiator:
    """Solved pressure jumps of a shell's modes (body frame, SI).

    vertices (Nv, 3), faces (Nf, 3): the radiating surface; mu (Nf, r) complex: the pressure jump per unit modal
    acceleration [Pa s^2 / (m sqrt(kg))]; omega (r,) [rad/s]; c [m/s] and rho [kg/m^3] of the solve; info."""

    vertices: np.ndarray
    faces: np.ndarray
    mu: np.ndarray
    omega: np.ndarray
    c: float
    rho: float
    info: dict = field(default_factory=dict)

    def transfer(self, points, c: float | None = None, rho: float | None = None) -> np.ndarray:
        """Complex (n, r) pressure per unit modal acceleration at body-frame points [m], bulk delay e^{ik|x|}
        removed (the convention of ShellRadiator.transfer). ``c`` must be the solve's; the field scales with
        ``rho``."""
        if c is not None and abs(float(c) / self.c - 1) > 1e-9:
            raise InputError(f"screen radiation was solved for c = {self.c:g} m/s, asked for c = {c:g} m/s")
        X = np.asarray(points, np.float64).reshape(-1, 3)
        if not np.isfinite(X).all():
            raise InputError("screen radiation: listener positions must be finite")
        if len(X):
            from scipy.spatial import cKDTree
            d, f = cKDTree(self.vertices[self.faces].mean(axis=1)).query(X)
            e = self.vertices[self.faces[f]]
            size = np.linalg.norm(e - np.roll(e, 1, axis=1), axis=2).max(axis=1)
            bad = np.flatnonzero(d < NEAR * size)
            if len(bad):
                p = int(bad[0])
                raise InputError(f"screen radiation: listener point {X[p].round(4).tolist()} (body frame) is "
                                 f"{d[p]:.3g} m from the shell surface, closer than {NEAR:g} x its triangles "
                                 f"({size[p]:.3g} m), where the field is not resolved; move the listener away")
        k = self.omega / self.c
        out = np.empty((len(X), len(k)), np.complex128)
        # modes of (nearly) equal frequency share one field matrix
        for ks, cols in _groups(k):
            D = double_layer(self.vertices, self.faces, ks, X)
            out[:, cols] = D @ self.mu[:, cols]
        if rho is not None:
            out *= float(rho) / self.rho
        return out


def _groups(k, rel: float = 1e-9):
    """[(k, column indices)] of equal wavenumbers (degenerate modes), in order."""
    k = np.asarray(k, np.float64)
    order = np.argsort(k, kind="stable")
    groups, cur = [], [int(order[0])] if len(order) else []
    for j in order[1:]:
        if abs(k[j] - k[cur[0]]) <= rel * k[cur[0]]:
            cur.append(int(j))
        else:
            groups.append((float(k[cur[0]]), np.array(cur)))
            cur = [int(j)]
    if cur:
        groups.append((float(k[cur[0]]), np.array(cur)))
    return groups


def normal_displacement(vertices, faces, U) -> np.ndarray:
    """(Nf, r): n_f . u_j at each triangle's centroid (mean of its vertices' displacements)."""
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    U = np.asarray(U, np.float64)
    if U.shape[0] != 3 * len(V):
        raise InputError(f"screen radiation: mode shapes U have {U.shape[0]} rows, expected 3 x {len(V)}")
    from .radiation import normal_displacement as nd
    return nd(V, F, U)[2]


def screen_radiator(vertices, faces, U, omega, *, air=None, max_faces: int = MAX_FACES, coarse=None,
                    progress=None, cache: bool = True, name: str = "shell surface") -> ScreenRadiator:
    """Solve the screen equation for every mode (from the cache when solved before).

    Parameters
    ----------
    vertices, faces : array_like
        The open mid-surface [m] (body frame) and its consistently oriented triangles.
    U : array_like, shape (3 Nv, r)
        Mode shapes [1/sqrt(kg)].
    omega : array_like, shape (r,)
        Their angular frequencies [rad/s].
    air : object with c [m/s] and rho [kg/m^3], optional
        Default 343.2 m/s, 1.2041 kg/m^3.
    max_faces : int
        Largest dense solve; a finer surface needs ``coarse``.
    coarse : (vertices, faces), optional
        A coarser surface of the same shape in the same frame to solve on (the modes are interpolated onto it at
        closest points, :func:`~impactsound.sources.shell.ffat.closest_point_shapes`).
    progress : callable, optional
        progress(fraction) after each solved frequency.
    cache : bool
        Read and write the content-hashed asset (``shell-screen-*.h5`` in the cache folder; partial results are
        checkpointed so an interrupted solve resumes).

    Returns
    -------
    ScreenRadiator
    """
    from ...constants import AIR_C, AIR_RHO
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    U = np.asarray(U, np.float64)
    omega = np.asarray(omega, np.float64).ravel()
    if U.ndim != 2 or U.shape[1] != len(omega):
        raise InputError(f"screen radiation: {len(omega)} frequencies for mode shapes of shape {U.shape}")
    if not np.all(np.isfinite(omega)) or np.any(omega <= 0):
        raise InputError("screen radiation: mode frequencies must be finite and positive")
    c = float(air.c) if air is not None else AIR_C
    rho = float(air.rho) if air is not None else AIR_RHO
    if coarse is not None:
        from .ffat import closest_point_shapes
        Vs, Fs = np.asarray(coarse[0], np.float64), np.asarray(coarse[1], np.int64)
        Us = closest_point_shapes(V, F, U, Vs)
    else:
        Vs, Fs, Us = V, F, U
    check_screen_surface(Vs, Fs, name)
    if len(Fs) > int(max_faces):
        raise InputError(f"screen radiation of {name}: {len(Fs)} triangles, over the dense-solve budget "
                         f"max_faces = {max_faces}; give a coarser surface of the same shape (coarse = ...), "
                         "raise the budget, or use radiation = \"low_order\"")
    un = normal_displacement(Vs, Fs, Us)
    rhs = -rho * un                                          # dp/dn = -rho a_n per unit modal acceleration
    k = omega / c
    h = content_hash(KIND, CODE_VERSION, Vs, Fs, rhs, k, EDGE_POINTS, SELF_POINTS, FAR_1, FAR_3)
    path = cache_dir() / f"shell-screen-{h[:32]}.h5"
    ev = Vs[Fs]
    kh = float(k.max() * np.linalg.norm(ev - np.roll(ev, 1, axis=1), axis=2).max())
    info = {"faces": int(len(Fs)), "coarse": coarse is not None, "path": str(path), "max_kh": kh}
    if kh > 1.0:
        import logging
        logging.getLogger("impactsound").warning(
            "screen radiation of %s: its highest mode (%.0f Hz) has k h = %.2f on the %d-triangle surface (fewer "
            "than ~6 triangles per wavelength): its radiation is less accurate; raise shell.radiation_faces or "
            "keep fewer modes", name, k.max() * c / (2 * np.pi), kh, len(Fs))
    if cache:
        try:
            a = read_asset(path, KIND, inputs_hash=h)
            return ScreenRadiator(Vs, Fs, a.arrays["mu"], omega, c, rho, {**info, "cached": True})
        except AssetError:
            pass
    mu = np.zeros((len(Fs), len(k)), np.complex128)
    done = np.zeros(len(k), bool)
    part = path.with_suffix(".partial.h5")
    if cache:
        try:
            a = read_asset(part, KIND + "_partial", inputs_hash=h)
            mu, done = np.array(a.arrays["mu"]), np.array(a.arrays["done"], bool)
        except AssetError:
            pass
    from scipy.linalg import lu_factor, lu_solve
    groups = _groups(k)
    t0 = time.perf_counter()
    last = t0
    for gi, (kg, cols) in enumerate(groups):
        if done[cols].all():
            continue
        M = screen_matrix(Vs, Fs, kg)
        lu = lu_factor(M, overwrite_a=True, check_finite=False)
        mu[:, cols] = lu_solve(lu, rhs[:, cols].astype(np.complex128))
        if not np.isfinite(mu[:, cols]).all():
            raise MeshError(f"screen radiation of {name}: the solve at {kg * c / (2 * np.pi):.1f} Hz is singular "
                            "(a folded or self-touching surface?)")
        done[cols] = True
        if cache and time.perf_counter() - last > CHECKPOINT_S:
            write_asset(part, Asset(kind=KIND + "_partial", arrays={"mu": mu, "done": done}, inputs_hash=h))
            last = time.perf_counter()
        if progress is not None:
            progress((gi + 1) / len(groups))
    info.update(seconds=time.perf_counter() - t0, solves=len(groups), cached=False)
    if cache:
        write_asset(path, Asset(kind=KIND, arrays={"mu": mu}, inputs_hash=h,
                                meta={"code_version": CODE_VERSION, "faces": int(len(Fs)), "c": c, "rho": rho,
                                      "units": {"mu": "Pa s^2 / (m sqrt(kg)) per unit modal acceleration"}}))
        part.unlink(missing_ok=True)
    return ScreenRadiator(Vs, Fs, mu, omega, c, rho, info)
