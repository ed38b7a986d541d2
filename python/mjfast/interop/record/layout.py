"""The layout of a bag that `env.record()` writes (SPEC §20), shared by the writer
(`mjfast.interop.record.recorder`), the reader (`mjfast.interop.record.reader`) and replay
(`mjfast.interop.record.replay`): its topics and message type, its format version, and the extras it
needs, imported on first use.

The layout itself: the bridged topics through `mjfast.interop.ros2.conversions` (the one table),
`/clock`, the commands that reached the simulation on `/mjfast/commands` and `SimState` bytes on
`/mjfast/state` (both `std_msgs/msg/UInt8MultiArray`; a state's layout carries the step it was
taken at and, for a state taken after a call, its order among that step's commands), the model,
parameters and versions in the bag's custom metadata, and the log times' offset from simulated
time (`mjfast.log_time_offset_ns`: log time = offset + simulated nanoseconds; the offset is the
wall clock at the recording's start less the simulated time then).

Commands carry the step they took effect at, counted from the recording's first state (`step`):
a control write is copied by the stepping thread as the bridge applies it (after any
update_write plugins), a call (reset, set_joint_state, ...) and a publish from outside the env
(a remote client, a ROS 2 node) are recorded with stepping held at the boundary where they
happen. Replay applies them at the same boundaries, so it reproduces the run bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mjfast.sim.calls import recorded_calls

__all__ = [
    "BYTES_TYPE",
    "CALLS",
    "CLOCK_TOPIC",
    "COMMANDS_TOPIC",
    "FORMAT",
    "RING_CAPACITY",
    "STATE_TOPIC",
    "bytes_message",
    "command_key",
    "ros2",
    "state_message",
    "state_module",
]

COMMANDS_TOPIC = "/mjfast/commands"
STATE_TOPIC = "/mjfast/state"
CLOCK_TOPIC = "/clock"
BYTES_TYPE = "std_msgs/msg/UInt8MultiArray"
FORMAT = "1"  # the layout of this module's docstring; custom metadata "mjfast.format"
# The env calls a recording holds: the calls table's rows that change the state (replay applies
# each through its row).
CALLS: tuple[str, ...] = tuple(call.name for call in recorded_calls())
# The compiled StepRecorder's ring (control writes and periodic states), recording and replaying.
RING_CAPACITY = 1 << 14


def ros2() -> tuple[Any, Any, Any]:
    """(conversions, types, rosbags.rosbag2), with the one-line error naming the extra."""
    import rosbags.rosbag2 as rosbag2

    from mjfast.interop.ros2 import conversions, types  # raises the one-line ImportError

    return conversions, types, rosbag2


def state_module() -> Any:
    from mjfast.model import state

    return state


def bytes_message(payload: bytes) -> Any:
    _, types, _ = ros2()
    cls = types.message_class(BYTES_TYPE)
    layout = types.message_class("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
    return cls(layout=layout, data=np.frombuffer(payload, dtype=np.uint8))


def state_message(fields: Mapping[str, Any]) -> Any:
    """A state's message on STATE_TOPIC from `{"state": SimState bytes, "step": int, "seq": int
    or None}`: the bytes, and the step it was taken at and its order among the commands of that
    step as two labelled dimensions of its layout (made in the bag's process: the recording's
    writer thread ships the fields, and holds no GIL for a rosbags message). A state the core
    copied (no plugin states) may come as its parts instead of "state": "physics" (float64
    bytes), "step_count", "signature" and "description", made into its bytes here too."""
    _, types, _ = ros2()
    data = fields.get("state")
    if data is None:
        data = state_module().SimState._make(
            np.frombuffer(fields["physics"], dtype=np.float64), int(fields["step_count"]),
            fields["signature"], fields["description"], ()).to_bytes()
    message = bytes_message(data)
    dimension = types.message_class("std_msgs/msg/MultiArrayDimension")
    message.layout.dim = [dimension(label="step", size=int(fields["step"]), stride=0)]
    if fields["seq"] is not None:
        message.layout.dim.append(dimension(label="seq", size=int(fields["seq"]), stride=0))
    return message


def command_key(command: Mapping[str, Any]) -> tuple[int, int, int]:
    """A recorded command's place in the recording's order, comparable with `StateRecord.key`."""
    return (int(command["step"]), 2 if command["kind"] == "control" else 1, int(command["seq"]))
