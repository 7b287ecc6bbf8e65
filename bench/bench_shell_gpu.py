"""Reduced nonlinear-shell steps on a CUDA GPU (sources/shell/gpu.py) against the compiled CPU kernel, side by side
in one run, on the trash can of bench_shell_step.py (200 modes, 800 cubature elements, synthetic basis).

Chadwick, An & James 2009, sec. 2.3 (the paper: 16.1 ms per step for its trash can). Timed: one free Newmark step
(force + update) of B shells at once on the GPU, for B = 1 .. 1024 (per step and per shell-step; the GPU runs each
step as two cuBLAS products and three kernels, so a single shell pays launch latency, and many shells share it),
against the CPU kernel (CompiledCubature.newmark, float32-stored rows as scenes use, on this process's Numba
threads: pin them with taskset and NUMBA_NUM_THREADS). Checked in the same run: the GPU force and 200 steps equal
the CPU kernel's to round-off, per shell. Prints the GPU memory the buffers take and the peak RSS.

    python bench/bench_shell_gpu.py [--modes 200] [--elements 800] [--steps 200] [--batches 1,16,128,1024]
"""
from __future__ import annotations

import argparse
import resource
import time

import numba
import numpy as np

from bench_shell_step import H, build_case

from impactsound.sources.shell import gpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--elements", type=int, default=800)
    ap.add_argument("--resolution", type=int, default=96)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="1,16,128,1024")
    a = ap.parse_args()
    why = gpu.cuda_problem()
    if why is not None:
        raise SystemExit(f"no GPU path here: {why}")
    if gpu.simulated():                                       # NUMBA_ENABLE_CUDASIM=1: a dry run of this script
        name, sync, pool = "none (Numba's CUDA simulator)", lambda: None, lambda: 0
    else:
        import cupy as cp
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        sync, pool = cp.cuda.Device().synchronize, cp.get_default_memory_pool().used_bytes

    model, rs, cub, rng, t_setup = build_case(a.modes, a.elements, a.resolution)
    print(f"trash can: {model.n_vertices} vertices, {len(model.faces)} triangles, h = {H * 1e3:g} mm, r = {rs.r}, "
          f"k = {a.elements}; setup {t_setup:.1f} s; GPU {name}; "
          f"CPU kernel on {numba.get_num_threads()} Numba thread(s)")
    cc = rs.compiled_cubature(cub, precision="float32")
    t0 = time.perf_counter()
    g = gpu.GpuCubature(cc)
    g1 = gpu.GpuCubature(cc, graphs=False)
    print(f"upload + kernel set-up: {time.perf_counter() - t0:.2f} s")
    dt = 0.5 / rs.omega.max()
    d = np.full(rs.r, 1.0)
    Bmax = max(int(b) for b in a.batches.split(","))
    Q = rng.standard_normal((Bmax, rs.r))
    Q *= H / np.abs(Q @ rs.U.T).max(axis=1)[:, None]          # vertex displacements ~ h: nonlinear
    V = np.zeros_like(Q)

    # agreement, per shell (4 shells): force, and the state after `steps` steps
    t0 = time.perf_counter()
    F = g.force(Q[:4])
    print(f"first GPU force (compiles the kernels): {time.perf_counter() - t0:.1f} s")
    rel_f = max(np.abs(F[i] - cc.force(Q[i])).max() / np.abs(cc.force(Q[i])).max() for i in range(4))
    Qg, Vg = g.newmark(Q[:4], V[:4], dt, a.steps, d=d)
    rel_q = 0.0
    for i in range(4):
        q, v = cc.newmark(Q[i], V[i], dt, a.steps, d=d)
        rel_q = max(rel_q, np.abs(Qg[i] - q).max() / np.abs(q).max(), np.abs(Vg[i] - v).max() / np.abs(v).max())
    print(f"GPU vs CPU kernel: force max rel diff {rel_f:.2e}; after {a.steps} steps q, v max rel diff {rel_q:.2e}")

    # CPU kernel, one shell
    cc.newmark(Q[0], V[0], dt, 2, d=d)
    t_cpu = np.inf
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        cc.newmark(Q[0], V[0], dt, a.steps, d=d)
        t_cpu = min(t_cpu, (time.perf_counter() - t0) / a.steps)
    print(f"CPU kernel: {t_cpu * 1e3:.3f} ms per step (one shell), {16.1e-3 / t_cpu:.1f}x the paper's 16.1 ms")

    print(f"{'shells B':>9s} {'launches, products':>22s} {'ms/step':>9s} {'us/shell-step':>14s} {'vs CPU kernel':>14s} "
          f"{'vs paper':>9s} {'GPU buffers':>12s}")
    for B in (int(b) for b in a.batches.split(",")):
        for gg in (g1, g):
            gg.newmark(Q[:B], V[:B], dt, gg.GRAPH_STEPS + 2, d=d)   # buffers for B, graph recorded, warm
            how = ("graph" if gg._graphs else "one by one") + (", ours" if gg._small else ", cuBLAS")
            sync()
            t = np.inf
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                gg.newmark(Q[:B], V[:B], dt, a.steps, d=d)     # returns to the host: synchronised
                t = min(t, (time.perf_counter() - t0) / a.steps)
            mib = sum(x.nbytes for x in (gg._Xg, gg._Fb, gg._Fu, gg._Q, gg._V, gg._F, gg._Acc)) / 2**20
            print(f"{B:9d} {how:>22s} {t * 1e3:9.4f} {t / B * 1e6:14.3f} {t_cpu * B / t:13.1f}x "
                  f"{16.1e-3 * B / t:8.0f}x {mib:9.1f} MiB")
        g1._buffers(1)                                         # free the one-by-one instance's wide buffers
    print(f"graph recording (up to {g.SMALL_B} shells): "
          f"{'used' if g.graph_problem is None else 'failed: ' + g.graph_problem}")
    basis = (g.Ue.nbytes + g.UeT.nbytes) / 2**20
    print(f"GPU basis copies {basis:.1f} MiB; cupy pool {pool() / 2**20:.0f} MiB; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
