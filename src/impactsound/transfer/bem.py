"""Exterior Helmholtz boundary element solve for the acoustic transfer of one vibration mode.

Problem: the acoustic transfer of a mode (James, Barbic & Pai 2006, "Precomputed Acoustic Transfer"; Chadwick,
An & James 2009, "Harmonic Shells", Appendix A, eq. 18). The paper writes it in the time convention e^{+i w t},
dp/dn = -i w rho v_n with v_n = i w (n . u); the package uses e^{-i w t} throughout (its choice; the other
convention is the complex conjugate, magnitudes agree), where dp/dn = +i w rho v_n with v_n = -i w (n . u) gives
the same Neumann data:

    (lap + k^2) p = 0 outside the closed surface S,   k = w / c,   outgoing (Sommerfeld) at infinity,
    dp/dn = rho w^2 (n . u)        on S, n the outward normal (into the air), u the mode's displacement.

Green's function G(x, y) = e^{ik|x-y|} / (4 pi |x-y|). With bempp-cl's operators (V single layer, K double layer,
K' adjoint double layer, W hypersingular; its normals point into the exterior) the exterior Calderon identities are

    (1/2 I - K) p = -V g                         (boundary integral equation, fails at interior resonances)
    W p = -(1/2 I + K') g                        (its normal derivative, fails at other frequencies)

and the Burton-Miller combination (1/2 I - K + a W) p = -V g - a (1/2 I + K') g with a = i/k has a unique solution
at every k (Burton & Miller 1971: any coupling with Im a != 0).

Default (``method="chief"``, :func:`solve_neumann`): CHIEF (Schenck 1968), with a per-wavenumber Burton-Miller
fallback. The plain equation is augmented with rows 0 = (D p - S g)(x) at :func:`n_chief_points` interior points
(16 + 2 ceil((k a)^2), a the surface's radius about its vertex centroid; :func:`interior_points`), scaled to the
Galerkin rows, and solved in least squares (Householder QR); it needs no hypersingular operator (bempp-cl's Numba
one was measured erratic, 9-200 s at 1280 triangles). CHIEF needs interior points that avoid the nodal surfaces
of every interior eigenfunction, which cannot be guaranteed for thin objects: when the least-squares relative
residual exceeds :data:`CHIEF_RESIDUAL_TOL` (conflicting rows), a :class:`BemFallbackWarning` is issued and that
wavenumber alone is solved again with Burton-Miller (a = i/k), which must then reach :data:`RESIDUAL_TOL` or
raise :class:`SolverError`. ``method="burton-miller"`` uses Burton-Miller at every k; ``method="plain"`` the bare
equation (for tests).

Discretisation: Galerkin, p in continuous piecewise-linear functions (P1, needed by W), g piecewise constant per
triangle (DP0: n . u with the exact flat-face normal), dense assembly (meshes here have <= ~10^4 triangles).
The pressure anywhere outside follows from the representation formula p(x) = (D p)(x) - (S g)(x), evaluated by
our own compiled quadrature (``evaluate``) because bempp's potential operators build a dense points x dofs
matrix, and FFAT maps need ~10^5-10^6 points per mode.

bempp-cl compiles its Numba kernels on first use in each process (about a minute on 2 cores; measured in
bench/bench_bem.py); ``warm_up`` pays that once per worker process, never per mode.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import InputError, MeshError, SolverError

#: elements per wavelength required for an accurate solve (the usual boundary-element rule: at least ~6-8)
ELEMENTS_PER_WAVELENGTH = 6.0
#: relative residual above which a solve is reported as failed and never stored
RESIDUAL_TOL = 1e-6
#: the CHIEF system is overdetermined: its least-squares residual measures how consistent the extra rows are
CHIEF_RESIDUAL_TOL = 0.2

_bempp = None


def _api():
    """Import bempp-cl lazily (and quietly: it prints a note when gmsh is absent, which we never use)."""
    global _bempp
    if _bempp is None:
        import contextlib
        import io
        os.environ.setdefault("BEMPP_LOG_LEVEL", "error")
        os.environ.setdefault("PYOPENCL_COMPILER_OUTPUT", "0")      # (opencl backend) no compiler chatter
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import bempp_cl.api as api
        api.DEFAULT_DEVICE_INTERFACE = "numba"
        # bempp-cl makes a temporary folder at import (for its own plots and exports, which we never use) and
        # leaves it behind: remove it when this process ends
        tmp = getattr(api, "TMP_PATH", None)
        if tmp and os.path.isdir(tmp):
            import atexit
            import shutil
            atexit.register(shutil.rmtree, tmp, True)
        _bempp = api
    return _bempp


#: bempp-cl assembly backends. "numba" (default): no extra dependency, kernels compiled once per process (~1 min
#: on 2 cores). "opencl": ``pip install 'impactsound[opencl]'`` (pyopencl + PoCL's CPU driver); measured on the
#: 2-core machine (loaded): dense V, K, K' assembly 1.3-1.7x faster, hypersingular 4-80x, compilation ~2-7 s
#: per new mesh size instead of ~1 min per process (cached on disk by PoCL); matrices equal to 1e-13.
BACKENDS = ("numba", "opencl")


def use_backend(name: str) -> None:
    """Make ``name`` bempp-cl's assembly backend in this process.

    The OpenCL backend is used only after :func:`opencl_problem` found that it builds and runs a small solve in a
    separate process: whether PoCL's LLVM can compile bempp-cl's kernels depends on the host CPU, and a failure
    there can abort the whole interpreter (SIGABRT), which must never take a render or a test run with it.

    Parameters
    ----------
    name : str
        One of :data:`BACKENDS`.

    Raises
    ------
    InputError
        For an unknown name, or "opencl" where it does not work.
    """
    if name not in BACKENDS:
        raise InputError(f"BEM backend {name!r}: use one of {', '.join(BACKENDS)}")
    if name == "opencl":
        problem = opencl_problem()
        if problem is not None:
            raise InputError(f"BEM backend 'opencl' is not usable on this machine: {problem}; use the numba "
                             "backend (--backend numba, the default)")
    api = _api()
    api.DEFAULT_DEVICE_INTERFACE = name


_OPENCL_PROBE: list = []          # [reason or None] once probed in this process

#: the probe: a tiny OpenCL solve checked against the numba backend, run in its own interpreter
_PROBE_SCRIPT = """
import numpy as np, trimesh
from impactsound.transfer import bem
api = bem._api()
if not getattr(api, "CPU_OPENCL_DRIVER_FOUND", False):
    raise SystemExit("no OpenCL CPU driver found (pip install 'impactsound[opencl]' installs PoCL's)")
