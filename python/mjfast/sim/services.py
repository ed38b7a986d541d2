"""The simulation-control bus services (SPEC §13): one service per call, under the env's namespace,
taking and returning JSON-able dicts, so that a remote client or the CLI can drive an env.

Each handler parses its request, calls the env's own method (which raises what it raises) and
converts the result; it holds the env weakly. It owns no simulation logic (`MujocoEnv` and
the modules it delegates to do: `mjfast.model.joints`, `mjfast.model.kinematics`,
`mjfast.model.options`).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mjfast.errors import LogicError
from mjfast.names import unknown
from mjfast.plugin.base import check_outside_callbacks

if TYPE_CHECKING:
    from mjfast.bus.node import ServiceRegistration
    from mjfast.sim.env import MujocoEnv

__all__ = ["SERVICE_NAMES", "advertise_simulation_services", "cancellable", "jsonable"]

Handler = Callable[["MujocoEnv", Mapping[str, Any]], dict[str, Any]]

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


def _request(request: Any, service: str, allowed: tuple[str, ...],
             required: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """The request as a mapping with only `allowed` keys and every `required` one (ValueError)."""
    if request is None:
        request = {}
    if not isinstance(request, Mapping):
        raise ValueError(f"{service}: the request must be a dict (or None), got {request!r}")
    for key in request:
        if key not in allowed:
            raise ValueError(unknown(f"{service}: unknown request field", key, allowed,
                                     exists="its fields are"))
    for key in required:
        if key not in request:
            raise ValueError(f"{service}: the request needs {key!r}")
    return request


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{what} must be a bool, got {value!r}")
    return bool(value)


def _pause(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    if _bool(request.get("paused", True), "paused"):
        env.pause()
    else:
        env.resume()
    return {"paused": env.paused}


def _step(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
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
        _step_cancellable(env, steps, cancelled)
    return {"step_count": env.step_count, "time": float(env.data.time)}


def _step_cancellable(env: MujocoEnv, steps: int, cancelled: Callable[[], str | None]) -> None:
    """env.step(steps) in chunks of about _STEP_CHUNK_S, asking `cancelled` before each."""
    done, chunk = 0, 1
    while done < steps:
        reason = cancelled()
        if reason is not None:
            raise InterruptedError(f"step: stopped after {done} of {steps} steps: {reason}")
        n = min(chunk, steps - done)
        started = time.perf_counter()
        env.step(n)
        done += n
        elapsed = time.perf_counter() - started
        if elapsed < _STEP_CHUNK_S / 2:
            chunk = min(chunk * 2, 1 << 40)
        elif elapsed > _STEP_CHUNK_S * 2 and chunk > 1:
            chunk //= 2


def _reset(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    keep_time = request.get("keep_time", False)
    if isinstance(keep_time, np.bool_):  # a remote client's numpy bool
        keep_time = bool(keep_time)
    env.reset(request.get("keyframe"), joint_positions=request.get("joint_positions"),
              joint_velocities=request.get("joint_velocities"), keep_time=keep_time)
    return {"time": float(env.data.time)}


def _reload(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    check_outside_callbacks("reload()")
    model = request.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a path (a string), got {model!r}")
    env.reload(model)
    return {"model_generation": env.model_generation}


def _get_joint_state(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    states = env.get_joint_state(request.get("names"))
    return {name: {"position": state.position.tolist(), "velocity": state.velocity.tolist()}
            for name, state in states.items()}


def _set_joint_state(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.set_joint_state(request.get("positions"), request.get("velocities"))
    return {}


def _get_body_state(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    return jsonable(env.get_body_state(request["body"], frame=request.get("frame")))


def _set_body_state(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.set_body_state(request["states"], frame=request.get("frame"))
    return {}


def _apply_options(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.apply_options(request["patch"])
    return {}


def _set_equality_active(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.set_equality_active(request["name"], request["active"])
    return {}


def _set_realtime_factor(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    env.set_realtime_factor(request["realtime_factor"])
    return {"realtime_factor": env.realtime_factor}


def _info(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    return jsonable(env.info())


def _statistics(env: MujocoEnv, request: Mapping[str, Any]) -> dict[str, Any]:
    statistics = env.statistics()
    # Plugins by name, as a remote client looks them up; states by name ("ACTIVE").
    plugins = {plugin["name"]: {key: value for key, value in plugin.items() if key != "name"}
               for plugin in statistics["plugins"]}
    return jsonable({**statistics, "plugins": plugins})


# service name -> (handler, allowed request fields, required ones)
_SERVICES: dict[str, tuple[Handler, tuple[str, ...], tuple[str, ...]]] = {
    "pause": (_pause, ("paused",), ()),
    "step": (_step, ("steps",), ()),
    "reset": (_reset, ("keyframe", "joint_positions", "joint_velocities", "keep_time"), ()),
    "reload": (_reload, ("model",), ()),
    "get_joint_state": (_get_joint_state, ("names",), ()),
    "set_joint_state": (_set_joint_state, ("positions", "velocities"), ()),
    "get_body_state": (_get_body_state, ("body", "frame"), ("body",)),
    "set_body_state": (_set_body_state, ("states", "frame"), ("states",)),
    "apply_options": (_apply_options, ("patch",), ("patch",)),
    "set_equality_active": (_set_equality_active, ("name", "active"), ("name", "active")),
    "set_realtime_factor": (_set_realtime_factor, ("realtime_factor",), ("realtime_factor",)),
    "info": (_info, (), ()),
    "statistics": (_statistics, (), ()),
}
SERVICE_NAMES = tuple(_SERVICES)


def advertise_simulation_services(env: MujocoEnv) -> list[ServiceRegistration]:
    """Advertises every service as `<env namespace>/<name>` on env.bus (kept across reloads)."""
    reference = weakref.ref(env)  # the bus belongs to the env: no cycle through the handlers
    prefix = env.namespace.rstrip("/")
    registrations = []
    for name, (handler, allowed, required) in _SERVICES.items():
        service = f"{prefix}/{name}"

        def serve(request: Any, handler: Handler = handler, service: str = service,
                  allowed: tuple[str, ...] = allowed,
                  required: tuple[str, ...] = required) -> dict[str, Any]:
            target = reference()
            if target is None:
                raise LogicError(f"{service}: the env is gone")
            return handler(target, _request(request, service, allowed, required))

        registrations.append(env.bus.advertise_service(service, serve))
    return registrations
