"""Simulation control (SPEC §13): pause and step, the world reset's overrides, joint and body
state, runtime options, equality constraints, the real-time factor and info, checked with physics;
all-or-nothing validation; refusal from inside plugin callbacks; the calls under concurrency."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast._core_loader import _core
from mjfast.model.info import is_mjcf_string
from mjfast.model.joints import JointState
from mjfast.model.kinematics import BodyState
from mjfast.model.options import option_fields
from support import TEST_PATHS, attached_arms_model, wait_for

DT = 0.002
# qpos: ball (free, 7), held (free, 7), hinge (1), tip (ball joint, 4) = 19; qvel 6+6+1+3 = 16.
XML = f"""
<mujoco model="simctl">
  <option timestep="{DT}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="ball" pos="0 0 0.1">
      <freejoint name="ball_free"/>
      <geom name="ball" type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="held" pos="2 0 1">
      <freejoint name="held_free"/>
      <geom type="box" size=".05 .05 .05" mass="1" contype="0" conaffinity="0"/>
    </body>
    <body name="pendulum" pos="0 2 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.3" size=".02" contype="0" conaffinity="0"/>
      <body name="tip" pos="0 0 -0.3">
        <joint name="tip_ball" type="ball"/>
        <geom type="sphere" size=".03" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="rotated" pos="1 1 1" euler="0 0 90">
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality><connect name="hold" body1="held" anchor="0 0 0"/></equality>
  <sensor><jointpos name="hinge_pos" joint="hinge"/></sensor>
  <keyframe>
    <key name="lifted" qpos="0 0 1 1 0 0 0  2 0 1 1 0 0 0  0.5  1 0 0 0"/>
  </keyframe>
