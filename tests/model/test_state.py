"""SimState, env.get_state() / env.set_state() and plugin state (SPEC §20, state half)."""

from __future__ import annotations

import pickle
import struct
import threading
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.model.state import decode_value, encode_value

# A scene with contacts (two free bodies falling on a floor and onto an arm), a motor and a
# position servo, and sensors: what the shipped noisy and scheduled plugins read.
SCENE_XML = """
<mujoco model="state_scene">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <site name="lidar_site" pos="0 0 0.3"/>
    <body name="arm" pos="0 0 0.5">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.5"/>
      <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.5"/>
        <geom name="lower" type="capsule" fromto="0 0 0 0.3 0 0" size="0.035"/>
        <site name="tip" pos="0.3 0 0"/>
        <body name="wrist" pos="0.3 0 0">
          <joint name="wrist" type="hinge" axis="1 0 0" damping="0.2"/>
          <geom name="hand" type="box" size="0.03 0.05 0.01"/>
        </body>
      </body>
    </body>
    <body name="box" pos="0.45 0 0.75">
      <freejoint name="box_free"/>
      <geom name="box_geom" type="box" size="0.05 0.05 0.05" mass="0.5"/>
    </body>
    <body name="ball" pos="-0.3 0.1 0.6">
      <freejoint name="ball_free"/>
      <geom name="ball_geom" type="sphere" size="0.06" mass="0.3"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder_motor" joint="shoulder" ctrlrange="-5 5" ctrllimited="true"/>
    <position name="elbow_servo" joint="elbow" kp="20" ctrlrange="-2 2" ctrllimited="true"/>
    <motor name="wrist_motor" joint="wrist" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
  <sensor>
    <jointpos name="shoulder_pos" joint="shoulder"/>
    <accelerometer name="tip_acc" site="tip"/>
    <framepos name="box_pos" objtype="body" objname="box"/>
  </sensor>
</mujoco>
"""


class NoisyDriver(mjfast.MujocoPlugin):
    """A user plugin with state: a seeded generator and a step counter drive the motor."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.rng = np.random.default_rng(11)
        self.calls = 0
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.calls += 1
        data.ctrl[0] = np.sin(0.01 * self.calls) + 0.5 * self.rng.standard_normal()

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        if self.calls % 50 == 0:
            self.node.publish("~calls", {"calls": self.calls, "time": data.time})

    def get_state(self) -> Any:
        return {"rng": self.rng.bit_generator.state, "calls": self.calls}

    def set_state(self, value: Any) -> None:
        rng = np.random.default_rng()
        rng.bit_generator.state = value["rng"]
        self.rng, self.calls = rng, int(value["calls"])


def scene_params(driver: str) -> dict[str, Any]:
    """Every shipped plugin with state, Python and native (a sync and an async lidar), and the
    user's NoisyDriver (type `driver`)."""
    return {"MujocoPlugins": [
        {"type": driver, "name": "driver"},
        {"type": "mjfast/SensorPublisher", "name": "sensors", "rate_hz": 60.0, "seed": 7,
         "noise": {"tip_acc": {"std": 0.1}, "box_pos": {"std": 0.01, "bias": 0.002}}},
        {"type": "mjfast/JointStatePublisher", "name": "joints", "rate_hz": 35.0},
        {"type": "mjfast/ClockPublisher", "name": "clock", "every_steps": 7},
        {"type": "mjfast/HeartbeatPublisher", "name": "heartbeat"},
        {"type": "mjfast/FreeJointStatePublisher", "name": "free", "bodies": ["box"],
         "rate_hz": 45.0},
        {"type": "mjfast/TfPublisher", "name": "tf", "rate_hz": 25.0, "bodies": ["box", "fore"]},
        {"type": "mjfast/PoseHoldPD", "name": "hold", "joints": ["elbow"]},
        {"type": "mjfast/BaseVelocity", "name": "base", "joint": "ball_free", "timeout": 0.3},
        {"type": "mjfast/Lidar", "name": "lidar", "site": "lidar_site", "range": {"max": 3.0},
         "horizontal": {"samples": 32}, "rate_hz": 40.0, "noise_std": 0.01, "seed": 3},
        {"type": "mjfast/Lidar", "name": "lidar3d", "site": "lidar_site",
         "range": {"min": 0.05, "max": 3.0}, "horizontal": {"samples": 16},
         "vertical": {"samples": 3, "min_angle": -0.3, "max_angle": 0.3}, "rate_hz": 30.0,
         "noise_std": 0.02, "seed": 5, "async": True, "visualize": True},
        {"type": "mjfast/PDController", "name": "pd", "joints": ["wrist"],
         "gains": {"kp": 5.0, "kd": 0.5}},
        {"type": "mjfast/ExternalWrench", "name": "push", "body": "box", "force": [0, 2.0, 0],
         "start": 0.28, "duration": 0.3, "ramp_down": 0.1},
    ]}


