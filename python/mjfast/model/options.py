"""The runtime-options transaction (SPEC §13): a patch of mujoco.MjOption fields and of the
`disable`/`enable` flags, its fields and kinds read from the installed mujoco, checked whole
(ConfigError naming the key or flag), then written to `model.opt`. The caller holds stepping.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import mujoco
import numpy as np

from mjfast.errors import ConfigError
from mjfast.names import close_matches, suggestion, unknown

__all__ = ["apply_options", "checked_options", "option_fields", "option_flags"]


class _Kind(enum.Enum):
    FLOAT = "a finite number"
    INT = "a non-negative integer"
    ENUM = "a name or value"
    ARRAY = "finite numbers"


class _Field(NamedTuple):
    kind: _Kind
    shape: tuple[int, ...] = ()
    enum_type: type | None = None


_fields_cache: dict[str, _Field] = {}


def option_fields() -> dict[str, _Field]:
    """mujoco.MjOption's fields as the installed mujoco names them, with their kind (read off
    a default instance); an int field whose mujoco enum is `mjt<Field>` takes that enum."""
    if not _fields_cache:
        defaults = mujoco.MjModel.from_xml_string("<mujoco/>").opt
        for name in dir(mujoco.MjOption):
            if name.startswith("_") or not isinstance(getattr(mujoco.MjOption, name), property):
                continue
            value = getattr(defaults, name)
            if isinstance(value, np.ndarray):
                _fields_cache[name] = _Field(_Kind.ARRAY, value.shape)
            elif isinstance(value, float):
                _fields_cache[name] = _Field(_Kind.FLOAT)
            elif isinstance(value, int):
                enum_type = getattr(mujoco, f"mjt{name.capitalize()}", None)
                if isinstance(enum_type, type) and hasattr(enum_type, "__members__"):
                    _fields_cache[name] = _Field(_Kind.ENUM, enum_type=enum_type)
                else:
                    _fields_cache[name] = _Field(_Kind.INT)
    return _fields_cache


def _enum_names(enum_type: Any) -> dict[str, int]:
    """An mjt enum's members by lower-case name without their prefix (mjINT_RK4 -> rk4)."""
    return {member.split("_", 1)[1].lower(): int(value)
            for member, value in enum_type.__members__.items() if "_" in member}


def option_flags(kind: str) -> dict[str, int]:
    """The bits of `disable` (mjtDisableBit) or `enable` (mjtEnableBit) by flag name."""
    bits = mujoco.mjtDisableBit if kind == "disable" else mujoco.mjtEnableBit
    return _enum_names(bits)


def _option_value(key: str, field: _Field, value: object) -> Any:
    problem = f"options/{key}: expected {field.kind.value}"
    if field.kind is _Kind.ENUM:
        assert field.enum_type is not None
        members = _enum_names(field.enum_type)
        if isinstance(value, str) and value.lower() in members:
            return members[value.lower()]
        if (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and int(value) in members.values()):
            return int(value)
        raise ConfigError(f"{problem} of {field.enum_type.__name__} "
                          f"({', '.join(members)})"
                          f"{suggestion(close_matches(value, members))}, got {value!r}")
    if field.kind is _Kind.INT:
        if (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and 0 <= value <= np.iinfo(np.int32).max):
            return int(value)
        raise ConfigError(f"{problem}, got {value!r}")
    if field.kind is _Kind.FLOAT:
        if (isinstance(value, (int, float, np.integer, np.floating))
                and not isinstance(value, bool) and math.isfinite(value)):
            if key == "timestep" and not value > 0:
                raise ConfigError(f"options/timestep: expected a positive number, got {value!r}")
            return float(value)
        raise ConfigError(f"{problem}, got {value!r}")
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        array = None
    if (array is None or isinstance(value, (str, bool)) or array.shape != field.shape
            or not np.all(np.isfinite(array))):
        raise ConfigError(f"{problem} of shape {field.shape}, got {value!r}")
    return array


def _flag_changes(kind: str, value: object) -> tuple[int, int]:
    """(bits to set, bits to clear) of a `disable`/`enable` patch entry."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"options/{kind}: expected a mapping from flag name to bool, "
                          f"got {value!r}")
    flags = option_flags(kind)
    set_bits = clear_bits = 0
    for flag, on in value.items():
        bit = flags.get(flag.lower()) if isinstance(flag, str) else None
        if bit is None:
            raise ConfigError(unknown(f"options/{kind}: unknown flag", flag, list(flags),
                                      exists="its flags are"))
        if not isinstance(on, (bool, np.bool_)):
            raise ConfigError(f"options/{kind}/{flag}: expected a bool, got {on!r}")
        if on:
            set_bits |= bit
        else:
            clear_bits |= bit
    return set_bits, clear_bits


def checked_options(patch: object) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """The field values and flag changes of an options patch, all checked (ConfigError naming
    the key or flag); nothing is written."""
    if patch is None:
        return {}, {}
    if not isinstance(patch, Mapping):
        raise ConfigError(f"options: expected a mapping of MjOption fields, got {patch!r}")
    fields = option_fields()
    values: dict[str, Any] = {}
    flags: dict[str, tuple[int, int]] = {}
    for key, value in patch.items():
        if key in ("disable", "enable"):
            flags[key] = _flag_changes(key, value)
        elif isinstance(key, str) and key in fields:
            values[key] = _option_value(key, fields[key], value)
        else:
            keys = [*sorted(fields), "disable", "enable"]
            raise ConfigError(unknown("options: unknown key", key, keys,
                                      exists="its keys (mujoco.MjOption's fields, disable and "
                                             "enable) are"))
    return values, flags


def apply_options(model: mujoco.MjModel, patch: object) -> None:
    """One transaction on `model.opt`: the whole patch is checked, then written."""
    values, flags = checked_options(patch)
    for key, value in values.items():
        if isinstance(value, np.ndarray):
            getattr(model.opt, key)[:] = value
        else:
            setattr(model.opt, key, value)
    for kind, (set_bits, clear_bits) in flags.items():
        attribute = f"{kind}flags"
        setattr(model.opt, attribute, (getattr(model.opt, attribute) & ~clear_bits) | set_bits)
