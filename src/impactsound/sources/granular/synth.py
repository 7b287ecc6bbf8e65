"""Grain noise: the acceleration noise of every grain-grain collision of an event table at listeners, at the output
rate (M. Marko, "Sound simulation of granular materials", ch. 4, 5.3; the exact rigid-sphere pulse of pulse.py).

Physics. A collision (time t0, contact point x, unit normal n from grain B to grain A, relative normal speed v0)
is a Hertz contact of duration d (d ~ v0^(-1/5)) during which grain A accelerates along +n and grain B along -n
with half-sine pulses of peak a_m,i (~ v0^(6/5); "peak" scaling, the thesis' choice, or "impulse"; pulse.py).
Each grain, a rigid sphere of radius a centred at x_A = x + a_A n or x_B = x - a_B n, radiates at a listener at
distance r and angle theta from +n

    p(t) = rho0 a_m cos(theta) (a c/r) [W1(T) + (a/r) W2(T)],   T = t - t0 - (r - a)/c,

with W1, W2 the closed-form terms of pulse.py, which depend only on (a, d); the pair's pressure is
p = P_A - P_B. Grains radiate into free field (no scattering by other grains), as in the thesis.

Band limiting (the package's choice; the thesis evaluates the pulse on a fine grid and resamples without saying
how). The pulses last 6-60 us and decay with a/c ~ 3 us, shorter than a 48 kHz sample, so sampling p at the
output rate would alias. The output is the exact pressure passed through a fixed low-pass h and sampled:

    y[n] = (h * p)(n / fs),     h(t) = 2 f_c sinc(2 f_c t) w_K(t fs / 26) / g,

a Kaiser-windowed sinc (:func:`lowpass`): cut-off f_c = 0.45 fs, half-length 26 output samples, Kaiser
beta = 7.857 (Kaiser's formula for 80 dB), g its integral (unit DC gain). Measured (continuous-time response):
flat to 1e-4 below 0.4 fs (19.2 kHz at 48 kHz), below -80 dB from 0.5 fs up, so whatever folds into the audio
band is 80 dB down. The filter is not causal: each pulse starts 26 samples before its arrival.

Tabulation. Since h * p is linear in the pulse, each sphere's contribution is

    y[n] = rho0 I cos(theta) (a^3 c / r) [G1 + G2 / r](n/fs - t0 - (r - a)/c),
    G_k = (h * W_k) (pi / (2 d)) / a^(3 - k),      I = 2 a_m d / pi  (the pulse's integral of A),

and G1, G2 depend only on (a, d): per table node (a_i, d_j) they are computed once (:func:`pulse_table`: composite
Gauss-Legendre quadrature of the convolution over W's two smooth pieces, 8 nodes per panel of at most min(a/c,
d/4, 1/(4 fs)), h read from a table of 4096 points per output sample, within 6e-8 of its peak; checked against a
direct trapezoid convolution to 1e-5) on a grid of U = 64 points per output sample, from 27 samples before the
arrival to 26 after the pulse has decayed to e^-30 (30 a/c after its end): about 60 samples, 62 kB per node at
48 kHz for a = 1 mm, built in ~5 ms. A collision then costs, per sphere, listener and node read, a scale, a delay
and one table read per output sample (linear interpolation at the stream's sub-sample phase, the same for all its
samples since U is an integer).

* Pulse durations: nodes d_j = 10^(j/B) s, B = 32 per decade (v0 from 1e-4 to 1 m/s spans 0.8 decades of d:
  about 28 nodes per radius). A collision reads its two neighbouring nodes, weighted linearly in log d; each node
  is normalised per unit impulse (the amplitude I is exact per collision) and read shifted by (d - d_j)/2 so that
  the half-sines' centroids coincide: the interpolation error is then second order. One sphere, glass a = 1 mm,
  r = 0.15 m, d midway between nodes spaced by q: relative L2 error 4e-4 / 6e-5 / 1.6e-5 at q = 1.05 / 1.02 /
  1.01 for v0 = 1e-5 m/s, 1.6e-4 / 2.7e-5 / 6.7e-6 at 1e-3 m/s (without the centroid shift 10 times more; the
  nearest node alone 1e-3 to 5e-2).
* Radii: one table per distinct radius when the rows name at most ``max_radii`` (default 16) distinct radii
  (exact). More (a radius distribution) are read from radius nodes a_i = 10^(i/R) m, R = 32 per decade,
  linearly in log a between the two neighbours (each normalised by a^2 for G1, a for G2, as above) and shifted
  by (a - a_i)/c, the sphere's response delay: one sphere, v0 = 1e-2 m/s, r = 0.15 m, a midway between nodes:
  1e-6 (a = 0.1 mm), 3e-5 (1 mm), 5e-4 (3 mm), 6e-4 (1 cm). Rows read 2 x 2 nodes per sphere then (twice the
  cost).
* Interpolation in time: linear between the U phases, attenuating a tone at frequency f by about
  (2 pi f/(U fs))^2 / 12 on average over the phase (1.6e-4 at 0.4 fs for U = 64).
Against the per-collision reference (:func:`grain_noise_reference`), 300 random glass collisions (a = 1 mm,
v0 1e-4..1 m/s, two listeners at 0.1-0.4 m): relative L2 error 2.0e-4 at the defaults; 2.3e-3 / 5.6e-4 /
1.5e-4 / 6e-5 at B = 4 / 8 / 16 / 32 (with U = 128); 3.3e-3 / 7.9e-4 / 1.9e-4 / 4e-5 at U = 16 / 32 / 64 / 128
(with B = 128). Two radii and materials with container hits: 2.2e-4 (exact radii), 4.1e-4 (log grid, R = 32).
Rows are refused (InputError) with a radius outside [1e-7, 1] m or a contact duration outside [1e-10, 0.1] s.

Which rows (the package's choices): grain pairs (kind 0) with v0 >= v_min (default 1e-4 m/s: the thesis drops
slower collisions as inaudible). Container hits (kind 1) are the container's source; with
``include_container_hits`` the grain of a wall hit also radiates its own pulse (one sphere accelerating along +n,
from the wall into the grain; Hertz contact on a flat heavy wall: m_eff = m, r_eff = a, E* from the grain and the
container's material; not in the thesis). Impulse scaling uses the elastic Delta-v for both kinds
(2 v0 m_eff / m_i), as pulse.py, and ignores the table's restitution column.

Parallel and reproducible. Rows (sorted by t) are cut into fixed chunks of 2048; each chunk runs in a compiled
kernel (Numba, ``nogil``) on a Python thread into its own partial buffer spanning its time window; partials are
added in chunk order. The output is bit-identical for any thread count. The rows are read straight from the
table's columns (contact, nodes and checks in compiled code), so a render allocates little beyond its output
(bench/bench_granular_synth.py: about 2e6 collisions/s per core for one listener at 48 kHz). A collision moved
by a whole number of samples moves its output by exactly that many samples (the start is split into
floor(t0 fs) and a fraction before any delay is added).
"""
from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.special