class Run:
    """Steps an env one step at a time with the same commands, recording what a step gives:
    qpos, qvel, sensordata and every bus message, as bytes to compare bit for bit."""

    def __init__(self, env: mjfast.MujocoEnv) -> None:
        self.env = env
        self.messages: list[tuple[str, Any]] = []
        publish = env.bus.publish

        def recorded(topic: str, message: Any) -> None:
            self.messages.append((topic, message))
            publish(topic, message)

        env.bus.publish = recorded  # type: ignore[method-assign]

    def steps(self, count: int) -> bytes:
        env, record = self.env, []
        self.messages.clear()
        for _ in range(count):
            k = env.step_count
            # The same command at the same step of every run: a push on the ball.
            ball = env.model.body("ball").id
            env.control.write(xfrc_applied=np.outer(np.arange(env.model.nbody) == ball,
                                                    [np.sin(0.05 * k), 0, 0, 0, 0, 0]))
            env.step(1)
            record.append((env.step_count, env.data.qpos.copy(), env.data.qvel.copy(),
                           env.data.sensordata.copy()))
        return encode_value([record, self.messages])


@pytest.fixture
def scene(register: Callable[..., str], make_env: Callable[..., mjfast.MujocoEnv]
          ) -> Callable[[], mjfast.MujocoEnv]:
    driver = register(NoisyDriver)

    def make() -> mjfast.MujocoEnv:
        env = make_env(SCENE_XML, params=scene_params(driver))
        failed = [p for p in env.plugins if p.state is not mjfast.PluginState.ACTIVE]
        assert not failed, failed
        return env

    return make


def prepare(env: mjfast.MujocoEnv) -> None:
    """N steps with a moved PD target and a base-velocity command in force at the end."""
    run = Run(env)
    env.bus.publish("/mujoco_server/hold/target", {"elbow": 0.7})
    with env.acquire_plugin("pd") as pd:
        pd.call("set_targets", "[0.4]")
    run.steps(120)
    env.bus.publish("/mujoco_server/base/cmd_vel", {"vx": 0.3, "yaw_rate": 1.0})
    run.steps(30)


def test_restored_runs_repeat_the_original_bit_for_bit(scene: Callable[[], mjfast.MujocoEnv]
                                                       ) -> None:
    env = scene()
    prepare(env)
    state = env.get_state()
    assert state.step_count == 150
    assert set(state.plugins) == {"driver", "sensors", "joints", "clock", "heartbeat", "free",
                                  "tf", "hold", "base", "lidar", "lidar3d", "pd", "push"}
    assert state.plugins["push"] == b"\x01"  # native plugins' states are their bytes
    assert np.frombuffer(state.plugins["pd"], np.float64).tolist() == [0.4]
    original = Run(env).steps(400)

    env.set_state(state)
    assert env.step_count == 150 and env.data.time == state.time
    assert env.get_state() == state
    assert Run(env).steps(400) == original

    # Into fresh envs of the same model and parameters, directly, through bytes and pickle.
    for restored in (state, mjfast.SimState.from_bytes(state.to_bytes()),
                     pickle.loads(pickle.dumps(state))):
        assert restored == state
        fresh = scene()
        fresh.set_state(restored)
        assert fresh.get_state() == state
        assert Run(fresh).steps(400) == original


def test_state_fields(scene: Callable[[], mjfast.MujocoEnv]) -> None:
    env = scene()
    env.step(10)
    state = env.get_state()
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    expected = np.empty(mujoco.mj_stateSize(env.model, spec))
    mujoco.mj_getState(env.model, env.data, expected, spec)
    assert state.physics.dtype == np.float64 and not state.physics.flags.writeable
    assert state.physics.tobytes() == expected.tobytes()
    assert state.time == env.data.time and state.step_count == 10
    assert state.model_signature == env.get_state().model_signature
    assert "state_scene" in state.model_description
    assert state.plugins["clock"] == {"countdown": 4}  # every 7 steps: 10 = 7 + 3
    assert state.plugin_types["sensors"] == "mjfast/SensorPublisher"
    with pytest.raises(AttributeError, match="immutable"):
        state.step_count = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        state.physics[0] = 1.0
    # `plugins` is a copy each time: changing it changes nothing.
    state.plugins["clock"]["countdown"] = 1
    assert state.plugins["clock"] == {"countdown": 4}
    with pytest.raises(TypeError, match="get_state"):
        mjfast.SimState()


