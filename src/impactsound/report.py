"""Audibility report: how loud every source kind and object is at each listener, and which one dominates each impact.

:func:`audibility_report` is a pure function of a :class:`~impactsound.pipeline.RenderResult` (its stems, events,
listener names and sample rate); :func:`format_report` turns its dict into a text table. ``impactsound report``
(cli_report.py) renders a scene and prints either.

Levels (per listener channel, of a signal p(t) in pascals)
----------------------------------------------------------
``peak_pa``      max |p| [Pa]
``peak_db_spl``  20 log10(peak / 20 uPa) [dB SPL]; null when the signal is silent
``energy_pa2s``  sound exposure E = integral of p^2 dt [Pa^2 s] (sum of p^2 / sample rate)
``energy_db``    sound exposure level 10 log10(E / ((20 uPa)^2 * 1 s)) [dB] (the L_E of IEC 61672-1); null when
                 silent

They are given for the mix, for each source kind (the sum of its object stems), for each object (the sum of its
stems over the kinds) and for each (kind, object) stem. Sums are of pressures, as the listener hears them, so
levels of parts do not add up to the level of the whole. A source kind's stem for an object is whatever that kind
renders for it: for ``ground`` it is the floor's sound caused by that object's impacts, so the ``objects`` level of
a ball includes the floor it hits; compare ``kind_object`` entries (``ground``/``ball`` with ``modal``/``ball``) to
tell the floor from the ball.

Impacts and their windows
-------------------------
Events (sorted by time) are grouped into impacts: an event joins the current impact when it starts less than
``group_s`` (default 5 ms) after the impact's first event, so an impact lasts at most ``group_s``. At listener l an
impact at t with contact points x_e arrives at a = t + min_e |x_e - x_l| / c (no shift when the listener positions
are not given). Its window at that listener is [a - pre_s, min(a + window_s, a' - pre_s)] with a' the next impact's
arrival at the same listener: 50 ms after the arrival by default, cut where the next impact begins, so windows do
not overlap; never shorter than min(window_s, 1 ms). ``pre_s`` (0.5 ms) keeps the onset of pulses that start at
the contact (a Hertz force pulse lasts tens of microseconds to a millisecond).

In the window, the levels above are computed for every kind, object and (kind, object); the dominant kind, object
and (kind, object) are those of largest energy, and ``margin_db`` is 10 log10 of the dominant (kind, object)'s
energy over the runner-up's (null when there is no runner-up with energy). Whatever still rings from earlier
impacts counts (that is what the listener hears); ``dominant_involved`` is the loudest (kind, object) among the
impact's own objects only (null when none of them sounds in the window), to tell what the impact itself added.

JSON schema (``impactsound.report/1``; every key is always present)
--------------------------------------------------------------------
::

    {"schema": "impactsound.report/1", "scene": str | null, "sample_rate": int, "duration_s": float,
     "air_c": float, "n_events": int,
     "window": {"after_s": float, "before_s": float, "group_s": float, "propagation_delay": bool},
     "kinds": [kind, ...], "objects": [object, ...],
     "listeners": {channel name: {
         "channel": int,
         "mix": LEVELS,
         "kinds": {kind: LEVELS}, "objects": {object: LEVELS}, "kind_object": {kind: {object: LEVELS}},
         "impacts": [{"t_s": float, "events": [event index, ...], "objects": [body name or "ground", ...],
                      "delay_s": float, "window_s": [start, end],
                      "dominant_kind": str | null, "dominant_object": str | null,
                      "dominant": {"kind": str, "object": str} | null, "margin_db": float | null,
                      "dominant_involved": {"kind": str, "object": str} | null,
                      "levels": {"mix": LEVELS, "kinds": {...}, "objects": {...}, "kind_object": {...}}}, ...]}}}

    LEVELS = {"peak_pa": float, "peak_db_spl": float | null, "energy_pa2s": float, "energy_db": float | null}
"""
from __future__ import annotations

import math

import numpy as np

from .constants import AIR_C
from .dynamics.events import EventLog

SCHEMA = "impactsound.report/1"
#: reference pressure of dB SPL [Pa]
P_REF = 20e-6
GROUND_NAME = "ground"


def _db(x: float, ref: float, factor: float) -> float | None:
    return factor * math.log10(x / ref) if x > 0 else None


