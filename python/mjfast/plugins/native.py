"""Descriptors of mjfast's own native plugins, compiled into libmjfast_plugins.so (src/plugins).

`mjfast/NoOp` (the dispatch-cost baseline), `mjfast/PDController` (joint-space PD on ctrl),
`mjfast/ExternalWrench` (a timed push on a body) and `mjfast/Lidar` (mj_multiRay scans, sync or
async, SPEC §14); their configuration keys are in the README and at the top of each source file.
"""

from __future__ import annotations

from mjfast.plugin.native import NativePlugin
from mjfast.plugin.schema import ModelName

__all__ = ["ExternalWrench", "Lidar", "NoOp", "PDController"]

_LIBRARY = "libmjfast_plugins.so"

# NoOp ignores any keys (documented); the others declare theirs, whose values their C++ checks.
NoOp = NativePlugin(_LIBRARY, "NoOp", package=__package__)
PDController = NativePlugin(
    _LIBRARY, "PDController", package=__package__,
    config_keys={"joints": list, "actuators": list, "gains": dict, "targets": list,
                 "limits": dict})
ExternalWrench = NativePlugin(
    _LIBRARY, "ExternalWrench", package=__package__,
    config_keys={"body": str, "force": list, "torque": list, "point": list, "start": float,
                 "duration": float, "ramp_down": float})
# Lidar's keys, nested ones and the mount's name included, are checked here before create; their
# values' types by its load(), with the messages of SPEC §14's Python original. The rays start at
# `site`, or at `body` moved by `pos` and turned by `quat` (in the body frame), for models with
# no site on the sensor mount; a scan casts at most 4,194,304 rays (checked at load).
_AXIS = {"samples": object, "min_angle": object, "max_angle": object}
Lidar = NativePlugin(
    _LIBRARY, "Lidar", package=__package__,
    config_keys={"site": ModelName("site"), "body": ModelName("body"), "pos": object,
                 "quat": object, "horizontal": _AXIS, "vertical": _AXIS,
                 "range": {"min": object, "max": object}, "rate_hz": object,
                 "geom_groups": object, "noise_std": object, "seed": object, "async": object,
                 "visualize": object, "topic": object})
