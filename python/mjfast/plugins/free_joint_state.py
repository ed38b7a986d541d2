"""mjfast/FreeJointStatePublisher: publishes free bodies' poses and twists on the bus at a rate.

Configuration keys: `bodies` (list of names of bodies that each have a free joint, required),
`rate_hz` (in simulated time, default 100), `topic` (default: `~<body name>` per body; if given,
all bodies publish there and messages are told apart by `body`). A message is a dict: `body`,
`time`, `position` (world, 3), `quaternion` (w x y z, 4), `linear` and `angular` (world-frame
velocities, 3 each). It is a MujocoPlugin timed by `last_stage_callback`: a message describes a
completed step, published after the first step whose time reaches each multiple of 1/rate_hz.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import labelled_id, object_labels
from mjfast.names import no_such_name
from mjfast.plugin.base import MujocoPlugin
from mjfast.plugin.topics import Topic
from mjfast.plugins._sensing import checked_state, open_due_window, set_due_window, topic_of

__all__ = ["FreeJointStatePublisher"]


class FreeJointStatePublisher(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {"bodies": list[str], "rate_hz": float, "topic": str}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        bodies = self.config.get("bodies")
        if not isinstance(bodies, (list, tuple)) or not bodies:
            raise ValueError(f"{self.name}: bodies must be a non-empty list of body names, "
                             f"got {bodies!r}")
        self.rate_hz = float(self.config.get("rate_hz", 100.0))
        if not self.rate_hz > 0 or not np.isfinite(self.rate_hz):
            raise ValueError(f"{self.name}: rate_hz must be a positive number, "
                             f"got {self.config.get('rate_hz')!r}")
        topic = self.config.get("topic")
        if topic is not None:
            topic_of(self.name, self.node, topic)
        self._targets: list[tuple[str, str, int, int]] = []  # body, topic, qpos and dof address
        repeated = sorted({str(body) for body in bodies if bodies.count(body) > 1})
        if repeated:
            raise ValueError(f"{self.name}: bodies lists {repeated[0]!r} more than once")
        for body in bodies:
            # An unnamed body is `body_<id>`.
            body_id = labelled_id(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body", body)
            if body_id < 0:
                labels = object_labels(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body")
                raise ValueError(f"{self.name}: "
                                 f"{no_such_name('body', body, [b for b in labels if b])}")
            joint = int(model.body_jntadr[body_id])
            if (joint < 0 or int(model.body_jntnum[body_id]) != 1
                    or int(model.jnt_type[joint]) != mujoco.mjtJoint.mjJNT_FREE):
                raise ValueError(f"{self.name}: body {body!r} does not move on one free joint")
            self._targets.append((str(body), topic or f"~{body}", int(model.jnt_qposadr[joint]),
                                  int(model.jnt_dofadr[joint])))
        self._period = 1.0 / self.rate_hz
        self._half_step = 0.5 * float(model.opt.timestep)
        # The core skips the steps before the next due time without the GIL.
        open_due_window(self, FreeJointStatePublisher)
        self._schedule_after(float(data.time))
        self._rotation = np.zeros(9)
        return True

    def topics(self) -> list[Topic]:
        # Odometry in `world`, its child frame the body (the message's `body`).
        return [Topic(topic, "odometry", "nav_msgs/msg/Odometry")
                for topic in dict.fromkeys(topic for _, topic, _, _ in self._targets)]

    def _schedule_after(self, time: float) -> None:
        # The next multiple of the period strictly after `time` (within half a step).
        self._set_next((np.floor((time + self._half_step) / self._period) + 1) * self._period)

    def _set_next(self, due: float) -> None:
        self._next = due
        # Not due: time + half_step < next (whatever time went back to), as the callback tests
        # it. The bound is the largest time whose sum rounds below next, so that the core skips
        # no step the callback would publish at (t + h rounds monotonically).
        high = float(due) - self._half_step
        while high + self._half_step >= due:
            high = math.nextafter(high, -math.inf)
        set_due_window(self, -math.inf, high)

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        time = float(data.time)
        if time + self._half_step < self._next:
            return
        self._schedule_after(time)
        for body, topic, qpos, dof in self._targets:
            # A free body's pose is its joint's qpos; its angular velocity is in the body frame.
            quaternion = data.qpos[qpos + 3:qpos + 7].copy()
            mujoco.mju_quat2Mat(self._rotation, quaternion)
            self.node.publish(topic, {
                "body": body,
                "time": time,
                "position": data.qpos[qpos:qpos + 3].copy(),
                "quaternion": quaternion,
                "linear": data.qvel[dof:dof + 3].copy(),
                "angular": self._rotation.reshape(3, 3) @ data.qvel[dof + 3:dof + 6],
            })

    def reset(self) -> None:
        self._schedule_after(float(self.env.data.time))

    # State (SPEC §20): the next due time.
    def get_state(self) -> dict[str, Any]:
        return {"next": float(self._next)}

    def set_state(self, value: Any) -> None:
        self._set_next(float(checked_state(self.name, value, {"next": float})["next"]))
