"""The FDTD step on a CUDA GPU (Numba's CUDA target): the same update as wave/fdtd.py's CPU kernel, one GPU thread
per cell (or per body face, source, receiver).

The CPU kernel advances plane by plane in a wavefront (temporal blocking for a machine bound by memory traffic);
a GPU has the bandwidth to take the textbook order instead, which is the same leapfrog (Chadwick, Zheng & James
2012, sec. 5; Yee staggering, CPML of Roden & Gedney 2000):

1. every face velocity from p^n (``_velocity``: interior update, then the CPML memory terms of its layers), then
   wall faces (a thin wall between two air cells) set to the wall's velocity (``_walls``) before any cell reads them;
2. every cell pressure from v^{n+1/2} (``_pressure``: interior, then the x, y and z layer terms);
3. body faces reset to the body's velocity, their air cell corrected by the difference (``_body``; exact, p is
   linear in each face velocity; atomic adds where two faces drive one cell), then the solid cells next to the
   surface cleared (``_solid``) and point sources added (``_sources``);
4. receivers sampled (``_receivers``, trilinear).

Each cell sees the CPU kernel's operations in the same order. Under Numba's CUDA simulator (which runs these
kernels on the CPU) the fields are bit-identical to the CPU kernel's, float32 and float64, with a moving body and
the CPML (tests/unit/test_fdtd_cuda.py). On a GPU they agree to float round-off: its compiler may fuse a multiply
and an add (one rounding instead of two), and atomic adds at cells with several body faces sum in any order; the
tests hold them to 1e-12 (float64) and 1e-5 (float32) of the largest value, the probe to 1e-4.

Memory traffic: one step reads p and the three velocities about twice and writes them once (~60 B per cell in
float32, CPML cells more), so at 256^3 and above the step is bound by memory bandwidth: an H200's 4.8 TB/s bounds
it near 8e10 cell updates per second. Not yet measured on a GPU (bench/bench_fdtd_gpu.py).

Optional: Numba's CUDA target and an NVIDIA driver (``pip install 'impactsound[cuda12]'``). Where the solver is
asked for ``backend="auto"`` the GPU is used only where :func:`fdtd_gpu_problem` finds none: a probe in a
subprocess that runs a small solve on the GPU and on the CPU and compares them, so a broken driver or a kernel
that disagrees never reaches a render.
"""
from __future__ import annotations

import math

import numpy as np

_PROBE: list = []

_PROBE_SCRIPT = """
import numpy as np
from numba import cuda
if not cuda.is_available():
    raise SystemExit("numba.cuda finds no CUDA device")
from impactsound.wave.fdtd import FDTDSolver, centred_grid
g = centred_grid(0.05, 0.01)
out = []
for backend in ("numba", "cuda"):
    s = FDTDSolver(g, backend=backend)
    s.set_receivers(np.array([[0.02, 0.01, -0.01], [-0.03, 0.0, 0.02]]))
    rates = np.sin(np.arange(40) * 0.3)[:, None] * 1e-6
    out.append(s.run(40, source_cells=np.array([[8, 8, 8]]), source_rates=rates))
err = np.abs(out[0] - out[1]).max() / np.abs(out[0]).max()
assert err < 1e-4, f"GPU FDTD differs from the CPU by {err:.3g} of the peak"
print(cuda.get_current_device().name.decode() if hasattr(cuda.get_current_device().name, "decode")
      else cuda.get_current_device().name, "ok")
"""


def simulated() -> bool:
    """Whether Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): the kernels run on the CPU."""
    from numba import config
    return bool(config.ENABLE_CUDASIM)


def fdtd_gpu_problem(timeout: float = 300.0) -> str | None:
    """None where the GPU FDTD works here (or under Numba's CUDA simulator), else a one-line reason. Probed once
    per process in a subprocess (a missing driver or a native crash is reported, never inherited) that solves a
    small grid on the GPU and on the CPU and compares them."""
    if simulated():
        return None
    if _PROBE:
        return _PROBE[0]
    from ..cuda_probe import probe
    reason = probe(_PROBE_SCRIPT, ("numba.cuda",), "CUDA FDTD", timeout)
    _PROBE.append(reason)
    return reason


def _kernels():
    """The kernels (compiled on first launch)."""
    from . import _fdtd_cuda_kernels as k
    return {"velocity": k._velocity, "pressure": k._pressure, "body": k._body, "walls": k._walls, "solid": k._solid,
            "sources": k._sources, "receivers": k._receivers}


