"""One grain collision's acceleration noise (sources/granular/pulse.py; M. Marko, "Sound simulation of granular
materials", ch. 4, 5.3, Table 6.1): the closed form against an ODE integration of the rigid-sphere dipole, the
thesis' table, impulse and pressure-integral identities, pair symmetries, and the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from impactsound.errors import InputError
from impactsound.sources.granular.pulse import hertz_contact, pair_pressure, pulse_terms, sphere_pressure

GLASS = dict(rho_a=2520.0, rho_b=2520.0, E_a=72e9, nu_a=0.22, E_b=72e9, nu_b=0.22)   # the thesis' Table 6.1 glass
A = 1e-3
RHO, C = 1.2, 343.0


def _contact(v0, a=A):
    return hertz_contact(v0, a, a, **GLASS)


@pytest.mark.parametrize("v0,peak,d,a_m,sign", [(1e-5, 1.913e-7, 59.694e-6, 0.30835, 1),
                                                (1.142e-4, 5.5211e-6, 36.677e-6, 5.7311, -1),
                                                (1e-3, 1.0996e-4, 23.765e-6, 77.454, -1)])
def test_table_6_1(v0, peak, d, a_m, sign):
    """The thesis' Table 6.1 (glass, a = 1 mm, r = 0.15 m, theta = 0, air 1.2 / 343): peak within 0.5 %, with its
    sign (the leading compression at low speed, the trailing rarefaction above); d and a_m to the table's digits."""
    c = _contact(v0)
    assert c.d == pytest.approx(d, rel=2e-5) and c.a_m[0] == pytest.approx(a_m, rel=2e-5)
    t = np.linspace(0.0, 0.15 / C + 3 * c.d, 300000)                    # > 200 samples per d
    p = sphere_pressure(t, A, c.a_m[0], c.d, 0.15, 1.0, rho=RHO, c=C)
    k = int(np.argmax(np.abs(p)))
    assert abs(p[k]) == pytest.approx(peak, rel=5e-3) and np.sign(p[k]) == sign


#: the thesis' Table 6.1 in full: (v0 [m/s], max |p| [Pa] as printed); v0 = linspace(1e-5, 1e-3, 20) printed to 4-5
#: digits
TABLE_6_1 = [("1e-5", "1.913e-7"), ("6.2105e-5", "2.3763e-6"), ("0.0001142", "5.5211e-6"), ("0.0001663", "9.24631e-6"),
             ("0.0002184", "1.33821e-5"), ("0.0002705", "1.81913e-5"), ("0.0003226", "2.32380e-5"),
             ("0.0003747", "2.84454e-5"), ("0.0004268", "3.36448e-5"), ("0.0004789", "3.99788e-5"),
             ("0.0005311", "4.58131e-5"), ("0.0005832", "5.23089e-5"), ("0.0006353", "5.84084e-5"),
             ("0.0006874", "6.58677e-5"), ("0.0007395", "7.14722e-5"), ("0.0007916", "7.93963e-5"),
             ("0.0008437", "8.72381e-5"), ("0.0008958", "9.34642e-5"), ("0.0009479", "0.00010"),
             ("0.001", "0.000109960")]


def _half_unit(printed: str) -> float:
    """Half a unit of the last printed digit, relative to the value ("0.00010": 5e-6 / 1e-4 = 5 %)."""
    mant = printed.lower().split("e")[0]
    digits = mant.split(".")[1] if "." in mant else ""
    exp = int(printed.lower().split("e")[1]) if "e" in printed.lower() else 0
    return 0.5 * 10.0 ** (exp - len(digits)) / float(printed)


