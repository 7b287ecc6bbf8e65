"""``impactsound shell modes``: a free circular plate's first mode against Kirchhoff thin-plate theory through the
command line, and its errors (fem/shell.py, cli_shell.py)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import trimesh

sys.path.insert(0, str(Path(__file__).parent))
from test_shell_model import disk  # noqa: E402  (the same ring mesh as the model's own plate test)


@pytest.mark.parametrize("bending", ["flap", "midedge"])
def test_shell_modes_json_matches_kirchhoff(tmp_path, capsys, bending):
    """Free aluminium disk, a = 0.1 m, h = 1 mm: the first elastic mode (two nodal diameters, twice) at
    lambda^2 = 5.262 (nu = 0.33, Leissa) within 2 % on 16 rings, with either bending scheme (--bending);
    frequencies ascending, all elastic."""
    from impactsound.cli import main
    from impactsound.materials import get_material
    V, F = disk(16, 0.1)
    trimesh.Trimesh(V, F, process=False).export(tmp_path / "disk.obj")
    assert main(["-q", "shell", "modes", str(tmp_path / "disk.obj"), "--thickness", "0.001", "--material",
                 "aluminium", "--count", "6", "--bending", bending, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["bending"] == bending
    f = np.array(out["frequencies_hz"])
    al = get_material("aluminium")
    D = al.E * 1e-9 / (12 * (1 - al.nu**2))
    f20 = 5.262 / (2 * math.pi * 0.01) * math.sqrt(D / (al.rho * 1e-3))
    assert len(f) == 6 and np.all(np.diff(f) >= 0) and f[0] > 0.1 * f20
    assert f[0] / f20 == pytest.approx(1.0, abs=0.02) and f[1] / f20 == pytest.approx(1.0, abs=0.02)


def test_shell_modes_errors(tmp_path):
    from impactsound.cli import main
    V, F = disk(4, 0.1)
    trimesh.Trimesh(V, F, process=False).export(tmp_path / "disk.obj")
    assert main(["-q", "shell", "modes", str(tmp_path / "disk.obj"), "--thickness", "0", "--material", "steel"]) == 2
    assert main(["-q", "shell", "modes", str(tmp_path / "nope.obj"), "--thickness", "0.001", "--material",
                 "steel"]) == 2
    # three triangles on one edge: a non-manifold surface
    V3 = np.array([[0, 0, 0], [1, 0, 0], [0.5, 1, 0], [0.5, -1, 0], [0.5, 0, 1]], float) * 0.1
    F3 = np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]])
    trimesh.Trimesh(V3, F3, process=False).export(tmp_path / "nm.obj")
    assert main(["-q", "shell", "modes", str(tmp_path / "nm.obj"), "--thickness", "0.001", "--material",
                 "steel"]) == 2
