"""PAN field representation and least-squares fit (pan.md "PAN field representation", paper eqs. 20-25),
checked with fields of the exact form (recovered to round-off) and with the exact rigid-sphere radiation
(granular.md sec. 2) evaluated outside the fit shells."""
import functools

import numpy as np
import pytest

from impactsound.errors import AssetError
from impactsound.sources.pan.field import (PANField, angle_weights, direction_angles, direction_vectors,
                                           fit_operator, fit_pan_field, sample_points, shell_radii, with_poles)
from impactsound.sources.pan.pulse import psi
from impactsound.transfer.rigid_sphere import sphere_pressure

A_SPHERE = 7.5e-3
C, RHO = 343.2, 1.2041
H = 7.3264e-6                         # Table 1 ball bearing
DT = H / 8
T_START = -2 * H
N_T = 420


def sphere_response(R, t, h=H, a=A_SPHERE, fine=16):
    """Exact pressure [Pa per m/s^2] at distance R on the axis (cos = 1) of a rigid sphere whose acceleration is
    psi(t; h) (pulse centred at t = 0), at times t: sphere_pressure on a fine grid, linearly interpolated."""
    dtf = h / (8 * fine)
    s = np.arange(-2 * h, np.max(t) + h, dtf)
    pf = sphere_pressure(psi(s, h), dtf, a, R, 1.0, RHO, C)
    return np.interp(np.asarray(t) - (R - a) / C, s, pf, left=0.0)


@functools.lru_cache(maxsize=2)
def sphere_field(n_theta=20, n_phi=40):
    """PANField of a rigid sphere of radius A_SPHERE (translation fields = cos x radial response, rotation 0)."""
    radii = shell_radii(A_SPHERE)
    t = T_START + DT * np.arange(N_T)
    Pr = np.stack([sphere_response(R, t) for R in radii])                       # (M, T)
    d = direction_vectors(n_theta, n_phi)
    p = np.zeros((6, n_theta, n_phi, len(radii), N_T))
    for i in range(3):
        p[i] = d[..., i][..., None, None] * Pr
    return fit_pan_field(p, radii=radii, c=C, rho=RHO, dt=DT, t_start=T_START, h=H, R_b=A_SPHERE,
                         mass=8940 * 4 / 3 * np.pi * A_SPHERE**3, inertia=np.eye(3) * 1e-6, inputs_hash="sphere")


def test_grid_convention():
    th, ph = direction_angles(5, 10)
    assert np.allclose(th, (np.arange(5) + 0.5) * np.pi / 5) and np.allclose(ph, np.arange(10) * np.pi / 5)
    d = direction_vectors(5, 10)
    assert np.allclose(np.linalg.norm(d, axis=-1), 1)
    assert np.allclose(d[1, 3], [np.sin(th[1]) * np.cos(ph[3]), np.sin(th[1]) * np.sin(ph[3]), np.cos(th[1])])
    assert np.allclose(shell_radii(0.1), 0.2 * 2 ** (np.arange(5) / 4)) and shell_radii(0.1)[-1] == pytest.approx(0.4)
    pts = sample_points(0.1, 5, 10)
    R, it, ip, w = angle_weights(pts, 5, 10)                                    # grid points: one corner, w = 1
    assert np.allclose(R, shell_radii(0.1)[None, None, :])
    f = np.random.default_rng(0).normal(size=(5, 10))                        # at grid points: the grid value
    F = with_poles(f)                                                         # rows: pole, grid rows, pole
    interp = sum(w[..., c] * F[it[..., c], ip[..., c]] for c in range(4))
    assert np.allclose(interp, f[:, :, None], atol=1e-12)
    # bilinear weights reproduce a function linear in (theta, phi) inside a cell
    th_x, ph_x = 0.5 * (th[1] + th[2]) + 0.1, 0.5 * (ph[9] + 2 * np.pi) - 0.05            # cell wraps in phi
    x = np.array([np.sin(th_x) * np.cos(ph_x), np.sin(th_x) * np.sin(ph_x), np.cos(th_x)])
    R, it, ip, w = angle_weights(x, 5, 10)
    phis = ph[ip] + 2 * np.pi * (ip == 0)
    f = th[it - 1] + 3 * phis                                                 # padded row a + 1 is grid row a
    assert np.dot(w, f) == pytest.approx(th_x + 3 * ph_x)


def _unit(th, ph):
    th, ph = np.broadcast_arrays(np.asarray(th, float), np.asarray(ph, float))
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=-1)


