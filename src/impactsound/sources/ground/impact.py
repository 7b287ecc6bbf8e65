"""The ground's response to one impact and its sound: contact parameters, surface motion, Rayleigh radiation.

Qu & James 2019, "Ground sound": an impact of impulse J pushes the floor (an elastic half-space, Lamb's problem,
:mod:`.lamb`) down with the regularized force F(t) = J K(t - t_m); the surface's normal acceleration radiates into
the air above the floor as a baffled plane (the Rayleigh integral). Units SI; z up; the impact at the origin.

Surface motion (upward displacement w, velocity, acceleration a_n at horizontal distance r), for the Lorentzian
kernel K_eps of half-width eps [s]:

    d^n w / dt^n (r, t) = -J f(r) (c_s / r)^(n+1) Re U^(n+1)(z),   z = c_s (t - t_m)/r + i c_s eps / r,

f(r) = (1 - nu)/(2 pi mu r) (Boussinesq), U the step response of :mod:`.lamb` (its derivative is the response to
an impulse; the minus sign: an impact pushes down). The default kernel is the fourth-order K4_eps = 2 K_eps -
K_2eps (unit area, tail ~ t^-4 instead of t^-2; Qu & James use a fourth-order two-width combination, the pair
(eps, 2 eps) is our choice), with eps = t_c / 4 (Qu & James 2019).

Contact parameters: t_c = 2.87 (m^2 / (b E^2 v))^(1/5) (Hertz; the PAN paper's constant) for a ball of mass m and
radius b on a massive flat ground, 1/E = (1 - nu_b^2)/E_b + (1 - nu_g^2)/E_g; the contact radius is Hertz's at the
mean force m v / t_c, a_c = (3 b F / (4 E))^(1/3) (this reproduces the paper's Table 1).

Radiation on the axis above the impact (height h; Rayleigh integral of a baffled plane):

    p(t) = rho_a int_0^inf a_n(r, t - R/c_a) r dr / R = rho_a int_h^inf a_n(sqrt(R^2 - h^2), t - R/c_a) dR.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...constants import AIR_C, AIR_RHO
from ...contact.hertz import hertz_tau
from ...errors import InputError
from .lamb import rayleigh_speed_ratio, regularized_response, speed_ratio_squared

_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


@dataclass(frozen=True)
class HalfSpace:
    """An elastic half-space: Young's modulus E [Pa], Poisson's ratio nu, density rho [kg/m^3], and a material loss
    factor eta (both moduli E (1 + i eta), frequency-independent; 0: lossless, the paper's model). Only the
    frequency-domain response (spectrum.py, the scenes' response bank) carries eta; the time-domain surface motion
    of this module is the lossless one."""

    E: float
    nu: float
    rho: float
    loss_factor: float = 0.0

    def __post_init__(self):
        for name, v in (("E", self.E), ("rho", self.rho)):
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"ground half-space: {name} = {v} must be positive")
        if not (math.isfinite(self.nu) and 0 < self.nu < 0.5):
            raise InputError(f"ground half-space: Poisson's ratio nu = {self.nu} must lie in (0, 0.5)")
        if not (math.isfinite(self.loss_factor) and 0 <= self.loss_factor < 1):
            raise InputError(f"ground half-space: loss factor {self.loss_factor} must lie in [0, 1)")

    @property
    def mu(self) -> float:
        """Shear modulus [Pa]."""
        return self.E / (2 * (1 + self.nu))

    @property
    def c_s(self) -> float:
        """Shear-wave speed [m/s]."""
        return math.sqrt(self.mu / self.rho)

    @property
    def c_p(self) -> float:
        """Pressure-wave speed [m/s]."""
        return self.c_s / math.sqrt(speed_ratio_squared(self.nu))

    @property
    def c_R(self) -> float:
        """Rayleigh-wave speed [m/s]."""
        return self.c_s * rayleigh_speed_ratio(self.nu)


def contact_time(mass: float, radius: float, modulus: float, speed: float) -> float:
    """Hertz contact time t_c [s] of a ball (mass [kg], radius [m]) on a massive flat ground, contact modulus
    1/E = (1 - nu_b^2)/E_b + (1 - nu_g^2)/E_g [Pa], impact speed [m/s]."""
    return float(hertz_tau(mass, radius, modulus, speed))


def contact_radius(mass: float, radius: float, modulus: float, speed: float, t_c: float) -> float:
    """Hertz contact radius [m] at the mean contact force m v / t_c: (3 b F / (4 E))^(1/3)."""
    return float((3 * radius * (mass * speed / t_c) / (4 * modulus)) ** (1.0 / 3.0))


def surface_motion(r, t, impulse: float, eps: float, ground: HalfSpace, *, order: int = 2, t_m: float = 0.0,
                   kernel: str = "K4") -> np.ndarray:
    """Upward surface motion of the ground at distance r after an impact (module docstring).

    Parameters
    ----------
    r : array_like
        Horizontal distance from the impact [m] (> 0).
    t : array_like
        Time [s]; broadcasts with ``r``.
    impulse : float
        J [N s] pushed into the ground (>= 0).
    eps : float
        Kernel width [s] (t_c / 4).
    ground : HalfSpace
    order : int
        0 displacement [m], 1 velocity [m/s], 2 acceleration [m/s^2].
    t_m : float
        Centre of the force [s].
    kernel : {"K4", "lorentzian"}

    Returns
    -------
    ndarray
        The motion, shape of ``r`` and ``t`` broadcast.
    """
    r, t = np.broadcast_arrays(np.asarray(r, np.float64), np.asarray(t, np.float64))
    if np.any(~(r > 0)):
        raise InputError("ground surface motion: r must be > 0 (the response is singular under the load)")
    if not (math.isfinite(impulse) and impulse >= 0):
        raise InputError(f"ground surface motion: impulse = {impulse} N s must be finite and >= 0")
    if kernel not in ("K4", "lorentzian"):
        raise InputError(f"ground surface motion: kernel = {kernel!r}; use 'K4' or 'lorentzian'")
    cs = ground.c_s
    f = (1 - ground.nu) / (2 * math.pi * ground.mu * r)
    tau = cs * (t - t_m) / r

    def one(e):
        return regularized_response(tau, cs * e / r, ground.nu, order + 1)
    resp = one(eps) if kernel == "lorentzian" else 2 * one(eps) - one(2 * eps)
    return -impulse * f * (cs / r) ** (order + 1) * resp


def rayleigh_on_axis(accel, h: float, t, *, r_max: float, r_scale: float, breaks=(), c_a: float = AIR_C,
                     rho_a: float = AIR_RHO, chunk: int = 64) -> np.ndarray:
    """Pressure [Pa] at height h [m] above the origin radiated by a plane's normal acceleration (Rayleigh integral,
    module docstring), integrated over R = h + u^2 (smooth at r = 0) with 24-point Gauss-Legendre panels whose
    r-edges grow geometrically from r_scale / 1e4 to r_max.

    Parameters
    ----------
    accel : callable
        accel(r, t) -> normal acceleration [m/s^2] (toward the air), broadcasting arrays of r [m] and t [s].
    h : float
        Listener height [m].
    t : array_like
        Listener times [s].
    r_max : float
        Outer radius of the integral [m]; beyond it the plane is taken at rest.
    r_scale : float
        Length over which ``accel`` varies near the origin [m] (c_s eps for the ground).
    breaks : sequence of float
        Extra panel edges in r [m] (where ``accel`` is discontinuous).
    """
    t = np.atleast_1d(np.asarray(t, np.float64))
    edges_r = np.unique(np.concatenate([[0.0], np.geomspace(r_scale * 1e-4, r_max, 60), np.asarray(breaks, float)]))
    edges_r = edges_r[edges_r <= r_max]
    edges_u = np.sqrt(np.sqrt(edges_r**2 + h * h) - h)
    lo, hi = edges_u[:-1], edges_u[1:]
    u = (0.5 * (lo + hi)[:, None] + 0.5 * (hi - lo)[:, None] * _GL_X[None, :]).ravel()
    w = (0.5 * (hi - lo)[:, None] * _GL_W[None, :]).ravel()
    R = h + u * u
    r = np.sqrt(np.maximum(R * R - h * h, 0.0))
    keep = r > 0
    u, w, R, r = u[keep], w[keep], R[keep], r[keep]
    out = np.zeros(len(t))
    for a in range(0, len(r), chunk):
        sl = slice(a, a + chunk)
        an = accel(r[sl, None], t[None, :] - R[sl, None] / c_a)
        out += (2 * u[sl, None] * w[sl, None] * an).sum(axis=0)
    return rho_a * out


def rayleigh_off_axis(accel, h: float, offset: float, t, *, r_max: float, r_scale: float, breaks=(),
                      n_phi: int = 96, c_a: float = AIR_C, rho_a: float = AIR_RHO, chunk: int = 16) -> np.ndarray:
    """Pressure [Pa] at height h [m] and horizontal offset [m] from the impact, radiated by an axisymmetric normal
    acceleration a_n(r, t) of the plane (Rayleigh integral; the half-plane phi in [0, pi] counted twice):

        p(t) = (rho_a / pi) int_0^inf int_0^pi a_n(r, t - D/c_a) r / D dphi dr,
        D = sqrt(h^2 + offset^2 + r^2 - 2 offset r cos(phi)).

    r: 24-point Gauss-Legendre panels with edges geometric from r_scale / 1e4 to r_max (plus ``breaks``); phi:
    Gauss-Legendre with ``n_phi`` nodes. Arguments as :func:`rayleigh_on_axis`; offset = 0 is the on-axis case.
    """
    t = np.atleast_1d(np.asarray(t, np.float64))
    edges = np.unique(np.concatenate([[0.0], np.geomspace(r_scale * 1e-4, r_max, 60), np.asarray(breaks, float),
                                      [offset] if 0 < offset < r_max else []]))
    edges = edges[edges <= r_max]
    lo, hi = edges[:-1], edges[1:]
    r = (0.5 * (lo + hi)[:, None] + 0.5 * (hi - lo)[:, None] * _GL_X[None, :]).ravel()
    wr = (0.5 * (hi - lo)[:, None] * _GL_W[None, :]).ravel()
    xp, wp = np.polynomial.legendre.leggauss(n_phi)
    phi, wphi = 0.5 * np.pi * (xp + 1), 0.5 * np.pi * wp
    out = np.zeros(len(t))
    for a in range(0, len(r), chunk):
        rr, ww = r[a:a + chunk, None], wr[a:a + chunk, None]
        D = np.sqrt(h * h + offset**2 + rr**2 - 2 * offset * rr * np.cos(phi)[None, :])      # (nr, nphi)
        an = accel(rr[..., None], t[None, None, :] - D[..., None] / c_a)                  # (nr, nphi, nt)
        out += ((ww * rr / D * wphi[None, :])[..., None] * an).sum(axis=(0, 1))
    return rho_a / np.pi * out
