"""``impactsound ground compare``: the ground's sound against the ball's for one drop, laid out like Qu & James 2019
("Ground sound", DAFx), Table 1 (sources/ground/compare.py).

Registered on the command group in cli.py with ``cli.add_command(ground)``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from .errors import InputError

_SCALARS = ("t_c_s", "contact_radius_m", "cs_eps_m", "c_s_m_s", "impulse_Ns", "eps_s", "impact_speed_m_s",
            "mass_kg", "ground_peak_pa", "ball_peak_pa", "intensity_ratio")


@click.group("ground")
def ground():
    """Ground sound (Qu & James 2019): the floor's own emission under an impact, from an elastic half-space."""


def _solid(which: str, name_option: str, name, E, nu, rho, default: str):
    """A material from --<which>-material NAME or from --<which>-E/-nu/-rho (not both), and how compare() should
    name its constants in messages."""
    from .materials import get_material
    consts = {f"--{which}-E": E, f"--{which}-nu": nu, f"--{which}-rho": rho}
    given = [k for k, v in consts.items() if v is not None]
    if name is not None and given:
        raise InputError(f"give either {name_option} NAME or {'/'.join(consts)}, not both (got {name_option} "
                         f"{name} and {', '.join(given)})")
    if given:
        missing = [k for k, v in consts.items() if v is None]
        if missing:
            raise InputError(f"give all of --{which}-E PA --{which}-nu X --{which}-rho KG_M3 (missing "
                             f"{', '.join(missing)})")
        mat = SimpleNamespace(name="custom", E=float(E), nu=float(nu), rho=float(rho))
        return mat, {f"{which}.{k}": f"--{which}-{k}" for k in ("E", "nu", "rho")}
    key = default if name is None else name
    mat = get_material(key, where=name_option)
    return mat, {f"{which}.{k}": f"{name_option} {key} ({k})" for k in ("E", "nu", "rho")}


def _listener(text: str) -> tuple[float, float, float]:
    try:
        xyz = tuple(float(v) for v in text.split(","))
    except ValueError:
        xyz = ()
    if len(xyz) != 3 or not all(math.isfinite(v) for v in xyz):
        raise InputError(f"--listener {text!r}: give x,y,z in metres (z up, impact at the origin), e.g. 0,0,0.2")
    return xyz


def _table(ball, ground_mat, radius, drop, restitution, listener, res) -> str:
    """The result laid out like Qu & James 2019, Table 1 (one quantity a line, with units)."""
    def solid(m):
        return f"{m.name}: E {m.E / 1e9:.4g} GPa, nu {m.nu:.3g}, rho {m.rho:.5g} kg/m^3"
    db = 10 * math.log10(res["intensity_ratio"]) if res["intensity_ratio"] > 0 else float("-inf")
    rows = [
        ("ball", f"{solid(ball)}; radius {radius:g} m, mass {res['mass_kg']:.4g} kg"),
        ("ground", solid(ground_mat)),
        ("drop height", f"{drop:g} m (impact speed {res['impact_speed_m_s']:.4g} m/s)"),
        ("restitution e", f"{restitution:g} (impulse J = (1 + e) m v = {res['impulse_Ns']:.4g} N s)"),
        ("impact point", "(0, 0, 0) m"),
        ("listener", "(" + ", ".join(f"{v:g}" for v in listener) + ") m"),
        ("c_s", f"{res['c_s_m_s']:.4g} m/s (ground shear-wave speed)"),
        ("t_c", f"{res['t_c_s']:.4e} s (contact time; eps = t_c/4 = {res['eps_s']:.4e} s)"),
        ("contact radius", f"{res['contact_radius_m']:.4e} m"),
        ("c_s eps", f"{res['cs_eps_m']:.4e} m"),
        ("peak pressure", f"ground {res['ground_peak_pa']:.4g} Pa, ball {res['ball_peak_pa']:.4g} Pa (max |p|)"),
        ("intensity ratio", f"{res['intensity_ratio']:.4g} ({db:.2f} dB; ground/ball, int p^2 dt)"),
    ]
    head = "ground compare (laid out like Qu & James 2019, Table 1)"
    return "\n".join([head] + [f"  {k:<17s}{v}" for k, v in rows]) + "\n"


