"""mjfast.gym (SPEC §21): MujocoGymEnv passes gymnasium's env checker, and make_vec's vector env
follows gymnasium's NEXT_STEP autoreset."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's renderer

import mujoco
import numpy as np
import pytest

import mjfast
from support import run_python

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import mjfast.gym  # noqa: E402
from mjfast.gym import MujocoGymEnv  # noqa: E402

# A pole on a hinge driven by a limited motor, a joint sensor, a camera.
XML = """
<mujoco model="pole">
  <option timestep="0.01"/>
  <worldbody>
    <light pos="0 0 3"/>
    <camera name="cam" pos="0 -2 1" xyaxes="1 0 0 0 0.5 1"/>
    <geom type="plane" size="2 2 .1"/>
    <body name="pole" pos="0 0 .5">
      <joint name="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 .5" size=".05" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="hinge" ctrlrange="-1 1" ctrllimited="true"/></actuator>
  <sensor><jointpos name="angle" joint="hinge"/></sensor>
</mujoco>
"""
ID = "mjfast_test/Pole-v0"
# gymnasium's checker warns about any unbounded Box, as it does for its own MuJoCo envs: an
# observation of qpos and qvel has no bounds.
UNBOUNDED = ".*infinity. This is probably too"


@pytest.fixture
def registered() -> Iterator[str]:
    mjfast.gym.register(ID, XML, observation=("qpos", "qvel", "angle", "time"), frame_skip=2,
                        truncate_steps=50)
    yield ID
    gymnasium.registry.pop(ID, None)


@pytest.fixture
def strict_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=UNBOUNDED)
        yield


@pytest.mark.parametrize("render_mode", [None, "rgb_array", "depth_array"])
def test_check_env_passes(registered: str, strict_warnings: None, render_mode: str | None
                          ) -> None:
    env = gymnasium.make(registered, render_mode=render_mode)
    try:
        check_env(env.unwrapped)  # with a spec: every declared render mode is made and rendered
    finally:
        env.close()


def test_spaces_and_observation_parts() -> None:
    model = mujoco.MjModel.from_xml_string(XML.replace(
        "</actuator>", '<motor name="free" joint="hinge"/></actuator>'))
    with MujocoGymEnv(model, observation=("qvel", "angle", "time", "qpos")) as env:
        assert env.action_space.dtype == np.float32
        assert env.action_space.low.tolist() == [-1.0, -np.inf]  # unlimited: any ctrl
        assert env.action_space.high.tolist() == [1.0, np.inf]
        env.mujoco_env.set_joint_state({"hinge": 0.3})
        env.mujoco_env.data.qvel[0] = 2.0
        mujoco.mj_forward(env.model, env.data)
        assert env._observation().tolist() == [2.0, 0.3, 0.0, 0.3]
        obs, *_ = env.step(np.zeros(2, dtype=np.float32))
        assert obs.tolist() == [env.qvel[0], env.sensordata[0], 0.01, env.qpos[0]]
    with pytest.raises(KeyError, match=r"observation part 'angel' is neither .* \(did you mean "
                                       r"'angle'"):
        MujocoGymEnv(XML, observation=("qpos", "angel"))


def test_reward_terminated_and_truncation() -> None:
    seen: list[tuple[Any, np.ndarray]] = []

    def reward(env: MujocoGymEnv, action: np.ndarray) -> float:
        seen.append((env, action))
        return -float(env.qpos[0]) ** 2

    with MujocoGymEnv(XML, reward=reward, terminated=lambda env, a: env.qpos[0] > 0.05,
                      truncate_steps=1000, frame_skip=5) as env:
        env.reset(seed=1)
        steps = 0
        while True:
            obs, r, terminated, truncated, info = env.step(np.array([1.0]))
            steps += 1
            assert r == pytest.approx(-obs[0] ** 2) and info == {}
            assert env.time == pytest.approx(steps * 5 * 0.01)  # frame_skip physics steps
            if terminated:
                break
        assert obs[0] > 0.05 and not truncated
        assert seen[-1][0] is env and seen[-1][1].tolist() == [1.0]
    with MujocoGymEnv(XML, truncate_steps=3) as env:
        env.reset()
        flags = [env.step(np.zeros(1))[3] for _ in range(3)]
        assert flags == [False, False, True]
        env.reset()
        assert env.episode_steps == 0


def test_plugins_run_and_reset_seeds_randomisation(register: Any) -> None:
    class Counter(mjfast.MujocoPlugin):
        def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
            self.calls = 0
            return True

        def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
            self.calls += 1

    kind = register(Counter)
    params = {"mujoco_server": {"MujocoPlugins": [{"type": kind, "name": "counter"}],
                                "randomize": [{"field": "body_mass", "scale": [0.5, 2.0]},
                                              {"field": "qpos", "std": 0.1}]}}
    with MujocoGymEnv(XML, params, frame_skip=4) as env:
        first, _ = env.reset(seed=3)
        mass = float(env.model.body_mass[1])
        env.step(np.zeros(1))
        with env.mujoco_env.acquire_plugin("counter") as plugin:
            assert plugin.calls == 4
        again, _ = env.reset(seed=3)
        assert again.tolist() == first.tolist() and env.model.body_mass[1] == mass
        env.reset(seed=4)
        assert env.model.body_mass[1] != mass


def test_wrong_actions_and_use_after_close() -> None:
    env = MujocoGymEnv(XML)
    env.reset()
    for bad in (np.zeros(2), np.zeros((1, 1)), 0.5):
        with pytest.raises(ValueError, match=r"action must have shape \(1,\)"):
            env.step(bad)
    assert env.time == 0.0  # nothing stepped
    env.close()
    env.close()  # idempotent, as gymnasium's checker expects
    for call in (lambda: env.step(np.zeros(1)), env.reset, env.render):
        with pytest.raises(mjfast.LogicError, match="the env is closed"):
            call()


NOT_FINITE_OR_NOT_REAL = [
    (np.nan, r"must be finite, got nan for {world}actuator 0 \(push\)"),
    (-np.inf, r"must be finite, got -inf for {world}actuator 0 \(push\)"),
    (0.5 + 1j, r"must hold real numbers, got dtype complex128"),
    ("a", r"must hold real numbers, got dtype <U"),
    (None, r"must hold real numbers, got dtype object"),
]


@pytest.mark.parametrize(("value", "message"), NOT_FINITE_OR_NOT_REAL)
def test_an_action_that_is_not_finite_or_not_real_is_refused(registered: str, value: Any,
                                                              message: str) -> None:
    """One validation for both gym envs (SPEC §18): nothing is stepped."""
    with MujocoGymEnv(XML) as env:
        env.reset()
        with pytest.raises(ValueError, match="action " + message.format(world="")):
            env.step(np.array([value]))
        assert env.time == 0.0
    envs = make_vec(registered, 2)
    try:
        envs.reset()
        with pytest.raises(ValueError, match="actions " + message.format(world="world 1, ")):
            envs.step(np.array([[0.0], [value]]))
        assert envs.vector_env.time.tolist() == [0.0, 0.0]
    finally:
        envs.close()


def test_headless_rendering_needs_no_mujoco_gl() -> None:
    """Without a display or MUJOCO_GL, rendering (the first frame, through mujoco.Renderer, too)
    uses EGL, as mjfast's own cameras do: check_env passes and the frames show the scene."""
    script = f"XML = {XML!r}\n" + textwrap.dedent("""
        import warnings
        import numpy as np
        from gymnasium.utils.env_checker import check_env
        import mjfast.gym

        warnings.simplefilter("ignore")  # the checker's advice on unbounded boxes
        env = mjfast.gym.MujocoGymEnv(XML, render_mode="rgb_array")
        check_env(env)
        env.reset(seed=0)
        first = env.render()
        env.step(np.array([1.0]))
        stepped = env.render()
        env.close()
        for frame in (first, stepped):
            print(frame.shape, len(np.unique(frame.reshape(-1, 3), axis=0)) > 10)
    """)
    child_env = {key: value for key, value in os.environ.items()
                 if key not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    child_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=child_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["(480, 640, 3) True"] * 2, result.stdout


def test_a_plugin_writing_ctrl_is_warned_about_once(register: Any, registered: str) -> None:
    """The agent's actions are overridden by a plugin that writes ctrl: said once per env."""
    class WritesCtrl(mjfast.MujocoPlugin):
        def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
            return True

        def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
            data.ctrl[:] = 0.25

    kind = register(WritesCtrl)
    params = {"mujoco_server": {"MujocoPlugins": [{"type": kind, "name": "writer"},
                                                  {"type": "mjfast/NoOp", "name": "idle"}]}}
    expected = (r"the env: one of its plugins \(writer, idle\) wrote ctrl during the step, "
                r"overriding the agent's action \(action \[0\.75\], ctrl after the step "
                r"\[0\.25\]\); said once per env")
    with MujocoGymEnv(XML, params) as env:
        env.reset(seed=0)
        with pytest.warns(mjfast.gym.ActionOverriddenWarning, match=expected) as caught:
            for _ in range(5):
                env.step(np.array([0.75]))
            env.reset()
            env.step(np.array([0.75]))
        assert len(caught) == 1
    with MujocoGymEnv(XML) as env:  # an env without such a plugin says nothing
        env.reset(seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            env.step(np.array([0.75]))
    envs = make_vec(registered, 2, params=params)
    try:
        envs.reset(seed=0)
        with pytest.warns(mjfast.gym.ActionOverriddenWarning,
                          match=r"world 0: one of its plugins \(writer, idle\) wrote") as caught:
            for _ in range(3):
                envs.step(np.full((2, 1), 0.75))
        assert len(caught) == 1
    finally:
        envs.close()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="frame_skip must be a positive integer"):
        MujocoGymEnv(XML, frame_skip=0)
    with pytest.raises(ValueError, match=r"render_mode must be one of .* \(did you mean "
                                         r"'rgb_array'"):
        MujocoGymEnv(XML, render_mode="rgb_aray")
    with pytest.raises(KeyError, match="no camera named 'front'"):
        MujocoGymEnv(XML, render_mode="rgb_array", camera="front")
    with pytest.raises(ValueError, match="unknown reset option"), MujocoGymEnv(XML) as env:
        env.reset(options={"keyfram": 0})


@pytest.mark.parametrize("render_mode", ["rgb_array", "depth_array"])
def test_render_shows_the_current_state(render_mode: str) -> None:
    """Each frame is the camera's picture of the state the step left (SPEC §10: equal to
    mujoco.Renderer's), right after a reset too."""
    params = {"mujoco_server": {"cameras": {"cam": {"width": 160, "height": 120}}}}
    with MujocoGymEnv(XML, params, frame_skip=3, render_mode=render_mode) as env:
        renderer = mujoco.Renderer(env.model, 120, 160)
        if render_mode == "depth_array":
            renderer.enable_depth_rendering()
        env.reset(seed=0)
        frames = []
        for step in range(4):
            if step:
                env.step(np.array([1.0]))
            frame = env.render()
            renderer.update_scene(env.data, camera="cam")
            np.testing.assert_array_equal(frame, renderer.render())
            frames.append(frame)
        renderer.close()
        assert not np.array_equal(frames[0], frames[-1])  # the pole moved
        # The camera rendered the steps (one per step, plus the one due after the reset).
        assert env.mujoco_env.statistics()["render"]["captures"] >= 3
    assert frames[0].shape == ((120, 160, 3) if render_mode == "rgb_array" else (120, 160))


def test_import_mjfast_does_not_import_gymnasium() -> None:
    result = run_python("""
        import sys
        import mjfast
        assert "gymnasium" not in sys.modules
        sys.modules["gymnasium"] = None  # as if it were not installed
        try:
            import mjfast.gym
        except ImportError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert "mjfast.gym needs gymnasium: pip install 'mjfast[gym]'" in result.stdout


# -- make_vec -------------------------------------------------------------------------------------

def make_vec(registered: str, num_envs: int = 3, **kwargs: Any) -> Any:
    return gymnasium.make_vec(registered, num_envs=num_envs,
                              vectorization_mode="vector_entry_point", **kwargs)


def test_make_vec_returns_a_vector_env_on_vectorenv(registered: str) -> None:
    envs = make_vec(registered, 3)
    try:
        assert isinstance(envs, gymnasium.vector.VectorEnv)
        assert isinstance(envs.unwrapped, mjfast.gym.MujocoVectorGymEnv)
        assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert envs.num_envs == 3
        assert envs.single_observation_space.shape == (4,)  # qpos, qvel, angle, time
        assert envs.action_space.shape == (3, 1)
        obs, info = envs.reset(seed=5)
        assert obs.shape == (3, 4) and info == {}
        obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert obs.shape == (3, 4) and rewards.shape == (3,)
        assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        assert obs[:, 3] == pytest.approx([0.02] * 3)  # frame_skip 2 steps of 10 ms
    finally:
        envs.close()


def test_make_vec_matches_single_envs(registered: str) -> None:
    """World i of the vector env and a MujocoGymEnv given the same actions agree."""
    envs = make_vec(registered, 2)
    single = gymnasium.make(registered).unwrapped
    try:
        envs.reset(seed=0)
        single.reset(seed=0)
        actions = np.array([[0.5], [-0.3]], dtype=np.float32)
        for _ in range(5):
            obs, *_ = envs.step(actions)
            expected, *_ = single.step(actions[1])
        np.testing.assert_allclose(obs[1], expected, rtol=0, atol=1e-12)
    finally:
        envs.close()
        single.close()


def test_next_step_autoreset(registered: str) -> None:
    """gymnasium's NEXT_STEP: the step after a terminal (or truncated) step of a world resets
    that world and returns its reset observation, reward 0, neither flag; the others step on."""
    envs = make_vec(registered, 3, terminated=lambda world, action: world.index == 1
                    and world.episode_steps >= 2, reward=lambda world, action: 1.0)
    try:
        envs.reset(seed=1)
        actions = np.zeros((3, 1), dtype=np.float32)
        envs.step(actions)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        assert terminated.tolist() == [False, True, False]
        assert rewards.tolist() == [1.0, 1.0, 1.0]
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        assert rewards.tolist() == [1.0, 0.0, 1.0]
        assert terminated.tolist() == [False, False, False]
        assert truncated.tolist() == [False, False, False]
        assert obs[1, 3] == 0.0 and obs[0, 3] == pytest.approx(0.06)  # world 1 starts over
        obs, *_ = envs.step(actions)
        assert obs[1, 3] == pytest.approx(0.02)
    finally:
        envs.close()


def test_truncation_autoresets_too(registered: str) -> None:
    envs = make_vec(registered, 2, truncate_steps=2)
    try:
        envs.reset(seed=1)
        actions = np.zeros((2, 1), dtype=np.float32)
        assert envs.step(actions)[3].tolist() == [False, False]
        assert envs.step(actions)[3].tolist() == [True, True]
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        assert truncated.tolist() == [False, False] and obs[:, 3].tolist() == [0.0, 0.0]
        assert rewards.tolist() == [0.0, 0.0] and terminated.tolist() == [False, False]
        assert envs.step(actions)[3].tolist() == [False, False]
    finally:
        envs.close()


def test_vector_wrong_actions_and_use_after_close(registered: str) -> None:
    envs = make_vec(registered, 2)
    envs.reset()
    for bad in (np.zeros(2), np.zeros((3, 1)), np.zeros((2, 2))):
        with pytest.raises(ValueError, match=r"actions must have shape \(2, 1\)"):
            envs.step(bad)
    envs.close()
    envs.close()
    with pytest.raises(mjfast.LogicError, match="the env is closed"):
        envs.step(np.zeros((2, 1)))
    with pytest.raises(mjfast.LogicError, match="the env is closed"):
        envs.reset()


def test_make_vec_steps_as_gymnasiums_own_sync_vector_env(registered: str) -> None:
    """The same episodes, step for step, as gymnasium's SyncVectorEnv (NEXT_STEP) of
    MujocoGymEnvs: worlds that end at different steps, by termination and by truncation."""
    kwargs: dict[str, Any] = {
        "observation": ("qpos", "qvel", "angle", "time"), "frame_skip": 2, "truncate_steps": 7,
        "reward": lambda env, action: float(env.qpos[0]),
        "terminated": lambda env, action: abs(float(env.qpos[0])) > 0.02}
    ours = make_vec(registered, 3, **kwargs)
    theirs = gymnasium.vector.SyncVectorEnv(
        [lambda: MujocoGymEnv(XML, **kwargs) for _ in range(3)],
        autoreset_mode=AutoresetMode.NEXT_STEP)
    try:
        np.testing.assert_array_equal(ours.reset(seed=2)[0], theirs.reset(seed=2)[0])
        pushes = np.array([[1.0], [0.3], [-0.6]], dtype=np.float32)  # end at different steps
        ended = np.zeros(3, dtype=int)
        for _ in range(20):
            mine, expected = ours.step(pushes), theirs.step(pushes)
            for got, want in zip(mine[:4], expected[:4], strict=True):
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
            ended += mine[2] | mine[3]
        assert (ended >= 1).all()  # every world ended (and was reset) at least once
    finally:
        ours.close()
        theirs.close()
