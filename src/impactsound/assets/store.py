"""One on-disk format for every precomputed asset.

An asset is one HDF5 file: named float/int arrays (datasets) plus metadata (root attributes):

- ``kind`` (e.g. ``"modal_model"``) and ``kind_version`` (the layout of that kind),
- ``format_version`` (this container), ``package_version``,
- ``inputs_hash``: content hash of everything that produced it (mesh bytes, material, solver settings...),
  so a cache is looked up by it and a stale cache never matches,
- ``data_hash``: sha256 over the stored arrays, checked on every read, so a corrupted file is detected,
- ``meta``: a JSON object (units, parameters) for people and tools.

Why HDF5 (h5py): one self-describing file, partial reads of large fields, attributes for metadata, and no
pickling (assets may come from others). Files are written to a temporary name in the same folder and renamed,
so a reader never sees half an asset and an interrupted write leaves the old one intact. The temporary name
says whose it is (``.NAME.impactsound-HOST-PID-RANDOM.tmp``), so that a write killed before its rename (SIGKILL,
power loss) leaves a file the next write to that folder recognises and removes: when its process is gone (same
host), or when it is older than :data:`STALE_TMP_S` (another host, or a pid since reused).
"""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
import json
import math
import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import AssetError

ASSET_FORMAT_VERSION = 1
STALE_TMP_S = 30 * 60       # a temporary file this old is abandoned: no asset write takes that long between
                            # creating it and renaming it (the arrays are in memory when the write starts)
_TMP_TAG = "impactsound"
# ours: .NAME.impactsound-HOST-PID-RANDOM.tmp; earlier versions': .NAME.h5.RANDOM8.tmp (tempfile.mkstemp)
_TMP_RE = re.compile(r"^\.(?:.+\." + _TMP_TAG + r"-(?P<host>[A-Za-z0-9_.]*)-(?P<pid>\d+)-[a-z0-9_]+"
                     r"|.+\.h5\.[a-z0-9_]{8})\.tmp$")


def _canonical(obj) -> bytes:
    """Stable bytes for JSON-able parameters (sorted keys, floats by repr)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default).encode()


def _json_default(o):
    if isinstance(o, np.ndarray):
        return {"__array__": hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest(),
                "dtype": str(o.dtype), "shape": list(o.shape)}
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot hash {type(o)!r}")


def content_hash(*parts) -> str:
    """sha256 hex digest of parameters.

    Parameters
    ----------
    *parts
        JSON-able values (sorted keys; arrays inside them by their own hash), NumPy arrays (by dtype, shape,
        bytes) and bytes, in order.

    Returns
    -------
    str
        64 hex characters.

    Raises
    ------
    TypeError
        For a value that is none of these.
    """
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, (bytes, bytearray)):
            h.update(b"B")
            h.update(bytes(p))
        elif isinstance(p, np.ndarray):
            a = np.ascontiguousarray(p)
            h.update(f"A{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        else:
            h.update(b"J")
            h.update(_canonical(p))
    return h.hexdigest()


def hash_arrays(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over named arrays (names sorted; each by name, dtype, shape and bytes): an asset's ``data_hash``.

    Parameters
    ----------
    arrays : dict of str to ndarray

    Returns
    -------
    str
        64 hex characters.
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass
class Asset:
    """One asset in memory (module docstring).

    Parameters
    ----------
    kind : str
        What it holds, e.g. "modal_model".
    arrays : dict of str to ndarray
        Named arrays (SI units; the kind says which).
    meta : dict, optional
        JSON-able metadata (units, parameters).
    inputs_hash : str, optional
        Content hash of everything that produced it.
    kind_version : int, optional
        Layout version of the kind.
    path : Path, optional
        Where it was read from or written to (set by :func:`read_asset` / :func:`write_asset`).
    """

    kind: str
    arrays: dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)
    inputs_hash: str = ""
    kind_version: int = 1
    path: Path | None = None


def _package_version() -> str:
    try:
        from importlib.metadata import version
        return version("impactsound")
    except Exception:  # pragma: no cover - running from a source tree without install
        return "0+unknown"


def write_asset(path: str | os.PathLike, asset: Asset) -> Path:
    """Write an asset atomically (temporary file in the same folder, then rename; module docstring).

    Parameters
    ----------
    path : str or PathLike
        Destination; its folder is created.
    asset : Asset
        What to write; its ``path`` is set to ``path``.

    Returns
    -------
    Path
        ``path``, now holding the asset.

    Raises
    ------
    AssetError
        If the folder cannot be created.
    """
    import h5py

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AssetError(f"{path}: cannot create the folder {path.parent} ({exc.strerror or exc}); "
                         f"choose another output path") from None
    _clean_now_and_then(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_TMP_TAG}-{_host()}-{os.getpid()}-", suffix=".tmp",
                               dir=path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for name, arr in asset.arrays.items():
                f.create_dataset(name, data=np.asarray(arr))
            f.attrs["kind"] = asset.kind
            f.attrs["kind_version"] = int(asset.kind_version)
            f.attrs["format_version"] = ASSET_FORMAT_VERSION
            f.attrs["package_version"] = _package_version()
            f.attrs["inputs_hash"] = asset.inputs_hash
            f.attrs["data_hash"] = hash_arrays({k: np.asarray(v) for k, v in asset.arrays.items()})
            f.attrs["meta"] = json.dumps(asset.meta, sort_keys=True, default=_json_default)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    asset.path = path
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB chunks (a shipped bank, a rendered WAV)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def asset_lock(path: str | os.PathLike):
    """Hold the exclusive lock of an asset (``<path>.lock``, fcntl ``flock``) while computing or extending it.

    Why: processes sharing one asset folder (a local pool, Dask workers with ``IMPACTSOUND_CACHE`` on a shared
    filesystem; Linux NFS clients map ``flock`` to NFS locks) must compute an asset once per content hash. The
    first to ask computes it under the lock; another asking at the same time waits for the lock, then finds the
    written asset and reads it. Callers re-check for the asset after taking the lock. A no-op where fcntl is
    missing (not POSIX).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:                                   # pragma: no cover - not POSIX
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:64]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: exists, owned by someone else
        return True
    return True


