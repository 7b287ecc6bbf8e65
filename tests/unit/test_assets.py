import h5py
import numpy as np
import pytest

from impactsound.assets import Asset, content_hash, read_asset, write_asset
from impactsound.errors import AssetError


def _asset():
    return Asset(kind="thing", arrays={"x": np.arange(10.0), "y": np.eye(3, dtype=np.float32)},
                 meta={"units": {"x": "m"}}, inputs_hash=content_hash({"a": 1}, np.arange(3)))


def test_roundtrip_preserves_arrays_and_meta(tmp_path):
    p = write_asset(tmp_path / "a.h5", _asset())
    a = read_asset(p, "thing")
    assert np.array_equal(a.arrays["x"], np.arange(10.0)) and a.arrays["y"].dtype == np.float32
    assert a.meta["units"]["x"] == "m"
    assert a.inputs_hash == content_hash({"a": 1}, np.arange(3))


def test_content_hash_depends_on_values_dtype_and_order():
    base = content_hash({"E": 1.0}, np.arange(3.0))
    assert base == content_hash({"E": 1.0}, np.arange(3.0))
    assert base != content_hash({"E": 1.0 + 1e-12}, np.arange(3.0))
    assert base != content_hash({"E": 1.0}, np.arange(3.0).astype(np.float32))
    assert base != content_hash(np.arange(3.0), {"E": 1.0})


def test_corrupted_data_is_detected(tmp_path):
    p = write_asset(tmp_path / "a.h5", _asset())
    with h5py.File(p, "r+") as f:
        f["x"][3] = 99.0
    with pytest.raises(AssetError, match="corrupted"):
        read_asset(p, "thing")


def test_truncated_file_is_detected(tmp_path):
    p = write_asset(tmp_path / "a.h5", _asset())
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(AssetError, match=str(p.name)):
        read_asset(p, "thing")


def test_stale_inputs_and_wrong_kind_are_refused(tmp_path):
    p = write_asset(tmp_path / "a.h5", _asset())
    with pytest.raises(AssetError, match="different inputs"):
        read_asset(p, "thing", inputs_hash="0" * 64)
    with pytest.raises(AssetError, match="kind"):
        read_asset(p, "other")


def test_atomic_write_leaves_no_temporary_and_old_file_on_failure(tmp_path):
    p = write_asset(tmp_path / "a.h5", _asset())
    bad = Asset(kind="thing", arrays={"x": np.array([object()], dtype=object)})
    with pytest.raises(Exception):
        write_asset(p, bad)
    assert read_asset(p, "thing").arrays["x"].size == 10
    assert [q.name for q in tmp_path.iterdir()] == ["a.h5"]


def test_temporary_names_carry_the_pid_and_stale_ones_are_cleaned(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    import time

    from impactsound.assets import store
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        return real_replace(src, dst)
    monkeypatch.setattr(store.os, "replace", spy)
    write_asset(tmp_path / "a.h5", _asset())
    assert store._TMP_RE.match(seen[0]) and f"-{os.getpid()}-" in seen[0]

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    host = store._host()
    killed = tmp_path / f".b.h5.impactsound-{host}-{dead_pid}-abc123.tmp"     # writer gone
    live = tmp_path / f".c.h5.impactsound-{host}-{os.getppid()}-abc123.tmp"    # writer alive, fresh: kept
    remote = tmp_path / ".d.h5.impactsound-otherhost-1-abc123.tmp"            # another host, old
    legacy = tmp_path / ".e.h5.k2j3h4g5.tmp"                                   # earlier versions' name, old
    mine = tmp_path / ".notes.tmp"                                             # not ours: never touched
    for p in (killed, live, remote, legacy, mine):
        p.write_bytes(b"partial")
    old = time.time() - 2 * store.STALE_TMP_S
    for p in (remote, legacy, mine):
        os.utime(p, (old, old))
    store._last_clean.clear()                # the folder was cleaned by the first write; allow another now
    write_asset(tmp_path / "f.h5", _asset())
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["a.h5", "f.h5", live.name, mine.name])


def test_cache_path_that_is_a_file_is_a_clear_error(tmp_path, monkeypatch):
    from impactsound.assets import cache_dir
    f = tmp_path / "cache"
    f.write_text("not a folder")
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(f))
    with pytest.raises(AssetError, match=rf"IMPACTSOUND_CACHE={f} is a file, not a folder; point "
                                         r"IMPACTSOUND_CACHE at a folder"):
        cache_dir()
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(f / "sub"))
    with pytest.raises(AssetError, match=r"IMPACTSOUND_CACHE=.*sub: cannot create the folder"):
        cache_dir()
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path / "ok"))
    assert cache_dir().is_dir()
