"""Statistical collision generator: learn local densities of the collisions from an event table, then draw new
tables from them (M. Marko, "Sound simulation of granular materials", ch. 5.5-5.6 and 6.2).

The global density p_g(t, x, n, v0) of the collisions has no closed form, so it is localised: the fitted span is cut
into time windows w = [t_w, t_w + window) and space into cubic cells c of edge ``cell`` (cell indices
floor(x/cell), so cells are aligned with the origin). In each (window, cell) the density factorises as
p_wc(x) p_wc(t, n, v0) (Marko, eq. 5.5): x is uniform in the cell (redrawing positions inside 1 cm cells was nearly
inaudible, inside 2 cm cells audible: Marko, sec. 5.4), and p_wc(t, n, v0) is a 4-D histogram over

- t within the window (``t_bins`` equal bins),
- the normal's azimuth atan2(n_y, n_x) (``azimuth_bins`` equal bins over [-pi, pi)) and cos(polar) = n_z
  (``polar_bins`` equal bins over [-1, 1]); azimuth x cos(polar) bins have equal solid angle,
- log v0 (``v0_bins`` equal bins in log v0 between the fitted table's smallest and largest v0),

with (n, v0) kept joint: fast collisions whose normals point at the listener carry the loudness, so normal and speed
are correlated (Marko, sec. 5.4). The number of collisions drawn in (w, c) is Poisson with mean the observed count
(after Cook's Poisson-process view of maracas; Marko, eq. 5.6), or the observed count itself (``count="exact"``).

Choices the thesis leaves open, made here:

* Blocks. A block is one (window, cell, collision type); the collision type is the tuple (kind, container index for a
  container hit, radius_a, radius_b, material_a, material_b, restitution e) and it is copied to every event drawn
  from the block, so a generated table has the same columns as a simulated one. ``radius_classes`` groups
  continuous radii (a polydisperse log) into log-spaced classes represented by their members' mean radius.
  A simulated pour's restitution is continuous (slow collisions are made elastic smoothly, simulate.py: nearly
  every collision has its own e), so e is grouped by default into classes of width ``restitution_step`` = 0.02,
  each represented by its members' mean: a container hit's impulse (1 + e) m v0 then moves by less than
  step / (1 + e) per hit (1.3 % for e >= 0.5, measured 1.3 % on a 300-grain pour) and its sum over the table by
  0.01 %. ``restitution_step=None`` keeps e exact (a table with a few distinct values keeps them exactly either
  way), ``keep_restitution=False`` drops it (NaN: the scene's value).
* Container hits. x uniform in the cell would leave the container's surface, so a container block keeps up to
  ``surface_points`` of its observed contact points (evenly spread over the block's events, with their surface
  element) and each drawn hit takes one of them at random: it lies on the surface, hits a real element, and stays
  within the cell. Grain-grain collisions get x uniform in the cell.
* Values within a bin: t, azimuth and cos(polar) uniform. v0: log v0 drawn from a power law on the bin,
  x = u^k with u uniform and k = (1 - m) / m, where m is the mean position of the bin's observed log v0 within
  it (stored per bin in 1/256 steps): E[x] = 1 / (1 + k) = m, so each bin keeps its observed mean log v0 (m = 1/2:
  uniform). Uniform draws alone biased generated pours upward (a simulated pour's wall hits: sum of v0 +3.5-4.4 %,
  of v0^2 +17-25 %), because a pour's speeds fall steeply within the bins and pile up at the simulator's elastic
  speed, which a uniform draw spreads over the whole bin.
* Generated grain ids are -1 (unknown): a statistical table carries no grain identity. id_b is the container
  index for container hits, -1 for grain pairs; element is the chosen surface point's element (-1 for grains).
* Longer than fitted (``duration`` > the fitted span): ``extend="cycle"`` repeats the windows cyclically (right
  for a stationary process such as a steady pour; a transient repeats), ``extend="last"`` plays the fitted windows
  up to the last full-length one and then keeps repeating that one (a pour that reached a steady state; a shorter
  final window of the fit is left out). Events at or after ``duration`` are cut. ``time_scale`` stretches the
  timeline (t_out = time_scale * t_model; counts are unchanged, so rates scale by 1/time_scale).

Storage (:func:`save_model`, one HDF5 asset of kind ``granular_model``): only non-empty blocks, and in each only its
non-empty histogram bins as flat bin indices and counts, in the smallest integer types that hold them; no dense
array over windows, cells or bins is ever built. Generation (:func:`generate`) loops over (window, cell) blocks in
compiled code (Numba), one block's histogram at a time, with a seeded NumPy generator feeding it: same model, seed
and options give a bitwise identical table whatever the thread count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numba as nb
import numpy as np

from ...assets.store import Asset, content_hash, read_asset, write_asset
from ...errors import AssetError, InputError
from ...parallel import default_threads
from .events import CONTAINER, GranularEvents

#: layout version of the ``granular_model`` asset: a model saved under another version is refused
GENERATOR_VERSION = 2
MODEL_KIND = "granular_model"
COUNT_MODES = ("poisson", "exact")
EXTEND_MODES = ("cycle", "last")
#: largest number of distinct collision types one model keeps
MAX_TYPES = 65535
#: default width of the restitution classes of a fit (module docstring)
RESTITUTION_STEP = 0.02
#: events drawn per compiled call (a chunk of whole windows); it fixes the order of the random stream, so changing
#: it changes the generated tables (it is part of the generator's version)
_CHUNK_EVENTS = 1 << 18
#: uniforms per event: bin, t, azimuth, cos(polar), v0, and three for x (or one for the surface point)
_N_UNIFORM = 8
_REFIT = "refit it with `impactsound granular fit`"


@dataclass(eq=False)
class GranularModel:
    """Local collision densities fitted by :func:`fit_model` (module docstring). SI units: seconds, metres, m/s.

    Attributes
    ----------
    window, cell, span : float
        Window length [s], cell edge [m], fitted span [s] (the model's timeline is [0, span)).
    t_bins, azimuth_bins, polar_bins : int
        Histogram bins of t within a window, of the normal's azimuth and of its cos(polar).
    v0_edges : ndarray (v0_bins + 1,)
        Log-spaced v0 bin edges [m/s].
    window_offset : ndarray (n_windows + 1,) int64
        Blocks of window w are ``window_offset[w]:window_offset[w + 1]``.
    block_cell : ndarray (n_blocks, 3) int
        Cell index floor(x / cell) of each block.
    block_type : ndarray (n_blocks,) int
        Row of the type table.
    block_nbins, bin_index, bin_count : ndarray
        Non-empty bins of each block (``block_nbins[b]`` consecutive entries): flat bin index
        ((i_t * azimuth_bins + i_az) * polar_bins + i_cos) * v0_bins + i_v0 and count.
    bin_v0_mean : ndarray uint8
        Mean position of each bin's observed log v0 within its v0 bin, in 1/256 steps (module docstring).
    block_npoints, points, point_element : ndarray
        Stored observed contact points [m] and their surface elements of container blocks (0 for grain blocks).
    type_kind, type_container, type_radius_a, type_radius_b, type_material_a, type_material_b, type_e : ndarray
        The collision type table (event-table columns; type_container is id_b of a container hit, -1 for grains).
    materials, containers : tuple of str
        Names the material and container indices refer to.
    inputs_hash : str
        Content hash of the fitted table and the fit's parameters.
    meta : dict
        Fit parameters and provenance.
    """

    window: float
    cell: float
    span: float
    t_bins: int
    azimuth_bins: int
    polar_bins: int
    v0_edges: np.ndarray
    window_offset: np.ndarray
    block_cell: np.ndarray
    block_type: np.ndarray
    block_nbins: np.ndarray
    bin_index: np.ndarray
    bin_count: np.ndarray
    bin_v0_mean: np.ndarray
    block_npoints: np.ndarray
    points: np.ndarray
    point_element: np.ndarray
    type_kind: np.ndarray
    type_container: np.ndarray
    type_radius_a: np.ndarray
    type_radius_b: np.ndarray
    type_material_a: np.ndarray
    type_material_b: np.ndarray
    type_e: np.ndarray
    materials: tuple = ()
    containers: tuple = ()
    inputs_hash: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def v0_bins(self) -> int:
        return int(self.v0_edges.shape[0] - 1)

    @property
    def n_windows(self) -> int:
        return int(self.window_offset.shape[0] - 1)

    @property
    def n_blocks(self) -> int:
        return int(self.block_type.shape[0])

    @property
    def n_bins(self) -> int:
        """Bins of one block's full histogram (most are empty and not stored)."""
        return self.t_bins * self.azimuth_bins * self.polar_bins * self.v0_bins

    @property
    def n_events(self) -> int:
        """Collisions the model was fitted on (= the expected count of a generated table over the span)."""
        return int(self.bin_count.sum(dtype=np.int64))

    def window_starts(self) -> np.ndarray:
        """Start [s] of each window: w * window."""
        return np.arange(self.n_windows) * self.window

    def window_lengths(self) -> np.ndarray:
        """Length [s] of each window: ``window``, the last one ending at ``span``."""
        return np.minimum(self.window, self.span - self.window_starts())

    def block_counts(self) -> np.ndarray:
        """Observed collisions per block (the Poisson means)."""
        off = np.concatenate([[0], np.cumsum(self.block_nbins, dtype=np.int64)])
        cs = np.concatenate([[0], np.cumsum(self.bin_count, dtype=np.int64)])
        return cs[off[1:]] - cs[off[:-1]]

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in _ARRAYS}


