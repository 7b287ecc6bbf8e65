"""Shell cubature training (sources/shell/train.py; Chadwick, An & James 2009, sec. 2.3) and `impactsound shell
train`: the per-pose forces against ReducedShell (an independent implementation of the same g_i), the cache key
(hit, miss, and a file built for another mesh, mode count or material rebuilt), resumption after an interrupt
(bitwise), serial against two worker processes (bitwise), and the command line's happy path and errors.

Small free steel sheets (48-140 triangles, 6-8 modes): each training takes a fraction of a second; the two-worker
test starts two process pools (a few seconds each).
"""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import trimesh

from impactsound.assets.store import read_asset
from impactsound.errors import AssetError, InputError
from impactsound.fem.shell import ShellModel, shell_modes
from impactsound.materials import get_material, make_material
from impactsound.scene.shells import make_shell
from impactsound.sources.shell import train as tr
from impactsound.sources.shell.cubature import KIND, Cubature, load_cubature, train_cubature
from impactsound.sources.shell.reduced import ReducedShell

H = 1e-3


def sheet(resolution=8, n_modes=8, material=None):
    m = make_shell("sheet", resolution=resolution)
    model = ShellModel(m.vertices, m.faces, H, material or get_material("steel"))
    return model, shell_modes(model, f_max=None, n_modes=n_modes)


@pytest.fixture(scope="module")
def small():
    return sheet()


def same(a: Cubature, b: Cubature):
    np.testing.assert_array_equal(a.elements, b.elements)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.history, b.history)
    assert a.train_error == b.train_error and a.holdout_error == b.holdout_error


