"""The standard proxy soundbank ships with the package (Chadwick, Zheng & James 2012, "Faster acceleration noise
for multibody animations using precomputed soundbanks": a bank precomputed once and reused by every object): all
66 entries, verified against its manifest when opened, read-only; a render never solves a standard entry; a
corrupted or missing file gets a clear message and a way back, never a wrong sound."""
import shutil
import warnings

import numpy as np
import pytest
import trimesh

from impactsound.errors import AssetError
from impactsound.sources.pan import soundbank as sb
from impactsound.sources.pan.proxy import bank_entries

SHIPPED = sb.shipped_path("standard", sb.DEFAULT_EPS)
pytestmark = pytest.mark.skipif(SHIPPED is None or not SHIPPED.is_file(),
                                reason="the shipped soundbank is not in this checkout")


def test_shipped_bank_is_complete_small_and_verified():
    bank = sb.shipped_bank()
    assert bank is not None and bank.read_only and bank.path == SHIPPED
    assert bank.present == list(range(len(bank_entries()))) and len(bank.present) == 66
    # the paper's bank is 16 MB (sec. 5); ours is at most that
    assert SHIPPED.stat().st_size <= 16e6
    info = bank.info()
    assert info["eps"] == sb.DEFAULT_EPS and info["preset"] == "standard"
    # a read-only bank refuses to be written to
    with pytest.raises(AssetError, match="read-only"):
        bank._store([bank.entry(0)])


def _coin_scene(tmp_path):
    coin = trimesh.creation.cylinder(radius=0.0121, height=0.00175, sections=32)
    coin.export(tmp_path / "coin.obj")
    scene = tmp_path / "coin.toml"
    scene.write_text("""
[scene]
duration = 0.4
sources = ["acceleration_noise"]
[source.acceleration_noise]
model = "proxy"
[[object]]
name = "coin"
mesh = "coin.obj"
material = "copper"
position = [0, 0, 0.1]
euler_deg = [25, 10, 0]
[[listener]]
position = [0.4, 0.2, 0.3]
""")
    return scene


def test_a_render_never_solves_a_standard_entry(tmp_path, monkeypatch):
    from impactsound import load_scene, render_scene
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path / "empty_cache"))

    def refuse(*a, **k):
        raise AssertionError("a standard soundbank entry was solved during a render")
    monkeypatch.setattr(sb, "solve_entry", refuse)
    res = render_scene(load_scene(_coin_scene(tmp_path)))
    obj = res.info["objects"]["coin"]
    assert obj["acceleration_noise"] == "proxy" and obj["bank"] == str(SHIPPED)
    assert np.abs(res.mix).max() > 0
    assert not list((tmp_path / "empty_cache").glob("soundbank_*"))


def test_corrupted_shipped_bank_is_refused_with_the_fix(tmp_path, monkeypatch):
    bad = tmp_path / SHIPPED.name
    shutil.copyfile(SHIPPED, bad)
    shutil.copyfile(SHIPPED.with_suffix(".json"), bad.with_suffix(".json"))
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    monkeypatch.setattr(sb, "shipped_path", lambda *a, **k: bad)
    with pytest.raises(AssetError, match="corrupted") as e:
        sb.shipped_bank()
    assert str(bad) in str(e.value) and "reinstall" in str(e.value) and "bank build" in str(e.value)
    bad.with_suffix(".json").unlink()
    with pytest.raises(AssetError, match="manifest"):
        sb.shipped_bank()


def test_missing_shipped_bank_warns_and_falls_back_to_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(sb, "shipped_path", lambda *a, **k: tmp_path / "gone.h5")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert sb.shipped_bank() is None
    assert any("missing" in str(x.message) and "make setup" in str(x.message) for x in w)


@pytest.mark.slow
def test_shipped_entry_is_bit_identical_to_one_solved_now():
    """Entry 0 solved now (about a minute on 2 cores) equals the shipped one to the last bit: the bank is what
    `impactsound bank build` makes on this machine, not a file of unknown origin."""
    shipped = sb.shipped_bank().entry(0)
    fresh = sb.solve_entry(0, "standard")
    assert fresh.steps == shipped.steps
    for a, b in zip(fresh.fields, shipped.fields):
        assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.index, b.index)
        assert np.array_equal(a.values, b.values)


def test_own_field_storage_changes_do_not_invalidate_the_bank():
    """Regression: the bank's identity carries the PAN *solver* version only; a change to how own fields are stored
    (their cache key) once made every shipped entry 'built with other settings'."""
    from impactsound.sources.pan import precompute
    assert sb.SOLVER_VERSION == precompute.SOLVER_VERSION != precompute.CODE_VERSION
    assert sb.shipped_bank().identity["solver_version"] == precompute.SOLVER_VERSION


def test_shipped_bank_reads_entries_as_used_with_the_bits_of_a_full_verified_read():
    """The shipped bank, verified by its sha256, reads only the datasets of the entries asked for; they are the
    arrays a full read that checks every dataset's hash returns."""
    lazy = sb.shipped_bank()
    full = sb.Soundbank(SHIPPED, "standard", read_only=True)          # not vouched for: reads and hashes all
    assert lazy._lazy and not full._lazy
    e_lazy, e_full = lazy.entry(17), full.entry(17)
    assert len(lazy._arrays) == len(full._arrays)                    # every dataset is known ...
    assert len(lazy._arrays._read) == 3 * len(e_lazy.fields)        # ... but only entry 17's were read
    for a, b in zip(e_lazy.fields, e_full.fields):
        for name in ("indptr", "index", "values"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y)
