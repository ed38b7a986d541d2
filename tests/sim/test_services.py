"""The simulation-control bus services (SPEC §13): every service through env.bus.call with
JSON-able requests and replies, raising what the Python call raises."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
from test_sim_control import DT, XML

import mjfast
from mjfast.sim import services
from mjfast.sim.services import SERVICE_NAMES
from support import MOCAP_XML, wait_for

NS = "/sim"


@pytest.fixture
def sim(make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]
        ) -> mjfast.MujocoEnv:
    class Idle(mjfast.MujocoPlugin):
        def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
            return True

    return make_env(XML, namespace=NS, params={"MujocoPlugins": [{"name": "idle",
                                                                  "type": register(Idle)}]})


def call(env: mjfast.MujocoEnv, service: str, request: Any = None) -> Any:
    """Calls `NS/service` with `request` as a remote client would send it: through JSON, and
    checks that the reply survives JSON unchanged."""
    wire = json.loads(json.dumps(request))
    reply = env.bus.call(f"{NS}/{service}", wire)
    assert json.loads(json.dumps(reply)) == reply
    return reply


def test_every_service_is_advertised_under_the_namespace(sim: mjfast.MujocoEnv) -> None:
    assert {f"{NS}/{name}" for name in SERVICE_NAMES} <= set(sim.bus.services())
    assert set(SERVICE_NAMES) == {
        "pause", "step", "reset", "reload", "get_joint_state", "set_joint_state",
        "get_body_state", "set_body_state", "apply_options", "set_equality_active",
        "set_mocap_pose", "set_realtime_factor", "info", "statistics", "entities", "spawn",
        "remove", "get_entity_state", "set_entity_state"}


def test_pause_and_step(sim: mjfast.MujocoEnv) -> None:
    sim.start(None)
    with pytest.raises(mjfast.LogicError):
        call(sim, "step", {"steps": 1})
    assert call(sim, "pause", {"paused": True}) == {"paused": True}
    steps = sim.step_count
    reply = call(sim, "step", {"steps": 5})
    assert reply == {"step_count": steps + 5, "time": sim.data.time}
    assert call(sim, "step") == {"step_count": steps + 6, "time": sim.data.time}  # None: {}
    assert call(sim, "pause", {"paused": False}) == {"paused": False}
    assert not sim.paused


@pytest.mark.parametrize("steps", [0, -3, 1.5, True, "2"])
def test_step_needs_at_least_one_step(sim: mjfast.MujocoEnv, steps: Any) -> None:
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        call(sim, "step", {"steps": steps})
    assert sim.step_count == 0


def test_reset_and_reload(sim: mjfast.MujocoEnv, tmp_path: Path) -> None:
    call(sim, "step", {"steps": 10})
    reply = call(sim, "reset", {"keyframe": "lifted", "joint_positions": {"hinge": 0.3},
                                "keep_time": True})
    assert reply == {"time": pytest.approx(10 * DT)}
    assert sim.data.qpos[14] == 0.3 and sim.data.qpos[2] == 1.0
    with pytest.raises(KeyError, match="did you mean 'hinge'"):
        call(sim, "reset", {"joint_positions": {"hing": 0.3}})
    path = tmp_path / "scene.xml"
    path.write_text(XML)
    assert call(sim, "reload", {"model": str(path)}) == {"model_generation": 2}
    assert call(sim, "reload") == {"model_generation": 3}
    assert sim.info()["model_source"] == str(path)
    # The services outlive reloads.
    assert call(sim, "info")["loads"] == 3


def test_joint_state(sim: mjfast.MujocoEnv) -> None:
    call(sim, "set_joint_state", {"positions": {"hinge": 0.2, "tip_ball": [0, 1, 0, 0]},
                                  "velocities": {"hinge": 1.5}})
    reply = call(sim, "get_joint_state", {"names": ["hinge", "tip_ball"]})
    assert reply == {"hinge": {"position": [0.2], "velocity": [1.5]},
                     "tip_ball": {"position": [0, 1, 0, 0], "velocity": [0, 0, 0]}}
    assert set(call(sim, "get_joint_state")) == {"ball_free", "held_free", "hinge", "tip_ball"}
    with pytest.raises(ValueError, match="expected 1 number"):
        call(sim, "set_joint_state", {"positions": {"hinge": [1, 2]}})


def test_body_state(sim: mjfast.MujocoEnv) -> None:
    call(sim, "set_body_state", {"states": {"ball": {"pos": [1, 0, 0], "linvel": [1, 0, 0]}},
                                 "frame": "rotated"})
    reply = call(sim, "get_body_state", {"body": "ball"})
    assert set(reply) == {"pos", "quat", "linvel", "angvel"}
    np.testing.assert_allclose(reply["pos"], [1, 2, 1], atol=1e-12)
    np.testing.assert_allclose(reply["linvel"], [0, 1, 0], atol=1e-12)
    relative = call(sim, "get_body_state", {"body": "ball", "frame": "rotated"})
    np.testing.assert_allclose(relative["pos"], [1, 0, 0], atol=1e-12)
    with pytest.raises(ValueError, match="no free joint"):
        call(sim, "set_body_state", {"states": {"pendulum": {"pos": [0, 0, 0]}}})
    with pytest.raises(ValueError, match="needs 'body'"):
        call(sim, "get_body_state", {})


def test_options_equality_and_realtime_factor(sim: mjfast.MujocoEnv) -> None:
    assert call(sim, "apply_options", {"patch": {"gravity": [0, 0, 0],
                                                 "disable": {"contact": True}}}) == {}
    assert list(sim.model.opt.gravity) == [0, 0, 0]
    with pytest.raises(mjfast.ConfigError, match="options: unknown key 'gravty'"):
        call(sim, "apply_options", {"patch": {"gravty": [0, 0, 0]}})
    assert call(sim, "set_equality_active", {"name": "hold", "active": False}) == {}
    assert not sim.data.eq_active[0]
    with pytest.raises(KeyError, match="did you mean 'hold'"):
        call(sim, "set_equality_active", {"name": "hld", "active": True})
    assert call(sim, "set_realtime_factor", {"realtime_factor": 2.5}) == {"realtime_factor": 2.5}
    assert call(sim, "set_realtime_factor", {"realtime_factor": None}) == {
        "realtime_factor": None}
    with pytest.raises(ValueError, match="realtime_factor"):
        call(sim, "set_realtime_factor", {"realtime_factor": -1})


def test_info_and_statistics(sim: mjfast.MujocoEnv) -> None:
    call(sim, "step", {"steps": 3})
    info = call(sim, "info")
    assert info == sim.info()
    assert info["step_count"] == 3 and info["model_name"] == "simctl"
    statistics = call(sim, "statistics", {})
    assert statistics["plugins"]["idle"]["state"] == "ACTIVE"
    assert statistics["env"]["step_count"] == 3 and statistics["env"]["paused"] is False


@pytest.mark.parametrize(("service", "request_", "match"), [
    ("pause", {"pause": True}, "unknown request field 'pause'.*did you mean 'paused'"),
    ("info", {"verbose": True}, "unknown request field 'verbose'"),
    ("step", [1], "the request must be a dict"),
    ("pause", {"paused": "yes"}, "paused must be a bool"),
    ("reload", {"model": 3}, "model must be a path"),
])
def test_malformed_requests_are_value_errors(sim: mjfast.MujocoEnv, service: str,
                                             request_: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(sim, service, request_)


def test_services_of_a_closed_env_refuse(sim: mjfast.MujocoEnv) -> None:
    sim.close()
    with pytest.raises(mjfast.LogicError, match="closed"):
        call(sim, "get_joint_state")


def test_step_names_its_upper_limit(sim: mjfast.MujocoEnv) -> None:
    with pytest.raises(ValueError, match=rf"steps must be at most 2\*\*63-1, got {2**63}$"):
        sim.bus.call(f"{NS}/step", {"steps": 2**63})
    assert sim.step_count == 0


def test_a_cancellable_step_stops_at_a_chunk_boundary(sim: mjfast.MujocoEnv) -> None:
    asked = [0]

    def reason() -> str | None:
        asked[0] += 1
        return "enough" if asked[0] > 3 else None

    with services.cancellable(reason), \
            pytest.raises(InterruptedError, match=r"^step: stopped after (\d+) of "
                                                  r"4611686018427387904 steps: enough$") as stopped:
        sim.bus.call(f"{NS}/step", {"steps": 2**62})
    done = int(str(stopped.value).split()[3])
    assert sim.step_count == done > 0
    # Outside the block a call runs whole, as before; inside, one that is not cancelled too.
    assert call(sim, "step", {"steps": 7})["step_count"] == done + 7
    with services.cancellable(lambda: None):
        assert call(sim, "step", {"steps": 1000})["step_count"] == done + 1007


def test_resuming_ends_a_cancellable_step_in_progress(sim: mjfast.MujocoEnv) -> None:
    sim.start(None)
    sim.pause()
    outcome: list[BaseException] = []

    def step_long() -> None:
        with services.cancellable(lambda: None):
            try:
                sim.bus.call(f"{NS}/step", {"steps": 2**62})
            except BaseException as error:
                outcome.append(error)

    stepper = threading.Thread(target=step_long)
    stepper.start()
    try:
        assert wait_for(lambda: sim.step_count > 100, timeout=10)
        sim.resume()
        stepper.join(10)
        assert not stepper.is_alive()
    finally:
        sim.stop()  # a stepper still running would end here
        stepper.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], mjfast.LogicError)
    assert "while the physics thread runs" in str(outcome[0])


def test_a_resume_between_the_question_and_the_step_is_the_interruption(
        sim: mjfast.MujocoEnv) -> None:
    # simulate_steps' race (seen in CI): a chunk's question says go on, the simulation resumes,
    # and the env refuses the chunk. The reason the question then gives ends the step, not the
    # env's LogicError.
    sim.start(None)
    sim.pause()
    asked = [0]

    def reason() -> str | None:
        asked[0] += 1
        if asked[0] == 3:
            sim.resume()  # after this answer, before its chunk
            return None
        return None if sim.paused else "the simulation was resumed"

    try:
        with services.cancellable(reason), \
                pytest.raises(InterruptedError, match=r"^step: stopped after (\d+) of "
                                                      r"4611686018427387904 steps: the simulation "
                                                      r"was resumed$") as stopped:
            sim.bus.call(f"{NS}/step", {"steps": 2**62})
    finally:
        sim.stop()
    assert asked[0] == 4  # the refused chunk asked once more
    assert int(str(stopped.value).split()[3]) > 0  # the two chunks before it


def test_reset_takes_a_numpy_bool(sim: mjfast.MujocoEnv) -> None:
    sim.step(5)
    assert sim.bus.call(f"{NS}/reset", {"keep_time": np.bool_(True)}) == {"time": 5 * DT}
    assert sim.bus.call(f"{NS}/reset", {"keep_time": np.bool_(False)}) == {"time": 0.0}


def test_set_mocap_pose_moves_a_mocap_body_and_refuses_what_it_refuses(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(MOCAP_XML, namespace=NS)
    assert call(env, "set_mocap_pose", {"body": "target", "pos": [0, 0, 2],
                                        "quat": [0, 2, 0, 0]}) == {}
    assert env.data.mocap_pos[0].tolist() == [0, 0, 2]
    assert env.data.mocap_quat[0].tolist() == [0, 1, 0, 0]
    assert call(env, "set_mocap_pose", {"body": "target", "quat": [1, 0, 0, 0]}) == {}
    assert env.data.mocap_pos[0].tolist() == [0, 0, 2]  # what the request leaves out stays
    with pytest.raises(ValueError, match="body 'box' is not a mocap body"):
        call(env, "set_mocap_pose", {"body": "box", "pos": [0, 0, 2]})
    with pytest.raises(KeyError, match="did you mean 'target'"):
        call(env, "set_mocap_pose", {"body": "targte", "pos": [0, 0, 2]})
    with pytest.raises(ValueError, match="set_mocap_pose: the request needs 'body'"):
        call(env, "set_mocap_pose", {"pos": [0, 0, 2]})
    assert env.data.mocap_pos[0].tolist() == [0, 0, 2]

