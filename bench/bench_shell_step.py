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
of dynamics.integrate, CompiledCubature.newmark), with U_V stored as float64 and as float32 (precision=; float64
arithmetic either way), on 1 and 2 Numba threads (bitwise equality checked), interleaved over the repeats (this
machine's shared L3 makes single timings noisy; the best of the repeats is reported); the plain
NumPy cubature path (cubature_force with ReducedShell.element_forces: one full ShellModel.element_forces per
call, then the 800 projections); the exact full reduced force U^T f_int(U q). Flops per step are estimated as
2 x 3 V r for the gather + 2 x 3 V r for the projection (V the vertices stored: each chunk's distinct stencil
vertices, at most 6 per triangle, 12 with midedge bending) + k x ~300 per flap for the elements, and compared
with a measured
matmul peak (numpy, 1 BLAS thread and default threads, in child processes).

    .venv/bin/python bench/bench_shell_step.py [--modes 200] [--elements 800] [--resolution 96]
                                               [--basis synthetic|modes] [--bending flap|midedge]
                                               [--steps 2000] [--repeat 5]
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


def build_case(r: int, k: int, resolution: int = 96, bending: str = "flap", basis: str = "synthetic"):
    """The bench's trash can: (model, ReducedShell, Cubature of k random elements, rng, setup seconds)."""
    t0 = time.perf_counter()
    mesh = make_shell("trash_can", resolution=resolution)
    model = ShellModel(mesh.vertices, mesh.faces, H, STEEL, bending=bending)
    Nf = len(model.faces)
    rng = np.random.default_rng(0)
    if basis == "modes":
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
    return model, rs, Cubature(el, w, 0.0, np.nan, np.zeros(0)), rng, t_setup


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--elements", type=int, default=800)
    ap.add_argument("--resolution", type=int, default=96)
    ap.add_argument("--basis", choices=("synthetic", "modes"), default="synthetic")
    ap.add_argument("--bending", choices=("flap", "midedge"), default="flap",
                    help="midedge: 24-slot stencils (4 flaps per triangle), 4x the rows streamed per element")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    r, k = a.modes, a.elements

    model, rs, cub, rng, t_setup = build_case(r, k, a.resolution, a.bending, a.basis)
    Nf, el = len(model.faces), cub.elements
    print(f"trash can ({a.bending} bending): {model.n_vertices} vertices, {Nf} triangles, h = {H * 1e3:g} mm, "
          f"r = {rs.r} "
          f"({a.basis} basis), k = {k} cubature elements; setup {t_setup:.1f} s")

    t0 = time.perf_counter()
    cc = rs.compiled_cubature(cub)
    t_pre = time.perf_counter() - t0
    ccs = {"float64": cc, "float32": rs.compiled_cubature(cub, precision="float32")}
    # a pose with vertex displacements ~ h (nonlinear regime)
    q = rng.standard_normal(rs.r)
    q *= H / np.abs(rs.U @ q).max()
    for c in ccs.values():
        c.force(q)                                            # compile (cached)
        c.newmark(q, np.zeros(rs.r), 1e-9, 1)

    n0 = numba.get_num_threads()
    dt = 0.5 / rs.omega.max()
    d = np.full(rs.r, 1.0)
    threads = [th for th in (1, 2) if th <= numba.config.NUMBA_NUM_THREADS]
    tf = {(p, th): np.inf for p in ccs for th in threads}
    ts = dict(tf)
    forces = {}
    for _ in range(a.repeat):                                 # interleaved: each repeat times every variant
        for th in threads:
            numba.set_num_threads(th)
            for p, c in ccs.items():
                forces[p, th] = c.force(q)
                tf[p, th] = min(tf[p, th], best(lambda: c.force(q), 1, inner=200))
                ts[p, th] = min(ts[p, th], best(lambda: c.newmark(q, np.zeros(rs.r), dt, a.steps, d=d), 1) / a.steps)
    numba.set_num_threads(n0)
    same = all(np.array_equal(forces[p, threads[0]], forces[p, th]) for p in ccs for th in threads)

    f_np = cubature_force(cub, rs.element_forces, q)
    t_np = best(lambda: cubature_force(cub, rs.element_forces, q), max(1, a.repeat // 2))
    f_ex = rs.force(q)
    t_ex = best(lambda: rs.force(q), max(1, a.repeat // 2))
    rel = np.abs(forces["float64", 1] - f_np).max() / np.abs(f_np).max()
    rel32 = np.abs(forces["float32", 1] - forces["float64", 1]).max() / np.abs(forces["float64", 1]).max()

    S = model.stencil.shape[1]                                # 6 (flap) or 24 (midedge) stencil slots
    rows = cc.Ue.shape[0]                                     # U's rows stored: 3 x the chunks' distinct vertices
    flops = 2 * 2 * rows * rs.r + k * ELEMENT_FLOPS * S // 6
    p1, pn = matmul_peak(1), matmul_peak(None)
    print(f"stored vertices: {cc.Ue.shape[0] // 3} for {k} triangles' {k * S} stencil slots "
          f"({len(np.unique(model.stencil[el]))} distinct in all)")
    print(f"precompute (U_V gather, {cc.Ue.nbytes / 2**20:.1f} MiB float64, "
          f"{ccs['float32'].Ue.nbytes / 2**20:.1f} MiB float32): {t_pre * 1e3:.1f} ms")
    print(f"flops per step ~ {flops / 1e6:.2f} MFLOP; numpy 2000^3 matmul peak: {p1:.1f} GFLOP/s (1 BLAS thread), "
          f"{pn:.1f} GFLOP/s (default threads)")
    print(f"{'path':44s} {'ms/step':>10s} {'GFLOP/s':>8s} {'% peak':>7s} {'vs paper 16.1 ms':>17s} {'U_V read':>10s}")
    for p in ccs:
        for th in threads:
            pk = p1 if th == 1 else pn
            for name, t in ((f"force, U_V {p}, {th} thread(s)", tf[p, th]),
                            (f"step (force + Newmark), {p}, {th} thr.", ts[p, th])):
                g = flops / t / 1e9
                print(f"{name:44s} {t * 1e3:10.4f} {g:8.2f} {100 * g / pk:6.1f}% {16.1e-3 / t:16.1f}x "
                      f"{ccs[p].Ue.nbytes / t / 1e9:7.1f} GB/s")
    for name, t in (("numpy cubature (ReducedShell.element_forces)", t_np), ("numpy exact full force U^T f(Uq)", t_ex)):
        print(f"{name:44s} {t * 1e3:10.4f} {'':>8s} {'':>7s} {16.1e-3 / t:16.2f}x")
    t1 = tf["float64", 1]
    print(f"speed-up of the compiled force (float64, 1 thread): {t_np / t1:.0f}x over numpy cubature, "
          f"{t_ex / t1:.0f}x over the exact force")
    for p in ccs:
        if 2 in threads:
            print(f"{p}: 2 threads vs 1: force {tf[p, 1] / tf[p, 2]:.2f}x, step {ts[p, 1] / ts[p, 2]:.2f}x")
    for th in threads:
        print(f"float32 vs float64 storage, {th} thread(s): force {tf['float64', th] / tf['float32', th]:.2f}x, "
              f"step {ts['float64', th] / ts['float32', th]:.2f}x faster")
    print(f"compiled vs numpy cubature force: max rel diff {rel:.2e}; float32 vs float64 storage: {rel32:.2e}; "
          f"bitwise equal on 1 and 2 threads: {same}; "
          f"cubature vs exact (random elements/weights, not trained): {np.linalg.norm(f_np - f_ex) / np.linalg.norm(f_ex):.2f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
