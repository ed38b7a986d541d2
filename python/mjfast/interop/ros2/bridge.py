"""`Bridge`: one env as a ROS 2 node on rmw_zenoh's wire (SPEC §19).

Owns one Zenoh session (a client of the router at `router`, or the router itself), the graph's
liveliness tokens (the node, every publisher, subscriber and service server), and a tap on the
env's bus: a message published on a bus topic that the conversion table (`conversions`) knows
goes out as CDR on that topic's data key with rmw_zenoh's attachment (a latched bus topic into a
transient-local publisher's cache), by the env's route table (`mjfast.interop.routes`, shared
with recordings); a ROS 2 message on an inbound topic is converted and published on the bus; the
std_srvs services and simulation_interfaces' (`simulation_services`) answer queries; the actions
plugins declare are served as rmw_zenoh serves rcl actions (`actions`). The wire's strings and
bytes are `wire`'s; the types, CDR and hashes `types`'.

What reaches the env from outside is bounded and stops at close (SPEC §18): service calls wait
in a queue of `_SERVICE_QUEUE` (a call past that is answered `success: false` at once); every
piece of work that touches the env (a call, an inbound message, a message going out) runs
inside `_Work`, which `close()` shuts and then waits for, before anything is undeclared.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import zenoh
import zenoh.ext

from mjfast._throttled_log import ThrottledLog
from mjfast.bus.params import resolve_name
from mjfast.errors import LogicError
from mjfast.interop import routes
from mjfast.interop.ros2 import actions, cdr, simulation_services, types, wire
from mjfast.interop.ros2.robot_description import RobotDescription
from mjfast.interop.ros2.simulation_services import SimulationInterfaces
from mjfast.interop.routes import Inbound, Outbound
from mjfast.interop.zenoh_threads import (
    close_session,
    close_when_the_program_ends,
    declare_on_daemon_thread,
    join_drains,
    no_close_at_the_end,
)
from mjfast.plugin.discovery import resolve_plugin
from mjfast.sim.calls import ros2_calls

__all__ = ["DEFAULT_ROUTER", "Bridge", "RouterNotFound"]

DEFAULT_ROUTER = "tcp/127.0.0.1:7447"
ROUTER_HINT = "start one with `ros2 run rmw_zenoh_cpp rmw_zenohd`, or pass --ros2-router"
_CONNECT_TIMEOUT_S = 3.0
_SERVICE_WORKERS = 2
# Service calls (reset, reload) waiting for a worker; a call past that many is refused at once
# with `success: false`, rather than queueing work that would run long after its caller left.
_SERVICE_QUEUE = 64
# close() warns (and goes on waiting) when the work in progress takes longer than this.
_CLOSE_WARN_S = 5.0
_CLOSING = "the ROS 2 bridge is closing"

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
    route: Outbound  # the first route declaring its ROS 2 topic (its type and QoS)
    publisher: Any
    token: Any
    gid: bytes
    sequence: itertools.count
    serialize: Callable[[Any], bytearray]


class _Work:
    """The work in progress that touches the env or the session (a service call, an inbound
    message, a message going out), counted per thread; `shut()` refuses new work and waits for
    what is in progress on other threads."""

    def __init__(self) -> None:
        # A leaf of the lock order (src/_core/env_core.h). A plain lock: enter() and leave() run
        # around every message going out.
        self._state = threading.Condition(threading.Lock())
        self._running: dict[int, int] = {}  # thread id -> depth of work on it
        self.shut_down = False

    def enter(self) -> bool:
        """Counts this thread's work in, if the bridge is open (then `leave()` must follow)."""
        me = threading.get_ident()
        with self._state:
            if self.shut_down:
                return False
            running = self._running
            running[me] = running.get(me, 0) + 1
            return True

    def leave(self) -> None:
        me = threading.get_ident()
        with self._state:
            depth = self._running.pop(me) - 1
            if depth:
                self._running[me] = depth
            elif self.shut_down:  # only wait_idle() waits, and only once shut
                self._state.notify_all()

    @contextlib.contextmanager
    def running(self) -> Any:
        """Yields True while the bridge is open (the work is counted until it ends), else
        False (nothing may be done)."""
        allowed = self.enter()
        try:
            yield allowed
        finally:
            if allowed:
                self.leave()

    def shut(self) -> bool:
        """Refuses new work; False if it was refused already."""
        with self._state:
            was, self.shut_down = self.shut_down, True
            return not was

    def wait_idle(self) -> None:
        """Until no other thread is inside `running()` (this thread's own work, if close() is
        called from inside some, is not waited for)."""
        me = threading.get_ident()
        started = time.monotonic()
        warned = False
        with self._state:
            while any(thread != me for thread in self._running):
                if not warned and time.monotonic() - started > _CLOSE_WARN_S:
                    warned = True
                    _log.warning("closing the ROS 2 bridge waits for %d call(s) in progress",
                                 len(self._running))
                self._state.wait(0.5)


