"""Tests of `env.control` (SPEC §7): read() through update_read plugins, write() through
update_write plugins and its validation, pre_step and on_reset, reset clearing staged commands,
consistency of snapshots under an unpaced physics thread, concurrent control threads, reload."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast._core_loader import _core
from support import (
    HOME_QPOS,
    JOURNAL,
    N_ARM_JOINTS,
    TESTS_DIR,
    TIMESTEP,
    arm_xml,
    plugins_param,
    run_python,
    wait_for,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


JOIN_TIMEOUT_S = 60.0

# A clock made of physics: with no gravity, damping or contact, the "clock" slide joint moves at
# exactly 1 m/s, so qpos and time accumulate the same timestep additions and stay bitwise equal.
# The "cart" slide has a motor of gear 2, so qfrc_actuator[1] == 2 * ctrl[0] within one step.
# Sensors are computed before the step's integration: both read the step's start time.
CLOCK_DT = 0.001
CLOCK_XML = f"""
<mujoco model="clock">
  <option timestep="{CLOCK_DT}" gravity="0 0 0"/>
  <worldbody>
    <body name="clock"><joint name="clock" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.1" mass="1" contype="0" conaffinity="0"/></body>
    <body name="cart" pos="0 1 0"><joint name="cart" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.1" mass="1" contype="0" conaffinity="0"/></body>
  </worldbody>
  <actuator><motor name="push" joint="cart" gear="2"/></actuator>
  <sensor><clock name="clock"/><jointpos name="clock_pos" joint="clock"/></sensor>
  <keyframe><key name="go" qvel="1 0"/></keyframe>
</mujoco>
"""


def clock_env(make_env, **kwargs) -> mjfast.MujocoEnv:
    env = make_env(CLOCK_XML, **kwargs)
    env.reset("go")
    return env


def check_clock_state(state) -> None:
    """Every relation that holds within one completed step of the clock model."""
    assert state.qvel[0] == 1.0
    assert state.qpos[0] == state.time, (state.qpos[0], state.time)
    assert state.sensordata[0] == state.sensordata[1], state.sensordata
    assert abs(state.sensordata[0] - max(state.time - CLOCK_DT, 0.0)) < 1e-9, (state.sensordata,
                                                                             state.time)
    assert state.qfrc_actuator[1] == 2.0 * state.ctrl[0], (state.qfrc_actuator, state.ctrl)


class ControlRecorder(mjfast.ControlPlugin):
    """Records its calls in the journal and on itself; overrides nothing per step."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []
        JOURNAL.instances.append(self)

    def init(self, node, model, data):
        return True

    def cleanup(self):
        pass


class AddOne(ControlRecorder):
    def update_read(self, model, data):
        data.sensordata[0] += 1.0
        data.qpos[0] += 10.0


class DoubleSensor(ControlRecorder):
    def update_read(self, model, data):
        self.seen.append((float(data.qpos[0]), float(data.sensordata[0])))
        data.sensordata[0] *= 2.0


class HalveCtrl(ControlRecorder):
    def update_write(self, model, data):
        self.seen.append(data.ctrl.copy())
        data.ctrl[:] *= 0.5
        data.qfrc_applied[0] = 3.0


class NegateFirst(ControlRecorder):
    def update_write(self, model, data):
        self.seen.append(data.ctrl.copy())
        data.ctrl[0] = -data.ctrl[0]


class PassThrough(ControlRecorder):
    """Has every control-side and physics-side callback, so each path takes the GIL."""

    def update_read(self, model, data):
        pass

    def update_write(self, model, data):
        pass

    def pre_step(self, data):
        pass


class PreStep(ControlRecorder):
    def pre_step(self, data):
        self.seen.append((float(data.time), data.ctrl.copy(), data is self.env.data))
        JOURNAL.add(self.name, "pre_step")


class OverrideCtrl(ControlRecorder):
    def pre_step(self, data):
        data.ctrl[0] = -0.5


