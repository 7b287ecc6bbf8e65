"""FFAT transfer precompute: one exterior BEM solve and one FFAT fit per vibration mode.

After Chadwick, An & James 2009, "Harmonic Shells", sec. 4 and Appendix A (the paper solves with a fast
multipole BEM; here a dense one, transfer/bem.py).

Per mode j of a :class:`~impactsound.fem.model.ModalModel` (body frame, centre of mass at the origin):

1. Neumann data per unit modal amplitude q_j, e^{-i w t}: dp/dn = rho w_j^2 (n . u_j) (Harmonic Shells, App. A),
   piecewise constant per BEM triangle (n the flat-face normal, u_j the mean of the face's node shapes).
2. BEM surface: the model's surface triangles (P2 models: each split into 4 at its edge mid-nodes, where the mode
   shapes are exact), midpoint-subdivided until the longest edge is below lambda / 6 (the usual 6-8 elements per
   wavelength), within ``max_faces``; a mode that would need more is solved on the capped mesh and flagged,
   with a warning naming the mode and the element count it would need.
3. Exterior solve (transfer/bem.py), pressure sampled on the FFAT shells and directions (transfer/ffat.py), fit
   with M = ``terms`` terms. Accuracy is measured on held-out points (other radii, random directions): the
   median relative error of |p| for M = 1..terms is stored per mode.

Modes are independent tasks (parallel.map_tasks: local processes by default, a Dask cluster with a scheduler
address); each finished mode is written atomically as a checkpoint asset, so an interrupted run continues where
it stopped and gives the same asset. bempp-cl's JIT compilation is paid once per worker process, never per mode.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..assets import Asset, content_hash, read_asset, write_asset
from ..constants import AIR_C, AIR_RHO
from ..errors import AssetError, InputError
from . import bem, ffat

KIND = "ffat_transfer"
KIND_VERSION = 3
MODE_KIND = "ffat_mode"
CODE_VERSION = "ffat-4"

#: held-out radii (in units of the bounding radius): between the fitting shells, and farther out than the last
HOLDOUT_RADII = (3.2, 5.0, 12.0, 40.0)
HOLDOUT_DIRECTIONS = 40


class FFATCapWarning(UserWarning):
    """A mode's wavelength is shorter than the BEM mesh allowed by ``max_faces`` can resolve."""


@dataclass(frozen=True)
class TransferSettings:
    """Settings of a BEM transfer precompute.

    Parameters
    ----------
    terms : int, optional
        FFAT expansion terms M (1..4; the paper's range, Harmonic Shells sec. 4).
    max_modes : int, optional
        First N modes only (None: all).
    max_faces : int, optional
        BEM triangle budget per mode.
    per_wavelength : float, optional
        Required elements per wavelength.
    c : float, optional
        Speed of sound [m/s].
    rho : float, optional
        Air density [kg/m^3].
    backend : str, optional
        bempp-cl assembly backend (:data:`bem.BACKENDS`; part of the cache key, the two agree to ~1e-13).
    """

    terms: int = 4
    max_modes: int | None = None
    max_faces: int = 6000
    per_wavelength: float = bem.ELEMENTS_PER_WAVELENGTH
    c: float = AIR_C
    rho: float = AIR_RHO
    backend: str = "numba"

    def check(self) -> None:
        """Raise :class:`InputError` on an unknown backend, terms outside 1..4, max_modes < 1 or non-positive
        air constants."""
        if self.backend not in bem.BACKENDS:
            raise InputError(f"transfer: backend = {self.backend!r}; use one of {', '.join(bem.BACKENDS)}")
        if not 1 <= int(self.terms) <= 4:
            raise InputError(f"transfer: terms = {self.terms}; use 1..4 (Chadwick, An & James 2009, sec. 4)")
        if self.max_modes is not None and int(self.max_modes) < 1:
            raise InputError(f"transfer: max_modes = {self.max_modes} must be >= 1")
        if not (self.c > 0 and self.rho > 0):
            raise InputError("transfer: air c and rho must be positive")


