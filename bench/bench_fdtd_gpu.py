"""Benchmark: the FDTD step on a CUDA GPU against the CPU kernel (goal: >= 3e10 cell updates/s at 256^3 and above
on an H100/H200-class GPU), as a fraction of the GPU's memory-bandwidth bound measured in the same run.

Bandwidth: a device-to-device copy of a 1 GiB array (reads and writes each byte once: 2 bytes moved per byte
copied), best of five. One leapfrog step moves at least 32 bytes per cell in fp32 (p, vx, vy, vz read and written
once; the GPU step reads them about twice), so the bound is bandwidth / 32 B per cell update. Both backends solve
the same grid (a point source, the CPML, no body) for STEPS steps after one warm-up run; the receivers of the two
are compared. Without a usable GPU it says why and stops.

    .venv/bin/python bench/bench_fdtd_gpu.py [N=256] [STEPS=100]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from impactsound.wave.fdtd import FDTDSolver, Grid
from impactsound.wave.fdtd_cuda import fdtd_gpu_problem


def bandwidth() -> float:
    from numba import cuda
    a = cuda.device_array(1 << 28, np.float32)
    b = cuda.device_array(1 << 28, np.float32)
    best = np.inf
    for _ in range(5):
        cuda.synchronize()
        t = time.perf_counter()
        b.copy_to_device(a)
        cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def run(n: int, steps: int, backend: str):
    g = Grid((n, n, n), 0.005, np.full(3, -n * 0.0025), 8)
    s = FDTDSolver(g, backend=backend)
    s.set_receivers(np.array([[0.01, 0.02, -0.03], [0.0, 0.0, 0.05]]))
    rates = (np.sin(np.arange(steps) * 0.2) * 1e-6)[:, None]
    src = np.array([[n // 2, n // 2, n // 2]])
    s.run(2, source_cells=src, source_rates=rates[:2])               # compile, upload
    t = time.perf_counter()
    rec = s.run(steps, source_cells=src, source_rates=rates)
    return time.perf_counter() - t, rec


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    why = fdtd_gpu_problem()
    if why is not None:
        print(f"no GPU FDTD here: {why}")
        return
    bw = bandwidth()
    cells = n ** 3 * steps
    t_gpu, r_gpu = run(n, steps, "cuda")
    t_cpu, r_cpu = run(n, min(steps, 20), "numba")
    cpu_rate = n ** 3 * min(steps, 20) / t_cpu
    err = np.abs(r_gpu[:, :r_cpu.shape[1]] - r_cpu).max() / max(np.abs(r_cpu).max(), 1e-300)
    bound = bw / 32
    print(f"grid {n}^3, {steps} steps: GPU {cells / t_gpu:.3g} cell updates/s ({cells / t_gpu / bound:.0%} of the "
          f"bandwidth bound {bound:.3g}/s at {bw / 1e9:.0f} GB/s), CPU {cpu_rate:.3g}/s: {cells / t_gpu / cpu_rate:.1f}x; "
          f"receivers differ by {err:.2g} of their peak")


if __name__ == "__main__":
    main()
