"""CUDA kernels (Numba) for the cubature force of many shells of one model at once (the GPU path of gpu.py).

Chadwick, An & James 2009, sec. 2.3: f~(q) ~= sum_{i in C} w_i g_i(q), g_i(q) = U_V^T f_V(X_V + U_V q). For B
shells (columns of Q (r, B)) one evaluation is

1. gather     Xg = U_V Q                      (3 V x r x B: a matrix product: cuBLAS through the array module,
              or, for a few shells, ``matvec`` here, which a CUDA graph can record);
2. elements   one GPU thread per (triangle, shell): x = X_V + Xg at the triangle's stencil slots, the triangle's
              membrane + bending force -- the very Python source of the CPU kernel's ``element_force`` compiled
              for the GPU (``_for_device``), so both targets share one statement of the physics -- weighted, one
              row per (slot, component) of Fb;
3. scatter    Fu[j] = sum of the Fb rows that land on stored row j, in a fixed (element, slot) order;
4. project    F = U_V^T Fu                    (r x 3 V x B: a matrix product).

Steps 2 and 3 are the kernels here; 1 and 4 are matrix products of the caller's array module (or ``matvec``).
The sum order of step 3 is that of the CPU kernel (elements in stored order, then slots), and every sum is
deterministic (no atomics): the same inputs give the same bits on the same GPU.

The Newmark update of CompiledCubature.newmark (dynamics.integrate's explicit central difference, damping at the
new velocity) is the third kernel.

SI units: positions [m], forces [N], q [m sqrt(kg)], U [1/sqrt(kg)], reduced forces [N/sqrt(kg)].
"""
from __future__ import annotations

import types
import warnings

from numba import cuda, float64

from . import _cubature_kernel as cpu

S_MAX = 24          # stencil slots: 6 ("flap" bending), 24 ("midedge")
NF_MAX = 4          # flaps a triangle's bending reads
THREADS = 128       # threads per block of the element and scatter kernels
CHUNK = cpu.CHUNK   # elements per chunk of the stored layout

# one shell's step launches a few blocks by design (k / THREADS for its k triangles); Numba warns at every such
# launch that the grid under-uses the GPU
warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")


def _for_device(fn, **device_names):
    """The Python source of the Numba CPU function ``fn`` compiled as a CUDA device function, with the helpers it
    calls (``device_names``: their global names) replaced by their device versions: one copy of the element's
    physics serves both targets."""
    py = fn.py_func
    glob = dict(py.__globals__)
    glob.update(device_names)
    clone = types.FunctionType(py.__code__, glob, py.__name__, py.__defaults__, py.__closure__)
    return cuda.jit(device=True)(clone)


_cross = _for_device(cpu._cross)
_flap_angles = _for_device(cpu._flap_angles, _cross=_cross)
_membrane_stress = _for_device(cpu._membrane_stress)
_element_force = _for_device(cpu.element_force, _flap_angles=_flap_angles, _membrane_stress=_membrane_stress)


@cuda.jit(device=True)
def _row_and_column(n_rows, B):
    """This thread's (row, column) in an (n_rows, B) grid of work, one thread each (columns fastest); row -1 for a
    thread past its end."""
    t = cuda.grid(1)
    if t >= n_rows * B:
        return -1, 0
    i = t // B
    return i, t - i * B


@cuda.jit
def elements(Xg, X0, voff, slot, w, gN, R, Qm, th0, interior, A, c_m, c_b, Fb):
    """Fb ((k S 3), B) = w_e x the force [N] of element e on its stencil slot, component, for each shell (column).

    Xg (3 V, B): U_V Q; X0 (3 V,): rest positions of the stored rows; voff, slot: the chunk layout of
    CompiledCubature (element e, in chunk e // CHUNK, reads stored vertex voff[chunk] + slot[e, s] at its slot s);
    the rest as the CPU kernel's element_force. The free slots of the membrane's three face vertices carry the
    membrane force too (fb + fm, as the CPU kernel adds them)."""
    S = slot.shape[1]
    e, b = _row_and_column(slot.shape[0], Xg.shape[1])
    if e < 0:
        return
    base = voff[e // CHUNK]
    x = cuda.local.array((S_MAX, 3), float64)
    fm = cuda.local.array((3, 3), float64)
    fb = cuda.local.array((S_MAX, 3), float64)
    J = cuda.local.array((NF_MAX, 3, 6, 3), float64)
    dth = cuda.local.array((NF_MAX, 3), float64)
    for sl in range(S):
        row = 3 * (base + slot[e, sl])
        for c in range(3):
            x[sl, c] = X0[row + c] + Xg[row + c, b]
    _element_force(x, gN[e], R[e], Qm, th0[e], interior[e], A[e], c_m, c_b, fm, fb, J, dth)
    we = w[e]
    o = 3 * S * e
    for sl in range(S):
        for c in range(3):
            f = fb[sl, c]
            if sl < 3:
                f += fm[sl, c]
            Fb[o + 3 * sl + c, b] = we * f


@cuda.jit
def scatter(Fb, ptr, src, Fu):
    """Fu (3 V, B): row j is the sum of Fb's rows src[ptr[j]] .. src[ptr[j + 1] - 1], in that order."""
    j, b = _row_and_column(Fu.shape[0], Fu.shape[1])
    if j < 0:
        return
    s = 0.0
    for i in range(ptr[j], ptr[j + 1]):
        s += Fb[src[i], b]
    Fu[j, b] = s


@cuda.jit
def newmark_update(Q, V, Fint, Acc, d, dt, finish, start):
    """One shell-mode (p, b) per thread, (r, B) arrays: ``finish`` a step (v = (v + h acc - h f(q)) / (1 + h d),
    Fint = f(q) of the new q), then ``start`` the next (acc = -d v - f, q += dt v + h dt acc); h = dt / 2."""
    p, b = _row_and_column(Q.shape[0], Q.shape[1])
    if p < 0:
        return
    h = 0.5 * dt
    if finish:
        V[p, b] = (V[p, b] + h * Acc[p, b] - h * Fint[p, b]) / (1.0 + h * d[p])
    if start:
        a = -d[p] * V[p, b] - Fint[p, b]
        Acc[p, b] = a
        Q[p, b] += dt * V[p, b] + h * dt * a


RED_MAX = 256       # threads per block of matvec


@cuda.jit
def matvec(A, X, Y):
    """Y[i, b] = sum_j A[i, j] X[j, b], one block per (i, b) (the gather U_V Q and the projection U_V^T Fu for a
    few shells, where a recorded CUDA graph replays the step: CuPy records no cuBLAS call). Each of the block's
    threads (a power of two, at most RED_MAX) sums a fixed stride of j, then a fixed tree: deterministic."""
    o = cuda.blockIdx.x
    B = Y.shape[1]
    if o >= Y.shape[0] * B:
        return
    i = o // B
    b = o - i * B
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    part = cuda.shared.array(RED_MAX, float64)
    s = 0.0
    for j in range(t, A.shape[1], nt):
        s += A[i, j] * X[j, b]
    part[t] = s
    cuda.syncthreads()
    half = nt // 2
    while half > 0:
        if t < half:
            part[t] += part[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        Y[i, b] = part[0]


def blocks(n: int) -> int:
    """Blocks of THREADS threads that cover n threads."""
    return max(1, -(-n // THREADS))
