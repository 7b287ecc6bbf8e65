"""FDTD transfer planning: resolution rules, grouping, and a grid over its budget said out loud."""
from types import SimpleNamespace

import numpy as np
import pytest
import trimesh

from impactsound.transfer.fdtd_transfer import (FDTDTransferSettings, TransferCapWarning, plan,
                                                run_fdtd_transfer)


def _sphere_model(freqs, a=0.04):
    s = trimesh.creation.icosphere(subdivisions=3, radius=a)
    v, f = np.asarray(s.vertices), np.asarray(s.faces)
    return SimpleNamespace(surface_nodes=v, surface_faces=f, surface_faces6=None, inputs_hash="",
                           n_surface_vertices=len(v),
                           frequencies_hz=np.asarray(freqs, float),
                           shapes=np.broadcast_to([0.0, 0.0, 1.0], (len(freqs), len(v), 3)).copy())


def test_cell_size_resolves_the_top_mode_and_the_thickness():
    box = trimesh.creation.box(extents=[0.1, 0.02, 0.006])                    # a 6 mm plate
    v, f = np.asarray(box.vertices), np.asarray(box.faces)
    s = FDTDTransferSettings()
    p = plan(v, f, [2000.0], s)                                               # low mode: thickness decides
    assert p.h == pytest.approx(2 * 0.1 * 0.02 * 0.006 / (2 * (0.1 * 0.02 + 0.1 * 0.006 + 0.02 * 0.006)) / 3)
    p = plan(v, f, [30000.0], s)                                              # high mode: ppw decides
    assert p.h == pytest.approx(s.c / (30000.0 * s.ppw))
    assert p.dt * s.c / p.h <= 1 / np.sqrt(3)                                # stable step


def test_grid_over_budget_is_coarsened_with_a_warning():
    m = _sphere_model([3000.0])
    s = FDTDTransferSettings(max_cells=40**3)
    assert plan(m.surface_nodes, m.surface_faces, m.frequencies_hz, s).capped
    with pytest.warns(TransferCapWarning, match="max_cells"):
        run_fdtd_transfer(m, s)


def test_air_margin_sets_the_air_outside_the_box_and_is_checked():
    """Air between the Kirchhoff box and the absorbing layer: pml_gap cells by default, at least air_margin
    times the object's largest side when asked (the sizes follow from the plan's own formula: body, box gap,
    air, absorbing layer on each side)."""
    from impactsound.errors import InputError
    from impactsound.wave.fdtd import DEFAULT_NPML
    box = trimesh.creation.box(extents=[0.1, 0.05, 0.03])
    v, f = np.asarray(box.vertices), np.asarray(box.faces)
    s = FDTDTransferSettings()
    p0 = plan(v, f, [10000.0], s)
    h = p0.h
    assert p0.grid.shape[0] == int(np.ceil((0.1 + 2 * (s.box_gap + 1 + s.pml_gap) * h) / h)) + 2 * DEFAULT_NPML
    p1 = plan(v, f, [10000.0], FDTDTransferSettings(air_margin=0.2))
    assert p1.grid.shape[0] == int(np.ceil((0.1 + 2 * ((s.box_gap + 1) * h + 0.02)) / h)) + 2 * DEFAULT_NPML
    with pytest.raises(InputError, match="air_margin"):
        FDTDTransferSettings(air_margin=-0.1).check()