class CudaState:
    """The solver's arrays on the GPU (p, v, the CPML memory and tables, the body and receivers), and the step.

    Made from an :class:`~impactsound.wave.fdtd.FDTDSolver` (its host arrays are the initial state);
    :meth:`to_host` copies the fields back into the solver's arrays."""

    BLOCK3 = (32, 8, 4)            # threads along (k, j, i)

    def __init__(self, solver):
        from numba import cuda
        self.s = solver
        d = cuda.to_device
        self.p = d(solver.p)
        self.v = [d(a) for a in solver.v]
        X, Y, Z = solver._X, solver._Y, solver._Z
        self.X = tuple(d(np.ascontiguousarray(a)) for a in X)
        self.Y = tuple(d(np.ascontiguousarray(a)) for a in Y)
        self.Z = (int(Z[0]), int(Z[1]), d(Z[2]), d(Z[3]), d(Z[4]), int(Z[5]), int(Z[6]), d(Z[7]), d(Z[8]),
                  d(Z[9]))
        self.bface = d(np.ascontiguousarray(solver._bface, np.int64).reshape(-1, 5))
        self.solid = d(np.ascontiguousarray(solver._solid, np.int64).reshape(-1, 3))
        self.ridx = d(np.ascontiguousarray(solver._recv_idx, np.int64).reshape(-1, 3))
        self.rw = d(np.ascontiguousarray(solver._recv_w, np.float64).reshape(-1, 3))
        nx, ny, nz = solver.grid.shape
        b = self.BLOCK3
        self.grid3 = (math.ceil(nz / b[0]), math.ceil(ny / b[1]), math.ceil(nx / b[2]))

    def advance(self, T: int, vbl: np.ndarray, scell: np.ndarray, sval: np.ndarray) -> np.ndarray:
        """T steps (arguments as FDTDSolver._advance: body face velocity per step in sweep order, source cells and
        their p increments per step); returns the receivers after each step, (T, n_receivers) float64."""
        from numba import cuda
        K = _kernels()
        s = self.s
        dt_ = s.dtype.type
        cv, cp = s.cv, s.cp
        vcoef, pcoef = cv * dt_(s.grid.dx), cp * dt_(s.grid.dx)
        X, Y, Z = self.X, self.Y, self.Z
        vx, vy, vz = self.v
        nb_, ns, nr = int(vbl.shape[1]), int(scell.shape[0]), int(self.ridx.shape[0])
        vbl_d = cuda.to_device(np.ascontiguousarray(vbl, s.dtype)) if nb_ else None
        scell_d = cuda.to_device(np.ascontiguousarray(scell, np.int64)) if ns else None
        sval_d = cuda.to_device(np.ascontiguousarray(sval, s.dtype)) if ns else None
        out = cuda.device_array((T, max(nr, 1)), np.float64)
        nsol = int(self.solid.shape[0])
        n1 = int(s._n_one_sided)
        nw = nb_ - n1
        for t in range(T):
            K["velocity"][self.grid3, self.BLOCK3](self.p, vx, vy, vz, cv, vcoef, X[0], X[1], X[2], X[3], Y[0],
                                                   Y[1], Y[2], Y[3], Z[0], Z[1], Z[2], Z[3], Z[4])
            if nw:
                K["walls"][math.ceil(nw / 128), 128](vx, vy, vz, self.bface, vbl_d[t], n1)
            K["pressure"][self.grid3, self.BLOCK3](self.p, vx, vy, vz, cp, pcoef, X[4], X[5], X[6], X[7], Y[4],
                                                   Y[5], Y[6], Y[7], Z[5], Z[6], Z[7], Z[8], Z[9])
            if n1:
                K["body"][math.ceil(n1 / 128), 128](self.p, vx, vy, vz, cp, self.bface, vbl_d[t], n1)
            if nsol:
                K["solid"][math.ceil(nsol / 128), 128](self.p, self.solid)
            if ns:
                K["sources"][math.ceil(ns / 32), 32](self.p, scell_d, sval_d[t])
            if nr:
                K["receivers"][math.ceil(nr / 32), 32](self.p, self.ridx, self.rw, out[t])
        return out.copy_to_host()[:, :nr]

    def to_host(self) -> None:
        """Copy p, v and the CPML memory back into the solver's host arrays."""
        s = self.s
        self.p.copy_to_host(s.p)
        for a, h in zip(self.v, s.v):
            a.copy_to_host(h)
        for dev, host in ((self.X[3], s._X[3]), (self.X[7], s._X[7]), (self.Y[3], s._Y[3]), (self.Y[7], s._Y[7]),
                          (self.Z[4], s._Z[4]), (self.Z[9], s._Z[9])):
            dev.copy_to_host(host)