_last_clean: dict[str, float] = {}


def _clean_now_and_then(folder: Path, every_s: float = 60.0) -> None:
    """Clean ``folder`` at most once a minute per process: checkpointed precomputes write many assets into one
    folder, and one scan per write would grow with the folder."""
    key = str(folder)
    now = time.monotonic()
    if now - _last_clean.get(key, -math.inf) >= every_s:
        _last_clean[key] = now
        clean_stale_temporaries(folder)


def clean_stale_temporaries(folder, max_age_s: float = STALE_TMP_S) -> list[Path]:
    """Remove temporaries of interrupted asset writes in ``folder``; returns what was removed.

    Only names that :func:`write_asset` makes are touched: one whose writer (this host, by pid) is gone, or any
    older than ``max_age_s`` (a writer on another host sharing the folder, or an earlier version's unnamed one).
    Errors (a file vanishing under a concurrent cleaner, permissions) are ignored: cleaning is best effort.

    Parameters
    ----------
    folder : path-like
        The folder to clean.
    max_age_s : float, optional
        Age [s] beyond which any such temporary is removed.

    Returns
    -------
    list of Path
        The removed files.
    """
    removed = []
    now = time.time()
    host = _host()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        m = _TMP_RE.match(e.name)
        if m is None:
            continue
        try:
            if not e.is_file(follow_symlinks=False):
                continue
            age = now - e.stat(follow_symlinks=False).st_mtime
            pid = m.group("pid")
            dead = (pid is not None and m.group("host") == host and int(pid) != os.getpid()
                    and not _pid_alive(int(pid)))
            if dead or age > max_age_s:
                os.unlink(e.path)
                removed.append(Path(e.path))
        except OSError:
            continue
    return removed


class _LazyArrays(Mapping):
    """The arrays of an asset file read on first access (each dataset once): for a file verified as a whole
    otherwise, whose callers read a few of many datasets (the shipped soundbank: 1,190 datasets, 0.14 s to read
    them all, a render needs a few). A Mapping, so that dict(...) of it reads every dataset."""

    def __init__(self, path: Path, names):
        self._path = path
        self._names = list(names)
        self._read: dict = {}

    def __getitem__(self, name):
        if name in self._read:
            return self._read[name]
        if name not in self._names:
            raise KeyError(name)
        import h5py
        try:
            with h5py.File(self._path, "r") as f:
                v = f[name][()]
        except (OSError, KeyError, ValueError) as exc:
            raise AssetError(f"{self._path}: dataset {name} is not readable ({exc}); delete it or rebuild "
                             "it") from None
        self._read[name] = v
        return v

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


