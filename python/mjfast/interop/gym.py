"""Gymnasium environments on mjfast (SPEC §21, the extra `mjfast[gym]`): `MujocoGymEnv`, a
`gymnasium.Env` on one `MujocoEnv`, and `register`, whose `vector_entry_point` makes
`gymnasium.make_vec` return a `gymnasium.vector.VectorEnv` on one `mjfast.VectorEnv`.

It owns the spaces, the observation layout, the episode bookkeeping (reward, termination,
truncation, NEXT_STEP autoreset) and rendering for gymnasium; stepping, plugins, randomisation
and cameras are the envs'. Only its users import it: `import mjfast` does not import gymnasium.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import mujoco
import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector.utils import batch_space
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(f"mjfast.gym needs gymnasium: pip install 'mjfast[gym]' ({error})"
                      ) from error

from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import LogicError
from mjfast.model.names import labelled_id, object_labels
from mjfast.names import close_matches, suggestion
from mjfast.sim.env import ModelLike, MujocoEnv

__all__ = ["ActionOverriddenWarning", "MujocoGymEnv", "MujocoVectorGymEnv", "register"]

RewardFn = Callable[[Any, np.ndarray], float]
TerminatedFn = Callable[[Any, np.ndarray], bool]
Params = ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None

RENDER_MODES = ("rgb_array", "depth_array")
_PLANES = {"rgb_array": "rgb", "depth_array": "depth"}
_STATE_PARTS = ("qpos", "qvel", "sensordata", "time")


# -- the spaces ---------------------------------------------------------------------------------

def action_space(model: mujoco.MjModel) -> spaces.Box:
    """A Box over the actuators' ctrl: the ctrlrange of a ctrllimited actuator, ±inf otherwise
    (MuJoCo takes any ctrl of such an actuator). float32, as gymnasium's MuJoCo envs."""
    limited = np.asarray(model.actuator_ctrllimited, dtype=bool)
    low = np.where(limited, model.actuator_ctrlrange[:, 0], -np.inf).astype(np.float32)
    high = np.where(limited, model.actuator_ctrlrange[:, 1], np.inf).astype(np.float32)
    return spaces.Box(low=low, high=high, dtype=np.float32)


class ObservationLayout:
    """The named parts of an observation (`qpos`, `qvel`, `sensordata`, `time`, sensor names),
    checked against a model, and their concatenation for one world or a batch of worlds."""

    def __init__(self, model: mujoco.MjModel, parts: object) -> None:
        if isinstance(parts, str):
            parts = (parts,)
        if not isinstance(parts, Sequence) or not parts:
            shown = ", ".join(_STATE_PARTS)
            raise ValueError(f"observation must be a non-empty sequence of parts ({shown} or "
                             f"sensor names), got {parts!r}")
        sensors = [label for label in object_labels(model, mujoco.mjtObj.mjOBJ_SENSOR,
                                                     model.nsensor, "sensor") if label]
        self.parts: list[tuple[str, slice | None]] = []  # (source, columns of sensordata)
        for part in parts:
            if not isinstance(part, str):
                raise ValueError(f"an observation part is a name, got {part!r}")
            if part in _STATE_PARTS:
                self.parts.append((part, None))
                continue
            sensor = labelled_id(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor, "sensor", part)
            if sensor < 0:
                raise KeyError(f"observation part {part!r} is neither one of "
                               f"{', '.join(_STATE_PARTS)} nor a sensor of the model"
                               f"{suggestion(close_matches(part, [*_STATE_PARTS, *sensors]))}; the "
                               f"model's sensors: {', '.join(sensors) or 'none'}")
            start = int(model.sensor_adr[sensor])
            self.parts.append(("sensordata", slice(start, start + int(model.sensor_dim[sensor]))))
        # Whole fields only (no sensor's columns): the rows the core gathers side by side.
        self.whole_fields = tuple(source for source, columns in self.parts) if all(
            columns is None for _, columns in self.parts) else None
        sizes = {"qpos": model.nq, "qvel": model.nv, "sensordata": model.nsensordata, "time": 1}
        self.size = sum(sizes[source] if columns is None else columns.stop - columns.start
                        for source, columns in self.parts)

    def space(self) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, shape=(self.size,), dtype=np.float64)

    def observe(self, state: Any) -> np.ndarray:
        """The observation of `state`, a new array: one world's (a `mujoco.MjData`: 1-D arrays,
        `time` a scalar) or a batch's (an `mjfast.VectorEnv`: 2-D arrays, `time` (num_envs,);
        whole fields are gathered side by side in one call of its `gather`)."""
        gather = getattr(state, "gather", None)  # (a VectorEnv's; MjData has none)
        if self.whole_fields is not None and gather is not None:
            return gather(self.whole_fields)
        pieces = []
        for source, columns in self.parts:
            values = np.asarray(getattr(state, source), dtype=np.float64)
            if source == "time":
                values = values[..., np.newaxis]
            pieces.append(values if columns is None else values[..., columns])
        return np.concatenate(pieces, axis=-1)


