"""RenderCore never deadlocks (SPEC §18 locks, §10): what a plugin's render_callback or user code
inside an acquire_plugin block may call while the capture holds the cameras, what is refused
with LogicError instead of waiting, and a camera schedule that restarts when simulated time
moves back by any means.

Every scenario that hung before its fix runs in a subprocess with a timeout: a hang is a test
failure with the subprocess's stacks (faulthandler), not a hung suite.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's renderer

import subprocess
import sys
import textwrap
from typing import Any

import mujoco
import pytest

import mjfast
from support import CAMERA_XML as XML
from support import TESTS_DIR

TESTS = TESTS_DIR
# Generous for a loaded 2-core machine; the scripts take about a second each when they pass.
TIMEOUT_S = 90

# Shared by the scripts: the camera scene, a render plugin whose render_callback runs `probe`
# (set by the script) and records what it returned or raised, and the params that configure it
# with a camera due at every step.
PRELUDE = """
import faulthandler, json, os, sys, threading
os.environ.setdefault("MUJOCO_GL", "egl")
import mujoco
import mjfast
from support import CAMERA_XML as XML

faulthandler.dump_traceback_later({dump_after}, exit=True)  # a hang prints every stack

probe = None  # set by the script: called from render_callback with the plugin


class Render(mjfast.MujocoPlugin):
    results = []

    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        if probe is None:
            return
        try:
            Render.results.append(("ok", probe(self)))
        except Exception as error:
            Render.results.append((type(error).__name__, str(error)))


mjfast.register_plugin("test_render_locks/Render", Render)
# 1 kHz with a 2 ms step: a capture (and a render_callback) at the end of every step.
PLUGINS = [{{"name": "p", "type": "test_render_locks/Render"}}]
PARAMS = {{"mujoco_server": {{"MujocoPlugins": PLUGINS,
                             "cameras": {{"front": {{"rate_hz": 1000.0}}}}}}}}
