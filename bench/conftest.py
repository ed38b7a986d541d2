"""Benchmark fixtures: the models, the hook bookkeeping, and the one ratio table and gate.

Every benchmark in bench/ records its timings here, each mjfast variant beside a baseline timed
interleaved with it; `pytest_terminal_summary` prints every ratio of this run in one table and
`pytest_sessionfinish` fails the run when a gated ratio misses its target by more than NOISE_MARGIN.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Headless rendering for the camera benchmarks, set before anything imports mujoco's renderer.
os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import pytest

import mjfast
from models import arm7_xml, humanoid_xml

# -- what is measured, and the gate ---------------------------------------------------------------

N_STEPS = 2000  # steps per timed round: one env.step(N) or mujoco.mj_step(m, d, nstep=N)
ROUNDS = {"arm7": 60, "humanoid": 15}  # timed rounds per benchmark, after one warm-up round

# Two envs on two threads, and mujoco.rollout's two threads, only reach 1.7x when both cores are
# free: on the shared 2-core development machine other processes hold one of them. Those two are
# reported against their target, and gated only when this is set (on a quiet machine).
GATE_PARALLEL = os.environ.get("MJFAST_BENCH_GATE_PARALLEL") == "1"


@dataclasses.dataclass(frozen=True)
class Target:
    """A ratio's bound: at most `bound` for a time ratio, at least `bound` for a throughput."""

    bound: float
    gated: bool = True  # False: printed with its verdict, never fails the run


