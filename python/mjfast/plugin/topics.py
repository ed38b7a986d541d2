"""What a loaded plugin says it publishes and takes in (SPEC §19): `Topic`, one declaration — a
bus topic, the message kind its dicts are, the ROS 2 type they go out (or come in) as, and what
their conversion needs beyond the message — and `resolved_topics`, a plugin's declarations
checked and named as the bus names them. A Python plugin declares with `topics()` (by default
from its `ros_types` class attribute), a native one by answering `call("topics")`
(`mjfast.plugin.native.native_topics`); the env asks each loaded plugin once its generation has
loaded (`mjfast.sim.host.collect_topics`).

It converts nothing and knows no ROS 2 type: the conversions are keyed by message kind in
`mjfast.interop.ros2.conversions`, and the bridge and recordings route by
`mjfast.interop.routes`, built from these declarations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mjfast.bus.params import resolve_name

__all__ = ["FIELDS", "DeclaredTopic", "Topic", "resolved_topics", "ros_types_topics"]

# The message kind of a dict holding the ROS 2 type's own fields (`time` filling header.stamp):
# what a `ros_types` declaration publishes, converted field by field.
FIELDS = "fields"


@dataclass(frozen=True)
class Topic:
    """One topic of a plugin, as its `topics()` declares it after load.

    `topic` is a bus name as the plugin's node takes it (`~scan`, `/clock`); `kind` names what
    its message dicts hold (a row of the conversion table: `laser_scan`, `joint_state`, ...);
    `ros_type` the ROS 2 type it goes out (or comes in) as, None for a bus-only topic. `params`:
    what the conversion needs that the messages do not carry (`frame_id`, `scan_time`, a
    camera's `fovy`). `inbound`: a topic the plugin subscribes to, whose ROS 2 messages the
    bridge delivers onto the bus. `source`: the bus topic whose messages this ROS 2 topic is
    made from, when it is not `topic` itself (a camera's CameraInfo, made from its images).
    `transient_local`: late joiners get the last message (ROS 2's latched `/tf_static`).
    """

    topic: str
    kind: str
    ros_type: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    inbound: bool = False
    source: str | None = None
    transient_local: bool = False


@dataclass(frozen=True)
class DeclaredTopic:
    """A `Topic` of one loaded plugin, its names resolved in the plugin's namespace (`topic` and
    `source` absolute; `source` is `topic` when the declaration gave none)."""

    plugin: str  # the plugin's configured name
    type: str  # its package/Class
    topic: Topic


def ros_types_topics(ros_types: Any) -> list[Topic]:
    """The declarations of a `ros_types` attribute (`{"~status": "std_msgs/msg/String"}`): each
    topic goes out as that type, and comes in as it while the plugin subscribes to it."""
    if ros_types is None:
        return []
    if not isinstance(ros_types, Mapping):
        raise TypeError(f"ros_types must be a mapping of topic to ROS 2 type, got {ros_types!r}")
    out = []
    for topic, ros_type in ros_types.items():
        out.append(Topic(str(topic), FIELDS, str(ros_type)))
        out.append(Topic(str(topic), FIELDS, str(ros_type), inbound=True))
    return out


def _checked(topic: Any, where: str) -> Topic:
    if not isinstance(topic, Topic):
        raise TypeError(f"{where}: topics() must return mjfast.Topic declarations, got "
                        f"{topic!r}")
    for name, value in (("topic", topic.topic), ("kind", topic.kind)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}: a topic's {name} must be a non-empty str, got {value!r}")
    if topic.ros_type is not None and (not isinstance(topic.ros_type, str) or
                                       topic.ros_type.count("/") != 2):
        raise ValueError(f"{where}: topic {topic.topic!r}: ros_type must be a ROS 2 type name "
                         f"such as 'std_msgs/msg/String' (or None), got {topic.ros_type!r}")
    if not isinstance(topic.params, Mapping):
        raise ValueError(f"{where}: topic {topic.topic!r}: params must be a mapping, got "
                         f"{topic.params!r}")
    return topic


def resolved_topics(plugin: str, plugin_type: str, topics: Iterable[Any], namespace: str
                    ) -> list[DeclaredTopic]:
    """`topics`, one plugin's declarations, checked and with their names resolved in the
    plugin's `namespace`. ValueError or TypeError naming the plugin for a malformed one."""
    where = f"plugin {plugin!r} ({plugin_type})"
    out = []
    for topic in topics:
        checked = _checked(topic, where)
        try:
            name = resolve_name(checked.topic, namespace, namespace)
            source = (resolve_name(checked.source, namespace, namespace)
                      if checked.source else name)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: topic {checked.topic!r}: {error}") from None
        out.append(DeclaredTopic(plugin, plugin_type, Topic(
            name, checked.kind, checked.ros_type, dict(checked.params), checked.inbound, source,
            checked.transient_local)))
    return out
