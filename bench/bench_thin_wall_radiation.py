"""Thin walls: FDTD radiation with wall faces (transfer/fdtd_transfer.py, ``thin_walls``) against an independent
BEM, per mode, for a thin-walled steel cup; and the cost against resolving the wall.

Object: a cup made by revolving a wall profile (radius 5 cm, height 13 cm, wall and base 1.5 mm, no handle; ~1 L),
steel, free-free P2 FEM modes to ``--f-max``.

Reference: the dipole-layer ("screen") BEM of the cup's mid-surface (sources/shell/screen.py: a zero-thickness
surface with the modes' normal motion; the Harmonic Shells paper's thin limit), with the FEM mode shapes taken at
the closest points of the solid's surface. Its own error is the wall's thickness, O(t / a) ~ 3 % in level, and
its mesh (edges <= lambda / 6 at the highest mode, or the triangle budget).

FDTD: the transfer asset as a scene makes it (default settings: the cup is thinner than two cells, so its walls
are wall faces on cells set by its modes and its size), evaluated through its FFAT maps. Per mode: the rms level
over ``--directions`` random directions at 1 m and 3 m, FDTD - BEM in dB, and the worst heard direction (max
|dB| over directions within 20 dB of the mode's loudest).

Cost: the FDTD transfer's wall time and grid; with ``--resolved`` also the grid and cell-updates that resolving
the wall by 3 cells would take (plan only; the solve would take over an hour).

    .venv/bin/python bench/bench_thin_wall_radiation.py [--f-max 6000] [--directions 200] [--max-faces 3000]
        [--thin-wall-cells 40] [--resolved] [--no-reference]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def cup_solid(radius=0.05, height=0.13, wall=0.0015, edge=0.005):
    """The solid cup, its profile cut into segments of about ``edge`` (a fan of long slivers on the base would
    make the FEM's base modes, and their interpolation on the surface, coarse)."""
    import trimesh

    def seg(p, q):
        n = max(1, int(np.ceil(np.hypot(*(np.subtract(q, p))) / edge)))
        return np.linspace(p, q, n + 1)[:-1]
    corners = [[0.0, 0.0], [radius, 0.0], [radius, height], [radius - wall, height], [radius - wall, wall],
               [0.0, wall]]
    prof = np.concatenate([seg(corners[i], corners[i + 1]) for i in range(5)] + [np.array([corners[5]])])
    m = trimesh.creation.revolve(prof, sections=int(np.ceil(2 * np.pi * radius / edge)))
    m.merge_vertices()
    m.update_faces(m.nondegenerate_faces())
    m.remove_unreferenced_vertices()
    m.fix_normals()
    return m


def cup_mid_surface(edge, radius=0.05, height=0.13, wall=0.0015):
    """Open mid-surface (base disk at z = wall / 2, wall at r = radius - wall / 2) with edges of about ``edge``."""
    import trimesh
    rm, zb = radius - 0.5 * wall, 0.5 * wall
    n_base = max(3, int(np.ceil(rm / edge)))
    n_wall = max(3, int(np.ceil((height - zb) / edge)))
    r = np.linspace(0.0, rm, n_base + 1)
    z = np.linspace(zb, height, n_wall + 1)[1:]
    prof = np.concatenate([np.c_[r, np.full_like(r, zb)], np.c_[np.full_like(z, rm), z]])
    sections = max(12, int(np.ceil(2 * np.pi * rm / edge)))
    m = trimesh.creation.revolve(prof, sections=sections)
    m.merge_vertices()
    m.update_faces(m.nondegenerate_faces())
    m.remove_unreferenced_vertices()
    return np.asarray(m.vertices), np.asarray(m.faces)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--f-max", type=float, default=6000.0)
    ap.add_argument("--directions", type=int, default=200)
    ap.add_argument("--max-faces", type=int, default=3000)
    ap.add_argument("--edge", type=float, default=0.006, help="longest mid-surface edge of the reference [m]")
    ap.add_argument("--thin-wall-cells", type=float, default=None, help="FDTD cells across the middle extent")
    ap.add_argument("--resolved", action="store_true", help="also plan the wall-resolving grid")
    ap.add_argument("--no-reference", action="store_true", help="time the FDTD transfer only (no screen BEM): "
                    "the cost goal, e.g. with --f-max 20000")
    args = ap.parse_args()
    import tempfile
    from pathlib import Path

    from impactsound.fem.modal import modal_analysis
    from impactsound.materials import get_material
    from impactsound.sources.shell.ffat import closest_point_shapes
    from impactsound.sources.shell.screen import screen_radiator
    from impactsound.transfer.fdtd_transfer import FDTDTransferSettings, plan, run_fdtd_transfer
    from impactsound.transfer.precompute import TransferModel, model_surface

    solid = cup_solid()
    t0 = time.perf_counter()
    model = modal_analysis(solid, get_material("steel"), f_max=args.f_max, order=2)
    print(f"cup: {len(solid.faces)} triangles, {model.n_modes} modes to {args.f_max:.0f} Hz "
          f"({time.perf_counter() - t0:.1f} s FEM)", flush=True)
    v, f, shapes = model_surface(model)
    st = FDTDTransferSettings() if args.thin_wall_cells is None else FDTDTransferSettings(
        thin_wall_cells=args.thin_wall_cells)
    pl = plan(v, f, model.frequencies_hz, st)
    print(f"FDTD plan: cell {1e3 * pl.h:.2f} mm, grid {pl.grid.shape}, thin walls {pl.thin}, {len(pl.groups)} runs, "
          f"{sum(pl.n_steps)} steps, {pl.grid.n_cells * sum(pl.n_steps):.3g} cell-updates", flush=True)
    if args.resolved:
        pr = plan(v, f, model.frequencies_hz, FDTDTransferSettings(thin_walls=False))
        print(f"resolving the wall instead: cell {1e3 * pr.h:.2f} mm, grid {pr.grid.shape}, "
              f"{pr.grid.n_cells * sum(pr.n_steps):.3g} cell-updates "
              f"({pr.grid.n_cells * sum(pr.n_steps) / (pl.grid.n_cells * sum(pl.n_steps)):.0f}x)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cup_fdtd.h5"
        t0 = time.perf_counter()
        run_fdtd_transfer(model, st, out=out)
        t_fdtd = time.perf_counter() - t0
        tm = TransferModel.load(out)
    print(f"FDTD transfer: {t_fdtd:.1f} s", flush=True)
    if args.no_reference:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"cup: FDTD {t_fdtd:.1f} s for {model.n_modes} modes; peak RSS {rss:.0f} MiB")
        return

    # reference: the screen BEM on the mid-surface, edges lambda / 6 at the top mode (or the budget)
    lam = 343.2 / float(model.frequencies_hz.max())
    edge = min(lam / 6, args.edge)
    while True:
        Vm, Fm = cup_mid_surface(edge)
        if len(Fm) <= args.max_faces:
            break
        edge *= 1.1
    Vm = Vm - np.asarray(model.com)                       # the model's body frame: origin at the centre of mass
    U = closest_point_shapes(v, f, shapes.transpose(1, 2, 0).reshape(3 * len(v), -1), Vm)
    t0 = time.perf_counter()
    scr = screen_radiator(Vm, Fm, U, np.asarray(model.omega), cache=False, max_faces=args.max_faces)
    t_bem = time.perf_counter() - t0
    print(f"screen BEM: {len(Fm)} triangles (edge {1e3 * edge:.1f} mm, lambda/{lam / edge:.1f} at the top mode), "
          f"{t_bem:.1f} s", flush=True)

    d = np.random.default_rng(0).normal(size=(args.directions, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    w = np.asarray(model.omega)
    rows = []
    print(f"{'mode':>4s} {'f [Hz]':>8s} {'FD-BEM 1 m':>10s} {'3 m':>6s} {'worst dir 1 m':>13s} {'3 m':>6s}")
    for R in (1.0, 3.0):
        pb = np.abs(scr.transfer(R * d)) * w[None, :] ** 2            # per unit modal amplitude
        pf = np.abs(tm.evaluate(R * d))
        rows.append((pb, pf))
    res = []
    for j in range(model.n_modes):
        out = []
        for pb, pf in rows:
            a, b = pb[:, j], pf[:, j]
            rms = 20 * np.log10(np.sqrt(np.mean(b**2)) / np.sqrt(np.mean(a**2)))
            keep = a >= a.max() * 0.1
            worst = float(np.max(np.abs(20 * np.log10(b[keep] / a[keep]))))
            out += [rms, worst]
        res.append(out)
        print(f"{j:4d} {model.frequencies_hz[j]:8.0f} {out[0]:+10.2f} {out[2]:+6.2f} {out[1]:13.2f} {out[3]:6.2f}",
              flush=True)
    res = np.array(res)
    print(f"cup: FDTD - screen BEM rms at 1 m {res[:, 0].min():+.2f} .. {res[:, 0].max():+.2f} dB (median |.| "
          f"{np.median(np.abs(res[:, 0])):.2f}); worst heard direction median {np.median(res[:, 1]):.2f}, max "
          f"{res[:, 1].max():.2f} dB; FDTD {t_fdtd:.1f} s for {model.n_modes} modes; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
