"""MujocoEnv: the server that alone owns a model, its data, stepping and the plugin lifecycle.

The env compiles models, reads the parameter server, creates plugins (the factory) and runs the
reload transaction; stepping, the hooks and dispatch are in the compiled EnvCore and PluginHost.
It does not own MuJoCo's global callbacks' implementation (`mjfast.hooks`) nor parse configuration
(`mjfast.plugin_config`).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import logging
import math
import os
import signal
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import mujoco
import numpy as np

from mjfast import sim_control
from mjfast._native import _core
from mjfast.camera import CameraRig, OffscreenCamera
from mjfast.config_schema import check_config
from mjfast.control import ControlInterface
from mjfast.discovery import resolve_plugin
from mjfast.errors import ConfigError, LogicError, MjfastError, StaleGenerationError
from mjfast.hooks import hold_hooks, release_hooks
from mjfast.native import config_json
from mjfast.node import Bus, Node
from mjfast.params import ParameterServer, resolve_name
from mjfast.plugin import (
    ControlPlugin,
    MujocoPlugin,
    PluginInfo,
    PluginLoadFailure,
    PluginState,
    overridden_callbacks,
)
from mjfast.plugin_config import PluginSpec, load_plugin_specs
from mjfast.services import advertise_simulation_services
from mjfast.sim_control import BodyState, JointState

__all__ = ["MujocoEnv"]

ModelLike: TypeAlias = str | os.PathLike[str] | mujoco.MjModel


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
        if isinstance(model, (str, os.PathLike)):
            text = os.fspath(model)
            if text.lstrip().startswith("<"):
                return cls(xml=text)
            # Resolved now: reload() re-reads the same file whatever the working directory then.
            return cls(path=Path(text).resolve())
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


# Sizes of one joint's slice of qpos and qvel, by mjtJoint.
_JOINT_SIZES = {
    mujoco.mjtJoint.mjJNT_FREE: (7, 6),
    mujoco.mjtJoint.mjJNT_BALL: (4, 3),
    mujoco.mjtJoint.mjJNT_SLIDE: (1, 1),
    mujoco.mjtJoint.mjJNT_HINGE: (1, 1),
}


def _apply_initial_state(
    model: mujoco.MjModel, data: mujoco.MjData, params: ParameterServer, namespace: str
) -> None:
    """Writes `initial_joint_positions` / `initial_joint_velocities` over the default state."""
    for key, address, size_index in (
        ("initial_joint_positions", model.jnt_qposadr, 0),
        ("initial_joint_velocities", model.jnt_dofadr, 1),
    ):
        name = resolve_name(key, namespace)
        values = params.get(name, None)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            raise ConfigError(f"{name}: expected a mapping from joint name to value, "
                              f"got {type(values).__name__}")
        target = data.qpos if size_index == 0 else data.qvel
        for joint, value in values.items():
            joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, str(joint))
            if joint_id < 0:
                known = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, i)
                         for i in range(model.njnt)]
                raise ConfigError(f"{name}: the model has no joint {joint!r} "
                                  f"(its joints: {', '.join(n for n in known if n) or 'none'})")
            size = _JOINT_SIZES[mujoco.mjtJoint(model.jnt_type[joint_id])][size_index]
            array = np.atleast_1d(np.asarray(value, dtype=float)) if _is_numeric(value) else None
            if array is None or array.shape != (size,) or not np.all(np.isfinite(array)):
                raise ConfigError(f"{name}/{joint}: expected {size} finite number"
                                  f"{'s' if size > 1 else ''}, got {value!r}")
            start = int(address[joint_id])
            target[start:start + size] = array


def _is_numeric(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, Sequence) and not isinstance(value, str) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)


class _ScopedPlugin:
    """What acquire_plugin yields: the plugin, usable only inside its block."""

    __slots__ = ("_name", "_target")

    def __init__(self, name: str, target: object) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_target", target)

    def _checked(self) -> object:
        target = object.__getattribute__(self, "_target")
        if target is None:
            name = object.__getattribute__(self, "_name")
            raise LogicError(f"plugin {name!r} was used after its acquire_plugin() block ended")
        return target

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._checked(), attribute)
        if callable(value) and not isinstance(value, type):
            # A method taken out of the block refuses to run after it, like the plugin itself.
            @functools.wraps(value)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                self._checked()
                return value(*args, **kwargs)

            return guarded
        return value

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(acquired, MyPlugin) holds, as for the plugin
        return type(self._checked())

    def __setattr__(self, attribute: str, value: Any) -> None:
        setattr(self._checked(), attribute, value)

    def __repr__(self) -> str:
        target = object.__getattribute__(self, "_target")
        return f"<acquired {target!r}>" if target is not None else "<released plugin>"

    def _release(self) -> None:
        object.__setattr__(self, "_target", None)


class _EnvHost:
    """`env.host`: the compiled PluginHost with SPEC §6's names, where the calls that replace a
    generation pause stepping first (a physics thread must not step through them) and
    `dispatch_render` makes its scene when given none. Everything else is the host's own."""

    __slots__ = ("_env", "_host")

    def __init__(self, env: MujocoEnv) -> None:
        self._env = env
        self._host = env._core.host

    def load_generation(self, model_generation: int, plugin_generation: int) -> None:
        with self._env._paused("host.load_generation"):
            self._host.load_generation(model_generation, plugin_generation)

    def quiesce_and_destroy(self) -> None:
        with self._env._paused("host.quiesce_and_destroy"):
            self._host.quiesce_and_destroy()

    def dispatch_render(self, model_generation: int | None = None,
                        scene: mujoco.MjvScene | None = None) -> None:
        if scene is None:
            scene = mujoco.MjvScene(self._env.model, maxgeom=1000)
        self._host.dispatch_render(scene, model_generation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)


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

    def __init__(
        self,
        model: ModelLike,
        *,
        params: ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        namespace: str = "/mujoco_server",
        render_sync: bool = False,
    ) -> None:
        self._closed = True  # until construction succeeds: close() and __del__ do nothing
        self._namespace = resolve_name(namespace)
        self._params, self._params_path = _parameter_server(params)
        self._source = _ModelSource.of(model)
        new_model = model if isinstance(model, mujoco.MjModel) else self._source.compile()
        self._specs = load_plugin_specs(self._params, self._namespace)
        sim_control.apply_options(new_model, self._params.get(
            resolve_name("options", self._namespace), None))
        new_data = mujoco.MjData(new_model)
        _apply_initial_state(new_model, new_data, self._params, self._namespace)
        self._source_label = sim_control.source_label(model)

        self.bus = Bus()
        self._lifecycle_lock = threading.Lock()  # serialises reset / reload / close / geom edits
        self._lifecycle_owner: int | None = None  # the thread inside a lifecycle operation
        self._lifecycle_operation = ""
        self._model = new_model
        self._data = new_data
        # The control bridge's scratch data (update_read/update_write plugins run on it).
        self._control_data = mujoco.MjData(new_model)
        self._core = _core.EnvCore()
        self.control = ControlInterface(self._core)
        # The compiled step itself, bound once: a Python loop of env.step(1) pays no extra frame
        # (MujocoEnv.step below documents it and behaves the same).
        self.step = self._core.step  # type: ignore[method-assign]
        hold_hooks(self)
        self._core.bind(new_model, new_data, self._control_data)
        mujoco.mj_forward(new_model, new_data)  # no generation yet: callback-free
        # The factory holds the env weakly: the core (and so the host and its factory) is owned
        # by the env, and a cycle through C++ would keep both alive forever.
        self._core.set_factory(_weak_method(self._make_adapters))
        self._cameras = CameraRig(self._core, render_sync)
        self._core.set_reset_request_handler(_weak_method(self._honour_reset_request))
        advertise_simulation_services(self)  # before plugins load: they may call them later
        self._closed = False
        _open_envs.add(self)
        with self._paused("__init__"):  # a plugin's load() stepping or resetting is refused
            self._cameras.begin_load(new_model, self.model_generation)
            self._core.load_next_plugin_generation()
            self._cameras.finish_load(new_model, self._params, self._namespace)

    # -- the plugin factory ------------------------------------------------------------------

    def _make_adapters(self, model_generation: int, plugin_generation: int) -> list[Any]:
        """Instantiates the configured plugins of a new generation (phase `factory`)."""
        entries = []
        for spec in self._specs:
            try:
                entries.append(self._make_adapter(spec))
            except Exception as error:  # one plugin's failure is its own: isolate it
                entries.append(_core.failed_adapter(spec.name, spec.type,
                                                    f"{type(error).__name__}: {error}"))
        return entries

    def _make_adapter(self, spec: PluginSpec) -> Any:
        target = resolve_plugin(spec.type)
        # A factory failure of this plugin, which the report already names.
        check_config("", spec.config, getattr(target, "config_keys", None))
        if getattr(target, "__mjfast_native__", False):
            return _core.native_adapter(
                name=spec.name, type=spec.type, library_path=target.library_path(),
                symbol=target.symbol, config_json=config_json(spec.config),
                camera_opener=_weak_method(self.open_offscreen_camera),
                publisher=Node(self._params, f"{self._namespace.rstrip('/')}/{spec.name}",
                               self.bus, spec.name).publish)
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
        style = "control" if isinstance(instance, ControlPlugin) else "mujoco"
        return _core.python_adapter(
            name=spec.name, type=spec.type, instance=instance, style=style, model=self._model,
            data=self._data, control_data=self._control_data, node=node,
            callbacks=sorted(overridden_callbacks(target)),
        )

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
    def host(self) -> _EnvHost:
        """The PluginHost (SPEC §6), for tests and advanced users."""
        return _EnvHost(self)

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
        return tuple(_plugin_info(report) for report in self._core.host.report())

    # -- stepping -----------------------------------------------------------------------------

    def step(self, n: int = 1) -> None:
        """Runs `n` physics steps in compiled code (SPEC §5)."""
        self._core.step(n)

    def start(self, realtime_factor: float | None = 1.0) -> None:
        """Starts the physics thread, paced to wall clock at `realtime_factor` (None: unpaced)."""
        self._check_open()
        self._core.start(realtime_factor)

    def stop(self) -> None:
        """Stops the physics thread after the step in progress; idempotent."""
        self._core.stop()

    @contextlib.contextmanager
    def _lifecycle(self, operation: str, *, defer_interrupts: bool = True) -> Iterator[None]:
        """One lifecycle operation (construction's load, reset, reload, close, a geometry edit):
        serialised with the others, refused (LogicError) when this thread is already inside one
        of this env's (a plugin's load, reset or unload calling back into the env would recurse
        or deadlock), and, where it runs plugin code, not cut in half by Ctrl-C (see
        `_interrupts_deferred`)."""
        me = threading.get_ident()
        if self._lifecycle_owner == me:
            raise LogicError(
                f"env.{operation}() called from inside env.{self._lifecycle_operation}() "
                f"(a plugin's load/init, reset/on_reset or unload/cleanup calling back into the "
                f"env) would recurse or deadlock")
        deferred = _interrupts_deferred() if defer_interrupts else contextlib.nullcontext()
        with deferred, self._lifecycle_lock:
            self._lifecycle_owner, self._lifecycle_operation = me, operation
            try:
                yield
            finally:
                self._lifecycle_owner, self._lifecycle_operation = None, ""

    @contextlib.contextmanager
    def _paused(self, operation: str, *, defer_interrupts: bool = True) -> Iterator[None]:
        """A lifecycle operation that holds stepping at a step boundary (the physics thread
        waits, env.step blocks) for its duration."""
        with self._lifecycle(operation, defer_interrupts=defer_interrupts):
            self._check_open()
            self._core.pause()
            try:
                yield
            finally:
                self._core.resume()

    def reset(
        self,
        keyframe: int | str | None = None,
        *,
        joint_positions: Mapping[str, Any] | None = None,
        joint_velocities: Mapping[str, Any] | None = None,
        keep_time: bool = False,
    ) -> None:
        """World reset to the initial state or a keyframe, then the joint overrides; then every
        plugin's reset/on_reset, which sees the final state (SPEC §5, §13)."""
        sim_control.check_outside_callbacks("reset()")
        with self._paused("reset"):
            self._reset_world(keyframe, joint_positions, joint_velocities, keep_time)

    def _reset_world(self, keyframe: int | str | None, joint_positions: object,
                     joint_velocities: object, keep_time: object) -> None:
        """The reset itself, with stepping held by the caller."""
        model, data = self._model, self._data
        if not isinstance(keep_time, bool):
            raise ValueError(f"keep_time must be a bool, got {keep_time!r}")
        # Everything is checked before anything changes: the overrides, the keyframe, the
        # initial state (ConfigError).
        positions = sim_control.checked_joint_values(model, joint_positions, "positions")
        velocities = sim_control.checked_joint_values(model, joint_velocities, "velocities")
        time = data.time
        if keyframe is None:
            initial = mujoco.MjData(model)
            _apply_initial_state(model, initial, self._params, self._namespace)
            mujoco.mj_resetData(model, data)
            data.qpos[:] = initial.qpos
            data.qvel[:] = initial.qvel
        else:
            key_id = _object_id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe, "keyframe",
                                model.nkey)
            mujoco.mj_resetDataKeyframe(model, data, key_id)
        sim_control.write_joint_values(data, positions, velocities)
        if keep_time:
            data.time = time
        self._core.clear_simulation_fault()  # a MuJoCo error's undefined state is gone
        with _core.CallbackFree():  # plugins learn of a reset through reset(), not control
            mujoco.mj_forward(model, data)
        self._core.reset_step_count()
        self._cameras.notify_time_reset()
        self._core.reset_plugins()

    def _honour_reset_request(self, keyframe: str | None) -> None:
        """A plugin's reset request, on the stepping thread at a step boundary: stepping is held
        there already (so no pause), and an error has no caller to go to but the log."""
        try:
            self._reset_world(keyframe, None, None, False)
        except Exception:
            logging.getLogger("mjfast.env").exception(
                "the reset a plugin requested (keyframe %r) failed", keyframe)

    # -- reload -------------------------------------------------------------------------------

    def reload(self, model: ModelLike | None = None) -> None:
        """Re-reads the model and the plugin configuration and swaps them in (SPEC §6).

        Everything that can fail is prepared first, while the running generation keeps running;
        a failure raises and changes nothing.
        """
        self._check_open()
        # Refused before any work (the preparation reads the live cameras): from a plugin's
        # callback or inside an acquire_plugin() block the swap could only deadlock.
        sim_control.check_outside_callbacks("reload()")
        if self._core.host._scope_held():
            raise LogicError("reload() inside an acquire_plugin() block would deadlock: leave the "
                             "block first")
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
        sim_control.apply_options(new_model, params.get(resolve_name("options", self._namespace),
                                                        None))
        new_data = mujoco.MjData(new_model)
        _apply_initial_state(new_model, new_data, params, self._namespace)
        new_control_data = mujoco.MjData(new_model)
        camera_configs = self._cameras.configs_for_reload(new_model, params, self._namespace)

        with self._paused("reload"):
            self._core.host.quiesce_and_destroy()
            self._cameras.retire()
            self._model, self._data = new_model, new_data
            self._control_data = new_control_data
            if params is not self._params:
                self._params.set("/", params.to_dict())
            self._source, self._specs = source, specs
            if model is not None:
                self._source_label = sim_control.source_label(model)
            # The core holds the old model and data until no thread can reach them any more.
            self._core.bind(new_model, new_data, new_control_data)
            self._core.reset_step_count()
            mujoco.mj_forward(new_model, new_data)  # no active generation: callback-free
            self._cameras.begin_load(new_model, self.model_generation)
            self._core.load_next_plugin_generation()
            missing = self._cameras.finish_load(new_model, self._params, self._namespace,
                                                camera_configs)
        if missing:
            raise CameraRig.missing_error(new_model, missing)

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
        with self._paused("set_geom_properties"):
            model = self._model
            geom_id = _object_id(model, mujoco.mjtObj.mjOBJ_GEOM, geom, "geom", model.ngeom)
            changes = _checked_geom_changes(model, geom_id, size=size, rgba=rgba,
                                            friction=friction, contype=contype,
                                            conaffinity=conaffinity)
            if "size" in changes:
                geom_type = mujoco.mjtGeom(model.geom_type[geom_id])
                model.geom_size[geom_id] = changes["size"]
                rbound, half_extent = _PRIMITIVE_BOUNDS[geom_type](changes["size"])
                model.geom_rbound[geom_id] = rbound
                model.geom_aabb[geom_id] = np.concatenate([np.zeros(3), half_extent])
                _refresh_body_bvh(model, int(model.geom_bodyid[geom_id]))
            for field in ("rgba", "friction", "contype", "conaffinity"):
                if field in changes:
                    getattr(model, f"geom_{field}")[geom_id] = changes[field]
            self._core.notify_geometry_changed(geom_id)

    # -- simulation control (SPEC §13; the logic is in mjfast.sim_control) ---------------------

    def pause(self) -> None:
        """Freezes the physics thread at a step boundary (before start(): it starts paused)."""
        sim_control.check_outside_callbacks("pause()")
        self._check_open()
        self._core.pause_stepping()

    def resume(self) -> None:
        """Lets the physics thread step again, its pacing re-anchored (no catch-up burst)."""
        sim_control.check_outside_callbacks("resume()")
        self._check_open()
        self._core.resume_stepping()

    @property
    def paused(self) -> bool:
        return bool(self._core.stepping_paused)

    @property
    def step_count(self) -> int:
        """Steps since the last reset or reload."""
        return int(self._core.step_count)

    def get_joint_state(self, names: Sequence[str] | None = None) -> dict[str, JointState]:
        """{name: JointState(position, velocity)} for `names` (None: every named joint)."""
        sim_control.check_outside_callbacks("get_joint_state()")
        with self._paused("get_joint_state", defer_interrupts=False):
            return sim_control.joint_state(self._model, self._data, names)

    def set_joint_state(self, positions: Mapping[str, Any] | None = None,
                        velocities: Mapping[str, Any] | None = None) -> None:
        """Writes joint positions/velocities (name -> value), all checked first; mj_forward."""
        sim_control.check_outside_callbacks("set_joint_state()")
        with self._paused("set_joint_state", defer_interrupts=False):
            model, data = self._model, self._data
            checked_positions = sim_control.checked_joint_values(model, positions, "positions")
            checked_velocities = sim_control.checked_joint_values(model, velocities, "velocities")
            sim_control.write_joint_values(data, checked_positions, checked_velocities)
            sim_control.forward(model, data)

    def get_body_state(self, body: str | int, *, frame: str | int | None = None) -> BodyState:
        """Pose and twist of `body` for the current qpos/qvel, in world or body `frame` axes."""
        sim_control.check_outside_callbacks("get_body_state()")
        # Held only for the copy: the kinematics run after stepping goes on.
        with self._paused("get_body_state", defer_interrupts=False):
            snapshot = sim_control.StateSnapshot.take(self._model, self._data)
        return sim_control.body_state(snapshot, body, frame)

    def set_body_state(self, states: Mapping[str | int, Mapping[str, Any]], *,
                       frame: str | int | None = None) -> None:
        """Sets free bodies' pos/quat/linvel/angvel (world or `frame` axes), a batch at once."""
        sim_control.check_outside_callbacks("set_body_state()")
        with self._paused("set_body_state", defer_interrupts=False):
            sim_control.set_body_states(self._model, self._data, states, frame)

    def apply_options(self, patch: Mapping[str, Any]) -> None:
        """One transaction on model.opt (ConfigError naming the key; nothing changed on error)."""
        sim_control.check_outside_callbacks("apply_options()")
        with self._paused("apply_options", defer_interrupts=False):
            sim_control.apply_options(self._model, patch)
            sim_control.forward(self._model, self._data)

    def set_equality_active(self, name: str | int, active: bool) -> None:
        """Turns one equality constraint on or off."""
        sim_control.check_outside_callbacks("set_equality_active()")
        with self._paused("set_equality_active", defer_interrupts=False):
            sim_control.set_equality_active(self._model, self._data, name, active)

    def set_realtime_factor(self, factor: float | None) -> None:
        """The physics thread's pace (None: unbounded), changed at once if it runs."""
        sim_control.check_outside_callbacks("set_realtime_factor()")
        self._check_open()
        self._core.set_realtime_factor(sim_control.checked_realtime_factor(factor))

    @property
    def realtime_factor(self) -> float | None:
        """The target pace of the physics thread (None: unbounded)."""
        factor = self._core.realtime_factor
        return None if factor is None else float(factor)

    def info(self) -> dict[str, Any]:
        """What is loaded and how it runs (SPEC §13)."""
        sim_control.check_outside_callbacks("info()")
        return {
            "model_name": sim_control.model_name(self._model),
            "model_source": self._source_label,
            "model_generation": self.model_generation,
            "plugin_generation": self.plugin_generation,
            "loads": self.model_generation,  # one bind at construction, one per reload
            "running": self.running,
            "paused": self.paused,
            "step_count": self.step_count,
            "time": float(self._data.time),
            "realtime_factor": self.realtime_factor,
            "measured_realtime_factor": float(self._core.measured_realtime_factor()),
        }

    def launch_viewer(self, **options: Any) -> Any:
        """MuJoCo's viewer on this env (SPEC §15): a handle with `is_running()` and `close()`;
        `mjfast.viewer.NoDisplayError` without a display. Options: see `mjfast.viewer.Viewer`."""
        from mjfast.viewer import launch_viewer  # GLFW is loaded only by those who view

        self._check_open()
        return launch_viewer(self, **options)

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
        host = self._core.host
        host._acquire_scope()
        try:
            for kind, expected, actual in (
                ("model", model_generation, self._core.model_generation),
                ("plugin", plugin_generation, self._core.plugin_generation),
            ):
                if expected is not None and expected != actual:
                    raise StaleGenerationError(
                        f"acquire_plugin({name!r}) expected {kind} generation {expected}, "
                        f"but generation {actual} is active"
                    )
            backend = host._scoped_backend(name)
            if backend is None:
                # report() would wait on the mutex this scope holds: name the configuration.
                configured = ", ".join(spec.name for spec in self._specs) or "none"
                raise KeyError(f"no active plugin named {name!r} (configured: {configured})")
            scoped = _ScopedPlugin(name, backend)
            try:
                yield scoped
            finally:
                scoped._release()
        finally:
            host._release_scope()

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
            info = _plugin_info(report)
            # JSON-able as it is: the state is a str enum, the failure a plain dict.
            failure = None if info.failure is None else {"phase": info.failure.phase,
                                                         "message": info.failure.message}
            plugins.append({"name": info.name, "type": info.type, "state": info.state,
                            "failure": failure, **info.stats})
        return {"env": env, "plugins": plugins, "render": self._cameras.statistics()}

    # -- lifecycle ----------------------------------------------------------------------------

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


