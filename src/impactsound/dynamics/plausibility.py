"""Plausibility of a contact-event log written by another engine (or by hand) against the scene it renders.

:meth:`EventLog.validate` checks the format (NaN, unit normals, sorted times, known bodies). A log can pass it and
still be physically wrong in ways that render garbage without any error: times in milliseconds (silence), forces
written where impulses belong (thousands of pascals), points in millimetres, an impulse with the wrong sign, a
ground that the scene disabled. :func:`check_event_log` compares every event with what the scene allows:

* time: 0 <= t <= duration (events after the end would be dropped; all of them late but fitting after /1000
  reads as milliseconds);
* ground: body -1 only when the scene has a ground; the normal of a ground contact points away from the plane
  (the ground is z = height with normal +z, scene/model.py), up when body_a is the ground;
* sign: the impulse is the one on body_b and the normal points from body_a to body_b, so a contact pushes apart:
  J . n > 0 (the normal contact force is compressive; Stronge 2000, "Impact Mechanics", ch. 2);
* magnitude: a two-body collision with approach speed v_n transfers a normal impulse of at most
  (1 + e) m_eff v_n with restitution e <= 1 and effective mass 1/m_eff = 1/m_a + 1/m_b + rotational terms
  (Stronge 2000, ch. 2-4; effective mass as in Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise",
  eq. 9), so
  m_eff <= min(m_a, m_b).
  The bound used is 2 m v_n with m the *heavier* body's mass, times :data:`IMPULSE_SAFETY`: simultaneous contacts
  share a body's momentum unevenly (a bar landing flat takes twice (1 + e) m_eff v_n at each end), a light body
  sandwiched between a heavy one and the floor passes on the heavy one's momentum, and friction adds at most
  mu J_n to |J|. A force written instead of an impulse (N instead of N s) is off by 1/dt, i.e. 1e2-1e4;
* contact point: within a tolerance of the surface of each body involved, at its pose in the log (distance to the
  mesh or to its convex hull, which is what most engines collide), and on the ground plane for ground contacts;
  points in millimetres are ~1000x too far. Rows without a pose are compared with the body's start pose in the
  scene, widened by how far it can have travelled by then;
* quaternions of the pose columns have unit norm.

Events slower than v_min are not checked for their impulse: the render drops them (resting contact; v_min =
5 cm/s as in the PAN paper, sec. 4.3). Every message names the file, the row (CSV rows counted like a spreadsheet: the
header is row 1; NPZ rows are array indices), the column and the fix. ``allow_implausible`` turns the errors
into :class:`ImplausibleEventWarning`\\ s (one per kind of problem).
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from ..errors import InputError
from .events import GROUND, EventLog, EventLogWarning
from .hygiene import V_MIN

__all__ = ["ImplausibleEventWarning", "check_event_log", "IMPULSE_SAFETY", "FORCE_RATIO", "POINT_TOL_ABS",
           "POINT_TOL_REL"]

IMPULSE_SAFETY = 5.0     # |J| may reach this many times 2 m v_n (see the module docstring)
FORCE_RATIO = 100.0      # beyond this many times 2 m v_n, the column most likely holds forces [N]
POINT_TOL_ABS = 5e-3     # [m] contact points may lie this far from a surface (engine penetration, merged points)
POINT_TOL_REL = 0.1      # ... or this fraction of the body's bounding-box diagonal, whichever is larger
G = 9.81                 # [m/s^2] bounds how far a body without a logged pose can have fallen
ALLOW_HINT = "render anyway with --allow-implausible (API: allow_implausible=True)"


class ImplausibleEventWarning(EventLogWarning):
    """An event log failed a plausibility check and ``allow_implausible`` was given: it is rendered anyway."""


def _fmt(v) -> str:
    return "(" + ", ".join(f"{float(x) + 0.0:.4g}" for x in np.atleast_1d(v)) + ")"      # + 0.0: no "-0"


class _Ctx:
    """What every check needs to word its message."""

    def __init__(self, log: EventLog, bodies, source: str, row_base: int, npz: bool):
        self.log, self.bodies, self.source, self.row_base, self.npz = log, bodies, source, row_base, npz

    def name(self, i: int) -> str:
        return "ground" if i == GROUND else (self.bodies[i].name if 0 <= i < len(self.bodies) else str(i))

    def cols(self, key: str, side: str = "") -> str:
        if self.npz:
            return {"t": "t", "a": "a", "b": "b", "vn": "vn"}.get(key, key + (f"_{side}" if side else ""))
        return {"t": "time", "a": "body_a", "b": "body_b", "vn": "vn", "point": "px,py,pz", "normal": "nx,ny,nz",
                "impulse": "jx,jy,jz", "pos": f"{side}x,{side}y,{side}z",
                "quat": f"{side}qw,{side}qx,{side}qy,{side}qz"}[key]

    def where(self, bad: np.ndarray, col: str) -> tuple[int, str]:
        i = int(np.flatnonzero(bad)[0])
        what = "column" if "," not in col else "columns"
        return i, f"{self.source}: row {i + self.row_base}, {what} {col}"

    def count(self, bad: np.ndarray) -> str:
        return f"{int(bad.sum())} of {len(self.log)} events"


def _check_ground(c: _Ctx, ground_enabled: bool, ground_height: float) -> list[str]:
    log, out = c.log, []
    on_ground = (log.a == GROUND) | (log.b == GROUND)
    if not ground_enabled and on_ground.any():
        col = c.cols("a") if log.a[on_ground][0] == GROUND else c.cols("b")
        _, head = c.where(on_ground, col)
        out.append(f"{head}: 'ground', but the scene's ground is disabled ([ground] enabled = false) "
                   f"({c.count(on_ground)}); enable the ground or name the object that was hit")
        return out
    # the plane's normal is +z: from the ground (a) up into the body, or from the body down into the ground (b)
    up = np.where(log.a == GROUND, 1.0, -1.0)
    wrong = on_ground & (up * log.normal[:, 2] <= 0)
    if wrong.any():
        i, head = c.where(wrong, c.cols("normal"))
        out.append(f"{head}: the normal {_fmt(log.normal[i])} of the contact of body_a {c.name(log.a[i])} with "
                   f"body_b {c.name(log.b[i])} does not point from body_a to body_b (the ground's normal is +z) "
                   f"({c.count(wrong)}); flip {c.cols('normal')} and {c.cols('impulse')}, or swap body_a and body_b")
    return out


def _check_times(c: _Ctx, duration: float) -> list[str]:
    t = c.log.t
    late = t > duration
    if not late.any():
        return []
    i, head = c.where(late, c.cols("t"))
    msg = (f"{head}: t = {t[i]:g} s is after the scene's duration {duration:g} s ({c.count(late)}); ")
    # milliseconds: most rows late, all fit once divided by 1000, and the values far beyond the scene's length
    # (a log merely too long for the scene, e.g. 0.6-1.5 s in a 0.5 s scene, is not read as milliseconds)
    if late.sum() * 2 >= len(t) and t.max() / 1000.0 <= duration and t.max() > 20.0 * duration:
        return [msg + "the times look like milliseconds: give them in seconds (divide the column by 1000)"]
    return [msg + "the render would drop them: lengthen [scene] duration or remove those rows"]


def _check_quaternions(c: _Ctx) -> list[str]:
    out = []
    for side in ("a", "b"):
        q = getattr(c.log, f"quat_{side}")
        nq = np.linalg.norm(q, axis=1)
        bad = np.isfinite(nq) & (np.abs(nq - 1.0) > 1e-2)
        if bad.any():
            i, head = c.where(bad, c.cols("quat", side))
            out.append(f"{head}: |q| = {nq[i]:.4g} is not a unit quaternion ({c.count(bad)}); give the body's "
                       "orientation as a unit quaternion in the order w, x, y, z")
    return out


def _check_sign(c: _Ctx) -> list[str]:
    log = c.log
    jn = np.einsum("ij,ij->i", log.impulse, log.normal)
    jabs = np.linalg.norm(log.impulse, axis=1)
    bad = jn < -1e-9 * jabs
    if not bad.any():
        return []
    i, head = c.where(bad, c.cols("impulse"))
    return [f"{head}: the impulse {_fmt(log.impulse[i])} N s pulls body_b {c.name(log.b[i])} towards body_a "
            f"{c.name(log.a[i])} (J.n = {jn[i]:.4g} N s < 0) ({c.count(bad)}); give the impulse on body_b, which "
            f"pushes it away from body_a along the normal (from body_a to body_b): flip the sign of "
            f"{c.cols('impulse')}, or of {c.cols('normal')} if the normal points from body_b to body_a"]


def _check_impulse(c: _Ctx) -> list[str]:
    log = c.log
    # index -1 (ground) -> 0. A static or fixed body keeps its own mass here: the bound stays as loose as for a
    # free body of that mass (an engine's merged collision of a body landing flat on a prop carries more than
    # 2 m vn of the lighter body)
    mass = np.array([float(b.mass) for b in c.bodies] + [0.0])
    m = np.maximum(mass[log.a], mass[log.b])
    vn = log.vn
    jabs = np.linalg.norm(log.impulse, axis=1)
    checked = vn >= V_MIN
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(checked, jabs / (2.0 * m * vn), 0.0)
    bad = ratio > IMPULSE_SAFETY
    if not bad.any():
        return []
    i, head = c.where(bad, c.cols("impulse"))
    heavy = log.a[i] if mass[log.a[i]] >= mass[log.b[i]] else log.b[i]
    x = f"{ratio[i]:.3g}" if ratio[i] < 1000 else f"{ratio[i]:.0f}"
    msg = (f"{head}: |J| = {jabs[i]:.4g} N s is {x}x the most a collision at vn = {vn[i]:.4g} m/s can "
           f"transfer (2 m vn = {2 * m[i] * vn[i]:.4g} N s with m = {m[i]:.4g} kg of {c.name(heavy)}) "
           f"({c.count(bad)}); ")
    if np.median(ratio[bad]) >= FORCE_RATIO:
        return [msg + "is it a force (N) rather than an impulse (N s)? give the force summed over the collision's "
                "time steps times the step, sum(f dt)"]
    return [msg + f"check that {c.cols('impulse')} is the impulse in N s and vn the approach speed in m/s"]


def _check_held(c: _Ctx) -> list[str]:
    """A static prop or a fixed body never moves: a logged pose of it must be its scene pose (within 1 mm and
    1e-3 in the quaternion), and an event between two such bodies cannot happen."""
    log, out = c.log, []
    held = np.array([getattr(b, "immovable", False) for b in c.bodies] + [True])     # the ground too (-1)
    both = held[log.a] & held[log.b]
    if both.any():
        i, head = c.where(both, c.cols("a") + "," + c.cols("b"))
        out.append(f"{head}: an event between {c.name(log.a[i])} and {c.name(log.b[i])}, which never move "
                   f"(static, fixed or the ground) ({c.count(both)}); drop these rows")
    for side in ("a", "b"):
        ids = getattr(log, side)
        pos, quat = getattr(log, f"pos_{side}"), getattr(log, f"quat_{side}")
        moved = np.zeros(len(log), bool)
        for k in np.unique(ids[(ids >= 0)]):
            b = c.bodies[int(k)]
            if not getattr(b, "immovable", False):
                continue
            sel = ids == k
            logged = sel & np.isfinite(pos).all(axis=1) & np.isfinite(quat).all(axis=1)
            qn = quat / np.linalg.norm(np.where(np.isfinite(quat), quat, 1.0), axis=1, keepdims=True)
            dq = np.minimum(np.abs(qn - b.quaternion).max(axis=1), np.abs(qn + b.quaternion).max(axis=1))
            moved |= logged & ((np.linalg.norm(pos - b.position, axis=1) > 1e-3) | (dq > 1e-3))
        if moved.any():
            i, head = c.where(moved, c.cols("pos", side))
            k = int(ids[i])
            out.append(f"{head}: body {c.name(k)} is {c.bodies[k].mount.kind} (it never moves) but the log puts it "
                       f"at {_fmt(pos[i])} m, not at its scene position {_fmt(c.bodies[k].position)} m "
                       f"({c.count(moved)}); log its scene pose or leave its pose columns empty")
    return out


def _surface_distance(body, pts_body: np.ndarray, exact_far: int = 20) -> np.ndarray:
    """Distance [m] of body-frame points from the body: the nearer of its surface and its convex hull's.

    Points outside the body's bounding sphere (radius r about the centre of mass) are at least |x| - r away; that
    bound stands in for all but ``exact_far`` of them (evenly spread, the first included), because exact queries
    far from a mesh are slow and any such point fails the check anyway."""
    import trimesh
    mesh = body.mesh
    r = float(np.linalg.norm(mesh.vertices, axis=1).max())
    lower = np.linalg.norm(pts_body, axis=1) - r
    d = np.maximum(lower, 0.0)
    far = np.flatnonzero(lower > 0)
    exact = np.setdiff1d(np.arange(len(pts_body)), np.setdiff1d(far, far[::max(1, len(far) // exact_far)]))
    if len(exact):
        x = pts_body[exact]
        de = np.abs(trimesh.proximity.closest_point(mesh, x)[1])
        try:
            de = np.minimum(de, np.abs(trimesh.proximity.closest_point(mesh.convex_hull, x)[1]))
        except Exception:               # a degenerate hull: the mesh distance alone
            pass
        d[exact] = de
    return d


def _check_points(c: _Ctx, ground_enabled: bool, ground_height: float) -> list[str]:
    log, bodies = c.log, c.bodies
    n = len(log)
    size = np.array([float(np.linalg.norm(b.mesh.extents)) for b in bodies] + [0.0])
    # how far a body without a logged pose can be from its start pose at time t: its start speed (with spin at
    # its rim), doubled for a hit from another body, plus free fall
    v0 = max([float(np.linalg.norm(b.velocity)) + float(np.linalg.norm(b.angular_velocity)) * s / 2
              for b, s in zip(bodies, size)] + [0.0])
    reach = 2.0 * (v0 + G * log.t) * log.t
    excess = np.full(n, -np.inf)        # distance minus tolerance, worst over the surfaces involved
    excess_mm = np.full(n, -np.inf)     # the same with the point (and a logged pose) divided by 1000
    pose_mm = np.zeros(n, bool)         # ... where only dividing the logged pose too puts it on the body
    worst = np.zeros(n, np.int64)       # which surface: 0 body_a, 1 body_b, 2 the ground plane
    dist, tols = np.zeros(n), np.zeros(n)
    poses = {}
    for s_i, side in enumerate(("a", "b")):
        ids = getattr(log, side)
        pos, quat = getattr(log, f"pos_{side}"), getattr(log, f"quat_{side}")
        for k in np.unique(ids[ids != GROUND]):
            sel = np.flatnonzero(ids == k)
            body = bodies[int(k)]
            logged = np.isfinite(pos[sel]).all(axis=1) & np.isfinite(quat[sel]).all(axis=1)
            p = np.where(logged[:, None], pos[sel], np.asarray(body.position, np.float64))
            from ..rotation import quat_to_matrix
            R = quat_to_matrix(np.where(logged[:, None], quat[sel], np.asarray(body.quaternion, np.float64)))
            tol = max(POINT_TOL_ABS, POINT_TOL_REL * size[k]) + np.where(logged, 0.0, reach[sel])
            x = log.point[sel]
            e = _surface_distance(body, np.einsum("nji,nj->ni", R, x - p)) - tol
            far = np.flatnonzero(e > 0)                     # only those (at most ~200 of them) tried in millimetres
            far = far[::max(1, len(far) // 200)]
            e_mm = np.where(e > 0, np.nan, -np.inf)
            if len(far):
                Rf, pf, xf = R[far], p[far], x[far]
                d1 = _surface_distance(body, np.einsum("nji,nj->ni", Rf, xf / 1000 - pf))
                d2 = _surface_distance(body, np.einsum("nji,nj->ni", Rf, (xf - pf) / 1000))
                d2 = np.where(logged[far], d2, np.inf)
                e_mm[far] = np.minimum(d1, d2) - tol[far]
                pose_mm[sel[far]] |= (d2 <= tol[far]) & (d1 > tol[far])
            worse = e > excess[sel]
            worst[sel[worse]], dist[sel[worse]], tols[sel[worse]] = s_i, (e + tol)[worse], tol[worse]
            for j in np.flatnonzero(worse):
                poses[(int(sel[j]), s_i)] = (p[j], bool(logged[j]))
            excess[sel] = np.maximum(excess[sel], e)
            excess_mm[sel] = np.maximum(excess_mm[sel], e_mm)
    if ground_enabled:
        tol_g = np.maximum(POINT_TOL_ABS, POINT_TOL_REL * np.maximum(size[log.a], size[log.b]))
        on_ground = (log.a == GROUND) | (log.b == GROUND)
        dz = np.abs(log.point[:, 2] - ground_height)
        dz_mm = np.abs(log.point[:, 2] / 1000 - ground_height)
        worse = on_ground & (dz - tol_g > excess)
        worst[worse], dist[worse], tols[worse] = 2, dz[worse], tol_g[worse]
        excess = np.where(on_ground, np.maximum(excess, dz - tol_g), excess)
        excess_mm = np.where(on_ground, np.maximum(excess_mm, dz_mm - tol_g), excess_mm)
    bad = excess > 0
    if not bad.any():
        return []
    i, head = c.where(bad, c.cols("point"))
    if worst[i] == 2:
        what = f"{dist[i]:.4g} m from the ground plane z = {ground_height:g} m (tolerance {tols[i]:.3g} m)"
    else:
        side = "ab"[worst[i]]
        k = int(getattr(log, side)[i])
        p, logged = poses[(i, int(worst[i]))]
        pose = (f"at its pose {_fmt(p)} from columns {c.cols('pos', side)}" if logged else
                f"up to {reach[i]:.3g} m from its start pose {_fmt(p)} in the scene: no pose columns")
        what = f"{dist[i]:.4g} m from the surface of {bodies[k].name} ({pose}; tolerance {tols[i]:.3g} m)"
    msg = f"{head}: the contact point {_fmt(log.point[i])} is {what} ({c.count(bad)}); "
    tried = bad & ~np.isnan(excess_mm)
    if tried.any() and np.mean(excess_mm[tried] <= 0) >= 0.5:
        also = " and the pose columns" if np.mean(pose_mm[tried]) >= 0.5 else ""
        return [msg + f"the points{also} look like millimetres: give them in metres (divide by 1000)"]
    return [msg + "give world coordinates in metres, and each body's centre-of-mass position and orientation "
            "(w, x, y, z) at the event"]


def check_event_log(log: EventLog, bodies: Sequence, duration: float, *, ground_enabled: bool = True,
                    ground_height: float = 0.0, source: str = "event log", row_base: int = 0, npz: bool = False,
                    allow_implausible: bool = False) -> list[str]:
    """Check a user's event log against the scene (see the module docstring); return the problems found.

    Run it on the log as read, before missing poses are filled in.

    Parameters
    ----------
    log : EventLog
        The log.
    bodies : sequence of scene Body
        The scene's bodies (:class:`~impactsound.scene.model.Body`: name, mass [kg], mesh in the body frame [m],
        position [m], quaternion, velocity [m/s], angular_velocity [rad/s]), indexed like the log's body ids.
    duration : float
        The scene's length [s].
    ground_enabled : bool, optional
        Whether the scene has a ground plane.
    ground_height : float, optional
        Height z of the ground plane [m].
    source : str, optional
        Names the file in messages.
    row_base : int, optional
        Added to row indices (2 for a CSV file: its header is row 1).
    npz : bool, optional
        Word column names as the NPZ arrays.
    allow_implausible : bool, optional
        Warn instead of raising.

    Returns
    -------
    list of str
        The problems found (empty when none); with ``allow_implausible`` one
        :class:`ImplausibleEventWarning` is issued per kind of problem.

    Raises
    ------
    InputError
        With the first problem (one line: file, row, column, fix), unless ``allow_implausible``.
    """
    if len(log) == 0:
        return []
    c = _Ctx(log, list(bodies), source, row_base, npz)
    problems = (_check_ground(c, ground_enabled, ground_height) + _check_times(c, duration)
                + _check_quaternions(c) + _check_sign(c) + _check_impulse(c) + _check_held(c)
                + _check_points(c, ground_enabled, ground_height))
    if problems and not allow_implausible:
        more = f" [{len(problems) - 1} more problem(s) after this one]" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}; {ALLOW_HINT}{more}")
    for p in problems:
        warnings.warn(f"{p} (rendered anyway: --allow-implausible)", ImplausibleEventWarning, stacklevel=2)
    return problems
