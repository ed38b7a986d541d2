"""User-space instructions per step: bare mj_step against env.step with four native NoOps.

The time ratio of test_bench_native.py::test_noop_plugins_cost_nothing moves by a few percent
with whatever else runs on the machine; the instruction count of the same work does not. This
script owns that count: it runs each variant in a child process twice, with two step counts,
and reports the difference per step, so that the setup (imports, model compilation, plugin
loading) cancels out.

    .venv/bin/python bench/instructions.py [--model arm7|humanoid] [--plugins 4]
                                           [--counter perf|callgrind]

The counter is `perf stat -e instructions:u` (the CPU's own count; needs perf_event_paranoid <= 2
and a machine that exposes its counters, which many VMs do not) or, where perf has none,
valgrind's callgrind (slower, and an emulated count, but exact and the same from run to run).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

# The two step counts whose difference is measured, for each counter (callgrind runs ~50x slower).
STEPS = {"perf": (20_000, 120_000), "callgrind": (2_000, 12_000)}


def child(variant: str, model_name: str, plugins: int, steps: int) -> None:
    """Builds the model and steps it `steps` times as `variant` says (runs in the child)."""
    import mujoco

    import mjfast

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from models import arm7_xml, humanoid_xml

    xml = {"arm7": arm7_xml, "humanoid": humanoid_xml}[model_name]()
    model = mujoco.MjModel.from_xml_string(xml)
    if variant == "bare":
        mujoco.set_mjcb_control(None)
        mujoco.set_mjcb_passive(None)
        data = mujoco.MjData(model)
        on_worker_thread(lambda: mujoco.mj_step(model, data, nstep=steps))
        return
    mjfast.install_hooks()
    config = [{"type": "mjfast/NoOp", "name": f"noop{i}"} for i in range(plugins)]
    with mjfast.MujocoEnv(model, params={"MujocoPlugins": config}) as env:
        on_worker_thread(lambda: env.step(steps))
        if plugins:
            stats = env.statistics()
            calls = stats["plugins"][-1]["callbacks"]["control_callback"]["calls"]
            assert calls == steps, (calls, steps)


def on_worker_thread(work: Callable[[], object]) -> None:
    """Runs `work` on a thread other than the main one. On the main thread env.step(n) reads the
    clock every so many steps to run Python's signal handlers (Ctrl-C), with a stride that adapts
    to the step rate: under callgrind, ~50x slower, that is many more reads, and a count that
    depends on the machine's speed. Elsewhere it does not poll, and the count is the step's."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def perf_counts() -> bool:
    """Whether perf can count this machine's user-space instructions."""
    try:
        result = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                                capture_output=True, text=True)
    except FileNotFoundError:
        return False
    return result.returncode == 0 and result.stderr.split(",")[0].strip().isdigit()


def count(counter: str, variant: str, model_name: str, plugins: int, steps: int) -> int:
    """User-space instructions of one child run."""
    child_command = [sys.executable, __file__, "--child", variant, "--model", model_name,
                     "--plugins", str(plugins), "--steps", str(steps)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same interpreter work in every run
    if counter == "perf":
        command = ["perf", "stat", "-x,", "-e", "instructions:u", *child_command]
        result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        for line in result.stderr.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("instructions"):
                return int(fields[0])
        raise RuntimeError(f"no instruction count in perf's output:\n{result.stderr}")
    # One output file per thread: the stepping thread's alone, without the interpreter's start-up
    # and the model's compilation on the main thread (which vary by a few million instructions).
    with tempfile.TemporaryDirectory() as out:
        command = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                   f"--callgrind-out-file={out}/callgrind.out", *child_command]
        subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        # The thread started last is on_worker_thread's (an import starts one of its own).
        worker = max(Path(out).glob("callgrind.out-*"), key=lambda path: int(path.name[15:]))
        match = re.search(r"^totals: (\d+)", worker.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no instruction total in {worker.name}")
        return int(match.group(1))


def per_step(counter: str, variant: str, model_name: str, plugins: int) -> float:
    low_steps, high_steps = STEPS[counter]
    low, high = (count(counter, variant, model_name, plugins, steps)
                 for steps in (low_steps, high_steps))
    return (high - low) / (high_steps - low_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="arm7", choices=("arm7", "humanoid"))
    parser.add_argument("--plugins", type=int, default=4)
    parser.add_argument("--counter", choices=("perf", "callgrind"))
    parser.add_argument("--child", choices=("bare", "env"))
    parser.add_argument("--steps", type=int)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.plugins, args.steps)
        return
    counter = args.counter or ("perf" if perf_counts() else "callgrind")
    bare = per_step(counter, "bare", args.model, 0)
    env = per_step(counter, "env", args.model, args.plugins)
    print(f"{args.model} ({counter}): bare mj_step {bare:.0f} instructions/step, env.step + "
          f"{args.plugins} native NoOps {env:.0f} (+{env - bare:.0f}, ratio {env / bare:.4f})")


if __name__ == "__main__":
    main()
