"""CDR written and read faster than rosbags does it, with the same bytes and values:

- `fast_serializer(ros_type)` is `types.serializer(ros_type)` except where a faster one exists
  (sensor_msgs/msg/JointState: `JointStateCdr`). The ROS 2 bridge and the recording's bag writer
  both serialise through it; tests/interop/record/test_writer.py checks its bytes against
  rosbags'. `packed_serializer(convert, ros_type)`: the CDR of a packed bus message written by the
  core without converting it in Python (the recording's bag writer, for a JointState).
- `dict_decoder(ros_type)` reads a message into the bus's form, `to_dict(types.deserialize(...))`,
  in one walk of the core's (`_core.CdrDecoder`, following the layout of rosbags' msgdef, which
  `_program` compiles): a request on an action's round trip (a FollowJointTrajectory goal: ~95 us
  of rosbags and to_dict). What the core cannot read (big-endian CDR, malformed bytes) is read by
  rosbags, whose error names the fault. tests/interop/ros2/test_cdr.py compares the two on random
  messages of many types."""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from rosbags.interfaces import Nodetype

from mjfast._core_loader import _core
from mjfast.interop.ros2 import conversions, types


def fast_serializer(ros_type: str) -> Callable[[Any], bytes | bytearray]:
    """CDR of a rosbags message of `ros_type`, with its encapsulation header (a new object per
    call, so that each serialiser is made once per user, not shared: JointStateCdr keeps
    layouts)."""
    if ros_type == JointStateCdr.ROS_TYPE:
        return JointStateCdr(types.serializer(ros_type))
    return types.serializer(ros_type)


def packed_serializer(convert: Any, ros_type: str) -> Callable[[bytes], bytes | None] | None:
    """For a route that converts with `convert` to `ros_type`: the CDR of a bus message straight
    from its packed bytes (`_core.pack_message`'s), where the core writes it (a JointState of
    `conversions.joint_state`: `_core.joint_state_cdr`, rosbags' bytes of that conversion), else
    None. The function returns None for a message it does not take, which the caller then converts
    and serialises. tests/interop/record/test_writer.py checks its bytes against rosbags'."""
    if convert is conversions.joint_state and ros_type == JointStateCdr.ROS_TYPE:
        return _core.joint_state_cdr  # type: ignore[no-any-return]
    return None


class JointStateCdr:
    """sensor_msgs/msg/JointState in CDR (little-endian), what rosbags' serializer makes, at a
    tenth of its cost: rosbags encodes each joint name anew (of a humanoid's JointState, ~30 us of
    its ~32), where a recording's names and its header's frame_id stay the same message after
    message. Their bytes are made once by `serialize` (rosbags' own, for a message with those
    names and frame_id and arrays of those lengths) and kept; each message then writes its stamp
    and its three arrays into a copy. Any other names, frame_id or lengths: a layout of their own
    (the few most recent are kept)."""

    ROS_TYPE = "sensor_msgs/msg/JointState"
    _KEEP = 8

    def __init__(self, serialize: Any) -> None:
        self._serialize = serialize
        # (frame_id, names, lengths) -> the template's bytes around the stamp and the arrays
        self._layouts: dict[tuple[Any, ...], tuple[bytes, ...]] = {}

    def __call__(self, message: Any) -> bytes:
        arrays = [_little_f64(message.position), _little_f64(message.velocity),
                  _little_f64(message.effort)]
        header = message.header
        key = (header.frame_id, tuple(message.name), *(len(array) for array in arrays))
        pieces = self._layouts.get(key)
        if pieces is None:
            pieces = self._layout(key)
            # Replaced, never changed in place: callers on other threads read the old one.
            kept = list(self._layouts.items())[-(self._KEEP - 1):]
            self._layouts = {**dict(kept), key: pieces}
        head, after_stamp, after_position, after_velocity, tail = pieces
        stamp = header.stamp
        return b"".join((head, _STAMP.pack(stamp.sec, stamp.nanosec), after_stamp,
                         arrays[0].tobytes(), after_position, arrays[1].tobytes(),
                         after_velocity, arrays[2].tobytes(), tail))

    def _layout(self, key: tuple[Any, ...]) -> tuple[bytes, ...]:
        """The bytes of a message with `key`'s frame_id and names (its arrays zero, its stamp 0)
        around its stamp and its three arrays' data, found by CDR's rules (each sequence a
        4-aligned count, its float64 data 8-aligned when there is any, both past the 4-byte
        encapsulation header) and checked against the length rosbags made."""
        frame_id, names, *lengths = key
        zero = conversions.joint_state({"time": 0.0, "name": list(names),
                                        "position": np.zeros(lengths[0]),
                                        "velocity": np.zeros(lengths[1]),
                                        "effort": np.zeros(lengths[2])})
        zero.header.frame_id = frame_id
        template = bytes(self._serialize(zero))

        def string_end(position: int, text: str) -> int:
            position = (position + 3) & -4
            return position + 4 + len(text.encode()) + 1

        position = string_end(8, frame_id)  # (past the stamp's sec and nanosec)
        position = (position + 3) & -4
        position += 4  # the names' count
        for name in names:
            position = string_end(position, name)
        offsets = []
        for length in lengths:
            position = ((position + 3) & -4) + 4  # the count
            if length:
                position = (position + 7) & -8
            offsets.append(4 + position)  # (the encapsulation header first)
            position += 8 * length
        if 4 + position != len(template):  # a layout rosbags does not share: never guessed
            raise AssertionError(f"JointState's CDR layout differs from rosbags' "
                                 f"({4 + position} bytes against {len(template)})")
        ends = [offset + 8 * length for offset, length in zip(offsets, lengths, strict=True)]
        return (template[:4], template[12:offsets[0]], template[ends[0]:offsets[1]],
                template[ends[1]:offsets[2]], template[ends[2]:])


