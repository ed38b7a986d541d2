"""The bag-writing process of a recording (SPEC §20): CDR serialisation and the rosbag2 bag
(rosbags' `Writer`, MCAP storage) in a child interpreter, `python -m mjfast.bag_writer`.

Serialising a message with rosbags and appending it to an MCAP file costs tens of microseconds of
Python each (a JointState of 22 joints: ~40 us of CDR, ~20 us of MCAP); in the recording process
that work would hold the GIL that its stepping thread needs for every Python plugin call. The
recording's writer thread (`mjfast.recording`) converts the bus messages through the conversion
table and pickles them to this child in batches; the child serialises and writes. It owns no
conversion and knows nothing of envs.

Frames on the child's stdin and stdout are an 8-byte little-endian length and a pickle (between
mjfast and its own child only). In: first `{"path", "custom_data", "clock"}`, then batches of
`(topic, ros_type, timestamp_ns, message, convert)`: a rosbags message object or its CDR bytes
(convert None), or a bus message (`pack_message`) and the module-level conversion function that
makes it one; then None. Out: `("ready", None)` or `("error", text)` once the bag is open (or
could not be), and `("closed", None | text)` once it is closed (`metadata.yaml` written).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
from typing import IO, Any

__all__ = ["BagWriterProcess", "main", "pack_message", "unpack_message"]

_LENGTH = struct.Struct("<Q")
_CLOCK_TOPIC = "/clock"
_CLOCK_TYPE = "rosgraph_msgs/msg/Clock"
# A synthesised /clock at most this often (simulated), when no plugin publishes /clock.
_CLOCK_PERIOD_NS = 10_000_000
_START_TIMEOUT_S = 120.0


_ND = "__mjfast_ndarray__"


def pack_message(message: Any) -> Any:
    """A bus message with its dicts' ndarray values as (marker, dtype, shape, bytes): pickling
    those costs next to nothing, an ndarray several microseconds. Anything else (arrays in lists
    included) is left for pickle as it is."""
    if message.__class__ is dict:
        return {key: _pack_value(value) for key, value in message.items()}
    return _pack_value(message)


def _pack_value(value: Any) -> Any:
    kind = value.__class__.__name__
    if kind == "ndarray" and not value.dtype.hasobject:
        return (_ND, value.dtype.str, value.shape, value.tobytes())
    if kind == "dict":
        return pack_message(value)
    return value


def unpack_message(message: Any) -> Any:
    """`pack_message`'s inverse (arrays come back as read-only views of their bytes)."""
    import numpy as np

    def unpack(value: Any) -> Any:
        if value.__class__ is tuple and len(value) == 4 and value[0] == _ND:
            return np.frombuffer(value[3], dtype=np.dtype(value[1])).reshape(value[2])
        if value.__class__ is dict:
            return {key: unpack(item) for key, item in value.items()}
        return value

    return unpack(message)


def _write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> Any:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the other side of the bag writer's pipe closed")
    (size,) = _LENGTH.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side of the bag writer's pipe closed mid-frame")
    return pickle.loads(data)