_ARRAYS = ("v0_edges", "window_offset", "block_cell", "block_type", "block_nbins", "bin_index", "bin_count",
           "bin_v0_mean", "block_npoints", "points", "point_element", "type_kind", "type_container", "type_radius_a",
           "type_radius_b", "type_material_a", "type_material_b", "type_e")
_SCALARS = ("window", "cell", "span", "t_bins", "azimuth_bins", "polar_bins")


def _uint(max_value: int):
    """Smallest unsigned type holding 0..max_value (the asset stays small)."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_value <= np.iinfo(dt).max:
            return dt
    return np.uint64


def _positive_int(name, v, where):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise InputError(f"{where}: {name} = {v!r} must be a positive integer")
    return int(v)


def _positive_float(name, v, where, unit):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} = {v!r} must be a number [{unit}]") from None
    if not (math.isfinite(f) and f > 0):
        raise InputError(f"{where}: {name} = {v!r} must be a positive finite number [{unit}]")
    return f


def _sorted_groups(cols):
    """Stable order of the rows sorted lexicographically by ``cols`` (first most significant) and, in that order,
    a mask of the rows that start a new group. One packed int64 key when the value ranges allow (fast), else
    lexsort."""
    n = cols[0].shape[0]
    shifted, total = [], 1
    for c in cols:
        c = np.asarray(c, np.int64)
        lo = int(c.min())
        r = int(c.max()) - lo + 1
        shifted.append((c - lo, r))
        total *= r
    if total < 2 ** 62:
        key = np.zeros(n, np.int64)
        for c, r in shifted:
            key *= r
            key += c
        order = np.argsort(key, kind="stable")
        ks = key[order]
        new = np.empty(n, bool)
        new[:1] = True
        np.not_equal(ks[1:], ks[:-1], out=new[1:])
        return order, new
    order = np.lexsort([c for c, _ in shifted[::-1]])
    new = np.zeros(n, bool)
    new[:1] = True
    for c, _ in shifted:
        cs = c[order]
        new[1:] |= cs[1:] != cs[:-1]
    return order, new


def _codes(a):
    """Dense codes of a column's values (NaN a value of its own) and the distinct values."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        vals, inv = np.unique(np.where(nan, np.inf, a), return_inverse=True)   # NaN -> inf: sorts last
        vals = np.where(np.isinf(vals), np.nan, vals)
        return inv.astype(np.int64), vals
    vals, inv = np.unique(a, return_inverse=True)
    return inv.astype(np.int64), vals


