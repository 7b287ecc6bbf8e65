"""Granular sound in scenes (sources/granular/source.py, container.py, scene_events.py; scene/granular.py): the
container's Hertz grain hits against the thesis' numbers and damping theory, a small pour rendered end to end
(reproducible, every route of the event table: simulate, log, generate), bad [granular] tables, the CLI."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.signal import hilbert

from impactsound.errors import InputError
from impactsound.materials import get_material


def pour_toml(*, duration: float, count: int, seed: int = 0, restitution: float = 0.5) -> str:
    """A small pour scene file: grains through a funnel into a 3 cm cup (also used by test_granular_generator)."""
    return f"""
[scene]
duration = {duration}
seed = {seed}
sources = ["grain_noise", "container"]
[[listener]]
position = [0.0, -0.3, 0.1]
[[object]]
name = "cup"
shape = "mug"
size = {{ radius = 0.03, height = 0.06, thickness = 0.004 }}
material = "ceramic"
position = [0.0, 0.0, 0.025]
[granular]
count = {count}
container = "cup"
restitution = {restitution}
[granular.funnel]
position = [0.0, 0.0, 0.13]
hole_radius = 0.004
top_radius = 0.02
height = 0.02
"""


def _pour_scene(**granular):
    g = {"material": "glass_bead", "radius": 0.001, "count": 60, "container": "cup", "restitution": 0.5,
         "funnel": {"position": [0.0, 0.0, 0.13], "hole_radius": 0.004, "top_radius": 0.02, "height": 0.02}}
    g.update(granular)
    return {"scene": {"duration": 0.45, "seed": 2, "sources": ["grain_noise", "container"]},
            "source": {"container": {"transfer": "low_order", "modal_order": 1}},
            "listener": [{"name": "mic", "position": [0.0, -0.3, 0.1]}],
            "object": [{"name": "cup", "shape": "mug", "size": {"radius": 0.03, "height": 0.06, "thickness": 0.004},
                        "material": "ceramic", "position": [0.0, 0.0, 0.025]}],
            "granular": g}


def test_wall_hit_time_and_impulse():
    """Glass (a = 1 mm) on ceramic at 1 m/s: Hertz time 6.9 us (m_eff = m, r_eff = a: a heavy, locally flat
    wall); J = (1 + e) m v0."""
    from impactsound.sources.granular.container import wall_hit_parameters
    glass = get_material("glass_bead")
    tau, J = wall_hit_parameters(1e-3, 1.0, 0.5, glass, get_material("ceramic"))
    m = 4 / 3 * math.pi * 1e-9 * 2520
    assert float(tau) == pytest.approx(6.9e-6, abs=0.05e-6)
    assert float(J) == pytest.approx(1.5 * m * 1.0, rel=1e-12)
    # tau ~ v0^(-1/5): ten times faster, 10^(-1/5) times shorter
    tau10, _ = wall_hit_parameters(1e-3, 10.0, 0.5, glass, get_material("ceramic"))
    assert float(tau10) / float(tau) == pytest.approx(10 ** -0.2, rel=1e-12)


@pytest.fixture(scope="module")
def cup_model():
    from impactsound.fem.modal import modal_analysis
    from impactsound.scene import load_scene
    scene = load_scene(_pour_scene())
    body = scene.bodies[0]
    return body, modal_analysis(body.mesh, body.material, order=1)


def _one_hit(body, t=0.01, v0=1.0, point=(0.02, 0.0, 0.03), e=0.5):
    from impactsound.sources.granular.events import GranularEvents
    x = np.asarray(point, float) + np.r_[body.position[:2], 0.0]
    return GranularEvents.from_arrays(t=[t], point=[x], normal=[[0.0, 0.0, 1.0]], v0=[v0], kind=1, id_a=[0],
                                      id_b=[0], radius_a=[1e-3], e=[e], materials=("glass_bead",),
                                      containers=(body.name,))


def test_container_hit_is_linear_and_fill_damping_sets_the_decay(cup_model):
    """One grain hit: the sound doubles with the impulse ((1 + e) m v0, e from the event) and shifts with t0; with
    fill damping zeta added, the lowest mode's envelope decays at (xi + zeta) omega (damped-oscillator theory,
    measured on the band-passed signal)."""
    from impactsound.sources.granular.container import container_pressure
    body, model = cup_model
    glass = [get_material("glass_bead")]
    L = np.array([[0.0, -0.3, 0.1]])
    fs, n = 48000, 12000
    p1 = container_pressure(_one_hit(body, e=0.5), body, model, glass, L, fs, n)[0]
    assert np.abs(p1).max() > 0
    pe = container_pressure(_one_hit(body, e=1.0), body, model, glass, L, fs, n)[0]
    assert np.abs(pe).max() / np.abs(p1).max() == pytest.approx(2.0 / 1.5, rel=2e-3)   # tau is the same
    ps = container_pressure(_one_hit(body, t=0.01 + 100 / fs), body, model, glass, L, fs, n)[0]
    assert np.allclose(ps[100:], p1[:-100], rtol=0, atol=1e-9 * np.abs(p1).max())
    # the lowest mode alone: a damped sinusoid whose envelope decays at xi omega
    import dataclasses
    one = dataclasses.replace(model, frequencies_hz=model.frequencies_hz[:1], shapes=model.shapes[:1],
                              xi=model.xi[:1])
    zeta = 0.01
    f0, xi0 = float(model.frequencies_hz[0]), float(model.xi[0])
    t = np.arange(n) / fs
    for z in (0.0, zeta):
        sig = container_pressure(_one_hit(body), body, one, glass, L, fs, n, fill_damping=z)[0]
        env = np.abs(hilbert(sig))
        win = (t > 0.012) & (env > 1e-2 * env.max())           # clear of the hit and of the FFT floor
        slope = np.polyfit(t[win], np.log(env[win]), 1)[0]
        assert win.sum() > 200 and -slope == pytest.approx((xi0 + z) * 2 * math.pi * f0, rel=0.02)


def test_small_pour_renders_reproducibly_by_every_route(tmp_path):
    """60 grains through a funnel into a cup: both stems sound, the sidecar says what each got, the samples do not
    depend on the cache (rendered again with the simulation cached), and the same table given as a log renders
    the same samples; a generator model fitted to it renders too."""
    import os

    import impactsound as isnd
    from impactsound.sources.granular.events import GRAIN, save_events
    from impactsound.sources.granular.generator import fit_model, save_model
    r1 = isnd.render_scene(_pour_scene())
    stems = r1.stems
    assert set(stems) == {"grain_noise", "container"}
    assert np.abs(stems["grain_noise"]["grains"]).max() > 0 and np.abs(stems["container"]["cup"]).max() > 0
    info = r1.info
    assert info["granular"]["origin"] == "simulate" and info["granular"]["grain_collisions"] > 0
    assert info["objects"]["cup"]["container"]["grain_hits"] > 0
    assert "funnel" in info["granular_silent_walls"]
    cached = [f for f in os.listdir(os.environ["IMPACTSOUND_CACHE"]) if f.startswith("granular-sim-")]
    assert cached
    r2 = isnd.render_scene(_pour_scene())
    assert np.array_equal(r1.mix, r2.mix)
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    ev = granular_events(load_scene(_pour_scene()))
    save_events(tmp_path / "pour.npz", ev)
    scene = _pour_scene(events="log", log="pour.npz")
    del scene["granular"]["funnel"]
    r3 = isnd.render_scene(isnd.load_scene(scene, base=tmp_path))
    assert np.array_equal(r1.mix, r3.mix)
    save_model(tmp_path / "m.h5", fit_model(ev, window=0.05, cell=0.01))
    scene = _pour_scene(events="generate", model="m.h5")
    del scene["granular"]["funnel"]
    r4 = isnd.render_scene(isnd.load_scene(scene, base=tmp_path))
    assert r4.info["granular"]["origin"] == "generate" and np.abs(r4.mix).max() > 0
    n_gen = r4.info["granular"]["grain_collisions"]
    n_sim = int((ev.kind == GRAIN).sum())
    assert abs(n_gen - n_sim) < 6 * math.sqrt(n_sim) + 5          # Poisson counts around the fitted ones


def test_partly_full_cup_takes_softer_hits_and_rings_less():
    """Grains already in the cup (settled layers) take the pour's hits: the energy of the hits on the cup (sum of
    v0^2 over its hits, for one grain size) drops; with the same events, fill damping lowers the cup's stem."""
    import impactsound as isnd
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events

    def hits(scene):
        ev = granular_events(load_scene(scene))
        cup = (ev.kind == 1) & (ev.id_b == ev.containers.index("cup"))
        return float((ev.v0[cup] ** 2).sum())

    assert hits(_pour_scene(fill=1200)) < 0.5 * hits(_pour_scene())
    rms = [np.sqrt(np.mean(isnd.render_scene(_pour_scene(fill=1200, fill_damping=z)).stems["container"]["cup"] ** 2))
           for z in (0.0, 0.02)]
    assert rms[1] < 0.8 * rms[0]


