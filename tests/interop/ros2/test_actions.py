"""SPEC §23's actions on the ROS 2 graph, driven by an independent rmw_zenoh implementation
(zenoh-ros2-sdk's service clients and subscribers), with the derived action types written here
from control_msgs' `.action` definitions as rosidl derives them, and keyed by the type hashes
rosidl generated for control_msgs on Jazzy (pinned below): a client that knows nothing of mjfast
moves the arm along a trajectory and closes a gripper on an object."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sdk = pytest.importorskip("zenoh_ros2_sdk")
pytest.importorskip("rosbags")

from test_bridge import liveliness_keys, write_definitions  # noqa: E402

import mjfast  # noqa: E402
from mjfast.interop.ros2.action_types import INTERFACES  # noqa: E402
from mjfast.ros2 import Bridge  # noqa: E402
from mjfast.ros2 import types as ros_types  # noqa: E402
from support import (  # noqa: E402
    FINGER_ON_OBJECT_XML,
    controller_arm_xml,
    wait_for,
)

TIMEOUT = 15.0

# What rosidl generated for control_msgs 5.x on Jazzy (rosidl_generator_c's
# follow_joint_trajectory__description.c and gripper_command__description.c, a colcon build of
# control_msgs' jazzy branch), and for action_msgs/srv/CancelGoal (rcl_interfaces 2.0.2).
ROSIDL_HASHES = {
    "control_msgs/action/FollowJointTrajectory":
        "738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6",
    "control_msgs/action/FollowJointTrajectory_Goal":
        "8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205",
    "control_msgs/action/FollowJointTrajectory_Result":
        "8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220",
    "control_msgs/action/FollowJointTrajectory_Feedback":
        "3fd0aaecf71725121ae1ff7f01098a5e0da581e672be18a6b2c286cb43d96b49",
    "control_msgs/action/FollowJointTrajectory_SendGoal":
        "b13789dddc325a7a962825c45e28c77d37237ec129dd0c34dc5994562938c57f",
    "control_msgs/action/FollowJointTrajectory_SendGoal_Request":
        "179c93691f1f6d1d115881ff88c3917b7cc6eac2ba4bf56766cc7c4389e19ef1",
    "control_msgs/action/FollowJointTrajectory_SendGoal_Response":
        "e6a48ba740ae254500129a877f0b071be8663a115da1a539b74599cc97921fbf",
    "control_msgs/action/FollowJointTrajectory_SendGoal_Event":
        "906dd566308db02673c73c654f69bdd84738589629c1bc2841ddb49059ed1c6f",
    "control_msgs/action/FollowJointTrajectory_GetResult":
        "e3ceb38e3e1867c8dc0f46014df26e90eb93422f27e9e97f936e07f94be4bc8b",
    "control_msgs/action/FollowJointTrajectory_GetResult_Request":
        "ecf7ea8463d3beec7084bca75216d0b01b87b6e1e4e09679bb26093041efcbe9",
    "control_msgs/action/FollowJointTrajectory_GetResult_Response":
        "08eefbaa146ce02ba45898d5e99160afd6c4c54a30d159aee0f2ca6035b1580f",
    "control_msgs/action/FollowJointTrajectory_GetResult_Event":
        "43161a489e52daaa5bbc2fa74f73f1804d099574fcf8f819170807d75472662a",
    "control_msgs/action/FollowJointTrajectory_FeedbackMessage":
        "80398fcb9674a79081a9906e2ccf0c804dd7cb15e22e362e606ee87186beab71",
    "control_msgs/action/GripperCommand":
        "e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84",
    "control_msgs/action/GripperCommand_SendGoal":
        "6bf8cc4ce80cd499e7dd3258c03c50c3fa6672b469ff8355339ef1df77fcd212",
    "control_msgs/action/GripperCommand_GetResult":
        "7e60a7606063d4a2728d21badac099e68b734a196ac3ab42d1d4c668eb0bb3cd",
    "control_msgs/action/GripperCommand_FeedbackMessage":
        "392ff03fcd872f9dc2405cbeb2897fcf011ad9998458b6aa85c603b8a49e431d",
    "action_msgs/srv/CancelGoal":
        "573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a",
}
STATUS_HASH = "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e"


@pytest.fixture
def domain() -> int:
    return random.randint(1, 200)


def test_action_type_hashes_are_rosidls() -> None:
    got = {name: ros_types.type_hash(name) for name in ROSIDL_HASHES}
    assert got == {name: f"RIHS01_{value}" for name, value in ROSIDL_HASHES.items()}
    assert ros_types.type_hash("action_msgs/msg/GoalStatusArray") == STATUS_HASH


def test_the_status_array_is_the_cdr_rosbags_writes() -> None:
    """The bridge splices action_msgs/msg/GoalStatusArray from each entry's bytes (rosbags'), only
    the entries that changed since the last array encoded anew: its bytes equal rosbags'
    serializer's, for arrays of
    every length up to the padding's period and through the changes an ActionServer makes
    (goals added last, expired first or out of order, several transitions between two arrays,
    the same array again) and an entry replaced by an equal one of another GoalInfo object (whose
    UUID array compares by value only as an ambiguous array: the entry counts as changed)."""
    from mjfast.interop.ros2.actions import STATUS_TYPE, _StatusArray
    from mjfast.interop.ros2.conversions import build
    from mjfast.plugin.actions import time_message, uuid_message

    rng = random.Random(30)
    serialize = ros_types.serializer(STATUS_TYPE)

    def entry(info: Any = None) -> dict[str, Any]:
        info = info or {"goal_id": uuid_message(rng.randbytes(16)),
                        "stamp": time_message(rng.uniform(0.0, 1e5))}
        return {"goal_info": info, "status": rng.randint(0, 6)}

    def check(convert: _StatusArray, entries: list[Any]) -> None:
        message = {"status_list": list(entries)}
        assert convert(message) == bytes(serialize(build(STATUS_TYPE, message)))

    for n in range(6):
        check(_StatusArray(), [entry() for _ in range(n)])
    convert, entries = _StatusArray(), []
    for _ in range(2000):
        change = rng.random()
        if change < 0.3:
            entries.append(entry())
        elif change < 0.4 and entries:
            del entries[:rng.randint(1, 3)]
        elif change < 0.45 and entries:
            del entries[rng.randrange(len(entries))]
        elif change < 0.9 and entries:
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(entries))
                entries[i] = entry(entries[i]["goal_info"])
        elif change < 0.95 and entries:
            i = rng.randrange(len(entries))
            info = entries[i]["goal_info"]
            entries[i] = {"goal_info": {"goal_id": uuid_message(bytes(info["goal_id"]["uuid"])),
                                        "stamp": dict(info["stamp"])},
                          "status": entries[i]["status"]}
        check(convert, entries)


def split_parts(text: str) -> list[str]:
    parts, current = [], []
    for line in text.splitlines():
        if line.strip() == "---":
            parts.append("\n".join(current))
            current = []
        else:
            current.append(line)
    return [*parts, "\n".join(current)]


def write_action_definitions(folder: Path) -> None:
    """The files zenoh-ros2-sdk reads, derived from the `.action` texts as rosidl derives an
    action's types: the parts as messages, SendGoal and GetResult as services, FeedbackMessage."""
    write_definitions(folder)
    for source in (INTERFACES / "control_msgs" / "msg").glob("*.msg"):
        (folder / "control_msgs" / "msg").mkdir(parents=True, exist_ok=True)
        (folder / "control_msgs" / "msg" / source.name).write_text(source.read_text())
    (folder / "action_msgs" / "srv").mkdir(parents=True, exist_ok=True)
    # Its bare `GoalInfo` qualified (action_msgs/msg/GoalInfo, as rosidl reads it): the SDK would
    # look for it among the service's own types.
    cancel = (INTERFACES / "action_msgs" / "srv" / "CancelGoal.srv").read_text()
    (folder / "action_msgs" / "srv" / "CancelGoal.srv").write_text(
        cancel.replace("\nGoalInfo ", "\naction_msgs/GoalInfo ").replace(
            "\nGoalInfo[] ", "\naction_msgs/GoalInfo[] "))
    for name in ("FollowJointTrajectory", "GripperCommand"):
        text = (INTERFACES / "control_msgs" / "action" / f"{name}.action").read_text()
        goal, result, feedback = split_parts(text)
        msgs = {f"{name}_Goal": goal, f"{name}_Result": result, f"{name}_Feedback": feedback}
        for base, body in msgs.items():
            (folder / "control_msgs" / "msg" / f"{base}.msg").write_text(body + "\n")
        srvs = folder / "control_msgs" / "srv"
        srvs.mkdir(parents=True, exist_ok=True)
        (srvs / f"{name}_SendGoal.srv").write_text(
            f"unique_identifier_msgs/UUID goal_id\ncontrol_msgs/{name}_Goal goal\n---\n"
            "bool accepted\nbuiltin_interfaces/Time stamp\n")
        (srvs / f"{name}_GetResult.srv").write_text(
            f"unique_identifier_msgs/UUID goal_id\n---\nint8 status\n"
            f"control_msgs/{name}_Result result\n")
        action = folder / "control_msgs" / "action"
        action.mkdir(parents=True, exist_ok=True)
        (action / f"{name}_FeedbackMessage.msg").write_text(
            f"unique_identifier_msgs/UUID goal_id\ncontrol_msgs/{name}_Feedback feedback\n")


