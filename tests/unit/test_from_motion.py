"""Contacts inferred from poses (dynamics/from_motion.py) and pose tables (scene/poses.py).

References: closed-form ballistic flights with an instantaneous bounce (restitution e, frictionless, at a time
between frames), a head-on collision of two spheres in flight (momentum conserved), and MuJoCo's own events for
the built-in demo (the simulation's motion sampled at 120 frames per second).
"""
from __future__ import annotations

import numpy as np
import pytest

from impactsound.dynamics.from_motion import infer_events, sampled_poses
from impactsound.errors import InputError
from impactsound.scene import load_scene
from impactsound.scene.poses import check_track, read_pose_table, write_pose_table

G = 9.81


def _scene(objects, ground=True, duration=1.0, tmp_path=None, **scene_kw):
    d = {"scene": {"duration": duration, "sources": ["modal"], **scene_kw},
         "source": {"modal": {"transfer": "low_order"}},
         "ground": {"material": "wood_hard", "enabled": ground},
         "listener": [{"name": "mic", "position": [0.0, -0.5, 0.3]}], "object": objects}
    return load_scene(d, base=tmp_path or ".")


def _bounce(t, z0, vz0, vx, e, r):
    """Centre height of a sphere of radius r dropped from z0 with vertical speed vz0, bouncing with restitution e
    on z = 0 (instantaneous), and its horizontal drift vx: positions (K, 3), first contact time, speed there."""
    # first contact: z0 + vz0 t - g t^2 / 2 = r
    a, b, c = -0.5 * G, vz0, z0 - r
    tc = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
    v_in = vz0 - G * tc                                   # < 0
    z = np.where(t < tc, z0 + vz0 * t - 0.5 * G * t ** 2,
                 r - e * v_in * (t - tc) - 0.5 * G * (t - tc) ** 2)
    P = np.column_stack([vx * t, np.zeros_like(t), z])
    return P, tc, -v_in


@pytest.mark.parametrize("fps", [60.0, 120.0])
def test_bounce_of_a_ball_between_frames(fps):
    """A steel ball bouncing once: onset at the sub-frame contact time, impulse m (1 + e) v, speed v, point under
    the centre."""
    scene = _scene([{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0, 0, 0.3]}])
    ball = scene.bodies[0]
    t = np.arange(0.0, 0.5, 1.0 / fps)
    e = 0.6
    P, tc, v = _bounce(t, 0.3, 0.0, 0.2, e, 0.01)
    assert np.min(np.abs(t - tc)) > 0.1 / fps            # the contact falls between frames
    # the second landing must stay after the window
    log = infer_events(scene.bodies, scene.ground, t, P[:, None], np.tile([1.0, 0, 0, 0], (len(t), 1, 1)))
    assert len(log) == 1, log.t
    # the icosphere's lowest point is a little above -r: allow that in time (0.2 mm at v)
    assert abs(log.t[0] - tc) < 2e-4 / v + 1e-4
    assert log.impulse[0][2] == pytest.approx(ball.mass * (1 + e) * v, rel=0.01)
    # frictionless: no tangential impulse (what the regularised solve leaks into it stays below 1 % of the normal:
    # 0.45 % measured; a friction or lever-arm error would be tens of per cent)
    assert abs(log.impulse[0][0]) < 0.01 * log.impulse[0][2]
    assert log.vn[0] == pytest.approx(v, rel=0.03)
    assert log.point[0][:2] == pytest.approx([0.2 * tc, 0.0], abs=1e-3)
    assert abs(log.point[0][2]) < 1e-3
    assert log.a[0] == -1 and log.b[0] == 0


