"""The cost of mjfast's trampolines for a pair that belongs to no env (a "foreign" pair).

MuJoCo calls mjcb_control/mjcb_passive for every mj_forward/mj_step in the process; with
mjfast's hooks installed, a pair that is not the calling thread's stepping env is looked up in
the hooks registry (user mj_forward, model compilation, mujoco.rollout workers). This measures
that lookup two ways, with `--envs` envs alive (so the registry has that many entries):

- `trampoline`: the compiled control trampoline called in a C loop (bench/native/hook_loop.c,
  built here with `cc`) on a foreign pair, minus the same loop calling an empty function;
- `mj_step`: `mujoco.mj_step(m, d, nstep=N)` on a small non-env model with the hooks installed
  against uninstalled (each step calls both hooks once); the per-hook-call delta.

    python bench/hooks_foreign.py [--envs 4] [--repeat 15]

Each figure is the minimum over `--repeat` alternating rounds (the machine may be shared).
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco

import mjfast
from mjfast._core_loader import _core

SOURCE = Path(__file__).resolve().parent / "native" / "hook_loop.c"
SMALL_XML = """
<mujoco>
  <worldbody>
    <body><joint name="j" type="hinge"/><geom size=".1" mass="1"/></body>
  </worldbody>
  <actuator><motor joint="j"/></actuator>
</mujoco>
"""


def build_loop(directory: Path) -> ctypes.CDLL:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("hooks_foreign.py needs a C compiler (cc) for bench/native/hook_loop.c")
    library = directory / "hook_loop.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(SOURCE)],
                   check=True)
    loop = ctypes.CDLL(str(library))
    loop.ns_per_call.restype = ctypes.c_double
    loop.ns_per_call.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int64]
    return loop


def set_hooks(installed: bool) -> None:
    if installed:
        mjfast.install_hooks()
    else:
        mujoco.set_mjcb_control(None)
        mujoco.set_mjcb_passive(None)


def measure(envs: int, repeat: int, calls: int, steps: int) -> dict[str, float]:
    model = mujoco.MjModel.from_xml_string(SMALL_XML)
    foreign = mujoco.MjData(model)
    alive = [mjfast.MujocoEnv(model) for _ in range(envs)]
    try:
        with tempfile.TemporaryDirectory() as directory:
            loop = build_loop(Path(directory))
            trampoline = _core.control_trampoline_address()
            empty = ctypes.cast(loop.empty_callback, ctypes.c_void_p).value
            best = {"trampoline": float("inf"), "empty": float("inf"),
                    "step_installed": float("inf"), "step_uninstalled": float("inf")}
            for _ in range(repeat):
                best["trampoline"] = min(best["trampoline"], loop.ns_per_call(
                    trampoline, model._address, foreign._address, calls))
                best["empty"] = min(best["empty"], loop.ns_per_call(
                    empty, model._address, foreign._address, calls))
                for installed in (True, False):
                    set_hooks(installed)
                    start = time.perf_counter_ns()
                    mujoco.mj_step(model, foreign, nstep=steps)
                    elapsed = (time.perf_counter_ns() - start) / steps
                    key = "step_installed" if installed else "step_uninstalled"
                    best[key] = min(best[key], elapsed)
            set_hooks(True)
    finally:
        for env in alive:
            env.close()
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4, help="envs alive (registry entries)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--steps", type=int, default=200_000)
    args = parser.parse_args(argv)
    best = measure(args.envs, args.repeat, args.calls, args.steps)
    print(f"envs alive: {args.envs}")
    print(f"trampoline, foreign pair: {best['trampoline']:.2f} ns/call "
          f"(empty callback {best['empty']:.2f}; delta {best['trampoline'] - best['empty']:.2f})")
    step_delta = (best["step_installed"] - best["step_uninstalled"]) / 2
    print(f"mj_step small model: {best['step_installed']:.1f} ns/step hooks installed, "
          f"{best['step_uninstalled']:.1f} uninstalled; {step_delta:.2f} ns per hook call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
