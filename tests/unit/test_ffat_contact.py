"""A mode radiated through an FFAT map during its contact: the pressure follows the mode's acceleration.

Reference (independent of the code under test): a compact pulsating mode (volume change V per unit modal
displacement) radiates exactly p(t) = rho V q''(t - r / c) / (4 pi r) at every frequency, so also while the
half-sine force acts. q'' comes from integrating the mode's equation q'' + 2 xi w q' + w^2 q = g(t) numerically
(scipy, tight tolerances). Its FFAT value at the mode's frequency, P = -w^2 rho V / (4 pi r) (propagation phase
removed), is what an FFAT map of that mode would store. Two contacts: a hard one (a fifth of the mode's period)
and a soft one (twenty periods: a heavy object on a soft floor), where the mode follows the force
quasi-statically and must stay nearly silent.
"""
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from impactsound.contact.stage import BodyContacts, ContactStage
from impactsound.dynamics.events import GROUND, EventLog
from impactsound.scene.model import Air, Listener
from impactsound.scene.trajectory import Trajectory
from impactsound.sources.modal import ModalSource

FS = 48000
F0 = 1000.0
XI = 1e-4
RHO = 1.2041
C = 343.2
V = 1e-4          # volume change per unit modal displacement [m^3 / (m sqrt(kg))]
J = 0.02          # modal impulse [N s / sqrt(kg)]
T0 = 0.01


def _one_mode(freqs=(F0,)):
    """A modal model of modes at ``freqs`` (damping XI), each shape a unit vector along x everywhere."""
    m = len(freqs)
    return SimpleNamespace(frequencies_hz=np.array(freqs, float), xi=np.full(m, XI), n_modes=m,
                           shapes_at=lambda face, bary: np.tile([[[1.0, 0.0, 0.0]]], (len(face), m, 1)))


class MonopoleMap:
    """An FFAT 'map' of compact pulsating modes at ``freqs``: P e^{ikr} as the FFAT evaluation returns it."""

    inner_radius = 0.01

    def __init__(self, freqs=(F0,)):
        self.w = 2 * np.pi * np.array(freqs, float)
        self.n_modes = len(freqs)
        self.bank = SimpleNamespace(k=self.w / C)

    def evaluate(self, x, modes):
        r = np.linalg.norm(x, axis=-1)[:, None]
        w, k = self.w[modes], self.bank.k[modes]
        return -w**2 * RHO * V / (4 * np.pi * r) * np.exp(1j * k * r)


def _render(tau, follow, freqs=(F0,), ear=None, drift=0.0):
    x0 = np.zeros(3)
    q0 = np.array([1.0, 0, 0, 0])
    mic = np.array([0.6, -0.3, 0.4])
    ev = EventLog(t=[T0], a=[GROUND], b=[0], point=x0[None], normal=np.array([[1.0, 0, 0]]),
                  impulse=np.array([[J, 0, 0]]), vn=[1.0], pos_b=x0[None], quat_b=q0[None], body_names=["obj"])
    bc = BodyContacts(0, np.array([0]), np.array([True]), x0[None], np.eye(3)[None], np.zeros((1, 3)),
                      np.zeros(1, np.int64), np.full((1, 3), 1 / 3), np.array([[J, 0, 0]]),
                      np.array([[1.0, 0, 0]]), np.array([tau]))
    traj = Trajectory(np.zeros(1), x0[None], q0[None])
    if drift:                                      # a body that creeps along x: the moving renderer's path
        traj = Trajectory(np.array([0.0, 1.0]), np.array([x0, x0 + [drift, 0, 0]]), np.stack([q0, q0]))
    lis = Listener("ear", mic, ear=None if ear is None else np.asarray(ear, float))
    src = ModalSource([SimpleNamespace(name="obj")], {"obj": _one_mode(freqs)}, None, Air(C, RHO),
                      mode_cutoff_db=None, n_threads=1, transfers={"obj": MonopoleMap(freqs)}, motion={0: traj},
                      listeners=[lis], follow=follow, ears=None if ear is None else np.asarray(ear, float)[None])
    n = int(0.06 * FS)
    p = src.render(ev, mic[None], FS, n / FS, contacts=ContactStage(ev, {0: bc}))["obj"][0]
    return p, np.linalg.norm(mic)


def _reference(tau, r, n):
    """rho V q''(t - r / c) / (4 pi r) and the displacement form -w^2 rho V q / (4 pi r), q by numerical
    integration of the forced mode (half-sine of impulse J over tau)."""
    w = 2 * np.pi * F0
    G = np.pi * J / (2 * tau)

    def g(u):
        return np.where((u >= 0) & (u < tau), G * np.sin(np.pi * np.clip(u, 0, tau) / tau), 0.0)

    def rhs(u, y):
        return [y[1], g(u) - 2 * XI * w * y[1] - w**2 * y[0]]

    u = np.arange(n) / FS - T0 - r / C
    q, qd = np.zeros(n), np.zeros(n)
    # the contact in short steps (the half-sine's kink at its ends), then the free ring
    on = (u >= 0) & (u < tau)
    a = solve_ivp(rhs, (0.0, tau), [0.0, 0.0], t_eval=u[on], rtol=1e-11, atol=1e-16, method="DOP853",
                  max_step=tau / 40, dense_output=True)
    q[on], qd[on] = a.y
    off = u >= tau
    b = solve_ivp(rhs, (tau, u.max()), a.sol(tau), t_eval=u[off], rtol=1e-11, atol=1e-16, method="DOP853")
    q[off], qd[off] = b.y
    qdd = g(u) - 2 * XI * w * qd - w**2 * q
    k = RHO * V / (4 * np.pi * r)
    return k * qdd, -w**2 * k * q


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("periods", [0.2, 20.0])
def test_ffat_mode_radiates_its_acceleration_during_contact(periods, follow):
    tau = periods / F0
    p, r = _render(tau, follow, drift=1e-4 if follow else 0.0)     # follow: a creeping body, the moving renderer
    ref, displacement_form = _reference(tau, r, len(p))
    # the FFAT weights are exact at the mode's frequency; the free ring's damping puts O(xi) = 1e-4 on top
    assert np.abs(p - ref).max() < 2e-3 * np.abs(ref).max()
    if periods > 1:
        # the soft contact: the mode follows the force and is nearly silent. The displacement form
        # Re(P) q - Im(P) q' / w, exact for the free ring, would radiate the static dent as if it rang at w
        contact = (np.arange(len(p)) / FS > T0 + r / C) & (np.arange(len(p)) / FS < T0 + r / C + tau)
        assert np.abs(displacement_form[contact]).max() > 10 * np.abs(ref).max()


def test_binaural_ffat_contact_samples_are_shadowed_once():
    # regression: with exactly four FFAT modes the moving renderer took their contact weights for the compact
    # model's four features and applied the head shadow a second time. The render is linear in the modes: four
    # modes together must equal the four rendered one by one (each alone was always right)
    freqs = (900.0, 1300.0, 2100.0, 3400.0)
    ear = (0.0, 1.0, 0.0)
    tau = 2.0 / freqs[0]                                       # long enough that the contact samples matter
    together, _ = _render(tau, True, freqs, ear, drift=1e-4)
    alone = sum(_render(tau, True, (f,), ear, drift=1e-4)[0] for f in freqs)
    assert np.abs(together - alone).max() < 1e-9 * np.abs(alone).max()
