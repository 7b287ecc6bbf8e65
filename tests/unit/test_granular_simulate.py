"""The event-driven hard-sphere simulator (sources/granular/simulate.py; M. Marko, "Sound simulation of granular
materials", sec. 6.1 and App. B.2, where DynamO produced the collision log).

Independent references: closed forms of ballistic flight (a ball bouncing on a floor, hitting a cup wall, a rim, a
cone, a static sphere; a 1-D two-body collision), conservation of energy and of momentum (the walls' impulses
account for every change), the Enskog collision frequency of a hard-sphere gas with the Carnahan-Starling contact
value, a brute-force all-pairs overlap check and numpy's polynomial roots. Expected values never come from the
simulator's own output."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial import cKDTree

from impactsound.errors import InputError, SolverError
from impactsound.sources.granular import _sim_kernel as K
from impactsound.sources.granular.events import CONTAINER, GRAIN
from impactsound.sources.granular.simulate import (Cone, Cup, Cylinder, Disk, Floor, GrainSet, Plane,
                                                   StaticSpheres, pour_grains, simulate, simulate_state)

G = 9.81
A = 1e-3                                    # grain radius [m]


def one(p, v=(0.0, 0.0, 0.0), a=A, **kw):
    return GrainSet(positions=np.array([p], float), velocities=np.array([v], float), radii=np.array([a]), **kw)


def box_walls(L, body="box"):
    return [Plane((0, 0, 0), (1, 0, 0), body), Plane((L, 0, 0), (-1, 0, 0), body),
            Plane((0, 0, 0), (0, 1, 0), body), Plane((0, L, 0), (0, -1, 0), body),
            Plane((0, 0, 0), (0, 0, 1), body), Plane((0, 0, L), (0, 0, -1), body)]


def gas(n, phi, seed=1):
    """n equal grains (radius A) at random in a cube of walls at packing fraction phi, Maxwellian velocities
    (1 m/s rms per component), zero total momentum."""
    L = (n * 4 / 3 * math.pi * A ** 3 / phi) ** (1 / 3)
    gs = pour_grains(n, A, region=((0, 0, 0), (L, L, L)), gap=0.0, seed=seed, jitter=0.0)
    v = np.random.default_rng(seed + 100).standard_normal((n, 3))
    gs.velocities = v - v.mean(axis=0)
    return gs, L


ELASTIC = dict(restitution=1.0, gravity=(0.0, 0.0, 0.0), v_rest=0.0, v_elastic=0.0)


# ------------------------------------------------------------------------------------------ root finding
def test_entry_roots_match_numpy_roots():
    """The first entering root (f falls through 0) of random polynomials of degree 2..8 on [0, T] against the real
    roots numpy finds (companion matrix), where the derivative is negative."""
    rng = np.random.default_rng(5)
    W = np.zeros((K.W_ROWS, 12))
    checked = 0
    for _ in range(400):
        n = int(rng.integers(2, 9))
        r = np.sort(rng.uniform(-1.0, 3.0, n))      # a polynomial with n real roots, positive leading coefficient
        c = np.poly(r)[::-1] * rng.choice([-1.0, 1.0])
        if c[0] <= 0:                               # f(0) > 0: the grains start apart
            continue
        T = 2.0
        W[K.R_C, :] = 0.0
        W[K.R_C, :n + 1] = c
        m = K.entry_roots(W, n, T)
        got = W[K.R_ROOT, :m].copy()
        dc = np.polynomial.polynomial.polyder(c)
        ref = [x for x in r if 0 < x <= T and np.polynomial.polynomial.polyval(x, dc) < 0]
        assert len(got) == len(ref), (c, got, ref)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
        checked += len(ref)
    assert checked > 100


def test_entry_roots_double_root_and_touching_start():
    """A tangent approach (double root) is found; f(0) <= 0 while decreasing is an immediate entry; a graze that
    stays positive is no entry."""
    W = np.zeros((K.W_ROWS, 12))

    def first(c, T=5.0):
        W[K.R_C, :] = 0.0
        W[K.R_C, :len(c)] = c
        m = K.entry_roots(W, len(c) - 1, T)
        return W[K.R_ROOT, 0] if m else None

    assert first(np.poly([1.0, 1.0, 3.0, 4.0])[::-1]) == pytest.approx(1.0, abs=1e-7)   # touches 0 at 1
    assert first([-1e-18, -1.0, 1.0]) == 0.0
    assert first(np.poly([1.0, 1.0])[::-1] + [1e-6, 0, 0]) is None


# --------------------------------------------------------------------------------------- closed forms
def test_ball_bouncing_on_floor_matches_closed_form():
    """A sphere dropped from rest onto a floor with restitution e: impact k at t_k = t_0 + sum_{j<k} 2 e^{j+1} v_0/g
    with v_k = e^k v_0 (v_0 = sqrt(2 g (h - a))), to 1e-12; each is a container event of the floor."""
    e, h = 0.8, 0.05
    t_inf = math.sqrt(2 * (h - A) / G) * (1 + 2 * e / (1 - e))        # 0.897 s
    ev = simulate(one((0.01, -0.02, h)), Floor(0.0), duration=t_inf - 1e-4, restitution=e, v_rest=0.0,
                  v_elastic=0.0, collapse_rate=None)
    v0 = math.sqrt(2 * G * (h - A))
    k = np.arange(len(ev))
    vk = v0 * e ** k
    tk = v0 / G + np.concatenate([[0.0], np.cumsum(2 * e * vk[:-1] / G)])
    assert len(ev) >= 35
    np.testing.assert_allclose(ev.t, tk, rtol=1e-12)
    np.testing.assert_allclose(ev.v0, vk, rtol=1e-12, atol=1e-14 * v0)     # round-off of the speed itself
    assert (ev.kind == CONTAINER).all() and (ev.id_b == 0).all() and ev.containers == ("floor",)
    np.testing.assert_allclose(ev.normal, np.tile([0, 0, 1.0], (len(ev), 1)))
    np.testing.assert_allclose(ev.point, np.tile([0.01, -0.02, 0.0], (len(ev), 1)), atol=1e-15)
    np.testing.assert_allclose(ev.e, e)


def test_collapse_without_guard_stops_with_message():
    """Without the guards the bouncing ball makes infinitely many impacts before t_inf = t_0 (1 + 2e/(1-e)): the
    detector stops the run, naming the collapse and the settings to change."""
    with pytest.raises(SolverError, match="inelastic collapse") as err:
        simulate(one((0, 0, 0.05)), Floor(0.0), duration=1.0, restitution=0.5, v_rest=0.0, v_elastic=0.0)
    msg = str(err.value)
    assert "v_rest" in msg and "v_elastic" in msg
    t_inf = math.sqrt(2 * (0.05 - A) / G) * (1 + 2 * 0.5 / 0.5)
    t_stop = float(msg.split("at t = ")[1].split(" s")[0])
    assert t_stop == pytest.approx(t_inf, rel=1e-6)


def test_max_events_stops_run():
    with pytest.raises(SolverError, match="max_events"):
        simulate(one((0, 0, 0.05)), Floor(0.0), duration=1.0, restitution=0.5, v_rest=0.0, v_elastic=0.0,
                 collapse_rate=None, max_events=10)


def test_resting_rule_freezes_ball_on_floor():
    """With the default guards the same ball bounces until its impact speed drops below v_rest, then rests on the
    floor (z = a) for good: finitely many events, all at v0 >= v_rest except the last."""
    e, h, v_rest = 0.5, 0.05, 0.02
    r = simulate_state(one((0, 0, h)), Floor(0.0), duration=2.0, restitution=e, v_rest=v_rest)
    ev = r.events
    v0 = math.sqrt(2 * G * (h - A))
    n_expected = math.ceil(math.log(v_rest / v0) / math.log(e)) + 1   # impacts down to the first below v_rest
    assert len(ev) == n_expected
    assert (ev.v0[:-1] >= v_rest).all() and ev.v0[-1] < v_rest
    assert r.final.frozen[0] and r.final.positions[0, 2] == pytest.approx(A, abs=1e-15)
    assert r.stats["frozen"] == 1


def test_slow_collisions_are_elastic_and_rebound_at_least_v_elastic():
    """Rebound speed max(e v0, min(v0, v_el)), and at least v_el on a support pressed by gravity: with v_rest off,
    the bouncing ball settles to impacts at exactly v_el (a bounce period 2 v_el/g), logged with e = 1."""
    v_el = 0.05
    ev = simulate(one((0, 0, 0.02)), Floor(0.0), duration=0.5, restitution=0.5, v_rest=0.0, v_elastic=v_el)
    late = ev.t > 0.3
    np.testing.assert_allclose(ev.v0[late], v_el, rtol=1e-9)
    np.testing.assert_allclose(np.diff(ev.t[late]), 2 * v_el / G, rtol=1e-9)
    np.testing.assert_allclose(ev.e[late], 1.0)


def test_two_body_collision_unequal_masses():
    """Head-on collision of unequal grains (radii 1 and 2 mm, glass and steel, no gravity) with e = 0.7: final
    velocities from the 1-D momentum balance and restitution law."""
    gs = GrainSet(positions=[[0, 0, 0], [0.01, 0, 0]], velocities=[[1.0, 0, 0], [-0.5, 0, 0]], radii=[1e-3, 2e-3],
                  material=[0, 1], materials=("glass", "steel"))
    e = 0.7
    r = simulate_state(gs, (), duration=0.05, restitution=e, gravity=(0, 0, 0), v_rest=0, v_elastic=0)
    m1 = 2600 * 4 / 3 * math.pi * 1e-3 ** 3
    m2 = 7850 * 4 / 3 * math.pi * 2e-3 ** 3
    u1, u2 = 1.0, -0.5
    w1 = (m1 * u1 + m2 * u2 - m2 * e * (u1 - u2)) / (m1 + m2)
    w2 = (m1 * u1 + m2 * u2 + m1 * e * (u1 - u2)) / (m1 + m2)
    np.testing.assert_allclose(r.final.velocities[:, 0], [w1, w2], rtol=1e-12)
    ev = r.events
    assert len(ev) == 1 and ev.kind[0] == GRAIN and (ev.id_a[0], ev.id_b[0]) == (0, 1)
    assert ev.t[0] == pytest.approx((0.01 - 3e-3) / 1.5, rel=1e-12)
    np.testing.assert_allclose(ev.normal[0], [-1, 0, 0])           # from grain B (1) to grain A (0)
    np.testing.assert_allclose(ev.point[0], [(0.01 - 3e-3) / 1.5 + 1e-3, 0, 0], rtol=1e-12)
    assert ev.v0[0] == pytest.approx(1.5, rel=1e-12) and ev.e[0] == pytest.approx(e, rel=1e-12)
    assert ev.materials == ("glass", "steel") and (ev.material_a[0], ev.material_b[0]) == (0, 1)
    assert (ev.radius_a[0], ev.radius_b[0]) == (1e-3, 2e-3)


CUP = Cup(center_xy=(0.0, 0.0), radius=0.02, z_bottom=0.0, height=0.03)


def test_cup_wall_hit_at_predicted_time():
    """A grain inside the cup moving at u toward the wall hits it (element 1) at (R - a - x0)/u, at the point
    (R, 0, z(t)) with the normal into the cup."""
    x0, z0, u = 0.005, 0.025, 0.8
    ev = simulate(one((x0, 0, z0), (u, 0, 0)), [CUP], duration=0.02, restitution=0.9)
    t = (0.02 - A - x0) / u
    assert ev.kind[0] == CONTAINER and ev.containers[ev.id_b[0]] == "cup" and ev.element[0] == 1
    assert ev.t[0] == pytest.approx(t, rel=1e-12)
    np.testing.assert_allclose(ev.point[0], [0.02, 0, z0 - 0.5 * G * t * t], rtol=1e-12)
    np.testing.assert_allclose(ev.normal[0], [-1, 0, 0], atol=1e-15)
    assert ev.v0[0] == pytest.approx(u, rel=1e-12)


def test_grain_above_rim_passes_and_outside_grain_stays_out():
    """A grain flying over the rim (its bottom above it) never touches the cup and lands on the floor outside
    at the free-fall time; a grain outside moving inwards bounces off the outside of the wall (normal outwards)."""
    z0 = 0.03 + A + 1e-3                                                # sinks 0.12 mm before the rim
    ev = simulate(one((0.015, 0, z0), (1.0, 0, 0)), [Floor(0.0), CUP], duration=0.2, restitution=0.5)
    assert ev.kind[0] == CONTAINER and ev.containers[ev.id_b[0]] == "floor"
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (z0 - A) / G), rel=1e-12)
    assert ev.point[0, 0] > 0.02 + A
    ev = simulate(one((0.03, 0, 0.01), (-0.5, 0, 0)), [CUP], duration=0.02, restitution=0.5)
    assert ev.containers[ev.id_b[0]] == "cup" and ev.element[0] == 1
    assert ev.t[0] == pytest.approx((0.03 - 0.02 - A) / 0.5, rel=1e-12)
    np.testing.assert_allclose(ev.normal[0], [1, 0, 0], atol=1e-15)


@pytest.mark.parametrize("max_cells", [1, 1 << 21])
def test_outer_wall_hit_after_passing_over_the_rim(max_cells):
    """Gravity tilted towards the axis (g_x = -10 m/s^2): a grain thrown outwards over the rim (clear of it by
    0.5 a) is pulled back and hits the outside of the wall when x(t) = x0 + u t + g_x t^2/2 = R + a again, normal
    outwards. With a single cell (no cell crossings, no re-predictions on the way) the far face is still found."""
    R, H, gx = 0.02, 0.03, -10.0
    x0, z0, u, w = R - 3 * A, H + 3 * A, 0.3, 0.05
    t_hit = (-u - math.sqrt(u * u - 2 * gx * (x0 - R - A))) / gx
    r = simulate_state(one((x0, 0, z0), (u, 0, w)), [Cup(radius=R, height=H)], duration=1.01 * t_hit,
                       gravity=(gx, 0, -G), restitution=0.5, max_cells=max_cells)
    ev = r.events
    assert len(ev) == 1 and ev.element[0] == 1
    assert ev.t[0] == pytest.approx(t_hit, rel=1e-10)
    np.testing.assert_allclose(ev.normal[0], [1, 0, 0], atol=1e-12)
    assert 0 < ev.point[0, 2] < H


@pytest.mark.parametrize("off", [0.0, 0.5])
def test_grain_falling_on_rim(off):
    """Falling onto the rim circle (radius R, height H) with its centre at rho = R + off a: contact when
    (rho - R)^2 + dz^2 = a^2, i.e. dz = a sqrt(1 - off^2), normal (off, 0, sqrt(1 - off^2)); element 3 (rim)."""
    z0 = 0.05
    ev = simulate(one((0.02 + off * A, 0, z0)), [CUP], duration=0.2, restitution=0.5)
    dz = A * math.sqrt(1 - off * off)
    assert ev.element[0] == 3
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (z0 - 0.03 - dz) / G), rel=1e-10)
    np.testing.assert_allclose(ev.normal[0], [off, 0, math.sqrt(1 - off * off)], atol=1e-9)
    np.testing.assert_allclose(ev.point[0], [0.02, 0, 0.03], atol=1e-12)


def test_disk_hit_from_below_and_tube_without_bottom():
    """A disk is two-sided: a grain thrown up under it hits its underside at the closed-form time (normal down,
    element 0). A tube has no bottom: a grain inside falls through to the floor at the free-fall time."""
    w, z0, zd = 1.0, 0.01, 0.04
    ev = simulate(one((0.002, 0, z0), (0, 0, w)), [Disk((0, 0, zd), 0.01, body="lid")], duration=0.1,
                  restitution=0.5)
    h = zd - A - z0
    assert ev.containers == ("lid",) and ev.element[0] == 0
    assert ev.t[0] == pytest.approx((w - math.sqrt(w * w - 2 * G * h)) / G, rel=1e-12)
    np.testing.assert_allclose(ev.normal[0], [0, 0, -1])
    tube = Cylinder(center_xy=(0, 0), radius=0.01, z_min=0.01, z_max=0.05, body="tube")
    ev = simulate(one((0, 0.003, 0.03)), [Floor(0.0), tube], duration=0.2, restitution=0.5)
    assert ev.containers[ev.id_b[0]] == "floor"
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (0.03 - A) / G), rel=1e-12)


FUNNEL = Cone.funnel(z_hole=0.05, hole_radius=0.003, half_angle=35.0, height=0.03)


def test_grain_falls_through_funnel_hole():
    """A grain on the axis above the hole (radius 3 mm > a) falls through without touching the funnel and lands
    on the floor at the free-fall time."""
    ev = simulate(one((0, 0, 0.07)), [Floor(0.0), FUNNEL], duration=0.2, restitution=0.5)
    assert ev.containers[ev.id_b[0]] == "floor"
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (0.07 - A) / G), rel=1e-12)


def test_grain_hits_cone_face_then_drains():
    """A grain dropped at rho0 inside the funnel meets the face when (z - z_apex) sin(al) - rho0 cos(al) = a
    (closed form), normal (-cos al, 0, sin al); it then slides down and leaves through the hole."""
    tn, sn, cs, za = FUNNEL.geometry()
    rho0, z0 = 0.012, 0.079
    r = simulate_state(one((rho0, 0, z0)), [Floor(0.0), FUNNEL], duration=0.5, restitution=0.5)
    ev = r.events
    zc = za + (A + rho0 * cs) / sn
    assert ev.containers[ev.id_b[0]] == "funnel" and ev.element[0] == 0
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (z0 - zc) / G), rel=1e-10)
    np.testing.assert_allclose(ev.normal[0], [-cs, 0, sn], atol=1e-9)
    np.testing.assert_allclose(ev.point[0], [rho0 + A * cs, 0, zc - A * sn], atol=1e-12)
    # released 0.1 mm from the face, the grain slides down in many small bounces and leaves through the hole
    rho1 = FUNNEL.r_bottom + (z0 - FUNNEL.z_bottom) * tn - (A + 1e-4) / cs
    r = simulate_state(one((0, rho1, z0)), [Floor(0.0), FUNNEL], duration=0.5, restitution=0.5)
    names = np.array(r.events.containers)[r.events.id_b]
    assert (names == "funnel").sum() > 10 and names[-1] == "floor"
    assert r.events.t[names == "floor"].min() > r.events.t[names == "funnel"].max()
    assert r.final.positions[0, 2] < 0.05                                   # below the hole


def test_static_sphere_hit_closed_form():
    """A grain falling past a static sphere (radius R) with horizontal offset b hits it when the vertical gap is
    sqrt((R + a)^2 - b^2); the element is the sphere's index."""
    R, b, z0 = 3e-3, 2e-3, 0.02
    walls = [StaticSpheres(np.array([[0.05, 0, 0], [0.0, 0, 0]]), R, body="pile")]
    ev = simulate(one((b, 0, z0)), walls, duration=0.1, restitution=0.5)
    dz = math.sqrt((R + A) ** 2 - b * b)
    assert ev.containers == ("pile",) and ev.element[0] == 1
    assert ev.t[0] == pytest.approx(math.sqrt(2 * (z0 - dz) / G), rel=1e-10)
    np.testing.assert_allclose(ev.normal[0], [b / (R + A), 0, dz / (R + A)], atol=1e-10)


