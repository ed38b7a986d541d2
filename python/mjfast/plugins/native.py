"""Descriptors of mjfast's own native plugins, compiled into libmjfast_plugins.so (src/plugins).

`mjfast/NoOp` (the dispatch-cost baseline), `mjfast/PDController` (joint-space PD on ctrl),
`mjfast/ExternalWrench` (a timed push on a body) and `mjfast/Lidar` (mj_multiRay scans, sync or
async, SPEC §14); their configuration keys are in the README and at the top of each source file.
"""

from __future__ import annotations

from mjfast.native import NativePlugin

__all__ = ["ExternalWrench", "Lidar", "NoOp", "PDController"]

_LIBRARY = "libmjfast_plugins.so"

NoOp = NativePlugin(_LIBRARY, "NoOp", package=__package__)
PDController = NativePlugin(_LIBRARY, "PDController", package=__package__)
ExternalWrench = NativePlugin(_LIBRARY, "ExternalWrench", package=__package__)
Lidar = NativePlugin(_LIBRARY, "Lidar", package=__package__)
