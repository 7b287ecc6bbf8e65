"""A solid FEM model of walls thinner than a mesher can fill affordably is refused with the thickness found and
the thin-shell alternative; one that is merely large gets a warning. Regression: a 0.2 mm steel cup (a drink can's
wall) ran its modal analysis for more than 5 minutes without a word."""
import warnings

import numpy as np
import pytest
import trimesh

from impactsound.errors import MeshError
from impactsound.fem.modal import MAX_WALL_TETS, check_walls, modal_analysis
from impactsound.materials import get_material
from impactsound.mesh.tetra import tetrahedralize


def cup(wall):
    prof = np.array([[0, 0], [0.04, 0], [0.04, 0.09], [0.04 - wall, 0.09], [0.04 - wall, wall], [0, wall]])
    return trimesh.creation.revolve(prof, sections=48)


def test_too_thin_wall_is_refused_at_once_naming_the_thickness():
    with pytest.raises(MeshError, match=r"can.obj: its walls are about 0\.199 mm thick.*shell = \{thickness"):
        modal_analysis(cup(0.0002), get_material("steel"), source="can.obj")


def test_estimate_follows_tetgens_count_and_solids_pass():
    # the estimate A / t^2 (t = 2 V / A) against TetGen's own count on the 1.5 mm cup: within 25 %
    c = cup(0.0015)
    est = check_walls(c)
    _, tets = tetrahedralize(c)
    assert abs(est / len(tets) - 1) < 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no warning for a 3 mm cup or a solid sphere
        check_walls(cup(0.003))
        check_walls(trimesh.creation.icosphere(subdivisions=3, radius=0.5))
    with pytest.warns(UserWarning, match="0.597 mm thick"):
        n = check_walls(cup(0.0006))
    assert n < MAX_WALL_TETS


def test_default_edge_follows_a_curved_wall_and_leaves_solids_and_plates():
    from impactsound.mesh.tetra import WALL_EDGE_FRACTION, _default_max_edge
    from impactsound.scene.primitives import make_primitive
    mug = make_primitive("mug", {}, "mug")
    t = 2 * mug.volume / mug.area
    assert _default_max_edge(mug) == pytest.approx(WALL_EDGE_FRACTION * t)
    # solids and a flat plate keep the box rule (smallest side / 5, at least longest / 25)
    for m in (trimesh.creation.box(extents=(0.06, 0.05, 0.04)), trimesh.creation.icosphere(3, radius=0.008),
              trimesh.creation.box(extents=(0.10, 0.08, 0.002)), trimesh.creation.box(extents=(0.2, 0.025, 0.012))):
        e = m.extents
        assert _default_max_edge(m) == pytest.approx(max(e.min() / 5, e.max() / 25))
    # a wall much thinner than its extent: the tet budget relaxes the edge (about 40 k tets, not 400 k)
    _, tets = tetrahedralize(cup(0.0015))
    assert len(tets) < 60_000


@pytest.mark.slow
def test_mug_modes_at_the_default_edge_are_within_one_percent_of_a_converged_mesh():
    # reference: TetGen at half the 5 mm wall (~130 k tets; its own error ~0.15 %: 2.5 mm and 3.5 mm meshes agree
    # to 0.41 %, and P2 converges ~h^4). The box rule alone (16 mm) was 3.8 % off, one element through the wall
    # (5 mm) 1.9 %
    from impactsound.scene.primitives import make_primitive
    mug = make_primitive("mug", {}, "mug")
    mat = get_material("ceramic")
    f = modal_analysis(mug, mat, max_modes=20, f_max=1e7).frequencies_hz
    nodes, tets = tetrahedralize(mug, max_edge=0.0025)
    ref = modal_analysis(None, mat, nodes=nodes, tets=tets, max_modes=20, f_max=1e7).frequencies_hz
    assert np.abs(f / ref - 1).max() < 0.01


def test_modal_cache_key_follows_the_default_edge(monkeypatch):
    # regression: the key held max_edge = None for the default, so a model meshed under an older default rule was
    # reused after the rule changed (the output depended on what the cache held)
    from impactsound.fem.modal import modal_inputs_hash
    from impactsound.mesh import tetra
    from impactsound.scene.primitives import make_primitive
    mug, steel = make_primitive("mug", {}, "mug"), get_material("steel")
    box = trimesh.creation.box(extents=(0.06, 0.05, 0.04))
    before = modal_inputs_hash(mug, steel, 2), modal_inputs_hash(box, steel, 2)
    monkeypatch.setattr(tetra, "WALL_EDGE_FRACTION", 0.5)
    after = modal_inputs_hash(mug, steel, 2), modal_inputs_hash(box, steel, 2)
    assert before[0] != after[0]           # the mug's default edge changed: another model
    assert before[1] == after[1]           # the solid's did not
