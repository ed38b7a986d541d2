"""The one table between mjfast's bus messages and ROS 2 types (SPEC §19), keyed by message kind
as ros_gz_bridge's mappings are: the bridge and recordings convert through it alike
(`mjfast.interop.routes` builds their routes from it).

`OUTBOUND` maps a message kind (what a bus message dict holds: `joint_state`, `laser_scan`,
`camera_frame`, ...) to the ROS 2 types it goes out as, each with the factory of its converter;
the factory gets the declaration's `params` (a frame id, a scan period, a field of view: what a
message does not carry). `INBOUND` maps a kind to the ROS 2 types that come in as it, each with
the converter from a rosbags message to the bus message. The kind `fields` (`FIELDS`, what a
`ros_types` declaration publishes) takes any ROS 2 type: its dicts carry the type's own fields
(`time` fills `header.stamp` when the type has a header), converted by `build` / `to_dict`.

The table knows no plugin and no configuration key: a loaded plugin declares each of its topics
(`mjfast.plugin.topics.Topic`: bus topic, message kind, ROS 2 type, params) from what its own
load worked out. Adding a ROS 2 conversion for a plugin is therefore two things:

1. the plugin's declaration, in its `topics()` (a native plugin's `Plugin::topics()`):
   `Topic("~odom", "odometry", "nav_msgs/msg/Odometry", {"frame_id": "world"})`;
2. one mapping row here, if the kind or the type is new: a converter (or a factory of one, for
   a kind with params) under `OUTBOUND[kind][ros_type]` (`INBOUND` for a topic it takes in).

Every outbound message is stamped with simulated time, and its `frame_id` is a frame that
mjfast/TfPublisher carries on /tf or /tf_static (`mjfast.model.names.frame_names`, given by the
declaring plugin): a lidar's site (or mount body), a sensor's site or the frame its value is
expressed in (`world` for MuJoCo's global frame), a camera's optical frame `<camera>_optical`
for its images. No Zenoh import.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mjfast.interop.ros2.types import message_class, typestore
from mjfast.plugin.topics import FIELDS

__all__ = ["FIELDS", "INBOUND", "OUTBOUND", "build", "inbound_converter", "outbound_converter",
           "stamp", "to_dict"]

Converter = Callable[[Any], Any]


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
    names = _field_names(type(message))
    if names is not None:
        return {name: to_dict(getattr(message, name)) for name in names}
    if isinstance(message, list):
        return [to_dict(item) for item in message]
    return message


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """A message class's field names, or None for what is not a message (read once per
    class: dataclasses.fields per message made to_dict cost a goal's round trip)."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "__msgtype__")


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
#
# Message kind -> ROS 2 type -> the converter's factory, which gets the declaration's `params`
# (what a message does not carry: its frame, a scan's period, a camera's field of view) and
# returns the converter. One kind may go out as several types (a camera frame: an Image, and a
# CameraInfo on its own topic). The factories run when the route table is built, never per
# message; a kind without a parameter answers with a module-level function, which a recording
# hands to its writer process by reference.

Factory = Callable[[Mapping[str, Any]], Converter]


def _frame(params: Mapping[str, Any]) -> str:
    return str(params.get("frame_id", "world") or "world")


def _range_factory(params: Mapping[str, Any]) -> Converter:
    return range_message(_frame(params), float(params.get("max_range", math.inf)))


OUTBOUND: dict[str, dict[str, Factory]] = {
    # {time, name, position, velocity, effort}: mjfast/JointStatePublisher
    "joint_state": {"sensor_msgs/msg/JointState": lambda params: joint_state},
    # {time}: mjfast/ClockPublisher
    "clock": {"rosgraph_msgs/msg/Clock": lambda params: clock},
    # {time, angle_min, angle_max, angle_increment, range_min, range_max, ranges}: mjfast/Lidar
    # (one ring), mjfast/RangefinderLidar; params frame_id, scan_time
    "laser_scan": {"sensor_msgs/msg/LaserScan": lambda params: laser_scan(
        _frame(params), float(params.get("scan_time", 0.0)))},
    # {time, frame, points (rows x columns x 3)}: mjfast/Lidar (several rings); params frame_id
    "point_cloud": {"sensor_msgs/msg/PointCloud2": lambda params: point_cloud(_frame(params))},
    # {simulation_time_ns, width, height, data, ...}: mjfast/CameraPublisher; params plane,
    # frame_id (the optical frame), fovy (degrees, for the CameraInfo)
    "camera_frame": {
        "sensor_msgs/msg/Image": lambda params: image(str(params["plane"]), _frame(params)),
        "sensor_msgs/msg/CameraInfo": lambda params: camera_info(float(params["fovy"]),
                                                                 _frame(params))},
    # {time, body, position, quaternion, linear, angular}: mjfast/FreeJointStatePublisher
    "odometry": {"nav_msgs/msg/Odometry": lambda params: odometry},
    # {time, transforms: [{frame_id, child_frame_id, translation, quaternion}]}: TfPublisher
    "transforms": {"tf2_msgs/msg/TFMessage": lambda params: transforms},
    # {time, value}: one sensor of mjfast/SensorPublisher; params frame_id (and max_range for a
    # Range)
    "sensor_value": {
        "geometry_msgs/msg/Vector3Stamped": lambda params: vector3_stamped(_frame(params)),
        "geometry_msgs/msg/QuaternionStamped": lambda params: quaternion_stamped(
            _frame(params)),
        "sensor_msgs/msg/Range": _range_factory,
        "std_msgs/msg/Float64MultiArray": lambda params: float64_multi_array},
    # {time, accelerometer, gyro, orientation}: SensorPublisher's `imu`; params frame_id
    "imu": {"sensor_msgs/msg/Imu": lambda params: imu(_frame(params), {})},
}

# Message kind -> ROS 2 type -> the converter from a rosbags message to the bus message.
INBOUND: dict[str, dict[str, Converter]] = {
    # {vx, vy, yaw_rate}: mjfast/BaseVelocity
    "planar_velocity": {"geometry_msgs/msg/Twist": twist_in},
    # {data: float64 ndarray}: mjfast/ForwardCommand
    "float64_array": {"std_msgs/msg/Float64MultiArray": float64_multi_array_in},
}


def outbound_converter(kind: str, ros_type: str, params: Mapping[str, Any], topic: str
                       ) -> Converter | None:
    """The converter of bus messages of `kind` into `ros_type` on `topic`, or None where the
    table has no such row. Kind `fields` (the `ros_types` declarations) takes any type of the
    typestore (KeyError naming an unknown one), built from the message's fields."""
    if kind == FIELDS:
        message_class(ros_type)  # an unknown type: KeyError naming it
        return _generic_out(ros_type, topic)
    factory = OUTBOUND.get(kind, {}).get(ros_type)
    return None if factory is None else factory(params)


def inbound_converter(kind: str, ros_type: str) -> Converter | None:
    """The converter of `ros_type` messages into the bus messages of `kind`, or None."""
    if kind == FIELDS:
        message_class(ros_type)
        return to_dict
    return INBOUND.get(kind, {}).get(ros_type)


def _generic_out(ros_type: str, topic: str) -> Converter:
    def convert(message: Mapping[str, Any]) -> Any:
        return build(ros_type, message, where=topic)
    return convert
