import numpy as np
import pytest

from impactsound.errors import ImpactSoundError, InputError, MaterialError, MeshError
from impactsound.scene import demo_scene_path, load_scene, parse_scene
from impactsound.scene.primitives import PRIMITIVES, make_primitive


def _scene(**over):
    d = {"scene": {"duration": 1.0},
         "listener": [{"position": [0.0, -0.5, 0.3]}],
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0.0, 0.0, 0.2]}]}
    for k, v in over.items():
        d[k] = v
    return d


def test_demo_scene_loads_with_five_bodies_of_different_materials():
    s = load_scene(demo_scene_path())
    assert len(s.bodies) == 5
    assert len({b.material.name for b in s.bodies}) >= 4
    assert 3.0 <= s.duration <= 5.0 and s.sample_rate == 48000


@pytest.mark.parametrize("shape", list(PRIMITIVES))
def test_primitives_are_watertight_solids(shape):
    m = make_primitive(shape)
    assert m.is_watertight and m.is_winding_consistent and m.volume > 0


def test_body_mass_properties_match_analytic_sphere():
    s = parse_scene(_scene())
    b = s.bodies[0]
    # icosphere volume converges to 4/3 pi r^3 from below (inscribed); 1 % at subdivision 3
    assert b.mass == pytest.approx(7850 * 4 / 3 * np.pi * 1e-6, rel=0.01)
    assert np.allclose(b.inertia, np.eye(3) * 0.4 * b.mass * 1e-4, rtol=0.02)
    assert np.allclose(b.mesh.center_mass, 0, atol=1e-12)


@pytest.mark.parametrize("patch, match", [
    ({"scene": {"duration": 0.0}}, "duration"),
    ({"scene": {"duration": -1.0}}, "duration"),
    ({"scene": {"sample_rate": 4000}}, "sample_rate"),
    ({"scene": {"sources": ["modal", "laser"]}}, "laser"),
    ({"listener": []}, "listener"),
    ({"object": []}, "object"),
])
def test_bad_scene_fields_are_named(patch, match):
    with pytest.raises(InputError, match=match):
        parse_scene(_scene(**patch))


def test_unknown_material_suggests_close_names():
    d = _scene()
    d["object"][0]["material"] = "alumnium"
    with pytest.raises(MaterialError, match="aluminium"):
        parse_scene(d)


def test_nan_velocity_and_position_rejected():
    d = _scene()
    d["object"][0]["velocity"] = [0.0, float("nan"), 0.0]
    with pytest.raises(ImpactSoundError, match="velocity"):
        parse_scene(d)
    d = _scene()
    d["object"][0]["position"] = [0.0, float("inf"), 0.0]
    with pytest.raises(ImpactSoundError, match="position"):
        parse_scene(d)


def test_listener_inside_object_rejected():
    with pytest.raises(InputError, match="inside"):
        parse_scene(_scene(listener=[{"position": [0.0, 0.0, 0.2]}]))


def test_mesh_file_and_units(tmp_path):
    m = make_primitive("box", {"size": [20.0, 20.0, 20.0]})  # "millimetres" read as metres
    m.export(tmp_path / "cube.stl")
    d = _scene()
    d["object"][0] = {"name": "cube", "mesh": "cube.stl", "material": "steel", "position": [0, 0, 20]}
    (tmp_path / "s.toml").write_text("")
    with pytest.raises(MeshError, match="cube.stl"):
        parse_scene(d, base=tmp_path, src="s.toml")
    d["object"][0]["scale"] = 0.001
    d["object"][0]["position"] = [0, 0, 0.1]
    s = parse_scene(d, base=tmp_path)
    assert s.bodies[0].mass == pytest.approx(7850 * 0.02**3, rel=1e-9)


def test_open_mesh_rejected_with_file_name(tmp_path):
    m = make_primitive("box")
    m.update_faces(np.arange(len(m.faces)) != 0)  # remove one triangle: a hole
    m.export(tmp_path / "open.stl")
    d = _scene()
    d["object"][0] = {"name": "o", "mesh": "open.stl", "material": "steel"}
    with pytest.raises(MeshError, match="open.stl"):
        parse_scene(d, base=tmp_path)


