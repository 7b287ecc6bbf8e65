"""Ellipsoidal proxies for acceleration noise: fitting, the bank grid, and the PAN scaling law.

The proxy soundbank of Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody animations using
precomputed soundbanks" (Proc. ACM SIGGRAPH/Eurographics Symposium on Computer Animation), sec. 3. An object O
is replaced by the solid ellipsoid with O's principal axes, O's ratios of principal moments of inertia and O's
volume (sec. 3.3); every such ellipsoid is a uniformly scaled copy of a reference ellipsoid with semi-axes
A' = 0.5 >= B' >= C' (sec. 3.2), and the PAN fields of a scaled object follow from those of the reference by the
scaling law of sec. 3.1 (eq. 10, proof in Appendix A). PAN itself is Chadwick, Zheng & James 2012, "Precomputed
acceleration noise for improved rigid-body sound" (ACM Trans. Graph. 31(4)), implemented in this package.

Frames and spaces
-----------------
object space
    Where O lives (its body frame, or the world at one instant): points x, translational accelerations a,
    angular accelerations alpha.
proxy space
    Centred on O's centre of mass x0, axes along O's principal axes of inertia: x' = Z^T (x - x0),
    a' = Z^T a, alpha' = Z^T alpha (sec. 3.3). Z is a proper rotation (det +1), so alpha, a pseudovector,
    transforms like a vector. The proxy is axis aligned there: x'^2/A^2 + y'^2/B^2 + z'^2/C^2 <= 1, proxy x along
    the longest semi-axis A (the smallest principal moment), y along B, z along the shortest C.
bank space
    Proxy space divided by beta = 2A, where the proxy is the reference ellipsoid (0.5, B/(2A), C/(2A)) whose PAN
    fields the bank stores: x'' = x'/beta, t'' = t/beta.

Field indices follow the PAN module (:mod:`.solve`): 0..2 translation along x, y, z (the paper's i = 1..3),
3..5 rotation about x, y, z (the paper's i = 4..6), about the centre of mass. Times are measured from the pulse
centre (the PAN pulse psi(t; h) is centred on t = 0), which the law needs: it scales t about t = 0.

The scaling law (sec. 3.1, eq. 10): O_beta = O uniformly scaled by beta > 0 about its centre of mass; if
p_i^{(h)} are O's fields for the pulse psi(t; h), the fields of O_beta for the pulse psi(t; beta h) are

    P_i^{(beta h)}(x, t) = beta   p_i^{(h)}(x / beta, t / beta)     translation (i = 0..2)
    P_i^{(beta h)}(x, t) = beta^2 p_i^{(h)}(x / beta, t / beta)     rotation    (i = 3..5)

per unit acceleration [m/s^2] or angular acceleration [rad/s^2]: the rotation fields gain the extra beta of the
lever arm x - x0. It is exact for the wave equation with the rigid-body Neumann condition (Appendix A), and
exact on the staggered FDTD grid too when the grid spacing and step scale with the object (tests).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import MeshError

#: the reference proxies' longest semi-axis A' (sec. 3.2: ellipsoids of unit length along x)
BANK_A = 0.5
#: the bank's values of B' and C': 0.025 + 0.0475 k, k = 0..10 (sec. 3.2 and 5: 11 values, 66 ellipsoids)
BANK_AXIS_VALUES = 0.025 + 0.0475 * np.arange(11)

#: smallest accepted C/A of a fitted proxy. Two reasons. Numerically, a flat object (a lamina) has D3 = D1 + D2
#: exactly (perpendicular-axis theorem), so its C^2 ~ D1 + D2 - D3 is cancellation noise of relative size
#: 1e-16..1e-12 of A^2 (C/A ~ 1e-8..1e-6), far below this threshold. Physically, the bank's thinnest entry has
#: C'/A' = 0.05; an object with C/A < 1e-3 would be represented by an ellipsoid at least 50 times thicker, and its
#: volume is under 1e-3 of that of the ellipsoid spanned by its two long axes: foil-like objects the proxy model
#: does not describe (a 0.1 mm sheet of 10 cm still passes).
MIN_AXIS_RATIO = 1e-3

#: relative tolerance on the inertia tensor's asymmetry, |I - I^T| <= tol |I|
_SYMMETRY_TOL = 1e-8


class DegenerateProxyError(MeshError):
    """An object has no meaningful ellipsoidal proxy (:func:`fit_proxy`).

    Attributes
    ----------
    reason : str
        Why, in words (also in the message).
    name : str
        The object's name as given to the fit ('' if none).
    """

    def __init__(self, reason: str, name: str = ""):
        self.reason = reason
        self.name = name
        who = f"{name}: " if name else ""
        super().__init__(f"{who}no ellipsoidal proxy for acceleration noise: {reason}")


@dataclass(frozen=True)
class Proxy:
    """The solid ellipsoid that stands for an object (sec. 3.3).

    Attributes
    ----------
    semi_axes : ndarray, shape (3,)
        (A, B, C) [m], A >= B >= C > 0, along proxy x, y, z.
    rotation : ndarray, shape (3, 3)
        Z: its columns are the proxy axes (the principal axes of inertia, smallest moment first) in object
        space; a proper rotation (det +1). x' = Z^T (x - x0).
    center : ndarray, shape (3,)
        x0, the centre of mass in object space [m].
    volume : float
        The object's volume [m^3], which the proxy's (4/3) pi A B C equals.
    """

    semi_axes: np.ndarray
    rotation: np.ndarray
    center: np.ndarray
    volume: float

    @property
    def beta(self) -> float:
        """Scale factor from the bank's reference ellipsoid (A' = 0.5) to the proxy: beta = 2A (sec. 3.3)."""
        return 2.0 * float(self.semi_axes[0])

    @property
    def ratios(self) -> tuple[float, float]:
        """(B/A, C/A), both in (0, 1]."""
        A, B, C = (float(v) for v in self.semi_axes)
        return B / A, C / A

    @property
    def bank_axes(self) -> np.ndarray:
        """(A', B', C') = (A, B, C)/beta: the proxy in bank space, A' = 0.5."""
        return np.asarray(self.semi_axes, np.float64) / self.beta


def _principal(inertia: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments (ascending) and a proper rotation of principal axes of a 3x3 inertia tensor."""
    I = np.asarray(inertia, np.float64)
    if I.shape != (3, 3):
        raise DegenerateProxyError(f"inertia tensor has shape {I.shape}, not (3, 3)", name)
    if not np.all(np.isfinite(I)):
        raise DegenerateProxyError("inertia tensor is not finite (an open or degenerate mesh?)", name)
    scale = float(np.abs(I).max())
    if scale == 0.0:
        raise DegenerateProxyError("inertia tensor is zero", name)
    if float(np.abs(I - I.T).max()) > _SYMMETRY_TOL * scale:
        raise DegenerateProxyError("inertia tensor is not symmetric", name)
    D, Z = np.linalg.eigh(0.5 * (I + I.T))
    if D[0] <= 0.0:
        raise DegenerateProxyError(f"inertia tensor is not positive definite (principal moments {D.tolist()}; "
                                   "an inverted mesh?)", name)
    if np.linalg.det(Z) < 0:
        Z[:, 2] = -Z[:, 2]
    return D, Z


def fit_proxy_from_inertia(volume: float, inertia, center=(0.0, 0.0, 0.0), *, name: str = "") -> Proxy:
    """Fit the ellipsoidal proxy to a volume and an inertia tensor (sec. 3.3; :func:`fit_proxy` for a mesh).

    With I = Z D Z^T, D = diag(D1 <= D2 <= D3), a solid ellipsoid of mass m and semi-axes A >= B >= C along the
    columns of Z has the moments (eq. 11)

        D1 = (m/5)(B^2 + C^2),   D2 = (m/5)(A^2 + C^2),   D3 = (m/5)(A^2 + B^2),

    whose solution is

        A^2 = (5/2m)(D2 + D3 - D1),   B^2 = (5/2m)(D1 + D3 - D2),   C^2 = (5/2m)(D1 + D2 - D3),

    ordered A >= B >= C because A^2 - B^2 = (5/m)(D2 - D1) and B^2 - C^2 = (5/m)(D3 - D2). The proxy is this
    ellipsoid scaled uniformly so that (4/3) pi A B C = volume (same density, hence same mass as the object).
    Only the ratios of the moments survive that rescaling, so the inertia may be given for any uniform
    density (per unit density [m^5], or for the object's mass [kg m^2]) and the mass m drops out.

    Parameters
    ----------
    volume : float
        Object volume [m^3].
    inertia : array_like, shape (3, 3)
        Inertia tensor about the centre of mass, object axes, any uniform density.
    center : array_like, shape (3,), optional
        Centre of mass x0 in object space [m].
    name : str, optional
        Names the object in a :class:`DegenerateProxyError`.

    Returns
    -------
    Proxy

    Raises
    ------
    DegenerateProxyError
        (a :class:`~impactsound.errors.MeshError`) with the reason, when the object has no meaningful proxy:
        a non-positive or non-finite volume; a non-finite, zero, asymmetric or indefinite inertia tensor; moments
        with D3 >= D1 + D2 (a flat object: C^2 <= 0); or C/A < :data:`MIN_AXIS_RATIO` (a foil: see there). A
        caller catches it and goes on without acceleration noise for that object, warning with the object's name.
    """
    try:
        V = float(volume)
    except (TypeError, ValueError):
        raise DegenerateProxyError(f"volume {volume!r} is not a number", name) from None
    if not (math.isfinite(V) and V > 0):
        raise DegenerateProxyError(f"volume {V} m^3 is not positive (a flat, open or inverted mesh?)", name)
    x0 = np.asarray(center, np.float64).reshape(3)
    if not np.all(np.isfinite(x0)):
        raise DegenerateProxyError("centre of mass is not finite", name)
    D, Z = _principal(inertia, name)
    D1, D2, D3 = (float(d) for d in D)
    sq = np.array([D2 + D3 - D1, D1 + D3 - D2, D1 + D2 - D3])   # (A^2, B^2, C^2) * 2m/5
    if sq[2] <= 0.0:
        raise DegenerateProxyError(f"flat object: principal moments {D.tolist()} give C^2 <= 0 "
                                   "(D3 >= D1 + D2)", name)
    axes = np.sqrt(sq)
    if axes[2] < MIN_AXIS_RATIO * axes[0]:
        raise DegenerateProxyError(f"flat object: C/A = {axes[2] / axes[0]:.3g} < {MIN_AXIS_RATIO:g}", name)
    k = (3.0 * V / (4.0 * math.pi * float(np.prod(axes)))) ** (1.0 / 3.0)
    return Proxy(semi_axes=k * axes, rotation=Z, center=x0, volume=V)


def fit_proxy(mesh, *, name: str = "") -> Proxy:
    """Fit the ellipsoidal proxy of a watertight mesh (sec. 3.3; the solve is :func:`fit_proxy_from_inertia`).

    Uses trimesh's mass properties: ``mesh.volume``, ``mesh.moment_inertia`` (about ``mesh.center_mass``, mesh
    axes) and ``mesh.center_mass``.

    Parameters
    ----------
    mesh : trimesh.Trimesh
        Watertight, outward-oriented mesh [m].
    name : str, optional
        Names the object in a :class:`DegenerateProxyError`.

    Returns
    -------
    Proxy

    Raises
    ------
    DegenerateProxyError
        As :func:`fit_proxy_from_inertia`, and for a mesh that is not watertight (its mass properties are
        meaningless).
    """
    if not mesh.is_watertight:
        raise DegenerateProxyError("mesh is not watertight: its volume and inertia are meaningless", name)
    with warnings.catch_warnings():                  # a zero-volume mesh divides by zero in center_mass
        warnings.simplefilter("ignore", RuntimeWarning)
        return fit_proxy_from_inertia(mesh.volume, mesh.moment_inertia, mesh.center_mass, name=name)


# ---- the bank grid ---------------------------------------------------------------------------------------------
def bank_entries() -> np.ndarray:
    """The bank's reference ellipsoids (sec. 3.2): A' = 0.5 >= B' >= C', B' and C' from :data:`BANK_AXIS_VALUES`.

    Returns
    -------
    ndarray, shape (66, 2)
        (B', C') [m] per entry, ordered by B' then C' (both ascending): entry index kb (kb + 1)/2 + kc for
        B' = value[kb], C' = value[kc], kc <= kb.
    """
    v = BANK_AXIS_VALUES
    return np.array([(v[kb], v[kc]) for kb in range(len(v)) for kc in range(kb + 1)])


def nearest_entry(proxy: Proxy, min_axis: float = 0.0) -> tuple[int, tuple[float, float], float]:
    """The bank entry that stands for a proxy (sec. 3.3: nearest entry, no interpolation).

    Metric: Euclidean distance in the bank plane (B', C') between the entry and the proxy's own
    (B/(2A), C/(2A)), i.e. in (B/A, C/A) scaled by A' = 0.5. The grid is a product grid cut by B' >= C', so this
    is rounding each coordinate to the nearest grid value (ties go to the lower entry index); proxies thinner or
    rounder than the grid get its edge (C/A < 0.05 maps to C' = 0.025).

    Parameters
    ----------
    proxy : Proxy
    min_axis : float, optional
        Only entries with C' >= min_axis [m] (those a bank's grid resolves: :meth:`.soundbank.BankPreset.resolves`).

    Returns
    -------
    index : int
        Row of :func:`bank_entries`.
    (B', C') : tuple of float
        The entry [m].
    beta : float
        2A: the proxy is the entry scaled by beta (its shape only approximately, by the grid's resolution).
    """
    _, Bp, Cp = proxy.bank_axes
    E = bank_entries()
    d2 = (E[:, 0] - Bp) ** 2 + (E[:, 1] - Cp) ** 2
    d2[E[:, 1] < float(min_axis)] = np.inf
    i = int(np.argmin(d2))
    return i, (float(E[i, 0]), float(E[i, 1])), proxy.beta


# ---- object space <-> proxy space <-> bank space -------------------------------------------------------------------
def to_proxy_space(Z, x0, points=None, accelerations=None, angular_accelerations=None):
    """Map a query from object space to proxy space (sec. 3.3): x' = Z^T (x - x0), a' = Z^T a, alpha' = Z^T alpha.

    Parameters
    ----------
    Z : array_like, shape (3, 3)
        Proxy axes as columns (:attr:`Proxy.rotation`), a proper rotation.
    x0 : array_like, shape (3,)
        Centre of mass [m].
    points : array_like, shape (..., 3), optional
        Points [m].
    accelerations : array_like, shape (..., 3), optional
        Translational accelerations [m/s^2] (or any vectors; not shifted by x0).
    angular_accelerations : array_like, shape (..., 3), optional
        Angular accelerations [rad/s^2] (pseudovectors: as vectors, Z being proper).

    Returns
    -------
    tuple
        (points', accelerations', angular_accelerations'), None where the input was None.
    """
    Z = np.asarray(Z, np.float64)
    x0 = np.asarray(x0, np.float64)
    rot = (lambda v: None if v is None else np.asarray(v, np.float64) @ Z)       # rows: (Z^T v^T)^T = v Z
    return (None if points is None else (np.asarray(points, np.float64) - x0) @ Z,
            rot(accelerations), rot(angular_accelerations))


def from_proxy_space(Z, x0, points=None, accelerations=None, angular_accelerations=None):
    """Inverse of :func:`to_proxy_space`: x = x0 + Z x', a = Z a', alpha = Z alpha'.

    Parameters and Returns as :func:`to_proxy_space`, with the roles of the spaces swapped.
    """
    Z = np.asarray(Z, np.float64)
    x0 = np.asarray(x0, np.float64)
    rot = (lambda v: None if v is None else np.asarray(v, np.float64) @ Z.T)
    return (None if points is None else np.asarray(points, np.float64) @ Z.T + x0,
            rot(accelerations), rot(angular_accelerations))


def to_bank_space(beta: float, points=None, times=None):
    """Proxy space to bank space: x'' = x'/beta, t'' = t/beta (the arguments of eq. 10).

    Parameters
    ----------
    beta : float
        Scale factor (:attr:`Proxy.beta`), > 0.
    points : array_like, shape (..., 3), optional
        Proxy-space points [m].
    times : array_like, optional
        Times from the pulse centre [s].

    Returns
    -------
    tuple
        (points'', times''), None where the input was None.
    """
    b = _beta(beta)
    return (None if points is None else np.asarray(points, np.float64) / b,
            None if times is None else np.asarray(times, np.float64) / b)


def from_bank_space(beta: float, points=None, times=None):
    """Inverse of :func:`to_bank_space`: x' = beta x'', t = beta t''."""
    b = _beta(beta)
    return (None if points is None else np.asarray(points, np.float64) * b,
            None if times is None else np.asarray(times, np.float64) * b)


def _beta(beta) -> float:
    b = float(beta)
    if not (math.isfinite(b) and b > 0):
        raise ValueError(f"scale factor beta = {beta} must be positive and finite")
    return b


def _field_index(field_index) -> int:
    i = int(field_index)
    if not 0 <= i < 6:
        raise ValueError(f"field index {field_index} must be in 0..5 (0-2 translation, 3-5 rotation)")
    return i


def pressure_scale(field_index: int, beta: float) -> float:
    """The amplitude factor of eq. 10: beta for translation fields (0..2), beta^2 for rotation fields (3..5)."""
    i, b = _field_index(field_index), _beta(beta)
    return b if i < 3 else b * b


def scaled_field(field: Callable, field_index: int, beta: float) -> Callable:
    """The field of the object scaled by beta, from the unscaled object's field (eq. 10).

    Parameters
    ----------
    field : callable
        field(x, t) -> p: the unscaled object's field i for the pulse psi(t; h), x [m] of shape (n, 3) in its
        frame (centre of mass at the origin), t [s] from the pulse centre; e.g.
        ``lambda x, t: pan_field.evaluate(i, x, t)`` for a bank entry.
    field_index : int
        i, 0..5 (module docstring).
    beta : float
        Scale factor, > 0.

    Returns
    -------
    callable
        P(x, t) = beta^s field(x / beta, t / beta), s = 1 (translation) or 2 (rotation): the scaled object's
        field for the pulse psi(t; beta h), same shapes and units as ``field``.
    """
    s = pressure_scale(field_index, beta)
    b = _beta(beta)

    def P(x, t):
        return s * np.asarray(field(np.asarray(x, np.float64) / b, np.asarray(t, np.float64) / b))

    return P


def scale_samples(field_index: int, beta: float, points, times, pressure):
    """Eq. 10 on samples: values p of field i at (points, times) are the scaled object's values
    beta^s p at (beta points, beta times).

    Parameters
    ----------
    field_index : int
        i, 0..5.
    beta : float
        Scale factor, > 0.
    points : array_like, shape (..., 3)
        Unscaled-object points [m].
    times : array_like
        Times from the pulse centre [s].
    pressure : array_like
        Samples of p_i^{(h)} [Pa per unit acceleration].

    Returns
    -------
    tuple of ndarray
        (beta points, beta times, beta^s pressure).
    """
    s = pressure_scale(field_index, beta)
    x, t = from_bank_space(beta, points, times)
    return x, t, s * np.asarray(pressure, np.float64)
