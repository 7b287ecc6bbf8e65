"""The ``ground`` source end to end (the floor's own sound under each impact, Qu & James 2019, "Ground sound"): a
rendered stem against the time-domain Rayleigh integral of the closed-form Lamb surface motion, linearity and
superposition, which object a stem belongs to, independence from the asset cache, and bad input.

Small scenes: one steel sphere (radius 2 cm) on the floor, 20 ms of sound, the ``ground`` source alone, events given
to :func:`render_scene` directly."""
import logging
import math
import re

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from impactsound.assets import Asset, read_asset, write_asset
from impactsound.cli import cli
from impactsound.contact.hertz import combined_modulus, hertz_tau
from impactsound.contact.stage import contact_stage
from impactsound.dynamics.events import GROUND, EventLog
from impactsound.errors import InputError
from impactsound.pipeline import render_scene
from impactsound.scene import parse_scene
from impactsound.sources.ground import bank as B
from impactsound.sources.ground.impact import HalfSpace, rayleigh_on_axis, surface_motion
from impactsound.sources.ground.source import ground_events

FS = 48000
R_BALL = 0.02
BALL = {"name": "ball", "shape": "sphere", "size": {"radius": R_BALL}, "material": "steel",
        "position": [0.0, 0.0, R_BALL]}
# wood_hard as in the shipped table (Qu & James 2019, Table 1 wood), written out for the reference
WOOD = HalfSpace(11e9, 0.25, 750.0)


def _scene(tmp_path, *, listener=(0.0, 0.0, 0.3), ground=None, kernel=None, objects=(BALL,), duration=0.02,
           more_listeners=()):
    d = {"scene": {"duration": duration, "sources": ["ground"]},
         "listener": [{"name": f"mic{i}", "position": list(p)} for i, p in enumerate((listener, *more_listeners))],
         "object": [dict(o) for o in objects]}
    if ground is not None:
        d["ground"] = ground
    if kernel is not None:
        d["source"] = {"ground": {"kernel": kernel}}
    return parse_scene(d, base=tmp_path)


def _hits(scene, hits, *, ground_first=True):
    """Events of bodies hitting the floor: hits = [(body index, t [s], (x, y), J [N s], vn [m/s])], the sphere
    resting on the floor at (x, y). ground_first: the ground is body a (normal up, impulse on the ball up);
    else body b (normal down, impulse on the ground down)."""
    n = len(hits)
    body = [h[0] for h in hits]
    z = np.array([[0.0, 0.0, 1.0]] * n)
    s = 1.0 if ground_first else -1.0
    pos = [[h[2][0], h[2][1], scene.bodies[h[0]].position[2]] for h in hits]
    kw = dict(t=[h[1] for h in hits], point=[[h[2][0], h[2][1], 0.0] for h in hits], normal=s * z,
              impulse=s * z * np.array([h[3] for h in hits])[:, None], vn=[h[4] for h in hits],
              body_names=scene.body_names)
    quat = [scene.bodies[i].quaternion for i in body]
    if ground_first:
        return EventLog(a=[GROUND] * n, b=body, pos_b=pos, quat_b=quat, **kw)
    return EventLog(a=body, b=[GROUND] * n, pos_a=pos, quat_a=quat, **kw)


def _ground_stem(scene, events, name="ball", **kw):
    res = render_scene(scene, events=events, **kw)
    return res, res.stems["ground"][name]


# ---- physics ---------------------------------------------------------------------------------------------------

