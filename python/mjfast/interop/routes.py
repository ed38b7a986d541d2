"""The one route table between an env's bus and ROS 2 (SPEC §19, §20), shared by the bridge and
recordings: built from the topics the env's loaded plugins declare (`env.plugin_topics`,
`mjfast.plugin.topics`) through the conversion table (`mjfast.interop.ros2.conversions`), and
rebuilt when a load replaces those declarations.

It owns which bus topic goes out as which ROS 2 topics and types (`Outbound`), which ROS 2 topics
come in (`Inbound`), and the declarations the table has no conversion for (another kind, for
another consumer: `unconverted`). It sends and records nothing: the bridge declares a publisher
per ROS 2 topic, a recording writes a bag channel per ROS 2 topic. No Zenoh import.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mjfast.bus.params import resolve_name
from mjfast.interop.ros2 import conversions
from mjfast.plugin.topics import DeclaredTopic

__all__ = ["Inbound", "Outbound", "RouteTable", "route_table"]

_log = logging.getLogger("mjfast.ros2")

Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class Outbound:
    """Messages of one bus topic (`source`) going out as one ROS 2 topic."""

    topic: str  # the ROS 2 topic (absolute; for most routes the bus topic itself)
    ros_type: str
    convert: Converter  # bus message dict -> rosbags message
    source: str  # the bus topic
    transient_local: bool = False
    plugin: str = ""  # who declared it


@dataclass(frozen=True)
class Inbound:
    """One ROS 2 topic coming in and published on the bus topic of the same name."""

    topic: str
    ros_type: str
    convert: Converter  # rosbags message -> bus message dict
    plugin: str = ""


class RouteTable:
    """The routes of one set of declarations (`declared`, the env's `plugin_topics` when
    built). `outbound` maps a bus topic to its routes, in declaration order; `publishers` maps
    a ROS 2 topic to the first route declaring it (one type per ROS 2 topic: a later route with
    another type is left out and logged); `inbound` lists the ROS 2 topics coming in, each one a
    plugin subscribes to on the bus."""

    def __init__(self, declared: tuple[DeclaredTopic, ...],
                 subscribed: Callable[[str], bool] = lambda topic: True) -> None:
        self.declared = declared
        # Each declaration with a ROS 2 type and its converter (None: no row for it); a plugin
        # one of whose declarations cannot be converted (an unknown type, a missing parameter)
        # is left out whole, as it was found.
        converted: list[tuple[DeclaredTopic, str, Converter | None]] = []
        failed: set[str] = set()
        for entry in declared:
            topic, ros_type = entry.topic, entry.topic.ros_type
            if ros_type is None or entry.plugin in failed:
                continue
            try:
                converted.append((entry, ros_type, conversions.inbound_converter(
                    topic.kind, ros_type) if topic.inbound else
                    conversions.outbound_converter(topic.kind, ros_type, topic.params,
                                                   topic.topic)))
            except Exception as error:
                _log.warning("plugin %s is not bridged to ROS 2 nor recorded: %s",
                             entry.plugin, error)
                failed.add(entry.plugin)
        outbound: dict[str, list[Outbound]] = {}
        self.publishers: dict[str, Outbound] = {}
        inbound: dict[str, Inbound] = {}
        unconverted: list[DeclaredTopic] = []
        for entry, ros_type, convert in converted:
            topic = entry.topic
            if entry.plugin in failed:
                continue
            if convert is None:
                unconverted.append(entry)
            elif topic.inbound:
                if subscribed(topic.topic) and topic.topic not in inbound:
                    inbound[topic.topic] = Inbound(topic.topic, ros_type, convert, entry.plugin)
            else:
                route = Outbound(topic.topic, ros_type, convert, topic.source or topic.topic,
                                 topic.transient_local, entry.plugin)
                first = self.publishers.setdefault(route.topic, route)
                if first.ros_type != route.ros_type:
                    _log.warning("plugin %s declares %s as %s, which plugin %s declared as %s: "
                                 "left out", entry.plugin, route.topic, route.ros_type,
                                 first.plugin, first.ros_type)
                    continue
                outbound.setdefault(route.source, []).append(route)
        self.outbound = {source: tuple(routes) for source, routes in outbound.items()}
        self.inbound = tuple(inbound.values())
        self.unconverted = tuple(unconverted)
        self._resolved: dict[str, str | None] = {}

    def routes(self, topic: str) -> tuple[Outbound, ...]:
        """The routes of bus topic `topic` (as a tap gets it, or as published: a name that is
        not absolute is resolved, once per name), empty when it has none."""
        found = self.outbound.get(topic)
        if found is not None:
            return found
        resolved = self._resolved.get(topic, "")
        if resolved == "":
            try:
                resolved = resolve_name(topic)
            except (TypeError, ValueError):
                resolved = None
            self._resolved[topic] = resolved
        return self.outbound.get(resolved, ()) if resolved is not None else ()

    def topics(self) -> dict[str, str]:
        """ROS 2 topic -> type of every outbound route, sorted by topic."""
        return {topic: route.ros_type for topic, route in sorted(self.publishers.items())}


_tables: weakref.WeakKeyDictionary[Any, RouteTable] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def route_table(env: Any) -> RouteTable:
    """The route table of `env`'s current declarations, built on first use after a load
    replaced them and then shared by every caller (the bridge and a recording alike)."""
    declared = env.plugin_topics
    table = _tables.get(env)
    if table is not None and table.declared is declared:
        return table
    with _lock:
        table = _tables.get(env)
        if table is None or table.declared is not declared:
            table = RouteTable(declared, env.bus.has_subscribers)
            _tables[env] = table
        return table
