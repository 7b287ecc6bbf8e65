"""One reduced nonlinear-shell time step: compiled cubature kernel vs the NumPy paths, side by side in one run.

Chadwick, An & James 2009, sec. 2.3 (cubature reduced force, explicit subspace Newmark at audio rate; the paper
reports 16.1 ms per step for its trash can). A trash-can shell (impactsound.scene.shells.make_shell("trash_can"),
steel, h = 0.5 mm), r modes (default 200) and k cubature elements (default 800, drawn at random with random
positive weights: the timing does not depend on which elements a training would pick).

Basis: by default a SYNTHETIC mass-orthonormal basis U = M^{-1/2} Qr (Qr a random orthonormal (3 Nv, r) matrix,
so U^T M U = I as for modes) with omega^2 the eigenvalues of U^T K U -- the cost of a step does not depend on U's
values, and 200 true modes of the fine mesh take minutes to solve. ``--basis modes`` solves the true modes (use
a coarser ``--resolution`` then).

Timed: the compiled cubature force (CompiledCubature.force) and a whole compiled step (force + the Newmark update
of dynamics.integrate, CompiledCubature.newmark), on 1 and 2 Numba threads (bitwise equality checked); the plain
NumPy cubature path (cubature_force with ReducedShell.element_forces: one full ShellModel.element_forces per
call, then the 800 projections); the exact full reduced force U^T f_int(U q). Flops per step are estimated as
k (2 x 18 r for the gather + 2 x 18 r for the projection + ~300 for the element) and compared with a measured
matmul peak (numpy, 1 BLAS thread and default threads, in child processes).

    .venv/bin/python bench/bench_shell_step.py [--modes 200] [--elements 800] [--resolution 96]
                                               [--basis synthetic|modes] [--steps 2000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import numba
import numpy as np

from impactsound.fem.shell import ShellModel, shell_modes
from impactsound.materials import make_material
from impactsound.scene.shells import make_shell
from impactsound.sources.shell.cubature import Cubature, cubature_force
from impactsound.sources.shell.reduced import ReducedShell

STEEL = make_material("steel", rho=7800.0, E=200e9, nu=0.3)
H = 0.5e-3
ELEMENT_FLOPS = 300          # membrane + 3 hinges + bending projection, rough count


def best(fn, repeat, inner=1):
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        t.append((time.perf_counter() - t0) / inner)
    return min(t)


def matmul_peak(threads: int | None) -> float:
    """GFLOP/s of a 2000^3 float64 matmul in a child process (best of 3)."""
    env = dict(os.environ)
    if threads is not None:
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[k] = str(threads)
    code = ("import numpy as np, time\n"
            "n = 2000; a = np.random.rand(n, n); b = np.random.rand(n, n); a @ b\n"
            "t = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(3))\n"
            "print(2 * n**3 / t / 1e9)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--elements", type=int, default=800)
    ap.add_argument("--resolution", type=int, default=96)
    ap.add_argument("--basis", choices=("synthetic", "modes"), default="synthetic")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    r, k = a.modes, a.elements

    t0 = time.perf_counter()
    mesh = make_shell("trash_can", resolution=a.resolution)
    model = ShellModel(mesh.vertices, mesh.faces, H, STEEL)
    Nf = len(model.faces)
    rng = np.random.default_rng(0)
    if a.basis == "modes":
        modes = shell_modes(model, f_max=None, n_modes=r)
        rs = ReducedShell.from_modes(model, modes)
    else:
        mdiag = model.mass().diagonal()
        Qr, _ = np.linalg.qr(rng.standard_normal((model.ndof, r)))
        U = Qr / np.sqrt(mdiag)[:, None]
        lam, V = np.linalg.eigh(U.T @ (model.stiffness() @ U))
        U = U @ V                                             # U^T K U diagonal, U^T M U = I
        rs = ReducedShell(model, np.ascontiguousarray(U), np.sqrt(np.maximum(lam, 1e-30)))
    t_setup = time.perf_counter() - t0
    el = rng.choice(Nf, size=k, replace=False).astype(np.int64)
    w = rng.uniform(0.5, 1.5, k) * Nf / k
    cub = Cubature(el, w, 0.0, np.nan, np.zeros(0))
    print(f"trash can: {model.n_vertices} vertices, {Nf} triangles, h = {H * 1e3:g} mm, r = {rs.r} "
          f"({a.basis} basis), k = {k} cubature elements; setup {t_setup:.1f} s")

    t0 = time.perf_counter()
    cc = rs.compiled_cubature(cub)
    t_pre = time.perf_counter() - t0
    # a pose with vertex displacements ~ h (nonlinear regime)
    q = rng.standard_normal(rs.r)
    q *= H / np.abs(rs.U @ q).max()
    cc.force(q)                                               # compile (cached)
    cc.newmark(q, np.zeros(rs.r), 1e-9, 1)

    n0 = numba.get_num_threads()
    dt = 0.5 / rs.omega.max()
    d = np.full(rs.r, 1.0)
    res = {}
    for th in (1, 2):
        if th > numba.config.NUMBA_NUM_THREADS:
            continue
        numba.set_num_threads(th)
        f = cc.force(q)
        tf = best(lambda: cc.force(q), a.repeat, inner=200)
        ts = best(lambda: cc.newmark(q, np.zeros(rs.r), dt, a.steps, d=d), max(2, a.repeat // 2)) / a.steps
        res[th] = (f, tf, ts)
    numba.set_num_threads(n0)
    same = all(np.array_equal(res[1][0], v[0]) for v in res.values())

    f_np = cubature_force(cub, rs.element_forces, q)
    t_np = best(lambda: cubature_force(cub, rs.element_forces, q), max(1, a.repeat // 2))
    f_ex = rs.force(q)
    t_ex = best(lambda: rs.force(q), max(1, a.repeat // 2))
    rel = np.abs(res[1][0] - f_np).max() / np.abs(f_np).max()

    flops = k * (2 * 18 * rs.r * 2 + ELEMENT_FLOPS)
    p1, pn = matmul_peak(1), matmul_peak(None)
    print(f"precompute (U_V gather, {cc.Ue.nbytes / 2**20:.1f} MiB): {t_pre * 1e3:.1f} ms")
    print(f"flops per step ~ {flops / 1e6:.2f} MFLOP; numpy 2000^3 matmul peak: {p1:.1f} GFLOP/s (1 BLAS thread), "
          f"{pn:.1f} GFLOP/s (default threads)")
    print(f"{'path':44s} {'ms/step':>10s} {'GFLOP/s':>8s} {'% peak':>7s} {'vs paper 16.1 ms':>17s}")
    for th, (_, tf, ts) in res.items():
        pk = p1 if th == 1 else pn
        for name, t in ((f"compiled cubature force, {th} thread(s)", tf),
                        (f"compiled step (force + Newmark), {th} thr.", ts)):
            g = flops / t / 1e9
            print(f"{name:44s} {t * 1e3:10.4f} {g:8.2f} {100 * g / pk:6.1f}% {16.1e-3 / t:16.1f}x")
    for name, t in (("numpy cubature (ReducedShell.element_forces)", t_np), ("numpy exact full force U^T f(Uq)", t_ex)):
        print(f"{name:44s} {t * 1e3:10.4f} {'':>8s} {'':>7s} {16.1e-3 / t:16.2f}x")
    t1 = res[1][1]
    print(f"speed-up of the compiled force (1 thread): {t_np / t1:.0f}x over numpy cubature, {t_ex / t1:.0f}x over "
          f"the exact force")
    if 2 in res:
        print(f"2 threads vs 1: force {res[1][1] / res[2][1]:.2f}x, step {res[1][2] / res[2][2]:.2f}x")
    print(f"compiled vs numpy cubature force: max rel diff {rel:.2e}; bitwise equal on 1 and 2 threads: {same}; "
          f"cubature vs exact (random elements/weights, not trained): {np.linalg.norm(f_np - f_ex) / np.linalg.norm(f_ex):.2f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
