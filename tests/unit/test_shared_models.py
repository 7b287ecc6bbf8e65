"""Identical objects share one loaded modal model and one radiation model (memory follows the distinct objects,
not their copies); an object that differs in material, mesh or mount gets its own."""
from __future__ import annotations

from impactsound.scene import load_scene
from impactsound.sources.modal import modal_models, transfer_models


def _bar(name, y, material="steel", length=0.12):
    return {"name": name, "shape": "box", "size": {"size": [length, 0.012, 0.006]}, "material": material,
            "position": [0.0, y, 0.05]}


def test_identical_objects_share_their_models():
    scene = load_scene({"scene": {"duration": 0.1, "sources": ["modal"]},
                        "source": {"modal": {"transfer": "low_order", "max_modes": 8}},
                        "listener": [{"position": [0.0, -0.5, 0.3]}],
                        "object": [_bar("a", 0.0), _bar("b", 0.05), _bar("c", 0.1, material="aluminium"),
                                   _bar("d", 0.15, length=0.14)]})
    models = modal_models(scene)
    assert models["a"].n_modes > 0 and models["a"] is models["b"]
    assert models["c"] is not models["a"] and models["d"] is not models["a"]
    assert models["c"].inputs_hash != models["a"].inputs_hash != models["d"].inputs_hash
    tms, used = transfer_models(scene, models)
    assert used["a"] == used["b"] and set(used) == {"a", "b", "c", "d"}
