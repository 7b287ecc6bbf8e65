"""FEM assembly (P1/P2), eigen-solve and modal model, against analytic references."""
import numpy as np
import pytest
import scipy.linalg as sla
import trimesh

from impactsound.assets import read_asset
from impactsound.errors import SolverError
from impactsound.fem.assembly import P2_MASS_REF, QUAD4_BARY, assemble, p2_nodes
from impactsound.fem.eigen import relative_residuals, solve_modes
from impactsound.fem.modal import cached_modal_analysis, mass_properties, modal_analysis
from impactsound.materials import make_material
from impactsound.mesh.tetra import tetrahedralize

LAM, MU, RHO = 1.3e9, 0.7e9, 2500.0


@pytest.fixture(scope="module")
def cube():
    # unit cube: analytic integrals of polynomial fields are simple
    return tetrahedralize(trimesh.creation.box(extents=(1, 1, 1)).apply_translation([0.5, 0.5, 0.5]),
                          max_edge=0.4)


def _field(x, f):
    return np.stack(f(x[:, 0], x[:, 1], x[:, 2]), axis=1).ravel()


def test_p2_mass_table_row_sums():
    # sec. 1: vertex rows -rho V/20, edge rows +rho V/5, total rho V
    rs = P2_MASS_REF.sum(axis=1) / 420
    assert np.allclose(rs[:4], -1 / 20, atol=1e-15) and np.allclose(rs[4:], 1 / 5, atol=1e-15)
    assert np.allclose(P2_MASS_REF, P2_MASS_REF.T)


def test_p2_mass_table_against_independent_quadrature():
    # Stroud conical-product (collapsed Gauss-Jacobi-like via Gauss-Legendre + Duffy) rule, exact for degree 4
    g, w = np.polynomial.legendre.leggauss(5)
    g, w = 0.5 * (g + 1), 0.5 * w
    U, V, W = np.meshgrid(g, g, g, indexing="ij")
    WW = (w[:, None, None] * w[None, :, None] * w[None, None, :]).ravel()
    u, v, t = U.ravel(), V.ravel(), W.ravel()
    x = u
    y = (1 - u) * v
    z = (1 - u) * (1 - v) * t
    jac = (1 - u) ** 2 * (1 - v) * WW * 6                  # reference volume 1/6 -> weights sum to 1
    l = np.stack([1 - x - y - z, x, y, z], axis=1)
    edges = [(0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)]
    N = np.concatenate([l * (2 * l - 1), np.stack([4 * l[:, i] * l[:, j] for i, j in edges], 1)], axis=1)
    Mq = np.einsum("q,qa,qb->ab", jac, N, N)               # in units of rho V
    assert np.allclose(Mq, P2_MASS_REF / 420, atol=1e-14)


def test_quadrature_points():
    assert np.allclose(QUAD4_BARY.sum(axis=1), 1.0)


@pytest.mark.parametrize("order", [1, 2])
def test_rigid_motions_have_zero_energy_and_exact_mass(cube, order):
    nodes, tets = cube
    K, M, xn, _ = assemble(nodes, tets, LAM, MU, RHO, order=order)
    rng = np.random.default_rng(1)
    c, w = rng.standard_normal(3), rng.standard_normal(3)
    u = _field(xn, lambda x, y, z: tuple(c[i] + np.cross(w, np.stack([x, y, z], 1))[:, i] for i in range(3)))
    kn = abs(K).sum(axis=1).max()
    assert np.abs(K @ u).max() <= 1e-12 * kn * np.abs(u).max()
    # kinetic energy of a rigid motion: u^T M u = M |c'|^2 ... check translation exactly: rho V |c|^2
    ut = _field(xn, lambda x, y, z: (c[0] + 0 * x, c[1] + 0 * y, c[2] + 0 * z))
    assert ut @ (M @ ut) == pytest.approx(RHO * 1.0 * (c @ c), rel=1e-12)


