"""Plausibility of a granular event table given as a file (``[granular] events = "log"``) against its scene.

A table can pass the format checks (events.py: columns, NaN, unit normals, sorted times) and still render silence
or nonsense without an error: times in milliseconds (every row past the scene's end), radii in millimetres
(metre-sized "grains" in a 4 cm cup), speeds in mm/s, points in millimetres. The checks, the same in spirit as the
rigid event logs' (dynamics/plausibility.py):

* time: most rows must lie within the scene's duration. A table longer than the scene is cut with a warning
  that says how many rows are left out; when more than half of them are past the end (all of them when the
  times are milliseconds) it is an error;
* radius: a grain must fit the container (its diameter at most half the container's smallest side), or be at
  most 5 cm without a container;
* speed: v0 at most 3 x the free-fall speed sqrt(2 g H) from the scene's height H (the span in z of the table's
  points, the objects, the funnel or stream and the ground) + 2 m/s (a stream's own speed);
* points: a wall hit lies on its container (within the container's box grown by a tenth of its diagonal, at
  least 1 cm); every point lies within 1 m of the scene's box (objects, funnel or stream, listeners, ground).

Every message names the file, the row (CSV rows counted like a spreadsheet: the header is row 1; NPZ and Parquet
rows are array indices), the column and the fix; ``allow_implausible`` turns the errors into warnings.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...dynamics.plausibility import ALLOW_HINT, ImplausibleEventWarning
from ...errors import InputError
from .events import CONTAINER, GranularEvents

G = 9.81                 # [m/s^2]
SPEED_SAFETY = 3.0       # v0 may reach this many times free fall from the scene's height ...
SPEED_EXTRA = 2.0        # ... plus this [m/s]
LONE_GRAIN_MAX = 0.05    # [m] the largest grain radius without a container
POINT_MARGIN = 1.0       # [m] every point lies within this of the scene's box


class GranularLogWarning(UserWarning):
    """A granular event table was cut to the scene's duration (rows past its end are left out)."""


def _row(i: int, csv: bool) -> str:
    return f"row {int(i) + 2}" if csv else f"row {int(i)}"


