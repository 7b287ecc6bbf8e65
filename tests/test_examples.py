"""The scripts in examples/ run (``main(out_dir, small=True)``), write what they promise, and their physics holds
where a cheap independent reference exists (beam and plate theory, momentum of a bounce)."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    """The example module examples/<name>.py (imported under a private name: several share a name with the API)."""
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_sound(path, sample_rate=48000):
    """A float32 WAV at the rate, finite, not silent, with its JSON sidecar."""
    x, fs = sf.read(path, always_2d=True)
    assert fs == sample_rate and sf.info(path).subtype == "FLOAT"
    assert np.isfinite(x).all() and np.abs(x).max() > 0.1           # normalised to -1 dBFS by the examples
    assert Path(str(path) + ".json").stat().st_size > 0


def assert_picture(path):
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(path).stat().st_size > 10_000


def test_every_example_is_tested():
    tested = {"strike_bar", "render_scene", "import_contacts", "compare_radiation", "plot_mode_shape",
              "export_faust", "pour_grains"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_strike_bar_first_bending_mode_matches_euler_bernoulli(tmp_path):
    r = load("strike_bar").main(tmp_path, small=True)
    assert_sound(r["wav"])
    assert_picture(r["png"])
    # a 30:1 free-free bar: Euler-Bernoulli theory is an independent reference for its first bending mode
    assert r["f_fem"] == pytest.approx(r["f_beam"], rel=0.05)


def test_render_scene_writes_mix_stems_and_says_what_each_object_got(tmp_path):
    r = load("render_scene").main(tmp_path, small=True)
    assert_sound(r["wav"])
    assert_picture(r["png"])
    objects = r["result"].info["objects"]
    assert objects["bar"]["modes"] > 0 and objects["bar"]["radiation"].startswith("low_order")
    assert objects["block"]["modes"] == 0                   # a 5 cm wooden block has no modes below 20 kHz
    assert {p.name for p in r["stems"].glob("*.wav")} == {"modal.wav", "modal_bar.wav", "modal_block.wav"}
    assert len(r["result"].events) > 0


def test_import_contacts_merges_the_engines_contacts_and_keeps_the_momentum(tmp_path):
    ex = load("import_contacts")
    r = ex.main(tmp_path, small=True)
    assert_sound(r["wav"])
    assert_picture(r["png"])
    assert r["csv"].stat().st_size > 0
    log = r["log"]
    bounces = np.unique(log.t)
    assert len(bounces) >= 3 and len(log) == 4 * len(bounces)         # one event per corner and bounce
    # the first bounce: the corners' impulses add up to (1 + e) m vn (restitution 0.5), vn = sqrt(2 g h)
    mass = 2700 * np.prod(ex.BAR)
    first = log.t == bounces[0]
    assert log.impulse[first, 2].sum() == pytest.approx(1.5 * mass * log.vn[first][0], rel=0.02)
    assert log.vn[first][0] == pytest.approx(np.sqrt(2 * 9.81 * (0.12 - 0.005)), rel=0.02)


def test_compare_radiation_shows_the_compact_model_too_quiet_for_bending(tmp_path):
    r = load("compare_radiation").main(tmp_path, small=True)
    assert_picture(r["png"])
    for wav in r["wavs"]:
        x, _ = sf.read(wav)
        assert np.isfinite(x).all() and np.abs(x).max() > 0
    assert r["asset"].stat().st_size > 0
    # the first mode bends the free bar: its monopole and dipole moments vanish, the FFAT maps do not
    assert r["diff_listener_db"][0] < -10 and r["diff_sphere_db"][0] < -10


def test_plot_mode_shape_plate_modes_match_thin_plate_theory(tmp_path):
    r = load("plot_mode_shape").main(tmp_path, small=True)
    assert_picture(r["png"])
    # free square plate, 4 % thick: Kirchhoff theory (Leissa) within 5 % for its first three modes
    assert np.allclose(r["frequencies_hz"][:3], r["theory_hz"][:3], rtol=0.05)


def test_export_faust_writes_a_bank_and_a_program(tmp_path):
    r = load("export_faust").main(tmp_path, small=True)
    assert_sound(r["wav"])
    assert len(r["bank"]["modes"]["frequency_hz"]) == 8 and len(r["bank"]["points"]["gains"]) == 3
    assert "process =" in r["dsp"].read_text()
    if shutil.which("faust"):
        res = subprocess.run(["faust", str(r["dsp"]), "-o", str(tmp_path / "bank.cpp")], capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr


def test_pour_grains_renders_empty_and_full_cups(tmp_path):
    """Both pours sound; the partly full cup is struck more softly: the sum of v0^2 over its hits (one bead size)
    is lower than the empty cup's (the beads already in it take the pour's hits)."""
    ex = load("pour_grains")
    paths = ex.main(tmp_path, small=True)
    wavs = [p for p in paths if p.suffix == ".wav"]
    assert len(wavs) == 2
    for w in wavs:
        assert_sound(w)
    for p in paths:
        if p.suffix == ".png":
            assert_picture(p)
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    energy = []
    for full in (False, True):
        ev = granular_events(load_scene(ex.scene(full=full, small=True)))
        cup = (ev.kind == 1) & (ev.id_b == ev.containers.index("cup"))
        energy.append(float((ev.v0[cup] ** 2).sum()))
    assert energy[1] < energy[0]
