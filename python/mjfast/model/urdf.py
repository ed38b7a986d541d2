"""A URDF file as a MuJoCo model (SPEC §24): MuJoCo's own URDF parser (through `mujoco.MjSpec`)
with the mesh URIs resolved (`package://`, `file://`, relative), visual geometry kept, fixed links
kept as bodies, and the `<ros2_control>` block made into actuators and initial positions.

It owns the URDF text and where its meshes are found; it does not own where a model comes from
(`mjfast.sim.config.ModelSource`) nor writing a URDF (`mjfast.model.urdf_export`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from xml.sax.saxutils import quoteattr, unescape

import mujoco
import numpy as np

from mjfast.names import close_matches

__all__ = ["is_urdf_path", "is_urdf_string", "load_urdf", "urdf_description_of"]

_log = logging.getLogger("mjfast.model")

# The mesh formats MuJoCo's compiler reads; any other (DAE, ...) is left out when only a visual
# uses it, and an error when a collision does.
MESH_FORMATS = (".stl", ".obj", ".msh")
# SPEC §24's default gains when the ros2_control joint gives none.
DEFAULT_KP = 100.0
DEFAULT_KV = 10.0
# A massless link (no <inertial>, as URDF allows, e.g. between two joints) gets this much, as
# MuJoCo needs some mass and inertia on every moving body: nothing a step can feel next to the
# links around it.
MASSLESS_KG = 1e-9
MASSLESS_KG_M2 = 1e-12

# The URDF text (mesh URIs absolute) of each model compiled from a URDF, for robot_description;
# weak: it goes with the model.
_descriptions: weakref.WeakKeyDictionary[mujoco.MjModel, str] = weakref.WeakKeyDictionary()


# The first element's name, after an XML declaration, comments and a doctype.
_ROOT = re.compile(r"^\s*(?:<\?.*?\?>\s*|<!--.*?-->\s*|<!DOCTYPE[^>]*>\s*)*<([A-Za-z_][\w.-]*)",
                   re.S)


def _root_element(text: str) -> str | None:
    match = _ROOT.match(text)
    return match.group(1) if match else None


def is_urdf_string(text: object) -> bool:
    """Whether `text` is URDF text (its root element is `<robot>`), not MJCF or a path."""
    return isinstance(text, str) and _root_element(text) == "robot"


def is_urdf_path(path: str | os.PathLike[str]) -> bool:
    """Whether the file at `path` is a URDF: a `.urdf` name, or a `<robot>` root element."""
    path = Path(path)
    if path.suffix.lower() == ".urdf":
        return True
    if path.suffix.lower() == ".xml" or path.suffix.lower() == ".mjcf":
        try:
            with path.open("r", encoding="utf-8", errors="replace") as file:
                head = file.read(4096)
        except OSError:
            return False
        return _root_element(head) == "robot"
    return False


def urdf_description_of(model: mujoco.MjModel) -> str | None:
    """The URDF text (mesh URIs made absolute `file://` URIs) that `model` was compiled from, or
    None: not compiled by `load_urdf`."""
    return _descriptions.get(model)


@dataclass
class _MeshUse:
    """A mesh of the spec, where its file is, and which geoms use it."""

    mesh: Any  # mujoco.MjsMesh
    uri: str
    geoms: list[Any] = field(default_factory=list)
    path: Path | None = None
    looked: list[str] = field(default_factory=list)
    left_out: bool = False

    @property
    def visual_only(self) -> bool:
        return all(g.contype == 0 and g.conaffinity == 0 for g in self.geoms)

    def describe(self) -> str:
        links = sorted({g.parent.name for g in self.geoms})
        role = "visual" if self.visual_only else "collision"
        where = ", ".join(f"'{link}'" for link in links) or "no link"
        return f"the {role} mesh of link {where} ({self.uri})"


def load_urdf(path: str | os.PathLike[str] | None = None, *, text: str | None = None,
              package_paths: Mapping[str, str | os.PathLike[str]] | None = None
              ) -> mujoco.MjModel:
    """Compiles the URDF file at `path` (or the URDF `text`, relative mesh paths then from the
    working directory) into an MjModel (SPEC §24). `package_paths` maps a package name to its
    directory, searched before `ROS_PACKAGE_PATH` and `AMENT_PREFIX_PATH`'s `share/`.

    ValueError: a mesh that cannot be found or loaded (naming it, its URI and every place looked
    at), a `<ros2_control>` joint the URDF lacks, or a URDF that MuJoCo cannot compile."""
    if (path is None) == (text is None):
        raise TypeError("load_urdf takes a path or text, one of them")
    label = "the URDF string" if path is None else f"URDF {path}"
    base = Path.cwd() if path is None else Path(os.fspath(path)).resolve().parent
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
    assert text is not None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise ValueError(f"{label} is not well-formed XML: {error}") from None
    if root.tag != "robot":
        raise ValueError(f"{label} has root element <{root.tag}>, expected <robot>")
    controls = _ros2_control_joints(root, label)
    spec = _parsed_spec(root, label)
    packages = _package_paths(package_paths)
    uses = _mesh_uses(spec)
    for use in uses:
        _resolve(use, base, packages)
    _leave_out_unsupported(spec, uses, label)
    _add_ros2_control(spec, root, controls, label)
    try:
        model = spec.compile()
    except ValueError as error:
        raise _compile_error(error, uses, label) from None
    _descriptions[model] = _absolute_mesh_uris(text, uses)
    return model


# -- parsing --------------------------------------------------------------------------------------


def _parsed_spec(root: ET.Element, label: str) -> mujoco.MjSpec:
    """MuJoCo's URDF parser on `root`, told to keep the visual geoms and the fixed links' bodies
    (its defaults drop both) and the mesh URIs as written (they are resolved here)."""
    root = _copy(root)
    extension = root.find("mujoco")
    if extension is None:
        extension = ET.Element("mujoco")
        root.insert(0, extension)
    compiler = extension.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(extension, "compiler")
    # MuJoCo's defaults for a URDF drop the visuals and fuse fixed links into their parents,
    # and give a link without <inertial> the mass of its geoms (URDF: massless); the URDF's own
    # <mujoco><compiler> says otherwise if it wants.
    for key, value in (("discardvisual", "false"), ("fusestatic", "false"),
                       ("inertiafromgeom", "false"), ("boundmass", repr(MASSLESS_KG)),
                       ("boundinertia", repr(MASSLESS_KG_M2))):
        if compiler.get(key) is None:
            compiler.set(key, value)
    compiler.set("strippath", "false")  # the URIs are resolved here
    for element in root.findall("ros2_control"):
        root.remove(element)  # read here (its <joint>s are no URDF joints)
    try:
        return mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
    except ValueError as error:
        raise ValueError(f"{label} cannot be parsed: {error}") from None


def _copy(root: ET.Element) -> ET.Element:
    return ET.fromstring(ET.tostring(root, encoding="unicode"))


# -- meshes ---------------------------------------------------------------------------------------


def _package_paths(package_paths: Mapping[str, Any] | None) -> dict[str, Path]:
    if package_paths is None:
        return {}
    if not isinstance(package_paths, Mapping):
        raise ValueError(f"package_paths must be a mapping of package name to directory, got "
                         f"{type(package_paths).__name__}")
    out = {}
    for name, directory in package_paths.items():
        if not isinstance(name, str) or not isinstance(directory, (str, os.PathLike)):
            raise ValueError(f"package_paths must map package names to directories, got "
                             f"{name!r}: {directory!r}")
        out[name] = Path(os.fspath(directory)).expanduser()
    return out


def _mesh_uses(spec: mujoco.MjSpec) -> list[_MeshUse]:
    uses = {mesh.name: _MeshUse(mesh, mesh.file) for mesh in spec.meshes}
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH and geom.meshname in uses:
            uses[geom.meshname].geoms.append(geom)
    return list(uses.values())


def mesh_candidates(uri: str, base: Path, packages: Mapping[str, Path]) -> list[tuple[str, Path]]:
    """Where the mesh at `uri` may be, in the order looked at: (where, path) pairs."""
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        package, _, relative = rest.partition("/")
        out: list[tuple[str, Path]] = []
        if package in packages:
            out.append((f"package_paths[{package!r}]", packages[package] / relative))
        for entry in _env_list("ROS_PACKAGE_PATH"):
            out.append(("ROS_PACKAGE_PATH", entry / package / relative))
            if entry.name == package:
                out.append(("ROS_PACKAGE_PATH", entry / relative))
        for entry in _env_list("AMENT_PREFIX_PATH"):
            out.append(("AMENT_PREFIX_PATH", entry / "share" / package / relative))
        return out
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        # file:///abs and file://localhost/abs; file://relative/x, as some URDFs write it.
        host = "" if parsed.netloc in ("", "localhost") else parsed.netloc
        named = Path(unquote(host + parsed.path))
        return [("file URI", named if named.is_absolute() else base / named)]
    if "://" in uri:
        return []
    local = Path(uri).expanduser()
    return [("path", local if local.is_absolute() else base / local)]


def _env_list(name: str) -> list[Path]:
    return [Path(entry) for entry in os.environ.get(name, "").split(os.pathsep) if entry]


def _resolve(use: _MeshUse, base: Path, packages: Mapping[str, Path]) -> None:
    """Finds `use`'s file (sets `path`), noting every place looked at."""
    for where, candidate in mesh_candidates(use.uri, base, packages):
        use.looked.append(f"{candidate} ({where})")
        if candidate.is_file():
            use.path = candidate.resolve()
            return


