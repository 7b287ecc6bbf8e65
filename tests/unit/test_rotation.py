"""The package's one quaternion conversion against SciPy (an independent implementation) and its defining
properties."""
import numpy as np
from scipy.spatial.transform import Rotation

from impactsound.rotation import quat_to_matrix, to_body


def test_quat_to_matrix_matches_scipy_and_is_a_rotation():
    q = np.random.default_rng(0).normal(size=(10000, 4))
    R = quat_to_matrix(q)                                    # normalises
    ref = Rotation.from_quat(q / np.linalg.norm(q, axis=1, keepdims=True), scalar_first=True).as_matrix()
    assert np.abs(R - ref).max() < 4e-15
    assert np.allclose(np.einsum("nji,njk->nik", R, R), np.eye(3), atol=1e-14)
    assert np.allclose(np.linalg.det(R), 1.0, atol=1e-14)
    # scalar first: a quarter turn about z, (cos 45deg, 0, 0, sin 45deg), takes x to y
    Rz = quat_to_matrix([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])[0]
    assert np.allclose(Rz @ [1, 0, 0], [0, 1, 0], atol=1e-15)


def test_to_body_inverts_the_pose():
    rng = np.random.default_rng(1)
    R = quat_to_matrix(rng.normal(size=(50, 4)))
    c = rng.normal(size=(50, 3))
    xb = rng.normal(size=(50, 4, 3))
    xw = np.einsum("nij,nlj->nli", R, xb) + c[:, None, :]
    assert np.allclose(to_body(R, c, xw), xb, atol=1e-14)
    assert np.allclose(to_body(R, c, xw[:, 0]), xb[:, 0], atol=1e-14)
