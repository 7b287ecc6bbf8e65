"""FDTD solver throughput (issue 3): cell-updates per second at 256^3, fp32, next to the memory-bandwidth bound
measured in the same run, what the PML and the body faces cost on top, and the threading options.

Bandwidth: a STREAM-triad-like kernel a[i] = b[i] + s c[i] on 3 x 128 MiB fp32 arrays (far beyond the caches),
vectorised (a range(size) loop over array slices: a range(i0, i1) loop over the whole array does not vectorise
in Numba, since i may be negative there, and measured 9 GB/s instead of ~28 here), warmed up (first touch), best
of several runs, on 1 thread and on the solver's thread pool. STREAM counts 12 bytes per element; the memory
really moves 16 (the store reads the line of ``a`` first: write-allocate), so the bound uses 16. A one-pass
leapfrog step reads and writes p, vx, vy, vz once: >= 32 bytes per cell in fp32, so one pass per step is bound by
bandwidth / 32 B. The solver's temporal blocking (block_steps > 1) moves each plane through memory once per
block, ~32/block_steps bytes per cell-update, so it can exceed that bound; the figures show by how much.

Timings on a shared machine are noisy: every comparison runs its variants interleaved, several rounds, and
keeps the best of each. Run: .venv/bin/python bench/bench_fdtd.py [N] [STEPS] [--threading]
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import numba as nb
import numpy as np

from impactsound.wave import fdtd
from impactsound.wave.voxel import voxelize


@nb.njit(cache=True, nogil=True)
def _triad(a, b, c, s):
    for i in range(a.size):
        a[i] = b[i] + s * c[i]


def triad_bandwidth(threads: int, n_bytes: int = 3 << 27, reps: int = 6) -> float:
    """Bytes/s really moved by a[i] = b[i] + s c[i] (16 B per element: read b, c, write-allocate and write a)."""
    n = n_bytes // 12
    a, b, c = np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32)
    parts = fdtd._split(n, threads)
    calls = [(_triad, (a[i0:i1], b[i0:i1], c[i0:i1], np.float32(0.5))) for i0, i1 in parts]
    fdtd._run(calls, threads)                     # first touch of a, JIT
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        fdtd._run(calls, threads)
        best = min(best, time.perf_counter() - t)
    return 16 * n / best


def best_of(fns: dict, rounds: int) -> dict:
    """Interleaved timing: each round runs every variant once; the best time of each."""
    best = {k: np.inf for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def solver(N, npml=0, threads=None, block=None, body=False):
    g = fdtd.Grid((N, N, N), 1e-3, npml=npml)
    g.origin = -0.5 * N * 1e-3 * np.ones(3)
    s = fdtd.FDTDSolver(g, dtype=np.float32, threads=threads, block_steps=block)
    s.p[N // 2, N // 3, N // 2] = 1.0
    pat = None
    if body:
        b = voxelize(g, lambda P: np.linalg.norm(P, axis=1) < 0.25 * N * 1e-3)
        s.set_body(b)
        pat = np.where(b.axis == 2, 1.0, 0.0)
    s.run(max(1, s.block_steps), body_pattern=pat, body_scale=None if pat is None else np.full(s.block_steps, 1e-6))
    return s, pat


def stepper(s, steps, pat):
    scale = None if pat is None else np.full(steps, 1e-6)
    return lambda: s.run(steps, body_pattern=pat, body_scale=scale)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    N = int(args[0]) if args else 256
    steps = int(args[1]) if len(args) > 1 else 16
    th = fdtd.default_threads()
    blk = fdtd.DEFAULT_BLOCK_STEPS
    rounds = 5
    bw1 = max(triad_bandwidth(1) for _ in range(2))
    bwt = max(triad_bandwidth(th) for _ in range(2))
    bw = max(bw1, bwt)
    bound = bw / 32
    print(f"threads: {th}; triad bandwidth (16 B/element moved; STREAM's 12 B count in brackets): 1 thread "
          f"{bw1 / 1e9:.1f} [{bw1 * 0.75 / 1e9:.1f}] GB/s, {th} threads {bwt / 1e9:.1f} [{bwt * 0.75 / 1e9:.1f}] GB/s "
          f"-> one-pass bound {bound / 1e9:.2f}e9 cell-updates/s (32 B/cell fp32)")
    cells = N**3
    steps = max(blk, steps // blk * blk)

    # interior only (no PML, no body): one pass per step vs temporal blocking, 1 and th threads
    variants = {}
    for name, t_, b_ in (("1 pass/step, 1 thread", 1, 1), (f"1 pass/step, {th} threads", th, 1),
                         (f"{blk} steps/pass, 1 thread", 1, blk), (f"{blk} steps/pass, {th} threads", th, blk)):
        s, _ = solver(N, 0, t_, b_)
        variants[name] = (s, stepper(s, steps, None))
    best = best_of({k: v[1] for k, v in variants.items()}, rounds)
    print(f"interior {N}^3 fp32 ({steps} steps, best of {rounds} interleaved rounds):")
    for k, t in best.items():
        r = cells * steps / t
        print(f"  {k:28s} {t / steps * 1e3:6.1f} ms/step = {r / 1e9:.2f}e9 cell-updates/s ({r / bound:.0%} of the "
              "one-pass bound)")
    t_int = best[f"{blk} steps/pass, {th} threads"]
    variants.clear()

    # NumPy reference of the same update (plain vectorised slicing)
    p = np.zeros((N + 2,) * 3, np.float32)
    vx, vy, vz = (np.zeros_like(p) for _ in range(3))
    cv, cp = np.float32(0.1), np.float32(0.1)
    t = time.perf_counter()
    for _ in range(2):
        vx[1:-1, 1:-1, 1:-1] -= cv * (p[2:, 1:-1, 1:-1] - p[1:-1, 1:-1, 1:-1])
        vy[1:-1, 1:-1, 1:-1] -= cv * (p[1:-1, 2:, 1:-1] - p[1:-1, 1:-1, 1:-1])
        vz[1:-1, 1:-1, 1:-1] -= cv * (p[1:-1, 1:-1, 2:] - p[1:-1, 1:-1, 1:-1])
        p[1:-1, 1:-1, 1:-1] -= cp * ((vx[1:-1, 1:-1, 1:-1] - vx[:-2, 1:-1, 1:-1])
                                     + (vy[1:-1, 1:-1, 1:-1] - vy[1:-1, :-2, 1:-1])
                                     + (vz[1:-1, 1:-1, 1:-1] - vz[1:-1, 1:-1, :-2]))
    t_np = (time.perf_counter() - t) / 2
    del p, vx, vy, vz
    print(f"NumPy slicing reference: {cells / t_np / 1e9:.3f}e9 cell-updates/s; the solver is "
          f"{t_np / (t_int / steps):.0f}x")

    # PML (fused into the sweep) and body faces, against the interior, interleaved
    npml = fdtd.DEFAULT_NPML
    s0, _ = solver(N, 0)
    s1, _ = solver(N, npml)
    s2, _ = solver(N, 12)
    s3, pat = solver(N, npml, body=True)
    best = best_of({"interior": stepper(s0, steps, None), "pml": stepper(s1, steps, None),
                    "pml12": stepper(s2, steps, None), "body": stepper(s3, steps, pat)}, rounds)
    frac = lambda m: 1 - ((N - 2 * m) / N) ** 3  # noqa: E731
    print(f"PML and body ({th} threads, {blk} steps/pass; cell-updates counted over all N^3 cells):")
    print(f"  interior only       {best['interior'] / steps * 1e3:6.1f} ms/step "
          f"({cells * steps / best['interior'] / 1e9:.2f}e9/s)")
    print(f"  PML {npml:2d} cells/side   {best['pml'] / steps * 1e3:6.1f} ms/step "
          f"(+{best['pml'] / best['interior'] - 1:.0%}; {frac(npml):.0%} of the cells in the layer)")
    print(f"  PML 12 cells/side   {best['pml12'] / steps * 1e3:6.1f} ms/step "
          f"(+{best['pml12'] / best['interior'] - 1:.0%}; {frac(12):.0%} of the cells in the layer)")
    print(f"  PML {npml} + sphere     {best['body'] / steps * 1e3:6.1f} ms/step (+{best['body'] / best['pml'] - 1:.0%} "
          f"over the PML alone; {len(s3.body.faces)} body faces, {len(s3.body.solid)} solid cells)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
          f"(fields {s1.grid.memory_bytes() / 2**20:.0f} MiB)")
    del s0, s1, s2, s3
    if "--threading" in sys.argv:
        threading_comparison(N, steps)


# ---------------------------------------------------------------------------------------------------------------
# threading: the solver's plain thread pool over nogil kernels vs Numba prange under each threading layer
# ---------------------------------------------------------------------------------------------------------------
def _prange_driver():
    """A prange version of FDTDSolver._advance (same kernels, same slabs). Compiled in the child process."""
    @nb.njit(parallel=True)
    def advance(F, X, Y, Z, B, R, bnd, T):
        ns = bnd.size - 1
        for c in nb.prange(ns):
            fdtd._sweep(F, X, Y, Z, B, R, bnd[c], bnd[c + 1], int(c > 0), int(c < ns - 1), T)
        for c in nb.prange(ns - 1):
            fdtd._seam(F, X, Y, Z, B, R, bnd[c + 1], T)
    return advance


def _child(N, steps, npml):
    """Runs in a subprocess (a threading layer is fixed per process): prints 'layer rate_prange rate_pool'."""
    advance = _prange_driver()
    s, _ = solver(N, npml)
    T = s.block_steps
    bnd, T = s._slabs(T)
    nr = 0

    def run_prange():
        for _ in range(steps // T):
            F = (s.p, s.v[0], s.v[1], s.v[2], s.cv, s.cp, s.cv * np.float32(s.grid.dx), s.cp * np.float32(s.grid.dx))
            B = (s._bptr, s._bface, np.zeros((T, 0), np.float32), s._sptr, s._solid, np.zeros((0, 3), np.int64),
                 np.zeros((T, 0), np.float32))
            R = (s._rptr, s._rslot, s._rjk, s._rw, np.zeros((T, 2 * nr)))
            advance(F, s._X, s._Y, s._Z, B, R, bnd, T)

    run_prange()
    best = best_of({"prange": run_prange, "pool": stepper(s, steps, None)}, 3)
    print(nb.threading_layer(), N**3 * steps / best["prange"], N**3 * steps / best["pool"], flush=True)


def threading_comparison(N, steps):
    """Each layer in its own process (a threading layer is fixed per process), quiet and with one busy-looping
    process started here on the side (as when another job shares the machine), prange and pool interleaved."""
    print(f"threading ({N}^3 interior, {fdtd.DEFAULT_BLOCK_STEPS} steps/pass, {fdtd.default_threads()} threads; "
          "each layer in its own process; prange and the thread pool interleaved, best of 3):")
    for layer in ("workqueue", "omp", "tbb"):
        env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
        row = []
        for busy in (False, True):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                r = subprocess.run([sys.executable, __file__, "--child", str(N), str(steps), "0"], env=env,
                                   capture_output=True, text=True, timeout=900)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
            if r.returncode != 0:
                err = r.stderr.strip().splitlines()
                row = None
                print(f"  {layer:9s} not available ({err[-1] if err else '?'}; for tbb: pip install tbb, and "
                      "LD_LIBRARY_PATH to its lib/)")
                break
            _, rp, rq = r.stdout.split()[-3:]
            row.append(f"{'one busy process' if busy else 'quiet'}: prange {float(rp) / 1e9:.2f}e9, "
                       f"pool {float(rq) / 1e9:.2f}e9")
        if row:
            print(f"  {layer:9s} " + "; ".join(row) + " cell-updates/s")


if __name__ == "__main__":
    if "--child" in sys.argv:
        a = sys.argv[sys.argv.index("--child") + 1:]
        _child(int(a[0]), int(a[1]), int(a[2]))
    else:
        main()
