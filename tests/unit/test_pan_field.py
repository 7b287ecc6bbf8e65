"""PAN field representation and least-squares fit (pan.md "PAN field representation", paper eqs. 20-25),
checked with fields of the exact form (recovered to round-off) and with the exact rigid-sphere radiation
(granular.md sec. 2) evaluated outside the fit shells."""
import functools

import numpy as np
import pytest

from impactsound.errors import AssetError
from impactsound.sources.pan.field import (PANField, angle_weights, direction_angles, direction_vectors,
                                           fit_operator, fit_pan_field, sample_points, shell_radii)
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
    interp = sum(w[..., c] * f[it[..., c // 2], ip[..., c % 2]] for c in range(4))
    assert np.allclose(interp, f[:, :, None], atol=1e-12)
    # bilinear weights reproduce a function linear in (theta, phi) inside a cell
    th_x, ph_x = 0.5 * (th[1] + th[2]) + 0.1, 0.5 * (ph[9] + 2 * np.pi) - 0.05            # cell wraps in phi
    x = np.array([np.sin(th_x) * np.cos(ph_x), np.sin(th_x) * np.sin(ph_x), np.cos(th_x)])
    R, it, ip, w = angle_weights(x, 5, 10)
    phis = np.array([ph[ip[0]], ph[ip[1]] + 2 * np.pi * (ip[1] == 0)])
    f = [th[it[i // 2]] + 3 * phis[i % 2] for i in range(4)]
    assert np.dot(w, f) == pytest.approx(th_x + 3 * ph_x)


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
