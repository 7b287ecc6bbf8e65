"""Benchmark: acceleration noise of many objects from the proxy soundbank (Chadwick, Zheng & James 2012, "Faster
Acceleration Noise for Multibody Animations using Precomputed Soundbanks", sec. 3-4), fast path vs the per-impulse
NumPy reference, side by side in one run.

A rock pile like the paper's (Table 2: 1000 rocks, 6 s, 210,741 impulses): N objects (default 1,000) with random
ellipsoid-like proxies (A uniform in [3, 8] cm, B/A in [0.45, 0.95], C/B in [0.45, 0.95], random orientation),
mapped to the nearest of a few tiny-preset bank entries (computed once, into a temporary bank, not timed), I
impulses in total (default 200,000) spread evenly over the objects, times uniform over 6 s, random body-frame
accelerations; one listener 1.5 m away in a random direction per object; 48 kHz. Prints:

1. the bank entries used and their build time;
2. the paper's fixed-listener route ("fast path", synthesize_proxy) over all objects: time and impulses/s;
3. the reference (synthesize_proxy_reference) on a subset of impulses (default 200, over the first objects): time
   per impulse and the ratio to the fast path (goal >= 20x);
4. the relative L2 error of the fast path against the reference on that subset;
5. the render's route (proxy_field + heard_table + synthesize_pan, one object per thread as PANSource.render: a
   tumbling object's listener moves in its frame, which the fixed-listener fast path cannot follow) over all
   objects, each impulse a 0.1 ms contact: the synthesis scenes use, so the goals (>= 1e5 impulses/s on 2 cores,
   >= 20x the reference) are judged on it;
6. peak memory: tracemalloc's peak of the fast render (an untimed second run) and the process's peak RSS.

    .venv/bin/python bench/bench_proxy.py [--objects 1000] [--impulses 200000] [--subset 200] [--seed 0]
"""
from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import resource
import shlex
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from impactsound.sources.modal_kernel import default_threads
from impactsound.sources.pan import soundbank as sb
from impactsound.sources.pan.proxy import Proxy, nearest_entry
from impactsound.sources.pan.proxy_field import ProxyRecipe, entry_coefficients
from impactsound.sources.pan.proxy_synth import synthesize_proxy, synthesize_proxy_reference
from impactsound.sources.pan.source import heard_table
from impactsound.sources.pan.synth import synthesize_pan

FS = 48000
SECONDS = 6.0
H_TINY = sb.PRESETS["tiny"].h


def make_objects(n, rng):
    """Proxies (semi-axes, orientation) of n rocks, mapped to bank entries."""
    out = []
    for _ in range(n):
        A = rng.uniform(0.03, 0.08)
        B = A * rng.uniform(0.45, 0.95)
        C = B * rng.uniform(0.45, 0.95)
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        Q *= np.sign(np.linalg.det(Q))
        out.append(Proxy(np.array([A, B, C]), Q, np.zeros(3), 4.0 / 3.0 * np.pi * A * B * C))
    return out


