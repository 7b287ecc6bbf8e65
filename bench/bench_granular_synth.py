"""Benchmark: grain noise (M. Marko, "Sound simulation of granular materials", ch. 4, 5.3) rendered from tabulated
band-limited pulses (sources/granular/synth.py, grain_noise) vs the per-collision reference (grain_noise_reference:
the exact closed form on a fine grid, low-passed and decimated with scipy.signal.upfirdn), side by side in one run.

N grain-grain collisions (default 1,000,000) of glass spheres (a = 1 mm, the thesis' Table 6.1 glass: rho 2520,
E 72 GPa, nu 0.22), contact points uniform in a 4 cm cube around the origin, random unit normals, v0 log-uniform
in [1e-4, 1] m/s, times uniform over S seconds (default 10); listeners at (0, 0, 0.15) m and (0.2, 0.1, 0.25) m;
48 kHz output; air 1.2041 kg/m^3, 343.2 m/s. Prints:

1. the table build: a cold render (empty table cache) minus a warm one, and the number and size of the nodes;
2. rendering all N collisions, for 1 and 2 listeners, on --threads threads and on 1 (best of --repeat, with
   every run listed): time and collisions/s (goal >= 1e6/s on 2 cores);
3. the reference on the first --subset collisions (same listeners): time per collision, extrapolated to N, and
   the ratio to the fast render (goal >= 20x);
4. the relative L2 error of the fast render of that subset against the reference (goal <= 1 %);
5. peak memory: tracemalloc's peak of one render (untimed) and the process's peak RSS.

    .venv/bin/python bench/bench_granular_synth.py [--collisions 1000000] [--seconds 10] [--subset 200]
                                                   [--threads 2] [--repeat 3] [--seed 0]
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from impactsound.sources.granular.events import GranularEvents
from impactsound.sources.granular.synth import grain_noise, grain_noise_reference, pulse_table

FS = 48000
GLASS = {"glass": (72e9, 0.22, 2520.0)}             # (E, nu, rho), the thesis' Table 6.1 glass
LISTENERS = np.array([[0.0, 0.0, 0.15], [0.2, 0.1, 0.25]])
RADIUS = 1e-3


def make_events(n, seconds, seed):
    """n glass-glass collisions as described in the module docstring."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, seconds, n))
    nrm = rng.normal(size=(n, 3))
    nrm /= np.linalg.norm(nrm, axis=1)[:, None]
    v0 = np.exp(rng.uniform(np.log(1e-4), 0.0, n))
    return GranularEvents.from_arrays(t=t, point=rng.uniform(-0.02, 0.02, (n, 3)), normal=nrm, v0=v0, kind=0,
                                      id_a=np.arange(n), id_b=np.arange(n) + n, radius_a=RADIUS, radius_b=RADIUS,
                                      material_a=0, material_b=0, materials=["glass"], duration=seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--collisions", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--subset", type=int, default=200, help="collisions rendered by the reference")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    n = a.collisions
    ns = int(round((a.seconds + 0.01) * FS))
    ev = make_events(n, a.seconds, a.seed)
    print(f"grain noise: {n} glass collisions (a = 1 mm, v0 log-uniform 1e-4..1 m/s) over {a.seconds:g} s, "
          f"{FS} Hz, listeners at {LISTENERS[0].tolist()} and {LISTENERS[1].tolist()} m")

    # Numba kernels (disk cache) loaded outside the timings
    t0 = time.perf_counter()
    grain_noise(ev.take(np.arange(10)), LISTENERS[:1], FS, ns, materials=GLASS, n_threads=1)
    t_load = time.perf_counter() - t0

    # 1. tables: cold render minus warm render (1 listener)
    pulse_table.cache_clear()
    t0 = time.perf_counter()
    grain_noise(ev, LISTENERS[:1], FS, ns, materials=GLASS, n_threads=a.threads)
    t_cold = time.perf_counter() - t0
    info = pulse_table.cache_info()
    n_nodes = info.currsize

    # 2. renders
    rows = []
    for L in (1, 2):
        for nt in sorted({a.threads, 1}, reverse=True):
            times, cpu = [], []
            for _ in range(a.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                y = grain_noise(ev, LISTENERS[:L], FS, ns, materials=GLASS, n_threads=nt)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            k = int(np.argmin(times))
            rows.append((L, nt, times[k], times, cpu[k] / times[k]))
    t_warm = min(r[2] for r in rows if r[0] == 1 and r[1] == a.threads)
    t_build = max(t_cold - t_warm, 0.0)

    # 3./4. the reference on a subset; the fast render of the same subset
    sub = ev.take(np.arange(min(a.subset, n)))
    ns_sub = int(np.ceil((sub.t.max() + 0.01) * FS))
    grain_noise_reference(sub.take(np.arange(2)), LISTENERS[:1], FS, ns_sub, materials=GLASS)   # filter cache
    ref_rows = []
    for L in (1, 2):
        t0 = time.perf_counter()
        ref = grain_noise_reference(sub, LISTENERS[:L], FS, ns_sub, materials=GLASS)
        t_ref = time.perf_counter() - t0
        fast = grain_noise(sub, LISTENERS[:L], FS, ns_sub, materials=GLASS, n_threads=a.threads)
        err = np.linalg.norm(fast - ref) / np.linalg.norm(ref)
        ref_rows.append((L, t_ref / len(sub), err))

    # 5. memory (untimed)
    tracemalloc.start()
    grain_noise(ev, LISTENERS[:2], FS, ns, materials=GLASS, n_threads=a.threads)
    trace_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    node_kb = pulse_table(RADIUS, 2e-5, float(FS)).values.nbytes / 1e3     # one node (d = 20 us)

    print(f"  Numba kernels loaded (cache): {t_load:.2f} s (not counted below)")
    print(f"  tables: {n_nodes} nodes (radius 1 mm x duration nodes), built in {t_build:.2f} s "
          f"({t_build / max(n_nodes, 1) * 1e3:.1f} ms/node, ~{node_kb:.0f} kB each; cold render {t_cold:.2f} s - "
          f"warm {t_warm:.2f} s)")
    print(f"  {'render':34s} {'time':>9s} {'collisions/s':>13s} {'cpu/wall':>9s}   runs")
    for L, nt, best, times, load in rows:
        print(f"  {f'{L} listener(s), {nt} thread(s)':34s} {best:7.3f} s {n / best:13.3g} {load:9.2f}   "
              + ", ".join(f"{v:.3f}" for v in times))
    print(f"    (best of {a.repeat}; cpu/wall: process CPU time over wall time of the best run, ~2 when both cores "
          f"worked for it; 1-min load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
    goal_rate = goal_ratio = goal_err = True
    for L, per_ref, err in ref_rows:
        best = min(r[2] for r in rows if r[0] == L and r[1] == a.threads)
        per_fast = best / n
        ratio = per_ref / per_fast
        goal_rate &= n / best >= 1e6 or L > 1
        goal_ratio &= ratio >= 20
        goal_err &= err <= 0.01
        print(f"  reference, {L} listener(s): {per_ref * 1e3:.2f} ms/collision ({len(sub)} collisions), "
              f"{per_ref * n:.0f} s for all {n} (extrapolated): {ratio:.0f}x the fast render; error of the fast "
              f"render vs reference: {err:.2e} (relative L2)")
    print(f"  peak memory: render (2 listeners) traced {trace_peak:.0f} MiB (output {y.nbytes / 2**20:.1f} MiB), "
          f"process RSS {rss:.0f} MiB")
    best1 = min(r[2] for r in rows if r[0] == 1 and r[1] == a.threads)
    print(f"  goals: >= 1e6 collisions/s (1 listener, {a.threads} threads): {'met' if goal_rate else 'MISSED'} "
          f"({n / best1:.3g}/s); >= 20x reference: {'met' if goal_ratio else 'MISSED'}; error <= 1 %: "
          f"{'met' if goal_err else 'MISSED'}")


if __name__ == "__main__":
    main()
