"""Tests of MuJoCo's global callback hooks under mjfast: per-env routing (also from several
threads), silence for pairs that belong to no env (rollout, user code), MuJoCo's own semantics
for mj_forward on an env's pair, and detection of a replaced hook (SPEC §5)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import mujoco
import numpy as np
import pytest
from mujoco import rollout

import mjfast
from support import (
    TIMESTEP,
    ControlCounter,
    Recording,
    arm_xml,
    plugins_param,
    wait_for,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout





def counter_env(make_env, model, register, name="c"):
    return make_env(model, params=plugins_param({"type": register(ControlCounter), "name": name}))


def test_env_installs_the_trampolines(env):
    assert mjfast.hooks_owned()
    assert mujoco.get_mjcb_control() is not None
    assert mujoco.get_mjcb_passive() is not None


# -- routing ------------------------------------------------------------------------------------


def test_two_envs_each_see_only_their_own_callbacks(make_env, arm, register, journal):
    kind = register(ControlCounter)
    env_a = make_env(arm, params=plugins_param({"type": kind, "name": "a"}))
    env_b = make_env(arm, params=plugins_param({"type": kind, "name": "b"}))
    a, b = journal.instances
    env_a.step(3)
    assert (a.calls, b.calls) == (3, 0)
    env_b.step(5)
    assert (a.calls, b.calls) == (3, 5)
    mujoco.mj_forward(env_b.model, env_b.data)
    assert (a.calls, b.calls) == (3, 6)


def test_two_envs_stepped_from_two_threads_at_once(make_env, arm, register, journal):
    kind = register(ControlCounter)
    envs = [make_env(arm, params=plugins_param({"type": kind, "name": n})) for n in "ab"]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(env):
        try:
            barrier.wait(5)
            for _ in range(200):
                env.step(10)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(env,), daemon=True) for env in envs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    a, b = journal.instances
    assert (a.calls, b.calls) == (2000, 2000)
    for env in envs:
        assert env.data.time == pytest.approx(2000 * TIMESTEP)
        stats = env.statistics()
        assert stats["env"]["steps"] == 2000
        assert stats["plugins"][0]["callbacks"]["control_callback"]["calls"] == 2000
    # Each plugin saw its own data's clock, step after step.
    assert a.control_times == pytest.approx([i * TIMESTEP for i in range(2000)])
    assert b.control_times == pytest.approx([i * TIMESTEP for i in range(2000)])


def test_two_physics_threads_at_once(make_env, arm, register, journal):
    kind = register(ControlCounter)
    envs = [make_env(arm, params=plugins_param({"type": kind, "name": n})) for n in "ab"]
    for env in envs:
        env.start(None)
    try:
        assert wait_for(lambda: all(plugin.calls > 100 for plugin in journal.instances))
    finally:
        for env in envs:
            env.stop()
    for env, plugin in zip(envs, journal.instances, strict=True):
        assert plugin.calls > 0
        assert plugin.calls == env.statistics()["env"]["steps"]
        assert env.data.time == pytest.approx(plugin.calls * TIMESTEP)


# -- pairs that belong to no env ----------------------------------------------------------------


def test_rollout_on_an_unrelated_model_calls_no_plugin(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    env.step(1)
    model = mujoco.MjModel.from_xml_string(arm_xml())
    datas = [mujoco.MjData(model) for _ in range(2)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.zeros((4, mujoco.mj_stateSize(model, spec)))
    for row in initial:
        mujoco.mj_getState(model, datas[0], row, spec)
    control = np.full((4, 25, model.nu), 0.5)
    state, sensordata = rollout.rollout(model, datas, initial, control)
    assert state.shape == (4, 25, initial.shape[1])
    assert sensordata.shape == (4, 25, model.nsensordata)
    assert np.all(state[:, -1, 0] > 0)  # the rollout really stepped (time is the first entry)
    # Single-data rollout on the calling thread, and on the env's own model with other data.
    rollout.rollout(model, datas[0], initial, control)
    rollout.rollout(env.model, mujoco.MjData(env.model), initial, control)
    assert journal.instances[0].calls == 1


def test_mujoco_calls_on_other_pairs_call_no_plugin(make_env, arm, box, register, journal):
    env = counter_env(make_env, arm, register)
    other_model = mujoco.MjModel.from_xml_string(box)
    other_data = mujoco.MjData(other_model)
    for _ in range(10):
        mujoco.mj_step(other_model, other_data)
    mujoco.mj_forward(other_model, other_data)
    assert other_data.time == pytest.approx(10 * TIMESTEP)
    # The env's own model with a data of its own is not the env's pair either.
    foreign = mujoco.MjData(env.model)
    mujoco.mj_step(env.model, foreign)
    mujoco.mj_forward(env.model, foreign)
    # Nor is the env's data with a copy of its model.
    mujoco.mj_forward(mujoco.MjModel.from_xml_string(arm), env.data)
    assert journal.instances[0].calls == 0


def test_user_mj_forward_on_the_env_pair_dispatches_control(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    mujoco.mj_forward(env.model, env.data)
    assert journal.instances[0].calls == 1
    mujoco.mj_step(env.model, env.data)
    assert journal.instances[0].calls == 2
    env.step(1)
    assert journal.instances[0].calls == 3


class ForwardsInside(ControlCounter):
    """Calls mj_forward on its own pair from inside control_callback."""

    def control_callback(self, model, data):
        super().control_callback(model, data)
        mujoco.mj_forward(model, data)


def test_plugin_calling_mj_forward_does_not_reenter_dispatch(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(ForwardsInside)))
    done = threading.Event()

    def run():
        env.step(3)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(10), "a plugin's mj_forward dead-locked or recursed into dispatch"
    assert journal.instances[0].calls == 3


class StepsInside(Recording):
    def control_callback(self, model, data):
        self.env.step(1)


def test_plugin_stepping_its_env_from_a_callback_is_plugin_error(make_env, arm, register):
    env = make_env(arm, params=plugins_param(register(StepsInside)))
    with pytest.raises(mjfast.PluginError) as caught:
        env.step(2)
    assert isinstance(caught.value.__cause__, mjfast.LogicError)
    assert env.data.time == pytest.approx(TIMESTEP)


# -- hook ownership -----------------------------------------------------------------------------


@pytest.mark.parametrize(("hook", "setter"), [
    ("mjcb_control", mujoco.set_mjcb_control),
    ("mjcb_passive", mujoco.set_mjcb_passive),
])
def test_replaced_hook_is_detected_and_steps_nothing(make_env, arm, register, journal, hook,
                                                     setter):
    env = counter_env(make_env, arm, register)
    env.step(2)
    try:
        setter(lambda m, d: None)
        assert not mjfast.hooks_owned()
        with pytest.raises(mjfast.HookOwnershipError, match=hook):
            env.step(5)
        assert env.data.time == pytest.approx(2 * TIMESTEP)
        with pytest.raises(mjfast.HookOwnershipError, match=hook):
            env.start(None)
        assert not env.running
        assert env.data.time == pytest.approx(2 * TIMESTEP)
        assert journal.instances[0].calls == 2
    finally:
        mjfast.install_hooks()
    assert mjfast.hooks_owned()
    env.step(1)
    assert journal.instances[0].calls == 3
    assert env.data.time == pytest.approx(3 * TIMESTEP)


def test_hook_ownership_error_is_a_runtime_error(make_env, arm):
    env = make_env(arm)
    try:
        mujoco.set_mjcb_control(None)
        with pytest.raises(RuntimeError):
            env.step(1)
    finally:
        mjfast.install_hooks()


def test_install_hooks_is_idempotent(env):
    control = mujoco.get_mjcb_control()
    mjfast.install_hooks()
    mjfast.install_hooks()
    assert mujoco.get_mjcb_control() is control
    assert mjfast.hooks_owned()


# -- lifetime: the hooks go when the last env closes (issue 8 item 9) ----------------------------
# In a child interpreter: the hooks are process-wide and the suite's own fixtures reinstall them.

HOOKS_LIFETIME = textwrap.dedent("""
    import gc
    import mujoco
    import mjfast
    from mjfast.plugin.base import MujocoPlugin

    ARM = '''ARM_XML'''

    class Counter(MujocoPlugin):
        calls = 0
        def load(self, model, data):
            return True
        def control_callback(self, model, data):
            Counter.calls += 1

    mjfast.register_plugin("lifetime/Counter", Counter)
    PARAMS = {"MujocoPlugins": [{"type": "lifetime/Counter"}]}

    def uninstalled():
        return mujoco.get_mjcb_control() is None and mujoco.get_mjcb_passive() is None

    assert uninstalled()
    first, second = mjfast.MujocoEnv(ARM), mjfast.MujocoEnv(ARM)
    assert mjfast.hooks_owned()
    first.close()
    assert mjfast.hooks_owned(), "uninstalled while an env is still open"
    second.close()
    assert uninstalled(), "still installed after the last env closed"

    # An env made later installs them again and its plugins are called.
    third = mjfast.MujocoEnv(ARM, params=PARAMS)
    assert mjfast.hooks_owned()
    third.step(3)
    assert Counter.calls == 3
    third.close()
    assert uninstalled()

    # A user's own callback set while an env is open, then the env dropped without close():
    # its __del__ closes it, clears mjfast's passive hook and leaves the user's control hook.
    model = mujoco.MjModel.from_xml_string(ARM)
    seen = []
    mine = lambda m, d: seen.append(1)
    dropped = mjfast.MujocoEnv(ARM)
    mujoco.set_mjcb_control(mine)  # replaces mjfast's (the env would refuse to step)
    del dropped
    gc.collect()
    assert mujoco.get_mjcb_control() is mine, "the user's callback was clobbered"
    assert mujoco.get_mjcb_passive() is None
    mujoco.mj_forward(model, mujoco.MjData(model))
    assert seen == [1]
    mujoco.set_mjcb_control(None)
    mjfast.install_hooks()  # taking them back by hand, with no env: stays until an env closes
    env = mjfast.MujocoEnv(ARM)
    env.close()
    assert uninstalled()
    print("ok")
