"""End to end: scene -> events -> modal models -> synthesis -> WAV, checked against physics and for
reproducibility."""
import json

import numpy as np
import pytest
import soundfile as sf

from impactsound.cli import main
from impactsound.dynamics.events import GROUND, EventLog
from impactsound.pipeline import modal_models, render_scene
from impactsound.scene import parse_scene

BAR = {"name": "bar", "shape": "box", "size": {"size": [0.12, 0.02, 0.01]}, "material": "aluminium",
       "position": [0.0, 0.0, 0.005]}


def _bar_scene(tmp_path, **scene):
    d = {"scene": {"duration": 0.5, "modal_order": 2, "max_modes": 20, **scene},
         "listener": [{"position": [0.0, -0.4, 0.3]}], "object": [dict(BAR)]}
    return parse_scene(d, base=tmp_path)


def test_struck_bar_rings_at_its_fem_frequencies(tmp_path):
    """One ground impulse on a resting bar: the rendered spectrum peaks at the bar's FEM bending frequency, and
    the free-free beam formula (spec sec. 10) predicts that frequency independently."""
    scene = _bar_scene(tmp_path)
    models = modal_models(scene)
    f = models["bar"].frequencies_hz
    # Euler-Bernoulli free-free first bending mode across the 10 mm side: (4.730)^2/(2 pi L^2) sqrt(EI/rho A)
    E, rho, L, b, h = 69e9, 2700.0, 0.12, 0.02, 0.01
    f1_beam = 4.730040745**2 / (2 * np.pi * L**2) * np.sqrt(E * b * h**3 / 12 / (rho * b * h))
    assert f[0] == pytest.approx(f1_beam, rel=0.08)  # 3-D bar with shear/rotary inertia sits slightly lower
    ev = EventLog(t=[0.05], a=[GROUND], b=[0], point=[[0.05, 0.0, 0.0]], normal=[[0, 0, 1.0]],
                  impulse=[[0, 0, 1e-3]], vn=[1.0], pos_b=[scene.bodies[0].position],
                  quat_b=[scene.bodies[0].quaternion], body_names=["bar"])
    res = render_scene(scene, events=ev)
    x = res.mix[0]
    assert np.all(np.isfinite(x)) and np.abs(x).max() > 0
    assert np.abs(x[: int(0.05 * 48000) - 1]).max() == 0.0       # causal: silence before the impact
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    freqs = np.fft.rfftfreq(x.size, 1 / 48000)
    peak = freqs[np.argmax(spec)]
    assert min(abs(peak - fj) for fj in f) < 5.0                   # the loudest line is one of the modes


def test_same_scene_same_seed_gives_bit_identical_wav(tmp_path):
    scene_toml = tmp_path / "s.toml"
    scene_toml.write_text("""
[scene]
duration = 0.6
modal_order = 1
max_modes = 10
[[listener]]
position = [0.0, -0.4, 0.3]
[[object]]
name = "block"
shape = "box"
size = { size = [0.12, 0.02, 0.01] }
material = "aluminium"
position = [0.0, 0.0, 0.1]
euler_deg = [10.0, 5.0, 0.0]
""")
    outs = []
    for k in range(2):
        wav = tmp_path / f"o{k}.wav"
        assert main(["-q", "render", str(scene_toml), "--out", str(wav), "--stems", str(tmp_path / f"st{k}")]) == 0
        outs.append(wav.read_bytes())
        meta = json.loads((tmp_path / f"o{k}.wav.json").read_text())
        data, fs = sf.read(wav, dtype="float64")
        assert fs == 48000 and data.dtype == np.float64
        assert np.abs(data).max() == pytest.approx(10 ** (-1 / 20), rel=1e-6)
        assert np.abs(data).max() * meta["pascals_per_unit"] == pytest.approx(meta["peak_pa"], rel=1e-6)
    assert outs[0] == outs[1]
    assert (tmp_path / "st0" / "modal_block.wav").is_file()
