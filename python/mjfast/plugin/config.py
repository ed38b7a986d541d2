"""Parsing the `MujocoPlugins` parameter into ordered `PluginSpec`s (both ROS 1 and ROS 2 layouts).

Owns validation of that parameter's shape, plugin names and `package/Class` type strings. It does
not resolve types to classes (`discovery`) nor instantiate anything (the env's plugin host).
Whatever nesting of mappings, lists and scalars it is given, it returns specs or raises
ConfigError; configuration nested deeper than `mjfast.bus.params.MAX_DEPTH` levels, or containing
itself, is refused.
"""

from __future__ import annotations

import copy
import re
import reprlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mjfast.bus.params import check_nesting
from mjfast.errors import ConfigError

if TYPE_CHECKING:
    from mjfast.bus.params import ParameterServer

__all__ = [
    "PLUGIN_TYPE_PATTERN",
    "PluginSpec",
    "check_plugin_type",
    "load_plugin_specs",
    "parse_plugin_specs",
]

PLUGIN_TYPE_PATTERN = re.compile(r"[A-Za-z0-9_.\-]+/[A-Za-z_][A-Za-z0-9_]*")
_TYPE_EXPECTED = (
    "expected 'package/Class': one '/', package of letters, digits, _ - ., Class an identifier"
)
_ENTRY_EXPECTED = "expected a mapping with 'type: package/Class'"
# Bounds what an error message shows of a user's value, however large or deep it is.
_brief = reprlib.Repr()
_brief.maxstring = _brief.maxother = 60


@dataclass(frozen=True)
class PluginSpec:
    """One configured plugin: its unique name, `package/Class` type, own config, load position."""

    name: str
    type: str
    config: dict[str, Any] = field(hash=False)
    index: int


def check_plugin_type(value: object, where: str) -> str:
    """`value` if it is a well-formed `package/Class` type string; ConfigError naming `where`."""
    if not isinstance(value, str):
        raise ConfigError(
            f"{where}: plugin type must be a str, got {type(value).__name__} ({_TYPE_EXPECTED})"
        )
    if not PLUGIN_TYPE_PATTERN.fullmatch(value):
        raise ConfigError(f"{where}: invalid plugin type {value!r} ({_TYPE_EXPECTED})")
    return value


def _check_name(value: object, where: str) -> str:
    # Names become segments of the plugin's node namespace: a '/' would make it ambiguous, and a
    # leading '~' would read as a private name (mjfast.bus.params.resolve_name refuses both).
    if not isinstance(value, str) or not value or "/" in value or value.startswith("~"):
        raise ConfigError(
            f"{where}: invalid plugin name {_brief.repr(value)} (expected a non-empty str "
            f"without '/', not starting with '~')"
        )
    return value


def _config_of(entry: dict[Any, Any], exclude: tuple[str, ...], where: str) -> dict[Any, Any]:
    """A private copy of `entry` without the `exclude` keys: the plugin's configuration."""
    config = {}
    for key, value in entry.items():
        if key in exclude:
            continue
        try:
            config[key] = copy.deepcopy(value)
        except Exception as error:  # whatever a value's __deepcopy__ raises, it is bad config
            raise ConfigError(
                f"{where}: the value of {_brief.repr(key)} cannot be copied "
                f"({type(error).__name__}: {error}; expected YAML types)"
            ) from error
    return config


def _entry_type(entry: object, where: str) -> str:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: entry is a {type(entry).__name__} ({_ENTRY_EXPECTED})")
    if "type" not in entry:
        raise ConfigError(f"{where}: missing required key 'type' ({_ENTRY_EXPECTED})")
    return check_plugin_type(entry["type"], f"{where}.type")


def _parse_list(entries: list[Any], source: str) -> list[PluginSpec]:
    parsed: list[tuple[str, str | None, dict[str, Any]]] = []
    for i, entry in enumerate(entries):
        where = f"{source}[{i}]"
        type_name = _entry_type(entry, where)
        explicit = _check_name(entry["name"], f"{where}.name") if "name" in entry else None
        config = _config_of(entry, ("type", "name"), where)
        parsed.append((type_name, explicit, config))

    # Only defaulted names count towards a repeat, so an explicitly named second instance
    # leaves the first one's default name untouched.
    class_counts = Counter(t.split("/", 1)[1] for t, explicit, _ in parsed if explicit is None)
    specs: list[PluginSpec] = []
    owner: dict[str, str] = {}
    for i, (type_name, explicit, config) in enumerate(parsed):
        class_name = type_name.split("/", 1)[1]
        if explicit is not None:
            name = explicit
        elif class_counts[class_name] > 1:
            name = f"{class_name}_{i}"
        else:
            name = class_name
        where = f"{source}[{i}]"
        if name in owner:
            raise ConfigError(
                f"{where}: duplicate plugin name {name!r} (already used by {owner[name]}; "
                f"give one of them a distinct 'name')"
            )
        owner[name] = where
        specs.append(PluginSpec(name=name, type=type_name, config=config, index=i))
    return specs


def _parse_named(mapping: dict[Any, Any], source: str) -> list[PluginSpec]:
    names = mapping["names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(
            f"{source}.names: expected a list of plugin names (strings), got {_brief.repr(names)}"
        )
    seen: set[str] = set()
    for i, name in enumerate(names):
        _check_name(name, f"{source}.names[{i}]")
        if name in seen:
            raise ConfigError(f"{source}.names[{i}]: duplicate plugin name {name!r}")
        seen.add(name)
    # A typo'd entry key would otherwise silently never load.
    stray = sorted(k if isinstance(k, str) else _brief.repr(k)
                   for k in mapping if k != "names" and k not in seen)
    if stray:
        listed = ", ".join(_brief.repr(k) for k in stray)
        raise ConfigError(f"{source}: key(s) {listed} not listed in 'names' (names: {names})")
    specs: list[PluginSpec] = []
    for i, name in enumerate(names):
        where = f"{source}.{name}"
        if name not in mapping:
            raise ConfigError(f"{where}: listed in 'names' but has no mapping ({_ENTRY_EXPECTED})")
        entry = mapping[name]
        type_name = _entry_type(entry, where)
        config = _config_of(entry, ("type",), where)
        specs.append(PluginSpec(name=name, type=type_name, config=config, index=i))
    return specs


def parse_plugin_specs(value: object, *, source: str = "MujocoPlugins") -> list[PluginSpec]:
    """The plugins `value` configures, in load order; ConfigError naming the malformed entry.

    `value` is either a list of entries (ROS 1 layout) or a mapping with `names` plus one
    mapping per name (ROS 2 layout); `source` prefixes every error message.
    """
    # First, so that nothing below (copies, reprs in messages) can recurse without bound.
    check_nesting(value, source)
    if isinstance(value, list):
        return _parse_list(value, source)
    if isinstance(value, dict) and "names" in value:
        return _parse_named(value, source)
    found = "a mapping without 'names'" if isinstance(value, dict) else f"a {type(value).__name__}"
    raise ConfigError(
        f"{source}: expected a list of plugin entries or a mapping with 'names', found {found}"
    )


def load_plugin_specs(params: ParameterServer, namespace: str) -> list[PluginSpec]:
    """The specs of the `MujocoPlugins` nearest to `namespace` (searching up to `/`); [] if none."""
    found = params.search(namespace, "MujocoPlugins")
    if found is None:
        return []
    return parse_plugin_specs(params.get(found), source=found)
