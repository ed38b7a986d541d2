"""VectorEnv (SPEC §21): 8 worlds stepped on a pool of C++ worker threads.

Against `mujoco.rollout` with a persistent pool of as many threads (`rollout.Rollout(nthread=)`,
the same 8 worlds, the same steps from the same initial state, its per-step state and sensor
outputs written into preallocated arrays): what the pool, the per-world EnvCore step and a native
NoOp per world cost over MuJoCo's own threaded stepping. And `threads=2` against `threads=1` on
the same 8 humanoid worlds: what the second thread gains.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
from mujoco import rollout

import mjfast
from conftest import seconds_per_call

# The groups and variants conftest.py's ratio table knows.
GROUP_VECTOR_ROLLOUT = "8 worlds on 2 threads"
GROUP_VECTOR_THREADS = "8 worlds: 2 threads / 1"
GROUP_VECTOR_FIXED = "VectorEnv.step(0), 1 world"
GROUP_VECTOR_OVERHEAD = "8 worlds step(1) on 2 threads"
GROUP_VECTOR_MEMORY = "memory per world, 1000 worlds"

WORLDS = 8
# Interleaved rounds of each variant, after one warm-up round: a two-thread round is disturbed
# whenever another process takes a core, so the best of many (a round is ~20 ms on the arm).
VECTOR_ROUNDS = {"arm7": 40, "humanoid": 15}
HUMANOID_ONLY = pytest.mark.parametrize("bench_model", ["humanoid"], indirect=True)


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def vector_of(model: mujoco.MjModel, threads: int) -> mjfast.VectorEnv:
    # Created inside the benchmark, after the autouse fixture has (re)installed the hooks.
    return mjfast.VectorEnv(model, WORLDS, {"MujocoPlugins": [{"type": "mjfast/NoOp"}]},
                            threads=threads)


def vector_round(vector: mjfast.VectorEnv, steps: int) -> Callable[[], float]:
    """One round from the initial state (the reset untimed): seconds per world-step."""
    def run() -> float:
        vector.reset()
        return timed(lambda: vector.step(steps)) / (WORLDS * steps)
    return run


def test_vector_env_against_mujoco_rollout(benchmark: Any, record: Any,
                                           bench_model: Any) -> None:
    model, steps = bench_model.model, bench_model.steps
    state_spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    initial = np.zeros((WORLDS, mujoco.mj_stateSize(model, state_spec)))
    for row in initial:
        mujoco.mj_getState(model, data, row, state_spec)
    states = np.zeros((WORLDS, steps, initial.shape[1]))
    sensors = np.zeros((WORLDS, steps, model.nsensordata))
    thread_datas = [mujoco.MjData(model) for _ in range(2)]
    vector = vector_of(model, threads=2)
    try:
        with rollout.Rollout(nthread=2) as pool:
            def rollout_round() -> float:
                return timed(lambda: pool.rollout(model, thread_datas, initial, nstep=steps,
                                                  state=states, sensordata=sensors)
                             ) / (WORLDS * steps)

            record.measured(benchmark, bench_model.name, GROUP_VECTOR_ROLLOUT,
                            VECTOR_ROUNDS[bench_model.name],
                            {"vector": vector_round(vector, steps), "rollout": rollout_round})
        # Correctness: every world ran the same steps from the same state as rollout's.
        qpos = vector.qpos
        final = np.zeros_like(initial)
        for index in range(WORLDS):
            mujoco.mj_setState(model, data, states[index, -1], state_spec)
            final[index, :model.nq] = data.qpos
        np.testing.assert_array_equal(qpos, final[:, :model.nq])
        for index in range(WORLDS):
            world = vector.world(index)
            stats = world.statistics()
            calls = stats["plugins"][0]["callbacks"]["control_callback"]["calls"]
            assert calls == stats["env"]["steps"] > 0  # its own NoOp, every step
            assert world.step_count == steps
    finally:
        vector.close()


@HUMANOID_ONLY
def test_vector_env_two_threads_against_one(benchmark: Any, record: Any,
                                            bench_model: Any) -> None:
    model, steps = bench_model.model, bench_model.steps
    vectors = {threads: vector_of(model, threads) for threads in (1, 2)}
    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_VECTOR_THREADS,
                                  VECTOR_ROUNDS[bench_model.name],
                                  {"two_threads": vector_round(vectors[2], steps),
                                   "one_thread": vector_round(vectors[1], steps)})
        # Results do not depend on the thread count (SPEC §21), bit for bit.
        np.testing.assert_array_equal(vectors[1].qpos, vectors[2].qpos)
        np.testing.assert_array_equal(vectors[1].qvel, vectors[2].qvel)
        # Only a floor here (the target is conftest's, gated on a quiet machine): the second
        # thread must gain something, so the pool really steps worlds side by side.
        speedup = timings["one_thread"].min_s / timings["two_threads"].min_s
        assert speedup > 1.2, speedup
    finally:
        for vector in vectors.values():
            vector.close()


CALLS_PER_ROUND = 2000  # step() calls per timed round of the fixed-cost figures
CALL_ROUNDS = 15


@pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)
def test_vector_step_fixed_cost(benchmark: Any, record: Any, bench_model: Any) -> None:
    """What one VectorEnv.step() call costs before any physics: step(0) of one world on one
    thread (it runs on the caller's thread), beside MujocoEnv.step(1) of the same model (one
    physics step and its env: 3.4 us on a quiet machine, so a ratio of 1.5 is 5 us)."""
    model = bench_model.model
    vector = mjfast.VectorEnv(model, 1, threads=1)
    env = mjfast.MujocoEnv(model)
    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_VECTOR_FIXED, CALL_ROUNDS,
                                  {"vector_step0": seconds_per_call(lambda: vector.step(0),
                                                                    CALLS_PER_ROUND),
                                   "env_step1": seconds_per_call(lambda: env.step(1),
                                                                 CALLS_PER_ROUND)})
        # step(0) steps nothing; the env's step(1) stepped.
        assert vector.world(0).step_count == 0 and float(vector.time[0]) == 0.0
        assert env.step_count > 0
        print(f"\nVectorEnv.step(0), 1 world, 1 thread: "
              f"{timings['vector_step0'].min_s * 1e6:.2f} us per call")
        benchmark.extra_info.update(vector_step0_us=timings["vector_step0"].min_s * 1e6)
    finally:
        vector.close()
        env.close()


@pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)
def test_vector_step_overhead_on_two_threads(benchmark: Any, record: Any,
                                             bench_model: Any) -> None:
    """One VectorEnv.step(1) of 8 arm worlds on 2 threads beside the same 8 worlds' mj_step one
    after another from Python: what the call costs beyond the physics (the hand-off to the
    workers, each world's EnvCore step) is the first minus half the second (two threads' share of
    the physics), printed per call. mujoco.rollout is no baseline for one step: its Python
    wrapper alone costs more than the whole call."""
    model = bench_model.model
    datas = [mujoco.MjData(model) for _ in range(WORLDS)]
    vector = mjfast.VectorEnv(model, WORLDS, threads=2)
    step = mujoco.mj_step

    def bare() -> None:
        for data in datas:
            step(model, data)

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_VECTOR_OVERHEAD, CALL_ROUNDS,
                                  {"vector": seconds_per_call(lambda: vector.step(1),
                                                              CALLS_PER_ROUND),
                                   "serial_mj_step": seconds_per_call(bare, CALLS_PER_ROUND)})
        # The same worlds, the same steps: the same states (SPEC §21: bit for bit).
        steps = vector.world(0).step_count
        assert all(vector.world(i).step_count == steps for i in range(WORLDS))
        again = mujoco.MjData(model)
        for _ in range(steps):
            step(model, again)
        np.testing.assert_array_equal(vector.qpos[0], again.qpos)
        overhead = (timings["vector"].min_s - timings["serial_mj_step"].min_s / 2) * 1e6
        print(f"\nVectorEnv.step(1), 8 arm worlds, 2 threads: {overhead:.2f} us per call beyond "
              f"half the serial physics")
        benchmark.extra_info.update(overhead_us=overhead)
    finally:
        vector.close()


MEMORY_WORLDS = 1000
MEMORY_SCRIPT = """
import gc, resource, sys
sys.path.insert(0, sys.argv[1])
import mujoco, mjfast
from models import humanoid_xml

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()