# ---- BEM surface of a modal model ---------------------------------------------------------------------------
def model_surface(model):
    """The BEM surface of a modal model (module docstring, step 2, before refinement).

    Parameters
    ----------
    model : ModalModel
        Surface nodes, faces (and P2 faces6), mode shapes.

    Returns
    -------
    vertices : ndarray, shape (nv, 3)
        [m], body frame.
    faces : ndarray, shape (nf, 3)
        Triangles (P2 faces split into 4 at their mid-edge nodes).
    shapes : ndarray, shape (m, nv, 3)
        Mode shapes at the vertices [1/sqrt(kg)].
    """
    nodes = np.asarray(model.surface_nodes, np.float64)
    shapes = np.asarray(model.shapes, np.float64)
    if model.surface_faces6 is None:
        faces = np.asarray(model.surface_faces, np.int64)
        nv = model.n_surface_vertices
        return nodes[:nv], faces, shapes[:, :nv]
    f6 = np.asarray(model.surface_faces6, np.int64)
    v0, v1, v2, m01, m12, m20 = f6.T
    faces = np.concatenate([np.stack([v0, m01, m20], 1), np.stack([m01, v1, m12], 1),
                            np.stack([m20, m12, v2], 1), np.stack([m01, m12, m20], 1)])
    return nodes, faces, shapes


