"""Radiation that follows moving bodies and listeners, against analytic moving-source solutions.

References (independent of the code under test):
- a monopole moving uniformly past a fixed microphone: p = (1/4 pi) d/dt [ m'(T) / (R (1 - M_r)) ] with the mass
  flux m = rho V q'(T) of a pulsating compact body, T the retarded time (Lowson 1965; Dowling & Ffowcs Williams
  1983, ch. 9), evaluated here by root finding and a numerical time derivative;
- a dipole spinning about a fixed centre: p = (rho / 4 pi) e_r . [ g'(T) / (c r) + g(T) / r^2 ], g = R(T) D q''(T),
  the exact field of a time-varying point force, including the rotation term R' D q'' that the quasi-static model
  neglects (relative size rotation rate / modal frequency);
- bodies at rest: the frozen (per-impact) renderer, which the moving one must reproduce to round-off.
The modal displacement of a short impact is the impulse response q(u) = (I / w_d) e^{-sigma u} sin(w_d u)
(contact time 1 us, so the half-sine differs from an impulse by O((w tau)^2) ~ 1e-5).
"""
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import brentq

from impactsound.contact.stage import BodyContacts, ContactStage
from impactsound.dynamics.events import GROUND, EventLog
from impactsound.errors import InputError
from impactsound.scene.model import Air, Listener
from impactsound.scene.trajectory import Trajectory, parse_trajectory
from impactsound.sources.modal import ModalSource
from impactsound.transfer.motion import retarded_geometry

FS = 48000
F0 = 1000.0
XI = 0.002
RHO = 1.2041
C = 343.2
TAU = 1e-6
J = 0.02          # modal impulse [N s / sqrt(kg)] (unit mode shape along x)


class OneMode:
    """A one-mode modal model: frequency F0, damping XI, unit shape along the body's x axis everywhere."""

    frequencies_hz = np.array([F0])
    xi = np.array([XI])
    n_modes = 1

    def shapes_at(self, face, bary):
        u = np.zeros((len(face), 1, 3))
        u[:, 0, 0] = 1.0
        return u


def _source(V, D, traj, listeners, t0=0.01, follow=True):
    """A ModalSource of one compact body (monopole moment V, dipole moment D) struck once at t0, its contact stage,
    and the event log."""
    body = SimpleNamespace(name="obj")
    q0 = traj.quaternion_at(np.array([t0]))[0]
    x0 = traj.position_at(np.array([t0]))[0]
    from impactsound.rotation import quat_to_matrix
    R = quat_to_matrix(q0)
    ev = EventLog(t=[t0], a=[GROUND], b=[0], point=x0[None], normal=np.array([[1.0, 0, 0]]),
                  impulse=np.array([[J, 0, 0]]), vn=[1.0], pos_b=x0[None], quat_b=q0[None], body_names=["obj"])
    bc = BodyContacts(0, np.array([0]), np.array([True]), x0[None], R, np.zeros((1, 3)), np.zeros(1, np.int64),
                      np.full((1, 3), 1 / 3), (R[0].T @ np.array([J, 0, 0]))[None], np.array([[1.0, 0, 0]]),
                      np.array([TAU]))
    src = ModalSource([body], {"obj": OneMode()}, None, Air(C, RHO), mode_cutoff_db=None, n_threads=1,
                      motion={0: traj}, listeners=listeners, follow=follow)
    src._moments["obj"] = (np.array([V], float), np.array([D], float))
    return src, ev, ContactStage(ev, {0: bc})


def _q(u, der=0):
    """Analytic impulse response of the mode and its derivatives (u < 0: zero)."""
    w = 2 * np.pi * F0
    sig, wd = XI * w, w * np.sqrt(1 - XI**2)
    z = (J / wd) * np.exp((-sig + 1j * wd) * np.maximum(u, 0)) * (-sig + 1j * wd) ** der
    return np.where(u >= 0, z.imag, 0.0)


