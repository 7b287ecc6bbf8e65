"""Benchmark: how small own PAN fields are stored, and at what error (sources/pan/field_store.py).

Precomputes the PAN fields of two small objects (the demo's 8 mm steel ball, a 16 mm polycarbonate die cube; 5 x
10 directions) and prints, per storage tolerance eps, the dense float32 size of the coefficients, the stored
size, their ratio, and each field's relative L2 error of the stored form (the representation of Chadwick, Zheng &
James 2012, soundbank paper, sec. 4.1; goal: at least 5x smaller at the bank's eps 0.01). Also the peak RSS.

    .venv/bin/python bench/bench_pan_storage.py [--eps 0.01,0.04]
"""
from __future__ import annotations

import argparse
import resource
import time

import trimesh

from impactsound.materials import get_material
from impactsound.scene.primitives import make_primitive
from impactsound.sources.pan.field_store import compress_q
from impactsound.sources.pan.precompute import plan_pan, run_pan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eps", default="0.01,0.04")
    eps_list = [float(v) for v in ap.parse_args().eps.split(",")]
    cases = {"ball (steel, r 8 mm)": (make_primitive("sphere", {"radius": 0.008}), "steel"),
             "die (polycarbonate, 16 mm cube)": (trimesh.creation.box(extents=(0.016,) * 3), "polycarbonate")}
    for name, (mesh, mat) in cases.items():
        t = time.perf_counter()
        fld = run_pan(plan_pan(mesh, get_material(mat)))
        t_pre = time.perf_counter() - t
        for eps in eps_list:
            t = time.perf_counter()
            _, info = compress_q(fld.q, eps)
            t_c = time.perf_counter() - t
            print(f"{name}: q {fld.q.shape}, dense {info['dense_bytes'] / 1e6:.3f} MB; eps {eps:g}: stored "
                  f"{info['stored_bytes'] / 1e6:.3f} MB ({info['dense_bytes'] / info['stored_bytes']:.1f}x), "
                  f"errors % {[round(100 * e, 2) for e in info['errors']]}; compress {t_c:.2f} s "
                  f"(precompute {t_pre:.0f} s)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
