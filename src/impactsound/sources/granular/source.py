"""The two granular source kinds (M. Marko, "Sound simulation of granular materials", ch. 5.1-5.3):

- ``grain_noise``: the acceleration noise of both spheres of every grain-grain collision (exact rigid-sphere
  pulses, tabulated; sources/granular/synth.py). Its stem is ``grain_noise``, its one object ``grains``.
- ``container``: the container object's modes struck by the grains that hit it (sources/granular/container.py),
  radiated like any object's modes; likewise every other scene object the grains hit (an obstacle). Its stem is
  ``container``, one object per struck body.

Both render the scene's one granular event table (:func:`~impactsound.sources.granular.scene_events.granular_events`:
simulated, read from a log, or generated), computed once per render.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InputError
from ...io.progress import QUIET
from ..modal import ModalOptions
from ..registry import SourceKind, register
from .events import CONTAINER, GRAIN, GranularEvents
from .scene_events import granular_events, grain_materials

#: the object name of the grains (their stem is ``grain_noise_grains``)
GRAINS = "grains"


def _setup(scene, kind):
    if scene.granular is None:
        raise InputError(f"{scene.path}: source {kind!r} needs a [granular] table (the grains and their container)")
    return scene.granular


# ---------------------------------------------------------------------------------------------------- grain noise
class GrainNoiseOptions(BaseModel):
    """Options of the ``grain_noise`` source (scene table ``[source.grain_noise]``)."""

    model_config = ConfigDict(extra="forbid")
    scaling: Literal["peak", "impulse"] = Field(
        default="peak", description="pulse amplitude: peak = a_m = F_max/m (the thesis' choice, its Table 6.1); "
        "impulse = the half-sine carries the elastic Delta-v (0.853 times quieter)")
    v_min: float = Field(default=1e-4, gt=0, description="collisions slower than this [m/s] are inaudible and "
                         "skipped (the thesis' audibility filter)")
    wall_hits: bool = Field(default=False, description="also render each grain's own pulse when it hits a wall "
                            "(not in the thesis; the wall's modes are the container source)")


@dataclass
class GrainPrepared:
    events: GranularEvents
    materials: list
    options: GrainNoiseOptions
    air: object
    walls: dict


def prepare_grain_noise(scene, progress=QUIET) -> GrainPrepared:
    _setup(scene, "grain_noise")
    ev = granular_events(scene, progress)
    walls = {b.name: b.material for b in scene.bodies}
    walls["floor"] = scene.ground.material
    walls = {c: walls.get(c, scene.granular.material) for c in ev.containers}   # a funnel: as hard as a grain
    return GrainPrepared(ev, grain_materials(scene, ev), scene.options["grain_noise"], scene.air, walls)


def _fixed_listeners(ctx, kind: str) -> None:
    if ctx.listeners_move:
        raise InputError(f"{ctx.scene.path}: the {kind} source renders for fixed listeners only; give the "
                         "[[listener]] a position instead of a trajectory, or render the pour with sources that "
                         "follow moving listeners (modal, acceleration_noise, ground, shell)")


def render_grain_noise(prep: GrainPrepared, ctx) -> dict:
    from .synth import grain_noise
    _fixed_listeners(ctx, "grain_noise")
    with ctx.progress.stage(f"grain noise ({int((prep.events.kind == GRAIN).sum())} grain collisions)"):
        p = grain_noise(prep.events, ctx.listeners, ctx.sample_rate, ctx.n_samples,
                        materials={m.name: m for m in prep.materials}, rho=prep.air.rho, c=prep.air.c,
                        v_min=prep.options.v_min, scaling=prep.options.scaling,
                        include_container_hits=prep.options.wall_hits, container_materials=prep.walls)
    return {GRAINS: p}


def describe_grain_noise(prep: GrainPrepared) -> tuple[dict, dict]:
    ev = prep.events
    g = ev.kind == GRAIN
    audible = g & (ev.v0 >= prep.options.v_min)
    info = {"granular": {"origin": ev.origin, "events": len(ev), "grain_collisions": int(g.sum()),
                         "container_hits": int((ev.kind == CONTAINER).sum()), "containers": list(ev.containers),
                         "materials": list(ev.materials)}}
    obj = {GRAINS: {"grain_noise": f"{int(audible.sum())} of {int(g.sum())} grain collisions rendered (v0 >= "
                                   f"{prep.options.v_min:g} m/s; exact rigid-sphere pulses, scaling "
                                   f"{prep.options.scaling})"}}
    return info, obj


# ------------------------------------------------------------------------------------------------------ container
class ContainerOptions(ModalOptions):
    """Options of the ``container`` source (scene table ``[source.container]``): the container's modal model and
    radiation, as for the modal source."""


@dataclass
class ContainerPrepared:
    """The struck scene objects of the granular table: the container and the obstacles the grains hit (each with
    its modal model, radiation and kind of radiation), and the walls that make no sound."""

    events: GranularEvents
    materials: list
    bodies: list
    models: dict
    transfers: dict
    radiation: dict
    restitution: float
    fill_damping: float
    container: str | None
    air: object
    silent: dict
    floor: object = None          # the floor's half-space when grains hit it (its sound: the ground model)


def prepare_container(scene, progress=QUIET) -> ContainerPrepared:
    from ..modal import modal_models, transfer_models
    from .container import container_hits
    setup = _setup(scene, "container")
    ev = granular_events(scene, progress)
    # walls in the table that are not scene objects (a funnel) make no sound of their own; the floor sounds as
    # the ground source's elastic half-space (Qu & James 2019) struck by each grain
    silent = {c: "not a scene object: its hits are silent" for c in ev.containers if c not in scene.body_names}
    floor = _floor_half_space(scene, ev, silent)
    names = [c for c in ev.containers if c in scene.body_names]
    if setup.container is not None and setup.container not in names:
        names.insert(0, setup.container)
    bodies = [scene.bodies[scene.body_names.index(n)] for n in names
              if n == setup.container or len(container_hits(ev, n))]
    if not bodies:
        return ContainerPrepared(ev, grain_materials(scene, ev), [], {}, {}, {}, setup.restitution,
                                 setup.fill_damping, setup.container, scene.air, silent, floor)
    sub = dataclasses.replace(scene, bodies=bodies, options={**scene.options, "modal": scene.options["container"]})
    models = modal_models(sub, progress)
    transfers, used = transfer_models(sub, models, progress)
    return ContainerPrepared(ev, grain_materials(scene, ev), bodies, models, transfers,
                             {b.name: used.get(b.name, "none") for b in bodies}, setup.restitution,
                             setup.fill_damping, setup.container, scene.air, silent, floor)


#: the granular table's name of the scene's floor (sources/granular/simulate.py)
FLOOR = "floor"


def _floor_half_space(scene, ev, silent: dict):
    """The floor's half-space when grains hit the floor and it can sound (else None, the reason in ``silent``)."""
    from .container import container_hits
    if FLOOR not in ev.containers or FLOOR in scene.body_names or not len(container_hits(ev, FLOOR)):
        return None
    g = scene.ground
    if not g.enabled:
        silent[FLOOR] = "the scene has no ground ([ground] enabled = false): its hits are silent"
        return None
    if getattr(scene, "quality", "default") == "preview":
        silent[FLOOR] = "a preview skips the floor's sound (quality = \"preview\")"
        return None
    if getattr(g, "plate", None) is not None:
        silent[FLOOR] = ("a plate floor ([ground] model = \"plate\") is not yet struck by grains: its hits are "
                         "silent")
        return None
    from ..ground.source import half_space
    silent.pop(FLOOR, None)
    return half_space(g.material, f"{scene.path}: ground.material", getattr(g, "loss_factor", 0.0))


