"""mjfast.interop.remote.keys: bus names to Zenoh key expressions and back (docs/remote.md), segment
by segment, with Zenoh's special characters percent-encoded."""

from __future__ import annotations

import pytest

pytest.importorskip("zenoh", reason="the remote bus needs the extra mjfast[server] (Zenoh)")
pytest.importorskip("msgpack", reason="the remote bus needs the extra mjfast[server] (msgpack)")

from mjfast.remote import keys


@pytest.mark.parametrize("name", ["/mujoco_server/pause", "/a b/c*d/e%f/@g/h$i?j#k", "/ü"])
def test_bus_names_map_to_keys_and_back(name: str) -> None:
    key = keys.key(keys.TOPIC, name)
    assert key.startswith("mjfast/topic/")
    assert not any(c in key[len("mjfast/topic/"):] for c in "*$?#@")
    assert keys.bus_name(keys.TOPIC, key) == name
    assert keys.key(keys.SERVICE, name.lstrip("/")) == keys.key(keys.SERVICE, name)


def test_a_key_that_encodes_a_slash_in_a_segment_is_refused() -> None:
    with pytest.raises(ValueError, match="encodes '/' inside a segment"):
        keys.bus_name(keys.SERVICE, "mjfast/service/mujoco_server%2Freload")


def test_ordinary_names_are_readable_keys_under_their_area() -> None:
    assert keys.key(keys.TOPIC, "/mujoco_server/joint_states") == \
        "mjfast/topic/mujoco_server/joint_states"
    assert keys.key(keys.SERVICE, "mujoco_server/reset") == "mjfast/service/mujoco_server/reset"
    assert keys.key(keys.PUBLISH, "/a/b") == "mjfast/publish/a/b"
    # The server's own queries live beside the areas, under one prefix.
    assert {keys.ALIVE, keys.SERVICES, keys.TOPICS, keys.LATEST} == {
        "mjfast/server/alive", "mjfast/server/services", "mjfast/server/topics",
        "mjfast/server/latest"}


@pytest.mark.parametrize("name", ["", "/"])
def test_an_empty_name_has_no_key(name: str) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        keys.key(keys.TOPIC, name)


def test_a_key_outside_its_area_has_no_bus_name() -> None:
    with pytest.raises(ValueError, match="is not under 'mjfast/topic'"):
        keys.bus_name(keys.TOPIC, "mjfast/service/mujoco_server/reset")
    with pytest.raises(ValueError, match="is not under"):
        keys.bus_name(keys.TOPIC, "mjfast/topicality/x")  # a prefix of the text is not enough
