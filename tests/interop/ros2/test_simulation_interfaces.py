"""ROS 2's `simulation_interfaces` 2.1.0 services and `simulate_steps` action (SPEC §25) from an
independent client.

The client is zenoh-ros2-sdk, with the package's definitions written here (the field and constant
lines of its .msg/.srv files at tag 2.1.0, comments left out): its type hashes and CDR are its
own, so a service answers only if mjfast's types are the package's. The package's own message
types are written with their package name (`simulation_interfaces/Result`), as zenoh-ros2-sdk
resolves a bare name in a .srv file under `srv/`; the hashes are the same. The action's derived
types are written as test_actions writes control_msgs' (its client too), keyed by the hashes
rosidl generates for the package (pinned below). Every test has its own domain; a Zenoh router
runs in a child process.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("rosbags")
pytest.importorskip("zenoh_ros2_sdk")

from test_actions import ActionClient, split_parts

import mjfast
from mjfast.interop.ros2 import Bridge
from mjfast.interop.ros2 import types as ros_types
from support import (
    TWO_LINK_ARM_XML,
    ros_sdk,
    wait_for,
    write_ros_definitions,
)

TIMEOUT = 15.0
NS = "/mujoco_server"

WORLD_XML = """
<mujoco model="world">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>
"""

CRATE_XML = """
<mujoco model="crate"><worldbody>
  <body name="crate"><geom type="box" size="0.2 0.2 0.2"/></body></worldbody></mujoco>
"""

SIMULATION_INTERFACES = {
    "simulation_interfaces/msg/Bounds": """\
uint8 TYPE_EMPTY = 0
uint8 TYPE_BOX = 1
uint8 TYPE_CONVEX_HULL = 2
uint8 TYPE_SPHERE = 3
uint8 type
geometry_msgs/Vector3[] points
""",
    "simulation_interfaces/msg/EntityCategory": """\
uint8 CATEGORY_OBJECT = 0
uint8 CATEGORY_ROBOT = 1
uint8 CATEGORY_HUMAN = 2
uint8 CATEGORY_DYNAMIC_OBJECT = 4
uint8 CATEGORY_STATIC_OBJECT = 5
uint8 category
""",
    "simulation_interfaces/msg/EntityFilters": """\
string filter
simulation_interfaces/EntityCategory[] categories
simulation_interfaces/TagsFilter tags
simulation_interfaces/Bounds bounds
""",
    "simulation_interfaces/msg/EntityInfo": """\
simulation_interfaces/EntityCategory category
string description
string[] tags
""",
    "simulation_interfaces/msg/EntityState": """\
std_msgs/Header header
geometry_msgs/Pose pose
geometry_msgs/Twist twist
geometry_msgs/Accel acceleration
""",
    "simulation_interfaces/msg/Resource": """\
string uri
string resource_string
""",
    "simulation_interfaces/msg/Result": """\
uint8 RESULT_FEATURE_UNSUPPORTED = 0
uint8 RESULT_OK = 1
uint8 RESULT_NOT_FOUND = 2
uint8 RESULT_INCORRECT_STATE = 3
uint8 RESULT_OPERATION_FAILED = 4
uint8 result
string error_message
""",
    "simulation_interfaces/msg/SimulationState": """\
uint8 STATE_STOPPED = 0
uint8 STATE_PLAYING = 1
uint8 STATE_PAUSED = 2
uint8 STATE_QUITTING = 3
uint8 STATE_NO_WORLD = 4
uint8 STATE_LOADING_WORLD = 5
uint8 state
""",
    "simulation_interfaces/msg/SimulatorFeatures": """\
uint8 SPAWNING = 0
uint8 DELETING = 1
uint8 NAMED_POSES = 2
uint8 POSE_BOUNDS = 3
uint8 ENTITY_TAGS = 4
uint8 ENTITY_BOUNDS = 5
uint8 ENTITY_BOUNDS_BOX = 6
uint8 ENTITY_BOUNDS_CONVEX = 7
uint8 ENTITY_CATEGORIES = 8
uint8 SPAWNING_RESOURCE_STRING = 9
uint8 ENTITY_STATE_GETTING = 10
uint8 ENTITY_STATE_SETTING = 11
uint8 ENTITY_INFO_GETTING = 12
uint8 ENTITY_INFO_SETTING = 13
uint8 SPAWNABLES = 14
uint8 SIMULATION_RESET = 20
uint8 SIMULATION_RESET_TIME = 21
uint8 SIMULATION_RESET_STATE = 22
uint8 SIMULATION_RESET_SPAWNED = 23
uint8 SIMULATION_STATE_GETTING = 24
uint8 SIMULATION_STATE_SETTING = 25
uint8 SIMULATION_STATE_PAUSE = 26
uint8 STEP_SIMULATION_SINGLE = 31
uint8 STEP_SIMULATION_MULTIPLE = 32
uint8 STEP_SIMULATION_ACTION = 33
uint8 WORLD_LOADING = 40
uint8 WORLD_RESOURCE_STRING = 41
uint8 WORLD_TAGS = 42
uint8 WORLD_UNLOADING = 43
uint8 WORLD_INFO_GETTING = 44
uint8 AVAILABLE_WORLDS = 45
uint8 SPAWNING_ENTITIES = 50
uint16[] features
string[] spawn_formats
string custom_info
""",
    "simulation_interfaces/msg/SpawnEntity": """\
