"""Octant symmetry of the six PAN fields (Chadwick, Zheng & James 2012, "Faster acceleration noise for multibody
animations using precomputed soundbanks", sec. 4.3): the sign table against its derivation from the parity of the
boundary data, and against full-space FDTD solves of a mirror-symmetric ellipsoid and a PANField fitted to them.

Why the discrete solves are mirror-symmetric to rounding. ``centred_grid`` puts cell centres at
origin + (i - 1/2) dx with origin = -n dx / 2, symmetric about 0 for every n: with n odd the mirror planes pass
through a row of cell centres, with n even they are cell faces; either way cells map onto cells and the staggered
faces onto faces, and the update (differences of neighbours, times coefficients that depend only on the distance
from the nearest edge) is sign-symmetric in IEEE arithmetic, so a mirror-symmetric body gives mirrored fields bit
for bit. Two things can break it:
  * the voxelization: the computed cell centres are each other's negatives only to an ulp, so a centre lying on
    the surface can be solid on one side and air on the other. Semi-axes 30, 20, 12 mm with dx = 4 mm (n odd) put
    e.g. (24, 12, 0) mm on it ((4/5)^2 + (3/5)^2 = 1): the solid is asymmetric in x and the fields disagree by
    5.7 %. dx = 3.5 mm keeps every centre at least 1.3e-3 (in x^2/a^2 + ...) off the surface (asserted below).
  * the outer walls behind the PML: the lower ones are rigid, the upper ones pressure-release (wave/fdtd.py), so
    once the wave has reached them and come back the fields differ by what the PML fails to absorb. Until then
    (each step moves the dependence by at most one cell, so not before n - (semi-axis + |receiver|)/dx steps along
    the nearest axis) the fields are symmetric to rounding; afterwards to ~1e-4 (measured below).
"""
import functools

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.pan.field import direction_vectors, fit_pan_field, sample_points, shell_radii
from impactsound.sources.pan.precompute import PulseDrive
from impactsound.sources.pan.solve import PANGridPlan, solve_field
from impactsound.sources.pan.symmetry import (MIRRORS, OCTANT_SIGNS, evaluate_folded, field_parity, fold,
                                              fold_direction, grid_mirror_map, mirror_index, mirror_points,
                                              unfold_signs)
from impactsound.wave.fdtd import COURANT_LIMIT, DEFAULT_NPML, centred_grid

C, RHO = 343.0, 1.2
ABC = np.array([0.030, 0.020, 0.012])            # semi-axes [m], principal frame = grid axes
DX = 0.0035
DT = 0.99 * COURANT_LIMIT * DX / C
H = 3 * DT


def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


# ---- the table ---------------------------------------------------------------------------------------------------
def test_table_is_the_papers_listing_and_its_derivation():
    """OCTANT_SIGNS row by row as the paper lists it (with x6 = (-x, -y, z)), equal to the parity derivation
    (s_x, s_y, s_z, s_y s_z, s_x s_z, s_x s_y), and a group homomorphism: composing mirrors XORs the indices and
    multiplies the signs."""
    pts = {0: (1, 1, 1), 1: (1, 1, -1), 2: (-1, 1, 1), 3: (-1, 1, -1), 4: (1, -1, 1), 5: (1, -1, -1),
           6: (-1, -1, 1), 7: (-1, -1, -1)}
    assert np.array_equal(MIRRORS, np.array([pts[m] for m in range(8)]))
    plus = [{0, 1, 4, 5}, {0, 1, 2, 3}, {0, 2, 4, 6}, {0, 2, 5, 7}, {0, 3, 4, 7}, {0, 1, 6, 7}]
    listed = np.array([[1 if m in plus[i] else -1 for i in range(6)] for m in range(8)])
    assert np.array_equal(OCTANT_SIGNS, listed)
    assert np.array_equal(OCTANT_SIGNS, field_parity(MIRRORS))
    assert np.array_equal(mirror_index(MIRRORS), np.arange(8))
    for m1 in range(8):
        for m2 in range(8):
            assert np.array_equal(MIRRORS[m1 ^ m2], MIRRORS[m1] * MIRRORS[m2])
            assert np.array_equal(OCTANT_SIGNS[m1 ^ m2], OCTANT_SIGNS[m1] * OCTANT_SIGNS[m2])
    assert len({tuple(r) for r in OCTANT_SIGNS}) == 8           # every mirror is told apart by the fields


