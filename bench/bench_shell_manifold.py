"""Cost of the quadratic-manifold shell basis (sources/shell/manifold.py) against the paper's linear basis.

Side by side in one run, the same trash can (impactsound.scene.shells.make_shell("trash_can"), steel, h = 0.5 mm),
r modes and k cubature triangles (random elements and weights: the cost does not depend on which), float32 rows
as scenes render:
- one time step of the render kernel (sources/shell/_render_kernel.run_block: cubature force + Newmark), linear
  basis vs manifold with the modal derivatives of every pair among the lowest K modes (K (K + 1) / 2 extra
  columns); goal: at most 2x;
- the precompute of the modal derivatives on true modes of a coarser can (``--md-resolution``; their cost is one
  sparse factorisation and 4 internal-force evaluations per pair).

    .venv/bin/python bench/bench_shell_manifold.py [--modes 200] [--elements 800] [--derivatives 10]
                                                   [--steps 2000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from impactsound.fem.shell import ShellModel, shell_modes
from impactsound.materials import make_material
from impactsound.scene.shells import make_shell
from impactsound.sources.shell import _render_kernel as kern
from impactsound.sources.shell.cubature import Cubature
from impactsound.sources.shell.manifold import ModalDerivatives, modal_derivatives
from impactsound.sources.shell.reduced import ReducedShell

STEEL = make_material("steel", rho=7800.0, E=200e9, nu=0.3)
H = 0.5e-3


def steps_time(cc, rs, n, repeat):
    """Seconds per free step of the render kernel (best of ``repeat``) from a pose with displacements ~ h."""
    r = rs.r
    rng = np.random.default_rng(1)
    q0 = rng.standard_normal(r)
    q0 *= H / np.abs(rs.U @ q0).max()
    args = cc.kernel_args() + (cc.pairs,)
    w2 = rs.omega ** 2
    Kc = np.diag(w2)
    dt = 0.5 / rs.omega.max()
    d = np.full(r, 1.0)
    best = np.inf
    for _ in range(repeat + 1):                                   # the first call compiles
        q, v = q0.copy(), np.zeros(r)
        fint = kern.force_of(q, w2, True, Kc, *args)
        qdd = np.zeros((n, r))
        t0 = time.perf_counter()
        kern.run_block(q, v, fint, dt, w2, d, True, Kc, *args, 0, np.zeros(0, np.int64), np.zeros((0, r)), 0, 1e30,
                       np.ones(0), np.zeros(0, np.int8), qdd, np.zeros((0, r)))
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--elements", type=int, default=800)
    ap.add_argument("--derivatives", type=int, default=10)
    ap.add_argument("--resolution", type=int, default=96)
    ap.add_argument("--md-resolution", type=int, default=48)
    ap.add_argument("--md-modes", type=int, default=60)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    mesh = make_shell("trash_can", resolution=a.resolution)
    model = ShellModel(mesh.vertices, mesh.faces, H, STEEL)
    rng = np.random.default_rng(0)
    mdiag = model.mass().diagonal()
    Qr, _ = np.linalg.qr(rng.standard_normal((model.ndof, a.modes)))
    U = Qr / np.sqrt(mdiag)[:, None]
    lam, V = np.linalg.eigh(U.T @ (model.stiffness() @ U))
    rs = ReducedShell(model, np.ascontiguousarray(U @ V), np.sqrt(np.maximum(lam, 1e-30)))
    Nf = len(model.faces)
    el = rng.choice(Nf, size=a.elements, replace=False).astype(np.int64)
    cub = Cubature(el, rng.uniform(0.5, 1.5, a.elements) * Nf / a.elements, 0.0, np.nan, np.zeros(0))
    K = min(a.derivatives, a.modes)
    pairs = np.array([(i, j) for i in range(K) for j in range(i, K)], np.int64)
    # synthetic derivatives of a realistic size (the cost does not depend on their values)
    Psi = rng.standard_normal((model.ndof, len(pairs))) * (np.abs(rs.U[:, :K]).max() ** 2 * 1e-3)
    md = ModalDerivatives(Psi, pairs)
    print(f"trash can: {model.n_vertices} vertices, {Nf} triangles, r = {a.modes}, k = {a.elements} cubature "
          f"triangles, derivatives of the lowest {K} modes: {len(pairs)} extra columns")
    cc_lin = rs.compiled_cubature(cub, precision="float32")
    cc_man = rs.compiled_cubature(cub, precision="float32", derivatives=md)
    t_lin = t_man = np.inf
    for _ in range(2):                                            # interleaved
        t_lin = min(t_lin, steps_time(cc_lin, rs, a.steps, a.repeat))
        t_man = min(t_man, steps_time(cc_man, rs, a.steps, a.repeat))
    print(f"step, paper's linear basis : {t_lin * 1e3:8.4f} ms")
    print(f"step, quadratic manifold   : {t_man * 1e3:8.4f} ms")
    print(f"ratio manifold / linear    : {t_man / t_lin:8.2f}  (goal <= 2)")

    m2 = make_shell("trash_can", resolution=a.md_resolution)
    model2 = ShellModel(m2.vertices, m2.faces, H, STEEL)
    t0 = time.perf_counter()
    modes = shell_modes(model2, f_max=None, n_modes=a.md_modes)
    t_modes = time.perf_counter() - t0
    t0 = time.perf_counter()
    md2 = modal_derivatives(model2, modes.U, np.sqrt(modes.omega2), min(a.derivatives, a.md_modes))
    t_md = time.perf_counter() - t0
    print(f"precompute on a {len(m2.faces)}-triangle can: {a.md_modes} modes {t_modes:.1f} s, "
          f"{len(md2.pairs)} modal derivatives {t_md:.1f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
