"""BEM FFAT maps of thin-shell modes: exterior Helmholtz solves on the closed, thickened radiation surface.

After Chadwick, An & James 2009, "Harmonic Shells", sec. 4: an open shell's mid-surface has no inside and no
outside, so the exterior problem is solved on a closed surface made from it, the mid-surface offset by +-t/2 along its
vertex normals with the free boundaries closed by strips (scene/shell_body.py :func:`thicken`; mid-surface vertex
i becomes vertices i, outer, and i + Nv, inner). The wall moves as a whole, so each mode's mid-surface
displacement is copied to both sheets, and the strips interpolate it linearly (P1) between them. The result is a
P1 :class:`~impactsound.fem.model.ModalModel` whose transfer is computed per mode as in transfer/precompute.py
(Neumann data rho w^2 n . u per unit modal amplitude, e^{-i w t}; FFAT fit on 6 shells; held-out errors) and
stored as an ordinary ``ffat_transfer`` asset, cached by content hash.

Acoustic thickness t (a numerical choice: real walls, ~1 mm, are far thinner than any wavelength, so any t << the
wavelength and the object's size gives the same sound up to O(t / size)). What limits it is the dense BEM:
bempp-cl integrates every pair of non-adjacent triangles with one fixed Gauss rule, and a triangle of the outer
sheet sees its neighbour across the wall, at distance t, as nearly singular. Measured on a thickened disk (radius
a = 0.1 m, rigid translation, ka = 0.1; dipole strength against the analytic thin disk, tests/validation/
test_shell_ffat.py), with h the longest BEM edge:

    t / h = 0.8:  rule order 4 (6 points) and 8 agree to 0.04 %
    t / h = 0.4:  order 4 is 6 % off, order 8 within 0.3 % of order 16
    t / h = 0.2:  order 4 and 8 are wrong by 2x (sign flips possible), order 12 / 16 differ by 3 %

So: Gauss order :data:`QUADRATURE_ORDER` = 8 (16 points, ~5x the assembly time of bempp's default 4) and
t >= :data:`GAP_RATIO` h = 0.4 h. Default t = max(:data:`THICKNESS_FRACTION` (2 %) of the mid-surface's largest
extent, 0.4 x the longest edge of the finest BEM mesh that fits ``max_faces``); the BEM mesh is midpoint-
subdivided until it resolves both t (h <= t / 0.4) and the wavelength (6 elements, transfer/precompute.py).
What t itself does: a thickened disk's dipole (rigid translation) is ~(1 + 1.5..2 t / a) times the thin disk's
(Lamb's (8/3) rho a^3 added mass; its volume alone gives 1 + 1.18 t / a). On the cymbal (0.5 m, 32 segments,
one subdivision, 2,688 triangles) doubling t from 13 to 26 mm raised mode 1 (28 Hz, ka = 0.13) by 1.3 dB, mode 5
(73 Hz) by 0.3 dB and modes 9-20 (142-230 Hz) by <= 0.02 dB: only the lowest, most short-circuited modes feel
it, so the 13 mm default is ~1 dB loud there. The mesh matters more: at t = 26 mm the unsubdivided surface
(672 triangles, t / h = 0.4) was 2.3 dB below the subdivided one for mode 9, 0.6 dB for mode 13 (the pressure
of a sub-coincidence mode is the residue of near-cancelling neighbours, so its BEM needs elements finer than
the bending wave); hence the default subdivides as far as ``max_faces`` allows and thins t with it.

Solver: the plain boundary integral equation (1/2 I - K) p = -V g (transfer/bem.py, method "plain"), not CHIEF:
the interior of the closed surface is the wall itself, whose first Dirichlet eigenvalue is above k = pi / t
(half a wavelength across the wall), so the plain equation has a unique solution for k t < pi, and CHIEF points
inside a wall of thickness t << h sit in the near-singular zone (measured: every CHIEF solve of the thickened
disk failed its residual check and fell back to Burton-Miller, 20-70 s instead of 1-4 s). Modes with
k t > pi / 2 (far above any shell mode kept here) use Burton-Miller.

Closed mid-surfaces (a sealed bottle): the thickened surface would be two nested sheets, and the sealed cavity
inside would be solved with the outside. Its pressure is ~3 / (ka)^2 times the outside's at low ka (the air
inside is compressed), and the near-singular coupling of the two sheets leaks it into the outside field: a
breathing sphere (a = 0.1 m, t = 13 mm, t / h = 0.4) was measured 0.5 % off at ka = 0.5 and 0.6 % at ka = 2, but
17 % off at ka = 0.05. The outside of a closed shell only sees its outer face, so a closed mid-surface radiates
from itself (offset 0, no thickness), solved like a solid's surface (CHIEF, transfer/bem.py, bempp-cl's default
quadrature): exact for the outside, and no thin wall.

Coarsening: a dense BEM needs the thickened surface (2 Nf + 2 x boundary edges triangles) within ``max_faces``.
A finer mid-surface (e.g. a 48-segment trash can: 8,400 triangles thickened) is radiated through a coarser
surface of the same shape (``coarse = (vertices, faces)``, e.g. :func:`coarse_builtin`, the built-in shape
rebuilt at a lower resolution): the mode shapes are interpolated onto its vertices at their closest points on
the mid-surface (barycentric, :func:`closest_point_shapes`). The coarse surface must resolve the modes' bending
waves.

Convention: :meth:`ShellTransfer.transfer` returns what :meth:`~impactsound.sources.shell.radiation.ShellRadiator.
transfer` does, the complex pressure per unit modal ACCELERATION with the bulk delay e^{i k |x|} removed
(e^{-i w t}): with q_j = 1 the acceleration is -w_j^2, so A_j(x) = -p_j(x) e^{-i k_j |x|} / w_j^2, p_j the
transfer per unit modal amplitude (:meth:`~impactsound.transfer.precompute.TransferModel.evaluate`).
"""
from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from ...assets import Asset, cache_dir, content_hash, read_asset, write_asset
from ...constants import AIR_C, AIR_RHO
from ...errors import AssetError, InputError, MeshError

