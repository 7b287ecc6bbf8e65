"""The granular event table of a scene's ``[granular]`` table, computed once per render (M. Marko, "Sound
simulation of granular materials", ch. 5.4-5.6):

- ``events = "simulate"``: our event-driven simulator (sources/granular/simulate.py) pours ``count`` grains from
  the funnel (or stream) into the container, a built-in ``mug`` object whose inner wall and floor are the
  simulator's walls; the floor of the scene catches what misses. Cached by a content hash of everything that
  decides it (the result is deterministic, so the cache never changes the output).
- ``events = "log"``: a granular event table (.npz/.csv/.parquet; `impactsound granular import` converts another
  simulator's per-step contacts).
- ``events = "generate"``: the statistical generator's model (`impactsound granular fit`), drawn for the scene's
  duration with the scene's seed.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...io.progress import QUIET
from .events import CONTAINER, GranularEvents

#: bump when the simulated table of a scene changes for the same inputs (cache key)
SCENE_SIM_VERSION = 1


def grain_materials(scene, ev: GranularEvents) -> list:
    """One Material per name in ``ev.materials``: the scene's grain material, else the material table's."""
    from ...materials import get_material
    setup = scene.granular
    out = []
    for name in ev.materials or (setup.material.name,):
        if name == setup.material.name:
            out.append(setup.material)
        else:
            out.append(get_material(name, where=f"{scene.path}: granular event table material"))
    return out


def granular_events(scene, progress=QUIET) -> GranularEvents:
    """The scene's granular collisions (module docstring), computed once per scene object."""
    cached = scene.__dict__.get("_granular_events")
    if cached is not None:
        return cached
    setup = scene.granular
    if setup.events == "log":
        from .events import load_events
        from .plausibility import check_granular_table
        ev = load_events(setup.log)
        # a table in other units renders silence or nonsense without a word: check it against the scene
        ev = check_granular_table(ev, scene, str(setup.log), csv=str(setup.log).lower().endswith(".csv"),
                                  allow_implausible=bool(scene.__dict__.get("_allow_implausible", False)))
    elif setup.events == "generate":
        from .generator import generate, load_model
        model = load_model(setup.model)
        with progress.stage("granular events (statistical generator)"):
            ev = generate(model, duration=scene.duration, seed=scene.seed)
    else:
        ev = _simulated(scene, setup, progress)
    late = ev.t >= scene.duration
    if late.any():
        ev = ev.take(~late)
    if setup.container is not None and (ev.kind == CONTAINER).any() and setup.container not in ev.containers:
        raise InputError(f"{scene.path}: granular.container = {setup.container!r} but the event table's walls are "
                         f"{list(ev.containers)}: name the container object like the table's wall, or set "
                         "granular.container to one of them")
    progress.message(f"{len(ev)} granular events ({int((ev.kind == CONTAINER).sum())} wall hits)")
    scene.__dict__["_granular_events"] = ev
    return ev


def mug_walls(body, where: str) -> dict:
    """The inside of a built-in upright ``mug`` object in world coordinates [m]: axis (x, y), inner radius, inner
    floor height, rim height, outer radius and base height."""
    from ...rotation import quat_to_matrix
    if not body.source.startswith("primitive:mug"):
        raise InputError(f"{where}: events = 'simulate' pours into a built-in mug (shape = 'mug'); object "
                         f"{body.name!r} is {body.source or 'a mesh'}. For another container, simulate with your "
                         "own simulator and give events = 'log'")
    R = quat_to_matrix(body.quaternion)[0]
    if abs(R[2, 2] - 1.0) > 1e-9:
        raise InputError(f"{where}: the container {body.name!r} must stand upright (rotation about z only) for "
                         "events = 'simulate'")
    v = np.asarray(body.mesh.vertices) @ R.T + np.asarray(body.position)
    z0, z1 = float(v[:, 2].min()), float(v[:, 2].max())
    c = np.asarray(body.position[:2], np.float64)
    r = np.linalg.norm(v[:, :2] - c, axis=1)
    top = np.abs(v[:, 2] - z1) < 1e-9
    R_out = float(r.max())
    R_in = float(r[top].min())
    t = R_out - R_in                                 # the mug's wall and bottom have one thickness
    return {"axis": c, "inner_radius": R_in, "floor_z": z0 + t, "rim_z": z1, "outer_radius": R_out, "base_z": z0}