def _not_found(use: _MeshUse, label: str) -> ValueError:
    if use.uri.startswith("package://"):
        package = use.uri[len("package://"):].partition("/")[0]
        unset = [name for name in ("ROS_PACKAGE_PATH", "AMENT_PREFIX_PATH")
                 if not _env_list(name)]
        looked = "; ".join(use.looked) or "nowhere"
        hint = (f"; give the package's directory as the parameter package_paths "
                f"({{{package}: DIR}}) or --package-path {package}=DIR"
                + (f" ({' and '.join(unset)} unset)" if unset else ""))
        return ValueError(f"{label}: {use.describe()} was not found; looked at: {looked}{hint}")
    if "://" in use.uri and not use.uri.startswith("file://"):
        return ValueError(f"{label}: {use.describe()} has a URI scheme mjfast cannot read; "
                          f"expected package://, file:// or a path")
    return ValueError(f"{label}: {use.describe()} was not found; looked at: "
                      f"{'; '.join(use.looked)}")


def _leave_out_unsupported(spec: mujoco.MjSpec, uses: list[_MeshUse], label: str) -> None:
    """Points every mesh at its file; a visual-only mesh in a format MuJoCo does not read is
    deleted with its geoms (one warning names them all). ValueError for a mesh not found, or a
    collision mesh in such a format."""
    left_out = []
    for use in uses:
        supported = Path(urlparse(use.uri).path if "://" in use.uri else use.uri
                         ).suffix.lower() in MESH_FORMATS
        if not supported and use.visual_only:
            left_out.append(use)
            continue
        if use.path is None:
            raise _not_found(use, label)
        if not supported:
            raise ValueError(f"{label}: {use.describe()} is in a format MuJoCo cannot load; "
                             f"expected one of {', '.join(MESH_FORMATS)}")
        use.mesh.file = str(use.path)
    for use in left_out:
        for geom in use.geoms:
            spec.delete(geom)
        spec.delete(use.mesh)
    if left_out:
        _log.warning("%s: left out %d visual mesh(es) in a format MuJoCo cannot load (%s): %s",
                     label, len(left_out), ", ".join(MESH_FORMATS),
                     ", ".join(use.uri for use in left_out))
    for use in left_out:
        use.left_out = True


