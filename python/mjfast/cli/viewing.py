"""`mjfast view` (SPEC §15, §22): MuJoCo's viewer window on a running model, or the browser
viewer with `--web`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from mjfast._waiting import wait_interruptibly
from mjfast.cli.errors import EXIT_INTERRUPTED, EXIT_OK, CliError, bad_input_is_one_line, one_line
from mjfast.cli.running import make_env, model_files, print_statistics
from mjfast.cli.signals import stop_on_signals


def view(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.web is not None:  # the same page as `serve --web`, for a machine with no display
        return _view_web(args, out, err)
    try:
        from mjfast.view import viewer
    except ImportError as error:
        raise CliError(f"cannot import mjfast: {one_line(str(error))}") from error
    try:
        viewer.check_display()
    except viewer.NoDisplayError as error:
        raise CliError(str(error)) from error
    env = make_env(*model_files(args))
    try:
        started = time.perf_counter()
        with bad_input_is_one_line():
            env.start(args.realtime)
        try:
            window = env.launch_viewer()
        except viewer.NoDisplayError as error:
            raise CliError(str(error)) from error
        interrupted = False
        try:
            while not window.wait(0.2):  # a timed wait, so that Ctrl-C gets through
                pass
        except KeyboardInterrupt:
            interrupted = True
            err.write("\nmjfast: interrupted\n")
            window.close()
        env.stop()
        # Time paused from the window (Space) is not running time.
        print_statistics(env, time.perf_counter() - started, out, pauses_excluded=True)
    finally:
        env.close()
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def import_web() -> None:
    try:
        import mjfast.view.web  # noqa: F401
    except ImportError as error:
        raise CliError(one_line(str(error))) from error  # the line names mjfast[web]


def launch_web(env: Any, address: tuple[str, int], err: TextIO) -> Any:
    host, port = address
    try:
        page = env.launch_web_viewer(port=port, host=host)
    except OSError as error:  # the port is taken, or the host is not ours
        raise CliError(f"cannot serve the browser viewer on {host}:{port}: "
                       f"{one_line(str(error))}") from error
    err.write(f"mjfast: browser viewer at {page.url}\n")
    err.flush()
    return page


def _view_web(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`mjfast view MODEL --web`: the run and its page until SIGINT or SIGTERM (exit 0, as
    `serve`: with no window to close, an interrupt is the normal way to stop)."""
    import_web()
    env = make_env(*model_files(args))
    try:
        with stop_on_signals() as stop:
            started = time.perf_counter()
            with bad_input_is_one_line():
                env.start(args.realtime)
            page = launch_web(env, args.web, err)
            try:
                wait_interruptibly(stop)
                env.stop()
            finally:
                page.close()
            print_statistics(env, time.perf_counter() - started, out)
    finally:
        env.close()
    return EXIT_OK
