"""Local contact radius from the discrete mean curvature of a triangle mesh, r_i = 1 / H_i(x_i).

The proxy-sphere radius of Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body
Sound", sec. 3.2 (who cite Meyer et al. 2002 for H).

Discrete mean curvature (normal-cycle / Cohen-Steiner & Morvan form, the edge-based counterpart of Meyer et al.
2002): the mean-curvature measure of an interior edge of length l and signed dihedral angle beta (positive on
convex edges) is l beta / 2, so that the sum over all edges equals int_S H dA with H = (k1 + k2)/2 (a sphere of
radius R: H = 1/R; a cylinder: 1/(2R)). Each vertex receives half of the measure of its incident edges and is
divided by its barycentric area A_v = (1/3) sum of incident face areas. Like the ball measure of
Cohen-Steiner & Morvan (trimesh ``discrete_mean_curvature_measure`` / ball area), measure and area are then
summed over the vertex's closed one-ring N(v) before dividing:

    m_v = sum_{edges e at v} l_e beta_e / 4,     H_v = sum_{w in N(v)} m_w / sum_{w in N(v)} A_w

(without the one-ring sum the 12 valence-5 vertices of an icosphere read 15 % high at any refinement; with it,
every vertex of an icosphere is within 2.1 % of 1/R).

At a contact point inside a face, H is interpolated linearly (barycentric) between the face's vertices.
This is vectorised (one pass over edges per mesh, cached; one gather per query).

Caps (the package's choice; the paper does not say what to do where H <= 0):
* H <= 0 (flat or concave contact): the surface is treated as a plane there, 1/r = 0.
* The radius of a body is capped at its bounding radius about the COM, r_i <= R_bound,i: a flat face, whose
  Hertz radius would be infinite, behaves at most like the smallest sphere holding the object. This also
  makes a flat face on the (planar) ground finite: 1/r = 1/r_body + 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import trimesh


def vertex_mean_curvature(vertices, faces) -> np.ndarray:
    """Discrete mean curvature H_v [1/m] at every vertex of a triangle mesh (see module docstring).

    Parameters
    ----------
    vertices : array_like, shape (nv, 3)
        Vertex positions [m].
    faces : array_like, shape (nf, 3)
        Triangles, outward counter-clockwise.

    Returns
    -------
    ndarray, shape (nv,)
        H_v [1/m], positive on convex parts; 0 at vertices with no incident area.
    """
    mesh = trimesh.Trimesh(np.asarray(vertices, np.float64), np.asarray(faces, np.int64), process=False)
    v = mesh.vertices
    edges = mesh.face_adjacency_edges                              # (ne, 2) shared edges
    beta = mesh.face_adjacency_angles                              # unsigned dihedral (between normals)
    sign = np.where(mesh.face_adjacency_convex, 1.0, -1.0)
    length = np.linalg.norm(v[edges[:, 0]] - v[edges[:, 1]], axis=1)
    half = 0.25 * length * beta * sign                             # half of the edge measure l beta / 2
    nv = len(v)
    measure = np.bincount(edges[:, 0], half, nv) + np.bincount(edges[:, 1], half, nv)
    fa = mesh.area_faces / 3.0
    area = np.bincount(mesh.faces.reshape(-1), np.repeat(fa, 3), nv)
    e = mesh.edges_unique
    ring = sp.coo_matrix((np.ones(2 * len(e)), (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])),
                         shape=(nv, nv)).tocsr() + sp.identity(nv, format="csr")
    measure = ring @ measure                                       # sums over the closed one-ring
    area = ring @ area
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(area > 0, measure / np.where(area > 0, area, 1.0), 0.0)


def radius_from_curvature(H, cap) -> np.ndarray:
    """Local radius r = 1/H [m] with the caps of the module docstring: H <= 0 -> plane, then r <= cap.

    Parameters
    ----------
    H : float or array_like
        Mean curvature [1/m].
    cap : float or array_like
        Largest radius [m] (the body's bounding radius).

    Returns
    -------
    ndarray
        r = min(1/H, cap) [m]; ``cap`` where H <= 0.
    """
    H = np.asarray(H, dtype=np.float64)
    with np.errstate(divide="ignore"):
        r = np.where(H > 0, 1.0 / np.where(H > 0, H, 1.0), np.inf)
    return np.minimum(r, cap)


@dataclass
class SurfaceCurvature:
    """A body-frame surface with cached per-vertex mean curvature and closest-point queries.

    Parameters
    ----------
    vertices : array_like, shape (nv, 3)
        Vertex positions [m], body frame (centre of mass at the origin).
    faces : array_like, shape (nf, 3)
        Triangles, outward counter-clockwise.

    Attributes
    ----------
    mesh : trimesh.Trimesh
        The surface (not processed).
    H : ndarray, shape (nv,)
        Per-vertex mean curvature [1/m] (:func:`vertex_mean_curvature`).
    bounding_radius : float
        Largest vertex distance from the origin [m]; the radius cap.
    """

    vertices: np.ndarray
    faces: np.ndarray
    mesh: trimesh.Trimesh = field(init=False, repr=False)
    H: np.ndarray = field(init=False, repr=False)
    bounding_radius: float = field(init=False)

    def __post_init__(self):
        self.vertices = np.asarray(self.vertices, np.float64)
        self.faces = np.asarray(self.faces, np.int64)
        self.mesh = trimesh.Trimesh(self.vertices, self.faces, process=False)
        self.H = vertex_mean_curvature(self.vertices, self.faces)
        self.bounding_radius = float(np.sqrt((self.vertices**2).sum(axis=1).max()))

    def closest(self, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Closest surface points to ``points``.

        Parameters
        ----------
        points : array_like, shape (n, 3)
            Query points [m], body frame.

        Returns
        -------
        face : ndarray, shape (n,)
            Index of the face holding the closest point.
        bary : ndarray, shape (n, 3)
            Its barycentric coordinates in that face (clipped to [0, 1], summing to 1).
        distance : ndarray, shape (n,)
            Distance from the query point [m].
        """
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        if len(pts) == 0:
            return np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0)
        closest, dist, face = trimesh.proximity.closest_point(self.mesh, pts)
        face = np.asarray(face, np.int64)
        tri = self.vertices[self.faces[face]]
        bary = trimesh.triangles.points_to_barycentric(tri, closest)
        bary = np.clip(bary, 0.0, 1.0)
        bary /= bary.sum(axis=1, keepdims=True)
        return face, bary, np.asarray(dist)

    def curvature_at(self, face, bary) -> np.ndarray:
        """Mean curvature H [1/m] at points given by (face, bary): barycentric interpolation of H_v.

        Parameters
        ----------
        face : array_like, shape (n,)
            Face indices.
        bary : array_like, shape (n, 3)
            Barycentric coordinates in those faces.

        Returns
        -------
        ndarray, shape (n,)
            H [1/m].
        """
        return np.einsum("nk,nk->n", self.H[self.faces[np.asarray(face, np.int64)]], np.asarray(bary))

    def radius_at(self, face, bary) -> np.ndarray:
        """Local contact radius r [m] at (face, bary), capped as in the module docstring.

        Parameters
        ----------
        face, bary
            As for :meth:`curvature_at`.

        Returns
        -------
        ndarray, shape (n,)
            r [m], at most :attr:`bounding_radius`.
        """
        return radius_from_curvature(self.curvature_at(face, bary), self.bounding_radius)

    def radius_near(self, points) -> np.ndarray:
        """Local contact radius r [m] at the surface points closest to ``points``.

        Parameters
        ----------
        points : array_like, shape (n, 3)
            Body-frame points [m]; each is projected onto the surface first (:meth:`closest`).

        Returns
        -------
        ndarray, shape (n,)
            r [m], capped as in the module docstring.
        """
        face, bary, _ = self.closest(points)
        return self.radius_at(face, bary)
