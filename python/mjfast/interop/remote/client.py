"""The client side of the remote bus: `mjfast.connect()` and its `Client` (SPEC §15).

Owns a Zenoh client session connected to one `mjfast serve` and the calls of SPEC §15 on it
(publish, subscribe, latest, call, services, topics). Thread-safe: the session is, and the
encoder keeps one buffer per thread. It does not run an env and imports nothing that does.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import zenoh

from mjfast.bus.params import resolve_name
from mjfast.errors import RemoteError
from mjfast.interop.remote import keys
from mjfast.interop.remote.codec import decode, encode
from mjfast.interop.remote.server import DEFAULT_ENDPOINT, MAX_TIMEOUT_S, zenoh_config
from mjfast.interop.zenoh_threads import (
    close_session,
    close_when_the_program_ends,
    declare_on_daemon_thread,
    no_close_at_the_end,
)

__all__ = ["Client", "RemoteSubscription", "connect"]

_log = logging.getLogger("mjfast.remote")

# How often connect() asks again for a server that something at its endpoint does not answer for.
_RETRY_S = 0.05


class RemoteSubscription:
    """What `Client.subscribe` returns; `close()` stops the callbacks (idempotent)."""

    def __init__(self, topic: str, subscriber: zenoh.Subscriber) -> None:
        self.topic = topic
        self._subscriber: zenoh.Subscriber | None = subscriber
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            with contextlib.suppress(zenoh.ZError):  # the session is closed already
                subscriber.undeclare()

    @property
    def active(self) -> bool:
        return self._subscriber is not None

    def __repr__(self) -> str:
        return f"<RemoteSubscription {self.topic} {'active' if self.active else 'closed'}>"


class Client:
    """A connection to a running `mjfast serve` (use `mjfast.connect()`)."""

    def __init__(self, endpoint: str | None = None, *, timeout: float = 5.0) -> None:
        self.endpoint = endpoint or DEFAULT_ENDPOINT
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._subscriptions: list[RemoteSubscription] = []
        self._lock = threading.Lock()
        self._closed = False
        deadline = time.monotonic() + timeout
        try:
            self._session = zenoh.open(zenoh_config("client", self.endpoint, timeout=timeout))
        except zenoh.ZError as error:
            raise ConnectionError(f"no mjfast server at {self.endpoint}: nothing listens there "
                                  f"(waited {timeout:g} s)") from error
        try:
            self.server = self._wait_for_server(deadline, timeout)
        except BaseException:
            self._session.close()
            raise
        close_when_the_program_ends(self)

    def _wait_for_server(self, deadline: float, timeout: float) -> Any:
        """The server's ALIVE reply, asked again until `deadline`: something listens at the
        endpoint, but the mjfast server may be starting (its bus answers a moment after its
        session, or a ROS 2 node of the same process, is up), or reach it through a router."""
        while True:
            try:
                return self._query(keys.ALIVE, None, max(0.05, deadline - time.monotonic()),
                                   what="the server")
            except RemoteError as error:
                raise ConnectionError(f"no mjfast server at {self.endpoint}: what answers there "
                                      f"is not one ({error})") from error
            except (TimeoutError, ConnectionError) as error:
                # No reply at all (no mjfast queryable yet), or none in time.
                if time.monotonic() + _RETRY_S >= deadline:
                    raise ConnectionError(
                        f"no mjfast server at {self.endpoint}: something listens there (a Zenoh "
                        f"router or peer, such as a ROS 2 router) but no mjfast server answered "
                        f"within {timeout:g} s") from error
            time.sleep(_RETRY_S)  # a query that finds no queryable ends at once

    # -- topics ---------------------------------------------------------------------------------

    def publish(self, topic: str, message: Any) -> None:
        """Publishes `message` on the server's bus (its plugins' subscribers receive it)."""
        self._check_open()
        key = keys.key(keys.PUBLISH, topic)
        payload = encode(message)
        with self._closed_is_connection_error():
            self._session.put(key, payload)

    def subscribe(self, topic: str, callback: Callable[[Any], Any]) -> RemoteSubscription:
        """Calls `callback(message)` for every later message on `topic`, in order, on a daemon
        thread of this subscription's own."""
        if not callable(callback):
            raise TypeError(f"subscriber of {topic!r} must be callable, got {callback!r}")
        self._check_open()
        key = keys.key(keys.TOPIC, topic)
        subscriptions: list[RemoteSubscription] = []  # this one, once declared

        def deliver(sample: zenoh.Sample) -> None:
            if subscriptions and not subscriptions[0].active:
                return  # closed: what was still on its way is dropped
            try:
                message = decode(sample.payload.to_bytes())
            except Exception:
                _log.exception("undecodable message on %s", sample.key_expr)
                return
            try:
                callback(message)
            except BaseException:  # SystemExit too: on this thread it would only be printed
                _log.exception("subscriber %r of remote topic %s raised", callback, topic)

        with self._closed_is_connection_error():
            subscriber = declare_on_daemon_thread(
                lambda handler: self._session.declare_subscriber(key, handler), deliver,
                f"mjfast-remote-subscriber {topic}")
            subscription = RemoteSubscription(keys.bus_name(keys.TOPIC, key), subscriber)
            subscriptions.append(subscription)
        with self._lock:
            closed = self._closed
            if not closed:
                self._subscriptions.append(subscription)
        if closed:  # close() ran meanwhile, on another thread
            subscription.close()
            self._check_open()
        return subscription

    def latest(self, topic: str, *, timeout: float = 5.0) -> Any:
        """The server's latest message on `topic`, or None."""
        return self._query(keys.key(keys.LATEST, topic), None, timeout, what="latest")

    def topics(self, *, timeout: float = 5.0) -> list[str]:
        """Topics published or subscribed on the server, sorted."""
        return list(self._query(keys.TOPICS, None, timeout, what="topics"))

    # -- services -------------------------------------------------------------------------------

    def call(self, service: str, request: Any = None, timeout: float = 5.0) -> Any:
        """The service's reply; RemoteError for a failure on the server (an unknown service is
        one, with type_name "KeyError"); TimeoutError when no reply comes within `timeout`."""
        return self._query(keys.key(keys.SERVICE, service), request, timeout, service=service)

    def services(self, *, timeout: float = 5.0) -> list[str]:
        """Services advertised on the server, sorted."""
        return list(self._query(keys.SERVICES, None, timeout, what="services"))

    def _query(self, key: str, request: Any, timeout: float, *, what: str = "",
               service: str | None = None) -> Any:
        """The reply to a query on `key`; errors name `what`, or the `service` called."""
        self._check_open()
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        payload = encode(request) if request is not None else None
        started = time.monotonic()
        with self._closed_is_connection_error():
            # The timeout travels with the call: the server stops a `step` call whose caller
            # has stopped waiting (docs/remote.md).
            replies = self._session.get(key, payload=payload, timeout=min(timeout, MAX_TIMEOUT_S),
                                        attachment=_timeout_attachment(timeout))
            for reply in replies:
                if reply.ok is not None:
                    return decode(reply.ok.payload.to_bytes())
                error = reply.err
                assert error is not None
                described = _described(what, service)
                failure = _remote_error(error.payload.to_bytes(), described)
                if time.monotonic() - started >= timeout:
                    # Past the caller's timeout, so a timeout: the server sends this late reply
                    # when it stops a `step` because the caller stopped waiting, and that reply
                    # can beat Zenoh's own timer by a hair on a loaded machine.
                    raise self._timed_out(described, timeout) from failure
                raise failure
        self._check_open()  # closed on another thread while the call waited
        what = _described(what, service)
        waited = time.monotonic() - started
        if waited >= timeout * 0.9:
            raise self._timed_out(what, timeout)
        raise ConnectionError(f"{what}: the mjfast server at {self.endpoint} is gone")

    def _timed_out(self, what: str, timeout: float) -> TimeoutError:
        return TimeoutError(f"{what}: no reply from {self.endpoint} within {timeout:g} s")

    # -- lifecycle ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionError("the client is closed")

    @contextlib.contextmanager
    def _closed_is_connection_error(self) -> Iterator[None]:
        """Zenoh's "session closed" from a call racing close() on another thread is the
        ConnectionError of a closed client."""
        try:
            yield
        except zenoh.ZError:
            self._check_open()
            raise

    def close(self) -> None:
        """Closes every subscription and the session; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            subscription.close()
        close_session(self._session)
        no_close_at_the_end(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<mjfast.remote.Client {self.endpoint} {'closed' if self._closed else 'open'}>"


@functools.lru_cache(maxsize=64)
def _timeout_attachment(timeout: float) -> bytes:
    return encode({"timeout": timeout})


def _described(what: str, service: str | None) -> str:
    return what if service is None else f"service {resolve_name(service)!r}"


def _remote_error(payload: bytes, what: str) -> Exception:
    try:
        detail = decode(payload)
        return RemoteError(str(detail["type"]), str(detail["message"]))
    except Exception:
        # Zenoh's own errors (a query timeout reported as an error reply) are plain text.
        text = payload.decode("utf-8", "replace")
        if "timeout" in text.lower():
            return TimeoutError(f"{what}: {text}")
        return RemoteError("ZError", text)


def connect(endpoint: str | None = None, *, timeout: float = 5.0) -> Client:
    """A `Client` of the mjfast server at `endpoint` (default `tcp/127.0.0.1:7447`)."""
    return Client(endpoint, timeout=timeout)
