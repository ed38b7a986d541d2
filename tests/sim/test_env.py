"""Tests of mjfast.MujocoEnv: construction from every model and params form, close, reset and the
initial state, geometry edits, the physics thread, and statistics (SPEC §5, §8)."""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
import time
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from support import (
    HOME_QPOS,
    N_ARM_JOINTS,
    SMALL_ARENA_STEPS_OK,
    TIMESTEP,
    ControlCounter,
    FullRecorder,
    Recording,
    plugins_param,
    run_python,
    wait_for,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


# -- construction -------------------------------------------------------------------------------


def test_construct_from_mjcf_string(make_env, arm):
    env = make_env(arm)
    assert env.model.nq == N_ARM_JOINTS
    assert env.model.nu == N_ARM_JOINTS
    assert env.data.time == 0.0
    assert env.plugins == ()


def test_construct_from_path_str_and_pathlike(make_env, arm_path):
    for model in (arm_path, str(arm_path)):
        env = make_env(model)
        assert env.model.njnt == N_ARM_JOINTS
        env.step(2)
        assert env.data.time == pytest.approx(2 * TIMESTEP)


def test_construct_from_mjmodel(make_env, arm_model):
    env = make_env(arm_model)
    assert env.model.nq == arm_model.nq
    env.step(3)
    assert env.data.time == pytest.approx(3 * TIMESTEP)


def test_model_that_does_not_compile_is_value_error(make_env):
    with pytest.raises(ValueError, match="does not compile"):
        make_env("<mujoco><worldbody><bogus/></worldbody></mujoco>")


def test_bad_model_file_is_value_error(make_env, tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text("<mujoco><worldbody><geom type='nope'/></worldbody></mujoco>")
    with pytest.raises(ValueError, match=r"bad\.xml"):
        make_env(path)


def test_missing_model_file_is_file_not_found(make_env, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere\.xml"):
        make_env(tmp_path / "nowhere.xml")


def test_model_of_wrong_type_is_type_error(make_env):
    with pytest.raises(TypeError):
        make_env(42)


def test_params_as_dict(make_env, arm, register):
    kind = register(ControlCounter)
    env = make_env(arm, params=plugins_param(kind))
    assert [p.name for p in env.plugins] == ["ControlCounter"]
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE


def test_params_as_parameter_server(make_env, arm, register):
    kind = register(ControlCounter)
    server = mjfast.ParameterServer(plugins_param(kind))
    env = make_env(arm, params=server)
    assert env.params is server
    assert [p.type for p in env.plugins] == [kind]


def test_params_as_yaml_path(make_env, arm, register, tmp_path):
    kind = register(ControlCounter)
    path = tmp_path / "params.yaml"
    path.write_text(f"MujocoPlugins:\n  - type: {kind}\n    gain: 2.5\n")
    env = make_env(arm, params=path)
    assert [p.type for p in env.plugins] == [kind]
    assert env.params.get("/MujocoPlugins")[0]["gain"] == 2.5


def test_missing_params_file_is_file_not_found(make_env, arm, tmp_path):
    with pytest.raises(FileNotFoundError):
        make_env(arm, params=tmp_path / "absent.yaml")


def test_malformed_plugin_config_at_construction_is_config_error(make_env, arm):
    with pytest.raises(mjfast.ConfigError):
        make_env(arm, params={"MujocoPlugins": [{"name": "no_type"}]})


# -- close --------------------------------------------------------------------------------------


def test_context_manager_closes_and_unloads(arm, register, journal):
    kind = register(Recording)
    with mjfast.MujocoEnv(arm, params=plugins_param(kind)) as env:
        env.step(1)
        assert journal.events == [("Recording", "load")]
    assert journal.events == [("Recording", "load"), ("Recording", "unload")]
    with pytest.raises(mjfast.LogicError):
        env.step(1)


def test_close_is_idempotent(make_env, arm, register, journal):
    kind = register(Recording)
    env = make_env(arm, params=plugins_param(kind))
    env.close()
    env.close()
    assert journal.names("unload") == ["Recording"]


def test_operations_after_close_raise_logic_error(env):
    env.close()
    time_before = env.data.time
    with pytest.raises(mjfast.LogicError):
        env.step(1)
    with pytest.raises(mjfast.LogicError):
        env.start(None)
    with pytest.raises(mjfast.LogicError):
        env.reset()
    with pytest.raises(mjfast.LogicError):
        env.reload()
    assert env.data.time == time_before


def test_step_validates_n(env):
    with pytest.raises(ValueError):
        env.step(-1)
    env.step(0)
    assert env.data.time == 0.0


# -- reset and the initial state ----------------------------------------------------------------


def test_reset_to_initial_state(env):
    env.data.qpos[:] = 0.5
    env.data.ctrl[:] = 0.3
    env.step(20)
    assert env.data.time > 0
    env.reset()
    assert env.data.time == 0.0
    np.testing.assert_array_equal(env.data.qpos, env.model.qpos0)
    np.testing.assert_array_equal(env.data.qvel, np.zeros(env.model.nv))
    np.testing.assert_array_equal(env.data.ctrl, np.zeros(env.model.nu))


def test_reset_to_keyframe_by_name_and_index(env):
    env.step(5)
    env.reset("home")
    assert env.data.time == 0.0
    np.testing.assert_allclose(env.data.qpos, HOME_QPOS)
    # mj_forward ran after the reset: derived quantities match the keyframe's pose.
    assert env.data.sensordata[0] == pytest.approx(HOME_QPOS[0])
    env.reset()
    np.testing.assert_array_equal(env.data.qpos, np.zeros(N_ARM_JOINTS))
    env.step(5)
    env.reset(0)
    assert env.data.time == 0.0
    np.testing.assert_allclose(env.data.qpos, HOME_QPOS)


def test_reset_to_missing_keyframe_is_key_error_naming_it(env):
    env.step(3)
    with pytest.raises(KeyError, match="nowhere"):
        env.reset("nowhere")
    with pytest.raises(KeyError, match="7"):
        env.reset(7)
    assert env.data.time == pytest.approx(3 * TIMESTEP)  # nothing was reset


def test_reset_calls_each_plugin_reset_once_in_load_order(make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param(
        {"type": kind, "name": "b"}, {"type": kind, "name": "a"}, {"type": kind, "name": "c"}))
    env.step(4)
    env.reset()
    assert journal.names("reset") == ["b", "a", "c"]
    for plugin in journal.instances:
        assert plugin.reset_times == [0.0]  # called after the world reset, not before
    # The reset's mj_forward is callback-free: plugins learn of it through reset() only.
    assert all(p.calls == 4 for p in journal.instances)


def initial_state_params(positions=None, velocities=None):
    params = {}
    if positions is not None:
        params["initial_joint_positions"] = positions
    if velocities is not None:
        params["initial_joint_velocities"] = velocities
    return {"mujoco_server": params}


def test_initial_joint_state_applied_at_construction_reset_and_reload(make_env, arm):
    env = make_env(arm, params=initial_state_params({"j1": 0.4, "j3": -0.2}, {"j2": 1.5}))

    def check():
        assert env.data.qpos[1] == pytest.approx(0.4)
        assert env.data.qpos[3] == pytest.approx(-0.2)
        assert env.data.qpos[0] == 0.0
        assert env.data.qvel[2] == pytest.approx(1.5)
        assert env.data.sensordata[0] == pytest.approx(env.data.qpos[0])

    check()
    env.step(10)
    assert env.data.qpos[2] != pytest.approx(0.0)
    env.reset()
    check()
    env.step(10)
    env.reload()
    check()


def test_initial_joint_state_read_again_at_reset(make_env, arm):
    env = make_env(arm, params=initial_state_params({"j1": 0.4}))
    env.params.set("/mujoco_server/initial_joint_positions/j1", -0.7)
    env.reset()
    assert env.data.qpos[1] == pytest.approx(-0.7)


def test_initial_joint_positions_of_a_free_joint(make_env, box):
    pose = [0.5, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    env = make_env(box, params=initial_state_params({"box_free": pose}))
    np.testing.assert_allclose(env.data.qpos, pose)


@pytest.mark.parametrize(
    ("positions", "velocities", "match"),
    [
        ({"no_such_joint": 0.1}, None, "no_such_joint"),
        ({"j0": [0.1, 0.2]}, None, "j0"),
        ({"j0": "high"}, None, "j0"),
        (None, {"j0": float("nan")}, "j0"),
        (None, {"nothere": 1.0}, "nothere"),
        ([0.1, 0.2], None, "mapping"),
    ],
)
def test_bad_initial_joint_state_is_config_error(make_env, arm, positions, velocities, match):
    with pytest.raises(mjfast.ConfigError, match=match):
        make_env(arm, params=initial_state_params(positions, velocities))


def test_bad_initial_joint_state_at_reload_is_config_error_and_changes_nothing(make_env, arm):
    env = make_env(arm)
    env.step(3)
    model = env.model
    env.params.set("/mujoco_server/initial_joint_positions", {"nope": 1.0})
    with pytest.raises(mjfast.ConfigError, match="nope"):
        env.reload()
    assert env.model is model
    assert env.model_generation == 1
    assert env.data.time == pytest.approx(3 * TIMESTEP)


# -- set_geom_properties ------------------------------------------------------------------------


def test_set_geom_properties_changes_each_field(env):
    ball = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "ball")
    env.set_geom_properties("ball", size=[0.1, 0, 0], rgba=[1, 0, 0, 0.5],
                            friction=[0.3, 0.01, 0.002], contype=2, conaffinity=3)
    np.testing.assert_allclose(env.model.geom_size[ball], [0.1, 0, 0])
    np.testing.assert_allclose(env.model.geom_rgba[ball], [1, 0, 0, 0.5])
    np.testing.assert_allclose(env.model.geom_friction[ball], [0.3, 0.01, 0.002])
    assert env.model.geom_contype[ball] == 2
    assert env.model.geom_conaffinity[ball] == 3
    env.set_geom_properties(ball, rgba=[0, 1, 0, 1])  # by id
    np.testing.assert_allclose(env.model.geom_rgba[ball], [0, 1, 0, 1])


SHAPES = {
    "sphere": ("sphere", [0.05, 0, 0], [0.12, 0, 0]),
    "capsule": ("capsule", [0.05, 0.2, 0], [0.08, 0.1, 0]),
    "cylinder": ("cylinder", [0.05, 0.2, 0], [0.3, 0.05, 0]),
    "box": ("box", [0.1, 0.2, 0.3], [0.3, 0.05, 0.4]),
    "ellipsoid": ("ellipsoid", [0.1, 0.2, 0.3], [0.4, 0.05, 0.1]),
}


def shape_model(kind: str, size) -> str:
    sizes = " ".join(str(s) for s in size if s) if kind != "sphere" else str(size[0])
    return (f'<mujoco><worldbody><body pos="0 0 1"><freejoint/>'
            f'<geom name="shape" type="{kind}" size="{sizes}"/></body></worldbody></mujoco>')


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_set_geom_size_updates_bounds_like_a_fresh_compile(make_env, name):
    kind, before, after = SHAPES[name]
    env = make_env(shape_model(kind, before))
    env.set_geom_properties("shape", size=after)
    expected = mujoco.MjModel.from_xml_string(shape_model(kind, after))
    assert env.model.geom_rbound[0] == pytest.approx(expected.geom_rbound[0])
    np.testing.assert_allclose(env.model.geom_aabb[0], expected.geom_aabb[0], atol=1e-12)


def test_sphere_rbound_updated(env):
    ball = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "ball")
    assert env.model.geom_rbound[ball] == pytest.approx(0.05)
    env.set_geom_properties("ball", size=[0.2, 0, 0])
    assert env.model.geom_rbound[ball] == pytest.approx(0.2)


def test_contype_change_takes_effect_in_collisions(make_env, box):
    env = make_env(box)
    env.step(200)
    resting_height = env.data.qpos[2]
    assert resting_height == pytest.approx(0.1, abs=0.01)  # the box rests on the floor
    env.set_geom_properties("box_geom", contype=0, conaffinity=0)
    env.step(200)
    assert env.data.qpos[2] < 0.0  # and now falls through it


def test_set_geom_properties_unknown_geom_is_key_error(env):
    with pytest.raises(KeyError, match="nothing_here"):
        env.set_geom_properties("nothing_here", rgba=[1, 1, 1, 1])
    with pytest.raises(KeyError):
        env.set_geom_properties(env.model.ngeom, rgba=[1, 1, 1, 1])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": [0.1, 0.1]},
        {"rgba": [1, 0, 0]},
        {"friction": [[1, 0, 0]]},
        {"size": [float("nan"), 0, 0]},
        {"rgba": [1, 0, 0, float("inf")]},
        {"friction": [float("-inf"), 0, 0]},
        {"contype": -1},
        {"conaffinity": 1.5},
    ],
)
def test_set_geom_properties_invalid_changes_nothing(env, kwargs):
    ball = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "ball")
    before = {field: np.copy(getattr(env.model, field)[ball]) for field in (
        "geom_size", "geom_rgba", "geom_friction", "geom_contype", "geom_conaffinity",
        "geom_rbound", "geom_aabb")}
    # A valid rgba in the same call must not be applied when another field is invalid.
    with pytest.raises(ValueError):
        env.set_geom_properties("ball", **{"rgba": [0, 0, 1, 1], **kwargs})
    for field, value in before.items():
        np.testing.assert_array_equal(getattr(env.model, field)[ball], value, err_msg=field)


