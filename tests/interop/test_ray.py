"""mjfast.ray (SPEC §17) on a local Ray cluster: run_many against the same jobs run in-process,
failures carried per job, and EnvActor's methods, frames and error types across the boundary.

One local cluster (2 CPUs, no dashboard) serves the whole module: starting Ray costs seconds.
Every ray.get has a timeout, so a lost worker fails a test instead of hanging the suite.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import threading
from collections.abc import Callable, Iterator
from importlib.resources import files
from typing import Any

import numpy as np
import pytest
import yaml

import mjfast
from mjfast.bus.params import resolve_name
from support import (
    BOX_XML,
    CAMERA_XML,
    SMALL_ARENA_STEPS_OK,
    SMALL_ARENA_XML,
    run_python,
)

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: the extra mjfast[ray] (also in mjfast[test]) provides it")

import mjfast.ray as mjray  # noqa: E402  (needs Ray: after the skip)

GET_TIMEOUT_S = 120.0  # generous: the first task on a worker imports mujoco on a loaded machine
DATA = files("mjfast") / "data"
ARM_PATH = str(DATA / "demo_arm.xml")
DEMO_PARAMS: dict[str, Any] = yaml.safe_load((DATA / "demo.yaml").read_text())


def get(refs: Any) -> Any:
    return ray.get(refs, timeout=GET_TIMEOUT_S)


@pytest.fixture(scope="module", autouse=True)
def local_cluster() -> Iterator[None]:
    if ray.is_initialized():  # pragma: no cover - another module left one running
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    yield
    ray.shutdown()


# -- the jobs, and the same jobs run in-process ------------------------------------------------


def demo_params(kp: float, with_heartbeat: bool = False) -> dict[str, Any]:
    params = copy.deepcopy(DEMO_PARAMS)
    plugins = params["mujoco_server"]["MujocoPlugins"]
    plugins[0]["kp"] = kp
    if with_heartbeat:
        plugins.append({"type": "mjfast/HeartbeatPublisher", "name": "beat"})
    return params


BOX_PARAMS_YAML = """
mujoco_server:
  MujocoPlugins:
    - {type: mjfast/FreeJointStatePublisher, name: poses, bodies: [box], rate_hz: 50}
"""

JOBS: list[dict[str, Any]] = [
    # A file path, params as a dict, a Python plugin, a published counter.
    {"model": ARM_PATH, "params": demo_params(600.0, with_heartbeat=True), "steps": 1100,
     "record": ["beat/heartbeat"]},
    # MJCF bytes, params as YAML text, messages holding numpy arrays, a duration in steps.
    {"model": BOX_XML.encode(), "params": BOX_PARAMS_YAML, "duration": 0.2019,
     "record": ["/mujoco_server/poses/box", "nobody/publishes/here"]},
    # An MJCF string and other gains: the jobs differ.
    {"model": (DATA / "demo_arm.xml").read_text(), "params": demo_params(50.0), "steps": 300},
]


def run_here(job: dict[str, Any]) -> dict[str, Any]:
    """`job` in this process, with MujocoEnv directly: what run_many must reproduce."""
    model = job["model"].decode() if isinstance(job["model"], bytes) else job["model"]
    params = job.get("params")
    if isinstance(params, str):
        params = yaml.safe_load(params)
    with mjfast.MujocoEnv(model, params=params) as env:
        messages: dict[str, list[Any]] = {topic: [] for topic in job.get("record", ())}
        for topic, received in messages.items():
            env.bus.subscribe(resolve_name(topic, env.namespace), received.append)
        steps = job.get("steps")
        if steps is None:
            steps = round(job["duration"] / env.model.opt.timestep)
        env.step(steps)
        return {"qpos": env.data.qpos.copy(), "qvel": env.data.qvel.copy(),
                "time": float(env.data.time), "messages": messages}


def assert_identical(actual: Any, expected: Any, where: str = "result") -> None:
    """Equal bit for bit: arrays of the same dtype and bytes, floats compared exactly."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), where
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, where
        assert actual.tobytes() == expected.tobytes(), where
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        for key in expected:
            assert_identical(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), where
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_identical(a, e, f"{where}[{index}]")
    else:
        assert type(actual) is type(expected) and actual == expected, where


