"""Domain randomisation (SPEC §21, mjfast.sim.randomize): the `randomize` terms drawn at every
reset of a MujocoEnv and of each VectorEnv world, from a generator seeded per world, onto the
world's own model; and examples/vector_sweep.py, which randomises 64 worlds."""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from support import run_python

# A box on a vertical slide pushed up by a motor (its acceleration tells the mass the simulation
# uses), a free ball, a hinge with damping, a position servo, a light.
XML = """
<mujoco model="randomize">
  <option timestep="0.002"/>
  <worldbody>
    <light name="lamp" diffuse="0.5 0.5 0.5" pos="0 0 3"/>
    <body name="box">
      <joint name="lift" type="slide" axis="0 0 1"/>
      <geom name="box_geom" type="box" size=".1 .1 .1" mass="1" rgba="0.5 0.5 0.5 1"
            friction="1 0.005 0.0001" contype="0" conaffinity="0"/>
    </body>
    <body name="ball" pos="1 0 1">
      <freejoint name="float"/>
      <geom name="ball_geom" size=".1" mass="2" contype="0" conaffinity="0"/>
    </body>
    <body name="arm" pos="-1 0 0">
      <joint name="hinge" axis="0 1 0" damping="0.5" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0 0 .3" size=".02" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="lift" gear="1"/>
    <position name="servo" joint="hinge" kp="10"/>
  </actuator>
</mujoco>
"""


def params(terms: list[dict[str, Any]], seed: int | None = 1, **extra: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"randomize": terms, **extra}
    if seed is not None:
        namespace["seed"] = seed
    return {"mujoco_server": namespace}


def body(env: mjfast.MujocoEnv, name: str) -> int:
    return mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, name)


MASS = {"field": "body_mass", "names": ["box"], "scale": [0.5, 2.0]}


def test_draws_stay_in_bounds(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([
        MASS,
        {"field": "geom_friction", "names": ["box_geom"], "add": [-0.5, 0.5]},
        {"field": "dof_damping", "names": ["hinge"], "scale": [0.1, 10.0], "dist": "loguniform"},
        {"field": "geom_rgba", "add": [-1.0, 1.0]},
        {"field": "light_diffuse", "scale": [0.0, 3.0]},
        {"field": "body_inertia", "names": ["ball"], "scale": [0.8, 1.2]},
        {"field": "dof_armature", "add": [0.0, 0.1]}]))
    nominal = mujoco.MjModel.from_xml_string(XML)
    box, ball = body(env, "box"), body(env, "ball")
    masses, dampings = [], []
    for _ in range(200):
        env.reset()
        model = env.model
        masses.append(model.body_mass[box])
        dampings.append(model.dof_damping[7])  # the hinge's dof
        assert 0.5 <= model.body_mass[box] <= 2.0
        assert 0.5 <= model.geom_friction[0, 0] <= 1.5
        assert model.geom_friction[0, 1:].tolist() == [0.005, 0.0001]  # sliding friction only
        assert np.all((model.geom_rgba >= 0.0) & (model.geom_rgba <= 1.0))  # clipped: a colour
        assert 0.0 <= model.light_diffuse[0, 0] <= 1.5
        ratio = model.body_inertia[ball] / nominal.body_inertia[ball]
        assert 0.8 <= ratio[0] <= 1.2 and np.allclose(ratio, ratio[0])  # one draw per body
        assert np.all(model.dof_armature - nominal.dof_armature <= 0.1 + 1e-12)
        assert model.body_mass[ball] == nominal.body_mass[ball]  # only the named body is drawn
    assert min(masses) < 0.7 and max(masses) > 1.8  # the range is covered, not a constant
    assert min(dampings) >= 0.05 and max(dampings) <= 5.0  # 0.5 x [0.1, 10]
    # loguniform: about as many draws below the geometric mean (0.5) as above it.
    assert 60 < sum(d < 0.5 for d in dampings) < 140


