"""The plugin base classes users subclass, and the records the host reports about them.

`MujocoPlugin` is the mujoco_ros-style plugin, `ControlPlugin` the ros2_control-style one; both
are adapted onto the same compiled PluginHost. This module owns no dispatching:
`overridden_callbacks` names the callbacks a class overrides, read against the core's one callback
table (`_core.CALLBACKS`), and the env hands that list to the adapter in `mjfast._core`, which
dispatches only those. `check_outside_callbacks` is the one refusal of an env call made from
inside any plugin callback. `PluginContext` is what a plugin sees of the env that runs it
(`self.env`); this module knows no env.
"""

from __future__ import annotations

import enum
import os
import re
import warnings
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from mjfast._core_loader import _core
from mjfast.errors import LogicError

if TYPE_CHECKING:
    import mujoco

    from mjfast._core import OffscreenCamera
    from mjfast.bus.node import Bus, Node
    from mjfast.bus.params import ParameterServer

__all__ = [
    "LOAD_PHASES",
    "ControlPlugin",
    "MujocoPlugin",
    "PluginContext",
    "PluginInfo",
    "PluginLoadFailure",
    "PluginState",
    "check_outside_callbacks",
    "has_state",
    "misnamed_callbacks",
    "overridden_callbacks",
]


class PluginState(str, enum.Enum):
    """Where a configured plugin is in its lifecycle (SPEC §4).

    A str enum whose values are the names, so `env.statistics()` is JSON-able as it is and
    `state == "ACTIVE"` holds as well as `state is PluginState.ACTIVE`.
    """

    REGISTERED = "REGISTERED"
    INSTANTIATED = "INSTANTIATED"
    LOADED = "LOADED"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    UNLOADED = "UNLOADED"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PluginLoadFailure:
    """Why one plugin did not run: the phase it failed in and the message, and `traceback`, the
    formatted traceback of what a Python plugin raised (None where there is none: a native
    plugin, a `False` result, a type that resolves to nothing)."""

    name: str
    type: str
    phase: str
    message: str
    traceback: str | None = field(default=None, compare=False, repr=False)

    @property
    def location(self) -> str | None:
        """`file:line` where the plugin's own code raised (the innermost frame of its package
        in `traceback`), or None where there is no such frame (a native plugin, a failure that
        mjfast found, such as an unknown configuration key)."""
        return None if self.traceback is None else plugin_frame(self.traceback)

    def summary(self) -> str:
        """The failure in one line, as `mjfast run` prints it: `plugin 'NAME' (TYPE) failed to
        load, in PHASE at FILE:LINE: MESSAGE` (or `failed while stepping, in CALLBACK ...`)."""
        where = "to load" if self.phase in LOAD_PHASES else "while stepping"
        at = f" at {self.location}" if self.location else ""
        message = " ".join(str(self.message).split())
        return f"plugin '{self.name}' ({self.type}) failed {where}, in {self.phase}{at}: {message}"


# The phases of a load; a failure in any other phase (a callback's name) happened while stepping.
LOAD_PHASES = frozenset(("factory", "load", "statistics", "activate"))

_MJFAST_DIR = Path(__file__).resolve().parents[1]  # mjfast/, above this layer
_SHIPPED_PLUGINS_DIR = _MJFAST_DIR / "plugins"
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in ', re.MULTILINE)
_TRACEBACK_START = "Traceback (most recent call last):"


def plugin_frame(traceback: str) -> str | None:
    """`file:line` of the innermost frame of a plugin's own code in a formatted traceback of what
    it raised (the last exception's, when exceptions are chained). The plugin's code is the
    package (or lone module) of the traceback's first frame outside mjfast's own machinery: its
    callback, `load` or constructor; frames below it in libraries (numpy, mujoco, the standard
    library) are not the plugin's. The file is shown relative to the working directory when it
    is inside it."""
    frames = [(Path(match["file"]).resolve(), match["line"])
              for match in _FRAME.finditer(traceback.rpartition(_TRACEBACK_START)[2])]
    own = [(file, line) for file, line in frames if not _is_mjfast_machinery(file)]
    if not own:
        return None
    root = _code_root(own[0][0])
    inside = [(file, line) for file, line in own if file == root or root in file.parents]
    file, line = inside[-1]
    try:
        shown = os.path.relpath(file) if Path.cwd() in file.parents else str(file)
    except (OSError, ValueError):  # no working directory, or another drive
        shown = str(file)
    return f"{shown}:{line}"