model = mujoco.MjModel.from_xml_string(humanoid_xml())
count = int(sys.argv[3])
mujoco.MjData(model)  # MuJoCo's own first-use allocations, on both sides
gc.collect()
before = rss()
if sys.argv[2] == "bare":
    kept = [mujoco.MjData(model) for _ in range(count)]
else:
    kept = mjfast.VectorEnv(model, count, threads=1)
    kept.step(1)  # the worlds step (their data is used, not only allocated)
    assert kept.world(count - 1).step_count == 1
gc.collect()
print((rss() - before) / count)
"""


@HUMANOID_ONLY
def test_memory_per_world(benchmark: Any, record: Any, bench_model: Any) -> None:
    """Resident memory per VectorEnv world against per bare mujoco.MjData of the same model
    (humanoid, 1000 of each, each side in a fresh process): a world is its data, its plugins and
    its control, with the rest (its bus, services) made only when asked. The figure is bytes per
    world, not seconds: the table's ratio is the same division."""
    bench_dir = str(Path(__file__).resolve().parent)

    def resident(kind: str) -> Callable[[], float]:
        def measure() -> float:
            result = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, bench_dir, kind,
                                     str(MEMORY_WORLDS)], capture_output=True, text=True,
                                    timeout=600, check=True)
            return float(result.stdout.strip().splitlines()[-1])
        return measure

    sizes = record.measured(benchmark, bench_model.name, GROUP_VECTOR_MEMORY, 1,
                            {"vector_world": resident("vector"), "bare_data": resident("bare")})
    per_world, per_data = sizes["vector_world"].min_s, sizes["bare_data"].min_s
    print(f"\nresident memory: {per_world / 1024:.0f} KiB per VectorEnv world, "
          f"{per_data / 1024:.0f} KiB per bare MjData (humanoid, {MEMORY_WORLDS} of each)")
    assert per_data > 100 * 1024  # the humanoid's MjData: about 500 KiB
    benchmark.extra_info.update(world_kib=per_world / 1024, data_kib=per_data / 1024)
