"""Ellipsoidal proxies, the bank grid and the PAN scaling law (Chadwick, Zheng & James 2012, "Faster acceleration
noise for multibody animations using precomputed soundbanks", sec. 3), against independent references:
analytic ellipsoid and box mass properties, the exact rigid-sphere field, and the FDTD solver itself."""
import math

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from impactsound.errors import MeshError
from impactsound.sources.pan.proxy import (BANK_A, BANK_AXIS_VALUES, MIN_AXIS_RATIO, DegenerateProxyError, Proxy,
                                           bank_entries, fit_proxy, fit_proxy_from_inertia, from_bank_space,
                                           from_proxy_space, nearest_entry, pressure_scale, scale_samples,
                                           scaled_field, to_bank_space, to_proxy_space)

ROT = Rotation.from_euler("zyx", [0.7, -0.4, 1.1]).as_matrix()      # a generic proper rotation
SHIFT = np.array([0.1, -0.2, 0.3])


def ellipsoid_mesh(abc, subdivisions, R=ROT, shift=SHIFT):
    m = trimesh.creation.icosphere(subdivisions=subdivisions)
    m.vertices = (m.vertices * np.asarray(abc)) @ R.T + shift
    return m


# ---- fitting --------------------------------------------------------------------------------------------------
def test_ellipsoid_mesh_recovers_semi_axes_and_axes():
    """An icosphere scaled by (a, b, c), rotated and shifted: the fit recovers (a, b, c) within the faceting error
    and converges at O(edge^2), and the principal axes up to sign.

    Faceting error: the inscribed mesh lacks a fraction delta of the ellipsoid's volume (measured: 3.4e-2, 8.6e-3,
    2.2e-3, 5.4e-4 for subdivisions 2..5). Volume matching then shrinks the axes by about delta/3 (measured max
    relative semi-axis errors 1.14e-2, 2.88e-3, 7.21e-4, 1.80e-4: each ~0.33 delta, a factor 3.96-3.99 per
    subdivision, i.e. second order in the edge length)."""
    abc = np.array([0.03, 0.02, 0.012])
    V = 4.0 / 3.0 * math.pi * abc.prod()
    errs = []
    for n in (2, 3, 4, 5):
        m = ellipsoid_mesh(abc, n)
        p = fit_proxy(m)
        delta = 1.0 - m.volume / V
        err = np.abs(p.semi_axes / abc - 1.0).max()
        assert err <= 0.36 * delta
        errs.append(err)
        assert np.allclose(p.center, SHIFT, atol=1e-12)
        # axes up to sign: proxy x along a (the longest), y along b, z along c
        assert np.allclose(np.abs(np.sum(p.rotation * ROT, axis=0)), 1.0, atol=1e-12)
        assert np.linalg.det(p.rotation) == pytest.approx(1.0, abs=1e-12)
        assert np.allclose(p.rotation.T @ p.rotation, np.eye(3), atol=1e-12)
        assert 4.0 / 3.0 * math.pi * np.prod(p.semi_axes) == pytest.approx(m.volume, rel=1e-12)
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.8) & (ratios < 4.2))
    assert errs[-1] < 2e-4


def test_box_recovers_the_ellipsoid_of_its_inertia_and_volume():
    """Box a x b x c: I = (m/12) diag(b^2 + c^2, a^2 + c^2, a^2 + b^2), so the ellipsoid of eq. 11 has semi-axes
    sqrt(5/12) (a, b, c); rescaled to volume abc they are (3/(4 pi))^(1/3) (a, b, c)."""
    a, b, c = 0.05, 0.03, 0.01
    R = Rotation.from_euler("xyz", [0.3, 1.2, -0.5]).as_matrix()
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, [0.01, 0.02, -0.03]
    box = trimesh.creation.box(extents=[b, c, a])               # axes deliberately not in size order
    box.apply_transform(T)
    p = fit_proxy(box)
    k = (3.0 / (4.0 * math.pi)) ** (1.0 / 3.0)
    assert np.allclose(p.semi_axes, k * np.array([a, b, c]), rtol=1e-10)
    assert 4.0 / 3.0 * math.pi * np.prod(p.semi_axes) == pytest.approx(a * b * c, rel=1e-12)
    assert p.volume == pytest.approx(a * b * c, rel=1e-12)
    assert np.allclose(p.center, [0.01, 0.02, -0.03], atol=1e-14)
    # the box's long edge (mesh z) is proxy x, its b edge (mesh x) proxy y, its c edge (mesh y) proxy z
    assert np.allclose(np.abs(np.sum(p.rotation * R[:, [2, 0, 1]], axis=0)), 1.0, atol=1e-10)
    assert np.linalg.det(p.rotation) == pytest.approx(1.0, abs=1e-12)
    # the proxy's moments match the box's up to one factor (sec. 3.3): mass, volume and shape ratios are kept
    A, B, C = p.semi_axes
    m = a * b * c
    I_ell = m / 5 * np.array([B * B + C * C, A * A + C * C, A * A + B * B])
    I_box = m / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    assert np.allclose(I_ell / I_box, 12.0 / 5.0 * k * k, rtol=1e-10)


