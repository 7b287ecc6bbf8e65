"""The rigid-body simulation of a scene, cached by content hash.

Why: a render that changes only what is heard (listeners, sources, mix, radiation) runs the same MuJoCo
simulation again; for a small object that is a tenth of a warm render, and for a long scene with many bodies
it is most of it. The simulation's result (the event log, every body's recorded motion and its resting
stretches) is stored as one asset (assets/store.py: HDF5, atomic write, data hash checked on read) whose key is
a hash of everything the simulation reads: every field of every body (mesh bytes, material, mass, pose,
velocities, mount, fracture group...), the ground, the duration and time step, the engine settings, and the
versions of this package and of MuJoCo.

Output never depends on what the cache holds: a simulation that misses the cache is stored and its result read
back from the stored arrays, so a first and a later render get the same numbers to the bit. A body field this
module cannot hash (an unknown object) means no caching for that scene, never a stale hit. A corrupted or
unreadable entry is simulated again and replaced (with a warning).
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from pathlib import Path

import numpy as np

from ..assets.store import Asset, asset_lock, cache_dir, content_hash, read_asset, write_asset
from ..errors import AssetError
from .events import EventLog

log = logging.getLogger("impactsound")

KIND = "dynamics"
KIND_VERSION = 1
#: bump when the simulation or its post-processing (contact merging, motion record, rests) changes its output
CODE_VERSION = "dynamics-1"

_EVENT_FIELDS = [f.name for f in dataclasses.fields(EventLog) if f.name != "body_names"]


class Unhashable(Exception):
    """A scene value with no stable content: the scene's simulation is not cached."""