</mujoco>
"""


@pytest.fixture
def sim(make_env: Callable[..., mjfast.MujocoEnv]) -> mjfast.MujocoEnv:
    return make_env(XML)


def snapshot(env: mjfast.MujocoEnv) -> dict[str, Any]:
    """Everything an all-or-nothing call must leave alone."""
    return {"qpos": env.data.qpos.copy(), "qvel": env.data.qvel.copy(), "time": env.data.time,
            "eq_active": env.data.eq_active.copy(), "steps": env.step_count,
            "opt": {key: np.array(getattr(env.model.opt, key), copy=True)
                    for key in option_fields()}}


def assert_unchanged(env: mjfast.MujocoEnv, before: dict[str, Any]) -> None:
    after = snapshot(env)
    for key in ("qpos", "qvel", "eq_active"):
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    assert (after["time"], after["steps"]) == (before["time"], before["steps"])
    for key, value in before["opt"].items():
        np.testing.assert_array_equal(after["opt"][key], value, err_msg=f"opt.{key}")


# -- pause and step -------------------------------------------------------------------------------

def test_pause_freezes_simulated_time_while_running(sim: mjfast.MujocoEnv) -> None:
    sim.start(None)
    assert wait_for(lambda: sim.step_count > 100)
    sim.pause()
    assert sim.paused and sim.running
    frozen = (sim.step_count, sim.data.time)
    time.sleep(0.05)  # an observation window: nothing may step in it
    assert (sim.step_count, sim.data.time) == frozen
    sim.resume()
    assert not sim.paused
    assert wait_for(lambda: sim.step_count > frozen[0] + 100)


def test_stepping_while_paused_runs_exactly_n_steps_and_stays_paused(sim: mjfast.MujocoEnv
                                                                     ) -> None:
    sim.start(None)
    assert wait_for(lambda: sim.step_count > 10)
    sim.pause()
    steps, sim_time = sim.step_count, sim.data.time
    sim.step(7)
    assert sim.step_count == steps + 7
    assert sim.data.time == pytest.approx(sim_time + 7 * DT, abs=1e-12)
    time.sleep(0.02)
    assert sim.paused and sim.step_count == steps + 7


def test_step_zero_returns_at_once_and_negative_is_a_value_error(sim: mjfast.MujocoEnv) -> None:
    sim.step(0)
    assert sim.step_count == 0
    with pytest.raises(ValueError, match="n >= 0"):
        sim.step(-1)


def test_step_while_running_and_not_paused_is_a_logic_error(sim: mjfast.MujocoEnv) -> None:
    sim.start(None)
    with pytest.raises(mjfast.LogicError, match="pause"):
        sim.step(1)


def test_pause_before_start_starts_paused_and_stop_clears_it(sim: mjfast.MujocoEnv) -> None:
    sim.pause()
    sim.start(None)
    time.sleep(0.03)
    assert sim.running and sim.paused and sim.step_count == 0
    sim.stop()
    assert not sim.paused
    sim.start(None)
    assert wait_for(lambda: sim.step_count > 0)


def test_resume_re_anchors_the_pacing_without_a_catch_up_burst(sim: mjfast.MujocoEnv) -> None:
    sim.start(1.0)
    assert wait_for(lambda: sim.data.time > 0.05)
    sim.pause()
    time.sleep(0.3)  # a catch-up would replay these 0.3 s at once after resume
    resumed_at, sim_start = time.perf_counter(), sim.data.time
    sim.resume()
    assert wait_for(lambda: sim.data.time > sim_start + 0.05)
    wall = time.perf_counter() - resumed_at
    assert sim.data.time - sim_start <= wall + 0.02


def test_step_count_is_exact_and_reset_by_reset_and_reload(sim: mjfast.MujocoEnv) -> None:
    sim.step(13)
    assert sim.step_count == 13
    sim.reset()
    assert sim.step_count == 0
    sim.step(3)
    sim.reload()
    assert sim.step_count == 0
    sim.start(None)
    assert wait_for(lambda: sim.step_count > 50)
    sim.stop()
    assert sim.step_count == sim.statistics()["env"]["steps"] - 13 - 3


def test_a_users_pause_stays_in_force_through_reset_reload_and_other_calls(
        sim: mjfast.MujocoEnv) -> None:
    sim.start(None)
    assert wait_for(lambda: sim.step_count > 10)
    sim.pause()
    sim.reset("lifted")
    sim.set_joint_state({"hinge": 0.2})
    sim.apply_options({"timestep": 0.001})
    sim.reload()
    time.sleep(0.03)
    assert sim.paused and sim.running and sim.step_count == 0 and sim.data.time == 0.0


def test_statistics_and_info_show_paused_and_step_count(sim: mjfast.MujocoEnv) -> None:
    sim.step(4)
    sim.pause()
    assert {"paused": True, "step_count": 4}.items() <= sim.statistics()["env"].items()
    assert {"paused": True, "step_count": 4}.items() <= sim.info().items()


# -- reset ----------------------------------------------------------------------------------------

class ResetWitness(mjfast.MujocoPlugin):
    """Keeps the qpos and time its reset() saw."""

    seen: ClassVar[list[tuple[np.ndarray, float]]] = []

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.data = data
        return True

    def reset(self) -> None:
        ResetWitness.seen.append((self.data.qpos.copy(), float(self.data.time)))


def test_reset_overrides_are_resolved_after_the_keyframe_and_plugins_see_them(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    ResetWitness.seen = []
    env = make_env(XML, params={"MujocoPlugins": [{"type": register(ResetWitness)}]})
    env.step(10)
    env.reset("lifted", joint_positions={"hinge": -0.25, "tip_ball": [0, 0, 0, 2]},
              joint_velocities={"ball_free": [1, 0, 0, 0, 0, 0]})
    key = env.model.key("lifted").qpos
    np.testing.assert_array_equal(env.data.qpos[:14], key[:14])  # from the keyframe
    assert env.data.qpos[14] == -0.25                             # overridden after it
    np.testing.assert_array_equal(env.data.qpos[15:], [0, 0, 0, 1])  # normalised
    np.testing.assert_array_equal(env.data.qvel[:6], [1, 0, 0, 0, 0, 0])
    assert env.data.sensordata[0] == -0.25  # mj_forward ran
    assert env.data.time == 0.0 and env.step_count == 0
    ((qpos, reset_time),) = ResetWitness.seen
    np.testing.assert_array_equal(qpos, env.data.qpos)
    assert reset_time == 0.0


def test_reset_keep_time_keeps_the_clock(sim: mjfast.MujocoEnv) -> None:
    sim.step(25)
    sim.reset("lifted", keep_time=True)
    assert sim.data.time == pytest.approx(25 * DT)
    assert sim.data.qpos[2] == 1.0
    sim.reset()
    assert sim.data.time == 0.0


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"joint_positions": {"hinj": 0.1}}, KeyError, "did you mean 'hinge'"),
    ({"joint_positions": {"ball_free": [0, 0, 1]}}, ValueError, "expected 7 numbers"),
    ({"joint_velocities": {"tip_ball": [0, 0, 0, 0]}}, ValueError, "expected 3 numbers"),
    ({"joint_positions": {"hinge": math.nan}}, ValueError, "finite"),
    ({"joint_positions": {"tip_ball": [0, 0, 0, 0]}}, ValueError, "zero quaternion"),
    ({"joint_positions": {"hinge": "high"}}, ValueError, "expected 1 number"),
    ({"joint_positions": [0.1]}, ValueError, "mapping"),
    ({"keep_time": 1}, ValueError, "keep_time"),
])
def test_invalid_reset_overrides_are_rejected_whole(sim: mjfast.MujocoEnv, kwargs: dict[str, Any],
                                                    error: type[Exception], match: str) -> None:
    sim.step(5)
    before = snapshot(sim)
    with pytest.raises(error, match=match):
        sim.reset("lifted", **{"joint_positions": {"hinge": 0.3}, **kwargs})
    assert_unchanged(sim, before)


def test_reset_clears_staged_commands_and_applied_forces(sim: mjfast.MujocoEnv) -> None:
    sim.control.write(qfrc_applied=np.full(sim.model.nv, 5.0),
                      xfrc_applied=np.full((sim.model.nbody, 6), 1.0))
    sim.step(1)
    assert sim.data.qfrc_applied[0] == 5.0
    sim.reset()
    sim.step(1)
    assert not sim.data.qfrc_applied.any() and not sim.data.xfrc_applied.any()


# -- joint state ----------------------------------------------------------------------------------

def test_joint_state_round_trip_and_forward(sim: mjfast.MujocoEnv) -> None:
    sim.set_joint_state(positions={"hinge": 0.4, "tip_ball": [2, 0, 0, 0]},
                        velocities={"hinge": -1.0})
    states = sim.get_joint_state()
    assert set(states) == {"ball_free", "held_free", "hinge", "tip_ball"}
    assert isinstance(states["hinge"], JointState)
    assert states["hinge"].position.shape == (1,) and states["hinge"].position[0] == 0.4
    assert states["hinge"].velocity[0] == -1.0
    np.testing.assert_array_equal(states["tip_ball"].position, [1, 0, 0, 0])
    assert states["ball_free"].position.shape == (7,)
    assert states["ball_free"].velocity.shape == (6,)
    assert sim.data.sensordata[0] == 0.4  # derived quantities follow at once
    only = sim.get_joint_state(["hinge"])
    assert list(only) == ["hinge"]
    only["hinge"].position[0] = 9.0  # a copy
    assert sim.data.qpos[14] == 0.4


def test_set_joint_state_is_all_or_nothing(sim: mjfast.MujocoEnv) -> None:
    before = snapshot(sim)
    with pytest.raises(KeyError, match=r"no joint named 'hing'.*did you mean 'hinge'"):
        sim.set_joint_state(positions={"hinge": 0.2}, velocities={"hing": 1.0})
    with pytest.raises(KeyError, match="'nope'"):
        sim.get_joint_state(["hinge", "nope"])
    assert_unchanged(sim, before)


# -- body state -----------------------------------------------------------------------------------

def test_free_ball_at_one_metre_per_second_without_gravity_moves_one_metre_per_second(
        sim: mjfast.MujocoEnv) -> None:
    sim.apply_options({"gravity": [0, 0, 0]})
    sim.set_body_state({"ball": {"pos": [0, 0, 1], "linvel": [1, 0, 0]}})
    sim.step(500)
    state = sim.get_body_state("ball")
    assert isinstance(state, BodyState)
    np.testing.assert_allclose(state.pos, [500 * DT, 0, 1], atol=1e-9)
    np.testing.assert_allclose(state.linvel, [1, 0, 0], atol=1e-9)


def test_body_state_is_that_of_the_current_qpos(sim: mjfast.MujocoEnv) -> None:
    sim.apply_options({"gravity": [0, 0, 0]})
    sim.set_body_state({"ball": {"pos": [0, 0, 1], "linvel": [2, 0, 0]}})
    sim.step(1)  # after mj_step, data.xpos is that of the state before the step
    np.testing.assert_allclose(sim.get_body_state("ball").pos, sim.data.qpos[:3], atol=1e-12)


def test_angular_velocity_is_spoken_in_world_axes(sim: mjfast.MujocoEnv) -> None:
    sim.apply_options({"gravity": [0, 0, 0]})
    # A quarter turn about x: the body's z axis is the world's -y.
    half = math.sqrt(0.5)
    sim.set_body_state({"ball": {"pos": [0, 0, 1], "quat": [half, half, 0, 0],
                                 "angvel": [0, 0, 1]}})
    # MuJoCo stores it in body axes: world z is body y.
    np.testing.assert_allclose(sim.data.qvel[3:6], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(sim.get_body_state("ball").angvel, [0, 0, 1], atol=1e-12)
    sim.step(round((math.pi / 2) / DT))  # a quarter turn about world z
    rotation = np.empty(9)
    mujoco.mju_quat2Mat(rotation, sim.get_body_state("ball").quat)
    # The body x axis was world x; a quarter turn about world z takes it to world y.
    np.testing.assert_allclose(rotation.reshape(3, 3)[:, 0], [0, 1, 0], atol=1e-3)


def test_relative_frame_pose_and_twist(sim: mjfast.MujocoEnv) -> None:
    sim.apply_options({"gravity": [0, 0, 0]})
    # "rotated" sits at (1, 1, 1), turned 90 degrees about z: its x axis is world y.
    sim.set_body_state({"ball": {"pos": [1, 0, 0], "quat": [1, 0, 0, 0], "linvel": [1, 0, 0],
                                 "angvel": [0, 0, 2]}}, frame="rotated")
    world = sim.get_body_state("ball")
    np.testing.assert_allclose(world.pos, [1, 2, 1], atol=1e-12)
    half = math.sqrt(0.5)
    np.testing.assert_allclose(world.quat, [half, 0, 0, half], atol=1e-12)  # the frame's
    np.testing.assert_allclose(world.linvel, [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(world.angvel, [0, 0, 2], atol=1e-12)
    relative = sim.get_body_state("ball", frame="rotated")
    np.testing.assert_allclose(relative.pos, [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(relative.linvel, [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(relative.quat, [1, 0, 0, 0], atol=1e-12)


def test_omitted_velocities_become_zero_only_when_the_pose_is_set(sim: mjfast.MujocoEnv) -> None:
    sim.set_body_state({"ball": {"linvel": [1, 2, 3], "angvel": [0, 0, 1]}})
    sim.set_body_state({"ball": {"angvel": [1, 0, 0]}})  # linvel kept
    np.testing.assert_allclose(sim.get_body_state("ball").linvel, [1, 2, 3], atol=1e-12)
    sim.set_body_state({"ball": {"quat": [0, 0, 0, 3]}})  # normalised; velocities zeroed
    state = sim.get_body_state("ball")
    np.testing.assert_allclose(state.quat, [0, 0, 0, 1], atol=1e-12)
    assert not state.linvel.any() and not state.angvel.any()


@pytest.mark.parametrize(("states", "frame", "error", "match"), [
    ({"bal": {"pos": [0, 0, 2]}}, None, KeyError, "did you mean 'ball'"),
    ({"pendulum": {"pos": [0, 0, 2]}}, None, ValueError, "no free joint"),
    ({"held": {"position": [0, 0, 2]}}, None, ValueError, "unknown field 'position'"),
    ({"held": {"quat": [0, 0, 0, 0]}}, None, ValueError, "zero quaternion"),
    ({"held": {"pos": [0, 0, math.inf]}}, None, ValueError, "finite"),
    ({"held": {"linvel": [0, 0]}}, None, ValueError, "expected 3 numbers"),
    ({"held": {"pos": [0, 0, 2]}}, "nowhere", KeyError, "no body named 'nowhere'"),
])
def test_set_body_state_batches_are_atomic(sim: mjfast.MujocoEnv, states: dict[str, Any],
                                           frame: str | None, error: type[Exception],
                                           match: str) -> None:
    before = snapshot(sim)
    with pytest.raises(error, match=match):
        sim.set_body_state({"ball": {"pos": [3, 3, 3]}, **states}, frame=frame)
    assert_unchanged(sim, before)


def test_get_body_state_of_an_unknown_body_lists_close_matches(sim: mjfast.MujocoEnv) -> None:
    with pytest.raises(KeyError, match="did you mean 'held'"):
        sim.get_body_state("hold")
    with pytest.raises(KeyError, match="no body named 'x'"):
        sim.get_body_state("ball", frame="x")


# -- runtime options ------------------------------------------------------------------------------

def test_option_fields_are_those_of_the_installed_mujoco() -> None:
    properties = {name for name in dir(mujoco.MjOption)
                  if isinstance(getattr(mujoco.MjOption, name), property)}
    assert set(option_fields()) == properties


def test_apply_options_sets_fields_enums_and_flags(sim: mjfast.MujocoEnv) -> None:
    sim.apply_options({"timestep": 0.001, "integrator": "RK4", "cone": "Elliptic",
                       "solver": int(mujoco.mjtSolver.mjSOL_CG), "iterations": 7,
                       "wind": [1, 2, 3], "disable": {"contact": True, "gravity": True},
                       "enable": {"energy": True}})
    opt = sim.model.opt
    assert (opt.timestep, opt.iterations) == (0.001, 7)
    assert opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    assert opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert opt.solver == mujoco.mjtSolver.mjSOL_CG
    np.testing.assert_array_equal(opt.wind, [1, 2, 3])
    assert opt.disableflags == (mujoco.mjtDisableBit.mjDSBL_CONTACT
                                | mujoco.mjtDisableBit.mjDSBL_GRAVITY)
    assert opt.enableflags == mujoco.mjtEnableBit.mjENBL_ENERGY
    sim.apply_options({"disable": {"gravity": False}})
    assert opt.disableflags == mujoco.mjtDisableBit.mjDSBL_CONTACT
    sim.step(1)
    assert sim.data.time == pytest.approx(0.001)


@pytest.mark.parametrize(("patch", "match"), [
    ({"timestpe": 0.001}, "unknown key 'timestpe'.*did you mean 'timestep'"),
    ({"timestep": 0.0}, "options/timestep: expected a positive number"),
    ({"timestep": -1}, "options/timestep"),
    ({"integrator": "rk5"}, "options/integrator.*rk4"),
    ({"integrator": 99}, "options/integrator"),
    ({"gravity": [0, 0]}, r"options/gravity: expected finite numbers of shape \(3,\)"),
    ({"gravity": [0, 0, math.nan]}, "options/gravity"),
    ({"impratio": math.inf}, "options/impratio"),
    ({"iterations": 2.5}, "options/iterations"),
    ({"iterations": True}, "options/iterations"),
    ({"disable": {"contacts": True}}, "options/disable: unknown flag 'contacts'.*'contact'"),
    ({"disable": {"contact": 1}}, "options/disable/contact: expected a bool"),
    ({"enable": ["energy"]}, "options/enable: expected a mapping"),
])
def test_invalid_options_are_rejected_whole_naming_the_key(sim: mjfast.MujocoEnv,
                                                           patch: dict[str, Any],
                                                           match: str) -> None:
    before = snapshot(sim)
    with pytest.raises(mjfast.ConfigError, match=match):
        sim.apply_options({"gravity": [0, 0, 0], "timestep": 0.004, **patch})
    assert_unchanged(sim, before)


def test_disabling_contacts_lets_the_ball_fall_through_the_floor(sim: mjfast.MujocoEnv) -> None:
    sim.step(250)
    assert sim.get_body_state("ball").pos[2] == pytest.approx(0.1, abs=0.01)  # on the floor
    sim.apply_options({"disable": {"contact": True}})
    sim.step(250)
    assert sim.get_body_state("ball").pos[2] < -0.2


def test_options_parameter_applies_at_construction_and_reload_before_plugins_load(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    seen: list[float] = []

    class Looker(mjfast.MujocoPlugin):
        def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
            seen.append(float(model.opt.timestep))
            return True

    params = mjfast.ParameterServer({"MujocoPlugins": [{"type": register(Looker)}],
                                     "mujoco_server": {"options": {"timestep": 0.005,
                                                                   "integrator": "implicitfast"}}})
    env = make_env(XML, params=params)
    assert env.model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    env.apply_options({"timestep": 0.001})  # runtime changes are the model's, not the parameter's
    params.set("/mujoco_server/options/timestep", 0.004)
    env.reload()
    assert seen == [0.005, 0.004]
    assert env.model.opt.timestep == 0.004


def test_an_invalid_options_parameter_fails_construction_and_reload(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    with pytest.raises(mjfast.ConfigError, match="options/timestep"):
        make_env(XML, params={"mujoco_server": {"options": {"timestep": "fast"}}})
    env = make_env(XML)
    env.params.set("/mujoco_server/options", {"gravty": [0, 0, 0]})
    with pytest.raises(mjfast.ConfigError, match="did you mean 'gravity'"):
        env.reload()
    assert env.model_generation == 1


# -- equality constraints -------------------------------------------------------------------------

def test_turning_an_equality_off_lets_the_held_body_fall(sim: mjfast.MujocoEnv) -> None:
    sim.step(250)
    assert sim.get_body_state("held").pos[2] == pytest.approx(1.0, abs=0.01)
    sim.set_equality_active("hold", False)
    assert not sim.data.eq_active[0]
    sim.step(250)
    assert sim.get_body_state("held").pos[2] < 0.0  # it falls through: no contacts for it
    sim.set_equality_active("hold", True)
    assert sim.data.eq_active[0]


def test_set_equality_active_validates(sim: mjfast.MujocoEnv) -> None:
    before = snapshot(sim)
    with pytest.raises(KeyError, match="did you mean 'hold'"):
        sim.set_equality_active("hld", False)
    with pytest.raises(ValueError, match="active must be a bool"):
        sim.set_equality_active("hold", 0)
    assert_unchanged(sim, before)


# -- real-time factor and info --------------------------------------------------------------------

@pytest.mark.parametrize("factor", [0, -1.0, math.nan, math.inf, True, "2"])
def test_invalid_realtime_factors_are_value_errors(sim: mjfast.MujocoEnv, factor: Any) -> None:
    with pytest.raises(ValueError, match="realtime_factor"):
        sim.set_realtime_factor(factor)


@pytest.mark.parametrize("factor", [0, -1.0, math.nan, math.inf, True, "2", 10**400, -10**400])
def test_start_refuses_the_factors_set_realtime_factor_refuses(sim: mjfast.MujocoEnv,
                                                               factor: Any) -> None:
    # One rule (EnvCore::checked_realtime_factor) for start, set_realtime_factor and the CLI.
    message = f"realtime_factor must be a positive finite number or None, got {factor!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        sim.start(factor)
    assert not sim.running
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _core.checked_realtime_factor(factor)
    assert _core.checked_realtime_factor(np.float32(0.5)) == 0.5
    assert _core.checked_realtime_factor(None) is None


def test_set_realtime_factor_changes_a_running_pace_at_once(sim: mjfast.MujocoEnv) -> None:
    sim.start(0.01)  # 5 steps per wall second
    assert sim.realtime_factor == 0.01
    time.sleep(0.05)
    slow = sim.step_count
    assert slow < 10
    sim.set_realtime_factor(None)
    assert sim.realtime_factor is None
    assert wait_for(lambda: sim.step_count > slow + 2000, timeout=5.0)
    sim.set_realtime_factor(1.0)
    time.sleep(0.6)
    assert 0.5 < sim.info()["measured_realtime_factor"] < 1.5


def test_info(make_env: Callable[..., mjfast.MujocoEnv], tmp_path: Path) -> None:
    path = tmp_path / "scene.xml"
    path.write_text(XML)
    env = make_env(str(path))
    env.step(3)
    info = env.info()
    assert info == {"model_name": "simctl", "model_source": str(path), "model_generation": 1,
                    "plugin_generation": 1, "loads": 1, "running": False, "paused": False,
                    "step_count": 3, "time": pytest.approx(3 * DT), "realtime_factor": None,
                    "measured_realtime_factor": pytest.approx(info["measured_realtime_factor"]),
                    "randomization": []}
    env.reload(XML)
    assert {"model_source": "<string>", "loads": 2, "step_count": 0}.items() <= env.info().items()
    model_env = make_env(mujoco.MjModel.from_xml_string(XML))
    assert model_env.info()["model_source"] == "<MjModel>"


# -- refusal from inside plugin callbacks ---------------------------------------------------------

CALLS: dict[str, Callable[[mjfast.MujocoEnv], Any]] = {
    "pause": lambda env: env.pause(),
    "resume": lambda env: env.resume(),
    "reset": lambda env: env.reset(),
    "get_joint_state": lambda env: env.get_joint_state(),
    "set_joint_state": lambda env: env.set_joint_state({"hinge": 0.1}),
    "get_body_state": lambda env: env.get_body_state("ball"),
    "set_body_state": lambda env: env.set_body_state({"ball": {"pos": [0, 0, 1]}}),
    "apply_options": lambda env: env.apply_options({"timestep": 0.001}),
    "set_equality_active": lambda env: env.set_equality_active("hold", False),
    "set_realtime_factor": lambda env: env.set_realtime_factor(2.0),
    "info": lambda env: env.info(),
    "service": lambda env: env.bus.call("/mujoco_server/info", None),
}


class Meddler(mjfast.MujocoPlugin):
    """Tries CALLS[config["call"]] from the callback named config["callback"]."""

    errors: ClassVar[list[BaseException]] = []

    def attempt(self, callback: str) -> None:
        if self.config["callback"] == callback:
            try:
                CALLS[self.config["call"]](self.env)
            except mjfast.LogicError as error:
                Meddler.errors.append(error)
                raise

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.attempt("load")
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.attempt("control_callback")

    def reset(self) -> None:
        self.attempt("reset")


class ControlMeddler(mjfast.ControlPlugin):
    def init(self, node: mjfast.Node, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.env.get_body_state("ball")
        return True

    def on_reset(self, data: mujoco.MjData) -> None:
        self.env.set_joint_state({"hinge": 0.1})

    def cleanup(self) -> None:
        pass


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("callback", ["load", "control_callback", "reset"])
def test_section_13_calls_from_plugin_callbacks_are_logic_errors(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str], call: str,
        callback: str) -> None:
    Meddler.errors = []
    env = make_env(XML, params={"MujocoPlugins": [
        {"name": "meddler", "type": register(Meddler), "call": call, "callback": callback}]})
    if callback == "load":
        (info,) = env.plugins
        assert info.state is mjfast.PluginState.FAILED
        assert "LogicError" in info.failure.message
    else:
        with pytest.raises(mjfast.PluginError) as raised:
            env.step(1) if callback == "control_callback" else env.reset()
        assert isinstance(raised.value.__cause__, mjfast.LogicError)
    (error,) = Meddler.errors
    assert "inside a plugin callback" in str(error)


def test_control_plugin_init_and_on_reset_are_refused_too(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    env = make_env(XML, params={"MujocoPlugins": [{"type": register(ControlMeddler)}]})
    (info,) = env.plugins
    assert info.state is mjfast.PluginState.FAILED
    assert "inside a plugin callback" in info.failure.message


# -- concurrency ----------------------------------------------------------------------------------

CONCURRENCY_SCRIPT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import mjfast
    sys.path[:0] = {tests!r}
    from test_sim_control import XML

    env = mjfast.MujocoEnv(XML)
    env.start(None)
    stop = threading.Event()
    failures = []

    def control_loop():
        while not stop.is_set():
            state = env.control.read()
            quat = state.qpos[3:7]
            if abs(np.linalg.norm(quat) - 1) > 1e-6:
                failures.append(f"torn quaternion {{quat}}")
            env.control.write(qfrc_applied=np.zeros(env.model.nv))

    reader = threading.Thread(target=control_loop)
    reader.start()
    try:
        for i in range(60):
            env.pause()
            assert env.paused
            steps = env.step_count
            env.step(3)
            assert env.step_count == steps + 3, "paused stepping not exact"
            env.resume()
            env.set_body_state({{"ball": {{"pos": [0, 0, 1], "quat": [1, 1, 0, 0]}}}})
            state = env.get_body_state("ball")
            assert abs(np.linalg.norm(state.quat) - 1) < 1e-9
            env.set_joint_state({{"hinge": 0.1 * (i % 5)}}, {{"hinge": 0.0}})
            env.get_joint_state(["hinge", "tip_ball"])
            gravity = [0, 0, -float(i % 10)]
            env.apply_options({{"gravity": gravity}})
            assert list(env.model.opt.gravity) == gravity, "option not visible"
            env.set_equality_active("hold", bool(i % 2))
            assert bool(env.data.eq_active[0]) == bool(i % 2), "equality not visible"
            env.set_realtime_factor(None if i % 3 else 1000.0)
            env.reset("lifted" if i % 2 else None, joint_positions={{"hinge": 0.2}},
                      keep_time=bool(i % 4))
            env.info()
            env.bus.call("/mujoco_server/statistics", None)
            if i % 20 == 19:
                env.reload()
        env.set_realtime_factor(None)
        assert env.running and not env.paused
        steps = env.step_count
        for _ in range(1000):
            if env.step_count > steps:
                break
            threading.Event().wait(0.005)
        assert env.step_count > steps, "the physics thread stopped stepping"
    finally:
        stop.set()
        reader.join()
        env.close()
    assert not failures, failures[:3]
    print("ok")
""")


