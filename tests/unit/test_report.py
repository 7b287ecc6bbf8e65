"""Audibility report (report.py, cli_report.py): levels of hand-built stems against values computed here, impact
windows, propagation delay, the JSON schema, the text table, and the command on a tiny scene."""
import json
import math

import numpy as np
import pytest

from impactsound.dynamics.events import EventLog
from impactsound.pipeline import RenderResult
from impactsound.report import SCHEMA, audibility_report, format_report, group_impacts, levels

FS = 8000
N = 8000                      # 1 s


def _events(times, pairs, points=None, names=("ball", "bar")):
    n = len(times)
    pts = np.zeros((n, 3)) if points is None else np.asarray(points, float)
    normal = np.tile([0.0, 0.0, 1.0], (n, 1))
    return EventLog(t=times, a=[p[0] for p in pairs], b=[p[1] for p in pairs], point=pts, normal=normal,
                    impulse=normal * 0.01, vn=np.ones(n), body_names=list(names))


def _result(stems, events, names=("mic",)):
    L = len(names)
    mix = np.zeros((L, N))
    for d in stems.values():
        for s in d.values():
            mix += s
    return RenderResult(FS, mix, stems, events, list(names))


def _burst(t0, amp, f=1000.0, tau=0.005, L=1):
    """A decaying sinusoid starting at t0 [s] (zero before)."""
    t = np.arange(N) / FS - t0
    x = np.where(t >= 0, amp * np.sin(2 * np.pi * f * t) * np.exp(-np.clip(t, 0, None) / tau), 0.0)
    return np.tile(x, (L, 1))


def _energy(x):
    return float(np.sum(np.asarray(x, float) ** 2)) / FS


def test_whole_render_levels_of_two_kinds_and_two_objects():
    t = np.arange(N) / FS
    sine = 0.2 * np.sin(2 * np.pi * 100 * t)          # 80 samples a period: its peak 0.2 is a sample
    imp_bar = np.zeros(N); imp_bar[4000] = 0.5        # where the sine is 0
    imp_ball = np.zeros(N); imp_ball[100] = 2.0
    stems = {"modal": {"ball": sine[None], "bar": imp_bar[None]}, "acceleration_noise": {"ball": imp_ball[None]}}
    rep = audibility_report(_result(stems, EventLog.empty(["ball", "bar"])))
    mic = rep["listeners"]["mic"]
    ko = mic["kind_object"]
    assert ko["modal"]["ball"]["peak_pa"] == pytest.approx(0.2, rel=1e-12)
    assert ko["modal"]["ball"]["peak_db_spl"] == pytest.approx(80.0, abs=1e-9)      # 20 log10(0.2 / 2e-5)
    assert ko["modal"]["ball"]["energy_pa2s"] == pytest.approx(0.2 ** 2 / 2 * 1.0, rel=1e-9)   # A^2/2 * 1 s
    assert ko["modal"]["ball"]["energy_db"] == pytest.approx(10 * math.log10(0.02 / 4e-10), abs=1e-9)
    assert ko["acceleration_noise"]["ball"]["peak_db_spl"] == pytest.approx(100.0, abs=1e-9)
    assert ko["acceleration_noise"]["ball"]["energy_pa2s"] == pytest.approx(4.0 / FS, rel=1e-12)
    assert ko["modal"]["bar"]["energy_pa2s"] == pytest.approx(0.25 / FS, rel=1e-12)
    # kinds sum their objects' pressures, objects sum their kinds' pressures
    modal = sine + imp_bar
    assert mic["kinds"]["modal"]["peak_pa"] == pytest.approx(np.abs(modal).max())
    assert mic["kinds"]["modal"]["energy_pa2s"] == pytest.approx(_energy(modal), rel=1e-12)
    ball = sine + imp_ball
    assert mic["objects"]["ball"]["peak_pa"] == pytest.approx(np.abs(ball).max())
    assert mic["objects"]["ball"]["energy_pa2s"] == pytest.approx(_energy(ball), rel=1e-12)
    assert mic["objects"]["bar"]["energy_pa2s"] == pytest.approx(0.25 / FS, rel=1e-12)
    assert mic["mix"]["energy_pa2s"] == pytest.approx(_energy(sine + imp_bar + imp_ball), rel=1e-12)
    assert rep["kinds"] == ["modal", "acceleration_noise"] and rep["objects"] == ["ball", "bar"]
    assert mic["impacts"] == []


