"""Rigid-body dynamics with MuJoCo (Todorov, E., Erez, T. & Tassa, Y. 2012, "MuJoCo: a physics engine for
model-based control", IEEE/RSJ IROS) -> clean contact events.

The engine's contact-force history is *not* the sound's force: we only take, per collision, the summed impulse
J = sum f dt, the first-contact time and the approach speed (hygiene.py); the force's time profile comes from Hertz
theory downstream, as in Chadwick, Zheng & James 2012, "Precomputed acceleration noise for improved rigid-body
sound", ACM Trans. Graph. 31(4), sec. 3 (a half-sine of the Hertz time scale scaled to the impulse, eqs. (6)-(10)).
The engine only has to get momentum exchange, timing and restitution right.

Model (built in memory with ``mujoco.MjSpec``)
----------------------------------------------
* Each body: a free joint at *our* body-frame origin (the centre of mass), an explicit inertial with our mass and
  our full 3x3 inertia about the COM (``fullinertia``; MuJoCo diagonalises it internally and stores the principal
  frame separately, ``body_iquat``, so the body frame it reports, ``xpos``/``xquat``, stays ours).
* Its collision geoms: the convex hull of our body-frame mesh for a convex body; for a concave one (bowl, mug:
  mesh volume below 0.9 of its hull's) one mesh geom per part of a CoACD convex decomposition (convex.py; Wei et
  al. 2022), cached like any asset, since MuJoCo collides every mesh as its convex hull. The body's mass and
  inertia are ours, never computed from the geoms; the sound models keep the original mesh. MuJoCo re-centres
  and re-orients a mesh to its own inertial frame and compensates with the geom's pos/quat; that offset never
  reaches us because we read body poses, not geom poses (tested against MuJoCo's geom vertices in
  tests/unit/test_dynamics.py).
* Ground: an infinite plane z = height with the ground material.

Contact parameters
------------------
MuJoCo's soft contacts act, in constraint space, like a mass-normalised spring-damper:
a_n = -damping v_n - stiffness r (solref in the direct ``(-stiffness, -damping)`` format, impedance d constant via
solimp d0 = dw = 0.99, so a 1 kg and a 1 g body get the same contact dynamics).

* stiffness = omega0^2 with omega0 = pi / (contact_steps * timestep): an undamped contact lasts ``contact_steps``
  engine steps (default 10), enough for the semi-implicit Euler map to represent it. The price is softness:
  peak penetration ~ v * contact_steps * timestep / pi (about 1.2 mm for a 2.4 m/s impact at 2e-4 s). Lower the
  timestep for thin objects (a plate thinner than ~2x that depth can be passed through).
* damping = 2 zeta omega0, with zeta chosen so that the *discrete* contact map that MuJoCo integrates (first
  contact at a uniformly random phase inside a step, force clamped >= 0, release at zero penetration) gives the
  material's restitution on average (restitution.py, :func:`restitution_to_damping_ratio`). Because the damping
  acts on the whole first step whatever the phase of first contact, a single bounce's restitution scatters by
  about +-2 zeta kappa / 3 around the target (+-0.04 at e = 0.56); the mean is right.
* Pairs: MuJoCo combines geom parameters; with direct-format solref it takes the element-wise minimum, i.e. the
  larger damping, so a pair's restitution is min(e_a, e_b) (the lossier material dominates). Friction is the
  maximum of the two coefficients (MuJoCo's rule). Both are documented choices.
* Restitution below ~0.07 cannot be reached by a stable damping at this resolution and is clamped (warning).

Solver: Newton, elliptic friction cones (no pyramid approximation: contact-frame force = efc_force directly),
impratio 10 (harder friction, less creep; NoSlip is left off: MuJoCo warns it can destabilise multi-contact
stacks, and impacts do not need exact sticking), Euler integrator (what the restitution calibration models), and
speculative contacts on (MuJoCo 4: prevents fast, thin convex geoms from tunnelling within one step; a 5 mm ball at
5 m/s moves 1 mm per step and does not trigger it). Gravity g = 9.81 m/s^2 along -z.

Support: every raw contact row is kept (resting ones too), so hygiene.py can give each event the resting support
of each of its bodies at t0 (the contacts that have been calm for ``settle_time``, as one force-weighted
equivalent point and normal; hygiene.py step 5). A cube resting on the floor and struck from above thus carries
the floor as its support (normal +z), which acceleration noise needs (sources/pan/timescale.py).

Initial state checks: NaN/inf anywhere -> InputError naming body and field; bodies overlapping each other or the
ground at t = 0 deeper than v_min / omega0 (a penetration that the contact spring would turn into an ejection
faster than v_min, i.e. an audible spurious event) -> InputError; shallower overlaps are accepted silently.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, MeshError, SolverError
from .convex import convex_parts
from .events import GROUND, EventLog
from .hygiene import V_MIN, RawContacts, clean_contacts, thin_resting
from .restitution import restitution_to_damping_ratio

__all__ = ["simulate", "run_dynamics", "build_model", "DynamicsResult", "MujocoModel",
           "restitution_to_damping_ratio", "GRAVITY"]

GRAVITY = 9.81              # [m/s^2], along -z (MuJoCo's default value, set explicitly)
_IMPEDANCE = 0.99           # solimp d0 = dw: constant impedance (no width ramp), see module docstring
_CHUNK = 2048               # engine steps with contacts per conversion to compact rows (bounds record memory)


# ---- validation --------------------------------------------------------------------------------------------
def _finite_vec(body_name: str, field: str, value, n: int) -> np.ndarray:
    try:
        v = np.asarray(value, dtype=np.float64).reshape(n)
    except (TypeError, ValueError):
        raise InputError(f"body {body_name!r}: {field} must be {n} numbers, got {value!r}") from None
    if not np.all(np.isfinite(v)):
        raise InputError(f"body {body_name!r}: {field} = {v.tolist()} contains NaN or infinity; give finite "
                         "values")
    return v


def _validate(bodies, ground, duration, timestep):
    for name, v in (("duration", duration), ("timestep", timestep)):
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{name} = {v!r} is not a number (seconds)") from None
        if not (math.isfinite(fv) and fv > 0):
            raise InputError(f"{name} = {v!r} s must be positive and finite")
    if float(timestep) > float(duration):
        raise InputError(f"timestep = {timestep} s is longer than duration = {duration} s; use a timestep of "
                         "about 1e-4 to 5e-4 s")
    if float(timestep) > 2e-3:
        warnings.warn(f"timestep = {timestep} s is coarse for impacts (contacts last 10 steps); 1e-4 to 5e-4 s is "
                      "typical", stacklevel=3)
    names = [b.name for b in bodies]
    for b in bodies:
        _finite_vec(b.name, "position", b.position, 3)
        q = _finite_vec(b.name, "quaternion", b.quaternion, 4)
        if np.linalg.norm(q) < 1e-9:
            raise InputError(f"body {b.name!r}: quaternion is zero; give a unit quaternion (w, x, y, z)")
        _finite_vec(b.name, "velocity", b.velocity, 3)
        _finite_vec(b.name, "angular_velocity", b.angular_velocity, 3)
        try:
            m = float(b.mass)
        except (TypeError, ValueError):
            raise InputError(f"body {b.name!r}: mass = {b.mass!r} is not a number (kg)") from None
        if not (math.isfinite(m) and m > 0):
            raise InputError(f"body {b.name!r}: mass = {b.mass!r} kg must be positive and finite")
        inertia = np.asarray(b.inertia, np.float64)
        if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
            raise InputError(f"body {b.name!r}: inertia must be a finite 3x3 matrix (kg m^2)")
        if not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-12 * np.abs(inertia).max()):
            raise InputError(f"body {b.name!r}: inertia is not symmetric")
        ev = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
        if ev[0] <= 0:
            raise InputError(f"body {b.name!r}: inertia is not positive definite (eigenvalues {ev.tolist()})")
        verts = np.asarray(getattr(b.mesh, "vertices", np.zeros((0, 3))), np.float64)
        if verts.ndim != 2 or verts.shape[0] < 4 or not np.all(np.isfinite(verts)):
            raise MeshError(f"body {b.name!r}: mesh needs at least 4 finite vertices")
    if len(set(names)) != len(names):
        raise InputError(f"body names must be unique, got {names}")
    if ground is not None and getattr(ground, "enabled", True):
        if not math.isfinite(float(ground.height)):
            raise InputError(f"ground.height = {ground.height!r} must be finite (m)")


# ---- model --------------------------------------------------------------------------------------------------
@dataclass
class MujocoModel:
    """A compiled scene: MuJoCo model and data plus the maps back to our bodies.

    Attributes
    ----------
    model, data : mujoco.MjModel, mujoco.MjData
        The compiled model and its state (initial state set, nothing stepped).
    geom_owner : ndarray of int
        ``geom_owner[g]``: our body index of MuJoCo geom g (``GROUND`` for the plane).
    hull_vertices : list of ndarray
        ``hull_vertices[i]``: body-frame vertices [m] of body i's convex hull (its lowest point is the mesh's).
    body_size : ndarray
        ``body_size[i]``: bounding-box diagonal [m].
    omega0 : float
        Contact natural frequency [rad/s].
    timestep : float
        Engine step [s].
    collision_parts : list of convex.ConvexParts
        What MuJoCo collides per body (the hull, or the convex parts of a concave body, one geom each).
    """

    model: object
    data: object
    geom_owner: np.ndarray
    hull_vertices: list
    body_size: np.ndarray
    omega0: float
    timestep: float
    collision_parts: list = field(default_factory=list)
    all_free: bool = True             # every body has a free joint (qpos is 7 numbers per body)
    groups: list = field(default_factory=list)   # fracture groups: (bodies, weld equality ids, break speed, geoms)


def _quat_matrix(q) -> np.ndarray:
    from ..rotation import quat_to_matrix
    return quat_to_matrix(q)[0]


def _quat_rotate(q, v):
    """Rotate vectors v (n, 3) by unit quaternions q (n, 4) (w, x, y, z)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def build_model(bodies, ground, timestep: float = 2e-4, *, contact_steps: float = 10.0, progress=None,
                cache=None) -> MujocoModel:
    """Build and compile the MuJoCo model of some bodies over a ground.

    Initial state (positions, orientations, velocities) is set in ``data``; nothing is stepped. See the module
    docstring for every modelling choice.

    Parameters
    ----------
    bodies : list of scene Body
        Mesh in the body frame (centre of mass at the origin) [m], mass [kg], inertia about the COM [kg m^2],
        material (restitution, friction), pose and velocities.
    ground : scene Ground or None
        Plane z = height [m] with its material; None: no ground.
    timestep : float, optional
        Engine step [s].
    contact_steps : float, optional
        Engine steps per undamped contact (sets the contact stiffness, module docstring).
    progress : callable, optional
        Given a str naming the work before a concave body's convex decomposition is computed (as
        Progress.stage's ``update`` takes).
    cache : path-like, optional
        Asset folder for convex decompositions (default ``assets.cache_dir()``).

    Returns
    -------
    MujocoModel

    Raises
    ------
    InputError, MeshError
        On invalid input.
    """
    import mujoco
    import trimesh

    spec = mujoco.MjSpec()
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    opt = spec.option
    opt.timestep = float(timestep)
    opt.gravity = [0.0, 0.0, -GRAVITY]
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.impratio = 10.0
    opt.enableflags |= int(mujoco.mjtEnableBit.mjENBL_SPECULATIVE)

    omega0 = math.pi / (contact_steps * float(timestep))
    solimp = [_IMPEDANCE, _IMPEDANCE, 0.001, 0.5, 2.0]

    def contact_kw(material):
        zeta = restitution_to_damping_ratio(float(material.restitution), float(contact_steps))
        mu = float(material.friction)
        return dict(solref=[-omega0 ** 2, -2.0 * zeta * omega0], solimp=solimp,
                    friction=[mu, 0.005, 0.0001], condim=3 if mu > 0 else 1, margin=0.0, gap=0.0)

    if ground is not None and getattr(ground, "enabled", True):
        spec.worldbody.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0],
                                pos=[0.0, 0.0, float(ground.height)], **contact_kw(ground.material))

    # pre-fractured objects (scene/fracture.py): while a group is welded its pieces must not collide with each
    # other (a contact between neighbours would fight the weld): group g's geoms get contype bit g + 1 and an
    # affinity for everything but their own group; released groups go back to 1 / 1
    group_names = sorted({b.group for b in bodies if getattr(b, "group", "")})
    if len(group_names) > 30:
        raise InputError(f"{len(group_names)} fracture groups; at most 30 are supported")
    all_bits = sum(1 << (g + 1) for g in range(len(group_names)))

    def group_bits(b):
        if not getattr(b, "group", ""):
            return {}
        g = group_names.index(b.group)
        return dict(contype=1 << (g + 1), conaffinity=1 | (all_bits & ~(1 << (g + 1))))

    hulls, sizes, collision = [], [], []
    said = []                           # what convex_parts announced (a decomposition being computed)

    def announce(what):
        said.append(what)
        if progress is not None:
            progress(what)

    for i, b in enumerate(bodies):
        verts = np.asarray(b.mesh.vertices, np.float64)
        sv = np.linalg.svd(verts - verts.mean(axis=0), compute_uv=False)
        if not sv[-1] > 1e-9 * sv[0]:
            raise MeshError(f"body {b.name!r}: its mesh is flat (or a line); a rigid body needs a mesh that "
                            "encloses a volume (give thin objects a thickness)")
        try:
            hull = trimesh.Trimesh(vertices=verts, faces=np.asarray(b.mesh.faces)).convex_hull
        except Exception as exc:  # qhull failures: flat or degenerate meshes
            raise MeshError(f"body {b.name!r}: cannot build the convex hull of its mesh ({exc}); the mesh must "
                            "enclose a volume") from None
        if not hull.volume > 0:
            raise MeshError(f"body {b.name!r}: the convex hull of its mesh has no volume (flat mesh?)")
        hv = np.asarray(hull.vertices, np.float64)
        hulls.append(hv)
        sizes.append(float(np.linalg.norm(hv.max(axis=0) - hv.min(axis=0))))
        cp = convex_parts(verts, np.asarray(b.mesh.faces), name=f"body {b.name!r}", cache=cache,
                          progress=announce)
        collision.append(cp)
        for k, (pv, pf) in enumerate(cp.parts):
            spec.add_mesh(name=f"hull{i}_{k}", uservert=np.asarray(pv, np.float64).ravel(),
                          userface=np.asarray(pf).ravel())
        q = np.asarray(b.quaternion, np.float64)
        body = spec.worldbody.add_body(name=f"body{i}", pos=np.asarray(b.position, np.float64),
                                       quat=q / np.linalg.norm(q))
        mount = getattr(b, "mount", None)
        if mount is None or getattr(mount, "parent", None) is not None:
            body.add_freejoint()       # free, or tied to another free body by a connect constraint (below)
        elif mount.kind in ("hinge", "ball"):
            # a joint to the world at the anchor (body frame: R^T (anchor - position)); static and fixed bodies
            # have no joint: MuJoCo welds them to the world and never collides them with it or with each other
            R = _quat_matrix(q / np.linalg.norm(q))
            jpos = R.T @ (np.asarray(mount.anchor, np.float64) - np.asarray(b.position, np.float64))
            if mount.kind == "hinge":
                body.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, pos=jpos, axis=R.T @ np.asarray(mount.axis))
            else:
                body.add_joint(type=mujoco.mjtJoint.mjJNT_BALL, pos=jpos)
        inertia = 0.5 * (np.asarray(b.inertia, np.float64) + np.asarray(b.inertia, np.float64).T)
        body.mass = float(b.mass)
        body.ipos = [0.0, 0.0, 0.0]           # COM at our body-frame origin (scene/model.py)
        body.fullinertia = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2],
                            inertia[1, 2]]
        body.explicitinertial = True
        for k in range(len(cp.parts)):
            body.add_geom(name=f"geom{i}_{k}", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"hull{i}_{k}",
                          **contact_kw(b.material), **group_bits(b))
    # ball joints between two objects (a key on its ring): MuJoCo's connect constraint at the anchor (body frame of
    # the parent), as stiff as a contact; the two never collide with each other (the key's hole around the wire)
    for i, b in enumerate(bodies):
        mount = getattr(b, "mount", None)
        if mount is None or getattr(mount, "parent", None) is None:
            continue
        k = int(mount.parent)
        pk = bodies[k]
        Rk = _quat_matrix(np.asarray(pk.quaternion, np.float64) / np.linalg.norm(pk.quaternion))
        anchor_k = Rk.T @ (np.asarray(mount.anchor, np.float64) - np.asarray(pk.position, np.float64))
        spec.add_equality(type=mujoco.mjtEq.mjEQ_CONNECT, objtype=mujoco.mjtObj.mjOBJ_BODY,
                          name1=f"body{k}", name2=f"body{i}", solref=[-omega0 ** 2, -2.0 * omega0],
                          solimp=solimp, data=list(anchor_k) + [0.0] * 7 + [1.0, 0.0])
        spec.add_exclude(bodyname1=f"body{k}", bodyname2=f"body{i}")
    # pre-fractured objects (scene/fracture.py): every piece welded to its group's first piece until released
    weld_groups = {}
    for i, b in enumerate(bodies):
        if getattr(b, "group", ""):
            weld_groups.setdefault(b.group, []).append(i)
    n_eq = 0
    eq_of_group = {}
    for g, members in weld_groups.items():
        eq_of_group[g] = []
        for j in members[1:]:
            # as stiff as a contact and critically damped (MuJoCo's default weld is soft: the pieces would
            # bend apart under the impact)
            spec.add_equality(type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY,
                              name1=f"body{members[0]}", name2=f"body{j}",
                              solref=[-omega0 ** 2, -2.0 * omega0], solimp=solimp,
                              # anchor at body2's origin; zero relative quaternion: the relative pose of qpos0
                              data=[0.0] * 10 + [1.0, 0.0])
            eq_of_group[g].append(n_eq)
            n_eq += 1
    if said and progress is not None:
        progress("stepping")
    try:
        model = spec.compile()
    except ValueError as exc:
        msg = str(exc)
        who = ""
        for i, b in enumerate(bodies):
            if f"body{i}'" in msg or f"hull{i}_" in msg or f"geom{i}_" in msg:
                who = f"body {b.name!r}: "
        raise InputError(f"{who}MuJoCo rejected the model: {msg.splitlines()[0]} (check its inertia "
                         "(triangle inequality, positive) and mesh)") from None

    data = mujoco.MjData(model)
    for i, b in enumerate(bodies):
        if model.body_jntadr[i + 1] < 0:
            continue                                   # static / fixed: no degrees of freedom
        adr = model.jnt_dofadr[model.body_jntadr[i + 1]]
        q = np.asarray(b.quaternion, np.float64)
        q = q / np.linalg.norm(q)
        w_world = np.asarray(b.angular_velocity, np.float64)
        w_local = _quat_rotate(np.array([[q[0], -q[1], -q[2], -q[3]]]), w_world[None])[0]
        mount = getattr(b, "mount", None)
        if mount is None:
            data.qvel[adr:adr + 3] = np.asarray(b.velocity, np.float64)
            # A free joint's angular velocity is in the body (local) frame; ours is in the world frame.
            data.qvel[adr + 3:adr + 6] = w_local
        elif getattr(mount, "parent", None) is not None:
            data.qvel[adr:adr + 3] = np.asarray(b.velocity, np.float64)      # tied to a free body: a free joint
            data.qvel[adr + 3:adr + 6] = w_local
        elif mount.kind == "ball":
            data.qvel[adr:adr + 3] = w_local           # a ball joint's velocity: body-frame angular velocity
        else:
            data.qvel[adr] = float(w_world @ np.asarray(mount.axis))      # hinge: the rate about its axis
    geom_owner = model.geom_bodyid.astype(np.int64) - 1      # world body 0 -> GROUND (-1), body k -> k - 1
    owner_all = model.geom_bodyid.astype(np.int64) - 1
    groups = [(np.asarray(weld_groups[g], np.int64), np.asarray(eq_of_group[g], np.int64),
               float(bodies[weld_groups[g][0]].break_speed), np.flatnonzero(np.isin(owner_all, weld_groups[g])))
              for g in weld_groups]
    return MujocoModel(model=model, data=data, geom_owner=geom_owner, hull_vertices=hulls,
                       body_size=np.asarray(sizes, np.float64), omega0=omega0, timestep=float(timestep),
                       collision_parts=collision,
                       all_free=all(getattr(b, "mount", None) is None or getattr(b.mount, "parent", None) is not None
                                    for b in bodies),
                       groups=groups)


