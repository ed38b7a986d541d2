"""URDF out (SPEC §24), checked with an independent URDF library (yourdfpy): the export parses, its
forward kinematics at random joint positions equals MuJoCo's body poses to 1e-9 (the demo arm, a
humanoid, a model with slide joints and several joints per body), its meshes load from the STL
files written, its inertials and colours are the model's, and a URDF exported from MJCF and
loaded back keeps the kinematic tree. `mjfast export-urdf` writes the same."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.model.urdf import load_urdf
from mjfast.model.urdf_export import export_urdf
from support import run_cli

yourdfpy = pytest.importorskip("yourdfpy")

# Plain ints: a numpy int is never `in` a tuple of mujoco's enum members.
FREE, BALL, SLIDE, HINGE = (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL),
                            int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE))

# Slides and hinges several to a body, refs, anchors off the body's origin, a ball joint (fixed
# in URDF), a welded body, an unnamed body, a mesh, an ellipsoid, a capsule and a plane.
MANY_JOINTS_XML = """
<mujoco model="many_joints">
  <asset><mesh name="tetra" vertex="0 0 0  0.2 0 0  0 0.2 0  0 0 0.2"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.2 0.3 0.4 1"/>
    <body name="cart" pos="0.1 0.2 0.3" euler="10 20 30">
      <joint name="x" type="slide" axis="1 0 0" ref="0.2"/>
      <joint name="tilt" type="hinge" axis="0 1 1" pos="0.1 0 0" ref="0.3" range="-60 60"/>
      <joint name="z" type="slide" axis="0 0 1" range="-1 1"/>
      <geom type="capsule" size="0.05 0.2" rgba="1 0 0 1"/>
      <geom type="mesh" mesh="tetra" pos="0.1 0 0" contype="0" conaffinity="0"/>
      <body name="arm" pos="0 0 1" quat="0.7071 0 0.7071 0">
        <joint name="a1" axis="1 0 0" pos="0 0.3 0" range="-90 90"/>
        <joint name="a2" axis="0 0 1" pos="0.2 0 0"/>
        <geom type="box" size="0.1 0.2 0.3" mass="2"/>
        <body name="hand" pos="0.5 0 0"><geom type="ellipsoid" size="0.1 0.2 0.3"/></body>
      </body>
    </body>
    <body name="ball_body" pos="1 1 1">
      <joint name="ball" type="ball"/>
      <geom type="sphere" size="0.1"/>
      <body pos="0 0 1"><joint name="after_ball" axis="0 1 0"/><geom size="0.1"/></body>
    </body>
  </worldbody>
