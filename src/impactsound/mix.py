"""Mixing: sum the per-object pressures of every source into a mix and stems (all in pascals)."""
from __future__ import annotations

import numpy as np


def mix_stems(stems: dict[str, dict[str, np.ndarray]], n_listeners: int, n_samples: int) -> np.ndarray:
    """Sum stems {source kind: {object: (L, N) Pa}} into one (L, N) float64 array. Acoustics is linear
    (modal-sound.md sec. 7), so sources and objects simply add. Summed in sorted order: reproducible."""
    out = np.zeros((n_listeners, n_samples), dtype=np.float64)
    for kind in sorted(stems):
        for name in sorted(stems[kind]):
            out += stems[kind][name]
    return out
