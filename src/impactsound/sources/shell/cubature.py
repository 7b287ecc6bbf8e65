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
  the current residual b - A w, adds it, and refits all weights with non-negative least squares
  (scipy.optimize.nnls). It stops when the relative training error reaches ``target`` or ``max_elements``
  elements are chosen (or no element reduces the residual). Elements whose weight ends at exactly 0 are dropped
  from the returned cubature (they cost run time and contribute nothing).
* Validation. A held-out set of poses, drawn the same way, gives the held-out relative error of the result.

Reproducibility and resumption. All randomness comes from ``seed``: the poses from one generator, and the
candidate subset of iteration k from a generator seeded with (seed, k), so the run does not depend on how it was
split. The column of a chosen element is always computed by a call for that element alone. Every
``checkpoint_every`` iterations the chosen elements, weights and error history are written atomically as an
asset (kind ``shell_cubature_checkpoint``) whose inputs hash combines the caller's inputs hash with all training
settings; a later call with the same hash and settings resumes from it and gives bitwise the same result as an
uninterrupted run. A checkpoint with any other hash is ignored (and overwritten).
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
CHECKPOINT_KIND_VERSION = 1

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


def _call_forces(element_forces: ElementForces, Q: np.ndarray, elements: np.ndarray) -> np.ndarray:
    G = np.asarray(element_forces(Q, elements), dtype=float)
    want = (Q.shape[0], elements.size, Q.shape[1])
    if G.shape != want:
        raise InputError(f"cubature: element_forces returned shape {G.shape}, expected {want} "
                         f"(poses, elements, modes)")
    if not np.all(np.isfinite(G)):
        bad = elements[np.nonzero(~np.all(np.isfinite(G), axis=(0, 2)))[0]]
        raise InputError(f"cubature: element_forces returned non-finite forces for element(s) "
                         f"{bad[:10].tolist()}; check the element model or lower the pose amplitude")
    return G


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
    for start in range(0, n_elements, int(chunk)):
        idx = np.arange(start, min(start + int(chunk), n_elements), dtype=np.int64)
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


# --------------------------------------------------------------------------------------------------- training
def _normalised_targets(F: np.ndarray):
    """Per-pose scale 1/||f~(q_p)|| (1 for a pose with zero force) and the stacked normalised targets."""
    norms = np.linalg.norm(F, axis=1)
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 1.0)
    return scale, (F * scale[:, None]).ravel()


def _column(element_forces, Q, scale, e: int) -> np.ndarray:
    """Stacked, per-pose normalised forces of element e alone (always by a call for e alone: reproducible)."""
    G = _call_forces(element_forces, Q, np.array([e], dtype=np.int64))[:, 0, :]
    return (G * scale[:, None]).ravel()


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.optimize import nnls
    w, _ = nnls(A, b, maxiter=50 * A.shape[1] + 100)
    return w


def _rel(A: np.ndarray, w: np.ndarray, b: np.ndarray, bnorm: float) -> float:
    return float(np.linalg.norm(A @ w - b) / bnorm) if bnorm > 0 else 0.0


