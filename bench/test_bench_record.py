"""Benchmarks of recording and replay (SPEC §20) against their baselines, in one run.

1. Physics steps per second on the humanoid under `env.start(None)` while recording (JointState
   at 100 Hz through the conversion table, a state every 100 steps) beside the same env not
   recording: at least 0.95, nothing dropped. The stepping thread only copies (states and applied
   commands into the core's ring, a bus message packed in C++ into another: a microsecond or so of
   the GIL it holds anyway); the writer thread gathers them with the GIL released; conversion,
   CDR and the MCAP file are the writer process's (mjfast.interop.record.writer), which need a
   core of their own for the figure to mean anything (unpaced, 100 Hz of a 5 ms step is ~10,000
   messages a second). Where other processes take the cores, the stepping thread queues for one
   behind them (the rounds are many, and the best of each side counts). Reported beside it: the
   share of each round the physics thread ran on a CPU, recording and not (the rest it waited,
   for the GIL that the writer thread holds, or for a CPU), which the vCPUs' changing speed does
   not move as it moves the rate.
2. `mjfast replay --check` of a 10 s recording (JointState at 100 Hz, the default state every
   simulated second) beside running the same 10 s live with the same plugins, both from the env's
   construction to its close: at most 1.2.
Run:
    .venv/bin/python -m pytest bench/test_bench_record.py
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rosbags", reason="recording needs the extra mjfast[ros2]")

import mjfast
from mjfast.recording import replay
from models import humanoid_xml
from side_loop import seconds_per_physics_step

GROUP_RECORD_RATE = "recording JointState at 100 Hz"
GROUP_REPLAY = "replay --check of 10 s"

RATE_ROUNDS = 10
REPLAY_ROUNDS = 3
REPLAY_SECONDS = 10.0

pytestmark = pytest.mark.parametrize("bench_model", ["humanoid"], indirect=True)


def joint_state_env() -> mjfast.MujocoEnv:
    params = {"mujoco_server": {"MujocoPlugins": [
        {"type": "mjfast/JointStatePublisher", "rate_hz": 100.0}]}}
    return mjfast.MujocoEnv(humanoid_xml(), params=params)


def test_physics_rate_while_recording(benchmark: Any, record: Any, bench_model: Any,
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    # One env for both sides, recording and not: two envs of one model step at rates a few
    # percent apart here (their data at other addresses), which the ratio would carry.
    recorded = joint_state_env()
    bags = (tmp_path / f"bag{i}" for i in itertools.count())
    written: list[Any] = []

    shares: dict[str, list[float]] = {"without": [], "recording": []}
    steal: dict[str, list[float]] = {"without": [], "recording": []}

    def recording() -> float:
        handle = recorded.record(next(bags), state_every=100)
        try:
            return seconds_per_physics_step(recorded, physics_cpu=shares["recording"],
                                            steal=steal["recording"])
        finally:
            handle.stop()
            written.append(handle.statistics())

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_RECORD_RATE, RATE_ROUNDS,
                                  {"without": lambda: seconds_per_physics_step(
                                      recorded, physics_cpu=shares["without"],
                                      steal=steal["without"]),
                                   "recording": recording})
    finally:
        recorded.close()
    topic = "/mujoco_server/JointStatePublisher/joint_states"
    assert all(w[topic] > 0 and w["/mjfast/state"] > 1 and w["dropped"] == 0 for w in written)
    # Reported beside the gated rate: the share of each round the physics thread ran on a CPU
    # (the rest it waited, for the GIL or for a CPU), median of the rounds.
    median = {name: float(np.median(values[1:])) for name, values in shares.items()}
    # And the share of the machine's CPU time its hypervisor took meanwhile (steal): on a VM,
    # what the recording's other process costs the physics thread beyond its own CPU time.
    stolen = {name: float(np.median(values[1:])) for name, values in steal.items()}
    benchmark.extra_info.update(without_steps_per_s=1 / timings["without"].min_s,
                                recording_steps_per_s=1 / timings["recording"].min_s,
                                physics_cpu_share=median, steal_share=stolen)
    with capsys.disabled():
        print(f"\n{bench_model.name}: the physics thread ran on a CPU {median['recording']:.3f} "
              f"of the time while recording, {median['without']:.3f} without (median of "
              f"{RATE_ROUNDS} rounds); the hypervisor's steal {stolen['recording']:.3f} of the "
              f"machine's CPU time while recording, {stolen['without']:.3f} without")


def test_replay_check_of_ten_seconds(benchmark: Any, record: Any, bench_model: Any,
                                     tmp_path: Path) -> None:
    env = joint_state_env()
    steps = round(REPLAY_SECONDS / env.model.opt.timestep)
    handle = env.record(tmp_path / "bag")
    env.step(steps)
    handle.stop()
    env.close()
    results: list[Any] = []

    def live() -> float:
        start = time.perf_counter()
        again = joint_state_env()
        again.step(steps)
        again.close()
        return time.perf_counter() - start

    def checked() -> float:
        start = time.perf_counter()
        results.append(replay(tmp_path / "bag", check=True))
        return time.perf_counter() - start

    timings = record.measured(benchmark, bench_model.name, GROUP_REPLAY, REPLAY_ROUNDS,
                              {"live": live, "replay": checked})
    assert all(r.first_difference is None and r.states == 12 for r in results), results
    benchmark.extra_info.update(live_s=timings["live"].min_s, replay_s=timings["replay"].min_s)
