"""Several envs stepped from several Python threads at once (SPEC §5, §9): with native plugins no
GIL is held across mj_step, so the steps overlap, and each env is dispatched to its own plugins."""

from __future__ import annotations

import threading
import time

import mjfast

MODEL = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="a">
      <joint name="j0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      <body pos="0.3 0 0">
        <joint name="j1" type="hinge" axis="0 1 0"/>
        <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_envs_step_in_parallel_each_with_its_own_plugins() -> None:
    counts = {0: 3000, 1: 5000, 2: 4000}
    plugins = [{"type": "mjfast/NoOp", "name": "first"}, {"type": "mjfast/NoOp", "name": "second"}]
    envs = [mjfast.MujocoEnv(MODEL, params={"MujocoPlugins": plugins}) for _ in counts]
    intervals: dict[int, tuple[float, float]] = {}
    barrier = threading.Barrier(len(envs))

    def run(index: int) -> None:
        barrier.wait()
        start = time.perf_counter()
        for _ in range(10):
            envs[index].step(counts[index] // 10)
        intervals[index] = (start, time.perf_counter())

    threads = [threading.Thread(target=run, args=(i,)) for i in counts]
    for thread in threads:
        thread.start()
    # The main thread keeps running Python meanwhile: nobody holds the GIL across the steps.
    spins = 0
    while any(thread.is_alive() for thread in threads):
        spins += 1
    for thread in threads:
        thread.join()
    try:
        assert spins > 0
        # The stepping intervals overlap: none waited for another to finish.
        latest_start = max(start for start, _ in intervals.values())
        earliest_end = min(end for _, end in intervals.values())
        assert latest_start < earliest_end
        for index, env in enumerate(envs):
            stats = env.statistics()
            assert stats["env"]["steps"] == counts[index]
            for plugin in stats["plugins"]:
                for callback in ("pre_step", "control_callback", "passive_callback",
                                 "last_stage_callback"):
                    assert plugin["callbacks"][callback]["calls"] == counts[index], (
                        index, plugin["name"], callback)
    finally:
        for env in envs:
            env.close()


def test_physics_threads_of_several_envs_run_side_by_side() -> None:
    envs = [mjfast.MujocoEnv(MODEL, params={"MujocoPlugins": [{"type": "mjfast/NoOp"}]})
            for _ in range(2)]
    try:
        for env in envs:
            env.start(None)
        time.sleep(0.2)
        for env in envs:
            env.stop()
        for env in envs:
            stats = env.statistics()
            assert stats["env"]["steps"] > 0
            calls = stats["plugins"][0]["callbacks"]["control_callback"]["calls"]
            assert calls == stats["env"]["steps"]
    finally:
        for env in envs:
            env.close()
