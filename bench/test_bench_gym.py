"""Gymnasium vector envs (SPEC §21): mjfast's make_vec env of 8 worlds against gymnasium's
AsyncVectorEnv of 8 gymnasium MujocoEnvs of the same model and frame_skip, random actions; and
of 16 worlds against gymnasium's SyncVectorEnv of 16 (one process: what a vector env on two
cores gains over stepping the envs one after another in Python, at least 2.0).

Both step 8 copies of the arm `FRAME_SKIP` physics steps per env step and return the batched
(qpos, qvel) observations; the figure is env steps per second of the whole vector env (a ratio of
throughputs, at least 3.0: one call into compiled workers against eight worker processes that
each take a pipe round trip per step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import GROUP_GYM_SYNC, GROUP_GYM_VECTOR
from models import arm7_xml

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.envs.mujoco import MujocoEnv as GymnasiumMujocoEnv  # noqa: E402

import mjfast.gym  # noqa: E402

NUM_ENVS = 8
FRAME_SKIP = 5
STEPS_PER_ROUND = 100  # vector env steps per timed round: short, so that some are undisturbed
ROUNDS = 15
ENV_ID = "mjfast_bench/Arm7-v0"


class Arm7(GymnasiumMujocoEnv):  # type: ignore[misc]
    """The arm as a gymnasium MuJoCo env: (qpos, qvel) observed, ctrl the action, reward 0."""

    metadata = {"render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"]}  # noqa: RUF012

    def __init__(self, model_path: str, **kwargs: Any) -> None:
        space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(14,), dtype=np.float64)
        super().__init__(model_path, FRAME_SKIP, observation_space=space, **kwargs)
        self.metadata["render_fps"] = round(1.0 / self.dt)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.do_simulation(action, self.frame_skip)
        return self._get_obs(), 0.0, False, False, {}

    def reset_model(self) -> np.ndarray:
        self.set_state(self.init_qpos, self.init_qvel)
        return self._get_obs()

    def _get_obs(self) -> np.ndarray:
        return np.concatenate([self.data.qpos, self.data.qvel])


def _make_arm7(path: str) -> Callable[[], Arm7]:
    return lambda: Arm7(path)


@pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)
def test_make_vec_against_async_vector_env(benchmark: Any, record: Any, bench_model: Any,
                                           tmp_path: Path) -> None:
    path = tmp_path / "arm7.xml"
    path.write_text(arm7_xml())
    # The worker processes start first, before mjfast's worker threads exist.
    baseline = gymnasium.vector.AsyncVectorEnv([_make_arm7(str(path)) for _ in range(NUM_ENVS)])
    mjfast.gym.register(ENV_ID, str(path), frame_skip=FRAME_SKIP)
    envs = gymnasium.make_vec(ENV_ID, num_envs=NUM_ENVS, vectorization_mode="vector_entry_point")
    rng = np.random.default_rng(0)
    actions = rng.uniform(-50, 50, (STEPS_PER_ROUND, NUM_ENVS, 7)).astype(np.float32)

    def rounds_of(vector: Any) -> Callable[[], float]:
        def run() -> float:
            vector.reset(seed=0)
            start = time.perf_counter()
            for action in actions:
                observation, *_ = vector.step(action)
            elapsed = time.perf_counter() - start
            assert observation.shape == (NUM_ENVS, 14)
            return elapsed / STEPS_PER_ROUND
        return run

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_GYM_VECTOR, ROUNDS,
                                  {"mjfast": rounds_of(envs), "async": rounds_of(baseline)})
        # The same model, actions and frame_skip: both end in the same state.
        mine, _ = envs.reset(seed=0)
        theirs, _ = baseline.reset(seed=0)
        np.testing.assert_allclose(mine, theirs)
        for action in actions[:20]:
            mine, *_ = envs.step(action)
            theirs, *_ = baseline.step(action)
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-9)
        assert timings["mjfast"].min_s > 0
    finally:
        envs.close()
        baseline.close()
        gymnasium.registry.pop(ENV_ID, None)


SYNC_NUM_ENVS = 16


@pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)
def test_make_vec_against_sync_vector_env(benchmark: Any, record: Any, bench_model: Any,
                                          tmp_path: Path) -> None:
    path = tmp_path / "arm7.xml"
    path.write_text(arm7_xml())
    baseline = gymnasium.vector.SyncVectorEnv([_make_arm7(str(path))
                                               for _ in range(SYNC_NUM_ENVS)])
    mjfast.gym.register(ENV_ID, str(path), frame_skip=FRAME_SKIP)
    envs = gymnasium.make_vec(ENV_ID, num_envs=SYNC_NUM_ENVS,
                              vectorization_mode="vector_entry_point")
    rng = np.random.default_rng(0)
    actions = rng.uniform(-50, 50, (STEPS_PER_ROUND, SYNC_NUM_ENVS, 7)).astype(np.float32)

    def rounds_of(vector: Any) -> Callable[[], float]:
        def run() -> float:
            vector.reset(seed=0)
            start = time.perf_counter()
            for action in actions:
                observation, *_ = vector.step(action)
            elapsed = time.perf_counter() - start
            assert observation.shape == (SYNC_NUM_ENVS, 14)
            return elapsed / STEPS_PER_ROUND
        return run

    try:
        record.measured(benchmark, bench_model.name, GROUP_GYM_SYNC, ROUNDS,
                        {"mjfast": rounds_of(envs), "sync": rounds_of(baseline)})
        mine, _ = envs.reset(seed=0)
        theirs, _ = baseline.reset(seed=0)
        np.testing.assert_allclose(mine, theirs)
        for action in actions[:20]:
            mine, *_ = envs.step(action)
            theirs, *_ = baseline.step(action)
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-9)
    finally:
        envs.close()
        baseline.close()
        gymnasium.registry.pop(ENV_ID, None)
