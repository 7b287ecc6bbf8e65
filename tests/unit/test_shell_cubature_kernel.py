"""Compiled cubature kernel (sources/shell/_cubature_kernel.py, ReducedShell.compiled_cubature) against the NumPy
reference (Chadwick, An & James 2009, sec. 2.3): per-element nodal forces equal ShellModel.element_forces, reduced
per-element forces equal ReducedShell.element_forces, the weighted sum equals cubature_force, all to 1e-11
relative, on random poses of a flat plate and of a curved jittered patch (both with free edges), with either bending
scheme ("flap", "midedge"); the result is bitwise deterministic and independent of the thread count; the compiled
Newmark matches dynamics.integrate."""
from __future__ import annotations

import sys
from pathlib import Path

import numba
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_shell_model import PLATE_MAT, disk, grid  # noqa: E402

from impactsound.fem.shell import ShellModel  # noqa: E402
from impactsound.sources.shell.cubature import Cubature, cubature_force  # noqa: E402
from impactsound.sources.shell.dynamics import integrate  # noqa: E402
from impactsound.sources.shell.reduced import ReducedShell  # noqa: E402

H = 1e-3
R_MODES = 7


def _reduced(V, F, seed, bending="flap"):
    """A ReducedShell with a random orthonormal basis (the kernel does not assume modes) and omega = 1..r."""
    m = ShellModel(V, F, H, PLATE_MAT, bending=bending)
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((m.ndof, R_MODES)))
    return ReducedShell(m, U, np.linspace(1.0, 2.0, R_MODES))


@pytest.fixture(scope="module", params=["plate", "curved", "plate-midedge", "curved-midedge"])
def shell(request):
    shape, _, bending = request.param.partition("-")
    if shape == "plate":
        V, F = disk(5, 0.1)
        return _reduced(V, F, 1, bending or "flap")
    V, F = grid(6, 5, 0.1, 0.08, rng=np.random.default_rng(4), z=0.004)
    V[:, 2] += 2.0 * ((V[:, 0] - 0.05) ** 2 + 0.5 * (V[:, 1] - 0.04) ** 2)      # curved rest shape
    return _reduced(V, F, 2, bending or "flap")


def _poses(rs, n, seed):
    """Displacements of a few thicknesses (large rotations of the hinges, nonlinear regime)."""
    rng = np.random.default_rng(seed)
    scale = 3 * H / np.abs(rs.U).max()
    return rng.standard_normal((n, rs.r)) * scale / np.sqrt(rs.r)


