"""Strike an aluminium bar once and listen to it; check its first bending mode against beam theory.

Shows: :func:`impactsound.modal_analysis` on a trimesh box (free-free FEM modes), :func:`impactsound.strike` (one
impulse on a free object, radiated to a listener), a float32 48 kHz WAV with its JSON sidecar
(``impactsound.io.audio.write_wav``: ``pressure_pa = sample * pascals_per_unit``) and a spectrogram PNG.

Sanity check (printed): the lowest bending mode of a slender free-free beam, Euler-Bernoulli theory,

    f1 = 4.730^2 / (2 pi L^2) * sqrt(E I / (rho A)),   I = b t^3 / 12 (bending across t),  A = b t,

against the FEM frequency of the first mode that bends across the thickness (within a fraction of a per cent for
this 30:1 bar; shear and rotary inertia lower the FEM value slightly).

Radiation: with ``small=True`` the compact monopole + dipole model (instant, but bending modes of a free bar
radiate far too quietly in it, see compare_radiation.py); otherwise FFAT maps from FDTD wave solves (what
``render_scene`` uses by default; about a minute on 2 cores the first time, then cached).

Units: SI throughout (m, kg, s, Pa, Hz; impulse in N s).
Run: ``.venv/bin/python examples/strike_bar.py`` -> ``out/examples/strike_bar.wav`` (+ ``.wav.json``) and
``out/examples/strike_bar.png``.
"""
from pathlib import Path

import numpy as np
import trimesh

import impactsound as isd
from impactsound.io.audio import normalisation_gain, write_wav
from impactsound.io.plot import spectrogram_png

L, B, T = 0.30, 0.02, 0.01          # bar length (x), width (y), thickness (z) [m]
SAMPLE_RATE = 48000                 # [Hz]


def euler_bernoulli_f1(length, width, thickness, E, rho):
    """First free-free bending frequency [Hz] of a rectangular beam bending across ``thickness``."""
    I, A = width * thickness**3 / 12.0, width * thickness
    return 4.730**2 / (2 * np.pi * length**2) * np.sqrt(E * I / (rho * A))


def bending_direction(model, j):
    """Axis (0, 1, 2 = x, y, z) along which mode j mostly moves the surface, and that share of its energy."""
    u2 = (np.asarray(model.shapes[j]) ** 2).sum(axis=0)          # sum over surface nodes of u_x^2, u_y^2, u_z^2
    return int(np.argmax(u2)), float(u2.max() / u2.sum())


def main(out_dir="out/examples", small=False):
    out_dir = Path(out_dir)
    al = isd.get_material("aluminium")
    model = isd.modal_analysis(trimesh.creation.box((L, B, T)), al, order=2, max_modes=6 if small else 8)

    print(f"aluminium bar {L} x {B} x {T} m, {model.mass * 1000:.1f} g: first modes")
    for j, f in enumerate(model.frequencies_hz):
        axis, share = bending_direction(model, j)
        print(f"  mode {j}: {f:8.1f} Hz  (moves mostly along {'xyz'[axis]}: {share:.0%})")
    # first mode that moves the bar across its thickness (z) = first bending mode about the y axis
    j_bend = next(j for j in range(model.n_modes) if bending_direction(model, j)[0] == 2)
    f_fem = float(model.frequencies_hz[j_bend])
    f_beam = euler_bernoulli_f1(L, B, T, al.E, al.rho)
    print(f"first bending mode: FEM {f_fem:.1f} Hz, Euler-Bernoulli {f_beam:.1f} Hz "
          f"({100 * (f_fem / f_beam - 1):+.2f} %)")

    # a 0.02 N s tap (a 20 g hammer at 1 m/s) on the top face near one end; listener 0.5 m above the middle
    point = [0.42 * L, 0.003, T / 2]
    # radiation: FFAT maps of every mode from FDTD solves (the default; about a minute the first time, then cached),
    # or the fast compact model, which is tens of dB too quiet for bending modes
    transfer = "low_order" if small else "auto"
    p = isd.strike(model, point, 0.02, [0.0, 0.0, 0.5], duration=0.5 if small else 2.0,
                   sample_rate=SAMPLE_RATE, transfer=transfer)
    radiation = "compact monopole + dipole" if small else "FFAT maps from FDTD"
    print(f"peak pressure {np.abs(p).max():.3g} Pa at 0.5 m ({radiation})")

    wav = write_wav(out_dir / "strike_bar.wav", p, SAMPLE_RATE, normalisation_gain(p),
                    {"radiation": radiation, "f_bending_fem_hz": f_fem, "f_bending_euler_bernoulli_hz": f_beam})
    png = spectrogram_png(out_dir / "strike_bar.png", p, SAMPLE_RATE, f"aluminium bar struck once ({radiation})")
    print(f"wrote {wav} and {png}")
    return {"wav": wav, "png": png, "f_fem": f_fem, "f_beam": f_beam, "pressure": p}


if __name__ == "__main__":
    main()
