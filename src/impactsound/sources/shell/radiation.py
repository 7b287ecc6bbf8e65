"""Low-order radiation of thin-shell modes: a simple-source (Rayleigh / Kirchhoff) surface sum per mode.

Why not the compact monopole + dipole of transfer/low_order.py: an elastic mode of a thin shell is mass-
orthogonal to the rigid translations, so on a uniform sheet its net normal displacement and its first moment
vanish and the compact model gives (nearly) zero, while such modes radiate well once the sheet spans a wavelength
(a 0.5 m cymbal does above ~700 Hz). The paper radiates shells through FFAT maps of BEM solves on the closed,
thickened surface (Chadwick, An & James 2009, "Harmonic Shells", sec. 4; ffat.py); the default for open shells is
the screen BEM of screen.py; this module is the cheap ``radiation = "low_order"`` option.

Model (time convention e^{-i w t}, as everywhere in the package). Each mid-surface triangle f (centroid y_f, unit
normal n_f, area A_f) with normal acceleration a_f = n_f . u''(y_f) radiates like a small baffled piston into the
half-space its side faces:

    p(x) = sum_f g_f(x) rho A_f a_f e^{i k R_f} / (2 pi R_f),     R_f = |x - y_f|,

* open surface (a sheet, a cymbal, an open can): both sides of the wall face air, the side facing x moves with
  +a_f or -a_f, so g_f = sign(n_f . (x - y_f)) (a two-sided Rayleigh integral; exact for a flat baffled plate);
* closed surface (a sealed bottle): only the outside faces air and only the lit triangles radiate toward x,
  g_f = 1 if n_f . (x - y_f) > 0 else 0 (the Kirchhoff approximation; it gives the monopole of a breathing
  sphere as ka -> 0, but lacks its 1/(1 - ika) factor: +-10 % at ka = 0.5, +60-86 % at ka = 2).

Not modelled: the acoustic short circuit around a sheet's free edge (the baffled sum over-estimates radiation
of an unbaffled sheet below its coincidence frequency), occlusion by other parts of the surface, and scattering.
Measured against BEM FFAT maps of the thickened surface (sources/shell/ffat.py): a cymbal's lowest modes (ka < 0.35)
come out 18-23 dB too loud, modes at ka 0.5-1.6 within about -12..+8 dB; over listener directions and modes the
median level error is 13-15 dB (cymbal, trash can). A rough stand-in, not the accurate model.

Per mode j (angular frequency w_j, wavenumber k_j = w_j / c) and listener x (body frame), the transfer per unit
modal acceleration is A_j(x) = sum_f g_f rho A_f (n_f . u_j(y_f)) e^{i k_j R_f} / (2 pi R_f) [Pa s^2 / (m
sqrt(kg))] (:meth:`ShellRadiator.transfer`). Sound is rendered in the time domain from the same sum, each
triangle's acceleration delayed by its own R_f / c:

    p(x, t) = sum_f g_f rho A_f / (2 pi R_f) sum_j (n_f . u_j(y_f)) q_j''(t - R_f / c),

exact for any spectrum (the contact force's broadband spike, the nonlinear spreading), not only at w_j. On the
sample grid of rate f_s the delays are binned: d0 = the smallest delay in whole samples, and each triangle's weight
is split linearly between the two samples around its fractional delay (:meth:`ShellRadiator.delay_weights`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ...errors import InputError


@dataclass
class ShellRadiator:
    """Per-triangle data of the simple-source sum (body frame, SI).

    centroids (F, 3) [m], normals (F, 3) unit, areas (F,) [m^2], un (F, r) normal mode displacement at the
    centroids [1/sqrt(kg)], omega (r,) [rad/s], closed: whether the surface has no boundary (one-sided, lit
    triangles only)."""

    centroids: np.ndarray
    normals: np.ndarray
    areas: np.ndarray
    un: np.ndarray
    omega: np.ndarray
    closed: bool

    @classmethod
    def from_surface(cls, vertices, faces, U, omega) -> "ShellRadiator":
        """From the mid-surface (Nv, 3), (Nf, 3) and mode shapes U (3 Nv, r) [1/sqrt(kg)], omega (r,) [rad/s]."""
        V = np.asarray(vertices, np.float64)
        F = np.asarray(faces, np.int64)
        U = np.asarray(U, np.float64)
        if U.shape[0] != 3 * len(V):
            raise InputError(f"ShellRadiator: U has {U.shape[0]} rows, expected 3 x {len(V)} vertices")
        n, dbl, un = normal_displacement(V, F, U)
        from ...scene.shell_body import boundary_edges
        closed = len(boundary_edges(F)) == 0
        return cls(centroids=V[F].mean(axis=1), normals=n, areas=0.5 * dbl, un=np.ascontiguousarray(un),
                   omega=np.asarray(omega, np.float64), closed=bool(closed))

    def transfer(self, points, c: float, rho: float) -> np.ndarray:
        """A~_j at body-frame points (n, 3): complex (n, r) [Pa per unit modal acceleration], bulk delay |x|/c
        removed (module docstring)."""
        P = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
        if not np.isfinite(P).all():
            raise InputError("ShellRadiator.transfer: listener positions must be finite")
        k = self.omega / float(c)
        re = np.zeros((len(P), len(k)))
        im = np.zeros((len(P), len(k)))
        _sum(P, self.centroids, self.normals, self.areas, self.un, k, bool(self.closed), float(rho), re, im)
        return re + 1j * im


    def n_bins(self, c: float, rate: float) -> int:
        """Delay bins of :meth:`delay_weights`: the surface's largest extent in samples, plus 3."""
        ext = float(np.linalg.norm(np.ptp(self.centroids, axis=0))) if len(self.centroids) else 0.0
        return int(math.ceil(ext / c * rate)) + 3

    def delay_weights(self, points, c: float, rho: float, rate: float):
        """Time-domain form of the sum (module docstring) at body-frame points (n, 3) for sample rate ``rate``:
        (B (n, n_bins, r) [Pa per unit modal acceleration], d0 (n,) int) such that
        p_p[m] = sum_b sum_j B[p, b, j] q_j''[m - d0[p] - b]."""
        P = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
        if not np.isfinite(P).all():
            raise InputError("ShellRadiator.delay_weights: listener positions must be finite")
        nb = self.n_bins(c, rate)
        B = np.zeros((len(P), nb, self.un.shape[1]))
        d0 = np.zeros(len(P), np.int64)
        _bins(P, self.centroids, self.normals, self.areas, self.un, bool(self.closed), float(rho),
              float(rate) / float(c), B, d0)
        return B, d0


