"""MuJoCo backend: contact events against independent references (free fall, momentum balance, restitution,
Kelvin-Voigt contact theory, MuJoCo's own geom vertices) - specs/modal-sound.md sec. 7-8."""
import math
import warnings

import numpy as np
import pytest
import trimesh

from impactsound.dynamics import GROUND, build_model, restitution_to_damping_ratio, run_dynamics, simulate
from impactsound.errors import InputError, MeshError
from impactsound.materials import get_material, make_material
from impactsound.scene.model import Body, Ground

G = 9.81                       # standard gravity [m/s^2]
DT = 2e-4
STEEL = get_material("steel")
WOOD = get_material("wood_hard")
GRAV = np.array([0.0, 0.0, -G])


def quat_mul(p, q):
    w1, x1, y1, z1 = p
    w2, x2, y2, z2 = q
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def quat_to_mat(q):
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def axis_angle_quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[math.cos(angle / 2), math.sin(angle / 2) * axis]


def ball(name, r, z_gap, *, mat=STEEL, xy=(0.0, 0.0), vel=(0, 0, 0), ground_z=0.0):
    """Icosphere ball whose lowest hull vertex is z_gap above the ground."""
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=r)
    mass = mat.rho * mesh.volume
    zc = ground_z + z_gap - mesh.vertices[:, 2].min()
    return Body(name=name, mesh=mesh, material=mat, mass=mass, inertia=np.eye(3) * 0.4 * mass * r * r,
                position=np.array([xy[0], xy[1], zc]), velocity=np.array(vel, float))


def box(name, ext, z_gap, *, mat=WOOD, xy=(0.0, 0.0)):
    mesh = trimesh.creation.box(extents=ext)
    return Body(name=name, mesh=mesh, material=mat, mass=mat.rho * mesh.volume,
                inertia=mesh.moment_inertia * mat.rho, position=np.array([xy[0], xy[1], ext[2] / 2 + z_gap]))


def skew_body(name, position, quaternion=(1, 0, 0, 0), angular_velocity=(0, 0, 0), velocity=(0, 0, 0)):
    """A body whose mesh is off-centre in its frame (COM != hull centroid) and whose inertia is not diagonal."""
    mesh = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    mesh.apply_translation([0.006, -0.004, 0.003])
    R = quat_to_mat(axis_angle_quat([1, 2, 3], 0.7))
    inertia = R @ np.diag([2e-6, 3e-6, 4e-6]) @ R.T
    return Body(name=name, mesh=mesh, material=STEEL, mass=0.05, inertia=inertia,
                position=np.array(position, float), quaternion=np.array(quaternion, float),
                velocity=np.array(velocity, float), angular_velocity=np.array(angular_velocity, float))


def impulse_on(events, i):
    """Total impulse [N s] the events give body i (b gets +J, a gets -J)."""
    return (events.impulse * ((events.b == i).astype(float) - (events.a == i))[:, None]).sum(axis=0)


# ---- analytic free fall ------------------------------------------------------------------------------------
def test_drop_hits_at_free_fall_time_and_speed():
    h, ground_z = 0.3, 0.1
    b = ball("ball", 0.01, h, ground_z=ground_z)
    ev = simulate([b], Ground(material=STEEL, height=ground_z), 0.3, DT)
    assert len(ev) >= 1
    t_hit, v_hit = math.sqrt(2 * h / G), math.sqrt(2 * G * h)
    # First contact is detected at the start of the step during which the lowest vertex crosses the plane.
    assert abs(ev.t[0] - t_hit) <= DT
    assert abs(ev.vn[0] - v_hit) <= G * DT
    assert (ev.a[0], ev.b[0]) == (GROUND, 0)
    np.testing.assert_allclose(ev.normal[0], [0, 0, 1], atol=1e-9)
    assert ev.point[0, 2] == pytest.approx(ground_z, abs=1e-3)
    assert np.isnan(ev.pos_a[0]).all() and np.isnan(ev.quat_a[0]).all()
    assert ev.body_names == ["ball"]


