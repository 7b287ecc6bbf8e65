"""Thin-shell scene objects: the ``shell = {...}`` option of an ``[[object]]``.

A shell object is a mid-surface (a built-in shell shape of scene/shells.py, or any open or closed triangle mesh
file) with a wall thickness h. Two geometries come from it:

* the *sound* geometry, the mid-surface itself: the discrete-shell model, its modes, the contact points of the
  events and the radiation are all on it (Chadwick, An & James 2009, "Harmonic Shells", sec. 2);
* the *rigid-body* geometry, a closed surface made by offsetting the mid-surface by +-h_c/2 along its vertex
  normals and closing the free boundaries with a strip (:func:`thicken`): the rigid-body engine collides it (its
  convex hull, or its convex decomposition when it is concave, cached like any asset) and the contact stage
  measures curvature on it. h_c = max(h, ``collision_thickness``) keeps very thin walls from tunnelling.

Mass and inertia are those of the thin shell itself: the lumped vertex masses rho h A_i / 3 of the shell model
(A_i the areas of the triangles at vertex i), i.e. mass = rho h area, not the thickened solid's.

Units: metres, kilograms, seconds. The body frame has its origin at the shell's centre of mass and the axes of
the mesh file (or of the built-in shape: axis of revolution along +z).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..errors import InputError, MeshError

#: default rigid-body wall thickness floor [m]: thinner collision walls tunnel in the rigid-body engine
COLLISION_THICKNESS = 0.004


class ShellSpec(BaseModel):
    """The ``shell = {...}`` table of an object (thin-shell sound; docs/shells.md)."""

    model_config = ConfigDict(extra="forbid")
    thickness: float = Field(description="wall thickness h [m], > 0 and smaller than the object")
    dynamics: Literal["nonlinear", "linear"] = Field(
        default="nonlinear", description="nonlinear: reduced discrete-shell forces by cubature (Chadwick, An & "
        "James 2009); linear: the same modes without the nonlinear coupling")
    basis: Literal["manifold", "modes"] = Field(
        default="manifold", description="reduced basis of the nonlinear dynamics: manifold: the kept modes plus "
        "the modal derivatives of the lowest `derivatives` modes as a quadratic manifold (no membrane locking: the "
        "stiffening of the full shell, measured within 1 % on a free disk); modes: the paper's linear modes "
        "(Chadwick, An & James 2009), whose stiffening is mostly membrane locking (13x too stiff on a free disk)")
    derivatives: int = Field(default=10, ge=1, le=40, description="with basis = \"manifold\": modal "
                             "derivatives of every pair among the lowest k kept modes (k (k + 1) / 2 of them)")
    radiation: Literal["screen", "ffat", "fdtd", "low_order"] | None = Field(
        default=None, description="screen: BEM of the open mid-surface as a vibrating screen (the default for "
        "open shells); ffat: FFAT maps of BEM solves on the thickened surface (open) or on the surface itself "
        "(closed; the default for closed shells), slow; fdtd: FFAT maps of FDTD solves with the mid-surface as a "
        "zero-thickness wall on the grid, every mode to the top one whatever the triangle count (the BEMs' budget "
        "caps them near k x edge = 1: ~1.7 kHz on a 50 cm cymbal), minutes for a large shell; low_order: a "
        "simple-source surface sum per mode (rough: measured -12 to +45 dB off the BEM per mode, the lowest, "
        "short-circuited modes too loud)")
    radiation_faces: int = Field(default=2000, ge=50, description="largest triangle count of the dense "
                                 "radiation solve (ffat: 3000 thickened unless set); built-in shapes are rebuilt "
                                 "coarser to fit it")
    bending: Literal["flap", "midedge"] | None = Field(
        default=None, description="discrete bending: flap (each triangle's own 6-vertex flap, the paper's; "
        "accurate on the built-in shapes' meshes and other meshes that pass the patch test, 1-25 % low on "
        "alternating-diagonal or irregular meshes) or midedge (mid-edge slopes shared with the neighbours: "
        "accurate on any mesh; twice the cubature's memory and step time, 4x its training memory). Default: "
        "flap for built-in shapes, midedge for mesh files (on an irregular free plate flap stalls 1.3-4.8 % low "
        "where midedge converges to 0.1-0.3 %)")
    modes: int = Field(default=60, ge=1, le=400, description="kept linear modes r (lowest first)")
    f_max: float = Field(default=20000.0, gt=0, description="highest kept mode frequency [Hz]")
    resolution: int | float | Literal["auto"] | None = Field(
        default=None, description="built-in shapes: segments around the largest circumference (int), edge length "
        "[m] (float), or 'auto': edges of 1/16 of the bending wavelength at the estimated top kept mode (modes "
        "within ~2 %; sources/shell/resolution.py); default 48")
    cubature_target: float = Field(default=0.1, gt=0, lt=1, description="relative training error of the "
                                   "cubature (the paper's ~10 %)")
    cubature_elements: int | None = Field(default=None, ge=1, description="most cubature elements "
                                          "(default 4 x modes)")
    energy_limit: float = Field(default=2.0, gt=0, description="impulse limiter bound sigma [J/kg] "
                                "(Algorithm 1: E_max = sigma x mass)")
    collision_thickness: float = Field(default=COLLISION_THICKNESS, ge=0, description="smallest wall "
                                       "thickness [m] of the rigid-body collision surface")


#: default resolution (segments around the largest circumference) of built-in shells in scenes
SCENE_SEGMENTS = 48


@dataclass
class ShellSetup:
    """A scene object's thin-shell data (body frame, metres).

    vertices (Nv, 3), faces (Nf, 3): the mid-surface, centred on the shell's centre of mass; thickness h [m];
    spec: the validated :class:`ShellSpec`; source: where the surface came from; surface_hash: content hash of
    (vertices, faces) in the body frame.
    """

    vertices: np.ndarray
    faces: np.ndarray
    thickness: float
    spec: ShellSpec
    source: str
    surface_hash: str
    shape: str | None = None
    size: dict | None = None
    com: np.ndarray | None = None

    def radiation_surface(self, max_faces: int, count=len):
        """A surface to radiate through whose ``count(faces)`` (default: its triangles) is at most ``max_faces``,
        body frame: None for the mid-surface itself; for a finer built-in shape, the same shape rebuilt at the
        finest resolution that fits (the modes are interpolated onto it); InputError for a finer mesh file."""
        if count(self.faces) <= max_faces:
            return None
        if self.shape is None:
            raise InputError(f"shell mesh {self.source}: {len(self.faces)} triangles, over the radiation solve's "
                             f"budget shell.radiation_faces = {max_faces}; raise it (the dense solve grows as "
                             "its cube), give a coarser mesh, or use shell.radiation = \"low_order\"")
        from .shells import make_shell
        for res in (40, 32, 28, 24, 20, 16, 12, 8):
            m = make_shell(self.shape, self.size, res)
            if count(np.asarray(m.faces)) <= max_faces:
                return np.asarray(m.vertices, np.float64) - self.com, np.asarray(m.faces, np.int64)
        raise InputError(f"shell {self.shape}: no resolution fits shell.radiation_faces = {max_faces}; raise it")


def vertex_normals(V: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Area-weighted unit vertex normals of a consistently oriented triangle surface."""
    n = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    vn = np.zeros_like(V)
    for k in range(3):
        np.add.at(vn, F[:, k], n)
    L = np.linalg.norm(vn, axis=1)
    if np.any(L == 0):
        raise MeshError(f"shell: vertex #{int(np.flatnonzero(L == 0)[0])} has no normal (unused or folded)")
    return vn / L[:, None]


