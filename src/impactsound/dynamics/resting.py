"""Where bodies lie still: resting stretches found from the recorded motion and the engine's contacts.

A body rests during a stretch of at least ``min_duration`` in which its centre of mass and rim move slower than
``v_rest`` and something holds it up (the ground, a static prop, another body: a contact whose normal points up
into it, within 60 degrees of +z). For each stretch we keep those supports as the engine reports them in the
stretch's middle step: contact points and normals in the body frame
(normals from the support into the body), the normal force of each and what supports it. Radiation damping at
those contacts (sources/resting.py) then damps the body's modes while it rests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rotation import quat_to_matrix

#: a body moving slower than this (centre of mass, and its rim from its spin) is still [m/s]
V_REST = 0.01
#: shortest stretch of stillness that counts as resting [s]
MIN_REST = 0.05
#: a support pushes the body up: the z component of its normal (from the support into the body) exceeds this
SUPPORT_COS = 0.5


@dataclass
class Rest:
    """One resting stretch of a body: times [s], and per supporting contact (k,): body-frame point [m] and unit
    normal (from the support into the body), normal force [N] and the support's id (-1: the ground)."""

    t0: float
    t1: float
    point: np.ndarray
    normal: np.ndarray
    load: np.ndarray
    support: np.ndarray


def _stretches(still: np.ndarray, t: np.ndarray, min_duration: float) -> list[tuple[int, int]]:
    """Index ranges [i0, i1] of runs of True in ``still`` lasting at least ``min_duration``."""
    out = []
    d = np.diff(np.concatenate([[0], still.astype(np.int8), [0]]))
    for i0, i1 in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1):
        if t[i1] - t[i0] >= min_duration:
            out.append((int(i0), int(i1)))
    return out


def resting_stretches(t, position, quaternion, raw, body: int, size: float, dt: float, *,
                      v_rest: float = V_REST, min_duration: float = MIN_REST, sample_every: int = 1) -> list[Rest]:
    """Resting stretches of body ``body`` from its recorded poses (t (K,), position (K, 3), quaternion (K, 4)) and
    the engine's raw contacts (dynamics/hygiene.py RawContacts); ``size`` [m] turns spin into rim speed, ``dt``
    [s] is the engine step (impulse / dt = force). The supports are read in the step nearest the stretch's middle
    among the steps that are multiples of ``sample_every`` (the steps that thinned resting contacts keep,
    hygiene.thin_resting), or among all steps with contacts if the stretch has none of those."""
    t = np.asarray(t, np.float64)
    P = np.asarray(position, np.float64)
    Q = np.asarray(quaternion, np.float64)
    if len(t) < 3:
        return []
    v = np.linalg.norm(np.diff(P, axis=0), axis=1) / np.diff(t)
    dq = np.minimum(np.linalg.norm(np.diff(Q, axis=0), axis=1), np.linalg.norm(Q[1:] + Q[:-1], axis=1))
    w = 2.0 * dq / np.diff(t)                                   # rotation rate [rad/s] (small angles)
    still_step = (v + 0.5 * size * w) < v_rest
    still = np.concatenate([still_step[:1], still_step[:-1] & still_step[1:], still_step[-1:]])
    mine = (raw.a == body) | (raw.b == body)
    out = []
    for i0, i1 in _stretches(still, t, min_duration):
        tm = 0.5 * (t[i0] + t[i1])
        rows = np.flatnonzero(mine & (raw.t >= t[i0]) & (raw.t <= t[i1]))
        if len(rows) == 0:
            continue                                            # still but touching nothing: held by a joint
        pick = rows[raw.step[rows] % max(1, int(sample_every)) == 0]
        pick = pick if len(pick) else rows
        step = raw.step[pick[np.argmin(np.abs(raw.t[pick] - tm))]]
        rows = rows[raw.step[rows] == step]
        k = int(np.argmin(np.abs(t - raw.t[rows[0]])))
        R = quat_to_matrix(Q[k])[0]
        on_b = raw.b[rows] == body
        n_w = np.where(on_b[:, None], raw.normal[rows], -raw.normal[rows])
        f = np.abs(np.einsum("ij,ij->i", raw.impulse[rows], raw.normal[rows])) / dt
        # supports bear the body's weight: contacts pushing it up (a cup on top of a book is not the book's support)
        keep = (f > 0) & (n_w[:, 2] > SUPPORT_COS)
        if not keep.any():
            continue
        out.append(Rest(float(t[i0]), float(t[i1]), (raw.point[rows][keep] - P[k]) @ R, n_w[keep] @ R, f[keep],
                        np.where(on_b, raw.a[rows], raw.b[rows])[keep]))
    return out
