"""ROS 2 Jazzy message types for mjfast: CDR, RIHS01 type hashes and DDS names, all from rosbags.

One typestore (`rosbags.typesys.get_typestore(Stores.ROS2_JAZZY)`) serves the bridge and the
recorder. Three additions, all made through rosbags and documented here:

- rosbags' Jazzy store carries no `std_srvs`; the three services mjfast answers (SetBool,
  Trigger) are registered from their fields with rosbags' own msg parser, together with the
  service type description (`request_message`, `response_message`, `event_message`) that ROS 2
  hashes for a service's RIHS01.
- the interface packages in PACKAGES (simulation_interfaces 2.1.0, SPEC §25), whose `.msg` and
  `.srv` files mjfast carries as the package ships them, are parsed the same way.
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
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype

__all__ = [
    "PACKAGES",
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

# Interface packages whose definitions mjfast carries (their .msg/.srv files, as the package
# ships them): simulation_interfaces 2.1.0 (SPEC §25).
PACKAGES = (Path(__file__).resolve().parent / "simulation_interfaces",)

_lock = threading.Lock()


def _renamed(desc: Any, rename: Any) -> Any:
    kind, rest = desc
    if kind == Nodetype.NAME:
        return (kind, rename(rest))
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return (kind, (_renamed(rest[0], rename), rest[1]))
    return desc


def _parse_srv_part(text: str, name: str) -> dict[str, Any]:
    """rosbags' msg parser names every type `pkg/msg/Name`; a service's own parts (the service,
    its `_Request`, `_Response` and `_Event`) live in `pkg/srv`, its package's messages stay."""
    package, _, base = name.split("/")
    service = base.rsplit("_", 1)[0] if base.endswith(("_Request", "_Response", "_Event")) else (
        base)
    own = {service, f"{service}_Request", f"{service}_Response", f"{service}_Event"}
    prefix = f"{package}/msg/"

    def rename(type_name: str) -> str:
        short = type_name[len(prefix):]
        return f"{package}/srv/{short}" if type_name.startswith(prefix) and short in own else (
            type_name)

    parsed = get_types_from_msg(text, f"{package}/msg/{base}")
    return {rename(key): (consts, [(field, _renamed(desc, rename)) for field, desc in fields])
            for key, (consts, fields) in parsed.items()}


def _service_types(service: str, request: str, response: str) -> dict[str, Any]:
    """A service's request, response, event and service type description (what ROS 2 hashes
    for its RIHS01)."""
    base = service.rsplit("/", 1)[1]
    types: dict[str, Any] = {}
    types.update(_parse_srv_part(request, f"{service}_Request"))
    types.update(_parse_srv_part(response, f"{service}_Response"))
    types.update(_parse_srv_part(
        f"service_msgs/ServiceEventInfo info\n{base}_Request[<=1] request\n"
        f"{base}_Response[<=1] response", f"{service}_Event"))
    types.update(_parse_srv_part(
        f"{base}_Request request_message\n{base}_Response response_message\n"
        f"{base}_Event event_message", service))
    return types


def _package_types(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(messages, services) of an interface package's `msg/*.msg` and `srv/*.srv` files; the
    package is named by the folder."""
    package = folder.name
    messages: dict[str, Any] = {}
    for path in sorted((folder / "msg").glob("*.msg")):
        messages.update(get_types_from_msg(path.read_text(), f"{package}/msg/{path.stem}"))
    services: dict[str, Any] = {}
    for path in sorted((folder / "srv").glob("*.srv")):
        request, _, response = path.read_text().partition("\n---")
        services.update(_service_types(f"{package}/srv/{path.stem}", request, response))
    return messages, services


@functools.cache
def typestore() -> Any:
    """The Jazzy typestore with std_srvs' SetBool and Trigger and the interface packages in
    PACKAGES registered."""
    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for service, (request, response) in SERVICES.items():
        types.update(_service_types(service, request, response))
    store.register(types)
    for folder in PACKAGES:
        messages, services = _package_types(folder)
        store.register(messages)  # first: the services refer to them
        store.register(services)
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
