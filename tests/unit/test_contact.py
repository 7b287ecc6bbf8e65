"""Hertz contact time, effective mass, combined modulus, half-sine force, curvature radius (pan.md)."""
import numpy as np
import pytest
import trimesh
from scipy.integrate import quad, solve_ivp

from impactsound.contact.curvature import SurfaceCurvature, vertex_mean_curvature
from impactsound.contact.hertz import (combined_modulus, effective_mass, half_sine, half_sine_force,
                                       hertz_stiffness, hertz_tau, inverse_effective_mass)
from impactsound.errors import InputError
from impactsound.materials import get_material, make_material


def _ode_contact_duration(m, K, V):
    """Duration of m x'' = -K x^{3/2} (x > 0), x(0) = 0, x'(0) = V, until x returns to 0."""
    def rhs(t, y):
        return [y[1], -K * max(y[0], 0.0) ** 1.5 / m]

    def back(t, y):
        return y[0]
    back.terminal, back.direction = True, -1
    # time scale estimate only to bound the integration window
    T = 10 * (m**2 / (K**2 * V)) ** 0.2
    sol = solve_ivp(rhs, (0, T), [0.0, V], method="DOP853", rtol=1e-12, atol=1e-20, events=back,
                    first_step=T * 1e-6)
    # the event at t = 0 (x = 0 exactly) is excluded by direction -1 (x increases there)
    return sol.t_events[0][0]


@pytest.mark.parametrize("case", [
    dict(r=0.01, rho=7850.0, V=1.0, mats=("steel", "steel")),
    dict(r=0.003, rho=1200.0, V=4.0, mats=("polycarbonate", "granite")),
    dict(r=0.05, rho=2600.0, V=0.2, mats=("glass", "wood_hard")),
])
def test_hertz_tau_matches_ode_duration(case):
    Es = combined_modulus(get_material(case["mats"][0]), get_material(case["mats"][1]))
    m = case["rho"] * 4 / 3 * np.pi * case["r"] ** 3
    K = hertz_stiffness(case["r"], Es)
    t_ode = _ode_contact_duration(m, K, case["V"])
    tau = hertz_tau(m, case["r"], Es, case["V"])
    # exact Hertz constant from energy conservation: 2 (15/16)^{2/5} int_0^1 du / sqrt(1 - u^{5/2})
    c_exact = 2 * (15 / 16) ** 0.4 * quad(lambda u: 1 / np.sqrt(1 - u**2.5), 0, 1, limit=200)[0]
    assert abs(c_exact - 2.868266) < 1e-6
    assert t_ode == pytest.approx(c_exact * (m**2 / (case["r"] * Es**2 * case["V"])) ** 0.2, rel=1e-8)
    # pan.md's rounded 2.87 is 0.060 % long
    assert tau / t_ode - 1 == pytest.approx(2.87 / c_exact - 1, abs=1e-8)
    assert abs(tau / t_ode - 1) < 7e-4


def test_hertz_tau_vectorised_and_rejects_bad_input():
    tau = hertz_tau(np.array([0.1, 0.2]), 0.01, 1e11, np.array([1.0, 1.0]))
    assert tau.shape == (2,) and tau[1] / tau[0] == pytest.approx(2 ** 0.4, rel=1e-14)
    for bad in (dict(vn=0.0), dict(vn=np.nan), dict(m_eff=-1.0), dict(r_eff=0.0)):
        kw = dict(m_eff=0.1, r_eff=0.01, E_star=1e11, vn=1.0) | bad
        with pytest.raises(InputError):
            hertz_tau(**kw)


def test_half_sine_integrates_to_impulse():
    tau, J, t0 = 37e-6, 0.0123, 0.5
    val, _ = quad(lambda t: half_sine_force(t, t0, tau, J), t0 - tau, t0 + 2 * tau, points=[t0, t0 + tau],
                  epsabs=0, epsrel=1e-13)
    assert val == pytest.approx(J, rel=1e-12)
    assert half_sine(t0 + tau / 2, t0, tau) == pytest.approx(1.0)
    assert half_sine(t0 - 1e-9, t0, tau) == 0.0 and half_sine(t0 + tau * 1.001, t0, tau) == 0.0
    assert half_sine_force(t0 + tau / 2, t0, tau, J) == pytest.approx(np.pi * J / (2 * tau))


