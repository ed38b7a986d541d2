"""interop.ros2.cdr's dict_decoder (the core's CdrDecoder) against rosbags: for random messages of
every type in the typestore, the same dicts, lists, arrays (dtype and values) and scalars (type
and value) as `to_dict(types.deserialize(...))`, and rosbags' own error for what neither reads."""

from __future__ import annotations

import random
import string
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rosbags", reason="ROS 2 types come with the extra mjfast[ros2]")

from rosbags.interfaces import Nodetype
from rosbags.serde import SerdeError

from mjfast.interop.ros2 import cdr, types
from mjfast.interop.ros2.conversions import to_dict

_INTEGERS = {"byte": (-128, 127), "char": (0, 255), "int8": (-128, 127), "uint8": (0, 255),
             "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
             "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
             "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}
_DTYPES = {"bool": np.bool_, "byte": np.int8, "char": np.uint8, "float32": np.float32,
           "float64": np.float64, **{name: getattr(np, name) for name in
                                     ("int8", "uint8", "int16", "uint16", "int32", "uint32",
                                      "int64", "uint64")}}
_TEXT = string.ascii_letters + string.digits + " /_-äöü€中"


def _scalar(rng: random.Random, name: str) -> Any:
    if name == "bool":
        return rng.random() < 0.5
    if name == "string":
        return "".join(rng.choice(_TEXT) for _ in range(rng.randrange(0, 12)))
    if name in _INTEGERS:
        low, high = _INTEGERS[name]
        return rng.choice([low, high, 0, rng.randint(low, high)])
    value = rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e6, 1e6)])
    return float(np.float32(value if abs(value) < 1e30 else 1e30)) if name == "float32" else value


def _values(rng: random.Random, desc: Any, count: int) -> Any:
    if desc[0] == Nodetype.BASE and desc[1][0] != "string":
        return np.array([_scalar(rng, desc[1][0]) for _ in range(count)],
                        dtype=_DTYPES[desc[1][0]])
    return [_random(rng, desc) for _ in range(count)]


def _random(rng: random.Random, desc: Any) -> Any:
    kind, details = desc
    if kind == Nodetype.BASE:
        return _scalar(rng, details[0])
    if kind == Nodetype.NAME:
        msgdef = types.typestore().get_msgdef(details)
        return msgdef.cls(**{name: _random(rng, field) for name, field in msgdef.fields})
    if kind == Nodetype.ARRAY:
        return _values(rng, details[0], details[1])
    bound = details[1] or 4
    return _values(rng, details[0], rng.randrange(0, min(bound, 4) + 1))


def _same(native: Any, reference: Any, where: str = "message") -> None:
    assert type(native) is type(reference), where
    if isinstance(reference, dict):
        assert list(native) == list(reference), where
        for key in reference:
            _same(native[key], reference[key], f"{where}.{key}")
    elif isinstance(reference, list):
        assert len(native) == len(reference), where
        for i, (a, b) in enumerate(zip(native, reference, strict=True)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(reference, np.ndarray):
        assert native.dtype == reference.dtype and native.shape == reference.shape, where
        assert native.tobytes() == reference.tobytes(), where
        assert native.flags.writeable, where  # its own copy, not a view of the payload
    else:
        assert native == reference, where


def _readable(name: str) -> bool:
    """Whether the core reads `name` (no wstring, no float128 in it)."""
    return cdr._native_decoder(name) is not None


def test_random_messages_of_every_type_read_as_rosbags_reads_them() -> None:
    store = types.typestore()
    rng = random.Random(20261203)
    names = sorted(store.fielddefs)
    read = 0
    for name in names:
        decode = cdr.dict_decoder(name)
        for _ in range(3):
            message = _random(rng, (Nodetype.NAME, name))
            payload = bytes(store.serialize_cdr(message, name))
            _same(decode(payload), to_dict(store.deserialize_cdr(payload, name)), name)
        read += _readable(name)
    # Nearly every type is the core's to read (the rest rosbags reads, checked the same way).
    assert read >= 0.95 * len(names) and _readable(
        "control_msgs/action/FollowJointTrajectory_SendGoal_Request")


@pytest.mark.parametrize("ros_type", ["control_msgs/action/FollowJointTrajectory_SendGoal_Request",
                                      "sensor_msgs/msg/JointState",
                                      "action_msgs/srv/CancelGoal_Request"])
def test_bytes_the_core_cannot_read_get_rosbags_reading_or_its_error(ros_type: str) -> None:
    store = types.typestore()
    rng = random.Random(7)
    decode = cdr.dict_decoder(ros_type)
    message = _random(rng, (Nodetype.NAME, ros_type))
    payload = bytes(store.serialize_cdr(message, ros_type))
    # Big-endian CDR: rosbags reads it, the same message.
    big = bytes(store.serialize_cdr(message, ros_type, little_endian=False))
    _same(decode(big), to_dict(store.deserialize_cdr(payload, ros_type)))
    # Cut short, trailing bytes, a bad header: rosbags' error, as without the core.
    for bad in (payload[:-5], payload + bytes(8), b"\x07\x07" + payload[2:], b""):
        with pytest.raises(SerdeError):
            decode(bad)
    with pytest.raises(KeyError, match="unknown ROS 2 type"):
        cdr.dict_decoder("no_pkg/msg/Nothing")


def test_a_length_past_the_payload_is_refused_before_anything_is_made() -> None:
    # A sequence count of 2**32-1 in a short payload: the core refuses it at once (no list of
    # four billion items), and rosbags says what is wrong.
    ros_type = "trajectory_msgs/msg/JointTrajectory"
    store = types.typestore()
    message = _random(random.Random(1), (Nodetype.NAME, ros_type))
    message.header.frame_id = ""
    payload = bytearray(store.serialize_cdr(message, ros_type))
    # After the encapsulation header: the stamp (8 bytes), frame_id's length (4) and its NUL,
    # then joint_names' count at the next multiple of 4.
    count_at = 4 + 16
    assert int.from_bytes(payload[count_at:count_at + 4], "little") == len(message.joint_names)
    payload[count_at:count_at + 4] = (2**32 - 1).to_bytes(4, "little")
    with pytest.raises(ValueError, match="longer than the message"):
        cdr._native_decoder(ros_type).decode(bytes(payload))
    with pytest.raises(SerdeError):
        cdr.dict_decoder(ros_type)(bytes(payload))
