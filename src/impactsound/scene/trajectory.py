"""Sampled trajectories: a listener that moves through the scene, a body's recorded motion.

A :class:`Trajectory` holds increasing times t_k [s], world positions x_k [m] and, optionally, orientations q_k
(unit quaternions w, x, y, z, body or head frame -> world). Between samples positions are interpolated linearly
or by a natural cubic spline (C2: no kink in the Doppler shift at a sample) and orientations by spherical linear
interpolation (slerp; Shoemake 1985, "Animating rotation with quaternion curves", SIGGRAPH). Before the first
sample and after the last the trajectory holds still (a listener that stops, a body at rest).

Scene files give a listener trajectory as rows ``[t, x, y, z]`` or ``[t, x, y, z, qw, qx, qy, qz]`` in the TOML, or
as a CSV file with the same columns (a header line ``t,x,y,z[,qw,qx,qy,qz]``), see docs/scene-format.md.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

INTERPOLATIONS = ("linear", "spline")


@dataclass
class Trajectory:
    """Times t (K,) [s], strictly increasing; positions (K, 3) [m], world; quaternions (K, 4) (w, x, y, z) or
    None (no orientation); interpolation "linear" or "spline" (positions; orientations always slerp)."""

    t: np.ndarray
    position: np.ndarray
    quaternion: np.ndarray | None = None
    interpolation: str = "linear"

    def __post_init__(self):
        self.t = np.ascontiguousarray(self.t, np.float64).reshape(-1)
        self.position = np.ascontiguousarray(self.position, np.float64).reshape(-1, 3)
        if self.quaternion is not None:
            q = np.asarray(self.quaternion, np.float64).reshape(-1, 4)
            q = q / np.linalg.norm(q, axis=1, keepdims=True)
            # one hemisphere from sample to sample, so that slerp takes the short way round
            flip = np.cumprod(np.where(np.einsum("ij,ij->i", q[1:], q[:-1]) < 0, -1.0, 1.0))
            q[1:] *= flip[:, None]
            self.quaternion = np.ascontiguousarray(q)
        self._spline = None

    @property
    def moves(self) -> bool:
        """Whether the position or orientation changes at all."""
        if len(self.t) < 2:
            return False
        still = np.all(self.position == self.position[0])
        if self.quaternion is not None:
            still = still and np.all(self.quaternion == self.quaternion[0])
        return not still

    def _segments(self, t):
        t = np.asarray(t, np.float64)
        tc = np.clip(t, self.t[0], self.t[-1])
        k = np.clip(np.searchsorted(self.t, tc, side="right") - 1, 0, max(len(self.t) - 2, 0))
        if len(self.t) < 2:
            return tc, k, np.zeros_like(tc)
        a = (tc - self.t[k]) / (self.t[k + 1] - self.t[k])
        return tc, k, a

    def position_at(self, t) -> np.ndarray:
        """Positions (..., 3) [m] at times t (...) [s]."""
        t = np.asarray(t, np.float64)
        if len(self.t) == 1:
            return np.broadcast_to(self.position[0], t.shape + (3,)).copy()
        if self.interpolation == "spline" and len(self.t) >= 3:
            if self._spline is None:
                from scipy.interpolate import CubicSpline
                self._spline = CubicSpline(self.t, self.position, axis=0, bc_type="natural")
            return self._spline(np.clip(t, self.t[0], self.t[-1]))
        _, k, a = self._segments(t)
        return self.position[k] + a[..., None] * (self.position[k + 1] - self.position[k])

    def velocity_at(self, t) -> np.ndarray:
        """Velocities (..., 3) [m/s] at times t (...) [s] (zero outside the sampled span)."""
        t = np.asarray(t, np.float64)
        out = np.zeros(t.shape + (3,))
        if len(self.t) < 2:
            return out
        inside = (t >= self.t[0]) & (t <= self.t[-1])
        if self.interpolation == "spline" and len(self.t) >= 3:
            self.position_at(self.t[:1])
            out[inside] = self._spline(t[inside], 1)
            return out
        _, k, _ = self._segments(t)
        v = (self.position[k + 1] - self.position[k]) / (self.t[k + 1] - self.t[k])[..., None]
        out[inside] = v[inside]
        return out

    def quaternion_at(self, t) -> np.ndarray | None:
        """Orientations (..., 4) (w, x, y, z) at times t by slerp, or None without orientations."""
        if self.quaternion is None:
            return None
        t = np.asarray(t, np.float64)
        if len(self.t) == 1:
            return np.broadcast_to(self.quaternion[0], t.shape + (4,)).copy()
        _, k, a = self._segments(t)
        return slerp(self.quaternion[k], self.quaternion[k + 1], a)


def slerp(q0, q1, a) -> np.ndarray:
    """Spherical linear interpolation of unit quaternions (same hemisphere), a in [0, 1] (Shoemake 1985)."""
    q0 = np.asarray(q0, np.float64)
    q1 = np.asarray(q1, np.float64)
    a = np.asarray(a, np.float64)[..., None]
    d = np.clip(np.einsum("...i,...i->...", q0, q1), -1.0, 1.0)[..., None]
    th = np.arccos(d)
    sn = np.sin(th)
    small = sn < 1e-9
    w0 = np.where(small, 1.0 - a, np.sin((1.0 - a) * th) / np.where(small, 1.0, sn))
    w1 = np.where(small, a, np.sin(a * th) / np.where(small, 1.0, sn))
    q = w0 * q0 + w1 * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def parse_trajectory(rows, where: str, base: Path = Path("."), interpolation: str = "linear") -> Trajectory:
    """A trajectory from a scene: a list of rows ``[t, x, y, z]`` / ``[t, x, y, z, qw, qx, qy, qz]`` or a CSV file
    (relative to ``base``) with those columns. Errors name ``where`` (the scene file and field)."""
    if interpolation not in INTERPOLATIONS:
        raise InputError(f"{where}: interpolation = {interpolation!r} is unknown; use 'linear' or 'spline'")
    if isinstance(rows, str):
        path = (base / rows).resolve()
        if not path.is_file():
            raise InputError(f"{where} = '{rows}': {path} not found; paths are relative to the scene file's folder")
        where = f"{where} ({path})"
        rows = _read_csv(path, where)
    try:
        arr = np.array([[float(v) for v in r] for r in rows], dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{where}: every row must be numbers [t, x, y, z] or [t, x, y, z, qw, qx, qy, qz]") from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] not in (4, 8):
        raise InputError(f"{where}: give rows of 4 numbers [t, x, y, z] (seconds, metres) or 8 with the head's "
                         f"orientation [t, x, y, z, qw, qx, qy, qz]; got shape {arr.shape}")
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise InputError(f"{where}: row {r} = {list(arr[r])} contains NaN or infinity")
    dt = np.diff(arr[:, 0])
    if np.any(dt <= 0):
        r = int(np.flatnonzero(dt <= 0)[0]) + 1
        raise InputError(f"{where}: times must increase strictly; row {r} has t = {arr[r, 0]} s after "
                         f"t = {arr[r - 1, 0]} s. Sort the rows and drop repeated times")
    q = None
    if arr.shape[1] == 8:
        q = arr[:, 4:]
        nq = np.linalg.norm(q, axis=1)
        if np.any(nq < 1e-9):
            r = int(np.flatnonzero(nq < 1e-9)[0])
            raise InputError(f"{where}: row {r} has a zero quaternion (qw, qx, qy, qz); give a rotation")
    return Trajectory(arr[:, 0], arr[:, 1:4], q, interpolation)


def _read_csv(path: Path, where: str) -> list:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"{where}: not a text (CSV) file") from None
    rows = [r for r in csv.reader(text.splitlines()) if r and not r[0].lstrip().startswith("#")]
    if rows and not _numeric(rows[0]):
        rows = rows[1:]                                  # header line
    for i, r in enumerate(rows):
        if not _numeric(r):
            raise InputError(f"{where}: line {i + 2} = {r} is not numbers (t, x, y, z[, qw, qx, qy, qz])")
    return rows


def _numeric(row) -> bool:
    try:
        [float(v) for v in row]
        return True
    except ValueError:
        return False
