"""Commands that run until SIGINT or SIGTERM (`serve`, `view --web`): the wait for either.

The kernel hands a signal sent to the process to any of its threads that does not block it, not
always the main one (Linux picks another when the main thread has a signal pending already), and
the program has many threads (Zenoh's, the physics thread, the bridges' writers). Python then
only notes the signal; its handler runs when the main thread's interpreter loop next gets
control. An untimed `Event.wait()` in the main thread is woken by nothing but the event, so such
a signal was never handled and the command ran on (a `serve` that ignored SIGINT about once in 25
under load). The wait here is in short timed slices, each of which returns to the interpreter.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# How long a signal delivered to another thread may wait for its handler.
_SLICE_S = 0.1


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event that SIGINT or SIGTERM sets, for the block's duration (the handlers before it are
    put back at its end)."""
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set())
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wait_until_set(stop: threading.Event) -> None:
    """Returns once `stop` is set, running the handler of a signal whichever thread got it."""
    while not stop.wait(_SLICE_S):
        pass
