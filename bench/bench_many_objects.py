"""Benchmark: memory of a streaming render against the number of objects (goal: 1,000 proxy objects x 60 s under
3 GB peak RSS).

A pile of small objects lying on the floor (2 cm steel, aluminium and glass spheres and boxes, a proxy
soundbank field each for acceleration noise, modal sound with the compact radiation model), each knocked from
above at random times (Poisson, ``--rate`` per object per second; impulses of a 1-5 cm drop). The events are a
synthetic log, so that only rendering is measured (a 1,000-body rigid-body simulation of a minute is its own
cost). Each run is its own process; the asset cache is warmed first. Prints wall time, real-time factor and peak
RSS of ``render_to_file`` (and of ``render_scene`` + ``save`` with ``--in-memory``, which holds every object's
stem for the whole scene: only for small piles).

    .venv/bin/python bench/bench_many_objects.py [--objects 1000] [--duration 60] [--rate 0.5] [--in-memory]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
import numpy as np
from pathlib import Path
mode, n_obj, duration, rate, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), Path(sys.argv[5])
from impactsound.dynamics.events import EventLog
from impactsound.scene import load_scene
mats = ["steel", "aluminium", "glass"]
shapes = [("sphere", {"radius": 0.01}), ("box", {"size": [0.02, 0.015, 0.01]})]
side = int(np.ceil(np.sqrt(n_obj)))
objs = []
for i in range(n_obj):
    shape, size = shapes[i % 2]
    z = 0.01 if shape == "sphere" else 0.005
    objs.append({"name": f"o{i}", "shape": shape, "size": size, "material": mats[(i // 2) % 3],
                 "position": [0.05 * (i % side), 0.05 * (i // side), z]})
d = {"scene": {"duration": duration, "sources": ["modal", "acceleration_noise"], "seed": 1},
     "source": {"modal": {"transfer": "low_order"}, "acceleration_noise": {"model": "proxy"}},
     "listener": [{"name": "mic", "position": [0.025 * side, -0.5, 0.5]}], "object": objs}
scene = load_scene(d, base=out)
rng = np.random.default_rng(0)
counts = rng.poisson(rate * duration, n_obj)
b = np.repeat(np.arange(n_obj), counts)
t = np.sort(rng.uniform(0, duration - 0.05, len(b)))
b = b[rng.permutation(len(b))]
m = np.array([scene.bodies[i].mass for i in b])
v = np.sqrt(2 * 9.81 * rng.uniform(0.01, 0.05, len(b)))
pos = np.array([scene.bodies[i].position for i in b])
top = pos + np.array([0, 0, 0.005])
J = np.zeros((len(b), 3)); J[:, 2] = -m * v * 1.5          # a knock from above onto the object's top
ev = EventLog(t=t, a=np.full(len(b), -1), b=b, point=top, normal=np.tile([0, 0, -1.0], (len(b), 1)), impulse=J,
              vn=v, pos_b=pos, quat_b=np.tile([1.0, 0, 0, 0], (len(b), 1)), body_names=scene.body_names)
t0 = time.perf_counter()
if mode == "stream":
    from impactsound.streaming import render_to_file
    res = render_to_file(scene, out / "a.wav", events=ev, allow_implausible=True)
    blocks = res.blocks
else:
    from impactsound.pipeline import render_scene
    render_scene(scene, events=ev, allow_implausible=True).save(out / "a.wav")
    blocks = 1
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "events": len(ev), "blocks": blocks,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode, n_obj, duration, rate, out):
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(n_obj), str(duration), str(rate), str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, nargs="+", default=[1000])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=0.5, help="knocks per object per second")
    ap.add_argument("--in-memory", action="store_true", help="also measure render_scene + save")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        child("stream", 6, 1.0, a.rate, tmp)                   # warm the cache (six distinct objects)
        print(f"{'objects':>8} {'duration':>9} {'events':>7} {'mode':>10} {'blocks':>6} {'wall s':>8} "
              f"{'x real time':>11} {'peak RSS MB':>12}")
        for n_obj in a.objects:
            for mode in ["stream"] + (["in-memory"] if a.in_memory else []):
                r = child(mode, n_obj, a.duration, a.rate, tmp)
                print(f"{n_obj:8d} {a.duration:9g} {r['events']:7d} {mode:>10} {r['blocks']:6d} {r['wall']:8.1f} "
                      f"{a.duration / r['wall']:11.2f} {r['rss_mb']:12.0f}", flush=True)


if __name__ == "__main__":
    main()
