"""Resting contact damping: the switch in the synthesis kernel against the analytic envelope, the dashpot against
its published formulas, and a bowl lying on the floor whose lowest mode decays at the predicted rate.

References: a damped mode whose decay rate steps by e(T) decays as its free ring times exp(-int e dT) (exact for a
real extra rate); Lysmer & Richart 1966 (vertical dashpot of a disc on a half-space, 3.4 a^2 rho c_s / (1 - nu));
Johnson 1985, eq. 4.22 (Hertz patch radius).
"""
import numpy as np
import pytest

from impactsound.materials import get_material
from impactsound.sources.modal_moving import synthesize_moving
from impactsound.sources.resting import RAMP_S, contact_dashpot, ramp, shear_speed

FS = 48000


def test_damping_switch_matches_the_analytic_envelope():
    n, H = FS, 48
    K = -(-n // H) + 2
    om, xi = np.array([2 * np.pi * 500.0]), np.array([0.001])
    d = 0.002
    dl = np.full((K, 1), d)
    geom = np.ones((1, 1, 1, 1))

    def weights(fr):
        return np.ones((len(fr), 1, 1)), np.zeros((len(fr), 1, 1))

    rest = type("R", (), {"t0": 0.3, "t1": 0.6})()
    extra = 20.0

    def damping(fr):           # evaluated at each frame's emission time (mid-frame)
        return extra * ramp(fr * H / FS - d + 0.5 * H / FS, [rest]).T

    args = (om, xi, np.array([0.01]), np.array([1e-6]), np.array([[1.0]]), dl, weights, H, geom, np.ones((1, 1)),
            FS, n)
    free = synthesize_moving(*args)[0]
    damped = synthesize_moving(*args, damping=damping)[0]
    T = np.arange(n) / FS - d
    tt = np.linspace(0, 1, 200001)
    r = ramp(tt, [rest])[0]
    cum = np.concatenate([[0], np.cumsum(0.5 * (r[1:] + r[:-1]) * np.diff(tt))])
    ref = free * np.exp(-extra * np.interp(T, tt, cum))
    assert np.abs(damped - ref).max() < 3e-4 * np.abs(free).max()      # per-frame steps of the 10 ms ramp
    # outside the stretch it is the free ring, bit for bit before it
    before = T < rest.t0
    assert np.array_equal(damped[before], free[before])
    # and no damping at all changes nothing
    assert np.array_equal(synthesize_moving(*args, damping=lambda fr: np.zeros((len(fr), 1))), free[None])


def test_ramp_is_smooth_and_bounded():
    rest = type("R", (), {"t0": 1.0, "t1": 2.0})()
    t = np.array([0.99, 1.0, 1.0 + RAMP_S / 2, 1.5, 2.0 - RAMP_S / 4, 2.01])
    assert np.allclose(ramp(t, [rest])[0], [0, 0, 0.5, 1, 0.25, 0])


def test_contact_dashpot_formula():
    steel, conc = get_material("steel"), get_material("concrete")
    F, R = 2.0, 0.01
    e_star = 1 / ((1 - steel.nu**2) / steel.E + (1 - conc.nu**2) / conc.E)
    a = (3 * F * R / (4 * e_star)) ** (1 / 3)
    c_s = np.sqrt(conc.E / (2 * conc.rho * (1 + conc.nu)))
    assert shear_speed(conc) == pytest.approx(c_s)
    assert contact_dashpot(F, R, steel, conc) == pytest.approx(3.4 * a**2 * conc.rho * c_s / (1 - conc.nu))
    # heavier load, larger patch, more damping (c ~ F^(2/3)); a softer floor (larger patch) damps more too
    assert contact_dashpot(8 * F, R, steel, conc) == pytest.approx(4 * contact_dashpot(F, R, steel, conc))


def test_bowl_lying_on_the_floor_rings_shorter():
    """A ceramic bowl dropped upside down onto concrete, struck by a steel ball once it lies still: its lowest mode
    decays at sigma + Delta sigma (measured on the rendered mode), against sigma when the damping is off."""
    from impactsound.pipeline import scene_events
    from impactsound.scene import load_scene
    from impactsound.sources import modal as M
    from impactsound.sources.modal import ModalSource
    # preview quality: the coarser mesh (the physics checked is the damping of whatever the lowest mode is)
    d = {"scene": {"duration": 1.6, "sources": ["modal"], "quality": "preview"},
         "source": {"modal": {"transfer": "low_order"}},
         "ground": {"material": "concrete"},
         "object": [{"name": "bowl", "shape": "bowl", "size": {"radius": 0.07, "thickness": 0.005,
                                                                "angle_deg": 70.0},
                     "material": "ceramic", "position": [0, 0, 0.06], "euler_deg": [180, 0, 0]},
                    {"name": "ball", "shape": "sphere", "size": {"radius": 0.008}, "material": "steel",
                     "position": [0.02, 0.01, 0.9]}],
         "listener": [{"position": [0, -0.6, 0.35]}]}
    sc = load_scene(d)
    ev = scene_events(sc)
    assert 0 in ev.resting                                  # the bowl lies still after landing
    rest = ev.resting[0][0]
    strike = ev.t[((ev.a == 0) & (ev.b == 1)) | ((ev.a == 1) & (ev.b == 0))][0]
    assert rest.t0 < strike < rest.t1
    # the supports carry its weight (within the step's dynamics)
    assert rest.load.sum() == pytest.approx(sc.bodies[0].mass * 9.81, rel=0.5)
    # the lowest mode alone (the model restricted to it: the bowl's modes come in near-degenerate pairs whose beats
    # would blur a decay fit), struck once by the ball while the bowl lies still, damping on and off
    import dataclasses
    prep = M.prepare(sc)
    model = prep.models["bowl"]
    one = dataclasses.replace(model, frequencies_hz=model.frequencies_hz[:1], xi=model.xi[:1],
                              shapes=model.shapes[:1])
    hit = ev.select(((ev.a == 0) & (ev.b == 1)) | ((ev.a == 1) & (ev.b == 0)))
    hit = hit.select(hit.t == strike)
    f0, sigma = float(one.frequencies_hz[0]), float(one.xi[0] * 2 * np.pi * one.frequencies_hz[0])

    def render(resting):
        src = ModalSource(sc.bodies, {"bowl": one}, sc.ground, sc.air, motion=ev.motion, resting=resting,
                          mode_cutoff_db=None)
        return src.render(hit, [l.position for l in sc.listeners], FS, 1.6)["bowl"][0]

    on, off = render(ev.resting), render(None)
    dsig = ModalSource(sc.bodies, {"bowl": one}, sc.ground, sc.air)._rest_damping("bowl", one, np.array([0]),
                                                                                  [rest])[0, 0]
    assert dsig > 0.1 * sigma                               # a measurable effect on the lowest mode

    def decay_rate(y):
        from scipy.signal import hilbert
        env = np.abs(hilbert(y))
        t = np.arange(len(y)) / FS
        sel = (t > strike + 0.05) & (t < min(rest.t1, 1.5) - 0.05)
        return -np.polyfit(t[sel], np.log(env[sel]), 1)[0]

    assert decay_rate(off) == pytest.approx(sigma, rel=0.02)
    assert decay_rate(on) == pytest.approx(sigma + dsig, rel=0.02)
    assert f0 > 0
