"""Tests of mjfast.bus.handoff: a tap whose consumer runs on a writer thread, fed through the
core's bounded ring (keep the newest message per topic, or make the publisher wait)."""

from __future__ import annotations

import functools
import gc
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import mjfast
from mjfast._core_loader import _core
from mjfast.bus.handoff import HandedOffTap
from mjfast.bus.node import Bus
from mjfast.interop.record.writer import batch_items
from support import arm_xml, plugins_param, run_python, wait_for


class Gate:
    """A tap function that records what it gets and on which thread, and blocks while closed."""

    def __init__(self, blocks: set[str] | None = None) -> None:
        self.blocks = blocks  # the topics it blocks (default: all)
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.seen: list[tuple[str, Any]] = []
        self.threads: set[int] = set()

    def __call__(self, topic: str, message: Any) -> None:
        self.threads.add(threading.get_ident())
        self.entered.set()
        if self.blocks is None or topic in self.blocks:
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
    assert tap.statistics() == {"handed": 5, "inline": 0, "dropped": 0, "waits": 0,
                                "waiting": 0, "failures": 0}


def test_an_inline_topic_goes_out_on_its_publisher_thread_after_what_waits(bus: Bus) -> None:
    # inline_topics (the ROS 2 bridge's action status arrays): a publisher outside any plugin
    # callback delivers the message itself when nothing waits, never ahead of a message handed
    # over before it; a plugin callback's publish (the stepping thread's) is handed over.
    gate = Gate(blocks={"/x"})
    tap = HandedOffTap(bus, gate, policy="keep_newest")
    tap.inline_topics = frozenset({"/s"})
    bus.publish("/s", 0)
    assert gate.seen == [("/s", 0)] and gate.threads == {threading.get_ident()}
    with _core.CallbackFree():  # as inside a plugin's step callback
        bus.publish("/s", 1)
    assert wait_for(lambda: len(gate.seen) == 2) and len(gate.threads) == 2
    assert tap.statistics()["inline"] == 1 and tap.statistics()["handed"] == 1
    # The writer is delivering /x 2 (taken: the ring is empty): /s 3 from another thread
    # waits for that delivery (without the delivery lock it went out at once, ahead of it).
    gate.open.clear()
    gate.entered.clear()
    bus.publish("/x", 2)
    assert gate.entered.wait(10)
    publisher = publish_on_a_thread(bus, [("/s", 3)])
    publisher.join(0.2)
    assert publisher.is_alive() and len(gate.seen) == 2
    gate.open.set()
    publisher.join(10)
    assert wait_for(lambda: len(gate.seen) == 4)
    assert gate.seen[2:] == [("/x", 2), ("/s", 3)]
    # And behind a message that waits in the ring, it is handed over after it.
    gate.open.clear()
    gate.entered.clear()
    bus.publish("/x", 4)
    assert gate.entered.wait(10)
    bus.publish("/x", 5)
    publisher = publish_on_a_thread(bus, [("/s", 6)])
    gate.open.set()
    publisher.join(10)
    assert wait_for(lambda: len(gate.seen) == 7)
    assert gate.seen[4:] == [("/x", 4), ("/x", 5), ("/s", 6)]
    tap.remove()
    tap.hand_over("/s", 7)  # removed: nothing more goes out, inline or not
    assert len(gate.seen) == 7


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