def _object_id(model: mujoco.MjModel, obj_type: mujoco.mjtObj, key: int | str, noun: str,
               count: int) -> int:
    """The id of the model's `noun` named or indexed by `key`; a KeyError listing them if none."""
    if isinstance(key, str):
        object_id = mujoco.mj_name2id(model, obj_type, key)
        if object_id >= 0:
            return object_id
        problem = f"no {noun} named {key!r}"
    elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if 0 <= key < count:
            return int(key)
        problem = f"no {noun} with index {key}"
    else:
        raise TypeError(f"{noun} must be a name or an index, got {key!r}")
    names = [mujoco.mj_id2name(model, obj_type, i) or str(i) for i in range(min(count, 20))]
    more = f" and {count - 20} more" if count > 20 else ""
    raise KeyError(f"{problem} (the model's {noun}s: {', '.join(names) or 'none'}{more})")


def _plugin_info(report: dict[str, Any]) -> PluginInfo:
    failure = report["failure"]
    return PluginInfo(
        name=report["name"],
        type=report["type"],
        state=PluginState[report["state"]],
        failure=None if failure is None else PluginLoadFailure(
            report["name"], report["type"], failure[0], failure[1]),
        stats={"load_time_s": report["load_time_s"], "reset_time_s": report["reset_time_s"],
               "callbacks": report["callbacks"], "custom": report["custom"]},
    )