class ResetRecorder(ControlRecorder):
    def on_reset(self, data):
        self.seen.append((float(data.time), data.qpos.copy(), data.ctrl.copy(),
                          data is self.env.data))
        JOURNAL.add(self.name, "on_reset")


def instance(name: str) -> ControlRecorder:
    (found,) = JOURNAL.instances_named(name)
    return found


# -- read -------------------------------------------------------------------------------------


def test_read_returns_owned_copies_of_the_completed_step(env):
    env.reset("home")
    env.step(3)
    state = env.control.read()
    assert state.time == pytest.approx(3 * TIMESTEP)
    for field, expected in (("qpos", env.data.qpos), ("qvel", env.data.qvel),
                            ("act", env.data.act), ("qfrc_actuator", env.data.qfrc_actuator),
                            ("sensordata", env.data.sensordata), ("ctrl", env.data.ctrl)):
        array = getattr(state, field)
        assert array.dtype == np.float64
        assert not np.shares_memory(array, expected)
        np.testing.assert_array_equal(array, expected, err_msg=field)
    state.qpos[:] = 99.0  # the caller's own: the simulation does not change
    assert env.data.qpos[0] == pytest.approx(env.control.read().qpos[0])
    assert env.data.qpos[0] != 99.0


def test_update_read_changes_are_chained_in_load_order(make_env, arm, register):
    add, double = register(AddOne), register(DoubleSensor)
    env = make_env(arm, params=plugins_param({"name": "add", "type": add},
                                             {"name": "double", "type": double}))
    env.reset("home")
    state = env.control.read()
    # The second saw the first's changes; read() returns what both left.
    assert instance("double").seen == [(pytest.approx(10.0 + HOME_QPOS[0]),
                                        pytest.approx(1.0 + HOME_QPOS[0]))]
    assert state.sensordata[0] == pytest.approx(2.0 * (1.0 + HOME_QPOS[0]))
    assert state.qpos[0] == pytest.approx(10.0 + HOME_QPOS[0])
    # Each read starts again from the snapshot: the changes do not accumulate, nor reach the
    # simulation.
    again = env.control.read()
    assert again.sensordata[0] == pytest.approx(state.sensordata[0])
    assert env.data.qpos[0] == pytest.approx(HOME_QPOS[0])
    assert env.data.sensordata[0] == pytest.approx(HOME_QPOS[0])


# -- write ------------------------------------------------------------------------------------


def test_write_is_applied_before_the_next_step(env):
    ctrl = np.linspace(-0.6, 0.6, N_ARM_JOINTS)
    qfrc = np.arange(env.model.nv, dtype=float)
    xfrc = np.arange(6 * env.model.nbody, dtype=float).reshape(env.model.nbody, 6)
    env.control.write(ctrl=ctrl, qfrc_applied=qfrc, xfrc_applied=xfrc)
    assert not np.any(env.data.ctrl)  # staged, not applied yet
    env.step()
    np.testing.assert_array_equal(env.data.ctrl, ctrl)
    np.testing.assert_array_equal(env.data.qfrc_applied, qfrc)
    np.testing.assert_array_equal(env.data.xfrc_applied, xfrc)
    np.testing.assert_array_equal(env.control.read().ctrl, ctrl)


def test_update_write_rewrites_commands_before_they_reach_the_simulation(make_env, arm,
                                                                         register):
    halve, negate = register(HalveCtrl), register(NegateFirst)
    env = make_env(arm, params=plugins_param({"name": "halve", "type": halve},
                                             {"name": "negate", "type": negate}))
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.8))
    np.testing.assert_allclose(instance("halve").seen[0], 0.8)  # the staged command
    np.testing.assert_allclose(instance("negate").seen[0], 0.4)  # after the first plugin
    env.step()
    expected = np.full(N_ARM_JOINTS, 0.4)
    expected[0] = -0.4
    np.testing.assert_allclose(env.data.ctrl, expected)
    assert env.data.qfrc_applied[0] == 3.0
    np.testing.assert_allclose(env.control.read().ctrl, expected)


