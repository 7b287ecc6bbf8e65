"""Thinning the engine's rows of long resting contact (dynamics/hygiene.py ``thin_resting``) must not change the
events or the resting stretches: the reference is the same simulation with every row kept."""
import numpy as np

from impactsound.dynamics import GROUND
from impactsound.dynamics.hygiene import RawContacts, clean_contacts, thin_resting


def _rows(steps, vn, dt=2e-4):
    n = len(steps)
    imp = np.zeros((n, 3))
    imp[:, 2] = 9.81 * 0.01 * dt
    return RawContacts(t=np.asarray(steps) * dt, step=steps, a=np.full(n, GROUND), b=np.zeros(n, int),
                       point=np.zeros((n, 3)), normal=np.tile([0.0, 0.0, 1.0], (n, 1)), impulse=imp, vn=vn)


def test_keeps_margins_ends_and_sample_steps_and_drops_the_rest():
    steps = np.arange(1000)
    vn = np.full(1000, 1e-3)
    vn[500] = 0.5                                            # a knock in the middle of a long rest
    raw = _rows(steps, vn)
    kept = thin_resting(raw, v_min=0.05, margin_steps=40, keep_every=50, bridge_steps=4)
    k = set(kept.step.tolist())
    assert set(range(0, 40)) <= k and set(range(960, 1000)) <= k         # the contact's two ends
    assert set(range(460, 541)) <= k                                      # around the non-calm row
    assert {50, 100, 400, 600, 900} <= k                                  # one step every keep_every
    assert 45 not in k and 301 not in k and 701 not in k and 941 not in k
    assert len(kept) < 0.3 * len(raw)


def test_a_pause_longer_than_the_bridge_is_an_end():
    steps = np.r_[np.arange(0, 400), np.arange(410, 800)]               # a 10-step pause: the contact broke
    kept = thin_resting(_rows(steps, np.full(len(steps), 1e-3)), v_min=0.05, margin_steps=40, keep_every=1000,
                        bridge_steps=4)
    k = set(kept.step.tolist())
    assert set(range(360, 400)) <= k and set(range(410, 450)) <= k
    # with a bridge over it the pause is inside one contact and its neighbourhood thins
    kept = thin_resting(_rows(steps, np.full(len(steps), 1e-3)), v_min=0.05, margin_steps=40, keep_every=1000,
                        bridge_steps=12)
    assert 380 not in set(kept.step.tolist())


def test_events_of_a_synthetic_bounce_then_rest_are_unchanged():
    dt = 2e-4
    # a bounce (5 approaching steps), flight, landing, then 2 s of rest with the engine dropping a step now and then
    land1, land2 = np.arange(100, 105), np.arange(600, 606)
    rest = np.setdiff1d(np.arange(606, 10606), np.arange(700, 10606, 97))
    steps = np.r_[land1, land2, rest]
    vn = np.r_[np.full(5, 1.2), [0.6, 0.4, 0.2, 0.1, 0.02, 0.01], np.full(len(rest), 1e-3)]
    raw = _rows(steps, vn)
    raw.impulse[:11, 2] *= 50.0
    full = clean_contacts(raw, [0.02])
    thin = thin_resting(raw, v_min=0.05, margin_steps=int(np.ceil((2 * 2e-3 + 3e-3) / dt)) + 2, keep_every=50,
                        bridge_steps=4)
    assert len(thin) < 0.1 * len(raw)
    th = clean_contacts(thin, [0.02])
    assert len(full) == 2
    for name in ("t", "a", "b", "vn", "impulse", "point", "normal"):
        np.testing.assert_array_equal(getattr(th, name), getattr(full, name), err_msg=name)


def test_demo_scene_events_and_rests_are_those_of_the_unthinned_simulation(monkeypatch):
    import impactsound.dynamics.mujoco_backend as mb
    from impactsound.scene import load_scene
    from impactsound.scene.schema import demo_scene_path
    scene = load_scene(demo_scene_path())
    ground = scene.ground if scene.ground.enabled else None
    logs, rows = [], []
    orig = mb.run_dynamics
    for thin in (False, True):
        def run(*a, _thin=thin, **k):
            res = orig(*a, thin_rest=_thin, **k)
            rows.append(len(res.raw))
            return res
        monkeypatch.setattr(mb, "run_dynamics", run)
        logs.append(mb.simulate(scene.bodies, ground, scene.duration, scene.timestep, motion_rate=1000.0))
    full, thin = logs
    assert rows[1] < rows[0] / 5                   # the demo's bodies lie still for most of its 3 s
    assert len(full) == len(thin) > 20
    for name in ("t", "a", "b", "vn", "impulse", "point", "normal", "pos_a", "quat_b"):
        np.testing.assert_array_equal(getattr(thin, name), getattr(full, name), err_msg=name)
    for name in ("support_a_point", "support_b_normal"):
        np.testing.assert_allclose(getattr(thin, name), getattr(full, name), atol=1e-12, err_msg=name)
    assert full.resting.keys() == thin.resting.keys() and full.resting
    for i in full.resting:
        for r, s in zip(full.resting[i], thin.resting[i], strict=True):
            assert (r.t0, r.t1) == (s.t0, s.t1)
            np.testing.assert_array_equal(r.load, s.load)
            np.testing.assert_array_equal(r.point, s.point)
