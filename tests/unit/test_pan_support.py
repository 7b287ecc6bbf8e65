"""Acceleration noise of supported bodies (sources/pan/timescale.py "Supported bodies"): an impulse that pushes a
resting body into its support is answered by the support's reaction j_r = -(j . n_s) n_s at the support point,
over the same contact time, so only the tangential part and the torque of the pair accelerate the body (PAN paper
eqs. 11-12 applied to the pair). Analytic checks on a cube, then end to end from a MuJoCo drop of a steel ball on a
cube resting on the floor."""
import numpy as np
import pytest

from impactsound.dynamics import run_dynamics
from impactsound.dynamics.events import EventLog
from impactsound.materials import get_material
from impactsound.scene.model import Air, Ground
from impactsound.rotation import quat_to_matrix
from impactsound.sources.pan.field import PANField, direction_vectors, shell_radii
from impactsound.sources.pan.source import PANSource
from impactsound.sources.pan.timescale import acceleration_amplitudes, pulse_timescale, support_reaction
from test_dynamics import DT, axis_angle_quat, ball, box

WOOD = get_material("wood_hard")
STEEL = get_material("steel")
S = 0.04                                   # cube edge [m]
AIR = Air(c=343.2, rho=1.2041)
SUPPORT_COLS = ("support_a_point", "support_a_normal", "support_b_point", "support_b_normal")


def cube_and_ball():
    """Cube (index 0) resting on z = 0 with its centre of mass at (0, 0, S/2), and a 3 cm steel ball (index 1)."""
    return box("cube", (S, S, S), 0.0), ball("ball", 0.015, 0.2)


def synthetic_field(body, G=1e-3, n_coef=48, j0=16):
    """A cheap PAN field (5 x 10 directions) whose translation fields radiate a dipole pattern d_i and rotation
    fields a quadrupole pattern R_b d_j d_k (j, k the other two axes), each a pulse of height G / R: enough to hear
    which accelerations an impulse produces, without an FDTD precompute."""
    R_b = float(np.linalg.norm(body.mesh.vertices, axis=1).max())
    h = pulse_timescale(body.mass, body.material)
    d = direction_vectors(5, 10)
    q = np.zeros((6, 5, 10, 2, n_coef))
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        q[i, :, :, 0, j0] = G * d[..., i]
        q[3 + i, :, :, 0, j0] = G * R_b * d[..., j] * d[..., k]
    return PANField(q=q, dt_q=h / 8, tau0=-2 * h, h=h, c=AIR.c, rho=AIR.rho, R_b=R_b, radii=shell_radii(R_b),
                    mass=body.mass, inertia=body.inertia)


def strike(points, impulses_on_cube, support=True, quat=(1.0, 0.0, 0.0, 0.0)):
    """Events ball (a = 1) -> cube (b = 0) at world ``points`` with the given impulses on the cube; the cube rests on
    the floor (support at its bottom centre, normal +z) when ``support``. ``quat`` rotates the whole scene about
    the cube's centre of mass (the body-frame result must not change)."""
    n = len(points)
    Rq = quat_to_matrix(np.asarray(quat, float)[None])[0]
    c = np.array([0.0, 0.0, S / 2])
    rot = lambda v: (np.asarray(v, float) - c) @ Rq.T + c          # noqa: E731  (points)
    rotv = lambda v: np.asarray(v, float) @ Rq.T                    # noqa: E731  (vectors)
    J = np.asarray(impulses_on_cube, float)
    nrm = J / np.linalg.norm(J, axis=1, keepdims=True)             # from the ball (a) to the cube (b), along J
    kw = {}
    if support:
        kw = dict(support_b_point=rot(np.zeros((n, 3))), support_b_normal=rotv(np.tile([0.0, 0.0, 1.0], (n, 1))))
    return EventLog(t=np.linspace(0.01, 0.02, n), a=[1] * n, b=[0] * n, point=rot(points), normal=rotv(nrm),
                    impulse=rotv(J), vn=[1.0] * n, pos_b=[c] * n, quat_b=[quat] * n, **kw)


def test_support_reaction_cancels_the_normal_part_only_when_pushed():
    J = np.array([[0.3, -0.2, -1.0], [0.3, -0.2, 1.0], [0.0, 0.0, -1.0], [0.0, 0.0, -1.0]])
    xr = np.array([[0.0, 0.0, -0.02]] * 3 + [[np.nan] * 3])
    ns = np.array([[0.0, 0.0, 1.0]] * 3 + [[np.nan] * 3])
    J_r, x_r, pushed = support_reaction(J, xr, ns)
    assert pushed.tolist() == [True, False, True, False]
    np.testing.assert_array_equal(J_r, [[0, 0, 1.0], [0, 0, 0], [0, 0, 1.0], [0, 0, 0]])
    np.testing.assert_array_equal(x_r[1], 0.0)
    np.testing.assert_array_equal(x_r[3], 0.0)
    tilted = np.array([[0.0, np.sin(0.3), np.cos(0.3)]])           # a slanted support: only its normal part
    J_r, _, _ = support_reaction(J[:1], xr[:1], tilted)
    assert (J[0] + J_r[0]) @ tilted[0] == pytest.approx(0.0, abs=1e-15)
    assert np.allclose(np.cross(J_r[0], tilted[0]), 0.0)


