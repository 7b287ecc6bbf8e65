"""Static props and bodies held by joints: scene keys, dynamics, effective masses, clamped modes.

References: the Euler-Bernoulli cantilever (beta_1 L = 1.8751, beta_2 L = 4.6941; e.g. Blevins, "Formulas for
natural frequency and mode shape", table 8-1); the small-amplitude compound pendulum, T = 2 pi sqrt(I_p / (m g d));
the effective mass of a body pivoting about a point, 1/m = |r x n|^2 / I_p (rigid-body impact theory, Stronge
2000, ch. 2).
"""
import numpy as np
import pytest
import trimesh

from impactsound.contact.stage import body_inverse_mass
from impactsound.dynamics import run_dynamics, simulate
from impactsound.errors import InputError
from impactsound.fem.modal import modal_analysis
from impactsound.materials import get_material
from impactsound.scene import load_scene

STEEL = get_material("steel")


def _scene(objects, **scene):
    return load_scene({"scene": {"duration": 0.5, **scene}, "object": objects,
                       "listener": [{"position": [0.0, -1.0, 1.0]}]})


TABLE = {"name": "table", "shape": "box", "size": {"size": [0.4, 0.3, 0.03]}, "material": "wood_hard",
         "position": [0.0, 0.0, 0.4], "static": True}
BALL = {"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel", "position": [0.05, 0, 0.6]}


def test_ball_bounces_on_a_static_table_that_never_moves():
    sc = _scene([TABLE, BALL])
    res = run_dynamics(sc.bodies, sc.ground, 0.4, sc.timestep, record_every=10)
    ev = res.events
    assert len(ev) >= 1
    # the first impact is against the table top (z = 0.415), from a 0.185 m fall
    assert set(ev.a[:1]) | set(ev.b[:1]) == {0, 1}
    assert abs(ev.point[0, 2] - 0.415) < 2e-3
    assert abs(ev.t[0] - np.sqrt(2 * (0.6 - 0.01 - 0.415) / 9.81)) < 3e-3
    assert abs(ev.vn[0] - np.sqrt(2 * 9.81 * (0.6 - 0.01 - 0.415))) < 0.05
    assert np.allclose(res.trajectory_position[:, 0], [0, 0, 0.4]) and np.allclose(res.position[0], [0, 0, 0.4])
    assert np.allclose(res.velocity[0], 0) and np.allclose(res.angular_velocity[0], 0)


def test_hinged_rod_swings_with_the_compound_pendulum_period():
    # a 20 cm steel rod hung from its top end on a hinge about y, released 5 degrees off vertical
    L, a = 0.2, np.radians(5.0)
    top = np.array([0.0, 0.0, 0.5])
    com = top + 0.5 * L * np.array([np.sin(a), 0.0, -np.cos(a)])
    q = [np.cos(a / 2), 0.0, -np.sin(a / 2), 0.0]           # body z axis along (-sin a, 0, cos a)
    sc = _scene([{"name": "rod", "shape": "box", "size": {"size": [0.01, 0.01, L]}, "material": "steel",
                  "position": list(com), "rotation": q, "joint": "hinge", "anchor": list(top),
                  "axis": [0, 1, 0]}], duration=2.0)
    res = run_dynamics(sc.bodies, None, 2.0, 2e-4, record_every=5)
    x = res.trajectory_position[:, 0, 0]
    t = res.trajectory_t
    # the anchor stays put: |COM - anchor| is constant
    d = np.linalg.norm(res.trajectory_position[:, 0] - top, axis=1)
    assert np.ptp(d) < 1e-5
    # period from the zero crossings of x (two per period)
    zc = t[1:][np.diff(np.sign(x)) != 0]
    T = 2 * np.mean(np.diff(zc))
    b = sc.bodies[0]
    I_p = b.inertia[1, 1] + b.mass * (L / 2) ** 2
    T_ref = 2 * np.pi * np.sqrt(I_p / (b.mass * 9.81 * L / 2))
    assert abs(T / T_ref - 1) < 2e-3          # finite amplitude (5 deg) lengthens T by 0.05 %


