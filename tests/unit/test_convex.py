"""Convex decomposition for the rigid-body engine (dynamics/convex.py; CoACD, Wei et al. 2022): concave bodies
collide as their shape, convex ones keep one hull, the decomposition is cached, checked and reproducible."""
import h5py
import numpy as np
import pytest
import trimesh

from impactsound.dynamics import build_model, convex, run_dynamics
from impactsound.materials import get_material
from impactsound.scene.model import Body, Ground
from impactsound.scene.primitives import make_primitive

STEEL, CERAMIC, WOOD = get_material("steel"), get_material("ceramic"), get_material("wood_hard")
R_BOWL, T_BOWL = 0.07, 0.005            # the demo bowl (data/demo.toml)


def _no_coacd(*args, **kwargs):
    raise AssertionError("CoACD was called")


def trough(W=0.08, H=0.05, t=0.008, D=0.06):
    """A U-shaped channel (two walls on a floor), opening up (+z): concave, and decomposed in well under 1 s."""
    v2 = np.array([(0, 0), (W, 0), (W, H), (W - t, H), (W - t, t), (t, t), (t, H), (0, H)], float) - [W / 2, 0]
    f2 = np.array([(0, 1, 4), (0, 4, 5), (1, 2, 3), (1, 3, 4), (0, 5, 6), (0, 6, 7)])
    m = trimesh.creation.extrude_triangulation(v2, f2, D)
    m.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
    return m


def body_of(name, mesh, mat, position):
    """A Body whose frame is the mesh's centre of mass (scene/model.py convention); ``position``: of the mesh's
    lowest point's plane, i.e. the COM is placed so that the mesh's bottom is at position[2]."""
    mesh = mesh.copy()
    mesh.apply_translation(-mesh.center_mass)
    pos = np.array(position, float) - [0, 0, mesh.vertices[:, 2].min()]
    return Body(name=name, mesh=mesh, material=mat, mass=mat.rho * mesh.volume,
                inertia=mesh.moment_inertia * mat.rho, position=pos)


def demo_bowl():
    return make_primitive("bowl", {"radius": R_BOWL, "thickness": T_BOWL, "angle_deg": 70.0})


def ball_body(r, position):
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=r)
    m = STEEL.rho * mesh.volume
    return Body(name="ball", mesh=mesh, material=STEEL, mass=m, inertia=np.eye(3) * 0.4 * m * r * r,
                position=np.array(position, float))


def quat_to_mat(q):
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def drop_ball_into_bowl():
    """An 8 mm steel ball dropped from 15 cm, 1 cm off-centre, into the demo bowl standing on a wooden floor.

    Returns the ball's centre every 10 ms for 1 s in the frame of the bowl as built (bottom at z = 0, inner
    spherical surface: centre (0, 0, R), radius R - t), the height of the first ball-bowl contact point above
    the floor (the bowl rests until then), the rim height and the ball radius."""
    mesh = demo_bowl()
    bowl = body_of("bowl", mesh, CERAMIC, (0, 0, 0))
    r = 0.008
    res = run_dynamics([bowl, ball_body(r, (0.01, 0.0, 0.15))], Ground(material=WOOD), 1.0, 2e-4,
                       record_every=50)
    P, Q = res.trajectory_position, res.trajectory_quaternion
    com_built = mesh.center_mass                         # the bowl frame's origin in build coordinates
    rel = np.array([quat_to_mat(q[0]).T @ (p[1] - p[0]) for p, q in zip(P, Q)]) + com_built
    ev = res.events
    hit = np.flatnonzero(np.minimum(ev.a, ev.b) == 0)[0]
    return rel, float(ev.point[hit, 2]), float(np.ptp(mesh.vertices[:, 2])), r