def test_an_entry_never_written_keeps_its_last_value(env):
    a = np.full(N_ARM_JOINTS, 0.25)
    env.control.write(ctrl=a)
    env.step()
    b = np.full(env.model.nv, 0.5)
    env.control.write(qfrc_applied=b)
    env.step(2)
    np.testing.assert_array_equal(env.data.ctrl, a)
    np.testing.assert_array_equal(env.data.qfrc_applied, b)
    assert not np.any(env.data.xfrc_applied)


@pytest.mark.parametrize("with_write_plugin", [False, True])
def test_a_field_never_written_through_control_is_left_to_its_owner(make_env, arm, register,
                                                                   with_write_plugin):
    # xfrc_applied set directly on the live data (a user between steps) is not overwritten by a
    # write() of another field, with or without update_write plugins.
    params = plugins_param({"name": "pass", "type": register(PassThrough)}) if (
        with_write_plugin) else None
    env = make_env(arm, params=params)
    env.step()
    env.data.xfrc_applied[1] = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0]
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.1))
    env.step()
    np.testing.assert_array_equal(env.data.xfrc_applied[1], [1.0, 2.0, 3.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(env.data.ctrl, 0.1)


def _bad_values(nu: int, nv: int, nbody: int) -> list[tuple[str, object, str]]:
    shapes = {"ctrl": f"({nu},)", "qfrc_applied": f"({nv},)", "xfrc_applied": f"({nbody}, 6)"}
    wrong_shape = {"ctrl": np.zeros(nu + 1), "qfrc_applied": np.zeros((1, nv)),
                   "xfrc_applied": np.zeros(6 * nbody)}
    good = {"ctrl": np.zeros(nu), "qfrc_applied": np.zeros(nv),
            "xfrc_applied": np.zeros((nbody, 6))}
    cases = []
    for field in ("ctrl", "qfrc_applied", "xfrc_applied"):
        cases.append((field, wrong_shape[field], shapes[field]))
        cases.append((field, [], shapes[field]))
        for bad in (np.nan, np.inf, -np.inf):
            value = good[field].copy()
            value.flat[-1] = bad
            cases.append((field, value, "finite"))
        for wrong_type in ("abc", object(), {"a": 1.0}):
            cases.append((field, wrong_type, shapes[field]))
    return cases


def test_write_validation_names_field_and_shape_and_stages_nothing(env):
    model = env.model
    staged = np.full(N_ARM_JOINTS, 0.3)
    env.control.write(ctrl=staged)
    env.step()
    for field, bad, expected in _bad_values(model.nu, model.nv, model.nbody):
        commands = {"ctrl": np.full(N_ARM_JOINTS, 0.9), field: bad}
        with pytest.raises(ValueError, match=field) as raised:
            env.control.write(**commands)
        assert expected in str(raised.value), (field, bad, str(raised.value))
        env.step()
        # Nothing staged, not even the call's valid fields.
        np.testing.assert_array_equal(env.data.ctrl, staged, err_msg=f"{field}={bad!r}")
        assert not np.any(env.data.qfrc_applied)
        assert not np.any(env.data.xfrc_applied)


def test_write_accepts_lists_and_other_dtypes(env):
    env.control.write(ctrl=[0.5] * N_ARM_JOINTS, qfrc_applied=np.ones(env.model.nv, np.float32))
    env.step()
    np.testing.assert_allclose(env.data.ctrl, 0.5)
    np.testing.assert_allclose(env.data.qfrc_applied, 1.0)


# -- pre_step ---------------------------------------------------------------------------------


def test_pre_step_sees_live_data_once_per_step_after_the_staged_commands(make_env, arm,
                                                                         register):
    env = make_env(arm, params=plugins_param({"name": "pre", "type": register(PreStep)}))
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.3))
    env.step(3)
    env.step(2)
    seen = instance("pre").seen
    assert [t for t, _, _ in seen] == pytest.approx([i * TIMESTEP for i in range(5)])
    assert all(live for _, _, live in seen)
    np.testing.assert_allclose(seen[0][1], 0.3)  # the command was applied before pre_step