from ...constants import AIR_C, AIR_RHO
from ...errors import InputError
from ...materials import Material, get_material, make_material
from ...parallel import default_threads
from . import _synth_kernel as K
from .events import CONTAINER, GRAIN, GranularEvents, check
from .pulse import hertz_contact, pair_pressure, pulse_terms, sphere_pressure

#: low-pass cut-off [fraction of the output rate]
LOWPASS_CUTOFF = 0.45
#: low-pass half-length [output samples]
LOWPASS_HALF_WIDTH = 26
#: Kaiser window parameter: 0.1102 (A - 8.7) for A = 80 dB stopband attenuation (Kaiser's formula)
LOWPASS_BETA = 7.857
#: a table covers the pulse and its free decay until e^-DECAY_SPAN: DECAY_SPAN a/c after the contact
DECAY_SPAN = 30.0
#: default slowest collision rendered [m/s] (Marko: slower ones are inaudible)
V_MIN = 1e-4
DEFAULT_OVERSAMPLE = 64
DEFAULT_BINS_PER_DECADE = 32
DEFAULT_MAX_RADII = 16
DEFAULT_RADIUS_BINS_PER_DECADE = 32
#: rows per chunk (fixed: the chunking, hence the summation order, depends only on the row count)
CHUNK = 2048
#: listeners per work item (bounds the kernel's stream buffer)
LISTENER_GROUP = 4
#: Gauss-Legendre nodes per quadrature panel of the table convolution
_GL_NODES = 8
#: the low-pass is tabulated at this many points per output sample for the table quadrature
_H_FINE = 4096
#: the wall of a container hit, in the reference's two-sphere Hertz formula: radius and density x this factor
_WALL = 1e12


