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


@dataclass
class Ground:
    material: Material
    height: float = 0.0
    enabled: bool = True


@dataclass
class Listener:
    name: str
    position: np.ndarray              # world [m]
    ear: np.ndarray | None = None     # binaural: unit outward axis of this ear (world); None = microphone


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
    # {source kind: its validated options} ([source.<kind>] tables; sources/registry.py), one per kind rendered
    options: dict = field(default_factory=dict)
    path: str = "<scene>"
    granular: "object | None" = None  # GranularSetup of a [granular] table (scene/granular.py), else None

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.bodies]
