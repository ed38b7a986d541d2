"""pluginlib-style discovery: plugin types from `mjfast.plugins` entry points and registrations.

Owns the mapping from a `package/Class` type name to a plugin class or native descriptor. It
does not instantiate, configure or load plugins; that is the env's plugin host.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from mjfast.errors import PluginNotFoundError
from mjfast.names import unknown
from mjfast.plugin.base import ControlPlugin, MujocoPlugin, misnamed_callbacks
from mjfast.plugin.config import check_plugin_type

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginType",
    "available_plugins",
    "plugin_types",
    "register_plugin",
    "resolve_plugin",
    "unregister_plugin",
]

ENTRY_POINT_GROUP = "mjfast.plugins"
_EXPECTED = (
    "a MujocoPlugin or ControlPlugin subclass, or a native plugin descriptor "
    "(an object with a truthy __mjfast_native__)"
)
_MAX_LISTED = 10

_log = logging.getLogger("mjfast.discovery")

# Guards the in-process registry: the env may resolve plugins from a reload on another thread
# while user code registers. A leaf of the lock order (src/_core/env/env_core.h).
_lock = threading.Lock()
_registry: dict[str, Any] = {}
# Which duplicate entry points were already reported, so a warning is logged once per pair
# instead of on every read of the entry points.
_warned_duplicates: set[tuple[str, str, str]] = set()
# Classes whose misnamed callbacks were already reported (once per class and process).
_warned_classes: set[type] = set()
# Each sys.path entry, its absolute path and its mtime (None where it cannot be stat'ed).
_PathFingerprint = tuple[tuple[str, str, int | None], ...]
# The group's entry points as last read, and the sys.path fingerprint they were read under.
_entry_point_cache: tuple[_PathFingerprint, dict[str, metadata.EntryPoint]] | None = None
# A read is kept only if every entry's mtime is this much older than the read: file systems
# stamp mtimes from a coarse clock (a jiffy; whole seconds on some), so a distribution installed
# just after a read can leave its entry's mtime as it was (git's "racy" index entries).
_MTIME_SETTLED_NS = 2_000_000_000


def _is_plugin_object(obj: object) -> bool:
    if isinstance(obj, type) and issubclass(obj, MujocoPlugin | ControlPlugin):
        return obj not in (MujocoPlugin, ControlPlugin)
    try:
        return bool(getattr(obj, "__mjfast_native__", False))
    except Exception:
        # An object whose attribute access raises is certainly no descriptor.
        return False


def _describe(obj: object) -> str:
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    return f"{type(obj).__name__} object {obj!r}"


def _distribution_name(entry_point: metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return dist.name if dist is not None else "<unknown distribution>"


def _path_fingerprint() -> _PathFingerprint:
    """What the installed distributions depend on: each sys.path entry, where it points, and
    its modification time (installing or removing a distribution adds or removes a folder in
    its entry, which moves the entry's mtime); None for an entry that cannot be stat'ed."""
    fingerprint: list[tuple[str, str, int | None]] = []
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        where = os.path.abspath(entry)  # '' is the working directory
        try:
            fingerprint.append((entry, where, os.stat(where).st_mtime_ns))
        except OSError:
            fingerprint.append((entry, where, None))
    return tuple(fingerprint)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name, read from sys.path; the first of duplicates wins.

    Read again whenever sys.path or the mtime of one of its entries has changed (and while an
    entry's mtime is too recent to tell a later change from it), so a distribution installed
    mid-session (or put on sys.path by a test) is seen by the next call. Not on every call:
    reading them costs some 5 ms, and importlib.metadata rebuilds its index of each entry it
    cannot stat ('', a missing zip) on every read, three per env created: the garbage of 300
    envs made at once pinned some 5 MB of Python's arenas.
    """
    global _entry_point_cache
    fingerprint = _path_fingerprint()
    with _lock:
        cached = _entry_point_cache
    if cached is not None and cached[0] == fingerprint:
        return dict(cached[1])
    read_at = time.time_ns()
    found = _read_entry_points()
    newest = max((mtime for _, _, mtime in fingerprint if mtime is not None), default=0)
    with _lock:
        _entry_point_cache = ((fingerprint, found) if newest < read_at - _MTIME_SETTLED_NS
                              else None)
    return dict(found)


def _read_entry_points() -> dict[str, metadata.EntryPoint]:
    # importlib.metadata keeps its index of each sys.path entry by the entry's mtime too, with
    # the same coarse-clock blind spot: a read here is rare enough to start from a fresh index.
    metadata.MetadataPathFinder().invalidate_caches()  # a plain method in 3.11, a classmethod later
    found: dict[str, metadata.EntryPoint] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        first = found.get(entry_point.name)
        if first is None:
            found[entry_point.name] = entry_point
            continue
        # The same distribution seen twice (its folder on sys.path twice) is no conflict.
        same = (first.value, _distribution_name(first))
        if same == (entry_point.value, _distribution_name(entry_point)):
            continue
        key = (entry_point.name, first.value, entry_point.value)
        if key not in _warned_duplicates:
            _warned_duplicates.add(key)
            _log.warning(
                "plugin type %r is provided twice: by %s (%s) and by %s (%s); using the first",
                entry_point.name,
                _distribution_name(first),
                first.value,
                _distribution_name(entry_point),
                entry_point.value,
            )
    return found


def available_plugins() -> list[str]:
    """Sorted plugin type names from entry points and in-process registrations (no imports)."""
    names = set(_entry_points())
    with _lock:
        names.update(_registry)
    return sorted(names)


def register_plugin(type_name: str, cls: Any) -> None:
    """Register `cls` as plugin type `type_name` in this process, overriding any entry point."""
    check_plugin_type(type_name, "register_plugin")
    if not _is_plugin_object(cls):
        raise TypeError(
            f"register_plugin({type_name!r}, ...): got {_describe(cls)}; expected {_EXPECTED}"
        )
    with _lock:
        _registry[type_name] = cls


def unregister_plugin(type_name: str) -> None:
    """Remove an in-process registration; PluginNotFoundError if there is none."""
    with _lock:
        if _registry.pop(type_name, None) is None:
            raise PluginNotFoundError(
                f"plugin type {type_name!r} is not registered in-process "
                f"(entry points cannot be unregistered)"
            )


def resolve_plugin(type_name: str) -> Any:
    """The class or native descriptor for `type_name`: registrations first, then entry points.

    PluginNotFoundError when nothing provides it (with close-match suggestions), when its entry
    point fails to import, or when the entry point's object is not a plugin.
    """
    if not isinstance(type_name, str):
        raise TypeError(f"plugin type must be a str, got {type(type_name).__name__}")
    with _lock:
        registered = _registry.get(type_name)
    if registered is not None:
        _warn_misnamed(type_name, registered)
        return registered
    obj = _load_entry_point(type_name)
    _warn_misnamed(type_name, obj)
    return obj


def _warn_misnamed(type_name: str, obj: object) -> None:
    """A warning, once per class, for each method that looks like a misspelt callback."""
    if not isinstance(obj, type):
        return
    with _lock:
        if obj in _warned_classes:
            return
        _warned_classes.add(obj)
    for method, hint in misnamed_callbacks(obj):
        _log.warning("plugin type %r: %s.%s() is never called by mjfast (%s)", type_name,
                     obj.__qualname__, method, hint)


def _load_entry_point(type_name: str) -> Any:
    entry_point = _entry_points().get(type_name)
    if entry_point is None:
        raise PluginNotFoundError(_not_found_message(type_name))
    try:
        obj = entry_point.load()
    except Exception as exc:
        raise PluginNotFoundError(
            f"plugin type {type_name!r}: entry point '{entry_point.value}' "
            f"({_distribution_name(entry_point)}) failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    if not _is_plugin_object(obj):
        raise PluginNotFoundError(
            f"plugin type {type_name!r}: entry point '{entry_point.value}' is {_describe(obj)}; "
            f"expected {_EXPECTED}"
        )
    return obj


def _not_found_message(type_name: str) -> str:
    available = available_plugins()
    if not available:
        return f"no plugin type '{type_name}' is registered; no plugin types are installed"
    return unknown("no plugin type", type_name, available, after=" is registered",
                   exists="available", limit=_MAX_LISTED)


@dataclass(frozen=True)
class PluginType:
    """One discoverable plugin type, as `mjfast plugins` lists it."""

    name: str
    kind: str  # "Python MujocoPlugin", "Python ControlPlugin", "native", or "broken"
    distribution: str  # "<name> <version>" of the providing package, or "in-process"
    value: str  # the entry point's `module:attr`, or the registered object's qualified name
    error: str | None = None  # why the entry point does not give a plugin (kind "broken")


def _kind(obj: object) -> str:
    if isinstance(obj, type) and issubclass(obj, MujocoPlugin):
        return "Python MujocoPlugin"
    if isinstance(obj, type) and issubclass(obj, ControlPlugin):
        return "Python ControlPlugin"
    return "native"


def plugin_types() -> list[PluginType]:
    """Every plugin type, sorted by name, its entry point imported to tell its kind; an entry
    point that fails to import or names no plugin is listed with kind "broken" and the error.
    """
    with _lock:
        registered = dict(_registry)
    found = []
    for name, entry_point in _entry_points().items():
        if name in registered:
            continue
        dist = getattr(entry_point, "dist", None)
        distribution = (f"{dist.name} {dist.version}" if dist is not None
                        else "<unknown distribution>")
        try:
            obj = _load_entry_point(name)
        except PluginNotFoundError as error:
            cause = error.__cause__
            reason = (f"{type(cause).__name__}: {cause}" if cause is not None
                      else str(error).split("': entry point ", 1)[-1])
            found.append(PluginType(name, "broken", distribution, entry_point.value,
                                    " ".join(reason.split())))
            continue
        found.append(PluginType(name, _kind(obj), distribution, entry_point.value))
    for name, obj in registered.items():
        value = (f"{obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else repr(obj))
        found.append(PluginType(name, _kind(obj), "in-process", value))
    return sorted(found, key=lambda plugin: plugin.name)
