"""The in-process topic bus and service registry, and the per-plugin `Node` handle onto them.

Owns topic/service bookkeeping, the taps (what sees every message: the ROS 2 bridge, the remote
bus server, a recording) and the latched topics, and ROS-style name scoping for one plugin. It
does not store parameters (`params`) and runs no threads: delivery happens on the publishing
thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from mjfast._throttled_log import ThrottledLog
from mjfast.bus.handoff import HandedOffTap
from mjfast.bus.params import ParameterServer, resolve_name

__all__ = ["Bus", "Node", "ServiceRegistration", "Subscription", "Tap"]

_MISSING: Any = object()
_bus_log = logging.getLogger("mjfast.bus")


def _global_name(name: str, kind: str) -> str:
    """`name` as an absolute bus name; a name without leading slash counts as global."""
    if not isinstance(name, str) or name.startswith("~"):
        raise ValueError(f"{kind} name must be absolute or global, got {name!r}")
    absolute = resolve_name(name)
    if absolute == "/":
        raise ValueError(f"{kind} name must not be empty, got {name!r}")
    return absolute


class Subscription:
    """One callback subscribed to one topic; `unsubscribe()` is idempotent."""

    def __init__(self, bus: Bus, topic: str, callback: Callable[[Any], Any]) -> None:
        self.topic = topic
        self.callback = callback
        self._bus = bus
        self.active = True

    def unsubscribe(self) -> None:
        self._bus._remove_subscription(self)

    def __repr__(self) -> str:
        state = "active" if self.active else "unsubscribed"
        return f"<Subscription {self.topic} {self.callback!r} {state}>"


class Tap:
    """One function that sees every message published on a bus (`Bus.add_tap`) until
    `remove()` (also `close()`; both idempotent). `failures` counts the calls that raised."""

    def __init__(self, bus: Bus, function: Callable[[str, Any], Any]) -> None:
        self.function = function
        self.failures = 0
        self._bus = bus
        self.active = True

    def remove(self) -> None:
        """No message reaches `function` once this returns, except one whose delivery to it
        had already begun on another thread (a consumer that must know waits for those)."""
        self._bus._remove_tap(self)

    close = remove

    def publish(self, topic: str, message: Any) -> None:
        """Publishes on the bus for every subscriber and every tap but this one (a message that
        came in through this tap's consumer does not go back out through it)."""
        self._bus._deliver(_global_name(topic, "topic"), message, self)

    def __repr__(self) -> str:
        return f"<Tap {self.function!r} {'active' if self.active else 'removed'}>"


class ServiceRegistration:
    """One advertised service; `unadvertise()` removes it only while it is still this one."""

    def __init__(self, bus: Bus, name: str, handler: Callable[[Any], Any]) -> None:
        self.name = name
        self.handler = handler
        self._bus = bus

    def unadvertise(self) -> None:
        self._bus._remove_service(self)

    def __repr__(self) -> str:
        return f"<ServiceRegistration {self.name} {self.handler!r}>"


class Bus:
    """Topics (latest message + subscribers), taps, latched topics and services, shared by every
    node of an env.

    Thread-safe; callbacks, taps and handlers run on the caller's thread *outside* the lock, so
    a callback may publish, subscribe or call services without deadlocking.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf of the lock order (src/_core/env/env_core.h)
        self._subscribers: dict[str, list[Subscription]] = {}
        self._latest: dict[str, Any] = {}
        self._services: dict[str, ServiceRegistration] = {}
        self._taps: tuple[Tap, ...] = ()  # replaced, never changed: publish reads it unlocked
        # topic -> (message, who latched it); handed to every tap added later. _latch_lock is
        # held (outside `_lock`) while taps are handed latched messages, by a latched publish and
        # by add_tap, so that a tap gets each latched topic's messages in the order published.
        self._latched: dict[str, tuple[Any, object]] = {}
        self._latch_lock = threading.RLock()
        # A subscriber or a tap that raises on every message (a bad command from outside, each
        # time) says so once a second, with the count, not once per message. Keyed by the
        # callback's id, not the callback: the log must not keep a reloaded plugin alive.
        self._failures = ThrottledLog(_bus_log, level=logging.ERROR)
        # Set by a recording (SPEC §20): `tap(topic, message, publish)` delivers a message from
        # outside the env at a step boundary and records it as a command.
        self.inbound_tap: Callable[[str, Any, Callable[[str, Any], None]], None] | None = None

    # -- topics -------------------------------------------------------------------------------

    def subscribe(self, topic: str, callback: Callable[[Any], Any]) -> Subscription:
        """Call `callback(message)` for every later message on `topic`, in subscription order."""
        if not callable(callback):
            raise TypeError(f"subscriber of {topic!r} must be callable, got {callback!r}")
        subscription = Subscription(self, _global_name(topic, "topic"), callback)
        with self._lock:
            self._subscribers.setdefault(subscription.topic, []).append(subscription)
        return subscription

    def publish(self, topic: str, message: Any, *, latched: bool = False) -> None:
        """Store `message` as the latest on `topic`, then deliver it to each subscriber, then
        hand it to each tap (`add_tap`).

        `latched` (ROS's transient local): the message is also kept for the taps added later,
        until another latched message on `topic` replaces it or `unlatch(topic)`. A subscriber or
        a tap that raises is logged (once a second per topic, with the count) and skipped; the
        others still receive the message.
        """
        topic = _global_name(topic, "topic")
        if latched:
            self._publish_latched(topic, message, None)
        else:
            self._deliver(topic, message, None)

    def _publish_latched(self, topic: str, message: Any, latched_by: object) -> None:
        self._deliver(topic, message, None, (latched_by,))

    def _deliver(self, topic: str, message: Any, origin: Tap | None,
                 latched_by: tuple[object] | None = None) -> None:
        """To the subscribers, then the taps (but `origin`). `latched_by`: kept for later taps,
        in the same instant as the taps are listed, so that a tap added meanwhile gets it from
        add_tap and not twice. The taps get a latched message holding _latch_lock, as add_tap
        hands the kept ones over: each tap sees a latched topic's messages in order. The
        subscribers (plugin code, which may call into the env) get it without."""
        with self._lock:
            if latched_by is not None:
                self._latched[topic] = (message, latched_by[0])
            self._latest[topic] = message
            # A snapshot, so subscribing or unsubscribing from inside a callback is safe.
            subscribers = list(self._subscribers.get(topic, ()))
            taps = self._taps
        for subscription in subscribers:
            if not subscription.active:
                continue
            try:
                subscription.callback(message)
            except Exception:
                self._failures.report(("subscriber", topic, id(subscription.callback)),
                                 "subscriber %r of topic %s raised; delivering to the others",
                                 subscription.callback, topic, exc_info=True)
        with self._latch_lock if latched_by is not None else contextlib.nullcontext():
            for tap in taps:
                if tap.active and tap is not origin:
                    # (_call_tap's body, written out: a frame less on the publishing thread, the
                    # physics thread for a plugin's publish, for every tap of every message)
                    try:
                        tap.function(topic, message)
                    except Exception:
                        self._tap_failed(tap, topic)

    def _call_tap(self, tap: Tap, topic: str, message: Any) -> None:
        try:
            tap.function(topic, message)
        except Exception:
            self._tap_failed(tap, topic)

    def _tap_failed(self, tap: Tap, topic: str) -> None:
        """In the except block of a tap's call that raised."""
        tap.failures += 1
        self._failures.report(("tap", topic, id(tap)),
                              "tap %r raised on topic %s; delivering to the others",
                              tap.function, topic, exc_info=True)

    # -- taps and latched topics ------------------------------------------------------------

    def add_tap(self, function: Callable[[str, Any], Any], *, latched: bool = True,
                handoff: str | None = None) -> Tap | HandedOffTap:
        """Call `function(topic, message)` (the topic as an absolute name) for every later
        message on every topic, after its subscribers, taps in the order added; returns the
        `Tap` whose `remove()` ends it. With `latched`, `function` first gets the kept message
        of each latched topic (`publish(..., latched=True)`), before `add_tap` returns.

        A tap that raises is logged (once a second per topic, with the count) and counted in
        its `failures`; delivery to the subscribers and the other taps goes on.

        `handoff` (`keep_newest` or `wait`): `function` runs on a writer thread of the tap's own
        instead of the publishing thread, which only hands the message over through a bounded
        ring (mjfast.bus.handoff); a full ring keeps the newest message per topic, or makes the
        publisher wait. Returns a `HandedOffTap`."""
        if not callable(function):
            raise TypeError(f"a bus tap must be callable, got {function!r}")
        if handoff is not None:
            return HandedOffTap(self, function, policy=handoff, latched=latched)
        tap = Tap(self, function)
        with self._latch_lock:
            with self._lock:
                self._taps = (*self._taps, tap)
                kept = list(self._latched.items()) if latched else []
            for topic, (message, _) in kept:
                if tap.active:
                    self._call_tap(tap, topic, message)
        return tap

    def _remove_tap(self, tap: Tap) -> None:
        with self._lock:
            tap.active = False
            self._taps = tuple(t for t in self._taps if t is not tap)

    def latched(self) -> dict[str, Any]:
        """topic -> the message kept for later taps, for every latched topic."""
        with self._lock:
            return {topic: message for topic, (message, _) in self._latched.items()}

    def unlatch(self, topic: str, latched_by: object = None) -> None:
        """Later taps no longer get `topic`'s kept message (only while it is still the one that
        `latched_by` published, when given)."""
        topic = _global_name(topic, "topic")
        with self._lock:
            kept = self._latched.get(topic)
            if kept is not None and (latched_by is None or kept[1] is latched_by):
                del self._latched[topic]

    def publish_inbound(self, topic: str, message: Any,
                        publish: Callable[[str, Any], None] | None = None) -> None:
        """A message from outside the env (a remote client, a ROS 2 node) onto `topic`, through
        `publish` (default: this bus's publish). While the env records, it is delivered at a step
        boundary and recorded as a command, so that replay takes it at the same step."""
        publish = publish or self.publish
        tap = self.inbound_tap
        if tap is None:
            publish(topic, message)
        else:
            tap(topic, message, publish)

    def latest(self, topic: str, default: Any = None) -> Any:
        """The last message published on `topic`, or `default`."""
        topic = _global_name(topic, "topic")
        with self._lock:
            return self._latest.get(topic, default)

    def topics(self) -> list[str]:
        """Sorted names of topics that have a latest message or a subscriber."""
        with self._lock:
            return sorted(set(self._latest) | {t for t, subs in self._subscribers.items() if subs})

    def has_subscribers(self, topic: str) -> bool:
        """Whether `topic` (an absolute name) has a subscriber."""
        with self._lock:
            return bool(self._subscribers.get(topic))

    def _remove_subscription(self, subscription: Subscription) -> None:
        with self._lock:
            subscription.active = False
            subscribers = self._subscribers.get(subscription.topic)
            if subscribers and subscription in subscribers:
                subscribers.remove(subscription)
                if not subscribers:
                    del self._subscribers[subscription.topic]

    # -- services -----------------------------------------------------------------------------

    def advertise_service(self, name: str, handler: Callable[[Any], Any]) -> ServiceRegistration:
        """Serve `call(name, request)` with `handler(request)`; ValueError if `name` is taken."""
        if not callable(handler):
            raise TypeError(f"handler of service {name!r} must be callable, got {handler!r}")
        registration = ServiceRegistration(self, _global_name(name, "service"), handler)
        with self._lock:
            if registration.name in self._services:
                raise ValueError(f"service '{registration.name}' is already advertised")
            self._services[registration.name] = registration
        return registration

    def unadvertise_service(self, name: str) -> None:
        """Withdraw service `name`; KeyError naming it if it is not advertised."""
        name = _global_name(name, "service")
        with self._lock:
            if self._services.pop(name, None) is None:
                raise KeyError(f"service '{name}' is not advertised")

    def call(self, name: str, request: Any) -> Any:
        """The handler's return value for `request`; its exception propagates unchanged."""
        name = _global_name(name, "service")
        with self._lock:
            registration = self._services.get(name)
        if registration is None:
            raise KeyError(f"service '{name}' is not advertised")
        return registration.handler(request)

    def services(self) -> list[str]:
        """Sorted names of advertised services."""
        with self._lock:
            return sorted(self._services)

    def _remove_service(self, registration: ServiceRegistration) -> None:
        with self._lock:
            # Only if still ours: the name may since have been re-advertised by someone else.
            if self._services.get(registration.name) is registration:
                del self._services[registration.name]


class Node:
    """One plugin's view of parameters and the bus, scoped to its namespace.

    Relative and `~private` names resolve in `namespace` (a plugin's private namespace is its
    own namespace); `/absolute` names are global.
    """

    def __init__(self, params: ParameterServer, namespace: str, bus: Bus, name: str) -> None:
        self.params = params
        self.bus = bus
        self.name = name
        self.namespace = resolve_name(namespace)
        self._lock = threading.Lock()  # a leaf of the lock order (src/_core/env/env_core.h)
        self._subscriptions: list[Subscription] = []
        self._services: list[ServiceRegistration] = []
        self._latched: set[str] = set()

    @property
    def logger(self) -> logging.Logger:
        """The `logging.Logger` named `mjfast.<plugin name>`. Made on first use: logging keeps
        every logger it made for the rest of the process, so a plugin that never logs (of many
        envs, each naming its plugins anew) leaves none behind."""
        return logging.getLogger(f"mjfast.{self.name}")

    def resolve_name(self, name: str) -> str:
        """`name` as an absolute name: relative and `~` names join this node's namespace."""
        return resolve_name(name, self.namespace, self.namespace)

    # -- parameters ---------------------------------------------------------------------------

    def get_param(self, name: str, default: Any = _MISSING) -> Any:
        """The parameter `name` (a copy); `default` if absent, else KeyError naming it."""
        if default is _MISSING:
            return self.params.get(self.resolve_name(name))
        return self.params.get(self.resolve_name(name), default)

    def has_param(self, name: str) -> bool:
        return self.params.has(self.resolve_name(name))

    def set_param(self, name: str, value: Any) -> None:
        self.params.set(self.resolve_name(name), value)

    # -- bus ----------------------------------------------------------------------------------

    def publish(self, topic: str, message: Any, *, latched: bool = False) -> None:
        """Publish on the bus; `latched`: kept for later taps (a ROS 2 bridge or a recording
        started later gets it) until this node shuts down (SPEC §19's transient local)."""
        topic = self.resolve_name(topic)
        if latched:
            self.bus._publish_latched(_global_name(topic, "topic"), message, self)
            with self._lock:
                self._latched.add(topic)
        else:
            self.bus.publish(topic, message)

    def subscribe(self, topic: str, callback: Callable[[Any], Any]) -> Subscription:
        """Subscribe until `shutdown()` (or the returned subscription's `unsubscribe()`)."""
        subscription = self.bus.subscribe(self.resolve_name(topic), callback)
        with self._lock:
            self._subscriptions.append(subscription)
        return subscription

    def advertise_service(self, name: str, handler: Callable[[Any], Any]) -> ServiceRegistration:
        """Advertise until `shutdown()`; ValueError if the resolved name is taken."""
        registration = self.bus.advertise_service(self.resolve_name(name), handler)
        with self._lock:
            self._services.append(registration)
        return registration

    def shutdown(self) -> None:
        """Drop every subscription, service and latched message this node created, so that a
        reloaded plugin does not receive messages twice, collide with its old services or leave
        a stale latched message for later taps. Idempotent."""
        with self._lock:
            subscriptions, self._subscriptions = self._subscriptions, []
            services, self._services = self._services, []
            latched, self._latched = self._latched, set()
        for subscription in subscriptions:
            subscription.unsubscribe()
        for registration in services:
            registration.unadvertise()
        for topic in latched:
            self.bus.unlatch(topic, self)

    def __repr__(self) -> str:
        return f"<Node {self.name} at {self.namespace}>"
