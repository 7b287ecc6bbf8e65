"""The proxy soundbank: PAN fields of the 66 reference ellipsoids, wavelet-compressed, in one asset file.

Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody animations using precomputed soundbanks"
(SCA 2012): sec. 3.2 (the bank of reference ellipsoids A' = 0.5 >= B' >= C', :func:`~.proxy.bank_entries`), sec. 4.1
(wavelet representation, :mod:`.wavelet`) and sec. 5 (the paper's setup: 500^3 grid, 96 kHz, h = 1e-4 s).
The fields themselves are PAN fields (Chadwick, Zheng & James 2012, "Precomputed acceleration noise for improved
rigid-body sound", sec. 4-5), solved by this package's FDTD PAN solver (:mod:`.solve`).

One entry
---------
Entry ``index`` is the solid ellipsoid x^2/A'^2 + y^2/B'^2 + z^2/C'^2 <= 1 (A' = 0.5 m, (B', C') the row of
:func:`~.proxy.bank_entries`), principal axes along the grid axes, centre of mass at the origin. It is voxelized
from this analytic inside test (exact cell classification; no surface mesh is faceted). Its six fields (0..2
translation along x, y, z; 3..5 rotation about x, y, z; :mod:`.solve`) are driven by the PAN pulse psi(t; h_ref)
of the preset and recorded at every time step (the bank rate f = 1/dt is the FDTD rate) on the fit shells
R_i = 2 R_b kappa^(i-1), R_b = A' = 0.5 m, M = 5 (R_1 = 1 m ... R_5 = 2 m), in every direction of a full-sphere
(theta, phi) grid (:func:`~.field.direction_vectors`), of which only the positive octant is solved and stored
(below). Run length as the PAN precompute (Chadwick, Zheng & James 2012, PAN paper, sec. 5): at
least 4 h_ref + R_5/c + 5 R_b/c, then until the shells have decayed by 40 dB (convex bodies have by then), at most
10 R_b/c more. Each field is checkpointed as it finishes (:func:`.solve.run_fields`), so an interrupted entry
resumes. Each field's raw series (n_dir, M, steps) is compressed with :func:`.wavelet.compress` (db5, N = 2,
the bank's eps) and the compression error is measured right away: the relative L2 error over all directions,
radii and samples of the reconstruction (:func:`.wavelet.evaluate`) against the raw series, stored per field.

Octant symmetry (sec. 4.3). A reference ellipsoid in its principal frame is unchanged by the three coordinate
mirrors, so field i at the mirror image x_m of an octant point x0 is OCTANT_SIGNS[m, i] times its value at x0
(:mod:`.symmetry`). An entry therefore solves and stores only the directions of the positive octant of the grid
(rows theta_a <= pi/2, columns 0 <= phi_b <= pi/2: :func:`octant_layout`; n_phi must be a multiple of 4 so that
the grid is mirror symmetric), and every read (:meth:`BankEntry.evaluate`, :meth:`BankEntry.dense`,
:meth:`BankEntry.combined`) takes a direction index of the full grid and unfolds it with the sign table. The
mirror-plane nodes (phi = 0, pi/2; theta = pi/2 for odd n_theta) belong to the octant, so an n_theta x n_phi grid
(n_theta even, n_phi = 4k) stores n_theta/2 (k + 1) of its n_theta 4k directions: 8k/(k + 1) times fewer (6.9x for
12 x 24, 6x for the tiny preset's 6 x 12).

Using an entry for an object (sec. 3.1, eq. 10): an object whose proxy has longest semi-axis A is the entry scaled by
beta = 2A; its fields are for the pulse psi(t; beta h_ref), at the rate f/beta, with amplitudes times beta
(translation) or beta^2 (rotation) (:func:`.proxy.pressure_scale`). A preset's band therefore scales with 0.5/A:
see :data:`PRESETS` and :meth:`BankPreset.band`.

The file
--------
One asset (:mod:`impactsound.assets.store`) of kind ``pan_soundbank``: global arrays ``radii`` (M,) and
``directions`` (n_octant, 3: the stored octant directions, in the order of the fields' rows); per entry e and field f the sparse wavelet arrays ``e<e>_f<f>_indptr``,
``e<e>_f<f>_index``, ``e<e>_f<f>_values``; meta: the bank's identity (preset and its grid, rate, pulse, directions,
c, rho, eps, version, solver version), the sorted list of entries present, and per entry its semi-axes, the
per-field scalars of the wavelet form, the compression errors, run lengths and compute time. A missing entry is
computed on demand (:meth:`Soundbank.entry`) or in bulk (:meth:`Soundbank.build`), and the file is rewritten
atomically under a lock file (``<name>.lock``, fcntl), re-reading it first, so concurrent builders into one file
add to each other's entries instead of overwriting them; a writer killed mid-write leaves a temporary the store
removes later. Every read verifies the data hash (a corrupted file is refused).

A file built with another preset, sample rate, eps, c, rho, version or solver version is refused (not rebuilt: a
bank may take hours), with an :class:`~impactsound.errors.AssetError` naming the file, what differs, and what to do
(delete it, or write the new bank elsewhere). Default files live in the cache folder under a name carrying preset,
eps and version, so the defaults never collide.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ...assets import Asset, asset_lock, cache_dir, content_hash, file_sha256, read_asset, write_asset
from ...constants import AIR_C, AIR_RHO, BANK_EPS
from ...errors import AssetError, InputError, SolverError
from ...wave.fdtd import COURANT_LIMIT, DEFAULT_NPML, solver_bytes
from .field import N_RADII, N_TERMS, direction_vectors, shell_radii
from .symmetry import OCTANT_SIGNS, grid_mirror_map
from .precompute import SOLVER_VERSION
from .precompute import PulseDrive
from .proxy import BANK_A, bank_entries, nearest_entry
from .solve import DECAY_DB, PANGridPlan, run_fields
from .wavelet import WAVELET, WaveletField, _check_eps, compress, evaluate

BANK_KIND = "pan_soundbank"
#: layout and numerics of the bank: bump when either changes (old files are then refused with a message).
#: 2: only the positive octant of directions is stored (sec. 4.3); 1 stored the full sphere
BANK_VERSION = 2
#: default wavelet tolerance (constants.BANK_EPS: why 0.01)
DEFAULT_EPS = BANK_EPS
N_FIELDS = 6
#: cap of the adaptive run length beyond the least one, in R_b / c (module docstring)
CAP_RB_TIMES = 10.0
#: FDTD throughput assumed by the time estimate [cell updates per second] of one process, measured on the 2-core
#: bench machine (standard preset, entry 0: 9.5e8; tiny: 8e8)
CELL_UPDATES_PER_S = 9e8
#: kept fraction of wavelet coefficients assumed by the size estimate before anything is built (measured on
#: tiny entry 40: 4-8 % per field at eps 0.04, 6-11 % at 0.01; the estimate uses the bank's own mean once it has
#: entries)
KEEP_FRACTION = 0.08


@functools.lru_cache(maxsize=16)
def _octant_layout_cached(n_theta: int, n_phi: int):
    a_o, b_o, m = grid_mirror_map(n_theta, n_phi)
    node = (a_o * n_phi + b_o).reshape(-1)                    # octant node of every node, flat
    stored = np.flatnonzero(m.reshape(-1) == 0)               # the octant's own nodes, ascending
    slot = np.full(n_theta * n_phi, -1, np.int64)
    slot[stored] = np.arange(len(stored))
    out = (stored, slot[node], m.reshape(-1).astype(np.int64))
    for v in out:
        v.setflags(write=False)
    return out


def octant_layout(n_theta: int, n_phi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which directions of the full n_theta x n_phi grid an entry stores, and how every direction unfolds from them
    (Chadwick, Zheng & James 2012, soundbank paper, sec. 4.3; :func:`.symmetry.grid_mirror_map`).

    Parameters
    ----------
    n_theta, n_phi : int
        Full grid (:func:`~.field.direction_angles`), n_phi a multiple of 4.

    Returns
    -------
    stored : ndarray of int64, shape (n_octant,)
        Flat full-grid indices (a n_phi + b) of the stored directions, ascending: the rows of the stored fields.
    slot : ndarray of int64, shape (n_theta n_phi,)
        For every full-grid direction, the stored row it mirrors.
    mirror : ndarray of int64, shape (n_theta n_phi,)
        Its mirror index m: field i there is OCTANT_SIGNS[m, i] times the stored row.

    Raises
    ------
    InputError
        If n_phi is not a positive multiple of 4 or n_theta < 1.
    """
    return _octant_layout_cached(int(n_theta), int(n_phi))


