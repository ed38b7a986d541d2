"""`mjfast topic` and `mjfast service` (SPEC §15): a client of a running `mjfast serve`, its
replies and messages printed as strict JSON lines.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from mjfast.cli.errors import EXIT_OK, EXIT_USAGE, CliError, import_mjfast, one_line
from mjfast.cli.parsing import ECHO_SILENCE_S


def import_remote() -> Any:
    try:
        import mjfast.interop.remote as remote
    except ImportError as error:
        raise CliError(f"remote access needs the extra mjfast[server] (pip install "
                       f"'mjfast[server]'): {one_line(str(error))}") from error
    return remote


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
        return {key if isinstance(key, str) else dumps(key): _as_json(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    return repr(value)


def dumps(value: Any) -> str:
    """One line of strict JSON (RFC 8259): see `_as_json`."""
    return json.dumps(_as_json(value), allow_nan=False)


@contextmanager
def _connected(endpoint: str) -> Iterator[Any]:
    """A client of the server at `endpoint` for one command, closed when it ends."""
    remote = import_remote()
    try:
        client = remote.connect(endpoint)
    except ConnectionError as error:
        raise CliError(f"{one_line(str(error))}; start one with `mjfast serve`, or give the "
                       f"endpoint it listens on with --connect ENDPOINT") from error
    try:
        yield client
    finally:
        client.close()


def _remote_call(action: Any) -> Any:
    """Runs `action()`, a remote call: a failure on the server, no server or no reply in time
    is one line."""
    mjfast = import_mjfast()
    try:
        return action()
    except mjfast.RemoteError as error:
        raise CliError(one_line(str(error))) from error
    except (ConnectionError, TimeoutError) as error:
        raise CliError(one_line(str(error))) from error


def _print_names(names: Callable[[], Any], out: TextIO) -> int:
    """`topic list`, `service list`: the names the remote call `names()` returns, one a line."""
    for name in _remote_call(names):
        out.write(f"{name}\n")
    return EXIT_OK


def _checked_arguments(what: str, name: str, message: Any = None) -> None:
    """The name and message of a remote command can go over the bus: a usage error (one line,
    exit 2) before connecting if not."""
    import_remote()
    from mjfast.interop.remote import codec, keys

    try:
        keys.key(keys.TOPIC, name)
    except (TypeError, ValueError) as error:
        raise CliError(f"{what} {name!r}: {one_line(str(error))}", EXIT_USAGE) from error
    try:
        codec.encode(message)
    except (TypeError, ValueError, OverflowError) as error:
        raise CliError(f"the JSON cannot go over the bus: {one_line(str(error))}", EXIT_USAGE
                       ) from error


def topic(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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
        line = dumps(message) + "\n"
        with lock:
            if closed or (count is not None and printed[0] >= count):
                return
            try:
                out.write(line)
                out.flush()
            except OSError as error:  # on the subscription's thread: handed to the command's
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
                    time.monotonic() - waiting_since >= ECHO_SILENCE_S:
                waiting_since = None  # said once
                err.write(f"mjfast: no message on {_absolute(topic)} yet"
                          f"{_publisher_hint(client, topic)}; still waiting (Ctrl-C stops)\n")
                err.flush()
    finally:
        subscription.close()
    return EXIT_OK


def _absolute(topic: str) -> str:
    from mjfast.bus.params import resolve_name

    return resolve_name(topic)


def _publisher_hint(client: Any, topic: str) -> str:
    """`topic echo`'s word on a silent topic: whether the server knows it at all."""
    try:
        known = _absolute(topic) in client.topics(timeout=2.0)
    except Exception:  # only a hint
        return ""
    return "" if known else " (nothing on the server publishes or subscribes it)"


def service(args: argparse.Namespace, out: TextIO) -> int:
    if args.action != "list":
        _checked_arguments("service", args.service, args.request)
    with _connected(args.connect) as client:
        if args.action == "list":
            return _print_names(client.services, out)
        reply = _remote_call(lambda: client.call(args.service, args.request, args.timeout))
        out.write(dumps(reply) + "\n")
        return EXIT_OK
