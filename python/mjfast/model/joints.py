"""Joint state (SPEC §13): each joint's slice of qpos and qvel, read as `JointState`s and written
from name-keyed values that are checked whole first (quaternions normalised). The reset's and
the initial state's joint overrides use the same checks. The caller holds stepping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

import mujoco
import numpy as np

from mjfast.model.checked_values import checked_mapping, finite_vector, unit_quaternion
from mjfast.model.names import named_entries, object_id, object_labels, object_names

__all__ = ["JointState", "checked_joint_values", "joint_state", "write_joint_values"]


class JointState(NamedTuple):
    """One joint's slice of `qpos` and `qvel` (copies; a hinge or slide joint gives shape (1,))."""

    position: np.ndarray
    velocity: np.ndarray


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
    for joint, value in named_entries(checked_mapping(values, f"joint {kind}"), names,
                                      f"joint {kind}"):
        joint_id = object_id(model, mujoco.mjtObj.mjOBJ_JOINT, "joint", model.njnt, joint,
                             prefix="joint")
        qpos_size, qvel_size, quat_start = _JOINT_LAYOUT[mujoco.mjtJoint(model.jnt_type[joint_id])]
        size = qpos_size if positions else qvel_size
        array = finite_vector(value, size, f"joint {joint!r} {noun}")
        if positions and quat_start is not None:
            quat = array[quat_start:quat_start + 4]
            array[quat_start:quat_start + 4] = unit_quaternion(quat, f"joint {joint!r} position")
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