def _brute_force_events(pos, vel, L, a, e, n_events):
    """Reference: the plain event-driven loop with every pair and wall tested at every step (no cells, no queue,
    no stale events), for equal grains in a box without gravity. Returns [(t, kind, i, j)] (j: wall axis)."""
    pos, vel = pos.copy(), vel.copy()
    n, t, out = len(pos), 0.0, []
    iu, ju = np.triu_indices(n, 1)
    for _ in range(n_events):
        d, u = pos[iu] - pos[ju], vel[iu] - vel[ju]
        b, c, q = (d * u).sum(1), (d * d).sum(1) - 4 * a * a, (u * u).sum(1)
        disc = b * b - q * c
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = np.where((b < 0) & (disc >= 0), c / (-b + np.sqrt(np.abs(disc))), np.inf)
            tw = np.where(vel < 0, (pos - a) / -vel, np.where(vel > 0, (L - a - pos) / vel, np.inf))
        k, w = int(np.argmin(tp)), int(np.argmin(tw))
        dt = min(tp[k], tw.flat[w])
        pos += vel * dt
        t += dt
        if tp[k] <= tw.flat[w]:
            i, j = iu[k], ju[k]
            nrm = (pos[i] - pos[j]) / np.linalg.norm(pos[i] - pos[j])
            jn = (1 + e) / 2 * np.dot(vel[i] - vel[j], nrm)
            vel[i] -= jn * nrm
            vel[j] += jn * nrm
            out.append((t, GRAIN, i, j))
        else:
            i, ax = divmod(w, 3)
            vel[i, ax] *= -e
            out.append((t, CONTAINER, i, ax))
    return out