#: version of this module's numerics (part of the cache key)
CODE_VERSION = "shell-ffat-1"
#: default acoustic thickness as a fraction of the mid-surface's largest bounding-box extent
THICKNESS_FRACTION = 0.02
#: smallest acoustic thickness over the longest BEM edge that QUADRATURE_ORDER integrates accurately (measured)
GAP_RATIO = 0.4
#: Gauss order of bempp-cl's regular (non-adjacent triangle pairs) quadrature for the thickened surface
QUADRATURE_ORDER = 8
#: default triangle budget of the BEM surface (dense; measured ~85 s per mode at 2,688 triangles, order 8, on 2
#: shared cores: ~50 s double layer, ~30 s single layer; the cost grows as the square of the triangles)
MAX_FACES = 3000


# ---- geometry --------------------------------------------------------------------------------------------------
def _mode_field(U, nv: int) -> np.ndarray:
    """U (3 Nv, r), dof 3 v + component -> (r, Nv, 3)."""
    U = np.asarray(U, np.float64)
    if U.ndim != 2 or U.shape[0] != 3 * nv:
        raise InputError(f"shell FFAT: mode shapes U have shape {U.shape}, expected (3 x {nv}, r)")
    return np.ascontiguousarray(U.reshape(nv, 3, -1).transpose(2, 0, 1))