def test_two_balls_collide_in_flight():
    """Head-on collision of two balls under gravity (no ground): the impulse on b is m_b's change of momentum,
    equal and opposite on a, at the sub-frame time they touch."""
    r = 0.01
    scene = _scene([{"name": "a", "shape": "sphere", "size": {"radius": r}, "material": "steel",
                     "position": [-0.2, 0, 1.0]},
                    {"name": "b", "shape": "sphere", "size": {"radius": r}, "material": "aluminium",
                     "position": [0.2, 0, 1.0]}], ground=False)
    ma, mb = scene.bodies[0].mass, scene.bodies[1].mass
    fps = 120.0
    t = np.arange(0.0, 0.3, 1.0 / fps)
    va, vb, e = 1.3, -1.1, 0.8
    tc = (0.4 - 2 * r) / (va - vb)                        # gap closes at the relative speed
    u = va - vb
    # post-collision velocities (1D, restitution e)
    va2 = (ma * va + mb * vb - mb * e * u) / (ma + mb)
    vb2 = (ma * va + mb * vb + ma * e * u) / (ma + mb)
    xa = np.where(t < tc, -0.2 + va * t, -0.2 + va * tc + va2 * (t - tc))
    xb = np.where(t < tc, 0.2 + vb * t, 0.2 + vb * tc + vb2 * (t - tc))
    z = 1.0 - 0.5 * G * t ** 2
    P = np.stack([np.column_stack([xa, 0 * t, z]), np.column_stack([xb, 0 * t, z])], axis=1)
    Q = np.tile([1.0, 0, 0, 0], (len(t), 2, 1))
    log = infer_events(scene.bodies, None, t, P, Q)
    assert len(log) == 1
    J = log.impulse[0] if log.b[0] == 1 else -log.impulse[0]
    assert J[0] == pytest.approx(mb * (vb2 - vb), rel=0.01)
    assert np.abs(J[1:]).max() < 0.01 * abs(J[0])
    assert abs(log.t[0] - tc) < 1e-3
    assert log.vn[0] == pytest.approx(u, rel=0.03)


def test_resting_box_makes_no_events_and_rests():
    scene = _scene([{"name": "box", "shape": "box", "size": {"size": [0.05, 0.04, 0.03]}, "material": "wood_hard",
                     "position": [0, 0, 0.015]}])
    t = np.arange(0.0, 0.5, 1.0 / 60)
    P = np.tile([0.0, 0.0, 0.015], (len(t), 1, 1))
    Q = np.tile([1.0, 0, 0, 0], (len(t), 1, 1))
    log = infer_events(scene.bodies, scene.ground, t, P, Q)
    assert len(log) == 0
    assert 0 in log.resting and log.resting[0][0].t1 - log.resting[0][0].t0 > 0.4


def _against_mujoco(scene, fps):
    """Simulate the scene with MuJoCo, infer the contacts from its motion at fps and match collision by
    collision: (inferred log, reference log, loud reference collisions (the largest carrying 90 % of the impulse),
    whether each was found, onset error [frames] and |J| ratio per reference collision (NaN: not found))."""
    from impactsound.dynamics import simulate
    from impactsound.dynamics.compare import match
    ref = simulate(scene.bodies, scene.ground, scene.duration, scene.timestep, motion_rate=1000)
    t, P, Q = sampled_poses(ref, fps, scene.duration)
    log = infer_events(scene.bodies, scene.ground, t, P, Q)
    m = match(ref, log, 1.5 / fps)
    Jr = np.linalg.norm(m.ref.impulse, axis=1)
    order = np.argsort(Jr)[::-1]
    loud = order[:int(np.searchsorted(np.cumsum(Jr[order]), 0.9 * Jr.sum()) + 1)]
    ratio = np.full(len(Jr), np.nan)
    ratio[m.matched] = m.impulse_ratio()
    onset = np.full(len(Jr), np.nan)
    onset[m.matched] = m.onset_error() * fps
    return log, ref, loud, m.matched, onset, ratio


def test_matches_mujoco_on_the_demo():
    """The demo simulated by MuJoCo, its motion sampled at 120 fps, the contacts inferred and compared collision
    by collision (dynamics/compare.py). Measured (bench/bench_motion_contacts.py): all 13 loud collisions found,
    onsets within 0.4 frame, 11 of 13 impulses within 15 %."""
    from impactsound.scene.schema import demo_scene_path
    scene = load_scene(demo_scene_path())
    log, ref, loud, found, onset, ratio = _against_mujoco(scene, 120.0)
    assert found[loud].all()
    assert np.abs(onset[loud]).max() <= 1.0
    assert np.median(ratio[loud]) == pytest.approx(1.0, abs=0.15)
    assert np.mean(np.abs(ratio[loud] - 1) <= 0.15) >= 0.6
    # every body's motion comes with the log (radiation follows it); the same bodies come to rest as in MuJoCo
    assert len(log.motion) == len(scene.bodies)
    assert set(log.resting) == set(ref.resting), (set(log.resting), set(ref.resting))


# ---- pose tables -----------------------------------------------------------------------------------------------

def _ball_scene(tmp_path, **kw):
    return _scene([{"name": "ball", "shape": "sphere", "size": {"radius": 0.008}, "material": "steel",
                    "position": [0, 0, 0.2]}], tmp_path=tmp_path, **kw)


