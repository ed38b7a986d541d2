"""The bag-writing process of a recording (SPEC §20): CDR serialisation and the rosbag2 bag
(rosbags' `Writer`, MCAP storage) in a child interpreter, `python -m mjfast.interop.record.writer`.

Serialising a message with rosbags and appending it to an MCAP file costs tens of microseconds of
Python each (a JointState of 22 joints: ~30 us of CDR, ~10 us of MCAP); in the recording process
that work would hold the GIL that its stepping thread needs for every Python plugin call. The
recording's writer thread (`mjfast.interop.record.recorder`) hands the bus messages to this child in
batches, packed in C++ (`pack_message`) with the module-level converter of their route, or converted
there where the converter is a plugin's closure; the child converts, serialises and writes (a
JointState, the most recorded type, as CDR written by the core straight from its packed bytes:
`interop.ros2.cdr.packed_serializer`). Its CPU is
taken from the cores the stepping thread runs on, so it runs at nice 10 and costs little per
message. It owns no conversion and knows nothing of envs.

Nothing is lost to a signal (SPEC §18): the child runs in a session of its own and ignores SIGINT
and SIGTERM, so Ctrl-C or a signal to the recording's process group leaves it to close the bag
when the parent says so or dies (its pipe closes). It writes the MCAP file out at least every
half second of wall time (ending the chunk in progress), and a write that fails (a full disk)
cuts the bag back to the last of those and closes it there, readable, in space that a reserve
file kept for the summary and metadata.yaml; it then exits, and the parent's next send fails.

The bag's log times are the wall-clock time of the recording's start plus the simulated time
since then (`log_time_offset_ns` + simulated nanoseconds; the messages keep simulated time), so
`ros2 bag info` shows when it was recorded; its ros_distro is Jazzy's (SPEC §19).

Frames on the child's stdin and stdout are an 8-byte little-endian length and a pickle (between
mjfast and its own child only). In: first `{"path", "custom_data", "clock", "log_time_offset_ns"}`,
then batches of
`(topic, ros_type, timestamp_ns, message, convert)`: a rosbags message object or its CDR bytes
(convert None), or a bus message (`pack_message`) and the module-level conversion function that
makes it one; and of blocks `(None, routes, data)`, the messages `_core.pack_direct` packed in
one bytes object (`batch_items` reads them); then None. Out: `("ready", None)` or
`("error", text)` once the bag is open (or could not be), and `("closed", None | text)` once it
is closed (`metadata.yaml` written).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import io
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from mjfast._core_loader import _core

__all__ = ["ROS_DISTRO", "BagWriterProcess", "batch_items", "main", "pack_message",
           "unpack_message"]

_LENGTH = struct.Struct("<Q")
# A record's header in a block of _core.pack_direct: its route's index, log time, size.
_RECORD = struct.Struct("=IqI")
_CLOCK_TOPIC = "/clock"
_CLOCK_TYPE = "rosgraph_msgs/msg/Clock"
# A synthesised /clock at most this often (simulated), when no plugin publishes /clock.
_CLOCK_PERIOD_NS = 10_000_000
# A rosgraph_msgs/msg/Clock in CDR: the little-endian encapsulation header, then its one
# builtin_interfaces/msg/Time (int32 sec, uint32 nanosec). Written so for every synthesised
# /clock (as many as the messages it follows, at 100 Hz of simulated time): the conversion and
# rosbags' serialiser cost ~4 us of the bag process's CPU, taken beside the physics thread.
_CLOCK_CDR = struct.Struct("<4siI")
_CDR_LITTLE_ENDIAN = b"\x00\x01\x00\x00"
_START_TIMEOUT_S = 120.0
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # (Linux's; named in Python 3.10+)
_PIPE_BYTES = 1 << 20
# What the bag's metadata names as its ROS 2 distribution: the one section 19 speaks.
ROS_DISTRO = "jazzy"
# The MCAP file is written out at least this often (wall time), and sooner past _FLUSH_BYTES.
_CHECKPOINT_S = 0.5
_FLUSH_BYTES = 1 << 20
# The file that keeps disk space for closing the bag (its summary and metadata.yaml).
RESERVE_NAME = ".mjfast-reserve"


_ND = "__mjfast_ndarray__"


def pack_message(message: Any) -> Any:
    """A bus message as bytes (`_core.pack_message`: its walk in C++, arrays as their bytes; a
    microsecond of the GIL where the same walk in Python costs tens, which the stepping thread
    would wait for). A message with a part the core does not pack (a subclass, an object) keeps
    the Python form: its dicts' ndarray values as (marker, dtype, shape, bytes), the rest left for
    pickle as it is."""
    try:
        return _core.pack_message(message)
    except (TypeError, ValueError):
        return _python_packed(message)


def _python_packed(message: Any) -> Any:
    if message.__class__ is dict:
        return {key: _pack_value(value) for key, value in message.items()}
    return _pack_value(message)


def _pack_value(value: Any) -> Any:
    kind = value.__class__.__name__
    if kind == "ndarray" and not value.dtype.hasobject:
        return (_ND, value.dtype.str, value.shape, value.tobytes())
    if kind == "dict":
        return _python_packed(value)
    return value


def unpack_message(message: Any) -> Any:
    """`pack_message`'s inverse (arrays come back as copies, or, from the Python form, as
    read-only views of their bytes)."""
    if message.__class__ is bytes:  # (the Python form leaves no message as bytes)
        return _core.unpack_message(message)
    import numpy as np

    def unpack(value: Any) -> Any:
        if value.__class__ is tuple and len(value) == 4 and value[0] == _ND:
            return np.frombuffer(value[3], dtype=np.dtype(value[1])).reshape(value[2])
        if value.__class__ is dict:
            return {key: unpack(item) for key, item in value.items()}
        return value

    return unpack(message)


def batch_items(batch: list[Any]) -> Iterator[tuple[str, str, int, Any, Any]]:
    """A batch's items in order, each block `(None, routes, data)` of `_core.pack_direct` as the
    `(ROS topic, type, timestamp, pack_message(message), convert)` of each of its records."""
    for item in batch:
        if item[0] is not None:
            yield item
            continue
        _, routes, data = item
        view, at = memoryview(data), 0
        while at < len(view):
            index, stamp, size = _RECORD.unpack_from(view, at)
            at += _RECORD.size
            topic, ros_type, convert = routes[index]
            yield topic, ros_type, stamp, bytes(view[at:at + size]), convert
            at += size


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
    `send(batch)`, `close()` (returns the child's error, if any). `failed` says why the child
    ended early (a full disk), once a send found it gone."""

    def __init__(self, path: str, custom_data: dict[str, str], synthesise_clock: bool,
                 log_time_offset_ns: int = 0) -> None:
        # A session of its own: Ctrl-C and signals to the recording's process group pass it by.
        self._child = subprocess.Popen([sys.executable, "-m", "mjfast.interop.record.writer"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       start_new_session=True)
        assert self._child.stdin is not None and self._child.stdout is not None
        self._in, self._out = self._child.stdin, self._child.stdout
        # A batch (a few hundred messages, ~1 KB each) in one write, where Linux lets the pipe
        # grow past its 64 KiB: fewer wake-ups of the child and of the writer thread, whose each
        # return from a write takes the GIL back.
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self._in.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
        try:
            _write_frame(self._in, {"path": path, "custom_data": custom_data,
                                    "clock": synthesise_clock,
                                    "log_time_offset_ns": int(log_time_offset_ns)})
            kind, detail = _read_frame(self._out)
        except (OSError, EOFError) as error:
            self._child.kill()
            self._child.wait()
            raise OSError(f"the bag writer process did not start: {error}") from None
        if kind != "ready":
            self._child.wait()
            raise OSError(f"cannot write the bag {path}: {detail}")
        self.failed: str | None = None
        self._last_word: tuple[str, Any] | None = None

    def send(self, batch: list[Any]) -> None:
        """Hands a batch to the child (waits only while its pipe is full)."""
        if self.failed is not None or not batch:
            return
        data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)  # raises: not sent
        try:
            self._in.write(_LENGTH.pack(len(data)))
            self._in.write(data)
            self._in.flush()
        except (OSError, ValueError) as error:  # the child ended: what it had is in the bag
            detail = self._read_last_word()[1]
            self.failed = str(detail) if detail else f"the bag writer process ended: {error}"

    def _read_last_word(self) -> tuple[str, Any]:
        """The child's ("closed", error) frame (read once)."""
        if self._last_word is None:
            try:
                self._last_word = _read_frame(self._out)
            except (OSError, EOFError, ValueError, pickle.UnpicklingError) as failure:
                self._last_word = ("ended", f"the bag writer process ended: {failure}")
        return self._last_word

    def close(self) -> str | None:
        """Closes the bag (the child writes metadata.yaml and exits); its error, if any."""
        error = self.failed
        try:
            if error is None:
                _write_frame(self._in, None)
            detail = self._read_last_word()[1]
            if detail:
                error = error or str(detail)
        except (OSError, ValueError) as failure:
            error = error or f"the bag writer process ended: {failure}"
        finally:
            for stream in (self._in, self._out):
                with contextlib.suppress(OSError):
                    stream.close()
            if self._child.wait(timeout=60) != 0:
                error = error or f"the bag writer process exited with {self._child.returncode}"
        return error