</mujoco>
"""


def humanoid_models() -> list[tuple[str, mujoco.MjModel]]:
    """MuJoCo's humanoid from the shared reference models, when this checkout has them beside
    it, and the benchmarks' humanoid (built in code) always."""
    import importlib.util

    out = []
    repo = next(p for p in Path(__file__).absolute().parents
                if (p / "bench" / "models.py").is_file())
    for candidate in (repo.parent / "shared" / "models" / "humanoid.xml",
                      Path("/work/shared/models/humanoid.xml")):
        if candidate.is_file():
            out.append(("humanoid", mujoco.MjModel.from_xml_path(str(candidate))))
            break
    spec = importlib.util.spec_from_file_location("bench_models", repo / "bench" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out.append(("bench_humanoid", mujoco.MjModel.from_xml_string(module.humanoid_xml())))
    return out


def demo_arm() -> mujoco.MjModel:
    path = resources.files("mjfast") / "data" / "demo_arm.xml"
    return mujoco.MjModel.from_xml_path(str(path))


MODELS = {"demo_arm": demo_arm,
          "many_joints": lambda: mujoco.MjModel.from_xml_string(MANY_JOINTS_XML),
          **{name: (lambda m=model: m) for name, model in humanoid_models()}}


def parsed(text: str, **kwargs: object) -> object:
    return yourdfpy.URDF.load(io.StringIO(text), build_collision_scene_graph=False,
                              load_collision_meshes=False, **{"load_meshes": False, **kwargs})


def random_qpos(model: mujoco.MjModel, rng: np.random.Generator) -> np.ndarray:
    qpos = model.qpos0.copy()
    for joint in range(model.njnt):
        adr = model.jnt_qposadr[joint]
        kind = int(model.jnt_type[joint])
        if kind in (HINGE, SLIDE):
            low, high = model.jnt_range[joint] if model.jnt_limited[joint] else (-3.0, 3.0)
            qpos[adr] = rng.uniform(low, high)
        elif kind == FREE:
            quat = rng.normal(size=4)
            qpos[adr:adr + 7] = [*rng.normal(size=3), *(quat / np.linalg.norm(quat))]
    return qpos


def pose_matrix(pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
    matrix = np.eye(4)
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, quat / np.linalg.norm(quat))
    matrix[:3, :3] = rotation.reshape(3, 3)
    matrix[:3, 3] = pos
    return matrix


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_kinematics_equals_mujocos_body_poses(name: str, tmp_path: Path) -> None:
    model = MODELS[name]()
    robot = parsed(export_urdf(model, mesh_dir=tmp_path))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(10):
        data.qpos[:] = random_qpos(model, rng)
        mujoco.mj_kinematics(model, data)
        robot.update_cfg({model.joint(j).name: data.qpos[model.jnt_qposadr[j]]
                          for j in range(model.njnt)
                          if int(model.jnt_type[j]) in (HINGE, SLIDE)})
        for body in range(1, model.nbody):
            link = model.body(body).name or f"body_{body}"
            got = robot.get_transform(link, "world")
            root = model.body_rootid[body]
            first = model.body_jntadr[root]
            if model.body_jntnum[root] and model.jnt_type[first] == FREE:
                # yourdfpy leaves a floating joint at its origin: the free joint's qpos is the
                # floating joint's position, which we apply here.
                adr = model.jnt_qposadr[first]
                got = pose_matrix(data.qpos[adr:adr + 3], data.qpos[adr + 3:adr + 7]) @ got
            np.testing.assert_allclose(got, pose_matrix(data.xpos[body], data.xquat[body]),
                                       rtol=0, atol=1e-9, err_msg=f"{name}: {link}")
            checked += 1
    assert checked == 10 * (model.nbody - 1)


def test_joints_are_urdf_joints_named_as_in_mujoco(tmp_path: Path) -> None:
    model = mujoco.MjModel.from_xml_string(MANY_JOINTS_XML)
    robot = parsed(export_urdf(model, mesh_dir=tmp_path))
    kinds = {joint.name: joint.type for joint in robot.robot.joints}
    assert kinds["x"] == "prismatic" and kinds["z"] == "prismatic"
    assert kinds["tilt"] == "revolute" and kinds["a1"] == "revolute"
    assert kinds["a2"] == "continuous" and kinds["after_ball"] == "continuous"
    assert kinds["ball"] == "fixed"
    tilt = robot.joint_map["tilt"]
    assert (tilt.limit.lower, tilt.limit.upper) == pytest.approx(np.radians([-60, 60]))
    # One root, world; each body a link; the cart's three joints need two intermediate links.
    assert robot.base_link == "world"
    links = {link.name for link in robot.robot.links}
    assert {"world", "cart", "arm", "hand", "ball_body", "body_5"} <= links
    # Intermediate links: the cart's x and tilt (z is last, a slide), the arm's a1 and a2 (a2's
    # anchor is off the body's origin: a fixed offset follows it).
    assert links - {model.body(b).name or f"body_{b}" for b in range(model.nbody)} == {
        "cart__x", "cart__tilt", "arm__a1", "arm__a2"}


def test_a_free_joint_is_floating_from_world(tmp_path: Path) -> None:
    model = MODELS["bench_humanoid"]()
    robot = parsed(export_urdf(model, mesh_dir=tmp_path))
    root = robot.joint_map["root"]
    assert root.type == "floating" and root.parent == "world" and root.child == "torso"


def test_meshes_load_from_the_written_stl_files(tmp_path: Path) -> None:
    model = mujoco.MjModel.from_xml_string(MANY_JOINTS_XML)
    text = export_urdf(model, mesh_dir=tmp_path / "meshes")
    robot = parsed(text, load_meshes=True)
    files = sorted((tmp_path / "meshes").glob("*.stl"))
    assert len(files) == 2  # the tetrahedron and the ellipsoid
    uris = {e.get("filename") for e in ET.fromstring(text).iter("mesh")}
    assert uris == {f.as_uri() for f in files}
    tetra = next(g for g in robot.scene.geometry.values() if len(g.vertices) == 4)
    mesh = model.mesh("tetra")
    vertices = model.mesh_vert[mesh.vertadr[0]:mesh.vertadr[0] + mesh.vertnum[0]]
    assert len(tetra.faces) == mesh.facenum[0]
    np.testing.assert_allclose(np.sort(np.unique(tetra.vertices.round(6), axis=0), axis=0),
                               np.sort(np.unique(vertices.round(6), axis=0), axis=0), atol=1e-6)
    # The scene puts the mesh where MuJoCo's geom is.
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    robot.update_cfg({model.joint(j).name: model.qpos0[model.jnt_qposadr[j]]
                      for j in range(model.njnt) if int(model.jnt_type[j]) in (HINGE, SLIDE)})
    geom = next(g for g in range(model.ngeom) if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH)
    node = next(n for n in robot.scene.graph.nodes_geometry
                if robot.scene.graph[n][1] in robot.scene.geometry
                and len(robot.scene.geometry[robot.scene.graph[n][1]].vertices) == 4)
    placed = robot.scene.graph.get(node)[0]
    np.testing.assert_allclose(placed[:3, 3], data.geom_xpos[geom], atol=1e-9)
    np.testing.assert_allclose(placed[:3, :3], data.geom_xmat[geom].reshape(3, 3), atol=1e-9)


@pytest.mark.parametrize("name", ["demo_arm", "many_joints", "bench_humanoid"])
def test_inertials_equal_the_models(name: str, tmp_path: Path) -> None:
    model = MODELS[name]()
    robot = parsed(export_urdf(model, mesh_dir=tmp_path))
    for body in range(1, model.nbody):
        link = robot.link_map[model.body(body).name or f"body_{body}"]
        if model.body_mass[body] == 0:
            assert link.inertial is None
            continue
        assert link.inertial.mass == model.body_mass[body]
        frame = pose_matrix(model.body_ipos[body], model.body_iquat[body])
        origin = np.eye(4) if link.inertial.origin is None else link.inertial.origin
        np.testing.assert_allclose(origin, frame, atol=1e-12)
        np.testing.assert_array_equal(np.diag(link.inertial.inertia), model.body_inertia[body])


def test_materials_are_the_geoms_colours(tmp_path: Path) -> None:
    model = mujoco.MjModel.from_xml_string(MANY_JOINTS_XML)
    robot = parsed(export_urdf(model, mesh_dir=tmp_path))
    colours = {m.name: m.color.rgba for m in robot.robot.materials}
    floor = robot.link_map["world"].visuals[0]
    # MuJoCo keeps colours as float32: the same float32 numbers.
    np.testing.assert_array_equal(colours[floor.material.name].astype(np.float32),
                                  model.geom("floor").rgba)
    assert colours[floor.material.name].tolist() == [0.2, 0.3, 0.4, 1.0]
    cart = robot.link_map["cart"]
    np.testing.assert_array_equal(colours[cart.visuals[0].material.name], [1, 0, 0, 1])
    # A colliding geom is a collision too; the tetrahedron (contype 0) only a visual.
    assert len(cart.visuals) == 3 + 1 and len(cart.collisions) == 3


def test_round_trip_keeps_the_kinematic_tree(tmp_path: Path) -> None:
    for name in ("demo_arm", "many_joints", "bench_humanoid"):
        model = MODELS[name]()
        path = tmp_path / f"{name}.urdf"
        path.write_text(export_urdf(model, mesh_dir=tmp_path / "meshes"))
        back = load_urdf(path)

        def tree(m: mujoco.MjModel) -> dict[str, tuple[int, str, str]]:
            """Each hinge and slide joint: its type, the body it moves and the nearest other body
            above that a hinge or slide moves (an intermediate link, named <body>__<joint>,
            stands for its body)."""
            def body_of(body: int) -> str:
                return (m.body(body).name or f"body_{body}").split("__")[0]

            def moves(body: int) -> bool:
                return any(int(m.jnt_type[j]) in (HINGE, SLIDE) for j in range(
                    m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]))

            out = {}
            for joint in range(m.njnt):
                kind = int(m.jnt_type[joint])
                if kind not in (HINGE, SLIDE):
                    continue
                own = m.jnt_bodyid[joint]
                body = m.body_parentid[own]
                while body and (body_of(body) == body_of(own) or not moves(body)):
                    body = m.body_parentid[body]
                out[m.joint(joint).name] = (kind, body_of(own), body_of(body))
            return out

        assert tree(back) == tree(model), name
        # And the same poses at the same joint positions.
        data, data_back = mujoco.MjData(model), mujoco.MjData(back)
        rng = np.random.default_rng(3)
        data.qpos[:] = random_qpos(model, rng)
        for joint in range(model.njnt):
            kind = int(model.jnt_type[joint])
            if kind in (HINGE, SLIDE):
                data_back.qpos[back.joint(model.joint(joint).name).qposadr[0]] = data.qpos[
                    model.jnt_qposadr[joint]]
            elif kind == FREE:
                adr = model.jnt_qposadr[joint]
                back_adr = back.jnt_qposadr[back.body(model.body(
                    model.jnt_bodyid[joint]).name).jntadr[0]]
                data_back.qpos[back_adr:back_adr + 7] = data.qpos[adr:adr + 7]
            elif kind == BALL:
                data.qpos[model.jnt_qposadr[joint]:model.jnt_qposadr[joint] + 4] = [1, 0, 0, 0]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_kinematics(back, data_back)
        for body in range(1, model.nbody):
            other = back.body(model.body(body).name or f"body_{body}").id
            np.testing.assert_allclose(data_back.xpos[other], data.xpos[body], atol=1e-9)


