"""Own PAN fields are kept wavelet-compressed like the soundbank's (Chadwick, Zheng & James 2012, soundbank paper,
sec. 4.1): at least 5x smaller than the dense coefficients, the stored error measured and small, and the field a
render uses is the stored one, whether it came from the cache or was just computed."""
import numpy as np
import pytest
import trimesh

from impactsound.errors import AssetError
from impactsound.materials import get_material
from impactsound.sources.pan.field import PANField
from impactsound.sources.pan.field_store import compress_q, decompress_q
from impactsound.sources.pan.precompute import PAN_EPS, cached_pan_field, pan_asset_path, plan_pan, run_pan


@pytest.fixture(scope="module")
def die_field():
    job = plan_pan(trimesh.creation.box(extents=(0.016, 0.016, 0.016)), get_material("polycarbonate"))
    return job, run_pan(job)


def test_stored_field_is_five_times_smaller_and_within_its_measured_error(die_field):
    job, fld = die_field
    arrays, info = compress_q(fld.q, PAN_EPS)
    assert info["dense_bytes"] >= 5 * info["stored_bytes"]
    q = decompress_q(arrays, fld.q.shape, info)
    for i in range(6):
        err = np.linalg.norm(q[i] - fld.q[i]) / np.linalg.norm(fld.q[i])
        assert err == pytest.approx(info["errors"][i], rel=1e-3, abs=1e-6)     # the reported error is the real one
        assert err < 0.03
    # the pressure the listener hears, at 3 R_b in 40 directions over the whole record: within 3 % (L2)
    d = np.random.default_rng(1).normal(size=(40, 3))
    pts = 3 * fld.R_b * d / np.linalg.norm(d, axis=1, keepdims=True)
    stored = fld.stored_form(PAN_EPS)
    for i in (2, 4):
        ref, got = fld.evaluate(i, pts), stored.evaluate(i, pts)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 0.03


def test_saved_and_reloaded_field_is_the_one_in_memory(die_field, tmp_path):
    job, fld = die_field
    stored = fld.stored_form(PAN_EPS)
    path = stored.save(tmp_path / "die.h5")
    back = PANField.load(path)
    assert np.array_equal(back.q, stored.q) and back.meta["storage"]["eps"] == PAN_EPS
    assert path.stat().st_size < 0.5 * fld.q.nbytes
    # saved again from the reloaded field: the same stored arrays
    again = PANField.load(back.save(tmp_path / "again.h5"))
    assert np.array_equal(again.q, stored.q)


def test_cache_holds_the_stored_form_and_refuses_damage(die_field, tmp_path):
    job, _ = die_field
    fresh = cached_pan_field(job, cache=tmp_path)          # computed now, kept in its stored form
    cached = cached_pan_field(job, cache=tmp_path)         # read back
    assert "storage" in fresh.meta and np.array_equal(fresh.q, cached.q)
    from impactsound.assets.store import Asset, read_asset, write_asset
    path = pan_asset_path(job, tmp_path)
    a = read_asset(path, "pan_field")
    arrays = dict(a.arrays)
    arrays["qw0_index"] = arrays["qw0_index"][:-3]          # an array that no longer fits its indptr
    write_asset(tmp_path / "bad.h5", Asset(kind=a.kind, kind_version=a.kind_version, arrays=arrays, meta=a.meta,
                                           inputs_hash=a.inputs_hash))
    with pytest.raises(AssetError, match="bad.h5.*wavelet-stored"):
        PANField.load(tmp_path / "bad.h5")
