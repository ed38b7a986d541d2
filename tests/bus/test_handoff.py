"""Tests of mjfast.bus.handoff: a tap whose consumer runs on a writer thread, fed through the
core's bounded ring (keep the newest message per topic, or make the publisher wait)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mjfast
from mjfast.bus.handoff import HandedOffTap
from mjfast.bus.node import Bus
from support import arm_xml, plugins_param, wait_for


class Gate:
    """A tap function that records what it gets and on which thread, and blocks while closed."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.seen: list[tuple[str, Any]] = []
        self.threads: set[int] = set()

    def __call__(self, topic: str, message: Any) -> None:
        self.threads.add(threading.get_ident())
        self.entered.set()
        assert self.open.wait(10)
        self.seen.append((topic, message))


@pytest.fixture
def bus() -> Iterator[Bus]:
    yield Bus()


def publish_on_a_thread(bus: Bus, messages: list[tuple[str, Any]]) -> threading.Thread:
    thread = threading.Thread(target=lambda: [bus.publish(t, m) for t, m in messages],
                              daemon=True)
    thread.start()
    return thread


def test_the_tap_function_runs_on_the_writer_thread_in_order(bus: Bus) -> None:
    gate = Gate()
    tap = bus.add_tap(gate, handoff="keep_newest")
    assert isinstance(tap, HandedOffTap)
    for i in range(5):
        bus.publish("/a", i)
    assert wait_for(lambda: len(gate.seen) == 5)
    assert gate.seen == [("/a", i) for i in range(5)]
    assert gate.threads and threading.get_ident() not in gate.threads
    tap.remove()
    assert not tap.active
    bus.publish("/a", 99)
    assert gate.seen[-1] == ("/a", 4)  # removed: nothing more is handed over
    assert tap.statistics() == {"handed": 5, "dropped": 0, "waits": 0, "waiting": 0,
                                "failures": 0}


def test_a_full_keep_newest_ring_never_holds_the_publisher_and_keeps_the_newest(
        bus: Bus) -> None:
    gate = Gate()
    gate.open.clear()
    tap = HandedOffTap(bus, gate, policy="keep_newest", capacity=2)
    bus.publish("/a", 0)
    assert gate.entered.wait(10)  # the writer holds /a 0; the ring is empty again
    messages = [("/a", 1), ("/b", 1), ("/a", 2), ("/a", 3), ("/b", 2)]
    publisher = publish_on_a_thread(bus, messages)
    publisher.join(10)
    assert not publisher.is_alive()  # never waited for the blocked writer
    gate.open.set()
    assert wait_for(lambda: tap.statistics()["waiting"] == 0 and len(gate.seen) == 3)
    # The newest of each topic, each in the place of the first of its topic that waited.
    assert gate.seen == [("/a", 0), ("/a", 3), ("/b", 2)]
    assert tap.statistics()["dropped"] == 3
    tap.remove()


def test_a_full_wait_ring_holds_the_publisher_until_the_writer_takes(bus: Bus) -> None:
    gate = Gate()
    gate.open.clear()
    tap = HandedOffTap(bus, gate, policy="wait", capacity=1)
    bus.publish("/a", 0)
    assert gate.entered.wait(10)
    publisher = publish_on_a_thread(bus, [("/a", i) for i in range(1, 4)])
    assert wait_for(lambda: tap.statistics()["waits"] >= 1)  # the ring is full: it waits
    assert publisher.is_alive()
    gate.open.set()
    publisher.join(10)
    assert not publisher.is_alive()
    assert wait_for(lambda: len(gate.seen) == 4)
    assert gate.seen == [("/a", i) for i in range(4)]  # nothing dropped
    assert tap.statistics()["dropped"] == 0
    tap.remove()


def test_latched_messages_stamps_and_a_consumer_without_a_writer(bus: Bus) -> None:
    bus.publish("/static", "kept", latched=True)
    times = iter([1.5, 2.5])
    tap = HandedOffTap(bus, None, policy="wait", writer=False, stamp=lambda: next(times))
    bus.publish("/a", "later")
    assert tap.take(1.0) == [("/static", "kept", 1.5), ("/a", "later", 2.5)]
    assert tap.take(0.0) == []
    tap.remove()
    bus.publish("/a", "after")
    assert tap.take(0.0) == []


def test_remove_delivers_what_waits_then_ends_the_writer(bus: Bus) -> None:
    gate = Gate()
    gate.open.clear()
    tap = HandedOffTap(bus, gate, policy="wait", capacity=8, name="test-writer")
    for i in range(4):
        bus.publish("/a", i)
    assert gate.entered.wait(10)
    gate.open.set()
    tap.remove()  # joins the writer once it has delivered the rest
    assert gate.seen == [("/a", i) for i in range(4)]
    assert not any(t.name == "test-writer" for t in threading.enumerate())
    tap.remove()  # idempotent


def test_a_raising_function_is_counted_and_the_writer_goes_on(
        bus: Bus, caplog: pytest.LogCaptureFixture) -> None:
    seen = []

    def function(topic: str, message: Any) -> None:
        if message == "bad":
            raise ValueError("cannot convert")
        seen.append(message)

    tap = bus.add_tap(function, handoff="keep_newest")
    bus.publish("/a", "bad")
    bus.publish("/a", "good")
    assert wait_for(lambda: seen == ["good"])
    assert tap.statistics()["failures"] == 1
    assert "cannot convert" in caplog.text
    tap.remove()


def test_bad_arguments_are_refused(bus: Bus) -> None:
    with pytest.raises(ValueError, match="handoff must be one of keep_newest, wait, got 'fast'"):
        bus.add_tap(lambda t, m: None, handoff="fast")
    with pytest.raises(TypeError, match="a bus tap must be callable"):
        bus.add_tap(42, handoff="wait")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="capacity >= 1"):
        HandedOffTap(bus, lambda t, m: None, policy="wait", capacity=0)
    assert bus._taps == ()  # nothing was added


def test_a_slow_consumer_does_not_slow_the_physics_thread() -> None:
    """A JointState at every step of a running env, and a tap that takes 20 ms per message:
    the physics thread goes on at its own pace, the tap gets the newest messages."""
    params = plugins_param({"type": "mjfast/JointStatePublisher", "rate_hz": 1000.0,
                            "topic": "/joint_states"})
    env = mjfast.MujocoEnv(arm_xml(), params=params)
    gate = Gate()
    slow = threading.Event()

    def consume(topic: str, message: Any) -> None:
        slow.wait(0.02)  # a slow conversion (never set: 20 ms each)
        gate(topic, message)

    tap = env.bus.add_tap(consume, handoff="keep_newest")
    try:
        env.start(None)
        assert wait_for(lambda: len(gate.seen) >= 3, 10)
        steps = env.step_count
        env.stop()
        # Three messages took the tap >= 60 ms; the physics thread stepped on meanwhile.
        assert steps > 50 * len(gate.seen), (steps, len(gate.seen))
        assert tap.statistics()["dropped"] > 0
        times = [message["time"] for _, message in gate.seen]
        assert times == sorted(times)
    finally:
        tap.remove()
        env.close()
