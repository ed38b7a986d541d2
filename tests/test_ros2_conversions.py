"""mjfast.ros2's conversion table, types and wire strings, without a Zenoh network (SPEC §19)."""

from __future__ import annotations

import math
import subprocess
import sys

import mujoco
import numpy as np
import pytest

pytest.importorskip("rosbags")

from mjfast.ros2 import conversions, wire
from mjfast.ros2 import types as ros_types
from mjfast.ros2.conversions import Context


def roundtrip(message: object, ros_type: str) -> object:
    return ros_types.deserialize(ros_types.serialize(message, ros_type), ros_type)


def test_type_hashes_are_jazzys() -> None:
    # Published by rmw_zenoh (Jazzy) nodes; services need rosidl's reading of `char` as uint8.
    assert ros_types.type_hash("sensor_msgs/msg/JointState") == (
        "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e")
    assert ros_types.type_hash("std_srvs/srv/Trigger") == (
        "RIHS01_eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f")
    assert ros_types.dds_type_name("sensor_msgs/msg/JointState") == (
        "sensor_msgs::msg::dds_::JointState_")
    assert ros_types.dds_type_name("std_srvs/srv/SetBool") == "std_srvs::srv::dds_::SetBool_"


def test_unknown_type_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="unknown ROS 2 type 'std_msgs/msg/Nope'"):
        ros_types.message_class("std_msgs/msg/Nope")


def test_wire_strings() -> None:
    assert wire.QOS_DEFAULT.encode() == "::,10:,:,:,,"
    assert wire.QOS_STATIC.encode() == ":1:,1:,:,:,,"
    assert wire.node_token(3, "abc", 0, "/", "mujoco_server") == (
        "@ros2_lv/3/abc/0/0/NN/%/%/mujoco_server")
    assert wire.endpoint_token(0, "abc", 0, 4, "MP", "/", "sim", "/a/b", "T_", "RIHS01_x",
                               wire.QOS_DEFAULT) == (
        "@ros2_lv/0/abc/0/4/MP/%/%/sim/%a%b/T_/RIHS01_x/::,10:,:,:,,")
    assert wire.data_key(0, "/a/b", "T_", "RIHS01_x") == "0/a/b/T_/RIHS01_x"
    gid = wire.gid("token")
    raw = wire.encode_attachment(7, 123, gid)
    assert len(raw) == 33 and raw[16] == 16
    assert wire.Attachment.decode(raw) == wire.Attachment(7, 123, gid)
    with pytest.raises(ValueError, match="33 bytes"):
        wire.Attachment.decode(b"\x00" * 5)


def test_stamps_are_simulated_time_in_whole_nanoseconds() -> None:
    stamp = conversions.stamp(12.000000001)
    assert (stamp.sec, stamp.nanosec) == (12, 1)


def test_joint_state_and_clock() -> None:
    message = {"time": 0.25, "name": ["a", "b"], "position": np.array([1.0, 2.0]),
               "velocity": np.array([3.0, 4.0]), "effort": np.array([5.0, 6.0])}
    out = roundtrip(conversions.joint_state(message), "sensor_msgs/msg/JointState")
    assert out.name == ["a", "b"] and (out.header.stamp.sec, out.header.stamp.nanosec) == (
        0, 250_000_000)
    np.testing.assert_array_equal(out.effort, [5.0, 6.0])
    clock = roundtrip(conversions.clock({"time": 1.5}), "rosgraph_msgs/msg/Clock")
    assert (clock.clock.sec, clock.clock.nanosec) == (1, 500_000_000)


def test_camera_intrinsics_from_fovy() -> None:
    fx, fy, cx, cy = conversions.camera_intrinsics(90.0, 640, 480)
    assert fy == pytest.approx(240.0) and fx == fy and (cx, cy) == (320.0, 240.0)
    info = conversions.camera_info(90.0, "cam")({"time": 0.0, "width": 640, "height": 480})
    assert info.header.frame_id == "cam"
    np.testing.assert_allclose(info.p, [240, 0, 320, 0, 0, 240, 240, 0, 0, 0, 1, 0])


