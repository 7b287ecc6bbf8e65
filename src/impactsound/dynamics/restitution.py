"""Restitution calibration of the rigid-body engine's contact: the damping ratio that gives a material's
coefficient of restitution.

MuJoCo's soft contact acts, in constraint space, as a mass-normalised spring-damper a_n = -damping v_n -
stiffness r with stiffness = omega0^2 and damping = 2 zeta omega0 (impactsound.dynamics.mujoco_backend).
A continuous Kelvin-Voigt contact's restitution depends on zeta alone; the engine integrates it with a few
explicit steps per contact (kappa = omega0 dt = pi / contact_steps), first contact at a random phase inside a
step, force clamped >= 0, release at zero penetration, and that discrete map's mean restitution is what
:func:`restitution_to_damping_ratio` matches (Brent's root finder on zeta). The damping term is explicit, so zeta is
capped at damping * dt <= 0.8 (monotone and stable), which puts a floor of ~0.07 on the reachable restitution at
10 steps per contact.
"""
from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np

__all__ = ["restitution_to_damping_ratio"]

_MAX_DAMP_STEP = 0.8        # damping * timestep <= this keeps the explicit damping term monotone and stable


def _discrete_restitution(zeta: float, kappa: float, n_phase: int = 64) -> float:
    """Mean restitution of MuJoCo's discrete contact map over the phase of first contact.

    Units v_in = 1, dt = 1. Per step (semi-implicit Euler, as mj_step with the Euler integrator):
    a = max(-c u - K x, 0) while x < 0, u += a, x += u; K = kappa^2, c = 2 zeta kappa. Gravity is left out: the
    restitution is a property of the contact. First contact at x = -phi (phi uniform in (0, 1)); release when the
    penetration x returns to >= 0; e = u_out / u_in.
    """
    phi = (np.arange(n_phase) + 0.5) / n_phase
    x = -phi
    u = -np.ones(n_phase)
    K, c = kappa * kappa, 2.0 * zeta * kappa
    e = np.zeros(n_phase)
    active = np.ones(n_phase, bool)
    for _ in range(int(200.0 / kappa) + 100):
        a = np.maximum(-c * u - K * x, 0.0)
        u = u + a
        x = x + u
        out = active & (x >= 0)
        e[out] = u[out]
        active &= ~out
        if not active.any():
            break
    e[active] = np.maximum(u[active], 0.0)          # overdamped creep-out: essentially no rebound
    return float(e.mean())


@lru_cache(maxsize=256)
def _calibrate(restitution: float, contact_steps: float) -> tuple[float, float | None]:
    """(zeta, e_floor): e_floor is set when the requested restitution was below reach and zeta was clamped."""
    from scipy.optimize import brentq

    kappa = math.pi / contact_steps
    z_max = _MAX_DAMP_STEP / (2.0 * kappa)
    e = float(restitution)
    if e >= _discrete_restitution(0.0, kappa):
        return 0.0, None
    e_floor = _discrete_restitution(z_max, kappa)
    if e <= e_floor:
        return z_max, e_floor
    return float(brentq(lambda z: _discrete_restitution(z, kappa) - e, 0.0, z_max, xtol=1e-6)), None


def restitution_to_damping_ratio(restitution: float, contact_steps: float = 10.0) -> float:
    """Damping ratio of the engine contact that yields ``restitution`` on average (see module docstring).

    Clamped, with a warning, to the most damping the explicit step tolerates (restitution ~0.07 at 10 steps).

    Parameters
    ----------
    restitution : float
        Coefficient of restitution e = v_out / v_in [-], 0..1.
    contact_steps : float
        Undamped contact duration in engine steps (kappa = omega0 dt = pi / contact_steps).

    Returns
    -------
    float
        Damping ratio zeta [-] of the contact spring-damper (damping = 2 zeta omega0).

    Warns
    -----
    UserWarning
        The restitution is below the lowest reachable at this resolution (zeta is clamped).
    """
    zeta, e_floor = _calibrate(float(restitution), float(contact_steps))
    if e_floor is not None:
        warnings.warn(f"restitution {restitution:.3g} is below the lowest the rigid-body engine reaches with "
                      f"{contact_steps:g} steps per contact ({e_floor:.3g}); using {e_floor:.3g}", stacklevel=2)
    return zeta