def subdivide(vertices, faces, fields):
    """One midpoint subdivision (each triangle -> 4, orientation kept).

    Parameters
    ----------
    vertices : ndarray, shape (nv, 3)
        Surface to refine [m].
    faces : ndarray, shape (nf, 3)
        Its triangles (any orientation; it is kept).
    fields : ndarray, shape (..., nv, 3)
        Per-vertex fields, interpolated linearly to the new mid-edge vertices.

    Returns
    -------
    vertices : ndarray, shape (nv + ne, 3)
    faces : ndarray, shape (4 nf, 3)
    fields : ndarray, shape (..., nv + ne, 3)
    """
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    key = np.sort(e, axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    nv = len(vertices)
    mid = nv + inv.reshape(3, -1)                                        # (3, nf): m01, m12, m20
    verts = np.concatenate([vertices, 0.5 * (vertices[uniq[:, 0]] + vertices[uniq[:, 1]])])
    flds = np.concatenate([fields, 0.5 * (fields[..., uniq[:, 0], :] + fields[..., uniq[:, 1], :])], axis=-2)
    a, b, c = faces.T
    m01, m12, m20 = mid
    f = np.concatenate([np.stack([a, m01, m20], 1), np.stack([m01, b, m12], 1), np.stack([m20, m12, c], 1),
                        np.stack([m01, m12, m20], 1)])
    return verts, f, flds


def face_normal_data(vertices, faces, u) -> np.ndarray:
    """Normal component n . u per face (flat-face normal, u averaged over the face's three vertices).

    Parameters
    ----------
    vertices, faces : ndarray
        The (refined) BEM surface: (nv, 3) [m] and (nf, 3) outward triangles.
    u : ndarray, shape (nv, 3)
        Per-vertex vector field (a mode shape [1/sqrt(kg)]).

    Returns
    -------
    ndarray, shape (nf,)
        n . u, in the units of u.
    """
    t = vertices[faces]
    cr = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    n = cr / np.linalg.norm(cr, axis=1, keepdims=True)
    return np.einsum("fc,fc->f", n, u[faces].mean(axis=1))


def refinement(vertices, faces, k: float, settings: TransferSettings):
    """Midpoint subdivisions that make the mesh resolve k within the face budget.

    Parameters
    ----------
    vertices, faces : ndarray
        The unrefined surface.
    k : float
        Wavenumber [1/m].
    settings : TransferSettings
        ``per_wavelength`` and ``max_faces``.

    Returns
    -------
    levels : int
        Subdivisions to do.
    capped : bool
        Whether ``max_faces`` stopped short of ``per_wavelength``.
    needed : int
        Faces the full refinement would have.
    """
    epw = bem.elements_per_wavelength(vertices, faces, k)
    need = max(0, int(np.ceil(np.log2(settings.per_wavelength / epw)))) if epw < settings.per_wavelength else 0
    levels = need
    while levels > 0 and len(faces) * 4**levels > settings.max_faces:
        levels -= 1
    return levels, levels < need, len(faces) * 4**need


# ---- one mode ---------------------------------------------------------------------------------------------
def mode_solution(task: dict):
    """Exterior BEM solution of one mode task (module docstring, steps 1-3, without the fit).

    Parameters
    ----------
    task : dict
        As built for :func:`solve_mode` (index, vertices, faces, u, omega [rad/s], r_bar [m], settings).

    Returns
    -------
    solution : bem.BemSolution
    capped : bool
        Whether the face budget limited the refinement.
    """
    s = TransferSettings(**task["settings"])
    v, f, u = task["vertices"], task["faces"], task["u"][None]
    omega = float(task["omega"])
    k = omega / s.c
    levels, capped, _ = refinement(v, f, k, s)
    for _ in range(levels):
        v, f, u = subdivide(v, f, u)
    g = s.rho * omega**2 * face_normal_data(v, f, u[0])                  # dp/dn per unit q (step 1)
    return bem.solve_neumann(v, f, k, g, check=False, backend=s.backend), capped


def shell_samples(sol, radii, T: int, r_bar: float) -> np.ndarray:
    """Pressure (K, T, 2T) on the FFAT shells. The paper's T = ceil(2.25 k + 15) over-resolves small objects:
    the BEM is evaluated on the coarser grid the field's band limit needs (ffat.coarse_resolution) and
    interpolated exactly (ffat.upsample), 10-100x fewer representation-formula evaluations.

    Parameters
    ----------
    sol : bem.BemSolution
        The mode's surface solution.
    radii : ndarray, shape (K,)
        Shell radii [m].
    T : int
        Polar resolution of the map.
    r_bar : float
        Bounding radius [m].

    Returns
    -------
    ndarray of complex, shape (K, T, 2T)
        Pressure [Pa] per unit modal amplitude.
    """
    Tc = ffat.coarse_resolution(sol.k, r_bar)
    if Tc >= T:
        d = ffat.grid_directions(T).reshape(-1, 3)
        return sol.evaluate((radii[:, None, None] * d[None]).reshape(-1, 3)).reshape(len(radii), T, 2 * T)
    d = ffat.grid_directions(Tc).reshape(-1, 3)
    coarse = sol.evaluate((radii[:, None, None] * d[None]).reshape(-1, 3)).reshape(len(radii), Tc, 2 * Tc)
    return ffat.upsample(coarse, T)


def solve_mode(task: dict) -> dict:
    """BEM + FFAT fit of one mode (a picklable task: plain arrays and numbers). Returns arrays and figures.

    BLAS/LAPACK run on one thread here, so the maps are the same bits in this process, in a local pool and on
    Dask workers (which start with one BLAS thread): a threaded QR/LU may round differently. bempp-cl's and our
    compiled loops run on impactsound.parallel.default_threads() Numba threads ($IMPACTSOUND_THREADS; a local
    pool of N processes gives each cores / N), so that side-by-side workers do not oversubscribe the cores.

    Parameters
    ----------
    task : dict
        index, vertices (nv, 3) [m], faces, u (nv, 3) mode shape [1/sqrt(kg)], omega [rad/s], r_bar [m],
        settings (a :class:`TransferSettings` as a dict).

    Returns
    -------
    dict
        psi (M, T, 2T) complex64 [Pa], bem_p, bem_g (surface solution), levels, k [1/m], T, faces, capped,
        residual, holdout_error (per number of terms 1..M: median relative error of |p| on held-out points),
        epw, seconds_bem and seconds (wall time [s]).
    """
    import numba

    from ..parallel import default_threads, single_threaded_blas, undo_dask_malloc_trim
    undo_dask_malloc_trim()
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(default_threads(), numba.config.NUMBA_NUM_THREADS)))
    try:
        with single_threaded_blas():
            return _solve_mode(task)
    finally:
        numba.set_num_threads(before)