def test_effective_mass_of_held_bodies():
    # a rod pivoting about its end (ball joint): at its far tip, across the rod, 1/m = L^2 / I_end = 3 / M
    L = 0.3
    sc = _scene([{"name": "rod", "shape": "box", "size": {"size": [L, 0.004, 0.004]}, "material": "steel",
                  "position": [0.0, 0.0, 0.5], "joint": "ball", "anchor": [-L / 2, 0.0, 0.5]},
                 {**TABLE, "position": [0.0, 0.0, 0.2]}])
    rod, table = sc.bodies
    tip, n = np.array([[L / 2, 0.0, 0.0]]), np.array([[0.0, 0.0, 1.0]])
    I_end = rod.inertia[2, 2] + rod.mass * (L / 2) ** 2
    assert body_inverse_mass(rod, tip, n)[0] == pytest.approx(L**2 / I_end, rel=1e-9)
    assert body_inverse_mass(rod, tip, n)[0] == pytest.approx(3 / rod.mass, rel=2e-3)   # thin rod
    # along the rod, through the pivot: it cannot move at all
    assert body_inverse_mass(rod, tip, np.array([[1.0, 0, 0]]))[0] == pytest.approx(0.0, abs=1e-9)
    assert body_inverse_mass(table, tip, n)[0] == 0.0
    # a hinge about y: a push along z at the tip turns it; the same push with the hinge about x does nothing
    sc2 = _scene([{"name": "rod", "shape": "box", "size": {"size": [L, 0.004, 0.004]}, "material": "steel",
                   "position": [0.0, 0.0, 0.5], "joint": "hinge", "anchor": [-L / 2, 0.0, 0.5], "axis": [1, 0, 0]}])
    assert body_inverse_mass(sc2.bodies[0], tip, n)[0] == pytest.approx(0.0, abs=1e-12)


def test_clamped_centre_beam_modes_are_two_cantilevers():
    # a free beam of length 2L clamped at its centre: each half is a cantilever of length L. The clamp holds
    # the nodes within the half-diagonal of the section, so each half is at most r shorter: f1 / f_ref lies in
    # [1, (L / (L - r))^2], and the error falls with the section (h / L) as the clamp zone shrinks.
    L = 0.1
    err = []
    for h in (0.004, 0.002):
        r = 1.01 * h / np.sqrt(2)
        m = modal_analysis(trimesh.creation.box(extents=[2 * L, h, h]), STEEL, max_modes=8, f_max=8000,
                           clamp=(np.zeros(3), r))
        f_ref = 1.8751**2 / (2 * np.pi * L**2) * np.sqrt(STEEL.E * h**2 / (12 * STEEL.rho))
        f = m.frequencies_hz
        assert m.meta["clamp"]["nodes"] >= 3
        # four first modes: two halves x two bending planes
        assert np.all(f[:4] / f_ref >= 0.999) and np.all(f[:4] / f_ref <= (L / (L - r)) ** 2)
        # the second cantilever mode: (4.6941 / 1.8751)^2 = 6.267 times the first
        assert f[4] / f[0] == pytest.approx((4.6941 / 1.8751) ** 2, rel=0.01)
        err.append(f[0] / f_ref - 1)
    assert err[1] < 0.65 * err[0]
    # the same beam free: its first bending mode is a free-free beam of length 2L (beta L = 4.730), far higher
    free = modal_analysis(trimesh.creation.box(extents=[2 * L, 0.004, 0.004]), STEEL, max_modes=4, f_max=8000)
    f_ff = 4.7300**2 / (2 * np.pi * (2 * L) ** 2) * np.sqrt(STEEL.E * 0.004**2 / (12 * STEEL.rho))
    assert free.frequencies_hz[0] / f_ff == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("obj, match", [
    ({**BALL, "static": True, "joint": "fixed", "anchor": [0.05, 0, 0.6]}, "not both"),
    ({**BALL, "joint": "hinge", "anchor": [0.05, 0, 0.6]}, "needs axis"),
    ({**BALL, "joint": "fixed"}, "needs anchor"),
    ({**BALL, "joint": "ball", "anchor": [0.05, 0, 0.9]}, r"anchor = \[0.05, 0.*outside the object"),
    ({**BALL, "joint": "weld", "anchor": [0.05, 0, 0.6]}, "unknown"),
    ({**TABLE, "velocity": [0, 0, 1.0]}, "static object cannot move"),
    ({**BALL, "anchor": [0.05, 0, 0.6]}, "no joint"),
    ({**BALL, "joint": "hinge", "anchor": [0.05, 0, 0.6], "axis": [0, 0, 1], "angular_velocity": [1, 0, 0]},
     "along axis"),
])
def test_bad_mounts_are_refused_naming_the_field(obj, match):
    with pytest.raises(InputError, match=match) as e:
        _scene([obj])
    assert "object[0]" in str(e.value)


