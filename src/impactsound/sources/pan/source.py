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

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...constants import V_MIN
from ...contact.stage import BodyContacts, ContactStage, contact_stage
from ...dynamics.events import EventLog
from ...errors import InputError
from ...io.progress import QUIET
from ...rotation import to_body
from ..base import check_objects_known, render_arguments
from ..registry import SourceKind, register
from .synth import PANTable, synthesize_pan
from .timescale import acceleration_amplitudes


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

    Raises
    ------
    InputError
        If a field names an unknown body or was computed for another speed of sound.
    """

    kind = "acceleration_noise"

    def __init__(self, bodies, fields: dict, ground, air, *, v_min: float = V_MIN, oversample: int = 4,
                 n_threads: int | None = None):
        self.bodies = list(bodies)
        check_objects_known("PANSource", "PAN fields", fields, self.bodies)
        self.fields = dict(fields)
        for name, fld in self.fields.items():
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

    def render(self, events: EventLog, listeners, sample_rate, duration, *, contacts: ContactStage | None = None
               ) -> dict[str, np.ndarray]:
        """Acceleration noise at the listeners of every body with a PAN field, as
        :meth:`ModalSource.render <impactsound.sources.modal.ModalSource.render>` (same arguments and result).

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
        with_field = [i for i, b in enumerate(self.bodies) if b.name in self.fields]
        for i in with_field:
            touch = events.involving(i)
            for col in ("t", "point", "normal", "impulse", "vn"):
                v = getattr(events, col)
                bad = touch & ~np.isfinite(v).reshape(len(events), -1).all(axis=1)
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    raise InputError(f"event log row {r}: column {col!r} has a NaN or infinite value")
        if contacts is None:
            contacts = contact_stage(events.select(events.vn >= self.v_min), self.bodies, self.ground,
                                     only=with_field)
        ev = contacts.events
        for i in with_field:
            body = self.bodies[i]
            fld = self.fields[body.name]
            out[body.name] = np.zeros((len(L_w), n_samples))
            bc = contacts.of(i)
            if bc is None:
                continue
            bc = bc.select(ev.vn[bc.rows] >= self.v_min)             # resting contacts (paper sec. 4.3)
            if len(bc.rows) == 0:
                continue
            _, tau, amp, _, _ = self._amplitudes(ev, bc)
            amp = amp * (self.air.rho / fld.rho)                     # p is linear in rho
            out[body.name] = synthesize_pan(self.table(body.name, fs), ev.t[bc.rows], tau, amp, bc.listeners(L_w),
                                            n_samples, n_threads=self.n_threads)
        return out


# ---- the source kind --------------------------------------------------------------------------------------------
class PANOptions(BaseModel):
    """Options of the ``acceleration_noise`` source (scene table ``[source.acceleration_noise]``).

    Parameters
    ----------
    budget : float, optional
        Largest PAN precompute in FDTD cell updates (default 2e10, ~4 s per 1e9 on 2 cores). Objects whose
        estimate is over it get no acceleration noise, cached field or not (:func:`pan_fields`; said in the
        sidecar).
    """

    model_config = ConfigDict(extra="forbid")
    budget: float = Field(default=2.0e10, gt=0, description="largest PAN precompute in FDTD cell updates (~4 s "
                          "per 1e9 on 2 cores); objects over it get no acceleration noise, said in the sidecar "
                          "with the reason (whatever the cache holds)")


@dataclass
class PANPrepared:
    """What :func:`prepare` made.

    Attributes
    ----------
    fields : dict of str to PANField
        {body name: its field}.
    missing : dict of str to str
        {body name: why it has none}.
    """

    fields: dict
    missing: dict


def pan_fields(scene, progress=QUIET) -> tuple[dict, dict]:
    """PAN field of every body within the budget, from the cache or precomputed.

    Which bodies get one follows from the scene alone (the estimate against the budget), never from what the
    cache holds.

    Parameters
    ----------
    scene : Scene
        Bodies (mesh, material), air and the ``acceleration_noise`` options.
    progress : Progress, optional
        Reports each precompute.

    Returns
    -------
    tuple of dict
        ({body name: PANField}, {body name: reason} for the bodies without one).
    """
    from .precompute import cached_pan_field, plan_pan
    budget = scene.options["acceleration_noise"].budget
    fields, missing = {}, {}
    for body in scene.bodies:
        job = plan_pan(body.mesh, body.material, c=scene.air.c, rho=scene.air.rho)
        est = job.estimate()
        if est["cell_updates"] > budget:
            missing[body.name] = (f"its PAN precompute needs {est['cell_updates']:.2g} FDTD cell updates (grid "
                                  f"{est['grid'][0]}^3, ~{est['cell_updates'] / 2.5e8 / 60:.0f} min on 2 cores), "
                                  f"over [source.acceleration_noise] budget = {budget:.2g}; raise the budget to "
                                  "include it")
            progress.message(f"  {body.name}: NO acceleration noise: {missing[body.name]}")
            continue
        cached = cached_pan_field(job, load_only=True)
        if cached is None:
            with progress.stage(f"PAN precompute of {body.name} (grid {est['grid'][0]}^3, "
                                f"{est['steps']} steps x 6 fields)") as update:
                cached = cached_pan_field(job, progress=update)
        fields[body.name] = cached
    return fields, missing


def prepare(scene, progress=QUIET) -> PANPrepared:
    """Prepare the ``acceleration_noise`` source: PAN fields of the bodies within the budget (:func:`pan_fields`).

    Parameters
    ----------
    scene : Scene
    progress : Progress, optional

    Returns
    -------
    PANPrepared
    """
    return PANPrepared(*pan_fields(scene, progress))


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
    src = PANSource(ctx.scene.bodies, prep.fields, ctx.scene.ground, ctx.scene.air)
    with ctx.progress.stage("acceleration noise synthesis"):
        return src.render(ctx.events, ctx.listeners, ctx.sample_rate, ctx.duration, contacts=ctx.contacts("mesh"))


def describe(prep: PANPrepared) -> tuple[dict, dict]:
    """Sidecar entries: which objects have acceleration noise, and why the others have none.

    Parameters
    ----------
    prep : PANPrepared

    Returns
    -------
    summary : dict
        {"acceleration_noise": sorted names of the bodies with a field}.
    objects : dict
        Per body name: {"acceleration_noise": "pan"} or {"acceleration_noise": "none", "reason": why}.
    """
    objects = {}
    for name in prep.fields:
        objects[name] = {"acceleration_noise": "pan"}
    for name, why in prep.missing.items():
        objects[name] = {"acceleration_noise": "none", "reason": why}
    return {"acceleration_noise": sorted(prep.fields)}, objects


SOURCE = register(SourceKind(
    name="acceleration_noise", options=PANOptions, prepare=prepare, render=render, describe=describe,
    summary="the click of each impact's rigid-body accelerations, from precomputed PAN fields"))
