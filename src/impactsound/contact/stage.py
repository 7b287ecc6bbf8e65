"""The contact stage: per-event contact quantities computed once for a batch of events and shared by all sources.

For every body touched by an event (rigid-body contact model of Chadwick, Zheng & James 2012, "Precomputed
Acceleration Noise for Improved Rigid-Body Sound", sec. 3 and 4.3; vibration modes living in the rigid body's frame
as in O'Brien, Shen & Gatchalian 2002, "Synthesizing sounds from rigid-body simulations"):

1. Pose at the event time t0 from the event log (NaN: the body's scene pose); body b of an event receives +J and
   body a receives -J. Contact point, impulse and normal go to the body frame, x_b = R^T (x - c), J_b = R^T J.
2. The contact point is projected onto the body's surface (closest point: face and barycentric coordinates).
3. Hertz contact time (Chadwick et al. 2012, eq. 7) tau = 2.87 (m^2 / (r E*^2 V))^{1/5} with
   1/m = 1/m_self + 1/m_other (inertia-aware effective masses along the normal; the ground is infinitely heavy),
   1/r = 1/r_self + 1/r_other (discrete mean curvature at each surface's contact point; the ground is a plane),
   1/E* = sum (1 - nu^2)/E of both materials, and V the event's normal speed vn.

Every source (modal vibration, acceleration noise, and those registered later) reads the same
:class:`BodyContacts` of a body, so that all of them see one Hertz time per event. Which surface a body's
contact geometry is measured on is a parameter (``surfaces``); by default the body's scene mesh.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dynamics.events import GROUND, EventLog
from ..errors import InputError
from ..rotation import quat_to_matrix, to_body
from .curvature import SurfaceCurvature
from .hertz import hertz_tau, inverse_effective_mass


@dataclass(frozen=True)
class BodyContacts:
    """Contact quantities of the events touching one body (arrays over those events, in event-log order).

    Attributes
    ----------
    body : int
        Index of the body in the scene's body list (the event log's ids).
    rows : ndarray of int, shape (n,)
        Rows of the event log touching the body.
    on_b : ndarray of bool, shape (n,)
        True where the body is side b of the event (it receives +J; side a receives -J).
    position : ndarray, shape (n, 3)
        World position of the body's centre of mass at each event [m].
    rotation : ndarray, shape (n, 3, 3)
        Body -> world rotation at each event.
    point : ndarray, shape (n, 3)
        Contact point projected onto the body's surface, body frame [m].
    face, bary : ndarray, shapes (n,) and (n, 3)
        Where ``point`` lies on the surface (face index and barycentric coordinates).
    impulse : ndarray, shape (n, 3)
        Impulse on the body, body frame [N s].
    normal : ndarray, shape (n, 3)
        The event's contact normal, body frame (unit).
    tau : ndarray, shape (n,)
        Hertz contact time [s].
    """

    body: int
    rows: np.ndarray
    on_b: np.ndarray
    position: np.ndarray
    rotation: np.ndarray
    point: np.ndarray
    face: np.ndarray
    bary: np.ndarray
    impulse: np.ndarray
    normal: np.ndarray
    tau: np.ndarray

    def listeners(self, listeners_world) -> np.ndarray:
        """Listener positions in the body frame at each event.

        Parameters
        ----------
        listeners_world : array_like, shape (L, 3) or (n, L, 3)
            Listener positions, world frame [m]: fixed, or per event (a moving listener where each event is
            heard, RenderContext.listeners_heard).

        Returns
        -------
        ndarray, shape (n, L, 3)
            The same positions in the body frame at each of the n events [m].
        """
        L_w = np.asarray(listeners_world, np.float64)
        if L_w.ndim == 3:
            return to_body(self.rotation, self.position, L_w)
        return to_body(self.rotation, self.position, np.broadcast_to(L_w, (len(self.rows),) + L_w.shape))

    def select(self, keep) -> "BodyContacts":
        """The subset of these events where ``keep`` is true.

        Parameters
        ----------
        keep : array_like of bool, shape (n,)
            Mask over this body's events.

        Returns
        -------
        BodyContacts
        """
        keep = np.asarray(keep, bool)
        return BodyContacts(self.body, *(getattr(self, f)[keep] for f in (
            "rows", "on_b", "position", "rotation", "point", "face", "bary", "impulse", "normal", "tau")))


@dataclass(frozen=True)
class ContactStage:
    """The contact quantities of one event batch: ``bodies[i]`` for every body i touched by an event.

    Attributes
    ----------
    events : EventLog
        The batch.
    bodies : dict of int to BodyContacts
        Per touched body index.
    """

    events: EventLog
    bodies: dict[int, BodyContacts]

    def of(self, body: int) -> BodyContacts | None:
        """The contacts of one body.

        Parameters
        ----------
        body : int
            Body index.

        Returns
        -------
        BodyContacts or None
            None when no event touches the body.
        """
        return self.bodies.get(int(body))


def body_pose(events: EventLog, rows, on_b, body) -> tuple[np.ndarray, np.ndarray]:
    """World pose of a body at some events, read from side b of an event where ``on_b`` else from side a.

    Parameters
    ----------
    events : EventLog
        The event log.
    rows : ndarray of int, shape (n,)
        Event rows.
    on_b : ndarray of bool, shape (n,)
        True where the body is side b of the event.
    body : scene Body
        The body; its scene pose replaces a NaN pose (one the engine did not report).

    Returns
    -------
    position : ndarray, shape (n, 3)
        Centre-of-mass positions [m].
    rotation : ndarray, shape (n, 3, 3)
        Body -> world rotations.
    """
    pos = np.where(on_b[:, None], events.pos_b[rows], events.pos_a[rows])
    quat = np.where(on_b[:, None], events.quat_b[rows], events.quat_a[rows])
    bad_p = ~np.isfinite(pos).all(axis=1)
    bad_q = ~np.isfinite(quat).all(axis=1) | (np.linalg.norm(np.nan_to_num(quat), axis=1) == 0)
    pos[bad_p] = np.asarray(body.position, np.float64)
    quat[bad_q] = np.asarray(body.quaternion, np.float64)
    return pos, quat_to_matrix(quat)


def contact_stage(events: EventLog, bodies, ground, *, surfaces: dict | None = None,
                  only=None) -> ContactStage:
    """Contact quantities of every body touched by ``events`` (module docstring).

    Parameters
    ----------
    events : EventLog
        Contact events; every event must have a positive normal speed vn [m/s] (resting contacts, vn < v_min,
        are dropped before this stage).
    bodies : list of scene Body
        The scene's bodies (event ids index this list); mass [kg], inertia [kg m^2], material, scene pose.
    ground : scene Ground or None
        The ground's material (an infinitely heavy plane); None: a rigid plane.
    surfaces : dict, optional
        {body name: :class:`SurfaceCurvature`} on which contact points, curvature radii and effective-mass arms are
        measured; bodies not listed use their scene mesh.
    only : iterable of int, optional
        Body indices to compute (default: every body touched).

    Returns
    -------
    ContactStage
    """
    cache: dict[int, SurfaceCurvature] = {}

    def surface(k: int) -> SurfaceCurvature:
        if k not in cache:
            s = (surfaces or {}).get(bodies[k].name)
            cache[k] = s if s is not None else SurfaceCurvature(np.asarray(bodies[k].mesh.vertices),
                                                                np.asarray(bodies[k].mesh.faces))
        return cache[k]

    touched = np.unique(np.concatenate([events.a, events.b])) if len(events) else np.zeros(0, np.int64)
    wanted = touched[touched >= 0] if only is None else [int(i) for i in only]
    out = {}
    for i in wanted:
        rows = np.flatnonzero(events.involving(int(i)))
        if len(rows):
            out[int(i)] = _body_contacts(events, bodies, ground, int(i), rows, surface)
    return ContactStage(events, out)


def body_inverse_mass(body, x_body, n_body) -> np.ndarray:
    """1/m [1/kg] of a body along unit directions n at body-frame points x (arrays (E, 3)), as the body is held:
    a free body (PAN paper sec. 3.2, eq. 9); a static or fixed one never moves (0: infinitely heavy); a ball
    joint turns about its anchor a: 1/m = (r x n) . I_a^{-1} (r x n), r = x - a, I_a the inertia about the anchor
    (parallel axes: I_a = I + M (|a|^2 1 - a a^T), centre of mass at the origin); a hinge of axis u turns about it
    only: 1/m = ((r x n) . u)^2 / (u . I_a u)."""
    mount = getattr(body, "mount", None)
    x = np.asarray(x_body, np.float64).reshape(-1, 3)
    if mount is None or getattr(mount, "parent", None) is not None:
        # free, or tied to another free object (a key on its ring): the free body's (the tie is loose)
        return inverse_effective_mass(body.mass, body.inertia, x, n_body)
    if not mount.moves:
        return np.zeros(len(x))
    from ..rotation import quat_to_matrix
    R0 = quat_to_matrix(body.quaternion)[0]
    a = R0.T @ (np.asarray(mount.anchor, np.float64) - np.asarray(body.position, np.float64))
    I_a = np.asarray(body.inertia, np.float64) + body.mass * (a @ a * np.eye(3) - np.outer(a, a))
    rn = np.cross(x - a, np.broadcast_to(np.asarray(n_body, np.float64).reshape(-1, 3), x.shape))
    if mount.kind == "ball":
        return np.einsum("ni,ni->n", rn, np.linalg.solve(I_a, rn.T).T)
    u = R0.T @ np.asarray(mount.axis, np.float64)
    return (rn @ u) ** 2 / float(u @ I_a @ u)


def _body_contacts(events, bodies, ground, i, rows, surface) -> BodyContacts:
    on_b = events.b[rows] == i
    sign = np.where(on_b, 1.0, -1.0)                          # b gets +J, a gets -J
    body = bodies[i]
    pos, R = body_pose(events, rows, on_b, body)
    x_b = to_body(R, pos, events.point[rows])
    J_b = to_body(R, np.zeros_like(pos), sign[:, None] * events.impulse[rows])
    n_b = to_body(R, np.zeros_like(pos), events.normal[rows])
    surf = surface(i)
    face, bary, _ = surf.closest(x_b)
    x_s = np.einsum("nk,nkc->nc", bary, surf.vertices[surf.faces[face]])
    inv_m = body_inverse_mass(body, x_s, n_b)
    inv_r = 1.0 / surf.radius_at(face, bary)
    inv_E = np.full(len(rows), (1.0 - body.material.nu**2) / body.material.E)
    other = np.where(on_b, events.a[rows], events.b[rows])
    for k in np.unique(other):
        sel = other == k
        if k == GROUND:                                       # plane, infinite mass
            mat = None if ground is None else ground.material
        else:
            ob = bodies[int(k)]
            mat = ob.material
            posk, Rk = body_pose(events, rows[sel], ~on_b[sel], ob)
            xk = to_body(Rk, posk, events.point[rows[sel]])
            nk = to_body(Rk, np.zeros_like(posk), events.normal[rows[sel]])
            sk = surface(int(k))
            fk, bk, _ = sk.closest(xk)
            xks = np.einsum("nk,nkc->nc", bk, sk.vertices[sk.faces[fk]])
            inv_m[sel] += body_inverse_mass(ob, xks, nk)
            inv_r[sel] += 1.0 / sk.radius_at(fk, bk)
        if mat is not None:
            inv_E[sel] += (1.0 - mat.nu**2) / mat.E
    vn = events.vn[rows]
    bad = ~(np.isfinite(vn) & (vn > 0))
    if bad.any():
        r = int(rows[np.flatnonzero(bad)[0]])
        raise InputError(f"event log row {r} (t = {events.t[r]} s): vn = {events.vn[r]} m/s gives no Hertz "
                         "contact time; drop resting contacts (vn < v_min = 5 cm/s) before rendering")
    tau = hertz_tau(1.0 / inv_m, 1.0 / inv_r, 1.0 / inv_E, vn)
    return BodyContacts(i, rows, on_b, pos, R, x_s, face, bary, J_b, n_b, tau)