def test_silent_levels_are_zero_with_null_decibels():
    lv = levels(np.zeros(10), FS)
    assert lv == {"peak_pa": 0.0, "peak_db_spl": None, "energy_pa2s": 0.0, "energy_db": None}


def test_dominance_flips_when_one_stem_is_scaled_up():
    ev = _events([0.1], [(-1, 0)])
    ring = _burst(0.1, 0.3, f=800, tau=0.01)
    click_ = _burst(0.1, 0.3, f=3000, tau=0.0005)
    rep = audibility_report(_result({"modal": {"ball": ring}, "acceleration_noise": {"ball": click_}}, ev))
    imp, = rep["listeners"]["mic"]["impacts"]
    assert imp["dominant_kind"] == "modal" and imp["dominant"] == {"kind": "modal", "object": "ball"}
    assert imp["dominant_object"] == "ball" and imp["objects"] == ["ground", "ball"]
    e_ring, e_click = _energy(ring[0, 796:1200]), _energy(click_[0, 796:1200])   # window [0.0995, 0.15] s
    assert imp["levels"]["kind_object"]["modal"]["ball"]["energy_pa2s"] == pytest.approx(e_ring, rel=1e-12)
    assert imp["margin_db"] == pytest.approx(10 * math.log10(e_ring / e_click), rel=1e-9)
    scale = 3 * math.sqrt(e_ring / e_click)           # the click now has 9 times the ring's energy
    rep = audibility_report(_result({"modal": {"ball": ring}, "acceleration_noise": {"ball": click_ * scale}}, ev))
    imp, = rep["listeners"]["mic"]["impacts"]
    assert imp["dominant_kind"] == "acceleration_noise"
    assert imp["dominant"] == {"kind": "acceleration_noise", "object": "ball"}
    assert imp["margin_db"] == pytest.approx(10 * math.log10(9), rel=1e-9)


def test_ground_kind_louder_than_the_ball_per_impact():
    # kinds are generic: a `ground` kind whose stem for the ball is the floor's sound from the ball's impacts
    ev = _events([0.1, 0.4], [(-1, 0), (-1, 0)])
    ball = _burst(0.1, 0.5, tau=0.01) + _burst(0.4, 0.05, tau=0.01)
    floor = _burst(0.1, 0.05, f=300, tau=0.01) + _burst(0.4, 0.5, f=300, tau=0.01)
    rep = audibility_report(_result({"modal": {"ball": ball}, "ground": {"ball": floor}}, ev))
    a, b = rep["listeners"]["mic"]["impacts"]
    assert a["dominant"] == {"kind": "modal", "object": "ball"} and a["dominant_kind"] == "modal"
    assert b["dominant"] == {"kind": "ground", "object": "ball"} and b["dominant_kind"] == "ground"
    assert a["dominant_object"] == b["dominant_object"] == "ball"


def test_group_impacts():
    g = group_impacts(np.array([0.0, 0.001, 0.004, 0.006, 0.1, 0.1049, 0.106]), 0.005)
    assert [x.tolist() for x in g] == [[0, 1, 2], [3], [4, 5], [6]]
    assert group_impacts(np.zeros(0), 0.005) == []


