"""ROS 2's `simulation_interfaces` 2.1.0 services (SPEC §25) from an independent client.

The client is zenoh-ros2-sdk, with the package's definitions written here (the field and constant
lines of its .msg/.srv files at tag 2.1.0, comments left out): its type hashes and CDR are its
own, so a service answers only if mjfast's types are the package's. The package's own message
types are written with their package name (`simulation_interfaces/Result`), as zenoh-ros2-sdk
resolves a bare name in a .srv file under `srv/`; the hashes are the same. Every test has its own
domain; a Zenoh router runs in a child process.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("rosbags")
pytest.importorskip("zenoh_ros2_sdk")

import mjfast
from mjfast.interop.ros2 import Bridge
from support import (
    TWO_LINK_ARM_XML,
    ros_sdk,
    wait_for,
    write_ros_definitions,
    zenoh_router,
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

# Result.msg and the services' own codes
OK, NOT_FOUND, OPERATION_FAILED, FEATURE_UNSUPPORTED = 1, 2, 4, 0
NAME_NOT_UNIQUE, NAME_INVALID, UNSUPPORTED_FORMAT, NO_RESOURCE = 101, 102, 103, 104
NAMESPACE_INVALID, RESOURCE_PARSE_ERROR, INVALID_POSE = 105, 106, 109
ENTITIES_SPAWN_FAILED, ALREADY_IN_TARGET_STATE = 150, 101
STOPPED, PLAYING, PAUSED = 0, 1, 2
SCOPE_TIME, SCOPE_STATE, SCOPE_SPAWNED = 1, 2, 4
CATEGORY_ROBOT, CATEGORY_STATIC_OBJECT = 1, 5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def router() -> Iterator[tuple[str, int]]:
    port = free_port()
    with zenoh_router(f"tcp/127.0.0.1:{port}"):
        yield f"tcp/127.0.0.1:{port}", port


@pytest.fixture(scope="module")
def ros(router: tuple[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("msgs")
    write_ros_definitions(folder, SIMULATION_INTERFACES)
    with ros_sdk(folder, router[1]) as sdk:
        yield sdk


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
    assert sorted(features.features.tolist()) == [0, 1, 8, 9, 10, 11, 12, 20, 22, 23, 24, 25,
                                                  26, 31, 32, 50]
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