def test_p1_patch_test_linear_field(cube):
    nodes, tets = cube
    K, M, xn, _ = assemble(nodes, tets, LAM, MU, RHO, order=1)
    A = np.random.default_rng(2).standard_normal((3, 3))
    u = (xn @ A.T).ravel()
    eps = 0.5 * (A + A.T)
    energy = 1.0 * (LAM * np.trace(eps) ** 2 + 2 * MU * np.sum(eps * eps))   # u^T K u = ∫ eps:C:eps, V = 1
    assert u @ (K @ u) == pytest.approx(energy, rel=1e-11)


def test_p2_quadratic_fields_exact(cube):
    # P2 interpolates quadratics exactly, so energies equal the analytic integrals over the unit cube
    nodes, tets = cube
    K, M, xn, _ = assemble(nodes, tets, LAM, MU, RHO, order=2)
    u = _field(xn, lambda x, y, z: (x**2, 0 * y, 0 * z))
    assert u @ (M @ u) == pytest.approx(RHO / 5, rel=1e-11)              # rho ∫ x^4
    assert u @ (K @ u) == pytest.approx(4 * (LAM + 2 * MU) / 3, rel=1e-11)  # ∫ (lam+2mu)(2x)^2
    v = _field(xn, lambda x, y, z: (y**2, 0 * y, 0 * z))
    assert v @ (K @ v) == pytest.approx(4 * MU / 3, rel=1e-11)             # ∫ mu (2y)^2 (engineering shear)


def test_p2_nodes_are_midpoints(cube):
    nodes, tets = cube
    xn, t10 = p2_nodes(nodes, tets)
    assert np.allclose(xn[t10[:, 4]], 0.5 * (xn[t10[:, 0]] + xn[t10[:, 1]]))
    assert np.allclose(xn[t10[:, 9]], 0.5 * (xn[t10[:, 2]] + xn[t10[:, 3]]))
    ne = len(np.unique(np.sort(tets[:, [[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]]].reshape(-1, 2), 1), axis=0))
    assert len(xn) == len(nodes) + ne


@pytest.fixture(scope="module")
def small_block():
    nodes, tets = tetrahedralize(trimesh.creation.box(extents=(0.05, 0.03, 0.02)), max_edge=0.01)
    K, M, xn, _ = assemble(nodes, tets, LAM, MU, RHO, order=2)
    return nodes, tets, K, M, xn


def test_eigen_matches_dense_reference(small_block):
    nodes, tets, K, M, xn = small_block
    assert K.shape[0] > 900                          # exercises the block Lanczos path, not the dense one
    E = MU * (3 * LAM + 2 * MU) / (LAM + MU)
    r = solve_modes(K, M, 15, scale=(E, RHO, 0.06), coords=xn)
    w = sla.eigh(K.toarray(), M.toarray(), eigvals_only=True)
    ref = np.sqrt(w[6:21]) / (2 * np.pi)
    assert np.allclose(r.frequencies_hz, ref, rtol=1e-9)
    assert np.abs(r.U.T @ (M @ r.U) - np.eye(15)).max() < 1e-10
    assert r.residuals.max() <= 1e-6
    assert np.allclose(relative_residuals(K, M, r.U, r.omega2), r.residuals)
    assert r.rigid.shape[1] == 6
    # two shift strategies (nondimensional sigma = -1 and in-band (2 pi 20 Hz)^2) agree (sec. 10)
    r2 = solve_modes(K, M, 15, scale=(E, RHO, 0.06), coords=xn, shift=20.0)
    assert np.allclose(r2.frequencies_hz, r.frequencies_hz, rtol=1e-8)
    # f_max stops early and keeps only f <= f_max
    r3 = solve_modes(K, M, 15, scale=(E, RHO, 0.06), coords=xn, f_max=float(ref[4]) * 1.0001)
    assert np.allclose(r3.frequencies_hz, ref[:5], rtol=1e-9)


