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
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

from mjfast._throttled_log import ThrottledLog
from mjfast.bus.params import resolve_name
from mjfast.errors import LogicError
from mjfast.interop.remote import keys
from mjfast.interop.remote.codec import decode, encode
from mjfast.interop.zenoh_threads import (
    close_session,
    close_when_the_program_ends,
    declare_on_daemon_thread,
    no_close_at_the_end,
)
from mjfast.sim import services

__all__ = ["DEFAULT_ENDPOINT", "BusServer", "listen_error", "zenoh_config", "zenoh_error_text"]

DEFAULT_ENDPOINT = "tcp/127.0.0.1:7447"
# Service calls run on worker threads (each call holds one until its handler returns), started as
# calls come in and none is free, up to this many at once: a call past that many in progress is
# refused at once (a RemoteError saying so) rather than waiting behind calls that may never end.
_MAX_SERVICE_CALLS = 64
# close() waits this long, in all, for the calls in progress (a cancelled `step` ends within a
# chunk; a plugin's service that does not return is left behind, its reply dropped), and as long
# again for messages being put.
_CLOSE_WAIT_S = 2.0
# Services of the env's own (section 13) that only read, never wait for a step and run no plugin
# code: answered on the services queryable's own thread, without the hand-over to a worker (a
# thread wake-up, about a quarter of a round trip). Everything else may block (a `step`, a
# plugin's slow service, the plugins' statistics() that `statistics` calls) and goes to workers:
# that one thread takes every service query in turn.
_INLINE_SERVICES = frozenset({"info"})
# Zenoh's largest message (its default is 1 GiB): SPEC §15 has arrays of any size. Zenoh
# allocates per message received, not this much up front.
MAX_MESSAGE_SIZE = 1 << 40
_FRAGMENT_WAIT_US = 250_000
# The longest wait handed to Zenoh (a longer timeout, float("inf") included, waits this long: a
# million seconds, 11 days); Zenoh's own durations overflow past about 2**63 ns.
MAX_TIMEOUT_S = 1e6
# What a cancelled `step` call says (the caller sees it when the server shuts down).
_SHUTTING_DOWN = "the server is shutting down"

_log = logging.getLogger("mjfast.remote")


def zenoh_config(mode: str, endpoint: str, *, timeout: float | None = None) -> zenoh.Config:
    """A Zenoh configuration that uses `endpoint` only: listening on it (`router`) or connecting
    to it (`client`), with multicast scouting and gossip off, so nothing else is discovered."""
    config = zenoh.Config()
    config.insert_json5("mode", json.dumps(mode))
    config.insert_json5("scouting/multicast/enabled", "false")
    config.insert_json5("scouting/gossip/enabled", "false")
    config.insert_json5("transport/link/rx/max_message_size", json.dumps(MAX_MESSAGE_SIZE))
    # A message of many fragments (over one 64 KiB batch) waits up to this long (per fragment)
    # for room in a congested link before it is dropped (Zenoh's 50 ms drops large arrays even on
    # a loaded loopback); smaller messages keep Zenoh's 1 ms.
    config.insert_json5("transport/link/tx/queue/congestion_control/drop/"
                        "max_wait_before_drop_fragments", json.dumps(_FRAGMENT_WAIT_US))
    if mode == "client":
        config.insert_json5("connect/endpoints", json.dumps([endpoint]))
        config.insert_json5("listen/endpoints", "[]")
        if timeout is not None:
            config.insert_json5("connect/timeout_ms",
                                json.dumps(max(1, round(min(timeout, MAX_TIMEOUT_S) * 1000))))
    else:
        config.insert_json5("listen/endpoints", json.dumps([endpoint]))
        config.insert_json5("connect/endpoints", "[]")
    return config


def zenoh_error_text(error: BaseException) -> str:
    """Zenoh's error message without the Rust source locations (`at /root/.cargo/...rs:61.`)
    and the brackets it nests causes in."""
    text = _RUST_LOCATION.sub("", str(error))
    return " ".join(text.replace("[", "").replace("]", "").split()).rstrip(".")


_RUST_LOCATION = re.compile(r"\s*\bat \S+\.rs:\d+\.?")


def listen_error(endpoint: str, error: BaseException) -> str:
    """Why a server cannot listen on `endpoint`, in one line: a taken address said as such."""
    text = zenoh_error_text(error)
    if "address already in use" in text.lower():
        return (f"cannot listen on {endpoint}: the address is in use (something else listens "
                f"there: another mjfast serve, a Zenoh or ROS 2 router)")
    return f"cannot listen on {endpoint}: {text}"


