"""Audio output: float32 WAV (soundfile) plus a JSON sidecar that keeps the physical scale recoverable.

The WAV holds ``samples = pressure_pa * gain``; the sidecar stores ``pascals_per_unit = 1 / gain``, so
``pressure_pa = samples * pascals_per_unit``. With normalisation on (default) the loudest sample of the mix is at
``peak`` (-1 dBFS); off, the WAV holds pascals directly (gain 1; float32 WAV allows values above 1).
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
