"""Plate props: a static thin box (a table top) that rings as a simply supported plate where it is struck.

A table top is far too large for the FDTD radiation of an object's FEM modes, and its free modes radiate poorly by
the compact model. An object with ``vibration = "plate"`` (static, a box lying flat: scene/schema.py) is instead
the plate model of the floors that ring (sources/ground/plate.py): simply supported edges, every mode below
20 kHz damped by its material, struck by each impact on its top face with the event's Hertz half-sine (the other
body's contact time from the shared contact stage), radiating from its top face as a baffled plane. Its stem is
the object's own; the modal source leaves it out (its sidecar says so). Impacts on the box's sides, or from
below, are not on the plate's face and make no plate sound (a warning says how many). Listeners must be above
the top face and fixed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import InputError
from .registry import SourceKind, register

log = logging.getLogger("impactsound")
#: an event's contact point may sit this far from the top face [m] (contact points lie on the other body)
FACE_TOL = 0.01


class PlatePropOptions(BaseModel):
    """The ``plate`` source has no options (each plate prop's size and material are its object's)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class PlatePrepared:
    bodies: list                                  # indices of the plate props
    transfers: dict = field(default_factory=dict)   # {body index: {listener position: (transfer, delay)}}


def prepare(scene, progress=None) -> PlatePrepared:
    return PlatePrepared([i for i, b in enumerate(scene.bodies) if getattr(b, "plate", None) is not None])


def _impacts(ev, i: int, body, ctx):
    """Rows of the events that strike plate prop i on its top face: (rows, normal impulse [N s], contact time
    [s]); rows off the face are counted."""
    rows = np.flatnonzero((ev.a == i) | (ev.b == i))
    if len(rows) == 0:
        return rows, np.zeros(0), np.zeros(0), 0
    J = np.abs(np.einsum("ij,ij->i", ev.impulse[rows], ev.normal[rows]))
    other = np.where(ev.a[rows] == i, ev.b[rows], ev.a[rows])
    stage = ctx.contacts("model")
    tau_of_row = np.full(len(ev), np.nan)
    for k in np.unique(other):
        bc = stage.of(int(k)) if k >= 0 else None
        if bc is not None:
            tau_of_row[bc.rows] = bc.tau
    tau = tau_of_row[rows]
    on = (body.plate.inside(ev.point[rows, :2]) & (np.abs(ev.point[rows, 2] - body.plate_top) <= FACE_TOL))
    keep = on & np.isfinite(tau) & (tau > 0) & (J > 0)
    return rows[keep], J[keep], tau[keep], int((~on).sum())


def render(prep: PlatePrepared, ctx) -> dict:
    """Each plate prop's sound (plate.py's model) at the listeners: {object name: (L, n_samples) [Pa]}."""
    from .ground.plate import plate_pressure
    from .modal import F_MAX_HZ, MODE_CUTOFF_DB, NYQUIST_FRACTION
    scene = ctx.scene
    out = {}
    for i in prep.bodies:
        body = scene.bodies[i]
        if ctx.only is not None and body.name not in ctx.only:
            continue
        out[body.name] = np.zeros((len(ctx.listeners), ctx.n_samples))
        if ctx.listeners_move:
            raise InputError(f"{scene.path}: object {body.name!r} (vibration = \"plate\") renders fixed listeners "
                             "only (its Rayleigh transfers are per listener position)")
        below = np.flatnonzero(ctx.listeners[:, 2] <= body.plate_top)
        if len(below):
            raise InputError(f"{scene.path}: listener channel {int(below[0])} is not above the top of "
                             f"{body.name!r} (z = {body.plate_top:g} m), from where its plate radiates; raise the "
                             "listener, or give the object vibration = \"modes\"")
        ev = ctx.events
        rows, J, tau, off = _impacts(ev, i, body, ctx)
        if off:
            log.warning(f"{scene.path}: {off} impact(s) on {body.name!r} are not on its top face and make no plate "
                        "sound")
        if len(rows) == 0:
            continue
        f_max = min(F_MAX_HZ, NYQUIST_FRACTION * ctx.sample_rate / 2)
        with ctx.progress.stage(f"plate {body.name} ({len(rows)} impacts)"):
            out[body.name] += plate_pressure(body.plate, ctx.listeners, ev.t[rows], tau, J, ev.point[rows, :2],
                                             ctx.sample_rate, ctx.n_samples, z0=body.plate_top, c=scene.air.c,
                                             rho_a=scene.air.rho, f_max=f_max, cutoff_db=MODE_CUTOFF_DB,
                                             transfers=prep.transfers.setdefault(i, {}))
    return out


def span(prep: PlatePrepared, ctx):
    """(lead, tail) [s] of one impact's sound: the slowest plate mode's ring (as modal.span)."""
    from .modal import CONTACT_MAX_S, F_MAX_HZ, MODE_CUTOFF_DB, NYQUIST_FRACTION
    T = 0.0
    f_max = min(F_MAX_HZ, NYQUIST_FRACTION * ctx.sample_rate / 2)
    for i in prep.bodies:
        plate = ctx.scene.bodies[i].plate
        ring = plate.ring_time(f_max, MODE_CUTOFF_DB)
        if ring is None:
            return None
        far = float(np.linalg.norm(np.asarray(ctx.listeners) - [*plate.center, 0.0], axis=1).max())
        T = max(T, ring + (far + plate.length + plate.width) / ctx.scene.air.c)
    return 0.0, T + CONTACT_MAX_S


SOURCE = register(SourceKind(
    name="plate", options=PlatePropOptions, prepare=prepare, render=render, span=span,
    summary="static thin boxes (table tops) ringing as simply supported plates where they are struck"))
