"""The GPU FDTD step (wave/fdtd_cuda.py) against the CPU kernel (wave/fdtd.py) on the same grid and steps: a point
source and receivers through the CPML, and a moving rigid body (face velocities, the air-cell corrections, the
solid layer, wall faces between air cells), in float64 (to round-off) and float32 (to float32 round-off of the largest |p|).

The comparisons run where a CUDA GPU works and, everywhere else, under Numba's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1 in a child pytest: the switch must precede Numba's import), which runs the very same
kernels on the CPU."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from impactsound.errors import SolverError
from impactsound.wave import fdtd_cuda
from impactsound.wave.fdtd import FDTDSolver, centred_grid
from impactsound.wave.voxel import BodyBoundary, voxelize


def _need_gpu():
    why = fdtd_cuda.fdtd_gpu_problem()
    if why is not None:
        pytest.skip(f"no CUDA GPU path here: {why} (the simulator test covers the kernels)")


def _pair(dtype, steps, body):
    """Receivers (and final p) of the same run on both backends: a small grid (8^3 cells, 2 CPML cells a side: the
    simulator runs a Python thread per cell)."""
    g = centred_grid(0.02, 0.01, npml=2)
    out = []
    for backend in ("numba", "cuda"):
        s = FDTDSolver(g, dtype=dtype, backend=backend, threads=1)
        rec_pts = np.array([[0.012, 0.004, -0.008], [-0.013, 0.0, 0.011], [0.0, 0.018, 0.0]])
        kw = {}
        if body:
            b = voxelize(g, lambda x: np.linalg.norm(x, axis=1) < 0.009)     # the 8 central cells
            # and three wall faces (a thin wall between air cells, one per axis), moving too
            walls = np.array([[0, 3, 3, 3, 0], [1, 6, 3, 4, 0], [2, 3, 6, 5, 0]])
            b = BodyBoundary(solid=b.solid, faces=np.concatenate([b.faces, walls]),
                             centres=np.concatenate([b.centres, np.zeros((3, 3))]))
            s.set_body(b)
            pattern = np.where(s.body.faces[:, 0] == 2, 1.0, 0.0) * np.sign(s.body.faces[:, 4])   # heaving along z
            pattern[-3:] = [0.7, -0.4, 0.9]
            kw = dict(body_pattern=pattern, body_scale=np.sin(np.arange(steps) * 0.4) * 1e-3)
        s.set_receivers(rec_pts)
        rates = (np.sin(np.arange(steps) * 0.35) * 1e-7)[:, None]
        r = s.run(steps, source_cells=np.array([[2, 3, 4]]), source_rates=rates, **kw)
        out.append((r, s.p.copy(), s.v[2].copy()))
    return out


@pytest.mark.parametrize("body,dtype,tol", [(True, np.float32, 1e-5), pytest.param(
    False, np.float64, 1e-12, marks=pytest.mark.slow)], ids=["body-source-f32", "source-f64"])
def test_gpu_steps_match_the_cpu_kernel(body, dtype, tol):
    # float32 with a moving body and a point source exercises every kernel; float64 (slow suite) the other dtype
    _need_gpu()
    (r0, p0, v0), (r1, p1, v1) = _pair(dtype, 10, body)
    peak = np.abs(r0).max()
    assert peak > 0
    assert np.abs(r1 - r0).max() <= tol * peak
    assert np.abs(p1 - p0).max() <= tol * np.abs(p0).max()
    assert np.abs(v1 - v0).max() <= tol * np.abs(v0).max()


def test_kernels_under_cuda_simulator():
    """The comparisons above, run by a child pytest under Numba's CUDA simulator."""
    if fdtd_cuda.simulated():
        pytest.skip("already under the simulator")
    import importlib.util
    if importlib.util.find_spec("numba.cuda") is None:
        pytest.skip("this Numba has no CUDA target (numba-cuda not installed): no simulator to run the kernels on")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", __file__,
                        "-k", "match_the_cpu and f32"], capture_output=True, text=True, env=env, timeout=900)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    last = r.stdout.strip().splitlines()[-1]
    assert "skipped" not in last and "1 passed" in last, tail


def test_backend_choice_is_checked(monkeypatch):
    g = centred_grid(0.02, 0.01, npml=3)
    with pytest.raises(SolverError, match="backend 'opencl' is unknown"):
        FDTDSolver(g, backend="opencl")
    monkeypatch.setattr(fdtd_cuda, "simulated", lambda: False)
    monkeypatch.setattr(fdtd_cuda, "_PROBE", ["Numba has no CUDA target here"])
    with pytest.raises(SolverError, match="no usable CUDA GPU here .*backend 'numba'"):
        FDTDSolver(g, backend="cuda")
    assert FDTDSolver(g, backend="auto").backend == "numba"        # auto falls back to the CPU, silently
    monkeypatch.setenv("IMPACTSOUND_FDTD_BACKEND", "auto")
    assert FDTDSolver(g).backend == "numba"
