"""Sound of a struck thin shell: its kept modes stepped in time (linear or with cubature nonlinear forces), struck
by the scene's contact events through the impulse limiter, radiated to the listeners.

Chadwick, An & James 2009, "Harmonic Shells": sec. 2.2-2.3 (reduced nonlinear dynamics, explicit subspace
Newmark at audio rate), sec. 3 (impulse limiter, Algorithm 1), sec. 4 (radiation: the screen BEM of screen.py,
the FFAT maps of ffat.py or the low-order sum of radiation.py). Units SI throughout; pressures in pascals.

Choices (the package's, stated):

* Both ``dynamics = "linear"`` and ``"nonlinear"`` run the same explicit Newmark at the same rate (k x the output
  rate, :func:`~impactsound.sources.shell.dynamics.choose_rate`), so a side-by-side comparison differs only in the
  nonlinear coupling. The linear stiffness is pre-warped, Lambda'_j = ((2/dt) sin(w_j dt / 2))^2, so that the
  scheme's discrete frequency (2/dt) asin(w' dt / 2) is exactly w_j (the central difference would otherwise
  raise pitch by ~(w dt)^2 / 24).
* Nonlinear force: f(q) = Lambda' q + [sum_i w_i g_i(q) - K_c q], K_c the cubature's own stiffness at rest
  (central differences of the cubature force along each mode). The cubature (~10 % error) thus only carries the
  nonlinear remainder, and at small amplitude the model is the linear one exactly (the linear frequencies are not
  perturbed by the cubature's error). Scenes store the cubature's basis rows in float32 (source.py,
  CUBATURE_PRECISION; float64 arithmetic): the exact force of U rounded by 6e-8, with K_c its own, so this
  limit still holds.
* Contact force: each event's modal impulse I_j = u_j(x) . J (the mid-surface's linear shape functions at the
  contact point) is spread over its Hertz contact time tau as the half-sine, integrated exactly over each step;
  the impulse of every step passes the limiter (E_max = sigma x mass). Rows scaled to zero are counted and
  logged.
* Radiation (:func:`radiation_weights`): per mode, the complex transfer of the screen BEM (screen.py, the
  default for open shells) or of BEM FFAT maps (ffat.py), applied to the mode's acceleration and its quadrature
  w_j q'_j; or the delay-binned surface sum of radiation.py (low_order: each triangle's normal acceleration
  delayed by its own distance / c). Weights are taken at each event's pose (listeners in the body frame then)
  and cross-faded linearly in time between consecutive events of the body; when the shell or a listener moves,
  at keyframes of the control rate instead (>= 1 kHz in the shell's emission time: its recorded pose, the
  listener where that sound reaches it, the moving source's amplification; source.py, transfer/motion.py), the
  transfer evaluated every KEY_STEP_WAVELENGTHS of listener motion and interpolated between. Binaural listeners get the spherical-head shadow of each mode at its frequency, as the modal
  source does.
* Output: the pressure is summed at the simulation rate and brought to the output rate with a polyphase low-pass
  (scipy.signal.resample_poly). Stepping stops once no impulse is left and the modal energy has fallen 120 dB
  below its peak.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ...errors import SolverError
from . import _render_kernel as kern
from .dynamics import BRANCH_FULL, choose_rate
from .reduced import CompiledCubature

log = logging.getLogger("impactsound")

BLOCK = 4096              # steps per kernel call
STOP_DB = 120.0           # stop once the modal energy is this far below its peak and no impulse is left


@dataclass
class ShellSound:
    """A shell prepared for rendering (body frame, SI).

    vertices (Nv, 3), faces (Nf, 3): mid-surface; U (3 Nv, r) mass-normalised modes [1/sqrt(kg)]; omega (r,)
    [rad/s]; xi (r,) damping ratios; mass [kg]; energy_limit sigma [J/kg]; radiator: ShellRadiator; cubature:
    CompiledCubature or None (linear); Kc (r, r) the cubature's rest stiffness (nonlinear); info: what was used.
    """

    vertices: np.ndarray
    faces: np.ndarray
    U: np.ndarray
    omega: np.ndarray
    xi: np.ndarray
    mass: float
    energy_limit: float
    radiator: object
    cubature: object = None
    Kc: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def r(self) -> int:
        return int(self.U.shape[1])

    def modal_impulses(self, face, bary, J) -> np.ndarray:
        """I (n, r) = u_j(x) . J for impulses J (n, 3) [N s] at mid-surface points (face (n,), bary (n, 3))."""
        Uv = self.U.reshape(len(self.vertices), 3, self.r)
        tri = self.faces[np.asarray(face, np.int64)]                     # (n, 3)
        u = np.einsum("nk,nkcr->ncr", np.asarray(bary, np.float64), Uv[tri])
        return np.einsum("ncr,nc->nr", u, np.asarray(J, np.float64))


def rest_stiffness(cc, r: int, eps: float) -> np.ndarray:
    """K_c[:, j] = (f~(eps e_j) - f~(-eps e_j)) / (2 eps) of a compiled cubature (its stiffness at rest)."""
    K = np.empty((r, r))
    e = np.zeros(r)
    for j in range(r):
        e[j] = eps
        fp = cc.force(e)
        e[j] = -eps
        fm = cc.force(e)
        e[j] = 0.0
        K[:, j] = (fp - fm) / (2 * eps)
    return 0.5 * (K + K.T)


def impulse_schedule(t0, tau, I, dt: float, n_steps: int):
    """Half-sine contact forces on the step grid: (steps (K,) ascending unique, forces (K, r) [N/sqrt(kg)]).

    Event e (start t0 [s], duration tau [s], modal impulse I (r,)) puts I w_n / dt on step n, w_n the half-sine's
    impulse fraction over [n dt, (n + 1) dt) (exact integral: W(t) = (1 - cos(pi (t - t0) / tau)) / 2). Steps at or
    beyond n_steps are dropped."""
    t0 = np.asarray(t0, np.float64)
    tau = np.maximum(np.asarray(tau, np.float64), 1e-12)
    I = np.asarray(I, np.float64)
    if len(t0) == 0:
        return np.zeros(0, np.int64), np.zeros((0, I.shape[1] if I.ndim == 2 else 0))
    n_a = np.floor(t0 / dt).astype(np.int64)
    span = int(np.max(np.floor((t0 + tau) / dt).astype(np.int64) - n_a)) + 1
    steps, wts, rows = [], [], []
    W = lambda t: 0.5 * (1.0 - np.cos(np.pi * np.clip((t - t0) / tau, 0.0, 1.0)))  # noqa: E731
    for s in range(span):
        n = n_a + s
        w = W((n + 1) * dt) - W(n * dt)
        keep = (w > 0) & (n < n_steps) & (n >= 0)
        steps.append(n[keep])
        wts.append(w[keep])
        rows.append(np.flatnonzero(keep))
    steps = np.concatenate(steps)
    wts = np.concatenate(wts)
    rows = np.concatenate(rows)
    uniq, inv = np.unique(steps, return_inverse=True)
    F = np.zeros((len(uniq), I.shape[1]))
    np.add.at(F, inv.ravel(), I[rows] * (wts / dt)[:, None])
    return uniq, F


def radiation_weights(radiator, points, c: float, rho: float, rate: float, omega=None):
    """Time-domain radiation weights at body-frame points (n, 3) for sample rate ``rate`` [Hz]:
    (B (n, bins, m), d0 (n,) int, quadrature) with p[t] = sum_b sum_s B[p, b, s] y_s[t - d0 - b].

    * A radiator with ``delay_weights`` (the low-order surface sum): y = q'' (m = r), its own delay bins.
    * Otherwise a complex transfer A_j(x) per unit modal acceleration with the bulk delay |x| / c removed
      (screen.py, ffat.py): y = [q'', w q'] (m = 2 r, quadrature = True), B = [Re A', Im A'] at the whole-sample
      part d0 of the bulk delay, A' = A e^{i w_j fr / rate} carrying its fraction fr (exact for a ringing mode,
      no interpolation loss). For e^{-i w t}, a mode ringing at w_j has q'' = Re(a e^{-i w_j t}) and w_j q' =
      Re(i a e^{-i w_j t}), so Re(A) q'' + Im(A) w_j q' = Re(A a e^{-i w_j t}): the transfer's magnitude and
      phase, each mode radiated at its own frequency (Chadwick, An & James 2009, sec. 4), causally. Content of q_j
      at other frequencies w keeps the real part's weight while the quadrature term scales by w_j / w (so it
      falls above w_j: the contact force's spike, the nonlinear spreading; and grows below it, where a mode
      carries little). ``omega`` (r,) [rad/s] is needed for the fraction.
    """
    P = np.asarray(points, np.float64).reshape(-1, 3)
    if hasattr(radiator, "delay_weights"):
        B, d0 = radiator.delay_weights(P, c, rho, rate)
        return B, d0, False
    A = np.asarray(radiator.transfer(P, c, rho))
    x = np.sqrt((P**2).sum(axis=1)) * float(rate) / float(c)
    d0 = np.floor(x).astype(np.int64)
    A = A * np.exp(1j * np.outer(x - d0, np.asarray(omega, np.float64) / float(rate)))
    B = np.concatenate([A.real, A.imag], axis=1)[:, None, :]                   # (n, 1, 2 r)
    return B, d0, True


#: keyframed transfer is evaluated where the body-frame listener has moved this fraction of the shortest kept
#: wavelength since the last evaluation, and interpolated linearly in between (error ~ (2 pi x fraction)^2 / 8:
#: 0.3 % at 1/40)
KEY_STEP_WAVELENGTHS = 1.0 / 40.0


def keyframe_weights(radiator, xl_b, c: float, rho: float, rate: float, omega):
    """radiation_weights for keyframes xl_b (K, L, 3): a transfer radiator is evaluated only where the listener
    (body frame, any channel) has moved KEY_STEP_WAVELENGTHS of the shortest wavelength 2 pi c / max(omega) since
    the last evaluation (always at the first and last keyframe), its complex transfer interpolated linearly in
    between; the bulk delay and its fraction are exact at every keyframe. A delay-binned radiator is evaluated at
    every keyframe. Returns (B (K L, bins, m), d0 (K L,), quadrature)."""
    K, L = xl_b.shape[:2]
    P = np.asarray(xl_b, np.float64)
    if hasattr(radiator, "delay_weights") or K < 3:
        return radiation_weights(radiator, P.reshape(-1, 3), c, rho, rate, omega)
    tol = KEY_STEP_WAVELENGTHS * 2 * np.pi * float(c) / float(np.max(omega))
    step = np.linalg.norm(np.diff(P, axis=0), axis=-1).max(axis=1)                # (K - 1,)
    bucket = np.floor(np.concatenate([[0.0], np.cumsum(step)]) / tol)
    S = np.unique(np.concatenate([[0], np.flatnonzero(np.diff(bucket) > 0) + 1, [K - 1]]))
    A_s = np.asarray(radiator.transfer(P[S].reshape(-1, 3), c, rho)).reshape(len(S), L, -1)
    seg = np.clip(np.searchsorted(S, np.arange(K), side="right") - 1, 0, len(S) - 2)
    w = ((np.arange(K) - S[seg]) / np.maximum(S[seg + 1] - S[seg], 1))[:, None, None]
    A = (1.0 - w) * A_s[seg] + w * A_s[seg + 1]                                      # (K, L, r)
    x = np.sqrt((P**2).sum(axis=-1)).reshape(-1) * float(rate) / float(c)
    d0 = np.floor(x).astype(np.int64)
    A = A.reshape(K * L, -1) * np.exp(1j * np.outer(x - d0, np.asarray(omega, np.float64) / float(rate)))
    return np.concatenate([A.real, A.imag], axis=1)[:, None, :], d0, True


def render_shell(sound: ShellSound, t0, tau, face, bary, J_b, xl_b, sample_rate: int, n_samples: int, *,
                 c: float, rho: float, gains=None, progress=None, keyframes=None) -> tuple[np.ndarray, dict]:
    """Pressure (L, n_samples) [Pa] of one shell struck by n events.

    t0 (n,) [s] event times (ascending), tau (n,) Hertz contact times [s], face (n,), bary (n, 3) contact points on
    the mid-surface, J_b (n, 3) impulses on the shell (body frame) [N s], xl_b (n, L, 3) listener positions in the
    body frame at each event [m]; gains: optional (n, L, r) per-mode factors (head shadow); c [m/s], rho
    [kg/m^3]. ``keyframes`` = (times (K,) [s] ascending, in the shell's own (emission) time, x_b (K, L, 3), gains
    (K, L, r) or None): radiation keyframes to use instead of the events' (a moving shell or listener, at the
    control rate; transfer/motion.py emission_keyframes). Returns (pressure, stats) with stats: rate, steps run,
    limiter counts."""
    fs = float(sample_rate)
    r = sound.r
    n_ev = len(t0)
    L = xl_b.shape[1] if n_ev else 0
    omega = sound.omega
    rate = choose_rate(float(omega.max()), base_rate=fs)
    kf = int(round(rate / fs))
    dt = 1.0 / rate
    n_steps = n_samples * kf
    out = np.zeros((L, n_samples))
    stats = {"rate_hz": rate, "steps": 0, "impulses": 0, "scaled": 0, "zeroed": 0}
    if n_ev == 0 or n_samples == 0:
        return out, stats
    order = np.argsort(t0, kind="stable")
    t0, tau, face, bary, J_b, xl_b = (np.asarray(a)[order] for a in (t0, tau, face, bary, J_b, xl_b))
    if gains is not None:
        gains = np.asarray(gains)[order]
    I = sound.modal_impulses(face, bary, J_b)
    steps, F = impulse_schedule(t0, tau, I, dt, n_steps)
    # radiation keyframes at each event's pose (module docstring), or the given ones
    te = t0
    if keyframes is not None:
        te, xl_b, gains = keyframes
        te = np.asarray(te, np.float64)
        xl_b = np.asarray(xl_b, np.float64)
    n_key = len(te)
    if keyframes is not None:
        B, d0, quad = keyframe_weights(sound.radiator, xl_b, c, rho, rate, omega)
    else:
        B, d0, quad = radiation_weights(sound.radiator, xl_b.reshape(-1, 3), c, rho, rate, omega)
    nb_bins = B.shape[1]
    nsig = B.shape[2]                                                           # r, or 2 r with quadrature
    B = B.reshape(n_key, L, nb_bins, nsig)
    d0 = d0.reshape(n_key, L)
    if gains is not None:
        B = B * np.concatenate([gains] * (nsig // r), axis=2)[:, :, None, :]
    Bt = np.ascontiguousarray(B.transpose(0, 1, 3, 2))                          # (n, L, nsig, bins)
    # stepping
    w2p = ((2.0 / dt) * np.sin(omega * dt / 2.0)) ** 2                          # pre-warped stiffness
    # the scheme's ringing mode Q cos(w t_n) has |q''| = w2p Q and |v| = Q sin(w dt) / dt: scaling v by
    # (2/dt) tan(w dt / 2) (-> w as dt -> 0) makes the quadrature pair equal in level at any w dt
    wq = (2.0 / dt) * np.tan(omega * dt / 2.0)
    d = 2.0 * sound.xi * omega
    cc = sound.cubature
    nonlinear = cc is not None
    if nonlinear:
        args = cc.kernel_args() + (cc.pairs,)
        Kc = np.ascontiguousarray(sound.Kc)
    else:
        args = CompiledCubature.empty_kernel_args(r) + (np.zeros((0, 2), np.int64),)
        Kc = np.zeros((1, 1))
    q = np.zeros(r)
    v = np.zeros(r)
    fint = np.zeros(r)
    e_max = float(sound.energy_limit) * float(sound.mass)
    alphas = np.ones(len(steps))
    branches = np.zeros(len(steps), np.int8)
    pad = int(d0.max()) + nb_bins + 1
    sim = np.zeros((L, n_steps + pad))                                          # pressure at the sim rate
    k = 0
    e_peak = 0.0
    n0 = int(steps[0]) if len(steps) else n_steps                               # nothing moves before
    n0 -= n0 % BLOCK
    n_run = n0
    while n_run < n_steps:
        nb = min(BLOCK, n_steps - n_run)
        qdd = np.zeros((nb, r))
        vel = np.zeros((nb if quad else 0, r))
        k = kern.run_block(q, v, fint, dt, w2p, d, nonlinear, Kc, *args, n_run, steps, F, k, e_max, alphas,
                           branches, qdd, vel)
        if k < 0:
            raise SolverError("the shell state became non-finite: the nonlinear forces stiffened the shell beyond "
                              "the stable step; lower shell.energy_limit or keep fewer modes")
        tn = (n_run + np.arange(nb)) * dt
        ke = np.searchsorted(te, tn, side="right") - 1                            # keyframe before each step
        for e in np.unique(ke):
            if e < 0:
                continue
            rows = np.flatnonzero(ke == e)
            e1 = min(e + 1, n_key - 1)
            lam = np.zeros(len(rows)) if e1 == e else np.clip((tn[rows] - te[e]) / max(te[e1] - te[e], 1e-300),
                                                              0, 1)
            Q = np.concatenate([qdd[rows], vel[rows] * wq], axis=1) if quad else qdd[rows]
            at = n_run + rows[0]
            for kk, wgt in ((e, 1.0 - lam), (e1, lam)) if e1 != e else ((e, 1.0 - lam),):
                for l in range(L):
                    z = (Q @ Bt[kk, l]) * wgt[:, None]                          # (rows, bins)
                    for bb in range(nb_bins):
                        o = at + int(d0[kk, l]) + bb
                        sim[l, o:o + len(rows)] += z[:, bb]
        n_run += nb
        energy = float(v @ v + q @ (w2p * q))
        e_peak = max(e_peak, energy)
        if k >= len(steps) and energy <= e_peak * 10.0 ** (-STOP_DB / 10.0):
            break
        if progress is not None:
            progress(min(1.0, n_run / n_steps))
    stats["steps"] = n_run
    stats["impulses"] = int(len(steps))
    zero = (branches != BRANCH_FULL) & (alphas == 0.0)
    stats["zeroed"] = int(zero.sum())
    stats["scaled"] = int(((alphas > 0) & (alphas < 1)).sum())
    if stats["zeroed"]:
        log.warning("shell impulse limiter: %d of %d contact-force steps scaled to zero (modal energy above "
                    "E_max = %.3g J); raise shell.energy_limit to let them through", stats["zeroed"],
                    len(steps), e_max)
    from scipy.signal import resample_poly
    for l in range(L):
        s = sim[l, :n_steps]
        out[l] = (resample_poly(s, 1, kf) if kf > 1 else s)[:n_samples]
    return out, stats
