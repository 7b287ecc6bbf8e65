"""Grain noise at the output rate (sources/granular/synth.py; M. Marko, "Sound simulation of granular materials",
ch. 4, 5.3): the tabulated fast render against the per-collision reference (the exact closed form of pulse.py on a
fine grid, filtered with the same low-pass and decimated by scipy.signal.upfirdn), the convergence of its
tabulation, the pressure integral of the closed form (P/A at s = 0), the low-pass's documented response (numerical
Fourier transform), the Hertz contact against pulse.py, superposition, sample shifts, pair symmetry, v_min,
thread-count independence and refused input."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.granular import _synth_kernel as K
from impactsound.sources.granular.events import GranularEvents
from impactsound.sources.granular.pulse import hertz_contact
from impactsound.sources.granular.synth import (LOWPASS_HALF_WIDTH, grain_noise, grain_noise_reference, lowpass,
                                                pulse_table)

FS = 48000
GLASS = (72e9, 0.22, 2520.0)                 # the thesis' Table 6.1 glass (E, nu, rho)
STEEL = (2.0e11, 0.30, 7850.0)
MATS = {"glass": GLASS, "steel": STEEL}
LISTENERS = np.array([[0.1, 0.05, 0.12], [-0.2, 0.3, 0.0]])
RHO, C = 1.2041, 343.2


def _events(n, seed, *, radii=(1e-3,), materials=("glass",), T=0.04, v=(1e-4, 1.0), containers=0.0):
    """n random collisions: points in a 2 cm cube, random unit normals, v0 log-uniform in v, times in [0, T);
    a fraction ``containers`` of container hits (container 0, "cup")."""
    rng = np.random.default_rng(seed)
    nrm = rng.normal(size=(n, 3))
    nrm /= np.linalg.norm(nrm, axis=1)[:, None]
    kind = (rng.uniform(size=n) < containers).astype(np.int8)
    nm = len(materials)
    return GranularEvents.from_arrays(
        t=rng.uniform(0.0, T, n), point=rng.uniform(-0.01, 0.01, (n, 3)), normal=nrm,
        v0=np.exp(rng.uniform(math.log(v[0]), math.log(v[1]), n)), kind=kind, id_a=np.arange(n),
        id_b=np.where(kind == 0, np.arange(n) + n, 0), radius_a=rng.choice(radii, n),
        radius_b=np.where(kind == 0, rng.choice(radii, n), 0.0), material_a=rng.integers(0, nm, n),
        material_b=np.where(kind == 0, rng.integers(0, nm, n), -1), materials=list(materials),
        containers=["cup"] if containers else [])


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def random_set():
    """300 glass collisions (a = 1 mm, v0 1e-4..1 m/s) at two listeners, with the reference render."""
    ev = _events(300, 1)
    ns = int(0.05 * FS)
    return ev, ns, grain_noise_reference(ev, LISTENERS, FS, ns, materials=MATS)


def test_matches_the_reference(random_set):
    """Default tabulation vs the per-collision closed form: relative L2 error below 3e-4 (measured 2.0e-4; 3.4e-4
    without the centroid alignment of the duration nodes); the reference itself is converged (doubling its grid
    moves it by 2e-6), so the error is the tabulation's."""
    ev, ns, ref = random_set
    y = grain_noise(ev, LISTENERS, FS, ns, materials=MATS)
    assert np.abs(ref).max() > 1e-4                    # pulses at 0.1-0.4 m: mPa to tens of mPa
    assert _rel(y, ref) < 3e-4
    sub = ev.take(np.arange(40))
    r40 = grain_noise_reference(sub, LISTENERS, FS, ns, materials=MATS)
    r80 = grain_noise_reference(sub, LISTENERS, FS, ns, materials=MATS, points_per_pulse=80)
    assert _rel(r40, r80) < 2e-5


