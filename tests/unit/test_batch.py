"""Batch rendering (batch.py): plans, overrides, resumable runs, manifest, shared assets, bad input."""
import csv
import json
import multiprocessing as mp
import time

import numpy as np
import pytest
import soundfile as sf

from impactsound.assets import asset_lock
from impactsound.batch import (CONFIRM_ROWS, apply_override, expand_rows, load_plan, make_plan, row_scene,
                               run_batch)
from impactsound.errors import InputError

BASE = """
[scene]
duration = 0.45
sources = ["modal"]
seed = 3
[source.modal]
transfer = "low_order"
modal_order = 1
max_modes = 8
[[listener]]
name = "mic"
position = [0.0, -0.4, 0.2]
[[object]]
name = "bar"
shape = "box"
size = { size = [0.12, 0.02, 0.01] }
material = "aluminium"
position = [0.0, 0.0, 0.08]
euler_deg = [5.0, 8.0, 0.0]
"""


@pytest.fixture
def plan_dir(tmp_path):
    (tmp_path / "base.toml").write_text(BASE)
    (tmp_path / "plan.toml").write_text("""
[batch]
scene = "base.toml"
[grid]
"object.bar.material" = ["aluminium", "steel"]
"object.bar.position" = [[0.0, 0.0, 0.08], [0.0, 0.0, 0.12]]
""")
    return tmp_path


def test_overrides_and_grid_expansion():
    d = {"scene": {"seed": 1}, "object": [{"name": "a", "size": {"radius": 0.1}}],
         "listener": [{"name": "mic", "position": [0, 0, 1]}]}
    apply_override(d, "object.a.size.radius", 0.2)
    apply_override(d, "object.0.material", "steel")
    apply_override(d, "listener.mic.position", [1, 2, 3])
    apply_override(d, "source.modal.max_modes", 5)
    apply_override(d, "scene.seed", 7)
    assert d["object"][0]["size"]["radius"] == 0.2 and d["object"][0]["material"] == "steel"
    assert d["listener"][0]["position"] == [1, 2, 3] and d["source"]["modal"]["max_modes"] == 5
    assert d["scene"]["seed"] == 7
    rows = expand_rows([{"scene.seed": 1}, {"scene.seed": 2}], {"b": [1, 2, 3], "a": ["x", "y"]})
    assert len(rows) == 12 and rows[0] == {"scene.seed": 1, "a": "x", "b": 1} and rows[1]["b"] == 2
    with pytest.raises(InputError, match="no object named 'b'"):
        apply_override(d, "object.b.material", "steel")
    with pytest.raises(InputError, match="start with one of"):
        apply_override(d, "objects.a.material", "steel")


def test_a_batch_renders_each_row_as_a_single_render_would(plan_dir):
    from impactsound.pipeline import render_scene
    from impactsound.scene import load_scene
    plan = load_plan(plan_dir / "plan.toml")
    assert len(plan) == 4 and plan.names[0] == "row-0000"
    rep = run_batch(plan, plan_dir / "out", workers=1)
    assert (rep.rendered, rep.skipped, rep.failed) == (4, 0, 0)
    rows = list(csv.DictReader(open(rep.manifest)))
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert rows[3]["object.bar.material"] == "steel" and json.loads(rows[3]["object.bar.position"])[2] == 0.12
    # row 3 is the base scene with steel at 12 cm: the same samples as rendering that scene alone
    d = row_scene(plan, 3)
    ref = render_scene(load_scene(d, base=plan_dir)).mix
    x, fs = sf.read(plan_dir / "out" / "row-0003.wav", always_2d=True)
    side = json.loads((plan_dir / "out" / "row-0003.wav.json").read_text())
    np.testing.assert_allclose(x[:, 0] * side["pascals_per_unit"], ref[0], atol=1e-6 * np.abs(ref).max())
    assert float(rows[3]["peak_pa"]) == pytest.approx(np.abs(ref).max())
    # different materials and heights are different sounds
    assert len({r["wav_sha256"] for r in rows}) == 4


def test_rerun_skips_finished_and_redoes_missing_or_partial(plan_dir):
    plan = load_plan(plan_dir / "plan.toml")
    out = plan_dir / "out"
    run_batch(plan, out, workers=1)
    before = {p.name: p.read_bytes() for p in out.glob("*.wav")}
    (out / "row-0001.wav").unlink()                       # lost
    (out / ".tmp").mkdir(exist_ok=True)
    (out / ".tmp" / "row-0002.wav").write_bytes(b"half")   # a killed run's partial file
    rep = run_batch(plan, out, workers=1)
    assert (rep.rendered, rep.skipped) == (1, 3)
    assert not (out / ".tmp").exists()
    assert {p.name: p.read_bytes() for p in out.glob("*.wav")} == before   # reproducible: same bytes


