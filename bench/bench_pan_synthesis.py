"""Benchmark: compiled PAN synthesis (sources/pan/synth.py) vs a straightforward NumPy implementation of the
paper's eqs. 18-19, side by side on the same inputs.

Small object (bounding radius 7.5 mm, h = 7.33 us, coefficients every h/8 over ~300 us), 5 x 10 directions,
N = 2, one listener at 48 kHz, impulses spread over 10 s with tau / h in [5, 15]. The NumPy reference loops over
impulses in Python and evaluates eqs. 18-20 with NumPy over (pulse k, output sample, 4 overlapping psi) (point
sampling at the output rate, no band limiting: it does less work than the kernel). Prints impulses/s of both
(the reference on a subset), their ratio and peak memory. Goals: >= 1e5 impulses/s and >= 20x the NumPy version.

    .venv/bin/python bench/bench_pan_synthesis.py [--impulses 200000] [--ref-impulses 2000] [--threads N]
"""
from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from impactsound.sources.modal_kernel import default_threads
from impactsound.sources.pan.field import PANField, angle_weights, shell_radii, with_poles
from impactsound.sources.pan.pulse import psi_weights
from impactsound.sources.pan.synth import PANTable, synthesize_pan

R_B = 7.5e-3
H = 7.3264e-6
C = 343.2


def make_field(n_theta=5, n_phi=10, n_coef=320, seed=0):
    rng = np.random.default_rng(seed)
    dt_q = H / 8
    env = np.exp(-np.arange(n_coef) * dt_q / 40e-6)
    q = rng.normal(size=(6, n_theta, n_phi, 2, n_coef))
    g = np.exp(-0.5 * ((np.arange(-100, 101) * dt_q) / 25e-6) ** 2)        # smooth (audio band) random pulses
    q = np.apply_along_axis(lambda v: np.convolve(v, g, mode="same"), -1, q)
    q *= env * np.array([1e-3, 1e-5])[:, None]
    return PANField(q=q, dt_q=dt_q, tau0=-2 * H - 2 * R_B / C, h=H, c=C, rho=1.2041, R_b=R_B,
                    radii=shell_radii(R_B), mass=0.0157, inertia=np.eye(3) * 3.5e-7)


def make_impulses(E, seconds, seed=1):
    rng = np.random.default_rng(seed)
    t0 = np.sort(rng.uniform(0, 0.95 * seconds, E))
    tau = rng.uniform(5, 15, E) * H
    amp = rng.normal(size=(E, 6)) * np.array([100, 100, 100, 1e4, 1e4, 1e4])
    d = rng.normal(size=(E, 1, 3))
    xl = 0.5 * d / np.linalg.norm(d, axis=-1, keepdims=True)                 # listener 0.5 m away, body spins
    return t0, tau, amp, xl


def numpy_reference(fld: PANField, t0, tau, amp, xl, fs, n):
    """Eqs. 18-20 per impulse in Python, NumPy inside: p(t) = sum_k z(kh) sum_i amp_i sum_n R^-n q_in(t - kh - R/c)."""
    y = np.zeros(n)
    q = with_poles(fld.q.astype(np.float64), axis=1)                          # rows padded with the poles
    R, it, ip, w = angle_weights(xl[:, 0], fld.n_theta, fld.n_phi)
    span = (fld.n_coef + 4) * fld.dt_q
    for e in range(len(t0)):
        qc = sum(w[e, c] * q[:, it[e, c], ip[e, c]] for c in range(4))   # (6, N, n_coef)
        G = np.einsum("i,ink,n->k", amp[e], qc, R[e] ** -(np.arange(fld.n_terms) + 1.0))
        ks = np.arange(1, int(np.ceil(tau[e] / fld.h)))
        S = np.sin(np.pi * ks * fld.h / tau[e])
        start = t0[e] + R[e] / fld.c + fld.tau0
        n0 = max(int(np.floor((start + fld.h - 2 * fld.dt_q) * fs)), 0)
        n1 = min(int(np.ceil((start + ks[-1] * fld.h + span) * fs)) + 1, n)
        tn = np.arange(n0, n1) / fs
        x = (tn[None, :] - start - ks[:, None] * fld.h) / fld.dt_q        # (K, T) coefficient positions
        j0, W = psi_weights(x)                                             # 4 overlapping pulses each
        j = j0[..., None] + np.arange(4)
        ok = (j >= 0) & (j < fld.n_coef)
        vals = np.where(ok, W * G[np.clip(j, 0, fld.n_coef - 1)], 0.0).sum(-1)   # q(t - kh - R/c), (K, T)
        y[n0:n1] += S @ vals
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impulses", type=int, default=200000)
    ap.add_argument("--ref-impulses", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fs", type=int, default=48000)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    fld = make_field()
    t = time.perf_counter()
    tab = PANTable.from_field(fld, a.fs)
    print(f"table: {tab.table.shape} built in {time.perf_counter() - t:.3f} s")
    n = int(a.seconds * a.fs)
    t0, tau, amp, xl = make_impulses(a.impulses, a.seconds)
    synthesize_pan(tab, t0[:10], tau[:10], amp[:10], xl[:10], n)            # JIT warm-up (cached)
    nt = a.threads or default_threads()
    best = np.inf
    tracemalloc.start()
    for _ in range(a.repeat):
        t = time.perf_counter()
        synthesize_pan(tab, t0, tau, amp, xl, n, n_threads=nt)
        best = min(best, time.perf_counter() - t)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rate = a.impulses / best
    print(f"kernel: {a.impulses} impulses, {nt} thread(s): {best:.3f} s -> {rate:.3g} impulses/s, "
          f"numpy peak {peak / 2**20:.1f} MiB")
    m = a.ref_impulses
    t = time.perf_counter()
    yr = numpy_reference(fld, t0[:m], tau[:m], amp[:m], xl[:m], a.fs, n)
    tr = time.perf_counter() - t
    rrate = m / tr
    yk = synthesize_pan(tab, t0[:m], tau[:m], amp[:m], xl[:m], n, n_threads=nt)
    rel = np.linalg.norm(yk - yr) / np.linalg.norm(yr)
    print(f"numpy reference: {m} impulses: {tr:.3f} s -> {rrate:.3g} impulses/s")
    print(f"ratio kernel / numpy: {rate / rrate:.1f}x   (goal >= 20x; >= 1e5 impulses/s)")
    print(f"relative difference kernel (band-limited) vs reference (point-sampled): {rel:.3f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
