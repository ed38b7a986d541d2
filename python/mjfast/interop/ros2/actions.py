"""Actions on the ROS 2 graph, as rmw_zenoh carries an rcl action (SPEC §23): any plugin that
declares `ros_actions = {"~/name": "<pkg>/action/<A>"}` and serves that action on the bus
(mjfast.plugin.actions' ActionServer) gets, under its node, the services
`<name>/_action/send_goal` (`<A>_SendGoal`), `<name>/_action/cancel_goal`
(`action_msgs/srv/CancelGoal`) and `<name>/_action/get_result` (`<A>_GetResult`), and the
topics `<name>/_action/feedback` (`<A>_FeedbackMessage`) and `<name>/_action/status`
(`action_msgs/msg/GoalStatusArray`, reliable and transient local with depth 1, rcl_action's
status QoS), each with its liveliness token.

The topics are ordinary outbound routes (`outbound_routes`: the bus publishes them under the same
names, the status latched), so the bridge's tap carries them. The services are `ActionServices`:
each call is converted to the bus request and answered from the bus reply; a `get_result` for a
goal still running is answered when the goal's status array shows it ended (rcl's semantics:
answered at the end), without holding a thread meanwhile. The wire's strings are `wire`'s, the
types `types`'.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import zenoh

from mjfast.interop.ros2 import types, wire
from mjfast.interop.ros2.conversions import Context, Outbound, build, to_dict
from mjfast.interop.zenoh_threads import declare_on_daemon_thread, join_drains

__all__ = ["ActionServices", "declared_actions", "outbound_routes"]

_log = logging.getLogger("mjfast.ros2")

STATUS_TYPE = "action_msgs/msg/GoalStatusArray"
CANCEL_TYPE = "action_msgs/srv/CancelGoal"
_TERMINAL = {4, 5, 6}  # action_msgs/GoalStatus SUCCEEDED, CANCELED, ABORTED


@dataclass(frozen=True)
class DeclaredAction:
    name: str  # absolute: `<node namespace>/<action>`
    action_type: str  # <pkg>/action/<A>


def declared_actions(ctx: Context, plugin_class: Any) -> list[DeclaredAction]:
    """The actions a configured plugin declares (`ros_actions`); KeyError for an unknown type."""
    declared = getattr(plugin_class, "ros_actions", None)
    if not isinstance(declared, Mapping):
        return []
    out = []
    for name, action_type in declared.items():
        action_type = str(action_type)
        types.message_class(f"{action_type}_FeedbackMessage")  # the clear KeyError if unknown
        out.append(DeclaredAction(ctx.resolve(str(name)), action_type))
    return out


def outbound_routes(ctx: Context, plugin_class: Any) -> list[Outbound]:
    """The feedback and status topics of a plugin's declared actions, as outbound routes."""
    routes = []
    for action in declared_actions(ctx, plugin_class):
        feedback_type = f"{action.action_type}_FeedbackMessage"
        routes.append(Outbound(f"{action.name}/_action/feedback", feedback_type,
                               _converter(feedback_type)))
        routes.append(Outbound(f"{action.name}/_action/status", STATUS_TYPE, _StatusArray(),
                               transient_local=True))
    return routes


class _StatusArray:
    """The status array's converter: each goal's GoalInfo is built once and reused while the
    goal is listed (an array lists every goal kept, and goes out on every transition)."""

    def __init__(self) -> None:
        self._infos: dict[bytes, Any] = {}
        self._array = types.message_class(STATUS_TYPE)
        self._status = types.message_class("action_msgs/msg/GoalStatus")

    def __call__(self, message: Mapping[str, Any]) -> Any:
        infos: dict[bytes, Any] = {}
        statuses = []
        for entry in message["status_list"]:
            info = entry["goal_info"]
            key = bytes(np.asarray(info["goal_id"]["uuid"], dtype=np.uint8).tobytes())
            built = self._infos.get(key)
            if built is None:
                built = build("action_msgs/msg/GoalInfo", info)
            infos[key] = built
            statuses.append(self._status(built, int(entry["status"])))
        self._infos = infos  # only the goals still listed
        return self._array(statuses)


def _converter(ros_type: str) -> Callable[[Any], Any]:
    def convert(message: Mapping[str, Any]) -> Any:
        return build(ros_type, message, where=ros_type)
    return convert


def _goal_id(request: Any) -> bytes:
    return bytes(np.asarray(request.goal_id.uuid, dtype=np.uint8).tobytes())


