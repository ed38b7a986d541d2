"""Entities (SPEC §25): spawn and remove while the world runs, entity state, and what carries
over: the untouched state bit for bit, plugin states, a spawned robot's own controllers."""

from __future__ import annotations

import gc
import resource
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.plugin.discovery import register_plugin, unregister_plugin
from support import TWO_LINK_ARM_XML, run_cli, wait_for

# A world on the sparse Jacobian, so that a body with dofs of its own and no constraint leaves
# every sum over the others' dofs as it was (MuJoCo's dense products run over all of them).
WORLD_XML = """
<mujoco model="world">
  <option timestep="0.002" jacobian="sparse"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.3"><freejoint name="box_joint"/>
      <geom type="box" size="0.1 0.1 0.1"/></body>
    <body name="pendulum" pos="1 0 1">
      <joint name="swing" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0.1" size="0.03" contype="0" conaffinity="0"/>
    </body>
    <body name="target" mocap="true" pos="0 2 1"><geom type="sphere" size="0.05"
      contype="0" conaffinity="0"/></body>
  </worldbody>
  <actuator><motor name="swing_motor" joint="swing"/></actuator>
</mujoco>
"""

WORLD_NQ, WORLD_NV = 8, 7  # the box's free joint and the pendulum's hinge

# Out of everyone's reach: no collision at all, falling forever.
PROBE_XML = """
<mujoco model="probe"><worldbody>
  <body name="body"><freejoint/><geom type="sphere" size="0.1" contype="0" conaffinity="0"/>
  </body></worldbody></mujoco>
"""

# A probe with an actuator of its own: a spawn of it widens the world's ctrl.
ACTUATED_PROBE_XML = """
<mujoco model="motor"><worldbody>
  <body name="rotor"><joint name="spin" type="hinge"/>
    <geom type="cylinder" size="0.1 0.02" contype="0" conaffinity="0"/></body></worldbody>
  <actuator><motor joint="spin"/></actuator></mujoco>
"""

STATIC_XML = """
<mujoco model="crate"><worldbody>
  <body name="crate"><geom type="box" size="0.2 0.2 0.2"/></body></worldbody></mujoco>
"""

TRACE: dict[str, list[tuple[int, bytes]]] = {}


