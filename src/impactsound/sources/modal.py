"""Modal sound: linear vibration modes of each body, struck by Hertz half-sine impacts, radiated to the listeners.

Per object with a modal model (O'Brien, Shen & Gatchalian 2002, "Synthesizing sounds from rigid-body
simulations"; Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise", sec. 3 for the contact
time):

1. Contact quantities of each event (body-frame point, impulse, Hertz contact time tau) come from the shared
   contact stage (contact/stage.py), measured on the modal model's surface.
2. Modal impulses I_j = u_j(x) . J use the model's own shape functions at the contact point (``shapes_at``).
3. Modes above min(20 kHz, 0.45 f_s) and overdamped ones (xi >= 1) are dropped.
4. Radiation: FFAT maps where the body has them (Chadwick, An & James 2009, "Harmonic Shells", sec. 4; from FDTD
   or BEM, transfer/), else the compact monopole + dipole model (transfer/low_order.py), with
   the listener taken into the body frame at each event's t0. Choice: each event's ringing radiates with the pose
   and propagation delay r/c of its own impact for its whole decay (as PAN synthesises each impulse in the pose
   at its t0). This is exact for bodies at rest between impacts and introduces no clicks from pose switches; a
   body that moves or spins far while one impact's ringing is still audible keeps that impact's radiation.
5. Synthesis: exact complex one-pole stepping with the half-sine closed form (sources/modal_kernel.py); a mode is
   dropped from the update once 120 dB (``mode_cutoff_db``) below its level after the last impact (deep enough
   that a streaming render, whose time blocks each stop after their own last impact, stays within 1e-6 of the
   peak of a whole render; streaming.py).

The source kind ``modal`` (registered at the end of this module) prepares the models (FEM modal analysis, cached
by content hash) and their radiation (``[source.modal] transfer``), and renders with :class:`ModalSource`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..contact.curvature import SurfaceCurvature
from ..contact.stage import BodyContacts, ContactStage, contact_stage
from ..dynamics.events import EventLog
from ..errors import InputError
from ..io.progress import QUIET
from ..transfer import hrtf
from ..transfer.low_order import (compact_basis, compact_geometry, compact_weight_factors, compact_weights,
                                  model_moments)
from .modal_kernel import synthesize
from .base import check_objects_known, render_arguments
from .registry import SourceKind, register

#: highest synthesised modal frequency [Hz] (the top of hearing; f_max = min(20 kHz, 0.45 f_s))
F_MAX_HZ = 20000.0
NYQUIST_FRACTION = 0.9
#: a mode stops ringing (is no longer updated) this many dB below its level after the last impact [dB]
MODE_CUTOFF_DB = 120.0
#: the longest Hertz contact a span allows for [s] (contacts last microseconds to a few milliseconds)
CONTACT_MAX_S = 0.05
_EVENT_BLOCK = 4096


def ffat_acceleration_weights(P, omega, xi):
    """Weights (c1, c2) of q' and q'' that radiate a mode through its FFAT value P (pressure per unit modal
    displacement at the mode's frequency, the propagation phase removed; e^{-i w t} convention).

    A free ring radiates p = Re(P) q - Im(P) q' / w (Chadwick, An & James 2009, "Harmonic Shells", sec. 4). The
    same samples follow from the mode's acceleration, because a free mode obeys q'' = -2 xi w q' - w^2 q:
        p = c2 q'' + c1 q',   c2 = -Re(P) / w^2,   c1 = -Im(P) / w - 2 xi Re(P) / w,
    identical after the contact. During a contact the two differ by the force term (q'' = ... + g(t)), and the
    acceleration form is the right one there: radiated pressure is linear in the surface's acceleration,
    p(w') = T_j(w') a_j(w') with a_j = q_j'' u_j, and an FFAT map stores T_j at the mode's own frequency only.
    Holding T_j at w_j across the contact's spectrum errs by how T_j varies with frequency (smoothly); the
    displacement form instead holds T_j(w') (-w'^2) at -w_j^2 T_j(w_j), wrong by (w' / w_j)^2 away from the
    resonance. A mode that follows a slow force quasi-statically (q ~ g / w^2, a contact much longer than its
    period: a heavy stone on soil) then radiates almost nothing, as it must; the displacement form radiated its
    static dent as if it rang at w (a 30 cm granite sphere on packed soil: 0.62 Pa against 0.015 Pa). A short,
    hard contact gives each mode the click of its acceleration under the force. For compact modes this is the
    compact model's own form (transfer/low_order.py), and the baffled plate floor radiates its modes the same way
    (sources/ground/plate.py)."""
    P = np.asarray(P)
    omega = np.asarray(omega, np.float64)
    xi = np.asarray(xi, np.float64)
    c2 = -P.real / omega**2
    c1 = -P.imag / omega - 2.0 * xi * P.real / omega
    return c1, c2


class NearFieldWarning(UserWarning):
    """A listener came inside an object's first FFAT shell: its transfer is evaluated from the BEM solution."""


class ModalSource:
    """Modal vibration sound of every body that has a :class:`~impactsound.fem.model.ModalModel`.

    bodies: the scene's bodies (event ids index this list); models: {body name: ModalModel} (bodies without a
    model are silent here but still act as contact partners); ground: scene ground (None: rigid plane);
    air: speed of sound c [m/s] and density rho [kg/m^3]; mode_cutoff_db: stop updating a mode once this many dB
    below its peak (None: never); n_threads: worker threads for synthesis (None: all available cores; the
    result does not depend on it); transfers: {body name: transfer.precompute.TransferModel} whose FFAT maps
    radiate that body's first modes (the rest keep the compact model); ears: (L, 3) unit outward ear axes
    (world) of binaural listeners, NaN rows for microphones (None: all microphones).
    """

    kind = "modal"

    def __init__(self, bodies, models, ground, air, *, mode_cutoff_db: float | None = MODE_CUTOFF_DB,
                 n_threads: int | None = None, transfers: dict | None = None, ears=None, motion: dict | None = None,
                 listeners=None, follow: bool = True, resting: dict | None = None):
        self.bodies = list(bodies)
        check_objects_known("ModalSource", "modal models", models, self.bodies)
        self.models = dict(models)
        self.ground = ground
        self.air = air
        self.mode_cutoff_db = mode_cutoff_db
        self.n_threads = n_threads
        # {body name: TransferModel}: FFAT maps of a body's first modes replace the compact model for them
        self.transfers = dict(transfers or {})
        # (L, 3) outward ear axis per listener (world), NaN rows for plain microphones: binaural listeners get
        # the spherical-head shadow |H(w_j, theta)| per mode (transfer/hrtf.py)
        self.ears = None if ears is None else np.asarray(ears, np.float64)
        # radiation that follows the bodies and listeners (sources/modal_moving.py): {body index: Trajectory} of
        # recorded motion, and the listener channels (scene Listener objects; None: fixed at the render's positions)
        self.motion = dict(enumerate(motion)) if isinstance(motion, (list, tuple)) else dict(motion or {})
        self.listener_channels = None if listeners is None else list(listeners)
        self.follow = bool(follow)
        # {body index: [Rest, ...]}: where bodies lie still on supports, damping their modes (sources/resting.py)
        self.resting = dict(resting or {})
        self._surface: dict[str, SurfaceCurvature] = {}
        self._moments: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ---- contact geometry ------------------------------------------------------------------------------------
    def surfaces(self) -> dict:
        """{body name: SurfaceCurvature} of the modal models' surfaces (contact points, curvature radii and
        effective-mass arms are measured on them; the mode shapes are interpolated on them)."""
        for name, model in self.models.items():
            if name not in self._surface:
                faces = np.asarray(model.surface_faces, np.int64)
                nv = model.n_surface_vertices
                self._surface[name] = SurfaceCurvature(np.asarray(model.surface_nodes)[:nv], faces)
        return self._surface

    def contacts(self, events: EventLog) -> ContactStage:
        """The contact stage of ``events`` measured on the modal models' surfaces (bodies without a model: their
        scene mesh). Public for inspection and tests."""
        return contact_stage(events, self.bodies, self.ground, surfaces=self.surfaces())

    def _moments_of(self, name: str):
        if name not in self._moments:
            self._moments[name] = model_moments(self.models[name])
        return self._moments[name]

    # ---- Source interface ----------------------------------------------------------------------------------
    def render(self, events: EventLog, listeners, sample_rate, duration, *, contacts: ContactStage | None = None,
               only=None) -> dict[str, np.ndarray]:
        """Pressure at the listeners of every body with a model (of those named in ``only``, when given).

        Parameters
        ----------
        events : EventLog
            Contact events (vn > 0).
        listeners : array_like, shape (L, 3)
            World listener positions [m].
        sample_rate : float
            Output rate [Hz].
        duration : float
            Output length [s].
        contacts : ContactStage, optional
            The contact stage of ``events`` measured on the models' surfaces (:meth:`contacts`); computed here
            when not given.

        Returns
        -------
        dict
            {body name: (L, round(duration * sample_rate)) float64 pressure [Pa]}.
        """
        L_w, fs, n_samples = render_arguments("ModalSource.render", listeners, sample_rate, duration)
        out: dict[str, np.ndarray] = {}
        for i, body in enumerate(self.bodies):
            model = self.models.get(body.name)
            if model is None or (only is not None and body.name not in only):
                continue
            y = np.zeros((len(L_w), n_samples))
            out[body.name] = y
            if not events.involving(i).any():
                continue
            f = np.asarray(model.frequencies_hz, np.float64)
            xi = np.asarray(model.xi, np.float64)
            keep = (f > 0) & (f < min(F_MAX_HZ, NYQUIST_FRACTION * fs / 2)) & (xi < 1)
            if not keep.any():
                continue
            if contacts is None:
                contacts = self.contacts(events)
            bc = contacts.of(i)
            rows, face, bary, J_b, tau, pos = bc.rows, bc.face, bc.bary, bc.impulse, bc.tau, bc.position
            xl_b = bc.listeners(L_w)
            imp = np.empty((len(rows), int(keep.sum())))
            for a in range(0, len(rows), _EVENT_BLOCK):           # bounded memory: (block, m, 3)
                u = model.shapes_at(face[a:a + _EVENT_BLOCK], bary[a:a + _EVENT_BLOCK])[:, keep, :]
                imp[a:a + _EVENT_BLOCK] = np.einsum("nmc,nc->nm", u, J_b[a:a + _EVENT_BLOCK])  # I_j = u_j . J
            idx = np.flatnonzero(keep)
            traj = self._moving_trajectory(i, events, bc)
            if traj is not None:
                y[:] = self._render_moving(body.name, model, idx, bc, events.t[rows], imp, traj, L_w, fs, n_samples,
                                           rests=self.resting.get(i))
                continue
            ears = np.full((len(L_w), 3), np.nan) if self.ears is None else self.ears
            mics = ~np.isfinite(ears).all(axis=1)
            if mics.any():
                y[mics] = self._render_modes(body.name, model, idx, events.t[rows], tau, imp, xl_b[:, mics], fs,
                                             n_samples)
            for l in np.flatnonzero(~mics):
                # binaural: the head-shadow magnitude of each mode folds into its impulses (linear response)
                theta = hrtf.ear_angle(ears[l], L_w[l], pos)                                   # (E,)
                gain = hrtf.head_shadow(2 * np.pi * f[idx][None, :], theta[:, None], c=self.air.c)
                y[l] = self._render_modes(body.name, model, idx, events.t[rows], tau, imp * gain,
                                          xl_b[:, l:l + 1], fs, n_samples)[0]
        return out

    # ---- radiation that follows the body and the listener ------------------------------------------------------
    def _listeners_move(self) -> bool:
        return self.listener_channels is not None and any(l.moves for l in self.listener_channels)

    def _moving_trajectory(self, i, events, bc):
        """The trajectory body i radiates along, or None where the frozen (per-impact) radiation is exact: the body
        does not move and no listener does (or ``follow`` is off)."""
        traj = self.motion.get(i)
        if not self.follow:
            return None
        if self.resting.get(i):
            # resting contact damping varies in time: the moving renderer carries it (for a body at rest it gives
            # the frozen renderer's samples)
            if traj is not None and traj.quaternion is not None:
                return traj
            from ..transfer.motion import static_trajectory
            return static_trajectory(self.bodies[i].position, self.bodies[i].quaternion)
        if traj is not None and traj.quaternion is not None and traj.moves:
            return traj
        if not self._listeners_move():
            return None
        if traj is not None and traj.quaternion is not None:
            return traj
        # no recorded motion (an event log): the poses its events give, held and interpolated between them
        from ..transfer.motion import event_trajectory
        rows = bc.rows
        pos = np.where(bc.on_b[:, None], events.pos_b[rows], events.pos_a[rows])
        quat = np.where(bc.on_b[:, None], events.quat_b[rows], events.quat_a[rows])
        return event_trajectory(events.t[rows], pos, quat)

    def _rest_damping(self, name, model, idx, rests):
        """(len(rests), len(idx)) extra decay rates [1/s] of the modes idx while the body rests (sources/resting.py)."""
        from .resting import rest_damping
        body = next(b for b in self.bodies if b.name == name)

        def support_material(k):
            if k < 0:
                return self.ground.material if self.ground is not None else body.material
            return self.bodies[k].material
        surf = self.surfaces()[name]
        return np.stack([rest_damping(model, surf, r, body.material, support_material, idx) for r in rests])

    def _render_moving(self, name, model, idx, bc, t0, imp, traj, L_w, fs, n_samples, rests=None):
        """Pressure (L, n) of the modes idx of a body moving along ``traj`` and/or heard by moving listeners: the
        radiation weight of every mode is evaluated at control frames (>= 1 kHz) at the body's pose at the
        emission time and the listener's position (transfer/motion.py), and the modal state is read at the
        emission time (sources/modal_moving.py)."""
        import warnings

        from ..transfer.motion import control_hop, retarded_geometry
        from .modal_moving import FactoredWeights, synthesize_moving
        c, rho = self.air.c, self.air.rho
        H = control_hop(fs)
        K = -(-n_samples // H) + 2
        tk = np.arange(K) * (H / fs)
        chans = self.listener_channels
        if chans is None:
            xl = np.broadcast_to(L_w, (K,) + L_w.shape)
            ears = np.full((K, len(L_w), 3), np.nan) if self.ears is None else np.broadcast_to(self.ears, xl.shape)
        else:
            xl = np.stack([l.position_at(tk) for l in chans], axis=1)                    # (K, L, 3)
            ears = np.stack([l.ear_at(tk) for l in chans], axis=1)
        geo = retarded_geometry(traj, tk, xl, c)
        binaural = np.isfinite(ears).all(axis=-1)                                      # (K, L)
        f = np.asarray(model.frequencies_hz, np.float64)
        xi = np.asarray(model.xi, np.float64)
        omega = 2 * np.pi * f
        s = -xi * omega + 1j * omega * np.sqrt(1 - xi**2)
        tm = self.transfers.get(name)
        ffat = idx < (tm.n_modes if tm is not None else 0)
        if tm is not None and ffat.any() and np.any(np.linalg.norm(geo.x_body, axis=-1) < tm.inner_radius):
            warnings.warn(f"{name}: a listener comes within {tm.inner_radius:.3g} m of the object's centre, inside "
                          "the first FFAT shell where the far-field maps do not hold; there the stored surface / "
                          "box solutions are evaluated directly (slower)", NearFieldWarning, stacklevel=3)

        # listener positions when each event's sound arrives (contact samples use the event's own pose)
        E = len(t0)
        if chans is None:
            xl_e = np.broadcast_to(L_w, (E,) + L_w.shape)
            ears_e = np.broadcast_to(np.full((len(L_w), 3), np.nan) if self.ears is None else self.ears, xl_e.shape)
        else:
            d0 = np.linalg.norm(np.stack([l.position_at(t0) for l in chans], axis=1) - bc.position[:, None], axis=-1)
            arrive = t0[:, None] + d0 / c
            xl_e = np.stack([l.position_at(arrive[:, k]) for k, l in enumerate(chans)], axis=1)   # (E, L, 3)
            ears_e = np.stack([l.ear_at(arrive[:, k]) for k, l in enumerate(chans)], axis=1)
        xb_e = np.einsum("eji,elj->eli", bc.rotation, xl_e - bc.position[:, None, :])  # R^T (x - X)

        def shadow(modes, ear_axes, heads, sources):
            """Head-shadow gain (..., len(modes)) of binaural channels, 1 for microphones (transfer/hrtf.py)."""
            g = np.ones(heads.shape[:-1] + (len(modes),))
            mask = np.isfinite(ear_axes).all(axis=-1)
            if mask.any():
                theta = hrtf.ear_angle(ear_axes[mask], heads[mask], sources[mask])
                g[mask] = hrtf.head_shadow(omega[modes][None, :], theta[:, None], c=c)
            return g

        y = np.zeros((len(L_w), n_samples))
        groups = []
        if (~ffat).any():
            sel = idx[~ffat]
            V, D = self._moments_of(name)
            basis = compact_basis(V[sel], D[sel])                                      # (4, m)

            def w_compact(xb, scale, sel=sel, V=V, D=D, factored=False):
                if factored:
                    return FactoredWeights(*compact_weight_factors(xb, s[sel], V[sel], D[sel], c, rho, scale))
                return compact_weights(xb, s[sel], V[sel], D[sel], c, rho, scale)

            w_compact.factors = True
            geom_e, _ = compact_geometry(xb_e, c, rho)
            groups.append((sel, imp[:, ~ffat], w_compact, geom_e, basis))
        if ffat.any():
            sel = idx[ffat]

            def w_ffat(xb, scale, sel=sel):
                r = np.linalg.norm(xb, axis=-1)
                P = tm.evaluate(xb.reshape(-1, 3), sel).reshape(xb.shape[:-1] + (len(sel),))
                P = P * (np.exp(-1j * tm.bank.k[sel] * r[..., None]) * scale[..., None])  # the delay carries the phase
                W = P.real - P.imag * (s[sel] / omega[sel])
                return W.real, W.imag

            # contact samples: the static FFAT form at the event's arrival, weights of q' and q'' (acceleration
            # form, ffat_acceleration_weights)
            r_e = np.linalg.norm(xb_e, axis=-1)
            P = tm.evaluate(xb_e.reshape(-1, 3), sel).reshape(xb_e.shape[:-1] + (len(sel),))
            P = P * np.exp(-1j * tm.bank.k[sel] * r_e[..., None])
            gsh = shadow(sel, ears_e, xl_e, bc.position[:, None, :].repeat(len(L_w), 1))
            c1, c2 = ffat_acceleration_weights(P, omega[sel], xi[sel])
            geom_e = np.zeros((E, len(L_w), 3, len(sel)))
            geom_e[:, :, 1] = c1 * gsh
            geom_e[:, :, 2] = c2 * gsh
            groups.append((sel, imp[:, ffat], w_ffat, geom_e, np.eye(len(sel))))
        dsig = None
        if rests:
            from .resting import ramp
            dsig = self._rest_damping(name, model, idx, rests)                         # (R, len(idx))
            T_emit = geo.T[:, 0]                         # the body rests at emission time (first listener's)
        for sel, imp_g, wfun, geom_e, basis in groups:
            if getattr(wfun, "factors", False) and binaural.any():
                # binaural contact samples of the compact group: the head shadow folds into its weights per mode,
                # so expand the features to one per mode (few samples per event). The FFAT group's contact weights
                # are per mode already, shadowed where they are made
                gsh = shadow(sel, ears_e, xl_e, bc.position[:, None, :].repeat(len(L_w), 1))     # (E, L, m)
                geom_e = np.einsum("elkf,fj,elj->elkj", geom_e, basis, gsh)
                basis = np.eye(len(sel))

            def weights(frames, sel=sel, wfun=wfun):
                if getattr(wfun, "factors", False) and not binaural[frames].any():
                    # the kernel forms the compact weights from seven factors per frame
                    return wfun(geo.x_body[frames], geo.amplification[frames], factored=True)
                wr, wi = wfun(geo.x_body[frames], geo.amplification[frames])
                if binaural[frames].any():
                    g = shadow(sel, ears[frames], xl[frames], geo.source[frames])
                    wr, wi = wr * g, wi * g
                return wr, wi

            damping = None
            if dsig is not None:
                cols = np.searchsorted(idx, sel)

                def _damping(frames, cols=cols):
                    return ramp(T_emit[frames], rests).T @ dsig[:, cols]
                damping = _damping

            y += synthesize_moving(omega[sel], xi[sel], t0, bc.tau, imp_g, geo.delay, weights, H, geom_e, basis,
                                   fs, n_samples, cutoff_db=self.mode_cutoff_db, n_threads=self.n_threads,
                                   damping=damping)
        return y

    def _render_modes(self, name, model, idx, t0, tau, imp, xl_b, fs, n_samples):
        """Pressure (L, n) of the modes idx: FFAT maps where the body has them, the compact model otherwise."""
        f = np.asarray(model.frequencies_hz, np.float64)
        xi = np.asarray(model.xi, np.float64)
        tm = self.transfers.get(name)
        ffat = idx < (tm.n_modes if tm is not None else 0)              # modes with an FFAT map
        y = np.zeros((xl_b.shape[1], n_samples))
        if (~ffat).any():
            V, D = self._moments_of(name)
            sel = idx[~ffat]
            geom, delay = compact_geometry(xl_b, self.air.c, self.air.rho)
            y += synthesize(2 * np.pi * f[sel], xi[sel], t0, tau, imp[:, ~ffat], delay, geom,
                            compact_basis(V[sel], D[sel]), fs, n_samples, cutoff_db=self.mode_cutoff_db,
                            n_threads=self.n_threads)
        if ffat.any():
            y += self._render_ffat(tm, idx[ffat], f, xi, t0, tau, imp[:, ffat], xl_b, fs, n_samples, name)
        return y

    def _render_ffat(self, tm, modes, f, xi, t0, tau, imp, xl_b, fs, n_samples, name):
        """Modes radiated by FFAT maps, phase-correct form (FFAT maps, Chadwick, An & James 2009, sec. 4): with P_j = p_j(x) e^{-ikr}
        (e^{-i w t}), p(t) = sum_j Re(P_j) q_j(t - r/c) - Im(P_j) q_j'(t - r/c) / w_j for the free ring, written
        with q_j'' and q_j' (:func:`ffat_acceleration_weights`) so that a contact radiates the mode's acceleration.
        The per-(event, mode) weights fold into the modal impulses (the response is linear in them): one synthesis
        for the q' terms and one for the q'' terms per listener."""
        import warnings
        E, L = xl_b.shape[:2]
        r = np.linalg.norm(xl_b, axis=-1)                                  # (E, L)
        R1 = tm.inner_radius
        if np.any(r < R1):
            warnings.warn(f"{name}: a listener is within {R1:.3g} m of the object's centre, inside the first FFAT "
                          f"shell where the far-field maps do not hold; those events use the stored BEM surface "
                          f"solutions directly (slower)", NearFieldWarning, stacklevel=3)
        omega = 2 * np.pi * f[modes]
        P = tm.evaluate(xl_b.reshape(-1, 3), modes).reshape(E, L, len(modes))
        P = P * np.exp(-1j * tm.bank.k[modes][None, None, :] * r[..., None])
        delay = r / self.air.c
        out = np.zeros((L, n_samples))
        one = np.ones((1, len(modes)))
        c1, c2 = ffat_acceleration_weights(P, omega, xi[modes])
        for l in range(L):
            for order, w in ((1, c1[:, l]), (2, c2[:, l])):
                geom = np.zeros((E, 1, order + 1, 1))
                geom[:, 0, order, 0] = 1.0
                out[l] += synthesize(omega, xi[modes], t0, tau, imp * w, delay[:, l:l + 1], geom, one, fs,
                                     n_samples, cutoff_db=self.mode_cutoff_db, n_threads=self.n_threads)[0]
        return out


# ---- the source kind --------------------------------------------------------------------------------------------
class ModalOptions(BaseModel):
    """Options of the ``modal`` source (scene table ``[source.modal]``)."""

    model_config = ConfigDict(extra="forbid")
    modal_order: Literal[1, 2] = Field(default=2, description="finite-element order: 1 (linear tets) or 2 "
                                       "(quadratic tets)")
    max_modes: int = Field(default=200, ge=1, description="most modes kept per object")
    transfer: Literal["auto", "ffat", "low_order"] = Field(
        default="auto", description="radiation: auto = FFAT maps of every mode from grouped FDTD solves; ffat = "
        "BEM FFAT maps of the first transfer_max_modes modes (reference, slow); low_order = monopole + dipole "
        "(approximate)")
    transfer_max_modes: int = Field(default=20, ge=1, description="modes given BEM FFAT maps with transfer = ffat")
    resting_damping: bool = Field(
        default=True, description="a body lying still on a support loses vibration into it: extra modal damping "
        "from each resting contact's radiation dashpot (Lysmer's analog under the Hertz patch), switched on and "
        "off over 10 ms")
    radiation: Literal["follow", "frozen"] = Field(
        default="follow", description="follow = each mode radiates from the body's current pose to the listener's "
        "current position (1 kHz control rate, Doppler; moving bodies and listeners); frozen = each impact's ring "
        "keeps the pose and delay of its impact (exact for bodies at rest)")
    mesher: Literal["tetgen", "ftetwild", "gmsh", "auto"] = Field(
        default="tetgen", description="tetrahedral mesher: tetgen (AGPL-3.0; the default: the most accurate and "
        "robust measured), ftetwild (MPL-2.0), gmsh (GPL-2.0+, pip install impactsound[gmsh]), auto (the default "
        "if installed, else the most permissive installed)")


@dataclass
class ModalPrepared:
    """What :func:`prepare` made: {body name: ModalModel}, {name: TransferModel}, {name: radiation used}."""

    models: dict
    transfers: dict
    radiation: dict
    notes: dict = None          # {body name: why it has no solid modal model here} (thin shells)
    surfaces: dict = None       # {body name: SurfaceCurvature}, filled by the first render (shared by the blocks)


def body_clamp(body):
    """The clamped patch of a body held by a fixed joint: (anchor in the body frame, radius) [m], else None.

    Boundary conditions (the package's choice): a ``fixed`` joint clamps the object at its anchor (every FEM node
    within ``clamp_radius`` of it held still: a cymbal on its stand, a bar in a vice); static props, ``hinge`` and
    ``ball`` joints ring with their free modes (a table top on its own legs, a bell on its cord, a lid on a pin:
    nothing holds them stiffly where they vibrate)."""
    mount = getattr(body, "mount", None)
    if mount is None or mount.kind != "fixed":
        return None
    from ..rotation import quat_to_matrix
    R0 = quat_to_matrix(body.quaternion)[0]
    return R0.T @ (np.asarray(mount.anchor, np.float64) - np.asarray(body.position, np.float64)), mount.clamp_radius


def modal_models(scene, progress=QUIET) -> dict:
    """FEM modal model of every body (cached on disk by content hash): {body name: ModalModel}."""
    from ..fem.modal import cached_modal_analysis
    opt = scene.options["modal"]
    from ..mesh.tetra import _default_max_edge
    f_max = min(F_MAX_HZ, 0.45 * scene.sample_rate)
    preview = getattr(scene, "quality", "default") == "preview"
    from ..assets import content_hash
    models, loaded = {}, {}
    for body in scene.bodies:
        if getattr(body, "shell", None) is not None:
            continue            # a thin shell: its modes come from the shell model (sources/shell/source.py)
        if getattr(body, "plate", None) is not None:
            continue            # a plate prop: rendered by the plate source (sources/plate_prop.py)
        edge = PREVIEW["edge_factor"] * _default_max_edge(body.mesh) if preview else None
        clamp = body_clamp(body)
        # identical objects (the same body-frame mesh, material and mount) share one loaded model: a thousand
        # copies of a die hold one, not a thousand (the models are read-only from here on)
        key = content_hash(np.asarray(body.mesh.vertices, np.float64), np.asarray(body.mesh.faces, np.int64),
                           body.material.as_dict(), edge,
                           None if clamp is None else [np.asarray(clamp[0], np.float64), clamp[1]])
        if key in loaded:
            models[body.name] = loaded[key]
            continue
        with progress.stage(f"modes of {body.name}" + (" (preview mesh)" if preview else "")) as update:
            models[body.name] = loaded[key] = cached_modal_analysis(
                body.mesh, body.material, order=opt.modal_order, max_modes=opt.max_modes, f_max=f_max,
                max_edge=edge, progress=update, source=body.source, mesher=opt.mesher, clamp=clamp)
        m = models[body.name]
        if m.n_modes:
            progress.message(f"  {body.name}: {m.n_modes} modes, {m.frequencies_hz[0]:.0f}-"
                             f"{m.frequencies_hz[-1]:.0f} Hz")
        else:
            progress.message(f"  {body.name}: no modes below {f_max:.0f} Hz (silent in modal sound)")
    return models


#: what ``[scene] quality = "preview"`` (``impactsound render --preview``) changes, for a first listen in seconds:
#: the FEM mesh's default edge times ``edge_factor`` (about 8x fewer tets), the FDTD radiation at ``ppw`` cells per
#: wavelength and ``thickness_cells`` across the thickness (cost ~ thickness_cells^4; a thin object radiated with its
#: walls as screens keeps the default 40 cells across, whose edge error grows as the cell), proxy acceleration noise
#: (no own PAN precompute), no ground sound. Measured against the default on a cup, a coin and a block: docs/
#: scene-format.md ("quality").
PREVIEW = {"edge_factor": 2.0, "ppw": 6.0, "thickness_cells": 2.0}


def fdtd_settings(scene=None, air=None):
    """The FDTD transfer settings a scene's quality asks for (:data:`PREVIEW` for "preview")."""
    from ..scene.model import Air
    from ..transfer.fdtd_transfer import FDTDTransferSettings
    air = air or (scene.air if scene is not None else Air())
    if scene is not None and getattr(scene, "quality", "default") == "preview":
        return FDTDTransferSettings(c=air.c, rho=air.rho, ppw=PREVIEW["ppw"],
                                    thickness_cells=PREVIEW["thickness_cells"])
    return FDTDTransferSettings(c=air.c, rho=air.rho)


def transfer_path(model, method: str = "auto", *, air=None, max_modes: int = 20, settings=None):
    """The cache file of a modal model's radiation by ``method`` ("auto": FDTD FFAT maps; "ffat": BEM FFAT maps of
    the first ``max_modes`` modes), keyed by the content hash of the model and the settings; None for
    "low_order" (nothing is stored). Every door (a scene, :func:`strike`, ``impactsound transfer precompute``,
    ``impactsound export``) reads and writes this same file."""
    from ..assets import cache_dir
    from ..scene.model import Air
    air = air or Air()
    if method == "auto":
        from ..transfer.fdtd_transfer import FDTDTransferSettings
        from ..transfer.fdtd_transfer import transfer_inputs_hash as fdtd_hash
        settings = settings or FDTDTransferSettings(c=air.c, rho=air.rho)
        return cache_dir() / f"fdtd-{fdtd_hash(model, settings)[:32]}.h5"
    if method == "ffat":
        from ..transfer.precompute import TransferSettings, transfer_inputs_hash
        settings = TransferSettings(max_modes=max_modes, c=air.c, rho=air.rho)
        return cache_dir() / f"ffat-{transfer_inputs_hash(model, settings)[:32]}.h5"
    return None


def transfer_model(model, method: str = "auto", *, air=None, max_modes: int = 20, progress=QUIET,
                   name: str = "object", settings=None):
    """The radiation of a modal model's modes, from the cache or computed (cached by content hash).

    Parameters
    ----------
    model : ModalModel
        The object's modes.
    method : {"auto", "ffat", "low_order"}
        "auto": FFAT maps of every mode from grouped FDTD solves (the default: accurate, ~1 min for a 20 cm bar
        the first time); "ffat": BEM FFAT maps of the first ``max_modes`` modes (the reference; slow);
        "low_order": the compact monopole + dipole model (approximate: free-body bending and torsion modes have
        vanishing low-order moments and come out tens of dB too quiet).
    air : Air, optional
        Speed of sound and density (default 343.2 m/s, 1.2041 kg/m^3).
    max_modes : int
        Modes given BEM maps with "ffat".
    progress : Progress
        Progress bars for the solves.
    name : str
        The object's name, for progress messages.
    settings : FDTDTransferSettings, optional
        For "auto" (default: the accurate defaults at ``air``; :func:`fdtd_settings` gives a scene's).

    Returns
    -------
    tuple
        (TransferModel, or None for "low_order" or a model without modes; a description of the radiation used).
    """
    from ..scene.model import Air
    air = air or Air()
    low = "low_order (monopole + dipole; approximate)"
    if method not in ("auto", "ffat", "low_order"):
        raise InputError(f"transfer method {method!r}: use 'auto', 'ffat' or 'low_order'")
    if not model.n_modes or method == "low_order":
        return None, low
    path = transfer_path(model, method, air=air, max_modes=max_modes, settings=settings)
    # one process solves it; others asking at once wait for the lock, then read it (assets.asset_lock)
    from ..assets import asset_lock
    with asset_lock(path):
        return _load_or_solve_transfer(model, method, path, air, max_modes, progress, name, settings)


def _load_or_solve_transfer(model, method, path, air, max_modes, progress, name, settings):
    from ..errors import AssetError
    from ..transfer.precompute import TransferModel, TransferSettings, run_transfer
    if path.is_file():
        try:
            TransferModel.load(path, model)
        except AssetError as e:          # a corrupted or stale cache file is rebuilt, never used
            progress.message(f"  {name}: rebuilding the cached radiation ({e})")
            path.unlink(missing_ok=True)
    if method == "auto":
        from ..transfer.fdtd_transfer import FDTDTransferSettings, plan, run_fdtd_transfer
        from ..transfer.precompute import model_surface
        settings = settings or FDTDTransferSettings(c=air.c, rho=air.rho)
        if not path.is_file():
            v, f, _ = model_surface(model)
            pl = plan(v, f, model.frequencies_hz, settings)
            with progress.stage(f"FDTD transfer of {name} ({model.n_modes} modes, {len(pl.groups)} runs, "
                                f"grid {'x'.join(map(str, pl.grid.shape))}"
                                f"{', thin walls as screens' if pl.thin else ''})") as update:
                run_fdtd_transfer(model, settings, out=path, progress=update)
        tm = TransferModel.load(path, model)
        return tm, f"fdtd_ffat (FFAT maps from FDTD, all {tm.n_modes} modes)"
    settings = TransferSettings(max_modes=max_modes, c=air.c, rho=air.rho)
    if not path.is_file():
        with progress.stage(f"BEM transfer of {name} ({min(model.n_modes, max_modes)} modes)") as update:
            run_transfer(model, settings, out=path, progress=update)
    tm = TransferModel.load(path, model)
    return tm, f"bem_ffat (BEM FFAT maps) for the first {tm.n_modes} modes, low_order for the rest"


def transfer_models(scene, models: dict, progress=QUIET) -> tuple[dict, dict]:
    """Acoustic transfer of each body's modal model.

    ``[source.modal] transfer``: "auto" (default) FFAT maps of every mode from grouped FDTD solves
    (transfer/fdtd_transfer.py; cached by content hash, computed when missing, so the output never depends on what
    the cache holds); "ffat" BEM-fitted FFAT maps of the first ``transfer_max_modes`` modes (the reference; slow);
    "low_order" the compact monopole + dipole model (approximate: free-body bending and torsion modes have
    vanishing low-order moments). A per-object ``transfer = FILE`` overrides.

    Returns
    -------
    tuple of dict
        ({body name: TransferModel}, {body name: which radiation model is used}).
    """
    from ..assets import cache_dir
    from ..errors import AssetError
    from ..transfer.precompute import TransferModel
    opt = scene.options["modal"]
    out, used, shared = {}, {}, {}
    given = {b.name: b.transfer_asset for b in scene.bodies}
    for name, model in models.items():
        if not model.n_modes:
            continue
        used[name] = "low_order (monopole + dipole; approximate)"
        modal_path = cache_dir() / f"modal_{model.inputs_hash[:40]}.h5"
        files = model.meta.setdefault("assets", {})
        files["modal"] = {"file": str(modal_path), "key": model.inputs_hash}
        if given.get(name) == "low_order":
            used[name] = "low_order (monopole + dipole; approximate: the object asks for it, transfer = 'low_order')"
            progress.message(f"  {name}: radiation {used[name]}")
            continue
        if given.get(name):
            try:
                out[name] = TransferModel.load(given[name], model)
            except AssetError as e:
                raise AssetError(f"{scene.path}: object {name}: transfer = {given[name]}: {e}. This scene's modal "
                                 f"model of {name} is {modal_path}: run `impactsound transfer precompute "
                                 f"{modal_path} --out {given[name]}`") from None
            used[name] = f"ffat_file ({given[name]}) for the first {out[name].n_modes} modes, low_order for the rest"
            files["radiation"] = {"file": str(given[name]), "key": out[name].modal_inputs_hash}
            progress.message(f"  {name}: radiation {used[name]}")
            continue
        fs = fdtd_settings(scene)
        if id(model) not in shared:              # identical objects share their model, and so its radiation
            shared[id(model)] = transfer_model(model, opt.transfer, air=scene.air,
                                               max_modes=opt.transfer_max_modes, progress=progress, name=name,
                                               settings=fs)
        tm, how = shared[id(model)]
        if tm is not None:
            out[name] = tm
            used[name] = how + (" (preview grid)" if scene.quality == "preview" and opt.transfer == "auto" else "")
            tpath = transfer_path(model, opt.transfer, air=scene.air, max_modes=opt.transfer_max_modes,
                                  settings=fs)
            files["radiation"] = {"file": str(tpath), "key": tpath.stem.split("-", 1)[1]}
        progress.message(f"  {name}: radiation {used[name]} (modal asset {modal_path})")
    return out, used


def prepare(scene, progress=QUIET) -> ModalPrepared:
    """Modal models of every body and their radiation (``[source.modal]`` options)."""
    models = modal_models(scene, progress)
    transfers, used = transfer_models(scene, models, progress)
    notes = {b.name: "thin shell: rendered by the shell source, not as a solid" for b in scene.bodies
             if getattr(b, "shell", None) is not None}
    notes.update({b.name: "vibration = \"plate\": rendered by the plate source as a simply supported plate"
                  for b in scene.bodies if getattr(b, "plate", None) is not None})
    return ModalPrepared(models, transfers, used, notes)


def render(prep: ModalPrepared, ctx) -> dict:
    """Modal sound of the events in ``ctx`` (a RenderContext): {body name: (L, n_samples) [Pa]}."""
    opt = ctx.scene.options.get("modal")
    src = ModalSource(ctx.scene.bodies, prep.models, ctx.scene.ground, ctx.scene.air, transfers=prep.transfers,
                      ears=ctx.ears, motion=ctx.motion, listeners=ctx.scene.listeners,
                      follow=getattr(opt, "radiation", "follow") == "follow",
                      resting=ctx.resting if getattr(opt, "resting_damping", True) else None)
    if prep.surfaces is None:
        prep.surfaces = {}
    src._surface = prep.surfaces                 # measured once per render, whatever the number of blocks
    ctx.set_surfaces("model", src.surfaces())
    with ctx.progress.stage("modal synthesis"):
        return src.render(ctx.events, ctx.listeners, ctx.sample_rate, ctx.duration,
                          contacts=ctx.contacts("model"), only=ctx.only)


def describe(prep: ModalPrepared) -> tuple[dict, dict]:
    """Sidecar entries: modes and radiation model per object."""
    modes = {k: int(m.n_modes) for k, m in prep.models.items()}
    objects = {k: {"modes": n, "radiation": prep.radiation.get(k, "none (no modes below f_max)"),
                   "assets": dict(prep.models[k].meta.get("assets", {}))}
               for k, n in modes.items()}
    objects.update({k: {"modes": 0, "note": why} for k, why in (prep.notes or {}).items()})
    return {"modes": modes, "radiation": prep.radiation}, objects


def span(prep: ModalPrepared, ctx) -> tuple[float, float] | None:
    """(lead, tail) [s] of one event's modal sound (streaming.py): a ring lasts until its slowest audible mode
    has decayed by MODE_CUTOFF_DB, t = ln(10^(dB/20)) / (xi w) (resting contact damping only shortens it), after
    a contact of at most CONTACT_MAX_S. None when an audible mode is undamped (its ring never ends)."""
    fs = float(ctx.sample_rate)
    T = 0.0
    for model in prep.models.values():
        f = np.asarray(model.frequencies_hz, np.float64)
        xi = np.asarray(model.xi, np.float64)
        keep = (f > 0) & (f < min(F_MAX_HZ, NYQUIST_FRACTION * fs / 2)) & (xi < 1)
        if not keep.any():
            continue
        sigma = xi[keep] * 2 * np.pi * f[keep]
        if not np.all(sigma > 0):
            return None
        T = max(T, float(np.log(10.0 ** (MODE_CUTOFF_DB / 20.0)) / sigma.min()))
    return 0.0, T + CONTACT_MAX_S


SOURCE = register(SourceKind(
    name="modal", options=ModalOptions, prepare=prepare, render=render, describe=describe, span=span,
    summary="vibration of each body's linear modes (FEM), struck by Hertz impacts, radiated by FFAT maps"))


# ---- the simplest use ---------------------------------------------------------------------------------------------
def strike(model, point, impulse, listener, *, duration: float = 1.0, sample_rate: int = 48000,
           tau: float | None = None, transfer="auto", air=None, progress=QUIET) -> np.ndarray:
    """The sound of one strike on a free object: pressure [Pa] at the listener(s).

    The object floats at rest with its centre of mass at the origin and its mesh axes as the world axes (the
    modal model's body frame); it is struck at ``point`` at t = 0 and rings for ``duration``. The modal response
    and radiation are those of :class:`ModalSource`, with the radiation of :func:`transfer_model` (by default FFAT
    maps of every mode from FDTD solves, computed once per model and cached).

    Parameters
    ----------
    model : ModalModel
        The object's modes (e.g. from :func:`impactsound.modal_analysis`).
    point : array_like, shape (3,)
        Where it is struck, body frame [m]; projected onto the surface.
    impulse : float or array_like, shape (3,)
        The impulse [N s]: a vector (body frame) or a magnitude pushed into the surface along the inward normal.
    listener : array_like, shape (3,) or (L, 3)
        Listener position(s), body frame [m], outside the object.
    duration : float
        Output length [s].
    sample_rate : int
        [Hz].
    tau : float, optional
        Contact duration [s]. Default: the Hertz time (Chadwick, Zheng & James 2012, eq. 7) of the object's
        surface against a rigid plane at the normal speed the impulse gives the contact point,
        V = |J . n| / m_eff (m_eff the object's effective mass there).
    transfer : {"auto", "ffat", "low_order"} or TransferModel
        The radiation: a method of :func:`transfer_model` ("auto", the default, is accurate; "low_order" is fast
        but tens of dB too quiet for bending modes), or FFAT maps already made (``impactsound transfer
        precompute``).
    air : Air, optional
        Speed of sound and density (default 343.2 m/s, 1.2041 kg/m^3).
    progress : Progress
        Progress bars for a transfer computed here.

    Returns
    -------
    ndarray, shape (L, round(duration * sample_rate))
        Pressure [Pa] at each listener.
    """
    import trimesh

    from ..contact.hertz import hertz_tau, inverse_effective_mass
    from ..dynamics.events import GROUND
    from ..scene.model import Air, Body
    if not model.n_modes:
        raise InputError("strike: the model has no modes (nothing below its f_max); nothing to hear")
    air = air or Air()
    nv = model.n_surface_vertices
    surf = SurfaceCurvature(np.asarray(model.surface_nodes)[:nv], np.asarray(model.surface_faces))
    p = np.asarray(point, np.float64).reshape(-1)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise InputError(f"strike: point = {point!r} must be one finite body-frame point (x, y, z) [m]")
    face, bary, dist = surf.closest(p[None])
    if dist[0] > 0.05 * surf.bounding_radius:
        raise InputError(f"strike: point {list(p)} is {dist[0]:.3g} m from the object's surface (bounding radius "
                         f"{surf.bounding_radius:.3g} m); give a point on the surface, body frame (origin at the "
                         "centre of mass)")
    x = np.einsum("k,kc->c", bary[0], surf.vertices[surf.faces[face[0]]])
    tri = surf.vertices[surf.faces[face[0]]]
    n_out = np.cross(tri[1] - tri[0], tri[2] - tri[0])
    n_out /= np.linalg.norm(n_out)
    J = np.asarray(impulse, np.float64)
    J = -float(J) * n_out if J.ndim == 0 else J.reshape(3)
    if not (np.isfinite(J).all() and np.linalg.norm(J) > 0):
        raise InputError(f"strike: impulse = {impulse!r} must be a non-zero finite magnitude or vector [N s]")
    L = np.atleast_2d(np.asarray(listener, np.float64))
    if L.shape[1] != 3 or not np.isfinite(L).all():
        raise InputError(f"strike: listener = {listener!r} must be finite body-frame point(s) (x, y, z) [m]")
    inv_m = float(inverse_effective_mass(model.mass, model.inertia, x[None], n_out[None])[0])
    vn = abs(float(J @ n_out)) * inv_m
    if tau is None:
        if vn <= 0:
            raise InputError("strike: the impulse is tangent to the surface; give tau or a normal component")
        r = float(surf.radius_at(face, bary)[0])
        tau = float(hertz_tau(1.0 / inv_m, r, model.material.E / (1.0 - model.material.nu**2), vn))
    if not (np.isfinite(tau) and tau > 0):
        raise InputError(f"strike: tau = {tau} s must be positive")
    body = Body(name="object", mesh=trimesh.Trimesh(surf.vertices, surf.faces, process=False),
                material=model.material, mass=float(model.mass), inertia=np.asarray(model.inertia, np.float64),
                position=np.zeros(3))
    ev = EventLog(t=[0.0], a=[GROUND], b=[0], point=x[None], normal=-n_out[None], impulse=J[None],
                  vn=[max(vn, 1e-9)], pos_b=np.zeros((1, 3)), quat_b=np.array([[1.0, 0, 0, 0]]), body_names=["object"])
    if isinstance(transfer, str):
        transfer, _ = transfer_model(model, transfer, air=air, progress=progress)
    src = ModalSource([body], {"object": model}, None, air, transfers={"object": transfer} if transfer else None)
    stage = src.contacts(ev)
    bc = stage.of(0)
    stage = ContactStage(ev, {0: BodyContacts(**{**bc.__dict__, "tau": np.array([tau])})})
    return src.render(ev, L, sample_rate, duration, contacts=stage)["object"]