def test_invalid_toml_names_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[scene\nduration = 1")
    with pytest.raises(InputError, match="bad.toml"):
        load_scene(p)


def test_binaural_listener_becomes_two_ears():
    s = parse_scene(_scene(listener=[{"name": "head", "position": [0.0, -0.5, 0.3], "binaural": True,
                                      "right_ear": [2.0, 0.0, 0.0]}]))
    assert [l.name for l in s.listeners] == ["head.L", "head.R"]
    assert np.allclose(s.listeners[1].position - s.listeners[0].position, [2 * 0.0875, 0, 0])
    assert np.allclose(s.listeners[1].ear, [1, 0, 0]) and np.allclose(s.listeners[0].ear, [-1, 0, 0])
    with pytest.raises(InputError, match="right_ear"):
        parse_scene(_scene(listener=[{"position": [0.0, -0.5, 0.3], "binaural": True, "right_ear": [0, 0, 0]}]))
    assert parse_scene(_scene()).listeners[0].ear is None


def test_object_transfer_asset_is_checked_up_front_and_against_the_modal_model(tmp_path):
    """Per-object `transfer = "FILE"`: a missing file is an InputError naming the object and field; an asset made
    for another modal model is refused with the command that would make the right one; a matching one is used."""
    from impactsound.errors import AssetError
    from impactsound.fem.model import ModalModel
    from impactsound.materials import get_material
    from impactsound.sources.modal import transfer_models
    from impactsound.transfer.precompute import TransferSettings, assemble
    from impactsound.assets import write_asset

    d = _scene()
    d["object"][0]["transfer"] = "ball_ffat.h5"
    with pytest.raises(InputError, match=r"object\[0\] \(ball\)\.transfer = 'ball_ffat.h5'.*not found"):
        parse_scene(d, base=tmp_path, src="s.toml")
    # a tiny asset (one 500 Hz mode, a flat map) assembled without a BEM solve, for the modal model "model-A"
    import trimesh
    sph = trimesh.creation.icosphere(subdivisions=1, radius=0.01)
    T = 16
    res = {0: {"k": 2 * np.pi * 500 / 343.2, "psi": np.ones((1, T, 2 * T), np.complex64), "levels": 0,
               "bem_p": np.zeros(len(sph.vertices), np.complex64), "bem_g": np.zeros(len(sph.faces), np.complex64),
               "holdout_error": np.zeros(1), "faces": len(sph.faces), "capped": False, "seconds": 0.0}}

    def model(h):
        return ModalModel(material=get_material("steel"), order=1, frequencies_hz=np.array([500.0]),
                          surface_nodes=sph.vertices, surface_faces=sph.faces,
                          shapes=np.ones((1, len(sph.vertices), 3)), xi=np.array([1e-3]), mass=1.0,
                          com=np.zeros(3), inertia=np.eye(3), volume=sph.volume, inputs_hash=h)
    write_asset(tmp_path / "ball_ffat.h5", assemble(res, 1, "t", model("model-A"), TransferSettings(terms=1), 0.01,
                                                    sph.vertices, sph.faces))
    s = parse_scene(d, base=tmp_path, src="s.toml")
    with pytest.raises(AssetError, match=r"ball.*different modal model.*transfer precompute .*modal_model-B"):
        transfer_models(s, {"ball": model("model-B")})
    tms, used = transfer_models(s, {"ball": model("model-A")})
    assert tms["ball"].n_modes == 1 and "ball_ffat.h5" in used["ball"]


def test_missing_mesh_names_scene_file_and_field(tmp_path):
    d = _scene()
    d["object"][0] = {"name": "duck", "mesh": "assets/duck.obj", "material": "abs_plastic"}
    with pytest.raises(InputError, match=r"s\.toml: object\[0\] \(duck\)\.mesh = 'assets/duck\.obj': .*duck\.obj "
                                         r"not found; mesh paths are relative to the scene file's folder"):
        parse_scene(d, base=tmp_path, src=str(tmp_path / "s.toml"))


def test_mesh_errors_name_the_field(tmp_path):
    (tmp_path / "junk.stl").write_bytes(b"\x00" * 10)
    d = _scene()
    d["object"][0] = {"name": "j", "mesh": "junk.stl", "material": "steel"}
    with pytest.raises(MeshError, match=r"s\.toml: object\[0\] \(j\)\.mesh = 'junk\.stl': .*junk\.stl"):
        parse_scene(d, base=tmp_path, src="s.toml")


def test_oversized_mesh_warns_with_mass_and_the_scale_to_set(tmp_path):
    import trimesh

    from impactsound.mesh import MeshWarning
    trimesh.creation.icosphere(radius=0.985).export(tmp_path / "bunny.stl")    # 1.97 m: centimetres as metres
    d = _scene(listener=[{"position": [0.0, -3.0, 1.0]}])
    d["object"][0] = {"name": "bunny", "mesh": "bunny.stl", "material": "ceramic", "position": [0, 0, 2]}
    with pytest.warns(MeshWarning, match=r"s\.toml: object\[0\] \(bunny\)\.mesh = 'bunny\.stl': the object is "
                                         r"1\.97 m across, 10,715 kg, large .* centimetres set scale = 0\.01"):
        parse_scene(d, base=tmp_path, src="s.toml")


def test_overlapping_shells_become_one_body_with_the_union_mass(tmp_path):
    import trimesh

    from impactsound.mesh import MeshWarning
    a = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    b = trimesh.creation.box(extents=(0.02, 0.02, 0.04)).apply_translation([0.015, 0, 0])
    trimesh.util.concatenate([a, b]).export(tmp_path / "brick.obj")
    d = _scene()
    d["object"][0] = {"name": "brick", "mesh": "brick.obj", "material": "abs_plastic"}
    with pytest.warns(MeshWarning, match=r"brick\.obj.*2 overlapping shells; using the surface of their union"):
        s = parse_scene(d, base=tmp_path, src="s.toml")
    union = 0.04 * 0.03 * 0.02 + 0.02 * 0.02 * 0.04 - 0.015 * 0.02 * 0.02       # trimesh alone: 4e-5
    assert s.bodies[0].mass == pytest.approx(1050 * union, rel=1e-3)
    assert s.bodies[0].mesh.body_count == 1 and s.bodies[0].mesh.is_watertight
    trimesh.util.concatenate([a, b.copy().apply_translation([0.1, 0, 0])]).export(tmp_path / "parts.obj")
    d["object"][0]["mesh"] = "parts.obj"
    with pytest.raises(MeshError, match=r"object\[0\] \(brick\)\.mesh = 'parts\.obj': the surface is 2 separate "
                                        r"bodies.*own object"):
        parse_scene(d, base=tmp_path, src="s.toml")


def test_the_documented_scene_example_is_valid():
    """docs/scene-format.md's main example parses with every documented option (kept true to the code)."""
    import re
    import tomllib
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "scene-format.md").read_text()
    block = re.findall(r"```toml\n(.*?)```", text, re.S)[0]
    s = parse_scene(tomllib.loads(block), src="docs/scene-format.md")
    assert s.options["modal"].transfer == "auto" and s.options["acceleration_noise"].budget == 2.0e10
    assert s.sources == ("modal", "acceleration_noise", "ground") and s.seed == 1
    assert s.options["ground"].kernel == "K4" and s.options["ground"].cache is True
    an = s.options["acceleration_noise"]
    assert (an.model, an.bank, an.bank_eps, an.bank_path) == ("auto", "standard", 0.01, None)