def test_first_events_match_brute_force_loop():
    """The cell lists, tournament tree and stale-event counters find exactly the collisions the plain loop finds
    (the first 100 events, 60 % grain pairs, of 40 grains in a box, e = 0.9: before chaos amplifies round-off)."""
    gs, L = gas(40, 0.15, seed=7)
    ref = _brute_force_events(gs.positions, gs.velocities, L, A, 0.9, 100)
    ev = simulate(gs, box_walls(L), duration=ref[-1][0] * (1 + 1e-9), restitution=0.9, gravity=(0, 0, 0),
                  v_rest=0.0, v_elastic=0.0)
    assert len(ev) == 100
    np.testing.assert_allclose(ev.t, [r[0] for r in ref], rtol=1e-9)
    np.testing.assert_array_equal(ev.kind, [r[1] for r in ref])
    np.testing.assert_array_equal(ev.id_a, [r[2] for r in ref])
    grain = ev.kind == GRAIN
    np.testing.assert_array_equal(ev.id_b[grain], [r[3] for r in ref if r[1] == GRAIN])
    # the wall hit: the wall's outward axis agrees with the normal
    axes = np.argmax(np.abs(ev.normal[~grain]), axis=1)
    np.testing.assert_array_equal(axes, [r[3] for r in ref if r[1] == CONTAINER])


