"""Rigid-body frames: the package's one quaternion -> rotation-matrix conversion and world -> body transforms.

Quaternions are scalar-first unit quaternions (w, x, y, z), as MuJoCo and the event log store them; a body's
rotation R maps body-frame vectors to the world, x_world = R x_body + c with c the world position of the body's
centre of mass, so x_body = R^T (x_world - c). The matrix is the standard one of a unit quaternion (e.g.
Shoemake 1985, "Animating rotation with quaternion curves", SIGGRAPH); it agrees with
``scipy.spatial.transform.Rotation.from_quat(q, scalar_first=True).as_matrix()`` to 2 ulp (tested), and is kept
as our own three lines so that every part of the package rotates with the same bits.
"""
from __future__ import annotations

import numpy as np


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrices of unit quaternions.

    Parameters
    ----------
    q : array_like, shape (n, 4) or (4,)
        Quaternions (w, x, y, z); normalised here.

    Returns
    -------
    ndarray, shape (n, 3, 3)
        Body -> world rotation matrices.
    """
    q = np.asarray(q, np.float64).reshape(-1, 4)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=1),
    ], axis=1)


def to_body(R, c, x) -> np.ndarray:
    """World points into body frames, x_b = R^T (x - c).

    Parameters
    ----------
    R : ndarray, shape (n, 3, 3)
        Body -> world rotations.
    c : ndarray, shape (n, 3)
        World positions of the body origins (centres of mass) [m]; zeros to rotate directions only.
    x : ndarray, shape (n, 3) or (n, L, 3)
        World points [m] (or directions), one (or L) per rotation.

    Returns
    -------
    ndarray, the shape of ``x``
        The points in the body frames [m].
    """
    d = x - (c if x.ndim == 2 else c[:, None, :])
    return np.einsum("nji,nj->ni", R, d) if x.ndim == 2 else np.einsum("nji,nlj->nli", R, d)


def matrix_to_quat(R) -> np.ndarray:
    """Unit quaternions (n, 4) (w, x, y, z), w >= 0, of rotation matrices (n, 3, 3) (SciPy's conversion: the
    inverse of :func:`quat_to_matrix` to rounding)."""
    from scipy.spatial.transform import Rotation
    q = Rotation.from_matrix(np.asarray(R, np.float64).reshape(-1, 3, 3)).as_quat(scalar_first=True)
    return np.where(q[:, :1] < 0, -q, q)