def test_every_call_in_a_loop_while_the_physics_thread_runs_unpaced() -> None:
    script = CONCURRENCY_SCRIPT.format(tests=[str(path) for path in TEST_PATHS])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


# -- hardening 3: body twists, quaternions, names with '/' ----------------------------------------

# Bodies whose centre of mass is away from their frame's origin: a free box with an offset geom,
# and a hinged link with an explicit inertial offset.
OFFSET_COM_XML = """
<mujoco>
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="box" pos="0 0 1" euler="10 20 30">
      <freejoint/>
      <geom type="box" size=".1 .2 .3" pos=".4 -.3 .2" mass="2"/>
    </body>
    <body name="arm" pos="1 0 1">
      <joint name="swing" axis="0 1 0"/>
      <inertial pos=".5 0 0" mass="1" diaginertia=".01 .01 .01"/>
      <body name="hand" pos=".8 0 0" euler="0 0 45">
        <joint name="twist" axis="1 0 0"/>
        <geom type="box" size=".05 .05 .05" pos="0 .3 0" mass=".5"/>
      </body>
    </body>
    <body name="frame" pos="0 1 0" euler="30 0 60"/>
    <body name="pivoted" pos="0 -1 1" euler="0 40 0">
      <joint type="free" pos=".3 0 .1"/>
      <geom type="box" size=".1 .1 .1" pos="-.2 .1 0" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def finite_difference_velocity(env: mjfast.MujocoEnv, body: str) -> np.ndarray:
    """d xpos / dt of `body`'s frame origin, by integrating qpos over a tiny time."""
    model, h = env.model, 1e-7
    data = mujoco.MjData(model)
    data.qpos[:] = env.data.qpos
    mujoco.mj_kinematics(model, data)
    before = data.xpos[model.body(body).id].copy()
    mujoco.mj_integratePos(model, data.qpos, env.data.qvel, h)
    mujoco.mj_kinematics(model, data)
    return (data.xpos[model.body(body).id] - before) / h


