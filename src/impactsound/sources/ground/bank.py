"""Response bank: the ground's sound per unit impulse, tabulated over the listener's horizontal offset.

An impact of impulse J on the ground, force J K_eps(t - t_m), heard at height h above the ground and horizontal
offset rho, sounds J k_eps(f) exp(-2 pi i f t_m) H(f; h, rho) (:mod:`.spectrum`): linear in J, the kernel width
eps enters only through the kernel's spectrum k_eps, exactly. A listener's height is fixed in a scene, so a bank
per listener height needs one axis, rho: spectra H at offsets rho_i = i * step, interpolated between nodes
(cubic, Catmull-Rom). H oscillates quickly in rho (its delays change), so the bank stores it aligned:

- the sound of the plane near the impact (r < r_s, smooth split; r_s halfway to where the leaked wave below
  comes from) arrives with the direct sound, at
  d / c_a, d = sqrt(h^2 + rho^2): stored times exp(+2 pi i f d / c_a);
- the rest is dominated, where the ground's Rayleigh wave outruns sound (c_R > c_a), by the wave it leaks into
  the air at the Mach angle alpha, sin(alpha) = c_a / c_R, which arrives first, at d sin(theta + alpha) / c_a
  (theta the listener's elevation seen from the impact) when theta + alpha < pi / 2: stored times exp(+2 pi i f
  t_leak), else aligned with the direct sound.

Rendering an impact interpolates both parts at its rho, puts back their delays for that rho and the impact's own
t_m and kernel, and adds the inverse FFT to the output (all impacts of a batch at once). The spectra are
computed up to the output's Nyquist frequency and rolled off over its top 10 % (the result is the band-limited
pressure). Nodes are computed when an impact first needs them and kept in the bank's asset file, so the sound
never depends on what the cache already held.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.fft
from numba import njit, prange

from ...assets import Asset, cache_dir, content_hash, read_asset, write_asset
from ...errors import AssetError, InputError
from .impact import HalfSpace
from .spectrum import ring_spectrum

def _ground_key(ground) -> dict:
    """The half-space's constants in a bank's key and metadata (the loss factor only when there is one, so lossless
    banks keep their keys)."""
    d = {"E": ground.E, "nu": ground.nu, "rho": ground.rho}
    if ground.loss_factor:
        d["loss_factor"] = ground.loss_factor
    return d


BANK_KIND = "ground_bank"
BANK_VERSION = 2
#: node spacing over the listener height (rho_i = i * h * STEP_PER_HEIGHT, at most MAX_STEP)
STEP_PER_HEIGHT = 1.0 / 32
MAX_STEP = 0.03
#: radiating plane: rho + R_EXTRA around the impact (tapered over its outer 30 %)
R_EXTRA = 1.2
#: samples of each impact's block before t_m (the K4 force's precursor and early leaky arrivals fit in it)
PRE_SAMPLES = 256


def kernel_spectrum(f, eps, kernel: str = "K4"):
    """Spectrum of the unit-area force kernel of width eps [s] at frequencies f [Hz] (broadcasting):
    exp(-2 pi |f| eps) (Lorentzian), 2 exp(-2 pi |f| eps) - exp(-4 pi |f| eps) (K4 = 2 K_eps - K_2eps)."""
    e = np.exp(-2 * np.pi * np.abs(f) * eps)
    return e if kernel == "lorentzian" else 2 * e - e * e


def leak_delay(h, rho, c_a: float, c_R: float):
    """Arrival time [s] of the sound the Rayleigh wave leaks into the air (module docstring); d / c_a where there
    is none."""
    h, rho = np.asarray(h, float), np.asarray(rho, float)
    d = np.hypot(h, rho)
    if c_R <= c_a:
        return d / c_a
    alpha = math.asin(c_a / c_R)
    theta = np.arctan2(h, rho)
    return np.where(theta + alpha < np.pi / 2, d * np.sin(np.minimum(theta + alpha, np.pi / 2)) / c_a, d / c_a)


def split_radius(h: float, rho: float, c_a: float, c_R: float) -> float:
    """Where the bank splits the plane [m]: halfway from the impact to the point whose leaked Rayleigh wave
    reaches the listener first (rho - h tan(alpha)), or to the listener's foot when there is none."""
    r = rho
    if c_R > c_a:
        mach = rho - h * math.tan(math.asin(c_a / c_R))
        if mach > 0:
            r = mach
    return max(r / 2, 1e-3)