def test_parity_of_the_boundary_data_on_an_ellipsoid():
    """g_i(D x) = OCTANT_SIGNS[m, i] g_i(x) for the boundary data of the six fields (translation e_i . n, rotation
    (e_k x x) . n) at random points of the ellipsoid, with its exact normals n ~ (x/a^2, y/b^2, z/c^2)."""
    rng = np.random.default_rng(1)
    x = unit(rng.normal(size=(200, 3))) * ABC

    def g(x):
        n = unit(x / ABC**2)
        rot = np.stack([np.sum(np.cross(np.broadcast_to(e, x.shape), x) * n, axis=1) for e in np.eye(3)], axis=1)
        return np.concatenate([n, rot], axis=1)                    # (n, 6)

    g0 = g(x)
    assert np.all(np.abs(g0).max(axis=0) > 0.1 * np.array([1, 1, 1, *ABC[[1, 0, 0]]]))
    for m in range(8):
        assert np.allclose(g(MIRRORS[m] * x), OCTANT_SIGNS[m] * g0, rtol=0, atol=1e-15)


def test_fold_and_unfold_signs():
    rng = np.random.default_rng(2)
    p = rng.normal(size=(500, 3))
    f, m = fold(p)
    assert np.all(f >= 0) and np.array_equal(f, np.abs(p))
    assert np.array_equal(MIRRORS[m] * f, p)
    assert np.array_equal(unfold_signs(m), OCTANT_SIGNS[m])
    assert np.array_equal(mirror_points(p[:3])[:, 0], MIRRORS * p[0])
    # the spec's points: x_m of a positive point folds back to it with index m
    f8, m8 = fold(mirror_points([[0.1, 0.2, 0.3]])[:, 0])
    assert np.array_equal(m8, np.arange(8)) and np.allclose(f8, [0.1, 0.2, 0.3], rtol=0, atol=0)
    # zero (and -0.0) coordinates count as positive
    assert np.array_equal(fold([[0.0, -0.0, -1.0], [-0.0, 2.0, 0.0]])[1], [1, 0])
    assert unfold_signs(3).shape == (1, 6)
    with pytest.raises(InputError):
        unfold_signs([8])
    with pytest.raises(InputError):
        unfold_signs([0.5])
    with pytest.raises(InputError):
        field_parity([[1, 0, 1]])


def test_fold_direction_matches_fold_of_the_vector():
    rng = np.random.default_rng(3)
    th = np.arccos(rng.uniform(-1, 1, 2000))
    ph = rng.uniform(-3 * np.pi, 3 * np.pi, 2000)               # any phi, taken mod 2 pi
    d = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=1)
    tho, pho, m = fold_direction(th, ph)
    assert np.all((tho >= 0) & (tho <= np.pi / 2) & (pho >= 0) & (pho <= np.pi / 2))
    do = np.stack([np.sin(tho) * np.cos(pho), np.sin(tho) * np.sin(pho), np.cos(tho)], axis=1)
    assert np.abs(MIRRORS[m] * do - d).max() < 1e-14
    fd, mv = fold(d)
    assert np.array_equal(m, mv) and np.abs(fd - do).max() < 1e-14
    # directions on the mirror planes stay
    tho, pho, m = fold_direction([np.pi / 2, 0.3, 0.3], [0.2, np.pi / 2, 0.0])
    assert np.array_equal(m, [0, 0, 0])
    assert np.allclose(tho, [np.pi / 2, 0.3, 0.3]) and np.allclose(pho, [0.2, np.pi / 2, 0])
    with pytest.raises(InputError):
        fold_direction(3.5, 0.0)