# ---- momentum balance --------------------------------------------------------------------------------------
def test_momentum_balance_ball_bouncing_on_ground():
    b = ball("ball", 0.01, 0.3)
    T = 0.65                      # after the 2nd bounce (t ~ 0.25, 0.56 s), before the 3rd: in flight
    res = run_dynamics([b], Ground(material=STEEL), T, DT, v_min=0.01)
    assert len(res.events) == 2
    assert not np.any(res.raw.t > T - 0.02), "the ball must be in flight at T"
    dp = b.mass * (res.velocity[0] - b.velocity)
    J = impulse_on(res.events, 0) + b.mass * GRAV * res.time
    np.testing.assert_allclose(dp, J, atol=1e-6 * np.abs(res.events.impulse).sum())
    # Merging preserved the engine's summed impulse.
    np.testing.assert_allclose(res.events.impulse.sum(axis=0), res.raw.impulse.sum(axis=0),
                               atol=1e-12 * np.abs(res.raw.impulse).sum())


def test_momentum_balance_two_bodies_colliding_in_air():
    b0 = ball("steel", 0.01, 1.0, vel=(1.0, 0, 0.2), xy=(-0.05, 0.0))
    b1 = ball("alu", 0.015, 1.0, vel=(-1.0, 0, 0.2), xy=(0.05, 0.006), mat=get_material("aluminium"))
    res = run_dynamics([b0, b1], Ground(material=STEEL), 0.1, DT, v_min=0.01)
    ev = res.events
    assert len(ev) == 1 and (ev.a[0], ev.b[0]) == (0, 1)
    # Normal from a to b: along the line of centres at t0 (spheres), pointing towards b.
    d = ev.pos_b[0] - ev.pos_a[0]
    assert ev.normal[0] @ d / np.linalg.norm(d) > 0.99
    assert ev.impulse[0] @ ev.normal[0] > 0          # b is pushed away from a
    scale = np.abs(ev.impulse).sum()
    for i, body in enumerate((b0, b1)):
        dp = body.mass * (res.velocity[i] - body.velocity)
        np.testing.assert_allclose(dp, impulse_on(ev, i) + body.mass * GRAV * res.time, atol=1e-6 * scale)
    # Approach speed at first contact = initial relative velocity (gravity acts on both alike) along the normal
    # the engine reported in that step (faceted spheres: it differs slightly from the impulse-weighted mean).
    first = (res.raw.t == ev.t[0]) & (res.raw.a == 0) & (res.raw.b == 1)
    n = res.raw.normal[first][0]
    assert ev.vn[0] == pytest.approx(-(b1.velocity - b0.velocity) @ n, rel=1e-9)


# ---- restitution -------------------------------------------------------------------------------------------
def kelvin_voigt_restitution(zeta):
    """Continuous linear spring-damper contact released at zero force (omega0 = 1, v_in = 1): e(zeta)."""
    from scipy.optimize import brentq

    s = math.sqrt(1 - zeta * zeta)
    pen = lambda t: math.exp(-zeta * t) * math.sin(s * t) / s                                   # noqa: E731
    vel = lambda t: math.exp(-zeta * t) * (math.cos(s * t) - zeta / s * math.sin(s * t))      # noqa: E731
    force = lambda t: 2 * zeta * vel(t) + pen(t)                                                # noqa: E731
    grid = np.linspace(1e-9, math.pi / s, 2000)
    k = next(i for i in range(1, len(grid)) if force(grid[i]) <= 0)
    tr = brentq(force, grid[k - 1], grid[k])
    return -vel(tr)


def test_damping_ratio_calibration_matches_continuous_kelvin_voigt_when_resolved():
    from scipy.optimize import brentq

    for e in (0.3, 0.6, 0.8):
        zeta_ref = brentq(lambda z: kelvin_voigt_restitution(z) - e, 1e-6, 0.99)
        assert restitution_to_damping_ratio(e, 200.0) == pytest.approx(zeta_ref, rel=0.02, abs=1e-3)
    assert restitution_to_damping_ratio(1.0) == pytest.approx(0.0, abs=1e-4)


