"""PAN precompute through Dask (issue 3): the same small PAN job (six FDTD fields, then the fit) run in this
process and on a local Dask cluster of 1 and of 2 worker processes (one thread each), side by side: wall time,
ratio to the 1-worker cluster, and whether every field array is bit-identical to the in-process run; for
comparison also a local process pool of 2 (``map_tasks(workers=2)``, no Dask; its start-up is timed).

Each cluster is started and warmed up (every worker imports the package and compiles the FDTD kernels on a
throw-away task) before the clock starts, so the figures are the precompute alone plus Dask's task overhead.
Note that each field's FDTD solve also runs its own thread pool (one thread per core, wave/fdtd.py), so on a
machine with few cores two worker processes compete for the same cores.

Run: .venv/bin/python bench/bench_pan_dask.py [STEPS] [SUBDIVISIONS]
"""
from __future__ import annotations

import functools
import sys
import time

import numpy as np
import trimesh

from impactsound.materials import make_material
from impactsound.parallel import local_cores, map_tasks
from impactsound.sources.pan.precompute import MeshInside, PulseDrive, plan_pan
from impactsound.sources.pan.solve import run_fields, solve_field


def job(steps: int, subdivisions: int):
    """A soft 5 mm ball (long pulse, coarse grid), like the CLI test's, cut to ``steps`` FDTD steps."""
    ball = trimesh.creation.icosphere(subdivisions=subdivisions, radius=0.005)
    soft = make_material("custom", E=5e6, nu=0.45, rho=1100)
    j = plan_pan(ball, soft)
    if steps:
        j = plan_pan(ball, soft, duration=steps * j.plan.dt)
    return j


def fields(j, map_fn=None) -> np.ndarray:
    """The six raw FDTD fields (6, receivers, steps), through ``map_fn``."""
    from impactsound.sources.pan.field import sample_points
    pts = sample_points(j.R_b, j.n_theta, j.n_phi, len(j.radii)).reshape(-1, 3)
    return run_fields(MeshInside(j.mesh), j.plan, pts, PulseDrive(j.h, 2 * j.h), j.c, j.rho, task_key=j.key,
                      dtype=np.dtype(j.dtype), map_fn=map_fn)


def _warm(_):
    """Runs on each worker before timing: imports and JIT-compiles the FDTD and voxel kernels."""
    j = job(4, 1)
    return solve_field(0, MeshInside(j.mesh), j.plan, np.zeros((1, 3)) + j.R_b * 2, PulseDrive(j.h, 2 * j.h),
                       j.c, j.rho).shape


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    subdiv = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from distributed import LocalCluster
    j = job(steps, subdiv)
    e = j.estimate()
    print(f"job: grid {e['grid'][0]}^3, {e['steps']} steps x 6 fields = {e['cell_updates']:.3g} cell updates; "
          f"{local_cores()} cores on this machine")
    _warm(None)
    t = time.perf_counter()
    ref = fields(j)
    t_serial = time.perf_counter() - t
    print(f"{'in this process (serial fields)':34s} {t_serial:7.2f} s")
    t = time.perf_counter()
    p = fields(j, functools.partial(map_tasks, workers=2))
    dt = time.perf_counter() - t
    print(f"{'local process pool, 2 processes':34s} {dt:7.2f} s   (process start-up included)   "
          f"vs in-process x{t_serial / dt:4.2f}   bit-identical: {np.array_equal(p, ref)}")
    rows = []
    for n in (1, 2):
        with LocalCluster(n_workers=n, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
            map_tasks(_warm, range(2 * n), scheduler=cluster.scheduler_address)
            run = functools.partial(map_tasks, scheduler=cluster.scheduler_address)
            t = time.perf_counter()
            p = fields(j, run)
            dt = time.perf_counter() - t
        same = p.dtype == ref.dtype and np.array_equal(p, ref)
        rows.append((n, dt, same))
    base = rows[0][1]
    for n, dt, same in rows:
        print(f"{f'Dask LocalCluster, {n} worker(s)':34s} {dt:7.2f} s   speed-up vs 1 worker x{base / dt:4.2f}   "
              f"vs in-process x{t_serial / dt:4.2f}   bit-identical: {same}")


if __name__ == "__main__":
    main()
