"""Rigid-body dynamics -> contact events (design.md "dynamics/"; specs/modal-sound.md sec. 7-8).

- :mod:`.events`: the EventLog contract (columns, CSV/NPZ I/O).
- :mod:`.mujoco_backend`: :func:`simulate` (scene bodies + ground -> EventLog) with MuJoCo.
- :mod:`.hygiene`: raw per-step contacts -> merged, filtered collision events (engine independent).
"""
from .events import GROUND, EventLog
from .hygiene import V_MIN, MergedEvents, RawContacts, canonicalize, clean_contacts, merge_collisions
from .mujoco_backend import (GRAVITY, DynamicsResult, MujocoModel, build_model, restitution_to_damping_ratio,
                             run_dynamics, simulate)

__all__ = ["GROUND", "EventLog", "V_MIN", "RawContacts", "MergedEvents", "canonicalize", "merge_collisions",
           "clean_contacts", "simulate", "run_dynamics", "build_model", "DynamicsResult", "MujocoModel",
           "restitution_to_damping_ratio", "GRAVITY"]