def test_combined_modulus():
    st = get_material("steel")
    assert combined_modulus(st, st) == pytest.approx(st.E / (2 * (1 - st.nu**2)), rel=1e-14)
    assert combined_modulus(st, None) == pytest.approx(st.E / (1 - st.nu**2), rel=1e-14)
    soft = make_material(rho=1000, E=1e6, nu=0.0)
    assert combined_modulus(st, soft) == pytest.approx(1 / ((1 - st.nu**2) / st.E + 1e-6), rel=1e-14)
    with pytest.raises(InputError):
        combined_modulus(None, None)


def test_effective_mass_sphere_and_box():
    M, R = 2.0, 0.1
    I_sph = 0.4 * M * R**2 * np.eye(3)
    x = np.array([[0, 0, -R], [R, 0, 0]])
    # normal through the centre: m = M; tangential at the surface: 1/m = 1/M + R^2/(2/5 M R^2) -> m = 2M/7
    m = effective_mass(M, I_sph, x, np.array([[0, 0, 1.0], [0, 1.0, 0]]))
    assert m == pytest.approx([M, 2 * M / 7], rel=1e-14)
    # box a x b x c, corner (a/2, b/2, c/2), normal e_z:
    # 1/m = 1/M + (b/2)^2 / (M (b^2 + c^2)/12) + (a/2)^2 / (M (a^2 + c^2)/12)
    a, b, c = 0.1, 0.2, 0.3
    I_box = M / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    inv = 1 / M + (b / 2) ** 2 / (M * (b * b + c * c) / 12) + (a / 2) ** 2 / (M * (a * a + c * c) / 12)
    corner = np.array([a / 2, b / 2, c / 2])
    assert effective_mass(M, I_box, corner[None], np.array([[0, 0, 1.0]]))[0] == pytest.approx(1 / inv,
                                                                                               rel=1e-13)
    # same in a rotated frame (I' = Q I Q^T, x' = Q x, n' = Q n)
    Q = trimesh.transformations.random_rotation_matrix(np.random.default_rng(1).random(3))[:3, :3]
    m_rot = effective_mass(M, Q @ I_box @ Q.T, (Q @ corner)[None], (Q @ [0, 0, 1.0])[None])[0]
    assert m_rot == pytest.approx(1 / inv, rel=1e-12)
    # ground / fixed body: infinite mass, zero inverse
    assert np.isinf(effective_mass(np.inf, np.full((3, 3), np.inf), corner[None], np.array([[0, 0, 1.0]]))[0])
    assert inverse_effective_mass(np.inf, np.eye(3), corner, [0, 0, 1.0]) == 0.0


@pytest.mark.parametrize("R", [0.004, 0.05, 1.3])
def test_curvature_of_sphere_mesh(R):
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=R)
    H = vertex_mean_curvature(mesh.vertices, mesh.faces)
    assert np.all(np.abs(H * R - 1) < 0.025)          # every vertex (valence 5 and 6) within 2.5 %
    assert abs(np.mean(H * R) - 1) < 0.005
    surf = SurfaceCurvature(mesh.vertices, mesh.faces)
    rng = np.random.default_rng(0)
    d = rng.normal(size=(20, 3))
    pts = R * d / np.linalg.norm(d, axis=1, keepdims=True)
    assert np.all(np.abs(surf.radius_near(pts) / R - 1) < 0.03)


def test_curvature_flat_and_concave_cap_to_bounding_radius():
    box = trimesh.creation.box(extents=[0.1, 0.2, 0.3]).subdivide().subdivide()
    surf = SurfaceCurvature(box.vertices, box.faces)
    r_bound = np.sqrt(0.05**2 + 0.1**2 + 0.15**2)
    # face centre: H = 0 (plane) -> capped at the bounding radius
    assert surf.radius_near([[0, 0, 0.2]])[0] == pytest.approx(r_bound, rel=1e-12)
    # a corner: convex, finite radius below the cap
    assert surf.radius_near([[0.05, 0.1, 0.15]])[0] < 0.5 * r_bound
    # inside-out sphere: concave everywhere -> plane -> cap
    sph = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    inv = SurfaceCurvature(sph.vertices, sph.faces[:, ::-1])
    assert np.all(inv.H < 0)
    assert inv.radius_near([[0, 0, 0.05]])[0] == pytest.approx(0.05, rel=1e-12)