class _File:
    """The MCAP file under rosbags' writer: what the writer writes stays in memory until
    `flush()` (a checkpoint), and `rewind(position)` cuts the file back to a checkpoint's end."""

    def __init__(self, path: Path, position: int) -> None:
        self._fd = os.open(path, os.O_WRONLY)
        os.lseek(self._fd, position, os.SEEK_SET)
        self.written = position
        self._pending = bytearray()

    def write(self, data: Any) -> int:
        self._pending += data
        return len(data)

    def tell(self) -> int:
        return self.written + len(self._pending)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        done = 0
        try:
            with memoryview(self._pending) as view:
                while done < len(view):
                    count = os.write(self._fd, view[done:done + (1 << 20)])
                    done += count
                    self.written += count
        finally:
            del self._pending[:done]

    def rewind(self, position: int) -> None:
        self._pending.clear()
        os.ftruncate(self._fd, position)
        os.lseek(self._fd, position, os.SEEK_SET)
        self.written = position

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1


class _Bag:
    """rosbags' rosbag2 writer (MCAP storage) with checkpoints: each ends the chunk in progress,
    keeps the reserve file large enough to close the bag, writes the file out and notes what the
    bag holds (the parts of rosbags' writer that its summary and metadata.yaml are made of). A
    checkpoint that fails (a full disk) restores the last one's notes, cuts the file back to it
    and frees the reserve: `close()` then closes the bag as it was at that checkpoint."""

    def __init__(self, config: dict[str, Any]) -> None:
        import rosbags.rosbag2 as rosbag2

        from mjfast.interop.ros2 import cdr, conversions, types

        self._conversions, self._types, self._cdr = conversions, types, cdr
        writer = rosbag2.Writer(config["path"], version=rosbag2.Writer.VERSION_LATEST,
                                storage_plugin=rosbag2.StoragePlugin.MCAP)
        for key, value in config["custom_data"].items():
            writer.set_custom_data(key, value)
        self._metadata_size = sum(len(key) + len(value)
                                  for key, value in config["custom_data"].items())
        writer.open()
        self._writer, storage = writer, writer.storage
        storage.bio.flush()
        position = storage.bio.tell()
        storage.bio.close()
        self._file = storage.bio = _File(storage.path, position)
        original_close = storage.close

        def close_storage(version: int, metadata: str) -> None:  # the MCAP's copy of it
            original_close(version, _with_distro(metadata, ""))

        storage.close = close_storage
        self._reserve, self._reserved = Path(config["path"]) / RESERVE_NAME, 0
        self._store = types.typestore()
        self._connections: dict[str, Any] = {}
        self._clock, self._last_clock = bool(config["clock"]), None
        self._offset = int(config.get("log_time_offset_ns", 0))
        self._unconvertible: set[str] = set()
        self._serializers: dict[str, Any] = {}  # ros_type -> its CDR serializer, made once
        self.failed: str | None = None
        self._keep_reserve()
        self._mark = self._notes()
        self._due = time.monotonic() + _CHECKPOINT_S

    # -- writing --------------------------------------------------------------------------------

    def write_batch(self, batch: list[Any]) -> None:
        """Converts and serialises a batch into the chunk in progress (in memory)."""
        try:
            for topic, ros_type, timestamp, message, convert in batch_items(batch):
                written = None
                if convert is not None and message.__class__ is bytes:
                    # A JointState's CDR straight from its packed bytes (no conversion here).
                    packed = self._cdr.packed_serializer(convert, ros_type)
                    if packed is not None:
                        written = packed(message)
                if written is not None:
                    message = written
                elif convert is not None:
                    try:
                        message = convert(unpack_message(message))
                    except Exception as failure:  # that message only, logged once a topic
                        if topic not in self._unconvertible:
                            self._unconvertible.add(topic)
                            print(f"mjfast: warning: a message on {topic} cannot be recorded "
                                  f"as {ros_type} (logged once): {failure}", file=sys.stderr)
                        continue
                self._write(topic, ros_type, timestamp, message)
                last = self._last_clock
                if self._clock and (last is None or timestamp < last
                                    or timestamp >= last + _CLOCK_PERIOD_NS):
                    self._last_clock = timestamp
                    self._write(_CLOCK_TOPIC, _CLOCK_TYPE, timestamp,
                                self._clock_message(timestamp - self._offset))
        except Exception as failure:  # the rest is dropped, the parent told
            self.failed = f"{type(failure).__name__}: {failure}"

    def _clock_message(self, nanoseconds: int) -> Any:
        """The /clock at `nanoseconds` of simulated time: its CDR (rosbags' bytes, made here),
        or, beyond an int32 of seconds, the conversion's message (rosbags' serialiser then says
        what is wrong)."""
        seconds, nanosecond = divmod(nanoseconds, 1_000_000_000)
        try:
            return _CLOCK_CDR.pack(_CDR_LITTLE_ENDIAN, seconds, nanosecond)
        except struct.error:
            return self._conversions.clock({"time": nanoseconds / 1e9})

    def _write(self, topic: str, ros_type: str, timestamp: int, message: Any) -> None:
        connection = self._connections.get(topic)
        if connection is None:
            connection = self._connections[topic] = self._writer.add_connection(
                topic, ros_type, typestore=self._store)
        if not isinstance(message, (bytes, bytearray)):
            serialize = self._serializers.get(ros_type)
            if serialize is None:
                serialize = self._serializers[ros_type] = self._cdr.fast_serializer(ros_type)
            message = serialize(message)
        self._writer.write(connection, timestamp, bytes(message))

    # -- checkpoints ----------------------------------------------------------------------------

    def until_checkpoint(self) -> float:
        return max(0.0, self._due - time.monotonic())

    def checkpoint_if_due(self) -> None:
        if time.monotonic() >= self._due or self._file.pending > _FLUSH_BYTES:
            self.checkpoint()

    def checkpoint(self) -> None:
        self._due = time.monotonic() + _CHECKPOINT_S
        storage = self._writer.storage
        try:
            if storage.chunk.msgs:
                storage.close_chunk()
            self._keep_reserve()
            self._file.flush()
        except OSError as error:  # a full disk: back to the last checkpoint
            self._rewind(error)
            return
        self._mark = self._notes()

    def _notes(self) -> tuple[Any, ...]:
        writer = self._writer
        storage = writer.storage
        return (self._file.written, len(storage.chunks), dict(storage.channel_stats),
                storage.message_start_time, storage.message_end_time, dict(writer.counts),
                writer.min_timestamp, writer.max_timestamp)

    def _rewind(self, error: OSError) -> None:
        from rosbags.rosbag2.storage_mcap import PendingChunk

        self.failed = f"{error.strerror or error} (the bag holds what came before)"
        writer = self._writer
        storage = writer.storage
        position, chunks, stats, start, end, counts, low, high = self._mark
        self._release_reserve()
        self._file.rewind(position)
        del storage.chunks[chunks:]
        storage.chunk = PendingChunk(2**63 - 1, 0, io.BytesIO(), collections.defaultdict(list))
        storage.channel_stats = {key: stats.get(key, 0) for key in storage.channel_stats}
        storage.message_start_time, storage.message_end_time = start, end
        writer.counts = {key: counts.get(key, 0) for key in writer.counts}
        writer.min_timestamp, writer.max_timestamp = low, high

    def _keep_reserve(self) -> None:
        """Keeps room for the summary (schemas, channels, one index per chunk) and the metadata
        (in the MCAP file and in metadata.yaml), twice over."""
        storage = self._writer.storage
        summary = (sum(len(s.data) + len(s.name) + 64 for s in storage.schemas)
                   + sum(len(c.topic) + len(c.metadata) + 64 for c in storage.channels)
                   + len(storage.chunks) * (96 + 10 * len(storage.channels)))
        metadata = 2 * (2 * self._metadata_size + 1024 * (len(storage.channels) + 4))
        needed = 2 * (summary + metadata) + (64 << 10)
        if needed > self._reserved:
            needed += needed // 2  # grown seldom
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                try:
                    os.posix_fallocate(fd, 0, needed)
                except OSError as error:  # a file system that cannot: written out instead
                    if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                    os.pwrite(fd, bytes(needed), 0)
            finally:
                os.close(fd)
            self._reserved = needed

    def _release_reserve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._reserve.unlink()
        self._reserved = 0

    # -- closing --------------------------------------------------------------------------------

    def close(self) -> str | None:
        """Writes what is left, the summary and metadata.yaml; the error met, if any."""
        if self.failed is None:
            self.checkpoint()
        self._release_reserve()
        try:
            self._writer.close()
            _name_the_distro(self._writer.metapath)
        except Exception as failure:
            return self.failed or f"{type(failure).__name__}: {failure}"
        return self.failed


