"""Scene bodies from MJCF / URDF files (impactsound.scene.model_import), checked against MuJoCo's own poses and
against poses and masses worked out by hand from the files' numbers."""
from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from impactsound.errors import InputError
from impactsound.materials import get_material
from impactsound.scene import parse_scene
from impactsound.scene.model_import import expand_model_bodies, objects_from_model_file

STEEL = get_material("steel").rho


def _file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _mj(path: Path):
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d


def _rot(q) -> np.ndarray:
    w, x, y, z = q
    return Rotation.from_quat([x, y, z, w]).as_matrix()


def _scene(tmp_path: Path, bodies: str, materials: dict, **extra):
    data = {"scene": {"duration": 0.5, "bodies": bodies}, "materials": materials,
            "listener": [{"position": [0.0, -0.5, 0.3]}], **extra}
    return parse_scene(expand_model_bodies(data, tmp_path, "s.toml"), base=tmp_path, src="s.toml")


def _world_vertices(body) -> np.ndarray:
    return np.asarray(body.mesh.vertices) @ _rot(body.quaternion).T + body.position


def _same_points(a: np.ndarray, b: np.ndarray, tol: float) -> None:
    """Every point of ``a`` has one of ``b`` within ``tol`` and vice versa."""
    d = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    assert d.min(axis=1).max() < tol and d.min(axis=0).max() < tol


def _box_corners(half) -> np.ndarray:
    return np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * np.asarray(half)


SPHERE = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="1 1 0.1" pos="0 0 0.02"/>
  <body name="ball" pos="0.1 -0.05 0.3"><freejoint/><geom type="sphere" size="0.02"/></body>
</worldbody></mujoco>"""


def test_sphere_and_ground_plane(tmp_path):
    p = _file(tmp_path, "ball.xml", SPHERE)
    objects, ground = objects_from_model_file(p, {"ball": "steel"})
    m, d = _mj(p)
    assert ground == {"height": pytest.approx(0.02)}
    (o,) = objects
    assert o["name"] == "ball" and o["shape"] == "sphere" and o["size"] == {"radius": pytest.approx(0.02)}
    assert np.allclose(o["position"], d.xipos[m.body("ball").id], atol=1e-12)
    assert np.allclose(o["velocity"], 0) and np.allclose(o["angular_velocity"], 0)

    scene = _scene(tmp_path, "ball.xml", {"ball": "steel"})
    (b,) = scene.bodies
    assert b.name == "ball" and scene.ground.height == pytest.approx(0.02)
    assert np.allclose(b.position, [0.1, -0.05, 0.3], atol=1e-9)
    assert b.mass == pytest.approx(STEEL * 4 / 3 * np.pi * 0.02**3, rel=0.02)   # icosphere: a little smaller


BRICK = """<mujoco><worldbody>
  <body name="brick" pos="0.1 0.2 0.3" quat="0.9 0.1 0.3 0.2"><freejoint/>
    <geom name="g" type="box" size="0.01 0.02 0.03" pos="0.02 -0.01 0.005" quat="0.8 0.2 -0.4 0.3"/>
  </body>
