"""Cubature training time of a trash-can-sized shell, 1 vs 2 worker processes side by side, against the paper.

Chadwick, An & James 2009, Table 1-2: the trash can (0.75 m, 77,536 triangles, 200 modes, steel, h = 2 mm) got
an 800-point cubature with 10.3 % error, trained in 2.49 h on 8 cores. Here: make_shell("trash_can") at
``--resolution`` segments (248 gives 77,362 triangles, the paper's size; 96, the scene default, 14,433), steel,
h = 2 mm, the lowest ``--modes`` modes (200), trained by impactsound.sources.shell.train.shell_cubature to
``--target`` (0.1) or ``--max-elements`` (800, the paper's count), 100 training + 25 held-out poses, 256 random
candidates per greedy iteration, no cache.

The modes are solved once here (timed; the paper's modal analysis is separate from its cubature time too) and
each worker count runs in a fresh child process (so that its peak memory is its own): the time of the pose pass
(every triangle's forces at every pose; the part that runs on the workers), of the greedy loop, the result's
size and errors, the peak resident memory of the child and of its worker processes, and whether its elements
and weights are bitwise those of the 1-worker run.

``--compare-old N`` also times N greedy iterations of the previous training (the committed cubature.py: every
candidate scoring and every column a pass over the mesh per pose through ReducedShell.element_forces, the
column matrix rebuilt and NNLS refit on the full (P r) x n system each iteration) against N iterations of
the current one, on the same model.

    .venv/bin/python bench/bench_shell_train.py [--resolution 248] [--modes 200] [--max-elements 800]
                                                [--target 0.1] [--workers 1,2] [--small] [--compare-old N]

``--small``: resolution 48 (4,178 triangles), 100 modes, at most 400 elements (about a minute in all).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

H = 2e-3                 # trash-can wall [m], Table 1
PAPER = {"triangles": 77536, "modes": 200, "elements": 800, "error": 0.103, "hours": 2.49, "cores": 8,
         "modal_s": 569.0}


def build(resolution: int):
    from impactsound.fem.shell import ShellModel
    from impactsound.materials import get_material
    from impactsound.scene.shells import make_shell
    m = make_shell("trash_can", resolution=resolution)
    return ShellModel(m.vertices, m.faces, H, get_material("steel"))


class _Modes:
    def __init__(self, U, omega2):
        self.U, self.omega2 = U, omega2


def child(a) -> None:
    """One training in this process; prints a JSON line."""
    from impactsound.sources.shell.train import shell_cubature
    model = build(a.resolution)
    z = np.load(a.modes_file)
    modes = _Modes(z["U"], z["omega2"])
    marks = {}

    def progress(x):
        if isinstance(x, str) and x.startswith("cubature: greedy") and "greedy" not in marks:
            marks["greedy"] = time.perf_counter()

    t0 = time.perf_counter()
    cub = shell_cubature(model, modes, target=a.target, max_elements=a.max_elements, workers=a.child,
                         cache=False, progress=progress)
    t1 = time.perf_counter()
    np.savez(a.result_file, elements=cub.elements, weights=cub.weights, history=cub.history)
    tg = marks.get("greedy", t1)
    print(json.dumps({"workers": a.child, "time_s": t1 - t0, "pose_pass_s": tg - t0, "greedy_s": t1 - tg,
                      "elements": int(len(cub.elements)), "iterations": int(cub.meta["iterations"]),
                      "train_error": cub.train_error, "holdout_error": cub.holdout_error,
                      "stop": cub.meta["stop_reason"], "peaks_h": cub.meta["pose_peak_displacement_over_h"],
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "children_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))


def compare_old(model, modes, n_iter: int) -> None:
    """N iterations of the committed (previous) training against the current one, same model and settings."""
    import importlib.util
    from impactsound.sources.shell.cubature import train_cubature
    from impactsound.sources.shell.reduced import ReducedShell
    from impactsound.sources.shell.train import ShellTrainingForces, pose_amplitude
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        src = subprocess.run(["git", "-C", repo, "show", "HEAD:src/impactsound/sources/shell/cubature.py"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"--compare-old: cannot read the committed cubature.py ({exc}); skipped")
        return
    if "_LeastSquares" in src:
        print("--compare-old: the committed cubature.py is already the new one; skipped")
        return
    path = os.path.join(tempfile.mkdtemp(), "old_cubature.py")
    with open(path, "w") as f:
        f.write(src.replace("from ...assets.store", "from impactsound.assets.store")
                   .replace("from ...errors", "from impactsound.errors"))
    spec = importlib.util.spec_from_file_location("old_cubature", path)
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_cubature"] = old                    # dataclasses look their module up there
    spec.loader.exec_module(old)
    rs = ReducedShell.from_modes(model, modes)
    amp = pose_amplitude(model, rs.U, 1.0)
    kw = dict(amplitude=amp, exponent=2.0, n_train=100, n_holdout=0, target=1e-9, max_iterations=n_iter)
    t = time.perf_counter()
    c_old = old.train_cubature(rs.element_forces, len(model.faces), rs.omega, **kw)
    t_old = time.perf_counter() - t
    from impactsound.parallel import single_threaded_blas
    with single_threaded_blas():                          # the targets alone, old way (for the split below)
        t = time.perf_counter()
        old.full_force(rs.element_forces, len(model.faces), np.zeros((100, rs.r)) + 1e-9)
        t_full = time.perf_counter() - t
    t = time.perf_counter()
    c_new = train_cubature(ShellTrainingForces(model, rs.U), len(model.faces), rs.omega, **kw)
    t_new = time.perf_counter() - t
    same = np.array_equal(np.sort(c_old.elements), np.sort(c_new.elements))
    print(f"\nprevious vs current training, {n_iter} greedy iterations ({len(model.faces)} triangles, r = {rs.r}, "
          f"100 poses):")
    print(f"  previous: {t_old:8.1f} s = targets {t_full:.1f} s + {(t_old - t_full) / n_iter:.2f} s per iteration")
    print(f"  current:  {t_new:8.1f} s (pose pass and targets included)")
    print(f"  same elements chosen: {same}; errors after {n_iter}: previous {c_old.history[-1]:.6f}, current "
          f"{c_new.history[-1]:.6f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--resolution", type=int, default=248)
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--max-elements", type=int, default=800)
    ap.add_argument("--target", type=float, default=0.1)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--compare-old", type=int, default=0, metavar="N")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--modes-file", help=argparse.SUPPRESS)
    ap.add_argument("--result-file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.small:
        a.resolution, a.modes, a.max_elements = 48, 100, 400
    if a.child:
        return child(a)

    from impactsound.fem.shell import shell_modes
    from impactsound.parallel import local_cores
    from impactsound.sources.shell.train import PAPER_TRASH_CAN_CUBATURE_S
    t = time.perf_counter()
    model = build(a.resolution)
    modes = shell_modes(model, f_max=None, n_modes=a.modes)
    t_modes = time.perf_counter() - t
    f = modes.frequencies_hz
    r = len(f)
    print(f"trash can: {model.n_vertices} vertices, {len(model.faces)} triangles (resolution {a.resolution}), steel, "
          f"h = {H * 1e3:g} mm, r = {r} modes {f[0]:.1f}-{f[-1]:.1f} Hz; modes solved in {t_modes:.1f} s "
          f"(paper: {PAPER['modal_s']:.0f} s); {local_cores()} cores here")
    print(f"cubature: target {a.target:g}, at most {a.max_elements} triangles, 100 + 25 poses, 256 candidates "
          f"per iteration, pose std: lowest mode's peak displacement = 1 h")
    tmp = tempfile.mkdtemp(prefix="bench_shell_train_")
    mf = os.path.join(tmp, "modes.npz")
    np.savez(mf, U=modes.U, omega2=modes.omega2)
    rows, ref = [], None
    for w in [int(x) for x in a.workers.split(",")]:
        rf = os.path.join(tmp, f"result_{w}.npz")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(w), "--modes-file", mf, "--result-file",
               rf, "--resolution", str(a.resolution), "--max-elements", str(a.max_elements), "--target",
               str(a.target)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-3000:])
            raise SystemExit(f"child with {w} workers failed")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        res = np.load(rf)
        if ref is None:
            ref = res
        row["bitwise"] = all(np.array_equal(ref[k], res[k]) for k in ("elements", "weights", "history"))
        rows.append(row)
    print(f"\n{'':22s} {'total s':>8s} {'pose pass s':>11s} {'greedy s':>9s} {'triangles':>9s} {'train err':>9s} "
          f"{'held-out':>8s} {'stop':>12s} {'peak RSS MiB':>12s} {'workers MiB':>11s} {'= 1 worker':>10s}")
    for x in rows:
        print(f"{str(x['workers']) + ' worker(s)':22s} {x['time_s']:8.1f} {x['pose_pass_s']:11.1f} "
              f"{x['greedy_s']:9.1f} {x['elements']:9d} {x['train_error']:9.2%} {x['holdout_error']:8.2%} "
              f"{x['stop']:>12s} {x['rss_mib']:12.0f} {x['children_rss_mib']:11.0f} {str(x['bitwise']):>10s}")
    p = PAPER
    print(f"{'paper (8 cores, 2009)':22s} {PAPER_TRASH_CAN_CUBATURE_S:8.0f} {'':11s} {'':9s} {p['elements']:9d} "
          f"{p['error']:9.2%} {'':8s} {'':12s}   ({p['triangles']} triangles, {p['modes']} modes; Table 2: "
          f"{p['hours']} h)")
    best = min(x["time_s"] for x in rows)
    print(f"\nours (best) {best:.1f} s = {best / 3600:.4f} h vs the paper's {p['hours']} h on {p['cores']} cores: "
          f"{PAPER_TRASH_CAN_CUBATURE_S / best:.0f}x less wall time, on {local_cores()} cores")
    print(f"training poses' peak displacement (all modes) / h: {rows[0]['peaks_h']}")
    if len(rows) > 1:
        print(f"speed-up of {rows[1]['workers']} workers over 1: {rows[0]['time_s'] / rows[1]['time_s']:.2f}x total, "
              f"{rows[0]['pose_pass_s'] / rows[1]['pose_pass_s']:.2f}x on the pose pass (a local pool is started "
              f"per map_tasks call)")
    if a.compare_old:
        compare_old(model, modes, a.compare_old)


if __name__ == "__main__":
    main()
