"""FEM modal frequencies against analytic elasticity, for each installed tet mesher.

References are independent of the code: the free elastic sphere's roots (H. Lamb, 1882, "On the vibrations of an
elastic sphere", Proc. London Math. Soc. 13, 189-212) and the free-free bar's first bending modes, 207.25 /
569.86 / 1113.05 Hz, within 0.05 % of Timoshenko beam theory with Cowper's shear coefficient k = 10(1 + nu) /
(12 + 11 nu) (S. Timoshenko, 1921, "On the correction for shear of the differential equation for transverse
vibrations of prismatic bars", Phil. Mag. 41, 744-746; G. R. Cowper, 1966, "The shear coefficient in
Timoshenko's beam theory", J. Appl. Mech. 33, 335-340), which gives 207.24 / 569.73 / 1112.53 Hz (Euler-Bernoulli:
207.54 / 572.09 / 1121.52 Hz). Conforming FEM with consistent mass is an upper bound, so FEM >= exact is checked
too. The P2 checks run with every installed mesher (``mesher=``: TetGen, fTetWild, Gmsh); measured, the sphere's
largest error is 0.32 / 0.35-0.36 / 0.64 % and the bar's 0.10 / 0.07-0.10 / 0.09 % with them (fTetWild's
meshes differ from run to run).
"""
import numpy as np
import pytest
import trimesh

from impactsound.fem.modal import modal_analysis
from impactsound.materials import make_material
from impactsound.mesh.tetra import MESHERS, mesher_available, resolve_mesher

INSTALLED = [m for m in MESHERS if mesher_available(m)]

STEEL = make_material("steel-test", rho=7850.0, E=200e9, nu=0.30, alpha=0.0, beta=0.0)


def _multiplets(f, sizes):
    """Split ascending frequencies into consecutive groups of the given sizes."""
    out, i = [], 0
    for n in sizes:
        out.append(f[i:i + n])
        i += n
    return out


@pytest.mark.parametrize("order, tol, subdiv, edge, mesher",
                         [(2, 0.01, 3, 3.0e-3, m) for m in INSTALLED]
                         + [(1, 0.05, 3, 1.6e-3, resolve_mesher("auto"))])
def test_lamb_sphere(order, tol, subdiv, edge, mesher):
    # steel, a = 10 mm: T2 124.609 kHz (x5), S2 131.838 kHz (x5), S1 175.868 kHz (x3)
    a = 0.01
    sphere = trimesh.creation.icosphere(subdivisions=subdiv, radius=a)
    m = modal_analysis(sphere, STEEL, order=order, max_modes=13, f_max=1e7, max_edge=edge, mesher=mesher)
    assert m.meta["mesher"] == mesher
    t2, s2, s1 = _multiplets(m.frequencies_hz, [5, 5, 3])
    for group, exact in ((t2, 124.609e3), (s2, 131.838e3), (s1, 175.868e3)):
        assert np.all(np.abs(group / exact - 1) < tol), (group, exact)
        assert np.ptp(group) / group.mean() <= 0.005 * (1 if order == 2 else 4)
    # the faceted sphere is slightly smaller than the true one, which raises frequencies ~ 1/a further: still
    # an upper bound on the exact sphere's spectrum (not for fTetWild, whose surface moves within its envelope and
    # is not deterministic: only the tolerance above applies to it)
    if mesher != "ftetwild":
        assert t2.min() >= 124.609e3 * 0.999


@pytest.mark.parametrize("mesher", INSTALLED)
def test_free_free_bar_bending(mesher):
    # steel bar 500 x 20 x 10 mm, bending across the 10 mm side (z): 3-D values 207.25 / 569.86 / 1113.05 Hz
    bar = trimesh.creation.box(extents=(0.5, 0.02, 0.01))
    m = modal_analysis(bar, STEEL, order=2, max_modes=12, f_max=1300.0, max_edge=0.01, mesher=mesher)
    assert m.meta["mesher"] == mesher
    # match modes by shape: bending across z moves the surface almost only along z
    frac_z = np.array([np.sum(s[:, 2] ** 2) / np.sum(s ** 2) for s in m.shapes])
    fz = m.frequencies_hz[frac_z > 0.9]
    assert len(fz) >= 3
    assert np.allclose(fz[:3], [207.25, 569.86, 1113.05], rtol=0.01), fz[:3]
    # conforming FEM bounds the spectrum of its own geometry from above: the box itself for TetGen and gmsh, but
    # fTetWild re-meshes the surface within an envelope (1e-3 of the bounding-box diagonal, here 0.5 mm against a
    # 10 mm thickness) and is not deterministic, so its bar can be slightly thinner than the box (measured once:
    # 207.01 Hz, -0.12 %); for it only the 1 % agreement above applies
    if mesher != "ftetwild":
        assert np.all(fz[:3] >= np.array([207.25, 569.86, 1113.05]) * 0.999)