def render(objs, entries, pulses, fn):
    y = np.zeros(int(SECONDS * FS) + FS // 2)
    for pr, (t, acc, L) in zip(objs, pulses):
        i, _, beta = nearest_entry(pr)
        y += fn(entries[i], pr, t, acc, L, FS, len(y), beta)
    return y


def render_path(objs, entries, pulses, coefs, tau=1e-4):
    """The render's route for the same objects, as PANSource.render takes it for proxies: each proxy's PANField
    from its entry (proxy_field), the table of the directions its impulses hear (heard_table) and the compiled
    per-impulse synthesis (synthesize_pan), one object per thread (default_threads), every impulse a contact of
    duration tau (a few pulses of the scaled h each)."""
    y = np.zeros(int(SECONDS * FS) + FS // 2)

    def one(job):
        pr, (t, acc, L) = job
        i, _, beta = nearest_entry(pr)
        e = entries[i]
        fld = ProxyRecipe(coefs[i], beta, H_TINY, e.fields[0].c, 1.2041, 0.5, e.fields[0].radii, 1.0,
                          np.eye(3)).build()
        Z = pr.rotation
        xl = np.broadcast_to(L @ Z, (len(t), 1, 3))
        table = heard_table(fld, xl, FS)
        return synthesize_pan(table, t, np.full(len(t), tau), np.concatenate([acc[:, :3] @ Z, acc[:, 3:] @ Z], 1),
                              xl, len(y), n_threads=1)[0]

    with ThreadPoolExecutor(max_workers=default_threads()) as ex:
        for part in ex.map(one, zip(objs, pulses)):
            y += part
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--impulses", type=int, default=200000)
    ap.add_argument("--subset", type=int, default=200, help="impulses rendered by the reference")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    rng = np.random.default_rng(a.seed)
    objs = make_objects(a.objects, rng)
    per = np.full(a.objects, a.impulses // a.objects)
    per[: a.impulses - per.sum()] += 1
    pulses = []
    for k in per:
        L = rng.normal(size=3)
        pulses.append((rng.uniform(0.0, SECONDS, k), rng.normal(size=(k, 6)) * np.array([50, 50, 50, 2e3, 2e3, 2e3]),
                       1.5 * L / np.linalg.norm(L)))
    need = sorted({nearest_entry(p)[0] for p in objs})
    print(f"proxy soundbank synthesis: {a.objects} objects, {per.sum()} impulses over {SECONDS} s at {FS} Hz, "
          f"tiny preset, {len(need)} bank entries {need}")
    with tempfile.TemporaryDirectory() as d:
        bank = sb.Soundbank(Path(d) / "bank.h5", preset="tiny")               # the default eps
        t0 = time.perf_counter()
        entries = {i: bank.entry(i) for i in need}
        t_build = time.perf_counter() - t0
    print(f"  bank entries built in {t_build:.1f} s (not counted below)")
    t0 = time.perf_counter()
    y = render(objs, entries, pulses, synthesize_proxy)
    t_fast = time.perf_counter() - t0
    # subset: the first objects' impulses up to --subset
    n_sub, objs_s, pulses_s = 0, [], []
    for pr, (t, acc, L) in zip(objs, pulses):
        k = min(len(t), a.subset - n_sub)
        if k <= 0:
            break
        objs_s.append(pr)
        pulses_s.append((t[:k], acc[:k], L))
        n_sub += k
    t0 = time.perf_counter()
    yr = render(objs_s, entries, pulses_s, synthesize_proxy_reference)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    ys = render(objs_s, entries, pulses_s, synthesize_proxy)
    t_fs = time.perf_counter() - t0
    err = np.linalg.norm(ys - yr) / np.linalg.norm(yr)
    tracemalloc.start()
    render(objs, entries, pulses, synthesize_proxy)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_fast, per_ref = t_fast / per.sum(), t_ref / n_sub
    print(f"  {'':40s} {'time':>10s} {'per impulse':>12s} {'impulses/s':>11s} {'vs fast':>8s}")
    print(f"  {'fast path (all ' + str(per.sum()) + ')':40s} {t_fast:8.2f} s {per_fast * 1e6:9.1f} us "
          f"{1 / per_fast:11.0f} {1.0:8.1f}")
    print(f"  {'fast path (subset, ' + str(n_sub) + ', ' + str(len(objs_s)) + ' objects)':40s} {t_fs:8.2f} s "
          f"{t_fs / n_sub * 1e6:9.1f} us {n_sub / t_fs:11.0f}")
    print(f"  {'per-impulse reference (subset)':40s} {t_ref:8.2f} s {per_ref * 1e6:9.1f} us {1 / per_ref:11.0f} "
          f"{per_ref / per_fast:8.1f}")
    print(f"  error fast vs reference (subset, relative L2): {err * 100:.3f} %")
    print(f"  output peak {np.abs(y).max():.3e} Pa; peak memory: fast render traced {peak:.0f} MiB "
          f"(output {y.nbytes / 2**20:.1f} MiB), process RSS {rss:.0f} MiB")
    coefs = {i: entry_coefficients(e) for i, e in entries.items()}
    render_path(objs[:2], entries, pulses[:2], coefs)                       # compile the kernels (untimed)
    t0 = time.perf_counter()
    yp = render_path(objs, entries, pulses, coefs)
    t_path = time.perf_counter() - t0
    print(f"  {'render path (all; contacts of 0.1 ms)':40s} {t_path:8.2f} s {t_path / per.sum() * 1e6:9.1f} us "
          f"{per.sum() / t_path:11.0f} {t_fast / t_path:8.1f}   (peak {np.abs(yp).max():.3e} Pa)")
    rate_path = per.sum() / t_path
    print(f"  goals (the render's route is what scenes use): >= 1e5 impulses/s: "
          f"{'met' if rate_path >= 1e5 else 'MISSED'} ({rate_path:.3g}/s; the paper's fixed-listener route "
          f"{1 / per_fast:.3g}/s); >= 20x the per-impulse reference: "
          f"{'met' if rate_path * per_ref >= 20 else 'MISSED'} ({rate_path * per_ref:.0f}x)")


if __name__ == "__main__":
    main()