def _check_initial_overlap(mm: MujocoModel, bodies, ground, v_min: float):
    """InputError if two bodies, or a body and the ground, overlap at t = 0 deeper than v_min / omega0."""
    import mujoco

    tol = v_min / mm.omega0
    if ground is not None and getattr(ground, "enabled", True):
        for b, hv in zip(bodies, mm.hull_vertices):
            if getattr(b, "mount", None) is not None and not b.mount.moves:
                continue                # a static prop may stand on (or in) the floor: it never collides with it
            q = np.asarray(b.quaternion, np.float64)
            q = q / np.linalg.norm(q)
            zmin = float((_quat_rotate(np.repeat(q[None], len(hv), 0), hv)[:, 2]).min()
                         + np.asarray(b.position, np.float64)[2])
            depth = float(ground.height) - zmin
            if depth > tol:
                raise InputError(f"body {b.name!r} starts {depth * 1e3:.3g} mm below the ground (z = "
                                 f"{float(ground.height)} m); raise its position z by at least that much")
    m, d = mm.model, mm.data
    mujoco.mj_forward(m, d)
    for k in range(d.ncon):
        c = d.contact[k]
        ia, ib = mm.geom_owner[c.geom[0]], mm.geom_owner[c.geom[1]]
        if ia == GROUND or ib == GROUND:
            continue
        if -c.dist > tol:
            raise InputError(f"bodies {bodies[ia].name!r} and {bodies[ib].name!r} overlap by {-c.dist * 1e3:.3g} "
                             "mm at t = 0 (what collides is each body's convex hull, or the convex parts of a "
                             "concave one); move them apart")