""")


def test_hooks_are_uninstalled_when_the_last_env_closes_and_reinstalled_by_the_next():
    script = HOOKS_LIFETIME.replace("ARM_XML", arm_xml())
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


# -- the registry frees what it replaces (issue 8 item 7) ----------------------------------------

REGISTRY_MEMORY = textwrap.dedent("""
    import ctypes, gc, sys, threading
    import mujoco
    import mjfast

    XML = "<mujoco><worldbody><body><joint/><geom size='.1'/></body></worldbody></mujoco>"

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2

    def in_use():
        gc.collect()
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd

    model = mujoco.MjModel.from_xml_string(XML)
    stop = threading.Event()

    def forward_forever():  # a reader of the registry all along (a foreign pair)
        foreign = mujoco.MjData(model)
        while not stop.is_set():
            mujoco.mj_forward(model, foreign)

    readers = [threading.Thread(target=forward_forever) for _ in range(2)]
    for thread in readers:
        thread.start()
    for _ in range(20):
        mjfast.MujocoEnv(model).close()
    before = in_use()
    envs = [mjfast.MujocoEnv(model) for _ in range(int(sys.argv[1]))]
    for env in envs:
        env.close()
    del envs, env
    held = in_use() - before
    stop.set()
    for thread in readers:
        thread.join()
    print(held)