def _is_mug(body) -> bool:
    return body.source.startswith("primitive:mug")


def _upright(body) -> bool:
    from ...rotation import quat_to_matrix
    return abs(quat_to_matrix(np.asarray(body.quaternion, np.float64))[0][2, 2] - 1.0) <= 1e-9


def _simulated(scene, setup, progress) -> GranularEvents:
    from ...assets import cache_dir, content_hash
    from .events import load_events, save_events
    body = scene.bodies[scene.body_names.index(setup.container)]
    where = f"{scene.path}: granular"
    # the container: a built-in upright mug with its exact walls, any other closed solid as static spheres
    # (sources/granular/obstacles.py); the obstacles likewise
    cup = mug_walls(body, f"{where}.container") if _is_mug(body) and _upright(body) else None
    sphere_bodies = ([] if cup is not None else [body]) + [
        scene.bodies[scene.body_names.index(n)] for n in setup.obstacle_names(scene.bodies)]
    ground = scene.ground.height if scene.ground.enabled else None
    parts = ["granular-sim", SCENE_SIM_VERSION, setup.key(),
             {k: np.asarray(v).tolist() for k, v in cup.items()} if cup is not None else None, ground,
             scene.duration, scene.seed, _simulator_version()]
    if sphere_bodies:
        from .obstacles import OBSTACLES_VERSION
        parts.append({"obstacles": OBSTACLES_VERSION, "bodies": [
            [b.name, b.mesh_hash or content_hash(np.asarray(b.mesh.vertices, np.float64),
                                                 np.asarray(b.mesh.faces, np.int64)),
             np.asarray(b.position, np.float64).tolist(),
             np.asarray(b.quaternion, np.float64).tolist()] for b in sphere_bodies]})
    key = content_hash(*parts)
    path = cache_dir() / f"granular-sim-{key[:32]}.npz"
    if path.is_file():
        try:
            return load_events(path)
        except InputError:
            path.unlink(missing_ok=True)             # a corrupted cache entry is recomputed, never used
    extra = []
    if sphere_bodies:
        from .obstacles import body_spheres
        from .simulate import StaticSpheres
        r_min = setup.radius * (1.0 - setup.radius_spread)
        with progress.stage(f"granular walls of {', '.join(b.name for b in sphere_bodies)}"):
            for b in sphere_bodies:
                c, r = body_spheres(b, r_min, f"{scene.path}: object {b.name!r} (a wall for the grains)")
                extra.append(StaticSpheres(c, r, body=b.name))
    ev = simulate_pour(setup, cup, container=body.name, ground=ground, duration=scene.duration, seed=scene.seed,
                       progress=progress, extra_walls=extra)
    save_events(path, ev)
    return ev


def _check_grain_size(setup, inner_radius: float) -> None:
    """Grains that cannot enter the cup or pass the funnel's hole are refused (a metre-sized "grain" written in
    millimetres used to run for minutes and render nothing useful)."""
    r_max = setup.radius * (1.0 + setup.radius_spread)
    if 2.0 * r_max >= inner_radius:
        raise InputError(f"{setup.where}.radius = {setup.radius:g} m: grains up to {2 * r_max:.4g} m across cannot "
                         f"fit the container's inside (inner radius {inner_radius:.4g} m); give the radius in metres "
                         "(1 mm = 0.001)")
    st = setup.stream
    if setup.count and st is not None and r_max >= st["radius"]:
        raise InputError(f"{setup.where}.radius = {setup.radius:g} m: grains up to {2 * r_max:.4g} m across cannot "
                         f"leave the stream's nozzle (granular.stream.radius = {st['radius']:g} m); use smaller "
                         "grains or a wider nozzle")


