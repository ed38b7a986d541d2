"""The table of simulation calls (mjfast.sim.calls, SPEC §13, §20): every row offered everywhere it
says (env method, bus service, recording and replay, VectorEnv world, a plugin's context), the
env's call listeners, and `set_mocap_pose`, the call added as one row."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.plugin.base import PluginContext
from mjfast.sim import calls
from mjfast.sim.calls import SIM_CALLS, sim_call
from mjfast.sim.services import SERVICE_NAMES
from mjfast.sim.vector_env import World
from support import MOCAP_XML, wait_for

NS = "/mujoco_server"
@pytest.fixture
def mocap(make_env: Callable[..., mjfast.MujocoEnv]) -> mjfast.MujocoEnv:
    return make_env(MOCAP_XML)


def mocap_pose(env: mjfast.MujocoEnv) -> tuple[list[float], list[float]]:
    return env.data.mocap_pos[0].tolist(), env.data.mocap_quat[0].tolist()


# -- the table and what is derived from it -------------------------------------------------------

def test_each_call_is_one_row_and_an_env_method() -> None:
    names = [call.name for call in SIM_CALLS]
    assert len(names) == len(set(names))
    for call in SIM_CALLS:
        assert callable(getattr(mjfast.MujocoEnv, call.name)), call.name
        assert sim_call(call.name) is call
        assert all(f.name.isidentifier() for f in call.fields)
    with pytest.raises(KeyError, match=r"no simulation call 'set_mocap_pos' \(did you mean "
                                        r"'set_mocap_pose'\?\)"):
        sim_call("set_mocap_pos")


def test_the_bus_services_are_the_rows_on_the_bus(mocap: mjfast.MujocoEnv) -> None:
    on_bus = [call.name for call in SIM_CALLS if call.bus]
    assert list(SERVICE_NAMES) == on_bus
    services = set(mocap.bus.services())
    for call in SIM_CALLS:
        assert (f"{NS}/{call.name}" in services) == call.bus, call.name
    # A request field the row does not have is refused, naming the row's fields.
    with pytest.raises(ValueError, match=r"set_mocap_pose: unknown request field 'poss' "
                                         r"\(did you mean 'pos'\?\); its fields are: body, pos, "
                                         r"quat"):
        mocap.bus.call(f"{NS}/set_mocap_pose", {"body": "target", "poss": [0, 0, 1]})
    with pytest.raises(ValueError, match="set_mocap_pose: the request needs 'body'"):
        mocap.bus.call(f"{NS}/set_mocap_pose", {"pos": [0, 0, 1]})


def test_a_recording_holds_and_replay_applies_the_rows_that_change_state() -> None:
    from mjfast.interop.record import layout

    recorded = tuple(call.name for call in SIM_CALLS if call.changes_state)
    assert recorded == layout.CALLS
    assert {"reset", "reload", "set_state", "set_mocap_pose"} <= set(layout.CALLS)
    assert not {"pause", "step", "get_body_state", "info"} & set(layout.CALLS)


def test_a_world_offers_the_world_rows_and_only_those() -> None:
    for call in SIM_CALLS:
        assert hasattr(World, call.name) == call.world, call.name
    assert World.set_mocap_pose.__doc__ == mjfast.MujocoEnv.set_mocap_pose.__doc__


def test_the_ros2_rows_are_std_srvs() -> None:
    ros2 = {call.name: call.ros2.type for call in SIM_CALLS if call.ros2 is not None}
    assert ros2 == {"pause": "std_srvs/srv/SetBool", "reset": "std_srvs/srv/Trigger",
                    "reload": "std_srvs/srv/Trigger"}


# -- the env's call listeners ---------------------------------------------------------------------

def test_listeners_hear_each_applied_state_changing_call_at_its_step_boundary(
        mocap: mjfast.MujocoEnv) -> None:
    heard: list[tuple[str, dict[str, Any], int]] = []

    def listen(name: str, args: Mapping[str, Any]) -> None:
        heard.append((name, dict(args), mocap.step_count))

    listener = mocap.add_call_listener(listen)
    mocap.step(3)
    mocap.set_mocap_pose("target", pos=[0, 0, 1.5])
    mocap.get_body_state("box")  # reads are not reported
    mocap.pause()
    with pytest.raises(KeyError):
        mocap.set_mocap_pose("targte", pos=[0, 0, 1])  # nor calls that failed
    mocap.set_equality_active("grab", False)
    mocap.reset(keep_time=True)
    assert heard == [
        ("set_mocap_pose", {"body": "target", "pos": [0, 0, 1.5], "quat": None}, 3),
        ("set_equality_active", {"name": "grab", "active": False}, 3),
        ("reset", {"keyframe": None, "joint_positions": None, "joint_velocities": None,
                   "keep_time": True, "seed": None}, 0)]
    listener.remove()
    listener.remove()  # idempotent
    mocap.set_mocap_pose("target", pos=[0, 0, 1])
    assert len(heard) == 3


def test_a_listener_that_raises_is_logged_and_the_call_stands(
        mocap: mjfast.MujocoEnv, caplog: pytest.LogCaptureFixture) -> None:
    def broken(name: str, args: Mapping[str, Any]) -> None:
        raise RuntimeError("listener bug")

    heard: list[str] = []
    mocap.add_call_listener(broken)
    mocap.add_call_listener(lambda name, args: heard.append(name))
    with caplog.at_level(logging.ERROR, logger="mjfast.env"):
        mocap.set_mocap_pose("target", pos=[0, 0, 2])
    assert mocap_pose(mocap)[0] == [0, 0, 2] and heard == ["set_mocap_pose"]
    assert "listener bug" in caplog.text
    with pytest.raises(TypeError, match="a call listener must be callable"):
        mocap.add_call_listener(42)  # type: ignore[arg-type]


# -- set_mocap_pose --------------------------------------------------------------------------------

def test_set_mocap_pose_moves_the_mocap_body_and_what_it_holds(mocap: mjfast.MujocoEnv) -> None:
    mocap.set_mocap_pose("target", pos=[0.2, 0, 1.2])
    pos, quat = mocap_pose(mocap)
    assert pos == [0.2, 0, 1.2] and quat == [1, 0, 0, 0]
    np.testing.assert_allclose(mocap.data.xpos[mocap.model.body("target").id], pos)  # forward
    mocap.step(500)
    np.testing.assert_allclose(mocap.get_body_state("box").pos, pos, atol=0.02)
    # quat alone, scaled to unit length; pos kept. By id as well as by name.
    mocap.set_mocap_pose(mocap.model.body("target").id, quat=[0, 0, 0, 2])
    assert mocap_pose(mocap) == (pos, [0, 0, 0, 1])
    mocap.set_mocap_pose("target", pos=np.array([0.0, 0.1, 1.0]), quat=(1, 0, 0, 0))
    assert mocap_pose(mocap) == ([0, 0.1, 1], [1, 0, 0, 0])


@pytest.mark.parametrize(("args", "error", "message"), [
    ({"body": "targte", "pos": [0, 0, 1]}, KeyError,
     r"no body named 'targte' \(did you mean 'target'\?\); the model's bodies: world, target, "
     r"box, post"),
    ({"body": 9, "pos": [0, 0, 1]}, KeyError, r"no body with index 9 \(the model has 4\)"),
    ({"body": "post", "pos": [0, 0, 1]}, ValueError,
     r"body 'post' is not a mocap body .*; the model's mocap bodies: target"),
    ({"body": "target", "pos": [0, 0]}, ValueError,
     r"body 'target' pos: expected 3 numbers, got \[0, 0\]"),
    ({"body": "target", "pos": [0, 0, 1], "quat": [1, 0, float("nan"), 0]}, ValueError,
     r"body 'target' quat: expected finite numbers"),
    ({"body": "target", "pos": [0, 0, 1], "quat": [0, 0, 0, 0]}, ValueError,
     r"body 'target' quat: a zero quaternion has no orientation"),
    ({"body": "target", "pos": "up"}, ValueError, r"body 'target' pos: expected 3 numbers"),
])
def test_set_mocap_pose_errors_change_nothing(mocap: mjfast.MujocoEnv, args: dict[str, Any],
                                              error: type[Exception], message: str) -> None:
    mocap.step(5)
    before = (mocap.data.mocap_pos.copy(), mocap.data.mocap_quat.copy(), mocap.data.qpos.copy())
    with pytest.raises(error, match=message):
        mocap.set_mocap_pose(**args)
    for got, expected in zip((mocap.data.mocap_pos, mocap.data.mocap_quat, mocap.data.qpos),
                             before, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_set_mocap_pose_takes_effect_at_a_step_boundary_while_running(
        mocap: mjfast.MujocoEnv) -> None:
    heard: list[int] = []
    mocap.add_call_listener(lambda name, args: heard.append(mocap.step_count))
    mocap.start(None)
    try:
        assert wait_for(lambda: mocap.step_count > 10)
        mocap.set_mocap_pose("target", pos=[0, 0, 1.3])
        assert mocap_pose(mocap)[0] == [0, 0, 1.3]
        assert wait_for(lambda: abs(mocap.get_body_state("box").pos[2] - 1.3) < 0.02)
    finally:
        mocap.stop()
    assert len(heard) == 1


class MovesTheTarget(mjfast.MujocoPlugin):
    """Tries set_mocap_pose from load (refused) and from its subscriber (allowed: a bus thread)."""

    refusals: ClassVar[list[str]] = []

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        try:
            self.env.set_mocap_pose("target", pos=[0, 0, 3])
        except mjfast.LogicError as error:
            MovesTheTarget.refusals.append(str(error))
        self.node.subscribe("~goto", lambda message: self.env.set_mocap_pose(
            "target", pos=message["pos"]))
        return True


def test_a_plugin_calls_set_mocap_pose_through_its_context_outside_callbacks(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    MovesTheTarget.refusals = []
    env = make_env(MOCAP_XML, params={"MujocoPlugins": [{"type": register(MovesTheTarget),
                                                         "name": "mover"}]})
    assert MovesTheTarget.refusals == [
        mjfast._core.refusal("simulation_control", "set_mocap_pose()")]
    assert MovesTheTarget.refusals[0].startswith(
        "set_mocap_pose() called from inside a plugin callback")
    assert mocap_pose(env)[0] == [0, 0, 1]
    env.bus.publish(f"{NS}/mover/goto", {"pos": [0.5, 0, 1]})
    assert mocap_pose(env)[0] == [0.5, 0, 1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_set_mocap_pose_from_the_remote_client(mocap: mjfast.MujocoEnv) -> None:
    pytest.importorskip("zenoh", reason="the remote bus needs the extra mjfast[server]")
    pytest.importorskip("msgpack", reason="the remote bus needs the extra mjfast[server]")
    from mjfast.interop.remote.server import BusServer

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    server = BusServer(mocap, endpoint)
    try:
        with mjfast.connect(endpoint, timeout=10) as remote:
            assert f"{NS}/set_mocap_pose" in remote.services()
            assert remote.call(f"{NS}/set_mocap_pose", {"body": "target",
                                                        "pos": np.array([0.0, 0.3, 1.1])}) == {}
            assert mocap_pose(mocap)[0] == [0, 0.3, 1.1]
            with pytest.raises(mjfast.RemoteError) as refused:
                remote.call(f"{NS}/set_mocap_pose", {"body": "target", "pos": [0, 0]})
            assert refused.value.type_name == "ValueError"
            assert "expected 3 numbers" in refused.value.message
    finally:
        server.close()


# -- a plugin's context ----------------------------------------------------------------------------

class Looks(mjfast.MujocoPlugin):
    seen: ClassVar[dict[str, Any]] = {}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        context = self.env
        Looks.seen.update(
            context=context, model=context.model is model, data=context.data is data,
            namespace=context.namespace, bus=context.bus, params=context.params,
            control=context.control)
        for name in ("record", "launch_viewer", "_core", "host"):
            try:
                getattr(context, name)
            except AttributeError as error:
                Looks.seen[name] = str(error)
        return True


def test_a_plugin_sees_a_context_that_forwards_the_calls_it_may_make(
        make_env: Callable[..., mjfast.MujocoEnv], register: Callable[..., str]) -> None:
    Looks.seen = {}
    env = make_env(MOCAP_XML, params={"MujocoPlugins": [{"type": register(Looks),
                                                         "name": "looks"}]})
    seen = Looks.seen
    context = seen["context"]
    assert isinstance(context, PluginContext) and not isinstance(context, mjfast.MujocoEnv)
    assert seen["model"] and seen["data"] and seen["namespace"] == NS
    assert seen["bus"] is env.bus and seen["params"] is env.params
    assert seen["control"] is env.control
    for name in ("record", "launch_viewer", "_core", "host"):
        assert f"a plugin's env context has no {name!r}" in seen[name], seen[name]
    # Every simulation call is forwarded (refused inside callbacks by the env, as always).
    for call in SIM_CALLS:
        assert getattr(context, call.name) == getattr(env, call.name), call.name
    context.set_mocap_pose("target", pos=[0, 0, 1.25])
    assert mocap_pose(env)[0] == [0, 0, 1.25]
    assert context.step_count == env.step_count


def test_the_context_holds_its_env_weakly(register: Callable[..., str]) -> None:
    Looks.seen = {}
    env = mjfast.MujocoEnv(MOCAP_XML, params={"MujocoPlugins": [{"type": register(Looks)}]})
    context = Looks.seen.pop("context")
    env.close()
    del env
    Looks.seen.clear()
    import gc

    gc.collect()
    with pytest.raises(ReferenceError):
        _ = context.model
    with pytest.raises(ReferenceError):
        context.reset()


def test_the_module_says_how_to_add_a_call() -> None:
    assert calls.__doc__ is not None and "Adding a call" in calls.__doc__
