"""Benchmarks of an env's lifecycle against bare MuJoCo in the same run, on the arm.

Creating and closing an env from the model's XML, with a Python plugin and two native ones
(discovery of their types, the plugin host, the hooks, the core's binding), beside what a bare
MuJoCo user does to start: compile the same XML and make the two MjData an env holds (the one
stepped and the control thread's copy). At most 2.5x. Discovery re-reading the entry points on
each resolve (three reads an env, ~5 ms each on this machine) made it 11.4x (1.9x after).
Goes through conftest.py's `record.measured` (the ratio printed in the one table at the end).
"""

from __future__ import annotations

from typing import Any

import mujoco
import pytest

import mjfast
from conftest import GROUP_ENV_CREATE, MODEL_XML, seconds_per_call

CALLS = 40  # envs per round
ROUNDS = 8  # interleaved rounds of each side, after one warm-up round

pytestmark = pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)


class _Idle(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True


def test_creating_an_env_against_compiling_its_model(
        benchmark: Any, record: Any, bench_model: Any) -> None:
    xml = MODEL_XML[bench_model.name]()
    mjfast.register_plugin("bench/Idle", _Idle)
    params = {"MujocoPlugins": [{"type": "bench/Idle"}, {"type": "mjfast/NoOp"},
                                {"type": "mjfast/PoseHoldPD", "kp": 1.0}]}
    made: list[int] = []

    def bare() -> None:
        model = mujoco.MjModel.from_xml_string(xml)
        mujoco.MjData(model), mujoco.MjData(model)

    def env() -> None:
        with mjfast.MujocoEnv(xml, params=params) as created:
            made.append(len(created.plugins))

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_ENV_CREATE, ROUNDS,
                                  {"bare": seconds_per_call(bare, CALLS),
                                   "mjfast": seconds_per_call(env, CALLS)})
        benchmark.extra_info.update(bare_ms=timings["bare"].min_s * 1e3,
                                    mjfast_ms=timings["mjfast"].min_s * 1e3)
        assert made and set(made) == {3}  # every env had its three plugins
    finally:
        mjfast.unregister_plugin("bench/Idle")
