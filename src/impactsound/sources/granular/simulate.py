"""Event-driven simulation of inelastic hard spheres under gravity: the collision log of a granular pour (M. Marko,
"Sound simulation of granular materials", sec. 5.4, 6.1 and App. B.2, where the DynamO simulator, modified to log
every collision, produced the grain and container events).

Physics: smooth rigid spheres (no friction, no rotation) fly on parabolas under gravity ``g`` and collide
instantaneously and pairwise; a collision reverses the normal relative velocity scaled by the restitution e
(tangential velocities are kept). Walls are static: a horizontal floor, planes, disks, vertical cylinders, cups
(a disk plus a cylinder), upward cones (funnels) and static spheres (the thesis built its cup and funnel from
static spheres). Every contact time is exact (roots of the contact polynomials, module :mod:`._sim_kernel`): no
collision is missed and grains never overlap beyond round-off.

Each wall belongs to a named *body*; a grain hitting it is a CONTAINER event (kind 1) with id_b = the body's index
in ``containers`` and element = the part of the body hit (module :mod:`.events`); grain pairs are GRAIN events
(kind 0) with id_a < id_b and the normal from grain id_b to grain id_a, the point on the line of centres. v0 is the
normal approach speed before the hit, e the restitution applied (rebound over approach speed, at most 1: see the
collapse guard). A touch without approach (v0 <= 0, possible only within round-off) changes nothing and is not
logged.

Geometry conventions (all SI, z up for the shapes; gravity may point anywhere):

* :class:`Floor` -- the plane z = const, one-sided (grains above it). :class:`Plane` -- any one-sided plane.
* :class:`Disk`, :class:`Cylinder`, :class:`Cone`, :class:`Cup` are thin two-sided shells with their edges as
  rings: a grain hits the inside or the outside of a cup wall, or its rim, whichever it meets; a grain above the
  rim passes over it, and a grain outside stays outside. Parts (the ``element`` of an event): Disk 0 face, 1 edge;
  Cylinder 0 wall, 1 lower edge, 2 upper edge; Cup 0 bottom, 1 wall, 2 bottom edge, 3 rim; Cone 0 face, 1 hole
  rim, 2 top rim; a plane 0; StaticSpheres: the sphere's index. Several walls may share a body; their parts are
  then numbered on in the order the walls are listed.
* Where walls meet (a cup standing on the floor), a hit on both at the same instant goes to the finite wall (the
  cup), not the infinite plane.

Collapse guard (inelastic collapse: infinitely many collisions in finite time when inelastic grains rest on each
other; the thesis' funnel with grains resting on its bottom ran >10 million events without a grain leaving,
App. B.2). Three measures, all documented in :func:`simulate`:

1. Slow collisions are elastic (the idea of Luding & McNamara's TC model, and DynamO's "elastic velocity"): the
   rebound normal speed is max(e v0, min(v0, v_elastic)), so e_eff = 1 below v_elastic, joined continuously. A
   grain pressed onto a static obstacle by gravity always rebounds at >= v_elastic (a grain sliding down a
   funnel bounces at that speed, every 2 v_elastic/(g cos) seconds, instead of ever lower and ever more often).
2. Resting rule: a grain that hits a *support* (a frozen grain, or a wall/static sphere of a body with
   ``rest=True``: the default for floors, disks, cylinders, cups and static spheres, not for planes and cones, so
   that funnels and slopes drain) slower than v_rest,
   with the contact normal within ``rest_angle`` of the upward vertical (or leaving that hit slower than v_rest
   in all, a grain trapped in a steep pocket), freezes there: it stops moving for good and becomes a static
   sphere for the others, so later hits on it are still GRAIN events. Its effect: a pile is rigid and keeps the
   shape it was built with (a stand-in for the friction and rolling resistance smooth spheres lack); the tiny
   bounces below v_rest (quiet: the pulse scales as v0^1.2) are not simulated.
3. Detector: if the queue pops per moving grain per simulated second exceed ``collapse_rate`` in two successive
   chunks of 65,536 pops, the run stops with a :class:`~impactsound.errors.SolverError` saying so and what to
   change. ``max_events`` bounds the number of collisions: the stop for grains that never come to rest without
   collapsing (piled above a funnel hole too small for them, they bounce at v_elastic for ever, some 1e4-1e5
   collisions per grain and simulated second), with a message that says so.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ...errors import InputError, SolverError
from . import _sim_kernel as K
from .events import CONTAINER, GRAIN, GranularEvents

#: bump when the same inputs would give different events (cached simulations key on it)
SIMULATOR_VERSION = 1
CHUNK = 1 << 16                    # queue pops between returns to Python (progress, collapse detector)
_BOX_BIG = 1e150


def _vec(x, n, what):
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if a.shape != (n,) or not np.isfinite(a).all():
        raise InputError(f"{what} must be {n} finite numbers, got {x!r}")
    return a


def _pos(x, what):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number, got {x!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"{what} must be positive and finite, got {x!r}")
    return v


def _num(x, what):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{what} must be finite, got {x!r}")
    return v


# ---------------------------------------------------------------------------------------------- grains
@dataclass
class GrainSet:
    """Grains to simulate (SI units).

    Attributes
    ----------
    positions : (N, 3) array
        Centres [m] at time 0 (for a dormant grain, at its release).
    velocities : (N, 3) array
        Velocities [m/s] (at release for dormant grains; ignored for frozen ones).
    radii : (N,) array
        Radii [m], > 0.
    material : (N,) int array
        Index into ``materials`` (default all 0).
    materials : tuple of str
        Material names (looked up in the material table for their density unless ``densities`` is given).
    frozen : (N,) bool array or None
        Grains at rest from the start (a settled pile, e.g. a pre-filled cup): static spheres that never move.
    release : (N,) array or None
        Time [s] each grain enters the simulation (a pour at a given rate; 0 = from the start). Before it the
        grain is dormant: not there at all.
    densities : tuple of float or None
        Density [kg/m^3] per material; only mass ratios matter (unequal grains).
    """

    positions: np.ndarray
    velocities: np.ndarray
    radii: np.ndarray
    material: np.ndarray | None = None
    materials: tuple = ("glass",)
    frozen: np.ndarray | None = None
    release: np.ndarray | None = None
    densities: tuple | None = None

    def __len__(self) -> int:
        return int(np.shape(self.radii)[0])


def _check_grains(gs: GrainSet):
    """Arrays of a GrainSet, validated: (pos, vel, rad, mat, materials, frozen, release, rho per material)."""
    pos = np.asarray(gs.positions, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise InputError(f"grains: positions must be an (N, 3) array [m], got shape {pos.shape}")
    n = pos.shape[0]
    if n == 0:
        raise InputError("grains: no grains to simulate")
    vel = np.asarray(gs.velocities, dtype=np.float64)
    if vel.shape != (n, 3):
        raise InputError(f"grains: velocities must be an ({n}, 3) array [m/s], got shape {vel.shape}")
    rad = np.asarray(gs.radii, dtype=np.float64)
    if rad.ndim == 0:
        rad = np.full(n, float(rad))
    if rad.shape != (n,):
        raise InputError(f"grains: radii must be ({n},) [m], got shape {rad.shape}")
    for name, arr in (("positions", pos), ("velocities", vel)):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"grains: grain {i} has a NaN or infinite entry in {name}: {arr[i].tolist()}")
    bad = ~(np.isfinite(rad) & (rad > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"grains: grain {i} has radius {float(rad[i])!r} m; radii must be positive and finite")
    materials = tuple(str(m) for m in gs.materials)
    if not materials:
        raise InputError("grains: materials must name at least one material")
    mat = np.zeros(n, np.int64) if gs.material is None else np.asarray(gs.material)
    if mat.ndim == 0:
        mat = np.full(n, int(mat))
    if mat.shape != (n,) or not np.issubdtype(mat.dtype, np.integer):
        raise InputError(f"grains: material must be ({n},) integer indices into materials {list(materials)}")
    bad = (mat < 0) | (mat >= len(materials))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"grains: grain {i} has material index {int(mat[i])}, outside materials "
                         f"{list(materials)}")
    frozen = np.zeros(n, bool) if gs.frozen is None else np.asarray(gs.frozen, dtype=bool)
    if frozen.shape != (n,):
        raise InputError(f"grains: frozen must be ({n},) booleans")
    release = np.zeros(n) if gs.release is None else np.asarray(gs.release, dtype=np.float64)
    if release.shape != (n,):
        raise InputError(f"grains: release must be ({n},) times [s]")
    bad = ~(np.isfinite(release) & (release >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"grains: grain {i} has release time {float(release[i])!r} s; it must be finite and >= 0")
    bad = frozen & (release > 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"grains: grain {i} is frozen but released at {release[i]} s; a frozen grain is there "
                         "from the start (release 0)")
    if gs.densities is not None:
        rho = np.asarray(gs.densities, dtype=np.float64).reshape(-1)
        if rho.shape != (len(materials),) or not (np.isfinite(rho) & (rho > 0)).all():
            raise InputError(f"grains: densities must give one positive density [kg/m^3] per material "
                             f"{list(materials)}, got {gs.densities!r}")
    else:
        from ...materials import get_material
        rho = np.array([get_material(m, where="grains: materials").rho for m in materials])
    return pos, vel, rad, mat.astype(np.int64), materials, frozen, release, rho


# ----------------------------------------------------------------------------------------------- walls
def _box(lo, hi):
    return np.array([*lo, *hi], dtype=np.float64)


def _prm(*vals):
    q = np.zeros(10)
    q[:len(vals)] = vals
    return q


def _ring(cx, cy, z, R):
    return (K.P_RING, _prm(cx, cy, z, R), _box((cx - R, cy - R, z), (cx + R, cy + R, z)))


def _tube(cx, cy, R, z0, z1, lower, upper):
    """The parts of a vertical tube: wall, lower edge, upper edge."""
    return [(K.P_CYL, _prm(cx, cy, R, z0, z1), _box((cx - R, cy - R, z0), (cx + R, cy + R, z1)), "wall"),
            (*_ring(cx, cy, z0, R), lower), (*_ring(cx, cy, z1, R), upper)]


def _check_body(body, what):
    if not isinstance(body, str) or not body:
        raise InputError(f"{what}: body must be a non-empty name, got {body!r}")


@dataclass(frozen=True)
class Floor:
    """The horizontal plane z = ``z`` [m]; grains stay above it (one-sided, infinite)."""

    z: float = 0.0
    body: str = "floor"
    rest: bool = True

    def _parts(self):
        z = _num(self.z, "Floor.z [m]")
        _check_body(self.body, "Floor")
        return [(K.P_PLANE, _prm(0.0, 0.0, z, 0.0, 0.0, 1.0), None, "floor")]


@dataclass(frozen=True)
class Plane:
    """An infinite one-sided plane through ``point`` [m]; grains stay on the side ``normal`` points to."""

    point: tuple = (0.0, 0.0, 0.0)
    normal: tuple = (0.0, 0.0, 1.0)
    body: str = "wall"
    rest: bool = False

    def _parts(self):
        p = _vec(self.point, 3, "Plane.point [m]")
        nv = _vec(self.normal, 3, "Plane.normal")
        nn = np.linalg.norm(nv)
        if nn == 0:
            raise InputError("Plane.normal must not be zero")
        _check_body(self.body, "Plane")
        return [(K.P_PLANE, _prm(*p, *(nv / nn)), None, "plane")]


@dataclass(frozen=True)
class Disk:
    """A thin horizontal disk, centre (x, y, z) [m], radius [m], hit from above or below; its edge is a ring."""

    center: tuple = (0.0, 0.0, 0.0)
    radius: float = 0.05
    body: str = "disk"
    rest: bool = True

    def _parts(self):
        c = _vec(self.center, 3, "Disk.center [m]")
        R = _pos(self.radius, "Disk.radius [m]")
        _check_body(self.body, "Disk")
        return [(K.P_DISK, _prm(c[0], c[1], c[2], R), _box(c - (R, R, 0), c + (R, R, 0)), "face"),
                (*_ring(c[0], c[1], c[2], R), "edge")]


@dataclass(frozen=True)
class Cylinder:
    """A thin vertical tube: axis through ``center_xy`` [m], ``radius`` [m], from ``z_min`` to ``z_max`` [m]; hit
    from inside or outside; its two edges are rings. No bottom (see :class:`Cup`)."""

    center_xy: tuple = (0.0, 0.0)
    radius: float = 0.04
    z_min: float = 0.0
    z_max: float = 0.1
    body: str = "cylinder"
    rest: bool = True

    def _parts(self):
        cx, cy = _vec(self.center_xy, 2, "Cylinder.center_xy [m]")
        R = _pos(self.radius, "Cylinder.radius [m]")
        z0, z1 = _num(self.z_min, "Cylinder.z_min [m]"), _num(self.z_max, "Cylinder.z_max [m]")
        if z1 <= z0:
            raise InputError(f"Cylinder: z_max = {z1} m must exceed z_min = {z0} m")
        _check_body(self.body, "Cylinder")
        return _tube(cx, cy, R, z0, z1, "lower edge", "upper edge")


@dataclass(frozen=True)
class Cup:
    """A cup: a bottom disk at ``z_bottom`` and a thin vertical wall of ``height`` [m], axis through
    ``center_xy`` [m], inner ``radius`` [m]. Parts: 0 bottom, 1 wall, 2 bottom edge, 3 rim."""

    center_xy: tuple = (0.0, 0.0)
    radius: float = 0.04
    z_bottom: float = 0.0
    height: float = 0.08
    body: str = "cup"
    rest: bool = True

    def _parts(self):
        cx, cy = _vec(self.center_xy, 2, "Cup.center_xy [m]")
        R = _pos(self.radius, "Cup.radius [m]")
        z0 = _num(self.z_bottom, "Cup.z_bottom [m]")
        z1 = z0 + _pos(self.height, "Cup.height [m]")
        _check_body(self.body, "Cup")
        return [(K.P_DISK, _prm(cx, cy, z0, R), _box((cx - R, cy - R, z0), (cx + R, cy + R, z0)), "bottom"),
                *_tube(cx, cy, R, z0, z1, "bottom edge", "rim")]


@dataclass(frozen=True)
class Cone:
    """A funnel: the thin surface of a cone opening upwards, axis vertical through ``center_xy`` [m], from the hole
    (radius ``r_bottom`` > 0 at height ``z_bottom``) to the top rim (``r_top`` > ``r_bottom`` at ``z_top``) [m];
    hit from inside or outside; both rims are rings. Parts: 0 face, 1 hole rim, 2 top rim. ``rest`` is False by
    default so that grains slide through (smooth spheres on a slope never stop)."""

    center_xy: tuple = (0.0, 0.0)
    z_bottom: float = 0.1
    r_bottom: float = 0.004
    z_top: float = 0.16
    r_top: float = 0.04
    body: str = "funnel"
    rest: bool = False

    @classmethod
    def funnel(cls, *, z_hole: float, hole_radius: float, half_angle: float, height: float,
               center_xy=(0.0, 0.0), body: str = "funnel", rest: bool = False) -> "Cone":
        """A funnel from its hole (height ``z_hole``, ``hole_radius`` [m]), the half-angle of the cone [deg]
        (between the wall and the vertical axis) and the height of the wall above the hole [m]."""
        ang = _num(half_angle, "Cone.funnel half_angle [deg]")
        if not 0 < ang < 90:
            raise InputError(f"Cone.funnel: half_angle = {ang} deg must lie in (0, 90)")
        H = _pos(height, "Cone.funnel height [m]")
        r0 = _pos(hole_radius, "Cone.funnel hole_radius [m]")
        return cls(center_xy=center_xy, z_bottom=float(z_hole), r_bottom=r0, z_top=float(z_hole) + H,
                   r_top=r0 + H * math.tan(math.radians(ang)), body=body, rest=rest)

    def geometry(self):
        """(tan, sin, cos of the half-angle, z of the apex [m])."""
        r0 = _pos(self.r_bottom, "Cone.r_bottom (the hole radius) [m]")
        r1 = _pos(self.r_top, "Cone.r_top [m]")
        z0, z1 = _num(self.z_bottom, "Cone.z_bottom [m]"), _num(self.z_top, "Cone.z_top [m]")
        if z1 <= z0 or r1 <= r0:
            raise InputError(f"Cone: needs z_top > z_bottom and r_top > r_bottom (a cone opening upwards), got "
                             f"z {z0}..{z1} m, r {r0}..{r1} m")
        tn = (r1 - r0) / (z1 - z0)
        al = math.atan(tn)
        return tn, math.sin(al), math.cos(al), z0 - r0 / tn

    def _parts(self):
        cx, cy = _vec(self.center_xy, 2, "Cone.center_xy [m]")
        tn, sn, cs, za = self.geometry()
        z0, z1, r0, r1 = float(self.z_bottom), float(self.z_top), float(self.r_bottom), float(self.r_top)
        _check_body(self.body, "Cone")
        return [(K.P_CONE, _prm(cx, cy, za, tn, sn, cs, z0, z1, r0, r1),
                 _box((cx - r1, cy - r1, z0), (cx + r1, cy + r1, z1)), "face"),
                (*_ring(cx, cy, z0, r0), "hole rim"), (*_ring(cx, cy, z1, r1), "top rim")]


@dataclass(frozen=True, eq=False)
class StaticSpheres:
    """Fixed spheres (centres (K, 3) [m], radii (K,) or one radius [m]): the thesis built its cup and funnel from
    them. The event's element is the sphere's index."""

    centers: np.ndarray
    radii: np.ndarray | float
    body: str = "spheres"
    rest: bool = True

    def _spheres(self):
        c = np.asarray(self.centers, dtype=np.float64)
        if c.ndim != 2 or c.shape[1] != 3 or not np.isfinite(c).all():
            raise InputError(f"StaticSpheres ({self.body!r}): centers must be a finite (K, 3) array [m]")
        r = np.broadcast_to(np.asarray(self.radii, dtype=np.float64), (c.shape[0],)).copy()
        bad = ~(np.isfinite(r) & (r > 0))
        if bad.any():
            raise InputError(f"StaticSpheres ({self.body!r}): sphere {int(np.flatnonzero(bad)[0])} has radius "
                             f"{r[bad][0]!r}; radii must be positive")
        _check_body(self.body, "StaticSpheres")
        return c, r


Wall = Floor | Plane | Disk | Cylinder | Cup | Cone | StaticSpheres


@dataclass
class _Scene:
    bodies: list
    body_rest: np.ndarray
    ptype: np.ndarray
    pprm: np.ndarray
    pbox: np.ndarray
    pbody: np.ndarray
    pelem: np.ndarray
    pname: list
    spos: np.ndarray
    srad: np.ndarray
    sbody: np.ndarray
    selem: np.ndarray


def _compile_walls(walls) -> _Scene:
    if walls is None:
        walls = ()
    if not isinstance(walls, (list, tuple)):
        walls = (walls,)
    bodies, rest, nelem = [], [], []
    ptype, pprm, pbox, pbody, pelem, pname = [], [], [], [], [], []
    spos, srad, sbody, selem = [], [], [], []
    for w in walls:
        if not isinstance(w, (Floor, Plane, Disk, Cylinder, Cup, Cone, StaticSpheres)):
            raise InputError(f"walls: {w!r} is not a wall (Floor, Plane, Disk, Cylinder, Cup, Cone, StaticSpheres)")
        if w.body not in bodies:
            bodies.append(w.body)
            rest.append(bool(w.rest))
            nelem.append(0)
        b = bodies.index(w.body)
        if rest[b] != bool(w.rest):
            raise InputError(f"walls: body {w.body!r} is listed with rest=True and rest=False; give its walls "
                             "one value")
        if isinstance(w, StaticSpheres):
            c, r = w._spheres()
            spos.append(c)
            srad.append(r)
            sbody.append(np.full(len(r), b))
            selem.append(nelem[b] + np.arange(len(r)))
            nelem[b] += len(r)
            continue
        for kind, q, box, name in w._parts():
            ptype.append(kind)
            pprm.append(q)
            pbox.append(np.array([-_BOX_BIG] * 3 + [_BOX_BIG] * 3) if box is None else box)
            pbody.append(b)
            pelem.append(nelem[b])
            pname.append(f"{type(w).__name__} {w.body!r} {name}")
            nelem[b] += 1
    return _Scene(bodies=bodies, body_rest=np.array(rest, np.int64),
                  ptype=np.array(ptype, np.int64), pprm=np.array(pprm).reshape(-1, 10),
                  pbox=np.array(pbox).reshape(-1, 6), pbody=np.array(pbody, np.int64),
                  pelem=np.array(pelem, np.int64), pname=pname,
                  spos=np.concatenate(spos) if spos else np.zeros((0, 3)),
                  srad=np.concatenate(srad) if srad else np.zeros(0),
                  sbody=np.concatenate(sbody).astype(np.int64) if sbody else np.zeros(0, np.int64),
                  selem=np.concatenate(selem).astype(np.int64) if selem else np.zeros(0, np.int64))


def _restitution_tables(restitution, materials, bodies):
    """(e_gg (M, M), e_gw (M, B)) from a number or a mapping {(material, material) or (material, body): e,
    "default": e}."""
    M, B = len(materials), len(bodies)

    def check(v, what):
        try:
            e = float(v)
        except (TypeError, ValueError):
            raise InputError(f"restitution {what}: {v!r} is not a number") from None
        if not (0.0 < e <= 1.0):
            raise InputError(f"restitution {what} = {e} must lie in (0, 1] (1 elastic)")
        return e

    if not isinstance(restitution, Mapping):
        e = check(restitution, "")
        return np.full((M, M), e), np.full((M, max(B, 1)), e)
    default = check(restitution["default"], "'default'") if "default" in restitution else np.nan
    gg = np.full((M, M), default)
    gw = np.full((M, max(B, 1)), default)
    for k, v in restitution.items():
        if k == "default":
            continue
        if not (isinstance(k, tuple) and len(k) == 2 and all(isinstance(s, str) for s in k)):
            raise InputError(f"restitution: key {k!r} must be (material, material), (material, body) or "
                             "'default'")
        a, b = k
        e = check(v, repr(k))
        if a not in materials:
            raise InputError(f"restitution: {k!r}: {a!r} is not a grain material {list(materials)}")
        if b in materials and b in bodies:
            raise InputError(f"restitution: {k!r}: {b!r} names both a material and a body; rename the body")
        if b in materials:
            gg[materials.index(a), materials.index(b)] = gg[materials.index(b), materials.index(a)] = e
        elif b in bodies:
            gw[materials.index(a), bodies.index(b)] = e
        else:
            raise InputError(f"restitution: {k!r}: {b!r} is neither a material {list(materials)} nor a body "
                             f"{list(bodies)}")
    for i in range(M):
        for j in range(M):
            if np.isnan(gg[i, j]):
                raise InputError(f"restitution: no value for grains ({materials[i]!r}, {materials[j]!r}); add it "
                                 "or a 'default'")
        for j in range(B):
            if np.isnan(gw[i, j]):
                raise InputError(f"restitution: no value for ({materials[i]!r}, {bodies[j]!r}); add it or a "
                                 "'default'")
    return gg, np.nan_to_num(gw, nan=1.0)


# ------------------------------------------------------------------------------------------ simulation
@dataclass
class SimResult:
    """What :func:`simulate_state` returns.

    Attributes
    ----------
    events : GranularEvents
        The collision log (origin "simulate").
    final : GrainSet
        The grains at t = duration, with the clock reset to 0 (release times of grains still dormant shifted by
        -duration; ``frozen`` marks grains at rest): feed it to another run to continue, or use a settled pile to
        pre-fill a cup.
    stats : dict
        pops (queue pops), collisions, logged, invalid (stale events dropped), cell_crossings, frozen,
        released, postponed (releases delayed by a grain in the way), wall_s, max_overlap (relative to the
        radius; only with ``debug``).
    snapshot_times, snapshot_positions, snapshot_status : arrays or None
        With ``snapshots``: the times [s], centres (T, N, 3) [m] (NaN before release) and status (T, N) (0 dormant,
        1 moving, 2 frozen).
    """

    events: GranularEvents
    final: GrainSet
    stats: dict
    snapshot_times: np.ndarray | None = None
    snapshot_positions: np.ndarray | None = None
    snapshot_status: np.ndarray | None = None


def _grid(pos, rad, scene, max_cells):
    """Cell grid (origin, edge h, dims) over the grains and the finite walls; the outer cells reach to infinity."""
    h0 = 2.0 * float(rad.max()) * (1.0 + 1e-6)
    los = [pos.min(axis=0)]
    his = [pos.max(axis=0)]
    if len(scene.srad):
        los.append((scene.spos - scene.srad[:, None]).min(axis=0))
        his.append((scene.spos + scene.srad[:, None]).max(axis=0))
    fin = np.abs(scene.pbox).max(axis=1) < _BOX_BIG if len(scene.pbox) else np.zeros(0, bool)
    if fin.any():
        los.append(scene.pbox[fin, :3].min(axis=0))
        his.append(scene.pbox[fin, 3:].max(axis=0))
    lo = np.min(los, axis=0) - h0
    hi = np.max(his, axis=0) + h0
    ext = hi - lo
    h = h0
    if np.prod(np.ceil(ext / h)) > max_cells:
        h = max(h0, float(np.prod(ext) / max_cells) ** (1 / 3))
        while np.prod(np.ceil(ext / h)) > max_cells:
            h *= 1.05
    dims = np.maximum(np.ceil(ext / h).astype(np.int64), 1)
    return lo, h, dims


def _validate_placement(pos, rad, active, scene, origin, h, dims):
    i, j, ov = K.first_overlap(pos, rad, active, origin, h, dims)
    if i >= 0:
        raise InputError(f"grains: grains {i} and {j} overlap by {ov:.3g} m (radii {rad[i]:.4g} and {rad[j]:.4g} m, "
                         f"centres {pos[i].tolist()} and {pos[j].tolist()}); start them apart")
    idx = np.flatnonzero(active)
    gap, which = K.wall_gaps(pos[idx], rad[idx], scene.ptype, scene.pprm, scene.spos, scene.srad)
    bad = gap < -1e-9 * rad[idx]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        i, w = int(idx[k]), int(which[k])
        if w < len(scene.ptype):
            name = scene.pname[w]
            side = ("is on the wrong side of (behind) " if scene.ptype[w] == K.P_PLANE
                    else "cuts into ")
        else:
            s = w - len(scene.ptype)
            name = f"static sphere {int(scene.selem[s])} of {scene.bodies[int(scene.sbody[s])]!r}"
            side = "cuts into "
        raise InputError(f"grains: grain {i} (centre {pos[i].tolist()} m, radius {rad[i]:.4g} m) {side}{name} by "
                         f"{-gap[k]:.3g} m; place it inside the container, clear of its walls")


def simulate_state(grains: GrainSet, walls: Sequence | Wall = (), *, duration: float, restitution=0.8,
                   gravity=(0.0, 0.0, -9.81), v_elastic: float = 1e-3, v_rest: float = 0.02,
                   rest_angle: float = 45.0, max_events: int = 5_000_000, collapse_rate: float | None = 1e6,
                   snapshots=None, progress: Callable[[float, int], None] | None = None, debug: bool = False,
                   max_cells: int = 1 << 21) -> SimResult:
    """Simulate the grains among the walls for ``duration`` seconds; return the collision log, the final state and
    statistics. Parameters as :func:`simulate`, plus ``snapshots`` (times [s] in [0, duration], ascending: the
    grains' centres then), ``debug`` (after every collision, measure the largest overlap of any two grains or a
    grain and a wall by brute force, O(N^2) per event: for tests) and ``max_cells`` (the most cells of the grid;
    the cell edge is at least the largest grain diameter, larger when the scene would need more cells)."""
    import time as _time

    duration = _pos(duration, "duration [s]")
    g = _vec(gravity, 3, "gravity [m/s^2]")
    v_el = _num(v_elastic, "v_elastic [m/s]")
    v_rest = _num(v_rest, "v_rest [m/s]")
    if v_el < 0 or v_rest < 0:
        raise InputError(f"v_elastic = {v_el} and v_rest = {v_rest} m/s must be >= 0 (0 switches them off)")
    ang = _num(rest_angle, "rest_angle [deg]")
    if not 0 <= ang <= 90:
        raise InputError(f"rest_angle = {ang} deg must lie in [0, 90]")
    if collapse_rate is not None:
        collapse_rate = _pos(collapse_rate, "collapse_rate [events per moving grain per simulated second]")
    if int(max_events) < 1:
        raise InputError(f"max_events = {max_events} must be >= 1")
    pos, vel, rad, mat, materials, frozen, release, rho = _check_grains(grains)
    n = len(rad)
    scene = _compile_walls(walls)
    e_gg, e_gw = _restitution_tables(restitution, materials, scene.bodies)
    origin, h, dims = _grid(pos, rad, scene, int(max_cells))
    dormant = release > 0
    _validate_placement(pos, rad, ~dormant, scene, origin, h, dims)
    if dormant.any():                               # where the pour enters must be clear of the walls
        gap, _ = K.wall_gaps(pos[dormant], rad[dormant], scene.ptype, scene.pprm, scene.spos, scene.srad)
        bad = gap < -1e-9 * rad[dormant]
        if bad.any():
            i = int(np.flatnonzero(dormant)[np.flatnonzero(bad)[0]])
            raise InputError(f"grains: grain {i} is released at {pos[i].tolist()} m, inside a wall; move the "
                             "nozzle clear of the walls")
    if snapshots is not None:
        snap_t = np.asarray(snapshots, dtype=np.float64).reshape(-1)
        if not (np.isfinite(snap_t).all() and (snap_t >= 0).all() and (snap_t <= duration).all()
                and (np.diff(snap_t) >= 0).all()):
            raise InputError(f"snapshots: times must be ascending within [0, duration = {duration}] s")
    else:
        snap_t = np.zeros(0)
    snap_p = np.full((len(snap_t), n, 3), np.nan)
    snap_s = np.zeros((len(snap_t), n), np.int8)

    reach = float(rad.max()) + 1e-6 * h
    # within a cell: finite walls, then static spheres, then planes (a cup standing on the floor wins the tie)
    ns = len(scene.srad)
    plane = scene.ptype == K.P_PLANE
    order = np.concatenate([ns + np.flatnonzero(~plane), np.arange(ns), ns + np.flatnonzero(plane)]).astype(np.int64)
    cs_off, cs_items = K.register_static(origin, h, dims, scene.spos, scene.srad, scene.ptype, scene.pprm,
                                         scene.pbox, reach, order)
    invm = 1.0 / (rho[mat] * (4.0 / 3.0) * math.pi * rad ** 3)
    status = np.where(dormant, K.DORMANT, np.where(frozen, K.FROZEN, K.MOVING)).astype(np.int8)
    vel = np.where((status == K.FROZEN)[:, None], 0.0, vel)
    invm = np.where(status == K.FROZEN, 0.0, invm)
    pos = np.ascontiguousarray(pos, dtype=np.float64).copy()
    vel = np.ascontiguousarray(vel, dtype=np.float64)
    rad = np.ascontiguousarray(rad, dtype=np.float64)
    tloc = np.where(dormant, release, 0.0)
    count = np.zeros(n, np.int64)
    ncell = int(np.prod(dims))
    cell = -np.ones(n, np.int64)
    nxt = -np.ones(n, np.int64)
    prv = -np.ones(n, np.int64)
    head = -np.ones(ncell, np.int64)
    M = 1
    while M < n:
        M *= 2
    ev_t = np.full(n, np.inf)
    key = np.full(n, np.inf)
    G = (pos, vel, tloc, rad, invm, mat, status, count)
    C = (cell, nxt, prv, head, origin, float(h), dims)
    E = (ev_t, np.zeros(n, np.int8), np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, np.inf),
         np.zeros(n, np.int64), np.zeros(n, np.int64), key, np.full(2 * M, -1, np.int64), M)
    S = (scene.spos, scene.srad, scene.sbody, scene.selem, scene.ptype, scene.pprm, scene.pbody, scene.pelem,
         cs_off, cs_items, scene.body_rest)
    gn = float(np.linalg.norm(g))
    prm = np.zeros(K.N_PRM)
    prm[K.PR_VEL] = v_el
    prm[K.PR_VREST] = v_rest
    prm[K.PR_COSREST] = math.cos(math.radians(ang))
    prm[K.PR_REST_ON] = 1.0 if (v_rest > 0 and gn > 0) else 0.0
    prm[K.PR_DEBUG] = 1.0 if debug else 0.0
    W = np.zeros((K.W_ROWS, 12))
    Pdbg = np.empty((n, 3)) if debug else np.empty((0, 3))
    K.init_state(pos, tloc, status, cell, nxt, prv, head, origin, float(h), dims, E[0], E[1], key, E[8], M)
    L = (np.empty(CHUNK), np.empty(CHUNK, np.int8), np.empty(CHUNK, np.int64), np.empty(CHUNK, np.int64),
         np.empty(CHUNK, np.int64), np.empty((CHUNK, 3)), np.empty((CHUNK, 3)), np.empty(CHUNK), np.empty(CHUNK))
    stats = np.zeros(K.N_STATS, np.int64)
    fstats = np.zeros(K.N_FSTATS)
    logs = []
    strikes = 0
    t_prev, pops_prev = 0.0, 0
    wall0 = _time.perf_counter()
    while True:
        code, nl = K.run_chunk(duration, CHUNK, G, C, E, S, g, e_gg, e_gw, prm, L, snap_t, snap_p, snap_s, stats,
                               fstats, W, Pdbg)
        if nl:
            logs.append(tuple(a[:nl].copy() for a in L))
        t_now = float(fstats[K.FS_TIME])
        n_moving = int(np.count_nonzero(status == K.MOVING))
        dt = t_now - t_prev
        pops = int(stats[K.ST_POPS]) - pops_prev
        rate = pops / (max(n_moving, 1) * dt) if dt > 0 else math.inf
        if code == 1 and collapse_rate is not None:
            strikes = strikes + 1 if rate > collapse_rate else 0
            if strikes >= 2:
                where = ""
                if logs:
                    last = logs[-1]
                    where = (f"; the latest collision involved grain {int(last[2][-1])} at "
                             f"{np.round(last[5][-1], 6).tolist()} m")
                raise SolverError(
                    f"granular simulation: inelastic collapse at t = {t_now:.9g} s: {rate:.3g} events per moving "
                    f"grain per simulated second (collapse_rate = {collapse_rate:g}), {n_moving} grains moving"
                    f"{where}. Grains in lasting contact make ever more, ever slower collisions. Raise v_rest "
                    f"(now {v_rest:g} m/s: slower hits on a support freeze the grain) or v_elastic (now {v_el:g} "
                    "m/s: slower collisions are elastic), give grains resting on a funnel a wider hole or start "
                    "them above its bottom, or raise collapse_rate if the rate is physical")
        t_prev, pops_prev = t_now, int(stats[K.ST_POPS])
        if stats[K.ST_COLL] > max_events:
            last = logs[-1][7] if logs else np.zeros(1)
            raise SolverError(
                f"granular simulation: {int(stats[K.ST_COLL])} collisions by t = {t_now:.6g} s of {duration:g} s, "
                f"more than max_events = {int(max_events)}; lately {rate:.3g} events per moving grain per simulated "
                f"second at a median approach speed of {float(np.median(last)):.3g} m/s, {n_moving} grains moving. "
                "Grains resting on a body with rest=False (a funnel whose hole is too small, a slope) bounce at "
                "v_elastic for ever: widen the hole or give that body rest=True; otherwise raise max_events, shorten "
                "the duration or simulate fewer grains")
        if progress is not None:
            progress(t_now if code == 1 else duration, int(stats[K.ST_COLL]))
        if code == 0:
            break
    wall = _time.perf_counter() - wall0

    cols = [np.concatenate([lg[k] for lg in logs]) if logs else np.zeros((0, 3) if k in (5, 6) else 0)
            for k in range(9)]
    del logs
    lt, lkind, la, lb, lelem, lpoint, lnormal, lv0, le = cols
    la = la.astype(np.int64)
    lb = lb.astype(np.int64)
    grain = lkind == GRAIN
    events = GranularEvents.from_arrays(
        t=lt, point=lpoint, normal=lnormal, v0=lv0, kind=np.where(grain, GRAIN, CONTAINER), id_a=la, id_b=lb,
        element=lelem, radius_a=rad[la], radius_b=np.where(grain, rad[np.where(grain, lb, 0)], 0.0),
        material_a=mat[la], material_b=np.where(grain, mat[np.where(grain, lb, 0)], -1), e=le,
        materials=materials, containers=tuple(scene.bodies), origin="simulate", duration=duration,
        meta={"simulator": "impactsound event-driven hard spheres", "gravity": g.tolist(),
              "restitution": restitution if not isinstance(restitution, Mapping)
              else {("default" if k == "default" else "/".join(k)): float(v) for k, v in restitution.items()},
              "v_elastic": v_el, "v_rest": v_rest, "rest_angle": ang, "grains": n},
        where="simulate", sort=False)

    dt = duration - tloc
    moving = status == K.MOVING
    fpos = np.where(moving[:, None], pos + vel * dt[:, None] + 0.5 * g * (dt ** 2)[:, None], pos)
    fvel = np.where(moving[:, None], vel + g * dt[:, None], np.where((status == K.DORMANT)[:, None], vel, 0.0))
    final = GrainSet(positions=fpos, velocities=fvel, radii=rad.copy(), material=mat.copy(), materials=materials,
                     frozen=status == K.FROZEN, release=np.where(status == K.DORMANT, tloc - duration, 0.0),
                     densities=tuple(float(r) for r in rho))
    st = {k: int(stats[i]) for i, k in enumerate(("pops", "collisions", "logged", "invalid", "cell_crossings",
                                                   "frozen", "released", "postponed", "snapshots"))}
    st["wall_s"] = wall
    st["max_overlap"] = float(fstats[K.FS_MAXOVL]) if debug else None
    st["cells"] = dims.tolist()
    st["cell_size"] = float(h)
    if len(snap_t):
        return SimResult(events, final, st, snap_t, snap_p, snap_s)
    return SimResult(events, final, st)


def simulate(grains: GrainSet, walls: Sequence | Wall = (), *, duration: float, restitution=0.8,
             gravity=(0.0, 0.0, -9.81), v_elastic: float = 1e-3, v_rest: float = 0.02, rest_angle: float = 45.0,
             max_events: int = 5_000_000, collapse_rate: float | None = 1e6,
             progress: Callable[[float, int], None] | None = None) -> GranularEvents:
    """Event-driven simulation of the grains among the walls; the collision log as a :class:`GranularEvents`
    table (origin "simulate", containers = the walls' body names in order of first appearance).

    Parameters
    ----------
    grains : GrainSet
        Positions [m], velocities [m/s], radii [m], materials; optionally frozen (a settled pile) and release
        times [s] (a pour, see :func:`pour_grains`).
    walls : a wall or a sequence of walls
        :class:`Floor`, :class:`Plane`, :class:`Disk`, :class:`Cylinder`, :class:`Cup`, :class:`Cone`,
        :class:`StaticSpheres`.
    duration : float
        Simulated time [s]; events lie in [0, duration).
    restitution : float or mapping
        Normal restitution e in (0, 1] (default 0.8: the thesis gives no value). A mapping gives values per
        pair: keys (material, material) for grains, (material, body) for walls, and "default".
    gravity : 3 floats
        [m/s^2], default (0, 0, -9.81).
    v_elastic : float
        [m/s] collisions slower than this are elastic, and a grain pressed onto a static obstacle by gravity
        rebounds at least this fast (module docstring, collapse guard 1); 0 switches it off.
    v_rest : float
        [m/s] a grain hitting a support slower than this freezes (guard 2); 0 switches it off (needs gravity).
    rest_angle : float
        [deg] the support's normal must lie within this angle of the upward vertical (or the grain leave the hit
        slower than v_rest).
    max_events : int
        Stop with a :class:`SolverError` once more collisions than this were processed (logged or not: touches
        without approach are not logged).
    collapse_rate : float or None
        [queue pops per moving grain per simulated second] beyond this (twice in a row, per 65,536 pops) the run
        is an inelastic collapse and stops with a :class:`SolverError` (guard 3); None switches it off.
    progress : callable(sim_time [s], collisions) or None
        Called after every 65,536 queue pops and at the end; the collision rate is collisions per wall-clock
        second since the start.

    Raises
    ------
    InputError
        Bad input, naming the grain, pair, wall or setting: overlapping grains (the pair and the overlap), a grain
        cutting into a wall or behind a floor, non-positive or NaN radii, NaN positions or velocities, a
        restitution outside (0, 1], a non-positive duration, malformed walls.
    SolverError
        An inelastic collapse (guard 3) or more than ``max_events`` collisions, with what to change.

    Deterministic: the same inputs give bitwise the same table (no randomness inside; seeds live in
    :func:`pour_grains`). Single-threaded (sequential Numba code; the first call compiles it, ~20-30 s, cached on
    disk after that).
    """
    return simulate_state(grains, walls, duration=duration, restitution=restitution, gravity=gravity,
                          v_elastic=v_elastic, v_rest=v_rest, rest_angle=rest_angle, max_events=max_events,
                          collapse_rate=collapse_rate, progress=progress).events


# ---------------------------------------------------------------------------------------------- pouring
def _radii(count, radius, rng):
    if np.ndim(radius) == 0:
        r = np.full(count, _pos(radius, "pour_grains radius [m]"))
    else:
        arr = np.asarray(radius, dtype=np.float64).reshape(-1)
        if arr.shape == (2,) and count != 2:
            mean, spread = _pos(arr[0], "pour_grains radius mean [m]"), float(arr[1])
            if not (0 <= spread < mean):
                raise InputError(f"pour_grains: radius spread {spread} m must lie in [0, mean = {mean}) m")
            r = rng.uniform(mean - spread, mean + spread, count)
        elif arr.shape == (count,):
            r = arr.copy()
        else:
            raise InputError(f"pour_grains: radius must be a number, (mean, spread) or {count} radii [m]")
    if not (np.isfinite(r) & (r > 0)).all():
        raise InputError("pour_grains: radii must be positive [m]")
    return r


def pour_grains(count: int, radius, *, seed: int = 0, material: str = "glass", region=None, z_range=None,
                gap: float | None = None, nozzle=None, nozzle_radius: float | None = None,
                rate: float | None = None, exit_speed: float = 0.15, jitter: float = 0.005, start: float = 0.0,
                gravity=(0.0, 0.0, -9.81)) -> GrainSet:
    """Initial grains for a pour, seeded (same seed, same grains).

    Two ways (give one):

    * ``region``: ``count`` grains at random, non-overlapping positions (random sequential addition) inside a
      :class:`Cone` (a funnel: the grains hang in it above its bottom, as in the thesis' App. B.2, and fall
      through the hole), a :class:`Cylinder` or :class:`Cup` (inside it), or a box ((x0, y0, z0), (x1, y1, z1))
      [m]; optionally only between heights ``z_range`` = (z_lo, z_hi) [m]; ``gap`` [m] (default 5 % of the mean
      radius) kept between grains and from the walls. Velocities: random, ``jitter`` [m/s] rms per component.
    * ``nozzle`` = (x, y, z) [m] with ``rate`` [grains/s]: a stream. Grain k enters at ``start + k/rate`` [s]
      (its release time) at a random point of the nozzle's disk (``nozzle_radius`` [m], default 3 mean radii;
      the first of 16 random points clear of the grains released just before it, in free flight) moving along
      gravity at ``exit_speed`` [m/s] plus ``jitter``. A grain whose entry point is still occupied when it is due
      (a grain bounced back, or no clear point was found) enters a little later (``postponed`` in the
      statistics).

    ``radius`` [m]: one value, (mean, spread) for radii uniform in mean +- spread, or ``count`` values.
    """
    if not (isinstance(count, (int, np.integer)) and count >= 1):
        raise InputError(f"pour_grains: count must be a positive integer, got {count!r}")
    rng = np.random.default_rng(seed)
    rad = _radii(int(count), radius, rng)
    jitter = _num(jitter, "pour_grains jitter [m/s]")
    if jitter < 0:
        raise InputError(f"pour_grains: jitter = {jitter} m/s must be >= 0")
    g = _vec(gravity, 3, "pour_grains gravity [m/s^2]")
    if (region is None) == (nozzle is None):
        raise InputError("pour_grains: give either region (grains placed in a funnel, tube or box) or nozzle "
                         "with rate (a stream)")
    if nozzle is not None:
        noz = _vec(nozzle, 3, "pour_grains nozzle [m]")
        rate = _pos(rate, "pour_grains rate [grains/s]") if rate is not None else None
        if rate is None:
            raise InputError("pour_grains: a nozzle needs rate [grains/s]")
        rn = 3.0 * rad.mean() if nozzle_radius is None else _pos(nozzle_radius, "pour_grains nozzle_radius [m]")
        if rn < rad.max():
            raise InputError(f"pour_grains: nozzle_radius = {rn} m is smaller than the largest grain "
                             f"({rad.max()} m)")
        w = _pos(exit_speed, "pour_grains exit_speed [m/s]")
        # the nozzle passes at most a loose packing (volume fraction 0.3) moving at the exit speed
        flux = rate * (4.0 / 3.0) * math.pi * float(np.mean(rad ** 3))
        cap = 0.3 * w * math.pi * rn ** 2
        if flux > cap:
            raise InputError(f"pour_grains: {rate:g} grains/s at {w:g} m/s do not fit through a nozzle of radius "
                             f"{rn:g} m (grain volume flux {flux:.3g} m^3/s > {cap:.3g}); lower the rate, raise "
                             "exit_speed or widen the nozzle")
        gn = np.linalg.norm(g)
        down = g / gn if gn > 0 else np.array([0.0, 0.0, -1.0])
        # a point uniform in the disk (of radius rn - a) normal to the exit direction
        e1 = np.cross(down, [1.0, 0.0, 0.0] if abs(down[0]) < 0.9 else [0.0, 1.0, 0.0])
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(down, e1)
        veln = w * down + jitter * rng.standard_normal((count, 3))
        rel = _num(start, "pour_grains start [s]") + np.arange(count) / rate
        if rel[0] < 0:
            raise InputError("pour_grains: start must be >= 0 s")
        # 16 candidate points per grain, uniform over the disk (radius rn - a); each grain takes the first clear of
        # the grains just released (free flight), so that few entries have to wait
        rr = (rn - rad)[:, None] * np.sqrt(rng.uniform(0.0, 1.0, (count, 16)))
        ph = rng.uniform(0.0, 2 * math.pi, (count, 16))
        cand = np.stack([rr * np.cos(ph), rr * np.sin(ph)], axis=2)
        posn = np.empty((count, 3))
        K.stream_place(cand, noz, e1, e2, rad, rel, veln, g, posn)
        return GrainSet(positions=posn, velocities=veln, radii=rad, material=np.zeros(count, np.int64),
                        materials=(material,), release=rel)
    gap = 0.05 * float(rad.mean()) if gap is None else _num(gap, "pour_grains gap [m]")
    if isinstance(region, Cone):
        _, sn, cs, za = region.geometry()
        cx, cy = _vec(region.center_xy, 2, "Cone.center_xy [m]")
        z0, z1 = float(region.z_bottom), float(region.z_top)
        kind, q = 2, np.array([cx, cy, za, sn, cs, z0, z1])
        lo, hi = np.array([cx - region.r_top, cy - region.r_top, z0]), np.array([cx + region.r_top,
                                                                                  cy + region.r_top, z1])
    elif isinstance(region, (Cylinder, Cup)):
        cx, cy = _vec(region.center_xy, 2, "center_xy [m]")
        R = _pos(region.radius, "radius [m]")
        z0 = float(region.z_min) if isinstance(region, Cylinder) else float(region.z_bottom)
        z1 = float(region.z_max) if isinstance(region, Cylinder) else z0 + float(region.height)
        kind, q = 1, np.array([cx, cy, R, z0, z1])
        lo, hi = np.array([cx - R, cy - R, z0]), np.array([cx + R, cy + R, z1])
    else:
        try:
            lo, hi = (np.asarray(region[0], np.float64).reshape(3), np.asarray(region[1], np.float64).reshape(3))
        except (TypeError, ValueError, IndexError):
            raise InputError("pour_grains: region must be a Cone, Cylinder, Cup or a box ((x0, y0, z0), "
                             f"(x1, y1, z1)) [m], got {region!r}") from None
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (hi > lo).all()):
            raise InputError(f"pour_grains: box region needs finite corners with x1 > x0 etc., got {region!r}")
        kind, q = 0, np.array([lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]])
    if z_range is not None:
        zl, zh = _vec(z_range, 2, "pour_grains z_range [m]")
        lo[2], hi[2] = max(lo[2], zl), min(hi[2], zh)
        if hi[2] <= lo[2]:
            raise InputError(f"pour_grains: z_range {z_range} m misses the region")
    # the height limits enter the region test through its z bounds
    if kind == 0:
        q[4], q[5] = lo[2], hi[2]
    elif kind == 1:
        q[3], q[4] = lo[2], hi[2]
    else:
        q[5], q[6] = lo[2], hi[2]
    order = np.argsort(-rad, kind="stable")         # big grains first: they are the hardest to fit
    r_sorted = rad[order]
    h = 2.0 * (float(rad.max()) + gap) * (1 + 1e-9)
    dims = np.maximum(np.ceil((hi - lo) / h).astype(np.int64), 1)
    out = np.zeros((count, 3))
    placed = 0
    tries = 0
    while placed < count and tries < 400 * count:
        batch = max(4096, 20 * (count - placed))
        cand = lo + (hi - lo) * rng.uniform(0.0, 1.0, (batch, 3))
        tries += batch
        placed = int(K.rsa_place_from(cand, r_sorted, placed, kind, q, gap, lo, h, dims, out))
    if placed < count:
        raise InputError(f"pour_grains: only {placed} of {count} grains fit in the region (random placement); use "
                         "fewer or smaller grains, a smaller gap or a bigger region")
    pos = np.empty((count, 3))
    pos[order] = out
    vel = jitter * rng.standard_normal((count, 3))
    return GrainSet(positions=pos, velocities=vel, radii=rad, material=np.zeros(count, np.int64),
                    materials=(material,))
