"""Spherical-head HRTF magnitude (Brown & Duda 1998) and the binaural modal render."""
import dataclasses

import numpy as np
import pytest

from impactsound.transfer import hrtf


def test_head_shadow_limits():
    th = np.radians([0.0, 90.0, 150.0])
    # low frequency: the head is acoustically small
    assert np.allclose(hrtf.head_shadow(1e-3, th), 1.0, atol=1e-9)
    # high frequency: |H| -> alpha(theta): +6 dB facing the source, -20 dB in the shadow at theta_min
    hi = hrtf.head_shadow(1e9, th)
    assert hi[0] == pytest.approx(2.0, rel=1e-6)
    assert hi[2] == pytest.approx(0.1, rel=1e-6)
    assert 20 * np.log10(hi[0]) == pytest.approx(6.02, abs=0.01)
    # the corner frequency is w0 = c / a: at w = 2 w0, |H|^2 = (1 + alpha^2) / 2
    w0 = 343.2 / hrtf.HEAD_RADIUS
    assert hrtf.head_shadow(2 * w0, 0.0) ** 2 == pytest.approx((1 + 4) / 2, rel=1e-12)
    # monotone in frequency on both sides
    w = np.linspace(10, 1e5, 200)
    assert np.all(np.diff(hrtf.head_shadow(w, 0.0)) > 0) and np.all(np.diff(hrtf.head_shadow(w, th[2])) < 0)


def test_binaural_channel_is_head_shadow_weighted_sum_of_modes():
    """A binaural ear's signal = sum over modes of |H(w_j, theta)| x that mode's microphone signal there."""
    from impactsound.sources.modal import ModalSource
    from tests.unit.test_synthesis import _ball_scene

    S = _ball_scene()
    ear_pos = S["pos"] + np.array([0.6, 0.2, 0.3])
    axis = np.array([1.0, 0.0, 0.0])                          # right ear points away from the ball
    fs, dur = 48000, 0.05
    kw = dict(mode_cutoff_db=None)
    bin_ = ModalSource([S["body"]], {"ball": S["model"]}, S["ground"], S["air"], ears=axis[None], **kw)
    y = bin_.render(S["ev"], ear_pos[None], fs, dur)["ball"][0]
    theta = hrtf.ear_angle(axis, ear_pos, S["pos"])
    expect = np.zeros_like(y)
    for j in range(2):
        shapes = S["model"].shapes.copy()
        shapes[[i for i in range(len(shapes)) if i != j]] = 0.0          # only mode j is excited
        mj = dataclasses.replace(S["model"], shapes=shapes)
        mono = ModalSource([S["body"]], {"ball": mj}, S["ground"], S["air"], **kw)
        g = hrtf.head_shadow(2 * np.pi * S["f_hz"][j], theta, c=S["air"].c)
        expect += g * mono.render(S["ev"], ear_pos[None], fs, dur)["ball"][0]
    assert theta > np.radians(120)                             # the ball is on the far side of this ear
    assert np.max(np.abs(y - expect)) < 1e-9 * np.max(np.abs(expect))