def test_settled_layers_do_not_overlap_and_stay_inside():
    from scipy.spatial import cKDTree

    from impactsound.sources.granular.scene_events import settled_layers
    cup = {"axis": np.array([0.01, -0.02]), "inner_radius": 0.026, "floor_z": 0.004, "rim_z": 0.06}
    p, r = settled_layers(2000, 0.001, cup)
    d, _ = cKDTree(p).query(p, k=2)
    assert d[:, 1].min() >= 2e-3 and (p[:, 2] - r >= cup["floor_z"]).all()
    assert (np.hypot(p[:, 0] - 0.01, p[:, 1] + 0.02) + r <= cup["inner_radius"]).all()
    with pytest.raises(InputError, match="do not fit"):
        settled_layers(10**6, 0.001, cup)


@pytest.mark.parametrize("change,match", [
    ({"radius": -0.001}, "radius"), ({"restitution": 1.5}, "restitution"), ({"container": "mug"}, "not an object"),
    ({"events": "log"}, "needs log"), ({"events": "generate"}, "needs model"), ({"fill_damping": 1.2}, "fill_damping"),
    ({"funnel": {"position": [0, 0, 0.13], "hole_radius": 0.0015, "top_radius": 0.02, "height": 0.02}}, "hole_radius"),
    ({"stream": {"position": [0, 0, 0.13], "rate": 100.0, "radius": 0.004}}, "not both"),
])
def test_bad_granular_tables_are_refused(change, match):
    from impactsound.scene import load_scene
    with pytest.raises(InputError, match=match):
        load_scene(_pour_scene(**change))


