"""mjfast.interop.remote.codec: bus messages to msgpack bytes and back, bit-exact for numpy arrays,
and a ValueError naming what is wrong for bytes that are not one message (docs/remote.md)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zenoh", reason="the remote bus needs the extra mjfast[server] (Zenoh)")
pytest.importorskip("msgpack", reason="the remote bus needs the extra mjfast[server] (msgpack)")

from mjfast.remote import codec
from support import assert_same_array, ndarray_ext, sample_arrays


@pytest.mark.parametrize("index", range(len(sample_arrays())))
def test_arrays_round_trip_bit_exact(index: int) -> None:
    array = sample_arrays()[index]
    assert_same_array(codec.decode(codec.encode({"a": array}))["a"], array)


def test_messages_keep_their_structure_and_numpy_scalars_their_dtype() -> None:
    message = {"time": 1.25, "name": ["j0", "j1"], "ok": True, "none": None, 3: "int key",
               "nested": {"list": [1, [2.5, "x"]], "f32": np.float32(0.1), "i8": np.int8(-3),
                          "flag": np.bool_(True)}}
    decoded = codec.decode(codec.encode(message))
    assert decoded["nested"]["f32"].dtype == np.float32 and decoded["nested"]["f32"] == \
        np.float32(0.1)
    assert type(decoded["nested"]["i8"]) is np.int8 and decoded["nested"]["i8"] == -3
    assert type(decoded["nested"]["flag"]) is np.bool_
    assert decoded == message


@pytest.mark.parametrize("value", [{1, 2}, object(), np.array(["a"]), np.array([None]),
                                   np.zeros(2, dtype=[("x", "f4")])])
def test_what_cannot_travel_is_a_type_error_naming_it(value: Any) -> None:
    with pytest.raises(TypeError, match="cannot encode"):
        codec.encode({"v": value})


def test_a_150_mib_array_decodes() -> None:
    array = np.arange(150 * 2**20 // 8, dtype=np.float64)
    decoded = codec.decode(codec.encode({"a": array}))["a"]
    assert decoded.shape == array.shape and np.array_equal(decoded, array)


@pytest.mark.parametrize(("payload", "expected"), [
    (b"\xc1", "undecodable message: FormatError"),
    (b"\x92\x01", "undecodable message: Unpack failed: incomplete input"),
    (b"\x01\x02", "undecodable message: unpack(b) received extra data"),
    (b"\x91" * 100_000 + b"\xc0", "undecodable message: StackError"),
    (b"\x81\x91\x01\x02", "undecodable message: unhashable type: 'list'"),
    (b"\xdd\xff\xff\xff\xff", "undecodable message: 4294967295 exceeds max_array_len"),
    (ndarray_ext(5), "ndarray extension header 5: expected [dtype, shape, order]"),
    (ndarray_ext(["<f8", [-1], "C"], bytes(8)), "a list of sizes >= 0"),
    (ndarray_ext(["<f8", [1], "X"], bytes(8)), "one of ['C', 'F', 'S']"),
    (ndarray_ext(["|O", [1], "C"], bytes(8)), "with dtype '|O': expected bool, integer, float"),
    (ndarray_ext(["(2,)f8", [1], "C"], bytes(16)), "with dtype '(2,)f8'"),
    (ndarray_ext(["nonsense", [1], "C"], bytes(8)), "with dtype 'nonsense'"),
    (ndarray_ext(["<f8", [2**62, 2**62], "C"]), f"expected {2**127} bytes"),
    (ndarray_ext(["<f8", [2], "C"], bytes(8)), "expected 16 bytes of elements, got 8"),
    (ndarray_ext(["<f8", [1], "S"], bytes(8)), "of a scalar with shape [1]: expected []"),
    (ndarray_ext(["<f8", [], "C"])[:-1], "undecodable message"),
    (__import__("msgpack").packb(__import__("msgpack").ExtType(7, b"abc")),
     "extension type 7: only type 1 (a numpy array) travels"),
])
def test_undecodable_payloads_are_value_errors_naming_what(payload: bytes, expected: str) -> None:
    with pytest.raises(ValueError) as failed:
        codec.decode(payload)
    assert type(failed.value) is ValueError
    assert expected in str(failed.value)


def test_decoded_arrays_are_read_only_views_of_the_payload() -> None:
    payload = codec.encode({"a": np.arange(6, dtype=np.float32).reshape(2, 3)})
    array = codec.decode(payload)["a"]
    assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        array[0, 0] = 1.0
    assert array.base is not None  # a view, not a copy


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1])
def test_an_integer_past_64_bits_is_a_type_error_naming_the_range(value: int) -> None:
    with pytest.raises(TypeError, match=r"integers travel from -2\*\*63 to 2\*\*64-1"):
        codec.encode({"n": value})
    assert codec.decode(codec.encode({"n": 2**64 - 1, "m": -(2**63)})) == \
        {"n": 2**64 - 1, "m": -(2**63)}


def test_threads_encode_at_once_without_mixing_their_messages() -> None:
    # Each thread keeps its own packer: messages encoded concurrently stay whole.
    errors: list[BaseException] = []

    def encode_many(index: int) -> None:
        try:
            message = {"thread": index, "data": np.full(1000, index, dtype=np.int32)}
            for _ in range(200):
                decoded = codec.decode(codec.encode(message))
                assert decoded["thread"] == index
                assert np.array_equal(decoded["data"], message["data"])
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=encode_many, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
