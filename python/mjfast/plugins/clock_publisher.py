"""mjfast/ClockPublisher: the simulated time on the bus, as ROS's /clock.

Configuration keys (SPEC §14): `topic` (default `/clock`; a relative name resolves in the
plugin's node) and `every_steps` (default 1). A message `{"time"}` goes out from
`last_stage_callback` after every `every_steps`-th step counted from the load or the last
reset.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco

from mjfast.plugin.base import MujocoPlugin
from mjfast.plugins._sensing import checked_state, positive_int

__all__ = ["ClockPublisher", "topic_name"]

_KEYS = ("topic", "every_steps")


def topic_name(who: str, topic: object) -> str:
    """A publisher's `topic` key checked: a non-empty topic name (absolute or relative)."""
    if not isinstance(topic, str) or not topic.strip("/~"):
        raise ValueError(f"{who}: topic must be a non-empty topic name, got {topic!r}")
    return topic


class ClockPublisher(MujocoPlugin):
    # Checked before load (mjfast.plugin.schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self._topic = topic_name(self.name, self.config.get("topic", "/clock"))
        self._every = positive_int(self.name, "every_steps", self.config.get("every_steps", 1))
        self._countdown = self._every
        return True

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self._countdown -= 1
        if self._countdown:
            return
        self._countdown = self._every
        self.node.publish(self._topic, {"time": data.time})

    def reset(self) -> None:
        self._countdown = self._every

    # State (SPEC §20): the steps left until the next message.
    def get_state(self) -> dict[str, Any]:
        return {"countdown": self._countdown}

    def set_state(self, value: Any) -> None:
        countdown = checked_state(self.name, value, {"countdown": int})["countdown"]
        if not 1 <= countdown <= self._every:
            raise ValueError(f"{self.name}: state['countdown'] must be in 1..{self._every} "
                             f"(every_steps), got {countdown}")
        self._countdown = countdown