# ---- simulation ---------------------------------------------------------------------------------------------
@dataclass
class DynamicsResult:
    """What a dynamics run produced. Arrays per body are world-frame, SI; ``trajectory_*`` only when recorded.

    Attributes
    ----------
    events : EventLog
        The clean events, with body poses at t0 and resting supports.
    raw : RawContacts
        Every raw contact row (resting ones too).
    time : float
        Simulated time [s] (n_steps * timestep).
    n_steps : int
        Engine steps taken.
    wall_time : float
        Wall-clock time of the stepping loop [s].
    position, quaternion, velocity, angular_velocity : ndarray
        Final state per body: COM position (n, 3) [m], orientation (n, 4) (w, x, y, z) body -> world, COM
        velocity (n, 3) [m/s], angular velocity (n, 3) [rad/s], world frame.
    trajectory_t, trajectory_position, trajectory_quaternion : ndarray or None
        Recorded times (m,) [s], positions (m, n, 3) [m] and orientations (m, n, 4), when ``record_every`` was
        given.
    """

    events: EventLog
    raw: RawContacts
    time: float                        # simulated time [s] (n_steps * timestep)
    n_steps: int
    wall_time: float                   # [s]
    position: np.ndarray               # final COM positions (n, 3) [m]
    quaternion: np.ndarray             # final orientations (n, 4) (w, x, y, z), body -> world
    velocity: np.ndarray               # final COM velocities (n, 3) [m/s]
    angular_velocity: np.ndarray       # final angular velocities (n, 3) [rad/s], world frame
    trajectory_t: np.ndarray | None = None
    trajectory_position: np.ndarray | None = None      # (m, n, 3)
    trajectory_quaternion: np.ndarray | None = None    # (m, n, 4)


