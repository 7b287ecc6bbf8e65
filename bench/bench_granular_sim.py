"""Benchmark: the event-driven hard-sphere simulator (impactsound.sources.granular.simulate) on one core, against
a brute-force event-driven reference measured side by side in the same run.

1. A hard-sphere gas (grains of radius 1 mm, Maxwellian velocities 1 m/s rms per component, e = 1, no gravity) in a
   cube of walls at a fixed packing fraction (default 0.2), for N = 250 ... 4000 grains; each run simulates long
   enough for about ``--collisions`` collisions (the Enskog rate sets the time). Prints collisions/s and queue
   pops/s (every event taken from the queue: collisions, cell crossings, stale events dropped, initial predictions),
   wall and CPU time, the time per collision and its growth with N (least-squares exponent of t/collision vs N;
   0 would be ideal O(1), the tree makes it O(log N)). Goal: >= 3e5 collisions/s for 1000 grains.
2. The reference: the textbook event-driven loop without cells or queue, in NumPy (all pair times, O(N) work per
   collision after an O(N^2) start), run for ``--ref-collisions`` collisions at each N: its rate and the ratio.
3. A pour: 1000 grains (radius 1 mm +- 10 %) hanging in a funnel (hole 5 mm, half-angle 35 deg) fall into a cup
   (radius 3 cm) on a floor; 3 s simulated with the default collapse guards.
4. Peak memory: tracemalloc's peak during the largest gas run (an untimed rerun) and the process's peak RSS.

One core: the simulator is sequential Numba code (no parallel loops); the script also pins itself to one CPU
(sched_setaffinity) and sets NUMBA_NUM_THREADS=1 before importing Numba, and prints CPU time / wall time per run
(~1.0 means one busy core). Timings exclude the Numba compile (a warm-up run first).

    .venv/bin/python bench/bench_granular_sim.py [--sizes 250 500 1000 2000 4000] [--phi 0.2]
                                                 [--collisions 300000] [--ref-collisions 3000] [--repeat 3]
"""
from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from impactsound.sources.granular.simulate import (Cone, Cup, Floor, Plane, pour_grains,  # noqa: E402
                                                   simulate_state)

A = 1e-3


def box(L):
    return [Plane((0, 0, 0), (1, 0, 0), "box"), Plane((L, 0, 0), (-1, 0, 0), "box"),
            Plane((0, 0, 0), (0, 1, 0), "box"), Plane((0, L, 0), (0, -1, 0), "box"),
            Plane((0, 0, 0), (0, 0, 1), "box"), Plane((0, 0, L), (0, 0, -1), "box")]


def gas(n, phi, seed=1):
    L = (n * 4 / 3 * math.pi * A ** 3 / phi) ** (1 / 3)
    gs = pour_grains(n, A, region=((0, 0, 0), (L, L, L)), gap=0.0, seed=seed, jitter=0.0)
    v = np.random.default_rng(seed + 100).standard_normal((n, 3))
    gs.velocities = v - v.mean(axis=0)
    return gs, L


def enskog_rate(phi):
    """Collisions per grain per second (Enskog, Carnahan-Starling; kT/m = 1 m^2/s^2)."""
    sig = 2 * A
    n = phi / (math.pi / 6 * sig ** 3)
    return 4 * n * sig ** 2 * math.sqrt(math.pi) * (1 - phi / 2) / (1 - phi) ** 3


def run_gas(gs, L, duration):
    c0, w0 = time.process_time(), time.perf_counter()
    r = simulate_state(gs, box(L), duration=duration, restitution=1.0, gravity=(0, 0, 0), v_rest=0.0,
                       v_elastic=0.0, collapse_rate=None)
    return r, time.perf_counter() - w0, time.process_time() - c0


