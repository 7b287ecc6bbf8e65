"""Command-line interface (thin: parses, calls the API, turns known errors into one message and exit code 2)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import traceback
import warnings
from pathlib import Path

import click
import numpy as np

from .errors import ImpactSoundError, InputError
from .io.progress import Progress


class _Ctx:
    def __init__(self, quiet: bool, debug: bool):
        self.progress = Progress(quiet=quiet)
        self.debug = debug


class _LogLines(logging.Handler):
    """Shows the library's log records on stderr, above any progress bar: INFO as the message itself, WARNING and
    above as ``warning: message``."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm
        msg = record.getMessage()
        if record.levelno >= logging.WARNING:
            msg = f"warning: {msg}"
        tqdm.write(msg, file=sys.stderr)


def _show_log(quiet: bool) -> None:
    log = logging.getLogger("impactsound")
    for h in [h for h in log.handlers if isinstance(h, _LogLines)]:
        log.removeHandler(h)
    log.addHandler(_LogLines())
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
@click.option("--debug", is_flag=True, help="Show the Python traceback on errors.")
@click.version_option(package_name="impactsound")
@click.pass_context
def cli(ctx, quiet, debug):
    """impactsound: render what a microphone hears from a rigid-body scene (SI units, 48 kHz float32 WAV)."""
    ctx.obj = _Ctx(quiet, debug)
    _show_log(quiet)


def _g(v) -> str:
    """A value for a message: numbers (NumPy scalars included) with :g, containers element-wise; never a repr such
    as ``np.float64(0.5)``."""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    if isinstance(v, np.ndarray):
        return _g(v.tolist())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_g(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_g(x)}" for k, x in v.items()) + "}"
    return str(v)


@contextlib.contextmanager
def _event_log_warnings():
    """Show the event log's warnings (empty log, implausible events let through) as one ``warning:`` line each,
    above any progress bar, every time they occur."""
    from .dynamics.events import EventLogWarning
    show = warnings.showwarning

    def one_line(message, category, *args, **kwargs):
        if issubclass(category, EventLogWarning):
            from tqdm import tqdm
            tqdm.write(f"warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", EventLogWarning)
        warnings.showwarning = one_line
        yield


#: built-in scenes rendered by ``demo --scene NAME``: scene file in the package data, spectrogram title
BUILTIN_SCENES = {
    "table": ("table.toml", "PAN paper's table (Chadwick et al. 2012): dice, coin, bearing, key, mug, plate, bowl"),
    "cymbal": ("cymbal_stand.toml", "Ride cymbal on a stand, struck by steel balls; a listener walks past"),
    "ground": ("ground_drop.toml", "Ground paper's drop (Qu & James 2019): 2 cm steel ball, 15 cm onto MDF"),
    "balls": ("ground_balls.toml", "Ground paper's 13 steel balls (Qu & James 2019, Fig. 5): 3-23 cm onto concrete"),
    "rock": ("ground_rock.toml", "Ground paper's granite rock (Qu & James 2019, Fig. 7): 30 cm, dropped 25 cm onto "
                                 "packed soil"),
    "trash": ("trash_can.toml", "Trash can knocked over, its lid spinning down, a water bottle; a listener walks past"),
}


@cli.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("out"),
              show_default=True, help="Output folder for demo.wav and demo.png (debris.wav, debris.png and the "
              "generated scene in debris_scene/ for --scene debris).")
@click.option("--scene", "which", type=click.Choice(["objects", "debris", "pour", "shells", "plate",
                                                     *BUILTIN_SCENES]),
              default="objects", show_default=True,
              help="objects: five objects dropped on a wooden floor; debris: hundreds of random convex glass "
                   "fragments falling onto a concrete floor (every fragment's acceleration noise from the proxy "
                   "soundbank); pour: glass beads poured from a funnel into a ceramic cup, empty then partly "
                   "full (DIR/pour.wav, DIR/pour.png); shells: a steel trash can knocked over and a cymbal struck "
                   "softly then hard, nonlinear and linear thin-shell sound (DIR/shells.wav, DIR/shells.png); "
                   "table: the acceleration-noise paper's table with its dice, coin, ball bearing, key, mug, plate "
                   "and bowl (DIR/table.*); cymbal: a ride cymbal on its stand struck by falling steel balls, "
                   "heard by a listener walking past (binaural; DIR/cymbal.*); ground: the ground-sound paper's "
                   "ball drop onto MDF, heard overhead (DIR/ground.*); balls: its 13 steel balls dropped from 3-23 "
                   "cm onto concrete (DIR/balls.*); rock: its 30 cm granite rock dropped 25 cm onto packed "
                   "soil, the floor's rumble loudest (DIR/rock.*; its FDTD radiation takes 20-35 min cold); "
                   "trash: the Harmonic Shells paper's trash can "
                   "knocked over, its lid spinning down on its rim and a water bottle dropped, heard by a walking "
                   "binaural listener (DIR/trash.*); plate: a ceramic plate pre-cut into Voronoi pieces that break apart at "
                   "its first hard impact on concrete (DIR/plate.*, the generated scene in DIR/plate_scene/).")