def test_stem_equals_the_time_domain_rayleigh_integral_of_lambs_surface_motion(tmp_path):
    """One steel sphere (2 cm) hits a hardwood floor at 0.5 m/s under a listener 0.3 m up. Reference, computed
    independently of the frequency-domain bank: the Lorentzian-regularized Lamb surface acceleration (closed form,
    Qu & James 2019) radiated by the time-domain Rayleigh integral on the axis, with J the event's normal
    impulse and eps = t_c / 4, t_m = t0 + t_c / 2 from the contact stage's Hertz time, evaluated at the output
    samples. With eps = 101 us the pressure spectrum (f^2 exp(-2 pi f eps) times Lamb's) is down to ~4e-4 of
    its peak where the output's roll-off starts (0.9 Nyquist), so the band-limited render and the continuous
    reference agree sample by sample.

    The bank radiates the plane out to rho + R_EXTRA around the impact, tapered over the outer 30 %; the first
    motion there (the P wave, at r / c_p) is heard from t_edge on. Before it: measured 1.3e-4 relative L2 over
    212 samples (3 ms before the direct arrival to t_edge - 5 eps). From t_edge on the truncated plane leaves an
    arrival of 0.66 % of the peak (1.7 % relative L2 over the 8 ms window), a property of the bank's plane size."""
    scene = _scene(tmp_path, kernel="lorentzian")
    ball = scene.bodies[0]
    t0, v = 0.005, 0.5
    J = 1.6 * ball.mass * v
    res, stem = _ground_stem(scene, _hits(scene, [(0, t0, (0.0, 0.0), J, v)]))
    assert stem.shape == (1, int(0.02 * FS))
    p = stem[0]
    # the render's own contact stage, and Hertz's closed form for a sphere on a flat floor (effective mass m,
    # radius b; the mesh's discrete curvature is within 2e-4 of 1 / b)
    tau = contact_stage(res.events, scene.bodies, scene.ground).of(0).tau[0]
    E_star = combined_modulus(ball.material, scene.ground.material)
    assert tau == pytest.approx(hertz_tau(ball.mass, R_BALL, E_star, v), rel=1e-3)
    assert 3.5e-4 < tau < 4.5e-4
    eps, t_m = tau / 4, t0 + tau / 2
    c_a, rho_a, h = scene.air.c, scene.air.rho, 0.3
    t = np.arange(len(p)) / FS
    t_arr = t_m + h / c_a
    win = (t > t_arr - 0.003) & (t < t_arr + 0.005)
    r_e = 0.7 * B.R_EXTRA
    t_edge = t_m + r_e / WOOD.c_p + math.hypot(h, r_e) / c_a
    # r_max: past every ring heard in the window; panel edges every 1.4 eps of Rayleigh-wave travel resolve the
    # moving pulse on the plane
    ref = rayleigh_on_axis(lambda r, tt: surface_motion(r, tt, J, eps, WOOD, t_m=t_m, kernel="lorentzian"), h,
                           t[win], r_max=3.0, r_scale=WOOD.c_s * eps, breaks=np.arange(0, 3.0, 1.4 * eps * WOOD.c_R),
                           c_a=c_a, rho_a=rho_a)
    got = p[win]
    pre = t[win] < t_edge - 5 * eps
    assert pre.sum() > 200
    err = np.linalg.norm(got[pre] - ref[pre]) / np.linalg.norm(ref[pre])
    assert err < 1e-3, err
    assert np.abs(got - ref).max() < 1e-2 * np.abs(ref).max()
    # nothing of note outside the window (measured 7e-5 of the energy): the arrival time is right
    assert np.linalg.norm(p[~win]) < 1e-3 * np.linalg.norm(p)
    # level: measured 0.66 Pa peak (a 2 cm steel ball at 0.5 m/s on hardwood, 0.3 m above the impact)
    assert 0.3 < np.abs(p).max() < 1.5


