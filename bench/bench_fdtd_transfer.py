"""Radiation error table: FDTD transfer (transfer/fdtd_transfer.py) and the compact low-order model
(transfer/low_order.py) against the BEM, per mode, on non-spherical objects.

Objects (body frame, free-free FEM modes, P2):
  bar   - 0.20 x 0.025 x 0.012 m aluminium box (the demo bar), modes to 18 kHz
  plate - 0.10 x 0.02 x 0.006 m aluminium box (thin), modes to 18 kHz
  bowl  - the scene primitive "bowl" (radius 0.05 m, wall 0.005 m, 70 deg), ceramic, modes to 10 kHz

Reference: one exterior BEM solve per mode on the surface the transfer precompute uses (transfer/precompute.py:
the P2 triangles split at their mid-nodes, refined to lambda / 6, dp/dn = rho w^2 (n . u) per face), evaluated by
the representation formula directly at the listener points -- no FFAT fit on the reference side. Method: CHIEF
(Schenck 1968) first; where its least-squares residual rejects the solve (thin objects), Burton-Miller (Burton &
Miller 1971, coupling i/k) for that mode. ``--bem burton-miller`` uses Burton-Miller throughout.

FDTD: ``run_fdtd_transfer`` with default settings, evaluated through its FFAT maps (what rendering uses), and, as
a diagnostic, through its Kirchhoff box integral directly (the same box fields without the FFAT fit).

Low order: the compact monopole + dipole pressure per unit modal amplitude, written out here from the coefficient
form the modal source synthesises (sources/modal.py: model_moments, compact_basis, compact_geometry): the weight of
the k-th time derivative of q becomes (-i w)^k, and the propagation delay r/c the phase e^{i k r} (e^{-i w t}).

Per mode (columns): f, BEM triangles, BEM method ("chief>bm": CHIEF's residual rejected the solve, redone with
Burton-Miller) and residual, BEM seconds; rms |p| over N random directions at 1 m for BEM / FDTD / low order
(Pa per unit modal amplitude); FD-BEM in dB at 1 m and at 3 m; "box": FDTD-BEM at 1 m from the Kirchhoff box
directly (the FDTD error without the FFAT fit); LO-BEM in dB; the directivity correlation |<p_bem, p>| / (|p_bem|
|p|) of the complex fields at 1 m for FDTD and low order; "P1-BEM": the same BEM on the model's corner-node
triangles (P2 shapes' exact corner values, linear in between; what the slow bowl test uses) against the reference,
and its seconds. Timings: FDTD transfer per object, BEM per mode (bempp-cl's JIT compilation is paid once before
the clock starts), peak RSS (the CHIEF potential matrices at high k L dominate it: 16 + 2 (k a)^2 interior points
times 6 quadrature points per triangle).

Per mode also: the worst heard direction, max |FDTD-BEM| in dB over the directions where the BEM level is within
20 dB of the mode's loudest direction, at 1 m and 3 m; ``--thickness-cells 3,4`` repeats the FDTD at each value.

Run: .venv/bin/python bench/bench_fdtd_transfer.py [--objects bar,plate,bowl] [--f-max 9000 | bar=12000,bowl=8000]
     [--bem auto|chief|burton-miller] [--directions 1000] [--thickness-cells 3,4]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import trimesh
from numba.core.errors import NumbaPerformanceWarning

from impactsound.errors import SolverError
from impactsound.fem.modal import modal_analysis
from impactsound.materials import get_material
from impactsound.scene.primitives import make_primitive
from impactsound.transfer import bem
from impactsound.transfer.fdtd_transfer import FDTDTransferSettings, box_evaluate, run_fdtd_transfer
from impactsound.transfer.low_order import compact_basis, compact_geometry, compact_harmonic, model_moments
from impactsound.transfer.precompute import (TransferModel, TransferSettings, face_normal_data, model_surface,
                                             refinement, subdivide)

OBJECTS = {
    "bar": (("box", {"size": [0.20, 0.025, 0.012]}), "aluminium", 18000.0),
    "plate": (("box", {"size": [0.10, 0.02, 0.006]}), "aluminium", 18000.0),
    "bowl": (("bowl", {"radius": 0.05, "thickness": 0.005, "angle_deg": 70.0}), "ceramic", 10000.0),
}
RADII = (1.0, 3.0)


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def directions(n, seed=0):
    d = np.random.default_rng(seed).normal(size=(n, 3))
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def low_order_pressure(model, x, c, rho):
    """Compact-model complex pressure (n, m) per unit modal amplitude at body-frame points x (n, 3)."""
    V, D = model_moments(model)
    geom, delay = compact_geometry(x, c, rho)                         # (n, 4 derivative orders, 4 features)
    coef = np.einsum("nkf,fm->nkm", geom, compact_basis(V, D))        # weight of q^{(k)} per mode
    w = np.asarray(model.omega, np.float64)
    deriv = np.stack([(-1j * w) ** k for k in range(4)])              # d^k/dt^k -> (-i w)^k
    p = np.einsum("nkm,km->nm", coef, deriv) * np.exp(1j * w[None, :] * delay[:, None])
    ref = compact_harmonic(V, D, x, w, c, rho)                        # the module's own helper must agree
    assert np.allclose(p, ref, rtol=1e-10, atol=1e-14 * np.abs(ref).max()), "low-order evaluator disagrees"
    return p


def p1_surface(model):
    """The model's vertex-level surface (corner nodes only, shapes there; exact nodal values of the P2 modes,
    interpolated linearly in between): 1/4 of the precompute's BEM triangles, for the cheaper reference the
    slow tests use (tests/validation/test_fdtd_transfer.py)."""
    f = np.asarray(model.surface_faces, np.int64)
    nv = int(f.max()) + 1
    return np.asarray(model.surface_nodes, np.float64)[:nv], f, np.asarray(model.shapes, np.float64)[:, :nv]


def bem_mode(v, f, u, omega, settings: TransferSettings, method: str):
    """Surface solution of one mode as the transfer precompute builds it (same refinement and Neumann data).
    Returns (solution, method used, seconds)."""
    k = omega / settings.c
    levels, _, _ = refinement(v, f, k, settings)
    u = u[None]
    for _ in range(levels):
        v, f, u = subdivide(v, f, u)
    g = settings.rho * omega**2 * face_normal_data(v, f, u[0])
    t = time.perf_counter()
    used = method if method != "auto" else "chief"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sol = bem.solve_neumann(v, f, k, g, method=used, check=False, backend=settings.backend)
        except SolverError:
            if method != "auto":
                raise
            used = "chief>bm"                                         # CHIEF rejected: Burton-Miller
            sol = bem.solve_neumann(v, f, k, g, method="burton-miller", check=False, backend=settings.backend)
    if any("Burton-Miller" in str(w.message) for w in caught):      # a solver that falls back by itself
        used = "chief>bm"
    return sol, used, time.perf_counter() - t


def db(a, b):
    return 20 * np.log10(a / b)


def corr(a, b):
    return abs(np.vdot(a, b)) / (np.linalg.norm(a) * np.linalg.norm(b))


def dir_max_db(pb, pf, within_db=20.0):
    """Largest |20 log10 |p_f| / |p_b||  over the directions where the reference is within ``within_db`` of its
    loudest direction (where the mode is heard at all)."""
    a, b = np.abs(pb), np.abs(pf)
    keep = a >= a.max() * 10 ** (-within_db / 20)
    return float(np.max(np.abs(20 * np.log10(np.maximum(b[keep], 1e-300) / a[keep]))))


def run_object(name, f_max, method, n_dir, tmp: Path, p1_check: bool, thickness=(3.0,)):
    (shape, params), mat, f_default = OBJECTS[name]
    f_max = f_default if f_max is None else f_max
    surf = make_primitive(shape, params)
    t = time.perf_counter()
    model = modal_analysis(surf, get_material(mat), f_max=f_max, order=2)
    t_fem = time.perf_counter() - t
    fs = FDTDTransferSettings()
    ts = TransferSettings()
    d = directions(n_dir)
    print(f"\n== {name}: {shape} {params}, {mat}, f_max {f_max:.0f} Hz: {model.n_modes} modes "
          f"({t_fem:.1f} s FEM)", flush=True)
    if model.n_modes == 0:
        return None

    extra = {}
    for tc in thickness[1:]:
        t = time.perf_counter()
        run_fdtd_transfer(model, FDTDTransferSettings(thickness_cells=tc), out=tmp / f"{name}_fdtd_{tc:g}.h5")
        tmx = TransferModel.load(tmp / f"{name}_fdtd_{tc:g}.h5")
        extra[tc] = (tmx, time.perf_counter() - t)
        print(f"FDTD transfer, thickness_cells {tc:g}: {extra[tc][1]:.1f} s, {tmx.meta['cell_updates']:.3g} "
              "cell-updates", flush=True)
    fs = FDTDTransferSettings(thickness_cells=thickness[0])
    t = time.perf_counter()
    run_fdtd_transfer(model, fs, out=tmp / f"{name}_fdtd.h5")
    t_fdtd = time.perf_counter() - t
    tm = TransferModel.load(tmp / f"{name}_fdtd.h5")
    meta = tm.meta
    print(f"FDTD transfer: {t_fdtd:.1f} s wall; cell {1e3 * meta['cell_size']:.2f} mm, grid {meta['grid']}, "
          f"{len(meta['groups'])} runs, {sum(meta['steps'])} steps, {meta['cell_updates']:.3g} cell-updates "
          f"({meta['cell_updates'] / t_fdtd:.3g}/s incl. fit); peak RSS {rss_mib():.0f} MiB", flush=True)
    nr = tm.near
    box = (nr["box_centres"], nr["box_normals"], float(nr["box_area"][0]))
    p_fd = {R: tm.evaluate(R * d) for R in RADII}
    p_lo = low_order_pressure(model, 1.0 * d, fs.c, fs.rho)

    v, f, shapes = model_surface(model)
    v1, f1, shapes1 = p1_surface(model)
    rows = []
    print(f"{'mode':>4s} {'f [Hz]':>8s} {'BEM faces':>9s} {'method':>8s} {'resid':>8s} {'BEM [s]':>7s} "
          f"{'|p| BEM':>9s} {'|p| FDTD':>9s} {'|p| LO':>9s} {'FD-BEM':>7s} {'@3 m':>6s} {'box':>6s} "
          f"{'LO-BEM':>7s} {'corr FD':>7s} {'corr LO':>7s} {'P1-BEM':>6s} {'P1 [s]':>6s}", flush=True)
    for j in range(model.n_modes):
        sol, used, t_bem = bem_mode(v, f, shapes[j], float(model.omega[j]), ts, method)
        pb = {R: sol.evaluate(R * d) for R in RADII}
        k = float(tm.bank.k[j])
        p_box = box_evaluate(box, nr["box_p"][j].astype(np.complex128), nr["box_dpdn"][j].astype(np.complex128),
                             k, 1.0 * d)
        rms = lambda p: float(np.sqrt(np.mean(np.abs(p) ** 2)))           # noqa: E731
        r = {"mode": j, "f": float(model.frequencies_hz[j]), "faces": len(sol.faces), "method": used,
             "residual": sol.residual, "t_bem": t_bem, "bem": rms(pb[1.0]), "fdtd": rms(p_fd[1.0][:, j]),
             "lo": rms(p_lo[:, j]), "fd_db3": db(rms(p_fd[3.0][:, j]), rms(pb[3.0])),
             "box_db": db(rms(p_box), rms(pb[1.0])), "corr_fd": corr(pb[1.0], p_fd[1.0][:, j]),
             "corr_lo": corr(pb[1.0], p_lo[:, j]) if np.any(p_lo[:, j]) else 0.0}
        r["fd_db"], r["lo_db"] = db(r["fdtd"], r["bem"]), db(max(r["lo"], 1e-300), r["bem"])
        r["dir"] = {R: dir_max_db(pb[R], p_fd[R][:, j]) for R in RADII}
        for tc, (tmx, _) in extra.items():
            pe = {R: tmx.evaluate(R * d)[:, j] for R in RADII}
            r[f"tc{tc:g}"] = ({R: db(rms(pe[R]), rms(pb[R])) for R in RADII},
                              {R: dir_max_db(pb[R], pe[R]) for R in RADII})
        r["p1_db"], r["t_p1"] = np.nan, np.nan
        if p1_check:
            s1, _, r["t_p1"] = bem_mode(v1, f1, shapes1[j], float(model.omega[j]), ts, method)
            r["p1_db"] = db(rms(s1.evaluate(1.0 * d)), r["bem"])
        rows.append(r)
        print(f"{j:4d} {r['f']:8.0f} {r['faces']:9d} {used:>8s} {r['residual']:8.1e} {t_bem:7.1f} "
              f"{r['bem']:9.3e} {r['fdtd']:9.3e} {r['lo']:9.3e} {r['fd_db']:+7.2f} {r['fd_db3']:+6.2f} "
              f"{r['box_db']:+6.2f} {r['lo_db']:+7.1f} {r['corr_fd']:7.4f} {r['corr_lo']:7.4f} {r['p1_db']:+6.2f} "
              f"{r['t_p1']:6.1f}", flush=True)
        line = (f"      thickness_cells {thickness[0]:g}: rms {r['fd_db']:+.2f} / {r['fd_db3']:+.2f} dB at 1 / 3 m, "
                f"worst heard direction {r['dir'][1.0]:.2f} / {r['dir'][3.0]:.2f} dB")
        for tc in extra:
            rr, dd = r[f"tc{tc:g}"]
            line += (f"; {tc:g}: rms {rr[1.0]:+.2f} / {rr[3.0]:+.2f} dB, worst direction {dd[1.0]:.2f} / "
                     f"{dd[3.0]:.2f} dB")
        print(line, flush=True)
    fd = np.array([r["fd_db"] for r in rows])
    lo = np.array([r["lo_db"] for r in rows])
    tb = np.array([r["t_bem"] for r in rows])
    print(f"{name}: FDTD-BEM at 1 m {fd.min():+.2f} .. {fd.max():+.2f} dB (max |.| {np.abs(fd).max():.2f}), "
          f"low order {lo.min():+.1f} .. {lo.max():+.1f} dB; FDTD {t_fdtd:.1f} s for {model.n_modes} modes "
          f"({t_fdtd / model.n_modes:.1f} s/mode), BEM {tb.sum():.1f} s ({tb.mean():.1f} s/mode, "
          f"{tb.min():.1f} .. {tb.max():.1f}) -> {tb.sum() / t_fdtd:.1f}x; peak RSS {rss_mib():.0f} MiB", flush=True)
    return {"name": name, "rows": rows, "t_fdtd": t_fdtd, "t_bem": float(tb.sum())}


def parse_fmax(s):
    if s is None:
        return {}
    if "=" not in s:
        return {n: float(s) for n in OBJECTS}
    return {k: float(v) for k, v in (kv.split("=") for kv in s.split(","))}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", default="bar,plate,bowl")
    ap.add_argument("--f-max", default=None, help="Hz for every object, or name=Hz,... per object")
    ap.add_argument("--bem", default="auto", choices=("auto", "chief", "burton-miller"))
    ap.add_argument("--directions", type=int, default=1000)
    ap.add_argument("--no-p1-check", action="store_true", help="skip the vertex-level-surface BEM column")
    ap.add_argument("--thickness-cells", default="3",
                    help="FDTD cells across the thickness, comma-separated: the first is the table's, the others are "
                         "compared on an extra line per mode (rms and worst heard direction at 1 and 3 m)")
    args = ap.parse_args()
    thickness = tuple(float(v) for v in args.thickness_cells.split(","))
    names = [n for n in args.objects.split(",") if n]
    unknown = [n for n in names if n not in OBJECTS]
    if unknown:
        ap.error(f"unknown objects {unknown}; choose from {', '.join(OBJECTS)}")
    fmax = parse_fmax(args.f_max)
    warnings.filterwarnings("ignore", category=NumbaPerformanceWarning)    # bempp-cl's kernels, not ours
    t = time.perf_counter()
    bem.warm_up()
    ico = trimesh.creation.icosphere(subdivisions=1, radius=1.0)
    bem.solve_neumann(np.asarray(ico.vertices), np.asarray(ico.faces), 1.0, np.ones(len(ico.faces)),
                      method="burton-miller")
    print(f"bempp-cl JIT compilation (once per process, CHIEF and Burton-Miller operators): "
          f"{time.perf_counter() - t:.1f} s", flush=True)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            out.append(run_object(n, fmax.get(n), args.bem, args.directions, Path(tmp), not args.no_p1_check,
                                  thickness))
    print("\nsummary")
    for o in out:
        if o is None:
            continue
        fd = np.array([r["fd_db"] for r in o["rows"]])
        print(f"  {o['name']:6s} {len(fd):3d} modes: max |FDTD-BEM| {np.abs(fd).max():.2f} dB at 1 m; "
              f"FDTD {o['t_fdtd']:.1f} s, BEM {o['t_bem']:.1f} s ({o['t_bem'] / o['t_fdtd']:.1f}x)")
    print(f"peak RSS {rss_mib():.0f} MiB")
