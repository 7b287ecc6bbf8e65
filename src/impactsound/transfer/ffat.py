"""Far-field acoustic transfer (FFAT) maps (Chadwick, An & James 2009, "Harmonic Shells: A Practical Nonlinear
Sound Model for Near-Rigid Thin Shells", ACM TOG (SIGGRAPH Asia 2009), sec. 4 "Mapping Far-Field Acoustic Transfer").

Per mode of wavenumber k, the exterior pressure about the centre of mass (the body-frame origin) is expanded as

    p(R, theta, phi) ~ h0(kR) * sum_{j=1..M} Psi_j(theta, phi) / (kR)^{j-1}                          (eq. 17)

with the outgoing spherical Hankel function of order 0 in our e^{-i w t} convention, h0(x) = -i e^{ix} / x (the
paper's e^{+i w t} form is its complex conjugate; magnitudes agree). Fitting (sec. 4): for each of T x 2T
directions (T = ceil(2.25 m * k + 15) polar samples on [0, pi] including the poles, 2T azimuths on [0, 2 pi)),
p is sampled on K = 6 spheres R_i = 2.5 R_bar gamma^{i-1}, gamma = 1.54, and the K x M system A Psi = P is
solved for all directions at once by one truncated SVD of the row-weighted matrix W A, W_ii = 1 / ||P_i,:||
(shared by every direction, as A is). Evaluation: bilinear interpolation of Psi_j in (theta, phi), then eq. 17:
O(M) per mode, independent of the mesh. The paper samples the shells with the BEM at every grid direction; the
band-limited sampling of :func:`coarse_resolution` and :func:`upsample` is the package's shortcut (exact up to the
field's band limit, 10-100x fewer evaluations).
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

N_SHELLS = 6
SHELL_GAMMA = 1.54
SHELL_FIRST = 2.5
T_SLOPE = 2.25        # [m]
T_OFFSET = 15.0


def shell_radii(r_bar: float, n: int = N_SHELLS) -> np.ndarray:
    """Fitting radii R_i = 2.5 R_bar gamma^{i-1}, gamma = 1.54 (Harmonic Shells, sec. 4).

    Parameters
    ----------
    r_bar : float
        Bounding radius of the object about its centre of mass [m].
    n : int, optional
        Number of shells K.

    Returns
    -------
    ndarray, shape (n,)
        R_i [m].
    """
    return SHELL_FIRST * float(r_bar) * SHELL_GAMMA ** np.arange(n)


def angular_resolution(k: float) -> int:
    """Angular resolution T = ceil(2.25 m * k + 15) of a mode's map (Harmonic Shells, sec. 4).

    Parameters
    ----------
    k : float
        Wavenumber [1/m].

    Returns
    -------
    int
        T polar samples (2T azimuths).
    """
    return int(np.ceil(T_SLOPE * float(k) + T_OFFSET))


def grid_angles(T: int):
    """The sample angles of a (T, 2T) map.

    Parameters
    ----------
    T : int
        Polar resolution.

    Returns
    -------
    theta : ndarray, shape (T,)
        Polar angles [rad] on [0, pi], poles included.
    phi : ndarray, shape (2T,)
        Azimuths [rad] on [0, 2 pi).
    """
    return np.linspace(0.0, np.pi, T), np.arange(2 * T) * (np.pi / T)


def grid_directions(T: int) -> np.ndarray:
    """Unit vectors of the sample directions of :func:`grid_angles`.

    Parameters
    ----------
    T : int
        Polar resolution, as in :func:`grid_angles`.

    Returns
    -------
    ndarray, shape (T, 2T, 3)
    """
    th, ph = grid_angles(T)
    st = np.sin(th)[:, None]
    return np.stack([st * np.cos(ph)[None, :], st * np.sin(ph)[None, :],
                     np.cos(th)[:, None] * np.ones_like(ph)[None, :]], axis=-1)


def coarse_resolution(k: float, r_bar: float, margin: int = 24) -> int:
    """Polar samples that resolve a field radiated from inside radius r_bar, seen on a sphere R >= 2.5 r_bar:
    its spherical-harmonic content stops near degree k r_bar, and beyond that falls like (r_bar / R)^n <= 0.4^n
    (addition theorem), so ``margin`` = 24 more degrees leave < 1e-9 of it.

    Parameters
    ----------
    k : float
        Wavenumber [1/m].
    r_bar : float
        Radius enclosing the sources [m].
    margin : int, optional
        Extra degrees.

    Returns
    -------
    int
        ceil(k r_bar) + margin.
    """
    return int(np.ceil(k * r_bar)) + margin


def upsample(F: np.ndarray, T: int) -> np.ndarray:
    """Band-limited interpolation of samples F (..., Tc, 2 Tc) on the grid of :func:`grid_angles` (Tc) to the
    (T, 2T) grid (T >= Tc). The sphere is doubled into a torus (theta in [0, 2 pi): f(2 pi - theta, phi) =
    f(theta, phi + pi)), on which a field band-limited in spherical harmonics is a band-limited 2-D Fourier
    series; zero-padding its FFT interpolates exactly up to the band limit.

    Parameters
    ----------
    F : ndarray, shape (..., Tc, 2 Tc)
        Complex samples on the coarse grid.
    T : int
        Target polar resolution, > Tc.

    Returns
    -------
    ndarray of complex, shape (..., T, 2T)

    Raises
    ------
    ValueError
        If T <= Tc.
    """
    F = np.asarray(F, np.complex128)
    Tc = F.shape[-2]
    if T <= Tc:
        raise ValueError("upsample: target grid must be finer")
    ext = np.concatenate([F, np.roll(F[..., -2:0:-1, :], Tc, axis=-1)], axis=-2)   # (..., 2(Tc-1), 2Tc)
    n0, n1 = ext.shape[-2:]
    S = np.fft.fft2(ext)
    m0, m1 = 2 * (T - 1), 2 * T
    out = np.zeros(F.shape[:-2] + (m0, m1), np.complex128)
    h0_, h1_ = n0 // 2, n1 // 2
    # copy the low frequencies (the Nyquist rows/columns split evenly between +/-, keeping real symmetry)
    for a, b in ((slice(0, h0_), slice(0, h0_)), (slice(n0 - h0_, n0), slice(m0 - h0_, m0))):
        for c, d in ((slice(0, h1_), slice(0, h1_)), (slice(n1 - h1_, n1), slice(m1 - h1_, m1))):
            out[..., b, d] = S[..., a, c]
    out *= (m0 * m1) / (n0 * n1)
    return np.fft.ifft2(out)[..., :T, :]


def h0(x):
    """Outgoing spherical Hankel function of order 0, e^{-i w t} convention: -i e^{ix} / x.

    Parameters
    ----------
    x : float or array_like
        Argument kR (dimensionless), nonzero.

    Returns
    -------
    complex ndarray
    """
    x = np.asarray(x, np.float64)
    return -1j * np.exp(1j * x) / x


def expansion_matrix(radii, k: float, terms: int) -> np.ndarray:
    """The fit's system matrix A_ij = h0(k R_i) / (k R_i)^j, j = 0..M-1 (Harmonic Shells, eq. 17).

    Parameters
    ----------
    radii : array_like, shape (K,)
        Shell radii [m].
    k : float
        Wavenumber [1/m].
    terms : int
        M.

    Returns
    -------
    ndarray of complex, shape (K, M)
    """
    kr = k * np.asarray(radii, np.float64)
    return h0(kr)[:, None] / kr[:, None] ** np.arange(terms)[None, :]


def fit(P: np.ndarray, radii, k: float, terms: int, rcond: float = 1e-10) -> np.ndarray:
    """FFAT coefficients by weighted truncated SVD, W_ii = 1 / ||P_i,:|| (Harmonic Shells, sec. 4).

    Parameters
    ----------
    P : ndarray of complex, shape (K, ndir)
        Pressure samples [Pa] on the spheres ``radii``, one column per direction.
    radii : array_like, shape (K,)
        Shell radii [m].
    k : float
        Wavenumber [1/m].
    terms : int
        M, in 1..K-1.
    rcond : float, optional
        Singular values below ``rcond`` times the largest are dropped.

    Returns
    -------
    ndarray of complex, shape (M, ndir)
        Psi [Pa].

    Raises
    ------
    ValueError
        On a wrong shape of P or an out-of-range ``terms``.
    """
    P = np.asarray(P, np.complex128)
    if P.ndim != 2 or P.shape[0] != len(radii):
        raise ValueError(f"P must have shape (len(radii), n_directions), got {P.shape}")
    if terms < 1 or terms >= len(radii):
        raise ValueError(f"terms = {terms} must be in 1..{len(radii) - 1} (fewer terms than shells)")
    A = expansion_matrix(radii, k, terms)
    w = 1.0 / np.maximum(np.linalg.norm(P, axis=1), 1e-300)
    U, s, Vh = np.linalg.svd(w[:, None] * A, full_matrices=False)
    keep = s > rcond * s[0]
    return (Vh[keep].conj().T / s[keep]) @ (U[:, keep].conj().T @ (w[:, None] * P))


@dataclass
class FFATMap:
    """FFAT map of one mode; the expansion centre is the body-frame origin (centre of mass).

    Attributes
    ----------
    k : float
        Wavenumber [1/m].
    psi : ndarray of complex, shape (M, T, 2T)
        Psi_j [Pa] on the polar/azimuth grid of :func:`grid_angles`.
    """

    k: float
    psi: np.ndarray

    @property
    def terms(self) -> int:
        """Number of expansion terms M."""
        return int(self.psi.shape[0])

    @property
    def T(self) -> int:
        """Polar resolution T."""
        return int(self.psi.shape[1])

    def evaluate(self, points) -> np.ndarray:
        """Complex pressure per unit modal amplitude at body-frame points.

        Parameters
        ----------
        points : array_like, shape (..., 3)
            Body-frame points [m], away from the origin.

        Returns
        -------
        ndarray of complex, shape (...)
            p [Pa] per unit modal amplitude, e^{-i w t}.
        """
        pts = np.asarray(points, np.float64)
        flat = np.ascontiguousarray(pts.reshape(-1, 3))
        out = np.empty((len(flat), 1), np.complex128)
        psi = np.ascontiguousarray(np.moveaxis(self.psi, 0, -1).reshape(-1), np.complex128)
        _eval_bank(flat, psi, np.zeros(1, np.int64), np.array([self.T], np.int64), np.array([float(self.k)]),
                   self.terms, out)
        return out[:, 0].reshape(pts.shape[:-1])


#: modes per work item of the evaluation (its gather buffer stays in L1)
EVAL_BLOCK = 64


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to start loading arr[idx] into cache (LLVM's prefetch: read, high locality); no fault on any
    address, no effect on results."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False,
                                       boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@nb.njit(cache=True, parallel=True)
def _eval_bank(points, psi, offsets, Ts, ks, terms, out):
    """out[i, j]: mode j's pressure at point i: h0(k R) sum_m Psi_m(theta, phi) / (k R)^m with Psi bilinear on
    the (T, 2T) grid (module docstring), O(terms) per mode.

    The maps of many modes are far larger than the caches, so one evaluation is a few random memory reads; they
    dominate. Work items are (point, block of EVAL_BLOCK modes), run in parallel. Each item first computes the
    corner addresses of all its modes and issues prefetches for them (packed layout (T, 2T, M): the two phi
    neighbours of a theta row are adjacent, so two rows = 2-4 cache lines), then gathers the values into a small
    buffer, then does the arithmetic; many reads are in flight at once instead of one per mode (1.5-2x on a
    2 GB bank, bench/bench_bem.py)."""
    n, m = points.shape[0], ks.shape[0]
    last = psi.shape[0] - 1
    R = np.empty(n)
    thn = np.empty(n)
    phn = np.empty(n)
    for i in range(n):
        x, y, z = points[i, 0], points[i, 1], points[i, 2]
        R[i] = np.sqrt(x * x + y * y + z * z)
        thn[i] = np.arccos(min(1.0, max(-1.0, z / R[i]))) / np.pi          # theta / pi in [0, 1]
        p = np.arctan2(y, x)
        phn[i] = (p + 2 * np.pi if p < 0 else p) / (2 * np.pi)              # phi / 2 pi in [0, 1]
    nblk = (m + EVAL_BLOCK - 1) // EVAL_BLOCK
    for q in nb.prange(n * nblk):
        i = q // nblk
        jb = (q - i * nblk) * EVAL_BLOCK
        je = min(m, jb + EVAL_BLOCK)
        cor = np.empty((EVAL_BLOCK, 2), np.int64)
        fu = np.empty(EVAL_BLOCK)
        fv = np.empty(EVAL_BLOCK)
        vals = np.empty((EVAL_BLOCK, 4, terms), np.complex64)
        for j in range(jb, je):                     # addresses of the corners (i0, j0) and (i0 + 1, j0), prefetch
            T = Ts[j]
            nphi = 2 * T
            u = thn[i] * (T - 1)
            i0 = min(int(u), T - 2)
            v = phn[i] * nphi
            j0 = int(v)
            fu[j - jb] = u - i0
            fv[j - jb] = v - j0
            if j0 >= nphi:
                j0 -= nphi
            c0 = offsets[j] + (i0 * nphi + j0) * terms
            c1 = c0 + nphi * terms
            cor[j - jb, 0] = c0
            cor[j - jb, 1] = j0                     # phi column (for the periodic wrap below)
            _prefetch(psi, c0)
            _prefetch(psi, min(c0 + 2 * terms - 1, last))
            _prefetch(psi, c1)
            _prefetch(psi, min(c1 + 2 * terms - 1, last))
        for j in range(jb, je):                     # gather
            T = Ts[j]
            nphi = 2 * T
            c00 = cor[j - jb, 0]
            d = terms if cor[j - jb, 1] + 1 < nphi else (1 - nphi) * terms     # j1 = j0 + 1, periodic in phi
            row = nphi * terms
            for t in range(terms):
                vals[j - jb, 0, t] = psi[c00 + t]
                vals[j - jb, 1, t] = psi[c00 + d + t]
                vals[j - jb, 2, t] = psi[c00 + row + t]
                vals[j - jb, 3, t] = psi[c00 + row + d + t]
        for j in range(jb, je):                     # arithmetic
            a = fu[j - jb]
            b = fv[j - jb]
            w00 = (1 - a) * (1 - b)
            w01 = (1 - a) * b
            w10 = a * (1 - b)
            w11 = a * b
            kr = ks[j] * R[i]
            inv = 1.0 / kr
            accr = 0.0
            acci = 0.0
            sc = 1.0
            for t in range(terms):
                v00 = vals[j - jb, 0, t]
                v01 = vals[j - jb, 1, t]
                v10 = vals[j - jb, 2, t]
                v11 = vals[j - jb, 3, t]
                accr += sc * (w00 * v00.real + w01 * v01.real + w10 * v10.real + w11 * v11.real)
                acci += sc * (w00 * v00.imag + w01 * v01.imag + w10 * v10.imag + w11 * v11.imag)
                sc *= inv
            hr = math.sin(kr) * inv                 # h0(kr) = -i e^{i kr} / kr = (sin kr - i cos kr) / kr
            hi = -math.cos(kr) * inv
            out[i, j] = complex(hr * accr - hi * acci, hr * acci + hi * accr)


@dataclass
class FFATBank:
    """FFAT maps of many modes packed for fast evaluation.

    Attributes
    ----------
    k : ndarray, shape (n_modes,)
        Wavenumbers [1/m].
    T : ndarray of int, shape (n_modes,)
        Polar resolution per mode.
    offsets : ndarray of int, shape (n_modes,)
        Start of each mode's block in ``psi``.
    psi : ndarray of complex64
        All maps, flat; mode j's block is laid out (T, 2T, M) [Pa].
    terms : int
        M, the same for every mode.
    """

    k: np.ndarray
    T: np.ndarray
    offsets: np.ndarray
    psi: np.ndarray
    terms: int

    @classmethod
    def from_maps(cls, maps: list[FFATMap]) -> "FFATBank":
        """Pack maps (stored as complex64).

        Parameters
        ----------
        maps : list of FFATMap
            One per mode, all with the same number of terms.

        Returns
        -------
        FFATBank

        Raises
        ------
        ValueError
            If the maps differ in their number of terms.
        """
        terms = {m.terms for m in maps}
        if len(terms) > 1:
            raise ValueError("all FFAT maps of a bank need the same number of terms")
        sizes = [m.psi.size for m in maps]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if maps else np.zeros(0, np.int64)
        psi = np.concatenate([np.moveaxis(m.psi, 0, -1).reshape(-1) for m in maps]).astype(np.complex64) \
            if maps else np.zeros(0, np.complex64)
        return cls(k=np.array([m.k for m in maps], np.float64), T=np.array([m.T for m in maps], np.int64),
                   offsets=offsets, psi=psi, terms=terms.pop() if terms else 1)

    def map(self, j: int) -> FFATMap:
        """Unpack one mode's map.

        Parameters
        ----------
        j : int
            Mode index.

        Returns
        -------
        FFATMap
            With complex128 coefficients.
        """
        T = int(self.T[j])
        n = self.terms * T * 2 * T
        return FFATMap(k=float(self.k[j]), psi=np.moveaxis(self.psi[self.offsets[j]:self.offsets[j] + n].reshape(
            T, 2 * T, self.terms), -1, 0).astype(np.complex128))

    def evaluate(self, points) -> np.ndarray:
        """Complex pressure per unit modal amplitude of every mode at body-frame points.

        Parameters
        ----------
        points : array_like, shape (n, 3)
            Body-frame points [m]; none at the origin.

        Returns
        -------
        ndarray of complex, shape (n, n_modes)
            p [Pa] per unit modal amplitude, e^{-i w t}.

        Raises
        ------
        ValueError
            If a point is at the expansion centre.
        """
        pts = np.ascontiguousarray(np.asarray(points, np.float64).reshape(-1, 3))
        if np.any(np.sqrt((pts**2).sum(axis=1)) <= 0):
            raise ValueError("FFAT evaluation at the expansion centre")
        out = np.empty((len(pts), len(self.k)), np.complex128)
        _eval_bank(pts, self.psi, self.offsets, self.T, self.k, self.terms, out)
        return out
