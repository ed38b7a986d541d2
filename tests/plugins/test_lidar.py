"""mjfast/Lidar (SPEC §14) in analytic worlds: a box room and a cylinder around the sensor give
ranges equal to the geometry; misses, range limits, the own body, geom groups, rates, async
lateness, noise, visualisation and misconfiguration are each checked on their own.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from support import run_python

NS = "/mujoco_server"
TIMESTEP = 0.002
HALF_X, HALF_Y = 2.0, 1.5  # the room's inner faces: x = +-2, y = +-1.5
WALL = 0.05


def room_xml(*, robot: str = "fixed", extra: str = "", site_on_world: bool = False,
             cylinder: bool = False) -> str:
    """A lidar site at (0, 0, 1) on a robot body whose own box encloses it, in a box room (or
    inside a cylinder of radius 3 and half-height 1). `robot`: "fixed", or "spin" (a hinge about
    z turning at 2 rad/s)."""
    x, y = HALF_X + WALL, HALF_Y + WALL
    walls = "" if cylinder else f"""
    <geom name="east" type="box" pos="{x} 0 1" size="{WALL} {y + WALL} 1.5"/>
    <geom name="west" type="box" pos="-{x} 0 1" size="{WALL} {y + WALL} 1.5"/>
    <geom name="north" type="box" pos="0 {y} 1" size="{x + WALL} {WALL} 1.5"/>
    <geom name="south" type="box" pos="0 -{y} 1" size="{x + WALL} {WALL} 1.5"/>"""
    if cylinder:
        walls = '<geom name="drum" type="cylinder" pos="0 0 1" size="3 1"/>'
    joint = '<joint name="spin" type="hinge" axis="0 0 1" damping="0"/>' if robot == "spin" \
        else ""
    site = '<site name="lidar" pos="0 0 1"/>'
    return f"""
<mujoco>
  <option timestep="{TIMESTEP}" gravity="0 0 0"/>
  <worldbody>
    {walls}
    {site if site_on_world else ""}
    <body name="robot" pos="0 0 1">
      {joint}
      <geom name="shell" type="box" size="0.2 0.2 0.2" contype="0" conaffinity="0"/>
      {"" if site_on_world else '<site name="lidar"/>'}
    </body>
    {extra}
  </worldbody>