def radiation_surface(vertices, faces, U, thickness: float):
    """The closed, thickened radiation surface of a mid-surface and its modes on it.

    Parameters
    ----------
    vertices : array_like, shape (Nv, 3)
        Mid-surface [m], body frame.
    faces : array_like, shape (Nf, 3)
        Its triangles, consistently oriented (the outer sheet is on their normal side).
    U : array_like, shape (3 Nv, r)
        Mode shapes of the mid-surface [1/sqrt(kg)] (dof 3 v + component).
    thickness : float
        Acoustic thickness t [m].

    Returns
    -------
    vertices : ndarray, shape (2 Nv, 3)
        Outer sheet (0..Nv-1), inner sheet (Nv..2 Nv-1).
    faces : ndarray
        Closed, outward triangles (sheets and boundary strips).
    shapes : ndarray, shape (r, 2 Nv, 3)
        Each mode's mid-surface displacement on both sheets (the strips interpolate between them).

    Raises
    ------
    MeshError
        If the inner or outer sheet folds over (t larger than twice a radius of curvature of the mid-surface).
    """
    from ...scene.shell_body import thicken
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    t = float(thickness)
    if not (math.isfinite(t) and t > 0):
        raise InputError(f"shell FFAT: acoustic thickness {thickness!r} must be a positive length [m]")
    shapes = _mode_field(U, len(V))
    Vt, Ft = thicken(V, F, t)
    fold = _fold(V, F, 0.5 * t)
    if fold is not None:
        raise MeshError(f"shell FFAT: the {fold} sheet of the thickened surface folds over at acoustic thickness "
                        f"{t:.3g} m (a radius of curvature below t / 2); use a thinner acoustic_thickness")
    return Vt, Ft, np.concatenate([shapes, shapes], axis=1)


def _fold(V, F, s_max: float):
    """Which offset sheet x + s n(x), |s| <= s_max, turns a triangle over ("outer", "inner" or None): the
    triangle's area vector along its rest normal is a quadratic in s, which must stay positive on the way."""
    from ...scene.shell_body import vertex_normals
    n = vertex_normals(V, F)
    E1, E2 = V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]]
    D1, D2 = n[F[:, 1]] - n[F[:, 0]], n[F[:, 2]] - n[F[:, 0]]
    c0 = np.cross(E1, E2)
    N = c0 / np.linalg.norm(c0, axis=1, keepdims=True)
    a0 = np.einsum("fc,fc->f", c0, N)                          # (E1 + s D1) x (E2 + s D2) . N = a0 + a1 s + a2 s^2
    a1 = np.einsum("fc,fc->f", np.cross(E1, D2) + np.cross(D1, E2), N)
    a2 = np.einsum("fc,fc->f", np.cross(D1, D2), N)
    for name, lo, hi in (("outer", 0.0, s_max), ("inner", -s_max, 0.0)):
        s = np.stack([np.full_like(a0, lo), np.full_like(a0, hi),
                      np.clip(-a1 / np.where(a2 != 0, 2 * a2, np.inf), lo, hi)])
        if np.any(a0 + a1 * s + a2 * s * s <= 1e-12 * a0):
            return name
    return None


def thickened_face_count(faces) -> int:
    """Triangles of the thickened surface of a mid-surface: 2 Nf + 2 per boundary edge."""
    from ...scene.shell_body import boundary_edges
    F = np.asarray(faces, np.int64)
    return int(2 * len(F) + 2 * len(boundary_edges(F)))


def _max_edge(V, F) -> float:
    t = V[F]
    e = np.concatenate([t[:, 1] - t[:, 0], t[:, 2] - t[:, 1], t[:, 0] - t[:, 2]])
    return float(np.sqrt((e**2).sum(axis=1)).max())


def default_thickness(vertices, faces, max_faces: int = MAX_FACES) -> float:
    """Default acoustic thickness [m]: max(2 % of the largest extent, 0.4 x the longest edge of the mid-surface
    after the midpoint subdivisions that fit ``max_faces`` once thickened) (module docstring)."""
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    nf = thickened_face_count(F)
    levels = 0
    while nf * 4 ** (levels + 1) <= max_faces:
        levels += 1
    return max(THICKNESS_FRACTION * float(np.ptp(V, axis=0).max()), GAP_RATIO * _max_edge(V, F) / 2**levels)


