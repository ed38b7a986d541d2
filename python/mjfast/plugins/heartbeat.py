"""mjfast/HeartbeatPublisher: publishes a counter on the bus once per simulated second.

Configuration keys: `topic` (default `~heartbeat`). A message is a dict `{"count": n, "time": t}`
published after the first step whose time reaches each whole simulated second; `count` starts at
1 and keeps increasing across world resets (it is a sequence number, not the clock). It is a
MujocoPlugin timed by `last_stage_callback`.
"""

from __future__ import annotations

import math

import mujoco

from mjfast.plugin import MujocoPlugin

__all__ = ["HeartbeatPublisher"]


class HeartbeatPublisher(MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.topic = str(self.config.get("topic", "~heartbeat"))
        self.count = 0
        self._half_step = 0.5 * float(model.opt.timestep)
        self._schedule_after(float(data.time))
        return True

    def _schedule_after(self, time: float) -> None:
        self._next = math.floor(time + self._half_step) + 1.0

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        time = float(data.time)
        if time + self._half_step < self._next:
            return
        self._schedule_after(time)
        self.count += 1
        self.node.publish(self.topic, {"count": self.count, "time": time})

    def reset(self) -> None:
        self._schedule_after(float(self.env.data.time))
