"""Reduced thin-shell dynamics and the impulse limiter (Chadwick, An & James 2009, sec. 2.2-3, Algorithm 1).

References are independent of the code: closed-form solutions of the continuous oscillator, the closed-form
solution of the central-difference recurrence (characteristic roots), hand-solved limiter quadratics, and
numpy.roots.
"""
import logging
import math

import numpy as np
import pytest

from impactsound.errors import InputError
from impactsound.sources.shell import (BRANCH_SCALED, choose_rate, integrate, limit_impulse, newmark_stable_dt,
                                       step_linear)


def energy(q, v, lam, dv=None, a=0.0):
    vv = v if dv is None else v + a * dv
    return float(vv @ vv + q @ (lam * q))


# ---------------------------------------------------------------- limiter (Algorithm 1)

def test_limiter_full_when_below_emax():
    q, v, dv, lam = np.array([1e-3, 2e-3]), np.array([0.1, -0.2]), np.array([0.05, 0.05]), np.array([4.0, 9.0])
    e1 = energy(q, v, lam, dv, 1.0)
    assert limit_impulse(q, v, dv, lam, e1 * 1.01) == (1.0, "full")
    assert limit_impulse(q, v, dv, lam, e1) == (1.0, "full")          # E'(1) <= E_max, equality included


def test_limiter_full_when_impulse_removes_energy_even_above_emax():
    q, v, dv, lam = np.array([0.5]), np.array([1.0]), np.array([-0.5]), np.array([1.0])
    assert energy(q, v, lam) > 0.1                                   # E > E_max, but E'(1) = 0.5 < E = 1.25
    assert limit_impulse(q, v, dv, lam, 0.1) == (1.0, "full")


def test_limiter_zero_when_already_above_emax():
    q, v, dv, lam = np.array([0.5]), np.array([1.0]), np.array([0.5]), np.array([1.0])
    assert limit_impulse(q, v, dv, lam, 1.0) == (0.0, "zero")        # E = 1.25 > 1, E'(1) = 2.5 > E


@pytest.mark.parametrize("v, dv, e_max, alpha_ref", [
    (1.0, 3.0, 4.0, 1.0 / 3.0),                                      # (1 + 3a)^2 = 4
    (1.0, -3.0, 2.0, (1.0 + math.sqrt(2.0)) / 3.0),                  # (1 - 3a)^2 = 2, the root in [0, 1]
    (0.0, 2.0, 1.0, 0.5),                                            # (2a)^2 = 1
])
def test_limiter_scaled_matches_hand_solution(v, dv, e_max, alpha_ref):
    a, branch = limit_impulse([0.0], [v], [dv], [1.0], e_max)
    assert branch == "scaled"
    assert a == pytest.approx(alpha_ref, rel=1e-14)


def test_limiter_scaled_random_hits_emax_and_stays_in_unit_interval():
    rng = np.random.default_rng(3)
    for _ in range(200):
        r = 7
        q, v, dv = rng.normal(size=r), rng.normal(size=r), 3 * rng.normal(size=r)
        lam = rng.uniform(0.5, 5.0, r)
        e0, e1 = energy(q, v, lam), energy(q, v, lam, dv, 1.0)
        if e1 <= e0:
            continue
        e_max = e0 + rng.uniform(0.01, 0.99) * (e1 - e0)
        a, branch = limit_impulse(q, v, dv, lam, e_max)
        assert branch == "scaled" and 0.0 <= a <= 1.0
        assert energy(q, v, lam, dv, a) == pytest.approx(e_max, rel=1e-12)
        roots = np.roots([dv @ dv, 2 * v @ dv, e0 - e_max])             # independent root finder
        ref = roots[(roots.real >= 0) & (roots.real <= 1)].real
        assert len(ref) == 1 and a == pytest.approx(ref[0], rel=1e-9)


def test_limiter_root_is_free_of_cancellation():
    # (1e8 + a)^2 = 1e16 + 2  ->  a = 1e-8 - 5e-25...; the textbook formula (-b + sqrt(b^2 - 4ac)) / 2a loses all
    # digits here.
    a, branch = limit_impulse([0.0], [1e8], [1.0], [1.0], 1e16 + 2.0)
    assert branch == "scaled"
    assert a == pytest.approx(1e-8, rel=1e-12)


def test_limiter_exact_boundary_gives_reported_zero():
    a, branch = limit_impulse([0.0], [1.0], [1.0], [1.0], 1.0)       # E == E_max, impulse adds energy
    assert a == 0.0 and branch == "scaled"


