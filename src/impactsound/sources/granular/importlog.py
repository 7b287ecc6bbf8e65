"""Import the contact log of an external, time-stepped simulator (DEM, MuJoCo, PyBullet, one's own) as a granular
event table (M. Marko, "Sound simulation of granular materials", ch. 5.5: discrete simulators may miss collisions;
v0 < 1e-4 m/s is inaudible, sec. 6.1).

A time-stepped solver reports contacts per step, not collisions: a contact that lasts several steps appears on each
of them, and two collisions in one step may merge. One collision is made of the records of one pair

- on consecutive steps (several records in one step, e.g. contact-manifold points, belong to it too),
- until a gap of more than ``gap_steps`` steps without a record (default 1: a single step without contact ends
  it), or a separation: a record that approaches (v0 > 0) after one that separated (v0 <= 0) starts a new one.

Each collision keeps its first record (the first in file order at its first step): its time, point, normal and
the pre-contact approach speed v0 = -(v_A - v_B) . n (n unit, from B to A: positive when the bodies approach).
Then collisions that start separating (v0 <= 0: a contact found while the bodies already move apart, a resting
contact's jitter) are dropped with a :class:`ContactLogWarning` giving their number (``separating="drop"``,
default) or refused (``separating="error"``), and collisions slower than ``v_min`` (default 1e-4 m/s, the
thesis' audibility filter) are dropped. The counts go to the table's ``meta``.

Pairs are unordered for grain-grain records (a pair reported as (a, b) on one step and (b, a) on the next is one
contact), ordered (grain, container) for container hits (``kind`` 1, id_b the container's index).

File layout (:func:`load_contact_log`; SI units throughout):

=====================  =====  =============================================================================
column                 unit   meaning
=====================  =====  =============================================================================
time                   s      the step's time; rows sorted by time (unsorted files are refused)
step                   -      optional: the solver's step index (else round(time / dt); dt from the metadata,
                              the argument, or the smallest time difference between distinct times)
id_a, id_b             -      grain A; grain B, or the container's index for a container hit
kind                   -      optional: 0 grain-grain (default), 1 grain-container
element                -      optional: the container's surface element (-1 unknown)
px, py, pz             m      contact point
nx, ny, nz             -      contact normal from B to A (container to grain); normalised on import
vax, vay, vaz          m/s    pre-contact velocity of A at the contact point
vbx, vby, vbz          m/s    optional: of B (0: a static container)
vn                     m/s    instead of the velocities: relative normal approach speed -(v_A - v_B) . n
radius_a, radius_b     m      optional if the metadata gives grain_radius (per grain id)
material_a, material_b -      optional: indices into the metadata's materials (or grain_material per id)
e                      -      optional: restitution
=====================  =====  =============================================================================

CSV: a header row with these names; optional metadata before it on one comment line
``# impactsound contact log {"materials": [...], "containers": [...], "dt": ..., "grain_radius": [...],
"grain_material": [...]}`` (JSON; any other ``#`` lines are ignored). NPZ: one 1-D array per column (or 2-D
``point``, ``normal``, ``v_a``, ``v_b``), metadata as a JSON string in ``meta``.
"""
from __future__ import annotations

import io
import json
import math
import warnings
from pathlib import Path

import numpy as np

from ...errors import InputError
from .events import CONTAINER, GRAIN, GranularEvents

#: audibility filter [m/s] (Marko, sec. 6.1: slower collisions are dropped)
V_MIN = 1e-4
SEPARATING_MODES = ("drop", "error")
_COMPONENTS = {"point": ("px", "py", "pz"), "normal": ("nx", "ny", "nz"), "v_a": ("vax", "vay", "vaz"),
               "v_b": ("vbx", "vby", "vbz")}
_META_TAG = "# impactsound contact log "


class ContactLogWarning(UserWarning):
    """Records of a contact log were dropped on import (the message gives how many and why)."""


