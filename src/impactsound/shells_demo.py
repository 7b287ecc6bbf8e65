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
#: time of the hard cymbal strike in its scene [s] (data/cymbal_strikes.csv) and the band whose strongest peak the
#: figure tracks (the linear cymbal's 240 Hz mode and where the hard strike lifts it)
HARD_STRIKE_S = 1.6
GLIDE_BAND_HZ = (200.0, 330.0)


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
    hard = int(HARD_STRIKE_S * fs)
    zoom = [(n, m[0, hard:]) for (n, _), m in zip(parts, mixes) if "cymbal" in n]
    png = _panels(out_dir / "shells.png", [(n, m[0]) for (n, _), m in zip(parts, mixes)], fs, zoom=zoom)
    return [wav, png]


def pitch_track(x, fs: int, band=GLIDE_BAND_HZ, nperseg: int = 8192, hop: int = 1024):
    """(times [s], frequency [Hz]) of the strongest spectral peak inside ``band`` per frame (Hann, ``nperseg``
    samples, parabolic interpolation of the log power): the pitch glide of a hardening mode."""
    from scipy.signal import spectrogram
    f, t, S = spectrogram(np.asarray(x, np.float64), fs, nperseg=nperseg, noverlap=nperseg - hop)
    sel = np.flatnonzero((f >= band[0]) & (f <= band[1]))
    L = np.log(S[sel] + 1e-300)
    i = np.clip(np.argmax(L, axis=0), 1, len(sel) - 2)
    cols = np.arange(L.shape[1])
    a, b, c = L[i - 1, cols], L[i, cols], L[i + 1, cols]
    den = a - 2 * b + c
    off = np.where(den < 0, 0.5 * (a - c) / np.where(den < 0, den, -1.0), 0.0)
    return t, f[sel][i] + off * (f[1] - f[0])


def _panels(path: Path, signals, fs: int, zoom=()) -> Path:
    """One spectrogram per signal, side by side on one colour scale (PSD, dB re (20 uPa)^2/Hz); with ``zoom``
    [(name, signal from the hard strike on)], a second row: the pitch track of each (:func:`pitch_track`) and
    their 0-1 kHz spectrograms at 6 Hz resolution, where the hardening glide shows."""
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
    rows = 2 if zoom else 1
    fig, axes = plt.subplots(rows, len(signals), figsize=(5 * len(signals), 4.5 * rows), squeeze=False)
    for ax, (name, x), (f, t, S) in zip(axes[0], signals, specs):
        im = ax.pcolormesh(t, f / 1000, S, vmin=top - 90, vmax=top, cmap="magma", shading="auto")
        ax.set_title(f"{name}\npeak {np.abs(x).max():.3g} Pa", fontsize=10)
        ax.set_xlabel("time [s]")
        ax.set_ylim(0, 12)
    axes[0, 0].set_ylabel("frequency [kHz]")
    fig.colorbar(im, ax=list(axes[0]), label="PSD [dB re 20 uPa^2/Hz]", fraction=0.03, pad=0.02)
    if zoom:
        ax0 = axes[1, 0]
        for name, x in zoom:
            tt, ff = pitch_track(x, fs)
            ax0.plot(tt, ff, lw=2, label=name)
        ax0.set_title(f"hard strike: strongest peak in {GLIDE_BAND_HZ[0]:.0f}-{GLIDE_BAND_HZ[1]:.0f} Hz",
                      fontsize=10)
        ax0.set_xlabel("time after the hard strike [s]")
        ax0.set_ylabel("frequency [Hz]")
        ax0.legend(fontsize=8)
        ax0.grid(alpha=0.3)
        zs = []
        for _, x in zoom:
            f, t, S = spectrogram(x, fs, nperseg=8192, noverlap=8192 - 1024)
            zs.append((f, t, 10 * np.log10(S / (20e-6) ** 2 + 1e-30)))
        ztop = max(float(z[2][z[0] < 1000].max()) for z in zs)
        for ax, (name, _), (f, t, S) in zip(axes[1, 1:], zoom, zs):
            k = f < 1000
            zim = ax.pcolormesh(t, f[k], S[k], vmin=ztop - 60, vmax=ztop, cmap="magma", shading="auto")
            ax.set_title(f"hard strike, 0-1 kHz: {name}", fontsize=10)
            ax.set_xlabel("time after the hard strike [s]")
        axes[1, 1].set_ylabel("frequency [Hz]")
        for ax in axes[1, 1 + len(zoom):]:
            ax.axis("off")
        fig.colorbar(zim, ax=list(axes[1]), label="PSD [dB re 20 uPa^2/Hz]", fraction=0.03, pad=0.02)
    fig.subplots_adjust(top=0.80 if rows == 1 else 0.90, bottom=0.12 if rows == 1 else 0.06, left=0.05,
                        right=0.86, wspace=0.15, hspace=0.35)
    fig.suptitle("impactsound shells demo: thin-shell sound (Chadwick, An & James 2009)", y=0.98)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