bem._OPENCL_PROBE.append(None)              # this process is the probe: let use_backend take opencl
s = trimesh.creation.icosphere(subdivisions=1, radius=1.0)
v, f = np.asarray(s.vertices), np.asarray(s.faces)
a = bem.solve_neumann(v, f, 1.0, np.ones(len(f)), method="plain", backend="opencl")
b = bem.solve_neumann(v, f, 1.0, np.ones(len(f)), method="plain", backend="numba")
err = float(np.abs(a.p - b.p).max() / np.abs(b.p).max())
if not err < 1e-8:
    raise SystemExit(f"its solution differs from the numba backend's by {err:.2g}")
print("ok")
"""


def opencl_problem(timeout: float = 600.0) -> str | None:
    """Whether bempp-cl's OpenCL backend works here, probed once per process in a subprocess (a native crash or
    abort there is reported, never inherited).

    Parameters
    ----------
    timeout : float, optional
        Seconds the probe solve may take.

    Returns
    -------
    str or None
        None when it works, else a one-line reason.
    """
    if _OPENCL_PROBE:
        return _OPENCL_PROBE[0]
    import importlib.util
    import signal
    import subprocess
    import sys
    if importlib.util.find_spec("pyopencl") is None:
        reason = "pyopencl is not installed (pip install 'impactsound[opencl]')"
    else:
        env = dict(os.environ, PYOPENCL_COMPILER_OUTPUT="0", BEMPP_LOG_LEVEL="error")
        try:
            r = subprocess.run([sys.executable, "-c", _PROBE_SCRIPT], capture_output=True, text=True,
                               timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            reason = f"the OpenCL probe solve did not finish in {timeout:g} s"
        else:
            if r.returncode == 0 and r.stdout.strip().endswith("ok"):
                reason = None
            else:
                lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
                # the most telling line: a Python exception or an LLVM/OpenCL error, else the last line
                why = next((ln for ln in reversed(lines) if ln.split(":")[0].endswith(("Error", "Exception"))),
                           next((ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()),
                                lines[-1] if lines else ""))[:300]
                if r.returncode < 0:
                    try:
                        sig = signal.Signals(-r.returncode).name
                    except ValueError:
                        sig = f"signal {-r.returncode}"
                    reason = f"a probe solve with it crashed ({sig}{': ' + why if why else ''})"
                else:
                    reason = f"a probe solve with it failed ({why or f'exit status {r.returncode}'})"
    _OPENCL_PROBE.append(reason)
    return reason


class BemFallbackWarning(UserWarning):
    """A CHIEF solve was inconsistent and Burton-Miller was used for that wavenumber."""


@dataclass
class BemSolution:
    """Surface solution of one exterior Neumann problem (SI units, e^{-i w t}).

    Attributes
    ----------
    vertices : ndarray, shape (nv, 3)
        BEM surface vertices [m].
    faces : ndarray, shape (nf, 3)
        Its triangles (outward counter-clockwise).
    k : float
        Wavenumber [1/m].
    p : ndarray of complex, shape (nv,)
        Surface pressure at the vertices [Pa] (P1).
    g : ndarray of complex, shape (nf,)
        Normal derivative dp/dn per face [Pa/m] (DP0).
    residual : float
        Relative residual of the dense solve.
    """

    vertices: np.ndarray
    faces: np.ndarray
    k: float
    p: np.ndarray
    g: np.ndarray
    residual: float

    def evaluate(self, points: np.ndarray) -> np.ndarray:
        """Exterior pressure at points (the module-level :func:`evaluate`).

        Parameters
        ----------
        points : ndarray, shape (n, 3)
            Points outside the surface [m].

        Returns
        -------
        ndarray of complex, shape (n,)
            p [Pa].
        """
        return evaluate(self, points)


def max_edge(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Longest triangle edge of a surface.

    Parameters
    ----------
    vertices : ndarray, shape (nv, 3)
        Positions [m].
    faces : ndarray, shape (nf, 3)
        Vertex indices per triangle.

    Returns
    -------
    float
        Edge length [m].
    """
    t = vertices[faces]
    e = np.concatenate([t[:, 1] - t[:, 0], t[:, 2] - t[:, 1], t[:, 0] - t[:, 2]])
    return float(np.sqrt((e**2).sum(axis=1)).max())