_STAMP = struct.Struct("<iI")


def _little_f64(values: Any) -> Any:
    """`values` as a 1-D little-endian float64 ndarray (as it is where it is one already)."""
    if values.__class__ is np.ndarray and values.dtype.str == "<f8" and values.ndim == 1:
        return values  # (tobytes() copies it in C order whatever its strides)
    return np.ascontiguousarray(values, dtype="<f8").reshape(-1)


# rosbags' primitive types as the core's program spells them (struct's codes; char is uint8 and
# byte int8, as rosbags reads them).
_PRIMITIVES = {"bool": "?", "byte": "b", "char": "B", "int8": "b", "uint8": "B", "int16": "h",
               "uint16": "H", "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
               "float32": "f", "float64": "d"}


def dict_decoder(ros_type: str) -> Callable[[bytes], dict[str, Any]]:
    """CDR of `ros_type` (its encapsulation header first) as `to_dict` of rosbags'
    deserialisation; rosbags' error for bytes neither reads. KeyError for an unknown type."""
    types.message_class(ros_type)  # the clear KeyError for an unknown type (none compiled)
    native = _native_decoder(ros_type)

    def decode(payload: bytes) -> dict[str, Any]:
        if native is not None:
            try:
                return native.decode(payload)
            except ValueError:
                pass  # rosbags' reading, or its error
        return conversions.to_dict(types.deserialize(payload, ros_type))

    return decode


@functools.cache
def _native_decoder(ros_type: str) -> Any:
    """The core's decoder of `ros_type` (a known type), or None for a type with a part it does
    not read (a wstring, a float128)."""
    try:
        return _core.CdrDecoder(_program((Nodetype.NAME, ros_type)))
    except KeyError:
        return None


def _program(desc: Any) -> tuple[Any, ...]:
    """A rosbags field description as the core's program: ("p", code), ("s",),
    ("a", length, node), ("q", node), ("m", ((name, node), ...)) or, a constant, ("c", value);
    KeyError for a primitive it does not read."""
    kind, details = desc
    if kind == Nodetype.BASE:
        name = details[0]
        return ("s",) if name == "string" else ("p", _PRIMITIVES[name])
    if kind == Nodetype.NAME:
        msgdef = types.typestore().get_msgdef(details)
        fields = dict(msgdef.fields)
        # As to_dict gives it: the message class's fields in order, its constants among them
        # (rosbags makes each a field with its value as default), as ("c", value).
        return ("m", tuple(
            (name, _program(fields[name]) if name in fields else ("c", field.default))
            for name, field in ((f.name, f) for f in dataclasses.fields(msgdef.cls))
            if name != "__msgtype__"))
    if kind == Nodetype.ARRAY:
        return ("a", int(details[1]), _program(details[0]))
    if kind == Nodetype.SEQUENCE:
        return ("q", _program(details[0]))
    raise KeyError(f"a rosbags field of kind {kind!r}")
