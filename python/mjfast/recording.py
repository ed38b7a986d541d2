"""Recording and replay (SPEC §20): `env.record()` writes a rosbag2 bag (MCAP, CDR) through rosbags'
writer, `open_recording()` reads one back, `replay()` re-simulates one and checks it.

It owns the bag's layout: the bridged topics through `mjfast.ros2.conversions` (the one table),
`/clock`, the commands that reached the simulation on `/mjfast/commands` and `SimState` bytes on
`/mjfast/state`, the model, parameters and versions in the bag's custom metadata. It does not own
the state format (`mjfast.state`), the conversions, nor what the stepping thread copies
(`_core.StepRecorder`). Needs the extra mjfast[ros2] (rosbags), imported on first use.

Commands carry the step they took effect at, counted from the recording's first state (`step`):
a control write is copied by the stepping thread as the bridge applies it (after any
update_write plugins), a call (reset, set_joint_state, ...) and a publish from outside the env
(a remote client, a ROS 2 node) are recorded with stepping held at the boundary where they
happen. Replay applies them at the same boundaries, so it reproduces the run bit for bit.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import itertools
import json
import logging
import os
import pickle
import shutil
import threading
import time as wall_time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from mjfast._core_loader import _core
from mjfast.bag_writer import BagWriterProcess, pack_message, unpack_message
from mjfast.errors import LogicError
from mjfast.params import resolve_name

__all__ = ["CLOCK_TOPIC", "COMMANDS_TOPIC", "STATE_TOPIC", "Recording", "RecordingFile",
           "ReplayResult", "open_recording", "replay"]

COMMANDS_TOPIC = "/mjfast/commands"
STATE_TOPIC = "/mjfast/state"
CLOCK_TOPIC = "/clock"
BYTES_TYPE = "std_msgs/msg/UInt8MultiArray"
FORMAT = "1"  # the layout of this module's docstring; custom metadata "mjfast.format"

# Default state schedule: one every simulated second (and the first).
DEFAULT_STATE_PERIOD_S = 1.0
# The bounded queues between the threads that record and the writer thread: beyond these, an
# entry is dropped and counted (statistics()["dropped"]) rather than the stepping thread waiting.
_MESSAGE_QUEUE_LIMIT = 1 << 16
_RING_CAPACITY = 1 << 14
_WRITER_PERIOD_S = 0.02
# Commands applied by the replay of a call, by name (the env's method of that name).
_CALLS = ("reset", "set_joint_state", "set_body_state", "apply_options", "set_equality_active",
          "reload", "set_geom_properties", "set_state")

_log = logging.getLogger("mjfast.recording")


def _ros2() -> tuple[Any, Any, Any]:
    """(conversions, types, rosbags.rosbag2), with the one-line error naming the extra."""
    import rosbags.rosbag2 as rosbag2

    from mjfast.ros2 import conversions, types  # raises the one-line ImportError

    return conversions, types, rosbag2


def _state_module() -> Any:
    from mjfast import state

    return state


def _bytes_message(payload: bytes) -> Any:
    _, types, _ = _ros2()
    cls = types.message_class(BYTES_TYPE)
    layout = types.message_class("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
    return cls(layout=layout, data=np.frombuffer(payload, dtype=np.uint8))


def _ns(time: float) -> int:
    """A log timestamp: simulated seconds as nanoseconds (never negative)."""
    return max(0, round(float(time) * 1e9))


def _model_text(env: Any) -> dict[str, str]:
    """The model in the bag's metadata: the MJCF text (and the file's path, for its assets), or an
    MJB (base64) for an env made from a mujoco.MjModel."""
    source = env._source
    if source.xml is not None:
        return {"mjfast.mjcf": source.xml}
    if source.path is not None:
        return {"mjfast.mjcf": source.path.read_text(), "mjfast.model_path": str(source.path)}
    model = source.model
    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return {"mjfast.mjb": base64.b64encode(buffer.tobytes()).decode("ascii")}


def _jsonable(value: Any) -> Any:
    from mjfast.services import jsonable

    return jsonable(value)


@dataclass
class _Route:
    topic: str
    ros_type: str
    convert: Any
    companions: tuple[Any, ...]


class Recording:
    """A recording in progress (`env.record()`); `stop()` ends it and closes the bag (also done by
    `env.close()`). `path` is the bag's directory; `statistics()` counts what was written and what
    was dropped."""

    def __init__(self) -> None:
        raise TypeError("a Recording comes from env.record(path)")

    @classmethod
    def _start(cls, env: Any, path: str | os.PathLike[str], topics: Iterable[str] | None,
               state_every: int | None) -> Recording:
        conversions, types, _ = _ros2()
        state = _state_module()
        target = Path(os.fspath(path))
        if target.exists():
            kind = "a bag" if (target / "metadata.yaml").exists() else (
                "a directory" if target.is_dir() else "a file")
            raise FileExistsError(f"record: {target} exists already ({kind}); a recording goes "
                                  f"into a new directory, nothing there was changed")
        if state_every is not None and (isinstance(state_every, bool) or not isinstance(
                state_every, (int, np.integer)) or state_every < 1):
            raise ValueError(f"state_every must be an integer >= 1 (steps) or None (every "
                             f"simulated second), got {state_every!r}")
        if topics is not None:
            if isinstance(topics, str):
                raise TypeError(f"topics must be a list of topic names, got the string "
                                f"{topics!r}")
            topics = [resolve_name(str(t)) for t in topics]
        self = object.__new__(cls)
        self._env = env
        self.path = target
        self._state_every = int(state_every or 0)
        self._state_period = 0.0 if state_every else DEFAULT_STATE_PERIOD_S
        self._queue: collections.deque[tuple[Any, ...]] = collections.deque()
        self._sequence = itertools.count()
        self._counts = collections.Counter[str]()
        self._stopped = threading.Event()
        self._closed = False
        self._error: BaseException | None = None
        self._identities: dict[int, tuple[str, str]] = {}
        self._routes: dict[str, _Route | None] = {}
        self._specs: Any = None
        self._wanted = topics
        self._conversions, self._types = conversions, types
        if getattr(env, "_recording", None) is not None:
            raise LogicError(f"the env is recording to {env._recording.path} already: stop() "
                             f"that recording first")
        self._rebuild_routes()
        if topics is not None:
            known = sorted(self._all_topics())
            missing = [t for t in topics if t not in known]
            if missing:
                raise ValueError(f"record(topics=...): no bridged topic {missing[0]!r}; the "
                                 f"env's bridged topics: {known}")
        # The bag is written by a child process (mjfast.bag_writer), started before stepping is
        # held (it takes a moment); it creates the directory now (refused if it exists: checked
        # above) and writes metadata.yaml at stop().
        self._bag = BagWriterProcess(str(target), self._metadata(env),
                                     CLOCK_TOPIC not in self._all_topics())
        try:
            with env.hold_stepping("record", defer_interrupts=True):
                if getattr(env, "_recording", None) is not None:  # started meanwhile
                    raise LogicError(f"the env is recording to {env._recording.path} already: "
                                     f"stop() that recording first")
                first = state.capture(env._core)
                self._identities[env.model_generation] = (first.model_signature,
                                                          first.model_description)
                self._batch: list[tuple[str, str, int, Any, Any]] = []
                self._shippable: dict[Any, bool] = {}
                self._tap = _core.StepRecorder(_RING_CAPACITY, self._state_every,
                                               self._state_period)
                self._write_state(first, first.time)
                self._tap.attach(env._core)
                self._inner_publish = env.bus.publish
                env.bus.publish = self._publish_and_record
                env.bus.inbound_tap = self._inbound
                env._recording = self
        except BaseException:
            # Nothing of this recording stays: the child made the directory, it goes again.
            self._bag.close()
            shutil.rmtree(target, ignore_errors=True)
            raise
        self._writer_thread = threading.Thread(target=self._write_loop, daemon=True,
                                               name="mjfast-recording-writer")
        self._writer_thread.start()
        return self

    def _metadata(self, env: Any) -> dict[str, str]:
        from mjfast import __version__  # (the package is imported by now: no cycle)

        data = {"mjfast.format": FORMAT, "mjfast.version": __version__,
                "mujoco.version": mujoco.__version__, "mjfast.namespace": env.namespace,
                "mjfast.params": json.dumps(_jsonable(env.params.to_dict())),
                "mjfast.state_every": str(self._state_every),
                "mjfast.state_period": repr(self._state_period)}
        data.update(_model_text(env))
        return data

    # -- routes (the conversion table) ----------------------------------------------------------

    def _rebuild_routes(self) -> None:
        from mjfast.discovery import resolve_plugin

        env, conversions = self._env, self._conversions
        routes: dict[str, _Route | None] = {}
        for spec in env._specs:
            try:
                cls = resolve_plugin(spec.type)
            except Exception:
                cls = None
            ctx = conversions.Context(spec.name, spec.type, spec.config,
                                      f"{env.namespace.rstrip('/')}/{spec.name}", env.model)
            try:
                outbound = conversions.outbound_routes(ctx, cls)
            except Exception as error:  # a plugin's bad ros_types: that plugin only
                _log.warning("plugin %s is not recorded: %s", spec.name, error)
                continue
            for route in outbound:
                if self._wanted is None or route.topic in self._wanted:
                    routes.setdefault(route.topic, _Route(route.topic, route.ros_type,
                                                          route.convert, route.companions))
        self._specs = env._specs
        self._routes = routes

    def _all_topics(self) -> set[str]:
        names = set()
        for route in self._routes.values():
            if route is not None:
                names.add(route.topic)
                names.update(c.topic for c in route.companions)
        return names

    # -- what the recording threads call --------------------------------------------------------

    def _publish_and_record(self, topic: str, message: Any) -> None:
        """bus.publish while recording: delivery first, then a reference into the queue (the
        publisher's message is not written to after publishing, as for the bus's latest())."""
        self._inner_publish(topic, message)
        if self._closed:
            return
        if self._env._specs is not self._specs:  # a reload changed the plugins
            self._rebuild_routes()
        route = self._routes.get(topic)
        if route is None:
            if topic in self._routes:
                return
            try:
                resolved = resolve_name(topic)
            except (TypeError, ValueError):
                return
            route = self._routes.get(resolved)
            self._routes[topic] = route
            if route is None:
                return
        if len(self._queue) >= _MESSAGE_QUEUE_LIMIT:
            self._counts["dropped"] += 1
            return
        self._queue.append(("message", route, self._env._data.time, message))

    def _inbound(self, topic: str, message: Any, publish: Any) -> None:
        """A publish from outside the env (bus.inbound_tap): delivered at a step boundary, with
        stepping held, so that the step it takes effect at is the one recorded."""
        core = self._env._core
        try:
            core.hold_steps()
        except Exception:  # closed meanwhile: as without a recording
            publish(topic, message)
            return
        try:
            if not self._closed:
                self.command("publish", topic=resolve_name(topic), message=message)
            publish(topic, message)
        finally:
            core.release_steps()

    def command(self, kind: str, **fields: Any) -> None:
        """Records a call or a publish at the current step boundary (stepping held by the
        caller)."""
        if self._closed:
            return
        entry = {"kind": kind, "step": int(self._tap.steps), "seq": next(self._sequence),
                 **fields}
        self._queue.append(("command", float(self._env._data.time), entry))

    def call(self, name: str, args: Mapping[str, Any]) -> None:
        """An env call that changed the simulation (stepping held by the caller)."""
        if name != "stop":
            self.command("call", name=name, args={k: _plain(v) for k, v in args.items()})
        if name in ("reload", "set_state", "stop"):
            # The model (its identity) may have changed: a full state now, a point to restart at.
            state = _state_module().capture(self._env._core)
            self._identities[self._env.model_generation] = (state.model_signature,
                                                            state.model_description)
            self._queue.append(("state", state, int(self._tap.steps), next(self._sequence)))

    # -- the writer thread ----------------------------------------------------------------------

    def _write_loop(self) -> None:
        # One thread converts (the table's converters are the plugins' own closures) and hands
        # batches to the bag writer process, so that the stepping thread only copies. The ROS 2
        # bridge converts and serialises on the publishing thread today; it could hand its
        # messages to a queue like this one and share this thread and that process.
        while not self._stopped.wait(_WRITER_PERIOD_S):
            self._flush()
        self._flush()

    def _flush(self) -> None:
        try:
            for kind, step, step_count, generation, time, _, values in self._tap.drain():
                if kind == "commands":
                    self._write_command(time, {
                        "kind": "control", "step": int(step), "seq": next(self._sequence),
                        "fields": {name: np.frombuffer(raw, dtype=np.float64)
                                   for name, raw in values.items()}})
                else:
                    physics = np.frombuffer(values, dtype=np.float64)
                    signature, description = self._identities.get(int(generation), ("", ""))
                    state = _state_module().SimState._make(physics, int(step_count), signature,
                                                           description, ())
                    self._write_state(state, time, step=int(step))
            while self._queue:
                item = self._queue.popleft()
                if item[0] == "message":
                    self._write_message(item[1], item[2], item[3])
                elif item[0] == "command":
                    self._write_command(item[1], item[2])
                else:
                    self._write_state(item[1], item[1].time, step=item[2], seq=item[3])
            batch, self._batch = self._batch, []
            try:
                self._bag.send(batch)
            except (pickle.PicklingError, TypeError, AttributeError):
                # A message type made at run time (rosbags cannot pickle it by name), or a
                # message part that does not pickle: converted and serialised here instead.
                self._bag.send([self._serialised_here(*item) for item in batch])
        except Exception as error:  # a bug: the run goes on, the recording says so
            if self._error is None:
                self._error = error
                _log.error("the recording to %s failed: %s", self.path, error)
            self._queue.clear()

    def _write(self, topic: str, ros_type: str, time: float, message: Any,
               convert: Any = None) -> None:
        self._batch.append((topic, ros_type, _ns(time), message, convert))
        self._counts[topic] += 1

    def _write_message(self, route: Any, time: float, message: Any) -> None:
        convert = route.convert
        shippable = self._shippable.get(convert)
        if shippable is None:
            shippable = self._shippable[convert] = _pickles(convert)
        if shippable:
            # A module-level converter (conversions.joint_state): the child converts the bus
            # message, whose arrays travel as raw bytes (pickling an ndarray costs several
            # microseconds of this process's GIL, its bytes next to nothing).
            self._write(route.topic, route.ros_type, time, pack_message(message), convert)
        else:
            try:
                converted = convert(message)
            except Exception as error:
                self._counts["unconvertible"] += 1
                if self._counts["unconvertible"] == 1:
                    _log.warning("a message on %s cannot be recorded as %s (counted; logged "
                                 "once): %s", route.topic, route.ros_type, error)
                return
            self._write(route.topic, route.ros_type, time, converted)
        for companion in route.companions:
            self._write_message(companion, time, message)

    def _serialised_here(self, topic: str, ros_type: str, stamp: int, message: Any,
                         convert: Any) -> tuple[str, str, int, Any, None]:
        if convert is not None:
            message = convert(unpack_message(message))
        if not isinstance(message, (bytes, bytearray)):
            message = bytes(self._types.serializer(ros_type)(message))
        return topic, ros_type, stamp, message, None

    def _write_command(self, time: float, entry: dict[str, Any]) -> None:
        encode = _state_module().encode_value
        try:
            payload = encode(entry)
        except TypeError as error:  # a published message with a part that has no encoding
            self._counts["unrecordable_commands"] += 1
            _log.warning("a command cannot be recorded (replay will differ): %s", error)
            return
        self._write(COMMANDS_TOPIC, BYTES_TYPE, time, _bytes_message(payload))

    def _write_state(self, state: Any, time: float, step: int = 0,
                     seq: int | None = None) -> None:
        # Each state goes with the step it was taken at and its order among the commands of that
        # step: a UInt8MultiArray's layout carries them as two labelled dimensions.
        message = _bytes_message(state.to_bytes())
        dimension = self._types.message_class("std_msgs/msg/MultiArrayDimension")
        message.layout.dim = [dimension(label="step", size=step, stride=0)]
        if seq is not None:
            message.layout.dim.append(dimension(label="seq", size=seq, stride=0))
        self._write(STATE_TOPIC, BYTES_TYPE, time, message)

    # -- the handle -----------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        """Messages written per topic, and `dropped` / `unconvertible` entries."""
        counts = dict(self._counts)
        counts["dropped"] = counts.get("dropped", 0) + int(self._tap.dropped)
        return counts

    @property
    def recording(self) -> bool:
        return not self._closed

    def stop(self) -> None:
        """Ends the recording at the current step boundary and closes the bag; idempotent. An
        error the writer met (a full disk) is raised here, after the bag is closed."""
        if self._closed:
            return
        env = self._env
        with contextlib.suppress(Exception):  # a closed env steps no more: nothing to add
            env._core.hold_steps()  # a step boundary (re-entrant: env.close() may hold one)
            try:
                # The last state, where the recording ends (replay runs up to it).
                self.call("stop", {})
                _core.StepRecorder.detach(env._core)
            finally:
                env._core.release_steps()
        self._closed = True
        if env.bus.__dict__.get("publish") == self._publish_and_record:
            env.bus.publish = self._inner_publish
            if self._inner_publish == type(env.bus).publish.__get__(env.bus):
                del env.bus.publish
        else:  # wrapped again after us (a bridge): ours passes through from now on
            pass
        if env.bus.inbound_tap == self._inbound:
            env.bus.inbound_tap = None
        if env._recording is self:
            env._recording = None
        self._stopped.set()
        self._writer_thread.join()
        failed = self._bag.close()  # the child writes metadata.yaml
        if self._error is not None:
            raise OSError(f"the recording to {self.path} failed: {self._error}") from self._error
        if failed is not None:
            raise OSError(f"the recording to {self.path} failed: {failed}")

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<Recording {self.path} {'stopped' if self._closed else 'recording'}>"


def _pickles(function: Any) -> bool:
    """Whether `function` pickles by reference (a module-level function does; a closure not)."""
    try:
        pickle.dumps(function)
    except Exception:
        return False
    return True


def _plain(value: Any) -> Any:
    """A call's argument as the value encoding takes it (mappings as dicts, tuples kept)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "to_bytes") and type(value).__name__ == "SimState":
        return value.to_bytes()
    return value


