"""The `simulation_interfaces` 2.1.0 services (SPEC §25): each request turned into the env's
calls (spawn, remove, entity state, reset, step, pause) and the answer into the package's
response, with its result codes and `error_message`s.

It owns the mapping between the package's messages and the env's calls, the STOPPED mark of the
simulation state, and the `simulate_steps` action's goals (`StepAction`: on the env's bus with
rcl_action's goal semantics, `mjfast.plugin.actions.ActionServer`, one per env however many
bridges it has); the wire (queryables, attachments, queues, the action's services and topics) is
the bridge's, the types and CDR are `mjfast.interop.ros2.types`' (from the package's own
definitions, which mjfast carries in `interfaces/simulation_interfaces`,
`mjfast.interop.ros2.action_types`).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

import numpy as np

from mjfast.bus.node import Node
from mjfast.errors import LogicError, MjfastError
from mjfast.interop.ros2.types import message_class, typestore
from mjfast.model.entities import FORMATS, checked_entity_name
from mjfast.plugin.actions import ActionServer, GoalHandle, GoalStatus
from mjfast.sim.calls import step_in_chunks

__all__ = ["FEATURES", "PACKAGE", "SIMULATE_STEPS", "SimulationInterfaces", "StepAction",
           "failure_response"]

PACKAGE = "simulation_interfaces"
SIMULATE_STEPS = f"{PACKAGE}/action/SimulateSteps"

# Result.msg
OK, NOT_FOUND, INCORRECT_STATE, OPERATION_FAILED, FEATURE_UNSUPPORTED = 1, 2, 3, 4, 0
# SpawnEntity.srv / SpawnResult.msg
NAME_NOT_UNIQUE, NAME_INVALID, UNSUPPORTED_FORMAT, NO_RESOURCE = 101, 102, 103, 104
NAMESPACE_INVALID, RESOURCE_PARSE_ERROR, MISSING_ASSETS, INVALID_POSE = 105, 106, 107, 109
ENTITIES_SPAWN_FAILED = 150  # SpawnEntities.srv
SET_INVALID_POSE = 101  # SetEntityState.srv
ALREADY_IN_TARGET_STATE, STATE_TRANSITION_ERROR, INCORRECT_TRANSITION = 101, 102, 103
# SimulationState.msg
STOPPED, PLAYING, PAUSED, QUITTING = 0, 1, 2, 3
# ResetSimulation.srv scopes
SCOPE_DEFAULT, SCOPE_TIME, SCOPE_STATE, SCOPE_SPAWNED, SCOPE_ALL = 0, 1, 2, 4, 255
# EntityCategory.msg
CATEGORY_OBJECT, CATEGORY_ROBOT, CATEGORY_DYNAMIC_OBJECT, CATEGORY_STATIC_OBJECT = 0, 1, 4, 5
# Bounds.msg
BOUNDS_EMPTY, BOUNDS_BOX, BOUNDS_CONVEX_HULL, BOUNDS_SPHERE = 0, 1, 2, 3
# A convex hull filter's points at most (its test runs over their simplices, Carathéodory's).
MAX_HULL_POINTS = 16

# SimulatorFeatures.msg: exactly what the services below do.
FEATURES = (
    0,   # SPAWNING
    1,   # DELETING
    6,   # ENTITY_BOUNDS_BOX (filters of get_entities / get_entities_states; TYPE_SPHERE too)
    7,   # ENTITY_BOUNDS_CONVEX
    8,   # ENTITY_CATEGORIES
    9,   # SPAWNING_RESOURCE_STRING
    10,  # ENTITY_STATE_GETTING
    11,  # ENTITY_STATE_SETTING
    12,  # ENTITY_INFO_GETTING
    20,  # SIMULATION_RESET
    22,  # SIMULATION_RESET_STATE
    23,  # SIMULATION_RESET_SPAWNED
    24,  # SIMULATION_STATE_GETTING
    25,  # SIMULATION_STATE_SETTING
    26,  # SIMULATION_STATE_PAUSE
    31,  # STEP_SIMULATION_SINGLE
    32,  # STEP_SIMULATION_MULTIPLE
    33,  # STEP_SIMULATION_ACTION
    50,  # SPAWNING_ENTITIES
)
# The most steps one goal or call takes (env.step's own limit; the package's steps are uint64).
MAX_STEPS = 2**63 - 1


def _msg(name: str) -> Any:
    return message_class(f"{PACKAGE}/msg/{name}")


def _srv(name: str, part: str) -> Any:
    return message_class(f"{PACKAGE}/srv/{name}_{part}")


def _result(code: int = OK, message: str = "") -> Any:
    return _msg("Result")(result=code, error_message=message)


def failure_response(service_type: str, message: str) -> Any:
    """The response of a call that did not run (the bridge closing or busy): its `result` is
    OPERATION_FAILED with `message`, everything else empty."""
    return _empty_response(service_type, _result(OPERATION_FAILED, message))


def _empty_response(service_type: str, result: Any) -> Any:
    """`service_type`'s response with `result`, every other field zero (empty)."""
    return _zero_message(f"{service_type}_Response", result=result)