class Tracer(mjfast.MujocoPlugin):
    """Writes down, after every step, the step count and the original world's qpos and qvel
    (its first WORLD_NQ/WORLD_NV entries: a spawned entity's come after them)."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.nq, self.nv = WORLD_NQ, WORLD_NV
        self.trace = TRACE.setdefault(self.config.get("key", "default"), [])
        self.count = 0
        return True

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.count += 1
        self.trace.append((self.count, data.qpos[:self.nq].tobytes()
                           + data.qvel[:self.nv].tobytes()))

    def get_state(self) -> Any:
        return self.count

    def set_state(self, value: Any) -> None:
        self.count = int(value)


@pytest.fixture(autouse=True)
def tracer() -> Iterator[None]:
    register_plugin("test/Tracer", Tracer)
    TRACE.clear()
    try:
        yield
    finally:
        unregister_plugin("test/Tracer")


def world(make_env: Callable[..., mjfast.MujocoEnv], **plugins: Any) -> mjfast.MujocoEnv:
    entries = [dict(entry, name=name) for name, entry in plugins.items()]
    params = {"mujoco_server": {"MujocoPlugins": entries}} if entries else None
    return make_env(WORLD_XML, params=params)


def physics(env: mjfast.MujocoEnv) -> np.ndarray:
    return env.get_state().physics


# -- entities() ---------------------------------------------------------------------------------


def test_entities_are_the_world_children_and_the_spawned_models(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    assert sorted(env.entities()) == ["box", "pendulum", "target"]
    pendulum = env.entities()["pendulum"]
    assert pendulum.joints == ("swing",) and pendulum.actuators == ("swing_motor",)
    assert not pendulum.spawned and pendulum.namespace == "/mujoco_server"
    env.spawn(TWO_LINK_ARM_XML, "left", pose={"pos": [3, 0, 0]})
    left = env.entities()["left"]
    assert left.spawned and left.namespace == "/left" and left.source == "<string>"
    assert left.bodies == ("left/upper", "left/lower")
    assert left.joints == ("left/shoulder", "left/elbow")
    assert len(left.actuators) == 2
    assert env.entities()["pendulum"] == pendulum


# -- spawn and remove keep what existed ---------------------------------------------------------


def test_spawn_keeps_time_step_count_state_and_warm_start_bit_for_bit(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.data.ctrl[:] = 0.3
    env.data.mocap_pos[0] = [0.5, 2.0, 1.0]
    env.step(150)
    before = physics(env)
    generation, count = env.model_generation, env.step_count
    env.spawn(PROBE_XML, "probe", pose={"pos": [0, -3, 2]})
    assert env.model_generation == generation + 1
    assert env.step_count == count
    after = env.get_state()
    old = mujoco.MjModel.from_xml_string(WORLD_XML)
    # Each part of the integration state: the old entries equal, the probe's after them.
    start_old = start_new = 0
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    for bit in range(int(mujoco.mjtState.mjNSTATE)):
        part = 1 << bit
        if not int(spec) & part:
            continue
        size_old = mujoco.mj_stateSize(old, part)
        size_new = mujoco.mj_stateSize(env.model, part)
        assert after.physics[start_new:start_new + size_old].tobytes() == \
            before[start_old:start_old + size_old].tobytes(), mujoco.mjtState(part).name
        start_old += size_old
        start_new += size_new
    probe = env.get_entity_state("probe")
    assert probe.pos.tolist() == [0, -3, 2] and not probe.linvel.any()


@pytest.mark.parametrize("realtime_factor", [None, 1.0], ids=["unpaced", "paced"])
def test_a_running_world_steps_on_exactly_as_it_would_have_without_the_spawned_probe(
        make_env: Callable[..., mjfast.MujocoEnv], realtime_factor: float | None) -> None:
    env = world(make_env, trace={"type": "test/Tracer", "key": "spawned"})
    env.data.ctrl[:] = 0.2
    env.start(realtime_factor)
    assert wait_for(lambda: env.step_count > 50)
    env.spawn(PROBE_XML, "probe", pose={"pos": [0, -3, 2]})
    spawned_at = env.step_count
    assert wait_for(lambda: env.step_count > spawned_at + 50)
    env.remove("probe")
    at = env.step_count
    assert wait_for(lambda: env.step_count > at + 50)
    env.stop()
    trace = TRACE["spawned"]
    assert [count for count, _ in trace] == list(range(1, len(trace) + 1))  # state carried
    reference = world(make_env, trace={"type": "test/Tracer", "key": "reference"})
    reference.data.ctrl[:] = 0.2
    reference.step(len(trace))
    assert TRACE["reference"] == trace


def test_a_spawn_into_one_world_of_a_vector_env_leaves_the_others_bit_for_bit() -> None:
    ctrl = np.full((3, 1), 0.2)
    with mjfast.VectorEnv(WORLD_XML, 3) as vector, mjfast.VectorEnv(WORLD_XML, 3) as reference:
        vector.step(25, ctrl)
        reference.step(25, ctrl)
        one = vector.world(1)
        info = one.spawn(PROBE_XML, "probe", pose={"pos": [0, -3, 2]})
        assert info.spawned and sorted(one.entities()) == ["box", "pendulum", "probe", "target"]
        assert sorted(vector.world(0).entities()) == ["box", "pendulum", "target"]
        assert one.model.nq == WORLD_NQ + 7 and vector.world(2).model.nq == WORLD_NQ
        # The batched arrays of differing widths are refused, not read past a row.
        with pytest.raises(ValueError, match=r"qpos, qvel differ in width .*\.world\(i\)\.data"):
            vector.gather(("qpos", "qvel"))
        vector.step(50, ctrl)  # ctrl keeps its width: the probe has no actuator
        reference.step(50, ctrl)
        for index in (0, 2):  # untouched, as if nothing had happened in world 1
            assert physics_of(vector, index).tobytes() == physics_of(reference, index).tobytes()
        # World 1 stepped on: the original entities exactly as the reference's (contact-free
        # probe, sparse Jacobian), and the probe fell.
        data, expected = one.data, reference.world(1).data
        assert one.step_count == reference.world(1).step_count == 75
        assert data.qpos[:WORLD_NQ].tobytes() == expected.qpos.tobytes()
        assert data.qvel[:WORLD_NV].tobytes() == expected.qvel.tobytes()
        assert one.get_entity_state("probe").pos[2] < 2.0
        one.set_entity_state("probe", pose={"pos": [0, -3, 5]})
        assert one.get_entity_state("probe").pos.tolist() == [0, -3, 5]
        one.remove("probe")
        vector.step(10, ctrl)
        reference.step(10, ctrl)
        assert vector.gather(("qpos", "qvel")).tobytes() == reference.gather(
            ("qpos", "qvel")).tobytes()


def test_the_core_refuses_rows_of_differing_widths_under_the_vectors_lock() -> None:
    # The core checks each world's width under the lock a spawn holds (a check before it, in
    # Python, could be overtaken by a spawn on another thread), so a batch sized before the
    # spawn is refused, not read or written past a row.
    with mjfast.VectorEnv(WORLD_XML, 3) as vector:
        core = vector._core
        sized = np.zeros((3, WORLD_NQ))
        vector.world(2).spawn(PROBE_XML, "probe", pose={"pos": [0, -3, 2]})
        with pytest.raises(ValueError, match=r"world 2's qpos take 15 numbers a row, not the 8"):
            core.gather_rows(["qpos"], sized)
        with pytest.raises(ValueError, match=r"world 2's qpos take 15 numbers"):
            core.gather("qpos")
        assert not sized.any()  # refused before anything was copied
        vector.world(2).remove("probe")
        vector.world(0).spawn(ACTUATED_PROBE_XML, "motor", pose={"pos": [0, 3, 2]})
        ctrl = np.full((3, vector.world(0).model.nu), 0.1)
        before = [vector.world(i).data.ctrl.copy() for i in range(3)]
        with pytest.raises(ValueError, match=r"world 1's ctrl take 1 numbers a row, not the 2"):
            core.step(1, ctrl)
        for index in range(3):  # nothing written, nothing stepped
            assert vector.world(index).data.ctrl.tobytes() == before[index].tobytes()
            assert vector.world(index).step_count == 0


def physics_of(vector: mjfast.VectorEnv, index: int) -> np.ndarray:
    return vector.get_state(index).physics


def test_remove_keeps_the_others_state_by_name(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.spawn(TWO_LINK_ARM_XML, "left", pose={"pos": [3, 0, 0]})
    env.spawn(TWO_LINK_ARM_XML, "right", pose={"pos": [-3, 0, 0]})
    env.data.ctrl[:] = np.linspace(-1, 1, env.model.nu)
    env.step(100)
    joints = env.get_joint_state()
    ctrl = {mujoco.mj_id2name(env.model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or f"#{i}": v
            for i, v in enumerate(env.data.ctrl)}
    env.remove("left")
    assert "left" not in env.entities()
    after = env.get_joint_state()
    assert set(after) == {name for name in joints if not name.startswith("left/")}
    for name, state in after.items():
        assert state.position.tobytes() == joints[name].position.tobytes()
        assert state.velocity.tobytes() == joints[name].velocity.tobytes()
    assert env.data.ctrl[0] == ctrl["swing_motor"]


def test_an_original_entity_can_be_removed(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.remove("pendulum")
    assert sorted(env.entities()) == ["box", "target"]
    assert env.model.nu == 0
    env.step(10)


# -- failures change nothing --------------------------------------------------------------------


@pytest.mark.parametrize(("model", "name", "options", "error", "match"), [
    ("<mujoco><worldbody><body><geom type='box'/></body></worldbody></mujoco>", "bad", {},
     ValueError, "size"),
    (PROBE_XML, "box", {}, ValueError, "entity name 'box' is taken"),
    (PROBE_XML, "has space", {}, ValueError, "invalid entity name"),
    (PROBE_XML, "p", {"pose": {"quat": [0, 0, 0, 0]}}, ValueError, "pose quat"),
    (PROBE_XML, "p", {"pose": {"pos": [0, float("nan"), 0]}}, ValueError, "pose pos"),
    (PROBE_XML, "p", {"pose": {"where": 1}}, ValueError, "unknown field 'where'"),
    (PROBE_XML, "p", {"frame": "nowhere"}, KeyError, "unknown frame 'nowhere'"),
], ids=["bad model", "taken name", "bad name", "zero quat", "nan pos", "bad pose key",
        "unknown frame"])
def test_a_failed_spawn_changes_nothing(make_env: Callable[..., mjfast.MujocoEnv], model: str,
                                        name: str, options: dict[str, Any], error: type,
                                        match: str) -> None:
    env = world(make_env, trace={"type": "test/Tracer"})
    env.step(20)
    state, live = env.get_state(), env.model
    generation = env.model_generation
    with pytest.raises(error, match=match):
        env.spawn(model, name, **options)
    assert env.model is live and env.model_generation == generation
    assert env.get_state() == state
    assert sorted(env.entities()) == ["box", "pendulum", "target"]
    env.spawn(PROBE_XML, "after")  # and the world still takes a spawn
    assert "after" in env.entities()


def test_a_bad_model_is_mujocos_message(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    bad = "<mujoco><worldbody><body><joint type='hinge'/></body></worldbody></mujoco>"
    with pytest.raises(ValueError, match="mass and inertia"):
        env.spawn(bad, "bad")


def test_remove_of_an_unknown_entity_is_a_key_error_listing_them(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    with pytest.raises(KeyError, match=r"no entity named 'boxx' \(did you mean 'box'\?\)"):
        env.remove("boxx")


# -- plugins ------------------------------------------------------------------------------------


def test_running_plugins_reload_with_their_state(make_env: Callable[..., mjfast.MujocoEnv]
                                                  ) -> None:
    env = world(make_env, trace={"type": "test/Tracer"})
    env.step(30)
    plugin_generation = env.plugin_generation
    env.spawn(PROBE_XML, "probe")
    assert env.plugin_generation == plugin_generation + 1
    with env.acquire_plugin("trace") as plugin:
        assert plugin.count == 30
    env.step(5)
    env.remove("probe")
    with env.acquire_plugin("trace") as plugin:
        assert plugin.count == 35


def arm_params(entity: str) -> dict[str, Any]:
    return {"MujocoPlugins": [{"name": "forward", "type": "mjfast/ForwardCommand",
                               "joints": [f"{entity}/shoulder", f"{entity}/elbow"]}]}


def test_two_spawned_robots_each_have_their_own_controller_and_topic(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.spawn(TWO_LINK_ARM_XML, "left", pose={"pos": [3, 0, 0]}, params=arm_params("left"))
    env.spawn(TWO_LINK_ARM_XML, "right", pose={"pos": [-3, 0, 0]}, params=arm_params("right"))
    names = [plugin.name for plugin in env.plugins]
    assert names == ["left/forward", "right/forward"]
    assert all(plugin.state.name == "ACTIVE" for plugin in env.plugins)
    # One command a step: each controller writes the whole ctrl it read (read-modify-write).
    env.bus.publish("/left/forward/commands", {"data": [1.5, -0.5]})
    env.step(1)
    env.bus.publish("/right/forward/commands", {"data": [-2.0, 0.25]})
    env.step(1)
    ctrl = {mujoco.mj_id2name(env.model, mujoco.mjtObj.mjOBJ_ACTUATOR, i)
            or str(mujoco.mj_id2name(env.model, mujoco.mjtObj.mjOBJ_JOINT,
                                     env.model.actuator_trnid[i, 0])): float(env.data.ctrl[i])
            for i in range(env.model.nu)}
    assert ctrl["left/shoulder"] == 1.5 and ctrl["left/elbow"] == -0.5
    assert ctrl["right/shoulder"] == -2.0 and ctrl["right/elbow"] == 0.25
    assert ctrl["swing_motor"] == 0.0
    # Removing one robot removes its controller; the other keeps working.
    env.remove("left")
    assert [plugin.name for plugin in env.plugins] == ["right/forward"]
    env.bus.publish("/right/forward/commands", {"data": [0.5, 0.5]})
    env.step(1)
    assert env.data.ctrl[-2:].tolist() == [0.5, 0.5]


# -- entity state -------------------------------------------------------------------------------


def test_entity_state_of_free_fixed_and_mocap_roots(make_env: Callable[..., mjfast.MujocoEnv]
                                                    ) -> None:
    env = world(make_env)
    state = env.get_entity_state("box")
    assert state.pos.tolist() == [0, 0, 0.3]
    env.set_entity_state("box", pose={"pos": [0.5, 0, 1]}, twist={"linvel": [1, 0, 0]})
    state = env.get_entity_state("box")
    assert state.pos.tolist() == [0.5, 0, 1] and state.linvel.tolist() == [1, 0, 0]
    env.set_entity_state("pendulum", pose={"pos": [1, 1, 1], "quat": [0, 0, 0, 1]})
    assert env.get_entity_state("pendulum").pos.tolist() == [1, 1, 1]
    assert env.model.body_pos[env.model.body("pendulum").id].tolist() == [1, 1, 1]
    env.set_entity_state("target", pose={"pos": [0, 1, 2]})
    assert env.data.mocap_pos[0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="no free joint"):
        env.set_entity_state("pendulum", twist={"linvel": [1, 0, 0]})
    relative = env.get_entity_state("box", frame="pendulum")
    assert np.allclose(relative.pos, [0.5, 1, 0])  # turned half about z


def test_set_entity_state_is_all_or_nothing(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    before = env.get_state()
    with pytest.raises(ValueError, match="twist: unknown field 'spin'"):
        env.set_entity_state("box", pose={"pos": [1, 1, 1]}, twist={"spin": [0, 0, 1]})
    with pytest.raises(KeyError, match="no entity named 'bx'"):
        env.set_entity_state("bx", pose={"pos": [1, 1, 1]})
    assert env.get_state() == before


# -- reload, reset ------------------------------------------------------------------------------


def test_reset_keeps_the_entities_and_reload_spawns_them_again(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.spawn(STATIC_XML, "crate", pose={"pos": [2, 2, 0.2]})
    env.remove("pendulum")
    env.step(10)
    env.reset()
    assert sorted(env.entities()) == ["box", "crate", "target"]
    env.reload()
    assert sorted(env.entities()) == ["box", "crate", "target"]
    assert env.entities()["crate"].spawned
    assert env.get_entity_state("crate").pos.tolist() == [2, 2, 0.2]


# -- leaks --------------------------------------------------------------------------------------


def rss_kb() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() // 1024


def test_a_hundred_spawn_remove_cycles_leak_nothing(make_env: Callable[..., mjfast.MujocoEnv]
                                                    ) -> None:
    env = world(make_env, trace={"type": "test/Tracer"})
    arm = arm_params("arm")

    def cycle() -> None:
        env.spawn(TWO_LINK_ARM_XML, "arm", pose={"pos": [3, 0, 0]}, params=arm)
        env.step(2)
        env.remove("arm")

    for _ in range(10):
        cycle()
    gc.collect()
    objects, rss = len(gc.get_objects()), rss_kb()
    for _ in range(100):
        cycle()
    gc.collect()
    assert len(gc.get_objects()) - objects < 200
    assert rss_kb() - rss < 8 * 1024
    assert sorted(env.entities()) == ["box", "pendulum", "target"]
    assert env.model.nq == mujoco.MjModel.from_xml_string(WORLD_XML).nq


# -- recording ----------------------------------------------------------------------------------


def test_a_recording_with_spawns_and_removals_replays_bit_for_bit(
        make_env: Callable[..., mjfast.MujocoEnv], tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("rosbags")
    env = world(make_env)
    env.spawn(STATIC_XML, "crate", pose={"pos": [2, 2, 0.2]})  # before: in the bag's metadata
    recording = env.record(tmp_path / "bag", state_every=25)
    env.control.write(ctrl=[0.4])  # recorded, as every command that reaches the simulation
    env.step(40)
    env.spawn(TWO_LINK_ARM_XML, "arm", pose={"pos": [3, 0, 0]}, frame="world")
    env.spawn(PROBE_XML, "probe", frame="box", pose={"pos": [0, 0, 1]})
    env.step(60)
    env.remove("pendulum")
    env.step(30)
    env.remove("arm")
    env.step(30)
    expected = sorted(env.entities())
    recording.stop()
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0 and out.startswith("replay matches"), out
    # env_at makes the world of that moment: the crate from before, the spawns and removals.
    with mjfast.open_recording(tmp_path / "bag").env_at(float(env.data.time)) as later:
        assert sorted(later.entities()) == expected == ["box", "crate", "probe", "target"]
        assert later.entities()["crate"].spawned


# -- bus services -------------------------------------------------------------------------------


def test_the_bus_services_spawn_query_move_and_remove(make_env: Callable[..., mjfast.MujocoEnv]
                                                      ) -> None:
    env = world(make_env)
    ns = env.namespace
    reply = env.bus.call(f"{ns}/spawn", {"model": STATIC_XML, "name": "crate",
                                         "pose": {"pos": [2, 0, 0.2]}})
    assert reply["entity"]["bodies"] == ["crate/crate"] and reply["entity"]["spawned"]
    assert set(env.bus.call(f"{ns}/entities", None)) == {"box", "pendulum", "target", "crate"}
    env.bus.call(f"{ns}/set_entity_state", {"name": "crate", "pose": {"pos": [2, 1, 0.2]}})
    state = env.bus.call(f"{ns}/get_entity_state", {"name": "crate"})
    assert state["pos"] == [2, 1, 0.2]
    env.bus.call(f"{ns}/remove", {"name": "crate"})
    assert "crate" not in env.entities()
    with pytest.raises(KeyError, match="no entity named 'crate'"):
        env.bus.call(f"{ns}/remove", {"name": "crate"})


# -- sources and frames -------------------------------------------------------------------------

URDF = """<?xml version="1.0"?>
<robot name="pole">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
    ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
  <link name="pole"><inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
    ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><cylinder radius="0.02" length="0.5"/></geometry></visual></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="pole"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
