"""The source registry: every kind of sound source is one module that registers one :class:`SourceKind`.

A source kind declares

- ``name``: the kind's name, used in a scene's ``sources = [...]``, for its stems and in ``[source.<name>]``;
- ``options``: a pydantic model of its options; the scene's ``[source.<name>]`` table is validated against it
  (unknown keys and wrong types are errors naming the field) and the validated object is
  ``scene.options[name]``;
- ``prepare(scene, progress)``: loads or precomputes the kind's assets (modal models, fields, ...) and returns
  any object, handed back to ``render`` and ``describe``;
- ``render(prepared, ctx)``: the pressure [Pa] at the listeners, ``{object name: (L, n_samples) float64}``, for
  the events in the :class:`RenderContext`;
- ``rigid_events`` (default True): whether it renders the rigid bodies' contact events; a scene whose kinds
  all say False (granular sources only) skips the rigid-body dynamics;
- ``span(prepared, ctx)`` (optional): (lead, tail) [s], how long before an event's time and after it (not
  counting the propagation delay) the kind's sound of that event can last, or None when it cannot say (its sound
  need not end, or one event's sound depends on the others'). A kind with a span is rendered in time blocks by a
  streaming render (streaming.py), and should then render only the objects named in ``ctx.only`` when that is
  set (others are dropped unheard); one without renders the whole scene at once;
- ``describe(prepared)`` (optional): ``(info, objects)``: scene-level entries for the render's sidecar and
  ``{object name: {key: value}}`` saying what each object got (so that no object is dropped without a word).

Built-in kinds are the modules listed in ``BUILTIN``. Third-party kinds are found through the Python packaging
entry-point group ``impactsound.sources``: a plugin package declares, in its pyproject.toml,

    [project.entry-points."impactsound.sources"]
    my_kind = "my_package.my_module:SOURCE"

where ``SOURCE`` is a :class:`SourceKind` named ``my_kind``. A plugin that fails to load is reported (a warning
when listing, an error naming the plugin and its exception when a scene asks for it); it never stops the
built-in kinds from working.
"""
from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import InputError

#: entry-point group of third-party source kinds
ENTRY_POINT_GROUP = "impactsound.sources"
#: modules of the built-in source kinds, in the order they are listed
BUILTIN = ("impactsound.sources.modal", "impactsound.sources.pan.source", "impactsound.sources.ground.source",
           "impactsound.sources.granular.source", "impactsound.sources.shell.source",
           "impactsound.sources.plate_prop")


