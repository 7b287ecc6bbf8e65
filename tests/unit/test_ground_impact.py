"""Ground impact: contact parameters against Qu & James 2019 Table 1, the Rayleigh integrator against the exact
on-axis field of a uniformly accelerating disk, and the ground model's on-axis pressure against its analytic far
field (the plane integral of the surface acceleration is the 1-D P wave)."""
import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.ground.impact import (HalfSpace, contact_radius, contact_time, rayleigh_on_axis,
                                               surface_motion)


def _steel_on_mdf():
    b, rho_b, E_b, nu_b = 0.01, 8000.0, 200e9, 0.30
    m = rho_b * 4 / 3 * math.pi * b**3
    v = math.sqrt(2 * 9.81 * 0.15)
    E = 1 / ((1 - nu_b**2) / E_b + (1 - 0.30**2) / 10e9)
    return m, b, E, v


def test_table_1_contact_time_and_radius():
    """Stainless ball (b = 1 cm, 200 GPa, 0.30, 8000 kg/m^3) dropped 15 cm on a 10 GPa, nu = 0.30 ground: the paper's
    t_c = 1.633e-4 s and contact radius 6.316e-4 m within 0.1 %."""
    m, b, E, v = _steel_on_mdf()
    tc = contact_time(m, b, E, v)
    assert abs(tc / 1.633e-4 - 1) < 1e-3
    assert abs(contact_radius(m, b, E, v, tc) / 6.316e-4 - 1) < 1e-3


def test_contact_parameters_depend_on_density_over_modulus_only():
    """Scaling the ball's density and the contact modulus together leaves t_c and the contact radius unchanged."""
    m, b, E, v = _steel_on_mdf()
    tc = contact_time(m, b, E, v)
    ac = contact_radius(m, b, E, v, tc)
    tc2 = contact_time(3.7 * m, b, 3.7 * E, v)
    assert abs(tc2 / tc - 1) < 1e-12 and abs(contact_radius(3.7 * m, b, 3.7 * E, v, tc2) / ac - 1) < 1e-12


def test_rayleigh_integrator_reproduces_the_accelerating_disk():
    """A disk of radius B moving with velocity v(t) in a baffle: on axis p = rho c [v(t - h/c) - v(t - sqrt(h^2 +
    B^2)/c)] exactly."""
    B, h, c, rho, s = 0.05, 0.3, 343.0, 1.2, 2e-4
    v = lambda t: np.exp(-(t / s) ** 2)                                     # noqa: E731
    dv = lambda t: -2 * t / s**2 * np.exp(-(t / s) ** 2)                    # noqa: E731
    t = np.linspace(h / c - 4 * s, math.hypot(h, B) / c + 4 * s, 201)
    p = rayleigh_on_axis(lambda r, tt: np.where(r < B, dv(tt), 0.0), h, t, r_max=2 * B, r_scale=B, breaks=[B],
                         c_a=c, rho_a=rho)
    ref = rho * c * (v(t - h / c) - v(t - math.hypot(h, B) / c))
    assert np.max(np.abs(p - ref)) < 1e-9 * np.abs(ref).max()


@pytest.mark.parametrize("h, lo, hi", [(5.0, 0.936, 1.060), (20.0, 0.984, 1.017), (80.0, 0.996, 1.004)])
def test_ground_pressure_tends_to_its_far_field(h, lo, hi):
    """On axis far above the impact p -> -rho_a J K'(t_r) / (2 pi h rho_g c_p) (the plane integral of a_n is the 1-D
    P wave); at the extrema of K' (t_r = -+ eps/sqrt 3) the ratio approaches 1 like 1/h (Lorentzian kernel,
    nu = 1/4, E = 11 GPa, rho_g = 750 kg/m^3, eps = 40.825 us, c_a = 343 m/s)."""
    g, eps, J, ca, rhoa = HalfSpace(11e9, 0.25, 750.0), 4.0825e-5, 1.0, 343.0, 1.2041
    tr = np.array([-eps / math.sqrt(3), eps / math.sqrt(3)])
    p = rayleigh_on_axis(lambda r, t: surface_motion(r, t, J, eps, g, kernel="lorentzian"), h, h / ca + tr,
                         r_max=40 * g.c_s * eps, r_scale=g.c_s * eps, c_a=ca, rho_a=rhoa)
    Kp = -2 * eps * tr / (math.pi * (tr**2 + eps**2) ** 2)
    ratio = p / (-rhoa * J * Kp / (2 * math.pi * h * g.rho * g.c_p))
    assert np.allclose(ratio, [lo, hi], rtol=0, atol=1.5e-3)


def test_surface_settles_back_after_an_impulse_and_k4_has_unit_area():
    """The force J K integrates to J: long after the impact the displacement returns to rest (the response to an
    impulse is the derivative of the step response); K4 and the Lorentzian give the same late motion."""
    g = HalfSpace(10e9, 0.3, 656.0)
    w = surface_motion(0.2, [0.02, 0.05], 0.1, 4e-5, g, order=0)
    near = surface_motion(0.2, 0.2 / g.c_R, 0.1, 4e-5, g, order=0)        # at the Rayleigh arrival
    assert np.all(np.abs(w) < 1e-3 * abs(near))


def test_bad_ground_and_arguments_are_refused():
    with pytest.raises(InputError, match="Poisson"):
        HalfSpace(10e9, 0.5, 700.0)
    with pytest.raises(InputError, match="rho"):
        HalfSpace(10e9, 0.3, 0.0)
    g = HalfSpace(10e9, 0.3, 656.0)
    with pytest.raises(InputError, match="r must be > 0"):
        surface_motion(0.0, 0.0, 0.1, 4e-5, g)
    with pytest.raises(InputError, match="kernel"):
        surface_motion(0.1, 0.0, 0.1, 4e-5, g, kernel="gauss")


