"""Recording (SPEC §20): `env.record()` writes a rosbag2 bag (MCAP, CDR) through rosbags' writer
in a child process (`mjfast.interop.record.writer`): the recorder's routes through the conversion
table, its writer thread, and the handle. The bag's layout is `mjfast.interop.record.layout`'s;
reading a bag is `mjfast.interop.record.reader`'s and replaying one
`mjfast.interop.record.replay`'s, both re-exported here.

It does not own the state format (`mjfast.model.state`), the conversions, nor what the stepping
thread copies (`_core.StepRecorder`); what it does to the env beyond its public API goes through the
`RecordingTap` the env hands it. Needs the extra mjfast[ros2] (rosbags), imported on first use.
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
from collections.abc import Iterable, Mapping
from pathlib import Path
from time import time_ns
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.bus.handoff import HandedOffTap
from mjfast.bus.params import resolve_name
from mjfast.errors import LogicError
from mjfast.interop.record.layout import (
    BYTES_TYPE,
    CLOCK_TOPIC,
    COMMANDS_TOPIC,
    FORMAT,
    RING_CAPACITY,
    STATE_TOPIC,
    bytes_message,
    ros2,
    state_message,
    state_module,
)
from mjfast.interop.record.reader import RecordingFile, open_recording, replay
from mjfast.interop.record.replay import ReplayResult
from mjfast.interop.record.writer import (
    BagWriterProcess,
    batch_items,
    pack_message,
    unpack_message,
)
from mjfast.sim.calls import sim_call

if TYPE_CHECKING:
    from mjfast.sim.config import ModelSource
    from mjfast.sim.recording_tap import RecordingTap

__all__ = ["CLOCK_TOPIC", "COMMANDS_TOPIC", "STATE_TOPIC", "Recording", "RecordingFile",
           "ReplayResult", "open_recording", "replay"]

# Default state schedule: one every simulated second (and the first).
DEFAULT_STATE_PERIOD_S = 1.0
# The bounded rings between the threads that record and the writer thread (the bus messages'
# here, the states' and commands' in the core's StepRecorder): nothing is dropped; when the
# writer falls behind, the publisher (the stepping thread, for a plugin's publish) waits for it,
# and the waits are counted (statistics()["waits"]).
_MESSAGE_RING = 1 << 16
_WRITER_PERIOD_S = 0.02
# After a batch smaller than _TAKE_LIMIT the writer lets messages gather this long: one send
# to the bag's process per batch, not per message.
_BATCH_PAUSE_S = 0.02
_TAKE_LIMIT = 1024

_log = logging.getLogger("mjfast.recording")


def _model_text(source: ModelSource) -> dict[str, str]:
    """The model in the bag's metadata: the MJCF text (and the file's path, for its assets), or an
    MJB (base64) for an env made from a mujoco.MjModel."""
    if source.xml is not None:
        return {"mjfast.mjcf": source.xml}
    if source.path is not None:
        return {"mjfast.mjcf": source.path.read_text(), "mjfast.model_path": str(source.path)}
    model = source.model
    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return {"mjfast.mjb": base64.b64encode(buffer.tobytes()).decode("ascii")}


def _jsonable(value: Any) -> Any:
    from mjfast.sim.services import jsonable

    return jsonable(value)


class Recording:
    """A recording in progress (`env.record()`); `stop()` ends it and closes the bag (also done by
    `env.close()`). `path` is the bag's directory; `statistics()` counts what was written and what
    was dropped."""

    def __init__(self) -> None:
        raise TypeError("a Recording comes from env.record(path)")

    @classmethod
    def _start(cls, env: Any, tap: RecordingTap, path: str | os.PathLike[str],
               topics: Iterable[str] | None, state_every: int | None) -> Recording:
        """`tap`: what the recording does to `env` beyond its public API (env.record() hands
        it)."""
        conversions, types, _ = ros2()
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
        self._env, self._env_tap = env, tap
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
        self._wanted = topics
        self._conversions, self._types = conversions, types
        # The routes of the env's route table that this recording writes (bus topic -> its
        # routes; also the names not absolute that a publish used), and the latched message
        # last written on each transient-local ROS 2 topic.
        self._table: Any = None
        self._routes: dict[str, tuple[Any, ...]] = {}
        # Every route table's routes (a topic several declare: the newest table's).
        self._table_routes: dict[str, tuple[Any, ...]] = {}
        self._latched_written: dict[str, list[Any]] = {}
        self._shippable: dict[Any, bool] = {}  # converter -> whether the bag's process runs it
        if tap.recording is not None:
            raise LogicError(f"the env is recording to {tap.recording.path} already: stop() "
                             f"that recording first")
        self._rebuild_routes(write_latched=False)
        if topics is not None:
            known = sorted(self._table.publishers)
            missing = [t for t in topics if t not in known]
            if missing:
                raise ValueError(f"record(topics=...): no bridged topic {missing[0]!r}; the "
                                 f"env's bridged topics: {known}")
        # The bag is written by a child process (mjfast.interop.record.writer), started before
        # stepping is held (it takes a moment); it creates the directory now (refused if it exists:
        # checked above) and writes metadata.yaml at stop().
        # Log times: the wall clock at the start plus the simulated time since (the messages
        # keep simulated time); readers subtract the offset, which the metadata holds.
        self._log_offset = time_ns() - round(float(env.data.time) * 1e9)
        try:
            self._bag = BagWriterProcess(str(target), self._metadata(env, tap.model_source),
                                         CLOCK_TOPIC not in self._all_topics(), self._log_offset)
        except OSError:  # (a full disk): what the child made of the new directory goes again
            shutil.rmtree(target, ignore_errors=True)
            raise
        try:
            with env.hold_stepping("record", defer_interrupts=True):
                if tap.recording is not None:  # started meanwhile
                    raise LogicError(f"the env is recording to {tap.recording.path} already: "
                                     f"stop() that recording first")
                first = env.get_state()
                self._identities[env.model_generation] = (first.model_signature,
                                                          first.model_description)
                self._batch: list[Any] = []  # items and blocks (writer.batch_items)
                self._recorder = _core.StepRecorder(RING_CAPACITY, self._state_every,
                                                    self._state_period, wait_when_full=True)
                self._write_state(first, first.time)
                tap.attach(self._recorder)
                # Every bus message from now on (and the latched ones, /tf_static, first),
                # handed to the writer thread with the simulated time of its publish.
                # (env.data read each time: a reload replaces it)
                self._bus_tap = HandedOffTap(env.bus, None, policy="wait", writer=False,
                                             capacity=_MESSAGE_RING,
                                             stamp=lambda: float(env.data.time),
                                             packed_route=self._packed_route,
                                             offset_ns=self._log_offset)
                env.bus.inbound_tap = self._inbound
                # Every applied state-changing call from now on, at its step boundary.
                self._call_listener = env.add_call_listener(self.call)
                tap.set_recording(self)
        except BaseException:
            # Nothing of this recording stays: the child made the directory, it goes again.
            if getattr(self, "_bus_tap", None) is not None:
                self._bus_tap.remove()  # (no writer would take what it holds)
            self._bag.close()
            shutil.rmtree(target, ignore_errors=True)
            raise
        self._writer_thread = threading.Thread(target=self._write_loop, daemon=True,
                                               name="mjfast-recording-writer")
        self._writer_thread.start()
        return self

    def _metadata(self, env: Any, source: ModelSource) -> dict[str, str]:
        from mjfast import __version__  # (the package is imported by now: no cycle)

        data = {"mjfast.format": FORMAT, "mjfast.version": __version__,
                "mujoco.version": mujoco.__version__, "mjfast.namespace": env.namespace,
                "mjfast.params": json.dumps(_jsonable(env.params.to_dict())),
                "mjfast.state_every": str(self._state_every),
                "mjfast.state_period": repr(self._state_period),
                "mjfast.log_time_offset_ns": str(self._log_offset)}
        data.update(_model_text(source))
        history = self._env_tap.entity_history()
        if history:  # the spawns and removals that made this world from its model (SPEC §25)
            data["mjfast.entities"] = json.dumps(_jsonable(history))
        return data

    # -- routes (the conversion table) ----------------------------------------------------------

    def _rebuild_routes(self, write_latched: bool = True) -> None:
        """The routes of the env's route table (`mjfast.interop.routes`, shared with the ROS 2
        bridge) that this recording writes. `write_latched`: the latched messages of its
        transient-local topics that were published before their plugin declared them (a
        /tf_static at load) are written now."""
        from mjfast.interop.routes import route_table  # needs rosbags, as the recorder does

        table = route_table(self._env)
        wanted = self._wanted
        routes = {source: tuple(route for route in source_routes
                                if wanted is None or route.topic in wanted)
                  for source, source_routes in table.outbound.items()}
        current = {source: found for source, found in routes.items() if found}
        # The topics whose every message goes one way (one route, not transient-local, a
        # converter the bag's process runs): (ROS topic, type, converter), for _flush's loop.
        self._direct = {source: (found[0].topic, found[0].ros_type, found[0].convert)
                        for source, found in current.items()
                        if len(found) == 1 and not found[0].transient_local
                        and self._shippable_converter(found[0].convert)}
        # A message handed over before a load replaced the plugins may be taken after it, and is
        # routed by the routes it was published under: a topic that the new plugins no longer
        # declare keeps its earlier routes (a /tf_static published as the recording started,
        # which a reload had made unknown before the writer took it, was never written).
        self._table_routes = {**self._table_routes, **current}
        self._routes = dict(self._table_routes)  # (and, by _record_message, resolved aliases)
        self._table = table
        # For the publishing thread (_packed_route), in one assignment: the table's declarations
        # and its direct topics together.
        self._packing = (table.declared, self._direct)
        if not write_latched:
            return
        for topic, message in self._env.bus.latched().items():
            found = tuple(route for route in self._routes.get(topic, ())
                          if route.transient_local and not self._written(route.topic, message))
            if found:
                self._write_routes(found, message, float(self._env.data.time))

    def _all_topics(self) -> set[str]:
        return {route.topic for found in self._routes.values() for route in found}

    # -- what the recording threads call --------------------------------------------------------

    def _packed_route(self, topic: str) -> Any:
        """On the publishing thread: the route of a message on `topic` that the core packs as it
        is handed over (a direct topic of the route table, while that table is the current
        plugins'), else None (the writer thread routes it)."""
        declared, direct = self._packing
        if self._env.plugin_topics is not declared:  # a load replaced the plugins
            return None
        return direct.get(topic)

    def _record_message(self, topic: str, message: Any, time: float) -> None:
        """A bus message the tap handed over (on the writer thread; the publisher's message is
        not written to after publishing, as for the bus's latest()), published at `time`."""
        if self._env.plugin_topics is not self._table.declared:  # a load replaced the plugins
            self._rebuild_routes()
        routes = self._routes.get(topic)
        if routes is None:
            try:
                resolved = resolve_name(topic)
            except (TypeError, ValueError):
                resolved = topic
            routes = self._routes[topic] = self._routes.get(resolved, ())
        if routes:
            self._write_routes(routes, message, time)

    def _write_routes(self, routes: tuple[Any, ...], message: Any, time: float) -> None:
        """`message` on each of its routes (on the writer thread), published at `time`."""
        for route in routes:
            if route.transient_local:
                if self._written(route.topic, message):
                    continue  # handed over again after a reload (call()), or written already
                self._latched_written.setdefault(route.topic, []).append(message)
            self._write_message(route, time, message)

    def _written(self, topic: str, message: Any) -> bool:
        """Whether this very message was written on the transient-local `topic` (one a topic
        holds per model generation)."""
        return any(written is message for written in self._latched_written.get(topic, ()))

    def _inbound(self, topic: str, message: Any, publish: Any) -> None:
        """A publish from outside the env (bus.inbound_tap): delivered at a step boundary, with
        stepping held, so that the step it takes effect at is the one recorded."""
        tap = self._env_tap
        try:
            tap.hold_steps()
        except Exception:  # closed meanwhile: as without a recording
            publish(topic, message)
            return
        try:
            if not self._closed:
                self.command("publish", topic=resolve_name(topic), message=message)
            publish(topic, message)
        finally:
            tap.release_steps()

    def command(self, kind: str, **fields: Any) -> None:
        """Records a call or a publish at the current step boundary (stepping held by the
        caller)."""
        if self._closed:
            return
        entry = {"kind": kind, "step": int(self._recorder.steps), "seq": next(self._sequence),
                 **fields}
        self._queue.append(("command", float(self._env.data.time), entry))

    def call(self, name: str, args: Mapping[str, Any]) -> None:
        """An env call that changed the simulation (stepping held by the caller)."""
        if name != "stop":
            self.command("call", name=name, args={k: _plain(v) for k, v in args.items()})
        if name == "stop" or sim_call(name).state_after:
            # The model (its identity) may have changed: a full state now, a point to restart at.
            state = self._env.get_state()
            self._identities[self._env.model_generation] = (state.model_signature,
                                                            state.model_description)
            self._queue.append(("state", state, int(self._recorder.steps), next(self._sequence)))
            # The latched messages the new plugins published while they loaded, before they had
            # declared their topics (a /tf_static): handed over again, now that they have, so
            # the writer thread routes them by this generation's declarations.
            if name != "stop":
                for topic, message in self._env.bus.latched().items():
                    self._bus_tap.hand_over(topic, message)

    # -- the writer thread ----------------------------------------------------------------------

    def _write_loop(self) -> None:
        # One thread converts (the table's converters are the plugins' own closures) and hands
        # batches to the bag writer process, so that the stepping thread only copies. The ROS 2
        # bridge converts and serialises on the publishing thread today; it could hand its
        # messages to a queue like this one and share this thread and that process.
        tap = self._bus_tap
        while not self._stopped.is_set():
            # Woken by the first bus message (or every _WRITER_PERIOD_S, for the states and
            # commands); the stepping thread waits only once the rings are full.
            messages = tap.take(_WRITER_PERIOD_S, _TAKE_LIMIT)
            self._flush(messages)
            if len(messages) < _TAKE_LIMIT:
                self._stopped.wait(_BATCH_PAUSE_S)
        while True:  # stopped: the tap is removed, what it still holds goes in
            messages = tap.take(0.0, _TAKE_LIMIT)
            self._flush(messages)
            if not messages:
                break

    def _flush(self, messages: list[tuple[str, Any, float]]) -> None:
        if self._bag.failed is not None:  # the bag was closed early (a full disk): dropped
            self._recorder.drain()
            self._queue.clear()
            return
        try:
            for kind, step, step_count, generation, time, _, values in self._recorder.drain():
                if kind == "commands":
                    self._write_command(time, {
                        "kind": "control", "step": int(step), "seq": next(self._sequence),
                        "fields": {name: np.frombuffer(raw, dtype=np.float64)
                                   for name, raw in values.items()}})
                else:
                    # Its parts: the bag's process makes the state's bytes (layout.state_message).
                    signature, description = self._identities.get(int(generation), ("", ""))
                    self._write(STATE_TOPIC, BYTES_TYPE, time, {
                        "physics": values, "step_count": int(step_count),
                        "signature": signature, "description": description,
                        "step": int(step), "seq": None}, state_message)
            # The messages on direct topics come packed by the core as they were handed over,
            # a block for each run of them (HandedOffTap's packed_route); the others in between
            # as they were published, in order.
            handed: list[tuple[str, Any, float]] = []
            for item in messages:
                if item[0] is None:
                    self._record_handed(handed)
                    handed = []
                    self._record_block(item[1], item[2], item[3])
                else:
                    handed.append(item)
            self._record_handed(handed)
            while self._queue:
                item = self._queue.popleft()
                if item[0] == "command":
                    self._write_command(item[1], item[2])
                else:
                    self._write_state(item[1], item[1].time, step=item[2], seq=item[3])
            batch, self._batch = self._batch, []
            try:
                self._bag.send(batch)
            except (pickle.PicklingError, TypeError, AttributeError):
                # A message type made at run time (rosbags cannot pickle it by name), or a
                # message part that does not pickle: converted and serialised here instead.
                self._bag.send([self._serialised_here(*item) for item in batch_items(batch)])
            if self._bag.failed is not None:  # said at once; stop() raises it
                _log.error("the recording to %s ended: %s", self.path, self._bag.failed)
        except Exception as error:  # a bug: the run goes on, the recording says so
            if self._error is None:
                self._error = error
                _log.error("the recording to %s failed: %s", self.path, error)
            self._queue.clear()

    def _record_block(self, routes: list[Any], counts: list[int], data: bytes) -> None:
        if data:
            self._batch.append((None, routes, data))  # one block (writer.batch_items)
            for route, count in zip(routes, counts, strict=True):
                self._counts[route[0]] += count

    def _record_handed(self, messages: list[tuple[str, Any, float]]) -> None:
        """Messages handed over as they were published: those of direct topics packed into the
        batch by the core in one call (published while a load replaced the plugins, before the
        routes were rebuilt), any other its routes' way."""
        if messages and self._env.plugin_topics is self._table.declared:
            block, messages = _core.pack_direct(messages, self._direct, self._log_offset)
            self._record_block(*block)
        for topic, message, time in messages:
            self._record_message(topic, message, time)

    def _log_time(self, time: float) -> int:
        # (never before the epoch: a log time is unsigned; _core.pack_direct makes the same)
        return max(0, self._log_offset + round(float(time) * 1e9))

    def _write(self, topic: str, ros_type: str, time: float, message: Any,
               convert: Any = None) -> None:
        self._batch.append((topic, ros_type, self._log_time(time), message, convert))
        self._counts[topic] += 1

    def _shippable_converter(self, convert: Any) -> bool:
        """Whether the bag's process can run `convert` (a module-level function, pickled by
        name), so that the bus message goes there packed."""
        shippable = self._shippable.get(convert)
        if shippable is None:
            shippable = self._shippable[convert] = _pickles(convert)
        return shippable

    def _write_message(self, route: Any, time: float, message: Any) -> None:
        convert = route.convert
        if self._shippable_converter(convert):
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

    def _serialised_here(self, topic: str, ros_type: str, stamp: int, message: Any,
                         convert: Any) -> tuple[str, str, int, Any, None]:
        if convert is not None:
            message = convert(unpack_message(message))
        if not isinstance(message, (bytes, bytearray)):
            message = bytes(self._types.serializer(ros_type)(message))
        return topic, ros_type, stamp, message, None

    def _write_command(self, time: float, entry: dict[str, Any]) -> None:
        encode = state_module().encode_value
        try:
            payload = encode(entry)
        except TypeError as error:  # a published message with a part that has no encoding
            self._counts["unrecordable_commands"] += 1
            _log.warning("a command cannot be recorded (replay will differ): %s", error)
            return
        self._write(COMMANDS_TOPIC, BYTES_TYPE, time, bytes_message(payload))

    def _write_state(self, state: Any, time: float, step: int = 0,
                     seq: int | None = None) -> None:
        # Each state goes with the step it was taken at and its order among the commands of that
        # step (layout.state_message, in the bag's process).
        self._write(STATE_TOPIC, BYTES_TYPE, time,
                    {"state": state.to_bytes(), "step": int(step), "seq": seq}, state_message)

    # -- the handle -----------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        """Messages written per topic, `dropped` and `unconvertible` entries, and `waits`
        (how often a publisher or the stepping thread waited for the writer)."""
        counts = dict(self._counts)
        counts["dropped"] = counts.get("dropped", 0) + int(self._recorder.dropped)
        counts["waits"] = int(self._recorder.waits) + self._bus_tap.statistics()["waits"]
        return counts

    @property
    def recording(self) -> bool:
        """False once stopped, or once its bag was closed early (a full disk)."""
        return not self._closed and self._bag.failed is None

    def stop(self) -> None:
        """Ends the recording at the current step boundary and closes the bag; idempotent. An
        error the writer met (a full disk) is raised here, after the bag is closed."""
        if self._closed:
            return
        env, tap = self._env, self._env_tap
        with contextlib.suppress(Exception):  # a closed env steps no more: nothing to add
            tap.hold_steps()  # a step boundary (re-entrant: env.close() may hold one)
            try:
                # The last state, where the recording ends (replay runs up to it).
                self.call("stop", {})
                tap.detach()
            finally:
                tap.release_steps()
        self._closed = True
        self._call_listener.remove()
        self._bus_tap.remove()
        if env.bus.inbound_tap == self._inbound:
            env.bus.inbound_tap = None
        if tap.recording is self:
            tap.set_recording(None)
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
