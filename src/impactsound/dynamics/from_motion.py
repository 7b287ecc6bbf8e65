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
   simulation collides, midphase off so that margins reach the parts of concave bodies) lists the pairs within a
   swept margin: twice the distance each body can move in a frame.
3. **Impacts.** A pair is struck in [t_k, t_{k+1}] when its contact point approaches at v_n >= v_min (the
   velocity at frame k from the frame before, with gravity, or with the support the body had) and the gap at
   frame k closes within the frame, gap = v_n tau + a tau^2 / 2, leaving the pair touching (or parting no faster
   than it can) at frame k+1; the onset is t_k + tau. A collision caused within a frame (a stack landing: the
   lower body stops, the one above runs into it) shows as the pair's normal velocity dropping by >= v_min over
   the frame while it touches at its end; its onset is the frame's middle.
4. **Impulses.** One sparse least-squares problem for the whole animation (:func:`_solve_all`): unknown
   impulses of every impact (entering frames k and k+1 with the weights of its sub-frame time) and of every
   touching contact in every frame (the support, scaled by REST_SCALE so that impacts explain what they can);
   equations: every moving body's residual momentum and angular-momentum change in every frame that an unknown
   touches (rows in velocity units), solved with a ridge RIDGE relative to each row (near the minimum-norm
   solution where contacts are redundant, e.g. a box landing flat). Every residual is used once: a
   settling pile's chained collisions share no frame twice. Impacts of one pair at nearby points in adjacent
   frames are one collision (impulses summed, first onset kept); a collision whose impulse does not change the
   pair's normal velocity by v_min / 2 is a graze and dropped. A touching contact whose impulse in a frame stands
   above its own level around it by v_min's worth passed a blow on (the floor under a stack that lands): an event.
   A joint of a moving body (a key's ball joint to its ring, a bell's cord to the world) is an unknown impulse
   per frame at its anchor, free and never an event.
5. **Rest.** A touching contact whose approach speed stays below v_min is resting contact: it carries the body's
   weight (shared equally among its resting contacts in that frame), it gives the events their resting supports
   (hygiene.support_at) and the bodies their resting stretches (resting.py).

The result is the same :class:`~.events.EventLog` the simulation makes, with ``motion`` (the poses, for moving
radiation) and ``resting``. Accuracy against MuJoCo's own events at 60, 120 and 240 frames per second is measured
in bench/bench_motion_contacts.py and tabled in docs/animation.md.
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
#: ridge of the impulse solve, relative to each row of A A^T's diagonal: keeps two nearby contacts from trading
#: large opposite impulses to fit a noisy torque (measured on the demo and the table: bench_motion_contacts.py)
RIDGE = 1e-3


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
    # geoms that never move (the ground, static props) take the frame's largest margin: MuJoCo's broad phase
    # inflates each geom by its own margin, so a static geom with none would hide a fast body next to it
    still = np.flatnonzero((owner < 0) | np.isin(owner, np.flatnonzero(~np.asarray(moving))))
    gm = np.zeros(m.ngeom)
    # MuJoCo's midphase (the bounding-volume tree over a body's geoms) ignores geom margins: with it, the convex
    # parts of a concave body are never reported within a margin, only touching
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
    rows = []
    # one gather per frame: qpos slots of every posed body, and each geom's owner for its margin
    posed = np.flatnonzero(adr >= 0)
    slot = adr[posed][:, None] + np.arange(7)
    geom_body = np.asarray(owner, np.int64)
    own = np.flatnonzero((geom_body >= 0) & np.isin(geom_body, posed))
    for k in range(K):
        d.qpos[slot] = np.concatenate([P[k, posed], Q[k, posed]], axis=1)
        gm[own] = margin[k, geom_body[own]]
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
    cols, J, is_rest = _solve_all(ev_idx, con, vn, acc_n, closing, touching, t, dt, P, mass, ev, eL, size, moving,
                                  ties=_ties(bodies, P, Q))
    events = _events_from(cols, J, is_rest, con, vn, acc_n, closing, t, dt, P, vpre, mass, size, moving, v_min)
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


