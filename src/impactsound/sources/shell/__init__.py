"""Harmonic shells: thin-shell sound (Chadwick, An & James 2009)."""
from impactsound.sources.shell.dynamics import (BRANCH_FULL, BRANCH_SCALED, BRANCH_ZERO, ShellRun, choose_rate,
                                                integrate, limit_impulse, newmark_stable_dt, step_linear)

__all__ = ["BRANCH_FULL", "BRANCH_SCALED", "BRANCH_ZERO", "ShellRun", "choose_rate", "integrate", "limit_impulse",
           "newmark_stable_dt", "step_linear"]
