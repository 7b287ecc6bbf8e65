"""Wavelet representation of PAN fields and high-frequency suppression (Chadwick, Zheng & James 2012, "Faster
Acceleration Noise for Multibody Animations using Precomputed Soundbanks", sec. 4.1-4.2, Algorithm 1).

Compression (sec. 4.1). One field's pressure series p(R_i, d, t_start + n dt) at M radii R_i and directions d are
aligned in retarded time, s_i(tau) = p(R_i, d, tau + R_i/c) = sum_k R_i^{-k} q_k(d, tau) (paper eq. 13), on the
grid tau_n = tau0 + n dt with tau0 = t_start - R_1/c, so radius 1 needs no shift and radius i is advanced by
(R_i - R_1)/(c dt) samples, generally not an integer. The input series are raw samples at t_start + n dt (what the
FDTD records; :class:`~impactsound.sources.pan.field.PANField` stores fitted pulse coefficients, not aligned
series), so the shift is done here by a Fourier phase ramp on the series zero-padded to T samples: exact for
band-limited data (the PAN precompute samples at >= 10 cells per wavelength of the pulse band), circular on T
samples, which is harmless because the pressure is zero before the wave arrives (the advanced-out samples) and has
decayed at the end of the record (the precompute runs until a 40 dB decay). A record that stops undecayed gives
Gibbs ringing at its end; fade it first.

Each aligned series (T = 2^L samples, at least 1.25 n_t + 64, so that at least the last fifth of the period is
zero padding) goes through the full L-level Daubechies transform with
5 vanishing moments (db5) in periodized form (pywt mode "periodization"): an orthonormal map of R^T onto itself,
so the coefficient vector has the fixed length T whatever the wavelet, and it is flattened coarse to fine,
[approximation (1), detail level L (1), level L-1 (2), ..., level 1 (T/2)]: the packed layout of the paper's
sec. 4.2 (GSL's), in which the first T/2 entries are the transform of the level-1 approximation (what Algorithm 1
uses). By linearity each coefficient j obeys the M x N least-squares system p^_i^j = sum_k R_i^{-k} q^_k^j
(eq. 14); its matrix depends on the radii only, so one pseudo-inverse (columns scaled by R_1^k for
conditioning) serves every coefficient and direction. Coefficient j of a direction is kept iff some radius i has
|p^_i^j| >= eps ||p^_i||_inf (the largest coefficient magnitude of that radius and direction; paper sec. 4.1).
Kept coefficients are stored sparsely per direction (CSR: ``indptr``, ``index`` int32, ``values`` (nnz, N)),
float32 by default (relative rounding 6e-8, far below any useful eps; float64 on request).

Synthesis (sec. 4.1, last paragraph; eq. 15). The paper sums the wavelet coefficients of the fields that share a
time shift (the six fields of one pulse, weighted by the pulse's accelerations, and the interpolated directions)
and reconstructs once. Coefficients of pulses at different times cannot be summed: a shift by n samples commutes
with an L-level periodized DWT only for n a multiple of 2^L, so a shifted pulse has different coefficients at
every level. :func:`accumulate` therefore sums coefficients where that is exact (the weighted directions, and the
terms k after high-frequency suppression), reconstructs each term q_k once per call (N inverse transforms,
independent of the number of pulses), and places all pulses on the output grid in one step: the output spectrum
is sum_k G_k(w) sum_m a_m R_m^{-k} exp(-i w x_m), x_m the pulse's (fractional) sample position. With x_m = i_m +
phi_m, |phi_m| <= 1/2, the factor exp(-i w phi_m) is expanded to order r_max, so the pulse sum is r_max + 1 integer
deposits (np.bincount) of a_m R_m^{-k} phi_m^r / r!, each multiplied by (-i w)^r G_k(w): one FFT per (k, r), no loop
over pulses. The truncation error is at most (pi/2)^(r_max+1)/(r_max+1)! of the spectrum at the output Nyquist
frequency (|w| <= pi, |phi| <= 1/2): 6e-8 for r_max = 12, the default.

High-frequency suppression (sec. 4.2, Algorithm 1). A field scaled by beta (proxy soundbank, sec. 3.1) has the
effective rate f/beta. While f/beta > 2 f_out, f is halved and the coefficient vector is cut to its first half
(the coarser levels) divided by sqrt(2): the halved vector is the transform of the approximation at level s,
whose sample n sits at the original index 2^s n + delta_s (delta_s = delta_1 (2^s - 1), the centroid delay of
the db5 low-pass in pywt's convention; :func:`level_offset`, measured once per wavelet). The result is at rate
f/beta in (f_out, 2 f_out] (or unchanged when f/beta <= 2 f_out already) and is resampled to f_out with
scipy.signal.resample_poly: a zero-phase polyphase FIR whose Kaiser-windowed low-pass at the lower Nyquist
frequency removes what the wavelet cut leaves between f_out/2 and f/(2 beta) (the db5 half-band split is not a
brick wall). The ratio up/down is the best rational approximation of f_out/f' with down <= 10^4: exact for the
usual rates (f' = 96000 / 2^s / beta with beta a simple fraction; 44100/48000 = 147/160), otherwise within
1/(10^4 down), a time-scale error far below a sample over a pulse's length.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pywt
import scipy.fft

from ...errors import InputError

WAVELET = "db5"
MODE = "periodization"
#: least zero padding beyond the record before the power-of-two transform length [samples]
GUARD = 64
#: order of the sub-sample phase expansion in :func:`accumulate` (module docstring)
PHASE_ORDER = 12


# ---------------------------------------------------------------------------------------------------------------
# flat (packed) transform
def _levels(T: int) -> int:
    L = int(T).bit_length() - 1
    if T < 2 or (1 << L) != T:
        raise InputError(f"wavelet PAN: coefficient vector length {T} must be a power of two >= 2")
    return L


def wavedec_flat(x, wavelet: str = WAVELET) -> np.ndarray:
    """Full-depth periodized DWT along the last axis, flattened coarse to fine (module docstring).

    Parameters
    ----------
    x : array_like, shape (..., T)
        T a power of two.
    wavelet : str, optional
        pywt wavelet name.

    Returns
    -------
    ndarray, shape (..., T)
        [approximation, detail L, detail L-1, ..., detail 1].
    """
    x = np.asarray(x, np.float64)
    L = _levels(x.shape[-1])
    with warnings.catch_warnings():                      # pywt warns that deep levels see the boundary: periodized,
        warnings.simplefilter("ignore", UserWarning)     # the transform stays orthonormal and exactly invertible
        parts = pywt.wavedec(x, wavelet, mode=MODE, level=L, axis=-1)
    return np.concatenate(parts, axis=-1)


def waverec_flat(c, wavelet: str = WAVELET) -> np.ndarray:
    """Inverse of :func:`wavedec_flat` along the last axis.

    Parameters
    ----------
    c : array_like, shape (..., T)
        Packed coefficients, T a power of two.
    wavelet : str, optional

    Returns
    -------
    ndarray, shape (..., T)
    """
    c = np.asarray(c, np.float64)
    L = _levels(c.shape[-1])
    bounds = [0, 1] + [1 << l for l in range(1, L + 1)]  # approximation, then details of 1, 1, 2, ..., T/2
    parts = [c[..., bounds[a]:bounds[a + 1]] for a in range(L + 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return pywt.waverec(parts, wavelet, mode=MODE, axis=-1)


@functools.lru_cache(maxsize=16)
def _delta1(wavelet: str) -> float:
    """Centroid delay of one periodized approximation step [input samples]: cA[n] / sqrt(2) represents x at
    index 2 n + delta_1. Centroids add under convolution, so a wide Gaussian measures it to round-off."""
    T = 1024
    n = np.arange(T, dtype=np.float64)
    x = np.exp(-0.5 * ((n - T / 2) / 40.0) ** 2)
    a, _ = pywt.dwt(x, wavelet, mode=MODE)
    m = np.arange(a.shape[0], dtype=np.float64)
    return float((n @ x) / x.sum() - 2.0 * (m @ a) / a.sum())


def level_offset(wavelet: str, s: int) -> float:
    """Where the approximation after s halvings sits: its sample n is at the original index 2^s n + delta_s.

    Parameters
    ----------
    wavelet : str
    s : int
        Number of halvings (levels dropped), >= 0.

    Returns
    -------
    float
        delta_s = delta_1 (2^s - 1) [original samples] (0 for s = 0; delta_1 = -2.81 for db5).
    """
    return _delta1(wavelet) * ((1 << int(s)) - 1)


# ---------------------------------------------------------------------------------------------------------------
@dataclass
class WaveletField:
    """One PAN field in the compressed wavelet form (module docstring); built by :func:`compress`.

    Attributes
    ----------
    indptr : ndarray of int64, shape (n_dir + 1,)
        Direction d's kept coefficients are entries indptr[d]:indptr[d+1].
    index : ndarray of int32, shape (nnz,)
        Their positions j in the packed coefficient vector (increasing within a direction).
    values : ndarray, shape (nnz, N)
        q^_k^j [Pa m^k per unit acceleration], float32 or float64.
    n_coef : int
        T, the transform length (a power of two).
    dt : float
        Bank sample spacing [s] (rate f = 1/dt).
    c : float
        Speed of sound [m/s].
    t_start : float
        Time of input sample 0 [s].
    tau0 : float
        Retarded time of aligned sample 0, t_start - R_1/c [s].
    n_samples : int
        Input samples per series.
    radii : ndarray, shape (M,)
        Fit radii [m].
    eps : float
        Compression tolerance.
    wavelet : str
        pywt name.
    """

    indptr: np.ndarray
    index: np.ndarray
    values: np.ndarray
    n_coef: int
    dt: float
    c: float
    t_start: float
    tau0: float
    n_samples: int
    radii: np.ndarray
    eps: float
    wavelet: str = WAVELET

    @property
    def n_dir(self) -> int:
        """Number of directions."""
        return len(self.indptr) - 1

    @property
    def n_terms(self) -> int:
        """Number of radial terms N."""
        return self.values.shape[1]

    @property
    def nnz(self) -> int:
        """Kept coefficients, all directions."""
        return len(self.index)

    @property
    def nbytes(self) -> int:
        """Storage of the sparse arrays [bytes]."""
        return int(self.indptr.nbytes + self.index.nbytes + self.values.nbytes)

    def _dir(self, direction: int) -> int:
        d = int(direction)
        if not 0 <= d < self.n_dir:
            raise InputError(f"wavelet PAN: direction index {direction} must be in 0..{self.n_dir - 1}")
        return d

    def dense(self, direction: int) -> np.ndarray:
        """Packed coefficients of one direction, zeros where dropped.

        Parameters
        ----------
        direction : int

        Returns
        -------
        ndarray, shape (N, T)
            q^_k, float64.
        """
        d = self._dir(direction)
        a, b = self.indptr[d], self.indptr[d + 1]
        out = np.zeros((self.n_terms, self.n_coef))
        out[:, self.index[a:b]] = self.values[a:b].T
        return out

    def combined(self, directions, weights=None) -> np.ndarray:
        """Weighted sum of the coefficients of several directions (interpolation in angle; one reconstruction
        serves the sum, paper sec. 4.1).

        Parameters
        ----------
        directions : int or array_like of int
        weights : array_like, optional
            One per direction (default 1).

        Returns
        -------
        ndarray, shape (N, T)
        """
        ds = np.atleast_1d(np.asarray(directions, np.int64))
        w = np.ones(len(ds)) if weights is None else np.atleast_1d(np.asarray(weights, np.float64))
        if w.shape != ds.shape:
            raise InputError(f"wavelet PAN: {len(ds)} directions but {w.size} weights")
        return sum(wi * self.dense(d) for d, wi in zip(ds, w))


def _fourier_shift(x: np.ndarray, shift: np.ndarray, n: int) -> np.ndarray:
    """x (..., n_x) zero-padded to n samples and delayed by ``shift`` samples (broadcast over the leading axes;
    negative = advance), circularly on n samples."""
    X = scipy.fft.rfft(x, n=n, axis=-1)
    k = np.arange(X.shape[-1])
    X *= np.exp(-2j * np.pi * k * (np.asarray(shift, np.float64)[..., None] / n))
    return scipy.fft.irfft(X, n=n, axis=-1)


def _check_eps(eps) -> float:
    try:
        e = float(eps)
    except (TypeError, ValueError):
        e = math.nan
    if not (0.0 < e < 1.0):
        raise InputError(f"wavelet PAN compression: eps = {eps!r} must lie in (0, 1) (coefficients below eps times "
                         "each radius' largest one are dropped); use 0.01-0.04 (Chadwick, Zheng & James 2012, "
                         "sec. 5: 0.04 the largest without audible change), or 1e-10 for near-lossless")
    return e


def _radii(radii, n_terms: int) -> np.ndarray:
    R = np.asarray(radii, np.float64).reshape(-1)
    if R.size < n_terms or n_terms < 1:
        raise InputError(f"wavelet PAN: need at least N = {n_terms} radii, got {R.size}")
    if not (np.all(np.isfinite(R)) and R[0] > 0 and np.all(np.diff(R) > 0)):
        raise InputError(f"wavelet PAN: radii must be positive and increasing, got {R}")
    return R


def compress(series, radii, c: float, dt: float, eps: float, wavelet: str = WAVELET, n_terms: int = 2, *,
             t_start: float = 0.0, dtype=np.float32) -> WaveletField:
    """Wavelet-compress one PAN field (module docstring; paper sec. 4.1).

    Parameters
    ----------
    series : array_like, shape (n_dir, M, n_t)
        Pressure at direction d and radius ``radii[i]`` at times t_start + n dt [Pa per unit acceleration].
    radii : array_like, shape (M,)
        The radii of the series [m], increasing, at least n_terms of them.
    c : float
        Speed of sound of the series [m/s].
    dt : float
        Their sample spacing [s].
    eps : float
        Tolerance in (0, 1).
    wavelet : str, optional
        pywt wavelet (db5: Daubechies, 5 vanishing moments, as the paper).
    n_terms : int, optional
        Radial terms N.
    t_start : float, optional
        Time of sample 0 [s].
    dtype : numpy dtype, optional
        Storage of the kept coefficients (float32 default).

    Returns
    -------
    WaveletField

    Raises
    ------
    InputError
        On eps outside (0, 1), a wrong shape, non-finite samples, bad radii, or non-positive c or dt.
    """
    eps = _check_eps(eps)
    n_terms = int(n_terms)
    R = _radii(radii, n_terms)
    P = np.asarray(series, np.float64)
    if P.ndim != 3 or P.shape[1] != R.size or P.shape[2] < 2:
        raise InputError(f"wavelet PAN: series must have shape (n_dir, M = {R.size}, n_t >= 2), got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise InputError("wavelet PAN: series contain NaN or infinite values")
    if not (np.isfinite(c) and c > 0 and np.isfinite(dt) and dt > 0):
        raise InputError(f"wavelet PAN: c = {c} m/s and dt = {dt} s must be positive")
    n_dir, M, n_t = P.shape
    T = 1 << int(math.ceil(math.log2(1.25 * n_t + GUARD)))
    adv = (R - R[0]) / (float(c) * float(dt))                  # advance of radius i [samples]
    aligned = _fourier_shift(P, -np.broadcast_to(adv, (n_dir, M)), T)
    Ph = wavedec_flat(aligned, wavelet)                         # (n_dir, M, T)
    mag = np.abs(Ph)
    top = mag.max(axis=-1, keepdims=True)
    keep = np.any((mag >= eps * top) & (top > 0), axis=1)       # (n_dir, T)
    A = (R[0] / R[:, None]) ** (np.arange(n_terms)[None, :] + 1.0)   # (M, N), columns scaled by R_1^k
    pinv = np.linalg.pinv(A)                                    # (N, M): one for every coefficient and direction
    scale = R[0] ** (np.arange(n_terms) + 1.0)
    d_idx, j_idx = np.nonzero(keep)                             # row-major: direction-sorted, j increasing
    vals = np.einsum("km,nm->nk", pinv, Ph[d_idx, :, j_idx]) * scale[None, :]
    indptr = np.zeros(n_dir + 1, np.int64)
    indptr[1:] = np.cumsum(np.bincount(d_idx, minlength=n_dir))
    return WaveletField(indptr=indptr, index=j_idx.astype(np.int32), values=vals.astype(dtype), n_coef=T,
                        dt=float(dt), c=float(c), t_start=float(t_start), tau0=float(t_start) - R[0] / float(c),
                        n_samples=int(n_t), radii=R, eps=eps, wavelet=wavelet)


def decompress(wf: WaveletField, direction: int) -> np.ndarray:
    """The terms q_k of one direction on the aligned grid tau0 + n dt (inverse transform of the kept coefficients).

    Parameters
    ----------
    wf : WaveletField
    direction : int

    Returns
    -------
    ndarray, shape (N, T)
        q_k [Pa m^k per unit acceleration].
    """
    return waverec_flat(wf.dense(direction), wf.wavelet)


def evaluate(wf: WaveletField, direction: int, R: float, n_samples: int | None = None) -> np.ndarray:
    """Pressure of the compressed field in one stored direction at distance R, on the input's time grid.

    p(R, t_start + n dt) = s(tau0 + n dt - (R - R_1)/c) with s = sum_k R^{-k} q_k (one inverse transform of the
    coefficient sum), delayed by a Fourier phase ramp on a zero-padded buffer long enough not to wrap.

    Parameters
    ----------
    wf : WaveletField
    direction : int
    R : float
        Distance from the centre of mass [m], > 0.
    n_samples : int, optional
        Output length (default: the input's n_t).

    Returns
    -------
    ndarray, shape (n_samples,)
        [Pa per unit acceleration].

    Raises
    ------
    InputError
        On a bad direction or R <= 0.
    """
    R = float(R)
    if not (np.isfinite(R) and R > 0):
        raise InputError(f"wavelet PAN: distance R = {R} m must be positive")
    n_out = wf.n_samples if n_samples is None else int(n_samples)
    q = wf.dense(direction)
    sh = np.einsum("k,kj->j", R ** -(np.arange(wf.n_terms) + 1.0), q)
    s = waverec_flat(sh, wf.wavelet)
    delay = (R - wf.radii[0]) / (wf.c * wf.dt)
    n = scipy.fft.next_fast_len(max(wf.n_coef, n_out) + int(math.ceil(abs(delay))) + GUARD, real=True)
    return _fourier_shift(s, np.asarray(delay), n)[:n_out]


# ---------------------------------------------------------------------------------------------------------------
def suppress(coeffs, f_bank: float, beta: float, f_out: float):
    """High-frequency suppression (paper sec. 4.2, Algorithm 1).

    Parameters
    ----------
    coeffs : array_like, shape (..., T)
        Packed coefficients (:func:`wavedec_flat`) of signals sampled at f_bank, T a power of two.
    f_bank : float
        Bank sampling rate f [Hz].
    beta : float
        Scale factor: the scaled field's rate is f_bank / beta.
    f_out : float
        Output rate [Hz].

    Returns
    -------
    coeffs : ndarray, shape (..., T / 2^s)
        The first T / 2^s coefficients divided by sqrt(2)^s (the input itself when s = 0).
    rate : float
        f_bank / (2^s beta) [Hz]: in (f_out, 2 f_out] when s > 0, otherwise f_bank / beta <= 2 f_out.
    s : int
        Number of halvings (sample n of the reconstruction sits at original index 2^s n + level_offset(s)).

    Raises
    ------
    InputError
        On a non-positive rate or beta, or a length that is not a power of two.
    """
    for name, v in (("f_bank", f_bank), ("beta", beta), ("f_out", f_out)):
        if not (np.isfinite(v) and v > 0):
            raise InputError(f"high-frequency suppression: {name} = {v} must be positive and finite")
    c = np.asarray(coeffs)
    T = c.shape[-1]
    _levels(T)
    f, s = float(f_bank), 0
    while f / beta > 2.0 * f_out and T > 1:
        f *= 0.5
        T //= 2
        s += 1
    if s == 0:
        return c, f / beta, 0
    return c[..., :T] * 2.0 ** (-0.5 * s), f / beta, s


def _ratio(f_in: float, f_out: float) -> tuple[int, int]:
    fr = Fraction(f_out / f_in).limit_denominator(10000)
    return fr.numerator, fr.denominator


def resample(x, f_in: float, f_out: float) -> np.ndarray:
    """Band-limited resampling along the last axis, zero phase (scipy.signal.resample_poly; module docstring).

    Parameters
    ----------
    x : array_like, shape (..., n)
    f_in, f_out : float
        Rates [Hz].

    Returns
    -------
    ndarray
        Sample m at input position m f_in / f_out (to the rational approximation of the ratio).
    """
    up, down = _ratio(f_in, f_out)
    if up == down:
        return np.asarray(x, np.float64)
    import scipy.signal                    # here, not at import: scipy.signal pulls in scipy.stats (~0.8 s)
    return scipy.signal.resample_poly(np.asarray(x, np.float64), up, down, axis=-1)


def reconstruct(coeffs, wavelet: str, f_bank: float, beta: float, f_out: float):
    """Algorithm 1 then resampling: the signals of packed coefficients, scaled by beta, at the rate f_out.

    Parameters
    ----------
    coeffs : array_like, shape (..., T)
    wavelet : str
    f_bank, beta, f_out : float
        As :func:`suppress`.

    Returns
    -------
    x : ndarray, shape (..., n)
        At rate f_out; sample m at time offset + m / f_out from that of original sample 0.
    offset : float
        Time of output sample 0 from that of original sample 0 [s]: beta (level_offset(s) - 2^s pre) / f_bank.

    Notes
    -----
    The reconstruction is one period of a periodic signal; whatever the coefficient cut spreads before its start
    (the db5 filters reach back about 10 2^s original samples, and delta_s < 0) wraps to its end. The last eighth
    of the period, zero padding for the series of :func:`compress` (its last fifth is), is therefore rolled to
    the front (pre = T / 2^(s+3) samples) before resampling, which itself pads with zeros.
    """
    c, rate, s = suppress(coeffs, f_bank, beta, f_out)
    x = waverec_flat(c, wavelet)
    pre = x.shape[-1] // 8
    x = np.roll(x, pre, axis=-1)
    return resample(x, rate, f_out), beta * (level_offset(wavelet, s) - (1 << s) * pre) / f_bank


def accumulate(wf: WaveletField, direction, amplitudes, times, distances, n_out: int, *, weights=None,
               f_out: float | None = None, beta: float = 1.0, order: int = PHASE_ORDER) -> np.ndarray:
    """Sum of many pulses of one field in one direction, rendered on an output grid (module docstring).

    out(t) = sum_m a_m sum_k (R_m / beta)^{-k} q_k((t - t_m - R_m/c) / beta), t = n / f_out, n < n_out: the
    pulses of the field scaled by beta (paper sec. 3.1: multiply the amplitudes by beta for translation fields,
    beta^2 for rotation ones; distances and times are physical), high frequencies suppressed (Algorithm 1).

    Parameters
    ----------
    wf : WaveletField
    direction : int or array_like of int
        Stored direction(s); with ``weights``, their coefficients are summed before the one reconstruction.
    amplitudes : array_like, shape (n_pulses,)
        a_m (units of the acceleration the field is per).
    times : array_like, shape (n_pulses,)
        Pulse centres t_m [s] (output sample 0 at t = 0).
    distances : array_like, shape (n_pulses,)
        Listener distance R_m from the centre of mass [m].
    n_out : int
        Output samples.
    weights : array_like, optional
        Interpolation weights of the directions.
    f_out : float, optional
        Output rate [Hz] (default the field's own rate 1 / (beta dt): no suppression, no resampling).
    beta : float, optional
        Uniform scale of the object relative to the bank's.
    order : int, optional
        Order of the sub-sample phase expansion.

    Returns
    -------
    ndarray, shape (n_out,)
        [Pa].

    Raises
    ------
    InputError
        On mismatched or non-finite pulse arrays, a non-positive distance, beta or f_out.
    """
    beta = float(beta)
    if not (np.isfinite(beta) and beta > 0):
        raise InputError(f"wavelet PAN synthesis: beta = {beta} must be positive")
    f_bank = 1.0 / wf.dt
    f_out = f_bank / beta if f_out is None else float(f_out)
    a = np.asarray(amplitudes, np.float64).reshape(-1)
    t = np.asarray(times, np.float64).reshape(-1)
    R = np.asarray(distances, np.float64).reshape(-1)
    if not (a.shape == t.shape == R.shape):
        raise InputError(f"wavelet PAN synthesis: {a.size} amplitudes, {t.size} times, {R.size} distances differ")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(t)) and np.all(np.isfinite(R)) and np.all(R > 0)):
        raise InputError("wavelet PAN synthesis: amplitudes, times must be finite and distances positive")
    n_out = int(n_out)
    out = np.zeros(max(n_out, 0))
    if n_out <= 0 or a.size == 0:
        return out
    qh = wf.combined(direction, weights)                        # (N, T): coefficient sum over directions
    g, off = reconstruct(qh, wf.wavelet, f_bank, beta, f_out)   # (N, K) at f_out
    K = g.shape[-1]
    # position (output samples) of kernel sample 0 for each pulse
    x = (t + R / wf.c + beta * wf.tau0 + off) * f_out
    i = np.floor(x + 0.5)
    phi = x - i                                                 # in [-1/2, 1/2)
    live = (i + K > 0) & (i < n_out)
    if not np.any(live):
        return out
    i, phi, a, R = i[live].astype(np.int64), phi[live], a[live], R[live]
    lo = min(0, int(i.min()))
    n = scipy.fft.next_fast_len(n_out - lo + K + 1, real=True)
    w = 2.0 * np.pi * np.fft.rfftfreq(n)                        # rad per sample
    G = scipy.fft.rfft(g, n=n, axis=-1)                         # (N, n_f)
    rinv = (R[None, :] / beta) ** -(np.arange(wf.n_terms)[:, None] + 1.0) * a[None, :]   # (N, n_pulses)
    spec = np.zeros(len(w), np.complex128)
    pos = i - lo
    ph_pow = np.ones_like(phi)
    fact = 1.0
    mw = -1j * w
    mw_pow = np.ones_like(mw)
    for r in range(int(order) + 1):                             # exp(-i w phi) = sum_r (-i w phi)^r / r!
        if r > 0:
            ph_pow = ph_pow * phi
            fact *= r
            mw_pow = mw_pow * mw
        for k in range(wf.n_terms):
            dep = np.bincount(pos, weights=rinv[k] * ph_pow / fact, minlength=n)[:n]
            spec += G[k] * mw_pow * scipy.fft.rfft(dep)
    full = scipy.fft.irfft(spec, n=n)
    return full[-lo:-lo + n_out]