def closest_point_shapes(vertices, faces, U, points) -> np.ndarray:
    """Mode shapes of a mid-surface interpolated at the closest surface points of ``points`` (P1, barycentric).

    Parameters
    ----------
    vertices, faces : array_like
        The mid-surface the modes were computed on: (Nv, 3) [m], (Nf, 3).
    U : array_like, shape (3 Nv, r)
        Its mode shapes.
    points : array_like, shape (n, 3)
        Where to interpolate (the vertices of a coarser surface of the same shape) [m].

    Returns
    -------
    ndarray, shape (3 n, r)
        Interpolated shapes (dof 3 i + component), the layout of U.
    """
    import trimesh
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    P = np.asarray(points, np.float64).reshape(-1, 3)
    shapes = _mode_field(U, len(V))                                          # (r, Nv, 3)
    mesh = trimesh.Trimesh(V, F, process=False)
    closest, _, tri = trimesh.proximity.closest_point(mesh, P)
    bary = trimesh.triangles.points_to_barycentric(V[F[tri]], closest)
    bary = np.clip(bary, 0.0, None)
    bary /= bary.sum(axis=1, keepdims=True)
    u = np.einsum("rnkc,nk->nrc", shapes[:, F[tri]], bary)                   # (n, r, 3)
    return np.ascontiguousarray(u.transpose(0, 2, 1).reshape(3 * len(P), -1))


def coarse_builtin(shape: str, params: dict | None = None, max_faces: int = MAX_FACES,
                   resolutions=(48, 40, 32, 28, 24, 20, 16, 12)):
    """The finest built-in shell surface (scene/shells.py) among ``resolutions`` whose thickened surface fits
    ``max_faces`` triangles: (vertices, faces, resolution), in the shape's own frame (shift it into the body
    frame of the modes before passing it as ``coarse``)."""
    from ...scene.shells import make_shell
    for res in resolutions:
        m = make_shell(shape, params, int(res))
        if thickened_face_count(m.faces) <= max_faces:
            return np.asarray(m.vertices, np.float64), np.asarray(m.faces, np.int64), int(res)
    raise InputError(f"shell FFAT: no {shape} surface among resolutions {tuple(resolutions)} fits "
                     f"max_faces = {max_faces} once thickened")


def shell_modal_model(vertices, faces, U, omega, thickness: float | None, *, inputs_hash: str = ""):
    """The radiation surface and its modes as a P1 :class:`~impactsound.fem.model.ModalModel` (the body frame of
    ``vertices``; mass, inertia and volume are not those of the shell and are left 0): the thickened surface of
    :func:`radiation_surface`, or with ``thickness`` None the (closed) mid-surface itself."""
    from ...fem.model import ModalModel
    from ...materials import make_material
    if thickness is None:
        Vt, Ft = np.asarray(vertices, np.float64), np.asarray(faces, np.int64)
        shapes = _mode_field(U, len(Vt))
    else:
        Vt, Ft, shapes = radiation_surface(vertices, faces, U, thickness)
    omega = np.asarray(omega, np.float64).ravel()
    if len(omega) != shapes.shape[0]:
        raise InputError(f"shell FFAT: {len(omega)} frequencies for {shapes.shape[0]} mode shapes")
    if not np.all(np.isfinite(omega) & (omega > 0)):
        raise InputError("shell FFAT: mode frequencies must be positive and finite (elastic modes only)")
    mat = make_material("shell-radiation-surface", rho=1.0, E=1.0, nu=0.0)
    return ModalModel(material=mat, order=1, frequencies_hz=omega / (2 * np.pi), surface_nodes=Vt,
                      surface_faces=Ft, shapes=shapes, xi=np.zeros(len(omega)), mass=0.0, com=np.zeros(3),
                      inertia=np.zeros((3, 3)), volume=0.0,
                      meta={"shell_radiation_surface": True,
                            "acoustic_thickness": None if thickness is None else float(thickness)},
                      inputs_hash=inputs_hash)


