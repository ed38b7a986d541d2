"""Simulation requests from native plugins (SPEC §13 through plugin_abi.h's host services): a
pause or a reset asked from a callback, honoured at the env's next step boundary."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sim_control import DT, XML

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import wait_for

TYPE = "tests/SimRequester"


@pytest.fixture(scope="module", autouse=True)
def sim_requester(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    library: Path = plugin_library_path(tmp_path_factory)
    mjfast.register_plugin(TYPE, NativePlugin(library, "SimRequester"))
    yield
    mjfast.unregister_plugin(TYPE)


def requester_env(make_env: Callable[..., mjfast.MujocoEnv], **config: Any) -> mjfast.MujocoEnv:
    env = make_env(XML, params={"MujocoPlugins": [{"name": "monitor", "type": TYPE, **config}]})
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    return env


def ask(env: mjfast.MujocoEnv, command: str) -> str:
    with env.acquire_plugin("monitor") as plugin:
        return plugin.call(command)


def test_a_pause_request_stops_the_physics_thread_at_the_next_step_boundary(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = requester_env(make_env, pause_at_step=50)
    env.start(None)
    assert wait_for(lambda: env.paused)
    assert env.running
    assert wait_for(lambda: env.step_count == 50)  # the step that asked, and not one more
    env.step(5)  # a paused env steps on request, exactly
    assert env.step_count == 55 and env.paused
    env.resume()
    assert wait_for(lambda: env.step_count > 100)


def test_a_reset_request_is_honoured_before_the_next_step_of_env_step(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = requester_env(make_env, reset_at_step=30, keyframe="lifted")
    env.step(40)
    # 30 steps, the reset (to the keyframe, time 0), then 10 more.
    assert env.step_count == 10
    assert env.data.time == pytest.approx(10 * DT)
    assert ask(env, "resets") == "1"
    assert float(ask(env, "reset_time")) == 0.0


def test_a_paused_physics_thread_still_carries_out_a_reset_request(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = requester_env(make_env, pause_at_step=20, reset_at_step=20)
    env.start(None)
    assert wait_for(lambda: ask(env, "resets") == "1")
    assert env.paused and env.step_count == 0 and env.data.time == 0.0


def test_a_reset_requested_in_load_waits_for_the_first_step(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = requester_env(make_env, request_in="load")
    assert ask(env, "resets") == "0"
    env.step(1)
    assert ask(env, "resets") == "1" and env.step_count == 1


def test_a_reset_request_to_an_unknown_keyframe_is_logged_and_stepping_goes_on(
        make_env: Callable[..., mjfast.MujocoEnv], caplog: pytest.LogCaptureFixture) -> None:
    env = requester_env(make_env, reset_at_step=3, keyframe="nowhere")
    with caplog.at_level(logging.ERROR, logger="mjfast.env"):
        env.step(6)
    assert env.step_count == 6
    assert "keyframe 'nowhere'" in caplog.text and "no keyframe named 'nowhere'" in caplog.text


def test_a_request_outside_callbacks_is_a_request_too(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = requester_env(make_env)
    assert ask(env, "request_pause") == "ok"
    assert env.paused


def test_a_reset_request_is_carried_out_by_the_core(
        make_env: Callable[..., mjfast.MujocoEnv], monkeypatch: pytest.MonkeyPatch) -> None:
    # Not a call up into the Python reset and back down: the core resets, asking env.py only
    # where to (the keyframe names and the initial_joint_* parameters are Python's).
    env = requester_env(make_env, reset_at_step=30, keyframe="lifted")
    monkeypatch.setattr(env, "_reset_world", lambda *args: pytest.fail("called up into Python"))
    env.step(40)
    assert env.step_count == 10 and ask(env, "resets") == "1"
    assert env.data.time == pytest.approx(10 * DT)
