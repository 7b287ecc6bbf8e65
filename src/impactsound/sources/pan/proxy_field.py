"""An object's PAN field from its proxy's soundbank entry (Chadwick, Zheng & James 2012, "Faster Acceleration
Noise for Multibody Animations using Precomputed Soundbanks", sec. 3.1-3.3), in the form the renderer's PAN
synthesis reads (:class:`~impactsound.sources.pan.field.PANField`).

Why a PANField. In a render the listener moves relative to a tumbling body, so every impulse sees its own
direction and distance; the PAN renderer (:mod:`.synth`) already handles that per impulse in compiled code, with
its exact low-pass to the output rate. Converting the entry once per object lets every proxy reuse it; the
fixed-listener route of the paper (wavelet-domain accumulation, Algorithm 1; :mod:`.proxy_synth`) stays the
reference it is checked against.

The field is kept in PROXY axes (the columns of the proxy's rotation Z, sec. 3.3): the renderer rotates each
impulse's listener and accelerations into them (x' = Z^T x, a' = Z^T a, alpha' = Z^T alpha), so the entry's
direction grid is used as stored, with no second interpolation in angle.

Scaling law (sec. 3.1, eq. 10). The proxy is the entry scaled by beta (:func:`.proxy.nearest_entry`). A field
i of the entry at bank distance R'' = R/beta and bank time t'' = t/beta gives, per unit physical acceleration,

    p_i(R, t) = s_i(beta) sum_k (R/beta)^{-k} q_k(d, t/beta - R/(beta c))
              = sum_k R^{-k} [s_i(beta) beta^k q_k](d, (t - R/c)/beta)

with s_i = beta (translation, i < 3) and beta^2 (rotation; :func:`.proxy.pressure_scale`). So the object's
terms are the entry's, multiplied by s_i beta^k, on a time axis stretched by beta: coefficient spacing
beta dt, first retarded time beta tau0, pulse time scale beta h_ref, bounding radius and fit radii times beta.

Samples to pulse coefficients. The entry holds each term as samples on its aligned grid tau0 + n dt (one
period of a periodic reconstruction, :func:`.wavelet.waverec_flat`; its last eighth is rolled before the start,
as :func:`.wavelet.reconstruct` does). A PANField expands a term in the pulse psi(t; dt) of the PAN paper
(eq. 17; :mod:`.pulse`): q(tau) = sum_j q^j psi(tau - tau0 - j dt; dt). psi(0) = 7/9 and psi(+-dt) = 1/9, so the
coefficients that make the expansion pass through the samples solve the tridiagonal system
(1/9) q^{j-1} + (7/9) q^j + (1/9) q^{j+1} = s_j (strictly diagonally dominant; solved for all series at once).
Between samples the expansion is a C^1 cubic interpolant of the band-limited series. Samples past the end of
the record (the zero padding of the compression) are set back to zero: the threshold leaves noise of about eps
there, which would only lengthen every table.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field

import numpy as np
import scipy.linalg

from ...errors import InputError
from .field import N_FIELDS, PANField
from .proxy import pressure_scale
from .wavelet import waverec_flat

#: samples kept past the longest record in :func:`entry_coefficients` (the prefilter's decaying tail)
PREFILTER_TAIL = 20


def entry_coefficients(entry) -> tuple[np.ndarray, float, float]:
    """Pulse coefficients of every field, full-grid direction and term of a bank entry, unscaled (bank space).

    Parameters
    ----------
    entry : BankEntry
        A folded entry (:class:`.soundbank.BankEntry`).

    Returns
    -------
    q : ndarray, shape (6, n_theta, n_phi, N, T)
        Coefficients q_k^j [Pa m^k per unit acceleration], bank space, float32; T covers the longest record and
        PREFILTER_TAIL samples (fields that ran shorter are zero beyond their end).
    tau0 : float
        Retarded time of coefficient 0 from the pulse centre [s] (bank time).
    dt : float
        Coefficient spacing = bank sample spacing [s].

    Raises
    ------
    InputError
        For an entry that does not know its direction grid.
    """
    if not getattr(entry, "folded", False):
        raise InputError(f"soundbank entry {entry.index}: a proxy field needs a folded entry (its grid is known)")
    wf0 = entry.fields[0]
    N, dt, tau0 = int(wf0.n_terms), float(wf0.dt), float(wf0.tau0)
    for f, wf in enumerate(entry.fields):
        if wf.n_terms != N or wf.dt != dt or wf.tau0 != tau0:
            raise InputError(f"soundbank entry {entry.index}: field {f} has another time grid than field 0")
    # fields may have run different lengths (each to its own decay): their periods T_f differ, and so does the
    # part rolled before the start (T_f / 8); put them on one grid starting at the earliest rolled sample
    pres = [int(wf.n_coef) // 8 for wf in entry.fields]
    lead = max(pres)
    T = max(lead - p + int(wf.n_coef) for p, wf in zip(pres, entry.fields))
    n_full = entry.n_directions
    rows, signs = entry.unfold(np.arange(n_full))
    out = np.zeros((N_FIELDS, n_full, N, T), np.float32)
    # tridiagonal (1/9, 7/9, 1/9) in banded storage: psi at the sample spacing
    ab = np.empty((3, T))
    ab[0], ab[1], ab[2] = 1.0 / 9.0, 7.0 / 9.0, 1.0 / 9.0
    for f, (wf, pre) in enumerate(zip(entry.fields, pres)):
        Tf = int(wf.n_coef)
        dense = np.zeros((wf.n_dir, N, Tf))
        for d in range(wf.n_dir):
            a, b = wf.indptr[d], wf.indptr[d + 1]
            dense[d][:, wf.index[a:b]] = wf.values[a:b].T
        s = np.zeros((wf.n_dir, N, T))
        o = lead - pre
        s[..., o:o + Tf] = np.roll(waverec_flat(dense, wf.wavelet), pre, axis=-1)   # samples
        # beyond the record (aligned sample n_samples on) the series was zero padding before compression: what the
        # threshold left there is compression noise, not field; dropping it shortens every table (the render's
        # cost is proportional to the field's length)
        s[..., lead + int(wf.n_samples):] = 0.0
        c = scipy.linalg.solve_banded((1, 1), ab, s.reshape(-1, T).T, check_finite=False).T
        out[f] = c.reshape(wf.n_dir, N, T)[rows] * signs[:, f, None, None]
    # past the longest record everything is zero but the prefilter's tail (its inverse decays by (7 - sqrt(45))/2
    # = 0.146 per sample: 1e-16 after 20 samples): keep only what carries the field
    T_used = min(T, max(lead + int(wf.n_samples) for wf in entry.fields) + PREFILTER_TAIL)
    out = np.ascontiguousarray(out[..., :T_used])
    return out.reshape(N_FIELDS, entry.n_theta, entry.n_phi, N, T_used), tau0 - lead * dt, dt


def proxy_pan_field(coefficients, beta: float, *, h_ref: float, c: float, rho: float, R_b_ref: float,
                    radii_ref, mass: float, inertia, inputs_hash: str = "", meta: dict | None = None) -> PANField:
    """The PAN field of an object from its entry's coefficients and its scale beta (module docstring), in the
    proxy's axes.

    Parameters
    ----------
    coefficients : tuple
        (q, tau0, dt) from :func:`entry_coefficients`.
    beta : float
        Scale of the proxy relative to the entry (2A, A the proxy's longest semi-axis [m]).
    h_ref : float
        The bank's pulse time scale [s].
    c, rho : float
        Air of the bank [m/s], [kg/m^3].
    R_b_ref : float
        Bounding radius of the entry (A' = 0.5 m).
    radii_ref : array_like
        Fit radii of the entry [m].
    mass : float
        The object's mass [kg] (recorded).
    inertia : array_like, shape (3, 3)
        The object's inertia about its centre of mass [kg m^2], recorded in proxy axes.
    inputs_hash : str, optional
        Identifies what the field came from (bank, entry, beta).
    meta : dict, optional

    Returns
    -------
    PANField
        Proxy axes; field time 0 at the pulse centre.

    Raises
    ------
    InputError
        On a non-positive or non-finite beta.
    """
    beta = float(beta)
    if not (np.isfinite(beta) and beta > 0):
        raise InputError(f"proxy field: beta = {beta} must be positive and finite")
    q0, tau0, dt = coefficients
    N = q0.shape[3]
    s = np.array([pressure_scale(i, beta) for i in range(N_FIELDS)])
    scale = (s[:, None] * beta ** (np.arange(N) + 1.0)[None, :]).astype(np.float32)   # s_i beta^k
    q = q0 * scale[:, None, None, :, None]
    return PANField(q=q, dt_q=beta * dt, tau0=beta * tau0, h=beta * float(h_ref), c=float(c), rho=float(rho),
                    R_b=beta * float(R_b_ref), radii=beta * np.asarray(radii_ref, np.float64), mass=float(mass),
                    inertia=np.asarray(inertia, np.float64), inputs_hash=inputs_hash, meta=dict(meta or {}))


@dataclass
class ProxyRecipe:
    """What builds one object's proxy field (:func:`proxy_pan_field`): the entry's coefficients (shared by every
    object on that entry), beta and the bank's constants."""

    coefficients: tuple
    beta: float
    h_ref: float
    c: float
    rho: float
    R_b_ref: float
    radii_ref: np.ndarray
    mass: float
    inertia: np.ndarray
    inputs_hash: str = ""
    meta: dict = dc_field(default_factory=dict)

    def build(self) -> PANField:
        """The object's PANField (proxy axes)."""
        return proxy_pan_field(self.coefficients, self.beta, h_ref=self.h_ref, c=self.c, rho=self.rho,
                               R_b_ref=self.R_b_ref, radii_ref=self.radii_ref, mass=self.mass,
                               inertia=self.inertia, inputs_hash=self.inputs_hash, meta=self.meta)


class ProxyFields(Mapping):
    """{body name: PANField} where the proxies' fields are built on access and not kept (a field is a few MB;
    a debris scene has hundreds of objects), and objects with their own field map to it.

    Parameters
    ----------
    own : dict of str to PANField
        Objects' own fields.
    recipes : dict of str to ProxyRecipe
        Proxy fields to build.
    """

    def __init__(self, own: dict | None = None, recipes: dict | None = None):
        self.own = dict(own or {})
        self.recipes = dict(recipes or {})
        both = set(self.own) & set(self.recipes)
        if both:
            raise InputError(f"proxy fields: {sorted(both)} have both an own field and a proxy")

    def __getitem__(self, name):
        if name in self.own:
            return self.own[name]
        return self.recipes[name].build()

    def __iter__(self):
        yield from self.own
        yield from self.recipes

    def __len__(self):
        return len(self.own) + len(self.recipes)

    def header(self, name):
        """Air (c, rho) of a field without building it."""
        return self.own[name] if name in self.own else self.recipes[name]
