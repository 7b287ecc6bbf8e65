"""``impactsound shell``: thin shells (Chadwick, An & James 2009, "Harmonic Shells"; fem/shell.py,
sources/shell/).

Registered on the command group in cli.py with ``cli.add_command(shell)``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from .errors import InputError, MeshError


@click.group("shell")
def shell():
    """Thin shells: discrete-shell modes (membrane + bending on triangle flaps; Chadwick, An & James 2009)."""


def load_shell_mesh(path: Path):
    """A triangle surface mesh, open or closed, as stored (no merging or repair): (vertices [m], faces)."""
    import trimesh
    if not path.is_file():
        raise InputError(f"{path}: no such mesh file")
    try:
        mesh = trimesh.load(path, force="mesh", process=False)
    except Exception as exc:                       # trimesh raises many kinds on a bad file
        raise MeshError(f"{path}: cannot read a triangle mesh ({type(exc).__name__}: {exc})") from None
    if len(mesh.faces) == 0:
        raise MeshError(f"{path}: the file holds no triangles")
    from .mesh.surface import check_units
    v, f = np.asarray(mesh.vertices, np.float64), np.asarray(mesh.faces, np.int64)
    check_units(v[np.unique(f)], str(path))
    return v, f


@shell.command("modes")
@click.argument("mesh", type=click.Path(path_type=Path))
@click.option("--thickness", type=float, required=True, help="Shell thickness h [m].")
@click.option("--material", help="Material name (see `impactsound materials`).")
@click.option("--E", "E", type=float, help="Young's modulus [Pa] (with --nu and --rho instead of --material).")
@click.option("--nu", type=float, help="Poisson's ratio.")
@click.option("--rho", type=float, help="Density [kg/m^3].")
@click.option("--count", type=int, default=None, help="Most modes kept (default: all below --f-max).")
@click.option("--f-max", type=float, default=20000.0, show_default=True, help="Highest frequency kept [Hz].")
@click.option("--bending", type=click.Choice(["flap", "midedge"]), default="midedge", show_default=True,
              help="Discrete bending: midedge (accurate on any mesh, e.g. alternating diagonals or irregular: on an "
                   "irregular free plate 0.1-0.3 % off where flap stalls 1.3-4.8 % low) or flap (the paper's; "
                   "for meshes that pass the patch test, such as the built-in shapes'; half the cubature cost).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (frequencies_hz ascending, "
              "non-rigid).")
def modes(mesh: Path, thickness, material, E, nu, rho, count, f_max, bending, as_json):
    """Linear modes of MESH (a triangle surface, open or closed; metres) as a thin shell of the given thickness:
    the six rigid modes dropped, mass-normalised, with Rayleigh damping from the material."""
    from .cli import _material_option
    from .fem.shell import ShellModel, shell_modes
    mat = _material_option(material, E, nu, rho)
    if count is not None and count < 1:
        raise InputError(f"--count {count}: give at least 1 mode")
    if not (np.isfinite(f_max) and f_max > 0):
        raise InputError(f"--f-max {f_max}: give a positive frequency [Hz]")
    v, f = load_shell_mesh(mesh)
    try:
        model = ShellModel(v, f, thickness, mat, bending=bending)
    except (InputError, MeshError) as exc:          # the model names the edge or triangle; add the file
        raise type(exc)(f"{mesh}: {exc}") from None
    res = shell_modes(model, f_max=f_max, n_modes=count)
    freqs = [float(x) for x in res.frequencies_hz]
    if as_json:
        click.echo(json.dumps({"frequencies_hz": freqs, "damping_ratios": [float(x) for x in res.damping_ratios],
                               "material": mat.name, "thickness_m": thickness, "vertices": int(len(v)),
                               "triangles": int(len(f)), "f_max_hz": f_max, "bending": bending}))
        return
    click.echo(f"{len(freqs)} shell modes ({len(v)} vertices, {len(f)} triangles, h = {thickness:g} m, {mat.name})")
    for i, (fr, x) in enumerate(zip(freqs, res.damping_ratios)):
        click.echo(f"{i:4d} {fr:12.2f} Hz   xi {x:.2e}")


SHAPE_PREFIX = "shell:"


def _train_surface(mesh_or_shape: str, resolution):
    """(vertices, faces, label, shape name or None) of a mesh file or a built-in ``shell:NAME``."""
    from .scene.shells import SHELL_SHAPES, make_shell
    names = ", ".join(SHAPE_PREFIX + n for n in SHELL_SHAPES)
    if mesh_or_shape.startswith(SHAPE_PREFIX):
        name = mesh_or_shape[len(SHAPE_PREFIX):]
        if name not in SHELL_SHAPES:
            raise InputError(f"MESH_OR_SHAPE {mesh_or_shape!r}: no built-in shell {name!r}; choose one of {names}, "
                             f"or give a mesh file")
        if resolution is not None and resolution < 6:
            raise InputError(f"--resolution {resolution}: give at least 6 segments around the largest "
                             f"circumference (default 96)")
        m = make_shell(name, resolution=resolution, where=f"--resolution/{mesh_or_shape}")
        return np.asarray(m.vertices, np.float64), np.asarray(m.faces, np.int64), mesh_or_shape, name
    if resolution is not None:
        raise InputError(f"--resolution applies to built-in shapes ({names}) only, not to the mesh file "
                         f"{mesh_or_shape}; remesh the file instead")
    path = Path(mesh_or_shape)
    if not path.is_file():
        hint = (f"; for the built-in shape write {SHAPE_PREFIX}{mesh_or_shape}" if mesh_or_shape in SHELL_SHAPES
                else f" (built-in shapes: {names})")
        raise InputError(f"MESH_OR_SHAPE {mesh_or_shape}: no such mesh file{hint}")
    v, f = load_shell_mesh(path)
    return v, f, path.name, None


def _out_file(out: Path | None) -> Path | None:
    import os
    if out is None:
        return None
    if out.is_dir():
        raise InputError(f"--out {out}: is a folder; give a file name, e.g. {out / 'cubature.h5'}")
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot create the folder {parent} ({exc.strerror or exc}); choose "
                         f"another path") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: the folder {parent} is not writable; choose another path")
    return out


@shell.command("train")
@click.argument("mesh_or_shape", metavar="MESH_OR_SHAPE")
@click.option("--thickness", type=float, required=True, help="Shell thickness h [m], e.g. 0.002.")
@click.option("--material", help="Material name (see `impactsound materials`); default for shell:NAME: the "
              "shape's own (steel trash can, bronze cymbal, ...).")
@click.option("--E", "E", type=float, help="Young's modulus [Pa] (with --nu and --rho instead of --material).")
@click.option("--nu", type=float, help="Poisson's ratio.")
@click.option("--rho", type=float, help="Density [kg/m^3].")
@click.option("--resolution", type=int, default=None,
              help="For shell:NAME only: segments around the largest circumference (default 96).")
@click.option("--modes", "n_modes", type=int, default=200, show_default=True,
              help="Modes r of the reduced model (the lowest r below --f-max).")
@click.option("--f-max", type=float, default=20000.0, show_default=True, help="Highest mode frequency [Hz].")
@click.option("--target", type=float, default=0.1, show_default=True,
              help="Relative training error at which to stop (0.1 = 10 %, as in the paper).")
@click.option("--max-elements", type=int, default=None, metavar="N",
              help="Most cubature triangles (default 10 x modes).")
@click.option("--workers", type=int, default=1, show_default=True, metavar="N",
              help="Local processes for the per-pose force pass (same result bits as 1; with --scheduler and "
                   "--fallback-local: used when no scheduler answers).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run the force pass on a Dask cluster instead (tcp://HOST:8786; needs "
                   "pip install 'impactsound[distributed]'; same result bits).")
@click.option("--fallback-local", is_flag=True,
              help="With --scheduler: if no scheduler answers, warn and run on this machine instead of failing.")
@click.option("--out", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Cubature asset file (.h5); default: the asset cache ($IMPACTSOUND_CACHE), named by the "
                   "inputs' hash. An existing FILE built from the same inputs is reused, any other is rebuilt.")
@click.option("--bending", type=click.Choice(["flap", "midedge"]), default=None,
              help="Discrete bending: flap (the paper's; for meshes that pass the patch test, such as the built-in "
                   "shapes') or midedge (accurate on any mesh, e.g. alternating diagonals or irregular). Default: "
                   "flap for shell:NAME, midedge for a mesh file (as in scenes).")
@click.option("--basis", type=click.Choice(["manifold", "modes"]), default="manifold", show_default=True,
              help="Reduced basis: manifold (the modes plus the modal derivatives of the lowest --derivatives "
                   "modes: no membrane locking; what scenes use by default) or modes (the paper's linear modes).")
@click.option("--derivatives", type=int, default=10, show_default=True,
              help="With --basis manifold: modal derivatives of every pair among this many lowest modes.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_context
def train(ctx, mesh_or_shape: str, thickness, material, E, nu, rho, resolution, n_modes, f_max, target,
          max_elements, workers, scheduler, fallback_local, out, bending, basis, derivatives, as_json):
    """Train the cubature of a thin shell's reduced nonlinear force (Chadwick, An & James 2009, sec. 2.3).

    MESH_OR_SHAPE is a triangle-mesh file (open or closed surface, metres) or a built-in shape written
    shell:NAME (shell:sheet, shell:cymbal, shell:trash_can, shell:trash_lid, shell:water_bottle,
    shell:recycling_bin; sized as in the paper's Table 1). Solves the lowest --modes modes, then picks triangles and non-negative weights greedily
    until the training error reaches --target. The result is cached by a hash of the mesh, thickness, material,
    modes and settings; interrupt it (Ctrl-C) and run the same command again to resume from its checkpoint,
    with the same result bits.

    Example: impactsound shell train shell:trash_can --thickness 0.002 --modes 200 --workers 2
    """
    from .cli import _material_option
    from .fem.shell import ShellModel, shell_modes
    from .io.progress import QUIET
    from .parallel import require_distributed
    from .scene.shells import SHELL_MATERIAL
    from .sources.shell.train import PAPER_TRASH_CAN_CUBATURE_S, shell_cubature
    progress = getattr(ctx.obj, "progress", None) or QUIET
    t0 = time.perf_counter()
    if not (np.isfinite(thickness) and thickness > 0):
        raise InputError(f"--thickness {thickness}: give the shell thickness in metres, > 0 (e.g. 0.002)")
    if n_modes < 1:
        raise InputError(f"--modes {n_modes}: give at least 1 mode (the paper uses 200-500)")
    if not (np.isfinite(f_max) and f_max > 0):
        raise InputError(f"--f-max {f_max}: give a positive frequency [Hz]")
    if not (np.isfinite(target) and 0 < target < 1):
        raise InputError(f"--target {target}: give a relative error between 0 and 1, e.g. 0.1 for 10 %")
    if max_elements is not None and max_elements < 1:
        raise InputError(f"--max-elements {max_elements}: give at least 1 triangle (or leave it out: 10 x modes)")
    if workers < 1:
        raise InputError(f"--workers {workers}: give at least 1 process")
    if basis == "manifold" and not 1 <= derivatives <= 40:
        raise InputError(f"--derivatives {derivatives}: give 1 to 40 modes (their pairs' modal derivatives)")
    if fallback_local and scheduler is None:
        raise InputError("--fallback-local applies to --scheduler only; give --scheduler ADDRESS or drop it")
    if scheduler is not None:
        require_distributed()                 # say how to install Dask before any work
    v, f, label, shape = _train_surface(mesh_or_shape, resolution)
    if bending is None:
        bending = "flap" if shape is not None else "midedge"
    if shape is not None and not material and all(x is None for x in (E, nu, rho)):
        material = SHELL_MATERIAL[shape]
    mat = _material_option(material, E, nu, rho)
    out = _out_file(out)
    size = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0)))
    if thickness >= size:
        raise InputError(f"--thickness {thickness:g}: not smaller than {label}'s size {size:.3g} m (bounding-box "
                         f"diagonal); give the thickness in metres (e.g. 0.002)")
    try:
        model = ShellModel(v, f, thickness, mat, bending=bending)
    except MeshError as exc:
        raise MeshError(f"{label}: {exc}") from None
    t1 = time.perf_counter()
    with progress.stage(f"shell modes of {label}"):
        res = shell_modes(model, f_max=f_max, n_modes=n_modes)
    t_modes = time.perf_counter() - t1
    r = len(res.frequencies_hz)
    if r == 0:
        raise InputError(f"--f-max {f_max:g}: no elastic mode of {label} below it; raise --f-max")
    if r < n_modes:
        progress.message(f"{label}: {r} modes below --f-max {f_max:g} Hz (asked for {n_modes})")
    progress.message(f"{label}: {len(f)} triangles, {len(v)} vertices, h = {thickness:g} m, {mat.name}, {r} modes "
                     f"{res.frequencies_hz[0]:.1f}-{res.frequencies_hz[-1]:.1f} Hz (solved in {t_modes:.1f} s)")
    md = None
    if basis == "manifold":
        from .sources.shell.manifold import modal_derivatives
        with progress.stage(f"modal derivatives of {label}"):
            md = modal_derivatives(model, res.U, np.sqrt(res.omega2), min(derivatives, r))
    try:
        cub = shell_cubature(model, res, target=target, max_elements=max_elements, workers=workers,
                             scheduler=scheduler, fallback_local=fallback_local, progress=progress, cache=out,
                             derivatives=md)
    except KeyboardInterrupt:
        click.echo("interrupted: the training checkpoint is kept; run the same command again to resume",
                   err=True)
        raise
    m = cub.meta
    d = {"path": m.get("path"), "shape_or_mesh": label, "triangles": int(len(f)), "vertices": int(len(v)),
         "thickness_m": float(thickness), "material": mat.name, "modes": r, "basis": basis,
         "modal_derivatives": 0 if md is None else int(len(md.pairs)),
         "f_hz": [float(res.frequencies_hz[0]), float(res.frequencies_hz[-1])],
         "elements": int(len(cub.elements)), "train_error": float(cub.train_error),
         "holdout_error": None if np.isnan(cub.holdout_error) else float(cub.holdout_error),
         "target": float(target), "stop_reason": m.get("stop_reason"), "iterations": m.get("iterations"),
         "resumed_from_iteration": m.get("resumed_from_iteration"), "from_cache": bool(m.get("from_cache")),
         "time_s": time.perf_counter() - t0, "modes_time_s": t_modes,
         "train_time_s": None if m.get("from_cache") else m.get("train_time_s"),
         "paper_trash_can_cubature_s": PAPER_TRASH_CAN_CUBATURE_S,
         "pose_peak_displacement_over_h": m.get("pose_peak_displacement_over_h"), "inputs_hash": m.get("inputs_hash")}
    if m.get("stop_reason") in ("max_elements", "no_improvement") and cub.train_error > target:
        click.echo(f"warning: training error {cub.train_error:.1%} did not reach --target {target:g} "
                   f"({m.get('stop_reason')}); raise --max-elements", err=True)
    if as_json:
        click.echo(json.dumps(d))
        return
    ho = "n/a" if d["holdout_error"] is None else f"{d['holdout_error']:.1%}"
    how = "read from the cache" if d["from_cache"] else (
        f"trained in {d['train_time_s']:.1f} s" + (f", resumed from iteration {d['resumed_from_iteration']}"
                                                    if d["resumed_from_iteration"] else ""))
    click.echo(f"{label}: {d['elements']} cubature triangles of {d['triangles']}, training error "
               f"{d['train_error']:.1%}, held-out {ho} ({how}; {r} modes solved in {t_modes:.1f} s; total "
               f"{d['time_s']:.1f} s)")
    click.echo(str(d["path"]))
