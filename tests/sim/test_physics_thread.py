"""The physics thread (SPEC §5): pacing, statistics, stop, step while running, reload while it
runs (no callback reaches an unloaded instance), and a step budget with wait()."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import (
    run_python,
    wait_for,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout




MODEL = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="pendulum">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge"/></actuator>
</mujoco>
"""
NOOP = {"MujocoPlugins": [{"type": "mjfast/NoOp"}]}


def _run_for(env: mjfast.MujocoEnv, seconds: float, realtime_factor: float | None) -> float:
    """Runs the thread for about `seconds` of wall time; returns the simulated time advanced."""
    sim_start = env.data.time
    env.start(realtime_factor)
    time.sleep(seconds)  # the wall time the pace is measured over, not a synchronisation
    env.stop()
    return env.data.time - sim_start


def test_realtime_pacing_follows_the_wall_clock() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        wall_start = time.perf_counter()
        simulated = _run_for(env, 0.5, 1.0)
        wall = time.perf_counter() - wall_start
        assert simulated == pytest.approx(wall, rel=0.1)
        stats = env.statistics()["env"]
        assert stats["realtime_factor"] == pytest.approx(1.0, rel=0.1)
        assert stats["steps"] == round(simulated / env.model.opt.timestep)
        calls = env.statistics()["plugins"][0]["callbacks"]["control_callback"]["calls"]
        assert calls == stats["steps"]


def test_realtime_factor_scales_the_pace() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        simulated = _run_for(env, 0.5, 0.5)
        assert simulated == pytest.approx(0.25, rel=0.15)
        assert env.statistics()["env"]["realtime_factor"] == pytest.approx(0.5, rel=0.15)


def test_unpaced_runs_as_fast_as_it_can() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        simulated = _run_for(env, 0.3, None)
        # A one-joint model steps in a few microseconds: far faster than real time.
        assert simulated > 3 * 0.3
        assert env.statistics()["env"]["realtime_factor"] > 3


@pytest.mark.parametrize("realtime_factor", [1.0, None])
def test_stop_is_prompt_and_idempotent(realtime_factor: float | None) -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(realtime_factor)
        assert env.running
        assert wait_for(lambda: env.statistics()["env"]["steps"] > 0)  # it is stepping
        started = time.perf_counter()
        env.stop()
        assert time.perf_counter() - started < 0.05  # promptness is the behaviour: timed
        assert not env.running
        env.stop()  # idempotent
        assert not env.running


def test_step_while_running_raises_logic_error() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(None)
        try:
            with pytest.raises(mjfast.LogicError, match="physics thread"):
                env.step()
            with pytest.raises(mjfast.LogicError):
                env.start(1.0)
        finally:
            env.stop()
        env.step(3)  # fine once stopped
        env.start(1.0)  # and it restarts
        env.stop()


def test_close_stops_the_thread() -> None:
    env = mjfast.MujocoEnv(MODEL, params=NOOP)
    env.start(None)
    env.close()
    assert not env.running
    time_after_close = env.data.time
    time.sleep(0.02)  # an observation window: nothing may step in it
    assert env.data.time == time_after_close
    env.close()  # idempotent


def test_reset_while_running_pauses_and_resumes() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(None)
        try:
            assert wait_for(lambda: env.step_count > 0)
            env.reset()
            assert env.running
            assert wait_for(lambda: env.data.time > 0)  # it resumed stepping after the reset
        finally:
            env.stop()
        reset = env.statistics()["plugins"][0]["callbacks"]["reset"]["calls"]
        assert reset == 1


@pytest.fixture
def liveness(tmp_path_factory: pytest.TempPathFactory) -> Any:
    library = plugin_library_path(tmp_path_factory)
    mjfast.register_plugin("tests/Liveness", NativePlugin(library, "Liveness"))
    yield "tests/Liveness"
    mjfast.unregister_plugin("tests/Liveness")


