"""The `mjfast` command line (SPEC §11, §15): `demo`, `run MODEL`, `plugins`, `view MODEL`,
`serve MODEL`, and `topic` / `service` against a running server.

Owns argument parsing, the progress display and the statistics table; everything it simulates
goes through `mjfast.MujocoEnv`. Bad input becomes one `mjfast: error: ...` line and a non-zero
exit status (2: usage, 1: runtime), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn, TextIO

__all__ = ["main"]

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

DEFAULT_DURATION_S = 5.0
# Wall time one chunk of env.step should take: short enough for a smooth progress bar, long
# enough that the per-call cost of stepping from Python stays negligible.
_CHUNK_WALL_S = 0.05
# SPEC §15's default endpoint, written here so that `--help` needs no Zenoh.
_DEFAULT_ENDPOINT = "tcp/127.0.0.1:7447"
# `topic echo` says, once, that nothing has arrived after this long.
_ECHO_SILENCE_S = 2.0
# SPEC §22's default address of the browser viewer (`--web` without a value): loopback only.
_DEFAULT_WEB = ("127.0.0.1", 8080)


class CliError(Exception):
    """Bad input or a failed run: reported as one line, exit status `code`."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str) -> str:
    """`text` as a single line: MuJoCo's and pybind11's messages span several."""
    from mjfast.stats_table import one_line

    return one_line(text)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"mjfast: error: {message} (see '{self.prog} --help')\n")


def _duration(text: str) -> float:
    """A positive number of simulated seconds, or `inf`: run until Ctrl-C."""
    if text.strip().lower() in ("inf", "infinity"):
        return math.inf
    return _positive_float(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _realtime_factor(text: str) -> float:
    """--realtime: a number, by the env's real-time factor rule (positive and finite)."""
    from mjfast._core_loader import _core

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    try:
        return float(_core.checked_realtime_factor(value))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_run_options(parser: argparse.ArgumentParser, *, steps: bool) -> None:
    length = parser.add_mutually_exclusive_group()
    if steps:
        length.add_argument("--steps", type=_positive_int, metavar="N",
                            help="number of physics steps to run")
    length.add_argument("--duration", type=_duration, metavar="S",
                        help=f"simulated seconds to run (default {DEFAULT_DURATION_S:g}); "
                             f"'inf' runs until Ctrl-C")
    parser.add_argument("--realtime", type=_realtime_factor, metavar="F",
                        help="pace the run to F x wall clock, ending at exactly the steps asked "
                             "for (default: step as fast as possible)")
    parser.add_argument("--no-progress", action="store_true",
                        help="show no progress display on stderr")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 if any plugin fails, to load or while stepping")


def _add_model(parser: argparse.ArgumentParser, params_help: str) -> None:
    parser.add_argument("model", metavar="MODEL", help="path to an MJCF or URDF file")
    parser.add_argument("--params", metavar="FILE", help=params_help)


def _add_live_run_options(parser: argparse.ArgumentParser) -> None:
    """The model of `view` and `serve`, which run it on the physics thread until told to stop."""
    _add_model(parser, "YAML parameter file")
    parser.add_argument("--realtime", type=_realtime_factor, metavar="F", default=1.0,
                        help="pace the physics thread to F x wall clock (default 1)")


def _add_verbosity(parser: argparse.ArgumentParser, default: object) -> None:
    # On the main parser and each command's, so `mjfast -v run ...` and `mjfast run ... -v` work;
    # the commands' default is SUPPRESS so that they do not reset a count given before them.
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="log more: -v info, -vv debug (plugin loggers included)")
    parser.add_argument("-q", "--quiet", action="count", default=default,
                        help="log less: errors only, and no progress display")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mjfast", description="MuJoCo simulation server with native-speed "
                                                "plugins.")
    parser.add_argument("--version", action="version", version=f"mjfast {_version()}")
    _add_verbosity(parser, 0)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser("demo", help="run the bundled 7-dof arm holding a pose",
                               description="Run the bundled demo: a 7-dof arm whose pose is held "
                                           "by the mjfast/PoseHoldPD plugin.")
    _add_run_options(demo, steps=False)
    demo.add_argument("--export", metavar="DIR",
                      help="write the demo's model (demo_arm.xml) and parameters (demo.yaml) "
                           "into DIR to start from, and run nothing")
    _add_verbosity(demo, argparse.SUPPRESS)

    run = commands.add_parser("run", help="run any MJCF/URDF model with its plugins",
                              description="Load MODEL, load the plugins configured under "
                                          "MujocoPlugins in --params, step it and print the "
                                          "statistics.")
    _add_model(run, "YAML parameter file (MujocoPlugins, initial_joint_positions, ...)")
    _add_run_options(run, steps=True)
    _add_record_option(run)
    _add_verbosity(run, argparse.SUPPRESS)

    plugins = commands.add_parser(
        "plugins", help="list the discovered plugin types",
        description="List the plugin types found through the mjfast.plugins entry points and "
                    "in-process registrations: kind (Python or native) and the distribution "
                    "that provides each; entry points that fail to import are flagged.")
    _add_verbosity(plugins, argparse.SUPPRESS)

    new = commands.add_parser(
        "new-plugin", help="write a ready-to-install plugin package",
        description="Write a plugin package NAME (a directory DIR/NAME) with one plugin class, "
                    "its entry point and a README: a Python plugin, or a native (C++) one "
                    "built with CMake against the installed mjfast.")
    new.add_argument("name", metavar="NAME",
                     help="the package name, a Python identifier such as my_robot")
    kind = new.add_mutually_exclusive_group(required=True)
    kind.add_argument("--python", dest="kind", action="store_const", const="python",
                      help="a Python MujocoPlugin")
    kind.add_argument("--native", dest="kind", action="store_const", const="native",
                      help="a C++ plugin compiled to a shared library")
    new.add_argument("--dir", metavar="DIR", default=".",
                     help="where to create the package directory (default: here)")
    new.add_argument("--class", dest="class_name", metavar="CLASS",
                     help="the plugin class (default: NAME in CamelCase)")
    _add_verbosity(new, argparse.SUPPRESS)
    _add_remote_commands(commands)

    replay = commands.add_parser(
        "replay", help="re-simulate a recording (--record, env.record)",
        description="Re-simulate the recording in DIR from its first state with its recorded "
                    "commands. --check compares every recorded state bit for bit: exit 0 and "
                    "'replay matches N states', or exit 1 naming the first time that differs.")
    replay.add_argument("bag", metavar="DIR", help="the recording's directory (a rosbag2 bag)")
    replay.add_argument("--check", action="store_true",
                        help="compare every recorded state bit for bit")
    replay.add_argument("--view", action="store_true",
                        help="show it in MuJoCo's viewer while it runs (paced at 1x unless "
                             "--realtime says otherwise)")
    replay.add_argument("--realtime", type=_positive_float, metavar="F",
                        help="pace it to F x wall clock (default: as fast as possible, or 1 "
                             "with --view)")
    _add_verbosity(replay, argparse.SUPPRESS)
    return parser


