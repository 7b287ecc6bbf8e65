"""Granular sound (M. Marko, "Sound simulation of granular materials"; docs/granular.md).

- :mod:`.pulse`: one grain collision's acceleration noise (Hertz contact of two spheres, exact rigid-sphere
  radiation in closed form).
- :mod:`.synth`: :func:`grain_noise`, every grain-grain collision of a table at listeners (tabulated, band-limited,
  compiled), and :func:`grain_noise_reference` (plain per-collision NumPy).
- :mod:`.container`: the container's modes struck by grain hits (Hertz on a heavy wall).
- :mod:`.events`: the granular event table (:class:`GranularEvents`, NPZ/CSV/Parquet).
- :mod:`.simulate`: the event-driven hard-sphere simulator (walls, pours, collapse guard).
- :mod:`.importlog`: another simulator's per-step contact log -> event table.
- :mod:`.generator`: the statistical collision generator (fit, save, generate).
- :mod:`.scene_events`, :mod:`.source`: a scene's ``[granular]`` table -> events -> the source kinds
  ``grain_noise`` and ``container``.
"""
from .events import GranularEvents, load_events, save_events
from .synth import grain_noise, grain_noise_reference

__all__ = ["GranularEvents", "load_events", "save_events", "grain_noise", "grain_noise_reference"]
