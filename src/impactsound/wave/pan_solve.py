"""Run the FDTD solver for the six rigid-body acceleration fields of one object (specs/pan.md sec. 4.1 and 5).

Field i solves the wave equation with the body surface accelerating as z_i(t) g_i(x):
  g_i = e_i . n (translation, i = 0..2),   g_i = (e_{i-3} x (x - x0)) . n (rotation, i = 3..5).
On the staggered grid a body face normal to axis d moves with the d-component of the rigid velocity at the face
centre, so the face velocity is v_f(t) = G_i,d(x_f) * integral z_i, with G = e_i (translation) or e_i x (x - x0)
(rotation). The drive z_i(t) is the PAN pulse psi(t - t_shift; h); pressure is recorded at every receiver after
each step (times (n + 1) dt).

Each field is an independent task: its result is written atomically to a checkpoint folder and reused on a rerun
(an interrupted precompute resumes), keyed by a content hash of everything that affects it.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..assets import Asset, content_hash, read_asset, write_asset
from ..errors import AssetError, SolverError
from ..parallel import map_tasks
from .fdtd import COURANT_LIMIT, DEFAULT_NPML, FDTDSolver, centred_grid, solver_bytes, voxelize

TASK_KIND = "pan_fdtd_task"


@dataclass
class PANGridPlan:
    """Grid, step and duration chosen for one object (all SI)."""

    dx: float
    dt: float
    n_steps: int
    shape: tuple[int, int, int]
    npml: int
    half_width: float

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape))

    def memory_bytes(self, dtype=np.float32) -> int:
        return solver_bytes(self.shape, self.npml, dtype)

    def cell_updates(self, n_fields: int = 6) -> float:
        return float(self.n_cells) * self.n_steps * n_fields


def plan_grid(h: float, bounding_radius: float, max_radius: float, duration: float, c: float = 343.2,
              cells_per_wavelength: float = 10.0, npml: int = DEFAULT_NPML, courant: float = 0.99 * COURANT_LIMIT,
              max_bytes: float = 8e9) -> PANGridPlan:
    """Choose the grid for a PAN precompute.

    The pulse psi(t; h) has most of its energy below f = 1/(2h) (its spectrum is ~16 dB down there and has its
    first null at 1/h), so dx = c / (f * cells_per_wavelength) with f = 1/(2h) resolves it with >= 10 cells per
    wavelength. The domain holds the sampling sphere of radius ``max_radius`` plus 3 cells, then the PML.
    Raises SolverError when the fields would not fit in ``max_bytes``, saying how much they need."""
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
    plan = PANGridPlan(dx=dx, dt=dt, n_steps=int(math.ceil(duration / dt)), shape=(n, n, n), npml=npml,
                       half_width=half)
    need = plan.memory_bytes()
    if need > max_bytes:
        raise SolverError(f"the PAN grid for this object would be {n}^3 cells ({need / 1e9:.1f} GB in float32), "
                          f"over the {max_bytes / 1e9:.1f} GB budget: the object is large for its pulse time "
                          f"scale h = {h:.3g} s (bounding radius {bounding_radius:.3g} m). Raise the budget, "
                          "lower cells_per_wavelength, or use fewer/closer fit radii.")
    return plan


def field_pattern(field: int, centres: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """G_i,d(x_f): the d-component (d = each face's axis) of the rigid velocity pattern of field i at the face
    centres (body frame, x0 = origin): e_i for translation, e_{i-3} x x for rotation."""
    n = len(centres)
    if field < 3:
        return (axis == field).astype(np.float64)
    e = np.zeros(3)
    e[field - 3] = 1.0
    G = np.cross(np.broadcast_to(e, (n, 3)), centres)
    return G[np.arange(n), axis]


def solve_field(field: int, inside: Callable[[np.ndarray], np.ndarray], plan: PANGridPlan,
                receivers: np.ndarray, drive: Callable[[np.ndarray], np.ndarray], c: float, rho: float,
                dtype=np.float32, progress: Callable[[float], None] | None = None) -> np.ndarray:
    """Simulate field ``field`` (0..5) and return pressure at ``receivers`` (n, 3) [m, body frame], shape
    (n, n_steps), sampled at t = (k + 1) dt. ``drive(t)`` is z_i(t) [m/s^2 or rad/s^2 per unit]."""
    from ..parallel import undo_dask_malloc_trim
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
        return solver.run(plan.n_steps, body_pattern=G, body_scale=scale, progress=progress)
    except SolverError as e:
        raise SolverError(f"field {field}: {e}") from None


def run_fields(inside, plan: PANGridPlan, receivers: np.ndarray, drive, c: float, rho: float, *,
               task_key: str, checkpoint_dir: str | Path | None = None, fields=range(6), dtype=np.float32,
               progress: Callable[[float], None] | None = None, map_fn=None) -> np.ndarray:
    """All fields as independent tasks, each persisted on completion (resume after an interruption).

    Returns p (6, n_receivers, n_steps). ``task_key`` is a content hash of everything that affects the result;
    a checkpoint with another key, a wrong shape or a bad hash is ignored and recomputed.

    ``map_fn(func, items, *, on_result, progress)`` runs the missing fields and returns their results in order,
    calling ``on_result(index, result)`` in this process as each finishes (that writes its checkpoint);
    :func:`impactsound.parallel.map_tasks` (or a ``functools.partial`` of it with ``scheduler=`` / ``workers=``)
    is one. Default: in this process, one field after the other. ``func`` is picklable (a partial of
    :func:`solve_field`) when ``inside`` and ``drive`` are, so the fields can run in other processes or on Dask
    workers; the results are the same bits wherever they run."""
    fields = list(fields)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    results: dict[int, np.ndarray] = {}
    todo = []
    for f in fields:
        if ckpt is not None:
            path = ckpt / f"field{f}.h5"
            try:
                a = read_asset(path, TASK_KIND, inputs_hash=content_hash(task_key, f))
                arr = a.arrays["p"]
                if arr.shape == (len(receivers), plan.n_steps):
                    results[f] = arr
                    continue
            except AssetError:
                pass  # missing, half-written, corrupted or stale: redo it
        todo.append(f)

    task = functools.partial(solve_field, inside=inside, plan=plan, receivers=np.asarray(receivers), drive=drive,
                             c=c, rho=rho, dtype=np.dtype(dtype))
    n_all, n_before = len(fields), len(results)

    def finished(i: int, arr: np.ndarray) -> None:     # runs in this process: checkpoint each field as it lands
        f = todo[i]
        arr = np.asarray(arr)
        if arr.shape != (len(receivers), plan.n_steps):
            raise SolverError(f"field {f}: the task returned shape {arr.shape}, expected "
                              f"{(len(receivers), plan.n_steps)}; report this as a bug")
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
    return np.stack([results[f] for f in fields])
