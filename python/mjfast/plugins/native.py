"""Descriptors of mjfast's own native plugins, compiled into libmjfast_plugins.so (src/plugins).

`mjfast/NoOp` (the dispatch-cost baseline), `mjfast/PDController` (joint-space PD on ctrl) and
`mjfast/ExternalWrench` (a timed push on a body); their configuration keys are in the README and
at the top of each source file.
"""

from __future__ import annotations

from mjfast.native import NativePlugin

__all__ = ["ExternalWrench", "NoOp", "PDController"]

_LIBRARY = "libmjfast_plugins.so"

NoOp = NativePlugin(_LIBRARY, "NoOp", package=__package__)
PDController = NativePlugin(_LIBRARY, "PDController", package=__package__)
ExternalWrench = NativePlugin(_LIBRARY, "ExternalWrench", package=__package__)
