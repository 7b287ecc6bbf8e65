"""Rigid-body dynamics -> contact events.

Bodies move rigidly and their vibration modes live in the body frame (O'Brien, Shen & Gatchalian 2002,
"Synthesizing sounds from rigid-body simulations"); the contact impulses of the dynamics drive every sound source,
after the hygiene of :mod:`.hygiene` (merged collisions; impulses slower than v_min = 5 cm/s dropped, as in
Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 4.3).


- :mod:`.events`: the EventLog contract (columns, CSV/NPZ I/O).
- :mod:`.mujoco_backend`: :func:`simulate` (scene bodies + ground -> EventLog) with MuJoCo.
- :mod:`.hygiene`: the contact merger, engine independent: raw per-step contacts (:class:`RawContacts`, plain
  NumPy arrays from any engine) -> merged, filtered collision events (:func:`clean_contacts`; the steps alone:
  :func:`canonicalize`, :func:`merge_collisions`; each body's resting support at an event: :func:`support_at`).
  docs/event-log.md shows it on PyBullet's contacts.
- :mod:`.plausibility`: :func:`check_event_log`, a user's event log against the scene (times, impulses, contact
  points, signs, ground); run on every ``scene.event_log`` before rendering.
"""
from .events import GROUND, EmptyEventLogWarning, EventLog, EventLogWarning
from .hygiene import (V_MIN, MergedEvents, RawContacts, canonicalize, clean_contacts, merge_collisions,
                      support_at)
from .mujoco_backend import (GRAVITY, DynamicsResult, MujocoModel, build_model, restitution_to_damping_ratio,
                             run_dynamics, simulate)
from .plausibility import ImplausibleEventWarning, check_event_log

__all__ = ["GROUND", "EventLog", "EventLogWarning", "EmptyEventLogWarning", "V_MIN", "RawContacts", "MergedEvents",
           "canonicalize", "merge_collisions", "clean_contacts", "support_at", "check_event_log", "ImplausibleEventWarning",
           "simulate", "run_dynamics", "build_model", "DynamicsResult", "MujocoModel",
           "restitution_to_damping_ratio", "GRAVITY"]