def test_moving_monopole_matches_the_moving_source_solution():
    # a 1 kHz pulsating body passes 1 m from a microphone at 20 m/s (M = 0.058: a 6 % Doppler shift each way)
    v = 20.0
    V = 1e-4
    traj = Trajectory(np.array([0.0, 0.2]), np.array([[-2.0, 0, 0], [-2.0 + 0.2 * v, 0, 0]]),
                      np.tile([1.0, 0, 0, 0], (2, 1)))
    mic = np.array([0.0, 1.0, 0.0])
    n = int(0.2 * FS)
    src, ev, stage = _source(V, np.zeros(3), traj, [Listener("mic", mic)])
    p = src.render(ev, mic[None], FS, n / FS, contacts=stage)["obj"][0]
    t = np.arange(n) / FS

    def F(tt):
        T = brentq(lambda T: tt - T - np.linalg.norm(mic - traj.position_at(np.array([T]))[0]) / C, -1, tt)
        X = traj.position_at(np.array([T]))[0]
        Rv = mic - X
        R = np.linalg.norm(Rv)
        Mr = traj.velocity_at(np.array([T]))[0] @ Rv / R / C
        return RHO * V * _q(np.array([T - 0.01]), 1)[0] / (R * (1 - Mr))

    sel = np.arange(int(0.03 * FS), n - 10, 7)                # after the first arrival, every 7th sample
    h = 1e-6
    ref = np.array([(F(t[k] + h) - F(t[k] - h)) / (2 * h) for k in sel]) / (4 * np.pi)
    err = np.sqrt(np.mean((p[sel] - ref) ** 2) / np.mean(ref**2))
    # neglected: the near-field part of the moving monopole, O(M / (k R)) ~ 0.3 % here
    assert err < 0.01, err
    # the frozen renderer (the pose and delay of the impact for the whole ring) misses the Doppler shift entirely
    src_f, _, _ = _source(V, np.zeros(3), traj, [Listener("mic", mic)], follow=False)
    p_f = src_f.render(ev, mic[None], FS, n / FS, contacts=stage)["obj"][0]
    err_f = np.sqrt(np.mean((p_f[sel] - ref) ** 2) / np.mean(ref**2))
    assert err_f > 0.5, err_f


def test_spinning_dipole_amplitude_modulation():
    # a dipole (moment along body x) spinning about z at 5 Hz, heard 2 m away along world x: the 1 kHz ring is
    # modulated by cos(Omega T); exact rotating-force field as reference (module docstring)
    Om = 2 * np.pi * 5.0
    D = 1e-5
    tt = np.linspace(0, 0.6, 601)
    ang = Om * tt
    quat = np.stack([np.cos(ang / 2), 0 * ang, 0 * ang, np.sin(ang / 2)], axis=1)
    traj = Trajectory(tt, np.zeros((len(tt), 3)), quat)
    mic = np.array([2.0, 0.0, 0.0])
    n = int(0.5 * FS)
    src, ev, stage = _source(0.0, [D, 0, 0], traj, [Listener("mic", mic)], t0=0.0)
    p = src.render(ev, mic[None], FS, n / FS, contacts=stage)["obj"][0]
    t = np.arange(n) / FS
    r = 2.0
    T = t - r / C
    # e_r . g with g = (cos Om T, sin Om T, 0) D q''(T): only the x component reaches the microphone on the x axis
    g = np.cos(Om * T) * D * _q(T, 2)
    dg = (-Om * np.sin(Om * T) * _q(T, 2) + np.cos(Om * T) * _q(T, 3)) * D
    ref = RHO / (4 * np.pi) * (dg / (C * r) + g / r**2)
    sel = t > r / C + 1e-3
    err = np.sqrt(np.mean((p[sel] - ref[sel]) ** 2) / np.mean(ref[sel] ** 2))
    # neglected by the quasi-static directivity: the rotation term, Omega / omega = 0.5 % of the field
    assert err < 0.015, err
    # the envelope really is |cos(Omega T)|: near-silence a quarter turn after the strike
    quarter = (np.abs(T - 0.05) < 2e-3)
    assert np.abs(p[quarter]).max() < 0.05 * np.abs(p[sel]).max()


