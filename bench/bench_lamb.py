"""Benchmark: the compiled regularized Lamb response (sources/ground/lamb.py, regularized_response) vs the NumPy
partition algorithm it replaced (_regularized_response_reference), side by side on the same points.

20000 random points per Poisson ratio: tau uniform in [-1, 5], eps log-uniform in [1e-3, 2], each derivative
order n = 0..3. Prints microseconds per evaluation of both, their ratio and the largest difference relative to
max(1, |value|); the cost of one scalar call; and the first call in a fresh process, with the Numba cache on disk
(cache load) and with an empty cache directory (compilation). Goal: >= 10x the reference.

    .venv/bin/python bench/bench_lamb.py [--points 20000] [--nu 0.25 0.3] [--repeat 3] [--no-cold]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

from impactsound.sources.ground.lamb import _regularized_response_reference, regularized_response

FIRST_CALL = ("import time; t = time.perf_counter(); "
              "from impactsound.sources.ground.lamb import regularized_response as f; i = time.perf_counter(); "
              "f(0.7, 0.01, 0.3, 3); print(i - t, time.perf_counter() - i)")


def best_of(fn, repeat):
    """Shortest of ``repeat`` runs of fn() [s]."""
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def first_call(cache_dir=None):
    """(import s, first call s) in a fresh interpreter; cache_dir: NUMBA_CACHE_DIR (an empty one forces a compile)."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=True)
    imp, call = (float(v) for v in out.stdout.split())
    return imp, call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=20000)
    ap.add_argument("--nu", type=float, nargs="+", default=[0.25, 0.3])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true", help="skip the compile-from-scratch measurement")
    a = ap.parse_args()
    regularized_response(0.7, 0.01, 0.3, 3)                   # JIT / cache load outside the timings
    rng = np.random.default_rng(0)
    N = a.points
    tau = rng.uniform(-1.0, 5.0, N)
    eps = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), N))
    print(f"regularized Lamb response: {N} points, tau in [-1, 5], eps log-uniform in [1e-3, 2]")
    print(f"  {'nu':>5} {'n':>2} {'reference us/pt':>16} {'kernel us/pt':>13} {'ratio':>8} {'max rel diff':>13}")
    tot_ref = tot_new = 0.0
    for nu in a.nu:
        for n in range(4):
            t0 = time.perf_counter()
            ref = _regularized_response_reference(tau, eps, nu, n)
            tr = time.perf_counter() - t0
            new = regularized_response(tau, eps, nu, n)
            tk = best_of(lambda: regularized_response(tau, eps, nu, n), a.repeat)
            err = np.max(np.abs(new - ref) / np.maximum(1.0, np.abs(ref)))
            tot_ref += tr
            tot_new += tk
            print(f"  {nu:5.2f} {n:2d} {tr / N * 1e6:16.2f} {tk / N * 1e6:13.3f} {tr / tk:7.1f}x {err:13.2e}")
    print(f"  all: reference {tot_ref / (N * 4 * len(a.nu)) * 1e6:.2f} us/pt, kernel "
          f"{tot_new / (N * 4 * len(a.nu)) * 1e6:.3f} us/pt, ratio {tot_ref / tot_new:.1f}x")
    k = 2000
    ts = best_of(lambda: [regularized_response(0.7, 0.01, 0.3, 3) for _ in range(k)], a.repeat)
    tr1 = best_of(lambda: [_regularized_response_reference(0.7, 0.01, 0.3, 3) for _ in range(k // 10)], 1)
    print(f"  scalar call: kernel {ts / k * 1e6:.1f} us, reference {tr1 / (k // 10) * 1e6:.1f} us")
    imp, call = first_call()
    print(f"  fresh process, Numba cache on disk: import {imp:.2f} s, first call {call:.2f} s")
    if not a.no_cold:
        with tempfile.TemporaryDirectory() as d:
            imp, call = first_call(d)
        print(f"  fresh process, empty Numba cache (compiles): import {imp:.2f} s, first call {call:.2f} s")


if __name__ == "__main__":
    main()
