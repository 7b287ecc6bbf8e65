import numpy as np
import pytest

from impactsound.dynamics.events import GROUND, EventLog
from impactsound.errors import InputError


def _log(n=4):
    rng = np.random.default_rng(0)
    nrm = rng.normal(size=(n, 3))
    nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
    return EventLog(t=np.linspace(0, 1, n), a=[GROUND, 0, 1, GROUND][:n], b=[0, 1, 0, 1][:n],
                    point=rng.normal(size=(n, 3)), normal=nrm, impulse=rng.normal(size=(n, 3)),
                    vn=np.abs(rng.normal(size=n)), body_names=["ball", "die"])


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_roundtrip(tmp_path, suffix):
    log = _log()
    log.pos_b[:] = 1.0
    log.quat_b[:] = [1, 0, 0, 0]
    p = log.save(tmp_path / f"ev{suffix}")
    back = EventLog.load(p, ["ball", "die"])
    for k in ("t", "a", "b", "point", "normal", "impulse", "vn", "pos_b", "quat_b"):
        assert np.array_equal(getattr(back, k), getattr(log, k), equal_nan=True), k


def test_missing_column_named(tmp_path):
    p = tmp_path / "ev.csv"
    p.write_text("time,body_a,body_b,px,py,pz,nx,ny,nz,jx,jy,jz\n0,ground,ball,0,0,0,0,0,1,0,0,1\n")
    with pytest.raises(InputError, match="vn"):
        EventLog.load(p, ["ball"])


def test_non_monotonic_time_rejected(tmp_path):
    log = _log()
    log.t[:] = [0.0, 0.5, 0.2, 0.9]
    p = log.save(tmp_path / "ev.csv")
    with pytest.raises(InputError, match="monotonic"):
        EventLog.load(p, ["ball", "die"])


def test_unknown_body_and_nan_rejected(tmp_path):
    p = tmp_path / "ev.csv"
    p.write_text("time,body_a,body_b,px,py,pz,nx,ny,nz,jx,jy,jz,vn\n0,ground,cup,0,0,0,0,0,1,0,0,1,1\n")
    with pytest.raises(InputError, match="cup"):
        EventLog.load(p, ["ball"])
    p.write_text("time,body_a,body_b,px,py,pz,nx,ny,nz,jx,jy,jz,vn\n0,ground,ball,0,0,nan,0,0,1,0,0,1,1\n")
    with pytest.raises(InputError, match="point"):
        EventLog.load(p, ["ball"])
