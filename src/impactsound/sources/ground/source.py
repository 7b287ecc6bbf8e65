"""Ground source: the floor's own sound under every impact on it (Qu & James 2019, "Ground sound").

Each contact event between a body and the ground pushes the floor, an elastic half-space of the scene's
``[ground] material``, with the force J K4_eps(t - t_m): J the event's normal impulse, t_c the Hertz contact time of
the shared contact stage (the same estimate the other sources use), eps = t_c / 4, t_m = t0 + t_c / 2 (Qu & James
2019, sec. 3-4). The floor's motion (Lamb's problem, :mod:`.lamb`) radiates into the air as a baffled plane
(Rayleigh integral); the sound at each listener comes from a response bank per listener height (:mod:`.bank`),
exact in eps and interpolated in the horizontal offset. The stem of each object is the floor's sound from that
object's impacts. Listener channels are points (a binaural ear gets its own position, no head shadow).

The source kind ``ground`` (registered at the end of this module) is among the default sources; scenes without a
ground (``[ground] enabled = false``) get no ground sound.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...dynamics.events import GROUND
from ...errors import InputError
from ...materials import ground_fit
from ..registry import SourceKind, register
from .bank import response_bank
from .impact import HalfSpace

log = logging.getLogger("impactsound")
#: a ground event's point may sit this far off the ground plane [m] (contact points lie on the body's surface)
PLANE_TOL = 0.01


class GroundOptions(BaseModel):
    """Options of the ``ground`` source (scene table ``[source.ground]``).

    Parameters
    ----------
    kernel : {"K4", "lorentzian"}
        Force kernel of width eps = t_c / 4: the fourth-order K4 (default, Qu & James 2019) or the Lorentzian.
    cache : bool
        Keep response banks in the asset cache (default true).
    """

    model_config = ConfigDict(extra="forbid")
    kernel: Literal["K4", "lorentzian"] = Field(default="K4", description="force kernel of width t_c/4: 'K4' "
                                                "(fourth order, Qu & James 2019) or 'lorentzian'")
    cache: bool = Field(default=True, description="keep the response banks (per listener height) in the asset "
                        "cache")


@dataclass
class GroundPrepared:
    """What :func:`prepare` made: the half-space (None: the scene has no ground), its material's name and how
    well a half-space fits it."""

    half_space: HalfSpace | None
    material: str
    fit: str
    plate: object | None = None         # a PlateFloor ([ground] model = "plate"; sources/ground/plate.py)
    transfers: dict = field(default_factory=dict)   # plate: {listener position: (transfer, delay)}, per render


def half_space(material, where: str = "[ground] material", loss_factor: float = 0.0) -> HalfSpace:
    """The elastic half-space of a material (E, nu, rho) and a loss factor, with errors naming ``where``."""
    if not (0 < material.nu < 0.5):
        raise InputError(f"{where}: {material.name!r} has Poisson's ratio nu = {material.nu}; the ground's "
                         "half-space needs 0 < nu < 0.5 (give the floor's nu)")
    try:
        return HalfSpace(float(material.E), float(material.nu), float(material.rho), float(loss_factor))
    except InputError as exc:
        raise InputError(f"{where}: {material.name!r}: {exc}") from None


def prepare(scene, progress=None) -> GroundPrepared:
    """Prepare the ``ground`` source: the floor's half-space from ``[ground] material`` (warning when a
    half-space is a poor model of it).

    Parameters
    ----------
    scene : Scene
        Its ``ground`` (material, height, enabled).
    progress : Progress, optional
        Unused: the response banks are built at render time, when the impacts' offsets are known.

    Returns
    -------
    GroundPrepared
    """
    g = scene.ground
    if not g.enabled:
        return GroundPrepared(None, "", "")
    if getattr(scene, "quality", "default") == "preview":
        # a preview skips the floor's own sound: its response bank is seconds per listener height (Qu & James
        # 2019's ring integrals), more than the rest of a small scene's preview
        if progress is not None:
            progress.message("  ground sound: off in a preview (quality = \"preview\")")
        return GroundPrepared(None, "preview", "")
    if getattr(g, "plate", None) is not None:
        return GroundPrepared(None, g.material.name, "plate", plate=g.plate)
    fit = ground_fit(g.material)
    if fit.startswith("poor"):
        log.warning(f"[ground] material {g.material.name!r}: {fit}")
    return GroundPrepared(half_space(g.material, f"{scene.path}: ground.material",
                                     getattr(g, "loss_factor", 0.0)), g.material.name, fit)


def ground_events(events, ground_height: float):
    """Rows of the events against the ground, with their normal impulses [N s] (checked).

    Raises
    ------
    InputError
        On a non-finite or negative normal impulse, or a contact point off the ground plane by more than
        :data:`PLANE_TOL`.
    """
    rows = np.flatnonzero((events.a == GROUND) | (events.b == GROUND))
    if len(rows) == 0:
        return rows, np.zeros(0)
    J = np.einsum("ij,ij->i", events.impulse[rows], events.normal[rows])
    pt = events.point[rows]
    bad = ~np.isfinite(J) | ~np.isfinite(pt).all(axis=1)
    if bad.any():
        r = int(rows[np.flatnonzero(bad)[0]])
        raise InputError(f"event log row {r}: a ground contact with a NaN or infinite impulse or point; fix the "
                         "event log (columns impulse, normal, point)")
    neg = J < -1e-12 * np.maximum(1.0, np.abs(J).max())
    if neg.any():
        r = int(rows[np.flatnonzero(neg)[0]])
        raise InputError(f"event log row {r}: the ground contact's impulse pulls the bodies together (normal "
                         f"impulse {J[np.flatnonzero(neg)[0]]:.3g} N s); the impulse on body b must point along "
                         "the normal (from a to b)")
    off = np.abs(pt[:, 2] - ground_height) > PLANE_TOL
    if off.any():
        k = int(np.flatnonzero(off)[0])
        raise InputError(f"event log row {int(rows[k])}: a contact with the ground at height z = {pt[k, 2]:.4g} m, "
                         f"{abs(pt[k, 2] - ground_height):.3g} m off the ground plane z = {ground_height} m; fix the "
                         "contact point (column point) or the [ground] height")
    return rows, np.maximum(J, 0.0)


def render(prep: GroundPrepared, ctx) -> dict:
    """Render the ``ground`` source: {object name: (L, n_samples) pressure [Pa]} of the floor under each object's
    impacts (module docstring).

    Parameters
    ----------
    prep : GroundPrepared
    ctx : RenderContext

    Returns
    -------
    dict of str to ndarray
    """
    scene = ctx.scene
    bodies = scene.bodies
    out = {b.name: np.zeros((len(ctx.listeners), ctx.n_samples)) for b in bodies
           if ctx.only is None or b.name in ctx.only}
    if prep.plate is not None:
        return _render_plate(prep, ctx, out)
    if prep.half_space is None:
        return out
    opts = scene.options["ground"]
    z0 = float(scene.ground.height)
    heights = ctx.listeners[:, 2] - z0
    if np.any(~(heights > 0)):
        i = int(np.flatnonzero(~(heights > 0))[0])
        name = scene.listeners[i].name if i < len(scene.listeners) else str(i)
        raise InputError(f"{scene.path}: listener {name!r} (channel {i}) at z = {float(ctx.listeners[i, 2]):g} m is "
                         f"on or below the ground plane z = {z0:g} m, where the floor's sound (source 'ground') has "
                         "no field; raise its [[listener]] position above the floor, or leave 'ground' out of "
                         "[scene] sources")
    if ctx.listeners_move:
        return _render_moving_listeners(prep, ctx, out)
    ev = ctx.events
    rows, J, tau, body_of = _impacts(ev, z0, ctx)
    if len(rows) == 0:                          # no floor impacts, or only sliding contacts: silence
        return out
    t_m = ev.t[rows] + tau / 2
    eps = tau / 4
    xy = ev.point[rows, :2]
    for l, h in enumerate(heights):
        rho = np.hypot(xy[:, 0] - ctx.listeners[l, 0], xy[:, 1] - ctx.listeners[l, 1])
        bank = response_bank(prep.half_space, float(h), c_a=scene.air.c, rho_a=scene.air.rho,
                             sample_rate=ctx.sample_rate, max_offset=_max_offset(ctx, l, z0, float(rho.max())),
                             cache=opts.cache)
        with ctx.progress.stage(f"ground response bank (listener height {h:.3g} m)") as update:
            bank.ensure(rho, progress=update)
        with ctx.progress.stage("ground sound synthesis"):
            for i in np.unique(body_of):
                if bodies[int(i)].name not in out:
                    continue
                sel = body_of == i
                out[bodies[int(i)].name][l] = bank.render(t_m[sel], J[sel], eps[sel], rho[sel], ctx.n_samples,
                                                          kernel=opts.kernel)
    return out


def _impacts(ev, z0, ctx):
    """The floor impacts that sound: event rows, normal impulse J [N s], Hertz contact time [s] and the body of
    each (sliding contacts without a normal impulse are dropped)."""
    rows, J = ground_events(ev, z0)
    if len(rows) == 0:
        return rows, J, np.zeros(0), np.zeros(0, np.int64)
    stage = ctx.contacts("mesh")
    body_of = np.where(ev.a[rows] == GROUND, ev.b[rows], ev.a[rows])
    tau_of_row = np.full(len(ev), np.nan)          # a ground event involves one body: its contact time
    for i in np.unique(body_of):
        bc = stage.of(int(i))
        if bc is not None:
            tau_of_row[bc.rows] = bc.tau
    tau = tau_of_row[rows]
    keep = np.isfinite(tau) & (tau > 0) & (J > 0)
    return rows[keep], J[keep], tau[keep], body_of[keep]


#: a moving listener's height is rounded to this [m] so that events heard from nearby heights share one response
#: bank (the bank's level varies by ~1 % per cm at 1 m)
HEIGHT_STEP = 0.01


def _render_moving_listeners(prep, ctx, out) -> dict:
    """Ground sound for moving listeners: each impact (a few ms of sound) is heard from where the listener is when
    it arrives; events are grouped by that height (HEIGHT_STEP) and each group uses the response bank of its
    height."""
    scene = ctx.scene
    bodies = scene.bodies
    opts = scene.options["ground"]
    z0 = float(scene.ground.height)
    ev = ctx.events
    rows, J, tau, body_of = _impacts(ev, z0, ctx)
    if len(rows) == 0:
        return out
    t_m = ev.t[rows] + tau / 2
    eps = tau / 4
    heard = ctx.listeners_heard(ev.t[rows], ev.point[rows])                          # (E, L, 3)
    for l in range(heard.shape[1]):
        h_ev = np.maximum(np.round((heard[:, l, 2] - z0) / HEIGHT_STEP) * HEIGHT_STEP, HEIGHT_STEP)
        rho = np.hypot(ev.point[rows, 0] - heard[:, l, 0], ev.point[rows, 1] - heard[:, l, 1])
        for h in np.unique(h_ev):
            at = h_ev == h
            bank = response_bank(prep.half_space, float(h), c_a=scene.air.c, rho_a=scene.air.rho,
                                 sample_rate=ctx.sample_rate, max_offset=float(rho[at].max()), cache=opts.cache)
            with ctx.progress.stage(f"ground response bank (listener height {h:.3g} m)") as update:
                bank.ensure(rho[at], progress=update)
            for i in np.unique(body_of[at]):
                if bodies[int(i)].name not in out:
                    continue
                sel = at & (body_of == i)
                out[bodies[int(i)].name][l] += bank.render(t_m[sel], J[sel], eps[sel], rho[sel], ctx.n_samples,
                                                           kernel=opts.kernel)
    return out


def _render_plate(prep: GroundPrepared, ctx, out) -> dict:
    """The floor as a ringing plate (plate.py): each impact on it strikes its modes (Hertz half-sine of the
    event's contact time), heard through each mode's Rayleigh transfer to each listener."""
    from ..modal import MODE_CUTOFF_DB
    from .plate import plate_pressure
    scene, plate = ctx.scene, prep.plate
    if ctx.listeners_move:
        raise InputError(f"{scene.path}: ground.model = \"plate\" renders fixed listeners only (its Rayleigh "
                         "transfers are per listener position); give the listeners a position, or use the "
                         "half-space floor")
    z0 = float(scene.ground.height)
    ev = ctx.events
    rows, J, tau, body_of = _impacts(ev, z0, ctx)
    on = plate.inside(ev.point[rows, :2]) if len(rows) else np.zeros(0, bool)
    if (~on).any():
        log.warning(f"{scene.path}: {int((~on).sum())} floor impact(s) lie off the plate floor "
                    f"(ground.plate: {plate.length:g} x {plate.width:g} m at {list(plate.center)}) and make no "
                    "floor sound")
    rows, J, tau, body_of = rows[on], J[on], tau[on], body_of[on]
    if len(rows) == 0:
        return out
    from ..modal import F_MAX_HZ, NYQUIST_FRACTION
    f_max = min(F_MAX_HZ, NYQUIST_FRACTION * ctx.sample_rate / 2)
    with ctx.progress.stage(f"plate floor ({len(rows)} impacts, {len(ctx.listeners)} listener(s))"):
        for i in np.unique(body_of):
            name = scene.bodies[int(i)].name
            if name not in out:
                continue
            sel = body_of == i
            out[name] += plate_pressure(plate, ctx.listeners, ev.t[rows][sel], tau[sel], J[sel],
                                        ev.point[rows][sel, :2], ctx.sample_rate, ctx.n_samples, z0=z0,
                                        c=scene.air.c, rho_a=scene.air.rho, f_max=f_max,
                                        cutoff_db=MODE_CUTOFF_DB, transfers=prep.transfers)
    return out


def describe(prep: GroundPrepared) -> tuple[dict, dict]:
    """Sidecar entry: the ground's material, its half-space speeds and how well the model fits it.

    Returns
    -------
    summary : dict
        {"ground": {...}} (or {"ground": "none"} without a ground).
    objects : dict
        Empty (every object's impacts on the floor are rendered).
    """
    if prep.plate is not None:
        p = prep.plate
        return {"ground": {"model": "plate", "material": prep.material, "length_m": p.length, "width_m": p.width,
                           "thickness_m": p.thickness, "center_m": list(p.center),
                           "boundary": "simply supported", "radiation": "baffled (Rayleigh integral)"}}, {}
    if prep.half_space is None:
        if prep.material == "preview":
            return {"ground": "none (off in a preview: quality = \"preview\")"}, {}
        return {"ground": "none (the scene has no ground)"}, {}
    g = prep.half_space
    return {"ground": {"material": prep.material, "E_pa": g.E, "nu": g.nu, "rho_kg_m3": g.rho,
                       "c_s_m_s": round(g.c_s, 3), "c_R_m_s": round(g.c_R, 3), "half_space_fit": prep.fit}}, {}


def _max_offset(ctx, l: int, z0: float, here: float) -> float:
    """The largest horizontal offset of listener l's bank: of the whole scene's floor impacts when ctx is a block
    of a streaming render, so that every block uses the bank (and block length) of the whole render."""
    if ctx.whole is None:
        return here
    ev = ctx.whole.events
    rows, _ = ground_events(ev, z0)
    if len(rows) == 0:
        return here
    return max(here, float(np.hypot(ev.point[rows, 0] - ctx.listeners[l, 0], ev.point[rows, 1] - ctx.listeners[l, 1]).max()))


def span(prep: GroundPrepared, ctx) -> tuple[float, float]:
    """(lead, tail) [s] of one floor impact's sound (streaming.py): the response bank's block (bank_n_fft: the
    latest arrival from the radiating plane, PRE_SAMPLES before the first) for the scene's largest offset and
    listener height, after a contact of at most 50 ms."""
    if prep.plate is not None:             # a ring: until the slowest mode has decayed (as modal.span)
        from ..modal import CONTACT_MAX_S, F_MAX_HZ, MODE_CUTOFF_DB, NYQUIST_FRACTION
        ring = prep.plate.ring_time(min(F_MAX_HZ, NYQUIST_FRACTION * ctx.sample_rate / 2), MODE_CUTOFF_DB)
        if ring is None:
            return None
        far = max(float(np.linalg.norm(np.asarray(ctx.listeners)[:, :2] - np.asarray(prep.plate.center), axis=1)
                        .max()) + prep.plate.length + prep.plate.width, 1.0)
        return 0.0, ring + CONTACT_MAX_S + far / ctx.scene.air.c
    if prep.half_space is None:
        return 0.0, 0.0
    from .bank import PRE_SAMPLES, bank_n_fft
    scene = ctx.scene
    z0 = float(scene.ground.height)
    pts = [np.atleast_2d(ctx.listeners)] + [np.asarray(l.trajectory.position).reshape(-1, 3)
                                            for l in scene.listeners if getattr(l, "trajectory", None) is not None]
    P = np.vstack(pts)
    ev = ctx.events
    rows, _ = ground_events(ev, z0)
    xy = ev.point[rows, :2] if len(rows) else P[:1, :2]
    off = float(np.linalg.norm(np.r_[np.ptp(np.vstack([xy, P[:, :2]]), axis=0)]))
    h = max(float(P[:, 2].max()) - z0, 1e-3)
    n_fft = bank_n_fft(prep.half_space, h, float(np.ceil(off + 1.0)), float(scene.air.c), int(ctx.sample_rate))
    return (2 * PRE_SAMPLES) / ctx.sample_rate + 0.01, n_fft / ctx.sample_rate + 0.05


SOURCE = register(SourceKind(
    name="ground", options=GroundOptions, prepare=prepare, render=render, describe=describe, span=span,
    summary="the floor's own sound under each impact (elastic half-space, Lamb's problem, Rayleigh integral)"))