def test_tabulation_converges(random_set):
    """The error falls with the duration nodes per decade (linear interpolation in log d with centroid alignment:
    second order, about 4x per doubling; measured 2.3e-3, 5.6e-4, 1.5e-4 at 4, 8, 16 per decade, 3.7e-3 at 8
    without the alignment) and with the table's points per output sample (linear in time: second order; 3.3e-3,
    7.9e-4, 1.9e-4 at 16, 32, 64)."""
    ev, ns, ref = random_set
    e_bins = [_rel(grain_noise(ev, LISTENERS, FS, ns, materials=MATS, bins_per_decade=b, oversample=128), ref)
              for b in (4, 8, 16)]
    assert e_bins[0] > 3 * e_bins[1] > 9 * e_bins[2] and e_bins[1] < 1e-3
    e_os = [_rel(grain_noise(ev, LISTENERS, FS, ns, materials=MATS, bins_per_decade=128, oversample=u), ref)
            for u in (16, 32, 64)]
    assert e_os[0] > 3 * e_os[1] > 9 * e_os[2]


def test_radii_materials_and_container_hits():
    """Two radii, two materials and container hits (the grain's own pulse, a wall of ceramic) against the
    reference, with one exact table per radius and with the radii read from the log grid (max_radii=0)."""
    ev = _events(150, 2, radii=(0.5e-3, 2e-3), materials=("glass", "steel"), containers=0.3)
    ns = int(0.05 * FS)
    kw = dict(materials=MATS, include_container_hits=True, container_materials={"cup": "ceramic"})
    ref = grain_noise_reference(ev, LISTENERS, FS, ns, **kw)
    assert _rel(grain_noise(ev, LISTENERS, FS, ns, **kw), ref) < 3e-4              # measured 2.2e-4
    # log grid of radii: measured 4.1e-3, 7.1e-4, 4.1e-4 at 8, 16, 32 nodes per decade
    e_r = [_rel(grain_noise(ev, LISTENERS, FS, ns, max_radii=0, radius_bins_per_decade=r, **kw), ref)
           for r in (8, 32)]
    assert e_r[0] > 5 * e_r[1] and e_r[1] < 6e-4
    # off by default: the container hits add nothing
    hits = ev.take(np.flatnonzero(ev.kind == 1))
    assert not grain_noise(hits, LISTENERS, FS, ns, materials=MATS).any()
    assert np.abs(grain_noise(hits, LISTENERS, FS, ns, **kw)).max() > 0


def test_impulse_scaling_matches_the_reference():
    ev = _events(60, 3)
    ns = int(0.05 * FS)
    ref = grain_noise_reference(ev, LISTENERS, FS, ns, materials=MATS, scaling="impulse")
    assert _rel(grain_noise(ev, LISTENERS, FS, ns, materials=MATS, scaling="impulse"), ref) < 3e-4
    # equal grains: the same pulses, Int A dt / v0 = 1.1718 times quieter (pulse.py's hertz_contact)
    c = hertz_contact(1e-3, 1e-3, 1e-3, GLASS[2], GLASS[2], GLASS[0], GLASS[1], GLASS[0], GLASS[1])
    ratio = 2 * c.a_m[0] * c.d / math.pi / 1e-3
    assert ratio == pytest.approx(1.1718, rel=1e-4)
    peak = grain_noise(ev, LISTENERS, FS, ns, materials=MATS)
    assert _rel(ratio * grain_noise(ev, LISTENERS, FS, ns, materials=MATS, scaling="impulse"), peak) < 1e-12


