"""Stepping benchmarks: mjfast against bare MuJoCo on the same model, in the same run.

Three groups per model: stepping with no callbacks, with a do-nothing Python control callback,
and with a Python PD law. Each benchmark checks its result; conftest.py prints and gates ratios.
"""

from __future__ import annotations

import dataclasses
import time
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


Control = Callable[[mujoco.MjModel, mujoco.MjData], None]
MJFAST = "mjfast"  # the hook state of an mjfast user: mjfast's trampolines installed


def set_hooks(hooks: str | Control | None) -> None:
    """MJFAST, MuJoCo's stock state (None), or a Python function as mjcb_control."""
    mujoco.set_mjcb_control(None)
    mujoco.set_mjcb_passive(None)
    if hooks == MJFAST:
        mjfast.install_hooks()
    elif hooks is not None:
        mujoco.set_mjcb_control(hooks)


def round_setup(model: mujoco.MjModel, data: mujoco.MjData,
                hooks: str | Control | None) -> Callable[[], None]:
    """pedantic's untimed setup: the hooks the variant needs, and the model's initial state."""
    def setup() -> None:
        set_hooks(hooks)
        mujoco.mj_resetData(model, data)
    return setup


def bare_round(bench_model: Any, hooks: str | Control | None) -> Callable[[], float]:
    """A baseline interleaved with a variant: one round of bare mj_step on its own data.

    Returns the round's wall time; the variant's own setup, which runs next, sets its hooks.
    """
    model, data = bench_model.model, bench_model.fresh_data()

    def run() -> float:
        set_hooks(hooks)
        mujoco.mj_resetData(model, data)
        start = time.perf_counter()
        mujoco.mj_step(model, data, nstep=bench_model.steps)
        elapsed = time.perf_counter() - start
        assert_stepped_one_round(bench_model, model, data)
        return elapsed

    return run


def assert_stepped_one_round(bench_model: Any, model: mujoco.MjModel,
                             data: mujoco.MjData) -> None:
    assert data.time == pytest.approx(bench_model.steps * model.opt.timestep, rel=1e-9)


def env_of(bench_model: Any, plugins: list[dict[str, Any]]) -> mjfast.MujocoEnv:
    # Created inside the benchmark, after the autouse fixture has (re)installed the hooks.
    return mjfast.MujocoEnv(bench_model.model, params={"MujocoPlugins": plugins})


def calls_of(env: mjfast.MujocoEnv, callback: str) -> int:
    (plugin,) = env.statistics()["plugins"]
    assert plugin["state"] is mjfast.PluginState.ACTIVE, plugin["failure"]
    return int(plugin["callbacks"][callback]["calls"])


def pd_law(bench_model: Any) -> PDLaw:
    law = PDLaw()
    law.pd = PDSetup.for_bench(bench_model)
    return law


# -- bare MuJoCo ----------------------------------------------------------------------------------


@pytest.mark.parametrize("group", [GROUP_NO_PLUGINS, GROUP_NOOP])
@pytest.mark.parametrize("hooks", ["installed", "uninstalled"])
def test_bare_mj_step(benchmark: Any, record: Any, bench_model: Any, group: str,
                      hooks: str) -> None:
    """mujoco.mj_step(m, d, nstep=N) on a pair no env owns: the baselines.

    With mjfast's trampolines installed (the state of anyone using mjfast) each step calls into
    them and they find no env for the pair; uninstalled is MuJoCo's stock state.
    """
    model, data = bench_model.model, bench_model.fresh_data()
    installed = hooks == "installed"
    baselines = ({"bare_unhooked": bare_round(bench_model, None)}
                 if installed and group == GROUP_NO_PLUGINS else None)
    record(benchmark, bench_model, group, "bare_hooked" if installed else "bare_unhooked",
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps),
           round_setup(model, data, MJFAST if installed else None), baselines)
    assert_stepped_one_round(bench_model, model, data)


# -- no plugins -----------------------------------------------------------------------------------