def boundary_edges(F: np.ndarray) -> np.ndarray:
    """Directed edges (a, b) used by exactly one triangle, in that triangle's orientation."""
    e = np.concatenate([F[:, [0, 1]], F[:, [1, 2]], F[:, [2, 0]]])
    key = np.sort(e, axis=1)
    _, inv, cnt = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    return e[cnt[inv.ravel()] == 1]


def thicken(V, F, thickness: float):
    """Closed surface of the mid-surface (V, F) offset by +-thickness/2 along the vertex normals.

    The outer sheet keeps the orientation of F, the inner sheet is reversed, and each boundary edge (a, b) gets
    a quad (two triangles) joining the sheets, so the result is watertight and consistently oriented. A closed
    mid-surface gives two nested sheets (a hollow solid). Returns (vertices (2 Nv, 3), faces)."""
    V = np.asarray(V, np.float64)
    F = np.asarray(F, np.int64)
    n = vertex_normals(V, F)
    nv = len(V)
    Vt = np.concatenate([V + 0.5 * thickness * n, V - 0.5 * thickness * n])
    Ft = [F, F[:, ::-1] + nv]
    be = boundary_edges(F)
    if len(be):
        a, b = be[:, 0], be[:, 1]
        # outer edge a->b is used by the outer sheet; the strip uses b->a outer and a->b inner
        Ft += [np.stack([b, a, a + nv], axis=1), np.stack([b, a + nv, b + nv], axis=1)]
    return Vt, np.concatenate(Ft)


