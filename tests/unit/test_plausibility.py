"""Plausibility checks of user event logs (dynamics/plausibility.py): each typical mistake is an error naming the
file, the row and the column; logs written by `impactsound events` pass."""
import csv
import warnings

import numpy as np
import pytest

from impactsound.cli import main
from impactsound.dynamics import EventLog, ImplausibleEventWarning, check_event_log, simulate
from impactsound.errors import InputError
from impactsound.pipeline import scene_events
from impactsound.scene import demo_scene_path, load_scene

SCENE = """\
[scene]
duration = 0.5
sources = ["modal"]
{extra}
[ground]
material = "wood_hard"
{ground}
[[listener]]
name = "mic"
position = [0.0, -0.5, 0.3]
[[object]]
name = "ball"
shape = "sphere"
size = {{ radius = 0.02 }}
material = "steel"
position = [0.0, 0.0, 0.3]
[[object]]
name = "die"
shape = "box"
size = {{ size = [0.03, 0.03, 0.03] }}
material = "abs_plastic"
position = [0.1, 0.0, 0.2]
euler_deg = [10.0, 5.0, 0.0]
angular_velocity = [4.0, 7.0, 1.0]
"""


@pytest.fixture(scope="module")
def physical(tmp_path_factory):
    """(folder, CSV rows) of the log that `impactsound events` writes for the two-body drop."""
    d = tmp_path_factory.mktemp("plaus")
    (d / "sim.toml").write_text(SCENE.format(extra="", ground=""))
    assert main(["-q", "events", str(d / "sim.toml"), "--out", str(d / "physical.csv")]) == 0
    rows = list(csv.reader(open(d / "physical.csv")))
    assert len(rows) > 5
    return d, rows


def _scene_with_log(d, rows, name="log.csv", edit=None, ground=""):
    """Write ``rows`` (edited by ``edit(header_index, data_rows)``) to d/name and a scene that renders it."""
    header, body = rows[0], [list(r) for r in rows[1:]]
    if edit is not None:
        edit({c: i for i, c in enumerate(header)}, body)
    with open(d / name, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(body)
    toml = d / (name + ".toml")
    toml.write_text(SCENE.format(extra=f'event_log = "{name}"', ground=ground))
    return load_scene(toml)


def _scale(cols, k, only=None):
    def edit(ix, body):
        for r, row in enumerate(body):
            if only is None or r == only:
                for c in cols:
                    row[ix[c]] = repr(float(row[ix[c]]) * k)
    return edit


def _error(scene, **kw) -> str:
    with pytest.raises(InputError) as e:
        scene_events(scene, **kw)
    msg = str(e.value)
    assert "\n" not in msg and "np.float64" not in msg
    return msg


def test_physical_log_from_impactsound_events_passes(physical):
    d, rows = physical
    scene = _scene_with_log(d, rows, "same.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # not even a warning
        log = scene_events(scene)
    assert len(log) == len(rows) - 1


def test_physical_log_without_pose_columns_passes(physical):
    d, rows = physical
    keep = rows[0].index("vn") + 1
    scene = _scene_with_log(d, [r[:keep] for r in rows], "nopose.csv")
    # plausible, but rendered at the scene poses, far from where the bodies hit: said, with the CSV row
    from impactsound.pipeline import MissingPoseWarning
    with pytest.warns(MissingPoseWarning, match=r"nopose\.csv: \d+ events give no pose for body .* \(first: row \d+"):
        assert len(scene_events(scene)) == len(rows) - 1


def test_demo_scene_simulated_events_pass():
    scene = load_scene(demo_scene_path())
    log = simulate(scene.bodies, scene.ground, scene.duration, scene.timestep)
    assert len(log) > 20
    assert check_event_log(log, scene.bodies, scene.duration, source="demo", row_base=2) == []


def test_times_in_milliseconds(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "ms.csv", _scale(["time"], 1000)))
    assert "ms.csv: row 2, column time:" in msg and "after the scene's duration 0.5 s" in msg
    assert "milliseconds" in msg and "divide the column by 1000" in msg and "--allow-implausible" in msg


def test_events_after_the_duration(physical):
    d, rows = physical
    last = len(rows) - 2                                      # the last data row: spreadsheet row len(rows)
    msg = _error(_scene_with_log(d, rows, "late.csv", _scale(["time"], 5, only=last)))
    assert f"late.csv: row {len(rows)}, column time:" in msg and "(1 of " in msg
    assert "lengthen [scene] duration" in msg and "milliseconds" not in msg


def test_forces_given_as_impulses(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "force.csv", _scale(["jx", "jy", "jz"], 1 / 2e-4)))
    assert "force.csv: row 2, columns jx,jy,jz:" in msg
    assert "a force (N) rather than an impulse (N s)" in msg


