"""Benchmarks of SimState (SPEC §20) against bare MuJoCo in the same run, on the humanoid.

1. A round trip, `env.set_state(env.get_state())`, beside bare MuJoCo doing the same work on the
   same data: `mj_getState` into a new array, `mj_setState`, `mj_forward` (set_state runs
   `mj_forward` after `mj_setState`, as SPEC §20 says; without it the bare pair costs ~1 us and
   the forward ~20 us of the humanoid's, so a ratio to the bare pair alone would measure
   MuJoCo's forward, not mjfast). At most 1.5x.
2. `env.get_state()` alone (a step-boundary hold, the copy, a SimState) beside `mj_getState` into
   a new array: at most 1.5x.
Both go through conftest.py's `record.measured` (ratios printed in the one table at the end).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from conftest import seconds_per_call

GROUP_STATE_ROUND_TRIP = "get_state+set_state round trip"
GROUP_STATE_GET = "get_state"

CALLS = 2_000  # calls per round
ROUNDS = 10  # interleaved rounds of each side, after one warm-up round

pytestmark = pytest.mark.parametrize("bench_model", ["humanoid"], indirect=True)

SPEC = mujoco.mjtState.mjSTATE_INTEGRATION


def stepped_env(bench_model: Any) -> mjfast.MujocoEnv:
    env = mjfast.MujocoEnv(bench_model.model)
    env.step(200)  # contacts made: a state with more than the initial pose in it
    return env


def test_round_trip_against_bare_mj_get_set_state_and_forward(
        benchmark: Any, record: Any, bench_model: Any) -> None:
    env = stepped_env(bench_model)
    model, data = env.model, env.data
    size = mujoco.mj_stateSize(model, SPEC)
    before = env.get_state()

    def bare() -> None:
        state = np.empty(size)
        mujoco.mj_getState(model, data, state, SPEC)
        mujoco.mj_setState(model, data, state, SPEC)
        mujoco.mj_forward(model, data)

    def mjfast_round_trip() -> None:
        env.set_state(env.get_state())

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_STATE_ROUND_TRIP, ROUNDS,
                                  {"bare": seconds_per_call(bare, CALLS),
                                   "mjfast": seconds_per_call(mjfast_round_trip, CALLS)})
        benchmark.extra_info.update(bare_us=timings["bare"].min_s * 1e6,
                                    mjfast_us=timings["mjfast"].min_s * 1e6)
        # Both left the state as it was, bit for bit, and stepping on gives the same as before.
        assert env.get_state() == before
        assert env.step_count == 200
    finally:
        env.close()


def test_get_state_against_bare_mj_get_state(benchmark: Any, record: Any,
                                             bench_model: Any) -> None:
    env = stepped_env(bench_model)
    model, data = env.model, env.data
    size = mujoco.mj_stateSize(model, SPEC)
    taken: list[Any] = [None, None]

    def bare() -> None:
        state = np.empty(size)
        mujoco.mj_getState(model, data, state, SPEC)
        taken[0] = state

    def mjfast_get() -> None:
        taken[1] = env.get_state()

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_STATE_GET, ROUNDS,
                                  {"bare": seconds_per_call(bare, CALLS),
                                   "mjfast": seconds_per_call(mjfast_get, CALLS)})
        benchmark.extra_info.update(bare_us=timings["bare"].min_s * 1e6,
                                    mjfast_us=timings["mjfast"].min_s * 1e6)
        assert taken[1].physics.tobytes() == taken[0].tobytes()
        assert taken[1].step_count == 200
    finally:
        env.close()