def test_a_packed_route_hands_runs_of_packed_messages_over_as_blocks_in_their_place(
        bus: Bus) -> None:
    # A recording's tap (mjfast.interop.record.recorder): messages on the topics it gives a route
    # for are packed as they are handed over (log time offset + round(stamp * 1e9)) and keep no
    # Python object; take() gives each run of them as one block (pack_direct's), in its place
    # among the others. A message the core does not pack, or a time its nanoseconds cannot hold,
    # goes as any other.
    route_a, route_b = ("/ros/a", "std_msgs/msg/A", None), ("/ros/b", "std_msgs/msg/B", None)
    routes = {"/a": route_a, "/b": route_b}
    stamps = iter([0.5, 1.0, 2.0, 3.0, float("inf"), 5.0, 6.0, 7.0])
    tap = HandedOffTap(bus, None, policy="wait", writer=False, stamp=lambda: next(stamps),
                       packed_route=routes.get, offset_ns=10)
    unpackable = {"n": 3, "odd": object()}
    kept = {"n": 1, "q": np.arange(3.0)}
    held = sys.getrefcount(kept)
    for topic, message in (("/x", "plain"), ("/a", kept), ("/b", {"n": 2}), ("/a", unpackable),
                           ("/a", {"n": 4}), ("/a", {"n": 5}), ("/b", {"n": 6})):
        bus.publish(topic, message)
    bus.publish("/x", "newer")
    assert sys.getrefcount(kept) == held  # packed: neither the ring nor the bus's latest keeps it
    items = tap.take(0.0, 64)
    assert [item[0] for item in items] == ["/x", None, "/a", "/a", None, "/x"]
    assert items[0] == ("/x", "plain", 0.5) and items[5][:2] == ("/x", "newer")
    assert items[2] == ("/a", unpackable, 3.0) and items[2][1] is unpackable
    assert items[3][:2] == ("/a", {"n": 4})  # at an infinite time
    first, second = items[1], items[4]
    assert first[1] == [route_a, route_b] and first[1][0] is route_a and first[2] == [1, 1]
    assert second[1] == [route_a, route_b] and second[2] == [1, 1]
    records = list(batch_items([(None, first[1], first[3]), (None, second[1], second[3])]))
    assert [record[:3] for record in records] == [
        ("/ros/a", "std_msgs/msg/A", 1_000_000_010), ("/ros/b", "std_msgs/msg/B", 2_000_000_010),
        ("/ros/a", "std_msgs/msg/A", 5_000_000_010), ("/ros/b", "std_msgs/msg/B", 6_000_000_010)]
    assert [_core.unpack_message(record[3])["n"] for record in records] == [1, 2, 5, 6]
    np.testing.assert_array_equal(_core.unpack_message(records[0][3])["q"], kept["q"])
    assert tap.statistics()["handed"] == 8
    tap.remove()
    with pytest.raises(ValueError, match="packed_route"):
        HandedOffTap(bus, lambda *_: None, policy="wait", packed_route=routes.get)


def test_a_raising_stamp_or_route_is_the_taps_failure_and_the_next_message_goes(
        bus: Bus, caplog: pytest.LogCaptureFixture) -> None:
    # The ring's hand_over calls both in the core, as the bus's tap function: what they raise
    # reaches the bus as a tap's error (logged, counted), and the next publish is handed over.
    stamps = iter([ValueError("no time"), 1.0, 2.0])
    routes = iter([KeyError("no route"), None])  # (none asked for while the stamp raises)

    def stamp() -> float:
        value = next(stamps)
        if isinstance(value, Exception):
            raise value
        return value

    def route(topic: str) -> Any:
        value = next(routes)
        if isinstance(value, Exception):
            raise value
        return value

    tap = HandedOffTap(bus, None, policy="wait", writer=False, stamp=stamp, packed_route=route)
    for topic, message in (("/a", "first"), ("/b", "second"), ("/c", "third")):
        bus.publish(topic, message)
    assert tap.take(0.0) == [("/c", "third", 2.0)]
    assert "no time" in caplog.text and "no route" in caplog.text
    assert bus._taps[0].failures == 2
    tap.remove()


def test_a_ring_in_a_cycle_with_the_callables_it_holds_is_collected() -> None:
    # A recording's stamp reads its env, whose bus holds the tap that holds the ring: the ring
    # shows the garbage collector what it holds, so an env never closed does not stay forever.
    class Owner:
        time = 0.5

    owner = Owner()
    owner.ring = _core.HandoffRing(4, "wait")  # type: ignore[attr-defined]
    owner.ring.set_hand_over(functools.partial(getattr, owner, "time"), None, 0)  # type: ignore[attr-defined]
    owner.ring.hand_over("/a", "kept")  # type: ignore[attr-defined]
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


