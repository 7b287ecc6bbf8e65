"""Column-parity voxelizer against exact half-space membership of convex polyhedra."""
import numpy as np
import pytest
import trimesh

from impactsound.wave.voxel import inside_grid


def _exact_convex(mesh, P):
    """(inside, on_surface): signed distance to the convex hull's planes."""
    n = mesh.face_normals
    d = np.einsum("ij,ij->i", n, mesh.triangles[:, 0])
    # in chunks of points: the whole (points x planes) matrix of a 61^3 grid and 1280 planes is 2.3 GB
    dist = np.concatenate([(P[i:i + 8192] @ n.T - d).max(axis=1) for i in range(0, len(P), 8192)])
    return dist < 0, np.abs(dist) < 1e-12


@pytest.mark.parametrize("mesh", [
    trimesh.creation.icosphere(subdivisions=3, radius=0.0075),
    trimesh.creation.box(extents=(0.016, 0.01, 0.012)).apply_transform(
        trimesh.transformations.rotation_matrix(0.3, [1, 2, 3])),
])
def test_matches_exact_membership(mesh):
    xs = np.linspace(-0.012, 0.012, 61)                  # grid planes pass through vertices/edges of the box
    solid, odd = inside_grid(mesh.vertices, mesh.faces, xs, xs, xs)
    X, Y, Z = np.meshgrid(xs, xs, xs, indexing="ij")
    exact, tie = _exact_convex(mesh, np.stack([X.ravel(), Y.ravel(), Z.ravel()], 1))
    assert odd == 0
    # centres exactly on the surface (rounding decides) are excluded; every other cell must agree
    assert np.array_equal(solid.ravel()[~tie], exact[~tie])


def test_non_convex_volume_converges():
    # annulus (hollow cylinder): voxel volume -> mesh volume as the grid refines (first order in dx)
    m = trimesh.creation.annulus(0.004, 0.008, 0.01, sections=64)
    errs = []
    for n in (41, 81):
        xs = np.linspace(-0.01, 0.01, n)
        solid, odd = inside_grid(m.vertices, m.faces, xs, xs, xs)
        assert odd == 0
        errs.append(abs(solid.sum() * (xs[1] - xs[0]) ** 3 / m.volume - 1))
    assert errs[1] < 0.6 * errs[0] and errs[1] < 0.03


def test_open_surface_reports_odd_rays():
    m = trimesh.creation.box(extents=(0.01, 0.01, 0.01))
    keep = np.abs(m.face_normals[:, 2]) < 0.5
    keep[np.flatnonzero(~keep)[1:]] = True                              # drop one top/bottom triangle
    m = trimesh.Trimesh(m.vertices, m.faces[keep], process=False)
    xs = np.linspace(-0.006, 0.006, 25)
    _, odd = inside_grid(m.vertices, m.faces, xs, xs, xs)
    assert odd > 0
