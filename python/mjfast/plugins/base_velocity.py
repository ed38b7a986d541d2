"""mjfast/BaseVelocity: drives a floating base's planar velocity from commands on the bus.

Configuration keys: `joint` (name of a free joint, required), `timeout` (simulated seconds a
command stays in force, default 0.5), `topic` (default `~cmd_vel`; a message is a mapping with
`vx`, `vy`, `yaw_rate` (missing keys are 0) or a sequence `(vx, vy, yaw_rate)`). In `pre_step` it
overrides the joint's world-frame linear x/y velocity and world-frame yaw rate (keeping vertical,
roll and pitch motion); `timeout` simulated seconds after the step that first saw the last
command it releases the joint (stops overriding). A world reset drops the command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import labelled_id, object_labels
from mjfast.names import no_such_name
from mjfast.plugin.base import ControlPlugin
from mjfast.plugins._sensing import checked_state

__all__ = ["BaseVelocity"]


def _command(message: Any) -> tuple[float, float, float]:
    if isinstance(message, Mapping):
        unknown = set(message) - {"vx", "vy", "yaw_rate"}
        if unknown:
            raise ValueError(f"unknown velocity command keys {sorted(unknown)} "
                             f"(expected vx, vy, yaw_rate)")
        values = [message.get(key, 0.0) for key in ("vx", "vy", "yaw_rate")]
    elif isinstance(message, Sequence) and not isinstance(message, str) and len(message) == 3:
        values = list(message)
    else:
        raise ValueError(f"expected a mapping with vx, vy, yaw_rate or a sequence of 3 numbers, "
                         f"got {message!r}")
    if not all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
               for v in values):
        raise ValueError(f"velocity command must be numbers, got {message!r}")
    command = tuple(float(v) for v in values)
    if not all(math.isfinite(v) for v in command):
        raise ValueError(f"velocity command must be finite, got {message!r}")
    return command  # type: ignore[return-value]


class BaseVelocity(ControlPlugin):
    config_keys: ClassVar[dict[str, Any]] = {"joint": str, "timeout": float, "topic": str}

    def init(self, node: Any, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        joint = self.config.get("joint")
        # An unnamed free joint (`<freejoint/>`) is `joint_<id>`.
        joint_id = labelled_id(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint", joint)
        if joint_id < 0:
            labels = object_labels(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint")
            raise ValueError(f"{self.name}: "
                             f"{no_such_name('joint', joint, [j for j in labels if j])}")
        if int(model.jnt_type[joint_id]) != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"{self.name}: joint {joint!r} is not a free joint")
        self.timeout = float(self.config.get("timeout", 0.5))
        if not self.timeout >= 0:
            raise ValueError(f"{self.name}: timeout must be >= 0, got {self.timeout!r}")
        self.qpos_address = int(model.jnt_qposadr[joint_id])
        self.dof_address = int(model.jnt_dofadr[joint_id])
        # Written by the bus (any thread), taken by pre_step: one reference swap under the GIL.
        self._pending: tuple[float, float, float] | None = None
        self._command: tuple[float, float, float] | None = None
        self._commanded_at = 0.0
        self._rotation = np.zeros(9)
        self.subscription = node.subscribe(self.config.get("topic", "~cmd_vel"), self.command)
        return True

    def command(self, message: Any) -> None:
        """A velocity command (as received on the topic); it takes effect at the next step."""
        self._pending = _command(message)

    @property
    def active(self) -> bool:
        """Whether the joint is being overridden (a command younger than the timeout)."""
        return self._command is not None

    def pre_step(self, data: mujoco.MjData) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._command, self._commanded_at = pending, float(data.time)
        if self._command is None:
            return
        if data.time - self._commanded_at >= self.timeout:
            self._command = None  # released: the joint moves freely from now on
            return
        vx, vy, yaw_rate = self._command
        dof = self.dof_address
        data.qvel[dof] = vx
        data.qvel[dof + 1] = vy
        # A free joint's angular velocity is in the body frame: set the world z component.
        # The orientation MuJoCo uses: the stored quaternion normalised (a user may have written
        # one that is not).
        quaternion = data.qpos[self.qpos_address + 3:self.qpos_address + 7].copy()
        mujoco.mju_normalize4(quaternion)
        mujoco.mju_quat2Mat(self._rotation, quaternion)
        rotation = self._rotation.reshape(3, 3)
        angular = rotation @ data.qvel[dof + 3:dof + 6]
        angular[2] = yaw_rate
        data.qvel[dof + 3:dof + 6] = rotation.T @ angular

    def on_reset(self, data: mujoco.MjData) -> None:
        self._pending = None
        self._command = None

    # State (SPEC §20): the command in force, since when, and one not yet taken.
    def get_state(self) -> dict[str, Any]:
        return {"pending": self._pending, "command": self._command,
                "commanded_at": self._commanded_at}

    def set_state(self, value: Any) -> None:
        state = checked_state(self.name, value, {"pending": (tuple, type(None)),
                                                 "command": (tuple, type(None)),
                                                 "commanded_at": float})
        pending, command = (None if state[key] is None else _command(state[key])
                            for key in ("pending", "command"))
        self._pending, self._command = pending, command
        self._commanded_at = float(state["commanded_at"])

    def cleanup(self) -> None:
        self.subscription.unsubscribe()
