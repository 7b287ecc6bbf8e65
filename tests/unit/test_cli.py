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
