"""rmw_zenoh's wire format for ROS 2 Jazzy (rmw_zenoh_cpp 0.2.x, branch `jazzy`; docs/design.md).

- Data key expression of a topic or service: `<domain>/<name without leading slash>/<DDS type
  name>/<RIHS01 hash>`, e.g. `0/joint_states/sensor_msgs::msg::dds_::JointState_/RIHS01_a13e...`.
- Liveliness tokens (graph discovery), every `/` inside a name replaced by `%`:
  node     `@ros2_lv/<domain>/<zid>/<nid>/<nid>/NN/<enclave>/<namespace>/<node name>`
  endpoint `@ros2_lv/<domain>/<zid>/<nid>/<eid>/<MP|MS|SS|SC>/<enclave>/<namespace>/<node name>/
            <mangled name>/<DDS type name>/<type hash>/<QoS>`
  (`<zid>` the Zenoh session id, `<nid>`/`<eid>` counters unique within the session).
- QoS string: `<reliability>:<durability>:<history>,<depth>:<deadline s>,<ns>:<lifespan s>,<ns>:
  <liveliness>,<lease s>,<ns>`, every value equal to rmw_zenoh's default left empty (reliable,
  volatile, keep last, depth 42, infinite durations, automatic liveliness).
- Attachment of every put, query and reply: int64 sequence number, int64 source timestamp (ns
  since the epoch), then the 16-byte GID as a zenoh-ext serialized array (a LEB128 length, 16):
  33 bytes, little endian. A service reply carries the request's sequence number and the
  client's GID.
- An entity's GID: 16 bytes hashed from its liveliness key expression (rmw_zenoh uses XXH3-128 of
  the same string; a GID only has to be unique and stable, and mjfast uses BLAKE2b-128).

No Zenoh import: these are strings and bytes.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

__all__ = [
    "ADMIN_SPACE",
    "QOS_DEFAULT",
    "QOS_STATIC",
    "Attachment",
    "QoS",
    "data_key",
    "endpoint_token",
    "gid",
    "mangle",
    "node_token",
]

ADMIN_SPACE = "@ros2_lv"
ATTACHMENT_SIZE = 33
GID_SIZE = 16

# rmw_qos_*_policy_e values (rmw/types.h).
RELIABLE, BEST_EFFORT = 1, 2
TRANSIENT_LOCAL, VOLATILE = 1, 2
KEEP_LAST, KEEP_ALL = 1, 2


@dataclass(frozen=True)
class QoS:
    reliability: int = RELIABLE
    durability: int = VOLATILE
    history: int = KEEP_LAST
    depth: int = 10

    def encode(self) -> str:
        """The token's QoS field; values equal to rmw_zenoh's defaults are left empty."""
        reliability = "" if self.reliability == RELIABLE else str(self.reliability)
        durability = "" if self.durability == VOLATILE else str(self.durability)
        history = "" if self.history == KEEP_LAST else str(self.history)
        depth = "" if self.depth == 42 else str(self.depth)
        return f"{reliability}:{durability}:{history},{depth}:,:,:,,"


QOS_DEFAULT = QoS()  # rclcpp's default: reliable, volatile, keep last 10 (services alike)
QOS_STATIC = QoS(durability=TRANSIENT_LOCAL, depth=1)  # tf2's /tf_static


def mangle(name: str) -> str:
    """A name inside one key chunk: `/` becomes `%` (the root namespace `/` is `%`)."""
    return name.replace("/", "%") if name else "%"


def data_key(domain_id: int, name: str, dds_type: str, type_hash: str) -> str:
    return f"{domain_id}/{name.strip('/')}/{dds_type}/{type_hash}"


def node_token(domain_id: int, zid: str, nid: int, namespace: str, node: str,
               enclave: str = "/") -> str:
    return (f"{ADMIN_SPACE}/{domain_id}/{zid}/{nid}/{nid}/NN/{mangle(enclave)}/"
            f"{mangle(namespace)}/{mangle(node)}")


def endpoint_token(domain_id: int, zid: str, nid: int, eid: int, kind: str, namespace: str,
                   node: str, name: str, dds_type: str, type_hash: str, qos: QoS,
                   enclave: str = "/") -> str:
    if kind not in ("MP", "MS", "SS", "SC"):
        raise ValueError(f"entity kind must be MP, MS, SS or SC, got {kind!r}")
    return (f"{ADMIN_SPACE}/{domain_id}/{zid}/{nid}/{eid}/{kind}/{mangle(enclave)}/"
            f"{mangle(namespace)}/{mangle(node)}/{mangle(name)}/{dds_type}/{type_hash}/"
            f"{qos.encode()}")


def gid(token: str) -> bytes:
    """An entity's 16-byte GID, from its liveliness key expression."""
    return hashlib.blake2b(token.encode(), digest_size=GID_SIZE).digest()


_HEAD = struct.Struct("<qqB")


@dataclass(frozen=True)
class Attachment:
    sequence_number: int
    source_timestamp: int
    gid: bytes

    def encode(self) -> bytes:
        return _HEAD.pack(self.sequence_number, self.source_timestamp, len(self.gid)) + self.gid

    @staticmethod
    def decode(raw: bytes) -> Attachment:
        if len(raw) < _HEAD.size:
            raise ValueError(f"an rmw_zenoh attachment has {ATTACHMENT_SIZE} bytes, got "
                             f"{len(raw)}")
        sequence, stamp, size = _HEAD.unpack_from(raw)
        if len(raw) != _HEAD.size + size:
            raise ValueError(f"attachment GID of {size} bytes in {len(raw)} bytes")
        return Attachment(sequence, stamp, bytes(raw[_HEAD.size:]))


def encode_attachment(sequence_number: int, source_timestamp: int, gid16: bytes) -> bytes:
    """The hot path's attachment: no object."""
    return _HEAD.pack(sequence_number, source_timestamp, GID_SIZE) + gid16