def test_a_killed_batch_resumes(plan_dir):
    # kill a batch in the middle (a child process), then rerun: no partial outputs, every render done once
    out = plan_dir / "out"
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_run_plan, args=(str(plan_dir / "plan.toml"), str(out)))
    p.start()
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / ".done").glob("*.json")):
        time.sleep(0.05)                                   # until the first render is finished
    p.kill()
    p.join()
    done_before = len(list((out / ".done").glob("*.json")))
    assert 1 <= done_before
    rep = run_batch(load_plan(plan_dir / "plan.toml"), out, workers=1)
    assert rep.skipped == done_before and rep.rendered == 4 - done_before
    assert sorted(p.name for p in out.glob("*.wav")) == [f"row-000{i}.wav" for i in range(4)]
    for w in out.glob("*.wav"):
        sf.read(w)                                         # every file is whole


def _run_plan(plan, out):
    run_batch(load_plan(plan), out, workers=1)


def test_bad_plans_are_refused_before_anything_is_written(plan_dir):
    def plan(text):
        (plan_dir / "p.toml").write_text('[batch]\nscene = "base.toml"\n' + text)
        return load_plan(plan_dir / "p.toml")

    with pytest.raises(InputError, match=r"row 0 .*did you mean 'material'"):
        plan('[grid]\n"object.bar.materail" = ["steel"]\n')
    with pytest.raises(InputError, match="no object named 'box'"):
        plan('[grid]\n"object.box.material" = ["steel"]\n')
    with pytest.raises(InputError, match=r"row 1 .*unknown material 'unobtanium'"):
        plan('[grid]\n"object.bar.material" = ["steel", "unobtanium"]\n')
    with pytest.raises(InputError, match="unknown key"):
        plan('output = "x"\n')
    with pytest.raises(InputError, match="full_scale_pa"):
        plan('normalise = "shared"\n')
    big = plan('[grid]\n"scene.seed" = ' + str(list(range(CONFIRM_ROWS + 1))) + "\n")
    with pytest.raises(InputError, match=f"{CONFIRM_ROWS + 1} renders.*--yes"):
        run_batch(big, plan_dir / "big")
    assert not (plan_dir / "big").exists()
    # a folder of another plan
    small = load_plan(plan_dir / "plan.toml")
    run_batch(make_plan(plan_dir / "base.toml", source="one"), plan_dir / "o", workers=1)
    with pytest.raises(InputError, match="holds the outputs of another plan"):
        run_batch(small, plan_dir / "o", workers=1)


def test_unreachable_scheduler_is_one_clear_error(plan_dir):
    pytest.importorskip("distributed")
    with pytest.raises(InputError, match="no Dask scheduler reachable.*nothing was written"):
        run_batch(load_plan(plan_dir / "plan.toml"), plan_dir / "o", scheduler="tcp://127.0.0.1:9")
    assert not (plan_dir / "o").exists()


def test_shared_scale_and_table_rows(plan_dir):
    (plan_dir / "rows.csv").write_text('name,object.bar.position\nlow,"[0.0, 0.0, 0.07]"\nhigh,"[0.0, 0.0, 0.2]"\n')
    (plan_dir / "p.toml").write_text('[batch]\nscene = "base.toml"\ntable = "rows.csv"\nnormalise = "shared"\n'
                                     'full_scale_pa = 2.0\n')
    plan = load_plan(plan_dir / "p.toml")
    assert plan.names == ["low", "high"]
    rep = run_batch(plan, plan_dir / "s", workers=1)
    peaks = {}
    for name in ("low", "high"):
        x, _ = sf.read(plan_dir / "s" / f"{name}.wav", always_2d=True)
        side = json.loads((plan_dir / "s" / f"{name}.wav.json").read_text())
        assert side["pascals_per_unit"] == 2.0
        peaks[name] = np.abs(x).max() * 2.0
        assert peaks[name] == pytest.approx(side["peak_pa"], rel=1e-6)
    # one scale: the file of the higher drop is louder by the same ratio as the pressures
    recs = {r["name"]: float(r["peak_pa"]) for r in rep.records}
    assert peaks["high"] / peaks["low"] == pytest.approx(recs["high"] / recs["low"], rel=1e-6)
    assert recs["high"] > recs["low"]


def _compute_once(path, log):
    with asset_lock(path):
        if not path.exists():
            time.sleep(0.3)
            with open(log, "a") as fh:
                fh.write("computed\n")
            path.write_text("asset")


def test_asset_lock_makes_concurrent_askers_compute_once(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_compute_once, args=(tmp_path / "a.h5", tmp_path / "log")) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert (tmp_path / "log").read_text() == "computed\n" and (tmp_path / "a.h5").read_text() == "asset"


def test_batch_cli(plan_dir):
    from click.testing import CliRunner

    from impactsound.cli import cli
    r = CliRunner().invoke(cli, ["-q", "batch", str(plan_dir / "plan.toml"), "--out", str(plan_dir / "c"), "--dry-run"])
    assert r.exit_code == 0 and "4 renders" in r.output and "row-0003" in r.output
    assert not (plan_dir / "c").exists()