def levels(p: np.ndarray, sample_rate: float) -> dict:
    """Peak and exposure of one pressure signal.

    Parameters
    ----------
    p : ndarray, shape (n,)
        Pressure [Pa].
    sample_rate : float
        [Hz].

    Returns
    -------
    dict
        ``peak_pa``, ``peak_db_spl`` (re 20 uPa; None when silent), ``energy_pa2s`` (integral p^2 dt, the
        rectangle rule) and ``energy_db`` (sound exposure level re (20 uPa)^2 s; None when silent).
    """
    p = np.asarray(p, np.float64)
    peak = float(np.abs(p).max()) if p.size else 0.0
    energy = float(np.dot(p, p)) / float(sample_rate) if p.size else 0.0
    return {"peak_pa": peak, "peak_db_spl": _db(peak, P_REF, 20.0),
            "energy_pa2s": energy, "energy_db": _db(energy, P_REF ** 2, 10.0)}


def _argmax(energies: dict) -> str | None:
    best, best_e = None, 0.0
    for k, e in energies.items():
        if e > best_e:
            best, best_e = k, e
    return best


def _signals(result, L: int, n: int):
    """The pressures the report measures: per kind, per object, per (kind, object), each (L, n)."""
    kinds = list(result.stems)
    objects: list[str] = []
    for k in kinds:
        objects += [o for o in result.stems[k] if o not in objects]
    zero = np.zeros((L, n))
    ko = {k: {o: np.asarray(s, np.float64).reshape(L, n) for o, s in result.stems[k].items()} for k in kinds}
    kind_sig = {k: sum(ko[k].values(), zero) for k in kinds}
    obj_sig = {o: sum((ko[k][o] for k in kinds if o in ko[k]), zero) for o in objects}
    return kinds, objects, ko, kind_sig, obj_sig


def _block(mix, kind_sig, obj_sig, ko, l, sl, fs) -> dict:
    return {"mix": levels(mix[l, sl], fs),
            "kinds": {k: levels(s[l, sl], fs) for k, s in kind_sig.items()},
            "objects": {o: levels(s[l, sl], fs) for o, s in obj_sig.items()},
            "kind_object": {k: {o: levels(s[l, sl], fs) for o, s in d.items()} for k, d in ko.items()}}


def group_impacts(t: np.ndarray, group_s: float) -> list[np.ndarray]:
    """Group event times into impacts: an event joins the current impact when it starts less than ``group_s``
    after that impact's first event.

    Parameters
    ----------
    t : ndarray, shape (n,)
        Event times [s], sorted.
    group_s : float
        Longest impact [s].

    Returns
    -------
    list of ndarray of int
        The event indices of each impact, in time order.
    """
    groups: list[list[int]] = []
    start = -math.inf
    for i, ti in enumerate(np.asarray(t, np.float64)):
        if groups and ti - start < group_s:
            groups[-1].append(i)
        else:
            groups.append([i])
            start = ti
    return [np.array(g, np.int64) for g in groups]


def _names_of(events, ids) -> list[str]:
    names = list(events.body_names)
    out: list[str] = []
    for i in ids:
        i = int(i)
        name = GROUND_NAME if i < 0 else (names[i] if i < len(names) else str(i))
        if name not in out:
            out.append(name)
    return out


