"""What the shipped SPEC §23 controllers share: the monitor thread that waits for the compiled
controller's event counts (goals ended, feedback and state copies) to change and hands each
change to the plugin. The per-step work stays in the core; what a change means is each plugin's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["POLL_S", "watch_events"]

# The monitor thread looks at the copies this often (wall time); a goal's end wakes it at once.
POLL_S = 0.01

Counts = tuple[int, int, int]


def watch_events(core: Any, handle: Callable[[Counts, Counts], None],
                 stopping: Callable[[], bool], name: str, log: logging.Logger) -> None:
    """Runs until `stopping()`: waits up to POLL_S for `core`'s counts to move past those seen,
    then calls `handle(seen, counts)`. A failure of `handle` (a bus subscriber's, say) is logged
    under `name` and does not end the monitor."""
    seen: Counts = (0, 0, 0)
    while not stopping():
        counts = core.wait(seen, POLL_S)
        if stopping():
            return
        if counts == seen:
            continue
        try:
            handle(seen, counts)
        except Exception:
            log.exception("%s: handling the controller's events failed", name)
        seen = counts
