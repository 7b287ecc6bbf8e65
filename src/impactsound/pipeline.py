"""The whole pipeline for one scene: events -> contact stage -> sources -> mix.

scene (TOML or dict) -> dynamics (MuJoCo) or a user event log -> the shared contact stage (contact/stage.py) ->
every registered source kind the scene asks for (sources/registry.py: modal, acceleration noise, plugins) -> mix.
:meth:`RenderResult.save` writes the WAV, its sidecar, stems and a spectrogram.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .constants import V_MIN
from .dynamics.events import EventLog, EventLogWarning
from .io.progress import QUIET, Progress
from .mix import mix_stems
from .scene.model import Scene
from .sources.registry import RenderContext

log = logging.getLogger("impactsound")


@dataclass
class RenderResult:
    """A rendered scene, in pascals at the listeners.

    Attributes
    ----------
    sample_rate : int
        [Hz].
    mix : ndarray, shape (L, n_samples)
        Pressure at each listener channel [Pa], all sources and objects summed.
    stems : dict
        {source kind: {object name: (L, n_samples) pressure [Pa]}}.
    events : EventLog
        The contact events rendered.
    listener_names : list of str
        One per channel (binaural listeners give NAME.L and NAME.R).
    info : dict
        What each source and object got (``info["objects"]``), also written to the WAV's JSON sidecar.
    """

    sample_rate: int
    mix: np.ndarray
    stems: dict[str, dict[str, np.ndarray]]
    events: EventLog
    listener_names: list[str]
    info: dict = field(default_factory=dict)

    def save(self, path: str | Path, *, stems: str | Path | None = None, png: str | Path | None = None,
             title: str = "", normalise: str | bool = "peak", lufs_target: float | None = None,
             full_scale_pa: float | None = None) -> list[Path]:
        """Write the mix as a float32 WAV (one channel per listener) and ``<path>.json`` (the scale, so that
        pascals = sample x ``pascals_per_unit``, and :attr:`info`).

        Parameters
        ----------
        path : str or Path
            Output ``.wav`` (or ``.flac``, 24-bit).
        stems : str or Path, optional
            Folder for one WAV per source kind and one per source kind and object, at the mix's scale.
        png : str or Path, optional
            Spectrogram (with the impact times marked) of the first channel.
        title : str
            Title of the spectrogram.
        normalise : {"peak", "lufs", "none", "shared"}
            ``peak`` (default; True): the loudest sample at -1 dBFS; ``lufs``: integrated loudness (ITU-R
            BS.1770-4) at ``lufs_target``; ``none`` (False): pascals directly; ``shared``: 1.0 = ``full_scale_pa``
            pascals (one scale for several renders). The sidecar keeps the scale.
        lufs_target : float, optional
            [LUFS] for ``lufs`` (default -23, EBU R128).
        full_scale_pa : float, optional
            [Pa] for ``shared``.

        Returns
        -------
        list of Path
            The files written (WAV, then PNG if any).
        """
        from .io.audio import DEFAULT_LUFS, output_gain, write_wav
        path = Path(path)
        gain, level = output_gain(self.mix, self.sample_rate, normalise,
                                  lufs_target=DEFAULT_LUFS if lufs_target is None else lufs_target,
                                  full_scale_pa=full_scale_pa)
        side = {"listeners": self.listener_names, "events": len(self.events), **self.info, "level": level}
        write_wav(path, self.mix, self.sample_rate, gain, side)
        log.info("wrote %s (peak %.3g Pa at the listener; scale in %s.json)", path, float(np.abs(self.mix).max())
                 if self.mix.size else 0.0, path)
        if self.mix.size and not np.any(self.mix):
            warn_silent(path, len(self.events), self.info)
        written = [path]
        if stems is not None:
            stems = Path(stems)
            for kind, per_obj in self.stems.items():
                total = sum(per_obj.values()) if per_obj else np.zeros_like(self.mix)
                write_wav(stems / f"{kind}.wav", total, self.sample_rate, gain, {"source": kind})
                for name, p in per_obj.items():
                    write_wav(stems / f"{kind}_{name}.wav", p, self.sample_rate, gain,
                              {"source": kind, "object": name})
            log.info("wrote stems to %s/", stems)
        if png is not None:
            from .io.plot import spectrogram_png
            spectrogram_png(Path(png), self.mix, self.sample_rate, title or path.stem, self.events.t)
            written.append(Path(png))
        return written


def warn_silent(path, n_events: int, info: dict) -> None:
    """Never a silent surprise: say why a written render is silent (no contacts, or bodies too small or stiff to
    have audible modes)."""
    if n_events == 0:
        log.warning("%s is silent: no contact events (an empty event log, or every contact slower than "
                    "v_min = 5 cm/s)", path)
    else:
        log.warning("%s is silent: %d contact events and %s audible modes per object. Small stiff objects "
                    "have no modes below 20 kHz in modal sound; lengthen the scene or drop objects from "
                    "higher up.", path, n_events, info.get("modes", {}))


def scene_events(scene: Scene, progress: Progress = QUIET, *, allow_implausible: bool = False) -> EventLog:
    """The scene's contact events: from its event log if it names one, else from the rigid-body engine.

    A user's log is checked against the scene (dynamics/plausibility.py: times within the duration, impulses
    within what the masses and speeds allow, points on the bodies, impulses pushing apart, ground present); a
    failed check is an :class:`InputError`, or with ``allow_implausible`` an ``ImplausibleEventWarning``. An
    empty log renders silence with an ``EmptyEventLogWarning``."""
    if scene.event_log:
        import warnings

        from .dynamics.events import CSV_ROW_BASE, EmptyEventLogWarning
        log = EventLog.load(scene.event_log, scene.body_names)
        if len(log) == 0:
            warnings.warn(f"{scene.event_log}: the event log has no events (only a header): the render is silent",
                          EmptyEventLogWarning, stacklevel=2)
        npz = Path(scene.event_log).suffix.lower() == ".npz"
        log = checked_events(log, scene, source=str(scene.event_log), row_base=0 if npz else CSV_ROW_BASE, npz=npz,
                             allow_implausible=allow_implausible)
        return log
    if getattr(scene, "motion", None):
        return motion_events(scene, progress)
    from .dynamics.cache import cached_simulate
    from .errors import InputError
    with progress.stage(f"dynamics ({len(scene.bodies)} bodies, {scene.duration:g} s)") as update:
        from .transfer.motion import CONTROL_RATE_HZ
        try:
            # cached by content hash (dynamics/cache.py): the same scene's simulation runs once
            return cached_simulate(scene.bodies, scene.ground if scene.ground.enabled else None, scene.duration,
                                   scene.timestep, progress=update, motion_rate=CONTROL_RATE_HZ)
        except InputError as exc:
            # the engine's checks (a body below the ground, two bodies overlapping) know the bodies, not the file
            msg = str(exc)
            if str(scene.path) in msg:
                raise
            raise InputError(f"{scene.path}: {msg}") from None


def motion_events(scene: Scene, progress: Progress = QUIET) -> EventLog:
    """The contact events of the scene's pose table (``[scene] motion``): read and checked (scene/poses.py), matched
    to the objects, and the contacts inferred from the motion (dynamics/from_motion.py)."""
    from .dynamics.from_motion import infer_events
    from .scene.poses import check_track, read_pose_table
    track = check_track(read_pose_table(scene.motion), scene.bodies, scene.duration)
    with progress.stage(f"contacts from motion ({len(scene.bodies)} bodies, {len(track.t)} frames at "
                        f"{track.frame_rate:.4g} fps)") as update:
        return infer_events(scene.bodies, scene.ground if scene.ground.enabled else None, track.t, track.position,
                            track.quaternion, progress=update, source=str(scene.motion))


def checked_events(log: EventLog, scene: Scene, *, source: str = "events", row_base: int = 0,
                   npz: bool = True, allow_implausible: bool = False) -> EventLog:
    """A user's events made safe to render: checked against the scene (dynamics/plausibility.py: times within the
    duration, impulses within what the masses and speeds allow, points on the bodies, impulses pushing apart,
    ground present; an :class:`InputError`, or with ``allow_implausible`` an ``ImplausibleEventWarning``), and body
    poses the log does not give taken from the scene (a copy; ``log`` is not changed)."""
    from .dynamics.plausibility import check_event_log
    if log.body_names and list(log.body_names) != scene.body_names:
        from .errors import InputError
        raise InputError(f"{source}: the events name bodies {list(log.body_names)} but the scene has "
                         f"{scene.body_names}; build the events for this scene's bodies, in its order")
    log = log.select(np.ones(len(log), bool))
    check_event_log(log, scene.bodies, scene.duration, ground_enabled=scene.ground.enabled,
                    ground_height=scene.ground.height, source=source, row_base=row_base, npz=npz,
                    allow_implausible=allow_implausible)
    _fill_missing_poses(log, scene, source, row_base)
    return log


class MissingPoseWarning(EventLogWarning):
    """An event without a logged body pose is rendered at the body's scene pose, far from where it hit."""


