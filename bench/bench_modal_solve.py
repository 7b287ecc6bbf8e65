"""Eigen-solve speed: plain scipy eigsh vs impactsound.fem.eigen.solve_modes, side by side in one run.

Builds a ~10 k-node P1 tet mesh of a 200 x 100 x 20 mm steel plate (~31 k dofs), asks for 60 elastic modes
(66 with the 6 rigid ones) from both, and prints wall times, their ratio, the largest relative frequency
difference and peak memory.

    .venv/bin/python bench/bench_modal_solve.py [--max-edge 0.0049] [--modes 60] [--repeat 1] [--order 1]

Timed runs are not traced (tracemalloc slows Python-heavy code by 10-20 %, unevenly between the two); memory is
measured once afterwards, untimed: tracemalloc's peak of Python-side arrays (misses SuperLU's factor, which
lives in C) and, per solver in a fresh child process, the peak resident-set growth during the solve (Linux:
VmHWM reset through /proc/self/clear_refs), which counts everything.
On a shared machine compare the two within one repeat and take the best of several; OPENBLAS_NUM_THREADS=1
puts eigsh on the same single BLAS thread that solve_modes uses internally (see eigen._single_threaded_blas).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse.linalg as spla
import trimesh

from impactsound.fem.assembly import assemble
from impactsound.fem.eigen import solve_modes
from impactsound.mesh.tetra import tetrahedralize

E, NU, RHO = 200e9, 0.30, 7850.0


def build(max_edge: float, order: int):
    box = trimesh.creation.box(extents=(0.2, 0.1, 0.02))
    nodes, tets = tetrahedralize(box, max_edge=max_edge)
    lam = E * NU / ((1 + NU) * (1 - 2 * NU))
    mu = E / (2 * (1 + NU))
    K, M, xn, _ = assemble(nodes, tets, lam, mu, RHO, order=order)
    return nodes, K, M, xn


def run_plain(K, M, modes):
    w, _ = spla.eigsh(K, k=modes + 6, M=M, sigma=(2 * np.pi * 20.0) ** 2, which="LM")
    return np.sort(np.sqrt(np.abs(w)) / (2 * np.pi))[6:]


def run_ours(K, M, modes, nodes, xn):
    return solve_modes(K, M, modes, scale=(E, RHO, float(np.linalg.norm(np.ptp(nodes, axis=0)))), coords=xn)


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def child(which: str, a) -> None:
    """Peak RSS growth of one solve, printed as JSON (run in a fresh process)."""
    nodes, K, M, xn = build(a.max_edge, a.order)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                      # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    run_plain(K, M, a.modes) if which == "plain" else run_ours(K, M, a.modes, nodes, xn)
    print(json.dumps(dict(peak_growth_mib=(_status_kib("VmHWM") - before) / 1024)))


def rss_growth(which: str, a) -> str:
    cmd = [sys.executable, __file__, "--child", which, "--max-edge", str(a.max_edge), "--modes", str(a.modes),
           "--order", str(a.order)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        return f"{json.loads(out)['peak_growth_mib']:7.1f} MiB"
    except (subprocess.CalledProcessError, KeyError, ValueError, IndexError, OSError):
        return "    n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-edge", type=float, default=0.0049)
    ap.add_argument("--modes", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--order", type=int, default=1, help="FEM order (the issue's figures are P1)")
    ap.add_argument("--no-memory", action="store_true", help="skip the (untimed) memory measurements")
    ap.add_argument("--child", choices=["plain", "ours"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a)
        return
    nodes, K, M, xn = build(a.max_edge, a.order)
    print(f"mesh: {len(nodes)} vertices, P{a.order}, {K.shape[0]} dofs, {a.modes} elastic modes")
    best = [np.inf, np.inf]
    for rep in range(a.repeat):
        t0 = time.perf_counter()
        f_plain = run_plain(K, M, a.modes)
        t_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = run_ours(K, M, a.modes, nodes, xn)
        t_ours = time.perf_counter() - t0
        best = [min(best[0], t_plain), min(best[1], t_ours)]
        diff = np.max(np.abs(r.frequencies_hz - f_plain) / f_plain)
        print(f"[{rep}] plain eigsh      : {t_plain:7.2f} s")
        print(f"[{rep}] solve_modes      : {t_ours:7.2f} s   ({r.info.get('solves')} solves, {r.info.get('steps')} "
              f"steps, {r.info.get('restarts')} restarts, factor {r.info.get('factor')})")
        print(f"[{rep}] speed-up         : {t_plain / t_ours:7.2f} x   max |df|/f = {diff:.2e}"
              f"   f1..f3 = {np.round(r.frequencies_hz[:3], 2).tolist()} Hz   max residual {r.residuals.max():.1e}")
    if a.repeat > 1:
        print(f"best of {a.repeat}: eigsh {best[0]:.2f} s, solve_modes {best[1]:.2f} s -> {best[0] / best[1]:.2f} x")
    if not a.no_memory:
        peaks = []
        for fn in (lambda: run_plain(K, M, a.modes), lambda: run_ours(K, M, a.modes, nodes, xn)):
            tracemalloc.start()
            fn()
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
        print(f"memory, plain eigsh: peak Python arrays {peaks[0]:7.1f} MiB   peak RSS growth {rss_growth('plain', a)}")
        print(f"memory, solve_modes: peak Python arrays {peaks[1]:7.1f} MiB   peak RSS growth {rss_growth('ours', a)}")
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
