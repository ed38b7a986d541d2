"""How an env meets the user ending things: a Ctrl-C deferred until a lifecycle transaction (a
load, a reload, a reset) is whole, and every env still open closed when the interpreter exits
(SPEC §18).

It does not own the transactions themselves (`mjfast.sim.env`) nor the physics thread
(`_core.EnvCore`).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mjfast.sim.env import MujocoEnv

__all__ = ["close_at_exit", "interrupts_deferred", "no_close_at_exit"]


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Holds off Ctrl-C until the block ends, so that a lifecycle transaction (a reload, a load)
    is never left half-done: the first SIGINT is remembered and raised when the block ends; a
    second one goes through at once (the user insists). Only Python's main thread receives
    signals; elsewhere, or where SIGINT has no Python handler, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        yield
        return
    received: list[tuple[int, Any]] = []

    def defer(signum: int, frame: Any) -> None:
        if received:
            handler(signum, frame)
        received.append((signum, frame))

    signal.signal(signal.SIGINT, defer)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if received:
            handler(*received[0])


_open_envs: weakref.WeakSet[MujocoEnv] = weakref.WeakSet()


def close_at_exit(env: MujocoEnv) -> None:
    """`env` is closed when the interpreter exits, unless it is closed before."""
    _open_envs.add(env)


def no_close_at_exit(env: MujocoEnv) -> None:
    """`env` is closed: nothing to do for it at exit."""
    _open_envs.discard(env)


@atexit.register
def _close_open_envs() -> None:
    # Physics threads take the GIL for Python plugins: stop them before the interpreter goes.
    for env in list(_open_envs):
        env.close()
