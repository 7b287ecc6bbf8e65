"""Run the FDTD solver for the six rigid-body acceleration fields of one object.

The directional pressure fields of Precomputed Acceleration Noise (Chadwick, J. N., Zheng, C. & James, D. L. 2012,
"Precomputed acceleration noise for improved rigid-body sound", ACM Trans. Graph. 31(4)): sec. 4.1, the six
fields p_T,i, p_R,i driven by the boundary conditions of eqs. (15)-(16) with a pulse of eq. (17), solved with the
FDTD solver of their sec. 5 (:mod:`impactsound.wave.fdtd`).

Field i solves the wave equation with the body surface accelerating as z_i(t) g_i(x):
  g_i = e_i . n (translation, i = 0..2),   g_i = (e_{i-3} x (x - x0)) . n (rotation, i = 3..5).
On the staggered grid a body face normal to axis d moves with the d-component of the rigid velocity at the face
centre, so the face velocity is v_f(t) = G_i,d(x_f) * integral z_i, with G = e_i (translation) or e_i x (x - x0)
(rotation). The drive z_i(t) is the PAN pulse psi(t - t_shift; h); pressure is recorded at every receiver after
each step (times (n + 1) dt).

Each field is an independent task: its result is written atomically to a checkpoint folder and reused on a rerun
(an interrupted precompute resumes), keyed by a content hash of everything that affects it.

Run length. A plan either has a fixed number of steps, or (``min_steps`` set, as plan_pan makes it) is adaptive:
each field runs at least ``min_steps`` steps and then, checked every ``check_steps``, until the pressure has
decayed, or until ``n_steps`` (the cap). Decayed means: over the trailing ``window_steps``, the largest
w_r |p_r| over the receivers r is at most 10^(-decay_db/20) (1 % for 40 dB) of its largest value so far.
The PAN precompute weights the fit-shell receivers by R_r / R_M: the outermost shell, which the radiation
reaches last, decides, and the inner shells, which see a ringing cavity's wave up to 2 R_b/c earlier in its
phase, keep the ring's simultaneous zero crossings on one shell from passing for decay (the paper runs its
concave objects 10-13 ms for the same reason: Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for
Improved Rigid-Body Sound", sec. 5 and Table 1). The decision reads only the field's own samples, so the same
inputs give the same number of steps and the same bits wherever and however often the field runs; the fields
of one object may stop at different steps.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ...assets import Asset, content_hash, read_asset, write_asset
from ...constants import AIR_C
from ...errors import AssetError, SolverError
from ...parallel import map_tasks
from ...wave.fdtd import COURANT_LIMIT, DEFAULT_NPML, FDTDSolver, centred_grid, solver_bytes
from ...wave.voxel import voxelize

TASK_KIND = "pan_fdtd_task"


#: default decay required before an adaptive run stops [dB]
DECAY_DB = 40.0


@dataclass
class PANGridPlan:
    """Grid, step and duration chosen for one object (all SI); built by :func:`plan_grid`.

    Attributes
    ----------
    dx : float
        Cell size [m].
    dt : float
        Time step [s].
    n_steps : int
        Steps of a fixed-length plan, or the cap of an adaptive one.
    shape : tuple of int
        Grid cells per axis, PML included.
    npml : int
        PML cells per side.
    half_width : float
        Half the interior width of the grid [m].
    min_steps : int or None
        Set for an adaptive plan: at least this many steps, then until the receivers have decayed by
        ``decay_db`` over the trailing ``window_steps`` (module docstring).
    decay_db : float
        Decay that ends an adaptive run [dB].
    window_steps : int
        Trailing window of the decay test [steps].
    """

    dx: float
    dt: float
    n_steps: int
    shape: tuple[int, int, int]
    npml: int
    half_width: float
    min_steps: int | None = None
    decay_db: float = DECAY_DB
    window_steps: int = 1

    @property
    def adaptive(self) -> bool:
        """Whether the run length is adaptive (min_steps set and below n_steps)."""
        return self.min_steps is not None and self.min_steps < self.n_steps

    @property
    def check_steps(self) -> int:
        """Steps between two decay checks of an adaptive run (half the trailing window)."""
        return max(1, int(self.window_steps) // 2)

    def step_range(self) -> tuple[int, int]:
        """Fewest and most steps a field of this plan runs.

        Returns
        -------
        tuple of int
            (min_steps, n_steps) if adaptive, else (n_steps, n_steps).
        """
        return (int(self.min_steps), int(self.n_steps)) if self.adaptive else (int(self.n_steps), int(self.n_steps))

    @property
    def n_cells(self) -> int:
        """Grid cells, PML included."""
        return int(np.prod(self.shape))

    def memory_bytes(self, dtype=np.float32) -> int:
        """Memory [bytes] of the solver's arrays with fields of ``dtype``
        (:func:`~impactsound.wave.fdtd.solver_bytes`)."""
        return solver_bytes(self.shape, self.npml, dtype)

    def cell_updates(self, n_fields: int = 6, most: bool = False) -> float:
        """Cell updates of several fields: the work.

        Parameters
        ----------
        n_fields : int, optional
            Number of fields.
        most : bool, optional
            Count the cap's steps instead of the fewest (the fewest are all of an adaptive run of an object
            whose radiation has decayed by then, e.g. a convex one).

        Returns
        -------
        float
            Cells x steps x fields.
        """
        return float(self.n_cells) * self.step_range()[1 if most else 0] * n_fields


def plan_grid(h: float, bounding_radius: float, max_radius: float, duration: float, c: float = AIR_C,
              cells_per_wavelength: float = 10.0, npml: int = DEFAULT_NPML, courant: float = 0.99 * COURANT_LIMIT,
              max_bytes: float = 8e9, min_duration: float | None = None, decay_db: float = DECAY_DB,
              decay_window: float | None = None) -> PANGridPlan:
    """Choose the grid for a PAN precompute.

    The pulse psi(t; h) has most of its energy below f = 1/(2h) (its spectrum is ~16 dB down there and has its
    first null at 1/h), so dx = c / (f * cells_per_wavelength) with f = 1/(2h) resolves it with >= 10 cells per
    wavelength (and dx is at most bounding_radius / 6). The domain holds the sampling sphere of radius
    ``max_radius`` plus 3 cells, then the PML.

    Parameters
    ----------
    h : float
        Pulse time scale [s].
    bounding_radius : float
        Object's bounding radius [m].
    max_radius : float
        Outermost receiver radius [m].
    duration : float
        The simulated time [s], or with ``min_duration`` the cap of an adaptive run.
    c : float, optional
        Speed of sound [m/s].
    cells_per_wavelength : float, optional
        Cells per wavelength at 1/(2h).
    npml : int, optional
        PML cells per side.
    courant : float, optional
        c dt / dx.
    max_bytes : float, optional
        Memory budget [bytes].
    min_duration : float, optional
        Least simulated time of an adaptive run [s] (None: fixed length).
    decay_db : float, optional
        Decay that ends an adaptive run [dB].
    decay_window : float, optional
        Trailing window of the decay test [s] (default 8h).

    Returns
    -------
    PANGridPlan

    Raises
    ------
    SolverError
        On a non-positive h, duration, min_duration or decay_db, or when the fields would not fit in
        ``max_bytes`` (saying how much they need).
    """
    if not (h > 0 and math.isfinite(h)):
        raise SolverError(f"pulse time scale h = {h} s must be positive")
    if not (duration > 0 and math.isfinite(duration)):
        raise SolverError(f"simulated duration {duration} s must be positive")
    f = 1.0 / (2.0 * h)
    # ... and at least 6 cells per bounding radius, so that soft or large-h objects still get a body (the voxel
    # staircase error is ~0.7/(cells per radius), tests/validation/test_fdtd.py)
    dx = min(c / (f * cells_per_wavelength), bounding_radius / 6.0)
    half = max_radius + 3 * dx
    n = int(math.ceil(2 * half / dx)) + 2 * npml
    dt = courant * dx / c
    n_steps = int(math.ceil(duration / dt))
    adaptive = {}
    if min_duration is not None:
        if not (min_duration > 0 and math.isfinite(min_duration)):
            raise SolverError(f"minimum simulated duration {min_duration} s must be positive")
        if not (decay_db > 0 and math.isfinite(decay_db)):
            raise SolverError(f"decay_db = {decay_db} dB must be positive")
        win = decay_window if decay_window is not None else 8 * h
        adaptive = dict(min_steps=min(int(math.ceil(min_duration / dt)), n_steps), decay_db=float(decay_db),
                        window_steps=max(2, int(math.ceil(win / dt))))
    plan = PANGridPlan(dx=dx, dt=dt, n_steps=n_steps, shape=(n, n, n), npml=npml, half_width=half, **adaptive)
    need = plan.memory_bytes()
    if need > max_bytes:
        raise SolverError(f"the PAN grid for this object would be {n}^3 cells ({need / 1e9:.1f} GB in float32), "
                          f"over the {max_bytes / 1e9:.1f} GB budget: the object is large for its pulse time "
                          f"scale h = {h:.3g} s (bounding radius {bounding_radius:.3g} m). Raise the budget, "
                          "lower cells_per_wavelength, or use fewer/closer fit radii.")
    return plan


def field_pattern(field: int, centres: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """G_i,d(x_f): the d-component (d = each face's axis) of the rigid velocity pattern of field i at the face
    centres (body frame, x0 = origin): e_i for translation, e_{i-3} x x for rotation.

    Parameters
    ----------
    field : int
        Field index 0..5.
    centres : ndarray, shape (n, 3)
        Body face centres [m].
    axis : ndarray of int, shape (n,)
        Each face's axis d.

    Returns
    -------
    ndarray, shape (n,)
        Dimensionless (translation) or [m] (rotation).
    """
    n = len(centres)
    if field < 3:
        return (axis == field).astype(np.float64)
    e = np.zeros(3)
    e[field - 3] = 1.0
    G = np.cross(np.broadcast_to(e, (n, 3)), centres)
    return G[np.arange(n), axis]


def decay_envelope(rec: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Decay envelope max_r w_r |p_r(step)| of receiver series (module docstring).

    Parameters
    ----------
    rec : ndarray, shape (n, steps)
        Receiver pressure series.
    weights : ndarray, shape (n,), optional
        Receiver weights (default 1).

    Returns
    -------
    ndarray, shape (steps,)
    """
    a = np.abs(rec)
    if weights is not None:
        a = a * np.asarray(weights, np.float64)[:, None]
    return a.max(axis=0) if a.shape[0] else np.zeros(a.shape[1])


def has_decayed(env: np.ndarray, plan: PANGridPlan) -> bool:
    """Whether an adaptive run's envelope meets the plan's decay test at its end: its largest value over the last
    window_steps is at most 10^(-decay_db/20) of its largest value so far.

    Parameters
    ----------
    env : ndarray, shape (steps so far,)
        :func:`decay_envelope`.
    plan : PANGridPlan

    Returns
    -------
    bool
        Also True for an all-zero, non-empty envelope.
    """
    n = len(env)
    peak = float(env.max()) if n else 0.0
    if peak == 0.0:
        return n > 0
    tail = float(env[max(0, n - int(plan.window_steps)):].max())
    return tail <= 10.0 ** (-plan.decay_db / 20.0) * peak


def solve_field(field: int, inside: Callable[[np.ndarray], np.ndarray], plan: PANGridPlan,
                receivers: np.ndarray, drive: Callable[[np.ndarray], np.ndarray], c: float, rho: float,
                dtype=np.float32, progress: Callable[[float], None] | None = None,
                decay_weights: np.ndarray | None = None) -> np.ndarray:
    """Simulate one field and record the pressure at the receivers.

    Parameters
    ----------
    field : int
        Field index 0..5.
    inside : object
        Inside test of the body (``grid_solid(xs, ys, zs)``, as :class:`~.precompute.MeshInside`) for
        :func:`~impactsound.wave.voxel.voxelize`.
    plan : PANGridPlan
    receivers : ndarray, shape (n, 3)
        Receiver positions [m], body frame.
    drive : callable
        z_i(t) [m/s^2 or rad/s^2 per unit] for an array of times [s].
    c, rho : float
        Air [m/s], [kg/m^3].
    dtype : dtype, optional
        Field dtype.
    progress : callable, optional
        Called with the fraction done.
    decay_weights : ndarray, shape (n,), optional
        Receiver weights in the decay test (default 1; 0 leaves a receiver out).

    Returns
    -------
    ndarray, shape (n, steps)
        Pressure [Pa per unit drive], sampled at t = (k + 1) dt. steps = plan.n_steps for a fixed plan; for an
        adaptive one (module docstring) the first check point, at or after plan.min_steps, where the receivers
        have decayed, else plan.n_steps (the cap).

    Raises
    ------
    SolverError
        If the object is smaller than one cell, the weights have the wrong shape, or the solver fails (prefixed
        with the field).
    """
    from ...parallel import undo_dask_malloc_trim
    undo_dask_malloc_trim()                                   # a Dask worker's malloc setting (parallel.py)
    grid = centred_grid(plan.half_width, plan.dx, plan.npml)
    solver = FDTDSolver(grid, c, rho, dt=plan.dt, dtype=dtype)
    body = voxelize(grid, inside)
    if len(body.faces) == 0:
        raise SolverError("the object is smaller than one grid cell: nothing to voxelize; lower h or dx")
    solver.set_body(body)
    solver.set_receivers(receivers)
    G = field_pattern(field, body.centres, body.axis)
    z = np.asarray(drive(np.arange(plan.n_steps) * plan.dt), np.float64)     # a(t^n) drives v^{n+1/2}
    # body-face velocity in step n (dv_n/dt = a_n, leapfrog): v^{n+1/2} = v^{n-1/2} + dt z(t^n) G
    scale = np.cumsum(plan.dt * z)
    try:
        if not plan.adaptive:
            return solver.run(plan.n_steps, body_pattern=G, body_scale=scale, progress=progress)
        # adaptive: run in segments (the solver's result does not depend on how the steps are split)
        wts = None if decay_weights is None else np.asarray(decay_weights, np.float64).reshape(-1)
        if wts is not None and wts.shape != (len(receivers),):
            raise SolverError(f"decay_weights must have one weight per receiver ({len(receivers)}), not {wts.shape}")
        parts, envs, n, cap = [], [], 0, int(plan.n_steps)
        target = int(plan.min_steps)
        while True:
            n0, T = n, target - n

            def sub(x, n0=n0, T=T):               # 0..0.9 over the least steps, the rest towards the cap
                if progress is not None:
                    k = n0 + x * T
                    lo = plan.min_steps
                    progress(0.9 * k / lo if k <= lo else 0.9 + 0.1 * (k - lo) / max(cap - lo, 1))

            rec = solver.run(T, body_pattern=G, body_scale=scale[n0:target], progress=sub)
            parts.append(rec)
            envs.append(decay_envelope(rec, wts))
            n = target
            if n >= cap or has_decayed(np.concatenate(envs), plan):
                break
            target = min(n + plan.check_steps, cap)
        if progress is not None:
            progress(1.0)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    except SolverError as e:
        raise SolverError(f"field {field}: {e}") from None


def run_fields(inside, plan: PANGridPlan, receivers: np.ndarray, drive, c: float, rho: float, *,
               task_key: str, checkpoint_dir: str | Path | None = None, fields=range(6), dtype=np.float32,
               progress: Callable[[float], None] | None = None, map_fn=None, decay_weights=None,
               ragged: bool = False):
    """All fields as independent tasks, each persisted on completion (resume after an interruption).

    Returns p (n_fields, n_receivers, steps): with an adaptive plan the fields may have run different numbers
    of steps (module docstring) and the shorter ones are zero-padded to the longest; with ``ragged`` a list of
    the (n_receivers, steps_f) arrays instead. ``task_key`` is a content hash of everything that affects the
    result; a checkpoint with another key, a wrong shape or a bad hash is ignored and recomputed.
    ``decay_weights`` (n_receivers,): the receivers' weights in an adaptive plan's decay test (solve_field).

    ``map_fn(func, items, *, on_result, progress)`` runs the missing fields and returns their results in order,
    calling ``on_result(index, result)`` in this process as each finishes (that writes its checkpoint);
    :func:`impactsound.parallel.map_tasks` (or a ``functools.partial`` of it with ``scheduler=`` / ``workers=``)
    is one. Default: in this process, one field after the other. ``func`` is picklable (a partial of
    :func:`solve_field`) when ``inside`` and ``drive`` are, so the fields can run in other processes or on Dask
    workers; the results are the same bits wherever they run.

    Parameters
    ----------
    inside, plan, receivers, drive, c, rho, dtype, progress, decay_weights
        As in :func:`solve_field`.
    task_key : str
        Content hash of everything that affects the result.
    checkpoint_dir : path-like, optional
        Where each field is persisted (``field<i>.h5``).
    fields : iterable of int, optional
        Field indices (default all six).
    map_fn : callable, optional
        Task runner (above).
    ragged : bool, optional
        Return a list of per-field arrays instead of one padded array.

    Returns
    -------
    ndarray, shape (n_fields, n_receivers, steps), or list of ndarray
        Pressure series, in the order of ``fields``.
    """
    fields = list(fields)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    results: dict[int, np.ndarray] = {}
    lo, hi = plan.step_range()

    def good_shape(shape) -> bool:
        return len(shape) == 2 and shape[0] == len(receivers) and lo <= shape[1] <= hi

    todo = []
    for f in fields:
        if ckpt is not None:
            path = ckpt / f"field{f}.h5"
            try:
                a = read_asset(path, TASK_KIND, inputs_hash=content_hash(task_key, f))
                arr = a.arrays["p"]
                if good_shape(arr.shape):
                    results[f] = arr
                    continue
            except AssetError:
                pass  # missing, half-written, corrupted or stale: redo it
        todo.append(f)

    task = functools.partial(solve_field, inside=inside, plan=plan, receivers=np.asarray(receivers), drive=drive,
                             c=c, rho=rho, dtype=np.dtype(dtype),
                             decay_weights=None if decay_weights is None else np.asarray(decay_weights))
    n_all, n_before = len(fields), len(results)

    def finished(i: int, arr: np.ndarray) -> None:     # runs in this process: checkpoint each field as it lands
        f = todo[i]
        arr = np.asarray(arr)
        if not good_shape(arr.shape):
            raise SolverError(f"field {f}: the task returned shape {arr.shape}, expected "
                              f"({len(receivers)}, {lo}..{hi}); report this as a bug")
        if ckpt is not None:
            write_asset(ckpt / f"field{f}.h5", Asset(kind=TASK_KIND, arrays={"p": arr},
                                                     meta={"field": f}, inputs_hash=content_hash(task_key, f)))
        results[f] = arr

    def fraction(x: float) -> None:
        if progress is not None:
            progress((n_before + x * len(todo)) / n_all)

    if progress is not None:
        progress(n_before / n_all)
    if todo:
        (map_fn or functools.partial(map_tasks, workers=1))(task, todo, on_result=finished, progress=fraction)
    if progress is not None:
        progress(1.0)
    out = [results[f] for f in fields]
    if ragged:
        return out
    T = max(a.shape[1] for a in out) if out else 0
    return np.stack([np.pad(a, ((0, 0), (0, T - a.shape[1]))) for a in out]) if out else np.zeros((0, 0, 0))
