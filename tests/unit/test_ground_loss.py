"""A lossy ground half-space (loss factor eta, complex moduli E (1 + i eta)).

References independent of the code under test:
- eta -> 0 gives the lossless response;
- the Rayleigh wave of a solid with quality factor Q = 1 / eta decays with distance as
  exp(2 pi gamma x Im(1 / sqrt(1 + i eta))) ~ exp(-pi eta f r / c_R) (x = f r / c_s, gamma = c_s / c_R; Aki &
  Richards 2002, "Quantitative Seismology", sec. 5.5), and it dominates the surface response far from the impact;
- the quasi-static limit (f -> 0) is Boussinesq's with the complex shear modulus.
"""
import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.scene import parse_scene
from impactsound.sources.ground.impact import HalfSpace
from impactsound.sources.ground.lamb import rayleigh_roots
from impactsound.sources.ground.spectrum import impulse_spectrum, ring_spectrum


def test_small_loss_gives_the_lossless_spectrum():
    x = np.arange(1500) * 0.01
    v0 = impulse_spectrum(x, 0.25)
    v = impulse_spectrum(x, 0.25, 1e-9)
    assert v[0] == pytest.approx(1.0)                           # the static response is unchanged
    assert np.abs(v - v0).max() < 1e-6 * np.abs(v0).max()


@pytest.mark.parametrize("nu", [0.25, 0.3])
def test_rayleigh_wave_decays_with_the_quality_factor(nu):
    eta = 0.01
    gamma = math.sqrt(rayleigh_roots(nu)[2])
    x = np.linspace(2.0, 20.0, 10)
    ratio = np.abs(impulse_spectrum(x, nu, eta)) / np.abs(impulse_spectrum(x, nu))
    q_decay = np.exp(2 * np.pi * gamma * x * np.imag(1 / np.sqrt(1 + 1j * eta)))
    assert np.allclose(ratio, q_decay, rtol=5e-3)               # measured 0.13 % (nu 0.25), 0.22 % (0.3)
    assert np.allclose(q_decay, np.exp(-np.pi * eta * gamma * x), rtol=1e-3)   # first order in eta


def test_lossy_floor_is_quieter_far_away_and_unchanged_at_low_frequency():
    floor = HalfSpace(30e9, 0.2, 2400.0)
    lossy = HalfSpace(30e9, 0.2, 2400.0, loss_factor=0.05)
    f = np.array([20.0, 2000.0, 6000.0])
    kw = dict(c_a=343.2, rho_a=1.2041)
    ratios = []
    for offset in (0.05, 2.0):
        p0 = sum(ring_spectrum(f, floor, 0.1, offset, r_max=offset + 1.0, **kw))
        p1 = sum(ring_spectrum(f, lossy, 0.1, offset, r_max=offset + 1.0, **kw))
        ratios.append(np.abs(p1 / p0))
    near, far = ratios
    # at 20 Hz the plane moves quasi-statically: |1 / (1 + i eta)| = 0.9988
    assert near[0] == pytest.approx(1 / abs(1 + 0.05j), rel=2e-3)
    # at 2 m the travelling wave has lost more than at 5 cm, and more at 6 kHz than at 2 kHz
    assert np.all(far[1:] < near[1:]) and far[2] < far[1] < 1.0


@pytest.mark.parametrize("ground, match", [
    ({"material": "concrete", "loss_factor": -0.1}, r"ground\.loss_factor = -0\.1 must lie in \[0, 1\)"),
    ({"material": "concrete", "loss_factor": 1.5}, r"ground\.loss_factor = 1\.5"),
    ({"material": "mdf", "loss_factor": 0.02, "model": "plate",
      "plate": {"length": 1.0, "width": 0.5, "thickness": 0.02}}, r"loss_factor is the half-space's damping"),
])
def test_bad_loss_factor_is_an_input_error(tmp_path, ground, match):
    d = {"scene": {"duration": 0.2}, "ground": ground,
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0, 0, 0.1]}],
         "listener": [{"position": [0, 0.5, 0.3]}]}
    with pytest.raises(InputError, match=match):
        parse_scene(d, base=tmp_path)


def test_loss_factor_reaches_the_half_space(tmp_path):
    from impactsound.sources.ground import source
    d = {"scene": {"duration": 0.2}, "ground": {"material": "concrete", "loss_factor": 0.02},
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0, 0, 0.1]}],
         "listener": [{"position": [0, 0.5, 0.3]}]}
    prep = source.prepare(parse_scene(d, base=tmp_path))
    assert prep.half_space.loss_factor == 0.02
