"""Animations in: glTF/GLB node animations and Blender files to scene folders (scene/gltf_motion.py,
scene/motion_import.py, io/blender.py), checked against the closed-form motion they were made from."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from impactsound.errors import InputError

G = 9.81
pygltflib = pytest.importorskip("pygltflib", reason="the 'animation' extra (pygltflib) is not installed")


def _write_glb(path, t, pos_zup, quat_wxyz, *, scale=None, with_animation=True, size=0.04):
    """A GLB with one box node ("Box", material "Steel") animated by translation/rotation (and scale), plus a
    still box ("Shelf") that must not be imported. Our +z up is glTF's +y up."""
    import trimesh
    box = trimesh.creation.box((size, size, size))
    V = np.asarray(box.vertices, np.float32)
    F = np.asarray(box.faces, np.uint32)
    to_gltf = lambda p: np.column_stack([p[:, 0], p[:, 2], -p[:, 1]])     # (x, y, z)_ours -> (x, z, -y)
    T = to_gltf(np.asarray(pos_zup, np.float64)).astype(np.float32)
    # rotation: ours -> glTF frame change C R C^T with C the axis map
    from impactsound.rotation import matrix_to_quat, quat_to_matrix
    C = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])
    Rg = C @ quat_to_matrix(quat_wxyz) @ C.T
    qg = matrix_to_quat(Rg)[:, [1, 2, 3, 0]].astype(np.float32)            # glTF order x, y, z, w
    tt = np.asarray(t, np.float32)
    blobs, views, accs = [], [], []

    def add(arr, kind, comp, target=None, minmax=False):
        data = np.ascontiguousarray(arr).tobytes()
        off = sum(len(b) for b in blobs)
        blobs.append(data + b"\0" * (-len(data) % 4))
        views.append(pygltflib.BufferView(buffer=0, byteOffset=off, byteLength=len(data), target=target))
        kw = {}
        if minmax:
            kw = dict(min=np.asarray(arr).min(axis=0).reshape(-1).tolist(), max=np.asarray(arr).max(axis=0).reshape(-1).tolist())
        accs.append(pygltflib.Accessor(bufferView=len(views) - 1, componentType=comp, count=len(arr), type=kind, **kw))
        return len(accs) - 1

    a_pos = add(V, "VEC3", 5126, 34962, minmax=True)
    a_idx = add(F.reshape(-1), "SCALAR", 5125, 34963)
    a_t = add(tt, "SCALAR", 5126, minmax=True)
    a_T = add(T, "VEC3", 5126)
    a_R = add(qg, "VEC4", 5126)
    samplers = [pygltflib.AnimationSampler(input=a_t, output=a_T), pygltflib.AnimationSampler(input=a_t, output=a_R)]
    channels = [pygltflib.AnimationChannel(sampler=0, target=pygltflib.AnimationChannelTarget(node=0, path="translation")),
                pygltflib.AnimationChannel(sampler=1, target=pygltflib.AnimationChannelTarget(node=0, path="rotation"))]
    if scale is not None:
        a_S = add(np.asarray(scale, np.float32), "VEC3", 5126)
        samplers.append(pygltflib.AnimationSampler(input=a_t, output=a_S))
        channels.append(pygltflib.AnimationChannel(sampler=2, target=pygltflib.AnimationChannelTarget(node=0, path="scale")))
    prim = pygltflib.Primitive(attributes=pygltflib.Attributes(POSITION=a_pos), indices=a_idx, material=0)
    g = pygltflib.GLTF2(
        scene=0, scenes=[pygltflib.Scene(nodes=[0, 1])],
        nodes=[pygltflib.Node(name="Box", mesh=0), pygltflib.Node(name="Shelf", mesh=0, translation=[1.0, 0.5, 0.0])],
        meshes=[pygltflib.Mesh(name="cube", primitives=[prim])], materials=[pygltflib.Material(name="Steel")],
        accessors=accs, bufferViews=views, buffers=[pygltflib.Buffer(byteLength=sum(len(b) for b in blobs))],
        animations=[pygltflib.Animation(samplers=samplers, channels=channels)] if with_animation else [])
    g.set_binary_blob(b"".join(blobs))
    g.save(str(path))
    return V