def test_ball_dropped_into_the_bowl_rests_inside_near_the_bottom():
    rel, z_hit, rim, r = drop_ball_into_bowl()
    assert z_hit < 0.5 * rim                             # the first contact is inside, not on a lid at the rim
    late = rel[len(rel) // 2:]                           # 0.5 s to 1 s: bounces over, rolling to and fro
    # Rolling on the inner surface: the centre is R - t - r from the sphere's centre, up to the parts' overshoot
    # of the real surface (a few mm at CoACD threshold 0.07 on a 14 cm bowl) and a contact penetration.
    dist = np.linalg.norm(late - [0, 0, R_BOWL], axis=1)
    assert np.all(dist > R_BOWL - T_BOWL - r - 5e-3) and np.all(dist < R_BOWL - T_BOWL - r + 1e-3)
    assert late[:, 2].max() < 0.4 * rim                  # in the bottom, far below the rim (the hull: above it)
    assert np.hypot(late[:, 0], late[:, 1]).max() < 0.02


def test_with_the_convex_hull_the_ball_never_enters_the_bowl(monkeypatch):
    """The same drop, decomposition off: the ball hits the hull's lid at the rim and ends outside the bowl (what
    the test above excludes)."""
    monkeypatch.setattr(convex, "CONCAVITY_RATIO", 0.0)
    rel, z_hit, rim, r = drop_ball_into_bowl()
    assert z_hit > rim - 1e-3
    assert rel[-1, 2] > rim or np.hypot(rel[-1, 0], rel[-1, 1]) > R_BOWL


def test_concave_body_keeps_the_mass_and_inertia_of_its_mesh():
    bowl = body_of("bowl", demo_bowl(), CERAMIC, (0, 0, 0))
    mm = build_model([bowl], Ground(material=WOOD))
    parts = mm.collision_parts[0]
    assert parts.decomposed and 4 <= len(parts.parts) <= convex.COACD_PARAMS["max_convex_hull"]
    assert parts.volume_ratio < convex.CONCAVITY_RATIO
    m = mm.model
    assert int((mm.geom_owner == 0).sum()) == len(parts.parts)
    assert m.body_mass[1] == pytest.approx(bowl.mass, rel=1e-12)
    assert np.sort(m.body_inertia[1]) == pytest.approx(np.linalg.eigvalsh(bowl.inertia), rel=1e-9)
    assert np.allclose(m.body_ipos[1], 0.0)


@pytest.mark.parametrize("mesh", [trimesh.creation.box(extents=(0.05, 0.03, 0.02)),
                                  trimesh.creation.icosphere(subdivisions=2, radius=0.01),
                                  trimesh.creation.cylinder(radius=0.02, height=0.05, sections=24)],
                         ids=["box", "sphere", "cylinder"])
def test_convex_body_gets_exactly_one_part_without_coacd(mesh, monkeypatch, tmp_path):
    monkeypatch.setattr(convex, "_run_coacd", _no_coacd)
    cp = convex.convex_parts(mesh.vertices, mesh.faces, cache=tmp_path)
    assert not cp.decomposed and len(cp.parts) == 1 and cp.path is None and list(tmp_path.iterdir()) == []
    v, f = cp.parts[0]
    assert trimesh.Trimesh(v, f).volume == pytest.approx(mesh.convex_hull.volume, rel=1e-9)
    mm = build_model([body_of("b", mesh, WOOD, (0, 0, 0))], Ground(material=WOOD))
    assert int((mm.geom_owner == 0).sum()) == 1


def test_without_coacd_a_concave_body_collides_as_its_hull_with_a_warning(monkeypatch, tmp_path):
    def missing(*a, **k):
        raise ImportError("No module named 'coacd'")

    monkeypatch.setattr(convex, "_run_coacd", missing)
    m = trough()
    with pytest.warns(UserWarning, match="pip install coacd"):
        cp = convex.convex_parts(m.vertices, m.faces, name="body 'trough'", cache=tmp_path)
    # no asset written (the lock file that serialises computing it may stay)
    assert not cp.decomposed and len(cp.parts) == 1
    assert [p for p in tmp_path.iterdir() if p.suffix != ".lock"] == []


def test_decomposition_is_cached_and_a_corrupted_cache_file_is_recomputed(monkeypatch, tmp_path):
    m = trough()
    said = []
    first = convex.convex_parts(m.vertices, m.faces, cache=tmp_path, progress=said.append)
    assert first.decomposed and not first.cached and len(first.parts) >= 3 and first.path.is_file()
    assert said == ["convex decomposition of mesh"]
    # The parts are convex and lie within the mesh's bounds.
    for v, f in first.parts:
        assert trimesh.Trimesh(v, f).is_convex
        assert np.all(v >= m.bounds[0] - 1e-9) and np.all(v <= m.bounds[1] + 1e-9)

    real = convex._run_coacd
    monkeypatch.setattr(convex, "_run_coacd", _no_coacd)
    said.clear()
    again = convex.convex_parts(m.vertices, m.faces, cache=tmp_path, progress=said.append)
    assert again.cached and said == [] and _same(again.parts, first.parts)

    calls = []

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(convex, "_run_coacd", counting)
    with h5py.File(first.path, "r+") as f:                 # one vertex altered: the data hash no longer matches
        f["vertices"][0, 0] += 1e-3
    fixed = convex.convex_parts(m.vertices, m.faces, cache=tmp_path)
    assert calls == [1] and not fixed.cached and _same(fixed.parts, first.parts)
    first.path.write_bytes(b"not an HDF5 file")            # unreadable
    fixed = convex.convex_parts(m.vertices, m.faces, cache=tmp_path)
    assert calls == [1, 1] and _same(fixed.parts, first.parts)
    assert convex.convex_parts(m.vertices, m.faces, cache=tmp_path).cached and calls == [1, 1]
    # Other parameters or another mesh are other files.
    other = dict(convex.COACD_PARAMS, threshold=0.05)
    assert convex.decomposition_hash(m.vertices, m.faces, other) != convex.decomposition_hash(m.vertices, m.faces)
    assert convex.decomposition_hash(m.vertices * 1.01, m.faces) != convex.decomposition_hash(m.vertices, m.faces)


def test_progress_names_a_decomposition_being_computed_not_a_cached_one(monkeypatch, tmp_path):
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path))
    bodies = [body_of("trough", trough(), WOOD, (0, 0, 0)), ball_body(0.005, (0.0, 0.0, 0.1))]
    seen = []
    run_dynamics(bodies, Ground(material=WOOD), 0.01, 2e-4, progress=seen.append)
    said = [s for s in seen if isinstance(s, str)]
    assert said == ["convex decomposition of body 'trough'", "stepping"]
    nums = [s for s in seen if not isinstance(s, str)]
    assert nums[0] == 0.0 and nums[-1] == 1.0
    seen.clear()
    run_dynamics(bodies, Ground(material=WOOD), 0.01, 2e-4, progress=seen.append)
    assert not any(isinstance(s, str) for s in seen)


def test_decomposition_is_deterministic(tmp_path):
    """The same parts, bit for bit, from a fresh run and from the session's cache (computed here if absent)."""
    bowl = body_of("bowl", demo_bowl(), CERAMIC, (0, 0, 0)).mesh     # the mesh the drop tests decompose
    a = convex.convex_parts(bowl.vertices, bowl.faces, cache=tmp_path)
    b = convex.convex_parts(bowl.vertices, bowl.faces)
    assert not a.cached and a.decomposed and len(a.parts) > 1
    assert _same(a.parts, b.parts)


def _same(p, q):
    return len(p) == len(q) and all(np.array_equal(v1, v2) and np.array_equal(f1, f2)
                                    for (v1, f1), (v2, f2) in zip(p, q))