def bounce_speeds(mat_ball, mat_ground, h=0.3, T=1.2):
    b = ball("ball", 0.01, h, mat=mat_ball)
    return simulate([b], Ground(material=mat_ground), T, DT, v_min=0.05).vn


def test_restitution_matches_material():
    vn = bounce_speeds(STEEL, STEEL)
    ratios = vn[1:5] / vn[:4]
    e = STEEL.restitution
    # One bounce scatters with the phase of first contact inside a step (module docstring: +-2 zeta kappa / 3,
    # about +-0.04 here); the mean over bounces is the calibrated value.
    assert np.all(np.abs(ratios - e) < 0.05)
    assert ratios.mean() == pytest.approx(e, abs=0.025)


def test_restitution_of_a_pair_is_the_smaller_one():
    rubber = get_material("rubber")            # e = 0.8
    vn = bounce_speeds(rubber, WOOD)           # wood e = 0.4
    assert (vn[1:4] / vn[:3]).mean() == pytest.approx(WOOD.restitution, abs=0.025)


# ---- settling, corners, tunnelling -------------------------------------------------------------------------
def test_resting_box_is_silent_after_settling():
    h, e = 0.005, WOOD.restitution
    b = box("box", (0.1, 0.06, 0.04), h)
    res = run_dynamics([b], Ground(material=WOOD), 2.0, DT, thin_rest=False)   # every resting row reaches hygiene
    assert len(res.raw) > 10000                     # the box is in contact for most of the run...
    # ...but emits nothing once its bounces (speeds v0 e^k, total time t_fall + 2 v0 e / (g (1 - e))) are over.
    v0 = math.sqrt(2 * G * h)
    t_settled = math.sqrt(2 * h / G) + 2 * v0 * e / (G * (1 - e))
    assert np.all(res.events.t < t_settled + 0.02)
    n_bounces = math.floor(math.log(0.05 / v0) / math.log(e)) + 1
    assert len(res.events) <= 4 * (n_bounces + 1)   # 4 corners per bounce, one bounce of slack for scatter


def test_box_landing_flat_gives_four_corner_events_with_one_t0():
    ext = (0.1, 0.06, 0.04)
    b = box("box", ext, 0.1)
    ev = simulate([b], Ground(material=WOOD), 1.0, DT)
    first = ev.t == ev.t[0]
    assert first.sum() == 4
    assert ev.t[0] == pytest.approx(math.sqrt(2 * 0.1 / G), abs=DT)
    corners = np.array([[sx * ext[0] / 2, sy * ext[1] / 2] for sx in (-1, 1) for sy in (-1, 1)])
    got = ev.point[first, :2]
    assert np.abs(np.sort(got, axis=0) - np.sort(corners, axis=0)).max() < 1e-3
    # Each first-impact corner carries a quarter of the box's momentum change (symmetry).
    np.testing.assert_allclose(ev.impulse[first, 2], ev.impulse[first, 2].mean(), rtol=1e-3)
    # Every later bounce at most 4 events sharing a t0, never hundreds.
    _, counts = np.unique(ev.t, return_counts=True)
    assert counts.max() <= 4 and len(ev) <= 4 * 8


def test_small_fast_steel_ball_does_not_tunnel_or_chatter():
    r = 0.005
    b = ball("bead", r, 0.002, vel=(0, 0, -5.0))
    res = run_dynamics([b], Ground(material=STEEL), 0.05, DT, record_every=1)
    z = res.trajectory_position[:, 0, 2]
    assert z.min() > 0.0                            # the centre never crosses the ground plane
    assert res.velocity[0, 2] > 0 or z[-1] > r      # it came back up
    ev = res.events
    assert len(ev) == 1
    assert ev.vn[0] == pytest.approx(5.0, abs=G * 0.002 / 5.0 + G * DT)


