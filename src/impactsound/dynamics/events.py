"""Contact events: the contract between rigid-body dynamics and every sound source.

One event is one merged collision (the engine's per-step contacts merged by :mod:`.hygiene`):

================  ======  ========================================================================================
column            unit    meaning
================  ======  ========================================================================================
t                 s       start time t0 of the collision
a, b              -       body indices into the scene's objects; -1 is the ground / static world
point             m       world contact point (3,)
normal            -       unit contact normal (3,), pointing from body a to body b
impulse           N s     impulse on body b (3,); body a receives the opposite
vn                m/s     relative normal approach speed at first contact (>= 0)
pos_a, pos_b      m       world position of each body's centre of mass at t0 (NaN when unknown/ground)
quat_a, quat_b    -       world orientation (w, x, y, z) of each body frame at t0 (NaN when unknown/ground)
support_a_point   m       world point of body a's equivalent resting support at t0 (3,); NaN when a is free
support_a_normal  -       unit normal (3,) of that support, pointing from the support into body a; NaN when free
support_b_*       m, -    the same for body b (support_b_point, support_b_normal)
================  ======  ========================================================================================

Support: the resting contacts a body has at t0 (contacts that have been calm, approach speed below v_min, for the
settle time; dynamics/hygiene.py), reduced to one equivalent support: the normal-force-weighted centroid of their
points and their normal-force-weighted mean normal. Acceleration noise uses it to let the support answer an impulse
that pushes the body into it (sources/pan/timescale.py); logs without these columns treat every body as free.

Event logs are read from and written to CSV or NPZ (see docs/event-log.md); other engines (Blender, Bullet, your
own) can write them and skip our dynamics.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..errors import InputError

GROUND = -1

SUPPORT = ("support_a_point", "support_a_normal", "support_b_point", "support_b_normal")
_VEC = {"point": 3, "normal": 3, "impulse": 3, "pos_a": 3, "pos_b": 3, "quat_a": 4, "quat_b": 4,
        **{k: 3 for k in SUPPORT}}
_CSV_COLUMNS = {
    "t": ["time"], "a": ["body_a"], "b": ["body_b"],
    "point": ["px", "py", "pz"], "normal": ["nx", "ny", "nz"], "impulse": ["jx", "jy", "jz"], "vn": ["vn"],
    "pos_a": ["ax", "ay", "az"], "quat_a": ["aqw", "aqx", "aqy", "aqz"],
    "pos_b": ["bx", "by", "bz"], "quat_b": ["bqw", "bqx", "bqy", "bqz"],
    "support_a_point": ["sa_px", "sa_py", "sa_pz"], "support_a_normal": ["sa_nx", "sa_ny", "sa_nz"],
    "support_b_point": ["sb_px", "sb_py", "sb_pz"], "support_b_normal": ["sb_nx", "sb_ny", "sb_nz"],
}
_OPTIONAL = ("pos_a", "quat_a", "pos_b", "quat_b") + SUPPORT
REQUIRED_CSV = ["time", "body_a", "body_b", "px", "py", "pz", "nx", "ny", "nz", "jx", "jy", "jz", "vn"]


class EventLogWarning(UserWarning):
    """Something about a user's event log that the render goes on with (the CLI prints it as one line)."""


class EmptyEventLogWarning(EventLogWarning):
    """The event log has a header but no events: the render is silent."""


def _nan(n, k):
    return np.full((n, k), np.nan)


