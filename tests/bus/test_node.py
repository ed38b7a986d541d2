"""Tests of mjfast.bus.node: the Bus (topics, services, delivery order, failures) and Node
scoping."""

from __future__ import annotations

import logging
import threading

import pytest

from mjfast.bus.node import Bus, Node
from mjfast.bus.params import ParameterServer

NS = "/mujoco_server/my_plugin"


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
def node(bus: Bus) -> Node:
    params = ParameterServer(
        {"global_rate": 100, "mujoco_server": {"my_plugin": {"gain": 2.0, "sub": {"k": 1}}}}
    )
    return Node(params, "mujoco_server/my_plugin/", bus, "my_plugin")


# -- Bus: topics ----------------------------------------------------------------------------------


def test_publish_delivers_in_subscription_order(bus: Bus) -> None:
    received: list[tuple[str, object]] = []
    bus.subscribe("/t", lambda m: received.append(("first", m)))
    bus.subscribe("/t", lambda m: received.append(("second", m)))
    bus.subscribe("/other", lambda m: received.append(("other", m)))
    bus.publish("/t", 1)
    bus.publish("/t", 2)
    assert received == [("first", 1), ("second", 1), ("first", 2), ("second", 2)]


def test_raising_subscriber_is_logged_and_others_still_receive(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[object] = []

    def broken(message: object) -> None:
        raise RuntimeError("subscriber exploded")

    bus.subscribe("/t", received.append)
    bus.subscribe("/t", broken)
    bus.subscribe("/t", received.append)
    with caplog.at_level(logging.ERROR, logger="mjfast.bus"):
        bus.publish("/t", "msg")
    assert received == ["msg", "msg"]
    [record] = [r for r in caplog.records if r.name == "mjfast.bus"]
    assert record.levelno == logging.ERROR
    assert "/t" in record.getMessage()
    assert record.exc_info is not None and "subscriber exploded" in str(record.exc_info[1])


def test_latest_and_default(bus: Bus) -> None:
    assert bus.latest("/t") is None
    assert bus.latest("/t", "none yet") == "none yet"
    bus.publish("/t", 1)
    bus.publish("/t", 2)
    assert bus.latest("/t") == 2


def test_latest_is_stored_before_delivery(bus: Bus) -> None:
    seen: list[object] = []
    bus.subscribe("/t", lambda m: seen.append(bus.latest("/t")))
    bus.publish("/t", "x")
    assert seen == ["x"]


def test_names_without_leading_slash_are_global(bus: Bus) -> None:
    received: list[object] = []
    bus.subscribe("a//b/", received.append)
    bus.publish("/a/b", 1)
    assert received == [1]
    assert bus.latest("a/b") == 1


def test_unsubscribe_stops_delivery_and_is_idempotent(bus: Bus) -> None:
    received: list[object] = []
    subscription = bus.subscribe("/t", received.append)
    bus.publish("/t", 1)
    subscription.unsubscribe()
    subscription.unsubscribe()
    bus.publish("/t", 2)
    assert received == [1]


def test_callback_may_publish_and_unsubscribe_reentrantly(bus: Bus) -> None:
    received: list[object] = []
    holder: dict[str, object] = {}

    def relay(message: object) -> None:
        holder["sub"].unsubscribe()  # type: ignore[attr-defined]
        bus.publish("/out", message)

    holder["sub"] = bus.subscribe("/in", relay)
    bus.subscribe("/out", received.append)
    bus.publish("/in", "a")
    bus.publish("/in", "b")
    assert received == ["a"]


def test_topics_sorted(bus: Bus) -> None:
    bus.publish("/z", 1)
    bus.subscribe("/a", lambda m: None)
    sub = bus.subscribe("/m", lambda m: None)
    assert bus.topics() == ["/a", "/m", "/z"]
    sub.unsubscribe()
    assert bus.topics() == ["/a", "/z"]


def test_private_bus_name_is_rejected(bus: Bus) -> None:
    with pytest.raises(ValueError, match="~t"):
        bus.publish("~t", 1)


def test_concurrent_publishers_deliver_every_message(bus: Bus) -> None:
    received: list[object] = []
    lock = threading.Lock()

    def collect(message: object) -> None:
        with lock:
            received.append(message)

    bus.subscribe("/t", collect)
    threads = [
        threading.Thread(target=lambda i=i: [bus.publish("/t", (i, j)) for j in range(100)])
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(received) == [(i, j) for i in range(4) for j in range(100)]


# -- Bus: services --------------------------------------------------------------------------------


def test_service_call_returns_handler_value(bus: Bus) -> None:
    bus.advertise_service("/double", lambda req: req * 2)
    assert bus.call("/double", 21) == 42
    assert bus.call("double", 1) == 2


def test_service_exception_is_reraised(bus: Bus) -> None:
    def fail(request: object) -> None:
        raise ZeroDivisionError("handler failed")

    bus.advertise_service("/fail", fail)
    with pytest.raises(ZeroDivisionError, match="handler failed"):
        bus.call("/fail", None)


def test_unknown_service_is_key_error_naming_it(bus: Bus) -> None:
    with pytest.raises(KeyError, match="/nope"):
        bus.call("/nope", None)


def test_second_advertise_is_value_error_naming_it(bus: Bus) -> None:
    bus.advertise_service("/svc", lambda r: 1)
    with pytest.raises(ValueError, match="/svc"):
        bus.advertise_service("svc", lambda r: 2)
    assert bus.call("/svc", None) == 1


def test_unadvertise_service(bus: Bus) -> None:
    bus.advertise_service("/svc", lambda r: 1)
    bus.unadvertise_service("/svc")
    with pytest.raises(KeyError, match="/svc"):
        bus.call("/svc", None)
    with pytest.raises(KeyError, match="/svc"):
        bus.unadvertise_service("/svc")
    bus.advertise_service("/svc", lambda r: 2)
    assert bus.call("/svc", None) == 2


def test_stale_registration_does_not_remove_newer_service(bus: Bus) -> None:
    old = bus.advertise_service("/svc", lambda r: "old")
    bus.unadvertise_service("/svc")
    bus.advertise_service("/svc", lambda r: "new")
    old.unadvertise()
    assert bus.call("/svc", None) == "new"


# -- Node -----------------------------------------------------------------------------------------


def test_node_identity(node: Node) -> None:
    assert node.namespace == NS
    assert node.name == "my_plugin"
    assert isinstance(node.logger, logging.Logger)
    assert node.logger.name == "mjfast.my_plugin"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gain", f"{NS}/gain"),
        ("~gain", f"{NS}/gain"),
        ("/global_rate", "/global_rate"),
        ("sub/k", f"{NS}/sub/k"),
    ],
)
def test_node_resolve_name(node: Node, name: str, expected: str) -> None:
    assert node.resolve_name(name) == expected


