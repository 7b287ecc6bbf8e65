"""impactsound: physics to sound.

Table of contents (pipeline order):

- scene: :func:`load_scene`, :class:`Scene` (TOML format: docs/scene-format.md)
- materials: :func:`get_material`, :func:`make_material`, :func:`material_table`
- dynamics: ``impactsound.dynamics.simulate`` (MuJoCo) -> :class:`EventLog` (docs/event-log.md); another engine's
  raw per-step contacts -> :class:`RawContacts` -> :func:`clean_contacts` (the contact merger) -> EventLog;
  ``impactsound.dynamics.check_event_log`` (plausibility of a user's log against the scene)
- contact: ``impactsound.contact`` (Hertz time scale, effective mass, local curvature)
- fem: ``impactsound.fem.modal.modal_analysis`` -> :class:`ModalModel`
- sources: ``impactsound.sources.modal.ModalSource`` (the :class:`Source` interface)
- transfer: ``impactsound.transfer.low_order`` (monopole + dipole radiation)
- pipeline: :func:`render_scene` -> :class:`RenderResult`; mix in ``impactsound.mix``
- io: WAV + sidecar (``impactsound.io.audio``), spectrogram PNG (``impactsound.io.plot``)
- assets: one HDF5 format for every precomputed thing (``impactsound.assets``)
"""
from .dynamics.events import EventLog
from .dynamics.hygiene import RawContacts, clean_contacts
from .errors import ImpactSoundError
from .fem.model import ModalModel
from .materials import Material, get_material, make_material, material_table
from .pipeline import RenderResult, render_scene
from .scene import Scene, load_scene
from .sources.base import Source

__all__ = ["EventLog", "ImpactSoundError", "Material", "ModalModel", "RawContacts", "RenderResult", "Scene", "Source",
           "clean_contacts", "get_material", "load_scene", "make_material", "material_table", "render_scene"]
