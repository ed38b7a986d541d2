"""mjfast/ForwardCommand (plugins/forward_command.py): commands on its topic reach `ctrl`
through env.control, one at a time, without a lock held across the control calls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mjfast
from support import arm_xml, plugins_param, run_python

TOPIC = "/mujoco_server/ForwardCommand/commands"


@pytest.fixture
def env() -> Any:
    params = {"mujoco_server": plugins_param(
        {"type": "mjfast/ForwardCommand", "actuators": ["m0", "m1"]})}
    with mjfast.MujocoEnv(arm_xml(), params=params) as made:
        yield made


def statistics(env: Any) -> dict[str, float]:
    with env.acquire_plugin("ForwardCommand") as plugin:
        return plugin.statistics()


def test_a_command_is_written_to_its_actuators_and_the_rest_keep_their_values(env: Any) -> None:
    env.control.write(ctrl=np.full(env.model.nu, 0.125))
    env.step(1)
    env.bus.publish(TOPIC, {"data": [-0.5, 0.25]})
    env.step(1)  # staged commands reach ctrl right before the next mj_step
    ctrl = env.control.read().ctrl
    assert ctrl[:2].tolist() == [-0.5, 0.25]
    assert np.all(ctrl[2:] == 0.125)
    env.bus.publish(TOPIC, [0.75, -0.75])  # a plain sequence too
    env.step(1)
    assert env.control.read().ctrl[:2].tolist() == [0.75, -0.75]
    assert statistics(env) == {"applied": 2.0, "rejected": 0.0, "superseded": 0.0}


@pytest.mark.parametrize("message", [[1.0], [1.0, 2.0, 3.0], [0.0, float("nan")], "ab", 5])
def test_a_bad_command_is_counted_and_never_applied(env: Any, message: Any) -> None:
    env.bus.publish(TOPIC, {"data": [0.5, 0.5]})
    env.bus.publish(TOPIC, {"data": message})
    env.step(1)
    assert env.control.read().ctrl[:2].tolist() == [0.5, 0.5]
    assert statistics(env) == {"applied": 1.0, "rejected": 1.0, "superseded": 0.0}


def test_a_command_from_a_plugin_callback_while_another_thread_applies_one_does_not_hang() -> None:
    # Thread A's command is being applied: its first control.read() arms the control bridge,
    # which waits for a step boundary. Meanwhile the physics thread, inside a plugin callback
    # (holding the step), publishes a second command. Had ForwardCommand held a lock across
    # A's control calls, the physics thread would wait for that lock and A for the step: a hang.
    result = run_python("""
        import threading
        import numpy as np
        import mjfast
        from support import arm_xml, plugins_param

        TOPIC = "/mujoco_server/ForwardCommand/commands"
        entered, reading, crossed = threading.Event(), threading.Event(), threading.Event()

        class Crossing(mjfast.MujocoPlugin):
            def load(self, model, data):
                return True

            def control_callback(self, model, data):
                if crossed.is_set():
                    return
                entered.set()
                if reading.wait(10):  # thread A is inside its command's control.read()
                    self.env.bus.publish(TOPIC, {"data": [0.5, -0.5]})
                crossed.set()

        mjfast.register_plugin("test/Crossing", Crossing)
        params = {"mujoco_server": plugins_param(
            {"type": "mjfast/ForwardCommand", "actuators": ["m0", "m1"]},
            {"type": "test/Crossing"})}
        with mjfast.MujocoEnv(arm_xml(), params=params) as env:
            real_read = env.control.read
            def read():
                reading.set()
                return real_read()
            env.control.read = read
            env.start(None)
            assert entered.wait(10)
            sender = threading.Thread(
                target=env.bus.publish, args=(TOPIC, {"data": [0.25, 0.75]}), daemon=True)
            sender.start()
            sender.join(20)
            assert not sender.is_alive(), "thread A's command never finished"
            assert crossed.wait(20)
            env.stop()
            env.control.read = real_read
            env.step(1)
            print("ctrl", env.control.read().ctrl[:2].tolist())
            with env.acquire_plugin("ForwardCommand") as plugin:
                print("stats", plugin.statistics())
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    # The newest command wins (as in forward_command_controller's realtime buffer).
    assert "ctrl [0.5, -0.5]" in result.stdout
    assert "'applied': 2.0" in result.stdout, result.stdout


def test_a_flood_of_bad_commands_is_counted_and_logged_once_a_second(
        env: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="mjfast.plugins.forward_command"):
        for _ in range(500):
            env.bus.publish(TOPIC, {"data": [1.0]})
    env.step(1)
    assert statistics(env)["rejected"] == 500.0
    lines = [r for r in caplog.records if "command rejected" in r.getMessage()]
    # The first is logged at once; the rest of a burst shorter than a second are only counted.
    assert 1 <= len(lines) <= 2, [r.getMessage() for r in lines]
    assert "expected 2 values, got 1" in lines[0].getMessage()