def _scene_box(scene) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners of everything the scene places: objects, listeners, funnel or stream, ground."""
    from ...rotation import quat_to_matrix
    pts = []
    for b in scene.bodies:
        R = quat_to_matrix(b.quaternion)[0]
        pts.append(np.asarray(b.mesh.vertices) @ R.T + np.asarray(b.position))
    for lst in scene.listeners:
        p = getattr(lst, "position", None)
        if p is not None and np.all(np.isfinite(p)):
            pts.append(np.asarray(p, np.float64).reshape(1, 3))
    g = scene.granular
    for extra in (getattr(g, "funnel", None), getattr(g, "stream", None)):
        if extra is not None and "position" in extra:
            pos = np.asarray(extra["position"], np.float64)
            pts.append(np.vstack([pos, pos + [0.0, 0.0, float(extra.get("height", 0.0))]]))
    P = np.vstack(pts) if pts else np.zeros((1, 3))
    lo, hi = P.min(axis=0), P.max(axis=0)
    if scene.ground.enabled:
        lo[2] = min(lo[2], scene.ground.height)
    return lo, hi


def _container_box(scene, name: str):
    from ...rotation import quat_to_matrix
    if name not in scene.body_names:
        return None
    b = scene.bodies[scene.body_names.index(name)]
    R = quat_to_matrix(b.quaternion)[0]
    v = np.asarray(b.mesh.vertices) @ R.T + np.asarray(b.position)
    return v.min(axis=0), v.max(axis=0)


def check_granular_table(ev: GranularEvents, scene, source: str, *, csv: bool = False,
                         allow_implausible: bool = False) -> GranularEvents:
    """Check a granular event table read from ``source`` against ``scene`` (module docstring).

    Parameters
    ----------
    ev : GranularEvents
        The table as read (times sorted).
    scene : Scene
        Its scene (duration [s], objects, listeners, ``[granular]`` table, ground).
    source : str
        Names the file in messages.
    csv : bool, optional
        Count rows like a spreadsheet (header = row 1).
    allow_implausible : bool, optional
        Warn instead of raising.

    Returns
    -------
    GranularEvents
        The rows within the scene's duration.

    Raises
    ------
    InputError
        On the first problem (file, row, column, fix), unless ``allow_implausible``.
    """
    n = len(ev)
    if n == 0:
        return ev
    problems = []
    dur = float(scene.duration)
    late = ev.t >= dur
    n_late = int(late.sum())
    if n_late and n_late > n // 2:
        i = int(np.argmax(late))
        ms = " (the times look like milliseconds: divide them by 1000)" if float(ev.t[-1]) / 1000.0 < dur else ""
        problems.append(f"{source}: {_row(i, csv)}, column {'time' if csv else 't'} = {ev.t[i]:.6g} s is past the scene's duration "
                        f"{dur:g} s, like {n_late} of the {n} rows{ms}: give times in seconds from the scene's "
                        "start, or lengthen [scene] duration")
    g = scene.granular
    cont = _container_box(scene, g.container) if g is not None and g.container is not None else None
    r = np.maximum(ev.radius_a, np.where(np.isfinite(ev.radius_b), ev.radius_b, 0.0))
    if cont is not None:
        side = float(np.min(cont[1] - cont[0]))
        limit, what = 0.25 * side, f"fit the container {g.container!r} (smallest side {side:.4g} m)"
    else:
        limit, what = LONE_GRAIN_MAX, f"be a grain (at most {LONE_GRAIN_MAX:g} m)"
    big = r > limit
    if big.any():
        i = int(np.argmax(big))
        col = "radius_a" if ev.radius_a[i] > limit else "radius_b"
        problems.append(f"{source}: {_row(i, csv)}, column {col} = {r[i]:.6g} m is too large to {what}: give "
                        "radii in metres (divide by 1000 if they are millimetres)")
    lo, hi = _scene_box(scene)
    z = np.concatenate([ev.point[:, 2], [lo[2], hi[2]]])
    H = float(np.ptp(z))
    v_max = SPEED_SAFETY * np.sqrt(2.0 * G * H) + SPEED_EXTRA
    fast = ev.v0 > v_max
    if fast.any():
        i = int(np.argmax(fast))
        problems.append(f"{source}: {_row(i, csv)}, column v0 = {ev.v0[i]:.6g} m/s is faster than anything falling "
                        f"{H:.3g} m in this scene can hit (at most {v_max:.3g} m/s): give speeds in m/s (divide by "
                        "1000 if they are mm/s)")
    far = np.any((ev.point < lo - POINT_MARGIN) | (ev.point > hi + POINT_MARGIN), axis=1)
    if cont is not None:
        c = (ev.kind == CONTAINER) & (ev.id_b >= 0)
        names = np.asarray(ev.containers, dtype=object)
        on = np.zeros(n, bool)
        if len(names):
            on[c] = names[ev.id_b[c]] == g.container
        pad = max(0.01, 0.1 * float(np.linalg.norm(cont[1] - cont[0])))
        off = on & np.any((ev.point < cont[0] - pad) | (ev.point > cont[1] + pad), axis=1)
    else:
        off = np.zeros(n, bool)
    bad = far | off
    if bad.any():
        i = int(np.argmax(bad))
        where = (f"not on the container {g.container!r} (within {pad:.3g} m of its box)" if off[i] and not far[i]
                 else f"more than {POINT_MARGIN:g} m outside the scene")
        mm = " (the points look like millimetres: divide them by 1000)" if np.all(
            (ev.point[bad] / 1000.0 >= lo - POINT_MARGIN) & (ev.point[bad] / 1000.0 <= hi + POINT_MARGIN)) else ""
        cols = "px, py, pz" if csv else "point"
        problems.append(f"{source}: {_row(i, csv)}, column(s) {cols} = {np.round(ev.point[i], 6).tolist()} m is "
                        f"{where}, like {int(bad.sum())} of the {n} rows{mm}: give world coordinates in metres")
    if problems and not allow_implausible:
        more = f" [{len(problems) - 1} more problem(s) after this one]" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}; {ALLOW_HINT}{more}")
    for p in problems:
        warnings.warn(f"{p} (rendered anyway: --allow-implausible)", ImplausibleEventWarning, stacklevel=2)
    if n_late:
        warnings.warn(f"{source}: {n_late} of the {n} rows (from {_row(int(np.argmax(late)), csv)}, t = "
                      f"{ev.t[late][0]:.6g} s) are at or past the scene's duration {dur:g} s and are left out; "
                      "lengthen [scene] duration to hear them", GranularLogWarning, stacklevel=2)
        ev = ev.take(~late)
    return ev
