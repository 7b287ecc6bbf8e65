"""The ``shell`` source kind: thin-shell objects (``[[object]] shell = {...}``) struck by the scene's contacts.

Per shell object (Chadwick, An & James 2009, "Harmonic Shells"): the discrete-shell model of its mid-surface
(fem/shell.py), its lowest ``shell.modes`` linear modes below ``shell.f_max`` (cached asset), for
``dynamics = "nonlinear"`` a cubature of the reduced internal forces (cached asset, resumable training), then
:func:`~impactsound.sources.shell.render.render_shell`. Other bodies are not rendered here (the modal source
renders solids); shells are skipped by the modal and acceleration-noise sources, which say so in the sidecar.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...assets.store import Asset, cache_dir, content_hash, read_asset, write_asset
from ...contact.curvature import SurfaceCurvature
from ...contact.stage import contact_stage
from ...errors import AssetError, InputError, MeshError
from ...io.progress import QUIET
from ..registry import SourceKind, register

MODES_KIND = "shell_modes"
MODES_KIND_VERSION = 1
#: version of the discrete-shell model's numerics (fem/shell.py); part of the cache keys of shell modes, so a
#: change of the model never reuses modes computed by an older one (bump it with such a change)
SHELL_MODEL_VERSION = 1
#: storage of the cubature's basis rows when rendering (CompiledCubature's ``precision``): float32 halves the
#: memory each time step streams; the arithmetic stays float64 (see _cubature_kernel.py for why it is exact)
CUBATURE_PRECISION = "float32"


def shell_modes_cached(setup, material, f_max: float, progress=QUIET):
    """(ShellModel, ShellModes) of a scene shell, the modes read from the cache when built from the same mid-
    surface, thickness, material, count and f_max (a stale or corrupted file is recomputed, never used)."""
    from ...fem.shell import ShellModel, ShellModes, shell_modes
    spec = setup.spec
    model = ShellModel(setup.vertices, setup.faces, setup.thickness, material, bending=spec.bending)
    # the bending scheme is keyed only when not the default, so "flap" keys stay as they were
    h = content_hash({"kind": MODES_KIND, "v": MODES_KIND_VERSION, "model": SHELL_MODEL_VERSION,
                      "surface": setup.surface_hash,
                      "thickness": setup.thickness, "material": material.as_dict(), "modes": int(spec.modes),
                      "f_max": float(f_max), **({"bending": spec.bending} if spec.bending != "flap" else {})})
    path = cache_dir() / f"shell_modes_{h[:40]}.h5"
    try:
        a = read_asset(path, MODES_KIND, kind_version=MODES_KIND_VERSION, inputs_hash=h)
        m = ShellModes(frequencies_hz=a.arrays["frequencies_hz"], omega2=a.arrays["omega2"], U=a.arrays["U"],
                       damping_ratios=a.arrays["damping_ratios"], rigid_omega2=a.arrays["rigid_omega2"],
                       info=dict(a.meta.get("info", {})))
        return model, m, path
    except AssetError:
        pass
    m = shell_modes(model, f_max=f_max, n_modes=int(spec.modes))            # (U in C order, as read back)
    if not len(m.frequencies_hz):
        raise InputError(f"shell has no elastic mode below {f_max:g} Hz; raise shell.f_max")
    info = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in m.info.items()}
    write_asset(path, Asset(kind=MODES_KIND, kind_version=MODES_KIND_VERSION, inputs_hash=h, arrays={
        "frequencies_hz": m.frequencies_hz, "omega2": m.omega2, "U": m.U, "damping_ratios": m.damping_ratios,
        "rigid_omega2": m.rigid_omega2}, meta={"info": info, "units": {"frequencies_hz": "Hz", "U": "1/sqrt(kg)",
                                                                      "omega2": "rad^2/s^2"}}))
    return model, m, path


def shell_cubature_for(model, modes, spec, progress=QUIET, precision: str | None = None):
    """The compiled cubature of a shell's reduced nonlinear force, trained (or read from the cache, keyed by a
    content hash of the mesh, material, thickness, modes and settings) by
    :func:`~impactsound.sources.shell.train.shell_cubature` (Chadwick, An & James 2009, sec. 2.3); its basis rows
    stored in ``precision`` (default :data:`CUBATURE_PRECISION`)."""
    from .reduced import ReducedShell
    from .train import shell_cubature
    rs = ReducedShell.from_modes(model, modes)
    md = None
    if spec.basis == "manifold":
        from .manifold import modal_derivatives
        md = modal_derivatives(model, rs.U, rs.omega, min(int(spec.derivatives), rs.r))
    cub = shell_cubature(model, modes, target=float(spec.cubature_target),
                         max_elements=spec.cubature_elements or 4 * rs.r, progress=progress, derivatives=md)
    return rs, cub, rs.compiled_cubature(cub, precision=precision or CUBATURE_PRECISION, derivatives=md)


def radiation_model(setup, U, omega, air, progress=QUIET):
    """(radiator, kind, info) of a scene shell: its ``shell.radiation`` (default: "screen" for an open mid-surface,
    "ffat" for a closed one), solved on the mid-surface or a coarser rebuild of a built-in shape
    (:meth:`~impactsound.scene.shell_body.ShellSetup.radiation_surface`), from the cache when solved before."""
    from ...scene.shell_body import boundary_edges
    from .radiation import ShellRadiator
    spec = setup.spec
    closed = len(boundary_edges(np.asarray(setup.faces))) == 0
    kind = spec.radiation or ("ffat" if closed else "screen")
    if kind == "low_order":
        return ShellRadiator.from_surface(setup.vertices, setup.faces, U, omega), kind, {}
    if kind == "screen" and closed:
        raise InputError(f"shell {setup.source}: radiation = \"screen\" needs an open surface (air on both faces "
                         "of the wall); this mid-surface is closed: use radiation = \"ffat\" (the default for "
                         "closed shells) or \"low_order\"")
    if kind == "fdtd":
        from .fdtd import shell_fdtd_transfer
        st = shell_fdtd_transfer(setup.vertices, setup.faces, U, omega, air=air, progress=progress)
        return st, kind, {"fdtd_asset": st.info["path"], "fdtd_cell_m": st.info["cell_size"],
                          "radiation_cached": bool(st.info["cached"])}
    max_faces = int(spec.radiation_faces)
    if kind == "screen":
        from .screen import screen_radiator
        coarse = setup.radiation_surface(max_faces)
        V, F, Ur = setup.vertices, setup.faces, U
        if coarse is None and 4 * len(F) <= max_faces:
            # room in the budget: midpoint-subdivide (modes linear along edges), which resolves the near-
            # cancelling neighbours of weakly radiating modes better (measured on a cymbal: level error against
            # the thickened-surface BEM, |.| median over listeners and modes 2.4 -> 1.4 dB)
            from ...transfer.precompute import subdivide
            u = np.asarray(U, np.float64).reshape(len(V), 3, -1).transpose(2, 0, 1)
            while 4 * len(F) <= max_faces:
                V, F, u = subdivide(V, F, u)
            Ur = np.ascontiguousarray(u.transpose(1, 2, 0).reshape(3 * len(V), -1))
        rad = screen_radiator(V, F, Ur, omega, air=air, max_faces=max_faces, coarse=coarse, progress=progress,
                              name=setup.source)
        return rad, kind, {"radiation_faces": int(len(rad.faces)), "radiation_cached": bool(rad.info["cached"])}
    from .ffat import MAX_FACES, shell_transfer, thickened_face_count
    # the BEM's own validated budget unless the scene sets one
    budget = max_faces if "radiation_faces" in spec.model_fields_set else MAX_FACES
    count = len if closed else thickened_face_count
    coarse = setup.radiation_surface(budget, count=count)
    st = shell_transfer(setup.vertices, setup.faces, U, omega, air=air, max_modes=len(omega), coarse=coarse,
                        max_faces=budget, progress=progress)
    return st, kind, {"ffat_faces": st.info.get("faces"), "ffat_asset": st.info.get("path")}


def prepare_shell(body, sample_rate: int, progress=QUIET, air=None):
    """A :class:`~impactsound.sources.shell.render.ShellSound` for a scene body with a shell table."""
    from .render import ShellSound, rest_stiffness
    setup = body.shell
    spec = setup.spec
    f_max = min(float(spec.f_max), 0.45 * float(sample_rate))
    with progress.stage(f"shell modes of {body.name}"):
        model, modes, mpath = shell_modes_cached(setup, body.material, f_max, progress)
    omega = np.sqrt(np.asarray(modes.omega2, np.float64))
    info = {"dynamics": spec.dynamics,
            "modes": int(len(omega)), "f_hz": [float(omega[0] / (2 * np.pi)), float(omega[-1] / (2 * np.pi))],
            "thickness_m": setup.thickness, "vertices": int(len(setup.vertices)),
            "triangles": int(len(setup.faces)), "modes_asset": str(mpath)}
    from ...scene.shell_body import SCENE_SEGMENTS
    from .resolution import check_resolution
    info.update(check_resolution(setup, body.material, info["f_hz"][1], body.name, SCENE_SEGMENTS))
    cc, Kc = None, None
    if spec.dynamics == "nonlinear":
        with progress.stage(f"shell cubature of {body.name}") as update:
            rs, cub, cc = shell_cubature_for(model, modes, spec, update)
        amp = setup.thickness / float(np.abs(modes.U[:, 0]).max())
        Kc = rest_stiffness(cc, rs.r, 1e-6 * amp)
        info.update(cubature_elements=int(len(cub.elements)), cubature_train_error=float(cub.train_error),
                    cubature_holdout_error=float(cub.holdout_error), basis=spec.basis,
                    modal_derivatives=int(len(cc.pairs)))
    progress.message(f"  {body.name}: thin shell, {len(omega)} modes {info['f_hz'][0]:.0f}-{info['f_hz'][1]:.0f} "
                     f"Hz, {spec.dynamics}" + (f", {info['cubature_elements']} cubature elements" if cc else "")
                     + (f", {len(cc.pairs)} modal derivatives" if cc is not None and len(cc.pairs) else ""))
    with progress.stage(f"shell radiation of {body.name}") as update:
        rad, kind, rinfo = radiation_model(setup, modes.U, omega, air, update)
    info.update(radiation=kind, **rinfo)
    return ShellSound(vertices=setup.vertices, faces=setup.faces, U=np.asarray(modes.U), omega=omega,
                      xi=np.asarray(modes.damping_ratios, np.float64) * np.ones_like(omega), mass=body.mass,
                      energy_limit=float(spec.energy_limit), radiator=rad, cubature=cc, Kc=Kc, info=info)


@dataclass
class ShellPrepared:
    """{body name: ShellSound} of the scene's shells, and render statistics filled by :func:`render`."""

    sounds: dict
    stats: dict = field(default_factory=dict)


