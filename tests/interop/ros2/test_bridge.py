"""mjfast.ros2.Bridge and `serve --ros2` against an independent rmw_zenoh implementation (SPEC §19).

The ROS 2 side is the `zenoh-ros2-sdk` package (its own key expressions, liveliness tokens,
attachments, type hashes computed from .msg text, CDR through its own rosbags store), with the
message definitions it would fetch from GitHub written offline from rosbags' Jazzy typestore.
A Zenoh router runs in a child process on a free loopback port; every test has its own domain.
"""

from __future__ import annotations

import json
import logging
import math
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("rosbags")
sdk = pytest.importorskip("zenoh_ros2_sdk")

import zenoh  # noqa: E402

import mjfast  # noqa: E402
from mjfast.plugin.discovery import register_plugin, unregister_plugin  # noqa: E402
from mjfast.ros2 import Bridge, RouterNotFound, wire  # noqa: E402
from mjfast.ros2 import types as ros_types  # noqa: E402
from support import free_port, ros_sdk, wait_for, write_ros_definitions  # noqa: E402

TIMEOUT = 15.0

# A box room (inner faces at x, y = +-2) with the lidar at (0.5, 0, 1.5), a 2-joint arm on a
# welded base (a welded tool at its end), a free ball, and rangefinders along +x and +y.
ROOM_XML = """
<mujoco model="ros2_room">
  <option timestep="0.002"/>
  <visual><global offwidth="64" offheight="48"/></visual>
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <geom name="wall_px" type="box" pos="2.1 0 1" size="0.1 2.2 1.5"/>
    <geom name="wall_nx" type="box" pos="-2.1 0 1" size="0.1 2.2 1.5"/>
    <geom name="wall_py" type="box" pos="0 2.1 1" size="2.2 0.1 1.5"/>
    <geom name="wall_ny" type="box" pos="0 -2.1 1" size="2.2 0.1 1.5"/>
    <site name="lidar" pos="0.5 0 1.5"/>
    <camera name="front" pos="0 -1.5 1" xyaxes="1 0 0 0 0.5 1" fovy="60"/>
    <body name="base" pos="0 0 0.2">
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <site name="imu"/>
      <!-- on a body: a rangefinder excludes its own body's geoms, and the walls are the world's -->
      <site name="rf0" pos="0.5 0 1.3" zaxis="1 0 0"/>
      <site name="rf1" pos="0.5 0 1.3" zaxis="0 1 0"/>
      <body name="link1" pos="0 0 0.1">
        <joint name="j1" type="hinge" axis="0 0 1" damping="1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.3" size="0.03"/>
        <body name="link2" pos="0 0 0.3">
          <joint name="j2" type="hinge" axis="0 1 0" damping="1"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
          <body name="tool" pos="0.3 0 0"><geom type="sphere" size="0.02"/></body>
        </body>
      </body>
    </body>
    <body name="ball" pos="-1 -1 0.5">
      <freejoint name="ball_joint"/>
      <geom type="sphere" size="0.1"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="m1" joint="j1"/>
    <motor name="m2" joint="j2"/>
  </actuator>
  <sensor>
    <accelerometer name="acc" site="imu"/>
    <gyro name="gyro" site="imu"/>
    <framequat name="quat" objtype="site" objname="imu"/>
    <rangefinder name="rf-0" site="rf0"/>
    <rangefinder name="rf-1" site="rf1"/>
    <jointpos name="j1pos" joint="j1"/>
  </sensor>
</mujoco>
"""

SRV_TEXT = {"std_srvs/srv/SetBool": "bool data\n---\nbool success\nstring message\n",
            # What rosidl makes of an empty request (zenoh-ros2-sdk refuses an empty one).
            "std_srvs/srv/Trigger": "uint8 structure_needs_at_least_one_member\n---\n"
                                    "bool success\nstring message\n"}


def write_definitions(folder: Path) -> None:
    """The .msg/.srv files zenoh-ros2-sdk looks up: every message of rosbags' Jazzy typestore and
    the std_srvs services the bridge serves."""
    write_ros_definitions(folder, SRV_TEXT)