# -------------------------------------------------------------------------------------- conservation
def test_energy_and_momentum_conserved_in_elastic_gas():
    """e = 1, no gravity, 400 grains in a box of walls, > 1e4 collisions: kinetic energy to 1e-12; the change of
    total momentum equals the walls' impulses 2 m v0 n summed over the container events (grain pairs conserve
    it)."""
    gs, L = gas(400, 0.2)
    r = simulate_state(gs, box_walls(L), duration=0.02, **ELASTIC)
    ev = r.events
    assert (ev.kind == GRAIN).sum() > 10_000
    E0 = np.sum(gs.velocities ** 2)
    assert np.sum(r.final.velocities ** 2) == pytest.approx(E0, rel=1e-12)
    wall = ev.kind == CONTAINER
    dP = r.final.velocities.sum(axis=0) - gs.velocities.sum(axis=0)
    walls = (2 * ev.v0[wall, None] * ev.normal[wall]).sum(axis=0)
    scale = np.abs(2 * ev.v0[wall, None] * ev.normal[wall]).sum()
    np.testing.assert_allclose(dP, walls, atol=1e-12 * scale)


def _enskog_check(n, phi, t_eq, t_run, tol):
    """Collision rate density in the interior of a box (contact points >= 2.5 diameters from the walls) against
    Enskog: (1/2) n z with z = 4 n sigma^2 sqrt(pi kT/m) g(sigma), g = (1 - phi/2)/(1 - phi)^3 (Carnahan-Starling),
    kT/m = <v^2>/3; n and phi measured in the interior from snapshots."""
    gs, L = gas(n, phi)
    snaps = np.linspace(t_eq, t_eq + t_run, 40)
    r = simulate_state(gs, box_walls(L), duration=t_eq + t_run, snapshots=snaps, **ELASTIC)
    sig = 2 * A
    m = 2.5 * sig
    V_in = (L - 2 * m) ** 3
    inside = ((r.snapshot_positions > m) & (r.snapshot_positions < L - m)).all(axis=2)
    n_in = inside.sum(axis=1).mean() / V_in
    phi_in = n_in * math.pi / 6 * sig ** 3
    kT = np.mean(np.sum(gs.velocities ** 2, axis=1)) / 3
    g = (1 - phi_in / 2) / (1 - phi_in) ** 3
    z = 4 * n_in * sig ** 2 * math.sqrt(math.pi * kT) * g
    ev = r.events
    sel = (ev.kind == GRAIN) & (ev.t >= t_eq) & ((ev.point > m) & (ev.point < L - m)).all(axis=1)
    measured = sel.sum() / (V_in * t_run)
    assert sel.sum() > 5000
    print(f"phi {phi}: interior phi {phi_in:.4f}, measured / Enskog = {measured / (0.5 * n_in * z):.4f}, "
          f"{sel.sum()} collisions")
    assert measured == pytest.approx(0.5 * n_in * z, rel=tol), (measured / (0.5 * n_in * z), phi_in)