def test_point_cloud_layout() -> None:
    points = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    out = roundtrip(conversions.point_cloud({"time": 0.0, "frame": "lidar", "points": points}),
                    "sensor_msgs/msg/PointCloud2")
    assert (out.height, out.width, out.row_step, out.is_dense) == (2, 3, 36, False)
    np.testing.assert_array_equal(np.frombuffer(bytes(out.data), np.float32).reshape(2, 3, 3),
                                  points)


def test_quaternions_turn_from_mujoco_order_to_ros_order() -> None:
    out = conversions.quaternion_stamped("s")({"time": 0, "value": np.array([1.0, 2, 3, 4])})
    assert (out.quaternion.x, out.quaternion.y, out.quaternion.z, out.quaternion.w) == (
        2, 3, 4, 1)


def test_imu_without_orientation_marks_it_unknown() -> None:
    out = conversions.imu("imu", {})({"time": 0, "accelerometer": [0, 0, 9.81],
                                      "gyro": [0.1, 0, 0]})
    assert out.orientation_covariance[0] == -1 and out.linear_acceleration.z == 9.81
    roundtrip(out, "sensor_msgs/msg/Imu")


def test_range_of_no_return_is_infinity() -> None:
    out = conversions.range_message("rf", 5.0)({"time": 0, "value": np.array([-1.0])})
    assert math.isinf(out.range) and out.max_range == 5.0


def test_generic_build_fills_defaults_stamps_time_and_names_an_unknown_field() -> None:
    scan = conversions.build("sensor_msgs/msg/LaserScan", {"time": 2.0, "ranges": [1, 2]})
    assert scan.header.stamp.sec == 2 and scan.ranges.dtype == np.float32
    roundtrip(scan, "sensor_msgs/msg/LaserScan")
    assert conversions.to_dict(conversions.build("std_msgs/msg/String", {"data": "x"})) == {
        "data": "x"}
    with pytest.raises(ValueError, match="std_msgs/msg/String has no field 'text'"):
        conversions.build("std_msgs/msg/String", {"text": "x"})


def test_twist_and_commands_in() -> None:
    twist_type = ros_types.message_class("geometry_msgs/msg/Twist")
    vector = ros_types.message_class("geometry_msgs/msg/Vector3")
    twist = twist_type(linear=vector(x=1.0, y=2.0, z=3.0), angular=vector(x=0.0, y=0.0, z=0.5))
    assert conversions.twist_in(twist) == {"vx": 1.0, "vy": 2.0, "yaw_rate": 0.5}


def test_table_rows_of_configured_plugins() -> None:
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><site name="s"/><camera name="c" fovy="50"/></worldbody></mujoco>')

    def routes(kind: str, **config: object) -> dict[str, str]:
        ctx = Context("p", kind, config, "/mujoco_server/p", model)
        out = {}
        for route in conversions.outbound_routes(ctx):
            out[route.topic] = route.ros_type
            out.update({c.topic: c.ros_type for c in route.companions})
        return out

    assert routes("mjfast/JointStatePublisher") == {
        "/mujoco_server/p/joint_states": "sensor_msgs/msg/JointState"}
    assert routes("mjfast/JointStatePublisher", topic="/joint_states") == {
        "/joint_states": "sensor_msgs/msg/JointState"}
    assert routes("mjfast/Lidar", site="s") == {
        "/mujoco_server/p/scan": "sensor_msgs/msg/LaserScan"}
    assert routes("mjfast/Lidar", site="s", vertical={"samples": 4}) == {
        "/mujoco_server/p/points": "sensor_msgs/msg/PointCloud2"}
    assert routes("mjfast/CameraPublisher", planes=["rgb"]) == {
        "/mujoco_server/p/c/rgb": "sensor_msgs/msg/Image",
        "/mujoco_server/p/c/camera_info": "sensor_msgs/msg/CameraInfo"}
    assert routes("mjfast/TfPublisher") == {"/tf": "tf2_msgs/msg/TFMessage",
                                            "/tf_static": "tf2_msgs/msg/TFMessage"}
    assert routes("mjfast/HeartbeatPublisher") == {}


