"""The bus message's trip from the recording's writer thread to its bag-writing process
(mjfast.interop.record.writer): what pack_message packs comes back from unpack_message as it was,
in the core's packing where it can and in the Python form where it cannot; and JointState's CDR
as the bag's process makes it, the same bytes as rosbags' serializer."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from mjfast._core_loader import _core
from mjfast.interop.record.writer import batch_items, pack_message, unpack_message
from mjfast.interop.ros2.cdr import JointStateCdr


def same(left: Any, right: Any) -> bool:
    """Equal, and of the same types all the way down (an ndarray: dtype, shape and values)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, np.ndarray):
        return (left.dtype == right.dtype and left.shape == right.shape
                and np.array_equal(left, right, equal_nan=left.dtype.kind in "fc"))
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and left != left:
        return right != right
    return bool(left == right)


JOINT_STATE = {"time": 1.25, "name": ["j1", "é2"],
               "position": np.array([0.5, -1.0]), "velocity": np.zeros(2),
               "effort": np.array([np.nan, np.inf])}

MESSAGES = [
    JOINT_STATE,
    {"nested": {"deeper": [1, 2.5, None, True, False, "text", b"\x00raw"]},
     "pair": (1, "two"), 7: "an int key", (1, 2): "a tuple key"},
    {"ints": np.arange(6, dtype=np.int32).reshape(2, 3), "bytes": np.frombuffer(b"ab", np.uint8),
     "big_endian": np.arange(3, dtype=">f8"), "scalar": np.array(2.5), "empty": np.zeros((0, 4)),
     "strided": np.arange(10.0)[::3], "fortran": np.asfortranarray(np.ones((2, 3))),
     "bools": np.array([True, False]), "extremes": [-(2**63), 2**63 - 1, -0.0, 1e308]},
    [np.arange(3.0), {"in": "a list"}],
    "a bare string",
    b"bare bytes",
    None,
    3.0,
]


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_a_message_comes_back_as_it_was_packed_by_the_core(message: Any) -> None:
    packed = pack_message(message)
    assert type(packed) is bytes  # the core's packing: no Python structure to pickle
    back = unpack_message(pickle.loads(pickle.dumps(packed)))
    assert same(back, message), (back, message)


