"""Benchmark: modal rendering with radiation that follows a moving body and listener vs the frozen (static) render.

The same events and modes, side by side: the frozen kernel (sources/modal_kernel.py: each impact's ring keeps
its pose and delay) and the moving one (sources/modal_moving.py: per-frame weights at a 1 kHz control rate,
emission-time modal state), both for the compact radiation model; the moving run includes evaluating the
retarded geometry and the weights of every frame (transfer/motion.py). Goal: the moving render costs at most 2x
the static render of the same events. Prints times, the ratio, x real time and peak memory.

    .venv/bin/python bench/bench_moving_radiation.py [--seconds 5] [--modes 200] [--events 40] [--listeners 2]
    .venv/bin/python bench/bench_moving_radiation.py --scene [SCENE.toml] [--transfer low_order|auto] [--walk]

With ``--scene`` (default: the built-in demo) it times the modal source's render of a real scene's events side by
side instead: radiation = "follow" (every body that moved, and every resting one, through the moving renderer)
against "frozen" (each impact's ring in its impact pose), with the same prepared models and events.
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from impactsound.scene.trajectory import Trajectory
from impactsound.sources.modal_kernel import synthesize
from impactsound.sources.modal_moving import FactoredWeights, synthesize_moving
from impactsound.transfer.low_order import compact_basis, compact_geometry, compact_weight_factors, compact_weights
from impactsound.transfer.motion import control_hop, retarded_geometry

C, RHO, FS = 343.2, 1.2041, 48000


def scene_bench(path, transfer, repeat, walk=False):
    """Modal render of a scene's events, follow vs frozen (module docstring); with ``walk`` every listener walks
    at 1 m/s along +x through its position over the scene (the frozen render keeps it where it starts)."""
    from impactsound.pipeline import scene_events
    from impactsound.scene import demo_scene_path, load_scene
    from impactsound.sources import modal as M
    from impactsound.sources.modal import ModalSource
    import tomllib
    p = path or demo_scene_path()
    d = tomllib.loads(open(p).read())
    d.setdefault("source", {}).setdefault("modal", {})["transfer"] = transfer
    if walk:
        T = float(d["scene"]["duration"])
        for li in d["listener"]:
            x, y, z = li.pop("position")
            li["trajectory"] = [[0.0, x - T / 2, y, z], [T, x + T / 2, y, z]]
    from pathlib import Path
    sc = load_scene(d, base=Path(p).parent)
    ev = scene_events(sc)
    ev = ev.select(ev.vn >= 0.05)
    prep = M.prepare(sc)
    L = np.array([l.position for l in sc.listeners])

    def run(follow):
        src = ModalSource(sc.bodies, prep.models, sc.ground, sc.air, transfers=prep.transfers, motion=ev.motion,
                          listeners=sc.listeners, follow=follow, resting=ev.resting if follow else None)
        return src.render(ev, L, sc.sample_rate, sc.duration)

    run(True), run(False)
    tf, tz = [], []
    for _ in range(repeat):
        t = time.perf_counter(); run(True); tf.append(time.perf_counter() - t)
        t = time.perf_counter(); run(False); tz.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    moving = sum(tr.moves for tr in (getattr(ev, "motion", None) or []))
    print(f"{p}: {len(ev)} events, {len(sc.bodies)} bodies ({moving} move), {sc.duration:g} s, radiation "
          f"{transfer}{', listeners walking at 1 m/s' if walk else ''}")
    print(f"frozen modal render : {min(tz) * 1e3:8.1f} ms")
    print(f"follow modal render : {min(tf) * 1e3:8.1f} ms")
    print(f"ratio follow/frozen : {min(tf) / min(tz):.2f}  (goal <= 2)")
    print(f"peak RSS            : {rss:.0f} MiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scene", nargs="?", const="", default=None, help="time a scene's modal render instead")
    ap.add_argument("--transfer", default="low_order", help="radiation of the scene's objects")
    ap.add_argument("--walk", action="store_true", help="with --scene: the listeners walk past at 1 m/s")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--events", type=int, default=40)
    ap.add_argument("--listeners", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="profile one moving render")
    ap.add_argument("--dense", action="store_true", help="hand the kernel (frames x modes) weight arrays instead of "
                    "the compact model's factored weights")
    a = ap.parse_args()
    if a.scene is not None:
        return scene_bench(a.scene or None, a.transfer, a.repeat, a.walk)
    rng = np.random.default_rng(0)
    m, E, L, n = a.modes, a.events, a.listeners, int(a.seconds * FS)
    w = 2 * np.pi * np.sort(rng.uniform(80.0, 20000.0, m))
    xi = 0.5 * (0.5 / w + 7.5e-8 * w)
    t0 = np.sort(rng.uniform(0.0, 0.8 * a.seconds, E))
    tau = rng.uniform(2e-5, 2e-4, E)
    imp = rng.normal(size=(E, m)) * 1e-3
    V = rng.normal(size=m) * 1e-5
    D = rng.normal(size=(m, 3)) * 1e-6
    basis = compact_basis(V, D)
    s = -xi * w + 1j * w * np.sqrt(1 - xi**2)
    # a body rolling and spinning across the floor, listeners walking past
    tt = np.linspace(0, a.seconds, int(a.seconds * 100) + 1)
    ang = 3.0 * tt
    body = Trajectory(tt, np.stack([-1 + 0.4 * tt, 0.1 * tt, 0.05 + 0 * tt], 1),
                      np.stack([np.cos(ang / 2), 0 * ang, np.sin(ang / 2), 0 * ang], 1))
    lis0 = np.stack([np.array([0.5 * k, -1.0, 1.2]) for k in range(L)])
    # frozen: geometry at each event's pose (listeners fixed at t = 0)
    X = body.position_at(t0)
    from impactsound.rotation import quat_to_matrix
    R = quat_to_matrix(body.quaternion_at(t0))
    xb_e = np.einsum("eji,elj->eli", R, lis0[None] - X[:, None])
    geom_e, delay_e = compact_geometry(xb_e, C, RHO)

    def static():
        return synthesize(w, xi, t0, tau, imp, delay_e, geom_e, basis, FS, n, cutoff_db=100.0)

    def moving():
        H = control_hop(FS)
        K = -(-n // H) + 2
        tk = np.arange(K) * (H / FS)
        xl = lis0[None] + (np.array([1.0, 0.0, 0.0]) * tk[:, None])[:, None, :]     # walking at 1 m/s
        geo = retarded_geometry(body, tk, xl, C)

        def weights(frames):
            if a.dense:
                return compact_weights(geo.x_body[frames], s, V, D, C, RHO, geo.amplification[frames])
            return FactoredWeights(*compact_weight_factors(geo.x_body[frames], s, V, D, C, RHO,
                                                           geo.amplification[frames]))

        return synthesize_moving(w, xi, t0, tau, imp, geo.delay, weights, H, geom_e, basis, FS, n, cutoff_db=100.0)

    static(), moving()                                                 # compile
    if a.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        moving()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(8)
    ts, tm = [], []
    for _ in range(a.repeat):                                          # interleaved, best of
        t = time.perf_counter(); static(); ts.append(time.perf_counter() - t)
        t = time.perf_counter(); moving(); tm.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{m} modes, {E} events, {L} listeners, {a.seconds:g} s at {FS} Hz")
    print(f"static (frozen) render : {min(ts) * 1e3:8.1f} ms  ({a.seconds / min(ts):6.0f}x real time)")
    print(f"moving (follow) render : {min(tm) * 1e3:8.1f} ms  ({a.seconds / min(tm):6.0f}x real time)")
    print(f"ratio moving / static  : {min(tm) / min(ts):.2f}  (goal <= 2)")
    print(f"peak RSS               : {rss:.0f} MiB")


if __name__ == "__main__":
    main()
