"""The source registry: built-in kinds, a pip-installed plugin found through the entry point, options validated per
kind, the scene's seed, and clear errors for unknown and broken sources."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from impactsound import render_scene
from impactsound.cli import cli
from impactsound.errors import InputError
from impactsound.scene import parse_scene
from impactsound.sources import registry

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "toy_source"


@pytest.fixture(scope="module")
def toy_plugin(tmp_path_factory):
    """pip-install the toy plugin package (tests/plugins/toy_source) into a folder put on sys.path, as an
    installed package is, then re-read the entry points."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = shutil.copytree(PLUGIN, tmp / "src")                  # the build writes next to the sources
    target = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(target), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, str(target))
    registry.reload()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("toy_source", None)
    registry.reload()


def _scene(tmp_path, sources, seed=0, **tables):
    d = {"scene": {"duration": 0.15, "sources": sources, "seed": seed},
         "listener": [{"position": [0.0, -0.5, 0.3]}],
         "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                     "position": [0.0, 0.0, 0.05]}]}
    if tables:
        d["source"] = tables
    return parse_scene(d, base=tmp_path, src="s.toml")


def test_builtin_kinds_are_registered_with_options():
    kinds = registry.available()
    assert list(kinds)[:2] == ["modal", "acceleration_noise"]
    assert kinds["modal"].options().transfer == "auto"
    assert kinds["acceleration_noise"].options().budget == 2.0e10


def test_plugin_is_listed_and_renders_its_own_stem_reproducibly_from_the_seed(toy_plugin, tmp_path):
    assert "toy" in registry.available() and registry.get("toy").origin == "impactsound-toy-source"
    r = CliRunner().invoke(cli, ["sources"])
    assert r.exit_code == 0 and "toy  (impactsound-toy-source): test plugin" in r.output
    assert "gain = 0.1" in r.output

    a = render_scene(_scene(tmp_path, ["toy"], seed=1, toy={"gain": 0.5}))
    y = a.stems["toy"]["ball"]
    assert set(a.stems) == {"toy"} and np.abs(y).max() > 0 and np.array_equal(a.mix, y)
    assert a.info["toy_gain"] == 0.5 and a.info["sources"] == ["toy"]
    # the bursts start at the impacts: nothing before the first contact event
    first = int(np.round(a.events.t.min() * a.sample_rate))
    assert not np.any(y[:, :first]) and np.any(y[:, first:first + 96])
    b = render_scene(_scene(tmp_path, ["toy"], seed=1, toy={"gain": 0.5}))
    c = render_scene(_scene(tmp_path, ["toy"], seed=2, toy={"gain": 0.5}))
    assert np.array_equal(a.mix, b.mix) and not np.array_equal(a.mix, c.mix)


def test_plugin_options_are_validated_with_the_field_named(toy_plugin, tmp_path):
    with pytest.raises(InputError, match=r"s\.toml: invalid scene: source\.toy\.gain: .*greater than 0"):
        _scene(tmp_path, ["toy"], toy={"gain": -1.0})
    with pytest.raises(InputError, match=r"source\.toy: unknown key 'loudness' \(valid keys: .*gain"):
        _scene(tmp_path, ["toy"], toy={"loudness": 1.0})


def test_unknown_source_lists_the_available_ones(tmp_path):
    with pytest.raises(InputError, match=r"unknown source\(s\) \['granite'\]; available: \['modal', "):
        _scene(tmp_path, ["granite"])
    with pytest.raises(InputError, match=r"\[source\.granite\]: unknown source 'granite'"):
        _scene(tmp_path, ["modal"], granite={"x": 1})


def test_source_option_tables_and_the_older_scene_keys(tmp_path):
    s = _scene(tmp_path, ["modal"], modal={"transfer": "low_order", "max_modes": 5})
    assert s.options["modal"].transfer == "low_order" and s.options["modal"].max_modes == 5
    d = {"scene": {"duration": 0.1, "transfer": "low_order", "pan_budget": 3.0},
         "object": [{"shape": "sphere", "size": {"radius": 0.01}, "material": "steel"}]}
    s = parse_scene(d, src="s.toml")
    assert s.options["modal"].transfer == "low_order" and s.options["acceleration_noise"].budget == 3.0
    d["source"] = {"modal": {"transfer": "ffat"}}
    with pytest.raises(InputError, match=r"scene\.transfer and source\.modal\.transfer both set"):
        parse_scene(d, src="s.toml")
    with pytest.raises(InputError, match=r"source\.modal\.modal_order: Input should be 1 or 2"):
        _scene(tmp_path, ["modal"], modal={"modal_order": 3})
    assert _scene(tmp_path, ["modal"]).options["modal"].mesher == "tetgen"
    assert _scene(tmp_path, ["modal"], modal={"mesher": "ftetwild"}).options["modal"].mesher == "ftetwild"
    with pytest.raises(InputError, match=r"source\.modal\.mesher: Input should be 'tetgen', 'ftetwild'"):
        _scene(tmp_path, ["modal"], modal={"mesher": "netgen"})


def test_broken_plugin_is_reported_and_never_breaks_the_builtins(tmp_path):
    """A plugin whose module cannot be imported: listed as failed (with the reason), an error naming it when a
    scene asks for it, and the built-in sources keep working."""
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[impactsound.sources]\nbroken = no_such_module_xyz:SOURCE\n")
    sys.path.insert(0, str(tmp_path))
    registry.reload()
    try:
        with pytest.warns(RuntimeWarning, match=r"source plugin 'broken' failed to load: no_such_module_xyz"):
            kinds = registry.available()
        assert "modal" in kinds and "broken" in registry.broken()
        with pytest.raises(InputError, match=r"plugins that failed to load: \{'broken': .no_such_module_xyz:SOURCE: ModuleNotFoundError"):
            _scene(tmp_path, ["broken"])
        r = CliRunner().invoke(cli, ["sources"])
        assert r.exit_code == 0 and "modal  (impactsound)" in r.output
    finally:
        sys.path.remove(str(tmp_path))
        registry.reload()
