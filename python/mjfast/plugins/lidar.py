"""mjfast/Lidar: a 2-D or 3-D lidar cast with MuJoCo's `mj_multiRay`, sync or async (SPEC §14).

Configuration keys:
- `site` (required): the rays start at this site, in its frame (x forward, z up); geoms of the
  site's own body are not seen (none are excluded when the site is on the world body).
- `horizontal: {samples, min_angle, max_angle}`: azimuth, radians, counter-clockwise about +z;
  default 360 samples over the full turn starting at -pi (`max_angle` defaults to one increment
  short of `min_angle + 2 pi`).
- `vertical: {samples, min_angle, max_angle}`: elevation, radians, positive upward; default one
  ring at elevation 0 (a 2-D scan). Both ends are sampled, spaced `(max - min) / (samples - 1)`.
- `range: {min, max}` (required, metres), `rate_hz` (simulated time, default 10),
  `geom_groups` (the geom groups the rays see, default all), `noise_std` (metres of Gaussian noise
  on each return, default 0) and `seed` (default 0; `env.reset()` restarts the generator),
  `async` (default false), `visualize` (default false).

One ring publishes `~scan` `{"time", "angle_min", "angle_max", "angle_increment", "range_min",
"range_max", "ranges"}` (float32, `+inf` for no return within `max`, `-inf` for a return closer
than `min`); more rings publish `~points` `{"time", "frame", "points"}` (float32 V x H x 3 in
the site frame, rows by rising elevation, columns by rising azimuth, NaN for no return within
range).

How it is fast: the ray directions are computed once in the site frame at load and rotated by
the site's orientation per scan (one matrix product), then cast by one `mj_multiRay` call, which
releases the GIL. The per-step test of a scan that is not due is one chained comparison in
`last_stage_callback`. Sync mode casts there on the physics thread. Async mode copies the poses
the cast reads (geom, body and site frames) into the worker's own `MjData` at a due step, casts on
a worker thread, and publishes that result at the next due step, one period late and stamped with
the snapshot's time; the worker also builds the message (ranges, noise, points), so that the
physics thread only copies poses and publishes. If the worker has not finished by then, the
physics thread waits for it (results stay deterministic; the wait is counted in the plugin's
statistics as `worker_waits` and `worker_wait_s`).

`visualize: true` draws the latest scan's returns as line geoms from the site in
`render_callback`, as many as the scene has room for; the rest are counted
(`statistics()["visual_geoms_dropped"]`).
"""

from __future__ import annotations

import math
import threading
import time as wallclock
from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from mjfast.plugin import MujocoPlugin
from mjfast.plugins._sensing import (
    RateSchedule,
    check_keys,
    id_of,
    names_of,
    number,
    positive_int,
    seed_of,
)

__all__ = ["Lidar"]

_KEYS = ("site", "horizontal", "vertical", "range", "rate_hz", "geom_groups", "noise_std",
         "seed", "async", "visualize")
_AXIS_KEYS = ("samples", "min_angle", "max_angle")
_RAY_RGBA = np.array([1.0, 0.1, 0.1, 0.8], dtype=np.float32)
_RAY_WIDTH = 2.0  # pixels, for mjGEOM_LINE


def _angles(plugin: str, key: str, spec: Any, default_samples: int,
            full_turn: bool) -> np.ndarray:
    """The sampled angles of one axis, rising; ValueError naming the key when malformed."""
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"{plugin}: {key} must be a mapping {{samples, min_angle, max_angle}}, "
                         f"got {spec!r}")
    check_keys(plugin, spec, _AXIS_KEYS, where=key)
    samples = positive_int(plugin, f"{key}.samples", spec.get("samples", default_samples))
    if full_turn:
        low = number(plugin, f"{key}.min_angle", spec.get("min_angle", -math.pi))
        high_default = low + 2 * math.pi * (samples - 1) / samples
    else:
        if samples > 1 and not {"min_angle", "max_angle"} <= set(spec):
            raise ValueError(f"{plugin}: {key} with {samples} samples needs min_angle and "
                             f"max_angle")
        low = number(plugin, f"{key}.min_angle", spec.get("min_angle", 0.0))
        high_default = low
    high = number(plugin, f"{key}.max_angle", spec.get("max_angle", high_default))
    if high < low:
        raise ValueError(f"{plugin}: {key}.max_angle must be >= {key}.min_angle, got "
                         f"{high!r} < {low!r}")
    if samples == 1 and high != low:
        raise ValueError(f"{plugin}: {key} with one sample needs min_angle == max_angle, got "
                         f"{low!r} and {high!r}")
    if not full_turn and (low < -math.pi / 2 or high > math.pi / 2):
        raise ValueError(f"{plugin}: {key} angles must lie in [-pi/2, pi/2], got "
                         f"[{low!r}, {high!r}]")
    return np.linspace(low, high, samples) if samples > 1 else np.array([low])