def _interp(f, pts):
    R, it, ip, w = angle_weights(pts, *f.shape)
    F = with_poles(f)
    return sum(w[..., c] * F[it[..., c], ip[..., c]] for c in range(4))


@pytest.mark.parametrize("n_theta,n_phi", [(5, 10), (40, 80), (5, 9), (6, 7)])
def test_interpolation_across_the_poles(n_theta, n_phi):
    """In the polar caps the value runs linearly from the pole value (the first two rows' phi-means extrapolated
    quadratically, with_poles) to the first row. The three translation patterns (cos theta; sin theta cos phi;
    sin theta sin phi: the rigid sphere's dipole fields) are then within the bilinear bound (dtheta^2 +
    dphi^2)/8 everywhere, caps included; on the axis the z-dipole reads 1 - O(theta_0^4) (the quadratic
    extrapolation of cos: 0.36 % low on 5 x 10, where the first row alone read cos(theta_0), 4.9 % low) and the
    x/y dipoles read 0 exactly (their phi-mean)."""
    th, ph = direction_angles(n_theta, n_phi)
    T, P = np.meshgrid(th, ph, indexing="ij")
    dth, dph = np.pi / n_theta, 2 * np.pi / n_phi
    bound = (dth**2 + dph**2) / 8
    tt, pp = np.meshgrid(np.r_[np.linspace(0, np.pi, 181), np.linspace(0, dth, 41), np.pi - np.linspace(0, dth, 41)],
                         np.linspace(0, 2 * np.pi, 97), indexing="ij")
    pts = _unit(tt, pp)
    for g, exact in ((np.cos(T), np.cos(tt)), (np.sin(T) * np.cos(P), np.sin(tt) * np.cos(pp)),
                     (np.sin(T) * np.sin(P), np.sin(tt) * np.sin(pp))):
        assert np.max(np.abs(_interp(g, pts) - exact)) <= bound
    t0 = dth / 2
    pole = np.cos(t0) - (np.cos(3 * t0) - np.cos(t0)) * t0**2 / (8 * t0**2)      # quadratic in theta through rows
    for z in (1.0, -1.0):                                                       # on the axis, both poles
        axis = np.array([0.0, 0.0, z])
        assert _interp(np.cos(T), axis) == pytest.approx(z * pole, rel=1e-12)
        assert 1 - pole <= t0**4 / 2                                           # fourth order in theta_0
        for g in (np.sin(T) * np.cos(P), np.sin(T) * np.sin(P)):
            assert abs(_interp(g, axis)) <= 1e-12
    if (n_theta, n_phi) == (5, 10):
        assert 0.0035 < 1 - _interp(np.cos(T), np.array([0.0, 0.0, 2.0])) < 0.0037              # 0.36 %
    # near the axis: the x dipole, linear in theta from 0 at the pole
    eps = np.linspace(0, dth / 2, 11)[1:]
    for phi0 in (0.3, 2.0):
        e = np.abs(_interp(np.sin(T) * np.cos(P), _unit(eps, phi0)) - np.sin(eps) * np.cos(phi0))
        assert np.all(e <= bound * np.sin(dth / 2) + 1e-15 + dph**2 / 8)


@pytest.mark.parametrize("n_theta,n_phi", [(5, 10), (5, 9), (1, 4)])
def test_interpolation_is_continuous_across_pole_and_seam(n_theta, n_phi):
    """A random grid function interpolated along a great circle through each pole (phi and phi + pi sides) and
    across the phi seam (phi = 2 pi - e and + e) has no jumps: neighbouring points differ by at most the
    function's range times the step over the cell size; the weights are a non-negative partition of unity.
    (At the pole point itself the value still depends on the great circle, i.e. on the azimuth of approach,
    through the first row's phi harmonics m >= 2: O(theta_0^2) for a smooth field, within the bilinear error.)"""
    f = np.random.default_rng(4).normal(size=(n_theta, n_phi))
    span = f.max() - f.min()
    dth, dph = np.pi / n_theta, 2 * np.pi / n_phi
    s = np.linspace(-dth, dth, 4000)[1:-1]             # signed meridian coordinate (the pole point, whose phi is
                                                       # undefined, left out)
    for phi0 in (0.0, 0.41, 1.3, np.pi / 2, 2 * np.pi - 0.2):
        for pole in (0.0, np.pi):
            th = np.abs(s) if pole == 0.0 else np.pi - np.abs(s)
            pts = _unit(th, np.where(s >= 0, phi0, phi0 + np.pi))
            v = _interp(f, pts)
            assert np.max(np.abs(np.diff(v))) <= 2 * span * (s[1] - s[0]) / dth + 1e-12
    for th0 in (1e-3, 0.2, 1.0, 2.9, np.pi - 1e-3):
        e = np.linspace(-dph, dph, 4001)
        v = _interp(f, _unit(th0, np.mod(e, 2 * np.pi)))
        assert np.max(np.abs(np.diff(v))) <= 2 * span * (e[1] - e[0]) / dph + 1e-12
    pts = _unit(*np.meshgrid(np.linspace(0, np.pi, 50), np.linspace(0, 2 * np.pi, 50)))
    R, it, ip, w = angle_weights(pts, n_theta, n_phi)
    assert np.allclose(w.sum(-1), 1, atol=1e-14) and np.all(w >= -1e-15)
    assert it.min() >= 0 and it.max() < n_theta + 2 and ip.min() >= 0 and ip.max() < n_phi
    R, it, ip, w = angle_weights(np.array([[np.nan, 0.0, 1.0], [np.inf, 0.0, 0.0]]), n_theta, n_phi)
    assert np.all(it == 0) and np.all(ip == 0) and np.all(np.isnan(w))     # never an index off the grid