def _radius_classes(r_all, k):
    """Log-spaced classes between the smallest and largest radius; each class represented by its members' mean."""
    lo, hi = float(r_all.min()), float(r_all.max())
    edges = np.geomspace(lo, hi, k + 1)
    cls = np.clip(np.searchsorted(edges, r_all, side="right") - 1, 0, k - 1)
    mean = np.bincount(cls, weights=r_all, minlength=k) / np.maximum(np.bincount(cls, minlength=k), 1)
    return mean[cls]


def _restitution_classes(e: np.ndarray, step: float) -> np.ndarray:
    """e grouped into classes [k step, (k + 1) step), each member replaced by its class's mean (NaN kept)."""
    out = np.array(e, np.float64, copy=True)
    ok = np.isfinite(out)
    if not ok.any():
        return out
    k = np.floor(out[ok] / step).astype(np.int64)
    uk, inv = np.unique(k, return_inverse=True)
    mean = np.bincount(inv, weights=out[ok]) / np.bincount(inv)
    lo, hi = np.full(len(uk), np.inf), np.full(len(uk), -np.inf)
    np.minimum.at(lo, inv, out[ok])
    np.maximum.at(hi, inv, out[ok])
    mean = np.where(lo == hi, lo, np.clip(mean, lo, hi))     # a class of one value keeps it to the bit
    out[ok] = mean[inv]
    return out


