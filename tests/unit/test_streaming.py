"""Streaming render (streaming.py): a scene rendered in time blocks straight to files must give the samples of the
whole render (``render_scene``) within 1e-6 of the peak, for every source kind that streams, and bounded memory
is its purpose (bench/bench_long_scene.py measures it). References: the whole render of the same scene; the
superposition of the moving modal kernel (sound is linear in the events); pyloudnorm for the piecewise loudness
meter."""
import json

import numpy as np
import pytest
import soundfile as sf

from impactsound.errors import InputError
from impactsound.pipeline import render_scene
from impactsound.scene import load_scene
from impactsound.scene.schema import demo_scene_path
from impactsound.streaming import render_to_file

DATA = demo_scene_path().parent


def _read(path):
    y, _ = sf.read(str(path), always_2d=True, dtype="float64")
    return y.T


def _close(wav, ref, tol, peak):
    # the WAV holds float32: one rounding (2^-24 relative) of each sample on top of the render's own difference
    return bool(np.all(np.abs(_read(wav) - ref) <= tol * peak + 2.0 ** -23 * np.abs(ref)))


def _compare(scene, tmp_path, block_s, tol=1e-6):
    whole = render_scene(scene)
    res = render_to_file(scene, tmp_path / "s.wav", stems=tmp_path / "stems", normalise="none", block_s=block_s)
    peak = np.abs(whole.mix).max()
    assert peak > 0 and res.blocks >= 3
    np.testing.assert_allclose(res.peak_pa, peak, rtol=1e-6)
    assert _close(tmp_path / "s.wav", whole.mix, tol, peak)
    for kind, objs in whole.stems.items():
        total = sum(objs.values()) if objs else np.zeros_like(whole.mix)
        assert _close(tmp_path / "stems" / f"{kind}.wav", total, tol, peak), kind
        for name, p in objs.items():
            assert _close(tmp_path / "stems" / f"{kind}_{name}.wav", p, tol, peak), (kind, name)
    # the same sidecar as RenderResult.save's (level, scale, what each object got)
    whole.save(tmp_path / "w.wav", normalise="none")
    a = json.loads((tmp_path / "w.wav.json").read_text())
    b = json.loads((tmp_path / "s.wav.json").read_text())
    assert a.keys() == b.keys()
    for k in a:
        if k == "peak_pa":
            assert b[k] == pytest.approx(a[k], rel=1e-6)
        else:
            assert a[k] == b[k], k
    return whole, res


def test_ground_drop_streams_to_the_whole_render(tmp_path):
    # modal + acceleration noise + the floor's own sound; blocks of 0.2 s cut through the bounces' rings
    _compare(load_scene(DATA / "ground_drop.toml"), tmp_path, 0.2, tol=1e-9)


def test_table_scene_with_moving_and_resting_bodies_streams_to_the_whole_render(tmp_path, monkeypatch):
    import tomllib

    import impactsound.streaming as st
    monkeypatch.setattr(st, "GROUP_BYTES", 1)             # one object at a time in each block
    d = tomllib.loads((DATA / "table.toml").read_text())
    keep = {"table", "die_d8", "coin"}                    # the assets of test_builtin_scenes' small table scene
    d["object"] = [o for o in d["object"] if o["name"] in keep]
    d["scene"].update(duration=1.2, sources=["modal", "acceleration_noise", "plate"])
    d["source"] = {"modal": {"transfer": "low_order", "max_modes": 30},
                   "acceleration_noise": {"model": "proxy", "bank": "tiny"}}
    scene = load_scene(d, base=DATA)
    whole, res = _compare(scene, tmp_path, 0.25)
    # the bodies move and come to rest while they ring: the radiation that follows them is streamed too
    assert whole.events.motion and whole.events.resting


def test_levels_and_spectrogram_of_a_streamed_render(tmp_path):
    from impactsound.io.audio import loudness_lufs
    scene = load_scene(DATA / "ground_drop.toml")
    res = render_to_file(scene, tmp_path / "l.wav", png=tmp_path / "l.png", normalise="lufs", lufs_target=-20.0,
                         block_s=0.3)
    y = _read(tmp_path / "l.wav")
    assert loudness_lufs(y, 48000) == pytest.approx(-20.0, abs=0.01)
    side = json.loads((tmp_path / "l.wav.json").read_text())
    np.testing.assert_allclose(np.abs(y).max() * side["pascals_per_unit"], res.peak_pa, rtol=1e-6)
    assert side["level"]["normalise"] == "lufs" and (tmp_path / "l.png").stat().st_size > 10_000
    res = render_to_file(scene, tmp_path / "p.wav", block_s=0.3)
    assert np.abs(_read(tmp_path / "p.wav")).max() == pytest.approx(10 ** (-1 / 20), rel=1e-6)
    assert not list(tmp_path.glob(".p-*"))                  # the spool folder is gone


