"""Reduced (modal-subspace) dynamics of a thin shell and the impulse limiter.

Chadwick, An & James 2009, "Harmonic Shells: A Practical Nonlinear Sound Model for Near-Rigid Thin Shells",
sec. 2.2 (reduced equations), sec. 2.3 (explicit subspace Newmark at audio rate) and sec. 3, Algorithm 1
(impulse limiter).

Model. With mass-normalised linear modes U (U^T M U = I, U^T K U = Lambda = diag(omega^2)) and u = U q,
    q'' + D q' + f_int(q) = f_ext,     D = alpha I + beta Lambda                 (sec. 2.2)
Units (SI): u [m]; U [1/sqrt(kg)]; q [m sqrt(kg)]; q' [m sqrt(kg)/s]; omega [rad/s]; alpha [1/s]; beta [s];
f_int, f_ext (modal forces, U^T times nodal forces [N]) [N/sqrt(kg)]; dt [s]. Linear case: f_int(q) = Lambda q
(decoupled oscillators). How a nonlinear f_int is computed is not this module's concern: any callable
q -> f_int(q) is accepted.

Time stepper (the variant, exactly). Newmark with beta_N = 0, gamma_N = 1/2 (explicit central difference), the
damping term taken at the new velocity, which is explicit here because D is diagonal. With a_n = -D v_n - f_int(q_n):
    q_{n+1} = q_n + dt v_n + dt^2/2 a_n
    v_{n+1} = [v_n + dt/2 a_n - dt/2 f_int(q_{n+1})] / (1 + dt/2 d)          (d = diag(D), per mode)
Eliminating v gives the three-level central difference with centred damping,
    (q_{n+1} - 2 q_n + q_{n-1}) / dt^2 + D (q_{n+1} - q_{n-1}) / (2 dt) + f_int(q_n) = 0,
and v_n = (q_{n+1} - q_{n-1}) / (2 dt) exactly (central-difference velocity). Both q and v are second-order
accurate. One f_int evaluation per step (f_int(q_{n+1}) is reused as f_int(q_n) of the next step).

Linear stability (derived for this variant). Per mode, with Omega = omega dt and a = (alpha + beta omega^2) dt / 2,
the characteristic polynomial is (1 + a) z^2 - (2 - Omega^2) z + (1 - a). Schur-Cohn: p(1) = Omega^2 > 0,
|1 - a| <= 1 + a for any a >= 0, p(-1) = 4 - Omega^2 >= 0. Hence the scheme is stable iff omega_max dt < 2 for
every alpha, beta >= 0 (at omega dt = 2 the undamped mode has a double root z = -1 and grows linearly, so the bound
is strict). Damping does not change the limit because it is centred; the variant with lagged damping (v_n in the
damping term) would have the smaller limit (2 / omega) (sqrt(1 + xi^2) - xi), xi = (alpha + beta omega^2) / (2 omega).
Undamped dispersion: cos(omega_d dt) = 1 - Omega^2 / 2, i.e. omega_d = (2 / dt) asin(omega dt / 2) (pitch goes up
by ~ Omega^2 / 24 relative). Damped decay rate per unit time: atanh(a) / dt versus the exact (alpha + beta omega^2)/2.
Undamped invariant: v_n^2 + omega^2 (1 - Omega^2 / 4) q_n^2 is conserved exactly (up to round-off).
The nonlinear f_int stiffens the system, so the audio rate needs a margin (the paper integrated the cymbal at
88.2 kHz instead of 44.1 kHz, sec. 5): see :func:`choose_rate`.

External forces and the impulse limiter (Chadwick, An & James 2009, sec. 3, Algorithm 1). The external load of
step n is applied as a velocity impulse at t_n = n dt, dq'_n = dt f_ext[n], scaled by alpha_n in [0, 1] from
Algorithm 1 (alpha_n = 1 without a limiter), before the free step from t_n to t_{n+1}:
    v_n <- v_n + alpha_n dq'_n,  then the Newmark step above.
The energy measure of eqs. 15-16 is E = q'^T q' + q^T Lambda q = u'^T M u' + u^T K u, i.e. TWICE the kinetic plus
(linearised) potential energy [J]; E_max = sigma M_total [J] with sigma [J/kg] (the paper's "energy per unit mass",
typically 1-4) compared with E as the paper does, so the physical energy is held below sigma M_total / 2.

Performance. The linear case (f_int = None) runs in a compiled Numba kernel (loop over steps, modes innermost).
With a callable f_int or a callable force the step loop is Python, each step vectorised over modes (the callable
dominates the cost anyway).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

from impactsound.errors import InputError, SolverError

log = logging.getLogger("impactsound")

#: branch codes of Algorithm 1 (Chadwick, An & James 2009, sec. 3)
BRANCH_FULL = 0      # E'(1) <= E_max or E'(1) < E: alpha = 1
BRANCH_ZERO = 1      # E > E_max: alpha = 0
BRANCH_SCALED = 2    # E'(alpha*) = E_max solved for alpha* in [0, 1]
BRANCH_NAMES = ("full", "zero", "scaled")


# ----------------------------------------------------------------------------------------------------------------
# stability and rate
# ----------------------------------------------------------------------------------------------------------------

def _check_damping(alpha: float, beta: float) -> None:
    for name, val in (("alpha", alpha), ("beta", beta)):
        if not (np.isfinite(val) and val >= 0.0):
            raise InputError(f"Rayleigh damping {name} must be finite and >= 0 (got {val!r}).")


def newmark_stable_dt(omega_max: float, alpha: float = 0.0, beta: float = 0.0) -> float:
    """Supremum of stable steps [s] of the explicit central-difference Newmark of this module, linear system.

    The run is stable for dt < 2 / omega_max, for any alpha, beta >= 0 (centred damping; see the module docstring
    for the derivation). omega_max [rad/s] is the highest kept modal angular frequency.
    """
    omega_max = float(omega_max)
    if not (np.isfinite(omega_max) and omega_max > 0.0):
        raise InputError(f"omega_max must be a finite positive angular frequency in rad/s (got {omega_max!r}).")
    _check_damping(alpha, beta)
    return 2.0 / omega_max


def choose_rate(omega_max: float, alpha: float = 0.0, beta: float = 0.0, base_rate: float = 48000.0,
                safety: float = 0.5, max_factor: int = 64) -> float:
    """Smallest k * base_rate [Hz] (k = 1, 2, 3, ...) whose step 1/(k base_rate) <= safety * newmark_stable_dt.

    The margin (default 0.5, i.e. omega_max dt <= 1) leaves room for the stiffening of the nonlinear f_int; with
    base_rate = 44100 it reproduces the paper's choices (Chadwick, An & James 2009, sec. 5): 44.1 kHz for the trash
    can (4.43 kHz top mode), 88.2 kHz for the cymbal (9.94 kHz top mode).
    """
    if not (np.isfinite(base_rate) and base_rate > 0):
        raise InputError(f"base_rate must be a positive sample rate in Hz (got {base_rate!r}).")
    if not (0.0 < safety <= 1.0):
        raise InputError(f"safety must be in (0, 1] (got {safety!r}).")
    dt_max = safety * newmark_stable_dt(omega_max, alpha, beta)
    k = max(1, math.ceil(1.0 / (dt_max * base_rate) - 1e-12))
    if k > max_factor:
        raise InputError(f"the highest mode (omega_max = {omega_max:g} rad/s) needs a rate of at least "
                         f"{1.0 / dt_max:g} Hz, more than {max_factor} x base_rate = {max_factor * base_rate:g} Hz; "
                         "drop the highest modes or raise max_factor.")
    return float(k * base_rate)


# ----------------------------------------------------------------------------------------------------------------
# impulse limiter (Algorithm 1)
# ----------------------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _limiter_alpha(vv, vdv, dvdv, pot, e_max):
    """Algorithm 1 of Chadwick, An & James 2009 (sec. 3) from the dot products; returns (alpha, branch code).

    E = vv + pot, E'(a) = vv + 2 a vdv + a^2 dvdv + pot. A zero impulse (dvdv == 0) is reported as "full": there
    is nothing to scale, and a step without load must not count as a dropped impulse.
    """
    if dvdv == 0.0:
        return 1.0, 0
    e0 = vv + pot
    e1 = e0 + 2.0 * vdv + dvdv
    if e1 <= e_max or e1 < e0:
        return 1.0, 0
    if e0 > e_max:
        return 0.0, 1
    # Here E <= E_max < E'(1) and E'(1) >= E, so dvdv > 0 and E'(a) - E_max = dvdv a^2 + 2 vdv a + c, c <= 0:
    # the roots have product c / dvdv <= 0, the non-negative one is the only root in [0, 1] (E'(0) <= E_max <
    # E'(1)). Closed form without cancellation: a* = (-vdv + s) / dvdv if vdv <= 0, else -c / (vdv + s).
    c = e0 - e_max
    disc = vdv * vdv - dvdv * c
    s = math.sqrt(disc if disc > 0.0 else 0.0)
    if vdv <= 0.0:
        a = (s - vdv) / dvdv
    else:
        a = -c / (vdv + s)
    if a < 0.0:
        a = 0.0
    elif a > 1.0:
        a = 1.0
    return a, 2


def limit_impulse(q, v, dv, Lambda, E_max) -> tuple[float, str]:
    """Scale factor alpha in [0, 1] for the velocity impulse dv (Chadwick, An & James 2009, sec. 3, Algorithm 1).

    q [m sqrt(kg)], v and dv [m sqrt(kg)/s] modal state and impulse; Lambda = omega^2 [1/s^2] (diagonal, given as a
    vector); E_max [J] (= sigma M_total, compared with E = v.v + q.Lambda q, twice the physical energy).
    Returns (alpha, branch) with branch "full" (alpha = 1), "zero" (E > E_max: alpha = 0, the impulse is dropped;
    callers must report it) or "scaled" (E'(alpha) = E_max; alpha may still be 0 when E == E_max exactly).
    """
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    dv = np.asarray(dv, float)
    lam = np.asarray(Lambda, float)
    for name, arr in (("q", q), ("v", v), ("dv", dv), ("Lambda", lam)):
        if not np.all(np.isfinite(arr)):
            raise InputError(f"limit_impulse: {name} contains NaN or inf.")
    if not (q.shape == v.shape == dv.shape == lam.shape and q.ndim == 1):
        raise InputError("limit_impulse: q, v, dv and Lambda must be 1-D arrays of the same length "
                         f"(got {q.shape}, {v.shape}, {dv.shape}, {lam.shape}).")
    E_max = float(E_max)
    if np.isnan(E_max) or E_max < 0:
        raise InputError(f"limit_impulse: E_max must be >= 0 J (got {E_max!r}).")
    a, code = _limiter_alpha(float(v @ v), float(v @ dv), float(dv @ dv), float(q @ (lam * q)), E_max)
    return float(a), BRANCH_NAMES[code]


# ----------------------------------------------------------------------------------------------------------------
# stepping
# ----------------------------------------------------------------------------------------------------------------

def step_linear(q, v, dt, omega, alpha=0.0, beta=0.0):
    """One free step of the linear system (f_int = Lambda q), vectorised over modes; returns new (q, v).

    Low level and unchecked (no stability or input validation): use :func:`integrate` for runs.
    """
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    w2 = np.asarray(omega, float) ** 2
    d = alpha + beta * w2
    a = -d * v - w2 * q
    q1 = q + dt * v + 0.5 * dt * dt * a
    v1 = (v + 0.5 * dt * a - 0.5 * dt * w2 * q1) / (1.0 + 0.5 * dt * d)
    return q1, v1


@njit(cache=True, nogil=True)
def _run_linear(q, v, dt, w2, d, forces, e_max, proj, project, out, v_out, keep_v, alphas, branches):
    """Compiled linear run: impulse (limited) at t_n, then the central-difference Newmark step; modes innermost."""
    r = q.shape[0]
    n_steps = alphas.shape[0]
    have_f = forces.shape[0] > 0
    h = 0.5 * dt
    fint = np.empty(r)
    dv = np.empty(r)
    for i in range(r):
        fint[i] = w2[i] * q[i]
    for n in range(n_steps + 1):
        # record state n
        if project:
            for k in range(proj.shape[0]):
                s = 0.0
                for i in range(r):
                    s += proj[k, i] * q[i]
                out[n, k] = s
        else:
            for i in range(r):
                out[n, i] = q[i]
        if keep_v:
            for i in range(r):
                v_out[n, i] = v[i]
        if n == n_steps:
            break
        # impulse at t_n (Algorithm 1)
        if have_f:
            vv = 0.0
            vdv = 0.0
            dvdv = 0.0
            pot = 0.0
            for i in range(r):
                dv[i] = dt * forces[n, i]
                vv += v[i] * v[i]
                vdv += v[i] * dv[i]
                dvdv += dv[i] * dv[i]
                pot += q[i] * fint[i]
            a, code = _limiter_alpha(vv, vdv, dvdv, pot, e_max)
            alphas[n] = a
            branches[n] = code
            for i in range(r):
                v[i] += a * dv[i]
        else:
            alphas[n] = 1.0
            branches[n] = 0
        # free step
        for i in range(r):
            acc = -d[i] * v[i] - fint[i]
            q[i] += dt * v[i] + h * dt * acc
            fint[i] = w2[i] * q[i]
            v[i] = (v[i] + h * acc - h * fint[i]) / (1.0 + h * d[i])


@dataclass
class ShellRun:
    """Result of :func:`integrate`.

    q: (n_steps + 1, r) modal displacements at t_n = n dt [m sqrt(kg)], or (n_steps + 1, m) = q_n @ output.T when an
    output projection was given. v: final modal velocity (r,). v_history: (n_steps + 1, r) or None.
    alphas, branches: per-step limiter scale and branch code (BRANCH_FULL / BRANCH_ZERO / BRANCH_SCALED).
    n_zero: steps whose impulse was nonzero but scaled to zero (dropped); n_scaled: steps with 0 < alpha < 1.
    """
    q: np.ndarray
    v: np.ndarray
    v_history: np.ndarray | None
    alphas: np.ndarray
    branches: np.ndarray
    n_zero: int
    n_scaled: int


def _as_state(x, r, name):
    x = np.array(x, dtype=float, copy=True).reshape(-1)
    if x.shape != (r,):
        raise InputError(f"{name} must have one entry per mode ({r}), got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{name} contains NaN or inf.")
    return x


def integrate(q0, v0, dt: float, n_steps: int, *, omega, alpha: float = 0.0, beta: float = 0.0,
              f_int: Callable[[np.ndarray], np.ndarray] | None = None,
              forces=None, e_max: float | None = None, output=None, keep_velocity: bool = False) -> ShellRun:
    """Integrate q'' + (alpha + beta Lambda) q' + f_int(q) = f_ext over n_steps steps of dt [s].

    Chadwick, An & James 2009, sec. 2.2-2.3 (explicit subspace Newmark) and sec. 3, Algorithm 1 (limiter).
    q0 [m sqrt(kg)], v0 [m sqrt(kg)/s]: initial modal state (r,). omega [rad/s]: (r,) modal angular frequencies
    (Lambda = omega^2). f_int: None for the linear case (Lambda q, compiled kernel), or a callable returning the
    (r,) modal internal force [N/sqrt(kg)] (Python loop over steps, vectorised over modes).
    forces: None, an (n_steps, r) array of modal forces [N/sqrt(kg)] (row n gives the impulse dt * forces[n]
    applied at t_n), or a callable (n, t_n, q_n, v_n) -> (r,) force. e_max [J]: limiter bound (None: no limiter).
    output: optional (m, r) matrix; the history then holds output @ q_n instead of q_n.
    Raises InputError for dt >= 2 / max(omega) (the message gives the largest stable dt), dt <= 0, NaN input;
    SolverError if the state becomes non-finite (nonlinear stiffening beyond the stable step).
    """
    omega = np.asarray(omega, dtype=float).reshape(-1)
    r = omega.size
    if r == 0 or not np.all(np.isfinite(omega)) or np.any(omega <= 0):
        raise InputError("omega must be a non-empty array of finite positive angular frequencies [rad/s] "
                         "(drop rigid-body modes).")
    _check_damping(alpha, beta)
    dt = float(dt)
    if not (np.isfinite(dt) and dt > 0.0):
        raise InputError(f"time step dt must be a finite positive number of seconds (got {dt!r}).")
    dt_max = newmark_stable_dt(float(omega.max()), alpha, beta)
    if dt >= dt_max:
        raise InputError(f"time step dt = {dt:.6g} s is not stable for the explicit central-difference Newmark: "
                         f"the largest stable dt is below 2/omega_max = {dt_max:.6g} s (omega_max = "
                         f"{omega.max():.6g} rad/s); use choose_rate() or drop the highest modes.")
    n_steps = int(n_steps)
    if n_steps < 0:
        raise InputError(f"n_steps must be >= 0 (got {n_steps}).")
    q = _as_state(q0, r, "q0")
    v = _as_state(v0, r, "v0")
    if e_max is None:
        e_lim = np.inf
    else:
        e_lim = float(e_max)
        if np.isnan(e_lim) or e_lim < 0:
            raise InputError(f"e_max must be >= 0 J (got {e_max!r}).")
    f_arr = None
    if forces is not None and not callable(forces):
        f_arr = np.ascontiguousarray(forces, dtype=float)
        if f_arr.shape != (n_steps, r):
            raise InputError(f"forces must have shape (n_steps, r) = ({n_steps}, {r}), got {f_arr.shape}.")
        if not np.all(np.isfinite(f_arr)):
            raise InputError("forces contain NaN or inf.")
    project = output is not None
    if project:
        proj = np.ascontiguousarray(output, dtype=float)
        if proj.ndim != 2 or proj.shape[1] != r or not np.all(np.isfinite(proj)):
            raise InputError(f"output must be a finite (m, {r}) matrix, got shape {np.shape(output)}.")
    else:
        proj = np.zeros((1, r))
    w2 = omega * omega
    d = alpha + beta * w2
    out = np.empty((n_steps + 1, proj.shape[0] if project else r))
    v_hist = np.empty((n_steps + 1, r)) if keep_velocity else np.empty((1, r))
    alphas = np.ones(n_steps)
    branches = np.zeros(n_steps, dtype=np.int8)

    if f_int is None and not callable(forces):
        fa = f_arr if f_arr is not None else np.zeros((0, r))
        _run_linear(q, v, dt, w2, d, fa, e_lim, proj, project, out, v_hist, keep_velocity, alphas, branches)
    else:
        _run_python(q, v, dt, n_steps, w2, d, f_int, forces, f_arr, e_lim, proj if project else None, out,
                    v_hist if keep_velocity else None, alphas, branches)
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(v))):
        raise SolverError("the shell state became non-finite: the step is too large for the (stiffened) nonlinear "
                          "system; raise the rate (choose_rate with a smaller safety) or lower e_max.")
    zero = (branches != BRANCH_FULL) & (alphas == 0.0)
    n_zero = int(np.count_nonzero(zero))
    n_scaled = int(np.count_nonzero((alphas > 0.0) & (alphas < 1.0)))
    if n_zero:
        log.warning("impulse limiter: %d of %d impulses scaled to zero (energy above e_max = %g J)",
                    n_zero, n_steps, e_lim)
    return ShellRun(q=out, v=v, v_history=v_hist if keep_velocity else None, alphas=alphas, branches=branches,
                    n_zero=n_zero, n_scaled=n_scaled)


def _run_python(q, v, dt, n_steps, w2, d, f_int, forces, f_arr, e_lim, proj, out, v_hist, alphas, branches):
    """Python step loop (callable f_int or callable forces); each step vectorised over modes."""
    r = q.size
    h = 0.5 * dt

    def fint_of(x):
        if f_int is None:
            return w2 * x
        f = np.asarray(f_int(x), dtype=float)
        if f.shape != (r,):
            raise InputError(f"f_int must return one force per mode ({r}), got shape {f.shape}.")
        return f

    fint = fint_of(q)
    for n in range(n_steps + 1):
        out[n] = q if proj is None else proj @ q
        if v_hist is not None:
            v_hist[n] = v
        if n == n_steps:
            break
        if f_arr is not None:
            f = f_arr[n]
        elif forces is not None:
            f = np.asarray(forces(n, n * dt, q.copy(), v.copy()), dtype=float)
            if f.shape != (r,) or not np.all(np.isfinite(f)):
                raise InputError(f"forces callable must return {r} finite values, got shape {f.shape}.")
        else:
            f = None
        if f is not None:
            dv = dt * f
            a, code = _limiter_alpha(float(v @ v), float(v @ dv), float(dv @ dv), float(q @ (w2 * q)), e_lim)
            alphas[n] = a
            branches[n] = code
            v += a * dv
        acc = -d * v - fint
        q += dt * v + h * dt * acc
        fint = fint_of(q)
        v[:] = (v + h * acc - h * fint) / (1.0 + h * d)
        if not np.all(np.isfinite(q)):
            out[n + 1:] = np.nan
            return
