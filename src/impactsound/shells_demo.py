"""``impactsound demo --scene shells``: a trash can knocked over, and a cymbal struck softly then hard, rendered
with nonlinear thin-shell dynamics; the cymbal also linearly, the two spectrograms side by side (Chadwick, An &
James 2009, "Harmonic Shells", sec. 5: the hard strike spreads its energy up the spectrum and glides in pitch,
which linear modal sound cannot do).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: silence between the parts in shells.wav [s]
GAP_S = 0.5


def shells_demo(out_dir: Path, progress) -> list[Path]:
    """Render the demo to DIR/shells.wav (can, gap, cymbal linear, gap, cymbal nonlinear; one scale, pascals in
    the sidecar) and DIR/shells.png (the three spectrograms)."""
    import tomllib

    from .io.audio import normalisation_gain, write_wav
    from .pipeline import render_scene
    from .scene import load_scene
    from .scene.schema import demo_scene_path
    data_dir = demo_scene_path().parent
    parts = []
    can = data_dir / "shells_can.toml"
    progress.message("shells demo: a steel trash can knocked over")
    res = render_scene(load_scene(can), progress)
    parts.append(("trash can knocked over (nonlinear)", res))
    cym = data_dir / "shells_cymbal.toml"
    data = tomllib.loads(cym.read_text())
    for dyn in ("linear", "nonlinear"):
        d = {**data, "object": [dict(o) for o in data["object"]]}
        d["object"][0]["shell"] = {**d["object"][0]["shell"], "dynamics": dyn}
        progress.message(f"shells demo: the cymbal, {dyn} dynamics")
        parts.append((f"cymbal, soft then hard ({dyn})", render_scene(load_scene(d, base=cym.parent), progress)))
    fs = int(parts[0][1].sample_rate)
    gap = np.zeros((1, int(GAP_S * fs)))
    mixes = [np.atleast_2d(r.mix)[:1] for _, r in parts]
    mix = np.concatenate([mixes[0], gap, mixes[1], gap, mixes[2]], axis=1)
    segs, t = {}, 0.0
    for (name, _), m in zip(parts, mixes):
        segs[name] = [t, t + m.shape[1] / fs]
        t += m.shape[1] / fs + GAP_S
    info = {name: {"peak_pa": float(np.abs(m).max()), "objects": r.info.get("objects")}
            for (name, r), m in zip(parts, mixes)}
    wav = out_dir / "shells.wav"
    write_wav(wav, mix, fs, normalisation_gain(mix), {"listeners": ["mic"], "segments": segs, "renders": info})
    png = _panels(out_dir / "shells.png", [(n, m[0]) for (n, _), m in zip(parts, mixes)], fs)
    return [wav, png]


def _panels(path: Path, signals, fs: int) -> Path:
    """One spectrogram per signal, side by side on one colour scale (PSD, dB re (20 uPa)^2/Hz)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.signal import spectrogram
    path.parent.mkdir(parents=True, exist_ok=True)
    specs = []
    for _, x in signals:
        f, t, S = spectrogram(x, fs, nperseg=2048, noverlap=1536)
        specs.append((f, t, 10 * np.log10(S / (20e-6) ** 2 + 1e-30)))
    top = max(float(s[2].max()) for s in specs)
    fig, axes = plt.subplots(1, len(signals), figsize=(5 * len(signals), 4.5), sharey=True)
    for ax, (name, x), (f, t, S) in zip(np.atleast_1d(axes), signals, specs):
        im = ax.pcolormesh(t, f / 1000, S, vmin=top - 90, vmax=top, cmap="magma", shading="auto")
        ax.set_title(f"{name}\npeak {np.abs(x).max():.3g} Pa", fontsize=10)
        ax.set_xlabel("time [s]")
        ax.set_ylim(0, 12)
    np.atleast_1d(axes)[0].set_ylabel("frequency [kHz]")
    fig.colorbar(im, ax=list(np.atleast_1d(axes)), label="PSD [dB re 20 uPa^2/Hz]", fraction=0.03, pad=0.02)
    fig.subplots_adjust(top=0.80, bottom=0.12, left=0.05, right=0.86, wspace=0.12)
    fig.suptitle("impactsound shells demo: thin-shell sound (Chadwick, An & James 2009)", y=0.98)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
