"""The one interface every sound source implements, and the checks its ``render`` arguments share.

A source is built once per scene (loading or precomputing its assets), then asked for the pressure at each
listener for a block of contact events. Sources never write files and never print: the caller mixes, reports
progress and writes outputs. A source *kind* (its options, asset preparation and registration for scenes) is
declared with :class:`~impactsound.sources.registry.SourceKind`.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..dynamics.events import EventLog
from ..errors import InputError


@runtime_checkable
class Source(Protocol):
    #: short kind name used for stems and scene switches ("modal", "acceleration_noise", ...)
    kind: str

    def render(self, events: EventLog, listeners: np.ndarray, sample_rate: int, duration: float
               ) -> dict[str, np.ndarray]:
        """Pressure at the listeners, per scene object.

        events: the scene's contact events; listeners: (L, 3) world positions [m]; sample_rate [Hz];
        duration [s]. Returns {object name: array (L, n_samples) float64 in pascals}, n_samples =
        round(duration * sample_rate); objects that make no sound may be left out.
        """
        ...


def render_arguments(who: str, listeners, sample_rate, duration) -> tuple[np.ndarray, float, int]:
    """Check a source's render arguments and return (listeners (L, 3) float64 [m], sample_rate [Hz], n_samples).

    Errors (:class:`InputError`) name ``who`` (e.g. ``"ModalSource.render"``) and the argument: listeners that are
    not a finite (L, 3) array, a sample rate that is not positive, a negative or non-finite duration [s]."""
    L_w = np.asarray(listeners, np.float64)
    if L_w.ndim != 2 or L_w.shape[1] != 3 or not np.isfinite(L_w).all():
        raise InputError(f"{who}: listeners must be a finite (L, 3) array in metres, got shape {L_w.shape}")
    fs = float(sample_rate)
    if not (np.isfinite(fs) and fs > 0):
        raise InputError(f"{who}: sample_rate = {sample_rate} Hz must be positive")
    if not (np.isfinite(duration) and duration >= 0):
        raise InputError(f"{who}: duration = {duration} s must be >= 0")
    return L_w, fs, int(round(duration * fs))


def check_objects_known(who: str, what: str, assets: dict, bodies) -> None:
    """Refuse assets ({object name: asset}) given for objects that are not among ``bodies``: an
    :class:`InputError` naming ``who``, ``what`` the assets are and the scene's objects."""
    names = [b.name for b in bodies]
    unknown = [k for k in assets if k not in names]
    if unknown:
        raise InputError(f"{who}: {what} given for unknown objects {unknown}; objects: {names}")
