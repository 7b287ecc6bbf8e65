"""Benchmark and validation: contacts inferred from poses against MuJoCo's own events (goal at 120 fps: onsets
within one frame, impulses within 15 %, levels within 1.5 dB per object; speed >= 100 frames/s for 50 bodies of
~1k triangles on 2 cores).

Each scene is simulated once with MuJoCo (our dynamics); its recorded motion is sampled at 60, 120 and 240 frames
per second, the contacts are inferred from those frames alone (dynamics/from_motion.py) and compared collision by
collision with the simulation's events (dynamics/compare.py: the events of one pair within 1.5 frames are one
collision). "Loud" collisions are the largest ones carrying 90 % of the reference's total impulse. With
``--levels`` every object is rendered from both logs (the scene's sources) and its level (energy over the scene,
all sources, at the scene's listener) compared in dB.

Scenes: ``demo`` (the built-in demo: five objects on a wooden floor), ``table`` (the acceleration-noise paper's
table: dice, coin, ball, keys, mug, plate, bowl onto a static table top), ``pile`` (50 bodies of ~1,000 triangles
dropped into a heap; also the speed measurement).

    .venv/bin/python bench/bench_motion_contacts.py [--scenes demo table pile] [--fps 60 120 240] [--levels]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def pile_scene(n: int = 50) -> dict:
    """50 objects of ~1k triangles (icospheres of 1,280, boxes and cylinders of ~1k) in a loose column."""
    rng = np.random.default_rng(3)
    objs = []
    for i in range(n):
        kind = i % 3
        obj = {"name": f"o{i}", "material": ["steel", "abs_plastic", "wood_hard"][(i // 3) % 3],
               "position": [0.06 * (i % 4) - 0.09 + rng.uniform(-0.01, 0.01),
                            0.06 * ((i // 4) % 3) - 0.06 + rng.uniform(-0.01, 0.01), 0.05 + 0.05 * (i // 12)],
               "euler_deg": rng.uniform(0, 360, 3).round(1).tolist()}
        if kind == 0:
            obj |= {"shape": "sphere", "size": {"radius": 0.015}}
        elif kind == 1:
            obj |= {"shape": "box", "size": {"size": [0.04, 0.03, 0.02]}}
        else:
            obj |= {"shape": "cylinder", "size": {"radius": 0.012, "height": 0.03}}
        objs.append(obj)
    return {"scene": {"duration": 1.5, "sources": ["modal"], "seed": 1},
            "source": {"modal": {"transfer": "low_order"}},
            "listener": [{"name": "mic", "position": [0.0, -0.8, 0.4]}], "object": objs}


def load(name):
    from impactsound.scene import load_scene
    from impactsound.scene.schema import demo_scene_path
    if name == "demo":
        return load_scene(demo_scene_path())
    if name == "table":
        return load_scene(demo_scene_path().with_name("table.toml"))
    return load_scene(pile_scene())


def levels(scene, log):
    """Energy [Pa^2 s] per object at the listeners, all sources."""
    from impactsound.pipeline import render_scene
    # both logs are made here (the simulation's and the inferred): the checks for hand-made logs do not apply
    res = render_scene(scene, events=log, allow_implausible=True)
    out = {}
    for kind in res.stems.values():
        for name, x in kind.items():
            out[name] = out.get(name, 0.0) + float(np.sum(np.asarray(x, np.float64) ** 2)) / res.sample_rate
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", default=["demo", "table", "pile"])
    ap.add_argument("--fps", nargs="+", type=float, default=[60.0, 120.0, 240.0])
    ap.add_argument("--levels", action="store_true", help="render every object from both logs and compare levels")
    args = ap.parse_args()
    from impactsound.dynamics import simulate
    from impactsound.dynamics.compare import match
    from impactsound.dynamics.from_motion import infer_events, sampled_poses
    from impactsound.transfer.motion import CONTROL_RATE_HZ

    print("| scene | fps | frames/s inferred | collisions (ref / inferred) | loud matched | loud onsets max "
          "err [frames] | loud impulses within 15 % | all matched (by impulse) | level diff median / worst [dB] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.scenes:
        scene = load(name)
        ground = scene.ground if scene.ground.enabled else None
        t0 = time.perf_counter()
        ref = simulate(scene.bodies, ground, scene.duration, scene.timestep, motion_rate=CONTROL_RATE_HZ)
        t_sim = time.perf_counter() - t0
        ref_levels = levels(scene, ref) if args.levels else None
        for fps in args.fps:
            t, P, Q = sampled_poses(ref, fps, scene.duration)
            t0 = time.perf_counter()
            log = infer_events(scene.bodies, ground, t, P, Q)
            el = time.perf_counter() - t0
            m = match(ref, log, 1.5 / fps)
            Jr = np.linalg.norm(m.ref.impulse, axis=1)
            order = np.argsort(Jr)[::-1]
            n_loud = int(np.searchsorted(np.cumsum(Jr[order]), 0.9 * Jr.sum()) + 1)
            loud = np.zeros(len(Jr), bool)
            loud[order[:n_loud]] = True
            ratio = np.full(len(Jr), np.nan)
            ratio[m.matched] = m.impulse_ratio()
            onset = np.full(len(Jr), np.nan)
            onset[m.matched] = m.onset_error() * fps
            lm = loud & m.matched
            within = np.abs(ratio[lm] - 1.0) <= 0.15
            lv = ""
            if args.levels:
                inf_levels = levels(scene, log)
                names = [k for k, v in ref_levels.items() if v > 0]
                d = np.array([10 * np.log10(max(inf_levels.get(k, 0.0), 1e-30) / ref_levels[k]) for k in names])
                w = int(np.argmax(np.abs(d)))
                lv = f"{np.median(np.abs(d)):.2f} / {d[w]:+.1f} ({names[w]})"
            print(f"| {name} | {fps:g} | {len(t) / el:.0f} | {len(Jr)} / {len(m.other.t0)} | {lm.sum()} / "
                  f"{loud.sum()} | {np.nanmax(np.abs(onset[lm])):.2f} | {within.sum()} / {lm.sum()} | "
                  f"{Jr[m.matched].sum() / Jr.sum():.3f} | {lv} |", flush=True)
        print(f"<!-- {name}: {len(scene.bodies)} bodies, simulated in {t_sim:.1f} s -->")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