def fit_maps(sol, k: float, r_bar: float, terms: int, seed: int):
    """FFAT maps of 1..terms terms fitted to a BEM solution sampled on the shells around r_bar [m], and each one's
    held-out error (median relative magnitude error at other radii, seeded random directions, never grid ones).
    Returns (psis (list, m-th of m x T x 2T values), T, errors (list of float))."""
    T = ffat.angular_resolution(k)
    radii = ffat.shell_radii(r_bar)
    P = shell_samples(sol, radii, T, r_bar).reshape(len(radii), -1)
    psis = [ffat.fit(P, radii, k, m) for m in range(1, terms + 1)]
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(HOLDOUT_DIRECTIONS, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    hx = (np.asarray(HOLDOUT_RADII)[:, None, None] * r_bar * d[None]).reshape(-1, 3)
    p_ref = sol.evaluate(hx)
    errs = []
    for m, psi in enumerate(psis, start=1):
        mp = ffat.FFATMap(k=k, psi=psi.reshape(m, T, 2 * T))
        errs.append(float(np.median(np.abs(np.abs(mp.evaluate(hx)) - np.abs(p_ref)) / np.abs(p_ref))))
    return psis, T, errs


def _solve_mode(task: dict) -> dict:
    t_start = time.perf_counter()
    s = TransferSettings(**task["settings"])
    r_bar = float(task["r_bar"])
    sol, capped = mode_solution(task)
    k, f = sol.k, sol.faces
    t_bem = time.perf_counter() - t_start
    psis, T, errs = fit_maps(sol, k, r_bar, s.terms, int(task["index"]))
    levels = int(round(np.log(len(f) / len(task["faces"])) / np.log(4.0)))    # midpoint subdivisions done
    return {"index": int(task["index"]), "psi": psis[-1].reshape(s.terms, T, 2 * T).astype(np.complex64),
            "bem_p": sol.p.astype(np.complex64), "bem_g": sol.g.astype(np.complex64), "levels": levels,
            "k": k, "T": T, "faces": int(len(f)), "capped": bool(capped), "residual": sol.residual,
            "holdout_error": np.asarray(errs), "epw": bem.elements_per_wavelength(sol.vertices, f, k),
            "seconds_bem": t_bem, "seconds": time.perf_counter() - t_start}


# ---- whole model -------------------------------------------------------------------------------------------
def transfer_inputs_hash(model, settings: TransferSettings) -> str:
    """Cache key of a transfer asset: the modal model's inputs hash (or its frequencies, shapes and surface),
    the settings and the code version.

    Parameters
    ----------
    model : ModalModel
    settings : TransferSettings

    Returns
    -------
    str
    """
    return content_hash(KIND, CODE_VERSION, model.inputs_hash or content_hash(
        np.asarray(model.frequencies_hz), np.asarray(model.shapes), np.asarray(model.surface_nodes)),
        asdict(settings))


def _mode_hash(inputs_hash: str, j: int) -> str:
    return content_hash(inputs_hash, "mode", j)


def _mode_asset(res: dict, h: str) -> Asset:
    arrays = {k: res[k] for k in ("psi", "holdout_error", "bem_p", "bem_g")}
    # no wall-clock timings in the content: two identical runs must give identical files
    meta = {k: res[k] for k in ("index", "k", "T", "faces", "capped", "residual", "epw", "levels")}
    return Asset(kind=MODE_KIND, arrays=arrays, meta=meta, inputs_hash=h)


def _mode_result(a: Asset) -> dict:
    r = dict(a.meta)
    r.update({k: a.arrays[k] for k in ("psi", "holdout_error", "bem_p", "bem_g")})
    return r


def run_transfer(model, settings: TransferSettings = TransferSettings(), *, out: str | Path | None = None,
                 checkpoint_dir: str | Path | None = None, scheduler: str | None = None,
                 workers: int | None = 1, fallback_local: bool = False, progress=None):
    """FFAT transfer of every mode of ``model`` (up to settings.max_modes).

    Finished modes are checkpointed and reused by a rerun with the same inputs; a stale or corrupted checkpoint
    is recomputed. A mode whose mesh the face budget caps is solved anyway, with an :class:`FFATCapWarning`.

    Parameters
    ----------
    model : ModalModel
        The modal model (body frame, centre of mass at the origin).
    settings : TransferSettings, optional
    out : path-like, optional
        Write the asset here.
    checkpoint_dir : path-like, optional
        Per-mode checkpoints (default: ``out`` with suffix ``.modes``, removed once the asset is written; none
        without ``out``).
    scheduler, workers, fallback_local, progress
        As in :func:`impactsound.parallel.map_tasks` (``workers`` defaults to 1 here).

    Returns
    -------
    Asset
        Kind "ffat_transfer": the packed FFAT bank, the BEM surface solutions, per-mode diagnostics.

    Raises
    ------
    InputError
        On invalid settings or a model without elastic modes.
    """
    from ..parallel import map_tasks

    settings.check()
    inputs_hash = transfer_inputs_hash(model, settings)
    n = model.n_modes if settings.max_modes is None else min(model.n_modes, int(settings.max_modes))
    if n == 0:
        raise InputError("transfer: the modal model has no elastic modes to radiate")
    v, f, shapes = model_surface(model)
    bem.check_surface(v, f, name="modal model surface")
    r_bar = float(np.sqrt((v**2).sum(axis=1)).max())
    omega = model.omega[:n]
    own_ckpt = checkpoint_dir is None and out is not None
    if own_ckpt:
        checkpoint_dir = Path(out).with_suffix(".modes")
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt is not None:
        ckpt.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict] = {}
    todo = []
    for j in range(n):
        if ckpt is not None and (ckpt / f"mode_{j:04d}.h5").is_file():
            try:
                results[j] = _mode_result(read_asset(ckpt / f"mode_{j:04d}.h5", MODE_KIND,
                                                     inputs_hash=_mode_hash(inputs_hash, j)))
                continue
            except AssetError:
                pass                                                    # half-written or stale: redo
        levels, capped, needed = refinement(v, f, omega[j] / settings.c, settings)
        if capped:
            warnings.warn(f"mode {j} ({omega[j] / (2 * np.pi):.0f} Hz) needs {needed} BEM triangles for "
                          f"{settings.per_wavelength:g} per wavelength; capped at {len(f) * 4**levels} "
                          f"(max_faces = {settings.max_faces}): its transfer is less accurate", FFATCapWarning)
        todo.append(_task(j, v, f, shapes, omega, r_bar, settings))

    def on_result(i, res):
        j = res["index"]
        results[j] = res
        if ckpt is not None:
            write_asset(ckpt / f"mode_{j:04d}.h5", _mode_asset(res, _mode_hash(inputs_hash, j)))

    if progress is not None and not todo:
        progress(1.0)
    map_tasks(solve_mode, todo, scheduler=scheduler, workers=workers, fallback_local=fallback_local,
              progress=progress, on_result=on_result)
    asset = assemble(results, n, inputs_hash, model, settings, r_bar, v, f)
    if out is not None:
        write_asset(out, asset)
        if own_ckpt:                                   # the asset holds everything: the checkpoints are litter now
            import shutil
            shutil.rmtree(ckpt, ignore_errors=True)
    return asset