@dataclass
class ResponseBank:
    """Aligned spectra of the ground's sound per unit impulse for one listener height (module docstring).

    Attributes
    ----------
    ground : HalfSpace
    height : float
        Listener height above the ground [m].
    c_a, rho_a : float
        Air [m/s], [kg/m^3].
    sample_rate : int
        Output rate [Hz].
    n_fft : int
        Block length [samples] of one impact's sound.
    step : float
        Node spacing in rho [m].
    nodes : dict of int to ndarray
        {node index i: (2, n_fft // 2 + 1) complex aligned spectra (near, far) [Pa s / (N s)] at rho = i step}.
    path : Path or None
        Asset file it is kept in (None: memory only).
    """

    ground: HalfSpace
    height: float
    c_a: float
    rho_a: float
    sample_rate: int
    n_fft: int
    step: float
    nodes: dict = field(default_factory=dict)
    path: object = None
    inputs_hash: str = ""

    @property
    def freqs(self) -> np.ndarray:
        """Frequencies of the stored spectra [Hz]."""
        return np.fft.rfftfreq(self.n_fft, 1.0 / self.sample_rate)

    def node_spectrum(self, i: int) -> np.ndarray:
        """Compute the aligned (near, far) spectra of node i (module docstring)."""
        rho = i * self.step
        f = self.freqs
        near, far = ring_spectrum(f, self.ground, self.height, rho, r_max=rho + R_EXTRA, c_a=self.c_a,
                                  rho_a=self.rho_a, split_radius=split_radius(self.height, rho, self.c_a,
                                                                              self.ground.c_R))
        d = math.hypot(self.height, rho)
        tl = float(leak_delay(self.height, rho, self.c_a, self.ground.c_R))
        return np.stack([near * np.exp(2j * np.pi * f * d / self.c_a), far * np.exp(2j * np.pi * f * tl)])

    def ensure(self, offsets, progress=None, *, save_every_s: float = 20.0) -> None:
        """Compute (and keep in the asset file) the nodes that offsets [m] interpolate between. The file is
        rewritten (atomically) at least every ``save_every_s`` seconds of work, so an interrupted build resumes
        from the nodes it had."""
        u = np.asarray(offsets, float) / self.step
        need = np.unique(np.abs(np.floor(u)[:, None] + np.arange(-1, 3)[None, :]).astype(np.int64))
        missing = [int(i) for i in need if int(i) not in self.nodes]
        if not missing:
            return
        last = time.monotonic()
        for k, i in enumerate(missing):
            self.nodes[i] = self.node_spectrum(i)
            if self.path is not None and (k + 1 == len(missing) or time.monotonic() - last > save_every_s):
                self.save()
                last = time.monotonic()
            if progress is not None:
                progress((k + 1) / len(missing))

    def save(self) -> None:
        """Write the bank's nodes to its asset file (atomically)."""
        idx = np.array(sorted(self.nodes), np.int64)
        arrays = {"node_index": idx,
                  "spectra": np.stack([self.nodes[i] for i in idx]) if len(idx) else np.zeros((0, 2, 0), complex)}
        meta = {"units": "aligned pressure spectra [Pa s per N s]; offsets node_index * step [m]",
                "height_m": self.height, "step_m": self.step, "sample_rate": self.sample_rate, "n_fft": self.n_fft,
                "ground": _ground_key(self.ground),
                "air": {"c": self.c_a, "rho": self.rho_a}}
        write_asset(self.path, Asset(kind=BANK_KIND, arrays=arrays, meta=meta, inputs_hash=self.inputs_hash,
                                     kind_version=BANK_VERSION))

    def render(self, t_m, impulse, eps, offsets, n_samples: int, *, kernel: str = "K4") -> np.ndarray:
        """Pressure [Pa] at the listener from impacts at horizontal offsets [m] (all nodes must exist: ensure).

        Parameters
        ----------
        t_m : array_like
            Centre of each impact's force [s].
        impulse : array_like
            Normal impulse J of each [N s] (>= 0).
        eps : array_like
            Kernel width of each [s] (t_c / 4).
        offsets : array_like
            Horizontal distance impact - listener [m].
        n_samples : int
            Output length.
        kernel : {"K4", "lorentzian"}

        Returns
        -------
        ndarray, shape (n_samples,)
        """
        t_m, J, eps, rho = (np.atleast_1d(np.asarray(v, float)) for v in (t_m, impulse, eps, offsets))
        out = np.zeros(n_samples + 2 * self.n_fft)
        if len(t_m) == 0:
            return out[:n_samples]
        f = self.freqs
        fs = self.sample_rate
        nyq = fs / 2
        roll = np.where(f < 0.9 * nyq, 1.0, 0.5 * (1 + np.cos(np.pi * np.clip((f - 0.9 * nyq) / (0.1 * nyq), 0, 1))))
        u = rho / self.step
        i0 = np.floor(u).astype(np.int64)
        n_nodes = int(i0.max()) + 3
        if any(i not in self.nodes for i in range(n_nodes)):
            need = sorted(set(np.abs(i0[:, None] + np.arange(-1, 3)[None, :]).ravel().tolist()) - set(self.nodes))
            if need:
                raise InputError(f"ground response bank: nodes {need[:5]} are missing; call ensure(offsets) first")
        table = np.zeros((n_nodes, 2, len(f)), np.complex128)
        for i, v in self.nodes.items():
            if i < n_nodes:
                table[i] = v
        d = np.hypot(self.height, rho)
        tl = leak_delay(self.height, rho, self.c_a, self.ground.c_R)
        n0 = np.floor(t_m * fs).astype(np.int64) - PRE_SAMPLES
        t0 = n0 / fs
        for lo in range(0, len(t_m), 2048):                      # batches bound the memory
            sl = slice(lo, lo + 2048)
            spec = np.empty((len(t_m[sl]), len(f)), np.complex128)
            # fs: the inverse FFT of samples of a continuous spectrum, times its frequency step n_fft / fs
            _impact_spectra(table, i0[sl], u[sl] - i0[sl], d[sl] / self.c_a + t_m[sl] - t0[sl],
                            tl[sl] + t_m[sl] - t0[sl], J[sl], eps[sl], fs / self.n_fft, fs * roll,
                            kernel == "K4", spec)
            blocks = scipy.fft.irfft(spec, self.n_fft, axis=1, workers=2)
            _overlap_add(out, blocks, n0[sl] + self.n_fft)
        return out[self.n_fft:self.n_fft + n_samples]


