"""Lamb's problem (step point load on a half-space) against independent references: the unsquared Rayleigh equation,
Pekeris's closed form at nu = 1/4 (Pekeris 1955), continuity at the P and S arrivals, the volume identity of the
surface displacement, and Rayleigh-speed values from the literature (Viktorov 1967: c_R/c_s = 0.874 at nu = 0,
0.919 at 1/4)."""
import numpy as np
import pytest
from scipy.integrate import quad

from impactsound.errors import InputError
from impactsound.sources.ground.lamb import (rayleigh_roots, rayleigh_speed_ratio, residue_weights,
                                             speed_ratio_squared, step_response)


@pytest.mark.parametrize("nu, ratio", [(0.0, 0.8740320489), (0.25, 0.9194016868), (0.3, 0.9274127097),
                                       (0.45, 0.9489596979)])
def test_rayleigh_speed_solves_the_unsquared_rayleigh_equation(nu, ratio):
    xi = rayleigh_speed_ratio(nu)                       # c_R / c_s
    a2 = speed_ratio_squared(nu)
    residual = (2 - xi**2) ** 2 - 4 * np.sqrt(1 - xi**2) * np.sqrt(1 - a2 * xi**2)
    assert abs(residual) < 1e-12 and abs(xi - ratio) < 1e-9


def test_the_spurious_roots_turn_complex_above_nu_star():
    nu_star = 0.2630820649
    lo, hi = rayleigh_roots(nu_star - 1e-4), rayleigh_roots(nu_star + 1e-4)
    assert abs(lo[0].imag) == 0 and abs(lo[1].imag) == 0
    assert abs(hi[0].imag) > 0 and np.isclose(hi[0], np.conj(hi[1]))


def test_pekeris_closed_form_at_nu_one_quarter():
    s3 = np.sqrt(3.0)
    gamma = 0.5 * np.sqrt(3 + s3)
    assert np.isclose(np.sqrt(rayleigh_roots(0.25)[2]), gamma, rtol=0, atol=1e-12)
    A = sorted(np.real(residue_weights(0.25)))
    assert np.allclose(A, sorted([s3 / 6, -np.sqrt(3 * s3 - 5) / 6, np.sqrt(3 * s3 + 5) / 6]), rtol=0, atol=1e-12)
    a = 1 / s3
    tau = np.linspace(a + 1e-9, gamma - 1e-3, 4001)
    early = tau < 1
    ref = np.where(
        early,
        (6 - s3 / np.sqrt(tau**2 - 0.25) + np.sqrt(3 * s3 - 5) / np.sqrt(np.abs(tau**2 - (3 - s3) / 4))
         - np.sqrt(3 * s3 + 5) / np.sqrt((3 + s3) / 4 - tau**2)) / 12,
        1 - np.sqrt(3 * s3 + 5) / (6 * np.sqrt((3 + s3) / 4 - tau**2)))
    U = step_response(tau, 0.25)
    assert np.max(np.abs(U - ref) / np.maximum(1.0, np.abs(ref))) < 1e-12


@pytest.mark.parametrize("nu, u1", [(0.1, -0.191875264), (0.25, -0.244016936), (0.3, -0.270838135),
                                    (0.45, -0.403030778)])
def test_continuous_at_the_p_and_s_arrivals(nu, u1):
    a = np.sqrt(speed_ratio_squared(nu))
    assert abs(step_response(a * (1 + 1e-14), nu)) < 1e-6      # sqrt kink: U ~ sqrt(tau - a)
    assert step_response(a * (1 - 1e-12), nu) == 0.0
    lo, hi = step_response([1 - 1e-12, 1 + 1e-12], nu)
    assert abs(lo - u1) < 1e-8 and abs(hi - u1) < 1e-8
    assert step_response(1.2, nu) == 1.0                        # static (Boussinesq) value after the R arrival


