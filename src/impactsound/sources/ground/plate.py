"""Floors that are plates: a modal Kirchhoff plate struck by each impact, radiating into the half-space above it.

Qu & James 2019 ("Ground sound") model the floor as an elastic half-space, which a suspended wooden floor, a floor
panel or a table top is not: they ring. Here (the package's model, chosen per scene by ``[ground] model =
"plate"``) the floor is a thin rectangular plate of the ground's material, length L_x along x, width L_y along y,
thickness h, centred at ``center`` on the ground plane, simply supported on its edges:

* Modes (Kirchhoff plate theory; Leissa 1969, "Vibration of Plates", ch. 4): with D = E h^3 / (12 (1 - nu^2))
  and u, v the coordinates from the plate's corner,
      phi_mn(u, v) = 2 / sqrt(rho h L_x L_y) sin(m pi u / L_x) sin(n pi v / L_y)      (mass-normalised)
      omega_mn = sqrt(D / (rho h)) ((m pi / L_x)^2 + (n pi / L_y)^2),
  damped as the material's objects are (Rayleigh damping alpha, beta: xi = (alpha / omega + beta omega) / 2).
* Forcing: an impact of normal impulse J at (u, v) pushes the plate down with the Hertz half-sine of the event's
  contact time (the shared contact stage, as for the modal source), so mode mn gets the modal impulse
  -phi_mn(u, v) J; its response is the exact closed form of the modal kernel (sources/modal_kernel.py).
* Radiation: the plate's normal acceleration radiates as a baffled plane (the floor around it is rigid), by the
  Rayleigh integral p = (rho_a / 2 pi) int a_n(x', t - R/c) / R dA. Per mode and listener the transfer at the
  mode's frequency, T = (rho_a / 2 pi) int phi e^{-i k R} / R dA, is integrated by a tensor Gauss-Legendre rule
  with 4 nodes per shortest wavelength (acoustic, bending, or 4 x the listener's height) plus 8, and the mode's
  pressure is Re(T) q'' - omega Im(T) q' (= Im(T q'') for a mode ringing at omega; during contact q'' carries
  the force's direct push), heard from the plate's nearest point on (the phase of T carries the rest of the
  path).

What it leaves out: an unbaffled plate (a table top in open air) radiates less at low frequency (the acoustic
short circuit round its edges), which this baffled model does not have; other supports than simple ones;
the air's loading of the plate. Impacts off the plate's footprint make no floor sound (a warning says how many).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError

#: Gauss-Legendre nodes per shortest wavelength (acoustic, bending, or 4 x the listener's height) of the
#: Rayleigh quadrature, plus 8 (_gauss)
POINTS_PER_WAVELENGTH = 4.0
#: modes are integrated this many at a time (memory: points x modes complex numbers)
MODE_CHUNK = 16


@dataclass(frozen=True)
class PlateFloor:
    """A simply supported rectangular plate in the ground plane (module docstring). SI units."""

    length: float                 # L_x [m]
    width: float                  # L_y [m]
    thickness: float              # h [m]
    center: tuple                 # (x, y) of its centre [m]
    material: object              # Material: E [Pa], nu, rho [kg/m^3], Rayleigh damping

    @property
    def rigidity(self) -> float:
        """D = E h^3 / (12 (1 - nu^2)) [N m]."""
        m = self.material
        return float(m.E) * self.thickness**3 / (12.0 * (1.0 - float(m.nu) ** 2))

    @property
    def areal_mass(self) -> float:
        """rho h [kg/m^2]."""
        return float(self.material.rho) * self.thickness

    def modes(self, f_max: float):
        """(m, n, omega): every mode below f_max [Hz], by increasing frequency."""
        c = math.sqrt(self.rigidity / self.areal_mass)
        w_max = 2.0 * math.pi * float(f_max)
        m_top = int(math.floor(self.length / math.pi * math.sqrt(w_max / c))) + 1
        n_top = int(math.floor(self.width / math.pi * math.sqrt(w_max / c))) + 1
        mm, nn = np.meshgrid(np.arange(1, m_top + 1), np.arange(1, n_top + 1), indexing="ij")
        om = c * ((mm * math.pi / self.length) ** 2 + (nn * math.pi / self.width) ** 2)
        keep = om <= w_max
        order = np.argsort(om[keep], kind="stable")
        return mm[keep][order], nn[keep][order], om[keep][order]

    def ringing_modes(self, f_max: float):
        """(m, n, omega, xi): the modes below f_max [Hz] that ring (damping ratio xi < 1 from the material's
        Rayleigh constants), by increasing frequency."""
        m, n, om = self.modes(f_max)
        xi = np.asarray(self.material.damping_ratio(om), np.float64) * np.ones_like(om)
        ring = xi < 1                               # overdamped modes do not ring
        return m[ring], n[ring], om[ring], xi[ring]

    def ring_time(self, f_max: float, cutoff_db: float) -> float | None:
        """Seconds until the slowest ringing mode below f_max has decayed by cutoff_db (0 without modes, None
        when one is undamped: its ring never ends)."""
        _, _, om, xi = self.ringing_modes(f_max)
        if not len(om):
            return 0.0
        sigma = xi * om
        if not np.all(sigma > 0):
            return None
        return float(np.log(10.0 ** (cutoff_db / 20.0)) / sigma.min())

    def local(self, xy) -> np.ndarray:
        """(u, v) from the plate's corner of world points (x, y)."""
        xy = np.atleast_2d(np.asarray(xy, np.float64))
        return xy[:, :2] - (np.asarray(self.center, np.float64) - [0.5 * self.length, 0.5 * self.width])

    def inside(self, xy) -> np.ndarray:
        uv = self.local(xy)
        return (uv[:, 0] >= 0) & (uv[:, 0] <= self.length) & (uv[:, 1] >= 0) & (uv[:, 1] <= self.width)

    def shapes(self, xy, m, n) -> np.ndarray:
        """phi_mn at world points (P, 2): (P, M) [1/sqrt(kg)] (mass-normalised)."""
        uv = self.local(xy)
        a = 2.0 / math.sqrt(self.areal_mass * self.length * self.width)
        return a * (np.sin(np.pi * np.outer(uv[:, 0], m) / self.length)
                    * np.sin(np.pi * np.outer(uv[:, 1], n) / self.width))

    def bending_wavelength(self, omega) -> np.ndarray:
        """Flexural wavelength 2 pi (D / (rho h omega^2))^(1/4) [m]."""
        return 2.0 * np.pi * (self.rigidity / (self.areal_mass * np.asarray(omega, np.float64) ** 2)) ** 0.25


