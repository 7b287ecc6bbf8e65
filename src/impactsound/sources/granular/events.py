"""The granular event table: one row per grain collision, whoever produced it (our event-driven simulator, an
imported log of another simulator, or the statistical generator; M. Marko, "Sound simulation of granular
materials", ch. 5.4-5.6).

================  ======  ========================================================================================
column            unit    meaning
================  ======  ========================================================================================
t                 s       collision start
point             m       contact point (3,)
normal            -       unit normal (3,): from grain B to grain A for a grain pair, from the container into the
                          grain for a container hit
v0                m/s     relative normal approach speed before contact (> 0)
kind              -       0 grain-grain (:data:`GRAIN`), 1 grain-container (:data:`CONTAINER`)
id_a              -       grain A (the grain of a container hit)
id_b              -       grain B; for a container hit the container's index into ``containers``
element           -       the container's surface element hit (-1: unknown, or a grain pair)
radius_a          m       radius of grain A
radius_b          m       radius of grain B (0 for a container hit)
material_a        -       grain A's material: index into ``materials``
material_b        -       grain B's material (-1 for a container hit)
e                 -       restitution of the collision (NaN: unknown)
================  ======  ========================================================================================

Metadata: ``materials`` (material names the indices refer to), ``containers`` (container names), ``origin``
("simulate", "log", "generate"; free text) and ``duration`` [s] (the span the table covers; events lie in
[0, duration)). Rows are sorted by t (stable).

Files: ``.npz`` (one array per column, metadata as JSON in ``meta``), ``.csv`` (header row, metadata in ``#`` comment
lines before it), ``.parquet`` (needs pyarrow: ``pip install impactsound[parquet]``; metadata in the schema's
key-value metadata). The CSV columns: time, px, py, pz, nx, ny, nz, v0, kind, id_a, id_b, element, radius_a,
radius_b, material_a, material_b, e.
"""
from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import InputError

GRAIN = 0
CONTAINER = 1
KINDS = {"grain": GRAIN, "container": CONTAINER}
#: layout version of the table's files
TABLE_VERSION = 1

_COLUMNS = {                         # name: (dtype, width)
    "t": (np.float64, 1), "point": (np.float64, 3), "normal": (np.float64, 3), "v0": (np.float64, 1),
    "kind": (np.int8, 1), "id_a": (np.int64, 1), "id_b": (np.int64, 1), "element": (np.int64, 1),
    "radius_a": (np.float64, 1), "radius_b": (np.float64, 1), "material_a": (np.int16, 1),
    "material_b": (np.int16, 1), "e": (np.float64, 1),
}
_CSV = {"t": ["time"], "point": ["px", "py", "pz"], "normal": ["nx", "ny", "nz"]}
CSV_COLUMNS = [c for k in _COLUMNS for c in _CSV.get(k, [k])]