# ------------------------------------------------------------------------------------------------ low-pass
@functools.lru_cache(maxsize=1)
def _h_unit():
    """(raw h at fs = 1 before normalisation, a fine grid of _H_FINE points per output sample, the normalised h
    on it, the raw integral by the trapezoid rule on 400,001 points)."""
    K, beta, fc = LOWPASS_HALF_WIDTH, LOWPASS_BETA, LOWPASS_CUTOFF

    def raw(u):
        x = np.clip(u / K, -1.0, 1.0)
        win = scipy.special.i0(beta * np.sqrt(1.0 - x * x)) / scipy.special.i0(beta)
        return np.where(np.abs(u) <= K, 2.0 * fc * np.sinc(2.0 * fc * u) * win, 0.0)

    u = np.linspace(-K, K, 400001)
    gain = float(np.trapezoid(raw(u), u))
    grid = np.arange(-K * _H_FINE, K * _H_FINE + 1) / _H_FINE
    return raw, grid, raw(grid) / gain, gain


def lowpass(t, sample_rate: float) -> np.ndarray:
    """The band-limiting low-pass h(t) of the output (module docstring) [1/s]: unit integral, zero for
    |t| > 26 / sample_rate.

    Parameters
    ----------
    t : array_like
        Times [s].
    sample_rate : float
        Output rate fs [Hz].

    Returns
    -------
    ndarray
        h(t), same shape as t.
    """
    fs = float(sample_rate)
    raw, _, _, gain = _h_unit()
    return fs * raw(np.asarray(t, np.float64) * fs) / gain


# ------------------------------------------------------------------------------------------------ tables
@dataclass(frozen=True)
class PulseTable:
    """One table node (module docstring): G1, G2 of a sphere of radius ``radius`` and pulse duration ``d``.

    Attributes
    ----------
    values : ndarray, shape (U + 1, 2, Nk)
        values[p, k - 1, m] = G_k(tau0 + (m + p/U)/fs) (module docstring; G1 [1/m^2], G2 [1/m]); the last
        phase repeats phase 0 one sample on (values[U, :, m] = values[0, :, m + 1]).
    tau0 : float
        Time of values[0, :, 0] relative to the arrival t0 + (r - a)/c [s].
    radius, d, sample_rate, c, oversample
        The node: radius [m], pulse duration [s], output rate [Hz], speed of sound [m/s], U.
    """

    values: np.ndarray
    tau0: float
    radius: float
    d: float
    sample_rate: float
    c: float
    oversample: int

    @property
    def length(self) -> int:
        return int(self.values.shape[2])

    def __call__(self, tau) -> tuple[np.ndarray, np.ndarray]:
        """(G1, G2) at times tau [s] after the arrival, linearly interpolated (for inspection and tests)."""
        U, fs = self.oversample, self.sample_rate
        flat = np.concatenate([self.values[:U].transpose(2, 0, 1).reshape(-1, 2), self.values[U, :, -1:].T])
        m = (np.asarray(tau, np.float64) - self.tau0) * fs * U
        grid = np.arange(flat.shape[0])
        return (np.interp(m, grid, flat[:, 0], left=0.0, right=0.0),
                np.interp(m, grid, flat[:, 1], left=0.0, right=0.0))


def table_start(sample_rate: float) -> float:
    """tau0 of every table [s]: one sample before the low-pass's first non-zero value."""
    return -(LOWPASS_HALF_WIDTH + 1) / float(sample_rate)


