"""FDTD solver throughput (issue 3): cell-updates per second at 256^3, fp32, next to the memory-bandwidth bound
measured in the same run with a STREAM-triad-like kernel, and what the PML and body faces cost on top.

A fused step moves at least 32 bytes per cell in fp32 (p, vx, vy, vz each read and written once), so the bound is
triad bandwidth / 32 B. Run: .venv/bin/python bench/bench_fdtd.py [N] [STEPS]
"""
from __future__ import annotations

import resource
import sys
import time

import numba as nb
import numpy as np

from impactsound.wave import fdtd


@nb.njit(cache=True, nogil=True)
def _triad(a, b, c, s, i0, i1):
    for i in range(i0, i1):
        a[i] = b[i] + s * c[i]


def triad_bandwidth(n_bytes=1 << 29, threads=None, reps=5) -> float:
    """Bytes/s of a[i] = b[i] + s c[i] (counting 3 arrays x 4 bytes per element, as STREAM does) on the same
    thread pool the solver uses."""
    threads = threads or fdtd.default_threads()
    n = n_bytes // 12
    a, b, c = np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32)
    parts = fdtd._split(n, threads)
    calls = [(_triad, (a, b, c, np.float32(0.5), i0, i1)) for i0, i1 in parts]
    fdtd._run(calls, threads)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        fdtd._run(calls, threads)
        best = min(best, time.perf_counter() - t)
    return 12 * n / best


def time_steps(solver, steps, **kw) -> float:
    solver.step(**kw)  # warm-up (JIT)
    t = time.perf_counter()
    for _ in range(steps):
        solver.step(**kw)
    return (time.perf_counter() - t) / steps


def main():
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    th = fdtd.default_threads()
    bw = triad_bandwidth(threads=th)
    print(f"threads: {th}; triad bandwidth {bw / 1e9:.1f} GB/s -> bound {bw / 32 / 1e9:.2f}e9 cell-updates/s "
          "(32 B/cell fp32)")
    cells = N**3
    # interior only: no PML, no body
    g0 = fdtd.Grid((N, N, N), 1e-3, npml=0)
    s0 = fdtd.FDTDSolver(g0, dtype=np.float32, threads=th)
    s0.p[N // 2, N // 2, N // 2] = 1.0
    t_int = time_steps(s0, steps)
    print(f"interior fused step {N}^3 fp32: {t_int * 1e3:.1f} ms/step = {cells / t_int / 1e9:.2f}e9 cell-updates/s "
          f"({cells / t_int / (bw / 32):.0%} of the bandwidth bound)")
    s0_1 = fdtd.FDTDSolver(g0, dtype=np.float32, threads=1)
    t_1 = time_steps(s0_1, max(3, steps // 4))
    print(f"  1 thread: {cells / t_1 / 1e9:.2f}e9 cell-updates/s (2-thread speed-up {t_1 / t_int:.2f}x)")
    del s0, s0_1
    # NumPy reference of the same update (plain vectorised slicing), a few steps
    p = np.zeros((N + 2,) * 3, np.float32)
    vx, vy, vz = (np.zeros_like(p) for _ in range(3))
    cv, cp = np.float32(0.1), np.float32(0.1)
    t = time.perf_counter()
    for _ in range(2):
        vx[1:-1, 1:-1, 1:-1] -= cv * (p[2:, 1:-1, 1:-1] - p[1:-1, 1:-1, 1:-1])
        vy[1:-1, 1:-1, 1:-1] -= cv * (p[1:-1, 2:, 1:-1] - p[1:-1, 1:-1, 1:-1])
        vz[1:-1, 1:-1, 1:-1] -= cv * (p[1:-1, 1:-1, 2:] - p[1:-1, 1:-1, 1:-1])
        p[1:-1, 1:-1, 1:-1] -= cp * ((vx[1:-1, 1:-1, 1:-1] - vx[:-2, 1:-1, 1:-1])
                                     + (vy[1:-1, 1:-1, 1:-1] - vy[1:-1, :-2, 1:-1])
                                     + (vz[1:-1, 1:-1, 1:-1] - vz[1:-1, 1:-1, :-2]))
    t_np = (time.perf_counter() - t) / 2
    del p, vx, vy, vz
    print(f"NumPy slicing reference: {cells / t_np / 1e9:.3f}e9 cell-updates/s; fused kernel is {t_np / t_int:.1f}x")
    # with a 12-cell PML on every side and a voxelized sphere (body faces)
    g1 = fdtd.Grid((N, N, N), 1e-3, npml=12)
    g1.origin = -0.5 * N * 1e-3 * np.ones(3)
    s1 = fdtd.FDTDSolver(g1, dtype=np.float32, threads=th)
    t_pml = time_steps(s1, steps)
    body = fdtd.voxelize(g1, lambda P: np.linalg.norm(P, axis=1) < 0.25 * N * 1e-3)
    s1.set_body(body)
    inc = np.full(len(body.faces), 1e-6)
    t_body = time_steps(s1, steps, body_velocity_increment=inc)
    print(f"with PML (12 cells/side, {1 - ((N - 24) / N) ** 3:.0%} of cells): {t_pml * 1e3:.1f} ms/step "
          f"(+{(t_pml / t_int - 1):.0%}); + sphere body ({len(body.faces)} faces, {len(body.solid)} solid cells): "
          f"{t_body * 1e3:.1f} ms/step (+{(t_body / t_pml - 1):.0%})")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
          f"(fields {s1.grid.memory_bytes() / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
