"""FDTD wave solver against the analytic point-monopole field and its own PML (specs/pan.md sec. 5)."""
import numpy as np
import pytest

from impactsound.errors import SolverError
from impactsound.wave.fdtd import COURANT_LIMIT, FDTDSolver, Grid, centred_grid

C, RHO = 343.2, 1.2041


def _run_monopole(grid, recv_offsets_cells, n_travel_cells, dtype=np.float64, dx=1e-3):
    s = FDTDSolver(grid, C, RHO, dtype=dtype)
    sg = 6 * dx / C              # Gaussian width: the spectrum is 40 dB down where a wavelength is ~12 cells
    t0 = 6 * sg
    Q0 = 1e-6                    # m^3/s
    src = np.array([grid.shape[0] // 2 + 1] * 3)
    xs = grid.origin + (src - 0.5) * dx
    recv = xs + np.asarray(recv_offsets_cells, float) * dx
    s.set_receivers(recv)
    nsteps = int((t0 + 4 * sg + n_travel_cells * dx / C) / s.dt)
    out = np.zeros((nsteps, len(recv)))
    for n in range(nsteps):
        tq = (n + 0.5) * s.dt
        s.step(source=(src, Q0 * np.exp(-(tq - t0) ** 2 / (2 * sg**2))))
        out[n] = s.receive()
    t = (np.arange(nsteps) + 1) * s.dt
    r = np.linalg.norm(recv - xs, axis=1)
    tr = t[:, None] - r / C
    dQ = Q0 * np.exp(-(tr - t0) ** 2 / (2 * sg**2)) * (-(tr - t0) / sg**2)
    exact = RHO * dQ / (4 * np.pi * r)   # p = rho Q'(t - r/c) / (4 pi r)
    return out, exact


def test_point_monopole_matches_analytic_field_on_axis_and_diagonal():
    g = centred_grid(0.045, 1e-3, npml=12)
    offs = [[20, 0, 0], [40, 0, 0], np.array([1, 1, 1]) / np.sqrt(3) * 30, [0, 0, -30]]
    out, exact = _run_monopole(g, offs, 60)
    for m in range(len(offs)):
        peak = np.abs(exact[:, m]).max()
        assert np.abs(out[:, m]).max() == pytest.approx(peak, rel=0.02)
        assert np.abs(out[:, m] - exact[:, m]).max() < 0.03 * peak


def test_fp32_matches_fp64():
    g = centred_grid(0.02, 1e-3, npml=8)
    o64, _ = _run_monopole(g, [[12, 0, 0]], 20, np.float64)
    o32, _ = _run_monopole(g, [[12, 0, 0]], 20, np.float32)
    assert np.abs(o32 - o64).max() < 1e-4 * np.abs(o64).max()


def test_pml_reflection_below_minus_40_db():
    """Same source and receiver in a small domain (PML 3 cells behind the receiver) and in a domain large enough
    that nothing comes back within the window: the difference is what the PML reflects."""
    offs = [[12, 0, 0], np.array([1, 1, 0]) / np.sqrt(2) * 12]
    small, exact = _run_monopole(centred_grid(0.016, 1e-3, npml=12), offs, 45)
    big, _ = _run_monopole(centred_grid(0.062, 1e-3, npml=12), offs, 45)
    direct = np.abs(big).max(axis=0)
    refl = np.abs(small - big).max(axis=0)
    assert np.all(20 * np.log10(refl / direct) < -40), 20 * np.log10(refl / direct)


def test_unstable_time_step_rejected_with_largest_stable_dt():
    g = Grid((10, 10, 10), 1e-3)
    dt_max = COURANT_LIMIT * 1e-3 / C
    FDTDSolver(g, C, RHO, dt=dt_max)
    with pytest.raises(SolverError, match=f"{dt_max:.6g}"):
        FDTDSolver(g, C, RHO, dt=1.01 * dt_max)


def test_result_independent_of_thread_count():
    g = centred_grid(0.012, 1e-3, npml=6)
    outs = []
    for th in (1, 2, 3):
        s = FDTDSolver(g, C, RHO, dtype=np.float32, threads=th)
        s.p[g.shape[0] // 2, 10, 12] = 1.0
        for _ in range(30):
            s.step()
        outs.append(s.p.copy())
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_run_records_in_both_layouts_the_same_numbers():
    """run()'s record as (receivers, steps) and, with time_major, (steps, receivers): the same numbers, both
    C-ordered (that run() is the stepping scheme: tests/unit/test_fdtd_kernels.py::test_step_and_run_agree)."""
    g = centred_grid(0.012, 1e-3, npml=6)
    src = np.array([g.shape[0] // 2 + 1] * 3)
    xs = g.origin + (src - 0.5) * g.dx
    recv = xs + np.array([[3.0, 0, 0], [0, -4.0, 1.0], [2.0, 2.0, 2.0]]) * g.dx
    rates = np.sin(np.arange(23) * 0.4)[:, None] * 1e-6
    recs = []
    for tm in (False, True):
        s = FDTDSolver(g, C, RHO)
        s.set_receivers(recv)
        recs.append(s.run(23, source_cells=src[None], source_rates=rates, time_major=tm))
    assert recs[0].shape == (3, 23) and recs[1].shape == (23, 3) and np.abs(recs[0]).max() > 0
    assert recs[0].flags.c_contiguous and recs[1].flags.c_contiguous
    assert np.array_equal(recs[0], recs[1].T)


# ---- rigid bodies (PAN fields) ---------------------------------------------------------------------------------
from impactsound.transfer.rigid_sphere import sphere_pressure_half_sine  # noqa: E402
from impactsound.sources.pan.solve import PANGridPlan, solve_field  # noqa: E402


def _sphere_run(a, cells_per_radius, R, d, field=2, recv_dirs=((0, 0, 1),), scale=1.0, drive=None,
                dtype=np.float64, axes=(1.0, 1.0, 1.0)):
    dx = scale * a / cells_per_radius
    dt = 0.99 * COURANT_LIMIT * dx / C
    half = scale * R + 3 * dx
    n = int(np.ceil(2 * half / dx)) + 24
    T = scale * (d + (R - a) / C + 6 * a / C)
    plan = PANGridPlan(dx, dt, int(round(T / dt)), (n, n, n), 12, half)
    dirs = np.asarray(recv_dirs, float)
    recv = scale * R * dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    drive = drive or (lambda t: np.where((t >= 0) & (t <= scale * d), np.sin(np.pi * t / (scale * d)), 0.0))
    ax = np.asarray(axes) * scale * a
    p = solve_field(field, lambda P: np.linalg.norm(P / ax, axis=1) < 1.0, plan, recv, drive, C, RHO,
                    dtype=dtype)
    return p, (np.arange(plan.n_steps) + 1) * dt, recv


def test_rigid_sphere_half_sine_converges_to_exact_radiation():
    """A rigid sphere (a = 1 cm) accelerated along z with a 100 us half-sine, heard at 3a on the axis and at 45
    degrees, against the exact rigid-sphere solution (granular.md sec. 2). The voxelized (staircase) sphere is a
    first-order boundary: the error halves when the cells per radius double, and the Richardson extrapolation of
    the two runs matches the exact peak."""
    a, R, d = 0.01, 0.03, 100e-6
    dirs = ((0, 0, 1), (1, 0, 1))
    peaks, errs = [], []
    for n in (6, 12):
        p, t, recv = _sphere_run(a, n, R, d, recv_dirs=dirs)
        pk, er = [], []
        for m in range(len(dirs)):
            ex = sphere_pressure_half_sine(t - (R - a) / C, a, 1.0, d, R, recv[m, 2] / R, RHO, C)
            pk.append(np.abs(p[m]).max() / np.abs(ex).max())
            er.append(np.abs(p[m] - ex).max() / np.abs(ex).max())
        peaks.append(np.array(pk))
        errs.append(np.array(er))
    assert np.all(errs[1] < 0.06) and np.all(errs[1] < 0.6 * errs[0])
    assert np.all(np.abs(2 * peaks[1] - peaks[0] - 1) < 0.02)


@pytest.mark.parametrize("field, power", [(2, 1), (3, 2)])
def test_scaling_law_translation_and_rotation(field, power):
    """proxy-soundbank.md sec. 3.1: scaling the object by beta (and h by beta) gives
    P(x, t) = beta^k p(x / beta, t / beta), k = 1 for translation and 2 for rotation fields."""
    a, R, d, beta = 0.004, 0.012, 40e-6, 2.0
    dirs = ((0.3, 0.5, 1.0), (1.0, -0.2, 0.1))
    ell = (1.0, 0.6, 0.4)          # an ellipsoid, so that rotation radiates
    p1, t1, _ = _sphere_run(a, 5, R, d, field=field, recv_dirs=dirs, axes=ell)
    p2, t2, _ = _sphere_run(a, 5, R, d, field=field, recv_dirs=dirs, scale=beta, axes=ell)
    assert np.allclose(t2, beta * t1)
    assert np.abs(p2 - beta**power * p1).max() < 1e-9 * np.abs(p2).max()
