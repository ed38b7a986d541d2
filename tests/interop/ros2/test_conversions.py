"""mjfast.ros2's conversion table, types and wire strings, without a Zenoh network (SPEC §19)."""

from __future__ import annotations

import math
import subprocess
import sys

import mujoco
import numpy as np
import pytest

pytest.importorskip("rosbags")

from mjfast.interop.ros2.conversions import Context
from mjfast.ros2 import conversions, wire
from mjfast.ros2 import types as ros_types
from support import TESTS_DIR


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
    out = roundtrip(conversions.point_cloud("lidar")({"time": 0.0, "frame": "lidar",
                                                       "points": points}),
                    "sensor_msgs/msg/PointCloud2")
    assert (out.height, out.width, out.row_step, out.is_dense) == (2, 3, 36, False)
    assert out.header.frame_id == "lidar"
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
    script = ("import sys; import mjfast.interop.ros2.conversions, mjfast.interop.ros2.types, "
              "mjfast.interop.ros2.wire; "
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

    import yaml

    import mjfast
    from mjfast.plugin.discovery import resolve_plugin

    root = TESTS_DIR.parent
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


# -- frames: every frame_id a message stamps is on /tf or /tf_static -----------------------------

FRAMES_XML = """
<mujoco model="frames">
  <option timestep="0.002"/>
  <visual><global offwidth="32" offheight="24"/></visual>
  <worldbody>
    <light pos="0 0 3"/>
    <geom type="plane" size="3 3 0.1"/>
    <geom type="box" pos="2.1 0 1" size="0.1 2.2 1.5"/>
    <site name="lidar" pos="0.5 0 1.5" euler="0 0 30"/>
    <camera name="front" pos="0 -1.5 1" xyaxes="1 0 0 0 0.5 1" fovy="60"/>
    <camera name="chase" mode="targetbody" target="hand" pos="1 1 1"/>
    <body name="base" pos="0 0 0.2">
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="imu" euler="0 0 90"/>
      <site name="rf0" pos="0.5 0 1.3" zaxis="1 0 0"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="j1" axis="0 0 1" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <site pos="0.3 0 0" euler="10 20 30"/>
        <camera pos="0.3 0 0.1" euler="0 30 0" fovy="70"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="j2" type="ball" damping="0.1"/>
          <geom size="0.03" pos="0.05 0 0"/>
          <site name="tool" pos="0.05 0 0.02" euler="0 90 0"/>
        </body>
      </body>
    </body>
    <body name="ball" pos="-1 -1 0.5"><freejoint/><geom size="0.1"/></body>
  </worldbody>
  <actuator><motor joint="j1"/></actuator>
  <sensor>
    <accelerometer name="acc" site="imu"/>
    <gyro name="gyro" site="imu"/>
    <framequat name="quat" objtype="site" objname="imu"/>
    <framepos name="tool_pos" objtype="site" objname="tool"/>
    <framepos name="tool_in_base" objtype="site" objname="tool" reftype="body" refname="base"/>
    <framepos name="tool_in_front" objtype="site" objname="tool" reftype="camera"
              refname="front"/>
    <ballangvel name="wrist" joint="j2"/>
    <subtreecom name="com" body="base"/>
    <velocimeter name="tool_vel" site="tool"/>
    <rangefinder name="rf-0" site="rf0"/>
  </sensor>
</mujoco>
"""

FRAME_PLUGINS = [
    {"name": "scan", "type": "mjfast/Lidar", "site": "lidar", "topic": "/scan",
     "horizontal": {"samples": 5, "min_angle": -1.0, "max_angle": 1.0},
     "range": {"min": 0.05, "max": 10.0}, "rate_hz": 100},
    {"name": "cloud", "type": "mjfast/Lidar", "body": "arm",
     "horizontal": {"samples": 4, "min_angle": -1.0, "max_angle": 1.0},
     "vertical": {"samples": 2, "min_angle": -0.2, "max_angle": 0.2},
     "range": {"max": 10.0}, "rate_hz": 100},
    {"name": "rf", "type": "mjfast/RangefinderLidar", "prefix": "rf", "range": {"max": 10.0},
     "rate_hz": 100},
    {"name": "odom", "type": "mjfast/FreeJointStatePublisher", "bodies": ["ball"]},
    {"name": "sensors", "type": "mjfast/SensorPublisher",
     "imu": {"name": "imu", "accelerometer": "acc", "gyro": "gyro", "orientation": "quat"}},
    {"name": "cams", "type": "mjfast/CameraPublisher"},
    {"name": "tf", "type": "mjfast/TfPublisher", "rate_hz": 500},
]


def _world_poses(messages: list[object]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each frame's (position, rotation matrix) in `world`, from TFMessages as a tf2 listener
    reads them (later transforms of a child replace earlier ones). A frame whose chain does not
    reach `world` is left out."""
    parent_of: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    for message in messages:
        for t in message.transforms:
            r, v = t.transform.rotation, t.transform.translation
            rotation = np.empty(9)
            mujoco.mju_quat2Mat(rotation, np.array([r.w, r.x, r.y, r.z]))
            parent_of[t.child_frame_id] = (t.header.frame_id, np.array([v.x, v.y, v.z]),
                                           rotation.reshape(3, 3))
    poses: dict[str, tuple[np.ndarray, np.ndarray]] = {"world": (np.zeros(3), np.eye(3))}

    def pose(frame: str, depth: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        if frame in poses:
            return poses[frame]
        if frame not in parent_of or depth > len(parent_of):
            return None
        parent, translation, rotation = parent_of[frame]
        above = pose(parent, depth + 1)
        if above is None:
            return None
        poses[frame] = (above[0] + above[1] @ translation, above[1] @ rotation)
        return poses[frame]

    for frame in list(parent_of):
        pose(frame)
    return poses


def test_every_frame_id_mjfast_stamps_resolves_through_tf_to_world() -> None:
    # Issue 28: /scan's frame_id was a site that /tf never carried (bodies only).
    import mjfast
    from mjfast.model.names import frame_names

    every_plane = {"rate_hz": 50.0, "planes": ["rgb", "depth", "segmentation"]}
    params = {"mujoco_server": {
        "MujocoPlugins": FRAME_PLUGINS,
        "cameras": dict.fromkeys(("front", "chase", "camera_2"), every_plane)}}
    with mjfast.MujocoEnv(FRAMES_XML, params=params, render_sync=True) as env:
        assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins), [
            (p.name, p.failure) for p in env.plugins]
        received: dict[str, list[object]] = {}
        routes = [route for ctx, cls in conversions.plugin_contexts(env)
                  for route in conversions.outbound_routes(ctx, cls)]
        subscriptions = []
        for route in routes:
            def deliver(message: object, route: conversions.Outbound = route) -> None:
                for out in (route, *route.companions):
                    received.setdefault(out.topic, []).append(out.convert(message))
            subscriptions.append(env.bus.subscribe(route.topic, deliver))
        static = next(r for r in routes if r.transient_local)
        # Sent once at load, before these subscriptions: a late joiner's copy.
        received[static.topic] = [static.convert(env.bus.latest(static.topic))]
        env.control.write(ctrl=np.array([0.5]))
        env.data.qvel[1:4] = [1.0, -2.0, 0.5]  # the wrist turns on its ball joint
        env.step(100)
        names = {route.topic for route in routes} | {c.topic for r in routes for c in r.companions}
        assert set(received) == names, names - set(received)
        poses = _world_poses(received["/tf_static"] + received["/tf"][-1:])

        stamped: dict[str, set[str]] = {}  # frame -> the topics that stamp it
        for topic, messages in received.items():
            for message in messages:
                if hasattr(message, "header") and message.header.frame_id:
                    stamped.setdefault(message.header.frame_id, set()).add(topic)
                if hasattr(message, "child_frame_id"):  # Odometry
                    stamped.setdefault(message.child_frame_id, set()).add(topic)
        unresolved = {frame: topic for frame, topic in stamped.items() if frame not in poses}
        assert not unresolved, f"frames not on /tf or /tf_static: {unresolved}"
        frames = frame_names(env.model)
        assert "/scan" in stamped["lidar"] and "/mujoco_server/rf/scan" in stamped["rf0"]
        assert "/mujoco_server/cloud/points" in stamped["arm"]  # a body mount: its body's frame
        assert stamped["camera_2_optical"] == {f"/mujoco_server/cams/camera_2/{name}" for name in (
            "rgb", "depth", "segmentation", "camera_info")}
        assert {"front_optical", "chase_optical", "ball"} <= set(stamped)
        assert "/mujoco_server/sensors/imu" in stamped["imu"]
        for sensor, frame in (("acc", "imu"), ("quat", "world"), ("tool_pos", "world"),
                              ("tool_in_base", "base"), ("tool_in_front", "front"),
                              ("wrist", "hand"), ("com", "world"), ("tool_vel", "tool")):
            assert received[f"/mujoco_server/sensors/{sensor}"][-1].header.frame_id == frame

        # The frames' poses are MuJoCo's for the state of the last /tf message.
        last = received["/tf"][-1].transforms[0].header.stamp
        assert last.sec + last.nanosec * 1e-9 == pytest.approx(env.data.time, abs=1e-9)
        model, data = env.model, mujoco.MjData(env.model)
        data.qpos[:], data.qvel[:] = env.data.qpos, env.data.qvel
        mujoco.mj_forward(model, data)
        for site in range(model.nsite):
            position, rotation = poses[frames.sites[site]]
            np.testing.assert_allclose(position, data.site_xpos[site], atol=1e-9)
            np.testing.assert_allclose(rotation, data.site_xmat[site].reshape(3, 3), atol=1e-9)
        for camera in range(model.ncam):
            position, rotation = poses[frames.cameras[camera]]
            np.testing.assert_allclose(position, data.cam_xpos[camera], atol=1e-9)
            np.testing.assert_allclose(rotation, data.cam_xmat[camera].reshape(3, 3), atol=1e-9)
            # ROS's optical frame: x right, y down, z along the view (MuJoCo's -z).
            optical_position, optical = poses[frames.optical[camera]]
            np.testing.assert_allclose(optical_position, data.cam_xpos[camera], atol=1e-9)
            np.testing.assert_allclose(optical, rotation @ np.diag([1.0, -1.0, -1.0]),
                                       atol=1e-9)
        assert data.xpos[model.body("hand").id] != pytest.approx(
            model.body_pos[model.body("hand").id] + [0, 0, 0.3])  # the arm did move
        for subscription in subscriptions:
            subscription.unsubscribe()


def test_frame_ids_are_unique_and_unnamed_objects_are_kind_and_id() -> None:
    from mjfast.model.names import frame_names

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><site name="tool"/><camera/><body name="tool"><site/>'
        '<camera name="camera_0"/></body><body/></worldbody></mujoco>')
    frames = frame_names(model)
    assert frames.bodies == ["world", "tool", "body_2"]
    assert frames.sites == ["site_0", "site_1"]  # a body holds `tool`
    # The named camera keeps its name; the unnamed one, which cannot be `camera_0`, is told apart.
    assert frames.cameras == ["camera_0_2", "camera_0"]
    assert frames.optical == ["camera_0_2_optical", "camera_0_optical"]


UNNAMED_CAMERA_XML = """
<mujoco><visual><global offwidth="64" offheight="48"/></visual><worldbody>
  <camera name="front" pos="0 -1 1" fovy="60"/>
  <camera pos="0 0 2" fovy="70"/>
</worldbody></mujoco>"""


def test_an_unnamed_camera_goes_out_with_the_models_fovy() -> None:
    # Issue 28: the conversion dropped unnamed cameras, and `camera_1` got a 45° fovy.
    model = mujoco.MjModel.from_xml_string(UNNAMED_CAMERA_XML)
    frame = {"time": 0.5, "width": 64, "height": 48,
             "data": np.zeros((48, 64, 3), dtype=np.uint8)}
    for config in ({}, {"cameras": ["camera_1"]}):
        ctx = Context("cams", "mjfast/CameraPublisher", {"planes": ["rgb"], **config},
                      "/mujoco_server/cams", model)
        routes = {route.topic: route for route in conversions.outbound_routes(ctx)}
        assert "/mujoco_server/cams/camera_1/rgb" in routes, routes
        route = routes["/mujoco_server/cams/camera_1/rgb"]
        image = roundtrip(route.convert(frame), "sensor_msgs/msg/Image")
        (info_route,) = route.companions
        assert info_route.topic == "/mujoco_server/cams/camera_1/camera_info"
        info = roundtrip(info_route.convert(frame), "sensor_msgs/msg/CameraInfo")
        fy = 24 / math.tan(math.radians(70) / 2)
        np.testing.assert_allclose(info.k, [fy, 0, 32, 0, fy, 24, 0, 0, 1])
        assert image.header.frame_id == info.header.frame_id == "camera_1_optical"
        assert (image.width, image.height) == (64, 48)


def test_an_unnamed_cameras_frames_reach_the_conversion_from_the_running_plugin() -> None:
    import mjfast

    params = {"mujoco_server": {
        "MujocoPlugins": [{"name": "cams", "type": "mjfast/CameraPublisher"}],
        "cameras": {"camera_1": {"rate_hz": 100.0}}}}
    with mjfast.MujocoEnv(UNNAMED_CAMERA_XML, params=params, render_sync=True) as env:
        (ctx, cls), = conversions.plugin_contexts(env)
        routes = {route.topic: route for route in conversions.outbound_routes(ctx, cls)}
        env.step(20)
        message = env.bus.latest("/mujoco_server/cams/camera_1/rgb")
        assert message is not None and message["camera"] == "camera_1"
        route = routes["/mujoco_server/cams/camera_1/rgb"]
        image = roundtrip(route.convert(message), "sensor_msgs/msg/Image")
        assert bytes(image.data) == message["data"].tobytes()
        info = route.companions[0].convert(message)
        assert info.k[4] == pytest.approx(24 / math.tan(math.radians(70) / 2))