# ---- BEM -------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def regular_quadrature(order: int):
    """bempp-cl's regular quadrature order set to ``order`` for the solves inside (restored after)."""
    from ...transfer import bem
    q = bem._api().GLOBAL_PARAMETERS.quadrature
    before = q.regular
    q.regular = int(order)
    try:
        yield
    finally:
        q.regular = before


def _levels(nf0: int, h0: float, h_mid: float, k: float, thickness: float, settings) -> tuple[int, bool]:
    """Midpoint subdivisions of the thickened surface (nf0 triangles, longest edge h0) for wavenumber k: enough
    for the wavelength (elements per wavelength) and for the wall (longest mid-surface edge h_mid <= t /
    GAP_RATIO), within max_faces; (levels, capped)."""
    need_w = 0
    while 2 * np.pi / max(k, 1e-300) / (h0 / 2**need_w) < settings.per_wavelength:
        need_w += 1
    need_t = 0
    while h_mid / 2**need_t > thickness / GAP_RATIO * (1 + 1e-9):
        need_t += 1
    need = max(need_w, need_t)
    levels = need
    while levels > 0 and nf0 * 4**levels > settings.max_faces:
        levels -= 1
    return levels, levels < need


def solve_shell_mode(task: dict) -> dict:
    """BEM solve and FFAT fit of one mode on the thickened surface (module docstring); the result has the keys of
    :func:`impactsound.transfer.precompute.solve_mode`, so :func:`~impactsound.transfer.precompute.assemble`
    packs it into an ordinary transfer asset. task: index, vertices, faces (unrefined thickened surface), u
    (nv, 3), omega [rad/s], r_bar [m], thickness [m] (None: a closed mid-surface, CHIEF), h_mid (longest
    mid-surface edge [m]), order (bempp-cl regular quadrature), settings (TransferSettings as a dict)."""
    import numba

    from ...parallel import default_threads, single_threaded_blas
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(default_threads(), numba.config.NUMBA_NUM_THREADS)))
    try:
        with single_threaded_blas(), regular_quadrature(int(task["order"])):
            return _solve(task)
    finally:
        numba.set_num_threads(before)


def _solve(task: dict) -> dict:
    from ...transfer import bem
    from ...transfer.precompute import TransferSettings, face_normal_data, fit_maps, subdivide
    t_start = time.perf_counter()
    s = TransferSettings(**task["settings"])
    v, f, u = task["vertices"], task["faces"], np.asarray(task["u"])[None]
    omega = float(task["omega"])
    k = omega / s.c
    if task["thickness"] is None:                   # a closed mid-surface, radiating from its outside only
        from ...transfer.precompute import refinement
        levels, capped, _ = refinement(v, f, k, s)
        method = "chief"
    else:
        t = float(task["thickness"])
        levels, capped = _levels(len(f), bem.max_edge(v, f), float(task["h_mid"]), k, t, s)
        method = "plain" if k * t <= 0.5 * np.pi else "burton-miller"
    for _ in range(levels):
        v, f, u = subdivide(v, f, u)
    g = s.rho * omega**2 * face_normal_data(v, f, u[0])                      # dp/dn per unit q
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", bem.BemFallbackWarning)
        sol = bem.solve_neumann(v, f, k, g, method=method, check=False, backend=s.backend)
    if any(issubclass(w.category, bem.BemFallbackWarning) for w in caught):
        method = "burton-miller (CHIEF fallback)"
    t_bem = time.perf_counter() - t_start
    psis, T, errs = fit_maps(sol, k, float(task["r_bar"]), s.terms, int(task["index"]))
    return {"index": int(task["index"]), "psi": psis[-1].reshape(s.terms, T, 2 * T).astype(np.complex64),
            "bem_p": sol.p.astype(np.complex64), "bem_g": sol.g.astype(np.complex64), "levels": int(levels),
            "k": k, "T": T, "faces": int(len(f)), "capped": bool(capped), "residual": sol.residual,
            "holdout_error": np.asarray(errs), "epw": bem.elements_per_wavelength(v, f, k), "method": method,
            "seconds_bem": t_bem, "seconds": time.perf_counter() - t_start}