@njit(cache=True, parallel=True)
def _impact_spectra(table, i0, x, delay_near, delay_far, J, eps, df, gain, k4, spec):
    """Spectrum of each impact's block: Catmull-Rom interpolation of nodes i0 - 1 .. i0 + 2 at fraction x (node -1
    is node 1: the response is even in rho), the near and far parts delayed by their own times [s] from the block
    start, times J, the kernel's spectrum (K4 or Lorentzian, width eps) and ``gain``. Frequencies are multiples of
    df, so the delays and exp(-2 pi f eps) are powers of one factor per impact."""
    nf = table.shape[2]
    for m in prange(i0.shape[0]):
        xm = x[m]
        w0 = (-xm + 2 * xm**2 - xm**3) / 2
        w1 = (2 - 5 * xm**2 + 3 * xm**3) / 2
        w2 = (xm + 4 * xm**2 - 3 * xm**3) / 2
        w3 = (-xm**2 + xm**3) / 2
        a0, a1, a2, a3 = abs(i0[m] - 1), i0[m], i0[m] + 1, i0[m] + 2
        zn = complex(math.cos(2 * math.pi * df * delay_near[m]), -math.sin(2 * math.pi * df * delay_near[m]))
        zf = complex(math.cos(2 * math.pi * df * delay_far[m]), -math.sin(2 * math.pi * df * delay_far[m]))
        r = math.exp(-2 * math.pi * df * eps[m])
        pn = 1.0 + 0j
        pf = 1.0 + 0j
        e = 1.0
        for k in range(nf):
            s0 = w0 * table[a0, 0, k] + w1 * table[a1, 0, k] + w2 * table[a2, 0, k] + w3 * table[a3, 0, k]
            s1 = w0 * table[a0, 1, k] + w1 * table[a1, 1, k] + w2 * table[a2, 1, k] + w3 * table[a3, 1, k]
            kern = 2 * e - e * e if k4 else e
            spec[m, k] = (s0 * pn + s1 * pf) * (J[m] * kern * gain[k])
            pn *= zn
            pf *= zf
            e *= r


