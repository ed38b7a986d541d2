"""SPEC §18 and the hardening issue: nothing a user or a plugin does crashes, hangs or silently
misbehaves. Whatever could crash or hang runs in a child interpreter with a timeout."""

from __future__ import annotations

import signal
import time
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from support import (
    SMALL_ARENA_STEPS_OK,
    WARNING_ARENA_XML,
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


# -- hooks replaced while running -----------------------------------------------------------


def test_hook_replaced_while_running_stops_the_thread_with_hook_ownership_error(
        make_env: Any, register: Any, arm: str) -> None:
    name = register(ControlCounter)
    env = make_env(arm, params=plugins_param(name))
    env.start(None)
    try:
        mujoco.set_mjcb_control(lambda m, d: None)
        deadline = time.monotonic() + 10
        while env.running and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not env.running
        with pytest.raises(mjfast.HookOwnershipError, match="mjcb_control"):
            env.stop()
    finally:
        mjfast.install_hooks()
    calls = env.plugins[0].stats["callbacks"]["control_callback"]["calls"]
    env.step(10)  # the hooks are back: dispatch resumes
    assert env.plugins[0].stats["callbacks"]["control_callback"]["calls"] == calls + 10


def test_hook_replaced_during_step_n_raises_and_steps_nothing_more(make_env: Any,
                                                                   arm: str) -> None:
    env = make_env(arm)
    mujoco.set_mjcb_passive(lambda m, d: None)
    time_before = env.data.time
    with pytest.raises(mjfast.HookOwnershipError, match="mjcb_passive"):
        env.step(100)
    assert env.data.time == time_before


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


# -- smaller defects ------------------------------------------------------------------------


@pytest.mark.parametrize("returned", [False, np.False_, 0, 0.0, "", []],
                         ids=lambda v: repr(v))
def test_a_false_load_result_is_a_load_failure(make_env: Any, register: Any, arm: str,
                                               returned: object) -> None:
    class FalseLoad(Recording):
        def load(self, model: Any, data: Any) -> Any:
            return returned

    env = make_env(arm, params=plugins_param(register(FalseLoad)))
    plugin = env.plugins[0]
    assert plugin.state == mjfast.PluginState.FAILED
    assert (plugin.failure.phase, plugin.failure.message) == ("load", "load() returned false")


@pytest.mark.parametrize("returned", [None, True, np.True_, 1])
def test_a_true_or_missing_load_result_loads(make_env: Any, register: Any, arm: str,
                                             returned: object) -> None:
    class TrueLoad(Recording):
        def load(self, model: Any, data: Any) -> Any:
            return returned

    env = make_env(arm, params=plugins_param(register(TrueLoad)))
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE


@pytest.mark.parametrize("figures", [[1, 2], {"a": "x"}, {"a": 1j}, {"a": True}, {1: 2.0},
                                     {"a": None}], ids=repr)
def test_odd_statistics_results_name_what_was_expected(make_env: Any, register: Any, arm: str,
                                                       figures: object) -> None:
    class OddStatistics(Recording):
        def statistics(self) -> Any:
            return figures

    env = make_env(arm, params=plugins_param(register(OddStatistics)))
    failure = env.plugins[0].failure
    assert failure is not None and failure.phase == "statistics"
    assert "statistics() must return a dict of str to real numbers" in failure.message


def test_statistics_accept_numpy_numbers(make_env: Any, register: Any, arm: str) -> None:
    class NumpyStatistics(Recording):
        def statistics(self) -> Any:
            return {"count": np.int64(3), "rate": np.float32(0.5), "plain": 2}

    env = make_env(arm, params=plugins_param(register(NumpyStatistics)))
    assert env.plugins[0].stats["custom"] == {"count": 3.0, "rate": 0.5, "plain": 2.0}


def test_mujoco_warnings_are_counted_in_statistics(make_env: Any) -> None:
    env = make_env(WARNING_ARENA_XML)
    assert env.statistics()["env"]["warnings"]["contactfull"] == 0
    env.step(400)
    warnings = env.statistics()["env"]["warnings"]
    assert warnings["contactfull"] > 0
    assert set(warnings) == {name[len("mjWARN_"):].lower()
                             for name in mujoco.mjtWarning.__members__
                             if name.startswith("mjWARN_")}


# -- Pacing at absurd real-time factors (issue 18, item 11) -------------------------------------


@pytest.mark.parametrize("how", ["start", "set_realtime_factor"])
def test_a_vanishing_realtime_factor_waits_and_stays_stoppable(how: str) -> None:
    # start(1e-14) / set_realtime_factor(1e-300): the next step's due time (2 ms / factor) was
    # converted to clock ticks with overflow (UB) and the thread ran flat out. A positive finite
    # factor is accepted (SPEC §13): a step due beyond any deadline waits until stop, pause, a
    # reset or a new factor. In a child: a wait that did not end would hang.
    result = run_python(f"""
        import time, mjfast
        from support import arm_xml, wait_for
        env = mjfast.MujocoEnv(arm_xml())
        if {how!r} == "start":
            env.start(1e-14)
        else:
            env.start(1.0)
            assert wait_for(lambda: env.step_count >= 5, 10)
            env.set_realtime_factor(1e-300)
        time.sleep(0.5)  # a measurement: flat out would be tens of thousands of steps
        first = env.step_count
        time.sleep(0.3)
        print("waits", env.step_count - first <= 1, env.running)
        env.pause()
        env.resume()
        env.set_realtime_factor(None)  # wakes the wait: unpaced from here
        assert wait_for(lambda: env.step_count > first + 1000, 20)
        env.set_realtime_factor(1e-300)
        started = time.monotonic()
        env.stop()
        print("stopped", time.monotonic() - started < 5, env.running)
        env.start(1e-300)
        env.reset()  # a lifecycle call while the thread waits: it pauses at once
        env.close()
        print("closed")
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["waits True True", "stopped True False", "closed"]


# -- MuJoCo errors in native plugin code on user threads (issue 18, item 6, beyond the list) ----


@pytest.fixture(scope="module")
def mujoco_error_library(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from _native_build import plugin_library_path

    return plugin_library_path(tmp_path_factory)


def test_a_mujoco_error_in_native_load_reset_or_call_is_the_plugins_failure(
        mujoco_error_library: Any) -> None:
    # load() at construction, on_reset at env.reset() and call() from an acquire_plugin block run
    # on the user's thread, outside any step: MuJoCo's error there ended the process.
    out = _check(run_python(f"""
        import mjfast
        from mjfast.native import NativePlugin
        from support import arm_xml
        mjfast.register_plugin("tests/MujocoError",
                               NativePlugin({str(mujoco_error_library)!r}, "MujocoError"))
        def env_with(where):
            params = {{"MujocoPlugins": [{{"type": "tests/MujocoError", "name": "broken",
                                          "in": where}}]}}
            return mjfast.MujocoEnv(arm_xml(), params=params)
        with env_with("load") as env:
            info = env.plugins[0]
            print("load", info.state.name, info.failure.phase, "gave up in load" in
                  info.failure.message)
            env.step(3)
        with env_with("on_reset") as env:
            try:
                env.reset()
            except mjfast.PluginError as error:
                print("reset", error.callback, "gave up in on_reset" in str(error))
            env.step(3)
        with env_with("call") as env:
            with env.acquire_plugin("broken") as plugin:
                try:
                    plugin.call("fail")
                except RuntimeError as error:
                    print("call", "gave up in call" in str(error))
            env.step(3)
        print("alive")
    """, timeout=120))
    assert out.splitlines() == ["load FAILED load True", "reset reset True", "call True",
                                "alive"]
