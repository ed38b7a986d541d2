"""Actions on the ROS 2 graph, as rmw_zenoh carries an rcl action (SPEC §23): any plugin that
declares `ros_actions = {"~/name": "<pkg>/action/<A>"}` and serves that action on the bus
(mjfast.plugin.actions' ActionServer) gets, under its node, the services
`<name>/_action/send_goal` (`<A>_SendGoal`), `<name>/_action/cancel_goal`
(`action_msgs/srv/CancelGoal`) and `<name>/_action/get_result` (`<A>_GetResult`), and the
topics `<name>/_action/feedback` (`<A>_FeedbackMessage`) and `<name>/_action/status`
(`action_msgs/msg/GoalStatusArray`, reliable and transient local with depth 1, rcl_action's
status QoS), each with its liveliness token.

The topics are ordinary outbound routes (`outbound_routes`: the bus publishes them under the same
names, the status latched), so the bridge's tap carries them; the status array is written to CDR
here (`_StatusArray`), not by rosbags. The services are `ActionServices`: each call is converted
to the bus request and answered from the bus reply (a `send_goal` as soon as the goal is
accepted, before its status arrays, as rcl_action answers it); a `get_result` for a
goal still running is answered when the goal's status array shows it ended (rcl's semantics:
answered at the end), without holding a thread meanwhile. The wire's strings are `wire`'s, the
types `types`'.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import zenoh

from mjfast.bus.params import resolve_name
from mjfast.interop.ros2 import cdr, types, wire
from mjfast.interop.ros2.conversions import build
from mjfast.interop.routes import Outbound
from mjfast.interop.zenoh_threads import declare_on_daemon_thread, join_drains

__all__ = ["ActionServices", "declared_actions", "outbound_routes"]

_log = logging.getLogger("mjfast.ros2")

STATUS_TYPE = "action_msgs/msg/GoalStatusArray"
CANCEL_TYPE = "action_msgs/srv/CancelGoal"
_TERMINAL = {4, 5, 6}  # action_msgs/GoalStatus SUCCEEDED, CANCELED, ABORTED
_TIME = types.message_class("builtin_interfaces/msg/Time")


@dataclass(frozen=True)
class DeclaredAction:
    name: str  # absolute: `<node namespace>/<action>`
    action_type: str  # <pkg>/action/<A>


def declared_actions(namespace: str, plugin_class: Any) -> list[DeclaredAction]:
    """The actions a configured plugin whose node namespace is `namespace` declares
    (`ros_actions`); KeyError for an unknown type."""
    declared = getattr(plugin_class, "ros_actions", None)
    if not isinstance(declared, Mapping):
        return []
    out = []
    for name, action_type in declared.items():
        action_type = str(action_type)
        types.message_class(f"{action_type}_FeedbackMessage")  # the clear KeyError if unknown
        out.append(DeclaredAction(resolve_name(str(name), namespace, namespace), action_type))
    return out


def outbound_routes(namespace: str, plugin_class: Any) -> list[Outbound]:
    """The feedback and status topics of a plugin's declared actions, as outbound routes."""
    routes = []
    for action in declared_actions(namespace, plugin_class):
        feedback_type = f"{action.action_type}_FeedbackMessage"
        feedback, status = f"{action.name}/_action/feedback", f"{action.name}/_action/status"
        routes.append(Outbound(feedback, feedback_type, _converter(feedback_type), feedback))
        routes.append(Outbound(status, STATUS_TYPE, _StatusArray(), status,
                               transient_local=True))
    return routes


# action_msgs/msg/GoalStatus in a GoalStatusArray's CDR (little endian): a GoalInfo (a UUID of 16
# bytes, a Time of int32 sec and uint32 nanosec, 4-aligned) and an int8 status. The array's
# uint32 length is at offset 0 of the body, so its first element starts 4-aligned (25 bytes, no
# padding) and every later one at 1 mod 4 (3 bytes of padding before its Time: 28 bytes).
# tests/interop/ros2/test_actions.py checks the arrays against rosbags' serializer.
_LATER_ENTRY_SIZE = 28
_PADDING = slice(16, 19)  # a later element's padding, which the first element has not
_CDR_LE = b"\x00\x01\x00\x00"
_LENGTH = struct.Struct("<I")