def _compile_error(error: ValueError, uses: list[_MeshUse], label: str) -> ValueError:
    message = str(error)
    for use in uses:
        named = str(use.path) in message or f"'{use.mesh.name}'" in message
        if not use.left_out and use.path is not None and named:
            return ValueError(f"{label}: {use.describe()} cannot be loaded from {use.path}: "
                              f"{message}")
    return ValueError(f"{label} does not compile: {message}")


_MESH_FILENAME = re.compile(r"(<mesh\b[^>]*?\bfilename\s*=\s*)(\"[^\"]*\"|'[^']*')", re.S)


def _absolute_mesh_uris(text: str, uses: list[_MeshUse]) -> str:
    """`text` with every mesh URI that was found replaced by its absolute `file://` URI; nothing
    else of it changes."""
    found = {use.uri: use.path for use in uses if use.path is not None}

    def absolute(match: re.Match[str]) -> str:
        uri = unescape(match.group(2)[1:-1], {"&quot;": '"', "&apos;": "'"})
        path = found.get(uri)
        if path is None:
            return match.group(0)
        return match.group(1) + quoteattr(path.as_uri())

    return _MESH_FILENAME.sub(absolute, text)


# -- ros2_control ---------------------------------------------------------------------------------


@dataclass
class _ControlJoint:
    name: str
    commands: list[str]
    params: dict[str, str]
    initial_position: float | None


