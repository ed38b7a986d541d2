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

from mjfast.bus.params import check_nesting

__all__ = ["NativePlugin", "config_json", "get_cmake_dir", "get_include"]

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
    ) -> None:
        if (class_name is None) == (symbol is None):
            raise TypeError("NativePlugin needs exactly one of class_name= and symbol=")
        self.library = os.fspath(library)
        self.class_name = class_name
        self.symbol = symbol if symbol is not None else f"mjfast_plugin_{class_name}"
        # As a Python plugin's class attribute (mjfast.plugin.schema); None checks nothing.
        self.config_keys = config_keys
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