@dataclass
class EventLog:
    """A table of contact events, sorted by time (columns as in the module docstring).

    Parameters
    ----------
    t : array_like, shape (n,)
        Start times t0 [s].
    a, b : array_like of int, shape (n,)
        Body indices; -1 (:data:`GROUND`) is the ground / static world.
    point : array_like, shape (n, 3)
        World contact points [m].
    normal : array_like, shape (n, 3)
        Unit contact normals, from a to b.
    impulse : array_like, shape (n, 3)
        Impulse on body b [N s] (a receives the opposite).
    vn : array_like, shape (n,)
        Normal approach speed at first contact [m/s].
    pos_a, pos_b : array_like, shape (n, 3), optional
        World centre-of-mass positions at t0 [m]; NaN (the default) when unknown.
    quat_a, quat_b : array_like, shape (n, 4), optional
        World orientations (w, x, y, z) at t0; NaN when unknown.
    support_a_point, support_b_point : array_like, shape (n, 3), optional
        World point of each body's equivalent resting support [m]; NaN for a free body.
    support_a_normal, support_b_normal : array_like, shape (n, 3), optional
        Unit normal of that support, into the body; NaN for a free body.
    body_names : list of str, optional
        Names of the scene bodies, by index (used when writing CSV).

    A log made by the dynamics also carries ``motion``: one Trajectory per body (poses recorded at >= 1 kHz,
    scene/trajectory.py), which radiation follows while a body rings (transfer/motion.py), and ``resting``:
    {body index: [Rest, ...]} where bodies lie still on supports (dynamics/resting.py; resting contact damping).
    Both are kept by :meth:`select` and :meth:`sorted`; CSV and NPZ files hold only the poses at the events.
    """

    t: np.ndarray
    a: np.ndarray
    b: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    impulse: np.ndarray
    vn: np.ndarray
    pos_a: np.ndarray | None = None
    quat_a: np.ndarray | None = None
    pos_b: np.ndarray | None = None
    quat_b: np.ndarray | None = None
    support_a_point: np.ndarray | None = None
    support_a_normal: np.ndarray | None = None
    support_b_point: np.ndarray | None = None
    support_b_normal: np.ndarray | None = None
    body_names: list[str] = field(default_factory=list)

    def __post_init__(self):
        n = len(np.atleast_1d(self.t))
        self.t = np.asarray(self.t, np.float64).reshape(n)
        self.a = np.asarray(self.a, np.int64).reshape(n)
        self.b = np.asarray(self.b, np.int64).reshape(n)
        self.vn = np.asarray(self.vn, np.float64).reshape(n)
        for name, k in _VEC.items():
            v = getattr(self, name)
            v = _nan(n, k) if v is None else np.asarray(v, np.float64).reshape(n, k)
            setattr(self, name, v)

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def empty(cls, body_names=()) -> "EventLog":
        """An event log with no events.

        Parameters
        ----------
        body_names : sequence of str, optional
            Names of the scene bodies.

        Returns
        -------
        EventLog
        """
        z = np.zeros(0)
        return cls(t=z, a=z, b=z, point=np.zeros((0, 3)), normal=np.zeros((0, 3)), impulse=np.zeros((0, 3)),
                   vn=z, body_names=list(body_names))

    def select(self, mask) -> "EventLog":
        """The events picked by ``mask``.

        Parameters
        ----------
        mask : array_like of bool or int
            Boolean mask over the events, or row indices.

        Returns
        -------
        EventLog
            A new log (same body names).
        """
        kw = {f.name: getattr(self, f.name)[mask] for f in fields(self) if f.name != "body_names"}
        out = EventLog(**kw, body_names=list(self.body_names))
        for extra in ("motion", "resting"):     # the bodies' recorded motion and rests (not per event): kept whole
            if getattr(self, extra, None) is not None:
                setattr(out, extra, getattr(self, extra))
        return out

    def sorted(self) -> "EventLog":
        """The events in time order (stable sort on ``t``).

        Returns
        -------
        EventLog
        """
        return self.select(np.argsort(self.t, kind="stable"))

    @staticmethod
    def concat(logs: list["EventLog"]) -> "EventLog":
        """All events of several logs, in time order.

        Parameters
        ----------
        logs : list of EventLog
            The logs; the body names are those of the first.

        Returns
        -------
        EventLog
            Empty when ``logs`` is empty.
        """
        if not logs:
            return EventLog.empty()
        kw = {f.name: np.concatenate([getattr(l, f.name) for l in logs])
              for f in fields(EventLog) if f.name != "body_names"}
        return EventLog(**kw, body_names=list(logs[0].body_names)).sorted()

    def involving(self, body: int) -> np.ndarray:
        """Which events touch a body.

        Parameters
        ----------
        body : int
            Body index (-1: the ground).

        Returns
        -------
        ndarray of bool, shape (n,)
            True where the body is side a or side b.
        """
        return (self.a == body) | (self.b == body)

    # ---- validation -------------------------------------------------------------------------------------
    def validate(self, source: str = "event log", n_bodies: int | None = None, *, row_base: int = 0) -> "EventLog":
        """Check the log; raise :class:`InputError` naming ``source``, the row and the column of the first problem.

        Checked: finite t, point, normal, impulse and vn; times sorted and >= 0; unit normals (to 1e-3); vn >= 0;
        body ids in [-1, n_bodies); a support given as point and normal together, with a unit normal; a != b.

        Parameters
        ----------
        source : str, optional
            What to call the log in messages (a file name).
        n_bodies : int, optional
            Number of scene bodies; when given, body ids are checked against it.
        row_base : int, optional
            Rows are named ``row_base`` + index: 2 for a CSV file (its header is row 1, as a spreadsheet counts),
            0 for arrays (NPZ, in memory).

        Returns
        -------
        EventLog
            ``self``, unchanged.
        """
        if len(self) == 0:
            return self
        rb = row_base
        for name in ("t", "point", "normal", "impulse", "vn"):
            v = getattr(self, name)
            bad = ~np.isfinite(v).reshape(len(self), -1).all(axis=1)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"{source}: row {i + rb}, column {name!r}: NaN or infinite value; give a number")
        if np.any(np.diff(self.t) < 0):
            i = int(np.flatnonzero(np.diff(self.t) < 0)[0]) + 1
            raise InputError(f"{source}: row {i + rb}, column 'time': times are not monotonic (t = {self.t[i]:g} < "
                             f"{self.t[i - 1]:g} s in the row before); sort the log by time")
        if np.any(self.t < 0):
            i = int(np.flatnonzero(self.t < 0)[0])
            raise InputError(f"{source}: row {i + rb}, column 'time': negative event time {self.t[i]:g} s; times "
                             "start at 0 (the start of the scene)")
        nn = np.linalg.norm(self.normal, axis=1)
        if np.any(np.abs(nn - 1) > 1e-3):
            i = int(np.flatnonzero(np.abs(nn - 1) > 1e-3)[0])
            raise InputError(f"{source}: row {i + rb}, column 'normal': not a unit vector (|n| = {nn[i]:.4g}); "
                             "normalise nx,ny,nz")
        if np.any(self.vn < 0):
            i = int(np.flatnonzero(self.vn < 0)[0])
            raise InputError(f"{source}: row {i + rb}, column 'vn': negative ({self.vn[i]:g}); give the approach "
                             "speed >= 0")
        if n_bodies is not None:
            for col in ("a", "b"):
                v = getattr(self, col)
                bad = (v < GROUND) | (v >= n_bodies)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise InputError(f"{source}: row {i + rb}, column 'body_{col}': {v[i]} is not a scene object "
                                     "or ground")
        for side in ("a", "b"):
            pt, nr = getattr(self, f"support_{side}_point"), getattr(self, f"support_{side}_normal")
            cols = ",".join(_CSV_COLUMNS[f"support_{side}_point"] + _CSV_COLUMNS[f"support_{side}_normal"])
            given = np.isfinite(np.c_[pt, nr])
            bad = given.any(axis=1) & ~given.all(axis=1)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"{source}: row {i + rb}, columns {cols}: the support of body_{side} is given only "
                                 "in part; give its point and its normal, or leave all six empty (NaN) for a free "
                                 "body")
            sn = np.linalg.norm(nr, axis=1)
            bad = given.all(axis=1) & (np.abs(sn - 1) > 1e-3)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(f"{source}: row {i + rb}, columns {cols}: the support normal of body_{side} is not "
                                 f"a unit vector (|n| = {sn[i]:.4g}); normalise it")
        same = (self.a == self.b)
        if same.any():
            raise InputError(f"{source}: row {int(np.flatnonzero(same)[0]) + rb}, columns body_a, body_b: the same "
                             "body twice; a contact is between two bodies")
        return self

    # ---- I/O --------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the log as NPZ (suffix ``.npz``) or else as CSV (bodies by name, "ground" for -1; every column,
        optional ones as NaN).

        Parameters
        ----------
        path : str or Path
            Output file.

        Returns
        -------
        Path
            ``path``.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".npz":
            np.savez(path, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "body_names"},
                     body_names=np.array(self.body_names, dtype=str))
            return path
        names = self.body_names

        def name_of(i):
            return "ground" if i == GROUND else (names[i] if i < len(names) else str(i))

        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            header = [c for cols in _CSV_COLUMNS.values() for c in cols]
            w.writerow(header)
            for i in range(len(self)):
                row = [repr(float(self.t[i])), name_of(self.a[i]), name_of(self.b[i])]
                for key in ("point", "normal", "impulse"):
                    row += [repr(float(x)) for x in getattr(self, key)[i]]
                row.append(repr(float(self.vn[i])))
                for key in _OPTIONAL:
                    row += [repr(float(x)) for x in getattr(self, key)[i]]
                w.writerow(row)
        return path

    @classmethod
    def load(cls, path: str | Path, body_names: list[str]) -> "EventLog":
        """Read and validate a CSV or NPZ event log (format in docs/event-log.md).

        Parameters
        ----------
        path : str or Path
            ``.npz`` is read as NPZ, anything else as CSV (delimiter ``,``, tab or ``;``; UTF-8 or UTF-16 with a
            byte-order mark).
        body_names : list of str
            Scene body names; names in the log map to their indices, "ground" to -1, integers stay.

        Returns
        -------
        EventLog
            Validated (:meth:`validate`).

        Raises
        ------
        InputError
            On a missing or unreadable file, missing columns, unknown bodies or any :meth:`validate` failure.
        """
        path = Path(path)
        if not path.is_file():
            raise InputError(f"{path}: event log not found")
        index = {n: i for i, n in enumerate(body_names)}
        index["ground"] = GROUND

        def to_id(v, row, col):
            v = v.strip() if isinstance(v, str) else v
            if isinstance(v, str) and v in index:
                return index[v]
            try:
                i = int(v)
            except (TypeError, ValueError):
                raise InputError(f"{path}: row {row}, column {col}: unknown body {v!r}; known: "
                                 f"{', '.join(['ground'] + list(body_names))}") from None
            return i

        if path.suffix.lower() == ".npz":
            try:
                with np.load(path, allow_pickle=False) as z:
                    data = {k: z[k] for k in z.files}
            except Exception as exc:
                raise InputError(f"{path}: not a readable NPZ event log ({exc})") from None
            missing = [k for k in ("t", "a", "b", "point", "normal", "impulse", "vn") if k not in data]
            if missing:
                raise InputError(f"{path}: missing arrays {missing}; see docs/event-log.md")
            kw = {k: data.get(k) for k in ("t", "point", "normal", "impulse", "vn") + _OPTIONAL}
            kw["a"] = [to_id(v, r, "a") for r, v in enumerate(data["a"].tolist())]
            kw["b"] = [to_id(v, r, "b") for r, v in enumerate(data["b"].tolist())]
            try:
                log = cls(**kw, body_names=list(body_names))
            except ValueError as exc:
                raise InputError(f"{path}: array shapes do not match ({exc})") from None
            return log.validate(str(path), len(body_names), row_base=0)

        rows = _read_csv_rows(path)
        if not rows:
            raise InputError(f"{path}: empty event log; expected a header row {','.join(REQUIRED_CSV)}")
        header = [h.strip() for h in rows[0]]
        missing = [c for c in REQUIRED_CSV if c not in header]
        if missing:
            raise InputError(f"{path}: row 1 (header): missing columns {', '.join(missing)}; required: "
                             f"{','.join(REQUIRED_CSV)} (see docs/event-log.md)")
        col = {h: i for i, h in enumerate(header)}
        body = rows[1:]
        n = len(body)

        def num(name):
            out = np.empty(n)
            for r, row in enumerate(body):
                try:
                    out[r] = float(row[col[name]])
                except (ValueError, IndexError):
                    raise InputError(f"{path}: row {r + 2}, column {name!r}: not a number") from None
            return out

        kw = {}
        for key, cols in _CSV_COLUMNS.items():
            if key in ("a", "b"):
                kw[key] = [to_id(row[col[cols[0]]], r + 2, cols[0]) for r, row in enumerate(body)]
            elif all(c in col for c in cols):
                arr = np.stack([num(c) for c in cols], axis=1)
                kw[key] = arr[:, 0] if len(cols) == 1 and key in ("t", "vn") else arr
        return cls(**kw, body_names=list(body_names)).validate(str(path), len(body_names), row_base=CSV_ROW_BASE)


