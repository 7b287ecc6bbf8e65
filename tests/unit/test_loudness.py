"""Output level: peak, BS.1770 loudness and pascals (io/audio.py output_gain), against the standard's own tests."""
import json

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.io.audio import loudness_lufs, output_gain

FS = 48000


def _sine(amp_dbfs, seconds=5.0, f=1000.0, channels=2):
    t = np.arange(int(seconds * FS)) / FS
    x = 10 ** (amp_dbfs / 20) * np.sin(2 * np.pi * f * t)
    return np.tile(x, (channels, 1))


@pytest.mark.parametrize("level", [-23.0, -33.0])
def test_ebu_tech3341_stationary_sines(level):
    # EBU Tech 3341 (2016), test cases 1 and 2: a stereo 1 kHz sine at -23 / -33 dBFS reads -23 / -33 LUFS,
    # +-0.1 LU for a compliant meter.
    assert abs(loudness_lufs(_sine(level), FS) - level) <= 0.1


def test_bs1770_single_channel_997hz():
    # ITU-R BS.1770-4, sec. 2.1: a 0 dBFS 997 Hz sine in one (front) channel reads -3.01 LKFS; +-0.1 LU as above.
    assert abs(loudness_lufs(_sine(0.0, f=997.0, channels=1), FS) + 3.01) <= 0.1


def test_ebu_tech3341_gated_case3():
    # EBU Tech 3341 test case 3: -36 dBFS for 10 s, -23 dBFS for 60 s, -36 dBFS for 10 s (stereo 1 kHz) reads
    # -23 LUFS +-0.1: the relative gate (-10 LU) removes the quiet parts.
    both = np.concatenate([_sine(-36.0, 10.0), _sine(-23.0, 60.0), _sine(-36.0, 10.0)], axis=1)
    assert abs(loudness_lufs(both, FS) + 23.0) <= 0.1


def test_lufs_gain_hits_target_on_a_decaying_ring_in_pascals():
    # An impact-like ring in pascals (5 mPa peak, far below the -70 LUFS absolute gate as full-scale units):
    # the output's loudness is the target, measured independently on the scaled samples.
    t = np.arange(2 * FS) / FS
    p = 5e-3 * np.exp(-4 * t) * np.sin(2 * np.pi * 880 * t)
    p = np.vstack([p, 0.7 * p])
    for target in (-23.0, -16.0):
        g, info = output_gain(p, FS, "lufs", lufs_target=target)
        assert abs(loudness_lufs(p * g, FS) - target) < 0.01
        assert info["normalise"] == "lufs" and info["lufs_target"] == target


def test_peak_and_none():
    p = np.array([[0.0, 2.0, -4.0]])
    g, info = output_gain(p, FS, "peak")
    assert np.isclose(4 * g, 10 ** (-1 / 20)) and info == {"normalise": "peak"}
    assert output_gain(p, FS, "none")[0] == 1.0
    assert output_gain(p, FS, True)[0] == g and output_gain(p, FS, False)[0] == 1.0


def test_bad_level_choices():
    with pytest.raises(InputError, match="choose one of"):
        output_gain(np.ones((1, FS)), FS, "rms")
    with pytest.raises(InputError, match="at least 0.4 s"):
        output_gain(np.ones((1, FS // 10)), FS, "lufs")
    with pytest.raises(InputError, match="LUFS"):
        output_gain(np.ones((1, FS)), FS, "lufs", lufs_target=+3.0)
    # silence: no gain, and it is said
    g, info = output_gain(np.zeros((1, FS)), FS, "lufs")
    assert g == 1.0 and info["loudness_lufs"] is None


def test_render_save_lufs_keeps_pascals(tmp_path):
    import soundfile as sf

    from impactsound.dynamics.events import EventLog
    from impactsound.pipeline import RenderResult
    t = np.arange(FS) / FS
    p = (2e-2 * np.exp(-6 * t) * np.sin(2 * np.pi * 500 * t))[None]
    res = RenderResult(FS, p, {}, EventLog.empty(), ["mic"], {})
    res.save(tmp_path / "x.wav", normalise="lufs", lufs_target=-20.0)
    side = json.loads((tmp_path / "x.wav.json").read_text())
    x, _ = sf.read(tmp_path / "x.wav", always_2d=True)
    assert side["level"]["normalise"] == "lufs"
    assert abs(loudness_lufs(x.T, FS) - (-20.0)) < 0.01
    # pascals are recoverable (float32 round-off)
    np.testing.assert_allclose(x[:, 0] * side["pascals_per_unit"], p[0], atol=1e-7 * np.abs(p).max())


@pytest.mark.parametrize("fs,channels,seconds,piece", [(48000, 1, 3.3, 12345), (44100, 2, 5.05, 4410),
                                                        (48000, 2, 0.45, 1000), (32000, 1, 12.0, 1 << 16)])
def test_piecewise_meter_is_the_whole_signal_measure(fs, channels, seconds, piece):
    """The streaming render's meter (fed in pieces, filter state carried) against pyloudnorm on the whole signal:
    a decaying noise burst, so both gates act."""
    from impactsound.io.audio import LoudnessMeter
    rng = np.random.default_rng(fs + channels)
    n = int(seconds * fs)
    x = rng.standard_normal((channels, n)) * np.exp(-np.linspace(0, 8, n)) * 0.1
    m = LoudnessMeter(fs, channels)
    for a in range(0, n, piece):
        m.feed(x[:, a:a + piece])
    assert m.result() == pytest.approx(loudness_lufs(x, fs), abs=1e-9)


def test_piecewise_meter_on_ebu_case3_and_silence():
    from impactsound.io.audio import LoudnessMeter
    x = np.concatenate([_sine(-36, 10.0), _sine(-23, 60.0), _sine(-36, 10.0)], axis=1)
    m = LoudnessMeter(48000, 2)
    for a in range(0, x.shape[1], 48000 * 7 + 3):
        m.feed(x[:, a:a + 48000 * 7 + 3])
    assert m.result() == pytest.approx(-23.0, abs=0.1)
    m = LoudnessMeter(48000, 1)
    m.feed(np.zeros((1, 48000)))
    assert m.result() == -np.inf
    with pytest.raises(InputError, match="0.4 s"):
        m = LoudnessMeter(48000, 1)
        m.feed(np.ones((1, 100)))
        m.result()