def test_collision_frequency_matches_enskog():
    _enskog_check(2000, 0.25, t_eq=0.01, t_run=0.03, tol=0.04)


@pytest.mark.slow
@pytest.mark.parametrize("phi", [0.1, 0.2, 0.3])
def test_collision_frequency_matches_enskog_converged(phi):
    _enskog_check(8000, phi, t_eq=0.02, t_run=0.1, tol=0.015)


# ---------------------------------------------------------------------------------------- pours
def _cup_pour(n, seed=3, **kw):
    funnel = Cone.funnel(z_hole=0.06, hole_radius=0.0035, half_angle=35.0, height=0.03)
    cup = Cup(radius=0.009, z_bottom=0.0, height=0.03)
    gs = pour_grains(n, (A, 0.1 * A), region=funnel, z_range=(0.062, 0.09), seed=seed)
    return gs, [Floor(0.0), cup, funnel]


def test_dense_pour_into_cup_never_overlaps():
    """150 grains from a funnel into a narrow cup (a pile several layers deep, grains freezing): after every
    collision a brute-force check over all pairs and walls finds no overlap beyond 1e-9 of a radius; snapshots
    checked independently (k-d tree) agree; the log is a valid table and every grain ends frozen."""
    gs, walls = _cup_pour(150)
    snaps = np.linspace(0, 1.0, 200)
    r = simulate_state(gs, walls, duration=1.0, snapshots=snaps, debug=True)
    assert r.stats["max_overlap"] < 1e-9
    for P in r.snapshot_positions:
        tree = cKDTree(P)
        pairs = tree.query_pairs(2 * 1.1 * A, output_type="ndarray")
        d = np.linalg.norm(P[pairs[:, 0]] - P[pairs[:, 1]], axis=1)
        assert (d >= (gs.radii[pairs[:, 0]] + gs.radii[pairs[:, 1]]) * (1 - 1e-9)).all()
    ev = r.events
    assert len(ev) > 5000 and set(np.unique(ev.id_b[ev.kind == CONTAINER])) == {0, 1, 2}
    assert ev.containers == ("floor", "cup", "funnel")
    inside = (np.hypot(r.final.positions[:, 0], r.final.positions[:, 1]) < 0.009) & (r.final.positions[:, 2] < 0.03)
    assert inside.sum() > 100 and r.final.frozen[inside].all()          # (some bounce out and roam the floor)
    top = r.final.positions[inside, 2].max()
    assert top > 4 * A                                                  # several layers
    grain = ev.kind == GRAIN
    np.testing.assert_allclose(np.linalg.norm(ev.normal, axis=1), 1.0, atol=1e-12)
    assert (ev.id_a[grain] < ev.id_b[grain]).all()


