"""Ctrl-C and interpreter exit (SPEC §18, mjfast.sim.interrupts): an interrupt ends a step promptly
and fails no plugin, one during a load or reload is held until it is whole, the CLI exits 130 with
its statistics, and daemon threads inside mjfast calls at exit do not abort the process. Whatever
could hang runs in a child interpreter with a timeout."""

from __future__ import annotations

import signal
import time
from typing import Any

import numpy as np
import pytest

import mjfast
from support import (
    ControlCounter,
    Recording,
    finish_python,
    plugins_param,
    run_python,
    start_python,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout



# -- Ctrl-C -----------------------------------------------------------------------------------

_INTERRUPT_CHILD = """
    import threading, time, mjfast
    from support import ControlCounter, arm_xml
    mjfast.register_plugin("test/Counter", ControlCounter)
    params = {{"MujocoPlugins": [{{"type": "test/Counter"}}]}} if {with_plugin} else None
    env = mjfast.MujocoEnv(arm_xml(), params=params)
    def announce():
        while env.data.time == 0.0:
            time.sleep(0.0005)
        print("stepping", flush=True)
    threading.Thread(target=announce, daemon=True).start()
    try:
        env.step(2**63 - 1)
    except KeyboardInterrupt:
        steps = round(env.data.time / env.model.opt.timestep, 6)
        print("interrupted", steps == int(steps), flush=True)
    print("states", [p.state.name for p in env.plugins], [p.failure for p in env.plugins])
    env.step(1)
    env.close()
"""


@pytest.mark.parametrize("with_plugin", [False, True], ids=["no plugins", "python plugin"])
def test_ctrl_c_interrupts_step_promptly_and_fails_no_plugin(with_plugin: bool) -> None:
    child = start_python(_INTERRUPT_CHILD.format(with_plugin=with_plugin))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "stepping"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().strip()
        latency = time.monotonic() - sent
        rest, errors = finish_python(child)
    finally:
        child.kill()
    assert line == "interrupted True", errors
    # SPEC §18 asks for 100 ms; a loaded 2-core CI machine may delay the child's scheduling.
    assert latency < 1.0
    expected = "['ACTIVE'] [None]" if with_plugin else "[] []"
    assert rest.strip() == f"states {expected}"
    assert child.returncode == 0, errors


def test_step_accepts_any_count_up_to_int64_max(env: mjfast.MujocoEnv) -> None:
    env.step(0)
    env.step(np.int64(2))  # anything operator.index() takes
    env.step(True)
    assert env.step_count == 3
    # Out of range: a ValueError naming the limit (2**63 was pybind11's TypeError listing the
    # signatures and the env object's address); a non-integer: a TypeError naming its type.
    for n, shown in [(-1, "-1"), (2**63, str(2**63)), (-(2**70), "-1180591620717411303424"),
                     (10**5000, "an integer of 16610 bits")]:
        with pytest.raises(ValueError) as raised:
            env.step(n)
        assert str(raised.value) == f"step(n) needs n >= 0 and <= 2**63-1, got {shown}"
    for bad, type_name in [(1.5, "float"), ("3", "str"), (None, "NoneType"),
                           (np.float64(2.0), "numpy.float64"), (object(), "object")]:
        with pytest.raises(TypeError) as raised:
            env.step(bad)  # type: ignore[arg-type]
        assert str(raised.value) == f"step(n) takes an integer 0 <= n <= 2**63-1, got {type_name}"
        assert "0x" not in str(raised.value)
    assert env.step_count == 3


def test_keyboard_interrupt_and_system_exit_in_a_callback_are_not_plugin_failures(
        make_env: Any, register: Any, arm: str) -> None:
    raised: list[type[BaseException]] = [KeyboardInterrupt, SystemExit]

    class Interrupting(ControlCounter):
        def control_callback(self, model: Any, data: Any) -> None:
            super().control_callback(model, data)
            if raised and round(data.time / model.opt.timestep) == 2:  # the third step
                raise raised.pop(0)()

    name = register(Interrupting)
    env = make_env(arm, params=plugins_param(name))
    for expected in (KeyboardInterrupt, SystemExit):
        with pytest.raises(expected):
            env.step(10)
        plugin = env.plugins[0]
        assert (plugin.state, plugin.failure) == (mjfast.PluginState.ACTIVE, None)
        assert round(env.data.time / env.model.opt.timestep) == 3  # stopped after that step
        env.reset()
    env.step(10)  # still dispatched
    assert env.plugins[0].stats["callbacks"]["control_callback"]["calls"] == 16


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_interrupt_in_load_is_not_a_load_failure_and_the_others_load(
        make_env: Any, register: Any, arm: str, interrupt: type[BaseException]) -> None:
    class InterruptedLoad(Recording):
        def load(self, model: Any, data: Any) -> bool:
            raise interrupt()

    bad, good = register(InterruptedLoad), register(ControlCounter)
    with pytest.raises(interrupt):
        mjfast.MujocoEnv(arm, params=plugins_param(good))  # control: this one loads fine
        raise interrupt()
    env = make_env(arm, params=plugins_param(good))
    env.params.set("/mujoco_server/MujocoPlugins", [{"type": bad}, {"type": good}])
    with pytest.raises(interrupt):
        env.reload()
    states = [(p.state, p.failure) for p in env.plugins]
    assert states == [(mjfast.PluginState.UNLOADED, None), (mjfast.PluginState.ACTIVE, None)]
    env.step(2)
    assert env.plugins[1].stats["callbacks"]["control_callback"]["calls"] == 2


def test_ctrl_c_during_reload_completes_the_reload_then_raises() -> None:
    child = start_python("""
        import time, mjfast
        from support import Recording, arm_xml
        class SlowLoad(Recording):
            def load(self, model, data):
                print("loading", flush=True)
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline:  # Python work the signal lands in
                    pass
                return True
        mjfast.register_plugin("test/SlowLoad", SlowLoad)
        env = mjfast.MujocoEnv(arm_xml())
        env.params.set("/mujoco_server/MujocoPlugins",
                       [{"type": "test/SlowLoad"}, {"type": "test/SlowLoad", "name": "second"}])
        try:
            env.reload()
        except KeyboardInterrupt:
            print("interrupted", [p.state.name for p in env.plugins], flush=True)
        env.close()
    """)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "loading"
        child.send_signal(signal.SIGINT)
        out, errors = finish_python(child)
    finally:
        child.kill()
    assert out.strip().split("\n") == ["loading", "interrupted ['ACTIVE', 'ACTIVE']"], errors


def test_cli_demo_interrupted_prints_statistics_and_exits_130() -> None:
    child = start_python("""
        import sys
        from mjfast import cli
        step_chunk = cli.running.step_chunk
        def announcing(env, n, warn):
            step_chunk(env, n, warn)
            if not announcing.done:
                print("stepping", flush=True)
                announcing.done = True
        announcing.done = False
        cli.running.step_chunk = announcing
        sys.exit(cli.main(["demo", "--duration", "100000", "--no-progress"]))
    """)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "stepping"
        child.send_signal(signal.SIGINT)
        out, errors = finish_python(child)
    finally:
        child.kill()
    assert child.returncode == 130, errors
    assert "mjfast: interrupted" in errors and "Traceback" not in errors
    steps = [line.split() for line in out.splitlines() if line.split()[:1] == ["steps"]]
    assert steps and int(steps[0][1].replace(",", "")) > 0
    assert "PoseHoldPD" in out and "ACTIVE" in out  # the demo's controller was not failed


# -- interpreter exit ------------------------------------------------------------------------


def test_interpreter_exit_with_a_daemon_control_loop_is_clean() -> None:
    script = """
        import threading, mjfast
        from support import arm_xml
        class Reading(mjfast.ControlPlugin):
            def init(self, node, model, data):
                return True
            def update_read(self, model, data):
                sum(range(50))
            def cleanup(self):
                pass
        mjfast.register_plugin("test/Reading", Reading)
        env = mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [{"type": "test/Reading"}]})
        env.start(None)
        running = threading.Event()
        def loop():
            while True:
                env.control.read()
                running.set()
        threading.Thread(target=loop, daemon=True).start()
        running.wait()
        print("exiting")
    """
    for _ in range(8):
        result = run_python(script, timeout=60)
        assert (result.returncode, result.stdout.strip()) == (0, "exiting"), result.stderr
        assert "terminate" not in result.stderr