def test_two_bodies_need_twelve_rigid_modes(small_block):
    nodes, tets, *_ = small_block
    n2 = np.vstack([nodes, nodes + [0.2, 0, 0]])
    t2 = np.vstack([tets, tets + len(nodes)])
    K, M, xn, _ = assemble(n2, t2, LAM, MU, RHO, order=1)
    E = MU * (3 * LAM + 2 * MU) / (LAM + MU)
    with pytest.raises(SolverError, match="near-zero"):
        solve_modes(K, M, 5, scale=(E, RHO, 0.06), coords=xn, n_components=1)
    r = solve_modes(K, M, 5, scale=(E, RHO, 0.06), coords=xn, n_components=2)
    assert r.rigid.shape[1] == 12


@pytest.mark.parametrize("order", [1, 2])
def test_force_projection_rigid_modes(small_block, order):
    # sum over the 6 M-orthonormal rigid modes of (u_r(x).n)^2 = 1/M + ((x-x0) x n).I^-1((x-x0) x n)
    nodes, tets, *_ = small_block
    K, M, xn, _ = assemble(nodes, tets, LAM, MU, RHO, order=order)
    vol, mass, com, inertia = mass_properties(nodes, tets, RHO)
    r = xn - com
    R = np.zeros((len(xn) * 3, 6))
    for i in range(3):
        R[i::3, i] = 1.0
        e = np.zeros(3)
        e[i] = 1.0
        R[:, 3 + i] = np.cross(e, r).ravel()
    G = R.T @ (M @ R)
    L = np.linalg.cholesky(G)
    Rn = R @ np.linalg.inv(L).T                         # M-orthonormal rigid basis
    assert np.abs(Rn.T @ (M @ Rn) - np.eye(6)).max() < 1e-12
    rng = np.random.default_rng(3)
    for node in rng.integers(0, len(xn), 5):
        nvec = rng.standard_normal(3)
        nvec /= np.linalg.norm(nvec)
        ur = Rn.reshape(len(xn), 3, 6)[node]            # (3, 6)
        lhs = np.sum((nvec @ ur) ** 2)
        c = np.cross(r[node], nvec)
        rhs = 1 / mass + c @ np.linalg.solve(inertia, c)
        assert lhs == pytest.approx(rhs, rel=1e-10)


def test_mass_properties_box():
    a, b, c = 0.05, 0.03, 0.02
    nodes, tets = tetrahedralize(trimesh.creation.box(extents=(a, b, c)).apply_translation([1e-3, 2e-3, 0]),
                                 max_edge=0.01)
    vol, mass, com, I = mass_properties(nodes, tets, RHO)
    assert vol == pytest.approx(a * b * c, rel=1e-12)
    assert np.allclose(com, [1e-3, 2e-3, 0], atol=1e-15)
    ref = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    assert np.allclose(I, ref, rtol=1e-10, atol=1e-14 * ref.max())


