"""The `mjfast` command line's arguments (SPEC §11, §15, §19, §20, §22): every command, its
options and their checks, as argparse parsers whose errors are one line. Runs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, NoReturn

from mjfast.cli.errors import EXIT_USAGE

DEFAULT_DURATION_S = 5.0


# SPEC §15's default endpoint, written here so that `--help` needs no Zenoh.
DEFAULT_ENDPOINT = "tcp/127.0.0.1:7447"
# `topic echo` says, once, that nothing has arrived after this long.
ECHO_SILENCE_S = 2.0
# SPEC §22's default address of the browser viewer (`--web` without a value): loopback only.
_DEFAULT_WEB = ("127.0.0.1", 8080)


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


def _add_model(parser: argparse.ArgumentParser, params_help: str | None) -> None:
    parser.add_argument("model", metavar="MODEL", help="path to an MJCF or URDF file")
    if params_help is not None:
        parser.add_argument("--params", metavar="FILE", help=params_help)
    parser.add_argument("--package-path", type=_package_path, action="append", default=[],
                        metavar="PKG=DIR",
                        help="where a URDF's package://PKG/... mesh URIs are (repeatable; after "
                             "the parameter package_paths, before ROS_PACKAGE_PATH and "
                             "AMENT_PREFIX_PATH)")


def _package_path(text: str) -> tuple[str, str]:
    """`--package-path PKG=DIR` (SPEC §24)."""
    package, equals, directory = text.partition("=")
    if not equals or not package.strip() or not directory.strip():
        raise argparse.ArgumentTypeError(f"expected PKG=DIR (a package name and its directory), "
                                         f"got {text!r}")
    return package.strip(), directory


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


def parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mjfast", description="MuJoCo simulation server with native-speed "
                                                "plugins.")
    parser.add_argument("--version", action="version", version=f"mjfast {version()}")
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

    export = commands.add_parser(
        "export-urdf", help="write a model as URDF",
        description="Write MODEL (MJCF or URDF) as a URDF whose forward kinematics equals "
                    "MuJoCo's body poses: a link per body under the root link world, a joint per "
                    "hinge and slide, visuals, collisions, materials and inertials; mesh "
                    "geometry as STL files in FILE's folder <stem>_meshes/ (without -o: the "
                    "URDF on stdout, the meshes in ~/.cache/mjfast/meshes).")
    _add_model(export, None)
    export.add_argument("-o", "--output", metavar="FILE",
                        help="write the URDF to FILE (default: stdout)")
    _add_verbosity(export, argparse.SUPPRESS)

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
    serve.add_argument("--listen", metavar="ENDPOINT", default=DEFAULT_ENDPOINT,
                       help=f"Zenoh endpoint to listen on (default {DEFAULT_ENDPOINT}; "
                            f"anything but loopback lets any client reload the model and move "
                            f"bodies)")
    _add_web_option(serve, "also serve")
    _add_ros2_options(serve)
    _add_record_option(serve)

    def connect_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--connect", metavar="ENDPOINT", default=DEFAULT_ENDPOINT,
                            help=f"the server's Zenoh endpoint (default {DEFAULT_ENDPOINT})")

    topic = commands.add_parser("topic", help="list, echo or publish topics of a server",
                                description="Topics of a running 'mjfast serve'.")
    topic_commands = topic.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    topic_commands.required = True
    connect_option(topic_commands.add_parser("list", help="topics published or subscribed"))
    echo = topic_commands.add_parser(
        "echo", help="print each message as one JSON line",
        description="Print each message on TOPIC as one line of strict JSON: arrays as lists, "
                    "NaN and infinities (which JSON has not) as null. Says so on stderr, once, "
                    f"when nothing has arrived after {ECHO_SILENCE_S:g} s.")
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


def version() -> str:
    from mjfast import __version__

    return __version__


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
