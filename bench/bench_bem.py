"""BEM transfer and FFAT evaluation speed (issue 4).

1. Time per mode against element count and k L on this machine (all cores), with bempp-cl's one-off JIT
   compilation shown separately: a sphere surface (icosphere, radius 0.1 m) with a dipole-like 'mode'
   (u = z), through the same per-mode task the precompute runs (BEM solve, shell sampling, FFAT fit, held-out
   check). The paper: 109 min per mode for a 77,536-triangle trash can on a 2009 cluster.
2. FFAT evaluation: mode-evaluations per second of the packed bank (goal >= 1e7 on 2 cores; the paper
   0.151 ms per mode), next to a plain NumPy evaluation of the same maps measured in the same run.
3. Assembly split: Burton-Miller needs bempp's hypersingular operator; its cost next to the CHIEF solve.

Run: .venv/bin/python bench/bench_bem.py [--sizes 1280,5120] [--ka 1,5]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import trimesh

from impactsound.transfer import bem, ffat
from impactsound.transfer.precompute import TransferSettings, solve_mode


def icosphere_near(n_faces: int, radius: float):
    """A sphere surface with about n_faces triangles: an icosphere when n_faces is 20 * 4^s, else a UV sphere
    (about 4 n^2 triangles for count n x n: close to the 2,000 / 5,000 / 10,000 elements the issue asks for)."""
    s = np.log(n_faces / 20) / np.log(4)
    if abs(s - round(s)) < 1e-9:
        m = trimesh.creation.icosphere(subdivisions=max(int(round(s)), 1), radius=radius)
    else:
        n = int(round(np.sqrt(n_faces / 4)))
        m = trimesh.creation.uv_sphere(radius=radius, count=[n, n])
    return np.asarray(m.vertices), np.asarray(m.faces)


def per_mode(sizes, kas, a=0.1, c=343.2):
    t = time.perf_counter()
    bem.warm_up()
    print(f"bempp-cl JIT compilation (once per process): {time.perf_counter() - t:.1f} s")
    print(f"{'faces':>6s} {'kL':>6s} {'T':>5s} {'BEM [s]':>8s} {'total [s]':>9s} {'held-out err M=1..4':>28s}")
    for n in sizes:
        v, f = icosphere_near(n, a)
        for ka in kas:
            task = {"index": 0, "vertices": v, "faces": f, "u": np.tile([0.0, 0.0, 1.0], (len(v), 1)),
                    "omega": ka / a * c, "r_bar": a,
                    "settings": dict(TransferSettings(terms=4, max_faces=10**9).__dict__)}
            r = solve_mode(task)
            errs = " ".join(f"{100 * e:5.2f}%" for e in r["holdout_error"])
            print(f"{r['faces']:6d} {2 * ka:6.1f} {r['T']:5d} {r['seconds_bem']:8.2f} {r['seconds']:9.2f} "
                  f"{errs:>28s}", flush=True)


def numpy_eval(maps, x):
    """Straightforward NumPy FFAT evaluation (per mode: angles, bilinear weights, radial series)."""
    R = np.linalg.norm(x)
    th = np.arccos(x[2] / R)
    ph = np.arctan2(x[1], x[0]) % (2 * np.pi)
    out = np.empty(len(maps), np.complex128)
    for j, m in enumerate(maps):
        T = m.T
        u = th * (T - 1) / np.pi
        i0 = min(int(u), T - 2)
        fu = u - i0
        v = ph * T / np.pi
        j0 = int(v) % (2 * T)
        fv = v - int(v)
        j1 = (j0 + 1) % (2 * T)
        val = ((1 - fu) * ((1 - fv) * m.psi[:, i0, j0] + fv * m.psi[:, i0, j1])
               + fu * ((1 - fv) * m.psi[:, i0 + 1, j0] + fv * m.psi[:, i0 + 1, j1]))
        kr = m.k * R
        out[j] = ffat.h0(kr) * np.sum(val / kr ** np.arange(m.terms))
    return out


def evaluation(n_modes=200, n_listeners=2000, seed=0):
    rng = np.random.default_rng(seed)
    ks = np.linspace(5.0, 300.0, n_modes)
    maps = [ffat.FFATMap(k=k, psi=(rng.normal(size=(4, ffat.angular_resolution(k), 2 * ffat.angular_resolution(k)))
                                   + 0j)) for k in ks]
    bank = ffat.FFATBank.from_maps(maps)
    x = rng.normal(size=(n_listeners, 3))
    bank.evaluate(x[:2])                                           # compile
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        bank.evaluate(x)
        best = min(best, time.perf_counter() - t)
    rate = n_modes * n_listeners / best
    t = time.perf_counter()
    for i in range(20):
        numpy_eval(maps, x[i])
    rate_np = 20 * n_modes / (time.perf_counter() - t)
    print(f"FFAT evaluation, {n_modes} modes x {n_listeners} listener positions, 4 terms: {rate:.3g} "
          f"mode-evaluations/s ({1e3 / rate * 1e3:.4f} us per mode); NumPy per-mode loop {rate_np:.3g}/s -> "
          f"{rate / rate_np:.0f}x; bank {bank.psi.nbytes / 2**20:.1f} MiB")


def assembly_split(n=1280, ka=3.0, a=0.1, c=343.2):
    v, f = icosphere_near(n, a)
    k = ka / a
    g = np.ones(len(f), complex)
    for method in ("chief", "burton-miller"):
        bem.solve_neumann(v, f, k, g, method=method)              # compile this method's operators
        t = time.perf_counter()
        bem.solve_neumann(v, f, k, g, method=method)
        print(f"{len(f)} faces, ka = {ka:g}: {method} solve {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1280,5120")
    ap.add_argument("--ka", default="1,5")
    args = ap.parse_args()
    per_mode([int(s) for s in args.sizes.split(",")], [float(s) for s in args.ka.split(",")])
    evaluation()
    assembly_split()
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")
