"""Benchmark: compiled modal synthesis kernel vs a straightforward NumPy loop over samples (modes vectorised).

Same inputs for both, run side by side: 200 modes, 48 kHz, several seconds, a few dozen half-sine events, one
listener (plus a two-listener run of the kernel). Prints mode-samples/s, the speed ratio, x real time and peak
memory. Goals (modal-sound issue): >= 2e9 mode-samples/s on 2 cores and >= 20x the NumPy reference.

    .venv/bin/python bench/bench_modal_synthesis.py [--seconds 5] [--modes 200] [--events 40] [--threads N]
"""
from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from impactsound.sources.modal_kernel import default_threads, synthesize


def make_inputs(m, E, L, seconds, seed=0):
    rng = np.random.default_rng(seed)
    w = 2 * np.pi * np.sort(rng.uniform(80.0, 20000.0, m))
    xi = 0.5 * (0.5 / w + 7.5e-8 * w)                                # steel-like Rayleigh damping
    t0 = np.sort(rng.uniform(0.0, 0.8 * seconds, E))
    tau = rng.uniform(2e-5, 2e-4, E)
    imp = rng.normal(size=(E, m)) * 1e-3
    delay = np.full((E, L), 1.5 / 343.2)
    geom = np.zeros((E, L, 4, 4))
    geom[:, :, 2, 0] = 1.2 / (4 * np.pi * 1.5)
    basis = rng.normal(size=(4, m)) * 1e-4
    return w, xi, t0, tau, imp, delay, geom, basis


def numpy_reference(w, xi, t0, tau, imp, delay, geom, basis, fs, n):
    """Straightforward reference: complex one-pole per mode, Python loop over samples, NumPy over modes.
    Injects each event's post-contact amplitude (modal-sound.md sec. 5 closed form) at its first sample after
    the contact; in-contact samples are omitted (a few per event)."""
    wd = w * np.sqrt(1 - xi**2)
    s = -xi * w + 1j * wd
    p = np.exp(s / fs)
    W = np.einsum("ekf,fm->ekm", geom[:, 0], basis)                  # listener 0
    Wc = W[:, 0] + W[:, 1] * s + W[:, 2] * s**2 + W[:, 3] * s**3
    ninj = np.ceil((t0 + delay[:, 0] + tau) * fs).astype(int)
    z = np.zeros(len(w), complex)
    y = np.zeros(n)
    e = 0
    for k in range(n):
        while e < len(t0) and ninj[e] == k:
            Om = np.pi / tau[e]
            T = tau[e]
            I = (Om - np.exp(-s * T) * (s * np.sin(Om * T) + Om * np.cos(Om * T))) / (s**2 + Om**2)
            G = np.pi * imp[e] / (2 * T)
            u = k / fs - delay[e, 0] - t0[e]
            z += Wc[e] * G / wd * I * np.exp(s * u)
            e += 1
        y[k] = z.imag.sum()
        z *= p
    return y


def timed(fn, repeat):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--modes", type=int, default=200)
    ap.add_argument("--events", type=int, default=40)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--fs", type=int, default=48000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ref-seconds", type=float, default=1.0, help="length of the NumPy reference run")
    a = ap.parse_args()
    fs, m = a.fs, a.modes
    n = int(a.seconds * fs)
    nt = a.threads or default_threads()
    args1 = make_inputs(m, a.events, 1, a.seconds)
    # warm-up / JIT (cached on disk after the first run)
    t = time.perf_counter()
    synthesize(*make_inputs(m, 2, 1, 0.01), fs, 480, n_threads=nt)
    jit = time.perf_counter() - t

    tracemalloc.start()
    tk, yk = timed(lambda: synthesize(*args1, fs, n, n_threads=nt), a.repeat)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tk1, yk1 = timed(lambda: synthesize(*args1, fs, n, n_threads=1), a.repeat)
    assert np.array_equal(yk, yk1), "thread count changed the samples"
    args2 = make_inputs(m, a.events, 2, a.seconds)
    tk2, _ = timed(lambda: synthesize(*args2, fs, n, n_threads=nt), 1)

    # NumPy reference on the first ref-seconds (same inputs), extrapolated per sample
    nr = int(min(a.ref_seconds, a.seconds) * fs)
    tr, yr = timed(lambda: numpy_reference(*args1, fs, nr), 1)
    # agreement (outside the in-contact samples the reference skips)
    yk_short = synthesize(*args1, fs, nr, n_threads=nt)[0]
    mask = np.ones(nr, bool)
    for e in range(len(args1[2])):
        k0 = int(np.floor((args1[2][e] + args1[5][e, 0]) * fs))
        mask[max(k0, 0):k0 + int(np.ceil(args1[3][e] * fs)) + 2] = False
    err = np.max(np.abs(yk_short - yr)[mask]) / max(np.max(np.abs(yr)), 1e-300)

    ms = m * n
    rate_k, rate_k1 = ms / tk, ms / tk1
    rate_r = m * nr / tr
    print(f"modal synthesis: {m} modes, {fs} Hz, {a.seconds:g} s ({n} samples), {a.events} events, "
          f"{nt} threads; first call incl. JIT/cache load {jit:.2f} s")
    print(f"  kernel, 1 listener, {nt} threads : {tk*1e3:8.1f} ms  {rate_k:.3e} mode-samples/s  "
          f"{a.seconds/tk:8.1f} x real time")
    print(f"  kernel, 1 listener, 1 thread    : {tk1*1e3:8.1f} ms  {rate_k1:.3e} mode-samples/s  "
          f"(thread scaling {tk1/tk:.2f}x; samples bit-identical)")
    print(f"  kernel, 2 listeners, {nt} threads: {tk2*1e3:8.1f} ms  {2*ms/tk2:.3e} listener-mode-samples/s")
    print(f"  NumPy loop over samples ({nr} samples): {tr*1e3:8.1f} ms  {rate_r:.3e} mode-samples/s  "
          f"{nr/fs/tr:6.2f} x real time")
    print(f"  ratio kernel / NumPy: {rate_k/rate_r:.1f}x   max |kernel - NumPy| / peak = {err:.2e}")
    print(f"  peak traced memory during kernel: {peak/2**20:.1f} MiB (output {n*8/2**20:.1f} MiB); "
          f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MiB")


if __name__ == "__main__":
    main()
