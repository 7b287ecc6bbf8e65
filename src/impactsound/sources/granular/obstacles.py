"""Scene objects as walls for the event-driven grains: a solid's surface approximated by static spheres.

The simulator (sources/granular/simulate.py) has exact contact times for planes, disks, cylinders, cups, cones and
static spheres; M. Marko ("Sound simulation of granular materials", App. B.2) built his cup and funnel from static
spheres. Any scene object (a bowl, a plate, a box, a user's mesh) becomes such a wall here: spheres inside the
solid, each touching the surface at one sample point (centre c = p - R n, n the outward face normal), so that the
union of the spheres is the solid seen from outside, rounded at convex edges by R.

Grain centres of radius a see the spheres grown by a. The samples lie on a square lattice of spacing s in each
triangle's plane (and along its edges), so between four spheres that surface dips by about s^2 / (4 (R + a)) (the
centre of the square) and tilts by up to asin(s / (sqrt(2) (R + a))). The spacing is chosen so the dip is at most
``BUMP`` a: s = sqrt(4 BUMP a (R + a)) (on thin walls from the tenth percentile of their spheres' radii). The sphere radius is
``RATIO`` a, smaller where the solid is thinner (at most half its local thickness, so that no sphere pokes out of
the far side of a wall: found from the distance of each centre to the other samples, a few passes).

Measured (tests/unit/test_granular_obstacles.py): a grain dropped on a box's top face lands at the exact time and
speed of the plane to the dip's precision and rebounds along the normal within the tilt bound; a pour into the
built-in mug approximated this way against its exact cup walls (docs/granular.md, "Grains hitting scene objects").
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...errors import InputError

#: bump when the spheres made for a mesh change (part of the cache key of a simulated pour)
OBSTACLES_VERSION = 2                   # 2: surface samples compiled (same points to ~1e-17 m)
#: target sphere radius in grain radii (thinner walls: half the local thickness)
RATIO = 4.0
#: largest dip of the spheres' envelope between samples, in grain radii
BUMP = 0.05
#: most spheres one object may take (a solid far larger than the grains: use bigger grains or a simpler wall)
MAX_SPHERES = 400_000
#: samples looked at per sphere centre for the faces of its closest surface point
NEAREST = 32
#: smallest sphere radius, in grain radii (a wall thinner than 2 x this is refused)
MIN_RATIO = 0.25


@njit(cache=True)
def _face_samples(A, B, C, nrm, faces, spacing, count_only, pts, nms, fcs):
    """Samples of each face in ``faces`` (see :func:`_samples`): counted (count_only) or written from index 0 in
    face order (lattice points, then each edge's points from its start corner). Returns the count."""
    m = 0
    for f in faces:
        a, b, c, n = A[f], B[f], C[f], nrm[f]
        ab = b - a
        e1 = ab / math.sqrt(ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2])
        e2 = np.array([n[1] * e1[2] - n[2] * e1[1], n[2] * e1[0] - n[0] * e1[2], n[0] * e1[1] - n[1] * e1[0]])
        ac = c - a
        # 2D coordinates of the corners: (0, 0), (qb, 0), (qcx, qcy); lattice points strictly inside
        qb = ab[0] * e1[0] + ab[1] * e1[1] + ab[2] * e1[2]
        qcx = ac[0] * e1[0] + ac[1] * e1[1] + ac[2] * e1[2]
        qcy = ac[0] * e2[0] + ac[1] * e2[1] + ac[2] * e2[2]
        qx = (0.0, qb, qcx)
        qy = (0.0, 0.0, qcy)
        lox, hix = min(0.0, qb, qcx), max(0.0, qb, qcx)
        loy, hiy = min(0.0, qcy), max(0.0, qcy)
        nx = max(0, int(math.ceil((hix - (lox + 0.5 * spacing)) / spacing)))
        ny = max(0, int(math.ceil((hiy - (loy + 0.5 * spacing)) / spacing)))
        for ix in range(nx):
            X = lox + 0.5 * spacing + ix * spacing
            for iy in range(ny):
                Y = loy + 0.5 * spacing + iy * spacing
                inside = True
                for i in range(3):
                    j = (i + 1) % 3
                    if not ((qx[j] - qx[i]) * (Y - qy[i]) - (qy[j] - qy[i]) * (X - qx[i]) > 0):
                        inside = False
                if inside:
                    if not count_only:
                        for d in range(3):
                            pts[m, d] = a[d] + X * e1[d] + Y * e2[d]
                            nms[m, d] = n[d]
                        fcs[m] = f
                    m += 1
        for e in range(3):
            p0 = a if e == 0 else (b if e == 1 else c)
            p1 = b if e == 0 else (c if e == 1 else a)
            dv = p1 - p0
            k = max(1, int(math.ceil(math.sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2]) / spacing)))
            for i in range(k):
                if not count_only:
                    t = i / k                                   # the edge's start corner, not its end
                    for d in range(3):
                        pts[m, d] = p0[d] + t * dv[d]
                        nms[m, d] = n[d]
                    fcs[m] = f
                m += 1
    return m


