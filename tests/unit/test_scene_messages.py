"""Scene errors in the scene's words: a misspelt key names the closest valid one and lists them; an incomplete
inline material says which fields are missing. Regression: pydantic's own words leaked ("Extra inputs are not
permitted"; one error per member of the str | table union)."""
import pytest

from impactsound.errors import InputError
from impactsound.scene import load_scene

BASE = """
[scene]
duration = 0.2
[[listener]]
position = [0.5, 0, 0.3]
"""


def _load(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(BASE + text)
    return load_scene(p)


def test_misspelt_object_key_suggests_the_closest(tmp_path):
    with pytest.raises(InputError) as e:
        _load(tmp_path, '[[object]]\nshape = "sphere"\nsize = {radius = 0.01}\nmaterial = "steel"\n'
                        'postion = [0, 0, 0.1]\n')
    msg = str(e.value)
    assert "s.toml" in msg and "object[0]: unknown key 'postion'; did you mean 'position'?" in msg
    assert "valid keys:" in msg and "euler_deg" in msg and "Extra inputs" not in msg


def test_misspelt_scene_key_and_top_level_table(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text(BASE.replace("duration", "durration"))
    with pytest.raises(InputError, match=r"scene: unknown key 'durration'; did you mean 'duration'\?"):
        load_scene(p)
    p.write_text(BASE + "\n[listner]\nposition = [0, 0, 1]\n")
    with pytest.raises(InputError, match=r"unknown key 'listner'; did you mean 'listener'\?"):
        load_scene(p)


def test_incomplete_inline_material_names_the_missing_fields(tmp_path):
    with pytest.raises(InputError) as e:
        _load(tmp_path, '[[object]]\nshape = "sphere"\nsize = {radius = 0.01}\nmaterial = {E = 2e11, nu = 0.3}\n'
                        'position = [0, 0, 0.1]\n')
    msg = str(e.value)
    assert "object[0].material: an inline material needs E [Pa], nu and rho [kg/m^3]; missing: rho" in msg
    assert "MaterialSpec" not in msg and ".str" not in msg


def test_misspelt_source_option(tmp_path):
    with pytest.raises(InputError, match=r"source\.modal: unknown key 'max_mode'; did you mean 'max_modes'\?"):
        _load(tmp_path, '[source.modal]\nmax_mode = 10\n[[object]]\nshape = "sphere"\nsize = {radius = 0.01}\n'
                        'material = "steel"\nposition = [0, 0, 0.1]\n')


def test_engine_errors_name_the_scene_file(tmp_path):
    """A body starting below the ground is found by the rigid-body engine; its message names the scene file."""
    from impactsound.pipeline import render_scene
    scene = _load(tmp_path, '[[object]]\nname = "block"\nshape = "box"\nsize = {size = [0.05, 0.05, 0.05]}\n'
                            'material = "steel"\nposition = [0, 0, 0.01]\n')
    with pytest.raises(InputError, match=r"s\.toml: body 'block' starts 15 mm below the ground"):
        render_scene(scene)


def test_listener_at_the_centre_of_mass_is_an_input_error():
    """Regression: a bare ValueError came out of the compact radiation model."""
    import numpy as np

    from impactsound.transfer.low_order import compact_geometry
    with pytest.raises(InputError, match="centre of mass.*move the listener"):
        compact_geometry(np.zeros((1, 3)), 343.2, 1.2)
