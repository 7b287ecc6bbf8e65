"""The shells demo's scenes load (shell objects, event log) and its figure has one panel per rendering; the full
demo (`impactsound demo --scene shells`) runs in the slow suite."""
from __future__ import annotations

import numpy as np
import pytest


def test_demo_scenes_load():
    from impactsound.scene import load_scene
    from impactsound.scene.schema import demo_scene_path
    d = demo_scene_path().parent
    can = load_scene(d / "shells_can.toml")
    assert can.bodies[0].shell is not None and "shell" in can.sources
    cym = load_scene(d / "shells_cymbal.toml")
    assert cym.bodies[0].shell.spec.dynamics == "nonlinear" and cym.event_log.endswith("cymbal_strikes.csv")


def test_panels_png(tmp_path):
    from impactsound.shells_demo import _panels
    fs = 8000
    t = np.arange(fs) / fs
    p = _panels(tmp_path / "x.png", [("a", np.sin(2 * np.pi * 440 * t)), ("b", np.sin(2 * np.pi * 880 * t))], fs)
    assert p.stat().st_size > 10000
    t2 = np.arange(3 * fs) / fs
    z = _panels(tmp_path / "z.png", [("a", np.sin(2 * np.pi * 440 * t))] * 3, fs,
                zoom=[("a", np.sin(2 * np.pi * 250 * t2)), ("b", np.sin(2 * np.pi * 300 * t2))])
    assert z.stat().st_size > p.stat().st_size


def test_pitch_track_follows_a_chirp():
    """The figure's pitch track against an analytic exponential glide 300 -> 270 Hz over 2 s (within 1 Hz)."""
    from impactsound.shells_demo import pitch_track
    fs = 48000
    t = np.arange(2 * fs) / fs
    f = 270 + 30 * np.exp(-t / 0.5)
    x = np.sin(2 * np.pi * np.cumsum(f) / fs)
    tt, ff = pitch_track(x, fs)
    assert np.abs(ff - np.interp(tt, t, f)).max() < 1.0


@pytest.mark.slow
def test_shells_demo_hard_strike_spreads(tmp_path):
    """The demo renders; in the hard cymbal strike the nonlinear rendering puts energy above the highest kept
    mode (spectral spreading) that the linear one cannot have: > 20 dB more energy above 1.2 kHz in the
    second after the strike; and it glides in pitch: the strongest peak in 200-330 Hz falls by more than 1.5 %
    from the first 0.3 s to 0.5-0.8 s, where the linear one holds its mode (238.7 Hz +- 0.3, 0.1 %).

    The hard strike is chaotic: a change of round-off (perturbing the cubature weights by 1e-12, or float32 vs
    float64 basis rows) gives another realisation. Over six such realisations of the paper's linear basis the glide
    was 2.3-4.1 % (early 294-304 Hz, late 281-297 Hz); on the quadratic manifold (the default basis) 299.3 ->
    288.1 Hz, -3.7 %, and 32.6 dB of spreading. The bound asks for the glide, not for one realisation's size."""
    import json
    import soundfile as sf
    from impactsound.io.progress import QUIET
    from impactsound.shells_demo import shells_demo
    wav, png = shells_demo(tmp_path, QUIET)
    side = json.loads((tmp_path / "shells.wav.json").read_text())
    y, fs = sf.read(wav)
    y = np.asarray(y).reshape(len(y), -1)[:, 0]
    e = {}
    for name, (a, b) in side["segments"].items():
        if "cymbal" in name:
            seg = y[int((a + 1.62) * fs):int((a + 2.6) * fs)]
            S = np.abs(np.fft.rfft(seg)) ** 2
            f = np.fft.rfftfreq(len(seg), 1 / fs)
            e["nonlinear" in name] = S[f > 1200].sum()
    assert 10 * np.log10(e[True] / e[False]) > 20
    from impactsound.shells_demo import HARD_STRIKE_S, pitch_track
    for name, (a, b) in side["segments"].items():
        if "cymbal" in name:
            tt, ff = pitch_track(y[int((a + HARD_STRIKE_S) * fs):int(b * fs)], fs)
            early, late = np.median(ff[tt < 0.3]), np.median(ff[(tt > 0.5) & (tt < 0.8)])
            print(f"{name}: pitch {early:.1f} Hz early, {late:.1f} Hz at 0.5-0.8 s")
            if "nonlinear" in name:
                assert late < 0.985 * early                # the hardening glide (2.3-4.1 % measured)
            else:
                assert np.ptp(ff) < 0.01 * early           # a linear mode holds its pitch