class _Scan:
    """One cast's output buffers (reused: a scan is published as copies)."""

    __slots__ = ("dist", "geomid", "mask", "mask2", "noise", "origin", "ranges", "rotation",
                 "time", "vec")

    def __init__(self, rays: int) -> None:
        self.vec = np.empty((rays, 3))
        self.dist = np.empty(rays)
        self.ranges = np.empty(rays)
        self.noise = np.empty(rays)
        self.mask = np.empty(rays, dtype=bool)
        self.mask2 = np.empty(rays, dtype=bool)
        self.geomid = np.empty(rays, dtype=np.int32)
        self.origin = np.zeros(3)
        self.rotation = np.eye(3)
        self.time = 0.0


class Lidar(MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        config = self.config
        check_keys(who, config, _KEYS)
        if "site" not in config:
            raise ValueError(f"{who}: site is required: the name of the site the rays start at")
        sites = names_of(model, mujoco.mjtObj.mjOBJ_SITE, model.nsite)
        self._site = id_of(who, model, mujoco.mjtObj.mjOBJ_SITE, "site", config["site"], sites)
        self._frame = str(config["site"])
        body = int(model.site_bodyid[self._site])
        self._exclude = body if body > 0 else -1
        azimuth = _angles(who, "horizontal", config.get("horizontal"), 360, full_turn=True)
        elevation = _angles(who, "vertical", config.get("vertical"), 1, full_turn=False)
        ranges = config.get("range")
        if not isinstance(ranges, Mapping) or "max" not in ranges:
            raise ValueError(f"{who}: range is required: a mapping {{min, max}} in metres, got "
                             f"{ranges!r}")
        check_keys(who, ranges, ("min", "max"), where="range")
        self._range_min = number(who, "range.min", ranges.get("min", 0.0), minimum=0.0)
        self._range_max = number(who, "range.max", ranges["max"], minimum=self._range_min,
                                 strict=True)
        rate_hz = number(who, "rate_hz", config.get("rate_hz", 10.0), minimum=0.0, strict=True)
        self._noise_std = number(who, "noise_std", config.get("noise_std", 0.0), minimum=0.0)
        self._seed = seed_of(who, config)
        groups = config.get("geom_groups")
        if groups is None:
            self._geomgroup = None
        else:
            if not isinstance(groups, (list, tuple)) or any(
                    isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < mujoco.mjNGROUP
                    for g in groups):
                raise ValueError(f"{who}: geom_groups must be a list of geom groups in "
                                 f"0..{mujoco.mjNGROUP - 1}, got {groups!r}")
            self._geomgroup = np.zeros(mujoco.mjNGROUP, dtype=np.uint8)
            self._geomgroup[list(groups)] = 1
        flags = {}
        for key in ("async", "visualize"):
            flags[key] = config.get(key, False)
            if not isinstance(flags[key], bool):
                raise ValueError(f"{who}: {key} must be true or false, got {flags[key]!r}")
        self._async, self._visualize = flags["async"], flags["visualize"]

        # Directions in the site frame, rows by rising elevation, columns by rising azimuth.
        el, az = np.meshgrid(elevation, azimuth, indexing="ij")
        self._shape = el.shape
        self._directions = np.ascontiguousarray(np.stack(
            [np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1
        ).reshape(-1, 3))
        self._columns = np.ascontiguousarray(self._directions.T)
        self._rays = self._directions.shape[0]
        self._one_ring = self._shape[0] == 1
        if self._one_ring:
            self._header = {
                "angle_min": float(azimuth[0]),
                "angle_max": float(azimuth[-1]),
                "angle_increment": float(azimuth[1] - azimuth[0]) if azimuth.size > 1 else 0.0,
                "range_min": self._range_min,
                "range_max": self._range_max,
            }
        self._model = model
        self._data = data
        self._rng = np.random.default_rng(self._seed)
        self._schedule = RateSchedule(rate_hz, float(model.opt.timestep))
        self._low, self._high = self._schedule.restart(float(data.time))
        self._scans = 0
        self._wait_s = 0.0
        self._waits = 0
        self._dropped = 0
        self._visual: tuple[np.ndarray, np.ndarray] | None = None  # origin, world hit points
        self._scan = _Scan(self._rays)
        if self._async:
            self._start_worker(model)
        return True

    # -- per step ---------------------------------------------------------------------------------

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        time = data.time
        if self._low <= time < self._high:
            return
        self._low, self._high = self._schedule.restart(time)
        if not self._async:
            scan = self._scan
            self._pose(data, scan)
            scan.time = time
            self._cast(model, data, scan)
            self._send(*self._message(scan))
            return
        if self._pending:
            self._collect()
            if self._result is not None:
                self._send(*self._result)
        self._snapshot(data, time)

    def _send(self, topic: str, message: dict[str, Any],
              visual: tuple[np.ndarray, np.ndarray] | None) -> None:
        self._scans += 1
        self.node.publish(topic, message)
        if visual is not None:
            self._visual = visual

    def _pose(self, data: mujoco.MjData, scan: _Scan) -> None:
        scan.origin[:] = data.site_xpos[self._site]
        scan.rotation[:] = data.site_xmat[self._site].reshape(3, 3)

    def _cast(self, model: mujoco.MjModel, data: mujoco.MjData, scan: _Scan) -> None:
        # World directions: each row d_site rotated by the site's frame, R @ d = d @ R^T.
        np.matmul(self._directions, scan.rotation.T, out=scan.vec)
        mujoco.mj_multiRay(model, data, scan.origin, scan.vec.reshape(-1), self._geomgroup, 1,
                           self._exclude, scan.geomid, scan.dist, None, self._rays,
                           self._range_max)

    def _message(self, scan: _Scan) -> tuple[str, dict[str, Any],
                                              tuple[np.ndarray, np.ndarray] | None]:
        """(topic, message, what visualize draws) of a cast: in async mode, on the worker."""
        # In place in preallocated buffers: a fresh 128 kB array per step of this would be a
        # fresh mmap with its page faults (beyond malloc's mmap threshold), per scan. A miss is
        # dist -1 (geomid -1), below any `min`.
        ranges, mask = scan.ranges, scan.mask
        np.copyto(ranges, scan.dist)
        if self._noise_std > 0:
            # Misses first (inf + noise stays inf); one draw per ray, every scan, so that the
            # sequence does not depend on the scene.
            np.less(scan.geomid, 0, out=mask)
            np.putmask(ranges, mask, np.inf)
            noise = scan.noise
            self._rng.standard_normal(out=noise)
            noise *= self._noise_std
            ranges += noise
        if not self._one_ring:
            # NaN for no return within range: a miss (-1) is below min as well.
            np.less(ranges, self._range_min, out=mask)
            np.logical_or(mask, np.greater(ranges, self._range_max, out=scan.mask2), out=mask)
            np.putmask(ranges, mask, np.nan)
        else:
            np.less(scan.geomid, 0, out=mask)
            np.putmask(ranges, mask, np.inf)
            np.greater(ranges, self._range_max, out=mask)
            np.putmask(ranges, mask, np.inf)
            np.less(ranges, self._range_min, out=mask)
            np.putmask(ranges, mask, -np.inf)
        visual = None
        if self._visualize:
            valid = np.isfinite(ranges)
            visual = (scan.origin.copy(), scan.origin + scan.vec[valid] * ranges[valid, None])
        if self._one_ring:
            return "~scan", {"time": scan.time, **self._header,
                             "ranges": ranges.astype(np.float32)}, visual
        points = np.empty((*self._shape, 3), dtype=np.float32)
        flat = points.reshape(-1, 3)
        for axis in range(3):  # one contiguous product per axis: faster than broadcasting (n, 3)
            np.multiply(self._columns[axis], ranges, out=flat[:, axis], casting="same_kind")
        return "~points", {"time": scan.time, "frame": self._frame, "points": points}, visual

    # -- async: a worker with its own MjData ------------------------------------------------------

    def _start_worker(self, model: mujoco.MjModel) -> None:
        self._worker_data = mujoco.MjData(model)
        self._worker_scan = _Scan(self._rays)
        # The arrays the snapshot copies, as views made once (MjData's buffers do not move): a
        # property access per array per scan would cost more than the copies.
        data = self._data
        target = self._worker_data
        self._copies = [(target.geom_xpos, data.geom_xpos), (target.geom_xmat, data.geom_xmat),
                        (target.xpos, data.xpos), (target.xmat, data.xmat)]
        self._site_pose = (data.site_xpos[self._site], data.site_xmat[self._site])
        self._pending = False
        self._result: tuple[str, dict[str, Any], Any] | None = None
        self._stop = False
        # Two plain locks as the hand-off (cheaper than Events on the physics thread): `_job` is
        # released to start a cast; `_busy` is held from a snapshot until its cast is done, and
        # released by the worker (a threading.Lock may be released by another thread).
        self._job = threading.Lock()
        self._job.acquire()
        self._busy = threading.Lock()
        self._worker = threading.Thread(target=self._work, name=f"mjfast-lidar-{self.name}",
                                        daemon=True)
        self._worker.start()

    def _snapshot(self, data: mujoco.MjData, time: float) -> None:
        # What mj_multiRay reads of mjData: the geoms' frames (and, for flexes, the vertices);
        # the bodies' frames too, cheaply, in case a MuJoCo version prunes by body.
        if self._model.nflex:
            mujoco.mj_copyData(self._worker_data, self._model, data)
        else:
            for target, source in self._copies:
                np.copyto(target, source)
        scan = self._worker_scan
        position, rotation = self._site_pose
        scan.origin[:] = position
        scan.rotation.reshape(-1)[:] = rotation
        scan.time = time
        self._busy.acquire()  # free: the previous cast was collected
        self._pending = True
        self._job.release()

    def _collect(self) -> None:
        """Waits for the cast in flight (if it is not done yet); `_busy` is free again after."""
        busy = self._busy
        if not busy.acquire(blocking=False):
            start = wallclock.perf_counter()
            busy.acquire()
            self._wait_s += wallclock.perf_counter() - start
            self._waits += 1
        busy.release()
        self._pending = False

    def _work(self) -> None:
        while True:
            self._job.acquire()
            if self._stop:
                return
            try:
                self._cast(self._model, self._worker_data, self._worker_scan)
                self._result = self._message(self._worker_scan)
            except Exception:  # a failed cast must not leave the physics thread waiting
                self._result = None
                self.node.logger.exception("lidar cast failed")
            finally:
                self._busy.release()

    def _drain(self) -> None:
        """Waits for a cast in flight and drops its result (a reset or an unload)."""
        if self._async and self._pending:
            self._collect()

    # -- the rest ---------------------------------------------------------------------------------

    def render_callback(self, model: mujoco.MjModel, data: mujoco.MjData, scene: Any) -> None:
        if self._visual is None:
            return
        origin, hits = self._visual
        room = max(0, scene.maxgeom - scene.ngeom)
        count = min(room, len(hits))
        self._dropped += len(hits) - count
        line = mujoco.mjtGeom.mjGEOM_LINE
        zeros, eye = np.zeros(3), np.eye(3).reshape(-1)
        start = scene.ngeom
        for i in range(count):
            geom = scene.geoms[start + i]
            mujoco.mjv_initGeom(geom, line, zeros, zeros, eye, _RAY_RGBA)
            mujoco.mjv_connector(geom, line, _RAY_WIDTH, origin, hits[i])
        scene.ngeom = start + count

    def reset(self) -> None:
        self._drain()
        self._rng = np.random.default_rng(self._seed)
        self._visual = None
        self._low, self._high = self._schedule.restart(float(self.env.data.time))

    def unload(self) -> None:
        if self._async:
            self._drain()
            self._stop = True
            self._job.release()
            self._worker.join()

    def statistics(self) -> dict[str, Any]:
        return {"rays": self._rays, "scans": self._scans, "worker_waits": self._waits,
                "worker_wait_s": self._wait_s, "visual_geoms_dropped": self._dropped}