def normal_displacement(V, F, U):
    """Unit normals (Nf, 3), twice the areas (Nf,) and n_f . u_j at the centroids (Nf, r) (the mean of the
    vertices' displacements) of a triangle surface (Nv, 3), (Nf, 3) and mode shapes U (3 Nv, r)."""
    cr = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    dbl = np.linalg.norm(cr, axis=1)
    n = cr / dbl[:, None]
    Uv = np.ascontiguousarray(U).reshape(len(V), 3, U.shape[1])           # one layout, one summation order
    uc = (Uv[F[:, 0]] + Uv[F[:, 1]] + Uv[F[:, 2]]) / 3.0              # (F, 3, r) at the centroids
    return n, dbl, np.einsum("fc,fcr->fr", n, uc)


@njit(cache=True, inline="always")
def _side_and_distance(P, p, Y, N, f, closed):
    """(g_f, R_f) of triangle f seen from point p (module docstring); g = 0 where it does not radiate to p."""
    dx, dy, dz = P[p, 0] - Y[f, 0], P[p, 1] - Y[f, 1], P[p, 2] - Y[f, 2]
    side = dx * N[f, 0] + dy * N[f, 1] + dz * N[f, 2]
    R = np.sqrt(dx * dx + dy * dy + dz * dz)
    if R == 0.0 or (closed and side <= 0.0):
        return 0.0, R
    return (1.0 if side > 0.0 else -1.0), R


@njit(cache=True)
def _bins(P, Y, N, A, un, closed, rho, per_m, B, d0):
    n_p, n_f, r = P.shape[0], Y.shape[0], un.shape[1]
    nb = B.shape[1]
    c0 = rho / (2.0 * np.pi)
    for p in range(n_p):
        rmin = np.inf
        for f in range(n_f):
            R = np.sqrt((P[p, 0] - Y[f, 0]) ** 2 + (P[p, 1] - Y[f, 1]) ** 2 + (P[p, 2] - Y[f, 2]) ** 2)
            rmin = min(rmin, R)
        base = int(np.floor(rmin * per_m))
        d0[p] = base
        for f in range(n_f):
            g, R = _side_and_distance(P, p, Y, N, f, closed)
            if g == 0.0:
                continue
            x = R * per_m - base
            b = int(np.floor(x))
            if b > nb - 2:
                b = nb - 2
            fr = x - b
            w = g * c0 * A[f] / R
            for j in range(r):
                a = w * un[f, j]
                B[p, b, j] += (1.0 - fr) * a
                B[p, b + 1, j] += fr * a


@njit(cache=True)
def _sum(P, Y, N, A, un, k, closed, rho, re, im):
    n_p, n_f, r = P.shape[0], Y.shape[0], k.shape[0]
    c0 = rho / (2.0 * np.pi)
    for p in range(n_p):
        r0 = np.sqrt(P[p, 0] ** 2 + P[p, 1] ** 2 + P[p, 2] ** 2)
        for f in range(n_f):
            g, R = _side_and_distance(P, p, Y, N, f, closed)
            if g == 0.0:
                continue
            w = g * c0 * A[f] / R
            for j in range(r):
                ph = k[j] * (R - r0)
                a = w * un[f, j]
                re[p, j] += a * np.cos(ph)
                im[p, j] += a * np.sin(ph)
