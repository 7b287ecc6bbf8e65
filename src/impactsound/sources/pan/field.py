"""PAN field representation and its least-squares fit (Chadwick, Zheng & James 2012, "Precomputed Acceleration
Noise for Improved Rigid-Body Sound", sec. 4.2, eqs. 20-25).

Six fields (paper sec. 4.1, eqs. 13-16, driven by the pulse of eq. 17): i = 0, 1, 2 translation along the body
axes e_x, e_y, e_z (response to a(t) = psi(t; h) e_i, [Pa per m/s^2]); i = 3, 4, 5 rotation about e_x, e_y, e_z
(response to alpha(t) = psi(t; h) e_{i-3}, [Pa per rad/s^2]). The pulse psi(t; h) is centred at t = 0 (support
[-2h, 2h]), so field time 0 is the pulse centre.

Directions (body frame, about the centre of mass x0 = origin). The paper uses uniform 40 x 80 or 5 x 10 grids of
(theta, phi) with linear interpolation in angle; the cell-centred layout and the pole rows below are the package's
choices. Uniform cell-centred grid:
    theta_a = (a + 1/2) pi / n_theta,  a = 0..n_theta-1     (polar angle from +z, open interval (0, pi))
    phi_b   = b 2 pi / n_phi,          b = 0..n_phi-1       (azimuth from +x towards +y, periodic [0, 2 pi))
    d(theta, phi) = (sin theta cos phi, sin theta sin phi, cos theta)
Bilinear interpolation in (theta, phi), periodic in phi, on the grid padded with a row at each pole
(:func:`with_poles`): within half a cell of a pole the value is linear in theta between the pole value and the
first (last) row. Near a pole a smooth field is a + (b cos phi + c sin phi) theta + d theta^2 + ...; the pole
value a is the phi-mean of the first two rows extrapolated quadratically in theta (the m = 0 part is even in
theta), and the m >= 1 parts vanish there, so the interpolation is continuous across the pole, single-valued at
it, and odd fields (sin theta cos phi of an x-translation) stay within the bilinear error in the cap. (Holding
the first row constant over the cap, the first rule, read the z-dipole cos theta on the axis as cos(theta_0):
4.9 % low on a 5 x 10 grid, and an x-dipole as sin(theta_0) = 31 % of its peak; continuing the interpolation
across the pole, the second, fixed the latter only. With the pole rows: 0.36 % and 0 on 5 x 10.) Error bound
of bilinear interpolation away from the caps: |f - f_interp| <= (dtheta^2/8) max|f_thth| + (dphi^2/8)
max|f_phph| (dtheta = pi/n_theta, dphi = 2 pi/n_phi).

Radial/temporal representation per direction (paper eqs. 20-22):
    p(R, theta, phi, t) = sum_{k=1..N} R^{-k} q_k(theta, phi, t - R/c),
    q_k(tau) = sum_j q_k^j psi(tau - tau0 - j dt_q; dt_q)
Fit (paper eqs. 23-25): pressures sampled at M radii R_i (paper: R_1 = 2 R_b, R_i = kappa^{i-1} R_1,
kappa = 2^{1/4}, M = 5; :func:`shell_radii`) at times t_n = t_start + n dt. Row (i, n) of the least-squares
system reads sum_{k,j} R_i^{-k} psi(t_n - R_i/c - tau0 - j dt_q; dt_q) q_k^j = p(R_i, t_n). Its matrix depends
only on the radii, c and the time sampling, so one factorisation serves every field and direction (as the paper
notes). The paper solves it by truncated SVD; here banded Cholesky of the normal equations (the matrix is banded
in j) with one refinement step, or a dense truncated SVD when the system is poorly determined
(:func:`fit_operator`).

The package's further choices: only rows whose retarded time tau = t_n - R_i/c lies in [t_start - R_1/c, t_end - R_M/c]
are used, the window that every radius observes, so each retarded time is fitted from all M radii (the data
must be zero before t_start, e.g. t_start = -2h when the FDTD starts with the pulse). Coefficients cover that
window plus the pulses overlapping its ends. Unknowns are scaled as q_k^j / R_1^k so the columns are O(1) and
the conditioning tests and the SVD cut-off ``rcond`` do not depend on units. Coefficients that no row observes
are zero (the minimum-norm choice); in the SVD fallback, singular values below rcond * s_max are dropped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse
from numba import njit

from ...assets.store import Asset, read_asset, write_asset
from ...errors import AssetError, InputError
from .pulse import psi_weights

N_FIELDS = 6
ASSET_KIND = "pan_field"
ASSET_KIND_VERSION = 1
#: paper values (sec. 4.2: kappa = 2^{1/4}, M = 5 radii, N = 2 terms)
KAPPA = 2.0 ** 0.25
N_RADII = 5
N_TERMS = 2
#: radial terms N of the series sum_k q_k(t - R/c) / R^k of own fields (precompute.plan_pan; the proxy soundbank
#: keeps the paper's N = 2, Chadwick, Zheng & James 2012, sec. 4.2). Measured on a rotated 20 x 12 x 7 mm steel
#: box (h = 36 us) against a direct FDTD run at 8 R_b in grid directions, the rms error of N = 1..5 was
#: 25/3.8/2.0/7.3/20 % (a_x), 45/9.5/2.7/13/42 % (alpha_x), 47/11/4.2/13/33 % (alpha_z): a third term takes up
#: the near-field 1/R^3 part that N = 2 folds into the far field (there the rotation fields' 1/R coefficient kept a
#: net area of 11-12 % of its L1 norm, where the exact far field, a time derivative, has none; N = 3: 1.8-4.4 %),
#: while N >= 4 over-fits five radii. N = 3 also cut the alpha error of a near-spherical eight-sided die from 71 to
#: 26 % at equal translation error (1 %).
RADIAL_TERMS = 3


# ---------------------------------------------------------------------------------------------------------------
# grid convention
def direction_angles(n_theta: int, n_phi: int) -> tuple[np.ndarray, np.ndarray]:
    """Angles of the direction grid (module docstring).

    Parameters
    ----------
    n_theta, n_phi : int
        Grid size, >= 1 each.

    Returns
    -------
    theta : ndarray, shape (n_theta,)
        Cell-centred polar angles [rad] in (0, pi).
    phi : ndarray, shape (n_phi,)
        Azimuths [rad] in [0, 2 pi).

    Raises
    ------
    InputError
        If a size is below 1.
    """
    if int(n_theta) < 1 or int(n_phi) < 1:
        raise InputError(f"PAN direction grid: n_theta = {n_theta} and n_phi = {n_phi} must be >= 1")
    theta = (np.arange(int(n_theta)) + 0.5) * np.pi / int(n_theta)
    phi = np.arange(int(n_phi)) * 2.0 * np.pi / int(n_phi)
    return theta, phi


def direction_vectors(n_theta: int, n_phi: int) -> np.ndarray:
    """Unit direction vectors of the grid of :func:`direction_angles`, body frame.

    Parameters
    ----------
    n_theta, n_phi : int
        Grid size.

    Returns
    -------
    ndarray, shape (n_theta, n_phi, 3)
    """
    th, ph = direction_angles(n_theta, n_phi)
    st = np.sin(th)[:, None]
    return np.stack([st * np.cos(ph)[None, :], st * np.sin(ph)[None, :],
                     np.broadcast_to(np.cos(th)[:, None], (len(th), len(ph)))], axis=-1)


def shell_radii(R_b: float, M: int = N_RADII, kappa: float = KAPPA) -> np.ndarray:
    """Fit radii R_i = 2 R_b kappa^{i-1}, i = 1..M (paper sec. 4.2).

    Parameters
    ----------
    R_b : float
        Bounding radius about the centre of mass [m].
    M : int, optional
        Number of radii.
    kappa : float, optional
        Ratio of successive radii.

    Returns
    -------
    ndarray, shape (M,)
        [m].

    Raises
    ------
    InputError
        If R_b is not positive.
    """
    if not (np.isfinite(R_b) and R_b > 0):
        raise InputError(f"PAN: bounding radius R_b = {R_b} m must be positive")
    return 2.0 * float(R_b) * float(kappa) ** np.arange(int(M))


def sample_points(R_b: float, n_theta: int, n_phi: int, M: int = N_RADII, kappa: float = KAPPA) -> np.ndarray:
    """Where the precompute samples pressure (the fit's layout): every grid direction at every fit radius.

    Parameters
    ----------
    R_b : float
        Bounding radius [m].
    n_theta, n_phi : int
        Direction grid.
    M : int, optional
        Number of radii.
    kappa : float, optional
        Radius ratio.

    Returns
    -------
    ndarray, shape (n_theta, n_phi, M, 3)
        Body-frame points [m].
    """
    return direction_vectors(n_theta, n_phi)[:, :, None, :] * shell_radii(R_b, M, kappa)[None, None, :, None]


@njit(cache=True, nogil=True)
def _angle_corners(x, n_theta, n_phi, R, it, ip, w):
    """angle_weights for points x (n, 3): R (n,), it / ip (n, 4) int32, w (n, 4) (module docstring)."""
    two_pi = 2.0 * math.pi
    th0 = 0.5 * math.pi / n_theta                      # polar angle of the first row
    for m in range(x.shape[0]):
        px, py, pz = x[m, 0], x[m, 1], x[m, 2]
        r = math.sqrt(px * px + py * py + pz * pz)
        R[m] = r
        if not r < math.inf:                           # NaN or infinite point: NaN weights on a valid corner
            for c in range(4):
                it[m, c] = 0
                ip[m, c] = 0
                w[m, c] = math.nan
            continue
        ct = min(max(pz / r, -1.0), 1.0) if r > 0 else 1.0
        theta = math.acos(ct)
        phi = math.atan2(py, px) % two_pi
        v = phi * (n_phi / two_pi)
        fl = math.floor(v)
        fp = v - fl
        ip0 = int(fl) % n_phi
        # rows of the pole-padded grid: 0 the north pole, a + 1 grid row a, n_theta + 1 the south pole
        u = theta * (n_theta / math.pi) - 0.5          # row coordinate among the grid rows
        if u < 0.0:                                    # north cap: pole row, then the first row
            ta, ft = 0, theta / th0
        elif u > n_theta - 1.0:                        # south cap: the last row, then the pole row
            ta, ft = n_theta, (theta - (math.pi - th0)) / th0
        else:
            t0 = min(int(math.floor(u)), max(n_theta - 2, 0))
            ta, ft = t0 + 1, u - t0
        ft = min(max(ft, 0.0), 1.0)
        it[m, 0] = ta
        it[m, 1] = ta
        it[m, 2] = ta + 1
        it[m, 3] = ta + 1
        ip[m, 0] = ip0
        ip[m, 1] = (ip0 + 1) % n_phi
        ip[m, 2] = ip0
        ip[m, 3] = (ip0 + 1) % n_phi
        w[m, 0] = (1.0 - ft) * (1.0 - fp)
        w[m, 1] = (1.0 - ft) * fp
        w[m, 2] = ft * (1.0 - fp)
        w[m, 3] = ft * fp


def with_poles(g, axis: int = 0) -> np.ndarray:
    """The grid function g (theta rows on ``axis``, phi columns on ``axis + 1``) with a row added at each pole: the
    (n_theta + 2)-row grid that :func:`angle_weights` indexes.

    Near a pole a smooth field is f = a + (b cos phi + c sin phi) theta + O(theta^2); the m = 0 part a + d theta^2
    is even in theta, so the pole value a is extrapolated quadratically from the phi-means of the first two rows
    (with one row: its mean), and the m >= 1 parts vanish there. Linear interpolation between the pole row and the
    first row then keeps the odd (dipole-like) parts exact to the bilinear error and puts a z-dipole on the axis
    within (d theta_0^2)^2-order terms: cos(18 deg) = 4.9 % low with the first row held, 0.36 % with this
    (5 x 10 grid).

    Parameters
    ----------
    g : array_like
        Grid function, theta rows on ``axis``, phi columns on ``axis + 1``.
    axis : int, optional
        The theta axis.

    Returns
    -------
    ndarray
        g with n_theta + 2 rows on ``axis`` (north pole first).
    """
    g = np.moveaxis(np.asarray(g), axis, 0)
    n = g.shape[0]
    th0 = 0.5 * np.pi / n
    poles = []
    for first, second in ((0, 1), (n - 1, n - 2)):
        m0 = g[first].mean(axis=0)
        if n >= 2:
            m1 = g[second].mean(axis=0)
            pole = m0 - (m1 - m0) * th0**2 / ((3 * th0) ** 2 - th0**2)
        else:
            pole = m0
        poles.append(np.broadcast_to(pole, g.shape[1:])[None].astype(g.dtype))
    out = np.concatenate([poles[0], g, poles[1]], axis=0)
    return np.moveaxis(out, 0, axis)


def angle_weights(points, n_theta: int, n_phi: int):
    """Bilinear interpolation in (theta, phi) on the pole-padded grid (:func:`with_poles`; module docstring).

    The interpolated value of a grid function f is sum_c w[..., c] F[it[..., c], ip[..., c]] with
    F = with_poles(f). Points at the origin get R = 0 (callers reject them) and the north-pole weights.

    Parameters
    ----------
    points : array_like, shape (..., 3)
        Body-frame points [m].
    n_theta, n_phi : int
        Direction grid.

    Returns
    -------
    R : ndarray, shape (...)
        Distance from the centre of mass [m].
    it : ndarray of int32, shape (..., 4)
        Rows of the padded grid (0: north pole, a + 1: grid row a, n_theta + 1: south pole).
    ip : ndarray of int32, shape (..., 4)
        Phi columns.
    w : ndarray, shape (..., 4)
        Weights (NaN for a non-finite point).
    """
    x = np.asarray(points, np.float64)
    n_theta, n_phi = int(n_theta), int(n_phi)
    if n_theta < 1 or n_phi < 1:
        raise InputError(f"PAN direction grid: n_theta = {n_theta} and n_phi = {n_phi} must be >= 1")
    shp = x.shape[:-1]
    xf = np.ascontiguousarray(x.reshape(-1, 3))
    n = xf.shape[0]
    R = np.empty(n)
    it = np.empty((n, 4), np.int32)
    ip = np.empty((n, 4), np.int32)
    w = np.empty((n, 4))
    _angle_corners(xf, n_theta, n_phi, R, it, ip, w)
    return R.reshape(shp), it.reshape(shp + (4,)), ip.reshape(shp + (4,)), w.reshape(shp + (4,))


# ---------------------------------------------------------------------------------------------------------------
@dataclass
class PANField:
    """Fitted PAN fields of one object (module docstring).

    Parameters
    ----------
    q : ndarray, shape (6, n_theta, n_phi, N, n_coef)
        Coefficients q_k^j of field i in direction (a, b) [Pa m^k per unit acceleration: per m/s^2 for i < 3,
        per rad/s^2 for i >= 3]; stored as float32.
    dt_q : float
        Coefficient spacing [s].
    tau0 : float
        Retarded time of coefficient 0, relative to the pulse centre [s].
    h : float
        Pulse time scale of the fields' source pulse psi(t; h) [s].
    c : float
        Speed of sound of the precompute [m/s].
    rho : float
        Air density of the precompute [kg/m^3].
    R_b : float
        Bounding radius about the centre of mass [m].
    radii : array_like, shape (M,)
        Fit radii [m].
    mass : float
        Object mass [kg].
    inertia : array_like, shape (3, 3)
        Inertia about the centre of mass [kg m^2], body frame.
    inputs_hash : str, optional
        Hash of everything that produced the fields (mesh, air, grid, solver settings).
    meta : dict, optional
        Extras.

    Raises
    ------
    InputError
        On a wrong shape of q or a non-positive scalar.
    """

    q: np.ndarray
    dt_q: float
    tau0: float
    h: float
    c: float
    rho: float
    R_b: float
    radii: np.ndarray
    mass: float
    inertia: np.ndarray
    inputs_hash: str = ""
    meta: dict = field(default_factory=dict)
    # the wavelet-stored form of q (:mod:`.field_store`) when the field is kept that way: written as is, so a saved
    # and reloaded field is the one in memory, bit for bit
    _stored: dict | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.q = np.ascontiguousarray(self.q, np.float32)
        if self.q.ndim != 5 or self.q.shape[0] != N_FIELDS:
            raise InputError(f"PANField.q must have shape (6, n_theta, n_phi, N, n_coef), got {self.q.shape}")
        self.radii = np.asarray(self.radii, np.float64).reshape(-1)
        self.inertia = np.asarray(self.inertia, np.float64).reshape(3, 3)
        for name in ("dt_q", "h", "c", "rho", "R_b", "mass"):
            v = float(getattr(self, name))
            if not (np.isfinite(v) and v > 0):
                raise InputError(f"PANField.{name} = {v} must be positive and finite")
            setattr(self, name, v)
        self.tau0 = float(self.tau0)

    # ---- shape helpers ------------------------------------------------------------------------------------
    @property
    def n_theta(self) -> int:
        """Polar grid size."""
        return int(self.q.shape[1])

    @property
    def n_phi(self) -> int:
        """Azimuthal grid size."""
        return int(self.q.shape[2])

    @property
    def n_terms(self) -> int:
        """Radial terms N."""
        return int(self.q.shape[3])

    @property
    def n_coef(self) -> int:
        """Coefficients per term and direction."""
        return int(self.q.shape[4])

    def angles(self):
        """The grid angles, as :func:`direction_angles`.

        Returns
        -------
        theta : ndarray, shape (n_theta,)
            [rad].
        phi : ndarray, shape (n_phi,)
            [rad].
        """
        return direction_angles(self.n_theta, self.n_phi)

    # ---- evaluation (checks, plots) -----------------------------------------------------------------------
    def evaluate(self, field_index: int, points_body, t=None) -> np.ndarray:
        """Pressure of one field at body-frame points: eq. 20 with bilinear angle interpolation, no band limiting.

        Parameters
        ----------
        field_index : int
            0..5 (module docstring).
        points_body : array_like, shape (n, 3)
            Body-frame points [m], not at the centre of mass.
        t : array_like, shape (T,), optional
            Times from the pulse centre [s] (default: tau0 + j dt_q, long enough for the farthest point's delay
            R/c).

        Returns
        -------
        ndarray, shape (n, T)
            [Pa per m/s^2] (translation) or [Pa per rad/s^2] (rotation).

        Raises
        ------
        InputError
            On a field index outside 0..5 or a point at the centre of mass.
        """
        i = int(field_index)
        if not 0 <= i < N_FIELDS:
            raise InputError(f"PANField.evaluate: field index {field_index} must be in 0..5")
        pts = np.asarray(points_body, np.float64).reshape(-1, 3)
        R, it, ip, w = angle_weights(pts, self.n_theta, self.n_phi)
        if np.any(R <= 0):
            raise InputError("PANField.evaluate: a point is at the centre of mass (R = 0)")
        if t is None:
            t = self.tau0 + self.dt_q * np.arange(self.n_coef + int(np.ceil(R.max() / self.c / self.dt_q)) + 2)
        t = np.asarray(t, np.float64).reshape(-1)
        q = with_poles(self.q[i].astype(np.float64))                       # (nth + 2, nph, N, ncoef)
        qc = sum(w[:, c, None, None] * q[it[:, c], ip[:, c]] for c in range(4))                      # (n, N, ncoef)
        x = (t[None, :] - R[:, None] / self.c - self.tau0) / self.dt_q     # (n, T) coefficient positions
        j0, pw = psi_weights(x)                                            # (n, T), (n, T, 4)
        out = np.zeros((len(pts), len(t)))
        rows = np.arange(len(pts))[:, None]
        for m in range(4):
            j = j0 + m
            ok = (j >= 0) & (j < self.n_coef)
            jc = np.clip(j, 0, self.n_coef - 1)
            for k in range(self.n_terms):                                  # eq. 20: sum_k R^{-k} q_k(t - R/c)
                out += np.where(ok, pw[..., m] * qc[rows, k, jc], 0.0) * R[:, None] ** -(k + 1.0)
        return out

    # ---- storage ------------------------------------------------------------------------------------------
    def stored_form(self, eps: float) -> "PANField":
        """The field as it is stored: q wavelet-thresholded at eps and reconstructed (:mod:`.field_store`; the
        soundbank paper's representation, sec. 4.1), with the storage summary (sizes, per-field relative error) in
        ``meta["storage"]``. Use this form in memory too, so that the sound never depends on the cache."""
        from .field_store import compress_q, decompress_q
        arrays, info = compress_q(self.q, eps)
        q = decompress_q(arrays, self.q.shape, info)
        out = PANField(q=q, dt_q=self.dt_q, tau0=self.tau0, h=self.h, c=self.c, rho=self.rho, R_b=self.R_b,
                       radii=self.radii, mass=self.mass, inertia=self.inertia, inputs_hash=self.inputs_hash,
                       meta={**self.meta, "storage": info})
        out._stored = arrays
        return out

    # ---- asset I/O ----------------------------------------------------------------------------------------
    def to_asset(self) -> Asset:
        """The fields as an asset.

        Returns
        -------
        Asset
            Kind "pan_field"; parameters under meta["pan"], SI units.
        """
        meta = dict(self.meta)
        meta["pan"] = {"h_s": self.h, "dt_q_s": self.dt_q, "tau0_s": self.tau0, "c_m_per_s": self.c,
                       "rho_kg_per_m3": self.rho, "R_b_m": self.R_b, "mass_kg": self.mass,
                       "n_theta": self.n_theta, "n_phi": self.n_phi, "n_terms": self.n_terms,
                       "grid": "theta_a = (a + 1/2) pi / n_theta, phi_b = b 2 pi / n_phi (body frame, about the COM)",
                       "fields": ["a_x", "a_y", "a_z", "alpha_x", "alpha_y", "alpha_z"],
                       "units": "q [Pa m^k] per (m/s^2) for translation, per (rad/s^2) for rotation"}
        arrays = {"radii": self.radii, "inertia": self.inertia}
        if self._stored is not None and "storage" in meta:
            meta["pan"]["n_coef"] = self.n_coef
            # wavelet form (field_store; q is rebuilt on load), in one order so that a re-save is the same file
            arrays.update({k: self._stored[k] for k in sorted(self._stored)})
        else:
            arrays["q"] = self.q
        return Asset(kind=ASSET_KIND, kind_version=ASSET_KIND_VERSION, inputs_hash=self.inputs_hash, meta=meta,
                     arrays=arrays)

    @classmethod
    def from_asset(cls, asset: Asset) -> "PANField":
        """Fields from an asset written by :meth:`to_asset`.

        Parameters
        ----------
        asset : Asset

        Returns
        -------
        PANField
            Its meta is the asset's, without the "pan" entry.

        Raises
        ------
        AssetError
            If the asset lacks or misstates a parameter.
        """
        meta = dict(asset.meta)
        stored = None
        try:
            m = meta.pop("pan")
            if "q" in asset.arrays:
                q = asset.arrays["q"]
            else:                                       # the wavelet form (field_store)
                from .field_store import PREFIX, decompress_q
                shape = (N_FIELDS, m["n_theta"], m["n_phi"], m["n_terms"], m["n_coef"])
                stored = {k: v for k, v in asset.arrays.items() if k.startswith(PREFIX)}
                q = decompress_q(stored, shape, meta["storage"])
            fld = cls(q=q, dt_q=m["dt_q_s"], tau0=m["tau0_s"], h=m["h_s"], c=m["c_m_per_s"],
                      rho=m["rho_kg_per_m3"], R_b=m["R_b_m"], radii=asset.arrays["radii"], mass=m["mass_kg"],
                      inertia=asset.arrays["inertia"], inputs_hash=asset.inputs_hash, meta=meta)
        except (KeyError, TypeError, InputError) as exc:
            raise AssetError(f"{asset.path}: not a valid PAN field asset ({exc!r}); rebuild it") from None
        except AssetError as exc:
            raise AssetError(f"{asset.path}: {exc}") from None
        fld._stored = stored
        return fld

    def save(self, path):
        """Write the fields as an asset file (atomically).

        Parameters
        ----------
        path : path-like

        Returns
        -------
        Path
            As :func:`~impactsound.assets.store.write_asset` returns it.
        """
        return write_asset(path, self.to_asset())

    @classmethod
    def load(cls, path, inputs_hash: str | None = None) -> "PANField":
        """Read fields from an asset file.

        Parameters
        ----------
        path : path-like
        inputs_hash : str, optional
            When given, the asset must carry this inputs hash.

        Returns
        -------
        PANField

        Raises
        ------
        AssetError
            On a missing, corrupted, stale or wrong-kind asset.
        """
        return cls.from_asset(read_asset(path, ASSET_KIND, kind_version=ASSET_KIND_VERSION, inputs_hash=inputs_hash))


# ---------------------------------------------------------------------------------------------------------------
@dataclass
class FitOperator:
    """The fit system of the module docstring, factored once and shared by all fields and directions.

    Built by :func:`fit_operator`.

    Attributes
    ----------
    radii : ndarray, shape (M,)
        Fit radii [m].
    c : float
        Speed of sound [m/s].
    dt, t_start : float
        Sample spacing and time of sample 0 [s].
    n_samples : int
        Samples per series.
    dt_q, tau0 : float
        Coefficient spacing and retarded time of coefficient 0 [s].
    n_coef, n_terms : int
        Coefficients per term, terms N.
    rows : ndarray of int, shape (n_rows, 2)
        (radius index, sample index) of each equation.
    scale : ndarray, shape (N,)
        R_1^k, undoes the column scaling.
    rank : int
        Number of unknowns the data determine.
    matrix : scipy.sparse.csr_matrix, shape (n_rows, N n_coef)
        Columns (k, j) k-major, scaled as in the module docstring.
    cols : ndarray of int or None
        Observed columns, j-major (Cholesky path).
    chol : ndarray or None
        Banded Cholesky factor (upper form) of the normal equations over ``cols``.
    pinv : ndarray or None
        Dense truncated-SVD pseudo-inverse (fallback).
    """

    radii: np.ndarray
    c: float
    dt: float
    t_start: float
    n_samples: int
    dt_q: float
    tau0: float
    n_coef: int
    n_terms: int
    rows: np.ndarray
    scale: np.ndarray
    rank: int
    matrix: scipy.sparse.csr_matrix
    cols: np.ndarray | None = None
    chol: np.ndarray | None = None
    pinv: np.ndarray | None = None

    def solve(self, series: np.ndarray) -> np.ndarray:
        """Fit coefficients to pressure series.

        Parameters
        ----------
        series : ndarray, shape (S, M, n_samples)
            Pressure at the radii [Pa].

        Returns
        -------
        ndarray, shape (S, N, n_coef)
            q_k^j [Pa m^k].
        """
        S = series.shape[0]
        B = series[:, self.rows[:, 0], self.rows[:, 1]].T                  # (n_rows, S)
        if self.pinv is not None:
            X = self.pinv @ B
        else:
            Ac = self.matrix[:, self.cols]
            # normal equations (A^T A) x = A^T b with the banded factor, plus one step of iterative refinement
            # on the residual b - A x: the factor's conditioning is cond(A)^2 (~1e8 here), the refined solution
            # is accurate to ~cond(A) eps, as a QR/SVD solve would be.
            x = scipy.linalg.cho_solve_banded((self.chol, False), Ac.T @ B)
            x += scipy.linalg.cho_solve_banded((self.chol, False), Ac.T @ (B - Ac @ x))
            X = np.zeros((self.matrix.shape[1], S))
            X[self.cols] = x
        return X.T.reshape(S, self.n_terms, self.n_coef) * self.scale[None, :, None]


def fit_operator(radii, c: float, dt: float, t_start: float, n_samples: int, *, n_terms: int = N_TERMS,
                 dt_q: float | None = None, rcond: float = 1e-8) -> FitOperator:
    """Build and factor (once) the least-squares system of the module docstring.

    Each row touches the four pulses around its retarded time for every term k, so with the unknowns ordered
    j-major, A^T A is banded (half-bandwidth 4 N - 1). Columns no row touches (a pulse past the window end) are
    set to zero, as the minimum-norm solution would. The rest is solved by banded Cholesky of the normal
    equations (O(n_coef) memory and time, against a dense SVD's O(n_coef^3): 0.3 s instead of ~9 s for 1193
    samples) when the factor shows the system well determined (pivot ratio above 1e-6, so that cond(A)^2 eps
    stays small and the refinement in :meth:`FitOperator.solve` converges; about 1e-4 for the paper's radii);
    otherwise by a dense truncated SVD dropping singular values below rcond * s_max.

    Parameters
    ----------
    radii : array_like, shape (M,)
        Increasing radii [m], M >= n_terms.
    c : float
        Speed of sound [m/s].
    dt : float
        Sample spacing [s].
    t_start : float
        Time of sample 0 [s] (from the pulse centre).
    n_samples : int
        Samples per series (t_n = t_start + n dt, n < n_samples).
    n_terms : int, optional
        Radial terms N.
    dt_q : float, optional
        Coefficient spacing [s] (default dt, as in the paper).
    rcond : float, optional
        Relative singular value cut-off of the SVD fallback.

    Returns
    -------
    FitOperator

    Raises
    ------
    InputError
        On too few or non-increasing radii, non-positive spacings or c, or series too short for a common window.
    """
    R = np.asarray(radii, np.float64).reshape(-1)
    M = R.shape[0]
    if M < n_terms or n_terms < 1:
        raise InputError(f"PAN fit: need at least N = {n_terms} radii, got {M}")
    if np.any(np.diff(R) <= 0) or R[0] <= 0:
        raise InputError(f"PAN fit: radii must be positive and increasing, got {R}")
    dt = float(dt)
    dt_q = dt if dt_q is None else float(dt_q)
    if not (dt > 0 and dt_q > 0 and c > 0):
        raise InputError(f"PAN fit: dt = {dt}, dt_q = {dt_q}, c = {c} must be positive")
    t_end = t_start + (n_samples - 1) * dt
    tau_lo = t_start - R[0] / c                                            # window seen by every radius
    tau_hi = t_end - R[-1] / c
    if tau_hi <= tau_lo + 4 * dt_q:
        raise InputError(f"PAN fit: series of {n_samples} samples (dt = {dt} s) are too short for the radii "
                         f"{R[0]:.4g}..{R[-1]:.4g} m: every radius must observe a common retarded-time window; "
                         "record longer")
    tau0 = tau_lo - dt_q                                                   # first pulse overlapping tau_lo
    n_coef = int(np.ceil((tau_hi - tau0) / dt_q - 1e-9)) + 3
    ii, nn = np.meshgrid(np.arange(M), np.arange(n_samples), indexing="ij")
    tau = t_start + nn * dt - R[ii] / c
    eps = 1e-9 * dt
    use = (tau >= tau_lo - eps) & (tau <= tau_hi + eps)
    rows = np.stack([ii[use], nn[use]], axis=1)
    x = (tau[use] - tau0) / dt_q
    j0, w = psi_weights(x)
    ratio = R[0] / R[rows[:, 0]]
    r_idx = np.arange(rows.shape[0])
    ri, ci, vals = [], [], []
    for m in range(4):
        j = j0 + m
        ok = (j >= 0) & (j < n_coef)
        for k in range(n_terms):                                           # column (k, j): (R_1/R_i)^k psi
            ri.append(r_idx[ok])
            ci.append(k * n_coef + j[ok])
            vals.append(ratio[ok] ** (k + 1) * w[ok, m])
    n_unk = n_terms * n_coef
    A = scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(ri), np.concatenate(ci))),
                                shape=(rows.shape[0], n_unk))              # duplicates (same row, col) summed
    common = dict(radii=R, c=float(c), dt=dt, t_start=float(t_start), n_samples=int(n_samples), dt_q=dt_q,
                  tau0=float(tau0), n_coef=n_coef, n_terms=n_terms, rows=rows,
                  scale=R[0] ** (np.arange(n_terms) + 1.0), matrix=A)
    cn = np.sqrt(np.asarray(A.multiply(A).sum(axis=0)).ravel())
    order = np.arange(n_unk).reshape(n_terms, n_coef).T.ravel()           # j-major: (j, k)
    cols = order[cn[order] > 1e-12 * cn.max()]
    Ac = A[:, cols]
    N = (Ac.T @ Ac).tocoo()
    bw = int(np.max(np.abs(N.row - N.col))) if N.nnz else 0
    ab = np.zeros((bw + 1, len(cols)))                                     # upper band storage
    up = N.col >= N.row
    ab[bw + N.row[up] - N.col[up], N.col[up]] = N.data[up]
    try:
        chol = scipy.linalg.cholesky_banded(ab, lower=False)
        piv = np.abs(chol[bw])
        ok = piv.min() > 1e-6 * piv.max()                                  # cond(A) ~ max/min pivot
    except np.linalg.LinAlgError:
        ok = False
    if ok:
        return FitOperator(**common, rank=len(cols), cols=cols, chol=chol)
    Ad = A.toarray()
    U, s, Vt = scipy.linalg.svd(Ad, full_matrices=False, lapack_driver="gesdd")
    rank = int(np.sum(s > rcond * s[0]))
    return FitOperator(**common, rank=rank, pinv=(Vt[:rank].T / s[:rank]) @ U[:, :rank].T)


def fit_pan_field(p, *, radii, c: float, rho: float, dt: float, t_start: float, h: float, R_b: float,
                  mass: float, inertia, n_terms: int = N_TERMS, dt_q: float | None = None, rcond: float = 1e-8,
                  inputs_hash: str = "", meta: dict | None = None, block: int = 1024,
                  taper_end: bool = True) -> PANField:
    """Fit PAN fields to sampled pressure (module docstring).

    Parameters
    ----------
    p : array_like, shape (6, n_theta, n_phi, M, T)
        Pressure of field i at the grid direction (a, b) (:func:`direction_vectors`) and radius ``radii[m]``,
        time t_start + n dt from the pulse centre [Pa per unit acceleration].
    radii : array_like, shape (M,)
        Fit radii [m].
    c : float
        Speed of sound [m/s].
    rho : float
        Air density [kg/m^3].
    dt : float
        Sample spacing [s].
    t_start : float
        Time of sample 0 from the pulse centre [s].
    h : float
        The fields' pulse time scale [s].
    R_b : float
        Bounding radius [m].
    mass : float
        Object mass [kg].
    inertia : array_like, shape (3, 3)
        Inertia about the centre of mass [kg m^2].
    n_terms : int, optional
        Radial terms N.
    dt_q : float, optional
        Coefficient spacing [s] (default dt).
    rcond : float, optional
        SVD cut-off.
    inputs_hash : str, optional
        Stored in the result.
    meta : dict, optional
        Stored in the result, plus the fit's rank and relative residual.
    block : int, optional
        Series per matrix product (memory).
    taper_end : bool, optional
        Fade out the weakly observed last coefficients (see the code comment; off only for data that are exact
        up to the window end, as in the fit's own tests).

    Returns
    -------
    PANField
        With float32 coefficients.

    Raises
    ------
    InputError
        On a wrong shape or non-finite samples, or as :func:`fit_operator`.
    """
    p = np.asarray(p)
    if p.ndim != 5 or p.shape[0] != N_FIELDS:
        raise InputError(f"PAN fit: p must have shape (6, n_theta, n_phi, M, T), got {p.shape}")
    _, nth, nph, M, T = p.shape
    if not np.all(np.isfinite(p)):
        raise InputError("PAN fit: pressure samples contain NaN or infinite values (unstable precompute?)")
    op = fit_operator(radii, c, dt, t_start, T, n_terms=n_terms, dt_q=dt_q, rcond=rcond)
    series = p.reshape(-1, M, T)
    q = np.empty((series.shape[0], n_terms, op.n_coef), np.float32)
    res2 = 0.0
    nrm2 = 0.0
    for a in range(0, series.shape[0], block):
        blk = series[a:a + block].astype(np.float64)
        qb = op.solve(blk)
        q[a:a + block] = qb
        B = blk[:, op.rows[:, 0], op.rows[:, 1]]
        fitted = (op.matrix @ (qb / op.scale[None, :, None]).reshape(len(blk), -1).T).T
        res2 += float(np.sum((fitted - B) ** 2))
        nrm2 += float(np.sum(B**2))
    # The last coefficients (pulses centred past tau_hi, the end of the window every radius observes) are fixed
    # by the inner radii only and come out as minimum-norm noise that would ring at large distances. The
    # precompute runs until the fit shells have decayed by 40 dB (at least 5 R_b/c of ring-down past the pulse,
    # precompute.py), so the true field there is small: fade the last 8 coefficient spacings of the window to
    # zero and drop the ones beyond it.
    tau_j = op.tau0 + np.arange(op.n_coef) * op.dt_q
    tau_hi = op.t_start + (T - 1) * op.dt - op.radii[-1] / op.c
    if taper_end:
        fade = np.clip((tau_hi - tau_j) / (8 * op.dt_q), 0.0, 1.0)
        q *= (0.5 - 0.5 * np.cos(np.pi * fade)).astype(np.float32)
    info = dict(meta or {})
    info.update({"fit_rank": op.rank, "fit_unknowns": int(n_terms * op.n_coef),
                 "fit_relative_residual": float(np.sqrt(res2 / nrm2)) if nrm2 > 0 else 0.0,
                 "fit_rcond": float(rcond), "sample_dt_s": float(dt)})
    return PANField(q=q.reshape(N_FIELDS, nth, nph, n_terms, op.n_coef), dt_q=op.dt_q, tau0=op.tau0, h=h, c=c,
                    rho=rho, R_b=R_b, radii=op.radii, mass=mass, inertia=inertia, inputs_hash=inputs_hash,
                    meta=info)
