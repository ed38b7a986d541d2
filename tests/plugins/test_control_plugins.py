"""Tests of the shipped control plugins, loaded through their `mjfast/...` entry points:
FtsGravComp (payload compensation of a force/torque sensor pair), BaseVelocity (planar velocity
override with a simulated-time timeout), FreeJointStatePublisher and HeartbeatPublisher."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import mjfast
from mjfast import PluginState
from mjfast.plugin.discovery import resolve_plugin
from mjfast.plugins.base_velocity import BaseVelocity
from mjfast.plugins.free_joint_state import FreeJointStatePublisher
from mjfast.plugins.fts_grav_comp import FtsGravComp
from mjfast.plugins.heartbeat import HeartbeatPublisher
from support import arm_xml, plugins_param, run_python, wait_for

DT = 0.002


# Each shipped plugin with the configuration keys its module docstring documents.
SHIPPED = [
    ("mjfast/FtsGravComp", FtsGravComp, ["cog", "force_sensor", "mass", "site", "torque_sensor"]),
    ("mjfast/BaseVelocity", BaseVelocity, ["joint", "timeout", "topic"]),
    ("mjfast/FreeJointStatePublisher", FreeJointStatePublisher, ["bodies", "rate_hz", "topic"]),
    ("mjfast/HeartbeatPublisher", HeartbeatPublisher, ["topic"]),
]


@pytest.mark.parametrize(("type_name", "cls", "keys"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_shipped_plugins_are_entry_points(type_name, cls, keys):
    assert resolve_plugin(type_name) is cls


@pytest.mark.parametrize(("type_name", "cls", "keys"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_shipped_plugins_accept_exactly_their_documented_keys(type_name, cls, keys):
    # A key the plugin does not take is refused before it is made, and the refusal lists the
    # keys it takes: the documented ones, each of which its module docstring names.
    entry = {"type": type_name, "name": "p", "not_a_key": 1}
    with mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [entry]}) as env:
        (info,) = env.plugins
    assert info.state is PluginState.FAILED
    assert info.failure.phase == "factory"
    assert info.failure.message.endswith(
        f"unknown configuration key 'not_a_key'; its keys are: {', '.join(keys)}")
    doc = sys.modules[cls.__module__].__doc__ or ""
    assert [key for key in keys if f"`{key}`" not in doc] == []


# -- FtsGravComp ------------------------------------------------------------------------------

PAYLOAD_MASS = 2.0
PAYLOAD_COG = [0.02, -0.03, -0.08]
# A payload hangs under a mount that turns about the vertical: gravity exerts no moment about
# that axis, so the payload is static whatever the yaw, while the sensor frame (tilted by the
# payload body's euler) sees gravity from a direction that depends on qpos.
FTS_XML = f"""
<mujoco model="fts">
  <option timestep="{DT}"/>
  <worldbody>
    <body name="mount" pos="0 0 1">
      <joint name="yaw" type="hinge" axis="0 0 1"/>
      <geom type="cylinder" size="0.05 0.05" mass="1" contype="0" conaffinity="0"/>
      <body name="payload" pos="0 0 -0.1" euler="0.4 0.3 0">
        <site name="fts"/>
        <geom type="sphere" size="0.05" pos="{' '.join(map(str, PAYLOAD_COG))}"
              mass="{PAYLOAD_MASS}" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <sensor><force name="force" site="fts"/><torque name="torque" site="fts"/>
    <jointpos name="yaw_pos" joint="yaw"/></sensor>
  <keyframe><key name="turned" qpos="0.7"/></keyframe>
</mujoco>
"""


def fts_params(**config):
    entry = {"name": "fts", "type": "mjfast/FtsGravComp", "site": "fts",
             "force_sensor": "force", "torque_sensor": "torque", **config}
    return plugins_param(entry)


def gravity_wrench(env, mass, cog):
    """The payload's gravity wrench in the site frame, from the live data."""
    site = env.model.site("fts").id
    rotation = env.data.site_xmat[site].reshape(3, 3)
    force = rotation.T @ (mass * env.model.opt.gravity)
    return np.concatenate([force, np.cross(cog, force)])


