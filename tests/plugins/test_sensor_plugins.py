"""mjfast/SensorPublisher, JointStatePublisher, ClockPublisher and RangefinderLidar (SPEC §14).

Each published value is checked against the live `MjData` at the moment of delivery (the bus
delivers synchronously on the stepping thread, inside last_stage), rates against exact multiples
of the period in simulated time, noise against its seed and configured spread, and each
misconfiguration against a load failure that names it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import mjfast
from support import attached_arms_model, wait_for

NS = "/mujoco_server"
TIMESTEP = 0.002

# A pendulum on a hinge, a slider, a free ball and a ball joint (not published by default),
# motors on the hinge and slider, sensors of several sizes, and four rangefinders facing walls
# (on a body of their own: a rangefinder does not see its site's body, the world included).
WORLD = f"""
<mujoco>
  <option timestep="{TIMESTEP}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <geom name="wall_x" type="box" pos="2 0 1" size="0.05 3 1"/>
    <geom name="wall_y" type="box" pos="0 3 1" size="3 0.05 1"/>
    <body name="pendulum" pos="-1 0 1.5">
      <joint name="swing" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" contype="0" conaffinity="0"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
    <body name="cart" pos="0 -1 0.5">
      <joint name="slide" type="slide" axis="1 0 0" damping="1"/>
      <geom type="box" size="0.1 0.1 0.1" contype="0" conaffinity="0" mass="1"/>
      <body name="knob" pos="0 0 0.2">
        <joint name="knob_ball" type="ball"/>
        <geom type="sphere" size="0.03" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="ball" pos="1 1 1">
      <freejoint name="ball_free"/>
      <geom type="sphere" size="0.05" contype="0" conaffinity="0"/>
    </body>
    <body name="mount" pos="0 0 1">
      <site name="rf_origin" zaxis="1 0 0"/>
      <site name="rf_up" zaxis="0 0 1"/>
      <site name="rf_y" zaxis="0 1 0"/>
      <site name="rf_down" zaxis="0 0 -1"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="swing_motor" joint="swing" gear="2"/>
    <motor name="slide_motor" joint="slide"/>
  </actuator>
  <sensor>
    <jointpos name="swing_pos" joint="swing"/>
    <framepos name="tip_pos" objtype="site" objname="tip"/>
    <jointvel name="slide_vel" joint="slide"/>
    <framequat name="ball_quat" objtype="body" objname="ball"/>
    <rangefinder name="rf-2" site="rf_up"/>
    <rangefinder name="rf-0" site="rf_origin"/>
    <rangefinder name="rf-3" site="rf_down"/>
    <rangefinder name="rf-1" site="rf_y"/>
  </sensor>
</mujoco>
"""
SENSORS = ["swing_pos", "tip_pos", "slide_vel", "ball_quat", "rf-2", "rf-0", "rf-3", "rf-1"]


def make_env(*plugins: dict[str, Any]) -> mjfast.MujocoEnv:
    env = mjfast.MujocoEnv(WORLD, params={"mujoco_server": {"MujocoPlugins": list(plugins)}})
    env.data.qpos[0] = 0.7  # the pendulum swings, so that values change from step to step
    env.data.ctrl[:] = [0.3, 2.0]
    return env


def recorder(env: mjfast.MujocoEnv, topic: str, *fields: str) -> list[dict[str, Any]]:
    """Messages on `topic`, each with the named live MjData fields copied at its delivery."""
    received: list[dict[str, Any]] = []

    def on_message(message: dict[str, Any]) -> None:
        live = {name: np.array(getattr(env.data, name)) for name in fields}
        received.append({"message": message, "now": float(env.data.time), **live})

    env.bus.subscribe(topic, on_message)
    return received


def failure_of(env: mjfast.MujocoEnv) -> str:
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED, info
    assert info.failure is not None and info.failure.phase == "load"
    return info.failure.message


def assert_multiples(times: list[float], period: float, first: int = 1) -> None:
    expected = [(first + k) * period for k in range(len(times))]
    np.testing.assert_allclose(times, expected, rtol=0, atol=1e-9)


# -- the rate plugins' schedule in the core ---------------------------------------------------


def counting_last_stage(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The times at which RatePublisher.last_stage_callback (the Python method) is called."""
    from mjfast.plugins._sensing import RatePublisher

    calls: list[float] = []
    original = RatePublisher.last_stage_callback

    def counted(self: Any, model: Any, data: Any) -> None:
        calls.append(float(data.time))
        original(self, model, data)

    monkeypatch.setattr(RatePublisher, "last_stage_callback", counted)
    return calls