def test_two_close_impacts_windows_end_at_the_next_impact():
    # events 2 ms apart are one impact; one 20 ms later is the next, and the first window ends where it begins
    ev = _events([0.100, 0.102, 0.120], [(-1, 0), (0, 1), (-1, 1)])
    ball = _burst(0.100, 0.2, tau=0.002)
    bar = _burst(0.1205, 0.2, tau=0.002)
    rep = audibility_report(_result({"modal": {"ball": ball, "bar": bar}}, ev))
    a, b = rep["listeners"]["mic"]["impacts"]
    assert a["events"] == [0, 1] and a["objects"] == ["ground", "ball", "bar"] and b["events"] == [2]
    assert a["t_s"] == 0.100 and b["t_s"] == 0.120
    assert a["window_s"] == pytest.approx([0.0995, 0.1195]) and b["window_s"] == pytest.approx([0.1195, 0.170])
    assert a["dominant_object"] == "ball" and b["dominant_object"] == "bar"
    assert a["levels"]["kind_object"]["modal"]["bar"]["energy_pa2s"] == 0.0 and a["margin_db"] is None
    # the ball still rings in the second window (20 ms = 10 tau later: -87 dB)
    assert b["margin_db"] == pytest.approx(
        10 * math.log10(_energy(bar[0, 956:1360]) / _energy(ball[0, 956:1360])), rel=1e-9)
    assert b["dominant_involved"] == b["dominant"] == {"kind": "modal", "object": "bar"}
    # a ball that rings on louder than the bar's impact dominates the second window; the bar is its own loudest
    ring = _burst(0.100, 1.0, tau=0.05)
    rep = audibility_report(_result({"modal": {"ball": ring, "bar": bar}}, ev))
    b = rep["listeners"]["mic"]["impacts"][1]
    assert b["dominant"] == {"kind": "modal", "object": "ball"} and b["objects"] == ["ground", "bar"]
    assert b["dominant_involved"] == {"kind": "modal", "object": "bar"}


def test_windows_shift_by_the_propagation_delay_per_listener():
    # contact at the origin; mic "near" 3.43 m away (10 ms at 343 m/s), "far" 6.86 m (20 ms)
    ev = _events([0.1], [(-1, 0)], points=[[0.0, 0.0, 0.0]])
    pos = [[3.43, 0, 0], [0, 6.86, 0]]
    early = _burst(0.1, 1.0, tau=0.001, L=2)          # something at the event time, before any sound could arrive
    late = np.vstack([_burst(0.110, 0.1, tau=0.003)[0], _burst(0.120, 0.1, tau=0.003)[0]])
    res = _result({"modal": {"ball": late}, "acceleration_noise": {"bar": early}}, ev, names=("near", "far"))
    rep = audibility_report(res, air_c=343.0, listener_positions=pos)
    near, far = (rep["listeners"][k]["impacts"][0] for k in ("near", "far"))
    assert near["delay_s"] == pytest.approx(0.010) and far["delay_s"] == pytest.approx(0.020)
    assert near["window_s"] == pytest.approx([0.1095, 0.160]) and far["window_s"] == pytest.approx([0.1195, 0.170])
    assert near["dominant"] == far["dominant"] == {"kind": "modal", "object": "ball"}
    assert rep["window"]["propagation_delay"] is True
    # without positions the windows open at the event time and the early click wins
    rep = audibility_report(res)
    assert rep["listeners"]["near"]["impacts"][0]["dominant_kind"] == "acceleration_noise"
    assert rep["listeners"]["near"]["impacts"][0]["delay_s"] == 0.0


_LEVELS = {"peak_pa", "peak_db_spl", "energy_pa2s", "energy_db"}


