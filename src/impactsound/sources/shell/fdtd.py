"""Radiation of a shell's modes from FDTD wave solves, its mid-surface a zero-thickness wall on the grid: every mode,
up to the top kept one, at a cost set by the shell's size and its top mode, not by a triangle budget.

Why. The dense boundary element solves (screen.py, ffat.py) hold a matrix of the radiating surface's triangles
squared, so the surface is capped at a few thousand triangles; for a 50 cm cymbal that resolves a wavelength only
up to about 1.7 kHz (k x edge = 1), while the Harmonic Shells paper radiates its shells to kL ~ 60-90 with a fast
multipole BEM (Chadwick, An & James 2009, sec. 4). The FDTD transfer of the solid objects (transfer/
fdtd_transfer.py: mode conflation, Wang & James 2019) needs no surface matrix: here it runs on the mid-surface
itself as wall faces (wave/voxel.py, "Thin walls": every crossing of the surface with a line between two cell
centres is a face that moves with the wall, air on both sides), the open surface's edges included. Its maps are the
same FFAT maps, read through :class:`~impactsound.sources.shell.ffat.ShellTransfer` like the BEM's.

Accuracy: a screen on the grid radiates its edge dipoles as if a cell further out (a rigid disk of radius a on
cells of h: 1 + ~3 h / a too loud; tests/unit/test_fdtd_thin_walls.py), so the cell follows the shell's middle
extent too (``thin_wall_cells``, 40 across) as well as its top mode (10 cells per wavelength). Measured against the
screen BEM in its own band: tests/unit/test_shell_fdtd.py and bench/bench_shell_fdtd.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...assets import asset_lock, cache_dir, content_hash
from ...constants import AIR_C, AIR_RHO

#: version of this module's use of the FDTD transfer (part of the cache key)
CODE_VERSION = "shell-fdtd-1"


@dataclass
class ShellSurfaceModel:
    """What the FDTD transfer (transfer/fdtd_transfer.py) reads of a modal model, for a shell's mid-surface.

    surface_nodes (nv, 3) [m], body frame; surface_faces (nf, 3); shapes (r, nv, 3) [1/sqrt(kg)];
    frequencies_hz (r,); inputs_hash: content hash of all of them."""

    surface_nodes: np.ndarray
    surface_faces: np.ndarray
    shapes: np.ndarray
    frequencies_hz: np.ndarray
    inputs_hash: str
    surface_faces6: None = None
    open_surface: bool = True            # zero thickness: wall faces only, open or closed

    @property
    def n_surface_vertices(self) -> int:
        return int(len(self.surface_nodes))

    @property
    def omega(self) -> np.ndarray:
        return 2 * np.pi * np.asarray(self.frequencies_hz, np.float64)


def surface_model(vertices, faces, U, omega) -> ShellSurfaceModel:
    """The mid-surface and its modes U (3 nv, r) [1/sqrt(kg)] at omega (r,) [rad/s] as a :class:`ShellSurfaceModel`."""
    V = np.ascontiguousarray(vertices, np.float64)
    F = np.ascontiguousarray(faces, np.int64)
    omega = np.asarray(omega, np.float64).ravel()
    shapes = np.ascontiguousarray(np.asarray(U, np.float64).reshape(len(V), 3, -1).transpose(2, 0, 1))
    f = omega / (2 * np.pi)
    return ShellSurfaceModel(V, F, shapes, f, content_hash(CODE_VERSION, V, F, shapes, f))


def shell_fdtd_transfer(vertices, faces, U, omega, *, air=None, settings=None, progress=None):
    """FFAT transfer of every mode of a shell from FDTD solves on its mid-surface (module docstring), from the
    cache (``fdtd-*.h5``, keyed by the surface, modes and settings) or computed (one process at a time).

    Parameters
    ----------
    vertices, faces : array_like
        The mid-surface [m] (body frame: the FFAT maps expand about its origin) and its triangles; open or closed.
    U : array_like, shape (3 nv, r)
        Mode shapes [1/sqrt(kg)].
    omega : array_like, shape (r,)
        Angular frequencies [rad/s].
    air : object with c [m/s] and rho [kg/m^3], optional
    settings : FDTDTransferSettings, optional
        Default: the solid objects' defaults in this air.
    progress : callable, optional
        progress(fraction).

    Returns
    -------
    ShellTransfer
        Pressure per unit modal acceleration through :meth:`~impactsound.sources.shell.ffat.ShellTransfer.transfer`.
    """
    from ...errors import AssetError
    from ...transfer.fdtd_transfer import FDTDTransferSettings, run_fdtd_transfer, transfer_inputs_hash
    from ...transfer.precompute import TransferModel
    from .ffat import ShellTransfer
    c = float(air.c) if air is not None else AIR_C
    rho = float(air.rho) if air is not None else AIR_RHO
    settings = settings or FDTDTransferSettings(c=c, rho=rho)
    model = surface_model(vertices, faces, U, omega)
    path = cache_dir() / f"fdtd-{transfer_inputs_hash(model, settings)[:32]}.h5"
    with asset_lock(path):
        cached = path.is_file()
        if cached:
            try:
                tm = TransferModel.load(path, model)
            except AssetError:                 # a corrupted or stale file is rebuilt, never used
                path.unlink(missing_ok=True)
                cached = False
        if not cached:
            run_fdtd_transfer(model, settings, out=path, progress=progress)
            tm = TransferModel.load(path, model)
    return ShellTransfer(model=tm, omega=model.omega, thickness=None, c=settings.c, rho=settings.rho,
                         info={"path": str(path), "cached": cached, "method": "fdtd",
                               "cell_size": float(tm.meta["cell_size"]), "grid": list(tm.meta["grid"])})
