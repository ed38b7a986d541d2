"""The exception hierarchy of mjfast (SPEC §12).

Everything mjfast raises on purpose derives from `MjfastError`; each class also derives from the
builtin a caller would catch without knowing mjfast (a `ConfigError` is a `ValueError`, ...).
This module imports nothing from mjfast (only mujoco, for `FatalError`), so the compiled core can
import it at load time.
"""

from __future__ import annotations

import mujoco

__all__ = [
    "CameraUnavailableError",
    "ConfigError",
    "HookOwnershipError",
    "LogicError",
    "MjfastError",
    "PluginError",
    "PluginNotFoundError",
    "RemoteError",
    "SimulationError",
    "StaleGenerationError",
]


class MjfastError(Exception):
    """Base class of every error mjfast raises on purpose."""


class ConfigError(MjfastError, ValueError):
    """Malformed plugin configuration or parameters."""


class PluginNotFoundError(MjfastError, LookupError):
    """A plugin type that no entry point or registration provides."""


class PluginError(MjfastError, RuntimeError):
    """A plugin raised during live dispatch; the original exception is ``__cause__``."""

    def __init__(
        self,
        message: str,
        plugin_name: str | None = None,
        plugin_type: str | None = None,
        callback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin_name = plugin_name
        self.plugin_type = plugin_type
        self.callback = callback


class StaleGenerationError(MjfastError, RuntimeError):
    """A call tagged with a model or plugin generation that has been replaced."""


class HookOwnershipError(MjfastError, RuntimeError):
    """MuJoCo's global callbacks were replaced by someone other than mjfast."""


class CameraUnavailableError(MjfastError, RuntimeError):
    """A camera handle used during a reload or after its camera was retired."""


class LogicError(MjfastError):
    """API misuse: the call is never valid in the state it was made in."""


class SimulationError(MjfastError, mujoco.FatalError, RuntimeError):
    """MuJoCo raised a fatal error (``mju_error``) inside a step; the data is undefined until
    ``env.reset()`` (or a reload)."""


class RemoteError(MjfastError, RuntimeError):
    """A remote service call failed on the server (SPEC §15): `type_name` and `message` are the
    server-side exception's."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.type_name, self.message))
