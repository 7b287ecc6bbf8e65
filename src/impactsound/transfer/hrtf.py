"""Spherical-head HRTF magnitude (Brown & Duda 1998, "A structural model for binaural sound synthesis"), for the
binaural option of modal sound.

A one-pole/one-zero head-shadow filter per ear (Brown & Duda's head-shadow model), with w0 = c / a:

    H(w, theta) = (1 + i alpha(theta) w / (2 w0)) / (1 + i w / (2 w0))
    alpha(theta) = (1 + alpha_min / 2) + (1 - alpha_min / 2) cos(pi theta / theta_min)
    alpha_min = 0.1, theta_min = 150 deg, a = 8.75 cm (average head)

theta is the angle between the ear's outward axis and the direction from the head to the source: 0 = source
on that ear's side (+6 dB at high frequency), theta_min = behind the head on the far side (-20 dB). |H| -> 1 at
low frequency (the head is small against the wavelength). Chadwick, An & James 2009, "Harmonic Shells", sec. 5,
apply |H(w_k, x)| per mode next to |p_k(x)|; the sources do the same per mode and per ear, and the ears are two
listener positions (so the interaural delay comes from the geometry).
"""
from __future__ import annotations

import numpy as np

from ..constants import AIR_C

HEAD_RADIUS = 0.0875      # m
ALPHA_MIN = 0.1
THETA_MIN = np.radians(150.0)


def alpha(theta):
    """Head-shadow zero factor alpha(theta) (module docstring).

    Parameters
    ----------
    theta : float or array_like
        Angle between the ear axis and the source direction [rad].

    Returns
    -------
    ndarray
        alpha, from 2 (theta = 0) down to ALPHA_MIN (theta = THETA_MIN).
    """
    return (1 + ALPHA_MIN / 2) + (1 - ALPHA_MIN / 2) * np.cos(np.pi * np.asarray(theta) / THETA_MIN)


def head_shadow(omega, theta, a: float = HEAD_RADIUS, c: float = AIR_C) -> np.ndarray:
    """Head-shadow magnitude |H(w, theta)| (module docstring).

    Parameters
    ----------
    omega : float or array_like
        Angular frequency [rad/s].
    theta : float or array_like
        Ear angle [rad] (:func:`ear_angle`); broadcast against omega.
    a : float, optional
        Head radius [m].
    c : float, optional
        Speed of sound [m/s].

    Returns
    -------
    ndarray
        |H| (dimensionless).
    """
    w0 = c / a
    x = np.asarray(omega, np.float64) / (2 * w0)
    al = alpha(theta)
    return np.sqrt((1 + (al * x) ** 2) / (1 + x**2))


def ear_angle(ear_axis, head, source) -> np.ndarray:
    """Angle between ear axes and the directions from the head to a source.

    Parameters
    ----------
    ear_axis : array_like, shape (..., 3)
        Unit outward ear axes.
    head : array_like, shape (..., 3)
        Head (ear) positions [m].
    source : array_like, shape (..., 3)
        Source positions [m].

    Returns
    -------
    ndarray, shape (...)
        theta [rad] in [0, pi].
    """
    d = np.asarray(source, np.float64) - np.asarray(head, np.float64)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return np.arccos(np.clip(np.sum(np.asarray(ear_axis) * d, axis=-1), -1.0, 1.0))