# ---- the ball ----------------------------------------------------------------------------------------------------
from impactsound.sources.ground.ball import ball_pressure, kernel  # noqa: E402


def test_kernels_have_unit_area_and_k4_a_fourth_order_tail():
    from scipy.integrate import quad
    eps = 4e-5
    for kind in ("lorentzian", "K4"):                 # t = eps tan(theta) maps the real line to (-pi/2, pi/2)
        area = quad(lambda th: float(kernel(eps * math.tan(th), eps, kind)) * eps / math.cos(th) ** 2,
                    -math.pi / 2, math.pi / 2, epsabs=1e-14, epsrel=1e-13)[0]
        assert abs(area - 1) < 1e-10
    t = 1e3 * eps
    assert abs(kernel(t, eps, "K4") * t**4 / (6 * eps**3 / math.pi) - 1) < 1e-5     # tail 6 eps^3 / (pi t^4)
    h = 1e-9                                                                          # K' by differences
    assert abs((kernel(eps + h, eps) - kernel(eps - h, eps)) / (2 * h) / kernel(eps, eps, derivative=1) - 1) < 1e-6


def test_ball_image_makes_the_ground_rigid():
    """With the image, dp/dz = 0 on the ground (mirror symmetry), to rounding."""
    kw = dict(centre=[0.0, 0.0, 0.01], impulse=0.086, mass=0.0335, radius=0.01, eps=4.08e-5)
    xy = np.array([[0.05, 0.02], [0.3, -0.1], [0.0, 0.4]])
    t = 0.2 / 343.2 + np.linspace(-2e-4, 2e-4, 9)[:, None]
    dz = 1e-6
    up = ball_pressure(np.concatenate([xy, np.full((3, 1), dz)], 1), t, **kw)
    down = ball_pressure(np.concatenate([xy, np.full((3, 1), -dz)], 1), t, **kw)
    assert np.max(np.abs(up - down)) < 1e-9 * np.abs(up).max()
    free = ball_pressure(np.concatenate([xy, np.full((3, 1), dz)], 1), t, image=False, **kw)
    assert np.max(np.abs(up - free)) > 0.1 * np.abs(up).max()          # the image matters near the ground


def test_far_fields_of_ground_and_ball_have_the_derived_ratio():
    """Far above the impact the free ball's dipole tends to rho_a b^3 J K'(t_r) / (2 m c_a h) and the ground's to
    -rho_a J K'(t_r) / (2 pi h rho_g c_p), so p_g / p_b -> -4 rho_b c_a / (3 rho_g c_p), independent of b, J, h."""
    g, eps, ca, rhoa = HalfSpace(11e9, 0.25, 750.0), 4.0825e-5, 343.0, 1.2041
    b, rho_b = 0.01, 8000.0
    m, J, h = rho_b * 4 / 3 * math.pi * b**3, 0.05, 80.0
    tr = np.array([-eps / math.sqrt(3), eps / math.sqrt(3)])
    pb = ball_pressure([0.0, 0.0, h], h / ca + tr, centre=[0, 0, 0], impulse=J, mass=m, radius=b, eps=eps,
                       kernel_kind="lorentzian", image=False, c_a=ca, rho_a=rhoa)
    Kp = kernel(tr, eps, "lorentzian", 1)
    # the near-field (acceleration) term is c_a K / (h K') ~ 3e-4 of the far-field one here
    near = np.abs(ca * kernel(tr, eps, "lorentzian") / (h * Kp))
    assert np.all(np.abs(pb / (rhoa * b**3 * J * Kp / (2 * m * ca * h)) - 1) < 2 * near)
    pg = rayleigh_on_axis(lambda r, t: surface_motion(r, t, J, eps, g, kernel="lorentzian"), h, h / ca + tr,
                          r_max=40 * g.c_s * eps, r_scale=g.c_s * eps, c_a=ca, rho_a=rhoa)
    assert np.allclose(pg / pb, -4 * rho_b * ca / (3 * g.rho * g.c_p), rtol=5e-3)


def test_off_axis_rayleigh_integral():
    """Off axis: a small accelerating disk (radius B much smaller than the distance D) radiates like a baffled point
    source, p = rho B^2 a(t - D/c) / (2 D) (1 + O(B^2/D^2, k^2 B^2)); at offset 0 the off-axis form is the on-axis
    one."""
    from impactsound.sources.ground.impact import rayleigh_off_axis
    B, c, rho, s = 0.005, 343.0, 1.2, 2e-4
    dv = lambda t: -2 * t / s**2 * np.exp(-(t / s) ** 2)                     # noqa: E731
    disk = lambda r, t: np.where(r < B, dv(t), 0.0)                          # noqa: E731
    h, off = 0.3, 0.4
    D = math.hypot(h, off)
    t = D / c + np.linspace(-3 * s, 3 * s, 61)
    p = rayleigh_off_axis(disk, h, off, t, r_max=B, r_scale=B, breaks=[B], c_a=c, rho_a=rho)
    ref = rho * B**2 * dv(t - D / c) / (2 * D)
    assert np.max(np.abs(p - ref)) < 2e-3 * np.abs(ref).max()
    on = rayleigh_on_axis(disk, h, t, r_max=B, r_scale=B, breaks=[B], c_a=c, rho_a=rho)
    off0 = rayleigh_off_axis(disk, h, 0.0, t, r_max=B, r_scale=B, breaks=[B], c_a=c, rho_a=rho)
    assert np.max(np.abs(on - off0)) < 1e-10 * np.abs(on).max()
