"""Contact-event hygiene: raw per-step engine contacts -> merged collision events.

Pure functions over arrays, independent of any engine, so they are testable on synthetic data and reusable for
contacts exported from other engines. The papers take one impulse per collision from their own impulse-based
solvers (Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 3,
after Guendelman et al. 2003); an engine that reports per-step, per-manifold-point contacts (MuJoCo, Bullet)
needs steps 1, 2, 4 and 5 below to yield that, and they are the package's choices. Only the threshold
v_min = 5 cm/s of step 3 is from the paper (sec. 4.3). Feeding raw per-step impulses to the modes instead would
drone at the engine's step rate under a resting body. The pipeline (:func:`clean_contacts`):

1. :func:`canonicalize` - pair key (min id, max id) with the normal from a to b and the impulse on b; mirrored
   (b, a) reports and coincident duplicate reports of one contact are dropped.
2. :func:`merge_collisions` - rows of one pair are linked when they are close in space (within ~``cluster_frac``
   of the smaller body's size) *and* in time (within ~``max_gap``); each connected group is one collision:
   J = sum of f dt, t0 = first step, v_n = approach speed at the first step, x = impulse-weighted
   mean. Corners of a box landing flat are far apart and stay separate events with the same t0; a ball bouncing
   on one spot gives one event per bounce because the flights are gaps in time.
3. Events with v_n < v_min are dropped (PAN paper sec. 4.3), and so are events that carried no impulse at all.
4. Resting contact: once a contact's approach speed has stayed below v_min for ``settle_time``, the rest of that
   contact is support, not impact. A criterion on the hold time alone (e.g. "held > ~50 ms") would be needed
   only if the engine gave no per-contact speed; we have it, so we recognise rest after ``settle_time`` (2 ms,
   several contact time constants of the engine) and stop summing impulse there. A body that
   lands and stays thus carries its impact impulse, not seconds of weight support, and a contact that starts at
   rest (or re-forms after a micro-separation while resting) has v_n < v_min and emits nothing: no droning.
5. Support (:func:`support_at`): the rows of a collision from ``settle_time`` after its rest began (step 4; by
   then it has been calm that long) are resting contacts. Each event records, for each of its two bodies, the
   body's resting contacts at the event's step as one equivalent support (a box on 4 corners has one): the
   centroid of their points and the mean of their normals, both weighted by each contact's normal force in
   that step, over the contacts whose normal lies within 90 degrees of the net reaction (a book loaded from above
   by a cup keeps the table below as its support, not a point between table and cup); the normal points from the
   support into the body. The forces of the event's step already hold the engine's answer to the impact's first
   step, so the point leans towards where the support takes the blow. A body with no resting contact is free
   (NaN). A resting contact missing from the engine's report at that very step is bridged: the body's last step
   with resting contacts within ``max_gap`` before it is used.

Units: SI throughout (s, m, N s, m/s). Body ids index the scene's bodies; ``GROUND`` (-1) is the static world.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..constants import V_MIN
from .events import GROUND, SUPPORT, EventLog

__all__ = ["RawContacts", "MergedEvents", "canonicalize", "merge_collisions", "clean_contacts", "support_at",
           "thin_resting", "V_MIN"]



@dataclass
class RawContacts:
    """Per-step, per-manifold-point contacts as an engine reports them (one row each).

    Parameters
    ----------
    t : array_like, shape (n,)
        Start of the engine step [s].
    step : array_like of int, shape (n,)
        Engine step index (for pose look-up; any int for foreign data).
    a, b : array_like of int, shape (n,)
        Body ids (``GROUND`` = -1).
    point : array_like, shape (n, 3)
        World contact point [m].
    normal : array_like, shape (n, 3)
        Unit normal from a to b.
    impulse : array_like, shape (n, 3)
        Impulse on b over the step (f dt) [N s].
    vn : array_like, shape (n,)
        Signed relative normal approach speed at the point at the start of the step [m/s] (> 0 approaching,
        < 0 separating).
    """

    t: np.ndarray
    step: np.ndarray
    a: np.ndarray
    b: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    impulse: np.ndarray
    vn: np.ndarray

    def __post_init__(self):
        n = len(np.atleast_1d(self.t))
        self.t = np.asarray(self.t, np.float64).reshape(n)
        self.step = np.asarray(self.step, np.int64).reshape(n)
        self.a = np.asarray(self.a, np.int64).reshape(n)
        self.b = np.asarray(self.b, np.int64).reshape(n)
        self.vn = np.asarray(self.vn, np.float64).reshape(n)
        for name in ("point", "normal", "impulse"):
            setattr(self, name, np.asarray(getattr(self, name), np.float64).reshape(n, 3))

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def empty(cls) -> "RawContacts":
        """No contacts.

        Returns
        -------
        RawContacts
        """
        z = np.zeros(0)
        return cls(t=z, step=z, a=z, b=z, point=np.zeros((0, 3)), normal=np.zeros((0, 3)),
                   impulse=np.zeros((0, 3)), vn=z)

    def select(self, index) -> "RawContacts":
        """The rows picked by ``index``.

        Parameters
        ----------
        index : array_like of bool or int
            Boolean mask or row indices.

        Returns
        -------
        RawContacts
        """
        return RawContacts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @staticmethod
    def concat(parts: list["RawContacts"]) -> "RawContacts":
        """All rows of several tables, in the given order.

        Parameters
        ----------
        parts : list of RawContacts

        Returns
        -------
        RawContacts
            Empty when ``parts`` is empty.
        """
        if not parts:
            return RawContacts.empty()
        return RawContacts(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(RawContacts)})


@dataclass
class MergedEvents:
    """One row per merged collision (same columns as :class:`EventLog`, plus bookkeeping).

    Parameters
    ----------
    t, a, b, point, normal, impulse, vn : ndarray
        As in :class:`EventLog` (t0 [s], body ids, point [m], unit normal a -> b, impulse on b [N s], approach
        speed at first contact [m/s]).
    step : ndarray of int, shape (n,)
        Engine step of t0 (to look up body poses).
    n_rows : ndarray of int, shape (n,)
        Raw rows summed into the impulse.
    support_a_point, support_a_normal, support_b_point, support_b_normal : ndarray, shape (n, 3), optional
        Each body's equivalent resting support at t0 (module docstring, step 5): world point [m] and unit normal
        into the body; NaN (the default) when the body is free or the ground.
    """

    t: np.ndarray
    step: np.ndarray
    a: np.ndarray
    b: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    impulse: np.ndarray
    vn: np.ndarray
    n_rows: np.ndarray
    support_a_point: np.ndarray | None = None
    support_a_normal: np.ndarray | None = None
    support_b_point: np.ndarray | None = None
    support_b_normal: np.ndarray | None = None

    def __post_init__(self):
        n = len(np.atleast_1d(self.t))
        for name in SUPPORT:
            v = getattr(self, name)
            setattr(self, name, np.full((n, 3), np.nan) if v is None else np.asarray(v, np.float64).reshape(n, 3))

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def select(self, index) -> "MergedEvents":
        """The rows picked by ``index`` (boolean mask or row indices).

        Parameters
        ----------
        index : array_like of bool or int

        Returns
        -------
        MergedEvents
        """
        return MergedEvents(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def to_event_log(self, body_names=()) -> EventLog:
        """The events as an :class:`EventLog`, without body poses (the engine backend fills those in).

        Parameters
        ----------
        body_names : sequence of str, optional
            Scene body names, by body index.

        Returns
        -------
        EventLog
            Same rows; poses NaN; supports copied.
        """
        return EventLog(t=self.t, a=self.a, b=self.b, point=self.point, normal=self.normal,
                        impulse=self.impulse, vn=self.vn, body_names=list(body_names),
                        **{k: getattr(self, k) for k in SUPPORT})


def _group_rows(keys: np.ndarray):
    """Group identical integer rows of ``keys`` (n, k): (group id per row, first row index per group, n groups).

    Equivalent to ``np.unique(keys, axis=0, return_inverse=True, return_index=True)`` but with a lexsort, which is
    far faster than unique's structured-row sort on the ~1e5-1e6 rows of a long simulation.
    """
    order = np.lexsort(keys.T[::-1])
    sk = keys[order]
    new = np.r_[True, np.any(sk[1:] != sk[:-1], axis=1)]
    gid_sorted = np.cumsum(new) - 1
    gid = np.empty(len(keys), np.int64)
    gid[order] = gid_sorted
    return gid, order[new], int(gid_sorted[-1]) + 1 if len(keys) else 0


def canonicalize(raw: RawContacts, point_tol: float = 1e-6, impulse_rtol: float = 1e-6) -> RawContacts:
    """Orient every row as pair (min id, max id) and drop duplicate reports (module docstring, step 1).

    A row reported as (b, a) gets its normal and impulse negated (the impulse on the other body is the opposite,
    the normal then still points from the new a to the new b). Rows of one step and pair whose points agree within
    ``point_tol`` [m] *and* whose impulses agree within ``impulse_rtol`` (relative to the largest impulse) are one
    contact reported twice (a mirrored report becomes identical after orientation): the first is kept. Distinct
    constraints that happen to share a point carry different impulses and are kept, so no impulse is lost.
    Coincidence is tested on a grid of those tolerances (two near-identical rows straddling a cell edge survive).

    Parameters
    ----------
    raw : RawContacts
        Engine rows.
    point_tol : float, optional
        Point tolerance [m].
    impulse_rtol : float, optional
        Impulse tolerance, relative to the largest impulse component.

    Returns
    -------
    RawContacts
        Oriented rows (a < b), duplicates removed, in their original order.

    Raises
    ------
    ValueError
        If a row pairs a body with itself.
    """
    if len(raw) == 0:
        return raw
    if np.any(raw.a == raw.b):
        i = int(np.flatnonzero(raw.a == raw.b)[0])
        raise ValueError(f"raw contact row {i} pairs body {raw.a[i]} with itself")
    swap = raw.a > raw.b
    sgn = np.where(swap, -1.0, 1.0)[:, None]
    a = np.where(swap, raw.b, raw.a)
    b = np.where(swap, raw.a, raw.b)
    normal = raw.normal * sgn
    impulse = raw.impulse * sgn
    jscale = max(float(np.abs(impulse).max()) * impulse_rtol, 1e-300)
    key = np.column_stack([raw.step, a, b,
                           np.floor(raw.point / point_tol).astype(np.int64),
                           np.floor(impulse / jscale).astype(np.int64)])
    _, first, _ = _group_rows(key)
    keep = np.sort(first)
    return RawContacts(t=raw.t[keep], step=raw.step[keep], a=a[keep], b=b[keep], point=raw.point[keep],
                       normal=normal[keep], impulse=impulse[keep], vn=raw.vn[keep])


def _collision_labels(raw: RawContacts, radius: np.ndarray, max_gap: float) -> np.ndarray:
    """Label rows so that rows of one pair close in space and in time share a label (single linkage).

    Space is gridded in quarter-radius cells and cells within 4 cells (Chebyshev) link: points closer than 0.75
    radius always link, points farther than 1.25 radius never do. Time is gridded in max_gap cells and adjacent
    cells link: gaps shorter than max_gap never split a collision, gaps longer than 2 max_gap always do. The
    identical rows of a long resting contact collapse to one cell per max_gap, which keeps the neighbour search
    linear in the contact's duration rather than in its rows.
    """
    from scipy.sparse import coo_matrix          # imported here: keeps `import impactsound.dynamics` light
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pair, _, _ = _group_rows(np.column_stack([raw.a, raw.b]))
    cells = np.column_stack([pair, np.floor(4.0 * raw.point / radius[:, None]).astype(np.int64),
                             np.floor(raw.t / max_gap).astype(np.int64)])
    inv, first, nu = _group_rows(cells)
    coords = cells[first].astype(np.float64)
    coords[:, 0] *= 16.0          # pairs 16 units apart never link (the link radius is 4 units)
    coords[:, 4] *= 4.0           # one time cell = 4 units: only adjacent time cells link
    tree = cKDTree(coords)
    links = tree.query_pairs(r=4.0, p=np.inf, output_type="ndarray")
    graph = coo_matrix((np.ones(len(links)), (links[:, 0], links[:, 1])), shape=(nu, nu))
    _, comp = connected_components(graph, directed=False)
    return comp[inv]


def merge_collisions(raw: RawContacts, body_size, *, cluster_frac: float = 0.1, max_gap: float = 1e-3,
                     settle_time: float = 2e-3, v_min: float = V_MIN) -> MergedEvents:
    """Merge canonical raw rows into one event per collision (module docstring, steps 2, 4 and 5), without the
    v_min filter.

    Parameters
    ----------
    raw : RawContacts
        Canonical rows (:func:`canonicalize`).
    body_size : array_like, shape (n_bodies,)
        A length per body [m] (e.g. bounding-box diagonal), indexed by body id; the ground counts as infinite.
    cluster_frac : float, optional
        Contact clusters farther apart than ``cluster_frac`` times the smaller body's size stay separate events
        (exact to +-25 %, see :func:`_collision_labels`).
    max_gap : float, optional
        [s] A pair that reports no contact near a point for longer than this (always, if longer than twice this)
        has separated; the next contact is a new collision. Use at least a few engine steps, and well under the
        shortest audible flight, 2 v_min / g = 10 ms.
    settle_time : float, optional
        [s] Calm time after which a contact is resting (module docstring, step 4).
    v_min : float, optional
        [m/s] Used only to recognise rest here; filtering is :func:`clean_contacts`' job.

    Returns
    -------
    MergedEvents
        Sorted by (t0, a, b).

    Raises
    ------
    ValueError
        On non-positive ``max_gap``, ``settle_time`` or ``cluster_frac``, or a non-positive body size.
    """
    n = len(raw)
    if n == 0:
        z = np.zeros(0)
        return MergedEvents(t=z, step=z.astype(np.int64), a=z.astype(np.int64), b=z.astype(np.int64),
                            point=np.zeros((0, 3)), normal=np.zeros((0, 3)), impulse=np.zeros((0, 3)), vn=z,
                            n_rows=z.astype(np.int64))
    if not (max_gap > 0 and settle_time > 0 and cluster_frac > 0):
        raise ValueError("max_gap, settle_time and cluster_frac must be positive")
    size = np.asarray(body_size, np.float64)
    size_of = lambda ids: np.where(ids == GROUND, np.inf, size[np.where(ids == GROUND, 0, ids)])  # noqa: E731
    radius = cluster_frac * np.minimum(size_of(raw.a), size_of(raw.b))
    if not np.all(np.isfinite(radius) & (radius > 0)):
        raise ValueError("body_size must be positive and finite for every body in a contact")

    labels = _collision_labels(raw, radius, max_gap)
    order = np.lexsort((raw.t, labels))
    lab = labels[order]
    t = raw.t[order]
    vn = raw.vn[order]
    start = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])     # first row of each collision (time-sorted)
    ncol = len(start)
    cid = np.cumsum(np.r_[True, lab[1:] != lab[:-1]]) - 1          # collision index 0..ncol-1 per sorted row

    # t0 and the approach speed at first contact: the largest over the points reported in the first step.
    t0 = t[start]
    at_first = t == t0[cid]
    vn0 = np.full(ncol, -np.inf)
    np.maximum.at(vn0, cid[at_first], vn[at_first])

    # Rest: the first calm run (|vn| < v_min) lasting >= settle_time ends the impact part of a collision.
    calm = np.abs(vn) < v_min
    run_edge = np.r_[True, (calm[1:] != calm[:-1]) | (cid[1:] != cid[:-1])]
    run_start = np.flatnonzero(run_edge)
    run_end = np.r_[run_start[1:], len(t)] - 1
    qualifies = calm[run_start] & (t[run_end] - t[run_start] >= settle_time)
    t_cut = np.full(ncol, np.inf)
    np.minimum.at(t_cut, cid[run_start[qualifies]], t[run_start[qualifies]])
    keep = t < t_cut[cid]

    rows = order[keep]
    kc = cid[keep]
    imp = raw.impulse[rows]
    w = np.linalg.norm(imp, axis=1)
    wsum = np.bincount(kc, weights=w, minlength=ncol)
    nrows = np.bincount(kc, minlength=ncol)
    J = np.column_stack([np.bincount(kc, weights=imp[:, k], minlength=ncol) for k in range(3)])
    # Impulse-weighted mean point and normal (module docstring, step 2); a collision with no force at all (e.g.
    # rows in a contact margin) falls back to the plain mean.
    wuse = np.where(wsum[kc] > 0, w, 1.0)
    wtot = np.bincount(kc, weights=wuse, minlength=ncol)
    pts = np.column_stack([np.bincount(kc, weights=wuse * raw.point[rows, k], minlength=ncol) for k in range(3)])
    nrm = np.column_stack([np.bincount(kc, weights=wuse * raw.normal[rows, k], minlength=ncol)
                           for k in range(3)])
    first_rows = order[start]
    with np.errstate(invalid="ignore", divide="ignore"):
        pts = pts / wtot[:, None]
        nn = np.linalg.norm(nrm, axis=1)
        nrm = nrm / nn[:, None]
    bad = ~(nrows > 0) | ~(nn > 1e-12)
    pts[~(nrows > 0)] = raw.point[first_rows[~(nrows > 0)]]
    nrm[bad] = raw.normal[first_rows[bad]]

    # Support (module docstring, step 5): the rows of every collision once it has rested for settle_time.
    rest = order[t >= t_cut[cid] + settle_time]
    ev_step = raw.step[first_rows]
    sup = {}
    for side, ids in (("a", raw.a[first_rows]), ("b", raw.b[first_rows])):
        sup[f"support_{side}_point"], sup[f"support_{side}_normal"] = support_at(raw.select(rest), ids, ev_step,
                                                                                  t0, max_gap)
    out = MergedEvents(t=t0, step=ev_step, a=raw.a[first_rows], b=raw.b[first_rows], point=pts,
                       normal=nrm, impulse=J, vn=vn0, n_rows=nrows, **sup)
    return out.select(np.lexsort((out.b, out.a, out.t)))


def support_at(resting: RawContacts, body, step, t, max_gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Equivalent resting support of bodies at engine steps (module docstring, step 5).

    A row's weight is its normal impulse over the step (J . n, >= 0; rows that pull or carry nothing are left out).

    Parameters
    ----------
    resting : RawContacts
        Canonical raw rows that are resting contact.
    body : array_like of int, shape (n,)
        Body ids (``GROUND`` gives NaN).
    step : array_like of int, shape (n,)
        Engine steps.
    t : array_like, shape (n,)
        Their times [s].
    max_gap : float
        [s] How far back a body's last step with resting contacts may lie.

    Returns
    -------
    point : ndarray, shape (n, 3)
        World support point [m].
    normal : ndarray, shape (n, 3)
        Unit normal from the support into the body.
        Both NaN where the body has no resting contact in the last ``max_gap`` up to ``step``.
    """
    body = np.asarray(body, np.int64).reshape(-1)
    step = np.asarray(step, np.int64).reshape(-1)
    t = np.asarray(t, np.float64).reshape(-1)
    n = len(body)
    P = np.full((n, 3), np.nan)
    N = np.full((n, 3), np.nan)
    w = np.einsum("ij,ij->i", resting.impulse, resting.normal)
    # one entry per (row, body it supports): body b pushed along +n (n points from a to b), body a along -n
    who = np.r_[resting.b, resting.a]
    use = (who != GROUND) & (np.r_[w, w] > 0)
    if n == 0 or not use.any():
        return P, N
    m = len(resting)
    src = np.r_[np.arange(m), np.arange(m)][use]
    who = who[use]
    nrm = resting.normal[src] * np.where(np.arange(2 * m)[use] < m, 1.0, -1.0)[:, None]
    ww = w[src]
    pts = resting.point[src]
    gid, first, ng = _group_rows(np.column_stack([who, resting.step[src]]))   # groups sorted by (body, step)

    def wsum(x, wt):
        return np.column_stack([np.bincount(gid, weights=wt * x[:, k], minlength=ng) for k in range(3)])

    net = wsum(nrm, ww)
    net /= np.linalg.norm(net, axis=1, keepdims=True) + 1e-300
    wt = np.where(np.einsum("ij,ij->i", nrm, net[gid]) > 0, ww, 0.0)     # only what pushes along the net reaction
    W = np.bincount(gid, weights=wt, minlength=ng)
    gp = wsum(pts, wt) / np.maximum(W, 1e-300)[:, None]
    gn = wsum(nrm, wt)
    gn /= np.linalg.norm(gn, axis=1, keepdims=True) + 1e-300
    g_body, g_step = who[first], resting.step[src][first]
    g_t = resting.t[src][first]
    # last group of the same body at or before the queried step, within max_gap
    span = int(max(g_step.max(), step.max())) + 2
    base = int(min(g_step.min(), step.min(), 0))
    gkey = (g_body - GROUND) * span + (g_step - base)
    qkey = (body - GROUND) * span + (step - base)
    k = np.searchsorted(gkey, qkey, side="right") - 1
    kk = np.maximum(k, 0)
    ok = (k >= 0) & (body != GROUND) & (g_body[kk] == body) & (g_t[kk] >= t - max_gap - 1e-12) & (W[kk] > 0)
    P[ok] = gp[kk[ok]]
    N[ok] = gn[kk[ok]]
    return P, N


