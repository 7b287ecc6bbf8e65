"""The debris demo scene generator (impactsound.scene.debris): files, fragment geometry, release state, and one
small render."""
import math

import numpy as np
import pytest
import trimesh

from impactsound.errors import InputError
from impactsound.rotation import quat_to_matrix
from impactsound.scene import load_scene
from impactsound.scene.debris import debris_scene

G = 9.81


def _half_extents(mesh):
    """Principal half-extents (descending) from the eigenvectors of the uniform-density inertia tensor."""
    _, vecs = np.linalg.eigh(np.asarray(mesh.moment_inertia, np.float64))
    proj = (np.asarray(mesh.vertices) - mesh.center_mass) @ vecs
    return np.sort(np.ptp(proj, axis=0) / 2)[::-1]


@pytest.fixture(scope="module")
def scene40(tmp_path_factory):
    out = tmp_path_factory.mktemp("debris40")
    path = debris_scene(out, n_fragments=40, seed=3)
    return out, path, load_scene(path)


def test_same_seed_gives_identical_files_and_another_seed_differs(tmp_path):
    paths = [debris_scene(tmp_path / d, n_fragments=12, seed=s) for d, s in (("a", 5), ("b", 5), ("c", 6))]
    files = sorted(p.name for p in paths[0].parent.iterdir())
    assert files == sorted(p.name for p in paths[1].parent.iterdir())
    assert len(files) == 13                                    # 12 fragments + the TOML
    for name in files:
        assert (paths[0].parent / name).read_bytes() == (paths[1].parent / name).read_bytes(), name
    assert paths[0].read_bytes() != paths[2].read_bytes()


def test_fragments_are_closed_convex_solids_within_the_stated_sizes(scene40):
    out, _, scene = scene40
    objs = sorted(out.glob("frag_*.obj"))
    assert len(objs) == 40
    for f in objs:
        m = trimesh.load(f, process=False, force="mesh")
        assert m.is_watertight and m.is_winding_consistent, f.name
        assert m.volume > 0, f.name                             # outward winding
        # convex: every vertex on or behind every face's plane, so the solid is its own hull
        n = m.face_normals
        side = np.einsum("fc,fvc->fv", n, m.vertices[None, :, :] - m.triangles[:, :1, :])
        assert side.max() < 1e-9, f.name
        assert m.volume == pytest.approx(m.convex_hull.volume, rel=1e-9)
        half = _half_extents(m)
        assert 0.01 - 1e-9 <= half[0] <= 0.04 + 1e-9, (f.name, half)
        assert half[2] / half[0] >= 0.25 - 1e-9, (f.name, half)   # no slivers or flakes
    # sizes spread over the range (log-uniform): both ends of 1-4 cm are represented
    sizes = np.array([_half_extents(b.mesh)[0] for b in scene.bodies])
    assert sizes.min() < 0.017 and sizes.max() > 0.025


def test_release_has_no_overlaps_and_stays_within_the_drop_heights(scene40):
    _, _, scene = scene40
    centres, radii, lowest = [], [], []
    for b in scene.bodies:
        R = quat_to_matrix(b.quaternion)[0]
        world = b.mesh.vertices @ R.T + b.position
        centres.append(b.position)
        radii.append(np.linalg.norm(b.mesh.vertices, axis=1).max())   # body frame: origin at the centre of mass
        lowest.append(world[:, 2].min())
        assert b.position[2] <= 0.5 + 1e-6
    assert min(lowest) >= 0.1 - 1e-6                         # every fragment starts clear of the floor
    c, r = np.array(centres), np.array(radii)
    d = np.linalg.norm(c[:, None] - c[None], axis=-1)
    gap = d - (r[:, None] + r[None])
    np.fill_diagonal(gap, np.inf)
    assert gap.min() > 0                                     # bounding spheres apart: the solids cannot touch
    # small random velocities: a shower, not a throw
    v = np.array([b.velocity for b in scene.bodies])
    assert np.abs(v).max() < 1.0 and (v[:, 2] <= 0).all()
    assert np.abs(v[:, :2]).std() > 0.01