@pytest.mark.parametrize("binaural", [False, True])
def test_bodies_at_rest_give_the_frozen_samples(binaural):
    # a body at rest and a fixed listener: the moving renderer must equal the frozen one to round-off
    traj = Trajectory(np.zeros(1), np.array([[0.1, 0.2, 0.3]]), np.array([[0.9, 0.1, -0.3, 0.2]]))
    ear = np.array([0.0, 1.0, 0.0]) if binaural else None
    mic = Listener("mic", np.array([0.7, -0.4, 0.5]), ear=ear)
    n = int(0.3 * FS)
    src, ev, stage = _source(2e-5, [3e-6, -1e-6, 2e-6], traj, [mic], follow=False)
    src.ears = None if ear is None else ear[None]
    ref = src.render(ev, mic.position[None], FS, n / FS, contacts=stage)["obj"]
    bc = stage.of(0)
    y = src._render_moving("obj", OneMode(), np.array([0]), bc, ev.t, bc.impulse[:, :1], traj,
                           mic.position[None], FS, n)
    assert np.abs(y - ref).max() <= 1e-6 * np.abs(ref).max()


def test_retarded_geometry_of_uniform_motion():
    # closed form for uniform motion X = X0 + v t: emission time from the quadratic |x - X0 - v T| = c (t - T)
    v = np.array([30.0, 5.0, 0.0])
    X0 = np.array([-1.0, 0.5, 0.2])
    traj = Trajectory(np.array([-1.0, 1.0]), np.stack([X0 - v, X0 + v]), np.tile([1.0, 0, 0, 0], (2, 1)))
    t = np.linspace(0.0, 0.5, 11)
    x = np.array([0.3, -0.8, 1.0])
    geo = retarded_geometry(traj, t, np.broadcast_to(x, (len(t), 1, 3)), C)
    a = v @ v - C**2
    for k, tk in enumerate(t):
        w = x - X0                      # |w - v T|^2 = c^2 (t - T)^2
        b = -2 * (w @ v) + 2 * C**2 * tk
        cc = w @ w - C**2 * tk**2
        T = (-b + np.sqrt(b * b - 4 * a * cc)) / (2 * a)
        T = min(T, (-b - np.sqrt(b * b - 4 * a * cc)) / (2 * a)) if T > tk else T
        assert abs(geo.T[k, 0] - T) < 1e-12
        R = x - X0 - v * T
        Mr = v @ R / np.linalg.norm(R) / C
        assert abs(geo.amplification[k, 0] - (1 - Mr) ** -2) < 1e-9


def test_compiled_pose_agrees_with_the_trajectory():
    # the compiled retarded pose (linear positions, slerp orientations) must be what the trajectory's own
    # interpolation gives at the emission time it returns, and that time must solve T = t - |x_l - X(T)| / c;
    # frames before, inside and after the recorded span, a body tumbling about a changing axis
    from impactsound.rotation import quat_to_matrix
    rng = np.random.default_rng(3)
    tb = np.linspace(0.1, 0.9, 40) + rng.uniform(-5e-3, 5e-3, 40)
    q = rng.normal(size=(40, 4))                                  # tumbling: a new axis every segment
    traj = Trajectory(tb, np.cumsum(rng.normal(size=(40, 3)) * 0.2, axis=0), q)   # ~10 m/s
    t = np.linspace(0.0, 1.0, 301)
    xl = rng.normal(size=(301, 2, 3)) + np.array([0.0, 0.0, 2.0])
    geo = retarded_geometry(traj, t, xl, C)
    T = geo.T
    X = traj.position_at(T)
    assert np.abs(T - (t[:, None] - np.linalg.norm(xl - X, axis=-1) / C)).max() < 1e-12
    R = quat_to_matrix(traj.quaternion_at(T).reshape(-1, 4)).reshape(301, 2, 3, 3)
    assert np.abs(geo.x_body - np.einsum("klji,klj->kli", R, xl - X)).max() < 1e-12
    assert np.abs(geo.source - X).max() < 1e-12
    rel = xl - X
    m_r = np.einsum("kli,kli->kl", traj.velocity_at(T), rel) / np.linalg.norm(rel, axis=-1) / C
    assert np.abs(geo.amplification - (1 - m_r) ** -2).max() < 1e-12
    assert np.any(geo.amplification != 1.0) and np.any(geo.amplification == 1.0)   # moving and held frames


