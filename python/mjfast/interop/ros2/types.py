"""ROS 2 Jazzy message types for mjfast: CDR, RIHS01 type hashes and DDS names, all from rosbags.

One typestore (`rosbags.typesys.get_typestore(Stores.ROS2_JAZZY)`) serves the bridge and the
recorder. Two additions, both made through rosbags and documented here:

- rosbags' Jazzy store carries no `std_srvs`; the three services mjfast answers (SetBool,
  Trigger) are registered from their fields with rosbags' own msg parser, together with the
  service type description (`request_message`, `response_message`, `event_message`) that ROS 2
  hashes for a service's RIHS01.
- SPEC §23's action types (control_msgs' FollowJointTrajectory and GripperCommand, and
  action_msgs/srv/CancelGoal) are registered from their definitions by `action_types`.
- rosbags keeps `char` in `service_msgs/msg/ServiceEventInfo.client_gid`; rosidl reads a `.msg`
  `char` as `uint8`, and so does the type hash of every service. That one field is hashed as
  `uint8[16]` (the same CDR bytes), which gives rmw_zenoh's hashes (std_srvs/srv/Trigger:
  `RIHS01_eeff2cd6...`).

No Zenoh import: section 20's recorder uses this module too.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype

from mjfast.interop.ros2.action_types import register_interfaces

__all__ = [
    "SERVICES",
    "dds_type_name",
    "deserialize",
    "message_class",
    "serialize",
    "service_dds_type_name",
    "type_hash",
    "typestore",
]

# The std_srvs services of SPEC §19: request fields, response fields (ROS .srv halves).
SERVICES: dict[str, tuple[str, str]] = {
    "std_srvs/srv/SetBool": ("bool data", "bool success\nstring message"),
    "std_srvs/srv/Trigger": ("", "bool success\nstring message"),
}

_lock = threading.Lock()


def _renamed(desc: Any, rename: Any) -> Any:
    kind, rest = desc
    if kind == Nodetype.NAME:
        return (kind, rename(rest))
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return (kind, (_renamed(rest[0], rename), rest[1]))
    return desc


def _parse_srv_part(text: str, name: str) -> dict[str, Any]:
    """rosbags' msg parser names every type `pkg/msg/Name`; a service's parts live in `pkg/srv`."""
    package, _, base = name.split("/")

    def rename(type_name: str) -> str:
        prefix = f"{package}/msg/"
        return f"{package}/srv/{type_name[len(prefix):]}" if type_name.startswith(prefix) else (
            type_name)

    parsed = get_types_from_msg(text, f"{package}/msg/{base}")
    return {rename(key): (consts, [(field, _renamed(desc, rename)) for field, desc in fields])
            for key, (consts, fields) in parsed.items()}


@functools.cache
def typestore() -> Any:
    """The Jazzy typestore with std_srvs' SetBool and Trigger registered."""
    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for service, (request, response) in SERVICES.items():
        base = service.rsplit("/", 1)[1]
        types.update(_parse_srv_part(request, f"{service}_Request"))
        types.update(_parse_srv_part(response, f"{service}_Response"))
        types.update(_parse_srv_part(
            f"service_msgs/ServiceEventInfo info\n{base}_Request[<=1] request\n"
            f"{base}_Response[<=1] response", f"{service}_Event"))
        types.update(_parse_srv_part(
            f"{base}_Request request_message\n{base}_Response response_message\n"
            f"{base}_Event event_message", service))
    store.register(types)
    register_interfaces(store)  # control_msgs' actions, action_msgs/srv/CancelGoal (SPEC §23)
    consts, fields = store.fielddefs["service_msgs/msg/ServiceEventInfo"]
    store.fielddefs["service_msgs/msg/ServiceEventInfo"] = (consts, [
        (name, (Nodetype.ARRAY, ((Nodetype.BASE, ("uint8", 0)), 16)))
        if name == "client_gid" else (name, desc) for name, desc in fields])
    return store


@functools.cache
def message_class(ros_type: str) -> Any:
    """The rosbags dataclass of `ros_type` (`sensor_msgs/msg/JointState`); KeyError if unknown."""
    try:
        return typestore().types[ros_type]
    except KeyError:
        raise KeyError(f"unknown ROS 2 type {ros_type!r} (not in rosbags' Jazzy typestore; "
                       f"expected e.g. 'std_msgs/msg/String')") from None


@functools.cache
def type_hash(ros_type: str) -> str:
    """`RIHS01_<hex>` of a message or service type, from rosbags."""
    if "/srv/" not in ros_type:
        message_class(ros_type)  # the clear KeyError for an unknown type
    with _lock:  # rosbags fills a cache while hashing
        return str(typestore().hash_rihs01(ros_type))


def dds_type_name(ros_type: str) -> str:
    """`sensor_msgs/msg/JointState` -> `sensor_msgs::msg::dds_::JointState_` (services alike)."""
    package, kind, name = ros_type.split("/")
    return f"{package}::{kind}::dds_::{name}_"


def service_dds_type_name(service_type: str) -> str:
    return dds_type_name(service_type)


def serialize(message: Any, ros_type: str) -> bytearray:
    """CDR (little endian, with its encapsulation header) of a rosbags message object."""
    return serializer(ros_type)(message)


@functools.cache
def serializer(ros_type: str) -> Callable[[Any], bytearray]:
    """`serialize` for one type, bound once: rosbags' generated size and little-endian CDR
    functions of the type (what `serialize_cdr` runs, without its per-call lookups), writing
    into one new buffer that is returned as is."""
    store = typestore()
    with _lock:
        msgdef = store.get_msgdef(ros_type)
    getsize, write = msgdef.getsize_cdr, msgdef.serialize_cdr_le

    def serialize_one(message: Any) -> bytearray:
        buffer = bytearray(4 + getsize(0, message, store))
        buffer[1] = 1  # encapsulation: CDR_LE
        write(memoryview(buffer)[4:], 0, message, store)
        return buffer

    return serialize_one


def deserialize(payload: bytes, ros_type: str) -> Any:
    return typestore().deserialize_cdr(payload, ros_type)
