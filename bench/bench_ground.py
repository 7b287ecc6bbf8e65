"""Benchmark: the ground's sound (Qu & James 2019, "Ground sound") from the response bank vs direct evaluation, side by
side in one run.

One listener at height h (default 0.35 m) over a wood floor (HalfSpace(11e9, 0.25, 750), Qu & James 2019 Table 1);
air c = 343.2 m/s, rho = 1.2041 kg/m^3; 48 kHz. N impacts (default 10,000) uniform in a disk of radius R (default
1 m) around the listener's foot, times uniform over 10 s, eps = t_c / 4 uniform in [1e-5, 1e-4] s, impulses
log-uniform in [1e-4, 1e-2] N s. Prints:

1. the bank's cold build (every node these offsets need, memory-only bank, after the Numba kernels are loaded),
   its node count and size in memory and on disk (the same nodes written to a temporary asset file);
2. rendering all N impacts from the bank: time and impacts/s (goal >= 1e4/s on 2 cores);
3. direct evaluation of a subset (default 20): the ring-by-ring Rayleigh spectrum at each impact's exact offset,
   same K4 kernel and roll-off as the bank, inverse FFT into the output (a copy of the unit test's reference),
   per-impact time and the ratio to the bank (goal >= 100x); and the time-domain Rayleigh integral of the
   closed-form surface motion (rayleigh_off_axis) for one impact, timed on a few output samples and extrapolated
   linearly to a bank block (n_fft samples; its cost is proportional to the number of samples);
4. the relative L2 error of each subset impact rendered alone from the bank against its direct evaluation (max and
   median; goal <= 1 %);
5. peak memory: tracemalloc's peak of the render (an untimed second run) and the process's peak RSS.

    .venv/bin/python bench/bench_ground.py [--impacts 10000] [--height 0.35] [--radius 1.0] [--subset 20]
                                           [--seed 0] [--repeat 3] [--td-samples 4]
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import shlex
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from impactsound.sources.ground import bank as B
from impactsound.sources.ground.impact import HalfSpace, rayleigh_off_axis, surface_motion
from impactsound.sources.ground.spectrum import ring_spectrum

WOOD = HalfSpace(11e9, 0.25, 750.0)
CA, RHOA = 343.2, 1.2041
FS = 48000
SECONDS = 10.0


def make_impacts(n, radius, seed):
    """Times [s], impulses [N s], eps [s] and horizontal offsets [m] of n impacts uniform in a disk."""
    rng = np.random.default_rng(seed)
    rho = radius * np.sqrt(rng.uniform(0.0, 1.0, n))                 # uniform over the disk's area
    t_m = rng.uniform(0.0, SECONDS, n)
    eps = rng.uniform(1e-5, 1e-4, n)
    J = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), n))
    return t_m, J, eps, rho


def roll_off(f, fs):
    """The bank's raised-cosine roll-off over the top 10 % below Nyquist."""
    nyq = fs / 2
    return np.where(f < 0.9 * nyq, 1.0, 0.5 * (1 + np.cos(np.pi * np.clip((f - 0.9 * nyq) / (0.1 * nyq), 0, 1))))


def direct(bank, t_m, J, eps, rho, n):
    """One impact straight from the ring spectrum at its exact offset (no bank, no split), same K4 kernel, roll-off
    and block placement as ResponseBank.render, into an output of n samples."""
    f = bank.freqs
    fs = bank.sample_rate
    near, far = ring_spectrum(f, bank.ground, bank.height, rho, r_max=rho + B.R_EXTRA, c_a=bank.c_a,
                              rho_a=bank.rho_a)
    n0 = int(np.floor(t_m * fs)) - B.PRE_SAMPLES
    spec = (near + far) * J * B.kernel_spectrum(f, eps) * roll_off(f, fs) * fs * np.exp(-2j * np.pi * f *
                                                                                         (t_m - n0 / fs))
    blk = np.fft.irfft(spec, bank.n_fft)
    out = np.zeros(n)
    a, b = max(n0, 0), min(n0 + bank.n_fft, n)
    out[a:b] = blk[a - n0:b - n0]
    return out