# ---- the transfer of a shell -------------------------------------------------------------------------------------
@dataclass
class ShellTransfer:
    """BEM FFAT transfer of a shell's first modes (body frame of the mid-surface given).

    Attributes
    ----------
    model : TransferModel
        The FFAT maps (and BEM surface solutions for points inside the first FFAT shell); per unit modal
        amplitude, e^{-i w t}.
    omega : ndarray, shape (n,)
        Angular frequencies [rad/s] of the modes it covers (the first n of the shell's).
    thickness : float or None
        Acoustic thickness used [m]; None for a closed mid-surface (radiating from its outside).
    c, rho : float
        Air the solves used [m/s], [kg/m^3].
    coarse : bool
        Whether the modes were radiated through a coarser surface (module docstring).
    info : dict
        Per-mode BEM faces, subdivision levels, capped flags, held-out FFAT errors, solver method; cache path.
    """

    model: object
    omega: np.ndarray
    thickness: float | None
    c: float
    rho: float
    coarse: bool = False
    info: dict = field(default_factory=dict)

    @property
    def n_modes(self) -> int:
        return int(len(self.omega))

    def pressure(self, points, modes=None) -> np.ndarray:
        """Complex pressure (n, len(modes)) per unit modal AMPLITUDE at body-frame points [Pa], e^{-i w t}."""
        return self.model.evaluate(np.asarray(points, np.float64).reshape(-1, 3), modes)

    def transfer(self, points, c: float | None = None, rho: float | None = None) -> np.ndarray:
        """Complex (n, n_modes) pressure per unit modal ACCELERATION at body-frame points, bulk delay e^{ik|x|}
        removed: the convention of :meth:`ShellRadiator.transfer` (module docstring).

        ``c`` must be the speed of sound the maps were computed with (None: that one); the pressure is
        proportional to ``rho`` (None: the solves' density)."""
        if c is not None and abs(float(c) / self.c - 1) > 1e-9:
            raise InputError(f"shell FFAT transfer was computed for c = {self.c:g} m/s, asked for c = {c:g} m/s; "
                             "recompute it for this air")
        P = np.asarray(points, np.float64).reshape(-1, 3)
        if not np.isfinite(P).all():
            raise InputError("shell FFAT transfer: listener positions must be finite")
        k = self.omega / self.c
        r = np.sqrt((P**2).sum(axis=1))
        A = -self.pressure(P) * np.exp(-1j * r[:, None] * k[None, :]) / self.omega[None, :] ** 2
        if rho is not None:
            A = A * (float(rho) / self.rho)
        return A