def _raw_contacts(rec, owner, dt, nb):
    """Per-step MuJoCo records -> RawContacts (world frame, impulse on b = owner(geom[1])) and the pose table."""
    if not rec:
        return RawContacts.empty(), np.zeros(0, np.int64), np.zeros((0, nb, 3)), np.zeros((0, nb, 4))
    steps = np.array([r[0] for r in rec], np.int64)
    ncon = np.array([len(r[1]) for r in rec], np.int64)
    nefc = np.array([len(r[6]) for r in rec], np.int64)
    efc_off = np.repeat(np.r_[0, np.cumsum(nefc)[:-1]], ncon)
    addr = np.concatenate([r[1] for r in rec])
    dim = np.concatenate([r[2] for r in rec])
    geom = np.concatenate([r[3] for r in rec])
    pos = np.concatenate([r[4] for r in rec])
    frame = np.concatenate([r[5] for r in rec])
    efc_force = np.concatenate([r[6] for r in rec])
    efc_vel = np.concatenate([r[7] for r in rec])
    step = np.repeat(steps, ncon)
    ok = addr >= 0                       # contacts in the constraint solve (not excluded, not in a gap)
    lanes = np.arange(3)
    gaddr = (efc_off + addr)[ok]
    # Elliptic cones: the efc rows of a contact are its contact-frame force (normal, tangent 1, tangent 2).
    idx = np.minimum(gaddr[:, None] + lanes, len(efc_force) - 1)
    fc = efc_force[idx] * (lanes < dim[ok, None])
    frame = frame[ok]
    normal = frame[:, 0:3]
    # Contact frame rows: normal (from geom[0] to geom[1]), tangent 1, tangent 2. The force is the one geom[0]
    # exerts on geom[1] (positive normal = pushing apart): the force on b = owner(geom[1]).
    f_world = fc[:, 0:1] * normal + fc[:, 1:2] * frame[:, 3:6] + fc[:, 2:3] * frame[:, 6:9]
    geom = geom[ok]
    raw = RawContacts(t=step[ok] * dt, step=step[ok], a=owner[geom[:, 0]], b=owner[geom[:, 1]], point=pos[ok],
                      normal=normal, impulse=f_world * dt,
                      # efc_vel of a normal row is the separating speed (geom[1] relative to geom[0]) at the
                      # start of the step; the approach speed is its negative.
                      vn=-efc_vel[gaddr])
    return raw, steps, np.stack([r[8] for r in rec]), np.stack([r[9] for r in rec])


