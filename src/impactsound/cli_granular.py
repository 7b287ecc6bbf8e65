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


def _progress(obj):
    from .io.progress import QUIET
    return getattr(obj, "progress", None) or QUIET


def _event_suffix(path: Path, opt: str = "--out") -> None:
    if path.suffix.lower() not in (".npz", ".csv", ".parquet"):
        raise InputError(f"{opt} {path}: unknown extension {path.suffix or '(none)'!r}; a granular event table is "
                         ".npz, .csv or .parquet")


def _summary(ev) -> str:
    from .sources.granular.events import CONTAINER
    nc = int((ev.kind == CONTAINER).sum())
    return (f"{len(ev)} events ({len(ev) - nc} grain-grain, {nc} wall hits) over {ev.duration:.4g} s"
            + (f", v0 {ev.v0.min():.3g}-{ev.v0.max():.3g} m/s" if len(ev) else ""))


@granular.command("simulate")
@click.argument("scene_file", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The granular event table (.npz, .csv or .parquet).")
@click.pass_obj
def simulate_cmd(obj, scene_file: Path, out: Path):
    """Pour the grains of SCENE_FILE's [granular] table (events = "simulate") with the event-driven simulator and
    write every collision (docs/granular.md). Shows the simulated time and collisions per second."""
    from .scene import load_scene
    from .sources.granular.scene_events import granular_events
    _event_suffix(out)
    scene = load_scene(scene_file)
    if scene.granular is None:
        raise InputError(f"{scene_file}: no [granular] table to simulate (docs/granular.md)")
    if scene.granular.events != "simulate":
        raise InputError(f"{scene_file}: granular.events = {scene.granular.events!r}; `granular simulate` needs "
                         "events = 'simulate'")
    from .sources.granular.events import save_events
    ev = granular_events(scene, _progress(obj))
    save_events(out, ev)
    click.echo(f"{out}: {_summary(ev)}")


@granular.command("fit")
@click.argument("events_file", type=click.Path(path_type=Path))
@click.option("--window", type=float, default=0.05, show_default=True, help="Time window [s].")
@click.option("--cell", type=float, default=0.01, show_default=True,
              help="Cell edge [m] (the thesis: positions redrawn in 1 cm cells are nearly inaudible, 2 cm audible).")
@click.option("--t-bins", type=int, default=10, show_default=True, help="Time bins per window.")
@click.option("--azimuth-bins", type=int, default=16, show_default=True, help="Normal azimuth bins.")
@click.option("--polar-bins", type=int, default=8, show_default=True, help="Normal cos(polar) bins (equal area).")
@click.option("--v0-bins", type=int, default=32, show_default=True, help="Log-spaced approach-speed bins.")
@click.option("--radius-classes", type=int, default=None, help="Group a radius distribution into K classes.")
@click.option("--restitution-step", type=float, default=0.02, show_default=True,
              help="Group the restitution e into classes this wide, each its members' mean (a simulated pour's e "
                   "varies per collision; a hit's impulse (1 + e) m v0 moves by less than step / (1 + e)); 0 keeps "
                   "every distinct e.")
@click.option("--no-restitution", is_flag=True,
              help="Drop the restitution: generated hits use the scene's [granular] restitution.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The model (.h5).")
@click.pass_obj
def fit_cmd(obj, events_file: Path, window, cell, t_bins, azimuth_bins, polar_bins, v0_bins, radius_classes,
            restitution_step, no_restitution, out: Path):
    """Fit the statistical collision model (local densities per time window and cell) to EVENTS_FILE, a
    granular event table; `granular generate` draws new collisions from it."""
    from .sources.granular.events import load_events
    from .sources.granular.generator import fit_model, save_model
    ev = load_events(events_file)
    with _progress(obj).stage("fitting the collision model"):
        model = fit_model(ev, window=window, cell=cell, t_bins=t_bins, azimuth_bins=azimuth_bins,
                          polar_bins=polar_bins, v0_bins=v0_bins, radius_classes=radius_classes,
                          keep_restitution=not no_restitution,
                          restitution_step=None if restitution_step == 0 else restitution_step,
                          where=str(events_file))
    save_model(out, model)
    click.echo(f"{out}: {len(model.block_type)} window x cell blocks, {len(model.bin_count)} histogram bins, "
               f"{out.stat().st_size / 1e3:.1f} kB (from {_summary(ev)})")


@granular.command("generate")
@click.argument("model_file", type=click.Path(path_type=Path))
@click.option("--duration", type=float, default=None, help="Length [s] (default: the fitted span; longer repeats "
              "the fitted windows).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (same seed, same events).")
@click.option("--count", type=click.Choice(["poisson", "exact"]), default="poisson", show_default=True,
              help="Events per window and cell: Poisson with the fitted mean, or exactly the fitted count.")
@click.option("--extend", type=click.Choice(["cycle", "last"]), default="cycle", show_default=True,
              help="Past the fitted span: repeat all windows, or the last one.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The granular event table (.npz, .csv or .parquet).")
@click.pass_obj
def generate_cmd(obj, model_file: Path, duration, seed, count, extend, out: Path):
    """Draw a new collision table from a fitted model (without re-simulating)."""
    from .sources.granular.events import save_events
    from .sources.granular.generator import generate, load_model
    _event_suffix(out)
    model = load_model(model_file)
    ev = generate(model, duration=duration, seed=seed, count=count, extend=extend)
    save_events(out, ev)
    click.echo(f"{out}: {_summary(ev)}")


@granular.command("import")
@click.argument("log_file", type=click.Path(path_type=Path))
@click.option("--v-min", type=float, default=1e-4, show_default=True,
              help="Drop collisions slower than this [m/s] (inaudible).")
@click.option("--gap-steps", type=int, default=1, show_default=True,
              help="Steps without contact that separate two collisions of one pair.")
@click.option("--dt", type=float, default=None, help="The simulator's step [s] (default: from the log).")
@click.option("--separating", type=click.Choice(["drop", "error"]), default="drop", show_default=True,
              help="Contacts whose first record separates: drop them with a warning, or refuse the log.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The granular event table (.npz, .csv or .parquet).")
@click.pass_obj
def import_cmd(obj, log_file: Path, v_min, gap_steps, dt, separating, out: Path):
    """Turn another simulator's per-step contact log (DEM, MuJoCo, ...; .csv or .npz, columns in docs/granular.md)
    into a granular event table: one event per collision, v0 from the pre-contact velocities."""
    from .sources.granular.events import save_events
    from .sources.granular.importlog import load_contact_log
    _event_suffix(out)
    ev = load_contact_log(log_file, v_min=v_min, gap_steps=gap_steps, dt=dt, separating=separating)
    save_events(out, ev)
    click.echo(f"{out}: {_summary(ev)}")


#: the partly full cup of the pour demo: grains lying in it (3 layers) and the damping they add to its modes
POUR_FULL = {"fill": 3000, "fill_damping": 0.02}
POUR_GAP_S = 0.3


def pour_demo(out_dir: Path, progress, stems: Path | None = None) -> list[Path]:
    """The pour demo (Marko, "Sound simulation of granular materials", App. B): glass beads poured from a funnel
    into the empty ceramic cup of data/pour.toml, then into the same cup partly full (:data:`POUR_FULL`), written
    back to back (``POUR_GAP_S`` apart, one scale) to DIR/pour.wav with its spectrogram DIR/pour.png; with
    ``stems``, one WAV per source kind there (the grains' noise and the cup's ring), laid out and scaled as the
    mix."""
    import tomllib

    from .io.audio import normalisation_gain, write_wav
    from .io.plot import spectrogram_png
    from .pipeline import render_scene
    from .scene import load_scene
    from .scene.schema import demo_scene_path
    path = demo_scene_path().with_name("pour.toml")
    data = tomllib.loads(path.read_text())
    mixes, info, kinds = [], {}, []
    for name, extra in (("empty", {}), ("partly full", POUR_FULL)):
        d = {**data, "granular": {**data["granular"], **extra}}
        progress.message(f"pour demo: the {name} cup")
        res = render_scene(load_scene(d, base=path.parent), progress)
        mixes.append(res.mix)
        kinds.append({k: sum(v.values()) if v else np.zeros_like(res.mix) for k, v in res.stems.items()})
        info[name] = {"granular": res.info.get("granular"), "objects": res.info.get("objects"),
                      "peak_pa": float(abs(res.mix).max()), **extra}
    fs = data["scene"]["sample_rate"]
    gap = np.zeros((mixes[0].shape[0], int(POUR_GAP_S * fs)))
    mix = np.concatenate([mixes[0], gap, mixes[1]], axis=1)
    dur = mixes[0].shape[1] / fs
    wav = out_dir / "pour.wav"
    write_wav(wav, mix, fs, normalisation_gain(mix), {"listeners": ["mic"], "segments": {
        "empty": [0.0, dur], "partly full": [dur + POUR_GAP_S, 2 * dur + POUR_GAP_S]}, "renders": info})
    if stems is not None:
        for k in kinds[0]:
            write_wav(Path(stems) / f"{k}.wav", np.concatenate([kinds[0][k], gap, kinds[1][k]], axis=1), fs,
                      normalisation_gain(mix), {"source": k})
    png = spectrogram_png(out_dir / "pour.png", mix, fs, f"impactsound pour demo: 1 mm glass beads into a ceramic "
                          f"cup, empty (0-{dur:g} s) then partly full ({dur + POUR_GAP_S:g}-"
                          f"{2 * dur + POUR_GAP_S:g} s)")
    return [wav, png]