def _fill_missing_poses(log: EventLog, scene: Scene, source: str = "events", row_base: int = 0) -> None:
    """Imported logs may omit body poses: bodies are then taken at their initial scene pose (documented in
    docs/event-log.md). Where that pose puts the contact point farther from the body's surface than the
    plausibility tolerance, the radiation geometry would be wrong without a word: warn, naming the first row."""
    import warnings

    from .dynamics.plausibility import POINT_TOL_ABS, POINT_TOL_REL, _surface_distance
    from .rotation import quat_to_matrix
    for side in ("a", "b"):
        ids = getattr(log, side)
        pos, quat = getattr(log, f"pos_{side}"), getattr(log, f"quat_{side}")
        missing = ~np.isfinite(pos).all(axis=1) & (ids >= 0)
        for i in np.unique(ids[missing]):
            sel = np.flatnonzero(missing & (ids == i))
            body = scene.bodies[i]
            pos[sel] = body.position
            quat[sel] = body.quaternion
            R = quat_to_matrix(body.quaternion)[0]
            d = _surface_distance(body, (log.point[sel] - body.position) @ R)
            tol = max(POINT_TOL_ABS, POINT_TOL_REL * float(np.linalg.norm(body.mesh.extents)))
            far = np.flatnonzero(d > tol)
            if len(far):
                r = int(sel[far[0]])
                warnings.warn(f"{source}: {len(far)} events give no pose for body {body.name!r} (first: row "
                              f"{r + row_base}, t = {log.t[r]:.4g} s) and its scene pose puts the contact point {d[far[0]]:.3g} m "
                              f"from its surface: it radiates from the wrong place. Log the body poses (pos_{side}/"
                              f"quat_{side}; CSV columns {side}x..{side}qz)", MissingPoseWarning, stacklevel=3)


