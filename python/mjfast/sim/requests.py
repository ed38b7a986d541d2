"""What the env's compiled core asks of it, on the stepping or loading thread: a new generation's
plugins (the factory, phase `factory` of SPEC §6), and where a reset a plugin requested goes
(the keyframe names and the `initial_joint_*` parameters are the env's, in Python; the core
carries the reset out).

It does not own loading, dispatch or failure isolation (the compiled PluginHost), a plugin's
configuration (`mjfast.plugin.config`, `mjfast.plugin.schema`) nor the reset itself.
"""

from __future__ import annotations

import copy
import logging
import traceback
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from mjfast._core_loader import _core
from mjfast.bus.node import Node
from mjfast.errors import MjfastError
from mjfast.plugin.base import (
    ControlPlugin,
    MujocoPlugin,
    PluginContext,
    has_state,
    overridden_callbacks,
)
from mjfast.plugin.config import PluginSpec
from mjfast.plugin.discovery import resolve_plugin
from mjfast.plugin.native import config_json
from mjfast.plugin.schema import check_config
from mjfast.sim.calls import SIM_CALLS

if TYPE_CHECKING:
    from mjfast.sim.env import MujocoEnv

__all__ = ["answer_core_requests", "needs_control_scratch"]

_log = logging.getLogger("mjfast.env")

# What a plugin's context (`self.env`, SPEC §4) forwards to its env beyond the model, data, bus,
# namespace, parameters, control interface and cameras: every simulation call of the calls table,
# and the env's lifecycle calls and read-outs (each refused inside a callback where the env
# refuses it: SPEC §12, §18).
PLUGIN_CALLS = frozenset((
    *(call.name for call in SIM_CALLS),
    "start", "stop", "wait", "close", "hold_stepping", "acquire_plugin", "plugins",
    "plugin_specs", "step_count", "paused", "running", "closed", "model_generation",
    "plugin_generation", "realtime_factor", "measured_realtime_factor", "offscreen_cameras",
))


def answer_core_requests(env: MujocoEnv, core: Any) -> None:
    """Makes `env` the one `core` asks for its plugins and for reset requests' targets."""
    requests = _CoreRequests(env)
    core.set_factory(requests.make_adapters)
    core.set_reset_request_hooks(requests.resolve_reset_request,
                                 requests.report_reset_request_failure)


class _CoreRequests:
    """The answers, holding the env weakly: the core (and so the host and this factory) is owned
    by the env, and a cycle through C++ would keep both alive forever."""

    def __init__(self, env: MujocoEnv) -> None:
        self._env = weakref.ref(env)

    def _alive(self) -> MujocoEnv:
        env = self._env()
        if env is None:
            raise MjfastError("the env that owns this plugin host was garbage-collected")
        return env

    def make_adapters(self, model_generation: int, plugin_generation: int) -> list[Any]:
        """Instantiates the configured plugins of a new generation (phase `factory`)."""
        env = self._alive()
        entries = []
        for spec in env.plugin_specs:
            try:
                entries.append(_make_adapter(env, spec))
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

    def resolve_reset_request(self, keyframe: str | None
                              ) -> tuple[int, np.ndarray, np.ndarray, bool] | None:
        """A plugin's reset request, on the stepping thread at a step boundary: its target. None,
        logged, where there is none: no caller to raise it to."""
        env = self._alive()
        try:
            return env._reset_target(keyframe, None, None, False)
        except Exception:
            _log.exception("the reset a plugin requested (keyframe %r) failed", keyframe)
            return None

    @staticmethod
    def report_reset_request_failure(keyframe: str | None, message: str) -> None:
        _log.error("the reset a plugin requested (keyframe %r) failed: %s", keyframe, message)


_CONTROL_SIDE = frozenset({"update_read", "update_write"})


def needs_control_scratch(specs: tuple[PluginSpec, ...]) -> bool:
    """Whether a plugin of `specs` may run on the control bridge's scratch data: a Python plugin
    that overrides update_read or update_write, or any native plugin (whose callbacks are known
    only once it is made). A type that does not resolve fails in the factory, needing none."""
    for spec in specs:
        try:
            target = resolve_plugin(spec.type)
        except Exception:
            continue
        if getattr(target, "__mjfast_native__", False):
            return True
        if isinstance(target, type) and issubclass(target, (MujocoPlugin, ControlPlugin)) and \
                overridden_callbacks(target) & _CONTROL_SIDE:
            return True
    return False


def _make_adapter(env: MujocoEnv, spec: PluginSpec) -> Any:
    target = resolve_plugin(spec.type)
    model = env.model
    # A factory failure of this plugin, which the report already names.
    check_config("", spec.config, getattr(target, "config_keys", None), model)
    node_namespace = spec.node_namespace(env.namespace)
    if getattr(target, "__mjfast_native__", False):
        return _core.native_adapter(
            name=spec.name, type=spec.type, library_path=target.library_path(),
            symbol=target.symbol, config_json=config_json(spec.config),
            camera_opener=_weak_method(env.open_offscreen_camera),
            publisher=Node(env.params, node_namespace, env.bus, spec.name).publish,
            world_index=env._world_index)
    if not (isinstance(target, type) and issubclass(target, (MujocoPlugin, ControlPlugin))):
        raise TypeError(f"{spec.type} resolves to {target!r}, which is not a plugin class")
    instance = target()
    node = Node(env.params, node_namespace, env.bus, spec.name)
    instance.name = spec.name
    instance.type = spec.type
    instance.config = copy.deepcopy(spec.config)
    instance.node = node
    instance.env = PluginContext(env, PLUGIN_CALLS)
    instance.world_index = env._world_index
    style = "control" if isinstance(instance, ControlPlugin) else "mujoco"
    return _core.python_adapter(
        name=spec.name, type=spec.type, instance=instance, style=style, model=model,
        data=env.data, control_data=env._control_data, node=node,
        callbacks=sorted(overridden_callbacks(target)), stateful=has_state(target),
    )


def _weak_method(method: Any) -> Any:
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise MjfastError("the env that owns this plugin host was garbage-collected")
        return bound(*args)

    return call
