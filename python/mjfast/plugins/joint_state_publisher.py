"""mjfast/JointStatePublisher: joint positions, velocities and actuator efforts on the bus.

Configuration keys (SPEC §14): `joints` (list of joint names, published in that order; default
every hinge and slide joint in model order), `rate_hz` (simulated time, default 100) and `topic`
(default `~joint_states`; absolute or relative to the plugin's node). A message on the topic is
`{"time", "name", "position", "velocity", "effort"}`: `name` a list of joint names, the others
float64 arrays in that order; `effort` is `qfrc_actuator` at the joint's dof. Only hinge and
slide joints can be listed (one position and one velocity each).
Published from `last_stage_callback` at the first step whose time reaches each multiple of
1/rate_hz.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import object_labels
from mjfast.plugins._sensing import RatePublisher, listed_ids, number
from mjfast.plugins.clock_publisher import topic_name

__all__ = ["JointStatePublisher"]

_KEYS = ("joints", "rate_hz", "topic")
_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


class JointStatePublisher(RatePublisher):
    # Checked before load (mjfast.plugin.schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        rate_hz = number(who, "rate_hz", self.config.get("rate_hz", 100.0), minimum=0.0,
                         strict=True)
        # An unnamed joint is `joint_<id>`, in `joints` as in the message.
        labels = object_labels(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt, "joint")
        ids = listed_ids(who, self.config, "joints", model, mujoco.mjtObj.mjOBJ_JOINT, "joint",
                         [label or "" for label in labels], prefix="joint")
        if ids is None:
            ids = [j for j in range(model.njnt)
                   if int(model.jnt_type[j]) in _SCALAR_JOINTS and labels[j]]
        for j in ids:
            if int(model.jnt_type[j]) not in _SCALAR_JOINTS:
                raise ValueError(f"{who}: joint {labels[j]!r} is not a hinge or slide joint "
                                 f"(joints lists one-dof joints only)")
        self._names = [labels[j] or f"joint_{j}" for j in ids]
        self._qpos = np.array([model.jnt_qposadr[j] for j in ids], dtype=np.intp)
        self._dof = np.array([model.jnt_dofadr[j] for j in ids], dtype=np.intp)
        self._topic = topic_name(who, self.config.get("topic", "~joint_states"))
        self._start_schedule(rate_hz, model, data)
        return True

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        self.node.publish(self._topic, {
            "time": time,
            "name": list(self._names),
            "position": data.qpos[self._qpos],  # fancy indexing: copies
            "velocity": data.qvel[self._dof],
            "effort": data.qfrc_actuator[self._dof],
        })