@pytest.mark.parametrize("nu", [0.1, 0.25, 0.3, 0.4])
def test_volume_identity(nu):
    """The surface displacement's plane integral is the 1-D P wave: int_a^inf U tau^-2 dtau = a / (1 - nu)
    (20/27 at nu = 0.1, 4/(3 sqrt 3) at 1/4). The (gamma - tau)^(-1/2) singularity is integrated with
    tau = gamma - u^2."""
    a = np.sqrt(speed_ratio_squared(nu))
    gamma = np.sqrt(rayleigh_roots(nu)[2])
    f = lambda t: float(step_response(t, nu)) / t**2                                   # noqa: E731
    I1 = quad(f, a, 1.0, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
    g = lambda u: 2 * u * f(gamma - u * u)                                              # noqa: E731
    I2 = quad(g, 0.0, np.sqrt(gamma - 1.0), epsabs=1e-14, epsrel=1e-13, limit=200)[0]
    total = I1 + I2 + 1.0 / gamma
    assert abs(total - a / (1 - nu)) < 1e-10
    if nu == 0.1:
        assert abs(a / (1 - nu) - 20 / 27) < 1e-15


def test_bad_poisson_ratio_is_refused():
    for nu in (-0.1, 0.5, float("nan")):
        with pytest.raises(InputError, match="Poisson's ratio"):
            step_response(1.0, nu)


# ---- regularized (Lorentzian-smoothed) response -----------------------------------------------------------------
from impactsound.sources.ground.lamb import regularized_response  # noqa: E402


def _brute_force(tau, eps, nu):
    """(K_eps * U)(tau) by adaptive quadrature of the convolution (independent of the closed form): [a, 1] directly,
    [1, gamma] with s = gamma - u^2 (the (gamma - s)^(-1/2) singularity), [gamma, inf) where U = 1 in closed form."""
    a = np.sqrt(speed_ratio_squared(nu))
    gamma = np.sqrt(rayleigh_roots(nu)[2])
    K = lambda s: eps / (np.pi * ((tau - s) ** 2 + eps**2))                              # noqa: E731
    f = lambda s: float(step_response(s, nu)) * K(s)                                     # noqa: E731
    pts = [p for p in (tau,) if a < p < 1]
    I1 = quad(f, a, 1.0, points=pts or None, epsabs=1e-13, epsrel=1e-12, limit=400)[0]
    g = lambda u: 2 * u * f(gamma - u * u)                                               # noqa: E731
    up = [np.sqrt(gamma - tau)] if 1 < tau < gamma else None
    I2 = quad(g, 0.0, np.sqrt(gamma - 1.0), points=up, epsabs=1e-13, epsrel=1e-12, limit=400)[0]
    return I1 + I2 + 0.5 - np.arctan((gamma - tau) / eps) / np.pi


@pytest.mark.parametrize("nu, tau, eps, ref", [
    (0.25, 1.05, 0.05, [-0.3626869485, -1.527789153, 179.9846508, 11095.69796]),
    (0.30, 0.58, 0.05, [-0.02152842326, -0.22808536, 8.053687194, 27.37952429]),
    (0.40, 1.05, 0.01, [-1.526308453, -40.95605885, 2039.53158, 1184291.516])])
def test_regularized_response_matches_reference_values(nu, tau, eps, ref):
    """Reference values of the derivation (10 digits), including nu above nu* (complex root pair)."""
    got = [float(regularized_response(tau, eps, nu, n)) for n in range(4)]
    assert np.allclose(got, ref, rtol=2e-9, atol=0)


def test_regularized_response_against_brute_force_convolution():
    for nu in (0.1, 0.25, 0.3, 0.45):
        for eps in (0.2, 0.05, 0.01):
            # 0.5 = sqrt(x1) at nu = 1/4: the near-singular case evaluated by quadrature instead of the recurrence
            taus = np.array([-0.5, 0.3, 0.5, 0.6, 0.8, 0.95, 1.02, 1.06, 1.5, 3.0])
            got = regularized_response(taus, eps, nu)
            ref = np.array([_brute_force(t, eps, nu) for t in taus])
            assert np.max(np.abs(got - ref) / np.maximum(1.0, np.abs(ref))) < 1e-8, (nu, eps)


def test_branch_of_the_logarithm_above_nu_star_and_static_limit():
    # nu = 0.3 > nu*: a principal logarithm would give 0.1523616295 here
    assert abs(regularized_response(0.8, 0.01, 0.3) - (-0.03561399516)) < 1e-9
    # long after the Rayleigh arrival the smoothed response tends to Boussinesq's static value (1)
    got = [regularized_response(5.0, e, 0.25) for e in (0.2, 0.05, 0.01)]
    assert np.allclose(got, [0.9831221299, 0.9957768452, 0.9991553218], rtol=0, atol=1e-9)


def test_regularized_derivatives_are_the_derivatives():
    """n = 1..3 against Richardson-extrapolated central differences of n = 0..2 (error O(h^4); the recurrence is
    independent of the differences)."""
    nu, eps, h = 0.3, 0.05, 2e-4
    taus = np.array([0.45, 0.7, 0.9, 1.04, 1.3])

    def central(n, hh):
        return (regularized_response(taus + hh, eps, nu, n) - regularized_response(taus - hh, eps, nu, n)) / (2 * hh)
    for n in (1, 2, 3):
        fd = (4 * central(n - 1, h / 2) - central(n - 1, h)) / 3
        ex = regularized_response(taus, eps, nu, n)
        assert np.max(np.abs(fd - ex) / np.maximum(1.0, np.abs(ex))) < 1e-5, n


def test_regularized_response_refuses_bad_arguments():
    with pytest.raises(InputError, match="eps"):
        regularized_response(1.0, 0.0, 0.25)
    with pytest.raises(InputError, match="derivative order"):
        regularized_response(1.0, 0.1, 0.25, n=4)


# ---- the compiled kernel against the partition algorithm it replaced, and where that algorithm fails ---------------
from impactsound.sources.ground.lamb import _regularized_response_reference  # noqa: E402


def test_regularized_response_matches_the_partition_algorithm_on_a_dense_random_set():
    """1000 random points per (nu, n): tau uniform in [-1, 5], eps log-uniform in [1e-3, 2]; the kernel's analytic
    branch of the logarithm against the reference's partition sums (_delta_log), to 1e-9 of max(1, |value|)."""
    rng = np.random.default_rng(20250101)
    for nu in (0.1, 0.25, 0.3, 0.4, 0.45):
        for n in range(4):
            tau = rng.uniform(-1.0, 5.0, 1000)
            eps = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), 1000))
            got = regularized_response(tau, eps, nu, n)
            ref = _regularized_response_reference(tau, eps, nu, n)
            assert np.max(np.abs(got - ref) / np.maximum(1.0, np.abs(ref))) < 1e-9, (nu, n)


