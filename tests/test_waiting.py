"""mjfast._waiting: a wait in the main thread that a signal received by another thread still
ends (the Ctrl-C case itself, in a child: tests/plugins/test_trajectory_controllers.py and the
`serve` and `view --web` tests)."""

from __future__ import annotations

import threading
import time

from mjfast._waiting import wait_interruptibly


def test_it_is_event_wait_set_or_timed_out() -> None:
    event = threading.Event()
    started = time.monotonic()
    assert wait_interruptibly(event, 0.25) is False
    assert time.monotonic() - started >= 0.25
    assert wait_interruptibly(event, 0.0) is False
    threading.Timer(0.05, event.set).start()
    assert wait_interruptibly(event) is True
    assert wait_interruptibly(event, 0.0) is True


def test_off_the_main_thread_it_waits_as_event_wait() -> None:
    event, got = threading.Event(), []
    worker = threading.Thread(target=lambda: got.append(wait_interruptibly(event, 10.0)))
    worker.start()
    event.set()
    worker.join(10.0)
    assert got == [True]
