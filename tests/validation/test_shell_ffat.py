"""BEM FFAT maps of thin shells (sources/shell/ffat.py) against analytic fields, and the accuracy of the low-order
default (the simple-source sum of sources/shell/radiation.py) measured against them.

References (none of them is output of this package):

* Breathing spherical shell (radial displacement u = n, radius a; e^{-i w t}, per unit radial ACCELERATION,
  bulk delay e^{ikr} removed): outside, the pulsating sphere A(r) = rho b^2 e^{-ikb} / (r (1 - ikb)) of the
  surface the outside sees, b = a for the closed mid-surface (what ffat.py radiates from for closed shells),
  b = a + t/2 for the two-sheet thickened surface (the thin-wall BEM of open shells, tested on its own). The
  polyhedral surface's volume acceleration is below 4 pi b^2 (icosphere, 320 triangles: 0.966), so the
  reference is the sphere of the same volume acceleration, b^2 = sum_f A_f n_f . u_f / (4 pi).
* Thin rigid disk (radius a) translating along its axis at low ka: a dipole whose strength is set by the added
  mass (8/3) rho a^3 (Lamb, "Hydrodynamics", sec. 108),
      A(r, theta) = rho mu cos(theta) (1 - ikr) / r^2,   mu = (8/3) a^3 / (4 pi) = 2 a^3 / (3 pi).
  A thickened disk of thickness t radiates more: its volume alone adds 1.18 t / a (rho pi a^2 t over the added
  mass), an oblate spheroid of that thickness 0.64 t / a in all. The test extrapolates linearly to t -> 0 from
  t / a = 0.1 and 0.2.

Measured (2 shared cores; one-off bempp-cl compilation ~50 s per process not counted):
* closed breathing sphere (320 triangles, CHIEF): |A / A_ref| - 1 = 0.0000, -0.0011, -0.0045 and phase 0,
  -0.0006, -0.009 rad at ka = 0.05, 0.5, 2 (~2 s each);
* two-sheet sphere, t = 0.4 x the longest edge (13 mm; the thinnest wall the thickness rule admits, 640
  triangles, order-8 quadrature): -0.46 %, -0.0005 rad (ka = 0.5); -0.63 %, -0.0098 rad (ka = 2) (~4 s each);
* thin disk a = 0.1 m, ka = 0.1, 25 mm edges: t = 10 mm (1,008 triangles after one subdivision) 1.179 x the thin
  disk, t = 20 mm (252) 1.326 x; extrapolated to t = 0: 1.032 (the 25 mm P1 mesh does not resolve the rim's
  singularity; finer runs, 3,420 triangles: 1.068 at t = 2.5 mm, 1.114 at t = 5 mm, -> 1.02) (~7-17 s);
* a 12-segment sheet radiated through an 8-segment one (closest-point modes) within 0.9 / 1.9 % (~10 s);
* cymbal and trash can against the low-order default (slow tests): see their docstrings.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import trimesh
from scipy.spatial import Delaunay

from impactsound.errors import InputError, MeshError
from impactsound.sources.shell.ffat import (GAP_RATIO, MAX_FACES, THICKNESS_FRACTION, acceleration_transfer,
                                            closest_point_shapes, default_thickness, radiation_surface,
                                            shell_transfer, thickened_face_count)
from impactsound.sources.shell.radiation import ShellRadiator
from impactsound.transfer import bem

RHO, C = 1.2041, 343.2
AIR = SimpleNamespace(c=C, rho=RHO)


def max_edge(V, F):
    t = V[F]
    return float(np.linalg.norm(np.concatenate([t[:, 1] - t[:, 0], t[:, 2] - t[:, 1], t[:, 0] - t[:, 2]]),
                                axis=1).max())


def disk(a, h):
    """Flat disk of radius a in z = 0 (normals +z), rings of edge ~h."""
    pts = [[0.0, 0.0]]
    nr = max(1, int(round(a / h)))
    for i in range(1, nr + 1):
        r = a * i / nr
        n = max(6, int(round(2 * np.pi * r / h)))
        th = 2 * np.pi * (np.arange(n) + 0.5 * (i % 2)) / n
        pts += list(np.c_[r * np.cos(th), r * np.sin(th)])
    P = np.array(pts)
    F = Delaunay(P).simplices
    V = np.c_[P, np.zeros(len(P))]
    cr = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    F[cr[:, 2] < 0] = F[cr[:, 2] < 0][:, ::-1]
    return V, F


def sphere_shell():
    s = trimesh.creation.icosphere(subdivisions=2, radius=0.1)
    V, F = np.asarray(s.vertices), np.asarray(s.faces)
    return V, F, (V / np.linalg.norm(V, axis=1, keepdims=True)).reshape(-1, 1)


def volume_acceleration(V, F, U):
    """sum_f A_f n_f . u_f of a surface and one displacement field (3 Nv, 1)."""
    u = U.reshape(-1, 3)
    cr = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    return 0.5 * float(np.einsum("fc,fc->f", cr, u[F].mean(axis=1)).sum())


def pulsating(V, F, U, k, x):
    """Pulsating sphere of the same volume acceleration as the surface (V, F) moving by U (3 Nv, 1), per unit
    radial acceleration, bulk delay removed, at points x."""
    r = np.linalg.norm(x, axis=1)
    b = np.sqrt(volume_acceleration(V, F, U) / (4 * np.pi))
    return RHO * b**2 * np.exp(-1j * k * b) / (r * (1 - 1j * k * b))


def fibonacci(n):
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    th = np.pi * (1 + 5**0.5) * i
    return np.c_[np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)]


def power_db(A):
    """Level [dB] of the power mean over rows (directions), per column (mode)."""
    return 10 * np.log10(np.mean(np.abs(A) ** 2, axis=0))


# ---- geometry (no BEM) -----------------------------------------------------------------------------------------
def test_radiation_surface_is_closed_and_carries_the_modes_on_both_sheets():
    from impactsound.scene.shells import make_shell
    m = make_shell("cymbal", None, 16)
    V, F = np.asarray(m.vertices, float), np.asarray(m.faces)
    U = np.random.default_rng(0).normal(size=(3 * len(V), 3))
    Vt, Ft, shapes = radiation_surface(V, F, U, 0.01)
    bem.check_surface(Vt, Ft)                                         # closed, 2-manifold, outward
    assert len(Ft) == thickened_face_count(F)
    assert np.allclose(np.linalg.norm(Vt[:len(V)] - Vt[len(V):], axis=1), 0.01)       # sheets t apart
    u = U.reshape(len(V), 3, 3).transpose(2, 0, 1)
    assert np.array_equal(shapes[:, :len(V)], u) and np.array_equal(shapes[:, len(V):], u)
    # default thickness: 2 % of the size, or 0.4 x the longest edge of the finest mesh within the face budget
    nf = thickened_face_count(F)
    lev = int(np.floor(np.log(MAX_FACES / nf) / np.log(4)))
    assert default_thickness(V, F) == pytest.approx(max(THICKNESS_FRACTION * 0.5, GAP_RATIO * max_edge(V, F)
                                                        / 2**lev), rel=1e-3)
    # a wall thicker than the curvature allows folds the inner sheet
    Vs, Fs, Us = sphere_shell()
    with pytest.raises(MeshError, match="folds"):
        radiation_surface(Vs, Fs, Us, 0.25)


def test_closest_point_interpolation_is_exact_for_linear_fields_and_budget_is_checked():
    from impactsound.scene.shells import make_shell
    fine, coarse = make_shell("sheet", None, 12), make_shell("sheet", None, 8)
    V, F = np.asarray(fine.vertices, float), np.asarray(fine.faces)
    Vc = np.asarray(coarse.vertices, float)
    G = np.random.default_rng(1).normal(size=(3, 3, 2))               # u(x) = G x + b, two fields
    b = np.random.default_rng(2).normal(size=(3, 2))
    U = (np.einsum("cdr,nd->ncr", G, V) + b).reshape(-1, 2)
    Uc = closest_point_shapes(V, F, U, Vc)
    assert np.allclose(Uc, (np.einsum("cdr,nd->ncr", G, Vc) + b).reshape(-1, 2), atol=1e-12)
    with pytest.raises(InputError, match="max_faces"):
        shell_transfer(V, F, U, [100.0, 200.0], max_faces=100)


@pytest.mark.slow          # about 30-55 s of BEM solves on 2 cores
def test_coarse_surface_radiates_like_the_fine_one():
    """A 12-segment sheet's rigid translation and rocking radiated through an 8-segment sheet (modes interpolated
    at closest points) against the 12-segment sheet itself, same acoustic thickness, ka = 0.5, 12 directions at 1.5 m:
    largest error over directions / largest level, measured 0.9 % (translation) and 1.9 % (rocking)."""
    from impactsound.scene.shells import make_shell
    fine, coarse = make_shell("sheet", None, 12), make_shell("sheet", None, 8)
    V, F = np.asarray(fine.vertices, float), np.asarray(fine.faces)
    Vc, Fc = np.asarray(coarse.vertices, float), np.asarray(coarse.faces)
    U = np.stack([np.tile([0.0, 0.0, 1.0], len(V)), np.c_[0 * V[:, 0], 0 * V[:, 0], V[:, 0] / 0.15].ravel()], 1)
    k = 0.5 / 0.18
    om = [k * C, k * C * 1.0001]
    t = GAP_RATIO * max_edge(Vc, Fc)
    a = shell_transfer(V, F, U, om, acoustic_thickness=t, air=AIR)
    b = shell_transfer(V, F, U, om, acoustic_thickness=t, air=AIR, coarse=(Vc, Fc))
    assert b.coarse and not a.coarse
    x = 1.5 * fibonacci(12)
    Aa, Ab = a.transfer(x), b.transfer(x)
    err = np.abs(Ab - Aa).max(axis=0) / np.abs(Aa).max(axis=0)
    print(f"coarse / fine sheet: faces {a.info['faces']} / {b.info['faces']}, max error {err.round(4)}")
    assert np.all(err < 0.05)


# ---- analytic fields -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ka", [0.05, 0.5, 2.0])
def test_closed_breathing_sphere_matches_the_pulsating_sphere(ka):
    """A closed mid-surface radiates from itself (CHIEF, no thickening). Measured |A / A_ref| - 1 and phase
    against the pulsating sphere of the same volume acceleration: see the printed lines (within 0.5 %, 0.01 rad).
    Also checks that ShellTransfer.transfer and ShellRadiator.transfer share one convention (units, sign, bulk
    delay): at ka = 0.05 and 2 m the low-order sum (Kirchhoff, lit triangles) is close to the exact monopole
    (measured 0.97-0.99, -0.025 rad); nearer, fewer triangles are lit (-19 % at 0.3 m), and at higher ka it lacks the
    radiation impedance's 1 / (1 - ika) (measured: +-10 %, -0.21..-0.26 rad at ka = 0.5; +60..+86 % at ka = 2)."""
    V, F, U = sphere_shell()
    k = ka / 0.1
    st = shell_transfer(V, F, U, [k * C], air=AIR, max_modes=1)
    assert st.thickness is None and st.info["closed"] and st.info["faces"] == [320]
    x = np.array([[0, 0, 1.0], [0.6, 0, 0.8], [0.3, -0.4, 0.866], [-0.7, 0.1, -0.7]])
    x = np.concatenate([r * x / np.linalg.norm(x, axis=1, keepdims=True) for r in (0.3, 1.0, 2.0)])
    ref = pulsating(V, F, U, k, x)
    ratio = st.transfer(x, C, RHO)[:, 0] / ref
    assert np.allclose(acceleration_transfer(st.model, x, st.omega, C)[:, 0], ratio * ref, rtol=1e-12)
    low = ShellRadiator.from_surface(V, F, U, [k * C]).transfer(x, C, RHO)[:, 0] / ref
    for name, q in (("BEM", ratio), ("low-order", low)):
        print(f"ka = {ka}: {name} |A / A_ref| - 1 = {np.abs(q).min() - 1:+.4f} .. {np.abs(q).max() - 1:+.4f}, "
              f"phase {np.angle(q).min():+.4f} .. {np.angle(q).max():+.4f} rad")
    assert np.all(np.abs(np.abs(ratio) - 1) < 0.005)
    assert np.all(np.abs(np.angle(ratio)) < 0.02)
    if ka < 0.1:                    # far points: the lit cap is nearly a hemisphere (at r, its area is 1 - a / r)
        far = np.linalg.norm(x, axis=1) > 1.5
        print(f"  low-order at 2 m: {np.abs(low[far]).round(4)}, phase {np.angle(low[far]).round(4)}")
        assert np.all(np.abs(np.abs(low[far]) - 1) < 0.1) and np.all(np.abs(np.angle(low[far])) < 0.05)


