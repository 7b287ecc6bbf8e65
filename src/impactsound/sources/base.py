"""The one interface every sound source implements.

A source is built once per scene (loading or precomputing its assets), then asked for the pressure at each
listener for a block of contact events. Sources never write files and never print: the caller mixes, reports
progress and writes outputs.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..dynamics.events import EventLog


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