def test_node_params_relative_private_and_absolute(node: Node) -> None:
    assert node.get_param("gain") == 2.0
    assert node.get_param("~sub/k") == 1
    assert node.get_param("/global_rate") == 100
    assert node.has_param("~gain")
    assert not node.has_param("global_rate")  # relative: not in the node's namespace
    assert node.get_param("missing", "fallback") == "fallback"
    with pytest.raises(KeyError, match=f"{NS}/missing"):
        node.get_param("missing")


def test_node_set_param_resolves_in_namespace(node: Node) -> None:
    node.set_param("new", 1)
    node.set_param("~priv", 2)
    node.set_param("/top", 3)
    assert node.params.get(f"{NS}/new") == 1
    assert node.params.get(f"{NS}/priv") == 2
    assert node.params.get("/top") == 3


def test_node_topics_and_services_resolve_in_namespace(node: Node, bus: Bus) -> None:
    received: list[object] = []
    node.subscribe("state", received.append)
    bus.publish(f"{NS}/state", "s")
    node.publish("/global/cmd", "c")
    node.advertise_service("~reset", lambda r: "done")
    assert received == ["s"]
    assert bus.latest("/global/cmd") == "c"
    assert bus.call(f"{NS}/reset", None) == "done"


def test_node_shutdown_removes_its_subscriptions_and_services(node: Node, bus: Bus) -> None:
    mine: list[object] = []
    others: list[object] = []
    node.subscribe("/t", mine.append)
    node.subscribe("state", mine.append)
    node.advertise_service("svc", lambda r: 1)
    bus.subscribe("/t", others.append)

    node.shutdown()
    node.shutdown()
    bus.publish("/t", 1)
    bus.publish(f"{NS}/state", 2)

    assert mine == []
    assert others == [1]
    with pytest.raises(KeyError):
        bus.call(f"{NS}/svc", None)


def test_reloaded_plugin_does_not_receive_twice(bus: Bus) -> None:
    params = ParameterServer()
    received: list[object] = []
    first = Node(params, NS, bus, "my_plugin")
    first.subscribe("/t", received.append)
    first.advertise_service("svc", lambda r: "v1")
    first.shutdown()
    second = Node(params, NS, bus, "my_plugin")
    second.subscribe("/t", received.append)
    second.advertise_service("svc", lambda r: "v2")
    bus.publish("/t", "m")
    assert received == ["m"]
    assert bus.call(f"{NS}/svc", None) == "v2"


def test_a_node_makes_its_logger_only_when_used(bus: Bus) -> None:
    # logging keeps every logger it made: a plugin that never logs leaves none behind (issue 18,
    # many envs whose plugins are named anew each time).
    name = "never_logs_5f3a"
    node = Node(ParameterServer(), f"/ns/{name}", bus, name)
    assert f"mjfast.{name}" not in logging.Logger.manager.loggerDict
    assert node.logger is logging.getLogger(f"mjfast.{name}")


