"""mjfast on a ROS 2 graph over rmw_zenoh's wire format (SPEC §19; the extra `mjfast[ros2]`).

`Bridge(env, *, domain_id=None, router=None)` makes the env a ROS 2 node that ROS 2 nodes using
`rmw_zenoh_cpp` (Jazzy) see and drive; `conversions` is the one table between mjfast's bus
messages and ROS 2 types, `types` the rosbags typestore, `wire` rmw_zenoh's keys, tokens and
attachments. `conversions`, `types` and `wire` need rosbags only; `Bridge` needs Zenoh too, and
is imported on first use (the recorder reads the table without a network).
"""

from __future__ import annotations

from typing import Any

try:
    import rosbags.typesys  # noqa: F401
except ImportError as _error:  # one line naming the extra
    raise ImportError(f"mjfast.ros2 needs the extra mjfast[ros2] (eclipse-zenoh and rosbags): "
                      f"pip install 'mjfast[ros2]' ({_error.name} is missing)") from None

__all__ = ["DEFAULT_ROUTER", "Bridge", "RouterNotFound"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'mjfast.interop.ros2' has no attribute {name!r}")
    try:
        import zenoh  # noqa: F401
    except ImportError as error:
        raise ImportError(f"mjfast.ros2 needs the extra mjfast[ros2] (eclipse-zenoh and "
                          f"rosbags): pip install 'mjfast[ros2]' ({error.name} is missing)"
                          ) from None
    from mjfast.interop.ros2 import bridge

    return getattr(bridge, name)