class _StatusArray:
    """The status array's converter, straight to its CDR (`Bridge._send` puts bytes as they
    are): an array lists every goal kept and goes out on every transition, and rosbags'
    serializer, one Python call per element, made it cost a millisecond per 100 goals. Each
    goal's bytes are rosbags': one serialisation per goal gives its entry in every status
    (`_encode`), and an array splices them.

    Each GoalStatus of the bus message is a dict that mjfast.plugin.actions replaces, never
    changes, at a transition, and the list keeps the goals' order (the oldest leave first, new
    ones come last). So an array is the last one's bytes with the entries that changed encoded
    anew. They are found a block of entries at a time, each block compared with the last
    array's as a list (in C: the same object, or an equal one, whose bytes are the same), and
    only a block that differs entry by entry: three arrays go out a goal, each listing every
    goal kept (300 in bench/'s round trip), and a scan of every entry cost 50 us an array."""

    def __init__(self) -> None:
        # The last array's entries and its elements' bytes (every element as a later one), one
        # tuple read and replaced at once: the tap's writer converts, and so does a rebuild
        # sending the latched array (another thread), each from a consistent pair.
        self._last: tuple[list[Any], bytearray] = ([], bytearray())
        # id(GoalInfo dict) -> (that dict, its entry's bytes per status): a goal's GoalInfo is
        # one dict for all its entries (kept here, so that its id is not reused meanwhile).
        self._goals: dict[int, tuple[Any, tuple[bytes, ...]]] = {}

    def __call__(self, message: Mapping[str, Any]) -> bytes:
        entries = list(message["status_list"])
        count = len(entries)
        previous, body = self._last
        # Where the new list starts in the last one (the goals before it have expired).
        start = next(itertools.compress(itertools.count(), map(
            operator.is_, previous, itertools.repeat(entries[0]))), None) if entries else None
        if len(self._goals) > 2 * count + 64:  # expired goals leave the cache
            kept_goals = {id(entry["goal_info"]) for entry in entries}
            self._goals = {key: value for key, value in self._goals.items()
                           if key in kept_goals}
        size, encode = _LATER_ENTRY_SIZE, self._block
        if start is None:
            kept, body = 0, bytearray()
        else:  # a copy: the last array's bytes stay as they were for another reader
            kept = min(len(previous) - start, count)
            body = body[start * size:(start + kept) * size]
            for i in _changed(entries, previous[start:start + kept]):  # transitions
                body[i * size:(i + 1) * size] = encode(entries[i])
        if kept < count:  # new goals
            body += b"".join(map(encode, entries[kept:]))
        self._last = (entries, body)
        return b"".join((_CDR_LE, _LENGTH.pack(count), body[:_PADDING.start],
                         body[_PADDING.stop:])) if count else _CDR_LE + _LENGTH.pack(0)

    def _block(self, entry: Mapping[str, Any]) -> bytes:
        """The entry's bytes as a later element of an array."""
        info = entry["goal_info"]
        found = self._goals.get(id(info))
        if found is None:  # (a cached id is its dict's, which the cache keeps alive)
            found = self._goals[id(info)] = (info, self._encode(info))
        return found[1][int(entry["status"])]

    @staticmethod
    def _encode(info: Mapping[str, Any]) -> tuple[bytes, ...]:
        """A goal's entry as a later element of an array, in each status (0 to 6): the second
        element of an array of two, serialised by rosbags, whose last byte is the int8 status."""
        goal_id = np.asarray(info["goal_id"]["uuid"], dtype=np.uint8).reshape(-1)
        if goal_id.size != 16:
            raise ValueError(f"a goal id is 16 bytes, got {goal_id.size}")
        stamp = info["stamp"]
        goal_info = _GOAL_INFO(goal_id=_UUID(uuid=goal_id),
                               stamp=_TIME(sec=int(stamp["sec"]), nanosec=int(stamp["nanosec"])))
        entry = _GOAL_STATUS(goal_info=goal_info, status=0)
        data = bytes(types.serialize(_STATUS_ARRAY(status_list=[entry, entry]), STATUS_TYPE))
        later = data[-_LATER_ENTRY_SIZE:-1]
        return tuple(later + _STATUS_BYTES[status] for status in range(_STATUSES))


_STATUSES = 7  # action_msgs/GoalStatus' values, 0 (UNKNOWN) to 6 (ABORTED)
_STATUS_BYTES = tuple(bytes((status,)) for status in range(_STATUSES))  # an int8 each
_GOAL_INFO = types.message_class("action_msgs/msg/GoalInfo")
_GOAL_STATUS = types.message_class("action_msgs/msg/GoalStatus")
_STATUS_ARRAY = types.message_class(STATUS_TYPE)
_UUID = types.message_class("unique_identifier_msgs/msg/UUID")


