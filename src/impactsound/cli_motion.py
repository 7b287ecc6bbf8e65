"""``impactsound motion``: animations in (a glTF/GLB or Blender file to a scene folder), the contact events a pose
table implies, and a simulation's motion out as a pose table (docs/motion.md).

Registered on the command group in cli.py with ``cli.add_command(motion)``.
"""
from __future__ import annotations

import math
from pathlib import Path

import click

from .errors import InputError


@click.group("motion")
def motion():
    """Render an existing animation: pose tables, glTF and Blender files in, contact events inferred."""


def _xyz(text, option):
    if text is None:
        return None
    try:
        v = [float(x) for x in text.split(",")]
    except ValueError:
        v = []
    if len(v) != 3 or not all(math.isfinite(x) for x in v):
        raise InputError(f"{option} {text!r}: give x,y,z in metres (z up), e.g. 0,-1,0.5")
    return v


@motion.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Scene folder to write (meshes/, poses.csv, scene.toml).")
@click.option("--material", "materials", multiple=True, metavar="NAME=MATERIAL",
              help="Map the file's material (or object) NAME to one of ours (`impactsound materials`); repeat.")
@click.option("--default-material", default=None, metavar="MATERIAL",
              help="Material of every object the --material options do not map (default: none; unmapped "
                   "objects are an error).")
@click.option("--ground", "ground", default="auto", show_default=True, metavar="auto|none|Z",
              help="Ground plane: auto (a Blender passive floor plane, else the lowest point any object "
                   "reaches), none, or its height Z [m].")
@click.option("--listener", default=None, metavar="X,Y,Z",
              help="Microphone [m] (default: Blender's camera, moving with it, else 1 m in front of and 0.5 m above "
                   "the objects).")
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
def motion_import(file, out, materials, default_material, ground, listener, overwrite):
    """Turn an animation FILE (.glb/.gltf, or .blend with `pip install 'impactsound[blender]'`) into a scene
    folder: one mesh per rigid object, its pose table and a scene TOML that renders it
    (`impactsound render OUT/scene.toml`)."""
    from .scene.motion_import import import_animation, parse_material_map
    if ground == "auto":
        g = True
    elif ground == "none":
        g = None
    else:
        try:
            g = float(ground)
        except ValueError:
            raise InputError(f"--ground {ground!r}: give auto, none or a height in metres") from None
    toml, report = import_animation(file, out, materials=parse_material_map(materials),
                                    default_material=default_material, ground=g,
                                    listener=_xyz(listener, "--listener"), overwrite=overwrite)
    for name, why in report.get("skipped", {}).items():
        click.echo(f"not imported: '{name}': {why}")
    click.echo(f"{toml}: {report['objects']} objects, {report['frames']} frames at {report['fps']:.4g} fps; "
               f"render it with `impactsound render {toml}`")


@motion.command("events")
@click.argument("scene", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Event log to write (.csv or .npz; docs/event-log.md).")
def motion_events(scene, out):
    """Infer the contact events of SCENE's pose table ([scene] motion) and write them as an event log (to
    inspect, edit, or render with [scene] event_log)."""
    from .pipeline import motion_events as infer
    from .scene import load_scene
    sc = load_scene(scene)
    if not sc.motion:
        raise InputError(f"{scene}: the scene has no [scene] motion = \"POSES\" (a pose table) to infer events from")
    log = infer(sc)
    log.save(out)
    click.echo(f"{out}: {len(log)} events from {sc.motion}")


@motion.command("export")
@click.argument("scene", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--fps", type=float, default=120.0, show_default=True, help="Frames per second.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Pose table to write (.csv, .npz or .parquet).")
def motion_export(scene, fps, out):
    """Simulate SCENE with the rigid-body engine and write its motion as a pose table at --fps (centre-of-mass
    positions: objects keep origin = "com"), e.g. to check what frame rate an animation needs."""
    from .dynamics import simulate
    from .dynamics.from_motion import sampled_poses
    from .scene import load_scene
    from .scene.poses import write_pose_table
    from .transfer.motion import CONTROL_RATE_HZ
    if not (math.isfinite(fps) and fps > 0):
        raise InputError(f"--fps {fps}: give a positive frame rate")
    sc = load_scene(scene)
    if sc.motion or sc.event_log:
        raise InputError(f"{scene}: the scene takes its motion from a file already ([scene] motion / event_log)")
    mesh_origin = [b.name for b in sc.bodies if b.origin == "mesh"]
    if mesh_origin:
        raise InputError(f"{scene}: object(s) {mesh_origin} have origin = \"mesh\"; the pose table holds centres "
                         "of mass: use origin = \"com\" in a scene that reads it")
    log = simulate(sc.bodies, sc.ground if sc.ground.enabled else None, sc.duration, sc.timestep,
                   motion_rate=CONTROL_RATE_HZ)
    t, P, Q = sampled_poses(log, fps, sc.duration)
    moving = [i for i, b in enumerate(sc.bodies) if not b.immovable]
    write_pose_table(out, t, [sc.bodies[i].name for i in moving], P[:, moving], Q[:, moving])
    click.echo(f"{out}: {len(t)} frames at {fps:g} fps, {len(moving)} bodies ({len(log)} events simulated)")