def test_set_geom_properties_notifies_plugins_with_geom_id(make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param({"type": kind, "name": "a"},
                                             {"type": kind, "name": "b"}))
    ball = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "ball")
    env.set_geom_properties("ball", rgba=[1, 1, 0, 1])
    assert [p.geoms_changed for p in journal.instances] == [[ball], [ball]]
    assert journal.names("geom_changed") == ["a", "b"]
    with pytest.raises(ValueError):
        env.set_geom_properties("ball", rgba=[1, 1, 0])
    assert [p.geoms_changed for p in journal.instances] == [[ball], [ball]]


# -- the physics thread -------------------------------------------------------------------------


def test_start_stop_running(env):
    assert not env.running
    env.start(None)
    try:
        assert env.running
        assert wait_for(lambda: env.data.time > 10 * TIMESTEP)
        with pytest.raises(mjfast.LogicError):
            env.step(1)
        with pytest.raises(mjfast.LogicError):
            env.start(None)
    finally:
        env.stop()
    assert not env.running
    env.stop()  # idempotent
    assert not env.running
    stopped_at = env.data.time
    time.sleep(0.02)
    assert env.data.time == stopped_at  # really stopped
    env.step(1)  # and stepping is allowed again
    assert env.data.time == pytest.approx(stopped_at + TIMESTEP)


