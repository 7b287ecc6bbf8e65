"""Scene objects as walls for the simulated grains (sources/granular/obstacles.py): a closed solid as static
spheres, checked against the exact geometry it stands for.

* The spheres lie inside the solid (exact closest points: none pokes out) and touch it: grains dropped onto a
  box's top face land at the plane's time and speed to within the stated dip (BUMP grain radii of height) and
  rebound along a normal tilted by less than the stated bound, against the simulator's exact plane.
* A thin wall gets spheres of half its thickness, never poking out of the far side; a wall thinner than the
  smallest sphere, an open mesh and too many spheres are refused with what to change.
* A pour onto a box container in a scene: tests/unit/test_granular_scene.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import trimesh

from impactsound.errors import InputError
from impactsound.sources.granular.obstacles import BUMP, RATIO, surface_spheres
from impactsound.sources.granular.simulate import Floor, GrainSet, StaticSpheres, simulate

A = 0.001                                         # grain radius [m]


def _box(extents, z0=0.0):
    b = trimesh.creation.box(extents=extents)
    b.apply_translation([0.0, 0.0, z0 + extents[2] / 2])
    return b


def _outside(mesh, C, R):
    """How far each sphere reaches out of the solid [m] (exact closest point; > 0: pokes out)."""
    _, d, _ = trimesh.proximity.closest_point(mesh, C)
    inside = mesh.contains(C)
    return np.where(inside, R - d, R + d)


def test_spheres_fill_a_box_from_inside():
    box = _box([0.06, 0.05, 0.03])
    C, R = surface_spheres(box.vertices, box.faces, A)
    assert R.max() == pytest.approx(RATIO * A) and R.min() >= 0.25 * A
    assert _outside(box, C, R).max() < 1e-3 * A
    # every point of a face, away from the edges, is covered: a grain touching the face there touches a sphere
    # within the dip (BUMP grain radii)
    rng = np.random.default_rng(0)
    p = np.c_[rng.uniform(-0.025, 0.025, 400), rng.uniform(-0.02, 0.02, 400), np.full(400, 0.03)]
    g = p + np.array([0.0, 0.0, A])                             # grain centres resting on the top face
    gap = (np.linalg.norm(g[:, None, :] - C[None], axis=2) - R[None] - A).min(axis=1)
    assert gap.max() <= BUMP * A * 1.05 and gap.min() >= -1e-9


def test_a_grain_dropped_on_the_box_lands_as_on_its_plane():
    """40 grains dropped 5 cm onto the top face: first hits at t = sqrt(2 h / g) and v0 = sqrt(2 g h) of the exact
    plane, within the dip (a height of BUMP a: 0.05 mm) and its speed change; rebound normals within the tilt
    bound asin(s / (sqrt 2 (R + a))) of the vertical."""
    box = _box([0.1, 0.08, 0.04])
    C, R = surface_spheres(box.vertices, box.faces, A)
    gx, gy = np.meshgrid(np.linspace(-0.03, 0.03, 8), np.linspace(-0.025, 0.025, 5))
    xy = np.c_[gx.ravel(), gy.ravel()] + np.random.default_rng(1).uniform(-1e-3, 1e-3, (40, 2))
    h, g = 0.05, 9.81
    grains = GrainSet(positions=np.c_[xy, np.full(40, 0.04 + A + h)], velocities=np.zeros((40, 3)),
                      radii=np.full(40, A), material=np.zeros(40, np.int64), materials=("glass_bead",))
    out = {}
    for name, walls in (("spheres", [StaticSpheres(C, R, body="box")]), ("plane", [Floor(z=0.04, body="box")])):
        ev = simulate(grains, walls, duration=0.12, restitution=0.5, v_rest=0.0)
        w = ev.kind == 1
        first = {}
        for i in np.flatnonzero(w)[np.argsort(ev.t[w], kind="stable")]:
            first.setdefault(int(ev.id_a[i]), i)
        idx = np.array(sorted(first.values()))
        assert len(idx) == 40
        out[name] = (ev.t[idx], ev.v0[idx], np.abs(ev.normal[idx, 2]))
    t_exact, v_exact = math.sqrt(2 * h / g), math.sqrt(2 * g * h)
    assert np.allclose(out["plane"][0], t_exact, atol=1e-9) and np.allclose(out["plane"][1], v_exact, rtol=1e-9)
    t, v0, nz = out["spheres"]
    assert np.abs(t - t_exact).max() <= BUMP * A / v_exact * 1.05
    assert np.abs(v0 / v_exact - 1).max() < 0.02                  # the normal component of the same speed
    s = math.sqrt(4 * BUMP * A * (RATIO * A + A))
    assert np.arccos(nz.min()) <= math.asin(s / (math.sqrt(2) * (RATIO * A + A))) * 1.02


def test_thin_wall_gets_half_thickness_spheres():
    plate = _box([0.04, 0.04, 0.003])                          # 3 mm: thinner than two 4 mm spheres
    C, R = surface_spheres(plate.vertices, plate.faces, A)
    assert R.max() <= 0.0015 * (1 + 1e-6) and R.min() >= 0.25 * A
    assert _outside(plate, C, R).max() < 1e-3 * A


def test_bad_walls_are_refused():
    with pytest.raises(InputError, match="too thin"):
        surface_spheres(*(lambda b: (b.vertices, b.faces))(_box([0.04, 0.04, 0.0003])), A, where="object 'foil'")
    open_mesh = _box([0.04, 0.04, 0.01])
    open_mesh = trimesh.Trimesh(open_mesh.vertices, open_mesh.faces[:-2], process=False)
    with pytest.raises(InputError, match="closed solids"):
        surface_spheres(open_mesh.vertices, open_mesh.faces, A, where="object 'lid'")
    with pytest.raises(InputError, match="spheres"):
        big = _box([3.0, 3.0, 1.0])
        surface_spheres(big.vertices, big.faces, A, where="object 'table'")
