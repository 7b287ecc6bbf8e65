"""Octant symmetry of the six PAN fields of an object symmetric under the three coordinate mirrors.

Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody animations using precomputed soundbanks"
(sec. 4.3): a proxy ellipsoid in its principal frame is unchanged by the mirrors x -> -x, y -> -y, z -> -z, so
its bank stores only the positive octant and the other seven follow with a sign per field.

Mirrors (the paper's order). A point x0 = (x, y, z) has the eight images x_m = D_m x0, D_m = diag(MIRRORS[m]):

    x0 = ( x,  y,  z)   x1 = ( x,  y, -z)   x2 = (-x,  y,  z)   x3 = (-x,  y, -z)
    x4 = ( x, -y,  z)   x5 = ( x, -y, -z)   x6 = (-x, -y,  z)   x7 = (-x, -y, -z)

i.e. m = 4 [y flipped] + 2 [x flipped] + [z flipped]; composing two mirrors XORs their indices. The paper prints
x6 as "(-x,-y-z)"; read as (-x, -y, -z) it would repeat x7, whose signs differ from the x6 column of its table
in p3, p4, p5 (field indices 2..4, below), so (-x, -y, z) is the consistent reading (checked against FDTD solves
in the tests).

Parity of the fields. Field i (indices of :mod:`.solve`: 0..2 translation along x, y, z, the paper's p1..p3;
3..5 rotation about x, y, z about the centre of mass x0 = 0, the paper's p4..p6) solves the exterior wave
equation with the Neumann data grad p . n = -rho z_i(t) g_i(x),
    g_i = e_i . n (i = 0..2),   g_i = (e_{i-3} x x) . n (i = 3..5)
(Chadwick, Zheng & James 2012, "Precomputed acceleration noise for improved rigid-body sound", sec. 4.1).
Let D = diag(s), s in {+-1}^3, map the body onto itself, so n(D x) = D n(x). Then
    translation:  g_i(D x) = e_i . D n(x) = s_i g_i(x);
    rotation k:   e_k = s_k D e_k and D a x D b = det(D) D (a x b) give
                  (e_k x D x) . D n(x) = s_k det(D) (e_k x x) . n(x) = s_k s_x s_y s_z g(x),
                  i.e. s_y s_z for k = x (g ~ -z n_y + y n_z ~ sign(y z)), s_x s_z for y, s_x s_y for z.
If g(D x) = sigma g(x), the function sigma p(D x) solves the same wave equation (the Laplacian is invariant under
the orthogonal D) with the same Neumann data (its normal derivative at x is sigma grad p(D x) . D n(x) =
sigma * (-rho z g(D x)) = -rho z g(x)) and the same zero initial state, so by uniqueness
    p_i(D x, t) = sigma_i p_i(x, t),   sigma = (s_x, s_y, s_z, s_y s_z, s_x s_z, s_x s_y).
With the eight mirrors this is :data:`OCTANT_SIGNS`, row m = mirror x_m, column i = field i:
    p1: + at x0,x1,x4,x5; - at x2,x3,x6,x7     p2: + at x0,x1,x2,x3; - at x4,x5,x6,x7
    p3: + at x0,x2,x4,x6; - at x1,x3,x5,x7     p4: + at x0,x2,x5,x7; - at x1,x3,x4,x6
    p5: + at x0,x3,x4,x7; - at x1,x2,x5,x6     p6: + at x0,x1,x6,x7; - at x2,x3,x4,x5
Every field evaluation then folds: p_i(x) = OCTANT_SIGNS[m, i] p_i(fold(x)), with (fold(x), m) = :func:`fold`.

A coordinate that is exactly 0 (or -0.0) counts as positive (no mirror); on a mirror plane either choice gives the
same value, since there a field odd in that coordinate vanishes.

Directions. :class:`~.field.PANField` stores (theta, phi) directions about the centre of mass (theta from +z,
phi from +x towards +y): mirroring z maps theta -> pi - theta, x maps phi -> pi - phi, y maps phi -> -phi.
:func:`fold_direction` maps a direction to its octant direction (theta, phi in [0, pi/2]) and mirror index, and
:func:`grid_mirror_map` does the same for the nodes of the PANField direction grid, which is itself mirror
symmetric when n_phi is a multiple of 4 (theta_a = (a + 1/2) pi / n_theta is symmetric for every n_theta).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError

#: sign vectors s_m of the eight mirrors, x_m = s_m * x0 (the paper's order x0..x7, module docstring)
MIRRORS = np.array([[1, 1, 1], [1, 1, -1], [-1, 1, 1], [-1, 1, -1],
                    [1, -1, 1], [1, -1, -1], [-1, -1, 1], [-1, -1, -1]], dtype=np.int8)

#: field names in index order (as :mod:`.solve`)
FIELD_NAMES = ("translation x", "translation y", "translation z", "rotation x", "rotation y", "rotation z")

#: p_i(x_m) = OCTANT_SIGNS[m, i] p_i(x0): the table of Chadwick, Zheng & James 2012 (soundbank paper, sec. 4.3),
#: rows x0..x7, columns p1..p6 (fields 0..5); equal to :func:`field_parity` of :data:`MIRRORS` (module docstring)
OCTANT_SIGNS = np.array([
    #  p1  p2  p3  p4  p5  p6
    [+1, +1, +1, +1, +1, +1],     # x0 = ( x,  y,  z)
    [+1, +1, -1, -1, -1, +1],     # x1 = ( x,  y, -z)
    [-1, +1, +1, +1, -1, -1],     # x2 = (-x,  y,  z)
    [-1, +1, -1, -1, +1, -1],     # x3 = (-x,  y, -z)
    [+1, -1, +1, -1, +1, -1],     # x4 = ( x, -y,  z)
    [+1, -1, -1, +1, -1, -1],     # x5 = ( x, -y, -z)
    [-1, -1, +1, -1, -1, +1],     # x6 = (-x, -y,  z)
    [-1, -1, -1, +1, +1, +1],     # x7 = (-x, -y, -z)
], dtype=np.int8)


def field_parity(signs) -> np.ndarray:
    """Signs of the six fields under the mirror D = diag(s) (module docstring):
    (s_x, s_y, s_z, s_y s_z, s_x s_z, s_x s_y).

    Parameters
    ----------
    signs : array_like, shape (..., 3)
        Mirror sign vectors, entries +-1.

    Returns
    -------
    ndarray of int8, shape (..., 6)
    """
    s = np.asarray(signs)
    if s.shape[-1:] != (3,) or not np.all(np.abs(s) == 1):
        raise InputError(f"mirror sign vectors must have shape (..., 3) and entries +-1, got shape {s.shape}")
    s = s.astype(np.int8)
    sx, sy, sz = s[..., 0], s[..., 1], s[..., 2]
    return np.stack([sx, sy, sz, sy * sz, sx * sz, sx * sy], axis=-1).astype(np.int8)


def mirror_index(signs) -> np.ndarray:
    """Index m (0..7) of the mirror with sign vector s: m = 4 [s_y < 0] + 2 [s_x < 0] + [s_z < 0].

    Parameters
    ----------
    signs : array_like, shape (..., 3)
        Sign vectors (only the sign of each entry is read; 0 counts as +).

    Returns
    -------
    ndarray of int64, shape (...)
    """
    neg = np.asarray(signs) < 0
    return (4 * neg[..., 1] + 2 * neg[..., 0] + neg[..., 2]).astype(np.int64)


def mirror_points(points) -> np.ndarray:
    """The eight mirror images x_m = D_m x of each point, in the paper's order.

    Parameters
    ----------
    points : array_like, shape (n, 3)

    Returns
    -------
    ndarray, shape (8, n, 3)
    """
    p = np.asarray(points, np.float64).reshape(-1, 3)
    return MIRRORS[:, None, :].astype(np.float64) * p[None, :, :]


def fold(points) -> tuple[np.ndarray, np.ndarray]:
    """Fold points into the positive octant.

    Parameters
    ----------
    points : array_like, shape (n, 3)
        Points in the object's symmetry frame (centre of mass at the origin, mirror planes the coordinate planes).

    Returns
    -------
    folded : ndarray, shape (n, 3)
        (|x|, |y|, |z|).
    m : ndarray of int64, shape (n,)
        The mirror with points = MIRRORS[m] * folded (0 for a coordinate that is 0 or -0.0).
    """
    p = np.asarray(points, np.float64).reshape(-1, 3)
    return np.abs(p), mirror_index(p)


def unfold_signs(mirror_index) -> np.ndarray:
    """Field signs of mirror(s) m: p_i(x) = unfold_signs(m)[:, i] * p_i(fold(x)).

    Parameters
    ----------
    mirror_index : array_like of int, shape (n,) (or a scalar)
        0..7, as returned by :func:`fold`.

    Returns
    -------
    ndarray of int8, shape (n, 6)

    Raises
    ------
    InputError
        On an index outside 0..7.
    """
    m = np.asarray(mirror_index).reshape(-1)
    if m.size and (not np.issubdtype(m.dtype, np.integer) or m.min() < 0 or m.max() > 7):
        raise InputError("mirror indices must be integers in 0..7")
    return OCTANT_SIGNS[m]


def fold_direction(theta, phi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Octant direction and mirror of directions (theta, phi) (PANField convention: theta from +z, phi from +x
    towards +y).

    z < 0 iff theta > pi/2 (theta -> pi - theta); with phi taken mod 2 pi, x < 0 iff pi/2 < phi < 3 pi/2
    (phi -> pi - phi) and y < 0 iff phi > pi (phi -> -phi). Directions on a mirror plane are not flipped there.

    Parameters
    ----------
    theta, phi : array_like (broadcast together)
        [rad]; theta in [0, pi].

    Returns
    -------
    theta_o, phi_o : ndarray
        Octant direction, both in [0, pi/2] [rad].
    m : ndarray of int64
        Mirror index: direction(theta, phi) = MIRRORS[m] * direction(theta_o, phi_o).

    Raises
    ------
    InputError
        On theta outside [0, pi] or non-finite angles.
    """
    th, ph = np.broadcast_arrays(np.asarray(theta, np.float64), np.asarray(phi, np.float64))
    if not (np.all(np.isfinite(th)) and np.all(np.isfinite(ph))):
        raise InputError("fold_direction: non-finite angle")
    if np.any(th < 0) or np.any(th > math.pi):
        raise InputError("fold_direction: theta must lie in [0, pi]")
    ph = np.mod(ph, 2.0 * math.pi)
    fz = th > 0.5 * math.pi
    fx = (ph > 0.5 * math.pi) & (ph < 1.5 * math.pi)
    fy = ph > math.pi
    th_o = np.where(fz, math.pi - th, th)
    ph_o = np.where(fy, 2.0 * math.pi - ph, ph)            # now in [0, pi]
    ph_o = np.where(fx, math.pi - ph_o, ph_o)              # now in [0, pi/2]
    m = 4 * fy.astype(np.int64) + 2 * fx.astype(np.int64) + fz.astype(np.int64)
    return th_o, np.clip(ph_o, 0.0, 0.5 * math.pi), m