def _zero_message(type_name: str, **fields: Any) -> Any:
    """A message of `type_name` with `fields`, every other field zero (empty)."""
    store = typestore()
    _, definitions = store.fielddefs[type_name]
    values = {name: fields[name] if name in fields else _zero(store, desc)
              for name, desc in definitions}
    return store.types[type_name](**values)


def _zero(store: Any, desc: Any) -> Any:
    kind, rest = desc
    if kind.name == "NAME":
        return _zero_message(rest)
    if kind.name == "BASE":
        return {"string": "", "bool": False, "float32": 0.0, "float64": 0.0}.get(rest[0], 0)
    inner, count = rest
    size = count if kind.name == "ARRAY" else 0
    if inner[0].name == "BASE" and inner[1][0] != "string":
        return np.zeros(size, dtype=_numpy_type(inner[1][0]))
    return [_zero(store, inner) for _ in range(size)]


def _numpy_type(base: str) -> str:
    return {"bool": "bool", "byte": "uint8", "char": "uint8", "octet": "uint8"}.get(base, base)


# -- poses and states ---------------------------------------------------------------------------

def _pose_of(message: Any) -> dict[str, list[float]]:
    """geometry_msgs/Pose as a spawn's {pos, quat} (quaternion w first)."""
    p, q = message.position, message.orientation
    return {"pos": [p.x, p.y, p.z], "quat": [q.w, q.x, q.y, q.z]}


def _geometry(name: str) -> Any:
    return message_class(f"geometry_msgs/msg/{name}")


def _pose_message(pos: np.ndarray, quat: np.ndarray) -> Any:
    return _geometry("Pose")(position=_geometry("Point")(x=float(pos[0]), y=float(pos[1]),
                                                          z=float(pos[2])),
                             orientation=_geometry("Quaternion")(
                                 x=float(quat[1]), y=float(quat[2]), z=float(quat[3]),
                                 w=float(quat[0])))


