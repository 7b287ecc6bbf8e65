"""Resting contact damping: a body lying on a support loses vibration energy into it through its contacts.

Chadwick, An & James 2009 ("Harmonic Shells", sec. 6) damp "vibrations of objects in ground contact" with "a
simple contact damping model" whose form they do not give. Ours, stated and derived:

Each resting contact c (from dynamics/resting.py: body-frame point x_c, normal n_c, normal force F_c, support)
is a vertical dashpot c_c between the body's surface and the support. A light dashpot on a mass-normalised mode
u_j adds c_c (u_j(x_c) . n_c)^2 to 2 sigma_j (modal projection of the damping force), so while the body rests

    sigma_j -> sigma_j + Delta sigma_j,     Delta sigma_j = 1/2 sum_c c_c (u_j(x_c) . n_c)^2.

The dashpot is the support's radiation damping under the contact patch: Lysmer's analog for the vertical motion
of a rigid circular disc of radius a on an elastic half-space (Lysmer & Richart 1966, "Dynamic response of
footings to vertical loading", J. Soil Mech. Found. Div. 92; valid for omega a / c_s < ~1.5, i.e. every audible
frequency for millimetre patches),

    c_c = 3.4 a^2 rho_s c_s / (1 - nu_s),     c_s = sqrt(E_s / (2 rho_s (1 + nu_s))),

with the patch radius that of Hertz contact under the resting load (Johnson 1985, "Contact mechanics", eq.
4.22): a = (3 F_c R / (4 E*))^{1/3}, R the body's local surface radius at the contact (capped at its bounding
radius: a flat face on a flat floor touches at its corners' rounding, which the mesh does not resolve), 1/E* =
(1 - nu^2)/E + (1 - nu_s^2)/E_s. The contact spring (2 E* a, ~1e7-1e8 N/m) is stiff against c_c / omega at
audio frequencies, so the patch moves with the body. For a support that is not a half-space (a table top, another
body) the same formula is used with its material: an estimate, stated as such.

The extra damping is switched on and off smoothly: it ramps linearly over RAMP_S at both ends of each resting
stretch, so no click marks the switch; a body that never rests rings as before.
"""
from __future__ import annotations

import numpy as np

#: how long the resting damping takes to switch on or off [s]
RAMP_S = 0.01
#: Lysmer's analog coefficient of the vertical dashpot of a rigid disc on a half-space
LYSMER = 3.4


def shear_speed(material) -> float:
    """c_s = sqrt(E / (2 rho (1 + nu))) [m/s]."""
    return float(np.sqrt(material.E / (2.0 * material.rho * (1.0 + material.nu))))


def contact_dashpot(load, radius, body_material, support_material) -> np.ndarray:
    """Radiation dashpot c [N s/m] of resting contacts under normal forces ``load`` [N] on surfaces of local radius
    ``radius`` [m] (module docstring: Hertz patch radius, Lysmer's analog)."""
    e_star = 1.0 / ((1 - body_material.nu**2) / body_material.E + (1 - support_material.nu**2) / support_material.E)
    a = np.cbrt(3.0 * np.asarray(load, np.float64) * np.asarray(radius, np.float64) / (4.0 * e_star))
    return LYSMER * a**2 * support_material.rho * shear_speed(support_material) / (1.0 - support_material.nu)


def rest_damping(model, surface, rest, body_material, support_material_of, modes) -> np.ndarray:
    """Delta sigma_j [1/s] of the modes ``modes`` of a modal model while it rests as in ``rest`` (module docstring).

    surface: the model's SurfaceCurvature (contact radius); support_material_of(id) -> Material of a support."""
    face, bary, _ = surface.closest(rest.point)
    radius = surface.radius_at(face, bary)
    c = np.array([float(contact_dashpot(f, r, body_material, support_material_of(int(s))))
                  for f, r, s in zip(rest.load, radius, rest.support)])
    u = model.shapes_at(face, bary)[:, modes, :]                           # (k, m, 3)
    un = np.einsum("kmc,kc->km", u, rest.normal)
    return 0.5 * np.einsum("k,km->m", c, un**2)


def ramp(t, rests) -> np.ndarray:
    """Switch (len(rests), len(t)) in [0, 1] of each resting stretch at times t [s]: 1 inside, linear ramps of RAMP_S
    inside both ends (a stretch shorter than 2 RAMP_S peaks below 1)."""
    t = np.asarray(t, np.float64)
    out = np.zeros((len(rests), len(t)))
    for i, r in enumerate(rests):
        out[i] = np.clip(np.minimum(t - r.t0, r.t1 - t) / RAMP_S, 0.0, 1.0)
    return out