def _checked_count(value: object, what: str, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ValueError(f"{what} must be a positive integer{' or None' if allow_none else ''}, "
                     f"got {value!r}")


def _checked_callable(value: object, what: str) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"{what} must be a callable of (env, action) or None, got {value!r}")
    return value


def _checked_episode(frame_skip: object, truncate_steps: object, reward: object,
                     terminated: object) -> tuple[int, int | None, Any, Any]:
    """Both gym envs' episode settings, checked in this order: frame_skip, truncate_steps,
    reward, terminated."""
    skip = _checked_count(frame_skip, "frame_skip")
    assert skip is not None
    return (skip, _checked_count(truncate_steps, "truncate_steps", allow_none=True),
            _checked_callable(reward, "reward"), _checked_callable(terminated, "terminated"))


def _checked_action(action: object, shape: tuple[int, ...], what: str,
                    model: mujoco.MjModel) -> np.ndarray:
    """`action` (one world's, or a batch's (num_envs, nu)) as float64: real numbers of `shape`,
    all finite (SPEC §18), else a ValueError naming what is wrong. The one check of both gym
    envs, made before anything is written or stepped."""
    try:
        array = np.asarray(action)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be an array of shape {shape}: {error}") from None
    if array.dtype.kind not in "fiu":
        raise ValueError(f"{what} must hold real numbers, got dtype {array.dtype}")
    if array.shape != shape:
        raise ValueError(f"{what} must have shape {shape} (one ctrl value per actuator), got "
                         f"shape {array.shape}")
    array = array.astype(np.float64)
    not_finite = ~np.isfinite(array)
    if not_finite.any():
        position = tuple(int(i) for i in np.argwhere(not_finite)[0])
        actuator = position[-1]
        label = object_labels(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu, "actuator")[actuator]
        world = f"world {position[0]}, " if len(position) == 2 else ""
        raise ValueError(f"{what} must be finite, got {array[position]} for {world}actuator "
                         f"{actuator}{f' ({label})' if label else ''}")
    return array


class ActionOverriddenWarning(UserWarning):
    """A plugin wrote ctrl during a gym env's step: what ran was not the agent's action. Warned
    once per env (the plugin keeps doing it: PoseHoldPD, a ros2_control controller...)."""


def _warn_overridden(where: str, plugins: Sequence[Any], action: np.ndarray,
                     ctrl: np.ndarray) -> None:
    """Says that a plugin of `where` wrote ctrl: the one active plugin by name, else the active
    ones that may have (the core does not record which plugin wrote)."""
    active = [info for info in plugins if info.state == "ACTIVE"]
    if len(active) == 1:
        who = f"its plugin {active[0].name!r} ({active[0].type})"
    else:
        who = f"one of its plugins ({', '.join(info.name for info in active)})"
    warnings.warn(f"{where}: {who} wrote ctrl during the step, overriding the agent's action "
                  f"(action {action.tolist()}, ctrl after the step {ctrl.tolist()}); said once "
                  f"per env", ActionOverriddenWarning, stacklevel=3)


