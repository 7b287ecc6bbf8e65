"""PAN precompute for one object: pick the grid, run the FDTD for the six rigid fields, fit the PAN field.

Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 4.2 and 5
(FDTD with perfectly matched layers, Liu & Tao 1997). Steps:
1. mass and inertia from the body-frame mesh and density; pulse time scale h (timescale.py);
2. fit shells R_i = 2 R_b kappa^(i-1) and the (theta, phi) direction grid (field.py) give the receivers;
3. grid spacing from the pulse's bandwidth (>= 10 cells per wavelength at 1/(2h); solve.py); run length
   adaptive (below);
4. six independent FDTD tasks driven by z_i(t) = psi(t - 2h; h), each checkpointed (rerun = resume); a body
   thinner than a cell (2 V / A, :func:`thin_body`) has its walls as wall faces (wave/voxel.py, "Thin
   walls"), else a wall between cell centres would leave holes: a 0.2 mm steel shell of 1 cm radius on 1.24 mm
   cells radiated 94 % below the exact sphere without them, within 7 % with them (tests/validation/
   test_pan_precompute.py);
5. one least-squares fit operator shared by every field and direction (field.py: banded Cholesky of the normal
   equations, truncated SVD as fallback; the paper uses TSVD) -> PANField (asset kind "pan_field").

Run length (the paper's Table 1 gives fixed durations T: 1 ms for the ball bearing, 10-13 ms for the bowl and
mug; the adaptive rule below is the package's choice).
Each field runs at least T_min = 4h (the pulse) + R_M/c (travel to the outer shell) + 5 R_b/c (a rigid body's own
radiation rings down with a time constant ~ R_b/c: exp(-5) left), the fixed length used before, and then on
until the fit shells' pressure (the outermost deciding, solve.py) has decayed by 40 dB over a trailing
window of R_b/c, checked every R_b/(2c); at most T_max = T_min + 60 R_b/c (14.6 ms for the 7 cm bowl primitive,
1.5 ms for the 7.5 mm ball bearing), or ``max_duration``. Convex bodies have decayed by T_min (measured: the
outer shell is 40 dB down 1.3-2.6 R_b/c before it for a sphere and a die), so they cost what they did; a bowl's
cavity ring (2.5 kHz) keeps it going (to ~3.6 ms). A field that reaches T_max undecayed is cut there: the
asset's meta["fdtd_run"]["cap_reached"] says so and a PANPrecomputeWarning names the fields. The fields may stop
at different steps; the shorter ones are faded to zero over the last window in retarded time t - R/c (a fade
of the coefficients q_k, so the data stay of the fitted form) and zero-padded to the longest for the common fit.
The decision reads only the field's own samples: the same inputs give the same steps and the same asset bytes.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...assets import content_hash
from ...constants import AIR_C, AIR_RHO, BANK_EPS
from ...errors import InputError
from ...materials import Material
from ...wave.voxel import inside_grid
from .field import N_RADII, RADIAL_TERMS, fit_pan_field, sample_points, shell_radii
from .pulse import psi
from .solve import DECAY_DB, PANGridPlan, decay_envelope, has_decayed, plan_grid, run_fields
from .timescale import pulse_timescale

#: version of the PAN solve's numerics (FDTD, drive, fit): part of every own field's cache key and of the proxy
#: soundbank's identity (a bank built with another is refused); bump when they change
SOLVER_VERSION = "pan-precompute-5"
#: an own field's cache key: the solve's version plus how the field is stored (6: wavelet-compressed at PAN_EPS,
#: field_store), which the soundbank does not depend on
CODE_VERSION = SOLVER_VERSION + "+stored-1"
#: wavelet tolerance of stored own fields: the soundbank's (constants.BANK_EPS)
PAN_EPS = BANK_EPS
#: cap of the adaptive run length: T_max = T_min + CAP_RB_TIMES R_b / c (module docstring)
CAP_RB_TIMES = 60.0


class PANPrecomputeWarning(UserWarning):
    """A PAN precompute finished with a caveat (a field cut at the run-length cap before it had decayed)."""


@dataclass
class PANJob:
    """Everything that determines one object's PAN field, and its plan (SI units); built by :func:`plan_pan`.

    Attributes
    ----------
    mesh : trimesh.Trimesh
        Body-frame mesh (centre of mass at the origin) [m].
    material : Material
        Its material.
    n_theta, n_phi : int
        Direction grid.
    h : float
        Pulse time scale [s].
    mass : float
        [kg].
    inertia : ndarray, shape (3, 3)
        About the centre of mass [kg m^2].
    R_b : float
        Bounding radius about the centre of mass [m].
    radii : ndarray, shape (M,)
        Fit radii [m].
    duration : float
        Simulated time [s]: the fixed length, or the least of an adaptive run.
    plan : PANGridPlan
        The FDTD grid and run length.
    c, rho : float
        Air [m/s], [kg/m^3].
    dtype : str
        FDTD field dtype.
    key : str
        Content hash of everything above that affects the result.
    n_terms : int
        Radial terms N of the fitted series.
    """

    mesh: object                    # trimesh.Trimesh, body frame (centre of mass at the origin) [m]
    material: Material
    n_theta: int
    n_phi: int
    h: float                        # pulse time scale [s]
    mass: float                     # [kg]
    inertia: np.ndarray             # (3, 3) [kg m^2]
    R_b: float                      # bounding radius about the centre of mass [m]
    radii: np.ndarray               # (M,) fit radii [m]
    duration: float                 # simulated time [s]: the fixed length, or the least of an adaptive run
    plan: PANGridPlan
    c: float
    rho: float
    dtype: str
    key: str                        # content hash of all of the above that affects the result
    n_terms: int = RADIAL_TERMS     # radial terms N of the fit

    @property
    def max_duration(self) -> float:
        """Longest simulated time [s] (the cap of an adaptive run)."""
        return self.plan.n_steps * self.plan.dt

    def estimate(self) -> dict:
        """Grid size, memory and work before starting (for the CLI's estimate).

        Returns
        -------
        dict
            grid, dx_m, dt_s, memory_bytes, h_s, adaptive; steps / cell_updates / duration_s: the least the run
            takes (all of it for a body whose radiation has decayed by then, e.g. a convex one); max_steps /
            cell_updates_max / max_duration_s: the cap of an adaptive run.
        """
        lo, hi = self.plan.step_range()
        return {"grid": list(self.plan.shape), "dx_m": self.plan.dx, "dt_s": self.plan.dt,
                "steps": lo, "max_steps": hi, "memory_bytes": self.plan.memory_bytes(np.dtype(self.dtype)),
                "cell_updates": self.plan.cell_updates(6), "cell_updates_max": self.plan.cell_updates(6, most=True),
                "h_s": self.h, "duration_s": self.duration, "max_duration_s": self.max_duration,
                "adaptive": self.plan.adaptive}


def plan_pan(mesh, material: Material, *, n_theta: int = 5, n_phi: int = 10, c: float = AIR_C,
             rho: float = AIR_RHO, duration: float | None = None, cells_per_wavelength: float = 10.0,
             dtype: str = "float32", max_bytes: float = 8e9, h: float | None = None,
             max_duration: float | None = None, decay_db: float = DECAY_DB,
             n_terms: int = RADIAL_TERMS) -> PANJob:
    """Plan the precompute of a mesh; nothing is run.

    Parameters
    ----------
    mesh : trimesh.Trimesh
        Watertight mesh [m]; it is moved so its centre of mass is at the origin.
    material : Material
        Density (gives mass and inertia) and elastic constants (give h).
    n_theta, n_phi : int, optional
        Direction grid (default 5 x 10, the paper's coarse grid).
    c, rho : float, optional
        Air [m/s], [kg/m^3].
    duration : float, optional
        A fixed simulated time [s]. Default: adaptive (module docstring), at least 4h + R_M/c + 5 R_b/c, then
        until the fit shells have decayed by ``decay_db``.
    cells_per_wavelength : float, optional
        Grid resolution at the pulse's bandwidth 1/(2h).
    dtype : str, optional
        FDTD field dtype.
    max_bytes : float, optional
        Memory cap of the grid [bytes].
    h : float, optional
        Pulse time scale [s] (default from mass and material, paper sec. 4.3).
    max_duration : float, optional
        Cap of an adaptive run [s] (default the least + 60 R_b/c).
    decay_db : float, optional
        Decay that ends an adaptive run [dB].
    n_terms : int, optional
        Radial terms N of the fitted series, 1 to the number of fit radii (5); default :data:`RADIAL_TERMS`.

    Returns
    -------
    PANJob

    Raises
    ------
    InputError
        On a non-watertight mesh, non-positive h, duration or max_duration, or n_terms outside 1..5.
    """
    import numbers
    if isinstance(n_terms, bool) or not isinstance(n_terms, numbers.Integral) or not 1 <= int(n_terms) <= N_RADII:
        raise InputError(f"PAN precompute: radial_terms = {n_terms!r} must be a whole number from 1 to {N_RADII} "
                         f"(the fit radii); {RADIAL_TERMS} is the measured default")
    n_terms = int(n_terms)
    if not mesh.is_watertight:
        raise InputError("PAN precompute needs a watertight mesh to voxelize; repair it (trimesh.repair.fill_holes "
                         "or a mesher such as fTetWild)")
    # the same canonical placement as the modal model's (fem.modal.canonical_surface): a file and the scene's
    # body (already about its centre of mass) give one job and one cached field
    from ...fem.modal import canonical_surface
    body, _ = canonical_surface(mesh)
    mass = float(material.rho * body.volume)
    inertia = np.asarray(body.moment_inertia, np.float64) * material.rho
    if h is None:
        h = pulse_timescale(mass, material)
    if not (h is not None and math.isfinite(h) and h > 0):
        raise InputError(f"PAN precompute: pulse time scale h = {h} s must be positive")
    R_b = float(np.linalg.norm(body.vertices, axis=1).max())
    radii = shell_radii(R_b, N_RADII)
    if duration is None:
        duration = 4 * h + radii[-1] / c + 5 * R_b / c
        cap = max_duration if max_duration is not None else duration + CAP_RB_TIMES * R_b / c
        if not (math.isfinite(cap) and cap > 0):
            raise InputError(f"PAN precompute: max_duration = {max_duration} s must be positive")
        cap = max(float(cap), duration)
        plan = plan_grid(h, R_b, float(radii[-1]), cap, c, cells_per_wavelength, max_bytes=max_bytes,
                         min_duration=duration, decay_db=decay_db, decay_window=R_b / c)
    else:
        if not (math.isfinite(duration) and duration > 0):
            raise InputError(f"PAN precompute: duration = {duration} s must be positive")
        plan = plan_grid(h, R_b, float(radii[-1]), duration, c, cells_per_wavelength, max_bytes=max_bytes)
    # a thin body's walls are wall faces: its own key (thick bodies keep theirs, their fields are unchanged)
    version = CODE_VERSION + ("+walls-1" if thin_body(body, plan.dx) else "")
    key = content_hash(version, np.asarray(body.vertices, np.float64), np.asarray(body.faces, np.int64),
                       material.as_dict(), int(n_theta), int(n_phi), float(c), float(rho), float(duration),
                       float(cells_per_wavelength), str(dtype), float(h), plan.shape, plan.dx, plan.dt, plan.n_steps,
                       plan.min_steps, plan.decay_db, plan.window_steps, n_terms)
    return PANJob(mesh=body, material=material, n_theta=int(n_theta), n_phi=int(n_phi), h=h, mass=mass,
                  inertia=inertia, R_b=R_b, radii=radii, duration=float(duration), plan=plan, c=float(c),
                  rho=float(rho), dtype=str(dtype), key=key, n_terms=n_terms)


def thin_body(mesh, dx: float) -> bool:
    """Whether a body is thinner than a cell of ``dx`` [m] (2 V / A: the wall thickness of a shell-like solid, less
    than the smallest side of a chunky one): then its walls may fall between cell centres and leave the voxelized
    body full of holes, so they are wall faces (wave/voxel.py, "Thin walls"). A wall thicker than a cell holds a
    cell centre on every grid line across it, so thicker bodies keep their voxelization (and their cached
    fields)."""
    return bool(2.0 * abs(float(mesh.volume)) / max(float(mesh.area), 1e-300) < dx)


class MeshInside:
    """Inside test of a watertight body-frame mesh for the FDTD voxelizer (picklable, for Dask workers).

    Parameters
    ----------
    mesh : trimesh.Trimesh
        Watertight mesh [m], body frame.
    source : str, optional
        Names the mesh in messages.
    """

    def __init__(self, mesh, source: str = "mesh", walls: bool = False):
        self.vertices = np.asarray(mesh.vertices, np.float64)
        self.faces = np.asarray(mesh.faces, np.int64)
        self.source = source
        self.walls = bool(walls)

    def grid_walls(self, xs, ys, zs):
        """The wall faces of walls thinner than a cell (:func:`~impactsound.wave.voxel.thin_walls`), or None
        when this body is not to have them (:func:`thin_body`)."""
        if not self.walls:
            return None
        from ...wave.voxel import thin_walls
        return thin_walls(self.vertices, self.faces, xs, ys, zs)

    def grid_solid(self, xs, ys, zs):
        """Which cell centres of a grid are inside (:func:`~impactsound.wave.voxel.inside_grid`).

        Parameters
        ----------
        xs, ys, zs : ndarray
            Cell-centre coordinates along each axis [m].

        Returns
        -------
        ndarray of bool, shape (len(xs), len(ys), len(zs))

        Raises
        ------
        InputError
            If some ray crosses the surface an odd number of times (open or self-intersecting mesh).
        """
        solid, odd = inside_grid(self.vertices, self.faces, xs, ys, zs)
        if odd:
            raise InputError(f"{self.source}: {odd} grid rays cross the surface an odd number of times: it is open "
                             f"or self-intersecting; repair it (trimesh.repair, fTetWild) before PAN precompute")
        return solid

    def __call__(self, P):
        import trimesh
        return trimesh.Trimesh(self.vertices, self.faces, process=False).contains(np.asarray(P, np.float64))


class PulseDrive:
    """The FDTD drive z(t) = psi(t - t_shift; h) (picklable, for worker processes and Dask workers).

    Parameters
    ----------
    h : float
        Pulse time scale [s].
    t_shift : float
        Pulse centre [s] (2h: the pulse starts at t = 0).
    """

    def __init__(self, h: float, t_shift: float):
        self.h, self.t_shift = float(h), float(t_shift)

    def __call__(self, t):
        return psi(t - self.t_shift, self.h)


def run_pan(job: PANJob, *, checkpoint_dir: str | Path | None = None, progress=None, map_fn=None):
    """Run the six FDTD fields (resuming from checkpoints) and fit the PAN field.

    The result does not depend on where the fields ran.

    Parameters
    ----------
    job : PANJob
        From :func:`plan_pan`.
    checkpoint_dir : path-like, optional
        Per-field checkpoints (rerun = resume).
    progress : callable, optional
        Called with the fraction done.
    map_fn : callable, optional
        Runs the field tasks (solve.py ``run_fields``), e.g.
        ``functools.partial(impactsound.parallel.map_tasks, scheduler="tcp://host:8786")``; default: one after the
        other in this process.

    Returns
    -------
    PANField
        Its meta["fdtd_run"] records the run lengths and whether a field was cut at the cap
        (:class:`PANPrecomputeWarning`).
    """
    h = job.h
    t_shift = 2.0 * h                                     # pulse centre; field time 0 is the pulse centre
    pts = sample_points(job.R_b, job.n_theta, job.n_phi, len(job.radii))      # (nt, np, M, 3)
    M = len(job.radii)
    shell = np.broadcast_to(np.arange(M), pts.shape[:3]).reshape(-1)           # fit shell of each receiver
    weights = job.radii[shell] / job.radii[-1]            # decay test: R |p| (module docstring)
    plan = job.plan
    inside = MeshInside(job.mesh, walls=thin_body(job.mesh, plan.dx))
    parts = run_fields(inside, plan, pts.reshape(-1, 3), PulseDrive(h, t_shift), job.c, job.rho,
                       task_key=job.key, checkpoint_dir=checkpoint_dir, dtype=np.dtype(job.dtype),
                       progress=progress, map_fn=map_fn, decay_weights=weights, ragged=True)
    steps = [int(a.shape[1]) for a in parts]
    T = max(steps)
    p = np.zeros((6, len(shell), T))
    for f, a in enumerate(parts):
        if steps[f] < T:                                   # fade out in retarded time, then zero-pad
            t = (np.arange(T) + 1) * plan.dt - t_shift                 # field time of each sample
            tau = t[None, :] - job.radii[shell][:, None] / job.c
            tau_end = steps[f] * plan.dt - t_shift - job.radii[-1] / job.c
            win = plan.window_steps * plan.dt
            x = np.clip((tau_end - tau) / win, 0.0, 1.0)
            a = np.pad(a, ((0, 0), (0, T - steps[f]))) * (0.5 - 0.5 * np.cos(np.pi * x))
        p[f] = a
    p = p.reshape(6, job.n_theta, job.n_phi, M, T)
    lo, hi = plan.step_range()
    decayed = [bool(has_decayed(decay_envelope(a, weights), plan)) for a in parts] if plan.adaptive else None
    cut = [f for f in range(6) if plan.adaptive and steps[f] >= hi and not decayed[f]]
    run = {"adaptive": plan.adaptive, "min_steps": lo, "max_steps": hi, "field_steps": steps,
           "decay_db": plan.decay_db if plan.adaptive else None,
           "decay_window_s": plan.window_steps * plan.dt if plan.adaptive else None,
           "decayed": decayed, "cap_reached": bool(cut), "fields_cut_at_cap": cut}
    if cut:
        names = ["a_x", "a_y", "a_z", "alpha_x", "alpha_y", "alpha_z"]
        warnings.warn(f"PAN precompute: field(s) {', '.join(names[f] for f in cut)} had not decayed by "
                      f"{plan.decay_db:g} dB at the run-length cap of {hi * plan.dt * 1e3:.3g} ms ({hi} steps) and "
                      "are cut there (asset meta fdtd_run.cap_reached); pass a larger max_duration to plan_pan to "
                      "run them longer", PANPrecomputeWarning, stacklevel=2)
    meta = {"material": job.material.as_dict(), "grid": list(plan.shape), "dx": plan.dx,
            "fdtd_dt": plan.dt, "fdtd_steps": T, "duration": T * plan.dt, "fdtd_run": run,
            "code_version": CODE_VERSION, "dtype": job.dtype}
    return fit_pan_field(p, radii=job.radii, c=job.c, rho=job.rho, dt=plan.dt, t_start=plan.dt - t_shift,
                         h=h, R_b=job.R_b, mass=job.mass, inertia=job.inertia, n_terms=job.n_terms,
                         inputs_hash=job.key, meta=meta)


def pan_asset_path(job: PANJob, cache=None) -> Path:
    """Where the PAN field asset of a job lives.

    Parameters
    ----------
    job : PANJob
    cache : path-like, optional
        Asset folder (default ``assets.cache_dir()``).

    Returns
    -------
    Path
        ``<cache>/pan_<key[:40]>.h5``.
    """
    from ...assets import cache_dir
    folder = Path(cache) if cache is not None else cache_dir()
    return folder / f"pan_{job.key[:40]}.h5"


def cached_pan_field(job: PANJob, *, cache=None, progress=None, map_fn=None, load_only: bool = False):
    """The PAN field of ``job`` from the asset cache, else precomputed (per-field checkpoints next to it, so an
    interrupted run resumes) and written atomically. A corrupted or stale file is rebuilt, never used.
    With load_only, returns None instead of computing.

    The checkpoint folder ``pan_<key>.ckpt`` is removed once the asset is written; a run killed between the
    two leaves it behind, so whenever the asset of the same key loads, a leftover folder of that key is removed
    too (its fields are in the asset).

    Parameters
    ----------
    job : PANJob
    cache : path-like, optional
        Asset folder (default ``assets.cache_dir()``).
    progress, map_fn
        As in :func:`run_pan`.
    load_only : bool, optional
        Return None instead of computing.

    Returns
    -------
    PANField or None
    """
    import shutil

    from ...errors import AssetError
    from .field import PANField
    path = pan_asset_path(job, cache)
    ckpt = path.with_suffix(".ckpt")
    try:
        fld = PANField.load(path, inputs_hash=job.key)
    except AssetError:
        if load_only:
            return None
    else:
        if ckpt.is_dir():
            shutil.rmtree(ckpt, ignore_errors=True)
        return fld
    from ...assets import asset_lock
    # one process precomputes it; others asking at once wait for the lock, then read it (assets.asset_lock)
    with asset_lock(path):
        try:
            return PANField.load(path, inputs_hash=job.key)
        except AssetError:
            pass
        # kept wavelet-compressed like the soundbank's fields (field_store), and used in that form from now on
        fld = run_pan(job, checkpoint_dir=ckpt, progress=progress, map_fn=map_fn).stored_form(PAN_EPS)
        fld.save(path)
    shutil.rmtree(ckpt, ignore_errors=True)
    return fld