def _is_mjfast_machinery(file: Path) -> bool:
    """Whether `file` (resolved) is mjfast's own code other than its shipped plugins."""
    return _MJFAST_DIR in file.parents and _SHIPPED_PLUGINS_DIR not in file.parents


def _code_root(file: Path) -> Path:
    """The outermost package directory holding `file` (resolved; the file itself outside any
    package); mjfast's shipped plugins are their own package."""
    if _SHIPPED_PLUGINS_DIR in file.parents:
        return _SHIPPED_PLUGINS_DIR
    root = file
    while (root.parent / "__init__.py").is_file() and root.parent != root.parent.parent:
        root = root.parent
    return root


@dataclass(frozen=True)
class PluginInfo:
    """One configured plugin as the env reports it, in load order."""

    name: str
    type: str
    state: PluginState
    failure: PluginLoadFailure | None = None
    stats: dict[str, Any] = field(default_factory=dict)


class PluginContext:
    """What a plugin sees of the env that runs it, as `self.env` (SPEC §4): the model and data,
    the env's bus, namespace, parameters and control interface, its offscreen cameras, and the
    calls the env layer lets it make, given as `calls`: the simulation calls of SPEC §13
    (`mjfast.sim.calls`) and the env's lifecycle calls and read-outs, each refused (LogicError)
    from inside a plugin callback where the env refuses it. Nothing else of the env (its core,
    its recording, its viewers) is reachable through it.

    It holds the env weakly (the env owns its plugins): once the env is gone, every use raises
    ReferenceError, as the weak proxy that plugins were given before did."""

    __slots__ = ("__weakref__", "_calls", "_env")

    def __init__(self, env: object, calls: Iterable[str]) -> None:
        self._env = weakref.ref(env)
        self._calls = frozenset(calls)

    def _target(self) -> Any:
        env = self._env()
        if env is None:
            raise ReferenceError("the env of this plugin is gone (weakly-referenced object no "
                                 "longer exists)")
        return env

    @property
    def model(self) -> mujoco.MjModel:
        model: mujoco.MjModel = self._target().model
        return model

    @property
    def data(self) -> mujoco.MjData:
        data: mujoco.MjData = self._target().data
        return data

    @property
    def bus(self) -> Bus:
        bus: Bus = self._target().bus
        return bus

    @property
    def namespace(self) -> str:
        return str(self._target().namespace)

    @property
    def params(self) -> ParameterServer:
        params: ParameterServer = self._target().params
        return params

    @property
    def control(self) -> Any:
        """The env's control interface (SPEC §7): `read()`, `write(...)`."""
        return self._target().control

    def open_offscreen_camera(self, name: str) -> OffscreenCamera:
        """A handle on the model's camera `name` (SPEC §10), as `env.open_offscreen_camera`."""
        camera: OffscreenCamera = self._target().open_offscreen_camera(name)
        return camera

    def __getattr__(self, name: str) -> Any:
        """The env's call or read-out `name`, if a plugin may use it."""
        if name.startswith("_"):  # (never the env's private parts; and none before __init__)
            raise AttributeError(f"a plugin's env context has no {name!r}")
        if name in self._calls:
            return getattr(self._target(), name)
        from mjfast.names import unknown

        raise AttributeError(unknown("a plugin's env context has no", name, sorted(
            {"model", "data", "bus", "namespace", "params", "control", "open_offscreen_camera",
             *self._calls}), exists="it offers"))

    def __repr__(self) -> str:
        env = self._env()
        return f"<PluginContext of {env!r}>" if env is not None else "<PluginContext (gone)>"


