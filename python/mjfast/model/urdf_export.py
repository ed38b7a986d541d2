"""Any MuJoCo model written as a URDF (SPEC §24): one link per body under a root link `world`, a
URDF joint per hinge and slide (intermediate links where a body has several), visuals,
collisions, materials and inertials, mesh geometry as STL files; its forward kinematics equals
MuJoCo's body poses.

It owns the writing; it does not own reading a URDF (`mjfast.model.urdf`) nor publishing one
(`mjfast.interop.ros2`).
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mjfast.model.urdf import urdf_description_of

__all__ = ["export_urdf", "mesh_cache_dir", "robot_description"]

# An unlimited slide as a URDF `prismatic` joint, which must have limits (urdfdom refuses one
# without): this far either way.
UNLIMITED_SLIDE_M = 1e9
# A MuJoCo plane of size 0 is infinite; URDF has no plane: a thin box this wide.
INFINITE_PLANE_M = 100.0
PLANE_THICKNESS_M = 1e-3
_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)

Transform = tuple[np.ndarray, np.ndarray]  # (position, unit quaternion w x y z)


def mesh_cache_dir() -> Path:
    """Where the bridge's robot descriptions keep their STL files: `$XDG_CACHE_HOME/mjfast/
    meshes` (default `~/.cache`); each file named by a hash of its content."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mjfast" / "meshes"


def robot_description(model: mujoco.MjModel) -> str:
    """The URDF that `/robot_description` carries for `model`: the URDF it was loaded from (mesh
    URIs absolute), else `export_urdf` with its meshes in `mesh_cache_dir()`."""
    original = urdf_description_of(model)
    if original is not None:
        return original
    return export_urdf(model, mesh_dir=mesh_cache_dir())


def export_urdf(model: mujoco.MjModel, *, mesh_dir: str | os.PathLike[str] | None = None) -> str:
    """`model` as URDF text (SPEC §24). Mesh geoms are written as binary STL files into
    `mesh_dir` (default `mesh_cache_dir()`), named by a hash of their content, and referenced by
    absolute `file://` URIs."""
    if not isinstance(model, mujoco.MjModel):
        raise TypeError(f"export_urdf takes a mujoco.MjModel, got {type(model).__name__}")
    return _Writer(model, Path(mesh_dir) if mesh_dir is not None else mesh_cache_dir()).write()


# -- numbers --------------------------------------------------------------------------------------


def _num(value: float) -> str:
    """Full precision: the shortest text that reads back as the same float."""
    value = float(value)
    return "0" if value == 0 else repr(value)


def _nums(values: np.ndarray | list[float]) -> str:
    return " ".join(_num(v) for v in values)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _rotate(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(vec, dtype=float), quat)
    return out


def _compose(a: Transform, b: Transform) -> Transform:
    return a[0] + _rotate(a[1], b[0]), _quat_mul(a[1], b[1])


_IDENTITY: Transform = (np.zeros(3), np.array([1.0, 0, 0, 0]))


def _translation(vec: np.ndarray) -> Transform:
    return np.asarray(vec, dtype=float), _IDENTITY[1]


def _axis_angle(axis: np.ndarray, angle: float) -> Transform:
    quat = np.zeros(4)
    mujoco.mju_axisAngle2Quat(quat, np.asarray(axis, dtype=float), angle)
    return np.zeros(3), quat


def _rpy(quat: np.ndarray) -> np.ndarray:
    """URDF's roll, pitch, yaw (R = Rz(yaw) Ry(pitch) Rx(roll)) of a unit quaternion, exact to
    rounding also at pitch = ±90°: yaw first, then pitch and roll from what is left (at the
    singularity any yaw will do, and roll takes up the rest)."""
    matrix = np.zeros(9)
    mujoco.mju_quat2Mat(matrix, quat / np.linalg.norm(quat))
    r = matrix.reshape(3, 3)
    yaw = math.atan2(r[1, 0], r[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    rest = np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]]) @ r  # Rz(-yaw) R = Ry(pitch) Rx(roll)
    pitch = math.atan2(-rest[2, 0], rest[0, 0])
    roll = math.atan2(-rest[1, 2], rest[1, 1])
    return np.array([roll, pitch, yaw])


