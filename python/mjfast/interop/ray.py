"""mjfast on Ray (SPEC §17, the extra `mjfast[ray]`): an env as a Ray actor, and many jobs at once.

`EnvActor` owns one `MujocoEnv` on a Ray worker; `run_many` runs whole jobs as Ray tasks and
returns one result per job, a failed job's error carried in its result. Scheduling, transport and
the object store are Ray's; this module only builds envs on workers and shapes what comes back.
Nothing else in mjfast imports it, so `import mjfast` works without Ray.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

try:
    import ray
    import ray.exceptions
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "mjfast.ray needs Ray, which is not installed: pip install 'mjfast[ray]'"
    ) from _error

import numpy as np
import yaml
from ray import cloudpickle as _pickle

from mjfast._core_loader import _core
from mjfast.plugin.base import LOAD_PHASES

__all__ = ["DEFAULT_NAMESPACE", "JOB_KEYS", "EnvActor", "run_many"]

DEFAULT_NAMESPACE = "/mujoco_server"
# What a run_many job may hold: `model` is required, and exactly one of `steps` and `duration`.
JOB_KEYS = ("model", "params", "steps", "duration", "record", "namespace",
            "allow_plugin_failures")
# The fields of env.control.read(), in the order ControlState has them.
_CONTROL_FIELDS: tuple[str, ...] = _core.CONTROL_STATE_FIELDS


# -- on the worker -----------------------------------------------------------------------------


def _worker_env(model: Any, params: Any, namespace: str, render_sync: bool = False) -> Any:
    """A MujocoEnv built on this worker from what a caller could ship (SPEC §17)."""
    # Workers render headless; a GL backend picked explicitly (osmesa) is kept.
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mjfast  # on the worker only: the driver needs no mujoco to describe a job

    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            model = bytes(model).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"model bytes must be UTF-8 MJCF text: {error}") from error
    return mjfast.MujocoEnv(model, params=_worker_params(params), namespace=namespace,
                            render_sync=render_sync)


def _worker_params(params: Any) -> Any:
    """`params` as MujocoEnv takes them: YAML text becomes a dict; a YAML file path stays."""
    from mjfast.errors import ConfigError

    if not isinstance(params, str):
        return params  # None, a dict, a ParameterServer, a path object: MujocoEnv checks them
    if "\n" not in params and _is_file(params):
        return params
    try:
        parsed = yaml.safe_load(params)
    except yaml.YAMLError as error:
        raise ConfigError(f"params: the YAML text does not parse: {error}") from error
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise ConfigError(f"params must be a dict, YAML text holding a mapping or the path of a "
                          f"YAML file on the worker; the YAML text holds a "
                          f"{type(parsed).__name__}: {params[:80]!r}")
    return dict(parsed)


def _is_file(path: str | os.PathLike[str]) -> bool:
    try:
        return Path(path).is_file()
    except OSError:  # not a path at all: e.g. text too long for a file name
        return False


def _bus_name(name: str, namespace: str) -> str:
    """A topic or service name as the actor's callers write it: relative to the env's namespace."""
    from mjfast.bus.params import resolve_name

    return resolve_name(name, namespace)


def _jsonable(value: Any) -> Any:
    from mjfast.sim.services import jsonable

    return jsonable(value)


@ray.remote(num_cpus=1)
class EnvActor:
    """One `MujocoEnv` on a Ray worker (SPEC §17).

    `EnvActor.remote(model, params=None, *, namespace="/mujoco_server")`: `model` is a path on the
    worker (absolute: a worker's working directory is not the caller's), an MJCF string or MJCF
    bytes; `params` a dict, YAML text or a YAML file's path on the worker. Plugins are discovered
    on the worker, so their packages must be installed there (or shipped with Ray's
    `runtime_env`). One CPU unless `EnvActor.options(num_cpus=...)` says otherwise.
    `render_sync=True` finishes each render turn before the next step, as in `MujocoEnv`.

    Every method raises on the worker what the env raises there; Ray hands it to the caller's
    `ray.get` as an exception of the same type (a `RayTaskError` subclass of it). An env that
    could not be built raises its construction error from every call. Topic and service names
    without a leading slash are resolved in the env's namespace (`"pause"` is
    `/mujoco_server/pause`).
    """

    def __init__(self, model: Any, params: Any = None, *, namespace: str = DEFAULT_NAMESPACE,
                 render_sync: bool = False) -> None:
        self._namespace = namespace
        self._cameras: dict[str, Any] = {}
        self._closed = False
        self._env: Any = None
        self._construction_error: BaseException | None = None
        try:
            self._env = _worker_env(model, params, namespace, render_sync)
            self._namespace = self._env.namespace
        except Exception as error:
            # Raised from each call instead: an actor whose __init__ raises dies, and its callers
            # then see only ActorDiedError, not the type of what went wrong.
            self._construction_error = error

    def _live(self) -> Any:
        if self._construction_error is not None:
            # A fresh exception each call, chained to the original: re-raising the one object
            # would add this call's frames to its traceback on every call.
            raise _fresh(self._construction_error) from self._construction_error
        if self._closed:
            from mjfast.errors import LogicError

            raise LogicError("the env is closed")
        return self._env

    def step(self, n: int = 1) -> dict[str, Any]:
        """Runs `n` physics steps; returns `{"step_count", "time"}` after them."""
        env = self._live()
        env.step(n)
        return {"step_count": env.step_count, "time": float(env.data.time)}

    def reset(self, **kwargs: Any) -> dict[str, Any]:
        """`env.reset(**kwargs)` (`keyframe`, `joint_positions`, ...); returns `{"time"}`."""
        env = self._live()
        env.reset(**kwargs)
        return {"time": float(env.data.time)}

    def control_read(self) -> dict[str, Any]:
        """`env.control.read()` as a dict: `time` and the state arrays."""
        state = self._live().control.read()
        return {field: getattr(state, field) for field in _CONTROL_FIELDS}

    def control_write(self, **commands: Any) -> None:
        """`env.control.write(ctrl=, qfrc_applied=, xfrc_applied=)`."""
        self._live().control.write(**commands)

    def call(self, service: str, request: Any = None) -> Any:
        """The bus service `service` (e.g. `"step"`, `"get_body_state"`) answering `request`."""
        env = self._live()
        return env.bus.call(_bus_name(service, self._namespace), request)

    def info(self) -> dict[str, Any]:
        """`env.info()`."""
        return self._live().info()

    def statistics(self) -> dict[str, Any]:
        """`env.statistics()`, JSON-able: lists for arrays, plugin states by name."""
        return _jsonable(self._live().statistics())

    def latest(self, topic: str) -> Any:
        """The last message on `topic`, or None."""
        env = self._live()
        return env.bus.latest(_bus_name(topic, self._namespace))

    def take_latest(self, camera: str, plane: str = "rgb") -> np.ndarray | None:
        """A copy of `camera`'s newest frame of `plane` (through Ray's object store), or None.

        The first call on a camera opens it and enables its frames, so it returns None: frames
        are rendered from the next steps on (at the camera's `rate_hz`). None too when no frame
        newer than the last one returned has completed.
        """
        env = self._live()
        handle = self._cameras.get(camera)
        if handle is None:
            handle = env.open_offscreen_camera(camera)
            handle.enable_frames()
            self._cameras[camera] = handle
        lease = handle.take_latest(plane)
        if lease is None:
            return None
        with lease:
            # A copy: the lease goes back to the frame store, the array to the object store.
            return np.array(lease.data)

    def close(self) -> None:
        """Closes the env (idempotent); later calls raise `mjfast.LogicError`."""
        if self._env is not None and not self._closed:
            self._cameras.clear()
            self._env.close()
        self._closed = True


def _fresh(error: BaseException) -> BaseException:
    """A new exception of `error`'s type and arguments (no traceback, cause or context); a
    RuntimeError with its text where the type cannot be rebuilt from its arguments."""
    try:
        fresh = copy.copy(error)
    except Exception:
        fresh = None
    if type(fresh) is not type(error) or fresh is error:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return fresh


# -- run_many ----------------------------------------------------------------------------------


class _Recorder:
    """The messages of one recorded topic, each a copy (a publisher may reuse and mutate the
    object it sent). A message that cannot be copied, or cannot be pickled as Ray must to ship
    it, is counted with the first error, never dropped silently."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.lost = 0
        self.first_error = ""

    def __call__(self, message: Any) -> None:
        try:
            self.messages.append(copy.deepcopy(message))
        except Exception as error:
            self._lose(error)

    def _lose(self, error: BaseException) -> None:
        self.lost += 1
        if not self.first_error:
            self.first_error = f"{type(error).__name__}: {error}"

    def shippable(self) -> list[Any]:
        """The messages that pickle; the others are counted as lost. One pickling pass with
        arrays out of band (not copied) when all do, as almost always."""
        if _pickles(self.messages):
            return self.messages
        kept = []
        for message in self.messages:
            if _pickles(message):
                kept.append(message)
                continue
            try:
                _pickle.dumps(message, protocol=5, buffer_callback=_out_of_band)
            except Exception as error:  # why, for the result
                self._lose(error)
        return kept


def _out_of_band(_buffer: Any) -> bool:
    return False  # a buffer (an array's data) left out of the pickle: checked, not copied


def _pickles(value: Any) -> bool:
    """Whether Ray can pickle `value`: the C pickler first (fast), then cloudpickle, which Ray
    uses and which also pickles what the former cannot (lambdas, classes defined in functions)."""
    for dumps in (pickle.dumps, _pickle.dumps):
        try:
            dumps(value, protocol=5, buffer_callback=_out_of_band)
        except Exception:
            continue
        return True
    return False


def _plugin_failures(env: Any, phases: frozenset[str] | None = None) -> list[str]:
    """One line per failed plugin, as `mjfast run` words it (in `phases`, or any)."""
    lines = []
    for info in env.plugins:
        failure = info.failure
        if failure is None or (phases is not None and failure.phase not in phases):
            continue
        lines.append(failure.summary())
    return lines


def _steps_taken(env: Any) -> int:
    return int(env.statistics()["env"]["steps"])


def _run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """Runs one checked job on this worker; raises what the env raises, and PluginError for a
    plugin that failed unless the job allows plugin failures."""
    from mjfast.errors import PluginError

    allow_failures = bool(job.get("allow_plugin_failures", False))
    env = _worker_env(job["model"], job.get("params"), job.get("namespace", DEFAULT_NAMESPACE))
    try:
        failed = _plugin_failures(env, LOAD_PHASES)
        if failed and not allow_failures:
            raise PluginError("; ".join(failed))  # before any step: the job is misconfigured
        recorders: dict[str, _Recorder] = {}
        for topic in job.get("record", ()):
            if topic not in recorders:  # a topic listed twice is recorded once
                recorders[topic] = _Recorder()
                env.bus.subscribe(_bus_name(topic, env.namespace), recorders[topic])
        if "steps" in job:
            steps = int(job["steps"])
        else:
            steps = round(float(job["duration"]) / float(env.model.opt.timestep))
        if allow_failures:
            # A plugin failing while stepping ends that env.step call early; the host dispatches
            # it no more, so the job goes on with the steps left (as `mjfast run` does).
            first = _steps_taken(env)
            while (left := steps - (_steps_taken(env) - first)) > 0:
                try:
                    env.step(left)
                except PluginError:
                    if steps - (_steps_taken(env) - first) == left:
                        raise  # no step was made: going on would not get any further
        else:
            env.step(steps)
        messages = {topic: recorder.shippable() for topic, recorder in recorders.items()}
        lost = {topic: {"count": recorder.lost, "error": recorder.first_error}
                for topic, recorder in recorders.items() if recorder.lost}
        result = {"statistics": _jsonable(env.statistics()), "qpos": env.data.qpos.copy(),
                  "qvel": env.data.qvel.copy(), "time": float(env.data.time),
                  "messages": messages, "messages_lost": lost, "error": None}
        if lost:
            result["error"] = "RecordError: " + "; ".join(
                f"{entry['count']} message(s) on {topic!r} could not be copied ({entry['error']})"
                for topic, entry in lost.items())
        return result
    finally:
        env.close()


def _failed(error: BaseException) -> dict[str, Any]:
    return {"statistics": None, "qpos": None, "qvel": None, "time": None, "messages": None,
            "messages_lost": None, "error": f"{type(error).__name__}: {error}"}


@ray.remote
def _job_task(job: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return _run_job(job)
    except Exception as error:  # carried in the result: the other jobs go on
        return _failed(error)


def _checked_job(index: int, job: Any) -> dict[str, Any]:
    """`job` validated and normalised on the driver, before anything runs (ValueError/TypeError)."""
    from mjfast.model.info import is_mjcf_string
    from mjfast.names import unknown

    where = f"jobs[{index}]"
    if not isinstance(job, Mapping):
        raise TypeError(f"{where} must be a dict with keys {', '.join(JOB_KEYS)}, "
                        f"got {type(job).__name__}")
    for key in job:
        if key not in JOB_KEYS:
            raise ValueError(unknown(f"{where}: unknown key", key, JOB_KEYS,
                                     exists="its keys are"))
    if "model" not in job:
        raise ValueError(f"{where}: the job needs 'model' (a path, an MJCF string or bytes)")
    checked = dict(job)
    model = job["model"]
    if isinstance(model, (str, os.PathLike)) and not is_mjcf_string(model):
        checked["model"] = _local_path_resolved(model)
    elif not isinstance(model, (str, bytes, bytearray)):
        raise TypeError(f"{where}: model must be a path, an MJCF string or bytes, "
                        f"got {type(model).__name__}")
    params = job.get("params")
    if isinstance(params, os.PathLike) or (isinstance(params, str) and "\n" not in params):
        checked["params"] = _local_path_resolved(params)  # YAML text stays as it is
    elif params is not None and not isinstance(params, (Mapping, str)):
        raise TypeError(f"{where}: params must be a dict or YAML text, "
                        f"got {type(params).__name__}")
    if ("steps" in job) == ("duration" in job):
        raise ValueError(f"{where}: the job needs exactly one of 'steps' and 'duration'")
    if "steps" in job:
        steps = job["steps"]
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"{where}: steps must be an integer >= 0, got {steps!r}")
        checked["steps"] = int(steps)
    else:
        duration = job["duration"]
        if (isinstance(duration, bool) or not isinstance(duration, (int, float, np.number))
                or not math.isfinite(duration) or duration < 0):
            raise ValueError(f"{where}: duration must be a finite number of simulated seconds "
                             f">= 0, got {duration!r}")
        checked["duration"] = float(duration)
    record = job.get("record", ())
    if isinstance(record, str) or not isinstance(record, Iterable):
        raise ValueError(f"{where}: record must be a list of topic names, got {record!r}")
    record = list(record)
    for topic in record:
        if not isinstance(topic, str) or not topic or topic.startswith("~"):
            raise ValueError(f"{where}: record holds {topic!r}, not a topic name (absolute, or "
                             f"relative to the env's namespace)")
    checked["record"] = record
    namespace = job.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str):
        raise ValueError(f"{where}: namespace must be a str, got {namespace!r}")
    allow = job.get("allow_plugin_failures", False)
    if not isinstance(allow, (bool, np.bool_)):
        raise ValueError(f"{where}: allow_plugin_failures must be true or false, got {allow!r}")
    checked["allow_plugin_failures"] = bool(allow)
    return checked


