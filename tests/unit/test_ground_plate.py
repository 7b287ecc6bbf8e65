"""Floors that are plates (sources/ground/plate.py; [ground] model = "plate"): the modal simply supported plate
against independent references: the infinite plate's drive-point mobility, the baffled compact monopole of its
lowest mode, and the mass-law click of a point force below coincidence; the quadrature's convergence; the scene
route and its bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.materials import get_material, make_material
from impactsound.sources.ground.plate import PlateFloor, plate_pressure, point_mobility, transfer

C, RHO_A = 343.2, 1.2041
STEEL = make_material(rho=7850.0, E=200e9, nu=0.3, alpha=0.0, beta=2e-7)


def test_band_averaged_drive_point_mobility_is_the_infinite_plates():
    """Where many modes overlap (2-8 kHz on a 1 x 0.8 m, 3 mm steel plate: ~1000 modes below 12 kHz), the
    real part of the modal drive-point mobility averages to the infinite plate's 1 / (8 sqrt(D rho h)) (Cremer,
    Heckl & Petersson 2005, ch. 5); measured within 0.15 %."""
    P = PlateFloor(1.0, 0.8, 0.003, (0.0, 0.0), STEEL)
    f = np.linspace(2000.0, 8000.0, 6001)
    Y = point_mobility(P, (0.13, 0.07), f, 12000.0)
    Y_inf = 1.0 / (8.0 * math.sqrt(P.rigidity * P.areal_mass))
    assert Y.real.mean() / Y_inf == pytest.approx(1.0, abs=0.02)


def test_lowest_mode_radiates_as_a_baffled_monopole_far_away():
    """Mode (1, 1) of a 1 x 0.8 m plate at 18 Hz (kL = 0.34) heard 20 m away: the Rayleigh transfer equals the
    baffled monopole of its net volume, (rho_a / 2 pi) int phi dA e^{-ikR} / R."""
    P = PlateFloor(1.0, 0.8, 0.003, (0.0, 0.0), STEEL)
    m, n, om = P.modes(200.0)
    x = np.array([0.3, 0.2, 20.0])
    T = transfer(P, x, m[:1], n[:1], om[:1], z0=0.0, c=C, rho_a=RHO_A)[0]
    vol = 2.0 / math.sqrt(P.areal_mass * P.length * P.width) * (2 * P.length / math.pi) * (2 * P.width / math.pi)
    R = float(np.linalg.norm(x))
    ref = RHO_A / (2 * math.pi) * vol * np.exp(-1j * om[0] / C * R) / R
    assert abs(T / ref - 1.0) < 2e-3


def test_quadrature_is_converged():
    """The Gauss-Legendre rule (4 nodes per shortest wavelength, plus 8) against twice the nodes, every mode of a
    1.8 x 0.8 m, 25 mm MDF table top below 20 kHz heard from 1.4 m: the same to 1e-8."""
    P = PlateFloor(1.8, 0.8, 0.025, (0.0, 0.0), get_material("mdf"))
    m, n, om = P.modes(20000.0)
    x = np.array([1.0, -1.0, 1.4])
    T4 = transfer(P, x, m, n, om, z0=0.4, c=C, rho_a=RHO_A)
    T8 = transfer(P, x, m, n, om, z0=0.4, c=C, rho_a=RHO_A, points_per_wavelength=8.0)
    assert np.max(np.abs(T4 - T8) / np.abs(T8)) < 1e-8


def test_click_of_a_point_force_below_coincidence_is_the_mass_law_monopole():
    """A 2 ms half-sine push of 0.01 N s on a 1 mm steel plate (coincidence 12 kHz, far above the push's band),
    heard 0.5 m overhead: while the force acts, before any bending wave returns from the edges, the plate's net
    volume acceleration is F / (rho h) (Newton's law), so p(t) = -rho_a F(t - R/c) / (2 pi rho h R) (pushed
    down: a rarefaction). The modal sum (modes below 4 kHz) gives it within 1 % rms (measured 0.3 %)."""
    P = PlateFloor(1.0, 1.0, 0.001, (0.0, 0.0), STEEL)
    fs, n, J, tau, h, t0 = 96000, 960, 0.01, 2e-3, 0.5, 1e-3
    y = plate_pressure(P, [[0.05, 0.03, h]], [t0], [tau], [J], [[0.05, 0.03]], fs, n, z0=0.0, c=C, rho_a=RHO_A,
                       f_max=4000.0)[0]
    t = np.arange(n) / fs - t0 - h / C
    w = (t > 0) & (t < tau)
    ref = -RHO_A / (2 * math.pi * P.areal_mass * h) * math.pi * J / (2 * tau) * np.sin(math.pi * t[w] / tau)
    assert np.sqrt(np.mean((y[w] - ref) ** 2)) < 0.01 * np.abs(ref).max()
    assert np.all(np.abs(y[t < -1e-4]) < 1e-3 * np.abs(ref).max())        # nothing before the sound arrives


def _scene(**ground):
    g = {"material": "mdf", "model": "plate", "plate": {"length": 1.8, "width": 0.8, "thickness": 0.025}}
    g.update(ground)
    return {"scene": {"duration": 0.4, "sources": ["ground"]}, "ground": g,
            "listener": [{"name": "mic", "position": [0.3, -0.5, 0.5]}],
            "object": [{"name": "ball", "shape": "sphere", "size": {"radius": 0.01}, "material": "steel",
                        "position": [0.2, 0.1, 0.1]}]}


def test_scene_with_a_plate_floor_renders_and_says_so():
    """A steel ball on a 25 mm MDF table-top floor: the plate's sound is finite, rings past the impact, is much
    louder than the half-space of the same material (a plate is far more mobile), and the sidecar names the
    model; the same impacts off the plate are silent, with a warning."""
    import impactsound as isnd
    from impactsound.scene import load_scene
    r = isnd.render_scene(load_scene(_scene()))
    y = r.stems["ground"]["ball"][0]
    assert np.isfinite(y).all() and r.info["ground"]["model"] == "plate"
    t_hit = float(r.events.t.min())
    late = y[int((t_hit + 0.05) * 48000):int((t_hit + 0.1) * 48000)]
    assert np.abs(late).max() > 1e-3 * np.abs(y).max()                   # it rings on after the click
    hs = isnd.render_scene(load_scene({**_scene(), "ground": {"material": "mdf"}}))
    assert np.abs(y).max() > 5 * np.abs(hs.stems["ground"]["ball"][0]).max()
    off = _scene(plate={"length": 1.8, "width": 0.8, "thickness": 0.025, "center": [5.0, 5.0]})
    import logging
    logger, seen = logging.getLogger("impactsound"), []
    handler = logging.Handler()
    handler.emit = lambda rec: seen.append(rec.getMessage())
    logger.addHandler(handler)
    try:
        r2 = isnd.render_scene(load_scene(off))
    finally:
        logger.removeHandler(handler)
    assert np.abs(r2.stems["ground"]["ball"]).max() == 0
    assert any("off the plate floor" in s for s in seen)


@pytest.mark.parametrize("ground, match", [
    ({"plate": None}, r"ground\.model = \"plate\" needs a \[ground\.plate\] table"),
    ({"model": "half_space"}, r"ground\.plate is given but ground\.model = 'half_space'"),
    ({"plate": {"length": 1.8, "width": 0.8, "thickness": 25.0}}, r"ground\.plate\.thickness = 25 m .* units"),
    ({"plate": {"length": -1.0, "width": 0.8, "thickness": 0.025}}, r"ground\.plate\.length = -1"),
])
def test_bad_plate_floors_are_refused(ground, match):
    from impactsound.scene import load_scene
    d = _scene(**ground)
    if d["ground"].get("plate") is None:
        del d["ground"]["plate"]
    with pytest.raises(InputError, match=match):
        load_scene(d)


def test_moving_listener_over_a_plate_floor_is_refused():
    import impactsound as isnd
    from impactsound.scene import load_scene
    d = _scene()
    d["listener"] = [{"name": "mic", "trajectory": [[0.0, 0.3, -0.5, 0.5], [0.4, -0.3, -0.5, 0.5]]}]
    with pytest.raises(InputError, match="fixed listeners only"):
        isnd.render_scene(load_scene(d))
