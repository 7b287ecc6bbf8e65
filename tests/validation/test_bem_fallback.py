"""CHIEF -> Burton-Miller fallback of the exterior BEM solve, against the exact oscillating sphere."""
import numpy as np
import pytest
import trimesh

from impactsound.transfer import bem

A, RHO, C = 0.1, 1.2, 343.0


def test_inconsistent_chief_falls_back_to_burton_miller(monkeypatch):
    """A CHIEF solve whose residual exceeds its tolerance (forced here: thin objects do it for real) is redone
    with Burton-Miller, with a warning; the answer still matches the exact oscillating sphere (U = 1 m/s along z,
    k a = 1, 320 triangles) within 5 % at 1 m."""
    s = trimesh.creation.icosphere(subdivisions=2, radius=A)
    v, f = np.asarray(s.vertices), np.asarray(s.faces)
    t = v[f]
    n = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    ka = 1.0
    k = ka / A
    g = 1j * k * C * RHO * n[:, 2]                                     # dp/dn = i w rho v_n
    monkeypatch.setattr(bem, "CHIEF_RESIDUAL_TOL", -1.0)
    with pytest.warns(bem.BemFallbackWarning, match="Burton-Miller"):
        sol = bem.solve_neumann(v, f, k, g)
    x = np.array([[0.0, 0.0, 1.0], [0.6, 0.0, 0.8]])
    r = np.linalg.norm(x, axis=1)
    ex = (-1j * RHO * C * (x[:, 2] / r) * ka**3 * (1 - 1j * k * r) * np.exp(1j * k * (r - A))
          / ((k * r) ** 2 * (2 - 2j * ka - ka**2)))
    p = sol.evaluate(x)
    assert np.all(np.abs(np.abs(p) / np.abs(ex) - 1) < 0.05)
    assert sol.residual < bem.RESIDUAL_TOL                              # the Burton-Miller system's residual


def test_vectorised_sincos_matches_libm():
    """The representation formula's own sin/cos (Cody-Waite reduction + Taylor) against libm, 0..2000 rad."""
    import math

    import numba as nb

    @nb.njit
    def worst(xs):
        e = 0.0
        for x in xs:
            s, c = bem._sincos(x)
            e = max(e, abs(s - math.sin(x)), abs(c - math.cos(x)))
        return e

    assert worst(np.linspace(0.0, 2000.0, 400001)) < 5e-15


def test_importing_bempp_leaves_no_temporary_folder(tmp_path):
    """bempp-cl makes a temporary folder at import; a process that used the BEM leaves none behind."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "from impactsound.transfer import bem; bem._api()"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