</worldbody></mujoco>"""


def test_box_offset_and_rotated_in_a_rotated_body(tmp_path):
    p = _file(tmp_path, "brick.xml", BRICK)
    (o,), ground = objects_from_model_file(p, {}, default_material="steel")
    assert ground is None and o["shape"] == "box"
    assert o["size"]["size"] == pytest.approx([0.02, 0.04, 0.06])        # MuJoCo's half-sizes doubled
    m, d = _mj(p)
    bid, gid = m.body("brick").id, m.geom("g").id
    assert np.allclose(o["position"], d.xipos[bid], atol=1e-12)        # MuJoCo's centre of mass (from the geom)

    (b,) = _scene(tmp_path, "brick.xml", {"brick": "steel"}).bodies
    assert np.allclose(b.position, d.xipos[bid], atol=1e-12)
    corners = _box_corners(m.geom_size[gid]) @ d.geom_xmat[gid].reshape(3, 3).T + d.geom_xpos[gid]
    _same_points(_world_vertices(b), corners, 1e-9)
    # the same by hand from the file: body frame, then geom frame
    Rb, Rg = _rot(np.array([0.9, 0.1, 0.3, 0.2]) / np.linalg.norm([0.9, 0.1, 0.3, 0.2])), \
        _rot(np.array([0.8, 0.2, -0.4, 0.3]) / np.linalg.norm([0.8, 0.2, -0.4, 0.3]))
    by_hand = (_box_corners([0.01, 0.02, 0.03]) @ Rg.T + [0.02, -0.01, 0.005]) @ Rb.T + [0.1, 0.2, 0.3]
    _same_points(_world_vertices(b), by_hand, 1e-9)
    # inertia per unit mass in the world frame equals MuJoCo's (its principal frame ximat)
    R = _rot(b.quaternion)
    ours = R @ b.inertia @ R.T / b.mass
    Rm = d.ximat[bid].reshape(3, 3)
    theirs = Rm @ np.diag(m.body_inertia[bid]) @ Rm.T / m.body_mass[bid]
    assert np.allclose(ours, theirs, rtol=1e-9, atol=1e-15)
    assert b.mass == pytest.approx(STEEL * 0.02 * 0.04 * 0.06, rel=1e-12)


def test_mesh_geom_with_scale_and_offset(tmp_path):
    box = trimesh.creation.box(extents=[20.0, 30.0, 40.0])      # millimetres, off-centre in its file
    box.apply_translation([5.0, 1.0, 2.0])
    (tmp_path / "meshes").mkdir()
    box.export(tmp_path / "meshes" / "block.stl")
    xml = """<mujoco><compiler meshdir="meshes"/>
      <asset><mesh name="block" file="block.stl" scale="0.001 0.001 0.001"/></asset>
      <worldbody><body name="block" pos="0 0.1 0.2" quat="0.7 0.2 0.1 -0.4"><freejoint/>
        <geom type="mesh" mesh="block" pos="0.01 0 0.02" quat="0.5 0.5 0.5 0.5"/></body></worldbody></mujoco>"""
    p = _file(tmp_path, "block.xml", xml)
    (o,), _ = objects_from_model_file(p, {"block": "steel"})
    assert Path(o["mesh"]).is_file() and "shape" not in o
    m, d = _mj(p)
    assert np.allclose(o["position"], d.xipos[m.body("block").id], atol=1e-7)   # mesh_vert is float32

    (b,) = _scene(tmp_path, "block.xml", {"block": "steel"}).bodies
    Rb = _rot(np.array([0.7, 0.2, 0.1, -0.4]) / np.linalg.norm([0.7, 0.2, 0.1, -0.4]))
    Rg = _rot([0.5, 0.5, 0.5, 0.5])
    by_hand = ((np.asarray(box.vertices) * 1e-3) @ Rg.T + [0.01, 0.0, 0.02]) @ Rb.T + [0.0, 0.1, 0.2]
    _same_points(_world_vertices(b), by_hand, 1e-7)
    assert b.mass == pytest.approx(STEEL * 0.02 * 0.03 * 0.04, rel=1e-6)


URDF = """<robot name="r">
  <link name="cup">
    <collision><origin xyz="0.01 0.02 0.15" rpy="0.1 0.2 0.3"/><geometry><box size="0.02 0.04 0.06"/></geometry>
    </collision>
    <visual><geometry><sphere radius="0.2"/></geometry></visual>
  </link>
