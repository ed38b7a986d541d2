"""mjfast/SensorPublisher: the model's MJCF sensors on the bus, with optional seeded noise.

Configuration keys (SPEC §14): `sensors` (list of sensor names; default every sensor of the
model), `rate_hz` (simulated time, default 100), `noise` (`{sensor: {std, bias}}`: Gaussian noise
added per component, `std` a number or one per component, `bias` likewise, default 0), `seed`
(the noise generator's seed, default 0; `env.reset()` restarts the generator from it), and
`ground_truth` (default true: each noisy sensor's true value goes to `~<sensor>_gt` too), and
`imu` (`{name, accelerometer, gyro, orientation?}`, three published sensors' names: their values,
as published, also go out together as `{"time", "accelerometer", "gyro", "orientation"}` on
`~<name>`, `orientation` None when not given; sensor_msgs/Imu over ROS 2, SPEC §19).

Each sensor publishes `{"time", "value"}` on `~<sensor name>` (an unnamed sensor is
`sensor_<id>`, in `sensors` and `noise` too): `value` is a float64 copy of its `sensordata`
slice, as the last `mj_step` computed it, `time` the simulated time of the step that published
it. Messages go out from `last_stage_callback` at the first step whose time reaches each multiple
of 1/rate_hz.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import named_entries, object_labels
from mjfast.plugins._sensing import (
    RatePublisher,
    check_keys,
    checked_state,
    id_of,
    listed_ids,
    number,
    seed_of,
)

__all__ = ["SensorPublisher"]

_KEYS = ("sensors", "rate_hz", "noise", "seed", "ground_truth", "imu")
_IMU_KEYS = ("name", "accelerometer", "gyro", "orientation")
_NOISE_KEYS = ("std", "bias")


class _Sensor:
    __slots__ = ("address", "bias", "dim", "name", "std", "topic", "truth_topic")

    def __init__(self, name: str, address: int, dim: int) -> None:
        self.name = name
        self.address = address
        self.dim = dim
        self.topic = f"~{name}"
        self.truth_topic: str | None = None
        self.std: np.ndarray | None = None  # None: no noise
        self.bias = np.zeros(dim)


class SensorPublisher(RatePublisher):
    # Checked before load (mjfast.plugin.schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        self._rate_hz = number(who, "rate_hz", self.config.get("rate_hz", 100.0), minimum=0.0,
                               strict=True)
        self._seed = seed_of(who, self.config)
        ground_truth = self.config.get("ground_truth", True)
        if not isinstance(ground_truth, bool):
            raise ValueError(f"{who}: ground_truth must be true or false, got {ground_truth!r}")
        # An unnamed sensor is `sensor_<id>` everywhere: its topic, `sensors` and `noise`.
        labels = object_labels(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor, "sensor")
        ids = listed_ids(who, self.config, "sensors", model, mujoco.mjtObj.mjOBJ_SENSOR,
                         "sensor", [label or "" for label in labels], prefix="sensor")
        if ids is None:
            ids = list(range(model.nsensor))
        for i in ids:
            if labels[i] is None:
                self.node.logger.warning(
                    f"{who}: unnamed sensor {i} is not published: a named sensor is called "
                    f"'sensor_{i}' (name the unnamed one)")
        self._sensors = [
            _Sensor(labels[i], int(model.sensor_adr[i]), int(model.sensor_dim[i]))
            for i in ids if labels[i] is not None]
        by_name = {s.name: s for s in self._sensors}
        noise = self.config.get("noise", {}) or {}
        if not isinstance(noise, dict):
            raise ValueError(f"{who}: noise must be a mapping of sensor name to {{std, bias}}, "
                             f"got {noise!r}")
        # Sensor names with '/' (`left/imu`) come from the parameter server as nested mappings.
        def is_spec(value: Mapping[str, Any]) -> bool:
            return any(key in value for key in _NOISE_KEYS)

        for name, spec in named_entries(noise, by_name, f"{who}: noise", is_spec):
            sensor = by_name.get(name)
            if sensor is None:
                id_of(who, model, mujoco.mjtObj.mjOBJ_SENSOR, "sensor", name,
                      [label or "" for label in labels], prefix="sensor")
                raise ValueError(f"{who}: noise names sensor {name!r}, which is not published "
                                 f"(not in sensors: {sorted(by_name)})")
            if not isinstance(spec, dict) or "std" not in spec:
                raise ValueError(f"{who}: noise.{name} must be a mapping with std (and optional "
                                 f"bias), got {spec!r}")
            check_keys(who, spec, _NOISE_KEYS, where=f"noise.{name}")
            sensor.std = self._per_component(f"noise.{name}.std", spec["std"], sensor.dim)
            sensor.bias = self._per_component(f"noise.{name}.bias", spec.get("bias", 0.0),
                                              sensor.dim, allow_negative=True)
            if ground_truth:
                sensor.truth_topic = f"~{sensor.name}_gt"
        self._imu = self._imu_config(self.config.get("imu"), by_name)
        self._start_schedule(self._rate_hz, model, data)
        self._rng = np.random.default_rng(self._seed)
        return True

    def _imu_config(self, imu: Any, by_name: dict[str, _Sensor]) -> tuple[str, dict[str, str]] | (
            None):
        """`imu`'s topic and its parts' sensor names, checked; None without `imu`."""
        if imu is None:
            return None
        if not isinstance(imu, dict) or not all(k in imu for k in _IMU_KEYS[:3]):
            raise ValueError(f"{self.name}: imu must be a mapping with name, accelerometer, gyro "
                             f"(and optional orientation), got {imu!r}")
        check_keys(self.name, imu, _IMU_KEYS, where="imu")
        parts = {k: imu[k] for k in _IMU_KEYS[1:] if imu.get(k) is not None}
        for key, sensor in parts.items():
            if sensor not in by_name:
                raise ValueError(f"{self.name}: imu.{key} names sensor {sensor!r}, which is not "
                                 f"published (sensors: {sorted(by_name)})")
        return f"~{imu['name']}", parts

    def _per_component(self, key: str, value: Any, dim: int, *,
                       allow_negative: bool = False) -> np.ndarray:
        values = value if isinstance(value, (list, tuple)) else [value] * dim
        if len(values) != dim:
            raise ValueError(f"{self.name}: {key} must be a number or a list of {dim}, "
                             f"got {value!r}")
        minimum = None if allow_negative else 0.0
        return np.array([number(self.name, key, v, minimum=minimum) for v in values])

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        sensordata = data.sensordata
        publish = self.node.publish
        sent = {}
        for sensor in self._sensors:
            value = sensordata[sensor.address:sensor.address + sensor.dim].copy()
            if sensor.std is None:
                publish(sensor.topic, {"time": time, "value": value})
                sent[sensor.name] = value
                continue
            noisy = value + sensor.bias + sensor.std * self._rng.standard_normal(sensor.dim)
            publish(sensor.topic, {"time": time, "value": noisy})
            sent[sensor.name] = noisy
            if sensor.truth_topic is not None:
                publish(sensor.truth_topic, {"time": time, "value": value})
        if self._imu is not None:
            topic, parts = self._imu
            publish(topic, {"time": time, "orientation": None,
                            **{key: sent[name] for key, name in parts.items()}})

    def reset(self) -> None:
        super().reset()
        self._rng = np.random.default_rng(self._seed)

    # State (SPEC §20): the schedule and the noise generator's position in its stream.
    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "rng": self._rng.bit_generator.state}

    def set_state(self, value: Any) -> None:
        state = checked_state(self.name, value, {"low": float, "high": float, "rng": dict})
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as error:
            kind = type(rng.bit_generator).__name__
            raise ValueError(f"{self.name}: state['rng'] is not a {kind} state: {error}"
                             ) from None
        super().set_state({"low": state["low"], "high": state["high"]})
        self._rng = rng
