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


def test_shell_modes_errors_name_the_file_and_the_units(tmp_path, capsys):
    """A non-manifold mesh's message names the file (not only the edge); a disk written in millimetres gets the
    units error with the scale that fixes it, as solid meshes do."""
    from impactsound.cli import main
    V3 = np.array([[0, 0, 0], [1, 0, 0], [0.5, 1, 0], [0.5, -1, 0], [0.5, 0, 1]], float) * 0.1
    F3 = np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]])
    trimesh.Trimesh(V3, F3, process=False).export(tmp_path / "nm.obj")
    capsys.readouterr()
    assert main(["-q", "shell", "modes", str(tmp_path / "nm.obj"), "--thickness", "0.001", "--material",
                 "steel"]) == 2
    err = capsys.readouterr().err
    assert "nm.obj" in err and "edge" in err
    V, F = disk(4, 0.1)
    trimesh.Trimesh(V * 1000.0, F, process=False).export(tmp_path / "disk_mm.obj")
    assert main(["-q", "shell", "modes", str(tmp_path / "disk_mm.obj"), "--thickness", "0.001", "--material",
                 "steel"]) == 2
    err = capsys.readouterr().err
    assert "disk_mm.obj" in err and "200 m across" in err and "millimetres scale them by 0.001" in err


def test_shell_mesh_in_millimetres_in_a_scene_names_the_scale(tmp_path):
    from impactsound.errors import MeshError
    from impactsound.scene import load_scene
    V, F = disk(4, 0.05)
    trimesh.Trimesh(V * 1000.0, F, process=False).export(tmp_path / "sheet.obj")
    d = {"scene": {"duration": 0.1}, "listener": [{"position": [0, -0.5, 0.3]}],
         "object": [{"name": "s", "mesh": "sheet.obj", "material": "steel", "shell": {"thickness": 0.001},
                     "position": [0, 0, 0.2]}]}
    with pytest.raises(MeshError, match=r"object\[0\] \(s\)\.mesh .*sheet\.obj.*100 m across.*set scale = 0\.001 \(10 cm\)"):
        load_scene(d, base=tmp_path)
    d["object"][0]["scale"] = 0.001
    assert load_scene(d, base=tmp_path).bodies[0].mass > 0


@pytest.mark.parametrize("resolution", [10, 12, 16, 24])
def test_flat_sheet_has_a_plate_inertia_that_mujoco_takes(resolution):
    """A flat shell's lumped inertia used to satisfy A + B = C only to rounding, and MuJoCo refused some
    resolutions ("inertia must satisfy A + B >= C"). With the wall's own through-thickness term the moments are
    the thin plate's, I = m (b^2 + h^2, a^2 + h^2, a^2 + b^2) / 12 for an a x b x h plate, to second order in the
    mesh spacing (lumped vertex masses are the trapezoid rule: measured error x resolution^2 = 2.0-4.5), and
    A + B - C = m h^2 / 6 exactly."""
    from impactsound.pipeline import scene_events
    from impactsound.scene import load_scene
    a, b, h = 0.30, 0.20, 0.001
    d = {"scene": {"duration": 0.3}, "listener": [{"position": [0, -0.5, 0.3]}],
         "object": [{"name": "s", "shape": "sheet", "size": {"width": a, "height": b}, "material": "steel",
                     "shell": {"thickness": h, "resolution": resolution}, "position": [0, 0, 0.05]}]}
    scene = load_scene(d)
    body = scene.bodies[0]
    m = body.mass
    assert m == pytest.approx(body.material.rho * a * b * h, rel=1e-9)
    ref = np.sort(m * np.array([b**2 + h**2, a**2 + h**2, a**2 + b**2]) / 12.0)

    def err(scene):
        return np.abs(np.linalg.eigvalsh(scene.bodies[0].inertia) / ref - 1.0)

    e = err(scene)
    assert np.all(e < 5.0 / resolution**2)
    d["object"][0]["shell"]["resolution"] = 2 * resolution          # second order: 4x smaller at twice the segments
    assert np.all((e / err(load_scene(d)) > 3.5) & (e / err(load_scene(d)) < 4.6))
    Iw = np.linalg.eigvalsh(body.inertia)
    assert Iw[0] + Iw[1] - Iw[2] == pytest.approx(m * h**2 / 6.0, rel=1e-6)
    log = scene_events(scene)                     # MuJoCo takes it: the sheet falls and lands
    assert len(log) > 0