# -- reading ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _StateRecord:
    step: int
    seq: int  # -1: a periodic state, taken at the end of step `step`, before that boundary's calls
    time: float
    state: Any


class RecordingFile:
    """A bag that `env.record()` wrote, read with rosbags (`mjfast.open_recording(path)`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        conversions, types, rosbag2 = _ros2()
        self.path = Path(os.fspath(path))
        if not self.path.exists():
            raise FileNotFoundError(f"recording not found: {self.path}")
        if not self.path.is_dir() or not (self.path / "metadata.yaml").is_file():
            raise ValueError(f"{self.path} is not a rosbag2 bag (expected a directory with "
                             f"metadata.yaml and an MCAP file, as env.record() writes)")
        self._types, self._conversions = types, conversions
        self._rosbag2 = rosbag2
        self._messages: dict[str, list[tuple[int, bytes]]] = {}
        self._types_of: dict[str, str] = {}
        try:
            # rosbag2's custom_data, from metadata.yaml itself (rosbags' reader keeps it in a
            # private part).
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            info = yaml.load((self.path / "metadata.yaml").read_text(), Loader=loader)
            bag_info = info["rosbag2_bagfile_information"]
            custom = bag_info.get("custom_data") or {}
            files = bag_info.get("relative_file_paths") or []
            if len(files) != 1 or not str(files[0]).endswith(".mcap"):
                raise ValueError(f"expected one MCAP file, the metadata lists {files}")
            # The MCAP file itself: rosbags' bag reader would parse metadata.yaml once more
            # with a pure-Python YAML parser, the MJCF text included (most of opening a bag).
            self._file = self.path / str(files[0])
            with rosbag2.Reader(self._file) as reader:  # reads the MCAP's summary and index
                for connection in reader.connections:
                    self._types_of[connection.topic] = connection.msgtype
                # What replay and env_at need, in the same pass (each open of a bag parses its
                # metadata again, the MJCF text included).
                own = [c for c in reader.connections if c.topic in (STATE_TOPIC, COMMANDS_TOPIC)]
                self._messages = {STATE_TOPIC: [], COMMANDS_TOPIC: []}
                if own:
                    for connection, timestamp, raw in reader.messages(connections=own):
                        self._messages[connection.topic].append((timestamp, raw))
        except Exception as error:
            raise ValueError(f"cannot read the bag {self.path}: {error} (is it complete? a "
                             f"recording is closed by stop() or env.close())") from None
        if custom.get("mjfast.format") != FORMAT:
            raise ValueError(f"{self.path} is a bag, but not one env.record() wrote (its "
                             f"metadata has no mjfast.format {FORMAT})")
        self.metadata: dict[str, str] = dict(custom)
        self.namespace = custom.get("mjfast.namespace", "/mujoco_server")
        self.params = json.loads(custom.get("mjfast.params", "{}"))
        self.state_every = int(custom.get("mjfast.state_every", "0"))
        self.state_period = float(custom.get("mjfast.state_period", "1.0"))
        self._states: list[_StateRecord] | None = None
        self._commands: list[dict[str, Any]] | None = None

    # -- messages -------------------------------------------------------------------------------

    def topics(self) -> dict[str, str]:
        """Topic -> ROS 2 type of everything in the bag, sorted."""
        return dict(sorted(self._types_of.items()))

    def messages(self, topic: str) -> list[tuple[float, Any]]:
        """(simulated time, message as a dict) of every message on `topic`, in recorded order."""
        if topic not in self._types_of:
            from mjfast.names import unknown

            raise KeyError(unknown("no topic", topic, sorted(self._types_of),
                                   after=" in the recording", exists="its topics"))
        ros_type = self._types_of[topic]
        return [(timestamp / 1e9,
                 self._conversions.to_dict(self._types.deserialize(raw, ros_type)))
                for timestamp, raw in self._raw(topic)]

    def _raw(self, topic: str) -> list[tuple[int, bytes]]:
        """(timestamp, CDR) of every message on `topic`, read on first use."""
        if topic not in self._messages:
            messages: list[tuple[int, bytes]] = []
            try:
                with self._rosbag2.Reader(self._file) as reader:
                    wanted = [c for c in reader.connections if c.topic == topic]
                    if wanted:
                        messages = [(timestamp, raw) for _, timestamp, raw
                                    in reader.messages(connections=wanted)]
            except Exception as error:
                raise ValueError(f"cannot read the bag {self.path}: {error} (is it complete? a "
                                 f"recording is closed by stop() or env.close())") from None
            self._messages[topic] = messages
        return self._messages[topic]

    # -- states and commands --------------------------------------------------------------------

    def _state_records(self) -> list[_StateRecord]:
        if self._states is None:
            state = _state_module()
            records = []
            for _, raw in self._raw(STATE_TOPIC):
                message = self._types.deserialize(raw, BYTES_TYPE)
                labels = {d.label: int(d.size) for d in message.layout.dim}
                decoded = state.SimState.from_bytes(bytes(message.data))
                records.append(_StateRecord(labels.get("step", 0), labels.get("seq", -1),
                                            decoded.time, decoded))
            records.sort(key=lambda r: (r.step, r.seq))
            self._states = records
        return self._states

    def states(self) -> list[Any]:
        """Every recorded SimState, in the order they were taken."""
        return [record.state for record in self._state_records()]

    def commands(self) -> list[dict[str, Any]]:
        """Every recorded command (`kind` control|call|publish, `step`, ...), in the order they
        took effect."""
        if self._commands is None:
            decode = _state_module().decode_value
            commands = []
            for timestamp, raw in self._raw(COMMANDS_TOPIC):
                message = self._types.deserialize(raw, BYTES_TYPE)
                entry = decode(bytes(message.data))
                entry["time"] = timestamp / 1e9
                commands.append(entry)
            commands.sort(key=_command_key)
            self._commands = commands
        return self._commands

    # -- envs -----------------------------------------------------------------------------------

    def make_env(self, **options: Any) -> Any:
        """A new env on the recorded model and parameters (not restored to any state)."""
        from mjfast.env import MujocoEnv

        meta = self.metadata
        path = meta.get("mjfast.model_path")
        model: Any
        if path and Path(path).is_file() and Path(path).read_text() == meta.get("mjfast.mjcf"):
            model = path  # the file itself: its includes and meshes resolve beside it
        elif "mjfast.mjcf" in meta:
            model = meta["mjfast.mjcf"]
        else:
            model = mujoco.MjModel.from_binary_path(_mjb_file(meta["mjfast.mjb"]))
        return MujocoEnv(model, params=self.params, namespace=self.namespace, **options)

    def env_at(self, time: float) -> Any:
        """A new env on the recorded model and parameters, restored at the last full state at or
        before `time`, then stepped with the recorded commands up to `time` (the last step
        boundary at or before it)."""
        records = self._state_records()
        if not records:
            raise ValueError(f"{self.path} holds no state")
        first = records[0]
        if float(time) < first.time:
            raise ValueError(f"time {time!r} is before the recording's first state "
                             f"({first.time!r})")
        full = [r for r in records if r.seq >= 0 or r is first or not first.state.plugins]
        start = first
        for record in full:
            if record.time <= time and record.step >= start.step:
                start = record
        env = self.make_env()
        try:
            _Replayer(self, env, start).run_until_time(float(time))
        except BaseException:
            env.close()
            raise
        return env

    def __repr__(self) -> str:
        return f"<RecordingFile {self.path} topics={len(self._types_of)}>"


def _mjb_file(encoded: str) -> str:
    import tempfile

    handle, name = tempfile.mkstemp(suffix=".mjb")
    with os.fdopen(handle, "wb") as out:
        out.write(base64.b64decode(encoded))
    return name


def open_recording(path: str | os.PathLike[str]) -> RecordingFile:
    """The recording at `path` (SPEC §20): topics(), messages(topic), states(), env_at(time)."""
    return RecordingFile(path)


# -- replay -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayResult:
    """What a replay compared: `states` matched; `first_difference` is the time of the first
    state that differs (None: all matched)."""

    states: int
    first_difference: float | None
    detail: str = ""


class _Replayer:
    """Re-simulates a recording on `env` from one of its states: every command applied at the
    step boundary where it took effect, every state to check compared where it was taken.

    Order at one boundary (items keyed (step, phase, seq)): the periodic state taken at the end
    of the step that reached it (phase 0), then the calls and publishes made there and the full
    states taken after them (phase 1, in recorded order), then the control commands the next step
    applied (phase 2)."""

    def __init__(self, recording: RecordingFile, env: Any, start: _StateRecord) -> None:
        self.recording, self.env, self.start = recording, env, start
        _state_module().restore(env._core, start.state)
        self.step = start.step  # steps since the recording's start
        self.start_key = _state_key(start)
        self.commands = [c for c in recording.commands() if _command_key(c) > self.start_key]

    def _advance(self, steps: int) -> None:
        if steps > 0:
            self.env.step(steps)
            self.step += steps

    def _apply(self, command: Mapping[str, Any]) -> None:
        env, kind = self.env, command["kind"]
        if kind == "control":
            data = env.data
            for name, values in command["fields"].items():
                getattr(data, name).reshape(-1)[:] = values
        elif kind == "publish":
            env.bus.publish(command["topic"], command["message"])
        elif kind == "call":
            name, args = command["name"], dict(command["args"])
            if name not in _CALLS:
                raise ValueError(f"the recording holds an unknown call {name!r}")
            if name == "set_state":
                args["state"] = _state_module().SimState.from_bytes(args["state"])
            getattr(env, name)(**args)

    def _steps_within(self, time: float) -> int:
        """How many steps from here keep simulated time at or before `time` (exact: each step
        adds the timestep to time, as this counts)."""
        data, dt = self.env.data, float(self.env.model.opt.timestep)
        now, count = float(data.time), 0
        bulk = int((time - now) / dt) - 2
        if bulk > 0:
            return bulk  # the caller asks again for the rest
        while now + dt <= time:
            now += dt
            count += 1
        return count

    def run_until_time(self, time: float) -> None:
        tap = _core.StepRecorder(1, 0, 0.0, replaying=True)  # takes no state: drops staging
        tap.attach(self.env._core)
        try:
            self._run_until_time(time)
        finally:
            _core.StepRecorder.detach(self.env._core)

    def _run_until_time(self, time: float) -> None:
        for command in self.commands:
            target = int(command["step"])
            while self.step < target:
                n = min(target - self.step, self._steps_within(time))
                if n == 0:
                    return
                self._advance(n)
            if self._steps_within(time) == 0:
                return  # the last boundary at or before `time`: what a state taken there holds
            self._apply(command)
        while (n := self._steps_within(time)) > 0:
            self._advance(n)

    def run_checked(self, states: Sequence[_StateRecord], on_chunk: Any = None,
                    check: bool = True) -> ReplayResult:
        env, state_module = self.env, _state_module()
        items: list[tuple[tuple[int, int, int], str, Any]] = [
            (_command_key(c), "command", c) for c in self.commands]
        items += [(_state_key(r), "state", r) for r in states if _state_key(r) > self.start_key]
        items.sort(key=lambda item: item[0])
        tap = _core.StepRecorder(_RING_CAPACITY, self.recording.state_every,
                                 self.recording.state_period, replaying=True)
        tap.attach(env._core)
        taken: dict[int, tuple[int, bytes]] = {}
        matched = 1  # the state replay starts from
        try:
            for key, kind, item in items:
                while self.step < key[0]:
                    n = key[0] - self.step
                    if on_chunk is not None:
                        n = max(1, min(n, on_chunk()))
                    self._advance(n)
                    for entry in tap.drain():
                        if entry[0] == "state":
                            taken[int(entry[1]) + self.start.step] = (int(entry[2]), entry[6])
                if kind == "command":
                    self._apply(item)
                    continue
                if not check:
                    continue
                expected = item.state
                if item.seq < 0:
                    got = taken.pop(item.step, None)
                    same = got is not None and got[0] == expected.step_count and got[1] == (
                        expected.physics.astype("<f8", copy=False).tobytes())
                else:
                    same = state_module.capture(env._core) == expected
                if not same:
                    return ReplayResult(matched, item.time, f"the state at step {item.step} "
                                                            f"(time {item.time!r}) differs")
                matched += 1
        finally:
            _core.StepRecorder.detach(env._core)
        return ReplayResult(matched, None)


def _command_key(command: Mapping[str, Any]) -> tuple[int, int, int]:
    return (int(command["step"]), 2 if command["kind"] == "control" else 1, int(command["seq"]))


def _state_key(record: _StateRecord) -> tuple[int, int, int]:
    return (record.step, 0, 0) if record.seq < 0 else (record.step, 1, record.seq)


def replay(path: str | os.PathLike[str], *, check: bool = False, view: bool = False,
           realtime: float | None = None) -> ReplayResult:
    """Re-simulates the recording at `path` from its first state with its recorded commands
    (SPEC §20). `check`: every recorded state is compared bit for bit (the result says which
    differs first). `view`: MuJoCo's viewer shows it; `realtime`: paced at that factor."""
    recording = open_recording(path)
    records = recording._state_records()
    if not records:
        raise ValueError(f"{recording.path} holds no state")
    env = recording.make_env()
    viewer = None
    try:
        replayer = _Replayer(recording, env, records[0])
        if view:
            viewer = env.launch_viewer()
        pace = _Pacer(env, realtime) if realtime is not None else None
        return replayer.run_checked(records, on_chunk=pace.chunk if pace is not None else None,
                                    check=check)
    finally:
        if viewer is not None:
            with contextlib.suppress(Exception):
                viewer.close()
        env.close()


class _Pacer:
    """Steps in chunks of ~10 ms of wall time, each waiting until simulated time is due at
    `factor` x real time."""

    def __init__(self, env: Any, factor: float) -> None:
        self.env, self.factor = env, float(factor)
        self.started = wall_time.perf_counter()
        self.sim_start = float(env.data.time)
        self.dt = float(env.model.opt.timestep)

    def chunk(self) -> int:
        due = self.started + (float(self.env.data.time) - self.sim_start) / self.factor
        delay = due - wall_time.perf_counter()
        if delay > 0:
            wall_time.sleep(delay)
        return max(1, int(0.01 * self.factor / self.dt))