def _drop(fps=120.0, duration=0.5, h=0.3, half=0.02, e=0.4):
    t = np.arange(0.0, duration, 1.0 / fps)
    tc = np.sqrt(2 * (h - half) / G)
    v = G * tc
    z = np.where(t < tc, h - 0.5 * G * t ** 2, half + e * v * (t - tc) - 0.5 * G * (t - tc) ** 2)
    z = np.maximum(z, half)
    P = np.column_stack([0.1 + 0.0 * t, 0.05 + 0.0 * t, z])
    ang = 0.3 * np.ones_like(t)                        # a fixed tilt about z (flat landing)
    Q = np.column_stack([np.cos(ang / 2), 0 * t, 0 * t, np.sin(ang / 2)])
    return t, P, Q, tc, v


def test_gltf_motion_reads_poses_meshes_and_axes(tmp_path):
    from impactsound.scene.gltf_motion import read_gltf_motion
    t, P, Q, _, _ = _drop()
    V = _write_glb(tmp_path / "drop.glb", t, P, Q)
    tt, objs = read_gltf_motion(tmp_path / "drop.glb")
    assert [o.name for o in objs] == ["Box"]                # the still shelf is not an animated object
    o = objs[0]
    np.testing.assert_allclose(tt, t, atol=1e-6)
    np.testing.assert_allclose(o.position, P, atol=1e-6)
    # the world geometry: the file's mesh (glTF frame, +y up) placed by the file's transforms, seen with +z up
    from impactsound.rotation import quat_to_matrix
    C = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])              # ours -> glTF axes
    want = np.einsum("kij,nj->kni", quat_to_matrix(Q), V @ C) + P[:, None]
    got = np.einsum("kij,nj->kni", quat_to_matrix(o.quaternion), o.vertices) + o.position[:, None]
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(o.vertices, V, atol=1e-7)              # in the node's own frame, as stored
    assert o.material == "Steel"


def test_gltf_import_renders_the_drop(tmp_path):
    """glTF -> scene folder -> contacts: one landing at the closed-form time with impulse m (1 + e) v."""
    from impactsound.pipeline import scene_events
    from impactsound.scene import load_scene
    from impactsound.scene.motion_import import import_animation
    t, P, Q, tc, v = _drop()
    _write_glb(tmp_path / "drop.glb", t, P, Q)
    with pytest.raises(InputError, match=r"drop\.glb: no material for 'Box' \(material 'Steel'\)"):
        import_animation(tmp_path / "drop.glb", tmp_path / "scene")
    toml, rep = import_animation(tmp_path / "drop.glb", tmp_path / "scene", materials={"Steel": "steel"})
    assert rep["objects"] == 1 and rep["frames"] == len(t)
    scene = load_scene(toml)
    assert scene.ground.height == pytest.approx(0.0, abs=1e-6)   # the lowest point the box reaches
    log = scene_events(scene)
    m = scene.bodies[0].mass
    # the bounce (restitution 0.4) at tc, then the landing that stops it 2 e v / g later (one event per corner)
    first = np.abs(log.t - tc) < 1e-3
    second = np.abs(log.t - (tc + 2 * 0.4 * v / G)) < 1e-3
    assert (first | second).all() and first.any() and second.any()
    assert log.impulse[first, 2].sum() == pytest.approx(m * 1.4 * v, rel=0.02)
    # an inelastic landing: the blow m e v, plus at most the weight the floor carries over the frame it falls in
    # (the residuals cannot tell the blow from the support that starts with it)
    assert m * 0.4 * v * 0.99 <= log.impulse[second, 2].sum() <= m * 0.4 * v + 1.05 * m * G / 120
    with pytest.raises(InputError, match="already exists"):
        import_animation(tmp_path / "drop.glb", tmp_path / "scene", materials={"Steel": "steel"})


def test_gltf_errors_name_file_and_node(tmp_path):
    from impactsound.scene.gltf_motion import read_gltf_motion
    t, P, Q, _, _ = _drop()
    _write_glb(tmp_path / "still.glb", t, P, Q, with_animation=False)
    with pytest.raises(InputError, match=r"still\.glb: the file has no animation"):
        read_gltf_motion(tmp_path / "still.glb")
    grow = np.column_stack([1 + t, 1 + t, 1 + t])
    _write_glb(tmp_path / "grow.glb", t, P, Q, scale=grow)
    with pytest.raises(InputError, match=r"grow\.glb: node 'Box': its world scale changes"):
        read_gltf_motion(tmp_path / "grow.glb")
    (tmp_path / "junk.glb").write_bytes(b"not a glb")
    with pytest.raises(InputError, match=r"junk\.glb: not a readable glTF"):
        read_gltf_motion(tmp_path / "junk.glb")


