"""Several envs stepped from several Python threads at once (SPEC §5, §9): with native plugins no
GIL is held across mj_step, so the steps overlap, and each env is dispatched to its own plugins.

The overlap is shown, not timed: each env carries a native Rendezvous plugin (tests/native)
whose pre_step waits, with a bounded wait, until the other envs' pre_steps arrive too. The
envs' first steps can only meet if their threads are all inside mj_step at once, which a GIL
held across the step would prevent: then a wait times out and that step raises PluginError.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import wait_for

MODEL = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="a">
      <joint name="j0" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      <body pos="0.3 0 0">
        <joint name="j1" type="hinge" axis="0 1 0"/>
        <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
MEETINGS = 50  # the first steps of each env that must meet the others'
# Generous for a loaded machine: a meeting waits only for the other threads to be scheduled.
MEETING_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 60.0  # above the worst case: every env's first meeting timing out in turn


@pytest.fixture
def rendezvous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    library = plugin_library_path(tmp_path_factory)
    mjfast.register_plugin("tests/Rendezvous", NativePlugin(library, "Rendezvous"))
    yield "tests/Rendezvous"
    mjfast.unregister_plugin("tests/Rendezvous")


def meeting(type_name: str, parties: int) -> dict[str, Any]:
    """A Rendezvous entry named "meet" for `parties` envs, in a group of its own."""
    return {"type": type_name, "name": "meet", "group": uuid.uuid4().hex, "parties": parties,
            "meetings": MEETINGS, "timeout_s": MEETING_TIMEOUT_S}


def meetings_of(env: mjfast.MujocoEnv) -> int:
    """How many meetings the env's Rendezvous plugin had; a failed plugin fails the test."""
    info = next(plugin for plugin in env.plugins if plugin.name == "meet")
    assert info.state is mjfast.PluginState.ACTIVE, info.failure
    with env.acquire_plugin("meet") as plugin:
        return int(plugin.call("met"))


def test_envs_step_in_parallel_each_with_its_own_plugins(rendezvous: str) -> None:
    counts = {0: 3000, 1: 5000, 2: 4000}
    plugins = [meeting(rendezvous, len(counts)), {"type": "mjfast/NoOp", "name": "first"},
               {"type": "mjfast/NoOp", "name": "second"}]
    envs = [mjfast.MujocoEnv(MODEL, params={"MujocoPlugins": plugins}) for _ in counts]
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            for _ in range(10):
                envs[index].step(counts[index] // 10)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in counts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    try:
        assert not any(thread.is_alive() for thread in threads)
        # Every meeting happened: the envs' threads were inside mj_step at the same time, so
        # none held the GIL across its steps.
        assert errors == []
        assert [meetings_of(env) for env in envs] == [MEETINGS] * len(envs)
        for index, env in enumerate(envs):
            stats = env.statistics()
            assert stats["env"]["steps"] == counts[index]
            for plugin in stats["plugins"]:
                callbacks = (("pre_step",) if plugin["name"] == "meet" else
                             ("pre_step", "control_callback", "passive_callback",
                              "last_stage_callback"))
                for callback in callbacks:
                    assert plugin["callbacks"][callback]["calls"] == counts[index], (
                        index, plugin["name"], callback)
    finally:
        for env in envs:
            env.close()


def test_physics_threads_of_several_envs_run_side_by_side(rendezvous: str) -> None:
    entry = meeting(rendezvous, 2)
    envs = [mjfast.MujocoEnv(MODEL, params={"MujocoPlugins": [entry, {"type": "mjfast/NoOp"}]})
            for _ in range(2)]
    try:
        for env in envs:
            env.start(None)
        # A meeting that times out stops the Rendezvous plugin and stepping goes on, so this
        # wait ends either way; the count below tells which.
        ran = wait_for(lambda: all(env.statistics()["env"]["steps"] > MEETINGS for env in envs),
                       timeout=30.0)
        for env in envs:
            env.stop()
        assert ran
        assert [meetings_of(env) for env in envs] == [MEETINGS, MEETINGS]
        for env in envs:
            stats = env.statistics()
            assert stats["env"]["steps"] > 0
            calls = stats["plugins"][1]["callbacks"]["control_callback"]["calls"]
            assert calls == stats["env"]["steps"]
    finally:
        for env in envs:
            env.close()
