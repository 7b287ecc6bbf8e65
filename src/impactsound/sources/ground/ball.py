"""The ball's own sound in a ground impact: a compact translating sphere plus its image in the rigid ground.

Qu & James 2019 ("Ground sound") compare the ground's emission with that of the ball that strikes it. A sphere of
radius b much smaller than the wavelength, translating with velocity U(t), radiates as a dipole (Rienstra &
Hirschberg 2004, "An Introduction to Acoustics", sec. 6: far field proportional to the jerk over d, near field to
the acceleration over d^2): with d = x - x_b, d = |d|, retarded time t_e = t - d / c_a,

    p_ball(x, t) = (rho_a b^3 / 2) [ d_hat . U'(t_e) / d^2 + d_hat . U''(t_e) / (c_a d) ]

(from the velocity potential phi = div[D(t - d/c_a) / d], D = b^3 U / 2; its near field is the incompressible
flow past a sphere, added mass rho_a V / 2). A rigid ground adds the image sphere at (x_b, y_b, -z_b) moving with
(U_x, U_y, -U_z), so that dp/dz = 0 on the ground. During the contact U' = (J/m) K(t - t_m) z_hat and
U'' = (J/m) K'(t - t_m) z_hat with the same kernel K as the ground's force.
"""
from __future__ import annotations

import math

import numpy as np

from ...constants import AIR_C, AIR_RHO
from ...errors import InputError


def kernel(t, eps: float, kind: str = "K4", derivative: int = 0) -> np.ndarray:
    """The force kernel [1/s] (or its time derivative [1/s^2]) of width eps [s]: the Lorentzian
    K_eps = eps / (pi (t^2 + eps^2)) or K4 = 2 K_eps - K_2eps (unit area)."""
    t = np.asarray(t, np.float64)
    if not (math.isfinite(eps) and eps > 0):
        raise InputError(f"force kernel: eps = {eps} s must be positive")

    def lor(e):
        if derivative == 0:
            return e / (math.pi * (t * t + e * e))
        return -2 * e * t / (math.pi * (t * t + e * e) ** 2)
    if kind == "lorentzian":
        return lor(eps)
    if kind == "K4":
        return 2 * lor(eps) - lor(2 * eps)
    raise InputError(f"force kernel: kind = {kind!r}; use 'K4' or 'lorentzian'")


def ball_pressure(x, t, *, centre, impulse: float, mass: float, radius: float, eps: float, t_m: float = 0.0,
                  kernel_kind: str = "K4", image: bool = True, c_a: float = AIR_C, rho_a: float = AIR_RHO
                  ) -> np.ndarray:
    """Pressure [Pa] of a ball bouncing off the ground (module docstring) at points x and times t.

    Parameters
    ----------
    x : array_like, shape (..., 3)
        Listener positions [m] (z up, ground z = 0).
    t : array_like
        Times [s], broadcasting with x[..., 0].
    centre : array_like, shape (3,)
        Ball centre during the contact [m].
    impulse, mass, radius, eps : float
        J [N s] (upward on the ball), m [kg], b [m], kernel width [s].
    t_m : float
        Centre of the contact force [s].
    kernel_kind : {"K4", "lorentzian"}
    image : bool
        Add the ball's image in the rigid ground (False: free field, an absorptive ground).
    """
    x = np.asarray(x, np.float64)
    t = np.asarray(t, np.float64)
    c = np.asarray(centre, np.float64).reshape(3)
    if not all(math.isfinite(v) and v > 0 for v in (mass, radius)):
        raise InputError(f"ball pressure: mass = {mass} kg and radius = {radius} m must be positive")
    scale = impulse / mass
    out = 0.0
    for sign in ((1.0, -1.0) if image else (1.0,)):
        cb = c * np.array([1.0, 1.0, sign])
        d = x - cb
        dist = np.linalg.norm(d, axis=-1)
        cos = sign * d[..., 2] / dist                      # d_hat . z_hat, the image moves with -U_z
        te = t - t_m - dist / c_a
        acc = scale * kernel(te, eps, kernel_kind, 0)
        jerk = scale * kernel(te, eps, kernel_kind, 1)
        out = out + 0.5 * rho_a * radius**3 * cos * (acc / dist**2 + jerk / (c_a * dist))
    return out