def elements_per_wavelength(vertices: np.ndarray, faces: np.ndarray, k: float) -> float:
    """Wavelength over the longest edge: how finely this surface resolves wavenumber k.

    Parameters
    ----------
    vertices, faces : ndarray
        The surface, as in :func:`max_edge`.
    k : float
        Wavenumber [1/m].

    Returns
    -------
    float
        2 pi / (k * longest edge) (dimensionless); compare with :data:`ELEMENTS_PER_WAVELENGTH`.
    """
    return float(2 * np.pi / max(k, 1e-300) / max_edge(vertices, faces))


def check_surface(vertices: np.ndarray, faces: np.ndarray, name: str = "BEM surface") -> None:
    """Check that a surface is closed, two-manifold and consistently outward, as the exterior representation
    formula assumes.

    Parameters
    ----------
    vertices : ndarray, shape (nv, 3)
        Surface points [m].
    faces : array_like
        Triangles, expected (nf, 3), outward counter-clockwise.
    name : str, optional
        Names the surface in messages.

    Raises
    ------
    MeshError
        If it is not (fewer than 4 triangles, NaN vertices, open or non-manifold edges, inconsistent or inward
        winding).
    """
    faces = np.asarray(faces, np.int64)
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) < 4:
        raise MeshError(f"{name}: needs (n, 3) triangles, got shape {faces.shape}")
    if not np.all(np.isfinite(vertices)):
        raise MeshError(f"{name}: vertex coordinates contain NaN or inf")
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    key = np.sort(e, axis=1)
    _, counts = np.unique(key, axis=0, return_counts=True)
    if np.any(counts != 2):
        bad = int((counts != 2).sum())
        raise MeshError(f"{name}: {bad} edges are not shared by exactly two triangles (open or non-manifold "
                        f"surface); repair it into a closed watertight surface")
    _, dcounts = np.unique(e, axis=0, return_counts=True)
    if np.any(dcounts != 1):
        raise MeshError(f"{name}: triangles are not consistently oriented; fix the winding (outward, "
                        f"counter-clockwise)")
    t = vertices[faces]
    vol = np.einsum("ij,ij->i", t[:, 0], np.cross(t[:, 1], t[:, 2])).sum() / 6.0
    if vol <= 0:
        raise MeshError(f"{name}: triangles wind inward (enclosed volume {vol:.3g} m^3); flip the faces")