@pytest.mark.parametrize("n_theta,n_phi", [(4, 8), (5, 12), (1, 4), (40, 80)])
def test_grid_mirror_map(n_theta, n_phi):
    """Every node of the PANField direction grid is the mirror image of an octant node (exactly, in angle)."""
    a_o, b_o, m = grid_mirror_map(n_theta, n_phi)
    d = direction_vectors(n_theta, n_phi)
    assert np.abs(MIRRORS[m] * d[a_o, b_o] - d).max() < 1e-15
    assert np.all(2 * a_o + 1 <= n_theta) and np.all(4 * b_o <= n_phi)
    octant = (m == 0)
    assert np.array_equal(a_o[octant], np.nonzero(octant)[0]) and np.array_equal(b_o[octant], np.nonzero(octant)[1])
    with pytest.raises(InputError):
        grid_mirror_map(4, 10)


# ---- full-space FDTD solves ----------------------------------------------------------------------------------------
def inside(P):
    """Analytic inside test of the ellipsoid (cell centres), even in each coordinate."""
    return ((np.asarray(P) / ABC) ** 2).sum(axis=1) <= 1.0


def grid_of(n_interior):
    """Centred grid with n_interior cells across inside the PML (the half width makes ceil(2 half/dx) = n)."""
    half = (n_interior - 0.5) * DX / 2
    return half, centred_grid(half, DX, DEFAULT_NPML)


def causal_window(n, receivers):
    """Steps before the outer walls can reach a receiver: along axis d the body is n/2 - a_d/dx cells from each wall
    and the receiver n/2 - |x_d|/dx, one cell per step at most; two steps of margin."""
    r = np.abs(np.asarray(receivers)).max(axis=0)
    return int(min(n - (ABC[d] + r[d]) / DX for d in range(3))) - 2


def assert_voxels_symmetric(grid):
    xs = grid.cell_centres(0)
    X, Y, Z = np.meshgrid(xs, xs, xs, indexing="ij")
    q = (X / ABC[0]) ** 2 + (Y / ABC[1]) ** 2 + (Z / ABC[2]) ** 2
    assert np.abs(q - 1).min() > 1e-3                       # no centre on the surface (module docstring)
    s = inside(np.stack([X.ravel(), Y.ravel(), Z.ravel()], 1)).reshape(X.shape)
    assert s.sum() > 500 and all(np.array_equal(s, np.flip(s, a)) for a in range(3))


def solve_six(n_interior, receivers, n_steps):
    half, grid = grid_of(n_interior)
    assert_voxels_symmetric(grid)
    plan = PANGridPlan(dx=DX, dt=DT, n_steps=n_steps, shape=grid.shape, npml=DEFAULT_NPML, half_width=half)
    p = np.stack([solve_field(f, inside, plan, receivers, PulseDrive(H, 2 * H), C, RHO) for f in range(6)])
    return grid, p


@functools.lru_cache(maxsize=2)
def octant_solve(n_interior):
    """Six fields at the eight images of a cell centre x0 ~ (40, 25, 18) mm and (odd n) at points on the three
    mirror planes; 220 steps. The pulse peaks at x0 near step 20 and has rung down to ~1e-2 of its peak by the
    end of the walls' causal window (step 103 / 105); the later steps show what the walls add."""
    _, grid = grid_of(n_interior)
    xs = grid.cell_centres(0)
    x0 = np.array([xs[np.argmin(np.abs(xs - v))] for v in (0.040, 0.025, 0.018)])
    rec = [mirror_points(x0[None])[:, 0]]
    if n_interior % 2:                                      # odd: cell centres on the planes x = 0, y = 0, z = 0
        rec.append(np.array([[0.0, x0[1], x0[2]], [x0[0], 0.0, x0[2]], [x0[0], x0[1], 0.0]]))
    rec = np.concatenate(rec)
    grid, p = solve_six(n_interior, rec, 220)
    return grid, rec, p