def _use_egl_without_display() -> None:
    """mujoco chose the GL backend of `mujoco.Renderer` when it was imported: GLFW unless
    MUJOCO_GL names another, and GLFW cannot render without a display. Where there is none and
    MUJOCO_GL is unset, the renderer gets EGL instead, the backend mjfast's own cameras (and
    mjfast.interop.ray's workers) use then."""
    if any(os.environ.get(name) for name in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")):
        return
    context_module = getattr(importlib.import_module(mujoco.Renderer.__module__), "gl_context",
                             None)
    if context_module is None:  # a mujoco whose renderer picks its context otherwise
        return
    from mujoco.egl import GLContext

    context_module.GLContext = GLContext


def _render_fps(model: mujoco.MjModel, frame_skip: int) -> float:
    return 1.0 / (float(model.opt.timestep) * frame_skip)


# -- one world ----------------------------------------------------------------------------------

class MujocoGymEnv(gymnasium.Env):  # type: ignore[misc]
    """A gymnasium.Env on one MujocoEnv: its plugins run on every step as in MujocoEnv.

    `step(action)` writes `action` to `ctrl` and runs `frame_skip` physics steps (plugins may
    overwrite ctrl in their control callback, as in MujocoEnv); `reward(env, action)` and
    `terminated(env, action)` are called after it with this env, whose `model`, `data`, `qpos`,
    `qvel`, `sensordata` and `time` they may read (default: 0.0 and False); an episode is
    truncated after `truncate_steps` steps. `reset(seed=, options=)` resets the world (the
    `randomize` terms drawn, seeded by `seed`; `options` may hold `keyframe`, `joint_positions`,
    `joint_velocities`). `render()` returns the frame of `camera` (default: the model's first
    camera) for the current state; its size is the camera's (`<namespace>/cameras/<camera>`
    `width`/`height`, else the model's offscreen size).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": list(RENDER_MODES), "render_fps": 50}

    def __init__(
        self,
        model: ModelLike,
        params: Params = None,
        *,
        observation: Sequence[str] = ("qpos", "qvel"),
        frame_skip: int = 1,
        reward: RewardFn | None = None,
        terminated: TerminatedFn | None = None,
        truncate_steps: int | None = None,
        render_mode: str | None = None,
        camera: str | None = None,
    ) -> None:
        self._closed = True
        self.frame_skip, self.truncate_steps, self._reward, self._terminated = _checked_episode(
            frame_skip, truncate_steps, reward, terminated)
        if render_mode is not None and render_mode not in RENDER_MODES:
            hint = suggestion(close_matches(render_mode, RENDER_MODES))
            raise ValueError(f"render_mode must be one of {', '.join(RENDER_MODES)} or None, got "
                             f"{render_mode!r}{hint}")
        if camera is not None and not isinstance(camera, str):
            raise TypeError(f"camera must be a camera name or None, got {camera!r}")
        self.render_mode = render_mode
        # Each render turn finishes before the step returns: render() shows the current state.
        self.mujoco_env = MujocoEnv(model, params=params, render_sync=render_mode is not None)
        try:
            self._layout = ObservationLayout(self.mujoco_env.model, observation)
            self._camera_name, self._camera = None, None
            if render_mode is not None:
                self._camera_name, self._camera = self._open_camera(camera)
        except BaseException:
            self.mujoco_env.close()
            raise
        self.metadata = {**type(self).metadata,
                         "render_fps": _render_fps(self.mujoco_env.model, self.frame_skip)}
        self.action_space = action_space(self.mujoco_env.model)
        self.observation_space = self._layout.space()
        self._nu = self.mujoco_env.model.nu
        self._episode_steps = 0
        self._frame: np.ndarray | None = None  # the camera's latest frame, and its time
        self._frame_time_ns = -1
        self._renderer: mujoco.Renderer | None = None  # renders the state a reset leaves
        self._override_said = False  # ActionOverriddenWarning, once
        self._closed = False

    # -- what reward/terminated read ------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        return self.mujoco_env.model

    @property
    def data(self) -> mujoco.MjData:
        return self.mujoco_env.data

    @property
    def qpos(self) -> np.ndarray:
        return self.mujoco_env.data.qpos

    @property
    def qvel(self) -> np.ndarray:
        return self.mujoco_env.data.qvel

    @property
    def sensordata(self) -> np.ndarray:
        return self.mujoco_env.data.sensordata

    @property
    def time(self) -> float:
        return float(self.mujoco_env.data.time)

    @property
    def episode_steps(self) -> int:
        return self._episode_steps

    # -- gymnasium ------------------------------------------------------------------------------

    def _observation(self) -> np.ndarray:
        return self._layout.observe(self.mujoco_env.data)

    def _check_open(self) -> None:
        if self._closed:
            raise LogicError("the env is closed")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        self._check_open()
        options = dict(options or {})
        unknown = set(options) - {"keyframe", "joint_positions", "joint_velocities"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {', '.join(sorted(map(str, unknown)))}; "
                             f"expected keyframe, joint_positions, joint_velocities")
        super().reset(seed=seed)
        self.mujoco_env.reset(options.get("keyframe"),
                              joint_positions=options.get("joint_positions"),
                              joint_velocities=options.get("joint_velocities"), seed=seed)
        self._episode_steps = 0
        self._frame = None
        return self._observation(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._check_open()
        ctrl = _checked_action(action, (self._nu,), "action", self.mujoco_env.model)
        data = self.mujoco_env.data
        data.ctrl[:] = ctrl
        if self._camera is not None and self.frame_skip > 1:
            self.mujoco_env.step(self.frame_skip - 1)
        self._request_frame()
        self.mujoco_env.step(1 if self._camera is not None else self.frame_skip)
        if not self._override_said and not np.array_equal(data.ctrl, ctrl):
            self._override_said = True
            _warn_overridden("the env", self.mujoco_env.plugins, ctrl, np.array(data.ctrl))
        self._episode_steps += 1
        reward = 0.0 if self._reward is None else float(self._reward(self, ctrl))
        terminated = False if self._terminated is None else bool(self._terminated(self, ctrl))
        truncated = (self.truncate_steps is not None
                     and self._episode_steps >= self.truncate_steps)
        return self._observation(), reward, terminated, truncated, {}

    # -- rendering ------------------------------------------------------------------------------

    def _open_camera(self, camera: str | None) -> tuple[str, Any]:
        """The offscreen camera (SPEC §10) that render() shows: `camera`, or the model's first.
        Its planes are the render mode's; its rate is never due on its own (`_request_frame`
        asks for each frame)."""
        env = self.mujoco_env
        model = env.model
        if camera is None:
            names = [label for label in object_labels(model, mujoco.mjtObj.mjOBJ_CAMERA,
                                                      model.ncam, "camera") if label]
            if not names:
                raise ValueError("render_mode needs a camera, and the model has none: add a "
                                 "<camera> to the model and name it with camera=")
            camera = names[0]
        where = resolve_name(f"cameras/{camera}", env.namespace)
        configured = env.params.get(where, None)
        config = dict(configured) if isinstance(configured, Mapping) else {}
        config["planes"] = [_PLANES[self.render_mode or "rgb_array"]]
        config["rate_hz"] = 1e-9
        env.params.set(where, config)
        handle = env.open_offscreen_camera(camera)
        handle.enable_frames()
        self._camera_id = labelled_id(model, mujoco.mjtObj.mjOBJ_CAMERA, model.ncam, "camera",
                                      camera)
        return camera, handle

    def _request_frame(self) -> None:
        """Makes the camera due at the next step's end, that is, the end of this env step."""
        if self._camera is not None:
            self._camera.request_frame()

    def render(self) -> np.ndarray | None:
        """The frame of the current state: RGB `HxWx3 uint8` or depth `HxW float32` (metres).
        The offscreen camera renders one at the end of each step; right after a reset, where no
        step has ended yet, `mujoco.Renderer` renders it with the same camera and size (SPEC §10:
        the same picture)."""
        self._check_open()
        if self.render_mode is None:  # gymnasium's convention: nothing to render
            return None
        lease = self._camera.take_latest(_PLANES[self.render_mode])
        if lease is not None:
            with lease:
                self._frame = np.array(lease.data, copy=True)
                self._frame_time_ns = int(lease.simulation_time_ns)
        if self._frame is not None and abs(self._frame_time_ns - self.time * 1e9) < 1.0:
            return self._frame.copy()
        return self._render_directly()

    def _render_directly(self) -> np.ndarray:
        if self._renderer is None:
            _use_egl_without_display()
            model = self.mujoco_env.model
            self._renderer = mujoco.Renderer(model, self._camera.height, self._camera.width)
            if self.render_mode == "depth_array":
                self._renderer.enable_depth_rendering()
        self._renderer.update_scene(self.mujoco_env.data, camera=self._camera_id)
        return np.array(self._renderer.render(), copy=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self.mujoco_env.close()

    def __repr__(self) -> str:
        return f"<MujocoGymEnv {self.mujoco_env!r} frame_skip={self.frame_skip}>"


# -- many worlds --------------------------------------------------------------------------------

class WorldView:
    """One world of a MujocoVectorGymEnv as `reward` and `terminated` see it: `index`, `model`,
    `qpos`, `qvel`, `sensordata`, `time` and `episode_steps` (views of the batched arrays)."""

    def __init__(self, owner: MujocoVectorGymEnv, index: int) -> None:
        self._owner = owner
        self.index = index

    @property
    def model(self) -> mujoco.MjModel:
        return self._owner._world_model(self.index)

    @property
    def qpos(self) -> np.ndarray:
        return self._owner.vector_env.qpos[self.index]

    @property
    def qvel(self) -> np.ndarray:
        return self._owner.vector_env.qvel[self.index]

    @property
    def sensordata(self) -> np.ndarray:
        return self._owner.vector_env.sensordata[self.index]

    @property
    def time(self) -> float:
        return float(self._owner.vector_env.time[self.index])

    @property
    def episode_steps(self) -> int:
        return int(self._owner._episode_steps[self.index])


class MujocoVectorGymEnv(gymnasium.vector.VectorEnv):  # type: ignore[misc]
    """A gymnasium.vector.VectorEnv on one mjfast.VectorEnv of `num_envs` worlds, each with its
    own plugins (and, where it randomises model fields, its own model), stepped together on the
    VectorEnv's worker threads. Autoreset is gymnasium's NEXT_STEP: the step after a world's
    terminal or truncated step resets that world and returns its reset observation, with reward
    0 and neither terminated nor truncated (its action is ignored)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": [],
                                          "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        model: ModelLike,
        num_envs: int,
        params: Params = None,
        *,
        observation: Sequence[str] = ("qpos", "qvel"),
        frame_skip: int = 1,
        reward: RewardFn | None = None,
        terminated: TerminatedFn | None = None,
        truncate_steps: int | None = None,
        threads: int | None = None,
        seed: int | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        from mjfast import VectorEnv  # the compiled worker pool

        self._closed = True
        self.num_envs = _checked_count(num_envs, "num_envs")
        # gymnasium.make_vec passes a registration's max_episode_steps: it means truncate_steps.
        if truncate_steps is None:
            truncate_steps = max_episode_steps
        self.frame_skip, self.truncate_steps, self._reward, self._terminated = _checked_episode(
            frame_skip, truncate_steps, reward, terminated)
        self.vector_env = VectorEnv(model, self.num_envs, params, threads=threads, seed=seed)
        self._models = self.vector_env.models
        try:
            self._layout = ObservationLayout(self._world_model(0), observation)
        except BaseException:
            self.vector_env.close()
            raise
        model0 = self._world_model(0)
        self.render_mode = None
        self.metadata = {**type(self).metadata, "render_fps": _render_fps(model0,
                                                                          self.frame_skip)}
        self.single_action_space = action_space(model0)
        self.single_observation_space = self._layout.space()
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._nu = model0.nu
        self._episode_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._worlds = [WorldView(self, i) for i in range(self.num_envs)]
        self._override_said = False  # ActionOverriddenWarning, once
        self._closed = False

    def _world_model(self, index: int) -> mujoco.MjModel:
        return self._models[index]

    def _check_open(self) -> None:
        if self._closed:
            raise LogicError("the env is closed")

    def _observations(self) -> np.ndarray:
        return self._layout.observe(self.vector_env)  # only the observed fields are gathered

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets every world (`options["reset_mask"]`: those it marks), `seed` an int (world i
        seeded with seed + i) or one seed per world, as gymnasium's vector envs."""
        self._check_open()
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"unknown reset option(s) {', '.join(sorted(map(str, options)))}; "
                             f"expected reset_mask")
        if mask is None:
            mask = np.ones(self.num_envs, dtype=bool)
        mask = np.asarray(mask)
        if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},) with "
                             f"at least one True, got {mask!r}")
        indices = np.flatnonzero(mask)
        if seed is None or isinstance(seed, (int, np.integer)):
            if seed is not None:
                self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                    int(seed))
            self.vector_env.reset(indices.tolist(), seed=None if seed is None else int(seed))
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed must be an int, None or {self.num_envs} seeds (one per "
                                 f"world), got {len(seeds)}")
            for index in indices:  # world i seeded with seeds[i] itself
                self.vector_env.world(int(index)).reset(seed=seeds[index])
        self._episode_steps[indices] = 0
        self._autoreset[indices] = False
        return self._observations(), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                          dict[str, Any]]:
        self._check_open()
        ctrl = _checked_action(actions, (self.num_envs, self._nu), "actions",
                               self._world_model(0))
        resetting = self._autoreset.copy()
        self.vector_env.step(self.frame_skip, ctrl)
        if not self._override_said:
            self._check_overridden(ctrl, resetting)
        if resetting.any():
            # NEXT_STEP: the worlds that ended at the last step start over instead of stepping
            # (VectorEnv steps every world: theirs is undone by the reset).
            self.vector_env.reset(np.flatnonzero(resetting).tolist())
        self._episode_steps += 1
        self._episode_steps[resetting] = 0
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        for index in (np.flatnonzero(~resetting) if self._reward is not None
                      or self._terminated is not None else ()):
            world = self._worlds[index]
            if self._reward is not None:
                rewards[index] = float(self._reward(world, ctrl[index]))
            if self._terminated is not None:
                terminations[index] = bool(self._terminated(world, ctrl[index]))
        truncations = np.zeros(self.num_envs, dtype=bool)
        if self.truncate_steps is not None:
            truncations = ~resetting & (self._episode_steps >= self.truncate_steps)
        self._autoreset = terminations | truncations
        return self._observations(), rewards, terminations, truncations, {}

    def _check_overridden(self, ctrl: np.ndarray, resetting: np.ndarray) -> None:
        """Warns once if a plugin wrote ctrl in a world that stepped the agent's action (read
        before the autoreset, which zeroes ctrl)."""
        after = self.vector_env.ctrl
        overridden = np.flatnonzero(~resetting & (after != ctrl).any(axis=1))
        if overridden.size:
            self._override_said = True
            world = int(overridden[0])
            _warn_overridden(f"world {world}", self.vector_env.world(world).plugins,
                             ctrl[world], after[world])

    def close_extras(self, **kwargs: Any) -> None:
        if not self._closed:
            self._closed = True
            self.vector_env.close()