def _ties(bodies, P, Q):
    """The joints of moving bodies (a bell's cord to the world, a key's ball joint to its ring): (a, b, anchor
    (K, 3)) per joint, a = the parent (-1: the world), anchor = the shared point in the world at every frame (carried
    by the parent's pose; fixed for the world)."""
    out = []
    for i, b in enumerate(bodies):
        m = getattr(b, "mount", None)
        if m is None or not m.moves or m.anchor is None:
            continue
        anchor = np.asarray(m.anchor, np.float64)
        if m.parent is None:
            out.append((-1, i, np.tile(anchor, (len(P), 1))))
        else:
            p = int(m.parent)
            local = quat_to_matrix(bodies[p].quaternion)[0].T @ (anchor - np.asarray(bodies[p].position, np.float64))
            out.append((p, i, P[:, p] + np.einsum("kij,j->ki", quat_to_matrix(Q[:, p]), local)))
    return out


def _solve_all(ev_idx, con, vn, acc_n, closing, touching, t, dt, P, mass, ev, eL, size, moving, ties=()):
    """Every impulse of the animation in one least-squares problem (module docstring, step 4).

    Unknowns: the impulse of each impact candidate (3) and of each touching contact in each frame (3, scaled by
    REST_SCALE: dearer, so that impacts explain what they can). Equations: for every moving body and interior
    frame that any unknown touches, its residual velocity change and angular-momentum change (velocity units:
    rows over the body's mass; angular rows over its radius too). An impact at t_k + tau enters frames k and k+1
    with the hat weights (1 - tau/dt, tau/dt); a touching contact enters its own frame. Solved with
    a ridge of RIDGE (near the minimum-norm solution where contacts are redundant). Returns the columns (contact rows), their
    impulses (n, 3) [N s] and which are touching contacts."""
    from scipy.sparse import coo_matrix, diags
    from scipy.sparse.linalg import spsolve
    K, B = ev.shape[:2]
    rest = np.flatnonzero(touching)
    cols = np.concatenate([ev_idx, rest]).astype(np.int64)
    nc = len(cols)
    is_rest = np.arange(nc) >= len(ev_idx)
    if nc == 0:
        return cols, np.zeros((0, 3)), is_rest
    scale = np.where(is_rest, REST_SCALE, 1.0)
    k = con.k[cols]
    dtk = dt[np.minimum(k, len(dt) - 1)]
    ci = np.flatnonzero(~is_rest)
    # the sub-frame share of frame k+1: where the gap closes (else the middle of the frame)
    g, u, a = np.maximum(con.gap[cols], 0.0), np.maximum(vn[cols], 1e-12), acc_n[cols]
    disc = np.maximum(u * u + 2.0 * a * g, 0.0)
    tau = np.where(closing[cols], 2.0 * g / (u + np.sqrt(disc)), 0.5 * dtk)
    frac = np.where(is_rest, 0.0, np.clip(tau / dtk, 0.0, 1.0))
    # (column, frame, weight) entries: impacts on frames k (1 - frac) and k+1 (frac); touching rows on k
    e_col = np.concatenate([np.arange(nc), ci])
    e_frame = np.concatenate([k, k[ci] + 1])
    e_w = np.concatenate([np.where(is_rest, 1.0, 1.0 - frac), frac[ci]])
    keep = (e_frame >= 1) & (e_frame <= K - 2) & (e_w > 0)
    e_col, e_frame, e_w = e_col[keep], e_frame[keep], e_w[keep]
    # both bodies of every entry: (column, frame, weight, body, sign, point)
    parts = []
    for side, sgn in ((con.a, -1.0), (con.b, 1.0)):
        body = side[cols][e_col]
        ok = body >= 0
        ok[ok] = moving[body[ok]]
        parts.append((e_col[ok], e_frame[ok], e_w[ok], body[ok], np.full(int(ok.sum()), sgn),
                      con.point[cols[e_col[ok]]]))
    # joints: an unknown impulse per joint and frame at its anchor, free (scale 1 / REST_SCALE: cheaper than any
    # contact), never an event: the cord's pull and the ring's hold are not collisions
    n_tie = 0
    frames = np.arange(1, K - 1)
    for a, b, anchor in ties:
        tcol = nc + n_tie + np.arange(len(frames))
        n_tie += len(frames)
        for body, sgn in ((a, -1.0), (b, 1.0)):
            if body >= 0 and moving[body]:
                parts.append((tcol, frames, np.ones(len(frames)), np.full(len(frames), body), np.full(len(frames), sgn),
                              anchor[frames]))
    scale = np.concatenate([scale, np.full(n_tie, 1.0 / REST_SCALE)])
    ec, ef, ew, eb, sg, ep = (np.concatenate(x) for x in zip(*parts))
    ukey, blk = np.unique(eb * K + ef, return_inverse=True)
    nb = len(ukey)
    m = mass[eb]
    r = 0.5 * size[eb]
    arm = ep - np.where((ec < nc)[:, None], P[con.k[cols[np.minimum(ec, nc - 1)]], eb], P[ef, eb])
    base = sg * ew * scale[ec] / m
    X = np.zeros((len(ec), 3, 3))                  # [arm]x
    X[:, 0, 1], X[:, 0, 2] = -arm[:, 2], arm[:, 1]
    X[:, 1, 0], X[:, 1, 2] = arm[:, 2], -arm[:, 0]
    X[:, 2, 0], X[:, 2, 1] = -arm[:, 1], arm[:, 0]
    rows_i = [6 * blk + a for a in range(3)] + [6 * blk + 3 + a for a in range(3) for b in range(3)]
    cols_i = [3 * ec + a for a in range(3)] + [3 * ec + b for a in range(3) for b in range(3)]
    vals = [base] * 3 + [base * X[:, a, b] / r for a in range(3) for b in range(3)]
    A = coo_matrix((np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))),
                   shape=(6 * nb, 3 * (nc + n_tie))).tocsr()
    body_b, frame_b = np.divmod(ukey, K)
    y = np.zeros((nb, 6))
    y[:, :3] = ev[frame_b, body_b]
    y[:, 3:] = eL[frame_b, body_b] / (0.5 * size[body_b] * mass[body_b])[:, None]
    y = y.reshape(-1)
    # ridge-regularised least squares, solved directly (sparse LU): close to the minimum-norm solution where
    # contacts are redundant, and robust where the system is ill-conditioned (LSQR stalls on piles)
    # in the smaller space of the equations: x = A^T (A A^T + lam I)^-1 y
    # the ridge is relative to each equation's own scale (Levenberg-Marquardt style), so that a heavy body's rows
    # (small in velocity units) are not flattened by a light one's
    N = (A @ A.T).tocsc()
    d = np.asarray(N.diagonal()).copy()
    d[d <= 0] = 1.0
    x = A.T @ spsolve(N + RIDGE * diags(d, format="csc"), y)
    return cols, (x.reshape(-1, 3) * scale[:, None])[:nc], is_rest