def test_pre_step_has_the_last_word(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"name": "override", "type": register(OverrideCtrl)}))
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.3))
    env.step()
    assert env.data.ctrl[0] == -0.5
    np.testing.assert_allclose(env.data.ctrl[1:], 0.3)


def test_pre_step_count_matches_steps_of_the_physics_thread(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"name": "pre", "type": register(PreStep)}))
    env.start(None)
    try:
        assert wait_for(lambda: len(instance("pre").seen) > 10)
    finally:
        env.stop()
    steps = env.statistics()["env"]["steps"]
    seen = instance("pre").seen
    assert steps > 10
    assert len(seen) == steps
    times = [t for t, _, _ in seen]
    np.testing.assert_allclose(np.diff(times), TIMESTEP, rtol=1e-6)


# -- snapshot consistency ---------------------------------------------------------------------


def test_snapshot_is_never_torn_under_an_unpaced_physics_thread(make_env):
    env = clock_env(make_env)
    env.control.write(ctrl=[3.0])
    env.start(None)
    try:
        times = set()
        reads = 0
        # At least 20000 reads, and enough distinct steps among them that the physics thread
        # really ran meanwhile (on a loaded machine the two threads may take turns on one core).
        deadline = time.monotonic() + 20.0
        while reads < 20000 or (len(times) < 50 and time.monotonic() < deadline):
            state = env.control.read()
            check_clock_state(state)
            times.add(state.time)
            reads += 1
    finally:
        env.stop()
    assert len(times) >= 50


# -- reset ------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyframe", [None, "home", 0])
def test_reset_drops_staged_commands_and_calls_on_reset_in_load_order(make_env, arm, register,
                                                                      keyframe):
    recorder = register(ResetRecorder)
    env = make_env(arm, params=plugins_param({"name": "first", "type": recorder},
                                             {"name": "second", "type": recorder}))
    env.step(5)
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.7))
    env.reset(keyframe)
    expected_qpos = np.zeros(N_ARM_JOINTS) if keyframe is None else np.array(HOME_QPOS)
    assert JOURNAL.names("on_reset") == ["first", "second"]
    for name in ("first", "second"):
        ((reset_time, qpos, _ctrl, live),) = instance(name).seen
        assert reset_time == 0.0 and live
        np.testing.assert_allclose(qpos, expected_qpos)
    state = env.control.read()  # the snapshot is the reset state, not the pre-reset one
    assert state.time == 0.0
    np.testing.assert_allclose(state.qpos, expected_qpos)
    env.step()
    np.testing.assert_array_equal(env.data.ctrl, 0.0)  # the staged 0.7 was dropped
    # Commands written after the reset work as usual.
    env.control.write(ctrl=np.full(N_ARM_JOINTS, -0.2))
    env.step()
    np.testing.assert_allclose(env.data.ctrl, -0.2)


def test_reset_to_a_missing_keyframe_changes_nothing(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"name": "r", "type": register(ResetRecorder)}))
    env.step(5)
    before = env.data.qpos.copy(), float(env.data.time)
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.7))
    with pytest.raises(KeyError, match="nope"):
        env.reset("nope")
    with pytest.raises(KeyError, match="7"):
        env.reset(7)
    np.testing.assert_array_equal(env.data.qpos, before[0])
    assert env.data.time == before[1]
    assert JOURNAL.names("on_reset") == []
    assert env.control.read().time == pytest.approx(before[1])
    env.step()
    np.testing.assert_allclose(env.data.ctrl, 0.7)  # still staged