@dataclass
class GranularEvents:
    """The granular event table (module docstring). Arrays are columns of equal length n; build with
    :meth:`from_arrays` (checks and sorts) or :func:`concatenate`."""

    t: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    v0: np.ndarray
    kind: np.ndarray
    id_a: np.ndarray
    id_b: np.ndarray
    element: np.ndarray
    radius_a: np.ndarray
    radius_b: np.ndarray
    material_a: np.ndarray
    material_b: np.ndarray
    e: np.ndarray
    materials: tuple = ()
    containers: tuple = ()
    origin: str = ""
    duration: float = 0.0
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def from_arrays(cls, *, t, point, normal, v0, kind, id_a, id_b=None, element=None, radius_a, radius_b=None,
                    material_a=None, material_b=None, e=None, materials=(), containers=(), origin="",
                    duration=None, meta=None, where="granular events", sort=True) -> "GranularEvents":
        """Build a checked table (see :func:`check`); missing optional columns get their 'unknown' values
        (id_b, element -1; radius_b 0; materials 0 for grain A, -1 for B of a container hit; e NaN). ``duration``
        defaults to just past the last event. Rows are stable-sorted by t unless ``sort`` is False."""
        t = np.asarray(t, np.float64).reshape(-1)
        n = t.shape[0]
        kind = np.broadcast_to(np.asarray(kind, np.int8), (n,)).copy()
        cols = {"t": t, "point": point, "normal": normal, "v0": v0, "kind": kind, "id_a": id_a,
                "id_b": np.full(n, -1) if id_b is None else id_b,
                "element": np.full(n, -1) if element is None else element,
                "radius_a": radius_a, "radius_b": np.zeros(n) if radius_b is None else radius_b,
                "material_a": np.zeros(n) if material_a is None else material_a,
                "material_b": np.where(kind == GRAIN, 0, -1) if material_b is None else material_b,
                "e": np.full(n, np.nan) if e is None else e}
        out = {}
        for k, (dt, w) in _COLUMNS.items():
            a = np.asarray(cols[k])
            if a.ndim == 0 or (w == 1 and a.shape == ()):
                a = np.broadcast_to(a, (n,))
            shape = (n,) if w == 1 else (n, w)
            try:
                a = np.broadcast_to(a, shape)
            except ValueError:
                raise InputError(f"{where}: column {k!r} has shape {np.shape(cols[k])}, expected {shape}") from None
            if np.issubdtype(dt, np.integer):
                af = np.asarray(a, np.float64)
                if not (np.isfinite(af).all() and (af == np.round(af)).all()):
                    raise InputError(f"{where}: column {k!r} must hold integers")
            out[k] = np.ascontiguousarray(a, dtype=dt)
        if duration is None:
            duration = float(np.nextafter(t.max(), np.inf)) if n else 0.0
        ev = cls(**out, materials=tuple(str(m) for m in materials), containers=tuple(str(c) for c in containers),
                 origin=str(origin), duration=float(duration), meta=dict(meta or {}))
        if sort and n and np.any(np.diff(ev.t) < 0):
            ev = ev.take(np.argsort(ev.t, kind="stable"))
        check(ev, where=where, require_sorted=True)
        return ev

    def take(self, idx) -> "GranularEvents":
        """The rows ``idx`` (an index array or boolean mask), metadata unchanged."""
        return GranularEvents(**{k: getattr(self, k)[idx] for k in _COLUMNS}, materials=self.materials,
                              containers=self.containers, origin=self.origin, duration=self.duration,
                              meta=dict(self.meta))

    def columns(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in _COLUMNS}

    def metadata(self) -> dict:
        return {"table_version": TABLE_VERSION, "materials": list(self.materials),
                "containers": list(self.containers), "origin": self.origin, "duration": self.duration,
                "meta": self.meta}


def empty(materials=(), containers=(), origin="", duration=0.0) -> GranularEvents:
    """A table without rows."""
    z = np.zeros(0)
    return GranularEvents.from_arrays(t=z, point=np.zeros((0, 3)), normal=np.zeros((0, 3)), v0=z, kind=0,
                                      id_a=np.zeros(0, np.int64), radius_a=z, materials=materials,
                                      containers=containers, origin=origin, duration=duration)


def concatenate(tables, *, origin=None) -> GranularEvents:
    """Rows of several tables with the same materials and containers, stable-sorted by t."""
    tables = list(tables)
    if not tables:
        raise InputError("granular events: nothing to concatenate")
    first = tables[0]
    for tb in tables[1:]:
        if tb.materials != first.materials or tb.containers != first.containers:
            raise InputError("granular events: tables to join must name the same materials and containers, got "
                             f"{first.materials}/{first.containers} and {tb.materials}/{tb.containers}")
    cols = {k: np.concatenate([getattr(tb, k) for tb in tables]) for k in _COLUMNS}
    return GranularEvents.from_arrays(**cols, materials=first.materials, containers=first.containers,
                                      origin=first.origin if origin is None else origin,
                                      duration=max(tb.duration for tb in tables), meta=first.meta)