def _origin(parent: ET.Element, transform: Transform) -> None:
    """`<origin>` of `transform` (none for the identity, URDF's default)."""
    pos, quat = transform
    attributes = {}
    if np.any(pos != 0):
        attributes["xyz"] = _nums(pos)
    rpy = _rpy(quat)
    if np.any(rpy != 0):
        attributes["rpy"] = _nums(rpy)
    if attributes:
        ET.SubElement(parent, "origin", attributes)


# -- the writer -----------------------------------------------------------------------------------


@dataclass
class _Link:
    element: ET.Element
    name: str


class _Writer:
    def __init__(self, model: mujoco.MjModel, mesh_dir: Path) -> None:
        self.model = model
        self.mesh_dir = mesh_dir
        self.robot = ET.Element("robot", name=model.names[:model.names.index(b"\0")].decode()
                                or "mujoco")
        self.taken: set[str] = set()  # link names
        self.joint_names: set[str] = {self._joint_name(j) for j in range(model.njnt)}
        self.taken_joints: set[str] = set()
        self.materials: dict[tuple[str, ...], str] = {}
        self.mesh_files: dict[int, Path] = {}
        self.body_links: dict[int, str] = {}

    # names

    def _name(self, objtype: mujoco.mjtObj, index: int) -> str | None:
        return mujoco.mj_id2name(self.model, objtype, index) or None

    def _joint_name(self, joint: int) -> str:
        return self._name(mujoco.mjtObj.mjOBJ_JOINT, joint) or f"joint_{joint}"

    def _body_name(self, body: int) -> str:
        return "world" if body == 0 else (
            self._name(mujoco.mjtObj.mjOBJ_BODY, body) or f"body_{body}")

    def _unique(self, name: str, taken: set[str]) -> str:
        candidate, n = name, 1
        while candidate in taken:
            n += 1
            candidate = f"{name}_{n}"
        taken.add(candidate)
        return candidate

    # structure

    def write(self) -> str:
        model = self.model
        for body in range(model.nbody):
            self.body_links[body] = self._unique(self._body_name(body), self.taken)
        self.link_elements: dict[str, ET.Element] = {}
        self._link(self.body_links[0])
        for body in range(1, model.nbody):
            self._body(body)
        for geom in range(model.ngeom):
            self._geom(geom)
        for body in range(1, model.nbody):
            self._inertial(body)
        # Materials first, as URDF readers expect them declared before use.
        for index, (rgba, name) in enumerate(self.materials.items()):
            material = ET.Element("material", name=name)
            ET.SubElement(material, "color", rgba=" ".join(rgba))
            self.robot.insert(index, material)
        ET.indent(self.robot)
        return '<?xml version="1.0"?>\n' + ET.tostring(self.robot, encoding="unicode") + "\n"

    def _link(self, name: str) -> ET.Element:
        element = ET.SubElement(self.robot, "link", name=name)
        self.link_elements[name] = element
        return element

    def _joint(self, name: str, kind: str, parent: str, child: str, origin: Transform,
               axis: np.ndarray | None = None) -> ET.Element:
        joint = ET.SubElement(self.robot, "joint", name=name, type=kind)
        _origin(joint, origin)
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=child)
        if axis is not None:
            ET.SubElement(joint, "axis", xyz=_nums(axis))
        return joint

    def _fixed_name(self, link: str) -> str:
        return self._unique(f"{link}_fixed", self.taken_joints | self.joint_names)

    def _body(self, body: int) -> None:
        """The body's link, reached from its parent's link by its joints in MuJoCo's order (each
        acting in the frame the ones before it left), then a fixed offset if one is left."""
        model = self.model
        link = self.body_links[body]
        parent = self.body_links[int(model.body_parentid[body])]
        carry: Transform = (model.body_pos[body].copy(), model.body_quat[body].copy())
        first, count = int(model.body_jntadr[body]), int(model.body_jntnum[body])
        joints = range(first, first + count) if count > 0 else range(0)
        moving = [j for j in joints if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_BALL]
        current = parent
        ball_name = None
        for j in joints:
            kind = model.jnt_type[j]
            name = self._unique(self._joint_name(j), self.taken_joints)
            if kind == mujoco.mjtJoint.mjJNT_FREE:
                # MuJoCo's free joint puts the body at its qpos in world coordinates.
                self._link(link)
                self._joint(name, "floating", self.body_links[0], link, _IDENTITY)
                return
            if kind == mujoco.mjtJoint.mjJNT_BALL:
                # URDF has no ball joint: a fixed one of its name (TfPublisher gives its motion)
                ball_name = name
                continue
            last = j == moving[-1]
            anchor = model.jnt_pos[j].copy()
            axis = model.jnt_axis[j].copy()
            ref = float(model.qpos0[model.jnt_qposadr[j]])
            if kind == mujoco.mjtJoint.mjJNT_HINGE:
                origin = _compose(_compose(carry, _translation(anchor)), _axis_angle(axis, -ref))
                after: Transform = _translation(-anchor)
                urdf_kind = "revolute" if model.jnt_limited[j] else "continuous"
            else:  # slide
                origin = _compose(carry, _translation(-axis * ref))
                after = _IDENTITY
                urdf_kind = "prismatic"
            child = link if last and not np.any(after[0]) else self._unique(
                f"{link}__{name}", self.taken)
            self._link(child)
            element = self._joint(name, urdf_kind, current, child, origin, axis)
            self._limits(element, j, urdf_kind)
            self._dynamics(element, j)
            current, carry = child, after
            if child == link:
                return
        self._link(link)
        self._joint(ball_name or self._fixed_name(link), "fixed", current, link, carry)

    def _limits(self, element: ET.Element, joint: int, kind: str) -> None:
        model = self.model
        if kind == "continuous":
            return
        if model.jnt_limited[joint]:
            lower, upper = model.jnt_range[joint]
        else:
            lower, upper = -UNLIMITED_SLIDE_M, UNLIMITED_SLIDE_M
        effort = float(np.max(np.abs(model.jnt_actfrcrange[joint]))
                       ) if model.jnt_actfrclimited[joint] else 0.0
        # urdfdom requires effort and velocity; MuJoCo has no velocity limit (0: not given).
        ET.SubElement(element, "limit", lower=_num(lower), upper=_num(upper),
                      effort=_num(effort), velocity="0")

    def _dynamics(self, element: ET.Element, joint: int) -> None:
        damping = float(self.model.dof_damping[self.model.jnt_dofadr[joint]])
        friction = float(self.model.dof_frictionloss[self.model.jnt_dofadr[joint]])
        if damping or friction:
            ET.SubElement(element, "dynamics", damping=_num(damping), friction=_num(friction))

    def _inertial(self, body: int) -> None:
        model = self.model
        mass = float(model.body_mass[body])
        if mass <= 0:
            return
        inertial = ET.SubElement(self.link_elements[self.body_links[body]], "inertial")
        _origin(inertial, (model.body_ipos[body], model.body_iquat[body]))
        ET.SubElement(inertial, "mass", value=_num(mass))
        ixx, iyy, izz = model.body_inertia[body]
        ET.SubElement(inertial, "inertia", ixx=_num(ixx), ixy="0", ixz="0", iyy=_num(iyy),
                      iyz="0", izz=_num(izz))

    # geometry

    def _geom(self, geom: int) -> None:
        model = self.model
        link = self.link_elements[self.body_links[int(model.geom_bodyid[geom])]]
        pose: Transform = (model.geom_pos[geom].copy(), model.geom_quat[geom].copy())
        shapes = self._shapes(geom)
        if not shapes:
            return
        name = self._name(mujoco.mjtObj.mjOBJ_GEOM, geom)
        colliding = model.geom_contype[geom] != 0 or model.geom_conaffinity[geom] != 0
        material = self._material(geom)
        for role in ("visual", "collision") if colliding else ("visual",):
            for index, (offset, shape) in enumerate(shapes):
                # Named once: a reader that makes geoms of both (MuJoCo) wants names unique.
                named = name is not None and role == "visual" and index == 0
                element = ET.SubElement(link, role, {"name": name} if named and name else {})
                _origin(element, _compose(pose, offset))
                geometry = ET.SubElement(element, "geometry")
                geometry.append(shape)
                if role == "visual":
                    ET.SubElement(element, "material", name=material)

    def _shapes(self, geom: int) -> list[tuple[Transform, ET.Element]]:
        """The URDF shapes of a geom, each with its offset in the geom's frame."""
        model = self.model
        kind = model.geom_type[geom]
        size = model.geom_size[geom]
        if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            return [(_IDENTITY, ET.Element("sphere", radius=_num(size[0])))]
        if kind == mujoco.mjtGeom.mjGEOM_BOX:
            return [(_IDENTITY, ET.Element("box", size=_nums(2 * size)))]
        if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
            return [(_IDENTITY, ET.Element("cylinder", radius=_num(size[0]),
                                           length=_num(2 * size[1])))]
        if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            radius, half = size[0], size[1]
            return [(_IDENTITY, ET.Element("cylinder", radius=_num(radius),
                                           length=_num(2 * half))),
                    (_translation(np.array([0, 0, half])),
                     ET.Element("sphere", radius=_num(radius))),
                    (_translation(np.array([0, 0, -half])),
                     ET.Element("sphere", radius=_num(radius)))]
        if kind == mujoco.mjtGeom.mjGEOM_PLANE:
            x = size[0] if size[0] > 0 else INFINITE_PLANE_M / 2
            y = size[1] if size[1] > 0 else INFINITE_PLANE_M / 2
            return [(_translation(np.array([0, 0, -PLANE_THICKNESS_M / 2])),
                     ET.Element("box", size=_nums([2 * x, 2 * y, PLANE_THICKNESS_M])))]
        if kind == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
            vertices, faces = _unit_sphere()
            return [(_IDENTITY, self._mesh_element(vertices * size, faces))]
        if kind == mujoco.mjtGeom.mjGEOM_MESH:
            mesh = int(model.geom_dataid[geom])
            start, count = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
            fstart, fcount = int(model.mesh_faceadr[mesh]), int(model.mesh_facenum[mesh])
            vertices = model.mesh_vert[start:start + count].astype(float)
            faces = model.mesh_face[fstart:fstart + fcount]
            return [(_IDENTITY, self._mesh_element(vertices, faces))]
        return []  # height fields, SDFs: nothing URDF can say

    def _mesh_element(self, vertices: np.ndarray, faces: np.ndarray) -> ET.Element:
        data = _binary_stl(vertices, faces)
        path = self.mesh_dir / f"{hashlib.sha256(data).hexdigest()[:24]}.stl"
        if not path.is_file():
            self.mesh_dir.mkdir(parents=True, exist_ok=True)
            # Written whole under another name, then renamed: another process reading the same
            # content-named file never sees half of it.
            with tempfile.NamedTemporaryFile(dir=self.mesh_dir, suffix=".part",
                                             delete=False) as part:
                part.write(data)
            os.replace(part.name, path)
        return ET.Element("mesh", filename=path.resolve().as_uri())

    def _material(self, geom: int) -> str:
        model = self.model
        rgba = model.geom_rgba[geom]
        matid = int(model.geom_matid[geom])
        if matid >= 0 and np.allclose(rgba, _DEFAULT_RGBA):  # MuJoCo draws the material's
            rgba = model.mat_rgba[matid]
        # float32 in MuJoCo: the shortest text that reads back as the same float32.
        key = tuple(str(np.float32(v)) for v in rgba)
        if key not in self.materials:
            self.materials[key] = f"rgba_{len(self.materials)}"
        return self.materials[key]