def test_impulse_somewhat_too_large_is_an_error_without_the_force_hint(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "big.csv", _scale(["jx", "jy", "jz"], 20, only=2)))
    assert "big.csv: row 4, columns jx,jy,jz:" in msg and "the most a collision at vn" in msg
    assert "force" not in msg and "check that jx,jy,jz is the impulse in N s" in msg


def test_points_in_millimetres(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "mm.csv", _scale(["px", "py", "pz"], 1000)))
    assert "mm.csv: row 2, columns px,py,pz:" in msg and "from the surface of" in msg
    assert "millimetres" in msg and "divide by 1000" in msg


def test_point_off_the_body_in_metres(physical):
    d, rows = physical

    def move(ix, body):
        body[3][ix["px"]] = repr(float(body[3][ix["px"]]) + 0.5)
    msg = _error(_scene_with_log(d, rows, "off.csv", move))
    assert "off.csv: row 5, columns px,py,pz:" in msg and "millimetres" not in msg


def test_flipped_impulse_sign(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "flip.csv", _scale(["jx", "jy", "jz"], -1)))
    assert "flip.csv: row 2, columns jx,jy,jz:" in msg and "J.n =" in msg and "flip the sign of jx,jy,jz" in msg


def test_normal_and_impulse_both_flipped_on_a_ground_contact(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "nflip.csv", _scale(["nx", "ny", "nz", "jx", "jy", "jz"], -1)))
    assert "nflip.csv: row 2, columns nx,ny,nz:" in msg and "does not point from body_a to body_b" in msg


def test_ground_events_with_the_ground_disabled(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "noground.csv", ground="enabled = false"))
    assert "noground.csv: row 2, column body_a: 'ground'" in msg and "enabled = false" in msg


def test_allow_implausible_downgrades_to_warnings(physical):
    d, rows = physical
    scene = _scene_with_log(d, rows, "both.csv", lambda ix, b: (_scale(["time"], 1000)(ix, b),
                                                                 _scale(["jx", "jy", "jz"], -1)(ix, b)))
    msg = _error(scene)
    assert "milliseconds" in msg and "[1 more problem(s) after this one]" in msg
    with pytest.warns(ImplausibleEventWarning) as rec:
        log = scene_events(scene, allow_implausible=True)
    texts = [str(w.message) for w in rec if issubclass(w.category, ImplausibleEventWarning)]
    assert len(texts) == 2 and "milliseconds" in texts[0] and "J.n" in texts[1]
    assert all("rendered anyway" in t for t in texts) and len(log) == len(rows) - 1


def test_npz_rows_are_indices_and_columns_are_array_names(physical, tmp_path):
    d, rows = physical
    scene = _scene_with_log(d, rows, "base.csv")
    log = EventLog.load(d / "base.csv", scene.body_names)
    log.impulse[3] *= -1
    log.save(tmp_path / "ev.npz")
    with pytest.raises(InputError, match=r"ev\.npz: row 3, column impulse: .*J\.n = .*flip the sign of impulse"):
        check_event_log(EventLog.load(tmp_path / "ev.npz", scene.body_names), scene.bodies, scene.duration,
                        source=str(tmp_path / "ev.npz"), npz=True)


def test_non_unit_pose_quaternion(physical):
    d, rows = physical
    msg = _error(_scene_with_log(d, rows, "quat.csv", _scale(["bqw", "bqx", "bqy", "bqz"], 2, only=0)))
    assert "quat.csv: row 2, columns bqw,bqx,bqy,bqz: |q| = 2" in msg


def test_empty_log_has_no_problems():
    scene = load_scene(demo_scene_path())
    assert check_event_log(EventLog.empty(scene.body_names), scene.bodies, 1.0) == []


def test_impulse_bound_uses_the_heavier_body_and_skips_slow_events():
    """A light body between a heavy one and the floor passes on the heavy one's momentum: allowed. An event
    slower than v_min is dropped by the render, so its impulse is not judged."""
    scene = load_scene(demo_scene_path())
    names = scene.body_names
    bar, die = names.index("bar"), names.index("die")
    m_bar = scene.bodies[bar].mass
    assert m_bar > 20 * scene.bodies[die].mass
    die_at = np.array([0.3, 0.2, 0.008])                      # resting on the floor, axis-aligned
    top = die_at + [0, 0, 0.008]
    unit = [[1.0, 0, 0, 0]] * 2
    log = EventLog(t=[0.1, 0.2], a=[bar, bar], b=[die, die], point=[top, top], normal=[[0, 0, -1]] * 2,
                   impulse=[[0, 0, -1.5 * m_bar * 1.0], [0, 0, -1.0]], vn=[1.0, 0.01],
                   pos_a=[top + [0, 0, 0.006]] * 2, quat_a=unit, pos_b=[die_at] * 2, quat_b=unit, body_names=names)
    assert check_event_log(log, scene.bodies, 1.0) == []
    log.impulse[0] *= 10
    with pytest.raises(InputError, match="row 0, columns jx,jy,jz"):
        check_event_log(log, scene.bodies, 1.0)