def brute_force(pos, vel, L, sig, n_coll):
    """The textbook loop without cells or queue: absolute collision times of every pair and every wall in
    arrays, with each row's minimum; after a collision the two grains' rows and columns are recomputed and the rows
    whose minimum was there re-minimised (O(N) NumPy work per collision after an O(N^2) start)."""
    pos, vel = pos.copy(), vel.copy()
    n = len(pos)
    now = 0.0

    def pair_times(i):
        d = pos[i] - pos
        u = vel[i] - vel
        b = np.einsum("ij,ij->i", d, u)
        c = np.einsum("ij,ij->i", d, d) - sig * sig
        a = np.einsum("ij,ij->i", u, u)
        disc = b * b - a * c
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where((b < 0) & (disc >= 0), c / (-b + np.sqrt(np.maximum(disc, 0))), np.inf)
        t[i] = np.inf
        return now + t

    def wall_time(i):
        with np.errstate(divide="ignore"):
            lo = np.where(vel[i] < 0, (pos[i] - sig / 2) / -vel[i], np.inf)
            hi = np.where(vel[i] > 0, (L - sig / 2 - pos[i]) / vel[i], np.inf)
        return now + np.minimum(lo, hi).min()

    T = np.array([pair_times(i) for i in range(n)])
    Tw = np.array([wall_time(i) for i in range(n)])
    arg = T.argmin(axis=1)
    rowmin = T[np.arange(n), arg]
    for _ in range(n_coll):
        i = int(np.argmin(np.minimum(rowmin, Tw)))
        t_next = min(rowmin[i], Tw[i])
        pos += vel * (t_next - now)
        now = t_next
        if Tw[i] <= rowmin[i]:
            k = np.argmin(np.minimum(np.abs(pos[i] - sig / 2), np.abs(L - sig / 2 - pos[i])))
            vel[i, k] = -vel[i, k]
            changed = [i]
        else:
            j = int(arg[i])
            nrm = (pos[i] - pos[j]) / np.linalg.norm(pos[i] - pos[j])
            dv = np.dot(vel[i] - vel[j], nrm)
            vel[i] -= dv * nrm
            vel[j] += dv * nrm
            changed = [i, j]
        for k in changed:
            T[k] = pair_times(k)
            T[:, k] = T[k]
            Tw[k] = wall_time(k)
        stale = np.flatnonzero(np.isin(arg, changed))
        for k in changed:
            better = T[:, k] < rowmin
            arg[better], rowmin[better] = k, T[better, k]
        stale = np.union1d(stale, changed)
        arg[stale] = T[stale].argmin(axis=1)
        rowmin[stale] = T[stale, arg[stale]]
    return now


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    ap.add_argument("--phi", type=float, default=0.2)
    ap.add_argument("--collisions", type=int, default=300_000)
    ap.add_argument("--ref-collisions", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pour", type=int, default=1000)
    args = ap.parse_args(argv)
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
        pinned = f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        pinned = "not pinned (no sched_setaffinity)"
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"one core: {pinned}; NUMBA_NUM_THREADS={os.environ['NUMBA_NUM_THREADS']}; machine load "
          f"{os.getloadavg()[0]:.2f} (1 min)")
    gs, L = gas(200, args.phi)
    run_gas(gs, L, 0.002)                             # compile
    z = enskog_rate(args.phi)
    print(f"\n1-2. hard-sphere gas, phi = {args.phi}, Enskog rate {z:.0f} collisions per grain per second")
    print(f"{'N':>6} {'collisions':>10} {'pops':>9} {'wall s':>7} {'cpu/wall':>8} {'coll/s best':>11} "
          f"{'spread':>7} {'coll/cpu-s':>10} {'pops/s':>9} {'us/coll':>8} {'stale':>6} {'cross':>6} {'ref coll/s':>10} "
          f"{'speed-up':>8}")
    per_coll = []
    for n in args.sizes:
        gs, L = gas(n, args.phi)
        dur = 2 * args.collisions / (n * z)
        rates, rec = [], None
        for _ in range(args.repeat):
            r, wall, cpu_s = run_gas(gs, L, dur)
            rates.append(r.stats["collisions"] / wall)
            if rec is None or wall < rec[1]:
                rec = (r, wall, cpu_s)
        r, wall, cpu_s = rec
        st = r.stats
        per_coll.append(wall / st["collisions"])
        w0 = time.perf_counter()
        brute_force(gs.positions, gs.velocities, L, 2 * A, args.ref_collisions)
        ref = args.ref_collisions / (time.perf_counter() - w0)
        best = max(rates)
        print(f"{n:6d} {st['collisions']:10d} {st['pops']:9d} {wall:7.3f} {cpu_s / wall:8.2f} {best:11.3g} "
              f"{(best - min(rates)) / best:7.1%} {st['collisions'] / cpu_s:10.3g} {st['pops'] / wall:9.3g} "
              f"{1e6 * wall / st['collisions']:8.3f} "
              f"{st['invalid'] / st['pops']:6.1%} {st['cell_crossings'] / st['collisions']:6.2f} {ref:10.3g} "
              f"{best / ref:8.0f}")
    if len(args.sizes) > 1:
        k = np.polyfit(np.log(args.sizes), np.log(per_coll), 1)[0]
        print(f"time per collision grows as N^{k:.3f} (least squares over N = {args.sizes[0]}..{args.sizes[-1]})")

    print(f"\n3. pour: {args.pour} grains from a funnel into a cup, 3 s simulated")
    funnel = Cone.funnel(z_hole=0.10, hole_radius=0.005, half_angle=35.0, height=0.05)
    cup = Cup(radius=0.03, z_bottom=0.0, height=0.06)
    gp = pour_grains(args.pour, (A, 0.1 * A), region=funnel, z_range=(0.103, 0.15), seed=1)
    walls = [Floor(0.0), cup, funnel]
    simulate_state(gp, walls, duration=0.01)
    best = None
    rates = []
    for _ in range(args.repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        r = simulate_state(gp, walls, duration=3.0)
        wall, cpu_s = time.perf_counter() - w0, time.process_time() - c0
        rates.append(r.stats["collisions"] / wall)
        if best is None or wall < best[1]:
            best = (r, wall, cpu_s)
    r, wall, cpu_s = best
    st = r.stats
    ev = r.events
    print(f"collisions {st['collisions']} (grain {int((ev.kind == 0).sum())}, container {int((ev.kind == 1).sum())}),"
          f" pops {st['pops']}, frozen {st['frozen']}/{args.pour}; wall {wall:.3f} s (cpu/wall {cpu_s / wall:.2f}), "
          f"{max(rates):.3g} collisions/s best (spread {(max(rates) - min(rates)) / max(rates):.1%}), "
          f"{st['pops'] / wall:.3g} pops/s")

    n = args.sizes[-1]
    gs, L = gas(n, args.phi)
    tracemalloc.start()
    rg = run_gas(gs, L, 2 * args.collisions / (n * z))[0]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n4. peak memory of the N = {n} gas run (tracemalloc): {peak / 2 ** 20:.1f} MiB for "
          f"{rg.stats['logged']} logged collisions ({peak / max(1, rg.stats['logged']):.0f} B each, the event table "
          f"and its assembly); process peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
