"""Scene objects as the pipeline sees them (after parsing and validation; see scene/schema.py for the TOML).

Frames: each body's frame has its origin at the centre of mass and the axes of the mesh file. ``position`` is
where that origin is in the world, ``quaternion`` (w, x, y, z) rotates body-frame vectors into the world.
The world's z axis points up; the ground is the plane z = ground.height with normal +z.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..constants import AIR_C, AIR_RHO
from ..materials import Material


@dataclass
class Mount:
    """How a body is held: ``static`` (a prop that never moves: a table, a shelf), or a joint to the world at
    ``anchor`` (world point on or in the body [m]): ``fixed`` (held still there: a cymbal on its stand), ``hinge``
    (swings about the world ``axis`` through the anchor: a lid, a gate) or ``ball`` (swings freely about the
    anchor: a bell on its cord). A ``ball`` joint may tie the body to another object instead of the world
    (``parent``: a key on its ring): both then fly free, the anchor point shared."""

    kind: str                          # static | fixed | hinge | ball
    anchor: np.ndarray | None = None   # world [m] (None for static)
    axis: np.ndarray | None = None     # world unit vector (hinge only)
    clamp_radius: float = 0.0          # fixed: the patch around the anchor held still in the modal model [m]
    parent: int | None = None          # ball joint to another object (its index; a key on a ring), else the world

    @property
    def moves(self) -> bool:
        """Whether the body can move at all (hinge and ball joints)."""
        return self.kind in ("hinge", "ball")

    @property
    def to_world(self) -> bool:
        """Whether the joint holds the body to the world (not to another object)."""
        return self.parent is None


@dataclass
class Body:
    """One rigid object. SI units: mesh in metres (body frame), mass kg, inertia kg m^2 about the COM in body
    axes, position m, velocity m/s, angular_velocity rad/s (world frame)."""

    name: str
    mesh: "object"                    # trimesh.Trimesh, body frame (COM at the origin)
    material: Material
    mass: float
    inertia: np.ndarray
    position: np.ndarray
    quaternion: np.ndarray = field(default_factory=lambda: np.array([1.0, 0, 0, 0]))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    mesh_hash: str = ""               # content hash of the body-frame mesh (cache key part)
    source: str = ""                  # where the mesh came from (file path or primitive description)
    com_in_file: np.ndarray = field(default_factory=lambda: np.zeros(3))  # COM in mesh-file coordinates
    transfer_asset: str = ""          # FFAT transfer asset given in the scene ("" = cache / low-order)
    acceleration_noise: str = ""      # this object's acceleration-noise model ("" = the scene's; sources/pan)
    shell: "object | None" = None     # ShellSetup of a thin-shell object (scene/shell_body.py), else None
    mount: Mount | None = None        # static prop or joint to the world; None: a free body
    group: str = ""                   # fracture group: pieces welded until the group's first hard impact
    break_speed: float = 0.0          # that impact's normal speed [m/s] (scene/fracture.py)
    origin: str = "com"               # what the scene's position (and a pose table's) places: "com" or "mesh"
    plate: "object | None" = None     # vibration = "plate": a PlateFloor of its top face (sources/plate_prop.py)
    plate_top: float = 0.0            # ... and the height of that face [m]

    @property
    def held(self) -> bool:
        """Whether the body is static or jointed to the world (not free)."""
        return self.mount is not None

    @property
    def immovable(self) -> bool:
        """Whether the body never moves (static, or a fixed joint): infinite mass in every collision."""
        return self.mount is not None and not self.mount.moves


@dataclass
class Ground:
    material: Material
    height: float = 0.0
    enabled: bool = True
    plate: "object | None" = None     # a PlateFloor (sources/ground/plate.py) when [ground] model = "plate"
    loss_factor: float = 0.0          # the half-space's material loss factor eta ([ground] loss_factor)


@dataclass
class Listener:
    """One output channel: a microphone, or one ear of a binaural head.

    ``position`` and ``ear`` are at t = 0. A moving listener has a ``trajectory`` (scene/trajectory.py) of its
    head centre (a microphone: of itself) and, with orientations, of the head's rotation; the channel then sits
    at trajectory(t) + R(t) offset with ear axis R(t) ear0 (``offset``, ``ear0``: head frame, which is the world
    frame at the identity rotation)."""

    name: str
    position: np.ndarray              # world [m] at t = 0
    ear: np.ndarray | None = None     # binaural: unit outward axis of this ear (world, t = 0); None = microphone
    trajectory: "object | None" = None   # Trajectory of the head centre / microphone, or None (fixed)
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))   # channel position from the head centre
    ear0: np.ndarray | None = None    # ear axis in the head frame

    @property
    def moves(self) -> bool:
        return self.trajectory is not None and self.trajectory.moves

    def position_at(self, t) -> np.ndarray:
        """World positions (..., 3) [m] at times t (...) [s]."""
        t = np.asarray(t, np.float64)
        if self.trajectory is None:
            return np.broadcast_to(self.position, t.shape + (3,)).copy()
        p = self.trajectory.position_at(t)
        q = self.trajectory.quaternion_at(t)
        if q is None or not np.any(self.offset):
            return p + self.offset
        from ..rotation import quat_to_matrix
        R = quat_to_matrix(q.reshape(-1, 4)).reshape(t.shape + (3, 3))
        return p + R @ self.offset

    def ear_at(self, t) -> np.ndarray:
        """Unit outward ear axes (..., 3) (world) at times t; NaN for a microphone."""
        t = np.asarray(t, np.float64)
        if self.ear is None:
            return np.full(t.shape + (3,), np.nan)
        q = None if self.trajectory is None else self.trajectory.quaternion_at(t)
        if q is None:
            return np.broadcast_to(self.ear, t.shape + (3,)).copy()
        from ..rotation import quat_to_matrix
        return quat_to_matrix(q.reshape(-1, 4)).reshape(t.shape + (3, 3)) @ self.ear0


@dataclass
class Air:
    c: float = AIR_C                   # speed of sound [m/s]
    rho: float = AIR_RHO              # density [kg/m^3]


@dataclass
class Scene:
    bodies: list[Body]
    ground: Ground
    listeners: list[Listener]
    duration: float                   # [s]
    sample_rate: int = 48000          # [Hz]
    seed: int = 0
    sources: tuple[str, ...] = ("modal",)
    air: Air = field(default_factory=Air)
    timestep: float = 2e-4            # rigid-body engine step [s]
    event_log: str | None = None      # path of a user event log (replaces dynamics)
    motion: str | None = None         # path of a pose table: contacts inferred from it (replaces dynamics)
    # {source kind: its validated options} ([source.<kind>] tables; sources/registry.py), one per kind rendered
    options: dict = field(default_factory=dict)
    path: str = "<scene>"
    granular: "object | None" = None  # GranularSetup of a [granular] table (scene/granular.py), else None
    # "default": the accurate models; "preview": a first listen in seconds (coarser FEM mesh and FDTD radiation,
    # proxy acceleration noise, no ground sound: PREVIEW in sources/modal.py says what and how far off)
    quality: str = "default"

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.bodies]