def _with_distro(text: str, indent: str) -> str:
    """rosbag2 metadata as rosbags writes it, with section 19's distribution (rosbags names
    itself there)."""
    named, count = re.subn(rf"^{indent}ros_distro: rosbags$", f"{indent}ros_distro: {ROS_DISTRO}",
                           text, flags=re.MULTILINE)
    return named if count == 1 else text


def _name_the_distro(path: Path) -> None:
    """metadata.yaml with section 19's distribution, rewritten in place (shorter: no new disk
    space is needed)."""
    with path.open("r+", encoding="utf-8") as file:
        text = file.read()
        named = _with_distro(text, "  ")
        if named != text:
            file.seek(0)
            file.write(named)
            file.truncate()


class _Pipe:
    """The child's end of its stdin: frames, or None after `timeout` seconds without one."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def _fill(self, size: int, timeout: float | None) -> bool:
        """Whether `size` bytes are buffered before `timeout` (None: waits); EOFError once the
        other end closed."""
        while len(self._buffer) < size:
            if timeout is not None and not select.select([self._fd], [], [], timeout)[0]:
                return False
            chunk = os.read(self._fd, max(size - len(self._buffer), 1 << 16))
            if not chunk:
                raise EOFError("the other side of the bag writer's pipe closed")
            self._buffer += chunk
        return True

    def read_frame(self, timeout: float | None = None) -> Any:
        if not self._fill(_LENGTH.size, timeout):
            return _IDLE
        (size,) = _LENGTH.unpack_from(self._buffer)
        self._fill(_LENGTH.size + size, None)  # the rest of a frame follows at once
        with memoryview(self._buffer) as view:
            value = pickle.loads(view[_LENGTH.size:_LENGTH.size + size])
        del self._buffer[:_LENGTH.size + size]
        return value


_IDLE = object()


def main() -> int:
    """The child: open the bag, write batches until None (or the pipe's end), close it.

    It runs in a session of its own (`BagWriterProcess`), so Ctrl-C and a signal to the
    recording's process group do not reach it; one sent to it alone is ignored too. It ends when
    its parent says so or its pipe closes (the parent died), closing the bag either way."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    with contextlib.suppress(AttributeError):  # a file size limit is an error, not a crash
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    source, sink = _Pipe(sys.stdin.fileno()), sys.stdout.buffer
    # Behind the simulation for the CPU: where cores are short, the stepping thread goes first
    # and this process catches up from its pipe and the recording's bounded queue.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)
    config = source.read_frame()
    try:
        bag = _Bag(config)
    except Exception as error:
        _write_frame(sink, ("error", f"{type(error).__name__}: {error}"))
        return 1
    _write_frame(sink, ("ready", None))
    while bag.failed is None:
        try:
            batch = source.read_frame(timeout=bag.until_checkpoint())
        except EOFError:  # the parent died: close what there is
            break
        if batch is None:
            break
        if batch is not _IDLE:
            bag.write_batch(batch)
        bag.checkpoint_if_due()
    error = bag.close()
    with contextlib.suppress(OSError):
        _write_frame(sink, ("closed", error))
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
