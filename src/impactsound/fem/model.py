"""The modal model of one object: what the FEM modal analysis produces and every modal source consumes.

Body frame: the mesh's own axes, origin moved to the centre of mass (so ``com`` is where that origin sits in the
mesh file's coordinates). Mode shapes are mass-normalised (U^T M U = I) and sampled at the surface nodes, which is
all that forcing (the modal force g_j = u_j(x) . f of a surface point load) and radiation (transfer/) need.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..assets import Asset, read_asset, write_asset
from ..materials import Material, make_material

KIND = "modal_model"
KIND_VERSION = 1


@dataclass
class ModalModel:
    """Linear modal model of one elastic object (SI units).

    frequencies_hz: (m,) undamped natural frequencies of the kept elastic modes, ascending [Hz].
    surface_nodes: (ns, 3) surface node positions, body frame [m]; the first ``nv`` are triangle vertices,
        the rest (P2 only) edge mid-nodes.
    surface_faces: (nf, 3) vertex indices, outward counter-clockwise.
    surface_faces6: (nf, 6) for P2: (v0, v1, v2, m01, m12, m20) into ``surface_nodes``; None for P1.
    shapes: (m, ns, 3) mass-normalised mode shapes at the surface nodes [1/sqrt(kg)].
    xi: (m,) damping ratio per mode (from the material's Rayleigh constants unless overridden).
    mass [kg], com (3,) centre of mass in mesh-file coordinates [m], inertia (3, 3) about the COM in body axes
    [kg m^2], volume [m^3].
    """

    material: Material
    order: int
    frequencies_hz: np.ndarray
    surface_nodes: np.ndarray
    surface_faces: np.ndarray
    shapes: np.ndarray
    xi: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    volume: float
    surface_faces6: np.ndarray | None = None
    meta: dict = field(default_factory=dict)
    inputs_hash: str = ""

    @property
    def omega(self) -> np.ndarray:
        return 2 * np.pi * np.asarray(self.frequencies_hz, dtype=np.float64)

    @property
    def n_modes(self) -> int:
        return int(len(self.frequencies_hz))

    @property
    def n_surface_vertices(self) -> int:
        """How many of ``surface_nodes`` are triangle vertices (they come first; the rest are P2 edge mid-nodes)."""
        return int(np.asarray(self.surface_faces).max()) + 1

    @property
    def bounding_radius(self) -> float:
        """Radius of the smallest origin-centred sphere holding the surface [m]."""
        return float(np.sqrt((self.surface_nodes**2).sum(axis=1).max()))

    def shapes_at(self, face: np.ndarray, bary: np.ndarray) -> np.ndarray:
        """Mode shapes interpolated at surface points: (n_points, m, 3).

        face: (n,) face indices; bary: (n, 3) barycentric coordinates in that face. Linear (P1) or 6-node
        quadratic (P2) triangle shape functions, i.e. the consistent point load (g = U^T F for a point force F).
        """
        face = np.asarray(face, dtype=np.int64)
        l = np.asarray(bary, dtype=np.float64).reshape(-1, 3)
        if self.surface_faces6 is None:
            idx = self.surface_faces[face]                       # (n, 3)
            w = l                                                # (n, 3)
        else:
            idx = self.surface_faces6[face]                      # (n, 6)
            l0, l1, l2 = l[:, 0], l[:, 1], l[:, 2]
            w = np.stack([l0 * (2 * l0 - 1), l1 * (2 * l1 - 1), l2 * (2 * l2 - 1),
                          4 * l0 * l1, 4 * l1 * l2, 4 * l2 * l0], axis=1)
        # shapes: (m, ns, 3) -> gather (m, n, k, 3), weight over k
        g = self.shapes[:, idx, :]                               # (m, n, k, 3)
        return np.einsum("mnkc,nk->nmc", g, w)

    # ---- asset conversion -------------------------------------------------------------------------------
    def to_asset(self) -> Asset:
        arrays = {
            "frequencies_hz": np.asarray(self.frequencies_hz, np.float64),
            "surface_nodes": np.asarray(self.surface_nodes, np.float64),
            "surface_faces": np.asarray(self.surface_faces, np.int64),
            "shapes": np.asarray(self.shapes, np.float64),
            "xi": np.asarray(self.xi, np.float64),
            "com": np.asarray(self.com, np.float64),
            "inertia": np.asarray(self.inertia, np.float64),
        }
        if self.surface_faces6 is not None:
            arrays["surface_faces6"] = np.asarray(self.surface_faces6, np.int64)
        meta = dict(self.meta)
        meta.update(material=self.material.as_dict(), order=int(self.order), mass=float(self.mass),
                    volume=float(self.volume),
                    units={"frequencies_hz": "Hz", "surface_nodes": "m", "shapes": "1/sqrt(kg)",
                           "com": "m", "inertia": "kg m^2", "mass": "kg", "volume": "m^3"})
        return Asset(kind=KIND, kind_version=KIND_VERSION, arrays=arrays, meta=meta,
                     inputs_hash=self.inputs_hash)

    def save(self, path) -> None:
        write_asset(path, self.to_asset())

    @classmethod
    def load(cls, path, inputs_hash: str | None = None) -> "ModalModel":
        a = read_asset(path, KIND, kind_version=KIND_VERSION, inputs_hash=inputs_hash)
        m = dict(a.meta)
        mat = make_material(**{k: v for k, v in m.pop("material").items()})
        arr = a.arrays
        return cls(material=mat, order=int(m.pop("order")), frequencies_hz=arr["frequencies_hz"],
                   surface_nodes=arr["surface_nodes"], surface_faces=arr["surface_faces"],
                   shapes=arr["shapes"], xi=arr["xi"], mass=float(m.pop("mass")), com=arr["com"],
                   inertia=arr["inertia"], volume=float(m.pop("volume")),
                   surface_faces6=arr.get("surface_faces6"), meta=m, inputs_hash=a.inputs_hash)
