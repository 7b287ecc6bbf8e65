"""GPU path of the cubature reduced force (sources/shell/gpu.py, _cubature_cuda.py) against the NumPy reference
cubature and the CPU kernel (Chadwick, An & James 2009, sec. 2.3): B shells' forces at once equal each shell's
NumPy cubature force of the same basis, the batched free Newmark equals the CPU kernel's per shell, on the flat
plate and the curved patch with either bending scheme, and with float32-stored rows.

The kernel tests run where a CUDA GPU works (cupy + numba.cuda, probed in a subprocess) and, everywhere else, under
Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, in a child pytest: the switch must precede Numba's import), which
runs the very same kernels on the CPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_shell_cubature_kernel import _cub, _poses, _reduced  # noqa: E402
from test_shell_model import disk, grid  # noqa: E402

from impactsound.errors import InputError, SolverError  # noqa: E402
from impactsound.sources.shell import gpu  # noqa: E402
from impactsound.sources.shell.cubature import cubature_force  # noqa: E402
from impactsound.sources.shell.reduced import ReducedShell  # noqa: E402

# Round-off bound, CPU vs GPU: both evaluate the same products in different orders (cuBLAS vs the CPU kernel's
# nine-row sums), so positions differ by ~1e-16 |x|; the membrane strain of a pose a few thicknesses deep (the
# poses below, ~1e-4 .. 1e-3) amplifies that to ~1e-12 in the force. The CPU kernel meets the NumPy reference to
# 1e-11 on the same poses (test_shell_cubature_kernel); the GPU is held to the same.
TOL = 1e-11


def _shell(name):
    shape, _, bending = name.partition("-")
    if shape == "plate":
        V, F = disk(5, 0.1)
        return _reduced(V, F, 1, bending or "flap")
    V, F = grid(6, 5, 0.1, 0.08, rng=np.random.default_rng(4), z=0.004)
    V[:, 2] += 2.0 * ((V[:, 0] - 0.05) ** 2 + 0.5 * (V[:, 1] - 0.04) ** 2)
    return _reduced(V, F, 2, bending or "flap")


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _need_gpu():
    why = gpu.cuda_problem()
    if why is not None:
        pytest.skip(f"no CUDA GPU path here: {why} (the simulator test covers the kernels)")


@pytest.mark.parametrize("name", ["plate", "curved-midedge"])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_force_matches_numpy_cubature(name, precision):
    _need_gpu()
    shell = _shell(name)
    cub = _cub(shell, 6)
    cc = shell.compiled_cubature(cub, precision=precision)
    g = gpu.GpuCubature(cc)
    rounded = ReducedShell(shell.model, cc.U_rounded, shell.omega)
    Q = _poses(shell, 3, 12)
    F = g.force(Q)
    assert F.shape == Q.shape
    for q, f in zip(Q, F):
        ref = cubature_force(cub, rounded.element_forces, q)
        assert _rel(f, ref) <= TOL
        assert _rel(f, cc.force(q)) <= TOL
    assert np.array_equal(F, g.force(Q))                        # deterministic
    f1 = g.force(Q[1])
    assert f1.shape == (shell.r,) and _rel(f1, F[1]) <= TOL     # one shell alone (another batch width)


@pytest.mark.parametrize("name", ["curved", "plate-midedge"])
def test_gpu_newmark_matches_cpu(name):
    _need_gpu()
    shell = _shell(name)
    cc = shell.compiled_cubature(_cub(shell, 7))
    g = gpu.GpuCubature(cc)
    Q = _poses(shell, 2, 14)
    V = _poses(shell, 2, 15) * 100.0
    K = shell.model.stiffness()
    w_max = np.sqrt(np.linalg.eigvalsh(shell.U.T @ (K @ shell.U)).max())
    d = 10.0 + 1e-2 / w_max**2 * (w_max * np.linspace(0.5, 1.0, shell.r)) ** 2
    dt, n = 0.2 / w_max, 6
    Qg, Vg = g.newmark(Q, V, dt, n, d=d)
    for i in range(len(Q)):
        q, v = cc.newmark(Q[i], V[i], dt, n, d=d)
        assert _rel(Qg[i], q) <= TOL and _rel(Vg[i], v) <= TOL
    assert not np.allclose(Qg, Q)                               # it moved
    q0, v0 = g.newmark(Q[0], V[0], dt, 0)
    assert np.array_equal(q0, Q[0]) and np.array_equal(v0, V[0])


def test_gpu_graph_replay_is_bitwise_the_step_by_step_run():
    """Steps replayed from a recorded CUDA graph give the very bits of the same steps launched one by one (and a
    real GPU records the graph: no silent fall-back there)."""
    _need_gpu()
    shell = _shell("curved")
    cc = shell.compiled_cubature(_cub(shell, 9), precision="float32")
    Q = _poses(shell, 3, 16)
    dt = 0.1 / np.sqrt(np.linalg.eigvalsh(shell.U.T @ (shell.model.stiffness() @ shell.U)).max())
    g = gpu.GpuCubature(cc)
    g.GRAPH_STEPS = 4                                          # short graphs: the simulator runs this test too
    n = 2 * g.GRAPH_STEPS + 3
    one_by_one = gpu.GpuCubature(cc, graphs=False).newmark(Q, 0 * Q, dt, n, d=3.0)
    replayed = g.newmark(Q, 0 * Q, dt, n, d=3.0)
    assert all(np.array_equal(a, b) for a, b in zip(one_by_one, replayed))
    if not gpu.simulated():
        assert g.graph_problem is None, g.graph_problem
    again = g.newmark(Q, 0 * Q, dt, n, d=5.0)                  # new damping, same recorded graph
    ref = gpu.GpuCubature(cc, graphs=False).newmark(Q, 0 * Q, dt, n, d=5.0)
    assert all(np.array_equal(a, b) for a, b in zip(again, ref))


def test_matvec_kernel():
    """The graph-recordable matrix product (a block per output, a fixed tree sum) against NumPy's."""
    _need_gpu()
    from impactsound.sources.shell import _cubature_cuda as kern
    rng = np.random.default_rng(3)
    A, X = rng.standard_normal((5, 300)), rng.standard_normal((300, 2))
    if gpu.simulated():
        Y = np.zeros((5, 2))
        kern.matvec[10, 32](A, X, Y)
    else:
        from numba import cuda
        Yd = cuda.to_device(np.zeros((5, 2)))
        kern.matvec[10, kern.RED_MAX](cuda.to_device(A), cuda.to_device(X), Yd)
        Y = Yd.copy_to_host()
    assert _rel(Y, A @ X) <= 1e-14