# The ratios with a target (mjfast variant against its baseline, both measured in this run):
TARGETS = {
    # test_bench_step.py: stepping from Python, Python plugins (time ratios)
    "no_plugins": Target(1.02),  # env.step(N), no plugins / bare mj_step, hooks installed
    "noop": Target(1.15),  # env.step(N) + do-nothing Python plugin / the same bare mj_step
    "pd": Target(1.00),  # env.step(N) + Python PD plugin / the same law via set_mjcb_control
    # test_bench_native.py: native plugins (time ratios, then throughputs)
    "native_noop_arm7": Target(1.03),  # env.step(N) + 4 native NoOps / bare mj_step, no hooks
    "native_noop_humanoid": Target(1.01),  # the same on the humanoid
    "native_pd": Target(1.05),  # env.step(N) + native PDController / the law as a C mjcb_control
    "python_loop": Target(1.10),  # N x env.step(1) from Python / N x mujoco.mj_step from Python
    "parallel": Target(1.7, gated=GATE_PARALLEL),  # steps/s: 2 envs on 2 threads / 1 env
    "rollout_parallel": Target(1.7, gated=GATE_PARALLEL),  # steps/s: mujoco.rollout 2 / 1 thread
    # test_bench_vector.py: VectorEnv (SPEC §21), 8 worlds with a native NoOp each (throughputs)
    "vector_rollout_humanoid": Target(0.97),  # world-steps/s: VectorEnv 2 threads / rollout 2
    "vector_rollout_arm7": Target(0.9),  # the same on the arm (short steps: handoffs show)
    # world-steps/s: VectorEnv threads=2 / threads=1; needs both cores free, like "parallel"
    "vector_threads": Target(1.8, gated=GATE_PARALLEL),
    # one VectorEnv.step(0) call (1 world, 1 thread) / MujocoEnv.step(1): 5 us at 3.4 us a step
    "vector_fixed": Target(1.5),
    # VectorEnv.step(1) of 8 arm worlds on 2 threads / their mj_step one after another from
    # Python: two cores' worth is 0.5, plus the call's overhead (<= 5 us, which the benchmark
    # prints: ~0.6 on a quiet machine); needs both cores free, like "parallel"
    "vector_overhead": Target(0.65, gated=GATE_PARALLEL),
    # resident bytes per VectorEnv world / per bare MjData (humanoid, 1000 of each)
    "vector_memory": Target(1.5),
    # test_bench_control.py: the control interface
    "control_cycle": Target(1.00),  # read() + write(ctrl=) / copying MjData's fields by hand
    "control_rate": Target(0.9),  # physics steps/s with a 1 kHz read+write loop / without
    # test_bench_render.py: offscreen cameras (SPEC §10)
    "camera_rate": Target(0.8),  # physics steps/s with a 320x240 30 Hz async camera / without
    "render_turn": Target(1.2),  # one render_sync turn / mujoco.Renderer update_scene+render
    # test_bench_sim_control.py: simulation control (SPEC §13)
    "body_state_rate": Target(0.9),  # physics steps/s with 1 kHz get_body_state calls / without
    # test_bench_state.py: SimState (SPEC §20)
    "state_round_trip": Target(1.5),  # set_state(get_state()) / mj_getState+mj_setState+mj_forward
    "state_get": Target(1.5),  # env.get_state() / mj_getState into a new array
    # test_bench_lidar.py: mjfast/Lidar (SPEC §14), native (src/plugins/lidar.cc).
    "lidar_sync": Target(1.05),  # env.step + 16x1024 lidar 10 Hz / bare mj_multiRay
    "lidar_not_due": Target(1.01),  # env.step + a Lidar never due / env.step, no plugin
    # The async ratio is reported, not gated: natively it measured 0.69-0.89 on the loaded 2-core
    # development VM, where the stepping thread sleeps once per scan for the rest of a cast 5x
    # longer than its 20-step period, and a thread wake-up costs tens of microseconds of CPU (see
    # test_bench_lidar.py).
    "lidar_async": Target(0.95, gated=False),  # steps/s, async lidar (waits left out) / none
    # test_bench_ray.py: mjfast.ray on a local 2-CPU Ray cluster (SPEC §17)
    "ray_parallel": Target(1.7, gated=GATE_PARALLEL),  # jobs/s: run_many 2 workers / 1 worker
    # test_bench_remote.py: the viewer and the remote bus (SPEC §15)
    "remote_info": Target(1.5),  # remote `info` call / bare Zenoh query to an echo queryable
    "camera_delivery": Target(0.95),  # 640x480 30 Hz frames delivered remotely / rendered
    # Bus encode+send of a frame / bare Zenoh put of its bytes. Reported only: Zenoh takes a
    # bytes payload without copying it (a 921 KB put costs about one memcpy of it), and any
    # encoding of an ndarray into one payload copies the pixels at least once, so the bound
    # cannot hold whatever the codec; the table shows how far from it msgpack's API is.
    "frame_send": Target(1.2, gated=False),
    # Physics steps/s with the viewer open / without, both under Xvfb. Without a GPU the window
    # renders in software (Mesa llvmpipe, ~11 ms of CPU per 682x512 frame here): gated, like the
    # two-thread figures, only where a core is free for it.
    "viewer_rate": Target(0.9, gated=GATE_PARALLEL),
    # test_bench_web.py: physics steps/s with one headless Chromium showing the browser viewer /
    # none connected (SPEC §22). The browser draws in software on the same machine, so, like
    # the viewer's figure, gated only where a core is free for it.
    "web_rate": Target(0.9, gated=GATE_PARALLEL),
    # test_bench_ros2.py: the ROS 2 bridge (SPEC §19)
    "ros2_rate": Target(0.99),  # steps/s under start(): 1 kHz JointState bridged / not
    "ros2_rate_unpaced": Target(0.9),  # the same under start(None)
    "ros2_publish": Target(1.3),  # a JointState through the bridge / serialize_cdr + bare put
    # std_srvs call from zenoh-ros2-sdk to mjfast / to a bare queryable with a prebuilt reply
    "ros2_service": Target(1.5),
    # the same call / a bare Zenoh query (nearly all of it the SDK client's own cost): reported
    "ros2_service_sdk": Target(1.5, gated=False),
    # the same request as a plain query with rmw_zenoh's attachment (no SDK client): reported
    "ros2_service_raw": Target(1.5, gated=False),
    # test_bench_record.py: recording and replay (SPEC §20)
    "record_rate": Target(0.95),  # steps/s under start(None): recording JointState+states / not
    "replay_check": Target(1.2),  # replay --check of a 10 s recording / the same 10 s live
    # test_bench_actions.py: SPEC §23's controllers and actions
    # env.step(N) tracking a 7-joint quintic under JointTrajectoryController / the same ctrl
    # written by hand before each mujoco.mj_step in a Python loop
    "jtc_tracking": Target(1.05),
    # a FollowJointTrajectory send_goal round trip / a std_srvs round trip, same SDK client
    "action_send_goal": Target(1.5),
    # test_bench_gym.py: env steps/s, make_vec's 8 worlds / AsyncVectorEnv of 8 gymnasium envs
    "gym_vector": Target(3.0),
    # test_bench_entities.py (SPEC §25), on the humanoid's world
    "spawn": Target(1.5),  # a spawn of the arm / reload() of the model it makes
    "after_cycles": Target(1.01),  # env.step after 100 spawn/remove cycles / a fresh env
    # make_vec of 16 arm worlds / gymnasium's SyncVectorEnv of 16 (frame_skip 5): two cores'
    # worth; gated, like the other two-thread figures, only where both cores are free
    "gym_sync": Target(2.0, gated=GATE_PARALLEL),
    # test_bench_lifecycle.py: MujocoEnv(xml) with 3 plugins + close() / compiling the xml and
    # making two MjData
    "env_create": Target(2.5),
}
# The noise allowance, the same for every gated ratio: a time ratio fails above bound +
# NOISE_MARGIN, a throughput ratio below bound - NOISE_MARGIN. Two runs of one binary on this
# 2-core machine differ by up to ~2-3 % in the best round while other processes use the cores.
NOISE_MARGIN = 0.03
# Ratios compare the variant's best round with the best round of its baseline timed interleaved
# with it: other processes only ever add time, so the best is the figure least disturbed by them.
# The ratio of means is printed beside it.
RATIO_STATISTIC = "min"

