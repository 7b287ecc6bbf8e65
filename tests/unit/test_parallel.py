"""impactsound.parallel.map_tasks (serial, local process pool, Dask) and the PAN precompute through it: same
results in task order everywhere, bit-identical PAN fields local vs Dask, checkpoints written as fields land,
clear errors for an unreachable scheduler (and the --fallback-local path)."""
import functools
import hashlib
import time

import numpy as np
import pytest

from impactsound.parallel import SchedulerError, SchedulerFallbackWarning, map_tasks

distributed = pytest.importorskip("distributed", reason="needs pip install 'impactsound[distributed]'")

DEAD = "tcp://127.0.0.1:1"       # nothing listens on port 1


def slow_square(x):
    """Top-level (picklable) test task."""
    time.sleep(0.01)
    return x * x, np.arange(x, dtype=np.float64) / 3.0


# A deterministic task whose run time is its argument (key-stretching iterations); a stdlib function, so worker
# processes need not import this module (and with it the whole package) to run it.
stretch = functools.partial(hashlib.pbkdf2_hmac, "sha256", b"impact", b"sound")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as c:
        yield c


def _tiny_job():
    """A soft 5 mm ball (long pulse, coarse 78^3 grid) on a 2x3 direction grid, cut to 40 FDTD steps."""
    import trimesh

    from impactsound.materials import make_material
    from impactsound.sources.pan.precompute import plan_pan
    ball = trimesh.creation.icosphere(subdivisions=1, radius=0.005)
    soft = make_material("custom", E=5e6, nu=0.45, rho=1100)
    dt = plan_pan(ball, soft, n_theta=2, n_phi=3).plan.dt
    return plan_pan(ball, soft, n_theta=2, n_phi=3, duration=40 * dt)


def _same(a, b):
    assert len(a) == len(b)
    for (x, u), (y, v) in zip(a, b):
        assert x == y and u.dtype == v.dtype and np.array_equal(u, v)


def test_serial_pool_and_dask_give_the_same_list_in_task_order(cluster):
    tasks = [40000, 30000, 20000, 10000, 1000, 100, 10]       # early tasks are slow: they finish last
    ref = [stretch(t) for t in tasks]
    fractions = [k / 7 for k in range(1, 8)]
    seen, progress = [], []
    assert map_tasks(stretch, tasks, workers=1, on_result=lambda i, r: seen.append(i),
                     progress=progress.append) == ref
    assert seen == list(range(7)) and progress == fractions
    for how in (dict(workers=2), dict(scheduler=cluster.scheduler_address)):
        seen, progress = [], []
        assert map_tasks(stretch, tasks, on_result=lambda i, r: seen.append((i, r)), progress=progress.append,
                         **how) == ref, how
        assert sorted(seen) == list(enumerate(ref)) and progress == fractions, how
    assert map_tasks(stretch, [], scheduler=cluster.scheduler_address) == []


def test_task_error_reaches_the_caller_with_its_type(cluster):
    with pytest.raises(ZeroDivisionError):
        map_tasks(functools.partial(divmod, 1), [1, 0, 2], workers=2)
    with pytest.raises(ZeroDivisionError):
        map_tasks(functools.partial(divmod, 1), [1, 0, 2], scheduler=cluster.scheduler_address)


def test_pan_fields_bit_identical_local_and_dask_and_resume(cluster, tmp_path):
    from impactsound.assets import read_asset
    from impactsound.sources.pan.precompute import run_pan
    from impactsound.sources.pan.solve import TASK_KIND
    job = _tiny_job()
    local = run_pan(job, checkpoint_dir=tmp_path / "local")
    on_dask = functools.partial(map_tasks, scheduler=cluster.scheduler_address)
    fractions = []
    remote = run_pan(job, checkpoint_dir=tmp_path / "dask", map_fn=on_dask, progress=fractions.append)
    for f in range(6):
        a = read_asset(tmp_path / "local" / f"field{f}.h5", TASK_KIND).arrays["p"]
        b = read_asset(tmp_path / "dask" / f"field{f}.h5", TASK_KIND).arrays["p"]
        assert a.shape == (2 * 3 * len(job.radii), job.plan.n_steps) and np.array_equal(a, b)
    assert np.array_equal(local.q, remote.q) and local.inputs_hash == remote.inputs_hash
    assert fractions[0] == 0.0 and fractions[-1] == 1.0 and np.all(np.diff(fractions) >= 0)
    # resume: two fields lost; only those are recomputed (on Dask), the rest come from their checkpoints
    (tmp_path / "dask" / "field1.h5").unlink()
    (tmp_path / "dask" / "field4.h5").unlink()
    ran = []

    def counting(fn, items, **kw):
        ran.extend(items)
        return on_dask(fn, items, **kw)

    again = run_pan(job, checkpoint_dir=tmp_path / "dask", map_fn=counting)
    assert ran == [1, 4] and np.array_equal(again.q, local.q)