# -- run_many ------------------------------------------------------------------------------------


def test_import_mjfast_does_not_import_ray() -> None:
    result = run_python("""
        import sys
        import mjfast
        assert "ray" not in sys.modules, "import mjfast imported ray"
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_mjfast_ray_without_ray_says_what_to_install() -> None:
    result = run_python("""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        try:
            import mjfast.ray
        except ImportError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert "mjfast.ray needs Ray, which is not installed: pip install 'mjfast[ray]'" in (
        result.stdout)


def test_run_many_equals_the_same_jobs_in_process() -> None:
    results = mjray.run_many(JOBS, progress=False)

    assert len(results) == len(JOBS)
    for index, (result, job) in enumerate(zip(results, JOBS, strict=True)):
        assert result["error"] is None, result["error"]
        expected = run_here(job)
        for key in ("qpos", "qvel", "time", "messages"):
            assert_identical(result[key], expected[key], f"jobs[{index}][{key!r}]")
    # What was recorded is what the plugins published: two heartbeats in 2.2 s, the box's pose
    # at 50 Hz over 0.202 s (0.2019 s rounded to 101 whole 2 ms steps), nothing else.
    assert [m["count"] for m in results[0]["messages"]["beat/heartbeat"]] == [1, 2]
    assert results[1]["time"] == pytest.approx(0.202)
    box_messages = results[1]["messages"]["/mujoco_server/poses/box"]
    assert len(box_messages) == 10 and isinstance(box_messages[0]["position"], np.ndarray)
    assert results[1]["messages"]["nobody/publishes/here"] == []
    assert not np.array_equal(results[0]["qpos"], results[2]["qpos"])


def test_run_many_statistics_are_json_able() -> None:
    (result,) = mjray.run_many([JOBS[0]], progress=False)

    statistics = json.loads(json.dumps(result["statistics"]))
    assert statistics["env"]["step_count"] == 1100
    states = {plugin["name"]: plugin["state"] for plugin in statistics["plugins"]}
    assert states == {"pose_hold": "ACTIVE", "beat": "ACTIVE"}


def test_run_many_carries_each_failure_and_runs_the_other_jobs() -> None:
    jobs = [
        {"model": "<mujoco><worldbody><geom type='nonsense'/></worldbody></mujoco>", "steps": 1},
        {"model": ARM_PATH, "params": "mujoco_server: {MujocoPlugins: 5}", "steps": 1},
        {"model": SMALL_ARENA_XML, "steps": SMALL_ARENA_STEPS_OK + 10},
        {"model": "/no/such/model.xml", "steps": 1},
        {"model": BOX_XML, "steps": 10},
    ]
    results = mjray.run_many(jobs, progress=False)

    errors = [result["error"] for result in results]
    assert errors[0].startswith("ValueError: the MJCF string does not compile")
    assert errors[1].startswith("ConfigError: ")
    assert errors[2].startswith("SimulationError: ")
    assert errors[3] == "FileNotFoundError: model file not found: /no/such/model.xml"
    assert errors[4] is None
    for failed in results[:4]:
        assert all(failed[key] is None for key in ("statistics", "qpos", "qvel", "time"))
    assert results[4]["time"] == pytest.approx(0.02)


def test_run_many_a_plugin_that_fails_to_load_is_the_jobs_error() -> None:
    params = {"mujoco_server": {"MujocoPlugins": [
        {"type": "mjfast/PoseHoldPD", "name": "hold", "kp": "abc"},
        {"type": "mjfast/HeartbeatPublisher", "name": "beat"}]}}
    strict, allowed = mjray.run_many([
        {"model": ARM_PATH, "params": params, "steps": 600},
        {"model": ARM_PATH, "params": params, "steps": 600, "allow_plugin_failures": True,
         "record": ["beat/heartbeat"]},
    ], progress=False)

    assert strict["error"] == (
        "PluginError: plugin 'hold' (mjfast/PoseHoldPD) failed to load, in factory: "
        "ConfigError: configuration key 'kp' must be a number, got 'abc' (str)")
    assert all(strict[key] is None for key in ("statistics", "qpos", "qvel", "time"))
    # allow_plugin_failures: the job runs without it, and its statistics say why.
    assert allowed["error"] is None and allowed["messages_lost"] == {}
    assert allowed["time"] == pytest.approx(1.2)
    states = {p["name"]: p["state"] for p in allowed["statistics"]["plugins"]}
    assert states == {"hold": "FAILED", "beat": "ACTIVE"}
    assert [m["count"] for m in allowed["messages"]["beat/heartbeat"]] == [1]


class _FailsToLoad(mjfast.MujocoPlugin):
    def load(self, model: Any, data: Any) -> bool:
        return False


class _FailsAtStep(mjfast.MujocoPlugin):
    def load(self, model: Any, data: Any) -> bool:
        return True

    def control_callback(self, model: Any, data: Any) -> None:
        if data.time > 0.0099:
            raise RuntimeError("broke at 10 ms")


class _CopiesButDoesNotPickle:
    def __deepcopy__(self, memo: Any) -> Any:
        return self

    def __reduce__(self) -> Any:
        raise TypeError("this object does not pickle")


class _Unpicklable(mjfast.MujocoPlugin):
    """Publishes on `~odd`, at odd steps, a message that cannot be copied (a lock) or that copies
    but does not pickle, in turn; a plain one at even steps."""

    def load(self, model: Any, data: Any) -> bool:
        self.steps = 0
        return True

    def control_callback(self, model: Any, data: Any) -> None:
        self.steps += 1
        odd = {1: threading.Lock(), 3: _CopiesButDoesNotPickle()}.get(self.steps % 4)
        # A lambda: Ray's cloudpickle ships it (the C pickler does not); never counted as lost.
        self.node.publish("~odd", {"step": self.steps, "odd": odd, "data": np.arange(3.0),
                                   "fn": lambda: 0})


def run_job_here(register: Callable[..., str], job: dict[str, Any]) -> dict[str, Any]:
    """mjfast.ray's job body in this process (plugins registered here are not on the workers)."""
    for name, cls in (("t/FailsToLoad", _FailsToLoad), ("t/FailsAtStep", _FailsAtStep),
                      ("t/Unpicklable", _Unpicklable)):
        register(cls, name)
    return mjray._run_job(mjray._checked_job(0, job))


def test_a_job_fails_on_a_plugin_load_failure_unless_allowed(
        register: Callable[..., str]) -> None:
    params = {"MujocoPlugins": [{"type": "t/FailsToLoad", "name": "x"}]}
    with pytest.raises(mjfast.PluginError, match=r"^plugin 'x' \(t/FailsToLoad\) failed to "
                                                 r"load, in load: "):
        run_job_here(register, {"model": BOX_XML, "params": params, "steps": 5})
    result = run_job_here(register, {"model": BOX_XML, "params": params, "steps": 5,
                                        "allow_plugin_failures": True})
    assert result["error"] is None and result["time"] == pytest.approx(0.01)


def test_a_job_that_allows_plugin_failures_runs_past_a_stepping_failure(
        register: Callable[..., str]) -> None:
    params = {"MujocoPlugins": [{"type": "t/FailsAtStep", "name": "x"}]}
    with pytest.raises(mjfast.PluginError, match="broke at 10 ms"):
        run_job_here(register, {"model": BOX_XML, "params": params, "steps": 50})
    result = run_job_here(register, {"model": BOX_XML, "params": params, "steps": 50,
                                        "allow_plugin_failures": True})
    assert result["error"] is None
    assert result["statistics"]["env"]["steps"] == 50
    assert result["time"] == pytest.approx(0.1)
    assert [p["state"] for p in result["statistics"]["plugins"]] == ["FAILED"]


def test_recorded_messages_that_cannot_be_copied_are_counted_and_the_error(
        register: Callable[..., str]) -> None:
    params = {"MujocoPlugins": [{"type": "t/Unpicklable", "name": "u"}]}
    result = run_job_here(register, {"model": BOX_XML, "params": params, "steps": 12,
                                        "record": ["u/odd"]})
    assert [m["step"] for m in result["messages"]["u/odd"]] == [2, 4, 6, 8, 10, 12]
    lost = result["messages_lost"]
    assert list(lost) == ["u/odd"] and lost["u/odd"]["count"] == 6  # 3 locks, 3 unpicklables
    assert "lock" in lost["u/odd"]["error"]  # the first
    assert result["error"] == (f"RecordError: 6 message(s) on 'u/odd' could not be copied "
                               f"({lost['u/odd']['error']})")
    assert result["statistics"] is not None and result["time"] == pytest.approx(0.024)


def test_a_topic_listed_twice_is_recorded_once() -> None:
    job = {"model": ARM_PATH, "params": demo_params(600.0, with_heartbeat=True), "steps": 600,
           "record": ["beat/heartbeat", "beat/heartbeat"]}
    result = mjray._run_job(mjray._checked_job(0, job))
    assert [m["count"] for m in result["messages"]["beat/heartbeat"]] == [1]


def test_run_many_refuses_a_non_boolean_allow_plugin_failures() -> None:
    with pytest.raises(ValueError, match="jobs\\[0\\]: allow_plugin_failures must be true or "
                                         "false, got 'yes'"):
        mjray.run_many([{"model": BOX_XML, "steps": 1, "allow_plugin_failures": "yes"}])


@pytest.mark.parametrize(("job", "error", "message"), [
    ({"model": BOX_XML, "stpes": 10}, ValueError, "jobs[1]: unknown key 'stpes'.*did you mean "
                                                   "'steps'?.*its keys are: model, params"),
    ({"model": BOX_XML}, ValueError, "jobs[1]: the job needs exactly one of 'steps' and"),
    ({"model": BOX_XML, "steps": 1, "duration": 1.0}, ValueError, "exactly one of"),
    ({"model": BOX_XML, "steps": -1}, ValueError, "steps must be an integer >= 0, got -1"),
    ({"model": BOX_XML, "duration": float("nan")}, ValueError, "duration must be a finite"),
    ({"model": BOX_XML, "steps": 1, "record": "box"}, ValueError, "record must be a list"),
    ({"steps": 1}, ValueError, "jobs[1]: the job needs 'model'"),
    ({"model": 3, "steps": 1}, TypeError, "model must be a path, an MJCF string or bytes"),
    ("not a job", TypeError, "jobs[1] must be a dict"),
])
def test_run_many_refuses_malformed_jobs_before_running_any(job: Any, error: type[Exception],
                                                            message: str) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("?", r"\?")):
        mjray.run_many([JOBS[2], job], progress=False)