def fit_model(events: GranularEvents, *, window: float = 0.05, cell: float = 0.01, t_bins: int = 10,
              azimuth_bins: int = 16, polar_bins: int = 8, v0_bins: int = 32, time_range=None,
              surface_points: int = 16, radius_classes: int | None = None, keep_restitution: bool = True,
              restitution_step: float | None = RESTITUTION_STEP, where: str = "granular fit") -> GranularModel:
    """Fit local collision densities to an event table (module docstring; Marko, ch. 5.6).

    Parameters
    ----------
    events : GranularEvents
        The collisions (any source: simulation, imported log, an earlier generated table).
    window : float, optional
        Time window [s] (default 0.05 s; the thesis gives none).
    cell : float, optional
        Cell edge [m] (default 0.01 m: positions redrawn inside 1 cm cells are nearly inaudible, Marko, sec. 5.4).
    t_bins, azimuth_bins, polar_bins, v0_bins : int, optional
        Histogram bins: t per window, normal azimuth, normal cos(polar) (equal solid angle), log v0.
    time_range : (float, float), optional
        Fit only [t0, t1) [s] of the table; the model's timeline starts at t0. Default: [0, events.duration).
    surface_points : int, optional
        Observed contact points kept per container block (1 to 255; module docstring).
    radius_classes : int, optional
        Group radii into this many log-spaced classes (polydisperse grains); default: exact radii.
    keep_restitution : bool, optional
        Keep the restitution e in the collision type (False: generated e is NaN).
    restitution_step : float or None, optional
        Group e into classes of this width, each represented by its members' mean (default 0.02: a hit's impulse
        (1 + e) m v0 moves by less than step / (1 + e)); None keeps every distinct e.
    where : str, optional
        Names the input in error messages.

    Returns
    -------
    GranularModel

    Raises
    ------
    InputError
        An empty table or time range, a window or cell that is not positive, a cell larger than the scene (the
        largest side of the contact points' bounding box), bad bin counts, too many collision types.
    """
    window = _positive_float("window", window, where, "s")
    cell = _positive_float("cell", cell, where, "m")
    nt, na, nc, nv = (_positive_int(k, v, where) for k, v in (("t_bins", t_bins), ("azimuth_bins", azimuth_bins),
                                                              ("polar_bins", polar_bins), ("v0_bins", v0_bins)))
    if nt * na * nc * nv > np.iinfo(np.uint32).max:
        raise InputError(f"{where}: {nt} x {na} x {nc} x {nv} histogram bins are too many (at most 2^32): use "
                         "fewer bins")
    surface_points = _positive_int("surface_points", surface_points, where)
    if surface_points > 255:
        raise InputError(f"{where}: surface_points = {surface_points} must be at most 255")
    if radius_classes is not None:
        radius_classes = _positive_int("radius_classes", radius_classes, where)
    if restitution_step is not None:
        restitution_step = _positive_float("restitution_step", restitution_step, where, "1")
    if not isinstance(events, GranularEvents):
        raise InputError(f"{where}: expected a granular event table, got {type(events).__name__}")
    if len(events) == 0:
        raise InputError(f"{where}: the event table is empty: nothing to fit (simulate, import or load a table with "
                         "collisions)")
    if time_range is None:
        t_lo = 0.0
        t_hi = max(float(events.duration), float(np.nextafter(events.t[-1], np.inf)))
    else:
        try:
            t_lo, t_hi = (float(v) for v in time_range)
        except (TypeError, ValueError):
            raise InputError(f"{where}: time_range = {time_range!r} must be two times (start, end) [s]") from None
        if not (math.isfinite(t_lo) and math.isfinite(t_hi) and t_hi > t_lo):
            raise InputError(f"{where}: time_range = {time_range!r} must be finite with end > start [s]")
    sel = (events.t >= t_lo) & (events.t < t_hi)
    if not sel.any():
        raise InputError(f"{where}: no collisions in the time range [{t_lo:g}, {t_hi:g}) s (the table's "
                         f"{len(events)} collisions lie in [{events.t[0]:g}, {events.t[-1]:g}] s): choose a range "
                         "that holds some")
    ev = events if sel.all() else events.take(sel)
    span = t_hi - t_lo
    n = len(ev)
    ext = float(np.ptp(ev.point, axis=0).max())
    if ext == 0.0:
        raise InputError(f"{where}: all {n} collisions are at one point: there is no scene to cut into cells (fit a "
                         "table whose collisions spread over space)")
    if cell > ext:
        raise InputError(f"{where}: cell = {cell:g} m is larger than the scene's extent ({ext:.4g} m, the largest "
                         "side of the contact points' bounding box): choose a smaller cell (the thesis: <= 0.01 m; "
                         "check the units)")

    # windows and cells (fixed grids, so that fit and generation agree bin for bin)
    n_w = max(1, int(math.ceil(span / window - 1e-9)))
    t = ev.t - t_lo
    w = np.clip(np.floor(t / window).astype(np.int64), 0, n_w - 1)
    w_start = w * window
    w_len = np.minimum(window, span - w_start)
    frac = (t - w_start) / w_len
    i_t = np.clip(np.floor(frac * nt).astype(np.int64), 0, nt - 1)
    cidx = np.floor(ev.point / cell).astype(np.int64)

    # normal bins: equal solid angle (azimuth x cos polar)
    az = np.arctan2(ev.normal[:, 1], ev.normal[:, 0])
    i_a = np.clip(np.floor((az + np.pi) / (2 * np.pi) * na).astype(np.int64), 0, na - 1)
    i_c = np.clip(np.floor((ev.normal[:, 2] + 1.0) * 0.5 * nc).astype(np.int64), 0, nc - 1)
    # log-spaced v0 bins over the fitted speeds (generated v0 stays inside them: the v_min filter survives)
    v_edges = np.geomspace(float(ev.v0.min()), float(ev.v0.max()), nv + 1)
    i_v = np.clip(np.searchsorted(v_edges, ev.v0, side="right") - 1, 0, nv - 1)
    log_e = np.log(v_edges)
    width = log_e[i_v + 1] - log_e[i_v]
    pos = np.clip(np.where(width > 0, (np.log(ev.v0) - log_e[i_v]) / np.where(width > 0, width, 1.0), 0.5), 0, 1)
    flat = ((i_t * na + i_a) * nc + i_c) * nv + i_v

    # collision types
    kind = ev.kind.astype(np.int64)
    is_c = kind == CONTAINER
    container = np.where(is_c, ev.id_b, -1)
    ra, rb = ev.radius_a.copy(), np.where(is_c, 0.0, ev.radius_b)
    if radius_classes is not None:
        pool = np.concatenate([ra, rb[~is_c]])
        cls = _radius_classes(pool, radius_classes)
        ra = cls[:n]
        rb = rb.copy()
        rb[~is_c] = cls[n:]
    mb = np.where(is_c, -1, ev.material_b)
    e = ev.e if keep_restitution else np.full(n, np.nan)
    if keep_restitution and restitution_step is not None:
        e = _restitution_classes(e, restitution_step)
    type_cols = [kind, container, ra, rb, ev.material_a, mb, e]
    coded = [_codes(c) for c in type_cols]
    torder, tnew = _sorted_groups([c for c, _ in coded])
    type_id = np.empty(n, np.int64)
    type_id[torder] = np.cumsum(tnew) - 1
    n_types = int(tnew.sum())
    if n_types > MAX_TYPES:
        raise InputError(f"{where}: {n_types} distinct collision types (kind, container, radii, materials, "
                         f"restitution); at most {MAX_TYPES}: group radii with radius_classes=K (--radius-classes "
                         "K), coarser restitution classes (restitution_step, --restitution-step), or drop the "
                         "restitution (keep_restitution=False, --no-restitution)")
    first = torder[tnew]                                  # one event of each type, in type order
    types = {"type_kind": ev.kind[first].astype(np.int8), "type_container": container[first].astype(np.int64),
             "type_radius_a": ra[first].astype(np.float64), "type_radius_b": rb[first].astype(np.float64),
             "type_material_a": ev.material_a[first].astype(np.int16),
             "type_material_b": mb[first].astype(np.int16), "type_e": e[first].astype(np.float64)}

    # blocks (window, cell, type) and their non-empty bins, all by one sort
    order, new_bin = _sorted_groups([w, cidx[:, 0], cidx[:, 1], cidx[:, 2], type_id, flat])
    # the block boundaries in that order: a change of any key but the bin
    ws, cs, ts = w[order], cidx[order], type_id[order]
    new_block = np.empty(n, bool)
    new_block[:1] = True
    new_block[1:] = ((ws[1:] != ws[:-1]) | (cs[1:] != cs[:-1]).any(axis=1) | (ts[1:] != ts[:-1]))
    bin_start = np.flatnonzero(new_bin)
    block_start = np.flatnonzero(new_block)
    bin_count = np.diff(np.append(bin_start, n))
    # each bin's mean position of log v0 within its v0 bin, in 1/256 steps (q + 1/2) / 256
    pos_sum = np.add.reduceat(pos[order], bin_start) if n else np.zeros(0)
    bin_v0_mean = np.clip(np.floor(pos_sum / bin_count * 256.0), 0, 255).astype(np.uint8)
    block_count = np.diff(np.append(block_start, n))
    block_nbins = np.diff(np.append(np.searchsorted(bin_start, block_start), bin_start.shape[0]))
    block_w = ws[block_start]
    window_offset = np.searchsorted(block_w, np.arange(n_w + 1), side="left").astype(np.int64)

    # container blocks: up to surface_points observed contact points, evenly spread over the block's events
    block_is_c = types["type_kind"][ts[block_start]] == CONTAINER
    npts = np.where(block_is_c, np.minimum(block_count, surface_points), 0)
    tot = int(npts.sum())
    rep_block = np.repeat(np.arange(block_start.shape[0]), npts)
    j = np.arange(tot) - np.repeat(np.cumsum(npts) - npts, npts)
    c_rep, k_rep = block_count[rep_block], npts[rep_block]
    pick = order[block_start[rep_block] + ((2 * j + 1) * c_rep) // (2 * k_rep)]

    cdt = np.int32 if np.abs(cidx).max() < 2 ** 31 - 1 else np.int64
    model = GranularModel(
        window=window, cell=cell, span=span, t_bins=nt, azimuth_bins=na, polar_bins=nc, v0_edges=v_edges,
        window_offset=window_offset, block_cell=cs[block_start].astype(cdt),
        block_type=ts[block_start].astype(_uint(n_types - 1)),
        block_nbins=block_nbins.astype(_uint(int(block_nbins.max()))),
        bin_index=flat[order][bin_start].astype(_uint(nt * na * nc * nv - 1)),
        bin_count=bin_count.astype(_uint(int(bin_count.max()))), bin_v0_mean=bin_v0_mean,
        block_npoints=npts.astype(np.uint8), points=np.ascontiguousarray(ev.point[pick], dtype=np.float64),
        point_element=ev.element[pick].astype(np.int64), **types,
        materials=tuple(ev.materials), containers=tuple(ev.containers))
    params = {"window": window, "cell": cell, "t_bins": nt, "azimuth_bins": na, "polar_bins": nc, "v0_bins": nv,
              "time_range": [t_lo, t_hi], "surface_points": surface_points, "radius_classes": radius_classes,
              "keep_restitution": bool(keep_restitution), "restitution_step": restitution_step}
    model.inputs_hash = content_hash("granular_model", GENERATOR_VERSION, params, ev.columns(),
                                     list(ev.materials), list(ev.containers))
    model.meta = {"fit": params, "source_origin": ev.origin, "n_events": n, "units": "SI (s, m, m/s)"}
    return model


# ------------------------------------------------------------------------------------------------- asset file
def save_model(path, model: GranularModel) -> Path:
    """Write the model as an asset (HDF5, kind ``granular_model``, atomic; module docstring).

    Parameters
    ----------
    path : path-like
        Destination file (``.h5`` by convention).
    model : GranularModel

    Returns
    -------
    Path
    """
    meta = dict(model.meta)
    meta.update({k: getattr(model, k) for k in _SCALARS})
    meta.update(materials=list(model.materials), containers=list(model.containers))
    return write_asset(path, Asset(kind=MODEL_KIND, arrays=model.arrays(), meta=meta,
                                   inputs_hash=model.inputs_hash, kind_version=GENERATOR_VERSION))


def load_model(path) -> GranularModel:
    """Read a model written by :func:`save_model`, verified: its data hash (corruption), its layout version and the
    consistency of its arrays.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    GranularModel

    Raises
    ------
    InputError
        Naming the file: missing, corrupted, of another kind or generator version (refit it), inconsistent.
    """
    path = Path(path)
    try:
        a = read_asset(path, MODEL_KIND)
    except AssetError as exc:
        raise InputError(f"{exc}; if it is a granular model, {_REFIT}") from None
    if a.kind_version != GENERATOR_VERSION:
        raise InputError(f"{path}: granular model of generator version {a.kind_version}, this impactsound reads "
                         f"version {GENERATOR_VERSION}: {_REFIT}")
    meta = dict(a.meta)
    missing = [k for k in _ARRAYS if k not in a.arrays] + [k for k in _SCALARS if k not in meta]
    if missing:
        raise InputError(f"{path}: granular model lacks {missing}: {_REFIT}")
    try:
        scal = {k: (int(meta.pop(k)) if k.endswith("bins") else float(meta.pop(k))) for k in _SCALARS}
        model = GranularModel(**scal, **{k: a.arrays[k] for k in _ARRAYS},
                              materials=tuple(meta.pop("materials", ())), containers=tuple(meta.pop("containers", ())),
                              inputs_hash=a.inputs_hash, meta=meta)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path}: granular model metadata unreadable ({exc}): {_REFIT}") from None
    _validate(model, str(path))
    return model


