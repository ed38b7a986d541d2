"""`Bridge`: one env as a ROS 2 node on rmw_zenoh's wire (SPEC §19).

Owns one Zenoh session (a client of the router at `router`, or the router itself), the graph's
liveliness tokens (the node, every publisher, subscriber and service server), and the hook on
the env's bus: a message published on a bus topic that the conversion table (`conversions`)
knows goes out as CDR on that topic's data key with rmw_zenoh's attachment; a ROS 2 message on
an inbound topic is converted and published on the bus; the std_srvs services answer queries.
The wire's strings and bytes are `wire`'s; the types, CDR and hashes `types`'.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zenoh
import zenoh.ext

from mjfast._zenoh_threads import (
    close_when_the_program_ends,
    declare_on_daemon_thread,
    no_close_at_the_end,
)
from mjfast.params import resolve_name
from mjfast.ros2 import conversions, types, wire
from mjfast.ros2.conversions import Inbound, Outbound

__all__ = ["DEFAULT_ROUTER", "Bridge", "RouterNotFound"]

DEFAULT_ROUTER = "tcp/127.0.0.1:7447"
ROUTER_HINT = "start one with `ros2 run rmw_zenoh_cpp rmw_zenohd`, or pass --ros2-router"
_CONNECT_TIMEOUT_S = 3.0
_SERVICE_WORKERS = 2

_log = logging.getLogger("mjfast.ros2")


class RouterNotFound(ConnectionError):
    """No Zenoh router answered at the endpoint."""


def _config(endpoint: str, *, router: bool) -> zenoh.Config:
    config = zenoh.Config()
    config.insert_json5("scouting/multicast/enabled", "false")
    config.insert_json5("scouting/gossip/enabled", "false")
    if router:
        config.insert_json5("mode", '"router"')
        config.insert_json5("listen/endpoints", json.dumps([endpoint]))
        config.insert_json5("connect/endpoints", "[]")
    else:
        config.insert_json5("mode", '"client"')
        config.insert_json5("connect/endpoints", json.dumps([endpoint]))
        config.insert_json5("listen/endpoints", "[]")
        config.insert_json5("connect/timeout_ms", str(round(_CONNECT_TIMEOUT_S * 1000)))
    # rmw_zenoh's timestamping (on: a transient-local cache orders its samples by it).
    config.insert_json5("timestamping/enabled", '{"router": true, "peer": true, "client": true}')
    return config


@dataclass
class _Publisher:
    route: Outbound
    publisher: Any
    token: Any
    gid: bytes
    sequence: itertools.count
    companions: list[_Publisher]
    serialize: Callable[[Any], bytearray]


class _Counters:
    """Counts from any thread without a lock: `next()` on an itertools.count is one C call
    (atomic under the GIL), and a copy of a count reads it without advancing it."""

    NAMES = ("messages_out", "messages_in", "malformed", "unconvertible", "calls", "failed_calls")

    def __init__(self) -> None:
        self._counts = {name: itertools.count() for name in self.NAMES}
        self.messages_out = self._counts["messages_out"]

    def add(self, name: str) -> None:
        next(self._counts[name])

    def snapshot(self) -> dict[str, int]:
        return {name: next(copy.copy(count)) for name, count in self._counts.items()}


def split_node_name(namespace: str) -> tuple[str, str]:
    """The env's namespace as a ROS node's (namespace, name): `/mujoco_server` -> (`/`,
    `mujoco_server`), `/robot1/sim` -> (`/robot1`, `sim`)."""
    absolute = resolve_name(namespace)
    parent, _, name = absolute.rpartition("/")
    return parent or "/", name or "mujoco_server"


class Bridge:
    """Puts `env` on a ROS 2 graph until `close()` (SPEC §19).

    `domain_id`: the ROS domain (default `ROS_DOMAIN_ID`, else 0). `router`: the Zenoh router's
    endpoint (default `tcp/127.0.0.1:7447`); `RouterNotFound` when none answers there.
    `listen=True` makes this bridge's own session the router, listening on that endpoint.
    """

    def __init__(self, env: Any, *, domain_id: int | None = None, router: str | None = None,
                 listen: bool = False, session: Any = None) -> None:
        if domain_id is None:
            raw = os.environ.get("ROS_DOMAIN_ID", "").strip()
            try:
                domain_id = int(raw) if raw else 0
            except ValueError:
                raise ValueError(f"ROS_DOMAIN_ID must be an integer, got {raw!r}") from None
        if isinstance(domain_id, bool) or not isinstance(domain_id, int) or domain_id < 0:
            raise ValueError(f"domain_id must be a non-negative integer, got {domain_id!r}")
        self._env = env
        self._bus = env.bus
        self.domain_id = domain_id
        self.router = router or DEFAULT_ROUTER
        self.namespace, self.node_name = split_node_name(env.namespace)
        self._counters = _Counters()
        self._closed = False
        self._lock = threading.RLock()
        self._entity_ids = itertools.count(1)
        self._publishers: dict[str, _Publisher] = {}
        self._inbound: list[tuple[Any, Any]] = []  # (subscriber, token)
        self._services: list[tuple[Any, Any]] = []  # (queryable, token)
        self._skipped: set[str] = set()
        self._warned: set[str] = set()
        self._unmatched: dict[str, str] = {}  # topic as published -> resolved (no route)
        self._owns_session = session is None
        try:
            # `session`: a Zenoh session of mjfast's own to share (serve's remote bus, when it
            # listens on the router endpoint as the router); closed by its owner, not here.
            self._session = session or zenoh.open(_config(self.router, router=listen))
        except zenoh.ZError as error:
            if listen:
                raise OSError(f"cannot listen on {self.router} as the Zenoh router: "
                              f"{error}") from None
            raise RouterNotFound(f"no Zenoh router at {self.router}: {ROUTER_HINT}") from None
        try:
            self.zid = str(self._session.info.zid())
            self._node_token = self._session.liveliness().declare_token(wire.node_token(
                domain_id, self.zid, 0, self.namespace, self.node_name))
            self._service_queries: queue.SimpleQueue[Any] = queue.SimpleQueue()
            self._workers = [threading.Thread(target=self._serve_queries, daemon=True,
                                              name=f"mjfast-ros2-service-{i}")
                             for i in range(_SERVICE_WORKERS)]
            for worker in self._workers:
                worker.start()
            self._declare_services()
            self._specs: Any = None
            self._rebuild()
        except BaseException:
            if self._owns_session:
                self._session.close()
            raise
        # Every bus publish passes here (the remote bus of section 15 wraps it the same way).
        self._bus_publish = self._bus.publish
        self._bus.publish = self._publish_and_forward
        self._send_cached_transient_local()
        close_when_the_program_ends(self)

    # -- routes ---------------------------------------------------------------------------------

    def _rebuild(self) -> None:
        """(Re)declares the publishers and subscribers of the env's current plugins."""
        with self._lock:
            self._specs = self._env.plugin_specs
            old, self._publishers = self._publishers, {}
            for entry in old.values():
                self._undeclare_publisher(entry)
            for subscriber, token in self._inbound:
                subscriber.undeclare()
                token.undeclare()
            self._inbound = []
            self._inbound_topics: set[str] = set()
            self._unmatched = {}
            subscribed = set(self._bus._subscribers)
            for ctx, cls in conversions.plugin_contexts(self._env):
                try:
                    outbound = conversions.outbound_routes(ctx, cls)
                    inbound = conversions.inbound_routes(ctx, cls, subscribed.__contains__)
                except Exception as error:  # a plugin's bad ros_types: that plugin only
                    _log.warning("plugin %s is not bridged to ROS 2: %s", ctx.name, error)
                    continue
                for route in outbound:
                    if route.topic not in self._publishers:
                        self._publishers[route.topic] = self._declare_publisher(route)
                for route in inbound:
                    self._inbound.append(self._declare_subscriber(route))
                    self._inbound_topics.add(route.topic)

    def _declare_publisher(self, route: Outbound) -> _Publisher:
        ros_type = route.ros_type
        dds, hash_ = types.dds_type_name(ros_type), types.type_hash(ros_type)
        key = wire.data_key(self.domain_id, route.topic, dds, hash_)
        qos = wire.QOS_STATIC if route.transient_local else wire.QOS_DEFAULT
        eid = next(self._entity_ids)
        token_key = wire.endpoint_token(self.domain_id, self.zid, 0, eid, "MP", self.namespace,
                                        self.node_name, route.topic, dds, hash_, qos)
        if route.transient_local:
            # rmw_zenoh (Jazzy) declares a transient-local publisher as an AdvancedPublisher
            # with a cache of `depth` samples, which late-joining subscribers query.
            publisher = zenoh.ext.declare_advanced_publisher(
                self._session, key, cache=zenoh.ext.CacheConfig(max_samples=qos.depth),
                publisher_detection=True)
        else:
            publisher = self._session.declare_publisher(key)
        token = self._session.liveliness().declare_token(token_key)
        companions = [self._declare_publisher(c) for c in route.companions]
        return _Publisher(route, publisher, token, wire.gid(token_key), itertools.count(1),
                          companions, types.serializer(ros_type))

    def _undeclare_publisher(self, entry: _Publisher) -> None:
        for companion in entry.companions:
            self._undeclare_publisher(companion)
        with contextlib.suppress(zenoh.ZError):
            entry.token.undeclare()
            entry.publisher.undeclare()

    def _declare_subscriber(self, route: Inbound) -> tuple[Any, Any]:
        dds, hash_ = types.dds_type_name(route.ros_type), types.type_hash(route.ros_type)
        key = wire.data_key(self.domain_id, route.topic, dds, hash_)
        eid = next(self._entity_ids)
        token = self._session.liveliness().declare_token(wire.endpoint_token(
            self.domain_id, self.zid, 0, eid, "MS", self.namespace, self.node_name, route.topic,
            dds, hash_, wire.QOS_DEFAULT))
        subscriber = declare_on_daemon_thread(
            lambda handler: self._session.declare_subscriber(key, handler),
            lambda sample: self._on_ros_message(route, sample), f"mjfast-ros2-in {route.topic}")
        return subscriber, token

    # -- outbound -------------------------------------------------------------------------------

    def _publish_and_forward(self, topic: str, message: Any) -> None:
        self._bus_publish(topic, message)  # in-process delivery first, as without the bridge
        self._forward(topic, message)

    def _forward(self, topic: str, message: Any) -> None:
        """What the bridge adds to a bus publish: the message out on ROS 2, if it has a type."""
        if self._closed:
            return
        if self._env.plugin_specs is not self._specs:  # a reload changed the plugins
            self._rebuild()
        entry = self._publishers.get(topic)
        if entry is None:
            resolved = self._unmatched.get(topic)
            if resolved is None:
                try:
                    resolved = resolve_name(topic)
                except (TypeError, ValueError):
                    return
                self._unmatched[topic] = resolved
            entry = self._publishers.get(resolved)
            if entry is None:
                if resolved not in self._skipped:
                    self._skipped.add(resolved)
                    _log.info("bus topic %s has no ROS 2 type: not bridged", resolved)
                return
        self._send(entry, message)

    def _send(self, entry: _Publisher, message: Any) -> None:
        try:
            payload = entry.serialize(entry.route.convert(message))
        except Exception as error:
            self._counters.add("unconvertible")
            if entry.route.topic not in self._warned:  # once per topic, not once per step
                self._warned.add(entry.route.topic)
                _log.warning("a message on %s cannot go out as %s (counted; logged once): %s",
                             entry.route.topic, entry.route.ros_type, error)
            return
        attachment = wire.encode_attachment(next(entry.sequence), time.time_ns(), entry.gid)
        try:
            entry.publisher.put(payload, attachment=attachment)
        except zenoh.ZError:
            return  # the session is closing
        next(self._counters.messages_out)
        for companion in entry.companions:
            self._send(companion, message)

    def _send_cached_transient_local(self) -> None:
        """A transient-local topic published before the bridge (TfPublisher's /tf_static at
        load) goes into its cache now."""
        for topic, entry in list(self._publishers.items()):
            if entry.route.transient_local:
                latest = self._bus.latest(topic)
                if latest is not None:
                    self._send(entry, latest)

    # -- inbound --------------------------------------------------------------------------------

    def _on_ros_message(self, route: Inbound, sample: zenoh.Sample) -> None:
        try:
            message = route.convert(types.deserialize(sample.payload.to_bytes(), route.ros_type))
        except Exception as error:  # malformed CDR from some node: counted, never fatal
            self._counters.add("malformed")
            _log.warning("ignored a malformed %s on %s: %s", route.ros_type, route.topic, error)
            return
        self._counters.add("messages_in")
        # Not back out on ROS 2 (the unwrapped publish); a command, while the env records.
        self._bus.publish_inbound(route.topic, message, self._bus_publish)

    # -- services -------------------------------------------------------------------------------

    def _declare_services(self) -> None:
        ns = resolve_name(self._env.namespace)
        handlers: dict[str, tuple[str, Callable[[Any], tuple[bool, str]]]] = {
            f"{ns}/pause": ("std_srvs/srv/SetBool", self._pause),
            f"{ns}/reset": ("std_srvs/srv/Trigger", self._reset),
            f"{ns}/reload": ("std_srvs/srv/Trigger", self._reload),
        }
        for name, (service_type, handler) in handlers.items():
            dds, hash_ = types.dds_type_name(service_type), types.type_hash(service_type)
            key = wire.data_key(self.domain_id, name, dds, hash_)
            eid = next(self._entity_ids)
            token = self._session.liveliness().declare_token(wire.endpoint_token(
                self.domain_id, self.zid, 0, eid, "SS", self.namespace, self.node_name, name, dds,
                hash_, wire.QOS_DEFAULT))
            if handler == self._pause:
                # Answered on the queryable's own thread: pause/resume wait for one step
                # boundary at most, and a hand-over to a worker costs a thread wake-up, a good
                # part of a round trip.
                def on_query(query: Any, t: str = service_type, h: Any = handler) -> None:
                    self._answer(query, t, h)
            else:  # reset and reload may take long: a worker thread, the queryable's is free
                def on_query(query: Any, t: str = service_type, h: Any = handler) -> None:
                    self._service_queries.put((query, t, h))
            queryable = declare_on_daemon_thread(
                lambda handler, key=key: self._session.declare_queryable(key, handler,
                                                                        complete=True),
                on_query, f"mjfast-ros2-service {name}")
            self._services.append((queryable, token))

    def _pause(self, request: Any) -> tuple[bool, str]:
        if request.data:
            self._env.pause()
            return True, "paused"
        self._env.resume()
        return True, "resumed"

    def _reset(self, request: Any) -> tuple[bool, str]:
        self._env.reset()
        return True, "reset"

    def _reload(self, request: Any) -> tuple[bool, str]:
        self._env.reload()
        return True, "reloaded"

    def _serve_queries(self) -> None:
        while True:
            item = self._service_queries.get()
            if item is None:
                return
            query, service_type, handler = item
            self._answer(query, service_type, handler)
            del query, item  # dropping the query ends the caller's wait

    def _answer(self, query: Any, service_type: str, handler: Callable[[Any], Any]) -> None:
        self._counters.add("calls")
        try:
            raw = query.attachment
            if raw is None:
                raise ValueError("a service request needs rmw_zenoh's attachment")
            request_id = wire.Attachment.decode(raw.to_bytes())
            payload = query.payload
            request = types.deserialize(payload.to_bytes() if payload is not None else b"",
                                        f"{service_type}_Request")
        except Exception as error:
            self._counters.add("malformed")
            self._counters.add("failed_calls")
            _log.warning("ignored a malformed %s request: %s", service_type, error)
            with contextlib.suppress(zenoh.ZError):
                query.reply_err(f"malformed request: {error}".encode())
            return
        try:
            success, message = handler(request)
        except Exception as error:
            self._counters.add("failed_calls")
            success, message = False, f"{type(error).__name__}: {error}"
        response = types.message_class(f"{service_type}_Response")(success=success,
                                                                   message=message)
        reply_attachment = wire.encode_attachment(request_id.sequence_number, time.time_ns(),
                                                  request_id.gid)
        with contextlib.suppress(zenoh.ZError):
            query.reply(query.key_expr, types.serialize(response, f"{service_type}_Response"),
                        attachment=reply_attachment)

    # -- lifecycle ------------------------------------------------------------------------------

    def unbridged(self) -> list[str]:
        """Bus topics seen with no ROS 2 type (not bridged), sorted."""
        with self._lock:
            known = set(self._publishers) | self._inbound_topics
        return sorted(t for t in self._skipped | set(self._bus.topics()) if t not in known)

    def topics(self) -> dict[str, str]:
        """ROS 2 topic -> type of everything this node publishes (companions included)."""
        out: dict[str, str] = {}
        stack = list(self._publishers.values())
        while stack:
            entry = stack.pop()
            out[entry.route.topic] = entry.route.ros_type
            stack.extend(entry.companions)
        return dict(sorted(out.items()))

    def statistics(self) -> dict[str, int]:
        return self._counters.snapshot()

    def close(self) -> None:
        """Leaves the graph (every token undeclared, so the node disappears) and closes the
        session; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._bus.publish == self._publish_and_forward:
            del self._bus.publish
        for _ in self._workers:
            self._service_queries.put(None)
        for worker in self._workers:
            worker.join(10.0)
        with self._lock, contextlib.suppress(zenoh.ZError):
            for queryable, token in self._services:
                token.undeclare()
                queryable.undeclare()
            for subscriber, token in self._inbound:
                token.undeclare()
                subscriber.undeclare()
            for entry in self._publishers.values():
                self._undeclare_publisher(entry)
            self._node_token.undeclare()
        if self._owns_session:
            self._session.close()
        no_close_at_the_end(self)

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