@pytest.mark.parametrize("keyframe", [None, "turned"])
def test_fts_grav_comp_zeroes_a_static_configured_payload(make_env, keyframe):
    raw_env = make_env(FTS_XML)
    env = make_env(FTS_XML, params=fts_params(mass=PAYLOAD_MASS, cog=PAYLOAD_COG))
    assert env.plugins[0].state is PluginState.ACTIVE
    for e in (raw_env, env):
        if keyframe:
            e.reset(keyframe)
        e.step(20)
    raw = raw_env.control.read().sensordata[:6]
    wrench = gravity_wrench(env, PAYLOAD_MASS, PAYLOAD_COG)
    # MuJoCo reads the wrench the parent exerts: minus the payload's weight, and it is static.
    np.testing.assert_allclose(raw, -wrench, atol=1e-9)
    assert np.linalg.norm(raw[:3]) == pytest.approx(PAYLOAD_MASS * 9.81)
    compensated = env.control.read()
    np.testing.assert_allclose(compensated.sensordata[:6], 0.0, atol=1e-9)
    # Only the read is compensated: the simulation's own sensor data is untouched.
    np.testing.assert_allclose(env.data.sensordata[:6], raw, atol=1e-12)
    assert compensated.sensordata[6] == env.data.sensordata[6]


# The payload turns about a horizontal axis through the sensor site, its centre of gravity on that
# axis: gravity exerts no moment about the hinge, so it is static at any angle, while the site
# frame sees gravity from a direction that depends on qpos.
ROLL_XML = f"""
<mujoco model="fts_roll">
  <option timestep="{DT}"/>
  <worldbody>
    <body name="mount" pos="0 0 1">
      <joint name="roll" type="hinge" axis="1 0 0"/>
      <geom type="cylinder" fromto="-0.05 0 0 0.05 0 0" size="0.02" mass="1"
            contype="0" conaffinity="0"/>
      <body name="payload">
        <site name="fts"/>
        <geom type="sphere" size="0.05" pos="0.1 0 0" mass="{PAYLOAD_MASS}"
              contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <sensor><force name="force" site="fts"/><torque name="torque" site="fts"/></sensor>
</mujoco>
"""


def test_fts_grav_comp_follows_the_site_orientation(make_env):
    cog = [0.1, 0.0, 0.0]
    env = make_env(ROLL_XML, params=fts_params(mass=PAYLOAD_MASS, cog=cog))
    for roll in (0.0, 0.7, -1.9, math.pi):
        env.data.qpos[0] = roll
        env.step(5)
        raw = env.data.sensordata[:6].copy()
        weight = PAYLOAD_MASS * 9.81
        # The weight as the rolled site frame sees it (MuJoCo reads the parent's reaction).
        np.testing.assert_allclose(raw[:3], [0.0, weight * math.sin(roll),
                                             weight * math.cos(roll)], atol=1e-9)
        assert np.linalg.norm(raw[3:]) == pytest.approx(0.1 * weight)
        np.testing.assert_allclose(env.control.read().sensordata[:6], 0.0, atol=1e-9)


def test_fts_grav_comp_with_a_different_configured_payload(make_env):
    mass, cog = 0.5, [0.0, 0.1, -0.2]
    env = make_env(FTS_XML, params=fts_params(mass=mass, cog=cog))
    env.reset("turned")
    env.step(10)
    expected = env.data.sensordata[:6] + gravity_wrench(env, mass, cog)
    np.testing.assert_allclose(env.control.read().sensordata[:6], expected, atol=1e-9)


@pytest.mark.parametrize("config, message", [
    ({"mass": 1.0, "site": "nope"}, "no site named 'nope'"),
    ({"mass": 1.0, "force_sensor": "torque"}, "'torque' is not a mjSENS_FORCE sensor"),
    ({"mass": 1.0, "torque_sensor": "missing"}, "no sensor named 'missing'"),
    ({"mass": 1.0, "torque_sensor": "yaw_pos"}, "not a mjSENS_TORQUE sensor"),
    ({}, "missing configuration key 'mass'"),
    ({"mass": 1.0, "cog": [1, 2]}, "cog: expected 3 finite numbers"),
    ({"mass": -1.0}, "mass must be a finite non-negative number"),
])
def test_fts_grav_comp_bad_configuration_fails_its_load(make_env, config, message):
    env = make_env(FTS_XML, params=fts_params(**config))
    (info,) = env.plugins
    assert info.state is PluginState.FAILED
    assert info.failure is not None and message in info.failure.message
    env.step()  # the env stays usable
    env.control.read()


# -- BaseVelocity -----------------------------------------------------------------------------