def _vector(values: np.ndarray) -> Any:
    return _geometry("Vector3")(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def _stamp(time: float) -> Any:
    sec = math.floor(time)
    return message_class("builtin_interfaces/msg/Time")(
        sec=sec, nanosec=min(round((time - sec) * 1e9), 999_999_999))


class StepAction:
    """The `simulate_steps` action of one env (SimulateSteps.action): its goals served on the
    env's bus under the env's namespace (`<ns>/simulate_steps/send_goal`, ..., the feedback and
    the latched status), which the bridge carries to ROS 2 as any declared action
    (`mjfast.interop.ros2.actions`); and the STOPPED mark of the simulation state, which stepping
    clears. Shared by every bridge of the env (`acquire`/`release`, counted).

    As Gazebo's (ros_gz_sim's SimulateSteps): every goal is accepted; one that finds another
    running, or the simulation not paused, or asks for no steps, is aborted at once with
    RESULT_OPERATION_FAILED and the reason. A running goal steps on its own thread in chunks of
    about 10 ms (`mjfast.sim.calls.step_in_chunks`), with feedback (`completed_steps`,
    `remaining_steps`) after each, and ends SUCCEEDED (RESULT_OK); a cancel stops it at the next
    chunk boundary (CANCELED, RESULT_OK, the steps done in `error_message`); a resume meanwhile
    aborts it (RESULT_OPERATION_FAILED), as does a failed step.

    Threads: `send_goal` and `cancel_goal` come from the bridges' action threads, the stepping
    from this action's own thread (one at most), `release` from a closing bridge. `_lock` is a
    leaf of the lock order (src/_core/env/env_core.h): the running goal, never held across a call
    out.
    """

    _shared: ClassVar[weakref.WeakKeyDictionary[Any, tuple[StepAction, int]]] = (
        weakref.WeakKeyDictionary())
    # Taken before the bus's lock (making or shutting down an env's action advertises and
    # publishes); nothing the bus calls takes it.
    _shared_lock = threading.Lock()

    def __init__(self, env: Any) -> None:
        self._env = env
        self.stopped = False  # STOPPED set and not played, paused or stepped since
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._node = Node(env.params, env.namespace, env.bus, "simulate_steps")
        self.server = ActionServer(self._node, "simulate_steps", validate=lambda goal: None,
                                   on_accepted=self._on_accepted, on_cancel=lambda handle: None,
                                   clock=lambda: float(env.data.time))

    @classmethod
    def acquire(cls, env: Any) -> StepAction:
        """The env's action, made by its first user."""
        with cls._shared_lock:
            action, users = cls._shared.get(env, (None, 0))
            if action is None:
                action = cls(env)
            cls._shared[env] = (action, users + 1)
            return action

    def release(self) -> None:
        """One user less; the last one shuts the action down (a running goal aborted, its thread
        joined, the bus services and the latched status withdrawn)."""
        with self._shared_lock:
            _, users = self._shared.get(self._env, (self, 1))
            if users > 1:
                self._shared[self._env] = (self, users - 1)
                return
            self._shared.pop(self._env, None)
            self.server.shutdown(_result_dict(OPERATION_FAILED, "the ROS 2 bridge closed"))
            with self._lock:
                worker = self._worker
            if worker is not None:
                worker.join()
            self._node.shutdown()

    def _on_accepted(self, handle: GoalHandle) -> None:
        env = self._env
        raw = handle.goal.get("steps") if isinstance(handle.goal, Mapping) else handle.goal
        try:  # the bridge's goals are SimulateSteps_Goal's; a bus caller's may be anything
            steps = operator.index(raw)
        except TypeError:
            steps = 0  # aborted below
        with self._lock:
            busy = self._worker is not None and self._worker.is_alive()
            if busy:
                reason: str | None = "another simulate_steps goal is running"
            elif not env.paused:
                reason = ("the simulation is not paused: simulate_steps steps a paused "
                          "simulation (set_simulation_state PAUSED first)")
            elif not 1 <= steps <= MAX_STEPS:
                reason = f"steps must be an integer from 1 to 2**63-1, got {raw!r}"
            else:
                reason = None
                self._worker = threading.Thread(target=self._run, args=(handle, steps),
                                                daemon=True, name="mjfast-simulate-steps")
        if reason is not None:
            handle.abort(_result_dict(OPERATION_FAILED, reason))
            return
        handle.execute()
        assert self._worker is not None
        self._worker.start()

    def _run(self, handle: GoalHandle, steps: int) -> None:
        env = self._env

        def stop_reason() -> str | None:
            if handle.status == GoalStatus.CANCELING:
                return "canceled"
            if handle.done():  # aborted by a shutdown
                return "the ROS 2 bridge closed"
            return None if env.paused else "the simulation was resumed"

        def progress(done: int) -> None:
            self.stopped = False
            handle.publish_feedback({"completed_steps": done, "remaining_steps": steps - done})

        try:
            step_in_chunks(env, steps, stop_reason, progress)
        except InterruptedError as error:
            message = _text(error).removeprefix("step: ")
            if handle.status == GoalStatus.CANCELING:
                handle.canceled(_result_dict(OK, message))
            else:
                handle.abort(_result_dict(OPERATION_FAILED, message))
            return
        except Exception as error:  # a plugin's error, a closed env: the goal fails
            handle.abort(_result_dict(OPERATION_FAILED, f"{type(error).__name__}: {error}"))
            return
        handle.succeed(_result_dict(OK))


def _result_dict(code: int, message: str = "") -> dict[str, Any]:
    """SimulateSteps_Result as the bus carries it."""
    return {"result": {"result": code, "error_message": message}}


class SimulationInterfaces:
    """The services of one env, by service name relative to the node's namespace: each a
    (ROS 2 type, handler taking the request and returning the response); and the action it
    declares, as a plugin declares one (`ros_actions`, carried by the bridge), served by the
    env's `StepAction` until `close()`."""

    ros_actions: ClassVar[dict[str, str]] = {"simulate_steps": SIMULATE_STEPS}

    def __init__(self, env: Any) -> None:
        self._env = env
        self._action = StepAction.acquire(env)  # and the STOPPED mark, shared by the bridges
        self._closed = False

    def close(self) -> None:
        """Releases the env's `simulate_steps` action (the last bridge's close ends it);
        idempotent."""
        if not self._closed:
            self._closed = True
            self._action.release()

    def table(self) -> dict[str, tuple[str, Callable[[Any], Any]]]:
        names = {
            "get_simulator_features": ("GetSimulatorFeatures", self.get_simulator_features),
            "spawn_entity": ("SpawnEntity", self.spawn_entity),
            "spawn_entities": ("SpawnEntities", self.spawn_entities),
            "delete_entity": ("DeleteEntity", self.delete_entity),
            "get_entities": ("GetEntities", self.get_entities),
            "get_entity_info": ("GetEntityInfo", self.get_entity_info),
            "get_entity_state": ("GetEntityState", self.get_entity_state),
            "get_entities_states": ("GetEntitiesStates", self.get_entities_states),
            "set_entity_state": ("SetEntityState", self.set_entity_state),
            "reset_simulation": ("ResetSimulation", self.reset_simulation),
            "step_simulation": ("StepSimulation", self.step_simulation),
            "get_simulation_state": ("GetSimulationState", self.get_simulation_state),
            "set_simulation_state": ("SetSimulationState", self.set_simulation_state),
        }
        return {name: (f"{PACKAGE}/srv/{srv}", handler) for name, (srv, handler) in names.items()}

    # -- features and entities ------------------------------------------------------------------

    def get_simulator_features(self, request: Any) -> Any:
        features = _msg("SimulatorFeatures")(
            features=np.array(FEATURES, dtype=np.uint16), spawn_formats=list(FORMATS),
            custom_info="mjfast: MuJoCo; entity names are the world's children and spawned "
                        "models; a bounds filter keeps the entities whose root frame's position "
                        "is inside the bounds; SCOPE_TIME resets only together with SCOPE_STATE; "
                        "simulate_steps gives feedback after each chunk of about 10 ms of "
                        "stepping")
        return _srv("GetSimulatorFeatures", "Response")(features=features)

    def _spawn_one(self, request: Any) -> tuple[int, str, str]:
        """(result code, error message, entity name) of one SpawnEntity request."""
        env = self._env
        resource = request.entity_resource
        if not resource.uri and not resource.resource_string:
            return NO_RESOURCE, "both entity_resource.uri and resource_string are empty", ""
        if resource.uri:
            parsed = urlparse(resource.uri)
            if parsed.scheme not in ("", "file"):
                return UNSUPPORTED_FORMAT, (f"uri {resource.uri!r}: only file:// URIs and paths "
                                            f"are read (formats: {', '.join(FORMATS)})"), ""
            path = Path(unquote(parsed.path) if parsed.scheme == "file" else resource.uri)
            if path.suffix.lower() not in (".xml", ".mjcf", ".urdf"):
                return UNSUPPORTED_FORMAT, (f"uri {resource.uri!r}: a {path.suffix or 'no'} "
                                            f"file; the formats are {', '.join(FORMATS)} "
                                            f"(.xml, .mjcf, .urdf)"), ""
            if not path.is_file():
                return RESOURCE_PARSE_ERROR, f"uri {resource.uri!r}: no such file {path}", ""
            model: Any = str(path)
            text = path.read_text()
        else:
            model = text = resource.resource_string
            if not text.lstrip().startswith("<"):
                return UNSUPPORTED_FORMAT, ("resource_string is not XML (MJCF or URDF text "
                                            "expected)"), ""
        name = request.name or _model_name(text)
        known = set(env.entities())
        if not name:
            if not request.allow_renaming:
                return NAME_INVALID, "name is empty and allow_renaming is false", ""
            name = "entity"
        try:
            checked_entity_name(name)
        except ValueError as error:
            if not request.allow_renaming:
                return NAME_INVALID, str(error), ""
            name = re.sub(r"[^A-Za-z0-9_.\-]", "_", name).lstrip(".-") or "entity"
        if name in known:
            if not request.allow_renaming:
                return NAME_NOT_UNIQUE, f"entity name {name!r} is taken", ""
            name = next(f"{name}_{i}" for i in range(1, len(known) + 2)
                        if f"{name}_{i}" not in known)
        namespace = request.entity_namespace or None
        if namespace is not None and not re.fullmatch(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_]"
                                                      r"[A-Za-z0-9_]*)*", namespace):
            return NAMESPACE_INVALID, f"entity_namespace {namespace!r} is not a ROS 2 namespace", ""
        pose = _pose_of(request.initial_pose.pose)
        frame = request.initial_pose.header.frame_id or "world"
        try:
            env.spawn(model, name, pose=pose, frame=frame, namespace=namespace)
        except KeyError as error:
            return NOT_FOUND, _text(error), ""
        except ValueError as error:
            message = _text(error)
            if message.startswith("pose"):
                return INVALID_POSE, message, ""
            if "taken" in message:
                return NAME_NOT_UNIQUE, message, ""
            if "does not parse" in message:
                return RESOURCE_PARSE_ERROR, message, ""
            if re.search(r"resource not found|could not open|file not found", message, re.I):
                return MISSING_ASSETS, message, ""
            return RESOURCE_PARSE_ERROR, message, ""
        except (LogicError, MjfastError, OSError) as error:
            return OPERATION_FAILED, _text(error), ""
        return OK, "", name

    def spawn_entity(self, request: Any) -> Any:
        code, message, name = self._spawn_one(request)
        return _srv("SpawnEntity", "Response")(result=_result(code, message), entity_name=name)

    def spawn_entities(self, request: Any) -> Any:
        results = []
        for one in request.spawn_requests:
            code, message, name = self._spawn_one(one)
            results.append(_msg("SpawnResult")(result=_result(code, message), entity_name=name))
        failed = sum(r.result.result != OK for r in results)
        result = _result(ENTITIES_SPAWN_FAILED, f"{failed} of {len(results)} spawns failed") \
            if failed else _result()
        return _srv("SpawnEntities", "Response")(result=result, results=results)

    def delete_entity(self, request: Any) -> Any:
        try:
            self._env.remove(request.entity)
            result = _result()
        except KeyError as error:
            result = _result(NOT_FOUND, _text(error))
        except (ValueError, LogicError, MjfastError) as error:
            result = _result(OPERATION_FAILED, _text(error))
        return _srv("DeleteEntity", "Response")(result=result)

    def _filtered(self, filters: Any) -> tuple[Any, list[str]]:
        """(failure result or None, the entity names that pass `filters`)."""
        if list(filters.tags.tags):
            return _result(FEATURE_UNSUPPORTED, "entity tags are not supported (ENTITY_TAGS)"), []
        try:
            inside = _bounds_test(filters.bounds)
        except ValueError as error:
            return _result(OPERATION_FAILED, str(error)), []
        if inside is None and filters.bounds.type != BOUNDS_EMPTY:
            return _result(FEATURE_UNSUPPORTED, f"bounds type {filters.bounds.type} is not one of "
                                                f"TYPE_EMPTY, TYPE_BOX, TYPE_CONVEX_HULL, "
                                                f"TYPE_SPHERE"), []
        try:
            pattern = re.compile(filters.filter) if filters.filter else None
        except re.error as error:
            return _result(OPERATION_FAILED, f"filter {filters.filter!r} is not a regular "
                                             f"expression: {error}"), []
        categories = {c.category for c in filters.categories}
        infos = self._env.entities()
        names = []
        for name, info in sorted(infos.items()):
            if pattern is not None and not pattern.search(name):
                continue
            if categories and _category(self._env, info) not in categories:
                continue
            if inside is not None:
                try:
                    position = self._env.get_entity_state(name).pos
                except (KeyError, ValueError):  # removed meanwhile
                    continue
                if not inside(np.asarray(position, dtype=float)):
                    continue
            names.append(name)
        return None, names

    def get_entities(self, request: Any) -> Any:
        failure, names = self._filtered(request.filters)
        return _srv("GetEntities", "Response")(result=failure or _result(), entities=names)

    def get_entity_info(self, request: Any) -> Any:
        infos = self._env.entities()
        info = infos.get(request.entity)
        if info is None:
            return _srv("GetEntityInfo", "Response")(
                result=_result(NOT_FOUND, f"no entity named {request.entity!r}"),
                info=_msg("EntityInfo")(category=_msg("EntityCategory")(category=0),
                                        description="", tags=[]))
        description = (f"{'spawned from' if info.spawned else 'part of'} {info.source}; "
                       f"namespace {info.namespace}; {len(info.bodies)} bodies, "
                       f"{len(info.joints)} joints, {len(info.actuators)} actuators")
        return _srv("GetEntityInfo", "Response")(
            result=_result(), info=_msg("EntityInfo")(
                category=_msg("EntityCategory")(category=_category(self._env, info)),
                description=description, tags=[]))

    def _state(self, name: str) -> Any:
        state = self._env.get_entity_state(name)
        header = message_class("std_msgs/msg/Header")(stamp=_stamp(float(self._env.data.time)),
                                                      frame_id="world")
        twist = _geometry("Twist")(linear=_vector(state.linvel), angular=_vector(state.angvel))
        zero = _geometry("Accel")(linear=_vector(np.zeros(3)), angular=_vector(np.zeros(3)))
        return _msg("EntityState")(header=header, pose=_pose_message(state.pos, state.quat),
                                   twist=twist, acceleration=zero)

    def get_entity_state(self, request: Any) -> Any:
        response = _srv("GetEntityState", "Response")
        try:
            return response(result=_result(), state=self._state(request.entity))
        except KeyError as error:
            result = _result(NOT_FOUND, _text(error))
        except (ValueError, LogicError, MjfastError) as error:
            result = _result(OPERATION_FAILED, _text(error))
        return _empty_response(f"{PACKAGE}/srv/GetEntityState", result)

    def get_entities_states(self, request: Any) -> Any:
        failure, names = self._filtered(request.filters)
        if failure is not None:
            return _srv("GetEntitiesStates", "Response")(result=failure, entities=[], states=[])
        states, kept = [], []
        for name in names:
            try:
                states.append(self._state(name))
                kept.append(name)
            except (KeyError, ValueError):  # removed meanwhile, or no body
                continue
        return _srv("GetEntitiesStates", "Response")(result=_result(), entities=kept,
                                                      states=states)

    def set_entity_state(self, request: Any) -> Any:
        response = _srv("SetEntityState", "Response")
        state = request.state
        frame = state.header.frame_id or "world"
        pose = _pose_of(state.pose) if request.set_pose else None
        twist = None
        if request.set_twist:
            twist = {"linvel": [state.twist.linear.x, state.twist.linear.y,
                                state.twist.linear.z],
                     "angvel": [state.twist.angular.x, state.twist.angular.y,
                                state.twist.angular.z]}
        try:
            self._env.set_entity_state(request.entity, pose=pose, twist=twist, frame=frame)
        except KeyError as error:
            return response(result=_result(NOT_FOUND, _text(error)))
        except ValueError as error:
            message = _text(error)
            # The pose's own checks name it ("entity 'x' pose quat: ..."); the rest is refused.
            invalid = message.startswith(f"entity {request.entity!r} pose")
            return response(result=_result(SET_INVALID_POSE if invalid else OPERATION_FAILED,
                                           message))
        except (LogicError, MjfastError) as error:
            return response(result=_result(OPERATION_FAILED, _text(error)))
        return response(result=_result())

    # -- the simulation -------------------------------------------------------------------------

    def reset_simulation(self, request: Any) -> Any:
        response = _srv("ResetSimulation", "Response")
        scope = int(request.scope)
        if scope in (SCOPE_DEFAULT, SCOPE_ALL):
            scope = SCOPE_TIME | SCOPE_STATE | SCOPE_SPAWNED
        if scope & ~(SCOPE_TIME | SCOPE_STATE | SCOPE_SPAWNED):
            return response(result=_result(FEATURE_UNSUPPORTED, f"unknown scope bits in {scope}"))
        if scope & SCOPE_TIME and not scope & SCOPE_STATE:
            # The time is part of the state a step reads (plugins' goals, pacing, recordings
            # are stamped with it): turning it back alone would break them. Hence no
            # SIMULATION_RESET_TIME among the features.
            return response(result=_result(
                FEATURE_UNSUPPORTED, "SCOPE_TIME alone is not supported (no "
                                     "SIMULATION_RESET_TIME): the time resets together with "
                                     "the state, SCOPE_TIME | SCOPE_STATE"))
        try:
            if scope & SCOPE_SPAWNED:
                for name, info in self._env.entities().items():
                    if info.spawned:
                        self._env.remove(name)
            if scope & SCOPE_STATE:
                self._env.reset(keep_time=not scope & SCOPE_TIME)
        except (KeyError, ValueError, LogicError, MjfastError) as error:
            return response(result=_result(OPERATION_FAILED, _text(error)))
        return response(result=_result())

    def step_simulation(self, request: Any) -> Any:
        response = _srv("StepSimulation", "Response")
        steps = int(request.steps)
        if not self._env.paused:
            return response(result=_result(OPERATION_FAILED, "the simulation is not paused: "
                                                             "step_simulation steps a paused "
                                                             "simulation"))
        if steps < 1:
            return response(result=_result(OPERATION_FAILED, "steps must be at least 1"))
        try:
            self._env.step(steps)
        except (LogicError, MjfastError, ValueError) as error:
            return response(result=_result(OPERATION_FAILED, _text(error)))
        self._action.stopped = False
        return response(result=_result())

    def _current(self) -> int:
        if self._env.paused:
            return STOPPED if self._action.stopped else PAUSED
        return PLAYING

    def get_simulation_state(self, request: Any) -> Any:
        return _srv("GetSimulationState", "Response")(
            state=_msg("SimulationState")(state=self._current()), result=_result())

    def set_simulation_state(self, request: Any) -> Any:
        response = _srv("SetSimulationState", "Response")
        target, current = int(request.state.state), self._current()
        if target == current:
            return response(result=_result(ALREADY_IN_TARGET_STATE,
                                           f"the simulation is already {_STATE_NAMES[target]}"))
        try:
            if target == PLAYING:
                self._env.resume()
            elif target == PAUSED:
                self._env.pause()
            elif target == STOPPED:
                self._env.pause()
                self._env.reset()
            else:
                return response(result=_result(
                    FEATURE_UNSUPPORTED, f"state {_STATE_NAMES.get(target, target)} cannot be "
                                         f"set (PLAYING, PAUSED and STOPPED can)"))
        except (LogicError, MjfastError, ValueError) as error:
            return response(result=_result(STATE_TRANSITION_ERROR, _text(error)))
        self._action.stopped = target == STOPPED
        return response(result=_result())