def _derivative_by_quadrature(tau, eps, nu, n):
    """Re (n!/(i pi)) int U(s) / (s - z)^(n+1) ds, z = tau + i eps, n >= 1, by adaptive quadrature (for tau before
    the P arrival, where the integrand is smooth): [a, 1] directly, [1, gamma] with s = gamma - u^2, and
    int_gamma^inf (s - z)^-(n+1) ds = (gamma - z)^-n / n in closed form."""
    a = np.sqrt(speed_ratio_squared(nu))
    gamma = np.sqrt(rayleigh_roots(nu)[2])
    c = (1, 1, 2, 6)[n] / (1j * np.pi)
    f = lambda s: (c * float(step_response(s, nu)) / (s - tau - 1j * eps) ** (n + 1)).real   # noqa: E731
    I1 = quad(f, a, 1.0, epsabs=1e-16, epsrel=1e-13, limit=200)[0]
    I2 = quad(lambda u: 2 * u * f(gamma - u * u), 0.0, np.sqrt(gamma - 1.0), epsabs=1e-16, epsrel=1e-13,
              limit=200)[0]
    return I1 + I2 + (c * (gamma - tau - 1j * eps) ** (-n) / n).real


@pytest.mark.parametrize("nu", [0.1, 0.3, 0.45])
def test_regularized_derivatives_before_the_load_near_tau_minus_gamma(nu):
    """At tau = -gamma the recurrence in m divides by x3 - z^2 ~ 0 although the integrand is smooth (the reference
    algorithm is off by up to 1e-2 there at eps = 1e-4); the kernel integrates in theta instead."""
    gamma = np.sqrt(rayleigh_roots(nu)[2])
    for tau in (-gamma, -gamma + 0.01, -1.0):
        for eps in (1e-4, 1e-2):
            for n in (1, 2, 3):
                ref = _derivative_by_quadrature(tau, eps, nu, n)
                assert abs(regularized_response(tau, eps, nu, n) - ref) < 1e-8 * abs(ref), (tau, eps, n)


def test_regularized_response_at_nu_star():
    """At nu* the roots x1, x2 nearly coincide and A1, A2 are ~5e3 with a small sum (the reference algorithm is off
    by 5e-5 at tau = 1, eps = 1e-4); the kernel against the brute-force convolution."""
    nu = 0.2630820649
    for tau, eps in ((1.0, 1e-4), (0.999, 1e-4), (1.0, 1e-3), (0.8, 1e-3)):
        assert abs(regularized_response(tau, eps, nu) - _brute_force(tau, eps, nu)) < 1e-9, (tau, eps)
