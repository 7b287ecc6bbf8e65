"""Where a moving body is heard from: retarded time, body-frame listener position and convective amplification.

A body whose centre of mass follows X(t) with orientation R(t), heard by a listener at x_l(t): the sound that
reaches the listener at time t left the body at the emission (retarded) time T solving
    T = t - |x_l(t) - X(T)| / c,
found by fixed-point iteration (it contracts by the Mach number |X'| / c, ~1e-2 for falling objects). The
listener is seen from the body at x_b = R(T)^T (x_l(t) - X(T)), where the body's radiation (FFAT map or compact
model) is evaluated.

A moving compact source radiates, in its far field, with the convective amplification (1 - M_r)^-2, M_r = X'(T)
. e_R / c, e_R the unit vector from X(T) to x_l(t), for both the monopole and the dipole (Lowson 1965, "The sound
field for singularities in motion", Proc. R. Soc. A 286; Dowling & Ffowcs Williams 1983, "Sound and sources of
sound", ch. 9). One factor is the Jacobian of the retarded time, the other the time derivative of the source
strength seen by the observer. We apply it to every mode's radiation weight; the pitch shift 1 / (1 - M_r) comes
from reading the modal state at T (sources/modal_moving.py). A listener that moves samples the pressure field
where it is: no amplitude factor. Rotation changes which direction of the body's radiation the listener hears;
terms of order (rotation rate / modal frequency) are neglected (quasi-static directivity).

Body motion comes from the rigid-body engine (poses recorded at the control rate; dynamics/mujoco_backend.py)
or, for an event log without recorded motion, from the poses the events carry.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..rotation import quat_to_matrix
from ..scene.trajectory import Trajectory

#: slowest control rate of radiation that follows a moving body or listener [Hz] (the Harmonic Shells paper's
#: renderer updates acoustic transfer at 1 kHz along the listener path, Chadwick, An & James 2009, sec. 6)
CONTROL_RATE_HZ = 1000.0
#: a recorded pose sample is dropped where the body moved less than this since the previous one and before the next
#: [m] / quaternion units (resting bodies collapse to their endpoints)
REST_TOL = 1e-7


def control_hop(sample_rate: float, rate: float = CONTROL_RATE_HZ) -> int:
    """Samples per control frame: the largest integer hop giving at least ``rate`` frames per second."""
    return max(1, int(np.floor(float(sample_rate) / float(rate))))


@dataclass
class Pose:
    """Positions (..., 3) [m], rotations (..., 3, 3) body -> world, velocities (..., 3) [m/s]."""

    position: np.ndarray
    rotation: np.ndarray
    velocity: np.ndarray


def static_trajectory(position, quaternion) -> Trajectory:
    """A body that never moves."""
    return Trajectory(np.zeros(1), np.asarray(position, np.float64)[None], np.asarray(quaternion, np.float64)[None])


def body_pose(traj: Trajectory, t) -> Pose:
    """The pose of a body trajectory (with orientations) at times t."""
    t = np.asarray(t, np.float64)
    q = traj.quaternion_at(t)
    R = quat_to_matrix(q.reshape(-1, 4)).reshape(t.shape + (3, 3))
    return Pose(traj.position_at(t), R, traj.velocity_at(t))


def compress_motion(t, position, quaternion, tol: float = REST_TOL) -> Trajectory:
    """A body's recorded poses (K,), (K, 3), (K, 4) as a trajectory without the samples where it rests (kept: the
    first and last, and every sample next to a move larger than ``tol``): linear interpolation between what is
    kept reproduces the record to within ``tol``."""
    t = np.asarray(t, np.float64)
    P = np.asarray(position, np.float64)
    Q = np.asarray(quaternion, np.float64)
    if len(t) <= 2:
        return Trajectory(t, P, Q)
    step = np.maximum(np.abs(np.diff(P, axis=0)).max(axis=1), np.abs(np.diff(Q, axis=0)).max(axis=1)) > tol
    keep = np.zeros(len(t), bool)
    keep[[0, -1]] = True
    keep[:-1] |= step
    keep[1:] |= step
    return Trajectory(t[keep], P[keep], Q[keep])


def event_trajectory(t, position, quaternion) -> Trajectory | None:
    """A body's motion as far as an event log tells it: its poses at its events (time order), held constant before
    the first and after the last and interpolated in between. None when no event gives a pose."""
    t = np.asarray(t, np.float64)
    ok = np.isfinite(position).all(axis=1) & np.isfinite(quaternion).all(axis=1)
    if not ok.any():
        return None
    order = np.argsort(t[ok], kind="stable")
    tt, P, Q = t[ok][order], np.asarray(position)[ok][order], np.asarray(quaternion)[ok][order]
    keep = np.concatenate([[True], np.diff(tt) > 0])          # one pose per time
    return Trajectory(tt[keep], P[keep], Q[keep])


@dataclass
class RetardedGeometry:
    """Per control frame k and listener l: emission time T (K, L) [s], delay d = t - T (K, L) [s], listener in the
    body frame x_b (K, L, 3) [m], source world position X(T) (K, L, 3) [m] and the convective amplification
    (1 - M_r)^-2 (K, L)."""

    T: np.ndarray
    delay: np.ndarray
    x_body: np.ndarray
    source: np.ndarray
    amplification: np.ndarray


def retarded_geometry(body: Trajectory, t, listeners, c: float, *, iterations: int = 12) -> RetardedGeometry:
    """Emission times and body-frame listener positions for listener positions ``listeners`` (K, L, 3) [m] at
    times t (K,) [s] (module docstring). ``body`` carries orientations."""
    t = np.asarray(t, np.float64)
    x_l = np.asarray(listeners, np.float64)
    K, L = x_l.shape[:2]
    tt = np.broadcast_to(t[:, None], (K, L))
    linear = body.interpolation == "linear" or len(body.t) < 3
    if linear and body.quaternion is not None:
        T, x_b, X, amp = _pose_threads(body, t, np.ascontiguousarray(x_l), float(c), iterations)
        return RetardedGeometry(T, tt - T, x_b, X, amp)
    if linear:
        T = _retarded_times_linear(body.t, body.position, t, np.ascontiguousarray(x_l), float(c), iterations)
    else:
        T = tt - np.linalg.norm(x_l - body.position_at(tt), axis=-1) / c
        for _ in range(iterations):
            T_new = tt - np.linalg.norm(x_l - body.position_at(T), axis=-1) / c
            done = np.max(np.abs(T_new - T)) < 1e-13
            T = T_new
            if done:
                break
    pose = body_pose(body, T)
    rel = x_l - pose.position
    r = np.linalg.norm(rel, axis=-1)
    x_b = np.einsum("klji,klj->kli", pose.rotation, rel)            # R^T (x_l - X)
    m_r = np.einsum("kli,kli->kl", pose.velocity, rel) / np.where(r > 0, r, 1.0) / c
    return RetardedGeometry(T, tt - T, x_b, pose.position, 1.0 / (1.0 - m_r) ** 2)


def _pose_threads(body: Trajectory, t, x_l, c: float, iterations: int):
    """:func:`_retarded_pose_linear` over the listeners, split across threads for long renders (the compiled code
    releases the GIL; each listener's values are computed alone, so the result does not depend on the split)."""
    from ..parallel import default_threads
    K, L = x_l.shape[:2]
    nt = min(default_threads(), L)
    if nt < 2 or K * L < 4000:
        return _retarded_pose_linear(body.t, body.position, body.quaternion, t, x_l, c, iterations)
    from concurrent.futures import ThreadPoolExecutor
    cuts = np.linspace(0, L, nt + 1).astype(int)
    with ThreadPoolExecutor(max_workers=nt) as ex:
        parts = list(ex.map(lambda i: _retarded_pose_linear(body.t, body.position, body.quaternion, t,
                                                            np.ascontiguousarray(x_l[:, cuts[i]:cuts[i + 1]]), c,
                                                            iterations), range(nt)))
    return tuple(np.concatenate([p[j] for p in parts], axis=1) for j in range(4))


@njit(cache=True, nogil=True)
def _retarded_times_linear(tb, xb, t, x_l, c, iterations):
    """Emission times T (K, L) of :func:`retarded_geometry` for a body trajectory interpolated linearly (times tb,
    positions xb, held still outside its span): the same fixed point per frame and listener, compiled."""
    K, L = x_l.shape[0], x_l.shape[1]
    nb = tb.shape[0]
    T = np.empty((K, L))
    for l in range(L):
        for k in range(K):
            Tk = t[k]
            for it in range(iterations + 1):
                tc = min(max(Tk, tb[0]), tb[nb - 1])
                if nb < 2:
                    px, py, pz = xb[0, 0], xb[0, 1], xb[0, 2]
                else:
                    j = min(max(np.searchsorted(tb, tc, side="right") - 1, 0), nb - 2)
                    a = (tc - tb[j]) / (tb[j + 1] - tb[j])
                    px = xb[j, 0] + a * (xb[j + 1, 0] - xb[j, 0])
                    py = xb[j, 1] + a * (xb[j + 1, 1] - xb[j, 1])
                    pz = xb[j, 2] + a * (xb[j + 1, 2] - xb[j, 2])
                dx = x_l[k, l, 0] - px
                dy = x_l[k, l, 1] - py
                dz = x_l[k, l, 2] - pz
                Tn = t[k] - math.sqrt(dx * dx + dy * dy + dz * dz) / c
                done = abs(Tn - Tk) < 1e-13
                Tk = Tn
                if done or nb < 2:
                    break
            T[k, l] = Tk
    return T


@njit(cache=True, nogil=True)
def _retarded_pose_linear(tb, xb, qb, t, x_l, c, iterations):
    """:func:`retarded_geometry` in one compiled pass for a body interpolated linearly with orientations (slerp, as
    ``Trajectory.quaternion_at``): emission times T (K, L), the listener in the body frame (K, L, 3), the source
    position (K, L, 3) and the convective amplification (K, L)."""
    K, L = x_l.shape[0], x_l.shape[1]
    nb = tb.shape[0]
    T = _retarded_times_linear(tb, xb, t, x_l, c, iterations)
    x_b = np.empty((K, L, 3))
    X = np.empty((K, L, 3))
    amp = np.empty((K, L))
    for l in range(L):
        for k in range(K):
            Tk = T[k, l]
            v0 = v1 = v2 = 0.0
            if nb < 2:
                p0, p1, p2 = xb[0, 0], xb[0, 1], xb[0, 2]
                w, x, y, z = qb[0, 0], qb[0, 1], qb[0, 2], qb[0, 3]
            else:
                tc = min(max(Tk, tb[0]), tb[nb - 1])
                j = min(max(np.searchsorted(tb, tc, side="right") - 1, 0), nb - 2)
                h = tb[j + 1] - tb[j]
                a = (tc - tb[j]) / h
                p0 = xb[j, 0] + a * (xb[j + 1, 0] - xb[j, 0])
                p1 = xb[j, 1] + a * (xb[j + 1, 1] - xb[j, 1])
                p2 = xb[j, 2] + a * (xb[j + 1, 2] - xb[j, 2])
                if tb[0] <= Tk <= tb[nb - 1]:
                    v0 = (xb[j + 1, 0] - xb[j, 0]) / h
                    v1 = (xb[j + 1, 1] - xb[j, 1]) / h
                    v2 = (xb[j + 1, 2] - xb[j, 2]) / h
                # slerp (Shoemake 1985) between the segment's unit quaternions, same hemisphere
                d = 0.0
                for i in range(4):
                    d += qb[j, i] * qb[j + 1, i]
                d = min(max(d, -1.0), 1.0)
                th = math.acos(d)
                sn = math.sin(th)
                if sn < 1e-9:
                    w0, w1 = 1.0 - a, a
                else:
                    w0, w1 = math.sin((1.0 - a) * th) / sn, math.sin(a * th) / sn
                w = w0 * qb[j, 0] + w1 * qb[j + 1, 0]
                x = w0 * qb[j, 1] + w1 * qb[j + 1, 1]
                y = w0 * qb[j, 2] + w1 * qb[j + 1, 2]
                z = w0 * qb[j, 3] + w1 * qb[j + 1, 3]
            n = math.sqrt(w * w + x * x + y * y + z * z)
            w, x, y, z = w / n, x / n, y / n, z / n
            r0 = x_l[k, l, 0] - p0
            r1 = x_l[k, l, 1] - p1
            r2 = x_l[k, l, 2] - p2
            # R^T r with R the rotation of (w, x, y, z), body -> world
            x_b[k, l, 0] = (1 - 2 * (y * y + z * z)) * r0 + 2 * (x * y + w * z) * r1 + 2 * (x * z - w * y) * r2
            x_b[k, l, 1] = 2 * (x * y - w * z) * r0 + (1 - 2 * (x * x + z * z)) * r1 + 2 * (y * z + w * x) * r2
            x_b[k, l, 2] = 2 * (x * z + w * y) * r0 + 2 * (y * z - w * x) * r1 + (1 - 2 * (x * x + y * y)) * r2
            X[k, l, 0], X[k, l, 1], X[k, l, 2] = p0, p1, p2
            r = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
            m_r = (v0 * r0 + v1 * r1 + v2 * r2) / (r if r > 0 else 1.0) / c
            amp[k, l] = 1.0 / (1.0 - m_r) ** 2
    return T, x_b, X, amp


def emission_keyframes(body: Trajectory, T, listeners, c: float, *, iterations: int = 8):
    """Keyframes uniform in emission time: for each emission time T_k (K,) [s] and listener channel (objects with
    ``position_at``), the time t_kl [s] the sound emitted at T_k reaches it (t = T + |x_l(t) - X(T)| / c, fixed
    point), the listener there in the body frame x_b (K, L, 3) [m], the convective amplification (1 - M_r)^-2
    (K, L), the listener's world position (K, L, 3) and the source's (K, 3). Renderers that step a body's state in
    emission time (the shell source) take their radiation from these."""
    T = np.asarray(T, np.float64)
    pose = body_pose(body, T)
    X = pose.position                                                  # (K, 3)
    t = np.stack([T + np.linalg.norm(l.position_at(T) - X, axis=-1) / c for l in listeners], axis=1)
    for _ in range(iterations):
        xl = np.stack([l.position_at(t[:, i]) for i, l in enumerate(listeners)], axis=1)
        t_new = T[:, None] + np.linalg.norm(xl - X[:, None], axis=-1) / c
        done = np.max(np.abs(t_new - t)) < 1e-13
        t = t_new
        if done:
            break
    xl = np.stack([l.position_at(t[:, i]) for i, l in enumerate(listeners)], axis=1)   # (K, L, 3)
    rel = xl - X[:, None]
    r = np.linalg.norm(rel, axis=-1)
    x_b = np.einsum("kji,klj->kli", pose.rotation, rel)
    m_r = np.einsum("ki,kli->kl", pose.velocity, rel) / np.where(r > 0, r, 1.0) / c
    return t, x_b, 1.0 / (1.0 - m_r) ** 2, xl, X
