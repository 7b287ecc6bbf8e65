"""Transfer precompute through Dask (issue 4): the same FFAT precompute (BEM solve + FFAT fit per mode) run in
this process and on a local Dask cluster of 1 and of 2 worker processes (one thread each), side by side: wall
time, ratio to the 1-worker cluster, and whether every map is bit-identical to the in-process run.

The modal model is a rigid-body-like set of surface fields on a 1280-triangle sphere (breathing, three
translations, and l = 2 shapes at rising frequencies up to k a ~ 3), so the figures are the BEM and the fit, not
a FEM solve. Each worker gets IMPACTSOUND_THREADS = cores / workers (Numba threads of the BEM assembly and
evaluation; BLAS runs on one thread in every mode solve, which keeps the maps bit-identical). Every process (this one and each worker) compiles bempp-cl's kernels once (about a minute on 2
cores); that is done before the clock starts (bem.warm_up on each worker) and reported separately.

Run: .venv/bin/python bench/bench_transfer_dask.py [MODES] [SUBDIVISIONS]
"""
from __future__ import annotations

import sys
import time

import numpy as np
import trimesh

from impactsound.fem.model import ModalModel
from impactsound.materials import get_material
from impactsound.parallel import local_cores, map_tasks
from impactsound.transfer import bem
from impactsound.transfer.precompute import TransferSettings, run_transfer


def sphere_model(n_modes: int, subdivisions: int, a: float = 0.05) -> ModalModel:
    s = trimesh.creation.icosphere(subdivisions=subdivisions, radius=a)
    y = np.asarray(s.vertices)
    n = y / a
    x, yy, z = n.T
    fields = [n, np.tile([1.0, 0, 0], (len(y), 1)), np.tile([0, 1.0, 0], (len(y), 1)),
              np.tile([0, 0, 1.0], (len(y), 1)),
              n * (3 * z**2 - 1)[:, None], n * (x * yy)[:, None], n * (x * z)[:, None], n * (x**2 - yy**2)[:, None]]
    shapes = np.stack([fields[i % len(fields)] for i in range(n_modes)])
    freqs = np.linspace(500.0, 3300.0, n_modes)                   # k a up to ~3 (c = 343 m/s, a = 5 cm)
    return ModalModel(material=get_material("steel"), order=1, frequencies_hz=freqs, surface_nodes=y,
                      surface_faces=np.asarray(s.faces), shapes=shapes, xi=np.full(n_modes, 1e-3), mass=1.0,
                      com=np.zeros(3), inertia=np.eye(3) * 1e-3, volume=float(s.volume),
                      inputs_hash=f"bench-sphere-{subdivisions}-{n_modes}")


def _warm(_):
    """Runs on each worker before timing: imports bempp-cl and compiles its kernels."""
    t = time.perf_counter()
    bem.warm_up()
    return time.perf_counter() - t


def main():
    n_modes = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    subdiv = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    from distributed import LocalCluster
    model = sphere_model(n_modes, subdiv)
    settings = TransferSettings(terms=4)
    print(f"model: {len(model.surface_faces)} triangles, {n_modes} modes, f {model.frequencies_hz[0]:.0f}.."
          f"{model.frequencies_hz[-1]:.0f} Hz; {local_cores()} cores on this machine")
    print(f"bempp-cl JIT in this process: {_warm(None):.1f} s")
    t = time.perf_counter()
    ref = run_transfer(model, settings, workers=1)
    t_serial = time.perf_counter() - t
    print(f"{'in this process (serial modes)':34s} {t_serial:7.2f} s   ({t_serial / n_modes:.2f} s per mode)")
    rows = []
    for n in (1, 2):
        # each worker gets cores / workers compute threads (README "Distributed precompute")
        env = {"IMPACTSOUND_THREADS": str(max(1, local_cores() // n))}
        with LocalCluster(n_workers=n, processes=True, threads_per_worker=1, dashboard_address=None,
                          env=env) as cluster:
            t = time.perf_counter()
            jit = map_tasks(_warm, range(n), scheduler=cluster.scheduler_address)
            t_jit = time.perf_counter() - t
            t = time.perf_counter()
            a = run_transfer(model, settings, scheduler=cluster.scheduler_address)
            dt = time.perf_counter() - t
        same = all(np.array_equal(a.arrays[k], ref.arrays[k]) for k in ("psi", "bem_p", "bem_g"))
        rows.append((n, dt, same))
        print(f"{f'Dask LocalCluster, {n} worker(s)':34s} {dt:7.2f} s   vs 1 worker x{rows[0][1] / dt:4.2f}   "
              f"vs in-process x{t_serial / dt:4.2f}   bit-identical: {same}   "
              f"(warm-up {t_jit:.1f} s, JIT per worker {', '.join(f'{x:.0f}' for x in jit)} s)")


if __name__ == "__main__":
    main()
