"""Audio output: float32 WAV (soundfile) plus a JSON sidecar that keeps the physical scale recoverable.

The WAV holds ``samples = pressure_pa * gain``; the sidecar stores ``pascals_per_unit = 1 / gain``, so
``pressure_pa = samples * pascals_per_unit``. With normalisation on (default) the loudest sample of the mix is at
``peak`` (-1 dBFS); with ``lufs`` its integrated loudness (ITU-R BS.1770-4, gated, K-weighted; measured with
pyloudnorm) is at a target (-23 LUFS, EBU R128, by default); with ``none`` the WAV holds pascals directly (gain 1;
float32 WAV allows values above 1). Whatever the choice, the sidecar keeps ``pascals_per_unit``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError


def normalisation_gain(mix: np.ndarray, peak: float = 10 ** (-1 / 20)) -> float:
    """Gain that puts the loudest sample of a mix at ``peak``.

    Parameters
    ----------
    mix : ndarray
        Pressure [Pa], any shape.
    peak : float, optional
        Target peak in full-scale units (default -1 dBFS).

    Returns
    -------
    float
        Gain [1/Pa]; 1 for a silent (or empty) mix.
    """
    m = float(np.max(np.abs(mix))) if mix.size else 0.0
    return peak / m if m > 0 else 1.0


#: the output level choices (:func:`output_gain`)
NORMALISE = ("peak", "lufs", "none", "shared")
#: default loudness target [LUFS]: EBU R128's programme level
DEFAULT_LUFS = -23.0
#: BS.1770 integrated loudness needs at least one 400 ms gating block [s]
_LUFS_MIN_S = 0.4


def loudness_lufs(x: np.ndarray, sample_rate: int) -> float:
    """Integrated loudness of ``x`` (channels, samples) in full-scale units [LUFS], ITU-R BS.1770-4.

    K-weighting, 400 ms blocks with 75 % overlap, the -70 LUFS absolute and -10 LU relative gates, every channel
    weighted 1 (BS.1770's weights for left, right and centre; binaural ears and microphones are such channels).
    Measured with pyloudnorm. Returns -inf for silence (everything below the absolute gate).

    Raises
    ------
    InputError
        If ``x`` is shorter than one 400 ms block.
    """
    import pyloudnorm

    x = np.atleast_2d(np.asarray(x, np.float64))
    if x.shape[1] < int(np.ceil(_LUFS_MIN_S * sample_rate)):
        raise InputError(f"loudness normalisation needs at least {_LUFS_MIN_S} s of audio (one BS.1770 block), "
                         f"got {x.shape[1] / sample_rate:.3g} s; lengthen the scene or use normalise = 'peak'")
    import warnings
    with warnings.catch_warnings(), np.errstate(divide="ignore"):
        warnings.simplefilter("ignore")         # pyloudnorm warns about clipping above 1; pascals may be above
        v = float(pyloudnorm.Meter(int(sample_rate)).integrated_loudness(x.T if x.shape[0] > 1 else x[0]))
    return v if np.isfinite(v) else -np.inf


class LoudnessMeter:
    """Integrated loudness (ITU-R BS.1770-4) of a signal fed in pieces, in full-scale units [LUFS]: the same
    measure as :func:`loudness_lufs` (pyloudnorm's K-weighting filters and its block layout: 400 ms blocks every
    100 ms, channel weights 1, 1, 1, 1.41, 1.41, the -70 LUFS absolute and -10 LU relative gates) with memory
    that does not grow with the length: the K-weighting runs with carried filter state and each 100 ms hop keeps
    only its mean square.

    Use: ``m = LoudnessMeter(fs, channels)``; ``m.feed(x)`` for each (channels, k) piece; ``m.result()``.
    """

    BLOCK_S, STEP = 0.4, 0.25

    def __init__(self, sample_rate: int, channels: int):
        from pyloudnorm.iirfilter import IIRfilter
        from scipy.signal import tf2sos
        self.fs = int(sample_rate)
        # K-weighting: a high shelf (+4 dB above ~1.5 kHz, the head) and a high pass (~38 Hz, RLB), BS.1770-4 Annex 1
        shelf = IIRfilter(4.0, 1 / np.sqrt(2), 1500.0, self.fs, "high_shelf")
        hp = IIRfilter(0.0, 0.5, 38.0, self.fs, "high_pass")
        self.sos = np.vstack([tf2sos(shelf.b, shelf.a), tf2sos(hp.b, hp.a)])
        self.zi = np.zeros((int(channels), self.sos.shape[0], 2))
        self.n = 0
        self.hop_sums: list[np.ndarray] = []      # per 100 ms hop: sum of squares per channel
        self._cur = np.zeros(int(channels))

    def _edge(self, k: int) -> int:
        # sample where hop k starts (pyloudnorm's int(T_g (j step) fs))
        return int(self.BLOCK_S * (k * self.STEP) * self.fs)

    def feed(self, x: np.ndarray) -> None:
        from scipy.signal import sosfilt
        x = np.atleast_2d(np.asarray(x, np.float64))
        if not x.shape[1]:
            return
        y = np.empty_like(x)
        for c in range(x.shape[0]):
            y[c], self.zi[c] = sosfilt(self.sos, x[c], zi=self.zi[c])
        a = self.n
        self.n += x.shape[1]
        while a < self.n:
            k = len(self.hop_sums)
            end = self._edge(k + 1)
            b = min(end, self.n)
            self._cur += np.sum(y[:, a - (self.n - x.shape[1]):b - (self.n - x.shape[1])] ** 2, axis=1)
            if b == end:
                self.hop_sums.append(self._cur)
                self._cur = np.zeros_like(self._cur)
            a = b

    def result(self) -> float:
        """Integrated loudness [LUFS]; -inf for silence. An :class:`InputError` below one 400 ms block."""
        if self.n < int(np.ceil(_LUFS_MIN_S * self.fs)):
            raise InputError(f"loudness normalisation needs at least {_LUFS_MIN_S} s of audio (one BS.1770 block), "
                             f"got {self.n / self.fs:.3g} s; lengthen the scene or use normalise = 'peak'")
        T = self.n / self.fs
        nb = int(np.round((T - self.BLOCK_S) / (self.BLOCK_S * self.STEP))) + 1
        hops = np.array(self.hop_sums + [self._cur])                       # (hops, channels)
        per = int(round(1 / self.STEP))
        need = nb + per - 1
        if len(hops) < need:
            hops = np.vstack([hops, np.zeros((need - len(hops), hops.shape[1]))])
        z = sum(hops[j:j + nb] for j in range(per)) / (self.BLOCK_S * self.fs)   # (blocks, channels)
        G = np.array([1.0, 1.0, 1.0, 1.41, 1.41])[:z.shape[1]]
        with np.errstate(divide="ignore"):
            lj = -0.691 + 10 * np.log10(z @ G)
            gated = lj >= -70.0
            if not gated.any():
                return -np.inf
            rel = -0.691 + 10 * np.log10(z[gated].mean(axis=0) @ G) - 10.0
            keep = gated & (lj > rel)
            if not keep.any():
                return -np.inf
            v = float(-0.691 + 10 * np.log10(z[keep].mean(axis=0) @ G))
        return v if np.isfinite(v) else -np.inf


def output_gain(mix: np.ndarray, sample_rate: int, normalise: str | bool = "peak", *,
                lufs_target: float = DEFAULT_LUFS, full_scale_pa: float | None = None) -> tuple[float, dict]:
    """The gain [1/Pa] that the output gets, and what to record about it in the sidecar.

    Parameters
    ----------
    mix : ndarray, shape (channels, samples)
        Pressure [Pa].
    sample_rate : int
        [Hz].
    normalise : {"peak", "lufs", "none", "shared"} (or True = "peak", False = "none")
        ``peak``: the loudest sample at -1 dBFS; ``lufs``: integrated loudness at ``lufs_target``; ``none``:
        pascals (gain 1); ``shared``: a scale given by the caller, 1.0 = ``full_scale_pa`` (so that several
        renders compare).
    lufs_target : float
        [LUFS] for ``lufs``.
    full_scale_pa : float
        [Pa] for ``shared``.

    Returns
    -------
    gain : float
        1 for a silent mix.
    info : dict
        ``normalise``, and for ``lufs`` the target and ``loudness_lufs`` of the written file.

    Raises
    ------
    InputError
        On an unknown choice, a non-finite target, ``lufs`` on less than 0.4 s, or ``shared`` without a positive
        ``full_scale_pa``.
    """
    if normalise is True:
        normalise = "peak"
    elif normalise is False:
        normalise = "none"
    if normalise not in NORMALISE:
        raise InputError(f"normalise = {normalise!r}: choose one of {list(NORMALISE)} (peak: -1 dBFS; lufs: "
                         "integrated loudness at a target; none: pascals; shared: 1.0 = full_scale_pa)")
    info: dict = {"normalise": normalise}
    if normalise == "none":
        return 1.0, info
    if normalise == "shared":
        if not (full_scale_pa is not None and np.isfinite(full_scale_pa) and full_scale_pa > 0):
            raise InputError(f"normalise = 'shared' needs full_scale_pa > 0, the pressure [Pa] that 1.0 stands for "
                             f"(got {full_scale_pa!r}); e.g. 20.0, or use 'none' (pascals)")
        return 1.0 / float(full_scale_pa), {**info, "full_scale_pa": float(full_scale_pa)}
    if normalise == "peak":
        return normalisation_gain(mix), info
    check_lufs_target(lufs_target)
    # Measured at the peak-normalised level: pascals may lie far below BS.1770's absolute gate (-70 LUFS in
    # full-scale units). Above that gate loudness is a level, so a gain g moves it by 20 log10 g exactly (the
    # relative gate moves with the signal).
    g0 = normalisation_gain(mix, 1.0)
    return lufs_gain(loudness_lufs(np.asarray(mix, np.float64) * g0, sample_rate), g0,
                     float(np.max(np.abs(mix))) if mix.size else 0.0, lufs_target)


def check_lufs_target(target) -> None:
    """An :class:`InputError` unless ``target`` is a loudness in (-70, 0] LUFS."""
    if not (np.isfinite(target) and -70.0 < float(target) <= 0.0):
        raise InputError(f"lufs_target = {target!r}: need a loudness in (-70, 0] LUFS (EBU R128: -23)")


def lufs_gain(loudness: float, g0: float, peak_pa: float, target: float) -> tuple[float, dict]:
    """Gain [1/Pa] and sidecar entry of ``lufs``, from the loudness [LUFS] of the mix scaled by ``g0`` (1 / its
    peak [Pa]); -inf (silence) gives gain 1."""
    info = {"normalise": "lufs", "lufs_target": float(target)}
    if not np.isfinite(loudness):
        return 1.0, {**info, "loudness_lufs": None}
    gain = g0 * 10.0 ** ((float(target) - loudness) / 20.0)
    return gain, {**info, "loudness_lufs": float(target), "output_peak": float(peak_pa * gain)}


def _zero_peak_timestamp(path: Path) -> None:
    """Zero the time stamp in the PEAK chunk libsndfile adds to float WAVs.

    Why: that chunk records the wall-clock second of writing, so two renders of the same scene with the same seed
    gave different files (seen in CI: same samples, different bytes). The per-channel peak values stay; a zero
    time stamp is what the chunk's format uses for "not recorded". RIFF layout: 12-byte header, then chunks of
    (4-byte id, little-endian uint32 size, payload padded to even length); PEAK's payload starts with a uint32
    version and a uint32 time stamp."""
    import struct
    with open(path, "r+b") as f:
        head = f.read(12)
        if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return
        pos = 12
        while True:
            f.seek(pos)
            hdr = f.read(8)
            if len(hdr) < 8:
                return
            cid, size = hdr[:4], struct.unpack("<I", hdr[4:])[0]
            if cid == b"PEAK" and size >= 8:
                f.seek(pos + 12)
                f.write(b"\0\0\0\0")
                return
            if cid == b"data":
                return                        # PEAK comes before the samples when it is there at all
            pos += 8 + size + (size & 1)


def write_wav(path: str | Path, pressure_pa: np.ndarray, sample_rate: int, gain: float = 1.0,
              sidecar: dict | None = None) -> Path:
    """Write pressure scaled by ``gain`` as audio, and ``<path>.json`` with the scale and ``sidecar`` entries.

    ``.wav`` is written as float32 (values above 1 kept; the PEAK chunk's time stamp zeroed so that equal renders
    give equal bytes); ``.flac`` as 24-bit PCM, clipped to [-1, 1].

    Parameters
    ----------
    path : str or Path
        Output file, ``.wav`` or ``.flac``; its folder is created.
    pressure_pa : ndarray, shape (channels, samples) or (samples,)
        Pressure [Pa].
    sample_rate : int
        [Hz].
    gain : float, optional
        Scale applied before writing [1/Pa]; the sidecar stores pascals_per_unit = 1 / gain.
    sidecar : dict, optional
        Extra entries for the JSON sidecar (they override the defaults: sample_rate_hz, channels, samples,
        pascals_per_unit, peak_pa, units).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InputError
        On another suffix or non-finite samples.
    """
    x = np.atleast_2d(np.asarray(pressure_pa, np.float64))
    return write_wav_chunks(path, [x], x.shape[0], sample_rate, gain, sidecar)


def _write_sidecar(path: Path, sample_rate: int, channels: int, samples: int, gain: float, peak_pa: float,
                   sidecar: dict | None) -> None:
    meta = {"sample_rate_hz": int(sample_rate), "channels": int(channels), "samples": int(samples),
            "pascals_per_unit": 1.0 / gain, "peak_pa": float(peak_pa),
            "units": "pressure_pa = sample * pascals_per_unit"}
    meta.update(sidecar or {})
    Path(str(path) + ".json").write_text(json.dumps(meta, indent=2, sort_keys=True))


def write_wav_chunks(path: str | Path, chunks, channels: int, sample_rate: int, gain: float = 1.0,
                     sidecar: dict | None = None) -> Path:
    """:func:`write_wav` for a signal given in pieces: ``chunks`` yields (channels, k) pressure [Pa] blocks in
    order, so that no more than one block is in memory. The file and sidecar are those :func:`write_wav` writes
    for the whole signal (the same bytes)."""
    import soundfile as sf

    path = Path(path)
    if path.suffix.lower() not in (".wav", ".flac"):
        raise InputError(f"{path}: output must end in .wav or .flac")
    path.parent.mkdir(parents=True, exist_ok=True)
    flac = path.suffix.lower() == ".flac"
    n, peak = 0, 0.0
    with sf.SoundFile(str(path), "w", int(sample_rate), int(channels), subtype="PCM_24" if flac else "FLOAT") as f:
        for p in chunks:
            p = np.atleast_2d(np.asarray(p, np.float64))
            if not p.size:
                continue
            x = p * gain
            if not np.all(np.isfinite(x)):
                raise InputError(f"{path}: refusing to write non-finite samples (a NaN in the render; report a bug)")
            data = x.T.astype(np.float32)
            f.write(np.clip(data, -1, 1) if flac else data)
            n += p.shape[1]
            peak = max(peak, float(np.max(np.abs(p))))
    if not flac:
        _zero_peak_timestamp(path)
    _write_sidecar(path, sample_rate, channels, n, gain, peak, sidecar)
    return path