def test_unreachable_scheduler_is_a_clear_error_or_falls_back():
    t = time.perf_counter()
    with pytest.raises(SchedulerError) as err:
        map_tasks(slow_square, [1, 2], scheduler=DEAD, connect_timeout=1.0)
    assert time.perf_counter() - t < 10
    msg = str(err.value)
    assert "\n" not in msg and DEAD in msg and "dask scheduler" in msg and "dask worker" in msg
    assert "--fallback-local" in msg
    with pytest.warns(SchedulerFallbackWarning, match="127.0.0.1:1"):
        out = map_tasks(slow_square, [1, 2], scheduler=DEAD, connect_timeout=1.0, fallback_local=True,
                        workers=1)
    _same(out, [slow_square(1), slow_square(2)])
    with pytest.raises(SchedulerError, match="tcp://HOST:8786"):       # a typo is never silently run locally
        map_tasks(slow_square, [1], scheduler="nope://x", fallback_local=True)


def test_missing_dask_names_the_extra(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_distributed(name, *a, **kw):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError("No module named 'distributed'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(SchedulerError, match=r"pip install 'impactsound\[distributed\]'"):
        map_tasks(slow_square, [1], scheduler="tcp://127.0.0.1:8786")


def test_unreachable_scheduler_never_builds_a_client(monkeypatch):
    """Regression (CI hang): a Client whose constructor failed was closed later by its __del__ on whatever thread
    the garbage collector ran in, which deadlocked against the next Client's start. An address where nothing
    listens is now refused by a plain TCP probe before any Client exists."""
    import distributed

    def no_client(*a, **kw):
        raise AssertionError("a distributed.Client was constructed for an unreachable address")

    monkeypatch.setattr(distributed, "Client", no_client)
    for address in (DEAD, "127.0.0.1:1", "tls://127.0.0.1:1"):
        with pytest.raises(SchedulerError, match="no Dask scheduler reachable"):
            map_tasks(slow_square, [1], scheduler=address, connect_timeout=1.0)
    with pytest.raises(SchedulerError, match="not a number"):
        map_tasks(slow_square, [1], scheduler="tcp://127.0.0.1:http", connect_timeout=1.0)


def test_cli_unreachable_scheduler_exits_2_with_the_message(tmp_path, capsys):
    import trimesh

    from impactsound.cli import main
    f = tmp_path / "ball.stl"
    trimesh.creation.icosphere(subdivisions=1, radius=0.005).export(f)
    soft = ["--E", "5e6", "--nu", "0.45", "--rho", "1100", "--directions", "2x3"]
    t = time.perf_counter()
    assert main(["-q", "pan", "precompute", str(f), *soft, "--scheduler", DEAD,
                 "--out", str(tmp_path / "b.h5")]) == 2
    assert time.perf_counter() - t < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and DEAD in err and "dask scheduler" in err and "--fallback-local" in err
    assert "Traceback" not in err and not (tmp_path / "b.h5").exists()


def test_cli_help_documents_the_flags():
    from click.testing import CliRunner

    from impactsound.cli import cli
    res = CliRunner().invoke(cli, ["pan", "precompute", "--help"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    for word in ("--scheduler", "--fallback-local", "--workers", "dask scheduler", "impactsound[distributed]"):
        assert word in text, word


def test_pool_forks_only_without_other_threads(monkeypatch):
    # forking while another thread may hold a lock can hang the child: fork only with the main thread alone
    import sys
    import threading

    from impactsound import parallel
    if not sys.platform.startswith("linux"):
        pytest.skip("fork is used on Linux only")
    import numba.np.ufunc.parallel as npar
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(npar, "_is_initialized", False)
    assert parallel._start_method() == "fork"
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert parallel._start_method() == "spawn"
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(npar, "_is_initialized", True)          # Numba's parallel layer holds its own threads
    assert parallel._start_method() == "spawn"
    # and a real pool gives the same list whichever start method it got
    monkeypatch.undo()
    tasks = [3000, 10, 2000]
    assert map_tasks(stretch, tasks, workers=2) == [stretch(t) for t in tasks]
