"""Modal sound source: linear modes driven by Hertz half-sine impacts, radiated by the compact model.

Pipeline per object with a modal model (modal-sound.md sec. 4-7, pan.md "Contact force from an impulse"):

1. Events touching the body: body b receives +J, body a receives -J (sec. 7). Its pose at t0 comes from the
   event log (pos_a/quat_a or pos_b/quat_b); a NaN pose (engine did not report one) falls back to the body's
   scene pose. Contact point, impulse and normal go to the body frame: x_b = R^T (x - c), J_b = R^T J (sec. 7).
2. The contact point is projected onto the model surface (closest point; face + barycentric coordinates) and the
   modal impulses I_j = u_j(x_b) . J_b use the model's own shape functions (``shapes_at``, sec. 4).
3. Hertz duration (pan.md): tau = 2.87 (m^2/(r E*^2 V))^{1/5} with 1/m = 1/m_self + 1/m_other (inertia-aware
   effective masses along the normal; the ground is infinitely heavy), 1/r = 1/r_self + 1/r_other (discrete mean
   curvature at the contact point of each surface, contact/curvature.py; the ground is a plane), E* of the two
   materials (ground material for the ground), V = the event's vn. An event with vn <= 0 raises InputError:
   resting contacts must be filtered first (sec. 8).
4. Modes above min(20 kHz, 0.45 f_s) and overdamped ones (xi >= 1) are dropped (sec. 2-3).
5. Radiation: compact monopole + dipole model (sec. 6a, transfer/low_order.py) with the listener taken into the
   body frame at each event's t0. Choice: each event's ringing radiates with the pose and propagation delay
   r/c of its own impact for its whole decay (as PAN synthesises each impulse in the pose at its t0). This is
   exact for bodies at rest between impacts and introduces no clicks from pose switches; a body that moves or
   spins far while one impact's ringing is still audible keeps that impact's radiation pattern.
6. Synthesis: exact complex one-pole stepping with the half-sine closed form (sources/modal_kernel.py); modes
   are dropped from the update once 100 dB (``mode_cutoff_db``) below their peak (sec. 8.6).
"""
from __future__ import annotations

import numpy as np

from ..contact.curvature import SurfaceCurvature
from ..contact.hertz import hertz_tau, inverse_effective_mass
from ..dynamics.events import GROUND, EventLog
from ..errors import InputError
from ..transfer import hrtf
from ..transfer.low_order import compact_basis, compact_geometry, model_moments
from .modal_kernel import synthesize

