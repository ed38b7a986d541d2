"""The CLI's exit statuses and its one kind of error: bad input or a failed run becomes one
`mjfast: error: ...` line (CliError), never a traceback. Owns the wording of that line only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """Bad input or a failed run: reported as one line, exit status `code`."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: str) -> str:
    """`text` as a single line: MuJoCo's and pybind11's messages span several."""
    from mjfast.sim.stats_table import one_line

    return one_line(text)


def import_mjfast() -> Any:
    try:
        import mjfast
    except ImportError as error:  # a missing or mismatched compiled core
        raise CliError(f"cannot import mjfast: {one_line(str(error))}") from error
    return mjfast


@contextmanager
def bad_input_is_one_line() -> Iterator[None]:
    mjfast = import_mjfast()
    try:
        yield
    except CliError:
        raise
    except (OSError, ValueError, mjfast.MjfastError) as error:
        # FileNotFoundError, a model that does not compile (ValueError), ConfigError, PluginError.
        message = one_line(str(error)) or type(error).__name__
        if isinstance(error, OSError) and error.filename and str(error.filename) not in message:
            message = f"{message}: {error.filename}"
        raise CliError(message) from error
