"""Train (or read from the cache) the cubature of a thin shell's reduced internal force.

Chadwick, An & James 2009, "Harmonic Shells", sec. 2.3: the reduced force f~(q) = U^T f_int(U q) of a
:class:`~impactsound.fem.shell.ShellModel` in its r lowest linear modes is approximated by a sparse non-negative
cubature over its triangles, trained greedily with NNLS on random poses (An, Kim & James 2008;
:mod:`impactsound.sources.shell.cubature` has the algorithm). This module adds what a shell needs:

* Pose amplitude (this package's choice, stated here). The paper draws each training pose "from a Gaussian for
  each mode to get physically plausible training poses" (sec. 2.3) without giving the scale. Here mode j's
  coordinate has the standard deviation s_j = a (omega_1 / omega_j)^2 (the static response to equal modal forces
  falls as 1/omega^2), and a is fixed so that the lowest mode alone, at one standard deviation, moves the vertex
  it moves most by ``pose_amplitude`` shell thicknesses: a = pose_amplitude * h / max_v |U_1(v)| (|.| the
  vertex's displacement vector). With the default ``pose_amplitude = 1`` the lowest mode's peak displacement
  over the training poses ranges from a small fraction of h to about 2.5 h (the Gaussian's tails), which covers
  the small but nonlinear vibrations the model is for (a free plate's (2,0) mode shifts by 0.7 % at 0.2 h and
  about 17 % at h, by von Karman's cubic backbone; 8.5 % at 0.2 h in the paper's locked linear basis);
  the higher modes add less, by (omega_1 / omega_j)^2. The poses' peak displacements (all modes) are recorded
  in ``meta["pose_peak_displacement_over_h"]``.
* Element forces computed once per pose. Every training and held-out pose's per-triangle nodal forces (the
  membrane force on the 3 vertices added to the bending force on the stencil, 3 S numbers per triangle: S = 6
  slots of its flap with "flap" bending, 24 with "midedge") are computed in one pass (O(N) per pose) and kept,
  (n_train + n_holdout) x N x 3 S x 8 bytes (with "flap": about 260 MB for a 14k-triangle trash can with 125
  poses, 1.4 GB at the paper's 77k triangles; four times that with "midedge"). A candidate's
  reduced force is then the projection g_i(q_p) = U_V^T f_V of its stored forces (O(r) per pose), a small matrix
  product per triangle, so a greedy iteration costs what its candidates cost, not a pass over the mesh per pose.
  The targets are the exact reduced forces U^T f_int(U q_p), assembled in the same pass.
* Parallel work. With ``workers > 1`` or a Dask ``scheduler`` the pose pass runs as tasks through
  :func:`impactsound.parallel.map_tasks` (chunks of poses), and so does each iteration's candidate scoring when
  it spans at least ``parallel_min_chunks`` chunks of ``score_chunk`` triangles (a local pool is started per
  call, seconds, so the default 256 candidates per iteration are scored in this process). Each pose and each
  triangle is computed alone with one BLAS thread, and chunks do not depend on the worker count: the result is
  bitwise the serial one (on machines with the same CPU and NumPy build).
* Cache. The result is an asset (kind ``shell_cubature``) keyed by a content hash of everything that affects it:
  the mesh (vertices, faces), thickness, E, nu, rho, the modes used (U and omega, bytes), every training setting
  and the layout versions; an asset built from anything else is never used (it is rebuilt and overwritten).
  Training checkpoints next to it (``<file>.ckpt``) every ``checkpoint_every`` iterations and on Ctrl-C; a later
  call resumes and gives bitwise the result of an uninterrupted run (the checkpoint is removed once the asset
  is written).

SI units: q [m sqrt(kg)], forces [N/sqrt(kg)], omega [rad/s], thickness [m].
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ...assets.store import cache_dir, content_hash
from ...errors import AssetError, InputError
from .cubature import (CHECKPOINT_KIND_VERSION, KIND_VERSION, Cubature, load_cubature, save_cubature,
                       train_cubature)

__all__ = ["shell_cubature", "shell_cubature_hash", "pose_amplitude", "ShellTrainingForces", "TRAIN_VERSION",
           "PAPER_TRASH_CAN_CUBATURE_S"]

#: layout/numerics version of the shell training (part of every cache key; bump when results change)
TRAIN_VERSION = 1
#: Chadwick, An & James 2009, Table 2: the trash can's cubature precompute (200 modes, 800 points), 8 cores
PAPER_TRASH_CAN_CUBATURE_S = 2.49 * 3600.0

SCORE_CHUNK = 2048          # triangles per scoring chunk / task
PARALLEL_MIN_CHUNKS = 4     # an iteration's scoring goes to the workers from this many chunks on


# ------------------------------------------------------------------------------------------- element forces
def _pose_forces(model, U: np.ndarray, Q: np.ndarray, pairs=None):
    """Per-triangle stencil forces F (N, P, 3 S) [N] (S stencil slots), exact reduced forces T (P, r) [N/sqrt(kg)]
    and the peak vertex displacement (P,) [m] at poses Q (P, r). Each pose is computed alone (the result does not
    depend on how poses are grouped). With ``pairs`` (a quadratic manifold, sources/shell/manifold.py), U is the
    basis [U | Psi], Q holds the r modal coordinates, u = U q + Psi c(q) and T is folded: J(q)^T f_int."""
    from .manifold import fold_pairs, pair_weights
    N, Nv = len(model.faces), model.n_vertices
    st = model.stencil.ravel()
    dof = 3 * model.stencil.shape[1]
    F = np.empty((N, len(Q), dof))
    T = np.empty((len(Q), Q.shape[1]))
    peak = np.empty(len(Q))
    for p, q in enumerate(Q):
        u = U @ (q if pairs is None else np.concatenate([q, pair_weights(q, pairs)]))
        peak[p] = float(np.sqrt((u.reshape(-1, 3) ** 2).sum(axis=1).max()))
        fm, fb = model.element_forces(u)
        fv = fb.copy()
        fv[:, :3] += fm                                  # the stencil's first 3 vertices are the triangle's
        if not np.all(np.isfinite(fv)):
            bad = np.flatnonzero(~np.all(np.isfinite(fv), axis=(1, 2)))
            raise InputError(f"shell cubature: non-finite element forces at a training pose (triangles "
                             f"{bad[:10].tolist()}): the pose amplitude folds triangles; lower pose_amplitude")
        F[:, p, :] = fv.reshape(N, dof)
        f = np.empty((Nv, 3))
        for c in range(3):
            f[:, c] = np.bincount(st, fv[:, :, c].ravel(), minlength=Nv)
        g = U.T @ f.ravel()
        T[p] = g if pairs is None else fold_pairs(g[:len(q)], g[len(q):], q, pairs)
    return F, T, peak


def _pose_task(args):
    """Task of the pose pass: :func:`_pose_forces` of a chunk of poses, with one BLAS thread."""
    model, U, Q, pairs = args
    from ...parallel import single_threaded_blas
    with single_threaded_blas():
        return _pose_forces(model, U, Q, pairs)


def _project(F: np.ndarray, Uv: np.ndarray, Q=None, pairs=None) -> np.ndarray:
    """g_i(q_p) = U_V^T f_V for stored forces F (k, P, 3 S) and stencil rows Uv (k, 3 S, r): (P, k, r).
    One matrix product per triangle (numpy's stacked matmul), so a triangle's bits do not depend on the others
    in the call. On a quadratic manifold (``pairs``; Uv the rows of [U | Psi], Q (P, r) the poses) the pairs'
    columns are folded onto the r coordinates: J_V(q)^T f_V."""
    g = np.matmul(F, Uv).transpose(1, 0, 2)
    if pairs is None:
        return g
    from .manifold import fold_pairs
    r = Q.shape[1]
    return fold_pairs(g[..., :r], g[..., r:], Q[:, None, :], pairs)


def _project_task(payload):
    """Scoring-task payload of :class:`_ShellPoses`: the reduced forces (P, k, r) of one chunk."""
    return _project(*payload)


class ShellTrainingForces:
    """The per-triangle reduced forces g_i(q) = U_V^T f_V(U q) of a shell in modes U, as the
    ``element_forces(Q, elements)`` callable of :func:`~impactsound.sources.shell.cubature.train_cubature`,
    with ``bind_poses`` computing each pose's forces once (module docstring).

    Parameters
    ----------
    model : ShellModel
    U : ndarray (3 Nv, r)
        Mass-normalised modes [1/sqrt(kg)].
    pose_chunk : int, optional
        Poses per task of the pose pass (does not change the result).
    derivatives : ModalDerivatives, optional
        Train on the quadratic manifold u = U q + Psi c(q) (sources/shell/manifold.py) instead of u = U q.
    """

    def __init__(self, model, U, pose_chunk: int = 8, derivatives=None):
        self.model = model
        self.U = np.ascontiguousarray(U, dtype=np.float64)
        if self.U.ndim != 2 or self.U.shape[0] != model.ndof:
            raise InputError(f"shell cubature: modes U must have {model.ndof} rows (3 x {model.n_vertices} "
                             f"vertices), got shape {self.U.shape}")
        self.r = int(self.U.shape[1])
        self.pairs = None
        B = self.U
        if derivatives is not None:
            self.pairs = np.ascontiguousarray(derivatives.pairs, dtype=np.int64)
            B = derivatives.extend(self.U)
        self.B = B
        self.pose_chunk = max(1, int(pose_chunk))
        self._U3 = B.reshape(-1, 3, B.shape[1])
        self.pose_peaks = np.zeros(0)

    def stencil_rows(self, elements) -> np.ndarray:
        """U_V of the listed triangles, (k, 3 S, r): the rows of U at their S stencil slots."""
        el = self._elements(elements)
        return self._U3[self.model.stencil[el]].reshape(el.size, -1, self._U3.shape[2])

    def _elements(self, elements) -> np.ndarray:
        el = np.asarray(elements, dtype=np.int64).reshape(-1)
        if el.size and (el.min() < 0 or el.max() >= len(self.model.faces)):
            raise InputError(f"shell cubature: element indices must lie in [0, {len(self.model.faces)})")
        return el

    def __call__(self, Q, elements) -> np.ndarray:
        """(P, k, r) reduced forces of the listed triangles at poses Q (P, r) (a pass over the mesh per pose)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        el = self._elements(elements)
        F, _, _ = _pose_forces(self.model, self.B, Q, self.pairs)
        return _project(F[el], self.stencil_rows(el), Q, self.pairs)

    def bind_poses(self, pose_sets, map_fn=None, progress=None) -> list:
        """Each pose's forces computed once (through ``map_fn`` in chunks of ``pose_chunk`` poses when given):
        one bound set (``forces``, ``full``, ``task``) per (P, r) array of ``pose_sets``."""
        sets = [np.atleast_2d(np.asarray(Q, dtype=np.float64)) for Q in pose_sets]
        allQ = np.concatenate(sets, axis=0) if sets else np.zeros((0, self.r))
        N, P = len(self.model.faces), len(allQ)
        F = [np.empty((N, len(Q), 3 * self.model.stencil.shape[1])) for Q in sets]
        T = [np.empty((len(Q), self.r)) for Q in sets]
        peaks = np.empty(P)
        where = [(i, j) for i, Q in enumerate(sets) for j in range(len(Q))]     # pose -> (set, row)
        bounds = [(s, min(s + self.pose_chunk, P)) for s in range(0, P, self.pose_chunk)]

        def put(k, res):
            Fc, Tc, pk = res
            s0 = bounds[k][0]
            for j in range(Tc.shape[0]):
                i, row = where[s0 + j]
                F[i][:, row, :] = Fc[:, j, :]
                T[i][row] = Tc[j]
            peaks[s0:s0 + len(pk)] = pk

        if map_fn is not None and len(bounds) > 1:
            tasks = [(self.model, self.B, allQ[a:b], self.pairs) for a, b in bounds]
            for k, res in enumerate(map_fn(_pose_task, tasks, progress=progress)):
                put(k, res)
        else:
            for k, (a, b) in enumerate(bounds):
                put(k, _pose_forces(self.model, self.B, allQ[a:b], self.pairs))
                if progress is not None:
                    progress(b / max(P, 1))
        self.pose_peaks = peaks
        return [_ShellPoses(self, Fi, Ti, Q) for Fi, Ti, Q in zip(F, T, sets)]


class _ShellPoses:
    """A shell's element forces at one fixed pose set (the protocol of cubature.train_cubature)."""

    def __init__(self, owner: ShellTrainingForces, F: np.ndarray, T: np.ndarray, Q: np.ndarray):
        self.owner, self.F, self.T, self.Q = owner, F, T, Q

    def forces(self, elements) -> np.ndarray:
        el = self.owner._elements(elements)
        return _project(self.F[el], self.owner.stencil_rows(el), self.Q, self.owner.pairs)

    def full(self) -> np.ndarray:
        return self.T

    def task(self, idx):
        el = self.owner._elements(idx)
        return _project_task, (self.F[el], self.owner.stencil_rows(el), self.Q, self.owner.pairs)


# ----------------------------------------------------------------------------------------------- settings
def pose_amplitude(model, U, thicknesses: float = 1.0) -> float:
    """The lowest mode's pose standard deviation a [m sqrt(kg)] that moves its most-moved vertex by
    ``thicknesses`` shell thicknesses (module docstring): a = thicknesses * h / max_v |U_1(v)|."""
    U = np.asarray(U, dtype=np.float64)
    if not (isinstance(thicknesses, (int, float, np.floating)) and math.isfinite(thicknesses)
            and thicknesses > 0):
        raise InputError(f"shell cubature: pose_amplitude must be a finite number of thicknesses > 0, "
                         f"got {thicknesses!r}")
    peak = float(np.sqrt((U[:, 0].reshape(-1, 3) ** 2).sum(axis=1).max()))
    if not (peak > 0 and math.isfinite(peak)):
        raise InputError("shell cubature: the lowest mode has no displacement (bad modes)")
    return float(thicknesses) * float(model.thickness) / peak


def _modes_used(model, modes, n_modes):
    U = np.asarray(modes.U, dtype=np.float64)
    omega2 = np.asarray(modes.omega2, dtype=np.float64)
    if U.ndim != 2 or U.shape[0] != model.ndof or omega2.shape != (U.shape[1],):
        raise InputError(f"shell cubature: the modes do not belong to this mesh (U {U.shape}, omega2 "
                         f"{omega2.shape}; the model has {model.ndof} dofs)")
    avail = U.shape[1]
    if avail == 0:
        raise InputError("shell cubature: no modes; solve the modes with a higher f_max")
    if n_modes is None:
        r = avail
    else:
        if isinstance(n_modes, bool) or int(n_modes) != n_modes or int(n_modes) < 1:
            raise InputError(f"shell cubature: n_modes must be a whole number >= 1, got {n_modes!r}")
        r = int(n_modes)
        if r > avail:
            raise InputError(f"shell cubature: n_modes = {r} but only {avail} modes were given; solve more "
                             f"modes (raise f_max or the mode count) or ask for fewer")
    if np.any(omega2[:r] <= 0) or not np.all(np.isfinite(omega2[:r])):
        raise InputError("shell cubature: mode frequencies must be finite and > 0 (rigid modes dropped)")
    return np.ascontiguousarray(U[:, :r]), np.sqrt(omega2[:r])


def shell_cubature_hash(model, U, omega, settings: dict, derivatives=None) -> str:
    """Content hash of everything a shell cubature depends on (module docstring, "Cache"); with ``derivatives``
    (a quadratic-manifold basis) their pairs and values too (keys of linear-basis cubatures are unchanged)."""
    mat = model.material
    extra = () if derivatives is None else ("manifold", np.ascontiguousarray(derivatives.pairs, dtype=np.int64),
                                            np.ascontiguousarray(derivatives.Psi, dtype=np.float64))
    return content_hash("shell_cubature", TRAIN_VERSION, KIND_VERSION, CHECKPOINT_KIND_VERSION,
                        np.ascontiguousarray(model.vertices, dtype=np.float64),
                        np.ascontiguousarray(model.faces, dtype=np.int64),
                        {"thickness_m": float(model.thickness), "E_pa": float(mat.E), "nu": float(mat.nu),
                         "rho_kg_m3": float(mat.rho),
                         # the bending scheme; keyed only when not the default, so "flap" keys stay as they were
                         **({"bending": model.bending} if model.bending != "flap" else {})},
                        np.ascontiguousarray(U, dtype=np.float64), np.ascontiguousarray(omega, dtype=np.float64),
                        settings, *extra)


def _cache_path(cache, h: str) -> Path | None:
    if cache is False:
        return None
    name = f"shell_cubature_{h[:40]}.h5"
    if cache is None:
        return cache_dir() / name
    p = Path(cache).expanduser()
    return p / name if p.is_dir() else p


class _Stages:
    """Progress of the two stages (pose pass, greedy) on a Progress object or a plain ``update`` callable."""

    def __init__(self, progress):
        self.p = progress
        self.cm = None
        self.update = None

    def switch(self, name: str):
        self.close()
        if hasattr(self.p, "stage"):
            self.cm = self.p.stage(name)
            self.update = self.cm.__enter__()
        elif callable(self.p):
            self.update = self.p
            self.p(name)
        else:
            self.update = lambda x: None
        return self.update

    def message(self, text: str):
        if hasattr(self.p, "message"):
            self.p.message(text)

    def close(self, exc=None):
        if self.cm is not None:
            cm, self.cm = self.cm, None
            cm.__exit__(type(exc) if exc else None, exc, None)


def shell_cubature(model, modes, *, n_modes: int | None = None, target: float = 0.1,
                   max_elements: int | None = None, n_train: int = 100, seed: int = 0, workers: int = 1,
                   scheduler: str | None = None, progress=None, cache=None, n_holdout: int = 25,
                   n_candidates: int | None = 256, pose_amplitude_h: float = 1.0, checkpoint_every: int = 10,
                   score_chunk: int = SCORE_CHUNK, parallel_min_chunks: int = PARALLEL_MIN_CHUNKS,
                   fallback_local: bool = False, derivatives=None) -> Cubature:
    """The cubature of a shell's reduced internal force (Chadwick, An & James 2009, sec. 2.3), read from the
    cache when it was built from the same inputs, else trained (resuming a matching checkpoint) and saved.

    Parameters
    ----------
    model : ShellModel
    modes : ShellModes
        Its linear modes (:func:`impactsound.fem.shell.shell_modes`).
    n_modes : int, optional
        Use the lowest ``n_modes`` of them (default all).
    target : float, optional
        Relative training error at which to stop (the paper: about 10 %, reached after ~4 r triangles).
    max_elements : int, optional
        Most triangles (default min(N, 10 r)).
    n_train : int, optional
        Training poses.
    seed : int, optional
        Seed of all randomness.
    workers : int, optional
        Local processes for the pose pass and large scorings (1: all in this process).
    scheduler : str, optional
        Dask scheduler address (instead of local processes).
    progress : Progress or callable, optional
        :class:`impactsound.io.progress.Progress` (two stages), or an ``update(fraction or str)`` callable.
    cache : path-like or False, optional
        None: the cache folder (``$IMPACTSOUND_CACHE``), file named by the hash; a folder: likewise there; a
        file path: exactly that file (its checkpoint beside it, ``<file>.ckpt``); False: no cache, no
        checkpoint.
    n_holdout : int, optional
        Held-out poses for ``holdout_error``.
    n_candidates : int or None, optional
        Random candidate triangles scored per greedy iteration (None: all remaining).
    pose_amplitude_h : float, optional
        The lowest mode's pose standard deviation, as its peak displacement in shell thicknesses (module
        docstring).
    checkpoint_every : int, optional
        Iterations between checkpoints.
    score_chunk, parallel_min_chunks : int, optional
        Triangles per scoring task, and the chunk count from which an iteration's scoring runs on the workers
        (tuning; part of the cache key as rounding may depend on the chunk).
    fallback_local : bool, optional
        With ``scheduler``: when no scheduler answers, warn and use ``workers`` local processes instead.
    derivatives : ModalDerivatives, optional
        Train the force of the quadratic manifold u = U q + Psi c(q) (sources/shell/manifold.py), the pairs
        among the ``n_modes`` used; None: the paper's linear basis u = U q.

    Returns
    -------
    Cubature
        ``meta`` adds ``inputs_hash``, ``path`` (None without cache), ``from_cache``, ``train_time_s``,
        ``pose_amplitude_m_sqrtkg`` and ``pose_peak_displacement_over_h`` (p5, median, p95, max over the
        training and held-out poses; not on a cache hit of an older file).

    Raises
    ------
    InputError
        For invalid settings or modes of another mesh.
    AssetError
        When the cache folder cannot be used.
    SchedulerError
        When the Dask scheduler cannot be used.
    """
    from functools import partial

    from ...parallel import map_tasks
    t_start = time.perf_counter()
    U, omega = _modes_used(model, modes, n_modes)
    r = U.shape[1]
    N = len(model.faces)
    if isinstance(workers, bool) or int(workers) != workers or int(workers) < 1:
        raise InputError(f"shell cubature: workers must be a whole number >= 1, got {workers!r}")
    for name, v in (("n_train", n_train), ("checkpoint_every", checkpoint_every), ("score_chunk", score_chunk),
                    ("parallel_min_chunks", parallel_min_chunks)):
        if isinstance(v, bool) or int(v) != v or int(v) < 1:
            raise InputError(f"shell cubature: {name} must be a whole number >= 1, got {v!r}")
    if max_elements is not None and (isinstance(max_elements, bool) or int(max_elements) != max_elements
                                     or int(max_elements) < 1):
        raise InputError(f"shell cubature: max_elements must be a whole number >= 1, got {max_elements!r}")
    amp = pose_amplitude(model, U, pose_amplitude_h)
    max_el = min(N, 10 * r) if max_elements is None else min(N, int(max_elements))
    settings = {"n_modes": r, "target": float(target), "max_elements": max_el, "n_train": int(n_train),
                "n_holdout": int(n_holdout), "n_candidates": None if n_candidates is None else int(n_candidates),
                "pose_amplitude_h": float(pose_amplitude_h), "exponent": 2.0, "seed": int(seed),
                "score_chunk": int(score_chunk)}
    if derivatives is not None and len(derivatives.pairs) and int(derivatives.pairs.max()) >= r:
        raise InputError(f"shell cubature: the modal derivatives pair modes up to {int(derivatives.pairs.max())}, "
                         f"beyond the {r} modes used")
    h = shell_cubature_hash(model, U, omega, settings, derivatives)
    path = _cache_path(cache, h)
    if path is not None:
        try:
            cub = load_cubature(path, h)
            cub.meta.update(from_cache=True, path=str(path), inputs_hash=h)
            return cub
        except AssetError:
            pass                                      # missing, stale or corrupted: (re)build, never use
    map_fn = None
    if scheduler is not None:
        map_fn = partial(map_tasks, scheduler=scheduler, workers=int(workers), fallback_local=bool(fallback_local))
    elif int(workers) > 1:
        map_fn = partial(map_tasks, workers=int(workers))
    n_poses = int(n_train) + int(n_holdout)
    chunk_poses = 8 if scheduler is not None else max(1, -(-n_poses // (2 * int(workers))))
    forces = ShellTrainingForces(model, U, pose_chunk=chunk_poses, derivatives=derivatives)
    stages = _Stages(progress)
    upd_poses = stages.switch(f"cubature: forces of {N} triangles at {n_poses} poses")
    state = {"greedy": None}

    def on_iteration(info):
        if state["greedy"] is None:
            state["greedy"] = stages.switch(f"cubature: greedy, {r} modes, target {target:.3g}")
            if info["resumed_from"]:
                stages.message(f"cubature: resumed from iteration {info['resumed_from']} ({path}.ckpt)")
        e, it, n = info["train_error"], info["iteration"], info["elements"]
        state["greedy"](f"it {it}, {n} triangles, error {e:.3f}")
        frac = max(n / info["max_elements"],
                   math.log(max(e, 1e-300)) / math.log(target) if 0 < target < 1 and e < 1 else 0.0)
        state["greedy"](min(1.0, frac))
        if it % 100 == 0:
            stages.message(f"cubature: iteration {it}: {n} triangles, training error {e:.1%}")

    try:
        cub = train_cubature(forces, N, omega, amplitude=amp, exponent=2.0, n_train=int(n_train),
                             n_holdout=int(n_holdout), target=target, max_elements=max_el,
                             n_candidates=n_candidates, seed=int(seed), inputs_hash=h,
                             checkpoint=None if path is None else str(path) + ".ckpt",
                             checkpoint_every=int(checkpoint_every), chunk=int(score_chunk), map_fn=map_fn,
                             map_min_chunks=int(parallel_min_chunks), progress=upd_poses,
                             on_iteration=on_iteration, checkpoint_on_interrupt=True)
    except BaseException as exc:
        stages.close(exc)
        raise
    stages.close()
    pk = forces.pose_peaks / float(model.thickness)
    cub.meta.update({
        "inputs_hash": h, "path": None if path is None else str(path), "from_cache": False,
        "train_time_s": time.perf_counter() - t_start, "pose_amplitude_m_sqrtkg": amp,
        "pose_amplitude_h": float(pose_amplitude_h),
        "pose_peak_displacement_over_h": ({"p5": float(np.percentile(pk, 5)), "median": float(np.median(pk)),
                                           "p95": float(np.percentile(pk, 95)), "max": float(pk.max())}
                                          if pk.size else {}),
        "n_modes": r, "triangles": N, "vertices": int(model.n_vertices), "thickness_m": float(model.thickness),
        "material": {"E": float(model.material.E), "nu": float(model.material.nu),
                     "rho": float(model.material.rho)},
        "train_version": TRAIN_VERSION})
    if path is not None:
        save_cubature(path, cub, h)
        Path(str(path) + ".ckpt").unlink(missing_ok=True)      # done: the asset replaces the checkpoint
    return cub