def prepare_render(scene, progress: Progress = QUIET, events: EventLog | None = None, *,
                   allow_implausible: bool = False):
    """What every render starts with: the scene loaded, its source kinds, its events (dynamics, its log or
    ``events``; resting contacts slower than v_min dropped) and the :class:`RenderContext` of the whole scene.
    Returns (scene, kinds, events, ctx)."""
    from .assets import cache_dir
    from .sources import registry
    if not isinstance(scene, Scene):
        from .scene import load_scene
        scene = load_scene(scene)
    cache_dir()                 # a cache path that cannot be used is an error now, not after the dynamics ran
    kinds = [registry.get(k, where=scene.path) for k in scene.sources]
    # the granular sources read their own event table and check it as the rigid logs are checked
    scene.__dict__["_allow_implausible"] = bool(allow_implausible)
    if events is None and not any(k.rigid_events for k in kinds):
        # granular sources only: their collisions come from the [granular] table, not from the rigid bodies
        events = EventLog.empty(scene.body_names)
    elif events is None:
        events = scene_events(scene, progress, allow_implausible=allow_implausible)
    else:
        events = checked_events(events, scene, allow_implausible=allow_implausible)
    # the bodies' recorded motion (radiation follows them while they ring; transfer/motion.py), when the dynamics
    # gave it: {body index: Trajectory}
    motion = {i: tr for i, tr in enumerate(getattr(events, "motion", None) or [])}
    resting = dict(getattr(events, "resting", None) or {})
    # Contacts slower than v_min are static contact, not collisions (Chadwick, Zheng & James 2012, sec. 4.3).
    slow = events.vn < V_MIN
    if slow.any():
        progress.message(f"dropping {int(slow.sum())} events slower than v_min = {V_MIN} m/s (resting contact)")
        events = events.select(~slow)
    progress.message(f"{len(events)} contact events")
    listeners = np.array([l.position for l in scene.listeners], dtype=np.float64)
    ears = np.array([l.ear if l.ear is not None else np.full(3, np.nan) for l in scene.listeners], np.float64)
    n = int(round(scene.duration * scene.sample_rate))
    ctx = RenderContext(scene, events, listeners, ears.reshape(-1, 3), scene.sample_rate, n, progress,
                        motion=motion, resting=resting)
    return scene, kinds, events, ctx