def test_gpu_bad_input():
    _need_gpu()
    shell = _shell("plate")
    g = gpu.GpuCubature(shell.compiled_cubature(_cub(shell, 8)))
    q = np.zeros(shell.r)
    for bad in (np.full(shell.r, np.nan), np.zeros(shell.r + 1), np.zeros((0, shell.r))):
        with pytest.raises(InputError, match="finite, shape"):
            g.force(bad)
    with pytest.raises(InputError, match="dt"):
        g.newmark(q, q, 0.0, 3)
    with pytest.raises(InputError, match="same shape"):
        g.newmark(np.zeros((2, shell.r)), q, 1e-6, 3)
    with pytest.raises(InputError, match="damping"):
        g.newmark(q, q, 1e-6, 3, d=-1.0)


def test_kernels_under_cuda_simulator():
    """The GPU tests above, run by a child pytest under Numba's CUDA simulator: the same kernel code on the CPU."""
    if gpu.simulated():
        pytest.skip("already under the simulator")
    import importlib.util
    if importlib.util.find_spec("numba.cuda") is None:
        pytest.skip("this Numba has no CUDA target (numba-cuda not installed): no simulator to run the kernels on")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_CACHE_DIR=os.environ.get("NUMBA_CACHE_DIR", ""))
    if not env["NUMBA_CACHE_DIR"]:
        del env["NUMBA_CACHE_DIR"]
    # a subset (the simulator runs a Python thread per GPU thread): the midedge/float32 force, a Newmark run, the
    # product kernel, bad input (graphs are a GPU's: the simulator records none)
    pick = "not simulator and (float32-curved-midedge or newmark_matches_cpu[curved] or matvec or bad_input)"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", pick],
                       capture_output=True, text=True, env=env, timeout=900)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    last = r.stdout.splitlines()[-1]
    assert "skipped" not in last and "4 passed" in last, tail


def test_no_gpu_is_a_clear_error(monkeypatch):
    """Without a usable GPU, GpuCubature says why and points at the CPU path."""
    monkeypatch.setattr(gpu, "simulated", lambda: False)
    monkeypatch.setattr(gpu, "_PROBE", ["cupy not installed (pip install 'impactsound[cuda]' ...)"])
    shell = _shell("plate")
    with pytest.raises(SolverError, match="CompiledCubature"):
        gpu.GpuCubature(shell.compiled_cubature(_cub(shell, 8)))
