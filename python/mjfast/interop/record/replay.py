"""Replay (SPEC §20): `Replayer` re-simulates a recording from one of its states with its
recorded commands, each applied at the step boundary where it took effect, and compares the
recorded states bit for bit; `RecordingFile.env_at` replays up to a time, and
`mjfast.interop.record.reader.replay(path)` from the first state, checked, viewed or paced.

It does not own the bag (`mjfast.interop.record.reader` reads it) nor the state format
(`mjfast.model.state`); what it does to the env beyond its public API goes through a `RecordingTap`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mjfast._core_loader import _core
from mjfast.errors import MjfastError
from mjfast.interop.record.layout import RING_CAPACITY, command_key
from mjfast.sim.calls import sim_call
from mjfast.sim.recording_tap import RecordingTap

if TYPE_CHECKING:
    from mjfast.interop.record.reader import RecordingFile, StateRecord

__all__ = ["ReplayResult", "Replayer"]

# What a recorded control write may set (what the stepping thread copies).
_CONTROL_FIELDS: tuple[str, ...] = _core.CONTROL_COMMAND_FIELDS

@dataclass(frozen=True)
class ReplayResult:
    """What a replay compared: `states` matched; `first_difference` is the time of the first
    state that differs (None: all matched)."""

    states: int
    first_difference: float | None
    detail: str = ""


class Replayer:
    """Re-simulates a recording on `env` from one of its states: every command applied at the
    step boundary where it took effect, every state to check compared where it was taken.

    Order at one boundary (items keyed (step, phase, seq)): the periodic state taken at the end
    of the step that reached it (phase 0), then the calls and publishes made there and the full
    states taken after them (phase 1, in recorded order), then the control commands the next step
    applied (phase 2)."""

    def __init__(self, recording: RecordingFile, env: Any, start: StateRecord) -> None:
        self.recording, self.env, self.start = recording, env, start
        self.tap = RecordingTap.of(env)
        # Replay never runs past the recording's last state: later commands are dropped.
        self.end = recording.state_records()[-1]
        self.start_key = start.key
        commands = recording.commands()
        self.commands = [c for c in commands if self.start_key < command_key(c) <= self.end.key]
        # A state taken after a reload to another model is of that model: the env goes there
        # first (a reload without a model reloads the one in use, the last one named).
        reloads = [c for c in commands if command_key(c) < self.start_key and c["kind"] == "call"
                   and c["name"] == "reload" and c["args"].get("model") is not None]
        if reloads:
            self._apply(reloads[-1])
        env.set_state(start.state)  # (an env replay made records nothing)
        self.step = start.step  # steps since the recording's start

    def _advance(self, steps: int) -> None:
        if steps > 0:
            self.env.step(steps)
            self.step += steps

    def _apply(self, command: Mapping[str, Any]) -> None:
        """Applies a recorded command (its structure was checked when the bag was read); one
        that does not fit the env (a hand-edited field, size or argument) is the bag's
        ValueError."""
        env, kind = self.env, command["kind"]
        try:
            if kind == "control":
                data = env.data
                for name, values in command["fields"].items():
                    field = getattr(data, name, None) if name in _CONTROL_FIELDS else None
                    if field is None or field.size != values.size:
                        raise ValueError(f"no control field {name!r} of {values.size} values")
                    field.reshape(-1)[:] = values
            elif kind == "publish":
                env.bus.publish(command["topic"], command["message"])
            else:
                sim_call(command["name"]).apply_recorded(env, command["args"])
        except (TypeError, ValueError, KeyError, MjfastError) as error:
            raise ValueError(f"cannot read the bag {self.recording.path}: its {kind} command "
                             f"at step {command['step']} does not apply: {error}") from None

    def _steps_within(self, time: float) -> int:
        """How many steps from here keep simulated time at or before `time` (exact: each step
        adds the timestep to time, as this counts)."""
        data, dt = self.env.data, float(self.env.model.opt.timestep)
        now, count = float(data.time), 0
        bulk = min(int((time - now) / dt) - 2, self.end.step - self.step)
        if bulk > 0:
            return bulk  # the caller asks again for the rest
        while now + dt <= time:
            now += dt
            count += 1
        return min(count, self.end.step - self.step)

    def run_until_time(self, time: float) -> None:
        tap = _core.StepRecorder(1, 0, 0.0, replaying=True)  # takes no state: drops staging
        self.tap.attach(tap)
        try:
            self._run_until_time(time)
        finally:
            self.tap.detach()

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

    def run_checked(self, states: Sequence[StateRecord], on_chunk: Any = None,
                    check: bool = True) -> ReplayResult:
        env = self.env
        items: list[tuple[tuple[int, int, int], str, Any]] = [
            (command_key(c), "command", c) for c in self.commands]
        items += [(r.key, "state", r) for r in states if r.key > self.start_key]
        items.sort(key=lambda item: item[0])
        tap = _core.StepRecorder(RING_CAPACITY, self.recording.state_every,
                                 self.recording.state_period, replaying=True)
        self.tap.attach(tap)
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
                    same = env.get_state() == expected
                if not same:
                    return ReplayResult(matched, item.time, f"the state at step {item.step} "
                                                            f"(time {item.time!r}) differs")
                matched += 1
        finally:
            self.tap.detach()
        return ReplayResult(matched, None)