def register(env_id: str, model: ModelLike, params: Params = None, *,
             max_episode_steps: int | None = None, **kwargs: Any) -> None:
    """Registers `env_id` with gymnasium: `gymnasium.make(env_id)` makes a MujocoGymEnv and
    `gymnasium.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point")` a
    MujocoVectorGymEnv, both of `model` with `params` and `kwargs` (MujocoGymEnv's keywords;
    the vector env also takes `threads` and `seed`)."""
    if isinstance(model, mujoco.MjModel):
        raise TypeError("register() takes a model path or an MJCF string (gymnasium copies its "
                        "keyword arguments), not a mujoco.MjModel")
    gymnasium.register(
        id=env_id, entry_point=_make_single, vector_entry_point=_make_vector,
        max_episode_steps=max_episode_steps,
        kwargs={"model": model, "params": params, **kwargs})


def _make_single(**kwargs: Any) -> MujocoGymEnv:
    kwargs.pop("threads", None)
    kwargs.pop("seed", None)
    return MujocoGymEnv(**kwargs)


def _make_vector(num_envs: int = 1, **kwargs: Any) -> MujocoVectorGymEnv:
    kwargs.pop("render_mode", None)
    kwargs.pop("camera", None)
    return MujocoVectorGymEnv(num_envs=num_envs, **kwargs)