def test_trajectory_errors_name_the_field():
    with pytest.raises(InputError, match=r"listener\[0\]\.trajectory.*increase strictly.*row 2"):
        parse_trajectory([[0, 0, 0, 1], [1, 0, 0, 1], [1, 1, 0, 1]], "s.toml: listener[0].trajectory")
    with pytest.raises(InputError, match="row 1.*NaN"):
        parse_trajectory([[0, 0, 0, 1], [1, float("nan"), 0, 1]], "s.toml: listener[0].trajectory")
    with pytest.raises(InputError, match="rows of 4 numbers"):
        parse_trajectory([[0, 0, 1], [1, 0, 1]], "s.toml: listener[0].trajectory")
    with pytest.raises(InputError, match="interpolation"):
        parse_trajectory([[0, 0, 0, 1]], "x", interpolation="cubic")


def test_trajectory_interpolation():
    tr = Trajectory(np.array([0.0, 1.0, 2.0]), np.array([[0.0, 0, 0], [1.0, 0, 0], [1.0, 1.0, 0]]),
                    np.array([[1.0, 0, 0, 0], [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)],
                              [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)]]))
    assert np.allclose(tr.position_at(np.array([0.5, 1.5, 3.0])), [[0.5, 0, 0], [1.0, 0.5, 0], [1.0, 1.0, 0]])
    q = tr.quaternion_at(np.array([0.5]))[0]                 # half of a 90 degree turn about z: 45 degrees
    assert np.allclose(q, [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)])
    sp = Trajectory(tr.t, tr.position, None, "spline")
    assert np.allclose(sp.position_at(tr.t), tr.position)
    assert np.allclose(tr.velocity_at(np.array([0.5, 1.5, 5.0])), [[1, 0, 0], [0, 1, 0], [0, 0, 0]])


def test_factored_weights_give_the_dense_samples():
    # the compact model's weights handed to the kernel as seven factors per frame (formed inside the kernel) must
    # give the samples of the full (frames x listeners x modes) weight array: many modes in several chunks, two
    # listeners, a body moving and spinning, extra damping switching on mid-ring
    from impactsound.sources.modal_moving import FactoredWeights, synthesize_moving
    from impactsound.transfer.low_order import compact_basis, compact_geometry, compact_weight_factors, \
        compact_weights
    from impactsound.transfer.motion import control_hop
    rng = np.random.default_rng(3)
    m, E, n = 150, 6, int(0.25 * FS)
    w = 2 * np.pi * np.sort(rng.uniform(100.0, 15000.0, m))
    xi = 0.5 * (2.0 / w + 3e-7 * w)
    s = -xi * w + 1j * w * np.sqrt(1 - xi**2)
    t0 = np.sort(rng.uniform(0.0, 0.15, E))
    tau = rng.uniform(3e-5, 2e-4, E)
    imp = rng.normal(size=(E, m)) * 1e-3
    V, D = rng.normal(size=m) * 1e-5, rng.normal(size=(m, 3)) * 1e-6
    tt = np.linspace(0, 0.3, 31)
    traj = Trajectory(tt, np.stack([-0.5 + 2 * tt, 0 * tt, 0.1 + 0 * tt], 1),
                      np.stack([np.cos(5 * tt), np.sin(5 * tt), 0 * tt, 0 * tt], 1))
    H = control_hop(FS)
    K = -(-n // H) + 2
    tk = np.arange(K) * (H / FS)
    xl = np.broadcast_to(np.array([[0.3, -1.0, 1.2], [-0.8, 0.6, 1.0]]), (K, 2, 3))
    geo = retarded_geometry(traj, tk, xl, C)
    geom_e, _ = compact_geometry(geo.x_body[np.minimum((t0 * FS / H).astype(int), K - 1)], C, RHO)

    def dense(frames):
        return compact_weights(geo.x_body[frames], s, V, D, C, RHO, geo.amplification[frames])

    def factored(frames):
        return FactoredWeights(*compact_weight_factors(geo.x_body[frames], s, V, D, C, RHO,
                                                       geo.amplification[frames]))

    def damping(frames):
        return np.where(frames[:, None] * H > 0.1 * FS, 30.0, 0.0) * np.ones(m)

    args = (w, xi, t0, tau, imp, geo.delay)
    for damp in (None, damping):
        a = synthesize_moving(*args, dense, H, geom_e, compact_basis(V, D), FS, n, cutoff_db=80.0, damping=damp)
        b = synthesize_moving(*args, factored, H, geom_e, compact_basis(V, D), FS, n, cutoff_db=80.0, damping=damp)
        assert np.abs(a).max() > 0
        assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()
