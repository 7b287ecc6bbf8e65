"""``impactsound shell``: thin shells (Chadwick, An & James 2009, "Harmonic Shells"; fem/shell.py,
sources/shell/).

Registered on the command group in cli.py with ``cli.add_command(shell)``.
"""
from __future__ import annotations

import json
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
    return np.asarray(mesh.vertices, np.float64), np.asarray(mesh.faces, np.int64)


@shell.command("modes")
@click.argument("mesh", type=click.Path(path_type=Path))
@click.option("--thickness", type=float, required=True, help="Shell thickness h [m].")
@click.option("--material", help="Material name (see `impactsound materials`).")
@click.option("--E", "E", type=float, help="Young's modulus [Pa] (with --nu and --rho instead of --material).")
@click.option("--nu", type=float, help="Poisson's ratio.")
@click.option("--rho", type=float, help="Density [kg/m^3].")
@click.option("--count", type=int, default=None, help="Most modes kept (default: all below --f-max).")
@click.option("--f-max", type=float, default=20000.0, show_default=True, help="Highest frequency kept [Hz].")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (frequencies_hz ascending, "
              "non-rigid).")
def modes(mesh: Path, thickness, material, E, nu, rho, count, f_max, as_json):
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
    model = ShellModel(v, f, thickness, mat)
    res = shell_modes(model, f_max=f_max, n_modes=count)
    freqs = [float(x) for x in res.frequencies_hz]
    if as_json:
        click.echo(json.dumps({"frequencies_hz": freqs, "damping_ratios": [float(x) for x in res.damping_ratios],
                               "material": mat.name, "thickness_m": thickness, "vertices": int(len(v)),
                               "triangles": int(len(f)), "f_max_hz": f_max}))
        return
    click.echo(f"{len(freqs)} shell modes ({len(v)} vertices, {len(f)} triangles, h = {thickness:g} m, {mat.name})")
    for i, (fr, x) in enumerate(zip(freqs, res.damping_ratios)):
        click.echo(f"{i:4d} {fr:12.2f} Hz   xi {x:.2e}")