def test_reset_while_a_control_loop_runs(make_env):
    env = clock_env(make_env)
    env.start(None)
    try:
        for _ in range(20):
            env.control.write(ctrl=[1.0])
            env.reset("go")
            state = env.control.read()
            check_clock_state(state)
    finally:
        env.stop()


# -- concurrency ------------------------------------------------------------------------------


def _run_threads(*targets) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:  # reported by the test, not lost in the thread
                errors.append(error)
        return run

    threads = [threading.Thread(target=guarded(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} control thread(s) did not finish: deadlock?"
    return errors


@pytest.mark.parametrize("with_plugins", [False, True])
def test_writer_reader_and_physics_threads_agree(make_env, register, with_plugins):
    params = plugins_param({"name": "pass", "type": register(PassThrough)}) if (
        with_plugins) else None
    env = clock_env(make_env, params=params)
    cycles = 3000
    reader_stats = {"reads": 0, "times": set()}

    def writer():
        for k in range(1, cycles + 1):
            env.control.write(ctrl=[float(k)])

    def reader():
        last_ctrl = 0.0
        for _ in range(cycles):
            state = env.control.read()
            check_clock_state(state)
            # Commands arrive in the order they were written: ctrl never goes back.
            assert state.ctrl[0] >= last_ctrl, (state.ctrl[0], last_ctrl)
            last_ctrl = state.ctrl[0]
            reader_stats["reads"] += 1
            reader_stats["times"].add(state.time)

    env.start(None)
    try:
        errors = _run_threads(writer, reader)
    finally:
        env.stop()
    assert not errors, errors
    assert reader_stats["reads"] == cycles
    env.step()  # the last command is the one in force
    assert env.data.ctrl[0] == float(cycles)


def test_reload_while_a_control_loop_runs(make_env, arm_path):
    env = make_env(arm_path)
    stop = threading.Event()
    shapes: list[tuple[int, ...]] = []
    races = []

    def loop():
        while not stop.is_set():
            state = env.control.read()
            shapes.append(state.qpos.shape)
            try:
                env.control.write(ctrl=np.zeros_like(state.ctrl),
                                  qfrc_applied=np.zeros_like(state.qvel))
            except ValueError as error:  # sized by a read from before the reload
                races.append(error)
            time.sleep(0.0005)  # a control loop's period (leaves the core to the physics thread)

    env.start(None)
    errors: list[BaseException] = []

    def guarded():
        try:
            loop()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: len(shapes) >= 50)  # the loop runs before the reload
        extra = ('<body name="slider" pos="0 1 0"><joint name="slide" type="slide"/>'
                 '<geom type="sphere" size="0.05" contype="0" conaffinity="0"/></body>')
        arm_path.write_text(arm_xml(extra))
        env.reload()
        reads_at_reload = len(shapes)
        wait_for(lambda: len(shapes) >= reads_at_reload + 50, timeout=10.0)
    finally:
        stop.set()
        thread.join(JOIN_TIMEOUT_S)
        env.stop()
    assert not thread.is_alive()
    assert not errors, errors
    assert len(races) <= 1
    assert len(shapes) >= reads_at_reload + 50  # reads kept working after the reload
    assert shapes[-1] == (N_ARM_JOINTS + 1,)
    state = env.control.read()
    model = env.model
    assert (state.qpos.shape, state.qvel.shape, state.ctrl.shape) == (
        (model.nq,), (model.nv,), (model.nu,))
    env.control.write(xfrc_applied=np.zeros((model.nbody, 6)))
    with pytest.raises(ValueError, match=rf"xfrc_applied.*\({model.nbody}, 6\)"):
        env.control.write(xfrc_applied=np.zeros((model.nbody - 1, 6)))


def test_control_works_on_a_model_from_mujoco(make_env):
    model = mujoco.MjModel.from_xml_string(CLOCK_XML)
    env = make_env(model)
    env.reset("go")
    env.step(10)
    check_clock_state(env.control.read())


# -- the example ------------------------------------------------------------------------------


def test_control_loop_example_converges():
    example = TESTS_DIR.parent / "examples" / "control_loop.py"
    result = subprocess.run([sys.executable, str(example), "--duration", "1.0"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = dict(re.findall(r"^(initial|final) tracking error: ([0-9.]+) rad$", result.stdout,
                              re.MULTILINE))
    assert set(figures) == {"initial", "final"}, result.stdout
    initial, final = float(figures["initial"]), float(figures["final"])
    assert initial > 0.3  # it starts away from the trajectory...
    assert final < 0.05, result.stdout  # ...and converges onto it


# -- plugin failures on the control side ------------------------------------------------------


class FailingWrite(ControlRecorder):
    def update_write(self, model, data):
        data.ctrl[:] = 0.9
        raise RuntimeError("write plugin exploded")


class FailingRead(ControlRecorder):
    def update_read(self, model, data):
        raise RuntimeError("read plugin exploded")


def test_an_update_write_failure_raises_to_the_writer_and_stages_nothing(make_env, arm,
                                                                         register):
    env = make_env(arm, params=plugins_param({"name": "bad", "type": register(FailingWrite)}))
    with pytest.raises(mjfast.PluginError, match="bad") as raised:
        env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.3))
    assert isinstance(raised.value.__cause__, RuntimeError)
    env.step()
    np.testing.assert_array_equal(env.data.ctrl, 0.0)  # neither 0.3 nor the plugin's 0.9
    # The failed plugin is out of the generation; control goes on without it.
    assert env.plugins[0].state is mjfast.PluginState.FAILED
    env.control.write(ctrl=np.full(N_ARM_JOINTS, 0.3))
    env.step()
    np.testing.assert_allclose(env.data.ctrl, 0.3)


def test_an_update_read_failure_raises_to_the_reader(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"name": "bad", "type": register(FailingRead)}))
    with pytest.raises(mjfast.PluginError, match="bad"):
        env.control.read()
    assert env.control.read().time == 0.0  # the next read works, without the failed plugin