def test_floats_are_written_at_full_precision(tmp_path: Path) -> None:
    model = mujoco.MjModel.from_xml_string(MANY_JOINTS_XML)
    root = ET.fromstring(export_urdf(model, mesh_dir=tmp_path))
    mass = next(e for e in root.iter("mass"))
    assert float(mass.get("value")) in set(model.body_mass.tolist())
    assert "1/3" not in mass.get("value")


def test_export_urdf_is_public_and_refuses_what_is_not_a_model() -> None:
    assert mjfast.export_urdf is export_urdf
    with pytest.raises(TypeError, match="MjModel"):
        export_urdf("model.xml")  # type: ignore[arg-type]


# -- mjfast export-urdf ---------------------------------------------------------------------------


def test_cli_writes_the_urdf_and_its_meshes_beside_it(tmp_path: Path, capsys) -> None:
    model_path = tmp_path / "many.xml"
    model_path.write_text(MANY_JOINTS_XML)
    out = tmp_path / "out" / "many.urdf"
    out.parent.mkdir()
    code, stdout, err = run_cli(capsys, "export-urdf", str(model_path), "-o", str(out))
    assert code == 0, err
    assert stdout == "" or str(out) in stdout
    meshes = sorted((out.parent / "many_meshes").glob("*.stl"))
    assert len(meshes) == 2
    robot = yourdfpy.URDF.load(str(out), build_collision_scene_graph=False,
                               load_collision_meshes=False)
    assert robot.base_link == "world" and len(robot.scene.geometry) > 0


def test_cli_without_output_writes_stdout(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "arm.xml"
    path.write_text(Path(str(resources.files("mjfast") / "data" / "demo_arm.xml")).read_text())
    code, stdout, err = run_cli(capsys, "export-urdf", str(path))
    assert code == 0, err
    assert parsed(stdout).base_link == "world"


def test_cli_names_a_missing_model(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "export-urdf", str(tmp_path / "nothing.xml"))
    assert code != 0 and "nothing.xml" in err and err.count("\n") == 1
