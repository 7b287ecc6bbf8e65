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
