"""mjfast.interop.zenoh_threads' close_session: how a Zenoh session's close failing is taken.

A real close timeout needs Zenoh's own tasks to hang for 10 s (it was seen once, closing a client
that four threads were calling with 800 KB messages on a loaded machine); the session here is a
stand-in that fails as zenoh-python's does, with its own error types."""

from __future__ import annotations

import logging

import pytest

zenoh = pytest.importorskip("zenoh", reason="the remote bus and the bridge need mjfast[server]")

from mjfast.interop.zenoh_threads import close_session  # noqa: E402


class FailingSession:
    """Raises each of `errors` from close() in turn, then closes."""

    def __init__(self, *errors: BaseException, closed: bool) -> None:
        self.errors = list(errors)
        self.closed = closed
        self.calls = 0

    def close(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        self.closed = True

    def is_closed(self) -> bool:
        return self.closed


def test_a_close_zenoh_gave_up_waiting_for_is_logged_once_the_session_is_closed(
        caplog: pytest.LogCaptureFixture) -> None:
    session = FailingSession(zenoh.ZError("close operation timed out!"), closed=True)
    with caplog.at_level(logging.WARNING, logger="mjfast"):
        close_session(session)
    assert session.calls == 1
    assert "close operation timed out" in caplog.text and "it is closed" in caplog.text


def test_a_close_that_left_the_session_open_raises() -> None:
    session = FailingSession(zenoh.ZError("close operation timed out!"), closed=False)
    with pytest.raises(zenoh.ZError, match="timed out"):
        close_session(session)


def test_a_session_another_thread_still_holds_is_closed_once_it_lets_go() -> None:
    session = FailingSession(RuntimeError("Already borrowed"), closed=False)
    close_session(session)
    assert session.calls == 2 and session.closed