def test_inertia_scale_and_frame_do_not_matter():
    """From (volume, inertia): the inertia per unit density or for any mass gives the same proxy."""
    abc = np.array([0.04, 0.025, 0.01])
    V = 4.0 / 3.0 * math.pi * abc.prod()
    J = V / 5 * np.diag([abc[1] ** 2 + abc[2] ** 2, abc[0] ** 2 + abc[2] ** 2, abc[0] ** 2 + abc[1] ** 2])
    I = ROT @ J @ ROT.T                                           # per unit density, rotated
    for s in (1.0, 2700.0, 1e-6):
        p = fit_proxy_from_inertia(V, s * I, center=SHIFT)
        assert np.allclose(p.semi_axes, abc, rtol=1e-12)          # an exact ellipsoid is its own proxy
        assert np.allclose(np.abs(np.sum(p.rotation * ROT, axis=0)), 1.0, atol=1e-12)
    p = fit_proxy_from_inertia(V, np.diag([2.0, 2.0, 2.0]))       # a sphere: any frame, equal axes
    assert np.allclose(p.semi_axes, (3 * V / (4 * math.pi)) ** (1 / 3), rtol=1e-12)
    assert np.linalg.det(p.rotation) == pytest.approx(1.0)


# ---- degenerate objects -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("volume, inertia, what", [
    (0.0, np.diag([1.0, 2.0, 2.5]), "volume"),
    (-1e-6, np.diag([1.0, 2.0, 2.5]), "volume"),
    (float("nan"), np.diag([1.0, 2.0, 2.5]), "volume"),
    (1e-6, np.diag([1.0, np.nan, 2.5]), "not finite"),
    (1e-6, np.diag([np.inf, 2.0, 2.5]), "not finite"),
    (1e-6, np.zeros((3, 3)), "zero"),
    (1e-6, np.diag([-1.0, 2.0, 2.5]), "positive definite"),
    (1e-6, np.array([[1.0, 0.5, 0], [0, 2, 0], [0, 0, 2.5]]), "symmetric"),
    (1e-6, np.diag([1.0, 2.0, 3.0]), r"C\^2 <= 0"),                 # a lamina: D3 = D1 + D2
    (1e-6, np.diag([1.0, 2.0, 3.5]), r"C\^2 <= 0"),                 # no body has D3 > D1 + D2
])
def test_degenerate_inertia_raises(volume, inertia, what):
    with pytest.raises(DegenerateProxyError, match=what) as e:
        fit_proxy_from_inertia(volume, inertia, name="shard_17")
    assert isinstance(e.value, MeshError)
    assert e.value.name == "shard_17" and "shard_17" in str(e.value) and e.value.reason in str(e.value)


def test_degenerate_meshes_raise():
    with pytest.raises(DegenerateProxyError, match="volume"):     # a closed box of zero thickness
        fit_proxy(trimesh.creation.box(extents=[0.1, 0.1, 0.0]), name="sheet")
    inv = trimesh.creation.box(extents=[0.1, 0.05, 0.02])
    inv.invert()
    with pytest.raises(DegenerateProxyError, match="volume"):
        fit_proxy(inv)
    sheet = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], [[0, 1, 2], [1, 3, 2]])
    with pytest.raises(DegenerateProxyError, match="watertight"):
        fit_proxy(sheet)
    # a foil: C/A = 1e-4, below MIN_AXIS_RATIO; ten times thicker passes and maps to the thinnest entry
    with pytest.raises(DegenerateProxyError, match="C/A"):
        fit_proxy(trimesh.creation.box(extents=[0.1, 0.1, 1e-5]))
    p = fit_proxy(trimesh.creation.box(extents=[0.1, 0.1, 10 * MIN_AXIS_RATIO * 0.1]))
    assert p.ratios[1] == pytest.approx(10 * MIN_AXIS_RATIO, rel=1e-6)
    assert nearest_entry(p)[1] == pytest.approx((0.5, 0.025))