def test_start_paced_to_wall_clock(env):
    env.start(1.0)
    try:
        time.sleep(0.2)
        simulated = env.data.time
    finally:
        env.stop()
    # Real time: about 0.2 s simulated; generous bounds for a loaded 2-core machine.
    assert 0.05 < simulated < 0.3


def test_start_rejects_bad_realtime_factor(env):
    for factor in (0.0, -1.0):
        with pytest.raises(ValueError):
            env.start(factor)
    assert not env.running


def test_close_stops_the_physics_thread(make_env, arm, register, journal):
    kind = register(ControlCounter)
    env = make_env(arm, params=plugins_param(kind))
    env.start(None)
    assert wait_for(lambda: journal.instances[0].calls > 5)
    env.close()
    assert not env.running
    calls = journal.instances[0].calls
    time.sleep(0.02)
    assert journal.instances[0].calls == calls
    assert journal.instances[0].events[-1] == "unload"


def test_reset_while_running(make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param(kind))
    env.start(None)
    try:
        assert wait_for(lambda: env.data.time > 50 * TIMESTEP)
        env.reset("home")
        plugin = journal.instances[0]
        assert plugin.reset_times == [0.0]  # the thread was paused during the reset
        calls_at_reset = plugin.events[: plugin.events.index("reset")].count("control")
        assert wait_for(lambda: plugin.calls > calls_at_reset + 5)  # and resumed
        assert env.running
    finally:
        env.stop()
    assert plugin.events.count("reset") == 1
    # The first step after the reset started from the keyframe at time 0.
    assert plugin.control_times[calls_at_reset] == 0.0
    assert plugin.control_times[calls_at_reset - 1] > 50 * TIMESTEP


def test_reload_while_running(make_env, arm_path, register, journal):
    kind = register(ControlCounter)
    env = make_env(arm_path, params=plugins_param(kind))
    env.start(None)
    try:
        assert wait_for(lambda: journal.instances[0].calls > 10)
        env.reload()
        assert len(journal.instances) == 2
        old, new = journal.instances
        assert old.events[-1] == "unload"  # no callback reached it after unload()
        assert wait_for(lambda: new.calls > 10)
        assert env.running
        assert env.model_generation == 2
    finally:
        env.stop()
    assert new.control_times[0] == pytest.approx(0.0)  # the new data started at time 0
    assert old.events.count("unload") == 1


def test_set_geom_properties_while_running(make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param(kind))
    env.start(None)
    try:
        env.set_geom_properties("ball", size=[0.3, 0, 0])
        assert env.running
        assert wait_for(lambda: journal.instances[0].calls > 5)
    finally:
        env.stop()
    assert journal.instances[0].geoms_changed == [
        mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "ball")]


def _step_in_thread(env, steps):
    """Runs env.step(steps) on another thread; returns the thread and what it raised."""
    outcome: dict[str, BaseException] = {}

    def run():
        try:
            env.step(steps)
        except BaseException as error:  # handed to the test to assert on
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_reset_during_a_long_step_call_on_another_thread_runs_at_a_step_boundary(
        make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param(kind))
    thread, outcome = _step_in_thread(env, 200_000)
    try:
        assert wait_for(lambda: env.data.time > 50 * TIMESTEP)
        env.reset("home")  # does not wait for the 200 000 steps
        plugin = journal.instances[0]
        assert plugin.reset_times == [0.0]
        assert thread.is_alive()  # the step(n) call goes on after the reset
    finally:
        env.close()  # stops the stepping thread at its next step boundary
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), mjfast.LogicError)
    assert "closed" in str(outcome["error"])