"""


def run_script(body: str) -> Any:
    """Runs PRELUDE + body in a fresh interpreter; returns the JSON the script prints last."""
    script = PRELUDE.format(dump_after=TIMEOUT_S - 10) + textwrap.dedent(body)
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(TESTS),
                                                        os.environ.get("PYTHONPATH")])))
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"hung for {TIMEOUT_S} s (deadlock); stderr:\n{hung.stderr}")
    assert result.returncode == 0, (
        f"exit status {result.returncode} (a faulthandler dump means it hung)\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- (b) from a render_callback ----------------------------------------------------------------


def test_render_callback_may_call_statistics_and_is_refused_what_would_wait():
    outcome = run_script("""
        calls = iter([
            lambda plugin: sorted(plugin.env.statistics()["render"]),
            lambda plugin: camera.statistics()["captures"] >= 0,
            lambda plugin: camera.take_latest() is None or True,
            lambda plugin: plugin.env.open_offscreen_camera("side"),
            lambda plugin: plugin.env.reload(),
            lambda plugin: plugin.env.reset(),
        ])

        def probe(plugin):
            step = next(calls, None)
            return None if step is None else step(plugin)

        with mjfast.MujocoEnv(XML, params=PARAMS, render_sync=True) as env:
            camera = env.open_offscreen_camera("front")
            camera.enable_frames()
            env.step(6)
            print(json.dumps({"results": Render.results[:6],
                              "captures": env.statistics()["render"]["captures"]}))
    """)
    results = outcome["results"]
    assert results[0][0] == "ok" and "captures" in results[0][1]
    assert results[1] == ["ok", True]
    assert results[2] == ["ok", True]
    assert results[3][0] == "LogicError" and "callback" in results[3][1]
    assert results[4][0] == "LogicError" and "plugin callback" in results[4][1]
    assert results[5][0] == "LogicError"
    assert outcome["captures"] == 6  # every step captured: nothing was dropped or stalled


# -- (c) inside an acquire_plugin block while the physics thread captures ----------------------


def test_statistics_inside_acquire_plugin_while_the_physics_thread_captures():
    outcome = run_script("""
        def probe(plugin):
            return None

        # Two cameras due at every step: the capture holds the cameras across both render
        # dispatches, and between them (the second camera's scene update) this block can take
        # the host mutex that the second dispatch then waits for.
        PARAMS["mujoco_server"]["cameras"]["side"] = {"rate_hz": 1000.0}
        with mjfast.MujocoEnv(XML, params=PARAMS) as env:
            for name in ("front", "side"):
                env.open_offscreen_camera(name).enable_frames()
            env.start(None)
            for _ in range(2000):
                with env.acquire_plugin("p"):
                    for _ in range(3):
                        env.statistics()
            env.stop()
            # Counted once the thread has stopped: statistics() while it runs is the last
            # published snapshot, which may not have caught up with the captures yet.
            print(json.dumps({"captures": env.statistics()["render"]["captures"],
                              "calls": len(Render.results)}))
    """)
    assert outcome["captures"] > 0 and outcome["calls"] > 0


def test_calls_that_would_wait_inside_acquire_plugin_raise_logic_error():
    # The physics thread is blocked in a capture waiting for this block's host mutex (wait_for
    # below makes sure a capture is waiting): opening a camera or reloading here would wait for
    # the capture's lock forever.
    outcome = run_script("""
        entered = threading.Event()

        def probe(plugin):
            entered.set()

        with mjfast.MujocoEnv(XML, params=PARAMS) as env:
            camera = env.open_offscreen_camera("front")
            camera.enable_frames()
            env.start(None)
            raised = {"open": set(), "reload": set(), "statistics": set()}
            for attempt in range(20):
                with env.acquire_plugin("p"):
                    entered.clear()
                    for name, call in (("open", lambda: env.open_offscreen_camera("side")),
                                       ("reload", env.reload),
                                       ("statistics", env.statistics)):
                        try:
                            call()
                            raised[name].add("returned")
                        except Exception as error:
                            raised[name].add(f"{type(error).__name__}: {error}")
                entered.wait(5)  # the physics thread captured again after the block
            env.stop()
            print(json.dumps({name: sorted(seen) for name, seen in raised.items()}))
    """)
    [opened] = outcome["open"]  # the same outcome every time
    assert opened.startswith("LogicError:") and "acquire_plugin" in opened
    [reloaded] = outcome["reload"]
    assert reloaded.startswith("LogicError:") and "acquire_plugin" in reloaded
    assert outcome["statistics"] == ["returned"]


def test_open_offscreen_camera_inside_acquire_plugin_is_a_logic_error():
    mjfast.register_plugin("test_render_locks/Plain", _Plain)
    params = {"mujoco_server": {"MujocoPlugins": [{"name": "p",
                                                   "type": "test_render_locks/Plain"}]}}
    with mjfast.MujocoEnv(XML, params=params) as env:
        with env.acquire_plugin("p"), pytest.raises(mjfast.LogicError,
                                                    match=r"acquire_plugin.*leave the block"):
            env.open_offscreen_camera("front")
        assert env.open_offscreen_camera("front").state == "live"  # after the block: fine


class _Plain(mjfast.MujocoPlugin):
    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        pass


# -- everything at once --------------------------------------------------------------------------


def test_physics_thread_camera_render_plugin_statistics_and_acquire_threads_all_finish():
    outcome = run_script("""
        def probe(plugin):
            return plugin.env.statistics()["render"]["captures"]

        with mjfast.MujocoEnv(XML, params=PARAMS) as env:
            camera = env.open_offscreen_camera("front")
            camera.enable_frames()
            errors = []

            def guarded(work):
                def run():
                    try:
                        work()
                    except BaseException as error:
                        errors.append(repr(error))
                return run

            def statistics():
                for _ in range(3000):
                    env.statistics()

            def scoped():
                for _ in range(1500):
                    with env.acquire_plugin("p"):
                        env.statistics()
                        camera.statistics()

            def frames():
                for _ in range(3000):
                    lease = camera.take_latest()
                    if lease is not None:
                        lease.release()

            env.start(None)
            threads = [threading.Thread(target=guarded(work))
                       for work in (statistics, scoped, frames)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            env.stop()
            print(json.dumps({"errors": errors, "calls": len(Render.results),
                              "failed": [r for r in Render.results if r[0] != "ok"][:3],
                              "captures": env.statistics()["render"]["captures"]}))
    """)
    assert outcome["errors"] == []
    assert outcome["failed"] == []
    assert outcome["calls"] > 0 and outcome["captures"] > 0


# -- (d) time moving back restarts the schedule ---------------------------------------------------


def _go_back_by_setting_time(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    data.time = 0.0


def _go_back_by_reset_data(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    mujoco.mj_resetData(model, data)


def _go_back_by_keyframe(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    mujoco.mj_resetDataKeyframe(model, data, 0)


@pytest.mark.parametrize("go_back", [_go_back_by_setting_time, _go_back_by_reset_data,
                                     _go_back_by_keyframe],
                         ids=["data.time", "mj_resetData", "mj_resetDataKeyframe"])
def test_a_camera_schedule_restarts_when_time_moves_back(go_back):
    xml = XML.replace("</worldbody>", '</worldbody><keyframe><key time="0.01"/></keyframe>')
    params = {"mujoco_server": {"cameras": {"front": {"rate_hz": 10.0}}}}
    with mjfast.MujocoEnv(xml, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(300)  # to 0.6 s: captures at 0.002, 0.102, ..., 0.502; the next is due at 0.602
        assert taken_at(camera) == 502_000_000
        go_back(env.model, env.data)
        back_ns = round(env.data.time * 1e9)
        env.step(1)
        # Captured at the first step after the jump, not 0.6 s of simulated time later.
        assert taken_at(camera) == back_ns + 2_000_000
        env.step(49)
        assert taken_at(camera) is None
        env.step(1)  # and the schedule runs on from there at 10 Hz
        assert taken_at(camera) == back_ns + 102_000_000


def taken_at(camera: Any) -> int | None:
    """The simulated time of the newest frame not taken yet (its lease released), or None."""
    lease = camera.take_latest()
    if lease is None:
        return None
    with lease:
        return lease.simulation_time_ns