def test_linear_in_the_impulse_and_additive_over_impacts(tmp_path):
    """Twice the impulse (same speed, so the same contact time) gives twice the sound; two impacts at different
    places and times sound as the sum of each alone; the ground as body a or body b of the event is the same."""
    scene = _scene(tmp_path, listener=(0.1, -0.05, 0.3))
    m = scene.bodies[0].mass
    a = (0, 0.004, (0.0, 0.0), 1.2 * m * 0.8, 0.8)
    b = (0, 0.011, (0.2, 0.0), 1.5 * m * 1.1, 1.1)
    _, pa = _ground_stem(scene, _hits(scene, [a]))
    _, pa2 = _ground_stem(scene, _hits(scene, [(0, 0.004, (0.0, 0.0), 2 * a[3], 0.8)]))
    _, pb = _ground_stem(scene, _hits(scene, [b]))
    _, pab = _ground_stem(scene, _hits(scene, [a, b]))
    _, pab_b = _ground_stem(scene, _hits(scene, [a, b], ground_first=False))
    assert np.abs(pa).max() > 0.05 and np.abs(pb).max() > 0.05
    assert np.allclose(pa2, 2 * pa, rtol=0, atol=1e-12 * np.abs(pa).max())
    assert np.allclose(pab, pa + pb, rtol=0, atol=1e-12 * np.abs(pab).max())
    assert np.allclose(pab_b, pab, rtol=0, atol=1e-12 * np.abs(pab).max())
    # two listener channels (heights 0.3 and 0.2 m, a bank each) are each what a scene with that listener alone
    # gets
    two = _scene(tmp_path, listener=(0.1, -0.05, 0.3), more_listeners=[(0.0, 0.0, 0.2)])
    _, p2 = _ground_stem(two, _hits(two, [a, b]))
    low = _scene(tmp_path, listener=(0.0, 0.0, 0.2))
    _, p_low = _ground_stem(low, _hits(low, [a, b]))
    assert p2.shape[0] == 2 and np.allclose(p2[0], pab[0], rtol=0, atol=1e-12 * np.abs(pab).max())
    assert np.allclose(p2[1], p_low[0], rtol=0, atol=1e-12 * np.abs(p_low).max())
    assert not np.allclose(p2[1], p2[0], rtol=0.1)
    # causal to within the kernel's precursor: nothing before the direct sound of the first impact
    t = np.arange(pab.shape[1]) / FS
    first = 0.004 + math.dist((0.1, -0.05, 0.3), (0.0, 0.0, 0.0)) / scene.air.c
    assert np.abs(pab[0, t < first - 5e-4]).max() < 1e-3 * np.abs(pab).max()


def test_stem_belongs_to_the_object_that_hit_the_floor(tmp_path):
    """Two spheres: only the one that hits the floor gets a ground stem; a collision between the two spheres (no
    ground) makes no ground sound; the mix holds the stem; the sidecar info names the floor's material and how
    well a half-space fits it."""
    other = dict(BALL, name="other", position=[0.1, 0.0, R_BALL])
    scene = _scene(tmp_path, objects=(BALL, other))
    m = scene.bodies[0].mass
    ev = _hits(scene, [(1, 0.006, (0.1, 0.0), 1.5 * m, 1.0)])
    res = render_scene(scene, events=ev)
    assert set(res.stems) == {"ground"} and set(res.stems["ground"]) == {"ball", "other"}
    assert np.all(res.stems["ground"]["ball"] == 0)
    assert np.abs(res.stems["ground"]["other"]).max() > 0.05
    assert np.allclose(res.mix, res.stems["ground"]["other"], rtol=0, atol=1e-15)
    g = res.info["ground"]
    assert g["material"] == "wood_hard" and g["half_space_fit"].startswith("good")
    assert g["E_pa"] == 11e9 and g["nu"] == 0.25 and g["rho_kg_m3"] == 750.0
    assert g["c_s_m_s"] == pytest.approx(WOOD.c_s, abs=1e-3)
    # the two spheres collide in the air: no ground contact, no ground sound
    mid = [0.05, 0.0, 0.1]
    ev2 = EventLog(t=[0.006], a=[0], b=[1], point=[mid], normal=[[1.0, 0, 0]], impulse=[[m, 0, 0]], vn=[1.0],
                   pos_a=[[0.05 - R_BALL, 0, 0.1]], pos_b=[[0.05 + R_BALL, 0, 0.1]], quat_a=[[1.0, 0, 0, 0]],
                   quat_b=[[1.0, 0, 0, 0]], body_names=scene.body_names)
    res2 = render_scene(scene, events=ev2)
    assert all(np.all(s == 0) for s in res2.stems["ground"].values())