def _validate(m: GranularModel, where: str) -> None:
    """Refuse a model whose arrays do not fit together (a foreign or hand-edited file): generation would index
    outside them."""
    def bad(what):
        raise InputError(f"{where}: granular model is inconsistent ({what}): {_REFIT}")

    if not all(math.isfinite(v) and v > 0 for v in (m.window, m.cell, m.span)):
        bad("window, cell and span must be positive")
    if min(m.t_bins, m.azimuth_bins, m.polar_bins, m.v0_bins) < 1:
        bad("bin counts must be positive")
    ve = np.asarray(m.v0_edges, np.float64)
    if ve.ndim != 1 or not (np.isfinite(ve).all() and (ve > 0).all() and (np.diff(ve) >= 0).all()):
        bad("v0_edges must be positive and increasing")
    nb_ = m.n_blocks
    wo = m.window_offset
    if wo.ndim != 1 or wo.shape[0] < 2 or wo[0] != 0 or wo[-1] != nb_ or (np.diff(wo) < 0).any():
        bad("window_offset")
    if m.n_windows != max(1, int(math.ceil(m.span / m.window - 1e-9))):
        bad("window count does not match span / window")
    if m.block_cell.shape != (nb_, 3) or m.block_nbins.shape != (nb_,) or m.block_npoints.shape != (nb_,):
        bad("block arrays differ in length")
    n_types = m.type_kind.shape[0]
    for k in ("type_container", "type_radius_a", "type_radius_b", "type_material_a", "type_material_b", "type_e"):
        if getattr(m, k).shape != (n_types,):
            bad(f"{k} length")
    if nb_ and (int(m.block_type.max()) >= n_types):
        bad("block_type outside the type table")
    if nb_ and (m.block_nbins == 0).any():
        bad("a block without bins")
    nbin = int(m.block_nbins.sum(dtype=np.int64))
    if m.bin_index.shape != (nbin,) or m.bin_count.shape != (nbin,) or m.bin_v0_mean.shape != (nbin,):
        bad("bin arrays differ from the blocks' bin counts")
    if nbin and (int(m.bin_index.max()) >= m.n_bins or (m.bin_count == 0).any()):
        bad("bin index outside the histogram or an empty stored bin")
    npts = int(m.block_npoints.sum(dtype=np.int64))
    if m.points.shape != (npts, 3) or m.point_element.shape != (npts,):
        bad("stored surface points differ from the blocks' point counts")
    if nb_:
        is_c = m.type_kind[m.block_type] == CONTAINER
        if (is_c & (m.block_npoints == 0)).any() or (~is_c & (m.block_npoints != 0)).any():
            bad("container blocks need surface points, grain blocks none")
    if not np.isfinite(m.points).all():
        bad("surface points not finite")


