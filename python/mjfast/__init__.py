"""mjfast: a MuJoCo simulation server for Python whose plugin system runs at native speed.

The public names live here; the compiled core is `mjfast._core` (imported through
`mjfast._core_loader`, which checks that it matches the installed mujoco).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mjfast.bus.node import Bus, Node
from mjfast.bus.params import ParameterServer
from mjfast.errors import (
    CameraUnavailableError,
    ConfigError,
    HookOwnershipError,
    LogicError,
    MjfastError,
    PluginError,
    PluginNotFoundError,
    RemoteError,
    SimulationError,
    StaleGenerationError,
)
from mjfast.model.state import SimState
from mjfast.model.urdf_export import export_urdf
from mjfast.plugin.base import (
    ControlPlugin,
    MujocoPlugin,
    PluginInfo,
    PluginLoadFailure,
    PluginState,
)
from mjfast.plugin.config import PluginSpec
from mjfast.plugin.discovery import available_plugins, register_plugin, unregister_plugin
from mjfast.plugin.native import NativePlugin, get_cmake_dir, get_include
from mjfast.sim.camera import FrameLease, OffscreenCamera
from mjfast.sim.env import MujocoEnv
from mjfast.sim.hooks import hooks_owned, install_hooks
from mjfast.sim.stats_table import format_statistics
from mjfast.sim.vector_env import VectorEnv

if TYPE_CHECKING:
    from mjfast.interop.record.recorder import RecordingFile
    from mjfast.interop.remote.client import Client

__version__ = "0.1.0"


def connect(endpoint: str | None = None, *, timeout: float = 5.0) -> Client:
    """A client of the `mjfast serve` at `endpoint` (default `tcp/127.0.0.1:7447`; SPEC §15).

    Needs the extra `mjfast[server]` (Zenoh); `import mjfast` itself does not.
    """
    try:
        from mjfast.interop.remote.client import connect as remote_connect
    except ImportError as error:
        raise ImportError(f"mjfast.connect needs Zenoh and msgpack: pip install 'mjfast[server]' "
                          f"({error})") from error
    return remote_connect(endpoint, timeout=timeout)

def open_recording(path: str | os.PathLike[str]) -> RecordingFile:
    """The recording that `env.record()` (or `mjfast run|serve --record`) wrote at `path`
    (SPEC §20): `topics()`, `messages(topic)`, `states()`, `env_at(time)`.

    Needs the extra `mjfast[ros2]` (rosbags); `import mjfast` itself does not.
    """
    from mjfast.interop.record.recorder import open_recording as open_bag

    return open_bag(path)


__all__ = [
    "Bus",
    "CameraUnavailableError",
    "ConfigError",
    "ControlPlugin",
    "FrameLease",
    "HookOwnershipError",
    "LogicError",
    "MjfastError",
    "MujocoEnv",
    "MujocoPlugin",
    "NativePlugin",
    "Node",
    "OffscreenCamera",
    "ParameterServer",
    "PluginError",
    "PluginInfo",
    "PluginLoadFailure",
    "PluginNotFoundError",
    "PluginSpec",
    "PluginState",
    "RemoteError",
    "SimState",
    "SimulationError",
    "StaleGenerationError",
    "VectorEnv",
    "available_plugins",
    "connect",
    "export_urdf",
    "format_statistics",
    "get_cmake_dir",
    "get_include",
    "hooks_owned",
    "install_hooks",
    "open_recording",
    "register_plugin",
    "unregister_plugin",
]