_BLOCK = 32  # entries compared as one list by _changed


def _changed(entries: list[Any], previous: list[Any]) -> Iterator[int]:
    """The positions among the first len(previous) of `entries` whose entry differs from
    `previous`'s there: a block at a time, as a list (C compares the same object as equal at
    once, and an equal one by value), entry by entry only where a block differs. Entries whose
    comparison raises (numpy arrays of different objects) count as changed."""
    for low in range(0, len(previous), _BLOCK):
        high = min(low + _BLOCK, len(previous))
        new, old = entries[low:high], previous[low:high]
        try:
            if new == old:
                continue
        except (TypeError, ValueError):
            pass
        for offset, (a, b) in enumerate(zip(new, old, strict=True)):
            if a is not b:
                try:
                    same = bool(a == b)
                except (TypeError, ValueError):
                    same = False
                if not same:
                    yield low + offset


def _converter(ros_type: str) -> Callable[[Any], Any]:
    def convert(message: Mapping[str, Any]) -> Any:
        return build(ros_type, message, where=ros_type)
    return convert


def _goal_id(request: Mapping[str, Any]) -> bytes:
    return bytes(np.asarray(request["goal_id"]["uuid"], dtype=np.uint8).tobytes())


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
        self._send_goal_response_type = f"{a}_SendGoal_Response"
        self._send_goal_response = types.message_class(self._send_goal_response_type)
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
        # A request as the bus's dicts, read in one walk of the core's (cdr.dict_decoder).
        decode = cdr.dict_decoder(f"{service_type}_Request")
        dds, hash_ = types.dds_type_name(service_type), types.type_hash(service_type)
        key = wire.data_key(bridge.domain_id, name, dds, hash_)
        eid = next(bridge._entity_ids)
        token = bridge._session.liveliness().declare_token(wire.endpoint_token(
            bridge.domain_id, bridge.zid, 0, eid, "SS", bridge.namespace, bridge.node_name,
            name, dds, hash_, wire.QOS_DEFAULT))

        def on_query(query: Any) -> None:
            self._on_query(query, decode, service_type, handler)

        queryable = declare_on_daemon_thread(
            lambda handler: bridge._session.declare_queryable(key, handler, complete=True),
            on_query, f"mjfast-ros2-action {name}", self._drains)
        self._entities += [queryable, token]

    def _on_query(self, query: Any, decode: Callable[[bytes], dict[str, Any]],
                  service_type: str,
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
                request = decode(payload.to_bytes() if payload is not None else b"")
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
               fields: Any) -> None:
        """`fields`: the response's dict, or its rosbags message."""
        attachment = wire.encode_attachment(request_id.sequence_number, time.time_ns(),
                                            request_id.gid)
        message = build(response_type, fields) if isinstance(fields, Mapping) else fields
        payload = types.serialize(message, response_type)
        with contextlib.suppress(zenoh.ZError):
            query.reply(query.key_expr, payload, attachment=attachment)

    def _send_goal(self, query: Any, request: Mapping[str, Any],
                   request_id: wire.Attachment) -> None:
        response_type = self._send_goal_response_type
        answered = False

        def respond(handle: Any) -> None:
            # As rcl_action: the response as soon as the goal is accepted or rejected, the
            # status array after it (the server publishes it once this returns). Built as the
            # message itself: this is on every goal's round trip.
            nonlocal answered
            answered = True
            stamp = handle.info["stamp"]
            self._reply(query, request_id, response_type, self._send_goal_response(
                accepted=bool(handle.accepted), stamp=_TIME(sec=stamp["sec"],
                                                            nanosec=stamp["nanosec"])))

        reply = self._bus.call(f"{self.action.name}/send_goal",
                               {"goal_id": _goal_id(request), "goal": request["goal"],
                                "respond": respond})
        if not answered:  # a server that does not call `respond`
            self._reply(query, request_id, response_type, reply)

    def _cancel_goal(self, query: Any, request: Mapping[str, Any],
                     request_id: wire.Attachment) -> None:
        reply = self._bus.call(f"{self.action.name}/cancel_goal", request)
        self._reply(query, request_id, f"{CANCEL_TYPE}_Response", reply)

    def _get_result(self, query: Any, request: Mapping[str, Any],
                    request_id: wire.Attachment) -> None:
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