def _events_from(cols, J, is_rest, con, vn, acc_n, closing, t, dt, P, vpre, mass, size, moving, v_min):
    """Collisions from the solved impulses: impacts of one pair at nearby points (on body b) in a run of adjacent
    frames are one collision (impulses summed, the first onset kept); a touching contact whose impulse in a frame
    stands above its own steady level by a blow's worth (>= v_min of normal velocity change) passed a blow on (a
    stack landing on the floor) and is an event at that frame. One dict per event."""
    out = []
    nd = len(dt)

    def finish(members, rest):
        c = cols[members[0]]
        Jc = J[members].sum(axis=0)
        n = con.normal[c]
        jn = float(Jc @ n)
        inv_m = (0.0 if con.a[c] < 0 or not moving[con.a[c]] else 1.0 / mass[con.a[c]]) + 1.0 / mass[con.b[c]]
        wts = np.maximum(J[members] @ n, 1e-300)
        # MuJoCo's point lies midway across the gap: a collision with something that stays put happens on its
        # surface
        pts = con.point[cols[members]]
        g_half = 0.5 * np.maximum(con.gap[cols[members]], 0.0)[:, None] * n
        if con.a[c] < 0 or not moving[con.a[c]]:
            pts = pts - g_half
        elif not moving[con.b[c]]:
            pts = pts + g_half
        point = (pts * wts[:, None]).sum(axis=0) / wts.sum()
        mc = cols[members]
        if rest:
            o, tau, tc, v_at = c, 0.0, t[con.k[c]], jn * inv_m / 1.5
        elif closing[mc].any():
            # onset: the first member that closed its gap at its approach speed, at the sub-frame contact time
            o = mc[closing[mc]][np.argmin(con.k[mc[closing[mc]]])]
            tau = float(np.clip(_closing_time(con.gap[o], vn[o], acc_n[o]), 0.0, dt[min(con.k[o], nd - 1)]))
            tc = t[con.k[o]] + tau
            v_at = max(float(vn[mc].max()), float(vn[o] + acc_n[o] * tau))     # the speed at contact
            # the point slides with the bodies along the surface while the gap closes
            drift = [vpre[con.k[o], x] * tau + 0.5 * np.array([0.0, 0.0, -GRAVITY]) * tau ** 2
                     for x in (con.a[c], con.b[c]) if x >= 0 and moving[x]]
            d = np.mean(drift, axis=0)
            point = point + d - (d @ n) * n
        else:
            # caused within a frame: the frame where the pair's velocity dropped most, at its middle
            o = mc[np.argmax(vn[mc])]
            tau, tc, v_at = 0.0, t[con.k[o]] + 0.5 * dt[min(con.k[o], nd - 1)], float(vn[mc].max())
            if con.a[c] >= 0 and moving[con.a[c]] and moving[con.b[c]]:
                point = con.point[o]               # as measured in frame k (the pose reported with it)
        if not rest and jn * inv_m < 0.5 * v_min:
            return                                 # a graze: no momentum exchanged along the normal
        # without a flight to follow (a collision caused within the frame, a blow passed on at rest) the body that
        # meets something fixed is moved across the gap to touch it
        shift = np.zeros(3)
        if tau == 0.0 and not closing[mc].any():
            gap = max(float(con.gap[o]), 0.0)
            if con.a[c] < 0 or not moving[con.a[c]]:
                shift = -gap * n
            elif not moving[con.b[c]]:
                shift = gap * n
        out.append(dict(t=tc, k=int(con.k[o]), a=int(con.a[c]), b=int(con.b[c]), point=point, normal=n,
                        impulse=Jc, vn=float(v_at), tau=tau, shift=shift))

    # impacts: per pair in frame order, each joins an open collision of its pair (adjacent frame, near on b)
    imp = np.flatnonzero(~is_rest)
    imp = imp[np.lexsort((con.k[cols[imp]], con.b[cols[imp]], con.a[cols[imp]]))]
    open_ = []
    last_pair = None
    for j in imp:
        c = cols[j]
        pair = (con.a[c], con.b[c])
        if pair != last_pair:
            for cl in open_:
                finish(np.asarray(cl), False)
            open_, last_pair = [], pair
        near = CLUSTER_FRAC * min(_size(size, np.array([con.a[c]]))[0], size[con.b[c]])
        here = _on_b(con, c, P)
        for cl in open_:
            if con.k[c] - con.k[cols[cl[-1]]] <= 1 and np.linalg.norm(_on_b(con, cols[cl[-1]], P) - here) <= near:
                cl.append(j)
                break
        else:
            still = [cl for cl in open_ if con.k[c] - con.k[cols[cl[-1]]] <= 1]
            for cl in open_:
                if cl not in still:
                    finish(np.asarray(cl), False)
            open_ = still + [[j]]
    for cl in open_:
        finish(np.asarray(cl), False)

    # touching contacts: per pair and frame, the normal impulse against the pair's own level around it
    rest = np.flatnonzero(is_rest)
    if len(rest):
        rc = cols[rest]
        B1 = int(max(con.b.max(), 0)) + 2
        key = ((con.a[rc] + 1) * B1 + con.b[rc]) * (len(t) + 1) + con.k[rc]
        uk, inv = np.unique(key, return_inverse=True)
        jn = np.zeros(len(uk))
        np.add.at(jn, inv, np.einsum("ij,ij->i", J[rest], con.normal[rc]))
        frame_of = uk % (len(t) + 1)
        order = np.argsort(inv, kind="stable")
        starts = np.searchsorted(inv[order], np.arange(len(uk)))
        ends = np.append(starts[1:], len(order))
        # neighbours of each (pair, frame) within 3 frames: keys of one pair differ by their frame only
        lo3 = np.searchsorted(uk, uk - 3)
        hi3 = np.searchsorted(uk, uk + 3, side="right")
        for i in range(len(uk)):
            near = np.arange(lo3[i], hi3[i])
            df = np.abs(frame_of[near] - frame_of[i])
            if np.any(jn[near[df == 1]] > jn[i]):
                continue                           # not the peak of its blow
            far = near[df >= 2]
            level = float(np.median(jn[far])) if len(far) else 0.0
            members = rest[order[starts[i]:ends[i]]]
            c = cols[members[0]]
            inv_m = (0.0 if con.a[c] < 0 or not moving[con.a[c]] else 1.0 / mass[con.a[c]]) + 1.0 / mass[con.b[c]]
            if (jn[i] - level) * inv_m >= v_min:
                finish(members, True)
    return out


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