def _weak_method(method: Any) -> Any:
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise MjfastError("the env that owns this plugin host was garbage-collected")
        return bound(*args)

    return call


_INT32_MAX = int(np.iinfo(np.int32).max)


def _checked_geom_changes(model: mujoco.MjModel, geom_id: int, **values: Any) -> dict[str, Any]:
    """The requested geom changes as arrays/ints, or ValueError naming the field and the
    expected shape or range; nothing is written."""
    changes: dict[str, Any] = {}
    for field, width in (("size", 3), ("rgba", 4), ("friction", 3)):
        if values[field] is None:
            continue
        array = np.asarray(values[field], dtype=float)
        if array.shape != (width,):
            raise ValueError(f"{field} must have shape ({width},), got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{field} must be finite, got {array.tolist()}")
        changes[field] = array
    for field in ("contype", "conaffinity"):
        value = values[field]
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                or not 0 <= value <= _INT32_MAX):
            raise ValueError(f"{field} must be an int bitmask in [0, {_INT32_MAX}], got {value!r}")
        changes[field] = int(value)
    if "size" in changes:
        geom_type = mujoco.mjtGeom(model.geom_type[geom_id])
        if geom_type not in _PRIMITIVE_BOUNDS:
            raise ValueError(f"the size of a {geom_type.name} geom cannot be changed")
        if np.any(changes["size"] < 0):
            raise ValueError(f"size must be non-negative, got {changes['size'].tolist()}")
    return changes


