"""``impactsound batch PLAN.toml --out DIR``: one render per row of a plan (batch.py), resumable.

Registered on the command group in cli.py with ``cli.add_command(batch)``.
"""
from __future__ import annotations

from pathlib import Path

import click

from .cli import _Ctx


@click.command("batch")
@click.argument("plan_file", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder: NAME.wav (+ .json, .png) per render, manifest.csv, batch.json.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local processes (default: the core count; 1 renders in this process).")
@click.option("--scheduler", default=None,
              help="Dask scheduler address (tcp://HOST:8786); its workers need IMPACTSOUND_CACHE on one shared "
                   "folder so that each asset is computed once (docs/batch.md).")
@click.option("--yes", is_flag=True, help="Allow a plan of more than 1000 renders.")
@click.option("--dry-run", is_flag=True, help="Check the plan and list its renders; render nothing.")
@click.pass_context
def batch(ctx: click.Context, plan_file: Path, out: Path, workers: int | None, scheduler: str | None, yes: bool,
          dry_run: bool):
    """Render every row of PLAN_FILE (a base scene and a table or grid of overrides; docs/batch.md) into OUT.

    A rerun after a kill skips the renders already finished; a render that failed is tried again. Exit code 1
    when a render failed (the manifest's status and error columns say which and why)."""
    from .batch import load_plan, row_scene, run_batch
    obj = ctx.obj if isinstance(ctx.obj, _Ctx) else _Ctx(quiet=True, debug=False)
    plan = load_plan(plan_file)
    if dry_run:
        click.echo(f"{len(plan)} renders; fields: {', '.join(plan.fields) or '(none: the base scene)'}")
        for i, name in enumerate(plan.names[:50]):
            row_scene(plan, i)
            click.echo(f"  {name}: " + ", ".join(f"{k} = {v!r}" for k, v in plan.rows[i].items()))
        if len(plan) > 50:
            click.echo(f"  ... and {len(plan) - 50} more")
        return
    rep = run_batch(plan, out, workers=workers, scheduler=scheduler, yes=yes, progress=obj.progress)
    click.echo(str(rep.manifest))
    if rep.failed:
        click.echo(f"{rep.failed} of {len(plan)} renders failed: see the status and error columns of "
                   f"{rep.manifest}", err=True)
        ctx.exit(1)
