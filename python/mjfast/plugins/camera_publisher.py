"""mjfast/CameraPublisher: publishes each configured camera's latest frames on the bus.

Configuration keys: `cameras` (list of camera names, an unnamed camera being `camera_<id>`;
default: every camera of the model), `planes` (default: every plane each camera is configured
with), `topic` (default `~`; frames go to `<topic>/<camera>/<plane>`). Each camera renders at its
own `rate_hz` (parameters under `<env namespace>/cameras/<name>`); a message is published
whenever a newer frame has completed, from `last_stage_callback`. A message is a dict: `camera`,
`plane`, `simulation_time_ns`, `capture_id`, `width`, `height`, `frame_generation` and `data` (a
copy of the pixels, so that subscribers may keep it without holding the frame store's slots).
With the ROS 2 bridge (and in a recording) the frames are sensor_msgs/Image and CameraInfo stamped
with the camera's optical frame `<camera>_optical`, which mjfast/TfPublisher carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import mujoco

from mjfast.names import unknown
from mjfast.plugin.base import MujocoPlugin
from mjfast.sim.camera import PLANES, camera_names

__all__ = ["CameraPublisher", "configured_cameras"]


def configured_cameras(who: str, config: Mapping[str, Any], model: mujoco.MjModel) -> list[str]:
    """The names of the cameras a CameraPublisher configured with `config` publishes, as it opens
    them and names their topics: `cameras`, or every camera of the model (an unnamed one
    `camera_<id>`). The one reading of `cameras`, by the plugin and the ROS 2 conversion alike;
    ValueError for an empty or repeating list."""
    names = config.get("cameras")
    if names is None:
        names = camera_names(model)
    if isinstance(names, str):
        names = [names]
    if not names:
        raise ValueError(f"{who}: cameras must name at least one camera (leave it out "
                         f"for every camera of the model)")
    repeated = sorted({str(name) for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{who}: cameras lists {repeated[0]!r} more than once")
    return [str(name) for name in names]


class CameraPublisher(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {
        "cameras": (list[str], str), "planes": (list[str], str), "topic": str}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        names = configured_cameras(self.name, self.config, model)
        wanted = self.config.get("planes")
        if isinstance(wanted, str):
            wanted = [wanted]
        refused = [plane for plane in wanted or [] if plane not in PLANES]
        if refused:
            raise ValueError(f"{self.name}: planes: " + unknown(
                "unknown plane", refused[0], PLANES, exists="the planes are"))
        prefix = str(self.config.get("topic", "~")).rstrip("/")
        self._streams: list[tuple[Any, str, str]] = []
        self._cameras = []
        for name in names:
            camera = self.env.open_offscreen_camera(name)
            camera.enable_frames()
            self._cameras.append((name, camera, wanted))
        self._prefix = prefix or "~"
        self._published = 0
        return True

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        if not self._streams:
            self._resolve_streams()
        for name, camera, plane in self._streams:
            lease = camera.take_latest(plane)
            if lease is None:
                continue
            with lease:
                self.node.publish(f"{self._prefix}/{name}/{plane}", {
                    "camera": name,
                    "plane": plane,
                    "simulation_time_ns": lease.simulation_time_ns,
                    "capture_id": lease.capture_id,
                    "width": lease.width,
                    "height": lease.height,
                    "frame_generation": lease.frame_generation,
                    "data": lease.data.copy(),
                })
            self._published += 1

    def _resolve_streams(self) -> None:
        # The planes a camera has are known once it is bound, after load.
        for name, camera, wanted in self._cameras:
            for plane in PLANES:
                if camera.plane_configured(plane) and (not wanted or plane in wanted):
                    self._streams.append((name, camera, plane))

    def statistics(self) -> dict[str, Any]:
        return {"frames_published": float(getattr(self, "_published", 0))}