""")


@pytest.mark.parametrize("fence", ["membarrier", "reader_fence"])
def test_closing_many_envs_that_were_alive_together_frees_the_hooks_registry(fence):
    # Every register/unregister publishes a new registry version; if replaced versions were not
    # freed, 300 envs alive together would leave ~45k entries (~2 MB) behind. Both fences: the
    # writer's membarrier, and the readers' own where membarrier is unavailable.
    env = dict(os.environ, MJFAST_HOOKS_NO_MEMBARRIER="1" if fence == "reader_fence" else "")
    result = subprocess.run([sys.executable, "-c", REGISTRY_MEMORY, "300"], capture_output=True,
                            text=True, timeout=120, check=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    held = int(result.stdout.strip())
    assert held < 256 * 1024, f"{held} bytes still allocated after closing 300 envs"


# -- hooks replaced while running -----------------------------------------------------------


def test_hook_replaced_while_running_stops_the_thread_with_hook_ownership_error(
        make_env: Any, register: Any, arm: str) -> None:
    name = register(ControlCounter)
    env = make_env(arm, params=plugins_param(name))
    env.start(None)
    try:
        mujoco.set_mjcb_control(lambda m, d: None)
        deadline = time.monotonic() + 10
        while env.running and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not env.running
        with pytest.raises(mjfast.HookOwnershipError, match="mjcb_control"):
            env.stop()
    finally:
        mjfast.install_hooks()
    calls = env.plugins[0].stats["callbacks"]["control_callback"]["calls"]
    env.step(10)  # the hooks are back: dispatch resumes
    assert env.plugins[0].stats["callbacks"]["control_callback"]["calls"] == calls + 10


def test_hook_replaced_during_step_n_raises_and_steps_nothing_more(make_env: Any,
                                                                   arm: str) -> None:
    env = make_env(arm)
    mujoco.set_mjcb_passive(lambda m, d: None)
    time_before = env.data.time
    with pytest.raises(mjfast.HookOwnershipError, match="mjcb_passive"):
        env.step(100)
    assert env.data.time == time_before