def test_modal_analysis_and_cache(tmp_path):
    mat = make_material("alu", rho=2700, E=69e9, nu=0.33, alpha=1.0, beta=3e-8)
    box = trimesh.creation.box(extents=(0.05, 0.03, 0.02)).apply_translation([0.01, 0, 0])
    m = cached_modal_analysis(box, mat, 2, max_modes=8, max_edge=0.012, f_max=1e6, cache=tmp_path)
    assert m.n_modes == 8 and m.order == 2
    assert m.mass == pytest.approx(2700 * 0.05 * 0.03 * 0.02, rel=1e-12)
    assert np.allclose(m.com, [0.01, 0, 0], atol=1e-15)
    assert m.surface_faces6.shape == (len(m.surface_faces), 6)
    # surface mid-nodes are the midpoints of their face edges (P2 face map consistency)
    f6 = m.surface_faces6
    sn = m.surface_nodes
    assert np.allclose(sn[f6[:, 3]], 0.5 * (sn[f6[:, 0]] + sn[f6[:, 1]]))
    assert np.allclose(sn[f6[:, 5]], 0.5 * (sn[f6[:, 2]] + sn[f6[:, 0]]))
    # Rayleigh damping per mode, xi = (alpha/w + beta w)/2 (modal-sound.md sec. 3), with this material's numbers
    w = 2 * np.pi * m.frequencies_hz
    assert np.allclose(m.xi, 0.5 * (1.0 / w + 3e-8 * w), rtol=1e-12, atol=0)
    files = list(tmp_path.glob("modal_*.h5"))
    assert len(files) == 1
    m2 = cached_modal_analysis(box, mat, 2, max_modes=8, max_edge=0.012, f_max=1e6, cache=tmp_path)
    assert np.array_equal(m2.frequencies_hz, m.frequencies_hz)
    # corrupt the cached file: it is rebuilt, not used
    import h5py
    with h5py.File(files[0], "r+") as f:
        f["frequencies_hz"][0] = 1.0
    m3 = cached_modal_analysis(box, mat, 2, max_modes=8, max_edge=0.012, f_max=1e6, cache=tmp_path)
    assert np.allclose(m3.frequencies_hz, m.frequencies_hz, rtol=1e-9)
    read_asset(files[0], "modal_model", inputs_hash=m3.inputs_hash)      # rewritten and valid


def test_modal_damping_and_synthesised_decay_follow_the_damping_formula():
    """Per-mode damping of a FEM model with all three terms of modal-sound.md sec. 3 (Rayleigh alpha M + beta K
    plus the inverse-stiffness gamma M K+ M), xi_j = (alpha/w_j + beta w_j + gamma/w_j^3)/2, written out here;
    the constants make each term 10-66 % of xi at these modes (7.6-14.3 kHz), so dropping any one fails. Then
    the physical consequence: each mode synthesised alone (sources/modal_kernel.py) decays as e^{-xi w t} and
    rings at w_d = w sqrt(1 - xi^2)."""
    from impactsound.sources.modal_kernel import modal_response
    alpha, beta, gamma = 30.0, 1e-8, 1e11
    mat = make_material("abs", rho=1050, E=2.3e9, nu=0.35, alpha=alpha, beta=beta, gamma=gamma)
    m = modal_analysis(trimesh.creation.box(extents=(0.05, 0.03, 0.02)), mat, order=2, max_modes=4,
                       max_edge=0.012, f_max=1e6)
    assert m.n_modes == 4
    w = 2 * np.pi * m.frequencies_hz
    xi = 0.5 * (alpha / w + beta * w + gamma / w**3)
    assert np.allclose(m.xi, xi, rtol=1e-12, atol=0)
    fs, n, N, hop = 48000, 9600, 1024, 256
    k = np.arange(0, n - N, hop)[:, None] + np.arange(N)[None, :]
    tk = (k[:, 0] + (N - 1) / 2) / fs
    for j in range(m.n_modes):
        # one mode, unit modal impulse at t = 0 (a 1 us half-sine: an impulse at these frequencies), 0.2 s
        y = modal_response(m.omega[j:j + 1], m.xi[j:j + 1], [0.0], [1e-6], [[1.0]], fs, n)
        # complex demodulation at f_j, Hann frames of N samples: |X| follows the envelope, arg X the phase
        X = (np.hanning(N)[None, :] * y[k] * np.exp(-1j * w[j] * k / fs)).sum(axis=1)
        slope = np.polyfit(tk, np.log(np.abs(X)), 1)[0]
        dphi = np.polyfit(tk, np.unwrap(np.angle(X)), 1)[0]
        # exact synthesis (sec. 5): only round-off and the Hann window's leakage from the negative-frequency
        # image (>= 320 bins away) remain; measured < 1e-10 (decay) and < 2e-13 (frequency). w - w_d is 2-5e-7 of
        # w, so the frequency check tells w_d from w.
        assert -slope == pytest.approx(xi[j] * w[j], rel=1e-6)
        assert w[j] + dphi == pytest.approx(w[j] * np.sqrt(1 - xi[j] ** 2), rel=1e-9)


