"""The "debris" demo scene: hundreds of small convex fragments of glass or stone falling onto a floor.

What it is
----------
:func:`debris_scene` writes a scene folder: one watertight OBJ per fragment (``frag_000.obj`` ...) and a scene
TOML (``debris.toml``) that drops them, released from a box of air 0.1-0.5 m above a concrete floor with small
random velocities and spins, onto the floor and onto each other. The result is the rattle of a debris shower:
thousands of impacts (about 20 per fragment) within the first second, then the last fragments settling.

Why this scene
--------------
Many small rigid objects are the case that precomputed acceleration noise was made for: a centimetre-sized
fragment of glass or granite is so stiff that its first vibration modes lie near or above 20 kHz, so its sound is
the rigid-body "click" of its sudden acceleration, and one PAN precompute per fragment would cost far more than
the whole animation (Chadwick, Zheng & James 2012, "Precomputed acceleration noise for improved rigid-body
sound", ACM Trans. Graph. 31(4); Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody
animations using precomputed soundbanks", SCA, made for animations of many such objects: every object is
replaced by an ellipsoidal proxy looked up in a shared soundbank).

Choices (all SI: metres, seconds, kilograms)
--------------------------------------------
* Shapes: the convex hull of 10-20 points drawn on an ellipsoid with random semi-axes A >= B >= C and moved
  inwards by up to 15 %: faceted chunks with a few large flat faces, like fractured glass or broken stone.
  Convex bodies collide exactly in the rigid-body engine (it collides convex hulls) and fit the soundbank's
  ellipsoidal proxies well.
* Sizes: the ellipsoid's longest semi-axis is drawn log-uniform in ``size_range`` (default 1-4 cm) and the
  hull's longest principal half-extent must lie in it too: more small pieces than large ones, as in
  fragmentation, 0.7 g to 0.2 kg of glass, within the range where acceleration noise carries the sound.
* Aspect: fragments whose smallest principal extent is below ``min_aspect`` (default 0.25) of the largest are
  redrawn. Slivers and flakes are thin plates: a contact at 3 m/s sinks ~2 mm into the other body at the
  engine's default 2e-4 s step, so they would need a finer step not to pass through each other, and they have
  audible bending modes, which the modal source would then have to compute per fragment.
* Release: fragment centres in a square of side ``spread`` (default grows as sqrt(n), so the footprint density
  is the same for every count) with their lowest point at least ``drop_height[0]`` above the floor and their
  centre at most ``drop_height[1]``: impact speeds of ~1.4-3.1 m/s, the range of debris falling off a table or a
  shelf, all landing within ~0.35 s and then rattling and settling until about 1.2 s (measured with 200 and
  300: ~23 contact events per fragment, 70 % of them on the floor). The default 3 s keeps the whole settling
  and the quiet after it; the rigid-body engine's time grows with the duration (resting contacts are stepped
  too), so a shorter scene renders faster. Bounding spheres, 2 mm apart, rule out any initial overlap.
  Horizontal velocities ~ 0.15 m/s and spins ~ 6 rad/s (standard deviations) make the fall untidy, as after a
  break.
* Count: 200 by default. Measured cold renders on the 2-core machine (shared, so rough): 200 fragments
  ~2 min (loading 2 s, rigid-body dynamics and contact clean-up ~64 s, ground response bank ~50 s, synthesis
  2 s); 300 fragments: dynamics ~110 s. Proxy acceleration noise adds its bank entries (34 distinct entries of
  the 66-entry grid for the default 200 fragments) and its synthesis.
* Floor: concrete, a slab on grade, which the ground source models well as an elastic half-space (Qu & James
  2019); granite and the other floor materials of ``impactsound materials`` may be named instead.
* Listener: 0.8 m above the floor, 0.15 m in front of the pile's centre (about 0.8 m from the fragments, as
  someone leaning over the spill). Above the pile rather than beside it because the ground source tabulates the
  floor's response over the horizontal distance from the listener to each impact, one node per h/32 (at most
  3 cm) for a listener at height h, each node dearer the farther it is. The fragments scatter up to ~0.75 m
  from the centre: measured with 200 fragments, this listener needs 37 nodes (~50 s on 2 cores, cold cache)
  over 0-0.85 m, one 0.75 m to the side at 0.35 m height ~95 nodes over 0.3-1.35 m.
* Sources: ``["acceleration_noise", "ground"]`` (:data:`DEFAULT_SOURCES`). Acceleration noise is the
  fragments' own sound; an own PAN precompute per fragment (seconds to a minute each) is far too slow for
  hundreds, so the scene asks for the proxy soundbank (``acceleration_noise = "proxy"``; Chadwick, Zheng & James
  2012, the paper's own use case) with the ``tiny`` bank preset: about 2 s per entry on 2 cores (34 distinct
  entries for the default 200 fragments, solved on first use and kept), and, since the band scales as 1/A, a
  pulse band of 500 Hz x 0.5 m / A: 25 kHz for a 1 cm fragment, 6 kHz for the largest (4 cm). Its coarse grid
  (5 cm cells at A' = 0.5 m) resolves these entries because min_aspect = 0.25 keeps C' >= 0.125 m.
  The modal source is left
  out: compact centimetre fragments ring, if at all, only at the top of hearing (measured with quadratic tets:
  none of 100 glass fragments of this generator has a mode below 20 kHz; the longest and thinnest, 7 cm rods,
  have one near 18 kHz), so its FEM (~0.8 s per fragment on one core) would buy next to nothing. It can be
  asked for (``sources``), with the cheap radiation of :data:`MODAL_OPTIONS`.

The same arguments (and seed) give bit-identical files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

#: ``material`` aliases: the debris kinds and the material (``impactsound materials``) that each stands for
MATERIAL_ALIASES = {"glass": "glass", "stone": "granite"}
#: default number of fragments (a cold render of this many takes a few minutes on 2 cores; module docstring)
DEFAULT_N_FRAGMENTS = 200
#: sources the scene renders (acceleration noise from the proxy soundbank: module docstring)
DEFAULT_SOURCES = ("acceleration_noise", "ground")
#: soundbank preset of the fragments' proxies (module docstring)
BANK_PRESET = "tiny"
#: ``[source.modal]`` options written when ``sources`` has "modal": quadratic tets (linear ones are too stiff and
#: push the few modes out of hearing), few modes, and compact low-order radiation (FFAT maps from an FDTD solve
#: per fragment would cost more than the rest of the render)
MODAL_OPTIONS = {"modal_order": 2, "max_modes": 20, "transfer": "low_order"}
#: file name of the scene TOML in the output folder
SCENE_FILE = "debris.toml"

_GAP = 0.002                 # smallest clearance between two fragments' bounding spheres at release [m]
_POINTS = (10, 20)           # hull points per fragment (inclusive range)
_SHRINK = 0.15               # hull points move inwards by up to this fraction of the ellipsoid radius
_V_SIGMA = 0.15              # horizontal release velocity, standard deviation per axis [m/s]
_VZ_RANGE = (-0.3, 0.0)      # vertical release velocity range [m/s]
_W_SIGMA = 6.0               # release spin, standard deviation per axis [rad/s]
_DECIMALS = 7                # vertex coordinates are rounded to 0.1 um before the hull (exact in the OBJ text)


@dataclass
class Fragment:
    """One fragment: its surface in file coordinates [m] and its release state (world frame)."""

    vertices: np.ndarray          # (n, 3) [m], rounded to _DECIMALS
    faces: np.ndarray             # (m, 3) int, outward winding
    com: np.ndarray               # centre of mass in file coordinates [m]
    radius: float                 # bounding radius about the centre of mass [m]
    half_extents: np.ndarray      # principal half-extents, descending [m]
    position: np.ndarray | None = None     # world position of the centre of mass [m]
    euler_deg: np.ndarray | None = None    # intrinsic x-y-z Euler angles [deg]
    velocity: np.ndarray | None = None     # [m/s]
    angular_velocity: np.ndarray | None = None   # world frame [rad/s]


def principal_half_extents(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Half the extent of a closed surface along each of its principal axes of inertia (uniform density),
    descending [m]."""
    import trimesh
    mesh = trimesh.Trimesh(np.asarray(vertices, np.float64), np.asarray(faces, np.int64), process=False)
    axes = np.asarray(mesh.principal_inertia_vectors, np.float64)          # rows: unit principal axes
    proj = (np.asarray(mesh.vertices) - mesh.center_mass) @ axes.T
    return np.sort(np.ptp(proj, axis=0) / 2.0)[::-1]