@functools.lru_cache(maxsize=1024)
def pulse_table(radius: float, d: float, sample_rate: float, c: float = AIR_C,
                oversample: int = DEFAULT_OVERSAMPLE) -> PulseTable:
    """The band-limited pulse of one sphere, normalised per unit impulse and per a^2 (G1) and a (G2) (module
    docstring): G_k = (h * W_k)(tau) (pi/(2 d)) / a^(3-k) on a grid of ``oversample`` points per output sample.
    Cached (up to 1024 tables, ~62 kB each at the defaults for mm grains at 48 kHz).

    Parameters
    ----------
    radius : float
        Sphere radius a [m].
    d : float
        Pulse duration [s].
    sample_rate : float
        Output rate [Hz].
    c : float, optional
        Speed of sound [m/s].
    oversample : int, optional
        Table points per output sample U.

    Returns
    -------
    PulseTable
    """
    a, d, fs, c, U = float(radius), float(d), float(sample_rate), float(c), int(oversample)
    tau0 = table_start(fs)
    S = d + DECAY_SPAN * a / c                                      # pulse + decay to e^-30
    nk = int(math.ceil((S + LOWPASS_HALF_WIDTH / fs - tau0) * fs)) + 1
    # composite Gauss-Legendre over W's two smooth pieces, [0, d] and [d, S]
    pw = min(a / c, d / 4.0, 0.25 / fs)
    xg, wg = np.polynomial.legendre.leggauss(_GL_NODES)
    edges = np.concatenate([np.linspace(0.0, d, int(math.ceil(d / pw)) + 1),
                            np.linspace(d, S, int(math.ceil((S - d) / pw)) + 1)[1:]])
    lo, hi = edges[:-1], edges[1:]
    s = ((hi - lo)[:, None] * (xg + 1.0) / 2.0 + lo[:, None]).ravel()
    w = ((hi - lo)[:, None] * wg / 2.0).ravel()
    W1, W2 = pulse_terms(s, a, d, c)
    Wq = np.stack([w * W1 * (math.pi / (2.0 * d)) / a**2, w * W2 * (math.pi / (2.0 * d)) / a], axis=1)
    tau = tau0 + np.arange(U * nk + 1) / (U * fs)
    G = np.zeros((tau.shape[0], 2))
    _, grid, hf, _ = _h_unit()
    # h(t) = fs h1(t fs): h1's fine table has _H_FINE points per output sample, h1(0) at its centre
    K.band_limit(hf * fs, float(LOWPASS_HALF_WIDTH * _H_FINE), fs * _H_FINE, tau, s, Wq[:, 0].copy(),
                 Wq[:, 1].copy(), G)
    vals = np.empty((U + 1, 2, nk))
    vals[:U] = G[:U * nk].reshape(nk, U, 2).transpose(1, 2, 0)      # polyphase: tau index m U + p -> [p, :, m]
    vals[U] = G[U::U].T                                             # phase U = phase 0 one sample on
    vals.setflags(write=False)
    return PulseTable(values=vals, tau0=tau0, radius=a, d=d, sample_rate=fs, c=c, oversample=U)


# ------------------------------------------------------------------------------------------------ inputs
def _material_constants(spec, name: str, where: str) -> tuple[float, float, float]:
    """(E, nu, rho) of a Material, an (E, nu, rho) tuple or a material name."""
    if isinstance(spec, Material):
        m = spec
    elif isinstance(spec, str):
        m = get_material(spec, where=where)
    else:
        try:
            E, nu, rho = (float(v) for v in spec)
        except (TypeError, ValueError):
            raise InputError(f"{where}: {spec!r} must be a Material, a material name or an (E [Pa], nu, "
                             "rho [kg/m^3]) tuple") from None
        m = make_material(name, rho=rho, E=E, nu=nu, where=where)
    return float(m.E), float(m.nu), float(m.rho)


def _material_table(events: GranularEvents, materials, used, where: str) -> np.ndarray:
    """(n, 3) E [Pa], nu, rho [kg/m^3] per material index; the rows of the indices in ``used`` resolved, by name
    (``materials[name]``, default the shipped material of that name) or, for a table without material names, by
    index (``materials[index]``)."""
    used = [int(k) for k in used]
    mats = list(events.materials)
    out = np.ones((max([len(mats), *(k + 1 for k in used)], default=1), 3))
    for k in used:
        if mats:
            name = mats[k]
            if materials is None:
                spec = name
            elif isinstance(materials, dict) and name in materials:
                spec = materials[name]
            else:
                raise InputError(f"{where}: materials has no entry for {name!r}; give a Material, a material name "
                                 f"or (E, nu, rho) for each of {mats}")
        else:
            try:
                spec, name = materials[k], f"material {k}"
            except (TypeError, KeyError, IndexError):
                raise InputError(f"{where}: the event table names no materials, so materials must give one for "
                                 f"each material index used (a list, or {{index: material}}); index {k} is "
                                 "missing") from None
        out[k] = _material_constants(spec, name, f"{where}: materials[{name!r}]")
    return out


def _container_table(events: GranularEvents, container_materials, used, where: str) -> np.ndarray:
    """(n, 2) E [Pa], nu of each container hit by a rendered row (``container_materials[name]``)."""
    conts = list(events.containers)
    out = np.ones((max(len(conts), 1), 2))
    for k in used:
        name = conts[int(k)]
        if container_materials is None or name not in container_materials:
            raise InputError(f"{where}: include_container_hits needs the material of container {name!r}: pass "
                             "container_materials={name: material}")
        out[int(k), :] = _material_constants(container_materials[name], name,
                                             f"{where}: container_materials[{name!r}]")[:2]
    return out