class _PluginBase:
    """What the host sets on every plugin before its load/init (SPEC §4)."""

    name: str
    type: str
    config: dict[str, Any]
    node: Node
    env: PluginContext  # the env as a plugin may use it, held weakly: the env owns its plugins
    # The plugin's world in a VectorEnv (SPEC §21), set with the others; 0 in a MujocoEnv.
    world_index: int = 0
    # The configuration keys this type reads, and their types (mjfast.plugin.schema): an unknown
    # key or a mistyped value is then a load failure naming it. None: nothing is checked.
    config_keys: ClassVar[Mapping[str, Any] | None] = None

    # Optional hooks beyond SPEC's lists, one per remaining load phase, so a plugin can take part
    # in them: `statistics()` returns a dict reported under the plugin's statistics ("custom"),
    # `activate()` runs once all plugins of a generation have loaded; False or an exception from
    # either is a load failure of that phase.
    def statistics(self) -> dict[str, Any]:
        return {}

    def activate(self) -> bool:
        return True

    # Optional state (SPEC §20), for a plugin whose internal state a run depends on (a noise
    # generator, a rate schedule, an integrator, a target moved by messages): override both.
    # `get_state()` returns that state as a value of None, bool, int, float, str, bytes, lists,
    # tuples, dicts and numpy arrays or scalars of numbers (mjfast.model.state's encoding; anything
    # else makes env.get_state() raise); `set_state(value)` puts such a value back, checking it
    # first: one that raises must leave the plugin as it was (env.set_state then undoes the
    # rest). Both run at a step boundary with no callback of the env in flight, like reset.
    def get_state(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no state")

    def set_state(self, value: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no state")


def has_state(cls: type) -> bool:
    """Whether plugin class `cls` defines get_state/set_state (both, or TypeError naming the
    missing one: a state that can be taken but not restored, or the reverse, is a bug)."""
    gets = getattr(cls, "get_state", None) is not _PluginBase.get_state
    sets = getattr(cls, "set_state", None) is not _PluginBase.set_state
    if gets != sets:
        missing = "set_state" if gets else "get_state"
        raise TypeError(f"{cls.__name__} overrides {'get_state' if gets else 'set_state'} but "
                        f"not {missing}: a plugin with state defines both")
    return gets


class MujocoPlugin(_PluginBase):
    """A mujoco_ros-style plugin. Override `load` and only the callbacks you need."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement load(model, data)")

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Called from MuJoCo's mjcb_control."""

    def passive_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Called from mjcb_passive: add to qfrc_passive, don't overwrite it."""

    def render_callback(self, model: mujoco.MjModel, data: mujoco.MjData, scene: Any) -> None:
        """Add mjvGeoms to `scene` before a render."""

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """End of each env step, before that step's render turn."""

    def on_geom_changed(self, model: mujoco.MjModel, data: mujoco.MjData, geom_id: int) -> None:
        """A geom's properties were changed through `env.set_geom_properties`."""

    def reset(self) -> None:
        """After a simulation reset."""

    def unload(self) -> None:
        """Before the instance is dropped (shutdown or reload)."""


class ControlPlugin(_PluginBase):
    """A ros2_control-style plugin (mujoco_ros2_control's MujocoSystem plugins)."""

    def init(self, node: Node, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement init(node, model, data)")

    def update_read(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Control thread, per `env.control.read()`, on the scratch control-state data."""

    def update_write(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Control thread, per `env.control.write()`; forwards to a deprecated `update`."""
        cls = type(self)
        if cls.update is ControlPlugin.update:
            return  # neither overridden: nothing to forward to, nothing deprecated in use
        if cls not in _warned_update_classes:
            _warned_update_classes.add(cls)
            warnings.warn(
                f"{cls.__name__}.update() is deprecated; override update_write() instead",
                DeprecationWarning,
                stacklevel=2,
            )
        self.update(model, data)

    def update(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Deprecated alias of `update_write`."""

    def pre_step(self, data: mujoco.MjData) -> None:
        """Physics thread, immediately before every mj_step, with the live data."""

    def on_reset(self, data: mujoco.MjData) -> None:
        """Right after a world reset, with the live post-reset data."""

    def cleanup(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement cleanup()")


_warned_update_classes: set[type] = set()

# The per-event callback methods of each base class, in dispatch-table order. `_core.CALLBACKS`
# rows are (name, MujocoPlugin method, ControlPlugin method), None where the base has none.
_MUJOCO_CALLBACKS = tuple(row[1] for row in _core.CALLBACKS if row[1] is not None)
_CONTROL_CALLBACKS = tuple(row[2] for row in _core.CALLBACKS if row[2] is not None)


def overridden_callbacks(cls: type) -> frozenset[str]:
    """The per-event callbacks `cls` overrides; only these are ever dispatched.

    A `ControlPlugin` that overrides only the deprecated `update` counts as overriding
    `update_write`, since the default `update_write` forwards to it.
    """
    if issubclass(cls, MujocoPlugin):
        base: type = MujocoPlugin
        names = _MUJOCO_CALLBACKS
    elif issubclass(cls, ControlPlugin):
        base = ControlPlugin
        names = _CONTROL_CALLBACKS
    else:
        raise TypeError(f"{cls!r} is neither a MujocoPlugin nor a ControlPlugin subclass")
    found = {n for n in names if getattr(cls, n) is not getattr(base, n)}
    if base is ControlPlugin and cls.update is not ControlPlugin.update:
        found.add("update_write")
    return frozenset(found)


# Every method name the host calls on a plugin of each base, for spotting misspelt overrides:
# the callbacks and the lifecycle methods (`_core.LIFECYCLE` rows: (MujocoPlugin method,
# ControlPlugin method)), and ControlPlugin's deprecated `update`, which update_write calls.
_MUJOCO_METHODS = frozenset((*_MUJOCO_CALLBACKS, *(row[0] for row in _core.LIFECYCLE)))
_CONTROL_METHODS = frozenset((*_CONTROL_CALLBACKS, *(row[1] for row in _core.LIFECYCLE), "update"))


def misnamed_callbacks(cls: type) -> list[tuple[str, str]]:
    """(method, what was probably meant) for each method of `cls` that mjfast never calls but
    whose name is close to one it does (`control_callbak`), or that the other base class has
    (`pre_step` on a MujocoPlugin). Private names and the bases' own names are not considered.
    """
    from mjfast.names import close_matches

    # The other base's per-event callbacks (not its generic names: `update`, `reset`, `init`).
    if issubclass(cls, MujocoPlugin):
        own, base, other_base = _MUJOCO_METHODS, MujocoPlugin, "ControlPlugin"
        other = frozenset(_CONTROL_CALLBACKS)
    elif issubclass(cls, ControlPlugin):
        own, base, other_base = _CONTROL_METHODS, ControlPlugin, "MujocoPlugin"
        other = frozenset(_MUJOCO_CALLBACKS) - {"reset"}
    else:
        return []
    found = []
    for klass in cls.__mro__:
        if klass is base or klass is object or issubclass(base, klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in own or not callable(value):
                continue
            if name in other:
                found.append((name, f"a {other_base} callback, which a {base.__name__} never "
                                    f"receives"))
                continue
            close = close_matches(name, sorted(own), n=1, cutoff=0.85)
            if close:
                found.append((name, f"did you mean {close[0]}()?"))
    return sorted(set(found))


def check_outside_callbacks(what: str) -> None:
    """LogicError when called from inside any plugin callback (load/init and reset included)."""
    if _core.in_plugin_callback():  # the message is the core's (src/_core/common/call_context.h)
        raise LogicError(_core.refusal("simulation_control", what))