def test_env_step_no_plugins(benchmark: Any, record: Any, bench_model: Any) -> None:
    with env_of(bench_model, []) as env:
        rounds = record(benchmark, bench_model, GROUP_NO_PLUGINS, "env",
                        lambda: env.step(bench_model.steps),
                        round_setup(env.model, env.data, MJFAST),
                        {"bare_hooked": bare_round(bench_model, MJFAST),
                         "bare_unhooked": bare_round(bench_model, None)})
        assert_stepped_one_round(bench_model, env.model, env.data)
        assert env.statistics()["env"]["steps"] == rounds * bench_model.steps


# -- a do-nothing Python control callback ---------------------------------------------------------


def test_mjcb_control_do_nothing(benchmark: Any, record: Any, bench_model: Any) -> None:
    """MuJoCo's own way: a Python function in mjcb_control (and nothing in mjcb_passive)."""
    model, data = bench_model.model, bench_model.fresh_data()
    record(benchmark, bench_model, GROUP_NOOP, "mjcb",
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps),
           round_setup(model, data, do_nothing),
           {"bare_unhooked": bare_round(bench_model, None)})
    assert mujoco.get_mjcb_control() is do_nothing
    assert_stepped_one_round(bench_model, model, data)


def test_env_step_do_nothing_plugin(benchmark: Any, record: Any, bench_model: Any) -> None:
    with env_of(bench_model, [{"type": NOOP_TYPE}]) as env:
        rounds = record(benchmark, bench_model, GROUP_NOOP, "env",
                        lambda: env.step(bench_model.steps),
                        round_setup(env.model, env.data, MJFAST),
                        {"bare_hooked": bare_round(bench_model, MJFAST)})
        assert_stepped_one_round(bench_model, env.model, env.data)
        # The plugin was called once per step, warm-up round included.
        assert calls_of(env, "control_callback") == rounds * bench_model.steps


# -- a Python PD law ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pd_reference(bench_model: Any) -> np.ndarray:
    """qpos after N steps of the PD law through mjcb_control, computed once, untimed."""
    law = pd_law(bench_model)
    data = bench_model.fresh_data()
    try:
        set_hooks(law.control_callback)
        mujoco.mj_step(bench_model.model, data, nstep=bench_model.steps)
    finally:
        set_hooks(MJFAST)
    pd = law.pd
    # The law did work: the held joints moved towards the target.
    initial_error = np.abs(pd.target - bench_model.model.qpos0[pd.qpos_address]).sum()
    assert np.abs(pd.target - data.qpos[pd.qpos_address]).sum() < initial_error
    return data.qpos.copy()


def test_mjcb_control_pd(benchmark: Any, record: Any, bench_model: Any,
                         pd_reference: np.ndarray) -> None:
    model, data = bench_model.model, bench_model.fresh_data()
    record(benchmark, bench_model, GROUP_PD, "mjcb",
           lambda: mujoco.mj_step(model, data, nstep=bench_model.steps),
           round_setup(model, data, pd_law(bench_model).control_callback))
    assert_stepped_one_round(bench_model, model, data)
    np.testing.assert_allclose(data.qpos, pd_reference, rtol=0, atol=1e-9)


def test_env_step_pd_plugin(benchmark: Any, record: Any, bench_model: Any,
                            pd_reference: np.ndarray) -> None:
    kp, kd = PD_GAINS[bench_model.name]
    with env_of(bench_model, [{"type": PD_TYPE, "kp": kp, "kd": kd}]) as env:
        rounds = record(benchmark, bench_model, GROUP_PD, "env",
                        lambda: env.step(bench_model.steps),
                        round_setup(env.model, env.data, MJFAST),
                        {"mjcb": bare_round(bench_model, pd_law(bench_model).control_callback)})
        assert_stepped_one_round(bench_model, env.model, env.data)
        # The same law from the same state: the same trajectory as through mjcb_control.
        np.testing.assert_allclose(env.data.qpos, pd_reference, rtol=0, atol=1e-9)
        assert calls_of(env, "control_callback") == rounds * bench_model.steps
