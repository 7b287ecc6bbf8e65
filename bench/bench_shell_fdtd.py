"""Shell radiation: FDTD solves on the mid-surface (sources/shell/fdtd.py, ``shell.radiation = "fdtd"``) against the
default dipole-layer screen BEM (sources/shell/screen.py), per mode, on a built-in shell scene's shell; and what
each costs.

The screen BEM is dense, capped at ``radiation_faces`` triangles (2,000): it is accurate where its triangles
resolve the wavelength (k x edge below ~1) and its error grows above. The FDTD maps have no triangle budget; their
cell follows the top mode (10 cells per wavelength) and the shell's middle extent (40 cells across). Per mode: f,
the screen's k x (mean edge), the rms level over ``--directions`` random directions at 1 m and 3 m, FDTD - screen
in dB, and the directivity correlation |<p_s, p_f>| / (|p_s| |p_f|) at 1 m.

    .venv/bin/python bench/bench_shell_fdtd.py [--scene src/impactsound/data/shells_cymbal.toml] [--object NAME]
        [--directions 200]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default=None, help="scene file (default: the built-in shells_cymbal.toml)")
    ap.add_argument("--object", default=None, help="the shell (default: the scene's first shell)")
    ap.add_argument("--directions", type=int, default=200)
    args = ap.parse_args()
    from impactsound.scene import load_scene
    from impactsound.scene.schema import demo_scene_path
    from impactsound.sources.shell.fdtd import shell_fdtd_transfer
    from impactsound.sources.shell.source import radiation_model, shell_modes_cached

    sc = load_scene(args.scene or demo_scene_path().with_name("shells_cymbal.toml"))
    body = next(b for b in sc.bodies if getattr(b, "shell", None) is not None
                and (args.object is None or b.name == args.object))
    setup = body.shell
    t0 = time.perf_counter()
    _, modes, _ = shell_modes_cached(setup, body.material, min(float(setup.spec.f_max), 0.45 * sc.sample_rate))
    U = np.asarray(modes.U)
    omega = np.sqrt(np.asarray(modes.omega2, np.float64))
    print(f"{body.name}: {len(setup.faces)} triangles, {len(omega)} modes {omega[0] / 2 / np.pi:.0f}-"
          f"{omega[-1] / 2 / np.pi:.0f} Hz ({time.perf_counter() - t0:.1f} s modes)", flush=True)
    t0 = time.perf_counter()
    scr, kind, info = radiation_model(setup, U, omega, sc.air)
    t_scr = time.perf_counter() - t0
    e = scr.vertices[scr.faces]
    edge = float(np.linalg.norm(e - np.roll(e, 1, axis=1), axis=2).mean())
    print(f"{kind}: {len(scr.faces)} triangles, mean edge {1e3 * edge:.1f} mm, {t_scr:.1f} s "
          f"({'cached' if info.get('radiation_cached') else 'solved'})", flush=True)
    t0 = time.perf_counter()
    fd = shell_fdtd_transfer(setup.vertices, setup.faces, U, omega, air=sc.air)
    t_fd = time.perf_counter() - t0
    print(f"fdtd: cell {1e3 * fd.info['cell_size']:.2f} mm, grid {fd.info['grid']}, {t_fd:.1f} s "
          f"({'cached' if fd.info['cached'] else 'solved'})", flush=True)
    d = np.random.default_rng(0).normal(size=(args.directions, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    res = {}
    for R in (1.0, 3.0):
        a, b = scr.transfer(R * d, sc.air.c, sc.air.rho), fd.transfer(R * d, sc.air.c, sc.air.rho)
        res[R] = (20 * np.log10(np.sqrt((np.abs(b) ** 2).mean(0) / (np.abs(a) ** 2).mean(0))),
                  np.abs(np.sum(np.conj(a) * b, axis=0)) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)))
    ke = omega / sc.air.c * edge
    print(f"{'mode':>4s} {'f [Hz]':>8s} {'k edge':>6s} {'FD-scr 1 m':>10s} {'3 m':>6s} {'corr':>6s}")
    for j in range(len(omega)):
        print(f"{j:4d} {omega[j] / 2 / np.pi:8.0f} {ke[j]:6.2f} {res[1.0][0][j]:+10.2f} {res[3.0][0][j]:+6.2f} "
              f"{res[1.0][1][j]:6.3f}")
    for lo, hi in ((0.0, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, np.inf)):
        m = (ke >= lo) & (ke < hi)
        if m.any():
            x = res[1.0][0][m]
            print(f"k edge in [{lo:g}, {hi:g}): {m.sum()} modes, FDTD - screen median {np.median(x):+.2f} dB, "
                  f"|.| 90th percentile {np.percentile(np.abs(x), 90):.2f} dB, correlation median "
                  f"{np.median(res[1.0][1][m]):.3f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