@dataclass(frozen=True)
class BankPreset:
    """Grid, rate and pulse of a bank (reference scale: A' = 0.5 m).

    Attributes
    ----------
    name : str
    rate : float
        Bank sample rate f = 1/dt of the FDTD [Hz].
    dx : float
        Grid spacing [m].
    h : float
        Reference pulse time scale h_ref [s].
    n_theta, n_phi : int
        Full-sphere direction grid (n_phi a multiple of 4: the grid must be mirror symmetric, sec. 4.3); entries
        store its positive octant (:func:`octant_layout`).
    note : str
        What it is for.

    Raises
    ------
    InputError
        When the direction grid is not mirror symmetric (n_phi not a positive multiple of 4, n_theta < 1).
    """

    name: str
    rate: float
    dx: float
    h: float
    n_theta: int
    n_phi: int
    note: str = ""

    def __post_init__(self):
        octant_layout(self.n_theta, self.n_phi)             # checks the grid

    @property
    def dt(self) -> float:
        """FDTD step = bank sample spacing [s]."""
        return 1.0 / self.rate

    def resolves(self, index: int) -> bool:
        """Whether the grid resolves entry ``index``: its thinnest semi-axis C' is at least one cell (the solver
        refuses an object thinner than a cell; tiny: the eleven entries with C' = 0.025 m are out)."""
        return bool(bank_entries()[_check_index(index), 1] >= self.dx)

    def band(self, A: float = BANK_A, c: float = AIR_C) -> dict:
        """What the preset resolves for an object whose proxy has longest semi-axis A [m] (scaling law, sec. 3.1:
        every frequency of the reference entry times 0.5/A).

        Returns
        -------
        dict
            pulse_band_hz: 1/(2 beta h_ref), where the pulse psi(t; beta h_ref) has most of its energy (its first
            spectral null is at twice that); grid_band_hz: c/(8 dx beta), the highest frequency with >= 8 cells
            per wavelength; rate_hz: f/beta, the scaled field's sample rate; h_s: beta h_ref.
        """
        beta = 2.0 * float(A)
        return {"A_m": float(A), "beta": beta, "pulse_band_hz": 1.0 / (2.0 * beta * self.h),
                "grid_band_hz": c / (8.0 * self.dx * beta), "rate_hz": self.rate / beta, "h_s": beta * self.h}


def _fit_dx(n_cells: int, npml: int = DEFAULT_NPML) -> float:
    """Grid spacing that puts the outer fit shell (4 R_b = 2 m) plus 3 cells inside an n_cells^3 grid with PML."""
    R_M = float(shell_radii(BANK_A, N_RADII)[-1])
    return 2.0 * R_M / (n_cells - 2 * npml - 6.5)