@pytest.mark.parametrize("ka", [0.5, 2.0])
def test_thin_wall_bem_on_two_sheets(ka):
    """The thin-wall BEM of open shells (plain equation, order-8 quadrature) on the hardest wall the thickness
    rule admits, t = 0.4 x the longest edge: the thickened breathing sphere, two concentric sheets 13 mm apart
    at 32 mm edges (640 triangles); outside, exactly the pulsating sphere of the outer sheet. Measured |A /
    A_ref| - 1, phase: -0.46 %, -0.0006 rad (ka = 0.5); -0.63 %, -0.0098 rad (ka = 2). (At ka = 0.05 the sealed
    cavity's pressure, ~3 / (ka)^2 times the outside's, leaks through the near-singular quadrature: -17 %; so
    closed shells do not use this path.)"""
    from impactsound.sources.shell.ffat import QUADRATURE_ORDER, regular_quadrature
    from impactsound.transfer.precompute import face_normal_data
    V, F, U = sphere_shell()
    t = GAP_RATIO * max_edge(V, F)
    k = ka / 0.1
    w = k * C
    Vt, Ft, shapes = radiation_surface(V, F, U, t)
    g = RHO * w**2 * face_normal_data(Vt, Ft, shapes[0])             # dp/dn per unit displacement
    with regular_quadrature(QUADRATURE_ORDER):
        sol = bem.solve_neumann(Vt, Ft, k, g, method="plain")
    x = np.array([[0, 0, 1.0], [0.6, 0, 0.8], [0.3, -0.4, 0.866]]) * np.array([[0.3], [1.0], [2.0]])
    r = np.linalg.norm(x, axis=1)
    A = -sol.evaluate(x) * np.exp(-1j * k * r) / w**2
    q = A / pulsating(Vt, Ft[:len(F)], np.concatenate([U, U]), k, x)
    print(f"ka = {ka}: two sheets |A / A_ref| - 1 = {np.abs(q).min() - 1:+.4f} .. {np.abs(q).max() - 1:+.4f}, "
          f"phase {np.angle(q).min():+.4f} .. {np.angle(q).max():+.4f} rad")
    assert np.all(np.abs(np.abs(q) - 1) < 0.01)
    assert np.all(np.abs(np.angle(q)) < 0.02)