def test_close_during_a_step_call_on_another_thread_stops_it(make_env, arm):
    env = make_env(arm)
    thread, outcome = _step_in_thread(env, 10_000_000)
    assert wait_for(lambda: env.data.time > 10 * TIMESTEP)
    env.close()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), mjfast.LogicError)
    time_at_close = env.data.time
    time.sleep(0.05)
    assert env.data.time == time_at_close  # nothing steps a closed env


class RaisesOnThirdControl(ControlCounter):
    def control_callback(self, model, data):
        super().control_callback(model, data)
        if self.calls == 3:
            raise RuntimeError("third call fails")


def test_plugin_error_on_the_physics_thread(make_env, arm, register, journal, caplog):
    failing = register(RaisesOnThirdControl)
    counting = register(ControlCounter)
    env = make_env(arm, params=plugins_param(failing, counting))
    caplog.set_level(logging.ERROR, logger="mjfast.env")
    env.start(None)
    try:
        assert wait_for(lambda: env.plugins[0].state is mjfast.PluginState.FAILED)
        time_then = env.data.time
        assert wait_for(lambda: env.data.time > time_then + 10 * TIMESTEP)
        assert env.running
    finally:
        env.stop()
    bad, good = journal.instances
    assert bad.calls == 3
    assert good.calls > 10
    assert env.plugins[0].failure.phase == "control_callback"
    assert env.plugins[1].state is mjfast.PluginState.ACTIVE
    records = [r for r in caplog.records if r.name == "mjfast.env"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert "third call fails" in records[0].getMessage()
    # The thread's error was reported there, not left pending for the next step.
    env.step(1)


# -- statistics ---------------------------------------------------------------------------------


def test_statistics(make_env, arm, register):
    control = register(ControlCounter)
    full = register(FullRecorder)
    env = make_env(arm, params=plugins_param(control, full))
    env.step(100)
    env.reset()
    stats = env.statistics()
    assert stats["env"]["steps"] == 100
    assert stats["env"]["mean_step_ns"] > 0
    assert stats["env"]["realtime_factor"] > 0
    assert stats["env"]["model_generation"] == env.model_generation == 1
    assert stats["env"]["plugin_generation"] == env.plugin_generation == 1
    counter, recorder = stats["plugins"]
    assert (counter["name"], counter["type"]) == ("ControlCounter", control)
    assert counter["state"] is mjfast.PluginState.ACTIVE
    assert counter["failure"] is None
    assert counter["load_time_s"] > 0
    assert set(counter["callbacks"]) == {"control_callback"}
    control_stats = counter["callbacks"]["control_callback"]
    assert control_stats["calls"] == 100
    assert control_stats["mean_ns"] > 0
    assert control_stats["last_ns"] > 0
    assert set(recorder["callbacks"]) == {"control_callback", "reset", "on_geom_changed"}
    assert recorder["callbacks"]["reset"]["calls"] == 1
    assert recorder["callbacks"]["on_geom_changed"]["calls"] == 0
    assert recorder["reset_time_s"] > 0
    assert counter["reset_time_s"] == 0.0  # it has no reset()
    # env.plugins carries the same figures.
    assert env.plugins[0].stats["callbacks"]["control_callback"]["calls"] == 100


def test_statistics_generations_follow_reload(make_env, arm, register):
    env = make_env(arm, params=plugins_param(register(ControlCounter)))
    env.step(5)
    env.reload()
    stats = env.statistics()
    assert stats["env"]["model_generation"] == 2
    assert stats["env"]["plugin_generation"] == 2
    assert stats["plugins"][0]["callbacks"]["control_callback"]["calls"] == 0
    assert stats["env"]["steps"] == 5


def test_one_env_stepped_from_two_threads_is_serialised(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(ControlCounter)))
    errors: list[BaseException] = []

    def run():
        try:
            for _ in range(100):
                env.step(5)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert journal.instances[0].calls == 1000
    assert env.data.time == pytest.approx(1000 * TIMESTEP)
    assert journal.instances[0].control_times == pytest.approx(
        [i * TIMESTEP for i in range(1000)])


def test_garbage_collected_env_unloads_its_plugins(arm, register, journal):
    env = mjfast.MujocoEnv(arm, params=plugins_param(register(Recording)))
    env.step(1)
    del env
    gc.collect()
    assert journal.events == [("Recording", "load"), ("Recording", "unload")]


# -- review fixes: transactions and multi-geom bodies ------------------------------------------