def test_fast_ball_on_a_slab_does_not_tunnel():
    r = 0.005
    slab = box("slab", (0.1, 0.1, 0.01), 0.0, mat=STEEL)
    bead = ball("bead", r, 0.012, vel=(0, 0, -5.0))
    res = run_dynamics([slab, bead], Ground(material=STEEL), 0.03, DT, record_every=1)
    zb, zs = res.trajectory_position[:, 1, 2], res.trajectory_position[:, 0, 2]
    assert np.all(zb - zs > 0.005)                  # bead centre always above the slab's top face
    ev = res.events.select(res.events.a == 0)
    assert len(ev) == 1 and ev.b[0] == 1 and ev.vn[0] == pytest.approx(5.0, rel=0.01)


# ---- frames ------------------------------------------------------------------------------------------------
def test_reported_pose_is_our_body_frame_against_mujoco_geom_vertices():
    import mujoco

    q0 = axis_angle_quat([0.3, -1, 0.5], 1.1)
    b = skew_body("skew", (0.1, 0.2, 0.5), q0, angular_velocity=(3.0, -2.0, 5.0))
    mm = build_model([b], None, DT)
    m, d = mm.model, mm.data
    for _ in range(300):
        mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    g = 0
    adr, num = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
    mj_world = d.geom_xpos[g] + m.mesh_vert[adr:adr + num].astype(float) @ d.geom_xmat[g].reshape(3, 3).T
    ours = d.xpos[1] + mm.hull_vertices[0] @ quat_to_mat(d.xquat[1]).T
    assert len(ours) == len(mj_world)
    dist = np.linalg.norm(ours[:, None] - mj_world[None], axis=2).min(axis=1)
    assert dist.max() < 1e-7
    # MuJoCo did move the mesh to its own frame (otherwise this test would prove nothing).
    assert np.linalg.norm(m.geom_pos[g]) > 1e-3


def test_free_flight_com_parabola_and_principal_axis_spin():
    q0 = axis_angle_quat([1, 1, 0], 0.4)
    proto = skew_body("skew", (0, 0, 0))
    evals, evecs = np.linalg.eigh(proto.inertia)
    w = 20.0 * (quat_to_mat(q0) @ evecs[:, 0])           # spin about a principal axis, world frame
    v0 = np.array([0.3, -0.2, 1.5])
    b = skew_body("skew", (0.0, 0.0, 1.0), q0, angular_velocity=w, velocity=v0)
    res = run_dynamics([b], None, 0.3, DT, record_every=10)
    n = np.rint(res.trajectory_t / DT)
    # Semi-implicit Euler closed form: p_n = p0 + n dt v0 + g dt^2 n (n + 1) / 2 (and the parabola within g dt t).
    p_disc = b.position + np.outer(n * DT, v0) + np.outer(DT * DT * n * (n + 1) / 2, GRAV)
    np.testing.assert_allclose(res.trajectory_position[:, 0], p_disc, atol=1e-9)
    t = res.trajectory_t[:, None]
    parabola = b.position + t * v0 + 0.5 * t * t * GRAV
    assert np.all(np.abs(res.trajectory_position[:, 0] - parabola) <= G * DT * t + 1e-12)
    # Torque-free spin about a principal axis: q(t) = exp(w t) q0 with w in the world frame.
    for tk, qk in zip(res.trajectory_t, res.trajectory_quaternion[:, 0]):
        expect = quat_mul(axis_angle_quat(w, np.linalg.norm(w) * tk), q0)
        assert abs(abs(expect @ qk) - 1) < 1e-9
    np.testing.assert_allclose(res.angular_velocity[0], w, atol=1e-9)


def test_tumbling_body_com_is_the_frame_origin():
    # A generic spin about no principal axis: only if MuJoCo's COM is our frame origin is it a parabola.
    q0 = axis_angle_quat([0, 1, 1], 0.9)
    b = skew_body("skew", (0.0, 0.0, 1.0), q0, angular_velocity=(10.0, -30.0, 17.0))
    res = run_dynamics([b], None, 0.2, DT, record_every=25)
    n = np.rint(res.trajectory_t / DT)
    p_disc = b.position + np.outer(DT * DT * n * (n + 1) / 2, GRAV)
    np.testing.assert_allclose(res.trajectory_position[:, 0], p_disc, atol=1e-9)


