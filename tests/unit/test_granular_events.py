"""The granular event table (sources/granular/events.py): the same rows through NPZ, CSV and Parquet, and the
errors that name the file, the column and the row."""
from __future__ import annotations

import json

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.granular.events import (CONTAINER, GranularEvents, concatenate, empty, load_events,
                                                 save_events)


def _table(n=50, seed=0):
    rng = np.random.default_rng(seed)
    nrm = rng.normal(size=(n, 3))
    kind = (rng.uniform(size=n) < 0.3).astype(np.int8)
    return GranularEvents.from_arrays(
        t=rng.uniform(0, 1, n), point=rng.normal(size=(n, 3)) * 0.01, normal=nrm / np.linalg.norm(nrm, axis=1)[:, None],
        v0=10 ** rng.uniform(-4, 0, n), kind=kind, id_a=rng.integers(0, 100, n),
        id_b=np.where(kind == CONTAINER, 0, rng.integers(0, 100, n)), radius_a=rng.uniform(5e-4, 2e-3, n),
        radius_b=np.where(kind == CONTAINER, 0.0, 1e-3), material_a=0, material_b=np.where(kind == CONTAINER, -1, 0),
        e=np.where(kind == CONTAINER, 0.5, np.nan), materials=("glass_bead",), containers=("cup",),
        origin="test", duration=1.0)


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".parquet"])
def test_round_trip_is_exact(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    ev = _table()
    assert np.all(np.diff(ev.t) >= 0)                     # from_arrays sorted the random times
    back = load_events(save_events(tmp_path / f"ev{suffix}", ev))
    for k, a in ev.columns().items():
        np.testing.assert_array_equal(getattr(back, k), a, err_msg=k)
    assert (back.materials, back.containers, back.origin, back.duration) == (("glass_bead",), ("cup",), "test", 1.0)


def test_concatenate_and_empty():
    a, b = _table(20, 1), _table(30, 2)
    c = concatenate([a, b])
    assert len(c) == 50 and np.all(np.diff(c.t) >= 0) and len(empty()) == 0
    with pytest.raises(InputError, match="same materials"):
        concatenate([a, GranularEvents.from_arrays(**b.columns(), materials=("steel",), containers=("cup",))])


@pytest.mark.parametrize("col,value,match", [("v0", np.nan, "NaN"), ("v0", -1.0, "positive approach speed"),
                                             ("normal", [0.0, 0.0, 2.0], "unit vectors"),
                                             ("radius_a", 0.0, "positive"), ("e", 1.5, r"\(0, 1\]"),
                                             ("t", -0.1, "negative")])
def test_bad_rows_are_named(col, value, match):
    cols = _table(10).columns()
    cols[col] = cols[col].copy()
    cols[col][3] = value
    with pytest.raises(InputError, match=match) as err:
        GranularEvents.from_arrays(**cols, materials=("glass_bead",), containers=("cup",), where="log.csv")
    assert "log.csv" in str(err.value) and col in str(err.value)


def test_files_that_are_refused(tmp_path):
    ev = _table(10)
    p = save_events(tmp_path / "ev.csv", ev)
    lines = p.read_text().splitlines()
    lines[2], lines[3] = lines[3], lines[2]                       # two rows out of time order
    (tmp_path / "unsorted.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="not sorted") as err:
        load_events(tmp_path / "unsorted.csv")
    assert "unsorted.csv" in str(err.value)
    meta = json.loads(lines[0][len("# impactsound granular events "):])
    meta["table_version"] = 99
    (tmp_path / "v99.csv").write_text("\n".join(["# impactsound granular events " + json.dumps(meta)] + lines[1:]))
    with pytest.raises(InputError, match="version 99"):
        load_events(tmp_path / "v99.csv")
    (tmp_path / "cols.csv").write_text("time,px\n0.1,0.0\n")
    with pytest.raises(InputError, match="missing columns"):
        load_events(tmp_path / "cols.csv")
    with pytest.raises(InputError, match="unknown event table format"):
        save_events(tmp_path / "ev.txt", ev)
    with pytest.raises(InputError, match="no such event table"):
        load_events(tmp_path / "nope.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="junk.npz"):
        load_events(tmp_path / "junk.npz")
