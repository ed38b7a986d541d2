"""MujocoEnv: the server that alone owns a model, its data, stepping and the plugin lifecycle.

The env compiles models, reads the parameter server, creates plugins (the factory) and runs the
reload transaction, and holds stepping around every operation that changes the model or data;
stepping, the hooks and dispatch are in the compiled EnvCore and PluginHost. What its public
methods do once stepping is held is elsewhere: geometry editing in `mjfast.geometry`, simulation
control in `mjfast.joints`, `mjfast.kinematics` and `mjfast.options`, `env.host` and
`acquire_plugin`'s scoped plugin in `mjfast.host`.
It does not own MuJoCo's global callbacks' implementation (`mjfast.hooks`) nor parse configuration
(`mjfast.plugin_config`).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import logging
import os
import signal
import threading
import traceback
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import mujoco
import numpy as np

from mjfast import geometry, joints, kinematics, options
from mjfast._core_loader import _core
from mjfast.camera import CameraRig, OffscreenCamera
from mjfast.config_schema import check_config
from mjfast.control import ControlInterface
from mjfast.discovery import resolve_plugin
from mjfast.errors import ConfigError, LogicError, MjfastError, PluginError
from mjfast.hooks import hold_hooks, release_hooks
from mjfast.host import EnvHost, plugin_info, scoped_plugin
from mjfast.joints import JointState
from mjfast.kinematics import BodyState
from mjfast.model_info import is_mjcf_string, model_name, source_label
from mjfast.model_names import object_id
from mjfast.names import close_matches
from mjfast.native import config_json
from mjfast.node import Bus, Node
from mjfast.params import ParameterServer, resolve_name
from mjfast.plugin import (
    ControlPlugin,
    MujocoPlugin,
    PluginInfo,
    PluginState,
    check_outside_callbacks,
    has_state,
    overridden_callbacks,
)
from mjfast.plugin_config import PluginSpec, load_plugin_specs
from mjfast.randomize import Randomizer, checked_seed, world_generator
from mjfast.services import advertise_simulation_services
from mjfast.state import SimState, capture, restore

__all__ = ["MujocoEnv"]

ModelLike: TypeAlias = str | os.PathLike[str] | mujoco.MjModel

_log = logging.getLogger("mjfast.env")

# The parameters the env itself reads in its namespace (SPEC §2, §5, §10, §13, §21); with the
# plugins' namespaces and whatever the plugins read while loading, nothing else there is read by
# mjfast.
ENV_PARAMETERS = ("MujocoPlugins", "initial_joint_positions", "initial_joint_velocities",
                  "options", "cameras", "randomize", "seed")


@dataclass(frozen=True)
class _ModelSource:
    """Where a model comes from, so that reload() can read it again."""

    path: Path | None = None
    xml: str | None = None
    model: mujoco.MjModel | None = None

    @classmethod
    def of(cls, model: ModelLike) -> _ModelSource:
        if isinstance(model, mujoco.MjModel):
            return cls(model=copy.copy(model))
        if is_mjcf_string(model):
            return cls(xml=model)  # type: ignore[arg-type]
        if isinstance(model, (str, os.PathLike)):
            # Resolved now: reload() re-reads the same file whatever the working directory then.
            return cls(path=Path(os.fspath(model)).resolve())
        raise TypeError(
            f"model must be a path to an MJCF/URDF file, an MJCF string or a mujoco.MjModel, "
            f"got {type(model).__name__}"
        )

    def compile(self) -> mujoco.MjModel:
        if self.model is not None:
            return copy.copy(self.model)
        if self.xml is not None:
            try:
                return mujoco.MjModel.from_xml_string(self.xml)
            except ValueError as error:
                raise ValueError(f"the MJCF string does not compile: {error}") from error
        assert self.path is not None
        if not self.path.is_file():
            raise FileNotFoundError(f"model file not found: {self.path}")
        try:
            return mujoco.MjModel.from_xml_path(str(self.path))
        except ValueError as error:
            raise ValueError(f"model {self.path} does not compile: {error}") from error


def _parameter_server(params: ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None
                      ) -> tuple[ParameterServer, Path | None]:
    if params is None:
        return ParameterServer(), None
    if isinstance(params, ParameterServer):
        return params, None
    if isinstance(params, Mapping):
        return ParameterServer(dict(params)), None
    if isinstance(params, (str, os.PathLike)):
        path = Path(params)
        if not path.is_file():
            raise FileNotFoundError(f"parameter file not found: {path}")
        server = ParameterServer()
        server.load_yaml(path)
        return server, path
    raise TypeError(
        f"params must be a ParameterServer, a dict or a path to a YAML file, "
        f"got {type(params).__name__}"
    )


def _apply_initial_state(
    model: mujoco.MjModel, data: mujoco.MjData, params: ParameterServer, namespace: str
) -> None:
    """Writes `initial_joint_positions` / `initial_joint_velocities` over the default state, both
    checked first (ConfigError naming the parameter)."""
    writes = []
    for key, kind in (("initial_joint_positions", "positions"),
                      ("initial_joint_velocities", "velocities")):
        name = resolve_name(key, namespace)
        try:
            writes.append(joints.checked_joint_values(model, params.get(name, None), kind))
        except (KeyError, ValueError) as error:
            raise ConfigError(f"{name}: {error.args[0]}") from error
    joints.write_joint_values(data, *writes)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Holds off Ctrl-C until the block ends, so that a lifecycle transaction (a reload, a load)
    is never left half-done: the first SIGINT is remembered and raised when the block ends; a
    second one goes through at once (the user insists). Only Python's main thread receives
    signals; elsewhere, or where SIGINT has no Python handler, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        yield
        return
    received: list[tuple[int, Any]] = []

    def defer(signum: int, frame: Any) -> None:
        if received:
            handler(signum, frame)
        received.append((signum, frame))

    signal.signal(signal.SIGINT, defer)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if received:
            handler(*received[0])


# MuJoCo's warning kinds, as mujoco names them (mjWARN_CONTACTFULL -> "contactfull").
_WARNING_KINDS = {name[len("mjWARN_"):].lower(): int(kind)
                  for name, kind in mujoco.mjtWarning.__members__.items()
                  if name.startswith("mjWARN_")}

_open_envs: weakref.WeakSet[MujocoEnv] = weakref.WeakSet()


@atexit.register
def _close_open_envs() -> None:
    # Physics threads take the GIL for Python plugins: stop them before the interpreter goes.
    for env in list(_open_envs):
        env.close()


class MujocoEnv:
    """A MuJoCo simulation with plugins loaded from the parameter server (SPEC §5)."""

    # Which world of a VectorEnv this env is (mjfast.vector_env sets it before construction);
    # every plugin is told (`world_index`).
    _world_index = 0
    # A VectorEnv's `seed`, which its worlds draw from instead of the `seed` parameter (SPEC §21).
    _world_seed: int | None = None

    def __init__(
        self,
        model: ModelLike,
        *,
        params: ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        namespace: str = "/mujoco_server",
        render_sync: bool = False,
        strict: bool = False,
    ) -> None:
        """`strict=True`: a plugin that fails to load (any phase) is an error, at construction
        (PluginError naming each failed plugin, its phase and message; the env is closed) and at
        every reload, as the CLI's --strict. Otherwise a failed plugin is reported in
        `env.plugins` and `statistics()` and the others run."""
        self._closed = True  # until construction succeeds: close() and __del__ do nothing
        self._recording: Any = None  # the Recording in progress (SPEC §20), if any
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        self._strict = strict
        self._namespace = resolve_name(namespace)
        self._params, self._params_path = _parameter_server(params)
        self._source = self._model_source(model)
        new_model = model if isinstance(model, mujoco.MjModel) else self._source.compile()
        self._specs = load_plugin_specs(self._params, self._namespace)
        options.apply_options(new_model, self._params.get(
            resolve_name("options", self._namespace), None))
        self._randomizer, self._rng = self._randomization(new_model, self._params)
        if self._randomizer.randomizes_model and new_model is model:
            new_model = copy.copy(new_model)  # draws go to the env's own model, not the caller's
        self._randomizer.draw_model(new_model, self._rng)
        new_data = mujoco.MjData(new_model)
        _apply_initial_state(new_model, new_data, self._params, self._namespace)
        self._randomizer.perturb_state(new_model, new_data, self._rng)
        self._source_label = source_label(model)

        self.bus = Bus()
        # Serialises reset / reload / close / geom edits; the first lock of the lock order
        # (src/_core/env_core.h).
        self._lifecycle_lock = threading.Lock()
        self._model = new_model
        self._data = new_data
        # The control bridge's scratch data (update_read/update_write plugins run on it).
        self._control_data = mujoco.MjData(new_model)
        self._core = _core.EnvCore(render_sync)
        self.control = ControlInterface(self._core)
        # Shadows MujocoEnv.step with the compiled step itself, for speed: a Python loop of
        # env.step(1) then pays no Python frame per call (about 0.2 us of a 3.5 us step on a
        # one-body model). MujocoEnv.step stays for help(), type checkers and the docs, and does
        # the same; a subclass that overrides step must assign self.step after this __init__.
        self.step = self._core.step  # type: ignore[method-assign]
        hold_hooks(self)
        self._core.bind(new_model, new_data, self._control_data)
        mujoco.mj_forward(new_model, new_data)  # no generation yet: callback-free
        # The factory holds the env weakly: the core (and so the host and its factory) is owned
        # by the env, and a cycle through C++ would keep both alive forever.
        self._core.set_factory(_weak_method(self._make_adapters))
        self._cameras = CameraRig(self._core.render_core)
        self._core.set_reset_request_hooks(_weak_method(self._resolve_reset_request),
                                           _weak_method(self._report_reset_request_failure))
        advertise_simulation_services(self)  # before plugins load: they may call them later
        self._closed = False
        _open_envs.add(self)
        try:
            # A plugin's load() stepping or resetting is refused.
            with self.hold_stepping("__init__", defer_interrupts=True):
                self._cameras.begin_load(new_model, self.model_generation)
                self._load_plugins()
                self._cameras.finish_load(new_model, self._params, self._namespace)
            self._check_strict("construction")
        except BaseException:
            # Nobody gets this env: unload what did load and give back the hooks' pair now, not
            # whenever the garbage collector gets to it (a Ctrl-C in a plugin's __init__ or load
            # too: the other plugins loaded, then the interrupt is raised). What is raised is
            # the reason construction failed, not a second error while closing.
            with contextlib.suppress(Exception):
                self.close()
            raise

    def _model_source(self, model: ModelLike) -> _ModelSource:
        """Where reload() reads the model again (a VectorEnv's worlds share one)."""
        return _ModelSource.of(model)

    def _randomization(self, model: mujoco.MjModel, params: ParameterServer
                       ) -> tuple[Randomizer, np.random.Generator]:
        """The `randomize` terms checked against `model`, and this world's generator, seeded by
        the `seed` parameter (or the VectorEnv's seed) plus the world's index (SPEC §21);
        ConfigError naming the bad term or seed."""
        where = resolve_name("seed", self._namespace)
        seed = checked_seed(params.get(where, None), where)
        if self._world_seed is not None:
            seed = self._world_seed
        return (Randomizer.from_params(model, params, self._namespace),
                world_generator(seed, self._world_index))

    # -- the plugin factory ------------------------------------------------------------------

    def _make_adapters(self, model_generation: int, plugin_generation: int) -> list[Any]:
        """Instantiates the configured plugins of a new generation (phase `factory`)."""
        entries = []
        for spec in self._specs:
            try:
                entries.append(self._make_adapter(spec))
            except (KeyboardInterrupt, SystemExit) as interrupt:
                # The user's, not the plugin's failure (SPEC §18): it is left unloaded, the
                # others load, and the host raises this once they have.
                entries.append(_core.interrupted_adapter(spec.name, spec.type, interrupt))
            except BaseException as error:  # one plugin's failure is its own: isolate it
                message = f"{type(error).__name__}: {error}"
                text = "".join(traceback.format_exception(error))
                _log.debug("plugin %s (%s) failed in factory: %s\n%s", spec.name, spec.type,
                           message, text)
                entries.append(_core.failed_adapter(spec.name, spec.type, message, text))
        return entries

    def _make_adapter(self, spec: PluginSpec) -> Any:
        target = resolve_plugin(spec.type)
        # A factory failure of this plugin, which the report already names.
        check_config("", spec.config, getattr(target, "config_keys", None), self._model)
        if getattr(target, "__mjfast_native__", False):
            return _core.native_adapter(
                name=spec.name, type=spec.type, library_path=target.library_path(),
                symbol=target.symbol, config_json=config_json(spec.config),
                camera_opener=_weak_method(self.open_offscreen_camera),
                publisher=Node(self._params, f"{self._namespace.rstrip('/')}/{spec.name}",
                               self.bus, spec.name).publish,
                world_index=self._world_index)
        if not (isinstance(target, type) and issubclass(target, (MujocoPlugin, ControlPlugin))):
            raise TypeError(f"{spec.type} resolves to {target!r}, which is not a plugin class")
        instance = target()
        node = Node(self._params, f"{self._namespace.rstrip('/')}/{spec.name}", self.bus,
                    spec.name)
        instance.name = spec.name
        instance.type = spec.type
        instance.config = copy.deepcopy(spec.config)
        instance.node = node
        instance.env = weakref.proxy(self)
        instance.world_index = self._world_index
        style = "control" if isinstance(instance, ControlPlugin) else "mujoco"
        return _core.python_adapter(
            name=spec.name, type=spec.type, instance=instance, style=style, model=self._model,
            data=self._data, control_data=self._control_data, node=node,
            callbacks=sorted(overridden_callbacks(target)), stateful=has_state(target),
        )

    def _load_plugins(self) -> None:
        """Loads the next plugin generation (stepping held by the caller), then warns about the
        parameters in the env's namespace that nothing read."""
        with self._params.reads_recorded() as read:
            self._core.load_next_plugin_generation()
        _warn_unread_parameters(self._params, self._namespace, self._specs, read)

    def _check_strict(self, when: str) -> None:
        """strict=True: PluginError naming every plugin that failed to load."""
        if not self._strict:
            return
        failed = [info for info in self.plugins
                  if info.state is PluginState.FAILED and info.failure is not None]
        if not failed:
            return
        first = failed[0].failure
        assert first is not None
        described = "; ".join(
            f"plugin '{info.name}' ({info.type}) failed in {info.failure.phase}: "
            f"{info.failure.message}" for info in failed if info.failure is not None)
        raise PluginError(f"{described} (strict=True, at {when})", first.name, first.type,
                          first.phase)

    # -- properties ---------------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._data

    @property
    def params(self) -> ParameterServer:
        return self._params

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def host(self) -> EnvHost:
        """The PluginHost (SPEC §6), for tests and advanced users."""
        return EnvHost(self, self._core.host)

    @property
    def model_generation(self) -> int:
        return int(self._core.model_generation)

    @property
    def plugin_generation(self) -> int:
        return int(self._core.plugin_generation)

    @property
    def running(self) -> bool:
        return bool(self._core.running)

    @property
    def plugins(self) -> tuple[PluginInfo, ...]:
        """The configured plugins of the current generation, in load order."""
        return tuple(plugin_info(report) for report in self._core.host.report())

    # -- stepping -----------------------------------------------------------------------------

    def step(self, n: int = 1) -> None:
        """Runs `n` physics steps in compiled code (SPEC §5)."""
        self._core.step(n)

    def start(self, realtime_factor: float | None = 1.0, *, steps: int | None = None) -> None:
        """Starts the physics thread, paced to wall clock at `realtime_factor` (None: unpaced);
        with `steps`, it stops by itself after exactly that many of its own steps (wait())."""
        self._check_open()
        self._core.start(realtime_factor, steps)

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the physics thread has stopped (stop(), its `steps` run, or a fault, which
        stop() raises) or `timeout` seconds have passed; True once it has stopped."""
        return bool(self._core.wait(timeout))

    def stop(self) -> None:
        """Stops the physics thread after the step in progress; idempotent."""
        if self.running:
            self._check_outside_own_callbacks("stop")
        self._core.stop()

    def _check_outside_own_callbacks(self, operation: str) -> None:
        """LogicError where this thread is inside one of this env's plugin callbacks (a step's,
        a load phase's, an unload's or a statistics() call's): it holds the host's mutex, which
        the physics thread needs to finish its step, so taking the lifecycle lock or waiting for
        stepping there could deadlock (SPEC §18: refused, never waited for)."""
        if not self._closed:
            self._core.check_call(f"env.{operation}()", ["own_callback"])

    @contextlib.contextmanager
    def _lifecycle(self, operation: str, *, defer_interrupts: bool = True) -> Iterator[None]:
        """One lifecycle operation (construction's load, reset, reload, close, a geometry edit):
        serialised with the others, refused (LogicError) when this thread is already inside one
        of this env's (a plugin's load, reset or unload calling back into the env would recurse
        or deadlock), and, where it runs plugin code, not cut in half by Ctrl-C (see
        `_interrupts_deferred`)."""
        # Refused before the lock is taken (this thread may hold it); the messages and the
        # thread's lifecycle marks are the core's (src/_core/call_context.h).
        self._core.check_call(f"env.{operation}()", ["lifecycle"])
        self._check_outside_own_callbacks(operation)
        deferred = _interrupts_deferred() if defer_interrupts else contextlib.nullcontext()
        with deferred, self._lifecycle_lock, self._core.lifecycle(operation):
            yield

    @contextlib.contextmanager
    def hold_stepping(self, holder: str = "hold_stepping", *,
                      defer_interrupts: bool = False) -> Iterator[None]:
        """Holds stepping at a step boundary for the block: the physics thread waits and
        `env.step` blocks, so `env.model` and `env.data` can be read or written as one state.
        The one way code outside the env (the viewers, `env.host`, the recorder) holds stepping.

        A lifecycle operation named `holder` in its errors: serialised with reset, reload and
        close; LogicError once the env is closed, or from inside one of this env's plugin
        callbacks or lifecycle operations (it would deadlock). `defer_interrupts=True`, for a
        block that runs plugin code: a Ctrl-C during it is raised when it ends."""
        with self._lifecycle(holder, defer_interrupts=defer_interrupts):
            self._check_open()
            self._core.hold_steps()
            try:
                yield
            finally:
                self._core.release_steps()

    @contextlib.contextmanager
    def _state_call(self, call: str) -> Iterator[None]:
        """One simulation-control call (SPEC §13): refused inside any plugin callback, then run
        with stepping held."""
        check_outside_callbacks(f"{call}()")
        with self.hold_stepping(call):
            yield

    def reset(
        self,
        keyframe: int | str | None = None,
        *,
        joint_positions: Mapping[str, Any] | None = None,
        joint_velocities: Mapping[str, Any] | None = None,
        keep_time: bool = False,
        seed: int | None = None,
    ) -> None:
        """World reset to the initial state or a keyframe, with the `randomize` terms drawn
        (`seed`: the generator is seeded anew with it first), then the joint overrides; then every
        plugin's reset/on_reset, which sees the final state and the drawn model (SPEC §5, §13,
        §21)."""
        check_outside_callbacks("reset()")
        with self.hold_stepping("reset", defer_interrupts=True):
            self._reset_world(keyframe, joint_positions, joint_velocities, keep_time, seed)
            self._record_call("reset", keyframe=keyframe, joint_positions=joint_positions,
                              joint_velocities=joint_velocities, keep_time=keep_time, seed=seed)

    def _reset_world(self, keyframe: int | str | None, joint_positions: object,
                     joint_velocities: object, keep_time: object, seed: object = None) -> None:
        """The reset itself, with stepping held by the caller: the core carries it out."""
        self._core.reset_world(*self._reset_target(keyframe, joint_positions, joint_velocities,
                                                   keep_time, seed))

    def _reset_target(self, keyframe: int | str | None, joint_positions: object,
                      joint_velocities: object, keep_time: object, seed: object = None
                      ) -> tuple[int, np.ndarray, np.ndarray, bool]:
        """Where a reset goes, as EnvCore.reset_world takes it: the keyframe's index (-1: the
        initial state) and the whole qpos and qvel, the initial_joint_* parameters (no keyframe),
        the `randomize` state perturbation and the overrides applied; the `randomize` model
        terms are drawn here (Python's generator). Everything is checked first, before anything
        changes: the overrides, the keyframe, the seed, the initial state (ConfigError)."""
        model = self._model
        if not isinstance(keep_time, bool):
            raise ValueError(f"keep_time must be a bool, got {keep_time!r}")
        positions = joints.checked_joint_values(model, joint_positions, "positions")
        velocities = joints.checked_joint_values(model, joint_velocities, "velocities")
        key_id = -1 if keyframe is None else object_id(
            model, mujoco.mjtObj.mjOBJ_KEY, "keyframe", model.nkey, keyframe)
        checked = checked_seed(seed, "seed")
        target = mujoco.MjData(model)
        _apply_initial_state(model, target, self._params, self._namespace)
        if checked is not None:
            self._rng = np.random.default_rng(checked)
        self._randomizer.draw_model(model, self._rng)  # from the nominal model, never compounded
        if key_id >= 0:
            mujoco.mj_resetDataKeyframe(model, target, key_id)
        self._randomizer.perturb_state(model, target, self._rng)
        joints.write_joint_values(target, positions, velocities)
        return key_id, target.qpos.copy(), target.qvel.copy(), keep_time

    def _resolve_reset_request(self, keyframe: str | None
                               ) -> tuple[int, np.ndarray, np.ndarray, bool] | None:
        """A plugin's reset request, on the stepping thread at a step boundary: its target (the
        keyframe names and the initial_joint_* parameters are this env's, in Python); the core
        carries the reset out. None, logged, where there is none: no caller to raise it to."""
        try:
            return self._reset_target(keyframe, None, None, False)
        except Exception:
            _log.exception("the reset a plugin requested (keyframe %r) failed", keyframe)
            return None

    def _report_reset_request_failure(self, keyframe: str | None, message: str) -> None:
        _log.error("the reset a plugin requested (keyframe %r) failed: %s", keyframe, message)

    # -- reload -------------------------------------------------------------------------------

    def reload(self, model: ModelLike | None = None) -> None:
        """Re-reads the model and the plugin configuration and swaps them in (SPEC §6).

        Everything that can fail is prepared first, while the running generation keeps running;
        a failure raises and changes nothing.
        """
        self._check_open()
        # Refused before any work (the preparation reads the live cameras): from a plugin's
        # callback or inside an acquire_plugin() block the swap could only deadlock.
        check_outside_callbacks("reload()")
        self._core.check_call("reload()", ["acquire_block"])
        source = self._source if model is None else _ModelSource.of(model)
        new_model = source.compile()
        if self._params_path is not None:
            # The file is read again over what the server holds (its values win); the env keeps
            # its one ParameterServer, so references to env.params stay valid.
            params = ParameterServer(self._params.to_dict())
            params.load_yaml(self._params_path)
        else:
            params = self._params
        specs = load_plugin_specs(params, self._namespace)
        options.apply_options(new_model, params.get(resolve_name("options", self._namespace),
                                                        None))
        # Seeded anew from the parameter, as at construction; the env's own until the swap.
        randomizer, rng = self._randomization(new_model, params)
        randomizer.draw_model(new_model, rng)
        new_data = mujoco.MjData(new_model)
        _apply_initial_state(new_model, new_data, params, self._namespace)
        randomizer.perturb_state(new_model, new_data, rng)
        new_control_data = mujoco.MjData(new_model)
        camera_configs = self._cameras.configs_for_reload(new_model, params, self._namespace)

        with self.hold_stepping("reload", defer_interrupts=True):
            self._core.host.quiesce_and_destroy()
            self._cameras.retire()
            self._model, self._data = new_model, new_data
            self._control_data = new_control_data
            if params is not self._params:
                self._params.set("/", params.to_dict())
            self._source, self._specs = source, specs
            self._randomizer, self._rng = randomizer, rng
            if model is not None:
                self._source_label = source_label(model)
            # The core holds the old model and data until no thread can reach them any more.
            self._core.bind(new_model, new_data, new_control_data)
            self._core.reset_step_count()
            mujoco.mj_forward(new_model, new_data)  # no active generation: callback-free
            self._cameras.begin_load(new_model, self.model_generation)
            self._load_plugins()
            missing = self._cameras.finish_load(new_model, self._params, self._namespace,
                                                camera_configs)
            # A model given as a mujoco.MjModel has no text to record: replay reloads the source.
            self._record_call("reload", model=os.fspath(model) if isinstance(
                model, (str, os.PathLike)) else None)
        if missing:
            raise CameraRig.missing_error(new_model, missing)
        self._check_strict("reload")

    # -- geometry -----------------------------------------------------------------------------

    def set_geom_properties(
        self,
        geom: int | str,
        *,
        size: Sequence[float] | None = None,
        rgba: Sequence[float] | None = None,
        friction: Sequence[float] | None = None,
        contype: int | None = None,
        conaffinity: int | None = None,
    ) -> None:
        """Changes one geom between steps and notifies every plugin's on_geom_changed.

        Everything is checked before anything changes, with stepping paused (so a reload cannot
        swap the model in between).
        """
        with self.hold_stepping("set_geom_properties", defer_interrupts=True):
            geom_id = geometry.set_geom_properties(
                self._model, geom, size=size, rgba=rgba, friction=friction, contype=contype,
                conaffinity=conaffinity)
            # The edit is the geom's new nominal value: later draws start from it.
            for attribute, value in (("geom_rgba", rgba), ("geom_friction", friction)):
                if value is not None:
                    self._randomizer.note_edit(self._model, attribute, geom_id)
            self._core.notify_geometry_changed(geom_id)
            self._record_call("set_geom_properties", geom=geom, size=size, rgba=rgba,
                              friction=friction, contype=contype, conaffinity=conaffinity)

    # -- simulation control (SPEC §13; the logic is in mjfast.joints, .kinematics, .options) ---

    def pause(self) -> None:
        """Freezes the physics thread at a step boundary (before start(): it starts paused)."""
        check_outside_callbacks("pause()")
        self._check_open()
        self._core.pause_stepping()

    def resume(self) -> None:
        """Lets the physics thread step again, its pacing re-anchored (no catch-up burst)."""
        check_outside_callbacks("resume()")
        self._check_open()
        self._core.resume_stepping()

    @property
    def paused(self) -> bool:
        return bool(self._core.stepping_paused)

    @property
    def step_count(self) -> int:
        """Steps since the last reset or reload."""
        return int(self._core.step_count)

    def get_state(self) -> SimState:
        """The simulation state at a step boundary (SPEC §20): physics, step count and every
        plugin's `get_state()`. Safe from any thread while the physics thread runs (it waits for
        the step in progress); LogicError from inside a plugin callback."""
        return capture(self._core)

    def set_state(self, state: SimState) -> None:
        """Restores `state` at a step boundary (SPEC §20): physics (`mj_setState`), step count,
        each plugin's `set_state(value)`, then `mj_forward` without callbacks; no plugin `reset`
        runs and staged control commands are dropped, as at a reset. ValueError for a state of
        another model (naming both) or plugins this env does not have; TypeError for anything
        but a SimState; PluginError when a plugin refuses its value. On any error nothing
        changed. Stepping on with the same commands reproduces the original run bit for bit."""
        recording = self._recording
        if recording is None or self._core.host._in_callback():
            restore(self._core, state)  # (refused inside a callback, as it says)
            return
        self._core.hold_steps()  # one boundary for the restore and its record (re-entrant)
        try:
            restore(self._core, state)
            recording.call("set_state", {"state": state})
        finally:
            self._core.release_steps()

    def get_joint_state(self, names: Sequence[str] | None = None) -> dict[str, JointState]:
        """{name: JointState(position, velocity)} for `names` (None: every joint; an unnamed one
        is `joint_<id>`)."""
        with self._state_call("get_joint_state"):
            return joints.joint_state(self._model, self._data, names)

    def set_joint_state(self, positions: Mapping[str, Any] | None = None,
                        velocities: Mapping[str, Any] | None = None) -> None:
        """Writes joint positions/velocities (name -> value), all checked first; mj_forward."""
        with self._state_call("set_joint_state"):
            model, data = self._model, self._data
            checked_positions = joints.checked_joint_values(model, positions, "positions")
            checked_velocities = joints.checked_joint_values(model, velocities, "velocities")
            joints.write_joint_values(data, checked_positions, checked_velocities)
            kinematics.forward(model, data)
            self._record_call("set_joint_state", positions=positions, velocities=velocities)

    def get_body_state(self, body: str | int, *, frame: str | int | None = None) -> BodyState:
        """Pose and twist of `body` for the current qpos/qvel, in world or body `frame` axes."""
        # Held only for the copy: the kinematics run after stepping goes on.
        with self._state_call("get_body_state"):
            snapshot = kinematics.StateSnapshot.take(self._model, self._data)
        return kinematics.body_state(snapshot, body, frame)

    def set_body_state(self, states: Mapping[str | int, Mapping[str, Any]], *,
                       frame: str | int | None = None) -> None:
        """Sets free bodies' pos/quat/linvel/angvel (world or `frame` axes), a batch at once."""
        with self._state_call("set_body_state"):
            kinematics.set_body_states(self._model, self._data, states, frame)
            self._record_call("set_body_state", states=states, frame=frame)

    def apply_options(self, patch: Mapping[str, Any]) -> None:
        """One transaction on model.opt (ConfigError naming the key; nothing changed on error)."""
        with self._state_call("apply_options"):
            options.apply_options(self._model, patch)
            kinematics.forward(self._model, self._data)
            self._record_call("apply_options", patch=patch)

    def set_equality_active(self, name: str | int, active: bool) -> None:
        """Turns one equality constraint on or off."""
        with self._state_call("set_equality_active"):
            kinematics.set_equality_active(self._model, self._data, name, active)
            self._record_call("set_equality_active", name=name, active=active)

    def set_realtime_factor(self, factor: float | None) -> None:
        """The physics thread's pace (None: unbounded), changed at once if it runs."""
        check_outside_callbacks("set_realtime_factor()")
        self._check_open()
        self._core.set_realtime_factor(factor)  # ValueError unless None or positive, finite

    @property
    def realtime_factor(self) -> float | None:
        """The target pace of the physics thread (None: unbounded)."""
        factor = self._core.realtime_factor
        return None if factor is None else float(factor)

    @property
    def measured_realtime_factor(self) -> float:
        """Simulated time over wall time of the physics thread's recent steps (SPEC §13)."""
        return float(self._core.measured_realtime_factor())

    def info(self) -> dict[str, Any]:
        """What is loaded and how it runs (SPEC §13)."""
        check_outside_callbacks("info()")
        return {
            "model_name": model_name(self._model),
            "model_source": self._source_label,
            "model_generation": self.model_generation,
            "plugin_generation": self.plugin_generation,
            "loads": self.model_generation,  # one bind at construction, one per reload
            "running": self.running,
            "paused": self.paused,
            "step_count": self.step_count,
            "time": float(self._data.time),
            "realtime_factor": self.realtime_factor,
            "measured_realtime_factor": self.measured_realtime_factor,
            # What the `randomize` terms drew at the last reset (SPEC §21): per term, the model
            # values of its objects, or the noise added to their joints.
            "randomization": copy.deepcopy(self._randomizer.last),
        }

    def launch_viewer(self, **options: Any) -> Any:
        """MuJoCo's viewer on this env (SPEC §15): a handle with `is_running()` and `close()`;
        `mjfast.viewer.NoDisplayError` without a display. Options: see `mjfast.viewer.Viewer`."""
        from mjfast.viewer import launch_viewer  # GLFW is loaded only by those who view

        self._check_open()
        return launch_viewer(self, **options)

    def launch_web_viewer(self, port: int = 8080, host: str = "127.0.0.1",
                          **options: Any) -> Any:
        """The browser viewer on this env (SPEC §22), served on http://host:port/ (loopback
        unless a host is given): a handle with `url` and `close()`. Needs the extra mjfast[web]
        (an ImportError naming it otherwise). Options: see `mjfast.web.WebViewer`."""
        from mjfast.web import launch_web_viewer  # viser is loaded only by those who view

        self._check_open()
        return launch_web_viewer(self, port=port, host=host, **options)

    # -- cameras ------------------------------------------------------------------------------

    def open_offscreen_camera(self, name: str) -> OffscreenCamera:
        """A handle on the model's camera `name`, rendered off the physics thread (SPEC §10)."""
        self._check_open()
        return self._cameras.open(name, self._model, self._params, self._namespace)

    # -- plugins ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def acquire_plugin(
        self,
        name: str,
        model_generation: int | None = None,
        plugin_generation: int | None = None,
    ) -> Iterator[Any]:
        """Scoped access to a plugin's backend object; no dispatch runs while it is held."""
        self._check_open()
        with scoped_plugin(self._core, name, model_generation, plugin_generation,
                           [spec.name for spec in self._specs]) as plugin:
            yield plugin

    def statistics(self) -> dict[str, Any]:
        """Per-plugin and env figures (SPEC §8)."""
        env = dict(self._core.statistics())
        env["model_generation"] = self.model_generation
        env["plugin_generation"] = self.plugin_generation
        env["timing_sample_interval"] = int(_core.TIMING_SAMPLE_INTERVAL)
        # MuJoCo's own counts in the data, by kind (since the data's last reset): a warning is
        # otherwise only a line in MUJOCO_LOG.TXT.
        warnings = self._data.warning
        env["warnings"] = {name: int(warnings[index].number)
                           for name, index in _WARNING_KINDS.items()}
        env["paused"] = self.paused
        env["step_count"] = self.step_count
        plugins = []
        for report in self._core.host.report():
            info = plugin_info(report)
            # JSON-able as it is: the state is a str enum, the failure a plain dict.
            failure = None if info.failure is None else {"phase": info.failure.phase,
                                                         "message": info.failure.message,
                                                         "traceback": info.failure.traceback}
            plugins.append({"name": info.name, "type": info.type, "state": info.state,
                            "failure": failure, **info.stats})
        return {"env": env, "plugins": plugins, "render": self._cameras.statistics()}

    # -- lifecycle ----------------------------------------------------------------------------

    # -- recording (SPEC §20; mjfast.recording) -------------------------------------------------

    def record(self, path: str | os.PathLike[str], *, topics: Sequence[str] | None = None,
               state_every: int | None = None) -> Any:
        """Records this env into a new rosbag2 bag (MCAP) at `path` until the returned
        Recording's stop() or close(): the bridged topics (all, or `topics`) through the ROS 2
        conversion table, /clock, the commands that reach the simulation on /mjfast/commands and
        a SimState every `state_every` steps (default: every simulated second) on /mjfast/state.
        Needs the extra mjfast[ros2] (rosbags)."""
        self._check_open()
        from mjfast.recording import Recording  # rosbags is loaded only by those who record

        return Recording._start(self, path, topics, state_every)

    def _record_call(self, call: str, /, **args: Any) -> None:
        """A call that changed the simulation, recorded at this step boundary (held)."""
        recording = self._recording
        if recording is not None:
            recording.call(call, args)

    def _check_open(self) -> None:
        if self._closed:
            raise LogicError("the env is closed")

    def close(self) -> None:
        """Stops the physics thread, unloads every plugin and releases the hooks' pair."""
        if getattr(self, "_closed", True):
            return
        with self._lifecycle("close"):
            if self._closed:
                return
            if self._recording is not None:
                try:
                    self._recording.stop()  # its last state, then the bag closed
                except OSError as error:  # the bag's own failure: the env closes all the same
                    _log.error("%s", error)
            self._core.close()  # refuses (LogicError) inside an acquire_plugin block
            self._closed = True
            self._cameras.close()  # the physics thread has stopped: retire, stop rendering
        _open_envs.discard(self)
        release_hooks(self)

    def __enter__(self) -> MujocoEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self.running else "idle")
        return (f"<MujocoEnv {self._namespace} nq={self._model.nq} "
                f"plugins={len(self._specs)} {state}>")


