"""Surface loading/checking, volume-mesh loading and tetrahedralisation."""
import numpy as np
import pytest
import trimesh

from impactsound.errors import MeshError
from impactsound.mesh import (boundary_faces, check_surface, load_surface, load_volume_mesh, orient_tets,
                              tetrahedralize)
from impactsound.mesh.tetra import signed_volumes


def test_box_passes_and_tetrahedralizes_positively():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    check_surface(box, "box")
    nodes, tets = tetrahedralize(box, max_edge=0.01)
    assert tets.dtype == np.int64 and nodes.dtype == np.float64
    v = signed_volumes(nodes, tets)
    assert np.all(v > 0)
    # the tets fill the box exactly (straight faces): volume is a conservation check
    assert v.sum() == pytest.approx(0.04 * 0.03 * 0.02, rel=1e-12)
    # boundary faces are outward: divergence theorem gives the same volume
    f = boundary_faces(tets)
    x = nodes[f]
    vol = np.einsum("ij,ij->i", x[:, 0], np.cross(x[:, 1], x[:, 2])).sum() / 6
    assert vol == pytest.approx(v.sum(), rel=1e-12)


def test_orient_flips_and_rejects_degenerate():
    nodes = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], float)
    t = orient_tets(nodes, np.array([[0, 2, 1, 3]]))
    assert signed_volumes(nodes, t)[0] > 0
    with pytest.raises(MeshError, match="degenerate"):
        orient_tets(nodes, np.array([[0, 1, 2, 4]]), "flat")     # four coplanar points


def test_open_mesh_rejected_with_repair_hint():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    open_box = trimesh.Trimesh(box.vertices, box.faces[:-2], process=False)
    with pytest.raises(MeshError, match="watertight.*fill_holes"):
        check_surface(open_box, "cup.obj")


@pytest.mark.parametrize("scale,word", [(1000.0, "millimetres"), (1e-4, "metres")])
def test_wrong_units(scale, word):
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    box.apply_scale(scale)
    with pytest.raises(MeshError, match=word):
        check_surface(box, "box.stl")


def test_inverted_and_multibody():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    inv = box.copy()
    inv.invert()
    with pytest.raises(MeshError, match="inwards"):
        check_surface(inv, "inv.obj")
    two = trimesh.util.concatenate([box, box.copy().apply_translation([0.1, 0, 0])])
    with pytest.raises(MeshError, match="2 disconnected bodies"):
        check_surface(two, "two.obj")


def test_inconsistent_winding():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    f = box.faces.copy()
    f[0] = f[0][::-1]
    bad = trimesh.Trimesh(box.vertices, f, process=False)
    with pytest.raises(MeshError, match="wound"):
        check_surface(bad, "bad.obj")


def test_degenerate_face():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    v = np.vstack([box.vertices, box.vertices[0]])
    f = np.vstack([box.faces, [[0, 1, len(v) - 1]]])
    bad = trimesh.Trimesh(v, f, process=False)
    with pytest.raises(MeshError, match="degenerate"):
        check_surface(bad, "deg.obj")


def test_load_surface_errors_name_the_file(tmp_path):
    with pytest.raises(MeshError, match="not found"):
        load_surface(tmp_path / "nope.obj")
    p = tmp_path / "thing.xyz"
    p.write_text("1 2 3\n")
    with pytest.raises(MeshError, match="thing.xyz.*unknown surface mesh format"):
        load_surface(p)
    q = tmp_path / "broken.stl"
    q.write_bytes(b"\x00garbage")
    with pytest.raises(MeshError, match="broken.stl"):
        load_surface(q)


def test_load_surface_roundtrip_and_scene_merge(tmp_path):
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    p = tmp_path / "box.stl"
    box.export(p)
    m = load_surface(p)
    check_surface(m, str(p))
    assert m.volume == pytest.approx(box.volume, rel=1e-6)
    scene = trimesh.Scene([box, box.copy().apply_translation([0.1, 0, 0])])
    g = tmp_path / "two.glb"
    scene.export(g)
    merged = load_surface(g)
    assert len(merged.faces) == 2 * len(box.faces)


def test_load_volume_mesh(tmp_path):
    import meshio
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    nodes, tets = tetrahedralize(box, max_edge=0.02)
    t = tets.copy()
    t[0] = t[0][[0, 2, 1, 3]]                    # one negatively oriented tet in the file
    p = tmp_path / "box.vtu"
    meshio.write(p, meshio.Mesh(nodes, [("tetra", t)]))
    n2, t2 = load_volume_mesh(p)
    assert np.all(signed_volumes(n2, t2) > 0)
    assert signed_volumes(n2, t2).sum() == pytest.approx(0.04 * 0.03 * 0.02, rel=1e-12)
    q = tmp_path / "tri.vtu"
    meshio.write(q, meshio.Mesh(box.vertices, [("triangle", box.faces)]))
    with pytest.raises(MeshError, match="no tetrahedra"):
        load_volume_mesh(q)