class BagWriterProcess:
    """The parent's side: starts the child and opens the bag (OSError naming what went wrong),
    `send(batch)`, `close()` (returns the child's error, if any)."""

    def __init__(self, path: str, custom_data: dict[str, str], synthesise_clock: bool) -> None:
        self._child = subprocess.Popen([sys.executable, "-m", "mjfast.bag_writer"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._child.stdin is not None and self._child.stdout is not None
        self._in, self._out = self._child.stdin, self._child.stdout
        try:
            _write_frame(self._in, {"path": path, "custom_data": custom_data,
                                    "clock": synthesise_clock})
            kind, detail = _read_frame(self._out)
        except (OSError, EOFError) as error:
            self._child.kill()
            self._child.wait()
            raise OSError(f"the bag writer process did not start: {error}") from None
        if kind != "ready":
            self._child.wait()
            raise OSError(f"cannot write the bag {path}: {detail}")
        self.failed: str | None = None

    def send(self, batch: list[tuple[str, str, int, Any, Any]]) -> None:
        """Hands a batch to the child (waits only while its pipe is full)."""
        if self.failed is not None or not batch:
            return
        data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)  # raises: not sent
        try:
            self._in.write(_LENGTH.pack(len(data)))
            self._in.write(data)
            self._in.flush()
        except (OSError, ValueError) as error:  # the child died: what it had is in the bag
            self.failed = f"the bag writer process ended: {error}"

    def close(self) -> str | None:
        """Closes the bag (the child writes metadata.yaml and exits); its error, if any."""
        error = self.failed
        try:
            _write_frame(self._in, None)
            kind, detail = _read_frame(self._out)
            if kind == "closed" and detail:
                error = error or str(detail)
        except (OSError, EOFError, ValueError) as failure:
            error = error or f"the bag writer process ended: {failure}"
        finally:
            for stream in (self._in, self._out):
                with contextlib.suppress(OSError):
                    stream.close()
            if self._child.wait(timeout=60) != 0:
                error = error or f"the bag writer process exited with {self._child.returncode}"
        return error


def main() -> int:
    """The child: open the bag, write batches until None, close it."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    # Behind the simulation for the CPU: where cores are short, the stepping thread goes first
    # and this process catches up from its pipe and the recording's bounded queue.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    config = _read_frame(source)
    try:
        import rosbags.rosbag2 as rosbag2

        from mjfast.ros2 import conversions, types

        writer = rosbag2.Writer(config["path"], version=rosbag2.Writer.VERSION_LATEST,
                                storage_plugin=rosbag2.StoragePlugin.MCAP)
        for key, value in config["custom_data"].items():
            writer.set_custom_data(key, value)
        writer.open()
    except Exception as error:
        _write_frame(sink, ("error", f"{type(error).__name__}: {error}"))
        return 1
    _write_frame(sink, ("ready", None))
    store = types.typestore()
    connections: dict[str, Any] = {}
    synthesise_clock, last_clock = bool(config["clock"]), None
    error: str | None = None
    unconvertible: set[str] = set()

    def write(topic: str, ros_type: str, timestamp: int, message: Any) -> None:
        connection = connections.get(topic)
        if connection is None:
            connection = connections[topic] = writer.add_connection(topic, ros_type,
                                                                    typestore=store)
        if not isinstance(message, (bytes, bytearray)):
            message = types.serializer(ros_type)(message)
        writer.write(connection, timestamp, bytes(message))

    while True:
        try:
            batch = _read_frame(source)
        except EOFError:  # the parent died: close what there is
            batch = None
        if batch is None:
            break
        if error is not None:
            continue
        try:
            for topic, ros_type, timestamp, message, convert in batch:
                if convert is not None:
                    try:
                        message = convert(unpack_message(message))
                    except Exception as failure:  # that message only, logged once a topic
                        if topic not in unconvertible:
                            unconvertible.add(topic)
                            print(f"mjfast: warning: a message on {topic} cannot be recorded "
                                  f"as {ros_type} (logged once): {failure}", file=sys.stderr)
                        continue
                write(topic, ros_type, timestamp, message)
                if synthesise_clock and (last_clock is None or timestamp < last_clock
                                         or timestamp >= last_clock + _CLOCK_PERIOD_NS):
                    last_clock = timestamp
                    write(_CLOCK_TOPIC, _CLOCK_TYPE, timestamp,
                          conversions.clock({"time": timestamp / 1e9}))
        except Exception as failure:  # a full disk: the rest is dropped, the parent told
            error = f"{type(failure).__name__}: {failure}"
    try:
        writer.close()
    except Exception as failure:
        error = error or f"{type(failure).__name__}: {failure}"
    with contextlib.suppress(OSError):
        _write_frame(sink, ("closed", error))
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