string name
bool allow_renaming
simulation_interfaces/Resource entity_resource
string entity_namespace
geometry_msgs/PoseStamped initial_pose
""",
    "simulation_interfaces/msg/SpawnResult": """\
uint8 NAME_NOT_UNIQUE = 101
uint8 NAME_INVALID = 102
uint8 UNSUPPORTED_FORMAT = 103
uint8 NO_RESOURCE = 104
uint8 NAMESPACE_INVALID = 105
uint8 RESOURCE_PARSE_ERROR = 106
uint8 MISSING_ASSETS = 107
uint8 UNSUPPORTED_ASSETS = 108
uint8 INVALID_POSE = 109
simulation_interfaces/Result result
string entity_name
""",
    "simulation_interfaces/msg/TagsFilter": """\
string[] tags
uint8 FILTER_MODE_ANY = 0
uint8 FILTER_MODE_ALL = 1
uint8 filter_mode
""",
    "simulation_interfaces/srv/DeleteEntity": """\
string entity
---
simulation_interfaces/Result result
""",
    "simulation_interfaces/srv/GetEntities": """\
simulation_interfaces/EntityFilters filters
---
simulation_interfaces/Result result
string[] entities
""",
    "simulation_interfaces/srv/GetEntitiesStates": """\
simulation_interfaces/EntityFilters filters
---
simulation_interfaces/Result result
string[] entities
simulation_interfaces/EntityState[] states
""",
    "simulation_interfaces/srv/GetEntityInfo": """\
string entity
---
simulation_interfaces/Result result
simulation_interfaces/EntityInfo info
""",
    "simulation_interfaces/srv/GetEntityState": """\
string entity
---
simulation_interfaces/Result result
simulation_interfaces/EntityState state
""",
    "simulation_interfaces/srv/GetSimulationState": """\
uint8 structure_needs_at_least_one_member
---
simulation_interfaces/SimulationState state
simulation_interfaces/Result result
""",
    "simulation_interfaces/srv/GetSimulatorFeatures": """\
uint8 structure_needs_at_least_one_member
---
simulation_interfaces/SimulatorFeatures features
""",
    "simulation_interfaces/srv/ResetSimulation": """\
uint8 SCOPE_DEFAULT = 0
uint8 SCOPE_TIME = 1
uint8 SCOPE_STATE = 2
uint8 SCOPE_SPAWNED = 4
uint8 SCOPE_ALL = 255
uint8 scope
---
simulation_interfaces/Result result
""",
    "simulation_interfaces/srv/SetEntityState": """\
string entity
simulation_interfaces/EntityState state
bool set_pose
bool set_twist
bool set_acceleration
---
uint8 INVALID_POSE = 101
simulation_interfaces/Result result
""",
    "simulation_interfaces/srv/SetSimulationState": """\
simulation_interfaces/SimulationState state
---
uint8 ALREADY_IN_TARGET_STATE = 101
uint8 STATE_TRANSITION_ERROR = 102
uint8 INCORRECT_TRANSITION = 103
simulation_interfaces/Result result
""",
    "simulation_interfaces/srv/SpawnEntities": """\
simulation_interfaces/SpawnEntity[] spawn_requests
---
uint8 ENTITIES_SPAWN_FAILED = 150
simulation_interfaces/Result result
simulation_interfaces/SpawnResult[] results
""",
    "simulation_interfaces/srv/SpawnEntity": """\
string name
bool allow_renaming
simulation_interfaces/Resource entity_resource
string entity_namespace
geometry_msgs/PoseStamped initial_pose
---
uint8 NAME_NOT_UNIQUE = 101
uint8 NAME_INVALID = 102
uint8 UNSUPPORTED_FORMAT = 103
uint8 NO_RESOURCE = 104
uint8 NAMESPACE_INVALID = 105
uint8 RESOURCE_PARSE_ERROR = 106
uint8 MISSING_ASSETS = 107
uint8 UNSUPPORTED_ASSETS = 108
uint8 INVALID_POSE = 109
simulation_interfaces/Result result
string entity_name
""",
    "simulation_interfaces/srv/StepSimulation": """\