def test_overdamped_modes_dropped():
    mat = make_material("goo", rho=1100, E=1e7, nu=0.45, beta=1e-2)     # xi = beta w / 2 >> 1 above ~30 Hz
    box = trimesh.creation.box(extents=(0.05, 0.03, 0.02))
    m = modal_analysis(box, mat, order=1, max_modes=5, max_edge=0.012, f_max=1e6)
    assert m.n_modes == 0 and m.meta["dropped_overdamped"] == 5


def test_modal_analysis_carries_its_inputs_hash(tmp_path):
    """What `impactsound modes --out` saves must say which inputs made it, or a transfer asset computed for
    another model would be accepted."""
    from impactsound.fem.model import ModalModel
    from impactsound.fem.modal import modal_inputs_hash
    from impactsound.errors import AssetError
    mat = make_material("alu", rho=2700, E=69e9, nu=0.33, alpha=1.0, beta=3e-8)
    box = trimesh.creation.box(extents=(0.05, 0.03, 0.02))
    kw = dict(max_modes=4, max_edge=0.015, f_max=1e6)
    m = modal_analysis(box, mat, order=1, **kw)
    key = modal_inputs_hash(box, mat, 1, **kw)
    assert len(key) == 64 and m.inputs_hash == key
    m.save(tmp_path / "box.h5")
    assert ModalModel.load(tmp_path / "box.h5").inputs_hash == key
    other = make_material("alu2", rho=2700, E=70e9, nu=0.33, alpha=1.0, beta=3e-8)
    with pytest.raises(AssetError, match="different inputs"):
        ModalModel.load(tmp_path / "box.h5", inputs_hash=modal_inputs_hash(box, other, 1, **kw))
    nodes, tets = tetrahedralize(box, max_edge=0.015)
    g = modal_analysis(None, mat, order=1, nodes=nodes, tets=tets, max_modes=4, f_max=1e6)
    assert g.inputs_hash == modal_inputs_hash(None, mat, 1, nodes=nodes, tets=tets, max_modes=4, f_max=1e6)
    assert g.inputs_hash not in ("", key)


def test_ftetwild_fallback_mesh_is_usable_for_modal_analysis():
    """fTetWild's mesh of a box gives TetGen's P2 modes; overlapping shells (TetGen refuses them) become one
    solid: the union's volume, one body (6 rigid modes, not 12)."""
    import warnings

    from impactsound.mesh import MeshWarning
    from impactsound.mesh.tetra import _ftetwild
    mat = make_material("abs", rho=1050, E=2.3e9, nu=0.35, alpha=30, beta=1e-6)
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    ref = modal_analysis(box, mat, order=2, max_modes=6, f_max=1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeshWarning)
        nodes, tets = _ftetwild(box, 0.006, "box", "test", lambda s: None)
    ftw = modal_analysis(None, mat, order=2, nodes=nodes, tets=tets, max_modes=6, f_max=1e6)
    assert ftw.volume == pytest.approx(0.04 * 0.03 * 0.02, rel=1e-3)
    assert np.allclose(ftw.frequencies_hz, ref.frequencies_hz, rtol=5e-3)
    a = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    b = trimesh.creation.box(extents=(0.02, 0.02, 0.04)).apply_translation([0.015, 0, 0])
    stages = []
    with pytest.warns(MeshWarning, match="fTetWild"):
        m = modal_analysis(trimesh.util.concatenate([a, b]), mat, order=1, max_modes=4, f_max=1e6,
                           progress=stages.append)
    assert m.meta["mesher"] == "ftetwild" and "fTetWild" in stages
    assert m.meta["n_components"] == 1 and m.n_modes == 4
    assert m.volume == pytest.approx(0.04 * 0.03 * 0.02 + 0.02 * 0.02 * 0.04 - 0.015 * 0.02 * 0.02, rel=1e-3)