def shell_transfer(vertices, faces, U, omega, *, acoustic_thickness: float | None = None, air=None,
                   max_modes: int = 20, max_faces: int = MAX_FACES, coarse=None, terms: int = 4,
                   progress=None) -> ShellTransfer:
    """BEM FFAT transfer of a thin shell's first modes, from the cache or computed (module docstring).

    Parameters
    ----------
    vertices : array_like, shape (Nv, 3)
        Mid-surface [m] in the body frame (the FFAT expansion is about its origin: use the centre of mass).
    faces : array_like, shape (Nf, 3)
        Its consistently oriented triangles (open or closed).
    U : array_like, shape (3 Nv, r)
        Mass-normalised mode shapes [1/sqrt(kg)] (fem/shell.py :func:`shell_modes`).
    omega : array_like, shape (r,)
        Their angular frequencies [rad/s].
    acoustic_thickness : float, optional
        Wall thickness t of the radiation surface [m] (default :func:`default_thickness`); not used for a closed
        mid-surface (module docstring).
    air : Air, optional
        c and rho (default 343.2 m/s, 1.2041 kg/m^3).
    max_modes : int, optional
        Modes given maps (the first ones).
    max_faces : int, optional
        BEM triangle budget (the thickened surface and its subdivisions).
    coarse : tuple (vertices, faces), optional
        A coarser surface of the same shape, same frame, to radiate through (the modes are interpolated onto it
        at closest points). Needed when the thickened mid-surface exceeds ``max_faces``.
    terms : int, optional
        FFAT expansion terms (1..4).
    progress : callable, optional
        progress(fraction) after each mode.

    Returns
    -------
    ShellTransfer

    Raises
    ------
    InputError
        Bad shapes or settings, or a surface over budget without ``coarse``.
    MeshError
        A thickened sheet that folds over.
    """
    from ...transfer import bem
    from ...transfer.precompute import TransferModel, TransferSettings, assemble, model_surface
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    omega = np.asarray(omega, np.float64).ravel()
    U = np.asarray(U, np.float64)
    _mode_field(U, len(V))
    if U.shape[1] != len(omega):
        raise InputError(f"shell FFAT: {len(omega)} frequencies for {U.shape[1]} mode shapes")
    if int(max_modes) < 1:
        raise InputError(f"shell FFAT: max_modes = {max_modes} must be >= 1")
    n = min(len(omega), int(max_modes))
    if n == 0:
        raise InputError("shell FFAT: no modes to radiate")
    c = float(air.c) if air is not None else AIR_C
    rho = float(air.rho) if air is not None else AIR_RHO
    settings = TransferSettings(terms=int(terms), max_modes=n, max_faces=int(max_faces), c=c, rho=rho)
    settings.check()
    U = U[:, :n]
    omega = omega[:n]
    if coarse is not None:
        Vc = np.asarray(coarse[0], np.float64)
        Fc = np.asarray(coarse[1], np.int64)
        Ur = closest_point_shapes(V, F, U, Vc)
    else:
        Vc, Fc, Ur = V, F, U
    from ...scene.shell_body import boundary_edges
    closed = len(boundary_edges(Fc)) == 0
    nf = len(Fc) if closed else thickened_face_count(Fc)
    if nf > settings.max_faces:
        raise InputError(f"shell FFAT: the radiation surface has {nf} triangles, over max_faces = "
                         f"{settings.max_faces} for a dense BEM; pass coarse = (vertices, faces) of a coarser "
                         "surface of the same shape (e.g. coarse_builtin for a built-in shell) or raise max_faces")
    if closed:
        t = None                                    # module docstring: the outside of a closed shell
    elif acoustic_thickness is None:
        t = default_thickness(Vc, Fc, settings.max_faces)
    else:
        t = float(acoustic_thickness)
    h = content_hash("shell_ffat_transfer", CODE_VERSION, V, F, U, omega,
                     None if coarse is None else [Vc, Fc], t, QUADRATURE_ORDER, GAP_RATIO,
                     asdict(settings))
    model = shell_modal_model(Vc, Fc, Ur, omega, t, inputs_hash=h)
    path = cache_dir() / f"shell-ffat-{h[:32]}.h5"
    bem_order = 4 if closed else QUADRATURE_ORDER            # bempp-cl's default where no wall is thin
    info = {"path": str(path), "acoustic_thickness": t, "closed": closed, "quadrature_order": bem_order,
            "surface_faces": nf, "coarse": coarse is not None}
    try:
        tm = TransferModel.load(path, model)
    except AssetError:
        tm = None
    if tm is None:
        v, f, shapes = model_surface(model)
        bem.check_surface(v, f, name="closed shell surface" if closed else "thickened shell surface")
        r_bar = float(np.sqrt((v**2).sum(axis=1)).max())
        ckpt = path.with_suffix(".modes")           # finished modes, so an interrupted run resumes
        ckpt.mkdir(parents=True, exist_ok=True)
        results = {}
        for j in range(n):
            results[j] = _read_mode(ckpt / f"mode_{j:04d}.h5", content_hash(h, "mode", j))
            if results[j] is not None:
                continue
            task = {"index": j, "vertices": v, "faces": f, "u": shapes[j], "omega": float(omega[j]),
                    "r_bar": r_bar, "thickness": t, "h_mid": _max_edge(Vc, Fc),
                    "order": bem_order,
                    "settings": asdict(settings)}
            results[j] = solve_shell_mode(task)
            _write_mode(ckpt / f"mode_{j:04d}.h5", results[j], content_hash(h, "mode", j))
            if results[j]["capped"]:
                warnings.warn(f"shell FFAT: mode {j} ({omega[j] / (2 * np.pi):.0f} Hz) is solved on "
                              f"{results[j]['faces']} triangles (max_faces = {settings.max_faces}), fewer than "
                              "its wavelength or the wall thickness needs: its transfer is less accurate",
                              stacklevel=2)
            if progress is not None:
                progress((j + 1) / n)
        asset = assemble(results, n, h, model, settings, r_bar, v, f)
        asset.meta["shell"] = {"acoustic_thickness": t, "closed": closed, "quadrature_order": bem_order,
                               "gap_ratio": GAP_RATIO, "coarse": coarse is not None, "code_version": CODE_VERSION,
                               "methods": [results[j]["method"] for j in range(n)],
                               "faces": [int(results[j]["faces"]) for j in range(n)]}
        write_asset(path, asset)                   # (no wall-clock times inside: identical runs, identical files)
        import shutil
        shutil.rmtree(ckpt, ignore_errors=True)
        tm = TransferModel.load(path, model)
        info["seconds"] = [results[j].get("seconds") for j in range(n)]
    sh = tm.meta.get("shell", {})
    info.update(faces=sh.get("faces"), holdout_error=np.asarray(tm.holdout_error).tolist(),
                methods=sh.get("methods"))
    return ShellTransfer(model=tm, omega=omega, thickness=t, c=c, rho=rho, coarse=coarse is not None, info=info)