def interior_points(vertices: np.ndarray, faces: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """n points strictly inside a closed surface, away from it (CHIEF points), reproducible for a seed.

    Inside test: the generalised winding number (sum of signed solid angles / 4 pi, Van Oosterom & Strackee
    1983), exact for closed surfaces; candidates closer to the surface than a fifth of their distance to the
    farthest interior candidate are dropped so a CHIEF row is never nearly singular.

    Parameters
    ----------
    vertices, faces : ndarray
        Closed, outward surface: positions (nv, 3) [m] and triangles (nf, 3).
    n : int
        Number of points.
    seed : int, optional
        Random seed.

    Returns
    -------
    ndarray, shape (n, 3)
        Interior points [m].

    Raises
    ------
    MeshError
        If fewer than ``n`` points could be placed.
    """
    rng = np.random.default_rng(seed)
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    tri = vertices[faces]
    out = []
    for _ in range(20):
        cand = lo + (hi - lo) * rng.random((max(8 * n, 256), 3))
        w = winding_number(tri, cand)
        inside = cand[w > 0.5]
        if len(inside):
            d = np.sqrt(((inside[:, None, :] - vertices[None, :, :]) ** 2).sum(-1)).min(axis=1)
            inside = inside[d > 0.2 * d.max()]
        out.extend(inside[: n - len(out)])
        if len(out) >= n:
            break
    if len(out) < n:
        raise MeshError("BEM surface: could not place interior (CHIEF) points; is the surface closed and "
                        "outward-oriented with a non-empty interior?")
    return np.asarray(out[:n])


def winding_number(tri: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Generalised winding number of points with respect to a triangle surface.

    Parameters
    ----------
    tri : ndarray, shape (nf, 3, 3)
        Triangle corner coordinates [m].
    points : ndarray, shape (n, 3)
        Query points [m].

    Returns
    -------
    ndarray, shape (n,)
        1 inside a closed outward surface, 0 outside.
    """
    w = np.zeros(len(points))
    for i0 in range(0, len(points), 64):                      # blocks of points bound the (64, nf, 3) temporaries
        a = tri[None, :, 0, :] - points[i0:i0 + 64, None, :]
        b = tri[None, :, 1, :] - points[i0:i0 + 64, None, :]
        c = tri[None, :, 2, :] - points[i0:i0 + 64, None, :]
        la, lb, lc = (np.linalg.norm(x, axis=2) for x in (a, b, c))
        num = np.einsum("pfi,pfi->pf", a, np.cross(b, c))
        den = (la * lb * lc + np.einsum("pfi,pfi->pf", a, b) * lc + np.einsum("pfi,pfi->pf", b, c) * la
               + np.einsum("pfi,pfi->pf", c, a) * lb)
        w[i0:i0 + 64] = 2 * np.arctan2(num, den).sum(axis=1) / (4 * np.pi)
    return w


def n_chief_points(k: float, radius: float) -> int:
    """Number of CHIEF points: enough that none of the interior eigenfunctions near k vanishes at all of them
    (their number grows like (k a)^2 on a surface of size a); 16 at low k.

    Parameters
    ----------
    k : float
        Wavenumber [1/m].
    radius : float
        Size a of the surface [m].

    Returns
    -------
    int
        16 + 2 ceil((k a)^2).
    """
    return int(16 + 2 * np.ceil((k * radius) ** 2))


def solve_neumann(vertices: np.ndarray, faces: np.ndarray, k: float, g: np.ndarray, *,
                  method: str = "chief", chief_points: np.ndarray | None = None,
                  check: bool = True, backend: str = "numba") -> BemSolution:
    """Solve the exterior Neumann problem for dp/dn = g (per face) at wavenumber k.

    Parameters
    ----------
    vertices : ndarray, shape (nv, 3)
        BEM surface vertices [m] (closed, outward).
    faces : ndarray, shape (nf, 3)
        Its triangles; ``g`` has one value per triangle.
    k : float
        Wavenumber [1/m], > 0.
    g : ndarray of complex, shape (nf,)
        Neumann data dp/dn per face [Pa/m].
    method : {"chief", "burton-miller", "plain"}, optional
        "chief" (default): the boundary integral equation plus CHIEF rows, least squares; if its relative
        residual exceeds :data:`CHIEF_RESIDUAL_TOL`, a :class:`BemFallbackWarning` is issued and this k is
        solved with "burton-miller" instead. "burton-miller": coupling a = i/k (needs bempp's hypersingular
        operator). "plain": the bare equation, which fails near interior resonances (for tests).
    chief_points : ndarray, shape (n, 3), optional
        Interior points for "chief" (default :func:`interior_points` with :func:`n_chief_points`).
    check : bool, optional
        Run :func:`check_surface` first.
    backend : str, optional
        bempp-cl assembly backend (:data:`BACKENDS`).

    Returns
    -------
    BemSolution

    Raises
    ------
    SolverError
        On a non-positive k, non-finite data or assembly, or a Burton-Miller or plain residual above
        :data:`RESIDUAL_TOL` (with the residual). A CHIEF residual above :data:`CHIEF_RESIDUAL_TOL`, or a
        non-finite one, never raises: it falls back to Burton-Miller.
    MeshError
        For a bad surface.
    ValueError
        For a wrong number of g values or an unknown method.
    """
    vertices = np.ascontiguousarray(vertices, np.float64)
    faces = np.ascontiguousarray(faces, np.int64)
    g = np.asarray(g, np.complex128).ravel()
    if len(g) != len(faces):
        raise ValueError(f"g has {len(g)} values for {len(faces)} faces")
    if not np.isfinite(k) or k <= 0:
        raise SolverError(f"BEM wavenumber k = {k} 1/m is not positive and finite")
    if not np.all(np.isfinite(g)):
        raise SolverError("BEM Neumann data contains NaN or inf")
    if method not in ("chief", "burton-miller", "plain"):
        raise ValueError(f"unknown BEM method {method!r}")
    if check:
        check_surface(vertices, faces)
    use_backend(backend)
    api = _api()
    H = api.operators.boundary.helmholtz
    grid = api.Grid(vertices.T.copy(), faces.T.astype(np.uint32).copy())
    p1 = api.function_space(grid, "P", 1)
    dp0 = api.function_space(grid, "DP", 0)
    # our face/vertex numbering must be bempp's (g is given per our face, p is returned per our vertex)
    if not (np.array_equal(np.asarray(grid.elements).T, faces) and np.allclose(np.asarray(grid.vertices).T,
                                                                                vertices)
            and np.array_equal(np.asarray(dp0.local2global).ravel(), np.arange(len(faces)))):
        raise RuntimeError("bempp-cl renumbered the grid; the BEM data mapping needs updating")

    def dense(op):
        return np.asarray(op.weak_form().to_dense())

    # (1/2 I - K) p = -V g, Galerkin-tested with P1 (rows = P1 test functions)
    A = 0.5 * dense(api.operators.boundary.sparse.identity(p1, p1, p1)) - dense(H.double_layer(p1, p1, p1, k))
    b = -(dense(H.single_layer(dp0, p1, p1, k)) @ g)
    if method == "burton-miller":
        a = 1j / k
        A += a * dense(H.hypersingular(p1, p1, p1, k))
        I_dp = dense(api.operators.boundary.sparse.identity(dp0, p1, p1))
        b -= a * ((0.5 * I_dp + dense(H.adjoint_double_layer(dp0, p1, p1, k))) @ g)
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        raise SolverError(f"BEM assembly at k = {k:.6g} 1/m produced NaN/inf (degenerate triangles?)")
    p_map = _p1_dof_to_vertex(p1, len(vertices))
    if method == "chief":
        # The representation formula gives 0 = (D p)(x) - (S g)(x) at interior points x: extra rows that rule out
        # the interior-resonance null space of (1/2 I - K) (Schenck 1968). Rows scaled to the Galerkin rows.
        xc = interior_points(vertices, faces, n_chief_points(k, _radius(vertices))) if chief_points is None \
            else np.asarray(chief_points, np.float64).reshape(-1, 3)
        Dc, Sc = _potential_matrices(vertices, faces, k, xc)            # (nc, nv), (nc, nf)
        Dc = Dc[:, p_map]                                                # columns in bempp dof order
        scale = np.linalg.norm(A, axis=1).mean() / max(np.linalg.norm(Dc, axis=1).mean(), 1e-300)
        A = np.vstack([A, scale * Dc])
        b = np.concatenate([b, scale * (Sc @ g)])
        # least squares by Householder QR (numpy's SVD-based lstsq was measured 10-100x slower here, erratically)
        import scipy.linalg as sla
        Q, Rm = sla.qr(A, mode="economic", check_finite=False)
        x = sla.solve_triangular(Rm, Q.conj().T @ b, check_finite=False)
    else:
        x = np.linalg.solve(A, b)
    res = float(np.linalg.norm(A @ x - b) / max(np.linalg.norm(b), 1e-300))
    tol = RESIDUAL_TOL if method != "chief" else CHIEF_RESIDUAL_TOL
    if method == "chief" and not (np.isfinite(res) and res <= tol):
        # CHIEF rows conflict when the interior points cannot avoid every interior eigenfunction's nodal surface
        # (thin objects: a 6 mm plate gave 0.27 at k = 72.5 1/m); Burton-Miller has a unique solution at every k
        warnings.warn(f"BEM at k = {k:.6g} 1/m: CHIEF least-squares residual {res:.3g} > {tol:g}; solved with "
                      "Burton-Miller instead", BemFallbackWarning)
        return solve_neumann(vertices, faces, k, g, method="burton-miller", check=False, backend=backend)
    if not np.isfinite(res) or res > tol:
        raise SolverError(f"BEM solve at k = {k:.6g} 1/m did not converge: relative residual {res:.3g} > "
                          f"{tol:g}; not stored (refine the surface mesh, or check it for degenerate triangles)")
    p = np.zeros(len(vertices), np.complex128)
    p[p_map] = x
    return BemSolution(vertices=vertices, faces=faces, k=float(k), p=p, g=g, residual=res)


def _radius(vertices):
    c = vertices.mean(axis=0)
    return float(np.sqrt(((vertices - c) ** 2).sum(axis=1)).max())


def _potential_matrices(vertices, faces, k, points):
    """Dense double- and single-layer potential matrices at points: D (n, nv) on P1 vertex values, S (n, nf)
    on per-face constants, with the same quadrature as :func:`evaluate`."""
    nv, nf = len(vertices), len(faces)
    D = np.empty((len(points), nv), np.complex128)
    S = np.empty((len(points), nf), np.complex128)
    # columns by linearity of the representation formula: unit data one at a time would be nv + nf solves;
    # instead expand per quadrature point and scatter (nq = 6 nf points).
    y, n, w = _quad_geometry(vertices, faces)
    r = points[:, None, :] - y[None, :, :]                                   # (n, nq, 3)
    d = np.sqrt((r**2).sum(-1))
    G = np.exp(1j * k * d) / (4 * np.pi * d)
    dG = G * (1 - 1j * k * d) * np.einsum("pqc,qc->pq", r, n) / d**2
    nq = len(_QW)
    Sq = (G * w).reshape(len(points), nf, nq)
    S[:] = Sq.sum(axis=2)
    Dq = (dG * w).reshape(len(points), nf, nq)                               # weight of each face corner:
    D[:] = 0
    for a in range(3):                                                       # P1 hat of corner a = lambda_a
        np.add.at(D.T, faces[:, a], (Dq @ _QPTS[:, a]).T)
    return D, S


def _quad_geometry(vertices, faces):
    t = vertices[faces]                                                     # (nf, 3, 3)
    cr = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    area = 0.5 * np.linalg.norm(cr, axis=1)
    nrm = cr / (2 * area)[:, None]
    y = np.einsum("qa,fac->fqc", _QPTS, t).reshape(-1, 3)
    w = (area[:, None] * _QW[None, :]).reshape(-1)
    n = np.repeat(nrm, len(_QW), axis=0)
    return np.ascontiguousarray(y), np.ascontiguousarray(n), w


def _p1_dof_to_vertex(space, nv: int) -> np.ndarray:
    """Vertex index of each P1 dof in bempp's numbering (bempp keeps our vertex order, checked by the caller)."""
    elems = np.asarray(space.grid.elements).T                # (nf, 3): vertex per slot
    l2g = np.asarray(space.local2global)                     # (nf, 3): dof per slot
    m = np.full(int(l2g.max()) + 1, -1, np.int64)
    m[l2g.ravel()] = elems.ravel()
    if np.any(m < 0):
        raise RuntimeError("bempp-cl P1 dofs do not map onto vertices")
    return m


def warm_up(backend: str = "numba") -> None:
    """Compile bempp-cl's kernels once in this process (a tiny solve), so no mode pays the JIT cost (the
    opencl backend compiles per mesh size; this covers only its own).

    Parameters
    ----------
    backend : str, optional
        bempp-cl assembly backend (:data:`BACKENDS`).
    """
    import trimesh
    s = trimesh.creation.icosphere(subdivisions=1, radius=1.0)
    solve_neumann(np.asarray(s.vertices), np.asarray(s.faces), 1.0, np.ones(len(s.faces)), backend=backend)


# ---- representation formula --------------------------------------------------------------------------------
# Dunavant degree-4 rule (6 points) on the reference triangle: barycentric points and weights (sum 1). Points
# here are >= 2.5 bounding radii away (FFAT shells) or on held-out spheres, so the integrand is smooth.
_QA1, _QB1, _QW1 = 0.445948490915965, 0.108103018168070, 0.223381589678011
_QA2, _QB2, _QW2 = 0.091576213509771, 0.816847572980459, 0.109951743655322
_QPTS = np.array([[_QB1, _QA1, _QA1], [_QA1, _QB1, _QA1], [_QA1, _QA1, _QB1],
                  [_QB2, _QA2, _QA2], [_QA2, _QB2, _QA2], [_QA2, _QA2, _QB2]])
_QW = np.array([_QW1] * 3 + [_QW2] * 3)


def quadrature(sol: BemSolution):
    """The representation formula's quadrature on a solution's surface (6-point Dunavant rule per triangle).

    Parameters
    ----------
    sol : BemSolution

    Returns
    -------
    y : ndarray, shape (nq, 3)
        Quadrature points [m], nq = 6 nf.
    n : ndarray, shape (nq, 3)
        Outward unit normals there.
    wp : ndarray of complex, shape (nq,)
        Weight [m^2] times surface pressure p(y) [Pa].
    wg : ndarray of complex, shape (nq,)
        Weight [m^2] times dp/dn(y) [Pa/m].
    """
    y, n, w = _quad_geometry(sol.vertices, sol.faces)
    wp = (sol.p[sol.faces] @ _QPTS.T).reshape(-1) * w
    wg = np.repeat(sol.g, len(_QW)) * w
    return y, n, wp, wg


# Cody & Waite (1980) range reduction by pi/2 in two parts, then Taylor polynomials on [-pi/4, pi/4] (terms to
# r^15 / r^16: error < 2e-15 for arguments up to ~1e4): unlike libm's sin/cos, this vectorises, and it makes the
# representation-formula kernel below ~13x faster (1.1e7 -> 1.4e8 pairs/s measured) at the same accuracy.
_PIO2_HI = 1.57079632673412561417e+00
_PIO2_LO = 6.07710050650619224932e-11


@nb.njit(inline="always", fastmath=True)
def _sincos(x):
    """(sin x, cos x) for 0 <= x <~ 1e4 (see above)."""
    q = math.floor(x * (2.0 / math.pi) + 0.5)
    r = (x - q * _PIO2_HI) - q * _PIO2_LO
    r2 = r * r
    s = r + r * r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (
        -1.0 / 39916800 + r2 * (1.0 / 6227020800 + r2 * (-1.0 / 1307674368000)))))))
    c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (
        -1.0 / 3628800 + r2 * (1.0 / 479001600 + r2 * (-1.0 / 87178291200)))))))
    m = q - 4.0 * math.floor(q * 0.25)                       # quadrant 0..3: sin(r + m pi/2), cos(r + m pi/2)
    sn = s if m == 0.0 else (c if m == 1.0 else (-s if m == 2.0 else -c))
    cs = c if m == 0.0 else (-s if m == 1.0 else (-c if m == 2.0 else s))
    return sn, cs


