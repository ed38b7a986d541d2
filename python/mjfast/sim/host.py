"""The env's Python face of the compiled PluginHost: `env.host`, `env.acquire_plugin`'s scoped
plugin, and the host's reports read as `PluginInfo`.

`EnvHost` adds to the compiled host only what needs the env (pausing stepping around the calls
that replace a generation, a scene for `dispatch_render`); `acquire_plugin` holds the host's scope
and hands out a `ScopedPlugin` that refuses use after its block. Generations, dispatch and failure
isolation are the compiled host's; the env's lifecycle is `mjfast.sim.env`'s.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import mujoco

from mjfast.errors import LogicError, StaleGenerationError
from mjfast.names import unknown
from mjfast.plugin.base import PluginInfo, PluginLoadFailure, PluginState

if TYPE_CHECKING:
    from mjfast.sim.env import MujocoEnv

__all__ = ["EnvHost", "ScopedPlugin", "plugin_info", "scoped_plugin"]


class ScopedPlugin:
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


@contextlib.contextmanager
def scoped_plugin(core: Any, name: str, model_generation: int | None,
                   plugin_generation: int | None, configured: Sequence[str]) -> Iterator[Any]:
    """The compiled EnvCore `core`'s host scope held for the block (no dispatch runs), yielding
    plugin `name` as a ScopedPlugin; StaleGenerationError when a generation given is not the
    active one. `configured` names the plugins for the KeyError of a name with no active plugin:
    one that is configured but failed is named with its failure."""
    host = core.host
    host._acquire_scope()
    try:
        for kind, expected, actual in (
            ("model", model_generation, core.model_generation),
            ("plugin", plugin_generation, core.plugin_generation),
        ):
            if expected is not None and expected != actual:
                raise StaleGenerationError(
                    f"acquire_plugin({name!r}) expected {kind} generation {expected}, "
                    f"but generation {actual} is active"
                )
        backend = host._scoped_backend(name)
    except BaseException:
        host._release_scope()
        raise
    if backend is None:
        # report() waits on the mutex the scope holds: it is read once the scope is released.
        host._release_scope()
        raise KeyError(_no_active_plugin(core, name, configured))
    try:
        scoped = ScopedPlugin(name, backend)
        try:
            yield scoped
        finally:
            scoped._release()
    finally:
        host._release_scope()


def _no_active_plugin(core: Any, name: str, configured: Sequence[str]) -> str:
    """Why acquire_plugin(`name`) found no plugin: its failure when it is configured (read from
    the host's report), else the configured names close to it."""
    if name in configured:
        for report in core.host.report():
            info = plugin_info(report)
            if info.name == name and info.failure is not None:
                return f"{info.failure.summary()}; it has no object to acquire"
            if info.name == name:
                return f"plugin {name!r} ({info.type}) is {info.state}, not ACTIVE"
    return unknown("no active plugin named", name, configured, exists="the configured plugins")


class EnvHost:
    """`env.host`: the compiled PluginHost with SPEC §6's names, where the calls that replace a
    generation pause stepping first (a physics thread must not step through them) and
    `dispatch_render` makes its scene when given none. Everything else is the host's own."""

    __slots__ = ("_env", "_host")

    def __init__(self, env: MujocoEnv, host: Any) -> None:
        self._env = env
        self._host = host  # the env's compiled PluginHost

    def load_generation(self, model_generation: int, plugin_generation: int) -> None:
        with self._env.hold_stepping("host.load_generation", defer_interrupts=True):
            self._host.load_generation(model_generation, plugin_generation)

    def quiesce_and_destroy(self) -> None:
        with self._env.hold_stepping("host.quiesce_and_destroy", defer_interrupts=True):
            self._host.quiesce_and_destroy()

    def dispatch_render(self, model_generation: int | None = None,
                        scene: mujoco.MjvScene | None = None) -> None:
        if scene is None:
            scene = mujoco.MjvScene(self._env.model, maxgeom=1000)
        self._host.dispatch_render(scene, model_generation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)


def plugin_info(report: dict[str, Any]) -> PluginInfo:
    """One entry of the compiled host's report() as the public PluginInfo."""
    failure = report["failure"]
    return PluginInfo(
        name=report["name"],
        type=report["type"],
        state=PluginState[report["state"]],
        failure=None if failure is None else PluginLoadFailure(
            report["name"], report["type"], failure[0], failure[1], failure[2] or None),
        stats={"load_time_s": report["load_time_s"], "reset_time_s": report["reset_time_s"],
               "callbacks": report["callbacks"], "custom": report["custom"],
               # Why its statistics() raised in this report (None: it did not); live, that is
               # not a failure of the plugin, and `custom` keeps what it last returned.
               "statistics_error": report["statistics_error"]},
    )
