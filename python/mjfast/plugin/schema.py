"""Declared configuration keys: a plugin type names the keys it reads and their types.

A plugin class (or a native descriptor) sets `config_keys`, a mapping from key to type:

    class MyPlugin(mjfast.MujocoPlugin):
        config_keys = {"kp": float, "joints": list[str], "target": dict[str, float],
                       "mode": ("position", "velocity"), "extra": object}

The env checks a configured entry against it before the plugin is instantiated: an unknown key
(`Kp` for `kp`) or a value of the wrong type (`kp: abc`) is a `factory` load failure whose
message names the key, with close matches. A type is `float` (any real number, not a bool),
`int`, `bool`, `str`, `list`, `dict`, `object` (anything), `list[T]`, `dict[str, T]`, a tuple of
types (any of them), a tuple of strings (one of those values), a mapping of key to type (a nested
section, whose keys are checked the same way; null counts as absent), or `ModelName("site")` (the
name of one of the model's sites; any `mujoco.mjtObj` kind). `config_keys = None` (the default)
declares nothing and checks nothing. This module owns only the check; its messages are
`mjfast.names`'.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mjfast.errors import ConfigError
from mjfast.names import no_such_name, unknown

__all__ = ["ModelName", "check_config", "describe_type"]


@dataclass(frozen=True)
class ModelName:
    """The type of a key that names one of the model's objects of kind `kind` ("site", "body",
    "joint": `mujoco.mjtObj.mjOBJ_<KIND>`), checked against the model when there is one."""

    kind: str


# Each type in words, as one value (singular) and as what a list of them holds (plural).
_NAMES: dict[type, tuple[str, str]] = {
    float: ("a number", "numbers"), int: ("an integer", "integers"),
    bool: ("true or false", "true/false values"), str: ("a string", "strings"),
    list: ("a list", "lists"), dict: ("a mapping", "mappings"), object: ("any value", "values")}


def describe_type(spec: Any) -> str:
    """`spec` in words, for messages: `list[str]` -> 'a list of strings'."""
    return _words(spec)[0]


def _words(spec: Any) -> tuple[str, str]:
    """`spec` in words, singular and plural. The plural makes the head noun plural, not the
    phrase's last word (`list[list[float]]` holds 'lists of numbers')."""
    if isinstance(spec, ModelName):
        return f"the name of a {spec.kind}", f"names of {spec.kind}s"
    if isinstance(spec, Mapping):
        keys = ", ".join(sorted(str(key) for key in spec))
        return f"a mapping with keys {keys}", f"mappings with keys {keys}"
    if isinstance(spec, tuple):
        if spec and all(isinstance(item, str) for item in spec):
            values = ", ".join(repr(item) for item in spec)
            return f"one of {values}", f"values among {values}"
        words = [_words(item) for item in spec]
        return " or ".join(one for one, _ in words), " or ".join(many for _, many in words)
    if isinstance(spec, types.GenericAlias):
        origin, args = spec.__origin__, spec.__args__
        if origin is list and len(args) == 1:
            items = _words(args[0])[1]
            return f"a list of {items}", f"lists of {items}"
        if origin is dict and len(args) == 2:
            pairs = f"{_words(args[0])[1]} to {_words(args[1])[1]}"
            return f"a mapping of {pairs}", f"mappings of {pairs}"
    if isinstance(spec, type):
        return _NAMES.get(spec, (f"a {spec.__name__}", f"{spec.__name__} values"))
    raise TypeError(f"config_keys: {spec!r} is not a type, a list[...]/dict[...] type or a tuple")


def _mismatch(value: object, spec: Any, path: str = "") -> tuple[str, object, Any] | None:
    """None if `value` is a `spec`; else (where inside it, the offending value, what was due)."""
    if isinstance(spec, ModelName):
        return None if isinstance(value, str) else (path, value, spec)
    if isinstance(spec, Mapping):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            return path, value, spec
        for key, item in value.items():
            found = _mismatch(item, spec[key], f"{path}.{key}") if key in spec else None
            if found is not None:
                return found
        return None
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


def check_config(where: str, config: Mapping[str, Any], keys: Mapping[str, Any] | None,
                 model: Any = None) -> None:
    """ConfigError naming the first unknown key or mistyped value of `config`, if any, and with
    `model` (a mujoco.MjModel) the first `ModelName` value that names nothing of it.

    `where`, if not empty, prefixes the message, e.g. "plugin 'hold' (mjfast/PoseHoldPD)".
    """
    if keys is None:
        return
    prefix = f"{where}: " if where else ""
    refused = _unknown_key(config, keys, "")
    if refused is not None:
        section, key, known = refused
        raise ConfigError(prefix + unknown("unknown configuration key", key, known, n=1,
                                           section=section, exists="its keys are"))
    for key, value in config.items():
        found = _mismatch(value, keys[key], str(key))
        if found is not None:
            path_, bad, expected = found
            raise ConfigError(f"{prefix}configuration key '{path_}' must be "
                              f"{describe_type(expected)}, got {bad!r} ({type(bad).__name__})")
    if model is not None:
        for path_, name, kind in _model_names(config, keys, ""):
            known = _names_of(model, kind)
            if name not in known:
                raise ConfigError(f"{prefix}configuration key '{path_}': "
                                  f"{no_such_name(kind, name, known)}")


def _unknown_key(config: Mapping[str, Any], keys: Mapping[str, Any], path: str
                 ) -> tuple[str, str, list[str]] | None:
    """(the dotted path of its section, the first key of `config` that `keys` lacks, the keys
    there)."""
    for key in config:
        if key not in keys:
            return path, str(key), sorted(str(known) for known in keys)
    for key, value in config.items():
        if isinstance(keys[key], Mapping) and isinstance(value, Mapping):
            found = _unknown_key(value, keys[key], f"{path}{key}.")
            if found is not None:
                return found
    return None


def _model_names(config: Mapping[str, Any], keys: Mapping[str, Any], path: str
                 ) -> list[tuple[str, str, str]]:
    """(dotted path, name, kind) of each `ModelName` value of `config` (already type-checked)."""
    found = []
    for key, value in config.items():
        spec = keys[key]
        if isinstance(spec, ModelName):
            found.append((f"{path}{key}", value, spec.kind))
        elif isinstance(spec, Mapping) and isinstance(value, Mapping):
            found += _model_names(value, spec, f"{path}{key}.")
    return found


# The MjModel size field of each kind a ModelName can name.
_COUNTS = {"body": "nbody", "site": "nsite", "joint": "njnt", "geom": "ngeom", "camera": "ncam",
           "sensor": "nsensor", "actuator": "nu", "tendon": "ntendon"}


def _names_of(model: Any, kind: str) -> list[str]:
    import mujoco

    from mjfast.model.names import object_names

    obj_type = getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}")
    return object_names(model, obj_type, int(getattr(model, _COUNTS[kind])))
