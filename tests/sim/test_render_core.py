"""RenderCore (SPEC §10): scheduling in simulated time, the two-slot snapshot pool, generation
checks, render_sync, and its statistics."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's renderer

import time

import numpy as np
import pytest

import mjfast
from support import wait_for

XML = """
<mujoco>
  <visual><global offwidth="64" offheight="48"/></visual>
  <worldbody>
    <light pos="0 0 3"/>
    <geom type="plane" size="2 2 .1" rgba=".5 .5 .5 1"/>
    <camera name="front" pos="0 -2 1" xyaxes="1 0 0 0 0.5 1"/>
    <body pos="0 0 1"><freejoint/><geom type="box" size=".2 .2 .2" rgba="1 0 0 1"/></body>
  </worldbody>
</mujoco>
"""


def params(**front: object) -> dict[str, object]:
    return {"mujoco_server": {"cameras": {"front": dict(front)}}}


def test_no_camera_with_frames_enabled_costs_no_capture():
    with mjfast.MujocoEnv(XML, render_sync=True) as env:
        env.open_offscreen_camera("front")  # opened, never enabled
        env.step(200)
        stats = env.statistics()["render"]
        assert stats["captures"] == 0 and stats["turns"] == 0


def test_captures_follow_rate_hz_in_simulated_time():
    with mjfast.MujocoEnv(XML, params=params(rate_hz=50.0), render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(100)  # 0.2 s of simulated time at 50 Hz
        assert camera.statistics()["captures"] == 10
        assert env.statistics()["render"]["turns"] == 10


def test_a_capture_that_finds_no_free_slot_is_dropped_and_counted_without_waiting():
    with mjfast.MujocoEnv(XML, params=params(rate_hz=500.0)) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        render = env._cameras.render_core
        render._set_render_hold(True)  # the render thread picks nothing up
        start = time.monotonic()
        env.step(10)  # two turns fill both slots; the other eight captures are dropped
        assert time.monotonic() - start < 5
        stats = camera.statistics()
        assert stats["captures"] == 2 and stats["capture_drops"] == 8
        assert env.statistics()["render"]["capture_drops"] == 8
        render._set_render_hold(False)
        assert wait_for(lambda: env.statistics()["render"]["turns"] == 2, timeout=10.0)
        assert camera.take_latest().simulation_time_ns == 4_000_000


def test_a_stale_turn_after_reload_is_never_rendered():
    with mjfast.MujocoEnv(XML, params=params(rate_hz=500.0)) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        render = env._cameras.render_core
        render._set_render_hold(True)
        env.step(1)  # a turn of the first generation waits in the queue
        env.reload()
        render._set_render_hold(False)
        assert wait_for(lambda: env.statistics()["render"]["stale_turns"] == 1, timeout=10.0)
        stats = env.statistics()["render"]
        assert stats["turns"] == 0 and stats["frames_rendered"] == 0
        assert camera.take_latest() is None
        env.step(1)
        assert wait_for(lambda: env.statistics()["render"]["turns"] == 1, timeout=10.0)
        assert camera.take_latest().frame_generation == env.model_generation


def test_render_sync_makes_frames_reproducible():
    def record() -> list[np.ndarray]:
        with mjfast.MujocoEnv(XML, params=params(rate_hz=250.0), render_sync=True) as env:
            camera = env.open_offscreen_camera("front")
            camera.enable_frames()
            frames = []
            for _ in range(5):
                env.step(4)
                with camera.take_latest() as lease:
                    frames.append(lease.data.copy())
            return frames

    first, second = record(), record()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[-1])  # the box moved


def test_statistics_report_the_backend_and_turn_time():
    with mjfast.MujocoEnv(XML, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(1)
        stats = env.statistics()["render"]
        assert stats["backend"] == "egl"
        assert stats["turns"] == 1 and stats["frames_rendered"] == 1
        assert stats["mean_turn_ns"] > 0


def test_the_env_core_owns_its_render_core_and_the_binding_only_exposes_it():
    from mjfast._core_loader import _core

    with mjfast.MujocoEnv(XML, render_sync=True) as env:
        render = env._core.render_core
        assert render is env._cameras.render_core  # the one the env's cameras use
        assert render is env._core.render_core
        assert render.render_sync is True
    assert _core.EnvCore().render_core.render_sync is False
    assert _core.EnvCore(render_sync=True).render_core.render_sync is True
    with pytest.raises(TypeError):  # no RenderCore but an env core's own
        _core.RenderCore(_core.EnvCore())


def test_a_render_core_reference_keeps_its_env_core_alive():
    import gc

    from mjfast._core_loader import _core

    render = _core.EnvCore().render_core  # the env core's last Python reference is this one
    gc.collect()
    assert render.statistics()["turns"] == 0
    render.check_can_open()  # reaches the env's host
    render.close()
