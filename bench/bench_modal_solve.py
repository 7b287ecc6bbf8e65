"""Eigen-solve speed: plain scipy eigsh vs impactsound.fem.eigen.solve_modes, side by side in one run.

Builds a ~10 k-node P1 tet mesh of a 200 x 100 x 20 mm steel plate (~31 k dofs), asks for 60 elastic modes
(66 with the 6 rigid ones) from both, and prints wall times, their ratio, the largest relative frequency
difference and peak memory (tracemalloc for Python-side arrays; ru_maxrss for the process).

    .venv/bin/python bench/bench_modal_solve.py [--max-edge 0.0049] [--modes 60] [--repeat 1]
"""
from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
import scipy.sparse.linalg as spla
import trimesh

from impactsound.fem.assembly import assemble
from impactsound.fem.eigen import solve_modes
from impactsound.mesh.tetra import tetrahedralize

E, NU, RHO = 200e9, 0.30, 7850.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-edge", type=float, default=0.0049)
    ap.add_argument("--modes", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    box = trimesh.creation.box(extents=(0.2, 0.1, 0.02))
    nodes, tets = tetrahedralize(box, max_edge=a.max_edge)
    lam = E * NU / ((1 + NU) * (1 - 2 * NU))
    mu = E / (2 * (1 + NU))
    K, M, _, _ = assemble(nodes, tets, lam, mu, RHO, order=1)
    print(f"mesh: {len(nodes)} nodes, {len(tets)} tets, {K.shape[0]} dofs, {a.modes} elastic modes")
    k = a.modes + 6
    for rep in range(a.repeat):
        tracemalloc.start()
        t0 = time.perf_counter()
        w, _ = spla.eigsh(K, k=k, M=M, sigma=(2 * np.pi * 20.0) ** 2, which="LM")
        t_plain = time.perf_counter() - t0
        peak_plain = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        f_plain = np.sort(np.sqrt(np.abs(w)) / (2 * np.pi))[6:]

        tracemalloc.start()
        t0 = time.perf_counter()
        r = solve_modes(K, M, a.modes, scale=(E, RHO, float(np.linalg.norm(np.ptp(nodes, axis=0)))),
                        coords=nodes)
        t_ours = time.perf_counter() - t0
        peak_ours = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        diff = np.max(np.abs(r.frequencies_hz - f_plain) / f_plain)
        print(f"[{rep}] plain eigsh      : {t_plain:7.2f} s   peak Python arrays {peak_plain / 2**20:7.1f} MiB")
        print(f"[{rep}] solve_modes      : {t_ours:7.2f} s   peak Python arrays {peak_ours / 2**20:7.1f} MiB"
              f"   ({r.info.get('solves')} solves, {r.info.get('steps')} steps, {r.info.get('restarts')} restarts)")
        print(f"[{rep}] speed-up         : {t_plain / t_ours:7.2f} x   max |df|/f = {diff:.2e}"
              f"   f1..f3 = {np.round(r.frequencies_hz[:3], 2).tolist()} Hz   max residual {r.residuals.max():.1e}")
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
