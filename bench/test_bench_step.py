"""Stepping benchmarks: mjfast against bare MuJoCo on the same model, in the same run.

Three groups per model: stepping with no callbacks, with a do-nothing Python control callback,
and with a Python PD law. Each benchmark checks its result; conftest.py prints and gates ratios.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast

# The groups and variants conftest.py's ratio table knows.
GROUP_NO_PLUGINS = "no plugins"
GROUP_NOOP = "do-nothing control callback"
GROUP_PD = "Python PD law"

NOOP_TYPE = "mjfast_bench/DoNothing"
PD_TYPE = "mjfast_bench/PoseHold"
PD_GAINS = {"arm7": (100.0, 10.0), "humanoid": (2.0, 0.2)}


@dataclasses.dataclass(frozen=True)
class PDSetup:
    """A joint-space PD law's gains, target and control range for a model's actuated joints."""

    kp: float
    kd: float
    qpos_address: np.ndarray
    dof_address: np.ndarray
    target: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, model: mujoco.MjModel, kp: float, kd: float) -> PDSetup:
        joints = model.actuator_trnid[:, 0]
        qpos_address = model.jnt_qposadr[joints].copy()
        # A pose away from the initial one, so that the law works every step.
        target = model.qpos0[qpos_address] + np.linspace(-0.5, 0.5, len(joints))
        return cls(kp, kd, qpos_address, model.jnt_dofadr[joints].copy(), target,
                   model.actuator_ctrlrange[:, 0].copy(), model.actuator_ctrlrange[:, 1].copy())

    @classmethod
    def for_bench(cls, bench_model: Any) -> PDSetup:
        return cls.of(bench_model.model, *PD_GAINS[bench_model.name])


class PDLaw:
    """The law both PD variants run, as a bound method: written once, measured twice."""

    pd: PDSetup

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        pd = self.pd
        error = pd.target - data.qpos[pd.qpos_address]
        data.ctrl[:] = np.clip(pd.kp * error - pd.kd * data.qvel[pd.dof_address],
                               pd.low, pd.high)


class PDPlugin(PDLaw, mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.pd = PDSetup.of(model, float(self.config["kp"]), float(self.config["kd"]))
        return True


class DoNothing(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        pass


def do_nothing(model: mujoco.MjModel, data: mujoco.MjData) -> None:
    pass


@pytest.fixture(scope="module", autouse=True)
def bench_plugins() -> Iterator[None]:
    mjfast.register_plugin(NOOP_TYPE, DoNothing)
    mjfast.register_plugin(PD_TYPE, PDPlugin)
    yield
    mjfast.unregister_plugin(NOOP_TYPE)
    mjfast.unregister_plugin(PD_TYPE)


def resetter(model: mujoco.MjModel, data: mujoco.MjData) -> Callable[[], None]:
    """pedantic's untimed setup: every round starts from the model's initial state."""
    def reset() -> None:
        mujoco.mj_resetData(model, data)
    return reset


def assert_stepped_one_round(bench_model: Any, model: mujoco.MjModel,
                             data: mujoco.MjData) -> None:
    assert data.time == pytest.approx(bench_model.steps * model.opt.timestep, rel=1e-9)


def uninstall_hooks() -> None:
    mujoco.set_mjcb_control(None)
    mujoco.set_mjcb_passive(None)


def env_of(bench_model: Any, plugins: list[dict[str, Any]]) -> mjfast.MujocoEnv:
    # Created inside the benchmark, after the autouse fixture has (re)installed the hooks.
    return mjfast.MujocoEnv(bench_model.model, params={"MujocoPlugins": plugins})


def calls_of(env: mjfast.MujocoEnv, callback: str) -> int:
    (plugin,) = env.statistics()["plugins"]
    assert plugin["state"] is mjfast.PluginState.ACTIVE, plugin["failure"]
    return int(plugin["callbacks"][callback]["calls"])


# -- bare MuJoCo ----------------------------------------------------------------------------------


BARE_VARIANT = {"installed": "bare_hooked", "uninstalled": "bare_unhooked"}


@pytest.mark.parametrize("group", [GROUP_NO_PLUGINS, GROUP_NOOP])
@pytest.mark.parametrize("hooks", ["installed", "uninstalled"])
def test_bare_mj_step(benchmark: Any, record: Any, bench_model: Any, group: str,
                      hooks: str) -> None:
    """mujoco.mj_step(m, d, nstep=N) on a pair no env owns: the baseline.

    With mjfast's trampolines installed (the state of anyone using mjfast) each step calls into
    them and they find no env for the pair; uninstalled is MuJoCo's stock state.
    """
    model, data = bench_model.model, bench_model.fresh_data()
    if hooks == "uninstalled":
        uninstall_hooks()
    record(benchmark, bench_model, group, BARE_VARIANT[hooks],
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps), resetter(model, data))
    assert_stepped_one_round(bench_model, model, data)


# -- no plugins -----------------------------------------------------------------------------------


def test_env_step_no_plugins(benchmark: Any, record: Any, bench_model: Any) -> None:
    with env_of(bench_model, []) as env:
        rounds = record(benchmark, bench_model, GROUP_NO_PLUGINS, "env",
                        lambda: env.step(bench_model.steps), resetter(env.model, env.data))
        assert_stepped_one_round(bench_model, env.model, env.data)
        assert env.statistics()["env"]["steps"] == rounds * bench_model.steps


# -- a do-nothing Python control callback ---------------------------------------------------------


def test_mjcb_control_do_nothing(benchmark: Any, record: Any,
                                 bench_model: Any) -> None:
    """MuJoCo's own way: a Python function in mjcb_control (and nothing in mjcb_passive)."""
    model, data = bench_model.model, bench_model.fresh_data()
    uninstall_hooks()  # conftest's mjfast_hooks puts mjfast's back afterwards
    mujoco.set_mjcb_control(do_nothing)
    record(benchmark, bench_model, GROUP_NOOP, "mjcb",
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps), resetter(model, data))
    assert mujoco.get_mjcb_control() is do_nothing
    assert_stepped_one_round(bench_model, model, data)