@nb.njit(parallel=True, cache=True, fastmath=True)
def _represent_soa(points, yx, yy, yz, nx, ny, nz, apr, api, agr, agi, k, outr, outi):
    """out[i] = sum_q wp_q dG/dn_y(x_i, y_q) - wg_q G(x_i, y_q), G = e^{ikr}/(4 pi r), on split arrays (the
    inner loop vectorises; each point's sum runs on one thread, so the result does not depend on the thread
    count)."""
    inv4pi = 1.0 / (4.0 * np.pi)
    for i in nb.prange(points.shape[0]):
        x0, x1, x2 = points[i, 0], points[i, 1], points[i, 2]
        sr = 0.0
        si = 0.0
        for q in range(yx.shape[0]):
            d0 = x0 - yx[q]
            d1 = x1 - yy[q]
            d2 = x2 - yz[q]
            r2 = d0 * d0 + d1 * d1 + d2 * d2
            ir = 1.0 / np.sqrt(r2)
            kr = k * (r2 * ir)
            sn, cs = _sincos(kr)
            c = cs * ir
            s_ = sn * ir
            # G = (c + i s) / (4 pi); dG/dn_y = G (1 - i k r) (n . (x - y)) / r^2
            nd = (nx[q] * d0 + ny[q] * d1 + nz[q] * d2) * ir * ir
            dr = (c + s_ * kr) * nd
            di = (s_ - c * kr) * nd
            sr += apr[q] * dr - api[q] * di - (agr[q] * c - agi[q] * s_)
            si += apr[q] * di + api[q] * dr - (agr[q] * s_ + agi[q] * c)
        outr[i] = sr * inv4pi
        outi[i] = si * inv4pi


