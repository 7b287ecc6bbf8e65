"""Benchmark: memory and time of a long scene, against its length (goal: the 600 s one-ball scene under 1 GB
peak RSS, flat in the duration).

One steel ball (2 cm across) dropped 30 cm onto the floor, then lying still, rendered with the default sources
(modal and acceleration noise) for each duration given; each run is its own process, so peak RSS is that run's
own, and the asset cache is warmed first (the runs render only). Prints, per duration: wall time, real-time factor, peak RSS of the dynamics alone and of the whole render to
a WAV and spectrogram (``render_to_file``), and the peak RSS of today's in-memory render (``render_scene`` then
``save``) for comparison.

    .venv/bin/python bench/bench_long_scene.py [--durations 30 120 600] [--in-memory]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENE = """
[scene]
duration = {duration}
sources = ["modal", "acceleration_noise"]
seed = 1
[[listener]]
name = "mic"
position = [0.3, 0.0, 0.3]
[[object]]
name = "ball"
shape = "sphere"
size = {{ radius = 0.01 }}
material = "steel"
position = [0.0, 0.0, 0.31]
"""

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, scene_path, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
from impactsound.scene import load_scene
scene = load_scene(scene_path)
t = time.perf_counter()
if mode == "dynamics":
    from impactsound.pipeline import scene_events
    ev = scene_events(scene)
elif mode == "stream":
    from impactsound.streaming import render_to_file
    render_to_file(scene, out / "a.wav", png=out / "a.png")
else:
    from impactsound.pipeline import render_scene
    render_scene(scene).save(out / "a.wav", png=out / "a.png")
wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode, scene_path, out):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(scene_path), str(out)], capture_output=True,
                       text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--durations", type=float, nargs="+", default=[30.0, 120.0, 600.0])
    ap.add_argument("--in-memory", action="store_true", help="also measure render_scene + save")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # warm the asset cache (the ball's modes, radiation and PAN field) so that every run below renders only
        warm = tmp / "warm.toml"
        warm.write_text(SCENE.format(duration=2.0))
        child("stream", warm, tmp)
        print(f"{'duration':>9} {'mode':>10} {'wall s':>8} {'x real time':>11} {'peak RSS MB':>12}")
        for dur in a.durations:
            sp = tmp / f"ball_{dur:g}.toml"
            sp.write_text(SCENE.format(duration=dur))
            modes = ["dynamics", "stream"] + (["in-memory"] if a.in_memory else [])
            for mode in modes:
                r = child(mode, sp, tmp)
                print(f"{dur:9g} {mode:>10} {r['wall']:8.1f} {dur / r['wall']:11.1f} {r['rss_mb']:12.0f}",
                      flush=True)


if __name__ == "__main__":
    main()
