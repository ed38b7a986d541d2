"""Entities of a model (SPEC §25): which bodies, joints, actuators, sensors and cameras make up
each entity (a child of the world body with its subtree, or a spawned model), the model sources
a spawn takes (MJCF or URDF, kept as the text that reproduces them), and the `mujoco.MjSpec`
edits of a spawn and a removal: attach in a frame with the prefix `<name>/`, delete.

Everything here works on specs the caller may discard and on compiled models; it owns no
simulation state (the env's `mjfast.sim.entities` swaps the result in). A format's reader is
one entry of `_LOADERS` (`register_spec_loader`): MJCF is MuJoCo's, URDF SPEC §24's importer
(`mjfast.model.urdf.urdf_spec`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mjfast.model.checked_values import checked_mapping, finite_vector, unit_quaternion
from mjfast.model.urdf import urdf_spec
from mjfast.names import unknown, unknown_name

__all__ = ["FORMATS", "EntityInfo", "EntitySource", "Placement", "attach_entity",
           "checked_entity_name", "checked_pose", "compose", "default_classes", "entities_of",
           "entity_of_bodies", "entity_source", "format_of", "has_free_root",
           "register_spec_loader", "relative", "remove_from_spec", "root_bodies",
           "unknown_entity"]

# The formats a spawn reads (the ROS 2 `spawn_formats` say the same).
FORMATS = ("mjcf", "urdf")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
_POSE_FIELDS = ("pos", "quat")


# -- model sources ------------------------------------------------------------------------------

@dataclass(frozen=True)
class EntitySource:
    """A model as the text that reproduces it: `text` (MJCF or URDF), its `format`, `label` (the
    path as given, `<string>` or `<MjSpec>`) and `path` (the file it was read from: its
    relative assets resolve beside it; None for a string). `given`: the MjSpec a spawn was
    handed, used as it is (its text is MuJoCo's MJCF writing of it, for the record)."""

    text: str
    format: str
    label: str
    path: str | None = None
    given: mujoco.MjSpec | None = None

    def spec(self) -> mujoco.MjSpec:
        """A new MjSpec of the source; ValueError naming it when it does not parse."""
        if self.given is not None:
            return self.given.copy()
        try:
            return _LOADERS[self.format](self)
        except ValueError as error:
            raise ValueError(f"the {self.format.upper()} model {self.label} does not parse: "
                             f"{error}") from None

    def record(self) -> dict[str, Any]:
        """The source as a recording holds it (`from_record` reads it back)."""
        return {"text": self.text, "format": self.format, "label": self.label,
                "path": self.path}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> EntitySource:
        path = record.get("path")
        return cls(str(record["text"]), str(record["format"]), str(record["label"]),
                   None if path is None else str(path))


def _read_with_mujoco(source: EntitySource) -> mujoco.MjSpec:
    """MuJoCo's reader (MJCF and URDF): the file itself while it still holds the text (its
    includes resolve), else the text with the file's folder for its assets."""
    if source.path is not None:
        path = Path(source.path)
        if path.is_file() and path.read_text() == source.text:
            return mujoco.MjSpec.from_file(str(path))
    spec = mujoco.MjSpec.from_string(source.text)
    if source.path is not None:
        spec.modelfiledir = str(Path(source.path).parent)
    return spec


def _read_urdf(source: EntitySource) -> mujoco.MjSpec:
    """SPEC §24's URDF importer (package:// and relative meshes, ros2_control actuators)."""
    if source.path is not None and Path(source.path).is_file() and (
            Path(source.path).read_text() == source.text):
        return urdf_spec(source.path)
    return urdf_spec(text=source.text)


SpecLoader = Callable[[EntitySource], mujoco.MjSpec]
_LOADERS: dict[str, SpecLoader] = {"mjcf": _read_with_mujoco, "urdf": _read_urdf}


def register_spec_loader(fmt: str, loader: SpecLoader) -> None:
    """Makes `loader(source)` read the models of format `fmt` (one of FORMATS) for spawns, and
    for an env's own model when it spawns or removes."""
    if fmt not in FORMATS:
        raise ValueError(unknown("unknown model format", fmt, FORMATS, exists="the formats are"))
    _LOADERS[fmt] = loader


def format_of(text: str, path: str | None = None) -> str:
    """`urdf` for a `.urdf` file or text whose root element is `<robot>`, else `mjcf`."""
    if path is not None and path.lower().endswith(".urdf"):
        return "urdf"
    head = re.sub(r"\A(\s*(<\?.*?\?>|<!--.*?-->))*\s*", "", text, flags=re.S)
    return "urdf" if head.startswith("<robot") else "mjcf"


def entity_source(model: object) -> EntitySource:
    """The source of a spawn's `model`: an MJCF/URDF path or string, a `mujoco.MjSpec` or an
    EntitySource (a recording's). TypeError for anything else; FileNotFoundError for a path
    that is not a file."""
    if isinstance(model, EntitySource):
        return model
    if isinstance(model, mujoco.MjSpec):
        return EntitySource(model.to_xml(), "mjcf", "<MjSpec>", given=model)
    if isinstance(model, str) and model.lstrip().startswith("<"):
        return EntitySource(model, format_of(model), "<string>")
    if isinstance(model, (str, os.PathLike)):
        path = Path(os.fspath(model)).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"model file not found: {path}")
        text = path.read_text()
        return EntitySource(text, format_of(text, str(path)), os.fspath(model), str(path))
    raise TypeError(f"model must be a path to an MJCF/URDF file, an MJCF/URDF string or a "
                    f"mujoco.MjSpec, got {type(model).__name__}")