def test_json_schema_keys():
    ev = _events([0.1, 0.3], [(-1, 0), (0, 1)])
    stems = {"modal": {"ball": _burst(0.1, 0.1), "bar": _burst(0.3, 0.1)}, "acceleration_noise": {}}
    rep = json.loads(json.dumps(audibility_report(_result(stems, ev), scene="x.toml"), allow_nan=False))
    assert set(rep) == {"schema", "scene", "sample_rate", "duration_s", "air_c", "n_events", "window", "kinds",
                        "objects", "listeners"}
    assert rep["schema"] == SCHEMA and rep["scene"] == "x.toml" and rep["n_events"] == 2
    assert rep["duration_s"] == 1.0 and rep["sample_rate"] == FS
    assert set(rep["window"]) == {"after_s", "before_s", "group_s", "propagation_delay"}
    mic = rep["listeners"]["mic"]
    assert set(mic) == {"channel", "mix", "kinds", "objects", "kind_object", "impacts"}
    assert set(mic["kinds"]) == {"modal", "acceleration_noise"} and set(mic["objects"]) == {"ball", "bar"}
    assert mic["kind_object"]["acceleration_noise"] == {} and set(mic["kind_object"]["modal"]) == {"ball", "bar"}
    assert set(mic["mix"]) == _LEVELS and mic["kinds"]["acceleration_noise"]["peak_db_spl"] is None
    imp = mic["impacts"][1]
    assert set(imp) == {"t_s", "events", "objects", "delay_s", "window_s", "dominant_kind", "dominant_object",
                        "dominant", "margin_db", "dominant_involved", "levels"}
    assert set(imp["levels"]) == {"mix", "kinds", "objects", "kind_object"}
    assert set(imp["levels"]["kind_object"]["modal"]["bar"]) == _LEVELS
    assert imp["objects"] == ["ball", "bar"] and imp["dominant_object"] == "bar"


def test_text_table():
    ev = _events([0.1, 0.3], [(-1, 0), (0, 1)])
    t = np.arange(N) / FS
    stems = {"modal": {"ball": 0.2 * np.sin(2 * np.pi * 100 * t)[None] * (t < 0.2), "bar": _burst(0.3, 0.1)},
             "acceleration_noise": {}}
    text = format_report(audibility_report(_result(stems, ev), scene="x.toml"))
    lines = text.splitlines()
    assert lines[0].startswith("audibility report: x.toml (8000 Hz, 1.000 s, 2 events in 2 impacts)")
    assert "listener mic (channel 0)" in lines
    row = next(l for l in lines if l.strip().startswith("modal/ball"))
    assert "2.000e-01" in row and "80.0" in row
    assert any(l.strip().startswith("acceleration_noise") and "silent" in l for l in lines)
    imp = [l for l in lines if l.strip().startswith(("0.1000", "0.3000"))]
    assert len(imp) == 2 and "ground+ball" in imp[0] and "modal/ball" in imp[0] and "modal/bar" in imp[1]
    assert imp[0].endswith("same") and imp[1].endswith("same")
    assert text.endswith("\n")


# ---- the command, on test_cli's tiny scene (an event log, one aluminium bar, ten modes; low-order radiation) ---

def test_report_command(tmp_path):
    from click.testing import CliRunner

    from impactsound.cli_report import report
    from test_cli import _HEADER, _log_scene
    scene = _log_scene(tmp_path, _HEADER + "0.05,ground,bar,0.05,0,0,0,0,1,0,0,0.5,2\n"
                                           "0.15,ground,bar,-0.05,0,0,0,0,1,0,0,0.3,1\n")
    scene.write_text(scene.read_text() + '[source.modal]\ntransfer = "low_order"\n')    # seconds, not an FDTD run
    r = CliRunner().invoke(report, [str(scene), "--json", "--window-ms", "40"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["schema"] == SCHEMA and rep["kinds"] == ["modal"] and rep["objects"] == ["bar"]
    a, b = rep["listeners"]["mic"]["impacts"]
    d = math.dist([0.05, 0, 0], [0.0, -0.5, 0.3]) / 343.2
    assert a["t_s"] == 0.05 and a["delay_s"] == pytest.approx(d) and rep["window"]["after_s"] == 0.04
    assert a["window_s"] == pytest.approx([0.05 + d - 5e-4, 0.05 + d + 0.04])
    assert a["dominant"] == {"kind": "modal", "object": "bar"} and a["objects"] == ["ground", "bar"]
    assert rep["listeners"]["mic"]["mix"]["peak_pa"] > 0
    r = CliRunner().invoke(report, [str(scene)])
    assert r.exit_code == 0, r.output
    assert "listener mic (channel 0)" in r.output and "modal/bar" in r.output
