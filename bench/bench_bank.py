"""Benchmark: building the proxy soundbank (Chadwick, Zheng & James 2012, "Faster Acceleration Noise for Multibody
Animations using Precomputed Soundbanks") and what it weighs, side by side in one run.

1. Build rate. The same K tiny-preset entries (default 39..44) built three ways, each into its own temporary bank
   file: in this process (``Soundbank.build(workers=1)``), and on a Dask LocalCluster of 1 and of 2 worker
   processes (one thread each; ``build(scheduler=...)``). Per way: wall time, fields per hour (6 fields an entry),
   FDTD cell updates per second (grid cells x the steps each field really ran), the speed-up of 2 workers over 1,
   and whether the three banks hold bit-identical entry arrays (the determinism check: exit status 1 if not).
   Each cluster is started and warmed up (its workers import the package and load the compiled FDTD kernels on a
   throw-away 4-step solve) before the clock starts, so the figures are the build alone plus Dask's overhead.
   Every FDTD solve runs its own thread pool ($IMPACTSOUND_THREADS, else one thread per core); a Dask worker gets
   cores // workers of them (``--worker-threads``, as the local process pool does), so 2 workers on 2 cores do
   not oversubscribe them. The cluster is first probed in a child process (start, stop, time limit): when it
   cannot start here that part is skipped, saying why. The 11 entries with C' = 0.025 m (half a 5 cm cell:
   0, 1, 3, 6, 10, 15, 21, 28, 36, 45, 55) have no cell inside the tiny grid and the solver refuses them, so a whole
   tiny bank cannot be built; the run refuses them up front.
2. Size at eps (default 0.04): per entry the file size / K and the entries' wavelet data (BankEntry.nbytes), for
   the tiny entries, for ``--standard N`` standard entries built now (~1 minute each on 2 cores; default 0) and for
   the entries of an existing bank (``--standard-bank PATH``: opened read-only, its ``info()``), extrapolated to
   all 66 entries, next to the paper's 16 MB for its whole bank (sec. 5: a 500^3 grid at 96 kHz, this package's
   ``paper`` preset) and ``Soundbank(preset=...).estimate()``'s size_bytes before anything is built.
3. Peak memory: this process's peak RSS after each part, and each Dask worker's own peak RSS (asked of the
   workers once their build is done).

    .venv/bin/python bench/bench_bank.py [--entries 39-44] [--eps 0.04] [--standard N]
                                         [--standard-bank BANK.h5] [--worker-threads T]
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from impactsound.parallel import THREADS_ENV, local_cores, map_tasks
from impactsound.sources.pan import soundbank as sb
from impactsound.sources.pan.precompute import PulseDrive
from impactsound.sources.pan.proxy import bank_entries
from impactsound.sources.pan.solve import solve_field
from impactsound.wave.fdtd import centred_grid
from impactsound.wave.voxel import voxelize

N_BANK = len(bank_entries())
#: the paper's whole bank (Chadwick, Zheng & James 2012, sec. 5: 66 entries, 500^3 grid, 96 kHz)
PAPER_BANK_BYTES = 16e6
PROBE_SECONDS = 120
PROBE = """
from distributed import Client, LocalCluster
with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=None) as cl:
    with Client(cl) as c:
        assert c.submit(sum, [1, 2]).result(timeout=60) == 3
"""


def parse_entries(text: str) -> list[int]:
    """'40-45' or '1,5,10-12' -> sorted entry indices."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def peak_rss_mib() -> float:
    """This process's peak resident set size [MiB] (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def warm(_=None):
    """Throw-away 4-step solve of the last tiny entry's field 0: imports the package, loads the compiled kernels."""
    job = sb.plan_entry(N_BANK - 1, "tiny")                   # the round one (thin ones have no cells)
    plan = replace(job.plan, n_steps=4, min_steps=None)
    return solve_field(0, sb.EllipsoidInside(job.axes), plan, job.receivers[:1],
                       PulseDrive(job.preset.h, 2 * job.preset.h), job.c, job.rho).shape


def unbuildable(indices, preset: str) -> list[str]:
    """Entries with no cell of the preset's grid inside (thin ones: C' well under dx), which the solver refuses."""
    plan = sb.plan_grid_for(sb.get_preset(preset))
    grid = centred_grid(plan.half_width, plan.dx, plan.npml)
    out = []
    for i in indices:
        axes = sb.plan_entry(i, preset).axes
        if len(voxelize(grid, sb.EllipsoidInside(axes)).faces) == 0:
            out.append(f"{i} (B', C' = {axes[1]:g}, {axes[2]:g} m)")
    return out


def cell_updates(bank: sb.Soundbank, indices) -> float:
    """FDTD cell updates the entries really ran: grid cells x the steps of each of their six fields."""
    n_cells = sb.plan_grid_for(bank.preset, bank.c).n_cells
    return float(n_cells * sum(sum(bank.entry(i, compute=False).steps) for i in indices))


