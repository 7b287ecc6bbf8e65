"""Rigid motion and meshes from a glTF 2.0 file (.gltf or .glb) with node animations.

glTF (Khronos glTF 2.0 specification, sec. 3.5 "Nodes", 3.11 "Animations") stores each node's local transform as
translation, rotation (a unit quaternion in x, y, z, w order) and scale, animated by samplers: key times [s] and
values, interpolated LINEAR (slerp for rotations), STEP or CUBICSPLINE. We read the files with pygltflib (the
``animation`` extra) and take:

- every node that has a mesh and is animated itself or below an animated node: one rigid object, named by the
  node (its mesh's name when the node has none); its mesh in the node's own coordinates, times its world scale;
- its world pose at every key time of the file (the union over all channels; a baked simulation keys every
  frame), as the world position of the node's origin and its world rotation: a pose table with ``origin =
  "mesh"`` (scene/poses.py);
- each object's glTF material name (of its first primitive), for the caller's mapping to our materials.

glTF's unit is the metre and +y is up (sec. 3.4); we turn the world +y up into our +z up (x -> x, y -> z,
z -> -y). A node whose world scale changes over time is not rigid: an error names it.
"""
from __future__ import annotations

import base64
from pathlib import Path

import numpy as np

from ..errors import InputError

_DTYPE = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16, 5125: np.uint32, 5126: np.float32}
_WIDTH = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}
#: glTF world (+y up) -> ours (+z up): a rotation of +90 degrees about x
_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def _fail(path, msg):
    raise InputError(f"{path}: {msg}")


class _Reader:
    def __init__(self, path: Path):
        try:
            import pygltflib
        except ImportError:
            _fail(path, "reading glTF needs pygltflib: pip install 'impactsound[animation]'")
        try:
            self.g = pygltflib.GLTF2().load(str(path))
        except Exception as exc:                                # a truncated or foreign file
            _fail(path, f"not a readable glTF 2.0 file ({type(exc).__name__}: {exc})")
        if self.g is None:
            _fail(path, "not a readable glTF 2.0 file")
        self.path = path
        self._buffers = {}

    def buffer(self, i: int) -> bytes:
        if i not in self._buffers:
            buf = self.g.buffers[i]
            if buf.uri is None:
                data = self.g.binary_blob()
            elif buf.uri.startswith("data:"):
                data = base64.b64decode(buf.uri.split(",", 1)[1])
            else:
                f = self.path.parent / buf.uri
                if not f.is_file():
                    _fail(self.path, f"buffer {i} refers to {buf.uri!r}, which is not next to the file")
                data = f.read_bytes()
            self._buffers[i] = data
        return self._buffers[i]

    def accessor(self, i: int) -> np.ndarray:
        acc = self.g.accessors[i]
        dtype = np.dtype(_DTYPE[acc.componentType])
        width = _WIDTH[acc.type]
        if acc.bufferView is None:
            return np.zeros((acc.count, width), dtype)
        view = self.g.bufferViews[acc.bufferView]
        data = self.buffer(view.buffer)
        start = (view.byteOffset or 0) + (acc.byteOffset or 0)
        stride = view.byteStride or dtype.itemsize * width
        rows = np.ndarray((acc.count, width), dtype, buffer=data, offset=start, strides=(stride, dtype.itemsize))
        return np.array(rows)


def _quat_xyzw_to_matrix(q):
    from ..rotation import quat_to_matrix
    return quat_to_matrix(np.asarray(q, np.float64)[..., [3, 0, 1, 2]].reshape(-1, 4)).reshape(q.shape[:-1] + (3, 3))


def _sample(times, values, interp, t, rotation):
    """A sampler at times t (K,): values (n, w) keyed at times (n,)."""
    times = np.asarray(times, np.float64).reshape(-1)
    values = np.asarray(values, np.float64)
    if interp == "CUBICSPLINE":
        values = values.reshape(len(times), 3, -1)[:, 1]        # (in-tangent, value, out-tangent): the values
    if interp == "STEP":
        k = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 1)
        return values[k]
    if rotation:
        from .trajectory import Trajectory
        q = values[:, [3, 0, 1, 2]]
        tr = Trajectory(times, np.zeros((len(times), 3)), q) if len(times) > 1 else None
        out = tr.quaternion_at(t) if tr is not None else np.repeat(q, len(t), axis=0)
        return out[:, [1, 2, 3, 0]]
    return np.stack([np.interp(t, times, values[:, j]) for j in range(values.shape[1])], axis=1)