def test_pressure_integral():
    """sum(y)/fs = the closed form's pressure integral rho a^3 cos(theta) Int A dt / (2 r^2) per sphere (P/A at
    s = 0), Int A dt = 2 a_m d / pi from pulse.py's hertz_contact: the low-pass has unit DC gain and its images at
    multiples of fs are 80 dB down. Unequal grains (pair: P_A - P_B), and a container hit (grain A alone)."""
    x, n = np.array([0.003, -0.002, 0.001]), np.array([0.36, 0.48, 0.8])
    L = np.array([[0.05, 0.02, 0.04], [-0.03, 0.01, -0.06]])
    ra, rb, v0 = 1e-3, 2e-3, 3e-3
    ev = GranularEvents.from_arrays(t=[0.01], point=[x], normal=[n], v0=[v0], kind=0, id_a=[0], id_b=[1],
                                    radius_a=ra, radius_b=rb, material_a=0, material_b=1, materials=["glass", "steel"])
    con = hertz_contact(v0, ra, rb, GLASS[2], STEEL[2], GLASS[0], GLASS[1], STEEL[0], STEEL[1])
    y = grain_noise(ev, L, FS, 2000, materials=MATS)
    for l in range(2):
        want = 0.0
        for sgn, a, am in ((1, ra, con.a_m[0]), (-1, rb, con.a_m[1])):
            v = L[l] - (x + sgn * a * n)
            r = np.linalg.norm(v)
            want += sgn * RHO * a**3 * (n @ v / r) * (2 * am * con.d / math.pi) / (2 * r**2)
        assert y[l].sum() / FS == pytest.approx(want, rel=2e-4)
    wall = GranularEvents.from_arrays(t=[0.01], point=[x], normal=[n], v0=[v0], kind=1, id_a=[0], id_b=[0],
                                      radius_a=ra, material_a=0, materials=["glass"], containers=["cup"])
    # heavy flat wall of steel: Hertz with m_eff = m, r_eff = a, i.e. tau = 2.87 (m^2/(a E*^2 v0))^(1/5)
    m = 4 / 3 * math.pi * ra**3 * GLASS[2]
    E_star = 1 / ((1 - GLASS[1] ** 2) / GLASS[0] + (1 - STEEL[1] ** 2) / STEEL[0])
    tau = 2.87 * (m**2 / (ra * E_star**2 * v0)) ** 0.2
    F = 4 / 3 * E_star * math.sqrt(ra) * (5 * m * v0**2 / (4 * 4 / 3 * E_star * math.sqrt(ra))) ** 0.6
    y = grain_noise(wall, L, FS, 2000, materials=MATS, include_container_hits=True,
                    container_materials={"cup": STEEL})
    for l in range(2):
        v = L[l] - (x + ra * n)
        r = np.linalg.norm(v)
        want = RHO * ra**3 * (n @ v / r) * (2 * F / m * tau / math.pi) / (2 * r**2)
        assert y[l].sum() / FS == pytest.approx(want, rel=2e-4)


def test_lowpass_response():
    """The documented low-pass, by numerical Fourier transform of h: unit integral, flat to 1.2e-4 below 0.4 fs,
    80 dB down from 0.5 fs up (up to 3 fs), zero beyond 26 samples."""
    t = np.linspace(-(LOWPASS_HALF_WIDTH + 1) / FS, (LOWPASS_HALF_WIDTH + 1) / FS, 20001)
    h = lowpass(t, FS)
    assert np.trapezoid(h, t) == pytest.approx(1.0, abs=1e-7)        # the window's edge steps: ~1e-8
    assert not h[np.abs(t) > LOWPASS_HALF_WIDTH / FS].any()
    f = np.linspace(0, 3 * FS, 601)
    H = np.abs(np.trapezoid(h[None, :] * np.cos(2 * np.pi * f[:, None] * t[None, :]), t, axis=1))   # h is even
    assert np.abs(H[f <= 0.4 * FS] - 1).max() < 1.2e-4
    assert 20 * np.log10(H[f >= 0.5 * FS].max()) < -80


def test_pulse_table_against_direct_convolution():
    """A table node against the convolution h * W evaluated directly (fine trapezoid on 200,000 points of
    pulse.py's W1, W2 and the exact h) at table nodes across the pulse: within 1e-5 of its peak."""
    from impactsound.sources.granular.pulse import pulse_terms
    a, d = 1e-3, 2.3e-5
    tb = pulse_table(a, d, float(FS), C, 64)
    s = np.linspace(0, d + 30 * a / C, 200001)
    W1, W2 = pulse_terms(s, a, d, C)
    tau = tb.tau0 + np.array([450, 1541, 1700, 1728, 1745, 1790, 2001, 2500]) / (64 * FS)   # -20 .. +12 samples
    hm = lowpass(tau[:, None] - s[None, :], FS)
    g1 = np.trapezoid(hm * W1, s, axis=1) * math.pi / (2 * d) / a**2
    g2 = np.trapezoid(hm * W2, s, axis=1) * math.pi / (2 * d) / a
    G1, G2 = tb(tau)
    assert np.abs(G1 - g1).max() < 1e-5 * np.abs(g1).max()
    assert np.abs(G2 - g2).max() < 1e-5 * np.abs(g2).max()


