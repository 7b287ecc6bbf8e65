"""PAN pulse psi(t; h) (pan.md "Pulse basis", paper eq. 17) and time scale / body accelerations (sec. 4.3, eqs.
11-12): checked against the values stated in the spec and paper Table 1."""
import numpy as np
import pytest

from impactsound.contact.hertz import half_sine
from impactsound.errors import InputError
from impactsound.materials import make_material
from impactsound.sources.pan.pulse import KERNEL_PIECES, contact_weights, psi, psi_unit, psi_weights
from impactsound.sources.pan.timescale import (acceleration_amplitudes, body_accelerations,
                                               equivalent_sphere_radius, pulse_timescale)


@pytest.mark.parametrize("h", [1.0, 7.3264e-6])
def test_psi_values_and_support(h):
    assert psi(0.0, h) == pytest.approx(7 / 9, abs=1e-15)
    assert psi(h, h) == pytest.approx(1 / 9, abs=1e-15)
    assert psi(-h, h) == pytest.approx(1 / 9, abs=1e-15)
    t = np.linspace(-3 * h, 3 * h, 6001)
    v = psi(t, h)
    assert np.all(v[np.abs(t) >= 2 * h] == 0)
    assert psi(1.4 * h, h) == pytest.approx(0.0, abs=1e-15)     # negative lobe (C > 0) between 1.4 h and 2 h
    assert psi(1.7 * h, h) < 0
    # the paper's form in y = 1 - |t|/h (eq. 17)
    u = np.abs(t) / h
    y = 1 - u
    paper = np.where(u <= 1, (-15 * y**3 + 18 * y**2 + 9 * y + 2) / 18,
                     np.where(u <= 2, (5 * (1 + y) ** 3 - 3 * (1 + y) ** 2) / 18, 0.0))
    assert np.allclose(v, paper, atol=1e-14)
    assert np.allclose([psi_unit(x) for x in t[::97] / h], v[::97], atol=1e-15)


def test_psi_partition_of_unity_and_integral():
    h = 2.5e-6
    t = np.random.default_rng(1).uniform(-1e-4, 1e-4, 2000)
    s = sum(psi(t - k * h, h) for k in range(-60, 61))
    assert np.max(np.abs(s - 1)) < 1e-13
    tt = np.linspace(-2 * h, 2 * h, 400001)
    assert np.trapezoid(psi(tt, h), tt) == pytest.approx(h, rel=1e-9)
    j0, w = psi_weights(t / h)
    assert np.allclose(w.sum(-1), 1, atol=1e-13)
    assert np.allclose(w[:, 1], psi(t - (j0 + 1) * h, h), atol=1e-14)


def test_ball_bearing_timescale_table1():
    # Table 1: ball bearing r = 7.5 mm, 123.4 GPa, 0.34, 8940 kg/m^3 -> h = 7.3264 us
    mat = make_material("bearing", rho=8940, E=123.4e9, nu=0.34)
    m = 8940 * 4 / 3 * np.pi * 7.5e-3**3
    assert equivalent_sphere_radius(m, 8940) == pytest.approx(7.5e-3, rel=1e-12)
    assert pulse_timescale(m, mat) == pytest.approx(7.3264e-6, rel=5e-3)
    # the radius printed in the paper, (0.75 m/rho)^(1/3), is 7 % off Table 1: the sphere formula is meant
    r_printed = (0.75 * m / 8940) ** (1 / 3)
    tau = 2.87 * (m**2 / (r_printed * (123.4e9 / (1 - 0.34**2)) ** 2 * 5.0)) ** 0.2
    assert abs(tau / 5 / 7.3264e-6 - 1) > 0.05


def test_accelerations_integrate_to_impulse():
    M = 0.3
    I = np.array([[2e-4, 1e-5, 0], [1e-5, 3e-4, 2e-5], [0, 2e-5, 4e-4]])
    J = np.array([0.02, -0.05, 0.11])
    r = np.array([0.03, 0.01, -0.02])
    tau = 4.2e-5
    t = np.linspace(-1e-5, 6e-5, 700001)
    a, al = body_accelerations(t, 0.0, tau, J, r, M, I)
    assert np.allclose(M * np.trapezoid(a, t, axis=0), J, rtol=1e-8, atol=1e-14)                 # Delta p = j
    assert np.allclose(I @ np.trapezoid(al, t, axis=0), np.cross(r, J), rtol=1e-8, atol=1e-14)  # Delta L = r x j
    a_amp, al_amp = acceleration_amplitudes(J[None], r[None], M, I, [tau])
    S = half_sine(t, 0.0, tau)
    assert np.allclose(a, S[:, None] * a_amp[0])
    # gamma = pi |j| / (2 tau): the peak force is gamma along j_hat
    assert np.linalg.norm(a_amp[0]) * M == pytest.approx(np.pi * np.linalg.norm(J) / (2 * tau))


@pytest.mark.parametrize("tau", [0.0, np.nan, -1e-5])
def test_bad_duration_raises(tau):
    with pytest.raises(InputError):
        acceleration_amplitudes(np.ones((1, 3)), np.zeros((1, 3)), 1.0, np.eye(3), [tau])