TWO_GEOM_BODY = """
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="b" pos="0 0 .3">
      <freejoint/>
      <geom name="box" type="box" size=".1 .1 .1"/>
      <geom name="knob" size=".05" pos="0 0 .2"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_growing_a_geom_of_a_multi_geom_body_updates_the_boxes_collisions_read(make_env):
    env = make_env(TWO_GEOM_BODY)
    mujoco.mj_forward(env.model, env.data)
    assert env.data.ncon == 0
    env.set_geom_properties("box", size=[0.5, 0.5, 0.5])  # now reaches through the floor
    mujoco.mj_forward(env.model, env.data)
    assert env.data.ncon == 4
    # Every box of the body's hierarchy still encloses its children.
    model = env.model
    root = model.body_bvhadr[1]
    for node in range(root, root + model.body_bvhnum[1]):
        for child in model.bvh_child[node]:
            if child < 0:
                continue
            outer, inner = model.bvh_aabb[node], model.bvh_aabb[root + child]
            assert np.all(inner[:3] - inner[3:] >= outer[:3] - outer[3:] - 1e-12)
            assert np.all(inner[:3] + inner[3:] <= outer[:3] + outer[3:] + 1e-12)


def test_an_out_of_range_bitmask_changes_nothing(make_env):
    env = make_env(TWO_GEOM_BODY)
    rgba = env.model.geom_rgba[1].copy()
    with pytest.raises(ValueError, match="contype"):
        env.set_geom_properties("box", rgba=[1, 0, 0, 1], contype=2**40)
    np.testing.assert_array_equal(env.model.geom_rgba[1], rgba)


def test_a_reset_with_an_invalid_initial_state_changes_nothing(make_env, arm, register, journal):
    kind = register(FullRecorder)
    env = make_env(arm, params=plugins_param(kind))
    env.step(5)
    env.params.set("/mujoco_server/initial_joint_positions", {"no_such_joint": 0.1})
    with pytest.raises(mjfast.ConfigError, match="no_such_joint"):
        env.reset()
    assert env.data.time == pytest.approx(5 * TIMESTEP)
    assert journal.instances[0].reset_times == []


def test_reload_from_a_yaml_path_keeps_the_same_parameter_server(make_env, arm_path, tmp_path):
    params_file = tmp_path / "params.yaml"
    params_file.write_text("mujoco_server:\n  answer: 1\n")
    env = make_env(arm_path, params=params_file)
    server = env.params
    server.set("/mujoco_server/mine", "kept")
    params_file.write_text("mujoco_server:\n  answer: 2\n")
    env.reload()
    assert env.params is server
    assert server.get("/mujoco_server/answer") == 2  # the file's values win
    assert server.get("/mujoco_server/mine") == "kept"


def test_acquire_plugin_on_a_closed_env_is_a_logic_error(make_env, arm):
    env = make_env(arm)
    env.close()
    with pytest.raises(mjfast.LogicError, match="closed"), env.acquire_plugin("x"):
        pass


# -- issue 18: parameters in the env's namespace that nothing reads -------------------------------


class ReadsParameters(Recording):
    """Reads an env-level parameter by its absolute name and one of its own, while loading."""

    def load(self, model, data):
        self.description = self.node.get_param("/mujoco_server/robot_description", None)
        self.rate = self.node.get_param("rate", 1.0)
        return super().load(model, data)


def _unread_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "mjfast.env" and r.levelno == logging.WARNING
            and "is not read by mjfast" in r.getMessage()]


def test_a_key_dedented_out_of_its_plugin_entry_is_warned_about(make_env, arm, caplog):
    params = {"mujoco_server": {
        "MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold"}],
        "kp": 600.0,  # meant for the plugin entry above
        "initial_joint_velocitie": {"j0": 0.1},  # a misspelt env parameter
        "unrelated": 1,
    }}
    with caplog.at_level(logging.WARNING, logger="mjfast"):
        env = make_env(arm, params=params)
    assert sorted(_unread_warnings(caplog)) == [
        "parameter /mujoco_server/initial_joint_velocitie is not read by mjfast; did you mean "
        "the env parameter 'initial_joint_velocities'?",
        "parameter /mujoco_server/kp is not read by mjfast; did you mean the key 'kp' of plugin "
        "'hold' (mjfast/PoseHoldPD)?",
        "parameter /mujoco_server/unrelated is not read by mjfast",
    ]
    # Once per construction and once per reload, not on every step.
    caplog.clear()
    env.step(10)
    assert _unread_warnings(caplog) == []
    env.reload()
    assert len(_unread_warnings(caplog)) == 3


def test_parameters_the_env_or_a_plugin_reads_are_not_warned_about(make_env, arm, register,
                                                                  caplog):
    kind = register(ReadsParameters)
    params = {"mujoco_server": {
        "MujocoPlugins": [{"type": kind, "name": "reader"}],
        "initial_joint_positions": {"j0": 0.1},
        "initial_joint_velocities": {"j0": 0.0},
        "options": {"timestep": 0.002},
        "cameras": {},
        "robot_description": "<robot/>",  # read by the plugin, by its absolute name
        "reader": {"rate": 5.0},  # the plugin's own namespace
    }}
    with caplog.at_level(logging.WARNING, logger="mjfast"):
        env = make_env(arm, params=params)
        env.reload()
    assert _unread_warnings(caplog) == []
    with env.acquire_plugin("reader") as plugin:
        assert (plugin.description, plugin.rate) == ("<robot/>", 5.0)


def test_reads_recorded_names_what_was_read(make_env):
    server = mjfast.ParameterServer({"a": {"b": 1, "c": 2}, "d": 3})
    with server.reads_recorded() as read:
        server.get("/a/b")
        server.has("/nothing")
        server.search("/a/x", "d")
    server.get("/a/c")  # after the block: not recorded
    assert read == {"/a/b", "/nothing", "/d"}


# -- issue 18: memory ---------------------------------------------------------------------------


# Resident memory is no measure under a sanitizer: its allocator keeps freed blocks in
# quarantine (tools/sanitize preloads the runtime), so the bare/env ratios are noise there.
real_allocator = pytest.mark.skipif(
    any(runtime in os.environ.get("LD_PRELOAD", "") for runtime in ("libasan", "libtsan")),
    reason="resident memory under a sanitizer's allocator",
)

# What both memory scripts start with: resident bytes after a collection and a trim.
MEMORY_PRELUDE = """
    import ctypes, gc, json, os, sys
    import mujoco, mjfast
    from support import arm_xml

    libc = ctypes.CDLL(None)

    def held():
        gc.collect()
        libc.malloc_trim(0)
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
"""

MEMORY_SCRIPT = MEMORY_PRELUDE + """
    class Python(mjfast.MujocoPlugin):
        def load(self, model, data):
            self.node.publish("~loaded", {{"nq": model.nq}})
            return True
        def control_callback(self, model, data):
            pass

    mjfast.register_plugin("test/Python", Python)
    xml = arm_xml()
    params = {{"MujocoPlugins": [{{"type": "test/Python"}}, {{"type": "mjfast/NoOp"}},
                                 {{"type": "mjfast/PoseHoldPD", "kp": 1.0}}]}}

    def bare():
        model = mujoco.MjModel.from_xml_string(xml)
        data, scratch = mujoco.MjData(model), mujoco.MjData(model)
        mujoco.mj_step(model, data)

    def env():
        made = mjfast.MujocoEnv(xml, params=params)
        made.step(2)
        made.statistics()
        made.close()
        {keep}

    def reloads():
        with mjfast.MujocoEnv(xml, params=params) as made:
            for _ in range({count}):
                made.reload()

    kept = []
    growth = {{}}
    for name, run in (("bare", lambda: [bare() for _ in range({count})]),
                      ("envs", lambda: [env() for _ in range({count})]),
                      ("reloads", reloads)):
        run()  # warm-up: first-use allocations
        before = held()
        run()
        growth[name] = held() - before
    # What one bare model and its two datas hold resident: the unit a leak is measured in.
    before = held()
    model = mujoco.MjModel.from_xml_string(xml)
    data = [mujoco.MjData(model), mujoco.MjData(model)]
    for d in data:
        mujoco.mj_step(model, d)
    growth["one"] = held() - before
    print(json.dumps(growth))
