"""``impactsound report SCENE.toml [--json]``: render a scene and print its audibility report (report.py).

Registered on the command group in cli.py with ``cli.add_command(report)``.
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from .cli import _Ctx, _event_log_warnings


@click.command("report")
@click.argument("scene_file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON (schema impactsound.report/1, see docs/cli.md).")
@click.option("--window-ms", type=click.FloatRange(min=0, min_open=True), default=50.0, show_default=True,
              help="Longest window after an impact's arrival at a listener [ms]; cut at the next impact.")
@click.option("--group-ms", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Events starting within this time of an impact's first event are one impact [ms].")
@click.option("--allow-implausible", is_flag=True,
              help="Report on a scene's event log even if it fails the plausibility checks (docs/event-log.md): "
                   "warnings instead of an error.")
@click.pass_context
def report(ctx: click.Context, scene_file: Path, as_json: bool, window_ms: float, group_ms: float,
           allow_implausible: bool):
    """Render SCENE_FILE and report, per listener, how loud each source kind and object is (peak Pa, dB SPL,
    exposure Pa^2 s) and which kind and object dominates each impact."""
    from .pipeline import render_scene
    from .report import audibility_report, format_report
    from .scene import load_scene
    obj = ctx.obj if isinstance(ctx.obj, _Ctx) else _Ctx(quiet=True, debug=False)
    scene = load_scene(scene_file)
    with _event_log_warnings():
        result = render_scene(scene, obj.progress, allow_implausible=allow_implausible)
    positions = [l.position for l in scene.listeners]
    rep = audibility_report(result, air_c=scene.air.c, listener_positions=positions, window_s=window_ms * 1e-3,
                            group_s=group_ms * 1e-3, scene=str(scene_file))
    if as_json:
        click.echo(json.dumps(rep, indent=1))
    else:
        click.echo(format_report(rep), nl=False)
