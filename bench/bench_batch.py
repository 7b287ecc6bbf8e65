"""Benchmark: batch rendering with 1 and 2 local workers, side by side (goal: 2 workers >= 1.7x one).

A 20-render plan of small scenes: a bar (the README's own-object size) dropped from 4 heights in 5 materials
(5 asset groups), 3 s each, modal sound with FFAT radiation from FDTD (the default) and acceleration noise from
the shipped proxy soundbank, so each material's modes and radiation are computed once. Measured cold (an empty asset cache per run: assets computed once per group, then
reused) and warm (all assets cached: rendering only). Each run is the CLI, ``impactsound batch --workers W``, in a
fresh process, as a user runs it. Prints wall time, the speed-up and peak RSS (the largest batch process or
worker).

    .venv/bin/python bench/bench_batch.py [--renders 20] [--transfer auto|low_order] [--warm-only]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = """
[scene]
duration = {duration}
sources = ["modal", "acceleration_noise"]
seed = 1
[source.modal]
transfer = "{transfer}"
[source.acceleration_noise]
model = "proxy"
[[listener]]
name = "mic"
position = [0.0, -0.5, 0.3]
[[object]]
name = "bar"
shape = "box"
size = {{ size = [0.12, 0.02, 0.01] }}
material = "aluminium"
position = [0.0, 0.0, 0.1]
euler_deg = [5.0, 8.0, 0.0]
"""
MATERIALS = ["aluminium", "steel", "brass", "glass", "ceramic"]


def run(plan_path, out, workers, cache):
    """Wall time of ``impactsound batch PLAN --out OUT --workers W`` in a fresh process, as a user runs it (so
    both sides pay the same start-up: imports and compiled kernels in the process that renders)."""
    env = dict(os.environ, IMPACTSOUND_CACHE=str(cache))
    cmd = [sys.executable, "-m", "impactsound", "-q", "batch", str(plan_path), "--out", str(out),
           "--workers", str(workers)]
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--renders", type=int, default=20)
    ap.add_argument("--transfer", default="auto")
    ap.add_argument("--warm-only", action="store_true")
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    heights = max(1, a.renders // len(MATERIALS))
    root = Path(tempfile.mkdtemp(prefix="bench_batch_"))
    (root / "base.toml").write_text(BASE.format(transfer=a.transfer, duration=a.duration))
    hs = [round(0.06 + 0.04 * k, 3) for k in range(heights)]
    (root / "plan.toml").write_text('[batch]\nscene = "base.toml"\n[grid]\n'
                                    f'"object.bar.material" = {MATERIALS!r}\n'.replace("'", '"') +
                                    f'"object.bar.position" = {[[0.0, 0.0, h] for h in hs]!r}\n')
    n = len(MATERIALS) * heights
    print(f"plan: {n} renders ({len(MATERIALS)} materials x {heights} heights), transfer = {a.transfer}, "
          f"{os.cpu_count()} cores")
    res = {}
    try:
        for mode in (["warm"] if a.warm_only else ["cold", "warm"]):
            for w in (1, 2):
                cache = root / f"cache{w}"
                if mode == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                elif not cache.exists():
                    run(root / "plan.toml", root / f"prime{w}", 2, cache)
                res[mode, w] = run(root / "plan.toml", root / f"out_{mode}{w}", w, cache)
                print(f"  {mode}, {w} worker(s): {res[mode, w]:.1f} s ({res[mode, w] / n:.2f} s per render)")
            print(f"  {mode} speed-up, 2 workers vs 1: {res[mode, 1] / res[mode, 2]:.2f}x (goal >= 1.7x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: largest batch process or worker {kids:.0f} MiB")


if __name__ == "__main__":
    main()