CSV_ROW_BASE = 2    # row number of a CSV log's first event, counted like a spreadsheet (the header is row 1)
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _decode(path: Path, raw: bytes) -> str:
    """Text of a CSV log: UTF-8 (with or without a byte-order mark) or UTF-16 with its BOM (what spreadsheet
    programs write as "Unicode text"); anything else is an :class:`InputError` naming the file."""
    if raw[:4] == b"PK\x03\x04":
        raise InputError(f"{path}: this is a ZIP/NPZ file, not a CSV text file; name it .npz if it is an NPZ "
                         "event log, or export the log as CSV")
    for bom, enc in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(enc)
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}: starts like {enc.upper()} text but byte {exc.start} is not valid "
                                 f"{enc.upper()}; export the log as CSV (UTF-8)") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a text CSV file (byte {exc.start} = 0x{raw[exc.start]:02x} is not UTF-8; "
                         "binary data or an unusual encoding); export the log as CSV (UTF-8)") from None
    if "\x00" in text:
        raise InputError(f"{path}: not a text CSV file (NUL byte at byte {raw.index(0)}: binary data, or UTF-16 "
                         "without a byte-order mark); export the log as CSV (UTF-8)")
    return text


def _read_csv_rows(path: Path) -> list[list[str]]:
    """Rows of a CSV log. The delimiter is the one of ``,``, tab or ``;`` that splits the header into the required
    columns (spreadsheets write tab-separated "text" and, in some locales, ``;``-separated CSV)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the event log ({exc.strerror})") from None
    text = _decode(path, raw)
    first = text.split("\n", 1)[0]
    delim = ","
    for d in (",", "\t", ";"):
        if all(c in [h.strip() for h in first.split(d)] for c in REQUIRED_CSV[:3]):
            delim = d
            break
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delim))
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); export the log as CSV (UTF-8)") from None
    while rows and not any(c.strip() for c in rows[-1]):
        rows.pop()                      # trailing blank lines (blank rows inside stay: they are reported)
    return rows
