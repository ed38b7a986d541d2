"""`mjfast run` and `mjfast demo` (SPEC §11): the env made from MODEL and --params, stepped as
fast as possible or paced, plugin failures as warnings, and the statistics table at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import shutil
import textwrap
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from mjfast.cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    bad_input_is_one_line,
    import_mjfast,
    one_line,
)
from mjfast.cli.parsing import DEFAULT_DURATION_S
from mjfast.cli.progress import Progress
from mjfast.cli.recording import check_record_target, start_recording

# Wall time one chunk of env.step should take, and how often a paced run looks at its physics
# thread: short enough for a smooth progress bar, long enough that the per-call cost of stepping
# from Python stays negligible.
_CHUNK_WALL_S = 0.05


class _StrictFailure(Exception):
    """--strict: a plugin failed; the run stops and exits 1 after its statistics."""


def model_files(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """MODEL (with its --package-path directories) and --params of `run`, `view` and `serve`."""
    return model_file(args), Path(args.params) if args.params else None


def model_file(args: argparse.Namespace) -> Path:
    """MODEL, with the --package-path directories for a URDF's package:// URIs (SPEC §24)."""
    if not args.package_path:
        return Path(args.model)
    from mjfast.sim.config import ModelFile

    return ModelFile(args.model, dict(args.package_path))  # type: ignore[return-value]


def make_env(model: Path, params: Path | None) -> Any:
    mjfast = import_mjfast()
    if not Path(model).is_file():
        raise CliError(f"model file not found: {model}")
    if params is not None and not params.is_file():
        raise CliError(f"parameter file not found: {params}")
    with bad_input_is_one_line():
        return mjfast.MujocoEnv(model, params=params)


class _FailureReporter:
    """One `mjfast: warning:` line per failed plugin, the same wording whether it failed to load
    or while stepping, each plugin reported once; with `tracebacks` (-v), what the plugin raised
    follows it, indented."""

    def __init__(self, env: Any, warn: TextIO, strict: bool, tracebacks: bool = False) -> None:
        self._env = env
        self._warn = warn
        self._strict = strict
        self._tracebacks = tracebacks
        self._reported: set[tuple[str, str]] = set()
        self.failed = 0

    def report(self) -> None:
        fresh = []
        for info in self._env.plugins:
            failure = info.failure
            if failure is None or (info.name, failure.phase) in self._reported:
                continue
            self._reported.add((info.name, failure.phase))
            fresh.append(info.name)
            self._warn.write(f"mjfast: warning: {one_line(failure.summary())}\n")
            if self._tracebacks and failure.traceback:
                self._warn.write(textwrap.indent(failure.traceback.rstrip("\n"), "    ") + "\n")
        self.failed += len(fresh)
        if fresh and self._strict:
            raise _StrictFailure(f"plugin {', '.join(repr(n) for n in fresh)} failed (--strict)")




def _steps_taken(env: Any) -> int:
    return int(env.statistics()["env"]["steps"])


def step_chunk(env: Any, n: int, failures: _FailureReporter) -> None:
    """env.step(n), where a plugin's failure is a warning: the host has marked the plugin FAILED
    and dispatches it no more, so the run goes on and the table shows the failure, as for a
    plugin that failed to load. The step that failed ends that call early."""
    mjfast = import_mjfast()
    try:
        env.step(n)
    except mjfast.PluginError:
        failures.report()


def _step_as_fast_as_possible(env: Any, steps: float, progress: Progress,
                              failures: _FailureReporter) -> None:
    timestep = float(env.model.opt.timestep)
    first = _steps_taken(env)
    done = 0
    chunk = 1
    while done < steps:
        n = int(min(chunk, steps - done))
        started = time.perf_counter()
        step_chunk(env, n, failures)
        elapsed = time.perf_counter() - started
        done = _steps_taken(env) - first  # what ran, not what was asked for
        progress.update(done * timestep)
        # Aim each chunk at _CHUNK_WALL_S of wall time, growing at most 4x at a time.
        rate = n / elapsed if elapsed > 0 else float("inf")
        chunk = max(1, min(chunk * 4, int(min(rate * _CHUNK_WALL_S, 1e12)) or 1))


