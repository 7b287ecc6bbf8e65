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


def test_self_intersecting_mesh_named_with_repair_hint(tmp_path, capsys):
    f = _box_file(tmp_path / "x.obj", move_corner=[0.01, 0.01, -0.06])   # a corner pushed through the bottom
    assert main(["-q", "modes", str(f), "--material", "steel"]) == 2
    err = capsys.readouterr().err
    assert "x.obj" in err and "self-intersect" in err and "Traceback" not in err and err.count("\n") == 1


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