def _binary_stl(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """Binary STL: an 80-byte header, the triangle count, then per triangle its normal, three
    vertices (float32) and a zero attribute count."""
    triangles = np.asarray(vertices, dtype=np.float64)[np.asarray(faces, dtype=np.int64)]
    normals = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, lengths, out=np.zeros_like(normals), where=lengths > 0)
    record = np.zeros(len(triangles), dtype=[("normal", "<f4", 3), ("vertices", "<f4", (3, 3)),
                                              ("attributes", "<u2")])
    record["normal"] = normals
    record["vertices"] = triangles
    header = b"mjfast export_urdf".ljust(80, b" ")
    return header + np.uint32(len(triangles)).tobytes() + record.tobytes()


def _unit_sphere(rings: int = 12, segments: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """A UV sphere of radius 1 (an ellipsoid once scaled)."""
    vertices = [[0.0, 0.0, 1.0]]
    for i in range(1, rings):
        theta = math.pi * i / rings
        for j in range(segments):
            phi = 2 * math.pi * j / segments
            vertices.append([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi),
                             math.cos(theta)])
    vertices.append([0.0, 0.0, -1.0])
    faces = []
    bottom = len(vertices) - 1
    for j in range(segments):
        faces.append([0, 1 + j, 1 + (j + 1) % segments])
    for i in range(rings - 2):
        for j in range(segments):
            a = 1 + i * segments + j
            b = 1 + i * segments + (j + 1) % segments
            faces += [[a, a + segments, b], [b, a + segments, b + segments]]
    last = 1 + (rings - 2) * segments
    for j in range(segments):
        faces.append([last + j, bottom, last + (j + 1) % segments])
    return np.array(vertices), np.array(faces)