def test_equality_is_bit_for_bit(env: mjfast.MujocoEnv) -> None:
    env.step(3)
    first = env.get_state()
    assert first == env.get_state() and hash(first) == hash(env.get_state())
    env.step(1)
    assert first != env.get_state()
    env.set_state(first)
    assert first == env.get_state()


def test_commands_staged_before_set_state_are_dropped(env: mjfast.MujocoEnv) -> None:
    env.control.write(ctrl=np.full(env.model.nu, 0.25))
    env.step(1)
    state = env.get_state()
    env.control.write(ctrl=np.full(env.model.nu, -0.5))  # staged, not applied yet
    env.set_state(state)
    env.step(1)
    assert env.data.ctrl.tolist() == [0.25] * env.model.nu


def test_a_state_of_another_model_is_refused_naming_both(
        env: mjfast.MujocoEnv, make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    other = make_env(SCENE_XML)
    other.step(5)
    state = other.get_state()
    before = env.get_state()
    with pytest.raises(ValueError, match=r"'state_scene'.*'arm7'"):
        env.set_state(state)
    assert env.get_state() == before


def test_a_state_moves_between_models_that_differ_only_in_values(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    source = make_env(SCENE_XML)
    source.step(40)
    state = source.get_state()
    heavier = mujoco.MjModel.from_xml_string(SCENE_XML)
    heavier.body_mass[heavier.body("box").id] *= 3.0
    heavier.geom_friction[:, 0] = 0.4
    target = make_env(heavier)
    assert target.get_state().model_signature == state.model_signature
    target.set_state(state)
    assert target.get_state().physics.tobytes() == state.physics.tobytes()
    target.step(10)  # and it runs on with its own masses


def with_physics_value(state: mjfast.SimState, index: int, value: float) -> mjfast.SimState:
    """`state` with physics[index] = value, made as a user would: through its bytes."""
    data = state.to_bytes()
    start = data.index(state.physics.tobytes()) + 8 * index
    return mjfast.SimState.from_bytes(data[:start] + struct.pack("<d", value) + data[start + 8:])


@pytest.mark.parametrize(("index", "value", "named"), [
    (0, float("nan"), "time is nan"),
    (0, float("inf"), "time is inf"),
    (1 + 2, float("-inf"), r"qpos\[2\] is -inf"),
    (1 + 17 + 3, float("nan"), r"qvel\[3\] is nan"),  # after time and 17 qpos values
])
def test_a_state_that_is_not_finite_is_refused_and_changes_nothing(
        make_env: Callable[..., mjfast.MujocoEnv], index: int, value: float, named: str) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [
        {"type": "mjfast/JointStatePublisher", "name": "joints", "rate_hz": 500}]})
    env.step(20)
    bad = with_physics_value(env.get_state(), index, value)
    env.step(5)
    before = env.get_state()
    with pytest.raises(ValueError, match=f"{named}, expected a finite number"):
        env.set_state(bad)
    assert env.get_state() == before
    env.step(5)  # and the plugins step on
    assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins)


def test_type_is_checked(env: mjfast.MujocoEnv) -> None:
    with pytest.raises(TypeError, match="SimState"):
        env.set_state(env.get_state().to_bytes())  # type: ignore[arg-type]


