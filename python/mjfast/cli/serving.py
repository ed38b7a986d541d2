"""`mjfast serve` (SPEC §15, §19): a running model's bus served over Zenoh, optionally on a ROS 2
graph, a browser viewer and a recording beside it, until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import re
import socket
import threading
import time
from typing import Any, TextIO

from mjfast._waiting import wait_interruptibly
from mjfast.cli.errors import EXIT_OK, CliError, bad_input_is_one_line, one_line
from mjfast.cli.parsing import DEFAULT_ENDPOINT
from mjfast.cli.recording import check_record_target, start_recording
from mjfast.cli.remote import import_remote
from mjfast.cli.running import make_env, model_files, print_statistics
from mjfast.cli.signals import stop_on_signals
from mjfast.cli.viewing import import_web, launch_web


def serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    remote = import_remote()
    if args.web is not None:
        import_web()
    check_record_target(args)
    env = make_env(*model_files(args))
    try:
        _spawn(env, args.spawn)
    except BaseException:
        env.close()
        raise
    try:
        with stop_on_signals() as stop:
            _serve_until_stopped(env, args, remote, stop, out, err)
    finally:
        env.close()
    return EXIT_OK


def _serve_until_stopped(env: Any, args: argparse.Namespace, remote: Any,
                         stop: threading.Event, out: TextIO, err: TextIO) -> None:
    bridge = None
    if args.ros2 and not _ros2_shares_bus_session(args):
        bridge = _start_ros2(args, env)  # no router: one line, before anything listens
    try:
        server = remote.BusServer(env, args.listen)
    except OSError as error:  # a bad endpoint, or the port is taken
        if bridge is not None:
            bridge.close()
        raise CliError(f"{one_line(str(error))}; choose another endpoint with --listen"
                       f"{_free_endpoint_hint(args.listen)}") from error
    if args.ros2 and bridge is None:
        bridge = _start_ros2(args, env, session=server._session)
    if bridge is not None:
        err.write(f"mjfast: ROS 2 node {env.namespace} on domain {bridge.domain_id} via "
                  f"{'its own router at ' if args.ros2_router else 'the router at '}"
                  f"{bridge.router}\n")
    started = time.perf_counter()
    page = None
    try:
        start_recording(env, args, err)
        with bad_input_is_one_line():
            env.start(args.realtime)
        page = launch_web(env, args.web, err) if args.web is not None else None
        err.write(f"mjfast: serving {args.model} on {args.listen} (SIGINT or SIGTERM "
                  f"stops it)\n")
        err.flush()
        wait_interruptibly(stop)
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
    print_statistics(env, time.perf_counter() - started, out)
    figures = server.statistics()
    out.write("\nremote bus\n" + "".join(
        f"  {name.replace('_', ' '):<22}{value:,}\n" for name, value in figures.items()))
    if bridge is not None:
        _print_ros2(bridge, out)


def _spawn(env: Any, spawns: list[tuple[str, str, list[float] | None]]) -> None:
    """--spawn NAME=MODEL[@x,y,z], in order; a failure is one line naming the spawn."""
    for name, model, position in spawns:
        try:
            env.spawn(model, name, pose=None if position is None else {"pos": position})
        except (KeyError, ValueError, OSError, TypeError) as error:
            text = error.args[0] if isinstance(error, KeyError) and error.args else error
            raise CliError(f"--spawn {name}={model}: {one_line(str(text))}") from error


def _ros2_shares_bus_session(args: argparse.Namespace) -> bool:
    """--ros2-router on the remote bus's own endpoint: its router session is the ROS 2 one."""
    return bool(args.ros2_router) and (args.router or DEFAULT_ENDPOINT) == args.listen


def _start_ros2(args: argparse.Namespace, env: Any, session: Any = None) -> Any:
    try:
        from mjfast.interop.ros2 import Bridge, RouterNotFound
    except ImportError as error:
        raise CliError(one_line(str(error))) from error
    try:
        return Bridge(env, domain_id=args.domain_id, router=args.router,
                      listen=args.ros2_router, session=session)
    except RouterNotFound as error:
        raise CliError(str(error)) from error
    except (OSError, ValueError) as error:
        raise CliError(one_line(str(error))) from error


def _print_ros2(bridge: Any, out: TextIO) -> None:
    figures = bridge.statistics()
    out.write(f"\nROS 2 (domain {bridge.domain_id}, router {bridge.router})\n" + "".join(
        f"  {name.replace('_', ' '):<22}{value:,}\n" for name, value in figures.items()))
    skipped = bridge.unbridged()
    if skipped:
        out.write("  not bridged (no ROS 2 type): " + ", ".join(skipped) + "\n")


def _free_endpoint_hint(endpoint: str) -> str:
    """`(e.g. --listen tcp/127.0.0.1:7449)`: the next port after `endpoint`'s that is free now,
    for a tcp endpoint of a numeric host; "" otherwise."""
    match = re.fullmatch(r"tcp/(?P<host>[0-9.]+):(?P<port>\d+)", endpoint)
    if match is None:
        return ""
    host, port = match["host"], int(match["port"])
    for candidate in range(port + 1, min(port + 50, 65536)):
        with socket.socket() as probe:
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
        return f" (e.g. --listen tcp/{host}:{candidate})"
    return ""
