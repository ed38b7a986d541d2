"""A log that says each kind of trouble at most once a period, with how many times it happened.

What comes from outside the env (ROS 2 messages, remote publishes, service calls) or runs on
every publish (bus subscribers, bus taps) can fail thousands of times a second; one log line per
failure buries the log (20,000 bad messages once wrote 19 MB of tracebacks). `ThrottledLog`
logs the first failure of a key (a topic, say) at once, counts the ones after it, and logs the
next one at least `period` seconds later with the count of those it left out. Totals per key
stay readable for statistics.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """Logs `report(key, ...)` at most once per `period` seconds per key (at `level`), each
    line after the first saying how many reports of that key it stands for."""

    def __init__(self, logger: logging.Logger, period: float = 1.0,
                 level: int = logging.WARNING) -> None:
        self._logger = logger
        self._period = period
        self._level = level
        self._lock = threading.Lock()  # a leaf of the lock order (src/_core/env_core.h)
        self._last: dict[Any, float] = {}  # key -> when its last line was logged (monotonic)
        self._unlogged: dict[Any, int] = {}  # key -> reports since that line
        self._totals: dict[Any, int] = {}

    def report(self, key: Any, message: str, *args: Any, exc_info: bool = False) -> None:
        """One failure of `key`: logged now (`message % args`), or counted for the next line.
        `exc_info`: the current exception's traceback goes with the line that is logged."""
        now = time.monotonic()
        with self._lock:
            self._totals[key] = self._totals.get(key, 0) + 1
            last = self._last.get(key)
            if last is not None and now - last < self._period:
                self._unlogged[key] = self._unlogged.get(key, 0) + 1
                return
            self._last[key] = now
            left_out = self._unlogged.pop(key, 0)
        if left_out:
            message += " (and %d more like it in the last %.0f s)"
            args = (*args, left_out, max(now - last, self._period))  # type: ignore[operator]
        # stacklevel: the line names the caller of report(), not this file.
        self._logger.log(self._level, message, *args, exc_info=exc_info or None, stacklevel=2)

    def total(self, key: Any) -> int:
        """How many times `key` was reported, logged or not."""
        with self._lock:
            return self._totals.get(key, 0)