MODE_KIND = "shell_ffat_mode"
_MODE_ARRAYS = ("psi", "holdout_error", "bem_p", "bem_g")
_MODE_META = ("index", "k", "T", "faces", "capped", "residual", "epw", "levels", "method")


def _write_mode(path, res: dict, h: str) -> None:
    write_asset(path, Asset(kind=MODE_KIND, arrays={k: res[k] for k in _MODE_ARRAYS},
                            meta={k: res[k] for k in _MODE_META}, inputs_hash=h))


def _read_mode(path, h: str):
    """A finished mode's checkpoint, or None when missing, stale or unreadable."""
    if not path.is_file():
        return None
    try:
        a = read_asset(path, MODE_KIND, inputs_hash=h)
    except AssetError:
        return None
    r = dict(a.meta)
    r.update({k: a.arrays[k] for k in _MODE_ARRAYS})
    return r


def acceleration_transfer(tm, points, omega, c: float = AIR_C) -> np.ndarray:
    """A :class:`~impactsound.transfer.precompute.TransferModel`'s pressure per unit modal acceleration with the
    bulk delay removed (the convention of :meth:`ShellRadiator.transfer`) at body-frame points: (n, len(omega)),
    for its first len(omega) modes of angular frequencies ``omega`` [rad/s]."""
    omega = np.asarray(omega, np.float64).ravel()
    P = np.asarray(points, np.float64).reshape(-1, 3)
    r = np.sqrt((P**2).sum(axis=1))
    p = tm.evaluate(P, np.arange(len(omega)))
    return -p * np.exp(-1j * r[:, None] * (omega / float(c))[None, :]) / omega[None, :] ** 2