def test_dipole_field_on_and_near_the_axis():
    """A z-translation PAN field of the sphere's form (cos theta times one radial response) evaluated on and near
    the axis, through PANField.evaluate and the synthesis kernel (per-corner weights): the analytic cos theta
    times the radial response, within 1 - cos(theta_0) near the axis and theta_0^4 / 2 on it (0.36 % on 5 x 10,
    where holding the first row read 4.9 % low)."""
    from impactsound.sources.pan.synth import PANTable, synthesize_pan
    rng = np.random.default_rng(8)
    Q = np.zeros((2, 48))
    Q[:, 8:40] = rng.normal(size=(2, 32)) * np.array([[1e-3], [1e-5]])
    for n_theta, n_phi in ((40, 80), (5, 10)):
        th, ph = direction_angles(n_theta, n_phi)
        q = np.zeros((6, n_theta, n_phi, 2, 48))
        q[2] = np.cos(th)[:, None, None, None] * Q
        q_ref = np.zeros_like(q)
        q_ref[2] = Q                                                           # the radial response alone
        kw = dict(dt_q=H / 8, tau0=-2 * H, h=H, c=C, rho=RHO, R_b=A_SPHERE, radii=shell_radii(A_SPHERE), mass=1e-3,
                  inertia=np.eye(3) * 1e-8)
        fld, ref = PANField(q=q, **kw), PANField(q=q_ref, **kw)
        tol = 1 - np.cos(np.pi / (2 * n_theta))
        for thx, phx in ((0.0, 0.0), (np.pi, 0.0), (0.3 * np.pi / n_theta, 1.1), (np.pi - 0.2 * np.pi / n_theta, 4.0)):
            x = 0.2 * _unit(thx, phx)
            e = fld.evaluate(2, x[None])[0]
            r = ref.evaluate(2, x[None])[0] * np.cos(thx)
            assert np.max(np.abs(e - r)) <= (tol + 1e-6) * np.max(np.abs(r))
            if thx in (0.0, np.pi):                          # on the axis: the pole row, fourth order
                t0 = np.pi / (2 * n_theta)
                assert np.max(np.abs(e - r)) <= t0**4 / 2 * np.max(np.abs(r))
        tab, tab_ref = PANTable.from_field(fld, 48000), PANTable.from_field(ref, 48000)
        x = 0.2 * _unit(0.0, 0.0)[None, None]
        amp = np.array([[0.0, 0.0, 100.0, 0.0, 0.0, 0.0]])
        y = synthesize_pan(tab, [1e-3], [4 * H], amp, x, 240)[0]
        y_ref = synthesize_pan(tab_ref, [1e-3], [4 * H], amp, x, 240)[0]
        t0 = np.pi / (2 * n_theta)
        pole = np.cos(t0) - (np.cos(3 * t0) - np.cos(t0)) / 8                  # with_poles' value for cos theta
        assert np.max(np.abs(y - pole * y_ref)) < 1e-6 * np.max(np.abs(y_ref))