def test_granular_sources_need_a_granular_table():
    from impactsound.scene import load_scene
    s = _pour_scene()
    del s["granular"]
    with pytest.raises(InputError, match=r"\[granular\]"):
        load_scene(s)


def test_any_solid_is_a_container_for_the_simulated_grains():
    """A box as the container (not a built-in mug): the grains fall on it as static spheres, its hits are its
    own, and its modes sound; fill is refused for it (settled layers need a mug)."""
    import impactsound as isnd
    s = _pour_scene(count=30)
    s["scene"]["duration"] = 0.25
    s["object"][0] = {"name": "cup", "shape": "box", "size": {"size": [0.06, 0.06, 0.02]}, "material": "ceramic",
                      "position": [0.0, 0.0, 0.01]}
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    sc = load_scene(s)
    ev = granular_events(sc)
    res = isnd.render_scene(sc)
    hits = (ev.kind == 1) & (ev.id_b == ev.containers.index("cup"))
    assert len(np.unique(ev.id_a[hits])) >= 20                # the grains out of the funnel land on the box ...
    top = ev.point[hits][:, 2] > 0.02 - 1e-3
    # ... on its top face: a contact point lies on a sphere, within the spheres' dip below the face, s^2 / (4 R) =
    # 0.06 mm for 1 mm grains (sources/granular/obstacles.py; measured 0.034 mm)
    assert top.mean() > 0.8 and np.abs(ev.point[hits][top, 2] - 0.02).max() < 0.1e-3
    if "floor" in ev.containers:                              # and none falls through it to the floor
        fl = (ev.kind == 1) & (ev.id_b == ev.containers.index("floor"))
        assert (np.abs(ev.point[fl][:, :2]).max(axis=1) > 0.03).all()
    assert np.abs(res.stems["container"]["cup"]).max() > 0
    s["granular"]["fill"] = 10
    with pytest.raises(InputError, match="built-in mug"):
        isnd.render_scene(s)


