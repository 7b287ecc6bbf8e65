"""The composable API: strike() checked against far-field physics, RenderResult.save, load_scene(dict), logging."""
import json
import logging

import numpy as np
import pytest
import soundfile as sf
import trimesh

import impactsound as isd
from impactsound.errors import InputError

C = 343.2


@pytest.fixture(scope="module")
def bar():
    return isd.modal_analysis(trimesh.creation.box((0.2, 0.025, 0.012)), isd.get_material("aluminium"), order=1,
                              max_modes=6)


TOP = [0.07, 0.0, 0.006]             # on the top face (z = +6 mm)


def test_strike_rings_at_the_model_frequencies(bar):
    y = isd.strike(bar, TOP, 0.01, [0.0, 0.0, 1.0], duration=0.5, transfer="low_order")[0]
    spec = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    f = np.fft.rfftfreq(len(y), 1 / 48000)
    peak = f[np.argmax(spec)]
    # the loudest line is one of the model's modes, within the 2 Hz bin spacing
    assert np.min(np.abs(bar.frequencies_hz - peak)) <= 2.0


def test_strike_far_field_is_linear_in_the_impulse_and_falls_as_1_over_r_with_delay_r_over_c(bar):
    """Far field of a compact source (monopole + dipole terms): p(r, t) = f(t - r/c) / r up to O(1/(k r)); at 40 and
    80 m the near-field term of the lowest mode (1/(kr) ~ 1e-3) is negligible. The impulse enters linearly when the
    contact time is held fixed."""
    d = np.array([0.3, -0.4, 0.866])
    d /= np.linalg.norm(d)
    kw = dict(duration=0.3, tau=50e-6, transfer="low_order")
    shift = 5600                                             # samples: r2 - r1 = shift c / fs = 40.04 m
    r1, r2 = 40.0, 40.0 + shift * C / 48000
    y1 = isd.strike(bar, TOP, 0.01, r1 * d, **kw)[0]
    y2 = isd.strike(bar, TOP, 0.01, r2 * d, **kw)[0]
    y3 = isd.strike(bar, TOP, 0.02, r1 * d, **kw)[0]
    assert np.allclose(y3, 2 * y1, rtol=0, atol=1e-12 * np.abs(y1).max())
    n = len(y1) - shift
    ref = (r1 / r2) * y1[:n]
    assert np.max(np.abs(y2[shift:] - ref)) < 0.01 * np.abs(ref).max()
    arrive = int(r2 / C * 48000)                             # nothing before the sound arrives at r2 / c
    assert not np.any(y2[:arrive - 1]) and np.any(y2[arrive - 1:arrive + 48])


def test_strike_radiates_with_the_accurate_transfer_by_default(bar, monkeypatch):
    """Defaults are what users hear: strike() asks for the FDTD FFAT maps ("auto") unless told otherwise."""
    import impactsound.sources.modal as modal
    asked = []
    monkeypatch.setattr(modal, "transfer_model", lambda model, method, **kw: (asked.append(method), (None, ""))[1])
    isd.strike(bar, TOP, 0.01, [0.0, 0.0, 1.0], duration=0.01)
    isd.strike(bar, TOP, 0.01, [0.0, 0.0, 1.0], duration=0.01, transfer="low_order")
    assert asked == ["auto", "low_order"]


def test_strike_refuses_bad_input(bar):
    with pytest.raises(InputError, match="from the object's surface"):
        isd.strike(bar, [0.0, 0.0, 0.5], 0.01, [0, 0, 1])
    with pytest.raises(InputError, match="impulse"):
        isd.strike(bar, TOP, 0.0, [0, 0, 1])
    with pytest.raises(InputError, match="listener"):
        isd.strike(bar, TOP, 0.01, [0, np.nan, 1])