def read_asset(path: str | os.PathLike, kind: str, *, kind_version: int | None = None,
               inputs_hash: str | None = None, lazy: bool = False) -> Asset:
    """Read and verify an asset.

    Checks: readable HDF5, ``kind`` and versions match, the arrays hash to the stored ``data_hash`` (corruption),
    and, if given, ``inputs_hash`` matches (staleness). With ``lazy`` the arrays are read on first access and their
    ``data_hash`` is not checked: only for a file whose bytes were verified as a whole (the shipped soundbank, by
    its sha256 against the package's manifest).

    Parameters
    ----------
    path : str or PathLike
        The file.
    kind : str
        Expected kind.
    kind_version : int, optional
        Expected layout version (not checked when None).
    inputs_hash : str, optional
        Expected inputs hash (not checked when None).

    Returns
    -------
    Asset

    Raises
    ------
    AssetError
        Naming the file and what is wrong.
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise AssetError(f"{path}: asset file not found")
    try:
        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
            arrays = _LazyArrays(path, f.keys()) if lazy else {name: f[name][()] for name in f.keys()}
    except (OSError, KeyError, ValueError) as exc:
        raise AssetError(f"{path}: not a readable impactsound asset ({exc}); delete it or rebuild it") from None
    def _s(v):
        return v.decode() if isinstance(v, bytes) else str(v)
    got_kind = _s(attrs.get("kind", ""))
    if got_kind != kind:
        raise AssetError(f"{path}: asset kind is {got_kind!r}, expected {kind!r}")
    if int(attrs.get("format_version", -1)) != ASSET_FORMAT_VERSION:
        raise AssetError(f"{path}: asset format version {attrs.get('format_version')} is not "
                         f"{ASSET_FORMAT_VERSION}; rebuild it")
    kv = int(attrs.get("kind_version", -1))
    if kind_version is not None and kv != kind_version:
        raise AssetError(f"{path}: {kind} layout version {kv} is not {kind_version}; rebuild it")
    if not lazy and _s(attrs.get("data_hash", "")) != hash_arrays(arrays):
        raise AssetError(f"{path}: stored data does not match its hash (corrupted); delete it or rebuild it")
    ih = _s(attrs.get("inputs_hash", ""))
    if inputs_hash is not None and ih != inputs_hash:
        raise AssetError(f"{path}: asset was built from different inputs (hash {ih[:12]}..., expected "
                         f"{inputs_hash[:12]}...); rebuild it")
    try:
        meta = json.loads(_s(attrs.get("meta", "{}")))
    except json.JSONDecodeError:
        raise AssetError(f"{path}: metadata is not valid JSON (corrupted); rebuild it") from None
    return Asset(kind=kind, arrays=arrays, meta=meta, inputs_hash=ih, kind_version=kv, path=path)


def cache_dir() -> Path:
    """Folder for cached assets: $IMPACTSOUND_CACHE, else ~/.cache/impactsound; created if missing.

    Returns
    -------
    Path

    Raises
    ------
    AssetError
        Naming the variable when the path is a file or cannot be created or written, so that callers can ask for
        it before long work rather than fail when they first save an asset.
    """
    env = os.environ.get("IMPACTSOUND_CACHE")
    p = Path(env).expanduser() if env else Path.home() / ".cache" / "impactsound"
    what = f"IMPACTSOUND_CACHE={env}" if env else f"the cache folder {p}"
    fix = ("point IMPACTSOUND_CACHE at a folder (or unset it to use ~/.cache/impactsound)" if env
           else "set IMPACTSOUND_CACHE to a writable folder")
    if p.exists() and not p.is_dir():
        raise AssetError(f"{what} is a file, not a folder; {fix}")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AssetError(f"{what}: cannot create the folder ({exc.strerror or exc}); {fix}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise AssetError(f"{what} is not writable; {fix}")
    return p