def test_event_pose_is_the_body_pose_at_t0():
    q0 = axis_angle_quat([1, -2, 0.5], 0.8)
    b = skew_body("skew", (0, 0, 0), q0)
    hull = trimesh.convex.convex_hull(b.mesh).vertices
    b.position = np.array([0.0, 0.0, 0.05 - (hull @ quat_to_mat(q0).T)[:, 2].min()])
    ev = simulate([b], Ground(material=WOOD), 0.15, DT)
    assert len(ev) >= 1 and (ev.a[0], ev.b[0]) == (GROUND, 0)
    world = ev.pos_b[0] + hull @ quat_to_mat(ev.quat_b[0]).T
    # At t0 the lowest hull vertex has just crossed the ground: within one step's travel below it.
    assert -ev.vn[0] * DT - 1e-9 <= world[:, 2].min() <= 1e-9
    lowest = world[np.argmin(world[:, 2])]
    assert np.linalg.norm(ev.point[0, :2] - lowest[:2]) < 1e-3


# ---- resting support -----------------------------------------------------------------------------------------
def test_ball_dropped_on_a_resting_box_records_the_floor_as_the_box_support():
    """A 3 cm steel ball dropped onto a 4 cm cube resting on the floor: every ball-cube event gives the cube (body a)
    the floor as its support (normal +z, a point on the floor under the cube) and the ball (in flight) none."""
    s = 0.04
    cube = box("cube", (s, s, s), 0.0)
    b = ball("ball", 0.015, s + 0.03, xy=(0.006, 0.0))
    ev = simulate([cube, b], Ground(material=WOOD), 0.2, DT)
    assert len(ev) >= 2 and np.all(ev.a == 0) and np.all(ev.b == 1)
    np.testing.assert_allclose(ev.support_a_normal, np.tile([0.0, 0.0, 1.0], (len(ev), 1)), atol=1e-6)
    assert np.abs(ev.support_a_point[:, 2]).max() < 1e-3
    assert np.abs(ev.support_a_point[:, :2]).max() < s / 2
    assert np.isnan(ev.support_b_point).all() and np.isnan(ev.support_b_normal).all()


def test_bodies_in_flight_have_no_support():
    """A ball landing on the ground and a box landing flat: free in the air until they land (NaN support), and
    the ground never has one."""
    ev = simulate([ball("ball", 0.01, 0.1)], Ground(material=STEEL), 0.2, DT)
    assert len(ev) >= 1 and np.isnan(ev.support_b_point[0]).all() and np.isnan(ev.support_a_point).all()
    ev = simulate([box("box", (0.1, 0.06, 0.04), 0.1)], Ground(material=WOOD), 0.2, DT)
    first = ev.t == ev.t[0]
    assert first.sum() == 4 and np.isnan(ev.support_b_point[first]).all()


def test_a_load_on_top_is_not_the_support_of_the_body_below():
    """A 3 cm box resting on a 6 cm slab on the floor, the slab struck on its side by a ball: the slab's support is
    the floor (normal +z, point on the floor), not a point between the floor and the box above it (whose contact
    pushes the slab down, against the net reaction: with it, the point would be ~5 mm up)."""
    slab = box("slab", (0.06, 0.06, 0.02), 0.0, mat=STEEL)
    top = box("top", (0.03, 0.03, 0.03), 0.0, mat=STEEL)
    top.position[2] += 0.02
    bead = ball("bead", 0.006, 0.004, xy=(-0.06, 0.0), vel=(1.0, 0.0, 0.0))
    ev = simulate([slab, top, bead], Ground(material=WOOD), 0.1, DT)
    hit = (ev.a == 0) & (ev.b == 2)
    assert hit.sum() >= 1
    k = int(np.flatnonzero(hit)[0])
    np.testing.assert_allclose(ev.support_a_normal[k], [0, 0, 1], atol=1e-6)
    assert abs(ev.support_a_point[k, 2]) < 1e-3
    assert np.isnan(ev.support_b_point[k]).all()


