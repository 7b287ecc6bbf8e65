"""Batch rendering: one base scene, a table or grid of overrides, one render per row, a manifest.

A plan (TOML; docs/batch.md) names a base scene and the variations::

    [batch]
    scene = "drop.toml"            # the base scene, relative to the plan
    normalise = "peak"             # peak | lufs | none | shared (with full_scale_pa)
    png = false                    # also a spectrogram per render

    [grid]                         # every combination (a cartesian product)
    "object.ball.material" = ["steel", "brass", "glass"]
    "scene.seed" = [1, 2]

    [[row]]                        # and/or explicit rows (or `table = "rows.csv"` in [batch])
    "listener.mic.position" = [0.0, 0.3, 0.2]

A field is a dotted path into the scene file: ``scene.KEY``, ``ground.KEY``, ``air.KEY``, ``granular.KEY``,
``source.KIND.KEY``, ``object.NAME.KEY`` and ``listener.NAME.KEY`` (NAME, or the 0-based index, of the object
or listener; deeper keys such as ``object.ball.size.radius`` go into that table). Rows x grid gives the renders.

Running it (:func:`run_batch`) writes, into the output folder, ``NAME.wav`` (+ ``NAME.wav.json``, and
``NAME.png``) per render, ``manifest.csv`` (parameters, files, peak pascals, loudness, content hashes, wall time,
status) and ``batch.json`` (which plan the folder belongs to). Files are written under temporary names and
renamed, and a render counts as done once its record is written, so a killed batch leaves no partial file and a
rerun skips what is done. Renders run in this process, a local process pool or on a Dask cluster
(:func:`impactsound.parallel.map_tasks`); the workers share the asset store (``$IMPACTSOUND_CACHE``, which must
be one shared folder for a cluster), where each asset is computed once under its lock
(:func:`impactsound.assets.asset_lock`). One render per group of rows with the same assets runs first, so the
others find their assets ready instead of waiting on the lock.
"""
from __future__ import annotations

import contextlib
import copy
import csv
import io
import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError

#: plans with more renders than this need ``yes=True`` (``--yes``): a grid of thousands by mistake is refused
CONFIRM_ROWS = 1000
#: scene sections a field may start with
SECTIONS = ("scene", "ground", "air", "granular", "source", "object", "listener")
#: object keys that decide an object's precomputed assets (modes, radiation, fields, decompositions)
_ASSET_KEYS = ("shape", "size", "mesh", "scale", "material", "shell", "transfer", "acceleration_noise", "joint",
               "anchor", "clamp_radius", "static", "fracture_group")
_PLAN_KEYS = ("scene", "normalise", "lufs_target", "full_scale_pa", "png", "table")
_MANIFEST = "manifest.csv"
_RECORD = "batch.json"
_DONE = ".done"
_TMP = ".tmp"


@dataclass
class BatchPlan:
    """A base scene and its variations.

    Attributes
    ----------
    base : dict
        The base scene as read from its TOML.
    base_dir : Path
        Folder that the scene's relative paths (meshes, event logs) are relative to.
    rows : list of dict
        One {field path: value} per render.
    names : list of str
        Output name per render (file stem).
    normalise : str
        ``peak`` | ``lufs`` | ``none`` | ``shared`` (every render at the scale ``full_scale_pa``).
    lufs_target : float
        [LUFS] for ``lufs``.
    full_scale_pa : float or None
        [Pa] that 1.0 in every WAV stands for, with ``shared``.
    png : bool
        Also a spectrogram per render.
    source : str
        Where the plan came from (its file), for messages.
    """

    base: dict
    base_dir: Path
    rows: list[dict]
    names: list[str]
    normalise: str = "peak"
    lufs_target: float = -23.0
    full_scale_pa: float | None = None
    png: bool = False
    source: str = "<plan>"
    fields: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def plan_hash(self) -> str:
        """Content hash of everything that decides the renders' samples and files."""
        from .assets import content_hash
        return content_hash("impactsound-batch-1", self.base, str(self.base_dir.resolve()), self.rows, self.names,
                            self.normalise, self.lufs_target, self.full_scale_pa, self.png)


# ----------------------------------------------------------------------------------------------- plan reading
def _parse_cell(text: str):
    """A table cell: JSON when it parses (numbers, lists, true/false), else the text (a material name)."""
    t = text.strip()
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        return t


