"""Offscreen cameras in native plugins (SPEC §9, §10): the host table of plugin_abi.h behind
mjfast::Camera, with the Python handle's contract and frames that match mujoco.Renderer."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's renderer

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import CAMERA_HEIGHT, CAMERA_UNAVAILABLE, CAMERA_WIDTH, CAMERA_XML, run_python

UNAVAILABLE = CAMERA_UNAVAILABLE
WIDTH, HEIGHT = CAMERA_WIDTH, CAMERA_HEIGHT
TYPE = "tests/CameraProbe"
XML = CAMERA_XML


@pytest.fixture(scope="module", autouse=True)
def camera_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    library: Path = plugin_library_path(tmp_path_factory)
    mjfast.register_plugin(TYPE, NativePlugin(library, "CameraProbe"))
    yield
    mjfast.unregister_plugin(TYPE)


def probe_env(**config: Any) -> mjfast.MujocoEnv:
    params = {"MujocoPlugins": [{"name": "probe", "type": TYPE, **config}]}
    return mjfast.MujocoEnv(XML, params=params, render_sync=True)


def call(env: mjfast.MujocoEnv, command: str) -> str:
    with env.acquire_plugin("probe") as plugin:
        return str(plugin.call(command))


def fnv1a(data: bytes) -> int:
    value = 14695981039346656037
    for byte in data:
        value = ((value ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return value


def reference(model: mujoco.MjModel, steps: int, option: mujoco.MjvOption | None = None
              ) -> np.ndarray:
    data = mujoco.MjData(model)
    for _ in range(steps):
        mujoco.mj_step(model, data)
    with mujoco.Renderer(model, HEIGHT, WIDTH) as renderer:
        renderer.update_scene(data, "front", scene_option=option)
        return renderer.render()


def failure(env: mjfast.MujocoEnv) -> mjfast.PluginLoadFailure:
    info = env.plugins[0]
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None
    return info.failure


def test_frames_taken_in_last_stage_match_mujoco_renderer_and_user_handles() -> None:
    with probe_env(hide_group=2) as env:
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE
        user = env.open_offscreen_camera("front")
        user.set_geom_group(2, False)
        user.enable_frames()
        env.step(30)
        frames, time_ns, capture_id, width, height, checksum = map(int, call(env, "frame").split())
        assert frames >= 2 and capture_id > 0 and (width, height) == (WIDTH, HEIGHT)
        step_ns = round(env.model.opt.timestep * 1e9)
        assert time_ns > 0 and time_ns % step_ns == 0  # the simulated time of a rendered state
        pixels = bytes.fromhex(call(env, "pixels"))
        assert fnv1a(pixels) == checksum
        # The group hidden in load() (queued while the camera was pending) applies: no red box.
        option = mujoco.MjvOption()
        option.geomgroup[2] = 0
        expected = reference(env.model, time_ns // step_ns, option)
        np.testing.assert_array_equal(
            np.frombuffer(pixels, np.uint8).reshape(HEIGHT, WIDTH, 3), expected)
        assert call(env, "group_enabled") == "0"
        # A user handle with the same settings got the same frame, pixel for pixel.
        with user.take_latest() as lease:
            assert lease.simulation_time_ns == time_ns
            assert fnv1a(lease.data.tobytes()) == checksum


def test_calls_needing_a_live_camera_are_unavailable_during_load_and_reload() -> None:
    with probe_env() as env:
        assert call(env, "load_probe") == f"runtime: {UNAVAILABLE}"
        env.step(5)
        env.reload()
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE
        assert call(env, "load_probe") == f"runtime: {UNAVAILABLE}"
        env.step(30)
        frames, time_ns, *_ = map(int, call(env, "frame").split())
        assert frames >= 1 and time_ns > 0  # the new instance's camera is bound and renders


def test_unknown_camera_fails_the_load_naming_it_and_listing_the_cameras() -> None:
    with probe_env(camera="top") as env:
        found = failure(env)
        assert found.phase == "load"
        assert "'top'" in found.message
        assert "front" in found.message and "side" in found.message


def test_opening_from_a_step_callback_is_a_logic_error_surfaced_as_plugin_error() -> None:
    with probe_env(open_in="last_stage") as env:
        with pytest.raises(mjfast.PluginError) as raised:
            env.step(1)
        assert raised.value.callback == "last_stage_callback"
        assert isinstance(raised.value.__cause__, mjfast.LogicError)
        assert "step callback" in str(raised.value.__cause__)


@pytest.mark.parametrize(("command", "match"), [
    ("open", "outside load"),
    ("take_bare", r"take_latest\(\) before enable_frames\(\)"),
    ("enable_again", r"enable_frames\(\) called twice"),
    ("close_and_take", "after close"),
])
def test_misuse_outside_the_contract_is_a_logic_error(command: str, match: str) -> None:
    with probe_env() as env, pytest.raises(mjfast.LogicError, match=match):
        call(env, command)


def test_a_default_constructed_camera_is_a_logic_error_not_a_crash(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # It once read the host table through a null pointer before checking the handle (SIGSEGV),
    # so the call runs in a child interpreter.
    library = plugin_library_path(tmp_path_factory)
    result = run_python(f"""
        import mjfast
        from mjfast.plugin.native import NativePlugin
        from support import CAMERA_XML
        mjfast.register_plugin({TYPE!r}, NativePlugin({str(library)!r}, "CameraProbe"))
        params = {{"MujocoPlugins": [{{"name": "probe", "type": {TYPE!r}}}]}}
        with mjfast.MujocoEnv(CAMERA_XML, params=params, render_sync=True) as env:
            with env.acquire_plugin("probe") as plugin:
                try:
                    plugin.call("take_unopened")
                except mjfast.LogicError as error:
                    print("LogicError:", error)
        """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "LogicError: mjfast::Camera used after close() or a move" in result.stdout
