"""Pictures of what was rendered: waveform and spectrogram (dB) in one PNG."""
from __future__ import annotations

from pathlib import Path

import numpy as np


#: signals longer than this [samples] are drawn from pieces: an envelope and time-averaged spectrogram columns
LONG_SAMPLES = 1 << 20
#: at most this many spectrogram columns (about the figure's width in pixels); longer signals average adjacent frames
MAX_COLUMNS = 1200


def _envelope(x, fs: float, bins: int = 4000):
    """Min and max of ``x`` in ``bins`` equal time bins (read in pieces), and the bin centres [s]."""
    n = x.shape[0]
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    lo, hi = np.empty(bins), np.empty(bins)
    per = max(1, (1 << 20) // max(1, int(np.diff(edges).max())))
    for a in range(0, bins, per):
        b = min(bins, a + per)
        seg = np.asarray(x[edges[a]:edges[b]], np.float64)
        idx = edges[a:b] - edges[a]
        lo[a:b] = np.minimum.reduceat(seg, idx)
        hi[a:b] = np.maximum.reduceat(seg, idx)
    return lo, hi, (edges[:-1] + edges[1:]) / 2 / fs


def _spectrogram(x, fs: float, nper: int):
    """PSD frames (Hann, 75 % overlap) of ``x``; beyond :data:`MAX_COLUMNS` frames, the mean PSD of each group of
    adjacent frames (computed in pieces, so a long signal is never held whole)."""
    from scipy.signal import spectrogram
    n = x.shape[0]
    hop = nper - nper * 3 // 4
    frames = 1 + (n - nper) // hop if n >= nper else 1
    if frames <= MAX_COLUMNS:
        return spectrogram(np.asarray(x, np.float64), fs=fs, nperseg=nper, noverlap=nper * 3 // 4,
                           scaling="density", mode="psd")
    g = -(-frames // MAX_COLUMNS)                               # frames averaged per column
    cols = frames // g
    per = max(1, 256 // g) * g                                  # frames per piece, whole columns
    out = []
    for f0 in range(0, cols * g, per):
        f1 = min(cols * g, f0 + per)
        seg = np.asarray(x[f0 * hop:(f1 - 1) * hop + nper], np.float64)
        f, _, S = spectrogram(seg, fs=fs, nperseg=nper, noverlap=nper * 3 // 4, scaling="density", mode="psd")
        out.append(S[:, :f1 - f0].reshape(S.shape[0], -1, g).mean(axis=2))
    S = np.concatenate(out, axis=1)
    ts = (np.arange(cols) * g + (g - 1) / 2) * hop / fs + nper / 2 / fs
    return f, ts, S


def spectrogram_png(path: str | Path, pressure_pa: np.ndarray, sample_rate: int, title: str = "",
                    events_t: np.ndarray | None = None) -> Path:
    """Save waveform and spectrogram of the first channel as a PNG with labelled axes.

    Parameters
    ----------
    path : str or Path
        Output PNG; its folder is created.
    pressure_pa : ndarray, shape (channels, samples) or (samples,)
        Pressure [Pa].
    sample_rate : int
        [Hz].
    title : str, optional
        Figure title.
    events_t : ndarray, optional
        Event times [s], marked on the waveform.

    Returns
    -------
    Path
        ``path``. The spectrogram is a PSD in dB re (20 uPa)^2/Hz, 90 dB range.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    x = pressure_pa if np.ndim(pressure_pa) == 1 else pressure_pa[0]       # a view: pressure_pa may be a memmap
    n = int(x.shape[0])
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(10, 6), sharex=True,
                                   gridspec_kw={"height_ratios": [1, 2.2]})
    if n <= LONG_SAMPLES:
        x = np.asarray(x, np.float64)
        ax0.plot(np.arange(n) / sample_rate, x, lw=0.5, color="k")
    else:
        # a long render: its envelope (min and max per bin) in pieces, never the whole signal as float64
        lo, hi, tb = _envelope(x, sample_rate)
        ax0.fill_between(tb, lo, hi, color="k", lw=0)
    ax0.set_ylabel("pressure [Pa]")
    if events_t is not None and len(events_t):
        for te in np.unique(np.round(events_t, 3)):
            ax0.axvline(te, color="tab:red", lw=0.4, alpha=0.4)
    ax0.set_title(title or "waveform and spectrogram")
    nper = 1024 if n >= 1024 else max(16, n)
    f, ts, S = _spectrogram(x, sample_rate, nper)
    SdB = 10 * np.log10(S + 1e-30) - 20 * np.log10(20e-6)   # dB re (20 uPa)^2/Hz
    vmax = float(SdB.max()) if SdB.size else 0.0
    im = ax1.pcolormesh(ts, f / 1000, SdB, shading="auto", cmap="magma", vmin=vmax - 90, vmax=vmax)
    ax1.set_ylabel("frequency [kHz]")
    ax1.set_xlabel("time [s]")
    fig.colorbar(im, ax=[ax0, ax1], label="PSD [dB re 20 uPa^2/Hz]", shrink=0.6)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def transfer_png(path: str | Path, tm, mode: int, bem_samples: np.ndarray | None = None) -> Path:
    """Plot |p| over (theta, phi) on the first FFAT shell: the fitted map, and the direct BEM samples side by side
    when given.

    Parameters
    ----------
    path : str or Path
        Output PNG; its folder is created.
    tm : TransferModel
        The transfer (:class:`~impactsound.transfer.precompute.TransferModel`).
    mode : int
        Mode index.
    bem_samples : ndarray, shape (T, 2T), optional
        Direct BEM pressure on the same grid (:func:`~impactsound.transfer.precompute.bem_shell_samples`).

    Returns
    -------
    Path
        ``path``; colours are |p| [Pa per unit modal amplitude].
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..transfer import ffat
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    T = int(tm.bank.T[mode])
    R0 = ffat.shell_radii(tm.r_bar)[0]
    th, ph = ffat.grid_angles(T)
    fitted = np.abs(tm.bank.map(mode).evaluate(R0 * ffat.grid_directions(T)))
    panels = [("fitted FFAT map", fitted)]
    if bem_samples is not None:
        panels.insert(0, ("BEM samples", np.abs(bem_samples)))
    vmax = max(float(p.max()) for _, p in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (name, val) in zip(axes[0], panels):
        im = ax.pcolormesh(np.degrees(ph), np.degrees(th), val, shading="auto", cmap="viridis", vmin=0,
                           vmax=vmax)
        ax.set_xlabel("azimuth phi [deg]")
        ax.set_ylabel("polar angle theta [deg]")
        ax.set_title(f"{name}: mode {mode}, {tm.frequencies_hz[mode]:.0f} Hz, R = {R0:.3g} m")
    fig.colorbar(im, ax=list(axes[0]), label="|p| [Pa per unit modal amplitude]")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