def prepare(scene, progress=QUIET) -> ShellPrepared:
    sounds = {}
    for b in scene.bodies:
        if b.shell is None:
            continue
        try:
            sounds[b.name] = prepare_shell(b, scene.sample_rate, progress, air=scene.air)
        except (InputError, MeshError) as exc:
            raise type(exc)(f"{scene.path}: object {b.name}: {exc}") from None
    if not sounds:
        progress.message("  shell: no object has a shell = {...} table; nothing to render")
    return ShellPrepared(sounds)


def render(prep: ShellPrepared, ctx) -> dict:
    """Pressure [Pa] of every shell at the listeners: {body name: (L, n_samples)}."""
    from ...transfer import hrtf
    from .render import render_shell
    scene = ctx.scene
    names = [b.name for b in scene.bodies]
    surf = {n: SurfaceCurvature(s.vertices, s.faces) for n, s in prep.sounds.items()}
    out = {}
    if not prep.sounds:
        return out
    stage = contact_stage(ctx.events, scene.bodies, scene.ground, surfaces=surf)
    ears = ctx.ears
    for name, snd in prep.sounds.items():
        i = names.index(name)
        bc = stage.of(i)
        if bc is None:                  # never struck: silent (the sidecar still lists it)
            out[name] = np.zeros((len(ctx.listeners), ctx.n_samples))
            continue
        # a moving listener: each impact's ring is heard from where the listener is when it arrives (per impact,
        # as the shell's own pose)
        heard = ctx.listeners_heard(ctx.events.t[bc.rows], bc.position)                 # (n, L, 3)
        xl_b = bc.listeners(heard)
        gains = None
        binaural = np.isfinite(ears).all(axis=1)
        if binaural.any() and len(bc.rows):
            gains = np.ones((len(bc.rows), len(ctx.listeners), snd.r))
            for l in np.flatnonzero(binaural):
                theta = hrtf.ear_angle(ears[l], heard[:, l], bc.position)
                gains[:, l] = hrtf.head_shadow(snd.omega[None, :], theta[:, None], c=scene.air.c)
        keys = _moving_keyframes(ctx, i, snd, bc) if len(bc.rows) else None
        with ctx.progress.stage(f"shell {name} ({snd.info['dynamics']})") as update:
            y, st = render_shell(snd, ctx.events.t[bc.rows], bc.tau, bc.face, bc.bary, bc.impulse, xl_b,
                                 ctx.sample_rate, ctx.n_samples, c=scene.air.c, rho=scene.air.rho, gains=gains,
                                 progress=update, keyframes=keys)
        prep.stats[name] = st
        out[name] = y
    return out