class Refusing(mjfast.MujocoPlugin):
    """Has state `value`; refuses to be set to "refuse"."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.value: Any = 0
        return True

    def get_state(self) -> Any:
        return self.value

    def set_state(self, value: Any) -> None:
        if value == "refuse":
            raise ValueError("not that one")
        self.value = value


def test_a_failed_set_state_changes_nothing(register: Callable[..., str],
                                            make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    kind = register(Refusing)
    env = make_env(SCENE_XML, params={"MujocoPlugins": [
        {"type": kind, "name": "first"}, {"type": kind, "name": "second"},
        {"type": "mjfast/ClockPublisher", "name": "clock", "every_steps": 5}]})
    with env.acquire_plugin("second") as second:
        second.value = "refuse"
    env.step(30)
    bad = env.get_state()
    with env.acquire_plugin("first") as first:
        first.value = [1, 2.5]
    with env.acquire_plugin("second") as second:
        second.value = "fine"
    env.step(12)
    env.control.write(ctrl=[0.5, 0.1, 0.2])
    before = env.get_state()
    qpos = env.data.qpos.copy()
    with pytest.raises(mjfast.PluginError, match=r"second.*set_state.*not that one") as raised:
        env.set_state(bad)
    assert raised.value.plugin_name == "second" and raised.value.callback == "set_state"
    assert isinstance(raised.value.__cause__, ValueError)
    after = env.get_state()
    assert after == before and after.plugins["first"] == [1, 2.5]
    assert env.data.qpos.tobytes() == qpos.tobytes() and env.step_count == 42
    assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins)  # not failed for it


def test_a_native_plugin_refusing_its_state_changes_nothing(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [
        {"type": "mjfast/ClockPublisher", "name": "clock", "every_steps": 5},
        {"type": "mjfast/PDController", "name": "pd", "joints": ["wrist"],
         "gains": {"kp": 5.0, "kd": 0.5}}]})
    env.step(3)
    good = env.get_state()
    entries = tuple((name, kind, encode_value(b"\x00\x01\x02") if name == "pd" else value)
                    for name, kind, value in good._plugins)
    bad = mjfast.SimState._make(good.physics, 1, good.model_signature, good.model_description,
                                entries)
    env.step(4)
    before = env.get_state()
    with pytest.raises(mjfast.PluginError, match=r"'pd'.*set_state.*got 3") as raised:
        env.set_state(bad)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert env.get_state() == before
    not_bytes = tuple((name, kind, encode_value("text") if name == "pd" else value)
                      for name, kind, value in good._plugins)
    with pytest.raises(mjfast.PluginError, match="must be bytes"):
        env.set_state(mjfast.SimState._make(good.physics, 1, good.model_signature,
                                            good.model_description, not_bytes))
    assert env.get_state() == before


def test_plugins_must_match(register: Callable[..., str],
                            make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    kind = register(Refusing)
    with_plugin = make_env(SCENE_XML, params={"MujocoPlugins": [{"type": kind, "name": "a"}]})
    bare = make_env(SCENE_XML)
    with pytest.raises(ValueError, match=r"plugin 'a'.*does not have"):
        bare.set_state(with_plugin.get_state())
    with pytest.raises(ValueError, match="nothing for plugin 'a'"):
        with_plugin.set_state(bare.get_state())


class Unencodable(Refusing):
    def get_state(self) -> Any:
        return {1, 2}


def test_a_value_without_encoding_fails_get_state(register: Callable[..., str],
                                                  make_env: Callable[..., mjfast.MujocoEnv]
                                                  ) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [{"type": register(Unencodable)}]})
    with pytest.raises(mjfast.PluginError, match=r"get_state.*set has no encoding"):
        env.get_state()


class HalfStateful(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True

    def get_state(self) -> Any:
        return 1


def test_a_plugin_with_get_state_but_no_set_state_fails_to_load(
        register: Callable[..., str], make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [{"type": register(HalfStateful)}]})
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None
    assert info.failure.phase == "factory" and "not set_state" in info.failure.message


class CallsBack(mjfast.MujocoPlugin):
    """Calls env.get_state()/set_state() from the callback named in its config (set_state with
    `spare`, a state of the same model)."""

    spare: mjfast.SimState | None = None

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.errors: list[BaseException] = []
        if self.config.get("where") == "load":
            self.call()
        return True

    def call(self) -> None:
        try:
            state = self.env.get_state()
        except mjfast.LogicError as error:
            self.errors.append(error)
            state = self.spare
        try:
            self.env.set_state(state)  # type: ignore[arg-type]
        except mjfast.LogicError as error:
            self.errors.append(error)

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        if self.config.get("where") == "control" and not self.errors:
            self.call()

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        if self.config.get("where") == "last_stage" and not self.errors:
            self.call()

    def reset(self) -> None:
        if self.config.get("where") == "reset":
            self.call()


@pytest.mark.parametrize("where", ["load", "control", "last_stage", "reset"])
def test_calls_from_plugin_callbacks_are_refused(where: str, register: Callable[..., str],
                                                 make_env: Callable[..., mjfast.MujocoEnv]
                                                 ) -> None:
    CallsBack.spare = make_env(SCENE_XML).get_state()
    env = make_env(SCENE_XML, params={"MujocoPlugins": [
        {"type": register(CallsBack), "name": "caller", "where": where}]})
    env.step(2)
    env.reset()
    with env.acquire_plugin("caller") as plugin:
        errors = list(plugin.errors)
    assert [str(e).split(" called")[0] for e in errors] == ["get_state()", "set_state()"]
    assert all("inside a plugin callback" in str(e) for e in errors)


def test_refused_inside_an_acquire_plugin_block(register: Callable[..., str],
                                                make_env: Callable[..., mjfast.MujocoEnv]
                                                ) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [{"type": register(Refusing)}]})
    with env.acquire_plugin("Refusing"), pytest.raises(mjfast.LogicError, match="acquire_plugin"):
        env.get_state()


def test_closed_env_refuses(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(SCENE_XML)
    state = env.get_state()
    env.close()
    with pytest.raises(mjfast.LogicError, match="closed"):
        env.get_state()
    with pytest.raises(mjfast.LogicError, match="closed"):
        env.set_state(state)


def test_while_started_states_are_taken_and_set_at_step_boundaries(
        scene: Callable[[], mjfast.MujocoEnv]) -> None:
    env = scene()
    env.start(None)
    try:
        taken = env.get_state()
        restored_from = taken
        env.set_state(restored_from)
        later = env.get_state()
        seen: list[mjfast.SimState] = []
        thread = threading.Thread(target=lambda: seen.append(env.get_state()))
        thread.start()
        thread.join(10)
        assert seen and env.running
    finally:
        env.stop()
    # Each state is exactly a step boundary of a deterministic run: a fresh env stepped to the
    # same count from the start, or from the restored state, has the same state, bit for bit.
    reference = scene()
    reference.step(taken.step_count)
    assert reference.get_state() == taken
    reference.set_state(restored_from)
    reference.step(later.step_count - restored_from.step_count)
    assert reference.get_state() == later
    assert seen[0].step_count >= later.step_count


# -- bytes --------------------------------------------------------------------------------------

def test_bytes_round_trip_every_value_kind() -> None:
    value = {"none": None, "flags": (True, False), "ints": [0, -1, 2**100, -(2**70)],
             "floats": [0.5, -0.0, float("inf")], "text": "żółw", "raw": b"\x00\xff",
             "array": np.arange(6, dtype=np.int32).reshape(2, 3), "empty": np.zeros((0, 3)),
             "scalar": np.float32(1.5), 3: "int key", ("a", 1): "tuple key"}
    back = decode_value(encode_value(value))
    assert encode_value(back) == encode_value(value)
    assert type(back["flags"]) is tuple and back["array"].dtype == np.int32
    assert back["array"].shape == (2, 3) and type(back["scalar"]) is np.float32
    nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000123))[0]
    assert encode_value(decode_value(encode_value(nan))) == encode_value(nan)


@pytest.mark.parametrize("value", [{1, 2}, object(), np.array(["a"]), np.array([None])])
def test_values_without_an_encoding(value: Any) -> None:
    with pytest.raises(TypeError, match="encoding"):
        encode_value(value)


def test_from_bytes_refuses_bad_bytes(register: Callable[..., str],
                                      make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(SCENE_XML, params={"MujocoPlugins": [{"type": register(Refusing)}]})
    with env.acquire_plugin("Refusing") as plugin:
        plugin.value = [1.0, "x"]
    good = env.get_state().to_bytes()
    cases = {
        b"": "magic",
        b"NOTSTATE" + good[8:]: "not a SimState",
        good[:8] + struct.pack("<I", 99) + good[12:]: "format version 99",
        good[:12] + struct.pack("<I", 1) + good[16:]: "physics spec",
        good[:-3]: "plugin 'Refusing'",
        good + b"\x00": "left over",
        good[:-1] + b"\xff": "does not decode",
    }
    for data, message in cases.items():
        with pytest.raises(ValueError, match=message):
            mjfast.SimState.from_bytes(data)
    with pytest.raises(TypeError, match="bytes"):
        mjfast.SimState.from_bytes("text")  # type: ignore[arg-type]
    assert mjfast.SimState.from_bytes(bytearray(good)) == env.get_state()


@pytest.mark.parametrize("data, message", [
    (b"x", "unknown value tag"),
    (b"l" + struct.pack("<Q", 2**40), "does not fit"),
    (b"a\x03|O8" + struct.pack("<I", 0), "dtype"),
    (b"s" + struct.pack("<Q", 2) + b"\xff\xfe", "UTF-8"),
    ((b"l" + struct.pack("<Q", 1)) * 70 + b"N", "nested"),
    (b"d" + struct.pack("<Q", 1) + b"l" + struct.pack("<Q", 0) + b"N", "not hashable"),
    (b"NN", "left over"),
])
def test_decode_refuses_malformed_values(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_value(data)
