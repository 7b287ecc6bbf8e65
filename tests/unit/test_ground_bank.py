"""The ground's sound in the frequency domain and its response bank: the Lamb impulse spectrum against the closed-form
regularized response, the ring-by-ring Rayleigh integral against the time-domain Rayleigh integral of the closed-form
surface motion (on and off axis), and the bank's interpolation error against direct evaluation, with its convergence
as the node spacing halves."""
import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.ground import bank as B
from impactsound.sources.ground.impact import HalfSpace, rayleigh_off_axis, rayleigh_on_axis, surface_motion
from impactsound.sources.ground.lamb import regularized_response
from impactsound.sources.ground.spectrum import impulse_spectrum, ring_spectrum

WOOD = HalfSpace(11e9, 0.25, 750.0)
CA, RHOA = 343.0, 1.2041


@pytest.mark.parametrize("nu", [0.1, 0.25, 0.3, 0.45])
def test_impulse_spectrum_inverts_to_the_closed_form_response(nu):
    """Re U'(tau + i e) = 2 Re int_0^inf V(x) exp(-2 pi x e) exp(2 pi i x tau) dx: the tabulated spectrum against the
    closed-form Lorentzian-regularized Lamb velocity (independently checked against brute-force convolution)."""
    e = 0.05
    x = np.arange(0, 70, 0.002)
    V = impulse_spectrum(x, nu)
    assert abs(V[0] - 1) < 1e-12                                  # the static response
    tau = np.array([-0.5, 0.3, 0.6, 0.9, 1.05, 1.1, 1.5, 3.0])
    w = np.full(len(x), 0.002)
    w[0] *= 0.5
    rec = 2 * np.real((V * np.exp(-2 * np.pi * x * e))[None, :] * np.exp(2j * np.pi * x[None, :] * tau[:, None]) @ w)
    ref = regularized_response(tau, e, nu, 1)
    assert np.max(np.abs(rec - ref)) < 1e-7 * max(1.0, np.abs(ref).max())


def _freq_wave(t, h, offset, eps, f_max, T, **kw):
    """Pressure at times t from the ring spectrum with a Lorentzian force of width eps (J = 1), by a direct
    inverse Fourier sum."""
    f = np.arange(0, f_max, 1 / T)
    near, far = ring_spectrum(f, WOOD, h, offset, c_a=CA, rho_a=RHOA, **kw)
    P = (near + far) * np.exp(-2 * np.pi * f * eps)
    w = np.full(len(f), 2 / T)
    w[0] = 1 / T
    return np.real(np.exp(2j * np.pi * t[:, None] * f[None, :]) @ (P * w))


def test_ring_spectrum_matches_the_time_domain_rayleigh_integral_on_axis():
    """Lorentzian force (eps = 100 us) on wood, listener 0.3 m above: the ring-by-ring spectrum inverted at 120 times
    around the arrival equals the time-domain Rayleigh integral of the closed-form surface acceleration."""
    h, eps = 0.3, 1e-4
    t = h / CA + np.arange(-60, 60) / 96000.0
    p_f = _freq_wave(t, h, 0.0, eps, 30000.0, 0.04, r_max=3.0)
    p_t = rayleigh_on_axis(lambda r, tt: surface_motion(r, tt, 1.0, eps, WOOD, kernel="lorentzian"), h, t,
                           r_max=4.0, r_scale=WOOD.c_s * eps, c_a=CA, rho_a=RHOA)
    assert np.linalg.norm(p_f - p_t) < 1e-4 * np.linalg.norm(p_t)


@pytest.mark.slow
def test_ring_spectrum_matches_the_time_domain_rayleigh_integral_off_axis():
    """Listener 0.3 m high and 0.6 m off the impact (where the floor's Rayleigh wave leaks sound ahead of the direct
    arrival), eps = 150 us: the two integrals agree to 1e-4 (measured 2e-5)."""
    h, off, eps = 0.3, 0.6, 1.5e-4
    t = math.hypot(h, off) / CA + np.arange(-60, 60) / 192000.0
    p_f = _freq_wave(t, h, off, eps, 15000.0, 0.04, r_max=3.0)
    p_t = rayleigh_off_axis(lambda r, tt: surface_motion(r, tt, 1.0, eps, WOOD, kernel="lorentzian"), h, off, t,
                            r_max=3.0, r_scale=WOOD.c_s * eps, n_phi=128, c_a=CA, rho_a=RHOA)
    assert np.linalg.norm(p_f - p_t) < 1e-4 * np.linalg.norm(p_t)


