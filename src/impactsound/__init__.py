"""impactsound: physics to sound.

Table of contents (pipeline order):

- scene: :func:`load_scene` (a TOML file or a dict; bodies also from MJCF/URDF), :class:`Scene`
  (docs/scene-format.md)
- materials: :func:`get_material`, :func:`make_material`, :func:`material_table`
- dynamics: ``impactsound.dynamics.simulate`` (MuJoCo) -> :class:`EventLog` (docs/event-log.md); another engine's
  raw per-step contacts -> :class:`RawContacts` -> :func:`clean_contacts` (the contact merger) -> EventLog;
  ``impactsound.dynamics.check_event_log`` (plausibility of a user's log against the scene); an animation's poses
  (``impactsound.scene.poses``: pose tables; ``impactsound.scene.motion_import.import_animation``: glTF/Blender
  to a scene folder) -> ``impactsound.dynamics.from_motion.infer_events`` -> EventLog (docs/animation.md)
- contact: ``impactsound.contact`` (Hertz time, effective mass, local curvature); the contact stage shared by all
  sources, :func:`contact_stage` -> :class:`ContactStage`
- fem: :func:`modal_analysis` -> :class:`ModalModel`
- sources: the registry (:class:`SourceKind`, :func:`register`, :func:`available_sources`; docs/sources.md);
  built-ins ``modal`` (``impactsound.sources.modal.ModalSource``, and :func:`strike` for one strike) and
  ``acceleration_noise`` (``impactsound.sources.pan.PANSource``), ``ground`` (``impactsound.sources.ground``),
  ``grain_noise`` and ``container`` (``impactsound.sources.granular``: grains poured into a container, a scene's
  ``[granular]`` table; docs/granular.md), ``shell`` (``impactsound.sources.shell``: thin shells, an object's
  ``shell = {...}`` table; docs/shells.md)
- transfer: :func:`transfer_model` (FFAT maps from FDTD or BEM, cached; ``impactsound.transfer``), compact
  radiation (``transfer.low_order``)
- pipeline: :func:`render_scene` -> :class:`RenderResult` (``.save`` writes WAV, stems and a spectrogram);
  :func:`render_to_file` renders in time blocks straight to those files (memory bounded by a block, any length)
- io: WAV + sidecar (``impactsound.io.audio``), spectrogram PNG (``impactsound.io.plot``), runtime export of a
  modal bank as JSON or Faust (``impactsound.io.export``)
- assets: one HDF5 format for every precomputed thing (``impactsound.assets``)

Messages go to ``logging.getLogger("impactsound")``.
"""
try:
    from importlib.metadata import PackageNotFoundError, version as _version
    __version__ = _version("impactsound")
except PackageNotFoundError:                   # pragma: no cover - run from a source tree without installing
    __version__ = "0+unknown"

from .contact.stage import ContactStage, contact_stage
from .dynamics.events import EventLog
from .dynamics.hygiene import RawContacts, clean_contacts
from .errors import ImpactSoundError
from .fem.modal import modal_analysis
from .fem.model import ModalModel
from .materials import Material, get_material, ground_fit, make_material, material_table
from .pipeline import RenderResult, render_scene
from .scene import Air, Scene, load_scene
from .streaming import StreamedRender, render_to_file
from .sources.base import Source
from .sources.modal import strike, transfer_model
from .sources.registry import SourceKind, register
from .sources.registry import available as available_sources

__all__ = ["Air", "ContactStage", "EventLog", "ImpactSoundError", "Material", "ModalModel", "RawContacts", "RenderResult",
           "Scene", "Source", "SourceKind", "available_sources", "clean_contacts", "contact_stage", "get_material", "ground_fit",
           "load_scene", "make_material", "material_table", "modal_analysis", "register", "render_scene",
           "render_to_file", "strike", "StreamedRender", "transfer_model"]