def _task(j, v, f, shapes, omega, r_bar, settings) -> dict:
    return {"index": j, "vertices": v, "faces": f, "u": shapes[j], "omega": float(omega[j]), "r_bar": r_bar,
            "settings": asdict(settings)}


def bem_shell_samples(model, tm: "TransferModel", j: int) -> np.ndarray:
    """Direct BEM pressure of mode j on the first FFAT shell's (T, 2T) grid (for plots and checks).

    Parameters
    ----------
    model : ModalModel
        The model the transfer was computed for.
    tm : TransferModel
        Its transfer (settings, r_bar, T per mode).
    j : int
        Mode index.

    Returns
    -------
    ndarray of complex, shape (T, 2T)
        Pressure [Pa] per unit modal amplitude (a new BEM solve).
    """
    settings = TransferSettings(**tm.meta["settings"])
    v, f, shapes = model_surface(model)
    sol, _ = mode_solution(_task(j, v, f, shapes, model.omega, tm.r_bar, settings))
    T = int(tm.bank.T[j])
    R0 = ffat.shell_radii(tm.r_bar)[0]
    return sol.evaluate(R0 * ffat.grid_directions(T).reshape(-1, 3)).reshape(T, 2 * T)


def _packed(parts) -> tuple[np.ndarray, np.ndarray]:
    """Concatenation of 1-D arrays and the offset of each (offsets has one more entry: the total)."""
    sizes = [len(a) for a in parts]
    return (np.concatenate(parts) if parts else np.zeros(0, np.complex64),
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))