def _finite(value: Any) -> bool:
    """Whether every number in a converted message (dicts, lists, arrays) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, np.ndarray):
        return not np.issubdtype(value.dtype, np.inexact) or bool(np.isfinite(value).all())
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    if isinstance(value, np.floating):
        return bool(np.isfinite(value))
    return True


class _Counters:
    """Counts from any thread without a lock: `next()` on an itertools.count is one C call
    (atomic under the GIL), and a copy of a count reads it without advancing it."""

    NAMES = ("messages_out", "messages_in", "malformed", "non_finite", "unconvertible", "calls",
             "failed_calls", "refused_calls")

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


def _failure(service_type: str, message: str) -> Any:
    """The answer of a call that failed outside its handler's own result codes (raised, refused
    or the bridge closing): std_srvs' `success: false` with the message, simulation_interfaces'
    RESULT_OPERATION_FAILED."""
    if service_type.startswith(f"{simulation_services.PACKAGE}/"):
        return simulation_services.failure_response(service_type, message)
    return False, message


class Bridge:
    """Puts `env` on a ROS 2 graph until `close()` (SPEC §19).

    `domain_id`: the ROS domain (default `ROS_DOMAIN_ID`, else 0). `router`: the Zenoh router's
    endpoint (default `tcp/127.0.0.1:7447`); `RouterNotFound` when none answers there.
    `listen=True` makes this bridge's own session the router, listening on that endpoint.
    Several bridges (and bus servers, recordings) on one env start and stop in any order; a
    closed env is a `LogicError`.
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
        if env.closed:
            raise LogicError("Bridge: the env is closed; bridge an open env")
        self._env = env
        self._bus = env.bus
        self.domain_id = domain_id
        self.router = router or DEFAULT_ROUTER
        self.namespace, self.node_name = split_node_name(env.namespace)
        self._counters = _Counters()
        # Bad input from the graph says so once a second per topic, with the count (SPEC §18).
        self._rejected = ThrottledLog(_log)
        self._work = _Work()
        self._closed = threading.Event()  # set when close() has finished
        self._drains: list[threading.Thread] = []  # the inbound subscribers'
        self._service_drains: list[threading.Thread] = []
        self._tap: Any = None
        self._inline_topics: frozenset[str] = frozenset()
        self._reloads: Any = None
        self._lock = threading.RLock()
        self._entity_ids = itertools.count(1)
        self._publishers: dict[str, _Publisher] = {}  # ROS 2 topic -> its publisher
        # bus topic -> (route, its topic's publisher) for each route of the topic
        self._outbound: dict[str, tuple[tuple[Outbound, _Publisher], ...]] = {}
        self._table: routes.RouteTable | None = None
        self._inbound: list[tuple[Any, Any]] = []  # (subscriber, token)
        self._services: list[tuple[Any, Any]] = []  # (queryable, token)
        self._actions: list[actions.ActionServices] = []  # the plugins' actions (SPEC §23)
        self._skipped: set[str] = set()
        self._warned: set[str] = set()
        self._owns_session = session is None
        self._simulation: SimulationInterfaces | None = None  # simulation_interfaces' (SPEC §25)
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
            self._service_queries: queue.Queue[Any] = queue.Queue(_SERVICE_QUEUE)
            self._workers = [threading.Thread(target=self._serve_queries, daemon=True,
                                              name=f"mjfast-ros2-service-{i}")
                             for i in range(_SERVICE_WORKERS)]
            for worker in self._workers:
                worker.start()
            self._declare_services()
            self._description = RobotDescription()
            self._description_publisher: _Publisher | None = None
            self._rebuild(send_latched=False)
            # Every bus publish passes here, after its subscribers; the latched ones (the
            # /tf_static published at load) come first, into the transient-local caches. The
            # publishing (physics) thread only hands the message over: conversion, CDR and the
            # put are the tap's writer thread's, which keeps the newest message per topic when
            # it falls behind (a keep-last QoS; counted in statistics()["dropped"]).
            self._tap = self._bus.add_tap(self._forward, handoff="keep_newest")
            self._tap.inline_topics = self._inline_topics
            # A reload from anywhere (Python, the remote bus, this bridge) is a new model
            # generation: its /robot_description goes out even if no plugin publishes after it.
            self._reloads = env.add_call_listener(self._on_call)
        except BaseException:
            self._work.shut()
            self._stop_workers()
            if self._simulation is not None:
                self._simulation.close()
            if self._owns_session:
                self._session.close()
            raise
        close_when_the_program_ends(self)

    # -- routes ---------------------------------------------------------------------------------

    def _rebuild(self, send_latched: bool = True) -> None:
        """(Re)declares the publishers and subscribers of the env's route table, as its current
        plugins declared their topics (`send_latched`: and fills the transient-local caches
        with the latched messages)."""
        with self._lock:
            table = routes.route_table(self._env)
            if table is self._table:
                return
            self._table = table
            old, self._publishers = self._publishers, {}
            for entry in old.values():
                self._undeclare_publisher(entry)
            for subscriber, token in self._inbound:
                subscriber.undeclare()
                token.undeclare()
            self._inbound = []
            self._redeclare_actions()
            self._inbound_topics: set[str] = set()
            for topic, route in table.publishers.items():
                self._publishers[topic] = self._declare_publisher(route)
            outbound = {source: [(route, self._publishers[route.topic]) for route in found]
                        for source, found in table.outbound.items()}
            # The declared actions' feedback and status topics (not recorded: bridge-only).
            action_routes = self._action_routes()
            for route in action_routes:
                entry = self._publishers.get(route.topic)
                if entry is None:
                    entry = self._publishers[route.topic] = self._declare_publisher(route)
                outbound.setdefault(route.source, []).append((route, entry))
            # A status array goes out on the thread that accepted, canceled or ended the goal
            # (when that is not a plugin callback's: HandedOffTap's inline_topics), after the
            # arrays before it: none is replaced by a newer one in a full ring (every transition
            # is published, SPEC §23), and a goal's round trip does not wait for the writer.
            self._inline_topics = frozenset(route.source for route in action_routes
                                            if route.ros_type == actions.STATUS_TYPE)
            if self._tap is not None:
                self._tap.inline_topics = self._inline_topics
            self._outbound = {source: tuple(found) for source, found in outbound.items()}
            for inbound in table.inbound:
                self._inbound.append(self._declare_subscriber(inbound))
                self._inbound_topics.add(inbound.topic)
            # New transient-local publishers start with empty caches: the latched messages go in.
            for topic, message in (self._bus.latched() if send_latched else {}).items():
                for route, entry in self._outbound.get(topic, ()):
                    if route.transient_local:
                        self._send(route, entry, message)
            self._publish_robot_description()

    def _plugin_classes(self) -> list[tuple[str, str, Any]]:
        """(name, node namespace, class) of each configured plugin whose type resolves."""
        out = []
        for spec in self._env.plugin_specs:
            try:
                cls = resolve_plugin(spec.type)
            except Exception:
                continue
            out.append((spec.name, spec.node_namespace(self._env.namespace), cls))
        # simulation_interfaces' simulate_steps, declared as a plugin declares an action.
        if self._simulation is not None:
            out.append((simulation_services.PACKAGE, resolve_name(self._env.namespace),
                        self._simulation))
        return out

    def _action_routes(self) -> list[Outbound]:
        found = []
        for name, namespace, cls in self._plugin_classes():
            try:
                found += actions.outbound_routes(namespace, cls)
            except Exception as error:  # a plugin's bad ros_actions: that plugin only
                _log.warning("plugin %s's actions are not bridged to ROS 2: %s", name, error)
        return found

    def _on_call(self, name: str, args: Any) -> None:
        if name == "reload":
            self._publish_robot_description()

    def _publish_robot_description(self) -> None:
        """/robot_description (SPEC §24): its transient-local publisher declared once, and the
        env's URDF sent into its cache once per model generation (a reload changes the plugins,
        so _rebuild runs after each one)."""
        with self._lock:
            if self._description_publisher is None:
                self._description_publisher = self._declare_publisher(self._description.route)
            try:
                text = self._description.due(self._env)
            except Exception as error:  # a model URDF cannot describe: the rest is bridged
                _log.warning("no /robot_description for this model: %s", error)
                return
            if text is not None:
                self._send(self._description.route, self._description_publisher, text)

    def _redeclare_actions(self) -> None:
        """The plugins' declared actions' services, anew (their topics are outbound routes)."""
        for services in self._actions:
            services.close(wait=False)
        self._actions = []
        for name, namespace, cls in self._plugin_classes():
            try:
                declared = actions.declared_actions(namespace, cls)
            except Exception as error:  # a plugin's bad ros_actions: that plugin only
                _log.warning("plugin %s's actions are not bridged to ROS 2: %s", name, error)
                continue
            self._actions += [actions.ActionServices(self, action) for action in declared]

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
        return _Publisher(route, publisher, token, wire.gid(token_key), itertools.count(1),
                          cdr.fast_serializer(ros_type))

    def _undeclare_publisher(self, entry: _Publisher) -> None:
        self._undeclare(entry.token, entry.publisher)

    def _declare_subscriber(self, route: Inbound) -> tuple[Any, Any]:
        dds, hash_ = types.dds_type_name(route.ros_type), types.type_hash(route.ros_type)
        key = wire.data_key(self.domain_id, route.topic, dds, hash_)
        eid = next(self._entity_ids)
        token = self._session.liveliness().declare_token(wire.endpoint_token(
            self.domain_id, self.zid, 0, eid, "MS", self.namespace, self.node_name, route.topic,
            dds, hash_, wire.QOS_DEFAULT))
        subscriber = declare_on_daemon_thread(
            lambda handler: self._session.declare_subscriber(key, handler),
            lambda sample: self._on_ros_message(route, sample), f"mjfast-ros2-in {route.topic}",
            self._drains)
        return subscriber, token

    # -- outbound -------------------------------------------------------------------------------

    def _forward(self, topic: str, message: Any) -> None:
        """The bus tap: the message out on ROS 2, if it has a type."""
        work = self._work
        if work.enter():  # as running(), without a generator's cost on every message
            try:
                self._forward_open(topic, message)
            finally:
                work.leave()

    def _forward_open(self, topic: str, message: Any) -> None:
        table = self._table
        # A load replaced the plugins (and so their topics) since the routes were declared.
        if table is None or self._env.plugin_topics is not table.declared:
            self._rebuild()
        outbound = self._outbound.get(topic)
        if outbound is None:
            outbound = self._outbound_of(topic)
            if outbound is None:
                return
        for route, entry in outbound:
            self._send(route, entry, message)

    def _outbound_of(self, topic: str) -> tuple[tuple[Outbound, _Publisher], ...] | None:
        """The routes of a bus topic published under a name that is not absolute, or None
        (logged once) for a topic with no ROS 2 type."""
        try:
            resolved = resolve_name(topic)
        except (TypeError, ValueError):
            return None
        outbound = self._outbound.get(resolved)
        if outbound is None and resolved not in self._skipped:
            self._skipped.add(resolved)
            _log.info("bus topic %s has no ROS 2 type: not bridged", resolved)
        return outbound

    def _send(self, route: Outbound, entry: _Publisher, message: Any) -> None:
        try:
            converted = route.convert(message)
            # A converter may give the CDR itself (the action status array's does).
            payload = converted if isinstance(converted, bytes) else entry.serialize(converted)
        except Exception as error:
            self._counters.add("unconvertible")
            if route.topic not in self._warned:  # once per topic, not once per step
                self._warned.add(route.topic)
                _log.warning("a message on %s cannot go out as %s (counted; logged once): %s",
                             route.topic, route.ros_type, error)
            return
        attachment = wire.encode_attachment(next(entry.sequence), time.time_ns(), entry.gid)
        try:
            entry.publisher.put(payload, attachment=attachment)
        except zenoh.ZError:
            return  # the session is closing
        next(self._counters.messages_out)

    # -- inbound --------------------------------------------------------------------------------

    def _on_ros_message(self, route: Inbound, sample: zenoh.Sample) -> None:
        try:
            message = route.convert(types.deserialize(sample.payload.to_bytes(), route.ros_type))
        except Exception as error:  # malformed CDR from some node: counted, never fatal
            self._reject(route, "malformed", "ignored a malformed %s on %s: %s", error)
            return
        if not _finite(message):
            self._reject(route, "non_finite", "ignored a %s on %s with a value that is not "
                         "finite (NaN or infinite): %s", message)
            return
        with self._work.running() as open_:
            if not open_:
                return
            self._counters.add("messages_in")
            # Not back out on ROS 2 (past this bridge's tap); a command, while the env records.
            tap = self._tap  # None while the bridge is being made
            self._bus.publish_inbound(route.topic, message,
                                      tap.publish if tap is not None else None)

    def _reject(self, route: Inbound, counter: str, text: str, detail: Any) -> None:
        """Bad input on an inbound topic: counted, and logged once a second per topic."""
        self._counters.add(counter)
        self._rejected.report((counter, route.topic), text, route.ros_type, route.topic, detail)

    # -- services -------------------------------------------------------------------------------

    def _declare_services(self) -> None:
        """The calls table's std_srvs rows (mjfast.sim.calls: pause, reset, reload), each as
        `<ns>/<name>`, and simulation_interfaces' services (`simulation_services`)."""
        ns = resolve_name(self._env.namespace)
        # (name, type, handler, answered inline)
        served: list[tuple[str, str, Callable[[Any], Any], bool]] = []
        for call in ros2_calls():
            assert call.ros2 is not None
            served.append((f"{ns}/{call.name}", call.ros2.type,
                           functools.partial(call.ros2.answer, self._env), call.ros2.inline))
        # simulation_interfaces 2.1.0 (SPEC §25), under the node's namespace too (its action,
        # simulate_steps, with the plugins' actions: _plugin_classes).
        self._simulation = SimulationInterfaces(self._env)
        for short, (service_type, handler) in self._simulation.table().items():
            served.append((f"{ns.rstrip('/')}/{short}", service_type, handler, False))
        for name, service_type, handler, inline in served:
            dds, hash_ = types.dds_type_name(service_type), types.type_hash(service_type)
            key = wire.data_key(self.domain_id, name, dds, hash_)
            eid = next(self._entity_ids)
            token = self._session.liveliness().declare_token(wire.endpoint_token(
                self.domain_id, self.zid, 0, eid, "SS", self.namespace, self.node_name, name, dds,
                hash_, wire.QOS_DEFAULT))
            if inline:
                # Answered on the queryable's own thread: pause/resume wait for one step
                # boundary at most, and a hand-over to a worker costs a thread wake-up, a good
                # part of a round trip.
                def on_query(query: Any, t: str = service_type, h: Any = handler) -> None:
                    self._answer(query, t, h)
            else:  # reset and reload may take long: a worker thread, the queryable's is free
                def on_query(query: Any, t: str = service_type, h: Any = handler) -> None:
                    self._enqueue(query, t, h)
            queryable = declare_on_daemon_thread(
                lambda handler, key=key: self._session.declare_queryable(key, handler,
                                                                        complete=True),
                on_query, f"mjfast-ros2-service {name}", self._service_drains)
            self._services.append((queryable, token))

    def _enqueue(self, query: Any, service_type: str, handler: Callable[[Any], Any]) -> None:
        """A call for a worker, or refused at once: the bridge is closing, or the queue full."""
        with self._work.running() as open_:  # close() drains the queue after this
            if open_:
                try:
                    self._service_queries.put_nowait((query, service_type, handler))
                    return
                except queue.Full:
                    reason = (f"the bridge is busy: {_SERVICE_QUEUE} calls are waiting; call "
                              f"again when they are answered")
            else:
                reason = _CLOSING
        self._refuse(query, service_type, reason)

    def _refuse(self, query: Any, service_type: str, reason: str) -> None:
        self._counters.add("refused_calls")

        def refusal(request: Any) -> Any:
            raise RuntimeError(reason)

        self._answer(query, service_type, refusal, work=False)

    def _serve_queries(self) -> None:
        while True:
            item = self._service_queries.get()
            if item is None:
                return
            query, service_type, handler = item
            self._answer(query, service_type, handler)
            del query, item  # dropping the query ends the caller's wait

    def _answer(self, query: Any, service_type: str, handler: Callable[[Any], Any],
                work: bool = True) -> None:
        """Replies to `query` with what `handler` does with its request (`work`: counted as work
        on the env, and refused once the bridge is closing)."""
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
            self._rejected.report(("malformed", service_type),
                                  "ignored a malformed %s request: %s", service_type, error)
            with contextlib.suppress(zenoh.ZError):
                query.reply_err(f"malformed request: {error}".encode())
            return
        # The reply too is work: close() waits for it before the session goes.
        with self._work.running() if work else contextlib.nullcontext(True) as open_:
            try:
                if not open_:
                    raise RuntimeError(_CLOSING)
                answer = handler(request)
            except Exception as error:
                self._counters.add("failed_calls")
                answer = _failure(service_type, f"{type(error).__name__}: {error}")
            # std_srvs' handlers answer (success, message); the others their whole response.
            response = types.message_class(f"{service_type}_Response")(
                success=answer[0], message=answer[1]) if isinstance(answer, tuple) else answer
            reply_attachment = wire.encode_attachment(request_id.sequence_number,
                                                      time.time_ns(), request_id.gid)
            with contextlib.suppress(zenoh.ZError):
                query.reply(query.key_expr, types.serialize(response,
                                                            f"{service_type}_Response"),
                            attachment=reply_attachment)

    # -- lifecycle ------------------------------------------------------------------------------

    def unbridged(self) -> list[str]:
        """Bus topics seen with no ROS 2 type (not bridged), sorted."""
        with self._lock:
            known = set(self._outbound) | set(self._publishers) | self._inbound_topics
        return sorted(t for t in self._skipped | set(self._bus.topics()) if t not in known)

    def topics(self) -> dict[str, str]:
        """ROS 2 topic -> type of everything this node publishes."""
        with self._lock:
            entries = list(self._publishers.values())
            if self._description_publisher is not None:
                entries.append(self._description_publisher)
            return {entry.route.topic: entry.route.ros_type
                    for entry in sorted(entries, key=lambda entry: entry.route.topic)}

    def statistics(self) -> dict[str, int]:
        """Messages out and in, rejected inbound ones, service calls; `dropped`: messages that
        a newer one on the same topic replaced before the writer thread sent them."""
        counts = self._counters.snapshot()
        tap = self._tap
        counts["dropped"] = tap.statistics()["dropped"] if tap is not None else 0
        return counts

    def close(self) -> None:
        """Leaves the graph (every token undeclared, so the node disappears) and closes the
        session; idempotent. The service calls still waiting are answered `success: false`;
        returns once no work of the bridge's can touch the env any more (the calls and messages
        in progress have ended) and nothing of it is left on the graph."""
        if not self._work.shut():  # closed, or being closed on another thread
            self._closed.wait()
            return
        try:
            if self._tap is not None:
                self._tap.remove()  # no new message goes out
            if self._reloads is not None:
                self._reloads.remove()
            # The calls, inbound messages and puts in progress end; from now on every call is
            # answered `success: false` at once, not run.
            self._work.wait_idle()
            for queryable, _ in self._services:
                self._undeclare(queryable)  # no call comes any more
            with self._lock:
                for services in self._actions:  # the actions' calls too
                    services.close()
            if self._simulation is not None:
                self._simulation.close()  # simulate_steps' goal ends, and its thread
            # The calls that came before, answered while the session is open: those still in
            # the queryables' channels, then those waiting for a worker.
            join_drains(self._service_drains)
            self._stop_workers()
            join_drains(self._workers)
            with self._lock:
                for _, token in self._services:
                    self._undeclare(token)
                for subscriber, token in self._inbound:
                    self._undeclare(token, subscriber)
                for entry in self._publishers.values():
                    self._undeclare_publisher(entry)
                if self._description_publisher is not None:
                    self._undeclare_publisher(self._description_publisher)
                self._undeclare(self._node_token)
            if self._owns_session:
                close_session(self._session)
            join_drains(self._drains)
        finally:
            self._closed.set()
            no_close_at_the_end(self)

    def _stop_workers(self) -> None:
        """Answers the calls still waiting (`success: false`, not run) and tells each worker to
        end once its call in progress is answered (the work is shut: no call is queued now)."""
        while True:
            try:
                item = self._service_queries.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self._refuse(item[0], item[1], _CLOSING)
            del item
        for _ in getattr(self, "_workers", ()):
            self._service_queries.put(None)

    @staticmethod
    def _undeclare(*entities: Any) -> None:
        for entity in entities:
            with contextlib.suppress(zenoh.ZError):
                entity.undeclare()

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