def audibility_report(result, air_c: float = AIR_C, listener_positions=None, *, window_s: float = 0.05,
                      group_s: float = 0.005, pre_s: float = 0.0005, scene: str | None = None) -> dict:
    """Levels of every source kind and object at every listener channel, and the dominant one of each impact.

    Parameters
    ----------
    result : RenderResult
        A render (:func:`~impactsound.pipeline.render_scene`) or one built by hand: ``stems`` {kind: {object:
        (L, n) Pa}}, ``mix`` (L, n), ``events`` (EventLog), ``listener_names``, ``sample_rate``.
    air_c : float
        Speed of sound [m/s], for the propagation delay.
    listener_positions : array_like, shape (L, 3), optional
        World position of each channel [m] (binaural: of each ear). Without it the windows start at the event
        times (no propagation delay).
    window_s : float
        How long after an impact's arrival its window lasts at most [s] (50 ms).
    group_s : float
        Events starting less than this after an impact's first event belong to it [s] (5 ms).
    pre_s : float
        Windows open this long before the arrival [s] (0.5 ms).
    scene : str, optional
        The scene's name or path, recorded in the report.

    Returns
    -------
    dict
        The schema in the module docstring.
    """
    if window_s <= 0 or group_s < 0 or pre_s < 0 or air_c <= 0:
        raise ValueError("audibility_report: window_s and air_c must be > 0, group_s and pre_s >= 0")
    fs = float(result.sample_rate)
    mix = np.atleast_2d(np.asarray(result.mix, np.float64))
    L, n = mix.shape
    names = list(result.listener_names)
    if len(names) != L or len(set(names)) != L:
        names = [f"ch{l}" for l in range(L)]
    kinds, objects, ko, kind_sig, obj_sig = _signals(result, L, n)

    events = result.events if result.events is not None else EventLog.empty()
    t = np.asarray(events.t, np.float64)
    order = np.argsort(t, kind="stable")
    groups = [order[g] for g in group_impacts(t[order], group_s)]
    G = len(groups)
    delay = np.zeros((G, L))
    if listener_positions is not None and G:
        pos = np.asarray(listener_positions, np.float64).reshape(L, 3)
        for g, idx in enumerate(groups):
            r = np.linalg.norm(np.asarray(events.point)[idx][:, None, :] - pos[None, :, :], axis=2)   # (e, L)
            delay[g] = r.min(axis=0) / air_c
    t0 = np.array([t[idx].min() for idx in groups]) if G else np.zeros(0)
    arrival = t0[:, None] + delay                                                                  # (G, L)

    report = {"schema": SCHEMA, "scene": scene, "sample_rate": int(result.sample_rate), "duration_s": n / fs,
              "air_c": float(air_c), "n_events": int(len(t)),
              "window": {"after_s": float(window_s), "before_s": float(pre_s), "group_s": float(group_s),
                         "propagation_delay": listener_positions is not None},
              "kinds": kinds, "objects": objects, "listeners": {}}
    min_len = min(window_s, 1e-3)
    for l, name in enumerate(names):
        entry = {"channel": l, **_block(mix, kind_sig, obj_sig, ko, l, slice(None), fs), "impacts": []}
        for g, idx in enumerate(groups):
            a = float(arrival[g, l])
            start = a - pre_s
            end = a + window_s
            if g + 1 < G:
                end = min(end, float(arrival[g + 1, l]) - pre_s)
            end = max(end, a + min_len)
            i0 = min(max(int(math.floor(start * fs)), 0), n)
            i1 = min(max(int(math.ceil(end * fs)), i0), n)
            lv = _block(mix, kind_sig, obj_sig, ko, l, slice(i0, i1), fs)
            pairs = {(k, o): d["energy_pa2s"] for k, dd in lv["kind_object"].items() for o, d in dd.items()}
            top = _argmax(pairs)
            margin = None
            if top is not None:
                rest = [e for p, e in pairs.items() if p != top and e > 0]
                if rest:
                    margin = 10 * math.log10(pairs[top] / max(rest))
            ids = np.concatenate([events.a[idx], events.b[idx]]) if len(idx) else []
            involved = _names_of(events, ids)
            own = _argmax({p: e for p, e in pairs.items() if p[1] in involved})
            entry["impacts"].append({
                "t_s": float(t0[g]), "events": [int(i) for i in idx], "objects": involved,
                "delay_s": float(delay[g, l]), "window_s": [start, end],
                "dominant_kind": _argmax({k: d["energy_pa2s"] for k, d in lv["kinds"].items()}),
                "dominant_object": _argmax({o: d["energy_pa2s"] for o, d in lv["objects"].items()}),
                "dominant": None if top is None else {"kind": top[0], "object": top[1]},
                "margin_db": margin,
                "dominant_involved": None if own is None else {"kind": own[0], "object": own[1]},
                "levels": lv})
        report["listeners"][name] = entry
    return report


# ---- text -----------------------------------------------------------------------------------------------------

def _f(x, fmt: str, width: int) -> str:
    return (format(x, fmt) if x is not None else "-").rjust(width)