def lumped_mass_properties(V, F, thickness: float, rho: float):
    """Mass [kg], centre of mass (3,) [m] and inertia (3, 3) about it [kg m^2] of a thin shell, from the lumped
    vertex masses rho h A_i / 3 (the shell model's mass matrix), plus the wall's own through-thickness term
    m_f h^2/12 (I - n_f n_f^T) per triangle (a slab's second moment across its thickness). Without it a flat
    shell's moments satisfy A + B = C only to rounding, and MuJoCo may refuse them (triangle inequality); with it
    A + B - C = M h^2/6, a plate's exact value."""
    V = np.asarray(V, np.float64)
    F = np.asarray(F, np.int64)
    cross = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    twice = np.linalg.norm(cross, axis=1)
    area = 0.5 * twice
    m = np.bincount(F.ravel(), np.repeat(rho * thickness * area / 3.0, 3), minlength=len(V))
    M = float(m.sum())
    com = (m[:, None] * V).sum(axis=0) / M
    x = V - com
    I = np.eye(3) * float((m * (x * x).sum(axis=1)).sum()) - (m[:, None, None] * x[:, :, None] * x[:, None, :]).sum(0)
    n = cross / np.where(twice > 0, twice, 1.0)[:, None]
    mf = rho * thickness * area * thickness**2 / 12.0
    I += np.eye(3) * float(mf.sum()) - (mf[:, None, None] * n[:, :, None] * n[:, None, :]).sum(0)
    return M, com, I


def shell_surface(shape: str | None, size: dict, mesh_path: Path | None, scale: float, spec: ShellSpec,
                  where: str, material=None):
    """The mid-surface (vertices, faces, source text) of a shell object: a built-in shell shape or a mesh file
    read as stored (open surfaces allowed; no merging or repair)."""
    from .shells import SHELL_SHAPES, make_shell
    if shape is not None:
        if shape not in SHELL_SHAPES:
            raise InputError(f"{where}.shape = {shape!r}: with shell = {{...}} the shape must be a built-in shell "
                             f"({', '.join(SHELL_SHAPES)}), or give mesh = '<file>'")
        res = spec.resolution if spec.resolution is not None else SCENE_SEGMENTS
        if res == "auto":
            from ..sources.shell.resolution import auto_edge, mean_edge
            from .shells import DEFAULT_SEGMENTS
            base = make_shell(shape, size, DEFAULT_SEGMENTS, where)
            # never coarser than the 96-segment default of make_shell, whatever few modes are kept: the lowest
            # modes also need the shape itself resolved (the cymbal's lowest converges more slowly than the
            # wavelength rule says: -4 % at 96 segments, -1 % at 144, against the converged mesh)
            res = min(auto_edge(float(base.area), spec.modes, spec.f_max, material, float(spec.thickness)),
                      mean_edge(base.vertices, base.faces))
        m = make_shell(shape, size, res, where)
        src = f"shell:{shape}:{sorted(size.items())}:{res}"
        return np.asarray(m.vertices, np.float64), np.asarray(m.faces, np.int64), src
    import trimesh
    if not mesh_path.is_file():
        raise InputError(f"{where}.mesh: {mesh_path} not found (mesh paths are relative to the scene file)")
    try:
        m = trimesh.load(mesh_path, force="mesh", process=False)
    except Exception as exc:                       # trimesh raises many kinds on a bad file
        raise MeshError(f"{where}.mesh: cannot read {mesh_path} ({type(exc).__name__}: {exc})") from None
    V = np.asarray(m.vertices, np.float64) * float(scale)
    F = np.asarray(m.faces, np.int64)
    if len(F) == 0:
        raise MeshError(f"{where}.mesh: {mesh_path} holds no triangles")
    from ..mesh.surface import check_units
    check_units(V[np.unique(F)], f"{where}.mesh ({mesh_path})", scale=float(scale))
    return V, F, str(mesh_path)


def shell_body_geometry(V, F, spec: ShellSpec, material, where: str):
    """Check a shell object's mid-surface and build its rigid-body data.

    Returns (setup-less tuple) (V_body (Nv, 3) centred on the COM, F, collision mesh (trimesh, closed, body
    frame), mass [kg], inertia (3, 3) [kg m^2], com (3,) in the mesh's coordinates). Errors name ``where``: bad
    thickness, non-manifold edges, degenerate triangles (the shell model's checks)."""
    import trimesh
    from ..fem.shell import ShellModel
    h = float(spec.thickness)
    if not (math.isfinite(h) and h > 0):
        raise InputError(f"{where}.shell.thickness = {spec.thickness!r} must be a positive wall thickness [m]")
    try:
        ShellModel(V, F, h, material)              # mesh and thickness checks (names the faces/edges)
    except (InputError, MeshError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    mass, com, inertia = lumped_mass_properties(V, F, h, float(material.rho))
    Vb = V - com
    hc = max(h, float(spec.collision_thickness))
    Vt, Ft = thicken(Vb, F, hc)
    coll = trimesh.Trimesh(Vt, Ft, process=False)
    return Vb, F, coll, mass, inertia, com
