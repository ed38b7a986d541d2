"""mjfast/PoseHoldPD, the shipped Python plugin the demo uses."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

import mjfast
from support import N_ARM_JOINTS


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