def test_scene_file_loads_with_its_meshes_materials_and_listener(scene40, tmp_path):
    out, path, scene = scene40
    assert path == out / "debris.toml"
    assert [b.name for b in scene.bodies] == [f"frag_{k:03d}" for k in range(40)]
    for b in scene.bodies:
        assert (out / f"{b.name}.obj").is_file() and b.source == str((out / f"{b.name}.obj").resolve())
        assert b.material.name == "glass"
        # mass from the material density: a glass fragment of 1-4 cm weighs between ~0.1 g and ~0.7 kg
        assert 1e-4 < b.mass < 0.7
    assert scene.ground.enabled and scene.ground.material.name == "concrete"
    # never the per-object PAN precompute (far too slow for hundreds of fragments): acceleration noise only from
    # the proxy soundbank
    import tomllib
    raw = tomllib.loads(path.read_text())["scene"]
    assert "acceleration_noise" not in scene.sources or raw.get("acceleration_noise") == "proxy"
    pile = np.array([b.position for b in scene.bodies]).mean(axis=0) * [1, 1, 0]
    assert 0.5 <= np.linalg.norm(scene.listeners[0].position - pile) <= 1.0
    stone = load_scene(debris_scene(tmp_path, n_fragments=3, material="stone", seed=1))
    assert {b.material.name for b in stone.bodies} == {"granite"}


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(InputError, match="material"):
        debris_scene(tmp_path, n_fragments=2, material="unobtainium")
    with pytest.raises(InputError, match="n_fragments"):
        debris_scene(tmp_path, n_fragments=0)
    with pytest.raises(InputError, match="no room|could not place"):
        debris_scene(tmp_path, n_fragments=2, drop_height=(0.1, 0.11))


def test_small_render_is_silent_until_the_first_landing_then_finite_and_audible(tmp_path):
    from impactsound.dynamics.events import GROUND
    from impactsound.pipeline import render_scene
    h = (0.02, 0.08)
    # the floor's sound only: the fragments ring only near 20 kHz (next test) and acceleration noise per fragment
    # would be a full PAN precompute each. The listener 1 m up over the fragments keeps the ground source's
    # response bank to a few nodes (one per 3 cm of horizontal offset)
    path = debris_scene(tmp_path, n_fragments=4, seed=2, duration=0.3, drop_height=h, listener=(0.0, 0.0, 1.0),
                        sources=("ground",))
    scene = load_scene(path)
    res = render_scene(scene)
    p = res.mix[0]
    assert np.isfinite(p).all()
    assert len(res.events) > 0
    peak = np.abs(p).max()
    # audible but sane: far above the threshold of hearing (20 uPa), below 150 dB SPL
    assert 1e-3 < peak < 630
    # nothing sounds before the first fragment can reach the floor (its bounding sphere falling from rest height
    # with its initial downward speed) and that sound has come down to the listener; the floor's force kernel
    # starts 256 samples early (its precursor)
    def landing(b):
        v, clearance = max(-b.velocity[2], 0.0), b.position[2] - np.linalg.norm(b.mesh.vertices, axis=1).max()
        return (math.sqrt(v ** 2 + 2 * G * clearance) - v) / G
    t_land = min(landing(b) for b in scene.bodies)
    t_hear = t_land + scene.listeners[0].position[2] / 343.2
    n0 = int(t_hear * scene.sample_rate) - 256 - 10
    assert n0 > 0 and not np.any(p[:n0])
    # every fragment, released at most 8 cm up, has reached the floor within the 0.3 s
    ev = res.events
    on_floor = set(ev.b[ev.a == GROUND].tolist()) | set(ev.a[ev.b == GROUND].tolist())
    assert on_floor == set(range(len(scene.bodies)))


def test_glass_fragments_ring_only_at_the_top_of_hearing(tmp_path):
    """Why the scene leaves the modal source out: a compact glass chunk whose longest half-extent is at most 4 cm
    and whose thinnest extent is at least a quarter of its longest has its first mode near the top of hearing
    (free-free bending of an 8 x 2 x 2 cm glass bar: f1 = 22.4 / (2 pi L^2) sqrt(E I / (rho A)) ~ 16 kHz; a
    chunk that tapers to its ends is stiffer). The flattest of a dozen large fragments is the worst case."""
    from impactsound.fem.modal import modal_analysis
    scene = load_scene(debris_scene(tmp_path, n_fragments=12, seed=4, size_range=(0.035, 0.04)))
    flattest = min(scene.bodies, key=lambda b: _half_extents(b.mesh)[2] / _half_extents(b.mesh)[0])
    model = modal_analysis(flattest.mesh, flattest.material, order=2, max_modes=5, f_max=20000.0)
    assert model.n_modes <= 2
    assert np.all(np.asarray(model.frequencies_hz) > 14000.0)


def test_demo_command_renders_the_debris_scene_with_proxy_acceleration_noise(tmp_path, monkeypatch):
    """`impactsound demo --scene debris` writes the generated scene, renders it and names every fragment's
    acceleration-noise model in the sidecar: the proxy soundbank's for all (a few small fragments here)."""
    import functools
    import json

    import impactsound.scene.debris as deb
    from impactsound.cli import main
    monkeypatch.setattr(deb, "debris_scene", functools.partial(deb.debris_scene, n_fragments=3, duration=0.6))
    assert main(["-q", "demo", "--scene", "debris", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "debris.png").is_file() and (tmp_path / "debris_scene" / "debris.toml").is_file()
    side = json.loads((tmp_path / "debris.wav.json").read_text())
    assert side["peak_pa"] > 0 and {o["acceleration_noise"] for o in side["objects"].values()} == {"proxy"}
    assert all(o["preset"] == "tiny" for o in side["objects"].values())
