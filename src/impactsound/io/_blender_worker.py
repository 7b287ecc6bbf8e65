"""Runs inside a subprocess with Blender's Python module (io/blender.py): ``python -m
impactsound.io._blender_worker FILE.blend OUT.npz``. Prints ``ERROR: message`` and exits 2 on a user error."""
from __future__ import annotations

import json
import sys

import numpy as np


def _fail(msg):
    print(f"ERROR: {msg}", flush=True)
    sys.exit(2)


def main(path: str, out: str) -> None:
    import bpy
    try:
        bpy.ops.wm.open_mainfile(filepath=path)
    except Exception as exc:
        _fail(f"Blender cannot open it ({exc})")
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    unit = scene.unit_settings.scale_length if scene.unit_settings.system != "NONE" else 1.0
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    if len(frames) < 3:
        _fail(f"the scene has {len(frames)} frame(s) ({scene.frame_start}..{scene.frame_end}); contacts are "
              "inferred from motion and need at least 3")
    meshes = [o for o in scene.objects if o.type == "MESH"]
    skipped = {o.name: f"a {o.type.lower()}, not a mesh" for o in scene.objects if o.type not in ("MESH", "CAMERA")}
    mats = {o.name: [] for o in meshes}
    cam = []
    for f in frames:
        scene.frame_set(f)
        for o in meshes:
            mats[o.name].append(np.array(o.matrix_world, np.float64))
        if scene.camera is not None:
            cam.append(np.array(scene.camera.matrix_world.translation, np.float64) * unit)
    scene.frame_set(frames[0])
    depsgraph = bpy.context.evaluated_depsgraph_get()
    objects, arrays, ground = [], {}, None
    for o in meshes:
        M = np.stack(mats[o.name])
        moves = np.abs(M - M[0]).max() > 1e-9
        rb = o.rigid_body
        if rb is None and not moves:
            skipped[o.name] = "no rigid body physics and it does not move"
            continue
        ev = o.evaluated_get(depsgraph)
        me = ev.to_mesh()
        me.calc_loop_triangles()
        verts = np.array([v.co[:] for v in me.vertices], np.float64)
        faces = np.array([lt.vertices[:] for lt in me.loop_triangles], np.int64).reshape(-1, 3)
        ev.to_mesh_clear()
        A = M[:, :3, :3]
        scale = np.linalg.norm(A, axis=1)
        if np.ptp(scale, axis=0).max() > 1e-6 * scale.max():
            _fail(f"object '{o.name}': its scale changes during the frames; a rigid object keeps its size (apply "
                  "the scale: Object > Apply > Scale)")
        verts = verts * scale[0] * unit
        flat = len(verts) < 4 or np.linalg.svd(verts - verts.mean(axis=0), compute_uv=False)[-1] < 1e-9
        passive = rb is not None and rb.type == "PASSIVE"
        if flat:
            n = A[0] @ np.array([0.0, 0.0, 1.0])
            if passive and not moves and abs(abs(n[2]) / np.linalg.norm(n) - 1.0) < 1e-6:
                ground = float(M[0, 2, 3] * unit)
                skipped[o.name] = f"a flat horizontal passive plane: the ground at z = {ground:.6g} m"
                continue
            _fail(f"object '{o.name}' is flat (no volume); give it thickness (a Solidify modifier), or make it "
                  "a horizontal passive plane to be the ground")
        R = A / scale[:, None, :]
        from scipy.spatial.transform import Rotation
        q = Rotation.from_matrix(R).as_quat(scalar_first=True)
        i = len(objects)
        arrays.update({f"v{i}": verts, f"f{i}": faces, f"p{i}": M[:, :3, 3] * unit, f"q{i}": q})
        mat = o.active_material.name if o.active_material is not None else ""
        objects.append({"name": o.name, "material": mat, "static": bool(passive and not moves),
                        "mass": float(rb.mass) if rb is not None else None})
    if not objects:
        _fail("no rigid bodies and nothing that moves: add Rigid Body physics to the objects that fall "
              f"(Physics > Rigid Body), or keyframe them; objects seen: {sorted(skipped) or 'none'}")
    t = (np.asarray(frames, np.float64) - frames[0]) / fps
    meta = {"objects": objects, "skipped": skipped, "fps": fps, "ground": ground,
            "camera": np.asarray(cam).tolist() if cam else None}
    np.savez(out, t=t, meta=np.asarray(json.dumps(meta)), **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