# ------------------------------------------------------------------------------------------ element forces
def test_forces_match_the_reduced_shell(small):
    """g_i from the stored per-pose stencil forces equal ReducedShell.element_forces (membrane and bending
    projected separately there) to rounding, their sum is the exact U^T f_int(U q), and a triangle's bits do not
    depend on the other triangles in the call."""
    model, modes = small
    rs = ReducedShell.from_modes(model, modes)
    amp = tr.pose_amplitude(model, modes.U, 1.0)
    Q = np.random.default_rng(1).standard_normal((5, rs.r)) * amp
    el = np.array([0, 3, 17, 40, len(model.faces) - 1])
    f = tr.ShellTrainingForces(model, modes.U)
    ref = rs.element_forces(Q, el)
    np.testing.assert_allclose(f(Q, el), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    [bound] = f.bind_poses([Q])
    G = bound.forces(el)
    for i, e in enumerate(el):
        np.testing.assert_array_equal(bound.forces([e])[:, 0], G[:, i])
    exact = rs.force(Q)
    np.testing.assert_allclose(bound.full(), exact, rtol=0, atol=1e-12 * np.abs(exact).max())
    np.testing.assert_allclose(bound.forces(np.arange(len(model.faces))).sum(axis=1), exact, rtol=0,
                               atol=1e-11 * np.abs(exact).max())


def test_pose_amplitude_is_thicknesses_of_the_lowest_mode(small):
    model, modes = small
    a = tr.pose_amplitude(model, modes.U, 2.5)
    u = (modes.U[:, 0] * a).reshape(-1, 3)
    assert np.linalg.norm(u, axis=1).max() == pytest.approx(2.5 * H, rel=1e-12)
    with pytest.raises(InputError, match="pose_amplitude"):
        tr.pose_amplitude(model, modes.U, 0.0)


# --------------------------------------------------------------------------------------------------- cache
def test_cache_hit_and_miss(small, tmp_path):
    model, modes = small
    c1 = tr.shell_cubature(model, modes, cache=tmp_path)
    assert not c1.meta["from_cache"] and c1.meta["stop_reason"] == "target" and c1.train_error <= 0.1
    path = tmp_path / f"shell_cubature_{c1.meta['inputs_hash'][:40]}.h5"
    assert c1.meta["path"] == str(path) and path.is_file()
    assert read_asset(path, KIND).inputs_hash == c1.meta["inputs_hash"]
    c2 = tr.shell_cubature(model, modes, cache=tmp_path)
    assert c2.meta["from_cache"]
    same(c1, c2)
    # any setting is part of the key: another target is another file, trained
    c3 = tr.shell_cubature(model, modes, cache=tmp_path, target=0.2)
    assert not c3.meta["from_cache"] and c3.meta["inputs_hash"] != c1.meta["inputs_hash"]
    assert len(list(tmp_path.glob("shell_cubature_*.h5"))) == 2
    # the default cache folder ($IMPACTSOUND_CACHE) works the same way
    c4 = tr.shell_cubature(model, modes)
    assert not c4.meta["from_cache"]
    assert tr.shell_cubature(model, modes).meta["from_cache"]


@pytest.mark.parametrize("other", ["mesh", "modes", "material", "thickness"])
def test_asset_for_other_inputs_is_rebuilt(small, tmp_path, other):
    """One file path (as `shell train --out FILE` uses): an asset built for another mesh, mode count, material or
    thickness is never used; the result equals a fresh training of the new inputs and replaces the file."""
    model, modes = small
    path = tmp_path / "cub.h5"
    first = tr.shell_cubature(model, modes, cache=path)
    n_modes = None
    if other == "mesh":
        model, modes = sheet(resolution=10)
    elif other == "modes":
        n_modes = 6
    elif other == "material":
        model, modes = sheet(material=make_material("custom", E=190e9, nu=0.3, rho=7800.0))
    else:
        m = make_shell("sheet", resolution=8)
        model = ShellModel(m.vertices, m.faces, 2 * H, get_material("steel"))
        modes = shell_modes(model, f_max=None, n_modes=8)
    again = tr.shell_cubature(model, modes, n_modes=n_modes, cache=path)
    assert not again.meta["from_cache"]
    assert again.meta["inputs_hash"] != first.meta["inputs_hash"]
    same(again, tr.shell_cubature(model, modes, n_modes=n_modes, cache=False))
    with pytest.raises(AssetError, match="different inputs"):
        load_cubature(path, first.meta["inputs_hash"])
    assert load_cubature(path, again.meta["inputs_hash"]).elements.size == again.elements.size


def test_modes_of_another_mesh_or_too_few_are_refused(small):
    model, modes = small
    other, _ = sheet(resolution=10)
    with pytest.raises(InputError, match="do not belong to this mesh"):
        tr.shell_cubature(other, modes, cache=False)
    with pytest.raises(InputError, match="only 8 modes"):
        tr.shell_cubature(model, modes, n_modes=9, cache=False)
    with pytest.raises(InputError, match="workers"):
        tr.shell_cubature(model, modes, workers=0, cache=False)


# -------------------------------------------------------------------------------------------------- resume
def _interrupt_after(monkeypatch, n_calls):
    """KeyboardInterrupt on the n-th projection (two per greedy iteration: scoring, then the chosen column)."""
    calls = {"n": 0}
    real = tr._project

    def project(F, Uv, *manifold):
        calls["n"] += 1
        if calls["n"] == n_calls:
            raise KeyboardInterrupt
        return real(F, Uv, *manifold)

    monkeypatch.setattr(tr, "_project", project)
    return calls


def test_interrupted_training_resumes_bitwise(small, tmp_path, monkeypatch):
    """Ctrl-C in the middle of greedy iteration 6 (while its column is computed): the checkpoint holds the 5
    finished iterations (not only the last multiple of checkpoint_every), and the next call resumes there and
    ends with bitwise the uninterrupted result."""
    model, modes = small
    ref = tr.shell_cubature(model, modes, cache=False)
    assert ref.meta["iterations"] > 6
    path = tmp_path / "cub.h5"
    _interrupt_after(monkeypatch, 2 * 5 + 2)
    with pytest.raises(KeyboardInterrupt):
        tr.shell_cubature(model, modes, cache=path, checkpoint_every=4)
    monkeypatch.undo()
    assert not path.exists() and (tmp_path / "cub.h5.ckpt").is_file()
    done = tr.shell_cubature(model, modes, cache=path, checkpoint_every=4)
    assert done.meta["resumed_from_iteration"] == 5 and not done.meta["from_cache"]
    same(ref, done)
    assert path.is_file() and not (tmp_path / "cub.h5.ckpt").exists()      # the asset replaces the checkpoint
    assert tr.shell_cubature(model, modes, cache=path, checkpoint_every=4).meta["from_cache"]


def test_interrupt_from_the_progress_callback(small, tmp_path):
    """The same through a progress callable (as the command line's progress bar is driven)."""
    model, modes = small
    ref = tr.shell_cubature(model, modes, cache=False)

    def progress(x):
        if isinstance(x, str) and x.startswith("it 3,"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tr.shell_cubature(model, modes, cache=tmp_path, progress=progress)
    done = tr.shell_cubature(model, modes, cache=tmp_path)
    assert done.meta["resumed_from_iteration"] == 3
    same(ref, done)


# ------------------------------------------------------------------------------------------------ parallel
def test_two_workers_are_bitwise_the_serial_run(small, monkeypatch):
    """workers=2: the pose pass and (with chunks of 16 candidates, from 2 chunks on) the scoring run in a local
    pool of two processes; elements, weights, history and errors are the serial bits."""
    import impactsound.parallel as par
    model, modes = small
    kw = dict(cache=False, score_chunk=16, parallel_min_chunks=2, n_candidates=64, max_elements=2)
    serial = tr.shell_cubature(model, modes, workers=1, **kw)
    used = []
    real = par.map_tasks

    def spy(fn, tasks, **k):
        used.append((fn.__name__, k.get("workers")))
        return real(fn, tasks, **k)

    monkeypatch.setattr(par, "map_tasks", spy)
    two = tr.shell_cubature(model, modes, workers=2, **kw)
    assert ("_pose_task", 2) in used and ("_score_task", 2) in used
    same(serial, two)
    assert two.elements.size == 2


def test_map_fn_gives_the_serial_bits_for_a_plain_callable(small):
    """train_cubature with a plain element_forces callable (no bind_poses): the full forces as chunk tasks and
    every scoring through map_fn (run in this process here) give the bits of the run without it."""
    from impactsound.parallel import map_tasks
    model, modes = small
    rs = ReducedShell.from_modes(model, modes)
    kw = dict(amplitude=tr.pose_amplitude(model, modes.U), n_train=30, n_holdout=10, target=0.15, chunk=16,
              n_candidates=40, seed=2)
    a = train_cubature(rs.element_forces, len(model.faces), rs.omega, **kw)
    b = train_cubature(rs.element_forces, len(model.faces), rs.omega, map_fn=functools.partial(map_tasks, workers=1),
                       map_min_chunks=1, **kw)
    same(a, b)
    assert a.train_error <= 0.15


# ---------------------------------------------------------------------------------------------- command line
def _run(args, capsys):
    from impactsound.cli import main
    rc = main(["-q", "shell", "train", *args])
    out, err = capsys.readouterr()
    return rc, out, err


SHAPE = ["shell:sheet", "--thickness", "0.001", "--resolution", "8", "--modes", "8"]


def test_cli_trains_then_reads_the_cache(tmp_path, capsys):
    out = tmp_path / "sheet.h5"
    rc, o, e = _run([*SHAPE, "--out", str(out), "--json"], capsys)
    assert rc == 0, e
    d = json.loads(o.strip().splitlines()[-1])
    assert d["path"] == str(out) and out.is_file() and not d["from_cache"]
    assert d["modes"] == 8 and d["triangles"] == 96 and d["material"] == "steel"
    assert d["train_error"] <= 0.1 and d["stop_reason"] == "target" and d["elements"] >= 1
    assert d["holdout_error"] > 0 and d["time_s"] > 0 and d["train_time_s"] > 0
    rc, o, e = _run([*SHAPE, "--out", str(out), "--json"], capsys)
    d2 = json.loads(o.strip().splitlines()[-1])
    assert rc == 0 and d2["from_cache"] and d2["elements"] == d["elements"]
    # text output, default cache folder, a mesh file and explicit constants
    m = make_shell("sheet", resolution=8)
    m.export(tmp_path / "sheet.obj")
    rc, o, e = _run([str(tmp_path / "sheet.obj"), "--thickness", "0.001", "--E", "2e11", "--nu", "0.3", "--rho",
                     "7850", "--modes", "6", "--target", "0.2"], capsys)
    assert rc == 0, e
    lines = o.strip().splitlines()
    assert "cubature triangles of 96" in lines[0] and "training error" in lines[0] and "held-out" in lines[0]
    assert lines[1].endswith(".h5") and "shell_cubature_" in lines[1]


def test_cli_resumes_after_ctrl_c(tmp_path, capsys, monkeypatch):
    out = tmp_path / "c.h5"
    _interrupt_after(monkeypatch, 2 * 4 + 1)
    rc, o, e = _run([*SHAPE, "--out", str(out), "--json"], capsys)
    assert rc == 130 and "run the same command again to resume" in e
    monkeypatch.undo()
    rc, o, e = _run([*SHAPE, "--out", str(out), "--json"], capsys)
    assert rc == 0, e
    d = json.loads(o.strip().splitlines()[-1])
    assert d["resumed_from_iteration"] == 4 and not d["from_cache"]
    rc, o, e = _run([*SHAPE, "--out", str(tmp_path / "clean.h5"), "--json"], capsys)
    d0 = json.loads(o.strip().splitlines()[-1])
    assert d0["resumed_from_iteration"] == 0
    a, b = read_asset(out, KIND), read_asset(tmp_path / "clean.h5", KIND)
    for k in ("elements", "weights", "history"):
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k])