def test_lists_of_strings_pack_as_they_did_whatever_the_list_holding_them(bus: Bus) -> None:
    # The ring keeps the bytes of the last few lists of strings it packed (a JointState's names:
    # the same str objects in a new list, message after message) and copies them for a list of
    # those very objects: every message packs as pack_message packs it, whatever was kept.
    names = [f"joint_{i}" for i in range(21)]
    lists = {key: [f"{key}_{i}" for i in range(6)] for key in "abcde"}
    same_text = ["".join(list(name)) for name in names]  # equal strings, other objects
    changed = list(names)
    messages: list[Any] = [
        {"name": list(names), "q": np.arange(3.0)},
        {"name": list(names), "q": np.arange(2.0)},  # the kept bytes
        {"name": list(reversed(names))},
        {"name": same_text},
        {"name": names[:3]},  # short: packed as it comes
        {"name": [*names, 1.5]},  # not all strings: not kept
        {"outer": {"inner": list(names)}, "t": (list(names),)},
        *({"name": list(lists[key])} for key in "abcde"),  # more lists than are kept
        {"name": list(names)},
        {"name": list(lists["e"])},
        {"name": changed},
    ]
    tap = HandedOffTap(bus, None, policy="wait", writer=False, capacity=64,
                       packed_route=lambda topic: ("/ros/a", "std_msgs/msg/A", None))
    for message in messages[:-1]:
        bus.publish("/a", message)
    changed[5] = "joint_5_renamed"  # the list kept last, one item replaced
    bus.publish("/a", messages[-1])
    items = tap.take(0.0, 64)
    assert [item[0] for item in items] == [None]  # all packed, one block
    records = list(batch_items([(None, items[0][1], items[0][3])]))
    assert [record[3] for record in records] == [_core.pack_message(m) for m in messages]
    assert _core.unpack_message(records[-1][3])["name"][5] == "joint_5_renamed"
    # A str subclass is not packed (the message goes as it is); the names after it pack as before.
    class Name(str):
        pass

    odd = {"name": [Name(name) for name in names]}
    bus.publish("/a", odd)
    bus.publish("/a", {"name": list(names)})
    items = tap.take(0.0, 64)
    assert items[0] == ("/a", odd, 0.0) and items[0][1] is odd
    (record,) = batch_items([(None, items[1][1], items[1][3])])
    assert record[3] == _core.pack_message({"name": names})
    tap.remove()


def test_a_full_wait_ring_holds_a_packing_publisher_until_the_writer_takes(bus: Bus) -> None:
    tap = HandedOffTap(bus, None, policy="wait", writer=False, capacity=1,
                       packed_route=lambda topic: ("/ros/a", "t", None))
    bus.publish("/a", {"n": 0})
    publisher = publish_on_a_thread(bus, [("/a", {"n": i}) for i in range(1, 4)])
    assert wait_for(lambda: tap.statistics()["waits"] >= 1)  # the ring is full: it waits
    taken: list[Any] = []
    while len(taken) < 4:
        for _, routes, _counts, data in tap.take(1.0):
            taken += [_core.unpack_message(record[3])["n"]
                      for record in batch_items([(None, routes, data)])]
    publisher.join(10)
    assert not publisher.is_alive() and taken == [0, 1, 2, 3]  # nothing dropped, in order
    tap.remove()
    bus.publish("/a", {"n": 4})  # a closed ring keeps nothing
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


def test_takers_on_several_threads_each_get_their_own_items() -> None:
    # take() is a consumer's: a recording's writer thread, or whoever calls a writer-less tap's
    # take(). Two of them at once (each waiting with the GIL released) once shared the ring's
    # scratch space and freed the same messages twice; each item now goes to exactly one taker.
    # In a child: before the fix the interpreter died (double free).
    result = run_python("""
        import threading
        from mjfast._core_loader import _core

        ring = _core.HandoffRing(64, "wait")
        route = ("/ros/a", "std_msgs/msg/A", None)
        total, takers = 20_000, 3
        got = [[] for _ in range(takers)]
        done = threading.Event()

        def take(out):
            while not done.is_set() or ring.waiting:
                for item in ring.take(16, 0.001):
                    out.extend([item[1]] if item[0] is not None else
                               [("block", n) for n in item[2]])

        threads = [threading.Thread(target=take, args=(got[i],)) for i in range(takers)]
        for thread in threads:
            thread.start()
        for n in range(total):
            if n % 2:
                ring.push("/x", n, 0.0)
            else:
                ring.push_packed("/a", {"n": n}, 0.0, route, 0)
        done.set()
        for thread in threads:
            thread.join(30)
        plain = sorted(m for out in got for m in out if not isinstance(m, tuple))
        packed = sum(n for out in got for m in out if isinstance(m, tuple) for n in [m[1]])
        assert plain == list(range(1, total, 2)), len(plain)
        assert packed == total // 2, packed
        print("ok")
    """, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


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
