"""One mesh, one asset: the same file, material and settings give the same modal model (content hash) and the same
radiation file whether they come through `impactsound modes`, the API or a scene that places the object by its
centre of mass. Regression: the scene meshed the surface moved to its centre of mass and the CLI meshed it as
stored, so TetGen made two meshes (1136 vs 1138 surface vertices for one cup) and every door recomputed."""
import json

import numpy as np
import pytest
import trimesh

from impactsound.cli import main
from impactsound.fem.model import ModalModel
from impactsound.fem.modal import cached_modal_analysis, canonical_surface, modal_analysis
from impactsound.materials import get_material
from impactsound.mesh.surface import load_surface
from impactsound.scene import load_scene
from impactsound.sources.modal import modal_models, transfer_path

OFFSET = np.array([0.31, -0.17, 0.052])          # where the block sits in its file [m]


@pytest.fixture()
def block(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path / "cache"))
    # an asymmetric block (a wedge cut), stored away from the origin as modelling tools export objects
    corners = np.array([[x, y, z] for x in (0, 0.15) for y in (0, 0.09) for z in (0, 0.03)])
    corners[-1] = [0.09, 0.09, 0.018]                         # one corner cut back: no symmetry plane
    m = trimesh.convex.convex_hull(corners)
    m.apply_translation(OFFSET)
    path = tmp_path / "block.obj"
    m.export(path)
    scene = tmp_path / "scene.toml"
    scene.write_text(f"""
[scene]
duration = 0.2
[source.modal]
modal_order = 1
max_modes = 8
[[object]]
name = "block"
mesh = "{path.name}"
material = "steel"
position = [0, 0, 0.2]
[[listener]]
position = [0.5, 0, 0.3]
""")
    return path, scene


def test_cli_api_and_scene_share_one_modal_asset_and_radiation_file(block, tmp_path, capsys):
    path, scene_file = block
    asset = tmp_path / "cli.h5"
    assert main(["modes", str(path), "--material", "steel", "--order", "1", "--count", "8", "--out",
                 str(asset)]) == 0
    err = capsys.readouterr().err
    cli_model = ModalModel.load(asset)
    assert f"modal_{cli_model.inputs_hash[:40]}.h5" in err          # the CLI says which cached asset it is
    api_model = modal_analysis(load_surface(path), get_material("steel"), order=1, max_modes=8)
    scene = load_scene(scene_file)
    scene_model = modal_models(scene)["block"]
    assert cli_model.inputs_hash == api_model.inputs_hash == scene_model.inputs_hash
    # the scene found the CLI's model in the cache: the same frequencies to the last bit
    assert scene_model.n_modes == 8 and np.array_equal(scene_model.frequencies_hz, cli_model.frequencies_hz)
    # the centre of mass is reported in each caller's own coordinates: the file's, the scene body's
    com_file = np.asarray(trimesh.load(path, force="mesh").center_mass)
    assert np.allclose(cli_model.com, com_file, atol=1e-6)
    assert np.allclose(scene_model.com, 0.0, atol=1e-6)
    # hence one radiation file for the scene, strike(), `transfer precompute` and `export`
    assert transfer_path(cli_model) == transfer_path(scene_model)


def test_centring_is_idempotent_and_keys_ignore_the_offset(block):
    path, _ = block
    surf = load_surface(path)
    once, shift = canonical_surface(surf)
    assert np.allclose(shift, surf.center_mass) and np.linalg.norm(shift) > 0.1
    twice, shift2 = canonical_surface(once)
    assert twice is once and not np.any(shift2)
    moved = surf.copy()
    moved.apply_translation([1.0, 2.0, 3.0])
    from impactsound.fem.modal import modal_inputs_hash
    steel = get_material("steel")
    # a rigid translation of the file changes nothing the model depends on (up to rounding of the centring)
    assert modal_inputs_hash(surf, steel, 1) == modal_inputs_hash(once, steel, 1)


def test_cached_model_reports_com_in_the_callers_frame(block, tmp_path):
    path, _ = block
    surf = load_surface(path)
    steel = get_material("steel")
    centred, com = canonical_surface(surf)
    a = cached_modal_analysis(centred, steel, order=1, max_modes=4)     # first made about the centre of mass
    b = cached_modal_analysis(surf, steel, order=1, max_modes=4)        # found in the cache through the file
    assert a.inputs_hash == b.inputs_hash
    assert np.allclose(a.com, 0.0, atol=1e-6) and np.allclose(b.com, com, atol=1e-6)