def test_default_sources_with_a_granular_table():
    from impactsound.scene import load_scene
    s = _pour_scene()
    del s["scene"]["sources"]
    del s["source"]
    assert load_scene(s).sources == ("modal", "acceleration_noise", "ground", "grain_noise", "container")


def test_cli_simulate_fit_generate(tmp_path):
    from click.testing import CliRunner

    from impactsound.cli import cli
    from impactsound.sources.granular.events import load_events
    scene = tmp_path / "pour.toml"
    scene.write_text(pour_toml(duration=0.3, count=40))
    run = CliRunner().invoke
    res = run(cli, ["-q", "granular", "simulate", str(scene), "--out", str(tmp_path / "ev.npz")])
    assert res.exit_code == 0, res.output
    ev = load_events(tmp_path / "ev.npz")
    assert len(ev) > 0 and ev.origin == "simulate"
    res = run(cli, ["-q", "granular", "fit", str(tmp_path / "ev.npz"), "--out", str(tmp_path / "m.h5")])
    assert res.exit_code == 0, res.output
    res = run(cli, ["-q", "granular", "generate", str(tmp_path / "m.h5"), "--duration", "0.6", "--seed", "3",
                    "--out", str(tmp_path / "g.csv")])
    assert res.exit_code == 0, res.output
    g = load_events(tmp_path / "g.csv")
    assert g.duration == pytest.approx(0.6) and len(g) > len(ev)
    from impactsound.cli import main
    assert main(["-q", "granular", "generate", str(tmp_path / "m.h5"), "--out", str(tmp_path / "g.txt")]) == 2


@pytest.fixture(scope="module")
def pour_table():
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    return granular_events(load_scene(_pour_scene()))


def _log_scene(tmp_path, ev, name="pour.csv", **scene):
    from impactsound.scene import load_scene
    from impactsound.sources.granular.events import save_events
    save_events(tmp_path / name, ev)
    d = _pour_scene(events="log", log=name)
    del d["granular"]["funnel"]
    d["scene"].update(scene)
    return load_scene(d, base=tmp_path)


@pytest.mark.parametrize("column, factor, match", [
    ("t", 1000.0, r"row \d+, column time = .* past the scene's duration .*milliseconds"),
    ("radius_a", 1000.0, r"row \d+, column radius_a = .* too large to fit the container 'cup'.*millimetres"),
    ("v0", 1000.0, r"row \d+, column v0 = .* m/s is faster than .*mm/s"),
    ("point", 1000.0, r"row \d+, column\(s\) px, py, pz = .*millimetres"),
])
def test_granular_log_in_other_units_is_refused(tmp_path, pour_table, column, factor, match):
    """A granular table in ms, mm or mm/s used to render silence (or hang) with exit 0: each is refused naming the
    file, the row and the column, with the fix; --allow-implausible renders it anyway with a warning."""
    import dataclasses

    import impactsound as isnd
    from impactsound.dynamics.plausibility import ImplausibleEventWarning
    from impactsound.sources.granular.scene_events import granular_events
    ev = dataclasses.replace(pour_table, **{column: getattr(pour_table, column) * factor})
    scene = _log_scene(tmp_path, ev)
    with pytest.raises(InputError, match=match) as err:
        granular_events(scene)
    assert "pour.csv" in str(err.value) and "--allow-implausible" in str(err.value)
    if column == "t":                      # rendered anyway, with the warnings (a grain-noise-only render)
        scene = _log_scene(tmp_path, ev)
        scene.sources = ["grain_noise"]
        with pytest.warns(ImplausibleEventWarning, match="milliseconds"):
            r = isnd.render_scene(scene, allow_implausible=True)
        assert r.info["granular"]["grain_collisions"] == 0


def test_granular_log_longer_than_the_scene_is_cut_with_a_warning(tmp_path, pour_table):
    from impactsound.sources.granular.plausibility import GranularLogWarning
    from impactsound.sources.granular.scene_events import granular_events
    scene = _log_scene(tmp_path, pour_table, name="pour.npz", duration=0.4)
    late = int((pour_table.t >= 0.4).sum())
    assert 0 < late < len(pour_table) // 2
    with pytest.warns(GranularLogWarning, match=rf"{late} of the {len(pour_table)} rows .* left out"):
        ev = granular_events(scene)
    assert len(ev) == len(pour_table) - late


