"""Harmonic shells: thin-shell sound (Chadwick, An & James 2009).

- :mod:`.dynamics`: explicit subspace Newmark at audio rate, its stability limit and rate choice, the impulse
  limiter (Algorithm 1).
- :mod:`.reduced`: :class:`ReducedShell`, the shell model (fem/shell.py) in its linear modes: the exact reduced
  internal force and the per-triangle forces a cubature is trained on.
- :mod:`.cubature`: greedy non-negative cubature of the reduced force, as a resumable, content-hashed asset.

The parametric surfaces (trash can, lid, cymbal, water bottle, sheet) are in :mod:`impactsound.scene.shells`.
"""
from impactsound.sources.shell.dynamics import (BRANCH_FULL, BRANCH_SCALED, BRANCH_ZERO, ShellRun, choose_rate,
                                                integrate, limit_impulse, newmark_stable_dt, step_linear)
from impactsound.sources.shell.reduced import ReducedShell

__all__ = ["BRANCH_FULL", "BRANCH_SCALED", "BRANCH_ZERO", "ShellRun", "choose_rate", "integrate", "limit_impulse",
           "newmark_stable_dt", "step_linear", "ReducedShell"]