#: the presets. The reference band for an object of semi-axis A is the entry's times 0.5/A (BankPreset.band).
#:
#: tiny: 102^3 cells with the PML (dx 5 cm), 12 kHz, h_ref = 1 ms, 6 x 12 directions (12 stored: the octant;
#:   5 x 10 before the octant folding, whose n_phi is no multiple of 4). For tests: one entry's six
#:   fields in about 2 s on the 2-core bench machine (6 x 1.06e6 cells x 206 steps). Thin entries (C' < dx) are
#:   barely voxelized: test with B', C' >= 0.12.
#: standard: 251^3 (dx 1.75 cm), 36 kHz, h_ref = 0.25 ms (pulse band 1/(2 h_ref) = 2 kHz, 9.8 cells per wavelength
#:   there), 12 x 24 directions (288; 42 stored: the octant, near the paper's 45 octant vertices). One entry:
#:   6 x 1.58e7 cells x 509 steps = 4.8e10 cell updates, measured 53 s (entry 0, one process, 9.5e8 cell
#:   updates/s); the whole bank about an hour in one process, less with --workers 2 on two free cores. Band for an
#:   object of semi-axis A: pulse band 2 kHz x 0.5/A (20 kHz at A = 5 cm), grid band (8 cells per wavelength)
#:   2.45 kHz x 0.5/A, rate 36 kHz x 0.5/A. Thin entries are coarse: C' = 0.025 m is 1.4 cells (paper: 3 cells).
#: paper: 500^3 with the PML (dx 8.4 mm, the outer shell fitted in), 96 kHz, h_ref = 1e-4 s (Chadwick, Zheng &
#:   James 2012, sec. 5; 8.2 cells per wavelength at 5 kHz), 12 x 24 directions: ~8e11 cell updates per entry,
#:   for a cluster (--scheduler). Pulse band 5 kHz x 0.5/A.
PRESETS = {
    "tiny": BankPreset("tiny", rate=12000.0, dx=0.05, h=1e-3, n_theta=6, n_phi=12,
                       note="tests: seconds per entry; thin entries barely voxelized"),
    "standard": BankPreset("standard", rate=36000.0, dx=0.0175, h=2.5e-4, n_theta=12, n_phi=24,
                           note="the whole bank in about an hour on 2 cores"),
    "paper": BankPreset("paper", rate=96000.0, dx=_fit_dx(500), h=1e-4, n_theta=12, n_phi=24,
                        note="the paper's 500^3 grid at 96 kHz (sec. 5): for a cluster"),
}


def get_preset(preset) -> BankPreset:
    """A preset by name (or a :class:`BankPreset` itself).

    Raises
    ------
    InputError
        On an unknown name (listing the known ones).
    """
    if isinstance(preset, BankPreset):
        return preset
    try:
        return PRESETS[str(preset)]
    except KeyError:
        raise InputError(f"soundbank preset {preset!r} is unknown; choose one of {', '.join(PRESETS)}") from None


def check_eps(eps) -> float:
    """eps in (0, 1), else :class:`~impactsound.errors.InputError` (the wavelet compression's own check)."""
    return _check_eps(eps)


def _check_index(index) -> int:
    n = len(bank_entries())
    try:
        i = int(index)
    except (TypeError, ValueError):
        i = -1
    if not 0 <= i < n or (isinstance(index, float) and index != i):
        raise InputError(f"soundbank entry {index!r} must be an integer in 0..{n - 1} (proxy.bank_entries rows)")
    return i


# ---------------------------------------------------------------------------------------------------------------
# one entry
class EllipsoidInside:
    """Analytic inside test of an axis-aligned ellipsoid centred at the origin (picklable, for worker processes and
    Dask workers); what :func:`~impactsound.wave.voxel.voxelize` asks of a body.

    Parameters
    ----------
    axes : array_like, shape (3,)
        Semi-axes [m].
    """

    def __init__(self, axes):
        self.axes = np.asarray(axes, np.float64).reshape(3)

    def grid_solid(self, xs, ys, zs):
        """Which cell centres of a grid are inside: bool (len(xs), len(ys), len(zs))."""
        a, b, c = self.axes
        return ((np.asarray(xs)[:, None, None] / a) ** 2 + (np.asarray(ys)[None, :, None] / b) ** 2
                + (np.asarray(zs)[None, None, :] / c) ** 2) <= 1.0

    def __call__(self, P):
        P = np.asarray(P, np.float64)
        return np.sum((P / self.axes) ** 2, axis=-1) <= 1.0


@dataclass
class EntryJob:
    """Everything that determines one entry's raw fields (built by :func:`plan_entry`).

    Attributes
    ----------
    index : int
    axes : ndarray, shape (3,)
        (A', B', C') [m].
    preset : BankPreset
    plan : PANGridPlan
    radii : ndarray, shape (M,)
    directions : ndarray, shape (n_dir, 3)
        The directions solved: the positive octant of the preset's grid (:func:`octant_layout`) when ``folded``.
    c, rho : float
    key : str
        Content hash of all of it (the checkpoints' key).
    folded : bool
        Whether ``directions`` are the octant (entries then unfold on reading); False for a full-sphere job
        (e.g. to check the folding against a full solve).
    """

    index: int
    axes: np.ndarray
    preset: BankPreset
    plan: PANGridPlan
    radii: np.ndarray
    directions: np.ndarray
    c: float
    rho: float
    key: str
    folded: bool = True

    @property
    def receivers(self) -> np.ndarray:
        """(n_dir * M, 3): direction-major, radius-minor (the series' layout)."""
        return (self.directions[:, None, :] * self.radii[None, :, None]).reshape(-1, 3)

    @property
    def t_start(self) -> float:
        """Field time of sample 0 [s] (time 0 is the pulse centre; the FDTD records after each step)."""
        return self.plan.dt - 2.0 * self.preset.h


def plan_grid_for(preset: BankPreset, c: float = AIR_C) -> PANGridPlan:
    """The FDTD plan of a preset (the same for every entry: the grid holds the fit shells of A' = 0.5).

    Raises
    ------
    SolverError
        When c dt / dx exceeds the stability limit 1/sqrt(3) (a larger c than the preset was made for).
    """
    dx, dt = float(preset.dx), preset.dt
    courant = c * dt / dx
    if courant > 0.999 * COURANT_LIMIT:
        raise SolverError(f"soundbank preset {preset.name!r}: c dt / dx = {courant:.3f} exceeds the FDTD stability "
                          f"limit {COURANT_LIMIT:.3f} for c = {c:g} m/s; use a smaller c or another preset")
    R_b = BANK_A
    R_M = float(shell_radii(R_b, N_RADII)[-1])
    half = R_M + 3.0 * dx
    npml = DEFAULT_NPML
    n = int(math.ceil(2.0 * half / dx)) + 2 * npml
    least = 4.0 * preset.h + R_M / c + 5.0 * R_b / c
    cap = least + CAP_RB_TIMES * R_b / c
    return PANGridPlan(dx=dx, dt=dt, n_steps=int(math.ceil(cap / dt)), shape=(n, n, n), npml=npml, half_width=half,
                       min_steps=int(math.ceil(least / dt)), decay_db=DECAY_DB,
                       window_steps=max(2, int(math.ceil(R_b / c / dt))))