def floor_pressure(events, rows, grain_materials, floor_material, half_space, listeners, z0: float,
                   sample_rate: float, n_samples: int, *, restitution: float, c: float, rho: float,
                   kernel: str = "K4", cache: bool = True, progress=QUIET) -> np.ndarray:
    """Pressure [Pa] (L, n_samples) at fixed listeners (L, 3) [m] of the floor (an elastic half-space, top at
    z0 [m]) struck by the grain hits ``rows`` of the granular table: each a Hertz impact of a sphere on a heavy flat
    wall (impulse J = m (1 + e) v0 and contact time t_c, :func:`~.container.wall_hits`), whose force
    the ground source renders through the half-space's response bank (Qu & James 2019; kernel width t_c / 4,
    centred half-way through the contact), as it renders a rigid body's floor impacts."""
    from ..ground.bank import response_bank
    from .container import wall_hits
    rows = np.asarray(rows, np.int64)
    L = len(listeners)
    out = np.zeros((L, n_samples))
    if not len(rows):
        return out
    tau, J = wall_hits(events, rows, grain_materials, floor_material, restitution)
    t_m = events.t[rows] + tau / 2
    eps = tau / 4
    xy = events.point[rows, :2]
    for l in range(L):
        h = float(listeners[l, 2] - z0)
        if not h > 0:
            raise InputError(f"listener (channel {l}) at z = {float(listeners[l, 2]):g} m is on or below the floor "
                             f"z = {z0:g} m, where grains striking the floor have no field; raise the listener")
        rr = np.hypot(xy[:, 0] - listeners[l, 0], xy[:, 1] - listeners[l, 1])
        bank = response_bank(half_space, h, c_a=c, rho_a=rho, sample_rate=sample_rate,
                             max_offset=float(rr.max()), cache=cache)
        with progress.stage(f"ground response bank (listener height {h:.3g} m)") as update:
            bank.ensure(rr, progress=update)
        out[l] = bank.render(t_m, J, eps, rr, n_samples, kernel=kernel)
    return out


