"""mjfast/PoseHoldPD: a joint-space PD law, written as a Python plugin, that holds a pose.

Configuration keys: `kp` (default 50.0), `kd` (default 5.0), `target` (mapping from joint name to
position; default: the pose at load time), `topic` (default `~target`: a message there, a mapping
from joint name to position, moves the target). Each actuator that drives a single hinge or slide
joint directly is used; `ctrl` is written in `control_callback` and clipped to the control range.
Unknown keys and mistyped values are load failures naming the key (`config_keys`). Its
`statistics()` figures: `held_joints`, and `max_error_rad` / `rms_error_rad` of the held joints
against the current target.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.plugin import MujocoPlugin

__all__ = ["PoseHoldPD"]


class PoseHoldPD(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {
        "kp": float, "kd": float, "target": dict[str, float], "topic": str}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.kp = float(self.config.get("kp", 50.0))
        self.kd = float(self.config.get("kd", 5.0))
        actuators, qpos_addresses, dof_addresses, joint_ids = [], [], [], []
        for actuator in range(model.nu):
            if int(model.actuator_trntype[actuator]) != mujoco.mjtTrn.mjTRN_JOINT:
                continue
            joint = int(model.actuator_trnid[actuator, 0])
            if int(model.jnt_type[joint]) not in (mujoco.mjtJoint.mjJNT_HINGE,
                                                  mujoco.mjtJoint.mjJNT_SLIDE):
                continue
            actuators.append(actuator)
            joint_ids.append(joint)
            qpos_addresses.append(model.jnt_qposadr[joint])
            dof_addresses.append(model.jnt_dofadr[joint])
        if not actuators:
            self.node.logger.error("the model has no actuator driving a hinge or slide joint")
            return False
        self._actuators = np.array(actuators)
        self._qpos = np.array(qpos_addresses)
        self._dof = np.array(dof_addresses)
        self._joint_names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                             for j in joint_ids]
        limited = model.actuator_ctrllimited[self._actuators].astype(bool)
        ranges = model.actuator_ctrlrange[self._actuators]
        self._low = np.where(limited, ranges[:, 0], -np.inf)
        self._high = np.where(limited, ranges[:, 1], np.inf)
        self._data = data  # the env's live data, for statistics()
        self.target = data.qpos[self._qpos].copy()
        self.set_target(self.config.get("target", {}))
        self.node.subscribe(self.config.get("topic", "~target"), self.set_target)
        return True

    def set_target(self, targets: dict[str, Any]) -> None:
        """Moves the held pose: `targets` maps joint names to positions."""
        unknown = [joint for joint in targets if joint not in self._joint_names]
        if unknown:  # checked first: a bad message moves nothing
            raise KeyError(f"{self.name}: no actuated joint {', '.join(map(repr, unknown))} "
                           f"(actuated: {', '.join(self._joint_names)})")
        values = {joint: float(value) for joint, value in targets.items()}
        for joint, value in values.items():
            self.target[self._joint_names.index(joint)] = value

    def statistics(self) -> dict[str, float]:
        """How far the held joints are from the current target (moved by `~target` too)."""
        errors = np.abs(self.target - self._data.qpos[self._qpos])
        return {"held_joints": float(len(errors)),
                "max_error_rad": float(errors.max()),
                "rms_error_rad": float(np.sqrt(np.mean(errors * errors)))}

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        error = self.target - data.qpos[self._qpos]
        command = self.kp * error - self.kd * data.qvel[self._dof]
        data.ctrl[self._actuators] = np.clip(command, self._low, self._high)
