"""Cubature training for reduced internal forces (independent of the element model).

Chadwick, An & James 2009, sec. 2.3, after An, Kim & James 2008 ("Optimizing cubature for efficient integration
of subspace deformations"). The reduced internal force is a sum over all N elements,

    f~(q) = U^T f_int(U q) = sum_{i=1..N} g_i(q),     g_i(q) = A_i U^T grad_u W_i(U q)   (an r-vector),

and is approximated by a sparse non-negative cubature

    f~(q) ~= sum_{i in C} w_i g_i(q),     w_i >= 0,   |C| = n << N.

The element model enters only through a callable ``element_forces(Q, elements) -> G`` with ``Q`` of shape
(P, r) (P poses), ``elements`` an int array of element indices and ``G`` of shape (P, len(elements), r): the
reduced force g_i(q_p) of each listed element at each pose (the area/volume factor A_i included). It must be
deterministic (the same call gives the same bits), which makes training reproducible and resumable.

Units (SI, as in :mod:`impactsound.sources.shell.dynamics`): with mass-normalised modes, q [m sqrt(kg)],
omega [rad/s], reduced forces g_i [N/sqrt(kg)]; the weights w_i are dimensionless (the factor A_i is inside g_i).

Training (An, Kim & James 2008; Chadwick, An & James 2009, sec. 2.3):

* Poses. P random poses, each modal coordinate drawn independently from a Gaussian N(0, s_j^2) with the per-mode
  scale s_j = amplitude * (omega_min / omega_j)^exponent (``exponent`` = 2 by default: the static response of mode
  j to equal modal forces is f / omega_j^2, so this is "physically plausible" in the paper's sense -- low modes
  move most, and ``amplitude`` [m sqrt(kg)] is the typical coordinate of the lowest mode). Explicit per-mode
  scales may be given instead.
* Targets. b = the full reduced forces sum_i g_i(q_p) of all poses, stacked (P r values). Each pose's block is
  divided by its norm ||f~(q_p)|| (as An et al. 2008 do), so that every pose counts equally whatever its
  amplitude; the relative error ||A w - b|| / ||b|| is then the root-mean-square over poses of the per-pose
  relative force error.
* Greedy selection. Each iteration draws a random candidate subset of the not yet chosen elements, picks the
  candidate whose column (its stacked, normalised forces) has the largest positive normalised inner product with
  the current residual b - A w, adds it, and refits all weights with non-negative least squares. It stops when
  the relative training error reaches ``target`` or ``max_elements`` elements are chosen (or no element reduces
  the residual). Elements whose weight ends at exactly 0 are dropped from the returned cubature (they cost run
  time and contribute nothing).
* Refit (this module's numerics, not the paper's). The columns go into preallocated storage (grown by doubling),
  and a thin QR factorisation A = Q R is extended by one column per iteration (classical Gram-Schmidt, applied
  twice, "CGS2"; a column numerically inside the span of the earlier ones gets a zero diagonal). Then
  min ||A w - b|| over w >= 0 equals min ||R w - Q^T b|| over w >= 0 (they differ by the constant
  ||(I - Q Q^T) b||^2), so the Lawson-Hanson NNLS (scipy.optimize.nnls) runs on the n x n system instead of
  the (P r) x n one: O(n^3) instead of O(P r n^2) per refit. The weights agree with an NNLS on A to rounding
  (about 1e-14 relative in tests), so later greedy choices may differ from an NNLS on A where two candidates
  score equal to rounding; the error ||A w - b|| is always computed from the stored columns themselves.
* Validation. A held-out set of poses, drawn the same way, gives the held-out relative error of the result.

Parallel work. With ``map_fn`` (:func:`impactsound.parallel.map_tasks` or a ``functools.partial`` of it), the
full forces (the sum over all N elements, in chunks of ``chunk`` elements) run as tasks, and so does an
iteration's candidate scoring when it spans at least ``map_min_chunks`` chunks (each task scores one chunk; the
best candidate of each chunk comes back and the first best in candidate order wins). Chunks are fixed by
``chunk`` alone, never by the worker count, and partial sums are added in chunk order in this process, so the
result is bitwise the one of a serial run (given element forces that are deterministic across processes). A
local process pool is started per ``map_fn`` call (seconds), which is why small per-iteration scorings stay in
this process. The element model may also bind the poses itself: an ``element_forces`` object with a method
``bind_poses(pose_sets, map_fn=None, progress=None)`` returns, for each (P, r) pose array, an object with
``forces(elements)`` (P, k, r), ``full()`` (P, r) (the exact reduced forces) and ``task(idx)`` -> ``(fn,
payload)`` with ``fn(payload)`` = ``forces(idx)`` (picklable, for the scoring tasks); the shell trainer
(:mod:`impactsound.sources.shell.train`) uses this to compute each pose's element forces once. All of training
runs with one BLAS thread (:func:`impactsound.parallel.single_threaded_blas`), so that rounding does not depend
on the thread count.

Reproducibility and resumption. All randomness comes from ``seed``: the poses from one generator, and the
candidate subset of iteration k from a generator seeded with (seed, k), so the run does not depend on how it was
split. The column of a chosen element is always computed by a call for that element alone. Every
``checkpoint_every`` iterations the chosen elements, weights and error history are written atomically as an
asset (kind ``shell_cubature_checkpoint``) whose inputs hash combines the caller's inputs hash with all training
settings; a later call with the same hash and settings resumes from it (replaying the column appends of the QR
factorisation in the same order) and gives bitwise the same result as an uninterrupted run. With
``checkpoint_on_interrupt`` an interrupt (Ctrl-C) also writes the last completed iteration first. A checkpoint
with any other hash, or from an earlier layout version (other numerics), is ignored (and overwritten).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ...assets.store import Asset, content_hash, read_asset, write_asset
from ...errors import AssetError, InputError

KIND = "shell_cubature"
KIND_VERSION = 1
CHECKPOINT_KIND = "shell_cubature_checkpoint"
CHECKPOINT_KIND_VERSION = 2     # 2: weights refit on the incremental QR factor (module docstring, "Refit")

ElementForces = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class Cubature:
    """A trained cubature (module docstring).

    Attributes
    ----------
    elements : ndarray of int64, shape (n,)
        Chosen element indices (in the order chosen).
    weights : ndarray of float64, shape (n,)
        Non-negative weights (dimensionless), all > 0.
    train_error : float
        Relative training error ||A w - b|| / ||b|| (per-pose normalised targets).
    holdout_error : float
        The same on the held-out poses (nan when there are none).
    history : ndarray of float64, shape (iterations,)
        Training error after each greedy iteration (non-increasing).
    meta : dict
        Training settings and bookkeeping (e.g. ``resumed_from_iteration``, ``stop_reason``).
    """

    elements: np.ndarray
    weights: np.ndarray
    train_error: float
    holdout_error: float
    history: np.ndarray
    meta: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------- inputs
def mode_scales(omegas, amplitude: float, exponent: float = 2.0) -> np.ndarray:
    """Per-mode standard deviations of the training poses, s_j = amplitude (omega_min / omega_j)^exponent.

    Parameters
    ----------
    omegas : array_like, shape (r,)
        Mode angular frequencies [rad/s], > 0.
    amplitude : float
        Standard deviation of the lowest mode's coordinate [m sqrt(kg)], > 0.
    exponent : float, optional
        Fall-off with frequency (2: static response to equal modal forces).

    Returns
    -------
    ndarray, shape (r,)
        [m sqrt(kg)].
    """
    w = np.asarray(omegas, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError(f"cubature: omegas must be a non-empty 1-D array of finite frequencies > 0 [rad/s], "
                         f"got shape {w.shape}")
    if not (np.isfinite(amplitude) and amplitude > 0):
        raise InputError(f"cubature: amplitude must be finite and > 0 [m sqrt(kg)], got {amplitude!r}")
    if not np.isfinite(exponent):
        raise InputError(f"cubature: exponent must be finite, got {exponent!r}")
    return float(amplitude) * (w.min() / w) ** float(exponent)


def training_poses(n_poses: int, scales, rng: np.random.Generator) -> np.ndarray:
    """Random poses q_pj ~ N(0, scales_j^2) (An, Kim & James 2008; Chadwick, An & James 2009, sec. 2.3).

    Returns
    -------
    ndarray, shape (n_poses, r)
        [m sqrt(kg)].
    """
    s = np.asarray(scales, dtype=float)
    return rng.standard_normal((int(n_poses), s.size)) * s[None, :]


def _check_forces(G, want, elements) -> np.ndarray:
    G = np.asarray(G, dtype=float)
    if G.shape != want:
        raise InputError(f"cubature: element_forces returned shape {G.shape}, expected {want} "
                         f"(poses, elements, modes)")
    if not np.all(np.isfinite(G)):
        bad = np.asarray(elements)[np.nonzero(~np.all(np.isfinite(G), axis=(0, 2)))[0]]
        raise InputError(f"cubature: element_forces returned non-finite forces for element(s) "
                         f"{bad[:10].tolist()}; check the element model or lower the pose amplitude")
    return G


def _call_forces(element_forces: ElementForces, Q: np.ndarray, elements: np.ndarray) -> np.ndarray:
    return _check_forces(element_forces(Q, elements), (Q.shape[0], elements.size, Q.shape[1]), elements)


def full_force(element_forces: ElementForces, n_elements: int, Q, chunk: int = 4096) -> np.ndarray:
    """The exact reduced force sum_i g_i(q) over all elements, evaluated in chunks of elements.

    Parameters
    ----------
    element_forces : callable
        (Q, elements) -> (P, len(elements), r) (module docstring).
    n_elements : int
        N, the number of elements.
    Q : array_like, shape (r,) or (P, r)
        Pose(s) [m sqrt(kg)].
    chunk : int, optional
        Elements per call (memory P * chunk * r floats).

    Returns
    -------
    ndarray, shape (r,) or (P, r)
        [N/sqrt(kg)].
    """
    Q = np.asarray(Q, dtype=float)
    single = Q.ndim == 1
    Q2 = np.atleast_2d(Q)
    n_elements = _check_count(n_elements)
    total = np.zeros_like(Q2)
    for idx in _chunks(np.arange(n_elements, dtype=np.int64), chunk):
        total += _call_forces(element_forces, Q2, idx).sum(axis=1)
    return total[0] if single else total


def cubature_force(cub: Cubature, element_forces: ElementForces, q) -> np.ndarray:
    """Cubature estimate sum_{i in C} w_i g_i(q) of the reduced force.

    Parameters
    ----------
    cub : Cubature
    element_forces : callable
        (Q, elements) -> (P, len(elements), r).
    q : array_like, shape (r,) or (P, r)
        Pose(s) [m sqrt(kg)].

    Returns
    -------
    ndarray, shape (r,) or (P, r)
        [N/sqrt(kg)].
    """
    q = np.asarray(q, dtype=float)
    Q = np.atleast_2d(q)
    if cub.elements.size == 0:
        out = np.zeros_like(Q)
    else:
        G = _call_forces(element_forces, Q, np.asarray(cub.elements, dtype=np.int64))
        out = np.einsum("per,e->pr", G, cub.weights)
    return out[0] if q.ndim == 1 else out


def _check_count(n_elements) -> int:
    try:
        n = int(n_elements)
    except (TypeError, ValueError):
        raise InputError(f"cubature: the element count must be an integer, got {n_elements!r}") from None
    if n < 1 or n != n_elements:
        raise InputError(f"cubature: the element set is empty or invalid (count {n_elements!r}); "
                         f"a cubature needs at least one element")
    return n


def _chunks(idx: np.ndarray, chunk: int) -> list[np.ndarray]:
    """``idx`` cut into consecutive pieces of ``chunk`` (the last shorter): fixed by ``chunk`` alone."""
    c = int(chunk)
    return [idx[s:s + c] for s in range(0, idx.size, c)]


# ------------------------------------------------------------------------------------- element forces at poses
def _sum_task(args):
    """Task: sum over one chunk of elements of g_i at all poses, (P, r)."""
    element_forces, Q, idx = args
    from ...parallel import single_threaded_blas
    with single_threaded_blas():
        return _call_forces(element_forces, Q, idx).sum(axis=1)


def _forces_task(payload):
    """Task payload of :class:`_CallablePoses`: the (P, k, r) forces of one chunk."""
    element_forces, Q, idx = payload
    return _call_forces(element_forces, Q, idx)


class _CallablePoses:
    """A plain ``element_forces(Q, elements)`` callable at fixed poses Q (module docstring, "Parallel work")."""

    def __init__(self, element_forces, n_elements: int, Q: np.ndarray, chunk: int, map_fn, progress):
        self.ef, self.n, self.Q, self.chunk, self.map_fn, self.progress = (element_forces, n_elements, Q,
                                                                           int(chunk), map_fn, progress)

    def forces(self, elements) -> np.ndarray:
        return _call_forces(self.ef, self.Q, np.asarray(elements, dtype=np.int64))

    def task(self, idx):
        return _forces_task, (self.ef, self.Q, idx)

    def full(self) -> np.ndarray:
        chunks = _chunks(np.arange(self.n, dtype=np.int64), self.chunk)
        if self.map_fn is not None and len(chunks) > 1:
            parts = self.map_fn(_sum_task, [(self.ef, self.Q, idx) for idx in chunks], progress=self.progress)
        else:
            parts = []
            for i, idx in enumerate(chunks):
                parts.append(_call_forces(self.ef, self.Q, idx).sum(axis=1))
                if self.progress is not None:
                    self.progress((i + 1) / len(chunks))
        total = np.zeros_like(self.Q)
        for p in parts:                                   # in chunk order, as full_force does
            total += p
        return total


def _bind(element_forces, n_elements, pose_sets, chunk, map_fn, progress):
    hook = getattr(element_forces, "bind_poses", None)
    if hook is not None:
        bound = list(hook(pose_sets, map_fn=map_fn, progress=progress))
        if len(bound) != len(pose_sets):
            raise InputError(f"cubature: bind_poses returned {len(bound)} pose sets for {len(pose_sets)}")
        return bound
    return [_CallablePoses(element_forces, n_elements, Q, chunk, map_fn, progress) for Q in pose_sets]


# --------------------------------------------------------------------------------------------------- training
def _normalised_targets(F: np.ndarray):
    """Per-pose scale 1/||f~(q_p)|| (1 for a pose with zero force) and the stacked normalised targets."""
    norms = np.linalg.norm(F, axis=1)
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 1.0)
    return scale, (F * scale[:, None]).ravel()


def _column(bound, scale, e: int) -> np.ndarray:
    """Stacked, per-pose normalised forces of element e alone (always by a call for e alone: reproducible)."""
    G = bound.forces(np.array([e], dtype=np.int64))[:, 0, :]
    return (G * scale[:, None]).ravel()


def _score_task(args):
    """Task: the best candidate of one chunk, (element, score) with score 0.0 and element None when no column
    has a positive normalised inner product with the residual (An et al. 2008)."""
    fn, payload, scale, residual, idx = args
    from ...parallel import single_threaded_blas
    with single_threaded_blas():
        return _score_chunk(fn(payload), scale, residual, idx)


def _score_chunk(G, scale, residual, idx):
    P, k, r = G.shape
    G = G * scale[:, None, None]
    C = np.transpose(G, (1, 0, 2)).reshape(k, P * r)
    norms = np.linalg.norm(C, axis=1)
    dots = C @ residual
    score = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
    j = int(np.argmax(score))
    return (int(idx[j]), float(score[j])) if score[j] > 0 else (None, 0.0)


class _LeastSquares:
    """The greedy's least-squares state: columns A (stored transposed, rows appended), the thin QR A = Q R
    extended one column at a time (CGS2), c = Q^T b. Storage grows by doubling up to ``cap_max`` columns."""

    def __init__(self, b: np.ndarray, cap_max: int):
        self.b = b
        self.m = b.size
        self.n = 0
        self.cap_max = max(1, int(cap_max))
        cap = min(self.cap_max, 64)
        self.At = np.empty((cap, self.m))
        self.Qt = np.empty((cap, self.m))
        self.R = np.zeros((cap, cap))
        self.c = np.zeros(cap)

    def _grow(self):
        cap = min(self.cap_max, 2 * self.At.shape[0])
        for name in ("At", "Qt"):
            old = getattr(self, name)
            new = np.empty((cap, self.m))
            new[:self.n] = old[:self.n]
            setattr(self, name, new)
        R = np.zeros((cap, cap))
        R[:self.n, :self.n] = self.R[:self.n, :self.n]
        c = np.zeros(cap)
        c[:self.n] = self.c[:self.n]
        self.R, self.c = R, c

    def append(self, a: np.ndarray) -> None:
        k = self.n
        if k == self.At.shape[0]:
            self._grow()
        self.At[k] = a
        if k:
            Qk = self.Qt[:k]
            h = Qk @ a
            v = a - Qk.T @ h
            h2 = Qk @ v                                  # second pass: orthogonal to working precision
            v -= Qk.T @ h2
            h += h2
            self.R[:k, k] = h
        else:
            v = a.copy()
        rho = float(np.linalg.norm(v))
        anorm = float(np.linalg.norm(a))
        if rho > 64 * np.finfo(float).eps * anorm and rho > 0:
            self.Qt[k] = v / rho
        else:                                            # inside the span of the earlier columns
            rho = 0.0
            self.Qt[k] = 0.0
        self.R[k, k] = rho
        self.c[k] = float(self.Qt[k] @ self.b)
        self.n = k + 1

    def solve(self) -> np.ndarray:
        from scipy.optimize import nnls
        n = self.n
        w, _ = nnls(np.ascontiguousarray(self.R[:n, :n]), self.c[:n].copy(), maxiter=50 * n + 100)
        return w

    def residual(self, w: np.ndarray) -> np.ndarray:
        return self.b - self.At[:self.n].T @ w


def train_cubature(element_forces: ElementForces, n_elements: int, omegas, *, amplitude: float | None = None,
                   exponent: float = 2.0, scales=None, n_train: int = 100, n_holdout: int = 25,
                   target: float = 0.1, max_elements: int | None = None, n_candidates: int | None = 256,
                   seed: int = 0, inputs_hash: str = "", checkpoint: str | os.PathLike | None = None,
                   checkpoint_every: int = 10, max_iterations: int | None = None,
                   chunk: int = 4096, map_fn=None, map_min_chunks: int = 2, progress=None,
                   on_iteration=None, checkpoint_on_interrupt: bool = False) -> Cubature:
    """Train a sparse non-negative cubature greedily (module docstring; An, Kim & James 2008).

    Parameters
    ----------
    element_forces : callable
        (Q (P, r), elements (k,) int64) -> (P, k, r) reduced element forces [N/sqrt(kg)]; optionally with a
        ``bind_poses`` method (module docstring, "Parallel work").
    n_elements : int
        N, number of elements (indices 0..N-1).
    omegas : array_like, shape (r,)
        Mode angular frequencies [rad/s] (they fix r and, with ``amplitude``, the pose scales).
    amplitude : float, optional
        Pose scale of the lowest mode [m sqrt(kg)]; required unless ``scales`` is given.
    exponent : float, optional
        Pose scale fall-off, s_j = amplitude (omega_min / omega_j)^exponent.
    scales : array_like, shape (r,), optional
        Explicit per-mode pose standard deviations [m sqrt(kg)] (instead of amplitude/exponent).
    n_train, n_holdout : int, optional
        Numbers of training and held-out poses.
    target : float, optional
        Relative training error at which to stop (0 < target).
    max_elements : int, optional
        Most elements to choose (default min(N, 10 r)).
    n_candidates : int or None, optional
        Size of the random candidate subset per iteration (None: all remaining elements).
    seed : int, optional
        Seed of all randomness.
    inputs_hash : str, optional
        Hash of the mesh/modes/material that define ``element_forces`` (keys the checkpoint).
    checkpoint : path-like, optional
        Checkpoint file (an asset); resumed from when its hash matches, written every ``checkpoint_every``
        iterations, when stopping early and at the end.
    checkpoint_every : int, optional
        Iterations between checkpoints (>= 1).
    max_iterations : int, optional
        Stop after this many greedy iterations in this call (the result is then partial,
        ``meta["stop_reason"] == "max_iterations"``); a later call with the same checkpoint resumes.
    chunk : int, optional
        Elements per call (and per task) when summing the full forces and scoring candidates.
    map_fn : callable, optional
        ``map_fn(fn, tasks, progress=None) -> [fn(t) for t in tasks]`` (:func:`impactsound.parallel.map_tasks`
        or a partial of it): runs the full-force chunks and large candidate scorings as tasks. The result does
        not depend on it (bitwise).
    map_min_chunks : int, optional
        An iteration's scoring goes through ``map_fn`` only when its candidates span at least this many chunks.
    progress : callable, optional
        ``progress(fraction)`` while the full forces (targets) are computed.
    on_iteration : callable, optional
        ``on_iteration(info)`` after each greedy iteration (and once on resuming), info a dict with
        ``iteration``, ``elements``, ``train_error``, ``target``, ``max_elements``, ``resumed_from``.
    checkpoint_on_interrupt : bool, optional
        On KeyboardInterrupt, write the last completed iteration to ``checkpoint`` before re-raising.

    Returns
    -------
    Cubature

    Raises
    ------
    InputError
        For invalid settings, an empty element set, or forces of the wrong shape or not finite.
    """
    n_elements = _check_count(n_elements)
    w_modes = np.asarray(omegas, dtype=float)
    if scales is None:
        if amplitude is None:
            raise InputError("cubature: give the pose amplitude [m sqrt(kg)] or explicit per-mode scales")
        s = mode_scales(w_modes, amplitude, exponent)
    else:
        mode_scales(w_modes, 1.0)               # validates omegas
        s = np.asarray(scales, dtype=float)
        if s.shape != w_modes.shape or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise InputError(f"cubature: scales must be {w_modes.size} finite values > 0 [m sqrt(kg)]")
    r = w_modes.size
    if not (isinstance(target, (int, float, np.floating)) and math.isfinite(target) and target > 0):
        raise InputError(f"cubature: target relative error must be finite and > 0, got {target!r}")
    if int(n_train) < 1 or int(n_holdout) < 0:
        raise InputError(f"cubature: need n_train >= 1 and n_holdout >= 0, got {n_train}, {n_holdout}")
    if max_elements is None:
        max_elements = min(n_elements, 10 * r)
    max_elements = int(max_elements)
    if max_elements < 1:
        raise InputError(f"cubature: max_elements must be >= 1, got {max_elements}")
    max_elements = min(max_elements, n_elements)
    if n_candidates is not None and int(n_candidates) < 1:
        raise InputError(f"cubature: n_candidates must be >= 1 or None, got {n_candidates}")
    if int(checkpoint_every) < 1:
        raise InputError(f"cubature: checkpoint_every must be >= 1, got {checkpoint_every}")
    if max_iterations is not None and int(max_iterations) < 0:
        raise InputError(f"cubature: max_iterations must be >= 0, got {max_iterations}")
    if int(chunk) < 1 or int(map_min_chunks) < 1:
        raise InputError(f"cubature: chunk and map_min_chunks must be >= 1, got {chunk}, {map_min_chunks}")

    settings = {"n_elements": n_elements, "omegas": w_modes, "scales": s, "n_train": int(n_train),
                "n_holdout": int(n_holdout), "target": float(target), "max_elements": max_elements,
                "n_candidates": None if n_candidates is None else int(n_candidates), "seed": int(seed),
                "chunk": int(chunk)}
    ckpt_hash = content_hash(CHECKPOINT_KIND, CHECKPOINT_KIND_VERSION, inputs_hash, settings)
    from ...parallel import single_threaded_blas
    with single_threaded_blas():
        return _train(element_forces, n_elements, w_modes, s, int(n_train), int(n_holdout), float(target),
                      max_elements, n_candidates, int(seed), checkpoint, int(checkpoint_every), max_iterations,
                      int(chunk), map_fn, int(map_min_chunks), progress, on_iteration,
                      bool(checkpoint_on_interrupt), ckpt_hash)


def _train(element_forces, n_elements, w_modes, s, n_train, n_holdout, target, max_elements, n_candidates,
           seed, checkpoint, checkpoint_every, max_iterations, chunk, map_fn, map_min_chunks, progress,
           on_iteration, checkpoint_on_interrupt, ckpt_hash) -> Cubature:
    import time
    t0 = time.perf_counter()
    # poses and targets (one generator for the poses; the candidate draws use (seed, iteration))
    rng = np.random.default_rng([seed, 0x5C0BA7])
    Q = training_poses(n_train, s, rng)
    Qh = training_poses(n_holdout, s, rng)
    train_set, hold_set = _bind(element_forces, n_elements, [Q, Qh], chunk, map_fn, progress)
    scale, b = _normalised_targets(_check_full(train_set.full(), Q.shape))
    bnorm = float(np.linalg.norm(b))
    ls = _LeastSquares(b, max_elements)

    chosen: list[int] = []
    w = np.zeros(0)
    history: list[float] = []
    resumed = 0
    if checkpoint is not None:
        state = _read_checkpoint(checkpoint, ckpt_hash)
        if state is not None:
            chosen = [int(e) for e in state["elements"]]
            w = state["weights"].astype(float)
            history = [float(x) for x in state["history"]]
            for e in chosen:                           # replayed in order: the same R and Q bits
                ls.append(_column(train_set, scale, e))
            resumed = len(history)
    err = history[-1] if history else (1.0 if bnorm > 0 else 0.0)
    residual = ls.residual(w) if chosen else b.copy()
    in_set = np.zeros(n_elements, dtype=bool)
    in_set[chosen] = True

    def report():
        if on_iteration is not None:
            on_iteration({"iteration": len(history), "elements": len(chosen), "train_error": float(err),
                          "target": target, "max_elements": max_elements, "resumed_from": resumed})

    if resumed:
        report()
    stop = ""
    done_here = 0
    it = len(history)
    try:
        while True:
            if err <= target:
                stop = "target"
            elif len(chosen) >= max_elements:
                stop = "max_elements"
            elif max_iterations is not None and done_here >= int(max_iterations):
                stop = "max_iterations"
            if stop:
                break
            e = _pick(train_set, scale, residual, in_set, n_candidates, seed, it, chunk, map_fn, map_min_chunks)
            if e is None:
                stop = "no_improvement"
                break
            ls.append(_column(train_set, scale, e))
            w_new = ls.solve()
            res_new = ls.residual(w_new)
            err_new = float(np.linalg.norm(res_new) / bnorm) if bnorm > 0 else 0.0
            # commit the iteration (an interrupt before this line leaves the previous one intact)
            chosen.append(e)
            in_set[e] = True
            w, residual, err = w_new, res_new, err_new
            history.append(err)
            it += 1
            done_here += 1
            if checkpoint is not None and it % int(checkpoint_every) == 0:
                _write_checkpoint(checkpoint, ckpt_hash, chosen, w, history)
            report()
    except KeyboardInterrupt:
        if checkpoint is not None and checkpoint_on_interrupt and len(history) > resumed:
            _write_checkpoint(checkpoint, ckpt_hash, chosen, w, history)
        raise
    if checkpoint is not None:
        _write_checkpoint(checkpoint, ckpt_hash, chosen, w, history)

    keep = w > 0
    elements = np.asarray(chosen, dtype=np.int64)[keep]
    weights = np.asarray(w, dtype=float)[keep]
    meta = {"settings_hash": ckpt_hash, "stop_reason": stop, "resumed_from_iteration": resumed,
            "iterations": len(history), "n_train": int(n_train), "n_holdout": int(n_holdout),
            "target": float(target), "seed": int(seed), "scales_m_sqrtkg": s.tolist(),
            "omegas_rad_s": w_modes.tolist(), "n_elements_total": n_elements,
            "refit": "nnls on the incremental QR factor (CGS2)"}
    cub = Cubature(elements=elements, weights=weights, train_error=float(err), holdout_error=math.nan,
                   history=np.asarray(history, dtype=float), meta=meta)
    if Qh.shape[0] > 0:
        sh, bh = _normalised_targets(_check_full(hold_set.full(), Qh.shape))
        if cub.elements.size == 0:
            est = np.zeros_like(Qh)
        else:
            est = np.einsum("per,e->pr", hold_set.forces(cub.elements), cub.weights)
        est = est * sh[:, None]
        bhn = float(np.linalg.norm(bh))
        cub.holdout_error = float(np.linalg.norm(est.ravel() - bh) / bhn) if bhn > 0 else 0.0
    cub.meta["train_time_s"] = time.perf_counter() - t0
    return cub


def _check_full(F, shape) -> np.ndarray:
    F = np.asarray(F, dtype=float)
    if F.shape != shape:
        raise InputError(f"cubature: the full reduced forces have shape {F.shape}, expected {shape}")
    if not np.all(np.isfinite(F)):
        raise InputError("cubature: the full reduced forces are not finite; lower the pose amplitude")
    return F


def _pick(bound, scale, residual, in_set, n_candidates, seed, it, chunk, map_fn, map_min_chunks):
    """The candidate with the largest positive normalised correlation with the residual (An et al. 2008);
    falls back to all remaining elements when the random subset has none; None when no element has any."""
    remaining = np.flatnonzero(~in_set)
    if remaining.size == 0:
        return None
    subsets = []
    if n_candidates is not None and int(n_candidates) < remaining.size:
        rng = np.random.default_rng([int(seed), 0xCA7D, int(it)])
        subsets.append(np.sort(rng.choice(remaining, size=int(n_candidates), replace=False)))
    subsets.append(remaining)
    for cand in subsets:
        chunks = _chunks(cand, chunk)
        if map_fn is not None and len(chunks) >= map_min_chunks:
            tasks = []
            for idx in chunks:
                fn, payload = bound.task(idx)
                tasks.append((fn, payload, scale, residual, idx))
            results = map_fn(_score_task, tasks)
        else:
            results = [_score_chunk(bound.forces(idx), scale, residual, idx) for idx in chunks]
        best, best_score = None, 0.0
        for e, sc in results:                            # chunk order: the first best candidate wins
            if e is not None and sc > best_score:
                best, best_score = e, sc
        if best is not None:
            return best
    return None


# ------------------------------------------------------------------------------------------ checkpoint / asset
def _write_checkpoint(path, ckpt_hash, chosen, w, history) -> None:
    write_asset(path, Asset(kind=CHECKPOINT_KIND, kind_version=CHECKPOINT_KIND_VERSION, inputs_hash=ckpt_hash,
                            arrays={"elements": np.asarray(chosen, dtype=np.int64),
                                    "weights": np.asarray(w, dtype=float),
                                    "history": np.asarray(history, dtype=float)},
                            meta={"what": "partial cubature training state (An, Kim & James 2008 greedy NNLS)"}))


def _read_checkpoint(path, ckpt_hash):
    """The checkpoint's arrays when it exists and matches ``ckpt_hash`` exactly; otherwise None (never used)."""
    if not Path(path).is_file():
        return None
    try:
        a = read_asset(path, CHECKPOINT_KIND, kind_version=CHECKPOINT_KIND_VERSION, inputs_hash=ckpt_hash)
    except AssetError:
        return None
    el, w, h = a.arrays.get("elements"), a.arrays.get("weights"), a.arrays.get("history")
    if el is None or w is None or h is None or not (el.shape == w.shape == h.shape):
        return None
    return {"elements": el, "weights": w, "history": h}