def _read_table(path: Path, where: str) -> list[dict]:
    if not path.is_file():
        raise InputError(f"{where}: table file {path} not found")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames:
            raise InputError(f"{path}: the table has no header row; its first row names the fields")
        rows = [{k.strip(): _parse_cell(v) for k, v in r.items() if k is not None and v not in (None, "")}
                for r in reader]
    return rows


def expand_rows(rows: list[dict] | None = None, grid: dict[str, list] | None = None) -> list[dict]:
    """Rows x grid: every row combined with every combination of the grid's values (grid keys in sorted order,
    the last varying fastest). No rows and no grid give one render of the base scene."""
    rows = [dict(r) for r in rows] if rows else [{}]
    if not grid:
        return rows
    keys = sorted(grid)
    for k in keys:
        if not isinstance(grid[k], list) or not grid[k]:
            raise InputError(f"grid field {k!r}: give a non-empty list of values, got {grid[k]!r}")
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]
    return [{**r, **c} for r in rows for c in combos]


def make_plan(scene: str | Path | dict, *, rows: list[dict] | None = None, grid: dict | None = None,
              names: list[str] | None = None, normalise: str = "peak", lufs_target: float = -23.0,
              full_scale_pa: float | None = None, png: bool = False, base_dir: str | Path | None = None,
              source: str = "<plan>") -> BatchPlan:
    """A plan from Python: a base scene (a TOML file or dict) plus rows and/or a grid of overrides.

    Every row is checked against the scene (fields, object and listener names, the scene schema) before
    anything runs; a bad one is an :class:`InputError` naming the row and the field.
    """
    if isinstance(scene, dict):
        base, bdir = copy.deepcopy(scene), Path(base_dir or ".")
    else:
        from .scene.schema import read_toml
        p = Path(scene)
        base = read_toml(p, f"base scene (of {source})")
        bdir = Path(base_dir) if base_dir is not None else p.parent
    all_rows = expand_rows(rows, grid)
    from .io.audio import NORMALISE
    if normalise not in NORMALISE:
        raise InputError(f"{source}: normalise = {normalise!r}: choose one of {list(NORMALISE)}")
    if normalise == "shared" and not (full_scale_pa and math.isfinite(full_scale_pa) and full_scale_pa > 0):
        raise InputError(f"{source}: normalise = 'shared' needs full_scale_pa, the pressure [Pa] that 1.0 stands "
                         "for in every WAV (e.g. 20.0); or use 'none' (pascals)")
    if names is None:
        names = [str(r.pop("name")) if "name" in r else None for r in all_rows]
        width = max(4, len(str(len(all_rows))))
        names = [n if n is not None else f"row-{i:0{width}d}" for i, n in enumerate(names)]
    else:
        all_rows = [{k: v for k, v in r.items() if k != "name"} for r in all_rows]
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", n)]
    if bad:
        raise InputError(f"{source}: output name {bad[0]!r} is not a plain file name (letters, digits, _ . + -)")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[0]
        raise InputError(f"{source}: output name {dup!r} is given to more than one row; names must be unique")
    fields = sorted({k for r in all_rows for k in r})
    plan = BatchPlan(base, bdir, all_rows, list(names), normalise, float(lufs_target), full_scale_pa, bool(png),
                     source, fields)
    check_plan(plan)
    return plan


def load_plan(path: str | Path) -> BatchPlan:
    """Read a plan TOML (module docstring); relative paths in it are relative to its folder."""
    from .scene.schema import read_toml
    path = Path(path)
    data = read_toml(path, "plan file")
    unknown = sorted(set(data) - {"batch", "grid", "row"})
    if unknown:
        raise InputError(f"{path}: unknown table(s) {unknown}; a plan has [batch], [grid] and [[row]]")
    b = data.get("batch", {})
    extra = sorted(set(b) - set(_PLAN_KEYS))
    if extra:
        raise InputError(f"{path}: [batch] has unknown key(s) {extra}; valid: {list(_PLAN_KEYS)}")
    if "scene" not in b:
        raise InputError(f"{path}: [batch] scene = \"FILE.toml\" is missing (the base scene)")
    rows = list(data.get("row", []))
    if "table" in b:
        rows += _read_table(path.parent / b["table"], str(path))
    return make_plan(path.parent / b["scene"], rows=rows, grid=data.get("grid"),
                     normalise=b.get("normalise", "peak"), lufs_target=float(b.get("lufs_target", -23.0)),
                     full_scale_pa=b.get("full_scale_pa"), png=bool(b.get("png", False)), source=str(path))


