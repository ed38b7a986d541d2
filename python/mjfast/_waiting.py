"""Waiting in Python's main thread so that a signal still gets through.

The kernel hands a signal sent to the process (Ctrl-C, `kill`) to any of its threads that does not
block it, not always the main one (Linux picks another when the main thread has a signal pending
already), and an mjfast program has many threads (the physics thread, Zenoh's, the writers'). On
another thread Python only notes the signal: its handler runs, and Ctrl-C's KeyboardInterrupt is
raised, when the main thread's interpreter loop next gets control, which an untimed
`Event.wait()` never gives back. So a wait in the main thread is made of short timed slices.
"""

from __future__ import annotations

import threading
import time

__all__ = ["wait_interruptibly"]

# How long a signal that another thread received may wait for its handler.
_SLICE_S = 0.1


def wait_interruptibly(event: threading.Event, timeout: float | None = None) -> bool:
    """`event.wait(timeout)`; on the main thread in slices of at most 0.1 s, between which the
    handlers of the signals received meanwhile run (and what they raise is raised)."""
    if threading.current_thread() is not threading.main_thread():
        return event.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
        if left <= 0:
            return event.is_set()
        if event.wait(left):
            return True