# -- control-side plugins do not wait for the physics side ---------------------------------------


class HeldStep(mjfast.MujocoPlugin):
    """Holds the physics side inside a step until the test lets go: its last_stage_callback
    waits for `release` (releasing the GIL; bounded, so a failing test cannot hang)."""

    in_step = threading.Event()
    release = threading.Event()

    def load(self, model, data):
        return True

    def last_stage_callback(self, model, data):
        HeldStep.in_step.set()
        HeldStep.release.wait(JOIN_TIMEOUT_S)


class CountsReads(mjfast.ControlPlugin):
    def init(self, node, model, data):
        self.reads = 0
        return True

    def update_read(self, model, data):
        self.reads += 1

    def cleanup(self):
        pass


def test_update_read_plugins_do_not_wait_for_a_step_in_progress(make_env, register):
    HeldStep.in_step.clear()
    HeldStep.release.clear()
    env = make_env(arm_xml(), params=plugins_param(register(HeldStep), register(CountsReads)))
    env.control.read()  # armed before the held step starts
    reads_done = threading.Event()

    def read_20_times():
        for _ in range(20):
            env.control.read()
        reads_done.set()

    env.start(None)
    try:
        assert HeldStep.in_step.wait(5)
        threading.Thread(target=read_20_times, daemon=True).start()
        # 20 reads while a step holds the physics side until they are done: none waited for it
        # (one that waited would wait for the release below, which comes only after this).
        assert reads_done.wait(10)
    finally:
        HeldStep.release.set()
        env.stop()


# -- MuJoCo errors in the control side's plugins (issue 18, item 6) ----------------------------
# A native update_read/update_write plugin that makes MuJoCo give up (mju_error, or a MuJoCo
# function failing inside) once ended the process: the control side ran it with no error guard.
# It is now that plugin's failure, as any exception there is (SPEC §6, §7): read()/write() raise
# PluginError, the plugin is FAILED and out of dispatch, the env and its data are untouched
# (the error was on the control side's scratch data), and the next read()/write() works.


