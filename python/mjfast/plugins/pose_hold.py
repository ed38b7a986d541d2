"""mjfast/PoseHoldPD: a joint-space PD law, written as a Python plugin, that holds a pose.

Configuration keys: `kp` (default 50.0), `kd` (default 5.0), `target` (mapping from joint name to
position; default: the pose at load time), `joints` (the joints to hold; default: every hinge or
slide joint that an actuator drives directly), `topic` (default `~target`: a message there, a
mapping from joint name to position, moves the target). Joint names may contain '/' (`left/pan`),
also written as nested mappings (`left: {pan: 0.3}`), as the parameter server stores them.

Each held joint is driven by one actuator with a joint transmission, as its kind demands:
- a position servo (fixed gain `kp_a`, affine bias `-kp_a * length`, as MJCF `<position>`) is
  given the target itself, `ctrl = gear * target` (its own gains hold it; `kp`/`kd` are not used);
- a force actuator (fixed gain, no bias: MJCF `<motor>`, `<general>`) is given the PD torque
  `kp * error - kd * velocity`, divided by its `gear * gain` (so a negative gear is honoured);
`ctrl` is written in `control_callback` and clipped to the control range. Where a joint has more
than one, a position servo is preferred, then a force actuator; the others are left alone. A held
joint with no actuator of those kinds (a velocity servo, an integrator, a muscle, a zero gear) is
a load failure naming the actuator and why (list the others in `joints` to hold only them).
Unknown keys and mistyped values are load failures naming the key. Its `statistics()` figures:
`held_joints`, and `max_error_rad` / `rms_error_rad` of the held joints against the current
target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.errors import ConfigError
from mjfast.model.names import named_entries, object_names
from mjfast.names import no_such_name, unknown
from mjfast.plugin.base import MujocoPlugin
from mjfast.plugins._sensing import checked_state, topic_of

__all__ = ["PoseHoldPD"]

_HELD_TYPES = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
# Activation dynamics under which ctrl still means a force or a target (it lags, at most).
_PLAIN_DYNAMICS = (mujoco.mjtDyn.mjDYN_NONE, mujoco.mjtDyn.mjDYN_FILTER,
                   mujoco.mjtDyn.mjDYN_FILTEREXACT)
_SERVO, _FORCE = "position servo", "force actuator"


def _actuator_kind(model: mujoco.MjModel, actuator: int) -> tuple[str | None, str]:
    """(`_SERVO`, `_FORCE` or None, why not) for an actuator on a single joint."""
    gear = float(model.actuator_gear[actuator, 0])
    gain = model.actuator_gainprm[actuator]
    bias = model.actuator_biasprm[actuator]
    dyntype = mujoco.mjtDyn(model.actuator_dyntype[actuator])
    gaintype = mujoco.mjtGain(model.actuator_gaintype[actuator])
    biastype = mujoco.mjtBias(model.actuator_biastype[actuator])
    if dyntype not in _PLAIN_DYNAMICS:
        return None, f"its dynamics are {dyntype.name} (its ctrl is not a force or a position)"
    if gaintype != mujoco.mjtGain.mjGAIN_FIXED:
        return None, f"its gain type is {gaintype.name}"
    if gear == 0.0 or gain[0] == 0.0:
        return None, "its gear or gain is zero"
    if biastype == mujoco.mjtBias.mjBIAS_NONE:
        return _FORCE, ""
    if (biastype == mujoco.mjtBias.mjBIAS_AFFINE and bias[0] == 0.0 and bias[1] == -gain[0]
            and bias[2] <= 0.0):
        return _SERVO, ""
    if biastype == mujoco.mjtBias.mjBIAS_AFFINE and bias[1] == 0.0 and bias[2] < 0.0:
        return None, "it is a velocity servo (its ctrl is a velocity)"
    return None, (f"its bias ({biastype.name}, biasprm {bias[:3].tolist()}) makes it neither a "
                  f"force actuator nor a position servo")


class PoseHoldPD(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {
        "kp": float, "kd": float, "target": dict[str, (float, dict)], "joints": list[str],
        "topic": str}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.kp = float(self.config.get("kp", 50.0))
        self.kd = float(self.config.get("kd", 5.0))
        for key, value in (("kp", self.kp), ("kd", self.kd)):
            if not math.isfinite(value):
                raise ConfigError(f"{self.name}: {key} must be a finite number, got {value!r}")
        # Per joint, its actuators with a joint transmission, in model order.
        by_joint: dict[int, list[int]] = {}
        for actuator in range(model.nu):
            if int(model.actuator_trntype[actuator]) == mujoco.mjtTrn.mjTRN_JOINT:
                by_joint.setdefault(int(model.actuator_trnid[actuator, 0]), []).append(actuator)
        wanted = self._wanted_joints(model, by_joint)
        chosen: list[tuple[int, int, str]] = []  # (joint, actuator, kind)
        for joint in wanted:
            kinds = [(actuator, *_actuator_kind(model, actuator))
                     for actuator in by_joint[joint]]
            usable = ([k for k in kinds if k[1] == _SERVO] or [k for k in kinds if k[1] == _FORCE])
            if not usable:
                reasons = "; ".join(f"actuator {self._actuator_name(model, a)!r}: {why}"
                                    for a, _, why in kinds)
                raise ConfigError(
                    f"{self.name}: cannot hold joint {self._joint_name(model, joint)!r}: {reasons} "
                    f"(PoseHoldPD drives force actuators and position servos; list the joints to "
                    f"hold in `joints` to leave this one out)")
            chosen.append((joint, usable[0][0], usable[0][1]))
        joints = np.array([j for j, _, _ in chosen], dtype=int)
        self._actuators = np.array([a for _, a, _ in chosen], dtype=int)
        self._qpos = model.jnt_qposadr[joints].astype(int)
        self._dof = model.jnt_dofadr[joints].astype(int)
        self._joint_names = [self._joint_name(model, j) for j in joints]
        servo = np.array([kind == _SERVO for _, _, kind in chosen])
        gear = model.actuator_gear[self._actuators, 0]
        # ctrl = scale * command: a servo's target is in actuator length (gear * q); a force
        # actuator's torque at the joint is gear * gain * ctrl.
        self._servo = servo
        gain = model.actuator_gainprm[self._actuators, 0]
        self._scale = np.where(servo, gear, 1.0 / (gear * gain))
        limited = model.actuator_ctrllimited[self._actuators].astype(bool)
        ranges = model.actuator_ctrlrange[self._actuators]
        self._low = np.where(limited, ranges[:, 0], -np.inf)
        self._high = np.where(limited, ranges[:, 1], np.inf)
        self._data = data  # the env's live data, for statistics()
        self.target = data.qpos[self._qpos].copy()
        try:
            self.set_target(self.config.get("target", {}))
        except (KeyError, ValueError) as error:
            raise ConfigError(f"target: {error.args[0]}") from error
        self.node.subscribe(topic_of(self.name, self.node, self.config.get("topic", "~target")),
                            self.set_target)
        return True

    @staticmethod
    def _joint_name(model: mujoco.MjModel, joint: int) -> str:
        return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, joint) or f"joint_{joint}"

    @staticmethod
    def _actuator_name(model: mujoco.MjModel, actuator: int) -> str:
        return (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator)
                or f"actuator_{actuator}")

    def _wanted_joints(self, model: mujoco.MjModel, by_joint: dict[int, list[int]]) -> list[int]:
        """The joints to hold, in model order or as `joints` lists them (ConfigError naming a
        joint the model lacks, or one that no actuator drives)."""
        listed = self.config.get("joints")
        if listed is None:
            joints = [j for j in sorted(by_joint) if int(model.jnt_type[j]) in _HELD_TYPES]
            if not joints:
                raise ConfigError(f"{self.name}: the model has no actuator driving a hinge or "
                                  f"slide joint directly")
            return joints
        if not listed:
            raise ConfigError(f"{self.name}: joints must name at least one joint")
        joints = []
        for name in listed:
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if joint < 0:
                joint_names = object_names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
                raise ConfigError(f"{self.name}: joints: "
                                  f"{no_such_name('joint', name, joint_names)}")
            if int(model.jnt_type[joint]) not in _HELD_TYPES:
                raise ConfigError(f"{self.name}: joints: {name!r} is not a hinge or slide joint")
            if joint not in by_joint:
                raise ConfigError(f"{self.name}: joints: no actuator drives joint {name!r} "
                                  f"directly")
            if joint in joints:
                raise ConfigError(f"{self.name}: joints: {name!r} is listed twice")
            joints.append(joint)
        return joints

    def set_target(self, targets: Any) -> None:
        """Moves the held pose: `targets` maps joint names to positions (names with '/' may be
        nested mappings). Checked whole first: a bad message moves nothing."""
        if not isinstance(targets, Mapping):
            raise ValueError(f"{self.name}: a target is a mapping from joint name to position, "
                             f"got {targets!r}")
        entries = named_entries(targets, self._joint_names, f"{self.name}: target")
        refused = [joint for joint, _ in entries if joint not in self._joint_names]
        if refused:
            raise KeyError(f"{self.name}: " + unknown(
                "no held joint", refused[0], self._joint_names, exists="the held joints"))
        values = {}
        for joint, value in entries:
            if (isinstance(value, bool) or not isinstance(value, (int, float, np.number))
                    or not math.isfinite(value)):
                raise ValueError(f"{self.name}: the target of joint {joint!r} must be a finite "
                                 f"number, got {value!r}")
            values[joint] = float(value)
        target = self.target.copy()
        for joint, value in values.items():
            target[self._joint_names.index(joint)] = value
        # One reference swap: control_callback (on the physics thread) sees the old target or
        # the new one, never a message half applied.
        self.target = target

    def statistics(self) -> dict[str, float]:
        """How far the held joints are from the current target (moved by `~target` too)."""
        errors = np.abs(self.target - self._data.qpos[self._qpos])
        return {"held_joints": float(len(errors)),
                "max_error_rad": float(errors.max()),
                "rms_error_rad": float(np.sqrt(np.mean(errors * errors)))}

    # State (SPEC §20): the held pose, which `~target` messages move.
    def get_state(self) -> dict[str, Any]:
        return {"target": self.target.copy()}

    def set_state(self, value: Any) -> None:
        target = checked_state(self.name, value, {"target": np.ndarray})["target"]
        if target.shape != self.target.shape or not np.all(np.isfinite(target)):
            raise ValueError(f"{self.name}: state['target'] must be {len(self.target)} finite "
                             f"positions, got {target!r}")
        self.target = target.astype(np.float64)

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        torque = self.kp * (self.target - data.qpos[self._qpos]) - self.kd * data.qvel[self._dof]
        command = np.where(self._servo, self.target, torque) * self._scale
        data.ctrl[self._actuators] = np.clip(command, self._low, self._high)