def plan_entry(index: int, preset="standard", c: float = AIR_C, rho: float = AIR_RHO) -> EntryJob:
    """Plan one entry; nothing is run.

    Parameters
    ----------
    index : int
        Row of :func:`~.proxy.bank_entries`.
    preset : str or BankPreset
    c, rho : float
        Air [m/s], [kg/m^3].

    Returns
    -------
    EntryJob
    """
    i = _check_index(index)
    p = get_preset(preset)
    if not (math.isfinite(c) and c > 0 and math.isfinite(rho) and rho > 0):
        raise InputError(f"soundbank: c = {c} m/s and rho = {rho} kg/m^3 must be positive")
    Bp, Cp = bank_entries()[i]
    axes = np.array([BANK_A, Bp, Cp], np.float64)
    plan = plan_grid_for(p, c)
    radii = shell_radii(BANK_A, N_RADII)
    dirs = direction_vectors(p.n_theta, p.n_phi).reshape(-1, 3)[octant_layout(p.n_theta, p.n_phi)[0]]
    key = content_hash("pan-soundbank-entry", BANK_VERSION, SOLVER_VERSION, axes, p.rate, p.dx, p.h, p.n_theta,
                       p.n_phi, float(c), float(rho), plan.shape, plan.n_steps, plan.min_steps, plan.window_steps)
    return EntryJob(index=i, axes=axes, preset=p, plan=plan, radii=radii, directions=dirs, c=float(c),
                    rho=float(rho), key=key)


def entry_series(job: EntryJob, *, checkpoint_dir=None, progress=None, map_fn=None) -> list[np.ndarray]:
    """Run (or resume from checkpoints) the six FDTD fields of an entry.

    Parameters
    ----------
    job : EntryJob
    checkpoint_dir : path-like, optional
        Per-field checkpoints (``field<i>.h5``): a rerun resumes.
    progress : callable, optional
        Fraction done (called after each field's checkpoint is written, among others).
    map_fn : callable, optional
        Runs the field tasks (:func:`.solve.run_fields`).

    Returns
    -------
    list of 6 ndarray, each (n_dir, M, steps_f)
        Raw pressure [Pa per unit acceleration] at t_start + n dt (the fields may have run different lengths).
    """
    M = len(job.radii)
    w = np.tile(job.radii / job.radii[-1], len(job.directions))      # decay test weights R / R_M (solve.py)
    parts = run_fields(EllipsoidInside(job.axes), job.plan, job.receivers, PulseDrive(job.preset.h, 2 * job.preset.h),
                       job.c, job.rho, task_key=job.key, checkpoint_dir=checkpoint_dir, progress=progress,
                       map_fn=map_fn, decay_weights=w, ragged=True)
    return [np.asarray(a).reshape(len(job.directions), M, -1) for a in parts]


@dataclass
class BankEntry:
    """One entry of the bank: the six wavelet-compressed fields of a reference ellipsoid.

    Attributes
    ----------
    index : int
        Its row of :func:`~.proxy.bank_entries`.
    axes : ndarray, shape (3,)
        Semi-axes of the reference ellipsoid, A' = 0.5 first [m].
    fields : list of 6 WaveletField
    errors : ndarray, shape (6,)
        Relative L2 compression error of each field, measured at build time (module docstring).
    steps : list of int
        FDTD steps each field ran.
    seconds : float
        Compute time of the entry [s] (solve + compression; fields resumed from checkpoints cost nothing here).
    n_theta, n_phi : int or None
        The full direction grid when the fields store only its positive octant (sec. 4.3, :func:`octant_layout`);
        None when the fields hold every direction themselves. Either way the read methods below take a direction
        index of the full grid; read through them, not through ``fields[i]`` directly (whose rows are the
        stored octant).
    """

    index: int
    axes: np.ndarray
    fields: list
    errors: np.ndarray
    steps: list
    seconds: float = 0.0
    n_theta: int | None = None
    n_phi: int | None = None

    @property
    def folded(self) -> bool:
        """Whether the fields store only the positive octant of directions."""
        return self.n_theta is not None

    @property
    def n_directions(self) -> int:
        """Directions of the full grid (what a direction index ranges over)."""
        return self.n_theta * self.n_phi if self.folded else self.fields[0].n_dir

    @property
    def directions(self) -> np.ndarray | None:
        """(n_directions, 3) unit vectors of the full grid (None for an unfolded entry: its grid is unknown)."""
        return direction_vectors(self.n_theta, self.n_phi).reshape(-1, 3) if self.folded else None

    def unfold(self, direction):
        """Stored row and field signs of full-grid direction(s): field i in ``direction`` is
        ``signs[..., i] *`` field i in stored row ``row`` (OCTANT_SIGNS; sec. 4.3).

        Parameters
        ----------
        direction : int or array_like of int
            0 .. n_directions - 1.

        Returns
        -------
        row : int or ndarray of int64
        signs : ndarray of int8, shape (6,) or (n, 6)

        Raises
        ------
        InputError
            On a direction index out of range.
        """
        d = np.asarray(direction)
        n = self.n_directions
        if not np.issubdtype(d.dtype, np.integer) or d.size and (d.min() < 0 or d.max() >= n):
            raise InputError(f"soundbank entry {self.index}: direction index {direction!r} must be in 0..{n - 1}")
        if not self.folded:
            return (int(d) if d.ndim == 0 else d.astype(np.int64)), np.ones(d.shape + (N_FIELDS,), np.int8)
        _, slot, mirror = octant_layout(self.n_theta, self.n_phi)
        row = slot[d]
        return (int(row) if d.ndim == 0 else row), OCTANT_SIGNS[mirror[d]]

    @property
    def error(self) -> float:
        """Largest relative compression error over the six fields."""
        return float(np.max(self.errors))

    @property
    def nbytes(self) -> int:
        """Storage of the sparse arrays [bytes]."""
        return int(sum(f.nbytes for f in self.fields))

    def _field(self, field_index) -> int:
        f = int(field_index)
        if not 0 <= f < N_FIELDS:
            raise InputError(f"soundbank field index {field_index!r} must be in 0..{N_FIELDS - 1}")
        return f

    def evaluate(self, field_index: int, direction: int, R: float, n_samples: int | None = None) -> np.ndarray:
        """Pressure of field ``field_index`` in full-grid direction ``direction`` at distance R [m] (bank space),
        at the field's sample times t_start + n dt (:func:`.wavelet.evaluate`), unfolded from the stored octant
        (:meth:`unfold`)."""
        f = self._field(field_index)
        row, signs = self.unfold(int(direction))
        out = evaluate(self.fields[f], row, R, n_samples)
        return out if signs[f] > 0 else -out

    def dense(self, field_index: int, direction: int) -> np.ndarray:
        """Packed wavelet coefficients (N, T) of field ``field_index`` in full-grid direction ``direction``
        (:meth:`.wavelet.WaveletField.dense`, unfolded)."""
        f = self._field(field_index)
        row, signs = self.unfold(int(direction))
        return float(signs[f]) * self.fields[f].dense(row)

    def combined(self, field_index: int, directions, weights=None) -> np.ndarray:
        """Weighted sum of the coefficients of full-grid directions (:meth:`.wavelet.WaveletField.combined`,
        unfolded: the field signs go into the weights)."""
        f = self._field(field_index)
        ds = np.atleast_1d(np.asarray(directions, np.int64))
        w = np.ones(len(ds)) if weights is None else np.atleast_1d(np.asarray(weights, np.float64))
        if w.shape != ds.shape:
            raise InputError(f"soundbank entry {self.index}: {len(ds)} directions but {w.size} weights")
        rows, signs = self.unfold(ds)
        return self.fields[f].combined(rows, w * signs[:, f])