def test_a_lidar_scan_is_framed_by_its_site_or_its_body_mount() -> None:
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body name="base"><site name="s"/></body></worldbody></mujoco>')
    scan = {"time": 0.5, "angle_min": -1.0, "angle_max": 1.0, "angle_increment": 1.0,
            "range_min": 0.1, "range_max": 5.0, "ranges": np.ones(3, dtype=np.float32)}
    for mount, frame in (({"site": "s"}, "s"), ({"body": "base", "pos": [0, 0, 0.1]}, "base")):
        ctx = Context("p", "mjfast/Lidar", mount, "/mujoco_server/p", model)
        (route,) = conversions.outbound_routes(ctx)
        assert route.convert(scan).header.frame_id == frame


def test_conversions_import_no_zenoh_and_mjfast_imports_without_the_extra() -> None:
    script = ("import sys; import mjfast.ros2.conversions, mjfast.ros2.types, mjfast.ros2.wire; "
              "assert 'zenoh' not in sys.modules, 'zenoh imported'")
    code = ("import sys; sys.modules['zenoh'] = None; import mjfast\n"
            "try:\n    from mjfast.ros2 import Bridge\nexcept ImportError as e:\n    print(e)\n")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60).returncode == 0
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("mjfast.ros2 needs the extra mjfast[ros2]")
    assert result.stdout.count("\n") == 1


def test_the_example_params_give_the_usual_topic_names() -> None:
    from pathlib import Path

    import yaml

    import mjfast
    from mjfast.discovery import resolve_plugin

    root = Path(__file__).resolve().parent.parent
    data = root / "python" / "mjfast" / "data"  # what `mjfast demo --export` writes
    params = yaml.safe_load((data / "ros2_params.yaml").read_text())
    model = data / "demo_arm.xml"
    with mjfast.MujocoEnv(str(model), params=params) as env:
        assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins), env.plugins
        out: dict[str, str] = {}
        ins: dict[str, str] = {}
        for spec in env.plugin_specs:
            ctx = Context(spec.name, spec.type, spec.config,
                          f"{env.namespace}/{spec.name}", env.model)
            out.update({r.topic: r.ros_type for r in conversions.outbound_routes(ctx)})
            ins.update({r.topic: r.ros_type for r in conversions.inbound_routes(
                ctx, resolve_plugin(spec.type))})
    assert out == {"/clock": "rosgraph_msgs/msg/Clock",
                   "/joint_states": "sensor_msgs/msg/JointState",
                   "/tf": "tf2_msgs/msg/TFMessage", "/tf_static": "tf2_msgs/msg/TFMessage",
                   "/scan": "sensor_msgs/msg/LaserScan"}
    assert ins == {"/forward_effort_controller/commands": "std_msgs/msg/Float64MultiArray"}


IMU_XML = """
<mujoco><worldbody><body name="b" pos="0 0 1"><freejoint/><geom size="0.1"/><site name="s"/>
</body></worldbody><sensor><accelerometer name="acc" site="s"/><gyro name="gyro" site="s"/>
</sensor></mujoco>"""


def test_sensor_publisher_imu_goes_out_as_one_message_and_names_a_wrong_sensor() -> None:
    import mjfast

    config = {"type": "mjfast/SensorPublisher", "name": "sensors",
              "imu": {"name": "imu", "accelerometer": "acc", "gyro": "gyro"}}
    with mjfast.MujocoEnv(IMU_XML, params={"MujocoPlugins": [config]}) as env:
        env.step(5)
        imu = env.bus.latest("/mujoco_server/sensors/imu")
        acc = env.bus.latest("/mujoco_server/sensors/acc")
        assert imu["orientation"] is None and imu["time"] == acc["time"]
        np.testing.assert_array_equal(imu["accelerometer"], acc["value"])
        ros = conversions.imu("s", {})(imu)
        assert ros.linear_acceleration.z == acc["value"][2]
    config["imu"] = {"name": "imu", "accelerometer": "acc", "gyro": "gyr"}
    with mjfast.MujocoEnv(IMU_XML, params={"MujocoPlugins": [config]}) as env:
        failure = env.plugins[0].failure
        assert failure is not None and "imu.gyro names sensor 'gyr'" in failure.message