def timed_build(path: Path, preset: str, eps: float, indices, **how) -> dict:
    """Build ``indices`` into a new bank at ``path``; wall time, rates, sizes."""
    bank = sb.Soundbank(path, preset=preset, eps=eps)
    t0 = time.perf_counter()
    bank.build(indices, **how)
    wall = time.perf_counter() - t0
    bank = sb.Soundbank(path, preset=preset, eps=eps)           # read back what the file holds
    ents = [bank.entry(i, compute=False) for i in indices]
    return {"path": path, "wall": wall, "fields_per_h": sb.N_FIELDS * len(indices) / wall * 3600,
            "cups": cell_updates(bank, indices) / wall, "entry_s": sum(e.seconds for e in ents),
            "file": path.stat().st_size, "nbytes": [e.nbytes for e in ents], "errors": [e.error for e in ents]}


def differences(path_a: Path, path_b: Path, preset: str, eps: float, indices) -> list[str]:
    """Where two banks' entries differ: sparse arrays (dtype and bits), wavelet scalars, steps, errors."""
    a = sb.Soundbank(path_a, preset=preset, eps=eps)
    b = sb.Soundbank(path_b, preset=preset, eps=eps)
    out = []
    for i in indices:
        ea, eb = a.entry(i, compute=False), b.entry(i, compute=False)
        if ea.steps != eb.steps or not np.array_equal(ea.errors, eb.errors):
            out.append(f"entry {i}: steps or compression errors")
        for f, (fa, fb) in enumerate(zip(ea.fields, eb.fields)):
            for name in ("indptr", "index", "values"):
                x, y = np.asarray(getattr(fa, name)), np.asarray(getattr(fb, name))
                if x.dtype != y.dtype or not np.array_equal(x, y):
                    out.append(f"entry {i} field {f}: {name}")
            if (fa.n_coef, fa.n_samples, fa.t_start, fa.tau0) != (fb.n_coef, fb.n_samples, fb.t_start, fb.tau0):
                out.append(f"entry {i} field {f}: wavelet scalars")
    return out


def probe_cluster() -> str | None:
    """None when a LocalCluster starts, runs a task and stops here (in a child process, time-limited), else why."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        return f"dask.distributed is not installed ({exc})"
    try:
        r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"a LocalCluster did not start and run a task within {PROBE_SECONDS} s"
    if r.returncode:
        tail = (r.stderr.strip().splitlines() or ["no message"])[-1]
        return f"a LocalCluster failed to start here (exit {r.returncode}: {tail})"
    return None


def worker_peaks(address: str) -> list[float]:
    """Each Dask worker's own peak RSS [MiB]."""
    from distributed import Client
    with Client(address, set_as_default=False) as client:
        return sorted(client.run(peak_rss_mib).values())


def cluster_build(n: int, threads: int, path: Path, eps: float, indices) -> dict:
    """Start and warm an n-worker LocalCluster, build into ``path`` through it, ask the workers' peak RSS."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=n, processes=True, threads_per_worker=1, dashboard_address=None,
                      env={THREADS_ENV: str(threads)}) as cluster:
        addr = cluster.scheduler_address
        map_tasks(warm, range(2 * n), scheduler=addr)
        r = timed_build(path, "tiny", eps, indices, scheduler=addr)
        r["worker_rss"] = worker_peaks(addr)
    return r


def size_line(label: str, n: int, file_bytes: float, nbytes) -> str:
    """Per entry and extrapolated to the whole bank: file and wavelet data, against the paper's 16 MB."""
    per_file, per_data = file_bytes / n, float(np.mean(nbytes))
    whole = per_file * N_BANK
    return (f"  {label:34s} {n:3d} {per_file / 1e3:9.1f} kB {per_data / 1e3:9.1f} kB "
            f"{whole / 1e6:9.2f} MB {per_data * N_BANK / 1e6:9.2f} MB {whole / PAPER_BANK_BYTES:8.3f}")