def test_same_seed_same_draws_and_reset_seed_reseeds(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    terms = [MASS, {"field": "qpos", "std": 0.1}]
    first = make_env(XML, params=params(terms, seed=7))
    second = make_env(XML, params=params(terms, seed=7))
    other = make_env(XML, params=params(terms, seed=8))
    assert first.info()["randomization"] == second.info()["randomization"]
    assert first.info()["randomization"] != other.info()["randomization"]
    np.testing.assert_array_equal(first.data.qpos, second.data.qpos)
    for _ in range(3):
        first.reset()
        second.reset()
        assert first.model.body_mass[1] == second.model.body_mass[1]
    first.reset(seed=42)
    drawn = first.info()["randomization"]
    qpos = first.data.qpos.copy()
    first.reset()
    assert first.info()["randomization"] != drawn  # the generator goes on
    first.reset(seed=42)
    assert first.info()["randomization"] == drawn
    np.testing.assert_array_equal(first.data.qpos, qpos)
    other.reset(seed=42)  # the seed, not the env's history, decides
    assert other.info()["randomization"] == drawn


def test_each_env_owns_its_model(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    user_model = mujoco.MjModel.from_xml_string(XML)
    nominal = user_model.body_mass.copy()
    first = make_env(user_model, params=params([MASS], seed=1))
    second = make_env(user_model, params=params([MASS], seed=2))
    assert first.model is not user_model and second.model is not first.model
    np.testing.assert_array_equal(user_model.body_mass, nominal)  # the caller's model untouched
    assert first.model.body_mass[1] != second.model.body_mass[1]
    first.reset()
    np.testing.assert_array_equal(user_model.body_mass, nominal)
    # Without model terms the env keeps using the caller's model, as before.
    plain = make_env(user_model, params=params([{"field": "qvel", "std": 0.1}]))
    assert plain.model is user_model


def test_draws_never_compound(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([
        {"field": "body_mass", "names": ["box"], "scale": [2.0, 2.0]},
        {"field": "geom_friction", "names": ["box_geom"], "add": [0.25, 0.25]}]))
    for _ in range(5):
        env.reset()
        assert env.model.body_mass[body(env, "box")] == pytest.approx(2.0)
        assert env.model.geom_friction[0, 0] == pytest.approx(1.25)


def push_acceleration(env: mjfast.MujocoEnv) -> float:
    env.data.ctrl[0] = 20.0
    env.step(1)
    return float(env.data.qacc[0])


def test_the_simulation_uses_the_drawn_mass(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    """mj_setConst after the draw: MuJoCo precomputes a simple body's mass (body_subtreemass and
    the dof's inverse weight), so a mass written without it would be half used."""
    plain = make_env(XML)
    heavy = make_env(XML, params=params([
        {"field": "body_mass", "names": ["box"], "scale": [2.0, 2.0]}]))
    gravity = 9.81
    assert push_acceleration(plain) == pytest.approx(20.0 / 1.0 - gravity, rel=1e-6)
    assert push_acceleration(heavy) == pytest.approx(20.0 / 2.0 - gravity, rel=1e-6)
    heavy.reset()
    assert push_acceleration(heavy) == pytest.approx(20.0 / 2.0 - gravity, rel=1e-6)
    assert heavy.model.body_subtreemass[body(heavy, "box")] == pytest.approx(2.0)


def test_the_servo_bias_follows_a_drawn_gain(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([{"field": "actuator_gain", "scale": [0.5, 2.0]}]))
    for _ in range(5):
        env.reset()
        gain = env.model.actuator_gainprm[1, 0]
        assert 5.0 <= gain <= 20.0
        assert env.model.actuator_biasprm[1, 1] == -gain  # still a position servo
        assert env.model.actuator_biasprm[0, 1] == 0.0  # the motor has no bias to follow


def test_state_noise(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([{"field": "qpos", "names": ["hinge", "float"],
                                        "std": 0.2},
                                       {"field": "qvel", "names": ["lift"], "std": 0.5}]))
    nominal = mujoco.MjModel.from_xml_string(XML).qpos0
    hinge, lift = [], []
    for _ in range(300):
        env.reset()
        qpos = env.data.qpos
        assert qpos[0] == nominal[0]  # the slide is not named by the qpos term
        assert np.linalg.norm(qpos[4:8]) == pytest.approx(1.0)  # still a unit quaternion
        hinge.append(qpos[8] - nominal[8])
        lift.append(env.data.qvel[0])
        record = env.info()["randomization"]
        assert record[0]["noise"]["hinge"] == pytest.approx(qpos[8] - nominal[8])
        assert record[0]["noise"]["float"][:3] == pytest.approx(list(qpos[1:4] - nominal[1:4]))
        assert record[1] == {"term": 1, "field": "qvel", "noise": {"lift": env.data.qvel[0]}}
    assert np.std(hinge) == pytest.approx(0.2, rel=0.2)
    assert np.std(lift) == pytest.approx(0.5, rel=0.2)
    # Explicit joint positions win over the noise; the noise applies to a keyframe reset too.
    env.reset(joint_positions={"hinge": 0.3})
    assert env.data.qpos[8] == 0.3


def test_info_reports_the_last_draw(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([MASS, {"field": "actuator_gain", "names": ["servo"],
                                              "add": [1.0, 2.0]},
                                       {"field": "geom_friction", "names": ["ball_geom"],
                                        "scale": [1.0, 1.0]}]))
    env.reset()
    record = env.info()["randomization"]
    assert record == [
        {"term": 0, "field": "body_mass", "values": {"box": env.model.body_mass[1]}},
        {"term": 1, "field": "actuator_gain",
         "values": {"servo": env.model.actuator_gainprm[1, 0]}},
        {"term": 2, "field": "geom_friction",
         "values": {"ball_geom": env.model.geom_friction[1, 0]}}]
    record[0]["values"]["box"] = -1.0  # a copy: the env's record is not the caller's
    assert env.info()["randomization"][0]["values"]["box"] == env.model.body_mass[1]
    assert make_env(XML).info()["randomization"] == []


@pytest.mark.parametrize(("terms", "message"), [
    ([MASS, {"field": "body_mass", "names": ["boxx"], "scale": [1, 2]}],
     "/mujoco_server/randomize[1] (body_mass): no body named 'boxx' (did you mean 'box'?)"),
    ([{"field": "body_mas", "scale": [1, 2]}],
     "randomize[0]: field 'body_mas' is not randomisable (did you mean 'body_mass'"),
    ([MASS, MASS, {"field": "body_mass", "scale": [2, 1]}],
     "randomize[2] (body_mass): scale must be [lo, hi] with lo <= hi, got [2, 1]"),
    ([{"field": "body_mass", "scael": [1, 2]}],
     "randomize[0]: unknown key 'scael' for field 'body_mass' (did you mean 'scale'?)"),
    ([{"field": "body_mass"}], "randomize[0] (body_mass): expected scale: [lo, hi] or add"),
    ([{"field": "body_mass", "scale": [-1, 2]}], "scale must be [lo, hi] with lo >= 0"),
    ([{"field": "body_mass", "add": [-5, 2]}], "add [-5.0, 2.0] could make a value negative"),
    ([{"field": "dof_damping", "scale": [0, 2], "dist": "loguniform"}],
     "a loguniform scale needs 0 < lo <= hi"),
    ([{"field": "dof_damping", "scale": [1, 2], "dist": "gauss"}], "dist must be one of"),
    ([{"field": "qpos", "std": -1}], "randomize[0] (qpos): std must be a finite number >= 0"),
    ([{"field": "qvel", "names": ["hinj"], "std": 1}],
     "no joint named 'hinj' (did you mean 'hinge'?)"),
    ([{"field": "actuator_gain", "names": ["servo", "servo"], "scale": [1, 2]}],
     "names lists the actuator 'servo' twice"),
    ([{"field": "body_mass", "scale": ["a", 2]}], "scale must be [lo, hi], two finite numbers"),
    ([{"field": "body_mass", "scale": [1e300, 1e300]},
      {"field": "body_mass", "scale": [1e10, 1e10]}],
     "randomize[1] (body_mass): its draws could reach inf for 'box' (with the terms before it); "
     "expected scale and add that keep every value finite"),
    ([{"field": "body_inertia", "names": ["ball"], "scale": [1e306, 1e306]},
      {"field": "body_inertia", "names": ["ball"], "scale": [1e5, 1e5]}],
     "randomize[1] (body_inertia): its draws could reach inf for 'ball'"),
    ([{"field": "dof_damping", "scale": [1e200, 1e200]}, {"field": "dof_damping", "add": [1, 2]},
      {"field": "dof_damping", "scale": [1e200, 1e200]}],
     "randomize[2] (dof_damping): its draws could reach inf for 'hinge'"),
    ([{"field": "body_mass", "names": ["box"], "scale": [0, 2]}],
     "randomize[0] (body_mass): its draws could leave the moving body 'box' with no mass "
     "(MuJoCo requires a moving body's mass > 1e-15)"),
    ([{"field": "body_inertia", "scale": [1e-20, 1]}],
     "randomize[0] (body_inertia): its draws could leave the moving body 'box' with no inertia"),
    ("body_mass", "/mujoco_server/randomize must be a list of terms"),
])
def test_a_bad_term_is_a_config_error_naming_it(
        make_env: Callable[..., mjfast.MujocoEnv], terms: Any, message: str) -> None:
    with pytest.raises(mjfast.ConfigError, match=re.escape(message)):
        make_env(XML, params=params(terms))


def test_a_draw_that_is_not_finite_is_a_config_error_and_changes_nothing(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    """A nominal value edited after the terms were checked (set_geom_properties) can still make
    a draw overflow: the reset refuses it, naming the term, with the model as it was."""
    term = {"field": "geom_friction", "names": ["box_geom"], "scale": [1e300, 1e300]}
    env = make_env(XML, params=params([term]))
    geom = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "box_geom")
    assert env.model.geom_friction[geom, 0] == 1e300
    env.set_geom_properties("box_geom", friction=[1e10, 0.005, 0.0001])
    before = env.model.geom_friction.copy()
    with pytest.raises(mjfast.ConfigError, match=re.escape(
            "/mujoco_server/randomize[0] (geom_friction): it drew inf for 'box_geom'; expected "
            "finite values (the model is unchanged)")):
        env.reset()
    np.testing.assert_array_equal(env.model.geom_friction, before)


def test_a_bad_seed_is_refused_and_changes_nothing(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    with pytest.raises(mjfast.ConfigError, match="/mujoco_server/seed must be a non-negative"):
        make_env(XML, params=params([MASS], seed=-3))
    env = make_env(XML, params=params([MASS], seed=5))
    control = make_env(XML, params=params([MASS], seed=5))
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(mjfast.ConfigError, match="seed must be a non-negative integer"):
            env.reset(seed=bad)
    assert env.model.body_mass[1] == control.model.body_mass[1]
    env.reset()
    control.reset()
    assert env.model.body_mass[1] == control.model.body_mass[1]  # the generator did not move


def test_a_bad_reload_changes_nothing(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([MASS], seed=5))
    control = make_env(XML, params=params([MASS], seed=5))
    drawn = env.info()["randomization"]
    env.params.set("/mujoco_server/randomize", [MASS, {"field": "body_mass", "names": ["boxx"],
                                                       "scale": [1, 2]}])
    with pytest.raises(mjfast.ConfigError, match=r"randomize\[1\] \(body_mass\): no body named"):
        env.reload()
    assert env.info()["randomization"] == drawn
    assert env.model.body_mass[1] == drawn[0]["values"]["box"]
    env.reset()
    control.reset()
    assert env.model.body_mass[1] == control.model.body_mass[1]
    # A good reload draws again, seeded anew from the parameter as at construction.
    env.params.set("/mujoco_server/randomize", [MASS])
    env.reload()
    assert env.info()["randomization"] == drawn


def test_a_geometry_edit_becomes_the_nominal_value(
        make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(XML, params=params([{"field": "geom_friction", "names": ["box_geom"],
                                        "scale": [2.0, 2.0]}]))
    assert env.model.geom_friction[0, 0] == pytest.approx(2.0)
    env.set_geom_properties("box_geom", friction=[0.3, 0.005, 0.0001])
    env.reset()
    assert env.model.geom_friction[0, 0] == pytest.approx(0.6)


class MassReader(mjfast.MujocoPlugin):
    """Records the box's mass that it sees at load and at every reset."""

    seen: list[tuple[str, float]]

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.model = model  # the env's own model: a draw changes it in place
        self.seen = [("load", float(model.body_mass[1]))]
        return True

    def reset(self) -> None:
        self.seen.append(("reset", float(self.model.body_mass[1])))


def test_plugins_see_the_drawn_model(make_env: Callable[..., mjfast.MujocoEnv],
                                     register: Callable[..., str]) -> None:
    """Drawn before the plugins load and before their reset(): a plugin that caches a model value
    reads the drawn one if it reads it again in reset()."""
    kind = register(MassReader)
    env = make_env(XML, params=params([MASS], MujocoPlugins=[{"type": kind, "name": "reader"}]))
    first = float(env.model.body_mass[1])
    env.reset()
    second = float(env.model.body_mass[1])
    assert first != second
    with env.acquire_plugin("reader") as plugin:
        assert plugin.seen == [("load", first), ("reset", second)]


def test_randomize_and_seed_are_read(make_env: Callable[..., mjfast.MujocoEnv],
                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mjfast.env"):
        make_env(XML, params=params([MASS], seed=3))
    assert "not read by mjfast" not in caplog.text



# -- VectorEnv: every world draws from its own generator onto its own model ----------------------

@pytest.fixture
def vectors() -> Iterator[list[mjfast.VectorEnv]]:
    made: list[mjfast.VectorEnv] = []
    yield made
    for vector in made:
        vector.close()


def make_vector(vectors: list[mjfast.VectorEnv], terms: list[dict[str, Any]], num_envs: int = 4,
                **kwargs: Any) -> mjfast.VectorEnv:
    vector = mjfast.VectorEnv(XML, num_envs, params(terms, seed=None), threads=2, **kwargs)
    vectors.append(vector)
    return vector


def box_masses(vector: mjfast.VectorEnv) -> list[float]:
    return [float(model.body_mass[1]) for model in vector.models]


def test_vector_worlds_own_their_models(vectors: list[mjfast.VectorEnv]) -> None:
    vector = make_vector(vectors, [MASS], seed=10)
    models = vector.models
    assert vector.own_models and len({id(model) for model in models}) == 4
    assert vector.model.body_mass[1] == 1.0  # the nominal model is never drawn on
    masses = box_masses(vector)
    assert len(set(masses)) == 4 and all(0.5 <= mass <= 2.0 for mass in masses)
    for index, mass in enumerate(masses):
        assert vector.world(index).info()["randomization"] == [
            {"term": 0, "field": "body_mass", "values": {"box": mass}}]
    # Without model terms the worlds share the one model, as before.
    shared = make_vector(vectors, [{"field": "qvel", "std": 0.1}], seed=10)
    assert not shared.own_models and len({id(model) for model in shared.models}) == 1


def test_vector_world_i_draws_from_seed_plus_i(vectors: list[mjfast.VectorEnv],
                                               make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    terms = [MASS, {"field": "qpos", "std": 0.1}]
    vector = make_vector(vectors, terms, seed=10)
    again = make_vector(vectors, terms, seed=10)
    assert box_masses(vector) == box_masses(again)
    np.testing.assert_array_equal(vector.qpos, again.qpos)
    for index in range(4):  # world i is the MujocoEnv seeded with 10 + i
        single = make_env(XML, params=params(terms, seed=10 + index))
        assert single.model.body_mass[1] == box_masses(vector)[index]
        np.testing.assert_array_equal(single.data.qpos, vector.qpos[index])
    # The seed parameter seeds the worlds where the VectorEnv has none.
    by_parameter = mjfast.VectorEnv(XML, 4, params(terms, seed=10), threads=2)
    vectors.append(by_parameter)
    assert box_masses(by_parameter) == box_masses(vector)
    vector.reset(seed=20)
    again.reset([2], seed=20)
    assert box_masses(vector)[2] == box_masses(again)[2]
    assert box_masses(vector)[0] != box_masses(again)[0]  # world 0 of `again` was not reset
    vector.world(1).reset(seed=21)
    single = make_env(XML, params=params(terms, seed=21))
    assert box_masses(vector)[1] == single.model.body_mass[1]  # a world's own seed, exactly


def test_vector_draws_never_compound_and_reach_the_simulation(
        vectors: list[mjfast.VectorEnv]) -> None:
    vector = make_vector(vectors, [{"field": "body_mass", "names": ["box"],
                                    "scale": [2.0, 4.0]}], seed=3)
    for _ in range(3):
        vector.reset()
        masses = box_masses(vector)
        assert all(2.0 <= mass <= 4.0 for mass in masses)
    ctrl = np.zeros((4, 2))
    ctrl[:, 0] = 20.0
    vector.step(1, ctrl)
    accelerations = [float(vector.world(i).data.qacc[0]) for i in range(4)]
    assert accelerations == pytest.approx([20.0 / mass - 9.81 for mass in masses], rel=1e-6)


def test_vector_bad_term_is_a_config_error(vectors: list[mjfast.VectorEnv]) -> None:
    with pytest.raises(mjfast.ConfigError, match=re.escape(
            "randomize[1] (body_mass): no body named 'boxx' (did you mean 'box'?)")):
        make_vector(vectors, [MASS, {"field": "body_mass", "names": ["boxx"], "scale": [1, 2]}])


def test_the_vector_sweep_example(tmp_path: Path) -> None:
    """examples/vector_sweep.py with a few worlds: its table and plot (docs/vector_sweep.png is
    the figure of the full 64-world run)."""
    outputs = []
    for run in ("first", "again"):
        out = tmp_path / run
        result = run_python(f"""
            import runpy, sys
            sys.argv = ["vector_sweep.py", "--worlds", "6", "--duration", "0.2", "--seed", "4",
                        "--threads", "2", "--out", {str(out)!r}]
            runpy.run_path("examples/vector_sweep.py", run_name="__main__")
        """, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "vector_sweep: 6 worlds, final RMS error" in result.stdout
        with (out / "vector_sweep.csv").open() as table:
            rows = list(csv.DictReader(table))
        outputs.append(rows)
        assert [int(row["world"]) for row in rows] == list(range(6))
        assert all(0.5 <= float(row["mass_factor"]) <= 2.0 for row in rows)
        assert len({row["mass_factor"] for row in rows}) == 6  # each world its own draw
        assert all(0 < float(row["final_error_rad"]) < 1.0 for row in rows)
        assert all(float(row["time"]) == pytest.approx(0.2) for row in rows)
        assert (out / "vector_sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert outputs[0] == outputs[1]  # seeded: the same draws and the same results
