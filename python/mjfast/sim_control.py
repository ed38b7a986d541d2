"""Simulation control (SPEC §13): the runtime-options transaction, joint and body state, the
world reset's joint overrides and equality switches, checked whole before anything is written.

These functions work on a model and data that the caller holds still (MujocoEnv runs them inside
its step-boundary pause and delegates to them); they own no simulation state, only per-thread
scratch data for kinematics. Pausing, stepping and the plugins are the env's business.
"""

from __future__ import annotations

import enum
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.errors import ConfigError, LogicError
from mjfast.names import close_matches, suggestion, unknown, unknown_name

__all__ = [
    "BodyState",
    "JointState",
    "apply_options",
    "check_outside_callbacks",
    "checked_joint_values",
    "option_fields",
]


class JointState(NamedTuple):
    """One joint's slice of `qpos` and `qvel` (copies; a hinge or slide joint gives shape (1,))."""

    position: np.ndarray
    velocity: np.ndarray


class BodyState(NamedTuple):
    """The pose of a body's frame and the twist of its origin, in world or `frame` axes."""

    pos: np.ndarray
    quat: np.ndarray
    linvel: np.ndarray
    angvel: np.ndarray


def check_outside_callbacks(what: str) -> None:
    """LogicError when called from inside any plugin callback (load/init and reset included)."""
    if _core.in_plugin_callback():
        raise LogicError(f"{what} called from inside a plugin callback: a plugin has the model "
                         f"and data in its callbacks, and a native one may request a pause or a "
                         f"reset through its host services")


# -- names --------------------------------------------------------------------------------------

def object_names(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int) -> list[str]:
    """The names of the model's objects of `obj_type`, in id order, unnamed ones left out."""
    return [name for i in range(count) if (name := mujoco.mj_id2name(model, obj_type, i))]


def object_labels(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int, prefix: str
                  ) -> list[str | None]:
    """Per id, how mjfast names the model's objects of `obj_type`: its name, or for an unnamed
    one `<prefix>_<id>` (`sensor_3`, `camera_0`); None where a named object already has that
    name (the name means the named one). `labelled_id` reads these names back."""
    names = [mujoco.mj_id2name(model, obj_type, i) or "" for i in range(count)]
    taken = set(names)
    return [name or (None if f"{prefix}_{i}" in taken else f"{prefix}_{i}")
            for i, name in enumerate(names)]


def labelled_id(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int, prefix: str,
                name: object) -> int:
    """The id of the object of `obj_type` that `object_labels` calls `name`, or -1."""
    if not isinstance(name, str):
        return -1
    found = mujoco.mj_name2id(model, obj_type, name)
    if found >= 0:
        return int(found)
    digits = name[len(prefix) + 1:] if name.startswith(f"{prefix}_") else ""
    if digits.isdigit() and digits.isascii() and str(int(digits)) == digits:
        index = int(digits)
        if index < count and not mujoco.mj_id2name(model, obj_type, index):
            return index
    return -1


def object_id(model: mujoco.MjModel, obj_type: mujoco.mjtObj, noun: str, count: int,
              key: object, *, prefix: str | None = None) -> int:
    """The id of the model's `noun` named (or indexed) by `key`: the one lookup of keyframes,
    geoms, joints, bodies, cameras and equality constraints by the env and this module. With
    `prefix`, an unnamed object is named `<prefix>_<id>` too (`object_labels`).

    KeyError for an unknown name (with its close matches and the model's names) or index;
    ValueError for a key that is neither a str nor an int.
    """
    if isinstance(key, str):
        if prefix is None:
            object_id_ = mujoco.mj_name2id(model, obj_type, key)
            known = object_names(model, obj_type, count) if object_id_ < 0 else []
        else:
            object_id_ = labelled_id(model, obj_type, count, prefix, key)
            known = ([label for label in object_labels(model, obj_type, count, prefix) if label]
                     if object_id_ < 0 else [])
        if object_id_ >= 0:
            return int(object_id_)
        raise unknown_name(noun, key, known)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if 0 <= key < count:
            return int(key)
        raise KeyError(f"no {noun} with index {key} (the model has {count})")
    raise ValueError(f"a {noun} is named by a string (or an index), got {key!r}")