@click.option("--stems", type=click.Path(file_okay=False, path_type=Path),
              help="Also write one WAV per source kind and per object there, at the mix's scale (for pour: one per "
                   "source kind, the grains and the cup, over both pours).")
@click.pass_obj
def demo(obj: _Ctx, out_dir: Path, which: str, stems: Path | None):
    """Render a built-in demo scene to DIR/demo.wav and DIR/demo.png (or DIR/debris.wav and DIR/debris.png)."""
    from .scene import demo_scene_path, load_scene
    if which == "shells" and stems is not None:
        raise InputError("--stems: the shells demo renders several scenes back to back; render one of its scenes "
                         "with `impactsound render SCENE.toml --out X.wav --stems DIR` for its stems")
    if which == "shells":
        from .shells_demo import shells_demo
        for p in shells_demo(out_dir, obj.progress):
            click.echo(str(p))
        return
    if which == "pour":
        from .cli_granular import pour_demo
        for p in pour_demo(out_dir, obj.progress, stems=stems):
            click.echo(str(p))
        return
    if which == "debris":
        from .scene.debris import debris_scene
        toml = debris_scene(out_dir / "debris_scene")
        obj.progress.message(f"debris scene written to {toml}")
        scene = load_scene(toml)
        name, title = "debris", (f"impactsound debris demo: {len(scene.bodies)} glass fragments falling onto a "
                                 "concrete floor")
    elif which == "plate":
        from .scene.fracture import fractured_plate_scene
        toml = fractured_plate_scene(out_dir / "plate_scene")
        obj.progress.message(f"breaking-plate scene written to {toml}")
        scene = load_scene(toml)
        name, title = "plate", "A ceramic plate breaking apart on concrete (pre-fractured into Voronoi pieces)"
    elif which in BUILTIN_SCENES:
        file, title = BUILTIN_SCENES[which]
        scene = load_scene(demo_scene_path().parent / file)
        name = which
    else:
        scene = load_scene(demo_scene_path())
        name, title = "demo", "impactsound demo: bowl, bar, block, ball and die dropped on a wooden floor"
    from .streaming import render_to_file
    res = render_to_file(scene, out_dir / f"{name}.wav", png=out_dir / f"{name}.png", title=title,
                         progress=obj.progress, stems=stems)
    for p in res.files:
        click.echo(str(p))