def test_reload_while_running_reaches_no_old_instance(liveness: str, tmp_path: Path) -> None:
    params = mjfast.ParameterServer({"MujocoPlugins": [{"type": liveness},
                                                       {"type": "mjfast/NoOp"}]})
    with mjfast.MujocoEnv(MODEL, params=params) as env:
        env.start(None)
        try:
            serials = set()
            for _ in range(5):
                # This generation steps before it is replaced (step_count restarts at a reload).
                assert wait_for(lambda: env.step_count > 0)
                generation = env.model_generation
                env.reload()
                assert env.running  # it paused, reloaded and resumed
                assert env.model_generation == generation + 1
                with env.acquire_plugin("Liveness") as plugin:
                    serials.add(plugin.call("serial"))
            assert wait_for(lambda: env.step_count > 0)
        finally:
            env.stop()
        with env.acquire_plugin("Liveness") as plugin:
            assert plugin.call("violations") == "0"
            assert int(plugin.call("callbacks")) > 0
        assert len(serials) == 5  # a fresh instance every generation
        stats = env.statistics()
        # The new generation ran.
        assert stats["plugins"][1]["callbacks"]["control_callback"]["calls"] > 0


def test_reload_from_another_thread_while_running(liveness: str) -> None:
    with mjfast.MujocoEnv(MODEL, params={"MujocoPlugins": [{"type": liveness}]}) as env:
        env.start(1.0)
        errors: list[BaseException] = []

        def reload_loop() -> None:
            try:
                for _ in range(3):
                    env.reload()
            except BaseException as error:  # reported below
                errors.append(error)

        worker = threading.Thread(target=reload_loop)
        worker.start()
        worker.join(10)
        env.stop()
        assert not worker.is_alive()
        assert not errors
        with env.acquire_plugin("Liveness") as plugin:
            assert plugin.call("violations") == "0"


# -- a step budget: start(..., steps=N) and wait() ----------------------------------------------


def _control_calls(env: mjfast.MujocoEnv) -> int:
    return env.statistics()["plugins"][0]["callbacks"]["control_callback"]["calls"]


@pytest.mark.parametrize("realtime_factor", [None, 10.0])
def test_a_step_budget_runs_exactly_that_many_steps_and_stops(
        realtime_factor: float | None) -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(realtime_factor, steps=100)
        assert env.wait(timeout=30)
        assert not env.running
        assert env.step_count == 100
        assert env.statistics()["env"]["steps"] == 100
        assert _control_calls(env) == 100
        assert env.data.time == pytest.approx(100 * 0.002)
        env.stop()  # nothing to stop: returns, raises nothing
        env.start(None, steps=5)  # and it starts again
        assert env.wait(30)
        assert env.step_count == 105


def test_a_paced_budget_ends_at_its_last_steps_wall_time() -> None:
    # 50 steps of 2 ms at 1x real time: 0.1 s of wall time, the last step's pace waited out.
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        started = time.perf_counter()
        env.start(1.0, steps=50)
        assert env.wait(30)
        assert time.perf_counter() - started >= 0.1
        assert env.step_count == 50


def test_wait_returns_false_while_the_thread_runs_and_true_without_one() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        assert env.wait() and env.wait(0)  # no thread: nothing to wait for
        env.start(1.0, steps=5000)  # 10 s of simulated time at real time
        try:
            assert env.wait(0.05) is False
            assert env.wait(0) is False
            assert env.running and env.step_count < 5000
        finally:
            env.stop()
        assert env.wait(0) is True


def test_stop_during_a_budgeted_run_ends_it_and_wakes_a_waiter() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(1.0, steps=5000)
        waited: list[bool] = []
        waiter = threading.Thread(target=lambda: waited.append(env.wait()))
        waiter.start()
        assert wait_for(lambda: env.step_count > 0)
        env.stop()
        waiter.join(10)
        assert not waiter.is_alive() and waited == [True]
        assert not env.running
        stopped_at = env.step_count
        assert 0 < stopped_at < 5000
        env.start(None, steps=10)  # a new budget, counted from this start
        assert env.wait(30)
        assert env.step_count == stopped_at + 10