# A floating base in zero gravity and without contacts: nothing but the plugin changes its
# velocity, so positions follow the commands exactly.
BASE_XML = f"""
<mujoco model="base">
  <option timestep="{DT}" gravity="0 0 0"/>
  <worldbody>
    <body name="base" pos="0 0 0.5">
      <freejoint name="base_free"/>
      <geom type="box" size="0.2 0.1 0.05" mass="3" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""
CMD_TOPIC = "/mujoco_server/base/cmd_vel"


def base_env(make_env, **config):
    entry = {"name": "base", "type": "mjfast/BaseVelocity", "joint": "base_free", **config}
    return make_env(BASE_XML, params=plugins_param(entry))


def yaw_of(quaternion) -> float:
    w, x, y, z = quaternion
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def test_base_velocity_moves_the_body_at_the_commanded_planar_velocity(make_env):
    env = base_env(make_env, timeout=0.1)
    assert env.plugins[0].state is PluginState.ACTIVE
    env.bus.publish(CMD_TOPIC, {"vx": 0.5, "vy": -0.2, "yaw_rate": 0.3})
    env.step(25)
    elapsed = 25 * DT
    np.testing.assert_allclose(env.data.qpos[:3], [0.5 * elapsed, -0.2 * elapsed, 0.5],
                               atol=1e-12)
    assert yaw_of(env.data.qpos[3:7]) == pytest.approx(0.3 * elapsed, abs=1e-9)
    np.testing.assert_allclose(env.data.qvel[:2], [0.5, -0.2])
    # The angular velocity in the world frame: the yaw rate, nothing else.
    np.testing.assert_allclose(env.data.qvel[3:6], [0.0, 0.0, 0.3], atol=1e-12)
    # While the command is in force the plugin overrides a disturbance in the plane, but not
    # vertical motion.
    env.data.qvel[0] = 0.0
    env.data.qvel[2] = 0.25
    env.step()
    assert env.data.qvel[0] == 0.5
    assert env.data.qvel[2] == 0.25


def test_base_velocity_releases_the_joint_after_the_timeout(make_env):
    env = base_env(make_env, timeout=0.1)
    env.bus.publish(CMD_TOPIC, [0.5, 0.0, 0.0])
    with env.acquire_plugin("base") as plugin:
        assert not plugin.active  # not yet seen by a step
    env.step(40)  # 0.08 s: still commanded
    with env.acquire_plugin("base") as plugin:
        assert plugin.active
    env.data.qvel[0] = 0.0
    env.step()
    assert env.data.qvel[0] == 0.5
    env.step(20)  # 0.122 s: past the timeout, in simulated time
    with env.acquire_plugin("base") as plugin:
        assert not plugin.active
    env.data.qvel[:6] = [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]
    x = env.data.qpos[0]
    env.step(10)
    assert env.data.qvel[0] == 0.1  # no longer overridden: the body keeps its own velocity
    assert env.data.qpos[0] == pytest.approx(x + 10 * DT * 0.1)
    # A new command takes over again.
    env.bus.publish(CMD_TOPIC, {"vx": -0.3})
    env.step()
    np.testing.assert_allclose(env.data.qvel[:2], [-0.3, 0.0])


def test_base_velocity_timeout_counts_simulated_time_since_the_last_command(make_env):
    env = base_env(make_env, timeout=0.05)
    overridden = 0
    for _ in range(4):  # a command every 0.04 s keeps it alive
        env.bus.publish(CMD_TOPIC, [1.0, 0.0, 0.0])
        for _ in range(20):
            env.data.qvel[0] = 0.0
            env.step()
            overridden += env.data.qvel[0] == 1.0
    assert overridden == 80
    for _ in range(30):  # then none: released 0.05 s after the last (+- a step of rounding)
        env.data.qvel[0] = 0.0
        env.step()
        overridden += env.data.qvel[0] == 1.0
    assert 80 + 4 <= overridden <= 80 + 6


def test_base_velocity_drops_the_command_at_a_reset(make_env):
    env = base_env(make_env)
    env.bus.publish(CMD_TOPIC, {"vx": 0.5})
    env.step(3)
    env.reset()
    env.step(3)
    np.testing.assert_array_equal(env.data.qvel, 0.0)


@pytest.mark.parametrize("message", [{"vz": 1.0}, [1.0, 2.0], "fast", [1.0, float("nan"), 0.0]])
def test_base_velocity_rejects_malformed_commands(make_env, message):
    env = base_env(make_env)
    with env.acquire_plugin("base") as plugin, pytest.raises(ValueError):
        plugin.command(message)
    env.bus.publish(CMD_TOPIC, message)  # logged by the bus, ignored by the plugin
    env.step(2)
    np.testing.assert_array_equal(env.data.qvel, 0.0)


@pytest.mark.parametrize("config, message", [
    ({"joint": "nope"}, "no joint named 'nope'"),
    ({"joint": None}, "configuration key 'joint' must be a string, got None"),
    ({"timeout": -1.0}, "timeout must be >= 0"),
])
def test_base_velocity_bad_configuration_fails_its_load(make_env, config, message):
    env = base_env(make_env, **config)
    (info,) = env.plugins
    assert info.state is PluginState.FAILED
    assert message in info.failure.message


def test_base_velocity_needs_a_free_joint(make_env, arm):
    env = make_env(arm, params=plugins_param({"name": "base", "type": "mjfast/BaseVelocity",
                                              "joint": "j0"}))
    assert "is not a free joint" in env.plugins[0].failure.message


# -- FreeJointStatePublisher ------------------------------------------------------------------

TWO_BODIES_XML = f"""
<mujoco model="two">
  <option timestep="{DT}" gravity="0 0 0"/>
  <worldbody>
    <body name="a" pos="0 0 1"><freejoint/>
      <geom type="sphere" size="0.1" mass="1" contype="0" conaffinity="0"/></body>
    <body name="b" pos="1 2 3" quat="0 1 0 0"><freejoint/>
      <geom type="box" size="0.1 0.2 0.3" mass="1" contype="0" conaffinity="0"/></body>
  </worldbody>
  <keyframe>
    <key name="moving" qpos="0 0 1 1 0 0 0 1 2 3 0 1 0 0" qvel="0.1 0 0 0 0 0.5 0 0 0 0 0 0"/>
  </keyframe>