def test_limiter_rejects_nan():
    with pytest.raises(InputError):
        limit_impulse([np.nan], [1.0], [1.0], [1.0], 1.0)


# ---------------------------------------------------------------- undamped: dispersion, energy

def discrete_free(q0, q1, theta, n):
    """Closed-form solution of q_{k+1} = 2 cos(theta) q_k - q_{k-1} from q_0, q_1."""
    k = np.arange(n + 1)[:, None]
    return q0 * np.cos(k * theta) + (q1 - q0 * np.cos(theta)) / np.sin(theta) * np.sin(k * theta)


def test_undamped_matches_central_difference_dispersion_relation():
    omega = 2 * np.pi * np.array([110.0, 1000.0, 7000.0, 15000.0])
    dt = 1.0 / 48000
    q0, v0 = np.array([1e-3, -2e-3, 5e-4, 1e-4]), np.array([0.3, 0.0, -1.0, 2.0])
    n = 20000
    run = integrate(q0, v0, dt, n, omega=omega)
    theta = 2 * np.arcsin(omega * dt / 2)                            # omega_d dt, omega_d = (2/dt) asin(omega dt/2)
    q1 = q0 + dt * v0 - 0.5 * dt**2 * omega**2 * q0                  # first step (Taylor, exact for the scheme)
    ref = discrete_free(q0, q1, theta, n)
    amp = np.sqrt(q0**2 + (v0 / omega) ** 2)
    assert np.max(np.abs(run.q - ref) / amp) < 1e-10
    # the pitch really is the discrete one, not the exact omega: the phase error is visible
    exact = q0 * np.cos(omega * dt * np.arange(n + 1)[:, None]) + v0 / omega * np.sin(omega * dt *
                                                                                        np.arange(n + 1)[:, None])
    assert np.max(np.abs(run.q[:, 3] - exact[:, 3]) / amp[3]) > 1e-2


def test_undamped_energy_bounded_and_modified_energy_conserved():
    omega = 2 * np.pi * np.array([200.0, 1000.0, 5000.0])
    dt = 1.0 / 48000
    n = 100_000
    run = integrate([1e-3, 0.0, 2e-4], [0.0, 1.0, 0.5], dt, n, omega=omega, keep_velocity=True)
    q, v = run.q, run.v_history
    big_omega2 = (omega * dt) ** 2
    h_mod = v**2 + omega**2 * (1 - big_omega2 / 4) * q**2            # exact discrete invariant
    assert np.max(np.abs(h_mod / h_mod[0] - 1)) < 1e-10
    e = v**2 + omega**2 * q**2                                       # physical (x2) energy: bounded oscillation
    rel = e / h_mod[0] - 1
    assert np.all(rel >= -1e-10)
    assert np.all(rel <= 1 / (1 - big_omega2 / 4) - 1 + 1e-10)
    assert np.max(np.abs(rel[:, 0])) < 1e-3


# ---------------------------------------------------------------- damped

def test_damped_matches_discrete_solution_and_decay_rate():
    omega, alpha, beta, dt = 2 * np.pi * 800.0, 30.0, 2e-6, 1.0 / 48000
    c = alpha + beta * omega**2
    q0, v0 = 1e-3, 2.0
    n = 5000
    run = integrate([q0], [v0], dt, n, omega=[omega], alpha=alpha, beta=beta)
    # characteristic roots of (1 + a) z^2 - (2 - W^2) z + (1 - a)
    a, w2dt2 = c * dt / 2, (omega * dt) ** 2
    z = np.roots([1 + a, -(2 - w2dt2), 1 - a])
    q1 = q0 + dt * v0 + 0.5 * dt**2 * (-c * v0 - omega**2 * q0)
    coef = np.linalg.solve(np.array([[1, 1], z], dtype=complex), [q0, q1])
    k = np.arange(n + 1)
    ref = (coef[0] * z[0] ** k + coef[1] * z[1] ** k).real
    assert np.max(np.abs(run.q[:, 0] - ref)) < 1e-10 * np.hypot(q0, v0 / omega)
    # decay rate of the scheme: -ln|z| / dt = atanh(a) / dt, vs the exact c/2 (second order)
    assert -np.log(abs(z[0])) / dt == pytest.approx(math.atanh(a) / dt, rel=1e-12)