</robot>"""


def test_urdf_root_link_floats(tmp_path):
    p = _file(tmp_path, "cup.urdf", URDF)
    (o,), ground = objects_from_model_file(p, {"cup": "steel"})
    assert ground is None and o["shape"] == "box"
    (b,) = _scene(tmp_path, "cup.urdf", {"cup": "steel"}).bodies
    R = Rotation.from_euler("xyz", [0.1, 0.2, 0.3]).as_matrix()      # URDF rpy: fixed axes x, then y, then z
    by_hand = _box_corners([0.01, 0.02, 0.03]) @ R.T + [0.01, 0.02, 0.15]
    _same_points(_world_vertices(b), by_hand, 1e-9)
    assert b.mass == pytest.approx(STEEL * 0.02 * 0.04 * 0.06, rel=1e-12)


def test_urdf_with_visual_kept_uses_the_collision_geometry(tmp_path):
    p = _file(tmp_path, "cup.urdf", URDF.replace('<robot name="r">', '<robot name="r"><mujoco><compiler '
                                                 'discardvisual="false"/></mujoco>'))
    (o,), _ = objects_from_model_file(p, {"cup": "steel"})
    assert o["shape"] == "box"


def test_urdf_floating_joint_and_fixed_to_world(tmp_path):
    floating = """<robot name="r"><link name="world"/>
      <joint name="j" type="floating"><parent link="world"/><child link="cup"/>
        <origin xyz="0 0 0.5"/></joint>
      <link name="cup"><collision><geometry><sphere radius="0.02"/></geometry></collision></link></robot>"""
    (o,), _ = objects_from_model_file(_file(tmp_path, "f.urdf", floating), {}, default_material="steel")
    assert np.allclose(o["position"], [0, 0, 0.5], atol=1e-12)
    fixed = floating.replace('type="floating"', 'type="fixed"')
    (o,), _ = objects_from_model_file(_file(tmp_path, "x.urdf", fixed), {}, default_material="steel")
    assert o["static"] is True and np.allclose(o["position"], [0, 0, 0.5], atol=1e-12)


def test_keyframe_pose_and_velocities(tmp_path):
    q = np.array([0.8, 0.3, -0.2, 0.4]) / np.linalg.norm([0.8, 0.3, -0.2, 0.4])
    qpos = [0.1, 0.2, 0.3, *q]
    qvel = [0.5, -0.2, 1.0, 3.0, -4.0, 2.0]
    xml = f"""<mujoco><worldbody><body name="b"><freejoint/>
        <geom type="box" size="0.01 0.02 0.03" pos="0.03 0.01 0"/></body></worldbody>
      <keyframe><key name="throw" qpos="{' '.join(map(str, qpos))}" qvel="{' '.join(map(str, qvel))}"/></keyframe>
      </mujoco>"""
    p = _file(tmp_path, "k.xml", xml)
    (o,), _ = objects_from_model_file(p, {"b": "steel"}, keyframe="throw")
    m = mujoco.MjModel.from_xml_path(str(p))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    assert np.allclose(o["position"], d.xipos[1], atol=1e-12)
    assert np.allclose(o["rotation"], q, atol=1e-12)          # the geom is not turned in its body
    # free joint: linear velocity of the frame origin in the world frame, angular in the body frame
    omega = _rot(q) @ qvel[3:]
    assert np.allclose(o["angular_velocity"], omega, atol=1e-12)
    assert np.allclose(o["velocity"], np.asarray(qvel[:3]) + np.cross(omega, d.xipos[1] - d.xpos[1]), atol=1e-12)
    res = np.zeros(6)
    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, 1, res, 0)   # at MuJoCo's centre of mass
    assert np.allclose(o["velocity"], res[3:], atol=1e-12)
    with pytest.raises(InputError, match="no keyframe 'thrw'.*throw"):
        objects_from_model_file(p, {"b": "steel"}, keyframe="thrw")


def test_welded_child_geoms_are_united(tmp_path):
    # two boxes of the same section overlapping by 5 mm: together a 55 x 20 x 20 mm box
    xml = """<mujoco><worldbody><body name="bar" pos="0 0 0.2" quat="0.9 0.3 -0.2 0.1"><freejoint/>
        <geom type="box" size="0.02 0.01 0.01"/>
        <body name="end" pos="0.025 0 0"><geom type="box" size="0.01 0.01 0.01"/></body>
      </body></worldbody></mujoco>"""
    p = _file(tmp_path, "bar.xml", xml)
    with pytest.warns(UserWarning, match="union"):
        (o,), _ = objects_from_model_file(p, {"bar": "steel"})
    assert Path(o["mesh"]).is_file()
    (b,) = _scene(tmp_path, "bar.xml", {"bar": "steel"}).bodies
    assert b.mass == pytest.approx(STEEL * 0.055 * 0.02 * 0.02, rel=0.01)
    m, d = _mj(p)
    R = d.xmat[1].reshape(3, 3)                                  # MuJoCo's frame of the body
    assert np.allclose(R.T @ (b.position - d.xpos[1]), [0.0075, 0.0, 0.0], atol=2e-4)
    local = (_world_vertices(b) - d.xpos[1]) @ R
    assert np.allclose(local.min(axis=0), [-0.02, -0.01, -0.01], atol=2e-4)
    assert np.allclose(local.max(axis=0), [0.035, 0.01, 0.01], atol=2e-4)


def test_ellipsoid_becomes_a_mesh(tmp_path):
    p = _file(tmp_path, "e.xml", _world('<body name="egg" pos="0 0 0.2" euler="0 40 0"><freejoint/>'
                                        '<geom type="ellipsoid" size="0.02 0.03 0.04" pos="0.01 0 0"/></body>'))
    (o,), _ = objects_from_model_file(p, {"egg": "steel"})
    m, d = _mj(p)
    assert "mesh" in o and np.allclose(o["position"], d.xipos[1], atol=1e-9)
    (b,) = _scene(tmp_path, "e.xml", {"egg": "steel"}).bodies
    assert b.mass == pytest.approx(STEEL * 4 / 3 * np.pi * 0.02 * 0.03 * 0.04, rel=0.02)


def test_scene_objects_and_ground_combine(tmp_path):
    _file(tmp_path, "ball.xml", SPHERE)
    extra = {"object": [{"name": "cube", "shape": "box", "size": {"size": [0.02, 0.02, 0.02]},
                         "material": "steel", "position": [0.3, 0.0, 0.1]}],
             "ground": {"material": "concrete"}}
    scene = _scene(tmp_path, "ball.xml", {"default": {"E": 2e11, "nu": 0.3, "rho": 7000.0}}, **extra)
    assert [b.name for b in scene.bodies] == ["cube", "ball"]
    assert scene.bodies[1].material.rho == 7000.0
    assert scene.ground.height == pytest.approx(0.02) and scene.ground.material.name == "concrete"
    data = {"scene": {"duration": 1.0}, "listener": [{"position": [0, 0, 1]}]}
    assert expand_model_bodies(data, tmp_path, "s.toml") is data


@pytest.mark.parametrize("materials, match", [
    ({"ball": "steel", "cup": "steel"}, r"s.toml: materials.cup: ball.xml has no free body named 'cup'"),
    ({}, r"s.toml: materials: no material for body 'ball'.*default"),
    ({"ball": "unobtainium"}, r"s.toml: materials.ball: unknown material"),
    ({"ball": {"E": 1e9, "rho": 1000}}, r"s.toml: materials.ball: nu"),
    ({"ball": 3}, r"s.toml: materials.ball = 3"),
])
def test_material_errors(tmp_path, materials, match):
    _file(tmp_path, "ball.xml", SPHERE)
    data = {"scene": {"bodies": "ball.xml"}, "materials": materials}
    with pytest.raises(InputError, match=match):
        expand_model_bodies(data, tmp_path, "s.toml")


def _expand_error(tmp_path, xml: str, name="m.xml", **data):
    _file(tmp_path, name, xml)
    with pytest.raises(InputError) as exc:
        expand_model_bodies({"scene": {"bodies": name}, "materials": {"default": "steel"}, **data}, tmp_path,
                            "s.toml")
    return str(exc.value)


def _world(inner: str) -> str:
    return f"<mujoco><worldbody>{inner}</worldbody></mujoco>"


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match=r"s.toml: scene.bodies = 'nope.xml': .*nope.xml not found"):
        expand_model_bodies({"scene": {"bodies": "nope.xml"}}, tmp_path, "s.toml")
    msg = _expand_error(tmp_path, _world('<body name="a"><freejoint/><geom type="bx" size="0.01"/></body>'))
    assert "scene.bodies = 'm.xml'" in msg and "MuJoCo" in msg and "invalid keyword: 'bx'" in msg
    msg = _expand_error(tmp_path, '<mujoco><asset><hfield name="h" nrow="3" ncol="3" size="0.1 0.1 0.01 0.01"/>'
                        '</asset><worldbody><body name="a"><freejoint/><geom type="hfield" hfield="h"/></body>'
                        '</worldbody></mujoco>')
    assert "body 'a'" in msg and "'hfield' is not supported" in msg
    with pytest.raises(InputError, match=r"\[materials\] goes with scene.bodies"):
        expand_model_bodies({"materials": {"a": "steel"}}, tmp_path, "s.toml")
    with pytest.raises(InputError, match="scene.bodies = 3"):
        expand_model_bodies({"scene": {"bodies": 3}}, tmp_path, "s.toml")


@pytest.mark.parametrize("inner, match", [
    ('<geom type="plane" size="1 1 1" euler="20 0 0"/>', r"the scene's ground is horizontal"),
    ('<geom type="plane" size="1 1 1"/><geom type="plane" size="1 1 1" pos="0 0 1"/>', "second ground plane"),
    ('<body name="arm"><joint type="slide"/><geom type="sphere" size="0.01"/></body>',
     "body 'arm' hangs from 'world' by a slide joint"),
    ('<body name="arm" pos="0 0 1"><freejoint/><geom type="sphere" size="0.01"/><body name="hand">'
     '<joint type="hinge"/><geom type="sphere" size="0.01" pos="0.05 0 0"/></body></body>',
     "body 'hand' hangs from 'arm' by a hinge joint"),
    ('<body name="e"><freejoint/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body>',
     "free body 'e' has no geoms"),
    ('<body name="two"><freejoint/><geom type="sphere" size="0.01"/>'
     '<geom type="sphere" size="0.01" pos="0.1 0 0"/></body>',
     r"body 'two' \(2 geoms\).*neither touch nor overlap.*own <freejoint/> body"),
])
def test_geometry_errors(tmp_path, inner, match):
    ok = '<body name="a" pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.01"/></body>'
    assert "s.toml: scene.bodies = 'm.xml'" in _expand_error(tmp_path, _world(inner + ok))
    with pytest.raises(InputError, match=match):
        expand_model_bodies({"scene": {"bodies": "m.xml"}, "materials": {"default": "steel"}}, tmp_path, "s.toml")


def test_static_geometry_and_hinged_bodies(tmp_path):
    # a table in the world body and a shelf welded to the world become static props; a lid on a hinge and a bell
    # on a ball joint become jointed objects, anchored where MuJoCo puts their joints
    xml = _world('<geom name="table" type="box" size="0.3 0.3 0.01" pos="0 0 0.4"/>'
                 '<body name="shelf" pos="0 1 0.8"><geom type="box" size="0.3 0.1 0.01"/></body>'
                 '<body name="lid" pos="0.5 0 0.6"><joint type="hinge" axis="0 1 0" pos="0 0 0.05"/>'
                 '<geom type="box" size="0.05 0.05 0.05"/></body>'
                 '<body name="bell" pos="-0.5 0 0.6"><joint type="ball" pos="0 0 0.03"/>'
                 '<geom type="sphere" size="0.03"/></body>'
                 '<body name="a" pos="0 0 0.6"><freejoint/><geom type="sphere" size="0.01"/></body>')
    objs, _ = objects_from_model_file(_file(tmp_path, "m.xml", xml), {}, default_material="steel")
    by = {o["name"]: o for o in objs}
    assert by["table"]["static"] and np.allclose(by["table"]["position"], [0, 0, 0.4], atol=1e-12)
    assert by["shelf"]["static"] and np.allclose(by["shelf"]["position"], [0, 1, 0.8], atol=1e-12)
    assert by["lid"]["joint"] == "hinge" and np.allclose(by["lid"]["anchor"], [0.5, 0, 0.65])
    assert np.allclose(by["lid"]["axis"], [0, 1, 0])
    assert by["bell"]["joint"] == "ball" and np.allclose(by["bell"]["anchor"], [-0.5, 0, 0.63])
    assert "joint" not in by["a"] and "static" not in by["a"]
    # and they load as a scene
    from impactsound.scene import load_scene
    sc = load_scene({"scene": {"bodies": "m.xml"}, "materials": {"default": "steel"},
                     "listener": [{"position": [0, -2, 1]}]}, base=tmp_path)
    kinds = {b.name: (b.mount.kind if b.mount else "free") for b in sc.bodies}
    assert kinds == {"table": "static", "shelf": "static", "lid": "hinge", "bell": "ball", "a": "free"}


def test_ignored_and_plain_errors(tmp_path):
    # non-colliding static geometry is ignored; no free body at all is an error
    (o,), ground = objects_from_model_file(_file(tmp_path, "v.xml", _world(
        '<geom type="box" size="0.3 0.3 0.01" contype="0" conaffinity="0"/>'
        '<body name="a"><freejoint/><geom type="sphere" size="0.01"/></body>')), {}, default_material="steel")
    assert o["name"] == "a" and ground is None
    assert "has no bodies" in _expand_error(tmp_path, _world('<geom type="plane" size="1 1 1"/>'))
    msg = _expand_error(tmp_path, _world('<geom type="plane" size="1 1 1" pos="0 0 0.1"/>'
                                         '<body name="a"><freejoint/><geom type="sphere" size="0.01"/></body>'),
                        ground={"height": 0.0})
    assert "ground.height = 0.0, but m.xml has a ground plane at z = 0.1" in msg


def test_urdf_package_mesh_path(tmp_path):
    (tmp_path / "foo" / "meshes").mkdir(parents=True)
    (tmp_path / "foo" / "urdf").mkdir()
    box = trimesh.creation.box(extents=[0.02, 0.03, 0.04])
    box.apply_translation([0.005, 0.0, 0.0])
    box.export(tmp_path / "foo" / "meshes" / "b.stl")
    urdf = """<robot name="r"><link name="block"><collision><origin xyz="0 0 0.1"/>
      <geometry><mesh filename="package://foo/meshes/b.stl"/></geometry></collision></link></robot>"""
    (o,), _ = objects_from_model_file(_file(tmp_path / "foo" / "urdf", "p.urdf", urdf), {"block": "steel"})
    assert np.allclose(o["position"], [0.005, 0.0, 0.1], atol=1e-7)
    with pytest.raises(InputError, match="no package 'bar' holding 'meshes/b.stl'"):
        objects_from_model_file(_file(tmp_path, "q.urdf", urdf.replace("foo", "bar")), {"block": "steel"})


def test_load_scene_reads_bodies_from_an_mjcf_file_next_to_the_toml(tmp_path):
    """The TOML route: `[scene] bodies = "ball.xml"` with `[materials]`, read by impactsound.load_scene."""
    from impactsound import load_scene
    _file(tmp_path, "ball.xml", SPHERE)
    toml = _file(tmp_path, "s.toml", '[scene]\nduration = 0.5\nbodies = "ball.xml"\n\n[materials]\nball = "steel"\n\n'
                 '[[listener]]\nposition = [0.0, -0.5, 0.3]\n')
    m, d = _mj(tmp_path / "ball.xml")
    scene = load_scene(toml)
    (b,) = scene.bodies
    assert b.name == "ball" and b.material.name == "steel"
    assert np.allclose(b.position, d.xipos[m.body("ball").id], atol=1e-9)