def _run_paced(env: Any, steps: float, realtime_factor: float, progress: Progress,
               failures: _FailureReporter) -> None:
    """Exactly `steps` steps (inf: until Ctrl-C) on the env's physics thread, paced by the core
    at `realtime_factor`: its step budget ends the run at `steps`. A plugin that fails meanwhile
    is a warning, as in an unpaced run; Ctrl-C (or --strict's failure) stops the thread, and a
    fault that ended it is raised by stop()."""
    timestep = float(env.model.opt.timestep)
    first = _steps_taken(env)
    with _thread_log_dropped():
        env.start(realtime_factor, steps=None if math.isinf(steps) else int(steps))
        try:
            while not env.wait(_CHUNK_WALL_S):
                progress.update((_steps_taken(env) - first) * timestep)
                failures.report()
        except BaseException:
            with contextlib.suppress(Exception):  # what stopped the run is the error to raise
                env.stop()
            raise
        env.stop()
    progress.update((_steps_taken(env) - first) * timestep)
    failures.report()


@contextlib.contextmanager
def _thread_log_dropped() -> Iterator[None]:
    """The physics thread logs each plugin failure and the fault that ends it ("physics thread:
    ..." on mjfast.env); a paced run reports both itself, in an unpaced run's words (a warning
    per failed plugin, the fault raised by stop()), so those records are dropped meanwhile."""
    logger = logging.getLogger("mjfast.env")

    def not_the_threads(record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("physics thread: ")

    logger.addFilter(not_the_threads)
    try:
        yield
    finally:
        logger.removeFilter(not_the_threads)


def _simulate(env: Any, steps: float, realtime: float | None, show_progress: bool,
              err: TextIO, failures: _FailureReporter) -> float:
    """Steps `env` `steps` times (inf: until Ctrl-C); returns the wall time it took."""
    timestep = float(env.model.opt.timestep)
    progress = Progress(err if show_progress else None, steps * timestep)
    started = time.perf_counter()
    try:
        with bad_input_is_one_line():
            if realtime is None:
                _step_as_fast_as_possible(env, steps, progress, failures)
            else:
                _run_paced(env, steps, realtime, progress, failures)
    finally:
        progress.close()
    return time.perf_counter() - started


def _steps_for(env: Any, steps: int | None, duration: float | None) -> float:
    if steps is not None:
        return steps
    if duration is not None and math.isinf(duration):
        return math.inf
    timestep = float(env.model.opt.timestep)
    return max(1, round((duration if duration is not None else DEFAULT_DURATION_S) / timestep))


# -- parameter file hints -------------------------------------------------------------------------


def _all_names(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}/{key}"
            yield name
            yield from _all_names(value, name)


def _missing_plugins_hint(env: Any, params: Path) -> str | None:
    """When `params` configures no plugins: where MujocoPlugins was looked for, and the keys of
    the file that are close to those names (`MujocoPlugin:`, `mujoco_sever:`)."""
    from mjfast.names import close_matches, suggestion

    if env.params.search(env.namespace, "MujocoPlugins") is not None:
        return None
    looked, namespace = [], env.namespace.rstrip("/")
    while True:
        looked.append(f"{namespace}/MujocoPlugins")
        if not namespace:
            break
        namespace = namespace.rpartition("/")[0]
    names = list(_all_names(env.params.to_dict("/")))
    close: list[str] = []
    for expected in looked:
        close += close_matches(expected, names, cutoff=0.8)
    close += [name for name in names
              if close_matches(name.rpartition("/")[2], ["MujocoPlugins"], cutoff=0.8)]
    close = list(dict.fromkeys(name.lstrip("/") for name in close))
    return (f"no MujocoPlugins in {params} (looked for {', '.join(looked)}): "
            f"no plugins are loaded{suggestion(close[:3])}")


# -- the statistics table -----------------------------------------------------------------------


def format_statistics(stats: dict[str, Any], wall_s: float | None = None, *,
                      running_s: float | None = None) -> str:
    """`env.statistics()` as the table the CLI prints (mjfast.format_statistics)."""
    from mjfast.sim.stats_table import format_statistics as format_

    return format_(stats, wall_s, running_s=running_s)


def print_statistics(env: Any, wall_s: float, out: TextIO, *,
                      pauses_excluded: bool = False) -> None:
    """The statistics table of a run that took `wall_s`, with the real-time factor of the whole
    run: a paced run waits between its steps, which the env's own figure (time spent stepping)
    leaves out. `pauses_excluded` (a run that could be paused, `mjfast view`): the env's own
    figure instead, simulated time over the time its physics thread ran (pacing waits included,
    pauses excluded), with that running time."""
    stats = env.statistics()
    if pauses_excluded:
        out.write(format_statistics(stats, wall_s, running_s=stats["env"]["elapsed_wall_s"])
                  + "\n")
        return
    if wall_s > 0:
        stats["env"]["realtime_factor"] = stats["env"]["simulated_s"] / wall_s
    out.write(format_statistics(stats, wall_s) + "\n")


# -- commands -------------------------------------------------------------------------------------


def run(model: Path, params: Path | None, args: argparse.Namespace,
         out: TextIO, err: TextIO) -> int:
    check_record_target(args)
    env = make_env(model, params)
    strict = getattr(args, "strict", False)
    # -v: each failure's traceback; at -vv the host's debug log has printed it already.
    verbose = getattr(args, "verbose", 0) or 0
    host_log = logging.getLogger("mjfast.host")
    tracebacks = verbose >= 1 and not host_log.isEnabledFor(logging.DEBUG)
    failures = _FailureReporter(env, err, strict, tracebacks)
    try:
        if params is not None:
            hint = _missing_plugins_hint(env, params)
            if hint:
                err.write(f"mjfast: warning: {hint}\n")
        steps = _steps_for(env, getattr(args, "steps", None), args.duration)
        start_recording(env, args, err)
        show_progress = not args.no_progress and not args.quiet
        started = time.perf_counter()
        try:
            failures.report()  # load failures, before the first step
            wall_s = _simulate(env, steps, args.realtime, show_progress, err, failures)
        except KeyboardInterrupt:
            # Ctrl-C: the statistics of what ran, then exit 130 (SPEC §18).
            err.write("\nmjfast: interrupted\n")
            print_statistics(env, time.perf_counter() - started, out)
            return EXIT_INTERRUPTED
        except _StrictFailure as failure:
            print_statistics(env, time.perf_counter() - started, out)
            raise CliError(str(failure)) from failure
        print_statistics(env, wall_s, out)
    finally:
        env.close()
    return EXIT_OK


def demo_files() -> tuple[Path, Path]:
    """The demo's model and parameters, as the package ships them."""
    model, params, *_ = _shipped_demo_files()
    return model, params


# What `mjfast demo --export` writes: the demo's model and parameters first, then what README's
# later sections use (the arm on a table with a box for simulation control, the ROS 2
# configuration, and the arm with a gripper and its two controllers for MoveIt).
_EXPORTED = ("demo_arm.xml", "demo.yaml", "demo_scene.xml", "ros2_params.yaml",
             "demo_arm_gripper.xml", "moveit_params.yaml")


def _shipped_demo_files() -> list[Path]:
    data = resources.files("mjfast") / "data"
    files = [Path(str(data / name)) for name in _EXPORTED]
    if not all(file.is_file() for file in files):
        raise CliError(f"the demo files are missing from the installed package ({data}); "
                       f"reinstall mjfast")
    return files


def export_demo(directory: Path, out: TextIO) -> int:
    """Writes the demo's files into `directory`; a file already there with the same content is
    left as it is (so README's sections that each start with the export can run in turn), one
    with other content is never overwritten: then nothing is written."""
    sources = _shipped_demo_files()
    targets = [directory / source.name for source in sources]
    changed = [str(target) for source, target in zip(sources, targets, strict=True)
               if target.exists() and not _same_content(source, target)]
    if changed:
        raise CliError(f"not overwriting {', '.join(changed)}: remove it or choose another "
                       f"--export directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for source, target in zip(sources, targets, strict=True):
            if not target.exists():
                shutil.copyfile(source, target)
    except OSError as error:
        raise CliError(f"cannot write the demo into {directory}: {error.strerror or error}"
                       ) from error
    out.write(f"wrote {', '.join(str(target) for target in targets)}; run the demo with:\n"
              f"  mjfast run {targets[0]} --params {targets[1]}\n")
    return EXIT_OK


def _same_content(source: Path, target: Path) -> bool:
    try:
        return target.is_file() and target.read_bytes() == source.read_bytes()
    except OSError:
        return False