def test_run_many_refuses_a_bad_resource_request() -> None:
    with pytest.raises(ValueError, match="num_cpus_per_job must be a positive number, got 0"):
        mjray.run_many([JOBS[2]], num_cpus_per_job=0)


def test_run_many_of_nothing() -> None:
    assert mjray.run_many([], progress=False) == []


def test_run_many_takes_relative_paths_and_long_yaml_text(tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths are made absolute here: the workers' working directory is not ours.
    (tmp_path / "box.xml").write_text(BOX_XML)
    (tmp_path / "box.yaml").write_text(BOX_PARAMS_YAML)
    monkeypatch.chdir(tmp_path)
    # One line of YAML longer than a file name may be: text, not a path.
    long_yaml = ("{mujoco_server: {MujocoPlugins: [{type: mjfast/FreeJointStatePublisher, "
                 "name: poses, bodies: [box], rate_hz: 50}], unused: '" + "x" * 300 + "'}}")
    results = mjray.run_many([
        {"model": "box.xml", "params": "box.yaml", "steps": 10, "record": ["poses/box"]},
        {"model": "box.xml", "params": long_yaml, "steps": 10, "record": ["poses/box"]},
    ], progress=False)

    for result in results:
        assert result["error"] is None, result["error"]
        assert len(result["messages"]["poses/box"]) == 1


def test_run_many_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    mjray.run_many([JOBS[2]])  # stderr is not a terminal here: no bar
    assert "run_many" not in capsys.readouterr().err
    mjray.run_many([JOBS[2], JOBS[2]], progress=True)
    bar = capsys.readouterr().err
    assert "mjfast run_many: 100%" in bar and "2/2" in bar


# -- EnvActor ------------------------------------------------------------------------------------

CAMERA_PARAMS = {"mujoco_server": {"cameras": {"front": {"width": 64, "height": 48,
                                                          "rate_hz": 50}}}}


@pytest.fixture(scope="module")
def camera_actor() -> Iterator[Any]:
    actor = mjray.EnvActor.remote(CAMERA_XML, CAMERA_PARAMS, render_sync=True)
    yield actor
    ray.kill(actor)


def test_env_actor_steps_resets_and_reports(camera_actor: Any) -> None:
    get(camera_actor.reset.remote())
    assert get(camera_actor.step.remote(25)) == {"step_count": 25, "time": pytest.approx(0.05)}
    info = get(camera_actor.info.remote())
    assert info["step_count"] == 25 and info["model_source"] == "<string>"
    statistics = get(camera_actor.statistics.remote())
    assert json.loads(json.dumps(statistics))["env"]["step_count"] == 25
    assert get(camera_actor.reset.remote(keep_time=True)) == {"time": pytest.approx(0.05)}
    assert get(camera_actor.info.remote())["step_count"] == 0


def test_env_actor_control_and_services(camera_actor: Any) -> None:
    get(camera_actor.reset.remote())
    state = get(camera_actor.control_read.remote())
    assert set(state) == {"time", "qpos", "qvel", "act", "qfrc_actuator", "sensordata", "ctrl"}
    assert state["qpos"].shape == (7,) and state["qpos"][2] == 1.0  # the box, 1 m up
    # An upward force on the box (64 kg), more than its weight: it rises.
    get(camera_actor.control_write.remote(qfrc_applied=np.array([0, 0, 2000.0, 0, 0, 0])))
    get(camera_actor.step.remote(50))
    assert get(camera_actor.control_read.remote())["qpos"][2] > 1.0
    # A relative service name is in the env's namespace; the answer is the service's.
    box = get(camera_actor.call.remote("get_body_state", {"body": "box"}))
    assert box["pos"][2] > 1.0
    assert get(camera_actor.call.remote("/mujoco_server/step", {"steps": 5}))["step_count"] == 55
    get(camera_actor.control_write.remote(qfrc_applied=np.zeros(6)))


def test_env_actor_frames_through_the_object_store(camera_actor: Any) -> None:
    get(camera_actor.reset.remote())
    # The first call opens the camera and enables its frames: nothing rendered yet.
    assert get(camera_actor.take_latest.remote("front")) is None
    get(camera_actor.step.remote(30))
    frame = get(camera_actor.take_latest.remote("front"))
    # render_sync: each due frame is done before the next step, so the frame is here now.
    assert isinstance(frame, np.ndarray) and frame.shape == (48, 64, 3)
    assert frame.dtype == np.uint8
    assert get(camera_actor.take_latest.remote("front")) is None  # nothing newer
    # The same frame as the same steps render in this process.
    with mjfast.MujocoEnv(CAMERA_XML, params=CAMERA_PARAMS, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(30)
        lease = camera.take_latest("rgb")
        assert lease is not None
        with lease:
            assert np.array_equal(frame, lease.data)
    assert frame.std() > 0  # not a blank image


def test_env_actor_errors_keep_their_type(camera_actor: Any) -> None:
    with pytest.raises(ValueError) as negative:
        get(camera_actor.step.remote(-1))
    assert isinstance(negative.value, ray.exceptions.RayTaskError)
    with pytest.raises(KeyError, match="no_such_service"):
        get(camera_actor.call.remote("no_such_service", {}))
    with pytest.raises(KeyError, match="'nope'"):
        get(camera_actor.take_latest.remote("nope"))
    with pytest.raises(mjfast.ConfigError, match="integrator"):
        get(camera_actor.call.remote("apply_options", {"patch": {"integrator": "nope"}}))
    # The actor is fine after its errors.
    assert get(camera_actor.step.remote(1))["step_count"] >= 1


def test_env_actor_from_bytes_and_yaml_text_then_closed() -> None:
    actor = mjray.EnvActor.remote(BOX_XML.encode(), BOX_PARAMS_YAML)
    try:
        assert get(actor.latest.remote("poses/box")) is None
        get(actor.step.remote(10))  # 0.02 s: one message at 50 Hz
        message = get(actor.latest.remote("poses/box"))
        assert message["body"] == "box" and message["position"].shape == (3,)
        assert [p["state"] for p in get(actor.statistics.remote())["plugins"]] == ["ACTIVE"]
        get(actor.close.remote())
        get(actor.close.remote())  # idempotent
        with pytest.raises(mjfast.LogicError, match="the env is closed"):
            get(actor.step.remote(1))
    finally:
        ray.kill(actor)


def test_env_actor_construction_error_reaches_every_call() -> None:
    actor = mjray.EnvActor.options(num_cpus=0).remote(BOX_XML, "[not, a, mapping]")
    try:
        tracebacks = []
        for call in (actor.info, actor.step, actor.info, actor.step, actor.info):
            with pytest.raises(mjfast.ConfigError, match="YAML text holds a list") as raised:
                get(call.remote())
            tracebacks.append(str(raised.value))
        # A fresh exception each call, chained to the construction's: the same traceback every
        # time (re-raising one object would grow its traceback by each call's frames).
        assert len(set(tracebacks)) <= 2  # info's and step's
        assert tracebacks[0] == tracebacks[2] == tracebacks[4]
        assert tracebacks[0].count("in _worker_params") == 1
    finally:
        ray.kill(actor)


# -- the example ---------------------------------------------------------------------------------


def test_ray_sweep_example_on_this_cluster(tmp_path: Any) -> None:
    # --address: the example joins this module's cluster as a second driver, as it would join
    # an existing cluster; --no-plot, since matplotlib is not a test dependency.
    address = ray.get_runtime_context().gcs_address
    result = run_python(f"""
        import sys
        sys.argv = ["ray_sweep.py", "--jobs", "4", "--duration", "0.1", "--no-plot",
                    "--address", {address!r}, "--out", {str(tmp_path)!r}]
        import runpy
        runpy.run_path("examples/ray_sweep.py", run_name="__main__")
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    with (tmp_path / "ray_sweep.csv").open() as table:
        rows = list(csv.DictReader(table))
    # Four jobs: one kp (the middle of its log range) for each of the four damping levels.
    assert [float(row["kd"]) for row in rows] == [2.0, 10.0, 40.0, 120.0]
    assert [float(row["kp"]) for row in rows] == [pytest.approx(math.sqrt(5.0 * 5000.0))] * 4
    assert all(row["error"] == "" and float(row["final_error_rad"]) > 0 for row in rows)
    assert all(float(row["time"]) == pytest.approx(0.1) for row in rows)
    assert not (tmp_path / "ray_sweep.png").exists()