def _check_args(listeners, sample_rate, n_samples, rho, c, v_min, scaling, where):
    xl = np.asarray(listeners, np.float64)
    if xl.ndim == 1 and xl.shape == (3,):
        xl = xl[None, :]
    if xl.ndim != 2 or xl.shape[1] != 3:
        raise InputError(f"{where}: listeners must have shape (L, 3) [m], got {np.shape(listeners)}")
    if not np.isfinite(xl).all():
        raise InputError(f"{where}: listener {int(np.flatnonzero(~np.isfinite(xl).all(axis=1))[0])} has NaN or "
                         "infinite coordinates")
    fs = float(sample_rate)
    if not (math.isfinite(fs) and fs > 0):
        raise InputError(f"{where}: sample_rate = {sample_rate} Hz must be positive and finite")
    if int(n_samples) != n_samples or n_samples < 0:
        raise InputError(f"{where}: n_samples = {n_samples} must be a non-negative integer")
    for name, v in (("rho", rho), ("c", c)):
        if not (math.isfinite(float(v)) and float(v) > 0):
            raise InputError(f"{where}: air {name} = {v} must be positive and finite")
    if not (math.isfinite(float(v_min)) and float(v_min) >= 0):
        raise InputError(f"{where}: v_min = {v_min} m/s must be finite and >= 0")
    if scaling not in ("peak", "impulse"):
        raise InputError(f"{where}: scaling {scaling!r} must be 'peak' or 'impulse'")
    return np.ascontiguousarray(xl), fs, int(n_samples)


def _readonly(a, dtype):
    """a as a C-contiguous read-only array of ``dtype`` (a view when it already is one): one compiled
    signature of the kernels whatever the table's arrays' flags (Numba types read-only arrays apart)."""
    v = np.ascontiguousarray(a, dtype).view()
    v.flags.writeable = False
    return v


def _kernel_columns(ev: GranularEvents) -> tuple:
    """The columns the kernels read: t, point, normal, v0, kind, id_b, radius_a, radius_b, material_a,
    material_b."""
    return (_readonly(ev.t, np.float64), _readonly(ev.point, np.float64), _readonly(ev.normal, np.float64),
            _readonly(ev.v0, np.float64), _readonly(ev.kind, np.int8), _readonly(ev.id_b, np.int64),
            _readonly(ev.radius_a, np.float64), _readonly(ev.radius_b, np.float64),
            _readonly(ev.material_a, np.int16), _readonly(ev.material_b, np.int16))


def _positive_int(name, v, lo=1):
    if int(v) != v or v < lo:
        raise InputError(f"grain noise: {name} = {v} must be an integer >= {lo}")
    return int(v)


_BAD = {K.BAD_T: ("t", "must be finite and >= 0 [s]"),
        K.BAD_POINT: ("point", "holds NaN or infinite values"),
        K.BAD_NORMAL: ("normal", "must be a unit vector: normalise it"),
        K.BAD_V0: ("v0", "must be a positive, finite approach speed [m/s]"),
        K.BAD_RADIUS_A: ("radius_a", f"must lie in [{K.RADIUS_RANGE[0]}, {K.RADIUS_RANGE[1]}] m"),
        K.BAD_RADIUS_B: ("radius_b", f"must lie in [{K.RADIUS_RANGE[0]}, {K.RADIUS_RANGE[1]}] m for a grain pair"),
        K.BAD_MATERIAL: ("material_a/material_b", "must index the table's materials"),
        K.BAD_CONTAINER: ("id_b", "must index the table's containers for a container hit"),
        K.BAD_KIND: ("kind", "must be 0 (grain-grain) or 1 (grain-container)")}


def _inside_error(where, listeners, row, t, point, l) -> InputError:
    return InputError(f"{where}: listener {l} at {np.asarray(listeners[l]).tolist()} m is inside a grain of event "
                      f"row {row} (t = {t} s, contact point {np.asarray(point).tolist()} m); move the listener out "
                      "of the grains")