class _Counters:
    """What the server did, for the statistics `mjfast serve` prints at the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = {"messages_out": 0, "messages_in": 0, "malformed": 0, "calls": 0,
                       "failed_calls": 0, "unencodable": 0}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.values[name] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.values)


def error_reply(error: BaseException) -> dict[str, str]:
    """The reply payload of a failed call: the exception's type name and message (a fallback text
    when the exception cannot be shown)."""
    name = type(error).__name__
    try:
        if isinstance(error, KeyError) and len(error.args) == 1:
            message = str(error.args[0])  # str(KeyError) quotes its message
        else:
            message = str(error)
    except BaseException as failure:  # a broken __str__, even one that exits
        message = (f"<the {name} could not be shown: its str() raised "
                   f"{type(failure).__name__}>")
    return {"type": name, "message": message}


def _caller_deadline(query: zenoh.Query, arrived: float) -> float | None:
    """When the caller stops waiting (monotonic), from the timeout that mjfast's client attaches
    to its queries; None for a caller that says nothing (or something unreadable)."""
    try:
        attachment = query.attachment
        if attachment is None:
            return None
        timeout = decode(attachment.to_bytes()).get("timeout")
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
            return arrived + min(float(timeout), 1e9)
    except Exception:  # another client's attachment: not ours to read
        pass
    return None


class BusServer:
    """Bridges `env.bus` to Zenoh on `endpoint` until `close()`; beside other consumers of the
    bus (bridges, recordings), in any order. A closed env is a `LogicError`."""

    def __init__(self, env: Any, endpoint: str = DEFAULT_ENDPOINT) -> None:
        if env.closed:
            raise LogicError("BusServer: the env is closed; serve an open env")
        self._env = env
        self._bus = env.bus
        self.endpoint = endpoint
        self._counters = _Counters()
        # A bad remote publish says so once a second per topic, with the count (SPEC §18).
        self._rejected = ThrottledLog(_log)
        self._publishers: dict[str, zenoh.Publisher] = {}
        self._publishers_lock = threading.Lock()
        self._closed = False
        # Guards _closed, the worker pool's state and the count of messages being put; close()
        # waits on it for those puts (a put racing the session's close is "Already borrowed").
        self._state = threading.Condition()
        self._forwarding = 0
        self._session_closed = threading.Event()
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._service_queries: queue.SimpleQueue[tuple[zenoh.Query, float] | None] = \
            queue.SimpleQueue()
        try:
            self._session = zenoh.open(zenoh_config("router", endpoint))
        except zenoh.ZError as error:
            raise OSError(listen_error(endpoint, error)) from error
        try:
            session = self._session
            subscriber = declare_on_daemon_thread(
                lambda handler: session.declare_subscriber(f"{keys.PUBLISH}/**", handler),
                self._on_remote_publish, "mjfast-remote-publish")
            # Service queries are handed to worker threads through a queue: a call that takes
            # long holds one worker, never the queryable's thread. The server's queries (alive,
            # services, topics, latest) and the read-only services above are answered at once.
            services = declare_on_daemon_thread(
                lambda handler: session.declare_queryable(f"{keys.SERVICE}/**", handler),
                self._on_service_query, "mjfast-remote-services")
            server = declare_on_daemon_thread(
                lambda handler: session.declare_queryable(f"{keys.SERVER}/**", handler),
                lambda query: self._answer(query, self._server_request), "mjfast-remote-server")
        except BaseException:
            self._session.close()
            raise
        self._declared = [subscriber, services, server]
        # Every publish on the env's bus, by plugins or user code, is forwarded, after its
        # delivery in the env (a tap on the bus, removed on close), by the tap's writer thread:
        # the publishing thread only hands it over (the newest per topic kept when the writer
        # falls behind, counted in statistics()["dropped"]).
        self._tap = self._bus.add_tap(self._forward_message, latched=False,
                                      handoff="keep_newest")
        close_when_the_program_ends(self)

    # -- topics ---------------------------------------------------------------------------------

    def _forward_message(self, topic: str, message: Any) -> None:
        with self._state:
            if self._closed:
                return
            self._forwarding += 1
        try:
            self._forward(topic, message)
        finally:
            with self._state:
                self._forwarding -= 1
                if not self._forwarding:
                    self._state.notify_all()

    def _forward(self, topic: str, message: Any) -> None:
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
            self._counters.add("malformed")
            self._rejected.report(str(sample.key_expr), "ignored a remote publish on %s: %s",
                                  sample.key_expr, error)
            return
        self._counters.add("messages_in")
        try:
            self._bus.publish_inbound(topic, message)  # a command, while the env records
        except Exception as error:  # the bus refused it (a bad topic name)
            self._counters.add("malformed")
            self._rejected.report(topic, "ignored a remote publish on %s: %s", topic, error)

    # -- services -------------------------------------------------------------------------------

    def _on_service_query(self, query: zenoh.Query) -> None:
        arrived = time.monotonic()
        try:
            namespace, _, name = keys.bus_name(keys.SERVICE, str(query.key_expr)).rpartition("/")
            inline = name in _INLINE_SERVICES and namespace == self._env.namespace.rstrip("/")
        except Exception:  # a malformed key: a worker answers it with the error
            inline = False
        if inline:
            self._answer(query, self._call_service)
            return
        refusal = None
        with self._state:
            if self._closed:
                refusal = _SHUTTING_DOWN
            elif self._idle_workers:
                self._idle_workers -= 1  # that worker takes this query
            elif len(self._workers) < _MAX_SERVICE_CALLS:
                worker = threading.Thread(target=self._serve_queries, daemon=True,
                                          name=f"mjfast-remote-service-{len(self._workers)}")
                worker.start()
                self._workers.append(worker)
            else:
                refusal = (f"the server is busy: {_MAX_SERVICE_CALLS} service calls are in "
                           f"progress; call again when one has finished")
        if refusal is not None:
            self._reply_error(query, RuntimeError(refusal))
            return
        self._service_queries.put((query, arrived))

    def _serve_queries(self) -> None:
        while True:
            item = self._service_queries.get()
            if item is None:  # close()
                return
            query, arrived = item
            deadline = _caller_deadline(query, arrived)

            def reason(deadline: float | None = deadline) -> str | None:
                if self._closed:
                    return _SHUTTING_DOWN
                if deadline is not None and time.monotonic() > deadline:
                    return "the caller stopped waiting (its timeout passed)"
                return None

            try:
                with services.cancellable(reason):
                    self._answer(query, self._call_service)
            except BaseException:  # _answer replies to everything; never die
                _log.exception("remote service worker")
            # Dropping the query tells the caller that no more replies come: before waiting.
            del query, item
            with self._state:
                self._idle_workers += 1

    def _answer(self, query: zenoh.Query, handler: Callable[[str, Any], Any]) -> None:
        """Answers `query` with what `handler` returns, or with the error it raised, whatever it
        raised (SystemExit and KeyboardInterrupt included: they end this call, not the thread)."""
        try:
            payload = query.payload
            request = decode(payload.to_bytes()) if payload is not None and len(payload) else None
            reply = encode(handler(str(query.key_expr), request))
        except BaseException as error:  # every outcome is a reply
            self._counters.add("failed_calls")
            self._reply_error(query, error)
            return
        try:
            query.reply(query.key_expr, reply)
        except Exception:  # the caller or the session has gone
            return

    @staticmethod
    def _reply_error(query: zenoh.Query, error: BaseException) -> None:
        try:
            query.reply_err(encode(error_reply(error)))
        except Exception:  # the caller or the session has gone
            return

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
        """Messages sent out and received (and remote publishes refused as malformed), service
        calls answered and failed; `dropped`: messages a newer one on the same topic replaced
        before they went out."""
        counts = self._counters.snapshot()
        counts["dropped"] = self._tap.statistics()["dropped"]
        return counts

    def close(self) -> None:
        """Stops forwarding, ends the calls in progress (a `step` call is cancelled at its next
        chunk and answered with InterruptedError) and closes the session, freeing the endpoint;
        idempotent. Returns within a few seconds whatever the calls in progress do."""
        with self._state:
            closing = self._closed
            self._closed = True  # no new forward, no new call; running `step` calls stop
            workers = [worker for worker in self._workers
                       if worker is not threading.current_thread()]  # a handler closing us
        if closing:  # closed, or being closed on another thread: returns once it is
            self._session_closed.wait(_CLOSE_WAIT_S * 3)
            return
        try:
            self._tap.remove()
            for entity in self._declared:
                with contextlib.suppress(Exception):
                    entity.undeclare()
            for _ in workers:
                self._service_queries.put(None)
            deadline = time.monotonic() + _CLOSE_WAIT_S
            for worker in workers:
                worker.join(max(0.0, deadline - time.monotonic()))
            busy = sum(worker.is_alive() for worker in workers)
            if busy:
                _log.warning("%d remote service call(s) still running at close: their replies "
                             "are dropped", busy)
            with self._state:
                self._state.wait_for(lambda: not self._forwarding, _CLOSE_WAIT_S)
            with self._publishers_lock:
                publishers, self._publishers = list(self._publishers.values()), {}
            for publisher in publishers:
                with contextlib.suppress(Exception):
                    publisher.undeclare()
        finally:
            try:
                close_session(self._session)  # frees the endpoint
            finally:
                self._session_closed.set()
                no_close_at_the_end(self)

    def __enter__(self) -> BusServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
