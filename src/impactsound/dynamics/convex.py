"""Convex decomposition of concave bodies for the rigid-body engine only.

MuJoCo collides a mesh as its convex hull, so a ball dropped into a bowl would bounce off the lid-like hull above
the rim. A concave body is therefore given to the engine as several convex parts from CoACD (Wei, Liu, Lo, Mu,
Su, Chen, Liu, Carlsen and Wang 2022, "Approximate Convex Decomposition for 3D Meshes with Collision-Aware
Concavity and Tree Search", ACM TOG 41(4)): cuts chosen by a Monte Carlo tree search until every part is within a
threshold of its hull in the paper's collision-aware concavity metric. Every sound model keeps the original mesh;
the body's mass and inertia stay those of the original mesh too (set explicitly in mujoco_backend.py, not taken
from the parts).

Which bodies: a mesh whose volume is below :data:`CONCAVITY_RATIO` of its convex hull's volume (a bowl: 0.24, a
mug: 0.28); a convex or nearly convex one (a box, a ball, a slightly dented shape) keeps its single hull, at no
cost. The ratio is a cheap, scale-free proxy for "the hull adds a cavity a small object could enter".

Parameters (:data:`COACD_PARAMS`, measured on the demo bowl and a mug on 2 cores): CoACD's concavity threshold is
relative to the mesh's bounding box (the mesh is normalised before decomposing); 0.07 keeps the hull of each part
within ~4 mm of a 14 cm bowl's surface (the paper's 0.05 halves that but takes 3-4x longer). The tree search is
lightened (40 iterations, 10 nodes, depth 2 instead of 150, 20, 3) and merging is capped at 32 parts: the full
search took 12-20 s on the bowl, these settings 2-4 s, for collision geometry that a millimetre does not change.
A fixed seed makes the result reproducible (the same parts, bit for bit, also with a different thread count).

Cache: a decomposition is an asset (assets/store.py), looked up by the content hash of the mesh's vertex and face
bytes, these parameters, the CoACD version and the layout version; a missing, corrupted or stale file is
recomputed and rewritten atomically.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..assets.store import Asset, asset_lock, cache_dir, content_hash, read_asset, write_asset
from ..errors import AssetError, MeshError

__all__ = ["ConvexParts", "convex_parts", "volume_ratio", "CONCAVITY_RATIO", "COACD_PARAMS", "KIND",
           "KIND_VERSION", "decomposition_hash"]

KIND = "convex_decomposition"
KIND_VERSION = 1
CONCAVITY_RATIO = 0.9       # mesh volume / hull volume below this: decomposed
COACD_PARAMS = {
    "threshold": 0.07,          # concavity, relative to the bounding box (CoACD default 0.05)
    "max_convex_hull": 32,      # parts merged down to at most this many (CoACD's merging step)
    "preprocess_mode": "auto",  # remesh only a non-manifold input (CoACD's default)
    "preprocess_resolution": 50,
    "resolution": 1000,         # surface samples for the concavity metric (default 2000)
    "mcts_nodes": 10,           # tree search (default 20, 150, 3): see the module docstring
    "mcts_iterations": 40,
    "mcts_max_depth": 2,
    "pca": False,
    "merge": True,
    "decimate": False,
    "max_ch_vertex": 256,
    "extrude": False,
    "extrude_margin": 0.01,
    "apx_mode": "ch",
    "seed": 1,
    "real_metric": False,
}
_MIN_PART_VOLUME = 1e-6     # of the whole hull's volume: slivers below this are dropped (MuJoCo rejects flat meshes)


@dataclass
class ConvexParts:
    """A body's collision geometry: convex parts in the body frame.

    Attributes
    ----------
    parts : list of (ndarray, ndarray)
        Each part as (vertices (k, 3) [m], faces (m, 3)).
    decomposed : bool
        Whether CoACD was used (False: the single convex hull).
    volume_ratio : float
        Mesh volume / hull volume.
    seconds : float
        Decomposition wall time [s] (0 when read from the cache).
    cached : bool
        Read from the cache.
    path : Path or None
        The cache file (None when not decomposed).
    """

    parts: list = field(default_factory=list)
    decomposed: bool = False
    volume_ratio: float = 1.0
    seconds: float = 0.0
    cached: bool = False
    path: Path | None = None


def volume_ratio(vertices, faces) -> float:
    """Volume of the mesh over the volume of its convex hull (1 for a convex mesh).

    Parameters
    ----------
    vertices : array_like, shape (nv, 3)
        Vertex positions [m].
    faces : array_like, shape (nf, 3)
        Triangles.

    Returns
    -------
    float
        |mesh volume| / hull volume (dimensionless).

    Raises
    ------
    MeshError
        If the hull has no volume.
    """
    import trimesh

    mesh = trimesh.Trimesh(vertices=vertices, faces=faces, process=False)
    hull = mesh.convex_hull.volume
    if not hull > 0:
        raise MeshError("the convex hull of the mesh has no volume (flat mesh?)")
    return float(abs(mesh.volume) / hull)


def _coacd_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("coacd")
    except PackageNotFoundError:
        return "unknown"


def decomposition_hash(vertices, faces, params: dict | None = None) -> str:
    """Content hash of a decomposition's inputs: mesh bytes, CoACD parameters, CoACD version, layout version.

    Parameters
    ----------
    vertices, faces : array_like
        The body mesh, as for :func:`convex_parts`.
    params : dict, optional
        CoACD parameters (default :data:`COACD_PARAMS`).

    Returns
    -------
    str
        Hex digest (:func:`~impactsound.assets.store.content_hash`).
    """
    return content_hash(KIND, KIND_VERSION, np.ascontiguousarray(vertices, np.float64),
                        np.ascontiguousarray(faces, np.int64), dict(params or COACD_PARAMS), _coacd_version())


def _hull(vertices) -> tuple[np.ndarray, np.ndarray] | None:
    """Convex hull (vertices, faces) of a point set, or None when it has (almost) no volume."""
    import trimesh

    try:
        h = trimesh.convex.convex_hull(np.asarray(vertices, np.float64))
    except Exception:  # qhull: flat or too few points
        return None
    if not h.volume > 0:
        return None
    return np.asarray(h.vertices, np.float64), np.asarray(h.faces, np.int64)


def _run_coacd(vertices, faces, params) -> list:
    import coacd

    from ..parallel import default_threads

    coacd.set_log_level("error")     # CoACD logs every iteration on stdout otherwise
    try:                             # its OpenMP threads, capped like every kernel ($IMPACTSOUND_THREADS); the
        coacd._lib.omp_set_num_threads(default_threads())   # parts do not depend on the thread count
    except AttributeError:           # a build without the symbol: OpenMP's own default
        pass
    return coacd.run_coacd(coacd.Mesh(np.asarray(vertices, np.float64), np.asarray(faces, np.int32)), **params)


def _decompose(vertices, faces, params) -> list:
    raw = _run_coacd(vertices, faces, params)
    hulls = [h for h in (_hull(v) for v, _ in raw) if h is not None]
    if not hulls:
        return []
    vols = np.array([_volume(v, f) for v, f in hulls])
    keep = vols >= _MIN_PART_VOLUME * vols.sum()
    return [h for h, k in zip(hulls, keep) if k]


def _volume(v, f) -> float:
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return float(abs(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0)


def _to_asset(parts, key, meta) -> Asset:
    nv = np.array([len(v) for v, _ in parts], np.int64)
    nf = np.array([len(f) for _, f in parts], np.int64)
    return Asset(kind=KIND, kind_version=KIND_VERSION, inputs_hash=key, meta=meta, arrays={
        "vertices": np.concatenate([v for v, _ in parts]).astype(np.float64),
        "faces": np.concatenate([f for _, f in parts]).astype(np.int64),
        "vertex_offsets": np.r_[0, np.cumsum(nv)], "face_offsets": np.r_[0, np.cumsum(nf)]})


def _from_asset(a: Asset) -> list:
    v, f = a.arrays["vertices"], a.arrays["faces"]
    vo, fo = a.arrays["vertex_offsets"], a.arrays["face_offsets"]
    if len(vo) != len(fo) or len(vo) < 2 or vo[-1] != len(v) or fo[-1] != len(f):
        raise AssetError(f"{a.path}: inconsistent part offsets; rebuild it")
    parts = [(v[vo[k]:vo[k + 1]], f[fo[k]:fo[k + 1]]) for k in range(len(vo) - 1)]
    for pv, pf in parts:
        if len(pv) < 4 or pf.min(initial=0) < 0 or pf.max(initial=0) >= len(pv):
            raise AssetError(f"{a.path}: a part has invalid faces; rebuild it")
    return parts


def convex_parts(vertices, faces, *, name: str = "mesh", cache=None, progress=None,
                 params: dict | None = None) -> ConvexParts:
    """Collision geometry of a body mesh: its convex hull, or CoACD parts if it is concave.

    Parameters
    ----------
    vertices : array_like, shape (nv, 3)
        Vertex positions [m], body frame.
    faces : array_like, shape (nf, 3)
        Triangles.
    name : str, optional
        Names the body in messages.
    cache : path-like, optional
        Folder of the cached decompositions (default ``assets.cache_dir()``).
    progress : callable, optional
        Given a str naming the work (Progress.stage's ``update`` shows it) before a decomposition is computed,
        i.e. not when it comes from the cache.
    params : dict, optional
        CoACD parameters (default :data:`COACD_PARAMS`).

    Returns
    -------
    ConvexParts
        The single hull when the volume ratio is >= :data:`CONCAVITY_RATIO`, when CoACD is not installed or
        yields no usable part (both with a warning); the CoACD parts otherwise.

    Raises
    ------
    MeshError
        When the mesh's convex hull has no volume.
    """
    vertices = np.ascontiguousarray(vertices, np.float64)
    faces = np.ascontiguousarray(faces, np.int64)
    hull = _hull(vertices)
    if hull is None:
        raise MeshError(f"{name}: the convex hull of its mesh has no volume (flat mesh?)")
    ratio = volume_ratio(vertices, faces)
    if ratio >= CONCAVITY_RATIO:
        return ConvexParts(parts=[hull], decomposed=False, volume_ratio=ratio)

    params = dict(COACD_PARAMS if params is None else params)
    key = decomposition_hash(vertices, faces, params)
    folder = Path(cache) if cache is not None else cache_dir()
    path = folder / f"convex_{key[:40]}.h5"
    # one process decomposes it; others asking at once wait for the lock, then read it (assets.asset_lock)
    with asset_lock(path):
        return _load_or_decompose(path, key, vertices, faces, params, hull, ratio, name, progress)


def _load_or_decompose(path, key, vertices, faces, params, hull, ratio, name, progress) -> ConvexParts:
    try:
        parts = _from_asset(read_asset(path, KIND, kind_version=KIND_VERSION, inputs_hash=key))
        return ConvexParts(parts=parts, decomposed=True, volume_ratio=ratio, cached=True, path=path)
    except (AssetError, KeyError):
        pass                                    # missing, corrupted or stale: recompute and overwrite
    if progress is not None:
        progress(f"convex decomposition of {name}")
    t0 = time.perf_counter()
    try:
        parts = _decompose(vertices, faces, params)
    except ImportError as exc:                  # the hull is still a valid (if too large) collider
        warnings.warn(f"{name}: no convex decomposition ({exc}; pip install coacd): this concave body collides "
                      "as its convex hull", stacklevel=2)
        return ConvexParts(parts=[hull], decomposed=False, volume_ratio=ratio)
    seconds = time.perf_counter() - t0
    if not parts:
        warnings.warn(f"{name}: the convex decomposition gave no usable part; it collides as its convex hull",
                      stacklevel=2)
        return ConvexParts(parts=[hull], decomposed=False, volume_ratio=ratio, seconds=seconds)
    write_asset(path, _to_asset(parts, key, {"params": params, "coacd_version": _coacd_version(),
                                             "volume_ratio": ratio, "seconds": seconds, "n_parts": len(parts),
                                             "units": "m, body frame"}))
    return ConvexParts(parts=parts, decomposed=True, volume_ratio=ratio, seconds=seconds, path=path)