MODELS = ("arm7", "humanoid")
MODEL_XML = {"arm7": arm7_xml, "humanoid": humanoid_xml}


@dataclasses.dataclass(frozen=True)
class BenchModel:
    """One benchmark model, and how long each benchmark runs on it."""

    name: str
    model: mujoco.MjModel
    steps: int  # per timed round
    rounds: int  # timed rounds, after one warm-up round

    def fresh_data(self) -> mujoco.MjData:
        return mujoco.MjData(self.model)


@pytest.fixture(scope="session", params=MODELS)
def bench_model(request: pytest.FixtureRequest) -> BenchModel:
    """Both models; a benchmark for one of them parametrizes it: `["arm7"], indirect=True`."""
    name = request.param
    return BenchModel(name, mujoco.MjModel.from_xml_string(MODEL_XML[name]()), N_STEPS,
                      ROUNDS[name])


@pytest.fixture
def arm_env(bench_model: BenchModel) -> Iterator[mjfast.MujocoEnv]:
    """An env on the benchmark's model, closed afterwards (the control and sim_control benches)."""
    env = mjfast.MujocoEnv(bench_model.model)
    yield env
    env.close()


def seconds_per_call(call: Callable[[], object], calls: int) -> Callable[[], float]:
    """One timed round for `record.measured`: the seconds per call of `calls` calls of `call`."""
    def measure() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls

    return measure


# -- MuJoCo's global callbacks ---------------------------------------------------------------------


def uninstall_hooks() -> None:
    """MuJoCo's stock state: no global control or passive callback at all."""
    mujoco.set_mjcb_control(None)
    mujoco.set_mjcb_passive(None)


@pytest.fixture(autouse=True)
def mjfast_hooks() -> Iterator[None]:
    """Every benchmark starts and ends with mjfast's trampolines installed (a user's state).

    A `set_mjcb_control` baseline replaces them; clearing the callbacks first keeps
    install_hooks from logging that it replaced someone's callback.
    """
    mjfast.install_hooks()
    yield
    uninstall_hooks()
    mjfast.install_hooks()


