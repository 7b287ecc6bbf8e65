"""The simulation cache (dynamics/cache.py): a hit gives the simulation's own result to the bit, any change of
what the simulation reads misses, a damaged entry is simulated again, and what cannot be hashed is never cached."""
import warnings

import numpy as np
import pytest

from impactsound.dynamics import cache as C
from impactsound.dynamics import mujoco_backend as MB
from impactsound.scene import load_scene


def _scene(**obj):
    d = {"scene": {"duration": 0.4},
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.02}, "material": "steel",
                     "position": [0.0, 0.0, 0.1], "velocity": [0.3, 0.0, 0.0], **obj},
                    {"name": "box", "shape": "box", "size": {"size": [0.05, 0.04, 0.03]}, "material": "wood_hard",
                     "position": [0.1, 0.0, 0.02]}],
         "listener": [{"position": [0.5, 0.0, 0.3]}]}
    return load_scene(d)


def _args(sc):
    return (sc.bodies, sc.ground, sc.duration, sc.timestep)


def _same(a, b):
    for name in C._EVENT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None) and (x is None or np.array_equal(x, y, equal_nan=True)), name
    assert len(a.motion) == len(b.motion)
    for p, q in zip(a.motion, b.motion):
        assert np.array_equal(p.t, q.t) and np.array_equal(p.position, q.position)
        assert np.array_equal(p.quaternion, q.quaternion)
    assert sorted(a.resting) == sorted(b.resting)
    for i in a.resting:
        for r, s in zip(a.resting[i], b.resting[i]):
            assert (r.t0, r.t1) == (s.t0, s.t1) and np.array_equal(r.load, s.load)
            assert np.array_equal(r.point, s.point) and np.array_equal(r.support, s.support)


def test_a_hit_is_the_simulation_to_the_bit_and_runs_no_engine(tmp_path, monkeypatch):
    sc = _scene()
    direct = MB.simulate(*_args(sc), motion_rate=1000.0)
    first = C.cached_simulate(*_args(sc), motion_rate=1000.0, cache=tmp_path)
    assert len(direct) > 0 and direct.resting                      # the ball lands and comes to rest
    _same(direct, first)
    calls = []
    monkeypatch.setattr(MB, "simulate", lambda *a, **k: calls.append(1))
    second = C.cached_simulate(*_args(sc), motion_rate=1000.0, cache=tmp_path)
    assert not calls
    _same(direct, second)
    assert len(list(tmp_path.glob("dynamics_*.h5"))) == 1


@pytest.mark.parametrize("change", [
    {"velocity": [0.3 + 1e-12, 0.0, 0.0]},
    {"material": {"rho": 7850.0, "E": 2e11, "nu": 0.3, "alpha": 1.0, "beta": 1e-7, "restitution": 0.5}},
    {"position": [0.0, 0.0, 0.10000001]},
    {"size": {"radius": 0.0201}},
])
def test_any_change_of_an_input_misses(change):
    base = _scene()
    other = _scene(**change)
    k0 = C.dynamics_key(*_args(base), {"motion_rate": 1000.0})
    assert k0 == C.dynamics_key(*_args(_scene()), {"motion_rate": 1000.0})          # stable across loads
    assert C.dynamics_key(*_args(other), {"motion_rate": 1000.0}) != k0
    assert C.dynamics_key(*_args(base), {"motion_rate": 500.0}) != k0
    assert C.dynamics_key(base.bodies, base.ground, 0.5, base.timestep, {"motion_rate": 1000.0}) != k0
    assert C.dynamics_key(base.bodies, base.ground, base.duration, 1e-4, {"motion_rate": 1000.0}) != k0


def test_a_damaged_entry_is_simulated_again(tmp_path):
    sc = _scene()
    first = C.cached_simulate(*_args(sc), motion_rate=1000.0, cache=tmp_path)
    path = next(tmp_path.glob("dynamics_*.h5"))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = b"\0" * 64
    path.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="simulating again"):
        again = C.cached_simulate(*_args(sc), motion_rate=1000.0, cache=tmp_path)
    _same(first, again)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(first, C.cached_simulate(*_args(sc), motion_rate=1000.0, cache=tmp_path))   # replaced


def test_what_cannot_be_hashed_is_never_cached(tmp_path, monkeypatch):
    sc = _scene()
    sc.bodies[0].shell = lambda: None                      # an object with no content to hash
    assert C.dynamics_key(*_args(sc), {}) is None
    calls = []
    real = MB.simulate
    monkeypatch.setattr(MB, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    C.cached_simulate(*_args(sc), cache=tmp_path)
    C.cached_simulate(*_args(sc), cache=tmp_path)
    assert len(calls) == 2 and not list(tmp_path.glob("dynamics_*.h5"))
