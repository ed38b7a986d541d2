"""Zenoh callbacks on mjfast's own threads, and the Zenoh sessions closed when the program ends.

zenoh-python runs a Python callable given to a subscriber or a queryable on a thread that it
starts and that is not a daemon: while that subscriber's session stays open, the interpreter
cannot exit (a script that ended without `bridge.close()` hung at its end). So every subscriber
and queryable of mjfast is declared with a channel instead, drained here by a daemon thread that
calls the callback with each item in turn, as Zenoh's own thread did. The thread ends when the
subscriber or queryable is undeclared or its session is closed.

A daemon thread must not be woken while the interpreter finalizes (Python ends it inside Zenoh's
native code, and the process aborts). So what owns these threads (a `Bridge`, a `BusServer`, a
`Client`) is closed when the main thread ends, in `threading`'s exit hook, before Python waits
for the non-daemon threads and long before it finalizes, and its threads are waited for there.
Envs are closed later, at `atexit` (`mjfast.sim.interrupts`): a non-daemon thread may still step
one, but what it talks to the network with is gone by then.

Used by the ROS 2 bridge (`mjfast.interop.ros2.bridge`) and the remote bus
(`mjfast.interop.remote`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import zenoh

__all__ = ["close_session", "close_when_the_program_ends", "declare_on_daemon_thread",
           "join_drains", "no_close_at_the_end"]

_log = logging.getLogger("mjfast")

# What may wait for the callback: when it is full, Zenoh's network thread waits (backpressure),
# as it does behind a slow callback of its own.
_CAPACITY = 4096

# How long the end of the program waits for one drain thread (a callback that never returns
# leaves it behind).
_JOIN_AT_EXIT_S = 2.0
# How long close_session retries while another thread's Zenoh call still holds the session.
_CLOSE_RETRY_S = 2.0

Declared = TypeVar("Declared")


class Closable(Protocol):
    def close(self) -> None: ...


_owners: weakref.WeakKeyDictionary[Closable, None] = weakref.WeakKeyDictionary()
_drains: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def close_when_the_program_ends(owner: Closable) -> None:
    """`owner` (whose Zenoh session feeds drain threads) is closed when the main thread ends,
    unless it is closed before."""
    _owners[owner] = None


def no_close_at_the_end(owner: Closable) -> None:
    """`owner` is closed: nothing to do for it when the program ends."""
    _owners.pop(owner, None)


def _close_the_owners() -> None:
    for owner in list(_owners):
        try:
            owner.close()
        except Exception:
            _log.exception("closing %r at the end of the program", owner)
    for thread in list(_drains):
        thread.join(_JOIN_AT_EXIT_S)


# threading's exit hook runs when the main thread ends, before the non-daemon threads are
# joined; CPython has had it since 3.9 (concurrent.futures uses it for the same reason).
getattr(threading, "_register_atexit", atexit.register)(_close_the_owners)


def close_session(session: Any) -> None:
    """Closes a Zenoh session, retrying for a moment while a Zenoh call on another thread still
    holds it (zenoh-python's "Already borrowed"). A close that Zenoh gave up waiting for (its
    "close operation timed out", after 10 s of its own tasks not ending: seen closing a client
    that four threads were calling with 800 KB messages, on a loaded machine) leaves the
    session closed to its users, and is said in the log, not raised: the caller's close has
    done what it can."""
    deadline = time.monotonic() + _CLOSE_RETRY_S
    while True:
        try:
            session.close()
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
        except zenoh.ZError as error:
            if not session.is_closed():
                raise
            _log.warning("closing a Zenoh session: %s (it is closed; what was in flight is "
                         "dropped)", error)
            return


def join_drains(threads: list[threading.Thread], timeout: float = _JOIN_AT_EXIT_S) -> None:
    """Waits (up to `timeout` in all) for drain threads whose channels are closed (undeclared,
    or the session closed) to deliver what was left in them and end."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def declare_on_daemon_thread(declare: Callable[[Any], Declared], callback: Callable[[Any], Any],
                             name: str, threads: list[threading.Thread] | None = None
                             ) -> Declared:
    """`declare(handler)` (a `session.declare_subscriber` or `declare_queryable` with its key
    bound) with a channel that a daemon thread called `name` drains into `callback`, one item at
    a time; returns what `declare` returned, and appends the thread to `threads` when given.
    What `callback` raises is logged, and the next item is delivered."""
    declared = declare(zenoh.handlers.FifoChannel(_CAPACITY))
    handler = declared.handler  # type: ignore[attr-defined]

    def drain() -> None:
        for item in handler:  # ends when the channel closes: undeclared, or the session closed
            try:
                callback(item)
            except BaseException:  # as on Zenoh's own thread: reported, and the next one comes
                _log.exception("%s: the callback raised", name)
            # Dropped now, not when the next item comes: a query's caller waits until it is.
            del item

    thread = threading.Thread(target=drain, name=name, daemon=True)
    thread.start()
    _drains.add(thread)
    if threads is not None:
        threads.append(thread)
    return declared
