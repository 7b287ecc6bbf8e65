"""The scene's ``[granular]`` table: grains poured into a container (M. Marko, "Sound simulation of granular
materials", Appendix B), validated into a :class:`GranularSetup`.

Grains are not scene objects: they have no modes (mm grains ring far above hearing) and no MuJoCo bodies. Their
collisions come from our event-driven simulator (``events = "simulate"``), from a granular event table written by
another simulator or an earlier run (``events = "log"``), or from a statistical model fitted to such a table
(``events = "generate"``). The container is an ordinary scene object (its modes are the container's sound).

    [granular]
    material = "glass_bead"      # grain material (name or table)
    radius = 0.001               # grain radius [m]
    radius_spread = 0.0          # radii uniform in radius * (1 -+ radius_spread)
    count = 500                  # grains poured
    container = "cup"            # the scene object they pour into (any closed solid; a built-in "mug" exactly)
    obstacles = ["bowl"]         # other scene objects the grains hit (default: every static object)
    events = "simulate"          # simulate | log | generate
    restitution = 0.5            # grain-grain and grain-wall
    fill = 0                     # grains already settled in the container (partly full)
    fill_damping = 0.0           # damping ratio added to the container's modes (grains lying in it)
    [granular.funnel]            # pour through a funnel (the default) ...
    position = [0, 0, 0.18]      # centre of its hole [m]
    hole_radius = 0.003
    top_radius = 0.025
    height = 0.03
    # [granular.stream]          # ... or a stream at a pour rate
    # position = [0, 0, 0.18]; rate = 2000.0; radius = 0.004
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import InputError
from ..materials import Material

Vec3 = tuple[float, float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunnelSpec(_Strict):
    position: Vec3 = (0.0, 0.0, 0.18)      # centre of the hole [m]
    hole_radius: float = 0.003             # [m]
    top_radius: float = 0.025              # [m]
    height: float = 0.03                   # hole to rim [m]


class StreamSpec(_Strict):
    position: Vec3 = (0.0, 0.0, 0.18)      # nozzle centre [m]
    rate: float = 2000.0                   # grains per second
    radius: float = 0.004                  # nozzle radius [m]


class GranularSpec(_Strict):
    material: str | dict = "glass_bead"
    radius: float = 0.001
    radius_spread: float = 0.0
    count: int = 500
    container: str | None = None
    obstacles: list[str] | None = None
    events: Literal["simulate", "log", "generate"] = "simulate"
    log: str | None = None
    model: str | None = None
    restitution: float = 0.5
    fill: int = 0
    fill_damping: float = 0.0
    funnel: FunnelSpec | None = None
    stream: StreamSpec | None = None


@dataclass
class GranularSetup:
    """A validated ``[granular]`` table (module docstring); SI units."""

    material: Material
    radius: float
    radius_spread: float
    count: int
    container: str | None
    events: str
    log: str | None
    model: str | None
    restitution: float
    fill: int
    fill_damping: float
    funnel: dict | None
    stream: dict | None
    where: str = "[granular]"
    obstacles: list[str] | None = None

    def obstacle_names(self, bodies) -> list[str]:
        """The scene objects the simulated grains hit besides the container: ``obstacles`` as given, else every
        static object (static = true or a fixed joint) other than the container."""
        if self.obstacles is not None:
            return list(self.obstacles)
        return [b.name for b in bodies if b.immovable and b.name != self.container]

    def key(self) -> dict:
        """Everything that decides the simulated collisions (for the content hash of a cached simulation)."""
        m = self.material
        return {"material": [m.name, m.E, m.nu, m.rho], "radius": self.radius, "spread": self.radius_spread,
                "count": self.count, "container": self.container, "restitution": self.restitution,
                "fill": self.fill, "funnel": self.funnel, "stream": self.stream}


def parse_granular(spec: GranularSpec, base: Path, src: str, body_names: list[str], material_of) -> GranularSetup:
    """Check a ``[granular]`` table against the scene: an :class:`InputError` naming the field and the fix."""
    where = f"{src}: granular"
    mat = material_of(spec.material if isinstance(spec.material, str) else _material_spec(spec.material, where),
                      f"{where}.material")
    if not (math.isfinite(spec.radius) and spec.radius > 0):
        raise InputError(f"{where}.radius = {spec.radius} m must be positive (a grain radius, e.g. 0.001)")
    if not (math.isfinite(spec.radius_spread) and 0 <= spec.radius_spread < 1):
        raise InputError(f"{where}.radius_spread = {spec.radius_spread} must lie in [0, 1)")
    if spec.count < 0 or spec.fill < 0:
        raise InputError(f"{where}: count = {spec.count} and fill = {spec.fill} must be >= 0")
    if not (math.isfinite(spec.restitution) and 0 < spec.restitution <= 1):
        raise InputError(f"{where}.restitution = {spec.restitution} must lie in (0, 1]")
    if not (math.isfinite(spec.fill_damping) and 0 <= spec.fill_damping < 1):
        raise InputError(f"{where}.fill_damping = {spec.fill_damping} must be a damping ratio in [0, 1)")
    if spec.container is not None and spec.container not in body_names:
        raise InputError(f"{where}.container = {spec.container!r} is not an object of the scene; objects: "
                         f"{body_names}")
    for name in spec.obstacles or ():
        if name not in body_names:
            raise InputError(f"{where}.obstacles: {name!r} is not an object of the scene; objects: {body_names}")
        if name == spec.container:
            raise InputError(f"{where}.obstacles: {name!r} is the container already; drop it from obstacles")
    if spec.obstacles is not None and len(set(spec.obstacles)) != len(spec.obstacles):
        raise InputError(f"{where}.obstacles lists an object twice: {spec.obstacles}")
    if spec.obstacles and spec.events != "simulate":
        raise InputError(f"{where}.obstacles applies to events = 'simulate' (our simulator); a log or a generated "
                         "table names its own walls")
    log = model = None
    if spec.events == "log":
        if not spec.log:
            raise InputError(f"{where}: events = 'log' needs log = 'FILE' (a granular event table .npz/.csv/.parquet)")
        log = str((base / spec.log).resolve())
        if not Path(log).is_file():
            raise InputError(f"{where}.log = {spec.log!r}: {log} not found (paths are relative to the scene file)")
    elif spec.log:
        raise InputError(f"{where}.log is given but events = {spec.events!r}; set events = 'log' or drop log")
    if spec.events == "generate":
        if not spec.model:
            raise InputError(f"{where}: events = 'generate' needs model = 'FILE' (from `impactsound granular fit`)")
        model = str((base / spec.model).resolve())
        if not Path(model).is_file():
            raise InputError(f"{where}.model = {spec.model!r}: {model} not found (make it with `impactsound "
                             "granular fit EVENTS --out FILE`)")
    elif spec.model:
        raise InputError(f"{where}.model is given but events = {spec.events!r}; set events = 'generate' or drop it")
    if spec.funnel is not None and spec.stream is not None:
        raise InputError(f"{where}: give [granular.funnel] or [granular.stream], not both")
    funnel = stream = None
    if spec.events == "simulate":
        if spec.container is None:
            raise InputError(f"{where}: events = 'simulate' needs container = 'OBJECT' (the scene object the grains "
                             "pour into: a closed solid, a built-in 'mug' exactly)")
        if spec.stream is not None:
            stream = spec.stream.model_dump()
            _check_positive(where + ".stream", stream, ("rate", "radius"))
        else:
            funnel = (spec.funnel or FunnelSpec()).model_dump()
            _check_positive(where + ".funnel", funnel, ("hole_radius", "top_radius", "height"))
            if funnel["top_radius"] <= funnel["hole_radius"]:
                raise InputError(f"{where}.funnel.top_radius must exceed hole_radius")
            if funnel["hole_radius"] < 2.5 * spec.radius * (1 + spec.radius_spread):
                raise InputError(f"{where}.funnel.hole_radius = {funnel['hole_radius']} m lets no grain through "
                                 f"(grain radius {spec.radius} m): make it at least 2.5 grain radii")
    return GranularSetup(material=mat, radius=float(spec.radius), radius_spread=float(spec.radius_spread),
                         count=int(spec.count), container=spec.container, events=spec.events, log=log, model=model,
                         restitution=float(spec.restitution), fill=int(spec.fill),
                         fill_damping=float(spec.fill_damping), funnel=funnel, stream=stream, where=where,
                         obstacles=None if spec.obstacles is None else list(spec.obstacles))


def _material_spec(d: dict, where: str):
    from .schema import MaterialSpec
    try:
        return MaterialSpec.model_validate(d)
    except Exception as exc:                   # pydantic's message names the key
        raise InputError(f"{where}.material: {exc}") from None


def _check_positive(where, d, keys):
    for k in keys:
        v = d[k]
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise InputError(f"{where}.{k} = {v!r} must be positive")
    if not np.isfinite(np.asarray(d["position"], np.float64)).all():
        raise InputError(f"{where}.position = {d['position']} must be finite [m]")