@pytest.mark.parametrize("v0_text, peak_text", TABLE_6_1, ids=[r[0] for r in TABLE_6_1])
def test_table_6_1_every_row(v0_text, peak_text):
    """Every row of Table 6.1, with the package's air (1.2041 kg/m^3, 343.2 m/s). Explaining the scatter: our peak
    (the continuous closed form, checked against an ODE integration to 1e-8 below) is never below the table by
    more than its printed digits, and above it by 0.04-1.9 % (2.4 % on the row printed to two digits) with no
    trend in v0: one-sided, as a maximum read off a sampled waveform is (it can only miss the peak, never
    exceed it). So the test is one-sided: at least the table less half its last printed digit, at most 2 % (the
    largest such sampling loss measured over the 20 rows, 1.9 %) plus that half digit."""
    v0, printed = float(v0_text), float(peak_text)
    c = _contact(v0)
    t = np.linspace(0.0, 0.15 / 343.2 + 3 * c.d, 300000)                # > 200 samples per d
    p = np.abs(sphere_pressure(t, A, c.a_m[0], c.d, 0.15, 1.0)).max()    # default air
    half = _half_unit(peak_text)
    assert p >= printed * (1.0 - half), (p / printed - 1.0)
    assert p <= printed * (1.0 + 0.02 + half), (p / printed - 1.0)


def _ode_pressure(T, a, a_m, d, r, cos_t):
    """F'' + 2 l F' + 2 l^2 F = -c^2 a U(t) (U = velocity), p = -rho cos(theta) [F''/(c r) + F'/r^2], integrated
    with DOP853 (rtol 1e-12) in two pieces split at the end of the pulse."""
    l, b = C / a, math.pi / d

    def U(t):
        return a_m / b * (1.0 - math.cos(b * min(t, d)))

    def rhs(t, y):
        return [y[1], -C * C * a * U(t) - 2 * l * y[1] - 2 * l * l * y[0]]

    # absolute tolerances scaled to the steady state F_ss = -c^2 a U(d) / (2 l^2) (F' decays to zero after the
    # pulse: a fixed tiny atol would make the steps vanish with it)
    F_ss = C * C * a * U(d) / (2 * l * l)
    atol = [1e-15 * F_ss, 1e-15 * F_ss * l]
    s1 = solve_ivp(rhs, (0.0, d), [0.0, 0.0], method="DOP853", rtol=1e-12, atol=atol, dense_output=True)
    s2 = solve_ivp(rhs, (d, T.max() + 1e-12), s1.y[:, -1], method="DOP853", rtol=1e-12, atol=atol,
                   dense_output=True)
    y = np.where(T <= d, s1.sol(np.clip(T, 0, d)), s2.sol(np.clip(T, d, None)))
    Fpp = np.array([rhs(t, yy)[1] for t, yy in zip(T, y.T)])
    return -RHO * cos_t * (Fpp / (C * r) + y[1] / r**2)


@pytest.mark.parametrize("v0", [1e-5, 1e-3, 1.0])
@pytest.mark.parametrize("r_over_a,theta", [(150.0, 0.0), (5.0, 60.0)])
def test_closed_form_matches_the_ode(v0, r_over_a, theta):
    """Within 1e-8 of the peak (the ODE is integrated independently of the closed form's algebra)."""
    c = _contact(v0)
    r, ct = r_over_a * A, math.cos(math.radians(theta))
    T = np.linspace(0.0, c.d + 20 * A / C, 800)
    p = sphere_pressure(T + (r - A) / C, A, c.a_m[0], c.d, r, ct, rho=RHO, c=C)
    q = _ode_pressure(T, A, c.a_m[0], c.d, r, ct)
    assert np.abs(p - q).max() < 1e-8 * np.abs(q).max()


