"""Contacts from motion: the contact events of an animation given as poses per frame (scene/poses.py).

Between collisions a rigid body flies ballistically: its centre of mass follows x(t) = x0 + v0 t + g t^2 / 2 and
its angular momentum about the centre of mass is constant. A collision is an impulse: it changes the body's
momentum by J and its angular momentum by (p - x) x J (Mirtich & Canny 1995, "Impulse-based simulation of rigid
bodies"; the event model of Chadwick, Zheng & James 2012, sec. 3). From poses at frames t_k we therefore read:

1. **Kinematics.** Mean velocities over each frame interval, v_{k+1/2} = (x_{k+1} - x_k) / dt, and angular
   velocities from the relative rotation q_{k+1} q_k^-1; angular momenta L = R I R^T w. The *residual* of frame
   k, e_k = v_{k+1/2} - v_{k-1/2} - g (t_{k+1} - t_{k-1}) / 2 (and L_{k+1/2} - L_{k-1/2}), is zero in flight.
   An impulse at t_c in [t_k, t_{k+1}] shows in e_k and e_{k+1} with weights (t_{k+1} - t_c) / dt and
   (t_c - t_k) / dt: the residuals sum to the velocity change, wherever in the frame the collision fell.
2. **Who touches whom.** At every frame MuJoCo's collision detection (the same convex decomposition the
   simulation collides) lists the pairs within a swept margin: the distance each body can move in a frame.
3. **Impacts.** A pair is struck in [t_k, t_{k+1}] when its contact point approaches at v_n >= v_min (the
   velocities of the frame before) and the gap at frame k closes within the frame (v_n dt >= gap). The contact
   time is t_k + gap / v_n (sub-frame), the contact point and normal those of frame k.
4. **Impulses.** Impacts whose frames overlap and that share a body are solved together: the unknown impulses
   J_c (3 each) must give every moving body's momentum change over the affected frames (the residuals, less the
   steady support it had before and after) and its angular momentum change (each row scaled by the body's
   radius, so that both are impulses), in the least-squares sense (minimum norm where contacts are redundant,
   e.g. a box landing flat). Impacts of one pair at nearby points in adjacent frames are one collision (their
   impulses add; the first onset is kept). Impacts whose impulse does not push the pair apart with at least
   v_min / 2 of normal velocity change are grazes, not collisions, and are dropped.
5. **Rest.** A contact within ``touch`` of closing whose approach speed stays below v_min is resting contact:
   it carries the body's weight (shared equally among the body's resting contacts in that frame), it gives the
   events their resting supports (hygiene.support_at) and the bodies their resting stretches (resting.py).

The result is the same :class:`~.events.EventLog` the simulation makes, with ``motion`` (the poses, for moving
radiation) and ``resting``. Accuracy against MuJoCo's own events at 60, 120 and 240 frames per second is measured
in bench/bench_motion_contacts.py and tabled in docs/motion.md.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..constants import V_MIN
from ..errors import InputError
from ..rotation import quat_to_matrix
from .events import GROUND, EventLog
from .hygiene import RawContacts, support_at
from .mujoco_backend import GRAVITY, build_model

#: resting contacts: gap below this [m] (plus the body's frame-to-frame motion noise)
TOUCH = 1e-3
#: impacts of one pair closer than this fraction of the smaller body's size, in adjacent frames, are one collision
CLUSTER_FRAC = 0.25
#: bodies interpenetrating deeper than this fraction of the smaller one's size while both are still: an error
OVERLAP_FRAC = 0.05
#: resting contacts enter a collision's momentum balance scaled by this: dearer than its impacts (minimum norm)
REST_SCALE = 0.3
#: bodies a collision's balance takes in through resting contacts (a stack), at most
MAX_GROUP_BODIES = 24
#: frame intervals one collision group spans at most (a settling pile would chain every frame into one)
MAX_SPAN = 3


def _quat_mul(a, b):
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def kinematics(t, P, Q, inertia):
    """Interval velocities and frame residuals of posed bodies (module docstring, step 1).

    Parameters
    ----------
    t : ndarray, shape (K,)
        Frame times [s].
    P, Q : ndarray, shapes (K, B, 3), (K, B, 4)
        Centre-of-mass positions [m], orientations (w, x, y, z).
    inertia : ndarray, shape (B, 3, 3)
        Body-frame inertia about the centre of mass [kg m^2].

    Returns
    -------
    v, w : ndarray, shape (K-1, B, 3)
        Mean velocity [m/s] and angular velocity [rad/s] (world) over each interval.
    ev, eL : ndarray, shape (K, B, 3)
        Residual velocity change beyond gravity [m/s] and angular momentum change [N m s] at each frame (the
        first and last frame repeat their neighbours' linear residual).
    """
    dt = np.diff(t)
    v = np.diff(P, axis=0) / dt[:, None, None]
    conj = Q[:-1] * np.array([1.0, -1.0, -1.0, -1.0])
    dq = _quat_mul(Q[1:], conj)                               # world-frame rotation over the interval
    dq = np.where(dq[..., :1] < 0, -dq, dq)
    s = np.linalg.norm(dq[..., 1:], axis=-1)
    ang = 2.0 * np.arctan2(s, dq[..., 0])
    axis = np.divide(dq[..., 1:], s[..., None], out=np.zeros_like(dq[..., 1:]), where=s[..., None] > 1e-15)
    w = axis * (ang / dt[:, None])[..., None]
    qm = Q[1:] + Q[:-1]
    qm /= np.linalg.norm(qm, axis=-1, keepdims=True)
    R = quat_to_matrix(qm.reshape(-1, 4)).reshape(qm.shape[:-1] + (3, 3))
    Iw = R @ inertia[None] @ np.swapaxes(R, -1, -2)
    L = np.einsum("kbij,kbj->kbi", Iw, w)
    g = np.array([0.0, 0.0, -GRAVITY])
    ev = np.zeros(P.shape)
    eL = np.zeros(P.shape)
    ev[1:-1] = v[1:] - v[:-1] - g * (0.5 * (dt[1:] + dt[:-1]))[:, None, None]
    eL[1:-1] = L[1:] - L[:-1]
    # before the first frame and after the last the body carries on as next to them (a body lying still when the
    # animation starts is held up, not released)
    if len(t) > 2:
        ev[0], ev[-1] = ev[1] * dt[0] / (0.5 * (dt[0] + dt[1])), ev[-2] * dt[-1] / (0.5 * (dt[-1] + dt[-2]))
    return v, w, ev, eL


@dataclasses.dataclass
class _Contacts:
    """Proximity contacts of all frames (one row each): frame, pair (a < b; GROUND = -1), point, normal a -> b,
    signed gap [m]."""

    k: np.ndarray
    a: np.ndarray
    b: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    gap: np.ndarray


def proximity(mm, P, Q, moving, margin):
    """MuJoCo's contacts of every frame's poses within per-body margins (module docstring, step 2).

    ``moving`` (B,) marks the bodies with free joints in ``mm``; ``margin`` (K, B) [m] is each body's margin per
    frame (a pair is reported within the larger margin of its two bodies)."""
    import mujoco
    m, d = mm.model, mm.data
    owner = mm.geom_owner
    K, B = P.shape[:2]
    adr = np.full(B, -1)
    for i in range(B):
        j = m.body_jntadr[i + 1]
        if moving[i] and j >= 0:
            adr[i] = m.jnt_qposadr[j]
    geom_of = [np.flatnonzero(owner == i) for i in range(B)]
    # geoms that never move (the ground, static props) take the frame's largest margin: MuJoCo's broad phase
    # inflates each geom by its own margin, so a static geom with none would hide a fast body next to it
    still = np.flatnonzero((owner < 0) | np.isin(owner, np.flatnonzero(~np.asarray(moving))))
    gm = np.zeros(m.ngeom)
    # MuJoCo's midphase (the bounding-volume tree over a body's geoms) ignores geom margins: with it, the convex
    # parts of a concave body are never reported within a margin, only touching
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
    rows = []
    for k in range(K):
        for i in np.flatnonzero(adr >= 0):
            d.qpos[adr[i]:adr[i] + 3] = P[k, i]
            d.qpos[adr[i] + 3:adr[i] + 7] = Q[k, i]
            gm[geom_of[i]] = margin[k, i]
        gm[still] = margin[k].max()
        m.geom_margin[:] = gm
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        n = d.ncon
        if n == 0:
            continue
        c = d.contact
        g = np.asarray(c.geom[:n])
        ga, gb = owner[g[:, 0]], owner[g[:, 1]]
        nrm = np.asarray(c.frame[:n, :3], np.float64).copy()
        swap = ga > gb
        nrm[swap] *= -1.0
        rows.append((np.full(n, k), np.minimum(ga, gb), np.maximum(ga, gb), np.asarray(c.pos[:n], np.float64).copy(),
                     nrm, np.asarray(c.dist[:n], np.float64).copy()))
    if not rows:
        z = np.zeros(0)
        return _Contacts(z.astype(int), z.astype(int), z.astype(int), np.zeros((0, 3)), np.zeros((0, 3)), z)
    cols = [np.concatenate(x) for x in zip(*rows)]
    return _Contacts(*cols)


def _point_velocity(v, w, x, p):
    return v + np.cross(w, p - x)


def infer_events(bodies, ground, t, P, Q, *, v_min: float = V_MIN, progress=None, source: str = "<poses>",
                 cache=None) -> EventLog:
    """Contact events of bodies moving along given poses (module docstring).

    Parameters
    ----------
    bodies : list of scene Body
        Meshes (body frame, centre of mass at the origin), masses [kg], inertias [kg m^2], materials.
    ground : scene Ground or None
        The plane z = height; None: no ground.
    t : array_like, shape (K,)
        Frame times [s], strictly increasing (K >= 3).
    P, Q : array_like, shapes (K, B, 3), (K, B, 4)
        Centre-of-mass positions [m] and orientations (w, x, y, z) of every body at every frame (static props
        at their fixed pose).
    v_min : float, optional
        Slowest approach speed of an impact [m/s] (PAN paper sec. 4.3; as the simulation).
    progress : callable, optional
        Given the fraction of frames done.
    source : str, optional
        The pose file (for messages).
    cache : path-like, optional
        Asset folder for convex decompositions.

    Returns
    -------
    EventLog
        Events in time order with poses at t0 and resting supports; ``motion`` (one Trajectory per body) and
        ``resting`` attached.

    Raises
    ------
    InputError
        Bodies interpenetrating while still (naming both, the frame and the depth).
    """
    from ..scene.trajectory import Trajectory
    from .resting import resting_stretches

    t = np.asarray(t, np.float64)
    P = np.asarray(P, np.float64)
    Q = np.asarray(Q, np.float64)
    K, B = P.shape[:2]
    moving = np.array([not b.immovable for b in bodies])
    # every moving body gets a free joint (its pose is given); a body tied to another keeps its tie, which only
    # keeps the pair from colliding (a key on its ring); nothing is stepped
    free = [dataclasses.replace(b, mount=b.mount if getattr(b.mount, "parent", None) is not None else None,
                                group="", break_speed=0.0) if m else b for b, m in zip(bodies, moving)]
    mm = build_model(free, ground, cache=cache)
    size = np.asarray(mm.body_size, np.float64)
    mass = np.array([b.mass if m else np.inf for b, m in zip(bodies, moving)])
    inertia = np.stack([np.asarray(b.inertia, np.float64) for b in bodies])
    dt = np.diff(t)
    v, w, ev, eL = kinematics(t, P, Q, inertia)
    v[:, ~moving] = 0.0
    w[:, ~moving] = 0.0
    ev[:, ~moving] = 0.0
    eL[:, ~moving] = 0.0
    _check_spin(t, ev, eL, inertia, w, moving, bodies, source)

    # swept margin: how far each body's surface can move in the frame intervals next to frame k (both ways)
    reach = (np.linalg.norm(v, axis=2) + 0.5 * size * np.linalg.norm(w, axis=2)) * dt[:, None]
    sweep = np.zeros((K, B))
    sweep[:-1] = reach
    sweep[1:] = np.maximum(sweep[1:], reach)
    margin = 2.0 * sweep + TOUCH + 0.02 * size
    margin = np.minimum(margin, 0.5 * size + TOUCH)                  # broad phase stays local
    margin[:, ~moving] = 0.0
    if progress is not None:
        progress(0.0)
    con = proximity(mm, P, Q, moving, margin)
    if progress is not None:
        progress(0.8)

    g = np.array([0.0, 0.0, -GRAVITY])
    # velocities at frame k from the interval before it (the pre-impact state of an impact in [t_k, t_k+1])
    vpre = np.empty((K, B, 3))
    # half a frame of what moved the body in the frame before: gravity in flight, nothing while it rests (the
    # residual of frame k-1 is what its contacts did then)
    # (clipped to what carrying twice the weight does: an impact in the next frame must not leak in)
    held = _clip_norm(ev, 2.0 * GRAVITY * np.append(dt, dt[-1])[:, None])
    vpre[1:] = v + g * (0.5 * dt)[:, None, None] + 0.5 * held[:-1]
    vpre[0] = v[0] - g * 0.5 * dt[0] - 0.5 * held[0]
    wpre = np.concatenate([w[:1], w], axis=0)
    vpre[:, ~moving] = 0.0
    k = con.k

    def pvel(body, kk, p, vv, ww):
        out = np.zeros_like(p)
        ok = body >= 0
        bi = body[ok]
        out[ok] = _point_velocity(vv[kk[ok], bi], ww[kk[ok], bi], P[kk[ok], bi], p[ok])
        return out

    u = pvel(con.b, k, con.point, vpre, wpre) - pvel(con.a, k, con.point, vpre, wpre)
    vn = -np.einsum("ij,ij->i", u, con.normal)               # approach speed (> 0 closing)
    dtk = np.append(dt, dt[-1])[k]
    last = k >= K - 1
    # (a) the pair closes within the frame at its approach speed of the frame before
    closing = (vn >= v_min) & (con.gap <= vn * dtk + TOUCH) & (con.gap > -TOUCH - 0.05 * vn * dtk) & ~last
    # (b) a collision caused within the frame (a stack landing: the lower body stops on the floor, the one above
    # runs into it): the pair's normal velocity drops by >= v_min over the frame and it touches at its end.
    # Velocities after the frame: half a frame back from the interval after it (mirror of vpre).
    vpost = np.empty((K, B, 3))
    vpost[:-1] = v - g * (0.5 * dt)[:, None, None] - 0.5 * held[1:]
    vpost[-1] = v[-1] + g * 0.5 * dt[-1]
    wpost = np.concatenate([w, w[-1:]], axis=0)
    vpost[:, ~moving] = 0.0
    k1 = np.minimum(k + 1, K - 1)
    u1 = pvel(con.b, k1, con.point, vpost, wpost) - pvel(con.a, k1, con.point, vpost, wpost)
    vn_post = -np.einsum("ij,ij->i", u1, con.normal)
    drop = vn - vn_post
    gap_next = _gap_at(con, k1, K, B)
    caused = ((drop >= v_min) & (con.gap <= np.maximum(vn, drop) * dtk + TOUCH)
              & (gap_next <= TOUCH + 0.02 * np.minimum(_size(size, con.a), _size(size, con.b)))
              & (con.gap > -TOUCH) & ~last)
    # a collision leaves the pair touching at the frame after, or parting no faster than its speed after: a
    # pair that only came near (or that another contact stopped first) does not pass
    dtn = np.append(dt, dt[-1])[k1]
    closing &= gap_next <= TOUCH + 0.02 * np.minimum(_size(size, con.a), _size(size, con.b)) \
        + 1.5 * np.maximum(0.0, -vn_post) * dtn
    hit = closing | caused
    # the approach speed of a collision caused within the frame: its drop shared as by a restitution of 1/2
    vn = np.where(closing, vn, np.maximum(vn, drop / 1.5))

    # resting contact: touching and calm (module docstring, step 5)
    calm = (np.abs(vn) < v_min) & (con.gap < TOUCH + 0.01 * np.minimum(_size(size, con.a), _size(size, con.b)))
    _check_overlap(con, calm, size, bodies, t, source)
    rest = _resting_rows(con, calm, t, mass)

    # approach acceleration along the normal in flight: gravity on a moving body falling onto something fixed
    fall = lambda body: np.where(body >= 0, moving[np.maximum(body, 0)], False)
    acc_n = (fall(con.b).astype(float) - fall(con.a)) * GRAVITY * con.normal[:, 2]
    ev_idx = np.flatnonzero(hit)
    # contacts that may carry impulse in a collision's frames without being its impact: touching (resting, or
    # pressed into the floor by a stack that lands on top)
    touching = ~hit & (con.gap < TOUCH + 0.01 * np.minimum(_size(size, con.a), _size(size, con.b)))
    events = _solve_impulses(ev_idx, con, vn, acc_n, closing, touching, t, dt, P, mass, ev, held, eL, size, moving,
                             v_min)
    if progress is not None:
        progress(0.95)
    log = _event_log(events, bodies, t, P, Q, vpre, rest, dt)
    log.motion = [Trajectory(t, P[:, i], Q[:, i]) for i in range(B)]
    frame_dt = float(np.median(dt))
    log.resting = {}
    for i in range(B):
        if not moving[i]:
            continue
        r = resting_stretches(t, P[:, i], Q[:, i], rest, i, float(size[i]), frame_dt)
        if r:
            log.resting[i] = r
    if progress is not None:
        progress(1.0)
    return log


def _closing_time(gap, vn, acc):
    """Time [s] for a gap [m] to close at approach speed vn [m/s] growing at acc [m/s^2]: gap = vn t + acc t^2/2."""
    gap = max(float(gap), 0.0)
    if abs(acc) * gap < 1e-9 * vn * vn:
        return gap / max(vn, 1e-12)
    disc = vn * vn + 2.0 * acc * gap
    if disc <= 0.0:
        return gap / max(vn, 1e-12)
    return 2.0 * gap / (vn + np.sqrt(disc))


def _on_b(con, r, P):
    """Row r's point on body b's surface (MuJoCo's point lies midway across the gap), from b's centre [m]."""
    return con.point[r] + 0.5 * max(float(con.gap[r]), 0.0) * con.normal[r] - P[con.k[r], con.b[r]]


def _clip_norm(x, limit):
    """Vectors x (..., 3) scaled down to norm <= limit (...)."""
    n = np.linalg.norm(x, axis=-1)
    f = np.minimum(1.0, limit / np.maximum(n, 1e-300))
    return x * f[..., None]


class MotionWarning(UserWarning):
    """Something about an animation's poses that the inference goes on with (the CLI prints it as one line)."""


#: in flight, a body's angular momentum changes by less than this fraction of itself per frame (or it is no free body)
SPIN_TOL = 0.02


def _check_spin(t, ev, eL, inertia, w, moving, bodies, source):
    """Warn about a body whose angular momentum is not conserved while it flies (no linear residual): quaternions
    given in another component order (x, y, z, w read as w, x, y, z) turn a free spin into a wobble. Keyframed
    (not simulated) motion need not conserve it either, hence a warning, not an error."""
    import warnings
    K = len(t)
    if K < 8:
        return
    dt = np.diff(t)
    g_dt = GRAVITY * np.append(dt, dt[-1])
    flying = np.linalg.norm(ev, axis=2) < 0.02 * g_dt[:, None]                      # (K, B)
    flying[0] = flying[-1] = False
    # |L| of the frame: I w of the interval after (rotation to the world at the frame is not needed for a norm
    # of a principal-axes bound; use the largest principal moment as the scale)
    Imax = np.linalg.eigvalsh(inertia)[:, -1]
    Lmag = np.linalg.norm(np.concatenate([w, w[-1:]], axis=0), axis=2) * Imax[None, :]
    for i in np.flatnonzero(moving):
        f = flying[:, i] & (Lmag[:, i] > 0) & (np.linalg.norm(np.concatenate([w, w[-1:]])[:, i], axis=1) > 1.0)
        if f.sum() < 10:
            continue
        ratio = np.linalg.norm(eL[f, i], axis=1) / Lmag[f, i]
        if np.median(ratio) > SPIN_TOL:
            k = int(np.flatnonzero(f)[np.argmax(ratio)])
            warnings.warn(f"{source}: body '{bodies[i].name}' spins without keeping its angular momentum while it "
                          f"flies ({100 * np.median(ratio):.0f} % change per frame in the median, from frame {k}, "
                          f"t = {t[k]:.6g} s): check that the quaternions are (w, x, y, z), not (x, y, z, w); "
                          "keyframed spins may do this on purpose", MotionWarning, stacklevel=3)


def _gap_at(con, frames, K, B):
    """Smallest gap [m] of each row's pair at the given frames (inf where the pair is not reported there)."""
    key = (con.k * (B + 1) + (con.a + 1)) * (B + 1) + (con.b + 1)
    order = np.argsort(key, kind="stable")
    uk, first = np.unique(key[order], return_index=True)
    gmin = np.minimum.reduceat(con.gap[order], first) if len(uk) else np.zeros(0)
    want = (frames * (B + 1) + (con.a + 1)) * (B + 1) + (con.b + 1)
    j = np.clip(np.searchsorted(uk, want), 0, max(len(uk) - 1, 0))
    found = (len(uk) > 0) & (uk[j] == want) if len(uk) else np.zeros(len(want), bool)
    return np.where(found, gmin[j] if len(uk) else np.inf, np.inf)


def _size(size, body):
    out = np.full(len(body), np.inf)
    out[body >= 0] = size[body[body >= 0]]
    return out


def _check_overlap(con, calm, size, bodies, t, source):
    """Bodies deeper in each other than OVERLAP_FRAC of the smaller's size while calm: a broken animation."""
    depth = -con.gap
    limit = OVERLAP_FRAC * np.minimum(_size(size, con.a), _size(size, con.b))
    limit = np.where(np.isfinite(limit), limit, OVERLAP_FRAC * _size(size, np.maximum(con.a, con.b)))
    bad = np.flatnonzero(calm & (depth > np.maximum(limit, 2e-3)))
    if len(bad):
        first = bad[con.k[bad] == con.k[bad].min()]            # the first frame, its deepest overlap
        j = first[np.argmax(depth[first] / limit[first])]
        name = lambda i: "the ground" if i == GROUND else f"'{bodies[i].name}'"
        raise InputError(f"{source}: {name(con.a[j])} and {name(con.b[j])} interpenetrate by {depth[j] * 1e3:.3g} mm "
                         f"at frame {con.k[j]} (t = {t[con.k[j]]:.6g} s) while at rest; fix the animation (or the "
                         "objects' sizes, scale and origin) so that resting objects touch without overlapping")


def _resting_rows(con, calm, t, mass) -> RawContacts:
    """Resting contacts as RawContacts rows (step = frame): each carries its share of the body's weight."""
    idx = np.flatnonzero(calm)
    if len(idx) == 0:
        return RawContacts.empty()
    a, b, k = con.a[idx], con.b[idx], con.k[idx]
    # the body on top (the one the normal points into, b) is held up: its weight, split among its calm contacts
    key = k * (mass.size + 1) + (b + 1)
    _, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    mb = np.where(b >= 0, mass[np.maximum(b, 0)], 0.0)
    mb = np.where(np.isfinite(mb), mb, 0.0)
    dtf = np.median(np.diff(t))
    load = mb * GRAVITY * dtf / counts[inv]
    return RawContacts(t=t[k], step=k, a=a, b=b, point=con.point[idx], normal=con.normal[idx],
                       impulse=con.normal[idx] * load[:, None], vn=np.zeros(len(idx)))


def _groups(ev_idx, con, moving):
    """Impact candidates linked when they share a moving body within 2 frames: lists of indices into ev_idx."""
    parent = list(range(len(ev_idx)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # a group spans at most MAX_SPAN frame intervals: a pile's contacts, chained over time, would otherwise make
    # one group of every frame, and its momentum balance would be over the whole settling
    last_of_body = {}
    start = {}
    for j, c in enumerate(ev_idx):
        start[j] = int(con.k[c])
        for body in (con.a[c], con.b[c]):
            if body < 0 or not moving[body]:
                continue
            prev = last_of_body.get(body)
            if prev is not None:
                r = find(prev)
                if con.k[c] - start[r] < MAX_SPAN and find(j) != r:
                    rj = find(j)
                    lo = min(start[r], start[rj])
                    parent[rj] = r
                    start[r] = lo
            last_of_body[body] = j
    groups = {}
    for j in range(len(ev_idx)):
        groups.setdefault(find(j), []).append(j)
    return list(groups.values())


def _resting_unknowns(con, calm_idx, calm_k, bodies, k0, k1, moving, cap=MAX_GROUP_BODIES):
    """Calm contacts in frames k0..k1 of the group's bodies and of what they rest on or carry (a stack), one set of
    rows per pair (the frame nearest k0 that has the pair): (row indices, the enlarged body set)."""
    lo, hi = np.searchsorted(calm_k, k0), np.searchsorted(calm_k, k1, side="right")
    rows = calm_idx[lo:hi]
    body_set = set(bodies)
    picked = []
    frontier = set(bodies)
    while frontier and len(body_set) <= cap:
        new = set()
        touch = np.isin(con.a[rows], list(frontier)) | np.isin(con.b[rows], list(frontier))
        for r in rows[touch]:
            for x in (int(con.a[r]), int(con.b[r])):
                if x >= 0 and moving[x] and x not in body_set and len(body_set) < cap:
                    body_set.add(x)
                    new.add(x)
        frontier = new
    inside = np.array([(con.a[r] < 0 or not moving[con.a[r]] or con.a[r] in body_set)
                       and (con.b[r] in body_set) for r in rows], bool) if len(rows) else np.zeros(0, bool)
    rows = rows[inside]
    if len(rows):
        # one frame per pair: the earliest in the window
        pair = con.a[rows] * 100003 + con.b[rows]
        first_k = {}
        for r, pk in zip(rows, pair):
            first_k.setdefault(pk, con.k[r])
        picked = [r for r, pk in zip(rows, pair) if con.k[r] == first_k[pk]]
    return np.asarray(picked, np.int64), sorted(body_set)


def _solve_impulses(ev_idx, con, vn, acc_n, closing, calm, t, dt, P, mass, ev, held, eL, size, moving, v_min):
    """Impulse of every detected impact (module docstring, step 4); one dict per collision kept."""
    if len(ev_idx) == 0:
        return []
    K = len(t)
    ev_idx = ev_idx[np.argsort(con.k[ev_idx], kind="stable")]
    calm_idx = np.flatnonzero(calm)
    calm_idx = calm_idx[np.argsort(con.k[calm_idx], kind="stable")]
    calm_k = con.k[calm_idx]
    out = []
    for members in _groups(ev_idx, con, moving):
        cs = ev_idx[members]
        k0 = int(con.k[cs].min())
        k1 = min(int(con.k[cs].max()) + 1, K - 2)
        bodies_g = sorted({int(x) for c in cs for x in (con.a[c], con.b[c]) if x >= 0 and moving[x]})
        rest, bodies_g = _resting_unknowns(con, calm_idx, calm_k, bodies_g, k0, k1, moving)
        cols = np.concatenate([cs, rest])
        scale = np.concatenate([np.ones(len(cs)), np.full(len(rest), REST_SCALE)])
        nC = len(cols)
        rows, rhs = [], []
        # the collision's onset: the sub-frame time its first closing contact touches
        shut = cs[closing[cs]]
        if len(shut):
            t_on = min(t[con.k[c]] + _closing_time(con.gap[c], vn[c], acc_n[c]) for c in shut)
        else:
            t_on = t[k0] + 0.5 * dt[min(k0, len(dt) - 1)]
        # the frames' residuals hold the steady contact force of before the onset and of after it, for as long
        # as each acts within the frames' hat functions (the hats of frames k0..k1 sum to one on [t_k0, t_k1]
        # and reach half a frame beyond)
        dt_w = float(np.mean(dt[max(k0 - 1, 0):min(k1 + 1, len(dt))]))
        w_after = ((t[k1] - t_on) + 0.5 * dt_w) / dt_w
        w_before = (k1 - k0 + 1) - w_after
        for body in bodies_g:
            # momentum change over the affected frames, less the steady contact force (weight support)
            before = held[k0 - 1, body] if k0 - 1 >= 1 else np.zeros(3)
            after = held[k1 + 1, body] if k1 + 1 <= K - 2 else before
            Lb = eL[k0 - 1, body] if k0 - 1 >= 1 else np.zeros(3)
            dP = mass[body] * (ev[k0:k1 + 1, body].sum(axis=0) - w_before * before - w_after * after)
            dL = (eL[k0:k1 + 1, body] - Lb).sum(axis=0)
            r = 0.5 * size[body]
            sgn = np.where(con.b[cols] == body, 1.0, np.where(con.a[cols] == body, -1.0, 0.0)) * scale
            on = np.flatnonzero(sgn)
            A_lin = np.zeros((3, 3 * nC))
            A_ang = np.zeros((3, 3 * nC))
            for j in on:
                A_lin[:, 3 * j:3 * j + 3] = sgn[j] * np.eye(3)
                A_ang[:, 3 * j:3 * j + 3] = sgn[j] * _cross_matrix(con.point[cols[j]] - P[con.k[cols[j]], body]) / r
            # in velocity units (each row over the body's mass): the light body's velocity change is the clean
            # record of a collision, a heavy body's is blurred by the changing support force under it
            rows += [A_lin / mass[body], A_ang / mass[body]]
            rhs += [dP / mass[body], dL / (r * mass[body])]
        A = np.concatenate(rows)
        y = np.concatenate(rhs)
        J = np.linalg.lstsq(A, y, rcond=1e-8)[0].reshape(nC, 3) * scale[:, None]
        is_rest = np.arange(nC) >= len(cs)
        t_group = None
        used = np.zeros(nC, bool)
        for j in np.lexsort((is_rest, con.k[cols])):
            if used[j]:
                continue
            c = cols[j]
            near = CLUSTER_FRAC * min(_size(size, np.array([con.a[c]]))[0], size[con.b[c]])
            same = [j]
            used[j] = True
            grew = True
            while grew:
                grew = False
                for i in range(nC):
                    if (not used[i] and con.a[cols[i]] == con.a[c] and con.b[cols[i]] == con.b[c]
                            # near on body b's surface (its motion between the frames taken out)
                            and (is_rest[j] or np.linalg.norm(_on_b(con, cols[i], P) - _on_b(con, c, P)) <= near)
                            and min(abs(int(con.k[cols[i]]) - int(con.k[cols[x]])) for x in same) <= 1):
                        same.append(i)
                        used[i] = True
                        grew = True
            same = np.asarray(same)
            Jc = J[same].sum(axis=0)
            n = con.normal[c]
            jn = float(Jc @ n)
            inv_m = (0.0 if con.a[c] < 0 or not moving[con.a[c]] else 1.0 / mass[con.a[c]]) + 1.0 / mass[con.b[c]]
            # a resting contact's share must exceed the weight it can carry over the frames (a body that lands
            # and stays is held up from then on: that is support, not a blow)
            floor = v_min + GRAVITY * (t[min(k1 + 1, K - 1)] - t[k0]) if is_rest[j] else 0.5 * v_min
            if jn * inv_m < floor:
                continue                                   # a graze: no momentum exchanged along the normal
            wts = np.maximum(J[same] @ n, 1e-300)
            # MuJoCo's point lies midway across the gap: a collision with something that stays put happens on
            # its surface
            pts = con.point[cols[same]]
            g_half = 0.5 * np.maximum(con.gap[cols[same]], 0.0)[:, None] * n
            if con.a[c] < 0 or not moving[con.a[c]]:
                pts = pts - g_half
            elif not moving[con.b[c]]:
                pts = pts + g_half
            point = (pts * wts[:, None]).sum(axis=0) / wts.sum()
            mc = cols[same]
            if is_rest[j]:
                # a resting contact that passed on a blow (the floor under a stack that lands): at the group's onset
                tc = t_group if t_group is not None else t[k0] + 0.5 * dt[min(k0, len(dt) - 1)]
                o, v_at, tau = c, jn * inv_m / 1.5, 0.0
            elif closing[mc].any():
                # onset: the first member that closed its gap at its approach speed, at the sub-frame contact time
                o = mc[closing[mc]][np.argmin(con.k[mc[closing[mc]]])]
                tau = float(np.clip(_closing_time(con.gap[o], vn[o], acc_n[o]), 0.0, dt[min(con.k[o], len(dt) - 1)]))
                tc = t[con.k[o]] + tau
                v_at = max(float(vn[mc].max()), float(vn[o] + acc_n[o] * tau))     # the speed at contact
            else:
                # caused within a frame: the frame where the pair's velocity dropped most, at its middle
                o = mc[np.argmax(vn[mc])]
                tc = t[con.k[o]] + 0.5 * dt[min(con.k[o], len(dt) - 1)]
                v_at, tau = float(vn[mc].max()), 0.0
            if not is_rest[j]:
                t_group = tc if t_group is None else min(t_group, tc)
            if not closing[mc].any() and not is_rest[j] and con.a[c] >= 0 and moving[con.a[c]] \
                    and moving[con.b[c]]:
                point = con.point[o]               # as measured in frame k (the pose reported with it)
            # without a flight to follow (a collision caused within the frame, a blow passed on at rest) the body
            # that meets something fixed is moved across the gap to touch it
            shift = np.zeros(3)
            if tau == 0.0 and not closing[mc].any():
                gap = max(float(con.gap[o]), 0.0)
                if con.a[c] < 0 or not moving[con.a[c]]:
                    shift = -gap * n
                elif not moving[con.b[c]]:
                    shift = gap * n
            out.append(dict(t=tc, k=int(con.k[o]), a=int(con.a[c]), b=int(con.b[c]), point=point, normal=n,
                            impulse=Jc, vn=float(v_at), tau=tau, shift=shift))
    return out


def _cross_matrix(r):
    return np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])


def _event_log(events, bodies, t, P, Q, vpre, rest, dt) -> EventLog:
    names = [b.name for b in bodies]
    if not events:
        return EventLog.empty(names)
    n = len(events)
    col = {key: np.array([e[key] for e in events]) for key in ("t", "a", "b", "vn", "k")}
    pt = np.array([e["point"] for e in events])
    nr = np.array([e["normal"] for e in events])
    J = np.array([e["impulse"] for e in events])
    tt, kk = col["t"], col["k"]

    tau = np.array([e["tau"] for e in events])
    shift = np.array([e["shift"] for e in events])

    def pose(body):
        # the pose the contact point was measured in (frame k, where MuJoCo found the pair), carried to the
        # contact along the flight (tau after frame k, 0 for a collision caused within the frame): the body's
        # orientation is that of frame k, so that the point sits on its surface in the body frame
        pos = np.full((n, 3), np.nan)
        quat = np.full((n, 4), np.nan)
        ok = body >= 0
        bi, ki, ti = body[ok], kk[ok], tau[ok][:, None]
        pos[ok] = (P[ki, bi] + vpre[ki, bi] * ti + 0.5 * np.array([0.0, 0.0, -GRAVITY]) * ti ** 2
                   + shift[ok])
        quat[ok] = Q[ki, bi]
        return pos, quat

    pa, qa = pose(col["a"])
    pb, qb = pose(col["b"])
    frame_dt = float(np.median(dt))
    sa_p, sa_n = support_at(rest, col["a"], kk, t[kk], 1.5 * frame_dt)
    sb_p, sb_n = support_at(rest, col["b"], kk, t[kk], 1.5 * frame_dt)
    log = EventLog(t=tt, a=col["a"], b=col["b"], point=pt, normal=nr, impulse=J, vn=col["vn"], pos_a=pa, quat_a=qa,
                   pos_b=pb, quat_b=qb, support_a_point=sa_p, support_a_normal=sa_n, support_b_point=sb_p,
                   support_b_normal=sb_n, body_names=names)
    return log.sorted()


def sampled_poses(log: EventLog, fps: float, duration: float):
    """Frames at ``fps`` of the motion a simulation recorded (``log.motion``, :func:`~.mujoco_backend.simulate`
    with ``motion_rate``): what an animation baked from that simulation would hold.

    Parameters
    ----------
    log : EventLog
        With ``motion`` (one Trajectory per body).
    fps : float
        Frames per second.
    duration : float
        [s]; frames at 0, 1/fps, ... up to ``duration``.

    Returns
    -------
    t : ndarray, shape (K,)
    position : ndarray, shape (K, B, 3)
        Centre-of-mass positions [m].
    quaternion : ndarray, shape (K, B, 4)
        (w, x, y, z).
    """
    if getattr(log, "motion", None) is None:
        raise ValueError("the log carries no recorded motion; simulate with motion_rate")
    t = np.arange(0.0, duration + 0.5 / fps, 1.0 / fps)
    t = t[t <= duration + 1e-9]
    P = np.stack([m.position_at(t) for m in log.motion], axis=1)
    Q = np.stack([m.quaternion_at(t) for m in log.motion], axis=1)
    return t, P, Q