def test_origin_mesh_places_the_mesh_origin(tmp_path):
    """origin = "mesh": position and velocity are those of the mesh file's origin. A box modelled standing on its
    origin (base centre at (0, 0, 0), top at z = 0.04) placed at the floor with origin = "mesh" has its
    centre of mass 2 cm up; rotated, the arm rotates with it; the centre of mass moves with v + omega x arm."""
    import trimesh
    box = trimesh.creation.box((0.06, 0.04, 0.04))
    box.apply_translation([0.0, 0.0, 0.02])
    box.export(tmp_path / "box.obj")
    base = {"scene": {"duration": 0.1}, "listener": [{"name": "m", "position": [0, -0.5, 0.3]}]}
    obj = {"name": "b", "mesh": "box.obj", "material": "steel", "position": [0.1, 0.2, 0.0], "origin": "mesh"}
    sc = load_scene({**base, "object": [obj]}, base=tmp_path)
    np.testing.assert_allclose(sc.bodies[0].position, [0.1, 0.2, 0.02], atol=1e-12)
    # a quarter turn about x: the arm (0, 0, 0.02) becomes (0, -0.02, 0)
    obj2 = {**obj, "euler_deg": [90.0, 0.0, 0.0], "angular_velocity": [0.0, 0.0, 3.0], "velocity": [1.0, 0, 0]}
    b = load_scene({**base, "object": [obj2]}, base=tmp_path).bodies[0]
    np.testing.assert_allclose(b.position, [0.1, 0.18, 0.0], atol=1e-12)
    np.testing.assert_allclose(b.velocity, [1.0 + 3.0 * 0.02, 0.0, 0.0], atol=1e-12)   # omega x arm
    # the default is the centre of mass, as before
    b = load_scene({**base, "object": [{**obj, "origin": "com"}]}, base=tmp_path).bodies[0]
    np.testing.assert_allclose(b.position, [0.1, 0.2, 0.0], atol=1e-12)
    with pytest.raises(InputError, match=r"object\[0\] \(b\)\.origin = 'base'"):
        load_scene({**base, "object": [{**obj, "origin": "base"}]}, base=tmp_path)