def _gauss(length: float, waves: float):
    """Gauss-Legendre nodes and weights on [0, length] for an integrand of about ``waves`` wavelengths: enough
    nodes that the rule converges (about 4 per wavelength, plus 8)."""
    k = int(math.ceil(waves)) + 8
    x, w = np.polynomial.legendre.leggauss(k)
    return 0.5 * length * (x + 1.0), 0.5 * length * w


def nearest_distance(plate: PlateFloor, listener, z0: float) -> float:
    """Distance [m] from a listener to the plate's nearest point (the first arrival of its sound)."""
    uv = plate.local(np.asarray(listener, np.float64)[None, :2])[0]
    du = max(0.0, -uv[0], uv[0] - plate.length)
    dv = max(0.0, -uv[1], uv[1] - plate.width)
    return math.sqrt(du * du + dv * dv + (float(listener[2]) - z0) ** 2)


def transfer(plate: PlateFloor, listener, m, n, omega, *, z0: float, c: float, rho_a: float,
             points_per_wavelength: float = POINTS_PER_WAVELENGTH) -> np.ndarray:
    """Rayleigh transfer T_mn = (rho_a / 2 pi) int phi_mn e^{-i k R} / R dA of each mode to a listener (module
    docstring): pressure [Pa] per unit modal acceleration [m sqrt(kg) / s^2], complex (e^{+i omega t}).

    Each chunk of modes shares one Gauss-Legendre grid, fine enough for its highest mode."""
    x = np.asarray(listener, np.float64)
    h = float(x[2]) - z0
    if not h > 0:
        raise InputError(f"plate floor: the listener at z = {x[2]:g} m is not above the floor z = {z0:g} m")
    m, n, omega = (np.asarray(a) for a in (m, n, omega))
    out = np.empty(len(omega), np.complex128)
    k_all = omega / c
    corner = np.asarray(plate.center, np.float64) - [0.5 * plate.length, 0.5 * plate.width]
    a = 2.0 / math.sqrt(plate.areal_mass * plate.length * plate.width)
    for j0 in range(0, len(omega), MODE_CHUNK):
        sl = slice(j0, j0 + MODE_CHUNK)
        w_top = float(omega[sl].max())
        lam = min(2.0 * math.pi * c / w_top, float(plate.bending_wavelength(w_top)), 4.0 * h)
        u, wu = _gauss(plate.length, points_per_wavelength * plate.length / lam)
        v, wv = _gauss(plate.width, points_per_wavelength * plate.width / lam)
        dx = (corner[0] + u)[:, None] - x[0]
        dy = (corner[1] + v)[None, :] - x[1]
        R = np.sqrt(dx * dx + dy * dy + h * h)                                  # (nu, nv)
        su = np.sin(np.pi * np.outer(m[sl], u) / plate.length) * wu             # (M, nu), weighted
        sv = np.sin(np.pi * np.outer(n[sl], v) / plate.width) * wv              # (M, nv)
        g = np.exp(-1j * k_all[sl, None, None] * R[None]) / R[None]           # (M, nu, nv)
        out[sl] = a * np.einsum("ju,juv,jv->j", su, g, sv, optimize=True)
    return out * (rho_a / (2.0 * math.pi))


