"""Radiation of a shell's modes: the screen BEM (the default for open shells) against the thickened-surface BEM
FFAT route and the low-order sum, side by side on the same modes, with peak memory.

Cymbal (bronze, h = 1.2 mm, the scene default of 48 segments: 516 triangles) and the trash can (steel, h = 2 mm,
solved on its 32-segment rebuild, 1,794 triangles, as scenes do), their lowest ``--modes`` modes:

* screen: the dense collocation solve per mode frequency (sources/shell/screen.py), no cache; also with the exact
  edge form for every panel (``far = inf``) to show what the far-panel point rules save;
* low-order: the simple-source sum at 48 listeners (sources/shell/radiation.py);
* BEM FFAT (sources/shell/ffat.py, bempp-cl) for ``--bem-modes`` of the modes (its cost per mode is what
  matters; minutes each), no cache. One-off compilation is excluded (a warm-up solve first).

    .venv/bin/python bench/bench_shell_radiation.py [--modes 20] [--bem-modes 1] [--shape cymbal|trash_can|both]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time

import numpy as np

SHAPES = {"cymbal": ("bronze", 0.0012, 48, None), "trash_can": ("steel", 0.002, 48, 32)}


def fibonacci(n):
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    th = np.pi * (1 + 5**0.5) * i
    return np.c_[np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)]


def run(shape, n_modes, bem_modes):
    from impactsound.fem.shell import ShellModel, shell_modes
    from impactsound.materials import get_material
    from impactsound.scene.shell_body import lumped_mass_properties
    from impactsound.scene.shells import make_shell
    from impactsound.sources.shell.ffat import shell_transfer
    from impactsound.sources.shell.radiation import ShellRadiator
    from impactsound.sources.shell.screen import screen_matrix, screen_radiator
    material, h, res, coarse_res = SHAPES[shape]
    mat = get_material(material)
    m = make_shell(shape, None, res)
    V, F = np.asarray(m.vertices, float), np.asarray(m.faces)
    _, com, _ = lumped_mass_properties(V, F, h, mat.rho)
    V = V - com
    t0 = time.perf_counter()
    sm = shell_modes(ShellModel(V, F, h, mat), f_max=None, n_modes=n_modes)
    U, om = sm.U, np.sqrt(sm.omega2)
    print(f"\n{shape}: {len(F)} triangles, {len(om)} modes {om[0] / 2 / np.pi:.0f}-{om[-1] / 2 / np.pi:.0f} Hz "
          f"(modes {time.perf_counter() - t0:.1f} s)")
    coarse = None
    if coarse_res:
        c = make_shell(shape, None, coarse_res)
        coarse = (np.asarray(c.vertices, float) - com, np.asarray(c.faces))
    X = np.concatenate([fibonacci(24), 2 * fibonacci(24)])
    screen_radiator(V, F, U[:, :1], om[:1], coarse=coarse, cache=False)            # compile
    t0 = time.perf_counter()
    sr = screen_radiator(V, F, U, om, coarse=coarse, cache=False)
    t_scr = time.perf_counter() - t0
    nf = len(sr.faces)
    t0 = time.perf_counter()
    A_scr = sr.transfer(X)
    t_scr_x = time.perf_counter() - t0
    k = float(om[len(om) // 2] / 343.2)
    Vs, Fs = sr.vertices, sr.faces
    t0 = time.perf_counter()
    screen_matrix(Vs, Fs, k)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    screen_matrix(Vs, Fs, k, far=(np.inf, np.inf))
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    ShellRadiator.from_surface(V, F, U, om).transfer(X, 343.2, 1.2041)
    t_low = time.perf_counter() - t0
    print(f"  screen: {t_scr:.2f} s for {len(om)} modes on {nf} triangles ({t_scr / len(om):.3f} s per mode), "
          f"listener field {t_scr_x * 1e3:.0f} ms for {len(X)} points")
    print(f"  screen matrix at ka-middle mode: {t_fast:.3f} s with far-panel rules, {t_exact:.3f} s exact "
          f"everywhere ({t_exact / t_fast:.1f}x)")
    print(f"  low-order sum: {t_low * 1e3:.0f} ms for {len(X)} points x {len(om)} modes")
    if bem_modes:
        with tempfile.TemporaryDirectory() as d:
            import os
            os.environ["IMPACTSOUND_CACHE"] = d
            from impactsound.transfer import bem
            bem.warm_up()
            j = np.arange(bem_modes)
            t0 = time.perf_counter()
            from impactsound.sources.shell.ffat import coarse_builtin
            Vb, Fb, _ = coarse_builtin(shape)
            st = shell_transfer(V, F, U[:, j], om[j], max_modes=bem_modes, coarse=(Vb - com, Fb))
            t_bem = time.perf_counter() - t0
            A_bem = st.transfer(X)
        per = t_bem / bem_modes
        e = 20 * np.log10(np.abs(A_scr[:, j]) / np.abs(A_bem))
        print(f"  BEM FFAT (thickened, bempp-cl): {per:.1f} s per mode ({st.info['faces'][0]} triangles): "
              f"{per / (t_scr / len(om)):.0f}x the screen solve; screen - BEM median {np.median(e, axis=0).round(2)} "
              "dB")
    print(f"  peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", type=int, default=20)
    ap.add_argument("--bem-modes", type=int, default=1)
    ap.add_argument("--shape", default="both", choices=["cymbal", "trash_can", "both"])
    a = ap.parse_args()
    for s in (["cymbal", "trash_can"] if a.shape == "both" else [a.shape]):
        run(s, a.modes, a.bem_modes)


if __name__ == "__main__":
    main()