def _rotation(quaternion: np.ndarray) -> np.ndarray:
    matrix = np.zeros(9)
    mujoco.mju_quat2Mat(matrix, quaternion)
    return matrix.reshape(3, 3)


def _refresh_body_bvh(model: mujoco.MjModel, body: int) -> None:
    """Recomputes `body`'s bounding-volume hierarchy (the boxes the mid-phase reads) from its
    geoms' boxes, keeping the tree the compiler built. The boxes are in the body's inertial frame,
    each leaf the box of one geom and each inner node the union of its two children."""
    root, count = int(model.body_bvhadr[body]), int(model.body_bvhnum[body])
    if count <= 0:
        return
    inertial = _rotation(model.body_iquat[body])

    def refresh(node: int) -> tuple[np.ndarray, np.ndarray]:
        left, right = model.bvh_child[node]
        if left < 0 and right < 0:
            geom = int(model.bvh_nodeid[node])
            rotation = inertial.T @ _rotation(model.geom_quat[geom])
            centre = (inertial.T @ (model.geom_pos[geom] - model.body_ipos[body])
                      + rotation @ model.geom_aabb[geom, :3])
            half = np.abs(rotation) @ model.geom_aabb[geom, 3:]
            low, high = centre - half, centre + half
        else:
            bounds = [refresh(root + int(child)) for child in (left, right) if child >= 0]
            low = np.min([b[0] for b in bounds], axis=0)
            high = np.max([b[1] for b in bounds], axis=0)
        model.bvh_aabb[node] = np.concatenate([(low + high) / 2, (high - low) / 2])
        return low, high

    refresh(root)


def _sphere(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(size[0]), np.full(3, size[0])


def _capsule(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(size[0] + size[1]), np.array([size[0], size[0], size[0] + size[1]])


def _cylinder(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(math.hypot(size[0], size[1])), np.array([size[0], size[0], size[1]])


def _box(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(np.linalg.norm(size)), size.copy()


def _ellipsoid(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(np.max(size)), size.copy()


# Bounding radius and axis-aligned half extents (in the geom frame) that collision detection's
# broad phase reads, for the primitive shapes whose size is a plain parameter.
_PRIMITIVE_BOUNDS = {
    mujoco.mjtGeom.mjGEOM_SPHERE: _sphere,
    mujoco.mjtGeom.mjGEOM_CAPSULE: _capsule,
    mujoco.mjtGeom.mjGEOM_CYLINDER: _cylinder,
    mujoco.mjtGeom.mjGEOM_BOX: _box,
    mujoco.mjtGeom.mjGEOM_ELLIPSOID: _ellipsoid,
}
