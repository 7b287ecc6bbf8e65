"""WAV output: physical scale in the sidecar, and byte-identical files for identical renders."""
import json
import struct
import time

import numpy as np
import pytest
import soundfile as sf

from impactsound.io.audio import normalisation_gain, write_wav


def _chunks(b: bytes) -> dict:
    out, i = {}, 12
    while i + 8 <= len(b):
        cid, n = b[i:i + 4], struct.unpack("<I", b[i + 4:i + 8])[0]
        out[cid] = b[i + 8:i + 8 + n]
        i += 8 + n + (n & 1)
    return out


def test_same_samples_written_a_second_apart_give_the_same_bytes(tmp_path):
    """Regression (CI): libsndfile stamps float WAVs with the second of writing (PEAK chunk)."""
    x = np.sin(np.linspace(0, 50, 2000))[None] * 0.3
    a = write_wav(tmp_path / "a.wav", x, 48000, gain=2.0)
    time.sleep(1.1)
    b = write_wav(tmp_path / "b.wav", x, 48000, gain=2.0)
    assert a.read_bytes() == b.read_bytes()
    peak = _chunks(a.read_bytes())[b"PEAK"]
    version, stamp, value, where = struct.unpack("<IIfI", peak[:16])
    assert stamp == 0 and value == pytest.approx(0.6, rel=1e-6)      # the peak itself is kept
    y, fs = sf.read(a, dtype="float64")
    assert fs == 48000 and np.array_equal(y.astype(np.float32), (x[0] * 2.0).astype(np.float32))


def test_sidecar_recovers_pascals(tmp_path):
    x = np.array([[0.0, 0.02, -0.05, 0.01]])
    g = normalisation_gain(x)
    p = write_wav(tmp_path / "m.wav", x, 48000, gain=g)
    meta = json.loads((tmp_path / "m.wav.json").read_text())
    y, _ = sf.read(p, dtype="float64")
    assert np.allclose(y * meta["pascals_per_unit"], x[0], rtol=1e-6, atol=1e-12)
    assert np.abs(y).max() == pytest.approx(10 ** (-1 / 20), rel=1e-6)
