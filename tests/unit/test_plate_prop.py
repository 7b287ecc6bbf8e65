"""Plate props (sources/plate_prop.py): a static thin box with vibration = "plate" (a table top) rings as the
simply supported plate model of the plate floors (sources/ground/plate.py, checked there against the infinite
plate, the baffled monopole and the mass-law click). Here: the prop route gives the floor route's sound for the
same impacts, the scene wiring, and bad input."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import impactsound as isnd
from impactsound.dynamics.events import EventLog
from impactsound.errors import InputError
from impactsound.scene import load_scene


def _table(**table):
    t = {"name": "table", "shape": "box", "size": {"size": [1.8, 0.8, 0.025]}, "material": "mdf",
         "position": [0.0, 0.0, 0.3875], "static": True, "vibration": "plate"}
    t.update(table)
    return {"scene": {"duration": 0.6},
            "ground": {"material": "concrete"},
            "listener": [{"name": "mic", "position": [0.3, -0.5, 0.9]}],
            "object": [t, {"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                           "position": [0.2, 0.1, 0.5]}]}


def test_table_prop_sounds_as_the_plate_floor_of_the_same_impacts():
    """A steel ball bouncing on a 1.8 x 0.8 m, 25 mm MDF table top: the table's stem is the plate floor's sound of
    the same events on a plate floor at the table's height (same listener offset) within 2 % of the peak
    (measured 0.9 %: the two routes' contact stages give Hertz times 0.5 % apart). The table has no FEM modes
    (the modal sidecar says why), and "plate" joins the default sources."""
    scene = load_scene(_table())
    assert "plate" in scene.sources
    from impactsound.sources.modal import prepare as modal_prepare
    assert modal_prepare(scene).notes["table"].startswith("vibration = \"plate\"")
    scene.sources = ["plate"]                         # the plate's sound alone (the suite's time)
    r = isnd.render_scene(scene)
    y = r.stems["plate"]["table"][0]
    ev = r.events
    sel = (ev.a == 0) | (ev.b == 0)
    assert sel.sum() >= 2
    floor = {"scene": {"duration": 0.6, "sources": ["ground"]},
             "ground": {"material": "mdf", "model": "plate", "height": 0.4,
                        "plate": {"length": 1.8, "width": 0.8, "thickness": 0.025}},
             "listener": [{"name": "mic", "position": [0.3, -0.5, 0.9]}],
             "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                         "position": [0.2, 0.1, 0.5]}]}
    log = EventLog(t=ev.t[sel], a=np.where(ev.a[sel] == 0, -1, ev.a[sel] - 1),
                   b=np.where(ev.b[sel] == 0, -1, ev.b[sel] - 1), point=ev.point[sel], normal=ev.normal[sel],
                   impulse=ev.impulse[sel], vn=ev.vn[sel], body_names=["ball"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # the log gives no poses (the ball's scene pose is used)
        y2 = isnd.render_scene(load_scene(floor), events=log).stems["ground"]["ball"][0]
    assert np.abs(y).max() > 1.0
    assert np.abs(y - y2).max() < 0.02 * np.abs(y2).max()


@pytest.mark.parametrize("change, match", [
    ({"static": False}, r"vibration = \"plate\" is for a static prop"),
    ({"shape": "sphere", "size": {"radius": 0.1}}, r"needs shape = \"box\""),
    ({"euler_deg": [0.0, 0.0, 30.0]}, r"must lie flat and unrotated"),
    ({"size": {"size": [0.3, 0.2, 0.1]}, "position": [0.0, 0.0, 0.35]}, r"0\.1 m thick, more than a tenth"),
])
def test_bad_plate_props_are_refused(change, match):
    with pytest.raises(InputError, match=match):
        load_scene(_table(**change))


def test_plate_prop_needs_its_source_and_a_listener_above_it():
    d = _table()
    d["scene"]["sources"] = ["modal"]
    with pytest.raises(InputError, match=r"'table' has vibration = \"plate\" but \[scene\] sources has no"):
        load_scene(d)
    d = _table()
    d["scene"]["sources"] = ["plate"]
    d["listener"][0]["position"] = [0.3, -0.5, 0.2]
    with pytest.raises(InputError, match=r"not above the top of 'table'"):
        isnd.render_scene(load_scene(d))