def assemble(results: dict, n: int, inputs_hash: str, model, settings: TransferSettings, r_bar: float,
             surface_vertices, surface_faces) -> Asset:
    """Pack per-mode results into the transfer asset.

    Parameters
    ----------
    results : dict of int to dict
        :func:`solve_mode` results by mode index (0..n-1).
    n : int
        Number of modes.
    inputs_hash : str
        Cache key (:func:`transfer_inputs_hash`).
    model : ModalModel
        Source of the frequencies and the modal inputs hash.
    settings : TransferSettings
    r_bar : float
        Bounding radius [m].
    surface_vertices, surface_faces : ndarray
        The unrefined BEM surface.

    Returns
    -------
    Asset
    """
    maps = [ffat.FFATMap(k=float(results[j]["k"]), psi=np.asarray(results[j]["psi"])) for j in range(n)]
    bank = ffat.FFATBank.from_maps(maps)
    bem_p, p_off = _packed([np.asarray(results[j]["bem_p"], np.complex64) for j in range(n)])
    bem_g, g_off = _packed([np.asarray(results[j]["bem_g"], np.complex64) for j in range(n)])
    arrays = {"k": bank.k, "T": bank.T, "offsets": bank.offsets, "psi": bank.psi,
              # the BEM surface solutions, for direct evaluation inside the first FFAT shell (near field)
              "surface_vertices": np.asarray(surface_vertices, np.float64),
              "surface_faces": np.asarray(surface_faces, np.int64),
              "levels": np.array([results[j]["levels"] for j in range(n)], np.int64),
              "bem_p": bem_p, "bem_p_offsets": p_off, "bem_g": bem_g, "bem_g_offsets": g_off,
              "frequencies_hz": np.asarray(model.frequencies_hz[:n], np.float64),
              "holdout_error": np.stack([np.asarray(results[j]["holdout_error"]) for j in range(n)]),
              "faces": np.array([results[j]["faces"] for j in range(n)], np.int64),
              "capped": np.array([results[j]["capped"] for j in range(n)], np.int8)}
    meta = {"modal_inputs_hash": model.inputs_hash, "terms": int(settings.terms), "r_bar": r_bar,
            "shell_radii": ffat.shell_radii(r_bar).tolist(), "settings": asdict(settings),
            "code_version": CODE_VERSION, "convention": "e^{-i w t}; p per unit modal amplitude q_j",
            "units": {"k": "1/m", "psi": "Pa per unit q (1/sqrt(kg) shapes)", "r_bar": "m"}}
    return Asset(kind=KIND, kind_version=KIND_VERSION, arrays=arrays, meta=meta, inputs_hash=inputs_hash)


