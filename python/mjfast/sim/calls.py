"""The simulation-control calls (SPEC §13, §20) as one table, `SIM_CALLS`: each row names a call,
the fields of its request, whether it changes the simulated state, its ROS 2 service if it has
one, and how it is applied to an env. Everything that lists calls is derived from it: the bus
services (`mjfast.sim.services`), the calls a recording holds and replay applies
(`mjfast.interop.record`), a VectorEnv world's methods (`mjfast.sim.vector_env.World`), the
bridge's std_srvs services (`mjfast.interop.ros2.bridge`) and what a plugin's context forwards
(`mjfast.plugin.base.PluginContext`). It also holds the env's call listeners (`CallListeners`):
an applied state-changing call is reported to them at its step boundary (a recording is one).

It owns no simulation logic (the env and `mjfast.model` do) and no transport.

Adding a call, for example `set_mocap_pose`:

1. its logic, `(model, data, **request) -> result`, in `mjfast.model` (validate the whole
   request first; on an error raise and change nothing): `kinematics.set_mocap_pose`;
2. one row in `SIM_CALLS` below: its request `fields`, `changes_state=True` if it changes the
   simulation (then it is reported to the env's call listeners, recorded and replayed),
   `logic=`, `world=True` for VectorEnv worlds, `ros2=` for a std_srvs service on the bridge,
   `bus=False` for no bus service;
3. the env's typed method, which runs the row: `self._call("set_mocap_pose", body=body,
   pos=pos, quat=quat)` (refused inside plugin callbacks, stepping held, reported to the
   listeners at that step boundary). A call whose logic needs the env itself (reset, reload,
   a spawn) writes its method out instead, holds stepping itself and, once the change has taken
   effect, calls `self._report_call(name, **args)` with stepping still held (and sets
   `state_after=True` in its row if it changes the model).

The bus service `<ns>/<name>`, the recording, replay, the world's method and the plugin's
context follow. tests/sim/test_calls.py checks every row against each of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from mjfast.errors import LogicError
from mjfast.model import joints, kinematics, options
from mjfast.model.state import SimState
from mjfast.plugin.base import check_outside_callbacks
from mjfast.sim.entities import spawn_call

if TYPE_CHECKING:
    from mjfast.sim.env import MujocoEnv

__all__ = ["REQUIRED", "SIM_CALLS", "CallListener", "CallListeners", "Field", "Ros2Service",
           "SimCall", "bus_calls", "cancellable", "jsonable", "recorded_calls", "ros2_calls",
           "sim_call", "step_in_chunks", "world_calls"]

_log = logging.getLogger("mjfast.env")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


# A request field without a default: a bus request must give it.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Field:
    """One field of a call's request: its name, what it takes (as the docs say it), and its
    default when a bus request leaves it out (`REQUIRED`: it must be given)."""

    name: str
    type: str
    default: Any = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Ros2Service:
    """A call's ROS 2 service on the bridge (SPEC §19): its std_srvs type, `answer(env, request)
    -> (success, message)`, and whether it is answered on the queryable's own thread (`inline`:
    quick calls; the others go to a worker thread)."""

    type: str
    answer: Callable[[Any, Any], tuple[bool, str]]
    inline: bool = False


# (env, request with every field) -> the bus reply
Serve = Callable[["MujocoEnv", Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class SimCall:
    """One simulation-control call (SPEC §13).

    `fields`: its request, the bus service's keys (`bus=False`: no bus service; the fields then
    say what the env method takes). `changes_state`: it changes the simulated state; applied, it
    is reported to the env's call listeners, and so recorded and replayed (SPEC §20).
    `state_after`: a recording takes a full state right after it (the model's identity may have
    changed, or the state was replaced). `ros2`: its std_srvs service on the bridge. `world`: a
    method of a VectorEnv world. `logic(model, data, **request)`: what the env runs for it with
    stepping held (`env._call`); None where the env's method is written out (it needs the env).
    `serve`: the bus handler (default: the env's method called with the request, the result made
    JSON-able, `{}` for None). `from_record`: a recorded request back into the call's arguments.
    """

    name: str
    fields: tuple[Field, ...] = ()
    changes_state: bool = False
    state_after: bool = False
    ros2: Ros2Service | None = None
    world: bool = False
    bus: bool = True
    logic: Callable[..., Any] | None = None
    serve: Serve | None = None
    from_record: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def allowed(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.required)

    def answer(self, env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
        """The bus reply to `request` (checked: only this call's fields, the required ones)."""
        if self.serve is not None:
            return self.serve(env, request)
        result = getattr(env, self.name)(**{f.name: request.get(f.name, f.default)
                                            for f in self.fields})
        return {} if result is None else jsonable(result)

    def apply_recorded(self, env: Any, args: Mapping[str, Any]) -> Any:
        """Applies a recorded call to `env` (replay), through its public method."""
        call_args = dict(args) if self.from_record is None else self.from_record(dict(args))
        return getattr(env, self.name)(**call_args)


# -- values -----------------------------------------------------------------------------------

def jsonable(value: Any) -> Any:
    """`value` with numpy arrays and scalars, tuples, enums and named tuples made JSON types."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, enum.Enum):
        return value.name
    if hasattr(value, "_asdict"):  # a named tuple (PluginLoadFailure, BodyState, ...)
        return {key: jsonable(item) for key, item in value._asdict().items()}
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON-able: {value!r}")


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{what} must be a bool, got {value!r}")
    return bool(value)


# -- step, cancellable ------------------------------------------------------------------------

# The most steps one `step` call takes (env.step's own limit).
_MAX_STEPS = 2**63 - 1
# A cancellable `step` call runs in chunks of about this long, asking between chunks whether it
# should stop: a cancelled call ends this soon after (plus one step).
_STEP_CHUNK_S = 0.01

# What a service call made on this thread (or task) asks to know whether it should stop early:
# None, or a function returning why it should (a text), or None while it may go on.
_cancellation: contextvars.ContextVar[Callable[[], str | None] | None] = contextvars.ContextVar(
    "mjfast_service_cancellation", default=None)


@contextlib.contextmanager
def cancellable(reason: Callable[[], str | None]) -> Iterator[None]:
    """Makes the `step` service calls made inside the block cancellable: such a call runs in
    chunks of about 10 ms and, once `reason()` returns a text, stops at the next chunk boundary
    and raises InterruptedError("step: stopped after K of N steps: <reason>"). The remote
    server runs every call this way (SPEC §15; docs/remote.md). The other services end by
    themselves."""
    token = _cancellation.set(reason)
    try:
        yield
    finally:
        _cancellation.reset(token)


def step_in_chunks(env: Any, steps: int, cancelled: Callable[[], str | None],
                   progress: Callable[[int], None] | None = None) -> None:
    """env.step(steps) in chunks of about _STEP_CHUNK_S (the first of one step), asking
    `cancelled` before each (InterruptedError("step: stopped after K of N steps: <reason>") once
    it gives a reason) and telling `progress` the steps done after each: the remote server's
    cancellable `step` and simulation_interfaces' `simulate_steps` action (its feedback). A
    chunk that the env refuses (LogicError: resumed or closed between the question and the
    step) is that interruption too when `cancelled` now gives a reason."""
    done, chunk = 0, 1
    while done < steps:
        reason = cancelled()
        if reason is not None:
            raise InterruptedError(f"step: stopped after {done} of {steps} steps: {reason}")
        n = min(chunk, steps - done)
        started = time.perf_counter()
        try:
            env.step(n)
        except LogicError:  # refused before stepping (it steps nothing then)
            reason = cancelled()
            if reason is None:
                raise
            raise InterruptedError(
                f"step: stopped after {done} of {steps} steps: {reason}") from None
        done += n
        if progress is not None:
            progress(done)
        elapsed = time.perf_counter() - started
        if elapsed < _STEP_CHUNK_S / 2:
            chunk = min(chunk * 2, 1 << 40)
        elif elapsed > _STEP_CHUNK_S * 2 and chunk > 1:
            chunk //= 2


# -- the bus handlers that are more than the env's method -------------------------------------

def _serve_pause(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    if _bool(request.get("paused", True), "paused"):
        env.pause()
    else:
        env.resume()
    return {"paused": env.paused}


def _serve_step(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    steps = request.get("steps", 1)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if steps > _MAX_STEPS:
        raise ValueError(f"steps must be at most 2**63-1, got {steps!r}")
    steps = int(steps)
    cancelled = _cancellation.get()
    if cancelled is None:
        env.step(steps)
    else:
        step_in_chunks(env, steps, cancelled)
    return {"step_count": env.step_count, "time": float(env.data.time)}


def _serve_reset(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    keep_time = request.get("keep_time", False)
    if isinstance(keep_time, np.bool_):  # a remote client's numpy bool
        keep_time = bool(keep_time)
    env.reset(request.get("keyframe"), joint_positions=request.get("joint_positions"),
              joint_velocities=request.get("joint_velocities"), keep_time=keep_time)
    return {"time": float(env.data.time)}


def _serve_reload(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    check_outside_callbacks("reload()")
    model = request.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a path (a string), got {model!r}")
    env.reload(model)
    return {"model_generation": env.model_generation}


def _serve_get_joint_state(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    states = env.get_joint_state(request.get("names"))
    return {name: {"position": state.position.tolist(), "velocity": state.velocity.tolist()}
            for name, state in states.items()}


def _serve_set_realtime_factor(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.set_realtime_factor(request["realtime_factor"])
    return {"realtime_factor": env.realtime_factor}


def _serve_statistics(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    statistics = env.statistics()
    # Plugins by name, as a remote client looks them up; states by name ("ACTIVE").
    plugins = {plugin["name"]: {key: value for key, value in plugin.items() if key != "name"}
               for plugin in statistics["plugins"]}
    return jsonable({**statistics, "plugins": plugins})


def _entity_info(info: Any) -> dict[str, Any]:
    return jsonable(dataclasses.asdict(info))


def _serve_entities(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _entity_info(info) for name, info in env.entities().items()}


def _serve_spawn(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    model = request["model"]
    if not isinstance(model, str):
        raise ValueError(f"model must be a path or MJCF/URDF text (a string), got {model!r}")
    info = env.spawn(model, request["name"], pose=request.get("pose"),
                     frame=request.get("frame") or "world", namespace=request.get("namespace"),
                     params=request.get("params"))
    return {"model_generation": env.model_generation, "entity": _entity_info(info)}


def _serve_remove(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.remove(request["name"])
    return {"model_generation": env.model_generation}


# -- the ROS 2 std_srvs answers (SPEC §19) ----------------------------------------------------

def _ros2_pause(env: MujocoEnv, request: Any) -> tuple[bool, str]:
    if request.data:
        env.pause()
        return True, "paused"
    env.resume()
    return True, "resumed"


def _ros2_reset(env: MujocoEnv, request: Any) -> tuple[bool, str]:
    env.reset()
    return True, "reset"


def _ros2_reload(env: MujocoEnv, request: Any) -> tuple[bool, str]:
    env.reload()
    return True, "reloaded"


# -- the logic of the calls the env runs through its one path (env._call) ---------------------

def _set_joint_state(model: mujoco.MjModel, data: mujoco.MjData, positions: Any = None,
                     velocities: Any = None) -> None:
    checked_positions = joints.checked_joint_values(model, positions, "positions")
    checked_velocities = joints.checked_joint_values(model, velocities, "velocities")
    joints.write_joint_values(data, checked_positions, checked_velocities)
    kinematics.forward(model, data)


def _apply_options(model: mujoco.MjModel, data: mujoco.MjData, patch: Any) -> None:
    options.apply_options(model, patch)
    kinematics.forward(model, data)


def _state_from_record(args: dict[str, Any]) -> dict[str, Any]:
    return {**args, "state": SimState.from_bytes(args["state"])}


# -- the table ----------------------------------------------------------------------------------

_JOINT_VALUES = "mapping joint name -> value (a free joint 7 positions / 6 velocities)"

SIM_CALLS: tuple[SimCall, ...] = (
    SimCall("pause", (Field("paused", "bool", True),), serve=_serve_pause,
            ros2=Ros2Service("std_srvs/srv/SetBool", _ros2_pause, inline=True)),
    SimCall("resume", bus=False),  # the bus's pause {"paused": false}
    SimCall("step", (Field("steps", "int >= 1", 1),), serve=_serve_step),
    SimCall("reset", (Field("keyframe", "keyframe name or index"),
                      Field("joint_positions", _JOINT_VALUES),
                      Field("joint_velocities", _JOINT_VALUES),
                      Field("keep_time", "bool", False)),
            changes_state=True, serve=_serve_reset, world=True,
            ros2=Ros2Service("std_srvs/srv/Trigger", _ros2_reset)),
    SimCall("reload", (Field("model", "path"),), changes_state=True, state_after=True,
            serve=_serve_reload, ros2=Ros2Service("std_srvs/srv/Trigger", _ros2_reload)),
    SimCall("get_joint_state", (Field("names", "list of joint names"),),
            logic=joints.joint_state, serve=_serve_get_joint_state, world=True),
    SimCall("set_joint_state", (Field("positions", _JOINT_VALUES),
                                Field("velocities", _JOINT_VALUES)),
            changes_state=True, logic=_set_joint_state, world=True),
    SimCall("get_body_state", (Field("body", "body name or id", REQUIRED),
                               Field("frame", "body name or id")), world=True),
    SimCall("set_body_state", (Field("states", "mapping body -> {pos, quat, linvel, angvel}",
                                     REQUIRED),
                               Field("frame", "body name or id")),
            changes_state=True, logic=kinematics.set_body_states, world=True),
    SimCall("apply_options", (Field("patch", "mapping MjOption field -> value", REQUIRED),),
            changes_state=True, logic=_apply_options, world=True),
    SimCall("set_equality_active", (Field("name", "equality name or id", REQUIRED),
                                    Field("active", "bool", REQUIRED)),
            changes_state=True, logic=kinematics.set_equality_active, world=True),
    SimCall("set_mocap_pose", (Field("body", "mocap body name or id", REQUIRED),
                               Field("pos", "3 numbers"), Field("quat", "4 numbers")),
            changes_state=True, logic=kinematics.set_mocap_pose, world=True),
    SimCall("set_realtime_factor", (Field("realtime_factor", "positive number or None",
                                          REQUIRED),),
            serve=_serve_set_realtime_factor),
    SimCall("info", world=True),
    SimCall("statistics", serve=_serve_statistics, world=True),
    SimCall("set_geom_properties", (Field("geom", "geom name or id", REQUIRED),
                                    Field("size", "3 numbers"), Field("rgba", "4 numbers"),
                                    Field("friction", "3 numbers"), Field("contype", "int"),
                                    Field("conaffinity", "int")),
            changes_state=True, bus=False),
    SimCall("get_state", bus=False, world=True),
    SimCall("set_state", (Field("state", "SimState", REQUIRED),), changes_state=True,
            state_after=True, bus=False, world=True, from_record=_state_from_record),
    # SPEC §25: the world's entities (their ROS 2 services are simulation_interfaces', in
    # mjfast.interop.ros2.simulation_services).
    SimCall("entities", serve=_serve_entities, world=True),
    SimCall("spawn", (Field("model", "MJCF/URDF path or text", REQUIRED),
                      Field("name", "entity name", REQUIRED), Field("pose", "{pos, quat}"),
                      Field("frame", "body or entity name, or world", "world"),
                      Field("namespace", "ROS-style namespace"),
                      Field("params", "{MujocoPlugins: ...}")),
            changes_state=True, state_after=True, serve=_serve_spawn, world=True,
            from_record=spawn_call),
    SimCall("remove", (Field("name", "entity name", REQUIRED),), changes_state=True,
            state_after=True, serve=_serve_remove, world=True),
    SimCall("get_entity_state", (Field("name", "entity name", REQUIRED),
                                 Field("frame", "body or entity name, or world", "world")),
            world=True),
    SimCall("set_entity_state", (Field("name", "entity name", REQUIRED),
                                 Field("pose", "{pos, quat}"), Field("twist", "{linvel, angvel}"),
                                 Field("frame", "body or entity name, or world", "world")),
            changes_state=True, world=True),
)

_BY_NAME = {call.name: call for call in SIM_CALLS}


def sim_call(name: str) -> SimCall:
    """The row of call `name` (KeyError naming the calls there are)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        from mjfast.names import unknown

        raise KeyError(unknown("no simulation call", name, list(_BY_NAME),
                               exists="the calls are")) from None


def bus_calls() -> tuple[SimCall, ...]:
    """The calls that are bus services (`<ns>/<name>`), in table order."""
    return tuple(call for call in SIM_CALLS if call.bus)


def recorded_calls() -> tuple[SimCall, ...]:
    """The calls a recording holds and replay applies: those that change the state."""
    return tuple(call for call in SIM_CALLS if call.changes_state)


def world_calls() -> tuple[SimCall, ...]:
    """The calls a VectorEnv world offers on its own world."""
    return tuple(call for call in SIM_CALLS if call.world)


def ros2_calls() -> tuple[SimCall, ...]:
    """The calls the ROS 2 bridge serves with std_srvs types."""
    return tuple(call for call in SIM_CALLS if call.ros2 is not None)


# -- listeners ----------------------------------------------------------------------------------

Listener = Callable[[str, Mapping[str, Any]], None]


class CallListener:
    """One function told of every applied state-changing call (`env.add_call_listener`) until
    `remove()` (idempotent)."""

    def __init__(self, listeners: CallListeners, function: Listener) -> None:
        self.function = function
        self._listeners = listeners

    def remove(self) -> None:
        self._listeners._remove(self)

    close = remove

    def __repr__(self) -> str:
        return f"<CallListener {self.function!r}>"


class CallListeners:
    """An env's call listeners: each applied state-changing call is reported to every one, at
    the step boundary where it took effect (stepping held), with its name and arguments."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[CallListener, ...] = ()

    def add(self, function: Listener) -> CallListener:
        if not callable(function):
            raise TypeError(f"a call listener must be callable, got {function!r}")
        listener = CallListener(self, function)
        with self._lock:
            self._listeners = (*self._listeners, listener)
        return listener

    def _remove(self, listener: CallListener) -> None:
        with self._lock:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def report(self, name: str, args: Mapping[str, Any]) -> None:
        """Tells every listener; one that raises is logged and does not stop the others (the
        call has taken effect: its caller is not told otherwise)."""
        for listener in self._listeners:
            try:
                listener.function(name, args)
            except Exception:
                _log.exception("the call listener %r failed on %s()", listener.function, name)
