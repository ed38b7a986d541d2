"""Reading a recording (SPEC §20): `open_recording(path)` / `RecordingFile`, a bag that
`env.record()` wrote, read with rosbags: its topics and messages, its states and commands in the
order they took effect, and new envs on the recorded model (`make_env`, `env_at`).

It does not own the bag's layout (`mjfast._bag_layout`), the writing (`mjfast.recording`) nor
the re-simulation (`mjfast.replay`, which `env_at` uses). Needs the extra mjfast[ros2].
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import yaml

from mjfast._bag_layout import BYTES_TYPE, COMMANDS_TOPIC, FORMAT, STATE_TOPIC, ros2, state_module

__all__ = ["RecordingFile", "StateRecord", "command_key", "open_recording"]


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
    """A bag that `env.record()` wrote, read with rosbags (`mjfast.open_recording(path)`)."""

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
        self._states: list[StateRecord] | None = None
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

    def state_records(self) -> list[StateRecord]:
        """Every recorded state with its step labels, in the recording's order (replay's)."""
        if self._states is None:
            state = state_module()
            records = []
            for _, raw in self._raw(STATE_TOPIC):
                message = self._types.deserialize(raw, BYTES_TYPE)
                labels = {d.label: int(d.size) for d in message.layout.dim}
                decoded = state.SimState.from_bytes(bytes(message.data))
                records.append(StateRecord(labels.get("step", 0), labels.get("seq", -1),
                                            decoded.time, decoded))
            records.sort(key=lambda r: (r.step, r.seq))
            self._states = records
        return self._states

    def states(self) -> list[Any]:
        """Every recorded SimState, in the order they were taken."""
        return [record.state for record in self.state_records()]

    def commands(self) -> list[dict[str, Any]]:
        """Every recorded command (`kind` control|call|publish, `step`, ...), in the order they
        took effect."""
        if self._commands is None:
            decode = state_module().decode_value
            commands = []
            for timestamp, raw in self._raw(COMMANDS_TOPIC):
                message = self._types.deserialize(raw, BYTES_TYPE)
                entry = decode(bytes(message.data))
                entry["time"] = timestamp / 1e9
                commands.append(entry)
            commands.sort(key=command_key)
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
        records = self.state_records()
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
        from mjfast.replay import Replayer  # (replay reads bags through this module)

        env = self.make_env()
        try:
            Replayer(self, env, start).run_until_time(float(time))
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


def command_key(command: Mapping[str, Any]) -> tuple[int, int, int]:
    """A recorded command's place in the recording's order, comparable with `StateRecord.key`."""
    return (int(command["step"]), 2 if command["kind"] == "control" else 1, int(command["seq"]))
