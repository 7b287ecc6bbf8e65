"""Surface loading/checking, volume-mesh loading and tetrahedralisation."""
import numpy as np
import pytest
import trimesh

from impactsound.errors import MeshError
from impactsound.mesh import (boundary_faces, check_surface, load_surface, load_volume_mesh, orient_tets,
                              tetrahedralize)
from impactsound.mesh import tetra
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
    with pytest.raises(MeshError, match="2 separate bodies.*own object"):
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
    p = tmp_path / "box.vtu"
    meshio.write(p, meshio.Mesh(nodes, [("tetra", tets[:, [0, 2, 1, 3]])]))   # the other orientation convention
    n2, t2 = load_volume_mesh(p)
    assert np.all(signed_volumes(n2, t2) > 0)
    assert signed_volumes(n2, t2).sum() == pytest.approx(0.04 * 0.03 * 0.02, rel=1e-12)
    q = tmp_path / "tri.vtu"
    meshio.write(q, meshio.Mesh(box.vertices, [("triangle", box.faces)]))
    with pytest.raises(MeshError, match="no tetrahedra"):
        load_volume_mesh(q)


def _box_tets():
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    return tetrahedralize(box, max_edge=0.02)


def test_volume_mesh_with_one_inverted_tet_is_an_error_naming_it(tmp_path):
    """One tet oriented against all the others is a tangled mesh: flipping it would hide it (and overlap)."""
    import meshio
    nodes, tets = _box_tets()
    t = tets.copy()
    t[7] = t[7][[0, 2, 1, 3]]
    p = tmp_path / "tangled.vtu"
    meshio.write(p, meshio.Mesh(nodes, [("tetra", t)]))
    with pytest.raises(MeshError, match=r"tangled\.vtu: tet #7 .*inverted: 1 of \d+ tets is negative while the "
                                        r"others are positive.*tangled"):
        load_volume_mesh(p)


def test_overlapping_tets_are_errors_naming_them():
    # two positive tets on the same side of their shared face (0, 1, 2): they overlap
    nodes = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.2, 1], [0.3, 0.3, 0.5]], float) * 0.01
    tets = np.array([[0, 1, 2, 3], [0, 1, 2, 4]])
    assert np.all(signed_volumes(nodes, tets) > 0)
    with pytest.raises(MeshError, match=r"fold\.vtu: tets #0 and #1 overlap"):
        orient_tets(nodes, tets, "fold.vtu")
    nodes, tets = _box_tets()
    with pytest.raises(MeshError, match=r"dup\.vtu: tets .*#3.*share one face"):
        orient_tets(nodes, np.vstack([tets, tets[3:4]]), "dup.vtu")