def simulate_pour(setup, cup: dict | None, *, container: str, ground: float | None, duration: float, seed: int,
                  progress=QUIET, extra_walls=()) -> GranularEvents:
    """Pour ``setup.count`` grains through the funnel (or stream) into the cup (:func:`mug_walls`) and simulate
    ``duration`` seconds; with ``setup.fill`` > 0 the cup first gets that many grains, dropped in and settled
    (frozen: a rigid pile the pour lands on). Walls: the cup (body ``container``; None: the container is among
    ``extra_walls``), ``extra_walls`` (scene objects as static spheres), the funnel (body "funnel": its hits are
    silent), the floor at height ``ground`` (body "floor"; None: no floor)."""
    import time

    from .simulate import Cone, Cup, Floor, GrainSet, pour_grains, simulate_state
    walls = []
    if cup is not None:
        R_in, z_floor, z_rim = cup["inner_radius"], cup["floor_z"], cup["rim_z"]
        walls.append(Cup(center_xy=tuple(cup["axis"]), radius=R_in, z_bottom=z_floor, height=z_rim - z_floor,
                         body=container))
        _check_grain_size(setup, R_in)
    elif setup.fill:
        raise InputError(f"{setup.where}.fill = {setup.fill}: a settled fill is laid into a built-in mug only; "
                         f"the container {container!r} is another shape (set fill = 0)")
    walls.extend(extra_walls)
    if ground is not None:
        walls.append(Floor(z=ground, body="floor"))
    radius = setup.radius if setup.radius_spread == 0 else (setup.radius, setup.radius * setup.radius_spread)
    mat = setup.material
    parts = []
    if setup.fill:
        pos, rad = settled_layers(setup.fill, setup.radius * (1 + setup.radius_spread), cup, where=setup.where)
        n = len(rad)
        parts.append(GrainSet(positions=pos, velocities=np.zeros((n, 3)), radii=rad,
                              material=np.zeros(n, np.int64), materials=(mat.name,), frozen=np.ones(n, bool),
                              release=np.zeros(n), densities=(mat.rho,)))
    if setup.count:
        if setup.stream is not None:
            st = setup.stream
            try:
                g = pour_grains(setup.count, radius, seed=seed, material=mat.name, nozzle=tuple(st["position"]),
                                nozzle_radius=st["radius"], rate=st["rate"])
            except InputError as exc:          # name the scene's fields, not the function's arguments
                raise InputError(str(exc).replace("pour_grains:", f"{setup.where}.stream:", 1) +
                                 " (granular.stream.rate, granular.stream.radius, granular.radius)") from None
        else:
            fu = setup.funnel
            x, y, z = fu["position"]
            cone = Cone(center_xy=(x, y), z_bottom=z, r_bottom=fu["hole_radius"], z_top=z + fu["height"],
                        r_top=fu["top_radius"], body="funnel")
            walls.append(cone)
            # the thesis started its grains above the funnel's bottom (grains resting on it collapse, App. B.2)
            try:
                g = pour_grains(setup.count, radius, seed=seed, material=mat.name, region=cone,
                                z_range=(z + 0.25 * fu["height"], z + fu["height"]))
            except InputError as exc:
                if "grains fit in the region" not in str(exc):
                    raise
                raise InputError(f"{setup.where}.count = {setup.count}: {str(exc).split(': ', 1)[1].split(';')[0]} "
                                 "in the funnel's upper three quarters; use fewer grains (granular.count), "
                                 "smaller ones (granular.radius) or a bigger funnel (granular.funnel.top_radius, "
                                 "granular.funnel.height)") from None
        g.densities = (mat.rho,)
        if g.release is None:
            g.release = np.zeros(len(g))
        parts.append(GrainSet(positions=g.positions, velocities=g.velocities, radii=g.radii,
                              material=np.zeros(len(g), np.int64), materials=(mat.name,),
                              frozen=np.zeros(len(g), bool), release=g.release, densities=(mat.rho,)))
    if not parts:
        raise InputError(f"{setup.where}: count = 0 and fill = 0: no grains to simulate")
    grains = GrainSet(positions=np.concatenate([p.positions for p in parts]),
                      velocities=np.concatenate([p.velocities for p in parts]),
                      radii=np.concatenate([p.radii for p in parts]),
                      material=np.concatenate([p.material for p in parts]), materials=(mat.name,),
                      frozen=np.concatenate([p.frozen for p in parts]),
                      release=np.concatenate([p.release for p in parts]), densities=(mat.rho,))
    with progress.stage(f"granular simulation ({setup.count} grains poured, {setup.fill} in the cup, "
                        f"{duration:g} s)") as update:
        start = time.perf_counter()

        def report(t_sim, collisions):
            update(min(1.0, t_sim / duration))
            update(f"t = {t_sim:.3f} s, {collisions / max(time.perf_counter() - start, 1e-9):.3g} collisions/s")

        res = simulate_state(grains, walls, duration=duration, restitution=setup.restitution, progress=report)
    ev = res.events
    ev.meta.update({"grains": setup.count, "fill": setup.fill, "seed": seed, "stats": {
        k: (float(v) if isinstance(v, float) else int(v)) for k, v in res.stats.items()
        if isinstance(v, (int, float, np.integer, np.floating))}})
    return ev


