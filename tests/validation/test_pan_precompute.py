"""PAN precompute end to end (FDTD -> fit), checked like the paper (specs/pan.md sec. 7): the fitted field at
8 R in directions that are not grid directions against a direct FDTD run with the same voxelized body and drive,
and the rigid-sphere far field against the exact solution (transfer/rigid_sphere.py)."""
import numpy as np
import pytest
import trimesh

from impactsound.materials import get_material
from impactsound.sources.pan.precompute import MeshInside, plan_pan, run_pan
from impactsound.sources.pan.pulse import psi
from impactsound.transfer.rigid_sphere import sphere_pressure
from impactsound.wave.pan_solve import plan_grid, solve_field

A = 0.01          # sphere radius [m]
C, RHO = 343.2, 1.2041


def _job(h, cpw=10.0):
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=A)
    return plan_pan(sphere, get_material("steel"), h=h, c=C, rho=RHO, cells_per_wavelength=cpw)


def _dirs():
    out = []
    for th, ph in ((1.0, 0.7), (2.3, 4.0), (0.4, 2.2)):
        out.append([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)])
    return np.array(out)


def test_pan_at_8_radii_matches_direct_solver(tmp_path):
    h = 36e-6                                   # dx = A/4: a coarse body, but the same body in both runs
    job = _job(h)
    fld = run_pan(job, checkpoint_dir=tmp_path)
    R = 8 * job.R_b
    dur = 4 * h + R / C + 5 * job.R_b / C
    # direct run: same dx, dt and cell alignment (grid size of the same parity), receivers at 8 R
    big = plan_grid(h, job.R_b, R, dur, C, 10.0)
    assert big.dx == job.plan.dx and big.dt == job.plan.dt and (big.shape[0] - job.plan.shape[0]) % 2 == 0
    pts = R * _dirs()
    p = solve_field(2, MeshInside(job.mesh), big, pts, lambda t: psi(t - 2 * h, h), C, RHO)
    t = (np.arange(big.n_steps) + 1) * big.dt - 2 * h        # field time (0 at the pulse centre)
    ev = fld.evaluate(2, pts, t)
    peak = np.abs(p).max()
    err = np.abs(ev - p).max(axis=1) / peak
    print("PAN vs direct FDTD at 8 R, max error / peak:", err)
    assert np.all(err < 0.05), err
    # rerun: every field comes from its checkpoint, same asset
    fld2 = run_pan(job, checkpoint_dir=tmp_path)
    assert np.array_equal(fld2.q, fld.q)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_fitted_sphere_field_matches_exact_radiation():
    # dx = A/16. Measured errors (max |PAN - exact| / peak): 2.8 % at 2 R, 5.0 % at 4 R, 6.3 % at 8 R; at 14
    # cells per wavelength (dx = A/23) 3.5 / 4.5 / 5.1 %: the voxel staircase overestimates the sphere's
    # radiation at first order, ~0.7/(cells per radius) (tests/validation/test_fdtd.py), which dominates.
    h = 9e-6
    job = _job(h)
    fld = run_pan(job)
    t = np.arange(-2 * h, 2 * h + 8 * A / C + 10 * A / C, job.plan.dt / 4)
    dt = t[1] - t[0]
    acc = psi(t, h)                             # unit acceleration pulse along z
    for R, tol in ((2 * A, 0.04), (4 * A, 0.06), (8 * A, 0.07)):
        for u in _dirs():
            exact = sphere_pressure(acc, dt, A, R, u[2], RHO, C)
            ev = fld.evaluate(2, (R * u)[None], t + (R - A) / C)[0]
            assert np.max(np.abs(ev - exact)) < tol * np.abs(exact).max(), (R, u)