def _samples(V, F, spacing):
    """Points on the surface about ``spacing`` [m] apart, with their face's outward unit normal and the face:
    (points (n, 3), normals (n, 3), faces (n,)). Per triangle, a square lattice of that spacing in its own plane
    (the points inside it) and points along its edges at that spacing (corners included), so that slivers are not
    oversampled and every point of the surface is within about spacing / sqrt(2) of a sample of its own face.
    Compiled (:func:`_face_samples`): counted, then written."""
    A, B, C = (np.ascontiguousarray(V[F[:, i]], np.float64) for i in range(3))
    nrm = np.cross(B - A, C - A)
    area2 = np.linalg.norm(nrm, axis=1)
    ok = area2 > 1e-14 * max(float(np.ptp(V, axis=0).max()), 1e-300) ** 2       # degenerate triangles: no samples
    nrm = np.ascontiguousarray(nrm / np.maximum(area2, 1e-300)[:, None])
    faces = np.flatnonzero(ok).astype(np.int64)
    n = _face_samples(A, B, C, nrm, faces, float(spacing), True, np.empty((0, 3)), np.empty((0, 3)),
                      np.empty(0, np.int64))
    pts, nms, fcs = np.empty((n, 3)), np.empty((n, 3)), np.empty(n, np.int64)
    _face_samples(A, B, C, nrm, faces, float(spacing), False, pts, nms, fcs)
    return pts, nms, fcs


def _closest(tris, C, reach, tree, face_of):
    """Closest points of the surface to the centres C (k, 3) among the faces of the NEAREST samples within ``reach``
    (k,) [m] of each (the face that holds a centre's true closest point, when it is nearer than reach - spacing,
    has a sample within reach): (points (k, 3), distances (k,), faces (k,)); inf where no sample is near."""
    import trimesh
    # the K nearest samples within reach: those near the true closest point come first (the samples nearer to
    # the centre than a sample of the closest point's own face lie in a shell of width ~spacing round it: far
    # fewer than K)
    K = min(NEAREST, len(face_of))
    d, j = tree.query(C, k=K, distance_upper_bound=float(np.max(reach)))
    d, j = d.reshape(len(C), K), j.reshape(len(C), K)
    ok = (d <= reach[:, None]) & (j < len(face_of))
    pi = np.broadcast_to(np.arange(len(C))[:, None], j.shape)[ok]
    fi = face_of[j[ok]]
    key = np.unique(pi * (int(face_of.max()) + 1) + fi)
    pi, fi = key // (int(face_of.max()) + 1), key % (int(face_of.max()) + 1)
    q = trimesh.triangles.closest_point(tris[fi], C[pi])
    d = np.linalg.norm(q - C[pi], axis=1)
    # per centre, its nearest pair (pairs are sorted by centre)
    order = np.lexsort((d, pi))
    first = order[np.r_[True, pi[order][1:] != pi[order][:-1]]]
    out_q = np.full((len(C), 3), np.nan)
    out_d = np.full(len(C), np.inf)
    out_f = np.zeros(len(C), np.int64)
    out_q[pi[first]], out_d[pi[first]], out_f[pi[first]] = q[first], d[first], fi[first]
    return out_q, out_d, out_f


