"""Mitchell-Netravali cubic pulse psi(t; h) (PAN paper sec. 4.2, eq. 17; specs/pan.md "Pulse basis").

B = 2/3, C = 1/6 member of the Mitchell-Netravali family; with u = |t|/h:

    psi(t; h) = (15 u^3 - 27 u^2 + 14) / 18          for u <= 1
              = (5 (2 - u)^3 - 3 (2 - u)^2) / 18     for 1 <= u <= 2
              = 0                                    otherwise

Properties (tested): psi(0) = 7/9, psi(h) = 1/9, support [-2h, 2h], sum_k psi(t - k h; h) = 1 for all t
(partition of unity), integral psi dt = h. psi is C^1 (its derivative is continuous), dimensionless.

The paper's form (eq. 17) uses y = 1 - u: (-15 y^3 + 18 y^2 + 9 y + 2)/18 and (5 (1+y)^3 - 3 (1+y)^2)/18, which
is the same polynomial (pan.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit


def psi(t, h):
    """psi(t; h) (eq. 17) for any array t [s] and pulse spacing h > 0 [s]. Dimensionless, same shape as t."""
    u = np.abs(np.asarray(t, dtype=np.float64)) / float(h)
    v = 2.0 - u
    inner = (15.0 * u**3 - 27.0 * u**2 + 14.0) / 18.0
    outer = (5.0 * v**3 - 3.0 * v**2) / 18.0
    return np.where(u <= 1.0, inner, np.where(u <= 2.0, outer, 0.0))


@njit(cache=True, nogil=True)
def psi_unit(u):
    """psi(u; 1) for a scalar u (compiled helper for kernels): eq. 17 with h = 1."""
    u = abs(u)
    if u <= 1.0:
        return (15.0 * u * u * u - 27.0 * u * u + 14.0) / 18.0
    if u <= 2.0:
        v = 2.0 - u
        return (5.0 * v * v * v - 3.0 * v * v) / 18.0
    return 0.0


def psi_weights(x):
    """Weights of the four pulses that overlap position x (in units of the spacing), x any float array.

    Returns (j0, w) with j0 = floor(x) - 1 (int64, shape of x) and w (..., 4) = psi(x - j; 1) for
    j = j0 .. j0 + 3, so that sum_j c_j psi(x - j) = sum_m c[j0 + m] w[..., m] (the 4 pulses whose support
    [-2, 2] contains x; a fifth pulse would sit exactly on a support end where psi = 0).
    """
    x = np.asarray(x, dtype=np.float64)
    f = np.floor(x)
    j0 = f.astype(np.int64) - 1
    d = x - f                                                       # in [0, 1)
    # offsets x - j for j = j0..j0+3: 1 + d, d, d - 1, d - 2
    w = np.stack([psi(1.0 + d, 1.0), psi(d, 1.0), psi(d - 1.0, 1.0), psi(d - 2.0, 1.0)], axis=-1)
    return j0, w
