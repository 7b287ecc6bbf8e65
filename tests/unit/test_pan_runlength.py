"""Adaptive PAN precompute length (sources/pan/solve.py, sources/pan/precompute.py): the decay test on synthetic
receiver series and the plan's step range. Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for
Improved Rigid-Body Sound", sec. 5: concave objects need 10-13 ms of simulated time, compact convex ones ~1 ms."""
import numpy as np
import pytest
import trimesh

from impactsound.materials import get_material
from impactsound.sources.pan.precompute import CAP_RB_TIMES, plan_pan
from impactsound.sources.pan.solve import PANGridPlan, decay_envelope, has_decayed, plan_grid


def _plan(window=20, db=40.0, lo=10, hi=10000):
    return PANGridPlan(dx=1e-3, dt=1e-6, n_steps=hi, shape=(8, 8, 8), npml=2, half_width=1e-3, min_steps=lo,
                       decay_db=db, window_steps=window)


def test_decay_test_on_a_ringing_decay():
    """A decaying ring exp(-n/100) sin(2 pi n/40): 40 dB down (1 %) at n = 100 ln 100 = 460.5; with a trailing
    window of 20 steps (half a period) the test first passes one window later, whatever the phase."""
    n = np.arange(2000)
    plan = _plan()
    for phase in (0.0, 0.7, 1.9):
        env = decay_envelope((np.exp(-n / 100) * np.sin(2 * np.pi * n / 40 + phase))[None])
        first = next(k for k in range(plan.min_steps, 2000) if has_decayed(env[:k], plan))
        assert 460 <= first <= 460 + plan.window_steps + 20, (phase, first)
    assert has_decayed(np.zeros(30), plan)                       # nothing radiated: nothing to wait for
    assert not has_decayed(np.r_[np.zeros(30), 1.0], plan)


def test_inner_shells_cover_a_ring_zero_crossing():
    """A ring that does not decay, seen on the outer shell and, a quarter period earlier, on an inner one (1/R
    louder, weight R_i / R_M): on the outer shell alone a trailing window much shorter than the period passes for
    decay at a zero crossing; with the inner shell in the envelope it never does."""
    n = np.arange(4000)
    outer = np.sin(2 * np.pi * n / 2000)
    inner = 2.0 * np.sin(2 * np.pi * (n + 500) / 2000)
    plan = _plan(window=2, lo=1)
    env1 = decay_envelope(outer[None])
    env2 = decay_envelope(np.stack([outer, inner]), np.array([1.0, 0.5]))
    assert any(has_decayed(env1[:k], plan) for k in range(900, 1100))            # fooled at n = 1000
    assert not any(has_decayed(env2[:k], plan) for k in range(2, 4000))
    assert env2.min() > 0.7


def test_plan_step_range_and_costs():
    fixed = plan_grid(2e-5, 0.01, 0.04, 1e-3)
    assert not fixed.adaptive and fixed.step_range() == (fixed.n_steps, fixed.n_steps)
    ad = plan_grid(2e-5, 0.01, 0.04, 5e-3, min_duration=1e-3, decay_window=0.01 / 343.2)
    assert ad.adaptive and ad.step_range() == (int(np.ceil(1e-3 / ad.dt)), int(np.ceil(5e-3 / ad.dt)))
    assert ad.window_steps == int(np.ceil(0.01 / 343.2 / ad.dt)) and ad.check_steps == ad.window_steps // 2
    assert ad.cell_updates(6) == fixed.cell_updates(6) and ad.cell_updates(6, most=True) > 4 * fixed.cell_updates(6)


def test_plan_pan_defaults_to_the_adaptive_length():
    """Default: at least the old fixed length 4h + R_M/c + 5 R_b/c, at most that + 60 R_b/c; an explicit
    duration is a fixed length (as before)."""
    ball = trimesh.creation.icosphere(subdivisions=2, radius=0.01)
    mat = get_material("steel")
    job = plan_pan(ball, mat, h=36e-6)
    t_min = 4 * job.h + job.radii[-1] / job.c + 5 * job.R_b / job.c
    assert job.duration == pytest.approx(t_min) and job.plan.adaptive
    assert job.plan.min_steps == int(np.ceil(t_min / job.plan.dt))
    assert job.max_duration == pytest.approx(t_min + CAP_RB_TIMES * job.R_b / job.c, abs=job.plan.dt)
    e = job.estimate()
    assert e["steps"] == job.plan.min_steps and e["max_steps"] == job.plan.n_steps and e["adaptive"]
    fixed = plan_pan(ball, mat, h=36e-6, duration=2e-4)
    assert not fixed.plan.adaptive and fixed.plan.n_steps == int(np.ceil(2e-4 / fixed.plan.dt))
    assert fixed.key != job.key != plan_pan(ball, mat, h=36e-6, max_duration=2e-3).key
    assert plan_pan(ball, mat, h=36e-6).key == job.key                        # deterministic key