def _ball_track(fps=120.0, duration=0.5):
    t = np.arange(0.0, duration, 1.0 / fps)
    P, tc, v = _bounce(t, 0.2, 0.0, 0.0, 0.5, 0.008)
    return t, P[:, None], np.tile([1.0, 0, 0, 0], (len(t), 1, 1)), tc


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".parquet"])
def test_pose_table_round_trip(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    t, P, Q, _ = _ball_track()
    path = write_pose_table(tmp_path / f"poses{suffix}", t, ["ball"], P, Q)
    tr = read_pose_table(path)
    assert tr.names == ["ball"]
    np.testing.assert_allclose(tr.t, t, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(tr.position, P, atol=1e-8)
    assert tr.frame_rate == pytest.approx(120.0)


def _write_csv(path, rows):
    path.write_text("time,body,x,y,z,qw,qx,qy,qz\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return path


_OK = [(0.0, "ball", 0, 0, 0.2, 1, 0, 0, 0), (0.01, "ball", 0, 0, 0.2, 1, 0, 0, 0),
       (0.02, "ball", 0, 0, 0.2, 1, 0, 0, 0)]


@pytest.mark.parametrize("name, rows, message", [
    ("order", [_OK[0], _OK[2], _OK[1]], r"order\.csv: row 4 \(body 'ball'\): time 0.01 s comes after 0.02"),
    ("dup", _OK + [_OK[2]], r"dup\.csv: body 'ball' has 2 rows at time 0.02 s"),
    ("quat", _OK[:2] + [(0.02, "ball", 0, 0, 0.2, 0.5, 0, 0, 0)], r"quat\.csv: body 'ball', frame 2 .* norm 0.5"),
    ("mm", _OK[:2] + [(0.02, "ball", 0, 0, 200.0, 1, 0, 0, 0)],
     r"mm\.csv: body 'ball' moves .* between frames 1 and 2 .* metres"),
    ("gap", _OK + [(0.0, "cup", 0, 0, 0.2, 1, 0, 0, 0)], r"gap\.csv: body 'cup' has no row at time 0.01 s \(frame 1\)"),
])
def test_pose_table_errors_name_file_body_and_frame(tmp_path, name, rows, message):
    with pytest.raises(InputError, match=message):
        read_pose_table(_write_csv(tmp_path / f"{name}.csv", rows))


def test_pose_table_columns_and_conventions(tmp_path):
    p = tmp_path / "cols.csv"
    p.write_text("time,body,x,y,z\n0,ball,0,0,0\n")
    with pytest.raises(InputError, match=r"cols\.csv: missing column\(s\) \['qw', 'qx', 'qy', 'qz'\]"):
        read_pose_table(p)
    # an NPZ must say its quaternion order
    t, P, Q, _ = _ball_track()
    np.savez(tmp_path / "xyzw.npz", time=t, body=np.array(["ball"]), position=P, quaternion=Q)
    with pytest.raises(InputError, match=r"xyzw\.npz: give orientations as 'quaternion_wxyz'"):
        read_pose_table(tmp_path / "xyzw.npz")
    # q and -q are one rotation: a sign flip is accepted and made continuous
    Q2 = Q.copy()
    Q2[5::2] *= -1
    tr = read_pose_table(write_pose_table(tmp_path / "flip.npz", t, ["ball"], P, Q2))
    assert (tr.quaternion[:, 0, 0] > 0).all()


def test_track_against_the_scene(tmp_path):
    scene = _ball_scene(tmp_path)
    t, P, Q, _ = _ball_track()
    tr = read_pose_table(write_pose_table(tmp_path / "p.npz", t, ["cup"], P, Q))
    with pytest.raises(InputError, match=r"p\.npz: body name\(s\) \['cup'\] are not objects of the scene"):
        check_track(tr, scene.bodies, scene.duration)
    scene2 = _scene([{"name": "ball", "shape": "sphere", "size": {"radius": 0.008}, "material": "steel",
                      "position": [0, 0, 0.2]},
                     {"name": "cup", "shape": "box", "size": {"size": [0.02, 0.02, 0.02]}, "material": "steel",
                      "position": [0.3, 0, 0.2]}])
    tr = read_pose_table(write_pose_table(tmp_path / "q.npz", t, ["ball"], P, Q))
    with pytest.raises(InputError, match=r"q\.npz: object\(s\) \['cup'\] have no poses; add their rows, or make "
                                         r"them static props"):
        check_track(tr, scene2.bodies, scene2.duration)


def test_interpenetrating_at_rest_is_refused(tmp_path):
    scene = _scene([{"name": "box", "shape": "box", "size": {"size": [0.05, 0.04, 0.03]}, "material": "wood_hard",
                     "position": [0, 0, 0.015]}])
    t = np.arange(0.0, 0.3, 1.0 / 60)
    P = np.tile([0.0, 0.0, 0.005], (len(t), 1, 1))        # 10 mm into the floor
    Q = np.tile([1.0, 0, 0, 0], (len(t), 1, 1))
    with pytest.raises(InputError, match=r"poses.csv: the ground and 'box' interpenetrate by 10 mm at frame 0"):
        infer_events(scene.bodies, scene.ground, t, P, Q, source="poses.csv")


def test_scene_with_motion_renders_its_inferred_contacts(tmp_path):
    """An aluminium bar falling flat (closed form, 120 fps) rendered from its pose table: one event at the
    bounce, heard at the microphone after the propagation delay."""
    from impactsound.pipeline import render_scene, scene_events
    t = np.arange(0.0, 0.5, 1.0 / 120)
    P, tc, _ = _bounce(t, 0.2, 0.0, 0.0, 0.5, 0.005)
    write_pose_table(tmp_path / "poses.csv", t, ["bar"], P[:, None], np.tile([1.0, 0, 0, 0], (len(t), 1, 1)))
    scene = _scene([{"name": "bar", "shape": "box", "size": {"size": [0.1, 0.02, 0.01]}, "material": "aluminium",
                     "position": [0, 0, 0.2]}], tmp_path=tmp_path, motion="poses.csv", duration=0.5)
    log = scene_events(scene)
    # a bar landing flat touches at its four corners at once: one collision (one event per corner)
    assert np.all(np.abs(log.t - tc) < 1e-3) and len(log) >= 1
    assert log.impulse[:, 2].sum() == pytest.approx(scene.bodies[0].mass * 1.5 * np.sqrt(2 * G * 0.195), rel=0.02)
    res = render_scene(scene)
    onset = int(np.argmax(np.abs(res.mix[0]) > 1e-3 * np.abs(res.mix[0]).max()))
    delay = np.linalg.norm(np.array([0.0, -0.5, 0.3])) / scene.air.c
    assert onset / res.sample_rate == pytest.approx(tc + delay, abs=2e-3)
    with pytest.raises(InputError, match="gives both motion"):
        _ball_scene(tmp_path, motion="poses.csv", event_log="poses.csv")
    with pytest.raises(InputError, match=r"motion = 'nope.csv': .* not found"):
        _ball_scene(tmp_path, motion="nope.csv")


def test_quaternion_order_mix_up_is_detected():
    """A box spinning freely (MuJoCo, 60 fps) keeps its angular momentum to 0.06 % per frame; the same
    quaternions read in (x, y, z, w) order change it by 9 % per frame: a warning naming the body."""
    import warnings

    from impactsound.dynamics import simulate
    from impactsound.dynamics.from_motion import MotionWarning
    scene = _scene([{"name": "die", "shape": "box", "size": {"size": [0.03, 0.02, 0.01]}, "material": "abs_plastic",
                     "position": [0, 0, 1.0], "angular_velocity": [3.0, 20.0, 5.0]}], ground=False)
    ref = simulate(scene.bodies, None, 0.4, scene.timestep, motion_rate=1000)
    t, P, Q = sampled_poses(ref, 60, 0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MotionWarning)
        infer_events(scene.bodies, None, t, P, Q)
    with pytest.warns(MotionWarning, match=r"body 'die' spins without keeping its angular momentum .* \(w, x, y, z\)"):
        infer_events(scene.bodies, None, t, P, Q[..., [1, 2, 3, 0]])


@pytest.mark.slow
def test_matches_mujoco_on_the_papers_table():
    """The acceleration-noise paper's table scene (11 objects: dice, coin, ball, keys on a ring held by ball joints,
    mug, plate and bowl onto a static table top) at 120 fps against MuJoCo's own events. Measured
    (bench/bench_motion_contacts.py): 17 of 19 loud collisions found, onsets within 0.35 frame, 14 of 17 impulses
    within 15 %."""
    from impactsound.scene.schema import demo_scene_path
    scene = load_scene(demo_scene_path().with_name("table.toml"))
    log, ref, loud, found, onset, ratio = _against_mujoco(scene, 120.0)
    assert found[loud].mean() >= 0.85
    hit = loud[found[loud]]
    assert np.abs(onset[hit]).max() <= 1.0
    assert np.mean(np.abs(ratio[hit] - 1) <= 0.15) >= 0.75
