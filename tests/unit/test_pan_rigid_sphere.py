"""Exact rigid-sphere acceleration noise (granular.md sec. 2 and checks of sec. 7)."""
import numpy as np
import pytest
from scipy.special import spherical_jn, spherical_yn

from impactsound.transfer.rigid_sphere import (hertz_equal_spheres, sphere_pressure, sphere_pressure_compact,
                                               sphere_pressure_half_sine)

GLASS = dict(a=1e-3, rho_s=2520.0, E=72e9, nu=0.22)
AIR = dict(rho=1.2, c=343.0)


@pytest.mark.parametrize("v0, d_ref, am_ref, p_ref, sign", [
    (1e-5, 59.694e-6, 0.30835, 1.913e-7, +1),
    (1.142e-4, 36.677e-6, 5.7311, 5.5211e-6, -1),
    (1e-3, 23.765e-6, 77.454, 1.0996e-4, -1),
])
def test_table_6_1(v0, d_ref, am_ref, p_ref, sign):
    d, am = hertz_equal_spheres(v0, **GLASS)
    assert d == pytest.approx(d_ref, rel=1e-4)
    assert am == pytest.approx(am_ref, rel=1e-4)
    T = np.linspace(0, d + 40e-6, 40001)                                  # >= 200 samples per d
    p = sphere_pressure_half_sine(T, GLASS["a"], am, d, 0.15, 1.0, **AIR)
    k = np.argmax(np.abs(p))
    assert np.abs(p[k]) == pytest.approx(p_ref, rel=5e-3)
    assert np.sign(p[k]) == sign


def test_compact_limit_overestimates_positive_peak():
    # granular.md: at v0 = 1e-3, exact positive peak 1.037e-4 Pa, compact model 1.194e-4 Pa
    a = GLASS["a"]
    d, am = hertz_equal_spheres(1e-3, **GLASS)
    T = np.linspace(0, d + 40e-6, 40001)
    p = sphere_pressure_half_sine(T, a, am, d, 0.15, 1.0, **AIR)
    b = np.pi / d
    inside = T <= d
    pc = sphere_pressure_compact(T, am * np.sin(b * T) * inside, am * b * np.cos(b * T) * inside, a, 0.15, 1.0,
                                 **AIR)
    assert p.max() == pytest.approx(1.037e-4, rel=1e-3)
    assert pc.max() == pytest.approx(1.194e-4, rel=1e-3)


def test_compact_limit_long_pulse():
    # ka << 1: pulse 400 a/c long -> exact and compact agree (to O(a/(c d)))
    a, r, cos = 1e-3, 0.05, 0.6
    d = 400 * a / AIR["c"]
    T = np.linspace(0, 1.2 * d, 20001)
    b = np.pi / d
    inside = T <= d
    p = sphere_pressure_half_sine(T, a, 1.0, d, r, cos, **AIR)
    pc = sphere_pressure_compact(T, np.sin(b * T) * inside, b * np.cos(b * T) * inside, a, r, cos, **AIR)
    sel = (T > 20 * a / AIR["c"]) & (T < 0.98 * d)                       # away from the start transient and kink
    assert np.max(np.abs(p - pc)[sel]) < 1e-2 * np.max(np.abs(pc))


def test_continuity_at_start_and_end():
    a, r = 2e-3, 0.1
    d, am = hertz_equal_spheres(1e-2, a=a, rho_s=2520.0, E=72e9, nu=0.22)
    eps = 1e-16
    for T0 in (0.0, d):
        pl, pr = sphere_pressure_half_sine(np.array([T0 - eps, T0 + eps]), a, am, d, r, 0.8, **AIR)
        peak = np.abs(sphere_pressure_half_sine(np.linspace(0, 2 * d, 2001), a, am, d, r, 0.8, **AIR)).max()
        assert abs(pl - pr) < 1e-9 * peak
    assert sphere_pressure_half_sine(0.0, a, am, d, r, 0.8, **AIR) == 0.0


@pytest.mark.parametrize("r, cos", [(0.15, 1.0), (5e-3, 0.5)])
def test_general_filter_matches_closed_form(r, cos):
    a = 1e-3
    d, am = hertz_equal_spheres(1e-3, **GLASS)
    dt = d / 2000
    t = np.arange(int(3 * d / dt)) * dt
    A = am * np.sin(np.pi * t / d) * (t <= d)
    p = sphere_pressure(A, dt, a, r, cos, **AIR)
    ref = sphere_pressure_half_sine(t, a, am, d, r, cos, **AIR)
    assert np.max(np.abs(p - ref)) < 1e-5 * np.max(np.abs(ref))


def test_closed_form_vs_frequency_domain_oscillating_sphere():
    # granular.md sec. 7 check 2: p = i rho c U cos h1(kr)/h1'(ka), e^{-i w t}, delay e^{ik(r-a)} removed
    a, r, cos = 1e-3, 0.15, 1.0
    rho, c = AIR["rho"], AIR["c"]
    d, am = hertz_equal_spheres(1e-3, **GLASS)
    dt = d / 2000
    n = 2**18
    w = 2 * np.pi * np.fft.rfftfreq(n, dt)[1:]
    b = np.pi / d
    A = am * b * (1 + np.exp(1j * w * d)) / (b * b - w * w)
    U = A / (-1j * w)
    k = w / c

    def h1(x, der=False):
        return spherical_jn(1, x, derivative=der) + 1j * spherical_yn(1, x, derivative=der)

    P = 1j * rho * c * U * cos * h1(k * r) / h1(k * a, True) * np.exp(-1j * k * (r - a))
    P0 = rho * a**3 * cos * (2 * am / b) / (2 * r * r)                    # w -> 0 limit (P/A at s = 0)
    p = np.fft.irfft(np.conj(np.concatenate([[P0], P])), n) / dt
    t = np.arange(n) * dt
    ref = sphere_pressure_half_sine(t, a, am, d, r, cos, rho, c)
    sel = t < 4 * d
    assert np.max(np.abs(p - ref)[sel]) < 1e-4 * np.max(np.abs(ref))