def _add_record_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", metavar="DIR",
                        help="record the run into DIR, a new rosbag2 bag (MCAP): the bridged "
                             "topics, /clock, the commands and a state every simulated second "
                             "(needs mjfast[ros2]; see `mjfast replay`)")


def _start_recording(env: Any, args: argparse.Namespace, err: TextIO) -> Any:
    """`--record DIR`: the env's recording, or None without the option."""
    directory = getattr(args, "record", None)
    if directory is None:
        return None
    try:
        import mjfast.recording  # noqa: F401
        from mjfast.ros2 import types  # noqa: F401
    except ImportError as error:
        raise CliError(_one_line(str(error))) from error
    with _bad_input_is_one_line():
        recording = env.record(directory)
    err.write(f"mjfast: recording to {directory}\n")
    return recording


def _check_record_target(args: argparse.Namespace) -> None:
    """--record DIR must not exist: refused before the model loads, so nothing is written."""
    directory = getattr(args, "record", None)
    if directory is not None and Path(directory).exists():
        raise CliError(f"record: {directory} exists already; a recording goes into a new "
                       f"directory, nothing there was changed")


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _import_mjfast()
    try:
        from mjfast.recording import replay
    except ImportError as error:
        raise CliError(_one_line(str(error))) from error
    if args.view:
        from mjfast import viewer

        try:
            viewer.check_display()
        except viewer.NoDisplayError as error:
            raise CliError(str(error)) from error
    if not Path(args.bag).exists():
        raise CliError(f"recording not found: {args.bag}")
    with _bad_input_is_one_line():
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


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON document, got {text!r} ({error})"
                                         ) from None


def _web_address(text: str) -> tuple[str, int]:
    """`--web [HOST:]PORT` (SPEC §22): the host defaults to loopback; IPv6 hosts in brackets."""
    host, colon, port = text.rpartition(":")
    host = host.strip("[]") if colon else ""
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected [HOST:]PORT with a port from 0 to 65535 "
                                         f"(e.g. :8080 or 127.0.0.1:8080), got {text!r}")
    return host or _DEFAULT_WEB[0], int(port)


def _add_web_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--web", type=_web_address, nargs="?", const=_DEFAULT_WEB,
                        metavar="[HOST:]PORT",
                        help=f"{what} the browser viewer (the extra mjfast[web]) on "
                             f"http://HOST:PORT/ (default {_DEFAULT_WEB[0]}:{_DEFAULT_WEB[1]}; "
                             f"a host other than loopback lets anyone who reaches it pause, "
                             f"step and reset the run)")