</mujoco>
"""


def collect(env, topic):
    messages = []
    env.bus.subscribe(topic, messages.append)
    return messages


def test_free_joint_state_publishes_poses_and_twists_at_the_rate(make_env):
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", "bodies": ["a", "b"],
             "rate_hz": 50}
    env = make_env(TWO_BODIES_XML, params=plugins_param(entry))
    env.reset("moving")
    a = collect(env, "/mujoco_server/state/a")
    b = collect(env, "/mujoco_server/state/b")
    env.step(500)  # 1 s of simulated time
    assert len(a) == len(b) == 50
    np.testing.assert_allclose([m["time"] for m in a], np.arange(1, 51) / 50, atol=1e-9)
    for message in a:
        t = message["time"]
        assert message["body"] == "a"
        np.testing.assert_allclose(message["position"], [0.1 * t, 0.0, 1.0], atol=1e-9)
        angle = 0.5 * t  # rotating about the vertical at 0.5 rad/s
        np.testing.assert_allclose(message["quaternion"],
                                   [math.cos(angle / 2), 0, 0, math.sin(angle / 2)], atol=1e-6)
        np.testing.assert_allclose(message["linear"], [0.1, 0.0, 0.0], atol=1e-12)
        np.testing.assert_allclose(message["angular"], [0.0, 0.0, 0.5], atol=1e-12)
    last = b[-1]
    np.testing.assert_allclose(last["position"], [1, 2, 3])
    np.testing.assert_allclose(last["quaternion"], [0, 1, 0, 0])
    np.testing.assert_allclose(last["linear"], 0.0)
    # A message is the caller's own copy.
    a[0]["position"][:] = 99.0
    assert env.data.qpos[0] != 99.0


def test_free_joint_state_rate_not_a_multiple_of_the_timestep_and_one_topic(make_env):
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", "bodies": ["a", "b"],
             "rate_hz": 30, "topic": "/poses"}
    env = make_env(TWO_BODIES_XML, params=plugins_param(entry))
    messages = collect(env, "/poses")
    env.step(500)
    assert [m["body"] for m in messages] == ["a", "b"] * 30
    times = np.array([m["time"] for m in messages[::2]])
    due = np.arange(1, 31) / 30
    assert np.all(times >= due - DT / 2) and np.all(times < due + DT)
    env.reset()
    env.step(100)  # the schedule restarts with the clock
    assert len(messages) == 2 * 30 + 2 * 6


def test_free_joint_state_is_called_at_its_due_steps_only(make_env, monkeypatch):
    """The core skips the steps before the next due time (no GIL, no call): at 30 Hz on a
    500 Hz model, 30 calls in 500 steps, the same messages, and after a reset and a restored
    state too."""
    from mjfast.plugins.free_joint_state import FreeJointStatePublisher

    calls = []
    original = FreeJointStatePublisher.last_stage_callback

    def counted(self, model, data):
        calls.append(float(data.time))
        original(self, model, data)

    monkeypatch.setattr(FreeJointStatePublisher, "last_stage_callback", counted)
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", "bodies": ["a"],
             "rate_hz": 30}
    env = make_env(TWO_BODIES_XML, params=plugins_param(entry))
    messages = collect(env, "/mujoco_server/state/a")
    env.step(500)
    assert len(messages) == len(calls) == 30
    assert calls == [m["time"] for m in messages]
    env.reset()
    saved = env.get_state()
    env.step(100)
    env.set_state(saved)
    env.step(100)
    assert len(messages) == 30 + 6 + 6
    assert len(calls) == 42
    assert [m["time"] for m in messages[36:]] == [m["time"] for m in messages[30:36]]


@pytest.mark.parametrize("config, message", [
    ({"bodies": []}, "non-empty list"),
    ({"bodies": ["nope"]}, "no body named 'nope'"),
    ({"bodies": ["world"]}, "does not move on one free joint"),
    ({"bodies": ["a"], "rate_hz": 0}, "rate_hz must be a positive number"),
])
def test_free_joint_state_bad_configuration_fails_its_load(make_env, config, message):
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", **config}
    env = make_env(TWO_BODIES_XML, params=plugins_param(entry))
    (info,) = env.plugins
    assert info.state is PluginState.FAILED
    assert message in info.failure.message


# -- HeartbeatPublisher -----------------------------------------------------------------------


def test_heartbeat_once_per_simulated_second(make_env):
    env = make_env(BASE_XML, params=plugins_param({"name": "hb",
                                                   "type": "mjfast/HeartbeatPublisher"}))
    beats = collect(env, "/mujoco_server/hb/heartbeat")
    env.step(int(3.5 / DT))
    assert [b["count"] for b in beats] == [1, 2, 3]
    np.testing.assert_allclose([b["time"] for b in beats], [1.0, 2.0, 3.0], atol=1e-9)
    env.reset()
    env.step(int(1.5 / DT))
    # The counter keeps increasing across a reset; the beat follows the reset clock.
    assert [b["count"] for b in beats] == [1, 2, 3, 4]
    assert beats[-1]["time"] == pytest.approx(1.0)


def test_heartbeat_on_a_configured_topic_while_running(make_env):
    env = make_env(BASE_XML, params=plugins_param({"name": "hb", "topic": "/beat",
                                                   "type": "mjfast/HeartbeatPublisher"}))
    env.start(None)
    try:
        def beats():
            latest = env.bus.latest("/beat")
            return 0 if latest is None else latest["count"]

        assert wait_for(lambda: beats() >= 2, timeout=20.0), "no heartbeat"
    finally:
        env.stop()
    assert env.bus.latest("/beat")["count"] >= 2


def test_control_read_and_write_inside_a_callback_or_acquire_block_are_refused_not_deadlocked(
) -> None:
    # With control plugins loaded, read()/write() take the control lock and dispatch the plugins;
    # from a plugin callback (the step holds the host) or inside acquire_plugin (the caller holds
    # the host) that would wait on the caller's own lock. A child interpreter, so that a
    # regression shows as a timeout instead of a hung suite.
    result = run_python("""
        import mjfast
        from support import Recording, arm_xml

        class Reader(mjfast.ControlPlugin):
            def init(self, node, model, data): return True
            def cleanup(self): pass
            def update_read(self, model, data): pass
            def update_write(self, model, data): pass

        refused = []

        class Inner(Recording):
            def last_stage_callback(self, model, data):
                for call in (self.env.control.read, self.env.control.write):
                    try:
                        call()
                    except mjfast.LogicError as error:
                        refused.append(("callback", str(error)))

        mjfast.register_plugin("t/Reader", Reader)
        mjfast.register_plugin("t/Inner", Inner)
        params = {"MujocoPlugins": [{"type": "t/Inner"}, {"type": "t/Reader"}]}
        with mjfast.MujocoEnv(arm_xml(), params=params) as env:
            env.control.read()
            env.step(1)
            with env.acquire_plugin(env.plugins[0].name):
                for call in (env.control.read, env.control.write):
                    try:
                        call()
                    except mjfast.LogicError as error:
                        refused.append(("acquire", str(error)))
            assert env.control.read().time > 0  # and the env goes on afterwards
        for where, message in refused:
            print(where, message)
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["callback"] * 2 + ["acquire"] * 2
    assert all("would deadlock" in line for line in lines), lines


