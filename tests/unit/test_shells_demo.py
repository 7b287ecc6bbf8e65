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


@pytest.mark.slow
def test_shells_demo_hard_strike_spreads(tmp_path):
    """The demo renders; in the hard cymbal strike the nonlinear rendering puts energy above the highest kept
    mode (spectral spreading) that the linear one cannot have: > 20 dB more energy above 1.2 kHz in the
    second after the strike."""
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
