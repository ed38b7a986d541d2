"""The server side of the remote bus: one env's bus bridged to Zenoh (SPEC §15).

Owns the Zenoh session of `mjfast serve`: every message published on the env's bus goes out on
its topic key, a remote publish is published on the bus, and every service (section 13's
included) answers queries. It does not run the env (the CLI starts and stops it) and knows the
wire format only through `codec` and the key layout only through `keys`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import zenoh

from mjfast.params import resolve_name
from mjfast.remote import keys
from mjfast.remote.codec import decode, encode

__all__ = ["DEFAULT_ENDPOINT", "BusServer", "zenoh_config"]

DEFAULT_ENDPOINT = "tcp/127.0.0.1:7447"
# Threads answering service calls (each call holds one until its handler returns) and the
# server's own queries, and how many queries may wait for them.
_SERVICE_WORKERS = 8
_WORKER_EXIT_TIMEOUT_S = 10.0
# Services of the env's own (section 13) that only read and never wait for a step: answered on
# Zenoh's thread, without the hand-over to a worker (a thread wake-up, about a quarter of a
# round trip). Everything else may block (a `step`, a plugin's slow service) and goes to workers.
_INLINE_SERVICES = frozenset({"info", "statistics"})

_log = logging.getLogger("mjfast.remote")


def zenoh_config(mode: str, endpoint: str, *, timeout: float | None = None) -> zenoh.Config:
    """A Zenoh configuration that uses `endpoint` only: listening on it (`router`) or connecting
    to it (`client`), with multicast scouting and gossip off, so nothing else is discovered."""
    config = zenoh.Config()
    config.insert_json5("mode", json.dumps(mode))
    config.insert_json5("scouting/multicast/enabled", "false")
    config.insert_json5("scouting/gossip/enabled", "false")
    if mode == "client":
        config.insert_json5("connect/endpoints", json.dumps([endpoint]))
        config.insert_json5("listen/endpoints", "[]")
        if timeout is not None:
            config.insert_json5("connect/timeout_ms", json.dumps(max(1, round(timeout * 1000))))
    else:
        config.insert_json5("listen/endpoints", json.dumps([endpoint]))
        config.insert_json5("connect/endpoints", "[]")
    return config


class _Counters:
    """What the server did, for the statistics `mjfast serve` prints at the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = {"messages_out": 0, "messages_in": 0, "calls": 0, "failed_calls": 0,
                       "unencodable": 0}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.values[name] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.values)


def error_reply(error: BaseException) -> dict[str, str]:
    """The reply payload of a failed call: the exception's type name and message."""
    if isinstance(error, KeyError) and len(error.args) == 1:
        message = str(error.args[0])  # str(KeyError) quotes its message
    else:
        message = str(error)
    return {"type": type(error).__name__, "message": message}