# -- hardening 3: unnamed joints and bodies, stored quaternions that are not unit, bad commands --

UNNAMED_BASE_XML = BASE_XML.replace('<body name="base" pos="0 0 0.5">', '<body pos="0 0 0.5">') \
    .replace('<freejoint name="base_free"/>', "<freejoint/>")


def test_base_velocity_takes_an_unnamed_free_joint_as_joint_and_its_id(make_env):
    entry = {"name": "base", "type": "mjfast/BaseVelocity", "joint": "joint_0"}
    env = make_env(UNNAMED_BASE_XML, params=plugins_param(entry))
    assert env.plugins[0].state is PluginState.ACTIVE, env.plugins[0].failure
    env.bus.publish(CMD_TOPIC, {"vx": 0.5})
    env.step()
    assert env.data.qvel[0] == 0.5


def test_base_velocity_sets_the_world_yaw_rate_of_a_quaternion_that_is_not_unit(make_env):
    env = base_env(make_env)
    env.data.qpos[3:7] = [2.0, 0.0, 0.0, 0.0]  # written by a user: MuJoCo reads it normalised
    env.data.qvel[3:6] = [0.1, 0.0, 0.0]
    env.bus.publish(CMD_TOPIC, {"yaw_rate": 0.3})
    with env.acquire_plugin("base") as plugin:
        plugin.pre_step(env.data)  # the step's first stage, on the live data
    np.testing.assert_allclose(env.data.qvel[3:6], [0.1, 0.0, 0.3], atol=1e-12)


