"""The physics thread (SPEC §5): pacing, statistics, stop, step while running, and reload while
it runs (no callback reaches an unloaded instance)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.native import NativePlugin
from support import wait_for

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