def grid_mirror_map(n_theta: int, n_phi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every node (a, b) of the PANField direction grid (:func:`~.field.direction_angles`), the node of the
    positive octant it mirrors and the mirror: q_i[a, b] = OCTANT_SIGNS[m, i] q_i[a_o, b_o] for a symmetric object.

    theta_a = (a + 1/2) pi / n_theta maps to row n_theta - 1 - a under the z mirror; phi_b = 2 pi b / n_phi to
    column -b (y mirror) and n_phi/2 - b (x mirror), mod n_phi. The octant rows are a <= (n_theta - 1) / 2 and its
    columns b = 0..n_phi/4.

    Parameters
    ----------
    n_theta, n_phi : int
        Grid size; n_phi a multiple of 4 (so that the grid is symmetric under the x and y mirrors).

    Returns
    -------
    a_o, b_o : ndarray of int64, shape (n_theta, n_phi)
        Octant node of each node.
    m : ndarray of int64, shape (n_theta, n_phi)
        Its mirror index.

    Raises
    ------
    InputError
        If n_theta < 1 or n_phi is not a positive multiple of 4.
    """
    n_theta, n_phi = int(n_theta), int(n_phi)
    if n_theta < 1 or n_phi < 4 or n_phi % 4:
        raise InputError(f"grid_mirror_map: n_theta = {n_theta} must be >= 1 and n_phi = {n_phi} a positive "
                         "multiple of 4 (the x mirror maps column b to n_phi/2 - b)")
    a = np.arange(n_theta)[:, None]
    b = np.arange(n_phi)[None, :]
    fz = 2 * a + 1 > n_theta                                # theta_a > pi/2
    fy = 2 * b > n_phi                                      # phi_b > pi
    bq = np.where(fy, n_phi - b, b)                         # in 0..n_phi/2
    fx = 4 * bq > n_phi                                     # pi/2 < phi <= pi after the y fold
    a_o = np.where(fz, n_theta - 1 - a, a)
    b_o = np.where(fx, n_phi // 2 - bq, bq)
    m = 4 * fy.astype(np.int64) + 2 * fx.astype(np.int64) + fz.astype(np.int64)
    shape = (n_theta, n_phi)
    return tuple(np.broadcast_to(v, shape).astype(np.int64) for v in (a_o, b_o, m))


def evaluate_folded(field, field_index: int, points, t=None) -> np.ndarray:
    """Evaluate one field of a mirror-symmetric object through its positive octant:
    p_i(x) = OCTANT_SIGNS[m, i] p_i(fold(x)) with ``field.evaluate`` (e.g. a :class:`~.field.PANField`).

    Parameters
    ----------
    field : object
        With ``evaluate(field_index, points (n, 3), t) -> (n, T)``.
    field_index : int
        0..5.
    points : array_like, shape (n, 3)
        Points in the symmetry frame [m].
    t : array_like, optional
        Passed on.

    Returns
    -------
    ndarray, shape (n, T)
    """
    i = int(field_index)
    if not 0 <= i < 6:
        raise InputError(f"field index {field_index} must be in 0..5")
    folded, m = fold(points)
    return OCTANT_SIGNS[m, i][:, None] * field.evaluate(i, folded, t)
