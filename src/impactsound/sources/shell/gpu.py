"""The GPU path of the reduced nonlinear shell: the cubature force and free Newmark steps of many shells at once.

Chadwick, An & James 2009, sec. 2.3 (cubature reduced force, explicit subspace Newmark). :class:`GpuCubature` takes
a :class:`~impactsound.sources.shell.reduced.CompiledCubature` (the CPU kernel) and evaluates the same force for B
shells of that model -- B poses, B states -- in one pass on a CUDA GPU: the gather and the projection are matrix
products (cuBLAS, through CuPy), the triangles' forces one GPU thread per (triangle, shell) compiled by Numba from
the very source of the CPU kernel (sources/shell/_cubature_cuda.py). Every sum has a fixed order, so the same
inputs give the same bits on the same GPU; against the CPU kernel they agree to round-off (different summation
orders of the same products).

Optional: it needs an NVIDIA GPU with CuPy and Numba's CUDA target (``pip install 'impactsound[cuda12]'``, or
``[cuda13]``, after the driver's CUDA version).
:func:`cuda_problem` probes that in a subprocess (a broken driver cannot crash the caller) and says why not;
everything else of impactsound runs on the CPU. With ``NUMBA_ENABLE_CUDASIM=1`` (Numba's CUDA simulator, set
before Numba is imported) the same kernels run on the CPU with NumPy arrays: slow, for tests only.

SI units: q [m sqrt(kg)], v [m sqrt(kg) / s], forces [N/sqrt(kg)], dt [s], damping d [1/s].
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError, SolverError

_PROBE: list = []

_PROBE_SCRIPT = """
import numpy as np
import cupy as cp
from numba import cuda
if not cuda.is_available():
    raise SystemExit("numba.cuda finds no CUDA device")
@cuda.jit
def twice(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2.0
a = cp.arange(64, dtype=cp.float64)
twice[1, 64](cuda.as_cuda_array(a))
b = cp.ones((3, 4)) @ cp.ones((4, 2))
assert float(a.sum().get()) == 2 * 63 * 64 / 2 and float(b.sum().get()) == 24.0
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "ok")
"""


def simulated() -> bool:
    """Whether Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): kernels run on the CPU, arrays are NumPy's."""
    from numba import config
    return bool(config.ENABLE_CUDASIM)


def cuda_problem(timeout: float = 300.0) -> str | None:
    """Whether the GPU path works here: None when it does (or under Numba's CUDA simulator), else a one-line
    reason. Probed once per process in a subprocess that runs a small Numba kernel on a CuPy array and a CuPy
    matrix product (a missing driver or a native crash is reported, never inherited)."""
    if simulated():
        return None
    if _PROBE:
        return _PROBE[0]
    from ...cuda_probe import probe
    reason = probe(_PROBE_SCRIPT, ("cupy", "numba"), "CUDA", timeout)
    _PROBE.append(reason)
    return reason