def test_volume_mesh_nan_node_is_named_without_numpy_warnings(tmp_path):
    import warnings

    import meshio
    nodes, tets = _box_tets()
    k = int(tets[5, 2])
    nodes = nodes.copy()
    nodes[k] = [np.nan, 0.0, 0.0]
    p = tmp_path / "nan.vtu"
    meshio.write(p, meshio.Mesh(nodes, [("tetra", tets)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(MeshError, match=rf"nan\.vtu: node #{k} has non-finite coordinates \[nan, 0\.0, 0\.0\]"
                                            rf" \(used by tet #"):
            load_volume_mesh(p)


def _seam_cube_obj(path, noise=1e-9):
    """A 4 x 3 x 2 cm box as game engines export it: every face has its own corners (own UVs and normal), the
    copies of one corner differing in the last digits."""
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    lines = []
    for fi, f in enumerate(box.faces):
        for k in f:
            lines.append("v %.12f %.12f %.12f" % tuple(box.vertices[k] * (1 + noise * (fi % 3))))
    lines += ["vt 0 0", "vt 1 0", "vt 0 1"] * len(box.faces)
    lines += ["vn %g %g %g" % tuple(n) for n in box.face_normals]
    for fi in range(len(box.faces)):
        a = 3 * fi
        lines.append("f " + " ".join(f"{a + j + 1}/{a + j + 1}/{fi + 1}" for j in range(3)))
    path.write_text("\n".join(lines) + "\n")
    return box


def test_seam_split_cube_is_welded_on_load(tmp_path):
    from impactsound.mesh import merge_seams
    p = tmp_path / "seams.obj"
    box = _seam_cube_obj(p)
    raw = trimesh.load(p, process=True)
    assert not raw.is_watertight                     # what trimesh alone gives: "not watertight"
    with pytest.raises(MeshError, match=r"raw\.obj: surface is split at seams.*merge_seams"):
        check_surface(raw, "raw.obj")
    m = load_surface(p)
    assert len(m.vertices) == 8 and m.is_watertight
    check_surface(m, str(p))
    assert m.volume == pytest.approx(box.volume, rel=1e-6)
    assert merge_seams(m) is m                      # nothing left to weld: the same mesh (same cache key)


def test_overlapping_shells_are_meshed_as_their_union_by_ftetwild():
    from impactsound.mesh import MeshWarning, shell_groups
    a = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    b = trimesh.creation.box(extents=(0.02, 0.02, 0.04)).apply_translation([0.015, 0, 0])
    two = trimesh.util.concatenate([a, b])         # a toy brick with a peg: two shells through each other
    check_surface(two, "brick.obj")                 # one solid: passes
    info = {}
    with pytest.warns(MeshWarning, match=r"brick\.obj: the surface is 2 overlapping shells; meshed it with fTetWild"):
        nodes, tets = tetrahedralize(two, source="brick.obj", info=info)
    assert info["mesher"] == "ftetwild"
    v = signed_volumes(nodes, tets)
    union = 0.04 * 0.03 * 0.02 + 0.02 * 0.02 * 0.04 - 0.015 * 0.02 * 0.02
    assert v.sum() == pytest.approx(union, rel=1e-3)          # the overlap counted once (trimesh: 4e-5)
    # usable for FEM: positive, well shaped (no slivers; TetGen's worst on a box is ~0.05 in this measure)
    x = nodes[tets]
    edges = np.stack([np.linalg.norm(x[:, i] - x[:, j], axis=1) for i, j in
                      [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]], axis=1)
    q = 6 * np.sqrt(2) * v / np.sqrt((edges**2).mean(axis=1))**3
    assert q.min() > 0.05
    # crossing bars (no vertex of one inside the other) are one solid too; bars apart are two bodies
    bar_x = trimesh.creation.box(extents=(0.06, 0.01, 0.01))
    bar_y = trimesh.creation.box(extents=(0.01, 0.06, 0.01))
    assert shell_groups(trimesh.util.concatenate([bar_x, bar_y])) == [[0, 1]]
    assert len(shell_groups(trimesh.util.concatenate([bar_x, bar_y.copy().apply_translation([0, 0, 0.02])]))) == 2


def test_self_intersecting_shell_falls_back_to_ftetwild(tmp_path, monkeypatch):
    from impactsound.mesh import MeshWarning
    monkeypatch.chdir(tmp_path)             # the meshers leave no files in the working directory
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    v = box.vertices.copy()
    v[int(np.argmax(v.sum(axis=1)))] = [0.01, 0.005, -0.03]   # one corner pushed through the bottom face
    folded = trimesh.Trimesh(v, box.faces, process=False)
    check_surface(folded, "folded.stl")
    info = {}
    with pytest.warns(MeshWarning, match=r"folded\.stl: TetGen refused the surface \(.*self-intersection.*\); meshed "
                                         r"it with fTetWild instead"):
        nodes, tets = tetrahedralize(folded, source="folded.stl", info=info)
    assert info["mesher"] == "ftetwild" and np.all(signed_volumes(nodes, tets) > 0)
    assert list(tmp_path.iterdir()) == []


def test_units_warning_names_the_size_and_the_scale_that_fixes_it():
    import warnings

    from impactsound.mesh import MeshWarning
    big = trimesh.creation.icosphere(radius=0.985)             # a 1.97 m "bunny": centimetres read as metres
    with pytest.warns(MeshWarning, match=r"bunny\.obj: the object is 1\.97 m across, 10,715 kg, large .*"
                                         r"centimetres scale them by 0\.01 \(1\.97 cm\)"):
        check_surface(big, "bunny.obj", density=2700.0)
    tiny = trimesh.creation.icosphere(radius=0.0015)
    with pytest.warns(MeshWarning, match=r"3 mm across, small.*scale = 10 \(3 cm\)"):
        check_surface(tiny, "bead.stl", scale=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_surface(trimesh.creation.icosphere(radius=0.03), "ball.stl", density=2700.0)


def test_nan_vertex_in_surface_is_named(tmp_path):
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    v = box.vertices.copy()
    v[3] = np.nan
    p = tmp_path / "nan.obj"
    p.write_text("# a box\n" + "".join("v %.6f %.6f %.6f\n" % tuple(x) for x in v)
                 + "".join("f %d %d %d\n" % tuple(f + 1) for f in box.faces))
    with pytest.raises(MeshError, match=r"nan\.obj: vertex #3 \(line 5 of the file\) has non-finite"):
        load_surface(p)
    with pytest.raises(MeshError, match=r"m: vertex #3 has non-finite"):
        check_surface(trimesh.Trimesh(v, box.faces, process=False), "m")


def test_flat_surface_is_called_flat_not_inverted():
    # a closed surface whose four corners lie in one plane (one inside the triangle of the others): no volume
    v = np.array([[0, 0, 0], [0.04, 0, 0], [0, 0.04, 0], [0.01, 0.01, 0]], float)
    flat = trimesh.Trimesh(v, [[0, 2, 1], [0, 1, 3], [1, 2, 3], [2, 0, 3]], process=False)
    assert flat.is_watertight
    with pytest.raises(MeshError, match=r"sheet\.stl: the surface is flat"):
        check_surface(flat, "sheet.stl")


def test_latin1_ascii_stl_reads_and_garbage_is_named(tmp_path):
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    text = trimesh.exchange.stl.export_stl_ascii(box).replace("solid", "solid W\u00fcrfel aus Gie\u00dfharz", 1)
    p = tmp_path / "wuerfel.stl"
    p.write_bytes(text.encode("latin-1"))
    m = load_surface(p)
    check_surface(m, str(p))
    assert m.volume == pytest.approx(box.volume, rel=1e-6)
    q = tmp_path / "junk.stl"
    q.write_bytes(b"solid x\n facet normal \xff\xfe\n" + bytes(range(256)) * 3)
    with pytest.raises(MeshError, match=r"junk\.stl: not an STL file"):
        load_surface(q)


INSTALLED_MESHERS = [m for m in ("tetgen", "ftetwild", "gmsh") if tetra.mesher_available(m)]


@pytest.mark.parametrize("mesher", INSTALLED_MESHERS)
def test_each_installed_mesher_fills_a_box(mesher, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)             # the meshers leave no files in the working directory
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    info, stages = {}, []
    nodes, tets = tetrahedralize(box, max_edge=0.01, mesher=mesher, info=info, progress=stages.append)
    assert info == {"mesher": mesher}
    v = signed_volumes(nodes, tets)
    assert np.all(v > 0)
    # TetGen and Gmsh keep the flat faces exactly; fTetWild's surface lies within its envelope of them
    assert v.sum() == pytest.approx(0.04 * 0.03 * 0.02, rel=1e-3 if mesher == "ftetwild" else 1e-12)
    assert len(np.unique(tets)) == len(nodes)
    assert list(tmp_path.iterdir()) == []


def test_mesher_choice_names_the_package_and_licence(monkeypatch):
    from impactsound.errors import InputError
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    assert tetra.resolve_mesher(None) == tetra.DEFAULT_MESHER == "tetgen"      # the default, for now
    with pytest.raises(InputError, match=r"cup\.obj: mesher = 'netgen' is not one of tetgen, ftetwild, gmsh, auto"):
        tetrahedralize(box, mesher="netgen", source="cup.obj")
    monkeypatch.setattr(tetra, "_import_gmsh", lambda: None)
    monkeypatch.setattr(tetra, "_import_ftetwild", lambda: None)
    with pytest.raises(InputError, match=r"cup\.obj: mesher = 'gmsh' needs the Python package 'gmsh'.*pip install "
                                         r"gmsh \(licence GPL-2\.0-or-later"):
        tetrahedralize(box, mesher="gmsh", source="cup.obj")
    with pytest.raises(InputError, match=r"pip install pytetwild \(licence MPL-2\.0"):
        tetra.resolve_mesher("ftetwild")
    # auto: DEFAULT_MESHER when installed, else the first installed, most permissive licence first
    assert tetra.resolve_mesher("auto") == "tetgen"
    monkeypatch.setattr(tetra, "DEFAULT_MESHER", "gmsh")
    assert tetra.resolve_mesher("auto") == "tetgen"
    monkeypatch.setattr(tetra, "_import_ftetwild", lambda: object())
    assert tetra.resolve_mesher("auto") == "ftetwild"


def test_default_mesher_keeps_the_modal_cache_key():
    """The cache key with the default mesher is the one built before ``mesher`` existed (models cached then stay
    valid); another mesher gives another key."""
    from importlib.metadata import version

    from impactsound.assets import content_hash
    from impactsound.fem.eigen import SOLVER_VERSION
    from impactsound.fem.modal import CODE_VERSION, modal_inputs_hash
    from impactsound.materials import make_material
    mat = make_material("alu", rho=2700, E=69e9, nu=0.33, alpha=1.0, beta=3e-8)
    box = trimesh.creation.box(extents=(0.05, 0.03, 0.02))
    legacy = content_hash(np.asarray(box.vertices, np.float64), np.asarray(box.faces, np.int64),
                          {k: float(getattr(mat, k)) for k in ("rho", "E", "nu", "alpha", "beta", "gamma")},
                          dict(order=2, max_modes=200, f_max=20000.0, max_edge=None, quality=1.5, mesher="tetgen",
                               tetgen=version("tetgen"), solver=SOLVER_VERSION, code=CODE_VERSION,
                               ftetwild=tetra.ftetwild_version()))
    assert modal_inputs_hash(box, mat, 2) == modal_inputs_hash(box, mat, 2, mesher="tetgen") == legacy
    others = {modal_inputs_hash(box, mat, 2, mesher=m) for m in INSTALLED_MESHERS if m != "tetgen"}
    assert legacy not in others and len(others) == len(INSTALLED_MESHERS) - 1
    # TetGen's quality bound is in the key only where it is read
    assert modal_inputs_hash(box, mat, 2, quality=1.3) != legacy
    for m in INSTALLED_MESHERS:
        if m != "tetgen":
            assert modal_inputs_hash(box, mat, 2, mesher=m, quality=1.3) == modal_inputs_hash(box, mat, 2, mesher=m)


@pytest.mark.skipif(not tetra.mesher_available("gmsh"), reason="gmsh not installed")
def test_gmsh_refusal_falls_back_to_ftetwild_and_leaves_the_callers_session():
    import gmsh

    from impactsound.mesh import MeshWarning
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.02))
    v = box.vertices.copy()
    v[int(np.argmax(v.sum(axis=1)))] = [0.01, 0.005, -0.03]   # one corner pushed through the bottom face
    folded = trimesh.Trimesh(v, box.faces, process=False)
    info = {}
    with pytest.warns(MeshWarning, match=r"folded\.stl: Gmsh refused the surface \(.*intersect.*\); meshed it with "
                                         r"fTetWild instead \(fTetWild, licence MPL-2\.0"):
        tetrahedralize(folded, source="folded.stl", info=info, mesher="gmsh")
    assert info["mesher"] == "ftetwild"
    # a Gmsh session the caller has open keeps its model and options
    own = not gmsh.isInitialized()
    if own:
        gmsh.initialize(argv=[], readConfigFiles=False, interruptible=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add("callers_model")
        gmsh.option.setNumber("Mesh.MeshSizeMax", 7.0)
        tetrahedralize(box, max_edge=0.01, mesher="gmsh")
        assert gmsh.isInitialized() and gmsh.model.getCurrent() == "callers_model"
        assert gmsh.option.getNumber("Mesh.MeshSizeMax") == 7.0
    finally:
        if own:
            gmsh.finalize()
