"""Report: proxy soundbank against the truth (Chadwick, Zheng & James 2012, "Faster acceleration noise for
multibody animations using precomputed soundbanks", sec. 3-5): the acceleration noise of an object from its
proxy's bank entry against the object's own PAN field, for the same contacts and body-frame listeners.

The checks, their setup and their error budgets are those of tests/validation/test_proxy_vs_pan.py (its module
docstring), whose functions this script runs; it prints one table:

1. ellipsoid 1 : 0.62 : 0.43 (on the bank grid, entry 25), own field on the entry's scaled grid: the matched-grid
   error (compression, fits, faceting), axis aligned and with the long axis along body z;
2. the sphere entry (65) against the exact rigid-sphere radiation (translation): the bank grid's own error;
3. cube (proxy: the sphere entry) and 4:1:1 long box (entry 5): the proxy model's approximation error;
4. the long box's equal-volume sphere proxy (the paper's comparison), for contacts anywhere on the box and for
   strikes near its ends (which set it rocking: rotation noise, which a sphere cannot make).

Columns: relative L2 error of the waveforms, level ratio (L2) and peak ratio proxy / own, for the contacts' full
accelerations and for their translation and rotation parts, all listeners together, after the common low-pass
(``band``). Rows repeat per bank eps and per own-field refinement (dx/r: the own field on a grid r times finer than
the one the test uses; the tolerance column applies to r = 1).

    .venv/bin/python bench/bench_proxy_accuracy.py [--preset tiny] [--eps 0.01 0.04] [--refine 1]
                                                   [--bank-dir DIR] [--cases ellipsoid sphere cube box]

Cost on the 2-core machine: tiny preset, two eps, refine 1: about 30 s (entries 2.5 s each, own fields 1-4 s).
--refine 1 2 adds own fields with 8x the cells (about 20 s for the ellipsoid, 15 s for the box, a minute for the
cube). --preset standard: entries of 251^3 cells (about a minute each) and own fields to match (the cube's 354^3
grid takes minutes and some 2 GB).
"""
from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import trimesh

from impactsound.sources.pan import soundbank as sb
from impactsound.sources.pan.proxy import Proxy, nearest_entry
from impactsound.sources.pan.synth import PANTable

_TEST = Path(__file__).resolve().parents[1] / "tests" / "validation" / "test_proxy_vs_pan.py"


def _checks():
    """The test module's functions (setup, synthesis, comparison: one definition of each check)."""
    spec = importlib.util.spec_from_file_location("test_proxy_vs_pan", _TEST)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                     # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _rows(label, res, eps, tol=None):
    out = []
    for part in ("all", "translation", "rotation"):
        for k, m in res[part].items():
            out.append((label, res["entry"], res["beta"], eps, k, part, m["error"], m["level"], m["peak"],
                        tol if (k == "dx/1" and tol is not None) else None))
    return out


