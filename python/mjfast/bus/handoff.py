"""A bus tap whose consumer runs on a writer thread: the publishing thread (the physics thread,
for a plugin's publish) only hands the message's reference to a bounded, preallocated ring in the
core (`_core.HandoffRing`) and goes on; the writer thread takes it and converts, serialises and
sends (the ROS 2 bridge, a recording, the remote bus's topic forwarding).

Owns the ring, the writer thread and their figures. What a full ring does is the consumer's
choice: `keep_newest` (the bridge, the remote bus: never makes the publisher wait, keeps the
newest message per topic as a keep-last QoS does, counts the rest in `dropped`) or `wait` (a
recording: nothing is lost, the publisher waits for the writer and the waits are counted). It
does not know what the consumer does with a message.

`inline_topics` (a writer's tap): messages on these topics that a thread outside any plugin
callback publishes while nothing waits in the ring are delivered by that thread itself, with no
hand-over (a writer's wake-up, the GIL passed back and forth, a slot that keep_newest may give to
a newer message): for rare messages that should go out soon and not be replaced (an action's
status arrays, published by the thread that accepts, cancels or ends a goal). A plugin
callback's publish (the stepping thread's) is always handed over, and so is a message published
while others wait. The writer takes and delivers under the tap's delivery lock, and an inline
publisher delivers under it only when the ring is empty, so that the messages of a topic go out
in the order they were published.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mjfast._core_loader import _core
from mjfast._throttled_log import ThrottledLog

if TYPE_CHECKING:
    from mjfast.bus.node import Bus

__all__ = ["HANDOFF_POLICIES", "HandedOffTap"]

HANDOFF_POLICIES = ("keep_newest", "wait")
# Slots of a ring: at 1 kHz a writer that falls 256 ms behind starts to drop (keep_newest) or to
# hold the publisher (wait). A slot is a reference, so the ring costs a few KiB.
DEFAULT_CAPACITY = 256
# How long the writer waits for a message before it looks whether the tap was removed.
_IDLE_S = 0.1
# The share of its time a keep_newest writer that has fallen behind spends converting and
# sending (it sleeps the rest, the GIL released): the publishing thread keeps the remainder.
_BEHIND_DUTY = 0.05
_BEHIND_SLEEP_S = 0.005

_log = logging.getLogger("mjfast.bus")


class HandedOffTap:
    """A tap (`Bus.add_tap(function, handoff=...)`) whose `function(topic, message)` runs on a
    writer thread of its own, or, with `writer=False`, on whoever calls `take()` (a consumer with
    a loop of its own). `stamp()` (optional) is called on the publishing thread for each message
    and handed over with it (a recording's simulated time of the publish).

    `packed_route(topic)` (optional, with `writer=False`; a recording's): called on the
    publishing thread, it returns a route for a message the core is to pack there, or None. Such
    a message is packed as it is handed over (`_core.HandoffRing.push_packed`, log time
    `offset_ns` + its stamp), and `take()` hands runs of them over as blocks: the consumer then
    needs the GIL for none of their packing, which the publishing thread, holding the GIL for
    its Python plugins every step, would wait for.

    `remove()` (also `close()`) ends it: no message is handed over afterwards, and the writer
    delivers what was waiting, then ends; both idempotent. `statistics()` counts what was handed
    over, dropped and waited for."""

    def __init__(self, bus: Bus, function: Callable[..., Any] | None, *, policy: str,
                 latched: bool = True, capacity: int = DEFAULT_CAPACITY,
                 stamp: Callable[[], float] | None = None, writer: bool = True,
                 name: str = "mjfast-tap-writer",
                 packed_route: Callable[[str], Any] | None = None, offset_ns: int = 0) -> None:
        if policy not in HANDOFF_POLICIES:
            raise ValueError(f"handoff must be one of {', '.join(HANDOFF_POLICIES)}, got "
                             f"{policy!r}")
        if writer and not callable(function):
            raise TypeError(f"a bus tap must be callable, got {function!r}")
        if writer and packed_route is not None:
            raise ValueError("packed_route is for a tap without a writer (its take() hands the "
                             "packed messages over as blocks)")
        self.function = function
        self.policy = policy
        self.failures = 0
        # Replaced, never changed: read unlocked by every publish (a frozenset of bus topics).
        self.inline_topics: frozenset[str] = frozenset()
        self._inline = 0
        # Held while one message is delivered, by the writer (take and delivery) or by an inline
        # publisher (see the module's docstring); reentrant, for a function that publishes.
        self._delivering = threading.RLock()
        self._ring = _core.HandoffRing(capacity, policy)
        # The stamp and the packed route are asked for by the ring's hand_over, in the core.
        self._ring.set_hand_over(stamp, packed_route, int(offset_ns))
        self._failed = ThrottledLog(_log)
        self._thread: threading.Thread | None = None
        if writer:
            self._thread = threading.Thread(target=self._write_loop, daemon=True, name=name)
            self._thread.start()
        # What the bus calls on the publishing thread for every message: a writer's tap looks at
        # its inline topics first; a tap without a writer (a recording's) is the ring's
        # hand_over itself, with no Python frame between the bus and the core.
        self._function = self._hand_over if writer else self._ring.hand_over
        # Last: from here on every publish (and, with `latched`, each kept message now) is handed.
        self._tap = bus.add_tap(self._function, latched=latched)

    @property
    def active(self) -> bool:
        return self._tap.active

    def _hand_over(self, topic: str, message: Any) -> None:
        # A writer's tap, on the publishing thread: a message of an inline topic delivered here,
        # else the ring's hand_over (a reference into the ring, or the message packed; waiting
        # for room only with policy "wait", the GIL released meanwhile).
        if topic in self.inline_topics and not _core.in_plugin_callback():
            with self._delivering:
                # Nothing of this topic can be ahead of it (and a removed tap's ring is closed).
                if self._ring.waiting == 0 and not self._ring.closed:
                    self._inline += 1
                    self._deliver(topic, message)
                    return
        self._ring.hand_over(topic, message)

    def take(self, timeout: float = 0.0, limit: int = 64) -> list[tuple[Any, ...]]:
        """Up to `limit` waiting items, oldest first, waiting up to `timeout` seconds for the
        first (the GIL released); for a consumer without the writer thread. An item is (topic,
        message, stamp), or a run of packed messages (see `packed_route`) as one block (None,
        routes, counts, data), as `_core.pack_direct` makes them."""
        return self._ring.take(limit, timeout)

    def _write_loop(self) -> None:
        ring = self._ring
        keep_newest = self.policy == "keep_newest"
        behind = max(1, ring.capacity // 2)
        clock, sleep = time.perf_counter, time.sleep
        delivering, deliver = self._delivering, self._deliver
        while True:
            # One message at a time: each wait releases the GIL, so the publishing thread
            # (whose plugins need it every step) never waits behind a batch of conversions. The
            # wait is outside the delivery lock, the take and the delivery under it.
            if not ring.wait_ready(_IDLE_S):
                if ring.closed:
                    return
                continue
            start = clock()
            with delivering:
                items = ring.take(1, 0.0)
                if items:
                    deliver(items[0][0], items[0][1])
            if keep_newest and ring.waiting >= behind and not ring.closed:
                # Behind (half the ring waits): the publisher outpaces this writer for good (a
                # simulation faster than real time), not for a moment. What waits will be
                # replaced by newer messages anyway; converting it at full speed would only take
                # the GIL from the publishing thread, whose plugins need it every step. So the
                # writer keeps to _BEHIND_DUTY of the time, and the newest message of each topic
                # goes out when it comes back. (At most _BEHIND_SLEEP_S: a single large message,
                # slow to send, is no stream to pace.)
                sleep(min((clock() - start) * (1.0 - _BEHIND_DUTY) / _BEHIND_DUTY,
                          _BEHIND_SLEEP_S))

    def _deliver(self, topic: str, message: Any) -> None:
        function = self.function
        assert function is not None
        try:
            function(topic, message)
        except Exception:
            self.failures += 1
            self._failed.report(("tap", topic), "tap %r raised on topic %s (its writer goes on)",
                                function, topic, exc_info=True)

    def hand_over(self, topic: str, message: Any) -> None:
        """Hands `message` to the consumer as if it had been published on `topic` now (what a
        consumer must not miss again: the latched messages after a reload)."""
        self._function(topic, message)

    def publish(self, topic: str, message: Any) -> None:
        """Publishes on the bus for every subscriber and every tap but this one."""
        self._tap.publish(topic, message)

    def statistics(self) -> dict[str, int]:
        """`handed` (messages handed to the writer), `inline` (delivered by their publisher:
        `inline_topics`), `dropped` (replaced by a newer one of the same topic, or the oldest
        displaced, by a full keep_newest ring), `waits` (publishes that waited for room in a
        full wait ring), `waiting` (not taken yet), `failures`."""
        ring = self._ring
        return {"handed": int(ring.pushed), "inline": self._inline,
                "dropped": int(ring.dropped), "waits": int(ring.waits),
                "waiting": int(ring.waiting), "failures": self.failures}

    def remove(self, timeout: float | None = None) -> None:
        """Ends the tap; the writer delivers what waits, then ends (joined here, unless this is
        the writer thread itself)."""
        self._tap.remove()
        self._ring.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    close = remove

    def __repr__(self) -> str:
        return f"<HandedOffTap {self.function!r} {self.policy} " \
               f"{'active' if self.active else 'removed'}>"
