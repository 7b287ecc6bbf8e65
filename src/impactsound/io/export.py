"""Runtime export of a modal model: a JSON modal bank and a Faust program that plays the object when struck.

The idea is mesh2faust's (Michon, Martin & Smith 2017, "mesh2faust: a modal physical model generator for the
Faust programming language"): a bank of damped resonators whose gains depend on the excitation point,
here with the radiation of each mode towards one listener direction folded in, and with the damping, gains and
radiation of this package's own synthesis, so that the exported program reproduces ``ModalSource`` for a strike.

Bank (SI units). Mode j: frequency f_j [Hz], damping ratio xi_j, angular frequency w_j = 2 pi f_j, decay rate
d_j = xi_j w_j [1/s], damped angular frequency wd_j = w_j sqrt(1 - xi_j^2) [rad/s], pole s_j = -d_j + i wd_j.
An impulse J [N s] pushed into the surface at hit point p (outward unit normal n_p) gives the modal impulses
I_j = u_j(x_p) . (-n_p) J = a_pj J (the consistent point load of the FEM shape functions, O'Brien, Shen &
Gatchalian 2002, "Synthesizing sounds from rigid-body simulations") and the modal coordinates
q_j(t) = (a_pj J / wd_j) e^{-d_j t} sin(wd_j t). After the strike every linear radiation model gives the pressure
of mode j as Im(W_j Z_j) with Z_j = (a_pj J / wd_j) e^{s_j t} and one complex radiation factor W_j, hence

    y_p(t) = J sum_j a_pj b_j e^{-d_j t} sin(wd_j t + phi_j),   t >= 0,   b_j = |W_j| / wd_j,  phi_j = arg W_j.

W_j is the far-field pressure at r = 1 m (reference distance; at r >> the object and the wavelength the pressure
is y(t - r/c) / r) per unit modal amplitude, in the body-frame direction e of the listener:

* FFAT maps (Chadwick, An & James 2009, "Harmonic Shells", sec. 4) where a transfer model covers mode j:
  with P_j = lim_{r -> inf} r p_j(r e) e^{-i k r} (e^{-i w t} convention), W_j = Re P_j - Im P_j s_j / w_j, the
  time-domain form ``ModalSource`` synthesises (p = Re P q - Im P q' / w);
* otherwise the compact monopole + dipole model in its far field (Pierce 1981, "Acoustics", ch. 4):
  W_j = rho / (4 pi) [V_j s_j^2 + (e . D_j) s_j^3 / c] (V_j, D_j the surface moments of the mode's normal
  velocity, transfer/low_order.py);
* no direction (``listener_direction=None``): W_j = 1, so y_p = sum_j q_j, the sum of the modal coordinates
  [m sqrt(kg)]: a dry bank (as mesh2faust's) whose every mode carries only its excitation at the hit point.

Sampled at t = n / f_s, y is exactly the output of one complex one-pole resonator per mode (impulse invariance,
Oppenheim & Schafer, "Discrete-Time Signal Processing", sec. 7.1): Z_j[n] = P_j Z_j[n-1] + a_pj b_j e^{i phi_j}
x[n] with P_j = e^{s_j / f_s}, x[n] = J at the strike sample, y[n] = sum_j Im Z_j[n]; the Faust program is this
recursion written out (two real states per mode, the rotation form, which keeps the pole angle accurate in
single precision where a direct-form biquad's coefficients lose it at low frequencies).

Relation to ``ModalSource``: it strikes with a Hertz half-sine of duration tau instead of an impulse. After the
contact its modal response is the impulse response times the half-sine's spectrum at s_j,
K_j(tau) = (pi / (2 tau)) int_0^tau e^{-s_j v} sin(pi v / tau) dv = e^{-s_j tau / 2} (1 + O((w_j tau)^2)), i.e. a
delay of tau/2 and a low-pass factor; during the contact (a few samples at most) the compact model's q'' and q'''
also carry the force itself, a click the bank leaves out.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..assets import content_hash, hash_arrays
from ..errors import AssetError, InputError

FORMAT = "impactsound-modal-bank"
FORMAT_VERSION = 1
FORMATS = ("json", "faust")
#: the radiation gains are far-field pressures at this distance [m]
REFERENCE_DISTANCE_M = 1.0
#: a chosen hit point may lie at most this fraction of the object's bounding radius off its surface
MAX_POINT_OFFSET = 0.05
#: FFAT maps are evaluated at radius k r >= this for their far-field limit (higher terms fall like 1 / (k r))
_FAR_KR = 1e7
_MODE_BLOCK = 64

FORMULA = ("y_p(t) = J * sum_j a[p][j] * b[j] * exp(-d[j] * t) * sin(wd[j] * t + phi[j]) for t >= 0 and 0 before; "
           "t [s] is the time since the strike (the retarded time t - r/c at a listener at distance r), J [N s] the "
           "impulse pushed into the surface at hit point p, a = points.gains, b = modes.radiation_gain, "
           "phi = modes.radiation_phase_rad, d = modes.decay_rate, wd = modes.damped_angular_frequency")
FORMULA_DISCRETE = ("y[n] = sum_j Im Z_j[n],  Z_j[n] = P_j * Z_j[n-1] + a[p][j] * b[j] * exp(i phi[j]) * x[n],  "
                    "P_j = exp((-d[j] + i wd[j]) / fs),  x[n] = J at the strike sample and 0 elsewhere: equals "
                    "y_p(n / fs) exactly (impulse invariance)")


# ---- building the bank ----------------------------------------------------------------------------------------
def _vertex_normals(vertices, faces) -> np.ndarray:
    """Area-weighted average of the adjacent faces' outward unit normals at each vertex, normalised."""
    tri = vertices[faces]
    cr = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])       # 2 A n per face
    acc = np.zeros_like(vertices)
    for k in range(3):
        np.add.at(acc, faces[:, k], cr)
    return acc / np.maximum(np.linalg.norm(acc, axis=1, keepdims=True), 1e-300)