def _warn_unread_parameters(params: ParameterServer, namespace: str, specs: Sequence[PluginSpec],
                             read: set[str]) -> None:
    """One warning per parameter directly in the env's namespace that nothing reads: not one the
    env reads (ENV_PARAMETERS), not a plugin's namespace, not read by a plugin while it loaded
    (a key dedented out of its plugin entry lands here). It names the closest plugin
    configuration key, or env parameter, if one is close."""
    try:
        tree = params.to_dict(namespace)
    except ValueError:  # the namespace holds a value, not parameters
        return
    owned = set(ENV_PARAMETERS) | {spec.name for spec in specs}
    no_plugins = params.search(namespace, "MujocoPlugins") is None
    for key, value in tree.items():
        name = resolve_name(key, namespace)
        if key in owned or any(seen == name or seen.startswith(name + "/")
                               or name.startswith(seen.rstrip("/") + "/") for seen in read):
            continue
        if namespace == "/" and isinstance(value, dict):
            continue  # at the root, a mapping is most likely another env's or tool's namespace
        if no_plugins and close_matches(key, ["MujocoPlugins"], cutoff=0.8):
            # A misspelt MujocoPlugins: the CLI says where it looked for the plugin list.
            continue
        _log.warning("parameter %s is not read by mjfast%s", name,
                     _closest_key_hint(key, specs))


def _closest_key_hint(key: str, specs: Sequence[PluginSpec]) -> str:
    """"; did you mean ..." naming the configuration key of a plugin (from its entry or its
    type's config_keys) or the env parameter closest to `key`, or ""."""
    candidates: list[tuple[str, str]] = []  # (key, where)
    for spec in specs:
        keys = set(spec.config)
        with contextlib.suppress(Exception):  # a type that does not resolve has no schema
            keys |= set(getattr(resolve_plugin(spec.type), "config_keys", None) or ())
        candidates += [(known, f"the key '{known}' of plugin '{spec.name}' ({spec.type})")
                       for known in sorted(keys)]
    candidates += [(known, f"the env parameter '{known}'") for known in ENV_PARAMETERS]
    for known, where in candidates:
        if known == key:
            return f"; did you mean {where}?"
    close = close_matches(key, [known for known, _ in candidates], n=1, cutoff=0.75)
    if close:
        where = next(where for known, where in candidates if known == close[0])
        return f"; did you mean {where}?"
    return ""


def _weak_method(method: Any) -> Any:
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise MjfastError("the env that owns this plugin host was garbage-collected")
        return bound(*args)

    return call