def _sphere_vs_exact(T, bank):
    r = T.ELLIPSOID_A
    pr = Proxy(np.full(3, r), np.eye(3), np.zeros(3), 4.0 / 3.0 * np.pi * r**3)
    i, _, beta = nearest_entry(pr)
    case = T.Case("sphere", trimesh.creation.icosphere(subdivisions=4, radius=r), pr, i, beta,
                  beta * bank.preset.h, beta * bank.preset.dx)
    t0, tau, amp = T.contacts(case)
    amp = amp * T.PARTS["translation"][None, :]
    pts = T.listeners(case, T.spread_directions())
    f_c = T.comparison_band(case.dx)
    entry = bank.entry(i)
    y = T.band(T.render_proxy(entry, pr, beta, case.h, t0, tau, amp, pts), f_c)
    m = T.compare(y, T.exact_sphere(r, t0, tau, amp, case.h, pts, f_c))
    tol = T.STAIRCASE * case.dx / r + 2.0 * float(np.max(entry.errors[:3]))
    return {"entry": i, "beta": beta, "f_c": f_c, "translation": {"exact": m}}, tol


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tiny", choices=sorted(sb.PRESETS))
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.04])
    ap.add_argument("--refine", type=float, nargs="+", default=[1.0])
    ap.add_argument("--bank-dir", default=None, help="folder for the banks (default: a temporary one)")
    ap.add_argument("--cases", nargs="+", default=["ellipsoid", "sphere", "cube", "box"],
                    choices=["ellipsoid", "sphere", "cube", "box"])
    args = ap.parse_args(argv)
    T = _checks()
    preset = sb.get_preset(args.preset)
    refine = sorted(set(args.refine))
    tmp = tempfile.TemporaryDirectory(prefix="proxy_accuracy_") if args.bank_dir is None else None
    folder = Path(args.bank_dir or tmp.name)
    print("command:", shlex.join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv))))
    print(f"preset {preset.name} (dx {preset.dx} m, {preset.rate:g} Hz, h_ref {preset.h:g} s, "
          f"{preset.n_theta} x {preset.n_phi} directions); eps {args.eps}; own-field refinements {refine}")
    print(f"output {T.F_OUT:g} Hz, then one ideal low-pass at c / (8 dx) of the coarser grid; {T.N_CONTACTS} "
          f"surface contacts {T.SPACING * 1e3:g} ms apart, tau {T.TAU_RANGE[0]:g}-{T.TAU_RANGE[1]:g} h; listeners at "
          f"{T.LISTENER_R:g} A: 6 (aligned ellipsoid: grid nodes and between; boxes: spread), 4 (long-axis-z "
          f"ellipsoid: nodes of both frames); banks in {folder}")

    t_start = time.perf_counter()
    own = {}                       # own fields do not depend on eps: computed once

    def tables(key, case, n_theta, n_phi):
        if key not in own:
            t = time.perf_counter()
            own[key] = {f"dx/{r:g}": PANTable.from_field(T.own_field(case, refine=r, n_theta=n_theta, n_phi=n_phi),
                                                          T.F_OUT) for r in refine}
            print(f"  own field(s) of the {case.name}: {time.perf_counter() - t:.1f} s", flush=True)
        return own[key]

    rows = []
    for eps in args.eps:
        t = time.perf_counter()
        bank = sb.Soundbank(folder / f"bank_{preset.name}_{eps:g}.h5", preset=preset, eps=eps)
        if "ellipsoid" in args.cases:
            for permuted in (False, True):
                case = T.ellipsoid_case(preset, permuted)
                dirs = T.both_frames_nodes(case, preset)[::3] if permuted else T.node_and_between_directions(preset)
                tab = tables(case.name, case, preset.n_theta, preset.n_phi)
                res = T.proxy_vs_own(bank, case, tab, T.listeners(case, dirs))
                rows += _rows(case.name + " (matched grid)", res, eps, T.matched_tolerance(bank.entry(case.entry)))
        if "sphere" in args.cases:
            res, tol = _sphere_vs_exact(T, bank)
            rows += [("sphere entry vs exact rigid sphere", res["entry"], res["beta"], eps, "exact", "translation",
                      *(res["translation"]["exact"][k] for k in ("error", "level", "peak")), tol)]
        for name in ("cube", "long box"):
            if ("cube" if name == "cube" else "box") not in args.cases:
                continue
            k = 1 if preset.name == "tiny" else 3
            case = T.box_case(name, k * np.asarray(T.BOX_CELLS[name]), preset, dx=T.BOX_DX / k)
            tab = tables(name, case, 12, 24)
            pts = T.listeners(case, T.spread_directions())
            for ends in (False, True) if name == "long box" else (False,):
                where = " (end strikes)" if ends else ""
                ell = T.proxy_vs_own(bank, case, tab, pts, ends=ends)
                rows += _rows(f"{name}{where}: ellipsoidal proxy", ell, eps)
                if name == "long box":
                    sph = T.proxy_vs_own(bank, case, tab, pts, sphere=True, ends=ends, f_c=ell["f_c"])
                    rows += _rows(f"long box{where}: equal-volume sphere", sph, eps)
        print(f"  eps {eps:g}: {time.perf_counter() - t:.1f} s", flush=True)

    print()
    head = f"{'case':42s} {'entry':>5s} {'beta':>7s} {'eps':>5s} {'own':>6s} {'part':11s} {'error':>7s} " \
           f"{'level':>7s} {'peak':>7s} {'tol':>7s}"
    print(head)
    print("-" * len(head))
    for label, i, beta, eps, k, part, err, lev, pk, tol in rows:
        print(f"{label:42s} {i:5d} {beta:7.4f} {eps:5.3g} {k:>6s} {part:11s} {err:7.4f} {lev:7.4f} {pk:7.4f} "
              f"{'' if tol is None else f'{tol:7.4f}':>7s}")
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