def _add_remote_commands(commands: Any) -> None:
    """`view`, `serve`, `topic` and `service` (SPEC §15)."""
    view = commands.add_parser("view", help="open MuJoCo's viewer on a running model",
                               description="Load MODEL with its plugins, run it and show it in "
                                           "MuJoCo's viewer: Space pauses and resumes, Right "
                                           "steps once while paused, Backspace resets. Closing "
                                           "the window stops the run and prints the statistics.")
    _add_live_run_options(view)
    _add_web_option(view, "instead of the window (no display needed), until SIGINT or SIGTERM, "
                          "serve")

    serve = commands.add_parser("serve", help="run a model and serve its bus over Zenoh",
                                description="Load MODEL with its plugins, run it, and make its "
                                            "bus reachable from other processes (topics both "
                                            "ways, services) until SIGINT or SIGTERM; then print "
                                            "the statistics.")
    _add_live_run_options(serve)
    serve.add_argument("--listen", metavar="ENDPOINT", default=_DEFAULT_ENDPOINT,
                       help=f"Zenoh endpoint to listen on (default {_DEFAULT_ENDPOINT}; "
                            f"anything but loopback lets any client reload the model and move "
                            f"bodies)")
    _add_web_option(serve, "also serve")
    _add_ros2_options(serve)
    _add_record_option(serve)

    def connect_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--connect", metavar="ENDPOINT", default=_DEFAULT_ENDPOINT,
                            help=f"the server's Zenoh endpoint (default {_DEFAULT_ENDPOINT})")

    topic = commands.add_parser("topic", help="list, echo or publish topics of a server",
                                description="Topics of a running 'mjfast serve'.")
    topic_commands = topic.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    topic_commands.required = True
    connect_option(topic_commands.add_parser("list", help="topics published or subscribed"))
    echo = topic_commands.add_parser(
        "echo", help="print each message as one JSON line",
        description="Print each message on TOPIC as one line of strict JSON: arrays as lists, "
                    "NaN and infinities (which JSON has not) as null. Says so on stderr, once, "
                    f"when nothing has arrived after {_ECHO_SILENCE_S:g} s.")
    echo.add_argument("topic", metavar="TOPIC")
    echo.add_argument("--count", type=_positive_int, metavar="N",
                      help="exit after N messages (default: until interrupted)")
    connect_option(echo)
    pub = topic_commands.add_parser("pub", help="publish one message on the server's bus")
    pub.add_argument("topic", metavar="TOPIC")
    pub.add_argument("message", metavar="JSON", type=_json_argument)
    connect_option(pub)

    service = commands.add_parser("service", help="list or call services of a server",
                                  description="Services of a running 'mjfast serve'.")
    service_commands = service.add_subparsers(dest="action", metavar="ACTION",
                                              parser_class=_Parser)
    service_commands.required = True
    connect_option(service_commands.add_parser("list", help="advertised services"))
    call = service_commands.add_parser(
        "call", help="call a service, print the reply as JSON",
        description="Call service NAME with the JSON request (none: null) and print the reply as "
                    "one line of strict JSON: arrays as lists, NaN and infinities as null.")
    call.add_argument("service", metavar="NAME")
    call.add_argument("request", metavar="JSON", type=_json_argument, nargs="?", default=None)
    call.add_argument("--timeout", type=_positive_float, metavar="S", default=5.0,
                      help="seconds to wait for the reply (default 5)")
    connect_option(call)


def _version() -> str:
    from mjfast import __version__

    return __version__


# -- progress ---------------------------------------------------------------------------------


class _Progress:
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


# -- logging ------------------------------------------------------------------------------------


class _LogFormatter(logging.Formatter):
    """`mjfast: warning: [pose_hold] message`: the CLI's line format, with the logger's name
    (a plugin's logger is `mjfast.<plugin name>`)."""

    def format(self, record: logging.LogRecord) -> str:
        name = record.name.removeprefix("mjfast.")
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: "
            message += f"{_one_line(str(record.exc_info[1]))})"
        return f"mjfast: {record.levelname.lower()}: [{name}] {message}"


@contextmanager
def _logging_to(stream: TextIO, verbose: int, quiet: int) -> Iterator[None]:
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


# -- running ------------------------------------------------------------------------------------


class _StrictFailure(Exception):
    """--strict: a plugin failed; the run stops and exits 1 after its statistics."""


def _import_mjfast() -> Any:
    try:
        import mjfast
    except ImportError as error:  # a missing or mismatched compiled core
        raise CliError(f"cannot import mjfast: {_one_line(str(error))}") from error
    return mjfast


@contextmanager
def _bad_input_is_one_line() -> Iterator[None]:
    mjfast = _import_mjfast()
    try:
        yield
    except CliError:
        raise
    except (OSError, ValueError, mjfast.MjfastError) as error:
        # FileNotFoundError, a model that does not compile (ValueError), ConfigError, PluginError.
        message = _one_line(str(error)) or type(error).__name__
        if isinstance(error, OSError) and error.filename and str(error.filename) not in message:
            message = f"{message}: {error.filename}"
        raise CliError(message) from error