def _direct(bank, t_m, eps, rho, n):
    """One impact straight from the ring spectrum at its exact offset (no bank), same kernel and roll-off."""
    f = bank.freqs
    fs = bank.sample_rate
    near, far = ring_spectrum(f, bank.ground, bank.height, rho, r_max=rho + B.R_EXTRA, c_a=bank.c_a,
                              rho_a=bank.rho_a)
    nyq = fs / 2
    roll = np.where(f < 0.9 * nyq, 1.0, 0.5 * (1 + np.cos(np.pi * np.clip((f - 0.9 * nyq) / (0.1 * nyq), 0, 1))))
    n0 = int(np.floor(t_m * fs)) - B.PRE_SAMPLES
    spec = (near + far) * B.kernel_spectrum(f, eps) * roll * fs * np.exp(-2j * np.pi * f * (t_m - n0 / fs))
    out = np.zeros(n)
    blk = np.fft.irfft(spec, bank.n_fft)
    out[n0:n0 + bank.n_fft] = blk[:n - n0]
    return out


def _bank_error(step, rhos, eps=3e-5, h=0.35):
    bank = B.ResponseBank(WOOD, h, CA, RHOA, 48000, 1024, step)
    bank.ensure(rhos)
    errs = []
    for rho in rhos:
        p = bank.render([0.01], [1.0], [eps], [rho], 2048)
        ref = _direct(bank, 0.01, eps, rho, 2048)
        errs.append(np.linalg.norm(p - ref) / np.linalg.norm(ref))
    return max(errs)


def test_bank_interpolation_is_within_one_percent_of_direct_evaluation():
    """Listener 0.35 m high, impacts half-way between nodes 0.16 and 0.6 m off (where the floor's leaked Rayleigh
    wave and the direct sound arrive apart): the default node spacing (h / 32) is within 1 % (relative L2) of the
    exact offset (measured 0.13 % and 0.01 %)."""
    step = min(B.MAX_STEP, 0.35 * B.STEP_PER_HEIGHT)
    assert _bank_error(step, [0.1537 + 0.5 * step, 0.6037 + 0.5 * step]) < 0.01


@pytest.mark.slow
def test_bank_interpolation_error_converges_with_the_node_spacing():
    """Halving the node spacing divides the interpolation error by 5-12 (cubic interpolation of aligned spectra):
    measured 5.1 / 0.88 / 0.11 % at 0.17 m off and 0.41 / 0.077 / 0.0065 % at 0.62 m off, for 4, 2, 1 cm."""
    for rho in (0.1537, 0.6037):
        errs = [_bank_error(s, [rho + 0.5 * s]) for s in (0.04, 0.02, 0.01)]
        assert errs[0] > 4 * errs[1] > 16 * errs[2]
        assert errs[1] < 0.01


def test_kernel_and_bank_arguments():
    f = np.array([0.0, 1e3, 1e4])
    assert np.allclose(B.kernel_spectrum(f, 1e-5, "lorentzian"), np.exp(-2 * np.pi * f * 1e-5))
    k4 = B.kernel_spectrum(f, 1e-5)
    assert k4[0] == 1.0 and np.all(np.diff(k4) < 0)
    # the Rayleigh wave leaks sound ahead of the direct arrival only outside the Mach cone
    assert B.leak_delay(1.0, 0.0, CA, WOOD.c_R) == pytest.approx(1.0 / CA)
    far = float(B.leak_delay(0.3, 2.0, CA, WOOD.c_R))
    assert far < math.hypot(0.3, 2.0) / CA
    with pytest.raises(InputError, match="listener height"):
        B.response_bank(WOOD, 0.0, c_a=CA, rho_a=RHOA, sample_rate=48000, cache=False)


def test_an_interrupted_bank_build_resumes_from_its_saved_nodes(tmp_path):
    """The bank file is rewritten as nodes are computed: a build stopped after some nodes leaves them on disk and a
    rerun computes only the rest (same values as one uninterrupted build)."""
    kw = dict(c_a=CA, rho_a=RHOA, sample_rate=48000, max_offset=1.0, cache=str(tmp_path))
    bank = B.response_bank(WOOD, 0.35, **kw)
    offsets = [0.1, 0.2]

    class Stop(Exception):
        pass

    def stop_after_three(frac, seen=[]):
        seen.append(frac)
        if len(seen) == 3:
            raise Stop
    with pytest.raises(Stop):
        bank.ensure(offsets, progress=stop_after_three, save_every_s=0.0)
    again = B.response_bank(WOOD, 0.35, **kw)
    assert len(again.nodes) == 3                               # what was computed before the stop is kept
    calls = []
    again.ensure(offsets, progress=calls.append)
    full = B.response_bank(WOOD, 0.35, **{**kw, "cache": False})
    full.ensure(offsets)
    assert len(calls) == len(full.nodes) - 3
    assert sorted(again.nodes) == sorted(full.nodes)
    assert all(np.array_equal(again.nodes[i], full.nodes[i]) for i in full.nodes)
