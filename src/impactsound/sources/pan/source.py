"""Acceleration-noise source: rigid-body acceleration noise of every impact from precomputed PAN fields.

Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 4.3: each
impulse's body accelerations (eqs. 11-12, sources/pan/timescale.py) drive the body's six precomputed fields
(sources/pan/field.py), synthesised per impulse (sources/pan/synth.py). Contact quantities (pose, body-frame
impulse and point, Hertz contact time) come from the shared contact stage (contact/stage.py).

The source kind ``acceleration_noise`` (registered at the end of this module) prepares each body's PAN field
within ``[source.acceleration_noise] budget`` (FDTD cell updates; from the cache or precomputed) and renders
with :class:`PANSource`.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...constants import BANK_EPS, V_MIN
from ...contact.stage import BodyContacts, ContactStage, contact_stage
from ...dynamics.events import EventLog
from ...errors import InputError
from ...io.progress import QUIET
from ...rotation import to_body
from ..base import check_objects_known, render_arguments
from ..modal_kernel import default_threads
from ..registry import SourceKind, register
from .field import N_RADII, RADIAL_TERMS, angle_weights
from .proxy_field import ProxyFields
from .synth import PANTable, synthesize_pan
from .timescale import acceleration_amplitudes

log = logging.getLogger("impactsound")


#: PAN fields are fitted on shells from 2 R_b out (sources/pan/precompute.py, step 2); closer, the radial series
#: is extrapolated beyond the shells it was fitted on (its error there is not measured by this package's tests)
NEAR_FIELD = 2.0


class AccelerationNoiseNearFieldWarning(UserWarning):
    """A listener comes within an object's PAN bounding sphere (its acceleration noise is left out there) or
    between R_b and 2 R_b (extrapolated)."""


def _warn_near(name, l, R_b, t, R, inside, near) -> None:
    import warnings
    if inside.any():
        e = int(np.flatnonzero(inside)[0])
        warnings.warn(f"acceleration noise of {name!r}: listener channel {l} is within its bounding sphere "
                      f"(R_b = {R_b:.3g} m) for {int(inside.sum())} of its events (first at t = {t[e]:.4g} s, "
                      f"{R[e]:.3g} m from its centre of mass): PAN fields do not hold there, so those events' "
                      "acceleration noise is left out at that listener (its modal sound and the other listeners "
                      "are rendered). Move the listener at least 2 R_b away for a full render.",
                      AccelerationNoiseNearFieldWarning, stacklevel=4)
    if near.any():
        e = int(np.flatnonzero(near)[0])
        warnings.warn(f"acceleration noise of {name!r}: listener channel {l} is between R_b and 2 R_b "
                      f"({R_b:.3g}-{2 * R_b:.3g} m) of its centre of mass for {int(near.sum())} events (first at "
                      f"t = {t[e]:.4g} s, {R[e]:.3g} m): the fields are extrapolated inside their fit "
                      "shells there, so its level is approximate", AccelerationNoiseNearFieldWarning, stacklevel=4)


def heard_table(fld, listeners_field, sample_rate: float, *, oversample: int = 4) -> PANTable:
    """The table of a field at the directions some listener positions read (PANTable.from_field ``needed``): what
    one render of a proxy needs.

    Parameters
    ----------
    fld : PANField
    listeners_field : array_like, shape (..., 3)
        Listener positions in the field's axes about the centre of mass [m].
    sample_rate : float
        Output rate [Hz].
    oversample : int, optional

    Returns
    -------
    PANTable
    """
    _, it, ip, _ = angle_weights(listeners_field, fld.n_theta, fld.n_phi)
    needed = np.zeros((fld.n_theta + 2, fld.n_phi), bool)
    needed[it.ravel(), ip.ravel()] = True
    return PANTable.from_field(fld, sample_rate, oversample=oversample, needed=needed)


class PANSource:
    """Rigid-body acceleration noise (PAN) of every body that has a :class:`PANField`.

    Contact durations use the same Hertz estimate as the modal source (inertia-aware effective masses of both
    bodies, local curvature radii, combined modulus; the ground is an infinitely heavy plane). The support of a
    body in resting contact answers the impulses that push it into it (:meth:`amplitudes`).

    Parameters
    ----------
    bodies : list of scene Body
        The scene's bodies (event ids index this list).
    fields : dict of str to PANField
        {body name: body-frame fields, centre of mass at the origin}.
    ground : scene Ground or None
        The ground (None: rigid plane).
    air : scene Air
        c [m/s] (must match each field's to 0.1 %) and rho [kg/m^3] (the fields are rescaled to it).
    v_min : float, optional
        Impulses with a relative normal speed below it [m/s] are dropped (resting contact, paper sec. 4.3).
    oversample : int, optional
        Table oversampling U.
    n_threads : int, optional
        Synthesis threads (the result does not depend on it).
    frames : dict of str to ndarray (3, 3), optional
        {body name: Z} for fields stored in other axes than the body's (a proxy's, sources/pan/proxy_field.py):
        the columns of Z are those axes in the body frame; each impulse's listener and accelerations are rotated
        into them (x' = Z^T x, a' = Z^T a, alpha' = Z^T alpha; Chadwick, Zheng & James 2012, "Faster Acceleration
        Noise ...", sec. 3.3). Their tables are built per render for the directions its impulses see, and not kept.

    Raises
    ------
    InputError
        If a field names an unknown body or was computed for another speed of sound.
    """

    kind = "acceleration_noise"

    def __init__(self, bodies, fields, ground, air, *, v_min: float = V_MIN, oversample: int = 4,
                 n_threads: int | None = None, frames: dict | None = None):
        self.bodies = list(bodies)
        check_objects_known("PANSource", "PAN fields", fields, self.bodies)
        self.fields = fields if isinstance(fields, ProxyFields) else dict(fields)
        self.frames = {k: np.asarray(v, np.float64).reshape(3, 3) for k, v in (frames or {}).items()}
        check_objects_known("PANSource", "field frames", self.frames, self.bodies)
        for name in self.fields:
            fld = self.fields.header(name) if isinstance(self.fields, ProxyFields) else self.fields[name]
            if abs(fld.c - air.c) > 1e-3 * fld.c:
                raise InputError(f"PANSource: the PAN field of {name!r} was computed for c = {fld.c} m/s but the "
                                 f"scene's air has c = {air.c} m/s; recompute the field with the scene's air")
        self.ground = ground
        self.air = air
        self.v_min = float(v_min)
        self.oversample = int(oversample)
        self.n_threads = n_threads
        self._tables: dict[tuple[str, float], PANTable] = {}

    def table(self, name: str, sample_rate: float) -> PANTable:
        """The band-limited table of a body's field at an output rate (cached).

        Parameters
        ----------
        name : str
            Body name.
        sample_rate : float
            Output rate [Hz].

        Returns
        -------
        PANTable
        """
        key = (name, float(sample_rate))
        if key not in self._tables:
            self._tables[key] = PANTable.from_field(self.fields[name], sample_rate, oversample=self.oversample)
        return self._tables[key]

    def contacts(self, events: EventLog) -> ContactStage:
        """The contact stage of some events, measured on the bodies' scene meshes.

        Parameters
        ----------
        events : EventLog

        Returns
        -------
        ContactStage
        """
        return contact_stage(events, self.bodies, self.ground)

    def amplitudes(self, events: EventLog, i: int, contacts: ContactStage | None = None):
        """Peak body accelerations of the events touching body i.

        Where the event gives body i a support (support_a_* / support_b_* for the side body i is on; NaN: free),
        the support's reaction to an impulse that pushes the body into it is included (timescale.py,
        "Supported bodies"), for all events at once.

        Parameters
        ----------
        events : EventLog
            Contact events (vn > 0 for those touching body i).
        i : int
            Body index.
        contacts : ContactStage, optional
            The contact stage of ``events`` (computed here when not given).

        Returns
        -------
        tuple
            (rows (n,) indexing ``events``, tau (n,) [s], amp (n, 6) (a [m/s^2], alpha [rad/s^2], body frame),
            R (n, 3, 3), pos (n, 3) [m]).
        """
        bc = (contacts if contacts is not None else contact_stage(events, self.bodies, self.ground, only=[i])).of(i)
        return self._amplitudes(events, bc)

    def _amplitudes(self, events: EventLog, bc: BodyContacts):
        body = self.bodies[bc.body]
        rows, R, pos = bc.rows, bc.rotation, bc.position
        side_b = bc.on_b[:, None]
        sp = np.where(side_b, events.support_b_point[rows], events.support_a_point[rows])
        sn = np.where(side_b, events.support_b_normal[rows], events.support_a_normal[rows])
        x_r = to_body(R, pos, sp)                                    # NaN rows (free bodies) stay NaN
        n_r = to_body(R, np.zeros_like(pos), sn)
        with np.errstate(invalid="ignore"):
            n_r = n_r / np.linalg.norm(n_r, axis=1, keepdims=True)
        a_amp, al_amp = acceleration_amplitudes(bc.impulse, bc.point, body.mass, body.inertia, bc.tau,
                                                support_point=x_r, support_normal=n_r)
        return rows, bc.tau, np.concatenate([a_amp, al_amp], axis=1), R, pos

    def render(self, events: EventLog, listeners, sample_rate, duration, *, contacts: ContactStage | None = None,
               heard=None, only=None) -> dict[str, np.ndarray]:
        """Acceleration noise at the listeners of every body with a PAN field, as
        :meth:`ModalSource.render <impactsound.sources.modal.ModalSource.render>` (same arguments and result).
        ``heard(times, positions) -> (E, L, 3)``: where moving listeners hear events at those times and world
        positions (RenderContext.listeners_heard); None: fixed at ``listeners``.

        Parameters
        ----------
        events : EventLog
            Contact events; those slower than ``v_min`` are skipped.
        listeners : array_like, shape (L, 3)
            Listener positions, world frame [m].
        sample_rate : float
            Output rate [Hz].
        duration : float
            Output length [s].
        contacts : ContactStage, optional
            Contact stage of the events, measured on the scene meshes (computed here when not given).

        Returns
        -------
        dict of str to ndarray
            {body name: pressure (L, n_samples) [Pa]} for every body with a field (zeros if no event touches it).

        Raises
        ------
        InputError
            On non-finite event values of a body with a field, or as :func:`synthesize_pan`.
        """
        L_w, fs, n_samples = render_arguments("PANSource.render", listeners, sample_rate, duration)
        out: dict[str, np.ndarray] = {}
        with_field = [i for i, b in enumerate(self.bodies) if b.name in self.fields
                      and (only is None or b.name in only)]
        for i in with_field:
            touch = events.involving(i)
            for col in ("t", "point", "normal", "impulse", "vn"):
                v = getattr(events, col)
                bad = touch & ~np.isfinite(v).reshape(len(events), -1 if len(events) else 1).all(axis=1)
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    raise InputError(f"event log row {r}: column {col!r} has a NaN or infinite value")
        if contacts is None:
            contacts = contact_stage(events.select(events.vn >= self.v_min), self.bodies, self.ground,
                                     only=with_field)
        ev = contacts.events

        def one(i, n_threads):
            body = self.bodies[i]
            bc = contacts.of(i)
            if bc is None:
                return np.zeros((len(L_w), n_samples))
            bc = bc.select(ev.vn[bc.rows] >= self.v_min)             # resting contacts (paper sec. 4.3)
            if len(bc.rows) == 0:
                return np.zeros((len(L_w), n_samples))
            fld = self.fields[body.name]
            _, tau, amp, _, _ = self._amplitudes(ev, bc)
            amp = amp * (self.air.rho / fld.rho)                     # p is linear in rho
            # a moving listener hears each (short) impulse where it is when that impulse arrives
            xl = bc.listeners(L_w if heard is None else heard(ev.t[bc.rows], bc.position))
            Z = self.frames.get(body.name)
            if Z is None:
                table = self.table(body.name, fs)
            else:                                                    # into the field's axes (row vectors: v Z)
                amp = np.concatenate([amp[:, :3] @ Z, amp[:, 3:] @ Z], axis=1)
                xl = xl @ Z
                table = heard_table(fld, xl, fs, oversample=self.oversample)   # the directions it hears only
            t_ev = ev.t[bc.rows]
            R = np.linalg.norm(xl, axis=-1)                                       # (E, L)
            inside = R <= fld.R_b
            near = ~inside & (R < NEAR_FIELD * fld.R_b)
            for l in np.flatnonzero(inside.any(axis=0) | near.any(axis=0)):
                _warn_near(body.name, l, fld.R_b, t_ev, R[:, l], inside[:, l], near[:, l])
            if not inside.any():
                return synthesize_pan(table, t_ev, tau, amp, xl, n_samples, n_threads=n_threads)
            # the fields do not hold inside the bounding sphere: those (event, listener) pairs are left out, the
            # rest of this object's acceleration noise (other events, other listeners) is rendered
            y = np.zeros((xl.shape[1], n_samples))
            for l in range(xl.shape[1]):
                ok = ~inside[:, l]
                if ok.any():
                    y[l] = synthesize_pan(table, t_ev[ok], tau[ok], amp[ok], xl[ok, l:l + 1], n_samples,
                                          n_threads=n_threads)[0]
            return y

        own = [i for i in with_field if self.bodies[i].name not in self.frames]
        proxies = [i for i in with_field if self.bodies[i].name in self.frames]
        for i in own:                                                # their tables are cached: one at a time
            out[self.bodies[i].name] = one(i, self.n_threads)
        # proxies are many small independent jobs (debris): one per thread, each synthesis single-threaded; the
        # compiled kernels release the GIL, and every body's result is its own, so the output does not depend on
        # the thread count
        nt = min(self.n_threads or default_threads(), len(proxies))
        if nt <= 1:
            for i in proxies:
                out[self.bodies[i].name] = one(i, 1)
        else:
            with ThreadPoolExecutor(max_workers=nt) as ex:
                for i, y in zip(proxies, ex.map(lambda k: one(k, 1), proxies)):
                    out[self.bodies[i].name] = y
        return {self.bodies[i].name: out[self.bodies[i].name] for i in with_field}


# ---- the source kind --------------------------------------------------------------------------------------------
#: acceleration-noise models of an object ([source.acceleration_noise] model, [scene] acceleration_noise, or the
#: object's own ``acceleration_noise`` key)
AN_MODELS = ("auto", "pan", "proxy", "off")


class PANOptions(BaseModel):
    """Options of the ``acceleration_noise`` source (scene table ``[source.acceleration_noise]``).

    Parameters
    ----------
    model : {"auto", "pan", "proxy", "off"}, optional
        Which acceleration noise each object gets (an object's own ``acceleration_noise`` key overrides it):
        "pan" its own PAN field (precomputed by FDTD however long that takes), "proxy" the proxy soundbank's
        (Chadwick, Zheng & James 2012, "Faster Acceleration Noise ..."; sources/pan/proxy_field.py), "auto" (the
        default) its own field when the precompute is within ``budget``, else the proxy's, "off" none.
    budget : float, optional
        Largest PAN precompute run under "auto", in FDTD cell updates (default 2e10, ~4 s per 1e9 on 2 cores).
        Which objects are within it follows from the scene alone, never from what the cache holds.
    bank : {"standard", "tiny", "paper"}, optional
        Soundbank preset of the proxies (sources/pan/soundbank.py). Missing entries are solved when an object
        needs them and kept in the bank file (standard: 30-60 s each on 2 cores).
    bank_eps : float, optional
        Wavelet tolerance of the bank in (0, 1).
    bank_path : str, optional
        The bank file (default: the cache folder's ``soundbank_<preset>_eps<eps>_v<version>.h5``); relative to
        the scene file's folder.
    directions : str, optional
        Direction grid of own PAN fields, "THETAxPHI".
    h : float, optional
        Pulse time scale of own PAN fields [s].
    radial_terms : int, optional
        Radial terms N of own PAN fields (1-5, default 3, chosen by measurement: field.RADIAL_TERMS).
    """

    model_config = ConfigDict(extra="forbid")
    model: Literal["auto", "pan", "proxy", "off"] = Field(
        default="auto", description="auto: own PAN field within the budget, else the proxy soundbank; pan: own "
        "field always; proxy: soundbank always; off: none (an object's acceleration_noise key overrides it)")
    budget: float = Field(default=2.0e10, gt=0, description="largest PAN precompute in FDTD cell updates (~4 s "
                          "per 1e9 on 2 cores) run under model = auto; objects over it get the proxy")
    bank: Literal["standard", "tiny", "paper"] = Field(
        default="standard", description="soundbank preset for proxies: standard is shipped with the package (all "
        "66 entries at eps 0.01; other eps or air are solved on demand, 30-60 s per entry on 2 cores); tiny: "
        "seconds per entry, low band: objects under ~2 cm")
    bank_eps: float = Field(default=BANK_EPS, gt=0, lt=1, description="wavelet tolerance of the soundbank (0.01 "
                            "keeps the rotation noise of long contacts within a few %; 0.04 loses 20 % or more)")
    bank_path: str | None = Field(default=None, description="soundbank file (default: in the cache folder), "
                                  "relative to the scene file")
    directions: str = Field(default="5x10", description="direction grid THETAxPHI of own PAN fields (Chadwick, "
                            "Zheng & James 2012, sec. 5: 5x10 for small objects, 40x80 for detail); a field "
                            "precomputed with `impactsound pan precompute --directions` is used when it matches")
    h: float | None = Field(default=None, gt=0, description="pulse time scale of own PAN fields [s] (default: "
                            "from the object's mass and material, sec. 4.3)")
    radial_terms: int = Field(default=RADIAL_TERMS, ge=1, le=N_RADII, strict=True,
                              description="radial terms N of own PAN fields' series sum_k q_k(t - R/c) / R^k "
                              "(the paper's N = 2 folds the near field into the far field; 3, the default, was "
                              "the most accurate measured; the proxy soundbank keeps 2)")

    @field_validator("directions")
    @classmethod
    def _grid(cls, v):
        parse_directions(v)
        return v


@dataclass
class PANPrepared:
    """What :func:`prepare` made.

    Attributes
    ----------
    fields : ProxyFields
        {body name: its field} (own fields, and proxy fields built on access).
    missing : dict of str to str
        {body name: why it has none}.
    frames : dict of str to ndarray (3, 3)
        {body name: the proxy's axes Z} for proxy fields.
    models : dict of str to dict
        Sidecar entry of each body with a field: {"acceleration_noise": "pan" | "proxy", ...}.
    """

    fields: ProxyFields
    missing: dict
    frames: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)


def parse_directions(text: str) -> tuple[int, int]:
    """'THETAxPHI' -> (n_theta, n_phi); ValueError (a message naming what is wanted) otherwise."""
    try:
        nt, nph = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        nt = nph = 0
    if nt < 2 or nph < 3:
        raise ValueError(f"directions = {text!r}: expected THETAxPHI with THETA >= 2, PHI >= 3, e.g. '5x10' or "
                         "'40x80'")
    return nt, nph


def _budget_reason(est: dict, budget: float) -> str:
    return (f"its own PAN precompute needs {est['cell_updates']:.2g} FDTD cell updates (grid {est['grid'][0]}^3, "
            f"~{est['cell_updates'] / 2.5e8 / 60:.0f} min on 2 cores), over [source.acceleration_noise] budget = "
            f"{budget:.2g}")


def _own_field(body, job, est, progress):
    from .precompute import cached_pan_field
    cached = cached_pan_field(job, load_only=True)
    if cached is None:
        with progress.stage(f"PAN precompute of {body.name} (grid {est['grid'][0]}^3, "
                            f"{est['steps']} steps x 6 fields)") as update:
            cached = cached_pan_field(job, progress=update)
    return cached


def open_bank(scene, opts):
    """The scene's soundbank (:class:`.soundbank.Soundbank`) for ``[source.acceleration_noise]`` bank options.

    The bank is solved at the scene's speed of sound and the default air density (fields are linear in rho and
    rescaled at render); the default file is in the cache folder, with the air's hash in its name when c is not
    the default.
    """
    from pathlib import Path

    from ...assets.store import cache_dir
    from ...constants import AIR_C, AIR_RHO
    from .soundbank import Soundbank, default_path, shipped_bank
    c = float(scene.air.c)
    if opts.bank_path:
        p = Path(opts.bank_path)
        src = Path(str(getattr(scene, "path", "") or ""))
        if not p.is_absolute() and src.is_file():
            p = src.parent / p
    elif abs(c - AIR_C) <= 1e-9 * AIR_C:
        shipped = shipped_bank(opts.bank, opts.bank_eps, c)
        if shipped is not None:
            return shipped                  # the package's own bank: a render never solves a standard entry
        p = default_path(opts.bank, opts.bank_eps)
    else:
        p = cache_dir() / f"soundbank_{opts.bank}_eps{opts.bank_eps:g}_c{c:g}.h5"
    return Soundbank(p, preset=opts.bank, c=c, rho=AIR_RHO, eps=opts.bank_eps)


def prepare(scene, progress=QUIET) -> PANPrepared:
    """Prepare the ``acceleration_noise`` source: each body's model (:class:`PANOptions` ``model``, or the body's
    own ``acceleration_noise``), its own PAN field (from the cache or precomputed) or its proxy's recipe
    (Chadwick, Zheng & James 2012, "Faster Acceleration Noise ...", sec. 3.3: inertia -> ellipsoid -> nearest
    entry -> beta; the entry solved now when the bank lacks it).

    A body without a meaningful proxy (zero volume, flat) gets none, with a warning naming it.

    Parameters
    ----------
    scene : Scene
    progress : Progress, optional

    Returns
    -------
    PANPrepared
    """
    from .precompute import plan_pan
    from .proxy import DegenerateProxyError, fit_proxy_from_inertia, nearest_entry
    from .proxy_field import ProxyRecipe, entry_coefficients
    opts = scene.options["acceleration_noise"]
    own, recipes, missing, frames, models = {}, {}, {}, {}, {}
    bank, coef = None, {}
    for body in scene.bodies:
        model = body.acceleration_noise or opts.model
        if getattr(body, "shell", None) is not None:
            # Chadwick, An & James 2009 render thin shells from their vibration only; the rigid-body click of a
            # thin wall needs an FDTD grid finer than the wall and is not modelled
            missing[body.name] = "thin shell: acceleration noise is not modelled for shells (the shell source " \
                                 "renders its vibration)"
            continue
        if model == "off":
            missing[body.name] = "acceleration noise is off for it (acceleration_noise = \"off\")"
            continue
        if getattr(body, "immovable", False):
            # acceleration noise is the sound of a body's rigid acceleration (Chadwick, Zheng & James 2012, sec.
            # 3); a static prop or a fixed body does not accelerate
            missing[body.name] = f"{body.mount.kind}: it never moves, so it has no rigid-body acceleration noise"
            continue
        why_proxy = "acceleration_noise = \"proxy\""
        if model == "auto" and getattr(scene, "quality", "default") == "preview":
            model, why_proxy = "proxy", "a preview (quality = \"preview\") uses the proxy soundbank"
        if model in ("auto", "pan"):
            nt, nph = parse_directions(opts.directions)
            job = plan_pan(body.mesh, body.material, c=scene.air.c, rho=scene.air.rho, n_theta=nt, n_phi=nph,
                           h=opts.h, n_terms=opts.radial_terms)
            est = job.estimate()
            if model == "pan" or est["cell_updates"] <= opts.budget:
                own[body.name] = _own_field(body, job, est, progress)
                from .precompute import pan_asset_path
                models[body.name] = {"acceleration_noise": "pan", "pan_field": str(pan_asset_path(job)),
                                     "directions": f"{job.n_theta}x{job.n_phi}", "h_s": float(job.h)}
                progress.message(f"  {body.name}: own PAN acceleration noise field (" + (
                    "acceleration_noise = \"pan\")" if model == "pan" else
                    f"its precompute, {est['cell_updates']:.2g} cell updates, is within the budget)"))
                continue
            why_proxy = _budget_reason(est, opts.budget)
        try:
            proxy = fit_proxy_from_inertia(body.mass / body.material.rho, body.inertia, name=body.name)
        except DegenerateProxyError as exc:
            missing[body.name] = f"no ellipsoidal proxy applies: {exc}"
            log.warning(f"object {body.name!r}: NO acceleration noise: {missing[body.name]}")
            continue
        if bank is None:
            bank = open_bank(scene, opts)
        idx, (bp, cp), beta = nearest_entry(proxy, min_axis=bank.preset.dx)
        note = ""
        if idx != nearest_entry(proxy)[0]:
            note = (f"its proxy (C/A = {proxy.ratios[1]:.3g}) is thinner than the {bank.preset.name} bank's grid "
                    f"resolves: the nearest resolved entry {idx} (C' = {cp:g} m) stands in; bank = \"standard\" has "
                    "the thinner entries")
            log.warning(f"object {body.name!r}: {note}")
        if idx not in coef:
            if bank.has(idx):
                entry = bank.entry(idx)
            else:
                est = bank.estimate([idx])
                with progress.stage(f"soundbank entry {idx} (ellipsoid 0.5 x {bp:.3g} x {cp:.3g} m, "
                                    f"{bank.preset.name} preset, ~{est.get('seconds', 0):.0f} s)") as update:
                    entry = bank.entry(idx, progress=update)
            coef[idx] = entry_coefficients(entry)
        wf = bank.entry(idx).fields[0]
        Z = proxy.rotation
        recipes[body.name] = ProxyRecipe(
            coefficients=coef[idx], beta=beta, h_ref=bank.preset.h, c=bank.c, rho=bank.rho, R_b_ref=0.5,
            radii_ref=wf.radii, mass=body.mass, inertia=Z.T @ body.inertia @ Z,
            inputs_hash=f"{bank.key}:e{idx}:beta{beta!r}")
        frames[body.name] = Z
        models[body.name] = {
            "acceleration_noise": "proxy", "reason": why_proxy, "bank": str(bank.path), "preset": bank.preset.name,
            "entry": int(idx), "entry_axes_m": [0.5, float(bp), float(cp)], "beta": float(beta),
            "proxy_axes_m": [float(a) for a in proxy.semi_axes],
            "band_hz": float(bank.preset.band(beta / 2.0, bank.c)["pulse_band_hz"])}
        if note:
            models[body.name]["note"] = note
        progress.message(f"  {body.name}: proxy acceleration noise (ellipsoid {proxy.semi_axes[0] * 1e3:.3g} x "
                         f"{proxy.semi_axes[1] * 1e3:.3g} x {proxy.semi_axes[2] * 1e3:.3g} mm -> bank entry {idx}, "
                         f"beta {beta:.3g}; {why_proxy})")
    return PANPrepared(ProxyFields(own, recipes), missing, frames, models)


def render(prep: PANPrepared, ctx) -> dict:
    """Render the ``acceleration_noise`` source.

    Parameters
    ----------
    prep : PANPrepared
        From :func:`prepare`.
    ctx : RenderContext
        Scene, events, listeners, sample rate, duration, shared contact stage and progress.

    Returns
    -------
    dict of str to ndarray
        {body name: pressure (L, n_samples) [Pa]}.
    """
    src = PANSource(ctx.scene.bodies, prep.fields, ctx.scene.ground, ctx.scene.air, frames=prep.frames)
    with ctx.progress.stage("acceleration noise synthesis"):
        return src.render(ctx.events, ctx.listeners, ctx.sample_rate, ctx.duration, contacts=ctx.contacts("mesh"),
                          heard=ctx.listeners_heard if ctx.listeners_move else None, only=ctx.only)


def describe(prep: PANPrepared) -> tuple[dict, dict]:
    """Sidecar entries: which model each object's acceleration noise came from, and why some have none.

    Parameters
    ----------
    prep : PANPrepared

    Returns
    -------
    summary : dict
        {"acceleration_noise": sorted names of the bodies with a field (own or proxy)}.
    objects : dict
        Per body name: {"acceleration_noise": "pan"}, {"acceleration_noise": "proxy", "reason", "bank", "entry",
        "beta", ...} or {"acceleration_noise": "none", "reason": why}.
    """
    objects = {name: dict(m) for name, m in prep.models.items()}
    for name, why in prep.missing.items():
        objects[name] = {"acceleration_noise": "none", "reason": why}
    return {"acceleration_noise": sorted(prep.models)}, objects


def span(prep: PANPrepared, ctx) -> tuple[float, float]:
    """(lead, tail) [s] of one event's acceleration noise (streaming.py): the fields' coefficient window
    [tau0, tau0 + N dt_q] around the pulse centre, widened by ten pulse time scales and a contact of at most 50 ms
    (the pulses of one contact follow each other over its duration, sources/pan/pulse.py)."""
    lead, tail = 0.0, 0.0
    for name in prep.fields:
        f = prep.fields[name]
        lead = max(lead, -f.tau0 + 10 * f.h)
        tail = max(tail, f.tau0 + f.q.shape[-1] * f.dt_q + 10 * f.h)
    return lead + 0.01, tail + 0.05


SOURCE = register(SourceKind(
    name="acceleration_noise", options=PANOptions, prepare=prepare, render=render, describe=describe, span=span,
    summary="the click of each impact's rigid-body accelerations, from precomputed PAN fields (own or the proxy "
            "soundbank's)"))