def _model_files(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """MODEL and --params of `run`, `view` and `serve`."""
    return Path(args.model), Path(args.params) if args.params else None


def _make_env(model: Path, params: Path | None) -> Any:
    mjfast = _import_mjfast()
    if not model.is_file():
        raise CliError(f"model file not found: {model}")
    if params is not None and not params.is_file():
        raise CliError(f"parameter file not found: {params}")
    with _bad_input_is_one_line():
        return mjfast.MujocoEnv(model, params=params)


class _FailureReporter:
    """One `mjfast: warning:` line per failed plugin, the same wording whether it failed to load
    or while stepping, each plugin reported once; with `tracebacks` (-v), what the plugin raised
    follows it, indented."""

    def __init__(self, env: Any, warn: TextIO, strict: bool, tracebacks: bool = False) -> None:
        self._env = env
        self._warn = warn
        self._strict = strict
        self._tracebacks = tracebacks
        self._reported: set[tuple[str, str]] = set()
        self.failed = 0

    def report(self) -> None:
        fresh = []
        for info in self._env.plugins:
            failure = info.failure
            if failure is None or (info.name, failure.phase) in self._reported:
                continue
            self._reported.add((info.name, failure.phase))
            fresh.append(info.name)
            where = "to load" if failure.phase in _LOAD_PHASES else "while stepping"
            self._warn.write(f"mjfast: warning: plugin '{info.name}' ({info.type}) failed "
                             f"{where}, in {failure.phase}: {_one_line(failure.message)}\n")
            if self._tracebacks and failure.traceback:
                self._warn.write(textwrap.indent(failure.traceback.rstrip("\n"), "    ") + "\n")
        self.failed += len(fresh)
        if fresh and self._strict:
            raise _StrictFailure(f"plugin {', '.join(repr(n) for n in fresh)} failed (--strict)")


_LOAD_PHASES = frozenset(("factory", "load", "statistics", "activate"))


def _steps_taken(env: Any) -> int:
    return int(env.statistics()["env"]["steps"])


def _step_chunk(env: Any, n: int, failures: _FailureReporter) -> None:
    """env.step(n), where a plugin's failure is a warning: the host has marked the plugin FAILED
    and dispatches it no more, so the run goes on and the table shows the failure, as for a
    plugin that failed to load. The step that failed ends that call early."""
    mjfast = _import_mjfast()
    try:
        env.step(n)
    except mjfast.PluginError:
        failures.report()


def _step_as_fast_as_possible(env: Any, steps: float, progress: _Progress,
                              failures: _FailureReporter) -> None:
    timestep = float(env.model.opt.timestep)
    first = _steps_taken(env)
    done = 0
    chunk = 1
    while done < steps:
        n = int(min(chunk, steps - done))
        started = time.perf_counter()
        _step_chunk(env, n, failures)
        elapsed = time.perf_counter() - started
        done = _steps_taken(env) - first  # what ran, not what was asked for
        progress.update(done * timestep)
        # Aim each chunk at _CHUNK_WALL_S of wall time, growing at most 4x at a time.
        rate = n / elapsed if elapsed > 0 else float("inf")
        chunk = max(1, min(chunk * 4, int(min(rate * _CHUNK_WALL_S, 1e12)) or 1))


def _step_paced(env: Any, steps: float, realtime_factor: float, progress: _Progress,
                failures: _FailureReporter) -> None:
    """Exactly `steps` steps, each run no earlier than its wall-clock time at `realtime_factor`:
    stepped from this thread in chunks of what is due, so the run ends at `steps`, not at
    whatever a physics thread reached when it was told to stop."""
    timestep = float(env.model.opt.timestep)
    first = _steps_taken(env)
    started = time.perf_counter()
    done = 0
    while done < steps:
        due = int(min(steps, (time.perf_counter() - started) * realtime_factor / timestep))
        if due > done:
            _step_chunk(env, due - done, failures)
            done = _steps_taken(env) - first
            progress.update(done * timestep)
            continue
        # Ahead of the clock: wait until the next step is due (at most a progress tick).
        next_due = started + (done + 1) * timestep / realtime_factor
        time.sleep(min(_CHUNK_WALL_S, max(next_due - time.perf_counter(), 0.0)))


def _simulate(env: Any, steps: float, realtime: float | None, show_progress: bool,
              err: TextIO, failures: _FailureReporter) -> float:
    """Steps `env` `steps` times (inf: until Ctrl-C); returns the wall time it took."""
    timestep = float(env.model.opt.timestep)
    progress = _Progress(err if show_progress else None, steps * timestep)
    started = time.perf_counter()
    try:
        with _bad_input_is_one_line():
            if realtime is None:
                _step_as_fast_as_possible(env, steps, progress, failures)
            else:
                _step_paced(env, steps, realtime, progress, failures)
    finally:
        progress.close()
    return time.perf_counter() - started


def _steps_for(env: Any, steps: int | None, duration: float | None) -> float:
    if steps is not None:
        return steps
    if duration is not None and math.isinf(duration):
        return math.inf
    timestep = float(env.model.opt.timestep)
    return max(1, round((duration if duration is not None else DEFAULT_DURATION_S) / timestep))


# -- parameter file hints -------------------------------------------------------------------------


def _all_names(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}/{key}"
            yield name
            yield from _all_names(value, name)


def _missing_plugins_hint(env: Any, params: Path) -> str | None:
    """When `params` configures no plugins: where MujocoPlugins was looked for, and the keys of
    the file that are close to those names (`MujocoPlugin:`, `mujoco_sever:`)."""
    from mjfast.names import close_matches, suggestion

    if env.params.search(env.namespace, "MujocoPlugins") is not None:
        return None
    looked, namespace = [], env.namespace.rstrip("/")
    while True:
        looked.append(f"{namespace}/MujocoPlugins")
        if not namespace:
            break
        namespace = namespace.rpartition("/")[0]
    names = list(_all_names(env.params.to_dict("/")))
    close: list[str] = []
    for expected in looked:
        close += close_matches(expected, names, cutoff=0.8)
    close += [name for name in names
              if close_matches(name.rpartition("/")[2], ["MujocoPlugins"], cutoff=0.8)]
    close = list(dict.fromkeys(name.lstrip("/") for name in close))
    return (f"no MujocoPlugins in {params} (looked for {', '.join(looked)}): "
            f"no plugins are loaded{suggestion(close[:3])}")


# -- the statistics table -----------------------------------------------------------------------


def format_statistics(stats: dict[str, Any], wall_s: float | None = None, *,
                      running_s: float | None = None) -> str:
    """`env.statistics()` as the table the CLI prints (mjfast.format_statistics)."""
    from mjfast.stats_table import format_statistics as format_

    return format_(stats, wall_s, running_s=running_s)


def _print_statistics(env: Any, wall_s: float, out: TextIO, *,
                      pauses_excluded: bool = False) -> None:
    """The statistics table of a run that took `wall_s`, with the real-time factor of the whole
    run: a paced run waits between its steps, which the env's own figure (time spent stepping)
    leaves out. `pauses_excluded` (a run that could be paused, `mjfast view`): the env's own
    figure instead, simulated time over the time its physics thread ran (pacing waits included,
    pauses excluded), with that running time."""
    stats = env.statistics()
    if pauses_excluded:
        out.write(format_statistics(stats, wall_s, running_s=stats["env"]["elapsed_wall_s"])
                  + "\n")
        return
    if wall_s > 0:
        stats["env"]["realtime_factor"] = stats["env"]["simulated_s"] / wall_s
    out.write(format_statistics(stats, wall_s) + "\n")


# -- commands -------------------------------------------------------------------------------------


def _run(model: Path, params: Path | None, args: argparse.Namespace,
         out: TextIO, err: TextIO) -> int:
    _check_record_target(args)
    env = _make_env(model, params)
    strict = getattr(args, "strict", False)
    # -v: each failure's traceback; at -vv the host's debug log has printed it already.
    verbose = getattr(args, "verbose", 0) or 0
    tracebacks = verbose >= 1 and not logging.getLogger("mjfast.host").isEnabledFor(logging.DEBUG)
    failures = _FailureReporter(env, err, strict, tracebacks)
    try:
        if params is not None:
            hint = _missing_plugins_hint(env, params)
            if hint:
                err.write(f"mjfast: warning: {hint}\n")
        steps = _steps_for(env, getattr(args, "steps", None), args.duration)
        _start_recording(env, args, err)
        show_progress = not args.no_progress and not args.quiet
        started = time.perf_counter()
        try:
            failures.report()  # load failures, before the first step
            wall_s = _simulate(env, steps, args.realtime, show_progress, err, failures)
        except KeyboardInterrupt:
            # Ctrl-C: the statistics of what ran, then exit 130 (SPEC §18).
            err.write("\nmjfast: interrupted\n")
            _print_statistics(env, time.perf_counter() - started, out)
            return EXIT_INTERRUPTED
        except _StrictFailure as failure:
            _print_statistics(env, time.perf_counter() - started, out)
            raise CliError(str(failure)) from failure
        _print_statistics(env, wall_s, out)
    finally:
        env.close()
    return EXIT_OK


def _demo_files() -> tuple[Path, Path]:
    data = resources.files("mjfast") / "data"
    model, params = Path(str(data / "demo_arm.xml")), Path(str(data / "demo.yaml"))
    if not model.is_file() or not params.is_file():
        raise CliError(f"the demo files are missing from the installed package ({data}); "
                       f"reinstall mjfast")
    return model, params


def _export_demo(directory: Path, out: TextIO) -> int:
    model, params = _demo_files()
    targets = [directory / model.name, directory / params.name]
    existing = [str(target) for target in targets if target.exists()]
    if existing:
        raise CliError(f"not overwriting {', '.join(existing)}: remove it or choose another "
                       f"--export directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for source, target in zip((model, params), targets, strict=True):
            shutil.copyfile(source, target)
    except OSError as error:
        raise CliError(f"cannot write the demo into {directory}: {error.strerror or error}"
                       ) from error
    out.write(f"wrote {targets[0]} and {targets[1]}; run them with:\n"
              f"  mjfast run {targets[0]} --params {targets[1]}\n")
    return EXIT_OK


def _plugins(out: TextIO, err: TextIO) -> int:
    from mjfast.discovery import plugin_types

    _import_mjfast()
    types = plugin_types()
    if not types:
        out.write("no plugin types found\n")
        return EXIT_OK
    header = ["type", "kind", "distribution"]
    rows = [[t.name, t.kind if t.error is None else "BROKEN", t.distribution] for t in types]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
    for t in types:
        if t.error is not None:
            err.write(f"mjfast: warning: plugin type '{t.name}' ({t.distribution}): entry point "
                      f"'{t.value}' fails to import: {t.error}\n")
    return EXIT_OK


def _new_plugin(args: argparse.Namespace, out: TextIO) -> int:
    from mjfast.templates import write_plugin_package

    try:
        written = write_plugin_package(args.name, args.kind, Path(args.dir), args.class_name)
    except (ValueError, FileExistsError) as error:
        raise CliError(str(error)) from error
    except OSError as error:
        raise CliError(f"cannot write the package: {error}") from error
    out.write(written.summary() + "\n")
    return EXIT_OK


# -- viewer and remote access (SPEC §15) ----------------------------------------------------------


def _view(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.web is not None:  # the same page as `serve --web`, for a machine with no display
        return _view_web(args, out, err)
    try:
        from mjfast import viewer
    except ImportError as error:
        raise CliError(f"cannot import mjfast: {_one_line(str(error))}") from error
    try:
        viewer.check_display()
    except viewer.NoDisplayError as error:
        raise CliError(str(error)) from error
    env = _make_env(*_model_files(args))
    try:
        started = time.perf_counter()
        with _bad_input_is_one_line():
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
        _print_statistics(env, time.perf_counter() - started, out, pauses_excluded=True)
    finally:
        env.close()
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def _import_remote() -> Any:
    try:
        import mjfast.remote as remote
    except ImportError as error:
        raise CliError(f"remote access needs the extra mjfast[server] (pip install "
                       f"'mjfast[server]'): {_one_line(str(error))}") from error
    return remote


def _import_web() -> None:
    try:
        import mjfast.web  # noqa: F401
    except ImportError as error:
        raise CliError(_one_line(str(error))) from error  # the line names mjfast[web]


def _launch_web(env: Any, address: tuple[str, int], err: TextIO) -> Any:
    host, port = address
    try:
        page = env.launch_web_viewer(port=port, host=host)
    except OSError as error:  # the port is taken, or the host is not ours
        raise CliError(f"cannot serve the browser viewer on {host}:{port}: "
                       f"{_one_line(str(error))}") from error
    err.write(f"mjfast: browser viewer at {page.url}\n")
    err.flush()
    return page


def _view_web(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`mjfast view MODEL --web`: the run and its page until SIGINT or SIGTERM (exit 0, as
    `serve`: with no window to close, an interrupt is the normal way to stop)."""
    _import_web()
    env = _make_env(*_model_files(args))
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set())
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        started = time.perf_counter()
        with _bad_input_is_one_line():
            env.start(args.realtime)
        page = _launch_web(env, args.web, err)
        try:
            stop.wait()
            env.stop()
        finally:
            page.close()
        _print_statistics(env, time.perf_counter() - started, out)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        env.close()
    return EXIT_OK


def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    remote = _import_remote()
    if args.web is not None:
        _import_web()
    _check_record_target(args)
    env = _make_env(*_model_files(args))
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set())
                for signum in (signal.SIGINT, signal.SIGTERM)}
    bridge = None
    try:
        if args.ros2 and not _ros2_shares_bus_session(args):
            bridge = _start_ros2(args, env)  # no router: one line, before anything listens
        try:
            server = remote.BusServer(env, args.listen)
        except Exception as error:  # zenoh.ZError: a bad endpoint, or the port is taken
            if bridge is not None:
                bridge.close()
            raise CliError(f"cannot listen on {args.listen}: {_one_line(str(error))}"
                           ) from error
        if args.ros2 and bridge is None:
            bridge = _start_ros2(args, env, session=server._session)
        if bridge is not None:
            err.write(f"mjfast: ROS 2 node {env.namespace} on domain {bridge.domain_id} via "
                      f"{'its own router at ' if args.ros2_router else 'the router at '}"
                      f"{bridge.router}\n")
        started = time.perf_counter()
        page = None
        try:
            _start_recording(env, args, err)
            with _bad_input_is_one_line():
                env.start(args.realtime)
            page = _launch_web(env, args.web, err) if args.web is not None else None
            err.write(f"mjfast: serving {args.model} on {args.listen} (SIGINT or SIGTERM "
                      f"stops it)\n")
            err.flush()
            stop.wait()
        finally:
            if page is not None:
                page.close()
            if bridge is not None:
                bridge.close()  # before the server, which may own its session
            # The server first: it stops taking calls and cancels the `step` calls in progress
            # (their callers are told why), so that nothing steps the env while it stops.
            try:
                server.close()
            finally:
                env.stop()
        _print_statistics(env, time.perf_counter() - started, out)
        figures = server.statistics()
        out.write("\nremote bus\n" + "".join(
            f"  {name.replace('_', ' '):<22}{value:,}\n" for name, value in figures.items()))
        if bridge is not None:
            _print_ros2(bridge, out)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        env.close()
    return EXIT_OK


def _add_ros2_options(serve: argparse.ArgumentParser) -> None:
    """`serve --ros2 [--domain-id N] [--router ENDPOINT] [--ros2-router]` (SPEC §19)."""
    serve.add_argument("--ros2", action="store_true",
                       help="also put the env on a ROS 2 graph (rmw_zenoh, Jazzy) as a node")
    serve.add_argument("--domain-id", type=int, default=None, metavar="N",
                       help="ROS 2 domain id (default: ROS_DOMAIN_ID, else 0)")
    serve.add_argument("--router", metavar="ENDPOINT", default=None,
                       help="the Zenoh router of the ROS 2 graph (default tcp/127.0.0.1:7447)")
    serve.add_argument("--ros2-router", action="store_true",
                       help="be that router: listen on --router's endpoint, so that ROS 2 nodes "
                            "with rmw_zenoh's default configuration connect straight to mjfast")


def _ros2_shares_bus_session(args: argparse.Namespace) -> bool:
    """--ros2-router on the remote bus's own endpoint: its router session is the ROS 2 one."""
    return bool(args.ros2_router) and (args.router or _DEFAULT_ENDPOINT) == args.listen


def _start_ros2(args: argparse.Namespace, env: Any, session: Any = None) -> Any:
    try:
        from mjfast.ros2 import Bridge, RouterNotFound
    except ImportError as error:
        raise CliError(_one_line(str(error))) from error
    try:
        return Bridge(env, domain_id=args.domain_id, router=args.router,
                      listen=args.ros2_router, session=session)
    except RouterNotFound as error:
        raise CliError(str(error)) from error
    except (OSError, ValueError) as error:
        raise CliError(_one_line(str(error))) from error


def _print_ros2(bridge: Any, out: TextIO) -> None:
    figures = bridge.statistics()
    out.write(f"\nROS 2 (domain {bridge.domain_id}, router {bridge.router})\n" + "".join(
        f"  {name.replace('_', ' '):<22}{value:,}\n" for name, value in figures.items()))
    skipped = bridge.unbridged()
    if skipped:
        out.write("  not bridged (no ROS 2 type): " + ", ".join(skipped) + "\n")


def _as_json(value: Any) -> Any:
    """`value` as JSON types: arrays as (nested) lists, numpy scalars as numbers, bytes as lists
    of ints, non-finite floats (NaN, ±Infinity, which JSON has not) as null, keys as strings;
    anything else as its repr (a message from some other client may hold anything)."""
    import numpy as np

    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, np.ndarray) and (value.dtype.kind in "biu" or (
            value.dtype.kind == "f" and np.isfinite(value).all())):
        return value.tolist()  # nothing to replace: no walk through a camera frame's pixels
    if isinstance(value, (np.ndarray, np.generic)):
        return _as_json(value.tolist())
    if isinstance(value, dict):
        return {key if isinstance(key, str) else _dumps(key): _as_json(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    return repr(value)


def _dumps(value: Any) -> str:
    """One line of strict JSON (RFC 8259): see `_as_json`."""
    return json.dumps(_as_json(value), allow_nan=False)


@contextmanager
def _connected(endpoint: str) -> Iterator[Any]:
    """A client of the server at `endpoint` for one command, closed when it ends."""
    remote = _import_remote()
    try:
        client = remote.connect(endpoint)
    except ConnectionError as error:
        raise CliError(str(error)) from error
    try:
        yield client
    finally:
        client.close()


def _remote_call(action: Any) -> Any:
    """Runs `action()`, a remote call: a failure on the server, no server or no reply in time
    is one line."""
    mjfast = _import_mjfast()
    try:
        return action()
    except mjfast.RemoteError as error:
        raise CliError(_one_line(str(error))) from error
    except (ConnectionError, TimeoutError) as error:
        raise CliError(_one_line(str(error))) from error


def _print_names(names: Callable[[], Any], out: TextIO) -> int:
    """`topic list`, `service list`: the names the remote call `names()` returns, one a line."""
    for name in _remote_call(names):
        out.write(f"{name}\n")
    return EXIT_OK


def _checked_arguments(what: str, name: str, message: Any = None) -> None:
    """The name and message of a remote command can go over the bus: a usage error (one line,
    exit 2) before connecting if not."""
    _import_remote()
    from mjfast.remote import codec, keys

    try:
        keys.key(keys.TOPIC, name)
    except (TypeError, ValueError) as error:
        raise CliError(f"{what} {name!r}: {_one_line(str(error))}", EXIT_USAGE) from error
    try:
        codec.encode(message)
    except (TypeError, ValueError, OverflowError) as error:
        raise CliError(f"the JSON cannot go over the bus: {_one_line(str(error))}", EXIT_USAGE
                       ) from error


def _topic(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.action != "list":
        _checked_arguments("topic", args.topic, getattr(args, "message", None))
    with _connected(args.connect) as client:
        if args.action == "list":
            return _print_names(client.topics, out)
        if args.action == "pub":
            _remote_call(lambda: client.publish(args.topic, args.message))
            # A round trip after the put: the server has the message before the session closes.
            _remote_call(client.topics)
            return EXIT_OK
        return _echo(client, args.topic, args.count, out, err)


def _echo(client: Any, topic: str, count: int | None, out: TextIO, err: TextIO) -> int:
    received = threading.Semaphore(0)
    lock = threading.Lock()
    printed = [0]
    closed: list[OSError] = []  # the reader went (`| head -1`): the command ends

    def show(message: Any) -> None:
        line = _dumps(message) + "\n"
        with lock:
            if closed or (count is not None and printed[0] >= count):
                return
            try:
                out.write(line)
                out.flush()
            except OSError as error:  # on a Zenoh thread: handed to the command's thread
                closed.append(error)
            printed[0] += 1
        received.release()

    subscription = client.subscribe(topic, show)
    try:
        seen = 0
        waiting_since = time.monotonic()
        while count is None or seen < count:
            if received.acquire(timeout=0.2):  # a timed wait, so that Ctrl-C gets through
                seen += 1
                if closed:
                    raise closed[0]
            elif not seen and waiting_since is not None and \
                    time.monotonic() - waiting_since >= _ECHO_SILENCE_S:
                waiting_since = None  # said once
                err.write(f"mjfast: no message on {_absolute(topic)} yet"
                          f"{_publisher_hint(client, topic)}; still waiting (Ctrl-C stops)\n")
                err.flush()
    finally:
        subscription.close()
    return EXIT_OK


def _absolute(topic: str) -> str:
    from mjfast.params import resolve_name

    return resolve_name(topic)


def _publisher_hint(client: Any, topic: str) -> str:
    """`topic echo`'s word on a silent topic: whether the server knows it at all."""
    try:
        known = _absolute(topic) in client.topics(timeout=2.0)
    except Exception:  # only a hint
        return ""
    return "" if known else " (nothing on the server publishes or subscribes it)"


def _service(args: argparse.Namespace, out: TextIO) -> int:
    if args.action != "list":
        _checked_arguments("service", args.service, args.request)
    with _connected(args.connect) as client:
        if args.action == "list":
            return _print_names(client.services, out)
        reply = _remote_call(lambda: client.call(args.service, args.request, args.timeout))
        out.write(_dumps(reply) + "\n")
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    out, err = sys.stdout, sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code) if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        with _logging_to(err, args.verbose, args.quiet):
            if args.command == "plugins":
                return _plugins(out, err)
            if args.command == "new-plugin":
                return _new_plugin(args, out)
            if args.command == "view":
                return _view(args, out, err)
            if args.command == "serve":
                return _serve(args, out, err)
            if args.command == "replay":
                return _replay(args, out, err)
            if args.command == "topic":
                return _topic(args, out, err)
            if args.command == "service":
                return _service(args, out)
            if args.command == "demo":
                if args.export is not None:
                    return _export_demo(Path(args.export), out)
                model, params = _demo_files()
                return _run(model, params, args, out, err)
            return _run(*_model_files(args), args, out, err)
    except CliError as error:
        err.write(f"mjfast: error: {error}\n")
        return error.code
    except KeyboardInterrupt:
        err.write("\nmjfast: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `mjfast ... | head`: the reader left; say nothing more on a closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_RUNTIME
