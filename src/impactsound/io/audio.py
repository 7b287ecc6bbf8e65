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
    if not (np.isfinite(lufs_target) and -70.0 < float(lufs_target) <= 0.0):
        raise InputError(f"lufs_target = {lufs_target!r}: need a loudness in (-70, 0] LUFS (EBU R128: -23)")
    # Measured at the peak-normalised level: pascals may lie far below BS.1770's absolute gate (-70 LUFS in
    # full-scale units). Above that gate loudness is a level, so a gain g moves it by 20 log10 g exactly (the
    # relative gate moves with the signal).
    g0 = normalisation_gain(mix, 1.0)
    lk = loudness_lufs(np.asarray(mix, np.float64) * g0, sample_rate)
    if not np.isfinite(lk):
        return 1.0, {**info, "lufs_target": float(lufs_target), "loudness_lufs": None}
    gain = g0 * 10.0 ** ((float(lufs_target) - lk) / 20.0)
    return gain, {**info, "lufs_target": float(lufs_target), "loudness_lufs": float(lufs_target),
                  "output_peak": float(np.max(np.abs(mix)) * gain)}


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
    import soundfile as sf

    path = Path(path)
    if path.suffix.lower() not in (".wav", ".flac"):
        raise InputError(f"{path}: output must end in .wav or .flac")
    path.parent.mkdir(parents=True, exist_ok=True)
    x = np.atleast_2d(np.asarray(pressure_pa, np.float64)) * gain
    if not np.all(np.isfinite(x)):
        raise InputError(f"{path}: refusing to write non-finite samples (a NaN in the render; report a bug)")
    data = x.T.astype(np.float32)
    if path.suffix.lower() == ".flac":
        sf.write(str(path), np.clip(data, -1, 1), sample_rate, subtype="PCM_24")
    else:
        sf.write(str(path), data, sample_rate, subtype="FLOAT")
        _zero_peak_timestamp(path)
    meta = {"sample_rate_hz": int(sample_rate), "channels": int(x.shape[0]), "samples": int(x.shape[1]),
            "pascals_per_unit": 1.0 / gain, "peak_pa": float(np.max(np.abs(pressure_pa))) if x.size else 0.0,
            "units": "pressure_pa = sample * pascals_per_unit"}
    meta.update(sidecar or {})
    Path(str(path) + ".json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return path
