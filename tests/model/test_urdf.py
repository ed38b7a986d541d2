"""URDF in (SPEC §24): mesh URIs resolved through each search path, the error that lists where it
looked, visual-only meshes MuJoCo cannot read left out, the `<ros2_control>` block made into
actuators that drive the joints, initial values, and a URDF wherever a model is taken (MujocoEnv,
VectorEnv, `mjfast run`, reload). Real robots nobody here wrote: example-robot-data's UR5 and
Panda, checked against yourdfpy's kinematics."""

from __future__ import annotations

import logging
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.model.urdf import load_urdf, urdf_description_of
from support import run_cli
from urdf_robot import (
    ELBOW_INITIAL,
    KP,
    PACKAGE,
    SHOULDER_INITIAL,
    urdf_text,
    write_package,
    write_robot,
)

NS = "mujoco_server"


@pytest.fixture(autouse=True)
def _no_ros_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that set ROS_PACKAGE_PATH or AMENT_PREFIX_PATH set them themselves."""
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)


@pytest.fixture
def robot(tmp_path: Path) -> Path:
    return write_robot(tmp_path)


def package_paths(robot: Path) -> dict[str, str]:
    return {PACKAGE: str(robot.parent.parent)}


def mesh_extent(model: mujoco.MjModel, geom: int) -> np.ndarray:
    mesh = model.geom_dataid[geom]
    start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
    vertices = model.mesh_vert[start:start + count]
    return vertices.max(axis=0) - vertices.min(axis=0)


def body_geoms(model: mujoco.MjModel, body: str) -> list[int]:
    return [g for g in range(model.ngeom) if model.geom_bodyid[g] == model.body(body).id]


# -- meshes -------------------------------------------------------------------------------------


def _through_parameter(robot: Path, monkeypatch: pytest.MonkeyPatch) -> mjfast.MujocoEnv:
    return mjfast.MujocoEnv(robot, params={NS: {"package_paths": package_paths(robot)}})


def _through_ros_package_path(robot: Path, monkeypatch: pytest.MonkeyPatch) -> mjfast.MujocoEnv:
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"/nonexistent:{robot.parent.parent.parent}")
    return mjfast.MujocoEnv(robot)


def _through_ament_prefix_path(robot: Path, monkeypatch: pytest.MonkeyPatch
                               ) -> mjfast.MujocoEnv:
    prefix = robot.parent.parent.parent / "install"
    (prefix / "share").mkdir(parents=True)
    (prefix / "share" / PACKAGE).symlink_to(robot.parent.parent)
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"/opt/nothing:{prefix}")
    return mjfast.MujocoEnv(robot)


@pytest.mark.parametrize("through", [_through_parameter, _through_ros_package_path,
                                     _through_ament_prefix_path],
                         ids=["package_paths", "ROS_PACKAGE_PATH", "AMENT_PREFIX_PATH"])
def test_package_uris_resolve_through_each_search_path(robot: Path, monkeypatch, through
                                                       ) -> None:
    with through(robot, monkeypatch) as env:
        model = env.model
        base = body_geoms(model, "base_link")
        # The STL by package://, as visual and collision; the OBJ by a relative path; the STL by
        # file://: their sizes are the meshes trimesh wrote.
        meshes = [g for g in base if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
        assert len(meshes) == 2
        for geom in meshes:
            np.testing.assert_allclose(np.sort(mesh_extent(model, geom)), [0.1, 0.2, 0.3],
                                       atol=1e-6)
        link1 = [g for g in body_geoms(model, "link1")
                 if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
        assert len(link1) == 1
        np.testing.assert_allclose(np.sort(mesh_extent(model, link1[0]))[-1], 0.5, atol=1e-6)
        tool = [g for g in body_geoms(model, "tool")
                if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
        np.testing.assert_allclose(mesh_extent(model, tool[0]), [0.1] * 3, atol=1e-3)


def test_the_parameter_comes_before_the_environment(robot: Path, tmp_path: Path,
                                                    monkeypatch) -> None:
    decoy = write_package(tmp_path / "decoy")  # a base mesh of another size
    import trimesh

    trimesh.creation.box(extents=(1.0, 1.0, 1.0)).export(decoy / "meshes" / "base.stl")
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(decoy.parent))
    model = load_urdf(robot, package_paths=package_paths(robot))
    geom = body_geoms(model, "base_link")[0]
    np.testing.assert_allclose(np.sort(mesh_extent(model, geom)), [0.1, 0.2, 0.3], atol=1e-6)
    model = load_urdf(robot)
    np.testing.assert_allclose(mesh_extent(model, geom), [1.0, 1.0, 1.0], atol=1e-6)


def test_a_missing_mesh_names_the_mesh_its_uri_and_every_place_looked_at(
        robot: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ros"))
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"{tmp_path / 'ament1'}:{tmp_path / 'ament2'}")
    with pytest.raises(ValueError) as raised:
        load_urdf(robot, package_paths={PACKAGE: str(tmp_path / "elsewhere")})
    message = str(raised.value)
    assert "base_link" in message
    assert f"package://{PACKAGE}/meshes/base.stl" in message
    for place in (tmp_path / "elsewhere" / "meshes" / "base.stl",
                  tmp_path / "ros" / PACKAGE / "meshes" / "base.stl",
                  tmp_path / "ament1" / "share" / PACKAGE / "meshes" / "base.stl",
                  tmp_path / "ament2" / "share" / PACKAGE / "meshes" / "base.stl"):
        assert str(place) in message
    assert f"--package-path {PACKAGE}=DIR" in message


def test_with_no_search_path_the_error_says_so(robot: Path) -> None:
    with pytest.raises(ValueError, match="ROS_PACKAGE_PATH and AMENT_PREFIX_PATH unset"):
        load_urdf(robot)


def test_a_missing_relative_mesh_names_where_it_was_looked_for(robot: Path) -> None:
    (robot.parent.parent / "meshes" / "link1.obj").unlink()
    with pytest.raises(ValueError) as raised:
        load_urdf(robot, package_paths=package_paths(robot))
    assert "link1" in str(raised.value) and "../meshes/link1.obj" in str(raised.value)
    assert str(robot.parent / ".." / "meshes" / "link1.obj") in str(raised.value)


def test_an_unreadable_mesh_is_named(robot: Path) -> None:
    (robot.parent.parent / "meshes" / "base.stl").write_bytes(b"solid nothing\nendsolid\n")
    with pytest.raises(ValueError) as raised:
        load_urdf(robot, package_paths=package_paths(robot))
    assert "base_link" in str(raised.value) and "base.stl" in str(raised.value)


def test_a_visual_only_dae_is_left_out_with_one_warning(tmp_path: Path, caplog) -> None:
    dae = (f'\n    <visual><geometry><mesh filename="package://{PACKAGE}/meshes/base.dae"/>'
           f'</geometry></visual>')
    robot = write_robot(tmp_path, extra_visual=dae)
    with caplog.at_level(logging.WARNING, logger="mjfast"):
        model = load_urdf(robot, package_paths=package_paths(robot))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "base.dae" in warnings[0].getMessage()
    # The base keeps its STL visual and collision, and nothing else.
    assert len(body_geoms(model, "base_link")) == 2


def test_a_collision_dae_is_an_error(tmp_path: Path) -> None:
    robot = write_robot(tmp_path, base_uri=f"package://{PACKAGE}/meshes/base.dae")
    (robot.parent.parent / "meshes" / "base.dae").write_text("<COLLADA/>")
    with pytest.raises(ValueError, match=r"collision mesh .*base\.dae.*\.stl, \.obj"):
        load_urdf(robot, package_paths=package_paths(robot))


def test_visual_geoms_do_not_collide(robot: Path) -> None:
    model = load_urdf(robot, package_paths=package_paths(robot))
    link1 = body_geoms(model, "link1")
    kinds = {int(model.geom_type[g]): (int(model.geom_contype[g]),
                                       int(model.geom_conaffinity[g])) for g in link1}
    assert kinds[mujoco.mjtGeom.mjGEOM_MESH] == (0, 0)  # the visual OBJ
    assert kinds[mujoco.mjtGeom.mjGEOM_CYLINDER] != (0, 0)  # the collision cylinder
    # Fixed links stay bodies (TF frames and robot_description's links).
    assert model.body("tool").parentid == model.body("link2").id


def test_the_description_is_the_text_with_absolute_mesh_uris(robot: Path) -> None:
    model = load_urdf(robot, package_paths=package_paths(robot))
    description = urdf_description_of(model)
    meshes = robot.parent.parent / "meshes"
    expected = robot.read_text()
    for uri, path in ((f"package://{PACKAGE}/meshes/base.stl", "base.stl"),
                      ("../meshes/link1.obj", "link1.obj")):
        expected = expected.replace(f'"{uri}"', f'"{(meshes / path).resolve().as_uri()}"')
    assert description == expected
    assert "<ros2_control" in description and "<!-- written by the tests -->" in description


# -- ros2_control ---------------------------------------------------------------------------------


def test_ros2_control_makes_an_actuator_per_command_interface(robot: Path) -> None:
    model = load_urdf(robot, package_paths=package_paths(robot))
    names = [model.actuator(i).name for i in range(model.nu)]
    assert names == ["shoulder_position", "elbow_velocity", "elbow_effort", "slider_position"]
    shoulder, velocity, effort, slider = (model.actuator(n) for n in names)
    # position: a servo with the joint's kp, ctrlrange [lower, upper], forcerange +-effort
    assert shoulder.gainprm[0] == KP and shoulder.biasprm[1] == -KP
    np.testing.assert_array_equal(shoulder.ctrlrange, [-1.5, 1.5])
    np.testing.assert_array_equal(shoulder.forcerange, [-80, 80])
    assert shoulder.trnid[0] == model.joint("shoulder").id
    # velocity: kv default 10, ctrlrange +-velocity
    assert velocity.gainprm[0] == 10 and velocity.biasprm[2] == -10
    np.testing.assert_array_equal(velocity.ctrlrange, [-3, 3])
    np.testing.assert_array_equal(velocity.forcerange, [-30, 30])
    # effort: a motor, ctrlrange +-effort
    assert effort.gainprm[0] == 1 and not effort.biasprm.any()
    np.testing.assert_array_equal(effort.ctrlrange, [-30, 30])
    # position with no kp: 100
    assert slider.gainprm[0] == 100
    np.testing.assert_array_equal(slider.ctrlrange, [-0.1, 0.3])


def test_a_position_interface_holds_a_target(robot: Path) -> None:
    with mjfast.MujocoEnv(robot, params={NS: {"package_paths": package_paths(robot)}}) as env:
        ctrl = np.zeros(env.model.nu)
        ctrl[env.model.actuator("shoulder_position").id] = 0.8
        ctrl[env.model.actuator("slider_position").id] = 0.2
        env.control.write(ctrl=ctrl)
        env.step(3000)
        shoulder = env.data.qpos[env.model.joint("shoulder").qposadr[0]]
        slider = env.data.qpos[env.model.joint("slider").qposadr[0]]
        assert shoulder == pytest.approx(0.8, abs=0.05)
        assert slider == pytest.approx(0.2, abs=0.01)
        assert abs(env.data.qvel[env.model.joint("slider").dofadr[0]]) < 1e-2


def test_initial_values_are_where_the_robot_starts_and_resets_to(robot: Path) -> None:
    with mjfast.MujocoEnv(robot, params={NS: {"package_paths": package_paths(robot)}}) as env:
        qpos = env.data.qpos
        assert qpos[env.model.joint("shoulder").qposadr[0]] == SHOULDER_INITIAL
        assert qpos[env.model.joint("elbow").qposadr[0]] == ELBOW_INITIAL
        assert qpos[env.model.joint("slider").qposadr[0]] == 0
        env.step(50)
        env.reset()
        assert env.data.qpos[env.model.joint("elbow").qposadr[0]] == ELBOW_INITIAL
    # The initial value moves nothing at any other joint position: the poses at zero are the
    # URDF's own (the same URDF without initial values).
    with_initial = load_urdf(robot, package_paths=package_paths(robot))
    robot.write_text(robot.read_text().replace('"initial_value"', '"not_initial_value"'))
    without = load_urdf(robot, package_paths=package_paths(robot))
    poses = []
    for model in (with_initial, without):
        data = mujoco.MjData(model)
        data.qpos[:] = [0.4, -0.7, 0.1]
        mujoco.mj_kinematics(model, data)
        poses.append((data.xpos.copy(), data.xquat.copy()))
    np.testing.assert_allclose(poses[0][0], poses[1][0], atol=1e-12)
    np.testing.assert_allclose(poses[0][1], poses[1][1], atol=1e-12)
    assert without.qpos0.tolist() == [0, 0, 0]


def test_a_urdf_without_ros2_control_has_no_actuators(tmp_path: Path) -> None:
    robot = write_robot(tmp_path, ros2_control=False)
    model = load_urdf(robot, package_paths=package_paths(robot))
    assert model.nu == 0 and model.njnt == 3
    assert not model.qpos0.any()


def test_a_ros2_control_joint_the_urdf_lacks_is_named(robot: Path) -> None:
    robot.write_text(robot.read_text().replace('<joint name="elbow">', '<joint name="elbwo">'))
    with pytest.raises(ValueError, match=r"'elbwo'.*did you mean elbow"):
        load_urdf(robot, package_paths=package_paths(robot))


def test_a_command_interface_mjfast_cannot_make_is_named(robot: Path) -> None:
    robot.write_text(robot.read_text().replace('<command_interface name="effort"/>',
                                               '<command_interface name="stiffness"/>'))
    with pytest.raises(ValueError, match=r"'elbow'.*'stiffness'.*position, velocity and effort"):
        load_urdf(robot, package_paths=package_paths(robot))


# -- wherever a model is taken -------------------------------------------------------------------


def test_reload_reads_the_urdf_again(robot: Path) -> None:
    with mjfast.MujocoEnv(robot, params={NS: {"package_paths": package_paths(robot)}}) as env:
        assert env.model.nu == 4
        robot.write_text(urdf_text(ros2_control=False).replace(
            "TOOL_URI", (robot.parent.parent / "meshes" / "tool.stl").as_uri()))
        env.reload()
        assert env.model.nu == 0
        assert urdf_description_of(env.model) is not None
        assert "<ros2_control" not in urdf_description_of(env.model)


def test_a_bad_package_paths_parameter_is_named(robot: Path) -> None:
    with pytest.raises(mjfast.ConfigError, match=r"/mujoco_server/package_paths"):
        mjfast.MujocoEnv(robot, params={NS: {"package_paths": ["not", "a", "mapping"]}})


def test_a_vector_env_takes_a_urdf(robot: Path) -> None:
    with mjfast.VectorEnv(robot, num_envs=2, params={NS: {"package_paths":
                                                          package_paths(robot)}}) as vector:
        assert vector.model.nu == 4
        assert vector.qpos[1, vector.model.joint("shoulder").qposadr[0]] == SHOULDER_INITIAL


def test_a_urdf_string_is_a_model(robot: Path, monkeypatch) -> None:
    monkeypatch.chdir(robot.parent)  # the relative OBJ path, from the working directory
    with mjfast.MujocoEnv(robot.read_text(),
                          params={NS: {"package_paths": package_paths(robot)}}) as env:
        assert env.model.nu == 4


def test_the_cli_runs_a_urdf_with_package_path(robot: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "run", str(robot), "--steps", "10", "--no-progress",
                           "--package-path", f"{PACKAGE}={robot.parent.parent}")
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", str(robot), "--steps", "10", "--no-progress")
    assert code == 1
    assert err.count("\n") == 1 and "package://my_robot_description/meshes/base.stl" in err


def test_a_malformed_package_path_option_is_a_usage_error(robot: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "run", str(robot), "--package-path", "no_equals_sign")
    assert code == 2 and "PKG=DIR" in err


# -- robots nobody here wrote ---------------------------------------------------------------------


def _example_robot_data() -> Path:
    from importlib import metadata

    try:
        distribution = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (the test extra)")
    return Path(str(distribution.locate_file("cmeel.prefix")))


@pytest.mark.parametrize("robot_file", ["ur_description/urdf/ur5_robot.urdf",
                                        "panda_description/urdf/panda.urdf"])
def test_example_robot_data_robots_load_step_and_match_yourdfpy(robot_file: str, monkeypatch,
                                                                caplog) -> None:
    yourdfpy = pytest.importorskip("yourdfpy")
    prefix = _example_robot_data()
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))  # share/example-robot-data
    path = prefix / "share" / "example-robot-data" / "robots" / robot_file
    with caplog.at_level(logging.WARNING, logger="mjfast"):
        env = mjfast.MujocoEnv(path)
    with env:
        # Their visual meshes are DAE: left out, in one warning.
        assert len([r for r in caplog.records if ".dae" in r.getMessage()]) == 1
        model = env.model
        assert model.nmesh > 0 and model.nu == 0
        env.step(200)
        assert np.isfinite(env.data.qpos).all() and env.data.time > 0
        robot = yourdfpy.URDF.load(str(path), load_meshes=False, build_collision_scene_graph=False,
                                   load_collision_meshes=False)
        rng = np.random.default_rng(7)
        data = mujoco.MjData(model)
        for _ in range(5):
            config = {}
            for name in robot.actuated_joint_names:
                limit = robot.joint_map[name].limit
                config[name] = rng.uniform(limit.lower, limit.upper)
            robot.update_cfg(config)
            for joint in robot.robot.joints:
                if joint.type == "fixed":
                    continue
                value = config.get(joint.name)
                if joint.mimic is not None:  # MuJoCo's joint is free: put it where yourdfpy does
                    value = config[joint.mimic.joint] * joint.mimic.multiplier + joint.mimic.offset
                data.qpos[model.joint(joint.name).qposadr[0]] = value
            mujoco.mj_kinematics(model, data)
            for body in range(1, model.nbody):
                # The URDF's root link is MuJoCo's world (UR5's is named world; Panda's root
                # link is a body welded at the origin).
                expected = robot.get_transform(model.body(body).name, robot.base_link)
                matrix = np.zeros(9)
                mujoco.mju_quat2Mat(matrix, data.xquat[body])
                np.testing.assert_allclose(expected[:3, 3], data.xpos[body], atol=1e-9)
                np.testing.assert_allclose(expected[:3, :3], matrix.reshape(3, 3), atol=1e-9)