@dataclass
class TransferModel:
    """FFAT transfer of a modal model's first modes, ready for evaluation (body frame, COM origin).

    Attributes
    ----------
    bank : ffat.FFATBank
        The maps.
    frequencies_hz : ndarray
        Mode frequencies [Hz].
    r_bar : float
        Bounding radius [m].
    modal_inputs_hash : str
        Hash of the modal model it was computed for.
    holdout_error : ndarray, shape (n_modes, M)
        Held-out median relative error of |p| per number of terms.
    meta : dict
        The asset's metadata.
    near : dict
        Near-field data: BEM surface solutions (BEM assets) or Kirchhoff box fields (FDTD assets).
    """

    bank: ffat.FFATBank
    frequencies_hz: np.ndarray
    r_bar: float
    modal_inputs_hash: str
    holdout_error: np.ndarray
    meta: dict
    near: dict = field(default_factory=dict)
    _surfaces: dict = field(default_factory=dict, repr=False, compare=False)
    _solutions: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_modes(self) -> int:
        """Number of modes."""
        return len(self.bank.k)

    @classmethod
    def load(cls, path, model=None) -> "TransferModel":
        """Read a transfer asset (BEM or FDTD).

        Parameters
        ----------
        path : path-like
            The asset.
        model : ModalModel, optional
            When given (with an inputs hash), the asset must have been computed for it.

        Returns
        -------
        TransferModel

        Raises
        ------
        AssetError
            On a missing, corrupted or wrong-kind asset, or one computed for another model.
        """
        a = read_asset(path, KIND, kind_version=KIND_VERSION)
        mh = a.meta.get("modal_inputs_hash", "")
        if model is not None and model.inputs_hash and mh != model.inputs_hash:
            raise AssetError(f"{path}: transfer asset was computed for a different modal model (hash "
                             f"{mh[:12]}..., this model {model.inputs_hash[:12]}...); rerun "
                             "`impactsound transfer precompute` on this model's asset")
        ar = a.arrays
        bank = ffat.FFATBank(k=ar["k"], T=ar["T"], offsets=ar["offsets"], psi=ar["psi"],
                             terms=int(a.meta["terms"]))
        # near-field data: the BEM surface solutions (BEM assets) or the Kirchhoff box fields (FDTD assets)
        keys = ("surface_vertices", "surface_faces", "levels", "bem_p", "bem_p_offsets", "bem_g", "bem_g_offsets") \
            if "bem_p" in ar else ("box_centres", "box_normals", "box_area", "box_p", "box_dpdn")
        near = {k: ar[k] for k in keys if k in ar}
        return cls(bank=bank, frequencies_hz=ar["frequencies_hz"], r_bar=float(a.meta["r_bar"]),
                   modal_inputs_hash=mh, holdout_error=ar.get("holdout_error", np.zeros((len(ar["k"]), 0))),
                   meta=dict(a.meta), near=near)

    @property
    def inner_radius(self) -> float:
        """Radius [m] of the first FFAT shell: the maps are fitted (and valid) from there outwards."""
        return float(ffat.shell_radii(self.r_bar)[0])

    def bem_solution(self, j: int) -> bem.BemSolution:
        """Mode j's stored BEM surface solution (surface refined as in its solve), for direct evaluation.

        Parameters
        ----------
        j : int
            Index of the mode.

        Returns
        -------
        bem.BemSolution
            Cached; its residual is NaN (not stored).

        Raises
        ------
        AssetError
            If the stored data do not fit the surface.
        """
        if j not in self._solutions:
            nr = self.near
            lev = int(nr["levels"][j])
            if lev not in self._surfaces:
                v, f = nr["surface_vertices"], nr["surface_faces"]
                for _ in range(lev):
                    v, f, _ = subdivide(v, f, np.zeros((0, len(v), 3)))
                self._surfaces[lev] = (v, f)
            v, f = self._surfaces[lev]
            p = nr["bem_p"][nr["bem_p_offsets"][j]:nr["bem_p_offsets"][j + 1]].astype(np.complex128)
            g = nr["bem_g"][nr["bem_g_offsets"][j]:nr["bem_g_offsets"][j + 1]].astype(np.complex128)
            if len(p) != len(v) or len(g) != len(f):
                raise AssetError(f"transfer asset: mode {j}'s BEM data do not fit its surface ({len(p)} values "
                                 f"for {len(v)} vertices, {len(g)} for {len(f)} faces); rerun "
                                 "`impactsound transfer precompute`")
            self._solutions[j] = bem.BemSolution(vertices=v, faces=f, k=float(self.bank.k[j]), p=p, g=g,
                                                 residual=float("nan"))
        return self._solutions[j]

    def evaluate(self, points, modes=None) -> np.ndarray:
        """Complex pressure per unit modal amplitude at body-frame points: the FFAT maps from the first shell
        outwards; inside it, where the far-field expansion does not hold, the stored BEM solutions
        (representation formula, exact for the discretised surface data) or, for an FDTD asset, its Kirchhoff
        box fields.

        Parameters
        ----------
        points : array_like, shape (n, 3)
            Body-frame points [m].
        modes : array_like of int, optional
            Mode indices (default all).

        Returns
        -------
        ndarray of complex, shape (n, len(modes))
            p [Pa] per unit modal amplitude, e^{-i w t}.
        """
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        modes = np.arange(self.n_modes) if modes is None else np.asarray(modes, np.int64)
        out = self.bank.evaluate(pts)[:, modes]
        near = np.sqrt((pts**2).sum(axis=1)) < self.inner_radius
        if near.any() and "box_p" in self.near:                       # FDTD asset: Kirchhoff box fields
            from .fdtd_transfer import box_evaluate
            nr = self.near
            box = (nr["box_centres"], nr["box_normals"], float(nr["box_area"][0]))
            for c, j in enumerate(modes):
                out[near, c] = box_evaluate(box, nr["box_p"][j].astype(np.complex128),
                                            nr["box_dpdn"][j].astype(np.complex128), float(self.bank.k[j]),
                                            pts[near])
        elif near.any() and self.near:                                # (a model built without BEM data: maps)
            for c, j in enumerate(modes):
                out[near, c] = self.bem_solution(int(j)).evaluate(pts[near])
        return out
