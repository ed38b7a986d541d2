"""Benchmarks of simulation control (SPEC §13) in the same run as their baselines.

1. Physics steps per second under `env.start(None)` while another thread calls
   `env.get_body_state` at 1 kHz, beside the same without the reader: at least 0.9x (each call
   holds stepping only for a copy of qpos/qvel; the kinematics run after).
2. The wall time of one `pause()`+`resume()` pair on a running env (reported), beside the same
   pair on an idle env (which only flips the flag).
Both go through conftest.py's `record.measured` (ratios printed in the one table at the end).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast

GROUP_BODY_STATE_RATE = "1 kHz get_body_state"
GROUP_PAUSE_PAIR = "pause()+resume() pair"

WINDOW_S = 0.5  # physics-rate measurement window per round
RATE_ROUNDS = 3
PAIRS = 500  # pause()+resume() pairs per round
PAIR_ROUNDS = 5

pytestmark = pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)


@pytest.fixture
def arm_env(bench_model: Any) -> Iterator[mjfast.MujocoEnv]:
    env = mjfast.MujocoEnv(bench_model.model)
    yield env
    env.close()


def last_body(model: mujoco.MjModel) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody - 1)


def seconds_per_physics_step(env: mjfast.MujocoEnv, with_reads: bool,
                             read_rates: list[float]) -> float:
    """Wall time per physics step of env.start(None) over WINDOW_S, with or without a thread
    calling get_body_state at 1 kHz (its achieved rate goes to `read_rates`)."""
    stop = threading.Event()
    reads = [0]
    failures: list[BaseException] = []
    body = last_body(env.model)

    def reader() -> None:
        try:
            period = 1e-3
            next_tick = time.perf_counter()
            while not stop.is_set():
                state = env.get_body_state(body)
                if not np.isfinite(state.pos).all():
                    raise AssertionError(f"non-finite pose {state}")
                reads[0] += 1
                next_tick += period
                delay = next_tick - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=reader, daemon=True) if with_reads else None
    env.start(None)
    try:
        if thread is not None:
            thread.start()
        time.sleep(0.1)  # settle: thread start-up, first scratch data
        before = env.statistics()["env"]["steps"]
        start = time.perf_counter()
        reads[0] = 0
        time.sleep(WINDOW_S)
        steps = env.statistics()["env"]["steps"] - before
        elapsed = time.perf_counter() - start
        read_count = reads[0]
    finally:
        stop.set()
        if thread is not None:
            thread.join(10.0)
        env.stop()
    assert thread is None or not thread.is_alive()
    assert not failures, failures
    assert steps > 0
    if with_reads:
        read_rates.append(read_count / elapsed)
    return elapsed / steps


def test_physics_rate_with_1khz_get_body_state(benchmark: Any, record: Any, bench_model: Any,
                                               arm_env: mjfast.MujocoEnv) -> None:
    read_rates: list[float] = []
    timings = record.measured(
        benchmark, bench_model.name, GROUP_BODY_STATE_RATE, RATE_ROUNDS,
        {"alone": lambda: seconds_per_physics_step(arm_env, False, read_rates),
         "with_reads": lambda: seconds_per_physics_step(arm_env, True, read_rates)})
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
