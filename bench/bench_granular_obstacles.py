"""Benchmark: scene objects as walls for the simulated grains (sources/granular/obstacles.py), side by side with
the simulator's exact walls.

1. Building the static spheres of a closed solid for 1 mm grains: a box, the built-in bowl and mug (spheres,
   seconds, radii).
2. A pour into a 3 cm mug (4 mm wall; 1 mm glass beads through the pour scene's funnel, 0.6 s) against the mug's
   exact cup walls and against the same mug as static spheres: wall hits, hits above 5 cm/s, the summed J^2 of the
   wall hits (the container sound's energy for incoherent hits, dB) and the simulation's time.

Prints peak RSS. ``--grains`` sets the pour's size (default 300).

    .venv/bin/python bench/bench_granular_obstacles.py [--grains 300]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import trimesh

from impactsound.scene.primitives import make_primitive
from impactsound.sources.granular.obstacles import surface_spheres

POUR = {"scene": {"duration": 0.6, "seed": 2, "sources": ["grain_noise", "container"]},
        "listener": [{"name": "mic", "position": [0.0, -0.3, 0.1]}],
        "object": [{"name": "cup", "shape": "mug", "size": {"radius": 0.03, "height": 0.06, "thickness": 0.004},
                    "material": "ceramic", "position": [0.0, 0.0, 0.025]}],
        "granular": {"material": "glass_bead", "radius": 0.001, "count": 300, "container": "cup", "restitution": 0.5,
                     "funnel": {"position": [0.0, 0.0, 0.13], "hole_radius": 0.004, "top_radius": 0.02,
                                "height": 0.02}}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grains", type=int, default=300)
    a = ap.parse_args()
    solids = {"box 10 x 8 x 4 cm": trimesh.creation.box(extents=[0.1, 0.08, 0.04]),
              "bowl (built-in)": make_primitive("bowl"),
              "mug r 3 cm, wall 4 mm": make_primitive("mug", {"radius": 0.03, "height": 0.06, "thickness": 0.004})}
    print("| solid | triangles | spheres | radii [mm] | build [s] |")
    print("|---|---|---|---|---|")
    for name, m in solids.items():
        t0 = time.perf_counter()
        C, R = surface_spheres(m.vertices, m.faces, 0.001, where=name)
        print(f"| {name} | {len(m.faces)} | {len(C)} | {R.min() * 1e3:.2f}-{R.max() * 1e3:.2f} | "
              f"{time.perf_counter() - t0:.1f} |", flush=True)

    from impactsound.scene import load_scene
    from impactsound.sources.granular.container import wall_hit_parameters
    from impactsound.sources.granular.obstacles import body_spheres
    from impactsound.sources.granular.scene_events import mug_walls, simulate_pour
    from impactsound.sources.granular.simulate import StaticSpheres
    d = {**POUR, "granular": {**POUR["granular"], "count": a.grains}}
    sc = load_scene(d)
    body, setup = sc.bodies[0], sc.granular
    cup = mug_walls(body, "bench")
    C, R = body_spheres(body, setup.radius, "bench")
    print(f"\npour of {a.grains} grains, 0.6 s, into the mug: exact cup walls vs {len(C)} static spheres")
    print("| walls | wall hits | hits > 5 cm/s | sum J^2 [dB] | grain-grain | simulation [s] |")
    print("|---|---|---|---|---|---|")
    for name, cup_arg, extra in (("exact cup", cup, ()), ("static spheres", None, [StaticSpheres(C, R, body="cup")])):
        t0 = time.perf_counter()
        ev = simulate_pour(setup, cup_arg, container="cup", ground=0.0, duration=0.6, seed=2, extra_walls=extra)
        el = time.perf_counter() - t0
        h = (ev.kind == 1) & (ev.id_b == ev.containers.index("cup"))
        e = np.where(np.isnan(ev.e[h]), setup.restitution, ev.e[h])
        _, J = wall_hit_parameters(ev.radius_a[h], ev.v0[h], e, setup.material, body.material)
        print(f"| {name} | {h.sum()} | {(ev.v0[h] > 0.05).sum()} | {10 * np.log10(np.sum(J ** 2)):.2f} | "
              f"{(ev.kind == 0).sum()} | {el:.1f} |", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