def _check_stable(d, t):
    import mujoco

    # MuJoCo silently resets the state when the acceleration blows up (mjWARN_BADQACC): never let that pass.
    if d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number or not np.isfinite(d.qvel).all():
        raise SolverError(f"the rigid-body simulation became unstable near t = {t:.4g} s; lower the timestep or "
                          "check the bodies' masses, inertias and initial velocities")


def _poses(m, d, nb, all_free):
    """Body positions (nb, 3) and orientations (nb, 4) of the current qpos."""
    if all_free:
        return (d.qpos[:7 * nb].reshape(nb, 7)[:, :3].copy(), d.qpos[:7 * nb].reshape(nb, 7)[:, 3:].copy())
    import mujoco
    mujoco.mj_kinematics(m, d)
    return d.xpos[1:].copy(), d.xquat[1:].copy()


def _release_groups(mm, d, intact: list, t: float, broken: list) -> None:
    """Release the welds of every intact fracture group one of whose pieces touches a body outside the group (or
    the ground) approaching faster than the group's break speed in this step (scene/fracture.py)."""
    owner = mm.geom_owner
    for gi in list(intact):
        members, eqs, v_break, geoms = mm.groups[gi]
        for k in range(d.ncon):
            c = d.contact[k]
            a, b = owner[c.geom[0]], owner[c.geom[1]]
            ina, inb = a in members, b in members
            if ina == inb or c.efc_address < 0:
                continue
            if -float(d.efc_vel[c.efc_address]) > v_break:
                d.eq_active[eqs] = 0
                mm.model.geom_contype[geoms] = 1          # the pieces collide with each other from now on
                mm.model.geom_conaffinity[geoms] = 1
                intact.remove(gi)
                broken.append((gi, t))
                break


