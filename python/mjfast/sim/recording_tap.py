"""What a recorder or a replayer does to an env beyond its public API (SPEC §20), handed to it by
the env: the env's recording slot, the step hold without the lifecycle lock (a publish from
another thread is recorded at the boundary it takes effect at), the compiled StepRecorder's
attachment to the env's core, and where the model came from.

It does not own the bag's layout nor the recording threads (`mjfast.interop.record.recorder`), nor
replay (`mjfast.interop.record.replay`); `env.record()` builds one, replay takes one for the env it
made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mjfast._core_loader import _core

if TYPE_CHECKING:
    from mjfast.sim.config import ModelSource
    from mjfast.sim.env import MujocoEnv

__all__ = ["RecordingTap"]


class RecordingTap:
    """The env's core and recording slot, as the recorder and the replayer use them."""

    __slots__ = ("_core", "_env")

    def __init__(self, env: MujocoEnv, core: Any) -> None:
        self._env = env
        self._core = core

    @classmethod
    def of(cls, env: MujocoEnv) -> RecordingTap:
        """The tap of an env that replay made itself."""
        return cls(env, env._core)

    @property
    def recording(self) -> Any:
        """The env's recording in progress (a `mjfast.interop.record.recorder.Recording`), or
        None."""
        return self._env._recording

    def set_recording(self, recording: Any) -> None:
        """Makes `recording` (None: none) the one the env's calls and close() go to."""
        self._env._recording = recording

    @property
    def model_source(self) -> ModelSource:
        """Where the env's current model came from (a path, an MJCF string or an MjModel)."""
        return self._env._source

    def hold_steps(self) -> None:
        """Holds stepping at a step boundary (re-entrant; LogicError once the env is closed)."""
        self._core.hold_steps()

    def release_steps(self) -> None:
        self._core.release_steps()

    def attach(self, recorder: Any) -> None:
        """Attaches a `_core.StepRecorder` to the env's stepping."""
        recorder.attach(self._core)

    def detach(self) -> None:
        """Detaches the env's StepRecorder, if any."""
        _core.StepRecorder.detach(self._core)
