"""Is a shell mesh fine enough for the modes it is asked for? Edges per bending wavelength, and the advice.

A thin shell's flexural wave at frequency f has wavelength lambda_b = 2 pi (D / (rho h omega^2))^(1/4) with
D = E h^3 / (12 (1 - nu^2)) (Kirchhoff plate theory; Graff 1975, "Wave Motion in Elastic Solids", sec. 4.2). A
discrete shell (Grinspun et al. 2003; Chadwick, An & James 2009, sec. 2.1) resolves a mode when its edges are short
against that wavelength; too coarse a mesh makes the modes come out low (it is too soft) and too dense in
frequency.

Measured on the built-in 0.5 m bronze cymbal (h = 1.2 mm, its 120 lowest modes, 29.8 Hz-1.63 kHz) against a
converged reference (resolutions 192 and 256 extrapolated at second order; the flap and mid-edge bending schemes
extrapolate to the same frequencies within 0.5 %): a mode with 16 or more mean edges per bending wavelength was
within 1.8 % (both schemes, resolutions 144-256), 12-16 edges within 2.0-3.1 %, 9-12 within 2.2-4.7 %, 7-9 within
3.8-7.4 %, 3-5 up to 15.5 % low. So a mesh is called resolved for f when lambda_b(f) / (mean edge) >= 16 and a
warning is given below 12.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

#: edges per bending wavelength that keep modes within ~2 % (module docstring)
TARGET_EDGES = 16.0
#: below this many at the highest kept mode, a :class:`ShellResolutionWarning`
WARN_EDGES = 12.0


#: how much higher a coarse mesh's top mode may come out once resolved (module docstring: up to 15 % low)
RISE = 1.15


class ShellResolutionWarning(UserWarning):
    """A shell mesh is too coarse for the highest modes it keeps (they come out low)."""


def bending_wavelength(f_hz, material, thickness: float):
    """Flexural wavelength [m] of a plate of ``material`` and ``thickness`` [m] at ``f_hz``."""
    D = material.E * thickness**3 / (12.0 * (1.0 - material.nu**2))
    omega = 2.0 * np.pi * np.asarray(f_hz, np.float64)
    return 2.0 * np.pi * (D / (material.rho * thickness * omega**2)) ** 0.25


def mean_edge(vertices, faces) -> float:
    """Mean edge length [m] over the triangles (each interior edge counted twice)."""
    V, F = np.asarray(vertices, np.float64), np.asarray(faces, np.int64)
    return float(np.linalg.norm(V[F[:, [1, 2, 0]]] - V[F], axis=2).mean())


def auto_edge(area: float, modes: int, f_max: float, material, thickness: float) -> float:
    """Edge length [m] for ``resolution = "auto"``: TARGET_EDGES per bending wavelength at the top kept mode, whose
    frequency is estimated without a solve from a plate's asymptotic mode count N(omega) = area omega / (4 pi)
    sqrt(rho h / D) (Cremer, Heckl & Petersson 2005, ch. 7; curvature stiffens a shell's lowest modes, so this
    errs towards a finer mesh), times :data:`RISE`, capped at f_max."""
    D = material.E * thickness**3 / (12.0 * (1.0 - material.nu**2))
    omega = 4.0 * math.pi * int(modes) / (float(area) * math.sqrt(material.rho * thickness / D))
    f_top = min(RISE * omega / (2.0 * math.pi), float(f_max))
    return float(bending_wavelength(f_top, material, thickness)) / TARGET_EDGES


def _segments_for(setup, edge: float, res: int) -> int:
    """The least segment count at which the built-in shape's mean edge is at most ``edge`` [m] (the shapes' ring
    meshes do not scale exactly as 1/segments, so the shape is rebuilt: milliseconds each)."""
    from ...scene.shells import make_shell

    def edge_at(n):
        m = make_shell(setup.shape, setup.size, n)
        return mean_edge(m.vertices, m.faces)

    lo, hi = res, max(res + 1, res * 2)
    while edge_at(hi) > edge and hi < 4096:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if edge_at(mid) > edge:
            lo = mid
        else:
            hi = mid
    return hi


def check_resolution(setup, material, f_top: float, name: str, default_segments: int) -> dict:
    """Edges per bending wavelength at the highest kept mode ``f_top`` [Hz] of a scene shell, and a
    :class:`ShellResolutionWarning` with the resolution that would resolve it when under :data:`WARN_EDGES`.

    Returns
    -------
    dict
        ``edges_per_bending_wavelength`` and ``resolved_below_hz`` (the frequency up to which the mesh has
        :data:`TARGET_EDGES`), for the render's sidecar.
    """
    edge = mean_edge(setup.vertices, setup.faces)
    lam = float(bending_wavelength(f_top, material, setup.thickness))
    epw = lam / edge
    resolved = float(f_top) * (epw / TARGET_EDGES) ** 2          # lambda_b ~ f^(-1/2)
    info = {"edges_per_bending_wavelength": epw, "resolved_below_hz": resolved}
    if epw >= WARN_EDGES:
        return info
    # the finer mesh's top mode comes out higher (a coarse one is too soft: up to ~15 %, module docstring), so
    # the advice aims at 16 edges at 1.15 f_top
    want = float(bending_wavelength(RISE * f_top, material, setup.thickness)) / TARGET_EDGES
    if setup.shape is not None:
        res = setup.spec.resolution if setup.spec.resolution is not None else default_segments
        if isinstance(res, float) or res == "auto":
            fix = f"shell.resolution = {want:.3g} (an edge length [m])"
        else:
            fix = f"shell.resolution = {_segments_for(setup, want, int(res))} (now {res})"
    else:
        fix = f"a mesh refined to a mean edge of {want * 1e3:.3g} mm (now {edge * 1e3:.3g} mm)"
    warnings.warn(f"object {name!r}: its shell mesh has {epw:.1f} edges per bending wavelength at its highest kept "
                  f"mode ({f_top:.0f} Hz), so its upper modes come out low (measured on a cymbal: 16 edges keep "
                  f"modes within 2 %, 8 leave them ~4-7 % low, 4 ~15 %); it resolves modes up to "
                  f"{resolved:.0f} Hz. For {TARGET_EDGES:.0f} edges at {f_top:.0f} Hz use {fix}, or keep fewer "
                  "modes (shell.modes, shell.f_max)", ShellResolutionWarning, stacklevel=3)
    return info