def _scene_dict():
    return {"scene": {"duration": 0.3, "sources": ["modal"], "seed": 3},
            "source": {"modal": {"transfer": "low_order", "modal_order": 1, "max_modes": 8}},
            "listener": [{"position": [0.0, -0.4, 0.2]}],
            "object": [{"name": "bar", "shape": "box", "size": {"size": [0.12, 0.02, 0.01]},
                        "material": "aluminium", "position": [0.0, 0.0, 0.08], "euler_deg": [5.0, 8.0, 0.0]}]}


def test_render_scene_from_a_dict_and_save_with_stems_and_png(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="impactsound"):
        res = isd.render_scene(_scene_dict())
    assert any("contact events" in r.getMessage() for r in caplog.records)
    assert res.info["objects"]["bar"]["modes"] > 0 and np.abs(res.mix).max() > 0
    paths = res.save(tmp_path / "out.wav", stems=tmp_path / "stems", png=tmp_path / "out.png", title="bar")
    assert paths == [tmp_path / "out.wav", tmp_path / "out.png"] and (tmp_path / "out.png").stat().st_size > 0
    x, fs = sf.read(tmp_path / "out.wav", always_2d=True)
    side = json.loads((tmp_path / "out.wav.json").read_text())
    assert fs == 48000 and side["objects"]["bar"]["radiation"].startswith("low_order")
    # pascals are recoverable from the file: samples x pascals_per_unit = the render (float32 rounding)
    assert np.allclose(x[:, 0] * side["pascals_per_unit"], res.mix[0], rtol=0, atol=1e-6 * np.abs(res.mix).max())
    s, _ = sf.read(tmp_path / "stems" / "modal_bar.wav", always_2d=True)
    assert np.array_equal(s, x)                              # one object, one source: the stem is the mix


def test_save_warns_through_logging_when_silent(tmp_path, caplog):
    d = _scene_dict()
    d["object"][0]["position"] = [0.0, 0.0, 0.005 + 1e-4]     # resting on the floor: no impacts
    d["object"][0]["euler_deg"] = [0.0, 0.0, 0.0]
    res = isd.render_scene(d)
    with caplog.at_level(logging.WARNING, logger="impactsound"):
        res.save(tmp_path / "quiet.wav")
    assert any("is silent" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_render_scene_checks_given_events_like_a_scene_event_log():
    """Events handed to render_scene are checked and completed as a scene's event log is: a log without poses is
    rendered at the bodies' scene poses, and where that puts the contact far from the body a warning says so (it
    used to render silently from the wrong place); an implausible log is refused."""
    scene = isd.load_scene(_scene_dict())
    res = isd.render_scene(scene)
    ev = res.events.select(np.ones(len(res.events), bool))
    assert len(ev) > 0
    for side in ("a", "b"):
        getattr(ev, f"pos_{side}")[:] = np.nan
        getattr(ev, f"quat_{side}")[:] = np.nan
    from impactsound.pipeline import MissingPoseWarning
    with pytest.warns(MissingPoseWarning, match=r"no pose for body 'bar' .* from its surface"):
        out = isd.render_scene(scene, events=ev)
    assert np.isfinite(out.mix).all()
    big = ev.select(np.ones(len(ev), bool))
    big.impulse[:] *= 1e4                                    # 10^4 times what the masses and speeds allow
    with pytest.raises(InputError, match="impulse"):
        isd.render_scene(scene, events=big)
    assert np.array_equal(isd.render_scene(scene, events=res.events).mix, res.mix)   # a good log renders the same


def test_scene_mesher_option_reaches_the_modal_analysis(monkeypatch):
    """[source.modal] mesher is passed to the (cached) modal analysis of every body."""
    import impactsound.fem.modal as fem_modal
    from impactsound.sources.modal import modal_models
    seen = []

    def fake(*a, mesher=None, **k):
        seen.append(mesher)
        raise RuntimeError("stop")
    monkeypatch.setattr(fem_modal, "cached_modal_analysis", fake)
    d = _scene_dict()
    d["source"]["modal"]["mesher"] = "ftetwild"
    with pytest.raises(RuntimeError, match="stop"):
        modal_models(isd.load_scene(d))
    assert seen == ["ftetwild"]