@pytest.fixture(scope="module")
def ros(router: tuple[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """zenoh-ros2-sdk connected (as a Zenoh client) to the test router, offline."""
    folder = tmp_path_factory.mktemp("msgs")
    write_definitions(folder)
    with ros_sdk(folder, router[1]) as sdk:
        yield sdk


@pytest.fixture
def domain() -> int:
    return random.randint(1, 200)


class Status(mjfast.MujocoPlugin):
    """A plugin of the user's with its own ROS 2 types."""

    ros_types: ClassVar[dict[str, str]] = {"~status": "std_msgs/msg/String",
                                           "~say": "std_msgs/msg/String"}

    def load(self, model: Any, data: Any) -> bool:
        self.heard: list[Any] = []
        self.node.subscribe("~say", self.heard.append)
        return True

    def last_stage_callback(self, model: Any, data: Any) -> None:
        self.node.publish("~status", {"data": f"t={data.time:.3f}"})


PLUGINS = [
    {"name": "joints", "type": "mjfast/JointStatePublisher", "topic": "/joint_states"},
    {"name": "clock", "type": "mjfast/ClockPublisher"},
    {"name": "scan", "type": "mjfast/Lidar", "site": "lidar", "topic": "/scan",
     "horizontal": {"samples": 9, "min_angle": -math.pi, "max_angle": math.pi},
     "range": {"min": 0.05, "max": 10.0}, "rate_hz": 100},
    {"name": "cloud", "type": "mjfast/Lidar", "site": "lidar",
     "horizontal": {"samples": 8, "min_angle": -1.0, "max_angle": 1.0},
     "vertical": {"samples": 3, "min_angle": -0.2, "max_angle": 0.2},
     "range": {"max": 10.0}, "rate_hz": 100},
    {"name": "rf", "type": "mjfast/RangefinderLidar", "prefix": "rf", "max_angle": math.pi / 2,
     "range": {"max": 10.0}, "rate_hz": 100},
    {"name": "odom", "type": "mjfast/FreeJointStatePublisher", "bodies": ["ball"]},
    {"name": "sensors", "type": "mjfast/SensorPublisher",
     "sensors": ["acc", "gyro", "quat", "rf-0", "j1pos"],
     "imu": {"name": "imu", "accelerometer": "acc", "gyro": "gyro", "orientation": "quat"}},
    {"name": "tf", "type": "mjfast/TfPublisher", "rate_hz": 100},
    {"name": "arm", "type": "mjfast/ForwardCommand", "joints": ["j1", "j2"]},
    {"name": "drive", "type": "mjfast/BaseVelocity", "joint": "ball_joint"},
    {"name": "status", "type": "test/Status"},
]


@pytest.fixture
def env() -> Iterator[mjfast.MujocoEnv]:
    register_plugin("test/Status", Status)
    try:
        with mjfast.MujocoEnv(ROOM_XML, params={"mujoco_server": {"MujocoPlugins": PLUGINS}}) as e:
            yield e
    finally:
        unregister_plugin("test/Status")


@pytest.fixture
def bridge(env: mjfast.MujocoEnv, router: tuple[str, int], domain: int) -> Iterator[Bridge]:
    with Bridge(env, domain_id=domain, router=router[0]) as b:
        yield b


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.event = threading.Event()

    def __call__(self, message: Any) -> None:
        self.messages.append(message)
        self.event.set()


def subscribe(ros: Any, router: tuple[str, int], domain: int, topic: str, ros_type: str,
              **kwargs: Any) -> tuple[Any, Inbox]:
    inbox = Inbox()
    subscriber = ros.ROS2Subscriber(topic, ros_type, inbox, node_name="probe", domain_id=domain,
                                    router_port=router[1], **kwargs)
    return subscriber, inbox


def step_until(env: mjfast.MujocoEnv, inbox: Inbox, count: int = 1) -> None:
    """Steps until `inbox` holds `count` messages: the router needs a moment to route a new
    subscription, and a step publishes what its plugins publish."""
    assert wait_for(lambda: env.step(5) or len(inbox.messages) >= count, TIMEOUT), (
        f"got {len(inbox.messages)} of {count} messages")


def stamp_seconds(header: Any) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


# -- the wire ----------------------------------------------------------------------------------


def client_session(router: tuple[str, int]) -> zenoh.Session:
    """A plain Zenoh client session on the router (the tests' and benchmarks' raw side)."""
    config = zenoh.Config()
    config.insert_json5("mode", '"client"')
    config.insert_json5("connect/endpoints", f'["{router[0]}"]')
    config.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(config)


def bare_service(session: zenoh.Session, domain: int, name: str, service_type: str,
                 response: dict[str, Any], answered: list[int] | None = None) -> None:
    """A ROS 2 service `name` answered by a bare queryable on `session`, on the key rmw_zenoh
    gives it: the `response` fields serialised once, that reply and nothing else (the
    benchmarks' floor under a server). Each call appends 1 to `answered`, when given."""
    response_type = f"{service_type}_Response"
    prebuilt = bytes(ros_types.serialize(ros_types.message_class(response_type)(**response),
                                         response_type))

    def reply(query: zenoh.Query) -> None:
        if answered is not None:
            answered.append(1)
        query.reply(query.key_expr, prebuilt)

    session.declare_queryable(wire.data_key(domain, name, ros_types.dds_type_name(service_type),
                                            ros_types.type_hash(service_type)),
                              reply, complete=True)


def liveliness_keys(router: tuple[str, int], domain: int) -> list[str]:
    with client_session(router) as session:
        replies = session.liveliness().get(f"@ros2_lv/{domain}/**", timeout=5.0)
        return sorted(str(r.ok.key_expr) for r in replies if r.ok is not None)


def test_graph_tokens_name_the_node_its_topics_and_services_and_go_on_close(
        env: mjfast.MujocoEnv, router: tuple[str, int], domain: int, ros: Any) -> None:
    bridge = Bridge(env, domain_id=domain, router=router[0])
    try:
        keys = liveliness_keys(router, domain)
        zid = bridge.zid
        assert f"@ros2_lv/{domain}/{zid}/0/0/NN/%/%/mujoco_server" in keys
        joint_hash = "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e"
        assert any(k.startswith(f"@ros2_lv/{domain}/{zid}/0/") and k.endswith(
            f"/MP/%/%/mujoco_server/%joint_states/sensor_msgs::msg::dds_::JointState_/"
            f"{joint_hash}/::,10:,:,:,,") for k in keys), keys
        assert any("/MP/%/%/mujoco_server/%tf_static/tf2_msgs::msg::dds_::TFMessage_/" in k
                   and k.endswith("/:1:,1:,:,:,,") for k in keys)
        assert any("/MS/%/%/mujoco_server/%mujoco_server%arm%commands/"
                   "std_msgs::msg::dds_::Float64MultiArray_/" in k for k in keys)
        assert any(k.endswith(
            "/SS/%/%/mujoco_server/%mujoco_server%reset/std_srvs::srv::dds_::Trigger_/"
            "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f/::,10:,:,:,,")
            for k in keys)
        # The independent client's graph view (ros2 topic list / service list).
        topics = dict(ros.get_topic_names_and_types(domain_id=domain, router_port=router[1],
                                                    timeout=5.0))
        assert topics["/joint_states"] == ["sensor_msgs/msg/JointState"]
        assert topics["/clock"] == ["rosgraph_msgs/msg/Clock"]
        assert topics["/mujoco_server/status/status"] == ["std_msgs/msg/String"]
        services = dict(ros.get_service_names_and_types(domain_id=domain, router_port=router[1],
                                                        timeout=5.0))
        assert services["/mujoco_server/pause"] == ["std_srvs/srv/SetBool"]
        assert services["/mujoco_server/reload"] == ["std_srvs/srv/Trigger"]
    finally:
        bridge.close()
    assert liveliness_keys(router, domain) == []
    bridge.close()  # idempotent


def test_attachment_and_keys_of_a_put_are_rmw_zenohs(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int) -> None:
    samples: list[zenoh.Sample] = []
    with client_session(router) as session:
        session.declare_subscriber(f"{domain}/clock/**", samples.append)
        assert wait_for(lambda: env.step(1) or len(samples) >= 3, TIMEOUT)
    assert str(samples[0].key_expr) == (
        f"{domain}/clock/rosgraph_msgs::msg::dds_::Clock_/"
        f"{ros_types.type_hash('rosgraph_msgs/msg/Clock')}")
    first, second = (wire.Attachment.decode(s.attachment.to_bytes()) for s in samples[:2])
    assert len(samples[0].attachment.to_bytes()) == 33
    assert second.sequence_number == first.sequence_number + 1
    assert first.gid == second.gid and len(first.gid) == 16
    assert abs(first.source_timestamp / 1e9 - __import__("time").time()) < 60


def test_no_router_is_a_clear_error_naming_the_endpoint(env: mjfast.MujocoEnv) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    with pytest.raises(RouterNotFound, match=f"no Zenoh router at {endpoint}.*rmw_zenohd"):
        Bridge(env, router=endpoint)


# -- outbound ----------------------------------------------------------------------------------


def test_joint_state_clock_and_odometry_match_the_simulation(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    subs = [subscribe(ros, router, domain, "/joint_states", "sensor_msgs/msg/JointState"),
            subscribe(ros, router, domain, "/clock", "rosgraph_msgs/msg/Clock"),
            subscribe(ros, router, domain, "/mujoco_server/odom/ball", "nav_msgs/msg/Odometry")]
    try:
        env.control.write(ctrl=np.array([0.5, -0.3]))
        for _, inbox in subs:
            step_until(env, inbox)
        # No more steps: the last message out on each topic arrives, and is the bus's latest.
        joints = env.bus.latest("/joint_states")
        ball = env.bus.latest("/mujoco_server/odom/ball")
        assert wait_for(lambda: stamp_seconds(subs[0][1].messages[-1].header) == pytest.approx(
            joints["time"]) and stamp_seconds(subs[2][1].messages[-1].header) == pytest.approx(
            ball["time"]), TIMEOUT)
        message = subs[0][1].messages[-1]
        assert list(message.name) == ["j1", "j2"]
        np.testing.assert_array_equal(message.position, joints["position"])
        np.testing.assert_array_equal(message.velocity, joints["velocity"])
        np.testing.assert_array_equal(message.effort, joints["effort"])
        assert stamp_seconds(message.header) == pytest.approx(joints["time"], abs=1e-9)
        odometry = subs[2][1].messages[-1]
        assert odometry.header.frame_id == "world" and odometry.child_frame_id == "ball"
        pose = odometry.pose.pose
        np.testing.assert_allclose([pose.position.x, pose.position.y, pose.position.z],
                                   ball["position"])
        w, x, y, z = ball["quaternion"]
        np.testing.assert_allclose([pose.orientation.x, pose.orientation.y, pose.orientation.z,
                                    pose.orientation.w], [x, y, z, w])
        assert stamp_seconds(odometry.header) == pytest.approx(ball["time"], abs=1e-9)
    finally:
        for subscriber, _ in subs:
            subscriber.close()


def test_clock_stamps_are_simulated_time(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    subscriber, inbox = subscribe(ros, router, domain, "/clock", "rosgraph_msgs/msg/Clock")
    try:
        step_until(env, inbox)
        env.step(1)
        expected = round(env.data.time * 1e9)

        def newest_ns() -> int:
            last = inbox.messages[-1].clock
            return int(last.sec * 1_000_000_000 + last.nanosec)

        # Messages of earlier steps may still be on their way: they come in order, so the newest
        # one comes to carry the last step's simulated time, to the nanosecond.
        assert wait_for(lambda: newest_ns() == expected, TIMEOUT), (newest_ns(), expected)
    finally:
        subscriber.close()


def expected_range(azimuth: float, origin: tuple[float, float] = (0.5, 0.0)) -> float:
    """Distance from `origin` along `azimuth` to the room's inner walls at x, y = +-2."""
    c, s = math.cos(azimuth), math.sin(azimuth)
    hits = []
    if c > 1e-12:
        hits.append((2 - origin[0]) / c)
    if c < -1e-12:
        hits.append((-2 - origin[0]) / c)
    if s > 1e-12:
        hits.append((2 - origin[1]) / s)
    if s < -1e-12:
        hits.append((-2 - origin[1]) / s)
    return min(hits)


def test_lidar_scans_give_the_analytic_ranges_of_the_box_room(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    subs = [subscribe(ros, router, domain, "/scan", "sensor_msgs/msg/LaserScan"),
            subscribe(ros, router, domain, "/mujoco_server/rf/scan", "sensor_msgs/msg/LaserScan"),
            subscribe(ros, router, domain, "/mujoco_server/cloud/points",
                      "sensor_msgs/msg/PointCloud2")]
    try:
        for _, inbox in subs:
            step_until(env, inbox)
        scan = subs[0][1].messages[-1]
        assert scan.header.frame_id == "lidar"
        angles = scan.angle_min + scan.angle_increment * np.arange(len(scan.ranges))
        np.testing.assert_allclose(scan.ranges, [expected_range(a) for a in angles], rtol=1e-5)
        assert scan.range_max == pytest.approx(10.0) and scan.range_min == pytest.approx(0.05)
        rf = subs[1][1].messages[-1]
        assert rf.header.frame_id == "rf0"
        np.testing.assert_allclose(rf.ranges, [1.5, 2.0], rtol=1e-5)
        cloud = subs[2][1].messages[-1]
        assert (cloud.height, cloud.width, cloud.point_step, cloud.is_dense) == (3, 8, 12, False)
        assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == [
            ("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
        points = np.frombuffer(bytes(cloud.data), dtype=np.float32).reshape(3, 8, 3)
        np.testing.assert_array_equal(points, env.bus.latest("/mujoco_server/cloud/points")[
            "points"]) if stamp_seconds(cloud.header) == env.bus.latest(
            "/mujoco_server/cloud/points")["time"] else None
        middle = points[1]  # elevation 0: the analytic wall distances again
        np.testing.assert_allclose(np.hypot(middle[:, 0], middle[:, 1]),
                                   [expected_range(a) for a in np.linspace(-1, 1, 8)], rtol=1e-5)
    finally:
        for subscriber, _ in subs:
            subscriber.close()


def test_sensor_types_and_frames(env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int],
                                 domain: int, ros: Any) -> None:
    subs = {
        "acc": subscribe(ros, router, domain, "/mujoco_server/sensors/acc",
                         "geometry_msgs/msg/Vector3Stamped"),
        "quat": subscribe(ros, router, domain, "/mujoco_server/sensors/quat",
                          "geometry_msgs/msg/QuaternionStamped"),
        "rf-0": subscribe(ros, router, domain, "/mujoco_server/sensors/rf-0",
                          "sensor_msgs/msg/Range"),
        "j1pos": subscribe(ros, router, domain, "/mujoco_server/sensors/j1pos",
                           "std_msgs/msg/Float64MultiArray"),
        "imu": subscribe(ros, router, domain, "/mujoco_server/sensors/imu",
                         "sensor_msgs/msg/Imu"),
    }
    try:
        for _, inbox in subs.values():
            step_until(env, inbox)
        acc = subs["acc"][1].messages[-1]
        assert acc.header.frame_id == "imu"
        assert acc.vector.z == pytest.approx(9.81, abs=1e-2)  # at rest: gravity's reaction
        quat = subs["quat"][1].messages[-1].quaternion
        assert [quat.x, quat.y, quat.z, quat.w] == pytest.approx([0, 0, 0, 1])
        assert subs["rf-0"][1].messages[-1].range == pytest.approx(1.5, rel=1e-5)
        joint = subs["j1pos"][1].messages[-1]
        assert len(joint.data) == 1 and joint.layout.dim[0].size == 1
        imu = subs["imu"][1].messages[-1]
        parts = env.bus.latest("/mujoco_server/sensors/imu")
        assert imu.header.frame_id == "imu"
        if stamp_seconds(imu.header) == parts["time"]:
            assert [imu.linear_acceleration.x, imu.linear_acceleration.y,
                    imu.linear_acceleration.z] == pytest.approx(parts["accelerometer"])
            assert imu.angular_velocity.x == pytest.approx(parts["gyro"][0])
        assert imu.orientation.w == pytest.approx(1.0) and imu.orientation_covariance[0] == 0
        assert imu.linear_acceleration.z == pytest.approx(9.81, abs=1e-2)
    finally:
        for subscriber, _ in subs.values():
            subscriber.close()


def test_tf_is_relative_to_the_parent_and_tf_static_reaches_a_late_joiner(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    from zenoh_ros2_sdk.qos import QosDurability, QosProfile

    env.control.write(ctrl=np.array([1.0, 0.5]))
    env.step(200)  # long after the one /tf_static message
    tf, tf_inbox = subscribe(ros, router, domain, "/tf", "tf2_msgs/msg/TFMessage")
    static, static_inbox = subscribe(
        ros, router, domain, "/tf_static", "tf2_msgs/msg/TFMessage",
        qos=QosProfile(durability=QosDurability.TRANSIENT_LOCAL, history_depth=1))
    try:
        assert static_inbox.event.wait(TIMEOUT), "the late joiner got no /tf_static"
        welded = {t.child_frame_id: t for t in static_inbox.messages[0].transforms}
        # The welded bodies, and the sites and cameras as children of their bodies.
        assert set(welded) == {"base", "tool", "lidar", "imu", "rf0", "rf1", "front",
                               "front_optical"}
        assert welded["lidar"].header.frame_id == "world"
        assert welded["rf0"].header.frame_id == "base"
        assert welded["base"].header.frame_id == "world"
        assert welded["tool"].header.frame_id == "link2"
        assert [welded["tool"].transform.translation.x, welded["tool"].transform.translation.y,
                welded["tool"].transform.translation.z] == pytest.approx([0.3, 0, 0])
        step_until(env, tf_inbox)
        env.step(5)
        latest = env.bus.latest("/tf")["time"]
        assert wait_for(lambda: stamp_seconds(
            tf_inbox.messages[-1].transforms[0].header) == pytest.approx(latest), TIMEOUT)
        moving = {t.child_frame_id: t for t in tf_inbox.messages[-1].transforms}
        assert set(moving) == {"link1", "link2", "ball"}
        link2 = moving["link2"]
        assert link2.header.frame_id == "link1"
        assert stamp_seconds(link2.header) == pytest.approx(env.data.time, abs=1e-9)  # due now
        # link2 sits 0.3 above link1 and turns about its y axis by j2.
        r = link2.transform.rotation
        angle = env.data.qpos[mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_JOINT, "j2")]
        assert [link2.transform.translation.x, link2.transform.translation.z] == pytest.approx(
            [0, 0.3])
        assert [r.x, r.y, r.z, r.w] == pytest.approx(
            [0, math.sin(angle / 2), 0, math.cos(angle / 2)], abs=1e-9)
        assert moving["ball"].header.frame_id == "world"
    finally:
        tf.close()
        static.close()


# -- inbound -----------------------------------------------------------------------------------


def test_forward_command_applies_ctrl_and_never_a_wrong_length(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    publisher = ros.ROS2Publisher("/mujoco_server/arm/commands", "std_msgs/msg/Float64MultiArray",
                                  node_name="commander", domain_id=domain, router_port=router[1])
    layout = publisher.session_mgr.store.types["std_msgs/msg/MultiArrayLayout"](dim=[],
                                                                              data_offset=0)

    def send(*values: float) -> None:
        publisher.publish(layout=layout, data=np.array(values, dtype=np.float64))

    try:
        assert wait_for(lambda: send(0.25, -0.5) or env.step(1) or bool(
            env.control.read().ctrl[0] == 0.25), TIMEOUT)
        np.testing.assert_array_equal(env.control.read().ctrl, [0.25, -0.5])
        send(9.0, 9.0, 9.0)
        send(1.0, 2.0)
        assert wait_for(lambda: env.step(1) or bool(env.control.read().ctrl[0] == 1.0),
                        TIMEOUT)
        with env.acquire_plugin("arm") as arm:
            stats = arm.statistics()
        assert stats["rejected"] == 1 and stats["applied"] >= 2
        env.step(1)
        np.testing.assert_array_equal(env.data.ctrl, [1.0, 2.0])
    finally:
        publisher.close()


def test_twist_drives_base_velocity(env: mjfast.MujocoEnv, bridge: Bridge,
                                    router: tuple[str, int], domain: int, ros: Any) -> None:
    heard: list[Any] = []
    env.bus.subscribe("/mujoco_server/drive/cmd_vel", heard.append)
    publisher = ros.ROS2Publisher("/mujoco_server/drive/cmd_vel", "geometry_msgs/msg/Twist",
                                  node_name="teleop", domain_id=domain, router_port=router[1])
    Vector3 = publisher.session_mgr.store.types["geometry_msgs/msg/Vector3"]
    try:
        assert wait_for(lambda: publisher.publish(
            linear=Vector3(x=0.5, y=0.0, z=0.0), angular=Vector3(x=0.0, y=0.0, z=0.2))
            or bool(heard), TIMEOUT)
        assert heard[-1] == {"vx": 0.5, "vy": 0.0, "yaw_rate": 0.2}
        env.step(1)
        dof = env.model.jnt_dofadr[mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_JOINT,
                                                     "ball_joint")]
        assert env.data.qvel[dof] == pytest.approx(0.5, abs=0.05)
    finally:
        publisher.close()


def test_ros_types_plugin_goes_out_and_in(env: mjfast.MujocoEnv, bridge: Bridge,
                                          router: tuple[str, int], domain: int,
                                          ros: Any) -> None:
    subscriber, inbox = subscribe(ros, router, domain, "/mujoco_server/status/status",
                                  "std_msgs/msg/String")
    publisher = ros.ROS2Publisher("/mujoco_server/status/say", "std_msgs/msg/String",
                                  node_name="talker", domain_id=domain, router_port=router[1])
    try:
        step_until(env, inbox)
        assert inbox.messages[-1].data.startswith("t=")
        with env.acquire_plugin("status") as status:
            heard = status.heard
        assert wait_for(lambda: publisher.publish(data="hello") or bool(heard), TIMEOUT)
        assert heard[0] == {"data": "hello"}
    finally:
        subscriber.close()
        publisher.close()


def test_malformed_cdr_is_counted_and_logged_and_nothing_breaks(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        caplog: pytest.LogCaptureFixture) -> None:
    key = wire.data_key(domain, "/mujoco_server/arm/commands",
                        "std_msgs::msg::dds_::Float64MultiArray_",
                        ros_types.type_hash("std_msgs/msg/Float64MultiArray"))
    before = env.control.read().ctrl.copy()
    with client_session(router) as session, caplog.at_level("WARNING", logger="mjfast.ros2"):
        assert wait_for(lambda: session.put(key, b"\x00\x01\x00\x00\xff\xff\xff\x7f") or (
            bridge.statistics()["malformed"] >= 1), TIMEOUT)
    assert "malformed" in caplog.text
    np.testing.assert_array_equal(env.control.read().ctrl, before)
    env.step(10)  # the env and the bridge go on
    assert bridge.statistics()["messages_out"] > 0


# -- services ----------------------------------------------------------------------------------


def client(ros: Any, router: tuple[str, int], domain: int, name: str, srv_type: str) -> Any:
    return ros.ROS2ServiceClient(name, srv_type, node_name="caller", domain_id=domain,
                                 router_port=router[1], timeout=TIMEOUT)


def test_pause_reset_and_reload_services(env: mjfast.MujocoEnv, bridge: Bridge,
                                         router: tuple[str, int], domain: int, ros: Any) -> None:
    pause = client(ros, router, domain, "/mujoco_server/pause", "std_srvs/srv/SetBool")
    reset = client(ros, router, domain, "/mujoco_server/reset", "std_srvs/srv/Trigger")
    reload = client(ros, router, domain, "/mujoco_server/reload", "std_srvs/srv/Trigger")
    try:
        reply = pause.call(data=True)
        assert reply is not None and reply.success and env.paused
        assert pause.call(data=False).success and not env.paused
        env.step(50)
        assert env.data.time > 0
        assert reset.call().success
        assert env.data.time == 0
        assert reload.call().success
        out = bridge.statistics()["messages_out"]
        env.step(10)  # the reloaded plugins' topics go out again (the bridge redeclared them)
        # (sent by the bridge's writer thread, once the step has handed them over)
        assert wait_for(lambda: bridge.statistics()["messages_out"] > out, TIMEOUT)
        assert any("%joint_states" in k for k in liveliness_keys(router, domain))
        # A failure: the plugin configuration a reload reads is broken.
        env.params.set("/mujoco_server/MujocoPlugins", 42)
        failed = reload.call()
        assert failed is not None and not failed.success
        assert failed.message.startswith("ConfigError: /mujoco_server/MujocoPlugins: expected")
        assert bridge.statistics()["failed_calls"] == 1
    finally:
        for c in (pause, reset, reload):
            c.close()


def test_the_std_srvs_services_are_the_calls_tables_ros2_rows(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    from mjfast.sim.calls import SIM_CALLS

    services = dict(ros.get_service_names_and_types(domain_id=domain, router_port=router[1],
                                                    timeout=5.0))
    # (simulation_interfaces' services, SPEC §25: test_simulation_interfaces.py)
    served = {name: types for name, types in services.items()
              if name.startswith("/mujoco_server/") and types[0].startswith("std_srvs/")}
    assert served == {f"/mujoco_server/{call.name}": [call.ros2.type] for call in SIM_CALLS
                      if call.ros2 is not None}
    assert set(served) == {"/mujoco_server/pause", "/mujoco_server/reset",
                           "/mujoco_server/reload"}  # the others stay on mjfast's bus (SPEC §19)


# -- serve --ros2 ------------------------------------------------------------------------------


def test_serve_ros2_runs_until_sigint_and_exits_0(tmp_path: Path, router: tuple[str, int],
                                                  domain: int) -> None:
    model = tmp_path / "room.xml"
    model.write_text(ROOM_XML)
    params = tmp_path / "params.yaml"
    params.write_text(textwrap.dedent("""
        mujoco_server:
          MujocoPlugins:
            - {type: mjfast/JointStatePublisher, topic: /joint_states, rate_hz: 10}
            - {type: mjfast/HeartbeatPublisher}
    """))
    child = subprocess.Popen(
        [sys.executable, "-m", "mjfast", "serve", str(model), "--params", str(params), "--ros2",
         "--domain-id", str(domain), "--router", router[0], "--realtime", "20", "--listen",
         f"tcp/127.0.0.1:{free_port()}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: child.poll() is not None or any(
            "%joint_states" in k for k in liveliness_keys(router, domain)), 60), "no node"
        assert child.poll() is None, child.communicate()
        samples: list[Any] = []
        with client_session(router) as session:
            session.declare_subscriber(f"{domain}/joint_states/**", samples.append)
            # It runs and publishes; 1.5 simulated seconds: the heartbeat has beaten twice.
            assert wait_for(lambda: len(samples) >= 15, TIMEOUT)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    assert "ROS 2" in out and "Traceback" not in err
    assert "/mujoco_server/HeartbeatPublisher/heartbeat" in out  # listed as not bridged
    assert liveliness_keys(router, domain) == []


LEFT_OPEN_SCRIPT = """
import sys
import mjfast
from mjfast.ros2 import Bridge

endpoint, domain = sys.argv[1], int(sys.argv[2])
plugins = [{"name": "arm", "type": "mjfast/ForwardCommand", "joints": ["j0"]},
           {"type": "mjfast/JointStatePublisher"}]
xml = ('<mujoco><worldbody><body><joint name="j0" type="hinge"/><geom size="0.1"/></body>'
       '</worldbody><actuator><motor joint="j0"/></actuator></mujoco>')
env = mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": plugins}})
bridge = Bridge(env, domain_id=domain, router=endpoint)
print("ready", flush=True)
while env.control.read().ctrl[0] != 0.5:  # the commands arrive, and keep arriving
    env.step(1)
print("leaving with the bridge and the env open", flush=True)
"""


def test_a_program_that_leaves_its_bridge_open_still_exits(router: tuple[str, int],
                                                           domain: int) -> None:
    # zenoh-python's own callback threads are not daemons: a bridge left open used to keep the
    # interpreter from exiting. Commands keep arriving while it exits.
    child = subprocess.Popen([sys.executable, "-c", LEFT_OPEN_SCRIPT, router[0], str(domain)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ros_type = "std_msgs/msg/Float64MultiArray"
    key = wire.data_key(domain, "/mujoco_server/arm/commands", ros_types.dds_type_name(ros_type),
                        ros_types.type_hash(ros_type))
    command = bytes(ros_types.serialize(ros_types.message_class(ros_type)(
        layout=ros_types.message_class("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0),
        data=np.array([0.5])), ros_type))
    stop = threading.Event()
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with client_session(router) as session:
            publisher = session.declare_publisher(key)

            def flood() -> None:
                while not stop.is_set():
                    publisher.put(command)
                    stop.wait(0.001)

            flooding = threading.Thread(target=flood)
            flooding.start()
            try:
                out, err = child.communicate(timeout=60)
            finally:
                stop.set()
                flooding.join()
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert "leaving with the bridge and the env open" in out
    assert "Traceback" not in err and "FATAL" not in err, err


def test_serve_ros2_without_a_router_is_one_line_exit_1(tmp_path: Path) -> None:
    model = tmp_path / "room.xml"
    model.write_text(ROOM_XML)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, "-m", "mjfast", "serve", str(model), "--ros2", "--router", endpoint,
         "--listen", f"tcp/127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert endpoint in result.stderr and "ros2 run rmw_zenoh_cpp rmw_zenohd" in result.stderr
    assert "--ros2-router" in result.stderr


def test_camera_images_and_camera_info_from_fovy(router: tuple[str, int], domain: int,
                                                 ros: Any) -> None:
    params = {"mujoco_server": {
        "cameras": {"front": {"rate_hz": 100.0, "planes": ["rgb", "depth", "segmentation"]}},
        "MujocoPlugins": [{"name": "cams", "type": "mjfast/CameraPublisher",
                           "cameras": ["front"], "topic": "/camera"}]}}
    with mjfast.MujocoEnv(ROOM_XML, params=params, render_sync=True) as env, \
            Bridge(env, domain_id=domain, router=router[0]):
        subs = {plane: subscribe(ros, router, domain, f"/camera/front/{plane}",
                                 "sensor_msgs/msg/Image")
                for plane in ("rgb", "depth", "segmentation")}
        info_sub, info = subscribe(ros, router, domain, "/camera/front/camera_info",
                                   "sensor_msgs/msg/CameraInfo")
        try:
            for _, inbox in subs.values():
                step_until(env, inbox)
            step_until(env, info)
            rgb = subs["rgb"][1].messages[-1]
            assert (rgb.encoding, rgb.height, rgb.width, rgb.step) == ("rgb8", 48, 64, 192)
            frame = env.bus.latest("/camera/front/rgb")
            if stamp_seconds(rgb.header) == frame["simulation_time_ns"] / 1e9:
                assert bytes(rgb.data) == frame["data"].tobytes()
            depth = subs["depth"][1].messages[-1]
            assert (depth.encoding, depth.step) == ("32FC1", 256)
            metres = np.frombuffer(bytes(depth.data), dtype=np.float32)
            assert 0.5 < float(np.median(metres)) < 10  # the room, in metres
            segmentation = subs["segmentation"][1].messages[-1]
            assert (segmentation.encoding, segmentation.step) == ("32SC1", 256)
            camera_info = info.messages[-1]
            assert camera_info.header.frame_id == rgb.header.frame_id == "front_optical"
            fy = 24 / math.tan(math.radians(60) / 2)
            np.testing.assert_allclose(camera_info.k, [fy, 0, 32, 0, fy, 24, 0, 0, 1])
            assert (camera_info.width, camera_info.height) == (64, 48)
            assert stamp_seconds(rgb.header) > 0
        finally:
            for subscriber, _ in subs.values():
                subscriber.close()
            info_sub.close()


@pytest.mark.parametrize(("config", "named"), [
    ({"type": "mjfast/ForwardCommand"}, "exactly one of joints or actuators"),
    ({"type": "mjfast/ForwardCommand", "joints": ["j1"], "actuators": ["m1"]}, "exactly one"),
    ({"type": "mjfast/ForwardCommand", "joints": ["j3"]}, "'j3'"),
    ({"type": "mjfast/ForwardCommand", "actuators": ["m9"]}, "'m9'"),
    ({"type": "mjfast/ForwardCommand", "joints": ["ball_joint"]}, "driven by 0 actuators"),
    ({"type": "mjfast/TfPublisher", "bodies": ["bal"]}, "'bal'"),
    ({"type": "mjfast/TfPublisher", "rate_hz": 0}, "rate_hz"),
    ({"type": "mjfast/TfPublisher", "frame": "x"}, "'frame'"),
])
def test_new_plugins_misconfiguration_is_a_load_failure_naming_it(config: dict[str, Any],
                                                                  named: str) -> None:
    with mjfast.MujocoEnv(ROOM_XML, params={"MujocoPlugins": [config]}) as env:
        (info,) = env.plugins
        assert info.state is mjfast.PluginState.FAILED and info.failure is not None
        assert named in info.failure.message


def test_serve_ros2_router_is_the_router_nodes_connect_to(tmp_path: Path) -> None:
    model = tmp_path / "room.xml"
    model.write_text(ROOM_XML)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    child = subprocess.Popen(
        [sys.executable, "-m", "mjfast", "serve", str(model), "--ros2", "--ros2-router",
         "--router", endpoint, "--domain-id", "7", "--listen", f"tcp/127.0.0.1:{free_port()}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def node_seen() -> bool:
            try:  # nothing listens there until the child is up
                return any("/NN/" in k for k in liveliness_keys((endpoint, 0), 7))
            except zenoh.ZError:
                return False

        assert wait_for(lambda: child.poll() is not None or node_seen(), 60)
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    assert f"via its own router at {endpoint}" in err


# -- lifecycle: bounded queues, close, several consumers (SPEC §18) -----------------------------

# The raw Zenoh side of a flood of std_srvs calls: fire-and-forget queries with rmw_zenoh's
# attachment, whose replies are counted, not waited for.
FLOOD_CODE = """
import itertools, os, threading, time
import zenoh
from mjfast.ros2 import types as ros_types, wire

def flood(session, domain, service, count):
    ros_type = "std_srvs/srv/Trigger"
    key = wire.data_key(domain, service, ros_types.dds_type_name(ros_type),
                        ros_types.type_hash(ros_type))
    request = bytes(ros_types.serialize(ros_types.message_class(ros_type + "_Request")(
        structure_needs_at_least_one_member=0), ros_type + "_Request"))
    gid = os.urandom(16)
    replies = {"ok": 0, "refused": 0}
    lock = threading.Lock()
    def on_reply(reply):
        if reply.ok is None:
            return
        response = ros_types.deserialize(reply.ok.payload.to_bytes(), ros_type + "_Response")
        with lock:
            replies["ok" if response.success else "refused"] += 1
    for sequence in range(1, count + 1):
        session.get(key, on_reply, payload=request, timeout=60.0,
                    attachment=wire.encode_attachment(sequence, time.time_ns(), gid))
    return replies
"""

FLOOD_THEN_CLOSE_SCRIPT = FLOOD_CODE + """
import json, sys
import mjfast
from mjfast.ros2 import Bridge

endpoint, domain = sys.argv[1], int(sys.argv[2])
xml = ('<mujoco><worldbody><body><joint name="j0" type="hinge"/><geom size="0.1"/></body>'
       '</worldbody></mujoco>')
params = {"mujoco_server": {"MujocoPlugins": [{"type": "mjfast/JointStatePublisher"}]}}
env = mjfast.MujocoEnv(xml, params=params)
bridge = Bridge(env, domain_id=domain, router=endpoint)
config = zenoh.Config()
config.insert_json5("mode", '"client"')
config.insert_json5("connect/endpoints", json.dumps([endpoint]))
config.insert_json5("scouting/multicast/enabled", "false")
session = zenoh.open(config)
from mjfast.interop.ros2.bridge import _SERVICE_QUEUE, _SERVICE_WORKERS
first = env.model_generation
replies = flood(session, domain, "/mujoco_server/reload", 4000)
# Closed once a few reloads ran and every call has reached the bridge: all but those waiting in
# its queue or running are answered (a call still on its way when the node leaves the graph has
# no one to answer it, as with any ROS 2 server that goes; under load, 4 once were).
deadline = time.monotonic() + 30
while (env.model_generation < first + 3
       or sum(replies.values()) < 4000 - _SERVICE_QUEUE - _SERVICE_WORKERS) \
        and time.monotonic() < deadline:
    time.sleep(0.01)
started = time.monotonic()
bridge.close()
took = time.monotonic() - started
closed_at = env.model_generation
time.sleep(1.0)
deadline = time.monotonic() + 30  # every call has its reply: run, refused or refused at close
while sum(replies.values()) < 4000 and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"took": took, "reloads": closed_at - first,
                  "after_close": env.model_generation - closed_at, "replies": replies,
                  "stats": bridge.statistics()}), flush=True)
session.close()
env.close()
"""


def test_a_flood_of_service_calls_is_bounded_and_close_ends_it(router: tuple[str, int],
                                                               domain: int) -> None:
    # 4,000 reload calls used to queue without bound: close() took 20 s, the workers reloaded
    # the env after it returned, and the process aborted at exit.
    result = subprocess.run([sys.executable, "-c", FLOOD_THEN_CLOSE_SCRIPT, router[0],
                             str(domain)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "FATAL" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert report["took"] < 5.0, report
    assert report["after_close"] == 0, report  # nothing of the bridge touches the env after
    # Every call was answered: run, or refused (success false) past the queue or at close.
    assert sum(report["replies"].values()) == 4000, report
    assert report["replies"]["ok"] <= report["reloads"] + 1, report
    assert report["stats"]["refused_calls"] > 0, report


def test_serve_ros2_with_a_backlog_of_calls_stops_cleanly_on_sigint(
        tmp_path: Path, router: tuple[str, int], domain: int) -> None:
    model = tmp_path / "room.xml"
    model.write_text(ROOM_XML)
    child = subprocess.Popen(
        [sys.executable, "-m", "mjfast", "serve", str(model), "--ros2", "--domain-id",
         str(domain), "--router", router[0], "--listen", f"tcp/127.0.0.1:{free_port()}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    namespace: dict[str, Any] = {}
    exec(FLOOD_CODE, namespace)
    try:
        assert wait_for(lambda: child.poll() is not None or any(
            "%reload" in k for k in liveliness_keys(router, domain)), 60), "no node"
        assert child.poll() is None, child.communicate()
        with client_session(router) as session:
            replies = namespace["flood"](session, domain, "/mujoco_server/reload", 3000)
            assert wait_for(lambda: replies["ok"] >= 1, TIMEOUT)  # reloads run, more wait
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=60)
            # Each call has its reply: the waiting ones are refused, not run (the old queue had
            # no bound, and the process ran every waiting reload before it exited).
            assert wait_for(lambda: sum(replies.values()) == 3000, TIMEOUT), replies
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    assert "FATAL" not in err and "Traceback" not in err, err
    assert replies["refused"] > 0, replies
    assert liveliness_keys(router, domain) == []


UNPACED_CLOSE_SCRIPT = """
import json, sys, time
import zenoh
import mjfast
from mjfast.ros2 import Bridge

endpoint, domain = sys.argv[1], int(sys.argv[2])
plugins = [{"type": "mjfast/JointStatePublisher"}, {"type": "mjfast/ClockPublisher"},
           {"type": "mjfast/TfPublisher", "rate_hz": 0}]
xml = ('<mujoco><worldbody><body name="b"><joint name="j0" type="hinge"/><geom size="0.1"/>'
       '<body name="w"><geom size="0.05"/></body></body></worldbody></mujoco>')
env = mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": plugins}})
config = zenoh.Config()
config.insert_json5("mode", '"client"')
config.insert_json5("connect/endpoints", json.dumps([endpoint]))
config.insert_json5("scouting/multicast/enabled", "false")
watcher = zenoh.open(config)

def tokens():
    replies = watcher.liveliness().get(f"@ros2_lv/{domain}/**", timeout=5.0)
    return [str(r.ok.key_expr) for r in replies if r.ok is not None]

env.start(None)  # unpaced: the physics thread publishes as fast as it can
for attempt in range(20):
    bridge = Bridge(env, domain_id=domain, router=endpoint)
    deadline = time.monotonic() + 10
    while bridge.statistics()["messages_out"] < 50 and time.monotonic() < deadline:
        time.sleep(0.001)
    bridge.close()  # while the physics thread puts
    deadline = time.monotonic() + 10
    while tokens() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = tokens()
    assert not left, (attempt, left)
print("closed 20 times", flush=True)
env.close()
watcher.close()
"""


def test_close_against_an_unpaced_env_never_races_the_physics_thread(
        router: tuple[str, int], domain: int) -> None:
    # close() used to undeclare publishers while the physics thread put on them ("Already
    # borrowed", 12 of 20 closes), and left the node's tokens on the graph.
    result = subprocess.run([sys.executable, "-c", UNPACED_CLOSE_SCRIPT, router[0],
                             str(domain)], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "closed 20 times"
    assert "Traceback" not in result.stderr and "FATAL" not in result.stderr, result.stderr


def test_a_bridge_on_a_closed_env_is_a_logic_error_and_declares_nothing(
        router: tuple[str, int], domain: int) -> None:
    env = mjfast.MujocoEnv(ROOM_XML)
    env.close()
    with pytest.raises(mjfast.LogicError, match="the env is closed"):
        Bridge(env, domain_id=domain, router=router[0])
    assert liveliness_keys(router, domain) == []


class _Consumer:
    """One consumer of an env's bus (a bridge, a recording or a bus server) and what of
    /joint_states reached its far side; `published` is every /joint_states message of the env."""

    def __init__(self, kind: str, env: mjfast.MujocoEnv, router: tuple[str, int], where: Path,
                 domain: int, published: list[Any]) -> None:
        self.kind, self.env, self.published, self.received = kind, env, published, 0
        self.far: Any = None
        self.stopped = False
        if kind == "bridge":
            self.handle: Any = Bridge(env, domain_id=domain, router=router[0])
            self.far = client_session(router)
            self.far.declare_subscriber(f"{domain}/joint_states/**", self._count)
        elif kind == "recording":
            self.path = where / f"bag{domain}"
            self.span = [len(published), 0]  # the messages published while it records
            self.handle = env.record(self.path, topics=["/joint_states"])
        else:
            from mjfast.remote import BusServer

            endpoint = f"tcp/127.0.0.1:{free_port()}"
            self.handle = BusServer(env, endpoint)
            self.far = mjfast.connect(endpoint, timeout=10)
            self.far.subscribe("/joint_states", self._count)

    def _count(self, _: Any) -> None:
        self.received += 1

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.kind == "recording":
            self.span[1] = len(self.published)
            self.handle.stop()
        else:
            self.handle.close()
        if self.far is not None:
            self.far.close()

    def check_recording(self) -> None:
        """The bag holds every message published while it recorded."""
        from rosbags.rosbag2 import Reader

        with Reader(self.path) as reader:
            count = sum(1 for c, _, _ in reader.messages() if c.topic == "/joint_states")
        assert count == self.span[1] - self.span[0]


@pytest.mark.parametrize("first_stops_first", [True, False])
@pytest.mark.parametrize("kinds", [("bridge", "bridge"), ("bridge", "recording"),
                                   ("recording", "bridge"), ("server", "bridge"),
                                   ("bridge", "server")])
def test_consumers_of_one_bus_start_and_stop_in_any_order(
        kinds: tuple[str, str], first_stops_first: bool, router: tuple[str, int],
        tmp_path: Path) -> None:
    # Each bridge, server and recording used to wrap bus.publish and `del` it on close: closing
    # the later one silently removed the earlier one's (a bag with half its joint states).
    plugins = [{"type": "mjfast/JointStatePublisher", "topic": "/joint_states"}]
    with mjfast.MujocoEnv(ROOM_XML, params={"mujoco_server": {"MujocoPlugins": plugins}}) as env:
        published: list[Any] = []
        env.bus.subscribe("/joint_states", published.append)
        consumers = [_Consumer(kind, env, router, tmp_path, random.randint(1, 200), published)
                     for kind in kinds]
        try:
            # Every consumer's far side sees the messages (the subscriptions need a moment).
            assert wait_for(lambda: env.step(1) or all(
                c.received for c in consumers if c.far is not None), TIMEOUT)
            stopping, staying = consumers if first_stops_first else consumers[::-1]
            stopping.stop()
            before, counted = staying.received, len(published)
            env.step(100)
            sent = len(published) - counted
            assert sent > 0
            staying.stop() if staying.kind == "recording" else None
            for consumer in consumers:
                if consumer.kind == "recording":
                    consumer.check_recording()
            if staying.kind != "recording":
                assert wait_for(lambda: staying.received >= before + sent, TIMEOUT), (
                    f"{staying.kind} delivered {staying.received - before} of {sent} after "
                    f"the {stopping.kind} stopped")
        finally:
            for consumer in consumers:
                consumer.stop()


# -- latched topics: late consumers get /tf_static ----------------------------------------------


def test_a_recording_started_later_holds_tf_static(env: mjfast.MujocoEnv, tmp_path: Path) -> None:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    env.step(50)  # long after the one /tf_static message, published at load
    with env.record(tmp_path / "bag"):
        env.step(10)
    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(tmp_path / "bag") as reader:
        static = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                  if c.topic == "/tf_static"]
    assert len(static) == 1
    parents = {t.child_frame_id: t.header.frame_id for t in static[0].transforms}
    assert parents["base"] == "world" and parents["tool"] == "link2"


def test_tf_static_reaches_a_late_joiner_after_a_reload(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    from zenoh_ros2_sdk.qos import QosDurability, QosProfile

    env.reload()  # new plugins: the bridge declares new publishers, with empty caches
    env.step(20)
    static, inbox = subscribe(
        ros, router, domain, "/tf_static", "tf2_msgs/msg/TFMessage",
        qos=QosProfile(durability=QosDurability.TRANSIENT_LOCAL, history_depth=1))
    try:
        assert inbox.event.wait(TIMEOUT), "the late joiner got no /tf_static"
        assert {"base", "tool"} <= {t.child_frame_id for t in inbox.messages[0].transforms}
    finally:
        static.close()


# -- bad inbound input -------------------------------------------------------------------------


def test_non_finite_twists_are_counted_logged_once_a_second_and_never_applied(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        caplog: pytest.LogCaptureFixture) -> None:
    # A NaN Twist used to be logged as an ERROR with a traceback per message, and not counted.
    ros_type = "geometry_msgs/msg/Twist"
    key = wire.data_key(domain, "/mujoco_server/drive/cmd_vel", ros_types.dds_type_name(ros_type),
                        ros_types.type_hash(ros_type))
    vector = ros_types.message_class("geometry_msgs/msg/Vector3")
    heard: list[Any] = []
    env.bus.subscribe("/mujoco_server/drive/cmd_vel", heard.append)
    bad = [bytes(ros_types.serialize(ros_types.message_class(ros_type)(
        linear=vector(x=value, y=0.0, z=0.0), angular=vector(x=0.0, y=0.0, z=0.0)), ros_type))
        for value in (math.nan, math.inf, -math.inf)]
    malformed = b"\x00\x01\x00\x00\x01"
    with client_session(router) as session, caplog.at_level("INFO"):
        publisher = session.declare_publisher(key)
        assert wait_for(lambda: publisher.put(bad[0]) or bridge.statistics()["non_finite"], TIMEOUT)
        for i in range(600):
            publisher.put(bad[i % 3])
            publisher.put(malformed)
        assert wait_for(lambda: bridge.statistics()["non_finite"] >= 601
                        and bridge.statistics()["malformed"] >= 600, TIMEOUT), (
            bridge.statistics())
    assert heard == []  # none reached the env's bus
    records = [r for r in caplog.records if r.name.startswith("mjfast")]
    assert all(r.levelno < logging.ERROR and not r.exc_info for r in records), records
    # The first of each kind at once; later ones in a line a second, with the count.
    assert 2 <= len(records) <= 2 + 2 * 30, len(records)
    assert any("not finite" in r.getMessage() for r in records)
    assert any("malformed" in r.getMessage() for r in records)


def test_frames_stamped_on_the_wire_resolve_through_tf_to_their_sites(
        env: mjfast.MujocoEnv, bridge: Bridge, router: tuple[str, int], domain: int,
        ros: Any) -> None:
    # Issue 28: /scan's frame_id was a site that neither /tf nor /tf_static carried.
    from zenoh_ros2_sdk.qos import QosDurability, QosProfile

    env.step(10)
    static, static_inbox = subscribe(
        ros, router, domain, "/tf_static", "tf2_msgs/msg/TFMessage",
        qos=QosProfile(durability=QosDurability.TRANSIENT_LOCAL, history_depth=1))
    subs = {topic: subscribe(ros, router, domain, topic, ros_type) for topic, ros_type in (
        ("/tf", "tf2_msgs/msg/TFMessage"), ("/scan", "sensor_msgs/msg/LaserScan"),
        ("/mujoco_server/rf/scan", "sensor_msgs/msg/LaserScan"),
        ("/mujoco_server/sensors/imu", "sensor_msgs/msg/Imu"))}
    try:
        assert static_inbox.event.wait(TIMEOUT), "the late joiner got no /tf_static"
        for _, inbox in subs.values():
            step_until(env, inbox)
        parent_of = {t.child_frame_id: t for message in [*static_inbox.messages,
                                                         *subs["/tf"][1].messages]
                     for t in message.transforms}

        def in_world(frame: str) -> tuple[np.ndarray, np.ndarray]:
            position, rotation = np.zeros(3), np.eye(3)
            for _ in range(len(parent_of) + 1):
                if frame == "world":
                    return position, rotation
                assert frame in parent_of, f"{frame!r} is on neither /tf nor /tf_static"
                t = parent_of[frame].transform
                turn = np.empty(9)
                mujoco.mju_quat2Mat(turn, np.array([t.rotation.w, t.rotation.x, t.rotation.y,
                                                    t.rotation.z]))
                offset = np.array([t.translation.x, t.translation.y, t.translation.z])
                position, rotation = offset + turn.reshape(3, 3) @ position, (
                    turn.reshape(3, 3) @ rotation)
                frame = parent_of[frame].header.frame_id
            raise AssertionError(f"{frame!r}: a cycle in the tf tree")

        for topic, site in (("/scan", "lidar"), ("/mujoco_server/rf/scan", "rf0"),
                            ("/mujoco_server/sensors/imu", "imu")):
            frame = subs[topic][1].messages[-1].header.frame_id
            assert frame == site
            position, rotation = in_world(frame)
            # Sites of the world and of a welded body: their pose never changes.
            np.testing.assert_allclose(position, env.data.site(site).xpos, atol=1e-9)
            np.testing.assert_allclose(rotation, env.data.site(site).xmat.reshape(3, 3),
                                       atol=1e-9)
    finally:
        static.close()
        for subscriber, _ in subs.values():
            subscriber.close()
