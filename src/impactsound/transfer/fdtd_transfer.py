"""Acoustic transfer of every mode from a few time-domain wave solves (mode conflation).

Why: a boundary element solve per mode costs seconds to minutes (dense matrices of the surface at lambda / 6),
so radiating every audible mode of every object that way makes a first render take an hour. The FDTD solver
(wave/fdtd.py) instead advances one grid for all modes at once: each mode drives the body surface at its own
frequency, and the modes are separated afterwards by least squares in time (mode conflation: Wang & James 2019,
"KleinPAT: Optimal Mode Conflation For Time-Domain Precomputation Of Acoustic Transfer", ACM TOG 38(4); the
greedy grouping and its parameters below are the package's choices). The result is stored as the same far-field
acoustic transfer (FFAT) maps as the BEM path (Chadwick, An & James 2009, "Harmonic Shells", sec. 4), so
rendering does not care how they were made.

Per object (body frame, centre of mass at the origin; e^{-i w t} throughout):

1. Grid: cell size h = c / (f_max ppw) for the highest mode (``ppw`` cells per wavelength, default 10), made
   smaller if needed to put 8 cells across the object and ``thickness_cells`` across its thickness 2 V / A, and
   enlarged in 10 % steps if the grid would exceed ``max_cells`` (then a :class:`TransferCapWarning`); the grid
   is shifted by the sub-cell offset that best keeps the body's volume and second moments
   (:func:`best_grid_offset`); the voxelized body (wave/voxel.py), a closed box surface Gamma a few cells
   outside it, air, then the absorbing layer. A thin object (``thin_walls``: thinner than two cells at the cell
   size its modes and ``thin_wall_cells`` across its middle extent ask for, where that is cheaper) is not
   resolved through its thickness: its walls become wall faces, rigid screens between air cells that move with
   the wall (wave/voxel.py, "Thin walls"), so a 1.5 mm steel cup's grid follows its modes (1.7 mm cells at
   20 kHz) instead of a third of its wall (0.5 mm; ~100x the cell updates). Measured against Lamb's rigid disk
   and the dipole-layer BEM of a cup's mid-surface: tests/unit/test_fdtd_thin_walls.py,
   bench/bench_thin_wall_radiation.py.
2. Groups: modes are split into groups whose frequencies differ by at least ``separation_hz`` (greedy, in
   frequency order), so degenerate pairs land in different runs. One FDTD run per group.
3. Drive: body face f (axis a) moves with velocity sum_j (u_j(x_f) . e_a) dq_j/dt, q_j(t) = w(t) cos(w_j t),
   w a raised-cosine ramp; u_j is the mode shape interpolated at the face's closest surface point. In the steady
   state p(x, t) = Re(P_j(x) e^{-i w_j t}) per mode, P_j the pressure per unit modal amplitude -- the quantity the
   BEM path computes from dp/dn = rho w_j^2 (n . u_j).
4. Separation: after the ramp and the transit over the grid, p on both sides of Gamma is fitted over a window of
   ``window_cycles`` over the run's smallest frequency gap (at least four periods of its lowest mode; the groups
   are chosen to make the total run time least: :func:`schedule_groups`) by
   p = sum_j A_j cos(w_j t) + B_j sin(w_j t) (normal equations
   accumulated block by block, so no time series is stored), P_j = A_j + i B_j.
5. Far field: the Kirchhoff-Helmholtz representation over Gamma, p(x) = int (P dG/dn_y - G dP/dn) dS (the same
   compiled quadrature as the BEM's, transfer/bem.py), with P the mean and dP/dn the difference of the two cell
   layers across each box face, evaluated on the FFAT shells and fitted as in transfer/precompute.py, except
   that the last shell is moved out to :data:`FAR_SHELL` bounding radii (it pins the far-field term).

Accuracy is measured against the BEM (transfer = "ffat") on non-spherical objects in
tests/validation/test_fdtd_transfer.py.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..assets import Asset, content_hash
from ..constants import AIR_C, AIR_RHO
from ..errors import InputError
from . import bem, ffat

if TYPE_CHECKING:
    from ..wave.fdtd import Grid

CODE_VERSION = "fdtd-transfer-3"     # 2: per-run windows and least-cost groups; 3: 8 degrees of angular margin
#: radius of the outermost fitting shell, in bounding radii
FAR_SHELL = 100.0


class TransferCapWarning(UserWarning):
    """The FDTD transfer grid was coarsened to fit its cell budget."""


@dataclass(frozen=True)
class FDTDTransferSettings:
    """Settings of an FDTD transfer solve (module docstring).

    Parameters
    ----------
    ppw : float, optional
        Grid cells per wavelength at the highest mode (>= 4).
    thickness_cells : float, optional
        Cells across the object's thickness 2 V / A at least. The staircase's error grows as the walls get fewer
        cells: a 12 x 2 x 1 cm aluminium bar's four modes to 9.6 kHz against the BEM, rms at 1 m, at most 1.2 dB
        at 3, the default, chosen for speed; cost ~ thickness_cells^4.
    thin_walls : bool, optional
        An object thinner than two cells (2 V / A, at the cell size its modes and ``thin_wall_cells`` ask for)
        has its walls as rigid screens of wall faces on the grid (wave/voxel.py, "Thin walls") where that is
        cheaper than resolving its thickness by ``thickness_cells``: its cost then follows its size and modes,
        not 1 / thickness^4. False: the thickness is always resolved.
    thin_wall_cells : float, optional
        Cells across a thin object's middle extent (its bounding box's second side) at least: the screen's edges
        make its dipole radiation ~3 h / a too loud (a its half-size), so 40 keeps a disk's within ~1 dB.
    separation_hz : float, optional
        Least frequency gap between modes that share a run [Hz].
    window_cycles : float, optional
        Fit window length in units of 1 / (the run's smallest frequency gap).
    ramp_cycles : float, optional
        Drive ramp in periods of the group's lowest mode.
    ramp_min : float, optional
        Shortest drive ramp [s].
    box_gap : int, optional
        Air cells between the body and the Kirchhoff box.
    pml_gap : int, optional
        Air cells between the box and the absorbing layer (at least ``air_margin`` times the object's size).
    air_margin : float, optional
        Least air between the box and the absorbing layer, in units of the object's largest side. 0 (the
        default): ``pml_gap`` cells only. More air changed nothing measurable: the exact oscillating and
        pulsating spheres at 0.3-24 kHz read the same to 0.01 dB (rms and worst direction, at 0.3 m and 3 m)
        with 0.2 and 0; the bar's four modes against the BEM the same to 0.04 dB. A fifth of the size (the
        earlier default) cost a 1 L cup 1.9x the cell updates.
    terms : int, optional
        FFAT terms, in 1..shells - 1.
    shells : int, optional
        FFAT fitting shells.
    max_cells : int, optional
        Grid budget; the cell size grows if the grid would exceed it (:class:`TransferCapWarning`, ``capped``
        in the asset meta).
    c : float, optional
        Speed of sound [m/s].
    rho : float, optional
        Air density [kg/m^3].
    """

    ppw: float = 10.0
    thickness_cells: float = 3.0
    thin_walls: bool = True
    thin_wall_cells: float = 40.0
    separation_hz: float = 150.0
    window_cycles: float = 1.5
    ramp_cycles: float = 3.0
    ramp_min: float = 1.0e-3
    box_gap: int = 3
    pml_gap: int = 4
    air_margin: float = 0.0
    terms: int = 3
    shells: int = 5
    max_cells: int = 20_000_000
    c: float = AIR_C
    rho: float = AIR_RHO

    def check(self) -> None:
        """Raise :class:`InputError` on ppw < 4, a non-positive separation or window, terms outside
        1..shells - 1, or non-positive air constants."""
        if not (self.ppw >= 4):
            raise InputError(f"FDTD transfer: ppw = {self.ppw}; use at least 4 cells per wavelength (10 default)")
        if not (self.separation_hz > 0 and self.window_cycles > 0):
            raise InputError("FDTD transfer: separation_hz and window_cycles must be positive")
        if not 1 <= int(self.terms) < int(self.shells):
            raise InputError(f"FDTD transfer: terms = {self.terms} must be in 1..shells - 1 = {self.shells - 1}")
        if not (self.c > 0 and self.rho > 0):
            raise InputError("FDTD transfer: air c and rho must be positive")
        if not (self.air_margin >= 0):
            raise InputError(f"FDTD transfer: air_margin = {self.air_margin} must be >= 0 (a fraction of the "
                             "object's size)")


#: shortest fit window, in periods of a run's lowest mode (a run of one mode, or of modes far apart)
MIN_WINDOW_PERIODS = 4.0


def run_times(freqs_hz, settings: "FDTDTransferSettings") -> tuple[float, float]:
    """Drive ramp and fit window [s] of one run driving the modes ``freqs_hz`` (module docstring, steps 3-4).

    The least-squares separation of sinusoids is conditioned by the window times their smallest frequency gap
    (the same criterion as a DFT's resolution), so the window is ``window_cycles`` over the run's own smallest gap,
    at least :data:`MIN_WINDOW_PERIODS` periods of its lowest mode; the ramp is ``ramp_cycles`` periods of the
    lowest mode, at least ``ramp_min``.
    """
    f = np.sort(np.asarray(freqs_hz, np.float64))
    gap = float(np.min(np.diff(f))) if len(f) > 1 else np.inf
    ramp = max(settings.ramp_min, settings.ramp_cycles / f[0])
    window = max(settings.window_cycles / gap, MIN_WINDOW_PERIODS / f[0])
    return ramp, window


def schedule_groups(freqs_hz, settings: "FDTDTransferSettings", transit: float) -> list[list[int]]:
    """The runs that radiate every mode at least cost: mode groups whose members differ by at least
    ``separation_hz``, chosen among the first-fit grouping (:func:`group_modes`) and the round-robin splits of the
    sorted frequencies into R = 1..m runs (mode i to run i mod R, so that each run's modes lie R spacings apart),
    by the total simulated time sum_runs (ramp + transit + window) of :func:`run_times`: more runs cost more
    ramps and transits, fewer runs longer windows (their modes lie closer together).

    Parameters
    ----------
    freqs_hz : array_like, shape (m,)
    settings : FDTDTransferSettings
    transit : float
        Time for sound to cross the grid [s].

    Returns
    -------
    list of list of int
    """
    f = np.asarray(freqs_hz, np.float64)
    if len(f) == 0:
        return []
    order = np.argsort(f, kind="stable")

    def cost(groups):
        total = 0.0
        for g in groups:
            fg = np.sort(f[g])
            if len(fg) > 1 and np.min(np.diff(fg)) < settings.separation_hz:
                return np.inf
            ramp, window = run_times(fg, settings)
            total += ramp + transit + window
        return total

    best = group_modes(f, settings.separation_hz)
    best_cost = cost(best)
    for R in range(1, len(f) + 1):
        groups = [[int(j) for j in order[r::R]] for r in range(R)]
        c = cost(groups)
        if c < best_cost:
            best, best_cost = groups, c
    return best


def group_modes(freqs_hz, separation_hz: float) -> list[list[int]]:
    """Split modes into groups whose members differ by >= separation_hz (first fit, in frequency order).

    Parameters
    ----------
    freqs_hz : array_like, shape (m,)
        Mode frequencies [Hz].
    separation_hz : float
        Least gap within a group [Hz].

    Returns
    -------
    list of list of int
        Mode indices per group (one FDTD run each).
    """
    order = np.argsort(np.asarray(freqs_hz, np.float64), kind="stable")
    groups: list[list[int]] = []
    last: list[float] = []
    for j in order:
        f = float(freqs_hz[j])
        for g, fl in enumerate(last):
            if f - fl >= separation_hz:
                groups[g].append(int(j))
                last[g] = f
                break
        else:
            groups.append([int(j)])
            last.append(f)
    return groups


@dataclass
class Plan:
    """Grid and run lengths of one object's transfer solve.

    Attributes
    ----------
    h : float
        Cell size [m].
    grid : wave.fdtd.Grid
        The grid.
    groups : list of list of int
        Mode indices per run.
    n_steps : list of int
        Time steps per run.
    fit_start : list of int
        First step of each run's fit window.
    ramps : list of float
        Drive ramp per run [s].
    dt : float
        Time step [s] (0.99 of the Courant limit).
    capped : bool
        The cell size was enlarged to fit ``max_cells`` (less accurate).
    thin : bool
        The object is thinner than two cells: its walls are wall faces (``thin_walls``), not resolved cells.
    """

    h: float                 # cell size [m]
    grid: "Grid"
    groups: list             # mode indices per run
    n_steps: list            # steps per run
    fit_start: list          # first step of each run's fit window
    ramps: list              # drive ramp per run [s]
    dt: float                # time step [s]
    capped: bool             # the cell size was enlarged to fit max_cells (less accurate)
    thin: bool = False       # thinner than two cells: walls are wall faces

    @property
    def cell_updates(self) -> float:
        """Total cell updates of all runs (grid cells times steps): the cost."""
        return float(self.grid.n_cells) * float(sum(self.n_steps))


def plan(vertices, faces, freqs_hz, settings: FDTDTransferSettings, offset=None, *,
         open_surface: bool = False) -> Plan:
    """Cell size, grid and per-group step counts of a transfer solve (module docstring, steps 1-2).

    Parameters
    ----------
    vertices : ndarray, shape (nv, 3)
        Closed body-frame surface [m] (or a zero-thickness surface with ``open_surface``).
    faces : ndarray, shape (nf, 3)
        Its triangles.
    freqs_hz : array_like, shape (m,)
        Mode frequencies [Hz].
    settings : FDTDTransferSettings
    offset : array_like, shape (3,), optional
        Sub-cell grid shift, in cells (default none).
    open_surface : bool, optional
        The surface is a shell's mid-surface (open or closed, zero thickness): always wall faces.

    Returns
    -------
    Plan
    """
    from ..wave.fdtd import COURANT_LIMIT, DEFAULT_NPML, Grid
    s = settings
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    size = float((hi - lo).max())
    h = s.c / (float(np.max(freqs_hz)) * s.ppw)
    # resolve the object itself, whatever its modes: its size, and its thickness (2 V / A is the thickness of a
    # plate or shell, the diameter / 3 of a sphere) by >= 3 cells, unless it is thinner than two cells: then its
    # walls are screens of wall faces (thin_walls), and resolving them would cost (cells / thickness)^4
    tri = vertices[faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1).sum()
    vol = 0.0 if open_surface else abs(np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum()) / 6
    thickness = 2.0 * vol / max(area, 1e-300)
    h_thick = min(h, size / 8.0, thickness / s.thickness_cells)
    # a thin object as screens: its edges need cells across its smaller extent (a rigid disk's dipole on wall faces
    # comes out 1 + ~3 h / a too loud, a = its radius: tests/unit/test_fdtd_thin_walls.py), where resolving its
    # thickness would cost more
    mid = float(np.sort(hi - lo)[1])
    h_thin = min(h, size / 8.0, mid / s.thin_wall_cells)
    thin = bool(open_surface or (s.thin_walls and thickness < 2.0 * h_thin and h_thin > h_thick))
    h = h_thin if thin else h_thick
    capped = False
    while True:
        margin = (s.box_gap + 1) * h + max(s.pml_gap * h, s.air_margin * size)
        n = np.ceil((hi - lo + 2 * margin) / h).astype(np.int64) + 2 * DEFAULT_NPML
        if int(np.prod(n)) <= s.max_cells:
            break
        h *= 1.1
        capped = True
    shift = np.zeros(3) if offset is None else np.asarray(offset, np.float64)
    grid = Grid(tuple(int(x) for x in n), h, 0.5 * (lo + hi) - 0.5 * n * h + shift * h, DEFAULT_NPML)
    dt = 0.99 * COURANT_LIMIT * h / s.c
    transit = float(np.linalg.norm(n * h)) / s.c
    groups = schedule_groups(freqs_hz, s, transit)
    n_steps, fit_start, ramps = [], [], []
    for g in groups:
        ramp, window = run_times(np.asarray(freqs_hz, np.float64)[g], s)
        start = ramp + transit
        n_steps.append(int(math.ceil((start + window) / dt)))
        fit_start.append(int(math.ceil(start / dt)))
        ramps.append(ramp)
    return Plan(h=h, grid=grid, groups=groups, n_steps=n_steps, fit_start=fit_start, ramps=ramps, dt=dt,
                capped=capped, thin=thin)


def best_grid_offset(grid, vertices, faces, fractions=(0.0, 0.25, 0.5, 0.75)) -> np.ndarray:
    """Sub-cell shift (3,) of the grid, in cells, whose voxelization best keeps the body's volume and second
    moments.

    Why: the staircase body of cells whose centres lie inside moves each wall by up to h/2, and the radiation of
    thin parts is sensitive to it (a 12 mm bar voxelized 7 cells thick at h = 1.9 mm radiates its bending modes
    ~1.5 dB too loud against the BEM; shifted by half a cell, 6 cells, within 0.5 dB). The shift is chosen among
    all combinations of ``fractions`` per axis to minimise |V_vox / V - 1| + sum_i |M_i,vox / M_i - 1|,
    M_i = int (x_i - c_i)^2 dV about the mesh centroid c.

    Parameters
    ----------
    grid : wave.fdtd.Grid
        The unshifted grid.
    vertices, faces : ndarray
        The closed body-frame surface [m].
    fractions : sequence of float, optional
        Candidate shifts per axis, in cells.

    Returns
    -------
    ndarray, shape (3,)
        The best shift, in cells.
    """
    import trimesh
    from ..wave.voxel import inside_grid
    mesh = trimesh.Trimesh(vertices=vertices, faces=faces, process=False)
    V = float(mesh.volume)
    cen = np.asarray(mesh.center_mass, np.float64)
    I = np.asarray(mesh.moment_inertia, np.float64) / 1.0        # density 1: inertia about the centroid
    M = 0.5 * np.trace(I) - np.diag(I)                             # int (x_i - c_i)^2 dV
    h = grid.dx
    nx, ny, nz = grid.shape

    def error(off):
        o = grid.origin + off * h
        xs, ys, zs = (o[a] + (np.arange(grid.shape[a]) + 0.5) * h for a in range(3))
        solid, _ = inside_grid(vertices, faces, xs, ys, zs)
        idx = np.nonzero(solid)
        if not len(idx[0]):
            return np.inf
        Vv = len(idx[0]) * h**3
        Mv = np.array([(((c[i] - cen[a]) ** 2).sum() + len(i) * h * h / 12.0) * h**3
                       for a, (c, i) in enumerate(zip((xs, ys, zs), idx))])
        return abs(Vv / V - 1) + float(np.sum(np.abs(Mv / np.maximum(M, 1e-300) - 1)))

    # all combinations: the volume term couples the axes, and an axis-by-axis search was seen to settle on a plate
    # 13 % too thin (torsion mode -2 dB); 64 voxelizations cost seconds
    import itertools
    cands = [np.array(c) for c in itertools.product(fractions, repeat=3)]
    return cands[int(np.argmin([error(c) for c in cands]))]


# ---- the Kirchhoff box ----------------------------------------------------------------------------------------
def kirchhoff_box(grid, solid_cells: np.ndarray, gap: int):
    """Faces of the box of cells that holds the body plus ``gap`` cells.

    Parameters
    ----------
    grid : wave.fdtd.Grid
        The grid.
    solid_cells : ndarray of int, shape (n, 3)
        Padded indices of the body's cells.
    gap : int
        Air cells between the body and the box.

    Returns
    -------
    inner, outer : ndarray of int, shape (nf, 3)
        Padded cell indices on either side of each box face.
    centres : ndarray, shape (nf, 3)
        Face centres [m].
    normals : ndarray, shape (nf, 3)
        Outward unit normals.
    area : float
        Face area h^2 [m^2].
    """
    i0 = solid_cells.min(axis=0) - gap
    i1 = solid_cells.max(axis=0) + gap
    inner, outer, normals = [], [], []
    for ax in range(3):
        o = [d for d in range(3) if d != ax]
        A, B = np.meshgrid(np.arange(i0[o[0]], i1[o[0]] + 1), np.arange(i0[o[1]], i1[o[1]] + 1), indexing="ij")
        for side, idx, step in ((-1, i0[ax], -1), (1, i1[ax], 1)):
            c_in = np.empty((A.size, 3), np.int64)
            c_in[:, ax] = idx
            c_in[:, o[0]] = A.ravel()
            c_in[:, o[1]] = B.ravel()
            c_out = c_in.copy()
            c_out[:, ax] += step
            nrm = np.zeros((A.size, 3))
            nrm[:, ax] = side
            inner.append(c_in)
            outer.append(c_out)
            normals.append(nrm)
    inner, outer, normals = np.concatenate(inner), np.concatenate(outer), np.concatenate(normals)
    h = grid.dx
    centres = grid.origin + (0.5 * (inner + outer) - 0.5) * h
    return inner, outer, centres, normals, h * h


def _cell_centres(grid, idx):
    return grid.origin + (idx - 0.5) * grid.dx


# ---- mode shapes on the voxel faces ---------------------------------------------------------------------------
def face_points(vertices, faces, body):
    """Where each body face takes its mode shapes: the closest surface point of the face centre, as its
    triangle and (clipped) barycentric weights. The same for every mode, so computed once per object.

    Parameters
    ----------
    vertices, faces : ndarray
        The BEM-style surface of the model [m].
    body : wave.voxel.BodyBoundary
        The voxelized body.

    Returns
    -------
    tri : ndarray of int, shape (n_body_faces,)
    bary : ndarray, shape (n_body_faces, 3)
    """
    import trimesh
    mesh = trimesh.Trimesh(vertices=vertices, faces=faces, process=False)
    pts, _, tri = trimesh.proximity.closest_point(mesh, body.centres)
    bary = trimesh.triangles.points_to_barycentric(vertices[faces[tri]], pts)
    bary = np.clip(bary, 0.0, 1.0)
    bary /= bary.sum(axis=1, keepdims=True)
    return tri, bary


def face_patterns(vertices, faces, shapes, body, modes, where=None) -> np.ndarray:
    """Each mode's velocity along each body face's axis per unit dq/dt: the mode shape interpolated
    (barycentric) at the closest surface point of the face centre.

    Parameters
    ----------
    vertices, faces : ndarray
        The BEM-style surface of the model [m].
    shapes : ndarray, shape (m, nv, 3)
        Mode shapes at the vertices [1/sqrt(kg)].
    body : wave.voxel.BodyBoundary
        The voxelized body.
    modes : sequence of int
        Mode indices.
    where : tuple, optional
        :func:`face_points` of this surface and body, if already computed.

    Returns
    -------
    ndarray, shape (len(modes), n_body_faces)
        [m/sqrt(kg)] per unit dq/dt [1/s], i.e. velocity [m/s] per unit modal velocity.
    """
    tri, bary = face_points(vertices, faces, body) if where is None else where
    ax = body.faces[:, 0]
    corners = faces[tri]
    out = np.empty((len(modes), len(body.centres)))
    for c, j in enumerate(modes):
        u = shapes[j][corners, ax[:, None]]                             # (n_faces, 3): the axis component
        out[c] = np.einsum("fa,fa->f", bary, u)
    return out


# ---- one object -----------------------------------------------------------------------------------------------
def solve_box_fields(model, settings: FDTDTransferSettings = FDTDTransferSettings(), progress=None,
                     offset=None):
    """Run the grouped FDTD solves of every mode of ``model`` (module docstring, steps 1-4).

    Parameters
    ----------
    model : ModalModel
        Body-frame modal model; one with ``open_surface = True`` (a shell's mid-surface,
        sources/shell/fdtd.py) is radiated as a zero-thickness wall.
    settings : FDTDTransferSettings, optional
    progress : callable, optional
        Called with the fraction done.
    offset : array_like, shape (3,), optional
        Sub-cell grid shift in cells; default :func:`best_grid_offset`.

    Returns
    -------
    plan : Plan
    box : tuple
        (centres (nf, 3) [m], normals (nf, 3), area [m^2]) of the Kirchhoff faces.
    P : ndarray of complex, shape (m, nf)
        Pressure per unit modal amplitude on them [Pa].
    dPdn : ndarray of complex, shape (m, nf)
        Its outward normal derivative [Pa/m].

    Raises
    ------
    InputError
        On invalid settings, a model without modes, an open surface or a body thinner than one cell.
    """
    from ..wave.fdtd import FDTDSolver
    from ..wave.voxel import inside_grid, thin_walls, voxelize
    from .precompute import model_surface
    settings.check()
    v, f, shapes = model_surface(model)
    freqs = np.asarray(model.frequencies_hz, np.float64)
    m = len(freqs)
    if m == 0:
        raise InputError("FDTD transfer: the modal model has no elastic modes to radiate")
    open_surface = bool(getattr(model, "open_surface", False))
    pl = plan(v, f, freqs, settings, offset, open_surface=open_surface)
    if offset is None and not pl.thin:
        # (a thin object's walls are wall faces wherever they lie: no staircase volume to keep)
        pl.grid.origin = pl.grid.origin + best_grid_offset(pl.grid, v, f) * pl.h

    class _Inside:
        def grid_solid(self, xs, ys, zs):
            solid, odd = inside_grid(v, f, xs, ys, zs)
            if odd:
                raise InputError(f"FDTD transfer: the surface is not closed ({odd} grid columns cross it an odd "
                                 "number of times); repair the mesh")
            return solid

        def __call__(self, pts):                                # (voxelize uses grid_solid)
            raise NotImplementedError

    walls = None
    if pl.thin:
        xs, ys, zs = (pl.grid.cell_centres(a)[1:-1] for a in range(3))
        walls = thin_walls(v, f, xs, ys, zs, open_surface=open_surface)
    body = voxelize(pl.grid, None if open_surface else _Inside(), walls)
    if not len(body.faces):
        raise InputError(f"FDTD transfer: the object is thinner than one grid cell ({pl.h:.3g} m) everywhere; "
                         "use transfer = \"ffat\" (BEM) for it, or thin_walls = True")
    upper = body.faces[:, 1:4] + np.eye(3, dtype=np.int64)[body.faces[:, 0]]
    solid_idx = np.concatenate([body.solid, body.faces[:, 1:4], upper])
    inner, outer, centres, normals, area = kirchhoff_box(pl.grid, solid_idx, settings.box_gap)
    pts = np.concatenate([_cell_centres(pl.grid, inner), _cell_centres(pl.grid, outer)])
    nf = len(inner)
    P = np.zeros((m, nf), np.complex128)
    dP = np.zeros((m, nf), np.complex128)
    omega_all = 2 * np.pi * freqs
    total = sum(pl.n_steps)
    done = 0
    where = face_points(v, f, body)
    for g, modes in enumerate(pl.groups):
        modes = np.asarray(modes)
        pat = face_patterns(v, f, shapes, body, modes, where)
        w = omega_all[modes]
        n_steps = pl.n_steps[g]
        t_half = (np.arange(n_steps) + 0.5) * pl.dt                  # face velocities act over (t_n, t_n+1)
        ramp = pl.ramps[g]
        x = np.clip(t_half / ramp, 0.0, 1.0)
        env = 0.5 - 0.5 * np.cos(np.pi * x)
        denv = np.where(x < 1.0, 0.5 * np.pi / ramp * np.sin(np.pi * x), 0.0)
        wt = t_half[:, None] * w[None, :]
        scale = denv[:, None] * np.cos(wt) - env[:, None] * w[None, :] * np.sin(wt)     # dq_j/dt
        solver = FDTDSolver(pl.grid, settings.c, settings.rho, pl.dt)
        solver.set_body(body)
        solver.set_receivers(pts)
        s0 = pl.fit_start[g]
        # least squares in time, accumulated: p(t_n+1) = Phi(t) coef, Phi = [cos w_j t, sin w_j t]
        nb = 2 * len(modes)
        G = np.zeros((nb, nb))
        acc = np.zeros((len(pts), nb))
        n = 0
        block = 256
        while n < n_steps:
            T = min(block, n_steps - n)
            rec = solver.run(T, pat, scale[n:n + T], time_major=True)             # (T, n_pts)
            n += T
            a = max(s0, n - T)
            if n > s0:
                t = (np.arange(a, n) + 1) * pl.dt                          # receivers sample after each step
                Phi = np.concatenate([np.cos(t[:, None] * w[None, :]), np.sin(t[:, None] * w[None, :])], axis=1)
                G += Phi.T @ Phi
                acc += rec[a - (n - T):].T @ Phi
            if progress is not None:
                progress((done + n) / total)
        done += n_steps
        coef = np.linalg.solve(G, acc.T).T                                   # (n_pts, 2 m_g)
        Pc = coef[:, :len(modes)] + 1j * coef[:, len(modes):]
        p_in, p_out = Pc[:nf], Pc[nf:]
        P[modes] = (0.5 * (p_in + p_out)).T
        dP[modes] = ((p_out - p_in) / pl.h).T
    return pl, (centres, normals, area), P, dP


def box_evaluate(box, P_j, dP_j, k: float, points) -> np.ndarray:
    """Kirchhoff-Helmholtz representation p(x) = int (P dG/dn - G dP/dn) dS over the box.

    Parameters
    ----------
    box : tuple
        (centres, normals, area) as returned by :func:`solve_box_fields`.
    P_j, dP_j : ndarray of complex, shape (nf,)
        One mode's pressure [Pa] and normal derivative [Pa/m] on the box faces.
    k : float
        Wavenumber [1/m].
    points : array_like, shape (n, 3)
        Evaluation points [m], body frame.

    Returns
    -------
    ndarray of complex, shape (n,)
        p [Pa] per unit modal amplitude.
    """
    centres, normals, area = box
    pts = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
    out = np.empty(len(pts), np.complex128)
    bem._represent(pts, np.ascontiguousarray(centres), np.ascontiguousarray(normals),
                   np.ascontiguousarray(area * P_j), np.ascontiguousarray(area * dP_j), float(k), out)
    return out


def transfer_inputs_hash(model, settings: FDTDTransferSettings) -> str:
    """Cache key of an FDTD transfer asset (modal inputs, settings, code version).

    Parameters
    ----------
    model : ModalModel
    settings : FDTDTransferSettings

    Returns
    -------
    str
    """
    return content_hash("fdtd_transfer", CODE_VERSION, model.inputs_hash or content_hash(
        np.asarray(model.frequencies_hz), np.asarray(model.shapes), np.asarray(model.surface_nodes)),
        asdict(settings))


def run_fdtd_transfer(model, settings: FDTDTransferSettings = FDTDTransferSettings(), *, out=None,
                      progress=None) -> Asset:
    """FFAT transfer asset of every mode of ``model`` from grouped FDTD solves (module docstring).

    Same asset kind as the BEM path, evaluated the same way (:class:`~.precompute.TransferModel`); near-field
    data are the Kirchhoff box fields instead of BEM surface solutions.

    Parameters
    ----------
    model : ModalModel
        Body-frame modal model.
    settings : FDTDTransferSettings, optional
    out : path-like, optional
        Written atomically here if given.
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    Asset
    """
    from ..assets import write_asset
    from .precompute import KIND, KIND_VERSION
    pl, box, P, dP = solve_box_fields(model, settings,
                                      progress=None if progress is None else (lambda x: progress(0.9 * x)))
    if pl.capped:
        import warnings
        warnings.warn(f"FDTD transfer: the grid for {len(P)} modes up to {float(np.max(model.frequencies_hz)):.0f} "
                      f"Hz would exceed max_cells = {settings.max_cells:.3g}; cell size enlarged to {pl.h:.3g} m "
                      f"({settings.c / (pl.h * float(np.max(model.frequencies_hz))):.1f} cells per wavelength at "
                      "the top mode): less accurate there; use transfer = \"ffat\" (BEM) for this object",
                      TransferCapWarning)
    centres, normals, area = box
    v = np.asarray(model.surface_nodes, np.float64)
    r_bar = float(np.sqrt((v**2).sum(axis=1)).max())
    # the paper's geometric shells, the last moved far out (100 r_bar): the box integral is as cheap there, and
    # it pins the leading (far-field) term, which the near shells alone leave to extrapolation (measured on a
    # bar: 3 terms on 5 near shells read up to 2 dB high at 3 m for the top modes, exact at 1 m)
    radii = ffat.shell_radii(r_bar, settings.shells)
    radii[-1] = FAR_SHELL * r_bar
    c = settings.c
    maps = []
    for j in range(len(P)):
        k = 2 * np.pi * float(model.frequencies_hz[j]) / c
        # the field seen from R >= 2.5 r_bar is band-limited near degree k r_bar; 8 more degrees leave < 7e-4 of
        # it (0.4^8, ffat.coarse_resolution), far below the FDTD's own error (measured on a 1 L steel cup's modes
        # to 20 kHz against 12 more degrees: <= 2.4e-4 of the peak, 0.013 dB where a mode is within 20 dB of its
        # loudest direction, for 20 % less time in this box integral), and the stored maps get ~4 samples per
        # angular wavelength more than that for their bilinear interpolation
        Tc = ffat.coarse_resolution(k, r_bar, margin=8)
        T = min(ffat.angular_resolution(k), int(math.ceil(4 * k * r_bar)) + 24)
        Tc = min(Tc, T)
        d = ffat.grid_directions(Tc).reshape(-1, 3)
        S = box_evaluate(box, P[j], dP[j], k, (radii[:, None, None] * d[None]).reshape(-1, 3))
        S = S.reshape(len(radii), Tc, 2 * Tc)
        if Tc < T:
            S = ffat.upsample(S, T)
        psi = ffat.fit(S.reshape(len(radii), -1), radii, k, settings.terms)
        maps.append(ffat.FFATMap(k=k, psi=psi.reshape(settings.terms, T, 2 * T).astype(np.complex64)))
        if progress is not None:
            progress(0.9 + 0.1 * (j + 1) / len(P))
    bank = ffat.FFATBank.from_maps(maps)
    arrays = {"k": bank.k, "T": bank.T, "offsets": bank.offsets, "psi": bank.psi,
              # the Kirchhoff box data, for direct evaluation inside the first FFAT shell (near field)
              "box_centres": centres, "box_normals": normals, "box_area": np.array([area]),
              "box_p": P.astype(np.complex64), "box_dpdn": dP.astype(np.complex64),
              "frequencies_hz": np.asarray(model.frequencies_hz, np.float64)}
    meta = {"modal_inputs_hash": model.inputs_hash, "terms": int(settings.terms), "r_bar": r_bar,
            "shell_radii": radii.tolist(), "settings": asdict(settings), "method": "fdtd",
            "code_version": CODE_VERSION, "cell_size": pl.h, "grid": list(pl.grid.shape),
            "groups": [list(map(int, g)) for g in pl.groups], "steps": [int(n) for n in pl.n_steps],
            "cell_updates": pl.cell_updates, "capped": bool(pl.capped), "thin_walls": bool(pl.thin),
            "convention": "e^{-i w t}; p per unit modal amplitude q_j",
            "units": {"k": "1/m", "psi": "Pa per unit q (1/sqrt(kg) shapes)", "r_bar": "m", "cell_size": "m"}}
    asset = Asset(kind=KIND, kind_version=KIND_VERSION, arrays=arrays, meta=meta,
                  inputs_hash=transfer_inputs_hash(model, settings))
    if out is not None:
        write_asset(out, asset)
    return asset
