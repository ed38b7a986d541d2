"""The tests' own subprocess helpers (tests/support.py) where a child misbehaves: a child that
hangs fails its test with where its threads were, and does not outlive it (a `serve --record`
child once outlived its test in CI, and its pipes were reported as the next test's failure)."""

from __future__ import annotations

import pytest

from support import finish_python, start_python


def test_a_hung_child_fails_its_test_with_its_threads_stacks_and_is_ended() -> None:
    child = start_python("""
        import threading

        def parked():
            threading.Event().wait()

        threading.Thread(target=parked, name="parked", daemon=True).start()
        threading.Event().wait()
    """)
    with pytest.raises(AssertionError, match=r"did not exit within 1 s") as failure:
        finish_python(child, timeout=1)
    report = str(failure.value)
    assert "Fatal Python error: Aborted" in report, report
    assert "in parked" in report, report  # every thread's stack, not only the main one
    assert child.poll() is not None
    assert child.stdout is not None and child.stdout.closed
    assert child.stderr is not None and child.stderr.closed


def test_a_child_that_exits_gives_its_output() -> None:
    child = start_python("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert finish_python(child, timeout=30) == ("out\n", "err\n")