# ----------------------------------------------------------------------------------------------- overrides
def _find(items: list, name: str, what: str, where: str) -> dict:
    names = [it.get("name") for it in items]
    for it in items:
        if it.get("name") == name:
            return it
    if name.isdigit() and int(name) < len(items):
        return items[int(name)]
    raise InputError(f"{where}: no {what} named {name!r} in the base scene; its {what}s: {names} (or an index "
                     f"0..{len(items) - 1})")


def apply_override(scene: dict, path: str, value: Any, where: str = "<plan>") -> None:
    """Set one dotted field (module docstring) in a scene dict, in place."""
    parts = path.split(".")
    head = parts[0]
    if head not in SECTIONS or len(parts) < 2:
        raise InputError(f"{where}: field {path!r}: start with one of {list(SECTIONS)} and name a key "
                         "(e.g. object.ball.material, scene.seed, listener.mic.position)")
    if head in ("object", "listener"):
        if len(parts) < 3:
            raise InputError(f"{where}: field {path!r}: say which {head} and which key, e.g. {head}.NAME.position")
        target = _find(scene.setdefault(head, []), parts[1], head, where)
        keys = parts[2:]
    elif head == "source":
        if len(parts) < 3:
            raise InputError(f"{where}: field {path!r}: say which source kind and key, e.g. source.modal.max_modes")
        target = scene.setdefault("source", {}).setdefault(parts[1], {})
        keys = parts[2:]
    else:
        target = scene.setdefault(head, {})
        keys = parts[1:]
    for k in keys[:-1]:
        nxt = target.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise InputError(f"{where}: field {path!r}: {k!r} is not a table in the base scene")
        target = nxt
    target[keys[-1]] = value


def row_scene(plan: BatchPlan, i: int) -> dict:
    """The scene dict of render ``i``: the base with that row's overrides."""
    d = copy.deepcopy(plan.base)
    for k, v in plan.rows[i].items():
        apply_override(d, k, v, f"{plan.source}: row {i} ({plan.names[i]})")
    return d


def _asset_signature(scene: dict) -> str:
    """Rows with the same signature need the same precomputed assets (modes, radiation, fields, decompositions)."""
    from .assets import content_hash
    objs = [{k: o.get(k) for k in _ASSET_KEYS} for o in scene.get("object", [])]
    sc = scene.get("scene", {})
    return content_hash(objs, scene.get("ground"), scene.get("air"), scene.get("source"), sc.get("sources"),
                        sc.get("quality"), sc.get("sample_rate"), sc.get("acceleration_noise"), sc.get("transfer"),
                        sc.get("modal_order"), sc.get("max_modes"))


def check_plan(plan: BatchPlan) -> None:
    """Check every row against the scene schema (fields, names, values) before anything runs; the first row of
    each asset group is also built in full (meshes read, materials looked up)."""
    from pydantic import ValidationError

    from .scene.schema import SceneFile, load_scene, validation_messages
    seen = set()
    for i in range(len(plan)):
        where = f"{plan.source}: row {i} ({plan.names[i]})"
        d = row_scene(plan, i)
        try:
            SceneFile.model_validate(d)
        except ValidationError as exc:
            msgs = validation_messages(exc.errors(), SceneFile)
            raise InputError(f"{where}: invalid scene: " + "; ".join(msgs[:3]) +
                             f" (fields set by this row: {sorted(plan.rows[i])})") from None
        sig = _asset_signature(d)
        if sig not in seen:
            seen.add(sig)
            try:
                load_scene(d, base=plan.base_dir)
            except InputError as exc:
                raise InputError(f"{where}: {str(exc).removeprefix('<scene dict>: ')}") from None


# ----------------------------------------------------------------------------------------------- running
@dataclass
class _Task:
    index: int
    name: str
    scene: dict
    base_dir: str


@dataclass
class _Outcome:
    index: int
    ok: bool
    error: str = ""
    result: Any = None
    wall_s: float = 0.0


def _render_task(task: _Task) -> _Outcome:
    """Render one row (in a worker); errors of the input or an asset are the row's outcome, not the batch's."""
    from .errors import AssetError, SolverError
    from .pipeline import render_scene
    from .scene import load_scene
    t0 = time.perf_counter()
    try:
        res = render_scene(load_scene(task.scene, base=task.base_dir))
    except (InputError, AssetError, SolverError) as exc:
        return _Outcome(task.index, False, f"{type(exc).__name__}: {exc}", wall_s=time.perf_counter() - t0)
    # the motion record and such are not needed to write the outputs: keep what goes back to the client small
    ev = res.events.select(slice(None))
    ev.motion = ev.resting = None
    res.events, res.stems = ev, {}
    return _Outcome(task.index, True, result=res, wall_s=time.perf_counter() - t0)


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