def test_exact_form_recovered_to_roundoff():
    radii = shell_radii(0.02)
    c, dt, T = 343.0, 1e-6, 300
    op = fit_operator(radii, c, dt, -5e-6, T)
    rng = np.random.default_rng(3)
    q = np.zeros((4, 2, op.n_coef))
    q[:, :, 4:-4] = rng.normal(size=(4, 2, op.n_coef - 8)) * np.array([1.0, 0.01])[None, :, None]
    t = -5e-6 + dt * np.arange(T)
    p = np.zeros((4, len(radii), T))
    for i, R in enumerate(radii):                                               # p = sum_k R^-k q_k(t - R/c)
        x = (t - R / c - op.tau0) / op.dt_q
        W = psi(x[:, None] - np.arange(op.n_coef)[None, :], 1.0)                # (T, n_coef)
        for k in range(2):
            p[:, i] += R ** -(k + 1.0) * q[:, k] @ W.T
    qf = op.solve(p)
    assert np.max(np.abs(qf - q)[:, 0]) < 1e-10 * np.abs(q[:, 0]).max()
    assert np.max(np.abs(qf - q)[:, 1]) < 1e-10 * np.abs(q[:, 1]).max()
    # through the full fit + evaluate path (float32 storage): the evaluated field reproduces the samples
    fld = fit_pan_field(np.broadcast_to(p[:1, None, None], (6, 1, 2) + p.shape[1:]), radii=radii, c=c, rho=1.2,
                        taper_end=False, dt=dt, t_start=-5e-6, h=4e-6, R_b=0.01, mass=1.0, inertia=np.eye(3))
    pts = radii[:, None] * np.array([[0.0, 0.0, 1.0]])
    ev = fld.evaluate(2, pts, t)
    sel = (t - radii[:, None] / c >= op.tau0 + 2 * dt) & (t - radii[:, None] / c <= op.tau0 + (op.n_coef - 3) * dt)
    assert np.max(np.abs(ev - p[0])[sel]) < 1e-6 * np.abs(p[0]).max()
    assert fld.meta["fit_relative_residual"] < 1e-10


def test_sphere_field_off_grid_at_8_radii():
    fld = sphere_field()
    assert fld.meta["fit_relative_residual"] < 1e-3
    for th, ph in ((1.0, 0.7), (2.3, 4.0)):                                    # not grid directions
        u = np.array([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)])
        R = 8 * A_SPHERE
        t = np.arange(-2 * H, 400e-6, DT / 3)
        base = sphere_response(R, t)
        for i in range(3):                                                      # translation x, y, z: cos = u_i
            ev = fld.evaluate(i, (R * u)[None], t)[0]
            ref = u[i] * base
            assert np.max(np.abs(ev - ref)) < 0.02 * np.max(np.abs(base))
        assert np.max(np.abs(fld.evaluate(4, (R * u)[None], t))) < 1e-6 * np.max(np.abs(base))   # rotation: none


def test_asset_roundtrip(tmp_path):
    fld = sphere_field()
    path = fld.save(tmp_path / "sphere.pan.h5")
    back = PANField.load(path, inputs_hash="sphere")
    assert np.array_equal(back.q, fld.q) and back.q.dtype == np.float32
    for name in ("dt_q", "tau0", "h", "c", "rho", "R_b", "mass"):
        assert getattr(back, name) == getattr(fld, name)
    assert np.array_equal(back.radii, fld.radii) and np.array_equal(back.inertia, fld.inertia)
    assert back.meta["fit_rank"] == fld.meta["fit_rank"]
    with pytest.raises(AssetError):
        PANField.load(path, inputs_hash="other")


@pytest.mark.parametrize("T,dtq_factor", [(400, 1.0), (500, 2.0)])
def test_banded_fit_is_the_minimum_norm_least_squares_solution(T, dtq_factor):
    """The banded normal-equation solve (and its zeroed unobserved columns) against LAPACK's minimum-norm
    least-squares solution of the same dense system, on noisy data the model cannot fit exactly."""
    radii = shell_radii(0.0075)
    c, dt = 343.2, 8.4e-7
    op = fit_operator(radii, c, dt, -1.4e-5, T, dt_q=dtq_factor * dt)
    assert op.chol is not None                                        # well-determined: the banded path
    p = np.random.default_rng(5).normal(size=(3, len(radii), T))
    B = p[:, op.rows[:, 0], op.rows[:, 1]]
    ref = np.linalg.lstsq(op.matrix.toarray(), B.T, rcond=1e-10)[0].T
    ref = ref.reshape(3, op.n_terms, op.n_coef) * op.scale[None, :, None]
    got = op.solve(p)
    assert np.max(np.abs(got - ref)) < 1e-9 * np.max(np.abs(ref))