def test_impulse_and_pressure_integral():
    """Integral of A = 2 a_m d / pi = 1.1718 v0 for equal grains at any speed, size and material (peak scaling);
    the pressure integral over pulse and decay = rho0 a^3 cos(theta) Integral A / (2 r^2) (P/A at s = 0)."""
    for v0, a, mat in ((1e-4, 1e-3, GLASS), (0.3, 4e-3, GLASS),
                       (1e-2, 2e-3, dict(rho_a=7850, rho_b=7850, E_a=2e11, nu_a=0.3, E_b=2e11, nu_b=0.3))):
        c = hertz_contact(v0, a, a, **mat)
        assert 2 * c.a_m[0] * c.d / math.pi / v0 == pytest.approx(1.1718, rel=2e-4)
    c = _contact(1e-3)
    r, ct = 0.05, 0.6
    t = np.linspace(0.0, (r - A) / C + c.d + 60 * A / C, 400001)
    p = sphere_pressure(t, A, c.a_m[0], c.d, r, ct, rho=RHO, c=C)
    want = RHO * A**3 * ct * (2 * c.a_m[0] * c.d / math.pi) / (2 * r**2)
    assert np.trapezoid(p, t) == pytest.approx(want, rel=1e-4)
    imp = hertz_contact(1e-3, A, A, scaling="impulse", **GLASS)
    assert imp.a_m[0] / c.a_m[0] == pytest.approx(1 / 1.1718, rel=2e-4)       # 0.853 x quieter


