"""Two event logs of one scene compared collision by collision (inferred contacts against a simulator's own).

Engines split one collision differently (MuJoCo reports a box's landing as one event per corner, a frame-based
inference may see one per frame), so both logs are first reduced to *collisions*: the events of one body pair
whose onsets follow each other within ``window`` seconds, with their impulses summed as vectors and the earliest
onset kept. A reference collision is matched by the collision of the same pair in the other log whose onset is
nearest, if within ``window``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .events import EventLog


@dataclass
class Collisions:
    """Per collision: pair (a, b), onset t0 [s], summed impulse J (3,) [N s], largest approach speed vn [m/s]."""

    a: np.ndarray
    b: np.ndarray
    t0: np.ndarray
    impulse: np.ndarray
    vn: np.ndarray


def collisions(log: EventLog, window: float) -> Collisions:
    """The events of ``log`` grouped into collisions (module docstring)."""
    a = np.minimum(log.a, log.b)
    b = np.maximum(log.a, log.b)
    # one sign convention: the impulse on the higher id
    J = np.where((log.b >= log.a)[:, None], log.impulse, -log.impulse)
    order = np.lexsort((log.t, b, a))
    a, b, t, J, vn = a[order], b[order], log.t[order], J[order], log.vn[order]
    new = np.ones(len(t), bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1]) | (np.diff(t) > window)
    gid = np.cumsum(new) - 1
    n = int(gid[-1]) + 1 if len(gid) else 0
    Js = np.zeros((n, 3))
    np.add.at(Js, gid, J)
    vmax = np.zeros(n)
    np.maximum.at(vmax, gid, vn)
    return Collisions(a[new], b[new], t[new], Js, vmax)


@dataclass
class Match:
    """Reference collisions and, for each, the other log's matched collision (-1: none)."""

    ref: Collisions
    other: Collisions
    index: np.ndarray

    @property
    def matched(self) -> np.ndarray:
        return self.index >= 0

    def onset_error(self) -> np.ndarray:
        """Other minus reference onset [s] of matched collisions."""
        m = self.matched
        return self.other.t0[self.index[m]] - self.ref.t0[m]

    def impulse_ratio(self) -> np.ndarray:
        """|J_other| / |J_ref| of matched collisions."""
        m = self.matched
        return (np.linalg.norm(self.other.impulse[self.index[m]], axis=1)
                / np.linalg.norm(self.ref.impulse[m], axis=1))


def match(ref: EventLog, other: EventLog, window: float) -> Match:
    """Match the collisions of ``ref`` with those of ``other`` (module docstring).

    Parameters
    ----------
    ref, other : EventLog
    window : float
        [s] Collision grouping and matching window (one and a half frames, for a frame-based log).

    Returns
    -------
    Match
    """
    R = collisions(ref, window)
    O = collisions(other, window)
    idx = np.full(len(R.t0), -1)
    for i in range(len(R.t0)):
        cand = np.flatnonzero((O.a == R.a[i]) & (O.b == R.b[i]))
        if len(cand):
            j = cand[np.argmin(np.abs(O.t0[cand] - R.t0[i]))]
            if abs(O.t0[j] - R.t0[i]) <= window:
                idx[i] = j
    return Match(R, O, idx)