def _mapping(value: object, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _finite_vector(value: object, size: int, what: str) -> np.ndarray:
    """`value` as a float64 vector of `size` finite numbers, or ValueError naming `what`."""
    if isinstance(value, (str, bytes, bool, Mapping)):
        array = None
    else:
        try:
            array = np.atleast_1d(np.asarray(value, dtype=float)).astype(float, copy=True)
        except (TypeError, ValueError):
            array = None
    if array is None or array.shape != (size,):
        raise ValueError(f"{what}: expected {size} number{'s' if size > 1 else ''}, got {value!r}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: expected finite numbers, got {array.tolist()}")
    return array


def _unit_quaternion(quat: np.ndarray, what: str) -> np.ndarray:
    """`quat` (finite) scaled to unit length; ValueError for a zero quaternion.

    Scaled by its largest component first, so that neither huge components (1e308, whose
    squares overflow) nor tiny ones (1e-200, whose squares underflow) lose the orientation.
    """
    scale = float(np.max(np.abs(quat)))
    if scale == 0.0:
        raise ValueError(f"{what}: a zero quaternion has no orientation")
    scaled = quat / scale
    return scaled / float(np.linalg.norm(scaled))


def _orientation(quat: np.ndarray) -> np.ndarray:
    """A stored quaternion as MuJoCo's kinematics reads it: unit length, identity if zero."""
    scale = float(np.max(np.abs(quat)))
    if not scale > 0.0 or not math.isfinite(scale):
        return np.array([1.0, 0.0, 0.0, 0.0])
    scaled = quat / scale
    return scaled / float(np.linalg.norm(scaled))


def named_entries(values: Mapping[Any, Any], names: Iterable[str], what: str,
                  is_value: Callable[[Mapping[Any, Any]], bool] | None = None
                  ) -> list[tuple[Any, Any]]:
    """The (name, value) pairs of a mapping keyed by model names, nested mappings flattened.

    Names may contain '/' (`MjSpec.attach` prefixes, composed models: `left/pan_pos`). The
    parameter server stores a key `left/pan_pos` as the namespace `left` holding `pan_pos`, so a
    mapping under a key that is not one of `names`, or that begins others of them (`left` when
    `left/pan_pos` is one), is read as such a namespace, its keys joined to it with '/', unless
    `is_value` says it is a value (a sensor's `{std, bias}`); an empty one is a ValueError (it
    names nothing). A name given twice (`left/pan_pos` beside `left: {pan_pos}`) is a ValueError
    naming it; other keys pass through as they are (an int index).
    """
    known = set(names)
    parents = {"/".join(parts[:i]) for parts in (name.split("/") for name in known)
               for i in range(1, len(parts))}
    entries: list[tuple[Any, Any]] = []
    seen: set[Any] = set()

    def walk(mapping: Mapping[Any, Any], prefix: str) -> None:
        for key, value in mapping.items():
            if prefix and not isinstance(key, str):
                raise ValueError(f"{what}: key {key!r} under {prefix[:-1]!r} is not a name")
            name = prefix + key if isinstance(key, str) else key
            if (isinstance(name, str) and isinstance(value, Mapping)
                    and (name not in known or name in parents)
                    and not (is_value is not None and is_value(value))):
                if not value:
                    raise ValueError(f"{what}: {name!r} is an empty mapping (expected a value, "
                                     f"or the names under {name!r})")
                walk(value, name + "/")
                continue
            if name in seen:
                raise ValueError(f"{what}: {name!r} is given twice")
            seen.add(name)
            entries.append((name, value))

    walk(values, "")
    return entries


# -- joints -------------------------------------------------------------------------------------

# A joint's slice sizes in qpos and qvel, and where its quaternion starts in the qpos slice.
_JOINT_LAYOUT = {
    mujoco.mjtJoint.mjJNT_FREE: (7, 6, 3),
    mujoco.mjtJoint.mjJNT_BALL: (4, 3, 0),
    mujoco.mjtJoint.mjJNT_SLIDE: (1, 1, None),
    mujoco.mjtJoint.mjJNT_HINGE: (1, 1, None),
}


def checked_joint_values(model: mujoco.MjModel, values: object, kind: str
                         ) -> list[tuple[int, np.ndarray]]:
    """`values` (joint name -> value) as (start index in qpos or qvel, array) pairs, all checked.

    `kind` is "positions" or "velocities". Quaternions in positions are normalised. KeyError for
    an unknown joint, ValueError for a wrong size, type or non-finite value; nothing is written.
    """
    if values is None:
        return []
    positions = kind == "positions"
    noun = "position" if positions else "velocity"
    writes = []

    labels = object_labels(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint")
    names = [*object_names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt),
             *(label for label in labels if label)]
    for joint, value in named_entries(_mapping(values, f"joint {kind}"), names,
                                      f"joint {kind}"):
        joint_id = object_id(model, mujoco.mjtObj.mjOBJ_JOINT, "joint", model.njnt, joint,
                             prefix="joint")
        qpos_size, qvel_size, quat_start = _JOINT_LAYOUT[mujoco.mjtJoint(model.jnt_type[joint_id])]
        size = qpos_size if positions else qvel_size
        array = _finite_vector(value, size, f"joint {joint!r} {noun}")
        if positions and quat_start is not None:
            quat = array[quat_start:quat_start + 4]
            array[quat_start:quat_start + 4] = _unit_quaternion(quat, f"joint {joint!r} position")
        start = int(model.jnt_qposadr[joint_id] if positions else model.jnt_dofadr[joint_id])
        writes.append((start, array))
    return writes


def write_joint_values(data: mujoco.MjData, positions: list[tuple[int, np.ndarray]],
                       velocities: list[tuple[int, np.ndarray]]) -> None:
    for target, writes in ((data.qpos, positions), (data.qvel, velocities)):
        for start, array in writes:
            target[start:start + array.size] = array


def joint_state(model: mujoco.MjModel, data: mujoco.MjData, names: object = None
                ) -> dict[str, JointState]:
    """{name: JointState} for `names` (None: every joint; an unnamed one is `joint_<id>`),
    copied from `data`."""
    labels = object_labels(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint")
    if names is None:
        ids = [i for i in range(model.njnt) if labels[i]]
    else:
        if isinstance(names, str):
            names = [names]
        if isinstance(names, (bytes, bytearray, Mapping)) or not isinstance(names, Iterable):
            raise ValueError(f"names must be a list of joint names, got {names!r}")
        ids = [object_id(model, mujoco.mjtObj.mjOBJ_JOINT, "joint", model.njnt, name,
                         prefix="joint") for name in names]
    states = {}
    for joint_id in ids:
        qpos_size, qvel_size, _ = _JOINT_LAYOUT[mujoco.mjtJoint(model.jnt_type[joint_id])]
        qpos_start, dof_start = int(model.jnt_qposadr[joint_id]), int(model.jnt_dofadr[joint_id])
        name = labels[joint_id] or f"joint_{joint_id}"
        states[name] = JointState(data.qpos[qpos_start:qpos_start + qpos_size].copy(),
                                  data.qvel[dof_start:dof_start + qvel_size].copy())
    return states


# -- derived quantities -------------------------------------------------------------------------

def forward(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """mj_forward with no plugin dispatched: derived quantities (xpos, sensors) catch up."""
    with _core.CallbackFree():
        mujoco.mj_forward(model, data)


class StateSnapshot(NamedTuple):
    """The configuration and velocities of one step boundary, taken in a short pause; body
    states are computed from it afterwards, without holding stepping."""

    model: mujoco.MjModel
    qpos: np.ndarray
    qvel: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray

    @classmethod
    def take(cls, model: mujoco.MjModel, data: mujoco.MjData) -> StateSnapshot:
        return cls(model, data.qpos.copy(), data.qvel.copy(), data.mocap_pos.copy(),
                   data.mocap_quat.copy())


_scratch = threading.local()


def _kinematics(snapshot: StateSnapshot) -> mujoco.MjData:
    """This thread's scratch data for the snapshot's model, with the poses and velocities of
    its state. (After mj_step, the live data's xpos is that of the state before the step.)"""
    model = snapshot.model
    if getattr(_scratch, "model", None) is not model:
        _scratch.model, _scratch.data = model, mujoco.MjData(model)
    scratch = _scratch.data
    scratch.qpos[:] = snapshot.qpos
    scratch.qvel[:] = snapshot.qvel
    scratch.mocap_pos[:] = snapshot.mocap_pos
    scratch.mocap_quat[:] = snapshot.mocap_quat
    # The scratch pair belongs to no env: the hooks' trampolines pass it by.
    mujoco.mj_kinematics(model, scratch)
    mujoco.mj_comPos(model, scratch)
    mujoco.mj_comVel(model, scratch)
    return scratch


def _rotation(quat: np.ndarray) -> np.ndarray:
    matrix = np.empty(9)
    mujoco.mju_quat2Mat(matrix, quat)
    return matrix.reshape(3, 3)


def _quat_product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    result = np.empty(4)
    mujoco.mju_mulQuat(result, left, right)
    return result


def _conjugate(quat: np.ndarray) -> np.ndarray:
    return np.array([quat[0], -quat[1], -quat[2], -quat[3]])


def _frame_pose(model: mujoco.MjModel, scratch: mujoco.MjData, frame: object
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(position, quaternion, rotation matrix) of body `frame` in `scratch`, None for world."""
    if frame is None:
        return None
    frame_id = object_id(model, mujoco.mjtObj.mjOBJ_BODY, "body", model.nbody, frame,
                         prefix="body")
    quat = scratch.xquat[frame_id].copy()
    return scratch.xpos[frame_id].copy(), quat, _rotation(quat)


def body_state(snapshot: StateSnapshot, body: object, frame: object = None) -> BodyState:
    """The state of `body` at the snapshot, in world axes or relative to body `frame`."""
    model = snapshot.model
    body_id = object_id(model, mujoco.mjtObj.mjOBJ_BODY, "body", model.nbody, body,
                        prefix="body")
    scratch = _kinematics(snapshot)
    reference = _frame_pose(model, scratch, frame)
    # [angular, linear] of the body frame's origin, world axes. (mjOBJ_BODY would give the
    # velocity of the centre of mass, which is the origin only when the inertial frame is.)
    twist = np.empty(6)
    mujoco.mj_objectVelocity(model, scratch, mujoco.mjtObj.mjOBJ_XBODY, body_id, twist, 0)
    pos, quat = scratch.xpos[body_id].copy(), scratch.xquat[body_id].copy()
    angvel, linvel = twist[:3].copy(), twist[3:].copy()
    if reference is not None:
        frame_pos, frame_quat, frame_rotation = reference
        pos = frame_rotation.T @ (pos - frame_pos)
        quat = _quat_product(_conjugate(frame_quat), quat)
        linvel, angvel = frame_rotation.T @ linvel, frame_rotation.T @ angvel
    return BodyState(pos, _orientation(quat), linvel, angvel)


_BODY_FIELDS = {"pos": 3, "quat": 4, "linvel": 3, "angvel": 3}


def set_body_states(model: mujoco.MjModel, data: mujoco.MjData, states: object,
                    frame: object = None) -> None:
    """Writes the free-joint bodies' states of `states` (all checked first), then mj_forward.

    Values are in world axes or body `frame`'s (its pose before this call); a free joint's
    angular velocity is stored in body axes, so it is converted. In an entry that sets `pos` or
    `quat`, omitted velocities become zero; otherwise omitted fields keep their values.
    """
    entries = []
    for body, entry in _mapping(states, "states").items():
        body_id = object_id(model, mujoco.mjtObj.mjOBJ_BODY, "body", model.nbody, body,
                            prefix="body")
        joint = int(model.body_jntadr[body_id])
        if (model.body_jntnum[body_id] != 1
                or model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_FREE):
            raise ValueError(f"body {body!r} has no free joint: only a free body's state can be "
                             f"set (use set_joint_state for the others)")
        fields = {}
        for field, value in _mapping(entry, f"the state of body {body!r}").items():
            if field not in _BODY_FIELDS:
                raise ValueError(unknown(f"body {body!r}: unknown field", field,
                                         list(_BODY_FIELDS), exists="its fields are"))
            fields[field] = _finite_vector(value, _BODY_FIELDS[field], f"body {body!r} {field}")
        if "quat" in fields:
            fields["quat"] = _unit_quaternion(fields["quat"], f"body {body!r} quat")
        entries.append((joint, fields))

    reference = _frame_pose(model, _kinematics(StateSnapshot.take(model, data)), frame)
    for joint, fields in entries:
        if reference is not None:
            frame_pos, frame_quat, frame_rotation = reference
            if "pos" in fields:
                fields["pos"] = frame_pos + frame_rotation @ fields["pos"]
            if "quat" in fields:
                fields["quat"] = _quat_product(frame_quat, fields["quat"])
            for field in ("linvel", "angvel"):
                if field in fields:
                    fields[field] = frame_rotation @ fields[field]
        qpos_start, dof_start = int(model.jnt_qposadr[joint]), int(model.jnt_dofadr[joint])
        qpos = data.qpos[qpos_start:qpos_start + 7]
        qvel = data.qvel[dof_start:dof_start + 6]
        if "pos" in fields or "quat" in fields:
            qvel[:] = 0.0
        if "pos" in fields:
            qpos[:3] = fields["pos"]
        if "quat" in fields:
            qpos[3:] = fields["quat"]
        if "linvel" in fields:
            qvel[:3] = fields["linvel"]
        if "angvel" in fields:
            # world -> body axes, in the orientation MuJoCo will use for this qpos
            qvel[3:] = _rotation(_orientation(qpos[3:])).T @ fields["angvel"]
    forward(model, data)


def set_equality_active(model: mujoco.MjModel, data: mujoco.MjData, name: object,
                        active: object) -> None:
    equality = object_id(model, mujoco.mjtObj.mjOBJ_EQUALITY, "equality constraint", model.neq,
                         name)
    if not isinstance(active, (bool, np.bool_)):
        raise ValueError(f"active must be a bool, got {active!r}")
    data.eq_active[equality] = bool(active)
    forward(model, data)


# -- runtime options ----------------------------------------------------------------------------

class _Kind(enum.Enum):
    FLOAT = "a finite number"
    INT = "a non-negative integer"
    ENUM = "a name or value"
    ARRAY = "finite numbers"


class _Field(NamedTuple):
    kind: _Kind
    shape: tuple[int, ...] = ()
    enum_type: type | None = None


_fields_cache: dict[str, _Field] = {}


def option_fields() -> dict[str, _Field]:
    """mujoco.MjOption's fields as the installed mujoco names them, with their kind (read off
    a default instance); an int field whose mujoco enum is `mjt<Field>` takes that enum."""
    if not _fields_cache:
        defaults = mujoco.MjModel.from_xml_string("<mujoco/>").opt
        for name in dir(mujoco.MjOption):
            if name.startswith("_") or not isinstance(getattr(mujoco.MjOption, name), property):
                continue
            value = getattr(defaults, name)
            if isinstance(value, np.ndarray):
                _fields_cache[name] = _Field(_Kind.ARRAY, value.shape)
            elif isinstance(value, float):
                _fields_cache[name] = _Field(_Kind.FLOAT)
            elif isinstance(value, int):
                enum_type = getattr(mujoco, f"mjt{name.capitalize()}", None)
                if isinstance(enum_type, type) and hasattr(enum_type, "__members__"):
                    _fields_cache[name] = _Field(_Kind.ENUM, enum_type=enum_type)
                else:
                    _fields_cache[name] = _Field(_Kind.INT)
    return _fields_cache


def _enum_names(enum_type: Any) -> dict[str, int]:
    """An mjt enum's members by lower-case name without their prefix (mjINT_RK4 -> rk4)."""
    return {member.split("_", 1)[1].lower(): int(value)
            for member, value in enum_type.__members__.items() if "_" in member}


def option_flags(kind: str) -> dict[str, int]:
    """The bits of `disable` (mjtDisableBit) or `enable` (mjtEnableBit) by flag name."""
    bits = mujoco.mjtDisableBit if kind == "disable" else mujoco.mjtEnableBit
    return _enum_names(bits)


def _option_value(key: str, field: _Field, value: object) -> Any:
    problem = f"options/{key}: expected {field.kind.value}"
    if field.kind is _Kind.ENUM:
        assert field.enum_type is not None
        members = _enum_names(field.enum_type)
        if isinstance(value, str) and value.lower() in members:
            return members[value.lower()]
        if (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and int(value) in members.values()):
            return int(value)
        raise ConfigError(f"{problem} of {field.enum_type.__name__} "
                          f"({', '.join(members)})"
                          f"{suggestion(close_matches(value, members))}, got {value!r}")
    if field.kind is _Kind.INT:
        if (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and 0 <= value <= np.iinfo(np.int32).max):
            return int(value)
        raise ConfigError(f"{problem}, got {value!r}")
    if field.kind is _Kind.FLOAT:
        if (isinstance(value, (int, float, np.integer, np.floating))
                and not isinstance(value, bool) and math.isfinite(value)):
            if key == "timestep" and not value > 0:
                raise ConfigError(f"options/timestep: expected a positive number, got {value!r}")
            return float(value)
        raise ConfigError(f"{problem}, got {value!r}")
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        array = None
    if (array is None or isinstance(value, (str, bool)) or array.shape != field.shape
            or not np.all(np.isfinite(array))):
        raise ConfigError(f"{problem} of shape {field.shape}, got {value!r}")
    return array


def _flag_changes(kind: str, value: object) -> tuple[int, int]:
    """(bits to set, bits to clear) of a `disable`/`enable` patch entry."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"options/{kind}: expected a mapping from flag name to bool, "
                          f"got {value!r}")
    flags = option_flags(kind)
    set_bits = clear_bits = 0
    for flag, on in value.items():
        bit = flags.get(flag.lower()) if isinstance(flag, str) else None
        if bit is None:
            raise ConfigError(unknown(f"options/{kind}: unknown flag", flag, list(flags),
                                      exists="its flags are"))
        if not isinstance(on, (bool, np.bool_)):
            raise ConfigError(f"options/{kind}/{flag}: expected a bool, got {on!r}")
        if on:
            set_bits |= bit
        else:
            clear_bits |= bit
    return set_bits, clear_bits


def checked_options(patch: object) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """The field values and flag changes of an options patch, all checked (ConfigError naming
    the key or flag); nothing is written."""
    if patch is None:
        return {}, {}
    if not isinstance(patch, Mapping):
        raise ConfigError(f"options: expected a mapping of MjOption fields, got {patch!r}")
    fields = option_fields()
    values: dict[str, Any] = {}
    flags: dict[str, tuple[int, int]] = {}
    for key, value in patch.items():
        if key in ("disable", "enable"):
            flags[key] = _flag_changes(key, value)
        elif isinstance(key, str) and key in fields:
            values[key] = _option_value(key, fields[key], value)
        else:
            keys = [*sorted(fields), "disable", "enable"]
            raise ConfigError(unknown("options: unknown key", key, keys,
                                      exists="its keys (mujoco.MjOption's fields, disable and "
                                             "enable) are"))
    return values, flags


def apply_options(model: mujoco.MjModel, patch: object) -> None:
    """One transaction on `model.opt`: the whole patch is checked, then written."""
    values, flags = checked_options(patch)
    for key, value in values.items():
        if isinstance(value, np.ndarray):
            getattr(model.opt, key)[:] = value
        else:
            setattr(model.opt, key, value)
    for kind, (set_bits, clear_bits) in flags.items():
        attribute = f"{kind}flags"
        setattr(model.opt, attribute, (getattr(model.opt, attribute) & ~clear_bits) | set_bits)


def model_name(model: mujoco.MjModel) -> str:
    """The model's name (MJCF `<mujoco model=...>`): the first string of its names buffer."""
    return bytes(model.names).split(b"\0", 1)[0].decode()


def is_mjcf_string(model: object) -> bool:
    """Whether `model`, a str or path given where a model is taken, is MJCF text rather than a
    file's path: the one place that decides (the env, env.info() and mjfast.ray ask here)."""
    return isinstance(model, str) and model.lstrip().startswith("<")


def source_label(model: object) -> str:
    """How env.info() names where a model came from: the path as given, or what it was."""
    if isinstance(model, mujoco.MjModel):
        return "<MjModel>"
    return "<string>" if is_mjcf_string(model) else os.fspath(model)  # type: ignore[arg-type]