def check(ev: GranularEvents, *, where: str = "granular events", require_sorted: bool = True) -> None:
    """Refuse a table a render would turn into a wrong sound: an :class:`InputError` naming ``where``, the column,
    the first bad row and what would fix it. Checks: finite t, point, normal, v0, radius_a; v0 > 0; unit normals
    (within 1e-6); radius_a > 0, radius_b > 0 for grain pairs; kind 0 or 1; material indices inside
    ``materials`` (when it is given); container indices inside ``containers`` (when given); e in (0, 1] or NaN;
    t sorted (unless ``require_sorted`` is False); t >= 0."""
    n = len(ev)

    def bad(col, mask, what):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise InputError(f"{where}: column {col!r} {what} (row {i} of {n}, t = {ev.t[i]!r} s; "
                             f"{int(mask.sum())} rows in all)")

    for k in ("t", "point", "normal", "v0", "radius_a", "radius_b"):
        a = getattr(ev, k)
        bad(k, ~np.isfinite(a).reshape(n, -1 if n else 1).all(axis=1), "holds NaN or infinite values: drop those rows")
    bad("t", ev.t < 0, "is negative: times start at 0 s")
    bad("v0", ev.v0 <= 0, "must be a positive approach speed [m/s]: rows with v0 <= 0 are separations or "
                          "resting contacts, drop them")
    nn = np.linalg.norm(ev.normal, axis=1)
    bad("normal", np.abs(nn - 1.0) > 1e-6, "must hold unit vectors: normalise them")
    bad("kind", (ev.kind != GRAIN) & (ev.kind != CONTAINER), "must be 0 (grain-grain) or 1 (grain-container)")
    bad("radius_a", ev.radius_a <= 0, "must be positive [m]")
    bad("radius_b", (ev.kind == GRAIN) & (ev.radius_b <= 0), "must be positive [m] for a grain pair")
    if ev.materials:
        m = len(ev.materials)
        bad("material_a", (ev.material_a < 0) | (ev.material_a >= m), f"must index materials {list(ev.materials)}")
        bad("material_b", (ev.kind == GRAIN) & ((ev.material_b < 0) | (ev.material_b >= m)),
            f"must index materials {list(ev.materials)}")
    if ev.containers:
        bad("id_b", (ev.kind == CONTAINER) & ((ev.id_b < 0) | (ev.id_b >= len(ev.containers))),
            f"must index containers {list(ev.containers)} for a container hit")
    bad("e", ~np.isnan(ev.e) & ~((ev.e > 0) & (ev.e <= 1)), "restitution must lie in (0, 1] (or be NaN)")
    if require_sorted and n > 1:
        bad("t", np.r_[False, np.diff(ev.t) < 0], "is not sorted: sort the rows by time")
    if not (math.isfinite(ev.duration) and ev.duration >= 0):
        raise InputError(f"{where}: duration = {ev.duration} s must be finite and >= 0")


# --------------------------------------------------------------------------------------------------- files
def save_events(path, ev: GranularEvents) -> Path:
    """Write the table to ``path`` (.npz, .csv or .parquet by suffix), atomically (temporary name, rename)."""
    path = Path(path)
    suffix = path.suffix.lower()
    tmp = path.with_name(f".{path.name}.tmp{suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".npz":
        with open(tmp, "wb") as f:
            np.savez(f, **ev.columns(), meta=np.array(json.dumps(ev.metadata())))
    elif suffix == ".csv":
        buf = io.StringIO()
        buf.write("# impactsound granular events " + json.dumps(ev.metadata()) + "\n")
        buf.write(",".join(CSV_COLUMNS) + "\n")
        flat = _flat_columns(ev)
        fmt = ["%.17g" if flat[c].dtype.kind == "f" else "%d" for c in CSV_COLUMNS]
        if len(ev):
            np.savetxt(buf, np.column_stack([flat[c].astype(np.float64) for c in CSV_COLUMNS]), fmt=fmt,
                       delimiter=",")
        tmp.write_text(buf.getvalue())
    elif suffix == ".parquet":
        pa, pq = _pyarrow(path)
        flat = _flat_columns(ev)
        table = pa.table({c: flat[c] for c in CSV_COLUMNS},
                         metadata={b"impactsound": json.dumps(ev.metadata()).encode()})
        pq.write_table(table, tmp)
    else:
        raise InputError(f"{path}: unknown event table format {suffix!r}; use .npz, .csv or .parquet")
    tmp.replace(path)
    return path


def _flat_columns(ev):
    flat = {}
    for k in _COLUMNS:
        a = getattr(ev, k)
        names = _CSV.get(k, [k])
        for j, c in enumerate(names):
            flat[c] = a[:, j] if a.ndim == 2 else a
    return flat


def _pyarrow(path):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: Parquet needs pyarrow: pip install 'impactsound[parquet]', or use .npz / .csv"
                         ) from None
    return pa, pq