@cli.command()
@click.argument("scene_file", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Output WAV (mix; one channel per listener).")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Also draw a spectrogram PNG.")
@click.option("--stems", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for one WAV per source kind and per object.")
@click.option("--allow-implausible", is_flag=True,
              help="Render a scene's event log even if it fails the plausibility checks (times after the scene, "
                   "impulses too large for the masses, points off the bodies...; docs/event-log.md): warnings "
                   "instead of an error.")
@click.option("--preview", is_flag=True,
              help="A first listen in seconds ([scene] quality = \"preview\"): coarser FEM mesh and FDTD radiation, "
                   "proxy acceleration noise, no ground sound; how far it is from the default: docs/scene-format.md.")
@click.option("--normalise", type=click.Choice(["peak", "lufs", "none"]), default="peak", show_default=True,
              help="Output level: peak (loudest sample at -1 dBFS), lufs (integrated loudness, ITU-R BS.1770, at "
                   "--lufs-target) or none (the WAV holds pascals). OUT.json keeps pascals_per_unit either way.")
@click.option("--lufs-target", type=float, default=-23.0, show_default=True,
              help="Loudness target [LUFS] for --normalise lufs (EBU R128: -23).")
@click.option("--block", "block_s", type=float, default=10.0, show_default=True,
              help="Render the events this many seconds [s] at a time and write the output as it completes "
                   "(memory follows one block, not the scene's length; the samples are those of a whole render "
                   "within 1e-6 of the peak).")
@click.pass_obj
def render(obj: _Ctx, scene_file: Path, out: Path, png: Path | None, stems: Path | None, allow_implausible: bool,
           preview: bool, normalise: str, lufs_target: float, block_s: float):
    """Render SCENE_FILE (TOML, see docs/scene-format.md) to a WAV (pascals recoverable via OUT.json)."""
    from .scene import load_scene
    from .streaming import render_to_file
    scene = load_scene(scene_file)
    if preview:
        scene.quality = "preview"
    with _event_log_warnings():
        res = render_to_file(scene, out, stems=stems, png=png, title=str(scene_file), normalise=normalise,
                             lufs_target=lufs_target, progress=obj.progress, allow_implausible=allow_implausible,
                             block_s=block_s)
    for p in res.files:
        click.echo(str(p))


@cli.command()
@click.argument("scene_file", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the log to a .csv or .npz file (default: CSV on standard output).")
@click.option("--allow-implausible", is_flag=True,
              help="When SCENE_FILE names an event log: pass it on even if it fails the plausibility checks.")
@click.pass_obj
def events(obj: _Ctx, scene_file: Path, out: Path | None, allow_implausible: bool):
    """Print or save the contact-event log that the rigid-body engine produces for SCENE_FILE."""
    from .pipeline import scene_events
    from .scene import load_scene
    if out is not None and out.suffix.lower() not in (".csv", ".npz"):       # before any simulation
        raise InputError(f"--out {out}: unknown extension {out.suffix or '(none)'!r}; an event log is written as "
                         ".csv or .npz, e.g. --out events.csv")
    scene = load_scene(scene_file)
    with _event_log_warnings():
        log = scene_events(scene, obj.progress, allow_implausible=allow_implausible)
    if out is None:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = log.save(Path(d) / "events.csv")
            click.echo(p.read_text(), nl=False)
    else:
        log.save(out)
        obj.progress.message(f"{len(log)} events")
        click.echo(str(out))


@cli.command()
@click.argument("mesh", type=click.Path(path_type=Path))
@click.option("--material", help="Material name (see `impactsound materials`).")
@click.option("--E", "E", type=float, help="Young's modulus [Pa] (with --nu and --rho instead of --material).")
@click.option("--nu", type=float, help="Poisson's ratio.")
@click.option("--rho", type=float, help="Density [kg/m^3].")
@click.option("--count", type=int, default=200, show_default=True,
              help="Maximum number of modes (200, a scene's default: the same settings give the scene's asset).")
@click.option("--order", type=click.Choice(["1", "2"]), default="2", show_default=True,
              help="Element order: 1 (linear tets) or 2 (quadratic tets).")
@click.option("--f-max", type=float, default=20000.0, show_default=True, help="Highest frequency kept [Hz].")
@click.option("--mesher", type=click.Choice(["tetgen", "ftetwild", "gmsh", "auto"]), default="tetgen",
              show_default=True, help="Tetrahedral mesher for a surface mesh: tetgen (AGPL-3.0; most accurate and "
                                      "robust measured), ftetwild (MPL-2.0), gmsh (GPL-2.0+; pip install "
                                      "impactsound[gmsh]), auto (tetgen if installed, else the most permissive).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the modal asset (.h5).")
@click.pass_obj
def modes(obj: _Ctx, mesh: Path, material, E, nu, rho, count, order, f_max, mesher, as_json, out):
    """Modal analysis of MESH (watertight surface in metres: OBJ/STL/PLY/OFF/glTF; or a .msh/.vtu tet mesh).

    The model is cached by content hash: a scene with the same mesh, material and settings uses the same asset
    (the surface is meshed about its centre of mass, as a scene places it), and so do `transfer precompute`,
    `export` and `strike`."""
    from .assets import cache_dir
    from .fem.modal import cached_modal_analysis as modal_analysis
    mat = _material_option(material, E, nu, rho)
    if count < 1:
        raise InputError(f"--count {count} must be >= 1")
    if not f_max > 0:                                              # also NaN
        raise InputError(f"--f-max {f_max:g} Hz must be positive: the highest mode frequency to keep, e.g. "
                         "--f-max 20000 (the top of hearing)")
    kwargs = dict(order=int(order), max_modes=count, f_max=f_max, source=str(mesh))
    if mesh.suffix.lower() in (".msh", ".vtu"):
        from .mesh.surface import load_volume_mesh
        nodes, tets = load_volume_mesh(mesh)
        with obj.progress.stage(f"modes of {mesh.name}") as update:
            model = modal_analysis(None, mat, nodes=nodes, tets=tets, progress=update, **kwargs)
    else:
        from .mesh.surface import check_surface, load_surface
        surf = load_surface(mesh)
        check_surface(surf, str(mesh))
        with obj.progress.stage(f"modes of {mesh.name}") as update:
            model = modal_analysis(surf, mat, progress=update, mesher=mesher, **kwargs)
    obj.progress.message(f"modal asset {cache_dir() / f'modal_{model.inputs_hash[:40]}.h5'} (cache)")
    if out is not None:
        model.save(out)
        obj.progress.message(f"wrote {out}")
    if model.n_modes == 0:
        click.echo(f"warning: {mesh}: none of its elastic modes is at or below --f-max {f_max:g} Hz (asked for up "
                   f"to {count}): a small or stiff object rings higher; raise --f-max to list them", err=True)
    if as_json:
        click.echo(json.dumps({"frequencies_hz": [float(f) for f in model.frequencies_hz],
                               "dofs": int(model.meta.get("dofs", 0)), "order": int(order),
                               "material": mat.name, "mass_kg": float(model.mass),
                               "damping_ratio": [float(x) for x in model.xi]}, indent=2))
    else:
        click.echo(f"{model.n_modes} modes ({model.meta.get('dofs', '?')} dofs, P{order}, {mat.name}, "
                   f"mass {model.mass:.4g} kg)")
        for i, (f, x) in enumerate(zip(model.frequencies_hz, model.xi)):
            click.echo(f"{i:4d} {f:12.2f} Hz   xi {x:.2e}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def materials(as_json):
    """The shipped material table (rho kg/m^3, E Pa, nu, Rayleigh alpha 1/s and beta s); floor materials say how
    well the ground-sound model (an elastic half-space) fits them."""
    from .materials import material_table
    rows = material_table()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'name':20s} {'rho':>7s} {'E [Pa]':>10s} {'nu':>5s} {'alpha[1/s]':>10s} {'beta[s]':>9s}  source")
    for r in rows:
        click.echo(f"{r['name']:20s} {r['rho']:7.0f} {r['E']:10.3g} {r['nu']:5.2f} {r['alpha']:10.2g} "
                   f"{r['beta']:9.3g}  {r.get('source', '')}")
        if r.get("ground"):
            click.echo(f"{'':20s} as a ground (elastic half-space): {r['ground']}")


def _material_option(material, E, nu, rho):
    """--material NAME, or --E/--nu/--rho, as a Material (exactly one of the two forms)."""
    from .materials import get_material, make_material
    if material and any(v is not None for v in (E, nu, rho)):
        raise InputError("give either --material or --E/--nu/--rho, not both")
    if material:
        return get_material(material, where="--material")
    if all(v is not None for v in (E, nu, rho)):
        return make_material("custom", E=E, nu=nu, rho=rho, where="--E/--nu/--rho")
    raise InputError("give --material NAME or all of --E PA --nu X --rho KG_M3")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the source kinds and their options as JSON.")
def sources(as_json):
    """The sound-source kinds a scene can name in `sources = [...]`, with their [source.<kind>] options (built-ins
    and plugins installed through the 'impactsound.sources' entry point)."""
    from .sources import registry
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kinds = registry.available()
    rows = []
    for k in kinds.values():
        opts = {n: {"default": f.default, "type": getattr(f.annotation, "__name__", None) if isinstance(
                    f.annotation, type) else str(f.annotation).replace("typing.", ""), "description": f.description or ""}
                for n, f in k.options.model_fields.items()}
        rows.append({"name": k.name, "origin": k.origin, "summary": k.summary, "options": opts})
    broken = registry.broken()
    if as_json:
        click.echo(json.dumps({"sources": rows, "failed_plugins": broken}, indent=2, default=str))
        return
    for r in rows:
        click.echo(f"{r['name']}  ({r['origin']}): {r['summary']}")
        for n, o in r["options"].items():
            click.echo(f"    {n} = {_g(o['default'])}   [{o['type']}] {o['description']}")
    for name, why in broken.items():
        click.echo(f"warning: plugin {name!r} failed to load: {why}", err=True)


@cli.group()
def pan():
    """Precomputed Acceleration Noise (PAN) fields: precompute once per object, inspect."""


@pan.command("precompute")
@click.argument("mesh", type=click.Path(path_type=Path))
@click.option("--material", help="Material name (see `impactsound materials`).")
@click.option("--E", "E", type=float, help="Young's modulus [Pa] (with --nu and --rho instead of --material).")
@click.option("--nu", type=float, help="Poisson's ratio.")
@click.option("--rho", type=float, help="Density [kg/m^3].")
@click.option("--directions", default="5x10", show_default=True,
              help="Direction grid THETAxPHI (the paper uses 5x10 for small objects, 40x80 for detail).")
@click.option("--radial-terms", type=click.IntRange(1, 5), default=3, show_default=True,
              help="Radial terms N of the fitted series sum_k q_k(t - R/c) / R^k (the paper uses 2; 3 measured "
                   "the most accurate). A scene uses the field when this matches its "
                   "[source.acceleration_noise] radial_terms.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the PAN asset here (default: the asset cache, where scene renders find it).")
@click.option("--yes", is_flag=True, help="Do not ask before a long run.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run the six fields on a Dask cluster: the scheduler's address, e.g. tcp://HOST:8786 (start one "
                   "with `dask scheduler`, workers with `dask worker tcp://HOST:8786 --nthreads 1 --nworkers 2`). "
                   "Needs: pip install 'impactsound[distributed]'. The result is the same bits as a local run.")
@click.option("--fallback-local", is_flag=True,
              help="With --scheduler: if no scheduler answers, warn and run on this machine instead of failing.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="Local worker processes, one field each (default 1: the FDTD solver already uses every core). "
                   "Not used with a reachable --scheduler.")
@click.pass_obj
def pan_precompute(obj: _Ctx, mesh: Path, material, E, nu, rho, directions, radial_terms, out, yes, scheduler,
                   fallback_local, workers):
    """Precompute the six rigid-body acceleration-noise fields of MESH (watertight, metres; body frame).

    Prints the grid, memory and work first. Interrupt it and run it again: finished fields are kept
    (checkpoints next to the asset) and the result is the same. The fields are independent tasks: --scheduler
    runs them on a Dask cluster, --workers N in N local processes; every field is checkpointed here as it
    arrives, and the asset is identical whichever way they ran."""
    import functools
    import warnings

    from .mesh.surface import check_surface, load_surface
    from .parallel import SchedulerFallbackWarning, map_tasks, require_distributed
    from .sources.pan.precompute import cached_pan_field, pan_asset_path, plan_pan
    mat = _material_option(material, E, nu, rho)
    if scheduler:
        require_distributed()                 # say how to install Dask before any work
    map_fn = functools.partial(map_tasks, scheduler=scheduler, workers=workers or 1,
                               fallback_local=fallback_local)
    from .sources.pan.source import parse_directions
    try:
        nt, nph = parse_directions(directions)
    except ValueError:
        raise InputError(f"--directions {directions!r}: expected THETAxPHI with THETA >= 2, PHI >= 3, e.g. 5x10")
    surf = load_surface(mesh)
    check_surface(surf, str(mesh))
    job = plan_pan(surf, mat, n_theta=nt, n_phi=nph, n_terms=radial_terms)
    e = job.estimate()
    obj.progress.message(f"{mesh.name}: mass {job.mass:.4g} kg, h = {job.h * 1e6:.3g} us, grid {e['grid'][0]}^3 "
                         f"(dx {e['dx_m'] * 1e3:.3g} mm), {e['steps']} steps x 6 fields = "
                         f"{e['cell_updates']:.3g} cell updates, {e['memory_bytes'] / 2**20:.0f} MiB of fields, "
                         f"~{e['cell_updates'] / 2.5e8:.0f} s on 2 cores")
    cache = out.parent if out is not None else None
    show = warnings.showwarning

    def one_line_fallback_warning(message, category, *args, **kwargs):
        if issubclass(category, SchedulerFallbackWarning):
            from tqdm import tqdm
            tqdm.write(f"warning: {message}", file=sys.stderr)      # on its own line, above the progress bar
        else:
            show(message, category, *args, **kwargs)

    with obj.progress.stage(f"PAN precompute of {mesh.name}") as update, warnings.catch_warnings():
        warnings.simplefilter("always", SchedulerFallbackWarning)
        warnings.showwarning = one_line_fallback_warning
        fld = cached_pan_field(job, cache=cache, progress=update, map_fn=map_fn)
    path = pan_asset_path(job, cache)
    if out is not None and out != path:
        fld.save(out)
        path = out
    click.echo(str(path))


@pan.command("info")
@click.argument("asset", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def pan_info(asset: Path, as_json):
    """Describe a PAN asset: object, mass, h, grid, radii, directions, size on disk, content hash, and for a
    wavelet-stored field its tolerance, dense and stored sizes and the stored error of each field."""
    from .assets import read_asset
    from .sources.pan.field import ASSET_KIND, PANField
    if not asset.is_file():
        raise InputError(f"{asset}: no such PAN asset")
    a = read_asset(asset, ASSET_KIND)
    fld = PANField.from_asset(a)
    d = {"path": str(asset), "mass_kg": float(fld.mass), "h_s": float(fld.h), "R_b_m": float(fld.R_b),
         "radii_m": [float(r) for r in fld.radii], "directions": [fld.n_theta, fld.n_phi],
         "terms": fld.n_terms, "coefficients": fld.n_coef, "c_m_s": float(fld.c), "rho_kg_m3": float(fld.rho),
         "grid": fld.meta.get("grid"), "dx_m": fld.meta.get("dx"), "fit_relative_residual":
         fld.meta.get("fit_relative_residual"), "material": fld.meta.get("material", {}).get("name"),
         "size_bytes": asset.stat().st_size,
         "content_hash": "sha256:" + hashlib.sha256(asset.read_bytes()).hexdigest(), "inputs_hash": fld.inputs_hash}
    st = fld.meta.get("storage")
    if st:              # wavelet-stored (sources/pan/field_store.py): the tolerance, sizes and measured error
        d.update({"storage": f"wavelet {st['wavelet']}, eps {st['eps']:g}", "dense_bytes": st["dense_bytes"],
                  "stored_bytes": st["stored_bytes"], "stored_error_per_field": st["errors"]})
    if as_json:
        click.echo(json.dumps(d, indent=2))
    else:
        for k, v in d.items():
            click.echo(f"{k:22s} {_g(v)}")


@cli.group()
def transfer():
    """Per-mode acoustic transfer: exterior BEM solves fitted as FFAT maps (Chadwick, An & James 2009, sec. 4)."""


@transfer.command("precompute")
@click.argument("modal_asset", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(["fdtd", "bem"]), default="fdtd", show_default=True,
              help="fdtd: FFAT maps of every mode from grouped FDTD solves, what a scene uses by default (the same "
                   "cached asset: a scene with this object then reuses it); bem: BEM FFAT maps (the reference; "
                   "slow; the options below).")
@click.option("--terms", type=click.IntRange(1, 4), default=None,
              help="bem: FFAT expansion terms M (1..4; default 4).")
@click.option("--max-modes", type=click.IntRange(min=1), metavar="N", help="bem: only the first N modes.")
@click.option("--max-faces", type=click.IntRange(min=20), default=None,
              help="bem: triangle budget per mode (default 6000; higher modes are capped with a warning).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Transfer asset (.h5); default: fdtd, the cache file a scene reads (printed); bem, MODAL_ASSET "
                   "with suffix .ffat.h5.")
@click.option("--scheduler", metavar="ADDRESS", help="Run the modes on a Dask cluster (tcp://host:8786).")
@click.option("--fallback-local", is_flag=True, help="If the scheduler cannot be reached, run locally.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N", default=1, show_default=True,
              help="Local worker processes (each pays bempp-cl's one-off JIT compilation, ~1 min).")
@click.option("--backend", type=click.Choice(["numba", "opencl"]), default="numba", show_default=True,
              help="bempp-cl assembly backend; opencl needs pip install 'impactsound[opencl]' and is faster "
                   "(README).")
@click.pass_obj
def transfer_precompute(obj: _Ctx, modal_asset: Path, method, terms, max_modes, max_faces, out, scheduler,
                        fallback_local, workers, backend):
    """Radiation of each mode of MODAL_ASSET as FFAT maps: from grouped FDTD solves (fdtd, the scenes' default) or
    from one exterior Helmholtz BEM solve per mode (bem, the reference).

    bem: interrupt it and run it again: finished modes are kept (checkpoints in OUT.modes/) and the asset is the
    same. Modes are independent tasks: --workers N runs N local processes, --scheduler a Dask cluster."""
    import shutil
    import warnings

    from .fem.model import ModalModel
    from .transfer.precompute import FFATCapWarning, TransferSettings, run_transfer
    if not modal_asset.is_file():
        raise InputError(f"{modal_asset}: no such modal asset (make one with `impactsound modes MESH --out A.h5`)")
    model = ModalModel.load(modal_asset)
    if method == "fdtd":
        given = [o for o, v in (("--terms", terms), ("--max-modes", max_modes), ("--max-faces", max_faces),
                                ("--scheduler", scheduler)) if v is not None]
        if given:
            raise InputError(f"{', '.join(given)} apply to --method bem; the fdtd method radiates every mode")
        if model.n_modes == 0:
            raise InputError(f"{modal_asset}: the modal model has no modes: there is nothing to radiate")
        from .sources.modal import transfer_model, transfer_path
        tm, how = transfer_model(model, "auto", progress=obj.progress, name=modal_asset.name)
        cached = transfer_path(model, "auto")
        obj.progress.message(f"{how}: {cached} (cache; scenes with this object use it)")
        if out is not None and Path(out).resolve() != Path(cached).resolve():
            shutil.copyfile(cached, out)
        click.echo(str(out or cached))
        return
    terms = 4 if terms is None else terms
    max_faces = 6000 if max_faces is None else max_faces
    out = out or modal_asset.with_suffix(".ffat.h5")
    if backend != "numba":
        from .transfer import bem
        try:
            bem.use_backend(backend)                   # probed in a subprocess before any work starts
        except InputError as e:
            click.echo(f"warning: {e}; using the numba backend instead (same results to ~1e-13)", err=True)
            backend = "numba"
    settings = TransferSettings(terms=terms, max_modes=max_modes, max_faces=max_faces, backend=backend)
    if model.n_modes == 0:
        raise InputError(f"{modal_asset}: the modal model has no modes (none below its f_max of "
                         f"{_g(model.meta.get('f_max', float('nan')))} Hz): there is nothing to radiate")
    n = model.n_modes if max_modes is None else min(max_modes, model.n_modes)
    obj.progress.message(f"{modal_asset.name}: {n} modes, {model.frequencies_hz[0]:.0f}-"
                         f"{model.frequencies_hz[n - 1]:.0f} Hz, {len(model.surface_faces)} surface triangles")
    with obj.progress.stage(f"BEM transfer of {n} modes") as update, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", FFATCapWarning)
        run_transfer(model, settings, out=out, scheduler=scheduler, workers=workers,
                     fallback_local=fallback_local, progress=update)
    for x in w:
        click.echo(f"warning: {x.message}", err=True)
    click.echo(str(out))


@transfer.command("info")
@click.argument("asset", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def transfer_info(asset: Path, as_json):
    """Describe a transfer asset: modes, frequencies, k*L, angular resolution T, terms, size, held-out fit error."""
    from .transfer.precompute import TransferModel
    if not asset.is_file():
        raise InputError(f"{asset}: no such transfer asset")
    tm = TransferModel.load(asset)
    kL = (tm.bank.k * 2 * tm.r_bar).tolist()
    d = {"path": str(asset), "modes": tm.n_modes, "terms": tm.bank.terms, "r_bar_m": tm.r_bar,
         "frequencies_hz": tm.frequencies_hz.tolist(), "kL": kL, "T": tm.bank.T.tolist(),
         "holdout_median_rel_error": tm.holdout_error[:, -1].tolist(),
         "holdout_error_by_terms": tm.holdout_error.tolist(),
         "modal_inputs_hash": tm.modal_inputs_hash, "size_bytes": asset.stat().st_size,
         "content_hash": "sha256:" + hashlib.sha256(asset.read_bytes()).hexdigest()}
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(f"{asset}: {tm.n_modes} modes, {tm.bank.terms} terms, R_bar {tm.r_bar:.4g} m, "
               f"{d['size_bytes'] / 2**20:.2f} MiB")
    click.echo(f"{'mode':>4s} {'f [Hz]':>10s} {'kL':>7s} {'T':>5s} {'held-out err':>12s}")
    for j in range(tm.n_modes):
        click.echo(f"{j:4d} {tm.frequencies_hz[j]:10.1f} {kL[j]:7.2f} {tm.bank.T[j]:5d} "
                   f"{100 * tm.holdout_error[j, -1]:11.2f}%")


@transfer.command("plot")
@click.argument("asset", type=click.Path(path_type=Path))
@click.option("--mode", "mode", type=click.IntRange(min=0), required=True, help="Mode index (0 = lowest).")
@click.option("--modal", "modal_asset", type=click.Path(path_type=Path),
              help="The modal asset it was made from: adds the direct BEM samples next to the fitted map.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="PNG to write.")
@click.pass_obj
def transfer_plot(obj: _Ctx, asset: Path, mode: int, modal_asset: Path | None, out: Path):
    """Draw |p| over (theta, phi) on the first FFAT shell: BEM samples (with --modal) and the fitted map."""
    from .io.plot import transfer_png
    from .transfer.precompute import TransferModel
    tm = TransferModel.load(asset)
    if mode >= tm.n_modes:
        raise InputError(f"--mode {mode}: {asset} has modes 0..{tm.n_modes - 1}")
    bem_samples = None
    if modal_asset is not None:
        from .fem.model import ModalModel
        from .transfer.precompute import bem_shell_samples
        model = ModalModel.load(modal_asset)
        if model.inputs_hash != tm.modal_inputs_hash:
            raise InputError(f"{modal_asset} is not the modal model {asset} was computed from (hash mismatch)")
        with obj.progress.stage(f"direct BEM solve of mode {mode}"):
            bem_samples = bem_shell_samples(model, tm, mode)
    transfer_png(out, tm, mode, bem_samples)
    click.echo(str(out))


def _xyz_list(text: str, option: str, what: str) -> np.ndarray:
    """'x,y,z;x,y,z...' -> (n, 3) floats; InputError naming the option and saying what it wants otherwise."""
    try:
        a = np.array([[float(v) for v in part.split(",")] for part in text.split(";") if part.strip()], np.float64)
    except ValueError:
        a = np.zeros((0, 0))
    if a.ndim != 2 or len(a) == 0 or a.shape[1] != 3 or not np.isfinite(a).all():
        raise InputError(f"{option} {text!r}: give {what}")
    return a


@cli.command("export")
@click.argument("modal_asset", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["json", "faust"]), required=True,
              help="json: the modal bank (formula, units, modes, per-point gains); faust: a .dsp program.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Output file (.json or .dsp); its folder must exist.")
@click.option("--points", metavar="X,Y,Z[;X,Y,Z...]",
              help="Hit points [m] in the body frame (mesh axes, origin at the centre of mass), projected on the "
                   "surface; default: every surface vertex.")
@click.option("--listener-dir", default="0,-1,0", show_default=True, metavar="X,Y,Z|none",
              help="Body-frame direction from the object to the listener (far-field pressure at 1 m); 'none' "
                   "for no radiation.")
@click.option("--transfer", "transfer_asset", default="auto", show_default=True, metavar="auto|low_order|FILE",
              help="Radiation: auto, what a scene uses for this model (FDTD FFAT maps of every mode: the cached "
                   "asset, computed once when missing); low_order, the compact monopole + dipole model (fast, "
                   "approximate); or an FFAT transfer asset (`impactsound transfer precompute`) for the modes it "
                   "covers, the compact model radiating the rest.")
@click.option("--max-modes", type=click.IntRange(min=1), metavar="N", help="Keep only the lowest N modes.")
@click.option("--sample-rate", type=click.IntRange(min=1), default=48000, show_default=True,
              help="Sample rate [Hz] of the Faust resonator coefficients.")
@click.pass_obj
def export(obj: _Ctx, modal_asset: Path, fmt, out: Path, points, listener_dir, transfer_asset, max_modes,
           sample_rate):
    """Export a modal model (MODAL_ASSET, from `impactsound modes --out`) for runtime playback: a JSON modal bank
    or a Faust program that plays the object when struck (docs/export.md)."""
    from .fem.model import ModalModel
    from .io.export import export_modal
    if not modal_asset.is_file():
        raise InputError(f"{modal_asset}: no such modal asset (make one with `impactsound modes MESH --out A.h5`)")
    if transfer_asset not in ("auto", "low_order"):
        transfer_asset = Path(transfer_asset)
        if not transfer_asset.is_file():
            raise InputError(f"--transfer {transfer_asset}: no such transfer asset (make one with `impactsound "
                             "transfer precompute MODAL_ASSET`), or use --transfer auto | low_order")
    model = ModalModel.load(modal_asset)
    pts = None if points is None else _xyz_list(points, "--points", "points x,y,z [m], body frame, separated by ';'")
    direction = None
    if listener_dir.strip().lower() != "none":
        want = "one direction x,y,z (body frame, from the object to the listener), or none"
        d = _xyz_list(listener_dir, "--listener-dir", want)
        if len(d) != 1:
            raise InputError(f"--listener-dir {listener_dir!r}: give {want}")
        direction = d[0]
    if transfer_asset == "auto" and direction is not None and model.n_modes:
        from .sources.modal import transfer_model, transfer_path
        transfer_asset, how = transfer_model(model, "auto", progress=obj.progress, name=modal_asset.name)
        obj.progress.message(f"radiation: {how}, {transfer_path(model, 'auto')}")
    bank = export_modal(model, fmt, out, points=pts, listener_direction=direction,
                        transfer=transfer_asset, max_modes=max_modes, sample_rate=sample_rate)
    click.echo(f"{out}: {len(bank['modes']['frequency_hz'])} modes, {len(bank['points']['gains'])} hit points")


from .cli_bank import bank  # noqa: E402  (subcommand modules import helpers defined above)
from .cli_batch import batch  # noqa: E402
from .cli_granular import granular  # noqa: E402
from .cli_ground import ground  # noqa: E402
from .cli_motion import motion  # noqa: E402
from .cli_report import report  # noqa: E402
from .cli_shell import shell  # noqa: E402

cli.add_command(bank)
cli.add_command(batch)
cli.add_command(granular)
cli.add_command(ground)
cli.add_command(motion)
cli.add_command(report)
cli.add_command(shell)


def main(argv=None):
    """Entry point: known errors become one line on stderr and exit code 2 (``--debug`` for the traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    import warnings
    try:
        from numba.core.errors import NumbaPerformanceWarning
    except ImportError:                                    # pragma: no cover (older numba)
        NumbaPerformanceWarning = Warning
    show = warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):
        # warnings are messages to the user: one line each, without the source line Python would add
        if debug:
            show(message, category, filename, lineno, file, line)
        else:
            click.echo(f"warning: {message}", err=True)

    try:
        warnings.showwarning = one_line
        with warnings.catch_warnings():
            if not debug:       # compiler advice about library kernels is not for users
                warnings.simplefilter("ignore", NumbaPerformanceWarning)
            cli.main(args=args, prog_name="impactsound", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ImpactSoundError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as exc:  # an unexpected failure: still one line unless --debug
        if debug:
            traceback.print_exc()
        else:
            click.echo(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)", err=True)
        return 1
    finally:
        warnings.showwarning = show
    return 0


if __name__ == "__main__":
    sys.exit(main())
