"""The physics rate of a running env, with and without a Python thread doing some work at 1 kHz
(a control loop, a state reader), paced or not: shared by the benchmarks that compare a running
env's rate with and without something beside it (a side thread, a recording, a ROS 2 bridge).

Imported as `side_loop` (pytest puts bench/ on sys.path for its conftest.py). Owns the timing
window and the paced thread; what the thread does is the caller's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import mjfast

WINDOW_S = 0.5  # physics-rate measurement window per round
SIDE_RATE_HZ = 1000.0


def _thread_cpu_ns() -> dict[str, int]:
    """Each thread of this process: nanoseconds it has run on a CPU (Linux's schedstat)."""
    times = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as stat:
                times[task] = int(stat.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            continue
    return times


def _machine_cpu_ticks() -> tuple[int, int]:
    """(all, steal) CPU ticks of the machine so far (Linux's /proc/stat): steal is the time the
    hypervisor ran something else on our vCPUs while they had work."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[7]


def seconds_per_physics_step(env: mjfast.MujocoEnv, work: Callable[[], None] | None = None,
                             side_rates: list[float] | None = None, *,
                             realtime_factor: float | None = None,
                             physics_cpu: list[float] | None = None,
                             steal: list[float] | None = None) -> float:
    """Wall time per physics step of env.start(realtime_factor) over WINDOW_S, with `work`
    called at SIDE_RATE_HZ on a Python thread (its achieved rate appended to `side_rates`), or
    alone. `physics_cpu`: the share of the window the physics thread ran on a CPU is appended
    (the busiest thread of the process over the window, which an unpaced physics thread is; a
    figure that the vCPUs' changing speed does not move, unlike the rate: time it waited for the
    GIL or for a CPU is what it lost). `steal`: the share of the machine's CPU time over the
    window that its hypervisor took (a virtual machine's vCPUs lose it when they are busy)."""
    stop = threading.Event()
    calls = [0]
    failures: list[BaseException] = []

    def side() -> None:
        assert work is not None
        try:
            period = 1.0 / SIDE_RATE_HZ
            next_tick = time.perf_counter()
            while not stop.is_set():
                work()
                calls[0] += 1
                next_tick += period
                delay = next_tick - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=side, daemon=True) if work is not None else None
    env.start(realtime_factor)
    try:
        if thread is not None:
            thread.start()
        time.sleep(0.1)  # settle: thread start-up, first snapshot
        # step_count, not statistics()' step counter: that one is the published snapshot's,
        # which lags the physics thread by as much as it likes (rates of 5,000 to 22,000 steps a
        # second were read off it for a thread steadily stepping 16,600).
        before = env.step_count
        cpu_before = _thread_cpu_ns() if physics_cpu is not None else {}
        ticks_before = _machine_cpu_ticks() if steal is not None else (0, 0)
        start = time.perf_counter()
        calls[0] = 0
        time.sleep(WINDOW_S)
        steps = env.step_count - before
        elapsed = time.perf_counter() - start
        if physics_cpu is not None:
            cpu_after = _thread_cpu_ns()
            busiest = max(cpu_after[task] - cpu_before[task] for task in cpu_after
                          if task in cpu_before)
            physics_cpu.append(busiest / 1e9 / elapsed)
        if steal is not None:
            ticks, stolen = (after - before for after, before in
                             zip(_machine_cpu_ticks(), ticks_before, strict=True))
            steal.append(stolen / ticks if ticks > 0 else 0.0)
        call_count = calls[0]
    finally:
        stop.set()
        if thread is not None:
            thread.join(10.0)
        env.stop()
    assert thread is None or not thread.is_alive()
    assert not failures, failures
    assert steps > 0
    if thread is not None and side_rates is not None:
        side_rates.append(call_count / elapsed)
    return elapsed / steps