@pytest.mark.parametrize("change, match", [
    ({"radius": 1.0, "stream": {"position": [0, 0, 0.13], "radius": 0.004, "rate": 100}},
     r"granular\.radius = 1 m: .* cannot fit the container's inside .*metres"),
    ({"radius": 0.001, "stream": {"position": [0, 0, 0.13], "radius": 0.004, "rate": 1e5}},
     r"granular\.stream: .* \(granular\.stream\.rate, granular\.stream\.radius"),
    ({"count": 3000}, r"<scene dict>: granular\.count = 3000: only \d+ of 3000 grains fit .*granular\.funnel"),
])
def test_grains_that_cannot_fit_are_refused_with_the_scene_field(change, match):
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    d = _pour_scene(**change)
    if "stream" in change:
        del d["granular"]["funnel"]
    with pytest.raises(InputError, match=match):
        granular_events(load_scene(d))


def test_grains_hit_a_static_object_and_it_sounds():
    """A static block under the funnel, the mug beside it: the grains land on the block (every static object is
    an obstacle by default), its hits carry its name and its modes sound in the container stem; listing no
    obstacles (obstacles = []) lets the grains fall through it to the floor."""
    import impactsound as isnd
    from impactsound.scene import load_scene
    from impactsound.sources.granular.scene_events import granular_events
    s = _pour_scene(count=30)
    s["scene"]["duration"] = 0.25
    s["object"][0]["position"] = [0.08, 0.0, 0.025]                  # the mug off to the side
    s["object"].append({"name": "block", "shape": "box", "size": {"size": [0.05, 0.05, 0.03]},
                        "material": "wood_hard", "position": [0.0, 0.0, 0.015], "static": True})
    sc = load_scene(s)
    ev = granular_events(sc)
    assert "block" in ev.containers
    hits = (ev.kind == 1) & (ev.id_b == ev.containers.index("block"))
    assert len(np.unique(ev.id_a[hits])) >= 20
    # on its top face (z = 0.03): away from its edges (rounded by the spheres' 4 mm) within the dip, 0.06 mm
    pts = ev.point[hits]
    inner = np.abs(pts[:, :2]).max(axis=1) < 0.025 - 0.005
    assert inner.mean() > 0.5 and np.abs(pts[inner, 2] - 0.03).max() < 0.1e-3
    assert np.abs(pts[:, 2] - 0.03).max() < 5e-3                    # and nowhere below the rounded edge
    res = isnd.render_scene(sc)
    assert np.abs(res.stems["container"]["block"]).max() > 0
    s["granular"]["obstacles"] = []
    ev2 = granular_events(load_scene(s))
    assert "block" not in ev2.containers
    s["granular"]["obstacles"] = ["cup"]
    with pytest.raises(InputError, match="container already"):
        load_scene(s)


@pytest.mark.slow              # ~15-25 s: the cup's modes and the floor's response bank
def test_grains_that_miss_the_cup_sound_on_the_floor():
    """A funnel beside the cup: the grains land on the floor, which sounds (its elastic half-space struck by each
    grain, the container source's "floor" stem) instead of being named a silent wall; the sidecar counts its
    hits as the event table does."""
    import impactsound as isnd
    from impactsound.scene import load_scene
    from impactsound.sources.granular.container import container_hits
    from impactsound.sources.granular.scene_events import granular_events
    d = _pour_scene(count=20, funnel={"position": [0.12, 0.0, 0.1], "hole_radius": 0.004, "top_radius": 0.02,
                                      "height": 0.02})
    d["scene"].update(duration=0.3, sources=["container"])
    r = isnd.render_scene(d)
    floor = r.stems["container"]["floor"]
    assert np.abs(floor).max() > 0
    assert "floor" not in r.info.get("granular_silent_walls", {})
    hits = len(container_hits(granular_events(load_scene(d)), "floor"))
    assert hits >= 20 and r.info["objects"]["floor"]["container"]["grain_hits"] == hits
