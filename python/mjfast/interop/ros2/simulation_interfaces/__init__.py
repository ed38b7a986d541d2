"""The message and service definitions of ROS 2's `simulation_interfaces` 2.1.0
(https://github.com/ros-simulation/simulation_interfaces, tag 2.1.0, Apache License 2.0), as the
package ships them: the `.msg`, `.srv` and `.action` files mjfast's services use (SPEC §25).

`mjfast.interop.ros2.types` parses them through rosbags (CDR, RIHS01 hashes); the services are
`mjfast.interop.ros2.simulation_services`. Nothing here is code.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFINITIONS", "VERSION"]

VERSION = "2.1.0"
DEFINITIONS = Path(__file__).resolve().parent
