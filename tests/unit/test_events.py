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


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_support_columns_roundtrip(tmp_path, suffix):
    """The optional support columns (a body's resting support: point and unit normal into the body, NaN when
    free) survive CSV and NPZ, NaN rows included."""
    log = _log()
    log.support_a_point[1] = [0.1, -0.2, 0.0]
    log.support_a_normal[1] = [0.0, 0.0, 1.0]
    log.support_b_point[2] = [0.3, 0.25, 0.05]
    log.support_b_normal[2] = [0.0, 0.6, 0.8]
    p = log.save(tmp_path / f"ev{suffix}")
    back = EventLog.load(p, ["ball", "die"])
    for k in ("support_a_point", "support_a_normal", "support_b_point", "support_b_normal"):
        assert np.array_equal(getattr(back, k), getattr(log, k), equal_nan=True), k
    assert np.isnan(back.support_a_point[[0, 2, 3]]).all() and np.isnan(back.support_b_normal[[0, 1, 3]]).all()
    if suffix == ".csv":
        header = p.read_text().splitlines()[0].split(",")
        assert header[-12:] == ["sa_px", "sa_py", "sa_pz", "sa_nx", "sa_ny", "sa_nz",
                                "sb_px", "sb_py", "sb_pz", "sb_nx", "sb_ny", "sb_nz"]
    back = back.select(np.array([False, True, True, False]))            # select and concat keep them
    both = EventLog.concat([back, back])
    assert np.array_equal(both.support_b_normal[2:], back.support_b_normal[[1, 1]])


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_logs_without_support_columns_load_with_free_bodies(tmp_path, suffix):
    p = tmp_path / f"ev{suffix}"
    if suffix == ".csv":
        p.write_text(HEADER + ROW)
    else:
        np.savez(p, t=[0.1], a=np.array(["ground"]), b=np.array(["ball"]), point=[[0, 0, 0]], normal=[[0, 0, 1.0]],
                 impulse=[[0, 0, 0.01]], vn=[1.0])
    log = EventLog.load(p, ["ball"])
    for k in ("support_a_point", "support_a_normal", "support_b_point", "support_b_normal"):
        assert getattr(log, k).shape == (1, 3) and np.isnan(getattr(log, k)).all()


def test_bad_support_columns_are_named(tmp_path):
    p = tmp_path / "ev.csv"
    head = HEADER.strip() + ",sb_px,sb_py,sb_pz,sb_nx,sb_ny,sb_nz\n"
    p.write_text(head + ROW.strip() + ",0,0,0,0,0,2\n")
    with pytest.raises(InputError, match=r"row 2, columns sb_px,.*sb_nz: the support normal of body_b is not a unit"):
        EventLog.load(p, ["ball"])
    p.write_text(head + ROW.strip() + ",0,0,0,,,\n".replace(",,,", ",nan,nan,nan"))
    with pytest.raises(InputError, match=r"row 2, columns sb_px,.*: the support of body_b is given only in part"):
        EventLog.load(p, ["ball"])
    p.write_text(head + ROW.strip() + ",nan,nan,nan,nan,nan,nan\n")
    assert np.isnan(EventLog.load(p, ["ball"]).support_b_point).all()


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


HEADER = "time,body_a,body_b,px,py,pz,nx,ny,nz,jx,jy,jz,vn\n"
ROW = "0.1,ground,ball,0,0,0,0,0,1,0,0,0.01,1\n"


def test_rows_are_named_as_a_spreadsheet_counts_them(tmp_path):
    log = _log()
    log.t[:] = [0.0, 0.5, 0.2, 0.9]
    p = log.save(tmp_path / "ev.csv")
    with pytest.raises(InputError, match=r"ev\.csv: row 4, column 'time': times are not monotonic"):
        EventLog.load(p, ["ball", "die"])
    p.write_text(HEADER + ROW + ROW.replace("0,0,1,0,0", "0,0,2,0,0"))
    with pytest.raises(InputError, match=r"ev\.csv: row 3, column 'normal': not a unit vector"):
        EventLog.load(p, ["ball"])


def test_header_only_log_is_an_empty_log(tmp_path):
    p = tmp_path / "ev.csv"
    p.write_text(HEADER + "\n\n")
    log = EventLog.load(p, ["ball"])
    assert len(log) == 0 and log.point.shape == (0, 3) and log.pos_a.shape == (0, 3)