"""


def _memory_growth(keep: str = "", count: int = 200) -> dict[str, int]:
    result = run_python(MEMORY_SCRIPT.format(keep=keep, count=count), timeout=240)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _allocator_noise(growth: dict[str, int]) -> float:
    """Allocator noise: a quarter of what one model and its two datas hold, plus 2 MiB."""
    return max(growth["one"], 64 * 1024) / 4 + 2 * 1024 * 1024


@real_allocator
def test_creating_and_closing_envs_holds_no_more_memory_than_bare_mujoco():
    # SPEC §18: 200 envs (with Python and native plugins) created and closed one at a time, and
    # 200 reloads of one env, grow resident memory no more than 1.5x bare MuJoCo doing the same,
    # beyond allocator noise worth a quarter of what one model and its two datas hold.
    growth = _memory_growth()
    noise = _allocator_noise(growth)
    for case in ("envs", "reloads"):
        assert growth[case] <= 1.5 * max(growth["bare"], 0) + noise, growth


MEMORY_TOGETHER_SCRIPT = MEMORY_PRELUDE + """
    class Python(mjfast.MujocoPlugin):
        def load(self, model, data):
            return True
        def control_callback(self, model, data):
            pass

    mjfast.register_plugin("test/Python", Python)
    xml = arm_xml()
    params = {{"MujocoPlugins": [{{"type": "test/Python"}}, {{"type": "mjfast/NoOp"}}]}}

    def bare(count):
        made = []
        for _ in range(count):
            model = mujoco.MjModel.from_xml_string(xml)
            made.append((model, mujoco.MjData(model), mujoco.MjData(model)))
        del made

    def envs(count):
        made = [mjfast.MujocoEnv(xml, params=params) for _ in range(count)]
        for env in made:
            env.step(1)
        for env in made:
            env.close()
        del made, env

    growth = {{}}
    for name, run in (("bare", bare), ("envs", envs)):
        run(3)  # warm-up: first-use allocations, not a crowd's
        before = held()
        run({count})
        growth[name] = held() - before
    before = held()
    model = mujoco.MjModel.from_xml_string(xml)
    data = [mujoco.MjData(model), mujoco.MjData(model)]
    growth["one"] = held() - before
    print(json.dumps(growth))
"""


@real_allocator
def test_envs_alive_at_once_then_closed_hold_no_more_memory_than_bare_mujoco():
    # SPEC §18, the other pattern than the test above's: 300 envs alive at once, then all closed
    # and dropped, keep no more than 1.5x what 300 bare models with two datas each keep. The
    # fresh attribute-name strs that CPython's type cache kept (mjfast's obj.attr("...") lookups,
    # mujoco's model compilation) pinned pymalloc arenas full of the envs' memory: ~90 KB per env.
    result = run_python(MEMORY_TOGETHER_SCRIPT.format(count=300), timeout=240)
    assert result.returncode == 0, result.stderr
    growth = json.loads(result.stdout)
    noise = _allocator_noise(growth)
    assert growth["envs"] <= 1.5 * max(growth["bare"], 0) + noise, growth


def test_binding_a_model_leaves_nothing_in_pythons_type_cache():
    # What pinned those arenas: each bind() looked `_address` up by a fresh str, and CPython's
    # type attribute cache keeps such strs (a slot per str address) after the lookup. 200 cores
    # bound at once, then dropped, leave no Python allocation of bind()'s behind.
    result = run_python("""
        import gc, tracemalloc
        import mujoco
        from mjfast._core_loader import _core
        from support import arm_xml

        xml = arm_xml()
        models = [mujoco.MjModel.from_xml_string(xml) for _ in range(200)]
        pairs = [(model, mujoco.MjData(model), mujoco.MjData(model)) for model in models]
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        cores = []
        for model, data, scratch in pairs:
            core = _core.EnvCore()
            core.bind(model, data, scratch)
            cores.append(core)
        del cores, core  # not close(): that empties the type cache (the catch-all; see below)
        gc.collect()
        script_only = [tracemalloc.Filter(True, "<string>")]
        after = tracemalloc.take_snapshot().filter_traces(script_only)
        kept = after.compare_to(before.filter_traces(script_only), "lineno")
        print(sum(max(stat.count_diff, 0) for stat in kept))
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) < 20, result.stdout


@real_allocator
def test_the_memory_test_sees_a_leak():
    # The test above can fail: envs whose data is kept alive after close() are seen.
    growth = _memory_growth(keep="kept.append(made.data)", count=100)
    noise = _allocator_noise(growth)
    assert growth["envs"] > 1.5 * max(growth["bare"], 0) + noise, growth


# -- holding stepping (issue 23 item 4) ---------------------------------------------------------


def test_hold_stepping_holds_the_physics_thread_at_a_step_boundary(env):
    env.start(None)
    try:
        assert wait_for(lambda: env.step_count > 0)
        with env.hold_stepping("test"):
            held = env.step_count
            qpos = env.data.qpos.copy()
            threading.Event().wait(0.05)  # an unpaced thread would take hundreds of steps
            assert env.step_count == held and np.array_equal(env.data.qpos, qpos)
        assert wait_for(lambda: env.step_count > held)
    finally:
        env.stop()