uint64 steps 1
---
simulation_interfaces/Result result
""",
}

SIMULATE_STEPS = "simulation_interfaces/action/SimulateSteps"
# SimulateSteps.action at tag 2.1.0, its bare `Result` written with its package as above.
SIMULATE_STEPS_ACTION = """\
uint64 steps
---
simulation_interfaces/Result result
---
uint64 completed_steps
uint64 remaining_steps
"""
# action_msgs/srv/CancelGoal (rcl_interfaces 2.0.2), its bare `GoalInfo` written with its package.
CANCEL_GOAL = """\
action_msgs/GoalInfo goal_info
---
int8 ERROR_NONE = 0
int8 ERROR_REJECTED = 1
int8 ERROR_UNKNOWN_GOAL_ID = 2
int8 ERROR_GOAL_TERMINATED = 3
int8 return_code
action_msgs/GoalInfo[] goals_canceling
"""

# What rosidl generates for simulation_interfaces 2.1.0 on Jazzy: rosidl_adapter 4.6.6 (.msg,
# .srv, .action -> .idl) and rosidl_generator_type_description 4.6.6 (-> the type description
# JSON and its RIHS01 hash) over the package's files at tag 2.1.0 (commit 172a1b1), with Jazzy's
# builtin_interfaces, std_msgs, geometry_msgs, unique_identifier_msgs, action_msgs and
# service_msgs type descriptions; the same run over control_msgs gives test_actions' pins.
ROSIDL_HASHES = {
    "simulation_interfaces/action/SimulateSteps":
        "f0837c898e1219cd73bf4c041feab41e8c533e8e1057e982744dba7b093467eb",
    "simulation_interfaces/action/SimulateSteps_Feedback":
        "735661ca01115eb9bca068c3f2cb79bd790cd46962317ce7ee9081a5915c9a77",
    "simulation_interfaces/action/SimulateSteps_FeedbackMessage":
        "a30dee7ee7380769e616406ec5067b238aa2b27e1dbd7a5957fba1d908d7754d",
    "simulation_interfaces/action/SimulateSteps_GetResult":
        "a1dae0516ab5c70d6d797e1bcd55c9448dfbb1966643f1ebd3e3f153d8169ae0",
    "simulation_interfaces/action/SimulateSteps_Goal":
        "3f02c5df1dcdc7c08efee7f47c953c42c11686e0df8f8bbfb2d7e901f0d440d2",
    "simulation_interfaces/action/SimulateSteps_Result":
        "a1384eaee4ca7ae9238e612dfe26939dd0922cae664be1b5886cf773718823dc",
    "simulation_interfaces/action/SimulateSteps_SendGoal":
        "504407b9ff5617a737df8222cf581452b4f2e699e11e940d8d36590c5fb07d01",
    "simulation_interfaces/srv/DeleteEntity":
        "ff7e96a5b83dc8e2bb34b8b034480028b3a24d9f8376b2c0590bac3704be3e28",
    "simulation_interfaces/srv/GetEntities":
        "cb90004c48cd50f37732fb008e22c34c261dd680a723bf0f85d8437ea4498bf7",
    "simulation_interfaces/srv/GetEntitiesStates":
        "0a76170d0c1c90e1eaf805cfab78ea801d1f82df309a28c1f0fae4b570f19754",
    "simulation_interfaces/srv/GetEntityInfo":
        "953b7ab6bfc35063f5c9a72463c6ce489baa10249a7fa510926d342a34b0d29e",
    "simulation_interfaces/srv/GetEntityState":
        "749c91f2a2353d98367b64f2995a0f5842ce92a08ec1ffb3e185540a91557fb5",
    "simulation_interfaces/srv/GetSimulationState":
        "3362dcebee4b1afebbf9c4beee5c79c1455385aded62092a892d61fde8644f30",
    "simulation_interfaces/srv/GetSimulatorFeatures":
        "abb9439c8cf196722a469fb6c68b44b484f198c2a1356ac38849a29c2a20a794",
    "simulation_interfaces/srv/ResetSimulation":
        "4ce285d7ff9b8ac70dcc95161f32bf54c05a6f4b13427990e41ab40c36c39646",
    "simulation_interfaces/srv/SetEntityState":
        "fba636c91d38832dbd4f6896ffce54ff98fd9929962b0533546b56ce00f988ac",
    "simulation_interfaces/srv/SetSimulationState":
        "a868b916dce49974f637ba252141258c4b07b0c06858b88af560e3eb6bfbcb30",
    "simulation_interfaces/srv/SpawnEntities":
        "41703a359ee032bf4fc230f144f531705ba039a2e97edeae1f7997dd83b04857",
    "simulation_interfaces/srv/SpawnEntity":
        "66860313e11009faddbfc8568e5d410d1a11607fe75eeb1308671dc0406fe3a7",
    "simulation_interfaces/srv/StepSimulation":
        "913fe0653690ce6bf8f09f316e6a626747012e9fca31e26719910d417aa8565c",
}

# Result.msg and the services' own codes
OK, NOT_FOUND, OPERATION_FAILED, FEATURE_UNSUPPORTED = 1, 2, 4, 0
NAME_NOT_UNIQUE, NAME_INVALID, UNSUPPORTED_FORMAT, NO_RESOURCE = 101, 102, 103, 104
NAMESPACE_INVALID, RESOURCE_PARSE_ERROR, INVALID_POSE = 105, 106, 109
ENTITIES_SPAWN_FAILED, ALREADY_IN_TARGET_STATE = 150, 101
STOPPED, PLAYING, PAUSED = 0, 1, 2
SCOPE_TIME, SCOPE_STATE, SCOPE_SPAWNED = 1, 2, 4
CATEGORY_ROBOT, CATEGORY_STATIC_OBJECT = 1, 5


@pytest.fixture(scope="module")
def ros(router: tuple[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("msgs")
    write_ros_definitions(folder, {**SIMULATION_INTERFACES, **simulate_steps_definitions()})
    # The SDK reads an action's FeedbackMessage as a message under `action/`.
    feedback = folder / "simulation_interfaces" / "action" / "SimulateSteps_FeedbackMessage"
    feedback.with_suffix(".action").rename(feedback.with_suffix(".msg"))
    with ros_sdk(folder, router[1]) as sdk:
        yield sdk


def simulate_steps_definitions() -> dict[str, str]:
    """SimulateSteps' derived types as zenoh-ros2-sdk reads them (rosidl's derivation, as
    test_actions writes control_msgs'): the three parts as messages, SendGoal and GetResult as
    services, FeedbackMessage; and CancelGoal."""
    goal, result, feedback = split_parts(SIMULATE_STEPS_ACTION)
    package, name = "simulation_interfaces", "SimulateSteps"
    return {
        f"{package}/msg/{name}_Goal": goal + "\n",
        f"{package}/msg/{name}_Result": result + "\n",
        f"{package}/msg/{name}_Feedback": feedback + "\n",
        f"{package}/srv/{name}_SendGoal": (f"unique_identifier_msgs/UUID goal_id\n"
                                           f"{package}/{name}_Goal goal\n---\n"
                                           "bool accepted\nbuiltin_interfaces/Time stamp\n"),
        f"{package}/srv/{name}_GetResult": (f"unique_identifier_msgs/UUID goal_id\n---\n"
                                            f"int8 status\n{package}/{name}_Result result\n"),
        f"{package}/action/{name}_FeedbackMessage": (f"unique_identifier_msgs/UUID goal_id\n"
                                                     f"{package}/{name}_Feedback feedback\n"),
        "action_msgs/srv/CancelGoal": CANCEL_GOAL,
    }


def test_type_hashes_are_rosidls() -> None:
    got = {name: ros_types.type_hash(name) for name in ROSIDL_HASHES}
    assert got == {name: f"RIHS01_{value}" for name, value in ROSIDL_HASHES.items()}


@pytest.fixture
def env() -> Iterator[mjfast.MujocoEnv]:
    with mjfast.MujocoEnv(WORLD_XML) as e:
        e.pause()  # the physics thread starts paused: the services step it
        e.start(None)
        yield e


@pytest.fixture
def bridge(env: mjfast.MujocoEnv, router: tuple[str, int]) -> Iterator[Bridge]:
    with Bridge(env, domain_id=random.randint(1, 200), router=router[0]) as b:
        yield b


class Client:
    """One service of the bridge's node, called with the request's fields (the others zero)."""

    def __init__(self, ros: Any, router: tuple[str, int], bridge: Bridge, name: str,
                 srv: str) -> None:
        self.client = ros.ROS2ServiceClient(f"{NS}/{name}", f"simulation_interfaces/srv/{srv}",
                                            node_name="caller", domain_id=bridge.domain_id,
                                            router_port=router[1], timeout=TIMEOUT)
        self.store = self.client.session_mgr.store

    def message(self, type_name: str, **fields: Any) -> Any:
        """A message of `type_name` with `fields`, every other field zero (empty)."""
        _, defs = self.store.fielddefs[type_name]
        values = {name: fields[name] if name in fields else self._zero(desc)
                  for name, desc in defs}
        return self.store.types[type_name](**values)

    def _zero(self, desc: Any) -> Any:
        kind, rest = desc
        if kind.name == "NAME":
            return self.message(rest)
        if kind.name == "BASE":
            return {"string": "", "bool": False, "float32": 0.0, "float64": 0.0}.get(rest[0], 0)
        inner, count = rest
        if inner[0].name == "BASE" and inner[1][0] != "string":
            return np.zeros(count if kind.name == "ARRAY" else 0,
                            dtype={"bool": bool}.get(inner[1][0], inner[1][0]))
        return [self._zero(inner) for _ in range(count if kind.name == "ARRAY" else 0)]

    def __call__(self, **fields: Any) -> Any:
        request = self.message(self.client.request_store_type, **fields)
        reply = self.client.call(**{name: getattr(request, name)
                                    for name in request.__dataclass_fields__})
        assert reply is not None, "no reply"
        return reply

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def services(ros: Any, router: tuple[str, int], bridge: Bridge) -> Iterator[dict[str, Client]]:
    names = {"get_simulator_features": "GetSimulatorFeatures", "spawn_entity": "SpawnEntity",
             "spawn_entities": "SpawnEntities", "delete_entity": "DeleteEntity",
             "get_entities": "GetEntities", "get_entity_info": "GetEntityInfo",
             "get_entity_state": "GetEntityState", "get_entities_states": "GetEntitiesStates",
             "set_entity_state": "SetEntityState", "reset_simulation": "ResetSimulation",
             "step_simulation": "StepSimulation", "get_simulation_state": "GetSimulationState",
             "set_simulation_state": "SetSimulationState"}
    clients = {name: Client(ros, router, bridge, name, srv) for name, srv in names.items()}
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()


def pose(client: Client, xyz: tuple[float, float, float], frame: str = "",
         quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)) -> Any:
    """geometry_msgs/PoseStamped (quaternion x, y, z, w)."""
    x, y, z = xyz
    return client.message(
        "geometry_msgs/msg/PoseStamped",
        header=client.message("std_msgs/msg/Header", frame_id=frame),
        pose=client.message("geometry_msgs/msg/Pose",
                            position=client.message("geometry_msgs/msg/Point", x=x, y=y, z=z),
                            orientation=client.message("geometry_msgs/msg/Quaternion",
                                                       x=quat[0], y=quat[1], z=quat[2],
                                                       w=quat[3])))


def resource(client: Client, *, uri: str = "", text: str = "") -> Any:
    return client.message("simulation_interfaces/msg/Resource", uri=uri, resource_string=text)


# -- the scenario of SPEC §25 ---------------------------------------------------------------------


def test_features_list_exactly_what_works(services: dict[str, Client]) -> None:
    features = services["get_simulator_features"]().features
    assert sorted(features.features.tolist()) == [0, 1, 6, 7, 8, 9, 10, 11, 12, 20, 22, 23, 24,
                                                  25, 26, 31, 32, 33, 50]
    assert list(features.spawn_formats) == ["mjcf", "urdf"]


def test_spawn_two_robots_and_an_object_move_step_reset_and_delete(
        env: mjfast.MujocoEnv, services: dict[str, Client], tmp_path: Path) -> None:
    spawn = services["spawn_entity"]
    crate_file = tmp_path / "crate.xml"
    crate_file.write_text(CRATE_XML)
    for name, x in (("left", 2.0), ("right", -2.0)):
        reply = spawn(name=name, entity_resource=resource(spawn, text=TWO_LINK_ARM_XML),
                      entity_namespace=f"/robots/{name}", initial_pose=pose(spawn, (x, 0, 0)))
        assert (reply.result.result, reply.entity_name) == (OK, name), reply.result.error_message
    reply = spawn(name="crate", entity_resource=resource(spawn, uri=crate_file.as_uri()),
                  initial_pose=pose(spawn, (0, 2, 0.2)))
    assert reply.result.result == OK, reply.result.error_message
    assert env.entities()["left"].namespace == "/robots/left"

    listed = services["get_entities"]
    assert list(listed().entities) == ["box", "crate", "left", "right"]
    robots = listed(filters=listed.message(
        "simulation_interfaces/msg/EntityFilters", filter="^(l|r)",
        categories=[listed.message("simulation_interfaces/msg/EntityCategory",
                                   category=CATEGORY_ROBOT)]))
    assert list(robots.entities) == ["left", "right"]
    info = services["get_entity_info"](entity="crate")
    assert info.info.category.category == CATEGORY_STATIC_OBJECT

    state = services["get_entity_state"](entity="crate")
    assert state.result.result == OK
    assert (state.state.pose.position.x, state.state.pose.position.y) == (0.0, 2.0)
    assert state.state.header.frame_id == "world"

    setter = services["set_entity_state"]
    moved = setter.message("simulation_interfaces/msg/EntityState",
                           pose=pose(setter, (1.0, 1.0, 0.2)).pose)
    assert setter(entity="crate", state=moved, set_pose=True).result.result == OK
    assert env.get_entity_state("crate").pos.tolist() == [1.0, 1.0, 0.2]

    assert services["get_simulation_state"]().state.state == PAUSED
    count = env.step_count
    assert services["step_simulation"](steps=10).result.result == OK
    assert env.step_count == count + 10 and env.paused
    states = services["get_entities_states"]()
    assert list(states.entities) == ["box", "crate", "left", "right"]

    reset = services["reset_simulation"]
    time = env.data.time
    assert reset(scope=SCOPE_STATE).result.result == OK  # the state, not the time
    assert env.data.time == time and env.get_entity_state("crate").pos.tolist() == [1, 1, 0.2]
    alone = reset(scope=SCOPE_TIME)  # not a feature: refused, nothing changes
    assert alone.result.result == FEATURE_UNSUPPORTED and env.data.time == time
    assert "SCOPE_TIME alone" in alone.result.error_message
    assert reset(scope=SCOPE_TIME | SCOPE_STATE).result.result == OK
    assert env.data.time == 0.0 and set(env.entities()) == {"box", "crate", "left", "right"}
    assert services["delete_entity"](entity="left").result.result == OK
    assert set(env.entities()) == {"box", "crate", "right"}
    assert reset(scope=SCOPE_SPAWNED).result.result == OK
    assert set(env.entities()) == {"box"}


def test_simulation_states_map_to_pause(env: mjfast.MujocoEnv,
                                        services: dict[str, Client]) -> None:
    setter, getter = services["set_simulation_state"], services["get_simulation_state"]

    def state(value: int) -> Any:
        return setter.message("simulation_interfaces/msg/SimulationState", state=value)

    assert setter(state=state(PAUSED)).result.result == ALREADY_IN_TARGET_STATE
    assert setter(state=state(PLAYING)).result.result == OK and not env.paused
    assert getter().state.state == PLAYING
    reply = services["step_simulation"](steps=1)
    assert reply.result.result == OPERATION_FAILED and "not paused" in reply.result.error_message
    assert wait_for(lambda: env.data.time > 0)
    assert setter(state=state(STOPPED)).result.result == OK
    assert env.paused and env.data.time == 0.0 and getter().state.state == STOPPED
    assert setter(state=state(PAUSED)).result.result == OK
    assert getter().state.state == PAUSED


# -- failures: the package's result codes -----------------------------------------------------


def test_spawn_failures_have_the_package_result_codes(env: mjfast.MujocoEnv,
                                                       services: dict[str, Client]) -> None:
    spawn = services["spawn_entity"]
    generation = env.model_generation

    def code(**fields: Any) -> int:
        fields.setdefault("initial_pose", pose(spawn, (0, 3, 1)))
        reply = spawn(**fields)
        return int(reply.result.result)

    crate = resource(spawn, text=CRATE_XML)
    assert code(name="c") == NO_RESOURCE
    assert code(name="c", entity_resource=resource(spawn, uri="file:///tmp/x.sdf")) == (
        UNSUPPORTED_FORMAT)
    assert code(name="c", entity_resource=resource(spawn, text="<mujoco><worldbody><body>"
                                                                "</mujoco>")) == (
        RESOURCE_PARSE_ERROR)
    assert code(name="box", entity_resource=crate) == NAME_NOT_UNIQUE
    assert code(name="", entity_resource=resource(spawn, text="<mujoco><worldbody/>"
                                                              "</mujoco>")) == NAME_INVALID
    assert code(name="a b", entity_resource=crate) == NAME_INVALID
    assert code(name="c", entity_resource=crate, entity_namespace="not a namespace") == (
        NAMESPACE_INVALID)
    assert code(name="c", entity_resource=crate,
                initial_pose=pose(spawn, (0, 0, 0), quat=(0, 0, 0, 0))) == INVALID_POSE
    assert code(name="c", entity_resource=crate, initial_pose=pose(spawn, (0, 0, 0), "nowhere")
                ) == NOT_FOUND
    assert env.model_generation == generation  # none of them changed anything
    renamed = spawn(name="box", allow_renaming=True, entity_resource=crate,
                    initial_pose=pose(spawn, (0, 3, 1)))
    assert (renamed.result.result, renamed.entity_name) == (OK, "box_1")


def test_spawn_entities_reports_each_result(services: dict[str, Client]) -> None:
    many = services["spawn_entities"]

    def request(name: str, text: str) -> Any:
        return many.message("simulation_interfaces/msg/SpawnEntity", name=name,
                            entity_resource=resource(many, text=text),
                            initial_pose=pose(many, (0, 3, 1)))

    reply = many(spawn_requests=[request("one", CRATE_XML), request("box", CRATE_XML)])
    assert reply.result.result == ENTITIES_SPAWN_FAILED
    assert [(r.result.result, r.entity_name) for r in reply.results] == [(OK, "one"),
                                                                        (NAME_NOT_UNIQUE, "")]


def test_bounds_filters_keep_the_entities_whose_root_is_inside(
        env: mjfast.MujocoEnv, services: dict[str, Client]) -> None:
    spawn = services["spawn_entity"]
    for name, xyz in (("near", (1.0, 0.0, 0.2)), ("far", (3.0, 3.0, 0.2))):
        reply = spawn(name=name, entity_resource=resource(spawn, text=CRATE_XML),
                      initial_pose=pose(spawn, xyz))
        assert reply.result.result == OK, reply.result.error_message
    listed, states = services["get_entities"], services["get_entities_states"]

    def bounds(kind: int, *points: tuple[float, float, float]) -> Any:
        vectors = [listed.message("geometry_msgs/msg/Vector3", x=x, y=y, z=z)
                   for x, y, z in points]
        return listed.message("simulation_interfaces/msg/EntityFilters",
                              bounds=listed.message("simulation_interfaces/msg/Bounds",
                                                    type=kind, points=vectors))

    def names(filters: Any) -> list[str]:
        reply = listed(filters=filters)
        assert reply.result.result == OK, reply.result.error_message
        return list(reply.entities)

    box, hull, sphere = 1, 2, 3  # Bounds.TYPE_*; the box entity's root is at (0, 0, 0.1)
    assert names(bounds(sphere, (0, 0, 0.2), (1.0, 0, 0))) == ["box", "near"]  # on its surface
    assert names(bounds(sphere, (0, 0, 0.2), (0.5, 0, 0))) == ["box"]
    assert names(bounds(box, (4, 4, 1), (0.5, -1, 0))) == ["far", "near"]  # any two corners
    tetrahedron = ((0.5, -1, 0), (3, -1, 0), (0.5, 2, 0), (0.5, -1, 2))
    assert names(bounds(hull, *tetrahedron)) == ["near"]
    assert names(bounds(hull, (-1, -1, 0.1), (2, -1, 0.1), (-1, 2, 0.1))) == ["box"]  # flat
    reply = states(filters=bounds(sphere, (3, 3, 0.2), (0.1, 0, 0)))
    assert list(reply.entities) == ["far"] and reply.states[0].pose.position.x == 3.0
    for malformed, words in ((bounds(sphere, (0, 0, 0)), "TYPE_SPHERE"),
                             (bounds(box, (0, 0, 0), (1, 1, 1), (2, 2, 2)), "TYPE_BOX"),
                             (bounds(hull, (0, 0, 0), (1, 1, 1), (2, 2, 2)), "one line")):
        reply = listed(filters=malformed)
        assert reply.result.result == OPERATION_FAILED and words in reply.result.error_message
        assert list(reply.entities) == []
    reply = listed(filters=bounds(7, (0, 0, 0), (1, 1, 1)))
    assert reply.result.result == FEATURE_UNSUPPORTED


def test_unknown_entities_and_unsupported_filters(services: dict[str, Client]) -> None:
    assert services["delete_entity"](entity="ghost").result.result == NOT_FOUND
    reply = services["get_entity_state"](entity="ghost")
    assert reply.result.result == NOT_FOUND and "ghost" in reply.result.error_message
    assert services["get_entity_info"](entity="ghost").result.result == NOT_FOUND
    setter = services["set_entity_state"]
    assert setter(entity="ghost", set_pose=True).result.result == NOT_FOUND
    listed = services["get_entities"]
    tags = listed.message("simulation_interfaces/msg/TagsFilter", tags=["red"])
    reply = listed(filters=listed.message("simulation_interfaces/msg/EntityFilters", tags=tags))
    assert reply.result.result == FEATURE_UNSUPPORTED


# -- the simulate_steps action -----------------------------------------------------------------

SUCCEEDED, CANCELED, ABORTED = 4, 5, 6


@pytest.fixture
def steps_action(ros: Any, router: tuple[str, int], bridge: Bridge) -> Iterator[ActionClient]:
    client = ActionClient(ros, router, bridge.domain_id, f"{NS}/simulate_steps", SIMULATE_STEPS,
                          hashes=ROSIDL_HASHES)
    try:
        yield client
    finally:
        client.close()


def send_steps(client: ActionClient, steps: int) -> bytes:
    """Sends a goal of `steps` (accepted, as every goal is) and returns its id."""
    store = client.send_goal.session_mgr.store
    goal_id = uuid.uuid4().bytes
    reply = client.send_goal.call(goal_id=client.uuid(goal_id),
                                  goal=store.types["simulation_interfaces/msg/SimulateSteps_Goal"](
                                      steps=steps))
    assert reply is not None and reply.accepted
    return goal_id


def result_of(client: ActionClient, goal_id: bytes) -> tuple[int, int, str]:
    """(status, result code, error_message), once the goal has ended."""
    reply = client.get_result.call(goal_id=client.uuid(goal_id))
    assert reply is not None, "no reply"
    return int(reply.status), int(reply.result.result.result), reply.result.result.error_message


def feedback_of(client: ActionClient, goal_id: bytes) -> list[tuple[int, int]]:
    return [(int(m.feedback.completed_steps), int(m.feedback.remaining_steps))
            for m in list(client.feedback) if bytes(m.goal_id.uuid) == goal_id]


def test_simulate_steps_steps_a_paused_world_with_feedback(
        env: mjfast.MujocoEnv, steps_action: ActionClient) -> None:
    count, time = env.step_count, float(env.data.time)
    goal_id = send_steps(steps_action, 5000)
    assert result_of(steps_action, goal_id) == (SUCCEEDED, OK, "")
    assert env.step_count == count + 5000 and env.paused  # back to paused, exactly these steps
    assert float(env.data.time) > time
    assert wait_for(lambda: (5000, 0) in feedback_of(steps_action, goal_id), TIMEOUT)
    feedback = feedback_of(steps_action, goal_id)
    assert all(done + left == 5000 for done, left in feedback)
    assert [done for done, _ in feedback] == sorted({done for done, _ in feedback})
    assert wait_for(lambda: SUCCEEDED in steps_action.status_of(goal_id), TIMEOUT)
    seen = steps_action.status_of(goal_id)
    assert seen == sorted(seen) and 2 in seen  # EXECUTING, then SUCCEEDED


def test_a_cancel_stops_the_stepping(env: mjfast.MujocoEnv, steps_action: ActionClient,
                                     services: dict[str, Client]) -> None:
    goal_id = send_steps(steps_action, 2**62)
    assert wait_for(lambda: bool(feedback_of(steps_action, goal_id)), TIMEOUT)  # stepping
    info = steps_action.send_goal.session_mgr.store.types["action_msgs/msg/GoalInfo"]
    stamp = steps_action.send_goal.session_mgr.store.types["builtin_interfaces/msg/Time"]
    cancel = steps_action.cancel_goal.call(goal_info=info(goal_id=steps_action.uuid(goal_id),
                                                          stamp=stamp(sec=0, nanosec=0)))
    assert cancel.return_code == 0
    status, code, message = result_of(steps_action, goal_id)
    assert (status, code) == (CANCELED, OK) and "canceled" in message
    stopped_at = env.step_count
    assert f"after {stopped_at} of {2**62} steps" in message  # nothing stepped after its end
    assert services["get_simulation_state"]().state.state == PAUSED
    # Its thread has ended: the next goal runs.
    assert result_of(steps_action, send_steps(steps_action, 10))[:2] == (SUCCEEDED, OK)
    assert env.step_count == stopped_at + 10


def test_simulate_steps_fails_unless_paused_and_idle(
        env: mjfast.MujocoEnv, steps_action: ActionClient, services: dict[str, Client]) -> None:
    env.resume()  # running unpaced
    status, code, message = result_of(steps_action, send_steps(steps_action, 10))
    assert (status, code) == (ABORTED, OPERATION_FAILED) and "not paused" in message
    env.pause()
    count = env.step_count
    status, code, message = result_of(steps_action, send_steps(steps_action, 0))
    assert (status, code) == (ABORTED, OPERATION_FAILED) and "steps must be" in message
    assert env.step_count == count
    running = send_steps(steps_action, 2**62)
    status, code, message = result_of(steps_action, send_steps(steps_action, 10))
    assert (status, code) == (ABORTED, OPERATION_FAILED) and "another" in message
    # A resume while it steps aborts it.
    assert wait_for(lambda: bool(feedback_of(steps_action, running)), TIMEOUT)
    finished: list[tuple[int, int, str]] = []
    waiter = threading.Thread(target=lambda: finished.append(result_of(steps_action, running)))
    waiter.start()
    env.resume()
    waiter.join(TIMEOUT)
    env.pause()
    assert finished and finished[0][:2] == (ABORTED, OPERATION_FAILED)
    assert "the simulation was resumed" in finished[0][2]


def test_the_bridges_of_an_env_share_its_action_and_the_last_one_ends_it(
        env: mjfast.MujocoEnv, router: tuple[str, int]) -> None:
    send_goal = f"{NS}/simulate_steps/send_goal"  # the action's goals, on the env's bus
    with Bridge(env, domain_id=random.randint(1, 200), router=router[0]):
        with Bridge(env, domain_id=random.randint(1, 200), router=router[0]):
            assert send_goal in env.bus.services()
        assert send_goal in env.bus.services()  # the other bridge still serves it
        reply = env.bus.call(send_goal, {"goal_id": uuid.uuid4().bytes, "goal": {"steps": 3}})
        assert reply["accepted"]
    assert send_goal not in env.bus.services()
    assert not [topic for topic in env.bus.latched() if "simulate_steps" in topic]