def test_env_step_do_nothing_plugin(benchmark: Any, record: Any,
                                    bench_model: Any) -> None:
    with env_of(bench_model, [{"type": NOOP_TYPE}]) as env:
        rounds = record(benchmark, bench_model, GROUP_NOOP, "env",
                        lambda: env.step(bench_model.steps), resetter(env.model, env.data))
        assert_stepped_one_round(bench_model, env.model, env.data)
        # The plugin was called once per step, warm-up round included.
        assert calls_of(env, "control_callback") == rounds * bench_model.steps


# -- a Python PD law ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pd_reference(bench_model: Any) -> np.ndarray:
    """qpos after N steps of the PD law through mjcb_control, computed once, untimed."""
    law = PDLaw()
    law.pd = PDSetup.for_bench(bench_model)
    data = bench_model.fresh_data()
    uninstall_hooks()
    try:
        mujoco.set_mjcb_control(law.control_callback)
        mujoco.mj_step(bench_model.model, data, nstep=bench_model.steps)
    finally:
        uninstall_hooks()
        mjfast.install_hooks()
    pd = law.pd
    # The law did work: the held joints moved towards the target.
    initial_error = np.abs(pd.target - bench_model.model.qpos0[pd.qpos_address]).sum()
    assert np.abs(pd.target - data.qpos[pd.qpos_address]).sum() < initial_error
    return data.qpos.copy()


def test_mjcb_control_pd(benchmark: Any, record: Any, bench_model: Any,
                         pd_reference: np.ndarray) -> None:
    model, data = bench_model.model, bench_model.fresh_data()
    law = PDLaw()
    law.pd = PDSetup.for_bench(bench_model)
    uninstall_hooks()
    mujoco.set_mjcb_control(law.control_callback)
    record(benchmark, bench_model, GROUP_PD, "mjcb",
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps), resetter(model, data))
    assert_stepped_one_round(bench_model, model, data)
    np.testing.assert_allclose(data.qpos, pd_reference, rtol=0, atol=1e-9)


def test_env_step_pd_plugin(benchmark: Any, record: Any, bench_model: Any,
                            pd_reference: np.ndarray) -> None:
    kp, kd = PD_GAINS[bench_model.name]
    with env_of(bench_model, [{"type": PD_TYPE, "kp": kp, "kd": kd}]) as env:
        rounds = record(benchmark, bench_model, GROUP_PD, "env",
                        lambda: env.step(bench_model.steps), resetter(env.model, env.data))
        assert_stepped_one_round(bench_model, env.model, env.data)
        # The same law from the same state: the same trajectory as through mjcb_control.
        np.testing.assert_allclose(env.data.qpos, pd_reference, rtol=0, atol=1e-9)
        assert calls_of(env, "control_callback") == rounds * bench_model.steps
