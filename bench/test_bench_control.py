"""Benchmarks of `env.control` against bare MuJoCo in the same run (SPEC §7).

1. One `read()` + `write()` cycle without plugins, beside a Python loop copying the same fields
   out of a `mujoco.MjData` by hand: mjfast must not be slower.
2. Physics steps per second under `env.start(None)` with a 1 kHz Python control loop against it,
   beside the same without a loop: at least 0.9x.
Both sides are measured interleaved through conftest.py's `record.measured`, which prints the
ratios in the one table at the end of the run and gates them (targets in conftest.TARGETS).
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

# The groups and variants conftest.py's ratio table knows.
GROUP_CONTROL_CYCLE = "control read+write cycle"
GROUP_CONTROL_RATE = "1 kHz control loop"

CYCLES = 20_000  # read+write cycles per round
CYCLE_ROUNDS = 10  # interleaved rounds of each side, after one warm-up round
RATE_ROUNDS = 3

pytestmark = pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)


def seconds_per_cycle(cycle: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(CYCLES):
        cycle()
    return (time.perf_counter() - start) / CYCLES


def test_read_write_cycle_is_not_slower_than_copying_mjdata_by_hand(
        benchmark: Any, record: Any, bench_model: Any, arm_env: mjfast.MujocoEnv) -> None:
    model = bench_model.model
    data = bench_model.fresh_data()
    mujoco.mj_forward(model, data)
    command = np.linspace(-1.0, 1.0, model.nu)
    control = arm_env.control
    control.read()  # arm the bridge outside the timed part

    def by_hand() -> None:
        # What a Python control loop over a bare MjData does for the same fields.
        np.copy(data.time)
        np.copy(data.qpos)
        np.copy(data.qvel)
        np.copy(data.act)
        np.copy(data.qfrc_actuator)
        np.copy(data.sensordata)
        np.copy(data.ctrl)
        data.ctrl[:] = command

    def mjfast_cycle() -> None:
        control.read()
        control.write(ctrl=command)

    timings = record.measured(benchmark, bench_model.name, GROUP_CONTROL_CYCLE, CYCLE_ROUNDS,
                              {"by_hand": lambda: seconds_per_cycle(by_hand),
                               "mjfast": lambda: seconds_per_cycle(mjfast_cycle)})
    benchmark.extra_info.update(by_hand_ns=timings["by_hand"].min_s * 1e9,
                                mjfast_ns=timings["mjfast"].min_s * 1e9)
    np.testing.assert_array_equal(data.ctrl, command)
    state = control.read()
    assert state.qpos.shape == (model.nq,)


def control_loop_cycle(env: mjfast.MujocoEnv) -> Callable[[], None]:
    """One cycle of a Python control loop: read, a damping law on the velocities, write."""
    command = np.zeros(env.model.nu)

    def cycle() -> None:
        state = env.control.read()
        command[:] = -0.1 * state.qvel[: env.model.nu]
        env.control.write(ctrl=command)

    return cycle


def test_physics_rate_with_a_1khz_python_control_loop(
        benchmark: Any, record: Any, bench_model: Any, arm_env: mjfast.MujocoEnv) -> None:
    arm_env.control.read()  # the bridge publishes snapshots in both runs: compare the loop only
    loop_rates: list[float] = []
    timings = record.measured(
        benchmark, bench_model.name, GROUP_CONTROL_RATE, RATE_ROUNDS,
        {"alone": lambda: seconds_per_physics_step(arm_env, None, loop_rates),
         "with_loop": lambda: seconds_per_physics_step(arm_env, control_loop_cycle(arm_env),
                                                       loop_rates)})
    benchmark.extra_info.update(alone_steps_per_s=1 / timings["alone"].min_s,
                                with_loop_steps_per_s=1 / timings["with_loop"].min_s,
                                loop_hz=max(loop_rates))
    assert max(loop_rates) > 800  # the loop really ran at about 1 kHz
