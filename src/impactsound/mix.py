"""Mixing: sum the per-object pressures of every source into a mix and stems (all in pascals)."""
from __future__ import annotations

import numpy as np


def mix_stems(stems: dict[str, dict[str, np.ndarray]], n_listeners: int, n_samples: int) -> np.ndarray:
    """Sum the stems of every source and object into one mix.

    Acoustics is linear, so the sources and objects simply add (p = p_M + p_R, Chadwick, Zheng & James 2012,
    "Precomputed Acceleration Noise", sec. 2). Summed in sorted order: reproducible.

    Parameters
    ----------
    stems : dict of str to dict of str to ndarray
        {source kind: {object name: pressure (L, N) [Pa]}}.
    n_listeners : int
        L.
    n_samples : int
        N.

    Returns
    -------
    ndarray, shape (L, N)
        The mix [Pa], float64.
    """
    out = np.zeros((n_listeners, n_samples), dtype=np.float64)
    for kind in sorted(stems):
        for name in sorted(stems[kind]):
            out += stems[kind][name]
    return out