def _ros2_control_joints(root: ET.Element, label: str) -> list[_ControlJoint]:
    joints = []
    for block in root.iter("ros2_control"):
        for element in block.findall("joint"):
            name = element.get("name")
            if not name:
                raise ValueError(f"{label}: a <ros2_control> <joint> has no name")
            params = {p.get("name", ""): (p.text or "").strip() for p in element.findall("param")}
            commands = []
            for command in element.findall("command_interface"):
                commands.append(command.get("name", ""))
                for p in command.findall("param"):
                    params.setdefault(p.get("name", ""), (p.text or "").strip())
            initial = None
            for state in element.findall("state_interface"):
                if state.get("name") != "position":
                    continue
                for p in state.findall("param"):
                    if p.get("name") == "initial_value":
                        initial = _number(p.text, f"{label}: joint '{name}''s initial_value")
            joints.append(_ControlJoint(name, commands, params, initial))
    return joints


def _number(text: str | None, what: str) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        raise ValueError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {text!r}")
    return value


def _urdf_limits(root: ET.Element) -> dict[str, tuple[str, dict[str, float]]]:
    """Each URDF joint's type and the `<limit>` attributes it gives (lower, upper, effort,
    velocity)."""
    out = {}
    for joint in root.findall("joint"):
        name = joint.get("name", "")
        limit = joint.find("limit")
        values = {key: _number(limit.get(key), f"joint '{name}''s limit {key}")
                  for key in ("lower", "upper", "effort", "velocity")
                  if limit is not None and limit.get(key) is not None}
        out[name] = (joint.get("type", ""), values)
    return out


def _add_ros2_control(spec: mujoco.MjSpec, root: ET.Element, controls: list[_ControlJoint],
                      label: str) -> None:
    """One actuator per command interface (SPEC §24); each joint's initial position folded into
    the joint (its `ref`, the body pre-posed), so that the model starts there."""
    names = [j.name for j in spec.joints]
    limits = _urdf_limits(root)
    for control in controls:
        joint = spec.joint(control.name) if control.name in names else None
        if joint is None:
            raise ValueError(f"{label}: <ros2_control> names joint '{control.name}', which the "
                             f"URDF has not as a moving joint{_hint(control.name, names)}")
        kind, limit = limits.get(control.name, ("", {}))
        for interface in control.commands:
            _add_actuator(spec, control, interface, kind, limit, label)
        if control.initial_position is not None:
            _start_at(spec, joint, control.initial_position)


