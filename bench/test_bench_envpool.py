"""VectorEnv against EnvPool (a comparison users make when they choose; reported, not gated).

EnvPool's `Ant-v5` and `Humanoid-v5` (C++ envs on its own thread pool, its own bundled MuJoCo)
beside a VectorEnv of the same models (gymnasium's ant.xml and humanoid.xml, which EnvPool ships
too) with a gymnasium-equivalent observation: 8 worlds on 2 threads, frame_skip 5, the same
random actions, EnvPool's health termination off (no resets in either). The VectorEnv side steps
from Python as a user of it would: `step(5, actions)`, then per world `mj_rnePostConstraint` (as
gymnasium's MuJoCo envs do, for `cfrc_ext`) and the v5 observation of its data. EnvPool also
computes its rewards; the VectorEnv side does not.

EnvPool runs in a child interpreter (`MJFAST_BENCH_ENVPOOL_PYTHON`, default this one), so that
it can live in a virtual environment of its own; the rounds alternate between the two sides.
Skipped, saying why, where that interpreter cannot import envpool. Run:
    MJFAST_BENCH_ENVPOOL_PYTHON=/path/to/venv/bin/python \
        .venv/bin/python -m pytest bench/test_bench_envpool.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast

WORLDS, THREADS, FRAME_SKIP = 8, 2, 5
ENV_STEPS = 100  # batched env steps per timed round (8 worlds x 5 physics steps each)
ROUNDS = 8
ENVPOOL_PYTHON = os.environ.get("MJFAST_BENCH_ENVPOOL_PYTHON", sys.executable)

# The child: reads `<env steps>` lines, answers the seconds that many batched steps took.
ENVPOOL_SERVER = """
import json, sys, time
import numpy as np
import envpool
task, worlds, threads, frame_skip = sys.argv[1], *map(int, sys.argv[2:5])
env = envpool.make_gymnasium(task, num_envs=worlds, batch_size=worlds, num_threads=threads,
                             frame_skip=frame_skip, terminate_when_unhealthy=False,
                             max_episode_steps=10**9)
observation, _ = env.reset()
space = env.action_space
actions = np.random.default_rng(0).uniform(space.low, space.high,
                                           size=(64, worlds, space.shape[0]))
print(json.dumps({"observation": list(observation.shape), "version": envpool.__version__}),
      flush=True)
step = 0
for line in sys.stdin:
    count = int(line)
    start = time.perf_counter()
    for _ in range(count):
        observation, reward, terminated, truncated, _ = env.step(actions[step % 64])
        step += 1
    elapsed = time.perf_counter() - start
    assert np.isfinite(observation).all() and not (terminated | truncated).any()
    print(json.dumps({"seconds": elapsed}), flush=True)
"""


def _envpool_importable() -> str | None:
    """Why the comparison cannot run here, or None."""
    try:
        probe = subprocess.run([ENVPOOL_PYTHON, "-c", "import envpool"], capture_output=True,
                               text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{ENVPOOL_PYTHON} cannot run: {error}"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return (f"envpool is not importable by {ENVPOOL_PYTHON} ({last}); an optional "
                f"comparison, not a gate: pip install envpool into a virtual environment and "
                f"point MJFAST_BENCH_ENVPOOL_PYTHON at its python")
    return None


def gymnasium_xml(name: str) -> Path:
    gymnasium = pytest.importorskip("gymnasium", reason="the models are gymnasium's MuJoCo XMLs")
    path = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{name}.xml"
    if not path.is_file():
        pytest.skip(f"gymnasium ships no {path}")
    return path


def humanoid_v5(data: mujoco.MjData) -> np.ndarray:
    """Gymnasium's Humanoid-v5 observation (exclude_current_positions_from_observation)."""
    return np.concatenate((data.qpos[2:], data.qvel, data.cinert[1:].ravel(),
                           data.cvel[1:].ravel(), data.qfrc_actuator[6:],
                           data.cfrc_ext[1:].ravel()))


