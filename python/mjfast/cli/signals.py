"""Commands that run until SIGINT or SIGTERM (`serve`, `view --web`): the handlers for their run.
They wait for either with `mjfast._waiting.wait_interruptibly`, never an untimed wait (a signal
that the kernel hands to another thread was never handled, and `serve` ran on, about once in 25
SIGINTs under load).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


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