# ------------------------------------------------------------------------------------------------- generation
@nb.njit(cache=True, parallel=True, nogil=True)
def _draw_windows(win_pair, pair_block, pair_count, win_t0, win_len, win_tmax, win_shift, win_start, e0, U,
                  bin_first, bin_index, bin_v0_mean, gcum, nt, na, nc, nv, log_edges, block_cell, block_type, point_first,
                  block_npoints, points, point_element, h, time_scale, type_kind, type_container, type_ra, type_rb,
                  type_ma, type_mb, type_e, t, point, normal, v0, kind, id_b, element, ra, rb, ma, mb, e):
    """Draw the events of output windows j (pairs win_pair[j]:win_pair[j+1], each pair_count[p] events of block
    pair_block[p]) into rows win_start[j]... of the output, sorted by t within the window (Marko, ch. 5.6: a bin
    with probability proportional to its count, values uniform in it, x uniform in the cell, a final sort by t).
    Event i of a window uses uniforms row win_start[j] - e0 + i of U, so the result does not depend on how the
    windows are spread over threads. t is drawn first and sorted; the other columns are then written straight
    into their sorted rows."""
    d_az = 2.0 * np.pi / na
    d_c = 2.0 / nc
    for j in nb.prange(win_pair.shape[0] - 1):
        s0 = win_start[j]
        n = win_start[j + 1] - s0
        if n == 0:
            continue
        tt = np.empty(n)
        kk = np.empty(n, np.int64)
        bb = np.empty(n, np.int64)
        dt_bin = win_len[j] / nt
        i = 0
        for p in range(win_pair[j], win_pair[j + 1]):
            b = pair_block[p]
            lo, hi = bin_first[b], bin_first[b + 1]
            base = gcum[lo]
            tot = gcum[hi] - base
            for _ in range(pair_count[p]):
                r = s0 - e0 + i
                # the bin: first k with cumulative count > base + floor(u * total) (binary search)
                q = np.int64(U[r, 0] * tot)
                if q >= tot:
                    q = tot - 1
                q += base
                a, z = lo, hi - 1
                while a < z:
                    m = (a + z) // 2
                    if gcum[m + 1] > q:
                        z = m
                    else:
                        a = m + 1
                it = np.int64(bin_index[a]) // (na * nc * nv)
                tm = win_t0[j] + (it + U[r, 1]) * dt_bin
                if tm > win_tmax[j]:              # rounding at the window's end: stay inside it
                    tm = win_tmax[j]
                tt[i] = tm
                kk[i] = a
                bb[i] = b
                i += 1
        perm = np.argsort(tt, kind="mergesort")   # stable
        for i in range(n):
            src = perm[i]
            o = s0 + i
            r = s0 - e0 + src
            b = bb[src]
            f = np.int64(bin_index[kk[src]])
            iv = f % nv
            f //= nv
            ic = f % nc
            f //= nc
            ia = f % na
            t[o] = (tt[src] + win_shift[j]) * time_scale
            az = -np.pi + (ia + U[r, 2]) * d_az
            cp = -1.0 + (ic + U[r, 3]) * d_c
            if cp > 1.0:
                cp = 1.0
            sp = np.sqrt(max(0.0, 1.0 - cp * cp))
            normal[o, 0] = sp * np.cos(az)
            normal[o, 1] = sp * np.sin(az)
            normal[o, 2] = cp
            mq = (np.float64(bin_v0_mean[kk[src]]) + 0.5) / 256.0      # the bin's mean position of log v0
            x = U[r, 4] ** ((1.0 - mq) / mq)                           # E[x] = mq (module docstring)
            v0[o] = np.exp(log_edges[iv] + x * (log_edges[iv + 1] - log_edges[iv]))
            npt = block_npoints[b]
            if npt > 0:                           # container hit: one of the stored surface points
                pf = point_first[b]
                k = np.int64(U[r, 5] * npt)
                if k >= npt:
                    k = npt - 1
                point[o, 0] = points[pf + k, 0]
                point[o, 1] = points[pf + k, 1]
                point[o, 2] = points[pf + k, 2]
                element[o] = point_element[pf + k]
            else:                                 # grain pair: uniform in the cell (Marko, eq. 5.5)
                point[o, 0] = (block_cell[b, 0] + U[r, 5]) * h
                point[o, 1] = (block_cell[b, 1] + U[r, 6]) * h
                point[o, 2] = (block_cell[b, 2] + U[r, 7]) * h
                element[o] = -1
            ty = block_type[b]
            kind[o] = type_kind[ty]
            id_b[o] = type_container[ty]
            ra[o] = type_ra[ty]
            rb[o] = type_rb[ty]
            ma[o] = type_ma[ty]
            mb[o] = type_mb[ty]
            e[o] = type_e[ty]


