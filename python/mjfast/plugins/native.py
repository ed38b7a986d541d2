"""Descriptors of mjfast's own native plugins, compiled into libmjfast_plugins.so (src/plugins).

`mjfast/NoOp` (the dispatch-cost baseline), `mjfast/PDController` (joint-space PD on ctrl) and
`mjfast/ExternalWrench` (a timed push on a body); their configuration keys are in the README and
at the top of each source file.
"""

from __future__ import annotations

from mjfast.native import NativePlugin

__all__ = ["ExternalWrench", "NoOp", "PDController"]

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