@pytest.mark.parametrize("n_interior", [110, 111], ids=["mirror planes on faces", "mirror planes on centres"])
def test_fdtd_fields_obey_the_table(n_interior):
    """p_i(x_m) = OCTANT_SIGNS[m, i] p_i(x0) for the six FDTD fields of the ellipsoid (126^3 / 127^3 cells with
    the PML, 220 steps of the pulse h = 3 dt, about 4.5 s each). Measured: max |p_i(x_m) - s p_i(x0)| /
    max |p_i(x0)| <= 4.0e-15 for the steps before the walls can act (the first 103 / 105; the first difference
    above 1e-12 appeared at step 169), over all 220 steps 2.2e-6 .. 4.4e-5 (the walls behind the PML). The
    opposite sign misses by 2.0 for every mirror and field; the fields odd in a coordinate are exactly 0 on its
    mirror plane (odd n)."""
    grid, rec, p = octant_solve(n_interior)
    n = grid.shape[0]
    win = causal_window(n, rec)
    assert 100 <= win < 200
    ref = p[:, 0]                                               # (6, steps) at x0
    scale = np.abs(ref).max(axis=1)                             # per field
    assert np.all(scale > 0)
    peak = np.abs(ref).argmax(axis=1)
    assert np.all(peak < win // 2)                             # the pulse has passed x0 inside the window
    for i in range(6):
        for m in range(8):
            s = OCTANT_SIGNS[m, i]
            early = np.abs(p[i, m, :win] - s * ref[i, :win]).max() / scale[i]
            full = np.abs(p[i, m] - s * ref[i]).max() / scale[i]
            assert early < 1e-12, (i, m, early)
            assert full < 2e-4, (i, m, full)
            if m:
                wrong = np.abs(p[i, m, :win] + s * ref[i, :win]).max() / scale[i]
                assert wrong > 1.9, (i, m, wrong)
    if n_interior % 2:                                          # the planes x = 0, y = 0, z = 0
        for d in range(3):
            odd = [i for i in range(6) if field_parity(np.where(np.arange(3) == d, -1, 1))[i] < 0]
            assert odd == [i for i in range(6) if OCTANT_SIGNS[[2, 4, 1][d], i] < 0]
            for i in odd:
                assert np.abs(p[i, 8 + d, :win]).max() < 1e-12 * scale[i], (d, i)
            for i in set(range(6)) - set(odd):
                assert np.abs(p[i, 8 + d, :win]).max() > 1e-3 * scale[i]


def test_x6_is_minus_x_minus_y_plus_z():
    """The paper prints x6 as "(-x,-y-z)". The FDTD fields at (-x, -y, -z) (= x7) follow the x7 row, which
    differs from the x6 row in p3..p5 (indices 2..4: translation z, rotation x, rotation y) by the sign, so
    reading x6 as (-x, -y, -z) is contradicted by 2.0 (relative) there; at (-x, -y, z) the x6 row holds to
    rounding."""
    grid, rec, p = octant_solve(110)
    win = causal_window(grid.shape[0], rec)
    x0 = rec[0]
    assert np.array_equal(rec[6], x0 * [-1, -1, 1]) and np.array_equal(rec[7], -x0)
    differ = np.nonzero(OCTANT_SIGNS[6] != OCTANT_SIGNS[7])[0]
    assert list(differ) == [2, 3, 4]
    for i in range(6):
        scale = np.abs(p[i, 0, :win]).max()
        at_x6 = np.abs(p[i, 6, :win] - OCTANT_SIGNS[6, i] * p[i, 0, :win]).max() / scale
        misread = np.abs(p[i, 7, :win] - OCTANT_SIGNS[6, i] * p[i, 0, :win]).max() / scale
        assert at_x6 < 1e-12
        assert (misread > 1.9) if i in differ else (misread < 1e-12)


# ---- a PANField of the symmetric object ----------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def symmetric_pan_field():
    """A PANField fitted (fit_pan_field, N = 2) to the FDTD fields of the ellipsoid at the 4 x 8 grid directions and
    M = 3 fit radii 2 R_b kappa^(0..2) (60-85 mm, R_b = a = 30 mm), 111^3 cells with the PML, 75 steps: all inside
    the walls' causal window, so the samples are mirror-symmetric to rounding (about 1.5 s)."""
    R_b = ABC[0]
    radii = shell_radii(R_b, M=3)
    pts = sample_points(R_b, 4, 8, M=3)                                 # (4, 8, 3, 3)
    n_interior, steps = 95, 75
    assert causal_window(n_interior + 2 * DEFAULT_NPML, pts.reshape(-1, 3)) >= steps
    grid, p = solve_six(n_interior, pts.reshape(-1, 3), steps)
    p = p.reshape(6, 4, 8, 3, steps)
    vol = 4 / 3 * np.pi * ABC.prod()
    mass = 1000.0 * vol
    inertia = mass / 5 * np.diag([ABC[1] ** 2 + ABC[2] ** 2, ABC[0] ** 2 + ABC[2] ** 2, ABC[0] ** 2 + ABC[1] ** 2])
    fld = fit_pan_field(p, radii=radii, c=C, rho=RHO, dt=DT, t_start=DT - 2 * H, h=H, R_b=R_b, mass=mass,
                        inertia=inertia)
    return p, fld


def test_pan_field_samples_and_coefficients_are_octant_symmetric():
    """The sampled series and the fitted coefficients at every grid direction equal the signed ones at its octant
    node (grid_mirror_map). Measured, relative to each field's max: samples 1.0e-14, float32 coefficients 2.3e-15
    (the tolerance allows one float32 rounding, 1e-6); the wrong sign: 2.0. Fit rank 130 of 132 unknowns."""
    p, fld = symmetric_pan_field()
    a_o, b_o, m = grid_mirror_map(4, 8)
    for i in range(6):
        s = OCTANT_SIGNS[m, i][:, :, None, None]
        ps = p[i][a_o, b_o] * s
        assert np.abs(p[i] - ps).max() <= 1e-12 * np.abs(p[i]).max()
        q = fld.q[i].astype(np.float64)
        qs = q[a_o, b_o] * s
        assert np.abs(q - qs).max() <= 1e-6 * np.abs(q).max(), i
        assert np.abs(q + qs)[m != 0].max() > 1.0 * np.abs(q).max()        # the wrong sign fails


def test_pan_field_evaluated_at_mirrored_points_and_directions():
    """PANField.evaluate at the eight images of points off the direction grid (R = 1.2..8 R_b, inside and outside
    the fit shells) gives the signed values, and so does evaluate_folded and the octant direction of
    fold_direction. Measured max error / field max: 1.7e-15 (tolerance 1e-6, one float32 rounding); the
    wrong sign: 2.0."""
    p, fld = symmetric_pan_field()
    rng = np.random.default_rng(5)
    npt = 12
    th = np.arccos(rng.uniform(0.05, 0.95, npt))                    # generic octant directions
    ph = rng.uniform(0.05, np.pi / 2 - 0.05, npt)
    R = fld.R_b * rng.uniform(1.2, 8.0, npt)
    d = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=1)
    x0 = d * R[:, None]
    t = fld.tau0 + fld.dt_q * np.arange(fld.n_coef + 60)
    for i in range(6):
        v0 = fld.evaluate(i, x0, t)
        scale = np.abs(v0).max()
        assert scale > 0
        for m in range(8):
            xm = MIRRORS[m] * x0
            vm = fld.evaluate(i, xm, t)
            s = OCTANT_SIGNS[m, i]
            assert np.abs(vm - s * v0).max() <= 1e-6 * scale, (i, m)
            assert np.abs(evaluate_folded(fld, i, xm, t) - vm).max() <= 1e-6 * scale
            if m:
                assert np.abs(vm + s * v0).max() > 1.9 * scale
            # through the angles: (theta, phi) of x_m -> octant direction and mirror
            thm = np.arccos(xm[:, 2] / R)
            phm = np.arctan2(xm[:, 1], xm[:, 0])
            tho, pho, mm = fold_direction(thm, phm)
            assert np.all(mm == m)
            do = np.stack([np.sin(tho) * np.cos(pho), np.sin(tho) * np.sin(pho), np.cos(tho)], axis=1)
            vo = OCTANT_SIGNS[mm, i][:, None] * fld.evaluate(i, do * R[:, None], t)
            assert np.abs(vo - vm).max() <= 1e-6 * scale