def _column(name, a, n, width, where):
    """A column as a float (n,) or (n, width) array; scalars and single vectors broadcast."""
    a = np.asarray(a)
    shape = (n,) if width == 1 else (n, width)
    try:
        a = np.broadcast_to(a, shape)
    except ValueError:
        raise InputError(f"{where}: column {name!r} has shape {np.shape(a)}, expected {shape} (one value per "
                         "record)") from None
    if a.dtype.kind not in "biuf":
        raise InputError(f"{where}: column {name!r} must hold numbers, got {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _finite(name, a, where):
    """Refuse NaN or infinite values, naming the row and the column (a vector column by its component)."""
    bad = ~np.isfinite(a)
    if bad.any():
        if a.ndim == 1:
            i, col = int(np.flatnonzero(bad)[0]), name
        else:
            i, k = (int(v) for v in np.argwhere(bad)[0])
            col = _COMPONENTS.get(name, tuple(f"{name}[{j}]" for j in range(a.shape[1])))[k]
        raise InputError(f"{where}: column {col!r} holds NaN or an infinite value in row {i} ({int(bad.sum())} "
                         "values in all): fix or drop those records")


def _integers(name, a, where):
    af = np.asarray(a, np.float64)
    _finite(name, af, where)
    frac = af != np.round(af)
    if frac.any():
        i = int(np.flatnonzero(frac)[0])
        raise InputError(f"{where}: column {name!r} must hold integers (row {i}: {float(af[i])!r})")
    return af.astype(np.int64)


def import_contacts(t, id_a, id_b, point, normal, *, v_a=None, v_b=None, vn=None, kind=GRAIN, element=None,
                    radius_a=None, radius_b=None, grain_radius=None, material_a=None, material_b=None,
                    grain_material=None, materials=(), containers=(), e=None, step=None, dt=None,
                    gap_steps: int = 1, v_min: float = V_MIN, separating: str = "drop", duration=None,
                    where: str = "contact log") -> GranularEvents:
    """Turn per-step contact records into collisions (module docstring).

    Parameters
    ----------
    t : array (n,)
        Time of each record [s], sorted.
    id_a, id_b : array (n,) of int
        Grain A; grain B, or the container's index (into ``containers``) where ``kind`` is 1.
    point : array (n, 3)
        Contact point [m].
    normal : array (n, 3)
        Contact normal from B to A (from the container into the grain); normalised here.
    v_a, v_b : array (n, 3), optional
        Pre-contact velocities [m/s] of A and B at the contact (v_b default 0: a static container).
    vn : array (n,), optional
        Instead of v_a, v_b: the relative normal approach speed -(v_A - v_B) . n [m/s].
    kind : int or array (n,), optional
        0 grain-grain (default), 1 grain-container.
    element : array (n,) of int, optional
        The container's surface element (-1 unknown).
    radius_a, radius_b : float or array (n,), optional
        Grain radii [m] per record; or ``grain_radius``.
    grain_radius : array, optional
        Radius [m] of each grain, indexed by grain id.
    material_a, material_b : int or array (n,), optional
        Material indices into ``materials`` per record (default 0); or ``grain_material`` per grain id.
    materials, containers : sequence of str, optional
        Material and container names the indices refer to.
    e : float or array (n,), optional
        Restitution (default unknown).
    step : array (n,) of int, optional
        The solver's step index of each record; else round(t / dt).
    dt : float, optional
        Solver step [s] (without ``step``); default: the smallest difference between distinct record times.
    gap_steps : int, optional
        Steps without a record that end a collision (default 1).
    v_min : float, optional
        Drop collisions slower than this [m/s] (default 1e-4, the thesis' audibility filter).
    separating : {"drop", "error"}, optional
        Collisions whose first record separates (v0 <= 0): drop them with a warning (default) or refuse.
    duration : float, optional
        Span of the table [s]; default just past the last record.
    where : str, optional
        Names the log in error messages.

    Returns
    -------
    GranularEvents
        origin "log"; meta holds the counts: records, collisions, persistent records merged, separating and
        slow collisions dropped.

    Raises
    ------
    InputError
        NaN or infinite values (row and column named), unsorted times (first row named), unknown ids, zero
        normals, missing velocities or radii, bad options; separating collisions with ``separating="error"``.
    """
    if separating not in SEPARATING_MODES:
        raise InputError(f"{where}: separating = {separating!r} is unknown; use one of "
                         f"{', '.join(SEPARATING_MODES)}")
    try:
        v_min_f = float(v_min)
    except (TypeError, ValueError):
        v_min_f = math.nan
    if not (math.isfinite(v_min_f) and v_min_f >= 0):
        raise InputError(f"{where}: v_min = {v_min!r} must be a finite speed >= 0 [m/s]")
    v_min = v_min_f
    if isinstance(gap_steps, bool) or not isinstance(gap_steps, (int, np.integer)) or gap_steps < 1:
        raise InputError(f"{where}: gap_steps = {gap_steps!r} must be a positive integer (steps without contact "
                         "that end a collision)")
    try:
        t = np.atleast_1d(np.asarray(t, np.float64)).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{where}: column 'time' must hold numbers [s]") from None
    n = t.shape[0]
    _finite("time", t, where)
    if n > 1:
        back = np.flatnonzero(np.diff(t) < 0)
        if back.shape[0]:
            i = int(back[0]) + 1
            raise InputError(f"{where}: times are not sorted: row {i} (t = {float(t[i])!r} s) comes after row {i - 1} "
                             f"(t = {float(t[i - 1])!r} s): sort the records by time")
    kind = _integers("kind", _column("kind", kind, n, 1, where), where)
    badk = (kind != GRAIN) & (kind != CONTAINER)
    if badk.any():
        i = int(np.flatnonzero(badk)[0])
        raise InputError(f"{where}: column 'kind' must be 0 (grain-grain) or 1 (grain-container) (row {i}: "
                         f"{kind[i]})")
    is_c = kind == CONTAINER
    id_a = _integers("id_a", _column("id_a", id_a, n, 1, where), where)
    id_b = _integers("id_b", _column("id_b", id_b, n, 1, where), where)
    point = _column("point", point, n, 3, where)
    normal = _column("normal", normal, n, 3, where)
    _finite("point", point, where)
    _finite("normal", normal, where)

    # ids: grains non-negative (and inside the per-grain tables), containers inside the container list
    def refuse(col, mask, what):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise InputError(f"{where}: column {col!r} {what} in row {i} ({int(mask.sum())} rows in all)")

    def unknown(col, mask, what):
        refuse(col, mask, f"names an unknown {what}")

    n_grains = None
    for table in (grain_radius, grain_material):
        if table is not None:
            n_grains = len(table) if n_grains is None else min(n_grains, len(table))
    top = math.inf if n_grains is None else n_grains
    unknown("id_a", (id_a < 0) | (id_a >= top), f"grain (ids are 0..{top - 1})" if n_grains else
            "grain (ids must be >= 0)")
    unknown("id_b", ~is_c & ((id_b < 0) | (id_b >= top)), f"grain (ids are 0..{top - 1})" if n_grains else
            "grain (ids must be >= 0)")
    n_cont = len(containers) if containers else math.inf
    unknown("id_b", is_c & ((id_b < 0) | (id_b >= n_cont)),
            f"container (containers are {list(containers)})" if containers else "container (indices must be >= 0)")
    unknown("id_b", ~is_c & (id_a == id_b), "pair: a grain colliding with itself")

    nn = np.linalg.norm(normal, axis=1)
    zero = ~(nn > 1e-12)
    if zero.any():
        i = int(np.flatnonzero(zero)[0])
        raise InputError(f"{where}: the normal (nx, ny, nz) of row {i} has zero length: drop that record or give "
                         "its direction")
    normal = normal / nn[:, None]

    # pre-contact approach speed
    if vn is not None and v_a is not None:
        raise InputError(f"{where}: give either the velocities (v_a, v_b) or the approach speed vn, not both")
    if vn is not None:
        v0 = _column("vn", vn, n, 1, where)
        _finite("vn", v0, where)
    elif v_a is not None:
        va = _column("v_a", v_a, n, 3, where)
        _finite("v_a", va, where)
        vb = np.zeros((n, 3)) if v_b is None else _column("v_b", v_b, n, 3, where)
        _finite("v_b", vb, where)
        v0 = -np.einsum("ij,ij->i", va - vb, normal)
    else:
        raise InputError(f"{where}: no speeds: give the pre-contact velocities v_a (and v_b; columns vax.. vbz) or "
                         "the approach speed vn")

    # radii and materials, per record or per grain id
    if radius_a is None and grain_radius is None:
        raise InputError(f"{where}: no grain radii: give radius_a (and radius_b) per record or grain_radius per "
                         "grain id")
    gr = None if grain_radius is None else np.asarray(grain_radius, np.float64).reshape(-1)
    if gr is not None:
        _finite("grain_radius", gr, where)
    ra = gr[id_a] if radius_a is None else _column("radius_a", radius_a, n, 1, where)
    if radius_b is not None:
        rb = _column("radius_b", radius_b, n, 1, where)
    elif gr is not None:
        rb = np.where(is_c, 0.0, gr[np.where(is_c, 0, id_b)])
    else:
        rb = np.where(is_c, 0.0, ra)                   # one grain size
    _finite("radius_a", ra, where)
    _finite("radius_b", rb, where)
    rb = np.where(is_c, 0.0, rb)
    gm = None if grain_material is None else _integers("grain_material", np.asarray(grain_material).reshape(-1),
                                                       where)
    ma = (gm[id_a] if gm is not None else np.zeros(n, np.int64)) if material_a is None else \
        _integers("material_a", _column("material_a", material_a, n, 1, where), where)
    if material_b is not None:
        mb = _integers("material_b", _column("material_b", material_b, n, 1, where), where)
    elif gm is not None:
        mb = gm[np.where(is_c, 0, id_b)]
    else:
        mb = ma.copy()
    mb = np.where(is_c, -1, mb)
    refuse("radius_a", ~(ra > 0), "must be a positive radius [m]")
    refuse("radius_b", ~is_c & ~(rb > 0), "must be a positive radius [m] for a grain pair")
    if materials:
        unknown("material_a", (ma < 0) | (ma >= len(materials)), f"material (materials are {list(materials)})")
        unknown("material_b", ~is_c & ((mb < 0) | (mb >= len(materials))),
                f"material (materials are {list(materials)})")
    el = np.full(n, -1, np.int64) if element is None else _integers("element", _column("element", element, n, 1,
                                                                                        where), where)
    ee = np.full(n, np.nan) if e is None else _column("e", e, n, 1, where)
    refuse("e", ~np.isnan(ee) & ~((ee > 0) & (ee <= 1)), "must be a restitution in (0, 1] (or NaN: unknown)")

    # step indices
    if step is not None:
        st = _integers("step", _column("step", step, n, 1, where), where)
    else:
        if dt is None:
            ut = np.unique(t)
            d = np.diff(ut)
            dt = float(d.min()) if d.shape[0] else 1.0
        else:
            try:
                dt = float(dt)
            except (TypeError, ValueError):
                dt = math.nan
            if not (math.isfinite(dt) and dt > 0):
                raise InputError(f"{where}: dt = {dt!r} must be a positive solver step [s]")
        st = np.rint(t / dt).astype(np.int64)

    # persistent contacts -> collisions: sort by (kind, unordered pair, step, row), keep each run's first record
    ka = np.where(is_c, id_a, np.minimum(id_a, id_b))
    kb = np.where(is_c, id_b, np.maximum(id_a, id_b))
    order = np.lexsort((np.arange(n), st, kb, ka, kind))
    new = np.ones(n, bool)
    if n > 1:
        o1, o0 = order[1:], order[:-1]
        same = (kind[o1] == kind[o0]) & (ka[o1] == ka[o0]) & (kb[o1] == kb[o0])
        ds = st[o1] - st[o0]
        again = (ds > 0) & (v0[o0] <= 0) & (v0[o1] > 0)      # separated, then approaching: a new collision
        new[1:] = ~same | (ds > gap_steps) | again
    first = np.sort(order[new])                              # back to time order
    n_coll = first.shape[0]
    sep = v0[first] <= 0
    n_sep = int(sep.sum())
    if n_sep and separating == "error":
        i = int(first[np.flatnonzero(sep)[0]])
        raise InputError(f"{where}: {n_sep} collision(s) start with a separating contact (v0 <= 0), the first at "
                         f"row {i} (t = {float(t[i])!r} s, v0 = {float(v0[i])!r} m/s): check the velocity or normal "
                         "convention (n from B to A, v0 = -(v_A - v_B) . n), or import with separating='drop'")
    if n_sep:
        warnings.warn(f"{where}: dropped {n_sep} of {n_coll} collisions that start with a separating contact "
                      "(v0 <= 0)", ContactLogWarning, stacklevel=2)
    keep = first[~sep]
    slow = v0[keep] < v_min
    n_slow = int(slow.sum())
    keep = keep[~slow]
    if duration is None:
        duration = float(np.nextafter(t.max(), np.inf)) if n else 0.0
    meta = {"records": int(n), "collisions": int(n_coll), "persistent_records_merged": int(n - n_coll),
            "separating_dropped": n_sep, "slow_dropped": n_slow, "v_min": v_min, "gap_steps": int(gap_steps)}
    return GranularEvents.from_arrays(
        t=t[keep], point=point[keep], normal=normal[keep], v0=v0[keep], kind=kind[keep], id_a=id_a[keep],
        id_b=id_b[keep], element=el[keep], radius_a=ra[keep], radius_b=rb[keep], material_a=ma[keep],
        material_b=mb[keep], e=ee[keep], materials=materials, containers=containers, origin="log",
        duration=duration, meta=meta, where=where, sort=False)


# ------------------------------------------------------------------------------------------------------ files
_SCALAR_COLS = ("step", "kind", "element", "vn", "radius_a", "radius_b", "material_a",
                "material_b", "e")


def load_contact_log(path, *, v_min: float = V_MIN, gap_steps: int = 1, dt: float | None = None,
                     separating: str = "drop") -> GranularEvents:
    """Read a contact log file (.csv or .npz, layout in the module docstring) and import it with
    :func:`import_contacts`.

    Parameters
    ----------
    path : path-like
    v_min, gap_steps, separating
        As :func:`import_contacts`.
    dt : float, optional
        Solver step [s]; overrides the file's metadata (used when the file has no ``step`` column).

    Returns
    -------
    GranularEvents

    Raises
    ------
    InputError
        Naming the file: missing, unreadable, missing columns, or any error of :func:`import_contacts`.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such contact log")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            cols, meta = _read_csv(path)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
                cols = {k: z[k] for k in z.files if k != "meta"}
        else:
            raise InputError(f"{path}: unknown contact log format {suffix!r}; use .csv or .npz")
    except InputError:
        raise
    except Exception as exc:          # a truncated or foreign file
        raise InputError(f"{path}: cannot read the contact log ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict):
        raise InputError(f"{path}: the metadata must be a JSON object")
    for vec, comps in _COMPONENTS.items():
        if vec not in cols and all(c in cols for c in comps):
            cols[vec] = np.column_stack([cols[c] for c in comps])
    need = ["time", "id_a", "id_b", "point", "normal"]
    missing = [c for c in need if c not in cols]
    if "v_a" not in cols and "vn" not in cols:
        missing.append("vax, vay, vaz (or vn)")
    if missing:
        raise InputError(f"{path}: missing columns {missing}; a contact log has time, id_a, id_b, px, py, pz, nx, "
                         "ny, nz and vax, vay, vaz (or vn), see impactsound.sources.granular.importlog")
    kw = {k: cols[k] for k in _SCALAR_COLS if k in cols}
    for k in ("v_a", "v_b"):
        if k in cols:
            kw[k] = cols[k]
    return import_contacts(cols["time"], cols["id_a"], cols["id_b"], cols["point"], cols["normal"], **kw,
                           grain_radius=meta.get("grain_radius"), grain_material=meta.get("grain_material"),
                           materials=meta.get("materials", ()), containers=meta.get("containers", ()),
                           dt=dt if dt is not None else meta.get("dt"), gap_steps=gap_steps, v_min=v_min,
                           separating=separating, where=str(path))


def _read_csv(path):
    lines = path.read_text().splitlines()
    meta = {}
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        head = lines.pop(0)
        if head.startswith(_META_TAG):
            try:
                meta = json.loads(head[len(_META_TAG):])
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}: the metadata line is not valid JSON ({exc})") from None
    if not lines:
        raise InputError(f"{path}: no header row (time,id_a,id_b,px,py,pz,nx,ny,nz,vax,vay,vaz,...)")
    header = [h.strip() for h in lines[0].split(",")]
    body = "\n".join(lines[1:])
    data = np.genfromtxt(io.StringIO(body), delimiter=",", ndmin=2, dtype=np.float64) if body.strip() \
        else np.zeros((0, len(header)))
    if data.shape[1] != len(header):
        raise InputError(f"{path}: {data.shape[1]} values per row but {len(header)} header names")
    return {h: data[:, j] for j, h in enumerate(header)}, meta