def _fit(mesh, spacing, R0, r_min):
    """Samples (P, N) at ``spacing`` and the largest radius <= R0 of each sample's sphere (centre P - R N) that
    stays inside the solid: (P, N, R, wall), ``wall`` marking spheres limited by an opposite-facing surface (a thin
    wall; the others are limited near a convex edge). Shrink-and-recheck passes against the exact surface (the
    closest point on the faces of the samples near the centre, :func:`_closest`); a sphere shrunk below ``r_min``
    is not checked again (it is dropped, or refused on a thin wall, by the caller)."""
    from scipy.spatial import cKDTree
    V, F = np.asarray(mesh.vertices, np.float64), np.asarray(mesh.faces, np.int64)
    P, N, face_of = _samples(V, F, spacing)
    tree = cKDTree(P)
    tris = V[F]
    fn = np.asarray(mesh.face_normals, np.float64)
    R = np.full(len(P), float(R0))
    wall = np.zeros(len(P), bool)
    active = np.arange(len(P))
    for _ in range(20):
        if not len(active):
            break
        C = P[active] - R[active, None] * N[active]
        q, d, tri = _closest(tris, C, R[active] + spacing, tree, face_of)
        nq = fn[tri]
        # the sphere's own sample lies on it: only a nearer point q of the surface counts. The largest sphere
        # tangent at p (normal n) that leaves q outside has R = |p - q|^2 / (2 n . (p - q)): shrink to it
        # (t / 2 for a wall of thickness t under p) and check again from the new centre; a sphere that only
        # shrinks stays clear of what it was clear of, so only the shrunk ones are checked again
        bad = d < R[active] * (1.0 - 1e-6)
        if not bad.any():
            break
        b = active[bad]
        pq = P[b] - q[bad]
        h = np.einsum("ij,ij->i", N[b], pq)
        Rq = np.where(h > 0, np.einsum("ij,ij->i", pq, pq) / (2.0 * np.maximum(h, 1e-300)), R[b])
        wall[b] = np.einsum("ij,ij->i", N[b], nq[bad]) < -0.5      # what limits it last
        R[b] = np.minimum(R[b], Rq) * (1.0 - 1e-6)
        active = b[R[b] >= r_min]
    # not settled after the passes (none seen): such a sphere is dropped rather than left poking out
    R[active], wall[active] = 0.0, False
    return P, N, R, wall


def surface_spheres(vertices, faces, grain_radius: float, *, where: str = "object"):
    """Static spheres (centres (K, 3) [m], radii (K,) [m]) whose union approximates the closed solid (vertices
    [m], faces) for grains of radius ``grain_radius`` [m] (module docstring).

    Raises
    ------
    InputError
        For a mesh that is not a closed solid, a wall too thin for the spheres, or too many spheres.
    """
    V = np.asarray(vertices, np.float64)
    F = np.asarray(faces, np.int64)
    a = float(grain_radius)
    if not (math.isfinite(a) and a > 0):
        raise InputError(f"{where}: grain radius {grain_radius!r} must be positive [m]")
    import trimesh
    m = trimesh.Trimesh(V, F, process=False)
    if not m.is_watertight or m.volume <= 0:
        raise InputError(f"{where}: the grains collide with closed solids only (a watertight mesh with outward "
                         "normals); repair the mesh (e.g. trimesh.repair.fill_holes, fix_normals)")
    R0 = RATIO * a
    # spacing for the target radius; thinner walls get smaller spheres and then a finer spacing (below)
    s0 = math.sqrt(4.0 * BUMP * a * (R0 + a))
    area = float(m.area)
    if area / (0.5 * s0 * s0) > MAX_SPHERES:
        raise InputError(f"{where}: its surface ({area:.3g} m^2) would take over {MAX_SPHERES} spheres for grains of "
                         f"radius {a:g} m; use bigger grains or a smaller object")
    P, N, R, wall = _fit(m, s0, R0, MIN_RATIO * a)
    # where a thin wall made the spheres shrink, the spacing shrinks too (the dip grows as 1 / (R + a))
    if wall.any():
        if R[wall].min() < MIN_RATIO * a:
            raise InputError(f"{where}: a wall is too thin for grains of radius {a:g} m (spheres of "
                             f"{R[wall].min():.3g} m would be needed, below {MIN_RATIO:g} grain radius); use smaller "
                             "grains or a thicker wall")
        s1 = math.sqrt(4.0 * BUMP * a * (float(np.percentile(R[wall], 10)) + a))
        if s1 < 0.99 * s0:
            if area / (0.5 * s1 * s1) > MAX_SPHERES:
                raise InputError(f"{where}: its thin walls would take over {MAX_SPHERES} spheres for grains of "
                                 f"radius {a:g} m; use bigger grains or a smaller object")
            P, N, R, wall = _fit(m, s1, R0, MIN_RATIO * a)
    # spheres at a convex edge shrink towards it (the edge is rounded off by the others): drop the smallest
    keep = R >= MIN_RATIO * a
    P, N, R = P[keep], N[keep], R[keep]
    C = P - R[:, None] * N
    return np.ascontiguousarray(C), np.ascontiguousarray(R)


def body_spheres(body, grain_radius: float, where: str):
    """:func:`surface_spheres` of a scene body at its scene pose (world frame): (centres, radii)."""
    from ...rotation import quat_to_matrix
    Rm = quat_to_matrix(np.asarray(body.quaternion, np.float64))[0]
    V = np.asarray(body.mesh.vertices, np.float64) @ Rm.T + np.asarray(body.position, np.float64)
    return surface_spheres(V, np.asarray(body.mesh.faces, np.int64), grain_radius, where=where)
