"""The one table between mjfast's bus messages and ROS 2 types (SPEC §19), read by the bridge and
the recorder alike.

`OUTBOUND` maps a plugin type to what it publishes: rows of (`topic` key, default topic, ROS 2
type, converter), the converter turning a bus message dict into a rosbags message object. Rows
whose topic or type depend on the plugin's configuration or model (per sensor, per camera, per
ring count) are small functions returning such rows. `INBOUND` maps a plugin type to the topics
it subscribes to, with the converter from a rosbags message to the bus message it expects. Any
plugin class may add rows of its own with a `ros_types` class attribute (`{"~status":
"std_msgs/msg/String"}`): its message dicts carry the type's fields (`time` fills
`header.stamp` when the type has a header), converted generically by `build` / `to_dict`.

Every outbound message is stamped with simulated time, and its `frame_id` is a frame that
mjfast/TfPublisher carries on /tf or /tf_static (`mjfast.model.names.frame_names`): a lidar's
site (or mount body), a sensor's site or the frame its value is expressed in (`world` for MuJoCo's
global frame), a camera's optical frame `<camera>_optical` for its images. No Zenoh import.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from mjfast.bus.params import resolve_name
from mjfast.interop.ros2.types import message_class, typestore
from mjfast.model.names import Frames, frame_names, labelled_id
from mjfast.plugins.camera_publisher import configured_cameras
from mjfast.sim.camera import CAMERA_PREFIX

__all__ = ["INBOUND", "OUTBOUND", "Context", "Inbound", "Outbound", "build", "inbound_routes",
           "outbound_routes", "plugin_contexts", "stamp", "to_dict"]

Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class Context:
    """What a row needs to know about one configured plugin."""

    name: str  # the plugin's name
    type: str  # package/Class
    config: Mapping[str, Any]
    namespace: str  # the plugin's node namespace (`<env ns>/<name>`)
    model: mujoco.MjModel

    def resolve(self, topic: str) -> str:
        return resolve_name(topic, self.namespace, self.namespace)


@dataclass(frozen=True)
class Outbound:
    """One bus topic going out as one ROS 2 topic (plus companions, e.g. CameraInfo)."""

    topic: str  # absolute bus name; also the ROS 2 name
    ros_type: str
    convert: Converter
    transient_local: bool = False
    companions: tuple[Outbound, ...] = field(default=())


@dataclass(frozen=True)
class Inbound:
    """One ROS 2 topic coming in and published on the bus."""

    topic: str
    ros_type: str
    convert: Converter


# -- building blocks ---------------------------------------------------------------------------

_Time = message_class("builtin_interfaces/msg/Time")
_Header = message_class("std_msgs/msg/Header")


# The converters below run on the publishing (often physics) thread for every message: they
# build rosbags' dataclasses positionally and copy nothing that is already a float64 vector.


def stamp(time: float) -> Any:
    """builtin_interfaces/msg/Time of simulated seconds `time`."""
    nanoseconds = round(time * 1e9)
    return _Time(nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)


def header(time: float, frame_id: str = "") -> Any:
    return _Header(stamp(time), frame_id)


_FLOAT64 = np.dtype(np.float64)


def _f64(values: Any) -> np.ndarray:
    if values.__class__ is np.ndarray and values.dtype is _FLOAT64 and values.ndim == 1:
        return values  # the plugin's own copy: CDR reads it, nothing writes it
    return np.ascontiguousarray(values, dtype=np.float64).reshape(-1)


def _xyzw(wxyz: Any) -> tuple[float, float, float, float]:
    """MuJoCo's (w, x, y, z) quaternion as ROS's (x, y, z, w)."""
    w, x, y, z = (float(v) for v in wxyz)
    return x, y, z, w


# -- generic dict <-> message (ros_types) -------------------------------------------------------

_BASE_DTYPES = {
    "bool": np.bool_, "byte": np.uint8, "char": np.uint8, "int8": np.int8, "uint8": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "float32": np.float32, "float64": np.float64,
}


def _default(desc: Any) -> Any:
    kind, rest = desc
    kind = kind.name
    if kind == "NAME":
        return build(rest, {})
    if kind == "BASE":
        base = rest[0]
        return "" if base == "string" else False if base == "bool" else (
            0.0 if base.startswith("float") else 0)
    inner, count = rest
    if inner[0].name == "BASE" and inner[1][0] in _BASE_DTYPES:
        return np.zeros(count if kind == "ARRAY" else 0, dtype=_BASE_DTYPES[inner[1][0]])
    return [_default(inner) for _ in range(count)] if kind == "ARRAY" else []


def _value(desc: Any, value: Any, where: str) -> Any:
    kind, rest = desc
    kind = kind.name
    if kind == "NAME":
        if isinstance(value, Mapping):
            return build(rest, value, where=where)
        return value  # already a message object
    if kind == "BASE":
        base = rest[0]
        if base == "string":
            return str(value)
        if base == "bool":
            return bool(value)
        return float(value) if base.startswith("float") else int(value)
    inner, count = rest
    if inner[0].name == "BASE" and inner[1][0] in _BASE_DTYPES:
        array = np.ascontiguousarray(value, dtype=_BASE_DTYPES[inner[1][0]]).reshape(-1)
        if kind == "ARRAY" and array.size != count:
            raise ValueError(f"{where}: expected {count} values, got {array.size}")
        return array
    return [_value(inner, item, where) for item in value]


def build(ros_type: str, fields: Mapping[str, Any], *, where: str | None = None) -> Any:
    """A rosbags message of `ros_type` from a dict of its fields (nested dicts for nested
    messages); missing fields take their defaults, a `time` key fills `header.stamp`, an unknown
    key is a ValueError naming it."""
    where = where or ros_type
    cls = message_class(ros_type)
    _, defs = typestore().fielddefs[ros_type]
    names = {name for name, _ in defs}
    unknown = [key for key in fields if key not in names and key != "time"]
    if unknown:
        raise ValueError(f"{where}: {ros_type} has no field {unknown[0]!r}; its fields: "
                         f"{sorted(names)}")
    values: dict[str, Any] = {}
    for name, desc in defs:
        if name in fields:
            values[name] = _value(desc, fields[name], f"{where}.{name}")
        else:
            values[name] = _default(desc)
    if "time" in fields and "header" in names and "header" not in fields:
        values["header"] = header(fields["time"])
    return cls(**values)


def to_dict(message: Any) -> Any:
    """A rosbags message as nested dicts (arrays stay numpy arrays)."""
    if dataclasses.is_dataclass(message):
        return {f.name: to_dict(getattr(message, f.name)) for f in dataclasses.fields(message)
                if f.name != "__msgtype__"}
    if isinstance(message, list):
        return [to_dict(item) for item in message]
    return message


# -- outbound converters -----------------------------------------------------------------------

_JointState = message_class("sensor_msgs/msg/JointState")
_Clock = message_class("rosgraph_msgs/msg/Clock")
_LaserScan = message_class("sensor_msgs/msg/LaserScan")
_PointCloud2 = message_class("sensor_msgs/msg/PointCloud2")
_PointField = message_class("sensor_msgs/msg/PointField")
_Image = message_class("sensor_msgs/msg/Image")
_CameraInfo = message_class("sensor_msgs/msg/CameraInfo")
_RegionOfInterest = message_class("sensor_msgs/msg/RegionOfInterest")
_Odometry = message_class("nav_msgs/msg/Odometry")
_Vector3 = message_class("geometry_msgs/msg/Vector3")
_Vector3Stamped = message_class("geometry_msgs/msg/Vector3Stamped")
_Quaternion = message_class("geometry_msgs/msg/Quaternion")
_QuaternionStamped = message_class("geometry_msgs/msg/QuaternionStamped")
_Point = message_class("geometry_msgs/msg/Point")
_Pose = message_class("geometry_msgs/msg/Pose")
_PoseWithCovariance = message_class("geometry_msgs/msg/PoseWithCovariance")
_Twist = message_class("geometry_msgs/msg/Twist")
_TwistWithCovariance = message_class("geometry_msgs/msg/TwistWithCovariance")
_Transform = message_class("geometry_msgs/msg/Transform")
_TransformStamped = message_class("geometry_msgs/msg/TransformStamped")
_TFMessage = message_class("tf2_msgs/msg/TFMessage")
_Range = message_class("sensor_msgs/msg/Range")
_Imu = message_class("sensor_msgs/msg/Imu")
_Float64MultiArray = message_class("std_msgs/msg/Float64MultiArray")
_MultiArrayLayout = message_class("std_msgs/msg/MultiArrayLayout")
_MultiArrayDimension = message_class("std_msgs/msg/MultiArrayDimension")


def joint_state(message: Mapping[str, Any]) -> Any:
    return _JointState(header(message["time"]), message["name"], _f64(message["position"]),
                       _f64(message["velocity"]), _f64(message["effort"]))


def clock(message: Mapping[str, Any]) -> Any:
    return _Clock(clock=stamp(message["time"]))


def laser_scan(frame_id: str, scan_time: float) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        ranges = np.ascontiguousarray(message["ranges"], dtype=np.float32).reshape(-1)
        return _LaserScan(
            header=header(message["time"], frame_id),
            angle_min=float(message["angle_min"]), angle_max=float(message["angle_max"]),
            angle_increment=float(message["angle_increment"]), time_increment=0.0,
            scan_time=scan_time, range_min=float(message["range_min"]),
            range_max=float(message["range_max"]), ranges=ranges,
            intensities=np.zeros(0, dtype=np.float32))
    return convert


_XYZ_FIELDS = [_PointField(name=axis, offset=4 * i, datatype=_PointField.FLOAT32, count=1)
               for i, axis in enumerate("xyz")]


def point_cloud(frame_id: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        points = np.ascontiguousarray(message["points"], dtype=np.float32)
        rows, columns = points.shape[0], points.shape[1]
        return _PointCloud2(
            header=header(message["time"], frame_id), height=rows, width=columns,
            fields=list(_XYZ_FIELDS), is_bigendian=False, point_step=12, row_step=12 * columns,
            data=points.view(np.uint8).reshape(-1), is_dense=False)
    return convert


# plane -> (encoding, dtype, channels)
IMAGE_ENCODINGS = {"rgb": ("rgb8", np.uint8, 3), "depth": ("32FC1", np.float32, 1),
                   "segmentation": ("32SC1", np.int32, 1)}


def _frame_time(message: Mapping[str, Any]) -> float:
    if "time" in message:
        return float(message["time"])
    return int(message["simulation_time_ns"]) / 1e9


def image(plane: str, frame_id: str) -> Converter:
    encoding, dtype, channels = IMAGE_ENCODINGS[plane]

    def convert(message: Mapping[str, Any]) -> Any:
        data = np.ascontiguousarray(message["data"], dtype=dtype)
        height, width = int(message["height"]), int(message["width"])
        return _Image(header=header(_frame_time(message), frame_id), height=height, width=width,
                      encoding=encoding, is_bigendian=0,
                      step=width * channels * np.dtype(dtype).itemsize,
                      data=data.view(np.uint8).reshape(-1))
    return convert


def camera_intrinsics(fovy_degrees: float, width: int, height: int) -> tuple[float, float, float,
                                                                             float]:
    """(fx, fy, cx, cy) of a pinhole camera with MuJoCo's vertical field of view (square
    pixels, principal point at the image centre)."""
    fy = (height / 2.0) / math.tan(math.radians(fovy_degrees) / 2.0)
    return fy, fy, width / 2.0, height / 2.0


def camera_info(fovy_degrees: float, frame_id: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        width, height = int(message["width"]), int(message["height"])
        fx, fy, cx, cy = camera_intrinsics(fovy_degrees, width, height)
        return _CameraInfo(
            header=header(_frame_time(message), frame_id), height=height, width=width,
            distortion_model="plumb_bob", d=np.zeros(5),
            k=np.array([fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]),
            r=np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
            p=np.array([fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]),
            binning_x=0, binning_y=0,
            roi=_RegionOfInterest(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
    return convert


def odometry(message: Mapping[str, Any]) -> Any:
    position = _f64(message["position"])
    x, y, z, w = _xyzw(message["quaternion"])
    linear, angular = _f64(message["linear"]), _f64(message["angular"])
    return _Odometry(
        header=header(message["time"], "world"), child_frame_id=str(message["body"]),
        pose=_PoseWithCovariance(
            pose=_Pose(position=_Point(x=position[0], y=position[1], z=position[2]),
                       orientation=_Quaternion(x=x, y=y, z=z, w=w)),
            covariance=np.zeros(36)),
        twist=_TwistWithCovariance(
            twist=_Twist(linear=_Vector3(x=linear[0], y=linear[1], z=linear[2]),
                         angular=_Vector3(x=angular[0], y=angular[1], z=angular[2])),
            covariance=np.zeros(36)))


def transforms(message: Mapping[str, Any]) -> Any:
    """TfPublisher's `{"time", "transforms": [{frame_id, child_frame_id, translation,
    quaternion (w, x, y, z)}]}`."""
    time_header = stamp(message["time"])
    out = []
    for item in message["transforms"]:
        t = _f64(item["translation"])
        x, y, z, w = _xyzw(item["quaternion"])
        out.append(_TransformStamped(
            header=_Header(stamp=time_header, frame_id=str(item["frame_id"])),
            child_frame_id=str(item["child_frame_id"]),
            transform=_Transform(translation=_Vector3(x=t[0], y=t[1], z=t[2]),
                                 rotation=_Quaternion(x=x, y=y, z=z, w=w))))
    return _TFMessage(transforms=out)


def vector3_stamped(frame_id: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        v = _f64(message["value"])
        return _Vector3Stamped(header=header(message["time"], frame_id),
                               vector=_Vector3(x=v[0], y=v[1], z=v[2]))
    return convert


def quaternion_stamped(frame_id: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        x, y, z, w = _xyzw(message["value"])
        return _QuaternionStamped(header=header(message["time"], frame_id),
                                  quaternion=_Quaternion(x=x, y=y, z=z, w=w))
    return convert


def range_message(frame_id: str, max_range: float) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        value = float(_f64(message["value"])[0])
        return _Range(header=header(message["time"], frame_id), radiation_type=_Range.INFRARED,
                      field_of_view=0.0, min_range=0.0, max_range=max_range,
                      range=math.inf if value < 0 else value,  # -1: no return (REP 117)
                      variance=0.0)
    return convert


def float64_multi_array(message: Mapping[str, Any]) -> Any:
    values = _f64(message["value"])
    return _Float64MultiArray(
        layout=_MultiArrayLayout(dim=[_MultiArrayDimension(label="", size=values.size,
                                                           stride=values.size)], data_offset=0),
        data=values)


def imu(frame_id: str, parts: Mapping[str, str]) -> Converter:
    """`{"time", "accelerometer", "gyro", "orientation"?}` (each a sensor's value) as Imu; no
    orientation: covariance[0] = -1 as sensor_msgs/Imu says."""
    def convert(message: Mapping[str, Any]) -> Any:
        a, g = _f64(message["accelerometer"]), _f64(message["gyro"])
        unknown = np.zeros(9)
        if message.get("orientation") is not None:
            x, y, z, w = _xyzw(message["orientation"])
            orientation_covariance = unknown
        else:
            x, y, z, w = 0.0, 0.0, 0.0, 1.0
            orientation_covariance = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])
        return _Imu(header=header(message["time"], frame_id),
                    orientation=_Quaternion(x=x, y=y, z=z, w=w),
                    orientation_covariance=orientation_covariance,
                    angular_velocity=_Vector3(x=g[0], y=g[1], z=g[2]),
                    angular_velocity_covariance=unknown.copy(),
                    linear_acceleration=_Vector3(x=a[0], y=a[1], z=a[2]),
                    linear_acceleration_covariance=unknown.copy())
    return convert


# -- inbound converters ------------------------------------------------------------------------

def twist_in(message: Any) -> dict[str, Any]:
    """geometry_msgs/Twist -> BaseVelocity's `{"vx", "vy", "yaw_rate"}` (linear x, y and angular
    z; the other components have no meaning for a planar base)."""
    return {"vx": float(message.linear.x), "vy": float(message.linear.y),
            "yaw_rate": float(message.angular.z)}


def float64_multi_array_in(message: Any) -> dict[str, Any]:
    """std_msgs/Float64MultiArray -> ForwardCommand's `{"data": ndarray}`."""
    return {"data": np.array(message.data, dtype=np.float64)}


# -- the table ---------------------------------------------------------------------------------

Row = tuple[str, str, str, Converter]  # (topic key, default topic, ROS 2 type, converter)


def _topic(ctx: Context, key: str, default: str) -> str:
    return ctx.resolve(str(ctx.config.get(key, default) or default))


def _rows(rows: list[Row]) -> Callable[[Context], list[Outbound]]:
    def make(ctx: Context) -> list[Outbound]:
        return [Outbound(_topic(ctx, key, default), ros_type, convert)
                for key, default, ros_type, convert in rows]
    return make


def _lidar(ctx: Context) -> list[Outbound]:
    vertical = ctx.config.get("vertical") or {}
    rings = int(vertical.get("samples", 1)) if isinstance(vertical, Mapping) else 1
    # The frame the rays start in: the site's, or (a body mount) the body's.
    frame = "world"
    for key, kind in (("site", mujoco.mjtObj.mjOBJ_SITE), ("body", mujoco.mjtObj.mjOBJ_BODY)):
        name = ctx.config.get(key)
        found = mujoco.mj_name2id(ctx.model, kind, str(name)) if name else -1
        if found >= 0:
            frame = frame_names(ctx.model).of(kind, found) or frame
            break
    if rings == 1:
        scan_time = 1.0 / float(ctx.config.get("rate_hz", 10.0))
        return [Outbound(_topic(ctx, "topic", "~scan"), "sensor_msgs/msg/LaserScan",
                         laser_scan(frame, scan_time))]
    return [Outbound(_topic(ctx, "topic", "~points"), "sensor_msgs/msg/PointCloud2",
                     point_cloud(frame))]


def _rangefinder_lidar(ctx: Context) -> list[Outbound]:
    model, prefix = ctx.model, str(ctx.config.get("prefix", ""))
    sensor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, f"{prefix}-0")
    frame = "world"
    if sensor >= 0:
        frame = _sensor_frame(model, frame_names(model), sensor)
    scan_time = 1.0 / float(ctx.config.get("rate_hz", 10.0))
    return [Outbound(_topic(ctx, "topic", "~scan"), "sensor_msgs/msg/LaserScan",
                     laser_scan(frame, scan_time))]


def _camera_publisher(ctx: Context) -> list[Outbound]:
    model = ctx.model
    frames = frame_names(model)
    planes = ctx.config.get("planes") or list(IMAGE_ENCODINGS)
    planes = [planes] if isinstance(planes, str) else planes
    prefix = str(ctx.config.get("topic", "~")).rstrip("/") or "~"
    out = []
    # The cameras as the plugin names them (an unnamed one `camera_<id>`), found by that name.
    for name in configured_cameras(ctx.name, ctx.config, model):
        camera = labelled_id(model, mujoco.mjtObj.mjOBJ_CAMERA, model.ncam, CAMERA_PREFIX, name)
        if camera < 0:
            continue  # not a camera of the model: the plugin does not load
        frame = frames.optical[camera]
        info = Outbound(ctx.resolve(f"{prefix}/{name}/camera_info"), "sensor_msgs/msg/CameraInfo",
                        camera_info(float(model.cam_fovy[camera]), frame))
        for plane in planes:
            if plane in IMAGE_ENCODINGS:
                out.append(Outbound(ctx.resolve(f"{prefix}/{name}/{plane}"),
                                    "sensor_msgs/msg/Image", image(plane, frame),
                                    companions=(info,)))
    return out


def _free_joint_state(ctx: Context) -> list[Outbound]:
    model = ctx.model
    bodies = ctx.config.get("bodies")
    if not bodies:
        bodies = []
        for j in range(model.njnt):
            if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
                bodies.append(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY,
                                                int(model.jnt_bodyid[j])))
    topic = ctx.config.get("topic")
    return [Outbound(ctx.resolve(topic or f"~{body}"), "nav_msgs/msg/Odometry", odometry)
            for body in dict.fromkeys(b for b in bodies if b)]


_S = mujoco.mjtSensor
# The frame sensors: their value is in the global frame, or in their reference object's frame
# when they have one (`reftype`/`refname`).
_FRAME_SENSORS = {int(s) for s in (
    _S.mjSENS_FRAMEPOS, _S.mjSENS_FRAMEQUAT, _S.mjSENS_FRAMEXAXIS, _S.mjSENS_FRAMEYAXIS,
    _S.mjSENS_FRAMEZAXIS, _S.mjSENS_FRAMELINVEL, _S.mjSENS_FRAMEANGVEL, _S.mjSENS_FRAMELINACC,
    _S.mjSENS_FRAMEANGACC)}
# Sensors whose value is always in the global frame.
_GLOBAL_SENSORS = {int(s) for s in (
    _S.mjSENS_SUBTREECOM, _S.mjSENS_SUBTREELINVEL, _S.mjSENS_SUBTREEANGMOM, _S.mjSENS_GEOMDIST,
    _S.mjSENS_GEOMNORMAL, _S.mjSENS_GEOMFROMTO)}


def _sensor_frame(model: mujoco.MjModel, frames: Frames, sensor: int) -> str:
    """The frame a sensor's value is expressed in: a site-local sensor's site (accelerometer,
    gyro, rangefinder, ...), a frame sensor's reference object (`world` without one), a ball
    joint's body; a sensor of the world's quantities `world`; another sensor on a body, site or
    camera that object's frame. A frame TfPublisher carries (an inertial frame: its body's)."""
    kind = int(model.sensor_type[sensor])
    if kind in _GLOBAL_SENSORS:
        return "world"
    if kind in _FRAME_SENSORS:
        reference = int(model.sensor_refid[sensor])
        return (frames.of(int(model.sensor_reftype[sensor]), reference) if reference >= 0
                else None) or "world"
    objtype, objid = int(model.sensor_objtype[sensor]), int(model.sensor_objid[sensor])
    if kind == int(_S.mjSENS_BALLANGVEL):
        return frames.bodies[int(model.jnt_bodyid[objid])]
    return (frames.of(objtype, objid) if objid >= 0 else None) or "world"


def _sensor_publisher(ctx: Context) -> list[Outbound]:
    model = ctx.model
    wanted = ctx.config.get("sensors")
    ids = ([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, str(n)) for n in wanted]
           if wanted else list(range(model.nsensor)))
    noise = ctx.config.get("noise") or {}
    ground_truth = ctx.config.get("ground_truth", True)
    frames = frame_names(model)
    out = []
    for sensor in (s for s in ids if s >= 0):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, sensor) or f"sensor_{sensor}"
        frame = _sensor_frame(model, frames, sensor)
        kind, dim = int(model.sensor_type[sensor]), int(model.sensor_dim[sensor])
        if kind == int(mujoco.mjtSensor.mjSENS_FRAMEQUAT):
            ros_type, convert = "geometry_msgs/msg/QuaternionStamped", quaternion_stamped(frame)
        elif kind == int(mujoco.mjtSensor.mjSENS_RANGEFINDER):
            cutoff = float(model.sensor_cutoff[sensor])
            ros_type, convert = "sensor_msgs/msg/Range", range_message(
                frame, cutoff if cutoff > 0 else math.inf)
        elif dim == 3:
            ros_type, convert = "geometry_msgs/msg/Vector3Stamped", vector3_stamped(frame)
        else:
            ros_type, convert = "std_msgs/msg/Float64MultiArray", float64_multi_array
        out.append(Outbound(ctx.resolve(f"~{name}"), ros_type, convert))
        if name in noise and ground_truth:
            out.append(Outbound(ctx.resolve(f"~{name}_gt"), ros_type, convert))
    spec = ctx.config.get("imu")
    if isinstance(spec, Mapping) and spec.get("name"):
        accelerometer = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR,
                                          str(spec.get("accelerometer", "")))
        frame = _sensor_frame(model, frames, accelerometer) if accelerometer >= 0 else "world"
        out.append(Outbound(ctx.resolve(f"~{spec['name']}"), "sensor_msgs/msg/Imu",
                            imu(frame, spec)))
    return out


def _tf_publisher(ctx: Context) -> list[Outbound]:
    return [Outbound(ctx.resolve(str(ctx.config.get("topic", "/tf"))), "tf2_msgs/msg/TFMessage",
                     transforms),
            Outbound(ctx.resolve(str(ctx.config.get("static_topic", "/tf_static"))),
                     "tf2_msgs/msg/TFMessage", transforms, transient_local=True)]


# Plugin type -> its outbound rows (a list of rows, or a function of the plugin's context).
OUTBOUND: dict[str, Callable[[Context], list[Outbound]]] = {
    "mjfast/JointStatePublisher": _rows(
        [("topic", "~joint_states", "sensor_msgs/msg/JointState", joint_state)]),
    "mjfast/ClockPublisher": _rows([("topic", "/clock", "rosgraph_msgs/msg/Clock", clock)]),
    "mjfast/Lidar": _lidar,
    "mjfast/RangefinderLidar": _rangefinder_lidar,
    "mjfast/CameraPublisher": _camera_publisher,
    "mjfast/FreeJointStatePublisher": _free_joint_state,
    "mjfast/SensorPublisher": _sensor_publisher,
    "mjfast/TfPublisher": _tf_publisher,
}

# Plugin type -> (topic key, default topic, ROS 2 type, converter to the bus message).
INBOUND: dict[str, list[Row]] = {
    "mjfast/BaseVelocity": [("topic", "~cmd_vel", "geometry_msgs/msg/Twist", twist_in)],
    "mjfast/ForwardCommand": [("topic", "~commands", "std_msgs/msg/Float64MultiArray",
                               float64_multi_array_in)],
}


def _declared(ros_types: Any, ctx: Context) -> list[tuple[str, str]]:
    if not isinstance(ros_types, Mapping):
        return []
    out = []
    for topic, ros_type in ros_types.items():
        message_class(str(ros_type))  # an unknown type: KeyError naming it
        out.append((ctx.resolve(str(topic)), str(ros_type)))
    return out


def plugin_contexts(env: Any) -> list[tuple[Context, Any]]:
    """(context, plugin class or None where its type does not resolve) for each configured plugin
    of `env`'s current generation, in load order: what the rows are applied to, by the bridge and
    the recorder alike."""
    from mjfast.plugin.discovery import resolve_plugin

    out = []
    for spec in env.plugin_specs:
        try:
            cls = resolve_plugin(spec.type)
        except Exception:
            cls = None
        namespace = f"{env.namespace.rstrip('/')}/{spec.name}"
        out.append((Context(spec.name, spec.type, spec.config, namespace, env.model), cls))
    return out


def outbound_routes(ctx: Context, plugin_class: Any = None) -> list[Outbound]:
    """Every ROS 2 topic one configured plugin publishes."""
    routes = OUTBOUND[ctx.type](ctx) if ctx.type in OUTBOUND else []
    for topic, ros_type in _declared(getattr(plugin_class, "ros_types", None), ctx):
        routes.append(Outbound(topic, ros_type, _generic_out(ros_type, topic)))
    return routes


def inbound_routes(ctx: Context, plugin_class: Any = None,
                   subscribed: Callable[[str], bool] = lambda topic: True) -> list[Inbound]:
    """Every ROS 2 topic one configured plugin takes in (declared ones only if it subscribes)."""
    routes = [Inbound(_topic(ctx, key, default), ros_type, convert)
              for key, default, ros_type, convert in INBOUND.get(ctx.type, [])]
    for topic, ros_type in _declared(getattr(plugin_class, "ros_types", None), ctx):
        if subscribed(topic):
            routes.append(Inbound(topic, ros_type, to_dict))
    return routes


def _generic_out(ros_type: str, topic: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        return build(ros_type, message, where=topic)
    return convert
