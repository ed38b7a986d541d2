"""`/robot_description` on ROS 2 (SPEC §24): the env's robot as URDF text in a
`std_msgs/msg/String`, reliable and transient local, sent once per model generation into a
transient-local publisher's cache, which late joiners query as rmw_zenoh's do.

It owns the route and which generation was last sent; the bridge (`bridge.py`) declares the
publisher and puts the message; the URDF itself is the model layer's (`mjfast.model.urdf_export`).
"""

from __future__ import annotations

from typing import Any

from mjfast.interop.ros2.conversions import Outbound
from mjfast.interop.ros2.types import message_class
from mjfast.model.urdf_export import robot_description

__all__ = ["TOPIC", "RobotDescription"]

TOPIC = "/robot_description"
ROS_TYPE = "std_msgs/msg/String"


def _string(text: str) -> Any:
    return message_class(ROS_TYPE)(data=text)


class RobotDescription:
    """What `/robot_description` carries for an env, and whether it is due."""

    route = Outbound(TOPIC, ROS_TYPE, _string, transient_local=True)

    def __init__(self) -> None:
        self._sent_generation: int | None = None

    def due(self, env: Any) -> str | None:
        """The URDF text to send now (the env's model generation has changed since the last
        one sent), else None."""
        generation = env.model_generation
        if generation == self._sent_generation:
            return None
        self._sent_generation = generation
        return robot_description(env.model)