def _hit_points(model, points):
    """(positions (n, 3), outward normals (n, 3), gains a (n, m_all), distance (n,) or None) of the hit points."""
    faces = np.asarray(model.surface_faces, np.int64)
    nv = model.n_surface_vertices
    verts = np.asarray(model.surface_nodes, np.float64)[:nv]
    shapes = np.asarray(model.shapes, np.float64)
    if points is None:
        nrm = _vertex_normals(verts, faces)
        # at a vertex every shape function but the vertex's own vanishes (P1 and P2): the nodal value
        gains = -np.einsum("mvc,vc->vm", shapes[:, :nv, :], nrm)
        return verts, nrm, gains, None
    try:
        pts = np.asarray(points, np.float64)
    except (TypeError, ValueError):
        raise InputError(f"export: points = {points!r}; give body-frame points [m] as an (n, 3) array") from None
    if pts.ndim == 1 and pts.size == 3:
        pts = pts[None, :]
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
        raise InputError(f"export: points must be an (n, 3) array of body-frame points [m], n >= 1; got shape "
                         f"{pts.shape}")
    if not np.isfinite(pts).all():
        i = int(np.flatnonzero(~np.isfinite(pts).all(axis=1))[0])
        raise InputError(f"export: points[{i}] = {pts[i].tolist()} is not finite; give finite coordinates [m]")
    from ..contact.curvature import SurfaceCurvature      # the closest-point projection ModalSource uses
    surf = SurfaceCurvature(verts, faces)
    face, bary, dist = surf.closest(pts)
    limit = MAX_POINT_OFFSET * float(model.bounding_radius)
    far = dist > limit
    if far.any():
        i = int(np.flatnonzero(far)[0])
        com = ", ".join(f"{v:.6g}" for v in np.asarray(model.com, np.float64))
        raise InputError(f"export: points[{i}] = {pts[i].tolist()} m is {dist[i]:.4g} m from the object's surface "
                         f"(at most {limit:.3g} m, {MAX_POINT_OFFSET:g} of its bounding radius, is accepted); give "
                         f"points on the surface in the body frame: mesh coordinates minus the centre of mass "
                         f"({com}) m")
    pos = np.einsum("nk,nkc->nc", bary, verts[faces[face]])
    tri = verts[faces[face]]
    cr = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    nrm = cr / np.linalg.norm(cr, axis=1, keepdims=True)
    gains = -np.einsum("nmc,nc->nm", model.shapes_at(face, bary), nrm)
    return pos, nrm, gains, dist


def _direction(listener_direction):
    if listener_direction is None:
        return None
    try:
        e = np.asarray(listener_direction, np.float64).reshape(-1)
    except (TypeError, ValueError):
        e = np.full(1, np.nan)
    n = float(np.linalg.norm(e)) if e.size == 3 else float("nan")
    if not (np.isfinite(e).all() and np.isfinite(n) and n > 0):
        raise InputError(f"export: listener_direction = {listener_direction!r}; give a finite non-zero body-frame "
                         "vector (x, y, z) pointing from the object to the listener, or None for no radiation")
    return e / n