def test_hold_stepping_is_a_lifecycle_operation(env, register):
    class HoldsInCallback(mjfast.MujocoPlugin):
        def load(self, model, data):
            return True

        def control_callback(self, model, data):
            if not hasattr(self, "error"):
                try:
                    with self.env.hold_stepping("inside"):
                        pass
                except mjfast.LogicError as error:
                    self.error = str(error)

    inside_outer = r"env\.inner\(\) called from inside env\.outer\(\)"
    with (env.hold_stepping("outer"), pytest.raises(mjfast.LogicError, match=inside_outer),
          env.hold_stepping("inner")):
        pass
    name = register(HoldsInCallback)
    held = mjfast.MujocoEnv(env.model, params=plugins_param({"type": name}))
    try:
        held.step(1)
        with held.acquire_plugin(held.plugins[0].name) as plugin:
            assert "inside a plugin callback" in plugin.error
    finally:
        held.close()
    env.close()
    with pytest.raises(mjfast.LogicError, match="the env is closed"), env.hold_stepping():
        pass


def test_measured_realtime_factor_is_the_info_figure(env):
    assert env.measured_realtime_factor == env.info()["measured_realtime_factor"]


# -- issue 23: one place for re-entrancy ----------------------------------------------------------


class ClosesItsEnv(mjfast.MujocoPlugin):
    """Calls env.close() from its load, through the env the test hands it."""

    env = None
    refusal = ""

    def load(self, model, data):
        try:
            type(self).env.close()
        except mjfast.LogicError as error:
            type(self).refusal = str(error)
        return True


def test_the_envs_refusals_are_the_cores_messages(make_env, arm, register):
    # env.py builds none of its re-entrancy messages: they come from
    # src/_core/common/call_context.h.
    assert mjfast._core.refusal("acquire_block", "reload()") == (
        "reload() inside an acquire_plugin() block would deadlock: leave the block first")
    with pytest.raises(ValueError, match=r"unknown refusal 'acquire'.*acquire_block"):
        mjfast._core.refusal("acquire", "reload()")
    kind = register(ClosesItsEnv)
    env = make_env(arm)
    ClosesItsEnv.env = env
    env.params.set("/mujoco_server/MujocoPlugins", [{"type": kind, "name": "closer"}])
    env.reload()
    assert ClosesItsEnv.refusal == (
        "env.close() called from inside env.reload() (a plugin's load/init, reset/on_reset or "
        "unload/cleanup calling back into the env) would recurse or deadlock")
    with env.acquire_plugin("closer"), pytest.raises(mjfast.LogicError) as refused:
        env.reload()
    assert str(refused.value) == mjfast._core.refusal("acquire_block", "reload()")
    env.reset()  # the marks ended with the operations: the env is usable


# -- issue 23: what the env's collaborators read instead of its private members -----------------


def test_plugin_specs_are_the_configured_plugins_until_a_reload_replaces_them(make_env, arm,
                                                                            register):
    kind = register(Recording)
    env = make_env(arm, params=plugins_param(kind, {"type": kind, "name": "second", "k": 1}))
    specs = env.plugin_specs
    assert isinstance(specs, tuple) and all(isinstance(s, mjfast.PluginSpec) for s in specs)
    assert [(s.name, s.type, s.config) for s in specs] == [
        ("Recording", kind, {}), ("second", kind, {"k": 1})]
    env.step(2)
    env.reset()
    # The same tuple while the generation lasts: the bridge and the recorder tell a reload by it.
    assert env.plugin_specs is specs
    env.reload()
    assert env.plugin_specs is not specs and env.plugin_specs == specs
    with pytest.raises(AttributeError):
        env.plugin_specs = ()  # read-only


def test_closed_says_whether_the_env_is_closed(make_env, arm):
    env = make_env(arm)
    assert env.closed is False
    env.close()
    assert env.closed is True
    with pytest.raises(AttributeError):
        env.closed = False  # read-only


# -- MuJoCo fatal errors ------------------------------------------------------------------------


def test_mujoco_error_in_step_raises_simulation_error_and_reset_recovers() -> None:
    out = _check(run_python(f"""
        import mujoco, mjfast
        from support import SMALL_ARENA_XML
        env = mjfast.MujocoEnv(SMALL_ARENA_XML)
        env.step({SMALL_ARENA_STEPS_OK})
        try:
            env.step(50)
        except mjfast.SimulationError as error:
            assert isinstance(error, mujoco.FatalError) and isinstance(error, RuntimeError)
            print("raised", "mj_stackAlloc" in str(error))
        try:
            env.step(1)
        except mjfast.SimulationError as error:
            print("refused", "env.reset()" in str(error))
        env.reset()
        env.step(10)
        print("recovered", round(env.data.time, 6))
        env.close()
    """))
    assert out.split("\n")[:3] == ["raised True", "refused True", "recovered 0.02"]


def test_mujoco_error_in_the_forward_of_a_reset_or_set_state_is_raised_naming_the_call() -> None:
    # A keyframe with the eight boxes sunk into the floor and each other: the mj_forward that
    # follows a reset to it, or a set_state to its state, runs out of the small arena.
    out = _check(run_python("""
        import mjfast
        from support import SMALL_ARENA_XML
        sunk = " ".join(f"{0.05 * i} 0 0 1 0 0 0" for i in range(8))
        keyframe = f'<keyframe><key name="sunk" qpos="{sunk}"/></keyframe>'
        xml = SMALL_ARENA_XML.replace("</mujoco>", keyframe + "</mujoco>")
        env = mjfast.MujocoEnv(xml)
        try:
            env.reset("sunk")
        except mjfast.SimulationError as error:
            print(str(error).startswith("reset: MuJoCo error in mj_forward: MuJoCo error: "),
                  str(error).endswith("(the simulation state is undefined until env.reset())"))
        sunk_state = env.get_state()
        try:
            env.step(1)
        except mjfast.SimulationError as error:
            print("refused", "env.reset()" in str(error))
        other = mjfast.MujocoEnv(xml)
        try:
            other.set_state(sunk_state)
        except mjfast.SimulationError as error:
            print(str(error).startswith("set_state(): MuJoCo error in mj_forward: MuJoCo error: "))
        env.reset()
        env.step(10)
        print("recovered", round(env.data.time, 6))
        env.close()
        other.close()
    """))
    assert out.split("\n")[:4] == ["True True", "refused True", "True", "recovered 0.02"]