def _output_windows(model: GranularModel, t_model: float, extend: str):
    """Model window and time shift [s, model time] of each output window that starts before t_model."""
    starts, lens = model.window_starts(), model.window_lengths()
    n_w = model.n_windows
    if t_model <= model.span:
        w = np.flatnonzero(starts < t_model)
        return w, np.zeros(w.shape[0])
    if extend == "cycle":
        n_cyc = int(math.ceil(t_model / model.span)) + 1
        j = np.arange(n_cyc * n_w)
        w, shift = j % n_w, (j // n_w) * model.span
    else:                                     # "last": keep repeating the last full-length window
        full = np.flatnonzero(lens >= model.window * (1.0 - 1e-9))
        wl = int(full[-1]) if full.shape[0] else n_w - 1
        period = float(lens[wl])
        n_rep = int(math.ceil((t_model - starts[wl]) / period)) + 1
        w = np.concatenate([np.arange(wl + 1), np.full(n_rep, wl)])
        shift = np.concatenate([np.zeros(wl + 1), np.arange(1, n_rep + 1) * period])
    keep = starts[w] + shift < t_model
    return w[keep], shift[keep]


def generate(model: GranularModel, *, duration: float | None = None, seed=0, count: str = "poisson",
             time_scale: float = 1.0, extend: str = "cycle", max_events: int = 100_000_000,
             where: str = "granular generate") -> GranularEvents:
    """Draw a collision table from a fitted model (module docstring; Marko, ch. 5.6, 6.2).

    Parameters
    ----------
    model : GranularModel
        From :func:`fit_model` or :func:`load_model`.
    duration : float, optional
        Length [s] of the generated table (output time, after ``time_scale``); default: the fitted span times
        ``time_scale``. Longer spans are extended as ``extend`` says; events at or after ``duration`` are cut.
    seed : int or numpy.random.Generator, optional
        Random seed (default 0): same model, seed and options give a bitwise identical table.
    count : {"poisson", "exact"}, optional
        Collisions per (window, cell, type) block: Poisson with the observed count as mean (Marko, eq. 5.6), or
        exactly the observed count.
    time_scale : float, optional
        Output time = time_scale x model time (> 1 slows the process down; counts unchanged).
    extend : {"cycle", "last"}, optional
        Beyond the fitted span: repeat all windows cyclically, or keep repeating the last full window.
    max_events : int, optional
        Refuse to build a table with more events than this (memory: about 120 bytes per event).
    where : str, optional
        Names the call in error messages.

    Returns
    -------
    GranularEvents
        Sorted by t (stable), origin "generate"; id_a is -1 (no grain identity), id_b the container index of a
        container hit (-1 for grain pairs), element the surface element of the drawn container point.

    Raises
    ------
    InputError
        Bad duration, time_scale, count or extend, or a table over ``max_events``.
    """
    if not isinstance(model, GranularModel):
        raise InputError(f"{where}: expected a GranularModel (fit_model / load_model), got {type(model).__name__}")
    time_scale = _positive_float("time_scale", time_scale, where, "-")
    t_out = model.span * time_scale if duration is None else _positive_float("duration", duration, where, "s")
    if count not in COUNT_MODES:
        raise InputError(f"{where}: count = {count!r} is unknown; use one of {', '.join(COUNT_MODES)}")
    if extend not in EXTEND_MODES:
        raise InputError(f"{where}: extend = {extend!r} is unknown; use one of {', '.join(EXTEND_MODES)}")
    if isinstance(seed, np.random.Generator):
        rng, seed_meta = seed, None
    else:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"{where}: seed = {seed!r} must be a non-negative integer (or a numpy Generator)")
        rng, seed_meta = np.random.default_rng(int(seed)), int(seed)

    t_model = model.span if duration is None else t_out / time_scale
    out_w, out_shift = _output_windows(model, t_model, extend)
    starts, lens = model.window_starts(), model.window_lengths()
    wo = model.window_offset
    nblk = (wo[out_w + 1] - wo[out_w]).astype(np.int64)
    n_pairs = int(nblk.sum())
    pair_win_off = np.concatenate([[0], np.cumsum(nblk)])
    pair_out = np.repeat(np.arange(out_w.shape[0]), nblk)
    pair_block = np.repeat(wo[out_w], nblk) + (np.arange(n_pairs) - pair_win_off[pair_out])
    lam = model.block_counts()[pair_block]
    pair_count = rng.poisson(lam).astype(np.int64) if count == "poisson" else lam.astype(np.int64)
    ev_off = np.concatenate([[0], np.cumsum(pair_count)])
    n_total = int(ev_off[-1])
    if n_total > max_events:
        raise InputError(f"{where}: {n_total} events ({n_total * 120 / 1e9:.1f} GB) exceed max_events = "
                         f"{max_events}: generate a shorter duration, or raise max_events")
    win_tmax = np.nextafter(starts[out_w] + lens[out_w], -np.inf)
    win_ev_off = ev_off[pair_win_off]                          # events of output window j: [off[j], off[j+1])

    t = np.empty(n_total)
    point = np.empty((n_total, 3))
    normal = np.empty((n_total, 3))
    v0 = np.empty(n_total)
    kind = np.empty(n_total, np.int8)
    id_b = np.empty(n_total, np.int64)
    element = np.empty(n_total, np.int64)
    ra = np.empty(n_total)
    rb = np.empty(n_total)
    ma = np.empty(n_total, np.int16)
    mb = np.empty(n_total, np.int16)
    e = np.empty(n_total)
    cols = (t, point, normal, v0, kind, id_b, element, ra, rb, ma, mb, e)

    bin_first = np.concatenate([[0], np.cumsum(model.block_nbins, dtype=np.int64)])
    gcum = np.concatenate([[0], np.cumsum(model.bin_count, dtype=np.int64)])
    point_first = np.concatenate([[0], np.cumsum(model.block_npoints, dtype=np.int64)])
    log_edges = np.log(model.v0_edges)
    # one compiled signature whatever integer types the asset chose (they are sized to keep the file small)
    i64 = np.int64
    kern = (model.bin_index.astype(i64), np.ascontiguousarray(model.bin_v0_mean, np.uint8))
    kblk = (model.block_cell.astype(i64), model.block_type.astype(i64))
    kpts = (model.block_npoints.astype(i64), np.ascontiguousarray(model.points, np.float64),
            model.point_element.astype(i64))
    ktypes = (model.type_kind.astype(np.int8), model.type_container.astype(i64),
              model.type_radius_a.astype(np.float64), model.type_radius_b.astype(np.float64),
              model.type_material_a.astype(np.int16), model.type_material_b.astype(np.int16),
              model.type_e.astype(np.float64))
    nb.set_num_threads(max(1, min(default_threads(), nb.config.NUMBA_NUM_THREADS)))
    # chunks of whole output windows, ~_CHUNK_EVENTS events each: the uniforms of one chunk at a time in memory
    n_out = out_w.shape[0]
    chunk_of = win_ev_off[:-1] // _CHUNK_EVENTS
    cuts = np.concatenate([[0], np.flatnonzero(np.diff(chunk_of)) + 1, [n_out]]) if n_out else np.zeros(1, np.int64)
    for j0, j1 in zip(cuts[:-1], cuts[1:]):
        e0, e1 = int(win_ev_off[j0]), int(win_ev_off[j1])
        if e1 == e0:
            continue
        p0 = int(pair_win_off[j0])
        U = rng.random((e1 - e0, _N_UNIFORM))
        _draw_windows(pair_win_off[j0:j1 + 1] - p0, pair_block[p0:], pair_count[p0:], starts[out_w[j0:j1]],
                      lens[out_w[j0:j1]], win_tmax[j0:j1], out_shift[j0:j1], win_ev_off[j0:j1 + 1], e0, U,
                      bin_first, *kern, gcum, model.t_bins, model.azimuth_bins, model.polar_bins, model.v0_bins,
                      log_edges, *kblk, point_first, *kpts, model.cell, time_scale, *ktypes, *cols)
    cut = int(np.searchsorted(t, t_out, side="left"))          # the last windows may run past the duration
    if cut < n_total:
        cols = tuple(c[:cut].copy() for c in cols)
        t, point, normal, v0, kind, id_b, element, ra, rb, ma, mb, e = cols
    n = t.shape[0]
    meta = {"model": model.inputs_hash, "seed": seed_meta, "count": count, "time_scale": time_scale,
            "extend": extend}
    # valid by construction (unit normals, v0 inside the fitted bins, sorted t), so the table is assembled
    # directly rather than re-checked row by row
    return GranularEvents(t=t, point=point, normal=normal, v0=v0, kind=kind, id_a=np.full(n, -1, np.int64),
                          id_b=id_b, element=element, radius_a=ra, radius_b=rb, material_a=ma, material_b=mb, e=e,
                          materials=tuple(model.materials), containers=tuple(model.containers), origin="generate",
                          duration=float(t_out), meta=meta)
