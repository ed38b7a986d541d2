"""The soak (issue 8): reloads and env lifecycles under every kind of concurrent use, and memory.

Two parts, each run in a child interpreter of its own so that a crash is reported (with the
signal and the progress made) instead of ending the run, and so that one part's allocations do
not count in the next's:

- **memory**: RSS held (after `gc.collect()` and `malloc_trim(0)`) after N envs alive together
  and then closed, after N envs created and closed one at a time, and after R reloads of one env;
  each next to bare MuJoCo doing the same with `MjModel`/`MjData` (an env holds a model, its data
  and the control bridge's scratch data, so bare compiles one model and makes two datas);
- **soak**: one env stepping unpaced (`env.start(None)`) with a Python ControlPlugin
  (`update_read`/`update_write`) and the native `mjfast/NoOp`, while a control loop thread reads
  and writes, a 64x48 camera renders at a high rate and a thread takes its frames, a thread calls
  `statistics()` and one calls `reset()`; the main thread reloads R times. Then the same with N
  envs created, started and closed in a loop under those threads.

Commands lost: the control loop writes `ctrl[:] = k` for k = 1, 2, ... and the Python plugin's
`update_write` rewrites `ctrl[-1] = ctrl[0] + 0.5`; the loop then reads until the applied
command (`read().ctrl`) is exactly that. A cycle that a reset, a reload or an env swap overlaps
(each bumps a shared epoch before and after) may legitimately lose its command (a reset clears
staged commands, a reload brings a new `MjData`); it is counted as interrupted and written again.
A cycle with no such disturbance that does not see its command applied within 5 s is a lost
command; an applied value older than one already seen is reordered. Both must be 0.

    python bench/soak.py                         # the full soak: 1000 reloads, 1000 envs
    python bench/soak.py --reloads 100 --envs 100
    python bench/soak.py --only memory           # or: --only soak
    python bench/soak.py --json result.json      # also write the figures as JSON

Exit status: 0 when every part survived with 0 commands lost and memory within 1.5x bare
(plus 2 MB of allocator noise); 1 otherwise.

Reading the memory figures: RSS is what the process keeps, malloc'd-not-freed is what is still
allocated (the leak figure). RSS also counts free memory that allocators keep where a few live
objects pin it: glibc's heap pages, and CPython's 1 MiB obmalloc arenas, which are returned only
when empty. Many envs alive together allocate many small Python objects, and the arenas they
filled stay resident after the envs close (a high-water mark: a second round of as many envs
reuses them and holds no more; `PYTHONMALLOC=malloc` makes it go away).
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: cameras render headless

import argparse
import ctypes
import gc
import itertools
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mjfast
from models import arm7_xml

CAMERA = "watch"
XML = arm7_xml(camera=CAMERA, offscreen=(64, 48))
PLAIN_XML = arm7_xml()
RELAY_TYPE = "soak/Relay"
MEMORY_RATIO = 1.5
MEMORY_SLACK = 2 * 1024 * 1024  # allocator noise in RSS, bytes
COMMAND_TIMEOUT_S = 5.0
_libc = ctypes.CDLL(None)


# -- memory ---------------------------------------------------------------------------------


def held_bytes() -> int:
    """Resident memory after the collector ran and malloc gave its free pages back."""
    gc.collect()
    if hasattr(_libc, "malloc_trim"):
        _libc.malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def allocated_bytes() -> int:
    """Bytes malloc has handed out and not had back (glibc's mallinfo2; -1 without it).

    Unlike RSS this does not count free memory malloc keeps in pages that a few live chunks
    pin: it is the leak figure, RSS the cost figure.
    """
    gc.collect()
    if not hasattr(_libc, "mallinfo2"):
        return -1
    _libc.mallinfo2.restype = _MallInfo2
    info = _libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def plugin_params() -> dict[str, Any]:
    return {"mujoco_server": {
        "MujocoPlugins": [{"type": RELAY_TYPE, "name": "relay"},
                          {"type": "mjfast/NoOp", "name": "noop"}],
        "cameras": {CAMERA: {"width": 64, "height": 48, "rate_hz": 1000.0}},
    }}


def make_env(xml: str, plugins: bool) -> mjfast.MujocoEnv:
    return mjfast.MujocoEnv(xml, params=plugin_params() if plugins else None)


def bare_objects(xml: str) -> tuple[Any, ...]:
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model), mujoco.MjData(model)


def memory_case(case: str, count: int, plugins: bool) -> dict[str, Any]:
    """Bytes held after `count` rounds of `case`, for mjfast and bare MuJoCo (warmed up first)."""
    xml = XML if plugins else PLAIN_XML
    if plugins:
        mjfast.register_plugin(RELAY_TYPE, Relay)

    made = itertools.count(1)

    def step() -> None:  # progress for the parent's hang watchdog, every 10 envs or reloads
        done = next(made)
        if done % 10 == 0:
            progress(case, done)

    def together(make: Callable[[], Any], close: Callable[[Any], None], n: int) -> None:
        alive = []
        for _ in range(n):
            alive.append(make())
            step()
        for item in alive:
            close(item)
        alive.clear()

    def one_at_a_time(make: Callable[[], Any], close: Callable[[Any], None], n: int) -> None:
        for _ in range(n):
            close(make())
            step()

    def close_env(env: mjfast.MujocoEnv) -> None:
        env.close()

    def reloads_mjfast(n: int) -> None:
        with make_env(xml, plugins) as env:
            for _ in range(n):
                env.reload()
                step()

    def reloads_bare(n: int) -> None:
        held = bare_objects(xml)
        for _ in range(n):
            held = bare_objects(xml)
            step()
        del held

    if case == "reloads":
        runs = {"mjfast": reloads_mjfast, "bare": reloads_bare}
    else:
        loop = together if case == "together" else one_at_a_time
        runs = {
            "mjfast": lambda n: loop(lambda: make_env(xml, plugins), close_env, n),
            "bare": lambda n: loop(lambda: bare_objects(xml), lambda _: None, n),
        }
    result: dict[str, Any] = {"case": case, "count": count, "plugins": plugins}
    for name in ("bare", "mjfast"):
        # Warm-up: first-use allocations are not held per env. For envs alive together the warm-up
        # is a whole round of the same size: CPython's small-object allocator keeps the arenas of
        # that peak (a high-water mark, measured at ~93 kB per live env, most of it mujoco's own
        # wrapper objects), and what the issue asks is whether closing them and doing it again
        # grows memory, which the second round measures.
        runs[name](count if case == "together" else max(count // 20, 5))
        before, before_allocated = held_bytes(), allocated_bytes()
        runs[name](count)
        result[name] = held_bytes() - before
        result[f"{name}_allocated"] = allocated_bytes() - before_allocated
    return result


# -- the soak -------------------------------------------------------------------------------


class Relay(mjfast.ControlPlugin):
    """Passes commands through and marks them: ctrl[-1] = ctrl[0] + 0.5 (checked as applied)."""

    def init(self, node: Any, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.reads = 0
        return True

    def update_read(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.reads += 1

    def update_write(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        data.ctrl[-1] = data.ctrl[0] + 0.5

    def cleanup(self) -> None:
        pass


@dataclass
class Disturbances:
    """An epoch bumped before and after anything that may drop a staged command, and how many
    such things are under way (a reload may take longer than a command's timeout on a loaded
    machine: a command written during it is interrupted when it ends, not lost meanwhile)."""

    epoch: int = 0
    active: int = 0
    longest_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def around(self) -> Iterator[None]:
        with self.lock:
            self.epoch += 1
            self.active += 1
        started = time.monotonic()
        try:
            yield
        finally:
            with self.lock:
                self.epoch += 1
                self.active -= 1
                self.longest_s = max(self.longest_s, time.monotonic() - started)


@dataclass
class Tally:
    applied: int = 0
    interrupted: int = 0
    lost: int = 0
    reordered: int = 0
    frames: int = 0
    statistics: int = 0
    resets: int = 0
    short_lived: int = 0  # envs closed before their commands, reset and statistics came through
    expected_errors: dict[str, int] = field(default_factory=dict)
    expected_samples: dict[str, str] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)

    def expected(self, where: str, error: BaseException) -> None:
        key = f"{where}:{type(error).__name__}"
        self.expected_errors[key] = self.expected_errors.get(key, 0) + 1
        self.expected_samples.setdefault(key, str(error))

    def unexpected_error(self, where: str, error: BaseException) -> None:
        if len(self.unexpected) < 20:
            self.unexpected.append(f"{where}: {type(error).__name__}: {error}")


# Raised by a call on an env that another thread is closing or reloading: part of the game.
EXPECTED = (mjfast.LogicError, mjfast.CameraUnavailableError)


class Workers:
    """The concurrent users of whichever env is current: control loop, camera, stats, reset."""

    def __init__(self, disturbances: Disturbances) -> None:
        self.disturbances = disturbances
        self.tally = Tally()
        self.stop = threading.Event()
        self.env: mjfast.MujocoEnv | None = None
        self.camera: Any = None
        self.next_command = 1.0
        self.threads = [threading.Thread(target=self._guard, args=(name, loop), daemon=True,
                                         name=f"soak-{name}")
                        for name, loop in (("control", self._control), ("camera", self._camera),
                                           ("statistics", self._statistics),
                                           ("reset", self._reset))]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
            if thread.is_alive():
                self.tally.unexpected.append(f"{thread.name}: still running 30 s after stop")

    def _guard(self, name: str, loop: Callable[[], None]) -> None:
        while not self.stop.is_set():
            try:
                loop()
            except EXPECTED as error:
                self.tally.expected(name, error)
                time.sleep(0.001)  # the env is being reloaded or closed: not a spin meanwhile
            except Exception as error:
                self.tally.unexpected_error(name, error)
                time.sleep(0.01)  # not a spin on a persistent failure

    def _current(self) -> mjfast.MujocoEnv:
        env = self.env
        while env is None and not self.stop.is_set():
            time.sleep(0.001)
            env = self.env
        if env is None:
            raise mjfast.LogicError("stopped")
        return env

    def _control(self) -> None:
        """One command: written, then read back until applied (or interrupted, or lost)."""
        env = self._current()
        command = self.next_command
        self.next_command += 1.0
        epoch = self.disturbances.epoch
        ctrl = [command] * env.model.nu
        env.control.write(ctrl=ctrl)
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while not self.stop.is_set():
            state = env.control.read()
            if state.ctrl[0] > command:
                self.tally.reordered += 1
                return
            if state.ctrl[0] == command and state.ctrl[-1] == command + 0.5:
                self.tally.applied += 1
                return
            if self.disturbances.epoch != epoch:
                self.tally.interrupted += 1
                return
            if time.monotonic() > deadline and not self.disturbances.active:
                self.tally.lost += 1
                return
            time.sleep(0)  # the GIL to the others; the physics thread needs none

    def _camera(self) -> None:
        camera = self.camera
        if camera is None:
            time.sleep(0.001)
            return
        lease = camera.take_latest()
        if lease is None:
            time.sleep(0.0005)
            return
        with lease:
            if lease.data.shape != (48, 64, 3):
                raise AssertionError(f"frame of shape {lease.data.shape}")
        self.tally.frames += 1

    def _statistics(self) -> None:
        stats = self._current().statistics()
        if "env" not in stats:
            raise AssertionError("statistics() without 'env'")
        self.tally.statistics += 1
        time.sleep(0.002)

    def _reset(self) -> None:
        env = self._current()
        time.sleep(0.005)
        with self.disturbances.around():
            env.reset()
        self.tally.resets += 1


def progress(label: str, done: int) -> None:
    print(f"progress {label} {done}", flush=True)


def open_camera(env: mjfast.MujocoEnv) -> Any:
    camera = env.open_offscreen_camera(CAMERA)
    camera.enable_frames()
    return camera


def soak_reloads(reloads: int) -> dict[str, Any]:
    mjfast.register_plugin(RELAY_TYPE, Relay)
    disturbances = Disturbances()
    workers = Workers(disturbances)
    env = make_env(XML, plugins=True)
    survived = 0
    try:
        workers.camera = open_camera(env)
        env.start(None)
        workers.env = env
        workers.start()
        before = 0
        for survived in range(1, reloads + 1):
            if survived == min(10, reloads):
                before = held_bytes()  # after a few reloads: first-use allocations are not held
            with disturbances.around():
                env.reload()
            progress("reloads", survived)
        held = held_bytes() - before
    finally:
        workers.finish()
        statistics = env.statistics()
        env.close()
    relay = next(p for p in statistics["plugins"] if p["name"] == "relay")
    return {"part": "reloads", "survived": survived, "held_bytes": held,
            "steps": statistics["env"].get("steps"), "relay": relay,
            "longest_disturbance_s": disturbances.longest_s, **vars(workers.tally)}


def soak_envs(envs: int) -> dict[str, Any]:
    mjfast.register_plugin(RELAY_TYPE, Relay)
    disturbances = Disturbances()
    workers = Workers(disturbances)
    workers.start()
    survived = 0
    before = 0
    try:
        for survived in range(1, envs + 1):
            if survived == min(10, envs):
                before = held_bytes()  # after a few envs: first-use allocations are not held
            with disturbances.around():
                env = make_env(XML, plugins=True)
                workers.camera = open_camera(env)
                env.start(None)
                workers.env = env
            # Each env serves a few commands, a reset and a statistics() call before it goes
            # (frames too where rendering is fast enough: software GL takes ~40 ms a frame).
            tally = workers.tally
            wanted = (tally.applied + 2, tally.resets + 1, tally.statistics + 1)
            deadline = time.monotonic() + 5.0
            while any(now < want for now, want in
                      zip((tally.applied, tally.resets, tally.statistics), wanted,
                          strict=True)):
                if time.monotonic() > deadline:
                    tally.short_lived += 1
                    break
                time.sleep(0.001)
            with disturbances.around():
                workers.env = None
                workers.camera = None
                env.close()
            progress("envs", survived)
        del env
        held = held_bytes() - before
    finally:
        workers.finish()
    return {"part": "envs", "survived": survived, "held_bytes": held,
            "longest_disturbance_s": disturbances.longest_s, **vars(workers.tally)}


# -- the parent: children, figures, verdict ---------------------------------------------------


def run_child(args: list[str], stall: float, timeout: float, script: str = __file__
              ) -> dict[str, Any]:
    """Runs this script in a child interpreter; its result, or how it died and how far it got.

    A child that prints no progress for `stall` seconds is hung (a slow machine only makes each
    step slower; it still makes steps), and so is one still running after `timeout` seconds: it
    gets SIGABRT, on which its faulthandler writes every thread's stack to the stderr reported.
    """
    command = [sys.executable, "-X", "faulthandler", script, "--child", *args]
    started = time.monotonic()
    lines: list[str] = []
    last_step = [started]  # when the child last said something (a progress line, or its result)

    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        assert child.stdout is not None

        def read(stdout: Any) -> None:
            for line in stdout:
                lines.append(line.rstrip("\n"))
                last_step[0] = time.monotonic()

        reader = threading.Thread(target=read, args=(child.stdout,), daemon=True)
        reader.start()
        hung = None
        while child.poll() is None:
            now = time.monotonic()
            if now - last_step[0] > stall:
                hung = f"no progress for {stall:.0f} s (hang)"
            elif now - started > timeout:
                hung = f"still running after {timeout:.0f} s"
            if hung:
                child.send_signal(signal.SIGABRT)  # faulthandler: the stacks, then the end
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                break
            with suppress(subprocess.TimeoutExpired):
                child.wait(0.5)
        reader.join(10)
        child.stdout.close()
        err.seek(0)
        stderr = err.read()
    elapsed = time.monotonic() - started
    if hung is None:
        for line in reversed(lines):
            if line.startswith("result "):
                return {**json.loads(line[len("result "):]), "seconds": round(elapsed, 1)}
    if hung is not None:
        how = hung
    elif child.returncode < 0:
        how = f"killed by {signal.Signals(-child.returncode).name}"
    else:
        how = f"exit status {child.returncode} without a result"
    return {"child": args, "died": how, "progress": last_progress(lines),
            "stderr_tail": stderr[-6000:], "seconds": round(elapsed, 1)}


def last_progress(lines: list[str]) -> str:
    found = [line for line in lines if line.startswith("progress ")]
    return found[-1][len("progress "):] if found else "none"


def child_main(args: argparse.Namespace) -> int:
    kind = args.child
    try:
        if kind == "soak-reloads":
            result = soak_reloads(args.reloads)
        elif kind == "soak-envs":
            result = soak_envs(args.envs)
        else:
            case, count = kind.split(":")[1], int(kind.split(":")[2])
            result = memory_case(case, count, plugins=args.plugins)
    except BaseException:
        traceback.print_exc()
        return 1
    print("result " + json.dumps(result, default=str), flush=True)
    return 0


def per_thousand(value: int, count: int) -> float:
    return value / count * 1000 / 2**20  # MB per 1,000


def within(mjfast_bytes: int, bare_bytes: int) -> bool:
    return mjfast_bytes <= MEMORY_RATIO * max(bare_bytes, 0) + MEMORY_SLACK


def report_memory(results: list[dict[str, Any]]) -> bool:
    ok = True
    print("\nmemory held (RSS after gc + malloc_trim), MB per 1,000:")
    for result in results:
        if "died" in result:
            print(f"  {result['child']}: DIED ({result['died']}); stderr:\n{result['stderr_tail']}")
            ok = False
            continue
        count, mine, bare = result["count"], result["mjfast"], result["bare"]
        good = within(mine, bare)
        ok &= good
        ratio = f"{mine / bare:.2f}x" if bare > 0 else "n/a (bare held nothing)"
        print(f"  {result['case']:>13} x{count} plugins={result['plugins']!s:5}: "
              f"mjfast {per_thousand(mine, count):7.2f}  bare {per_thousand(bare, count):7.2f}  "
              f"ratio {ratio}  {'ok' if good else 'OVER'}   (malloc'd, not freed: mjfast "
              f"{per_thousand(result['mjfast_allocated'], count):.3f}, bare "
              f"{per_thousand(result['bare_allocated'], count):.3f})")
    return ok


def report_soak(result: dict[str, Any], count: int) -> bool:
    if "died" in result:
        print(f"  {result['child'][0]}: DIED ({result['died']}) at progress "
              f"'{result['progress']}'\n    stderr tail:\n{result['stderr_tail']}")
        return False
    part = result["part"]
    print(f"  {part}: survived {result['survived']}/{count}  commands applied "
          f"{result['applied']}, lost {result['lost']}, reordered {result['reordered']}, "
          f"interrupted by reset/reload/close {result['interrupted']} (the longest "
          f"{result['longest_disturbance_s']:.2f} s)")
    print(f"    frames {result['frames']}, statistics() {result['statistics']}, "
          f"envs closed before serving {result['short_lived']}, "
          f"resets {result['resets']}, expected errors {result['expected_errors']} "
          f"(e.g. {result['expected_samples']}), "
          f"held {per_thousand(result['held_bytes'], count):.2f} MB per 1,000 {part}, "
          f"{result['seconds']} s")
    if "relay" in result:
        print(f"    relay plugin statistics: {result['relay']}")
    for line in result["unexpected"]:
        print(f"    UNEXPECTED {line}")
    return (result["survived"] == count and result["lost"] == 0 and result["reordered"] == 0
            and not result["unexpected"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reloads", type=int, default=1000)
    parser.add_argument("--envs", type=int, default=1000)
    parser.add_argument("--only", choices=("memory", "soak"))
    parser.add_argument("--plugins", action="store_true",
                        help="memory: envs with the soak's plugins and camera (default: none)")
    parser.add_argument("--timeout", type=float, default=7200.0, help="per child, seconds")
    parser.add_argument("--stall", type=float, default=300.0,
                        help="a child with no progress for this many seconds is hung")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)

    results: dict[str, Any] = {"memory": [], "soak": []}
    ok = True
    if args.only in (None, "memory"):
        extra = ["--plugins"] if args.plugins else []
        for case, count in (("together", args.envs), ("one_at_a_time", args.envs),
                            ("reloads", args.reloads)):
            results["memory"].append(run_child([f"memory:{case}:{count}", *extra],
                                                  args.stall, args.timeout))
        ok &= report_memory(results["memory"])
    if args.only in (None, "soak"):
        print("\nsoak (physics unpaced, control loop + Relay + NoOp, camera, statistics, reset):")
        reloads = run_child(["soak-reloads", "--reloads", str(args.reloads)], args.stall,
                            args.timeout)
        ok &= report_soak(reloads, args.reloads)
        envs = run_child(["soak-envs", "--envs", str(args.envs)], args.stall, args.timeout)
        ok &= report_soak(envs, args.envs)
        results["soak"] = [reloads, envs]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\n{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