def test_thin_disk_added_mass_dipole():
    """Rigid translation of a disk (a = 0.1 m, ka = 0.1) against Lamb's thin-disk dipole, at 1 and 3 m in four
    directions: the thickened disk is 1 + ~1.5-2 t / a louder; linear extrapolation to t = 0 gives Lamb's
    dipole to the P1 mesh's accuracy at the rim (measured 1.031, see the module docstring)."""
    a, ka = 0.1, 0.1
    V, F = disk(a, 0.025)
    U = np.tile([0.0, 0.0, 1.0], len(V)).reshape(-1, 1)
    k = ka / a
    th = np.array([0.0, 0.5, 1.0, 2.5])
    d = np.c_[np.sin(th), 0 * th, np.cos(th)]
    x = np.concatenate([d, 3 * d])
    r = np.linalg.norm(x, axis=1)
    ref = RHO * 2 * a**3 / (3 * np.pi) * (x[:, 2] / r) * (1 - 1j * k * r) / r**2
    ratios = {}
    for t in (0.01, 0.02):
        st = shell_transfer(V, F, U, [k * C], acoustic_thickness=t, air=AIR, max_modes=1)
        q = st.transfer(x)[:, 0] / ref
        assert np.all(np.abs(np.angle(q)) < 0.005)
        assert np.ptp(np.abs(q)) < 0.01 * np.abs(q).mean()              # a dipole: cos(theta) (1 - ikr) / r^2
        ratios[t] = float(np.abs(q).mean())
    extrapolated = 2 * ratios[0.01] - ratios[0.02]
    print(f"thickened disk / Lamb: t = 10 mm {ratios[0.01]:.4f}, 20 mm {ratios[0.02]:.4f}, t -> 0 {extrapolated:.4f}")
    for t, q in ratios.items():                 # louder than the thin disk: 1 + beta t / a, beta measured 1.5-1.8
        assert 1.0 + 1.0 * t / a < q < 1.0 + 2.5 * t / a
    assert abs(extrapolated - 1.0) < 0.05


