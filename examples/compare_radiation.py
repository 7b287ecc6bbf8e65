"""How loud is each mode at the listener? The compact radiation model against FFAT maps from FDTD wave solves.

Shows: the two ways a mode's vibration reaches a listener in impactsound,

* ``transfer = "low_order"``: the compact monopole + dipole model (``impactsound.transfer.low_order``): volume
  velocity V_j and first moment D_j of the mode's normal surface velocity, exact for a body much smaller than the
  wavelength, instant to compute;
* ``transfer = "auto"`` (the default of ``render_scene``): far-field acoustic transfer (FFAT) maps of every mode
  from a few FDTD wave solves (``impactsound.transfer.fdtd_transfer.run_fdtd_transfer``; the modes are grouped
  so that one run drives many at their own frequencies, then separated by least squares in time), loaded as a
  ``impactsound.transfer.precompute.TransferModel``,

for the free modes of an aluminium bar. Bending and torsion modes of a free body move as much air one way as the
other: their monopole and dipole moments (nearly) vanish, so the compact model leaves them tens of dB too quiet.
It prints the per-mode level difference at the listener and averaged over directions at 1 m, plots both (PNG)
and writes what one strike sounds like with each model (two WAVs at the same scale: the compact one is quieter).

Units: SI throughout (m, kg, s, Pa, Hz). Pressures are per unit modal amplitude q_j [m sqrt(kg)] (mass-normalised
mode shapes), levels in dB re 1 Pa per unit q. Body frame: the bar's axes, origin at its centre of mass.
Run: ``.venv/bin/python examples/compare_radiation.py`` (about a minute; ``small=True``: a few seconds) ->
``out/examples/compare_radiation.png``, ``compare_radiation_low_order.wav``, ``compare_radiation_ffat.wav`` and
the FFAT asset ``compare_radiation_fdtd.h5`` (``impactsound transfer info`` reads it).
"""
from pathlib import Path

import numpy as np
import trimesh

import impactsound as isd
from impactsound.io.audio import write_wav
from impactsound.scene.model import Air
from impactsound.transfer import ffat
from impactsound.transfer.fdtd_transfer import FDTDTransferSettings, plan, run_fdtd_transfer
from impactsound.transfer.low_order import compact_harmonic, model_moments
from impactsound.transfer.precompute import TransferModel, model_surface

LISTENER = np.array([0.0, -0.6, 0.35])     # body frame [m]


def db(p):
    return 20 * np.log10(np.maximum(np.abs(p), 1e-30))


def rms_over_directions(p):
    """rms of |p| over the rows (directions) of a (directions, modes) array."""
    return np.sqrt(np.mean(np.abs(p) ** 2, axis=0))


def main(out_dir="out/examples", small=False):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = (0.12, 0.02, 0.01) if small else (0.2, 0.025, 0.012)
    model = isd.modal_analysis(trimesh.creation.box(size), isd.get_material("aluminium"), order=2,
                               max_modes=4 if small else 10)
    air = Air()

    settings = FDTDTransferSettings(c=air.c, rho=air.rho)
    v, f, _ = model_surface(model)
    pl = plan(v, f, model.frequencies_hz, settings)
    print(f"FDTD transfer of {model.n_modes} modes: grid {'x'.join(map(str, pl.grid.shape))} cells of "
          f"{pl.h * 1000:.2f} mm, {len(pl.groups)} run(s), {pl.cell_updates:.2g} cell updates")
    asset = out_dir / "compare_radiation_fdtd.h5"
    run_fdtd_transfer(model, settings, out=asset)
    tm = TransferModel.load(asset, model)

    omega = 2 * np.pi * model.frequencies_hz
    V, D = model_moments(model)
    dirs = ffat.grid_directions(12).reshape(-1, 3)                 # directions over the sphere, for 1 m averages
    points = np.vstack([LISTENER, dirs])
    p_low = compact_harmonic(V, D, points, omega, air.c, air.rho)  # (points, modes) [Pa per unit q]
    p_ffat = tm.evaluate(points)
    diff_listener = db(p_low[0]) - db(p_ffat[0])
    diff_sphere = db(rms_over_directions(p_low[1:])) - db(rms_over_directions(p_ffat[1:]))
    print(f"aluminium bar {size} m; listener at {LISTENER.tolist()} m (body frame)")
    print(" mode  f [Hz]   FFAT [dB]  compact [dB]  compact - FFAT: at listener, rms over 1 m sphere [dB]")
    for j, fj in enumerate(model.frequencies_hz):
        print(f" {j:4d} {fj:8.1f} {db(p_ffat[0, j]):10.1f} {db(p_low[0, j]):12.1f} "
              f"{diff_listener[j]:14.1f} {diff_sphere[j]:10.1f}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    fk = model.frequencies_hz / 1000
    ax0.plot(fk, db(p_ffat[0]), "o", label="FFAT maps (FDTD)")
    ax0.plot(fk, db(p_low[0]), "x", label="compact monopole + dipole")
    ax0.set_ylabel("level at listener\n[dB re 1 Pa per unit q]")
    ax0.set_title(f"radiation of each mode of an aluminium bar {size} m")
    ax0.legend()
    ax1.axhline(0, color="k", lw=0.5)
    ax1.plot(fk, diff_listener, "o-", label="at the listener")
    ax1.plot(fk, diff_sphere, "s--", label="rms over directions at 1 m")
    ax1.set_xlabel("mode frequency [kHz]")
    ax1.set_ylabel("compact - FFAT [dB]")
    ax1.legend()
    fig.tight_layout()
    png = out_dir / "compare_radiation.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)

    # one 0.01 N s tap near an end of the top face, heard with each model; both WAVs at one scale
    tap = dict(point=[0.4 * size[0], 0.0, size[2] / 2], impulse=0.01, listener=LISTENER, duration=1.0 if small else 2.0)
    y_low, y_ffat = isd.strike(model, **tap, transfer="low_order"), isd.strike(model, **tap, transfer=tm)
    gain = 0.9 / max(np.abs(y_low).max(), np.abs(y_ffat).max())
    wavs = [write_wav(out_dir / f"compare_radiation_{name}.wav", y, 48000, gain, {"radiation": name})
            for name, y in (("low_order", y_low), ("ffat", y_ffat))]
    print(f"peak pressure of the tap: compact {np.abs(y_low).max():.3g} Pa, FFAT {np.abs(y_ffat).max():.3g} Pa")
    print("wrote", png, *wavs)
    return {"png": png, "wavs": wavs, "asset": asset, "frequencies_hz": model.frequencies_hz,
            "diff_listener_db": diff_listener, "diff_sphere_db": diff_sphere}


if __name__ == "__main__":
    main()