def test_a_raised_floor_sounds_as_the_same_floor_at_zero(tmp_path):
    """[ground] height = 0.25 m with the ball, impact and listener raised by as much: the same sound (listener
    heights and contact points are measured from the ground plane)."""
    z = 0.25
    base = _scene(tmp_path)
    up = _scene(tmp_path, listener=(0.0, 0.0, 0.3 + z), ground={"height": z},
                objects=(dict(BALL, position=[0.0, 0.0, R_BALL + z]),))
    m = base.bodies[0].mass
    hit = [(0, 0.004, (0.05, 0.0), 1.5 * m, 1.0)]
    _, p0 = _ground_stem(base, _hits(base, hit))
    ev = _hits(up, hit)
    ev.point[:, 2] += z
    _, p1 = _ground_stem(up, ev)
    assert np.abs(p0).max() > 0.05
    # measured 1.3e-15 of the peak (the listener's height above the floor, 0.55 - 0.25, is 0.3 + 4e-17)
    assert np.allclose(p1, p0, rtol=0, atol=1e-9 * np.abs(p0).max())


def test_a_contact_without_normal_impulse_is_silent(tmp_path):
    """A ground contact whose impulse is all tangential (sliding, J . n = 0) pushes nothing into the floor: no
    ground sound and no error, also next to an impact that does push."""
    scene = _scene(tmp_path)
    m = scene.bodies[0].mass
    ev = _hits(scene, [(0, 0.004, (0.0, 0.0), 0.0, 1.0)])
    ev.impulse[0] = [1.5 * m, 0.0, 0.0]
    _, p = _ground_stem(scene, ev)
    assert np.all(p == 0)
    hit = (0, 0.008, (0.0, 0.0), 1.5 * m, 1.0)
    ev2 = _hits(scene, [(0, 0.004, (0.0, 0.0), 0.0, 1.0), hit])
    ev2.impulse[0] = [1.5 * m, 0.0, 0.0]
    _, p2 = _ground_stem(scene, ev2)
    _, p1 = _ground_stem(scene, _hits(scene, [hit]))
    assert np.abs(p1).max() > 0.05 and np.array_equal(p2, p1)


# ---- the cache -------------------------------------------------------------------------------------------------

def _bank_files(folder):
    return sorted((folder / "ground").glob("bank-*.h5"))


def test_output_never_depends_on_the_cache(tmp_path, monkeypatch):
    """The same events rendered with an empty cache, with a cache whose bank holds only some of the nodes they
    need (left by a render of one of the impacts), and with the full bank: the same samples, bit for bit. A bank
    file of another layout version, one with a flipped byte, or one built from other inputs (another listener
    height's bank copied in its place) is rebuilt, never read: same samples, the file replaced by a valid one."""
    scene = _scene(tmp_path, listener=(0.0, 0.02, 0.3))
    m = scene.bodies[0].mass
    near = (0, 0.004, (0.0, 0.0), 1.5 * m, 1.0)
    far = (0, 0.009, (0.06, 0.1), 1.5 * m, 1.0)
    both = _hits(scene, [near, far])

    def render(cache):
        monkeypatch.setenv("IMPACTSOUND_CACHE", str(cache))
        return render_scene(scene, events=both).stems["ground"]["ball"]

    fresh = render(tmp_path / "c_empty")
    assert np.abs(fresh).max() > 0.05
    # a partial bank: the nodes of the near impact only
    part = tmp_path / "c_part"
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(part))
    only_near = render_scene(scene, events=_hits(scene, [near])).stems["ground"]["ball"]
    (path,) = _bank_files(part)
    with h5py.File(path, "r") as f:
        n_part = len(f["node_index"])
    got = render(part)
    assert np.array_equal(got, fresh)
    with h5py.File(path, "r") as f:
        n_full = len(f["node_index"])
    assert n_full > n_part                     # the far impact's nodes were added to the file
    assert np.array_equal(render(part), fresh)     # and the full bank read back gives the same

    # another layout version, with its spectra doubled: used, it would double the sound
    good = read_asset(path, B.BANK_KIND)
    arrays = {k: v.copy() for k, v in good.arrays.items()}
    arrays["spectra"] *= 2
    write_asset(path, Asset(kind=B.BANK_KIND, arrays=arrays, meta=good.meta, inputs_hash=good.inputs_hash,
                            kind_version=B.BANK_VERSION + 1))
    assert np.array_equal(render(part), fresh)
    assert read_asset(path, B.BANK_KIND, kind_version=B.BANK_VERSION).kind_version == B.BANK_VERSION

    # a flipped byte in the stored spectra (the data no longer matches its hash)
    raw = bytearray(path.read_bytes())
    spec = np.asarray(good.arrays["spectra"]).tobytes()
    at = bytes(raw).find(spec[64:128])
    assert at > 0
    raw[at + 5] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert np.array_equal(render(part), fresh)
    a = read_asset(path, B.BANK_KIND, kind_version=B.BANK_VERSION, inputs_hash=good.inputs_hash)
    assert len(a.arrays["node_index"]) == n_full

    # a bank built from other inputs (listener 0.2 m up) in this bank's place
    other = _scene(tmp_path, listener=(0.0, 0.0, 0.2))
    oc = tmp_path / "c_other"
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(oc))
    render_scene(other, events=_hits(other, [near]))
    (opath,) = _bank_files(oc)
    path.write_bytes(opath.read_bytes())
    assert np.array_equal(render(part), fresh)
    assert read_asset(path, B.BANK_KIND, inputs_hash=good.inputs_hash).inputs_hash == good.inputs_hash

    # [source.ground] cache = false: no file, same sound
    nc = tmp_path / "c_none"
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(nc))
    d = _scene(tmp_path, listener=(0.0, 0.02, 0.3))
    d.options["ground"] = d.options["ground"].model_copy(update={"cache": False})
    assert np.array_equal(render_scene(d, events=_hits(d, [near])).stems["ground"]["ball"], only_near)
    assert not _bank_files(nc)


