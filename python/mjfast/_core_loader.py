"""Imports the compiled core, after checking it was built against the mujoco that is running.

The extension links libmujoco.so.<version>: a different mujoco would fail with an opaque loader
error, so the versions are compared first and the mismatch is named.
"""

from __future__ import annotations

import mujoco

try:
    from mjfast._build_info import MUJOCO_VERSION_BUILT
except ImportError as error:  # a source checkout that was never built
    raise ImportError(
        "mjfast's compiled core is not built: install the package with `pip install .` "
        "(it builds mjfast._core with CMake and a C++17 compiler)"
    ) from error

if mujoco.__version__ != MUJOCO_VERSION_BUILT:
    raise ImportError(
        f"mjfast was built against mujoco {MUJOCO_VERSION_BUILT} but mujoco "
        f"{mujoco.__version__} is installed: install mujoco=={MUJOCO_VERSION_BUILT} "
        "or rebuild mjfast (`pip install --force-reinstall .`)"
    )

try:
    from mjfast import _core
except ImportError as error:
    raise ImportError(
        f"mjfast._core failed to import ({error}); rebuild it with `pip install .`"
    ) from error

__all__ = ["_core"]
