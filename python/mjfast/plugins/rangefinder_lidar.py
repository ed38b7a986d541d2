"""mjfast/RangefinderLidar: the model's rangefinder sensors `<prefix>-<i>` as one laser scan.

mujoco_ros2_control's way of building a planar lidar from MJCF `rangefinder` sensors, one per
beam. Configuration keys (SPEC §14): `prefix` (required: the sensors named `<prefix>-<i>`, i =
0, 1, ...), `rate_hz` (simulated time, default 10), `min_angle` / `max_angle` (radians, the
first and last beam's azimuth, reported in the message; default 0 and 0), `range` (`{min, max}`,
default 0 and inf) and `topic` (default `~scan`). A message on the topic is that of
`mjfast/Lidar`'s one-ring scan: `{"time", "angle_min", "angle_max", "angle_increment",
"range_min", "range_max", "ranges"}`, `ranges` float32 ordered by the number `i`; a `-1`
reading (no hit) and a reading beyond `max` become `+inf`, one closer than `min` `-inf` (ROS
REP 117). The sensors' readings are those the last `mj_step` computed. Only the rangefinders
matching `<prefix>-<integer>` are used; the numbers must be 0..n-1 without gaps.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.plugins._sensing import RatePublisher, check_keys, names_of, number
from mjfast.plugins.clock_publisher import topic_name

__all__ = ["RangefinderLidar"]

_KEYS = ("prefix", "rate_hz", "min_angle", "max_angle", "range", "topic")
# The `dist` flag of a rangefinder's data fields (sensor_intprm[0], MJCF `data`): when set, the
# distance is the sensor's first value.
_DIST_BIT = 1


class RangefinderLidar(RatePublisher):
    # Checked before load (mjfast.plugin.schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        prefix = self.config.get("prefix")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"{who}: prefix is required: the rangefinders are named "
                             f"'<prefix>-<i>', got {prefix!r}")
        rate_hz = number(who, "rate_hz", self.config.get("rate_hz", 10.0), minimum=0.0,
                         strict=True)
        angle_min = number(who, "min_angle", self.config.get("min_angle", 0.0))
        angle_max = number(who, "max_angle", self.config.get("max_angle", 0.0))
        if angle_max < angle_min:
            raise ValueError(f"{who}: max_angle must be >= min_angle, got {angle_max!r} < "
                             f"{angle_min!r}")
        ranges = self.config.get("range", {}) or {}
        if not isinstance(ranges, dict):
            raise ValueError(f"{who}: range must be a mapping {{min, max}}, got {ranges!r}")
        check_keys(who, ranges, ("min", "max"), where="range")
        range_min = number(who, "range.min", ranges.get("min", 0.0), minimum=0.0)
        range_max = number(who, "range.max", ranges.get("max", math.inf), minimum=range_min,
                           strict=True, finite=False)
        pattern = re.compile(re.escape(prefix) + r"-(\d+)")
        found: dict[int, int] = {}
        names = names_of(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
        for i, name in enumerate(names):
            match = pattern.fullmatch(name)
            if match and int(model.sensor_type[i]) == mujoco.mjtSensor.mjSENS_RANGEFINDER:
                number_ = int(match.group(1))
                if number_ in found:
                    raise ValueError(f"{who}: rangefinders {names[found[number_]]!r} and "
                                     f"{name!r} have the same number {number_}")
                if not int(model.sensor_intprm[i, 0]) & _DIST_BIT:
                    # Its data (MJCF `data`) leaves out the distance: its first value is not one.
                    raise ValueError(f"{who}: rangefinder {name!r} does not output its "
                                     f"distance (its MJCF data must include dist)")
                found[number_] = i
        if not found:
            raise ValueError(f"{who}: the model has no rangefinder sensors named "
                             f"'{prefix}-<i>' (its sensors: {[n for n in names if n][:10]})")
        if sorted(found) != list(range(len(found))):
            missing = sorted(set(range(max(found) + 1)) - set(found))
            raise ValueError(f"{who}: rangefinders '{prefix}-<i>' must be numbered 0..n-1; "
                             f"missing {prefix}-{missing[0]}")
        self._address = np.array([model.sensor_adr[found[i]] for i in range(len(found))],
                                 dtype=np.intp)
        count = len(found)
        self._header = {
            "angle_min": angle_min,
            "angle_max": angle_max,
            "angle_increment": (angle_max - angle_min) / (count - 1) if count > 1 else 0.0,
            "range_min": range_min,
            "range_max": range_max,
        }
        self._range_min, self._range_max = range_min, range_max
        self._topic = topic_name(who, self.config.get("topic", "~scan"))
        self._start_schedule(rate_hz, model, data)
        return True

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        readings = data.sensordata[self._address]
        ranges = readings.astype(np.float32)
        ranges[(readings < 0) | (readings > self._range_max)] = np.inf
        ranges[(readings >= 0) & (readings < self._range_min)] = -np.inf
        self.node.publish(self._topic, {"time": time, **self._header, "ranges": ranges})