def compression_error(wf: WaveletField, series: np.ndarray) -> float:
    """Relative L2 error, over all directions, radii and samples, of the compressed field against raw series.

    Parameters
    ----------
    wf : WaveletField
    series : ndarray, shape (n_dir, M, n_t)

    Returns
    -------
    float
        ||reconstruction - series|| / ||series|| (0 for an all-zero series).
    """
    P = np.asarray(series, np.float64)
    num = den = 0.0
    for d in range(P.shape[0]):
        for i, R in enumerate(wf.radii):
            rec = evaluate(wf, d, float(R), P.shape[2])
            num += float(np.sum((rec - P[d, i]) ** 2))
            den += float(np.sum(P[d, i] ** 2))
    return math.sqrt(num / den) if den > 0 else 0.0


def compress_entry(job: EntryJob, series, eps: float, seconds: float = 0.0) -> BankEntry:
    """Compress the raw fields of an entry (db5, N = 2, eps) and measure the compression error of each.

    Parameters
    ----------
    job : EntryJob
    series : list of 6 ndarray (n_dir, M, steps_f)
        From :func:`entry_series`.
    eps : float
        Tolerance in (0, 1).
    seconds : float, optional
        Compute time to record [s].

    Returns
    -------
    BankEntry
    """
    eps = check_eps(eps)
    fields, errors = [], []
    for s in series:
        wf = compress(s, job.radii, job.c, job.plan.dt, eps, WAVELET, N_TERMS, t_start=job.t_start)
        fields.append(wf)
        errors.append(compression_error(wf, s))
    grid = (job.preset.n_theta, job.preset.n_phi) if job.folded else (None, None)
    return BankEntry(index=job.index, axes=job.axes, fields=fields, errors=np.asarray(errors, np.float64),
                     steps=[int(s.shape[-1]) for s in series], seconds=float(seconds), n_theta=grid[0],
                     n_phi=grid[1])


def solve_entry(index: int, preset="standard", c: float = AIR_C, rho: float = AIR_RHO, eps: float = DEFAULT_EPS, *,
                checkpoint_dir=None, progress=None, map_fn=None) -> BankEntry:
    """Solve and compress one entry: :func:`plan_entry`, :func:`entry_series`, :func:`compress_entry`.

    Parameters
    ----------
    index, preset, c, rho
        As :func:`plan_entry`.
    eps : float
        Compression tolerance in (0, 1).
    checkpoint_dir, progress, map_fn
        As :func:`entry_series`.

    Returns
    -------
    BankEntry

    Raises
    ------
    InputError
        On eps outside (0, 1), a bad index or preset.
    """
    eps = check_eps(eps)
    t0 = time.perf_counter()
    job = plan_entry(index, preset, c, rho)
    series = entry_series(job, checkpoint_dir=checkpoint_dir, progress=progress, map_fn=map_fn)
    return compress_entry(job, series, eps, seconds=time.perf_counter() - t0)


def _entry_task(index: int, preset: BankPreset, c: float, rho: float, eps: float, checkpoint_root: str | None):
    """One entry as an independent task (picklable: top-level; for the local pool and Dask)."""
    ckpt = None if checkpoint_root is None else Path(checkpoint_root) / f"e{index:02d}.ckpt"
    return solve_entry(index, preset, c, rho, eps, checkpoint_dir=ckpt)


# ---------------------------------------------------------------------------------------------------------------
# the bank file
def _identity(preset: BankPreset, c: float, rho: float, eps: float) -> dict:
    return {"preset": preset.name, "sample_rate": float(preset.rate), "dx": float(preset.dx), "h": float(preset.h),
            "n_theta": int(preset.n_theta), "n_phi": int(preset.n_phi), "c": float(c), "rho": float(rho),
            "eps": float(eps), "version": BANK_VERSION, "solver_version": SOLVER_VERSION, "wavelet": WAVELET,
            "n_terms": N_TERMS, "n_radii": N_RADII}


def default_path(preset="standard", eps: float = DEFAULT_EPS) -> Path:
    """Default bank file in the cache folder: ``soundbank_<preset>_eps<eps>_v<version>.h5``."""
    return cache_dir() / f"soundbank_{get_preset(preset).name}_eps{check_eps(eps):g}_v{BANK_VERSION}.h5"


#: the banks shipped with the package (package data, ``impactsound/data``): (preset, eps) -> file name. Each has a
#: manifest ``<name>.json`` beside it (sha256, size, entries, how it was built), checked when the bank is opened.
SHIPPED = {("standard", DEFAULT_EPS): f"soundbank_standard_eps{DEFAULT_EPS:g}_v{BANK_VERSION}.h5"}