def time_domain_one(h, rho, eps, J, t):
    """Time-domain Rayleigh integral (Qu & James 2019) of the closed-form K4 surface acceleration, one impact at
    t_m = 0, at listener times t [s]."""
    return rayleigh_off_axis(lambda r, tt: surface_motion(r, tt, J, eps, WOOD), h, rho, t, r_max=rho + B.R_EXTRA,
                             r_scale=WOOD.c_s * eps, n_phi=128, c_a=CA, rho_a=RHOA)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impacts", type=int, default=10000)
    ap.add_argument("--height", type=float, default=0.35, help="listener height above the floor [m]")
    ap.add_argument("--radius", type=float, default=1.0, help="impacts uniform in a disk of this radius [m]")
    ap.add_argument("--subset", type=int, default=20, help="impacts evaluated directly (time and error)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many timed renders")
    ap.add_argument("--td-samples", type=int, default=4, help="output samples of the timed time-domain run")
    a = ap.parse_args()
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    h = a.height
    t_m, J, eps, rho = make_impacts(a.impacts, a.radius, a.seed)
    n_out = int(SECONDS * FS)
    print(f"ground sound (Qu & James 2019): {a.impacts} impacts, disk radius {a.radius} m, listener {h} m high, "
          f"wood E=11 GPa nu=0.25 rho=750, {FS} Hz, {SECONDS:.0f} s, eps in [10, 100] us, K4 kernel")

    # Numba kernels (cached on disk) and the first V table loaded outside the timings
    t0 = time.perf_counter()
    ring_spectrum(np.linspace(0, FS / 2, 9), WOOD, h, 0.1, r_max=0.2, c_a=CA, rho_a=RHOA, split_radius=0.05)
    t_jit = time.perf_counter() - t0

    # 1. cold build: memory-only bank, every node the offsets need
    bank = B.response_bank(WOOD, h, c_a=CA, rho_a=RHOA, sample_rate=FS, max_offset=float(rho.max()), cache=False)
    t0 = time.perf_counter()
    bank.ensure(rho)
    t_build = time.perf_counter() - t0
    n_nodes = len(bank.nodes)
    mem_mb = sum(v.nbytes for v in bank.nodes.values()) / 1e6
    with tempfile.TemporaryDirectory() as d:
        bank.path = Path(d) / "bank.h5"
        t0 = time.perf_counter()
        bank.save()
        t_save = time.perf_counter() - t0
        disk_mb = bank.path.stat().st_size / 1e6
        bank.path = None

    # 2. render all impacts from the bank
    bank.render(t_m[:64], J[:64], eps[:64], rho[:64], n_out)          # warm-up (page faults of the output)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        p = bank.render(t_m, J, eps, rho, n_out)
        times.append(time.perf_counter() - t0)
    t_render = min(times)
    per_bank = t_render / a.impacts

    # 3./4. direct evaluation of a subset, and each of those impacts alone from the bank
    sub = np.random.default_rng(a.seed + 1).choice(a.impacts, min(a.subset, a.impacts), replace=False)
    direct(bank, t_m[sub[0]], J[sub[0]], eps[sub[0]], rho[sub[0]], n_out)   # V tables etc. of the first call
    t_dir, errs = 0.0, []
    for k in sub:
        t0 = time.perf_counter()
        ref = direct(bank, t_m[k], J[k], eps[k], rho[k], n_out)
        t_dir += time.perf_counter() - t0
        one = bank.render([t_m[k]], [J[k]], [eps[k]], [rho[k]], n_out)
        errs.append(np.linalg.norm(one - ref) / np.linalg.norm(ref))
    per_dir = t_dir / len(sub)
    errs = np.array(errs)
    k = int(sub[np.argmax(errs)])

    # time domain: one impact (the median offset of the subset), a few samples around the direct arrival
    kt = int(sub[np.argsort(rho[sub])[len(sub) // 2]])
    tt = math.hypot(h, rho[kt]) / CA + np.arange(a.td_samples) / FS
    time_domain_one(h, rho[kt], eps[kt], J[kt], tt[:1])                # warm-up
    t0 = time.perf_counter()
    time_domain_one(h, rho[kt], eps[kt], J[kt], tt)
    t_td_run = time.perf_counter() - t0
    per_td = t_td_run / a.td_samples * bank.n_fft

    # 5. memory (untimed): tracemalloc's peak of a render; process peak RSS
    tracemalloc.start()
    bank.render(t_m, J, eps, rho, n_out)
    trace_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10

    print(f"  Numba kernels loaded (cache) + first V table: {t_jit:.2f} s (not counted below)")
    print(f"  bank: step {bank.step * 1e3:.2f} mm, n_fft {bank.n_fft} ({len(bank.freqs)} frequencies), "
          f"{n_nodes} nodes up to {max(bank.nodes) * bank.step:.3f} m")
    print(f"  {'':38s} {'time':>11s} {'per impact':>12s} {'impacts/s':>11s} {'vs bank':>9s}")
    print(f"  {'bank build (cold, ' + str(n_nodes) + ' nodes)':38s} {t_build:9.2f} s {t_build / n_nodes * 1e3:9.1f} "
          f"ms/node")
    print(f"  {'bank render (all ' + str(a.impacts) + ')':38s} {t_render:9.3f} s {per_bank * 1e6:9.1f} us "
          f"{1 / per_bank:11.0f} {1:8.0f}x")
    print(f"  {'bank build + render, amortised':38s} {t_build + t_render:9.2f} s "
          f"{(t_build + t_render) / a.impacts * 1e6:9.1f} us {a.impacts / (t_build + t_render):11.0f} "
          f"{(t_build + t_render) / a.impacts / per_bank:8.1f}x")
    print(f"  {'direct ring spectrum (' + str(len(sub)) + ' impacts)':38s} {t_dir:9.2f} s {per_dir * 1e3:9.1f} ms "
          f"{1 / per_dir:11.1f} {per_dir / per_bank:8.0f}x")
    print(f"  {'time-domain Rayleigh (1 impact, est.)':38s} {per_td:9.1f} s {per_td:10.1f} s "
          f"{1 / per_td:11.4f} {per_td / per_bank:8.0f}x")
    print(f"    (time domain: {a.td_samples} samples in {t_td_run:.2f} s at {rho[kt]:.3f} m off, n_phi 128; x "
          f"{bank.n_fft} / {a.td_samples} for a {bank.n_fft}-sample block)")
    print(f"    (render: best of {a.repeat}, runs " + ", ".join(f"{v:.3f}" for v in times) + " s; 1-min load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
    print(f"  bank size: {n_nodes} nodes, {mem_mb:.2f} MB in memory, {disk_mb:.2f} MB on disk (save {t_save:.2f} s)")
    print(f"  error bank vs direct ({len(sub)} impacts, relative L2): max {errs.max() * 100:.3f} %, median "
          f"{np.median(errs) * 100:.3f} % (max at {rho[k]:.3f} m off, eps {eps[k] * 1e6:.0f} us)")
    print(f"  peak memory: render traced {trace_peak:.0f} MiB (output {p.nbytes / 2**20:.1f} MiB), process RSS "
          f"{rss:.0f} MiB")
    print(f"  goals: render >= 1e4 impacts/s: {'met' if 1 / per_bank >= 1e4 else 'MISSED'} "
          f"({1 / per_bank:.0f}/s); >= 100x direct: {'met' if per_dir / per_bank >= 100 else 'MISSED'} "
          f"({per_dir / per_bank:.0f}x); error <= 1 %: {'met' if errs.max() <= 0.01 else 'MISSED'} "
          f"({errs.max() * 100:.3f} %)")


if __name__ == "__main__":
    main()