# -- collecting the results and the gate ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timing:
    """A benchmark's best and mean round: seconds per round, or per unit of work when measured."""

    min_s: float
    mean_s: float

    def value(self, statistic: str) -> float:
        return self.min_s if statistic == "min" else self.mean_s

    @classmethod
    def of(cls, seconds: list[float]) -> Timing:
        return cls(min(seconds), sum(seconds) / len(seconds))


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A variant's time over a baseline's, both from one benchmark of `group`.

    The baseline is timed once before every round of the variant, interleaved with it: on a
    machine whose other load comes and goes, both then see the same conditions. In the stepping
    groups the baseline is also a benchmark of its own (for pytest-benchmark's tables and
    --benchmark-compare); that ratio is printed too, but the gate uses the interleaved one.
    """

    group: str
    label: str
    variant: str
    baseline: str
    gate: str | None  # a key of TARGETS, or None for a figure that is reported only
    per_call: bool = False  # also report (variant - baseline) / N_STEPS, the cost per step in ns
    # A throughput ratio: baseline time / variant time per unit of work (steps/s over steps/s);
    # higher is better, and its target is a lower bound.
    throughput: bool = False
    models: tuple[str, ...] = MODELS  # the models it is printed (and gated) for

    def of(self, variant: Timing, baseline: Timing, statistic: str) -> float:
        if self.throughput:
            return baseline.value(statistic) / variant.value(statistic)
        return variant.value(statistic) / baseline.value(statistic)

    def passes(self, value: float) -> bool | None:
        """None: no target, or one that is reported only."""
        if self.gate is None or not TARGETS[self.gate].gated:
            return None
        return self.meets(value, NOISE_MARGIN)

    def meets(self, value: float, margin: float = 0.0) -> bool:
        bound = TARGETS[self.gate].bound if self.gate else 0.0
        return value >= bound - margin if self.throughput else value <= bound + margin


# Groups, variants (as the benchmarks record them) and the ratios printed for each model, in the
# order of the table.
GROUP_NO_PLUGINS = "no plugins"
GROUP_NOOP = "do-nothing control callback"
GROUP_PD = "Python PD law"
GROUP_NATIVE_NOOP = "4 native NoOps"
GROUP_NATIVE_PD = "native PD law"
GROUP_PYTHON_LOOP = "Python loop of single steps"
GROUP_PARALLEL = "two threads"
GROUP_VECTOR_ROLLOUT = "8 worlds on 2 threads"
GROUP_VECTOR_THREADS = "8 worlds: 2 threads / 1"
GROUP_VECTOR_FIXED = "VectorEnv.step(0), 1 world"
GROUP_VECTOR_OVERHEAD = "8 worlds step(1) on 2 threads"
GROUP_VECTOR_MEMORY = "memory per world, 1000 worlds"
GROUP_CONTROL_CYCLE = "control read+write cycle"
GROUP_CONTROL_RATE = "1 kHz control loop"
GROUP_CAMERA_RATE = "30 Hz offscreen camera"
GROUP_RENDER_TURN = "render turn"
GROUP_BODY_STATE_RATE = "1 kHz get_body_state"
GROUP_PAUSE_PAIR = "pause()+resume() pair"
GROUP_STATE_ROUND_TRIP = "get_state+set_state round trip"
GROUP_STATE_GET = "get_state"
GROUP_LIDAR_SYNC = "16x1024 lidar at 10 Hz"
GROUP_LIDAR_NOT_DUE = "lidar not due"
GROUP_LIDAR_ASYNC = "async 16x1024 lidar at 10 Hz"
GROUP_RAY_THROUGHPUT = "run_many on 2 CPUs"
GROUP_RAY_OVERHEAD = "run_many empty job"
GROUP_REMOTE_INFO = "remote info round trip"
GROUP_CAMERA_STREAM = "30 Hz 640x480 camera streamed"
GROUP_FRAME_SEND = "640x480 frame encode+send"
GROUP_VIEWER_RATE = "viewer open"
GROUP_WEB_RATE = "web viewer watched"
GROUP_ROS2_RATE = "1 kHz JointState over ROS 2"
GROUP_ROS2_RATE_UNPACED = "1 kHz JointState over ROS 2, unpaced"
GROUP_ROS2_PUBLISH = "JointState publish through the bridge"
GROUP_ROS2_SERVICE = "std_srvs round trip"
GROUP_RECORD_RATE = "recording JointState at 100 Hz"
GROUP_REPLAY = "replay --check of 10 s"
GROUP_GYM_VECTOR = "8-world gymnasium vector env"
GROUP_GYM_SYNC = "16-world gymnasium vector env, sync"
GROUP_JTC_TRACKING = "7-joint quintic trajectory, JointTrajectoryController"
GROUP_ACTION_ROUND_TRIP = "FollowJointTrajectory send_goal round trip"
GROUP_ACTION_FLOOR = "send_goal round trip, bare queryables"
GROUP_SPAWN = "spawn of the arm into the humanoid's world"
GROUP_AFTER_CYCLES = "stepping after 100 spawn/remove cycles"
GROUP_ENV_CREATE = "create and close an env"
ARM7 = ("arm7",)
HUMANOID = ("humanoid",)
RATIOS = [
    # test_bench_step.py
    Ratio(GROUP_NO_PLUGINS, "bare mj_step: hooks installed / uninstalled",
          "bare_hooked", "bare_unhooked", None),
    Ratio(GROUP_NO_PLUGINS, "env.step / bare mj_step (hooks installed)",
          "env", "bare_hooked", "no_plugins"),
    Ratio(GROUP_NO_PLUGINS, "env.step / bare mj_step (hooks uninstalled)",
          "env", "bare_unhooked", None),
    Ratio(GROUP_NOOP, "env.step + plugin / bare mj_step (hooks installed)",
          "env", "bare_hooked", "noop", per_call=True),
    Ratio(GROUP_NOOP, "set_mjcb_control / bare mj_step (hooks uninstalled)",
          "mjcb", "bare_unhooked", None, per_call=True),
    Ratio(GROUP_PD, "env.step + PD plugin / set_mjcb_control(PD)",
          "env", "mjcb", "pd", per_call=True),
    # test_bench_native.py
    Ratio(GROUP_NATIVE_NOOP, "env.step + 4 native NoOps / bare mj_step (uninstalled)",
          "env", "bare_unhooked", "native_noop_arm7", per_call=True, models=ARM7),
    Ratio(GROUP_NATIVE_NOOP, "env.step + 4 native NoOps / bare mj_step (uninstalled)",
          "env", "bare_unhooked", "native_noop_humanoid", per_call=True, models=HUMANOID),
    Ratio(GROUP_NATIVE_PD, "env.step + native PDController / C mjcb_control",
          "env", "c_callback", "native_pd", per_call=True, models=ARM7),
    Ratio(GROUP_PYTHON_LOOP, "N x env.step(1) / N x mj_step, Python loops",
          "env", "mj_step", "python_loop", per_call=True, models=ARM7),
    Ratio(GROUP_PARALLEL, "steps/s: 2 envs on 2 threads / 1 env",
          "two_envs", "one_env", "parallel", throughput=True, models=HUMANOID),
    Ratio(GROUP_PARALLEL, "steps/s: mujoco.rollout 2 threads / 1 (reference)",
          "rollout_two", "rollout_one", "rollout_parallel", throughput=True, models=HUMANOID),
    # test_bench_vector.py
    Ratio(GROUP_VECTOR_ROLLOUT, "steps/s: VectorEnv.step + NoOps / mujoco.rollout",
          "vector", "rollout", "vector_rollout_humanoid", throughput=True, models=HUMANOID),
    Ratio(GROUP_VECTOR_ROLLOUT, "steps/s: VectorEnv.step + NoOps / mujoco.rollout",
          "vector", "rollout", "vector_rollout_arm7", throughput=True, models=ARM7),
    Ratio(GROUP_VECTOR_THREADS, "steps/s: VectorEnv threads=2 / threads=1",
          "two_threads", "one_thread", "vector_threads", throughput=True, models=HUMANOID),
    Ratio(GROUP_VECTOR_FIXED, "VectorEnv.step(0), 1 world, 1 thread / MujocoEnv.step(1)",
          "vector_step0", "env_step1", "vector_fixed", models=ARM7),
    Ratio(GROUP_VECTOR_OVERHEAD, "VectorEnv.step(1), 8 worlds, 2 threads / serial mj_step",
          "vector", "serial_mj_step", "vector_overhead", models=ARM7),
    Ratio(GROUP_VECTOR_MEMORY, "resident bytes: VectorEnv world / bare MjData (1000)",
          "vector_world", "bare_data", "vector_memory", models=HUMANOID),
    # test_bench_control.py
    Ratio(GROUP_CONTROL_CYCLE, "control.read()+write() / copying MjData by hand",
          "mjfast", "by_hand", "control_cycle", models=ARM7),
    Ratio(GROUP_CONTROL_RATE, "steps/s under start(): 1 kHz loop / no loop",
          "with_loop", "alone", "control_rate", throughput=True, models=ARM7),
    # test_bench_render.py
    Ratio(GROUP_CAMERA_RATE, "steps/s: 320x240 camera at 30 Hz (async) / no camera",
          "with_camera", "without", "camera_rate", throughput=True, models=ARM7),
    Ratio(GROUP_RENDER_TURN, "render_sync turn / mujoco.Renderer update_scene+render",
          "mjfast", "renderer", "render_turn", models=ARM7),
    # test_bench_sim_control.py
    Ratio(GROUP_BODY_STATE_RATE, "steps/s under start(): 1 kHz get_body_state / none",
          "with_reads", "alone", "body_state_rate", throughput=True, models=ARM7),
    Ratio(GROUP_PAUSE_PAIR, "pause()+resume() on a running env / on an idle env",
          "running", "idle", None, models=ARM7),
    # test_bench_state.py
    Ratio(GROUP_STATE_ROUND_TRIP, "set_state(get_state()) / mj_get+setState+mj_forward",
          "mjfast", "bare", "state_round_trip", models=HUMANOID),
    Ratio(GROUP_STATE_GET, "env.get_state() / mj_getState into a new array",
          "mjfast", "bare", "state_get", models=HUMANOID),
    # test_bench_lidar.py
    Ratio(GROUP_LIDAR_SYNC, "env.step + 16x1024 lidar 10 Hz / bare mj_multiRay",
          "env", "bare_multiray", "lidar_sync", models=HUMANOID),
    Ratio(GROUP_LIDAR_NOT_DUE, "env.step + Lidar not due / env.step, no plugin",
          "env", "no_plugin", "lidar_not_due", per_call=True, models=HUMANOID),
    Ratio(GROUP_LIDAR_ASYNC, "steps/s: async lidar, worker waits left out / none",
          "stepping_thread", "no_lidar", "lidar_async", throughput=True, models=HUMANOID),
    Ratio(GROUP_LIDAR_ASYNC, "steps/s: async lidar, waits included / none (wall)",
          "raw", "no_lidar_wall", None, throughput=True, models=HUMANOID),
    # test_bench_ray.py
    Ratio(GROUP_RAY_THROUGHPUT, "jobs/s: run_many 2 workers / 1 worker (>= 0.5 s jobs)",
          "two_workers", "one_worker", "ray_parallel", throughput=True, models=HUMANOID),
    Ratio(GROUP_RAY_THROUGHPUT, "steps/s: mujoco.rollout 2 threads / 1 (reference)",
          "rollout_two", "rollout_one", None, throughput=True, models=HUMANOID),
    Ratio(GROUP_RAY_OVERHEAD, "empty job: run_many, one at a time / in-process",
          "ray", "in_process", None, models=ARM7),
    # test_bench_remote.py
    Ratio(GROUP_REMOTE_INFO, "remote info call / bare Zenoh query (echo queryable)",
          "remote_info", "bare_query", "remote_info", models=ARM7),
    Ratio(GROUP_CAMERA_STREAM, "frames: delivered remotely / rendered (640x480, 30 Hz)",
          "delivered", "rendered", "camera_delivery", throughput=True, models=ARM7),
    Ratio(GROUP_FRAME_SEND, "frame: bus encode+send / bare Zenoh put of its bytes",
          "bus_send", "bare_put", "frame_send", models=ARM7),
    Ratio(GROUP_VIEWER_RATE, "steps/s under start(): viewer open / not (Xvfb)",
          "with_viewer", "without", "viewer_rate", throughput=True, models=ARM7),
    # test_bench_web.py
    Ratio(GROUP_WEB_RATE, "steps/s under start(): a browser on the web viewer / none",
          "with_browser", "without", "web_rate", throughput=True, models=HUMANOID),
    # test_bench_ros2.py
    Ratio(GROUP_ROS2_RATE, "steps/s under start(): 1 kHz JointState bridged / not",
          "with_bridge", "without", "ros2_rate", throughput=True, models=ARM7),
    Ratio(GROUP_ROS2_RATE_UNPACED, "steps/s under start(None): 1 kHz JointState bridged / not",
          "with_bridge", "without", "ros2_rate_unpaced", throughput=True, models=ARM7),
    Ratio(GROUP_ROS2_PUBLISH, "JointState: bus publish through bridge / serialize_cdr+put",
          "bridge", "bare_put", "ros2_publish", models=ARM7),
    Ratio(GROUP_ROS2_SERVICE, "std_srvs call (zenoh-ros2-sdk): mjfast / bare queryable",
          "sdk_call", "sdk_echo", "ros2_service", models=ARM7),
    Ratio(GROUP_ROS2_SERVICE, "std_srvs call (zenoh-ros2-sdk) / bare query (reported)",
          "sdk_call", "bare_query", "ros2_service_sdk", models=ARM7),
    Ratio(GROUP_ROS2_SERVICE, "std_srvs request as a plain query / bare query (reported)",
          "raw_call", "bare_query", "ros2_service_raw", models=ARM7),
    # test_bench_record.py
    Ratio(GROUP_RECORD_RATE, "steps/s under start(None): recording / not",
          "recording", "without", "record_rate", throughput=True, models=HUMANOID),
    Ratio(GROUP_REPLAY, "replay --check of 10 s / the same 10 s live",
          "replay", "live", "replay_check", models=HUMANOID),
    # test_bench_gym.py
    Ratio(GROUP_GYM_VECTOR, "steps/s: make_vec 8 worlds / AsyncVectorEnv of 8 (frame_skip 5)",
          "mjfast", "async", "gym_vector", throughput=True, models=ARM7),
    # test_bench_entities.py
    Ratio(GROUP_SPAWN, "spawn of the arm / reload() of the model it makes",
          "spawn", "reload", "spawn", models=HUMANOID),
    Ratio(GROUP_AFTER_CYCLES, "env.step after 100 spawn/remove cycles / fresh env",
          "cycled", "fresh", "after_cycles", models=HUMANOID),
    Ratio(GROUP_GYM_SYNC, "steps/s: make_vec 16 worlds / SyncVectorEnv of 16 (frame_skip 5)",
          "mjfast", "sync", "gym_sync", throughput=True, models=ARM7),
    # test_bench_actions.py
    Ratio(GROUP_JTC_TRACKING, "env.step + JointTrajectoryController / ctrl by hand + mj_step",
          "controller", "by_hand", "jtc_tracking", per_call=True, models=ARM7),
    Ratio(GROUP_JTC_TRACKING, "env.step + JointTrajectoryController / bare mj_step(nstep)",
          "controller", "bare", None, per_call=True, models=ARM7),
    Ratio(GROUP_ACTION_ROUND_TRIP, "send_goal round trip / std_srvs round trip (SDK client)",
          "send_goal", "std_srvs", "action_send_goal", models=ARM7),
    # the same client against bare queryables with prebuilt replies: the transport and client's
    # floor under the ratio above
    Ratio(GROUP_ACTION_FLOOR, "the same, both answered by a bare queryable (floor)",
          "send_goal", "std_srvs", None, models=ARM7),
    # test_bench_lifecycle.py
    Ratio(GROUP_ENV_CREATE, "MujocoEnv(xml, 3 plugins) + close / MjModel(xml) + 2 MjData",
          "mjfast", "bare", "env_create", models=ARM7),
]

_VARIANTS = {(r.group, v) for r in RATIOS for v in (r.variant, r.baseline)}
# (model, group, variant) -> its benchmark; (model, group, variant, baseline) -> the baseline
# timed interleaved with that variant.
_results_key = pytest.StashKey[dict[tuple[str, ...], Timing]]()
_verdicts_key = pytest.StashKey[list[tuple[str, Ratio, Timing, Timing, bool | None]]]()


@pytest.hookimpl(trylast=True)  # after pytest-benchmark has made its session
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_results_key] = {}
    # One compact ratio table and a verdict (pytest_terminal_summary below); pytest-benchmark's
    # raw timing tables only with -v. Its regression checks (--benchmark-compare-fail) still run.
    session = getattr(config, "_benchmarksession", None)
    if session is not None and config.get_verbosity() < 1:
        session.quiet = True


class Recorder:
    """Runs one benchmark, with its interleaved baselines, and keeps the timings."""

    def __init__(self, results: dict[tuple[str, ...], Timing]) -> None:
        self._results = results

    @staticmethod
    def _check(group: str, names: Any) -> None:
        for name in names:
            if (group, name) not in _VARIANTS:
                raise ValueError(f"no ratio uses variant {name!r} of group {group!r}")

    def __call__(self, benchmark: Any, bench_model: BenchModel, group: str, variant: str,
                 target: Callable[[], None], setup: Callable[[], None],
                 baselines: dict[str, Callable[[], float]] | None = None) -> int:
        """Times `target`; returns the rounds run (warm-up included; 1 under --benchmark-disable).

        Before each round, untimed by pytest-benchmark: each of `baselines` (name -> a function
        that runs one baseline round and returns its own wall time), then `setup`, which must
        put back the hook state and the initial data that `target` needs.
        """
        self._check(group, (variant, *(baselines or {})))
        model = bench_model.name
        benchmark.group = f"{model}: {group}"
        benchmark.extra_info["variant"] = variant
        baseline_times: dict[str, list[float]] = {name: [] for name in baselines or {}}
        rounds_run = 0

        def interleaved_setup() -> None:
            nonlocal rounds_run
            rounds_run += 1
            for name, run_baseline in (baselines or {}).items():
                baseline_times[name].append(run_baseline())
            setup()

        benchmark.pedantic(target, setup=interleaved_setup, rounds=bench_model.rounds,
                           iterations=1, warmup_rounds=1)
        stats = getattr(benchmark, "stats", None)
        if stats is not None:  # None under --benchmark-disable: correctness only
            self._results[(model, group, variant)] = Timing(stats.stats.min, stats.stats.mean)
            for name, seconds in baseline_times.items():
                # The first baseline round ran before the variant's warm-up round.
                self._results[(model, group, variant, name)] = Timing.of(seconds[1:])
        return rounds_run

    def measured(self, benchmark: Any, model: str, group: str, rounds: int,
                 variants: dict[str, Callable[[], float]]) -> dict[str, Timing]:
        """Runs each of `variants` for `rounds` rounds, interleaved, and returns their timings.

        For what pytest-benchmark cannot time round by round (a rate over a window, threads,
        nanoseconds per call): each function runs one round and returns its own figure, in
        seconds per unit of work. One round of every variant in turn, after one warm-up round
        of each; the whole measurement runs once under `benchmark.pedantic`, so that
        --benchmark-only includes it (and --benchmark-disable runs a single round of each).
        """
        self._check(group, variants)
        benchmark.group = f"{model}: {group}"
        disabled = bool(getattr(benchmark, "disabled", False))

        def measure() -> dict[str, Timing]:
            figures: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(1 + (1 if disabled else rounds)):
                for name, run in variants.items():
                    figures[name].append(run())
            return {name: Timing.of(values[1:]) for name, values in figures.items()}

        timings: dict[str, Timing] = benchmark.pedantic(measure, rounds=1, iterations=1)
        benchmark.extra_info.update({name: t.min_s for name, t in timings.items()})
        if not disabled:
            for name, timing in timings.items():
                self._results[(model, group, name)] = timing
                for variant in variants:  # every one interleaved with every other
                    if variant != name:
                        self._results[(model, group, variant, name)] = timing
        return timings


@pytest.fixture(scope="module")
def router() -> Iterator[tuple[str, int]]:
    """A Zenoh router that is not mjfast (tests/support.py's) on a free loopback port, for one
    benchmark module: its endpoint and port."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from support import free_port, zenoh_router

    port = free_port()
    with zenoh_router(f"tcp/127.0.0.1:{port}"):
        yield f"tcp/127.0.0.1:{port}", port


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Recorder:
    return Recorder(request.config.stash[_results_key])


def _verdicts(config: pytest.Config) -> list[tuple[str, Ratio, Timing, Timing, bool | None]]:
    """(model, ratio, variant, interleaved baseline, passed: None when not gated) per ratio."""
    if _verdicts_key in config.stash:
        return config.stash[_verdicts_key]
    results = config.stash.get(_results_key, {})
    verdicts = []
    for model in MODELS:
        for ratio in RATIOS:
            variant = results.get((model, ratio.group, ratio.variant))
            baseline = results.get((model, ratio.group, ratio.variant, ratio.baseline))
            if model not in ratio.models or variant is None or baseline is None:
                continue
            passed = ratio.passes(ratio.of(variant, baseline, RATIO_STATISTIC))
            verdicts.append((model, ratio, variant, baseline, passed))
    config.stash[_verdicts_key] = verdicts
    return verdicts


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if any(passed is False for *_, passed in _verdicts(session.config)) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _verdict(ratio: Ratio, value: float, passed: bool | None) -> str:
    if passed is not None:
        return "ok" if passed else "FAILED"
    if ratio.gate is None:
        return "info"
    return ("met" if ratio.meets(value) else "missed") + " (not gated)"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    verdicts = _verdicts(config)
    if not verdicts:
        return
    results = config.stash[_results_key]
    stat = RATIO_STATISTIC
    write = terminalreporter.write_line
    terminalreporter.section("mjfast ratios to their baselines (this run)")
    write(f"'{stat}', 'mean': ratio to the baseline timed interleaved with the variant, gated on "
          f"'{stat}' (<= target + {NOISE_MARGIN:.2f}, or >= target - {NOISE_MARGIN:.2f} for a "
          f"throughput); 'groups': ratio of the two separate benchmarks' {stat}s; 'ns/step': "
          f"(variant - baseline) / {N_STEPS} steps per round.")
    header = (f"{'model':<9} {'ratio':<56} {stat:>6} {'mean':>6} {'groups':>6} "
              f"{'ns/step':>8} {'target':>7}  verdict")
    write(header)
    write("-" * len(header))
    for model, ratio, variant, baseline, passed in verdicts:
        value = ratio.of(variant, baseline, stat)
        separate = results.get((model, ratio.group, ratio.baseline))
        groups = ""
        if separate is not None and separate is not baseline:
            groups = f"{ratio.of(variant, separate, stat):6.3f}"
        per_call = ""
        if ratio.per_call:
            per_call = f"{(variant.value(stat) - baseline.value(stat)) / N_STEPS * 1e9:+.0f}"
        target = ""
        if ratio.gate:
            target = f"{'>=' if ratio.throughput else '<='}{TARGETS[ratio.gate].bound:.2f}"
        mean = ratio.of(variant, baseline, "mean")
        write(f"{model:<9} {ratio.label:<56} {value:6.3f} {mean:6.3f} {groups:>6}"
              f" {per_call:>8} {target:>7}  {_verdict(ratio, value, passed)}",
              red=passed is False, green=passed is True)
    for model in MODELS:
        bare = results.get((model, GROUP_NO_PLUGINS, "bare_unhooked"))
        if bare is not None:
            write(f"{model}: bare mj_step {bare.min_s / N_STEPS * 1e6:.2f} us/step (best round, "
                  f"hooks uninstalled)")
    turn = results.get(("arm7", GROUP_RENDER_TURN, "mjfast"))
    renderer = results.get(("arm7", GROUP_RENDER_TURN, "renderer"))
    if turn is not None and renderer is not None:
        write(f"arm7: render turn {turn.min_s * 1e3:.2f} ms, mujoco.Renderer "
              f"{renderer.min_s * 1e3:.2f} ms (best round, 320x240 RGB)")
    with_camera = results.get(("arm7", GROUP_CAMERA_RATE, "with_camera"))
    without = results.get(("arm7", GROUP_CAMERA_RATE, "without"))
    if with_camera is not None and without is not None:
        write(f"arm7: {1 / with_camera.min_s:.0f} steps/s with the 30 Hz camera, "
              f"{1 / without.min_s:.0f} without (best round)")
    ray_job = results.get(("arm7", GROUP_RAY_OVERHEAD, "ray"))
    local_job = results.get(("arm7", GROUP_RAY_OVERHEAD, "in_process"))
    if ray_job is not None and local_job is not None:
        write(f"run_many: Ray's per-job overhead {(ray_job.min_s - local_job.min_s) * 1e3:.1f} ms "
              f"(an empty job {ray_job.min_s * 1e3:.1f} ms through Ray, "
              f"{local_job.min_s * 1e3:.1f} ms in-process; best round)")
    if not GATE_PARALLEL:
        write("two-thread throughputs are reported, not gated (MJFAST_BENCH_GATE_PARALLEL=1 gates "
              "them)")
    failed = [ratio.label for _, ratio, _, _, passed in verdicts if passed is False]
    if failed:
        write(f"verdict: FAILED, {len(failed)} gated ratio(s) miss their target by more than "
              f"{NOISE_MARGIN:.2f}: " + "; ".join(failed), red=True, bold=True)
    else:
        gated = sum(passed is True for *_, passed in verdicts)
        write(f"verdict: PASSED, {gated} gated ratio(s) within target (+/- {NOISE_MARGIN:.2f} "
              f"noise margin); the others are reported", green=True, bold=True)