def test_cube_on_the_floor_struck_down_at_its_top_centre_does_not_move():
    cube, bal = cube_and_ball()
    src = PANSource([cube, bal], {}, Ground(material=WOOD), AIR)
    Jz = 0.12
    top = [[0.0, 0.0, S]]
    down = [[0.0, 0.0, -Jz]]
    rows, tau, amp, _, _ = src.amplitudes(strike(top, down, support=False), 0)
    # free: |a| = pi J / (2 tau m) (paper eq. 11), straight down, no rotation
    np.testing.assert_allclose(amp[0, :3], [0.0, 0.0, -np.pi * Jz / (2 * tau[0] * cube.mass)], rtol=1e-12)
    assert np.abs(amp[0, 3:]).max() < 1e-9 * np.abs(amp[0, :3]).max()
    assert np.pi * Jz / (2 * tau[0] * cube.mass) > 1e4                  # a loud, 10^4 m/s^2 scale pulse
    _, tau_s, amp_s, _, _ = src.amplitudes(strike(top, down), 0)
    assert tau_s[0] == tau[0]                                           # the contact time is the impact's
    assert np.abs(amp_s[0]).max() < 1e-9 * np.abs(amp[0]).max()         # supported: no translation, no rotation
    # the stem: silent where the free cube is loud
    fld = synthetic_field(cube)
    src = PANSource([cube, bal], {"cube": fld}, Ground(material=WOOD), AIR)
    lis = np.array([[0.3, -0.4, 0.3]])
    free = src.render(strike(top, down, support=False), lis, 48000, 0.03)["cube"]
    held = src.render(strike(top, down), lis, 48000, 0.03)["cube"]
    assert np.abs(free).max() > 0 and np.abs(held).max() < 1e-9 * np.abs(free).max()


@pytest.mark.parametrize("quat", [(1.0, 0.0, 0.0, 0.0), tuple(axis_angle_quat([1.0, -2.0, 0.5], 0.8))])
def test_off_centre_and_slanted_strikes_keep_the_torque_and_tangential_part_of_the_pair(quat):
    """Hand computation in the body frame (cube axis-aligned, centre of mass at the origin, bottom centre
    x_r = (0, 0, -S/2), n_s = +z): struck at x = (0.01, 0.005, S/2) with J = (Jx, 0, -Jz), the support adds
    J_r = (0, 0, Jz) at x_r; net force (Jx, 0, 0), net torque x x J + x_r x J_r = x x J + (0, 0, 0)
    (x_r is parallel to J_r). Then a = pi F / (2 tau m), alpha = pi I^-1 T / (2 tau). The same in a rotated world."""
    cube, bal = cube_and_ball()
    src = PANSource([cube, bal], {}, Ground(material=WOOD), AIR)
    x = np.array([0.01, 0.005, S / 2])
    for J in (np.array([0.0, 0.0, -0.1]), np.array([0.04, 0.0, -0.1])):
        _, tau, amp, _, _ = src.amplitudes(strike([x + [0, 0, S / 2]], [J], quat=quat), 0)
        F = np.array([J[0], J[1], 0.0])
        T = np.cross(x, J) + np.cross([0.0, 0.0, -S / 2], [0.0, 0.0, -J[2]])
        g = np.pi / (2 * tau[0])
        np.testing.assert_allclose(amp[0, :3], g * F / cube.mass, atol=1e-9 * g * 0.1 / cube.mass)
        alpha = g * np.linalg.solve(cube.inertia, T)
        np.testing.assert_allclose(amp[0, 3:], alpha, rtol=1e-9, atol=1e-9 * np.abs(alpha).max())
        assert np.abs(alpha[:2]).max() > 0                                 # it rocks
        # by hand for the axis-aligned cube: I = m S^2 / 6 on the diagonal
        I = cube.mass * S**2 / 6
        np.testing.assert_allclose(alpha, g * np.array([-0.005 * 0.1, 0.01 * 0.1 + 0.02 * J[0], -0.005 * J[0]]) / I,
                                   rtol=1e-9, atol=1e-6 * abs(alpha).max())