@pytest.mark.parametrize("command", [{"vx": True}, {"vx": "1.5"}, [0.1, None, 0.0],
                                     (b"1", 0, 0)])
def test_base_velocity_refuses_a_command_that_is_not_numbers(make_env, command):
    env = base_env(make_env)
    with env.acquire_plugin("base") as plugin, pytest.raises(ValueError, match="numbers"):
        plugin.command(command)


def test_free_joint_state_takes_an_unnamed_body_as_body_and_its_id(make_env):
    xml = TWO_BODIES_XML.replace('<body name="a" pos="0 0 1">', '<body pos="0 0 1">')
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", "bodies": ["body_1"]}
    env = make_env(xml, params=plugins_param(entry))
    assert env.plugins[0].state is PluginState.ACTIVE, env.plugins[0].failure
    messages = collect(env, "/mujoco_server/state/body_1")
    env.step(5)
    assert messages[0]["body"] == "body_1"
    np.testing.assert_allclose(messages[0]["position"], [0, 0, 1], atol=1e-12)


def test_free_joint_state_refuses_a_body_listed_twice(make_env):
    entry = {"name": "state", "type": "mjfast/FreeJointStatePublisher", "bodies": ["a", "a"]}
    env = make_env(TWO_BODIES_XML, params=plugins_param(entry))
    assert "bodies lists 'a' more than once" in env.plugins[0].failure.message


def test_fts_grav_comp_takes_unnamed_sensors_as_sensor_and_their_id(make_env):
    xml = FTS_XML.replace('<force name="force" site="fts"/><torque name="torque" site="fts"/>',
                          '<force site="fts"/><torque site="fts"/>')
    env = make_env(xml, params=fts_params(mass=PAYLOAD_MASS, cog=PAYLOAD_COG,
                                          force_sensor="sensor_0", torque_sensor="sensor_1"))
    assert env.plugins[0].state is PluginState.ACTIVE, env.plugins[0].failure
    env.step(20)
    np.testing.assert_allclose(env.control.read().sensordata[:6], 0.0, atol=1e-9)


@pytest.mark.parametrize("topic", ["/", "//", "", "a/~b"])
@pytest.mark.parametrize(("entry", "xml"), [
    ({"type": "mjfast/HeartbeatPublisher"}, BASE_XML),
    ({"type": "mjfast/FreeJointStatePublisher", "bodies": ["a"]}, TWO_BODIES_XML),
], ids=["heartbeat", "free_joint_state"])
def test_a_topic_that_names_no_topic_is_a_load_failure_not_a_step_error(make_env, entry, xml,
                                                                        topic):
    env = make_env(xml, params=plugins_param({"name": "p", **entry, "topic": topic}))
    (info,) = env.plugins
    assert info.state is PluginState.FAILED and "topic" in info.failure.message
    env.step(1000)  # 2 s: past the first heartbeat
