"""The in-process topic bus and service registry, and the per-plugin `Node` handle onto them.

Owns topic/service bookkeeping and ROS-style name scoping for one plugin. It does not store
parameters (`params`) and runs no threads: delivery happens on the publishing thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from mjfast.params import ParameterServer, resolve_name

__all__ = ["Bus", "Node", "ServiceRegistration", "Subscription"]

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
    """Topics (latest message + subscribers) and services, shared by every node of an env.

    Thread-safe; callbacks and handlers run on the caller's thread *outside* the lock, so a
    callback may publish, subscribe or call services without deadlocking.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a leaf of the lock order (src/_core/env/env_core.h)
        self._subscribers: dict[str, list[Subscription]] = {}
        self._latest: dict[str, Any] = {}
        self._services: dict[str, ServiceRegistration] = {}
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

    def publish(self, topic: str, message: Any) -> None:
        """Store `message` as the latest on `topic`, then deliver it to each subscriber.

        A subscriber that raises is logged and skipped; the others still receive the message.
        """
        topic = _global_name(topic, "topic")
        with self._lock:
            self._latest[topic] = message
            # A snapshot, so subscribing or unsubscribing from inside a callback is safe.
            subscribers = list(self._subscribers.get(topic, ()))
        for subscription in subscribers:
            if not subscription.active:
                continue
            try:
                subscription.callback(message)
            except Exception:
                _bus_log.exception(
                    "subscriber %r of topic %s raised; delivering to the others",
                    subscription.callback,
                    topic,
                )

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

    def publish(self, topic: str, message: Any) -> None:
        self.bus.publish(self.resolve_name(topic), message)

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
        """Drop every subscription and service this node created, so that a reloaded plugin
        does not receive messages twice or collide with its old services. Idempotent."""
        with self._lock:
            subscriptions, self._subscriptions = self._subscriptions, []
            services, self._services = self._services, []
        for subscription in subscriptions:
            subscription.unsubscribe()
        for registration in services:
            registration.unadvertise()

    def __repr__(self) -> str:
        return f"<Node {self.name} at {self.namespace}>"