def load_events(path) -> GranularEvents:
    """Read a table written by :func:`save_events` (or by hand in that layout), checked (:func:`check`): errors
    name the file, the column and the row. Unsorted times are refused (sort the file), not silently reordered."""
    path = Path(path)
    suffix = path.suffix.lower()
    where = str(path)
    if not path.is_file():
        raise InputError(f"{path}: no such event table")
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
                missing = [k for k in ("t", "point", "normal", "v0", "kind", "id_a", "radius_a") if k not in z.files]
                if missing:
                    raise InputError(f"{path}: missing columns {missing}; expected {list(_COLUMNS)}")
                cols = {k: z[k] for k in _COLUMNS if k in z.files}
        elif suffix == ".csv":
            text = path.read_text()
            meta = {}
            lines = text.splitlines()
            while lines and lines[0].startswith("#"):
                head = lines.pop(0)
                if head.startswith("# impactsound granular events "):
                    meta = json.loads(head[len("# impactsound granular events "):])
            if not lines:
                raise InputError(f"{path}: no header row; expected {','.join(CSV_COLUMNS)}")
            header = [h.strip() for h in lines[0].split(",")]
            data = np.loadtxt(io.StringIO("\n".join(lines[1:])), delimiter=",", ndmin=2) if len(lines) > 1 \
                else np.zeros((0, len(header)))
            if data.shape[1] != len(header):
                raise InputError(f"{path}: {data.shape[1]} values per row but {len(header)} header names")
            cols = _unflatten(dict(zip(header, data.T)), path)
        elif suffix == ".parquet":
            pa, pq = _pyarrow(path)
            table = pq.read_table(path)
            md = table.schema.metadata or {}
            meta = json.loads(md[b"impactsound"]) if b"impactsound" in md else {}
            cols = _unflatten({c: table.column(c).to_numpy() for c in table.column_names}, path)
        else:
            raise InputError(f"{path}: unknown event table format {suffix!r}; use .npz, .csv or .parquet")
    except InputError:
        raise
    except Exception as exc:  # a truncated or foreign file
        raise InputError(f"{path}: cannot read the event table ({type(exc).__name__}: {exc}); re-create it") from exc
    version = meta.get("table_version", TABLE_VERSION)
    if version != TABLE_VERSION:
        raise InputError(f"{path}: event table version {version}, this impactsound reads {TABLE_VERSION}")
    return GranularEvents.from_arrays(**cols, materials=meta.get("materials", ()),
                                      containers=meta.get("containers", ()), origin=meta.get("origin", ""),
                                      duration=meta.get("duration"), meta=meta.get("meta"), where=where, sort=False)


def _unflatten(flat, path):
    missing = [c for c in ("time", "px", "py", "pz", "nx", "ny", "nz", "v0", "kind", "id_a", "radius_a")
               if c not in flat]
    if missing:
        raise InputError(f"{path}: missing columns {missing}; expected {','.join(CSV_COLUMNS)}")
    cols = {}
    for k in _COLUMNS:
        names = _CSV.get(k, [k])
        if all(c in flat for c in names):
            cols[k] = np.column_stack([flat[c] for c in names]) if len(names) > 1 else flat[names[0]]
    return cols
