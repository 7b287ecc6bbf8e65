"""PAN precompute of the paper's Table 1 ball bearing (issue 3, goal: under 30 s on 2 cores; the paper took 6 min
55 s on 8 cores): a 7.5 mm radius sphere of the Table 1 material (E 123.4 GPa, nu 0.34, rho 8940 kg/m^3: our
"copper"), 1 ms simulated, all six fields, through the public API (plan_pan + run_pan), 5 x 10 directions.

Reports the plan (grid, cells, steps, cell-updates), the wall time of the whole precompute and its two parts (the
six FDTD fields with voxelization, run_fields; the PAN fit, fit_pan_field: both timed by wrapping the names
run_pan calls), one field alone, the throughput, and peak memory: ru_maxrss of the process and the tracemalloc
peak of the precompute (NumPy arrays report their buffers to tracemalloc). JIT compilation is done (and timed)
first on a tiny job, so the figures are the precompute alone. The fit is a banded solve (~0.1-0.2 s); the
FDTD fields are the whole cost, and on a shared machine they slow down with other jobs.

Run: .venv/bin/python bench/bench_pan_precompute.py [DURATION_S] [SUBDIVISIONS]
"""
from __future__ import annotations

import resource
import sys
import time
import tracemalloc

import numpy as np
import trimesh

from impactsound.materials import get_material
from impactsound.sources.pan import precompute as pre
from impactsound.sources.pan.field import sample_points
from impactsound.sources.pan.precompute import MeshInside, plan_pan, run_pan
from impactsound.sources.pan.pulse import psi
from impactsound.wave import fdtd
from impactsound.sources.pan.solve import solve_field


def main():
    duration = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-3
    subdiv = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    ball = trimesh.creation.icosphere(subdivisions=subdiv, radius=0.0075)
    mat = get_material("copper")               # PAN Table 1's ball-bearing material
    t = time.perf_counter()
    run_pan(plan_pan(trimesh.creation.icosphere(subdivisions=1, radius=0.0075), mat, cells_per_wavelength=3.0))
    t_jit = time.perf_counter() - t
    job = plan_pan(ball, mat, duration=duration)
    e = job.estimate()
    pl = job.plan
    print(f"ball bearing r = 7.5 mm, {mat.name} (E {mat.E / 1e9:g} GPa, nu {mat.nu}, rho {mat.rho:g}); "
          f"h = {job.h * 1e6:.4f} us (Table 1: 7.3264 us); duration {duration * 1e3:g} ms; "
          f"{fdtd.default_threads()} threads, {fdtd.DEFAULT_BLOCK_STEPS} steps per pass")
    print(f"plan: grid {pl.shape[0]}^3 = {pl.n_cells / 1e6:.2f} M cells (PML {pl.npml} cells/side), "
          f"dx {pl.dx * 1e3:.3f} mm, dt {pl.dt * 1e9:.1f} ns, {pl.n_steps} steps x 6 fields = "
          f"{e['cell_updates'] / 1e9:.1f}e9 cell-updates; fields {e['memory_bytes'] / 2**20:.0f} MiB; "
          f"fit radii {job.radii[0] * 1e3:.1f}..{job.radii[-1] * 1e3:.1f} mm, {job.n_theta} x {job.n_phi} directions")
    print(f"JIT warm-up (tiny job, includes compiling or loading the kernel cache): {t_jit:.1f} s")

    # one field alone (the FDTD part of the precompute, field 2 = translation along z)
    pts = sample_points(job.R_b, job.n_theta, job.n_phi, len(job.radii)).reshape(-1, 3)
    t = time.perf_counter()
    solve_field(2, MeshInside(job.mesh), pl, pts, lambda tt: psi(tt - 2 * job.h, job.h), job.c, job.rho,
                dtype=np.dtype(job.dtype))
    t_field = time.perf_counter() - t
    print(f"one field: {t_field:.2f} s = {pl.n_cells * pl.n_steps / t_field / 1e9:.2f}e9 cell-updates/s")

    parts = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - t0
        return wrapper

    orig = pre.run_fields, pre.fit_pan_field
    pre.run_fields, pre.fit_pan_field = timed("fields", orig[0]), timed("fit", orig[1])
    tracemalloc.start()
    t = time.perf_counter()
    try:
        fld = run_pan(job)
    finally:
        pre.run_fields, pre.fit_pan_field = orig
    wall = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert np.isfinite(fld.q).all()
    print(f"precompute (plan_pan + run_pan, six fields and the fit): {wall:.1f} s wall "
          f"({'under' if wall < 30 else 'OVER'} the 30 s goal; paper: 415 s on 8 cores) = "
          f"{e['cell_updates'] / wall / 1e9:.2f}e9 cell-updates/s overall")
    print(f"  six FDTD fields (run_fields): {parts.get('fields', 0):.1f} s = "
          f"{e['cell_updates'] / parts.get('fields', 1) / 1e9:.2f}e9 cell-updates/s; PAN fit (fit_pan_field): "
          f"{parts.get('fit', 0):.1f} s")
    print(f"peak memory: ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (process), "
          f"tracemalloc peak {peak / 2**20:.0f} MiB (during run_pan)")


if __name__ == "__main__":
    main()