# -- names and poses ----------------------------------------------------------------------------

def checked_entity_name(name: object) -> str:
    """`name` if it can name an entity (its names become `<name>/...`); ValueError otherwise."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid entity name {name!r}: expected letters, digits, '_', '-' "
                         f"and '.', not starting with '-' or '.'")
    return name


def checked_pose(pose: object, what: str = "pose") -> tuple[np.ndarray, np.ndarray]:
    """(pos, unit quat) of a `{pos, quat}` mapping (each optional; None: the origin, no
    rotation); ValueError naming the field that is wrong."""
    pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    if pose is None:
        return pos, quat
    entries = checked_mapping(pose, what)
    for key in entries:
        if key not in _POSE_FIELDS:
            raise ValueError(unknown(f"{what}: unknown field", key, _POSE_FIELDS,
                                     exists="its fields are"))
    if entries.get("pos") is not None:
        pos = finite_vector(entries["pos"], 3, f"{what} pos")
    if entries.get("quat") is not None:
        quat = unit_quaternion(finite_vector(entries["quat"], 4, f"{what} quat"),
                               f"{what} quat")
    return pos, quat


@dataclass(frozen=True)
class Placement:
    """Where an entity is attached: `parent` (a body's name, or "world") and the pose of its
    attach frame in the parent's frame."""

    parent: str
    pos: tuple[float, ...]
    quat: tuple[float, ...]

    def pose(self) -> dict[str, list[float]]:
        return {"pos": list(self.pos), "quat": list(self.quat)}


def compose(frame_pos: np.ndarray, frame_quat: np.ndarray, pos: np.ndarray, quat: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """The pose (pos, quat) given in a frame, in the frame's parent."""
    moved, turned = np.empty(3), np.empty(4)
    mujoco.mju_rotVecQuat(moved, pos, frame_quat)
    mujoco.mju_mulQuat(turned, frame_quat, quat)
    return frame_pos + moved, turned


def relative(frame_pos: np.ndarray, frame_quat: np.ndarray, pos: np.ndarray, quat: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The pose (pos, quat) given in the frame's parent, in the frame."""
    inverse = np.array([frame_quat[0], -frame_quat[1], -frame_quat[2], -frame_quat[3]])
    moved, turned = np.empty(3), np.empty(4)
    mujoco.mju_rotVecQuat(moved, pos - frame_pos, inverse)
    mujoco.mju_mulQuat(turned, inverse, quat)
    return moved, turned


# -- membership ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class EntityInfo:
    """One entity (SPEC §25): the names of its bodies, joints, actuators, sensors and cameras
    (unnamed ones as `<kind>_<id>`), its namespace, where it came from, and whether it was
    spawned."""

    bodies: tuple[str, ...]
    joints: tuple[str, ...]
    actuators: tuple[str, ...]
    sensors: tuple[str, ...]
    cameras: tuple[str, ...]
    namespace: str
    source: str
    spawned: bool


def _label(model: mujoco.MjModel, obj: mujoco.mjtObj, index: int, prefix: str) -> str:
    return mujoco.mj_id2name(model, obj, index) or f"{prefix}_{index}"


def _prefixes(spawned: Sequence[str]) -> list[str]:
    return sorted((f"{name}/" for name in spawned), key=len, reverse=True)


def entity_of_bodies(model: mujoco.MjModel, spawned: Sequence[str]) -> list[str]:
    """Per body id, the entity it belongs to ("" for the world body): a body named under a
    spawned entity's `<name>/` is that entity's, a child of the world body is an entity named
    by its body (`body_<id>` if unnamed), any other body is its parent's entity's."""
    prefixes = _prefixes(spawned)
    owner = [""] * model.nbody
    for body in range(1, model.nbody):  # a parent's id is below its children's
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or ""
        by_prefix = next((p[:-1] for p in prefixes if name.startswith(p)), None)
        parent = int(model.body_parentid[body])
        if by_prefix is not None:
            owner[body] = by_prefix
        elif parent == 0:
            owner[body] = name or f"body_{body}"
        else:
            owner[body] = owner[parent]
    return owner


def root_bodies(model: mujoco.MjModel, spawned: Sequence[str]) -> dict[str, list[int]]:
    """Entity name -> its root bodies in id order (the bodies whose parent is not its own; a
    spawned entity may have none left once what held it is gone)."""
    owner = entity_of_bodies(model, spawned)
    roots: dict[str, list[int]] = {name: [] for name in spawned}
    for body in range(1, model.nbody):
        if owner[int(model.body_parentid[body])] != owner[body]:
            roots.setdefault(owner[body], []).append(body)
    return roots


def _actuator_body(model: mujoco.MjModel, actuator: int) -> int:
    target, kind = int(model.actuator_trnid[actuator, 0]), int(model.actuator_trntype[actuator])
    trn = mujoco.mjtTrn
    if kind in (trn.mjTRN_JOINT, trn.mjTRN_JOINTINPARENT):
        return int(model.jnt_bodyid[target])
    if kind in (trn.mjTRN_SITE, trn.mjTRN_SLIDERCRANK):
        return int(model.site_bodyid[target])
    if kind == trn.mjTRN_BODY:
        return target
    if kind == trn.mjTRN_TENDON and model.tendon_num[target] > 0:
        wrap = int(model.tendon_adr[target])
        obj = int(model.wrap_objid[wrap])
        if int(model.wrap_type[wrap]) == mujoco.mjtWrap.mjWRAP_JOINT:
            return int(model.jnt_bodyid[obj])
        return int(model.site_bodyid[obj]) if obj >= 0 else 0
    return 0


def _sensor_body(model: mujoco.MjModel, sensor: int) -> int:
    obj, kind = int(model.sensor_objid[sensor]), int(model.sensor_objtype[sensor])
    o = mujoco.mjtObj
    if obj < 0:
        return 0
    if kind in (o.mjOBJ_BODY, o.mjOBJ_XBODY):
        return obj
    ids = {int(o.mjOBJ_JOINT): model.jnt_bodyid, int(o.mjOBJ_GEOM): model.geom_bodyid,
           int(o.mjOBJ_SITE): model.site_bodyid, int(o.mjOBJ_CAMERA): model.cam_bodyid}.get(kind)
    return 0 if ids is None else int(ids[obj])


_KINDS = ("bodies", "joints", "actuators", "sensors", "cameras")


def entities_of(model: mujoco.MjModel, spawned: Mapping[str, tuple[str, str]], namespace: str,
                source: str) -> dict[str, EntityInfo]:
    """The model's entities by name, in body order: `spawned` maps each spawned entity's name to
    its (namespace, source label); the others have the env's `namespace` and `source`. An
    actuator or sensor named under a spawned entity's prefix is that entity's, any other one
    belongs to the entity of the body it acts on (none, for one on the world body)."""
    owner = entity_of_bodies(model, list(spawned))
    prefixes = _prefixes(spawned)
    parts: dict[str, dict[str, list[str]]] = {}
    for body in range(1, model.nbody):
        parts.setdefault(owner[body], {kind: [] for kind in _KINDS})
    for name in spawned:
        parts.setdefault(name, {kind: [] for kind in _KINDS})
    o = mujoco.mjtObj
    for body in range(1, model.nbody):
        parts[owner[body]]["bodies"].append(_label(model, o.mjOBJ_BODY, body, "body"))
    for joint in range(model.njnt):
        parts[owner[int(model.jnt_bodyid[joint])]]["joints"].append(
            _label(model, o.mjOBJ_JOINT, joint, "joint"))
    others: tuple[tuple[Any, int, Callable[[int], int], str, str], ...] = (
        (o.mjOBJ_ACTUATOR, model.nu, lambda i: _actuator_body(model, i), "actuator",
         "actuators"),
        (o.mjOBJ_SENSOR, model.nsensor, lambda i: _sensor_body(model, i), "sensor", "sensors"),
        (o.mjOBJ_CAMERA, model.ncam, lambda i: int(model.cam_bodyid[i]), "camera", "cameras"))
    for kind, count, body_of, prefix, key in others:
        for index in range(count):
            label = _label(model, kind, index, prefix)
            entity = next((p[:-1] for p in prefixes if label.startswith(p)), None)
            if entity is None:
                entity = owner[body_of(index)]
            if entity:
                parts[entity][key].append(label)
    out = {}
    for name, lists in parts.items():
        ns, label = spawned.get(name, (namespace, source))
        out[name] = EntityInfo(*(tuple(lists[kind]) for kind in _KINDS), namespace=ns,
                               source=label, spawned=name in spawned)
    return out


def unknown_entity(name: object, known: Sequence[str]) -> KeyError:
    """The KeyError of an entity name that names none."""
    return unknown_name("entity", name, sorted(known), whose="the world's")


# -- spec edits ---------------------------------------------------------------------------------

# The spec's lists of named elements a spawned entity may leave behind once its frame is gone
# (everything under `<name>/`); deleting the frame takes its bodies and what refers to them.
_NAMED_LISTS = ("keys", "actuators", "sensors", "tendons", "equalities", "excludes", "pairs",
                "numerics", "texts", "tuples", "skins", "flexes", "meshes", "hfields",
                "materials", "textures")


def has_free_root(child: mujoco.MjSpec) -> bool:
    """Whether a root body of `child` has a free joint (MuJoCo wants it under the world)."""
    return any(joint.type == mujoco.mjtJoint.mjJNT_FREE
               for body in child.worldbody.bodies for joint in body.joints)


def attach_entity(spec: mujoco.MjSpec, child: mujoco.MjSpec, name: str, placement: Placement
                  ) -> None:
    """Attaches `child` to `spec` with every name prefixed `<name>/`, in a frame named `name` at
    `placement`. An unnamed root body is named `body_<i>` first (the entity's bodies are found
    by its prefix). The child's options give way to the world's (MuJoCo keeps the parent's;
    copied over first so that there is no conflict to warn about)."""
    for index, body in enumerate(child.worldbody.bodies):
        if not body.name:
            body.name = f"body_{index}"
    _adopt_options(spec, child)
    parent = spec.worldbody if placement.parent == "world" else spec.body(placement.parent)
    frame = parent.add_frame(pos=list(placement.pos), quat=list(placement.quat))
    frame.name = name
    spec.attach(child, prefix=f"{name}/", frame=frame)


def _adopt_options(spec: mujoco.MjSpec, child: mujoco.MjSpec) -> None:
    for attribute in dir(spec.option):
        if attribute.startswith("_"):
            continue
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            value = getattr(spec.option, attribute)
            if not callable(value):
                setattr(child.option, attribute, value)


def default_classes(text: str) -> tuple[str, ...]:
    """The default classes an MJCF text declares, `main` first (attach copies each as
    `<name>/<class>`, and a removal deletes them again)."""
    found = re.findall(r"<default\b[^>]*?\bclass\s*=\s*[\"']([^\"']*)[\"']", text)
    return ("main", *dict.fromkeys(found))


def remove_from_spec(spec: mujoco.MjSpec, name: str, *, spawned: bool,
                     roots: Sequence[str] = (), classes: Sequence[str] = ()) -> None:
    """Deletes entity `name` from `spec`: a spawned one's attach frame, everything named
    `<name>/...` and its default `classes` (innermost last in `classes`); an original one's root
    bodies `roots` (names) with their subtrees."""
    if not spawned:
        for root in roots:
            body = spec.body(root)
            if body is not None:
                spec.delete(body)
        return
    frame = spec.frame(name)
    if frame is not None:
        spec.delete(frame)
    prefix = f"{name}/"
    for listing in _NAMED_LISTS:
        for element in list(getattr(spec, listing, ())):
            if (getattr(element, "name", "") or "").startswith(prefix):
                with contextlib.suppress(Exception):  # already gone with what it referred to
                    spec.delete(element)
    for class_name in reversed(classes):
        default = spec.find_default(f"{prefix}{class_name}")
        if default is not None:
            spec.delete(default)