def test_export_defaults_to_the_scenes_radiation(block, tmp_path, monkeypatch):
    """`impactsound export` without --transfer radiates with the scene's model (FDTD FFAT maps, cached), not the
    compact model; the solve itself is replaced here by a recorder (it is tested in test_fdtd_transfer)."""
    import impactsound.sources.modal as modal
    path, _ = block
    asset = tmp_path / "cli.h5"
    assert main(["-q", "modes", str(path), "--material", "steel", "--order", "1", "--count", "4", "--out",
                 str(asset)]) == 0
    calls = []

    def recorder(model, method="auto", **kw):
        calls.append((model.inputs_hash, method))
        return None, "recorded"
    monkeypatch.setattr(modal, "transfer_model", recorder)
    out = tmp_path / "bank.json"
    assert main(["-q", "export", str(asset), "--format", "json", "--out", str(out)]) == 0
    assert calls == [(ModalModel.load(asset).inputs_hash, "auto")]
    calls.clear()
    assert main(["-q", "export", str(asset), "--format", "json", "--out", str(out), "--transfer", "low_order"]) == 0
    assert calls == [] and json.loads(out.read_text())["radiation"]["transfer"] is None


def test_scene_pan_settings_select_the_precomputed_field(block, monkeypatch):
    """A scene's [source.acceleration_noise] directions and h reach the PAN job, and a field precomputed from the
    file (`impactsound pan precompute --directions 40x80`) has the same cache key as the scene's object."""
    import impactsound.sources.pan.source as pan_source
    from impactsound.errors import InputError
    from impactsound.sources.pan.precompute import pan_asset_path, plan_pan
    path, scene_file = block
    text = scene_file.read_text().replace("[[object]]", "[source.acceleration_noise]\nmodel = \"pan\"\n"
                                          "directions = \"40x80\"\n\n[[object]]")
    scene_file.write_text(text)
    seen = []

    def record(body, job, est, progress):
        seen.append(job)
        raise RuntimeError("recorded")
    monkeypatch.setattr(pan_source, "_own_field", record)
    with pytest.raises(RuntimeError, match="recorded"):
        pan_source.prepare(load_scene(scene_file))
    cli_job = plan_pan(load_surface(path), get_material("steel"), n_theta=40, n_phi=80)
    assert (seen[0].n_theta, seen[0].n_phi) == (40, 80)
    assert pan_asset_path(seen[0]) == pan_asset_path(cli_job)
    scene_file.write_text(text.replace('"40x80"', '"40by80"'))
    with pytest.raises(InputError, match="directions"):
        load_scene(scene_file)


def test_preview_quality_is_coarser_and_says_so(tmp_path, monkeypatch):
    """`render --preview` ([scene] quality = "preview"): a coarser FEM mesh (fewer dofs, modes within a few %),
    the preview FDTD grid, proxy acceleration noise and no ground sound, all named in the sidecar."""
    from impactsound.pipeline import render_scene
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path / "cache"))
    import trimesh as tm
    bar = tm.creation.box(extents=(0.08, 0.012, 0.008))
    bar.export(tmp_path / "bar.obj")
    scene_file = tmp_path / "bar.toml"
    scene_file.write_text("""
[scene]
duration = 0.3
quality = "preview"
sources = ["modal", "ground"]
[source.modal]
modal_order = 2
max_modes = 3
[[object]]
name = "bar"
mesh = "bar.obj"
material = "aluminium"
position = [0, 0, 0.05]
[[listener]]
position = [0.4, 0.1, 0.3]
""")
    scene = load_scene(scene_file)
    assert scene.quality == "preview"
    res = render_scene(scene)
    assert res.info["quality"] == "preview" and "preview" in res.info["ground"]
    assert "preview grid" in res.info["objects"]["bar"]["radiation"]
    assert np.abs(res.mix).max() > 0
    preview_model = modal_models(scene)["bar"]
    scene.quality = "default"
    default_model = modal_models(scene)["bar"]
    assert preview_model.meta["dofs"] < 0.5 * default_model.meta["dofs"]
    # the first bending mode of the bar: the preview mesh is within 2 % of the default one
    assert abs(preview_model.frequencies_hz[0] / default_model.frequencies_hz[0] - 1) < 0.02