def test_same_inputs_give_identical_events():
    gs, walls = _cup_pour(120)
    a = simulate(gs, walls, duration=0.6)
    gs2, walls2 = _cup_pour(120)
    b = simulate(gs2, walls2, duration=0.6)
    for k, col in a.columns().items():
        assert col.tobytes() == b.columns()[k].tobytes(), k
    c = simulate(*_cup_pour(120, seed=4), duration=0.6)
    assert len(c) != len(a) or not np.array_equal(c.t, a.t)


def test_nozzle_stream_at_rate():
    """A stream of 60 grains at 200 grains/s from a nozzle 6 cm above a cup: grain k enters at k/200 s; its first
    hit comes after its entry; all enter (the nozzle passes the rate); the progress callback sees the run end."""
    gs = pour_grains(60, A, nozzle=(0, 0, 0.06), rate=200.0, exit_speed=0.2, seed=2)
    np.testing.assert_allclose(gs.release, np.arange(60) / 200.0)
    seen = []
    r = simulate_state(gs, [Floor(0.0), CUP], duration=0.6, progress=lambda t, n: seen.append((t, n)))
    assert r.stats["released"] == 59                                    # grain 0 is there from the start
    assert r.stats["postponed"] <= 3                                    # entry points chosen clear of the stream
    ev = r.events
    first = np.array([ev.t[(ev.id_a == i) | ((ev.kind == GRAIN) & (ev.id_b == i))].min() for i in range(60)])
    assert (first > gs.release).all()
    w = -gs.velocities[0, 2]                                            # grain 0 falls freely to the cup bottom
    assert first[0] == pytest.approx((np.sqrt(w * w + 2 * G * (0.06 - A)) - w) / G, rel=1e-12)
    assert seen[-1] == (0.6, r.stats["collisions"]) and all(b[0] >= a[0] for a, b in zip(seen, seen[1:]))
    with pytest.raises(InputError, match="do not fit through a nozzle"):
        pour_grains(60, A, nozzle=(0, 0, 0.06), rate=1e5, exit_speed=0.2)


