"""Benchmarks of simulation control (SPEC §13) in the same run as their baselines.

1. Physics steps per second under `env.start(None)` while another thread calls
   `env.get_body_state` at 1 kHz, beside the same without the reader: at least 0.9x (each call
   holds stepping only for a copy of qpos/qvel; the kinematics run after).
2. The wall time of one `pause()`+`resume()` pair on a running env (reported), beside the same
   pair on an idle env (which only flips the flag).
Both go through conftest.py's `record.measured` (ratios printed in the one table at the end).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from side_loop import seconds_per_physics_step

GROUP_BODY_STATE_RATE = "1 kHz get_body_state"
GROUP_PAUSE_PAIR = "pause()+resume() pair"

RATE_ROUNDS = 3
PAIRS = 500  # pause()+resume() pairs per round
PAIR_ROUNDS = 5

pytestmark = pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)


def last_body(model: mujoco.MjModel) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody - 1)


def body_state_read(env: mjfast.MujocoEnv) -> Callable[[], None]:
    """One get_body_state call on the model's last body, checked."""
    body = last_body(env.model)

    def read() -> None:
        state = env.get_body_state(body)
        if not np.isfinite(state.pos).all():
            raise AssertionError(f"non-finite pose {state}")

    return read


def test_physics_rate_with_1khz_get_body_state(benchmark: Any, record: Any, bench_model: Any,
                                               arm_env: mjfast.MujocoEnv) -> None:
    read_rates: list[float] = []
    timings = record.measured(
        benchmark, bench_model.name, GROUP_BODY_STATE_RATE, RATE_ROUNDS,
        {"alone": lambda: seconds_per_physics_step(arm_env, None, read_rates),
         "with_reads": lambda: seconds_per_physics_step(arm_env, body_state_read(arm_env),
                                                        read_rates)})
    benchmark.extra_info.update(alone_steps_per_s=1 / timings["alone"].min_s,
                                with_reads_steps_per_s=1 / timings["with_reads"].min_s,
                                reads_hz=max(read_rates))
    assert max(read_rates) > 800  # the reader really ran at about 1 kHz


def seconds_per_pause_pair(env: mjfast.MujocoEnv, running: bool) -> float:
    """Wall time of one pause()+resume() pair; on a running env each pair starts while the
    thread is stepping (the wait for its next step is not timed: pairs back to back would find
    it still asleep from the previous pause)."""
    if running:
        env.start(None)
    try:
        paired = 0.0
        for _ in range(PAIRS):
            if running:
                steps = env.step_count
                deadline = time.monotonic() + 5.0
                while env.step_count == steps and time.monotonic() < deadline:
                    pass
                assert env.step_count > steps
            start = time.perf_counter()
            env.pause()
            env.resume()
            paired += time.perf_counter() - start
    finally:
        env.stop()
    assert not env.paused
    return paired / PAIRS


def test_pause_resume_pair_on_a_running_env(benchmark: Any, record: Any, bench_model: Any,
                                            arm_env: mjfast.MujocoEnv) -> None:
    timings = record.measured(
        benchmark, bench_model.name, GROUP_PAUSE_PAIR, PAIR_ROUNDS,
        {"idle": lambda: seconds_per_pause_pair(arm_env, False),
         "running": lambda: seconds_per_pause_pair(arm_env, True)})
    benchmark.extra_info.update(running_pair_us=timings["running"].min_s * 1e6,
                                idle_pair_us=timings["idle"].min_s * 1e6)