def test_damped_converges_at_second_order_to_exact_solution():
    omega, alpha, beta = 2 * np.pi * 500.0, 40.0, 1e-6
    c = alpha + beta * omega**2
    wd = math.sqrt(omega**2 - c**2 / 4)
    q0, v0, t_end = 1e-3, 0.5, 0.02

    def exact(t):
        return np.exp(-c * t / 2) * (q0 * np.cos(wd * t) + (v0 + c * q0 / 2) / wd * np.sin(wd * t))

    errs, rate_errs = [], []
    for rate in (24000, 48000, 96000):
        dt = 1.0 / rate
        n = round(t_end * rate)
        run = integrate([q0], [v0], dt, n, omega=[omega], alpha=alpha, beta=beta)
        errs.append(np.max(np.abs(run.q[:, 0] - exact(np.arange(n + 1) * dt))))
        rate_errs.append(abs(math.atanh(c * dt / 2) / dt - c / 2))
    for e in (errs, rate_errs):
        assert 3.6 < e[0] / e[1] < 4.4 and 3.6 < e[1] / e[2] < 4.4


# ---------------------------------------------------------------- stability limit

@pytest.mark.parametrize("alpha, beta", [(0.0, 0.0), (10.0, 1e-7)])
def test_stability_limit_is_sharp(alpha, beta):
    omega = np.array([300.0, 1000.0])
    lim = newmark_stable_dt(omega.max(), alpha, beta)
    assert lim == pytest.approx(2e-3, rel=1e-15)
    q0, v0 = np.array([1e-3, 1e-3]), np.array([0.0, 0.0])
    dt = 0.99 * lim
    run = integrate(q0, v0, dt, 10_000, omega=omega, alpha=alpha, beta=beta)
    big = omega[1] * dt
    bound = 1e-3 / math.sqrt(1 - big**2 / 4)                         # from the conserved modified energy
    assert np.max(np.abs(run.q[:, 1])) <= bound * (1 + 1e-9)
    # above the limit: the raw stepper blows up, integrate refuses
    q, v = q0.copy(), v0.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(10_000):
            q, v = step_linear(q, v, 1.01 * lim, omega, alpha, beta)
    assert not np.isfinite(q[1]) or abs(q[1]) > 1e100
    with pytest.raises(InputError, match="largest stable dt"):
        integrate(q0, v0, 1.01 * lim, 10, omega=omega, alpha=alpha, beta=beta)


def test_step_linear_equals_integrate():
    omega = np.array([300.0, 1000.0])
    q, v = np.array([1e-3, -1e-3]), np.array([0.2, 0.1])
    run = integrate(q, v, 1e-4, 50, omega=omega, alpha=3.0, beta=1e-6)
    for _ in range(50):
        q, v = step_linear(q, v, 1e-4, omega, 3.0, 1e-6)
    np.testing.assert_allclose(run.q[-1], q, rtol=1e-13, atol=0)
    np.testing.assert_allclose(run.v, v, rtol=1e-13, atol=0)


def test_choose_rate_reproduces_paper_rates():
    # Chadwick, An & James 2009, Table 1 / sec. 5: cymbal (top mode 9.94 kHz) at 88.2 kHz, trash can (4.43 kHz) and
    # water bottle (3.59 kHz) at 44.1 kHz.
    assert choose_rate(2 * np.pi * 9940, 1.0, 6.25e-9, base_rate=44100) == 88200
    assert choose_rate(2 * np.pi * 4430, 0.5, 75e-9, base_rate=44100) == 44100
    assert choose_rate(2 * np.pi * 3590, 0.5, 400e-9, base_rate=44100) == 44100
    assert choose_rate(2 * np.pi * 1000) == 48000
    # omega_max dt <= 2 * safety at the chosen rate, and not at the next lower multiple
    w = 2 * np.pi * 20000
    rate = choose_rate(w, base_rate=48000)
    assert rate == 3 * 48000 and w / rate <= 1.0 < w / (2 * 48000)
    with pytest.raises(InputError):
        newmark_stable_dt(1000.0, -1.0, 0.0)


# ---------------------------------------------------------------- nonlinear callable, forces, limiter in runs