def read_gltf_motion(path: str | Path) -> tuple[np.ndarray, list]:
    """The animated rigid objects of a glTF file (module docstring).

    Parameters
    ----------
    path : path-like
        .gltf or .glb.

    Returns
    -------
    t : ndarray, shape (K,)
        Frame times [s] (the file's key times).
    objects : list of scene.motion_import.ImportedObject
        Name (the node's), mesh in the node's own frame times its world scale, glTF material name, and the pose
        of the node's origin per frame in our world (+z up).

    Raises
    ------
    InputError
        No animation, no animated mesh, a scale that changes, a mesh that is not triangles: naming file and node.
    """
    from .motion_import import ImportedObject
    path = Path(path)
    if not path.is_file():
        _fail(path, "glTF file not found")
    r = _Reader(path)
    g = r.g
    if not g.animations:
        _fail(path, "the file has no animation; export the motion with it (Blender: glTF export with "
                    "'Animation' on, rigid bodies baked to keyframes)")
    nodes = g.nodes or []
    # key times: the union over every channel
    chans = []
    for a in g.animations:
        for ch in a.channels:
            s = a.samplers[ch.sampler]
            if ch.target.node is None or ch.target.path not in ("translation", "rotation", "scale"):
                continue                                         # morph weights: not rigid motion
            chans.append((ch.target.node, ch.target.path, r.accessor(s.input).reshape(-1),
                          r.accessor(s.output), s.interpolation or "LINEAR"))
    if not chans:
        _fail(path, "the animation moves no node (only morph targets?); rigid objects need node animations")
    t = np.unique(np.concatenate([c[2] for c in chans]).astype(np.float64))
    K = len(t)
    # local transforms of every node at every frame
    T = np.zeros((len(nodes), K, 3))
    R = np.tile(np.eye(3), (len(nodes), K, 1, 1))
    S = np.ones((len(nodes), K, 3))
    for i, n in enumerate(nodes):
        if n.matrix is not None and any(v != e for v, e in zip(n.matrix, np.eye(4).T.reshape(-1))):
            M = np.asarray(n.matrix, np.float64).reshape(4, 4).T
            sc = np.linalg.norm(M[:3, :3], axis=0)
            T[i], R[i], S[i] = M[:3, 3], M[:3, :3] / sc, sc
        else:
            if n.translation is not None:
                T[i] = n.translation
            if n.rotation is not None:
                R[i] = _quat_xyzw_to_matrix(np.asarray(n.rotation, np.float64))
            if n.scale is not None:
                S[i] = n.scale
    animated = set()
    for node, what, times, values, interp in chans:
        v = _sample(times, values, interp, t, what == "rotation")
        animated.add(node)
        if what == "translation":
            T[node] = v
        elif what == "rotation":
            R[node] = _quat_xyzw_to_matrix(v / np.linalg.norm(v, axis=1, keepdims=True))
        else:
            S[node] = v
    parent = {c: i for i, n in enumerate(nodes) for c in (n.children or [])}
    world = {}

    def world_of(i):
        # (K, 4, 4) world matrix of node i
        if i not in world:
            M = np.tile(np.eye(4), (K, 1, 1))
            M[:, :3, :3] = R[i] * S[i][:, None, :]
            M[:, :3, 3] = T[i]
            world[i] = world_of(parent[i]) @ M if i in parent else M
        return world[i]

    def moves(i):
        while True:
            if i in animated:
                return True
            if i not in parent:
                return False
            i = parent[i]

    objects = []
    for i, n in enumerate(nodes):
        if n.mesh is None or not moves(i):
            continue
        name = n.name or g.meshes[n.mesh].name or f"node{i}"
        W = world_of(i)
        A = W[:, :3, :3]
        scale = np.linalg.norm(A, axis=1)                       # column norms: the world scale of each axis
        if np.ptp(scale, axis=0).max() > 1e-6 * scale.max():
            _fail(path, f"node '{name}': its world scale changes during the animation; a rigid object keeps its "
                        "size (apply the scale in the file, animate location and rotation only)")
        Rw = A / scale[:, None, :]
        if np.linalg.det(Rw[0]) < 0:
            _fail(path, f"node '{name}': its world transform mirrors (a negative scale); apply the scale in the file")
        verts, faces, material = [], [], ""
        for prim in g.meshes[n.mesh].primitives:
            if prim.mode not in (None, 4):
                _fail(path, f"node '{name}': mesh primitives must be triangles (mode 4), not mode {prim.mode}")
            pos = r.accessor(prim.attributes.POSITION).astype(np.float64)
            idx = (r.accessor(prim.indices).reshape(-1) if prim.indices is not None else np.arange(len(pos)))
            faces.append(idx.reshape(-1, 3).astype(np.int64) + sum(len(v) for v in verts))
            verts.append(pos)
            if not material and prim.material is not None:
                material = g.materials[prim.material].name or f"material{prim.material}"
        from ..rotation import matrix_to_quat
        Rw_z = _Y_UP @ Rw
        objects.append(ImportedObject(name=name, vertices=np.concatenate(verts) * scale[0], faces=np.concatenate(faces),
                                      material=material, position=W[:, :3, 3] @ _Y_UP.T,
                                      quaternion=matrix_to_quat(Rw_z)))
    if not objects:
        _fail(path, "no animated node carries a mesh; rigid objects are mesh nodes animated by translation/"
                    "rotation (or below an animated node)")
    names = [o.name for o in objects]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        _fail(path, f"animated nodes share the name(s) {dup}; give each object its own node name")
    return t, objects
