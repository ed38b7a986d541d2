"""What loaded plugins declare they publish and take in (mjfast.plugin.topics, SPEC §19): a
Python plugin's `topics()`, the `ros_types` attribute it generalises, a native plugin's reply to
call("topics") and its descriptor's `ros_types`, as `env.plugin_topics` holds them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

import mujoco

import mjfast
from mjfast import Topic
from mjfast.plugin.topics import FIELDS

XML = """<mujoco><worldbody><site name="mount" pos="0 0 1"/><body name="mount">
<geom size="0.1"/><site name="tip"/></body></worldbody></mujoco>"""


def _plugins(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"MujocoPlugins": list(entries)}


class Declares(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.scan_time = 1.0 / float(self.config.get("rate_hz", 10.0))
        return True

    def topics(self) -> list[Topic]:
        return [Topic("~scan", "laser_scan", "sensor_msgs/msg/LaserScan",
                      {"frame_id": "tip", "scan_time": self.scan_time}),
                Topic("/status", "my_kind"),
                Topic("cmd", "planar_velocity", "geometry_msgs/msg/Twist", inbound=True),
                Topic("~info", "camera_frame", "sensor_msgs/msg/CameraInfo", source="~scan")]


class Status(mjfast.MujocoPlugin):
    ros_types: ClassVar[dict[str, str]] = {"~status": "std_msgs/msg/String"}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True


class Malformed(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True

    def topics(self) -> list[Any]:
        return ["~scan"]


class Fails(Declares):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return False


def test_a_plugin_declares_its_topics_after_load_named_in_its_namespace(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    env = make_env(XML, params=_plugins({"name": "d", "type": register(Declares),
                                         "rate_hz": 20.0}))
    declared = env.plugin_topics
    assert {entry.plugin for entry in declared} == {"d"}
    assert {entry.type for entry in declared} == {"test/Declares"}
    topics = [entry.topic for entry in declared]
    assert [(t.topic, t.kind, t.ros_type, t.inbound, t.source) for t in topics] == [
        ("/mujoco_server/d/scan", "laser_scan", "sensor_msgs/msg/LaserScan", False,
         "/mujoco_server/d/scan"),
        ("/status", "my_kind", None, False, "/status"),
        ("/mujoco_server/d/cmd", "planar_velocity", "geometry_msgs/msg/Twist", True,
         "/mujoco_server/d/cmd"),
        ("/mujoco_server/d/info", "camera_frame", "sensor_msgs/msg/CameraInfo", False,
         "/mujoco_server/d/scan")]
    # What the plugin's own load worked out (its configuration read once, by it).
    assert topics[0].params == {"frame_id": "tip", "scan_time": 0.05}


def test_ros_types_declare_each_topic_out_and_in_with_its_fields(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    env = make_env(XML, params=_plugins({"name": "s", "type": register(Status)}))
    assert [(e.topic.topic, e.topic.kind, e.topic.ros_type, e.topic.inbound)
            for e in env.plugin_topics] == [
        ("/mujoco_server/s/status", FIELDS, "std_msgs/msg/String", False),
        ("/mujoco_server/s/status", FIELDS, "std_msgs/msg/String", True)]


def test_a_malformed_declaration_is_logged_and_that_plugin_alone_declares_nothing(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str],
        caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="mjfast.env"):
        env = make_env(XML, params=_plugins({"name": "bad", "type": register(Malformed)},
                                            {"name": "s", "type": register(Status)}))
    assert {entry.plugin for entry in env.plugin_topics} == {"s"}
    assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins)
    assert "plugin 'bad' (test/Malformed) declares no topics" in caplog.text
    assert "topics() must return mjfast.Topic declarations, got '~scan'" in caplog.text


def test_a_plugin_that_failed_to_load_declares_nothing(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    env = make_env(XML, params=_plugins({"name": "f", "type": register(Fails)}))
    assert env.plugins[0].state is mjfast.PluginState.FAILED
    assert env.plugin_topics == ()


def test_a_reload_replaces_the_declarations(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    params = {"mujoco_server": _plugins({"name": "d", "type": register(Declares)})}
    env = make_env(XML, params=params)
    before = env.plugin_topics
    assert env.plugin_topics is before  # the same tuple until a load replaces it
    env.params.set("/mujoco_server/MujocoPlugins", [{"name": "s", "type": register(Status)}])
    env.reload()
    assert env.plugin_topics is not before
    assert {entry.plugin for entry in env.plugin_topics} == {"s"}


def test_the_native_lidar_declares_its_scan_or_its_points_framed_by_its_mount(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    lidar = {"type": "mjfast/Lidar", "range": {"max": 5.0}, "rate_hz": 25.0}
    rings = {"samples": 3, "min_angle": -0.1, "max_angle": 0.1}
    env = make_env(XML, params=_plugins(
        {"name": "scan", "site": "tip", **lidar},
        {"name": "cloud", "body": "mount", "vertical": rings, "topic": "/points", **lidar},
        # A site named like a body: its frame id is `site_<id>` on /tf (frame_names).
        {"name": "clash", "site": "mount", **lidar}))
    assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins), env.plugins
    found = {entry.plugin: entry.topic for entry in env.plugin_topics}
    assert found["scan"] == Topic("/mujoco_server/scan/scan", "laser_scan",
                                  "sensor_msgs/msg/LaserScan",
                                  {"scan_time": 0.04, "frame_id": "tip"},
                                  source="/mujoco_server/scan/scan")
    assert found["cloud"] == Topic("/points", "point_cloud", "sensor_msgs/msg/PointCloud2",
                                   {"frame_id": "mount"}, source="/points")
    assert found["clash"].params["frame_id"] == "site_0"
    with env.acquire_plugin("scan") as scan:  # the plugin's own answer, as the env read it
        assert '"frame": ["site", "tip"]' in scan.call("topics")


def test_a_native_descriptor_declares_its_ros_types(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    # NoOp declares no topics of its own; its descriptor here declares one, as ros_types does.
    descriptor = mjfast.NativePlugin("libmjfast_plugins.so", "NoOp", package="mjfast.plugins",
                                     ros_types={"~status": "std_msgs/msg/String"})
    env = make_env(XML, params=_plugins({"name": "n", "type": register(descriptor, "test/N")}))
    assert [(e.topic.topic, e.topic.kind, e.topic.inbound) for e in env.plugin_topics] == [
        ("/mujoco_server/n/status", FIELDS, False), ("/mujoco_server/n/status", FIELDS, True)]