class GpuCubature:
    """The cubature force of a :class:`~impactsound.sources.shell.reduced.CompiledCubature` for B shells at once
    on a CUDA GPU, and their free (unloaded) Newmark steps.

    The GPU evaluates the basis the CPU kernel evaluates (its ``U_rounded``: float32-stored rows are widened
    exactly), with float64 arithmetic.

    One step is five GPU operations (two matrix products, three kernels). Launched one by one from Python, a step
    costs the launches' latency whatever B (0.26-0.46 ms on an H100's host, measured). For up to ``SMALL_B``
    shells the matrix products are this package's own kernels, and :meth:`newmark` (``graphs``, the default) records
    ``GRAPH_STEPS`` steps once as a CUDA graph and replays it, which removes most of that latency; wider batches
    use cuBLAS through CuPy (which records no cuBLAS call), one launch at a time, their latency shared by B shells.

    Parameters
    ----------
    cc : CompiledCubature
        The CPU kernel whose force is evaluated (its elements, weights, stored rows and rest data are uploaded).
    graphs : bool
        Replay recorded CUDA graphs of steps in :meth:`newmark` (falls back to single launches where recording
        fails; :attr:`graph_problem` then says why). Off under Numba's simulator.

    Raises
    ------
    SolverError
        Where the GPU path does not work here (:func:`cuda_problem`'s reason).
    """

    GRAPH_STEPS = 50
    SMALL_B = 8        # up to this many shells the products are our kernels, which a graph records (measured
                       # on an H100: 0.11 ms per step at B = 4, 0.47 at 16 against 0.30 with cuBLAS)

    def __init__(self, cc, graphs: bool = True):
        if len(getattr(cc, "pairs", ())):
            raise InputError("GPU cubature: the GPU path evaluates the paper's linear-mode basis; this cubature is "
                             "on a quadratic manifold (shell.basis = \"manifold\"): use CompiledCubature (the CPU "
                             "path) or shell.basis = \"modes\"")
        why = cuda_problem()
        if why is not None:
            raise SolverError(f"GPU cubature: no usable CUDA GPU here: {why}; use CompiledCubature (the CPU path)")
        from . import _cubature_cuda as kern
        self._k = kern
        self.cc = cc
        self.r = cc.r
        self.k = int(cc.slot.shape[0])
        self.graph_problem = None if graphs else "graphs=False"
        if simulated():
            self.xp = np
            self._dev = lambda a: a
            self._stream = None                                # the simulator runs launches in order
            self.graph_problem = "Numba's CUDA simulator records no graphs"
        else:
            import cupy
            from numba import cuda
            self.xp = cupy
            # numba device views of CuPy's arrays, made once: a kernel launch then skips the array-interface
            # handshake (and its stream synchronisation) for each argument
            self._dev = cuda.as_cuda_array
            # one stream for everything, CuPy's products and Numba's kernels alike (a graph is recorded from it)
            self._stream = cupy.cuda.Stream(non_blocking=True)
            self._nb_stream = cuda.external_stream(self._stream.ptr)
        xp = self.xp
        with self._on_stream():
            up = lambda a, dt=None: xp.ascontiguousarray(xp.asarray(np.asarray(a, dtype=dt)))   # noqa: E731
            Ue = np.asarray(cc.Ue, np.float64)                    # exact widening of float32 rows
            self.Ue = up(Ue)
            self.UeT = up(Ue.T)
            self.X0 = up(cc.X0, np.float64)
            k, S = cc.slot.shape
            # scatter: stored row j of U_V receives the (element, slot, component) rows of Fb that sit on it, in
            # the CPU kernel's order (elements in stored order, then slots)
            e = np.repeat(np.arange(k), 3 * S)
            sl = np.tile(np.repeat(np.arange(S), 3), k)
            c = np.tile(np.arange(3), k * S)
            row = 3 * (cc.voff[e // kern.CHUNK] + cc.slot[e, sl]) + c
            src = np.argsort(row, kind="stable")
            ptr = np.searchsorted(row[src], np.arange(Ue.shape[0] + 1))
            host = dict(voff=(cc.voff, np.int64), slot=(cc.slot, np.int64), w=(cc._w, np.float64),
                        gN=(cc.gN, np.float64), R=(cc.R, np.float64), Qm=(cc.Qm, np.float64),
                        th0=(cc.theta0, np.float64), interior=(cc.interior, np.bool_), A=(cc.areas, np.float64),
                        ptr=(ptr, np.int64), src=(src, np.int64), d=(np.zeros(self.r), np.float64))
            self._keep = {name: up(a, dt) for name, (a, dt) in host.items()}
            self._keep.update(Ue=self.Ue, UeT=self.UeT, X0=self.X0)
            self._a = {name: self._dev(a) for name, a in self._keep.items()}
            self._sync()
        self._B = None
        self._graphs = {}

    # -- launches -----------------------------------------------------------------------------------------------
    def _on_stream(self):
        import contextlib
        return contextlib.nullcontext() if self._stream is None else self._stream

    def _sync(self):
        if self._stream is not None:
            self._stream.synchronize()

    def _launch(self, kernel, n_threads, *args):
        kern = self._k
        if self._stream is None:
            kernel[kern.blocks(n_threads), kern.THREADS](*args)
        else:
            kernel[kern.blocks(n_threads), kern.THREADS, self._nb_stream](*args)

    def _buffers(self, B: int):
        if self._B == B:
            return
        xp = self.xp
        rows, S, r = self.Ue.shape[0], self.cc.slot.shape[1], self.r
        self._graphs = {}
        # CuPy records no cuBLAS call into a graph: for a few shells (launch-bound) the products are our kernels
        self._small = self._stream is not None and B <= self.SMALL_B
        try:
            with self._on_stream():
                self._Xg = xp.zeros((rows, B))
                self._Fb = xp.zeros((3 * S * self.k, B))
                self._Fu = xp.zeros((rows, B))
                self._Q, self._V, self._F, self._Acc = (xp.zeros((r, B)) for _ in range(4))
                self._sync()
            self._d = {name: self._dev(getattr(self, "_" + name)) for name in ("Xg", "Fb", "Fu", "Q", "V", "F",
                                                                                "Acc")}
        except Exception as err:                              # cupy's OutOfMemoryError
            self._B = None
            raise SolverError(f"GPU cubature: {B} shells do not fit in the GPU's memory "
                              f"({(2 * rows + 3 * S * self.k + 4 * r) * B * 8 / 2**20:.0f} MiB of buffers): "
                              f"step fewer at a time ({err})") from err
        self._B = B

    def _force_into(self):
        """self._F = f~(self._Q) for every column (queued on the stream)."""
        xp, kern, a, b = self.xp, self._k, self._a, self._d
        B = self._B
        if self.k == 0:
            self._F[...] = 0.0
            return
        if self._small:
            self._launch_matvec(a["Ue"], b["Q"], b["Xg"], 32)
        else:
            xp.matmul(self.Ue, self._Q, out=self._Xg)
        self._launch(kern.elements, self.k * B, b["Xg"], a["X0"], a["voff"], a["slot"], a["w"], a["gN"], a["R"],
                     a["Qm"], a["th0"], a["interior"], a["A"], self.cc.c_m, self.cc.c_b, b["Fb"])
        self._launch(kern.scatter, self._Fu.shape[0] * B, b["Fb"], a["ptr"], a["src"], b["Fu"])
        if self._small:
            self._launch_matvec(a["UeT"], b["Fu"], b["F"], kern.RED_MAX)
        else:
            xp.matmul(self.UeT, self._Fu, out=self._F)

    def _launch_matvec(self, A, X, Y, threads):
        self._k.matvec[Y.shape[0] * Y.shape[1], threads, self._nb_stream](A, X, Y)

    def _update(self, dt, finish, start):
        b = self._d
        self._launch(self._k.newmark_update, self.r * self._B, b["Q"], b["V"], b["F"], b["Acc"], self._a["d"],
                     float(dt), finish, start)

    def _steps(self, dt, n):
        """n whole steps (finish the previous, start the next, force), from recorded graphs where possible."""
        g = self._graph(dt) if n >= self.GRAPH_STEPS else None
        done = 0
        if g is not None:
            while n - done >= self.GRAPH_STEPS:
                g.launch(self._stream)
                done += self.GRAPH_STEPS
        for _ in range(n - done):
            self._update(dt, True, True)
            self._force_into()

    def _graph(self, dt):
        """A CUDA graph of GRAPH_STEPS whole steps at this dt and batch width, recorded once (None where recording
        fails: graph_problem says why, and steps are launched one by one)."""
        if self.graph_problem is not None or not self._small:
            return None
        key = float(dt)
        if key in self._graphs:
            return self._graphs[key]
        s = self._stream
        try:
            mode = getattr(self.xp.cuda.runtime, "streamCaptureModeRelaxed", None)
            with s:
                s.begin_capture(*(() if mode is None else (mode,)))
                try:
                    for _ in range(self.GRAPH_STEPS):
                        self._update(dt, True, True)
                        self._force_into()
                finally:
                    graph = s.end_capture()
        except Exception as err:                               # recording refused: launch step by step
            self.graph_problem = f"{type(err).__name__}: {err}"[:300]
            return None
        self._graphs[key] = graph
        return graph

    # -- public ------------------------------------------------------------------------------------------------
    def _states(self, q, what: str):
        Q = np.asarray(q, np.float64)
        one = Q.ndim == 1
        Q = np.atleast_2d(Q)
        if Q.ndim != 2 or Q.shape[1] != self.r or len(Q) == 0 or not np.isfinite(Q).all():
            raise InputError(f"GPU cubature: {what} must be finite, shape (r,) or (B, r) with r = {self.r} and "
                             f"B >= 1 shells, got shape {np.shape(q)}")
        return Q, one

    def _host(self, a):
        return np.asarray(a.get() if hasattr(a, "get") else a)

    def _put(self, dst, host):
        dst[...] = self.xp.asarray(np.ascontiguousarray(host))

    def force(self, q) -> np.ndarray:
        """The cubature force sum_i w_i g_i(q) of each shell: (B, r) for q (B, r), (r,) for q (r,)
        [N/sqrt(kg)]."""
        Q, one = self._states(q, "q")
        self._buffers(len(Q))
        with self._on_stream():
            self._put(self._Q, Q.T)
            self._force_into()
            F = self._host(self._F).T.copy()
        _finite(F, "force")
        return F[0] if one else F

    def newmark(self, q, v, dt: float, n_steps: int, d=None):
        """n_steps unloaded explicit Newmark steps of every shell (the scheme of CompiledCubature.newmark and
        dynamics.integrate; damping d = alpha + beta omega^2 per mode [1/s], default 0). q, v: (B, r) or (r,).
        Returns the new (q, v), shaped like the input."""
        Q, one = self._states(q, "q")
        Vv, _ = self._states(v, "v")
        if Vv.shape != Q.shape:
            raise InputError(f"GPU cubature: q and v must have the same shape, got {Q.shape} and {Vv.shape}")
        if not (np.isfinite(dt) and dt > 0):
            raise InputError(f"GPU cubature: dt must be a positive number of seconds, got {dt}")
        n_steps = int(n_steps)
        if n_steps < 0:
            raise InputError(f"GPU cubature: n_steps must be >= 0, got {n_steps}")
        dd = np.zeros(self.r) if d is None else np.asarray(d, np.float64) * np.ones(self.r)
        if dd.shape != (self.r,) or not np.isfinite(dd).all() or (dd < 0).any():
            raise InputError(f"GPU cubature: damping d must be finite, >= 0, a number or one per mode ({self.r})")
        self._buffers(len(Q))
        with self._on_stream():
            self._put(self._Q, Q.T)
            self._put(self._V, Vv.T)
            self._put(self._keep["d"], dd)                     # in place: recorded graphs read this buffer
            self._force_into()
            if n_steps:
                self._update(dt, False, True)                  # step 1 starts (no previous step to finish)
                self._force_into()
                self._steps(dt, n_steps - 1)
                self._update(dt, True, False)                  # the last step finishes
            Qo, Vo = self._host(self._Q).T.copy(), self._host(self._V).T.copy()
        _finite(np.concatenate([Qo, Vo], axis=1), "state after Newmark steps")
        return (Qo[0], Vo[0]) if one else (Qo, Vo)


def _finite(a, what):
    if not np.isfinite(a).all():
        raise SolverError(f"GPU cubature: non-finite {what}: a pose folds a triangle flat (displacements far beyond "
                          "the shell's thickness, or an unstable time step); lower the amplitude or dt")
