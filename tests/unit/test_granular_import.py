"""Import of an external simulator's contact log (sources/granular/importlog.py; M. Marko, "Sound simulation of
granular materials", ch. 5.5, sec. 6.1's v_min).

Every expected value is written by hand from the hand-built log: which records form one collision, its first
step's approach speed -(v_A - v_B) . n, what v_min drops, and the error messages' rows and columns.
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.granular.events import CONTAINER, GRAIN
from impactsound.sources.granular.importlog import ContactLogWarning, import_contacts, load_contact_log

DT = 1e-4
UP = (0.0, 0.0, 1.0)


def log(steps, a, b, *, va, vb=(0, 0, 0), normal=UP, point=(0, 0, 0), kind=GRAIN):
    """Records of one pair on the given steps (velocities per record or shared)."""
    s = np.asarray(steps)
    n = len(s)
    bc = lambda v: np.broadcast_to(np.asarray(v, float), (n, 3)).copy()  # noqa: E731
    return dict(t=s * DT, step=s, id_a=np.full(n, a), id_b=np.full(n, b), point=bc(point), normal=bc(normal),
                v_a=bc(va), v_b=bc(vb), kind=np.full(n, kind))


def cat(*logs):
    out = {k: np.concatenate([lg[k] for lg in logs]) for k in logs[0]}
    o = np.argsort(out["t"], kind="stable")
    return {k: v[o] for k, v in out.items()}


def imp(rec, **kw):
    rec = dict(rec)
    return import_contacts(rec.pop("t"), rec.pop("id_a"), rec.pop("id_b"), rec.pop("point"), rec.pop("normal"),
                           radius_a=kw.pop("radius_a", 1e-3), **rec, **kw)


def test_persistent_contact_is_one_collision_with_the_first_steps_speed():
    # grain 0 falls on grain 1: approach speed -(v_A - v_B).n = -((-0.3) - 0.1) = 0.4 m/s at the first step, then
    # the contact persists for 4 more steps, slowing and separating
    va = [(0, 0, -0.3), (0, 0, -0.1), (0, 0, 0.0), (0, 0, 0.1), (0, 0, 0.2)]
    vb = [(0, 0, 0.1), (0, 0, 0.05), (0, 0, 0.0), (0, 0, -0.05), (0, 0, -0.1)]
    ev = imp(log(np.arange(10, 15), 0, 1, va=va, vb=vb, point=(0.01, 0.02, 0.03)))
    assert len(ev) == 1
    assert ev.v0[0] == pytest.approx(0.4, rel=1e-12)
    assert ev.t[0] == pytest.approx(10 * DT) and ev.kind[0] == GRAIN
    np.testing.assert_allclose(ev.point[0], [0.01, 0.02, 0.03])
    assert ev.meta["records"] == 5 and ev.meta["collisions"] == 1 and ev.meta["persistent_records_merged"] == 4
    assert ev.origin == "log"


def test_a_gap_separates_two_collisions():
    rec = cat(log([3, 4, 5], 0, 1, va=(0, 0, -1.0)), log([7, 8], 0, 1, va=(0, 0, -0.5)))   # step 6 without contact
    ev = imp(rec)
    assert len(ev) == 2
    np.testing.assert_allclose(ev.v0, [1.0, 0.5])
    np.testing.assert_allclose(ev.t, [3 * DT, 7 * DT])
    # requiring two contact-free steps merges them into one collision
    assert len(imp(rec, gap_steps=2)) == 1


def test_separation_then_approach_is_a_new_collision_without_a_gap():
    # approach, separate, approach again on consecutive steps: two collisions (a bounce inside the contact range)
    va = [(0, 0, -1.0), (0, 0, 0.3), (0, 0, -0.2), (0, 0, -0.1)]
    ev = imp(log([0, 1, 2, 3], 0, 1, va=va))
    np.testing.assert_allclose(ev.v0, [1.0, 0.2])


def test_pair_order_and_manifold_points_do_not_split_a_contact():
    # step 1 reports the pair as (1, 0) with the opposite normal, step 2 twice (two manifold points): one contact
    a = log([0], 0, 1, va=(0, 0, -2.0))
    b = log([1], 1, 0, va=(0, 0, 0.0), vb=(0, 0, -1.0), normal=(0, 0, -1))
    c = log([2, 2], 0, 1, va=(0, 0, -0.5))
    ev = imp(cat(a, b, c))
    assert len(ev) == 1 and ev.v0[0] == pytest.approx(2.0) and ev.id_a[0] == 0 and ev.id_b[0] == 1


def test_interleaved_pairs_are_kept_apart():
    rec = cat(log([0, 1, 2], 0, 1, va=(0, 0, -1.0)), log([1, 2, 3], 2, 3, va=(0, 0, -2.0)),
              log([2, 3], 0, 2, va=(0, 0, -3.0)))
    ev = imp(rec)
    assert sorted(zip(ev.id_a, ev.id_b, ev.v0)) == [(0, 1, 1.0), (0, 2, 3.0), (2, 3, 2.0)]
    np.testing.assert_allclose(ev.t, [0, DT, 2 * DT])


def test_v_min_drops_slow_collisions():
    rec = cat(log([0], 0, 1, va=(0, 0, -5e-5)), log([0], 2, 3, va=(0, 0, -2e-4)), log([0], 4, 5, va=(0, 0, -1.0)))
    ev = imp(rec)
    np.testing.assert_allclose(sorted(ev.v0), [2e-4, 1.0])
    assert ev.meta["slow_dropped"] == 1
    assert len(imp(rec, v_min=0.5)) == 1 and len(imp(rec, v_min=0.0)) == 3


def test_normals_are_normalised_before_the_speed():
    # normal (0, 0, 2): unit (0, 0, 1); v_A = (0, 0, -1) gives v0 = 1, not 2
    ev = imp(log([0], 0, 1, va=(0, 0, -1.0), normal=(0, 0, 2.0)))
    np.testing.assert_allclose(ev.normal[0], [0, 0, 1])
    assert ev.v0[0] == pytest.approx(1.0)
    ev = imp(log([0], 0, 1, va=(-1.0, -1.0, 0.0), normal=(3.0, 4.0, 0.0)))
    np.testing.assert_allclose(ev.normal[0], [0.6, 0.8, 0])
    assert ev.v0[0] == pytest.approx(1.4)             # -(v_A . n) = 0.6 + 0.8


def test_approach_speed_given_directly_and_step_from_dt():
    t = np.array([0.0, 1e-3, 2e-3, 4e-3])           # dt 1e-3: steps 0, 1, 2, 4
    ev = import_contacts(t, 0, 1, np.zeros((4, 3)), [UP] * 4, vn=[0.7, 0.5, 0.1, 0.3], radius_a=1e-3)
    np.testing.assert_allclose(ev.v0, [0.7, 0.3])   # the inferred dt is the smallest time difference
    ev = import_contacts(t, 0, 1, np.zeros((4, 3)), [UP] * 4, vn=[0.7, 0.5, 0.1, 0.3], radius_a=1e-3, dt=2e-3)
    np.testing.assert_allclose(ev.v0, [0.7])        # steps 0, 0 (rounded 0.5), 1, 2: one run


def test_container_hits_and_per_grain_tables():
    rec = cat(log([0, 1], 5, 1, va=(0, 0, -0.8), kind=CONTAINER, point=(0, 0, -0.02)),
              log([0], 2, 5, va=(0, 0, -0.3)))
    ev = import_contacts(rec["t"], rec["id_a"], rec["id_b"], rec["point"], rec["normal"], v_a=rec["v_a"],
                         step=rec["step"], kind=rec["kind"], grain_radius=[1e-3, 1e-3, 2e-3, 1e-3, 1e-3, 1.5e-3],
                         grain_material=[0, 0, 1, 0, 0, 1], materials=("glass", "steel"),
                         containers=("plate", "cup"), element=[7, 7, -1])
    assert len(ev) == 2
    c = ev.kind == CONTAINER
    assert ev.id_b[c][0] == 1 and ev.radius_a[c][0] == 1.5e-3 and ev.radius_b[c][0] == 0.0
    assert ev.material_a[c][0] == 1 and ev.material_b[c][0] == -1 and ev.element[c][0] == 7
    assert ev.v0[c][0] == pytest.approx(0.8)
    g = ~c
    assert ev.radius_a[g][0] == 2e-3 and ev.radius_b[g][0] == 1.5e-3 and ev.material_b[g][0] == 1


def test_separating_first_records_are_dropped_with_a_warning_or_refused():
    rec = cat(log([0, 1], 0, 1, va=(0, 0, 0.2)), log([0], 2, 3, va=(0, 0, -1.0)))   # pair 0-1 moves apart
    with pytest.warns(ContactLogWarning, match="dropped 1 of 2 collisions"):
        ev = imp(rec)
    assert len(ev) == 1 and ev.meta["separating_dropped"] == 1
    with pytest.raises(InputError, match=r"row 0 .*v0 = -0\.2"):
        imp(rec, separating="error")


@pytest.mark.parametrize("col,k,name", [("point", 1, "py"), ("normal", 2, "nz"), ("v_a", 0, "vax")])
def test_nan_names_row_and_column(col, k, name):
    rec = log([0, 1, 2, 3], 0, 1, va=(0, 0, -1.0))
    rec[col][2, k] = np.nan
    with pytest.raises(InputError, match=rf"column '{name}' .*row 2"):
        imp(rec)


def test_nan_time_and_radius():
    rec = log([0, 1, 2], 0, 1, va=(0, 0, -1.0))
    rec["t"] = np.array([0.0, np.nan, 2e-4])
    with pytest.raises(InputError, match=r"column 'time' .*row 1"):
        imp(rec)
    with pytest.raises(InputError, match=r"column 'radius_a' .*row 0"):
        imp(log([0, 1], 0, 1, va=(0, 0, -1.0)), radius_a=[np.nan, 1e-3])


def test_unsorted_time_is_refused_naming_the_row():
    rec = log([0, 1, 2, 3], 0, 1, va=(0, 0, -1.0))
    rec["t"] = np.array([0.0, 2e-4, 1e-4, 3e-4])
    with pytest.raises(InputError, match=r"not sorted: row 2"):
        imp(rec)


def test_unknown_ids_and_bad_values_are_refused():
    rec = log([0], 0, 9, va=(0, 0, -1.0))
    with pytest.raises(InputError, match=r"'id_b' names an unknown grain .*row 0"):
        import_contacts(rec["t"], rec["id_a"], rec["id_b"], rec["point"], rec["normal"], v_a=rec["v_a"],
                        grain_radius=[1e-3] * 5)
    rec = log([0], 0, 2, va=(0, 0, -1.0), kind=CONTAINER)
    with pytest.raises(InputError, match="unknown container"):
        imp(rec, containers=("cup",))
    with pytest.raises(InputError, match="names an unknown grain"):
        imp(log([0], -1, 2, va=(0, 0, -1.0)))
    with pytest.raises(InputError, match="colliding with itself"):
        imp(log([0], 3, 3, va=(0, 0, -1.0)))
    with pytest.raises(InputError, match="zero length"):
        imp(log([0], 0, 1, va=(0, 0, -1.0), normal=(0, 0, 0)))
    with pytest.raises(InputError, match="no speeds"):
        import_contacts([0.0], 0, 1, [0, 0, 0], UP, radius_a=1e-3)
    with pytest.raises(InputError, match="no grain radii"):
        import_contacts([0.0], 0, 1, [0, 0, 0], UP, vn=1.0)
    with pytest.raises(InputError, match="must hold integers"):
        import_contacts([0.0], 0.5, 1, [0, 0, 0], UP, vn=1.0, radius_a=1e-3)
    with pytest.raises(InputError, match="v_min"):
        imp(log([0], 0, 1, va=(0, 0, -1.0)), v_min=-1)
    with pytest.raises(InputError, match="gap_steps"):
        imp(log([0], 0, 1, va=(0, 0, -1.0)), gap_steps=0)
    with pytest.raises(InputError, match="separating"):
        imp(log([0], 0, 1, va=(0, 0, -1.0)), separating="keep")


META = '{"materials": ["glass"], "containers": ["cup"], "dt": 0.0001, "grain_radius": [0.001, 0.001, 0.002]}'
CSV = """# a DEM run
# impactsound contact log """ + META + """
time,step,id_a,id_b,kind,element,px,py,pz,nx,ny,nz,vax,vay,vaz,vbx,vby,vbz
0.0,0,0,1,0,-1,0,0,0,0,0,1,0,0,-0.5,0,0,0
0.0001,1,0,1,0,-1,0,0,0,0,0,1,0,0,-0.2,0,0,0
0.0001,1,2,0,1,4,0,0,-0.05,0,0,1,0,0,-1.5,0,0,0
0.0003,3,0,1,0,-1,0,0,0,0,0,1,0,0,-0.25,0,0,0
"""


def test_load_csv_log(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text(CSV)
    ev = load_contact_log(p)
    assert len(ev) == 3
    np.testing.assert_allclose(ev.v0, [0.5, 1.5, 0.25])
    assert list(ev.kind) == [GRAIN, CONTAINER, GRAIN]
    assert ev.radius_a[1] == 2e-3 and ev.element[1] == 4 and ev.containers == ("cup",)
    # the same log as .npz with 2-D vector columns and the metadata as JSON
    lines = [ln for ln in CSV.splitlines() if ln and not ln.startswith("#")]
    head = lines[0].split(",")
    data = np.array([[float(x) for x in ln.split(",")] for ln in lines[1:]])
    col = {h: data[:, j] for j, h in enumerate(head)}
    meta = json.loads(CSV.splitlines()[1][len("# impactsound contact log "):])
    q = tmp_path / "log.npz"
    np.savez(q, time=col["time"], step=col["step"], id_a=col["id_a"], id_b=col["id_b"], kind=col["kind"],
             element=col["element"], point=np.column_stack([col["px"], col["py"], col["pz"]]),
             normal=np.column_stack([col["nx"], col["ny"], col["nz"]]),
             v_a=np.column_stack([col["vax"], col["vay"], col["vaz"]]), meta=json.dumps(meta))
    ev2 = load_contact_log(q)
    for k, v in ev.columns().items():
        np.testing.assert_array_equal(v, getattr(ev2, k))


def test_load_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text(CSV.replace("0.0001,1,0,1,0,-1,0,0,0,0,0,1,0,0,-0.2", "0.0001,1,0,1,0,-1,0,0,0,0,nan,1,0,0,-0.2"))
    with pytest.raises(InputError, match=r"bad\.csv: column 'ny' .*row 1"):
        load_contact_log(p)
    q = tmp_path / "few.csv"
    q.write_text("time,id_a,id_b,px,py,pz\n0,0,1,0,0,0\n")
    with pytest.raises(InputError, match=r"few\.csv: missing columns .*normal"):
        load_contact_log(q)
    with pytest.raises(InputError, match="no such contact log"):
        load_contact_log(tmp_path / "none.csv")
    r = tmp_path / "log.txt"
    r.write_text(CSV)
    with pytest.raises(InputError, match="unknown contact log format"):
        load_contact_log(r)
    s = tmp_path / "trunc.npz"
    s.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(InputError, match=r"trunc\.npz: cannot read"):
        load_contact_log(s)


def test_imported_log_fits_and_generates():
    """An imported log is an ordinary table: the generator fits it (no warnings on a clean log)."""
    from impactsound.sources.granular.generator import fit_model, generate
    rng = np.random.default_rng(0)
    recs = []
    for k in range(300):
        s0 = int(rng.integers(0, 4000))
        recs.append(log(np.arange(s0, s0 + 3), 2 * k, 2 * k + 1, va=(0, 0, -rng.uniform(0.01, 1)),
                        point=tuple(rng.uniform(0, 0.05, 3))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = imp(cat(*recs))
    assert len(ev) == 300
    g = generate(fit_model(ev, window=0.1), seed=0, count="exact")
    assert len(g) == 300


def test_bad_radius_material_and_restitution_name_the_input_row():
    rec = cat(log([0], 0, 1, va=(0, 0, -1.0)), log([0], 2, 3, va=(0, 0, -1.0)))
    with pytest.raises(InputError, match=r"'radius_a' must be a positive radius .*row 1"):
        imp(rec, radius_a=[1e-3, 0.0])
    with pytest.raises(InputError, match=r"'material_a' names an unknown material .*row 1"):
        imp(rec, material_a=[0, 2], materials=("glass", "steel"))
    with pytest.raises(InputError, match=r"'e' must be a restitution .*row 0"):
        imp(rec, e=[1.5, 0.5])
