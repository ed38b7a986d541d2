"""Benchmarks of offscreen cameras against bare MuJoCo in the same run (SPEC §10).

1. Physics steps per second with one 320x240 RGB camera at 30 Hz (simulated) rendered on the
   render thread (async), beside the same env without a camera: at least 0.8x.
2. One render turn (capture on the stepping thread, render and read back on the render thread,
   with render_sync) beside mujoco.Renderer's update_scene() + render() for the same camera, size
   and options: at most 1.2x.
Both on models.py's arm with a camera; both sides measured interleaved through conftest.py's
`record.measured`, which prints the ratios in the one table at the end of the run and gates them
(targets in conftest.TARGETS). Needs EGL: conftest.py sets MUJOCO_GL=egl before mujoco loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from models import arm7_xml

# The groups and variants conftest.py's ratio table knows.
GROUP_CAMERA_RATE = "30 Hz offscreen camera"
GROUP_RENDER_TURN = "render turn"

MODEL = "arm7"
CAMERA = "watch"
WIDTH, HEIGHT = 320, 240
TIMESTEP = 0.002  # arm7_xml's
STEP_WINDOW = 20000  # steps per timed physics round
RATE_ROUNDS = 8  # interleaved rounds of each side, after one warm-up round
RENDER_ROUNDS = 10  # turns (or Renderer renders) per timed render round
TURN_ROUNDS = 5


@pytest.fixture(scope="module")
def scene_xml() -> str:
    """The arm of the stepping benchmarks, watched by one camera, with a 320x240 buffer."""
    return arm7_xml(camera=CAMERA, offscreen=(WIDTH, HEIGHT))


def camera_params(rate_hz: float) -> dict[str, Any]:
    return {"mujoco_server": {"cameras": {CAMERA: {"width": WIDTH, "height": HEIGHT,
                                                   "rate_hz": rate_hz}}}}


@pytest.fixture
def envs(scene_xml: str, request: pytest.FixtureRequest) -> Iterator[
        tuple[mjfast.MujocoEnv, mjfast.MujocoEnv]]:
    """(an env without a camera, one with the camera open and its frames enabled), both alive
    for the whole measurement so that their rounds can alternate."""
    render_sync, rate_hz = request.param
    with mjfast.MujocoEnv(scene_xml, render_sync=render_sync) as bare, \
            mjfast.MujocoEnv(scene_xml, params=camera_params(rate_hz),
                             render_sync=render_sync) as env:
        yield bare, env


def seconds_per_step(env: mjfast.MujocoEnv) -> float:
    start = time.perf_counter()
    env.step(STEP_WINDOW)
    return (time.perf_counter() - start) / STEP_WINDOW


@pytest.mark.parametrize("envs", [(False, 30.0)], indirect=True)
def test_physics_rate_with_an_async_camera(benchmark: Any, record: Any, envs: Any) -> None:
    bare, env = envs
    camera = env.open_offscreen_camera(CAMERA)
    camera.enable_frames()
    bare.step(200)  # warm-up
    env.step(200)
    # The first turn makes the GL context: wait for it, so that rounds see steady state.
    deadline = time.monotonic() + 30
    while env.statistics()["render"]["turns"] == 0 and env.statistics()["render"]["captures"] and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    timings = record.measured(benchmark, MODEL, GROUP_CAMERA_RATE, RATE_ROUNDS,
                              {"without": lambda: seconds_per_step(bare),
                               "with_camera": lambda: seconds_per_step(env)})
    stats = env.statistics()["render"]
    benchmark.extra_info.update(without_steps_per_s=1 / timings["without"].min_s,
                                with_camera_steps_per_s=1 / timings["with_camera"].min_s,
                                turns=stats["turns"], captures=stats["captures"])
    assert stats["turns"] > 0
    lease = camera.take_latest()
    assert lease is not None and lease.data.shape == (HEIGHT, WIDTH, 3)
    assert lease.data.std() > 0  # a picture, not a blank buffer


# A camera due at every step: each synchronous step captures, renders and reads back one frame.
@pytest.mark.parametrize("envs", [(True, 1.0 / TIMESTEP)], indirect=True)
def test_render_turn_against_mujoco_renderer(benchmark: Any, record: Any, envs: Any) -> None:
    bare, env = envs
    camera = env.open_offscreen_camera(CAMERA)
    camera.enable_frames()
    env.step(5)  # the first turn makes the GL context
    bare.step(5)
    renderer = mujoco.Renderer(env.model, HEIGHT, WIDTH)
    try:
        def timed(run: Callable[[], None]) -> float:
            start = time.perf_counter()
            for _ in range(RENDER_ROUNDS):
                run()
            return (time.perf_counter() - start) / RENDER_ROUNDS

        def render_with_renderer() -> None:
            renderer.update_scene(env.data, CAMERA)
            renderer.render()

        def turn() -> float:
            # The turn alone: a synchronous step with the camera due (capture, render, read
            # back) less the same step without a camera, timed back to back.
            return timed(lambda: env.step(1)) - timed(lambda: bare.step(1))

        timings = record.measured(benchmark, MODEL, GROUP_RENDER_TURN, TURN_ROUNDS,
                                  {"renderer": lambda: timed(render_with_renderer),
                                   "mjfast": turn})
        benchmark.extra_info.update(turn_ms=timings["mjfast"].min_s * 1e3,
                                    renderer_ms=timings["renderer"].min_s * 1e3)
        # The frame of the env's last step is of the state it left: the Renderer agrees.
        frame = camera.take_latest().data
        renderer.update_scene(env.data, CAMERA)
        np.testing.assert_array_equal(frame, renderer.render())
    finally:
        renderer.close()