def test_small_amplitude_nonlinear_equals_linear():
    omega = 2 * np.pi * np.array([150.0, 420.0, 900.0])
    w2 = omega**2
    amp = 1e-3                                                       # [m sqrt(kg)]
    cubic = 1e-10 * w2 / amp**2                                      # c q^3 / (w^2 q) ~ 1e-10 at this amplitude
    q0, v0 = amp * np.array([1.0, -0.5, 0.3]), np.zeros(3)
    dt, n = 1.0 / 48000, 4800
    lin = integrate(q0, v0, dt, n, omega=omega, alpha=2.0, beta=1e-7)
    nl = integrate(q0, v0, dt, n, omega=omega, alpha=2.0, beta=1e-7, f_int=lambda q: w2 * q + cubic * q**3)
    scale = np.max(np.abs(lin.q), axis=0)
    assert np.max(np.abs(nl.q - lin.q) / scale) < 1e-6
    assert np.max(np.abs(nl.q - lin.q) / scale) > 0                  # the cubic term did act
    # the Python path with a linear callable reproduces the compiled kernel
    py = integrate(q0, v0, dt, n, omega=omega, alpha=2.0, beta=1e-7, f_int=lambda q: w2 * q)
    np.testing.assert_allclose(py.q, lin.q, rtol=0, atol=1e-14 * scale.max())


def test_limited_forcing_reports_zero_impulses_and_paths_agree(caplog):
    omega = 2 * np.pi * np.array([200.0, 700.0])
    dt, n = 1.0 / 48000, 400
    forces = np.zeros((n, 2))
    forces[:200] = [3.0e3, -1.0e3]                                   # long push: energy grows to e_max
    e_max = 1.0
    with caplog.at_level(logging.WARNING, logger="impactsound"):
        run = integrate([0, 0], [0, 0], dt, n, omega=omega, forces=forces, e_max=e_max, keep_velocity=True)
    assert np.all((run.alphas >= 0) & (run.alphas <= 1))
    assert run.n_scaled >= 1 and np.any(run.branches == BRANCH_SCALED)
    assert run.n_zero >= 1 and "scaled to zero" in caplog.text
    assert np.all(run.alphas[200:] == 1.0)                           # no load: nothing counted as dropped
    # energy right after a scaled kick equals e_max
    k = int(np.flatnonzero(run.branches == BRANCH_SCALED)[0])
    vk = run.v_history[k] + run.alphas[k] * dt * forces[k]
    assert energy(run.q[k], vk, omega**2) == pytest.approx(e_max, rel=1e-12)
    # callable forces (Python loop) give the same run
    run2 = integrate([0, 0], [0, 0], dt, n, omega=omega, forces=lambda i, t, q, v: forces[i], e_max=e_max)
    # (summation order differs between the paths; the limiter's square root near its boundary amplifies round-off)
    np.testing.assert_allclose(run2.q, run.q, rtol=0, atol=1e-9 * np.abs(run.q).max())
    np.testing.assert_array_equal(run2.branches, run.branches)
    # without limiter: no scaling
    free = integrate([0, 0], [0, 0], dt, n, omega=omega, forces=forces)
    assert free.n_zero == 0 and free.n_scaled == 0 and np.all(free.alphas == 1)


def test_output_projection():
    omega = np.array([500.0, 900.0])
    P = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]])
    full = integrate([1e-3, 2e-3], [0.1, 0.0], 1e-4, 100, omega=omega)
    proj = integrate([1e-3, 2e-3], [0.1, 0.0], 1e-4, 100, omega=omega, output=P)
    np.testing.assert_allclose(proj.q, full.q @ P.T, rtol=1e-13, atol=1e-18)


# ---------------------------------------------------------------- bad input

def test_bad_input():
    omega = [1000.0]
    with pytest.raises(InputError, match=r"largest stable dt.*0\.002"):
        integrate([0.0], [0.0], 3e-3, 10, omega=omega)
    with pytest.raises(InputError):
        integrate([0.0], [0.0], 2e-3, 10, omega=omega)               # exactly at the limit: marginal, refused
    for dt in (0.0, -1e-4, np.nan):
        with pytest.raises(InputError, match="positive"):
            integrate([0.0], [0.0], dt, 10, omega=omega)
    with pytest.raises(InputError, match="NaN"):
        integrate([np.nan], [0.0], 1e-4, 10, omega=omega)
    with pytest.raises(InputError, match="NaN"):
        integrate([0.0], [np.inf], 1e-4, 10, omega=omega)
    with pytest.raises(InputError):
        integrate([0.0], [0.0], 1e-4, 3, omega=omega, forces=np.zeros((2, 1)))
    with pytest.raises(InputError):
        integrate([0.0], [0.0], 1e-4, 3, omega=[0.0])


def test_nonlinear_blow_up_raises_solver_error():
    from impactsound.errors import SolverError
    w2 = np.array([1000.0]) ** 2
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(SolverError, match="non-finite"):
        integrate([1.0], [0.0], 1e-3, 2000, omega=[1000.0], f_int=lambda q: w2 * q + 1e7 * q**3)