class NoOptions(BaseModel):
    """Options model of a source kind without options (an empty ``[source.<name>]`` table)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class RenderContext:
    """What a source kind's ``render`` receives.

    Attributes
    ----------
    scene : Scene
        The scene (bodies, ground, air, listeners, ``options[kind]``, ``seed``).
    events : EventLog
        The contact events to render (resting contacts, vn < v_min, already dropped).
    listeners : ndarray, shape (L, 3)
        World positions of the listener channels [m].
    ears : ndarray, shape (L, 3)
        Unit outward ear axis (world) of each binaural channel; NaN rows for microphones.
    sample_rate : int
        Output rate [Hz].
    n_samples : int
        Output length, round(duration * sample_rate).
    progress : Progress
        Progress reporting (stages and messages).
    motion : dict
        {body index: Trajectory} of the bodies' recorded motion (from the dynamics; empty for an event log), so
        that radiation can follow a body while it rings (transfer/motion.py). Moving listeners are
        ``scene.listeners[l].trajectory`` (:meth:`listeners_at`).
    """

    scene: Any
    events: Any
    listeners: np.ndarray
    ears: np.ndarray
    sample_rate: int
    n_samples: int
    progress: Any
    _stages: dict = field(default_factory=dict, repr=False)
    motion: dict = field(default_factory=dict)
    resting: dict = field(default_factory=dict)      # {body index: [Rest]} (dynamics/resting.py)
    whole: Any = None        # a block of a streaming render (streaming.py): the whole scene's context, else None
    only: Any = None         # frozenset of the object names whose sound is asked (a streaming render renders a
    #                          block's objects a group at a time); None: every object

    @property
    def listeners_move(self) -> bool:
        """Whether any listener channel moves."""
        return any(l.moves for l in self.scene.listeners)

    def listeners_at(self, t) -> np.ndarray:
        """World positions (..., L, 3) [m] of the listener channels at times t (...) [s]."""
        t = np.asarray(t, np.float64)
        return np.stack([l.position_at(t) for l in self.scene.listeners], axis=-2)

    def ears_at(self, t) -> np.ndarray:
        """Unit outward ear axes (..., L, 3) (world) at times t; NaN rows for microphones."""
        t = np.asarray(t, np.float64)
        return np.stack([l.ear_at(t) for l in self.scene.listeners], axis=-2)

    def listeners_heard(self, times, positions) -> np.ndarray:
        """Listener positions (E, L, 3) [m] when the sound of events at ``times`` (E,) [s] from world
        ``positions`` (E, 3) arrives (one retarded-time step: exact for fixed listeners, within (v/c)^2 for
        moving ones). Sources whose sound of one event is short (acceleration noise, ground, grains) hear each
        event from there."""
        times = np.asarray(times, np.float64)
        x0 = self.listeners_at(times)                                       # (E, L, 3)
        if not self.listeners_move:
            return x0
        c = self.scene.air.c
        arrive = times[:, None] + np.linalg.norm(x0 - np.asarray(positions)[:, None, :], axis=-1) / c
        return np.stack([l.position_at(arrive[:, i]) for i, l in enumerate(self.scene.listeners)], axis=1)

    @property
    def duration(self) -> float:
        """Output duration [s]."""
        return self.n_samples / self.sample_rate

    def contacts(self, surfaces: str = "mesh"):
        """The shared :class:`~impactsound.contact.stage.ContactStage` of these events, computed once per batch.

        ``surfaces``: "mesh" (every body's scene mesh) or "model" (the surface of each body's modal model where
        the modal source prepared one); each variant is computed at most once and shared by every source."""
        if surfaces not in self._stages:
            from ..contact.stage import contact_stage
            surf = self._stages.get(("surfaces", surfaces))
            self._stages[surfaces] = contact_stage(self.events, self.scene.bodies, self.scene.ground,
                                                   surfaces=surf)
        return self._stages[surfaces]

    def set_surfaces(self, name: str, surfaces: dict) -> None:
        """Register a named set of contact surfaces ({body name: SurfaceCurvature}) for :meth:`contacts`."""
        self._stages[("surfaces", name)] = surfaces

    def rng(self, kind: str, obj: str = "") -> np.random.Generator:
        """A random generator for a source's stochastic parts, seeded by the scene's ``seed``, the kind and the
        object, so that the same scene and seed give the same samples whatever else the scene renders."""
        import hashlib
        key = hashlib.sha256(f"{kind}\0{obj}".encode()).digest()
        return np.random.default_rng([int(self.scene.seed) & 0xFFFFFFFF, *np.frombuffer(key[:16], np.uint32)])


@dataclass(frozen=True)
class SourceKind:
    """One kind of sound source (module docstring)."""

    name: str
    prepare: Callable[[Any, Any], Any]
    render: Callable[[Any, RenderContext], dict]
    options: type[BaseModel] = NoOptions
    describe: Callable[[Any], tuple[dict, dict]] | None = None
    summary: str = ""
    span: Callable[[Any, RenderContext], tuple[float, float] | None] | None = None
    origin: str = "impactsound"
    rigid_events: bool = True

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise InputError(f"source kind name {self.name!r} must be a Python identifier (letters, digits, _)")
        if not (isinstance(self.options, type) and issubclass(self.options, BaseModel)):
            raise InputError(f"source kind {self.name!r}: options must be a pydantic BaseModel subclass")


_KINDS: dict[str, SourceKind] = {}
_BROKEN: dict[str, str] = {}
_LOADED = False


def register(kind: SourceKind) -> SourceKind:
    """Add ``kind`` to the registry (returns it, so a module can write ``SOURCE = register(SourceKind(...))``).
    Registering a second kind under a taken name is an error."""
    if not isinstance(kind, SourceKind):
        raise InputError(f"register: expected a SourceKind, got {type(kind).__name__}")
    old = _KINDS.get(kind.name)
    if old is not None and old is not kind:
        raise InputError(f"source kind {kind.name!r} is registered twice (by {old.origin} and {kind.origin}); "
                         "rename one of them")
    _KINDS[kind.name] = kind
    return kind


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    first = []                     # built-in kinds in BUILTIN order, whichever module a caller imported first
    for mod in BUILTIN:
        m = importlib.import_module(mod)
        first += [k for k in vars(m).values() if isinstance(k, SourceKind) and _KINDS.get(k.name) is k
                  and k not in first]
    rest = [k for k in _KINDS.values() if k not in first]
    _KINDS.clear()
    _KINDS.update((k.name, k) for k in first + rest)
    from importlib.metadata import entry_points
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _KINDS:
            continue
        try:
            obj = ep.load()
            if not isinstance(obj, SourceKind):
                raise TypeError(f"{ep.value} is a {type(obj).__name__}, not an impactsound SourceKind")
            if obj.name != ep.name:
                raise TypeError(f"entry point {ep.name!r} loads a source kind named {obj.name!r}; use one name")
            if obj.origin == "impactsound":
                object.__setattr__(obj, "origin", ep.dist.name if ep.dist is not None else ep.value)
            register(obj)
        except Exception as exc:                      # a broken plugin must not break the built-in sources
            _BROKEN[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"


def reload() -> None:
    """Forget the loaded entry points and read them again (after installing a plugin in a running session)."""
    global _LOADED
    for name in [n for n, k in _KINDS.items() if k.origin != "impactsound"]:
        del _KINDS[name]
    _BROKEN.clear()
    _LOADED = False


def available(*, warn: bool = True) -> dict[str, SourceKind]:
    """All registered source kinds {name: SourceKind}: the built-ins, then plugins in entry-point order. Plugins
    that failed to load are warned about here unless ``warn`` is false (see :func:`broken`)."""
    _load()
    for name, why in _BROKEN.items() if warn else ():
        warnings.warn(f"source plugin {name!r} failed to load: {why}", RuntimeWarning, stacklevel=2)
    return dict(_KINDS)


def broken() -> dict[str, str]:
    """{name: reason} of the entry-point plugins that failed to load."""
    _load()
    return dict(_BROKEN)


def get(name: str, where: str = "") -> SourceKind:
    """The source kind ``name``; an unknown or broken one is an :class:`InputError` listing what is available."""
    _load()
    if name in _KINDS:
        return _KINDS[name]
    at = f"{where}: " if where else ""
    if name in _BROKEN:
        raise InputError(f"{at}source {name!r} is a plugin that failed to load ({_BROKEN[name]}); fix or "
                         "reinstall the plugin package")
    raise InputError(f"{at}unknown source {name!r}; available: {sorted(_KINDS)} (`impactsound sources` lists "
                     "them; plugins register through the 'impactsound.sources' entry point)")