class BusServer:
    """Bridges `env.bus` to Zenoh on `endpoint` until `close()`."""

    def __init__(self, env: Any, endpoint: str = DEFAULT_ENDPOINT) -> None:
        self._env = env
        self._bus = env.bus
        self.endpoint = endpoint
        self._counters = _Counters()
        self._publishers: dict[str, zenoh.Publisher] = {}
        self._publishers_lock = threading.Lock()
        self._closed = False
        self._session = zenoh.open(zenoh_config("router", endpoint))
        try:
            subscriber = self._session.declare_subscriber(f"{keys.PUBLISH}/**",
                                                          self._on_remote_publish)
            # Service queries are handed to worker threads through a queue: a call that takes
            # long holds one worker, never Zenoh's own threads. The server's queries (alive,
            # services, topics, latest) and the read-only services above are answered at once.
            services = self._session.declare_queryable(f"{keys.SERVICE}/**",
                                                       self._on_service_query)
            server = self._session.declare_queryable(
                f"{keys.SERVER}/**", lambda query: self._answer(query, self._server_request))
        except BaseException:
            self._session.close()
            raise
        self._declared = [subscriber, services, server]
        self._service_queries: queue.SimpleQueue[zenoh.Query | None] = queue.SimpleQueue()
        self._workers = [
            threading.Thread(target=self._serve_queries, name=f"mjfast-remote-service-{index}",
                             daemon=True)
            for index in range(_SERVICE_WORKERS)]
        for worker in self._workers:
            worker.start()
        # Every publish on the env's bus, by plugins or user code, is forwarded: the bus has no
        # catch-all subscription, so this instance's publish is wrapped (and put back on close).
        self._bus_publish = self._bus.publish
        self._bus.publish = self._publish_and_forward

    # -- topics ---------------------------------------------------------------------------------

    def _publish_and_forward(self, topic: str, message: Any) -> None:
        self._bus_publish(topic, message)  # in-process delivery first, as without a server
        if self._closed:
            return
        try:
            publisher = self._publisher(topic)
            # Encoded only when some remote subscriber matches: a camera stream nobody watches
            # costs the publishing (physics) thread nothing.
            if not publisher.matching_status.matching:
                return
            payload = encode(message)
        except (TypeError, ValueError, OverflowError) as error:
            self._counters.add("unencodable")
            _log.warning("a message on %s cannot go out over the remote bus: %s", topic, error)
            return
        except zenoh.ZError:
            return  # the session is closing
        try:
            publisher.put(payload)
        except zenoh.ZError:
            return
        self._counters.add("messages_out")

    def _publisher(self, topic: str) -> zenoh.Publisher:
        name = resolve_name(topic)
        publisher = self._publishers.get(name)
        if publisher is None:
            with self._publishers_lock:
                publisher = self._publishers.get(name)
                if publisher is None:
                    # Zenoh's default congestion control for data (drop when the link is
                    # congested): the publishing thread is often the physics thread, which a
                    # slow client must never hold up.
                    publisher = self._session.declare_publisher(keys.key(keys.TOPIC, name))
                    self._publishers[name] = publisher
        return publisher

    def _on_remote_publish(self, sample: zenoh.Sample) -> None:
        try:
            topic = keys.bus_name(keys.PUBLISH, str(sample.key_expr))
            message = decode(sample.payload.to_bytes())
        except Exception as error:  # a malformed put from some client: not ours to crash on
            _log.warning("ignored a remote publish on %s: %s", sample.key_expr, error)
            return
        self._counters.add("messages_in")
        self._bus.publish(topic, message)

    # -- services -------------------------------------------------------------------------------

    def _on_service_query(self, query: zenoh.Query) -> None:
        try:
            namespace, _, name = keys.bus_name(keys.SERVICE, str(query.key_expr)).rpartition("/")
            inline = name in _INLINE_SERVICES and namespace == self._env.namespace.rstrip("/")
        except Exception:  # a malformed key: a worker answers it with the error
            inline = False
        if inline:
            self._answer(query, self._call_service)
        else:
            self._service_queries.put(query)

    def _serve_queries(self) -> None:
        while True:
            query = self._service_queries.get()
            if query is None:  # close()
                return
            self._answer(query, self._call_service)
            # Dropping the query tells the caller that no more replies come: before waiting.
            del query

    def _answer(self, query: zenoh.Query, handler: Callable[[str, Any], Any]) -> None:
        try:
            payload = query.payload
            request = decode(payload.to_bytes()) if payload is not None and len(payload) else None
            reply = encode(handler(str(query.key_expr), request))
        except Exception as error:
            self._counters.add("failed_calls")
            with contextlib.suppress(zenoh.ZError):  # the client has gone
                query.reply_err(encode(error_reply(error)))
            return
        with contextlib.suppress(zenoh.ZError):
            query.reply(query.key_expr, reply)

    def _call_service(self, key_expr: str, request: Any) -> Any:
        self._counters.add("calls")
        return self._bus.call(keys.bus_name(keys.SERVICE, key_expr), request)

    def _server_request(self, key_expr: str, request: Any) -> Any:
        if key_expr == keys.ALIVE:
            from mjfast import __version__

            return {"version": __version__, "namespace": self._env.namespace}
        if key_expr == keys.SERVICES:
            return self._bus.services()
        if key_expr == keys.TOPICS:
            return self._bus.topics()
        if key_expr.startswith(keys.LATEST + "/"):
            return self._bus.latest(keys.bus_name(keys.LATEST, key_expr))
        raise KeyError(f"the server has no query {key_expr!r}")

    # -- lifecycle ------------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        """Messages sent out and received, service calls answered and failed."""
        return self._counters.snapshot()

    def close(self) -> None:
        """Stops forwarding and closes the session; idempotent."""
        if self._closed:
            return
        self._closed = True
        # Only if still ours: someone may have wrapped the bus after us.
        if self._bus.publish == self._publish_and_forward:
            del self._bus.publish
        for entity in self._declared:
            entity.undeclare()
        for _ in self._workers:
            self._service_queries.put(None)
        for worker in self._workers:
            worker.join(_WORKER_EXIT_TIMEOUT_S)  # a worker in a long call finishes it first
        with self._publishers_lock:
            publishers, self._publishers = list(self._publishers.values()), {}
        for publisher in publishers:
            publisher.undeclare()
        self._session.close()

    def __enter__(self) -> BusServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

