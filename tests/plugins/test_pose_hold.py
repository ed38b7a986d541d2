"""mjfast/PoseHoldPD, the shipped Python plugin the demo uses."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

import mjfast
from support import N_ARM_JOINTS, attached_arms_model


def hold_params(**config) -> dict:
    return {"MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold", "kp": 400.0,
                               "kd": 20.0, **config}]}


def test_it_holds_the_demo_arm_in_its_configured_pose(make_env):
    data = resources.files("mjfast") / "data"
    env = make_env(data / "demo_arm.xml", params=data / "demo.yaml")
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE
    target = env.params.get("/mujoco_server/MujocoPlugins")[0]["target"]
    env.step(2500)  # 5 simulated seconds
    for joint, position in target.items():
        # A PD law without gravity compensation sags a little under the arm's weight.
        assert env.data.joint(joint).qpos[0] == pytest.approx(position, abs=0.05), joint


def test_a_target_message_moves_the_pose_and_a_bad_one_moves_nothing(make_env, arm):
    env = make_env(arm, params=hold_params())
    env.bus.publish("/mujoco_server/hold/target", {"j0": 0.2})
    with env.acquire_plugin("hold") as hold:
        target = np.array(hold.target)
    assert target[0] == 0.2
    env.bus.publish("/mujoco_server/hold/target", {"j0": 0.5, "no_such_joint": 1.0})
    with env.acquire_plugin("hold") as hold:
        np.testing.assert_array_equal(hold.target, target)  # the bad message was refused whole
        assert len(hold.target) == N_ARM_JOINTS


# -- hardening 3: the actuator's gear and kind, load failures that say why, names with '/' --------

def one_joint_model(actuator: str, damping: float = 0.0) -> str:
    """A hinged link in zero gravity, driven by `actuator` (MJCF) on joint `hinge`."""
    return f"""
    <mujoco><option timestep="0.002" gravity="0 0 0"/><worldbody>
      <body name="link"><joint name="hinge" axis="0 1 0" damping="{damping}"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1"/></body>
    </worldbody><actuator>{actuator}</actuator></mujoco>"""


def hold_on(make_env, actuator: str, target: float = 0.5, **config):
    env = make_env(one_joint_model(actuator), params=hold_params(target={"hinge": target},
                                                                 **config))
    return env


@pytest.mark.parametrize("gear", [1.0, -1.0, -3.0, 0.25])
def test_a_motor_is_driven_through_its_gear_whatever_its_sign(make_env, gear) -> None:
    env = hold_on(make_env, f'<motor joint="hinge" gear="{gear}"/>', kp=20.0, kd=2.0)
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE
    env.step(3000)
    assert env.data.joint("hinge").qpos[0] == pytest.approx(0.5, abs=1e-3)


def test_a_position_servo_is_given_the_target_itself(make_env) -> None:
    env = hold_on(make_env, '<position joint="hinge" kp="30" kv="3" gear="-2" '
                            'ctrlrange="-3 3" ctrllimited="true"/>')
    env.step(1)
    assert env.data.ctrl[0] == pytest.approx(-2 * 0.5)  # the target, in actuator length
    env.step(3000)
    assert env.data.joint("hinge").qpos[0] == pytest.approx(0.5, abs=1e-3)


def test_a_force_actuator_with_a_gain_is_scaled_by_it(make_env) -> None:
    env = hold_on(make_env, '<general joint="hinge" gainprm="4" gear="-1"/>')
    env.step(3000)
    assert env.data.joint("hinge").qpos[0] == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize(("actuator", "why"), [
    ('<velocity name="spin" joint="hinge" kv="5"/>', "it is a velocity servo"),
    ('<intvelocity name="spin" joint="hinge" kp="5" actrange="-1 1"/>', "its dynamics are "
                                                                         "mjDYN_INTEGRATOR"),
    ('<motor name="spin" joint="hinge" gear="0"/>', "its gear or gain is zero"),
    ('<general name="spin" joint="hinge" biastype="affine" biasprm="1 0 0"/>',
     "neither a force actuator nor a position servo"),
])
def test_an_actuator_it_cannot_drive_is_a_load_failure_saying_why(make_env, actuator,
                                                                   why) -> None:
    env = hold_on(make_env, actuator)
    failure = env.plugins[0].failure
    assert failure is not None and failure.phase == "load"
    assert "cannot hold joint 'hinge'" in failure.message
    assert "actuator 'spin'" in failure.message and why in failure.message


def test_joints_leaves_out_a_joint_it_cannot_drive(make_env) -> None:
    xml = one_joint_model('<motor joint="hinge"/><velocity joint="other" kv="5"/>').replace(
        "</body>", '<body pos=".3 0 0"><joint name="other" axis="0 1 0"/>'
                   '<geom type="sphere" size=".02" mass=".1"/></body></body>')
    assert "cannot hold joint 'other'" in make_env(xml, params=hold_params()).plugins[0] \
        .failure.message
    env = make_env(xml, params=hold_params(joints=["hinge"], target={"hinge": 0.3}))
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE
    with env.acquire_plugin("hold") as hold:
        assert hold.statistics()["held_joints"] == 1


def test_a_position_servo_is_preferred_on_a_joint_with_two_actuators(make_env) -> None:
    env = hold_on(make_env, '<velocity joint="hinge" kv="1"/><position joint="hinge" kp="30"/>'
                            '<motor joint="hinge"/>')
    env.step(1)
    np.testing.assert_allclose(env.data.ctrl, [0.0, 0.5, 0.0])


@pytest.mark.parametrize(("model", "config", "fragment"), [
    ("<mujoco><worldbody/></mujoco>", {}, "no actuator driving a hinge or slide joint"),
    (None, {"joints": ["nope"]}, "joints: no joint named 'nope'; the model's joints: hinge"),
    (None, {"target": {"hinge": float("inf")}}, "the target of joint 'hinge' must be a finite"),
    (None, {"target": {"nope": 1.0}}, "no held joint 'nope'"),
    (None, {"kp": float("inf")}, "kp must be a finite number"),
])
def test_a_load_failure_carries_its_reason(make_env, model, config, fragment) -> None:
    env = make_env(model or one_joint_model('<motor joint="hinge"/>'), params=hold_params(**config))
    failure = env.plugins[0].failure
    assert failure is not None and failure.phase == "load"
    assert fragment in failure.message and "returned false" not in failure.message


def test_targets_name_joints_with_a_slash(make_env, tmp_path) -> None:
    params = tmp_path / "hold.yaml"
    params.write_text("MujocoPlugins:\n  - type: mjfast/PoseHoldPD\n    name: hold\n"
                      "    kp: 5.0\n    kd: 1.0\n"
                      "    target:\n      left/pan_pos: 0.4\n      right: {pan_pos: -0.4}\n")
    env = make_env(attached_arms_model(), params=params)
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE
    env.step(3000)
    assert env.data.joint("left/pan_pos").qpos[0] == pytest.approx(0.4, abs=1e-3)
    assert env.data.joint("right/pan_pos").qpos[0] == pytest.approx(-0.4, abs=1e-3)
    env.bus.publish("/mujoco_server/hold/target", {"left/pan_pos": 0.1, "right": {"pan_pos": 0.2}})
    with env.acquire_plugin("hold") as hold:
        np.testing.assert_array_equal(hold.target, [0.1, 0.2])
    env.bus.publish("/mujoco_server/hold/target", {"left/pan_pos": 0.7, "right/pan_pos": "up"})
    with env.acquire_plugin("hold") as hold:
        np.testing.assert_array_equal(hold.target, [0.1, 0.2])  # refused whole


@pytest.mark.parametrize("topic", ["/", "", "a/~b"])
def test_a_topic_that_names_no_topic_is_a_load_failure(make_env, arm, topic) -> None:
    env = make_env(arm, params=hold_params(topic=topic))
    assert env.plugins[0].state == mjfast.PluginState.FAILED
    assert "topic" in env.plugins[0].failure.message
