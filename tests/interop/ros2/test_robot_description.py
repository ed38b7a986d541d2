"""`/robot_description` on ROS 2 (SPEC §24), as an independent rmw_zenoh implementation
(zenoh-ros2-sdk) receives it: a subscriber that joins after the bridge sent it gets it from the
transient-local publisher's cache, again after a reload; for a URDF-loaded model the URDF's own
text with absolute mesh URIs, for an MJCF model a URDF that an independent parser reads."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("zenoh")
pytest.importorskip("rosbags")
pytest.importorskip("zenoh_ros2_sdk")

import test_bridge
from test_bridge import TIMEOUT, subscribe

import mjfast
from mjfast.interop.ros2 import Bridge
from support import TWO_LINK_ARM_XML
from urdf_robot import PACKAGE, write_robot

# The bridge tests' fixtures: zenoh-ros2-sdk on the root conftest's router, a domain each.
ros = test_bridge.ros
domain = test_bridge.domain

NS = "mujoco_server"


def late_description(ros: Any, router: tuple[str, int], domain: int) -> str:
    """What a subscriber that joins now receives on /robot_description (transient local, as
    rviz's RobotModel display and robot_state_publisher's clients subscribe)."""
    from zenoh_ros2_sdk.qos import QosDurability, QosProfile

    subscriber, inbox = subscribe(
        ros, router, domain, "/robot_description", "std_msgs/msg/String",
        qos=QosProfile(durability=QosDurability.TRANSIENT_LOCAL, history_depth=1))
    try:
        assert inbox.event.wait(TIMEOUT), "the late joiner got no /robot_description"
        return str(inbox.messages[-1].data)
    finally:
        subscriber.close()


@pytest.fixture
def urdf_env(tmp_path: Path) -> Iterator[tuple[mjfast.MujocoEnv, Path]]:
    """The tests' robot with /tf and /tf_static, as rviz would show it."""
    path = write_robot(tmp_path)
    params = {NS: {"package_paths": {PACKAGE: str(path.parent.parent)},
                   "MujocoPlugins": [{"name": "tf", "type": "mjfast/TfPublisher"}]}}
    with mjfast.MujocoEnv(path, params=params) as env:
        yield env, path


def test_a_late_joiner_gets_the_urdf_with_absolute_mesh_uris_and_again_after_a_reload(
        urdf_env: tuple[mjfast.MujocoEnv, Path], router: tuple[str, int], domain: int,
        ros: Any) -> None:
    env, path = urdf_env
    meshes = path.parent.parent / "meshes"
    with Bridge(env, domain_id=domain, router=router[0]) as bridge:
        assert bridge.topics()["/robot_description"] == "std_msgs/msg/String"
        env.step(100)  # long after the one message
        text = late_description(ros, router, domain)
        assert text == path.read_text().replace(
            f'"package://{PACKAGE}/meshes/base.stl"', f'"{(meshes / "base.stl").as_uri()}"'
        ).replace('"../meshes/link1.obj"', f'"{(meshes / "link1.obj").as_uri()}"')
        assert "<ros2_control" in text
        path.write_text(path.read_text().replace('name="my_robot"', 'name="my_robot_2"'))
        env.reload()
        env.step(10)
        assert 'name="my_robot_2"' in late_description(ros, router, domain)


def test_an_mjcf_models_description_is_its_urdf(router: tuple[str, int], domain: int,
                                                ros: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    yourdfpy = pytest.importorskip("yourdfpy")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML) as env, Bridge(env, domain_id=domain,
                                                           router=router[0]):
        env.step(10)
        robot = yourdfpy.URDF.load(io.StringIO(late_description(ros, router, domain)),
                                   load_meshes=False, build_collision_scene_graph=False,
                                   load_collision_meshes=False)
        assert robot.base_link == "world"
        moving = {env.model.joint(j).name for j in range(env.model.njnt)}
        assert moving <= set(robot.joint_map)
