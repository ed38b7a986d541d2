"""mjfast's log records on the CLI's stderr, for one command: the level -v/-q ask for and the
`mjfast: warning: [plugin] message` line format.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from mjfast.cli.errors import one_line


class _LogFormatter(logging.Formatter):
    """`mjfast: warning: [pose_hold] message`: the CLI's line format, with the logger's name
    (a plugin's logger is `mjfast.<plugin name>`)."""

    def format(self, record: logging.LogRecord) -> str:
        name = record.name.removeprefix("mjfast.")
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: "
            message += f"{one_line(str(record.exc_info[1]))})"
        return f"mjfast: {record.levelname.lower()}: [{name}] {message}"


@contextmanager
def logging_to(stream: TextIO, verbose: int, quiet: int) -> Iterator[None]:
    """mjfast's loggers (plugins' included) to `stream` at the level -v/-q ask for, for the
    duration of the command only (main() may be called again in the same process)."""
    level = logging.WARNING - 10 * verbose + 10 * quiet
    level = min(max(level, logging.DEBUG), logging.CRITICAL)
    logger = logging.getLogger("mjfast")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_LogFormatter())
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
