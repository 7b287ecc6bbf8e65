"""``impactsound granular pulse``: one equal-sphere collision's pressure at a listener (M. Marko, "Sound simulation
of granular materials", Table 6.1 setting; sources/granular/pulse.py).

Registered on the command group in cli.py with ``cli.add_command(granular)``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np

from .errors import InputError


@click.group("granular")
def granular():
    """Granular sound: the acceleration noise of colliding grains (Marko, "Sound simulation of granular
    materials")."""


@granular.command("pulse")
@click.option("--radius", type=float, required=True, help="Grain radius [m] (both grains).")
@click.option("--v0", type=float, required=True, help="Relative normal speed [m/s].")
@click.option("--material", default=None, help="Grain material name (`impactsound materials`).")
@click.option("--E", "E", type=float, default=None, help="Young's modulus [Pa] (with --nu and --rho).")
@click.option("--nu", type=float, default=None, help="Poisson's ratio.")
@click.option("--rho", type=float, default=None, help="Density [kg/m^3].")
@click.option("--distance", type=float, default=0.15, show_default=True,
              help="Listener distance from the grain's centre [m].")
@click.option("--angle", type=float, default=0.0, show_default=True,
              help="Angle between the grain's acceleration and the listener direction [deg].")
@click.option("--scaling", type=click.Choice(["peak", "impulse"]), default="peak", show_default=True,
              help="peak: a_m = F_max/m (the thesis' choice, its Table 6.1); impulse: the half-sine carries the "
                   "elastic Delta-v (0.853 times quieter).")
@click.option("--json", "as_json", is_flag=True, help="Print peak_pa, duration_s, peak_acceleration_m_s2 as JSON.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Plot the waveform.")
def pulse(radius, v0, material, E, nu, rho, distance, angle, scaling, as_json, png):
    """One grain's pressure pulse in an equal-sphere collision (one grain of the pair, as the thesis' Table 6.1):
    Hertz contact, exact rigid-sphere radiation, air at 20 C. SI units."""
    from .constants import AIR_C, AIR_RHO
    from .materials import get_material
    from .sources.granular.pulse import hertz_contact, sphere_pressure
    given = {"--E": E, "--nu": nu, "--rho": rho}
    if material is not None and any(v is not None for v in given.values()):
        raise InputError("give either --material NAME or --E/--nu/--rho, not both")
    if material is None:
        missing = [k for k, v in given.items() if v is None]
        if missing:
            raise InputError(f"give --material NAME or all of --E PA --nu X --rho KG_M3 (missing {', '.join(missing)})")
        name = "custom"
    else:
        m = get_material(material, where="--material")
        E, nu, rho, name = m.E, m.nu, m.rho, m.name
    C = hertz_contact(v0, radius, radius, rho, rho, E, nu, E, nu, scaling=scaling)
    delay = (distance - radius) / AIR_C
    n = int(math.ceil((delay + C.d + 40.0 * radius / AIR_C) / (C.d / 400.0))) + 1     # 400 samples per d
    t = np.linspace(0.0, delay + C.d + 40.0 * radius / AIR_C, n)
    p = sphere_pressure(t, radius, C.a_m[0], C.d, distance, math.cos(math.radians(angle)), rho=AIR_RHO, c=AIR_C)
    k = int(np.argmax(np.abs(p)))
    out = {"material": name, "radius_m": radius, "v0_m_s": v0, "distance_m": distance, "angle_deg": angle,
           "scaling": scaling, "peak_pa": float(p[k]), "duration_s": C.d, "peak_acceleration_m_s2": C.a_m[0],
           "peak_force_n": C.F_max}
    if png is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot((t - delay) * 1e6, p)
        ax.set_xlabel("retarded time [us]")
        ax.set_ylabel("pressure [Pa]")
        ax.set_title(f"{name} grains, a = {radius * 1e3:g} mm, v0 = {v0:g} m/s, r = {distance:g} m, {angle:g} deg")
        fig.tight_layout()
        fig.savefig(png, dpi=120)
        plt.close(fig)
    if as_json:
        click.echo(json.dumps(out))
    else:
        click.echo(f"peak {out['peak_pa']:.5g} Pa, contact {C.d * 1e6:.5g} us, peak acceleration "
                   f"{C.a_m[0]:.5g} m/s^2, peak force {C.F_max:.4g} N")
        if png is not None:
            click.echo(str(png))