def describe_into(kind, prepared, info: dict, objects: dict) -> None:
    """Add what a source kind gave each object (its ``describe``) to a render's ``info`` and ``objects``, so that
    nothing is dropped without a word (also written to the sidecar JSON)."""
    if kind.describe is not None:
        top, per_object = kind.describe(prepared)
        info.update(top)
        for name, d in per_object.items():
            objects.setdefault(name, {}).update(d)


def render_scene(scene: Scene | str | Path | dict, progress: Progress = QUIET, events: EventLog | None = None, *,
                 allow_implausible: bool = False) -> RenderResult:
    """Render a scene: pressure [Pa] at every listener, per source kind and object.

    Parameters
    ----------
    scene : Scene, str, Path or dict
        The scene, or a scene TOML file / dict (read with :func:`~impactsound.scene.load_scene`).
    progress : Progress
        Progress reporting (the CLI's bars); silent by default.
    events : EventLog, optional
        Contact events to render instead of the scene's (dynamics or its event log); checked against the scene
        and completed as a scene's event log is (:func:`checked_events`).
    allow_implausible : bool
        Render a user event log that fails the plausibility checks (warnings instead of an error; see
        :func:`scene_events`).

    Returns
    -------
    RenderResult
        The mix (listeners x samples, pascals), stems per source kind and object, the events rendered and what
        each object got (``info["objects"]``).

    Every source kind in ``scene.sources`` (sources/registry.py) prepares its assets, then renders the events;
    all share one contact stage per event batch (contact/stage.py). The stems add into the mix.
    """
    scene, kinds, events, ctx = prepare_render(scene, progress, events, allow_implausible=allow_implausible)
    n = ctx.n_samples
    listeners = ctx.listeners
    stems: dict[str, dict[str, np.ndarray]] = {}
    info: dict = {"sources": list(scene.sources), "quality": getattr(scene, "quality", "default")}
    objects: dict = {b.name: {} for b in scene.bodies}
    for kind in kinds:
        prepared = kind.prepare(scene, progress)
        stems[kind.name] = kind.render(prepared, ctx)
        describe_into(kind, prepared, info, objects)
    info["objects"] = objects
    mix = mix_stems(stems, len(listeners), n)
    log.info("rendered %s: %d events, peak %.3g Pa", scene.path, len(events), float(np.abs(mix).max()) if n else 0.)
    return RenderResult(scene.sample_rate, mix, stems, events, [l.name for l in scene.listeners], info)
