"""Actions on mjfast's bus with rcl_action's goal semantics (SPEC §23). `ActionServer` keeps one
plugin action's goals: accepted or rejected when sent; ACCEPTED -> EXECUTING -> SUCCEEDED |
ABORTED | CANCELED (CANCELING between a cancel and its end), the status array published on every
transition; cancel by goal id, by stamp or all, answered with action_msgs' return codes; a result
asked for before or after the end, kept for `result_timeout` seconds of wall time after it.
Each goal is a `GoalHandle`, for Python callers and for the plugin that carries the goal out.

The same goals are served on the bus, under the plugin's node: the services `<action>/send_goal`,
`<action>/cancel_goal` and `<action>/get_result`, the topics `<action>/_action/feedback` and
`<action>/_action/status` (latched; named as on ROS 2, so that the bridge carries them as any
other topic), their messages shaped as the ROS 2 types rosidl derives for the
action (`<A>_SendGoal_Request` ..., `action_msgs/msg/GoalStatusArray`), as dicts. What a goal
does is the plugin's; carrying actions to ROS 2 is mjfast.interop.ros2.actions'.
"""

from __future__ import annotations

import collections
import enum
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mjfast._waiting import wait_interruptibly

__all__ = ["ActionServer", "CancelResponse", "GoalHandle", "GoalStatus", "goal_id_of"]

GOAL_ID_SIZE = 16
DEFAULT_RESULT_TIMEOUT_S = 900.0  # rcl_action's default result_timeout (15 minutes)


class GoalStatus(enum.IntEnum):
    """action_msgs/msg/GoalStatus' values."""

    UNKNOWN = 0
    ACCEPTED = 1
    EXECUTING = 2
    CANCELING = 3
    SUCCEEDED = 4
    CANCELED = 5
    ABORTED = 6


TERMINAL = frozenset({GoalStatus.SUCCEEDED, GoalStatus.CANCELED, GoalStatus.ABORTED})


class CancelResponse(enum.IntEnum):
    """action_msgs/srv/CancelGoal's return codes."""

    ERROR_NONE = 0
    ERROR_REJECTED = 1
    ERROR_UNKNOWN_GOAL_ID = 2
    ERROR_GOAL_TERMINATED = 3


def goal_id_of(value: Any) -> bytes:
    """A goal id as 16 bytes, from bytes, a `uuid.UUID`, 16 integers (a list or an array) or the
    dict of a `unique_identifier_msgs/msg/UUID` (`{"uuid": ...}`); ValueError otherwise."""
    if isinstance(value, Mapping) and "uuid" in value:
        value = value["uuid"]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        try:
            numbers = np.asarray(value)
            if numbers.ndim != 1 or not np.issubdtype(numbers.dtype, np.integer):
                raise ValueError
            if numbers.size and (numbers.min() < 0 or numbers.max() > 255):
                raise ValueError
            raw = bytes(numbers.astype(np.uint8).tolist())
        except (TypeError, ValueError):
            raise ValueError(f"a goal id is 16 bytes (bytes, a uuid.UUID, 16 integers 0-255 or "
                             f"{{'uuid': ...}}), got {value!r}") from None
    if len(raw) != GOAL_ID_SIZE:
        raise ValueError(f"a goal id is {GOAL_ID_SIZE} bytes, got {len(raw)}")
    return raw


def uuid_message(goal_id: bytes) -> dict[str, Any]:
    return {"uuid": np.frombuffer(goal_id, dtype=np.uint8).copy()}