def test_support_from_raw_contacts_is_the_force_weighted_centroid():
    """Engine-independent (hygiene.clean_contacts on synthetic rows): a box resting on four corners with unequal
    normal forces is struck from above by a ball at t = 10 ms; its support is the force-weighted centroid of the
    corners and their mean normal. A corner missing from the struck step (engine flicker) is bridged by the last
    step within max_gap."""
    from impactsound.dynamics import RawContacts, clean_contacts
    dt, n = 1e-4, 200
    corners = np.array([[-0.02, -0.02, 0.0], [0.02, -0.02, 0.0], [0.02, 0.02, 0.0], [-0.02, 0.02, 0.0]])
    force = np.array([1.0, 2.0, 3.0, 4.0])                          # normal forces [N]
    rows = []
    for k in range(n):
        for c in range(4):
            rows.append((k * dt, k, GROUND, 0, *corners[c], 0, 0, 1, 0, 0, force[c] * dt, 0.001))
    for k in range(100, 110):                                       # the ball's collision from above
        rows.append((k * dt, k, 0, 1, 0.0, 0.0, 0.04, 0, 0, 1, 0, 0, 0.01, 1.0 if k == 100 else -0.1))
    r = np.array(rows, float)
    raw = RawContacts(t=r[:, 0], step=r[:, 1], a=r[:, 2], b=r[:, 3], point=r[:, 4:7], normal=r[:, 7:10],
                      impulse=r[:, 10:13], vn=r[:, 13])
    ev = clean_contacts(raw, [0.07, 0.03]).to_event_log(["box", "ball"])
    assert len(ev) == 1 and (ev.a[0], ev.b[0]) == (0, 1)
    want = (force[:, None] * corners).sum(axis=0) / force.sum()
    np.testing.assert_allclose(ev.support_a_point[0], want, atol=1e-12)
    np.testing.assert_allclose(ev.support_a_normal[0], [0, 0, 1], atol=1e-12)
    assert np.isnan(ev.support_b_point[0]).all()
    # flicker: no resting rows at the struck step; the step before is used
    gone = (raw.step == 100) & (raw.b == 0)
    ev = clean_contacts(raw.select(~gone), [0.07, 0.03]).to_event_log(["box", "ball"])
    np.testing.assert_allclose(ev.support_a_point[0], want, atol=1e-12)
    # before the corners have settled (2 ms) the box is not resting: free
    late = raw.select((raw.b == 1) | (raw.t >= 9e-3))
    ev = clean_contacts(late, [0.07, 0.03]).to_event_log(["box", "ball"])
    assert np.isnan(ev.support_a_point[0]).all()


# ---- validation and API ------------------------------------------------------------------------------------
def test_invalid_inputs_raise_input_errors_naming_body_and_field():
    g = Ground(material=STEEL)
    b = ball("marble", 0.01, 0.1)
    b.velocity = np.array([0.0, np.nan, 0.0])
    with pytest.raises(InputError, match="marble.*velocity"):
        simulate([b], g, 0.1)
    b = ball("marble", 0.01, 0.1)
    b.position = np.array([0.0, np.inf, 0.0])
    with pytest.raises(InputError, match="marble.*position"):
        simulate([b], g, 0.1)
    b = ball("marble", 0.01, 0.1)
    with pytest.raises(InputError, match="duration"):
        simulate([b], g, -1.0)
    with pytest.raises(InputError, match="timestep"):
        simulate([b], g, 0.1, timestep=0.0)
    with pytest.raises(InputError, match="below the ground"):
        simulate([ball("sunk", 0.01, -0.002)], g, 0.1)
    with pytest.raises(InputError, match="overlap"):
        simulate([ball("a", 0.01, 0.1), ball("b", 0.01, 0.1, xy=(0.015, 0.0))], g, 0.1)


