"""Errors that reach users.

Every error a user can cause derives from :class:`ImpactSoundError`. Its message names the file and the field
involved and says what would fix it; the CLI prints it as one line and exits non-zero (``--debug`` shows the
traceback). Programming errors are left as ordinary Python exceptions.
"""
from __future__ import annotations


class ImpactSoundError(Exception):
    """Base class for errors caused by input, files or settings."""


class InputError(ImpactSoundError, ValueError):
    """A scene, event log, parameter or command-line value is invalid."""


class MeshError(ImpactSoundError, ValueError):
    """A mesh is unusable (not watertight, degenerate, inverted, wrong units...)."""


class MaterialError(InputError):
    """Unknown material or invalid material constants."""


class AssetError(ImpactSoundError):
    """A precomputed asset is missing, corrupted, stale, or of the wrong kind/version."""


class SolverError(ImpactSoundError, RuntimeError):
    """A numerical solve failed or would be unstable (with the reason and what to change)."""