def settled_layers(count: int, radius: float, cup: dict, *, where: str = "granular") -> tuple:
    """``count`` grains of ``radius`` [m] lying in the cup (:func:`mug_walls`) as hexagonal close-packed layers
    from its floor up (a settled pile, frozen in the simulation): (centres (count, 3) [m], radii (count,)).
    Spacing 1 % above contact, so that no two grains touch."""
    s = 2.0 * radius * 1.01
    R = cup["inner_radius"] - radius * 1.01
    cx, cy = cup["axis"]
    nx = int(np.ceil(R / s)) + 1
    i, j = np.meshgrid(np.arange(-nx, nx + 1), np.arange(-2 * nx, 2 * nx + 1), indexing="ij")
    layers = []
    for k in range(int(np.ceil((cup["rim_z"] - cup["floor_z"]) / (s * np.sqrt(2.0 / 3.0))))):
        # ABC stacking: each layer shifted by a third of the triangle's height
        x = s * (i + 0.5 * (j % 2)) + (k % 3) * s * 0.5
        y = s * (np.sqrt(3.0) / 2.0) * j + (k % 3) * s * np.sqrt(3.0) / 6.0
        keep = np.hypot(x, y) <= R
        z = cup["floor_z"] + radius * 1.01 + k * s * np.sqrt(2.0 / 3.0)
        if z + radius > cup["rim_z"]:
            break
        pts = np.c_[x[keep] + cx, y[keep] + cy, np.full(int(keep.sum()), z)]
        # the grains nearest the axis first, so that a part layer is a disc in the middle
        layers.append(pts[np.argsort(np.hypot(pts[:, 0] - cx, pts[:, 1] - cy), kind="stable")])
        if sum(len(p) for p in layers) >= count:
            break
    pos = np.concatenate(layers) if layers else np.zeros((0, 3))
    if len(pos) < count:
        raise InputError(f"{where}.fill = {count} grains do not fit in the container (at most {len(pos)} of radius "
                         f"{radius} m): lower fill")
    return pos[:count], np.full(count, float(radius))


def _simulator_version():
    from . import simulate
    return getattr(simulate, "SIMULATOR_VERSION", 1)