def thin_resting(raw: RawContacts, *, v_min: float = V_MIN, margin_steps: int, keep_every: int,
                 bridge_steps: int = 1) -> RawContacts:
    """Drop the rows of long resting contact that no step of :func:`clean_contacts` can use, so that a body lying
    still for minutes does not hold every engine step of its support in memory.

    A row is dropped when it is calm (|v_n| < ``v_min``), its pair touches within ``margin_steps`` of it on both
    sides with no pause longer than ``bridge_steps`` (a continuous contact: engines drop a resting contact for a
    step now and then; rows of one call to this function only, so the ends of a block of steps are never thinned), neither of its bodies has a non-calm row within ``margin_steps``, and its
    step is not a multiple of ``keep_every``. Why the events do not change, given ``margin_steps`` >= (2
    settle_time + 3 max_gap) / dt: every row within the margin of a non-calm row is kept, so each impact keeps
    its first step, its impulse rows up to the calm run that ends it, and its bodies' supports in the steps
    before it (step 5). A resting contact cut by the dropped rows restarts with at least ``margin_steps`` calm
    steps, i.e. as a contact that starts at rest, which carries no event (step 4). Rows every ``keep_every``
    steps stay, so the resting stretches (dynamics/resting.py) still see each support.

    Parameters
    ----------
    raw : RawContacts
        Rows of consecutive engine steps, in any orientation.
    v_min : float
        [m/s] the calm threshold of step 4.
    margin_steps : int
        Engine steps kept around any non-calm row and at the ends of each contact.
    keep_every : int
        Steps whose index is a multiple of this are always kept.
    bridge_steps : int
        Longest pause in a continuous contact [steps]; keep it below max_gap / dt, which never splits a collision.

    Returns
    -------
    RawContacts
        The rows kept, in their order.
    """
    n = len(raw)
    if n == 0:
        return raw
    W = int(margin_steps)
    calm = np.abs(raw.vn) < v_min
    step = raw.step
    # 1. rows within W steps of a non-calm row of either body
    near = np.zeros(n, bool)
    hot_body = np.r_[raw.a[~calm], raw.b[~calm]]
    hot_step = np.r_[step[~calm], step[~calm]]
    real = hot_body != GROUND
    if real.any():
        span = int(step.max() - step.min()) + 4 * W + 8
        base = int(step.min()) - 2 * W - 4
        keys = np.unique((hot_body[real] - GROUND) * span + (hot_step[real] - base))
        for ids in (raw.a, raw.b):
            q = (ids - GROUND) * span + (step - base)
            i = np.searchsorted(keys, q)
            lo = keys[np.maximum(i - 1, 0)]
            hi = keys[np.minimum(i, len(keys) - 1)]
            near |= ((np.abs(q - lo) <= W) | (np.abs(hi - q) <= W)) & (ids != GROUND)
    # 2. position of each row's step inside its pair's run of consecutive contact steps
    pair = np.column_stack([np.minimum(raw.a, raw.b), np.maximum(raw.a, raw.b), step])
    gid, first, ng = _group_rows(pair)                 # groups sorted by (pair, step)
    gp, gs = pair[first, :2], pair[first, 2]
    new_run = np.r_[True, np.any(gp[1:] != gp[:-1], axis=1) | (gs[1:] > gs[:-1] + int(bridge_steps))]
    run = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.r_[starts[1:], ng] - 1
    inside = (gs - gs[starts[run]] >= W) & (gs[ends[run]] - gs >= W)
    drop = calm & ~near & inside[gid] & (step % max(1, int(keep_every)) != 0)
    return raw.select(~drop) if drop.any() else raw


def clean_contacts(raw: RawContacts, body_size, *, v_min: float = V_MIN, cluster_frac: float = 0.1,
                   max_gap: float = 1e-3, settle_time: float = 2e-3) -> MergedEvents:
    """Raw engine contacts -> clean collision events (module docstring, steps 1-5), sorted by t0.

    Canonicalize, merge, then drop events whose approach speed at first contact is below ``v_min`` (``vn`` of the
    result is >= v_min) and events that carried no force at all (|J| = 0: a speculative or in-margin contact that
    never engaged; nothing to hear).

    Parameters
    ----------
    raw : RawContacts
        Engine rows, in any orientation.
    body_size : array_like
        A length per body [m] (see :func:`merge_collisions`).
    v_min : float, optional
        Impact threshold [m/s] (default 0.05, the PAN paper's sec. 4.3).
    cluster_frac, max_gap, settle_time : float, optional
        As in :func:`merge_collisions`.

    Returns
    -------
    MergedEvents
    """
    merged = merge_collisions(canonicalize(raw), body_size, cluster_frac=cluster_frac, max_gap=max_gap,
                              settle_time=settle_time, v_min=v_min)
    return merged.select((merged.vn >= v_min) & np.any(merged.impulse != 0, axis=1))