def _local_path_resolved(path: str | os.PathLike[str]) -> str:
    """`path` made absolute if it names a file here, so that a local cluster's workers find it
    whatever their working directory; otherwise as given (a path on the workers, or text)."""
    return str(Path(path).resolve()) if _is_file(path) else os.fspath(path)


def _progress_bar(total: int, show: bool | None) -> Any:
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with mjfast[ray]; without it, no bar
        return None
    return tqdm(total=total, unit="job", desc="mjfast run_many")


def run_many(jobs: Iterable[Mapping[str, Any]], *, num_cpus_per_job: float = 1,
             progress: bool | None = None) -> list[dict[str, Any]]:
    """Runs each job as a Ray task on whatever cluster `ray.init` connected to (SPEC §17).

    A job is a dict: `model` (a path, an MJCF string or bytes), `params` (a dict or YAML text),
    `steps` or `duration` (simulated seconds, rounded to whole steps of the model's timestep),
    `record` (topic names whose messages to keep; relative names are in the env's namespace),
    `namespace` (default `/mujoco_server`), `allow_plugin_failures` (default False: a plugin
    that fails to load fails the job, `"PluginError: plugin 'NAME' (TYPE) failed to load, in
    PHASE: ..."`, before it steps, and one failing while stepping fails it too; True: the job
    runs on without that plugin, which its statistics show as FAILED). Returns one dict per
    job, in order: `statistics`, `qpos`, `qvel`, `time`, `messages` (topic -> list of
    messages), `messages_lost` (topic -> `{"count", "error"}` for recorded messages that could
    not be copied or pickled, as Ray must to ship them; empty when none) and `error` (None, or
    `"TypeName: message"` for a job that failed; its other keys are then None). A job that lost
    recorded messages keeps its figures and what was recorded, and its error is `"RecordError:
    N message(s) on 'TOPIC' could not be copied (...)"`. A failed job does not stop the others.
    Malformed jobs raise before anything runs. `num_cpus_per_job` is the resource Ray reserves
    for each job; `progress` shows a bar (default: when stderr is a terminal).
    """
    checked = [_checked_job(index, job) for index, job in enumerate(jobs)]
    if (isinstance(num_cpus_per_job, bool) or not isinstance(num_cpus_per_job, (int, float))
            or not math.isfinite(num_cpus_per_job) or num_cpus_per_job <= 0):
        raise ValueError(f"num_cpus_per_job must be a positive number, got {num_cpus_per_job!r}")
    task = _job_task.options(num_cpus=num_cpus_per_job)
    refs = [task.remote(job) for job in checked]
    position = {ref: index for index, ref in enumerate(refs)}
    results: list[dict[str, Any] | None] = [None] * len(refs)
    bar = _progress_bar(len(refs), progress)
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    results[position[ref]] = ray.get(ref)
                except ray.exceptions.RayError as error:  # the worker died, the node was lost
                    cause = getattr(error, "cause", None)
                    results[position[ref]] = _failed(cause if cause is not None else error)
                if bar is not None:
                    bar.update(1)
    except BaseException:
        for ref in pending:  # Ctrl-C or a lost connection: nothing left running for nobody
            ray.cancel(ref)
        raise
    finally:
        if bar is not None:
            bar.close()
    return results  # type: ignore[return-value]
