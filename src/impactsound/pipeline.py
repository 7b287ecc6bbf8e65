"""The whole pipeline for one scene: events -> modal models -> sources -> mix.

scene (TOML) -> dynamics (MuJoCo) or a user event log -> sources (modal: FEM models + Hertz forces + synthesis +
radiation) -> mix. Files are written by the caller (cli.py / io/), never here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constants import V_MIN
from .dynamics.events import EventLog
from .io.progress import QUIET, Progress
from .mix import mix_stems
from .scene.model import Scene



@dataclass
class RenderResult:
    sample_rate: int
    mix: np.ndarray                                  # (listeners, samples) pressure [Pa]
    stems: dict[str, dict[str, np.ndarray]]          # source kind -> object -> (listeners, samples) [Pa]
    events: EventLog
    listener_names: list[str]
    info: dict = field(default_factory=dict)


def scene_events(scene: Scene, progress: Progress = QUIET, *, allow_implausible: bool = False) -> EventLog:
    """The scene's contact events: from its event log if it names one, else from the rigid-body engine.

    A user's log is checked against the scene (dynamics/plausibility.py: times within the duration, impulses
    within what the masses and speeds allow, points on the bodies, impulses pushing apart, ground present); a
    failed check is an :class:`InputError`, or with ``allow_implausible`` an ``ImplausibleEventWarning``. An
    empty log renders silence with an ``EmptyEventLogWarning``."""
    if scene.event_log:
        import warnings
        from pathlib import Path

        from .dynamics.events import CSV_ROW_BASE, EmptyEventLogWarning
        from .dynamics.plausibility import check_event_log
        log = EventLog.load(scene.event_log, scene.body_names)
        if len(log) == 0:
            warnings.warn(f"{scene.event_log}: the event log has no events (only a header): the render is silent",
                          EmptyEventLogWarning, stacklevel=2)
        npz = Path(scene.event_log).suffix.lower() == ".npz"
        check_event_log(log, scene.bodies, scene.duration, ground_enabled=scene.ground.enabled,
                        ground_height=scene.ground.height, source=str(scene.event_log),
                        row_base=0 if npz else CSV_ROW_BASE, npz=npz, allow_implausible=allow_implausible)
        _fill_missing_poses(log, scene)
        return log
    from .dynamics import simulate
    with progress.stage(f"dynamics ({len(scene.bodies)} bodies, {scene.duration:g} s)") as update:
        return simulate(scene.bodies, scene.ground if scene.ground.enabled else None, scene.duration,
                        scene.timestep, progress=update)


def _fill_missing_poses(log: EventLog, scene: Scene) -> None:
    """Imported logs may omit body poses: bodies are then taken at their initial scene pose (documented in
    docs/event-log.md)."""
    for side in ("a", "b"):
        ids = getattr(log, side)
        pos, quat = getattr(log, f"pos_{side}"), getattr(log, f"quat_{side}")
        missing = ~np.isfinite(pos).all(axis=1) & (ids >= 0)
        for i in np.unique(ids[missing]):
            sel = missing & (ids == i)
            pos[sel] = scene.bodies[i].position
            quat[sel] = scene.bodies[i].quaternion


def modal_models(scene: Scene, progress: Progress = QUIET) -> dict:
    """FEM modal model of every body (cached on disk by content hash)."""
    from .fem.modal import cached_modal_analysis
    f_max = min(20000.0, 0.45 * scene.sample_rate)
    models = {}
    for body in scene.bodies:
        with progress.stage(f"modes of {body.name}") as update:
            models[body.name] = cached_modal_analysis(body.mesh, body.material, order=scene.modal_order,
                                                      max_modes=scene.max_modes, f_max=f_max,
                                                      progress=update, source=body.source)
        m = models[body.name]
        if m.n_modes:
            progress.message(f"  {body.name}: {m.n_modes} modes, {m.frequencies_hz[0]:.0f}-"
                             f"{m.frequencies_hz[-1]:.0f} Hz")
        else:
            progress.message(f"  {body.name}: no modes below {f_max:.0f} Hz (silent in modal sound)")
    return models


def pan_fields(scene: Scene, progress: Progress = QUIET) -> tuple[dict, dict]:
    """PAN field of every body within ``scene.pan_budget`` (Chadwick, Zheng & James 2012), from the cache or
    precomputed. Which bodies get one follows from the scene alone (the estimate against the budget), never from
    what the cache holds. Returns ({name: PANField}, {name: reason} for the bodies without one)."""
    from .sources.pan.precompute import cached_pan_field, plan_pan
    fields, missing = {}, {}
    for body in scene.bodies:
        job = plan_pan(body.mesh, body.material, c=scene.air.c, rho=scene.air.rho)
        est = job.estimate()
        if est["cell_updates"] > scene.pan_budget:
            missing[body.name] = (f"its PAN precompute needs {est['cell_updates']:.2g} FDTD cell updates (grid "
                                  f"{est['grid'][0]}^3, ~{est['cell_updates'] / 2.5e8 / 60:.0f} min on 2 cores), "
                                  f"over [scene] pan_budget = {scene.pan_budget:.2g}; raise pan_budget to include it")
            progress.message(f"  {body.name}: NO acceleration noise: {missing[body.name]}")
            continue
        cached = cached_pan_field(job, load_only=True)
        if cached is None:
            with progress.stage(f"PAN precompute of {body.name} (grid {est['grid'][0]}^3, "
                                f"{est['steps']} steps x 6 fields)") as update:
                cached = cached_pan_field(job, progress=update)
        fields[body.name] = cached
    return fields, missing


def transfer_models(scene: Scene, models: dict, progress: Progress = QUIET) -> tuple[dict, dict]:
    """Acoustic transfer of each body's modal model. ``scene.transfer``: "auto" (default) FFAT maps of every mode
    from grouped FDTD solves (transfer/fdtd_transfer.py; cached by content hash, computed when missing, so the
    output never depends on what the cache holds); "ffat" BEM-fitted FFAT maps of the first
    ``transfer_max_modes`` modes (the reference; slow); "low_order" the compact monopole + dipole model
    (approximate: free-body bending and torsion modes have vanishing low-order moments). A per-object
    ``transfer = FILE`` overrides. Returns ({name: TransferModel}, {name: which radiation model is used})."""
    from .assets import cache_dir
    from .errors import AssetError
    from .transfer.precompute import TransferModel, TransferSettings, run_transfer, transfer_inputs_hash
    out, used = {}, {}
    given = {b.name: b.transfer_asset for b in scene.bodies}
    for name, model in models.items():
        if not model.n_modes:
            continue
        used[name] = "low_order (monopole + dipole; approximate)"
        modal_path = cache_dir() / f"modal_{model.inputs_hash[:40]}.h5"
        if given.get(name):
            try:
                out[name] = TransferModel.load(given[name], model)
            except AssetError as e:
                raise AssetError(f"{scene.path}: object {name}: transfer = {given[name]}: {e}. This scene's modal "
                                 f"model of {name} is {modal_path}: run `impactsound transfer precompute "
                                 f"{modal_path} --out {given[name]}`") from None
            used[name] = f"ffat_file ({given[name]}) for the first {out[name].n_modes} modes, low_order for the rest"
            progress.message(f"  {name}: radiation {used[name]}")
            continue
        if scene.transfer == "low_order":
            progress.message(f"  {name}: radiation {used[name]} (modal asset {modal_path})")
            continue
        if scene.transfer == "auto":
            from .transfer.fdtd_transfer import FDTDTransferSettings, plan, run_fdtd_transfer
            from .transfer.fdtd_transfer import transfer_inputs_hash as fdtd_hash
            from .transfer.precompute import model_surface
            settings = FDTDTransferSettings(c=scene.air.c, rho=scene.air.rho)
            path = cache_dir() / f"fdtd-{fdtd_hash(model, settings)[:32]}.h5"
            if not path.is_file():
                v, f, _ = model_surface(model)
                pl = plan(v, f, model.frequencies_hz, settings)
                with progress.stage(f"FDTD transfer of {name} ({model.n_modes} modes, {len(pl.groups)} runs, "
                                    f"grid {'x'.join(map(str, pl.grid.shape))})") as update:
                    run_fdtd_transfer(model, settings, out=path, progress=update)
            out[name] = TransferModel.load(path, model)
            used[name] = f"fdtd_ffat (FFAT maps from FDTD, all {out[name].n_modes} modes)"
            progress.message(f"  {name}: radiation {used[name]} (modal asset {modal_path})")
            continue
        settings = TransferSettings(max_modes=scene.transfer_max_modes, c=scene.air.c, rho=scene.air.rho)
        path = cache_dir() / f"ffat-{transfer_inputs_hash(model, settings)[:32]}.h5"
        if not path.is_file():
            n = min(model.n_modes, scene.transfer_max_modes)
            with progress.stage(f"BEM transfer of {name} ({n} modes)") as update:
                run_transfer(model, settings, out=path, progress=update)
        out[name] = TransferModel.load(path, model)
        used[name] = f"bem_ffat (BEM FFAT maps) for the first {out[name].n_modes} modes, low_order for the rest"
        progress.message(f"  {name}: radiation {used[name]} (modal asset {modal_path})")
    return out, used


def render_scene(scene: Scene, progress: Progress = QUIET, events: EventLog | None = None, *,
                 allow_implausible: bool = False) -> RenderResult:
    """Render ``scene``: pressure [Pa] at every listener, per source kind and object.

    ``allow_implausible``: render a user event log that fails the plausibility checks (warnings instead of an
    error; see :func:`scene_events`)."""
    from .assets import cache_dir
    cache_dir()                 # a cache path that cannot be used is an error now, not after the dynamics ran
    if events is None:
        events = scene_events(scene, progress, allow_implausible=allow_implausible)
    # Contacts slower than v_min are static contact, not collisions (pan.md sec. 3; modal-sound.md sec. 8.3).
    slow = events.vn < V_MIN
    if slow.any():
        progress.message(f"dropping {int(slow.sum())} events slower than v_min = {V_MIN} m/s (resting contact)")
        events = events.select(~slow)
    progress.message(f"{len(events)} contact events")
    listeners = np.array([l.position for l in scene.listeners], dtype=np.float64)
    n = int(round(scene.duration * scene.sample_rate))
    stems: dict[str, dict[str, np.ndarray]] = {}
    info: dict = {"sources": list(scene.sources)}
    if "modal" in scene.sources:
        models = modal_models(scene, progress)
        from .sources.modal import ModalSource
        transfers, used = transfer_models(scene, models, progress)
        ears = np.array([l.ear if l.ear is not None else np.full(3, np.nan) for l in scene.listeners])
        src = ModalSource(scene.bodies, models, scene.ground, scene.air, transfers=transfers, ears=ears)
        with progress.stage("modal synthesis"):
            stems["modal"] = src.render(events, listeners, scene.sample_rate, scene.duration)
        info["modes"] = {k: int(m.n_modes) for k, m in models.items()}
        info["radiation"] = used
    missing: dict = {}
    if "acceleration_noise" in scene.sources:
        fields, missing = pan_fields(scene, progress)
        from .sources.pan import PANSource
        src = PANSource(scene.bodies, fields, scene.ground, scene.air)
        with progress.stage("acceleration noise synthesis"):
            stems["acceleration_noise"] = src.render(events, listeners, scene.sample_rate, scene.duration)
        info["acceleration_noise"] = sorted(fields)
    # what each object got, so that nothing is dropped without a word (also written to the sidecar JSON)
    objects = {}
    for b in scene.bodies:
        o: dict = {}
        if "modal" in scene.sources:
            o["modes"] = int(info["modes"].get(b.name, 0))
            o["radiation"] = info["radiation"].get(b.name, "none (no modes below f_max)")
        if "acceleration_noise" in scene.sources:
            o["acceleration_noise"] = "pan" if b.name in info["acceleration_noise"] else "none"
            if b.name in missing:
                o["reason"] = missing[b.name]
        objects[b.name] = o
    info["objects"] = objects
    mix = mix_stems(stems, len(listeners), n)
    return RenderResult(scene.sample_rate, mix, stems, events, [l.name for l in scene.listeners], info)
