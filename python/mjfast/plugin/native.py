"""Native (C++) plugins: the descriptor that names a plugin library, and where the SDK lives.

A native plugin type is registered with an entry point whose value is a `NativePlugin`; the env
builds a compiled NativePluginAdapter from it (SPEC §9). This module does not load libraries
itself (the compiled core does, and checks the ABI version), nor build them (`mjfast_add_plugin`
in the CMake package does).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mujoco

from mjfast.bus.params import check_nesting
from mjfast.model.names import frame_names
from mjfast.plugin.topics import Topic, ros_types_topics

__all__ = ["NativePlugin", "config_json", "get_cmake_dir", "get_include", "native_topics"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # mjfast/, above this layer


def get_include() -> str:
    """The directory to add to the include path: it holds mjfast/plugin_abi.h and plugin.hpp."""
    return str(_PACKAGE_DIR / "include")


def get_cmake_dir() -> str:
    """The directory of mjfast's CMake package (set `mjfast_DIR` to it for find_package)."""
    return str(_PACKAGE_DIR / "cmake")


class NativePlugin:
    """Descriptor of a plugin class compiled into a shared library.

    `library` is an absolute path, or a path relative to the package that creates the descriptor
    (`package`, by default the caller's package; for an editable install every directory of the
    package's `__path__` is tried). `class_name` names the class exported with
    `MJFAST_PLUGIN(Class)`, whose entry symbol is `mjfast_plugin_<Class>`; `symbol` names the
    entry function directly instead. `config_keys` declares the configuration keys the plugin
    reads (see `mjfast.plugin.schema`): others are then a load failure naming the key.
    """

    __mjfast_native__ = True

    def __init__(
        self,
        library: str | os.PathLike[str],
        class_name: str | None = None,
        *,
        symbol: str | None = None,
        package: str | None = None,
        config_keys: Mapping[str, Any] | None = None,
        ros_types: Mapping[str, str] | None = None,
    ) -> None:
        if (class_name is None) == (symbol is None):
            raise TypeError("NativePlugin needs exactly one of class_name= and symbol=")
        self.library = os.fspath(library)
        self.class_name = class_name
        self.symbol = symbol if symbol is not None else f"mjfast_plugin_{class_name}"
        # As a Python plugin's class attribute (mjfast.plugin.schema); None checks nothing.
        self.config_keys = config_keys
        self.ros_types = dict(ros_types) if ros_types is not None else None
        if package is None and not os.path.isabs(self.library):
            caller = sys._getframe(1).f_globals
            package = caller.get("__package__") or caller.get("__name__", "").rpartition(".")[0]
        self.package = package

    def library_path(self) -> str:
        """The library's absolute path; FileNotFoundError naming the places looked at."""
        path = Path(self.library)
        if path.is_absolute():
            if not path.is_file():
                raise FileNotFoundError(f"native plugin library '{path}' does not exist")
            return str(path)
        candidates: list[Path] = []
        if self.package:
            module = importlib.import_module(self.package)
            for directory in getattr(module, "__path__", None) or [
                os.path.dirname(module.__file__ or "")
            ]:
                candidates.append(Path(directory) / path)
        for candidate in candidates:
            if candidate.is_file():
                return str(candidate.resolve())
        looked = ", ".join(str(c) for c in candidates) or "nowhere (no package)"
        raise FileNotFoundError(
            f"native plugin library '{self.library}' not found (looked in: {looked})"
        )

    def __repr__(self) -> str:
        return (f"NativePlugin(library={self.library!r}, symbol={self.symbol!r}, "
                f"package={self.package!r})")


def config_json(config: Mapping[str, Any]) -> str:
    """A plugin's configuration as the JSON object its constructor parses.

    ConfigError (not json's RecursionError or "Circular reference") for a configuration nested
    deeper than `mjfast.bus.params.MAX_DEPTH` levels or containing itself.
    """
    check_nesting(config, "plugin configuration")
    return json.dumps(dict(config), allow_nan=True, default=_jsonable)


def _jsonable(value: Any) -> Any:
    # json.dumps asks only about what it cannot write itself (never a float, finite or not):
    # numpy scalars and arrays from programmatic configuration.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"configuration value {value!r} is not a YAML/JSON type")


def native_topics(handle: Any, descriptor: NativePlugin, model: mujoco.MjModel, where: str
                  ) -> list[Topic]:
    """The topics a loaded native plugin declares: its reply to `call("topics")` on `handle`, a
    JSON list of `{topic, kind, ros_type, params, frame?: [site|body|camera, name]}`
    (plugin.hpp's `Plugin::topics()`; an object's frame becomes `params["frame_id"]`, the frame
    id `frame_names` gives it), then its `descriptor`'s `ros_types`. A plugin built before
    `topics()` declares only those. ValueError naming `where` for a malformed reply."""
    try:
        reply = handle.call("topics", "")
    except Exception:  # built before topics() (no such command): its descriptor's only
        reply = "[]"
    entries = json.loads(reply or "[]")
    if not isinstance(entries, list):
        raise ValueError(f"{where}: call('topics') must reply with a JSON list, got {reply!r}")
    frames = None
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: call('topics') lists {entry!r}, not an object")
        params = dict(entry.get("params") or {})
        frame = entry.get("frame")
        if frame:
            frames = frames or frame_names(model)
            params["frame_id"] = _frame_of(model, frames, frame, where)
        out.append(Topic(entry.get("topic", ""), entry.get("kind", ""),
                         entry.get("ros_type") or None,
                         params, inbound=bool(entry.get("inbound", False)),
                         source=entry.get("source"),
                         transient_local=bool(entry.get("transient_local", False))))
    return out + ros_types_topics(descriptor.ros_types)


_FRAME_OBJECTS = {"site": mujoco.mjtObj.mjOBJ_SITE, "body": mujoco.mjtObj.mjOBJ_BODY,
                  "camera": mujoco.mjtObj.mjOBJ_CAMERA}


def _frame_of(model: mujoco.MjModel, frames: Any, frame: Any, where: str) -> str:
    if (not isinstance(frame, list) or len(frame) != 2 or frame[0] not in _FRAME_OBJECTS
            or not isinstance(frame[1], str)):
        raise ValueError(f"{where}: a topic's frame must be [site|body|camera, name], got "
                         f"{frame!r}")
    found = mujoco.mj_name2id(model, _FRAME_OBJECTS[frame[0]], frame[1])
    if found < 0:
        raise ValueError(f"{where}: a topic's frame names {frame[0]} {frame[1]!r}, which the "
                         f"model does not have")
    return frames.of(_FRAME_OBJECTS[frame[0]], found) or "world"