def ant_v5(data: mujoco.MjData) -> np.ndarray:
    """Gymnasium's Ant-v5 observation (contact forces clipped to [-1, 1], the world's left out)."""
    return np.concatenate((data.qpos[2:], data.qvel,
                           np.clip(data.cfrc_ext[1:], -1.0, 1.0).ravel()))


TASKS = {"Humanoid-v5": ("humanoid", humanoid_v5), "Ant-v5": ("ant", ant_v5)}


class EnvPoolChild:
    def __init__(self, task: str) -> None:
        arguments = [task, *map(str, (WORLDS, THREADS, FRAME_SKIP))]
        self._process = subprocess.Popen([ENVPOOL_PYTHON, "-c", ENVPOOL_SERVER, *arguments],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
        self.hello = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the envpool child ended (exit {self._process.wait()})")
        return json.loads(line)

    def seconds(self, env_steps: int) -> float:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{env_steps}\n")
        self._process.stdin.flush()
        return float(self._answer()["seconds"])

    def close(self) -> None:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)
        self._process.stdout.close()


@pytest.mark.parametrize("task", sorted(TASKS))
def test_vector_env_against_envpool(benchmark: Any, task: str) -> None:
    why_not = _envpool_importable()
    if why_not is not None:
        pytest.skip(why_not)
    name, observe = TASKS[task]
    model = mujoco.MjModel.from_xml_path(str(gymnasium_xml(name)))
    child = EnvPoolChild(task)
    vector = mjfast.VectorEnv(model, WORLDS, threads=THREADS)
    try:
        datas = [vector.world(index).data for index in range(WORLDS)]
        low, high = model.actuator_ctrlrange.T
        actions = np.random.default_rng(0).uniform(low, high, size=(64, WORLDS, model.nu))
        rne = mujoco.mj_rnePostConstraint
        observation = np.zeros((WORLDS, child.hello["observation"][1]))
        steps = [0]

        def vector_seconds(env_steps: int) -> float:
            start = time.perf_counter()
            for _ in range(env_steps):
                vector.step(FRAME_SKIP, actions[steps[0] % 64])
                steps[0] += 1
                for index, data in enumerate(datas):
                    rne(model, data)
                    observation[index] = observe(data)
            return time.perf_counter() - start

        def measure() -> dict[str, float]:
            best = {"vector": float("inf"), "envpool": float("inf")}
            for _ in range(1 + ROUNDS):  # the first round warms both up, and counts too
                best["envpool"] = min(best["envpool"], child.seconds(ENV_STEPS))
                best["vector"] = min(best["vector"], vector_seconds(ENV_STEPS))
            return best

        best = benchmark.pedantic(measure, rounds=1, iterations=1)
        # The observation is gymnasium's, of the worlds' current state: the same as a bare
        # MjData given the same actions from the same start computes (world 0, bit for bit).
        replica = mujoco.MjData(model)
        for step in range(steps[0]):
            replica.ctrl[:] = actions[step % 64, 0]
            mujoco.mj_step(model, replica, FRAME_SKIP)
        rne(model, replica)
        np.testing.assert_array_equal(observation[0], observe(replica))
        assert observation.shape[1] == len(observe(replica))
        world_steps = ENV_STEPS * WORLDS * FRAME_SKIP
        ratio = best["envpool"] / best["vector"]
        print(f"\n{task}, {WORLDS} worlds on {THREADS} threads, frame_skip {FRAME_SKIP}: "
              f"VectorEnv {world_steps / best['vector']:,.0f} physics steps/s, envpool "
              f"{child.hello['version']} {world_steps / best['envpool']:,.0f}: VectorEnv / "
              f"envpool = {ratio:.2f} (load {os.getloadavg()[0]:.1f})")
        benchmark.extra_info.update(vector_steps_per_s=world_steps / best["vector"],
                                    envpool_steps_per_s=world_steps / best["envpool"],
                                    ratio=ratio, envpool_version=child.hello["version"])
    finally:
        vector.close()
        child.close()