# ---- bad input -------------------------------------------------------------------------------------------------

def test_listener_on_or_below_the_floor_is_an_input_error(tmp_path):
    scene = _scene(tmp_path, listener=(0.3, 0.0, 0.0))
    m = scene.bodies[0].mass
    with pytest.raises(InputError, match=r"<scene>: listener 'mic0' \(channel 0\) .* on or below the ground plane"
                       r".*raise its \[\[listener\]\] position"):
        render_scene(scene, events=_hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0)]))
    with pytest.raises(InputError, match="below the ground"):
        _scene(tmp_path, listener=(0.3, 0.0, -0.01))


def test_bad_ground_events_are_input_errors(tmp_path):
    """Off the plane, pulling together: the event-log plausibility checks stop them first; rendered anyway
    (allow_implausible), the ground source stops them itself, naming the row and the column to fix. A NaN
    impulse: EventLog.validate stops it; the source's own check names it too."""
    scene = _scene(tmp_path)
    m = scene.bodies[0].mass
    ok = _hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0), (0, 0.008, (0.1, 0.0), 1.5 * m, 1.0)])

    off = _hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0), (0, 0.008, (0.1, 0.0), 1.5 * m, 1.0)])
    off.point[1, 2] = 0.05
    off.pos_b[1, 2] = 0.05 + R_BALL
    with pytest.raises(InputError, match="ground"):
        render_scene(scene, events=off)
    with pytest.warns(UserWarning):
        with pytest.raises(InputError, match=r"row 1: a contact with the ground at height z = 0\.05 m.*column "
                                             r"point\) or the \[ground\] height"):
            render_scene(scene, events=off, allow_implausible=True)

    pull = _hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0), (0, 0.008, (0.1, 0.0), 1.5 * m, 1.0)])
    pull.impulse[1] *= -1
    with pytest.raises(InputError):
        render_scene(scene, events=pull)
    with pytest.warns(UserWarning):
        with pytest.raises(InputError, match=r"row 1: the ground contact's impulse pulls the bodies together"):
            render_scene(scene, events=pull, allow_implausible=True)

    nan = _hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0), (0, 0.008, (0.1, 0.0), 1.5 * m, 1.0)])
    nan.impulse[1, 2] = np.nan
    with pytest.raises(InputError, match="(?i)nan|finite"):
        render_scene(scene, events=nan)
    with pytest.raises(InputError, match=r"row 1: a ground contact with a NaN or infinite impulse"):
        ground_events(nan, 0.0)
    rows, J = ground_events(ok, 0.0)
    assert rows.tolist() == [0, 1] and np.allclose(J, 1.5 * m)