def time_message(seconds: float) -> dict[str, int]:
    """builtin_interfaces/msg/Time of `seconds` (>= 0)."""
    nanoseconds = round(seconds * 1e9)
    return {"sec": nanoseconds // 1_000_000_000, "nanosec": nanoseconds % 1_000_000_000}


def seconds_of(stamp: Any) -> float:
    """A builtin_interfaces Time or Duration (a dict or a rosbags object) or a number, in s."""
    if isinstance(stamp, Mapping):
        return float(stamp.get("sec", 0)) + float(stamp.get("nanosec", 0)) * 1e-9
    if hasattr(stamp, "sec") and hasattr(stamp, "nanosec"):
        return float(stamp.sec) + float(stamp.nanosec) * 1e-9
    return float(stamp)


class GoalHandle:
    """One goal: `goal_id` (16 bytes), `goal` (its dict), `stamp` (the simulated time it was
    accepted), `accepted`, and `status`, `feedback` (the latest) and `result(timeout=None)`;
    `cancel()` asks for its cancellation as `cancel_goal` does. The plugin that carries it out
    calls `execute()`, `publish_feedback()` and one of `succeed()`, `abort()`, `canceled()`."""

    def __init__(self, server: ActionServer, goal_id: bytes, goal: Any, stamp: float) -> None:
        self._server = server
        self.goal_id = goal_id
        self.goal = goal
        self.stamp = stamp
        self.accepted = False
        self._status = GoalStatus.UNKNOWN
        self._feedback: Any = None
        self._result: Any = None
        self._done = threading.Event()
        self._ended_at = math.inf  # wall time of the end, for result_timeout
        # action_msgs/GoalInfo, made once: every status array carries it.
        self.info = {"goal_id": uuid_message(goal_id), "stamp": time_message(stamp)}
        # This goal's action_msgs/GoalStatus in the status arrays: a new dict at each transition
        # (never changed, so that an array already handed to a tap stays as it was published).
        self._entry: dict[str, Any] = {"goal_info": self.info, "status": 0}

    def __repr__(self) -> str:
        return (f"<GoalHandle {uuid.UUID(bytes=self.goal_id)} {self._status.name} of "
                f"{self._server.name}>")

    @property
    def status(self) -> GoalStatus:
        return self._status

    @property
    def feedback(self) -> Any:
        return self._feedback

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> Any:
        """The result once the goal has ended (a rejected goal's at once); TimeoutError naming
        the goal and its status if it has not ended within `timeout` seconds. Something must
        step the env meanwhile (another thread, or `env.start()`)."""
        if not wait_interruptibly(self._done, timeout):  # (Ctrl-C gets through)
            raise TimeoutError(f"goal {uuid.UUID(bytes=self.goal_id)} of {self._server.name} "
                               f"did not end within {timeout} s (status {self._status.name})")
        return self._result

    def cancel(self) -> CancelResponse:
        reply = self._server.cancel_goal({"goal_info": {"goal_id": uuid_message(self.goal_id),
                                                        "stamp": time_message(0.0)}})
        return CancelResponse(reply["return_code"])

    # -- the plugin's side -----------------------------------------------------------------------

    def execute(self) -> None:
        """ACCEPTED -> EXECUTING."""
        self._server._transition(self, GoalStatus.EXECUTING)

    def publish_feedback(self, feedback: Any) -> None:
        self._feedback = feedback
        self._server._publish_feedback(self, feedback)

    def succeed(self, result: Any) -> None:
        self._server._finish(self, GoalStatus.SUCCEEDED, result)

    def abort(self, result: Any) -> None:
        self._server._finish(self, GoalStatus.ABORTED, result)

    def canceled(self, result: Any) -> None:
        self._server._finish(self, GoalStatus.CANCELED, result)


Validate = Callable[[Any], Any]


class ActionServer:
    """The goals of one action `name` (relative names join `node`'s namespace) of a plugin.

    `validate(goal)` returns None to accept a goal, or the result of a rejected one (its error
    code and text); `on_accepted(handle)` starts an accepted goal (it calls `handle.execute()`,
    and preempts another if it must); `on_cancel(handle)` stops a goal whose cancellation was
    accepted (CANCELING), which then ends with `handle.canceled(result)`. `clock()` gives the
    simulated time goals are stamped with.
    """

    def __init__(self, node: Any, name: str, *, validate: Validate,
                 on_accepted: Callable[[GoalHandle], None],
                 on_cancel: Callable[[GoalHandle], None], clock: Callable[[], float],
                 result_timeout: float = DEFAULT_RESULT_TIMEOUT_S) -> None:
        if not (isinstance(result_timeout, (int, float)) and result_timeout >= 0):
            raise ValueError(f"result_timeout must be a number of seconds >= 0, got "
                             f"{result_timeout!r}")
        self.node = node
        self.name = node.resolve_name(name)
        self.result_timeout = float(result_timeout)
        self._validate = validate
        self._on_accepted = on_accepted
        self._on_cancel = on_cancel
        self._clock = clock
        # A leaf of the lock order (src/_core/env/env_core.h): the goal table, never held across
        # a call out. _status_lock is held across publishing the status array, so that arrays go
        # out in the order of the transitions they show. _dispatch (outside both) is held while
        # a goal is accepted and started and while a cancel is decided and carried out, so that
        # goals start in the order accepted and a cancel never overtakes the start of its goal
        # (reentrant: on_accepted may cancel or end goals).
        self._lock = threading.Lock()
        self._status_lock = threading.Lock()
        self._dispatch = threading.RLock()
        self._goals: dict[bytes, GoalHandle] = {}
        # Each kept goal's GoalStatus entry, in the order of _goals: a status array is a copy of
        # its values (made in C: arrays go out on every transition and list every goal kept).
        self._entries: dict[bytes, dict[str, Any]] = {}
        self._ended: collections.deque[GoalHandle] = collections.deque()  # in order of their end
        self._closed = False
        node.advertise_service(f"{self.name}/send_goal", self._send_goal_service)
        node.advertise_service(f"{self.name}/cancel_goal", self.cancel_goal)
        node.advertise_service(f"{self.name}/get_result", self.get_result)
        self._publish_status()

    # -- the three calls ---------------------------------------------------------------------------

    def send_goal(self, goal: Any, goal_id: Any = None, *,
                  respond: Callable[[GoalHandle], None] | None = None) -> GoalHandle:
        """A new goal (`goal_id`: the client's UUID, default a new random one): accepted, or
        rejected with its result at once (`handle.accepted` False, status UNKNOWN).

        `respond(handle)` is called as soon as the goal is accepted or rejected, before the
        ACCEPTED status goes out and before `on_accepted` starts it: a server answering a
        client's send_goal request from it answers as rcl_action does (the response first, the
        status array after it). Goals start one at a time, in the order accepted; a cancel waits
        for the start of the goal it names (see cancel_goal)."""
        raw = goal_id_of(goal_id) if goal_id is not None else uuid.uuid4().bytes
        with self._dispatch:
            handle = GoalHandle(self, raw, goal, self._clock())
            with self._lock:
                self._expire_locked()
                if self._closed:
                    rejection: Any = {"error": "the action server is shut down"}
                elif raw in self._goals:
                    rejection = {"error": f"goal id {uuid.UUID(bytes=raw)} is in use"}
                else:
                    rejection = None
            if rejection is None:
                rejection = self._validate(goal)
            if rejection is not None:
                handle._result = rejection
                handle._ended_at = time.monotonic()
                handle._done.set()
                if respond is not None:
                    respond(handle)
                self.node.logger.warning("%s rejected a goal: %s", self.name, rejection)
                return handle
            with self._lock:
                handle.accepted = True
                self._goals[raw] = handle
                self._set_status_locked(handle, GoalStatus.ACCEPTED)
            if respond is not None:
                respond(handle)
            self._publish_status()
            self._on_accepted(handle)
        return handle

    def _send_goal_service(self, request: Mapping[str, Any]) -> dict[str, Any]:
        # `respond`: a caller in this process (the ROS 2 bridge) answering its client early.
        respond = request.get("respond")
        handle = self.send_goal(request["goal"], request.get("goal_id"),
                                respond=respond if callable(respond) else None)
        return self._send_goal_reply(handle)

    @staticmethod
    def _send_goal_reply(handle: GoalHandle) -> dict[str, Any]:
        return {"accepted": handle.accepted, "stamp": dict(handle.info["stamp"])}

    def cancel_goal(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """action_msgs/srv/CancelGoal as rcl_action answers it: a zero id and zero stamp cancel
        every goal, a zero id and a stamp those accepted at or before it, an id that goal (and,
        with a stamp, those too)."""
        info = request.get("goal_info", {})
        raw = goal_id_of(info.get("goal_id", bytes(GOAL_ID_SIZE)))
        stamp = seconds_of(info.get("stamp", 0.0))
        with self._dispatch:
            return self._cancel(raw, stamp)

    def _cancel(self, raw: bytes, stamp: float) -> dict[str, Any]:
        zero_id = raw == bytes(GOAL_ID_SIZE)
        with self._lock:
            self._expire_locked()
            active = [h for h in self._goals.values() if h._status not in TERMINAL]
            if not zero_id:
                target = self._goals.get(raw)
                if target is None:
                    return self._cancel_reply(CancelResponse.ERROR_UNKNOWN_GOAL_ID, [])
                if target._status in TERMINAL and stamp == 0.0:
                    return self._cancel_reply(CancelResponse.ERROR_GOAL_TERMINATED, [])
            chosen = [h for h in active
                      if (zero_id and stamp == 0.0) or (stamp != 0.0 and h.stamp <= stamp)
                      or h.goal_id == raw]
            canceling = [h for h in chosen if h._status != GoalStatus.CANCELING]
            for handle in canceling:
                self._set_status_locked(handle, GoalStatus.CANCELING)
        if not chosen:
            return self._cancel_reply(CancelResponse.ERROR_REJECTED, [])
        if canceling:
            self._publish_status()
        for handle in canceling:
            self._on_cancel(handle)
        return self._cancel_reply(CancelResponse.ERROR_NONE, chosen)

    @staticmethod
    def _cancel_reply(code: CancelResponse, goals: list[GoalHandle]) -> dict[str, Any]:
        return {"return_code": int(code), "goals_canceling": [h.info for h in goals]}

    def get_result(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`<A>_GetResult`: the goal's status and result once it has ended (waiting for the end
        for up to `request["timeout"]` seconds, default without limit; a still running goal is
        answered with its status and no result when that passes). An unknown or expired goal is
        UNKNOWN with no result; a rejected one UNKNOWN with its rejection."""
        raw = goal_id_of(request.get("goal_id"))
        timeout = request.get("timeout")
        with self._lock:
            self._expire_locked()
            handle = self._goals.get(raw)
        if handle is None:
            return {"status": int(GoalStatus.UNKNOWN), "result": None}
        if handle._status not in TERMINAL:
            handle._done.wait(None if timeout is None else float(timeout))
        # The result is the goal's once its status is terminal (both set together, under the
        # lock), which is before the ending array goes out and before _done is set: a get_result
        # answered on that array (the ROS 2 bridge's) has it.
        with self._lock:
            status, result = handle._status, handle._result
        return {"status": int(status), "result": result if status in TERMINAL else None}

    def goals(self) -> list[GoalHandle]:
        """The goals kept (not expired), oldest first."""
        with self._lock:
            self._expire_locked()
            return list(self._goals.values())

    # -- transitions --------------------------------------------------------------------------

    def _set_status_locked(self, handle: GoalHandle, status: GoalStatus) -> None:
        handle._status = status
        handle._entry = {"goal_info": handle.info, "status": int(status)}
        if self._goals.get(handle.goal_id) is handle:
            self._entries[handle.goal_id] = handle._entry

    def _transition(self, handle: GoalHandle, status: GoalStatus) -> None:
        with self._lock:
            if handle._status in TERMINAL:
                return
            self._set_status_locked(handle, status)
        self._publish_status()

    def _finish(self, handle: GoalHandle, status: GoalStatus, result: Any) -> None:
        with self._lock:
            if handle._status in TERMINAL:
                return  # ended already (a race between the controller's end and a cancel)
            self._set_status_locked(handle, status)
            handle._result = result
            handle._ended_at = time.monotonic()
            self._ended.append(handle)
        # The array showing the end goes out before a waiter on the result wakes: whoever has a
        # result (handle.result(), get_result) has had the status that ended it on the bus.
        try:
            self._publish_status()
        finally:
            handle._done.set()

    def _publish_feedback(self, handle: GoalHandle, feedback: Any) -> None:
        self.node.publish(f"{self.name}/_action/feedback",
                          {"goal_id": uuid_message(handle.goal_id), "feedback": feedback})

    def _publish_status(self) -> None:
        with self._status_lock:
            with self._lock:
                self._expire_locked()
                status_list = list(self._entries.values())
            self.node.publish(f"{self.name}/_action/status", {"status_list": status_list},
                              latched=True)

    def _expire_locked(self) -> None:
        """Drops the goals whose result_timeout has passed since their end (oldest end first)."""
        now = time.monotonic()
        while self._ended and now - self._ended[0]._ended_at > self.result_timeout:
            handle = self._ended.popleft()
            if self._goals.get(handle.goal_id) is handle:
                del self._goals[handle.goal_id]
                del self._entries[handle.goal_id]

    def shutdown(self, result: Any) -> None:
        """Aborts every goal not yet ended with `result` (a reload, an unload); new goals are
        rejected from now on."""
        with self._lock:
            self._closed = True
            running = [h for h in self._goals.values() if h._status not in TERMINAL]
        for handle in running:
            handle.abort(result)