def _load_transfer(transfer, model):
    """A TransferModel (or the path of an FFAT transfer asset) checked against ``model``."""
    from ..transfer.precompute import TransferModel
    if isinstance(transfer, str) and transfer in ("auto", "ffat"):
        # the scene's radiation of this very model: the cached asset, computed once when missing
        from ..sources.modal import transfer_model
        from ..io.progress import QUIET
        tm, _ = transfer_model(model, transfer, progress=QUIET)
        if tm is None:
            return None
    elif isinstance(transfer, TransferModel):
        tm = transfer
    else:
        try:
            tm = TransferModel.load(transfer, model=model)
        except AssetError as exc:
            raise AssetError(f"export: transfer = {str(transfer)!r}: {exc}") from None
    if model.inputs_hash and tm.modal_inputs_hash and tm.modal_inputs_hash != model.inputs_hash:
        raise AssetError(f"export: transfer was computed for a different modal model (hash "
                         f"{tm.modal_inputs_hash[:12]}..., this model {model.inputs_hash[:12]}...); rerun "
                         "`impactsound transfer precompute` on this model's asset")
    n = tm.n_modes
    f = np.asarray(model.frequencies_hz, np.float64)
    if n > len(f) or not np.allclose(np.asarray(tm.frequencies_hz, np.float64), f[:n], rtol=1e-9, atol=0):
        raise AssetError("export: the transfer model's mode frequencies differ from this modal model's; rerun "
                         "`impactsound transfer precompute` on this model's asset")
    return tm


def _radiation(model, idx, s, e, tm, air):
    """Complex far-field factor W (m,) at 1 m per unit modal amplitude, and the model used per mode."""
    m = len(idx)
    if e is None:
        return np.ones(m, np.complex128), ["none"] * m
    from ..transfer.low_order import model_moments
    omega = np.asarray(model.omega, np.float64)[idx]
    V, D = model_moments(model)
    W = air.rho / (4.0 * np.pi) * (V[idx] * s**2 + (D[idx] @ e) * s**3 / air.c)
    kind = ["compact"] * m
    if tm is not None:
        sel = np.flatnonzero(idx < tm.n_modes)
        if len(sel):
            k = np.asarray(tm.bank.k, np.float64)[idx[sel]]
            r = _FAR_KR / float(k.min())
            P = tm.bank.evaluate(r * e[None, :])[0, idx[sel]] * r * np.exp(-1j * k * r)
            W[sel] = P.real - P.imag * s[sel] / omega[sel]
            for i in sel:
                kind[i] = "ffat"
    return W, kind


def _package_version() -> str:
    try:
        from importlib.metadata import version
        return version("impactsound")
    except Exception:  # pragma: no cover - a source tree without install
        return "0+unknown"