@pytest.mark.parametrize("mat, where, what", [
    ({"E": 11e9, "nu": -0.1, "rho": 750.0}, r"<scene>: ground\.material: 'slab'", "0 < nu < 0.5"),
    ({"E": 11e9, "nu": 0.6, "rho": 750.0}, "ground.material", "nu"),
    ({"E": 0.0, "nu": 0.25, "rho": 750.0}, "ground.material", "E"),
    ({"E": 11e9, "nu": 0.25, "rho": -5.0}, "ground.material", "rho"),
])
def test_bad_ground_material_is_an_input_error(tmp_path, mat, where, what):
    """A floor material outside an elastic half-space's range is refused when the scene is read (E, rho <= 0,
    nu >= 0.5) or when the ground source is prepared (an auxetic nu <= 0, which other materials may have), the
    message naming the field."""
    with pytest.raises(InputError) as info:
        scene = _scene(tmp_path, ground={"material": dict(mat, name="slab")})
        m = scene.bodies[0].mass
        render_scene(scene, events=_hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0)]))
    assert re.search(where, str(info.value)) and what in str(info.value), str(info.value)


def test_no_ground_no_ground_sound(tmp_path):
    """[ground] enabled = false: the source renders silence for every object and says so, without an error."""
    other = dict(BALL, name="other", position=[0.2, 0.0, 0.1])
    ball = dict(BALL, position=[0.0, 0.0, 0.1])
    scene = _scene(tmp_path, ground={"enabled": False}, objects=(ball, other))
    m = scene.bodies[0].mass
    ev = EventLog(t=[0.006], a=[0], b=[1], point=[[0.1, 0, 0.1]], normal=[[1.0, 0, 0]], impulse=[[m, 0, 0]],
                  vn=[1.0], pos_a=[[0.1 - R_BALL, 0, 0.1]], pos_b=[[0.1 + R_BALL, 0, 0.1]],
                  quat_a=[[1.0, 0, 0, 0]], quat_b=[[1.0, 0, 0, 0]], body_names=scene.body_names)
    res = render_scene(scene, events=ev)
    assert all(np.all(s == 0) for s in res.stems["ground"].values()) and np.all(res.mix == 0)
    assert res.info["ground"].startswith("none")


def test_a_poorly_fitting_floor_warns(tmp_path, caplog):
    scene = _scene(tmp_path, ground={"material": "suspended_wood_floor"})
    m = scene.bodies[0].mass
    with caplog.at_level(logging.WARNING, logger="impactsound"):
        res = render_scene(scene, events=_hits(scene, [(0, 0.004, (0.0, 0.0), 1.5 * m, 1.0)]))
    msgs = [r.getMessage() for r in caplog.records if r.name == "impactsound" and r.levelno == logging.WARNING]
    assert any("poor" in s and "suspended_wood_floor" in s for s in msgs), msgs
    assert res.info["ground"]["half_space_fit"].startswith("poor")
    assert np.abs(res.stems["ground"]["ball"]).max() > 0          # rendered all the same


def test_cli_lists_the_ground_source():
    out = CliRunner().invoke(cli, ["sources"])
    assert out.exit_code == 0, out.output
    line = [s for s in out.output.splitlines() if s.startswith("ground ")]
    assert line and "floor" in line[0]
    assert "kernel = K4" in out.output


def test_ground_with_no_poisson_ratio_names_the_scene_field(tmp_path):
    """A ground Poisson's ratio of 0 names the scene (file) and the field ground.material."""
    from impactsound.sources.ground.source import prepare
    scene = _scene(tmp_path, ground={"material": {"name": "x", "E": 1e9, "nu": 0.0, "rho": 1000.0}})
    with pytest.raises(InputError, match=r"<scene>: ground\.material: 'x' has Poisson's ratio nu = 0\.0"):
        prepare(scene)