def test_pair_symmetries():
    """Swapping the grains' labels and negating n leaves the pair's pressure unchanged; on the plane through the
    contact normal to n (equal radii) the two grains' terms add: p = 2 P(r, cos(theta) = -a/r)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=3) * 0.01
    n = rng.normal(size=3)
    n /= np.linalg.norm(n)
    cab = hertz_contact(2e-3, 1e-3, 2e-3, **GLASS)
    cba = hertz_contact(2e-3, 2e-3, 1e-3, **GLASS)
    L = np.array([0.1, -0.2, 0.15])
    t = np.linspace(0.0, 2e-3, 20001)
    p1 = pair_pressure(t, x, n, 1e-3, 2e-3, cab, L)
    p2 = pair_pressure(t, x, -n, 2e-3, 1e-3, cba, L)
    assert np.abs(p1).max() > 0 and np.allclose(p1, p2, rtol=0, atol=1e-12 * np.abs(p1).max())
    c = _contact(1e-3)
    u = np.cross(n, [1.0, 0.0, 0.0])
    u /= np.linalg.norm(u)
    Lp = x + 0.1 * u                                                   # in the plane, 0.1 m from the contact
    r = math.hypot(0.1, A)
    pp = pair_pressure(t, x, n, A, A, c, Lp, rho=RHO, c=C)
    assert np.allclose(pp, 2 * sphere_pressure(t, A, c.a_m[0], c.d, r, -A / r, rho=RHO, c=C), rtol=0,
                       atol=1e-10 * np.abs(pp).max())


def test_terms_are_continuous_and_causal():
    """Zero before the pulse and at its start; no jump at T = d: W changes across d -+ eps by no more than its
    largest rate of change allows (|J'| <= 1 + sqrt(2) l |J| near d, where sin(b T) vanishes), for eps down to
    1e-13 s, so a jump of any size would show."""
    c = _contact(1e-3)
    l = C / A
    W1, W2 = pulse_terms(np.array([-1e-6, 0.0]), A, c.d, C)
    assert W1[0] == W2[0] == 0 and abs(W1[1]) < 1e-20
    for eps in (1e-9, 1e-11, 1e-13):
        W1, W2 = pulse_terms(np.array([c.d - eps, c.d, c.d + eps]), A, c.d, C)
        for W in (W1, W2):
            bound = 2 * eps * (1.0 + 2.0 * l * np.abs(W).max()) + 1e-15 * np.abs(W).max()
            assert abs(W[2] - W[0]) <= bound


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="v0"):
        _contact(-1.0)
    with pytest.raises(InputError, match="nu_a"):
        hertz_contact(1e-3, A, A, 2520, 2520, 72e9, 0.6, 72e9, 0.22)
    with pytest.raises(InputError, match="inside the grain"):
        sphere_pressure([0.0], A, 1.0, 1e-5, 0.5 * A, 1.0)
    with pytest.raises(InputError, match="scaling"):
        hertz_contact(1e-3, A, A, scaling="loud", **GLASS)


def test_cli_pulse_json(tmp_path):
    from click.testing import CliRunner

    from impactsound.cli_granular import granular
    res = CliRunner().invoke(granular, ["pulse", "--radius", "1e-3", "--v0", "1e-3", "--E", "72e9", "--nu", "0.22",
                                        "--rho", "2520", "--json", "--png", str(tmp_path / "p.png")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[0])
    # the default air is 1.2041 / 343.2: the spec's ratio to the table there is 1.0020
    assert out["peak_pa"] == pytest.approx(-1.0996e-4 * 1.0020, rel=2e-3)
    assert out["duration_s"] == pytest.approx(23.765e-6, rel=1e-4) and (tmp_path / "p.png").is_file()
    res = CliRunner().invoke(granular, ["pulse", "--radius", "1e-3", "--v0", "1e-3", "--material", "glass",
                                        "--E", "1e9"])
    assert isinstance(res.exception, InputError) and "not both" in str(res.exception)


@pytest.mark.parametrize("r_over_a,theta", [(150.0, 0.0), (5.0, 60.0)])
def test_closed_form_matches_the_oscillating_sphere(r_over_a, theta):
    """The frequency-domain exact solution of a rigid sphere oscillating along e (e^{-i w t}):
    p = i rho0 c U cos(theta) h1(kr) / h1'(ka), with the half-sine's spectrum A(w) = a_m b (1 + e^{i w d}) /
    (b^2 - w^2), U = A / (-i w), the propagation delay e^{ik(r-a)} removed, inverted by FFT (2000 samples per d,
    2^22 points): within 1e-5 of the peak. Independent of the time-domain algebra (Bessel functions only)."""
    from scipy.special import spherical_jn, spherical_yn
    c = _contact(1e-3)
    r, ct = r_over_a * A, math.cos(math.radians(theta))
    d, am = c.d, c.a_m[0]
    b = math.pi / d
    N, dt = 2**22, d / 2000.0
    w = 2 * np.pi * np.fft.rfftfreq(N, dt)
    k = w / C
    with np.errstate(divide="ignore", invalid="ignore"):
        Aw = am * b * (1.0 + np.exp(1j * w * d)) / (b * b - w * w)
        h1 = lambda n, x, der=False: spherical_jn(n, x, der) + 1j * spherical_yn(n, x, der)   # noqa: E731
        ratio = h1(1, k * r) / h1(1, k * A, True) * np.exp(-1j * k * (r - A))
        P = 1j * RHO * C * (Aw / (-1j * w)) * ct * ratio
    P[0] = RHO * A**3 * ct * (2 * am * d / math.pi) / (2 * r * r)        # the w -> 0 limit: P/A at s = 0
    # p(t_n) = (1/2pi) Int P(w) e^{-i w t} dw: with e^{-i w t} the inverse is the conjugate of numpy's irfft
    p_ref = np.fft.irfft(np.conj(P), N) / dt
    T = np.arange(N) * dt
    sl = slice(0, int(3 * d / dt))
    p = sphere_pressure(T[sl] + (r - A) / C, A, am, d, r, ct, rho=RHO, c=C)
    assert np.abs(p - p_ref[sl]).max() < 1e-5 * np.abs(p).max()


def test_compact_limit_overestimates_the_positive_peak():
    """The compact dipole p ~ rho0 a^3 cos(theta) / (2 r) [A'(T)/c + A(T)/r] is 15 % above the exact positive peak
    at v0 = 1e-3 m/s (1.194e-4 vs 1.037e-4 Pa; glass, a = 1 mm, r = 0.15 m, theta = 0, air 1.2 / 343)."""
    c = _contact(1e-3)
    d, am, b, r = c.d, c.a_m[0], math.pi / c.d, 0.15
    T = np.linspace(0.0, 3 * d, 300001)
    inside = T <= d
    comp = RHO * A**3 / (2 * r) * np.where(inside, am * b * np.cos(b * T) / C + am * np.sin(b * T) / r, 0.0)
    exact = sphere_pressure(T + (r - A) / C, A, am, d, r, 1.0, rho=RHO, c=C)
    assert comp.max() == pytest.approx(1.194e-4, rel=5e-3) and exact.max() == pytest.approx(1.037e-4, rel=5e-3)
    assert comp.max() / exact.max() == pytest.approx(1.15, abs=0.01)