def _hint(name: str, names: list[str]) -> str:
    close = close_matches(name, names)
    listed = ", ".join(names) or "none"
    return (f"; did you mean {', '.join(close)}?" if close else "") + f" (joints: {listed})"


def _gain(control: _ControlJoint, key: str, default: float, label: str) -> float:
    if key not in control.params:
        return default
    return _number(control.params[key], f"{label}: joint '{control.name}''s param {key}")


def _add_actuator(spec: mujoco.MjSpec, control: _ControlJoint, interface: str, kind: str,
                  limit: Mapping[str, float], label: str) -> None:
    """The actuator of one command interface, with its gains and ranges (SPEC §24's table)."""
    effort = limit.get("effort", 0.0)
    actuator = spec.add_actuator(name=f"{control.name}_{interface}", target=control.name,
                                 trntype=mujoco.mjtTrn.mjTRN_JOINT)
    if interface == "position":
        kp = _gain(control, "kp", DEFAULT_KP, label)
        if "kv" in control.params:
            actuator.set_to_position(kp=kp, kv=_gain(control, "kv", 0.0, label))
        else:  # critically damped: a position interface holds its target, not rings around it
            actuator.set_to_position(kp=kp, dampratio=1.0)
        if "lower" in limit and "upper" in limit and kind != "continuous":
            _ctrl(actuator, limit["lower"], limit["upper"])
        _force(actuator, effort)
    elif interface == "velocity":
        actuator.set_to_velocity(kv=_gain(control, "kv", DEFAULT_KV, label))
        if limit.get("velocity", 0.0) > 0:
            _ctrl(actuator, -limit["velocity"], limit["velocity"])
        _force(actuator, effort)
    elif interface == "effort":
        actuator.set_to_motor()
        if effort > 0:
            _ctrl(actuator, -effort, effort)
    else:
        spec.delete(actuator)
        raise ValueError(f"{label}: joint '{control.name}' has command interface '{interface}'; "
                         f"mjfast makes actuators for position, velocity and effort")


def _ctrl(actuator: Any, low: float, high: float) -> None:
    actuator.ctrlrange = [low, high]
    actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE


def _force(actuator: Any, effort: float) -> None:
    if effort > 0:
        actuator.forcerange = [-effort, effort]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE


def _start_at(spec: mujoco.MjSpec, joint: Any, value: float) -> None:
    """Makes `value` the joint's initial position (its qpos0) without moving anything at any
    other joint position: MuJoCo measures a hinge or slide from its `ref`, the position at which
    the body has its frame, so the body's frame is moved to where the joint puts it at `value`
    and `ref` set to `value`."""
    body = joint.parent
    axis = np.asarray(joint.axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    quat = np.asarray(body.quat, dtype=float)
    quat = quat / np.linalg.norm(quat)
    delta = value - joint.ref
    if joint.type == mujoco.mjtJoint.mjJNT_HINGE:
        turn = np.zeros(4)
        mujoco.mju_axisAngle2Quat(turn, axis, delta)
        anchor = np.asarray(joint.pos, dtype=float)
        moved = np.zeros(3)
        mujoco.mju_rotVecQuat(moved, anchor, turn)
        shift = np.zeros(3)
        mujoco.mju_rotVecQuat(shift, anchor - moved, quat)
        new_quat = np.zeros(4)
        mujoco.mju_mulQuat(new_quat, quat, turn)
        body.pos = np.asarray(body.pos) + shift
        body.quat = new_quat
    elif joint.type == mujoco.mjtJoint.mjJNT_SLIDE:
        shift = np.zeros(3)
        mujoco.mju_rotVecQuat(shift, axis * delta, quat)
        body.pos = np.asarray(body.pos) + shift
    else:
        return
    joint.ref = value
