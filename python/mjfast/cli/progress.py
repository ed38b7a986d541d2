"""The progress display of `mjfast run` and `demo` on stderr: a bar on a terminal, one plain
line per wall-clock second elsewhere.
"""

from __future__ import annotations

import math
import time
from typing import TextIO


class Progress:
    """A progress bar on a terminal; elsewhere one plain line per wall-clock second. With no
    end (`--duration inf`), the simulated time so far instead of a bar."""

    _WIDTH = 30

    def __init__(self, stream: TextIO | None, total_s: float) -> None:
        self._stream = stream
        self._total = total_s
        self._tty = stream is not None and stream.isatty()
        self._started = time.perf_counter()
        self._last_line = self._started

    def update(self, done_s: float) -> None:
        if self._stream is None:
            return
        now = time.perf_counter()
        wall = now - self._started
        if math.isinf(self._total):
            if self._tty:
                self._stream.write(f"\rsim {done_s:9.2f} s  wall {wall:7.2f} s  (Ctrl-C stops)")
                self._stream.flush()
            elif now - self._last_line >= 1.0:
                self._last_line = now
                self._stream.write(f"mjfast: sim {done_s:.2f} s, wall {wall:.2f} s\n")
                self._stream.flush()
            return
        fraction = min(1.0, done_s / self._total) if self._total > 0 else 1.0
        if self._tty:
            filled = round(fraction * self._WIDTH)
            bar = "#" * filled + "-" * (self._WIDTH - filled)
            self._stream.write(f"\r[{bar}] {fraction:4.0%}  sim {done_s:7.2f}/{self._total:.2f} s"
                               f"  wall {wall:6.2f} s")
            self._stream.flush()
        elif now - self._last_line >= 1.0:
            self._last_line = now
            self._stream.write(f"mjfast: {fraction:.0%} (sim {done_s:.2f}/{self._total:.2f} s)\n")
            self._stream.flush()

    def close(self) -> None:
        if self._stream is not None and self._tty:
            self._stream.write("\n")
            self._stream.flush()
