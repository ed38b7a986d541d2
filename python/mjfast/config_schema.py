"""Declared configuration keys: a plugin type names the keys it reads and their types.

A plugin class (or a native descriptor) sets `config_keys`, a mapping from key to type:

    class MyPlugin(mjfast.MujocoPlugin):
        config_keys = {"kp": float, "joints": list[str], "target": dict[str, float],
                       "mode": ("position", "velocity"), "extra": object}

The env checks a configured entry against it before the plugin is instantiated: an unknown key
(`Kp` for `kp`) or a value of the wrong type (`kp: abc`) is a `factory` load failure whose
message names the key, with close matches. A type is `float` (any real number, not a bool),
`int`, `bool`, `str`, `list`, `dict`, `object` (anything), `list[T]`, `dict[str, T]`, a tuple of
types (any of them), or a tuple of strings (one of those values). `config_keys = None` (the
default) declares nothing and checks nothing. This module owns only the check.
"""

from __future__ import annotations

import difflib
import math
import types
from collections.abc import Mapping
from typing import Any

from mjfast.errors import ConfigError

__all__ = ["check_config", "describe_type"]

_NAMES: dict[type, str] = {float: "a number", int: "an integer", bool: "true or false",
                           str: "a string", list: "a list", dict: "a mapping",
                           object: "any value"}


def describe_type(spec: Any) -> str:
    """`spec` in words, for messages: `list[str]` -> 'a list of strings'."""
    if isinstance(spec, tuple):
        if spec and all(isinstance(item, str) for item in spec):
            return "one of " + ", ".join(repr(item) for item in spec)
        return " or ".join(describe_type(item) for item in spec)
    if isinstance(spec, types.GenericAlias):
        origin, args = spec.__origin__, spec.__args__
        if origin is list and len(args) == 1:
            return f"a list of {_plural(args[0])}"
        if origin is dict and len(args) == 2:
            return f"a mapping of {_plural(args[0])} to {_plural(args[1])}"
    if isinstance(spec, type):
        return _NAMES.get(spec, f"a {spec.__name__}")
    raise TypeError(f"config_keys: {spec!r} is not a type, a list[...]/dict[...] type or a tuple")


def _plural(spec: Any) -> str:
    words = describe_type(spec)
    for article in ("a ", "an "):
        if words.startswith(article):
            words = words[len(article):]
            return words[:-1] + "ies" if words.endswith("y") else words + "s"
    return words


def _mismatch(value: object, spec: Any, path: str = "") -> tuple[str, object, Any] | None:
    """None if `value` is a `spec`; else (where inside it, the offending value, what was due)."""
    if isinstance(spec, tuple):
        if spec and all(isinstance(item, str) for item in spec):
            ok = isinstance(value, str) and value in spec
        else:
            ok = any(_mismatch(value, item) is None for item in spec)
        return None if ok else (path, value, spec)
    if isinstance(spec, types.GenericAlias):
        origin, args = spec.__origin__, spec.__args__
        if origin is list:
            if not isinstance(value, list):
                return path, value, spec
            for index, item in enumerate(value):
                found = _mismatch(item, args[0], f"{path}[{index}]")
                if found is not None:
                    return found
            return None
        if origin is dict:
            if not isinstance(value, Mapping):
                return path, value, spec
            for key, item in value.items():
                found = (_mismatch(key, args[0], f"{path} key")
                         or _mismatch(item, args[1], f"{path}.{key}"))
                if found is not None:
                    return found
            return None
    if spec is object:
        ok = True
    elif spec is float:
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and not (isinstance(value, float) and math.isnan(value)))
    elif spec is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif spec is dict:
        ok = isinstance(value, Mapping)
    else:
        ok = isinstance(value, spec)
    return None if ok else (path, value, spec)


def check_config(where: str, config: Mapping[str, Any], keys: Mapping[str, Any] | None) -> None:
    """ConfigError naming the first unknown key or mistyped value of `config`, if any.

    `where`, if not empty, prefixes the message, e.g. "plugin 'hold' (mjfast/PoseHoldPD)".
    """
    if keys is None:
        return
    prefix = f"{where}: " if where else ""
    for key in config:
        if key not in keys:
            known = sorted(str(k) for k in keys)
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            lowered = [k for k in known if k.lower() == str(key).lower()]
            hint = lowered[:1] or close
            message = f"{prefix}unknown configuration key {str(key)!r}"
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise ConfigError(f"{message}; its keys are: {', '.join(known) or 'none'}")
    for key, value in config.items():
        found = _mismatch(value, keys[key], str(key))
        if found is not None:
            path, bad, expected = found
            raise ConfigError(f"{prefix}configuration key '{path}' must be "
                              f"{describe_type(expected)}, got {bad!r} ({type(bad).__name__})")
