"""The one route table of an env (mjfast.interop.routes, SPEC §19/§20): built from what its loaded
plugins declare, through the conversion table, and shared by the ROS 2 bridge and recordings."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mujoco
import pytest

pytest.importorskip("rosbags")

import mjfast
from mjfast import Topic
from mjfast.interop.routes import route_table

XML = '<mujoco><worldbody><site name="s"/></worldbody></mujoco>'


def _plugins(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"mujoco_server": {"MujocoPlugins": list(entries)}}


def declaring(*topics: Topic, subscribe: str | None = None) -> type:
    class Declaring(mjfast.MujocoPlugin):
        def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
            if subscribe is not None:
                self.node.subscribe(subscribe, lambda message: None)
            return True

        def topics(self) -> list[Topic]:
            return list(topics)

    return Declaring


def test_one_table_per_declarations_rebuilt_when_a_load_replaces_them(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    env = make_env(XML, params=_plugins({"name": "clock", "type": "mjfast/ClockPublisher"}))
    table = route_table(env)
    assert route_table(env) is table  # the bridge's and every recording's
    assert table.declared is env.plugin_topics
    assert table.topics() == {"/clock": "rosgraph_msgs/msg/Clock"}
    env.params.set("/mujoco_server/MujocoPlugins", [
        {"name": "clock", "type": "mjfast/ClockPublisher", "topic": "/sim_clock"}])
    env.reload()
    rebuilt = route_table(env)
    assert rebuilt is not table and rebuilt.topics() == {"/sim_clock": "rosgraph_msgs/msg/Clock"}
    assert rebuilt.routes("/sim_clock")[0].convert({"time": 1.5}).clock.sec == 1
    assert rebuilt.routes("sim_clock") == rebuilt.routes("/sim_clock")  # a name as published
    assert rebuilt.routes("/clock") == ()


def test_a_kind_the_table_has_no_row_for_is_kept_for_other_consumers(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    kind = register(declaring(Topic("~goal", "action_goal", "std_msgs/msg/String"),
                              Topic("~bus_only", "anything")))
    env = make_env(XML, params=_plugins({"name": "a", "type": kind}))
    table = route_table(env)
    assert table.topics() == {}
    assert [entry.topic.topic for entry in table.unconverted] == ["/mujoco_server/a/goal"]


def test_an_unknown_ros_type_leaves_that_plugin_out_and_says_so(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str],
        caplog: Any) -> None:
    bad = register(declaring(Topic("/clock", "clock", "rosgraph_msgs/msg/Clock"),
                             Topic("~ok", "fields", "std_msgs/msg/String"),
                             Topic("~bad", "fields", "std_msgs/msg/Nope")), "test/Bad")
    env = make_env(XML, params=_plugins({"name": "bad", "type": bad},
                                        {"name": "clock", "type": "mjfast/ClockPublisher"}))
    with caplog.at_level(logging.WARNING, logger="mjfast.ros2"):
        table = route_table(env)
    assert table.topics() == {"/clock": "rosgraph_msgs/msg/Clock"}  # nothing of `bad`'s
    # /clock, which `bad` declared first, is the ClockPublisher's.
    assert [route.plugin for route in table.routes("/clock")] == ["clock"]
    assert table.publishers["/clock"].plugin == "clock"
    assert "plugin bad is not bridged to ROS 2 nor recorded" in caplog.text
    assert "std_msgs/msg/Nope" in caplog.text


def test_one_ros_topic_has_one_type_the_first_declared(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str],
        caplog: Any) -> None:
    first = register(declaring(Topic("/shared", "fields", "std_msgs/msg/String")), "test/A")
    second = register(declaring(Topic("/shared", "fields", "std_msgs/msg/Float64")), "test/B")
    env = make_env(XML, params=_plugins({"name": "a", "type": first},
                                        {"name": "b", "type": second}))
    with caplog.at_level(logging.WARNING, logger="mjfast.ros2"):
        table = route_table(env)
    assert table.topics() == {"/shared": "std_msgs/msg/String"}
    assert len(table.routes("/shared")) == 1
    assert "plugin b declares /shared as std_msgs/msg/Float64" in caplog.text


def test_an_inbound_topic_is_routed_while_a_plugin_subscribes_to_it(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    twist = Topic("~cmd_vel", "planar_velocity", "geometry_msgs/msg/Twist", inbound=True)
    listens = register(declaring(twist, subscribe="~cmd_vel"), "test/Listens")
    deaf = register(declaring(twist), "test/Deaf")
    env = make_env(XML, params=_plugins({"name": "on", "type": listens},
                                        {"name": "off", "type": deaf}))
    (route,) = route_table(env).inbound
    assert (route.topic, route.ros_type, route.plugin) == (
        "/mujoco_server/on/cmd_vel", "geometry_msgs/msg/Twist", "on")


def test_a_cameras_info_goes_out_from_each_of_its_planes_on_one_topic(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    xml = ('<mujoco><visual><global offwidth="32" offheight="24"/></visual><worldbody>'
           '<camera name="c" fovy="50"/></worldbody></mujoco>')
    env = make_env(xml, params=_plugins({"name": "cams", "type": "mjfast/CameraPublisher",
                                         "planes": ["rgb", "depth"]}))
    table = route_table(env)
    info = "/mujoco_server/cams/c/camera_info"
    for plane in ("rgb", "depth"):
        image, camera_info = table.routes(f"/mujoco_server/cams/c/{plane}")
        assert (image.topic, image.ros_type) == (f"/mujoco_server/cams/c/{plane}",
                                                 "sensor_msgs/msg/Image")
        assert (camera_info.topic, camera_info.ros_type) == (info, "sensor_msgs/msg/CameraInfo")
    assert table.publishers[info].ros_type == "sensor_msgs/msg/CameraInfo"
