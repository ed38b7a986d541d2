"""Offscreen cameras (SPEC §10): the env's side of the compiled RenderCore.

This module owns camera parameters (`<env namespace>/cameras/<name>`), the checks made before a
handle is opened, and the order of retirement and rebinding around loads. Rendering, snapshots,
frame stores and the handle semantics themselves are the compiled core's (`_core.RenderCore`,
`_core.OffscreenCamera`, `_core.FrameLease`).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco

from mjfast._core_loader import _core
from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import ConfigError
from mjfast.model.names import object_id, object_labels
from mjfast.names import listing, unknown

__all__ = ["PLANES", "CameraRig", "FrameLease", "OffscreenCamera", "camera_config"]

OffscreenCamera = _core.OffscreenCamera
FrameLease = _core.FrameLease
# The frame planes and the camera parameters, as the compiled core names and reads them.
PLANES: tuple[str, ...] = _core.PLANES
CAMERA_KEYS: tuple[str, ...] = _core.CAMERA_KEYS
DEFAULT_RATE_HZ = 30.0
# As mujoco.Renderer's default, so that the same models fit.
DEFAULT_MAX_GEOM = 10000


CAMERA_PREFIX = "camera"


def camera_names(model: mujoco.MjModel) -> list[str]:
    """The names cameras are opened by, in id order: an unnamed camera is `camera_<id>` (as an
    unnamed sensor is `sensor_<id>`), unless a named camera has that name."""
    return [label for label in object_labels(model, mujoco.mjtObj.mjOBJ_CAMERA, model.ncam,
                                             CAMERA_PREFIX) if label]


def camera_config(params: ParameterServer, namespace: str, model: mujoco.MjModel,
                  name: str) -> dict[str, Any]:
    """The parameters of camera `name`, with defaults filled in and checked (ConfigError)."""
    where = f"{resolve_name('cameras', namespace)}/{name}"
    values = params.get(where, None)
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping of camera parameters, "
                          f"got {type(values).__name__}")
    for key in values:
        if key not in CAMERA_KEYS:
            raise ConfigError(unknown(f"{where}: unknown parameter", key, CAMERA_KEYS,
                                      exists="its parameters are"))
    config = {
        "width": _positive_int(values.get("width", model.vis.global_.offwidth), where, "width"),
        "height": _positive_int(values.get("height", model.vis.global_.offheight), where,
                                "height"),
        "max_geom": _positive_int(values.get("max_geom", DEFAULT_MAX_GEOM), where, "max_geom"),
    }
    rate = values.get("rate_hz", DEFAULT_RATE_HZ)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise ConfigError(f"{where}/rate_hz: expected a positive number, got {rate!r}")
    config["rate_hz"] = float(rate)
    planes = values.get("planes", ["rgb"])
    if isinstance(planes, str):
        planes = [planes]
    if (not isinstance(planes, Sequence) or not planes
            or any(plane not in PLANES for plane in planes)):
        raise ConfigError(f"{where}/planes: expected a non-empty list of "
                          f"{', '.join(PLANES)}; got {planes!r}")
    config["planes"] = list(dict.fromkeys(planes))
    return config


def _positive_int(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}/{key}: expected a positive integer, got {value!r}")
    return value


class CameraRig:
    """The env's cameras: the env core's RenderCore, opened handles, and their (re)binding at
    loads."""

    def __init__(self, render_core: Any) -> None:
        self._core = render_core
        # The handles opened and still held by someone (the browser viewer shows their frames).
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()

    @property
    def render_core(self) -> Any:
        return self._core

    def begin_load(self, model: mujoco.MjModel, model_generation: int) -> None:
        """A load or reload of `model` begins: handles are pending, their setters queued."""
        self._core.begin_load(model, model._address, model_generation)

    def configs_for_reload(self, model: mujoco.MjModel, params: ParameterServer,
                           namespace: str) -> dict[str, dict[str, Any]]:
        """The configs of the open handles that `model` can rebind, checked (ConfigError) before
        a reload commits."""
        known = set(camera_names(model))
        return {name: camera_config(params, namespace, model, name)
                for name in self._core.live_names() if name in known}

    def finish_load(self, model: mujoco.MjModel, params: ParameterServer, namespace: str,
                    checked: dict[str, dict[str, Any]] | None = None) -> list[str]:
        """Binds the pending handles by name; returns the names the model lacks. `checked` holds
        configs computed before the load; a handle opened during it was checked at open()."""
        known = set(camera_names(model))
        checked = checked or {}
        configs = {name: checked.get(name) or camera_config(params, namespace, model, name)
                   for name in self._core.pending_names() if name in known}
        return list(self._core.bind(configs))

    def open(self, name: str, model: mujoco.MjModel, params: ParameterServer,
             namespace: str) -> OffscreenCamera:
        # LogicError before anything else: from a plugin callback, or inside an acquire_plugin
        # block (a capture may be waiting for that block's host lock while holding the cameras).
        self._core.check_can_open()
        if not isinstance(name, str):
            raise TypeError(f"camera name must be a str, got {type(name).__name__}")
        object_id(model, mujoco.mjtObj.mjOBJ_CAMERA, "camera", model.ncam, name,  # or KeyError
                  prefix=CAMERA_PREFIX)
        handle = self._core.open(name, camera_config(params, namespace, model, name))
        self._opened.add(handle)
        return handle

    def open_handles(self) -> list[OffscreenCamera]:
        """The handles opened on this env that someone still holds, in no particular order."""
        return list(self._opened)

    def retire(self) -> None:
        self._core.retire()

    def close(self) -> None:
        self._core.close()

    def statistics(self) -> dict[str, Any]:
        """Render figures; takes no lock a capture holds, so it is callable from anywhere."""
        return dict(self._core.statistics())

    @staticmethod
    def missing_error(model: mujoco.MjModel, missing: list[str]) -> KeyError:
        names = ", ".join(repr(name) for name in missing)
        return KeyError(f"after reload, the model has no camera named {names}: those handles "
                        f"are unavailable; the model's cameras: {listing(camera_names(model))}")