def test_a_subscriber_that_raises_on_every_message_is_logged_once_a_second_with_the_count(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    # Bad commands from outside (a NaN Twist, 20,000 times) used to log one traceback each.
    def refuses(message: object) -> None:
        raise ValueError("not finite")

    bus.subscribe("/cmd", refuses)
    with caplog.at_level(logging.ERROR, logger="mjfast.bus"):
        for _ in range(2000):
            bus.publish("/cmd", float("nan"))
    records = [r for r in caplog.records if r.name == "mjfast.bus"]
    assert 1 <= len(records) <= 3  # the first at once; then at most one a second
    assert records[0].exc_info is not None
    if len(records) > 1:
        assert "more like it" in records[1].getMessage()


# -- Bus: taps and latched topics ---------------------------------------------------------------


def test_taps_see_every_topic_after_its_subscribers_in_the_order_added(bus: Bus) -> None:
    seen: list[tuple[str, str, object]] = []
    bus.subscribe("/a", lambda m: seen.append(("subscriber", "/a", m)))
    bus.add_tap(lambda topic, m: seen.append(("first", topic, m)))
    bus.add_tap(lambda topic, m: seen.append(("second", topic, m)))
    bus.publish("a", 1)  # a global name: the taps get it absolute
    bus.publish("/b/c", 2)
    assert seen == [("subscriber", "/a", 1), ("first", "/a", 1), ("second", "/a", 1),
                    ("first", "/b/c", 2), ("second", "/b/c", 2)]


def test_removing_a_tap_leaves_the_others_whatever_the_order(bus: Bus) -> None:
    # Consumers used to wrap bus.publish, and closing one removed the wrappers of the others.
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        seen: list[list[object]] = [[], [], []]
        taps = [bus.add_tap(lambda topic, m, i=i, seen=seen: seen[i].append(m)) for i in range(3)]
        for count, index in enumerate(order):
            taps[index].remove()
            taps[index].close()  # idempotent; close is remove
            bus.publish("/t", count)
            for i in range(3):
                expected = [c for c in range(count + 1) if i not in order[:c + 1]]
                assert seen[i] == expected, (order, i)


def test_a_tap_that_raises_is_counted_and_stops_nothing(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[object] = []
    seen: list[object] = []

    def broken(topic: str, message: object) -> None:
        raise RuntimeError("tap exploded")

    bus.subscribe("/t", received.append)
    tap = bus.add_tap(broken)
    bus.add_tap(lambda topic, m: seen.append(m))
    with caplog.at_level(logging.ERROR, logger="mjfast.bus"):
        for i in range(100):
            bus.publish("/t", i)
    assert received == seen == list(range(100))
    assert tap.failures == 100
    records = [r for r in caplog.records if r.name == "mjfast.bus"]
    assert 1 <= len(records) <= 2 and "tap exploded" in str(records[0].exc_info[1])


def test_a_taps_own_publish_skips_it(bus: Bus) -> None:
    # What a bridge receives from outside goes into the env, not back out through the bridge.
    mine: list[object] = []
    others: list[object] = []
    received: list[object] = []
    bus.subscribe("/in", received.append)
    tap = bus.add_tap(lambda topic, m: mine.append(m))
    bus.add_tap(lambda topic, m: others.append(m))
    tap.publish("in", "hello")
    assert received == others == ["hello"] and mine == []
    assert bus.latest("/in") == "hello"


def test_a_latched_message_goes_to_taps_added_later_until_its_node_shuts_down(
    node: Node, bus: Bus
) -> None:
    node.publish("/tf_static", "first", latched=True)
    node.publish("/tf_static", "welded", latched=True)  # replaces the first
    node.publish("/tf", "moving")
    bus.publish("/other", "kept too", latched=True)
    early: list[tuple[str, object]] = []
    bus.add_tap(lambda topic, m: early.append((topic, m)))
    assert early == [("/tf_static", "welded"), ("/other", "kept too")]
    unlatched: list[object] = []
    bus.add_tap(lambda topic, m: unlatched.append(m), latched=False)
    assert unlatched == []
    assert bus.latched() == {"/tf_static": "welded", "/other": "kept too"}
    node.shutdown()  # a reload: the old plugin's static transforms are gone with it
    late: list[tuple[str, object]] = []
    bus.add_tap(lambda topic, m: late.append((topic, m)))
    assert late == [("/other", "kept too")]
    assert bus.latest("/tf_static") == "welded"  # latest() is not latching


def test_a_shut_down_node_does_not_unlatch_a_newer_nodes_message(bus: Bus) -> None:
    params = ParameterServer()
    old = Node(params, NS, bus, "my_plugin")
    new = Node(params, NS, bus, "my_plugin")
    old.publish("/tf_static", "old", latched=True)
    new.publish("/tf_static", "new", latched=True)
    old.shutdown()
    assert bus.latched() == {"/tf_static": "new"}


def test_a_latched_publish_racing_add_tap_reaches_the_tap_in_order(bus: Bus) -> None:
    for _ in range(50):
        seen: list[int] = []
        stop = threading.Event()

        def publisher(stop: threading.Event = stop) -> None:
            i = 0
            while not stop.is_set():
                bus.publish("/static", i, latched=True)
                i += 1

        thread = threading.Thread(target=publisher)
        thread.start()
        tap = bus.add_tap(lambda topic, m, seen=seen: seen.append(m))
        stop.set()
        thread.join()
        tap.remove()
        assert seen == sorted(seen) and len(seen) == len(set(seen))
