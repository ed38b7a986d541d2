"""VectorEnv (SPEC §21): many worlds of one model stepped on a pool of C++ worker threads.

Each world is checked against a separate MujocoEnv given the same commands (bit for bit, for any
thread count), each world's plugins are called for its own world only, a plugin failing in one
world leaves the others stepping, and the GIL is released while no Python plugin runs.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import MOCAP_XML, plugins_param, run_python

# A free box falling onto a floor beside a two-link arm with motors and sensors: contacts, a free
# joint and actuators, so that any difference in stepping order or data shows in the state.
MODEL = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="box" pos="0.5 0 0.3">
      <freejoint/>
      <geom type="box" size=".05 .05 .05" mass="0.5"/>
    </body>
    <body name="a" pos="0 0 0.5">
      <joint name="j0" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      <body pos="0.3 0 0">
        <joint name="j1" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m0" joint="j0" ctrlrange="-2 2" ctrllimited="true"/>
    <motor name="m1" joint="j1" ctrlrange="-2 2" ctrllimited="true"/>
  </actuator>
  <sensor>
    <jointpos joint="j0"/><jointvel joint="j1"/><framepos objtype="body" objname="box"/>
  </sensor>
</mujoco>
"""
NU = 2


@pytest.fixture
def native(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    library = plugin_library_path(tmp_path_factory)
    for name in ("WorldProbe", "ThrowingControl", "Rendezvous"):
        mjfast.register_plugin(f"tests/{name}", NativePlugin(library, name))
    yield "tests/WorldProbe"
    for name in ("WorldProbe", "ThrowingControl", "Rendezvous"):
        mjfast.unregister_plugin(f"tests/{name}")


class Probe(mjfast.MujocoPlugin):
    """Counts its callbacks and checks that each one sees its own world's data."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.data = data
        self.calls = {"control": 0, "last_stage": 0}
        self.foreign = 0
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.calls["control"] += 1
        self.foreign += data is not self.data

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.calls["last_stage"] += 1
        self.foreign += data is not self.data or data is not self.env.data


class FailsInWorldOne(mjfast.MujocoPlugin):
    """Raises at the third control call of world 1 only."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.calls = 0
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.calls += 1
        if self.world_index == 1 and self.calls == 3:
            raise RuntimeError("world one exploded")


def commands(steps: int, worlds: int, seed: int = 7) -> np.ndarray:
    """(steps, worlds, nu) control commands, different per world and step."""
    return np.random.default_rng(seed).uniform(-2, 2, size=(steps, worlds, NU))


def state_of(data: mujoco.MjData) -> tuple[bytes, ...]:
    return (data.qpos.tobytes(), data.qvel.tobytes(), data.act.tobytes(),
            np.float64(data.time).tobytes(), data.sensordata.tobytes(), data.ctrl.tobytes())


# -- results ------------------------------------------------------------------------------------

def test_worlds_equal_separate_envs_bit_for_bit_for_any_thread_count(native: str) -> None:
    worlds, rounds, n = 5, 6, 25
    ctrls = commands(rounds, worlds)
    params = plugins_param({"type": "mjfast/NoOp", "name": "noop"})
    references = [mjfast.MujocoEnv(MODEL, params=params) for _ in range(worlds)]
    try:
        for step in range(rounds):
            for index, env in enumerate(references):
                env.data.ctrl[:] = ctrls[step, index]
                env.step(n)
        expected = [state_of(env.data) for env in references]
    finally:
        for env in references:
            env.close()
    for threads in (1, 2, 3):
        with mjfast.VectorEnv(MODEL, worlds, params, threads=threads) as vector:
            assert vector.threads == threads
            for step in range(rounds):
                vector.step(n, ctrls[step])
            got = [state_of(vector.world(i).data) for i in range(worlds)]
            assert got == expected, f"threads={threads}"
            # The batched arrays are the worlds' own values.
            assert vector.qpos.tobytes() == b"".join(state[0] for state in expected)
            assert vector.qvel.tobytes() == b"".join(state[1] for state in expected)
            assert vector.time.tobytes() == b"".join(state[3] for state in expected)
            assert vector.sensordata.tobytes() == b"".join(state[4] for state in expected)
            assert vector.ctrl.tobytes() == b"".join(state[5] for state in expected)


def test_batched_arrays_have_one_row_per_world_and_are_the_callers() -> None:
    with mjfast.VectorEnv(MODEL, 3, threads=2) as vector:
        model = vector.model
        assert vector.qpos.shape == (3, model.nq)
        assert vector.qvel.shape == (3, model.nv)
        assert vector.ctrl.shape == (3, model.nu)
        assert vector.sensordata.shape == (3, model.nsensordata)
        assert vector.time.shape == (3,)
        assert all(array.dtype == np.float64 for array in
                   (vector.qpos, vector.qvel, vector.ctrl, vector.sensordata, vector.time))
        qpos = vector.qpos
        qpos[:] = 99.0  # the caller's copy: the worlds are untouched
        assert not (vector.world(0).data.qpos == 99.0).any()
        vector.step(10, np.ones((3, NU)))
        np.testing.assert_allclose(vector.time, [10 * model.opt.timestep] * 3)
        np.testing.assert_array_equal(vector.ctrl, np.ones((3, NU)))


def test_threads_default_to_the_usable_cpus() -> None:
    cpus = len(os.sched_getaffinity(0))
    with mjfast.VectorEnv(MODEL, cpus + 1) as vector:
        assert vector.threads == cpus
        assert vector.num_envs == len(vector) == cpus + 1
    with mjfast.VectorEnv(MODEL, 1) as vector:
        assert vector.threads == 1  # no worker without a world to step


def test_worlds_share_the_model_unless_they_own_copies() -> None:
    with mjfast.VectorEnv(MODEL, 3) as vector:
        assert not vector.own_models
        assert all(model is vector.model for model in vector.models)
    with mjfast.VectorEnv(MODEL, 3, own_models=True) as vector:
        assert vector.own_models
        models = vector.models
        assert len({id(model) for model in models} | {id(vector.model)}) == 4
        models[1].body_mass[1] *= 2  # world 1's copy alone: the others and the nominal keep theirs
        assert models[0].body_mass[1] == models[2].body_mass[1] == vector.model.body_mass[1]
        vector.world(1).apply_options({"gravity": [0, 0, -1]})
        assert list(models[1].opt.gravity) == [0, 0, -1]
        assert list(models[0].opt.gravity) == [0, 0, -9.81]
        vector.step(50)
        qpos = vector.qpos
        assert qpos[0].tobytes() == qpos[2].tobytes() != qpos[1].tobytes()


# -- plugins ------------------------------------------------------------------------------------

def test_native_and_python_plugins_run_n_times_per_world_each_on_its_own_world(
        native: str, register: Any) -> None:
    probe = register(Probe)
    worlds, n = 4, 30
    params = plugins_param({"type": native, "name": "native"}, {"type": probe, "name": "python"})
    with mjfast.VectorEnv(MODEL, worlds, params, threads=3) as vector:
        vector.step(n)
        vector.step(n, np.zeros((worlds, NU)))
        for index in range(worlds):
            world = vector.world(index)
            with world.acquire_plugin("native") as plugin:
                assert int(plugin.call("world_index")) == index
                for callback in ("pre_step", "control", "last_stage"):
                    assert int(plugin.call(callback)) == 2 * n
                assert int(plugin.call("violations")) == 0
            with world.acquire_plugin("python") as plugin:
                assert plugin.world_index == index
                assert plugin.calls == {"control": 2 * n, "last_stage": 2 * n}
                assert plugin.foreign == 0
                assert plugin.data is world.data
            stats = world.statistics()
            assert stats["env"]["steps"] == world.step_count == 2 * n
            assert [p["callbacks"]["control_callback"]["calls"] for p in stats["plugins"]] == [
                2 * n, 2 * n]
            assert [info.state for info in world.plugins] == [mjfast.PluginState.ACTIVE] * 2


def test_a_plugin_failing_in_one_world_leaves_the_others_stepping(register: Any) -> None:
    failing = register(FailsInWorldOne)
    with mjfast.VectorEnv(MODEL, 3, plugins_param({"type": failing, "name": "f"}),
                          threads=2) as vector:
        with pytest.raises(mjfast.PluginError, match="world one exploded") as raised:
            vector.step(10)
        assert raised.value.world_index == 1  # type: ignore[attr-defined]
        assert raised.value.plugin_name == "f"
        # World 1 stopped after the step that failed (SPEC §6); the others ran all 10.
        assert [vector.world(i).step_count for i in range(3)] == [10, 3, 10]
        states = [info.state for i in range(3) for info in vector.world(i).plugins]
        assert states == [mjfast.PluginState.ACTIVE, mjfast.PluginState.FAILED,
                          mjfast.PluginState.ACTIVE]
        vector.step(5)  # every world steps on; world 1 without its failed plugin
        assert [vector.world(i).step_count for i in range(3)] == [15, 8, 15]
        timestep = vector.model.opt.timestep
        np.testing.assert_allclose(vector.time, np.array([15, 8, 15]) * timestep)


def test_a_native_plugin_failing_in_every_world_is_raised_for_the_first(native: str) -> None:
    params = plugins_param({"type": "tests/ThrowingControl", "name": "t", "after": 2})
    with mjfast.VectorEnv(MODEL, 3, params, threads=2) as vector:
        with pytest.raises(mjfast.PluginError, match="control exploded") as raised:
            vector.step(10)
        assert raised.value.world_index == 0  # type: ignore[attr-defined]
        assert "failed too: worlds [1, 2]" in "".join(raised.value.__notes__)
        assert [vector.world(i).step_count for i in range(3)] == [3, 3, 3]


def test_worlds_step_in_parallel_on_the_pool(native: str) -> None:
    # Each world's pre_step meets the other world's: only two workers inside mj_step at once can.
    meet = {"type": "tests/Rendezvous", "name": "meet", "group": uuid.uuid4().hex,
            "parties": 2, "meetings": 20, "timeout_s": 10.0}
    with mjfast.VectorEnv(MODEL, 2, plugins_param(meet), threads=2) as vector:
        vector.step(40)
        for index in range(2):
            with vector.world(index).acquire_plugin("meet") as plugin:
                assert int(plugin.call("met")) == 20


def test_the_gil_is_released_while_only_native_plugins_run(native: str) -> None:
    # World 0's pre_step waits for a MujocoEnv stepped from a Python thread: that thread runs
    # Python code to call env.step, which it can only do while VectorEnv.step does not hold the
    # GIL. With the GIL held, the meeting would time out and the step raise PluginError.
    group = uuid.uuid4().hex
    meet = {"type": "tests/Rendezvous", "name": "meet", "group": group, "parties": 2,
            "meetings": 5, "timeout_s": 10.0}
    other = mjfast.MujocoEnv(MODEL, params=plugins_param(meet))
    started = threading.Event()
    errors: list[BaseException] = []

    def step_other() -> None:
        started.set()
        try:
            for _ in range(5):
                other.step(1)
        except BaseException as error:  # reported below
            errors.append(error)

    try:
        with mjfast.VectorEnv(MODEL, 1, plugins_param(meet), threads=1) as vector:
            thread = threading.Thread(target=step_other, daemon=True)
            thread.start()
            vector.step(5)
            thread.join(30)
            assert not thread.is_alive() and errors == []
            with vector.world(0).acquire_plugin("meet") as plugin:
                assert int(plugin.call("met")) == 5
    finally:
        other.close()


# -- reset and worlds ---------------------------------------------------------------------------

def test_reset_of_some_worlds_leaves_the_others(register: Any) -> None:
    class Resets(Probe):
        def reset(self) -> None:
            self.resets = getattr(self, "resets", 0) + 1

    name = register(Resets)
    with mjfast.VectorEnv(MODEL, 4, plugins_param({"type": name, "name": "r"}),
                          threads=2) as vector:
        initial = vector.qpos
        vector.step(20, np.full((4, NU), 1.5))
        moved = vector.qpos
        vector.reset([1, 3])
        qpos = vector.qpos
        np.testing.assert_array_equal(qpos[[1, 3]], initial[[1, 3]])
        np.testing.assert_array_equal(qpos[[0, 2]], moved[[0, 2]])
        timestep = vector.model.opt.timestep
        np.testing.assert_allclose(vector.time, [20 * timestep, 0, 20 * timestep, 0])
        assert [vector.world(i).step_count for i in range(4)] == [20, 0, 20, 0]
        resets = []
        for index in range(4):
            with vector.world(index).acquire_plugin("r") as plugin:
                resets.append(getattr(plugin, "resets", 0))
        assert resets == [0, 1, 0, 1]
        vector.reset(np.array([True, False, False, False]))
        assert vector.world(0).step_count == 0 and vector.world(2).step_count == 20
        vector.reset(seed=3)
        assert vector.seed == 3
        assert [vector.world(i).step_count for i in range(4)] == [0, 0, 0, 0]


def test_reset_indices_are_checked_before_anything_resets() -> None:
    with mjfast.VectorEnv(MODEL, 3, threads=1) as vector:
        vector.step(5)
        with pytest.raises(IndexError, match="world index 3 out of range for 3 worlds"):
            vector.reset([0, 3])
        with pytest.raises(ValueError, match=r"boolean mask of worlds must have shape \(3,\)"):
            vector.reset([True, False])
        with pytest.raises(TypeError, match="indices must be"):
            vector.reset(["a"])
        with pytest.raises(TypeError, match="seed must be an integer"):
            vector.reset(seed=1.5)  # type: ignore[arg-type]
        assert [vector.world(i).step_count for i in range(3)] == [5, 5, 5]


def test_world_offers_the_simulation_control_calls_on_its_own_world() -> None:
    with mjfast.VectorEnv(MODEL, 2, threads=2) as vector:
        world = vector.world(1)
        assert world.index == 1 and vector.world(-1).index == 1
        world.set_joint_state(positions={"j0": 0.25})
        assert vector.qpos[1][7] == 0.25 and vector.qpos[0][7] == 0.0
        assert world.get_joint_state(["j0"])["j0"].position.tolist() == [0.25]
        world.set_body_state({"box": {"pos": [0, 0, 1]}})
        assert world.get_body_state("box").pos.tolist() == [0, 0, 1]
        assert vector.world(0).get_body_state("box").pos.tolist() == [0.5, 0, 0.3]
        assert world.info()["step_count"] == 0
        world.reset()
        assert vector.qpos[1][7] == 0.0
        assert not hasattr(world, "step") and not hasattr(world, "start")
        with pytest.raises(IndexError, match="world index 2 out of range for 2 worlds"):
            vector.world(2)


def test_set_mocap_pose_on_a_world_moves_that_world_only() -> None:
    with mjfast.VectorEnv(MOCAP_XML, 2, threads=1) as vector:
        vector.world(1).set_mocap_pose("target", pos=[0, 0, 1.4])
        assert vector.world(1).data.mocap_pos[0].tolist() == [0, 0, 1.4]
        assert vector.world(0).data.mocap_pos[0].tolist() == [0, 0, 1]
        vector.step(400)
        assert vector.world(1).get_body_state("box").pos[2] == pytest.approx(1.4, abs=0.02)
        assert vector.world(0).get_body_state("box").pos[2] == pytest.approx(1.0, abs=0.02)
        with pytest.raises(KeyError, match="did you mean 'target'"):
            vector.world(0).set_mocap_pose("targt", pos=[0, 0, 1])
        assert vector.world(0).data.mocap_pos[0].tolist() == [0, 0, 1]


# -- bad input and misuse ----------------------------------------------------------------------

def test_wrong_ctrl_is_a_clear_error_and_steps_nothing() -> None:
    with mjfast.VectorEnv(MODEL, 3, threads=2) as vector:
        with pytest.raises(ValueError, match=r"shape \(num_envs, nu\) = \(3, 2\), got shape "
                                             r"\(3, 3\)"):
            vector.step(1, np.zeros((3, 3)))
        with pytest.raises(ValueError, match=r"got shape \(2,\)"):
            vector.step(1, [0.0, 0.0])
        with pytest.raises(TypeError, match=r"real numeric array.*got dtype <U1"):
            vector.step(1, [["a", "b"]] * 3)
        with pytest.raises(TypeError, match="got dtype complex128"):
            vector.step(1, np.zeros((3, 2), dtype=complex))
        with pytest.raises(ValueError, match="ctrl must be finite, got nan for world 2, "
                                             "actuator 1"):
            vector.step(1, [[0, 0], [0, 0], [0, np.nan]])
        for n, shown in [(-1, "-1"), (2**63, str(2**63)), (10**5000, "an integer of 16610 bits")]:
            with pytest.raises(ValueError) as raised:  # the words of MujocoEnv.step's
                vector.step(n)
            assert str(raised.value) == f"step(n) needs n >= 0 and <= 2**63-1, got {shown}"
        with pytest.raises(TypeError, match="step\\(n\\) takes an integer"):
            vector.step(1.5)  # type: ignore[arg-type]
        assert vector.time.tolist() == [0.0, 0.0, 0.0]
        assert vector.ctrl.tolist() == [[0.0, 0.0]] * 3
        vector.step(1, np.ones((3, 2), dtype=np.int32))  # any real dtype converts
        assert vector.ctrl.tolist() == [[1.0, 1.0]] * 3


def test_construction_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        mjfast.VectorEnv(MODEL, 0)
    with pytest.raises(TypeError, match="num_envs must be an integer, got str"):
        mjfast.VectorEnv(MODEL, "2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        mjfast.VectorEnv(MODEL, 2, threads=0)
    for threads in (2.0, "4", True):
        with pytest.raises(TypeError, match="threads must be an integer, got"):
            mjfast.VectorEnv(MODEL, 2, threads=threads)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed must be an integer, got str"):
        mjfast.VectorEnv(MODEL, 2, seed="x")  # type: ignore[arg-type]


def test_threads_are_capped_at_the_worlds_and_a_few_times_the_cpus() -> None:
    # In a child: a cap that fails would start a million threads.
    result = run_python("""
        import os
        import mjfast
        from test_vector_env import MODEL

        cpus = len(os.sched_getaffinity(0))
        for threads in (64, 10**6, 2**31, 2**80):
            with mjfast.VectorEnv(MODEL, 2, threads=threads) as vector:
                print(vector.threads)
        with mjfast.VectorEnv(MODEL, 8 * cpus + 1, threads=10**6) as vector:
            print(vector.threads == 4 * cpus)
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "2", "2", "2", "True"]


def test_an_impossible_number_of_worlds_is_a_memory_error_at_once() -> None:
    result = run_python("""
        import time
        import mjfast
        from test_vector_env import MODEL

        begun = time.monotonic()
        try:
            mjfast.VectorEnv(MODEL, 2**40)
        except MemoryError as error:
            print(time.monotonic() - begun < 10, error)
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("True num_envs=1099511627776 worlds need at least "), (
        result.stdout)
    assert "of memory; this machine has " in result.stdout


def test_world_indices_out_of_range_are_one_index_error() -> None:
    with mjfast.VectorEnv(MODEL, 3, threads=1) as vector:
        assert vector.world(-1).index == 2  # counted from the end, as a sequence is
        for index in (3, 5, -4, -5, 2**70):
            for call in (vector.world, vector.get_state):
                with pytest.raises(IndexError, match=rf"world index {index} out of range for 3 "
                                   r"worlds: expected 0\.\.2 \(or -3\.\.-1 from the end\)"):
                    call(index)
            if abs(index) < 2**63:
                with pytest.raises(IndexError, match=rf"world index {index} out of range"):
                    vector.reset([0, index])
        with pytest.raises(TypeError, match="world index must be an integer, got float"):
            vector.world(1.0)  # type: ignore[arg-type]


def test_close_from_another_thread_stops_a_running_step_at_a_step_boundary() -> None:
    result = run_python("""
        import threading, time
        import mjfast
        from test_vector_env import MODEL

        vector = mjfast.VectorEnv(MODEL, 3, threads=2)
        raised = []

        def step():
            try:
                vector.step(10**9)
            except mjfast.LogicError as error:
                raised.append(str(error))

        stepper = threading.Thread(target=step)
        stepper.start()
        deadline = time.monotonic() + 30
        while (min(vector.world(i).step_count for i in range(2)) == 0
               and time.monotonic() < deadline):
            time.sleep(0.01)
        begun = time.monotonic()
        vector.close()
        took = time.monotonic() - begun
        stepper.join(30)
        print(took < 2, not stepper.is_alive(), raised)
        print(vector.threads, repr(vector))
    """, timeout=90)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "True True ['the VectorEnv was closed during step()']", lines
    assert lines[1].startswith("0 <VectorEnv /mujoco_server num_envs=3 "), lines


def test_use_after_close_is_a_clear_error() -> None:
    vector = mjfast.VectorEnv(MODEL, 2, threads=2, seed=5)
    world = vector.world(0)
    vector.close()
    vector.close()  # idempotent
    for use in (lambda: vector.step(1), lambda: vector.reset(), lambda: vector.qpos,
                lambda: vector.time, lambda: vector.world(0), world.info,
                lambda: world.set_joint_state({"j0": 1.0})):
        with pytest.raises(mjfast.LogicError, match="the VectorEnv is closed"):
            use()
    assert vector.threads == 0
    assert "closed" in repr(vector)


def test_stepping_the_vector_from_its_own_plugin_is_refused_not_a_deadlock() -> None:
    result = run_python("""
        import mjfast
        from test_vector_env import MODEL
        from support import plugins_param

        class StepsTheVector(mjfast.MujocoPlugin):
            def load(self, model, data):
                return True
            def control_callback(self, model, data):
                VECTOR.step(1)

        mjfast.register_plugin("t/StepsTheVector", StepsTheVector)
        with mjfast.VectorEnv(MODEL, 2, plugins_param("t/StepsTheVector"), threads=2) as VECTOR:
            try:
                VECTOR.step(3)
            except mjfast.PluginError as error:
                print(type(error.__cause__).__name__, error.__cause__)
            VECTOR.step(3)  # the plugin failed in both worlds; stepping goes on
            print([VECTOR.world(i).step_count for i in range(2)])
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "LogicError VectorEnv.step() called from inside a plugin callback", lines
    assert lines[1] == "[4, 4]"


def test_ctrl_c_during_a_step_raises_keyboard_interrupt() -> None:
    result = run_python("""
        import os, signal, threading, time
        import mjfast
        from test_vector_env import MODEL
        from support import plugins_param

        started = threading.Event()

        class Started(mjfast.MujocoPlugin):
            def load(self, model, data):
                return True
            def control_callback(self, model, data):
                started.set()

        mjfast.register_plugin("t/Started", Started)
        params = plugins_param({"type": "t/Started", "name": "s"}, "mjfast/NoOp")

        def interrupt():
            started.wait(30)
            os.kill(os.getpid(), signal.SIGINT)

        with mjfast.VectorEnv(MODEL, 2, params, threads=2) as vector:
            threading.Thread(target=interrupt, daemon=True).start()
            begun = time.monotonic()
            try:
                vector.step(2**62)
            except KeyboardInterrupt:
                print("interrupted", time.monotonic() - begun < 30)
            steps = [vector.world(i).step_count for i in range(2)]
            states = [info.state.name for i in range(2) for info in vector.world(i).plugins]
            print(all(s > 0 for s in steps), states)
    """, timeout=90)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["interrupted True",
                                          "True ['ACTIVE', 'ACTIVE', 'ACTIVE', 'ACTIVE']"]


def test_an_unclosed_vector_env_does_not_hang_the_interpreter_exit() -> None:
    result = run_python("""
        import mjfast
        from test_vector_env import MODEL
        from support import plugins_param

        class Nothing(mjfast.MujocoPlugin):
            def load(self, model, data):
                return True
            def control_callback(self, model, data):
                pass

        mjfast.register_plugin("t/Nothing", Nothing)
        KEPT = mjfast.VectorEnv(MODEL, 3, plugins_param("t/Nothing", "mjfast/NoOp"), threads=2)
        KEPT.step(10)
        print("stepped")
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stepped\n"


# -- state (SPEC §20) -----------------------------------------------------------------------------

class Counter(mjfast.MujocoPlugin):
    """Counts its control calls; the count is its state."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.count = 0
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.count += 1

    def get_state(self) -> int:
        return self.count

    def set_state(self, value: int) -> None:
        self.count = value


def counts(vector: mjfast.VectorEnv) -> list[int]:
    found = []
    for index in range(vector.num_envs):
        with vector.world(index).acquire_plugin("c") as plugin:
            found.append(plugin.count)
    return found


@pytest.mark.parametrize("own_models", [False, True])
def test_state_of_one_world_restores_into_any_world_bit_for_bit(register: Any,
                                                                 own_models: bool) -> None:
    name = register(Counter)
    ctrls = commands(4, 3)
    with mjfast.VectorEnv(MODEL, 3, plugins_param({"type": name, "name": "c"}), threads=2,
                          own_models=own_models) as vector:
        vector.step(20, ctrls[0])
        saved = vector.get_state(1)
        assert isinstance(saved, mjfast.SimState)
        assert saved.step_count == 20 and saved.plugins == {"c": 20}
        vector.step(30, ctrls[1])
        expected = state_of(vector.world(1).data)
        assert counts(vector) == [50, 50, 50]
        # Back in world 1, and into world 2 (the same model): both step on exactly as world 1 did.
        vector.set_state(1, saved)
        vector.world(2).set_state(saved)
        assert counts(vector) == [50, 20, 20]
        assert [vector.world(i).step_count for i in range(3)] == [50, 20, 20]
        rows = ctrls[1].copy()
        rows[2] = rows[1]
        vector.step(30, rows)
        assert state_of(vector.world(1).data) == expected
        assert state_of(vector.world(2).data) == expected
        assert counts(vector) == [80, 50, 50]
        with pytest.raises(IndexError, match="world index 3 out of range"):
            vector.get_state(3)
        with pytest.raises(TypeError):
            vector.set_state(0, "not a state")  # type: ignore[arg-type]
        assert [vector.world(i).step_count for i in range(3)] == [80, 50, 50]


def test_a_world_state_restores_into_a_separate_env_and_back() -> None:
    with mjfast.VectorEnv(MODEL, 2, threads=2) as vector, mjfast.MujocoEnv(MODEL) as env:
        vector.step(25, commands(1, 2)[0])
        env.set_state(vector.get_state(0))
        assert state_of(env.data)[:4] == state_of(vector.world(0).data)[:4]
        env.step(10)
        vector.set_state(1, env.get_state())
        assert state_of(vector.world(1).data)[:2] == state_of(env.data)[:2]
        assert vector.world(1).step_count == 35
        other = mjfast.MujocoEnv("<mujoco><worldbody><body><freejoint/><geom size='1'/></body>"
                                 "</worldbody></mujoco>")
        with other, pytest.raises(ValueError, match="model"):
            vector.set_state(0, other.get_state())


def test_a_refused_close_from_a_worlds_plugin_stops_nothing() -> None:
    result = run_python("""
        import mjfast
        from test_vector_env import MODEL
        from support import plugins_param

        class ClosesTheVector(mjfast.MujocoPlugin):
            def load(self, model, data):
                return True
            def control_callback(self, model, data):
                VECTOR.close()

        mjfast.register_plugin("t/ClosesTheVector", ClosesTheVector)
        VECTOR = mjfast.VectorEnv(MODEL, 2, plugins_param("t/ClosesTheVector"), threads=2)
        try:
            VECTOR.step(3)
        except mjfast.PluginError as error:
            print(type(error.__cause__).__name__, error.__cause__)
        VECTOR.step(3)  # the vector was not closed, nor is its next step stopped
        print([VECTOR.world(i).step_count for i in range(2)])
        VECTOR.close()
        print(VECTOR.threads)
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "LogicError close() from inside a plugin callback of one of the VectorEnv's own worlds "
        "would deadlock", "[4, 4]", "0"]
