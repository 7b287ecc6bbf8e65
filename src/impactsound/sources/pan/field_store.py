"""Wavelet storage of an object's own PAN field coefficients.

Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody animations using precomputed soundbanks",
sec. 4.1, store the bank's fields as thresholded Daubechies wavelet coefficients; the same representation serves
an object's own field (their mug: 1131 -> 76 MB). Here it is applied to what an own field holds, the fitted
expansion coefficients q_k^j of the PAN paper's eqs. 20-22 (:mod:`.field`): for each of the six fields and each
direction of the grid, the N radial terms' coefficient series over j.

Per field i and direction d: each term's series (length n_coef, zero-padded to the power of two T) gets the
full-depth periodized db5 transform (:func:`.wavelet.wavedec_flat`); a wavelet coefficient index is kept where
any term's magnitude is at least ``eps`` times that term's largest over *all directions* of the field, and all N
terms are stored there (values (nnz, N), float32; indices int16 when T allows). The eps is the bank's; the bank
(:func:`.wavelet.compress`) compares with each direction's own largest instead. Measured on the demo's steel ball
and a 16 mm polycarbonate die (5 x 10 directions): the per-direction rule stores them only 4.9x and 3.8x smaller
than dense float32 (errors 0.7-1.6 %), because it keeps as many coefficients in the quiet directions, and in
the rotation fields of a sphere, which are silent by symmetry, as in the loud ones; the rule here stores them 7.4x
and 6.3x smaller with errors 0.9-2.6 % per field (the bank's own stored errors: mean 2.8 %). Reading inverts the
transform and truncates to n_coef.

The error of the stored form is measured when it is made: per field, the relative L2 error of the reconstructed
coefficients against the fitted ones over all directions and terms (the pressure at any radius is a fixed linear
map of them per direction, eq. 20, so this bounds its error up to the terms' weighting). A field computed now is
used in its stored (reconstructed) form, so a render is the same whether the field came from the cache or not.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import AssetError, InputError
from .wavelet import WAVELET, wavedec_flat, waverec_flat

#: arrays of the stored form, per field i: ``qw<i>_indptr`` (n_dir + 1), ``qw<i>_index`` (nnz), ``qw<i>_values``
#: (nnz, N)
PREFIX = "qw"


def _T(n_coef: int) -> int:
    return 1 << max(1, int(math.ceil(math.log2(max(int(n_coef), 2)))))


def compress_q(q: np.ndarray, eps: float, wavelet: str = WAVELET) -> tuple[dict, dict]:
    """The stored form of a field's coefficients q (6, n_theta, n_phi, N, n_coef) at tolerance eps.

    Returns
    -------
    arrays : dict
        The sparse arrays (module docstring).
    info : dict
        eps, wavelet, T, nnz, bytes of the dense float32 and the stored form, and ``errors`` (6,): the relative L2
        error of each field's reconstruction.

    Raises
    ------
    InputError
        On eps outside (0, 1) or a wrong shape.
    """
    if not (0 < float(eps) < 1):
        raise InputError(f"PAN field storage: eps = {eps} must lie in (0, 1)")
    q = np.asarray(q, np.float64)
    if q.ndim != 5:
        raise InputError(f"PAN field storage: q must have shape (6, n_theta, n_phi, N, n_coef), got {q.shape}")
    nf, nth, nph, N, n_coef = q.shape
    T = _T(n_coef)
    arrays, errors, nnz = {}, [], 0
    for i in range(nf):
        x = np.zeros((nth * nph, N, T))
        x[..., :n_coef] = q[i].reshape(nth * nph, N, n_coef)
        C = wavedec_flat(x, wavelet)                                   # (n_dir, N, T)
        mag = np.abs(C)
        top = mag.max(axis=(0, 2), keepdims=True)                      # each term's largest over the field
        keep = np.any((mag >= float(eps) * top) & (top > 0), axis=1)   # (n_dir, T)
        d_idx, j_idx = np.nonzero(keep)
        vals = C[d_idx, :, j_idx].astype(np.float32)                   # (nnz, N)
        indptr = np.zeros(nth * nph + 1, np.int64)
        indptr[1:] = np.cumsum(np.bincount(d_idx, minlength=nth * nph))
        arrays[f"{PREFIX}{i}_indptr"] = indptr.astype(np.int32)
        arrays[f"{PREFIX}{i}_index"] = j_idx.astype(np.int16 if T <= 32767 else np.int32)
        arrays[f"{PREFIX}{i}_values"] = vals
        rec = _field_dense(indptr, j_idx, vals, N, T, n_coef, wavelet)
        ref = q[i].reshape(nth * nph, N, n_coef)
        nrm = float(np.linalg.norm(ref))
        errors.append(float(np.linalg.norm(rec - ref) / nrm) if nrm > 0 else 0.0)
        nnz += len(j_idx)
    stored = sum(int(a.nbytes) for a in arrays.values())
    info = {"eps": float(eps), "wavelet": wavelet, "T": int(T), "nnz": int(nnz), "errors": errors,
            "dense_bytes": int(np.prod(q.shape)) * 4, "stored_bytes": int(stored),
            "rule": "a wavelet index of a direction is kept where a term's |c| >= eps x that term's largest over "
                    "the field's directions (db5, Chadwick, Zheng & James 2012, soundbank paper, sec. 4.1)"}
    return arrays, info


def _field_dense(indptr, index, values, N: int, T: int, n_coef: int, wavelet: str) -> np.ndarray:
    n_dir = len(indptr) - 1
    C = np.zeros((n_dir, N, T))
    d = np.repeat(np.arange(n_dir), np.diff(indptr))
    C[d, :, np.asarray(index, np.int64)] = np.asarray(values, np.float64)
    return waverec_flat(C, wavelet)[..., :n_coef]


def decompress_q(arrays: dict, shape, info: dict) -> np.ndarray:
    """Coefficients q of the given shape (6, n_theta, n_phi, N, n_coef) from their stored form (float32).

    Raises
    ------
    AssetError
        When arrays are missing or do not fit the shape.
    """
    nf, nth, nph, N, n_coef = (int(v) for v in shape)
    T, wavelet = int(info["T"]), str(info["wavelet"])
    out = np.empty((nf, nth, nph, N, n_coef), np.float32)
    try:
        for i in range(nf):
            indptr = np.asarray(arrays[f"{PREFIX}{i}_indptr"], np.int64)
            index = np.asarray(arrays[f"{PREFIX}{i}_index"], np.int64)
            values = np.asarray(arrays[f"{PREFIX}{i}_values"])
            if len(indptr) != nth * nph + 1 or values.shape != (len(index), N) or indptr[-1] != len(index) \
                    or (len(index) and (index.min() < 0 or index.max() >= T)):
                raise ValueError(f"field {i}: sparse arrays do not fit {nth} x {nph} directions, {N} terms, T {T}")
            out[i] = _field_dense(indptr, index, values, N, T, n_coef, wavelet).reshape(nth, nph, N, n_coef)
    except (KeyError, ValueError) as exc:
        raise AssetError(f"PAN field: its wavelet-stored coefficients are unusable ({exc}); delete the file to "
                         "recompute it") from None
    return out