class _Folder:
    """The output folder of one plan: its record, per-render records, temporaries and the manifest."""

    def __init__(self, out: Path, plan: BatchPlan):
        self.out, self.plan = out, plan
        self.done_dir, self.tmp_dir = out / _DONE, out / _TMP
        self.hash = plan.plan_hash()

    def claim(self) -> None:
        rec = self.out / _RECORD
        if rec.is_file():
            try:
                old = json.loads(rec.read_text())
            except (OSError, json.JSONDecodeError):
                raise InputError(f"{rec}: unreadable batch record; choose another --out or delete the folder") \
                    from None
            if old.get("plan_hash") != self.hash:
                raise InputError(f"{self.out} holds the outputs of another plan ({old.get('plan', '?')}, "
                                 f"{old.get('renders', '?')} renders); choose another --out, or delete that folder "
                                 "to start over")
        elif (self.out / _MANIFEST).exists():
            raise InputError(f"{self.out} holds a {_MANIFEST} that is not a batch of this plan; choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        self.done_dir.mkdir(exist_ok=True)
        self.tmp_dir.mkdir(exist_ok=True)
        for p in self.tmp_dir.iterdir():          # a killed run's partial files
            p.unlink(missing_ok=True)
        from . import __version__
        _write_json_atomic(rec, {"plan_hash": self.hash, "plan": self.plan.source, "renders": len(self.plan),
                                 "fields": self.plan.fields, "impactsound": __version__})

    def done(self) -> dict[int, dict]:
        """Records of the renders already finished (their files present and unchanged)."""
        from .assets import file_sha256
        out = {}
        for i, name in enumerate(self.plan.names):
            p = self.done_dir / f"{name}.json"
            if not p.is_file():
                continue
            try:
                r = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            wav = self.out / f"{name}.wav"
            # a failed render is tried again (the user may have fixed its cause); a finished one only counts
            # while its file is there unchanged
            if r.get("status") == "ok" and wav.is_file() and file_sha256(wav) == r.get("wav_sha256"):
                out[i] = r
        return out

    def write(self, i: int, oc: _Outcome) -> dict:
        """Write one render's files (temporaries, then renames) and its record, last."""
        from .assets import content_hash, file_sha256
        plan, name = self.plan, self.plan.names[i]
        rec = {"row": i, "name": name, **{k: json.dumps(v) if isinstance(v, (list, dict)) else v
                                          for k, v in plan.rows[i].items()},
               "scene_sha256": content_hash(row_scene(plan, i)), "wall_s": round(oc.wall_s, 3)}
        if not oc.ok:
            rec.update(status="failed", error=oc.error)
            _write_json_atomic(self.done_dir / f"{name}.json", rec)
            return rec
        res = oc.result
        tmp_wav = self.tmp_dir / f"{name}.wav"
        tmp_png = self.tmp_dir / f"{name}.png" if plan.png else None
        import logging
        lg = logging.getLogger("impactsound")
        level, lg.level = lg.level, max(lg.getEffectiveLevel(), logging.WARNING)   # no "wrote .tmp/..." lines
        try:
            res.save(tmp_wav, png=tmp_png, title=f"{plan.source}: {name}", normalise=plan.normalise,
                     lufs_target=plan.lufs_target, full_scale_pa=plan.full_scale_pa)
        finally:
            lg.setLevel(level)
        side = json.loads(Path(str(tmp_wav) + ".json").read_text())
        dest = self.out / f"{name}.wav"
        os.replace(Path(str(tmp_wav) + ".json"), Path(str(dest) + ".json"))
        os.replace(tmp_wav, dest)
        if tmp_png is not None:
            os.replace(tmp_png, self.out / f"{name}.png")
        level = side.get("level", {})
        rec.update(status="ok", wav=dest.name, png=f"{name}.png" if plan.png else "", peak_pa=side["peak_pa"],
                   pascals_per_unit=side["pascals_per_unit"], loudness_lufs=level.get("loudness_lufs", ""),
                   events=side.get("events", 0), wav_sha256=file_sha256(dest))
        _write_json_atomic(self.done_dir / f"{name}.json", rec)
        return rec

    def manifest(self, records: dict[int, dict]) -> Path:
        cols = ["row", "name", *self.plan.fields, "status", "wav", "png", "peak_pa", "pascals_per_unit",
                "loudness_lufs", "events", "scene_sha256", "wav_sha256", "wall_s", "error"]
        buf = io.StringIO()
        w = csv.DictWriter(buf, cols, extrasaction="ignore")
        w.writeheader()
        for i in sorted(records):
            w.writerow(records[i])
        path = self.out / _MANIFEST
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(buf.getvalue())
        os.replace(tmp, path)
        return path


@dataclass
class BatchReport:
    """What a batch run did: the manifest, and how many renders were done now, skipped (done before) or failed."""

    manifest: Path
    rendered: int
    skipped: int
    failed: int
    wall_s: float
    records: list[dict]


def run_batch(plan: BatchPlan, out: str | Path, *, workers: int | None = None, scheduler: str | None = None,
              yes: bool = False, progress=None) -> BatchReport:
    """Render every row of ``plan`` into the folder ``out`` (module docstring), resuming a killed run.

    Parameters
    ----------
    plan : BatchPlan
        From :func:`load_plan` or :func:`make_plan`.
    out : str or Path
        Output folder (created). A folder of another plan is refused.
    workers : int, optional
        Local processes (default: the core count; 1 renders in this process). Ignored with ``scheduler``.
    scheduler : str, optional
        A Dask scheduler address (``tcp://host:8786``); its workers need ``IMPACTSOUND_CACHE`` on a shared
        folder to share assets.
    yes : bool
        Allow more than :data:`CONFIRM_ROWS` renders.
    progress : Progress, optional
        Messages and a bar with elapsed and remaining time.

    Returns
    -------
    BatchReport
    """
    from .io.progress import QUIET
    from .parallel import map_tasks
    progress = progress or QUIET
    n = len(plan)
    if n > CONFIRM_ROWS and not yes:
        raise InputError(f"{plan.source}: the plan makes {n} renders (over {CONFIRM_ROWS}); check the grid, and "
                         "pass --yes (yes=True) if you mean it")
    folder = _Folder(Path(out), plan)
    if scheduler is not None:
        from .parallel import SchedulerUnreachable, _connect, require_distributed
        require_distributed()
        try:
            _connect(str(scheduler).strip(), 5.0).close()   # an address that does not answer: refused now
        except SchedulerUnreachable as exc:
            raise InputError(f"--scheduler {scheduler}: {exc.reason}; start `dask scheduler` and `dask worker "
                             f"{scheduler}` (with IMPACTSOUND_CACHE on a shared folder), or leave --scheduler out "
                             "to render on this machine; nothing was written") from None
    folder.claim()
    records = folder.done()
    todo = [i for i in range(n) if i not in records]
    scenes = {i: row_scene(plan, i) for i in todo}
    groups: dict[str, list[int]] = {}
    for i in todo:
        groups.setdefault(_asset_signature(scenes[i]), []).append(i)
    progress.message(f"{n} renders planned, {len(records)} done before, {len(todo)} to render "
                     f"({len(groups)} asset groups) into {folder.out}")
    t_start = time.perf_counter()

    def task(i):
        return _Task(i, plan.names[i], scenes[i], str(plan.base_dir))

    # One render per asset group first, the rest after: the pool takes tasks in order, so the first renders of
    # the groups compute the groups' assets side by side and the others find them ready (or wait on the asset's
    # lock, never computing it twice). One pool for all: a worker starts once (imports, compiled kernels).
    order = [g[0] for g in groups.values()] + [i for g in groups.values() for i in g[1:]]
    n_failed = 0
    last_manifest = [0.0]

    def on_result(k, oc: _Outcome):
        nonlocal n_failed
        records[oc.index] = folder.write(oc.index, oc)
        oc.result = None          # written: map_tasks keeps every outcome until the end, not every render's samples
        n_failed += not oc.ok
        if time.monotonic() - last_manifest[0] > 2.0:
            folder.manifest(records)
            last_manifest[0] = time.monotonic()

    with progress.stage(f"batch of {len(todo)} renders") as update:
        map_tasks(_render_task, [task(i) for i in order], scheduler=scheduler, workers=workers, on_result=on_result,
                  progress=update)
    path = folder.manifest(records)
    with contextlib.suppress(OSError):
        folder.tmp_dir.rmdir()                     # empty once every render is written
    wall = time.perf_counter() - t_start
    progress.message(f"wrote {path}: {len(todo) - n_failed} rendered, {len(records) - len(todo)} skipped, "
                     f"{n_failed} failed in {wall:.1f} s")
    return BatchReport(path, len(todo) - n_failed, n - len(todo), n_failed, wall,
                       [records[i] for i in sorted(records)])