def _represent(points, y, n, wp, wg, k, out):
    """out[i] = sum_q wp_q dG/dn_y(x_i, y_q) - wg_q G(x_i, y_q): the representation formula by quadrature,
    points (m, 3), quadrature points y (nq, 3) with normals n (nq, 3), weights times data wp, wg (nq,) complex."""
    y = np.asarray(y, np.float64)
    n = np.asarray(n, np.float64)
    wp = np.asarray(wp, np.complex128)
    wg = np.asarray(wg, np.complex128)
    col = [np.ascontiguousarray(a) for a in (y[:, 0], y[:, 1], y[:, 2], n[:, 0], n[:, 1], n[:, 2],
                                               wp.real, wp.imag, wg.real, wg.imag)]
    outr = np.empty(len(points))
    outi = np.empty(len(points))
    _represent_soa(np.ascontiguousarray(points, np.float64), *col, float(k), outr, outi)
    out[:] = outr + 1j * outi


def evaluate(sol: BemSolution, points: np.ndarray) -> np.ndarray:
    """Pressure at exterior points from the representation formula p = D p_S - S g (by quadrature).

    Parameters
    ----------
    sol : BemSolution
        The surface solution.
    points : array_like, shape (n, 3)
        Points outside the surface [m] (the quadrature assumes they are not close to it).

    Returns
    -------
    ndarray of complex, shape (n,)
        p [Pa], e^{-i w t}.
    """
    pts = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
    y, n, wp, wg = quadrature(sol)
    out = np.empty(len(pts), np.complex128)
    _represent(pts, y, n, wp, wg, float(sol.k), out)
    return out