def modal_bank(model, *, points=None, listener_direction=(0.0, -1.0, 0.0), transfer=None, air=None,
               max_modes: int | None = None, sample_rate: float = 48000) -> dict:
    """The modal bank of :func:`export_modal` as a JSON-able dict (arguments as there)."""
    from ..sources.modal import F_MAX_HZ, NYQUIST_FRACTION
    try:
        fs = float(sample_rate)
    except (TypeError, ValueError):
        fs = float("nan")
    if not (np.isfinite(fs) and fs > 0):
        raise InputError(f"export: sample_rate = {sample_rate!r} Hz; give a positive rate, e.g. 48000")
    if max_modes is not None and (not isinstance(max_modes, (int, np.integer)) or max_modes < 1):
        raise InputError(f"export: max_modes = {max_modes!r}; give a whole number >= 1, or None for all modes")
    f = np.asarray(model.frequencies_hz, np.float64).reshape(-1)
    xi_all = np.asarray(model.xi, np.float64).reshape(-1)
    if len(f) == 0:
        raise InputError("export: the modal model has no modes; rerun the modal analysis with a higher f_max or "
                         "max_modes (or check the mesh: a rigid or tiny object has no audible modes)")
    f_top = min(F_MAX_HZ, NYQUIST_FRACTION * fs / 2)                     # ModalSource's mode selection
    keep = np.flatnonzero((f > 0) & (f < f_top) & (xi_all < 1))
    if len(keep) == 0:
        raise InputError(f"export: none of the model's {len(f)} modes ({f.min():.1f}..{f.max():.1f} Hz) is below "
                         f"{f_top:.0f} Hz and underdamped; raise sample_rate or rerun the modal analysis")
    idx = keep[:max_modes] if max_modes is not None else keep
    e = _direction(listener_direction)
    if air is None:
        from ..scene.model import Air
        air = Air()
    if e is not None and not (np.isfinite(air.c) and air.c > 0 and np.isfinite(air.rho) and air.rho > 0):
        raise InputError(f"export: air c = {air.c} m/s and rho = {air.rho} kg/m^3 must be positive")
    use = transfer is not None and not (isinstance(transfer, str) and transfer == "low_order") and e is not None
    tm = _load_transfer(transfer, model) if use else None
    pos, nrm, gains, dist = _hit_points(model, points)

    xi = xi_all[idx]
    omega = 2 * np.pi * f[idx]
    wd = omega * np.sqrt(1.0 - xi**2)
    s = -xi * omega + 1j * wd
    W, kind = _radiation(model, idx, s, e, tm, air)
    a = gains[:, idx]
    b = np.abs(W) / wd
    phi = np.angle(W)
    meta = {"inputs_hash": model.inputs_hash, "data_hash": hash_arrays(model.to_asset().arrays),
            "material": model.material.as_dict(), "order": int(model.order), "mass_kg": float(model.mass),
            "com_m": np.asarray(model.com, np.float64).tolist(), "n_modes": int(model.n_modes),
            "mode_index": idx.tolist()}
    radiation = {"listener_direction": None if e is None else e.tolist(),
                 "reference_distance_m": REFERENCE_DISTANCE_M if e is not None else None,
                 "air": None if e is None else {"c": float(air.c), "rho": float(air.rho)},
                 "model": kind, "transfer": None}
    if tm is not None:
        used = idx[idx < tm.n_modes]
        bank_ = tm.bank
        psi = [bank_.psi[bank_.offsets[j]:bank_.offsets[j] + bank_.terms * 2 * int(bank_.T[j]) ** 2] for j in used]
        radiation["transfer"] = {"modal_inputs_hash": tm.modal_inputs_hash, "terms": int(bank_.terms),
                                 "r_bar": float(tm.r_bar), "code_version": tm.meta.get("code_version"),
                                 "data_hash": content_hash(np.asarray(bank_.k)[used], *psi)}
    out_units = "Pa (at 1 m, far field)" if e is not None else "m sqrt(kg) (sum of the modal coordinates q_j)"
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "impactsound_version": _package_version(),
        "reference": "Michon, Martin & Smith 2017, mesh2faust; impactsound modal synthesis",
        "formula": FORMULA, "formula_discrete": FORMULA_DISCRETE,
        "units": {"t": "s", "J": "N s", "y": out_units, "frequency_hz": "Hz", "damping_ratio": "1",
                  "decay_rate": "1/s", "damped_angular_frequency": "rad/s",
                  "radiation_gain": "Pa s/(m sqrt(kg)) per unit point gain" if e is not None else "s",
                  "radiation_phase_rad": "rad", "points.gains": "1/sqrt(kg)", "points.positions": "m (body frame)",
                  "points.normals": "1 (outward unit normal, body frame)", "sample_rate": "Hz"},
        "body_frame": "mesh axes, origin at the centre of mass (model.com_m in mesh coordinates)",
        "sample_rate": fs,
        "model": meta,
        "radiation": radiation,
        "modes": {"frequency_hz": f[idx].tolist(), "damping_ratio": xi.tolist(), "decay_rate": (xi * omega).tolist(),
                  "damped_angular_frequency": wd.tolist(), "radiation_gain": b.tolist(),
                  "radiation_phase_rad": phi.tolist()},
        "points": {"positions": pos.tolist(), "normals": nrm.tolist(),
                   "requested": None if points is None else np.asarray(points, np.float64).reshape(-1, 3).tolist(),
                   "distance_m": None if dist is None else dist.tolist(),
                   "peak_bound": np.abs(a * b[None, :]).sum(axis=1).tolist(),
                   "gains": a.tolist()},
    }


