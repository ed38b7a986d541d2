"""`--record DIR` of `run` and `serve`, and `mjfast replay` (SPEC §20); the recording itself is
`mjfast.interop.record.recorder`'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from mjfast.cli.errors import (
    EXIT_OK,
    EXIT_RUNTIME,
    CliError,
    bad_input_is_one_line,
    import_mjfast,
    one_line,
)


def start_recording(env: Any, args: argparse.Namespace, err: TextIO) -> Any:
    """`--record DIR`: the env's recording, or None without the option."""
    directory = getattr(args, "record", None)
    if directory is None:
        return None
    try:
        import mjfast.interop.record.recorder  # noqa: F401
        from mjfast.interop.ros2 import types  # noqa: F401
    except ImportError as error:
        raise CliError(one_line(str(error))) from error
    with bad_input_is_one_line():
        recording = env.record(directory)
    err.write(f"mjfast: recording to {directory}\n")
    return recording


def check_record_target(args: argparse.Namespace) -> None:
    """--record DIR must not exist: refused before the model loads, so nothing is written."""
    directory = getattr(args, "record", None)
    if directory is not None and Path(directory).exists():
        raise CliError(f"record: {directory} exists already; a recording goes into a new "
                       f"directory, nothing there was changed")


def replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import_mjfast()
    try:
        from mjfast.interop.record.recorder import replay
    except ImportError as error:
        raise CliError(one_line(str(error))) from error
    if args.view:
        from mjfast.view import viewer

        try:
            viewer.check_display()
        except viewer.NoDisplayError as error:
            raise CliError(str(error)) from error
    if not Path(args.bag).exists():
        raise CliError(f"recording not found: {args.bag}")
    with bad_input_is_one_line():
        realtime = 1.0 if args.view and args.realtime is None else args.realtime
        result = replay(args.bag, check=args.check, view=args.view, realtime=realtime)
    if not args.check:
        out.write(f"replayed {args.bag}\n")
        return EXIT_OK
    if result.first_difference is None:
        out.write(f"replay matches {result.states} states\n")
        return EXIT_OK
    out.write(f"replay differs at time {result.first_difference!r}: {result.detail} "
              f"({result.states} states matched before it)\n")
    return EXIT_RUNTIME