def _state(m, d, nb, all_free=True):
    if not all_free:
        import mujoco
        pos, quat = _poses(m, d, nb, False)
        vel, w_world = np.zeros((nb, 3)), np.zeros((nb, 3))
        mujoco.mj_comVel(m, d)
        res = np.zeros(6)
        for i in range(nb):
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, i + 1, res, 0)
            w_world[i], vel[i] = res[:3], res[3:]
        return pos, quat, vel, w_world
    pos = d.qpos[:7 * nb].reshape(nb, 7)[:, :3].copy() if nb else np.zeros((0, 3))
    quat = d.qpos[:7 * nb].reshape(nb, 7)[:, 3:].copy() if nb else np.zeros((0, 4))
    vel = d.qvel[:6 * nb].reshape(nb, 6)
    w_world = _quat_rotate(quat, vel[:, 3:]) if nb else np.zeros((0, 3))
    return pos, quat, vel[:, :3].copy(), w_world


def _rest_sample_every(dt: float) -> int:
    """Engine steps between the steps of long resting contact that are always kept (one every 10 ms), also the
    steps where resting stretches read their supports (dynamics/resting.py)."""
    return max(1, int(round(0.01 / float(dt))))


def run_dynamics(bodies, ground, duration: float, timestep: float = 2e-4, *, v_min: float = V_MIN,
                 progress=None, contact_steps: float = 10.0, record_every: int | None = None,
                 max_gap: float | None = None, settle_time: float = 2e-3, thin_rest: bool = True
                 ) -> DynamicsResult:
    """Simulate and return events, raw contacts and the final state (see :func:`simulate`).

    Parameters
    ----------
    bodies, ground, duration, timestep, v_min, progress, contact_steps
        As in :func:`simulate`.
    record_every : int, optional
        Record body poses every that many steps (for tests and plots).
    max_gap : float, optional
        Contact gap that ends a collision [s] (default max(1 ms, 3 steps); :func:`~.hygiene.merge_collisions`).
    settle_time : float, optional
        Calm time after which a contact is resting [s] (:mod:`.hygiene`, step 4).
    thin_rest : bool, optional
        Keep only the raw rows of long resting contact that the events and resting stretches use
        (:func:`~.hygiene.thin_resting`: the same events; memory no longer grows with the time bodies lie still).
        ``res.raw`` then holds the thinned rows.

    Returns
    -------
    DynamicsResult

    Raises
    ------
    InputError
        On invalid bodies, ground, times, ``v_min`` < 0, ``contact_steps`` < 4, or bodies overlapping at t = 0.
    SolverError
        If the simulation becomes unstable.
    """
    import mujoco

    _validate(bodies, ground, duration, timestep)
    if not (math.isfinite(float(v_min)) and float(v_min) >= 0):
        raise InputError(f"v_min = {v_min!r} m/s must be a non-negative number")
    if not (math.isfinite(float(contact_steps)) and float(contact_steps) >= 4):
        raise InputError(f"contact_steps = {contact_steps!r} must be >= 4 (the explicit contact step is unstable "
                         "when a contact lasts fewer steps)")
    dt = float(timestep)
    nb = len(bodies)
    n_steps = int(math.ceil(float(duration) / dt - 1e-9))
    if nb == 0:
        z3 = np.zeros((0, 3))
        return DynamicsResult(events=EventLog.empty(), raw=RawContacts.empty(), time=n_steps * dt,
                              n_steps=n_steps, wall_time=0.0, position=z3, quaternion=np.zeros((0, 4)),
                              velocity=z3, angular_velocity=z3)
    mm = build_model(bodies, ground, dt, contact_steps=contact_steps, progress=progress)
    _check_initial_overlap(mm, bodies, ground, v_min)
    m, d = mm.model, mm.data
    owner = mm.geom_owner

    # Per-step Python work is only copying MuJoCo's arrays (~15 us); all gathering and geometry is vectorised
    # afterwards. xpos/xquat live in fixed buffers (views can be kept); efc_* are re-allocated every step.
    xpos, xquat = d.xpos, d.xquat
    rec = []                           # (step, efc_address, dim, geom, pos, frame, efc_force, efc_vel, xpos, xquat)
    parts, pose_parts = [], []

    gap = max(1e-3, 3 * dt) if max_gap is None else float(max_gap)
    # rows kept around every non-calm row (thin_resting's condition), and one step of rest every 10 ms
    margin = int(math.ceil((2 * float(settle_time) + 3 * gap) / dt)) + 2
    keep_every = _rest_sample_every(dt)

    def flush():
        # Convert a chunk of per-step records into compact rows, keeping body poses only for steps where some
        # contact approaches at >= v_min: an event's t0 step always is one (its vn >= v_min), resting steps never.
        raw_c, steps, P, Q = _raw_contacts(rec, owner, dt, nb)
        hot = np.isin(steps, raw_c.step[raw_c.vn >= v_min])
        if thin_rest:
            raw_c = thin_resting(raw_c, v_min=v_min, margin_steps=margin, keep_every=keep_every,
                                 bridge_steps=max(1, int(math.ceil(gap / dt)) - 1))
        parts.append(raw_c)
        pose_parts.append((steps[hot], P[hot], Q[hot]))
        rec.clear()

    # the pose record, preallocated (a list of small arrays per record costs ~10x the numbers at 1 kHz)
    n_rec = -(-n_steps // record_every) if record_every else 0
    traj_p, traj_q = np.empty((n_rec, nb, 3)), np.empty((n_rec, nb, 4))
    intact = list(range(len(mm.groups)))          # fracture groups still welded
    broken = []                                   # (group index, time [s]) of each release
    every = max(1, n_steps // 100)
    t_start = time.perf_counter()
    for k in range(n_steps):
        if record_every and k % record_every == 0:
            traj_p[k // record_every], traj_q[k // record_every] = _poses(m, d, nb, mm.all_free)
        mujoco.mj_step(m, d)
        # After mj_step, contacts, efc_force/efc_vel and xpos/xquat belong to the state at the start of the step
        # (t = k dt); the force acted over [k dt, (k + 1) dt].
        if d.ncon and intact:
            _release_groups(mm, d, intact, k * dt, broken)
        if d.ncon:
            c = d.contact
            # The contact arrays are views into MuJoCo's arena, overwritten next step: copy everything.
            rec.append((k, c.efc_address.copy(), c.dim.copy(), c.geom.copy(), c.pos.copy(), c.frame.copy(),
                        d.efc_force.copy(), d.efc_vel.copy(), xpos[1:].copy(), xquat[1:].copy()))
            if len(rec) >= _CHUNK:
                flush()
        if k % every == 0:
            if progress is not None:
                progress(k / n_steps)
            _check_stable(d, k * dt)
    _check_stable(d, n_steps * dt)
    flush()
    wall = time.perf_counter() - t_start
    if progress is not None:
        progress(1.0)

    raw = RawContacts.concat(parts)
    pose_step = np.concatenate([p[0] for p in pose_parts])
    P = np.concatenate([p[1] for p in pose_parts])
    Q = np.concatenate([p[2] for p in pose_parts])
    merged = clean_contacts(raw, mm.body_size, v_min=v_min, max_gap=gap,
                            settle_time=settle_time)
    log = merged.to_event_log([b.name for b in bodies])
    if len(merged):
        row = np.searchsorted(pose_step, merged.step)
        assert np.array_equal(pose_step[row], merged.step), "event step without a recorded pose"
        for side, ids in (("a", merged.a), ("b", merged.b)):
            pos = np.full((len(merged), 3), np.nan)
            quat = np.full((len(merged), 4), np.nan)
            real = ids != GROUND
            pos[real] = P[row[real], ids[real]]
            quat[real] = Q[row[real], ids[real]]
            setattr(log, f"pos_{side}", pos)
            setattr(log, f"quat_{side}", quat)

    pos, quat, vel, w = _state(m, d, nb, mm.all_free)
    res = DynamicsResult(events=log, raw=raw, time=n_steps * dt, n_steps=n_steps, wall_time=wall, position=pos,
                         quaternion=quat, velocity=vel, angular_velocity=w)
    if record_every:
        res.trajectory_t = (np.arange(n_rec) * record_every) * dt
        res.trajectory_position = traj_p
        res.trajectory_quaternion = traj_q
    return res


def simulate(bodies, ground, duration: float, timestep: float = 2e-4, *, v_min: float = V_MIN, progress=None,
             contact_steps: float = 10.0, motion_rate: float | None = None) -> EventLog:
    """Simulate rigid bodies with MuJoCo and return the clean event log.

    Parameters
    ----------
    bodies : list of scene Body
        Mesh in the body frame, COM at the origin [m]; mass [kg]; inertia [kg m^2] about the COM, body axes;
        position [m]; quaternion (w, x, y, z); velocity [m/s]; angular_velocity [rad/s] in the world frame.
    ground : scene Ground or None
        Plane z = height [m], +z up; None: no ground.
    duration : float
        Simulated time [s].
    timestep : float, optional
        Engine step [s] (default 2e-4).
    v_min : float, optional
        Collisions slower than this [m/s] are dropped (default 0.05, the PAN paper's sec. 4.3).
    progress : callable, optional
        Called with the fraction done in [0, 1]; before computing a concave body's convex decomposition (not when
        it is cached) it is given a str naming that work, as Progress.stage's ``update`` takes. The decomposition
        is cached in ``assets.cache_dir()`` ($IMPACTSOUND_CACHE).
    contact_steps : float, optional
        Engine steps per undamped contact (stiffness; see module docstring).
    motion_rate : float, optional
        Record every body's pose at least this often [Hz] and attach the record to the log as ``log.motion``
        (a list of :class:`~impactsound.scene.trajectory.Trajectory`, one per body, resting stretches dropped;
        transfer/motion.py), so that radiation can follow the bodies while they ring.

    Returns
    -------
    EventLog
        Events carry the pose of each body frame at t0 (NaN for the ground) and each body's resting support at t0
        (support_* columns; NaN for a free body and the ground).
    """
    every = None
    if motion_rate:
        every = max(1, int(math.floor(1.0 / (float(motion_rate) * float(timestep)) + 1e-9)))
    res = run_dynamics(bodies, ground, duration, timestep, v_min=v_min, progress=progress,
                       contact_steps=contact_steps, record_every=every)
    log = res.events
    if every and res.trajectory_t is not None:
        from ..transfer.motion import compress_motion
        # the final pose closes the record
        t = np.append(res.trajectory_t, res.time)
        P = np.concatenate([res.trajectory_position, res.position[None]])
        Q = np.concatenate([res.trajectory_quaternion, res.quaternion[None]])
        log.motion = [compress_motion(t, P[:, i], Q[:, i]) for i in range(len(bodies))]
        # where each free body lies still on its supports (resting contact damping, sources/resting.py); static and
        # jointed bodies are held, not resting
        from .resting import resting_stretches
        log.resting = {i: r for i in range(len(bodies)) if getattr(bodies[i], "mount", None) is None
                       or getattr(bodies[i].mount, "parent", None) is not None
                       if (r := resting_stretches(t, P[:, i], Q[:, i], res.raw, i, float(np.linalg.norm(
                           np.ptp(np.asarray(bodies[i].mesh.vertices), axis=0))), float(timestep),
                           sample_every=_rest_sample_every(timestep)))}
    return log
