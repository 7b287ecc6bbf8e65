"""What each object gets is decided by the scene alone and reported per object (render result and sidecar)."""
import json

import pytest

from impactsound.cli import main
from impactsound.dynamics.events import GROUND, EventLog
from impactsound.pipeline import render_scene
from impactsound.scene import parse_scene

BALL = {"name": "ball", "shape": "sphere", "size": {"radius": 0.008}, "material": "steel",
        "position": [0.0, 0.0, 0.008]}


def _scene(tmp_path, **scene):
    d = {"scene": {"duration": 0.2, "sources": ["acceleration_noise"], **scene},
         "listener": [{"position": [0.0, -0.5, 0.3]}], "object": [dict(BALL)]}
    return parse_scene(d, base=tmp_path)


def test_object_over_pan_budget_is_named_with_the_reason_whatever_the_cache_holds(tmp_path, monkeypatch):
    """Over budget: no acceleration noise, said in the result with the reason, and the cache is never asked (a
    field cached by another scene must not change this scene's sound)."""
    import impactsound.sources.pan.precompute as pre

    def cached(*a, **k):
        raise AssertionError("the cache decided which model an object gets")

    monkeypatch.setattr(pre, "cached_pan_field", cached)
    scene = _scene(tmp_path, pan_budget=1.0)
    ev = EventLog(t=[0.05], a=[GROUND], b=[0], point=[[0.0, 0.0, 0.0]], normal=[[0, 0, 1.0]],
                  impulse=[[0, 0, 0.01]], vn=[1.0], pos_b=[scene.bodies[0].position],
                  quat_b=[scene.bodies[0].quaternion], body_names=["ball"])
    res = render_scene(scene, events=ev)
    o = res.info["objects"]["ball"]
    assert o["acceleration_noise"] == "none"
    assert "budget = 1" in o["reason"] and "cell updates" in o["reason"]


def test_sidecar_lists_every_object(tmp_path):
    """A ball with no modes below 20 kHz and over the PAN budget: the sidecar says both, not silence."""
    lines = ["[scene]", "duration = 0.1", 'sources = ["modal", "acceleration_noise"]', "pan_budget = 1.0",
             'transfer = "low_order"', "", "[[listener]]", "position = [0.0, -0.5, 0.3]", "", "[[object]]",
             'name = "ball"', 'shape = "sphere"', "size = { radius = 0.008 }", 'material = "steel"',
             "position = [0.0, 0.0, 0.3]"]
    p = tmp_path / "s.toml"
    p.write_text("\n".join(lines) + "\n")
    wav = tmp_path / "x.wav"
    assert main(["-q", "render", str(p), "--out", str(wav)]) == 0
    side = json.loads((tmp_path / "x.wav.json").read_text())
    o = side["objects"]["ball"]
    assert o["modes"] == 0 and o["acceleration_noise"] == "none" and "budget" in o["reason"]
    assert o["radiation"].startswith("none")