def save_cubature(path, cub: Cubature, inputs_hash: str) -> Path:
    """Write a cubature as an asset of kind ``shell_cubature`` (atomic).

    Parameters
    ----------
    path : path-like
    cub : Cubature
    inputs_hash : str
        Hash of the mesh/modes/material it was trained for.

    Returns
    -------
    Path
    """
    meta = dict(cub.meta)
    meta.update({"train_error": cub.train_error, "holdout_error": cub.holdout_error,
                 "units": {"weights": "1", "q": "m sqrt(kg)", "omega": "rad/s", "force": "N/sqrt(kg)"},
                 "reference": "Chadwick, An & James 2009, sec. 2.3; An, Kim & James 2008"})
    return write_asset(path, Asset(kind=KIND, kind_version=KIND_VERSION, inputs_hash=inputs_hash,
                                   arrays={"elements": np.asarray(cub.elements, dtype=np.int64),
                                           "weights": np.asarray(cub.weights, dtype=float),
                                           "history": np.asarray(cub.history, dtype=float)},
                                   meta=meta))


def load_cubature(path, inputs_hash: str) -> Cubature:
    """Read a ``shell_cubature`` asset; refused (AssetError) when built from other inputs, corrupted or missing."""
    a = read_asset(path, KIND, kind_version=KIND_VERSION, inputs_hash=inputs_hash)
    meta = dict(a.meta)
    tr = float(meta.pop("train_error", math.nan))
    ho = meta.pop("holdout_error", math.nan)
    ho = math.nan if ho is None else float(ho)
    return Cubature(elements=a.arrays["elements"].astype(np.int64), weights=a.arrays["weights"].astype(float),
                    train_error=tr, holdout_error=ho, history=a.arrays["history"].astype(float), meta=meta)


def cached_cubature(path, inputs_hash: str, element_forces: ElementForces, n_elements: int, omegas,
                    **train_kwargs) -> Cubature:
    """Load the cubature at ``path`` if it was built from ``inputs_hash``; otherwise train it (resuming from a
    ``path`` + ".ckpt" checkpoint when one matches) and save it. A stale or corrupted asset is never used.
    A run stopped by ``max_iterations`` is returned but not saved."""
    try:
        return load_cubature(path, inputs_hash)
    except AssetError:
        pass
    train_kwargs.setdefault("checkpoint", str(path) + ".ckpt")
    cub = train_cubature(element_forces, n_elements, omegas, inputs_hash=inputs_hash, **train_kwargs)
    if cub.meta.get("stop_reason") != "max_iterations":
        save_cubature(path, cub, inputs_hash)
    return cub