@pytest.mark.parametrize("args, msg", [
    (["shell:teapot", "--thickness", "0.001"], "no built-in shell 'teapot'"),
    (["trash_can", "--thickness", "0.001"], "write shell:trash_can"),
    (["nothere.obj", "--thickness", "0.001", "--material", "steel"], "no such mesh file"),
    (["shell:sheet", "--thickness", "0"], "--thickness"),
    (["shell:sheet", "--thickness", "-1e-3"], "--thickness"),
    (["shell:sheet", "--thickness", "0.001", "--modes", "0"], "--modes"),
    (["shell:sheet", "--thickness", "0.001", "--target", "0"], "--target"),
    (["shell:sheet", "--thickness", "0.001", "--target", "1.5"], "--target"),
    (["shell:sheet", "--thickness", "0.001", "--max-elements", "0"], "--max-elements"),
    (["shell:sheet", "--thickness", "0.001", "--workers", "0"], "--workers"),
    (["shell:sheet", "--thickness", "0.001", "--f-max", "-5"], "--f-max"),
    (["shell:sheet", "--thickness", "0.001", "--resolution", "8", "--f-max", "1"], "raise --f-max"),
    (["shell:sheet", "--thickness", "0.001", "--resolution", "2"], "--resolution"),
    (["shell:sheet", "--thickness", "0.001", "--material", "unobtainium"], "--material"),
    (["shell:sheet", "--thickness", "0.001", "--material", "steel", "--E", "1e9"], "either --material"),
    (["shell:sheet", "--thickness", "0.001", "--fallback-local"], "--fallback-local"),
    (["shell:sheet", "--thickness", "5"], "--thickness 5: not smaller than shell:sheet's size"),
])
def test_cli_errors_name_the_option(args, msg, capsys):
    rc, o, e = _run(args, capsys)
    assert rc == 2 and msg in e and e.startswith("error: "), e


def test_cli_errors_on_files(tmp_path, capsys):
    rc, o, e = _run([*SHAPE, "--out", str(tmp_path)], capsys)
    assert rc == 2 and "--out" in e and "is a folder" in e
    V = np.array([[0, 0, 0], [1, 0, 0], [0.5, 1, 0], [0.5, -1, 0], [0.5, 0, 1]], float) * 0.1
    trimesh.Trimesh(V, np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]]), process=False).export(tmp_path / "nm.obj")
    rc, o, e = _run([str(tmp_path / "nm.obj"), "--thickness", "0.001", "--material", "steel"], capsys)
    assert rc == 2 and "non-manifold" in e and "nm.obj" in e
    rc, o, e = _run([str(tmp_path / "nm.obj"), "--thickness", "0.001"], capsys)
    assert rc == 2 and "--material" in e
    rc, o, e = _run([str(tmp_path / "nm.obj"), "--thickness", "0.001", "--material", "steel", "--resolution", "9"],
                    capsys)
    assert rc == 2 and "--resolution" in e
