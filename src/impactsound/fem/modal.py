"""Modal analysis of one solid object: surface -> tets -> K, M -> modes -> ModalModel, with a content-hashed cache.

Free-free linear modal analysis of the tetrahedralised solid: the generalised eigenproblem K u_j = w_j^2 M u_j,
mass-normalised modes, the zero-frequency rigid-body modes discarded (Chadwick, An & James 2009, "Harmonic
Shells: A Practical Nonlinear Sound Model for Near-Rigid Thin Shells", ACM Trans. Graph. 28(5), sec. 2.2,
eqs. 7-8, there for shells, here for the 3-D solid).

Default resolution (documented choice): P2 elements with a target edge of max(shortest bounding-box side / 5,
longest side / 25) (``mesh.tetra._default_max_edge``), which TetGen enforces as the volume of a regular tet of
that edge, so its tets come out ~2x shorter: a few-cm object gets a few hundred to ~2 k vertices, i.e. ~1-10 k
P2 nodes, solved in seconds. Measured with TetGen at this density (P2 modes below 20 kHz against a mesh with
half the edge): within 0.02-0.9 % for compact, bar- and plate-like objects (the demo's bar, ball and block, a
2 mm plate, a torus, an L-bracket), but 2.5-4 % high for 5 mm curved walls (the demo bowl, a mug). So a wall
bent into a volume (2 V / A under a third of the smallest side) gets at most 0.8 x its thickness, two elements
through the wall: the mug 0.48 %, the bowl 0.10 % (against half the wall), for ~10-18x the solve time (33 s and
20 s on 2 cores), within a budget of ~40 k tets that walls much thinner than their extent exceed (they get a
coarser edge; the thin-shell model is made for them). Pass ``max_edge`` for higher bands.

The tet mesher is ``mesher`` (``mesh.tetra.tetrahedralize``: "tetgen", "ftetwild", "gmsh", "auto"; None is
``mesh.tetra.DEFAULT_MESHER``), each under its own licence (TetGen AGPL-3.0-or-later, fTetWild MPL-2.0, Gmsh
GPL-2.0-or-later; the ``mesh.tetra`` module docstring compares them); the mesher and its package's version are
part of the cache key.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..assets import asset_lock, cache_dir, content_hash
from ..errors import AssetError, InputError, MeshError
from ..materials import Material
from ..mesh.surface import check_surface
from ..mesh.tetra import (DEFAULT_QUALITY, _box_edge, _default_max_edge, boundary_faces, ftetwild_version,
                          orient_tets, resolve_mesher, tetrahedralize)
from .assembly import P2_EDGES, assemble
from .eigen import SOLVER_VERSION, solve_modes
from .model import ModalModel

CODE_VERSION = "modal-3"     # bump when anything that changes the numbers of a modal model changes


def mass_properties(nodes: np.ndarray, tets: np.ndarray, rho: float):
    """Volume [m^3], mass [kg], centre of mass (3,) [m] and inertia about it (3, 3) [kg m^2] of a tet mesh.

    Exact for straight tets: ∫ x x^T dV over a tet = V/20 (sum_a x_a x_a^T + s s^T), s = sum_a x_a.
    """
    x = nodes[tets[:, :4]]
    d = x[:, 1:] - x[:, :1]
    v = np.einsum("ij,ij->i", d[:, 0], np.cross(d[:, 1], d[:, 2])) / 6.0
    vol = float(v.sum())
    com = (v[:, None] * x.mean(axis=1)).sum(axis=0) / vol
    xc = x - com
    s = xc.sum(axis=1)
    S = np.einsum("m,mai,maj->ij", v, xc, xc) + np.einsum("m,mi,mj->ij", v, s, s)
    S *= rho / 20.0
    inertia = np.trace(S) * np.eye(3) - S
    return vol, rho * vol, com, inertia


def _count_components(n_nodes: int, tets: np.ndarray) -> int:
    e = tets[:, [0, 0, 0, 1, 1, 2]].ravel(), tets[:, [1, 2, 3, 2, 3, 3]].ravel()
    g = sp.coo_matrix((np.ones(len(e[0])), e), shape=(n_nodes, n_nodes))
    return int(connected_components(g, directed=False)[0])


def _surface(tets: np.ndarray, elems: np.ndarray, order: int):
    """Boundary faces and surface node indices into the FEM node array (vertices first, then mid-nodes)."""
    faces = boundary_faces(tets)                                   # (nf, 3) into vertex nodes
    sv = np.unique(faces)
    if order == 2:
        # mid-edge node of each element edge, keyed by its sorted vertex pair
        ev = np.sort(elems[:, P2_EDGES], axis=2).reshape(-1, 2)    # (m*6, 2)
        mid = elems[:, 4:].reshape(-1)
        n = int(elems.max()) + 1
        key = ev[:, 0] * n + ev[:, 1]
        key, first = np.unique(key, return_index=True)
        mid = mid[first]
        fe = np.stack([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], axis=1)   # (nf, 3, 2)
        fe = np.sort(fe, axis=2)
        fm = mid[np.searchsorted(key, fe[..., 0] * n + fe[..., 1])]                    # (nf, 3)
        sm = np.unique(fm)
        gl = np.concatenate([sv, sm])
    else:
        fm = None
        gl = sv
    remap = np.full(int(max(gl.max(), faces.max())) + 1, -1, dtype=np.int64)
    remap[gl] = np.arange(len(gl))
    f3 = remap[faces]
    f6 = None if fm is None else np.concatenate([f3, remap[fm]], axis=1)
    return gl, f3, f6


def clamp_nodes(x: np.ndarray, clamp) -> np.ndarray:
    """Indices of the FEM nodes held by ``clamp`` = (point (3,), radius): every node within the radius of the
    point (all coordinates in the same frame) [m]."""
    point, radius = np.asarray(clamp[0], np.float64), float(clamp[1])
    return np.flatnonzero(np.linalg.norm(x - point, axis=1) <= radius)


#: a surface whose centre of mass lies within this fraction of its size from the origin is taken as centred
CENTRED_TOL = 1e-9


def canonical_surface(surface):
    """The surface moved so that its centre of mass (uniform density, trimesh's ``center_mass``) is the origin, and
    the shift applied: (surface, com) with surface = given - com.

    Every door into the modal model (``impactsound modes``, :func:`modal_analysis`, a scene, which places each
    object by its centre of mass) meshes this same canonical surface, so the same file, material and settings give
    one content hash and one cached model (TetGen's output is not translation invariant to the last bit). A
    surface already centred (|com| <= CENTRED_TOL x its size) is returned unchanged, so centring twice is a no-op.
    """
    if surface is None:
        return None, np.zeros(3)
    com = np.asarray(surface.center_mass, np.float64)
    size = float(np.linalg.norm(np.ptp(np.asarray(surface.vertices, np.float64), axis=0)))
    if not np.all(np.isfinite(com)) or np.linalg.norm(com) <= CENTRED_TOL * max(size, 1e-300):
        return surface, np.zeros(3)
    moved = surface.copy()
    moved.apply_translation(-com)
    return moved, com


#: a solid whose walls would need more tetrahedra than this is refused: a thin shell's job (see check_walls)
MAX_WALL_TETS = 300_000
#: ... and one needing more than this gets a warning with the expected size
WARN_WALL_TETS = 60_000


def check_walls(surface, source: str = "mesh") -> float:
    """Refuse a surface whose walls are too thin for a solid FEM model; warn when they make it large.

    A surface-conforming tet mesher fills a wall of thickness t with elements no larger than about t, so a closed
    surface of area A whose walls are that thin needs about A / t^2 tetrahedra (measured with TetGen on a 4 x 9 cm
    cup: 3, 1.5 and 0.8 mm walls gave 5,751, 23,486 and 86,029 tets, A / t^2 = 6,075, 24,400, 86,200). The
    thickness is estimated as 2 V / A, which is the wall thickness of a thin-walled object and larger than any
    wall of a solid one (a sphere's: its diameter / 3), so a solid is never refused. Above
    :data:`MAX_WALL_TETS` (a 0.4 mm wall on that cup: P2 models of millions of unknowns, hours and tens of GB)
    the object is refused with the thickness found and what to do instead: the thin-shell model
    (``shell = {...}``, docs/shells.md) is made for such walls.

    Returns
    -------
    float
        The estimated number of tetrahedra.

    Raises
    ------
    MeshError
        Naming the source, the thickness found and the remedies.
    """
    import warnings

    from ..mesh.surface import MeshWarning
    A, V = float(surface.area), abs(float(surface.volume))
    if not (A > 0 and V > 0):
        return 0.0
    t = 2.0 * V / A
    n = A / t**2
    size = float(np.linalg.norm(np.ptp(np.asarray(surface.vertices, np.float64), axis=0)))
    if n > MAX_WALL_TETS:
        raise MeshError(f"{source}: its walls are about {t * 1e3:.3g} mm thick (2 V / A; the object is "
                        f"{size:.3g} m across): a solid FEM model would need about {n:,.0f} tetrahedra (at most "
                        f"{MAX_WALL_TETS:,} are allowed: hours to solve). Model it as a thin shell: its mid-surface "
                        f"as the object's mesh with shell = {{thickness = {t:.3g}}} (docs/shells.md); or give the "
                        "mesh in metres if its units are off, or thicken its walls")
    if n > WARN_WALL_TETS:
        warnings.warn(f"{source}: its walls are about {t * 1e3:.3g} mm thick: its solid FEM model needs about "
                      f"{n:,.0f} tetrahedra (minutes to solve, and a fine FDTD radiation grid); a thin shell (its "
                      f"mid-surface with shell = {{thickness = {t:.3g}}}, docs/shells.md) is cheaper for such walls",
                      MeshWarning,
                      stacklevel=3)
    return n


def modal_analysis(surface=None, material: Material | None = None, *, order: int = 2,
                   nodes: np.ndarray | None = None, tets: np.ndarray | None = None, max_modes: int = 200,
                   f_max: float = 20000.0, max_edge: float | None = None, quality: float = DEFAULT_QUALITY,
                   progress=None, source: str = "mesh", mesher: str | None = None, clamp=None) -> ModalModel:
    """Free-free modal model of one solid, or with a clamped patch.

    ``clamp`` = (point, radius) [m], in the surface's (or ``nodes``') coordinates: every FEM node within the radius
    of the point is held still (all three displacement components zero: a Dirichlet condition on those degrees of
    freedom, removed from K and M), as a body clamped there (a cymbal on its stand, a bar in a vice); the model then
    has no rigid-body modes. At least one element must lie in the patch (the radius covers a few nodes).

    surface: closed trimesh.Trimesh in metres (checked, then tetrahedralised by ``mesher`` with ``max_edge`` [m]
    and ``quality``: see :func:`~impactsound.mesh.tetra.tetrahedralize`, whose module docstring gives each
    mesher's licence), or None with ``nodes`` (n, 3) [m] and ``tets`` (m, 4) given (used as is; ``mesher`` is
    then ignored). material: elastic
    constants and damping. order: 1 (P1) or 2 (P2, default). Keeps at most ``max_modes`` modes with
    f <= ``f_max`` [Hz] and damping ratio < 1 (overdamped ones are dropped, counted in meta).
    progress: optional callable(stage: str) told of each stage.
    Body frame: mesh axes, origin at the centre of mass (``com`` is that point in mesh coordinates).
    The model's ``inputs_hash`` is :func:`modal_inputs_hash` of these inputs, so a saved model (``impactsound
    modes --out``) carries its identity and assets derived from another model are refused. Units warnings are
    left to the loaders (``check_surface`` at scene or file load); a surface the mesher refuses is meshed with
    fTetWild (one warning line, ``meta["mesher"]`` says which mesher made the mesh).
    """
    say = progress or (lambda stage: None)
    if material is None:
        raise InputError(f"{source}: a material is needed for modal analysis")
    if order not in (1, 2):
        raise InputError(f"{source}: FEM order must be 1 or 2, got {order!r}")
    if surface is None and (nodes is None or tets is None):
        raise InputError(f"{source}: give a surface mesh, or both nodes and tets")
    surface, shift = canonical_surface(surface)
    if clamp is not None:
        clamp = (np.asarray(clamp[0], np.float64) - shift, float(clamp[1]))
    key = modal_inputs_hash(surface, material, order, nodes=nodes, tets=tets, max_modes=max_modes, f_max=f_max,
                            max_edge=max_edge, quality=quality, mesher=mesher, source=source, clamp=clamp)
    mesh_info = {"mesher": "given"}
    if surface is not None:
        check_surface(surface, source, warn=False)
        check_walls(surface, source)
        say("tetrahedralize")
        nodes, tets = tetrahedralize(surface, max_edge=max_edge, quality=quality, source=source, progress=say,
                                     info=mesh_info, mesher=mesher)
    else:
        nodes = np.asarray(nodes, dtype=np.float64)
        tets = orient_tets(nodes, tets, source)
    n_comp = _count_components(len(nodes), tets)
    vol, mass, com, inertia = mass_properties(nodes, tets, material.rho)
    x = nodes - com                                                 # body frame
    say("assemble")
    lam, mu = material.lame
    K, M, xn, elems = assemble(x, tets, lam, mu, material.rho, order=order)
    L = float(np.linalg.norm(np.ptp(x, axis=0)))
    say("eigensolve")
    held = np.zeros(0, np.int64)
    if clamp is not None:
        held = clamp_nodes(xn + com, clamp)
        if len(held) < 3:
            raise InputError(f"{source}: the clamp at {list(np.asarray(clamp[0], float))} (radius {float(clamp[1]):.3g} "
                             f"m) holds {len(held)} mesh nodes; it must hold at least 3 (not in a line): put the "
                             "anchor on the object and make the radius larger than the element size")
        if n_comp != 1:
            raise InputError(f"{source}: a clamped object must be one connected piece ({n_comp} found)")
    free = np.ones(3 * len(xn), bool)
    free[(3 * held[:, None] + np.arange(3)).ravel()] = False
    if clamp is None:
        res = solve_modes(K, M, max_modes, scale=(material.E, material.rho, L), f_max=f_max, n_components=n_comp,
                          coords=xn)
    else:
        # Dirichlet: the held degrees of freedom leave the system; no rigid-body modes remain
        K, M = sp.csr_matrix(K)[free][:, free], sp.csr_matrix(M)[free][:, free]
        keep_nodes = np.setdiff1d(np.arange(len(xn)), held)
        res = solve_modes(K, M, max_modes, scale=(material.E, material.rho, L), f_max=f_max, n_components=0,
                          coords=xn[keep_nodes])
        U_full = np.zeros((3 * len(xn), res.U.shape[1]))
        U_full[free] = res.U
        res.U = U_full
    omega = 2 * np.pi * res.frequencies_hz
    xi = np.asarray(material.damping_ratio(omega), dtype=np.float64)
    ok = xi < 1.0
    gl, f3, f6 = _surface(tets, elems, order)
    U = res.U[:, ok].reshape(len(xn), 3, -1)[gl]                    # (ns, 3, m)
    shapes = np.ascontiguousarray(U.transpose(2, 0, 1))
    meta = dict(source=source, n_nodes=int(len(xn)), dofs=int(3 * len(xn)), n_tets=int(len(tets)), n_components=n_comp,
                mesher=mesh_info["mesher"], max_edge=max_edge, quality=quality,
                f_max=f_max, max_modes=max_modes, dropped_overdamped=int((~ok).sum()),
                clamp=None if clamp is None else dict(point=[float(v) for v in clamp[0]], radius=float(clamp[1]),
                                                      nodes=int(len(held))),
                max_residual=float(res.residuals.max()) if len(res.residuals) else 0.0,
                solver={k: v for k, v in res.info.items() if isinstance(v, (int, float, str))})
    meta["frame_shift"] = [float(v) for v in shift]                 # com below is in the caller's coordinates
    return ModalModel(material=material, order=order, frequencies_hz=res.frequencies_hz[ok],
                      surface_nodes=xn[gl], surface_faces=f3, shapes=shapes, xi=xi[ok], mass=mass, com=com + shift,
                      inertia=inertia, volume=vol, surface_faces6=f6, meta=meta, inputs_hash=key)


def modal_inputs_hash(surface, material: Material, order: int, *, nodes=None, tets=None, max_modes=200,
                      f_max=20000.0, max_edge=None, quality=DEFAULT_QUALITY, mesher: str | None = None,
                      source: str = "mesh", clamp=None) -> str:
    """Content hash of everything that determines a modal model (the cache key).

    For a surface, the mesher that ``mesher`` resolves to (``mesh.tetra.resolve_mesher``) and its package's
    version are in it, with fTetWild's (the fallback for what the mesher refuses). With TetGen the key is the one
    this function gave before ``mesher`` existed, so models cached then stay valid."""
    if surface is not None:
        surface, shift = canonical_surface(surface)
        if clamp is not None and np.any(shift):
            clamp = (np.asarray(clamp[0], np.float64) - shift, float(clamp[1]))
        geom = (np.asarray(surface.vertices, np.float64), np.asarray(surface.faces, np.int64))
    else:
        geom = (np.asarray(nodes, np.float64), np.asarray(tets, np.int64))
    mat = {k: float(getattr(material, k)) for k in ("rho", "E", "nu", "alpha", "beta", "gamma")}
    name = resolve_mesher(mesher, source) if surface is not None else "given"
    settings = dict(order=int(order), max_modes=int(max_modes), f_max=float(f_max),
                    max_edge=None if max_edge is None else float(max_edge), quality=float(quality),
                    mesher=name, solver=SOLVER_VERSION, code=CODE_VERSION)
    if surface is not None and max_edge is None:
        # the edge the default rule gives this surface where it is not the box rule (curved thin walls): a model
        # meshed under the box rule alone (the only default before) is not reused; solids keep their keys
        h = float(_default_max_edge(surface))
        if h != _box_edge(surface):
            settings["default_edge"] = h
    if name in ("tetgen", "given"):
        settings["tetgen"] = _version("tetgen")        # in the key before ``mesher`` existed, kept for given meshes too
    else:
        settings["quality"] = None                      # TetGen's bound: no other mesher reads it
        if name == "gmsh":
            settings["gmsh"] = _version("gmsh")
    if surface is not None:
        settings["ftetwild"] = ftetwild_version()      # the mesher, or the fallback (self-intersecting surfaces)
    if clamp is not None:                               # absent for free bodies: their keys are unchanged
        settings["clamp"] = [float(v) for v in np.asarray(clamp[0], np.float64)] + [float(clamp[1])]
    return content_hash(*geom, mat, settings)


def _version(package: str) -> str:
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # pragma: no cover
        return "unknown"


def cached_modal_analysis(surface=None, material: Material | None = None, order: int = 2, *, nodes=None,
                          tets=None, max_modes: int = 200, f_max: float = 20000.0, max_edge: float | None = None,
                          quality: float = DEFAULT_QUALITY, cache=None, progress=None,
                          source: str = "mesh", mesher: str | None = None, clamp=None) -> ModalModel:
    """:func:`modal_analysis` through the asset cache (folder ``cache``, default ``assets.cache_dir()``).

    The file name is the inputs hash; a missing, corrupted or stale file (AssetError on read) is rebuilt and
    rewritten atomically, never used. ``mesher`` is :func:`modal_analysis`'s (part of the key).
    """
    if material is None:
        raise InputError(f"{source}: a material is needed for modal analysis")
    key = modal_inputs_hash(surface, material, order, nodes=nodes, tets=tets, max_modes=max_modes,
                            f_max=f_max, max_edge=max_edge, quality=quality, mesher=mesher, source=source,
                            clamp=clamp)
    folder = Path(cache) if cache is not None else cache_dir()
    path = folder / f"modal_{key[:40]}.h5"
    # one process computes it; others asking at once wait for the lock, then read it (assets.asset_lock)
    with asset_lock(path):
        return _load_or_compute_modal(path, key, surface, material, order, nodes, tets, max_modes, f_max, max_edge,
                                      quality, progress, source, mesher, clamp)


def _load_or_compute_modal(path, key, surface, material, order, nodes, tets, max_modes, f_max, max_edge, quality,
                           progress, source, mesher, clamp) -> ModalModel:
    try:
        cached = ModalModel.load(path, inputs_hash=key)
    except AssetError:
        pass
    else:
        # the cached model may have been made through another door (the same surface at another offset): its
        # centre of mass is re-expressed in this caller's coordinates; everything else is frame-free
        _, shift = canonical_surface(surface)
        old = np.asarray(cached.meta.get("frame_shift", np.zeros(3)), np.float64)
        cached.com = np.asarray(cached.com, np.float64) - old + shift
        cached.meta["frame_shift"] = [float(v) for v in shift]
        return cached
    model = modal_analysis(surface, material, order=order, nodes=nodes, tets=tets, max_modes=max_modes,
                           f_max=f_max, max_edge=max_edge, quality=quality, progress=progress, source=source,
                           mesher=mesher, clamp=clamp)
    model.inputs_hash = key          # modal_analysis sets the same; kept explicit as the cache relies on it
    model.save(path)
    return model


__all__ = ["modal_analysis", "cached_modal_analysis", "modal_inputs_hash", "canonical_surface", "mass_properties",
           "MeshError"]