</mujoco>
"""


def lidar_env(xml: str, **config: Any) -> mjfast.MujocoEnv:
    entry = {"type": "mjfast/Lidar", "site": "lidar", "range": {"min": 0.05, "max": 10.0},
             **config}
    env = mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": [entry]}})
    if env.model.njnt:
        env.data.qvel[0] = 2.0
    return env


def recorder(env: mjfast.MujocoEnv, topic: str) -> list[dict[str, Any]]:
    """Messages with the live time and a copy of the live data at delivery."""
    received: list[dict[str, Any]] = []

    def on_message(message: dict[str, Any]) -> None:
        data = mujoco.MjData(env.model)
        mujoco.mj_copyData(data, env.model, env.data)
        received.append({"message": message, "now": float(env.data.time), "data": data})

    env.bus.subscribe(topic, on_message)
    return received


def room_ranges(azimuth: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.minimum(HALF_X / np.abs(np.cos(azimuth)), HALF_Y / np.abs(np.sin(azimuth)))


def test_box_room_scan_equals_the_geometry(envs: list[Any]) -> None:
    env = lidar_env(room_xml(), horizontal={"samples": 720})
    envs.append(env)
    env.step(50)
    scan = env.bus.latest(f"{NS}/Lidar/scan")
    assert env.bus.latest(f"{NS}/Lidar/points") is None
    assert set(scan) == {"time", "angle_min", "angle_max", "angle_increment", "range_min",
                         "range_max", "ranges"}
    ranges = scan["ranges"]
    assert ranges.dtype == np.float32 and ranges.shape == (720,)
    assert scan["angle_min"] == pytest.approx(-math.pi)
    assert scan["angle_increment"] == pytest.approx(2 * math.pi / 720)
    assert scan["angle_max"] == pytest.approx(math.pi - 2 * math.pi / 720)
    assert (scan["range_min"], scan["range_max"]) == (0.05, 10.0)
    azimuth = scan["angle_min"] + scan["angle_increment"] * np.arange(720)
    # The robot's own shell (0.2 around the site) is never hit: every range is a wall's.
    np.testing.assert_allclose(ranges, room_ranges(azimuth), rtol=1e-6)


def test_topic_names_where_scans_and_clouds_go(envs: list[Any]) -> None:
    scan = lidar_env(room_xml(), horizontal={"samples": 4}, topic="/scan")
    cloud = lidar_env(room_xml(), horizontal={"samples": 4}, topic="cloud",
                      vertical={"samples": 2, "min_angle": -0.1, "max_angle": 0.1})
    envs.extend([scan, cloud])
    scan.step(50)
    cloud.step(50)
    assert scan.bus.latest("/scan")["ranges"].shape == (4,)
    assert scan.bus.latest(f"{NS}/Lidar/scan") is None
    assert cloud.bus.latest(f"{NS}/Lidar/cloud")["points"].shape == (2, 4, 3)  # in its node


def test_site_on_the_world_body_sees_world_geoms(envs: list[Any]) -> None:
    env = lidar_env(room_xml(site_on_world=True), horizontal={"samples": 4})
    envs.append(env)
    env.step(50)
    # Nothing is excluded: the robot's shell around the site is hit from inside, at 0.2.
    np.testing.assert_allclose(env.bus.latest(f"{NS}/Lidar/scan")["ranges"], [0.2] * 4,
                               rtol=1e-6)


def test_cylinder_point_cloud_equals_the_geometry(envs: list[Any]) -> None:
    vertical = {"samples": 9, "min_angle": -0.8, "max_angle": 0.8}
    env = lidar_env(room_xml(cylinder=True), horizontal={"samples": 64}, vertical=vertical)
    envs.append(env)
    env.step(50)
    assert env.bus.latest(f"{NS}/Lidar/scan") is None
    message = env.bus.latest(f"{NS}/Lidar/points")
    assert message["frame"] == "lidar"
    points = message["points"]
    assert points.dtype == np.float32 and points.shape == (9, 64, 3)
    elevation = np.linspace(-0.8, 0.8, 9)
    azimuth = np.linspace(-math.pi, math.pi - 2 * math.pi / 64, 64)
    # Radius 3, half-height 1, the sensor at the centre: the side or a cap, whichever is nearer.
    distance = np.minimum(3 / np.cos(elevation), np.divide(
        1.0, np.abs(np.sin(elevation)), out=np.full(9, np.inf), where=elevation != 0))
    el, az = np.meshgrid(elevation, azimuth, indexing="ij")
    expected = distance[:, None, None] * np.stack(
        [np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1)
    np.testing.assert_allclose(points, expected, rtol=1e-5, atol=1e-5)
    # Rows by rising elevation, columns by rising azimuth.
    assert points[0, 0, 2] < 0 < points[-1, 0, 2]
    assert np.arctan2(points[4, 1, 1], points[4, 1, 0]) > np.arctan2(points[4, 0, 1],
                                                                     points[4, 0, 0])


def test_beyond_max_is_inf_or_nan_and_closer_than_min_is_minus_inf(envs: list[Any]) -> None:
    obstacle = '<geom name="post" type="box" pos="0.5 0 1" size="0.05 0.05 1"/>'
    scan_env = lidar_env(room_xml(extra=obstacle), horizontal={"samples": 4},
                         range={"min": 0.5, "max": 1.8})
    points_env = lidar_env(room_xml(extra=obstacle), horizontal={"samples": 4},
                           vertical={"samples": 2, "min_angle": 0, "max_angle": 0.1},
                           range={"min": 0.5, "max": 1.8})
    envs += [scan_env, points_env]
    for env in envs:
        env.step(50)
    # Azimuths -pi, -pi/2, 0, pi/2: west wall at 2 (beyond max), south 1.5, the post at 0.45
    # (closer than min), north 1.5.
    np.testing.assert_allclose(scan_env.bus.latest(f"{NS}/Lidar/scan")["ranges"],
                               [math.inf, 1.5, -math.inf, 1.5], rtol=1e-6)
    points = points_env.bus.latest(f"{NS}/Lidar/points")["points"]
    assert np.isnan(points[:, [0, 2]]).all()
    assert np.isfinite(points[:, [1, 3]]).all()


def test_geom_groups_filter(envs: list[Any]) -> None:
    obstacle = '<geom name="post" type="box" pos="1 0 1" size="0.05 0.05 1" group="3"/>'
    seeing = lidar_env(room_xml(extra=obstacle), horizontal={"samples": 4})
    blind = lidar_env(room_xml(extra=obstacle), horizontal={"samples": 4}, geom_groups=[0, 1])
    envs += [seeing, blind]
    for env in envs:
        env.step(50)
    assert seeing.bus.latest(f"{NS}/Lidar/scan")["ranges"][2] == pytest.approx(0.95)
    assert blind.bus.latest(f"{NS}/Lidar/scan")["ranges"][2] == pytest.approx(2.0)


def test_ranges_equal_mj_ray_on_a_moving_robot(envs: list[Any]) -> None:
    obstacles = "".join(
        f'<geom type="{kind}" pos="{x} {y} 1" size="0.1 0.15 0.3" euler="0.3 0.2 {x}"/>'
        for kind, x, y in [("box", 1.0, 0.3), ("ellipsoid", -0.8, 0.9), ("capsule", 0.4, -1.0),
                           ("cylinder", -1.2, -0.6), ("sphere", 1.5, 1.1)])
    env = lidar_env(room_xml(robot="spin", extra=obstacles), horizontal={"samples": 90},
                    vertical={"samples": 5, "min_angle": -0.5, "max_angle": 0.5},
                    range={"min": 0.05, "max": 1.6}, rate_hz=50)
    envs.append(env)
    received = recorder(env, f"{NS}/Lidar/points")
    env.step(100)  # 0.2 s: 10 scans
    assert len(received) == 10
    site = env.model.site("lidar").id
    body = env.model.site_bodyid[site]
    for record in received:
        data, points = record["data"], record["message"]["points"].reshape(-1, 3)
        rotation = data.site_xmat[site].reshape(3, 3)
        geomid = np.zeros(1, dtype=np.int32)
        for point, direction in zip(points, directions(5, 90, -0.5, 0.5), strict=True):
            distance = mujoco.mj_ray(env.model, data, data.site_xpos[site], rotation @ direction,
                                     None, 1, body, geomid, None)
            if geomid[0] < 0 or not 0.05 <= distance <= 1.6:
                assert np.isnan(point).all()
            else:
                np.testing.assert_allclose(point, np.float32(direction * distance), rtol=1e-6,
                                           atol=1e-6)


def directions(rows: int, columns: int, low: float, high: float) -> np.ndarray:
    elevation = np.linspace(low, high, rows)
    azimuth = np.linspace(-math.pi, math.pi - 2 * math.pi / columns, columns)
    el, az = np.meshgrid(elevation, azimuth, indexing="ij")
    return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)],
                    axis=-1).reshape(-1, 3)


def test_rate_is_exact_in_simulated_time_and_restarts_at_reset(envs: list[Any]) -> None:
    env = lidar_env(room_xml(), horizontal={"samples": 8}, rate_hz=20)
    envs.append(env)
    received = recorder(env, f"{NS}/Lidar/scan")
    env.step(250)  # 0.5 s
    times = [r["message"]["time"] for r in received]
    np.testing.assert_allclose(times, 0.05 * np.arange(1, 11), rtol=0, atol=1e-9)
    assert [r["now"] for r in received] == times
    received.clear()
    env.reset()
    env.step(30)
    assert [r["message"]["time"] for r in received] == pytest.approx([0.05], abs=1e-9)


def test_async_publishes_the_sync_result_exactly_one_period_late(envs: list[Any]) -> None:
    config = {"horizontal": {"samples": 180}, "vertical": {"samples": 3, "min_angle": -0.2,
                                                           "max_angle": 0.2}, "rate_hz": 25}
    extra = '<geom type="box" pos="1 0.5 1" size="0.1 0.3 0.5"/>'
    sync_env = lidar_env(room_xml(robot="spin", extra=extra), **config)
    async_env = lidar_env(room_xml(robot="spin", extra=extra), **config, **{"async": True})
    envs += [sync_env, async_env]
    synced = recorder(sync_env, f"{NS}/Lidar/points")
    late = recorder(async_env, f"{NS}/Lidar/points")
    for env in envs:
        env.step(500)  # 1 s: 25 scans taken, 24 of them published in async mode
    assert len(synced) == 25 and len(late) == 24
    for now, before in zip(late, synced[:-1], strict=True):
        # Stamped with its snapshot's time, published one period (20 steps) later.
        assert now["message"]["time"] == before["message"]["time"]
        assert now["now"] == pytest.approx(before["now"] + 0.04, abs=1e-9)
        np.testing.assert_array_equal(now["message"]["points"], before["message"]["points"])
    # The robot turns: successive scans differ.
    assert not np.array_equal(synced[0]["message"]["points"], synced[1]["message"]["points"])


def test_async_reset_drops_the_scan_in_flight_and_close_stops_the_worker(
        envs: list[Any]) -> None:
    env = lidar_env(room_xml(), horizontal={"samples": 16}, rate_hz=50, **{"async": True})
    received = recorder(env, f"{NS}/Lidar/scan")
    env.step(15)  # the scan of t=0.02 is taken, not yet published
    assert received == []
    env.reset()
    env.step(20)  # 0.04 s after the reset: the scan of 0.02 (after the reset) comes out at 0.04
    assert [r["message"]["time"] for r in received] == pytest.approx([0.02], abs=1e-9)
    assert [r["now"] for r in received] == pytest.approx([0.04], abs=1e-9)
    assert lidar_threads() == 1
    env.close()
    assert lidar_threads() == 0


def lidar_threads() -> int:
    """The process's native lidar workers (threads the plugin names "mjfast-lidar")."""
    count = 0
    for comm in Path("/proc/self/task").glob("*/comm"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended while listed
            count += comm.read_text().strip() == "mjfast-lidar"
    return count


def noisy(seed: int) -> mjfast.MujocoEnv:
    return lidar_env(room_xml(), horizontal={"samples": 100}, rate_hz=100, noise_std=0.03,
                     seed=seed, range={"min": 0.05, "max": 10.0})


def test_noise_is_seeded_replayed_at_reset_and_has_the_configured_spread(
        envs: list[Any]) -> None:
    first, again, other = noisy(5), noisy(5), noisy(6)
    envs += [first, again, other]
    streams = [recorder(env, f"{NS}/Lidar/scan") for env in envs]
    for env in envs:
        env.step(500)  # 100 scans of 100 rays: 10000 samples
    ranges = [np.array([r["message"]["ranges"] for r in stream]) for stream in streams]
    np.testing.assert_array_equal(ranges[0], ranges[1])
    assert not np.array_equal(ranges[0], ranges[2])
    scan = first.bus.latest(f"{NS}/Lidar/scan")
    azimuth = scan["angle_min"] + scan["angle_increment"] * np.arange(100)
    error = ranges[0] - room_ranges(azimuth)
    # 10000 samples: the standard error of the mean is 0.0003, of the std about 0.0002; the
    # bounds are 5 of them or more, and the fixed seed makes the draw the same every run.
    assert abs(error.mean()) < 0.0015
    assert error.std() == pytest.approx(0.03, abs=0.0012)
    streams[0].clear()
    first.reset()
    first.step(500)
    np.testing.assert_array_equal([r["message"]["ranges"] for r in streams[0]], ranges[0])


def test_visualize_draws_what_fits_in_the_scene_and_counts_the_rest(envs: list[Any]) -> None:
    env = lidar_env(room_xml(), horizontal={"samples": 40}, visualize=True)
    envs.append(env)
    env.step(50)
    scene = mujoco.MjvScene(env.model, maxgeom=30)
    scene.ngeom = 5  # what the model's own geoms took
    with env.acquire_plugin("Lidar") as lidar:
        lidar.render_callback(env.model, env.data, scene)
        assert scene.ngeom == 30
        assert lidar.statistics()["visual_geoms_dropped"] == 40 - 25
        line = scene.geoms[5]
        assert line.type == mujoco.mjtGeom.mjGEOM_LINE
        # A ray from the site to its hit point on a wall: length = that ray's range.
        ranges = env.bus.latest(f"{NS}/Lidar/scan")["ranges"]
        assert line.size[2] == pytest.approx(ranges[0], rel=1e-5)
        full = mujoco.MjvScene(env.model, maxgeom=100)
        lidar.render_callback(env.model, env.data, full)
        assert full.ngeom == 40


@pytest.mark.parametrize(("config", "named"), [
    ({"site": None}, "site"),
    ({"range": None}, "range"),
    ({"range": {"min": 2.0, "max": 1.0}}, "range.max"),
    ({"horizontal": {"samples": 0}}, "horizontal.samples"),
    ({"horizontal": {"samples": 10, "min_angle": 1.0, "max_angle": 0.0}}, "horizontal.max_angle"),
    ({"vertical": {"samples": 4}}, "vertical"),
    ({"vertical": {"samples": 2, "min_angle": -2.0, "max_angle": 0.0}}, "vertical"),
    ({"geom_groups": [0, 6]}, "geom_groups"),
    ({"noise_std": -0.1}, "noise_std"),
    ({"async": "yes"}, "async"),
    ({"rate_hz": float("nan")}, "rate_hz"),
    ({"topic": "/"}, "topic"),
    ({"topic": 3}, "topic"),
])
def test_misconfiguration_is_a_load_failure_naming_it(config: dict[str, Any], named: str,
                                                      envs: list[Any]) -> None:
    entry = {"type": "mjfast/Lidar", "site": "lidar", "range": {"min": 0.05, "max": 10.0}}
    entry.update(config)
    if entry["site"] is None:
        del entry["site"]
    if entry["range"] is None:
        del entry["range"]
    env = mjfast.MujocoEnv(room_xml(), params={"mujoco_server": {"MujocoPlugins": [entry]}})
    envs.append(env)
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED
    assert info.failure is not None and info.failure.phase == "load"
    assert named in info.failure.message


@pytest.mark.parametrize(("config", "named"), [
    ({"body": "robot"}, "site and body are exclusive"),
    ({"pos": [0, 0, 1]}, "pos offsets a body's frame"),
    ({"site": None, "body": "robot", "pos": [0, 0]}, "pos must be a list of 3 finite numbers"),
    ({"site": None, "body": "robot", "pos": [0, 0, float("inf")]}, "pos must be a list of 3"),
    ({"site": None, "body": "robot", "quat": [0, 0, 0, 0]}, "quat must have a non-zero"),
    ({"site": None, "body": "robot", "quat": "identity"}, "quat must be a list of 4"),
])
def test_body_mount_misconfiguration_is_a_load_failure_naming_it(
        config: dict[str, Any], named: str, envs: list[Any]) -> None:
    entry = {"type": "mjfast/Lidar", "site": "lidar", "range": {"min": 0.05, "max": 10.0}}
    entry.update(config)
    if entry["site"] is None:
        del entry["site"]
    env = mjfast.MujocoEnv(room_xml(), params={"mujoco_server": {"MujocoPlugins": [entry]}})
    envs.append(env)
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None
    assert named in info.failure.message


# Its keys, nested ones and the mount's name included, are declared on the Python side
# (mjfast/plugins/native.py) and refused before the plugin is created, with mjfast.names' message.
@pytest.mark.parametrize(("config", "message"), [
    ({"frequency": 3}, "unknown configuration key 'frequency'; its keys are: async, body, "),
    ({"rnage": {"max": 5}}, "unknown configuration key 'rnage' (did you mean 'range'?)"),
    ({"range": {"max": 5, "far": 1}}, "unknown configuration key 'range.far'; its keys are: "
                                      "range.max, range.min"),
    ({"horizontal": {"count": 3}}, "unknown configuration key 'horizontal.count'"),
    ({"vertical": {"sample": 3}}, "unknown configuration key 'vertical.sample' (did you mean "
                                  "'vertical.samples'?)"),
    ({"site": "lidr"}, "configuration key 'site': no site named 'lidr' (did you mean 'lidar'?); "
                       "the model's sites: lidar"),
    ({"site": None, "body": "robto"}, "configuration key 'body': no body named 'robto' (did you "
                                      "mean 'robot'?); the model's bodies: world, "),
    ({"site": 3}, "configuration key 'site' must be the name of a site, got 3 (int)"),
])
def test_an_unknown_key_or_name_is_refused_before_create(config: dict[str, Any], message: str,
                                                         envs: list[Any]) -> None:
    entry = {"type": "mjfast/Lidar", "site": "lidar", "range": {"min": 0.05, "max": 10.0}}
    entry.update(config)
    if entry["site"] is None:
        del entry["site"]
    env = mjfast.MujocoEnv(room_xml(), params={"mujoco_server": {"MujocoPlugins": [entry]}})
    envs.append(env)
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None
    assert info.failure.phase == "factory"  # the library's create() never ran
    assert info.failure.message.startswith("ConfigError: " + message)


def body_lidar_env(xml: str, **config: Any) -> mjfast.MujocoEnv:
    entry = {"type": "mjfast/Lidar", "body": "robot", "range": {"min": 0.05, "max": 10.0},
             **config}
    return mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": [entry]}})


def test_a_body_mount_casts_from_the_body_frame_and_names_it(envs: list[Any]) -> None:
    # Many real models have no site where their lidar sits: the body frame does as well.
    by_site = lidar_env(room_xml(), horizontal={"samples": 360})
    by_body = body_lidar_env(room_xml(), horizontal={"samples": 360})
    envs += [by_site, by_body]
    for env in (by_site, by_body):
        env.step(50)
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    np.testing.assert_array_equal(by_body.bus.latest(f"{NS}/Lidar/scan")["ranges"],
                                  by_site.bus.latest(f"{NS}/Lidar/scan")["ranges"])
    rings = body_lidar_env(room_xml(), horizontal={"samples": 8},
                           vertical={"samples": 2, "min_angle": -0.1, "max_angle": 0.1})
    envs.append(rings)
    rings.step(50)
    assert rings.bus.latest(f"{NS}/Lidar/points")["frame"] == "robot"


def test_a_body_mount_offset_moves_and_turns_the_rays_in_the_body_frame(envs: list[Any]) -> None:
    # Origin (0.5, 0.25) in the room, turned 90 degrees about z: the lidar's -x, -y, +x, +y
    # (azimuth -pi, -pi/2, 0, pi/2) look along world -y, +x, +y, -x. The robot's own shell is
    # excluded, as for a site on it.
    half = math.sqrt(0.5)
    env = body_lidar_env(room_xml(robot="spin"), horizontal={"samples": 4}, pos=[0.5, 0.25, 0.0],
                         quat=[2 * half, 0, 0, 2 * half])  # normalised by the plugin
    envs.append(env)
    env.step(50)
    expected = [HALF_Y + 0.25, HALF_X - 0.5, HALF_Y - 0.25, HALF_X + 0.5]
    np.testing.assert_allclose(env.bus.latest(f"{NS}/Lidar/scan")["ranges"], expected, rtol=1e-6)


def test_impossible_ray_counts_are_quick_load_failures_naming_them() -> None:
    # 65537 x 65536 rays wrapped to 65536 in 32 bits and load() wrote past its buffers (SIGSEGV);
    # 40000 x 40000 and one ring of 2**31 - 1 were std::bad_alloc after 95 s. In a child, timed.
    result = run_python("""
        import time, mjfast
        from test_lidar import room_xml
        for horizontal, vertical in [(65537, 65536), (40000, 40000), (2**31 - 1, 1),
                                     (1, 2**31 - 1), (2049, 2048)]:
            entry = {"type": "mjfast/Lidar", "site": "lidar", "range": {"max": 10.0},
                     "horizontal": {"samples": horizontal}}
            if vertical > 1:
                entry["vertical"] = {"samples": vertical, "min_angle": -1.0, "max_angle": 1.0}
            start = time.monotonic()
            env = mjfast.MujocoEnv(room_xml(),
                                   params={"mujoco_server": {"MujocoPlugins": [entry]}})
            took = time.monotonic() - start
            (info,) = env.plugins
            assert info.state is mjfast.PluginState.FAILED, (horizontal, vertical)
            assert took < 10, took
            print(info.failure.message)
            env.close()
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Lidar: horizontal.samples {h} x vertical.samples {v} = {h * v} rays: a lidar casts at "
        f"most 4194304 rays per scan"
        for h, v in [(65537, 65536), (40000, 40000), (2**31 - 1, 1), (1, 2**31 - 1),
                     (2049, 2048)]]


def test_async_worker_survives_reset_reload_and_close_while_running() -> None:
    # A worker thread that the physics thread waits on could hang the interpreter: run it in a
    # fresh one with a timeout. Reset, reload and close while env.start() steps, then exit.
    result = run_python(f"""
        import threading, mjfast
        from test_lidar import lidar_env, lidar_threads, room_xml
        env = lidar_env(room_xml(robot="spin"), horizontal={{"samples": 64}},
                        vertical={{"samples": 4, "min_angle": -0.3, "max_angle": 0.3}},
                        rate_hz=200, **{{"async": True}})
        seen = threading.Event()
        env.bus.subscribe("{NS}/Lidar/points", lambda message: seen.set())
        env.start(None)
        assert seen.wait(10)
        env.reset()
        env.reload()
        seen.clear()
        assert seen.wait(10)
        env.close()
        assert lidar_threads() == 0, lidar_threads()
        print("ok")
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