def test_an_impulse_pulling_away_from_the_support_leaves_the_body_free():
    """Struck upward and inward on a side face (J . n_s > 0): the support does not pull; the accelerations are
    those of the free cube, eqs. 11-12."""
    cube, bal = cube_and_ball()
    src = PANSource([cube, bal], {}, Ground(material=WOOD), AIR)
    x = [[S / 2, 0.004, 0.03]]
    J = [[-0.05, 0.0, 0.08]]
    _, _, held, _, _ = src.amplitudes(strike(x, J), 0)
    _, tau, free, _, _ = src.amplitudes(strike(x, J, support=False), 0)
    np.testing.assert_array_equal(held, free)
    a, al = acceleration_amplitudes(J, np.array(x) - [0, 0, S / 2], cube.mass, cube.inertia, tau)
    np.testing.assert_allclose(free, np.c_[a, al], rtol=1e-12)


def test_mixed_events_are_handled_per_event_at_once():
    """One call over events that are supported and pushed, supported and pulled, free, and whose support belongs to
    the other body: each row equals the same event alone."""
    cube, bal = cube_and_ball()
    src = PANSource([cube, bal], {}, Ground(material=WOOD), AIR)
    pts = [[0.0, 0.0, S], [0.01, 0.0, S], [S / 2, 0.0, 0.03], [0.0, 0.01, S]]
    J = [[0.0, 0.0, -0.1], [0.02, 0.0, -0.1], [-0.05, 0.0, 0.08], [0.0, 0.01, -0.2]]
    ev = strike(pts, J)
    ev.support_b_point[2] = np.nan                       # event 2 free
    ev.support_b_normal[2] = np.nan
    ev.support_a_point[3] = [0.0, 0.0, 0.5]              # event 3: a support of the ball (a), not of the cube
    ev.support_a_normal[3] = [0.0, 0.0, 1.0]
    ev.support_b_point[3] = np.nan
    ev.support_b_normal[3] = np.nan
    _, _, amp, _, _ = src.amplitudes(ev, 0)
    for e in range(4):
        _, _, one, _, _ = src.amplitudes(ev.select(np.arange(4) == e), 0)
        np.testing.assert_allclose(amp[e], one[0], rtol=1e-13, atol=1e-13 * np.abs(amp).max())
    _, _, free, _, _ = src.amplitudes(strike(pts, J, support=False), 0)
    np.testing.assert_allclose(amp[2:], free[2:], rtol=1e-13, atol=1e-13 * np.abs(amp).max())
    assert np.abs(amp[0]).max() < 1e-9 * np.abs(free[0]).max()


# ---- end to end: MuJoCo drop -------------------------------------------------------------------------------
def _free(log):
    out = log.select(np.ones(len(log), bool))
    for k in SUPPORT_COLS:
        getattr(out, k)[:] = np.nan
    return out


def test_ball_dropped_on_a_resting_cube_end_to_end():
    """A 4 cm hardwood cube resting on a hardwood floor, a 3 cm steel ball (111 g, more than twice the cube's 48 g)
    dropped 3 cm onto its top, 6 mm off-centre. The cube's events carry the floor as its support (normal +z, point
    on the floor under the cube); its acceleration-noise stem is much quieter than the free cube's (what it was
    before the support was recorded), and the ball's stem is unchanged (the ball is free when it strikes)."""
    cube = box("cube", (S, S, S), 0.0)
    bal = ball("ball", 0.015, S + 0.03, xy=(0.006, 0.0))
    res = run_dynamics([cube, bal], Ground(material=WOOD), 0.2, DT)
    ev = res.events
    assert len(ev) >= 2 and np.all(ev.a == 0) and np.all(ev.b == 1)
    np.testing.assert_allclose(ev.support_a_normal, np.tile([0.0, 0.0, 1.0], (len(ev), 1)), atol=1e-6)
    assert np.abs(ev.support_a_point[:, 2]).max() < 1e-3                      # on the floor
    assert np.abs(ev.support_a_point[:, :2]).max() < S / 2                    # under the cube
    assert np.isnan(ev.support_b_point).all() and np.isnan(ev.support_b_normal).all()
    fields = {"cube": synthetic_field(cube), "ball": synthetic_field(bal)}
    src = PANSource([cube, bal], fields, Ground(material=WOOD), AIR)
    lis = np.array([[0.0, -0.5, 0.3], [0.4, 0.2, 0.1]])
    new = src.render(ev, lis, 48000, 0.2)
    old = src.render(_free(ev), lis, 48000, 0.2)
    np.testing.assert_array_equal(new["ball"], old["ball"])
    ratio = np.abs(old["cube"]).max() / np.abs(new["cube"]).max()
    assert ratio > 5, ratio
    # amplitudes: the supported cube keeps only the small tangential part of its translation
    _, _, a_new, _, _ = src.amplitudes(ev, 0)
    _, _, a_old, _, _ = src.amplitudes(_free(ev), 0)
    assert np.linalg.norm(a_new[0, :3]) < 0.1 * np.linalg.norm(a_old[0, :3])