# ---- pulse weights of one contact (pulse.py: the half-sine projected on the pulse grid) ----------------------
def mitchell_netravali(u, B, C):
    """The Mitchell-Netravali cubic (B, C) as published (psi is B = 2/3, C = 1/6)."""
    u = np.abs(u)
    return np.where(u < 1, ((12 - 9 * B - 6 * C) * u**3 + (-18 + 12 * B + 6 * C) * u**2 + (6 - 2 * B)) / 6,
                    np.where(u < 2, ((-B - 6 * C) * u**3 + (6 * B + 30 * C) * u**2 + (-12 * B - 48 * C) * u
                                     + (8 * B + 24 * C)) / 6, 0.0))


def projected_weights_reference(r, k):
    """c_k = (1/h) int S(t) K((t - t0)/h - k) dt for h = 1, K = Mitchell-Netravali B = -2/3, C = 5/6 (pulse.py),
    by Gauss-Legendre on each grid interval."""
    x, wq = np.polynomial.legendre.leggauss(12)
    out = np.zeros(len(k))
    for m in range(int(np.ceil(r))):
        a, b = m, min(m + 1.0, r)
        s = 0.5 * (a + b) + 0.5 * (b - a) * x
        K = mitchell_netravali(s[None, :] - k[:, None], -2 / 3, 5 / 6)
        out += (0.5 * (b - a) * wq * np.sin(np.pi * s / r) * K).sum(-1)
    return out


@pytest.mark.parametrize("r", [0.3, 0.8, 1.0, 1.2, 2.0, 3.0, 10.0, 1e-3, 1.999, 37.4])
def test_contact_weights_keep_impulse_and_centre(r):
    """h sum_k c_k = 2 tau / pi (the half-sine's integral) and sum_k t_k c_k h = its first moment, for any tau/h,
    in particular tau < 2h where sampling keeps 0 % (tau <= h) to 79 % (tau = 2h) of the impulse."""
    h = 7.3264e-6
    k, c = contact_weights(r * h, h)
    assert k[0] == -1 and k[-1] == np.ceil(r * h / h) + 1                  # pulses whose support meets [0, tau]
    assert h * c.sum() == pytest.approx(2 * r * h / np.pi, rel=1e-12)
    assert (k * c).sum() / c.sum() == pytest.approx(r / 2, rel=1e-12, abs=1e-12)      # force centre t0 + tau/2
    assert np.allclose(c, projected_weights_reference(r, k.astype(float)), rtol=0, atol=1e-12 * np.abs(c).max())
    if r < 2:                                                    # the old sampling's fraction, for the record
        kk = np.arange(1, int(np.ceil(r)))
        assert np.sin(np.pi * kk / r).sum() / (2 * r / np.pi) <= 0.786


def test_projection_kernel_pieces():
    """pulse.py's piecewise form of K is the Mitchell-Netravali cubic B = -2/3, C = 5/6: a partition of unity
    reproducing linear functions with second moment -2/9 (psi's is +2/9)."""
    x = np.linspace(0, 1, 101)
    for j in range(-2, 2):
        assert np.allclose(np.polyval(KERNEL_PIECES[j + 2][::-1], x), mitchell_netravali(j + x, -2 / 3, 5 / 6),
                           atol=1e-14)
    u = np.random.default_rng(2).uniform(-5, 5, 200)
    k = np.arange(-9, 10)[:, None]
    K = mitchell_netravali(u[None, :] - k, -2 / 3, 5 / 6)
    assert np.allclose(K.sum(0), 1, atol=1e-14) and np.allclose((k * K).sum(0), u, atol=1e-13)
    assert np.allclose(((k - u) ** 2 * K).sum(0), -2 / 9, atol=1e-13)
    P = psi(u[None, :] - k, 1.0)
    assert np.allclose(((k - u) ** 2 * P).sum(0), 2 / 9, atol=1e-13)


@pytest.mark.parametrize("r", [5.0, 10.0, 20.0])
def test_contact_weights_reduce_to_sampling_for_long_contacts(r):
    """Away from the two ends the weights are the paper's samples S(t0 + k h) scaled by 1 + (pi h/tau)^2/9 (the
    pre-emphasis that cancels psi's smoothing) to O((h/tau)^4), so they tend to the samples as tau/h grows;
    the ends carry the impulse that sampling loses (pi/(6 tau/h) of a pulse, both ends together)."""
    k, c = contact_weights(r, 1.0)
    S = np.where((k > 0) & (k < r), np.sin(np.pi * k / r), 0.0)
    inner = (k >= 2) & (k <= r - 2)
    assert np.max(np.abs(c - S * (1 + (np.pi / r) ** 2 / 9))[inner]) < 50 / r**4
    assert np.max(np.abs(c - S)[inner]) < 1.2 / r**2                       # 1.1 % of the peak at 10 h
    assert np.max(np.abs(c - S)) < 0.5 / r                                 # end pulses: O(h/tau)
    assert c.sum() - S.sum() == pytest.approx(2 * r / np.pi - S.sum(), rel=1e-12)