def test_a_rate_plugin_is_called_at_its_due_steps_only(envs: list[Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 50 Hz publisher on a 500 Hz model: the core skips the 9 steps of 10 with nothing due
    (no GIL, no call), across a reset and a restored state too, and the messages are the same
    as the Python schedule's (every 0.02 s)."""
    calls = counting_last_stage(monkeypatch)
    env = make_env({"type": "mjfast/JointStatePublisher", "rate_hz": 50})
    envs.append(env)
    received = recorder(env, f"{NS}/JointStatePublisher/joint_states")
    env.step(100)
    assert_multiples([r["message"]["time"] for r in received], 1 / 50)
    assert len(calls) == len(received) == 10
    assert_multiples(calls, 1 / 50)
    env.reset()  # the window follows the clock back to 0
    env.step(20)
    assert [r["message"]["time"] for r in received[10:]] == pytest.approx([0.02, 0.04],
                                                                          abs=1e-9)
    assert len(calls) == 12
    saved = env.get_state()  # at t = 0.04, the next due time 0.06
    env.step(25)  # due at 0.06, 0.08
    env.set_state(saved)
    env.step(10)  # again due at 0.06
    assert [r["message"]["time"] for r in received[12:]] == pytest.approx([0.06, 0.08, 0.06],
                                                                          abs=1e-9)
    assert len(calls) == 15


def test_a_rate_plugin_that_overrides_last_stage_callback_is_called_every_step(
        envs: list[Any]) -> None:
    from mjfast.plugins.joint_state_publisher import JointStatePublisher

    seen: list[float] = []

    class EveryStep(JointStatePublisher):
        def last_stage_callback(self, model: Any, data: Any) -> None:
            seen.append(float(data.time))
            super().last_stage_callback(model, data)

    mjfast.register_plugin("test/EveryStepJointStates", EveryStep)
    try:
        env = make_env({"type": "test/EveryStepJointStates", "rate_hz": 50})
    finally:
        mjfast.unregister_plugin("test/EveryStepJointStates")
    envs.append(env)
    received = recorder(env, f"{NS}/EveryStepJointStates/joint_states")
    env.step(100)
    assert len(seen) == 100
    assert_multiples([r["message"]["time"] for r in received], 1 / 50)
    assert len(received) == 10


def test_the_due_window_follows_resets_and_restores_made_while_the_physics_thread_steps(
        envs: list[Any]) -> None:
    """The window is read by the physics thread at every step and moved by the thread that
    resets and restores the env meanwhile (a race for tools/sanitize thread to see): publishing
    goes on after each, every message at a multiple of the period."""
    env = make_env({"type": "mjfast/JointStatePublisher", "rate_hz": 50})
    envs.append(env)
    times: list[float] = []
    env.bus.subscribe(f"{NS}/JointStatePublisher/joint_states",
                      lambda message: times.append(float(message["time"])))
    env.step(30)
    saved = env.get_state()  # t = 0.06
    env.start(None)
    try:
        for k in range(40):
            (env.reset if k % 2 else lambda: env.set_state(saved))()
            published = len(times)
            assert wait_for(lambda published=published: len(times) > published + 2), k
    finally:
        env.stop()
    period = 1 / 50
    steps = np.round(np.asarray(times) / period)
    np.testing.assert_allclose(steps * period, times, rtol=0, atol=1e-9)
    assert (steps >= 1).all()


# -- SensorPublisher -----------------------------------------------------------------------------


def test_sensor_values_equal_their_sensordata_slices_by_name(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/SensorPublisher", "rate_hz": 50})
    envs.append(env)
    model = env.model
    got = {name: recorder(env, f"{NS}/SensorPublisher/{name}", "sensordata") for name in SENSORS}
    env.step(100)  # 0.2 s at 50 Hz: 10 messages per sensor
    for name, received in got.items():
        sensor = model.sensor(name)
        address, dim = int(sensor.adr[0]), int(sensor.dim[0])
        assert len(received) == 10, name
        values = []
        for record in received:
            value = record["message"]["value"]
            assert value.dtype == np.float64 and value.shape == (dim,)
            np.testing.assert_array_equal(value, record["sensordata"][address:address + dim])
            assert record["message"]["time"] == record["now"]
            values.append(value.copy())
        if name == "swing_pos":  # a moving value: each message is of its own step
            assert len({float(v[0]) for v in values}) == len(values)
        assert_multiples([r["message"]["time"] for r in received], 1 / 50)


def test_sensor_subset_and_reset_restarts_the_schedule(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/SensorPublisher", "sensors": ["tip_pos"], "rate_hz": 100})
    envs.append(env)
    published: list[str] = []
    env.bus.subscribe(f"{NS}/SensorPublisher/tip_pos", lambda m: published.append("tip_pos"))
    env.step(20)
    assert env.bus.latest(f"{NS}/SensorPublisher/swing_pos") is None
    received = recorder(env, f"{NS}/SensorPublisher/tip_pos")
    env.step(7)  # 0.054 s: t = 0.046 ... 0.054
    env.reset()
    env.step(10)  # after the reset: again at 0.01, 0.02
    assert [r["message"]["time"] for r in received] == pytest.approx([0.05, 0.01, 0.02],
                                                                     abs=1e-9)


def noisy_env(seed: int, ground_truth: bool = True) -> mjfast.MujocoEnv:
    return make_env({"type": "mjfast/SensorPublisher", "rate_hz": 500, "seed": seed,
                     "sensors": ["tip_pos", "swing_pos"], "ground_truth": ground_truth,
                     "noise": {"tip_pos": {"std": [0.5, 0.1, 0.0], "bias": 0.2}}})


def test_noise_is_seeded_and_has_the_configured_spread(envs: list[Any]) -> None:
    first, again, other = noisy_env(7), noisy_env(7), noisy_env(8)
    envs += [first, again, other]
    topic = f"{NS}/SensorPublisher/tip_pos"
    noisy = {id(e): recorder(e, topic) for e in envs}
    truth = recorder(first, topic + "_gt")
    for env in envs:
        env.step(4000)  # 4000 messages: 8 s at 500 Hz
    values = np.array([r["message"]["value"] for r in noisy[id(first)]])
    np.testing.assert_array_equal(values,
                                  np.array([r["message"]["value"] for r in noisy[id(again)]]))
    assert not np.array_equal(values,
                              np.array([r["message"]["value"] for r in noisy[id(other)]]))
    true = np.array([r["message"]["value"] for r in truth])
    assert true.shape == values.shape == (4000, 3)
    # The ground truth is the sensor itself; the noise has the configured bias and spread. With
    # 4000 samples the standard error of a mean is std/63 and of a std about std/89: the bounds
    # are more than 5 of them, and a fixed seed makes the draw the same every run anyway.
    error = values - true
    np.testing.assert_allclose(error.mean(axis=0), [0.2, 0.2, 0.2], atol=0.04)
    np.testing.assert_allclose(error.std(axis=0), [0.5, 0.1, 0.0], rtol=0.06, atol=1e-12)
    # Unconfigured sensors stay exact and have no ground-truth twin.
    assert first.bus.latest(f"{NS}/SensorPublisher/swing_pos_gt") is None


def test_reset_replays_the_noise(envs: list[Any]) -> None:
    env = noisy_env(3, ground_truth=False)
    envs.append(env)
    received = recorder(env, f"{NS}/SensorPublisher/tip_pos")
    env.step(50)
    first = [r["message"]["value"].copy() for r in received]
    received.clear()
    env.reset()
    env.data.qpos[0] = 0.7
    env.data.ctrl[:] = [0.3, 2.0]
    env.step(50)
    np.testing.assert_array_equal(first, [r["message"]["value"] for r in received])
    assert env.bus.latest(f"{NS}/SensorPublisher/tip_pos_gt") is None


@pytest.mark.parametrize(("config", "named"), [
    ({"sensors": ["tip_pos", "tip_posx"]}, "'tip_posx'"),
    ({"rate_hz": 0}, "rate_hz"),
    ({"noise": {"nope": {"std": 1}}}, "'nope'"),
    ({"sensors": ["swing_pos"], "noise": {"tip_pos": {"std": 1}}}, "'tip_pos'"),
    ({"noise": {"tip_pos": {"std": 1, "mean": 0}}}, "'noise.tip_pos.mean'; its keys are: "
                                                    "noise.tip_pos.bias, noise.tip_pos.std"),
    ({"noise": {"tip_pos": {"std": [1, 2]}}}, "noise.tip_pos.std"),
    ({"noise": {"tip_pos": {"std": -1}}}, "noise.tip_pos.std"),
    ({"seed": -1}, "seed"),
])
def test_sensor_publisher_misconfiguration_is_a_load_failure(config: dict[str, Any],
                                                              named: str,
                                                              envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/SensorPublisher", **config})
    envs.append(env)
    assert named in failure_of(env)


# -- JointStatePublisher -------------------------------------------------------------------------


def test_joint_states_equal_qpos_qvel_and_actuator_force(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/JointStatePublisher", "rate_hz": 25})
    envs.append(env)
    received = recorder(env, f"{NS}/JointStatePublisher/joint_states", "qpos", "qvel",
                        "qfrc_actuator")
    env.step(100)
    assert len(received) == 5
    model = env.model
    hinge, slide = model.joint("swing"), model.joint("slide")
    for record in received:
        message = record["message"]
        assert message["name"] == ["swing", "slide"]  # hinge and slide joints, model order
        q = [hinge.qposadr[0], slide.qposadr[0]]
        v = [hinge.dofadr[0], slide.dofadr[0]]
        np.testing.assert_array_equal(message["position"], record["qpos"][q])
        np.testing.assert_array_equal(message["velocity"], record["qvel"][v])
        np.testing.assert_array_equal(message["effort"], record["qfrc_actuator"][v])
        assert message["time"] == record["now"]
    # The motors act: effort is gear x ctrl at each joint.
    np.testing.assert_allclose(received[-1]["message"]["effort"], [0.6, 2.0])
    assert_multiples([r["message"]["time"] for r in received], 1 / 25)


def test_joint_states_in_the_configured_order(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/JointStatePublisher", "joints": ["slide", "swing"]})
    envs.append(env)
    env.step(5)
    message = env.bus.latest(f"{NS}/JointStatePublisher/joint_states")
    assert message["name"] == ["slide", "swing"]
    np.testing.assert_array_equal(message["position"], env.data.qpos[[1, 0]])


@pytest.mark.parametrize(("config", "named"), [
    ({"joints": ["swing", "swng"]}, "'swng'"),
    ({"joints": ["knob_ball"]}, "'knob_ball'"),
    ({"joints": "swing"}, "joints"),
])
def test_joint_state_misconfiguration_is_a_load_failure(config: dict[str, Any], named: str,
                                                         envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/JointStatePublisher", **config})
    envs.append(env)
    assert named in failure_of(env)


@pytest.mark.parametrize(("entry", "message"), [
    ({"type": "mjfast/SensorPublisher", "rate": 10},
     "unknown configuration key 'rate' (did you mean 'rate_hz'?); its keys are: ground_truth, imu, "
     "noise, rate_hz, seed, sensors"),
    ({"type": "mjfast/JointStatePublisher", "topics": "x"},  # `topic` is a key since SPEC §19
     "unknown configuration key 'topics' (did you mean 'topic'?); its keys are: joints, rate_hz, "
     "topic"),
    ({"type": "mjfast/ClockPublisher", "rate_hz": 3},
     "unknown configuration key 'rate_hz'; its keys are: every_steps, topic"),
    ({"type": "mjfast/RangefinderLidar", "prefix": "rf", "site": "x"},
     "unknown configuration key 'site'; its keys are: max_angle, min_angle, prefix, range, "
     "rate_hz, topic"),
    ({"type": "mjfast/TfPublisher", "rate_hz": 10, "frame": "x"},
     "unknown configuration key 'frame'; its keys are: bodies, rate_hz, static_topic, topic"),
])
def test_an_unknown_key_is_refused_before_the_plugin_is_made(entry: dict[str, Any],
                                                              message: str,
                                                              envs: list[Any]) -> None:
    # Each shipped plugin declares its keys (config_keys): mjfast refuses the others in the
    # factory phase, with the wording of every unknown key (mjfast.names).
    env = make_env(entry)
    envs.append(env)
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None
    assert (info.failure.phase, info.failure.message) == ("factory", "ConfigError: " + message)


# -- ClockPublisher ------------------------------------------------------------------------------


def test_clock_every_step_on_slash_clock(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/ClockPublisher"})
    envs.append(env)
    received = recorder(env, "/clock")
    env.step(5)
    assert [r["message"]["time"] for r in received] == [r["now"] for r in received]
    assert len(received) == 5


def test_clock_every_n_steps_restarts_at_reset(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/ClockPublisher", "every_steps": 3, "topic": "tick"})
    envs.append(env)
    received = recorder(env, f"{NS}/ClockPublisher/tick")
    env.step(7)
    env.reset()
    env.step(3)
    assert [r["message"]["time"] for r in received] == pytest.approx(
        [3 * TIMESTEP, 6 * TIMESTEP, 3 * TIMESTEP], abs=1e-12)


@pytest.mark.parametrize(("config", "named"), [
    ({"every_steps": 0}, "every_steps"), ({"every_steps": 1.5}, "every_steps"),
    ({"topic": ""}, "topic")])
def test_clock_misconfiguration_is_a_load_failure(config: dict[str, Any], named: str,
                                                  envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/ClockPublisher", **config})
    envs.append(env)
    assert named in failure_of(env)


# -- RangefinderLidar ----------------------------------------------------------------------------


def test_rangefinders_in_number_order_with_misses_as_inf(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/RangefinderLidar", "prefix": "rf", "rate_hz": 10,
                    "min_angle": 0.0, "max_angle": 1.5})
    envs.append(env)
    received = recorder(env, f"{NS}/RangefinderLidar/scan", "sensordata")
    env.step(100)
    assert len(received) == 2
    model = env.model
    message = received[-1]["message"]
    ranges = message["ranges"]
    assert ranges.dtype == np.float32
    # rf-0 faces the wall at x=2 (inner face 1.95), rf-1 the wall at y=3 (2.95), rf-2 looks up
    # at nothing (-1: inf), rf-3 down at the floor (1.0).
    np.testing.assert_allclose(ranges, [1.95, 2.95, math.inf, 1.0], rtol=1e-6)
    readings = [received[-1]["sensordata"][model.sensor(f"rf-{i}").adr[0]] for i in range(4)]
    assert readings[2] == -1
    np.testing.assert_array_equal(ranges[[0, 1, 3]], np.float32(readings)[[0, 1, 3]])
    assert message["angle_min"] == 0.0 and message["angle_max"] == 1.5
    assert message["angle_increment"] == pytest.approx(0.5)
    assert_multiples([r["message"]["time"] for r in received], 0.1)


def test_rangefinder_range_limits(envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/RangefinderLidar", "prefix": "rf",
                    "range": {"min": 1.5, "max": 2.5}})
    envs.append(env)
    env.step(50)
    ranges = env.bus.latest(f"{NS}/RangefinderLidar/scan")["ranges"]
    np.testing.assert_allclose(ranges, [1.95, math.inf, math.inf, -math.inf], rtol=1e-6)


@pytest.mark.parametrize(("config", "named"), [
    ({}, "prefix"), ({"prefix": "lidar"}, "'lidar-<i>'"),
    ({"prefix": "rf", "range": {"min": 2, "max": 1}}, "range.max"),
])
def test_rangefinder_misconfiguration_is_a_load_failure(config: dict[str, Any], named: str,
                                                        envs: list[Any]) -> None:
    env = make_env({"type": "mjfast/RangefinderLidar", **config})
    envs.append(env)
    assert named in failure_of(env)


def test_rangefinder_numbers_must_have_no_gap(envs: list[Any]) -> None:
    env = mjfast.MujocoEnv(WORLD.replace('name="rf-1"', 'name="rf-7"'), params={
        "mujoco_server": {"MujocoPlugins": [{"type": "mjfast/RangefinderLidar", "prefix": "rf"}]}})
    envs.append(env)
    assert "missing rf-1" in failure_of(env)


# -- hardening 3: unnamed sensors and names with '/' ----------------------------------------------

# WORLD with two unnamed sensors after the named ones (ids 8 and 9), and a named sensor called
# `sensor_9`... which makes the unnamed sensor 9 unreachable by that name: it is left out.
UNNAMED = WORLD.replace('<rangefinder name="rf-1" site="rf_y"/>',
                        '<rangefinder name="rf-1" site="rf_y"/><jointpos joint="swing"/>'
                        '<jointvel joint="slide"/><clock name="sensor_9"/>')


def make_unnamed_env(**config: Any) -> mjfast.MujocoEnv:
    plugin = {"type": "mjfast/SensorPublisher", **config}
    return mjfast.MujocoEnv(UNNAMED, params={"mujoco_server": {"MujocoPlugins": [plugin]}})


def test_an_unnamed_sensor_is_sensor_and_its_id_in_sensors_noise_and_its_topic(
        envs: list[Any]) -> None:
    env = make_unnamed_env(sensors=["sensor_8", "swing_pos"], noise={"sensor_8": {"std": 0.0,
                                                                                 "bias": 1.0}})
    envs.append(env)
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    env.data.qpos[0] = 0.7
    env.step(5)
    value = env.bus.latest(f"{NS}/SensorPublisher/sensor_8")["value"]
    address = env.model.sensor_adr[8]
    np.testing.assert_array_equal(value, env.data.sensordata[address:address + 1] + 1.0)
    assert env.bus.latest(f"{NS}/SensorPublisher/sensor_8_gt") is not None
    assert env.bus.latest(f"{NS}/SensorPublisher/slide_vel") is None  # not listed


def test_every_sensor_by_default_the_named_one_keeping_its_name(envs: list[Any]) -> None:
    env = make_unnamed_env()
    envs.append(env)
    env.step(5)
    topics = {topic for topic in env.bus.topics() if topic.startswith(f"{NS}/SensorPublisher/")}
    assert f"{NS}/SensorPublisher/sensor_8" in topics
    clock = env.model.sensor("sensor_9").adr[0]
    assert env.model.sensor(9).name == "" and env.model.sensor(10).name == "sensor_9"
    assert env.bus.latest(f"{NS}/SensorPublisher/sensor_9")["value"][0] == \
        env.data.sensordata[clock]


@pytest.mark.parametrize("name", ["sensor_10", "sensor_0", "sensor_08"])
def test_a_synthesised_name_of_no_unnamed_sensor_is_a_load_failure(name: str,
                                                                    envs: list[Any]) -> None:
    env = make_unnamed_env(sensors=[name])
    envs.append(env)
    assert f"no sensor named {name!r}" in failure_of(env)


def test_noise_takes_sensor_names_with_a_slash(envs: list[Any], tmp_path: Any) -> None:
    params = tmp_path / "sensors.yaml"
    params.write_text("mujoco_server:\n  MujocoPlugins:\n    - type: mjfast/SensorPublisher\n"
                      "      sensors: [left/pan_sensor, right/pan_sensor]\n"
                      "      noise:\n        left/pan_sensor: {std: 0.0, bias: 2.0}\n"
                      "        right:\n          pan_sensor: {std: 0.0, bias: -2.0}\n")
    env = mjfast.MujocoEnv(attached_arms_model(), params=params)
    envs.append(env)
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    env.step(5)
    assert env.bus.latest(f"{NS}/SensorPublisher/left/pan_sensor")["value"][0] == 2.0
    assert env.bus.latest(f"{NS}/SensorPublisher/right/pan_sensor")["value"][0] == -2.0
    assert env.bus.latest(f"{NS}/SensorPublisher/left/pan_sensor_gt")["value"][0] == 0.0


def test_joint_state_publisher_lists_an_unnamed_joint_by_its_published_name(
        envs: list[Any]) -> None:
    xml = WORLD.replace('<joint name="slide" type="slide"', '<joint type="slide"').replace(
        '<motor name="slide_motor" joint="slide"/>', "").replace(
        '<jointvel name="slide_vel" joint="slide"/>', "")
    plugin = {"type": "mjfast/JointStatePublisher", "joints": ["joint_1", "swing"]}
    env = mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": [plugin]}})
    envs.append(env)
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    env.step(5)
    assert env.bus.latest(f"{NS}/JointStatePublisher/joint_states")["name"] == ["joint_1", "swing"]


@pytest.mark.parametrize(("plugin", "key", "name"), [
    ("mjfast/SensorPublisher", "sensors", "tip_pos"),
    ("mjfast/JointStatePublisher", "joints", "swing"),
])
def test_a_name_listed_twice_is_a_load_failure(plugin: str, key: str, name: str,
                                              envs: list[Any]) -> None:
    env = make_env({"type": plugin, key: [name, "slide" if key == "joints" else "slide_vel",
                                          name]})
    envs.append(env)
    assert f"{key} lists" in failure_of(env) and f"{name!r} more than once" in failure_of(env)


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ('<rangefinder name="rf-1" site="rf_y"/>',
     '<rangefinder name="rf-1" site="rf_y" data="point"/>',
     "rangefinder 'rf-1' does not output its distance"),
    ('<rangefinder name="rf-1" site="rf_y"/>', '<rangefinder name="rf-1" site="rf_y"/>'
                                               '<rangefinder name="rf-01" site="rf_y"/>',
     "rangefinders 'rf-1' and 'rf-01' have the same number 1"),
])
def test_rangefinder_lidar_refuses_rangefinders_it_would_misread(old: str, new: str,
                                                                 fragment: str,
                                                                 envs: list[Any]) -> None:
    plugin = {"type": "mjfast/RangefinderLidar", "prefix": "rf"}
    env = mjfast.MujocoEnv(WORLD.replace(old, new),
                           params={"mujoco_server": {"MujocoPlugins": [plugin]}})
    envs.append(env)
    assert fragment in failure_of(env)