def train_cubature(element_forces: ElementForces, n_elements: int, omegas, *, amplitude: float | None = None,
                   exponent: float = 2.0, scales=None, n_train: int = 100, n_holdout: int = 25,
                   target: float = 0.1, max_elements: int | None = None, n_candidates: int | None = 256,
                   seed: int = 0, inputs_hash: str = "", checkpoint: str | os.PathLike | None = None,
                   checkpoint_every: int = 10, max_iterations: int | None = None,
                   chunk: int = 4096) -> Cubature:
    """Train a sparse non-negative cubature greedily (module docstring; An, Kim & James 2008).

    Parameters
    ----------
    element_forces : callable
        (Q (P, r), elements (k,) int64) -> (P, k, r) reduced element forces [N/sqrt(kg)].
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
        Elements per call when summing the full forces.

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

    settings = {"n_elements": n_elements, "omegas": w_modes, "scales": s, "n_train": int(n_train),
                "n_holdout": int(n_holdout), "target": float(target), "max_elements": max_elements,
                "n_candidates": None if n_candidates is None else int(n_candidates), "seed": int(seed)}
    ckpt_hash = content_hash(CHECKPOINT_KIND, CHECKPOINT_KIND_VERSION, inputs_hash, settings)

    # poses and targets (one generator for the poses; the candidate draws use (seed, iteration))
    rng = np.random.default_rng([int(seed), 0x5C0BA7])
    Q = training_poses(n_train, s, rng)
    Qh = training_poses(n_holdout, s, rng)
    scale, b = _normalised_targets(full_force(element_forces, n_elements, Q, chunk))
    bnorm = float(np.linalg.norm(b))

    chosen: list[int] = []
    cols: list[np.ndarray] = []
    w = np.zeros(0)
    history: list[float] = []
    resumed = 0
    if checkpoint is not None:
        state = _read_checkpoint(checkpoint, ckpt_hash)
        if state is not None:
            chosen = [int(e) for e in state["elements"]]
            w = state["weights"].astype(float)
            history = [float(x) for x in state["history"]]
            cols = [_column(element_forces, Q, scale, e) for e in chosen]
            resumed = len(history)
    A = np.column_stack(cols) if cols else np.zeros((b.size, 0))
    err = history[-1] if history else (1.0 if bnorm > 0 else 0.0)
    residual = b - A @ w if cols else b.copy()
    in_set = np.zeros(n_elements, dtype=bool)
    in_set[chosen] = True

    stop = ""
    done_here = 0
    it = len(history)
    while True:
        if err <= target:
            stop = "target"
        elif len(chosen) >= max_elements:
            stop = "max_elements"
        elif max_iterations is not None and done_here >= int(max_iterations):
            stop = "max_iterations"
        if stop:
            break
        e = _pick(element_forces, Q, scale, residual, in_set, n_candidates, seed, it, chunk)
        if e is None:
            stop = "no_improvement"
            break
        chosen.append(e)
        in_set[e] = True
        cols.append(_column(element_forces, Q, scale, e))
        A = np.column_stack(cols)
        w = _nnls(A, b)
        residual = b - A @ w
        err = _rel(A, w, b, bnorm)
        history.append(err)
        it += 1
        done_here += 1
        if checkpoint is not None and it % int(checkpoint_every) == 0:
            _write_checkpoint(checkpoint, ckpt_hash, chosen, w, history)
    if checkpoint is not None:
        _write_checkpoint(checkpoint, ckpt_hash, chosen, w, history)

    keep = w > 0
    elements = np.asarray(chosen, dtype=np.int64)[keep]
    weights = np.asarray(w, dtype=float)[keep]
    meta = {"settings_hash": ckpt_hash, "stop_reason": stop, "resumed_from_iteration": resumed,
            "iterations": len(history), "n_train": int(n_train), "n_holdout": int(n_holdout),
            "target": float(target), "seed": int(seed), "scales_m_sqrtkg": s.tolist(),
            "omegas_rad_s": w_modes.tolist(), "n_elements_total": n_elements}
    cub = Cubature(elements=elements, weights=weights, train_error=float(err), holdout_error=math.nan,
                   history=np.asarray(history, dtype=float), meta=meta)
    if Qh.shape[0] > 0:
        sh, bh = _normalised_targets(full_force(element_forces, n_elements, Qh, chunk))
        est = cubature_force(cub, element_forces, Qh) * sh[:, None]
        bhn = float(np.linalg.norm(bh))
        cub.holdout_error = float(np.linalg.norm(est.ravel() - bh) / bhn) if bhn > 0 else 0.0
    return cub


def _pick(element_forces, Q, scale, residual, in_set, n_candidates, seed, it, chunk):
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
    P, r = Q.shape
    for cand in subsets:
        best, best_score = None, 0.0
        for start in range(0, cand.size, int(chunk)):
            idx = cand[start:start + int(chunk)]
            G = _call_forces(element_forces, Q, idx) * scale[:, None, None]      # (P, k, r)
            C = np.transpose(G, (1, 0, 2)).reshape(idx.size, P * r)
            norms = np.linalg.norm(C, axis=1)
            dots = C @ residual
            score = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
            j = int(np.argmax(score))
            if score[j] > best_score:
                best, best_score = int(idx[j]), float(score[j])
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