</robot>
"""


def test_urdf_mjspec_and_file_sources(make_env: Callable[..., mjfast.MujocoEnv],
                                      tmp_path: Path) -> None:
    env = world(make_env)
    env.spawn(URDF, "pole", pose={"pos": [0, -2, 0.5]})
    assert "pole/hinge" in env.entities()["pole"].joints
    # SPEC §24's importer: a <ros2_control> joint gets its actuator, named <joint>_<interface>.
    controlled = URDF.replace("</robot>", """<ros2_control name="sim" type="system">
      <joint name="hinge"><command_interface name="effort"/>
        <state_interface name="position"/></joint></ros2_control></robot>""")
    env.spawn(controlled, "driven", pose={"pos": [0, -3, 0.5]})
    assert env.entities()["driven"].actuators == ("driven/hinge_effort",)
    spec = mujoco.MjSpec.from_string(STATIC_XML)
    env.spawn(spec, "crate", pose={"pos": [2, 2, 0.2]})
    assert env.entities()["crate"].source == "<MjSpec>"
    path = tmp_path / "probe.xml"
    path.write_text(PROBE_XML)
    env.spawn(path, "probe")
    assert env.entities()["probe"].source == str(path)
    with pytest.raises(FileNotFoundError, match="model file not found"):
        env.spawn(tmp_path / "missing.xml", "missing")


def test_a_frame_body_carries_a_fixed_entity_and_places_a_free_one(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = world(make_env)
    env.set_entity_state("box", pose={"pos": [0.5, 0.5, 0.3]})
    env.spawn(STATIC_XML, "lid", frame="box", pose={"pos": [0, 0, 0.3]})  # rides on the box
    env.spawn(PROBE_XML, "probe", frame="box", pose={"pos": [0, 0, 1]})  # free: in the world
    lid = env.model.body("lid/crate")
    assert env.model.body_parentid[lid.id] == env.model.body("box").id
    probe = env.model.body("probe/body")
    assert env.model.body_parentid[probe.id] == 0
    assert env.get_entity_state("probe").pos.tolist() == [0.5, 0.5, 1.3]
    env.remove("box")  # what hangs from it goes with it; the free probe stays
    assert sorted(env.entities()) == ["pendulum", "probe", "target"]


def test_an_env_made_from_an_mjmodel_cannot_spawn(make_env: Callable[..., mjfast.MujocoEnv]
                                                  ) -> None:
    env = make_env(mujoco.MjModel.from_xml_string(WORLD_XML))
    with pytest.raises(ValueError, match=r"made from a mujoco\.MjModel"):
        env.spawn(PROBE_XML, "probe")
    assert sorted(env.entities()) == ["box", "pendulum", "target"]


class Holder(mjfast.MujocoPlugin):
    """State sized by the model: its old state no longer fits once the world has grown."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.held = np.zeros(model.nq)
        return True

    def get_state(self) -> Any:
        return self.held.copy()

    def set_state(self, value: Any) -> None:
        if np.shape(value) != self.held.shape:
            raise ValueError(f"expected {self.held.size} values, got {np.size(value)}")
        self.held = np.asarray(value)


def test_a_plugin_that_refuses_its_old_state_keeps_its_new_one(
        make_env: Callable[..., mjfast.MujocoEnv], caplog: pytest.LogCaptureFixture) -> None:
    register_plugin("test/Holder", Holder)
    try:
        env = world(make_env, hold={"type": "test/Holder"}, trace={"type": "test/Tracer"})
        env.step(10)
        with env.acquire_plugin("hold") as hold:
            hold.held = np.ones(env.model.nq)
        env.spawn(PROBE_XML, "probe")
    finally:
        unregister_plugin("test/Holder")
    assert "plugin hold keeps the state it loaded with" in caplog.text
    with env.acquire_plugin("hold") as hold:
        assert hold.held.tolist() == [0.0] * env.model.nq
    with env.acquire_plugin("trace") as trace:
        assert trace.count == 10  # the other one got its state back