#: highest synthesised modal frequency [Hz] (modal-sound.md sec. 2: f_max = min(20 kHz, 0.45 f_s))
F_MAX_HZ = 20000.0
NYQUIST_FRACTION = 0.9
_EVENT_BLOCK = 4096


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrices (n, 3, 3) (body -> world) from unit quaternions (n, 4) (w, x, y, z)."""
    q = np.asarray(q, np.float64).reshape(-1, 4)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=1),
    ], axis=1)


def _to_body(R, c, x):
    """x_b = R^T (x - c) for R (n, 3, 3), c (n, 3), x (n, 3) or (n, L, 3)."""
    d = x - (c if x.ndim == 2 else c[:, None, :])
    return np.einsum("nji,nj->ni", R, d) if x.ndim == 2 else np.einsum("nji,nlj->nli", R, d)


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

    def __init__(self, bodies, models, ground, air, *, mode_cutoff_db: float | None = 100.0,
                 n_threads: int | None = None, transfers: dict | None = None, ears=None):
        self.bodies = list(bodies)
        names = [b.name for b in self.bodies]
        unknown = [k for k in models if k not in names]
        if unknown:
            raise InputError(f"ModalSource: modal models given for unknown objects {unknown}; objects: {names}")
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
        self._surface: dict[str, SurfaceCurvature] = {}
        self._moments: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ---- cached per-body geometry ------------------------------------------------------------------------
    def _surface_of(self, i: int) -> SurfaceCurvature:
        body = self.bodies[i]
        if body.name not in self._surface:
            model = self.models.get(body.name)
            if model is not None:
                faces = np.asarray(model.surface_faces, np.int64)
                nv = int(faces.max()) + 1
                self._surface[body.name] = SurfaceCurvature(np.asarray(model.surface_nodes)[:nv], faces)
            else:
                self._surface[body.name] = SurfaceCurvature(np.asarray(body.mesh.vertices),
                                                            np.asarray(body.mesh.faces))
        return self._surface[body.name]

    def _moments_of(self, name: str):
        if name not in self._moments:
            self._moments[name] = model_moments(self.models[name])
        return self._moments[name]

    def _pose(self, events: EventLog, idx, side_b, body: int):
        """World COM position (n, 3) and rotation (n, 3, 3) of ``body`` at the events idx (NaN -> scene pose)."""
        pos = np.where(side_b[:, None], events.pos_b[idx], events.pos_a[idx])
        quat = np.where(side_b[:, None], events.quat_b[idx], events.quat_a[idx])
        b = self.bodies[body]
        bad_p = ~np.isfinite(pos).all(axis=1)
        bad_q = ~np.isfinite(quat).all(axis=1) | (np.linalg.norm(np.nan_to_num(quat), axis=1) == 0)
        pos[bad_p] = np.asarray(b.position, np.float64)
        quat[bad_q] = np.asarray(b.quaternion, np.float64)
        return pos, quat_to_matrix(quat)

    # ---- per-event contact parameters --------------------------------------------------------------------
    def contact_parameters(self, events: EventLog, i: int):
        """For the events touching body i: (rows, x_body (n,3) surface point, face, bary, J_body (n,3),
        tau (n,) [s], R (n,3,3), c (n,3)). Public for inspection and tests."""
        rows = np.flatnonzero(events.involving(i))
        side_b = events.b[rows] == i
        sign = np.where(side_b, 1.0, -1.0)                        # b gets +J, a gets -J (sec. 7)
        pos, R = self._pose(events, rows, side_b, i)
        x_b = _to_body(R, pos, events.point[rows])
        J_b = _to_body(R, np.zeros_like(pos), sign[:, None] * events.impulse[rows])
        n_b = _to_body(R, np.zeros_like(pos), events.normal[rows])
        surf = self._surface_of(i)
        face, bary, _ = surf.closest(x_b)
        x_s = np.einsum("nk,nkc->nc", bary, surf.vertices[surf.faces[face]])
        body = self.bodies[i]
        inv_m = inverse_effective_mass(body.mass, body.inertia, x_s, n_b)
        inv_r = 1.0 / surf.radius_at(face, bary)
        inv_E = np.full(len(rows), (1.0 - body.material.nu**2) / body.material.E)
        other = np.where(side_b, events.a[rows], events.b[rows])
        for k in np.unique(other):
            sel = other == k
            if k == GROUND:                                       # plane, infinite mass
                mat = None if self.ground is None else self.ground.material
            else:
                ob = self.bodies[int(k)]
                mat = ob.material
                posk, Rk = self._pose(events, rows[sel], ~side_b[sel], int(k))
                xk = _to_body(Rk, posk, events.point[rows[sel]])
                nk = _to_body(Rk, np.zeros_like(posk), events.normal[rows[sel]])
                sk = self._surface_of(int(k))
                fk, bk, _ = sk.closest(xk)
                xks = np.einsum("nk,nkc->nc", bk, sk.vertices[sk.faces[fk]])
                inv_m[sel] += inverse_effective_mass(ob.mass, ob.inertia, xks, nk)
                inv_r[sel] += 1.0 / sk.radius_at(fk, bk)
            if mat is not None:
                inv_E[sel] += (1.0 - mat.nu**2) / mat.E
        vn = events.vn[rows]
        bad = ~(np.isfinite(vn) & (vn > 0))
        if bad.any():
            r = int(rows[np.flatnonzero(bad)[0]])
            raise InputError(f"event log row {r} (t = {events.t[r]} s): vn = {events.vn[r]} m/s gives no Hertz "
                             "contact time; drop resting contacts (vn < v_min = 5 cm/s, modal-sound.md sec. 8) "
                             "before rendering")
        tau = hertz_tau(1.0 / inv_m, 1.0 / inv_r, 1.0 / inv_E, vn)
        return rows, x_s, face, bary, J_b, tau, R, pos

    # ---- Source interface ----------------------------------------------------------------------------------
    def render(self, events: EventLog, listeners, sample_rate, duration) -> dict[str, np.ndarray]:
        """Pressure [Pa] at listeners (L, 3) world [m] for each body with a model: {name: (L, n_samples)}."""
        L_w = np.asarray(listeners, np.float64)
        if L_w.ndim != 2 or L_w.shape[1] != 3 or not np.isfinite(L_w).all():
            raise InputError(f"ModalSource.render: listeners must be a finite (L, 3) array in metres, "
                             f"got shape {L_w.shape}")
        fs = float(sample_rate)
        if not (np.isfinite(fs) and fs > 0):
            raise InputError(f"ModalSource.render: sample_rate = {sample_rate} Hz must be positive")
        if not (np.isfinite(duration) and duration >= 0):
            raise InputError(f"ModalSource.render: duration = {duration} s must be >= 0")
        n_samples = int(round(duration * fs))
        out: dict[str, np.ndarray] = {}
        for i, body in enumerate(self.bodies):
            model = self.models.get(body.name)
            if model is None:
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
            rows, x_s, face, bary, J_b, tau, R, pos = self.contact_parameters(events, i)
            xl_b = _to_body(R, pos, np.broadcast_to(L_w, (len(rows),) + L_w.shape))
            imp = np.empty((len(rows), int(keep.sum())))
            for a in range(0, len(rows), _EVENT_BLOCK):           # bounded memory: (block, m, 3)
                u = model.shapes_at(face[a:a + _EVENT_BLOCK], bary[a:a + _EVENT_BLOCK])[:, keep, :]
                imp[a:a + _EVENT_BLOCK] = np.einsum("nmc,nc->nm", u, J_b[a:a + _EVENT_BLOCK])  # I_j = u_j . J
            idx = np.flatnonzero(keep)
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
        """Modes radiated by FFAT maps, phase-correct form of modal-sound.md sec. 6d: with P_j = p_j(x) e^{-ikr}
        (e^{-i w t}), p(t) = sum_j Re(P_j) q_j(t - r/c) - Im(P_j) q_j'(t - r/c) / w_j. The per-(event, mode)
        weights fold into the modal impulses (the response is linear in them): one synthesis for the q terms and
        one for the q' terms per listener."""
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
        for l in range(L):
            for order, w in ((0, P[:, l].real), (1, -P[:, l].imag / omega[None, :])):
                geom = np.zeros((E, 1, order + 1, 1))
                geom[:, 0, order, 0] = 1.0
                out[l] += synthesize(omega, xi[modes], t0, tau, imp * w, delay[:, l:l + 1], geom, one, fs,
                                     n_samples, cutoff_db=self.mode_cutoff_db, n_threads=self.n_threads)[0]
        return out
