import json

import pytest

from impactsound.cli import main


def test_materials_json(capsys):
    assert main(["materials", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(r["name"] == "steel" and r["E"] == 190e9 for r in rows)


def test_known_error_is_one_line_and_exit_2(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text('[scene]\nduration = 0\n[[object]]\nshape = "sphere"\nmaterial = "steel"\n')
    assert main(["-q", "render", str(p), "--out", str(tmp_path / "x.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "duration" in err[0] and "s.toml" in err[0]


def test_missing_scene_file(tmp_path, capsys):
    assert main(["render", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "x.wav")]) == 2
    assert "nope.toml" in capsys.readouterr().err


def test_modes_requires_material(tmp_path, capsys):
    assert main(["modes", str(tmp_path / "m.obj")]) == 2
    assert "--material" in capsys.readouterr().err


def _box_file(path, move_corner=None, extents=(0.05, 0.04, 0.03)):
    import numpy as np
    import trimesh
    b = trimesh.creation.box(extents=extents)
    v = b.vertices.copy()
    if move_corner is not None:
        v[np.argmax(v.sum(1))] = move_corner
    trimesh.Trimesh(v, b.faces, process=False).export(path)
    return path


def test_modes_json_lists_ascending_elastic_modes(tmp_path, capsys):
    import json
    f = _box_file(tmp_path / "b.stl", extents=(0.2, 0.02, 0.01))      # a bar: audible bending modes
    assert main(["-q", "modes", str(f), "--E", "70e9", "--nu", "0.33", "--rho", "2700", "--count", "4",
                 "--order", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    fr = d["frequencies_hz"]
    assert len(fr) == 4 and fr == sorted(fr) and fr[0] > 500 and d["dofs"] > 0


def test_self_intersecting_mesh_is_meshed_by_ftetwild_with_a_message(tmp_path, capsys):
    """TetGen refuses a self-intersecting surface; the fallback to fTetWild meshes it and says so."""
    f = _box_file(tmp_path / "x.obj", move_corner=[0.01, 0.01, -0.06])   # a corner pushed through the bottom
    assert main(["-q", "modes", str(f), "--material", "steel"]) == 0
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "fTetWild" in ln)     # warnings: one line each, no source line
    assert line.startswith("warning: ") and "x.obj" in line and "Traceback" not in err


def test_pan_precompute_resumes_and_info(tmp_path, capsys):
    import json

    import trimesh
    f = tmp_path / "ball.stl"
    trimesh.creation.icosphere(subdivisions=2, radius=0.005).export(f)
    soft = ["--E", "5e6", "--nu", "0.45", "--rho", "1100"]     # soft: long pulse, coarse grid, fast test
    out = tmp_path / "ball_pan.h5"
    assert main(["-q", "pan", "precompute", str(f), *soft, "--out", str(out)]) == 0
    assert out.is_file()
    first = out.read_bytes()
    capsys.readouterr()
    assert main(["pan", "info", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["directions"] == [5, 10] and d["h_s"] > 0 and len(d["radii_m"]) == 5
    assert d["mass_kg"] == pytest.approx(1100 * trimesh.creation.icosphere(subdivisions=2, radius=0.005).volume)
    # a second run finds the cached asset and produces the same file content
    assert main(["-q", "pan", "precompute", str(f), *soft, "--out", str(out)]) == 0
    assert out.read_bytes() == first


def test_pan_info_rejects_other_assets(tmp_path, capsys):
    f = tmp_path / "x.h5"
    f.write_bytes(b"not an asset")
    assert main(["pan", "info", str(f)]) == 2
    assert "x.h5" in capsys.readouterr().err


_LOG_SCENE = """\
[scene]
duration = 0.3
sources = ["modal"]
modal_order = 1
max_modes = 10
event_log = "{log}"
[[listener]]
name = "mic"
position = [0.0, -0.5, 0.3]
[[object]]
name = "bar"
shape = "box"
size = {{ size = [0.2, 0.025, 0.012] }}
material = "aluminium"
position = [0.0, 0.0, 0.006]
"""
_HEADER = "time,body_a,body_b,px,py,pz,nx,ny,nz,jx,jy,jz,vn\n"


def _log_scene(tmp_path, log_text: str | bytes, name="ev.csv"):
    p = tmp_path / name
    p.write_bytes(log_text if isinstance(log_text, bytes) else log_text.encode())
    s = tmp_path / "s.toml"
    s.write_text(_LOG_SCENE.format(log=name))
    return s


def test_render_header_only_log_is_silence_with_a_message_exit_0(tmp_path, capsys):
    s = _log_scene(tmp_path, _HEADER)
    assert main(["-q", "render", str(s), "--out", str(tmp_path / "x.wav")]) == 0
    err = capsys.readouterr().err
    assert "ev.csv: the event log has no events (only a header): the render is silent" in err
    assert "x.wav is silent: no contact events" in err and "Traceback" not in err
    import soundfile
    assert not soundfile.read(tmp_path / "x.wav")[0].any()


def test_render_implausible_log_is_one_line_exit_2_and_allowed_with_the_flag(tmp_path, capsys):
    # a bar of 0.16 kg landing at 2 m/s: 0.5 N s is plausible; 2500 N s is a force written as an impulse
    s = _log_scene(tmp_path, _HEADER + "0.1,ground,bar,0,0,0,0,0,1,0,0,2500,2\n")
    assert main(["-q", "render", str(s), "--out", str(tmp_path / "x.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ev.csv: row 2, columns jx,jy,jz:" in err[0] and "force (N)" in err[0]
    assert not (tmp_path / "x.wav").exists()
    assert main(["-q", "render", str(s), "--out", str(tmp_path / "x.wav"), "--allow-implausible"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "ev.csv: row 2, columns jx,jy,jz:" in err[0]
    assert "rendered anyway" in err[0] and (tmp_path / "x.wav").is_file()


def test_render_utf16_log_is_read(tmp_path, capsys):
    text = _HEADER + "0.1,ground,bar,0.05,0,0,0,0,1,0,0,0.5,2\n"
    s = _log_scene(tmp_path, text.replace(",", "\t").encode("utf-16"))
    assert main(["-q", "render", str(s), "--out", str(tmp_path / "x.wav")]) == 0
    import soundfile
    assert soundfile.read(tmp_path / "x.wav")[0].any()


def test_render_garbage_log_names_the_file_exit_2(tmp_path, capsys):
    s = _log_scene(tmp_path, bytes(range(128, 256)) * 2 + bytes(range(128)), name="junk.csv")
    assert main(["-q", "render", str(s), "--out", str(tmp_path / "x.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "junk.csv: not a text CSV file" in err[0] and "UnicodeDecodeError" not in err[0]


def test_events_out_with_unknown_extension_is_refused_before_simulating(tmp_path, capsys, monkeypatch):
    import impactsound.pipeline
    def no_simulation(*a, **k):
        raise AssertionError("simulated before checking --out")
    monkeypatch.setattr(impactsound.pipeline, "scene_events", no_simulation)
    s = tmp_path / "s.toml"
    s.write_text('[[object]]\nshape = "sphere"\nmaterial = "steel"\n')
    assert main(["-q", "events", str(s), "--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "x.txt" in err and "'.txt'" in err and ".csv or .npz" in err


@pytest.mark.parametrize("f_max", ["-1000", "0", "nan"])
def test_modes_f_max_must_be_positive(tmp_path, capsys, f_max):
    f = _box_file(tmp_path / "b.stl")
    assert main(["-q", "modes", str(f), "--material", "steel", "--f-max", f_max]) == 2
    err = capsys.readouterr().err
    assert f"--f-max {f_max} Hz must be positive" in err and err.count("\n") == 1


def test_modes_all_above_f_max_says_so(tmp_path, capsys):
    f = _box_file(tmp_path / "small.stl", extents=(0.01, 0.01, 0.01))    # a 1 cm steel cube: modes > 200 kHz
    assert main(["-q", "modes", str(f), "--material", "steel", "--count", "12", "--order", "1"]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("0 modes")
    assert "small.stl: none of its elastic modes is at or below --f-max 20000 Hz (asked for up to 12)" in cap.err
    assert "raise --f-max" in cap.err


def test_message_numbers_are_plain():
    import numpy as np

    from impactsound.cli import _g
    assert _g({"a": np.float64(0.5), "b": [np.int64(3), np.float32(2.5e-7)]}) == "{a: 0.5, b: [3, 2.5e-07]}"


def test_demo_writes_stems_of_a_built_in_scene(tmp_path, monkeypatch):
    """`demo --scene NAME --stems DIR` writes the mix per source kind and per source kind and object. (The ground
    scene, with the ball's acceleration noise from the proxy soundbank instead of its own PAN field: the stems are
    what is checked here, and the PAN field would be most of the test's time.)"""
    from click.testing import CliRunner

    import impactsound.cli as C
    from impactsound.cli import cli
    from impactsound.scene import demo_scene_path
    toml = tmp_path / "ground_drop.toml"
    toml.write_text((demo_scene_path().parent / "ground_drop.toml").read_text()
                    + '\n[source.acceleration_noise]\nmodel = "proxy"\nbank = "tiny"\n')
    monkeypatch.setitem(C.BUILTIN_SCENES, "ground", (str(toml), C.BUILTIN_SCENES["ground"][1]))
    r = CliRunner().invoke(cli, ["-q", "demo", "--scene", "ground", "--out", str(tmp_path), "--stems",
                                 str(tmp_path / "stems")])
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (tmp_path / "stems").glob("*.wav"))
    assert {"modal.wav", "ground.wav", "ground_ball.wav", "acceleration_noise_ball.wav"} <= set(names)
    r = CliRunner().invoke(cli, ["-q", "demo", "--scene", "shells", "--out", str(tmp_path), "--stems",
                                 str(tmp_path / "s2")])
    assert r.exit_code != 0 and "render one of its scenes" in str(r.exception)


def test_python_dash_m_runs_the_same_command_line():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "impactsound", "materials"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "steel" in r.stdout