def test_body_linvel_is_the_velocity_of_the_frame_origin_not_the_com(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(OFFSET_COM_XML)
    env.set_joint_state(velocities={"swing": 1.5, "twist": -2.0})
    env.set_body_state({"box": {"linvel": [0.3, -0.2, 0.5], "angvel": [1.0, -2.0, 0.7]},
                        "pivoted": {"linvel": [0.1, 0.2, 0.3], "angvel": [-1.0, 0.5, 2.0]}})
    reference = mujoco.MjData(env.model)
    reference.qpos[:], reference.qvel[:] = env.data.qpos, env.data.qvel
    mujoco.mj_forward(env.model, reference)
    for body in ("box", "arm", "hand", "pivoted"):
        state = env.get_body_state(body)
        expected = finite_difference_velocity(env, body)
        np.testing.assert_allclose(state.linvel, expected, atol=1e-5, err_msg=body)
        twist = np.empty(6)
        mujoco.mj_objectVelocity(env.model, reference, mujoco.mjtObj.mjOBJ_XBODY,
                                 env.model.body(body).id, twist, 0)
        np.testing.assert_allclose(state.linvel, twist[3:], atol=1e-12, err_msg=body)
        np.testing.assert_allclose(state.angvel, twist[:3], atol=1e-12, err_msg=body)
        # The centre of mass moves differently here: what the old answer was.
        com = np.empty(6)
        mujoco.mj_objectVelocity(env.model, reference, mujoco.mjtObj.mjOBJ_BODY,
                                 env.model.body(body).id, com, 0)
        assert np.linalg.norm(com[3:] - state.linvel) > 0.1, body
    # Relative to another body: the same twist, rotated into its axes.
    rotation = env.data.xmat[env.model.body("frame").id].reshape(3, 3)
    relative = env.get_body_state("hand", frame="frame")
    np.testing.assert_allclose(relative.linvel,
                               rotation.T @ finite_difference_velocity(env, "hand"), atol=1e-5)


def test_set_body_state_linvel_round_trips_on_a_body_with_an_offset_com(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(OFFSET_COM_XML)
    env.set_body_state({"box": {"pos": [1, 2, 3], "quat": [0.5, 0.5, 0.5, 0.5],
                                "linvel": [1, 2, 3], "angvel": [0.5, -1, 2]}})
    state = env.get_body_state("box")
    np.testing.assert_allclose(state.linvel, [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(state.angvel, [0.5, -1, 2], atol=1e-12)
    np.testing.assert_allclose(finite_difference_velocity(env, "box"), [1, 2, 3], atol=1e-5)
    # A free joint placed away from the body's origin: its qvel is still the origin's twist.
    env.set_body_state({"pivoted": {"linvel": [1, 2, 3], "angvel": [0.5, -1, 2]}})
    np.testing.assert_allclose(env.get_body_state("pivoted").linvel, [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(finite_difference_velocity(env, "pivoted"), [1, 2, 3], atol=1e-5)
    env.set_body_state({"box": {"linvel": [-1, 0, 4]}}, frame="frame")
    np.testing.assert_allclose(env.get_body_state("box", frame="frame").linvel, [-1, 0, 4],
                               atol=1e-12)


@pytest.mark.parametrize("scale", [1e308, 1e-300, 5e-324])
def test_a_quaternion_of_extreme_magnitude_is_normalised_not_zeroed(sim: mjfast.MujocoEnv,
                                                                     scale: float) -> None:
    half = math.sqrt(0.5)
    sim.set_body_state({"ball": {"quat": [scale, scale, 0, 0]}})
    np.testing.assert_allclose(sim.get_body_state("ball").quat, [half, half, 0, 0], atol=1e-12)
    sim.set_joint_state({"tip_ball": [0, 0, -scale, scale]})
    np.testing.assert_allclose(sim.get_joint_state(["tip_ball"])["tip_ball"].position,
                               [0, 0, -half, half], atol=1e-12)
    sim.reset(joint_positions={"held_free": [0, 0, 1, 0, scale, 0, 0]})
    np.testing.assert_allclose(sim.data.qpos[10:14], [0, 1, 0, 0], atol=1e-12)


def test_a_quaternion_of_extreme_magnitude_in_the_initial_state_is_normalised(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params={"mujoco_server": {
        "initial_joint_positions": {"tip_ball": [1e308, 0, 1e308, 0]}}})
    half = math.sqrt(0.5)
    np.testing.assert_allclose(env.data.qpos[15:19], [half, 0, half, 0], atol=1e-12)


def test_messages_say_velocity(sim: mjfast.MujocoEnv) -> None:
    with pytest.raises(ValueError, match=r"joint 'hinge' velocity: expected 1 number") as error:
        sim.set_joint_state(velocities={"hinge": [1, 2]})
    assert "velocitie " not in str(error.value)


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_initial_joint_positions_take_names_with_a_slash_from_a_dict(
        make_env: Callable[..., mjfast.MujocoEnv], form: str) -> None:
    positions = ({"left/pan_pos": 0.3, "right/pan_pos": -0.2} if form == "flat"
                 else {"left": {"pan_pos": 0.3}, "right": {"pan_pos": -0.2}})
    env = make_env(attached_arms_model(), params={"mujoco_server": {
        "initial_joint_positions": positions, "initial_joint_velocities": {"left/pan_pos": 1}}})
    state = env.get_joint_state(["left/pan_pos", "right/pan_pos"])
    assert (state["left/pan_pos"].position[0], state["right/pan_pos"].position[0]) == (0.3, -0.2)
    assert state["left/pan_pos"].velocity[0] == 1.0


def test_initial_joint_positions_take_names_with_a_slash_from_yaml(
        make_env: Callable[..., mjfast.MujocoEnv], tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("mujoco_server:\n  initial_joint_positions:\n    left/pan_pos: 0.4\n"
                      "    right: {pan_pos: -0.1}\n")
    env = make_env(attached_arms_model(), params=params)
    assert env.data.joint("left/pan_pos").qpos[0] == 0.4
    assert env.data.joint("right/pan_pos").qpos[0] == -0.1
    env.params.set("/mujoco_server/initial_joint_positions/left/pan_pos", -0.6)
    env.reset()
    assert env.data.joint("left/pan_pos").qpos[0] == -0.6


def test_a_misspelt_name_with_a_slash_is_named_in_full(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    with pytest.raises(mjfast.ConfigError, match=r"no joint named 'left/pan_po' \(did you mean "
                                                 r"'left/pan_pos'"):
        make_env(attached_arms_model(),
                 params={"mujoco_server": {"initial_joint_positions": {"left": {"pan_po": 0.3}}}})
    env = make_env(attached_arms_model())
    before = snapshot(env)
    with pytest.raises(ValueError, match="'left/pan_pos' is given twice"):
        env.reset(joint_positions={"left/pan_pos": 0.1, "left": {"pan_pos": 0.2}})
    assert_unchanged(env, before)


def test_simulation_calls_take_names_with_a_slash(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(attached_arms_model(), namespace="/sim")
    env.reset(joint_positions={"left/pan_pos": 0.5, "free/joint": [0, 0, 3, 1, 0, 0, 0]})
    assert env.data.joint("left/pan_pos").qpos[0] == 0.5
    env.set_joint_state({"right": {"pan_pos": 0.25}}, {"right/pan_pos": 1.0})
    assert env.data.joint("right/pan_pos").qpos[0] == 0.25
    env.set_body_state({"free/box": {"pos": [1, 1, 1], "linvel": [0, 0, 1]}}, frame="left/link")
    state = env.get_body_state("free/box", frame="left/link")
    np.testing.assert_allclose(state.pos, [1, 1, 1], atol=1e-12)
    np.testing.assert_allclose(state.linvel, [0, 0, 1], atol=1e-12)
    reply = env.bus.call("/sim/get_joint_state", {"names": ["left/pan_pos"]})
    assert reply == {"left/pan_pos": {"position": [0.5], "velocity": [0.0]}}
    env.bus.call("/sim/set_joint_state", {"positions": {"left/pan_pos": -0.5}})
    assert env.data.joint("left/pan_pos").qpos[0] == -0.5
    reply = env.bus.call("/sim/get_body_state", {"body": "left/link", "frame": "right/base"})
    assert set(reply) == {"pos", "quat", "linvel", "angvel"}


# An unnamed free joint (as `<freejoint/>` in most models) on an unnamed body, and a named joint
# called `joint_3`, which keeps that name for itself (the unnamed joint 3 is left out).
UNNAMED_XML = """
<mujoco><worldbody>
  <body pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1" pos=".1 0 0" mass="1"/></body>
  <body name="arm"><joint name="elbow" axis="0 1 0"/><geom type="sphere" size=".1" mass="1"/>
    <body pos=".2 0 0"><joint type="ball"/><geom type="sphere" size=".1" mass="1"/>
      <body pos=".2 0 0"><joint axis="1 0 0"/><geom type="sphere" size=".1" mass="1"/>
        <body pos=".2 0 0"><joint name="joint_3" axis="0 0 1"/>
          <geom type="sphere" size=".1" mass="1"/></body></body></body></body>
</worldbody></mujoco>
"""


def test_unnamed_joints_and_bodies_are_named_by_kind_and_id(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(UNNAMED_XML, params={"mujoco_server": {"initial_joint_positions": {
        "joint_0": [1, 2, 3, 1, 0, 0, 0], "joint_2": [0, 1, 0, 0]}}})
    np.testing.assert_array_equal(env.data.qpos[:3], [1, 2, 3])
    states = env.get_joint_state()
    assert list(states) == ["joint_0", "elbow", "joint_2", "joint_3"]
    assert states["joint_3"].position.shape == (1,)  # the named one
    np.testing.assert_array_equal(states["joint_2"].position, [0, 1, 0, 0])
    assert list(env.get_joint_state([0])) == ["joint_0"]  # an index reports the same name
    env.set_joint_state({"joint_0": [0, 0, 2, 1, 0, 0, 0]}, {"joint_0": [0, 0, 1, 0, 0, 0]})
    env.reset(joint_positions={"joint_2": [0, 0, 1, 0]})
    np.testing.assert_array_equal(env.get_joint_state(["joint_2"])["joint_2"].position,
                                  [0, 0, 1, 0])
    env.set_body_state({"body_1": {"pos": [4, 5, 6], "linvel": [1, 0, 0]}})
    state = env.get_body_state("body_1", frame="arm")
    np.testing.assert_allclose(state.pos, [4, 5, 6], atol=1e-12)
    np.testing.assert_allclose(env.get_body_state("body_3").pos, env.data.xpos[3], atol=1e-12)
    with pytest.raises(KeyError, match="no body named 'body_2'"):
        env.get_body_state("body_2")  # body 2 is named: arm


@pytest.mark.parametrize("names", [b"\x00", bytearray(b"a"), {"hinge": 1}, 5])
def test_joint_names_must_be_a_list_of_names(sim: mjfast.MujocoEnv, names: object) -> None:
    with pytest.raises(ValueError, match="names must be a list of joint names"):
        sim.get_joint_state(names)


def test_a_joint_whose_name_begins_others_still_takes_the_nested_form(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    spec = mujoco.MjSpec.from_string("""
    <mujoco><worldbody><body name="turret"><joint name="left" axis="0 0 1"/>
      <geom type="sphere" size=".1" mass="1"/></body></worldbody></mujoco>""")
    arm = mujoco.MjSpec.from_string("""
    <mujoco><worldbody><body name="base" pos="1 0 0"><joint name="pan" axis="0 0 1"/>
      <geom type="sphere" size=".1" mass="1"/></body></worldbody></mujoco>""")
    spec.worldbody.add_frame().attach_body(arm.body("base"), "left/", "")
    model = spec.compile()
    env = make_env(model, params={"mujoco_server": {"initial_joint_positions": {
        "left/pan": 0.2}}})  # stored as left: {pan: 0.2}, though `left` is a joint too
    assert env.data.joint("left/pan").qpos[0] == 0.2
    env.reset(joint_positions={"left": 0.1, "left/pan": 0.3})  # a plain dict holds both
    assert (env.data.joint("left").qpos[0], env.data.joint("left/pan").qpos[0]) == (0.1, 0.3)
    # The parameter server cannot hold `left` as a value and as a namespace at once.
    with pytest.raises(mjfast.ConfigError, match="mapping key 'left/pan' sets"):
        make_env(model, params={"mujoco_server": {"initial_joint_positions": {
            "left": 0.1, "left/pan": 0.2}}})


def test_an_empty_mapping_names_nothing(sim: mjfast.MujocoEnv) -> None:
    before = snapshot(sim)
    with pytest.raises(ValueError, match="'pendulum' is an empty mapping"):
        sim.set_joint_state({"hinge": 0.3, "pendulum": {}})
    with pytest.raises(ValueError, match="joint 'hinge' position: expected 1 number"):
        sim.set_joint_state({"hinge": {}})
    assert_unchanged(sim, before)


# -- where a model comes from ---------------------------------------------------------------------


def test_one_function_tells_mjcf_text_from_a_path(tmp_path: Path) -> None:
    assert is_mjcf_string("<mujoco/>") and is_mjcf_string("\n  <mujoco/>")
    assert not is_mjcf_string("model.xml") and not is_mjcf_string(tmp_path / "<odd>.xml")
    env = mjfast.MujocoEnv("  \n" + XML)
    assert env.info()["model_source"] == "<string>"
    env.close()