class Point(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize("message", [
    {"time": 1.0, "value": np.float64(2.5)},  # a numpy scalar: a float subclass
    {"time": 1.0, "point": Point(x=1.0), "array": np.arange(3.0)},
    {"objects": np.array([1, "a"], dtype=object), "array": np.arange(3.0)},
    {"huge": 2**70, "array": np.arange(2.0)},
], ids=["numpy_scalar", "dict_subclass", "object_array", "huge_int"])
def test_what_the_core_does_not_pack_keeps_the_python_form(message: Any) -> None:
    with pytest.raises(TypeError, match="pack_message"):
        _core.pack_message(message)
    packed = pack_message(message)
    assert type(packed) is not bytes
    back = unpack_message(pickle.loads(pickle.dumps(packed)))
    assert list(back) == list(message)
    for key, value in message.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            assert same(back[key], value)
        elif isinstance(value, np.ndarray):
            assert back[key].tolist() == value.tolist()
        else:
            assert back[key] == value and type(back[key]) is type(value)


def test_a_message_nested_too_deep_is_a_type_error_and_keeps_the_python_form() -> None:
    message: Any = {"time": 0.0}
    for _ in range(70):
        message = {"inner": message}
    with pytest.raises(TypeError, match="deeper than 64"):
        _core.pack_message(message)
    assert unpack_message(pack_message(message)) == message


def test_pack_direct_packs_the_direct_topics_and_hands_back_the_rest_in_order() -> None:
    # The recording writer's batch call: each message on a topic `direct` maps is packed as
    # pack_message packs it, stamped offset + round(time * 1e9) (half to even, never below 0),
    # into one block with its route; the others, and what the core does not pack, come back as
    # they came. batch_items reads the block back as the items it stands for, in order.
    def convert(message: Any) -> Any:
        return message

    direct = {"/js": ("/ros/js", "sensor_msgs/msg/JointState", convert),
              "/clock": ("/clock", "rosgraph_msgs/msg/Clock", None)}
    huge = {"huge": 2**70}
    items = [("/js", JOINT_STATE, 0.5), ("/other", {"a": 1}, 0.25), ("/js", huge, 0.75),
             ("/clock", {"time": 1.0}, 1.0), ("/js", JOINT_STATE, 2.5e-9),
             ("/js", JOINT_STATE, 0.0)]
    (routes, counts, data), rest = _core.pack_direct(items, direct, -1)
    assert rest == [items[1], items[2]] and rest[1][1] is huge
    assert routes == [direct["/js"], direct["/clock"]] and routes[0] is direct["/js"]
    assert counts == [3, 1]
    packed = list(batch_items([("/before", "t", 7, b"x", None), (None, routes, data)]))
    assert packed[0] == ("/before", "t", 7, b"x", None)
    assert [entry[:3] for entry in packed[1:]] == [
        (direct[topic][0], direct[topic][1], max(0, -1 + round(time * 1e9)))
        for topic, _, time in (items[0], items[3], items[4], items[5])]
    assert [entry[2] for entry in packed[1:]] == [499_999_999, 999_999_999, 1, 0]  # half to even
    assert [entry[3] for entry in packed[1:]] == [
        _core.pack_message(message) for _, message, _ in (items[0], items[3], items[4], items[5])]
    assert [entry[4] for entry in packed[1:]] == [convert, None, convert, convert]
    assert same(unpack_message(packed[1][3])["position"], JOINT_STATE["position"])
    assert _core.pack_direct([], direct, 0) == (([], [], b""), [])
    # A time the core's int64 nanoseconds cannot hold goes Python's way (its own error there).
    odd = [("/js", JOINT_STATE, float("inf")), ("/js", JOINT_STATE, 1e10),
           ("/js", JOINT_STATE, float("nan"))]
    assert _core.pack_direct(odd, direct, 0) == (([], [], b""), odd)
    assert _core.pack_direct(items[:1], direct, 2**63 - 1) == (([], [], b""), items[:1])
    with pytest.raises(TypeError, match="pack_direct"):
        _core.pack_direct([("/js", JOINT_STATE)], direct, 0)
    with pytest.raises(TypeError, match="pack_direct"):
        _core.pack_direct([("/js", JOINT_STATE, 0.0)], {"/js": ("/ros/js", "t")}, 0)


@pytest.mark.parametrize("damaged", [b"", b"MJP1", b"XXXXf", _core.pack_message(JOINT_STATE)[:-3],
                                     _core.pack_message(1.0) + b"N", b"MJP1?"],
                         ids=["empty", "magic_only", "no_magic", "cut", "trailing", "bad_tag"])
def test_bytes_the_core_did_not_pack_are_a_value_error(damaged: bytes) -> None:
    with pytest.raises(ValueError, match="unpack_message"):
        _core.unpack_message(damaged)


@pytest.mark.parametrize(("names", "frame_id", "lengths"), [
    ([f"joint_{i}" for i in range(21)], "", (21, 21, 21)),
    (["a", "bb", "ccc", "dddd", "é"], "base_link", (5, 0, 5)),
    ([], "x", (0, 0, 0)),
    (["n"], "ab", (1, 1, 0)),
    (["abc", "d"], "abc", (2, 2, 2)),
], ids=["humanoid", "no_velocity", "empty", "one", "aligned"])
def test_joint_state_cdr_is_rosbags_cdr_byte_for_byte(names: list[str], frame_id: str,
                                                      lengths: tuple[int, int, int]) -> None:
    from mjfast.interop.ros2 import conversions, types

    rosbags = types.serializer(JointStateCdr.ROS_TYPE)
    fast = JointStateCdr(rosbags)
    rng = np.random.default_rng(7)
    for time in (0.0, 1.23456789, 12345.000000001, 2.0**31 - 1.5):
        message = conversions.joint_state({
            "time": time, "name": names, "position": rng.normal(size=lengths[0]),
            "velocity": rng.normal(size=lengths[1]),
            "effort": rng.normal(size=lengths[2]).astype(">f8")})  # (swapped to little-endian)
        message.header.frame_id = frame_id
        assert fast(message) == bytes(rosbags(message))
        decoded = types.deserialize(fast(message), JointStateCdr.ROS_TYPE)
        assert list(decoded.name) == names and decoded.header.frame_id == frame_id
        np.testing.assert_array_equal(decoded.effort, message.effort)


@pytest.mark.parametrize("nanoseconds", [0, 1, 999_999_999, 1_000_000_000, 12_345_000_000_001,
                                         (2**31 - 1) * 10**9 + 999_999_999])
def test_a_synthesised_clock_is_rosbags_cdr_byte_for_byte(tmp_path: Any,
                                                          nanoseconds: int) -> None:
    # The bag process writes each synthesised /clock's CDR itself (struct), not through the
    # conversion and rosbags' serialiser: the same bytes, and the same time.
    from mjfast.interop.record.writer import _Bag
    from mjfast.interop.ros2 import conversions, types

    bag = _Bag({"path": str(tmp_path / "bag"), "custom_data": {}, "clock": True})
    made = bag._clock_message(nanoseconds)
    message = types.deserialize(made, "rosgraph_msgs/msg/Clock")
    assert message.clock.sec * 10**9 + message.clock.nanosec == nanoseconds
    rosbags = types.serializer("rosgraph_msgs/msg/Clock")
    expected = conversions.clock({"time": 0.0})
    expected.clock.sec, expected.clock.nanosec = divmod(nanoseconds, 10**9)
    assert made == bytes(rosbags(expected))
    # Past an int32 of seconds: the conversion's message, which rosbags' serialiser refuses.
    assert not isinstance(bag._clock_message(2**31 * 10**9), bytes)
    bag.close()


def test_a_packed_joint_state_as_cdr_is_rosbags_cdr_of_its_conversion() -> None:
    # The bag process writes a recorded JointState's CDR from its packed bytes in the core
    # (_core.joint_state_cdr): the bytes rosbags makes of conversions.joint_state's message, for
    # every message the core takes; any other goes the conversion's way (None).
    from mjfast.interop.ros2 import conversions, types

    rosbags = types.serializer(JointStateCdr.ROS_TYPE)
    rng = np.random.default_rng(11)
    name_lists = [[f"joint_{i}" for i in range(21)], ["a", "bb", "ccc", "dddd", "é", ""], [],
                  ["x" * 7], ["abc", "d"]]
    times: list[Any] = [0.0, 1.23456789, 12345.000000001, 2.0**31 - 1.5, -0.25, 7, 2.5e-9]
    for names in name_lists:
        for time in times:
            lengths = rng.integers(0, 4, size=3) if rng.random() < 0.3 else [len(names)] * 3
            message = {"time": time, "name": list(names), "extra": {"k": [1, "v"]},
                       "position": rng.normal(size=lengths[0]),
                       "velocity": rng.normal(size=lengths[1]),
                       "effort": rng.normal(size=lengths[2])}
            made = _core.joint_state_cdr(_core.pack_message(message))
            assert made == bytes(rosbags(conversions.joint_state(message))), (names, time)
    base = {"time": 1.0, "name": ["a"], "position": np.zeros(1), "velocity": np.zeros(1),
            "effort": np.zeros(1)}
    declined = [
        {k: v for k, v in base.items() if k != "effort"},  # a key missing
        {**base, "name": ["a", 2]},  # a name not a str
        {**base, "position": np.zeros(1, dtype=np.float32)},  # not float64
        {**base, "velocity": np.zeros((1, 1))},  # not 1-D
        {**base, "effort": np.zeros(1, dtype=">f8")},  # not this machine's order
        {**base, "time": float("nan")},
        {**base, "time": 2.0**31},  # past an int32 of seconds
        {**base, "name": ("a",)},  # a tuple, not a list
    ]
    for message in declined:
        assert _core.joint_state_cdr(_core.pack_message(message)) is None, message
    with pytest.raises(TypeError):
        _core.joint_state_cdr("not bytes")
    assert _core.joint_state_cdr(b"MJP1") is None  # (bytes the packer did not make)
    # Cut anywhere, the bytes are declined; damaged anywhere, they are read within their end
    # (under the sanitizers, an overread is a report) and give CDR or None.
    packed = _core.pack_message({**base, "extra": [{"k": (1, b"x", None, True)}, np.eye(2)]})
    assert all(_core.joint_state_cdr(packed[:cut]) is None for cut in range(len(packed)))
    for at in range(len(packed)):
        for value in (0, 0x7F, 0xFF):
            damaged = packed[:at] + bytes([value]) + packed[at + 1:]
            assert isinstance(_core.joint_state_cdr(damaged), (bytes, type(None)))


def test_joint_state_cdr_keeps_a_few_layouts_and_follows_a_change_of_names() -> None:
    from mjfast.interop.ros2 import conversions, types

    rosbags = types.serializer(JointStateCdr.ROS_TYPE)
    fast = JointStateCdr(rosbags)
    for count in range(1, 3 * JointStateCdr._KEEP):
        names = [f"j{i}" for i in range(count % 11)]
        message = conversions.joint_state({"time": count / 7, "name": names,
                                           "position": np.arange(len(names), dtype=float),
                                           "velocity": np.ones(len(names)),
                                           "effort": np.zeros(len(names))})
        assert fast(message) == bytes(rosbags(message))
        assert len(fast._layouts) <= JointStateCdr._KEEP