def _moving_keyframes(ctx, i, snd, bc):
    """Radiation keyframes of shell i at the control rate (>= 1 kHz, in emission time, from its first impact to
    the end) when it or a listener moves (transfer/motion.py emission_keyframes: the shell's pose at the emission
    time, the listener where that sound reaches it, the moving source's amplification, the head shadow there);
    None when nothing moves (then each impact's own pose is exact)."""
    from ...transfer import hrtf
    from ...transfer.motion import CONTROL_RATE_HZ, emission_keyframes, event_trajectory
    opt = ctx.scene.options.get("modal")
    if opt is not None and getattr(opt, "radiation", "follow") != "follow":
        return None
    traj = ctx.motion.get(i)
    moving_body = traj is not None and traj.quaternion is not None and traj.moves
    if not (moving_body or ctx.listeners_move):
        return None
    if traj is None or traj.quaternion is None:
        ev = ctx.events
        pos = np.where(bc.on_b[:, None], ev.pos_b[bc.rows], ev.pos_a[bc.rows])
        quat = np.where(bc.on_b[:, None], ev.quat_b[bc.rows], ev.quat_a[bc.rows])
        traj = event_trajectory(ev.t[bc.rows], pos, quat)
        if traj is None:
            return None
    T = np.arange(float(ctx.events.t[bc.rows].min()), ctx.duration + 1.0 / CONTROL_RATE_HZ, 1.0 / CONTROL_RATE_HZ)
    chans = ctx.scene.listeners
    t_l, x_b, amp, xl, X = emission_keyframes(traj, T, chans, ctx.scene.air.c)
    gains = np.repeat(amp[:, :, None], snd.r, axis=2)
    for l, ch in enumerate(chans):
        if ch.ear is None:
            continue
        theta = hrtf.ear_angle(ch.ear_at(t_l[:, l]), xl[:, l], X)
        gains[:, l] *= hrtf.head_shadow(snd.omega[None, :], theta[:, None], c=ctx.scene.air.c)
    return T, x_b, gains


def describe(prep: ShellPrepared) -> tuple[dict, dict]:
    objects = {n: {"shell": {**s.info, **prep.stats.get(n, {})}} for n, s in prep.sounds.items()}
    return {"shells": sorted(prep.sounds)}, objects


SOURCE = register(SourceKind(
    name="shell", prepare=prepare, render=render, describe=describe,
    summary="thin shells (shell = {...} objects): linear or nonlinear (cubature) modal dynamics, impulse limiter"))