@pytest.mark.parametrize("encoding,sep", [("utf-8-sig", ","), ("utf-16", "\t"), ("utf-16", ","), ("utf-8", ";")])
def test_bom_and_utf16_and_tab_separated_logs_are_read(tmp_path, encoding, sep):
    log = _log()
    ref = log.save(tmp_path / "ref.csv")
    p = tmp_path / "ev.csv"
    p.write_bytes(ref.read_text().replace(",", sep).encode(encoding))    # utf-16 writes a byte-order mark
    back = EventLog.load(p, ["ball", "die"])
    for k in ("t", "a", "b", "point", "normal", "impulse", "vn"):
        assert np.array_equal(getattr(back, k), getattr(log, k)), k


@pytest.mark.parametrize("data,expect", [
    (bytes(range(256)) * 8, "not a text CSV file (byte 128 = 0x80 is not UTF-8"),
    (HEADER.encode("utf-16-le"), "NUL byte at byte 1: binary data, or UTF-16 without a byte-order mark"),
    (b"PK\x03\x04" + bytes(100), "ZIP/NPZ file, not a CSV text file"),
])
def test_binary_and_unreadable_files_are_refused_with_the_file_named(tmp_path, data, expect):
    p = tmp_path / "garbage.csv"
    p.write_bytes(data)
    with pytest.raises(InputError) as e:
        EventLog.load(p, ["ball"])
    assert str(p) in str(e.value) and expect in str(e.value) and "\n" not in str(e.value)


def _doc_block(marker):
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "event-log.md").read_text()
    blocks = text.split("```python\n")[1:]
    return next(b.split("```")[0] for b in blocks if marker in b)


def test_docs_pybullet_example_converts_and_merges_contacts(tmp_path):
    """The docs' PyBullet snippet on synthetic records: a 0.263 kg ball falling at 2 m/s onto the plane, three
    contact steps whose normal forces sum to 1.5 m v. PyBullet's contactNormalOnB points from B (the ball) towards
    A (the plane), i.e. down; the quaternion comes as x, y, z, w."""
    from impactsound.dynamics import GROUND, check_event_log
    from impactsound.scene import load_scene
    ns = {}
    exec(compile(_doc_block("def pybullet_events"), "event-log.md", "exec"), ns)
    (tmp_path / "s.toml").write_text('[scene]\nduration = 1.0\n[[object]]\nname = "ball"\nshape = "sphere"\n'
                                     'size = { radius = 0.02 }\nmaterial = "steel"\nposition = [0, 0, 0.3]\n')
    scene = load_scene(tmp_path / "s.toml")
    m, v, dt = scene.bodies[0].mass, 2.0, 5e-4
    plane, ball = 0, 1
    orn = [0.0, 0.0, np.sin(np.pi / 8), np.cos(np.pi / 8)]          # 45 deg about z, PyBullet order x, y, z, w
    records = []
    for k in range(40):
        speed = -v if k <= 10 else 1.5 * v - v                       # falling, then bouncing up
        state = {ball: (([0.0, 0.0, 0.0196], orn), ([0.0, 0.0, speed], [0.0, 0.0, 0.0]))}
        contacts = []
        if 10 <= k < 13:
            contacts = [(0, plane, ball, -1, -1, [0.001, 0.0, 0.0], [0.001, 0.0, -0.0004], [0.0, 0.0, -1.0], -4e-4,
                         1.5 * m * v / 3 / dt, 0.0, [1, 0, 0], 0.0, [0, 1, 0])]
        records.append((contacts, state))
    log = ns["pybullet_events"](scene, records, dt, {plane: GROUND, ball: 0},
                                {ball: ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])})
    assert len(log) == 1 and log.a[0] == GROUND and log.b[0] == 0
    assert log.t[0] == pytest.approx(10 * dt) and log.vn[0] == pytest.approx(v)
    assert np.allclose(log.normal[0], [0, 0, 1]) and np.allclose(log.impulse[0], [0, 0, 1.5 * m * v])
    assert np.allclose(log.quat_b[0], [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)])          # w first
    assert np.allclose(log.pos_b[0], [0, 0, 0.0196])
    assert check_event_log(log, scene.bodies, scene.duration) == []