def _png(path: Path, res: dict, title: str) -> Path:
    """Both waveforms (top) and both amplitude spectra (bottom) in one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = res["time_s"]
    dt = t[1] - t[0]
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(9, 7))
    nfft = 1 << max(12, int(len(t) - 1).bit_length() + 2)
    f = np.fft.rfftfreq(nfft, dt)
    for key, label, colour in (("p_ground_pa", "ground", "tab:brown"), ("p_ball_pa", "ball", "tab:blue")):
        ax0.plot(t * 1e3, res[key], color=colour, lw=1, label=label)
        spec = np.abs(np.fft.rfft(res[key], nfft)) * dt                   # [Pa s] = [Pa/Hz]
        ax1.plot(f / 1e3, 20 * np.log10(np.maximum(spec, 1e-30) / 20e-6), color=colour, lw=1, label=label)
    ax0.set_xlabel("time after the contact starts [ms]")
    ax0.set_ylabel("pressure [Pa]")
    ax0.set_title(title)
    ax0.legend()
    ax1.axvline(20, color="0.5", ls="--", lw=0.8)
    ax1.set_xlabel("frequency [kHz] (dashed: 20 kHz)")
    ax1.set_ylabel("|P(f)| [dB re 20 uPa/Hz]")
    top = max(ax1.get_ylim()[1], -100)
    ax1.set_ylim(top - 100, top)
    ax1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@ground.command("compare")
@click.option("--ball-material", default=None, metavar="NAME",
              help="Ball material name (see `impactsound materials`); default steel. Or give --ball-E/--ball-nu/"
                   "--ball-rho.")
@click.option("--ball-E", "ball_E", type=float, help="Ball Young's modulus [Pa] (with --ball-nu, --ball-rho).")
@click.option("--ball-nu", "ball_nu", type=float, help="Ball Poisson's ratio, in (0, 0.5).")
@click.option("--ball-rho", "ball_rho", type=float, help="Ball density [kg/m^3].")
@click.option("--radius", type=float, default=0.01, show_default=True, help="Ball radius [m].")
@click.option("--drop", type=float, default=0.15, show_default=True, help="Drop height [m].")
@click.option("--ground", "ground_material", default=None, metavar="NAME",
              help="Ground material name; default mdf. Or give --ground-E/--ground-nu/--ground-rho.")
@click.option("--ground-E", "ground_E", type=float, help="Ground Young's modulus [Pa] (with --ground-nu, "
                                                           "--ground-rho).")
@click.option("--ground-nu", "ground_nu", type=float, help="Ground Poisson's ratio, in (0, 0.5).")
@click.option("--ground-rho", "ground_rho", type=float, help="Ground density [kg/m^3].")
@click.option("--listener", default="0,0,0.2", show_default=True,
              help="Listener x,y,z [m], z up, the impact at the origin (off the axis costs ~100x more time).")
@click.option("--restitution", type=float, default=0.5, show_default=True,
              help="Coefficient of restitution e in [0, 1]; impulse J = (1 + e) m v.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the numbers (and the waveforms time_s, p_ground_pa, p_ball_pa) as JSON.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
              help="Plot both waveforms and both spectra to this PNG.")
def ground_compare(ball_material, ball_E, ball_nu, ball_rho, radius, drop, ground_material, ground_E, ground_nu,
                   ground_rho, listener, restitution, as_json, png):
    """Compare the ground's sound with the ball's for one ball drop (Qu & James 2019, Table 1).

    The paper's Table-1 case (stainless ball on MDF, c_s = 2422 m/s): --ball-E 200e9 --ball-nu 0.3 --ball-rho 8000
    --ground-E 10e9 --ground-nu 0.3 --ground-rho 655.7 (the constants that reproduce its t_c and contact radius).
    """
    from .sources.ground.compare import compare
    ball, ball_names = _solid("ball", "--ball-material", ball_material, ball_E, ball_nu, ball_rho, "steel")
    gmat, ground_names = _solid("ground", "--ground", ground_material, ground_E, ground_nu, ground_rho, "mdf")
    xyz = _listener(listener)
    names = {"radius": "--radius", "drop": "--drop", "listener": "--listener", "restitution": "--restitution",
             **ball_names, **ground_names}
    res = compare(ball, radius, drop, gmat, listener=xyz, restitution=restitution, names=names)
    if png is not None:
        _png(png, res, f"{ball.name} ball (radius {radius:g} m) dropped {drop:g} m on {gmat.name}; listener "
                       f"({', '.join(f'{v:g}' for v in xyz)}) m")
    if as_json:
        out = {"ball": {"name": ball.name, "E": ball.E, "nu": ball.nu, "rho": ball.rho, "radius_m": radius},
               "ground": {"name": gmat.name, "E": gmat.E, "nu": gmat.nu, "rho": gmat.rho},
               "drop_m": drop, "restitution": restitution, "listener_m": list(xyz), "kernel": "K4",
               **{k: float(res[k]) for k in _SCALARS}}
        waves = ",\n".join(f" {json.dumps(k)}: {json.dumps([float(v) for v in res[k]])}"   # one line each
                            for k in ("time_s", "p_ground_pa", "p_ball_pa"))
        click.echo(json.dumps(out, indent=1)[:-2] + ",\n" + waves + "\n}")
        if png is not None:
            click.echo(f"wrote {png}", err=True)
        return
    click.echo(_table(ball, gmat, radius, drop, restitution, xyz, res), nl=False)
    if png is not None:
        click.echo(f"wrote {png}")