def test_bad_arguments_fail_before_any_work(tmp_path):
    scene = load_scene(DATA / "ground_drop.toml")
    for kw, what in (({"block_s": 0.0}, "block_s"), ({"normalise": "loud"}, "normalise"),
                     ({"normalise": "shared"}, "full_scale_pa"), ({"normalise": "lufs", "lufs_target": 3.0},
                                                                   "lufs_target")):
        with pytest.raises(InputError, match=what):
            render_to_file(scene, tmp_path / "x.wav", **kw)
    with pytest.raises(InputError, match="wav or .flac"):
        render_to_file(scene, tmp_path / "x.mp3")
    assert not list(tmp_path.iterdir())


def test_moving_modal_kernel_is_linear_in_its_events():
    """Sound is linear in the impacts: the kernel that follows a moving body gives, for two sets of events, the sum
    of its outputs for each (what lets a render be cut into time blocks)."""
    from impactsound.sources.modal_moving import synthesize_moving
    fs, H, n = 48000, 48, 24000
    K = -(-n // H) + 2
    rng = np.random.default_rng(3)
    om = 2 * np.pi * np.array([310.0, 1250.0, 4400.0])
    xi = np.array([0.002, 0.004, 0.01])
    t0 = np.sort(rng.uniform(0.01, 0.4, 12))
    tau = np.full(12, 1e-4)
    imp = rng.standard_normal((12, 3))
    delay = (0.5 + 0.2 * np.sin(np.arange(K) * H / fs * 7.0))[:, None] / 343.0     # a source swinging to and fro
    W = rng.standard_normal((K, 1, 3))

    def weights(fr):
        return W[fr], 0.3 * W[fr]
    geom = np.ones((12, 1, 1, 3))
    basis = np.eye(3)

    def run(sel):
        return synthesize_moving(om, xi, t0[sel], tau[sel], imp[sel], delay, weights, H, geom[sel], basis, fs, n,
                                 cutoff_db=None)
    a = rng.random(12) < 0.5
    both = run(np.ones(12, bool))
    assert np.abs(run(a) + run(~a) - both).max() < 1e-12 * np.abs(both).max()


def test_a_scene_longer_than_an_hour_is_refused_with_its_file(tmp_path):
    import tomllib
    d = tomllib.loads((DATA / "ground_drop.toml").read_text())
    d["scene"]["duration"] = 7200.0
    with pytest.raises(InputError, match=r"scene.duration = 7200.0 s is over the 3600 s limit"):
        load_scene(d, base=DATA)
    d["scene"]["duration"] = 1800.0                     # half an hour is a scene (streamed, bounded memory)
    assert load_scene(d, base=DATA).duration == 1800.0


def test_long_spectrogram_columns_are_means_of_the_frames():
    """A long render's picture is drawn from pieces: each column is the mean PSD of adjacent frames, the frames
    being scipy's for the whole signal."""
    from scipy.signal import spectrogram

    from impactsound.io.plot import MAX_COLUMNS, _spectrogram
    fs = 8000
    x = np.random.default_rng(1).standard_normal(1024 + 256 * (3 * MAX_COLUMNS + 5))
    f, ts, S = _spectrogram(x, fs, 1024)
    f0, t0, S0 = spectrogram(x, fs=fs, nperseg=1024, noverlap=768, scaling="density", mode="psd")
    assert S.shape[1] <= MAX_COLUMNS and np.array_equal(f, f0)
    g = S0.shape[1] // S.shape[1]
    cols = S.shape[1]
    np.testing.assert_allclose(S, S0[:, :cols * g].reshape(len(f0), cols, g).mean(axis=2), rtol=1e-10)
    np.testing.assert_allclose(ts, t0[:cols * g].reshape(cols, g).mean(axis=1), rtol=1e-12)


def test_sources_without_a_span_are_rendered_whole_inside_a_streaming_render(tmp_path):
    """Granular sources render their own collisions (no span): the streaming render takes their whole-scene output
    block by block, and its files are the whole render's."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_granular_scene import _pour_scene
    scene = load_scene(_pour_scene())
    whole = render_scene(scene)
    res = render_to_file(scene, tmp_path / "g.wav", stems=tmp_path / "st", normalise="none", block_s=0.1)
    peak = np.abs(whole.mix).max()
    assert peak > 0 and res.blocks >= 4
    assert _close(tmp_path / "g.wav", whole.mix, 1e-12, peak)
    for kind in ("grain_noise", "container"):
        for name, p in whole.stems[kind].items():
            assert _close(tmp_path / "st" / f"{kind}_{name}.wav", p, 1e-12, peak), (kind, name)


def test_plate_floor_streams_to_the_whole_render(tmp_path):
    """A ringing plate floor ([ground] model = "plate") under a bouncing ball, 0.2 s blocks: its rings cross the
    block edges (the source's span is its slowest mode's ring) and the streamed render is the whole one."""
    d = {"scene": {"duration": 0.8, "sources": ["ground"]},
         "ground": {"material": "mdf", "model": "plate", "plate": {"length": 1.0, "width": 0.6, "thickness": 0.02}},
         "listener": [{"name": "mic", "position": [0.3, -0.5, 0.5]}],
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0.1, 0.05, 0.1]}]}
    _compare(load_scene(d), tmp_path, 0.2, tol=1e-6)