def point_mobility(plate: PlateFloor, xy, f_hz, f_max: float) -> np.ndarray:
    """Drive-point mobility Y = v / F [m/(N s)] of the plate at a world point, from its modes below f_max
    (for checks against the infinite plate's 1 / (8 sqrt(D rho h)), Cremer, Heckl & Petersson 2005, ch. 5)."""
    m, n, om = plate.modes(f_max)
    phi = plate.shapes(np.atleast_2d(xy), m, n)[0]
    xi = np.asarray(plate.material.damping_ratio(om), np.float64)
    w = 2.0 * np.pi * np.asarray(f_hz, np.float64)[:, None]
    return (1j * w * phi**2 / (om**2 - w**2 + 2j * xi * om * w)).sum(axis=1)


def plate_pressure(plate: PlateFloor, listeners, t0, tau, impulse, xy, sample_rate: float, n_samples: int, *,
                   z0: float, c: float, rho_a: float, f_max: float, cutoff_db: float | None = None,
                   transfers: dict | None = None) -> np.ndarray:
    """Pressure (L, n_samples) [Pa] at fixed listeners (L, 3) of impacts on the plate: start times t0 (E,) [s],
    Hertz half-sine durations tau (E,) [s], normal impulses J (E,) [N s] pushing down at world points xy (E, 2)
    (module docstring). ``transfers``: a dict kept between calls (per listener position)."""
    from ..modal_kernel import synthesize
    listeners = np.atleast_2d(np.asarray(listeners, np.float64))
    m, n, om, xi = plate.ringing_modes(f_max)
    L, E = len(listeners), len(np.atleast_1d(t0))
    out = np.zeros((L, int(n_samples)))
    if len(om) == 0 or E == 0:
        return out
    cache = {} if transfers is None else transfers
    basis = np.zeros((2 * L, len(om)))
    delay = np.zeros(L)
    for l in range(L):
        key = (tuple(np.round(listeners[l], 9)), float(f_max))
        if key not in cache:
            d = nearest_distance(plate, listeners[l], z0)
            T = transfer(plate, listeners[l], m, n, om, z0=z0, c=c, rho_a=rho_a)
            cache[key] = (T * np.exp(1j * om * d / c), d / c)
        Tt, delay[l] = cache[key]
        # a mode ringing at omega: Im(T Z'') = Re(T) q'' - omega Im(T) q'; q' rather than the equal-when-free
        # q''' / omega, whose contact term F' / omega would blow up for low modes
        basis[2 * l], basis[2 * l + 1] = Tt.real, -om * Tt.imag
    geom = np.zeros((E, L, 4, 2 * L))
    for l in range(L):
        geom[:, l, 2, 2 * l] = 1.0
        geom[:, l, 1, 2 * l + 1] = 1.0
    imp = -plate.shapes(np.atleast_2d(xy), m, n) * np.asarray(impulse, np.float64).reshape(-1, 1)   # pushed down
    return synthesize(om, xi, np.asarray(t0, np.float64), np.asarray(tau, np.float64), imp,
                      np.broadcast_to(delay, (E, L)), geom, basis, sample_rate, n_samples, cutoff_db=cutoff_db)