def test_mujoco_error_after_a_plugin_called_mujocos_bindings_is_still_raised() -> None:
    # mujoco's bindings install their own MuJoCo error handler around each call they make (4.0
    # puts the previous one back): the guard's must be in place for the mj_step that fails.
    out = _check(run_python("""
        import mujoco, mjfast
        from support import SMALL_ARENA_XML
        class Forwarding(mjfast.ControlPlugin):
            def init(self, node, model, data):
                self.scratch = mujoco.MjData(model)
                return True
            def pre_step(self, data):
                mujoco.mj_kinematics(self.env.model, self.scratch)
            def cleanup(self):
                pass
        class Rendering(mjfast.MujocoPlugin):
            def load(self, model, data):
                self.scratch = mujoco.MjData(model)
                return True
            def control_callback(self, model, data):
                mujoco.mj_kinematics(model, self.scratch)
        mjfast.register_plugin("test/Forwarding", Forwarding)
        mjfast.register_plugin("test/Calling", Rendering)
        env = mjfast.MujocoEnv(SMALL_ARENA_XML, params={"MujocoPlugins": [
            {"type": "test/Forwarding"}, {"type": "test/Calling"}]})
        try:
            env.step(200)
        except mjfast.SimulationError:
            print("raised")
        env.close()
    """))
    assert out.strip() == "raised"


def test_mujoco_error_on_the_physics_thread_is_raised_by_stop() -> None:
    out = _check(run_python("""
        import mjfast
        from support import wait_for
        from support import SMALL_ARENA_XML
        env = mjfast.MujocoEnv(SMALL_ARENA_XML)
        env.start(None)
        assert wait_for(lambda: not env.running, timeout=30)
        try:
            env.stop()
        except mjfast.SimulationError as error:
            print("stop raised", "mj_stackAlloc" in str(error))
        try:
            env.start(None)
        except mjfast.SimulationError:
            print("start refused")
        env.reset()
        env.step(5)
        print("stepped after reset")
        env.close()
    """))
    assert out.split("\n")[:3] == ["stop raised True", "start refused", "stepped after reset"]


def test_foreign_callback_set_and_cleared_while_running_does_not_kill_the_process() -> None:
    out = _check(run_python("""
        import mujoco, mjfast
        from support import wait_for
        from support import BOX_XML
        env = mjfast.MujocoEnv(BOX_XML)
        env.start(None)
        for _ in range(200):
            mujoco.set_mjcb_control(lambda m, d: None)
            mujoco.set_mjcb_control(None)
        assert wait_for(lambda: not env.running, timeout=10)
        try:
            env.stop()
        except (mjfast.HookOwnershipError, mjfast.SimulationError) as error:
            print("raised", type(error).__name__)
        mjfast.install_hooks()
        env.step(3)
        print("alive")
        env.close()
    """))
    assert out.split("\n")[0].startswith("raised ")
    assert "alive" in out


# -- deadlocks and re-entry -----------------------------------------------------------------


def test_plugin_stepping_from_load_unload_and_reset_is_refused_not_deadlocked() -> None:
    out = _check(run_python("""
        import mjfast
        from support import Recording, arm_xml
        seen = []
        class Reentrant(Recording):
            def load(self, model, data):
                for call in (lambda: self.env.step(1), lambda: self.env.start(None),
                             lambda: self.env.reset(), lambda: self.env.reload()):
                    try:
                        call()
                    except mjfast.LogicError:
                        seen.append("load refused")
                return True
            def reset(self):
                for call in (lambda: self.env.step(1), lambda: self.env.reset()):
                    try:
                        call()
                    except mjfast.LogicError:
                        seen.append("reset refused")
            def unload(self):
                for call in (lambda: self.env.step(1), lambda: self.env.close()):
                    try:
                        call()
                    except mjfast.LogicError:
                        seen.append("unload refused")
        mjfast.register_plugin("test/Reentrant", Reentrant)
        env = mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [{"type": "test/Reentrant"}]})
        env.reset()
        env.reload()
        env.close()
        print(seen.count("load refused"), seen.count("reset refused"),
              seen.count("unload refused"))
    """, timeout=60))
    assert out.split() == ["8", "2", "4"]


def test_a_plugin_may_step_another_env(make_env: Any, register: Any, arm: str) -> None:
    other = make_env(arm, params=plugins_param(register(ControlCounter, "test/OtherCounter")),
                     namespace="/other")

    class SteppingOther(ControlCounter):
        def last_stage_callback(self, model: Any, data: Any) -> None:
            other.step(2)

    env = make_env(arm, params=plugins_param(register(SteppingOther)))
    env.step(5)
    assert other.plugins[0].stats["callbacks"]["control_callback"]["calls"] == 10
    assert other.data.time == pytest.approx(10 * other.model.opt.timestep)


def test_start_while_another_thread_is_inside_step_is_refused() -> None:
    out = _check(run_python("""
        import threading, mjfast
        from support import ControlCounter, arm_xml
        entered, release = threading.Event(), threading.Event()
        class Gate(ControlCounter):
            def control_callback(self, model, data):
                entered.set()
                release.wait()
        mjfast.register_plugin("test/Gate", Gate)
        env = mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [{"type": "test/Gate"}]})
        worker = threading.Thread(target=env.step, args=(3,))
        worker.start()
        entered.wait()
        try:
            env.start(None)
        except mjfast.LogicError as error:
            print("refused", "inside step()" in str(error))
        release.set()
        worker.join()
        print("running", env.running)
        env.close()
    """, timeout=30))
    assert out.split("\n")[:2] == ["refused True", "running False"]


def test_control_calls_after_close_raise(env: mjfast.MujocoEnv) -> None:
    env.control.read()
    env.close()
    with pytest.raises(mjfast.LogicError, match="closed"):
        env.control.read()
    with pytest.raises(mjfast.LogicError, match="closed"):
        env.control.write(ctrl=np.zeros(env.model.nu))