def test_pour_grains_regions():
    """Random placement inside a cup, a tube, a funnel and a box: every grain inside with the gap to the walls,
    no two closer than their radii plus the gap (all pairs), radii within mean +- spread; same seed, same grains."""
    from scipy.spatial.distance import pdist
    gap = 1e-4
    cases = [(CUP, None), (Cylinder(radius=0.01, z_min=0.0, z_max=0.02), None), (FUNNEL, (0.055, 0.08)),
             (((0, 0, 0), (0.02, 0.01, 0.01)), None)]
    for region, zr in cases:
        g = pour_grains(80, (A, 0.2 * A), region=region, z_range=zr, gap=gap, seed=11)
        p, r = g.positions, g.radii
        assert (np.abs(r - A) <= 0.2 * A).all() and r.std() > 0
        iu = np.triu_indices(len(r), 1)
        assert (pdist(p) >= (r[:, None] + r[None, :])[iu] + gap * (1 - 1e-9)).all()
        if isinstance(region, Cone):
            tn, sn, cs, za = region.geometry()
            assert ((p[:, 2] - za) * sn - np.hypot(p[:, 0], p[:, 1]) * cs >= r + gap - 1e-12).all()
            assert (p[:, 2] - r >= zr[0] + gap - 1e-12).all() and (p[:, 2] + r <= zr[1] - gap + 1e-12).all()
        elif isinstance(region, tuple):
            assert ((p - r[:, None] >= -1e-12) & (p + r[:, None] <= np.array(region[1]) + 1e-12)).all()
        else:
            assert (np.hypot(p[:, 0], p[:, 1]) + r <= region.radius - gap + 1e-12).all()
        again = pour_grains(80, (A, 0.2 * A), region=region, z_range=zr, gap=gap, seed=11)
        assert again.positions.tobytes() == p.tobytes() and again.velocities.tobytes() == g.velocities.tobytes()