def render_container(prep: ContainerPrepared, ctx) -> dict:
    from .container import container_hits, container_pressure
    if not prep.bodies and prep.floor is None:
        return {}
    _fixed_listeners(ctx, "container")
    out = {}
    if prep.floor is not None:
        rows = container_hits(prep.events, FLOOR)
        opts = ctx.scene.options.get("ground")
        with ctx.progress.stage(f"floor struck by grains ({len(rows)} grain hits)"):
            out[FLOOR] = floor_pressure(prep.events, rows, prep.materials, ctx.scene.ground.material, prep.floor,
                                        ctx.listeners, float(ctx.scene.ground.height), ctx.sample_rate,
                                        ctx.n_samples, restitution=prep.restitution, c=prep.air.c,
                                        rho=prep.air.rho, kernel=getattr(opts, "kernel", "K4"),
                                        cache=getattr(opts, "cache", True), progress=ctx.progress)
    for body in prep.bodies:
        n = len(container_hits(prep.events, body.name))
        what = "container" if body.name == prep.container else "struck by grains"
        with ctx.progress.stage(f"{what} {body.name} ({n} grain hits)"):
            # grains lying in the container damp it (fill_damping); an obstacle keeps its own damping
            out[body.name] = container_pressure(
                prep.events, body, prep.models[body.name], prep.materials, ctx.listeners, ctx.sample_rate,
                ctx.n_samples, restitution=prep.restitution,
                fill_damping=prep.fill_damping if body.name == prep.container else 0.0,
                transfer=prep.transfers.get(body.name), air=prep.air, ears=ctx.ears)
    return out


def describe_container(prep: ContainerPrepared) -> tuple[dict, dict]:
    if not prep.bodies and prep.floor is None:
        return ({"granular_silent_walls": prep.silent} if prep.silent else {}), {}
    from .container import container_hits
    obj = {}
    if prep.floor is not None:
        obj[FLOOR] = {"container": {"grain_hits": len(container_hits(prep.events, FLOOR)),
                                    "model": "elastic half-space struck by each grain (the ground source's)"}}
    for b in prep.bodies:
        d = {"grain_hits": len(container_hits(prep.events, b.name)), "modes": int(prep.models[b.name].n_modes),
             "radiation": prep.radiation[b.name]}
        if b.name == prep.container:
            d["fill_damping"] = prep.fill_damping
        else:
            d["role"] = "obstacle"
        obj[b.name] = {"container": d}
    return ({"granular_silent_walls": prep.silent} if prep.silent else {}), obj


GRAIN_NOISE = register(SourceKind(
    name="grain_noise", options=GrainNoiseOptions, prepare=prepare_grain_noise, render=render_grain_noise,
    describe=describe_grain_noise, rigid_events=False,
    summary="acceleration noise of colliding grains ([granular]): exact rigid-sphere pulses, both grains"))
CONTAINER_SOURCE = register(SourceKind(
    name="container", options=ContainerOptions, prepare=prepare_container, render=render_container,
    describe=describe_container, rigid_events=False,
    summary="the [granular] container's modes (and any other object's the grains hit) struck by grain hits "
            "(Hertz), radiated like the modal source"))