@contextlib.contextmanager
def sdk_session(router: tuple[str, int], folder: Path) -> Iterator[Any]:
    """zenoh-ros2-sdk connected (as a Zenoh client) to the router, offline, reading the
    definitions written into `folder`."""
    from zenoh_ros2_sdk import message_registry
    from zenoh_ros2_sdk.session import ZenohSession

    write_action_definitions(folder)
    saved = os.environ.get("ZENOH_CONFIG_OVERRIDE")
    os.environ["ZENOH_CONFIG_OVERRIDE"] = 'mode="client";listen/endpoints=[]'
    os.environ["ZENOH_ROS2_SDK_CACHE"] = str(folder / "no-downloads")
    message_registry._registry = message_registry.MessageRegistry(str(folder))
    ZenohSession._instance = None
    ZenohSession.get_instance("127.0.0.1", router[1])
    try:
        yield sdk
    finally:
        if ZenohSession._instance is not None:
            ZenohSession._instance.close()
        message_registry._registry = None
        if saved is None:
            os.environ.pop("ZENOH_CONFIG_OVERRIDE", None)
        else:
            os.environ["ZENOH_CONFIG_OVERRIDE"] = saved


@pytest.fixture(scope="module")
def ros(router: tuple[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with sdk_session(router, tmp_path_factory.mktemp("action-msgs")) as module:
        yield module


class ActionClient:
    """An rcl-style action client from the SDK's parts: three service clients and two
    subscribers under `<name>/_action/`, each keyed by rosidl's hash."""

    def __init__(self, ros: Any, router: tuple[str, int], domain: int, name: str,
                 action_type: str, topics: bool = True,
                 hashes: dict[str, str] | None = None) -> None:
        from zenoh_ros2_sdk.qos import QosDurability, QosProfile

        known = ROSIDL_HASHES if hashes is None else {**ROSIDL_HASHES, **hashes}

        def rihs(type_name: str) -> str:
            return f"RIHS01_{known[type_name]}"

        common = {"node_name": "action_client", "domain_id": domain, "router_port": router[1]}
        self.send_goal = ros.ROS2ServiceClient(f"{name}/_action/send_goal",
                                               f"{action_type}_SendGoal", timeout=TIMEOUT,
                                               type_hash=rihs(f"{action_type}_SendGoal"),
                                               **common)
        self.get_result = ros.ROS2ServiceClient(f"{name}/_action/get_result",
                                                f"{action_type}_GetResult", timeout=TIMEOUT,
                                                type_hash=rihs(f"{action_type}_GetResult"),
                                                **common)
        self.cancel_goal = ros.ROS2ServiceClient(f"{name}/_action/cancel_goal",
                                                 "action_msgs/srv/CancelGoal", timeout=TIMEOUT,
                                                 type_hash=rihs("action_msgs/srv/CancelGoal"),
                                                 **common)
        self.feedback: list[Any] = []
        self.statuses: list[Any] = []
        self.status_event = threading.Event()
        self._subscribers: list[Any] = []
        if not topics:  # the three services only (a benchmark's round trips)
            return
        self._feedback = ros.ROS2Subscriber(
            f"{name}/_action/feedback", f"{action_type}_FeedbackMessage", self.feedback.append,
            type_hash=rihs(f"{action_type}_FeedbackMessage"), **common)
        self._status = ros.ROS2Subscriber(
            f"{name}/_action/status", "action_msgs/msg/GoalStatusArray", self._on_status,
            type_hash=STATUS_HASH,
            qos=QosProfile(durability=QosDurability.TRANSIENT_LOCAL, history_depth=1), **common)
        self._subscribers = [self._feedback, self._status]

    def _on_status(self, message: Any) -> None:
        self.statuses.append(message)
        self.status_event.set()

    def uuid(self, goal_id: bytes) -> Any:
        return self.send_goal.session_mgr.store.types["unique_identifier_msgs/msg/UUID"](
            uuid=np.frombuffer(goal_id, dtype=np.uint8).copy())

    def status_of(self, goal_id: bytes) -> list[int]:
        return [int(s.status) for array in self.statuses for s in array.status_list
                if bytes(s.goal_info.goal_id.uuid) == goal_id]

    def close(self) -> None:
        for entity in (self.send_goal, self.get_result, self.cancel_goal, *self._subscribers):
            entity.close()


def goal_message(client: ActionClient, action_type: str, **fields: Any) -> Any:
    store = client.send_goal.session_mgr.store
    return store.types[f"control_msgs/msg/{action_type.rsplit('/', 1)[1]}_Goal"](**fields)


@pytest.fixture
def arm_env() -> Iterator[mjfast.MujocoEnv]:
    plugins = [{"type": "mjfast/JointTrajectoryController", "name": "arm",
                "joints": ["a", "b"], "action_monitor_rate": 50.0,
                "constraints": {"goal_time": 1.0, "a": {"goal": 0.01}, "b": {"goal": 0.01}}}]
    with mjfast.MujocoEnv(controller_arm_xml("position"),
                          params={"mujoco_server": {"MujocoPlugins": plugins}}) as env:
        yield env


def test_an_independent_client_moves_the_arm_along_a_trajectory(
        arm_env: mjfast.MujocoEnv, router: tuple[str, int], domain: int, ros: Any) -> None:
    env = arm_env
    name = "/mujoco_server/arm/follow_joint_trajectory"
    fjt = "control_msgs/action/FollowJointTrajectory"
    with Bridge(env, domain_id=domain, router=router[0]) as bridge:
        keys = liveliness_keys(router, domain)
        for entity, kind in (("send_goal", "SS"), ("cancel_goal", "SS"), ("get_result", "SS"),
                             ("feedback", "MP"), ("status", "MP")):
            mangled = f"%mujoco_server%arm%follow_joint_trajectory%_action%{entity}/"
            assert any(f"/{kind}/%/%/mujoco_server/{mangled}" in k for k in keys), (entity, keys)
        status_token = next(k for k in keys if "_action%status/" in k)
        assert status_token.endswith(f"{STATUS_HASH}/:1:,1:,:,:,,")  # reliable, transient local
        client = ActionClient(ros, router, domain, name, fjt)
        try:
            store = client.send_goal.session_mgr.store
            types = store.types
            point = types["trajectory_msgs/msg/JointTrajectoryPoint"]
            duration = types["builtin_interfaces/msg/Duration"]
            trajectory = types["trajectory_msgs/msg/JointTrajectory"](
                header=types["std_msgs/msg/Header"](
                    stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""),
                joint_names=["b", "a"],
                points=[point(positions=np.array([0.2, -0.3]), velocities=np.zeros(2),
                              accelerations=np.zeros(2), effort=np.zeros(0),
                              time_from_start=duration(sec=0, nanosec=500_000_000)),
                        point(positions=np.array([0.1, 0.4]), velocities=np.zeros(2),
                              accelerations=np.zeros(2), effort=np.zeros(0),
                              time_from_start=duration(sec=1, nanosec=0))])
            empty = types["trajectory_msgs/msg/MultiDOFJointTrajectory"](
                header=trajectory.header, joint_names=[], points=[])
            goal = goal_message(client, fjt, trajectory=trajectory, multi_dof_trajectory=empty,
                                path_tolerance=[], component_path_tolerance=[],
                                goal_tolerance=[], component_goal_tolerance=[],
                                goal_time_tolerance=duration(sec=0, nanosec=0))
            goal_id = uuid.uuid4().bytes
            reply = client.send_goal.call(goal_id=client.uuid(goal_id), goal=goal)
            assert reply is not None and reply.accepted
            # get_result asked before the end: answered when the goal ends.
            results: list[Any] = []
            asker = threading.Thread(target=lambda: results.append(
                client.get_result.call(goal_id=client.uuid(goal_id))))
            asker.start()
            assert wait_for(lambda: env.step(20) or bool(results), TIMEOUT)
            asker.join()
            assert results[0].status == 4  # SUCCEEDED
            assert results[0].result.error_code == 0
            np.testing.assert_allclose(env.data.qpos, [0.4, 0.1], atol=0.01)
            assert wait_for(lambda: 4 in client.status_of(goal_id), TIMEOUT)
            seen = client.status_of(goal_id)
            assert seen == sorted(seen) and seen[-1] == 4 and 2 in seen
            assert wait_for(lambda: bool(client.feedback), TIMEOUT)
            feedback = client.feedback[-1]
            assert bytes(feedback.goal_id.uuid) == goal_id
            assert list(feedback.feedback.joint_names) == ["a", "b"]
            # After the end too; and an unknown goal is UNKNOWN.
            after = client.get_result.call(goal_id=client.uuid(goal_id))
            assert after.status == 4
            assert client.get_result.call(goal_id=client.uuid(bytes(16))).status == 0
            # Cancel: a long goal, then cancel all.
            long_id = uuid.uuid4().bytes
            trajectory.points[-1].time_from_start = duration(sec=30, nanosec=0)
            assert client.send_goal.call(goal_id=client.uuid(long_id), goal=goal).accepted
            env.step(50)
            info = types["action_msgs/msg/GoalInfo"](
                goal_id=client.uuid(bytes(16)),
                stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0))
            cancel = client.cancel_goal.call(goal_info=info)
            assert cancel.return_code == 0
            assert [bytes(g.goal_id.uuid) for g in cancel.goals_canceling] == [long_id]
            assert client.get_result.call(goal_id=client.uuid(long_id)).status == 5  # CANCELED
            assert bridge.statistics()["failed_calls"] == 0
            # The arrays of the goals' acceptance, cancel and end went out on the threads that
            # made those transitions, none handed to the bridge's writer (HandedOffTap's
            # inline_topics), and in order (seen above).
            assert bridge._tap.statistics()["inline"] >= 6
        finally:
            client.close()


def test_an_independent_client_closes_the_gripper_on_an_object(
        router: tuple[str, int], domain: int, ros: Any) -> None:
    plugins = [{"type": "mjfast/GripperActionController", "name": "gripper", "joint": "finger",
                "stall_timeout": 0.2, "allow_stalling": True}]
    gc = "control_msgs/action/GripperCommand"
    params = {"mujoco_server": {"MujocoPlugins": plugins}}
    with mjfast.MujocoEnv(FINGER_ON_OBJECT_XML, params=params) as env, \
            Bridge(env, domain_id=domain, router=router[0]):
        client = ActionClient(ros, router, domain, "/mujoco_server/gripper/gripper_cmd", gc)
        try:
            types = client.send_goal.session_mgr.store.types
            goal = goal_message(client, gc, command=types["control_msgs/msg/GripperCommand"](
                position=0.2, max_effort=4.0))
            goal_id = uuid.uuid4().bytes
            assert client.send_goal.call(goal_id=client.uuid(goal_id), goal=goal).accepted
            assert wait_for(lambda: env.step(50) or 4 in client.status_of(goal_id), TIMEOUT)
            reply = client.get_result.call(goal_id=client.uuid(goal_id))
            assert reply.status == 4
            assert reply.result.stalled and not reply.result.reached_goal
            assert abs(reply.result.position - 0.07) < 0.005
            assert 3.5 < abs(reply.result.effort) <= 4.0 + 1e-9
        finally:
            client.close()