# ------------------------------------------------------------------------------------------------ render
def grain_noise(events: GranularEvents, listeners, sample_rate: float, n_samples: int, *, materials=None,
                container_materials=None, rho: float = AIR_RHO, c: float = AIR_C, v_min: float = V_MIN,
                scaling: str = "peak", include_container_hits: bool = False, n_threads: int | None = None,
                bins_per_decade: int = DEFAULT_BINS_PER_DECADE, oversample: int = DEFAULT_OVERSAMPLE,
                max_radii: int = DEFAULT_MAX_RADII,
                radius_bins_per_decade: int = DEFAULT_RADIUS_BINS_PER_DECADE) -> np.ndarray:
    """Pressure of the grain collisions of an event table at listeners, band-limited at the output rate (module
    docstring).

    Parameters
    ----------
    events : GranularEvents
        The collisions (t [s], point [m], normal, v0 [m/s], radii [m], material indices).
    listeners : array_like, shape (L, 3)
        Listener positions [m].
    sample_rate : float
        Output rate fs [Hz]; sample n is time n / fs.
    n_samples : int
        Output length.
    materials : dict or sequence, optional
        Material name (as in ``events.materials``) -> Material, material name or (E [Pa], nu, rho [kg/m^3]);
        default: the shipped material of each name. For a table without material names, one per index.
    container_materials : dict, optional
        Container name (``events.containers``) -> material, needed with ``include_container_hits``.
    rho, c : float, optional
        Air density [kg/m^3] and speed of sound [m/s].
    v_min : float, optional
        Collisions with v0 < v_min [m/s] are dropped (default 1e-4).
    scaling : {"peak", "impulse"}, optional
        Pulse amplitude (pulse.py).
    include_container_hits : bool, optional
        Also render the grain's own pulse of container hits (module docstring); off by default.
    n_threads : int, optional
        Threads (default :func:`~impactsound.parallel.default_threads`); the result does not depend on it.
    bins_per_decade, oversample, max_radii, radius_bins_per_decade : int, optional
        Tabulation (module docstring): duration nodes per decade of d, table points per output sample, most
        distinct radii with exact tables, radius nodes per decade beyond that.

    Returns
    -------
    ndarray, shape (L, n_samples)
        Pressure [Pa].

    Raises
    ------
    InputError
        On a listener inside a grain, a bad row (named, with its column), bad shapes or values, unknown
        materials, or container hits without their container's material.
    """
    where = "grain noise"
    B = _positive_int("bins_per_decade", bins_per_decade)
    U = _positive_int("oversample", oversample, 2)
    R = _positive_int("radius_bins_per_decade", radius_bins_per_decade)
    max_radii = _positive_int("max_radii", max_radii, 0)
    nt_req = default_threads() if n_threads is None else _positive_int("n_threads", n_threads)
    xl, fs, ns = _check_args(listeners, sample_rate, n_samples, rho, c, v_min, scaling, where)
    if not isinstance(events, GranularEvents):
        raise InputError(f"{where}: events must be a GranularEvents table, got {type(events).__name__}")
    c, rho, v_min = float(c), float(rho), float(v_min)
    ev = events
    cols = _kernel_columns(ev)
    cont_on = bool(include_container_hits)
    bad, code, used_mat, used_cont, n_kept, sorted_t, radii = K.scan_rows(
        *cols, len(ev.materials), len(ev.containers), cont_on, v_min, max_radii)
    if bad >= 0:
        col, what = _BAD[code]
        raise InputError(f"{where}: event row {bad} (t = {ev.t[bad]!r} s): column {col!r} {what}")
    out = np.zeros((xl.shape[0], ns))
    if n_kept == 0 or xl.shape[0] == 0 or ns == 0:
        return out
    order = None
    if not sorted_t:                             # chunk windows stay short only for rows sorted by time
        order = np.argsort(ev.t, kind="stable")
        ev = ev.take(order)
        cols = _kernel_columns(ev)
    mat = _material_table(ev, materials, np.flatnonzero(used_mat), where)
    cont = _container_table(ev, container_materials, np.flatnonzero(used_cont[:len(ev.containers)]), where)
    impulse = scaling == "impulse"
    # table nodes: duration nodes d_j = 10^(j/B) s over D_RANGE; radius nodes: the exact radii or 10^(i/R) m
    j0 = int(math.floor(math.log10(K.D_RANGE[0]) * B)) - 1
    n_d = int(math.ceil(math.log10(K.D_RANGE[1]) * B)) - j0 + 3
    if radii.shape[0] > 0:
        i0, a_node = 0, radii
    else:
        i0 = int(math.floor(math.log10(K.RADIUS_RANGE[0]) * R)) - 1
        a_node = 10.0 ** ((i0 + np.arange(int(math.ceil(math.log10(K.RADIUS_RANGE[1]) * R)) - i0 + 3)) / R)
    d_node = 10.0 ** ((j0 + np.arange(n_d)) / B)
    node_args = (*cols[3:], cont_on, v_min, mat, cont, impulse, radii, R, i0, B, j0)
    nt = min(nt_req, -(-len(ev) // CHUNK))
    pool = ThreadPoolExecutor(max_workers=nt) if nt > 1 else None
    try:
        return _render(ev, order, cols, node_args, a_node, d_node, xl, fs, ns, U, c, rho, pool, out)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _render(ev, order, cols, node_args, a_node, d_node, xl, fs, ns, U, c, rho, pool, out):
    """grain_noise after the checks: mark the table nodes the rows read, build them, render the chunks (in
    ``pool`` when given) and add the partials in chunk order (a fixed summation order). ``order``: the user's
    row of each row of ``ev`` (None: the same), for messages."""
    where = "grain noise"
    N = len(ev)
    starts = range(0, N, CHUNK)
    pmap = pool.map if pool is not None else map
    shape = (a_node.shape[0], d_node.shape[0])

    def row(e):
        return int(e) if order is None else int(order[e])

    def mark(e0):
        need = np.zeros(shape, np.bool_)
        return K.mark_nodes(e0, min(N, e0 + CHUNK), *node_args, need), need

    need = np.zeros(shape, np.bool_)
    for bad, nd in pmap(mark, starts):
        if bad >= 0:
            raise InputError(f"{where}: event row {row(bad)} (t = {ev.t[bad]!r} s): its contact duration lies "
                             f"outside {list(K.D_RANGE)} s; check v0 = {ev.v0[bad]!r} m/s and the materials' "
                             "constants")
        need |= nd
    node_off = np.zeros(shape, np.int64)
    node_len = np.zeros(shape, np.int64)
    parts, off = [], 0
    for ri, dj in zip(*np.nonzero(need)):
        tb = pulse_table(float(a_node[ri]), float(d_node[dj]), fs, c, U)
        node_off[ri, dj], node_len[ri, dj] = off, tb.length
        parts.append(tb.values.ravel())
        off += tb.values.size
    tab = np.concatenate(parts)
    head = (*cols, *node_args[7:], a_node, d_node, node_off, node_len, tab)
    tail = (fs, U, c, rho, table_start(fs), ns)
    # work items: (chunk, group of at most LISTENER_GROUP listeners), in a fixed order; the group bounds the
    # kernel's per-chunk stream buffer (CHUNK x group x 8 streams)
    groups = [(l0, min(l0 + LISTENER_GROUP, xl.shape[0])) for l0 in range(0, xl.shape[0], LISTENER_GROUP)]
    xg = [_readonly(xl[l0:l1], np.float64) for l0, l1 in groups]
    items = [(e0, g) for e0 in starts for g in range(len(groups))]

    def work(item):
        e0, g = item
        return K.render_chunk(e0, min(N, e0 + CHUNK), *head, xg[g], *tail)

    for (e0, g), (n0, part, bad_e, bad_l, missing) in zip(items, pmap(work, items)):
        l0, l1 = groups[g]
        if missing >= 0:
            raise RuntimeError(f"grain noise: row {missing} reads a table node that was not built (internal error)")
        if bad_e >= 0:
            raise _inside_error(where, xl, row(bad_e), ev.t[bad_e], ev.point[bad_e], l0 + bad_l)
        out[l0:l1, n0:n0 + part.shape[1]] += part
    return out


# ------------------------------------------------------------------------------------------------ reference
def _select(events, listeners, sample_rate, n_samples, materials, container_materials, rho, c, v_min, scaling,
            include_container_hits, where):
    """The reference's rows: checked with events.check, filtered in NumPy, constants per row."""
    xl, fs, ns = _check_args(listeners, sample_rate, n_samples, rho, c, v_min, scaling, where)
    if not isinstance(events, GranularEvents):
        raise InputError(f"{where}: events must be a GranularEvents table, got {type(events).__name__}")
    check(events, where=where, require_sorted=False)
    ev = events
    keep = (ev.kind == GRAIN) | ((ev.kind == CONTAINER) if include_container_hits else False)
    idx = np.flatnonzero(keep & (ev.v0 >= float(v_min)))
    grain = ev.kind[idx] == GRAIN
    ma, mb = ev.material_a[idx], ev.material_b[idx][grain]
    mat = _material_table(ev, materials, np.unique(np.concatenate([ma, mb])), where)
    cont = _container_table(ev, container_materials, np.unique(ev.id_b[idx][~grain]), where)
    return ev, idx, mat, cont, xl, fs, ns


@functools.lru_cache(maxsize=64)
def _lowpass_samples(fs: float, U: int) -> np.ndarray:
    """The reference's filter: h on the grid of U points per output sample, times its step."""
    dt = 1.0 / (fs * U)
    return lowpass((np.arange(2 * LOWPASS_HALF_WIDTH * U + 1) - LOWPASS_HALF_WIDTH * U) * dt, fs) * dt


def grain_noise_reference(events: GranularEvents, listeners, sample_rate: float, n_samples: int, *,
                          materials=None, container_materials=None, rho: float = AIR_RHO, c: float = AIR_C,
                          v_min: float = V_MIN, scaling: str = "peak", include_container_hits: bool = False,
                          points_per_pulse: int = 40) -> np.ndarray:
    """The same output as :func:`grain_noise`, one collision at a time in Python (slow; for tests and benchmarks):
    per collision and listener the exact closed form (pulse.py :func:`pair_pressure`, :func:`sphere_pressure`,
    contact from :func:`hertz_contact`, a wall as a sphere 1e12 times larger and denser) on a grid of
    ``points_per_pulse`` points per min(d, a/c), aligned with the output samples, filtered with :func:`lowpass`
    (its samples times the grid step, i.e. the convolution by the rectangle rule) and decimated with
    ``scipy.signal.upfirdn``. Arguments and result as :func:`grain_noise`.
    """
    from scipy.signal import upfirdn
    where = "grain noise reference"
    ev, idx, mat, cont, xl, fs, ns = _select(events, listeners, sample_rate, n_samples, materials,
                                             container_materials, rho, c, v_min, scaling, include_container_hits,
                                             where)
    c, rho = float(c), float(rho)
    K_ = LOWPASS_HALF_WIDTH
    out = np.zeros((xl.shape[0], ns))
    for e in idx.tolist():
        ra, ma = float(ev.radius_a[e]), int(ev.material_a[e])
        E_a, nu_a, rho_a = mat[ma]
        grain = ev.kind[e] == GRAIN
        if grain:
            rb = float(ev.radius_b[e])
            E_b, nu_b, rho_b = mat[int(ev.material_b[e])]
        else:                                       # the wall: a sphere 1e12 times larger and denser
            rb, rho_b = _WALL * ra, _WALL * rho_a
            E_b, nu_b = cont[int(ev.id_b[e])]
        con = hertz_contact(float(ev.v0[e]), ra, rb, rho_a, rho_b, E_a, nu_a, E_b, nu_b, scaling=scaling)
        a_min = min(ra, rb)
        a_max = max(ra, rb) if grain else ra
        U = int(math.ceil(points_per_pulse / (fs * min(con.d, a_min / c))))
        hf = _lowpass_samples(fs, U)
        x, n, t0 = ev.point[e], ev.normal[e], float(ev.t[e])
        for l, x_l in enumerate(xl):
            dist = float(np.linalg.norm(x_l - x))
            n_lo = int(math.floor((t0 + max(dist - 2 * a_max, 0.0) / c) * fs)) - 1
            t_hi = t0 + dist / c + con.d + DECAY_SPAN * a_max / c
            j0 = n_lo * U
            t = (j0 + np.arange(int(math.ceil(t_hi * fs * U)) - j0 + 2)) / (fs * U)
            if grain:
                v = [x_l - (x + ra * n), x_l - (x - rb * n)]
                if np.linalg.norm(v[0]) < ra or np.linalg.norm(v[1]) < rb:
                    raise _inside_error(where, xl, e, t0, x, l)
                p = pair_pressure(t, x, n, ra, rb, con, x_l, t0=t0, rho=rho, c=c)
            else:
                v = x_l - (x + ra * n)
                r = float(np.linalg.norm(v))
                if r < ra:
                    raise _inside_error(where, xl, e, t0, x, l)
                p = sphere_pressure(t, ra, con.a_m[0], con.d, r, float(n @ v) / r, t0=t0, rho=rho, c=c)
            y = upfirdn(hf, p, down=U)
            s = n_lo - K_                                   # output sample of y[0]
            lo, hi = max(s, 0), min(s + y.shape[0], ns)
            if hi > lo:
                out[l, lo:hi] += y[lo - s:hi - s]
    return out