def random_fragment(rng: np.random.Generator, size_range=(0.01, 0.04), min_aspect: float = 0.25,
                    max_tries: int = 1000) -> Fragment:
    """One random convex fragment (see the module docstring), redrawn until its longest principal half-extent
    lies in ``size_range`` [m] and its smallest / largest principal extent is at least ``min_aspect``."""
    import trimesh
    lo, hi = size_range
    for _ in range(max_tries):
        a = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        b = a * rng.uniform(max(min_aspect, 0.3), 1.0)
        c = a * rng.uniform(max(min_aspect, 0.3), b / a)
        d = rng.normal(size=(int(rng.integers(_POINTS[0], _POINTS[1] + 1)), 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        pts = d * np.array([a, b, c]) * rng.uniform(1.0 - _SHRINK, 1.0, size=(len(d), 1))
        pts = np.round(pts, _DECIMALS)
        hull = trimesh.convex.convex_hull(pts)            # outward winding, only the hull's vertices kept
        v = np.asarray(hull.vertices, np.float64)
        f = np.asarray(hull.faces, np.int64)
        if len(f) < 8 or not hull.is_watertight or hull.volume <= 0:
            continue
        half = principal_half_extents(v, f)
        if not (lo <= half[0] <= hi and half[2] >= min_aspect * half[0]):
            continue
        com = np.asarray(hull.center_mass, np.float64)
        radius = float(np.linalg.norm(v - com, axis=1).max())
        return Fragment(v, f, com, radius, half)
    raise InputError(f"debris_scene: no fragment within size_range = {size_range} m and min_aspect = "
                     f"{min_aspect} in {max_tries} draws; widen the range or lower min_aspect")


def place_fragments(frags: list[Fragment], rng: np.random.Generator, spread: float, drop_height=(0.1, 0.5),
                    max_tries: int = 20000) -> None:
    """Give every fragment a release pose and velocity (in place): centres uniform in the square of side
    ``spread`` [m] around the origin, lowest point >= ``drop_height[0]`` and centre <= ``drop_height[1]`` above
    the floor, bounding spheres at least 2 mm apart (random sequential placement, largest first)."""
    from scipy.spatial.transform import Rotation
    z_lo, z_hi = drop_height
    placed_c, placed_r = np.empty((0, 3)), np.empty(0)
    for k in sorted(range(len(frags)), key=lambda i: -frags[i].radius):
        fr = frags[k]
        zmin = z_lo + fr.radius
        if zmin > z_hi:
            raise InputError(f"debris_scene: drop_height = {tuple(drop_height)} m leaves no room for a fragment "
                             f"of bounding radius {fr.radius:.3g} m; raise the upper height")
        for _ in range(max_tries):
            c = np.array([rng.uniform(-spread / 2, spread / 2), rng.uniform(-spread / 2, spread / 2),
                          rng.uniform(zmin, z_hi)])
            if not len(placed_r) or np.all(np.linalg.norm(placed_c - c, axis=1) >= placed_r + fr.radius + _GAP):
                break
        else:
            raise InputError(f"debris_scene: could not place {len(frags)} fragments without overlap in a "
                             f"{spread:g} m square between {z_lo:g} and {z_hi:g} m; widen spread or drop_height, "
                             "or use fewer")
        placed_c = np.vstack([placed_c, c])
        placed_r = np.append(placed_r, fr.radius)
        fr.position = np.round(c, 6)
        fr.euler_deg = np.round(Rotation.random(random_state=rng).as_euler("XYZ", degrees=True), 4)
        fr.velocity = np.round(np.array([rng.normal(0, _V_SIGMA), rng.normal(0, _V_SIGMA),
                                         rng.uniform(*_VZ_RANGE)]), 4)
        fr.angular_velocity = np.round(rng.normal(0.0, _W_SIGMA, 3), 3)


def write_obj(path: Path, vertices: np.ndarray, faces: np.ndarray, comment: str = "") -> None:
    """A triangle mesh as OBJ text (metres; faces 1-based), deterministic to the byte."""
    lines = [f"# {comment}"] if comment else []
    lines += [f"v {x:.{_DECIMALS}f} {y:.{_DECIMALS}f} {z:.{_DECIMALS}f}" for x, y, z in vertices]
    lines += [f"f {i + 1} {j + 1} {k + 1}" for i, j, k in faces]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _vec(v) -> str:
    return "[" + ", ".join(repr(float(x)) for x in v) + "]"


def debris_scene(out_dir, *, n_fragments: int = DEFAULT_N_FRAGMENTS, seed: int = 0, material: str = "glass",
                 duration: float = 3.0, size_range: tuple[float, float] = (0.01, 0.04), min_aspect: float = 0.25,
                 drop_height: tuple[float, float] = (0.1, 0.5), spread: float | None = None,
                 floor: str = "concrete", listener=(0.0, -0.15, 0.8), sample_rate: int = 48000,
                 sources=DEFAULT_SOURCES) -> Path:
    """Write the debris scene (module docstring) into ``out_dir``: ``frag_000.obj`` ... and ``debris.toml``.

    Parameters
    ----------
    out_dir : str or Path
        Folder to write into (created if missing; files of the same names are overwritten, others left alone).
    n_fragments : int
        Number of fragments (>= 1).
    seed : int
        Seeds the shapes, poses and velocities (and the scene's ``[scene] seed``). The same arguments give
        bit-identical files.
    material : str
        "glass" or "stone" (granite), or any name from ``impactsound materials``.
    duration : float
        Length of the rendered sound [s].
    size_range : (float, float)
        Range of the fragments' longest principal half-extent [m]; log-uniform within it.
    min_aspect : float
        Smallest accepted ratio of a fragment's smallest to largest principal extent (0 < min_aspect < 1).
    drop_height : (float, float)
        Release heights above the floor [m]: every fragment's lowest point above the first, its centre of mass
        below the second.
    spread : float, optional
        Side of the square release area [m], centred on the origin; default 0.035 sqrt(n_fragments), at least
        0.2 (the same number of fragments per square metre for every count).
    floor : str
        Ground material (``impactsound materials``).
    listener : (float, float, float)
        Microphone position [m].
    sample_rate : int
        Output sample rate [Hz].
    sources : sequence of str
        ``[scene] sources``.

    Returns
    -------
    Path
        The scene TOML (``out_dir/debris.toml``); its mesh paths are relative to ``out_dir``.
    """
    from ..materials import get_material
    n = int(n_fragments)
    if n < 1:
        raise InputError(f"debris_scene: n_fragments = {n_fragments} must be at least 1")
    if not (0 < size_range[0] < size_range[1]):
        raise InputError(f"debris_scene: size_range = {tuple(size_range)} m must be increasing and positive")
    if not (0 < min_aspect < 1):
        raise InputError(f"debris_scene: min_aspect = {min_aspect} must lie in (0, 1)")
    if not (0 <= drop_height[0] < drop_height[1]):
        raise InputError(f"debris_scene: drop_height = {tuple(drop_height)} m must be increasing and >= 0")
    if not (math.isfinite(duration) and duration > 0):
        raise InputError(f"debris_scene: duration = {duration} s must be positive")
    mat = MATERIAL_ALIASES.get(material, material)
    get_material(mat, where="debris_scene: material")          # unknown names fail here, listing the known ones
    get_material(floor, where="debris_scene: floor")
    spread = float(spread) if spread is not None else max(0.2, 0.035 * math.sqrt(n))
    rng = np.random.default_rng(seed)
    frags = [random_fragment(rng, size_range, min_aspect) for _ in range(n)]
    place_fragments(frags, rng, spread, drop_height)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    width = max(3, len(str(n - 1)))
    names = [f"frag_{k:0{width}d}" for k in range(n)]
    for name, fr in zip(names, frags):
        write_obj(out / f"{name}.obj", fr.vertices, fr.faces, f"impactsound debris fragment {name} (seed {seed}; "
                  f"metres; convex, outward winding)")
    toml = [
        f"# Debris demo: {n} convex {material} fragments (longest half-extent {size_range[0] * 100:g}-"
        f"{size_range[1] * 100:g} cm) dropped from {drop_height[0]:g}-{drop_height[1]:g} m onto a {floor} floor.",
        f"# Written by impactsound.scene.debris.debris_scene (seed {seed}). SI units; mesh paths relative to this "
        "file.",
        "[scene]",
        f"duration = {float(duration)!r}",
        f"sample_rate = {int(sample_rate)}",
        f"seed = {int(seed)}",
        "sources = [" + ", ".join(f'"{s}"' for s in sources) + "]",
    ]
    if "acceleration_noise" in sources:
        toml += ['acceleration_noise = "proxy"   # every fragment from the proxy soundbank (an own PAN solve each: '
                 "too slow)"]
    toml += [""]
    if "acceleration_noise" in sources:
        toml += ["[source.acceleration_noise]",
                 f'bank = "{BANK_PRESET}"           # seconds per entry; pulse band 500 Hz x 0.5 m / A (25 kHz at '
                 "A = 1 cm, 6 kHz at 4 cm)", ""]
    if "modal" in sources:
        toml += ["[source.modal]", *(f"{k} = " + (f'"{v}"' if isinstance(v, str) else repr(v))
                                     for k, v in MODAL_OPTIONS.items()), ""]
    toml += [
        "[ground]",
        f'material = "{floor}"',
        "",
        "[[listener]]",
        'name = "mic"',
        f"position = {_vec(listener)}",
    ]
    for name, fr in zip(names, frags):
        toml += ["", "[[object]]", f'name = "{name}"', f'mesh = "{name}.obj"', f'material = "{mat}"',
                 f"position = {_vec(fr.position)}", f"euler_deg = {_vec(fr.euler_deg)}",
                 f"velocity = {_vec(fr.velocity)}", f"angular_velocity = {_vec(fr.angular_velocity)}"]
    path = out / SCENE_FILE
    path.write_text("\n".join(toml) + "\n", encoding="utf-8")
    return path


__all__ = ["debris_scene", "random_fragment", "place_fragments", "principal_half_extents", "write_obj",
           "MATERIAL_ALIASES", "DEFAULT_N_FRAGMENTS", "DEFAULT_SOURCES", "MODAL_OPTIONS", "SCENE_FILE"]