@njit(cache=True)
def _overlap_add(out, blocks, starts):
    """out[s:s + n] += block for each block, dropping what falls outside ``out``."""
    n = blocks.shape[1]
    for m in range(blocks.shape[0]):
        s = starts[m]
        for j in range(n):
            p = s + j
            if 0 <= p < out.shape[0]:
                out[p] += blocks[m, j]


def bank_n_fft(ground: HalfSpace, height: float, max_offset: float, c_a: float, sample_rate: int) -> int:
    """Block length: the latest arrival from the radiating plane (its edge, rho + R_EXTRA away, reached by the
    slowest surface wave, then heard across the plane) plus PRE_SAMPLES, as a power of two."""
    r = max_offset + R_EXTRA
    t = r / min(ground.c_R, ground.c_s) + math.hypot(height, r + max_offset) / c_a
    return 1 << int(math.ceil(math.log2(t * sample_rate + 2 * PRE_SAMPLES)))


def response_bank(ground: HalfSpace, height: float, *, c_a: float, rho_a: float, sample_rate: int,
                  max_offset: float = 2.0, cache: bool | str = True) -> ResponseBank:
    """The response bank of a listener height, read from the cache when it holds one built from the same inputs.

    Parameters
    ----------
    ground : HalfSpace
    height : float
        Listener height above the ground [m] (> 0).
    c_a, rho_a : float
        Air [m/s], [kg/m^3].
    sample_rate : int
        Output rate [Hz].
    max_offset : float
        Largest horizontal offset the bank will serve [m]; fixes its block length (rounded up to a whole metre so
        that nearby scenes share one bank).
    cache : bool or str
        True: the package cache folder; a folder path; False: memory only.

    Returns
    -------
    ResponseBank
        With the nodes computed so far (call :meth:`ResponseBank.ensure` before rendering).
    """
    if not (math.isfinite(height) and height > 0):
        raise InputError(f"ground sound: listener height above the ground {height} m must be positive; put the "
                         "listener above the floor")
    max_offset = float(math.ceil(max(max_offset, 1.0)))
    step = min(MAX_STEP, height * STEP_PER_HEIGHT)
    n_fft = bank_n_fft(ground, height, max_offset, c_a, sample_rate)
    key = content_hash(BANK_KIND, BANK_VERSION, _ground_key(ground), float(height),
                       float(c_a), float(rho_a), int(sample_rate), int(n_fft), float(step), R_EXTRA, PRE_SAMPLES)
    bank = ResponseBank(ground, float(height), float(c_a), float(rho_a), int(sample_rate), n_fft, step,
                        inputs_hash=key)
    if cache is False:
        return bank
    folder = cache_dir() if cache is True else Path(cache)
    bank.path = folder / "ground" / f"bank-{key[:24]}.h5"
    if bank.path.exists():
        try:
            a = read_asset(bank.path, BANK_KIND, kind_version=BANK_VERSION, inputs_hash=key)
            bank.nodes = {int(i): s for i, s in zip(a.arrays["node_index"], a.arrays["spectra"])}
        except AssetError:
            bank.nodes = {}                    # another version or corrupted: rebuilt, never used
    return bank
