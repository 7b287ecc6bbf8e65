"""The container's sound: its linear modes struck by the grains that hit it (M. Marko, "Sound simulation of
granular materials", ch. 3 and 5.2, after O'Brien, Shen & Gatchalian 2002).

The container is an ordinary scene object with a FEM modal model and the modal source's radiation (FFAT maps or
the compact model). Each grain-container event of a granular table is one Hertz impact of a grain (radius a, mass
m, material E_g, nu_g) on the container's wall, taken as locally flat and much heavier than the grain, so that
m_eff = m and r_eff = a:

    tau = 2.87 (m^2 / (a E*^2 v0))^{1/5},   1/E* = (1 - nu_g^2)/E_g + (1 - nu_c^2)/E_c,
    J = (1 + e) m v0,   f(t) = (pi J / (2 tau)) sin(pi (t - t0)/tau) on [t0, t0 + tau], along -n

(n points from the wall into the grain). The modal source integrates this half-sine exactly for every mode, so
impacts add linearly. e is the event's restitution where the table gives it, else the scene's.

Grains lying in a container damp it strongly (the thesis' recordings of full vs empty metal cups; its simulation
ignores this): ``fill_damping`` adds a damping ratio to every mode of a filled container (0: the empty container's
material damping only).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...contact.hertz import hertz_tau
from ...contact.stage import BodyContacts, ContactStage, contact_stage
from ...dynamics.events import GROUND, EventLog
from ...errors import InputError
from .events import CONTAINER, GranularEvents


def wall_hit_parameters(radius, v0, e, grain_material, wall_material):
    """Hertz time and impulse of grains hitting a heavy, locally flat wall (module docstring).

    Parameters
    ----------
    radius, v0, e : array_like
        Grain radius [m], normal approach speed [m/s], restitution.
    grain_material, wall_material : Material
        Grain and wall (E [Pa], nu, rho [kg/m^3]).

    Returns
    -------
    tau, J : ndarray
        Contact duration [s] and impulse magnitude [N s] on the wall.
    """
    a = np.asarray(radius, np.float64)
    m = 4.0 / 3.0 * math.pi * a**3 * grain_material.rho
    E_star = 1.0 / ((1.0 - grain_material.nu**2) / grain_material.E + (1.0 - wall_material.nu**2) / wall_material.E)
    tau = hertz_tau(m, a, E_star, v0)
    return tau, (1.0 + np.asarray(e, np.float64)) * m * np.asarray(v0, np.float64)


def container_hits(events: GranularEvents, container: str) -> np.ndarray:
    """Rows of ``events`` that are grain hits on the container named ``container``."""
    if container not in events.containers:
        return np.zeros(0, np.int64)
    k = events.containers.index(container)
    return np.flatnonzero((events.kind == CONTAINER) & (events.id_b == k))


def wall_hits(events: GranularEvents, rows, grain_materials, wall_material, restitution: float):
    """:func:`wall_hit_parameters` of the wall hits ``rows`` of a granular table: (tau [s], J [N s]).

    ``grain_materials``: one Material per name in ``events.materials``; ``restitution``: used where an event's e is
    NaN."""
    rows = np.asarray(rows, np.int64)
    e = events.e[rows]
    e = np.where(np.isnan(e), float(restitution), e)
    tau = np.empty(len(rows))
    J = np.empty(len(rows))
    mats = events.material_a[rows]
    for k in np.unique(mats):                    # one vectorised Hertz evaluation per grain material
        sel = mats == k
        tau[sel], J[sel] = wall_hit_parameters(events.radius_a[rows][sel], events.v0[rows][sel], e[sel],
                                               grain_materials[int(k)], wall_material)
    return tau, J


def container_event_log(events: GranularEvents, rows, body, grain_materials, restitution: float):
    """The container hits ``rows`` as a contact-event log of one body (the container, id 0) struck by a static
    partner (the grain; id GROUND), plus their Hertz times: (EventLog, tau [s]) (:func:`wall_hits`)."""
    rows = np.asarray(rows, np.int64)
    n = len(rows)
    tau, J = wall_hits(events, rows, grain_materials, body.material, restitution)
    nrm = -events.normal[rows]                   # from the grain (side a) into the container (side b)
    ev = EventLog(t=events.t[rows], a=np.full(n, GROUND), b=np.zeros(n, np.int64), point=events.point[rows],
                  normal=nrm, impulse=J[:, None] * nrm, vn=events.v0[rows],
                  pos_b=np.tile(np.asarray(body.position, np.float64), (n, 1)),
                  quat_b=np.tile(np.asarray(body.quaternion, np.float64), (n, 1)), body_names=[body.name])
    return ev, tau


def with_fill_damping(model, fill_damping: float):
    """The modal model with ``fill_damping`` added to every mode's damping ratio (kept below critical)."""
    if not (math.isfinite(fill_damping) and 0.0 <= fill_damping < 1.0):
        raise InputError(f"granular.fill_damping = {fill_damping} must be a damping ratio in [0, 1)")
    if fill_damping == 0.0:
        return model
    return dataclasses.replace(model, xi=np.minimum(np.asarray(model.xi) + fill_damping, 0.999))


def container_pressure(events: GranularEvents, body, model, grain_materials, listeners, sample_rate: int,
                       n_samples: int, *, restitution: float = 0.5, fill_damping: float = 0.0, transfer=None,
                       air=None, ears=None) -> np.ndarray:
    """Pressure [Pa] at the listeners of the container ``body`` struck by the grain hits of ``events``.

    Parameters
    ----------
    events : GranularEvents
        The granular table; its container hits whose container name is ``body.name`` are rendered.
    body : scene Body
        The container (static at its scene pose).
    model : ModalModel
        Its modes.
    grain_materials : list of Material
        One per name in ``events.materials``.
    listeners : array_like, shape (L, 3)
        World positions [m].
    sample_rate : int
        [Hz].
    n_samples : int
        Output length.
    restitution : float
        For events without their own e.
    fill_damping : float
        Damping ratio added to every mode (a filled container; module docstring).
    transfer : TransferModel, optional
        FFAT maps of the modes (None: the compact monopole + dipole model).
    air : Air, optional
    ears : ndarray, shape (L, 3), optional
        Outward ear axes of binaural channels (NaN rows: microphones).

    Returns
    -------
    ndarray, shape (L, n_samples)
    """
    from ...scene.model import Air
    from ..modal import ModalSource
    air = air or Air()
    L = np.asarray(listeners, np.float64).reshape(-1, 3)
    rows = container_hits(events, body.name)
    if len(rows) == 0 or not model.n_modes:
        return np.zeros((len(L), n_samples))
    ev, tau = container_event_log(events, rows, body, grain_materials, restitution)
    src = ModalSource([body], {body.name: with_fill_damping(model, fill_damping)}, None, air,
                      transfers={body.name: transfer} if transfer is not None else None, ears=ears)
    # the stage's own Hertz times are replaced by the grains' below; a static or fixed body (an obstacle on a
    # static prop) enters it as free, so that the grain-on-wall pair has a finite mass to compute them from
    free = dataclasses.replace(body, mount=None) if getattr(body, "mount", None) is not None else body
    stage = contact_stage(ev, [free], None, surfaces=src.surfaces())
    bc = stage.of(0)
    stage = ContactStage(ev, {0: BodyContacts(**{**bc.__dict__, "tau": tau})})
    return src.render(ev, L, sample_rate, n_samples / sample_rate, contacts=stage)[body.name]
