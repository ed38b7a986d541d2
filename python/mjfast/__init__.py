"""mjfast: a MuJoCo simulation server for Python whose plugin system runs at native speed.

The public names live here; the compiled core is `mjfast._core` (imported through
`mjfast._native`, which checks that it matches the installed mujoco).
"""

from __future__ import annotations

from mjfast.camera import FrameLease, OffscreenCamera
from mjfast.discovery import available_plugins, register_plugin, unregister_plugin
from mjfast.env import MujocoEnv
from mjfast.errors import (
    CameraUnavailableError,
    ConfigError,
    HookOwnershipError,
    LogicError,
    MjfastError,
    PluginError,
    PluginNotFoundError,
    SimulationError,
    StaleGenerationError,
)
from mjfast.hooks import hooks_owned, install_hooks
from mjfast.native import NativePlugin, get_cmake_dir, get_include
from mjfast.node import Bus, Node
from mjfast.params import ParameterServer
from mjfast.plugin import (
    ControlPlugin,
    MujocoPlugin,
    PluginInfo,
    PluginLoadFailure,
    PluginState,
)
from mjfast.plugin_config import PluginSpec
from mjfast.stats_table import format_statistics

__version__ = "0.1.0"

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
    "SimulationError",
    "StaleGenerationError",
    "available_plugins",
    "format_statistics",
    "get_cmake_dir",
    "get_include",
    "hooks_owned",
    "install_hooks",
    "register_plugin",
    "unregister_plugin",
]
