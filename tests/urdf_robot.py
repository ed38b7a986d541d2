"""A ROS user's robot, written by the tests: a package directory with STL and OBJ meshes (written
by trimesh, not by mjfast) and a URDF that names them by `package://`, `file://` and relative
URIs, with a `<ros2_control>` block. Shared by tests/model and tests/interop/ros2."""

from __future__ import annotations

from pathlib import Path

import trimesh

PACKAGE = "my_robot_description"
BASE_SIZE = (0.3, 0.2, 0.1)
LINK1_LENGTH = 0.5
KP = 400.0
SHOULDER_INITIAL = 0.3
ELBOW_INITIAL = -0.5

ROS2_CONTROL = f"""
  <ros2_control name="sim" type="system">
    <hardware><plugin>mujoco_ros2_control/MujocoSystem</plugin></hardware>
    <joint name="shoulder">
      <command_interface name="position"/>
      <state_interface name="position">
        <param name="initial_value">{SHOULDER_INITIAL}</param>
      </state_interface>
      <state_interface name="velocity"/>
      <param name="kp">{KP}</param>
    </joint>
    <joint name="elbow">
      <command_interface name="velocity"/>
      <command_interface name="effort"/>
      <state_interface name="position">
        <param name="initial_value">{ELBOW_INITIAL}</param>
      </state_interface>
    </joint>
    <joint name="slider">
      <command_interface name="position"/>
      <state_interface name="position"/>
    </joint>
  </ros2_control>"""


def write_package(root: Path) -> Path:
    """The package `my_robot_description` under `root` (its directory returned): a box STL for
    the base, an OBJ cylinder for link1, a sphere STL for the tool."""
    package = root / PACKAGE
    (package / "meshes").mkdir(parents=True)
    (package / "urdf").mkdir()
    trimesh.creation.box(extents=BASE_SIZE).export(package / "meshes" / "base.stl")
    trimesh.creation.cylinder(radius=0.04, height=LINK1_LENGTH).export(
        package / "meshes" / "link1.obj")
    trimesh.creation.icosphere(radius=0.05).export(package / "meshes" / "tool.stl")
    return package


def urdf_text(*, ros2_control: bool = True, extra_visual: str = "",
              base_uri: str = f"package://{PACKAGE}/meshes/base.stl",
              link1_uri: str = "../meshes/link1.obj", tool_uri: str | None = None) -> str:
    """The robot's URDF: base_link (the STL by `base_uri`, visual and collision), link1 on the
    revolute `shoulder` (the OBJ by the relative `link1_uri`), link2 on the revolute `elbow`, a
    carriage on the prismatic `slider`, and tool fixed to link2 (the sphere STL by `tool_uri`,
    default a file:// URI filled in by `write_robot`)."""
    tool_uri = tool_uri or "TOOL_URI"
    block = ROS2_CONTROL if ros2_control else ""
    return f"""<?xml version="1.0"?>
<robot name="my_robot" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <!-- written by the tests -->
  <material name="blue"><color rgba="0 0 1 1"/></material>
  <link name="base_link">
    <visual><geometry><mesh filename="{base_uri}"/></geometry><material name="blue"/></visual>
    <collision><geometry><mesh filename="{base_uri}"/></geometry></collision>{extra_visual}
    <inertial><mass value="2"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="link1">
    <visual><origin xyz="0 0 0.25"/><geometry><mesh filename="{link1_uri}"/></geometry>
      <material name="red"><color rgba="1 0 0 1"/></material></visual>
    <collision><origin xyz="0 0 0.25"/>
      <geometry><cylinder radius="0.04" length="{LINK1_LENGTH}"/></geometry></collision>
    <inertial><origin xyz="0 0 0.25"/><mass value="1"/>
      <inertia ixx="0.02" iyy="0.02" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="link2">
    <visual><origin xyz="0 0 0.2"/><geometry><box size="0.05 0.05 0.4"/></geometry></visual>
    <inertial><origin xyz="0 0 0.2"/><mass value="0.5"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="carriage">
    <collision><geometry><box size="0.1 0.1 0.05"/></geometry></collision>
    <inertial><mass value="0.3"/>
      <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="tool">
    <visual><geometry><mesh filename="{tool_uri}"/></geometry></visual>
    <inertial><mass value="0.1"/>
      <inertia ixx="0.0001" iyy="0.0001" izz="0.0001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base_link"/><child link="link1"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>
    <limit lower="-1.5" upper="1.5" effort="80" velocity="2"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="link1"/><child link="link2"/>
    <origin xyz="0 0 {LINK1_LENGTH}" rpy="0.1 0.2 0.3"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="30" velocity="3"/>
  </joint>
  <joint name="slider" type="prismatic">
    <parent link="base_link"/><child link="carriage"/>
    <origin xyz="0.2 0 0.05"/><axis xyz="1 0 0"/>
    <limit lower="-0.1" upper="0.3" effort="20" velocity="0.5"/>
  </joint>
  <joint name="tool_joint" type="fixed">
    <parent link="link2"/><child link="tool"/><origin xyz="0 0 0.4"/>
  </joint>{block}
</robot>
"""


def write_robot(root: Path, **kwargs: object) -> Path:
    """The package under `root` and its URDF (in its urdf/ folder, where the relative OBJ path
    starts), the tool's mesh by an absolute file:// URI; returns the URDF's path."""
    package = write_package(root)
    text = urdf_text(**kwargs)  # type: ignore[arg-type]
    text = text.replace("TOOL_URI", (package / "meshes" / "tool.stl").as_uri())
    path = package / "urdf" / "my_robot.urdf"
    path.write_text(text)
    return path
