"""mjfast/FtsGravComp: payload gravity compensation of a force/torque sensor pair, in update_read.

Configuration keys: `mass` (kg, required), `cog` (the payload's centre of gravity in the site's
frame, 3 numbers, default 0 0 0), `site` (name of the site the sensors are at, required),
`force_sensor` and `torque_sensor` (names of a `force` and a `torque` sensor at that site,
required). Sign convention (mujoco_ros2_control's): MuJoCo's sensors read the wrench the parent
exerts on the child, so a static payload reads minus its weight; this plugin *adds* the payload's
gravity wrench `f = R^T m g`, `t = cog x f` (R the site's orientation, g `model.opt.gravity`),
which removes the weight the sensor measures: a static configured payload reads zero.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import labelled_id, object_labels, object_names
from mjfast.names import no_such_name
from mjfast.plugin.base import ControlPlugin

__all__ = ["FtsGravComp"]


def _vector3(config: dict[str, Any], key: str, default: list[float] | None) -> np.ndarray:
    value = config.get(key, default)
    if value is None:
        raise ValueError(f"missing configuration key {key!r}")
    array = np.asarray(value, dtype=float)
    if array.shape != (3,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{key}: expected 3 finite numbers, got {value!r}")
    return array


class FtsGravComp(ControlPlugin):
    config_keys: ClassVar[dict[str, Any]] = {
        "mass": float, "cog": list[float], "site": str, "force_sensor": str,
        "torque_sensor": str}

    def init(self, node: Any, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        config = self.config
        try:
            self.mass = float(config["mass"])
            self.cog = _vector3(config, "cog", [0.0, 0.0, 0.0])
            site = str(config["site"])
            force = str(config["force_sensor"])
            torque = str(config["torque_sensor"])
        except KeyError as error:
            raise ValueError(f"{self.name}: missing configuration key {error}") from error
        except (TypeError, ValueError) as error:
            raise ValueError(f"{self.name}: bad configuration: {error}") from error
        if not np.isfinite(self.mass) or self.mass < 0:
            raise ValueError(f"{self.name}: mass must be a finite non-negative number, "
                             f"got {config['mass']!r}")
        self.site_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site)
        if self.site_id < 0:
            sites = object_names(model, mujoco.mjtObj.mjOBJ_SITE, model.nsite)
            raise ValueError(f"{self.name}: {no_such_name('site', site, sites)}")
        self.force_address = self._sensor_address(model, force, mujoco.mjtSensor.mjSENS_FORCE)
        self.torque_address = self._sensor_address(model, torque, mujoco.mjtSensor.mjSENS_TORQUE)
        return True

    def _sensor_address(self, model: mujoco.MjModel, name: str, kind: mujoco.mjtSensor) -> int:
        # An unnamed sensor is `sensor_<id>`, as SensorPublisher publishes it.
        sensor = labelled_id(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor, "sensor", name)
        if sensor < 0:
            labels = object_labels(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor, "sensor")
            raise ValueError(f"{self.name}: "
                             f"{no_such_name('sensor', name, [s for s in labels if s])}")
        if int(model.sensor_type[sensor]) != kind:
            raise ValueError(f"{self.name}: sensor {name!r} is not a {kind.name} sensor")
        if int(model.sensor_objid[sensor]) != self.site_id:
            raise ValueError(f"{self.name}: sensor {name!r} is not at site "
                             f"{self.config['site']!r}")
        return int(model.sensor_adr[sensor])

    def gravity_wrench(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """The payload's gravity wrench (force, torque about the site) in the site frame; needs
        `data.site_xmat` up to date."""
        rotation = data.site_xmat[self.site_id].reshape(3, 3)
        force = rotation.T @ (self.mass * model.opt.gravity)
        return np.concatenate([force, np.cross(self.cog, force)])

    def update_read(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        # The scratch data holds only the control state: the site orientation comes from qpos.
        mujoco.mj_kinematics(model, data)
        wrench = self.gravity_wrench(model, data)
        data.sensordata[self.force_address:self.force_address + 3] += wrench[:3]
        data.sensordata[self.torque_address:self.torque_address + 3] += wrench[3:]

    def cleanup(self) -> None:
        pass
