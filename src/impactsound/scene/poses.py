"""Pose tracks: a scene's motion given frame by frame (an animation, a game replay, another engine's bake).

A :class:`PoseTrack` holds frame times t_k [s] (strictly increasing) and, for every moving body, its world
position [m] and orientation (unit quaternion w, x, y, z; body frame -> world) at each frame. The position is that
of the point the object's ``origin`` names in the scene: its centre of mass (``origin = "com"``, the default) or
the mesh file's own origin (``origin = "mesh"``, what Blender and glTF store as an object's location).

Files (docs/motion.md):

- CSV or Parquet, one row per body and frame, columns ``time, body, x, y, z, qw, qx, qy, qz`` (any order; extra
  columns are ignored). ``body`` is the scene object's name.
- NPZ with ``time`` (K,), ``body`` (B,) names, ``position`` (K, B, 3) and ``quaternion_wxyz`` (K, B, 4). The
  quaternion key names its component order so that an (x, y, z, w) array cannot be passed by mistake.

Checks (each an :class:`InputError` naming the file, the body and the frame): frames out of order or repeated,
a body missing from some frames, non-finite values, quaternions that are not unit length (norm off by more than
1e-3: a mix-up of conventions or a scaled matrix), and speeds no falling or thrown object reaches (above
``MAX_SPEED``: positions in millimetres, a body that teleports, or frames with wrong times). A quaternion and
its negative are the same rotation; a sign flip between frames is allowed and made continuous.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

#: columns of a CSV / Parquet pose table
COLUMNS = ("time", "body", "x", "y", "z", "qw", "qx", "qy", "qz")
#: a body moving faster than this between frames is refused [m/s] (a fall of 50 m reaches 31 m/s)
MAX_SPEED = 50.0
#: largest accepted | |q| - 1 |
QUAT_TOL = 1e-3


@dataclass
class PoseTrack:
    """Frame times t (K,) [s]; names (B,); position (K, B, 3) [m]; quaternion (K, B, 4) (w, x, y, z), unit, sign
    continuous from frame to frame; ``path``: the file it came from (for messages)."""

    t: np.ndarray
    names: list[str]
    position: np.ndarray
    quaternion: np.ndarray
    path: str = "<poses>"

    @property
    def frame_rate(self) -> float:
        """Median frames per second."""
        return float(1.0 / np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0


def _fail(path, msg):
    raise InputError(f"{path}: {msg}")


def read_pose_table(path: str | Path) -> PoseTrack:
    """Read and check a pose table (CSV, Parquet or NPZ; module docstring).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    PoseTrack
        Unchecked against a scene (:func:`check_track` does that).

    Raises
    ------
    InputError
        Naming the file, body and frame of the first problem found.
    """
    path = Path(path)
    if not path.is_file():
        _fail(path, "pose table not found; give [scene] motion the path of a CSV, Parquet or NPZ pose table "
                    "(relative to the scene file)")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _read_npz(path)
    if suffix == ".csv":
        import csv
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            _fail(path, f"empty file; a pose table has the header {','.join(COLUMNS)}")
        header = [h.strip() for h in rows[0]]
        cols = {h: [r[j] if j < len(r) else "" for r in rows[1:]] for j, h in enumerate(header)}
        row_base = 2                                   # file line of the first data row
    elif suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            _fail(path, "reading Parquet needs pyarrow: pip install 'impactsound[parquet]', or write the table as CSV")
        table = pq.read_table(path)
        cols = {name: table.column(name).to_pylist() for name in table.column_names}
        row_base = 0
    else:
        _fail(path, f"unknown pose table type {suffix!r}; use .csv, .parquet or .npz")
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        _fail(path, f"missing column(s) {missing}; a pose table has the columns {', '.join(COLUMNS)} (time in s, "
                    "position in m, unit quaternion w, x, y, z)")
    names_col = [str(v).strip() for v in cols["body"]]
    num = {}
    for c in COLUMNS:
        if c == "body":
            continue
        try:
            num[c] = np.asarray([float(v) for v in cols[c]], np.float64)
        except (TypeError, ValueError):
            bad = next(j for j, v in enumerate(cols[c]) if not _is_float(v))
            _fail(path, f"row {bad + row_base}, column '{c}': {cols[c][bad]!r} is not a number")
    bad = np.flatnonzero(~np.isfinite(np.column_stack([num[c] for c in num])).all(axis=1))
    if len(bad):
        _fail(path, f"row {bad[0] + row_base} (body '{names_col[bad[0]]}'): a value is NaN or infinite")
    names = list(dict.fromkeys(names_col))
    if not names:
        _fail(path, "the pose table has no rows")
    times = np.unique(num["time"])
    K, B = len(times), len(names)
    P = np.full((K, B, 3), np.nan)
    Q = np.full((K, B, 4), np.nan)
    seen = np.zeros((K, B), np.int64)
    ti = np.searchsorted(times, num["time"])
    bi = np.asarray([names.index(n) for n in names_col])
    np.add.at(seen, (ti, bi), 1)
    if (seen > 1).any():
        k, b = np.argwhere(seen > 1)[0]
        rows_kb = np.flatnonzero((ti == k) & (bi == b))
        _fail(path, f"body '{names[b]}' has {seen[k, b]} rows at time {times[k]:.9g} s (rows "
                    f"{', '.join(str(r + row_base) for r in rows_kb[:4])}): frames are repeated; keep one row per "
                    "body and frame")
    if (seen == 0).any():
        k, b = np.argwhere(seen == 0)[0]
        _fail(path, f"body '{names[b]}' has no row at time {times[k]:.9g} s (frame {k}); every body needs a pose "
                    "in every frame")
    # rows must come in time order within each body (a shuffled export is a sign of a broken writer)
    for b in range(B):
        tb = num["time"][bi == b]
        if np.any(np.diff(tb) <= 0):
            j = int(np.flatnonzero(np.diff(tb) <= 0)[0])
            row = np.flatnonzero(bi == b)[j + 1]
            _fail(path, f"row {row + row_base} (body '{names[b]}'): time {tb[j + 1]:.9g} s comes after "
                        f"{tb[j]:.9g} s; frames must be in increasing time")
    P[ti, bi] = np.column_stack([num["x"], num["y"], num["z"]])
    Q[ti, bi] = np.column_stack([num["qw"], num["qx"], num["qy"], num["qz"]])
    return _checked(PoseTrack(times, names, P, Q, str(path)))


def _is_float(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _read_npz(path: Path) -> PoseTrack:
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:                                  # a truncated or foreign file
        _fail(path, f"not a readable NPZ file ({type(exc).__name__}: {exc})")
    keys = set(z.files)
    if "quaternion" in keys or "quaternion_xyzw" in keys:
        _fail(path, "give orientations as 'quaternion_wxyz' (w, x, y, z order); the key names the order so that "
                    "an (x, y, z, w) array is not read by mistake")
    need = {"time", "body", "position", "quaternion_wxyz"}
    if need - keys:
        _fail(path, f"missing array(s) {sorted(need - keys)}; a pose NPZ holds time (K,), body (B,) names, "
                    "position (K, B, 3) and quaternion_wxyz (K, B, 4)")
    t = np.asarray(z["time"], np.float64).reshape(-1)
    names = [str(n) for n in np.asarray(z["body"]).reshape(-1)]
    K, B = len(t), len(names)
    P = np.asarray(z["position"], np.float64)
    Q = np.asarray(z["quaternion_wxyz"], np.float64)
    if P.shape != (K, B, 3) or Q.shape != (K, B, 4):
        _fail(path, f"position has shape {P.shape} and quaternion_wxyz {Q.shape}; expected ({K}, {B}, 3) and "
                    f"({K}, {B}, 4) for {K} times and {B} bodies")
    if len(set(names)) != B:
        _fail(path, f"body names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    bad = np.argwhere(~(np.isfinite(P).all(axis=2) & np.isfinite(Q).all(axis=2)) | ~np.isfinite(t)[:, None])
    if len(bad):
        k, b = bad[0]
        _fail(path, f"body '{names[b]}', frame {k}: a value is NaN or infinite")
    d = np.diff(t)
    if np.any(d <= 0):
        k = int(np.flatnonzero(d <= 0)[0]) + 1
        what = "repeats" if d[k - 1] == 0 else "comes before"
        _fail(path, f"frame {k}: time {t[k]:.9g} s {what} the previous frame's {t[k - 1]:.9g} s; frames must be in "
                    "strictly increasing time")
    return _checked(PoseTrack(t, names, P, Q, str(path)))


def _checked(track: PoseTrack) -> PoseTrack:
    """Unit quaternions (made sign-continuous) and plausible speeds, or an InputError naming body and frame."""
    path, t, P, Q = track.path, track.t, track.position, track.quaternion
    if len(t) < 3:
        _fail(path, f"{len(t)} frame(s); contacts are inferred from velocity changes and need at least 3 frames")
    norm = np.linalg.norm(Q, axis=2)
    bad = np.argwhere(np.abs(norm - 1.0) > QUAT_TOL)
    if len(bad):
        k, b = bad[0]
        _fail(path, f"body '{track.names[b]}', frame {k} (t = {t[k]:.6g} s): quaternion {Q[k, b].tolist()} has "
                    f"norm {norm[k, b]:.6g}, not 1; give unit quaternions in (w, x, y, z) order")
    Q = Q / norm[..., None]
    # q and -q are one rotation: keep each body's quaternions in one hemisphere from frame to frame
    dots = np.einsum("kbi,kbi->kb", Q[1:], Q[:-1])
    sign = np.cumprod(np.where(dots < 0, -1.0, 1.0), axis=0)
    Q[1:] *= sign[..., None]
    speed = np.linalg.norm(np.diff(P, axis=0), axis=2) / np.diff(t)[:, None]
    if np.any(speed > MAX_SPEED):
        k, b = np.unravel_index(int(np.argmax(speed)), speed.shape)
        _fail(path, f"body '{track.names[b]}' moves {speed[k, b]:.3g} m/s between frames {k} and {k + 1} (t = "
                    f"{t[k]:.6g} .. {t[k + 1]:.6g} s): faster than {MAX_SPEED:g} m/s; positions must be in metres "
                    "and times in seconds (a teleporting body or a missing frame also does this)")
    track.quaternion = np.ascontiguousarray(Q)
    return track


def check_track(track: PoseTrack, bodies, duration: float) -> PoseTrack:
    """The track matched to the scene's bodies: every free body has poses, every name is an object, positions
    converted to the centre of mass (each object's ``origin``); frames after ``duration`` are dropped.

    Parameters
    ----------
    track : PoseTrack
    bodies : list of scene Body
    duration : float
        The scene's duration [s].

    Returns
    -------
    PoseTrack
        One column per scene body (static props held at their scene pose), positions of the centre of mass.
    """
    from ..rotation import quat_to_matrix
    path = track.path
    names = [b.name for b in bodies]
    unknown = [n for n in track.names if n not in names]
    if unknown:
        _fail(path, f"body name(s) {unknown} are not objects of the scene (objects: {names})")
    missing = [b.name for b in bodies if b.name not in track.names and not b.immovable]
    if missing:
        _fail(path, f"object(s) {missing} have no poses; add their rows, or make them static props "
                    "(static = true) if they never move")
    held = [b.name for b in bodies if b.name in track.names and b.immovable]
    if held:
        _fail(path, f"object(s) {held} are static or fixed in the scene but have poses; remove their rows or "
                    "their static/joint keys")
    keep = track.t <= duration + 1e-9
    if keep.sum() < 3:
        _fail(path, f"fewer than 3 frames lie within the scene's duration ({duration:g} s); frame times start at "
                    f"{track.t[0]:.6g} s")
    t = track.t[keep]
    K, B = len(t), len(bodies)
    P = np.empty((K, B, 3))
    Q = np.empty((K, B, 4))
    for i, b in enumerate(bodies):
        if b.name in track.names:
            j = track.names.index(b.name)
            q = track.quaternion[keep, j]
            p = track.position[keep, j]
            if getattr(b, "origin", "com") == "mesh":
                # the table places the mesh file's origin; the centre of mass sits at R c from it
                p = p + np.einsum("kij,j->ki", quat_to_matrix(q), np.asarray(b.com_in_file, np.float64))
            P[:, i], Q[:, i] = p, q
        else:
            P[:, i], Q[:, i] = np.asarray(b.position, np.float64), np.asarray(b.quaternion, np.float64)
    return PoseTrack(t, names, P, Q, path)


def write_pose_table(path: str | Path, t, names, position, quaternion) -> Path:
    """Write a pose table (CSV, Parquet or NPZ by suffix; columns as in the module docstring).

    Parameters
    ----------
    path : path-like
    t : array_like, shape (K,)
        Frame times [s].
    names : sequence of str, length B
    position : array_like, shape (K, B, 3)
        [m]
    quaternion : array_like, shape (K, B, 4)
        (w, x, y, z)

    Returns
    -------
    Path
        The file written (atomically: a temporary file renamed into place).
    """
    import os
    import tempfile
    path = Path(path)
    t = np.asarray(t, np.float64)
    P = np.asarray(position, np.float64)
    Q = np.asarray(quaternion, np.float64)
    K, B = len(t), len(names)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        suffix = path.suffix.lower()
        if suffix == ".npz":
            with open(tmp, "wb") as f:
                np.savez(f, time=t, body=np.asarray(list(names)), position=P, quaternion_wxyz=Q)
        else:
            body = np.repeat(np.asarray(list(names), dtype=object)[None], K, axis=0).reshape(-1)
            tt = np.repeat(t, B)
            cols = {"time": tt, "body": body, **{c: P[..., j].reshape(-1) for j, c in enumerate("xyz")},
                    **{c: Q[..., j].reshape(-1) for j, c in enumerate(("qw", "qx", "qy", "qz"))}}
            if suffix == ".parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq
                pq.write_table(pa.table({k: list(v) if k == "body" else v for k, v in cols.items()}), tmp)
            elif suffix == ".csv":
                with open(tmp, "w") as f:
                    f.write(",".join(COLUMNS) + "\n")
                    num = np.column_stack([cols[c] for c in COLUMNS if c != "body"])
                    for j in range(len(tt)):
                        v = num[j]
                        f.write(f"{v[0]:.9g},{body[j]}," + ",".join(f"{x:.9g}" for x in v[1:]) + "\n")
            else:
                raise InputError(f"{path}: unknown pose table type {path.suffix!r}; use .csv, .parquet or .npz")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