# ---- accuracy of the low-order default ---------------------------------------------------------------------------
def low_order_vs_bem(shape, material, h, resolution, modes, size):
    """Level errors L_low - L_BEM [dB] of the low-order sum against the BEM FFAT transfer, 24 directions at 1 m
    and at 2 m: (per mode, power mean over the listeners; per listener and mode), with a printed table."""
    import time

    from impactsound.fem.shell import ShellModel, shell_modes
    from impactsound.materials import get_material
    from impactsound.scene.shell_body import lumped_mass_properties
    from impactsound.scene.shells import make_shell
    mat = get_material(material)
    m = make_shell(shape, None, resolution)
    V, F = np.asarray(m.vertices, float), np.asarray(m.faces)
    _, com, _ = lumped_mass_properties(V, F, h, mat.rho)
    V = V - com
    sm = shell_modes(ShellModel(V, F, h, mat), f_max=None, n_modes=max(modes) + 1)
    U, om = sm.U[:, modes], np.sqrt(sm.omega2[modes])
    t0 = time.perf_counter()
    st = shell_transfer(V, F, U, om, air=AIR, max_modes=len(modes))
    seconds = time.perf_counter() - t0
    X = np.concatenate([1.0 * fibonacci(24), 2.0 * fibonacci(24)])
    A_bem = st.transfer(X, C, RHO)
    A_low = ShellRadiator.from_surface(V, F, U, om).transfer(X, C, RHO)
    e_mode = power_db(A_low) - power_db(A_bem)
    e_pt = 20 * np.log10(np.abs(A_low) / np.abs(A_bem))
    from impactsound.sources.shell.screen import screen_radiator
    t1 = time.perf_counter()
    A_scr = screen_radiator(V, F, U, om, air=AIR).transfer(X, C, RHO)
    s_scr = time.perf_counter() - t1
    s_mode = power_db(A_scr) - power_db(A_bem)
    s_pt = 20 * np.log10(np.abs(A_scr) / np.abs(A_bem))
    hold = np.asarray(st.info["holdout_error"])[:, -1]
    print(f"\n{shape}: BEM {seconds:.0f} s for {len(om)} modes, t = {st.thickness * 1e3:.1f} mm, "
          f"{st.info['faces'][0]} triangles, FFAT 4-term held-out error max {hold.max():.3f}")
    for name, em, ep in (("low-order", e_mode, e_pt), (f"screen ({s_scr:.1f} s)", s_mode, s_pt)):
        print(f"  {name} - BEM:")
        for j, mode in enumerate(modes):
            print(f"  mode {mode + 1:2d} {om[j] / (2 * np.pi):6.1f} Hz ka {om[j] / C * size / 2:4.2f}: power mean "
                  f"{em[j]:+6.1f} dB, per listener median {np.median(ep[:, j]):+6.1f}, |.| p90 "
                  f"{np.percentile(np.abs(ep[:, j]), 90):5.1f}")
        print(f"  per-mode power-mean error: median {np.median(em):+.1f} dB, |.| median "
              f"{np.median(np.abs(em)):.1f}, |.| p90 {np.percentile(np.abs(em), 90):.1f}; all listener-mode "
              f"pairs: |.| median {np.median(np.abs(ep)):.1f}, p90 {np.percentile(np.abs(ep), 90):.1f} dB")
    assert hold.max() < 0.05                                           # the maps reproduce their BEM solves
    return e_mode, e_pt, s_mode, s_pt


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cymbal_low_order_vs_bem():
    """The low-order sum (two-sided Rayleigh) and the screen BEM (the default) against BEM FFAT maps, cymbal (0.5 m, 32 segments, 298
    triangles, bronze, h = 1.2 mm), modes 1-12, 16, 20, 30, 40 (28-356 Hz, ka = 0.13-1.6), 48 listeners (24
    directions at 1 m and at 2 m). BEM: default acoustic thickness 13 mm (0.4 x the 32 mm edge after one
    subdivision), 2,688 triangles per mode.

    Measured (1,228 s of BEM on 2 shared cores, ~77 s per mode; FFAT 4-term held-out error <= 3.5 %), level errors
    L_low - L_BEM [dB], median over the 48 listeners (power mean over them in brackets):
        modes 1-6   (28-73 Hz, ka 0.13-0.33):  +22.6 +22.4 +20.0 +19.3 +21.8 +18.5   (+35 .. +49)
        modes 7-12  (105-182 Hz, ka 0.5-0.8):   +8.5  -0.4  +6.9  -4.0 -11.9  +4.1   (+14 .. +35)
        modes 16, 20, 30, 40 (216-356 Hz, ka 1.0-1.6): -5.0 -7.9 -4.6 -3.6           (+15, -8.4, -5.4, -4.7)
    All 768 listener-mode pairs: |error| median 12.7 dB, 90th percentile 33.4 dB; per-mode power-mean |error|
    median 32.1 dB, 90th percentile 47.0 dB. Below ka ~ 0.5 the baffled sum misses the acoustic short circuit
    round the rim (tens of dB too loud, most of all edge-on, where its two-sided sign flips across the conical
    profile); above ka ~ 1 it is a few dB too quiet in median with +-20 dB scatter over directions. The BEM
    reference itself: acoustic thickness 13 -> 26 mm moved modes 1 and 5 by +1.3 and +0.3 dB, modes 9-20 by
    <= 0.02 dB; the unsubdivided mesh differed by <= 2.3 dB (sources/shell/ffat.py docstring).
    The asserts document these numbers (bounds ~20 % above the measured spread).
    """
    e_mode, e_pt, s_mode, s_pt = low_order_vs_bem("cymbal", "bronze", 0.0012, 32, list(range(12)) + [15, 19, 29, 39], 0.5)
    med = np.median(e_pt, axis=0)
    assert np.all(med[:6] > 15.0)                          # ka <= 0.33: +18.5 .. +22.6 dB (short circuit missed)
    assert np.all(med[12:] < 0.0)                          # ka >= 1: -3.6 .. -7.9 dB
    assert np.median(np.abs(e_pt)) < 15.0 and np.percentile(np.abs(e_pt), 90) < 40.0      # 12.7, 33.4
    # the screen default on the same 298-triangle mid-surface: per-mode power-mean errors +0.1 +0.1 +1.5 -0.1 -4.5
    # -4.0 -3.9 -16.9 -7.5 -0.9 -4.9 -2.9 -2.0 -2.0 -1.2 -1.8 dB (|.| median 2.0, p90 6.2); listener-mode pairs
    # |.| median 2.4, p90 13.5 dB. Subdivided once (1,192 triangles, as scenes do within their budget): |.| median
    # 1.0 / pairs 1.4 dB, p90 9.2; mode 7 then -12.5, mode 8 -6.2 (a near-degenerate pair of weak radiators whose
    # field is a residue of cancelling neighbours; both models' meshes matter there).
    assert np.median(np.abs(s_mode)) < 3.0 and np.percentile(np.abs(s_pt), 90) < 16.0
    assert np.median(np.abs(s_pt)) < 3.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_trash_can_low_order_vs_bem():
    """As the cymbal test for the trash can (0.75 m, 24 segments, 986 triangles, steel, h = 2 mm), modes 1-8
    (65-189 Hz). BEM: default acoustic thickness 33 mm (0.4 x the 83 mm edge; 2,020 triangles, no subdivision
    within max_faces = 3000).

    Measured (554 s of BEM, ~69 s per mode; FFAT 4-term held-out error <= 3.2 %), level errors L_low - L_BEM
    [dB], median over the 48 listeners (power mean over them in brackets):
        modes 1-8 (65-189 Hz, ka 0.30-0.87): +4.4 +17.4 +17.8 +4.8 +4.7 +44.9 +42.2 +5.2
                                             (+1.6 +17.9 +17.8 +4.5 +4.5 +38.9 +36.6 +5.4)
    All 384 listener-mode pairs: |error| median 14.9 dB, 90th percentile 46.8 dB; per-mode power-mean |error|
    median 11.6 dB, 90th percentile 37.3 dB. The low-order sum is louder for every mode: by ~5 dB for modes 1, 4,
    5, 8, by 17-45 dB for the degenerate pairs 2-3 and 6-7 (it models neither the short circuit between
    neighbouring wall regions nor the occlusion of the inside faces). The BEM
    reference was not refined further here (2,020 triangles and t = 33 mm = 4.4 % of the can's size are what
    max_faces = 3000 allows; the cymbal's refinement study bounds such effects to a few dB).
    The asserts document these numbers (bounds ~20 % beyond the measured spread).
    """
    e_mode, e_pt, s_mode, s_pt = low_order_vs_bem("trash_can", "steel", 0.002, 24, list(range(8)), 0.5)
    med = np.median(e_pt, axis=0)
    assert np.all(med > 3.0)                                           # +4.4 .. +44.9 dB: always too loud
    assert np.median(np.abs(e_pt)) < 18.0 and np.percentile(np.abs(e_pt), 90) < 55.0      # 14.9, 46.8
    # the screen default (986 triangles, 17 s for the 8 modes on a loaded machine): per-mode power-mean errors
    # +0.6 -1.8 -1.8 -0.8 -0.8 -2.0 -2.0 -1.3 dB; listener-mode pairs |.| median 1.6, p90 2.0 dB (the BEM's 33 mm
    # wall makes it ~1-2 dB louder)
    assert np.all(np.abs(s_mode) < 3.0) and np.percentile(np.abs(s_pt), 90) < 3.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_water_bottle_screen_vs_bem():
    """The open-mouthed water bottle (polycarbonate, h = 0.5 mm, 16 segments, 732 triangles; nearly closed: air
    inside talks to the outside through the 26 mm mouth), modes 1-6 (214-430 Hz, ka 0.6-1.2). BEM: t = 7.2 mm,
    1,476 triangles, 174 s. Measured per-mode power-mean errors, screen: +3.2 -1.9 -1.5 -2.4 -2.5 -2.4 dB
    (listener-mode pairs |.| median 2.4, p90 3.4 dB; 1.6 s); low-order: -0.6 +3.7 +3.8 +33.1 +53.0 +24.0 dB."""
    e_mode, e_pt, s_mode, s_pt = low_order_vs_bem("water_bottle", "polycarbonate", 0.0005, 16, list(range(6)), 0.3)
    assert np.all(np.abs(s_mode) < 4.0) and np.percentile(np.abs(s_pt), 90) < 5.0
    assert np.max(e_mode) > 20.0                               # the low-order sum misses the bottle's occlusion
