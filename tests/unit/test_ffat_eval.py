"""The packed FFAT bank evaluator (prefetching, blocked over modes) against a plain per-mode NumPy evaluation of
the same definition: bilinear interpolation of Psi_m on the (theta_i = i pi / (T - 1), phi_j = j pi / T) grid,
periodic in phi, times h0(kR) / (kR)^m (Chadwick, An & James 2009, "Harmonic Shells", sec. 4)."""
import numpy as np

from impactsound.transfer import ffat


def _numpy_eval(mp, x):
    T = mp.T
    R = np.linalg.norm(x, axis=1)
    th = np.arccos(np.clip(x[:, 2] / R, -1, 1))
    ph = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    u = th / np.pi * (T - 1)
    i0 = np.minimum(np.floor(u).astype(int), T - 2)
    fu = u - i0
    v = ph / (2 * np.pi) * (2 * T)
    j0 = np.floor(v).astype(int)
    fv = v - j0
    j0 %= 2 * T
    j1 = (j0 + 1) % (2 * T)
    P = mp.psi.astype(np.complex64).astype(np.complex128)             # the bank stores complex64
    val = ((1 - fu) * ((1 - fv) * P[:, i0, j0] + fv * P[:, i0, j1])
           + fu * ((1 - fv) * P[:, i0 + 1, j0] + fv * P[:, i0 + 1, j1]))
    kr = mp.k * R
    series = sum(val[m] / kr**m for m in range(mp.terms))
    return -1j * np.exp(1j * kr) / kr * series


def test_bank_matches_plain_numpy_across_blocks_poles_and_the_phi_seam():
    rng = np.random.default_rng(7)
    ks = np.linspace(3.0, 40.0, 150)                                  # > 2 blocks of modes, different T
    maps = []
    for k in ks:
        T = ffat.angular_resolution(k)
        maps.append(ffat.FFATMap(k=k, psi=rng.normal(size=(3, T, 2 * T)) + 1j * rng.normal(size=(3, T, 2 * T))))
    bank = ffat.FFATBank.from_maps(maps)
    d = rng.normal(size=(40, 3))
    d[0] = [0, 0, 1]                                                  # poles
    d[1] = [0, 0, -1]
    d[2] = [1, -1e-12, 0.3]                                           # phi just below 2 pi (seam)
    d[3] = [1, 0, -0.2]                                               # phi = 0
    x = d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0.2, 5.0, size=(40, 1))
    got = bank.evaluate(x)
    for j, mp in enumerate(maps):
        ref = _numpy_eval(mp, x)
        assert np.allclose(got[:, j], ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