def _describe(obj, depth: int = 0):
    """A JSON-able description of ``obj`` whose hash changes whenever its content does (arrays by value)."""
    if depth > 12:
        raise Unhashable("nested too deep")
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return repr(obj)                                          # exact, and NaN / inf survive JSON
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return _describe(obj.item(), depth)
    if isinstance(obj, np.ndarray):
        return {"__array__": content_hash(obj)}
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (list, tuple)):
        return [_describe(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _describe(v, depth + 1) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if hasattr(obj, "vertices") and hasattr(obj, "faces"):        # a mesh: its geometry is what is simulated
        return {"__mesh__": content_hash(np.asarray(obj.vertices, np.float64), np.asarray(obj.faces, np.int64))}
    if dataclasses.is_dataclass(obj):
        return {"__type__": type(obj).__qualname__,
                **{f.name: _describe(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj)}}
    if hasattr(obj, "__dict__") and not callable(obj):
        return {"__type__": type(obj).__qualname__,
                **{k: _describe(v, depth + 1) for k, v in sorted(vars(obj).items()) if not k.startswith("_")}}
    raise Unhashable(f"cannot describe a {type(obj).__qualname__}")


def dynamics_key(bodies, ground, duration: float, timestep: float, settings: dict) -> str | None:
    """Content hash of a simulation's inputs (module docstring), or None when some input cannot be hashed."""
    from importlib.metadata import version

    from ..assets.store import _package_version
    try:
        mj = version("mujoco")
    except Exception:                        # pragma: no cover - MuJoCo is a dependency
        mj = "unknown"
    try:
        desc = {"bodies": [_describe(b) for b in bodies], "ground": _describe(ground),
                "duration": repr(float(duration)), "timestep": repr(float(timestep)),
                "settings": _describe(settings)}
    except Unhashable as exc:
        log.debug("dynamics not cached: %s", exc)
        return None
    return content_hash(KIND, CODE_VERSION, _package_version(), mj, desc)


# ---- the log as arrays and back --------------------------------------------------------------------------------
def _to_asset(ev: EventLog, key: str) -> Asset:
    arrays, meta = {}, {"body_names": list(ev.body_names), "events": [], "motion": None, "resting": None}
    for name in _EVENT_FIELDS:
        a = getattr(ev, name)
        if a is not None:
            arrays[f"ev_{name}"] = np.asarray(a)
            meta["events"].append(name)
    motion = getattr(ev, "motion", None)
    if motion is not None:
        meta["motion"] = []
        for i, tr in enumerate(motion):
            arrays[f"mo_{i}_t"], arrays[f"mo_{i}_p"] = tr.t, tr.position
            if tr.quaternion is not None:
                arrays[f"mo_{i}_q"] = tr.quaternion
            meta["motion"].append({"interpolation": tr.interpolation, "quaternion": tr.quaternion is not None})
    resting = getattr(ev, "resting", None)
    if resting is not None:
        meta["resting"] = {}
        for i, rests in resting.items():
            meta["resting"][str(int(i))] = len(rests)
            for r, rest in enumerate(rests):
                arrays[f"re_{i}_{r}_t"] = np.array([rest.t0, rest.t1], np.float64)
                for f in ("point", "normal", "load", "support"):
                    arrays[f"re_{i}_{r}_{f}"] = np.asarray(getattr(rest, f))
    return Asset(kind=KIND, kind_version=KIND_VERSION, arrays=arrays, meta=meta, inputs_hash=key)


def _from_asset(asset: Asset) -> EventLog:
    from ..scene.trajectory import Trajectory
    from .resting import Rest
    A, meta = asset.arrays, asset.meta
    try:
        ev = EventLog(**{name: A[f"ev_{name}"] for name in meta["events"]}, body_names=list(meta["body_names"]))
        if meta.get("motion") is not None:
            ev.motion = []
            for i, m in enumerate(meta["motion"]):
                q = A[f"mo_{i}_q"] if m["quaternion"] else None
                tr = Trajectory(A[f"mo_{i}_t"], A[f"mo_{i}_p"], q, m["interpolation"])
                # the stored quaternions as they are: Trajectory's normalisation ran before they were stored, and
                # running it again could move the last bit
                tr.quaternion = q if q is None else np.ascontiguousarray(q, np.float64)
                ev.motion.append(tr)
        if meta.get("resting") is not None:
            ev.resting = {}
            for i, n in meta["resting"].items():
                ev.resting[int(i)] = [Rest(float(A[f"re_{i}_{r}_t"][0]), float(A[f"re_{i}_{r}_t"][1]),
                                           A[f"re_{i}_{r}_point"], A[f"re_{i}_{r}_normal"], A[f"re_{i}_{r}_load"],
                                           A[f"re_{i}_{r}_support"]) for r in range(int(n))]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise AssetError(f"{asset.path}: dynamics asset is incomplete ({exc}); delete it or rebuild it") from None
    return ev


def cached_simulate(bodies, ground, duration: float, timestep: float, *, progress=None, motion_rate=None,
                    cache: str | Path | None = None, **kw) -> EventLog:
    """:func:`~impactsound.dynamics.simulate` through the cache (module docstring): the same arguments, the same
    EventLog (with ``motion`` and ``resting``), read from ``cache`` (default ``assets.cache_dir()``) when this
    simulation ran before.

    Returns
    -------
    EventLog
    """
    from .mujoco_backend import simulate
    key = dynamics_key(bodies, ground, duration, timestep, {"motion_rate": motion_rate, **kw})
    if key is None:
        return simulate(bodies, ground, duration, timestep, progress=progress, motion_rate=motion_rate, **kw)
    path = Path(cache if cache is not None else cache_dir()) / f"dynamics_{key[:40]}.h5"
    with asset_lock(path):
        if path.is_file():
            try:
                ev = _from_asset(read_asset(path, KIND, kind_version=KIND_VERSION, inputs_hash=key))
                if progress is not None:
                    progress(1.0)
                return ev
            except AssetError as exc:
                warnings.warn(f"{exc}: simulating again", stacklevel=2)
        ev = simulate(bodies, ground, duration, timestep, progress=progress, motion_rate=motion_rate, **kw)
        asset = _to_asset(ev, key)
        write_asset(path, asset)
        asset.path = path
        return _from_asset(asset)