_STATE_NAMES = {STOPPED: "STOPPED", PLAYING: "PLAYING", PAUSED: "PAUSED", QUITTING: "QUITTING",
                4: "NO_WORLD", 5: "LOADING_WORLD"}


def _text(error: BaseException) -> str:
    """An exception's message (a KeyError's without the quotes repr adds)."""
    if isinstance(error, KeyError) and len(error.args) == 1:
        return str(error.args[0])
    return str(error)


def _model_name(text: str) -> str:
    match = re.search(r"<(?:mujoco|robot)\b[^>]*\b(?:model|name)\s*=\s*[\"']([^\"']*)[\"']", text)
    return match.group(1) if match else ""


# -- bounds filters --------------------------------------------------------------------------

# Points on a bound's surface count as inside it, to this much (metres) of rounding.
_BOUNDS_TOLERANCE = 1e-9


def _bounds_test(bounds: Any) -> Callable[[np.ndarray], bool] | None:
    """Whether an entity is in `bounds` (Bounds.msg, in the world frame), by its root frame's
    position (the pose get_entity_state gives); None for TYPE_EMPTY or a type not known. A
    malformed bound is a ValueError saying what Bounds.msg expects."""
    kind = int(bounds.type)
    points = np.array([[p.x, p.y, p.z] for p in bounds.points], dtype=float).reshape(-1, 3)
    if kind not in (BOUNDS_BOX, BOUNDS_SPHERE, BOUNDS_CONVEX_HULL):
        return None
    if not np.isfinite(points).all():
        raise ValueError("bounds points must be finite")
    if kind == BOUNDS_SPHERE:
        if len(points) != 2 or points[1, 0] < 0:
            raise ValueError(f"TYPE_SPHERE bounds are 2 points, the center and (x) a radius >= 0; "
                             f"got {len(points)} point(s)"
                             + (f", radius {points[1, 0]}" if len(points) == 2 else ""))
        center, radius = points[0], points[1, 0]
        return lambda p: bool(np.linalg.norm(p - center) <= radius + _BOUNDS_TOLERANCE)
    if kind == BOUNDS_BOX:
        if len(points) != 2:
            raise ValueError(f"TYPE_BOX bounds are 2 points, opposite corners of an axis-aligned "
                             f"box; got {len(points)}")
        low, high = points.min(axis=0), points.max(axis=0)
        return lambda p: bool(np.all(p >= low - _BOUNDS_TOLERANCE)
                              and np.all(p <= high + _BOUNDS_TOLERANCE))
    if not 3 <= len(points) <= MAX_HULL_POINTS:
        raise ValueError(f"TYPE_CONVEX_HULL bounds are 3 to {MAX_HULL_POINTS} points; got "
                         f"{len(points)}")
    return _hull_test(points)