def _row(label: str, lv: dict, width: int) -> str:
    if lv["peak_pa"] == 0:
        return f"{label:<{width}}  {'silent':>10}"
    return (f"{label:<{width}}  {_f(lv['peak_pa'], '.3e', 10)}  {_f(lv['peak_db_spl'], '.1f', 7)}  "
            f"{_f(lv['energy_pa2s'], '.3e', 10)}  {_f(lv['energy_db'], '.1f', 7)}")


def format_report(report: dict) -> str:
    """The report as text: per listener, a table of levels (mix, kinds, each kind's objects, objects), then one
    line per impact with the exposure level of every kind in its window and the dominant (kind, object).

    Parameters
    ----------
    report : dict
        From :func:`audibility_report`.

    Returns
    -------
    str
        Lines ending in a newline.
    """
    w = report["window"]
    kinds, objects = report["kinds"], report["objects"]
    out = []
    title = f"audibility report: {report['scene']}" if report.get("scene") else "audibility report"
    n_imp = max((len(e["impacts"]) for e in report["listeners"].values()), default=0)
    out.append(f"{title} ({report['sample_rate']} Hz, {report['duration_s']:.3f} s, {report['n_events']} events "
               f"in {n_imp} impacts)")
    out.append("levels: peak |p| [Pa], peak [dB SPL re 20 uPa], exposure E = integral of p^2 dt [Pa^2 s] and its "
               "level L_E [dB re (20 uPa)^2 s]")
    shift = "arrival at the listener (event time + distance / c)" if w["propagation_delay"] else "event time"
    out.append(f"impact windows: from {w['before_s'] * 1e3:g} ms before the {shift} to {w['after_s'] * 1e3:g} ms "
               f"after it or the next impact; events within {w['group_s'] * 1e3:g} ms are one impact")
    labels = ["mix"] + [f"{k}" for k in kinds] + [f"  {k}/{o}" for k in kinds for o in objects] + \
             [f"object {o}" for o in objects]
    width = max(max(map(len, labels)), 14)
    for name, e in report["listeners"].items():
        out.append("")
        out.append(f"listener {name} (channel {e['channel']})")
        out.append(f"  {'':<{width}}  {'peak [Pa]':>10}  {'dB SPL':>7}  {'E [Pa^2 s]':>10}  {'L_E [dB]':>7}")
        out.append("  " + _row("mix", e["mix"], width))
        for k in kinds:
            out.append("  " + _row(k, e["kinds"][k], width))
            for o, lv in e["kind_object"][k].items():
                out.append("  " + _row(f"  {k}/{o}", lv, width))
        for o in objects:
            out.append("  " + _row(f"object {o}", e["objects"][o], width))
        if not e["impacts"]:
            out.append("  no impacts")
            continue
        def pair(d):
            return f"{d['kind']}/{d['object']}" if d else "silent"

        imps = e["impacts"]
        obj_w = max([len("objects")] + [len("+".join(i["objects"])) for i in imps])
        dom_w = max([len("dominant")] + [len(pair(i["dominant"])) for i in imps])
        kw = [max(len(k), 6) for k in kinds]
        out.append("")
        out.append("  impacts: L_E [dB] of each kind in the window; the dominant kind/object, its margin over the "
                   "next [dB], and the loudest of the impact's own objects")
        out.append((f"  {'t [s]':>8}  {'objects':<{obj_w}}  {'window [ms]':>15}  "
                    + "".join(k.rjust(wk) + "  " for k, wk in zip(kinds, kw))
                    + f"{'dominant':<{dom_w}}  {'margin':>6}  own objects").rstrip())
        for i in imps:
            ws = f"{i['window_s'][0] * 1e3:.1f}-{i['window_s'][1] * 1e3:.1f}"
            cells = "".join(_f(i["levels"]["kinds"][k]["energy_db"], ".1f", wk) + "  " for k, wk in zip(kinds, kw))
            own = "same" if i["dominant_involved"] == i["dominant"] else pair(i["dominant_involved"])
            out.append(f"  {i['t_s']:8.4f}  {'+'.join(i['objects']):<{obj_w}}  {ws:>15}  {cells}"
                       f"{pair(i['dominant']):<{dom_w}}  {_f(i['margin_db'], '.1f', 6)}  {own}")
    return "\n".join(out) + "\n"
