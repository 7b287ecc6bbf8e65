"""Benchmark: the statistical collision generator (M. Marko, "Sound simulation of granular materials", ch. 5.5-5.6)
against a plain NumPy/Python per-block loop (the thesis' procedure written directly), side by side in one run.

A synthetic pour of N events (default 1,000,000) over 10 s: grain-grain collisions in a 6 x 6 x 10 cm column with a
rising rate, v0 log-normal (median 0.05 m/s), normals upward for fast collisions and isotropic for slow ones; and 10 %
container hits on a bowl (a sphere of radius 4 cm, lower cap) with 64 surface elements. Prints:

1. fit (window 0.05 s, cell 1 cm, bins 10 x 16 x 8 x 32): time, events/s, blocks and stored bins, the asset's size
   on disk against the raw table's (.npz);
2. generation from the model (Poisson counts, compiled per-window loop): time, events/s (goal >= 1e6/s), best of
   --repeat runs and their spread; and the reference per-block loop (NumPy draws per block, Python loop over blocks,
   final stable argsort): time, events/s, ratio;
3. peak memory: tracemalloc's peak of one generation (output included) and the process's peak RSS.

    .venv/bin/python bench/bench_granular_generator.py [--events 1000000] [--seconds 10] [--repeat 5] [--seed 0]
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import shlex
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from impactsound.sources.granular import generator as G
from impactsound.sources.granular.events import CONTAINER, GRAIN, GranularEvents, save_events


def synthetic_pour(n, seconds, seed):
    """The synthetic pour of the module docstring."""
    rng = np.random.default_rng(seed)
    nc = n // 10
    ng = n - nc
    t = seconds * np.sqrt(rng.uniform(0, 1, n))                     # rate rising linearly
    v = np.exp(rng.normal(math.log(0.05), 1.0, n))
    cz = np.where(v > 0.15, rng.uniform(0.75, 1.0, n), rng.uniform(-1, 1, n))
    az = rng.uniform(-np.pi, np.pi, n)
    s = np.sqrt(1 - cz ** 2)
    normal = np.column_stack([s * np.cos(az), s * np.sin(az), cz])
    p = np.empty((n, 3))
    p[:ng] = rng.uniform([-0.03, -0.03, 0.0], [0.03, 0.03, 0.10], (ng, 3))
    R = 0.04
    pol = rng.uniform(0.6 * np.pi, np.pi, nc)
    paz = rng.uniform(-np.pi, np.pi, nc)
    bowl = np.column_stack([np.sin(pol) * np.cos(paz), np.sin(pol) * np.sin(paz), np.cos(pol)])
    p[ng:] = R * bowl
    normal[ng:] = -bowl                                              # container into the grain
    kind = np.r_[np.full(ng, GRAIN), np.full(nc, CONTAINER)]
    elem = np.r_[np.full(ng, -1), (np.floor((paz + np.pi) / (2 * np.pi) * 8) * 8
                                   + np.floor((pol - 0.6 * np.pi) / (0.4 * np.pi) * 8)).astype(int)]
    return GranularEvents.from_arrays(t=t, point=p, normal=normal, v0=v, kind=kind, id_a=np.arange(n),
                                      id_b=np.where(kind == CONTAINER, 0, np.arange(n) + 1), element=elem,
                                      radius_a=1e-3, radius_b=np.where(kind == CONTAINER, 0.0, 1e-3),
                                      material_a=0, material_b=np.where(kind == CONTAINER, -1, 0),
                                      materials=("glass",), containers=("bowl",), origin="bench",
                                      duration=seconds)


def reference_generate(m: G.GranularModel, seed):
    """The thesis' loop written plainly: per (window, cell) block draw N ~ Poisson(count), per event a bin with
    probability proportional to its count (numpy choice), t, angles and log v0 uniform in the bin, x uniform in the
    cell (or a stored surface point); append; stable-sort everything by t at the end."""
    rng = np.random.default_rng(seed)
    starts, lens = m.window_starts(), m.window_lengths()
    bin_first = np.concatenate([[0], np.cumsum(m.block_nbins, dtype=np.int64)])
    pt_first = np.concatenate([[0], np.cumsum(m.block_npoints, dtype=np.int64)])
    le = np.log(m.v0_edges)
    na, nc, nv = m.azimuth_bins, m.polar_bins, m.v0_bins
    out = []
    for w in range(m.n_windows):
        for b in range(m.window_offset[w], m.window_offset[w + 1]):
            lo, hi = bin_first[b], bin_first[b + 1]
            cnt = m.bin_count[lo:hi].astype(np.float64)
            n = rng.poisson(cnt.sum())
            if n == 0:
                continue
            f = m.bin_index[lo:hi][rng.choice(hi - lo, n, p=cnt / cnt.sum())].astype(np.int64)
            iv, f = f % nv, f // nv
            ic, f = f % nc, f // nc
            ia, it = f % na, f // na
            t = starts[w] + (it + rng.random(n)) * lens[w] / m.t_bins
            az = -np.pi + (ia + rng.random(n)) * 2 * np.pi / na
            cz = -1 + (ic + rng.random(n)) * 2 / nc
            s = np.sqrt(1 - cz ** 2)
            v = np.exp(le[iv] + rng.random(n) * (le[iv + 1] - le[iv]))
            k = int(m.block_npoints[b])
            if k:
                j = pt_first[b] + rng.integers(0, k, n)
                x = m.points[j]
            else:
                x = (m.block_cell[b] + rng.random((n, 3))) * m.cell
            ty = int(m.block_type[b])
            out.append((t, x, np.column_stack([s * np.cos(az), s * np.sin(az), cz]), v, np.full(n, ty)))
    t = np.concatenate([o[0] for o in out])
    order = np.argsort(t, kind="stable")
    return (t[order], np.concatenate([o[1] for o in out])[order], np.concatenate([o[2] for o in out])[order],
            np.concatenate([o[3] for o in out])[order], np.concatenate([o[4] for o in out])[order])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=5, help="best of this many timed generations and fits")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    ev = synthetic_pour(a.events, a.seconds, a.seed)
    print(f"granular generator: synthetic pour, {len(ev)} events over {a.seconds:g} s "
          f"({int((ev.kind == CONTAINER).sum())} container hits), window 0.05 s, cell 1 cm, bins 10 x 16 x 8 x 32; "
          f"{os.cpu_count()} cores, IMPACTSOUND_THREADS={os.environ.get('IMPACTSOUND_THREADS', '(unset)')}")

    # warm-up: Numba kernels (cached on disk) outside the timings
    t0 = time.perf_counter()
    G.generate(G.fit_model(ev.take(np.arange(0, len(ev), 97))), seed=0)
    t_jit = time.perf_counter() - t0

    fits = []
    for _ in range(max(1, a.repeat // 2)):
        t0 = time.perf_counter()
        model = G.fit_model(ev)
        fits.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        path = G.save_model(Path(d) / "model.h5", model)
        t_save = time.perf_counter() - t0
        asset_mb = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        G.load_model(path)
        t_load = time.perf_counter() - t0
        raw_mb = save_events(Path(d) / "events.npz", ev).stat().st_size / 1e6

    gens, n_gen = [], []
    for k in range(a.repeat):
        t0 = time.perf_counter()
        g = G.generate(model, seed=a.seed + k)
        gens.append(time.perf_counter() - t0)
        n_gen.append(len(g))
    best = int(np.argmin(gens))
    rate = n_gen[best] / gens[best]

    refs = []
    for k in range(max(1, a.repeat // 2)):
        t0 = time.perf_counter()
        r = reference_generate(model, a.seed + k)
        refs.append(time.perf_counter() - t0)
    n_ref = len(r[0])
    rate_ref = n_ref / min(refs)

    tracemalloc.start()
    g = G.generate(model, seed=a.seed)
    trace_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    out_mb = sum(v.nbytes for v in g.columns().values()) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10

    print(f"  Numba kernels loaded (cache) + small warm-up fit/generate: {t_jit:.2f} s (not counted below)")
    print(f"  model: {model.n_windows} windows, {model.n_blocks} non-empty (window, cell, type) blocks, "
          f"{model.bin_count.shape[0]} non-empty bins of {model.n_bins} per block "
          f"({model.bin_count.shape[0] / len(ev):.2f} per event), {model.points.shape[0]} stored surface points, {model.type_kind.shape[0]} types")
    print(f"  {'':42s} {'time':>9s} {'events/s':>12s} {'vs reference':>13s}")
    print(f"  {'fit (' + str(len(ev)) + ' events)':42s} {min(fits):7.3f} s {len(ev) / min(fits):12.3g}")
    print(f"  {'generate, compiled (Poisson, ' + str(n_gen[best]) + ')':42s} {gens[best]:7.3f} s {rate:12.3g} "
          f"{min(refs) / gens[best]:12.1f}x")
    print(f"  {'reference per-block NumPy loop (' + str(n_ref) + ')':42s} {min(refs):7.3f} s {rate_ref:12.3g} "
          f"{1:12.1f}x")
    print("    (generate runs: " + ", ".join(f"{v:.3f}" for v in gens) + " s; fits: "
          + ", ".join(f"{v:.3f}" for v in fits) + " s; reference: " + ", ".join(f"{v:.2f}" for v in refs)
          + f" s; 1-min load average {os.getloadavg()[0]:.2f})")
    print(f"  asset: {asset_mb:.2f} MB on disk (save {t_save:.3f} s, verified load {t_load:.3f} s) vs the raw "
          f"table {raw_mb:.1f} MB (.npz): {raw_mb / asset_mb:.1f}x smaller")
    print(f"  regenerated vs input: mean log10 v0 {np.log10(g.v0).mean():.4f} / {np.log10(ev.v0).mean():.4f} "
          f"(reference {np.log10(r[3]).mean():.4f}); container share {np.mean(g.kind == CONTAINER):.4f} / "
          f"{np.mean(ev.kind == CONTAINER):.4f}")
    print(f"  peak memory: generate traced {trace_peak:.0f} MiB (its output {out_mb:.0f} MiB), process RSS "
          f"{rss:.0f} MiB")
    print(f"  goal: generate >= 1e6 events/s: {'met' if rate >= 1e6 else 'MISSED'} ({rate:.3g}/s)")


if __name__ == "__main__":
    main()