def test_restitution_table_per_material_and_body():
    gs = GrainSet(positions=[[0, 0, 0.01], [0.005, 0, 0.01]], velocities=[[0, 0, 0], [0, 0, 0]], radii=[A, A],
                  material=[0, 1], materials=("glass", "steel"))
    table = {("glass", "floor"): 0.3, ("steel", "floor"): 0.6, "default": 0.9}
    ev = simulate(gs, Floor(0.0), duration=0.15, restitution=table, v_rest=0.0)
    first = [np.flatnonzero(ev.id_a == i)[0] for i in (0, 1)]
    np.testing.assert_allclose(ev.e[first], [0.3, 0.6])
    second = [np.flatnonzero(ev.id_a == i)[1] for i in (0, 1)]
    np.testing.assert_allclose(ev.v0[second] / ev.v0[first], [0.3, 0.6], rtol=1e-12)
    with pytest.raises(InputError, match="no value for"):
        simulate(gs, Floor(0.0), duration=0.05, restitution={("glass", "floor"): 0.3})


def test_pre_filled_cup_from_final_state():
    """A settled pile (the final state of one pour, frozen) pre-fills the cup of a second pour: its grains stay
    put, and the new grains' hits on them are grain events."""
    gs, walls = _cup_pour(60)
    first = simulate_state(gs, walls, duration=1.0).final
    keep = first.frozen & (np.hypot(first.positions[:, 0], first.positions[:, 1]) < 0.009)
    first = GrainSet(positions=first.positions[keep], velocities=first.velocities[keep], radii=first.radii[keep],
                     frozen=first.frozen[keep])
    n0 = int(keep.sum())
    assert n0 > 10
    new = pour_grains(20, A, region=((-0.005, -0.005, 0.04), (0.005, 0.005, 0.06)), seed=9)
    both = GrainSet(positions=np.vstack([first.positions, new.positions]),
                    velocities=np.vstack([first.velocities, new.velocities]),
                    radii=np.concatenate([first.radii, new.radii]), frozen=np.r_[first.frozen, np.zeros(20, bool)])
    r = simulate_state(both, walls, duration=0.5)
    np.testing.assert_array_equal(r.final.positions[:n0], first.positions)
    ev = r.events
    on_pile = (ev.kind == GRAIN) & (ev.id_a < n0) & (ev.id_b >= n0)
    assert on_pile.sum() > 0


# -------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("change,match", [
    (dict(positions=[[0, 0, 0.01], [0.0015, 0, 0.01]]), r"grains 0 and 1 overlap by 0.0005"),
    (dict(radii=[A, 0.0]), r"grain 1 has radius 0.0"),
    (dict(radii=[A, -1e-3]), r"grain 1 has radius -0.001"),
    (dict(positions=[[0, 0, 0.01], [np.nan, 0, 0.01]]), r"grain 1 has a NaN"),
    (dict(velocities=[[0, 0, 0], [0, np.inf, 0]]), r"grain 1 has a NaN or infinite entry in velocities"),
    (dict(positions=[[0, 0, 0.01], [0.01, 0, 0.0005]]), r"grain 1 .*Floor 'floor' floor"),
])
def test_bad_grains_named(change, match):
    base = dict(positions=[[0, 0, 0.01], [0.01, 0, 0.01]], velocities=[[0, 0, 0], [0, 0, 0]], radii=[A, A])
    base.update(change)
    with pytest.raises(InputError, match=match):
        simulate(GrainSet(**base), Floor(0.0), duration=0.1)


def test_bad_settings_named():
    g = one((0, 0, 0.01))
    for kw, match in [(dict(restitution=0.0), "restitution"), (dict(restitution=1.2), "restitution"),
                      (dict(duration=0.0), "duration"), (dict(duration=-1.0), "duration"),
                      (dict(gravity=(0, np.nan, 0)), "gravity")]:
        args = dict(duration=0.1)
        args.update(kw)
        with pytest.raises(InputError, match=match):
            simulate(g, Floor(0.0), **args)
    with pytest.raises(InputError, match=r"grain 0 .*cuts into Cup 'cup' wall"):
        simulate(one((0.0195, 0, 0.01)), CUP, duration=0.1)
    with pytest.raises(InputError, match=r"grain 0 .*cuts into Cone 'funnel' face"):
        simulate(one((0.0164, 0, 0.07)), FUNNEL, duration=0.1)
    with pytest.raises(InputError, match="r_top > r_bottom"):
        simulate(g, Cone(r_bottom=0.01, r_top=0.005), duration=0.1)
    with pytest.raises(InputError, match="only .* of 5000 grains fit"):
        pour_grains(5000, A, region=FUNNEL)