def test_a_pause_holds_the_budget_and_steps_while_paused_are_not_counted() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.pause()  # before start(): it starts paused
        env.start(None, steps=50)
        try:
            assert env.wait(0.05) is False and env.step_count == 0
            env.step(7)  # the user's steps while paused: not the thread's
            assert env.step_count == 7 and env.running
            env.resume()
            assert env.wait(30)
        finally:
            env.stop()
        assert env.step_count == 57
        assert not env.running and not env.paused


def test_pause_and_resume_during_a_paced_budgeted_run() -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        env.start(1.0, steps=500)  # 1 s at real time
        try:
            assert wait_for(lambda: env.step_count > 0)
            env.pause()
            held = env.step_count
            assert held < 500
            assert env.wait(0.05) is False
            assert env.step_count == held  # paused: the budget waits
            env.resume()
            assert env.wait(30)
        finally:
            env.stop()
        assert env.step_count == 500


@pytest.mark.parametrize("steps", [-1, 1.5, "10", True, np.float64(3.0), 2**64, 10**5000],
                         ids=["-1", "1.5", "str", "True", "float64", "2**64", "10**5000"])
def test_a_bad_step_budget_is_a_value_error_naming_it(steps: object) -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        huge = isinstance(steps, int) and steps.bit_length() > 256
        shown = "an integer of 16610 bits" if huge else repr(steps)
        with pytest.raises(ValueError) as raised:
            env.start(1.0, steps=steps)  # type: ignore[arg-type]
        assert str(raised.value) == (
            f"start(steps) takes None or an integer 0 <= steps <= 2**64-1, got {shown}")
        assert not env.running
        env.start(None, steps=np.int64(3))  # an integer type that is not int is fine
        assert env.wait(30) and env.step_count == 3


@pytest.mark.parametrize("timeout", [-1, -0.5, float("nan"), "1", True, -10**400])
def test_a_bad_wait_timeout_is_a_value_error_naming_it(timeout: object) -> None:
    with mjfast.MujocoEnv(MODEL, params=NOOP) as env:
        with pytest.raises(ValueError) as raised:
            env.wait(timeout)  # type: ignore[arg-type]
        assert str(raised.value) == (
            f"wait(timeout) takes None or a number of seconds >= 0, got {timeout!r}")
        assert env.wait(float("inf"))  # no thread: at once, whatever the limit
        assert env.wait(10**400)  # too large for a float: no limit


def test_wait_from_a_plugin_on_the_physics_thread_is_refused_not_deadlocked() -> None:
    out = run_python(f"""
        import mjfast
        class Waits(mjfast.MujocoPlugin):
            seen = []
            def load(self, model, data):
                return True
            def control_callback(self, model, data):
                if not Waits.seen:
                    try:
                        self.env.wait()
                    except mjfast.LogicError as error:
                        Waits.seen.append(str(error))
        mjfast.register_plugin("test/Waits", Waits)
        with mjfast.MujocoEnv({MODEL!r}, params={{"MujocoPlugins": [{{"type": "test/Waits"}}]}}
                              ) as env:
            env.start(None, steps=3)
            print(env.wait(30), env.step_count)
        print(Waits.seen[0])
    """, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "True 3", "wait() called from inside a plugin callback"]


def test_ctrl_c_interrupts_wait_on_the_main_thread() -> None:
    out = run_python(f"""
        import os, signal, threading, mjfast
        with mjfast.MujocoEnv({MODEL!r}) as env:
            env.start(1.0)
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            try:
                env.wait()
            except KeyboardInterrupt:
                print("interrupted", env.running)
            env.stop()
    """, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "interrupted True"


def test_a_fault_ends_a_budgeted_run_and_stop_raises_it() -> None:
    out = run_python("""
        import mjfast
        from support import SMALL_ARENA_XML
        env = mjfast.MujocoEnv(SMALL_ARENA_XML)
        env.start(None, steps=1000)
        print(env.wait(30), env.running, 100 <= env.step_count < 1000)  # ended at the fault
        try:
            env.stop()
        except mjfast.SimulationError as error:
            print("stop raised", "mj_stackAlloc" in str(error))
        env.close()
    """, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["True False True", "stop raised True"]


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