def shipped_path(preset="standard", eps: float = DEFAULT_EPS) -> Path | None:
    """Where the package's own bank of this preset and eps lies (it may be missing from a broken installation),
    or None when none is shipped for them."""
    name = SHIPPED.get((get_preset(preset).name, float(eps)))
    return None if name is None else Path(__file__).resolve().parents[2] / "data" / name


@functools.lru_cache(maxsize=4)
def _verified(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a shipped bank file checked against its manifest (once per file state and process)."""
    import json
    p = Path(path)
    man_path = p.with_suffix(".json")
    fix = ("reinstall impactsound (make setup, or pip install --force-reinstall impactsound), or build the bank "
           "yourself (impactsound bank build --preset standard --out FILE, about an hour on 2 cores) and point "
           "scenes at it with [source.acceleration_noise] bank_path = \"FILE\"")
    try:
        manifest = json.loads(man_path.read_text())
    except (OSError, ValueError) as e:
        raise AssetError(f"{p}: the shipped soundbank's manifest {man_path.name} is missing or unreadable ({e}); "
                         + fix) from None
    digest = file_sha256(p)
    if size != manifest.get("bytes") or digest != manifest.get("sha256"):
        raise AssetError(f"{p}: the shipped soundbank is corrupted (its size or sha256 differs from "
                         f"{man_path.name}: {size} bytes, sha256 {digest[:16]}..., expected "
                         f"{manifest.get('bytes')} bytes, {str(manifest.get('sha256'))[:16]}...); " + fix)
    return digest


def shipped_bank(preset="standard", eps: float = DEFAULT_EPS, c: float = AIR_C) -> "Soundbank | None":
    """The package's own bank for a preset and eps, verified against its manifest, read-only; None when none is
    shipped for them or for this speed of sound (then the cache folder's bank, solved on demand, is used).

    Raises
    ------
    AssetError
        When the shipped file is corrupted (sha256 or size differ from its manifest), naming it and the fixes.
    """
    import warnings
    p = shipped_path(preset, eps)
    if p is None or abs(float(c) - AIR_C) > 1e-9 * AIR_C:
        return None
    if not p.is_file():
        warnings.warn(f"{p}: the shipped soundbank is missing (a broken installation?); proxy entries are solved "
                      "on demand into the cache folder instead (the same sound, 30-60 s per entry the first time). "
                      "Reinstall impactsound (make setup) to restore it", stacklevel=2)
        return None
    st = p.stat()
    _verified(str(p), st.st_size, st.st_mtime_ns)
    return Soundbank(p, preset, AIR_C, AIR_RHO, eps, read_only=True, _sha_verified=True)


def _entry_arrays(e: BankEntry) -> dict:
    out = {}
    for f, wf in enumerate(e.fields):
        p = f"e{e.index}_f{f}_"
        out[p + "indptr"] = np.asarray(wf.indptr, np.int64)
        out[p + "index"] = np.asarray(wf.index, np.int32)
        out[p + "values"] = np.asarray(wf.values)
    return out


def _entry_meta(e: BankEntry) -> dict:
    return {"axes": [float(v) for v in e.axes], "errors": [float(v) for v in e.errors],
            "steps": [int(s) for s in e.steps], "seconds": float(e.seconds), "nbytes": e.nbytes,
            "fields": [{"n_coef": int(wf.n_coef), "n_samples": int(wf.n_samples), "t_start": float(wf.t_start),
                        "tau0": float(wf.tau0), "nnz": int(wf.nnz)} for wf in e.fields]}


class Soundbank:
    """The proxy soundbank backed by one asset file (module docstring).

    Parameters
    ----------
    path : path-like, optional
        The bank file (default :func:`default_path`). Need not exist yet.
    preset : str or BankPreset, optional
        "tiny", "standard" or "paper" (:data:`PRESETS`).
    c, rho : float, optional
        Air [m/s], [kg/m^3].
    eps : float, optional
        Wavelet tolerance in (0, 1) (default :data:`DEFAULT_EPS`).
    read_only : bool, optional
        Never solve or store entries (the shipped bank, :func:`shipped_bank`): a missing entry is an error.

    Raises
    ------
    InputError
        On eps outside (0, 1) or an unknown preset.
    AssetError
        When the file exists but is corrupted, not a bank, or was built with other settings (naming what differs).
    """

    def __init__(self, path=None, preset="standard", c: float = AIR_C, rho: float = AIR_RHO,
                 eps: float = DEFAULT_EPS, *, read_only: bool = False, _sha_verified: bool = False):
        self.read_only = bool(read_only)
        # the shipped bank's bytes were checked against its manifest's sha256 (shipped_bank): its entries are then
        # read as used, not all 1,190 datasets up front (0.14 s of every render)
        self._lazy = bool(read_only and _sha_verified)
        self.eps = check_eps(eps)
        self.preset = get_preset(preset)
        self.c, self.rho = float(c), float(rho)
        self.path = Path(path) if path is not None else default_path(self.preset, self.eps)
        self.identity = _identity(self.preset, self.c, self.rho, self.eps)
        self.key = content_hash(self.identity)
        self._meta: dict = {}
        self._arrays: dict = {}
        self._entries: dict[int, BankEntry] = {}
        if self.path.exists():
            self._load()

    # ---- reading
    def _read(self) -> Asset:
        a = read_asset(self.path, BANK_KIND, lazy=self._lazy)
        meta_id = a.meta.get("identity", {})
        diff = [f"{k} {meta_id.get(k)!r} (wanted {v!r})" for k, v in self.identity.items() if meta_id.get(k) != v]
        if diff or a.kind_version != BANK_VERSION or a.inputs_hash != self.key:
            what = "; ".join(diff) if diff else f"layout version {a.kind_version} (wanted {BANK_VERSION})"
            raise AssetError(f"{self.path}: this soundbank was built with other settings: {what}. Delete the file "
                             f"to rebuild it with these settings, or give another path (impactsound bank build "
                             f"--out NEW.h5) to keep both")
        return a

    def _load(self) -> None:
        a = self._read()
        self._meta = a.meta
        self._arrays = a.arrays
        self._entries = {}

    @property
    def present(self) -> list[int]:
        """Entries in the file, ascending."""
        return sorted(int(k) for k in self._meta.get("entries", {}))

    @property
    def missing(self) -> list[int]:
        """Entries not yet in the file that its preset resolves (:meth:`BankPreset.resolves`)."""
        have = set(self.present)
        return [i for i in range(len(bank_entries())) if i not in have and self.preset.resolves(i)]

    def _check_resolved(self, indices) -> None:
        bad = [i for i in indices if not self.preset.resolves(i)]
        if bad:
            raise InputError(f"{self.path}: soundbank entries {bad} (C' = {bank_entries()[bad[0], 1]:g} m) are "
                             f"thinner than one cell of the {self.preset.name} preset's grid (dx = "
                             f"{self.preset.dx:g} m) and cannot be solved on it; use the standard or paper preset "
                             "for them")

    @property
    def sample_rate(self) -> float:
        """Bank sample rate f [Hz]."""
        return float(self.preset.rate)

    @property
    def radii(self) -> np.ndarray:
        """Fit radii [m] (bank space)."""
        return shell_radii(BANK_A, N_RADII)

    @property
    def directions(self) -> np.ndarray:
        """(n_dir, 3) unit directions of the full grid (proxy axes): what entries' direction indices index."""
        return direction_vectors(self.preset.n_theta, self.preset.n_phi).reshape(-1, 3)

    @property
    def stored_directions(self) -> np.ndarray:
        """(n_octant, 3) the directions the file stores: the positive octant (sec. 4.3, :func:`octant_layout`)."""
        return self.directions[octant_layout(self.preset.n_theta, self.preset.n_phi)[0]]

    def _from_arrays(self, index: int) -> BankEntry:
        em = self._meta["entries"][str(index)]
        fields = []
        for f, fm in enumerate(em["fields"]):
            p = f"e{index}_f{f}_"
            fields.append(WaveletField(indptr=self._arrays[p + "indptr"], index=self._arrays[p + "index"],
                                       values=self._arrays[p + "values"], n_coef=int(fm["n_coef"]),
                                       dt=self.preset.dt, c=self.c, t_start=float(fm["t_start"]),
                                       tau0=float(fm["tau0"]), n_samples=int(fm["n_samples"]),
                                       radii=self.radii, eps=self.eps, wavelet=WAVELET))
        return BankEntry(index=index, axes=np.asarray(em["axes"], np.float64), fields=fields,
                         errors=np.asarray(em["errors"], np.float64), steps=list(em["steps"]),
                         seconds=float(em["seconds"]), n_theta=self.preset.n_theta, n_phi=self.preset.n_phi)

    # ---- writing
    def checkpoint_root(self) -> Path:
        """Folder of the per-field checkpoints of entries being computed (next to the file)."""
        return self.path.with_name(self.path.name + ".ckpt")

    def _store(self, entries: list[BankEntry]) -> None:
        """Add entries to the file: under the lock, re-read it (others may have added entries), merge, rewrite
        atomically; then drop the entries' checkpoints."""
        import shutil
        if self.read_only:
            raise AssetError(f"{self.path}: this soundbank is read-only (the one shipped with the package); build "
                             f"into another file: impactsound bank build --out FILE")
        for e in entries:
            if (e.n_theta, e.n_phi) != (self.preset.n_theta, self.preset.n_phi):
                raise InputError(f"soundbank entry {e.index}: its fields are not the positive octant of this bank's "
                                 f"{self.preset.n_theta} x {self.preset.n_phi} direction grid (sec. 4.3)")
        with asset_lock(self.path):
            if self.path.exists():
                self._load()
            arrays = dict(self._arrays)
            emeta = dict(self._meta.get("entries", {}))
            for e in entries:
                arrays.update(_entry_arrays(e))
                emeta[str(e.index)] = _entry_meta(e)
            arrays["radii"] = self.radii
            arrays["directions"] = self.stored_directions
            meta = {"identity": self.identity, "entries": emeta,
                    "present": sorted(int(k) for k in emeta), "sample_rate": self.sample_rate, "eps": self.eps,
                    "preset": self.preset.name, "version": BANK_VERSION, "c": self.c, "rho": self.rho,
                    "reference_pulse_h": self.preset.h, "grid": list(plan_grid_for(self.preset, self.c).shape),
                    "dx": self.preset.dx, "n_directions": len(self.directions),
                    "n_stored_directions": len(self.stored_directions),
                    "note": "positive octant of directions stored; the others unfold with the field signs "
                            "(Chadwick, Zheng & James 2012, sec. 4.3)"}
            write_asset(self.path, Asset(kind=BANK_KIND, arrays=arrays, meta=meta, inputs_hash=self.key,
                                         kind_version=BANK_VERSION))
            self._arrays, self._meta = arrays, meta
        for e in entries:
            self._entries[e.index] = e
            shutil.rmtree(self.checkpoint_root() / f"e{e.index:02d}.ckpt", ignore_errors=True)
        with contextlib.suppress(OSError):
            self.checkpoint_root().rmdir()                 # only when empty

    # ---- entries
    def has(self, index: int) -> bool:
        """Whether entry ``index`` is in the file."""
        return str(_check_index(index)) in self._meta.get("entries", {})

    def entry(self, index: int, *, compute: bool = True, progress=None, map_fn=None) -> BankEntry:
        """Entry ``index``: from the file, else (``compute``) solved now, stored, and returned.

        Parameters
        ----------
        index : int
        compute : bool, optional
            Solve a missing entry (else raise).
        progress, map_fn
            As :func:`entry_series` (map_fn runs the six field tasks, e.g. in parallel).

        Raises
        ------
        AssetError
            When the entry is missing and ``compute`` is False.
        """
        i = _check_index(index)
        if i in self._entries:
            return self._entries[i]
        if not self.has(i) and self.path.exists():
            self._load()                                   # another process may have added it
        if self.has(i):
            e = self._from_arrays(i)
            self._entries[i] = e
            return e
        self._check_resolved([i])
        if self.read_only:
            raise AssetError(f"{self.path}: the shipped soundbank lacks entry {i}: the installation is incomplete; "
                             "reinstall impactsound (make setup, or pip install --force-reinstall impactsound)")
        if not compute:
            raise AssetError(f"{self.path}: soundbank entry {i} is not built yet; run `impactsound bank build "
                             f"--preset {self.preset.name} --entries {i}`")
        e = solve_entry(i, self.preset, self.c, self.rho, self.eps,
                        checkpoint_dir=self.checkpoint_root() / f"e{i:02d}.ckpt", progress=progress, map_fn=map_fn)
        self._store([e])
        return e

    def for_proxy(self, proxy, **kw):
        """The entry that stands for a fitted proxy (nearest among those the preset resolves, sec. 3.3) and its
        scale beta = 2A.

        Returns
        -------
        (BankEntry, float)
        """
        i, _, beta = nearest_entry(proxy, min_axis=self.preset.dx)
        return self.entry(i, **kw), beta

    # ---- bulk
    def estimate(self, indices=None) -> dict:
        """What building ``indices`` (default: all missing) costs, before starting.

        Returns
        -------
        dict
            preset, grid, dx_m, dt_s, sample_rate_hz, steps (least per field), entries (to build), cell_updates
            (least, all of them), seconds (at :data:`CELL_UPDATES_PER_S`), memory_bytes (one solver),
            size_bytes (estimated bank file once complete), band_hz_reference.
        """
        todo = self.missing if indices is None else [i for i in map(_check_index, indices) if not self.has(i)]
        plan = plan_grid_for(self.preset, self.c)
        lo, hi = plan.step_range()
        cells = plan.n_cells * lo * N_FIELDS * len(todo)
        n_dir = len(self.stored_directions)
        T = 1 << int(math.ceil(math.log2(1.25 * lo + 64)))
        have = [self._meta["entries"][str(k)] for k in self.present]
        per_entry = (float(np.mean([m["nbytes"] for m in have])) if have else
                     N_FIELDS * n_dir * T * KEEP_FRACTION * (4 + 4 * N_TERMS))
        n_total = len(set(self.present) | set(todo))
        return {"preset": self.preset.name, "grid": list(plan.shape), "dx_m": plan.dx, "dt_s": plan.dt,
                "sample_rate_hz": self.sample_rate, "steps": lo, "max_steps": hi, "entries": todo,
                "cell_updates": float(cells), "seconds": cells / CELL_UPDATES_PER_S,
                "memory_bytes": solver_bytes(plan.shape, plan.npml, np.float32),
                "size_bytes": per_entry * n_total, "band_hz_reference": self.preset.band(BANK_A, self.c)}

    def build(self, indices=None, *, workers: int | None = 1, scheduler: str | None = None,
              fallback_local: bool = False, progress: Callable[[float], None] | None = None) -> list[int]:
        """Compute the missing entries among ``indices`` (default: all 66 the preset resolves) as independent tasks.

        Each entry is one task (:func:`impactsound.parallel.map_tasks`: in this process, a local pool of
        ``workers`` processes, or on a Dask cluster at ``scheduler``); its fields are checkpointed under
        :meth:`checkpoint_root` by whoever runs it (on a cluster: a folder the workers share with this machine, or
        each worker's own disk at the same path), and each finished entry is stored in the file here as it
        arrives, so an interrupted build keeps its finished entries and resumes the running ones.

        Parameters
        ----------
        indices : iterable of int, optional
        workers : int, optional
            Local processes (1: in this process).
        scheduler : str, optional
            Dask scheduler address.
        fallback_local : bool, optional
            Run locally when no scheduler answers.
        progress : callable, optional
            Fraction of the entries done.

        Returns
        -------
        list of int
            The entries computed now.
        """
        from ...parallel import map_tasks
        want = self.missing if indices is None else [_check_index(i) for i in indices]
        self._check_resolved(want)
        if self.path.exists():
            self._load()
        todo = [i for i in dict.fromkeys(want) if not self.has(i)]
        if not todo:
            if progress is not None:
                progress(1.0)
            return []
        root = str(self.checkpoint_root())
        task = functools.partial(_entry_task, preset=self.preset, c=self.c, rho=self.rho, eps=self.eps,
                                 checkpoint_root=root)
        map_tasks(task, todo, scheduler=scheduler, workers=workers, fallback_local=fallback_local,
                  progress=progress, on_result=lambda k, e: self._store([e]))
        return todo

    def info(self) -> dict:
        """Summary for people and tools (the CLI's ``bank info``).

        Returns
        -------
        dict
            path, preset, sample_rate_hz, eps, c, rho, version, entries_present, n_entries, size_mb (file),
            entries: per entry index, axes, error (largest relative L2 compression error of its six fields),
            errors, kbytes, steps, seconds.
        """
        size = self.path.stat().st_size if self.path.exists() else 0
        ents = []
        for k in self.present:
            m = self._meta["entries"][str(k)]
            ents.append({"index": k, "axes": m["axes"], "error": max(m["errors"]), "errors": m["errors"],
                         "kbytes": m["nbytes"] / 1e3, "steps": m["steps"], "seconds": m["seconds"]})
        errs = [e["error"] for e in ents]
        return {"path": str(self.path), "preset": self.preset.name, "sample_rate_hz": self.sample_rate,
                "eps": self.eps, "c": self.c, "rho": self.rho, "version": BANK_VERSION,
                "reference_pulse_h_s": self.preset.h, "n_directions": len(self.directions),
                "n_stored_directions": len(self.stored_directions),
                "entries_present": self.present, "n_entries": len(ents), "n_total": len(bank_entries()),
                "size_mb": size / 1e6, "max_error": max(errs) if errs else None,
                "mean_error": float(np.mean(errs)) if errs else None, "entries": ents}

    @classmethod
    def open(cls, path) -> "Soundbank":
        """Open an existing bank file with the settings it was built with.

        Raises
        ------
        AssetError
            If the file is missing, corrupted or not a bank.
        """
        a = read_asset(path, BANK_KIND)
        ident = a.meta.get("identity", {})
        name = ident.get("preset")
        if name not in PRESETS:
            raise AssetError(f"{path}: soundbank preset {name!r} is unknown to this version; rebuild it")
        return cls(path, name, ident.get("c", AIR_C), ident.get("rho", AIR_RHO), ident.get("eps", DEFAULT_EPS))

