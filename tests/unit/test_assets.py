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