# ---- Blender -----------------------------------------------------------------------------------------------------

_MAKE_BLEND = r"""
import sys, bpy
out, rigid = sys.argv[1], sys.argv[2] == "1"
bpy.ops.wm.read_factory_settings(use_empty=True)
scene = bpy.context.scene
scene.render.fps = 120
scene.frame_start, scene.frame_end = 1, 72
bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0, 0, 0))
floor = bpy.context.active_object
floor.name = "Floor"
if rigid:
    bpy.ops.rigidbody.object_add()
    floor.rigid_body.type = "PASSIVE"
bpy.ops.mesh.primitive_cube_add(size=0.05, location=(0.1, 0.0, 0.3))
cube = bpy.context.active_object
cube.name = "Block"
bpy.ops.object.modifier_add(type="BEVEL")           # modifiers are applied on export
cube.modifiers["Bevel"].width = 0.002
if rigid:
    bpy.ops.rigidbody.object_add()
    cube.rigid_body.mass = 0.1
cube.data.materials.append(bpy.data.materials.new("Oak"))
bpy.ops.object.camera_add(location=(0.0, -1.5, 0.4))
cam = bpy.context.active_object
scene.camera = cam
cam.keyframe_insert(data_path="location", frame=1)          # the camera dollies 0.5 m along x
cam.location = (0.5, -1.5, 0.4)
cam.keyframe_insert(data_path="location", frame=72)
bpy.ops.wm.save_as_mainfile(filepath=out)
"""


def _blender_or_skip():
    from impactsound.io.blender import bpy_available
    ok, why = bpy_available()
    if not ok:
        pytest.skip(f"Blender's Python module is not usable here: {why} (pip install 'impactsound[blender]')")


def _make_blend(tmp_path, rigid=True):
    path = tmp_path / ("drop.blend" if rigid else "still.blend")
    r = subprocess.run([sys.executable, "-c", _MAKE_BLEND, str(path), "1" if rigid else "0"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return path


def test_blend_rigid_body_drop_imports_and_lands(tmp_path):
    """A test-made .blend (a bevelled cube with Blender rigid-body physics over a passive floor plane, 120 fps):
    the cube is imported with its modifier applied, the plane becomes the ground, the moving camera the
    microphone's trajectory, and the inferred landing comes at the free-fall time from 0.275 m."""
    _blender_or_skip()
    from impactsound.pipeline import scene_events
    from impactsound.scene import load_scene
    from impactsound.scene.motion_import import import_animation
    blend = _make_blend(tmp_path)
    toml, rep = import_animation(blend, tmp_path / "scene", materials={"Oak": "wood_hard"})
    assert rep["objects"] == 1 and rep["fps"] == pytest.approx(120.0)
    assert "Floor" in rep["skipped"] and "ground" in rep["skipped"]["Floor"]
    scene = load_scene(toml)
    assert scene.ground.enabled and scene.ground.height == pytest.approx(0.0)
    mic = scene.listeners[0]                                             # carried by the moving camera
    assert mic.moves
    assert np.allclose(mic.position_at(0.0), [0.0, -1.5, 0.4])
    assert np.allclose(mic.position_at(71 / 120), [0.5, -1.5, 0.4], atol=1e-6)
    assert len(scene.bodies[0].mesh.vertices) > 8                        # the bevel is there
    log = scene_events(scene)
    t_land = np.sqrt(2 * 0.275 / G)
    assert len(log) >= 1 and abs(log.t[0] - t_land) < 1.0 / 120
    assert log.b[0] == 0 and log.a[0] == -1


def test_blend_without_rigid_bodies_is_refused(tmp_path):
    _blender_or_skip()
    from impactsound.scene.motion_import import import_animation
    blend = _make_blend(tmp_path, rigid=False)
    with pytest.raises(InputError, match=r"still\.blend: no rigid bodies and nothing that moves"):
        import_animation(blend, tmp_path / "scene", default_material="steel")
    assert not (tmp_path / "scene").exists()                             # nothing half-written