def _cub(rs, seed):
    rng = np.random.default_rng(seed)
    Nf = len(rs.model.faces)
    el = rng.permutation(Nf)[: max(3, (2 * Nf) // 3)]
    w = rng.uniform(0.5, 2.0, el.size)
    return Cubature(elements=el.astype(np.int64), weights=w, train_error=0.0, holdout_error=np.nan,
                    history=np.zeros(0))


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def test_fixture_has_free_and_interior_edges(shell):
    n_int = shell.model.interior.sum(axis=1)
    assert (n_int == 3).any() and (n_int < 3).any() and (~shell.model.interior).any()


def test_nodal_forces_match_shell_model(shell):
    el = np.arange(len(shell.model.faces))
    cc = shell.compiled_cubature(Cubature(el, np.ones(el.size), 0.0, np.nan, np.zeros(0)))
    for q in _poses(shell, 4, 10):
        u = shell.U @ q
        fm_ref, fb_ref = shell.model.element_forces(u)
        fm, fb = cc.nodal_forces(u)
        assert _rel(fm, fm_ref) <= 1e-11
        assert _rel(fb, fb_ref) <= 1e-11
        assert np.abs(fb_ref).max() > 0.0 and np.abs(fm_ref).max() > 0.0


def test_reduced_element_forces_match(shell):
    cub = _cub(shell, 5)
    cc = shell.compiled_cubature(cub)
    for q in _poses(shell, 3, 11):
        ref = shell.element_forces(q[None], cub.elements)[0]
        assert _rel(cc.element_forces(q), ref) <= 1e-11


def test_cubature_force_matches_and_is_deterministic(shell):
    cub = _cub(shell, 6)
    cc = shell.compiled_cubature(cub)
    for q in _poses(shell, 3, 12):
        ref = cubature_force(cub, shell.element_forces, q)
        f = cc.force(q)
        assert f.shape == (shell.r,)
        assert _rel(f, ref) <= 1e-11
        assert np.array_equal(f, cc.force(q))
    _assert_thread_independent(cc, _poses(shell, 1, 13)[0])


def _assert_thread_independent(cc, q):
    """cc.force(q) bitwise the same on 1 thread and on all of them."""
    n0 = numba.get_num_threads()
    outs = []
    try:
        for t in sorted({1, n0}):
            numba.set_num_threads(t)
            outs.append(cc.force(q))
    finally:
        numba.set_num_threads(n0)
    assert all(np.array_equal(outs[0], o) for o in outs)


def test_empty_cubature_and_bad_input(shell):
    from impactsound.errors import InputError
    cc = shell.compiled_cubature(Cubature(np.zeros(0, np.int64), np.zeros(0), 0.0, np.nan, np.zeros(0)))
    assert np.array_equal(cc.force(np.zeros(shell.r)), np.zeros(shell.r))
    with pytest.raises(InputError):
        shell.compiled_cubature(Cubature(np.array([len(shell.model.faces)]), np.ones(1), 0.0, np.nan,
                                         np.zeros(0)))
    with pytest.raises(InputError):
        cc.force(np.zeros(shell.r + 1))


def test_compiled_newmark_matches_integrate(shell):
    cub = _cub(shell, 7)
    cc = shell.compiled_cubature(cub)
    q0 = _poses(shell, 1, 14)[0]
    v0 = np.zeros(shell.r)
    K = shell.model.stiffness()
    w_max = np.sqrt(np.linalg.eigvalsh(shell.U.T @ (K @ shell.U)).max())     # random basis: stiff
    omega = w_max * np.linspace(0.5, 1.0, shell.r)
    alpha, beta = 10.0, 1e-2 / w_max**2
    d = alpha + beta * omega**2
    dt, n = 0.2 / w_max, 20
    run = integrate(q0, v0, dt, n, omega=omega, alpha=alpha, beta=beta, f_int=cc.force)
    q, v = cc.newmark(q0, v0, dt, n, d=d)
    assert _rel(q, run.q[-1]) <= 1e-12 and _rel(v, run.v) <= 1e-12


def test_float32_storage_is_the_exact_force_of_the_rounded_basis(shell):
    """precision="float32" stores U_V rounded to float32 but computes in float64: it must equal the NumPy cubature
    of the ReducedShell whose basis is that rounded U (to round-off), be deterministic on any thread count, and
    differ from the float64 kernel by no more than the basis rounding can explain."""
    cub = _cub(shell, 8)
    c32 = shell.compiled_cubature(cub, precision="float32")
    c64 = shell.compiled_cubature(cub)
    assert c32.Ue.dtype == np.float32 and c64.Ue.dtype == np.float64
    Ur = c32.U_rounded
    assert 0.0 < np.abs(Ur - shell.U).max() <= 2.0**-24 * np.abs(shell.U).max()
    rounded = ReducedShell(shell.model, Ur, shell.omega)
    # bound on the float32-vs-float64 difference: rounding U moves each vertex by ~2^-24 |u|, a spurious membrane
    # strain ~2^-24 |u| / L whose force (E h per strain) is (L / h)^2 times 2^-24 the bending force (E h^3 |u| / L^3)
    m = shell.model
    L = np.linalg.norm(m.vertices[m.faces] - m.vertices[np.roll(m.faces, 1, axis=1)], axis=2).max()
    bound = 2.0**-24 * (L / H) ** 2
    for q in _poses(shell, 3, 15):
        ref = cubature_force(cub, rounded.element_forces, q)
        f = c32.force(q)
        assert _rel(f, ref) <= 1e-11
        assert _rel(c32.element_forces(q), rounded.element_forces(q[None], cub.elements)[0]) <= 1e-11
        assert 0.0 < _rel(f, c64.force(q)) <= bound
        _assert_thread_independent(c32, q)
    from impactsound.errors import InputError
    with pytest.raises(InputError, match="precision"):
        shell.compiled_cubature(cub, precision="float16")


def test_chunk_vertices(shell):
    """Each chunk of elements stores U's rows once per distinct vertex of its stencils: every slot maps back onto
    its stencil vertex, chunks of triangles along the space-filling curve store fewer rows than 6 (or 12, "midedge")
    per triangle, and the padding rows (-1, zero rows of U) are never read."""
    from impactsound.sources.shell._cubature_kernel import CHUNK
    from impactsound.sources.shell.reduced import chunk_vertices, curve_order
    m = shell.model
    el = np.arange(len(m.faces))[curve_order(m.vertices[m.faces].mean(axis=1))]
    verts, voff, slot = chunk_vertices(m.stencil[el], CHUNK)
    assert np.all(np.diff(voff) % 3 == 0) and voff[-1] == len(verts) and slot.shape == m.stencil.shape
    chunk = np.arange(len(el)) // CHUNK
    assert np.array_equal(verts[voff[chunk][:, None] + slot], m.stencil[el])
    per_tri = 12 if m.bending == "midedge" else 6
    assert (verts >= 0).sum() < 0.8 * per_tri * len(el)
    cc = shell.compiled_cubature(_cub(shell, 9))
    pad = np.repeat(chunk_vertices(m.stencil[cc.elements[cc._order]], CHUNK)[0] < 0, 3)
    assert np.all(cc.Ue[pad] == 0.0) and np.all(cc.X0[pad] == 0.0)


def test_folded_triangle_is_a_clear_error():
    """A pose that folds a triangle flat (a one-mode basis that moves a vertex exactly onto its neighbour, on a grid
    whose coordinates are exact binary fractions) is reported as a SolverError that says what to change, not
    returned as NaN forces; the same basis at half the pose is finite."""
    from impactsound.errors import SolverError
    V, F = grid(3, 3, 0.375, 0.375)                       # vertices at multiples of 0.125 m
    m = ShellModel(V, F, H, PLATE_MAT)
    a = int(np.flatnonzero((np.abs(V[:, 0] - 0.125) < 1e-12) & (np.abs(V[:, 1] - 0.125) < 1e-12))[0])
    b = int(np.flatnonzero((np.abs(V[:, 0] - 0.25) < 1e-12) & (np.abs(V[:, 1] - 0.125) < 1e-12))[0])
    U = np.zeros((m.ndof, 1))
    U[3 * a:3 * a + 3, 0] = V[b] - V[a]
    rs = ReducedShell(m, U, np.ones(1))
    el = np.arange(len(F))
    cc = rs.compiled_cubature(Cubature(el, np.ones(el.size), 0.0, np.nan, np.zeros(0)))
    assert np.isfinite(cc.force(np.array([0.5]))).all()
    with pytest.raises(SolverError, match="non-finite"):
        cc.force(np.array([1.0]))


def test_simd_chunk_forces_are_bitwise_element_force(shell):
    """chunk_forces (a chunk's elements at once, structure-of-arrays, SIMD across elements) performs each element's
    operations in element_force's order: the same bits, on every chunk (a partial last one included), random
    poses in the nonlinear range, free edges and either bending scheme."""
    from impactsound.sources.shell import _cubature_kernel as kern
    from impactsound.sources.shell.reduced import chunk_soa
    m = shell.model
    el = np.arange(len(m.faces))
    cc = shell.compiled_cubature(Cubature(el, np.ones(el.size), 0.0, np.nan, np.zeros(0)))
    CH = kern.CHUNK
    k, S = cc.slot.shape
    nf = S // 6
    assert k % CH != 0                                          # a partial chunk is exercised
    gN, R, th0, it, A = chunk_soa(cc.gN, cc.R, cc.theta0, cc.interior, cc.areas, CH)
    for q in _poses(shell, 3, 17):
        xs_all = np.ascontiguousarray(m._as_positions(shell.U @ q)[m.stencil[el[cc._order]]])    # (k, S, 3)
        fm, fb = kern.nodal_forces(xs_all, cc.gN, cc.R, cc.Qm, cc.theta0, cc.interior, cc.areas, cc.c_m, cc.c_b)
        ref = fb.copy()
        ref[:, :3] += fm
        for c in range(-(-k // CH)):
            ne = min(CH, k - c * CH)
            xs = np.zeros((S, 3, CH))
            xs[:, :, :ne] = xs_all[c * CH:c * CH + ne].transpose(1, 2, 0)
            fs = np.empty(S * 3 * CH)
            kern.chunk_forces(xs.reshape(-1), ne, S, nf, gN[c], R[c], cc.Qm, th0[c], it[c], A[c], cc.c_m, cc.c_b,
                              fs, np.empty(nf * 3 * kern.NG_HINGE * CH), np.empty(CH), np.empty(nf * 3 * CH),
                              np.empty(nf * 3 * CH), np.empty(9 * CH), np.empty(4 * CH))
            got = fs.reshape(S, 3, CH)[:, :, :ne].transpose(2, 0, 1)
            assert np.array_equal(got, ref[c * CH:c * CH + ne])
