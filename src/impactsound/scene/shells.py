"""Built-in thin-shell surfaces: open (or closed) triangle surface meshes in metres, for thin-shell sound.

These are the Table 1 objects of Chadwick, An & James 2009 ("Harmonic Shells"): a cymbal, a ribbed trash can
and its lid, a water bottle, plus a flat sheet. Unlike the solid primitives (``primitives.py``), a shell is a
mid-surface with no wall thickness; the thickness is a material/shell parameter given elsewhere.

Conventions
-----------
* Surfaces of revolution have their axis along +z. The trash can and the water bottle stand on z = 0; the
  cymbal's bell base and the lid's dome base are at z = 0 (the bell/dome rise above it, the bow/lip drop below).
  The sheet lies in the z = 0 plane, centred on the origin.
* Face normals point "outward": away from the inside of the can/bottle, up (+z) on the cymbal, the lid and the
  sheet. Every interior edge is used once in each direction (consistent orientation).
* Meshes are built with ``process=False`` and have no duplicate vertices; every edge is shared by one (boundary)
  or two triangles. Rings of a surface of revolution carry a number of segments that follows their radius, so
  triangles stay close to equilateral from the rim down to the axis, which is closed with a fan of six
  near-equilateral triangles (no slivers at the pole). Near a small centre hole (cymbal) the edge length is
  graded up from the hole rim's edge length, so the rim carries no slivers either.
* ``resolution``: an ``int`` is the number of segments around the largest circumference (along the longer side
  for the sheet); a ``float`` is the target edge length in metres. Default: 96 segments.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Callable

import numpy as np
import trimesh

from ..errors import InputError

# Parameters each shell takes, with defaults [m]. Sizes follow Chadwick, An & James 2009, Table 1 (trash can
# 0.75 m, lid 0.55 m, cymbal 0.50 m; the 0.46 m water bottle is scaled down to an ordinary 0.25 m bottle).
SHELL_SHAPES: dict[str, dict[str, float | int | bool | list]] = {
    "sheet": {"width": 0.30, "height": 0.20},
    "cymbal": {"radius": 0.25, "bell_radius": 0.06, "bell_height": 0.02, "profile_drop": 0.015,
               "hole_radius": 0.0065},
    "trash_can": {"radius": 0.25, "height": 0.75, "ribs": 3, "rib_depth": 0.01, "rib_width": 0.04},
    "trash_lid": {"radius": 0.275, "dome_height": 0.04, "lip_height": 0.02},
    "water_bottle": {"height": 0.25, "body_radius": 0.035, "neck_radius": 0.013, "neck_height": 0.03,
                     "shoulder_height": 0.04, "closed": False},
    # Table 1's recycling bin is 0.61 m (its footprint is not given: a common bin's 0.40 x 0.30 m)
    "recycling_bin": {"width": 0.40, "depth": 0.30, "height": 0.61},
}

# Suggested material per shell (names as listed by `impactsound materials`), from Chadwick, An & James 2009,
# Table 1: steel trash can and lid, bronze cymbal, polycarbonate water bottle.
SHELL_MATERIAL: dict[str, str] = {
    "sheet": "steel",
    "cymbal": "bronze",
    "trash_can": "steel",
    "trash_lid": "steel",
    "water_bottle": "polycarbonate",
    "recycling_bin": "polycarbonate",
}

DEFAULT_SEGMENTS = 96
_MIN_RING = 6          # segments on the smallest ring (the pole fan is then near-equilateral)
_SQ3_2 = math.sqrt(3.0) / 2.0


# ----------------------------------------------------------------------------------------------------- checks
def _number(where, key, v):
    if isinstance(v, bool):
        raise InputError(f"{where}.{key} = {v!r} is not a number")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}.{key} = {v!r} is not a number") from None
    if not np.isfinite(f):
        raise InputError(f"{where}.{key} = {v!r} must be finite")
    return f


def _positive(where, key, v):
    f = _number(where, key, v)
    if f <= 0:
        raise InputError(f"{where}.{key} = {v!r} must be a positive length in metres")
    return f


def _nonneg(where, key, v):
    f = _number(where, key, v)
    if f < 0:
        raise InputError(f"{where}.{key} = {v!r} must be >= 0 (metres; 0 turns it off)")
    return f


def _count(where, key, v):
    f = _number(where, key, v)
    if f < 0 or f != int(f):
        raise InputError(f"{where}.{key} = {v!r} must be a whole number >= 0")
    return int(f)


def _flag(where, key, v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise InputError(f"{where}.{key} = {v!r} must be true or false")


def _edge_length(where, resolution, longest):
    """Target edge length [m] from ``resolution`` (int: segments over ``longest`` metres; float: metres)."""
    if resolution is None:
        resolution = DEFAULT_SEGMENTS
    if isinstance(resolution, (bool, np.bool_)) or not isinstance(resolution, Real):
        raise InputError(f"{where}.resolution = {resolution!r} must be a segment count (int) or an edge "
                         f"length in metres (float)")
    if isinstance(resolution, Integral):
        if resolution < _MIN_RING:
            raise InputError(f"{where}.resolution = {resolution!r} segments is too coarse; use >= {_MIN_RING}")
        if resolution > 4000:
            raise InputError(f"{where}.resolution = {resolution!r} segments is too fine; use <= 4000")
        return longest / int(resolution)
    h = float(resolution)
    if not np.isfinite(h) or h <= 0:
        raise InputError(f"{where}.resolution = {resolution!r} must be a positive edge length in metres")
    if h > 0.5 * longest:
        raise InputError(f"{where}.resolution = {resolution!r} m is coarser than the shape "
                         f"(size {longest:.3g} m); use a smaller edge length")
    if longest / h > 4000:
        raise InputError(f"{where}.resolution = {resolution!r} m would make over 4000 segments per side; "
                         f"use a larger edge length")
    return h


# ------------------------------------------------------------------------------------------------- builders
def make_shell(shape: str, params: dict | None = None, resolution: int | float | None = None,
               where: str = "object") -> trimesh.Trimesh:
    """Build thin-shell surface ``shape`` with ``params`` (see SHELL_SHAPES for names and defaults, SI metres).

    ``resolution``: int = segments around the largest circumference (along the sheet's longer side), float =
    target edge length [m]; None = 96 segments. Returns a ``trimesh.Trimesh`` built with ``process=False``.
    """
    if shape not in SHELL_SHAPES:
        raise InputError(f"{where}.shape = {shape!r} is not a built-in shell; choose one of "
                         f"{', '.join(SHELL_SHAPES)}")
    p = dict(SHELL_SHAPES[shape])
    if params is not None and not isinstance(params, dict):
        raise InputError(f"{where}: shell parameters must be a table of name = value, got {params!r}")
    for k, v in (params or {}).items():
        if k not in p:
            raise InputError(f"{where}.{k}: {shape} takes {', '.join(SHELL_SHAPES[shape])}, not {k!r}")
        p[k] = v
    return _BUILDERS[shape](p, resolution, where)


def _sheet(p, resolution, where):
    W = _positive(where, "width", p["width"])
    H = _positive(where, "height", p["height"])
    h = _edge_length(where, resolution, max(W, H))
    nx, ny = max(1, math.ceil(W / h - 1e-9)), max(1, math.ceil(H / h - 1e-9))
    x = np.linspace(-W / 2, W / 2, nx + 1)
    y = np.linspace(-H / 2, H / 2, ny + 1)
    X, Y = np.meshgrid(x, y, indexing="ij")
    verts = np.c_[X.ravel(), Y.ravel(), np.zeros(X.size)]
    idx = lambda i, j: i * (ny + 1) + j  # noqa: E731
    I, J = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    I, J = I.ravel(), J.ravel()
    a, b, c, d = idx(I, J), idx(I + 1, J), idx(I + 1, J + 1), idx(I, J + 1)
    # every square split along the same diagonal (valence 6: the regular triangle lattice, sheared), CCW seen
    # from +z. Not the alternating "union jack" split (valence 4 / 8): the flap bending of fem.shell fails the
    # patch test there and its plate modes converge to a limit 20-25 % too low; on this grid they converge to the
    # Kirchhoff values (tests/validation/test_shell_references.py). The vertices stay the (nx+1) x (ny+1) grid.
    return trimesh.Trimesh(verts, np.vstack([np.c_[a, b, c], np.c_[a, c, d]]), process=False)


# A profile piece: (function t in [0, 1] -> (r, z) arrays, minimum number of segments on it)
Piece = tuple[Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], int]


def _line(r0, z0, r1, z1, min_seg=1) -> Piece:
    return (lambda t: (r0 + (r1 - r0) * t, z0 + (z1 - z0) * t)), min_seg


def _sample_profile(pieces: list[Piece], h: float, h0: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample the profile at ~equal arc length; joints are kept exactly. Returns (points, local edge length).

    The spacing along the profile is sqrt(3)/2 of the local edge length (equilateral strips) and never below
    h/4 on pieces that ask for a minimum number of segments. ``h0``: edge length at the start of the profile
    (a small hole rim), growing by 40 % of the distance travelled up to ``h`` (graded, no slivers at the rim).
    """
    hl = (lambda S: h) if h0 is None or h0 >= h else (lambda S: min(h, h0 + 0.4 * S))
    out, hs, S0 = [], [], 0.0
    for k, (f, min_seg) in enumerate(pieces):
        t = np.linspace(0.0, 1.0, 4001)
        r, z = f(t)
        s = np.r_[0.0, np.cumsum(np.hypot(np.diff(r), np.diff(z)))]
        L = s[-1]
        if hl(S0) >= h:
            n = max(1, math.ceil(L / (_SQ3_2 * h) - 1e-9))
            if n < min_seg:
                n = max(n, min(min_seg, int(L / (0.25 * h))))
            pos = np.linspace(0.0, L, n + 1)
        else:  # graded: march with the local spacing, then stretch to land exactly on the piece's end
            pos = [0.0]
            while pos[-1] < L:
                pos.append(pos[-1] + _SQ3_2 * hl(S0 + pos[-1]))
            pos = np.asarray(pos)
            if len(pos) > 2 and (L - pos[-2]) < 0.5 * (pos[-1] - pos[-2]):
                pos = pos[:-1]
            pos = pos * (L / pos[-1])
        tt = np.interp(pos, s, t)
        tt[0], tt[-1] = 0.0, 1.0
        rr, zz = f(tt)
        pts = np.c_[rr, zz]
        loc = np.array([hl(S0 + x) for x in pos])
        out.append(pts if k == 0 else pts[1:])
        hs.append(loc if k == 0 else loc[1:])
        S0 += L
    prof = np.vstack(out)
    prof[np.abs(prof[:, 0]) < 1e-12 * max(1.0, np.abs(prof).max()), 0] = 0.0
    return prof, np.concatenate(hs)


def _ring_counts(r: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Segments per ring: ~2 pi r / h, at least 6; kept constant until the ideal drifts > 10 % (no zig-zag)."""
    ideal = np.maximum(_MIN_RING, np.rint(2 * np.pi * r / h)).astype(int)
    n = ideal.copy()
    for i in range(1, len(r)):
        if r[i] == 0.0 or r[i - 1] == 0.0:
            continue
        if abs(ideal[i] - n[i - 1]) <= 0.10 * n[i - 1]:
            n[i] = n[i - 1]
    n[r == 0.0] = 1
    return n


def _revolve_open(profile: tuple[np.ndarray, np.ndarray], flip: bool = False) -> trimesh.Trimesh:
    """Surface of revolution about z of an open (r, z) polyline; r = 0 only at its ends (closed by a fan).

    Normals follow (dz, -dr) of the profile direction (``flip`` reverses them). Neighbouring rings with
    different segment counts are stitched by advancing along whichever ring is angularly behind.
    """
    (r, z), h = profile[0].T, profile[1]
    if np.any(r[1:-1] <= 0.0) or np.any(r < 0.0):
        raise AssertionError("profile must stay off the axis except at its ends")  # programming error
    counts = _ring_counts(r, h)
    verts, starts, angles = [], [], []
    nv, off = 0, 0.0
    for i, (ri, zi, n) in enumerate(zip(r, z, counts)):
        if n == 1:
            th = np.zeros(1)
            verts.append([[0.0, 0.0, zi]])
        else:
            off += np.pi / n          # stagger consecutive rings by half a segment -> near-equilateral strips
            th = off + 2 * np.pi * np.arange(n) / n
            verts.append(np.c_[ri * np.cos(th), ri * np.sin(th), np.full(n, zi)])
        starts.append(nv)
        angles.append(th)
        nv += n
    faces = []
    for i in range(len(r) - 1):
        faces.append(_stitch(starts[i], angles[i], starts[i + 1], angles[i + 1]))
    F = np.vstack(faces)
    if flip:
        F = F[:, ::-1]
    return trimesh.Trimesh(np.vstack(verts), F, process=False)


def _stitch(sa, ta, sb, tb) -> np.ndarray:
    """Triangles between ring A (start index sa, angles ta) and ring B, CCW in (angle, profile) order."""
    na, nb = len(ta), len(tb)
    if na == 1:
        k = np.arange(nb)
        return np.c_[np.full(nb, sa), sb + (k + 1) % nb, sb + k]
    if nb == 1:
        i = np.arange(na)
        return np.c_[sa + i, sa + (i + 1) % na, np.full(na, sb)]
    two_pi = 2 * np.pi
    # start B at the vertex angularly closest to A's first vertex; unwrap both rings to increasing angles
    k0 = int(np.argmin(np.abs((tb - ta[0] + np.pi) % two_pi - np.pi)))
    a = np.r_[ta, ta[0] + two_pi]
    b = tb[(k0 + np.arange(nb + 1)) % nb].copy()
    b = ta[0] + (b - ta[0] + np.pi) % two_pi - np.pi
    b = b[0] + np.r_[0.0, np.cumsum((np.diff(b)) % two_pi)]
    tris = []
    i = k = 0
    while i < na or k < nb:
        # advance along the ring whose next edge midpoint comes first (keeps the strip well shaped)
        if k == nb or (i < na and a[i] + a[i + 1] <= b[k] + b[k + 1]):
            tris.append((sa + i % na, sa + (i + 1) % na, sb + (k0 + k) % nb))
            i += 1
        else:
            tris.append((sa + i % na, sb + (k0 + k + 1) % nb, sb + (k0 + k) % nb))
            k += 1
    return np.asarray(tris, dtype=np.int64)


# cymbal ------------------------------------------------------------------------------------------------------
def _cymbal(p, resolution, where):
    R = _positive(where, "radius", p["radius"])
    b = _positive(where, "bell_radius", p["bell_radius"])
    hb = _positive(where, "bell_height", p["bell_height"])
    drop = _nonneg(where, "profile_drop", p["profile_drop"])
    a = _nonneg(where, "hole_radius", p["hole_radius"])
    if b >= R:
        raise InputError(f"{where}.bell_radius = {b:g} m must be smaller than radius = {R:g} m")
    if hb >= b:
        raise InputError(f"{where}.bell_height = {hb:g} m must be smaller than bell_radius = {b:g} m "
                         f"(the bell is a spherical cap, at most a half sphere)")
    if a >= b:
        raise InputError(f"{where}.hole_radius = {a:g} m must be smaller than bell_radius = {b:g} m")
    if drop >= R - b:
        raise InputError(f"{where}.profile_drop = {drop:g} m must be smaller than radius - bell_radius = "
                         f"{R - b:g} m (a slight conical bow)")
    h = _edge_length(where, resolution, 2 * np.pi * R)
    rho = (b * b + hb * hb) / (2 * hb)       # bell: spherical cap of radius rho, base radius b, height hb
    zc = hb - rho                            # sphere centre (on the axis, below the cap top at z = hb)
    phi0, phi1 = math.asin(a / rho), math.asin(b / rho)

    def bell(t):
        ph = phi0 + (phi1 - phi0) * t
        return rho * np.sin(ph), zc + rho * np.cos(ph)

    h0 = 2 * np.pi * a / max(_MIN_RING, round(2 * np.pi * a / h)) if a > 0 else None  # hole-rim edge
    prof = _sample_profile([(bell, 4), _line(b, 0.0, R, -drop)], h, h0)
    return _revolve_open(prof, flip=True)


# trash can ---------------------------------------------------------------------------------------------------
def rib_centres(height: float, ribs: int) -> np.ndarray:
    """Heights of the rib centres on the trash-can wall: equally spaced, ribs + 1 gaps."""
    return height * np.arange(1, ribs + 1) / (ribs + 1)


def _trash_can(p, resolution, where):
    R = _positive(where, "radius", p["radius"])
    H = _positive(where, "height", p["height"])
    n_ribs = _count(where, "ribs", p["ribs"])
    dep = _positive(where, "rib_depth", p["rib_depth"]) if n_ribs else 0.0
    w = _positive(where, "rib_width", p["rib_width"]) if n_ribs else 0.0
    if n_ribs:
        if dep >= 0.5 * R:
            raise InputError(f"{where}.rib_depth = {dep:g} m must be smaller than radius/2 = {R / 2:g} m")
        if w >= H / (n_ribs + 1):
            raise InputError(f"{where}.rib_width = {w:g} m is too wide: {n_ribs} ribs on a {H:g} m wall need "
                             f"rib_width < height/(ribs+1) = {H / (n_ribs + 1):g} m")
    h = _edge_length(where, resolution, 2 * np.pi * R)
    pieces: list[Piece] = [_line(0.0, 0.0, R, 0.0)]
    z = 0.0
    for zc in rib_centres(H, n_ribs):
        z0 = zc - w / 2
        pieces.append(_line(R, z, R, z0))

        def rib(t, z0=z0):  # inward groove, smooth cosine profile
            return R - dep * 0.5 * (1 - np.cos(2 * np.pi * t)), z0 + w * t
        pieces.append((rib, 8))
        z = z0 + w
    pieces.append(_line(R, z, R, H))
    prof = _sample_profile(pieces, h)
    return _revolve_open(prof)


# trash lid ---------------------------------------------------------------------------------------------------
def _trash_lid(p, resolution, where):
    R = _positive(where, "radius", p["radius"])
    hd = _positive(where, "dome_height", p["dome_height"])
    lip = _positive(where, "lip_height", p["lip_height"])
    if hd >= R:
        raise InputError(f"{where}.dome_height = {hd:g} m must be smaller than radius = {R:g} m "
                         f"(the dome is a spherical cap, at most a half sphere)")
    if lip >= R:
        raise InputError(f"{where}.lip_height = {lip:g} m must be smaller than radius = {R:g} m")
    h = _edge_length(where, resolution, 2 * np.pi * R)
    rho = (R * R + hd * hd) / (2 * hd)
    zc = hd - rho
    phi1 = math.asin(R / rho)

    def dome(t):
        ph = phi1 * t
        return rho * np.sin(ph), zc + rho * np.cos(ph)

    prof = _sample_profile([(dome, 4), _line(R, 0.0, R, -lip, 2)], h)
    return _revolve_open(prof, flip=True)


# water bottle ------------------------------------------------------------------------------------------------
def _water_bottle(p, resolution, where):
    H = _positive(where, "height", p["height"])
    Rb = _positive(where, "body_radius", p["body_radius"])
    Rn = _positive(where, "neck_radius", p["neck_radius"])
    hn = _positive(where, "neck_height", p["neck_height"])
    hs = _positive(where, "shoulder_height", p["shoulder_height"])
    closed = _flag(where, "closed", p["closed"])
    if Rn >= Rb:
        raise InputError(f"{where}.neck_radius = {Rn:g} m must be smaller than body_radius = {Rb:g} m")
    if hn + hs >= H:
        raise InputError(f"{where}: neck_height + shoulder_height = {hn + hs:g} m must be smaller than "
                         f"height = {H:g} m")
    h = _edge_length(where, resolution, 2 * np.pi * Rb)
    z1, z2 = H - hn - hs, H - hn

    def shoulder(t):  # cosine blend from the body radius down to the neck radius
        return Rn + (Rb - Rn) * 0.5 * (1 + np.cos(np.pi * t)), z1 + hs * t

    pieces: list[Piece] = [_line(0.0, 0.0, Rb, 0.0), _line(Rb, 0.0, Rb, z1), (shoulder, 6),
                           _line(Rn, z2, Rn, H, 2)]
    if closed:
        pieces.append(_line(Rn, H, 0.0, H))
    prof = _sample_profile(pieces, h)
    return _revolve_open(prof)


def _recycling_bin(p, resolution, where):
    """An open-top rectangular bin: a floor of width x depth (x, y) at z = 0 and four walls up to ``height``.

    One structured grid: the walls are the strip (perimeter position s, height z), whose first row is the floor's
    boundary; the floor is the (i, j) grid inside it. Every quad is split along the same diagonal (the lattice on
    which flap bending passes the patch test, as for the sheet); the walls meet each other and the floor at right
    angles, creases the discrete shell keeps as rest angles. Normals point out of the bin. ``resolution`` counts
    segments around the rim (2 (width + depth))."""
    W = _positive(where, "width", p["width"])
    D = _positive(where, "depth", p["depth"])
    H = _positive(where, "height", p["height"])
    h = _edge_length(where, resolution, 2.0 * (W + D))
    nw, nd, nz = (max(1, math.ceil(x / h - 1e-9)) for x in (W, D, H))
    xs, ys = np.linspace(-W / 2, W / 2, nw + 1), np.linspace(-D / 2, D / 2, nd + 1)
    # the rim ring, counter-clockwise seen from above from the corner (-W/2, -D/2): (x, y) of ring index k
    ring = np.vstack([np.c_[xs[:-1], np.full(nw, -D / 2)], np.c_[np.full(nd, W / 2), ys[:-1]],
                      np.c_[xs[::-1][:-1], np.full(nw, D / 2)], np.c_[np.full(nd, -W / 2), ys[::-1][:-1]]])
    N = len(ring)                                               # 2 (nw + nd)
    zs = np.linspace(0.0, H, nz + 1)
    wall = np.c_[np.tile(ring, (nz + 1, 1)), np.repeat(zs, N)]   # level l, ring k: row l N + k
    I, J = np.meshgrid(np.arange(1, nw), np.arange(1, nd), indexing="ij")
    inner = np.c_[xs[I.ravel()], ys[J.ravel()], np.zeros(I.size)]
    verts = np.vstack([wall, inner])

    def floor_index(i, j):                                       # floor grid (i, j) -> vertex row
        i, j = np.asarray(i), np.asarray(j)
        k = np.where(j == 0, i, np.where(i == nw, nw + j, np.where(j == nd, nw + nd + (nw - i),
                                                                       2 * nw + nd + (nd - j))))
        interior = (i > 0) & (i < nw) & (j > 0) & (j < nd)
        return np.where(interior, len(wall) + (i - 1) * (nd - 1) + (j - 1), k % N)

    k, l = np.meshgrid(np.arange(N), np.arange(nz), indexing="ij")
    k, l = k.ravel(), l.ravel()
    a, b = l * N + k, l * N + (k + 1) % N
    c, d = (l + 1) * N + (k + 1) % N, (l + 1) * N + k
    walls = np.vstack([np.c_[a, b, c], np.c_[a, c, d]])         # normal (ds x dz): outward
    I, J = np.meshgrid(np.arange(nw), np.arange(nd), indexing="ij")
    I, J = I.ravel(), J.ravel()
    fa, fb, fc, fd = floor_index(I, J), floor_index(I + 1, J), floor_index(I + 1, J + 1), floor_index(I, J + 1)
    floor = np.vstack([np.c_[fa, fc, fb], np.c_[fa, fd, fc]])   # normal -z: out of the bin
    return trimesh.Trimesh(verts, np.vstack([walls, floor]), process=False)


_BUILDERS = {"sheet": _sheet, "cymbal": _cymbal, "trash_can": _trash_can, "trash_lid": _trash_lid,
             "water_bottle": _water_bottle, "recycling_bin": _recycling_bin}