def test_body_starting_inside_a_static_prop_is_refused():
    sc = _scene([TABLE, {**BALL, "position": [0.0, 0.0, 0.41]}])
    with pytest.raises(InputError, match="overlap"):
        simulate(sc.bodies, sc.ground, 0.1, sc.timestep)


def test_prefractured_plate_flies_as_one_and_breaks_at_its_first_hard_impact(tmp_path):
    from impactsound.scene.fracture import fractured_plate_scene, voronoi_pieces
    toml = fractured_plate_scene(tmp_path, pieces=4, seed=3)
    sc = load_scene(toml)
    res = run_dynamics(sc.bodies, sc.ground, 0.6, sc.timestep, record_every=10)
    t, P = res.trajectory_t, res.trajectory_position
    first = res.events.t.min()
    d = np.linalg.norm(P[:, :, None] - P[:, None, :], axis=-1)            # piece-to-piece distances
    before, after = t < first - 1e-3, t > first + 0.1
    assert np.ptp(d[before], axis=0).max() < 1e-5                         # welded: rigid in flight
    assert np.abs(d[after] - d[0]).max() > 5e-3                            # apart after the impact
    # free fall of the whole plate (no spin) until its lowest point meets the floor
    from impactsound.rotation import quat_to_matrix
    z_low = min(float((b.mesh.vertices @ quat_to_matrix(b.quaternion)[0].T + b.position)[:, 2].min())
                for b in sc.bodies)
    assert first == pytest.approx(np.sqrt(2 * z_low / 9.81), abs=3e-3)
    # a break speed never reached: the pieces stay welded through the impact
    for b in sc.bodies:
        b.break_speed = 100.0
    res2 = run_dynamics(sc.bodies, sc.ground, 0.6, sc.timestep, record_every=10)
    d2 = np.linalg.norm(res2.trajectory_position[:, :, None] - res2.trajectory_position[:, None, :], axis=-1)
    assert np.ptp(d2, axis=0).max() < 2e-4
    # the pieces tile the plate: their volumes add up to the plate's, less the gaps
    import trimesh
    plate = trimesh.creation.cylinder(radius=0.1, height=0.006, sections=48)
    vol = sum(p.volume for p in voronoi_pieces(plate, 4, seed=3, gap=0.0))
    assert vol == pytest.approx(plate.volume, rel=1e-6)


def test_fracture_group_errors():
    with pytest.raises(InputError, match="one piece"):
        _scene([{**BALL, "fracture_group": "p"}])
    with pytest.raises(InputError, match="needs fracture_group"):
        _scene([{**BALL, "break_speed": 2.0}])


def test_key_hangs_on_its_ring():
    """A ball joint between two objects (a key on its ring): both fly free, the shared anchor stays shared through
    flight and landing, and the two never collide with each other."""
    from impactsound.rotation import quat_to_matrix
    ring = {"name": "ring", "shape": "cylinder", "size": {"radius": 0.015, "height": 0.003}, "material": "steel",
            "position": [0.0, 0.0, 0.5], "velocity": [0.3, 0.0, 0.0], "angular_velocity": [0.0, 0.0, 4.0]}
    key = {"name": "key", "shape": "box", "size": {"size": [0.055, 0.022, 0.0025]}, "material": "brass",
           "position": [0.04, 0.0, 0.5], "joint": "ball", "parent": "ring", "anchor": [0.0135, 0.0, 0.5],
           "velocity": [0.3, 0.0, 0.0]}
    sc = _scene([ring, key])
    assert sc.bodies[1].mount.parent == 0
    res = run_dynamics(sc.bodies, sc.ground, 0.8, sc.timestep, record_every=10)
    a = np.array([0.0135, 0.0, 0.5])
    ends = []
    for i in range(2):
        b = sc.bodies[i]
        a_b = quat_to_matrix(b.quaternion)[0].T @ (a - b.position)
        ends.append(np.einsum("kij,j->ki", quat_to_matrix(res.trajectory_quaternion[:, i]), a_b)
                    + res.trajectory_position[:, i])
    assert np.linalg.norm(ends[0] - ends[1], axis=1).max() < 1e-4
    ev = res.events
    assert len(ev) and not (((ev.a == 0) & (ev.b == 1)) | ((ev.a == 1) & (ev.b == 0))).any()
    with pytest.raises(InputError, match="needs joint = 'ball'"):
        _scene([ring, {**key, "joint": "hinge", "axis": [0, 0, 1]}])
    with pytest.raises(InputError, match="no object of that name"):
        _scene([ring, {**key, "parent": "loop"}])