def estimate_mb(preset: str, eps: float, tmp: Path) -> float:
    """estimate()'s size of the whole bank before any entry exists [MB] (a bank at a path with no file)."""
    return sb.Soundbank(tmp / f"none_{preset}.h5", preset=preset, eps=eps).estimate()["size_bytes"] / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", default="39-44", help="tiny entries built three ways (default 39-44: K = 6; "
                    "thin ones have no cell on the 5 cm grid)")
    ap.add_argument("--eps", type=float, default=0.04)
    ap.add_argument("--standard", type=int, default=0, metavar="N",
                    help="also build N standard entries (the first N of --entries; ~1 minute each)")
    ap.add_argument("--standard-bank", type=Path, metavar="PATH", help="existing bank: read its entries' sizes")
    ap.add_argument("--worker-threads", type=int, default=0, metavar="T",
                    help=f"${THREADS_ENV} of each Dask worker (default cores // workers)")
    a = ap.parse_args()
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    idx = parse_entries(a.entries)
    K, cores = len(idx), local_cores()
    bad = unbuildable(idx, "tiny")
    if bad:
        sys.exit(f"entries {', '.join(bad)}: no cell of the tiny grid (dx {sb.PRESETS['tiny'].dx:g} m) is inside; "
                 f"the solver refuses them. Pick thicker ones (C' >= 0.12 m), e.g. --entries 39-44")
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"proxy soundbank build: {K} tiny entries {idx} at eps {a.eps:g}; {cores} cores, load average {load}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="bench_bank_") as d:
        tmp = Path(d)
        e = sb.Soundbank(tmp / "none.h5", preset="tiny", eps=a.eps).estimate(idx)
        print(f"  tiny preset: grid {e['grid'][0]}^3, {e['steps']}..{e['max_steps']} steps a field; at least "
              f"{e['cell_updates']:.3g} cell updates for the {K} entries (estimate {e['seconds']:.0f} s)")
        warm()
        rss0 = peak_rss_mib()
        rows = [("in this process (workers=1)", timed_build(tmp / "local.h5", "tiny", a.eps, idx, workers=1))]
        rss_local = peak_rss_mib()
        why = probe_cluster()
        if why:
            print(f"  Dask part SKIPPED: {why}")
        else:
            for n in (1, 2):
                threads = a.worker_threads or max(1, cores // n)
                r = cluster_build(n, threads, tmp / f"dask{n}.h5", a.eps, idx)
                rows.append((f"Dask LocalCluster, {n} worker(s) x {threads} thr", r))
        print(f"  {'1. build rate':40s} {'wall':>8s} {'fields/h':>9s} {'cell upd/s':>10s} {'vs in-proc':>10s} "
              f"{'vs 1 worker':>11s} {'entries own s':>13s}")
        one = rows[1][1]["wall"] if len(rows) > 1 else None
        for label, r in rows:
            vs = f"x{one / r['wall']:.2f}" if one and "Dask" in label else ""
            print(f"  {label:40s} {r['wall']:6.1f} s {r['fields_per_h']:9.0f} {r['cups']:10.3g} "
                  f"{'x' + format(rows[0][1]['wall'] / r['wall'], '.2f'):>10s} {vs:>11s} {r['entry_s']:11.1f} s")
        if len(rows) == 3:
            print(f"  speed-up of 2 Dask workers over 1: x{rows[1][1]['wall'] / rows[2][1]['wall']:.2f}")
        for label, r in rows[1:]:
            failed += [f"{label}: {x}" for x in differences(rows[0][1]["path"], r["path"], "tiny", a.eps, idx)]
        if failed:
            print(f"  DETERMINISM FAILED: the banks differ ({len(failed)} arrays), e.g. {failed[:5]}")
        else:
            print(f"  determinism: the {len(rows)} banks hold bit-identical entry arrays (indptr, index, values of all "
                  f"{sb.N_FIELDS * K} fields; steps; compression errors)")
        loc = rows[0][1]
        print("  compression error per tiny entry (largest of 6 fields): "
              + ", ".join(f"{i}: {x * 100:.1f} %" for i, x in zip(idx, loc["errors"])))

        print(f"  {'2. size at eps ' + format(a.eps, 'g'):34s} {'n':>3s} {'file/entry':>12s} {'data/entry':>12s} "
              f"{'file x66':>12s} {'data x66':>12s} {'x66/16MB':>8s}")
        print(size_line("tiny (built above)", K, loc["file"], loc["nbytes"]))
        if a.standard:
            std = idx[: a.standard]
            r = timed_build(tmp / "standard.h5", "standard", a.eps, std, workers=1)
            print(size_line(f"standard {std} (built now)", len(std), r["file"], r["nbytes"]))
            print(f"  {'':34s} built in {r['wall']:.0f} s: {r['fields_per_h']:.0f} fields/h, "
                  f"{r['cups']:.3g} cell updates/s (one process)")
        if a.standard_bank:
            info = sb.Soundbank.open(a.standard_bank).info()      # reads only
            ents = info["entries"]
            print(size_line(f"{info['preset']} {info['entries_present']} (read)", len(ents), info["size_mb"] * 1e6,
                            [x["kbytes"] * 1e3 for x in ents]))
            cells = sb.plan_grid_for(sb.get_preset(info["preset"]), info["c"]).n_cells
            print(f"  {'':34s} {a.standard_bank}: recorded build "
                  + ", ".join(f"entry {x['index']} {x['seconds']:.0f} s ({cells * sum(x['steps']) / x['seconds']:.3g} "
                              f"cell updates/s)" for x in ents))
        print(f"  paper (sec. 5): the whole bank of {N_BANK} entries 16 MB, at 500^3 cells and 96 kHz (preset 'paper')")
        print("  estimate() before building, whole bank: "
              + ", ".join(f"{p} {estimate_mb(p, a.eps, tmp):.2f} MB" for p in ("tiny", "standard", "paper")))

        print(f"  3. peak memory: this process's RSS {rss0:.0f} MiB after imports and warm-up, {rss_local:.0f} MiB "
              f"after the in-process build, {peak_rss_mib():.0f} MiB at the end")
        for label, r in rows[1:]:
            print(f"     {label}: each worker's peak RSS "
                  + ", ".join(f"{m:.0f}" for m in r["worker_rss"]) + " MiB")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