@pytest.fixture(scope="module")
def mujoco_error_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from _native_build import plugin_library_path

    return plugin_library_path(tmp_path_factory)


@pytest.mark.parametrize("how", ["mju_error", "stack"])
@pytest.mark.parametrize("callback", ["update_read", "update_write"])
def test_a_mujoco_error_in_a_native_control_plugin_is_its_failure_not_the_process_end(
        mujoco_error_library: Path, callback: str, how: str) -> None:
    from support import run_python

    call = "env.control.read()" if callback == "update_read" else \
        "env.control.write(ctrl=[0.5] * 7)"
    result = run_python(f"""
        import mjfast
        from mjfast.plugin.native import NativePlugin
        from support import arm_xml
        mjfast.register_plugin("tests/MujocoError",
                               NativePlugin({str(mujoco_error_library)!r}, "MujocoError"))
        params = {{"MujocoPlugins": [{{"type": "tests/MujocoError", "name": "broken",
                                      "in": {callback!r}, "how": {how!r}}}]}}
        with mjfast.MujocoEnv(arm_xml(), params=params) as env:
            env.step(5)
            try:
                {call}
            except mjfast.PluginError as error:
                print("raised", error.plugin_name, error.callback)
                print("cause", type(error.__cause__).__name__, "MuJoCo error" in str(error))
            info = env.plugins[0]
            print("state", info.state.name, info.failure.phase)
            {call}  # the failed plugin is out of dispatch: the call works again
            state = env.control.read()
            env.step(5)
            print("after", round(env.data.time, 6), round(float(state.time), 6))
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"raised broken {callback}"
    assert lines[1].startswith("cause ") and lines[1].endswith(" True")
    assert lines[2] == f"state FAILED {callback}"
    assert lines[3] == "after 0.02 0.01"


def test_the_control_fields_are_the_cores_table(env: mjfast.MujocoEnv) -> None:
    # _core.CONTROL_STATE_FIELDS / CONTROL_COMMAND_FIELDS name kStateFields / kCommandFields
    # (control_bridge.h): what read() returns and write() takes, for whoever restates them.
    state = env.control.read()
    assert _core.CONTROL_STATE_FIELDS[0] == "time"
    assert all(hasattr(state, field) for field in _core.CONTROL_STATE_FIELDS)
    assert {name for name in dir(state) if not name.startswith("_")} == set(
        _core.CONTROL_STATE_FIELDS)
    env.control.write(**{field: None for field in _core.CONTROL_COMMAND_FIELDS})


# -- reload and the control bridge ------------------------------------------------------------


def test_control_loop_racing_reload_is_memory_safe() -> None:
    out = _check(run_python("""
        import threading, numpy as np, mjfast
        from support import arm_xml
        class Passing(mjfast.ControlPlugin):
            def init(self, node, model, data):
                return True
            def update_read(self, model, data):
                data.qpos[0] += 0.0
            def update_write(self, model, data):
                data.ctrl[0] = data.ctrl[0]
            def cleanup(self):
                pass
        mjfast.register_plugin("test/Passing", Passing)
        params = {"MujocoPlugins": [{"type": "mjfast/NoOp"}, {"type": "test/Passing"}]}
        env = mjfast.MujocoEnv(arm_xml(), params=params)
        env.start(None)
        stop = threading.Event()
        counts = [0]
        def control():
            while not stop.is_set():
                env.control.read()
                env.control.write(ctrl=np.full(env.model.nu, 0.1))
                counts[0] += 1
        threads = [threading.Thread(target=control) for _ in range(2)]
        for thread in threads:
            thread.start()
        for _ in range(40):
            env.reload()
        stop.set()
        for thread in threads:
            thread.join()
        print("reloads", env.model_generation - 1, "control calls", counts[0] > 0)
        env.close()
    """, timeout=120))
    assert out.strip() == "reloads 40 control calls True"