# ---- the bank grid --------------------------------------------------------------------------------------------------
def test_bank_entries():
    E = bank_entries()
    assert E.shape == (66, 2)
    assert np.allclose(BANK_AXIS_VALUES, np.linspace(0.025, 0.5, 11))
    assert np.all(E[:, 0] >= E[:, 1])
    assert len({(round(x, 9), round(y, 9)) for x, y in E}) == 66
    for kb in range(11):
        for kc in range(kb + 1):
            assert np.allclose(E[kb * (kb + 1) // 2 + kc], (0.025 + 0.0475 * kb, 0.025 + 0.0475 * kc))
    assert np.allclose(E[-1], (BANK_A, BANK_A))


@pytest.mark.parametrize("kb, kc, dB, dC, beta", [
    (0, 0, 0.0, 0.0, 0.02),
    (10, 10, -0.02, -0.023, 1.0),                  # near-sphere
    (7, 3, 0.023, -0.023, 0.15),                   # just inside the cell on both sides
    (5, 0, -0.0, -0.02, 3.0),
    (10, 0, 0.0, -0.024, 0.07),                    # thinner than the grid: its edge
])
def test_nearest_entry_constructed(kb, kc, dB, dC, beta):
    Bp, Cp = BANK_AXIS_VALUES[kb] + dB, BANK_AXIS_VALUES[kc] + dC
    p = Proxy(semi_axes=beta * np.array([0.5, Bp, Cp]), rotation=np.eye(3), center=np.zeros(3),
              volume=4 / 3 * math.pi * beta ** 3 * 0.5 * Bp * Cp)
    i, (B, C), b = nearest_entry(p)
    assert i == kb * (kb + 1) // 2 + kc
    assert (B, C) == pytest.approx((BANK_AXIS_VALUES[kb], BANK_AXIS_VALUES[kc]))
    assert b == pytest.approx(beta, rel=1e-14)


def test_nearest_entry_is_nearest_in_the_bank_plane():
    rng = np.random.default_rng(3)
    E = bank_entries()
    for _ in range(200):
        r = np.sort(rng.uniform(0.01, 1.0, 2))[::-1]               # (B/A, C/A)
        p = Proxy(np.array([0.2, 0.2 * r[0], 0.2 * r[1]]), np.eye(3), np.zeros(3), 1.0)
        i, _, beta = nearest_entry(p)
        d = np.hypot(E[:, 0] - 0.5 * r[0], E[:, 1] - 0.5 * r[1])
        assert d[i] == pytest.approx(d.min(), abs=1e-15) and beta == pytest.approx(0.4)


def test_fitted_ellipsoid_lands_on_its_entry():
    abc = 0.037 * np.array([0.5, BANK_AXIS_VALUES[6], BANK_AXIS_VALUES[2]])
    p = fit_proxy(ellipsoid_mesh(abc, 5))
    i, (B, C), beta = nearest_entry(p)
    assert i == 6 * 7 // 2 + 2 and (B, C) == pytest.approx((BANK_AXIS_VALUES[6], BANK_AXIS_VALUES[2]))
    assert beta == pytest.approx(0.037, rel=2e-4)                  # within the faceting error


# ---- spaces ---------------------------------------------------------------------------------------------------------
def test_proxy_space_round_trip_and_rigid_kinematics():
    """x' = Z^T (x - x0), a' = Z^T a, alpha' = Z^T alpha (sec. 3.3) keeps rigid-body kinematics: the acceleration
    a + alpha x (x - x0) of a surface point maps to a' + alpha' x x' (Z proper), and normal components stay."""
    p = fit_proxy(ellipsoid_mesh([0.03, 0.02, 0.012], 3))
    Z, x0 = p.rotation, p.center
    rng = np.random.default_rng(0)
    x, a, al = rng.normal(size=(3, 7, 3))
    xp, ap, alp = to_proxy_space(Z, x0, x, a, al)
    assert np.allclose(xp, (x - x0) @ Z) and np.allclose(ap, (Z.T @ a.T).T) and np.allclose(alp, (Z.T @ al.T).T)
    acc = a + np.cross(al, x - x0)
    assert np.allclose((Z.T @ acc.T).T, ap + np.cross(alp, xp))
    back = from_proxy_space(Z, x0, xp, ap, alp)
    for u, v in zip(back, (x, a, al)):
        assert np.allclose(u, v, atol=1e-14)
    assert to_proxy_space(Z, x0, points=x)[1:] == (None, None)
    xb, tb = to_bank_space(p.beta, xp, np.array([1e-4, 2e-4]))
    assert np.allclose(xb, xp / p.beta) and np.allclose(tb, [1e-4 / p.beta, 2e-4 / p.beta])
    assert np.allclose(from_bank_space(p.beta, xb, tb)[0], xp)
    with pytest.raises(ValueError):
        to_bank_space(0.0, xp)
    with pytest.raises(ValueError):
        pressure_scale(6, 1.0)


# ---- the scaling law (sec. 3.1, eq. 10) against exact rigid-sphere fields ------------------------------------------
RHO, C = 1.2, 343.0


def sphere_field(x, t, a, d, centre, w):
    """Exact pressure of a rigid sphere (radius a, centre ``centre``) whose surface moves rigidly with the
    acceleration vector w sin(pi t / d) on [0, d] (:mod:`impactsound.transfer.rigid_sphere`); t from the start of
    the pulse (which the scaling keeps at t = 0, like the centre of the PAN pulse)."""
    from impactsound.transfer.rigid_sphere import sphere_pressure_half_sine
    x = np.asarray(x, float).reshape(-1, 3)
    t = np.asarray(t, float).reshape(-1)
    rv = x - centre
    r = np.linalg.norm(rv, axis=1)
    wn = np.linalg.norm(w)
    cos = rv @ (w / wn) / r
    T = t[None, :] - (r[:, None] - a) / C
    return wn * sphere_pressure_half_sine(T, a, 1.0, d, r[:, None], cos[:, None], RHO, C)


@pytest.mark.parametrize("beta", [0.37, 2.0, 5.5])
@pytest.mark.parametrize("field", [0, 1, 2, 3, 4, 5])
def test_scaling_law_exact_for_rigid_sphere(field, beta):
    """Translation i = 0..2: a sphere centred on x0 = 0 accelerating along e_i. Rotation i = 3..5: a sphere
    centred at c != x0 turning about e_{i-3} through x0; its normal surface acceleration (e x (x - x0)) . n equals
    (e x c) . n, a rigid translation with acceleration e x c, so the exact field is known too. The scaled object
    (radius beta a, centre beta c, pulse length beta d) is evaluated from scratch and compared with eq. 10."""
    a, d = 0.01, 40e-6
    c0 = np.zeros(3) if field < 3 else np.array([0.013, -0.007, 0.004])
    e = np.eye(3)[field % 3]
    w = e if field < 3 else np.cross(e, c0)
    rng = np.random.default_rng(field)
    dirs = rng.normal(size=(6, 3))
    xs = c0 + dirs / np.linalg.norm(dirs, axis=1)[:, None] * a * rng.uniform(1.0, 8.0, (6, 1))
    ts = np.linspace(-1e-5, 400e-6, 301)
    small = lambda x, t: sphere_field(x, t, a, d, c0, w)                                     # noqa: E731
    w_big = e if field < 3 else np.cross(e, beta * c0)                                     # independent of w
    big = sphere_field(beta * xs, beta * ts, beta * a, beta * d, beta * c0, w_big)
    P = scaled_field(small, field, beta)(beta * xs, beta * ts)
    scale = np.abs(big).max()
    assert scale > 0
    assert np.abs(P - big).max() <= 1e-12 * scale
    assert np.abs(big / (beta if field < 3 else beta * beta)).max() == pytest.approx(np.abs(small(xs, ts)).max(),
                                                                                       rel=1e-12)
    # the same on samples
    X, Tt, Ps = scale_samples(field, beta, xs, ts, small(xs, ts))
    assert np.allclose(X, beta * xs) and np.allclose(Tt, beta * ts)
    assert np.abs(Ps - big).max() <= 1e-12 * scale


# ---- the scaling law on the FDTD PAN solver ------------------------------------------------------------------------
@pytest.mark.parametrize("beta", [2.0, 3.0])
def test_scaling_law_on_fdtd_solver(beta):
    """Eq. 10 on the discrete solver: the ellipsoid at scale 1 and beta, the grid spacing, time step, domain and
    receivers scaled by beta too (cells per semi-axis and Courant number unchanged). The staggered scheme is then
    the same discrete problem, so the identity holds to float32 round-off: measured max relative errors over the
    six fields 0 (beta = 2, a power of two: every product is exact) and 1.3e-7..3.3e-7 (beta = 3; 0.7 alike).
    37^3 cells with the PML, 4-8 cells per semi-axis (dx = 4 mm at scale 1), 120 steps per field; about 1 s for
    the six fields at both scales."""
    from impactsound.sources.pan.precompute import MeshInside, PulseDrive
    from impactsound.sources.pan.solve import PANGridPlan, solve_field
    from impactsound.wave.fdtd import COURANT_LIMIT, DEFAULT_NPML
    abc = np.array([0.03, 0.022, 0.015])
    dx, half, n_steps = 0.004, 0.042, 120
    dt = 0.99 * COURANT_LIMIT * dx / C
    h = 3 * dt
    dirs = np.array([[1, 0.3, 0.2], [-0.2, 1, 0.5], [0.3, -0.4, -1], [-1, -1, 1]], float)
    rec = dirs / np.linalg.norm(dirs, axis=1)[:, None] * 0.036
    n = int(math.ceil(2 * half / dx)) + 2 * DEFAULT_NPML

    def run(s, field):
        mesh = ellipsoid_mesh(s * abc, 3, R=np.eye(3), shift=np.zeros(3))
        plan = PANGridPlan(dx=s * dx, dt=s * dt, n_steps=n_steps, shape=(n, n, n), npml=DEFAULT_NPML,
                           half_width=s * half)
        return solve_field(field, MeshInside(mesh), plan, s * rec, PulseDrive(s * h, s * 2 * h), C, RHO)

    for field in range(6):
        p1, pb = run(1.0, field), run(beta, field)
        ref = pressure_scale(field, beta) * p1.astype(np.float64)
        err = np.abs(pb - ref).max() / np.abs(ref).max()
        assert np.abs(ref).max() > 0
        assert err < 1e-5, (field, err)


@pytest.mark.parametrize("field", [0, 4])
def test_scaling_law_fdtd_same_grid_converges(field):
    """Eq. 10 in the continuum, seen through the solver: the object at scale 1 and 2 on the same grid (so the large
    one has twice the cells per axis), P_2(2x, 2t) against 2^s p_1(x, t) at four receivers (radius 36 mm at scale
    1), pulse h = 6 dt(4 mm). The mismatch is the solver's discretization error (mostly the voxel staircase, first
    order): measured max relative errors over the series, field 0: 7.4e-2 (dx = 4 mm, 37^3 and 58^3 cells),
    3.9e-2 (2 mm), 2.1e-2 (1 mm, 100^3 and 184^3 cells, 12 s; not run here); field 4: 1.0e-1, 5.6e-2. About 1.5 s
    for the two levels run."""
    from impactsound.sources.pan.precompute import MeshInside, PulseDrive
    from impactsound.sources.pan.solve import PANGridPlan, solve_field
    from impactsound.wave.fdtd import COURANT_LIMIT, DEFAULT_NPML
    abc, half, dx0 = np.array([0.03, 0.022, 0.015]), 0.042, 0.004
    dt0 = 0.99 * COURANT_LIMIT * dx0 / C
    h, dur = 6 * dt0, 150 * dt0
    dirs = np.array([[1, 0.3, 0.2], [-0.2, 1, 0.5], [0.3, -0.4, -1], [-1, -1, 1]], float)
    rec = dirs / np.linalg.norm(dirs, axis=1)[:, None] * 0.036

    def run(s, dx):
        mesh = ellipsoid_mesh(s * abc, 5, R=np.eye(3), shift=np.zeros(3))
        dt = 0.99 * COURANT_LIMIT * dx / C
        n = int(math.ceil(2 * s * half / dx)) + 2 * DEFAULT_NPML
        plan = PANGridPlan(dx=dx, dt=dt, n_steps=int(round(s * dur / dt)), shape=(n, n, n), npml=DEFAULT_NPML,
                           half_width=s * half)
        return solve_field(field, MeshInside(mesh), plan, s * rec, PulseDrive(s * h, s * 2 * h), C, RHO)

    errs = []
    for dx in (dx0, dx0 / 2):
        p1, P2 = run(1.0, dx), run(2.0, dx)
        ref = pressure_scale(field, 2.0) * p1.astype(np.float64)
        m = min(P2.shape[1] // 2, p1.shape[1])
        # sample k of p1 is at (k + 1) dt; 2 (k + 1) dt is sample 2k + 1 of P2
        errs.append(np.abs(P2[:, 1::2][:, :m] - ref[:, :m]).max() / np.abs(ref).max())
    assert errs[0] < 0.12 and errs[1] < 0.07
    assert errs[0] / errs[1] > 1.6                    # first order in dx
