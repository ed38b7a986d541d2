"""Body kinematics (SPEC §13): a body's pose and twist in world or another body's axes, computed
on per-thread scratch data from a snapshot of the state; free bodies' states, mocap bodies' poses
and equality constraints written, then `forward` (mj_forward with no plugin dispatched). The
caller holds stepping for the writes and the snapshot; this module owns only the scratch data.
"""

from __future__ import annotations

import math
import threading
from typing import NamedTuple

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.model.checked_values import checked_mapping, finite_vector, unit_quaternion
from mjfast.model.names import object_id, object_labels
from mjfast.names import listing, unknown

__all__ = ["BodyState", "StateSnapshot", "body_state", "forward", "set_body_states",
           "set_equality_active", "set_mocap_pose"]


class BodyState(NamedTuple):
    """The pose of a body's frame and the twist of its origin, in world or `frame` axes."""

    pos: np.ndarray
    quat: np.ndarray
    linvel: np.ndarray
    angvel: np.ndarray


def _orientation(quat: np.ndarray) -> np.ndarray:
    """A stored quaternion as MuJoCo's kinematics reads it: unit length, identity if zero."""
    scale = float(np.max(np.abs(quat)))
    if not scale > 0.0 or not math.isfinite(scale):
        return np.array([1.0, 0.0, 0.0, 0.0])
    scaled = quat / scale
    return scaled / float(np.linalg.norm(scaled))



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
    for body, entry in checked_mapping(states, "states").items():
        body_id = object_id(model, mujoco.mjtObj.mjOBJ_BODY, "body", model.nbody, body,
                            prefix="body")
        joint = int(model.body_jntadr[body_id])
        if (model.body_jntnum[body_id] != 1
                or model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_FREE):
            raise ValueError(f"body {body!r} has no free joint: only a free body's state can be "
                             f"set (use set_joint_state for the others)")
        fields = {}
        for field, value in checked_mapping(entry, f"the state of body {body!r}").items():
            if field not in _BODY_FIELDS:
                raise ValueError(unknown(f"body {body!r}: unknown field", field,
                                         list(_BODY_FIELDS), exists="its fields are"))
            fields[field] = finite_vector(value, _BODY_FIELDS[field], f"body {body!r} {field}")
        if "quat" in fields:
            fields["quat"] = unit_quaternion(fields["quat"], f"body {body!r} quat")
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


def set_mocap_pose(model: mujoco.MjModel, data: mujoco.MjData, body: object, pos: object = None,
                   quat: object = None) -> None:
    """Moves mocap body `body` (name or id) to `pos` and/or `quat` (world frame; the quaternion
    scaled to unit length), all checked first, then mj_forward. KeyError for an unknown body,
    ValueError for a body that is not a mocap body, a wrong shape or a non-finite value."""
    body_id = object_id(model, mujoco.mjtObj.mjOBJ_BODY, "body", model.nbody, body,
                        prefix="body")
    mocap = int(model.body_mocapid[body_id])
    if mocap < 0:
        labels = object_labels(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body")
        mocaps = [label for i, label in enumerate(labels)
                  if label and model.body_mocapid[i] >= 0]
        raise ValueError(f"body {body!r} is not a mocap body (mocap=\"true\"): only a mocap "
                         f"body's pose can be set (set_body_state moves a free body); the "
                         f"model's mocap bodies: {listing(mocaps)}")
    checked_pos = None if pos is None else finite_vector(pos, 3, f"body {body!r} pos")
    checked_quat = None if quat is None else unit_quaternion(
        finite_vector(quat, 4, f"body {body!r} quat"), f"body {body!r} quat")
    if checked_pos is not None:
        data.mocap_pos[mocap] = checked_pos
    if checked_quat is not None:
        data.mocap_quat[mocap] = checked_quat
    forward(model, data)