def test_invalid_inertia_and_flat_mesh_are_named():
    b = box("brick", (0.1, 0.1, 0.1), 0.1)
    b.inertia = np.diag([1e-3, 1e-3, 5e-3])             # violates A + B >= C
    with pytest.raises(InputError, match="brick.*inertia"):
        simulate([b], Ground(material=WOOD), 0.01)
    flat = Body(name="sheet", mesh=trimesh.creation.box(extents=(0.1, 0.1, 0.0)), material=WOOD, mass=1.0,
                inertia=np.diag([1e-3, 1e-3, 1.5e-3]), position=np.array([0.0, 0.0, 0.1]))
    with pytest.raises(MeshError, match="sheet.*flat"):
        simulate([flat], Ground(material=WOOD), 0.01)


def test_empty_scene_gives_an_empty_log():
    assert len(simulate([], Ground(material=WOOD), 0.1)) == 0


def test_body_resting_exactly_on_the_ground_is_accepted():
    ev = simulate([box("box", (0.05, 0.05, 0.05), 0.0)], Ground(material=WOOD), 0.2, DT)
    assert len(ev) == 0


def test_progress_is_reported_from_zero_to_one():
    seen = []
    simulate([ball("b", 0.01, 0.05)], Ground(material=STEEL), 0.05, DT, progress=seen.append)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and np.all(np.diff(seen) >= 0)


def test_very_low_restitution_is_clamped_with_a_warning():
    mat = make_material("putty", rho=1500, E=1e7, nu=0.4, restitution=0.0)
    with pytest.warns(UserWarning, match="restitution"):
        restitution_to_damping_ratio(0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vn = bounce_speeds(mat, mat, T=0.6)
    # The floor is ~0.07 on average; the discrete contact map bounds a single bounce by ~0.12 at that damping.
    assert len(vn) <= 2 and np.all(vn[1:] / vn[0] < 0.15)


def test_five_small_objects_three_seconds():
    """Five small objects of four materials dropped together: each lands (its first event's approach speed is
    the free-fall speed sqrt(2 g drop)), none tunnels or keeps moving, and all end at rest on the floor."""
    rng = np.random.default_rng(3)
    bodies = [ball("b0", 0.01, 0.3), ball("b1", 0.005, 0.4, xy=(-0.2, 0), mat=get_material("glass")),
              box("x2", (0.05, 0.03, 0.02), 0.2, xy=(0.2, 0), mat=STEEL),
              box("x3", (0.08, 0.08, 0.01), 0.15, xy=(0, 0.2), mat=get_material("ceramic")),
              box("x4", (0.03, 0.03, 0.03), 0.25, xy=(0, -0.2))]
    for b in bodies[2:]:
        b.quaternion = axis_angle_quat(rng.normal(size=3), 0.5)
        b.position[2] += 0.05
    drop = np.array([b.position[2] for b in bodies])
    res = run_dynamics(bodies, Ground(material=WOOD), 3.0, DT)
    ev = res.events.validate("simulation", len(bodies))
    assert np.all(ev.vn >= 0.05)
    for i, b in enumerate(bodies):
        mine = np.flatnonzero((ev.a == i) | (ev.b == i))
        assert len(mine), f"{b.name} never landed"
        first = mine[np.argmin(ev.t[mine])]
        # its centre falls between drop - r_b (r_b: bounding radius, whatever the tilt) and drop before the first
        # touch: the first approach speed is free fall from there (a few percent for the discrete contact)
        r_b = float(np.max(np.linalg.norm(b.mesh.vertices, axis=1)))
        lo, hi = np.sqrt(2 * 9.81 * (drop[i] - r_b)), np.sqrt(2 * 9.81 * drop[i])
        assert 0.97 * lo < ev.vn[first] < 1.03 * hi, (b.name, ev.vn[first], lo, hi)
    assert np.all(res.position[:, 2] > 0)                                        # nothing tunnelled
    assert np.all(np.linalg.norm(res.velocity, axis=1) < 0.05)                   # all at rest after 3 s
