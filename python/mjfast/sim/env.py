"""MujocoEnv: the server that alone owns a model, its data, stepping and the plugin lifecycle.

The env reads its configuration, runs the construction and reload transactions, and holds
stepping around every operation that changes the model or data; stepping, the hooks and dispatch
are in the compiled EnvCore and PluginHost. Beside it, one concept each: what the configuration
makes of a model and where a reset goes (`mjfast.sim.config`), the plugin factory and reset
requests the core asks for (`mjfast.sim.requests`), Ctrl-C deferral and the close at exit
(`mjfast.sim.interrupts`), `info()` / `statistics()` (`mjfast.sim.reports`) and what the recorder
may do (`mjfast.sim.recording_tap`). What its public methods do once stepping is held is elsewhere:
geometry editing in `mjfast.model.geometry`, simulation control in `mjfast.model.joints`,
`mjfast.model.kinematics` and `mjfast.model.options`, `env.host` and `acquire_plugin`'s scoped
plugin in `mjfast.sim.host`. It does not own MuJoCo's global callbacks (`mjfast.sim.hooks`) nor
parse configuration (`mjfast.plugin.config`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import mujoco

from mjfast._core_loader import _core
from mjfast.bus.node import Bus
from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import LogicError, PluginError
from mjfast.model import geometry, kinematics
from mjfast.model.entities import EntityInfo
from mjfast.model.info import source_label
from mjfast.model.joints import JointState
from mjfast.model.kinematics import BodyState
from mjfast.model.state import SimState, capture, restore
from mjfast.plugin.base import PluginInfo, check_outside_callbacks
from mjfast.plugin.config import PluginSpec
from mjfast.plugin.topics import DeclaredTopic
from mjfast.sim.calls import CallListener, CallListeners, sim_call
from mjfast.sim.camera import CameraRig, OffscreenCamera
from mjfast.sim.config import (
    ConfiguredWorld,
    ModelLike,
    ModelSource,
    ParamsLike,
    ResetTarget,
    compile_model,
    parameter_server,
    reread_parameters,
    reset_target,
    warn_unread_parameters,
)
from mjfast.sim.control import ControlInterface
from mjfast.sim.entities import EntityBook, recompiled
from mjfast.sim.hooks import hold_hooks, release_hooks
from mjfast.sim.host import EnvHost, collect_topics, plugin_info, scoped_plugin
from mjfast.sim.interrupts import close_at_exit, interrupts_deferred, no_close_at_exit
from mjfast.sim.recording_tap import RecordingTap
from mjfast.sim.reports import env_info, env_statistics, strict_error
from mjfast.sim.requests import answer_core_requests, needs_control_scratch
from mjfast.sim.services import advertise_simulation_services

__all__ = ["ModelLike", "MujocoEnv"]

_log = logging.getLogger("mjfast.env")


class MujocoEnv:
    """A MuJoCo simulation with plugins loaded from the parameter server (SPEC §5)."""

    # Which world of a VectorEnv this env is (mjfast.sim.vector_env sets it before construction);
    # every plugin is told (`world_index`).
    _world_index = 0
    # A VectorEnv's `seed`, which its worlds draw from instead of the `seed` parameter (SPEC §21).
    _world_seed: int | None = None

    def __init__(
        self,
        model: ModelLike,
        *,
        params: ParamsLike = None,
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
        self._plugin_topics: tuple[DeclaredTopic, ...] = ()
        # Told of every applied state-changing call (mjfast.sim.calls; a recording is one).
        self._call_listeners = CallListeners()
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        self._strict = strict
        self._namespace = resolve_name(namespace)
        self._params, self._params_path = parameter_server(params)
        self._source = self._model_source(model)
        self._entities = EntityBook(self._source)
        world = self._configured(model if isinstance(model, mujoco.MjModel) else compile_model(
            self._source, self._params, self._namespace), self._params, given=model)
        new_model, new_data = world.model, world.data
        self._specs, self._randomizer, self._rng = world.specs, world.randomizer, world.rng
        self._source_label = source_label(model)

        self.bus = Bus()
        # Serialises reset / reload / close / geom edits; the first lock of the lock order
        # (src/_core/env/env_core.h).
        self._lifecycle_lock = threading.Lock()
        self._model = new_model
        self._data = new_data
        # The control bridge's scratch data (update_read/update_write plugins run on it): an
        # MjData as large as the env's own, made by the first load that has such a plugin.
        self._control_data: mujoco.MjData | None = None
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
        # The factory and the reset requests' targets (mjfast.sim.requests).
        answer_core_requests(self, self._core)
        self._cameras = CameraRig(self._core.render_core)
        advertise_simulation_services(self)  # before plugins load: they may call them later
        self._closed = False
        close_at_exit(self)
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

    def _model_source(self, model: ModelLike) -> ModelSource:
        """Where reload() reads the model again (a VectorEnv's worlds share one)."""
        return ModelSource.of(model)

    def _configured(self, model: mujoco.MjModel, params: ParameterServer,
                    given: object = None) -> ConfiguredWorld:
        """`model` as `params` configure it for this world (mjfast.sim.config)."""
        return ConfiguredWorld.of(model, params, self._namespace, world_seed=self._world_seed,
                                  world_index=self._world_index, given=given)

    def _load_plugins(self) -> None:
        """Loads the next plugin generation (stepping held by the caller), then warns about the
        parameters in the env's namespace that nothing read."""
        if self._control_data is None and needs_control_scratch(self._specs):
            # Before the load (whose factory runs under the host's locks, which come after the
            # control bridge's in the lock order).
            self._control_data = mujoco.MjData(self._model)
            self._core.set_control_scratch(self._control_data)
        with self._params.reads_recorded() as read:
            self._core.load_next_plugin_generation()
            # What the loaded plugins publish (SPEC §19): the ROS 2 routes are built from it.
            self._plugin_topics = collect_topics(self._core.host, self._specs, self._namespace,
                                                 self._model)
        warn_unread_parameters(self._params, self._namespace, self._specs, read)

    def _check_strict(self, when: str) -> None:
        """strict=True: PluginError naming every plugin that failed to load."""
        error = strict_error(self, when) if self._strict else None
        if error is not None:
            raise error

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

    @property
    def plugin_specs(self) -> tuple[PluginSpec, ...]:
        """The plugin configuration of the current generation (`MujocoPlugins`, parsed), in load
        order: the same tuple until a reload replaces it, so `is` tells a reload apart."""
        return self._specs

    @property
    def plugin_topics(self) -> tuple[DeclaredTopic, ...]:
        """The topics the current generation's plugins declared once loaded (their `topics()`),
        names resolved, in load order: the same tuple until a load replaces it."""
        return self._plugin_topics

    @property
    def closed(self) -> bool:
        """Whether close() has run (or construction failed)."""
        return self._closed

    @property
    def offscreen_cameras(self) -> tuple[OffscreenCamera, ...]:
        """The offscreen cameras opened on this env that someone still holds, in no particular
        order (the browser viewer shows their frames)."""
        return tuple(self._cameras.open_handles())

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
        `mjfast.sim.interrupts`)."""
        # Refused before the lock is taken (this thread may hold it); the messages and the
        # thread's lifecycle marks are the core's (src/_core/common/call_context.h).
        self._core.check_call(f"env.{operation}()", ["lifecycle"])
        self._check_outside_own_callbacks(operation)
        deferred = interrupts_deferred() if defer_interrupts else contextlib.nullcontext()
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
            self._report_call("reset", keyframe=keyframe, joint_positions=joint_positions,
                              joint_velocities=joint_velocities, keep_time=keep_time, seed=seed)

    def _reset_world(self, keyframe: int | str | None, joint_positions: object,
                     joint_velocities: object, keep_time: object, seed: object = None) -> None:
        """The reset itself, with stepping held by the caller: the core carries it out."""
        self._core.reset_world(*self._reset_target(keyframe, joint_positions, joint_velocities,
                                                   keep_time, seed))

    def _reset_target(self, keyframe: int | str | None, joint_positions: object,
                      joint_velocities: object, keep_time: object, seed: object = None
                      ) -> ResetTarget:
        """Where a reset goes, as EnvCore.reset_world takes it (mjfast.sim.config); the env's
        generator draws from then on (a new one for a `seed`)."""
        target, self._rng = reset_target(self._model, self._params, self._namespace,
                                         self._randomizer, self._rng, keyframe, joint_positions,
                                         joint_velocities, keep_time, seed)
        return target

    # -- reload -------------------------------------------------------------------------------

    def reload(self, model: ModelLike | None = None) -> None:
        """Re-reads the model and the plugin configuration and swaps them in (SPEC §6); the
        entities spawned and removed are spawned and removed again (SPEC §25).

        Everything that can fail is prepared first, while the running generation keeps running;
        a failure raises and changes nothing.
        """
        self._check_open()
        # Refused before any work (the preparation reads the live cameras): from a plugin's
        # callback or inside an acquire_plugin() block the swap could only deadlock.
        check_outside_callbacks("reload()")
        self._core.check_call("reload()", ["acquire_block"])
        source = self._source if model is None else ModelSource.of(model)
        params = reread_parameters(self._params, self._params_path)
        rebuilt = self._entities.rebuilt_spec(source) if self._entities.changed else None
        # The reread package_paths; a world that spawned or removed is made again from its spec.
        compiled = (compile_model(source, params, self._namespace) if rebuilt is None
                    else _compiled(rebuilt))
        # Seeded anew from the parameter, as at construction; the env's own until the swap.
        world = self._configured(compiled, params)
        new_model, new_data = world.model, world.data
        camera_configs = self._cameras.configs_for_reload(new_model, params, self._namespace)

        with self.hold_stepping("reload", defer_interrupts=True):
            def commit() -> None:
                if params is not self._params:
                    self._params.set("/", params.to_dict())
                self._source, self._specs = source, world.specs + self._entities.plugin_specs()
                self._entities.source, self._entities.spec = source, rebuilt
                self._randomizer, self._rng = world.randomizer, world.rng
                if model is not None:
                    self._source_label = source_label(model)
                self._core.reset_step_count()

            missing = self._swap_world(new_model, new_data, camera_configs, commit)
            # A model given as a mujoco.MjModel has no text to record: replay reloads the source.
            self._report_call("reload", model=os.fspath(model) if isinstance(
                model, (str, os.PathLike)) else None)
        if missing:
            raise CameraRig.missing_error(new_model, missing)
        self._check_strict("reload")

    def _swap_world(self, new_model: mujoco.MjModel, new_data: mujoco.MjData,
                    camera_configs: Any, commit: Callable[[], None],
                    carried: Sequence[tuple[str, str, bytes]] | None = None) -> Any:
        """Swaps a new model and data in, stepping held by the caller (SPEC §6): the old
        adapters quiesced and destroyed, cameras retired, `commit()` (the caller's own changes),
        model and data bound (`model_generation` + 1), mj_forward without callbacks, the next
        plugin generation loaded, each plugin named in `carried` ((name, type, state) as
        EnvCore.get_state gives them) given back its state, cameras rebound. Returns the
        cameras that went missing."""
        self._core.host.quiesce_and_destroy()
        self._cameras.retire()
        self._model, self._data = new_model, new_data
        self._control_data = None  # made again by _load_plugins, if a plugin needs it
        commit()
        # The core holds the old model and data until no thread can reach them any more.
        self._core.bind(new_model, new_data, None)
        mujoco.mj_forward(new_model, new_data)  # no active generation: callback-free
        self._cameras.begin_load(new_model, self.model_generation)
        self._load_plugins()
        if carried:
            self._give_back_plugin_states(carried)
        return self._cameras.finish_load(new_model, self._params, self._namespace,
                                         camera_configs)

    def _give_back_plugin_states(self, carried: Sequence[tuple[str, str, bytes]]) -> None:
        """Each plugin of the new generation that `carried` names (same name and type) gets its
        old state back through set_state; the others keep the state they loaded with. A plugin
        that refuses its old state (it no longer fits the changed model: a hold target over
        every joint) keeps the state it loaded with, and a warning names it: the world has
        changed already, so nothing is raised."""
        old = {name: (type_name, value) for name, type_name, value in carried}
        physics, step_count, signature, description, now = self._core.get_state()
        given = [name for name, type_name, _ in now
                 if name in old and old[name][0] == type_name]

        def merged(names: Sequence[str]) -> list[tuple[str, str, bytes]]:
            return [(name, type_name, old[name][1] if name in names else value)
                    for name, type_name, value in now]

        if not given:
            return
        try:
            self._core.set_state(physics, step_count, signature, description, merged(given))
            return
        except PluginError:  # one of them refused: each on its own, the others keep theirs
            pass
        kept: list[str] = []
        for name in given:
            try:
                self._core.set_state(physics, step_count, signature, description,
                                     merged([*kept, name]))
                kept.append(name)
            except PluginError as error:
                _log.warning("plugin %s keeps the state it loaded with: it refused its state "
                             "from before the world changed (%s)", name, error.__cause__ or error)
        if len(kept) < len(given):
            self._core.set_state(physics, step_count, signature, description, merged(kept))

    # -- entities (SPEC §25; the logic is in mjfast.sim.entities and mjfast.model.entities) ----

    def entities(self) -> dict[str, EntityInfo]:
        """{name: EntityInfo}: each child of the world body with its subtree, and each spawned
        model (its `<name>/...` names)."""
        with self._state_call("entities"):
            model = self._model
        return self._entities.infos(model, self._namespace, self._source_label)

    def spawn(self, model: Any, name: str, *, pose: Mapping[str, Any] | None = None,
              frame: str = "world", namespace: str | None = None,
              params: Mapping[str, Any] | None = None) -> EntityInfo:
        """Adds `model` (an MJCF/URDF path or string, or a mujoco.MjSpec) to the running world
        as entity `name` (SPEC §25): its names prefixed `<name>/`, attached at `pose` (`{pos,
        quat}`) in body `frame`, its own plugins (`params["MujocoPlugins"]`) loaded under
        `namespace` (default `/<name>`). Between two steps, as one operation: everything that
        existed keeps its state bit for bit, the running plugins reload as a new generation
        with their states, `model_generation` + 1. On any failure nothing changed."""
        self._check_open()
        check_outside_callbacks("spawn()")
        self._core.check_call("spawn()", ["acquire_block"])
        pending = self._entities.prepare_spawn(model, name, pose, frame, namespace, params)
        with self.hold_stepping("spawn", defer_interrupts=True):
            record, spec = self._entities.spawned_spec(self._model, self._data, pending)
            new_model, new_data = recompiled(spec, self._model, self._data)
            randomizer = self._randomizer_for(new_model)
            camera_configs = self._cameras.configs_for_reload(new_model, self._params,
                                                              self._namespace)
            carried = self._core.get_state()[4]

            def commit() -> None:
                self._entities.commit_spawn(record, spec)
                self._specs = self._specs + record.specs
                self._randomizer = randomizer
                if record.params is not None:
                    self._params.set(record.namespace, record.params)

            missing = self._swap_world(new_model, new_data, camera_configs, commit, carried)
            self._report_call("spawn", **record.call_args())
        if missing:
            raise CameraRig.missing_error(new_model, missing)
        self._check_strict("spawn")
        return self._entities.infos(new_model, self._namespace, self._source_label)[record.name]

    def remove(self, name: str) -> None:
        """Removes entity `name` (spawned or of the original model) with its subtree, its
        plugins and everything named under it, as one operation between two steps, keeping the
        others' state bit for bit (SPEC §25). KeyError for an unknown entity."""
        self._check_open()
        check_outside_callbacks("remove()")
        self._core.check_call("remove()", ["acquire_block"])
        with self.hold_stepping("remove", defer_interrupts=True):
            spec, spawned = self._entities.removed_spec(self._model, name)
            new_model, new_data = recompiled(spec, self._model, self._data)
            randomizer = self._randomizer_for(new_model)
            camera_configs = self._cameras.configs_for_reload(new_model, self._params,
                                                              self._namespace)
            carried = self._core.get_state()[4]
            gone = {spec_.name for other in spawned
                    for spec_ in self._entities.spawned[other].specs}

            def commit() -> None:
                for record in self._entities.commit_remove(name, spawned, spec):
                    if record.params is not None and self._params.has(record.namespace):
                        self._params.delete(record.namespace)
                self._specs = tuple(s for s in self._specs if s.name not in gone)
                self._randomizer = randomizer

            missing = self._swap_world(new_model, new_data, camera_configs, commit, carried)
            self._report_call("remove", name=name)
        if missing:
            raise CameraRig.missing_error(new_model, missing)
        self._check_strict("remove")

    def _randomizer_for(self, model: mujoco.MjModel) -> Any:
        """The `randomize` terms on a changed model (ConfigError naming one that no longer
        fits); the same object when there are none."""
        if not self._randomizer:
            return self._randomizer
        return type(self._randomizer).from_params(model, self._params, self._namespace)

    def get_entity_state(self, name: str, *, frame: str = "world") -> BodyState:
        """Entity `name`'s root pose and twist (section 13's conventions), in the world or in
        body or entity `frame`."""
        with self._state_call("get_entity_state"):
            snapshot = kinematics.StateSnapshot.take(self._model, self._data)
        return self._entities.state(snapshot, name, frame)

    def set_entity_state(self, name: str, *, pose: Mapping[str, Any] | None = None,
                         twist: Mapping[str, Any] | None = None, frame: str = "world") -> None:
        """Moves entity `name`'s root: `pose` `{pos, quat}` and `twist` `{linvel, angvel}` in
        the world (or body/entity `frame`'s axes); a root with a free joint through its state,
        a mocap root through its mocap pose, a fixed root through its pose in the model (a
        twist only for a free root). All checked first; nothing changes on error."""
        with self._state_call("set_entity_state"):
            self._entities.set_state(self._model, self._data, name, pose, twist, frame)
            self._report_call("set_entity_state", name=name, pose=pose, twist=twist,
                              frame=frame)

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
            self._report_call("set_geom_properties", geom=geom, size=size, rgba=rgba,
                              friction=friction, contype=contype, conaffinity=conaffinity)

    # -- simulation control (SPEC §13; the logic is in mjfast.model.joints, .kinematics, .options) -

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
        if not self._call_listeners or self._core.host._in_callback():
            restore(self._core, state, self._model)  # (refused inside a callback, as it says)
            return
        self._core.hold_steps()  # one boundary for the restore and its report (re-entrant)
        try:
            restore(self._core, state, self._model)
            self._report_call("set_state", state=state)
        finally:
            self._core.release_steps()

    def get_joint_state(self, names: Sequence[str] | None = None) -> dict[str, JointState]:
        """{name: JointState(position, velocity)} for `names` (None: every joint; an unnamed one
        is `joint_<id>`)."""
        result: dict[str, JointState] = self._call("get_joint_state", names=names)
        return result

    def set_joint_state(self, positions: Mapping[str, Any] | None = None,
                        velocities: Mapping[str, Any] | None = None) -> None:
        """Writes joint positions/velocities (name -> value), all checked first; mj_forward."""
        self._call("set_joint_state", positions=positions, velocities=velocities)

    def get_body_state(self, body: str | int, *, frame: str | int | None = None) -> BodyState:
        """Pose and twist of `body` for the current qpos/qvel, in world or body `frame` axes."""
        # Held only for the copy: the kinematics run after stepping goes on.
        with self._state_call("get_body_state"):
            snapshot = kinematics.StateSnapshot.take(self._model, self._data)
        return kinematics.body_state(snapshot, body, frame)

    def set_body_state(self, states: Mapping[str | int, Mapping[str, Any]], *,
                       frame: str | int | None = None) -> None:
        """Sets free bodies' pos/quat/linvel/angvel (world or `frame` axes), a batch at once."""
        self._call("set_body_state", states=states, frame=frame)

    def apply_options(self, patch: Mapping[str, Any]) -> None:
        """One transaction on model.opt (ConfigError naming the key; nothing changed on error)."""
        self._call("apply_options", patch=patch)

    def set_equality_active(self, name: str | int, active: bool) -> None:
        """Turns one equality constraint on or off."""
        self._call("set_equality_active", name=name, active=active)

    def set_mocap_pose(self, body: str | int, pos: Sequence[float] | None = None,
                       quat: Sequence[float] | None = None) -> None:
        """Moves the mocap body `body` (name or id) to `pos` and/or `quat` (world frame; the
        quaternion scaled to unit length), all checked first; mj_forward. KeyError for an
        unknown body (with close matches), ValueError for a body that is not a mocap body, a
        wrong size or a non-finite value; nothing changed on error."""
        self._call("set_mocap_pose", body=body, pos=pos, quat=quat)

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
        return env_info(self, self._source_label, self._randomizer.last)

    def launch_viewer(self, **options: Any) -> Any:
        """MuJoCo's viewer on this env (SPEC §15): a handle with `is_running()` and `close()`;
        `mjfast.view.viewer.NoDisplayError` without a display. Options: see
        `mjfast.view.viewer.Viewer`."""
        from mjfast.view.viewer import launch_viewer  # GLFW is loaded only by those who view

        self._check_open()
        return launch_viewer(self, **options)

    def launch_web_viewer(self, port: int = 8080, host: str = "127.0.0.1",
                          **options: Any) -> Any:
        """The browser viewer on this env (SPEC §22), served on http://host:port/ (loopback
        unless a host is given): a handle with `url` and `close()`. Needs the extra mjfast[web]
        (an ImportError naming it otherwise). Options: see `mjfast.view.web.WebViewer`."""
        from mjfast.view.web import launch_web_viewer  # viser is loaded only by those who view

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
        return env_statistics(self, self._core.statistics(), self._cameras.statistics())

    # -- recording (SPEC §20; mjfast.interop.record.recorder) --------------------------------------

    def record(self, path: str | os.PathLike[str], *, topics: Sequence[str] | None = None,
               state_every: int | None = None) -> Any:
        """Records this env into a new rosbag2 bag (MCAP) at `path` until the returned
        Recording's stop() or close(): the bridged topics (all, or `topics`) through the ROS 2
        conversion table, /clock, the commands that reach the simulation on /mjfast/commands and
        a SimState every `state_every` steps (default: every simulated second) on /mjfast/state.
        Needs the extra mjfast[ros2] (rosbags)."""
        self._check_open()
        from mjfast.interop.record.recorder import (
            Recording,  # rosbags is loaded only by those who record
        )

        return Recording._start(self, RecordingTap(self, self._core), path, topics, state_every)

    # -- simulation calls (mjfast.sim.calls) ----------------------------------------------------

    def _call(self, name: str, /, **args: Any) -> Any:
        """Runs the simulation call `name` by its row's logic on the model and data: refused
        inside any plugin callback, run with stepping held, and, if it changes the state,
        reported to the call listeners at that step boundary."""
        call = sim_call(name)
        if call.logic is None:  # a bug of the table: its method is written out
            raise TypeError(f"{name} has no logic in the calls table: the env runs it itself")
        with self._state_call(name):
            result = call.logic(self._model, self._data, **args)
            if call.changes_state:
                self._call_listeners.report(name, args)
        return result

    def _report_call(self, name: str, /, **args: Any) -> None:
        """A call that changed the simulation, reported at this step boundary (held)."""
        self._call_listeners.report(name, args)

    def add_call_listener(self, listener: Callable[[str, Mapping[str, Any]], None]
                          ) -> CallListener:
        """Calls `listener(name, args)` for every state-changing simulation call applied from now
        on (mjfast.sim.calls: reset, set_joint_state, ..., set_state), at the step boundary where
        it took effect, with stepping held (so it must not wait for stepping itself); `args` are
        the call's arguments as given. A listener that raises is logged. Returns a handle whose
        `remove()` ends it."""
        return self._call_listeners.add(listener)

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
            if self._recording is not None:
                try:
                    self._recording.stop()  # its last state, then the bag closed
                except OSError as error:  # the bag's own failure: the env closes all the same
                    _log.error("%s", error)
            self._core.close()  # refuses (LogicError) inside an acquire_plugin block
            self._closed = True
            self._cameras.close()  # the physics thread has stopped: retire, stop rendering
        no_close_at_exit(self)
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


def _compiled(spec: mujoco.MjSpec) -> mujoco.MjModel:
    try:
        return spec.compile()
    except ValueError as error:
        raise ValueError(f"the model with its spawned entities does not compile: {error}") from None
