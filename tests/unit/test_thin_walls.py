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