def test_contact_kernel_matches_pulse_py():
    """The compiled Hertz contact against pulse.py's hertz_contact, both scalings, unequal radii and materials."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        v0, ra, rb = 10 ** rng.uniform(-5, 1), 10 ** rng.uniform(-4, -2), 10 ** rng.uniform(-4, -2)
        for impulse in (False, True):
            c = hertz_contact(v0, ra, rb, GLASS[2], STEEL[2], GLASS[0], GLASS[1], STEEL[0], STEEL[1],
                              scaling="impulse" if impulse else "peak")
            d, ia, ib = K.contact(v0, ra, rb, GLASS[2], STEEL[2], GLASS[0], GLASS[1], STEEL[0], STEEL[1], False,
                                  impulse)
            assert d == pytest.approx(c.d, rel=1e-12)
            # the node scan's duration is the render's, to the bit (the nodes read are the nodes built)
            assert K.duration(v0, ra, rb, GLASS[2], STEEL[2], GLASS[0], GLASS[1], STEEL[0], STEEL[1], False) == d
            assert ia == pytest.approx(2 * c.a_m[0] * c.d / math.pi, rel=1e-12)
            assert ib == pytest.approx(2 * c.a_m[1] * c.d / math.pi, rel=1e-12)


def test_superposition_and_whole_sample_shift():
    """Two tables rendered together = rendered apart (to rounding); at fs = 32768 Hz with collision times on the
    sample grid, moving every collision by k samples moves the output by exactly k samples (bitwise)."""
    a, b = _events(40, 5), _events(30, 6)
    both = GranularEvents.from_arrays(**{k: np.concatenate([getattr(a, k), getattr(b, k)]) for k in a.columns()},
                                      materials=a.materials)
    ns = int(0.05 * FS)
    ya, yb, yab = (grain_noise(e, LISTENERS, FS, ns, materials=MATS) for e in (a, b, both))
    assert np.abs(yab - ya - yb).max() < 1e-12 * np.abs(yab).max()
    # rows out of time order (a table built without sorting) render the same
    shuffled = both.take(np.random.default_rng(15).permutation(len(both)))
    assert np.abs(grain_noise(shuffled, LISTENERS, FS, ns, materials=MATS) - yab).max() < 1e-12 * np.abs(yab).max()
    fs, k = 32768, 123
    ev = _events(50, 7)
    ev = dataclasses.replace(ev, t=np.sort(np.random.default_rng(8).integers(0, 1000, 50)) / fs)
    y0 = grain_noise(ev, LISTENERS, fs, 3000, materials=MATS)
    y1 = grain_noise(dataclasses.replace(ev, t=ev.t + k / fs), LISTENERS, fs, 3000, materials=MATS)
    assert np.abs(y0).max() > 0 and np.array_equal(y1[:, k:], y0[:, :-k]) and not y1[:, :k - 40].any()


def test_pair_label_swap():
    """Swapping grains A and B (radii, materials) and negating n gives the same samples."""
    ev = _events(60, 9, radii=(0.7e-3, 1.5e-3), materials=("glass", "steel"))
    sw = dataclasses.replace(ev, normal=-ev.normal, radius_a=ev.radius_b, radius_b=ev.radius_a,
                             material_a=ev.material_b, material_b=ev.material_a)
    ns = int(0.05 * FS)
    y, ys = (grain_noise(e, LISTENERS, FS, ns, materials=MATS) for e in (ev, sw))
    assert np.abs(y).max() > 0 and np.abs(ys - y).max() < 1e-12 * np.abs(y).max()


def test_v_min_drops_slow_collisions():
    ev = _events(80, 10, v=(1e-5, 1.0))
    ns = int(0.05 * FS)
    slow = ev.v0 < 1e-4
    assert 5 < slow.sum() < 75
    y = grain_noise(ev, LISTENERS, FS, ns, materials=MATS)
    assert np.array_equal(y, grain_noise(ev.take(np.flatnonzero(~slow)), LISTENERS, FS, ns, materials=MATS))
    y0 = grain_noise(ev, LISTENERS, FS, ns, materials=MATS, v_min=0.0)
    ys = grain_noise(ev.take(np.flatnonzero(slow)), LISTENERS, FS, ns, materials=MATS, v_min=0.0)
    assert np.abs(ys).max() > 0 and np.abs(y0 - y - ys).max() < 1e-12 * np.abs(y0).max()
    assert not grain_noise(ev, LISTENERS, FS, ns, materials=MATS, v_min=10.0).any()


def test_bitwise_identical_for_any_thread_count():
    """1 and 2 threads; and 6 listeners (two listener groups) give each listener what it gets alone."""
    ev = _events(5000, 11, T=0.5)                      # 3 chunks
    ns = int(0.52 * FS)
    y1 = grain_noise(ev, LISTENERS, FS, ns, materials=MATS, n_threads=1)
    y2 = grain_noise(ev, LISTENERS, FS, ns, materials=MATS, n_threads=2)
    assert np.abs(y1).max() > 0 and np.array_equal(y1, y2)
    six = np.random.default_rng(14).uniform(-0.3, 0.3, (6, 3)) + [0, 0, 0.4]
    y6 = grain_noise(ev, six, FS, ns, materials=MATS, n_threads=2)
    assert all(np.array_equal(y6[l], grain_noise(ev, six[l:l + 1], FS, ns, materials=MATS)[0]) for l in (0, 5))


def test_bad_input_is_refused():
    ev = _events(10, 12)
    ns = 1000
    with pytest.raises(InputError, match="inside a grain"):
        grain_noise(ev, [ev.point[3] + 0.5e-3 * ev.normal[3]], FS, ns, materials=MATS)
    inside = np.r_[LISTENERS, LISTENERS, [ev.point[3] + 0.5e-3 * ev.normal[3]]]
    with pytest.raises(InputError, match="listener 4 .* inside a grain of event row 3"):
        grain_noise(ev, inside, FS, ns, materials=MATS)
    with pytest.raises(InputError, match="inside a grain"):
        grain_noise_reference(ev, [ev.point[3] + 0.5e-3 * ev.normal[3]], FS, ns, materials=MATS)
    with pytest.raises(InputError, match=r"shape \(L, 3\)"):
        grain_noise(ev, [[0.0, 0.1]], FS, ns, materials=MATS)
    with pytest.raises(InputError, match="NaN"):
        grain_noise(ev, [[0.0, np.nan, 0.1]], FS, ns, materials=MATS)
    with pytest.raises(InputError, match="sample_rate"):
        grain_noise(ev, LISTENERS, 0, ns, materials=MATS)
    with pytest.raises(InputError, match="n_samples"):
        grain_noise(ev, LISTENERS, FS, -1, materials=MATS)
    with pytest.raises(InputError, match="scaling"):
        grain_noise(ev, LISTENERS, FS, ns, materials=MATS, scaling="loud")
    with pytest.raises(InputError, match="no entry for 'glass'"):
        grain_noise(ev, LISTENERS, FS, ns, materials={"steel": STEEL})
    with pytest.raises(InputError, match="unknown material"):
        grain_noise(dataclasses.replace(ev, materials=("unobtainium",)), LISTENERS, FS, ns)
    with pytest.raises(InputError, match="n_threads"):
        grain_noise(ev, LISTENERS, FS, ns, materials=MATS, n_threads=0)
    bad = ev.normal.copy()
    bad[4] *= 2
    with pytest.raises(InputError, match=r"row 4 .*'normal'"):
        grain_noise(dataclasses.replace(ev, normal=bad), LISTENERS, FS, ns, materials=MATS)
    v0 = ev.v0.copy()
    v0[2] = np.nan
    with pytest.raises(InputError, match=r"row 2 .*'v0'"):
        grain_noise(dataclasses.replace(ev, v0=v0), LISTENERS, FS, ns, materials=MATS)
    hits = _events(10, 13, containers=1.0)
    with pytest.raises(InputError, match="container_materials"):
        grain_noise(hits, LISTENERS, FS, ns, materials=MATS, include_container_hits=True)
    with pytest.raises(InputError, match="contact duration"):           # E = 1 Pa: a 'grain' of jelly
        grain_noise(ev, LISTENERS, FS, ns, materials={"glass": (1.0, 0.2, 2500.0)})
