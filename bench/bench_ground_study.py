"""The ground-sound paper's parameter study (Qu & James 2019, sec. 5.3, Tables 2-3, Figs. 9-11), recomputed with
`impactsound ground compare`'s model (Lamb's half-space radiated by the Rayleigh integral; the ball a compact
sphere with its image), on the axis above the impact where it costs seconds, and off it (Fig. 11) in the
frequency domain.

Every case is the paper's Table 1 drop (a 2 cm ball, 15 cm, e = 0.5, listener 20 cm overhead) with one or two
parameters changed, as the paper does. Printed, in the paper's terms:

- Table 3: the intensity ratio int p_ground^2 dt / int p_ball^2 dt [dB] for each ball material x ground material
  of the package's table (the paper's Table 2 constants are lost; its materials are the same kinds). Cells where the
  ground is within 10 dB of the ball, so not masked by it, are starred (the paper highlights such cells).
- Fig. 10: the ground's peak against its shear speed c_s at fixed shear modulus and contact time (the ground's
  density varied): linear in c_s up to a threshold set by the contact time and the listener's distance.
- Fig. 9: both peaks against the contact time (the ball's modulus varied): in the far field both follow the same
  power law, so their ratio is flat.
- The paper's scaling law: at fixed c_s, nu, t_c and geometry the ground amplitude goes as J / mu_g, so the ratio of
  intensities as (rho_b / mu_g)^2 (checked in tests/unit/test_ground_compare.py).
- Fig. 11: the ratio against the listener's elevation at 20 cm, the ground's sound off the axis from the
  frequency-domain ring integral (the time-domain one takes ~5 minutes per angle), set beside `ground compare` at
  90 degrees.

    .venv/bin/python bench/bench_ground_study.py [--quick]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from impactsound.materials import get_material, make_material
from impactsound.sources.ground.compare import compare

BALLS = ("steel", "glass", "ceramic", "granite", "polycarbonate", "wood_hard")
GROUNDS = ("concrete", "granite", "asphalt", "mdf", "wood_hard", "particle_board", "packed_soil", "sand")


def db(x):
    return 10 * math.log10(x)


def table3(balls, grounds):
    print("Table 3 (recomputed): intensity ratio ground / ball [dB], listener 20 cm overhead; * = within 10 dB")
    corner = "ball / ground"
    print(f"{corner:>14} " + " ".join(f"{g:>14}" for g in grounds))
    for b in balls:
        row = []
        for g in grounds:
            r = compare(get_material(b), 0.01, 0.15, get_material(g))
            v = db(r["intensity_ratio"])
            row.append(f"{v:13.1f}{'*' if v > -10 else ' '}")
        print(f"{b:>14} " + " ".join(row))


def fig10(scales):
    print("\nFig. 10: ground peak vs its shear speed (mu_g and t_c fixed; ground density varied), MDF of Table 1")
    base = dict(E=10e9, nu=0.3, rho=655.7)
    ball = make_material("ball", E=200e9, nu=0.3, rho=8000.0)
    ref = None
    for s in scales:
        g = make_material("g", E=base["E"], nu=base["nu"], rho=base["rho"] / s**2)     # c_s times s
        r = compare(ball, 0.01, 0.15, g)
        ref = ref or (r["c_s_m_s"], r["ground_peak_pa"])
        print(f"  c_s {r['c_s_m_s']:8.0f} m/s  t_c {r['t_c_s'] * 1e6:6.1f} us  ground peak "
              f"{r['ground_peak_pa']:8.3f} Pa  (x{r['ground_peak_pa'] / ref[1]:5.2f} for c_s "
              f"x{r['c_s_m_s'] / ref[0]:5.2f})  ball "
              f"{r['ball_peak_pa']:.3f} Pa")


def fig9(ball_moduli):
    print("\nFig. 9: both peaks vs the contact time (the ball's modulus varied), Table 1 otherwise")
    g = make_material("g", E=10e9, nu=0.3, rho=655.7)
    for E in ball_moduli:
        r = compare(make_material("ball", E=E, nu=0.3, rho=8000.0), 0.01, 0.15, g)
        print(f"  ball E {E / 1e9:6.1f} GPa  t_c {r['t_c_s'] * 1e6:6.1f} us  ground {r['ground_peak_pa']:8.3f} Pa  "
              f"ball {r['ball_peak_pa']:8.3f} Pa  ratio {db(r['intensity_ratio']):6.1f} dB")


def fig11(angles, dist=0.2):
    """Intensity ratio against the listener's elevation at the Table 1 distance. The ground's sound comes from the
    frequency-domain ring integral (sources/ground/spectrum.py, the scenes' response bank: cheap off the axis),
    its intensity by Parseval; the ball's from its closed form (sources/ground/ball.py). At 90 degrees both are
    set beside `ground compare`'s time-domain numbers."""
    from impactsound.contact.hertz import combined_modulus
    from impactsound.sources.ground.ball import ball_pressure
    from impactsound.sources.ground.bank import R_EXTRA, kernel_spectrum
    from impactsound.constants import AIR_C, AIR_RHO
    from impactsound.sources.ground.impact import HalfSpace, contact_time
    from impactsound.sources.ground.spectrum import ring_spectrum
    c_a, rho_a = AIR_C, AIR_RHO                                         # compare's defaults
    hs, ball = HalfSpace(10e9, 0.3, 655.7), HalfSpace(200e9, 0.3, 8000.0)
    b = 0.01
    m = 8000.0 * 4 / 3 * math.pi * b**3
    v = math.sqrt(2 * 9.81 * 0.15)
    J = 1.5 * m * v
    t_c = contact_time(m, b, combined_modulus(ball, hs), v)
    eps, t_m = t_c / 4, t_c / 2
    df = 10.0
    f = np.arange(1, int(12.0 / (2 * math.pi * eps) / df)) * df     # kernel spectrum down to e^-12
    print(f"\nFig. 11: intensity ratio ground / ball against elevation, {dist * 100:.0f} cm from the impact "
          f"(Table 1; ground by the frequency-domain ring integral, {len(f)} frequencies)")
    for ang in angles:
        th = math.radians(ang)
        h, off = dist * math.sin(th), dist * math.cos(th)
        near, far = ring_spectrum(f, hs, h, off, r_max=off + R_EXTRA, c_a=c_a, rho_a=rho_a)
        P = J * (near + far) * kernel_spectrum(f, eps)
        e_g = 2 * np.sum(np.abs(P) ** 2) * df                          # Parseval, both signs of f
        t = t_m + dist / c_a + np.arange(-40 * eps, 80 * eps, eps / 64)
        pb = ball_pressure(np.array([off, 0.0, h]), t, centre=(0.0, 0.0, b), impulse=J, mass=m, radius=b, eps=eps,
                           t_m=t_m, c_a=c_a, rho_a=rho_a)
        e_b = np.sum(pb**2) * (eps / 64)
        line = f"  {ang:4.0f} deg (h {h * 100:5.1f} cm): ratio {db(e_g / e_b):6.2f} dB, ball {np.abs(pb).max():.3f} Pa"
        if ang == 90:
            r = compare(make_material("b", E=200e9, nu=0.3, rho=8000.0), b, 0.15,
                        make_material("g", E=10e9, nu=0.3, rho=655.7), listener=(0.0, 0.0, dist))
            line += f"   [ground compare, time domain: {db(r['intensity_ratio']):6.2f} dB]"
        print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a few materials only")
    a = ap.parse_args()
    t0 = time.perf_counter()
    balls, grounds = (BALLS[:2], GROUNDS[::3]) if a.quick else (BALLS, GROUNDS)
    table3(balls, grounds)
    fig10((0.25, 0.5, 1.0, 2.0, 4.0) if not a.quick else (0.5, 1.0, 2.0))
    fig9((0.2e9, 1e9, 5e9, 20e9, 200e9) if not a.quick else (1e9, 200e9))
    fig11((90, 60, 45, 30, 15, 5) if not a.quick else (90, 30))
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
