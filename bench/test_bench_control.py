"""Benchmarks of `env.control` against bare MuJoCo in the same run (SPEC §7).

1. One `read()` + `write()` cycle without plugins, beside a Python loop copying the same fields
   out of a `mujoco.MjData` by hand: mjfast must not be slower.
2. Physics steps per second under `env.start(None)` with a 1 kHz Python control loop against it,
   beside the same without a loop: at least 0.9x.
Self-contained (its own model, timing and ratio report); each whole measurement runs once inside
pytest-benchmark's `benchmark.pedantic`, so `--benchmark-only` includes these and
`--benchmark-disable` still measures: `python -m pytest -q bench/test_bench_control.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast

# Timing noise on a shared machine: a ratio within this margin of its bound passes.
NOISE_MARGIN = 0.10
CYCLES = 20_000
REPEATS = 5
WINDOW_S = 1.0


def arm7_xml() -> str:
    """A 7-dof arm with motors and a sensor, no contacts (the same as bench/models.py's)."""
    lengths = [0.3, 0.3, 0.3, 0.25, 0.2, 0.1]
    axes = ["0 0 1", "0 1 0"]
    body = ('<joint name="j7" axis="0 0 1"/>'
            '<geom type="box" size="0.05 0.05 0.02"/><site name="ee"/>')
    for index in range(len(lengths), 0, -1):
        length = lengths[index - 1]
        body = (f'<joint name="j{index}" axis="{axes[(index - 1) % 2]}"/>'
                f'<geom fromto="0 0 0 0 0 {length}"/>'
                f'<body name="l{index + 1}" pos="0 0 {length}">{body}</body>')
    motors = "".join(f'<motor joint="j{i}"/>' for i in range(1, 8))
    return f"""
<mujoco model="bench_control_arm7">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <default>
    <joint type="hinge" damping="0.5" armature="0.01" range="-2.8 2.8" limited="true"/>
    <geom type="capsule" size="0.04" density="1000" contype="0" conaffinity="0"/>
    <motor ctrlrange="-50 50" ctrllimited="true"/>
  </default>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body name="l1" pos="0 0 0.1">{body}</body>
  </worldbody>
  <actuator>{motors}</actuator>
  <sensor><framepos objtype="site" objname="ee"/></sensor>
</mujoco>
"""


@pytest.fixture
def arm_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(arm7_xml())


@pytest.fixture
def arm_env(arm_model: mujoco.MjModel) -> Iterator[mjfast.MujocoEnv]:
    env = mjfast.MujocoEnv(arm_model)
    yield env
    env.close()


def report(capsys: pytest.CaptureFixture[str], title: str, rows: list[tuple[str, str]],
           ratio_name: str, ratio: float, bound: str) -> None:
    with capsys.disabled():  # the figures are the point: shown even when output is captured
        print(f"\n{title}")
        for name, value in rows:
            print(f"  {name:<44} {value}")
        print(f"  {ratio_name:<44} {ratio:.3f}  (bound {bound})")


def measure_once(benchmark: Any, measure: Callable[[], Any]) -> Any:
    """Runs the whole comparative measurement once under pytest-benchmark and returns its result
    (the ratio is computed inside, against bare MuJoCo in the same run)."""
    benchmark.group = "control interface"
    return benchmark.pedantic(measure, rounds=1, iterations=1)


def best_ns_per_cycle(cycle: Callable[[], None]) -> float:
    """The best of REPEATS timed runs of CYCLES calls, in ns per call."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        for _ in range(CYCLES):
            cycle()
        best = min(best, (time.perf_counter_ns() - start) / CYCLES)
    return best


def test_read_write_cycle_is_not_slower_than_copying_mjdata_by_hand(arm_model, arm_env,
                                                                   benchmark, capsys):
    data = mujoco.MjData(arm_model)
    mujoco.mj_forward(arm_model, data)
    command = np.linspace(-1.0, 1.0, arm_model.nu)
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

    def measure() -> tuple[float, float]:
        # Interleaved, so that load from elsewhere on the machine falls on both.
        bare_ns, ours_ns = [], []
        for _ in range(2):
            bare_ns.append(best_ns_per_cycle(by_hand))
            ours_ns.append(best_ns_per_cycle(mjfast_cycle))
        return min(bare_ns), min(ours_ns)

    bare, ours = measure_once(benchmark, measure)
    ratio = ours / bare
    report(capsys, "read()+write() cycle, no plugins (7-dof arm)",
           [("bare MuJoCo, np.copy of the fields + ctrl[:]=", f"{bare:8.0f} ns"),
            ("mjfast env.control.read() + write(ctrl=)", f"{ours:8.0f} ns")],
           "ratio mjfast / bare", ratio, f"<= 1.0 (+{NOISE_MARGIN:.0%} noise)")
    assert ratio <= 1.0 + NOISE_MARGIN


def steps_per_second(env: mjfast.MujocoEnv, with_loop: bool) -> tuple[float, int]:
    """Physics steps per wall second of env.start(None) over WINDOW_S, with or without a 1 kHz
    read+write loop on a Python thread; also returns the loop's cycle count."""
    stop = threading.Event()
    cycles = [0]
    failures: list[BaseException] = []

    def loop() -> None:
        try:
            period = 1e-3
            next_tick = time.perf_counter()
            command = np.zeros(env.model.nu)
            while not stop.is_set():
                state = env.control.read()
                command[:] = -0.1 * state.qvel[: env.model.nu]
                env.control.write(ctrl=command)
                cycles[0] += 1
                next_tick += period
                delay = next_tick - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=loop, daemon=True) if with_loop else None
    env.start(None)
    try:
        if thread is not None:
            thread.start()
        time.sleep(0.1)  # settle: thread start-up, first snapshot
        before = env.statistics()["env"]["steps"]
        start = time.perf_counter()
        cycles[0] = 0
        time.sleep(WINDOW_S)
        steps = env.statistics()["env"]["steps"] - before
        elapsed = time.perf_counter() - start
        loop_cycles = cycles[0]
    finally:
        stop.set()
        if thread is not None:
            thread.join(10.0)
        env.stop()
    assert thread is None or not thread.is_alive()
    assert not failures, failures
    return steps / elapsed, loop_cycles


def test_physics_rate_with_a_1khz_python_control_loop(arm_env, benchmark, capsys):
    arm_env.control.read()  # the bridge publishes snapshots in both runs: compare the loop only

    def measure() -> tuple[list[float], list[float], list[float]]:
        alone, with_loop, loop_rate = [], [], []
        for _ in range(2):  # interleaved, best of two each
            alone.append(steps_per_second(arm_env, with_loop=False)[0])
            rate, cycles = steps_per_second(arm_env, with_loop=True)
            with_loop.append(rate)
            loop_rate.append(cycles / WINDOW_S)
        return alone, with_loop, loop_rate

    alone, with_loop, loop_rate = measure_once(benchmark, measure)
    ratio = max(with_loop) / max(alone)
    report(capsys, "physics steps/s under env.start(None) (7-dof arm)",
           [("no control loop", f"{max(alone):12,.0f} steps/s"),
            ("1 kHz Python read+write loop", f"{max(with_loop):12,.0f} steps/s"),
            ("loop rate achieved", f"{max(loop_rate):12,.0f} Hz")],
           "ratio with loop / without", ratio, ">= 0.9")
    assert max(loop_rate) > 800  # the loop really ran at about 1 kHz
    assert ratio >= 0.9
