"""Benchmarks of entities (SPEC §25) on the humanoid's world, against a peer measured in the same
run, interleaved:

1. A spawn of the 7-dof arm into the running humanoid's world beside a `reload()` of the model the
   spawn makes (the humanoid with the arm, loaded from its MJCF): at most 1.5x. The spawn's
   removal runs between rounds, untimed.
2. Stepping after 100 spawn/remove cycles of the arm beside stepping an env of the same model
   loaded fresh: at most 1.01x (a long-running world that changes does not get slower).
Both go through conftest.py's `record.measured` (ratios printed in the one table at the end).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mujoco
import pytest

import mjfast
from models import arm7_xml, humanoid_xml

GROUP_SPAWN = "spawn of the arm into the humanoid's world"
GROUP_AFTER_CYCLES = "stepping after 100 spawn/remove cycles"

ROUNDS = 30  # interleaved rounds of each side, after one warm-up round (a round is ms: cheap)
CYCLES = 100
STEPS = 2000

pytestmark = pytest.mark.parametrize("bench_model", ["humanoid"], indirect=True)


def humanoid_with_arm() -> str:
    """The model a spawn of the arm at (3, 0, 0) makes, as MJCF (what reload() reads)."""
    world = mujoco.MjSpec.from_string(humanoid_xml())
    arm = mujoco.MjSpec.from_string(arm7_xml())
    arm.option.timestep = world.option.timestep
    frame = world.worldbody.add_frame(pos=[3, 0, 0])
    frame.name = "arm"
    world.attach(arm, prefix="arm/", frame=frame)
    return world.to_xml()


def timed(call: Callable[[], None], after: Callable[[], None] | None = None
          ) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        call()
        seconds = time.perf_counter() - start
        if after is not None:
            after()
        return seconds

    return run


def test_spawn_against_reload_of_the_result(benchmark: Any, record: Any,
                                            bench_model: Any) -> None:
    world = mjfast.MujocoEnv(humanoid_xml())
    peer = mjfast.MujocoEnv(humanoid_with_arm())
    arm = arm7_xml()
    try:
        world.step(100)

        def spawn() -> None:
            world.spawn(arm, "arm", pose={"pos": [3, 0, 0]})

        timings = record.measured(benchmark, bench_model.name, GROUP_SPAWN, ROUNDS,
                                  {"reload": timed(peer.reload),
                                   "spawn": timed(spawn, after=lambda: world.remove("arm"))})
        benchmark.extra_info.update(spawn_ms=timings["spawn"].min_s * 1e3,
                                    reload_ms=timings["reload"].min_s * 1e3)
        spawn()  # what a spawn made is the model the peer reloads, in its sizes
        for size in ("nq", "nv", "nu", "nbody", "ngeom", "nsensor"):
            assert getattr(world.model, size) == getattr(peer.model, size), size
        assert world.step_count == 100  # spawns and removals keep the count
    finally:
        world.close()
        peer.close()


def test_stepping_after_cycles_against_a_fresh_env(benchmark: Any, record: Any,
                                                   bench_model: Any) -> None:
    cycled = mjfast.MujocoEnv(humanoid_xml())
    fresh = mjfast.MujocoEnv(humanoid_xml())
    arm = arm7_xml()
    try:
        for _ in range(CYCLES):
            cycled.spawn(arm, "arm", pose={"pos": [3, 0, 0]})
            cycled.step(1)
            cycled.remove("arm")
        start = cycled.get_state()
        fresh.set_state(start)  # the same model again: the state moves between them

        timings = record.measured(benchmark, bench_model.name, GROUP_AFTER_CYCLES, ROUNDS,
                                  {"fresh": timed(lambda: fresh.step(STEPS)),
                                   "cycled": timed(lambda: cycled.step(STEPS))})
        benchmark.extra_info.update(cycled_us=timings["cycled"].min_s / STEPS * 1e6,
                                    fresh_us=timings["fresh"].min_s / STEPS * 1e6)
        # Both stepped the same world from the same state the same number of steps.
        assert cycled.get_state().physics.tobytes() == fresh.get_state().physics.tobytes()
    finally:
        cycled.close()
        fresh.close()