def _hull_test(points: np.ndarray) -> Callable[[np.ndarray], bool]:
    """Whether a point is in the convex hull of `points`: in their affine span, and
    (Carathéodory) in one of the simplices of the span's dimension that they make."""
    origin = points[0]
    _, singular, axes = np.linalg.svd(points - origin)
    dimension = int(np.sum(singular > _BOUNDS_TOLERANCE * max(1.0, singular[0])))
    if dimension < 2:
        raise ValueError("TYPE_CONVEX_HULL bounds need 3 points that are not on one line")
    basis = axes[:dimension]
    flat = (points - origin) @ basis.T  # the points in the span's coordinates
    simplices = []  # (first corner, inverse of its edge matrix)
    for simplex in itertools.combinations(range(len(points)), dimension + 1):
        corners = flat[list(simplex)]
        edges = (corners[1:] - corners[0]).T
        if abs(np.linalg.det(edges)) > _BOUNDS_TOLERANCE:
            simplices.append((corners[0], np.linalg.inv(edges)))

    def inside(p: np.ndarray) -> bool:
        offset = p - origin
        if np.linalg.norm(offset - basis.T @ (basis @ offset)) > _BOUNDS_TOLERANCE:
            return False  # off a flat hull's plane
        target = basis @ offset
        for corner, inverse in simplices:
            weights = inverse @ (target - corner)
            if weights.min() >= -_BOUNDS_TOLERANCE and weights.sum() <= 1 + _BOUNDS_TOLERANCE:
                return True
        return False

    return inside


def _category(env: Any, info: Any) -> int:
    """A robot has actuators; an object with joints is dynamic, one without static."""
    if info.actuators:
        return CATEGORY_ROBOT
    return CATEGORY_DYNAMIC_OBJECT if info.joints else CATEGORY_STATIC_OBJECT