# ---- writing ----------------------------------------------------------------------------------------------------
def _json_text(obj, level: int = 0) -> str:
    """JSON with one key per line and each row of a table (list of lists) on one line."""
    pad, end = "  " * (level + 1), "  " * level
    if isinstance(obj, dict) and obj:
        items = [f"{pad}{json.dumps(k)}: {_json_text(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(obj, list) and obj and isinstance(obj[0], list):
        rows = [pad + json.dumps(r, allow_nan=False) for r in obj]
        return "[\n" + ",\n".join(rows) + "\n" + end + "]"
    return json.dumps(obj, allow_nan=False)


def _faust_string(s) -> str:
    return str(s).replace("\\", "\\\\").replace('"', "'")


def faust_program(bank: dict) -> str:
    """A complete Faust (.dsp) program playing ``bank`` (module docstring): button "strike" -> one impulse of
    J = "impulse" [N s] at hit point "hit point", sum over modes of complex one-pole resonators. Uses Faust
    primitives only (no library import)."""
    md = bank["modes"]
    pts = bank["points"]
    fs = float(bank["sample_rate"])
    d = np.asarray(md["decay_rate"], np.float64)
    wd = np.asarray(md["damped_angular_frequency"], np.float64)
    P = np.exp((-d + 1j * wd) / fs)
    C = np.asarray(md["radiation_gain"], np.float64) * np.exp(1j * np.asarray(md["radiation_phase_rad"], np.float64))
    a = np.asarray(pts["gains"], np.float64)                         # (n_points, m)
    n_pts, m = a.shape
    e = bank["radiation"]["listener_direction"]
    what = (f"pressure [Pa] at {REFERENCE_DISTANCE_M:g} m in body-frame direction {e} (far field: at distance r "
            "use y(t - r/c) / r)") if e is not None else "sum of the modal coordinates q_j [m sqrt(kg)], no radiation"
    peak = max(pts["peak_bound"])

    def num(v) -> str:
        return repr(float(v))

    lines = [
        f"// {bank['format']} v{bank['format_version']}, written by impactsound {bank['impactsound_version']}",
        f"// Material {bank['model']['material']['name']}, {m} modes, {n_pts} hit points, sample rate {fs:g} Hz"
        " (the coefficients are for this rate: export again for another).",
        f"// Output: {what}, per strike impulse J [N s] (slider \"impulse\").",
        "// y(t) = J sum_j a[p][j] b[j] exp(-d[j] t) sin(wd[j] t + phi[j]), sampled exactly by one complex",
        "// one-pole resonator per mode: Z[n] = P Z[n-1] + C a[p][j] x[n], y = Im Z, P = exp((-d + i wd)/fs),",
        "// C = b exp(i phi) (impulse invariance). |y| <= "
        f"{peak:.4g} J (bound over the hit points).",
        f'declare name "{_faust_string(bank["model"]["material"]["name"])} modal bank";',
        'declare author "impactsound export";',
        f'declare impactsound_version "{_faust_string(bank["impactsound_version"])}";',
        f'declare modal_inputs_hash "{_faust_string(bank["model"]["inputs_hash"])}";',
        f'declare modal_data_hash "{_faust_string(bank["model"]["data_hash"])}";',
        f'declare sample_rate "{fs:g}";',
        "",
        'strike = button("strike");',
        "trig = (strike - strike\') > 0;                    // 1 for one sample at each press",
        f'point = int(nentry("hit point", 0, 0, {n_pts - 1}, 1));',
        'impulse = hslider("impulse [unit:N s]", 0.01, 0, 1, 0.0001);',
        "x = trig * impulse;",
        "// complex one-pole resonator: (zr + i zi)[n] = (pr + i pq) (zr + i zi)[n-1] + (cr + i ci) u[n]; output zi",
        "res(pr, pq, cr, ci) = step ~ (_, _) : !, _",
        "with { step(zr, zi, u) = pr * zr - pq * zi + cr * u, pq * zr + pr * zi + ci * u; };",
        "",
    ]
    for j in range(m):
        lines.append(f"// mode {j}: {md['frequency_hz'][j]:.6g} Hz, decay {d[j]:.6g} 1/s")
        lines.append(f"a{j} = waveform{{{', '.join(num(v) for v in a[:, j])}}}, point : rdtable;")
        lines.append(f"mode{j} = x * a{j} : res({num(P[j].real)}, {num(P[j].imag)}, {num(C[j].real)}, "
                     f"{num(C[j].imag)});")
    lines.append("")
    lines.append(f"process = {', '.join(f'mode{j}' for j in range(m))} :> _;")
    return "\n".join(lines) + "\n"


def export_modal(model, fmt: str, out, *, points=None, listener_direction=(0.0, -1.0, 0.0), transfer=None,
                 air=None, max_modes: int | None = None, sample_rate: float = 48000) -> dict:
    """Write the modal bank of ``model`` (a :class:`~impactsound.fem.model.ModalModel`) to ``out``.

    fmt: "json" (the bank: formula, units, modes, per-point gains, radiation, metadata) or "faust" (a .dsp
    program: button "strike", entry "hit point", slider "impulse" [N s]; module docstring for both).
    points: (n, 3) body-frame hit points [m], projected on the surface (at most 5 % of the bounding radius off it);
    None: every surface vertex (vertex normals). listener_direction: body-frame vector towards the listener (the
    radiation gains are far-field pressures at 1 m there), None: no radiation (sum of the modal coordinates).
    transfer: a :class:`~impactsound.transfer.precompute.TransferModel` or the path of its asset: FFAT maps for
    the modes it covers, the compact model for the rest; "auto": the radiation a scene uses for this model (FDTD
    FFAT maps of every mode, the cached asset, computed once when missing); None or "low_order": the compact
    model for all modes. air: object with c [m/s] and rho [kg/m^3] (default
    20 degrees C air). max_modes: keep the lowest N of the modes below min(20 kHz, 0.45 sample_rate).
    sample_rate [Hz]: the Faust coefficients' rate. Returns the bank (dict) that was written.
    """
    name = str(fmt).lower() if isinstance(fmt, str) else fmt
    if name not in FORMATS:
        raise InputError(f"export: fmt = {fmt!r} is not a known format; use one of {', '.join(FORMATS)}")
    try:
        path = Path(out)
    except TypeError:
        raise InputError(f"export: out = {out!r}; give the output file's path") from None
    if not path.parent.is_dir():
        raise InputError(f"export: out = {str(path)!r}: the folder {str(path.parent)!r} does not exist; create it "
                         "or choose another output path")
    bank = modal_bank(model, points=points, listener_direction=listener_direction, transfer=transfer, air=air,
                      max_modes=max_modes, sample_rate=sample_rate)
    text = _json_text(bank) + "\n" if name == "json" else faust_program(bank)
    try:
        path.write_text(text)
    except OSError as exc:
        raise InputError(f"export: out = {str(path)!r} cannot be written ({exc.strerror or exc}); choose another "
                         "output path") from None
    return bank


# ---- reading and the reference evaluation ---------------------------------------------------------------------
def load_bank(path) -> dict:
    """A bank written by :func:`export_modal` with ``fmt="json"``."""
    try:
        bank = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable JSON modal bank ({exc})") from None
    if not isinstance(bank, dict) or bank.get("format") != FORMAT:
        raise InputError(f"{path}: not an {FORMAT} file (write one with `impactsound export --format json`)")
    if int(bank.get("format_version", -1)) != FORMAT_VERSION:
        raise InputError(f"{path}: modal bank format version {bank.get('format_version')} is not {FORMAT_VERSION}; "
                         "export it again")
    return bank


def modal_impulse_response(bank, point_index: int, n_samples: int, sample_rate: float | None = None) -> np.ndarray:
    """The bank's formula for a 1 N s strike at t = 0 at hit point ``point_index``, sampled at t = n / sample_rate
    (default: the bank's rate): (n_samples,) float64 in the bank's output units. ``bank``: dict or JSON path."""
    if not isinstance(bank, dict):
        bank = load_bank(bank)
    gains = bank["points"]["gains"]
    if not isinstance(point_index, (int, np.integer)) or not 0 <= point_index < len(gains):
        raise InputError(f"modal_impulse_response: point_index = {point_index!r}; the bank has hit points "
                         f"0..{len(gains) - 1}")
    fs = float(bank["sample_rate"] if sample_rate is None else sample_rate)
    if not (math.isfinite(fs) and fs > 0):
        raise InputError(f"modal_impulse_response: sample_rate = {sample_rate!r} Hz must be positive")
    md = bank["modes"]
    amp = np.asarray(gains[point_index], np.float64) * np.asarray(md["radiation_gain"], np.float64)
    d = np.asarray(md["decay_rate"], np.float64)
    wd = np.asarray(md["damped_angular_frequency"], np.float64)
    phi = np.asarray(md["radiation_phase_rad"], np.float64)
    t = np.arange(int(n_samples)) / fs
    y = np.zeros(len(t))
    for j0 in range(0, len(amp), _MODE_BLOCK):
        sl = slice(j0, j0 + _MODE_BLOCK)
        y += amp[sl] @ (np.exp(-np.outer(d[sl], t)) * np.sin(np.outer(wd[sl], t) + phi[sl, None]))
    return y


__all__ = ["FORMAT", "FORMATS", "export_modal", "faust_program", "load_bank", "modal_bank", "modal_impulse_response"]
