"""mjfast/HeartbeatPublisher: publishes a counter on the bus once per simulated second.

Configuration keys: `topic` (default `~heartbeat`). A message is a dict `{"count": n, "time": t}`,
published from `pre_step` at the first step that starts at or after each whole simulated second
(t is that step's start time); `count` starts at 1 and keeps increasing across world resets (a
sequence number, not the clock), while the schedule follows the reset clock.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import mujoco

from mjfast.plugin.base import ControlPlugin
from mjfast.plugins._sensing import checked_state, topic_of

__all__ = ["HeartbeatPublisher"]


class HeartbeatPublisher(ControlPlugin):
    config_keys: ClassVar[dict[str, Any]] = {"topic": str}

    def init(self, node: Any, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.topic = topic_of(self.name, node, self.config.get("topic", "~heartbeat"))
        self.count = 0
        self._half_step = 0.5 * float(model.opt.timestep)
        self._schedule_after(float(data.time))
        return True

    def _schedule_after(self, time: float) -> None:
        # The next whole second strictly after `time` (within half a step).
        self._next = math.floor(time + self._half_step) + 1.0

    def pre_step(self, data: mujoco.MjData) -> None:
        time = float(data.time)
        if time + self._half_step < self._next:
            return
        self._schedule_after(time)
        self.count += 1
        self.node.publish(self.topic, {"count": self.count, "time": time})

    def on_reset(self, data: mujoco.MjData) -> None:
        self._schedule_after(float(data.time))

    # State (SPEC §20): the sequence number and the next due time.
    def get_state(self) -> dict[str, Any]:
        return {"count": self.count, "next": float(self._next)}

    def set_state(self, value: Any) -> None:
        state = checked_state(self.name, value, {"count": int, "next": float})
        self.count, self._next = state["count"], float(state["next"])

    def cleanup(self) -> None:
        pass
