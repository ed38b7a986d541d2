"""Reading a recording (SPEC §20): `open_recording(path)` / `RecordingFile`, a bag that
`env.record()` wrote, read with rosbags: its topics and messages, its states and commands in the
order they took effect, new envs on the recorded model (`make_env`, `env_at`), and `replay(path)`:
the recording re-simulated from its first state, checked, viewed or paced.

It does not own the bag's layout (`mjfast.interop.record.layout`), the writing
(`mjfast.interop.record.recorder`) nor the re-simulation itself (`mjfast.interop.record.replay`'s
`Replayer`, which `env_at` and `replay` run). Needs the extra mjfast[ros2].
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import numbers
import os
import time as wall_time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from mjfast.interop.record.layout import (
    BYTES_TYPE,
    CALLS,
    COMMANDS_TOPIC,
    FORMAT,
    STATE_TOPIC,
    command_key,
    ros2,
    state_module,
)
from mjfast.interop.record.replay import Replayer, ReplayResult

__all__ = ["RecordingFile", "StateRecord", "open_recording", "replay"]


@dataclass(frozen=True)
class StateRecord:
    """A recorded state with the labels that place it among the recorded commands."""

    step: int
    seq: int  # -1: a periodic state, taken at the end of step `step`, before that boundary's calls
    time: float
    state: Any

    @property
    def key(self) -> tuple[int, int, int]:
        """Its place in the recording's order, comparable with `command_key`'s."""
        return (self.step, 0, 0) if self.seq < 0 else (self.step, 1, self.seq)


class RecordingFile:
    """A bag that `env.record()` wrote, read with rosbags (`mjfast.open_recording(path)`).

    Everything replay and `env_at` use is read and checked when it opens (the metadata, every
    state and every command): a damaged or hand-edited bag is one ValueError naming the file and
    what is wrong, raised here, never an error from deeper down later."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        conversions, types, rosbag2 = ros2()
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
            custom = self._read_metadata()
            self._read_file()
            self._read_custom(custom)
            self._states = self._read_states()
            self._commands = self._read_commands()
        except _Damaged as damage:
            raise self._error(str(damage)) from None

    def _error(self, what: str) -> ValueError:
        return ValueError(f"cannot read the bag {self.path}: {what}")

    # -- what opening reads and checks (each raises _Damaged saying what is wrong) --------------

    def _read_metadata(self) -> dict[str, str]:
        """metadata.yaml: the MCAP file it names (inside the bag) and rosbag2's custom_data."""
        try:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            info = yaml.load((self.path / "metadata.yaml").read_text(), Loader=loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise _Damaged(f"its metadata.yaml does not read as YAML: {error}") from None
        bag_info = info.get("rosbag2_bagfile_information") if isinstance(info, dict) else None
        _expect(isinstance(bag_info, dict), "its metadata.yaml has no "
                                            "rosbag2_bagfile_information mapping")
        # rosbag2's custom_data, from metadata.yaml itself (rosbags' reader keeps it in a
        # private part).
        custom = bag_info.get("custom_data") or {}
        _expect(isinstance(custom, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in custom.items()),
            f"its custom_data must map names to strings, got {_short(custom)}")
        files = bag_info.get("relative_file_paths")
        _expect(isinstance(files, list) and len(files) == 1 and isinstance(files[0], str)
                and files[0].endswith(".mcap"),
                f"expected one MCAP file in relative_file_paths, got {_short(files)}")
        name = Path(files[0])
        _expect(not name.is_absolute() and name.name == files[0] and name.name not in (".", ".."),
                f"relative_file_paths must name a file inside the bag's directory, got "
                f"{files[0]!r}")
        if custom.get("mjfast.format") != FORMAT:
            raise _Damaged(f"it is a bag, but not one env.record() wrote (its metadata has no "
                           f"mjfast.format {FORMAT})")
        # The MCAP file itself: rosbags' bag reader would parse metadata.yaml once more with a
        # pure-Python YAML parser, the MJCF text included (most of opening a bag).
        self._file = self.path / name
        return custom

    def _read_file(self) -> None:
        """The MCAP file's topics, and the states and commands (what replay and env_at need) in
        the same pass."""
        try:
            with self._rosbag2.Reader(self._file) as reader:  # the MCAP's summary and index
                for connection in reader.connections:
                    self._types_of[connection.topic] = connection.msgtype
                own = [c for c in reader.connections if c.topic in (STATE_TOPIC, COMMANDS_TOPIC)]
                self._messages = {STATE_TOPIC: [], COMMANDS_TOPIC: []}
                if own:
                    for connection, timestamp, raw in reader.messages(connections=own):
                        self._messages[connection.topic].append((timestamp, raw))
        except Exception as error:
            raise _Damaged(f"{error} (is it complete? a recording is closed by stop() or "
                           f"env.close())") from None
        for topic in (STATE_TOPIC, COMMANDS_TOPIC):
            _expect(self._types_of.get(topic, BYTES_TYPE) == BYTES_TYPE,
                    f"{topic} holds {self._types_of.get(topic)}, not {BYTES_TYPE}")

    def _read_custom(self, custom: dict[str, str]) -> None:
        self.metadata: dict[str, str] = dict(custom)
        _expect("mjfast.mjcf" in custom or "mjfast.mjb" in custom,
                "its metadata holds no model (mjfast.mjcf or mjfast.mjb)")
        self.namespace = custom.get("mjfast.namespace", "/mujoco_server")
        try:
            self.params = json.loads(custom.get("mjfast.params", "{}"))
        except ValueError as error:
            raise _Damaged(f"its mjfast.params is not JSON: {error}") from None
        _expect(isinstance(self.params, dict),
                f"its mjfast.params must be a JSON object, got {_short(self.params)}")
        self.state_every = _number(custom, "mjfast.state_every", "0", int)
        self.state_period = _number(custom, "mjfast.state_period", "1.0", float)
        self._log_offset = _number(custom, "mjfast.log_time_offset_ns", "0", int, negative=True)

    def _read_states(self) -> list[StateRecord]:
        state = state_module()
        records = []
        for timestamp, raw in self._messages[STATE_TOPIC]:
            where = f"the state logged at {self._time(timestamp)!r} s"
            message = self._deserialize(raw, BYTES_TYPE, where)
            labels = {d.label: int(d.size) for d in message.layout.dim}
            try:
                decoded = state.SimState.from_bytes(bytes(message.data))
            except ValueError as error:
                raise _Damaged(f"{where} is not a SimState: {error}") from None
            step, seq = labels.get("step", 0), labels.get("seq", -1)
            _expect(step >= 0 and seq >= -1 and math.isfinite(decoded.time),
                    f"{where} has a bad label or time (step {step}, seq {seq}, "
                    f"time {decoded.time!r})")
            records.append(StateRecord(step, seq, decoded.time, decoded))
        _expect(bool(records), "it holds no state")
        records.sort(key=lambda r: (r.step, r.seq))
        return records

    def _read_commands(self) -> list[dict[str, Any]]:
        decode = state_module().decode_value
        commands = []
        for timestamp, raw in self._messages[COMMANDS_TOPIC]:
            where = f"the command logged at {self._time(timestamp)!r} s"
            message = self._deserialize(raw, BYTES_TYPE, where)
            try:
                entry = decode(bytes(message.data))
            except ValueError as error:
                raise _Damaged(f"{where} does not decode: {error}") from None
            _check_command(entry, where)
            entry["time"] = self._time(timestamp)
            commands.append(entry)
        commands.sort(key=command_key)
        return commands

    def _deserialize(self, raw: bytes, ros_type: str, where: str) -> Any:
        try:
            return self._types.deserialize(raw, ros_type)
        except Exception as error:  # rosbags' SerdeError, or an index past the end
            raise _Damaged(f"{where} is not a {ros_type} in CDR: {error}") from None

    def _time(self, timestamp: int) -> float:
        """A log time as the simulated time it stands for."""
        return (timestamp - self._log_offset) / 1e9

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
        try:
            return [(self._time(timestamp), self._conversions.to_dict(self._deserialize(
                raw, ros_type, f"a message on {topic} logged at {self._time(timestamp)!r} s")))
                for timestamp, raw in self._raw(topic)]
        except _Damaged as damage:
            raise self._error(str(damage)) from None

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
                raise self._error(f"{error} (is it complete? a recording is closed by stop() "
                                  f"or env.close())") from None
            self._messages[topic] = messages
        return self._messages[topic]

    # -- states and commands --------------------------------------------------------------------

    def state_records(self) -> list[StateRecord]:
        """Every recorded state with its step labels, in the recording's order (replay's)."""
        return self._states

    def states(self) -> list[Any]:
        """Every recorded SimState, in the order they were taken."""
        return [record.state for record in self._states]

    def commands(self) -> list[dict[str, Any]]:
        """Every recorded command (`kind` control|call|publish, `step`, ...), in the order they
        took effect."""
        return self._commands

    # -- envs -----------------------------------------------------------------------------------

    def make_env(self, **options: Any) -> Any:
        """A new env on the recorded model and parameters (not restored to any state)."""
        from mjfast.sim.env import MujocoEnv

        meta = self.metadata
        path = meta.get("mjfast.model_path")
        model: Any
        try:
            if path and Path(path).is_file() and Path(path).read_text() == meta.get(
                    "mjfast.mjcf"):
                model = path  # the file itself: its includes and meshes resolve beside it
            elif "mjfast.mjcf" in meta:
                model = meta["mjfast.mjcf"]
            else:
                model = mujoco.MjModel.from_binary_path(_mjb_file(meta["mjfast.mjb"]))
            return MujocoEnv(model, params=self.params, namespace=self.namespace, **options)
        except ValueError as error:  # a model that does not compile or load (base64 included)
            raise self._error(f"its model does not load: {error}") from None

    def env_at(self, time: float) -> Any:
        """A new env on the recorded model and parameters, restored at the last full state at or
        before `time`, then stepped with the recorded commands up to `time` (the last step
        boundary at or before it). ValueError for a time that is not finite or outside the
        recording's span."""
        if isinstance(time, bool) or not isinstance(time, numbers.Real):
            raise TypeError(f"env_at: time must be a number of seconds, got {time!r}")
        time = float(time)
        if not math.isfinite(time):
            raise ValueError(f"env_at: time must be finite, got {time!r}")
        records = self._states
        first = records[0]
        end = max(record.time for record in records)
        if not first.time <= time <= end:
            raise ValueError(f"env_at: time {time!r} is outside the recording's span "
                             f"[{first.time!r} s, {end!r} s]")
        full = [r for r in records if r.seq >= 0 or r is first or not first.state.plugins]
        start = first
        for record in full:
            if record.time <= time and record.step >= start.step:
                start = record
        env = self.make_env()
        try:
            Replayer(self, env, start).run_until_time(time)
        except BaseException:
            env.close()
            raise
        return env

    def __repr__(self) -> str:
        return f"<RecordingFile {self.path} topics={len(self._types_of)}>"


class _Damaged(Exception):
    """What is wrong with a bag (RecordingFile says it as one ValueError naming the file)."""


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise _Damaged(what)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _number(custom: Mapping[str, str], key: str, default: str, kind: type,
            negative: bool = False) -> Any:
    """A number in the custom metadata: finite, and >= 0 unless `negative`."""
    text = custom.get(key, default)
    try:
        value = kind(text)
    except ValueError:
        raise _Damaged(f"its {key} must be {'an integer' if kind is int else 'a number'}, "
                       f"got {_short(text)}") from None
    _expect(math.isfinite(value) and (negative or value >= 0),
            f"its {key} must be {'finite' if negative else 'finite and >= 0'}, got {text!r}")
    return value


def _check_command(entry: Any, where: str) -> None:
    """A recorded command's structure (what replay reads of it)."""
    _expect(isinstance(entry, dict), f"{where} is not a mapping: {_short(entry)}")
    kind, step, seq = entry.get("kind"), entry.get("step"), entry.get("seq")
    _expect(kind in ("control", "call", "publish"),
            f"{where} has kind {_short(kind)}, not control, call or publish")
    _expect(isinstance(step, int) and not isinstance(step, bool) and step >= 0,
            f"{where} has no step (an integer >= 0): {_short(step)}")
    _expect(isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0,
            f"{where} has no seq (an integer >= 0): {_short(seq)}")
    if kind == "control":
        fields = entry.get("fields")
        _expect(isinstance(fields, dict) and all(
            isinstance(name, str) and isinstance(values, np.ndarray)
            and values.dtype == np.float64 for name, values in fields.items()),
            f"{where} (a control write) has no fields mapping names to float64 arrays")
    elif kind == "call":
        _expect(entry.get("name") in CALLS and isinstance(entry.get("args"), dict),
                f"{where} is a call of {_short(entry.get('name'))} with args "
                f"{_short(entry.get('args'))}; a recording holds calls of {', '.join(CALLS)}")
    else:
        _expect(isinstance(entry.get("topic"), str) and "message" in entry,
                f"{where} (a publish) has no topic and message")


def _mjb_file(encoded: str) -> str:
    import tempfile

    handle, name = tempfile.mkstemp(suffix=".mjb")
    with os.fdopen(handle, "wb") as out:
        out.write(base64.b64decode(encoded))
    return name


def open_recording(path: str | os.PathLike[str]) -> RecordingFile:
    """The recording at `path` (SPEC §20): topics(), messages(topic), states(), env_at(time)."""
    return RecordingFile(path)


def replay(path: str | os.PathLike[str], *, check: bool = False, view: bool = False,
           realtime: float | None = None) -> ReplayResult:
    """Re-simulates the recording at `path` from its first state with its recorded commands
    (SPEC §20). `check`: every recorded state is compared bit for bit (the result says which
    differs first). `view`: MuJoCo's viewer shows it; `realtime`: paced at that factor."""
    recording = open_recording(path)
    records = recording.state_records()
    env = recording.make_env()
    viewer = None
    try:
        replayer = Replayer(recording, env, records[0])
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