class ActionServices:
    """The three services of one declared action on the graph, forwarding to the bus.

    `bridge` is the Bridge (its session, domain, node identity, work counter and entity ids are
    used; nothing of it is changed). `close()` undeclares everything; a get_result still waiting
    then gets no reply, as when an rcl action server goes away.
    """

    def __init__(self, bridge: Any, action: DeclaredAction) -> None:
        self._bridge = bridge
        self._bus = bridge._bus
        self.action = action
        self._lock = threading.Lock()  # the waiting get_result queries; a leaf
        self._waiting: dict[bytes, list[tuple[Any, wire.Attachment]]] = {}
        self._entities: list[Any] = []
        self._drains: list[threading.Thread] = []
        a = action.action_type
        for suffix, service_type, handler in (
                ("send_goal", f"{a}_SendGoal", self._send_goal),
                ("cancel_goal", CANCEL_TYPE, self._cancel_goal),
                ("get_result", f"{a}_GetResult", self._get_result)):
            self._declare(f"{action.name}/_action/{suffix}", service_type, handler)
        # The status array tells when a waiting get_result can be answered.
        self._subscription = self._bus.subscribe(f"{action.name}/_action/status",
                                                 self._on_status)

    def _declare(self, name: str, service_type: str,
                 handler: Callable[[Any, Any, wire.Attachment], None]) -> None:
        bridge = self._bridge
        dds, hash_ = types.dds_type_name(service_type), types.type_hash(service_type)
        key = wire.data_key(bridge.domain_id, name, dds, hash_)
        eid = next(bridge._entity_ids)
        token = bridge._session.liveliness().declare_token(wire.endpoint_token(
            bridge.domain_id, bridge.zid, 0, eid, "SS", bridge.namespace, bridge.node_name,
            name, dds, hash_, wire.QOS_DEFAULT))

        def on_query(query: Any) -> None:
            self._on_query(query, service_type, handler)

        queryable = declare_on_daemon_thread(
            lambda handler: bridge._session.declare_queryable(key, handler, complete=True),
            on_query, f"mjfast-ros2-action {name}", self._drains)
        self._entities += [queryable, token]

    def _on_query(self, query: Any, service_type: str,
                  handler: Callable[[Any, Any, wire.Attachment], None]) -> None:
        with self._bridge._work.running() as open_:
            if not open_:
                return
            try:
                raw = query.attachment
                if raw is None:
                    raise ValueError("a service request needs rmw_zenoh's attachment")
                request_id = wire.Attachment.decode(raw.to_bytes())
                payload = query.payload
                request = types.deserialize(payload.to_bytes() if payload is not None else b"",
                                            f"{service_type}_Request")
            except Exception as error:
                self._bridge._counters.add("malformed")
                with contextlib.suppress(zenoh.ZError):
                    query.reply_err(f"malformed request: {error}".encode())
                return
            self._bridge._counters.add("calls")
            try:
                handler(query, request, request_id)
            except Exception as error:
                self._bridge._counters.add("failed_calls")
                _log.warning("%s: a call of %s failed: %s", self.action.name, service_type,
                             error)
                with contextlib.suppress(zenoh.ZError):
                    query.reply_err(f"{type(error).__name__}: {error}".encode())

    def _reply(self, query: Any, request_id: wire.Attachment, response_type: str,
               fields: Mapping[str, Any]) -> None:
        attachment = wire.encode_attachment(request_id.sequence_number, time.time_ns(),
                                            request_id.gid)
        payload = types.serialize(build(response_type, fields), response_type)
        with contextlib.suppress(zenoh.ZError):
            query.reply(query.key_expr, payload, attachment=attachment)

    def _send_goal(self, query: Any, request: Any, request_id: wire.Attachment) -> None:
        reply = self._bus.call(f"{self.action.name}/send_goal",
                               {"goal_id": _goal_id(request), "goal": to_dict(request.goal)})
        self._reply(query, request_id, f"{self.action.action_type}_SendGoal_Response", reply)

    def _cancel_goal(self, query: Any, request: Any, request_id: wire.Attachment) -> None:
        reply = self._bus.call(f"{self.action.name}/cancel_goal", to_dict(request))
        self._reply(query, request_id, f"{CANCEL_TYPE}_Response", reply)

    def _get_result(self, query: Any, request: Any, request_id: wire.Attachment) -> None:
        goal_id = _goal_id(request)
        with self._lock:
            self._waiting.setdefault(goal_id, []).append((query, request_id))
        # After registering: an end published meanwhile is not missed (it is read here).
        self._answer_if_ended(goal_id)

    def _answer_if_ended(self, goal_id: bytes) -> None:
        reply = self._bus.call(f"{self.action.name}/get_result",
                               {"goal_id": goal_id, "timeout": 0.0})
        if reply["status"] not in _TERMINAL and reply["status"] != 0:
            return  # still running: answered when the status array shows its end
        with self._lock:
            waiting = self._waiting.pop(goal_id, [])
        fields = {"status": reply["status"], "result": reply["result"] or {}}
        for query, request_id in waiting:
            self._reply(query, request_id, f"{self.action.action_type}_GetResult_Response",
                        fields)

    def _on_status(self, message: Mapping[str, Any]) -> None:
        with self._lock:
            if not self._waiting:
                return
            waiting = set(self._waiting)
        ended = set()
        for entry in message.get("status_list", []):
            goal_id = bytes(np.asarray(entry["goal_info"]["goal_id"]["uuid"],
                                       dtype=np.uint8).tobytes())
            if goal_id in waiting and int(entry["status"]) in _TERMINAL:
                ended.add(goal_id)
        for goal_id in ended:
            self._answer_if_ended(goal_id)

    def close(self, wait: bool = True) -> None:
        """Undeclares the services and tokens; `wait`: and waits for the calls in progress
        (not from a rebuild, which holds the bridge's lock that such a call's status publish may
        be waiting for)."""
        self._subscription.unsubscribe()
        for entity in self._entities:
            with contextlib.suppress(zenoh.ZError):
                entity.undeclare()
        self._entities = []
        if wait:
            join_drains(self._drains)
        with self._lock:
            self._waiting.clear()
