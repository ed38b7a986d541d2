"""Tests of the plugin host through the env: load order for both configuration layouts, what the
host sets on a plugin, dispatch of overridden callbacks only, failure isolation at load and at
live dispatch, and scoped access with acquire_plugin (SPEC §2, §4, §6)."""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
import textwrap
import threading
import traceback
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast import PluginState
from support import (
    TESTS_DIR,
    TIMESTEP,
    WARNING_ARENA_XML,
    ControlCounter,
    FullRecorder,
    Recording,
    plugins_param,
    run_python,
    wait_for,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


# -- load order ---------------------------------------------------------------------------------


class First(Recording):
    pass


class Second(Recording):
    pass


class Third(Recording):
    pass


def test_ros1_list_layout_loads_in_list_order(make_env, arm, register, journal):
    types = [register(cls) for cls in (Third, First, Second)]
    env = make_env(arm, params=plugins_param(*types))
    assert journal.names("load") == ["Third", "First", "Second"]
    assert [p.name for p in env.plugins] == ["Third", "First", "Second"]
    assert [p.type for p in env.plugins] == ["test/Third", "test/First", "test/Second"]
    assert all(p.state is PluginState.ACTIVE for p in env.plugins)


def test_ros1_list_layout_repeated_class_gets_indexed_names(make_env, arm, register, journal):
    kind = register(First)
    env = make_env(arm, params=plugins_param(kind, register(Second), kind))
    assert journal.names("load") == ["First_0", "Second", "First_2"]
    assert [p.name for p in env.plugins] == ["First_0", "Second", "First_2"]


def test_ros2_names_layout_loads_in_names_order(make_env, arm, register, journal):
    params = {
        "mujoco_server": {
            "MujocoPlugins": {
                "names": ["c", "a", "b"],
                "a": {"type": register(First)},
                "b": {"type": register(Second), "option": 1},
                "c": {"type": register(Third)},
            }
        }
    }
    env = make_env(arm, params=params)
    assert journal.names("load") == ["c", "a", "b"]
    assert [p.name for p in env.plugins] == ["c", "a", "b"]
    assert journal.instances_named("b")[0].config == {"option": 1}


def test_unload_in_load_order_on_close(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(*(register(c) for c in (Second, Third, First))))
    env.close()
    assert journal.names("unload") == ["Second", "Third", "First"]


class Cyclic(mjfast.ControlPlugin):
    def init(self, node, model, data):
        self.inited = True
        return True

    def pre_step(self, data):
        self.pre_steps = getattr(self, "pre_steps", 0) + 1

    def cleanup(self):
        pass


def test_both_plugin_kinds_mix_in_one_list(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(ControlCounter), register(Cyclic)))
    assert [p.state for p in env.plugins] == [PluginState.ACTIVE, PluginState.ACTIVE]
    env.step(3)
    assert journal.instances[0].calls == 3
    with env.acquire_plugin("Cyclic") as cyclic:
        assert cyclic.inited
        assert cyclic.pre_steps == 3


def test_no_plugins_configured_is_no_plugins(make_env, arm):
    env = make_env(arm, params={"something_else": 1})
    assert env.plugins == ()
    assert env.statistics()["plugins"] == []


def test_plugins_found_in_a_parent_namespace(make_env, arm, register):
    params = {"robots": {"MujocoPlugins": [{"type": register(First)}]}}
    env = make_env(arm, params=params, namespace="/robots/arm_server")
    assert [p.name for p in env.plugins] == ["First"]


# -- what the host sets -------------------------------------------------------------------------


class Introspective(Recording):
    def load(self, model, data):
        self.seen = {
            "name": self.name,
            "type": self.type,
            "config": copy.deepcopy(self.config),
            "namespace": self.node.namespace,
            "relative": self.node.get_param("gain"),
            "private": self.node.get_param("~gain"),
            "absolute": self.node.get_param("/global_value"),
            "default": self.node.get_param("absent", 0.5),
            "logger": self.node.logger.name,
            "env_model_is_model": self.env.model is model,
            "env_data_is_data": self.env.data is data,
        }
        return super().load(model, data)


def test_host_sets_name_type_config_node_env_before_load(make_env, arm, register, journal):
    kind = register(Introspective)
    nested = {"gains": [1.0, {"kp": 2, "kd": [0.1, 0.2]}], "mode": "pd", "limits": {"a": None}}
    params = {
        "MujocoPlugins": [{"type": kind, "name": "intro", "nested": nested, "scale": 1.5}],
        "sim": {"intro": {"gain": 3.0}},
        "global_value": 7,
    }
    env = make_env(arm, params=params, namespace="/sim")
    (plugin,) = journal.instances
    assert plugin.seen == {
        "name": "intro",
        "type": kind,
        "config": {"nested": nested, "scale": 1.5},
        "namespace": "/sim/intro",
        "relative": 3.0,
        "private": 3.0,
        "absolute": 7,
        "default": 0.5,
        "logger": "mjfast.intro",
        "env_model_is_model": True,
        "env_data_is_data": True,
    }
    assert plugin.loaded_with == (env.model, env.data)
    assert isinstance(plugin.node, mjfast.Node)


def test_plugin_config_is_its_own_copy(make_env, arm, register, journal):
    kind = register(Introspective)
    params = mjfast.ParameterServer({"MujocoPlugins": [{"type": kind, "table": {"x": [1, 2]}}]})
    make_env(arm, params=params)
    journal.instances[0].config["table"]["x"].append(3)
    assert params.get("/MujocoPlugins")[0]["table"] == {"x": [1, 2]}


# -- dispatch of overridden callbacks only ------------------------------------------------------


class OnlyPassive(Recording):
    def passive_callback(self, model, data):
        self.note("passive")


class OnlyLastStage(Recording):
    def last_stage_callback(self, model, data):
        self.times = [*getattr(self, "times", []), float(data.time)]
        self.note("last_stage")


class Nothing(Recording):
    pass


def test_only_overridden_callbacks_are_dispatched(make_env, arm, register, journal):
    types = [register(c) for c in (ControlCounter, OnlyPassive, OnlyLastStage, Nothing)]
    env = make_env(arm, params=plugins_param(*types))
    env.step(7)
    control, passive, last_stage, nothing = journal.instances
    assert control.events == ["load"] + ["control"] * 7
    assert passive.events == ["load"] + ["passive"] * 7
    assert last_stage.events == ["load"] + ["last_stage"] * 7
    assert nothing.events == ["load"]
    # last_stage runs at the end of each step, after mj_step advanced time.
    assert last_stage.times == pytest.approx([TIMESTEP * (i + 1) for i in range(7)])
    stats = {p["name"]: p["callbacks"] for p in env.statistics()["plugins"]}
    assert set(stats["ControlCounter"]) == {"control_callback"}
    assert stats["ControlCounter"]["control_callback"]["calls"] == 7
    assert set(stats["OnlyPassive"]) == {"passive_callback"}
    assert stats["OnlyPassive"]["passive_callback"]["calls"] == 7
    assert set(stats["OnlyLastStage"]) == {"last_stage_callback"}
    assert stats["OnlyLastStage"]["last_stage_callback"]["calls"] == 7
    assert stats["Nothing"] == {}


@pytest.mark.parametrize("n", [1, 5, 50])
def test_control_callback_exactly_once_per_step(make_env, arm, register, journal, n):
    make_env(arm, params=plugins_param(register(ControlCounter))).step(n)
    # Construction's mj_forward ran before the generation existed: only the steps count.
    times = journal.instances[0].control_times
    assert times == pytest.approx([TIMESTEP * i for i in range(n)])


def test_callbacks_in_load_order_within_a_step(make_env, arm, register, journal):
    kind = register(ControlCounter)
    make_env(arm, params=plugins_param(*({"type": kind, "name": n} for n in "zyx"))).step(2)
    assert journal.names("control") == ["z", "y", "x", "z", "y", "x"]


# -- failure isolation at load ------------------------------------------------------------------


class CtorRaises(ControlCounter):
    def __init__(self):
        super().__init__()
        raise ValueError("constructor refused")


class LoadFalse(ControlCounter):
    def load(self, model, data):
        super().load(model, data)
        return False


class LoadRaises(ControlCounter):
    def load(self, model, data):
        super().load(model, data)
        raise OSError("load exploded")


class NoLoad(mjfast.MujocoPlugin):
    pass


class StatsRaise(ControlCounter):
    def statistics(self):
        raise RuntimeError("statistics exploded")


class StatsNotDict(ControlCounter):
    def statistics(self):
        return [1, 2, 3]


class ActivateFalse(ControlCounter):
    def activate(self):
        return False


class ActivateRaises(ControlCounter):
    def activate(self):
        raise LookupError("activate exploded")


# (class, phase, text in the message, whether it loaded and so must be unloaded)
LOAD_FAILURES = [
    (CtorRaises, "factory", "constructor refused", False),
    (LoadFalse, "load", "returned false", False),
    (LoadRaises, "load", "load exploded", False),
    (NoLoad, "load", "must implement load", False),
    (StatsRaise, "statistics", "statistics exploded", True),
    (StatsNotDict, "statistics", "", True),
    (ActivateFalse, "activate", "returned false", True),
    (ActivateRaises, "activate", "activate exploded", True),
]


@pytest.mark.parametrize(("cls", "phase", "text", "loaded"), LOAD_FAILURES,
                         ids=[f[0].__name__ for f in LOAD_FAILURES])
def test_load_failure_is_isolated(make_env, arm, register, journal, cls, phase, text, loaded):
    good = register(ControlCounter, "test/Good")
    bad = register(cls)
    env = make_env(arm, params=plugins_param({"type": good, "name": "before"},
                                             {"type": bad, "name": "bad"},
                                             {"type": good, "name": "after"}))
    before, failed, after = env.plugins
    assert (before.state, after.state) == (PluginState.ACTIVE, PluginState.ACTIVE)
    assert failed.state is PluginState.FAILED
    assert failed.failure is not None
    assert (failed.failure.name, failed.failure.type) == ("bad", bad)
    assert failed.failure.phase == phase
    assert text in failed.failure.message
    assert before.failure is None and after.failure is None

    env.step(5)
    assert journal.instances_named("before")[0].calls == 5
    assert journal.instances_named("after")[0].calls == 5
    bad_instances = journal.instances_named("bad")
    assert all(p.calls == 0 for p in bad_instances if isinstance(p, ControlCounter))
    if loaded:
        # It loaded, so it is unloaded when dropped; and never again after.
        assert bad_instances[0].events == ["load", "unload"]
    elif bad_instances:
        assert "unload" not in bad_instances[0].events
    # Still visible in statistics, with its name and type.
    entries = env.statistics()["plugins"]
    assert [(e["name"], e["type"]) for e in entries] == [
        ("before", good), ("bad", bad), ("after", good)]
    assert entries[1]["state"] is PluginState.FAILED
    assert entries[1]["failure"]["phase"] == phase
    # Its callbacks, each at 0 calls, if its statistics were read (it failed only at activate);
    # otherwise the fallback entry, which lists none.
    calls = {name: c["calls"] for name, c in entries[1]["callbacks"].items()}
    assert calls == ({"control_callback": 0} if phase == "activate" else {})
    env.close()
    assert journal.names("unload").count("bad") == (1 if loaded else 0)


def test_unknown_type_is_a_factory_failure_with_suggestion(make_env, arm, register, journal):
    good = register(ControlCounter, "test/Counter")
    env = make_env(arm, params=plugins_param(good, {"type": "test/Countr", "name": "typo"},
                                             {"type": "zzz/Qqqqq", "name": "far"}))
    counter, typo, far = env.plugins
    assert counter.state is PluginState.ACTIVE
    assert typo.state is PluginState.FAILED
    assert typo.failure.phase == "factory"
    assert "test/Countr" in typo.failure.message
    assert "did you mean 'test/Counter'" in typo.failure.message
    assert far.failure.phase == "factory"
    assert "zzz/Qqqqq" in far.failure.message
    env.step(2)
    assert journal.instances[0].calls == 2


def test_custom_statistics_are_reported(make_env, arm, register):
    class Figures(ControlCounter):
        def statistics(self):
            return {"queue_depth": 3, "ratio": 0.25}

    env = make_env(arm, params=plugins_param(register(Figures)))
    assert env.statistics()["plugins"][0]["custom"] == {"queue_depth": 3.0, "ratio": 0.25}


# -- failure at live dispatch -------------------------------------------------------------------


class RaisesOnFourth(FullRecorder):
    """Raises on the 4th call of the callback named by `config["in"]`."""

    def _maybe_raise(self, callback):
        self.counts = getattr(self, "counts", {})
        self.counts[callback] = self.counts.get(callback, 0) + 1
        if self.config.get("in") == callback and self.counts[callback] == 4:
            self.raised = ZeroDivisionError(f"{callback} failed on its 4th call")
            raise self.raised

    def control_callback(self, model, data):
        super().control_callback(model, data)
        self._maybe_raise("control_callback")

    def passive_callback(self, model, data):
        self._maybe_raise("passive_callback")

    def last_stage_callback(self, model, data):
        self._maybe_raise("last_stage_callback")


@pytest.mark.parametrize("callback", ["control_callback", "passive_callback",
                                      "last_stage_callback"])
def test_plugin_raising_in_a_step_callback(make_env, arm, register, journal, callback):
    bad_type = register(RaisesOnFourth)
    env = make_env(arm, params=plugins_param({"type": bad_type, "name": "bad", "in": callback},
                                             register(ControlCounter)))
    with pytest.raises(mjfast.PluginError) as caught:
        env.step(10)
    error = caught.value
    bad, neighbour = journal.instances
    assert (error.plugin_name, error.plugin_type, error.callback) == ("bad", bad_type, callback)
    assert error.__cause__ is bad.raised
    assert "4th call" in str(error)
    # The failing physics step completed and step(n) stopped after it.
    assert env.data.time == pytest.approx(4 * TIMESTEP)
    assert bad.counts[callback] == 4
    info = env.plugins[0]
    assert info.state is PluginState.FAILED
    assert info.failure.phase == callback
    assert "4th call" in info.failure.message
    assert env.plugins[1].state is PluginState.ACTIVE

    # The env stays usable; the failed plugin gets nothing more, its neighbour everything.
    calls_before = dict(bad.counts)
    neighbour_before = neighbour.calls
    env.step(3)
    assert env.data.time == pytest.approx(7 * TIMESTEP)
    assert bad.counts == calls_before
    assert neighbour.calls == neighbour_before + 3
    env.reset()
    assert "reset" not in bad.events  # a failed plugin gets no reset either
    # It did load: it is unloaded at close.
    env.close()
    assert bad.events[-1] == "unload"


def test_control_failure_skips_the_rest_of_that_dispatch(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(
        {"type": register(RaisesOnFourth), "name": "bad", "in": "control_callback"},
        {"type": register(ControlCounter), "name": "after"}))
    with pytest.raises(mjfast.PluginError):
        env.step(10)
    after = journal.instances_named("after")[0]
    assert after.calls == 3  # step 4's control dispatch stopped at the failing plugin
    env.step(1)
    assert after.calls == 4


def test_plugin_raising_in_reset_and_on_geom_changed(make_env, arm, register):
    class BadReset(FullRecorder):
        def reset(self):
            raise RuntimeError("reset failed")

    class BadGeom(FullRecorder):
        def on_geom_changed(self, model, data, geom_id):
            raise RuntimeError("geom failed")

    env = make_env(arm, params=plugins_param(register(BadReset), register(BadGeom)))
    with pytest.raises(mjfast.PluginError) as caught:
        env.reset()
    assert (caught.value.plugin_name, caught.value.callback) == ("BadReset", "reset")
    assert env.data.time == 0.0
    with pytest.raises(mjfast.PluginError) as caught:
        env.set_geom_properties("ball", rgba=[1, 0, 0, 1])
    assert (caught.value.plugin_name, caught.value.callback) == ("BadGeom", "on_geom_changed")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert [p.state for p in env.plugins] == [PluginState.FAILED, PluginState.FAILED]
    env.step(2)  # still usable


# -- acquire_plugin -----------------------------------------------------------------------------


def test_acquire_plugin_yields_the_instance(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    env.step(3)
    (instance,) = journal.instances
    with env.acquire_plugin("c") as plugin:
        assert plugin.calls == 3
        assert plugin.name == "c"
        assert plugin.control_times is instance.control_times
        plugin.marker = "set through the handle"
    assert instance.marker == "set through the handle"


def test_acquire_plugin_with_matching_generations(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    with env.acquire_plugin("c", model_generation=1, plugin_generation=1) as plugin:
        assert plugin.calls == 0


def test_acquire_plugin_refuses_use_after_the_block(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    with env.acquire_plugin("c") as plugin:
        pass
    with pytest.raises(mjfast.LogicError):
        _ = plugin.calls
    with pytest.raises(mjfast.LogicError):
        plugin.anything = 1


def test_acquire_plugin_blocks_dispatch_while_held(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    started, finished = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def step_once():
        started.set()
        try:
            env.step(1)
        except BaseException as error:
            errors.append(error)
        finally:
            finished.set()

    stepper = threading.Thread(target=step_once, daemon=True)
    with env.acquire_plugin("c") as plugin:
        stepper.start()
        assert started.wait(5)
        assert not finished.wait(0.3)  # the step waits for the block to end
        assert plugin.calls == 0
        assert env.data.time == 0.0
    assert finished.wait(5)
    stepper.join(5)
    assert errors == []
    assert journal.instances[0].calls == 1
    assert env.data.time == pytest.approx(TIMESTEP)


def test_step_inside_acquire_block_is_logic_error(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    with env.acquire_plugin("c"), pytest.raises(mjfast.LogicError):
        env.step(1)
    env.step(1)
    assert env.data.time == pytest.approx(TIMESTEP)


def test_acquire_plugin_generation_mismatch_is_stale(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    with pytest.raises(mjfast.StaleGenerationError), env.acquire_plugin("c", model_generation=2):
        pytest.fail("the block must not run")
    with pytest.raises(mjfast.StaleGenerationError), env.acquire_plugin("c", plugin_generation=0):
        pytest.fail("the block must not run")
    env.reload()
    with (pytest.raises(mjfast.StaleGenerationError),
          env.acquire_plugin("c", model_generation=1, plugin_generation=1)):
        pytest.fail("the block must not run")
    env.step(1)  # the scope was released
    with env.acquire_plugin("c", model_generation=2, plugin_generation=2) as plugin:
        assert plugin.calls == 1


def test_acquire_unknown_plugin_is_key_error(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(ControlCounter), "name": "c"}))
    with pytest.raises(KeyError, match="nobody"), env.acquire_plugin("nobody"):
        pytest.fail("the block must not run")
    env.step(1)  # the scope was released
    assert env.data.time == pytest.approx(TIMESTEP)


# Calls that take the host mutex, made by the thread that holds it through acquire_plugin, and
# what each does there (SPEC §18): one that can be honoured returns (the mutex is this thread's),
# one that would wait for the block to end raises LogicError. Each runs in a child process (a
# dead-locked thread would hold the mutex for the rest of the session).
CALLS_INSIDE_ACQUIRE = [
    ("env.reset()", "LogicError"),  # pauses the env: would wait for the block
    ("env.plugins", "returned"),  # reads host.report()
    ("env.statistics()", "returned"),  # reads host.report()
    ("env.host.generation_active", "returned"),
    # Returns without dispatching: no dispatch runs inside the block (SPEC §6); the count of
    # control callbacks is printed with the outcome.
    ("mujoco.mj_forward(env.model, env.data)", "returned"),
    ("env.close()", "LogicError"),  # would wait for the block
]


@pytest.mark.parametrize(("call", "outcome"), CALLS_INSIDE_ACQUIRE,
                         ids=[call for call, _ in CALLS_INSIDE_ACQUIRE])
def test_calls_inside_an_acquire_block_do_not_deadlock(call, outcome):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        import mujoco
        import mjfast
        from support import ControlCounter, arm_xml, plugins_param
        mjfast.register_plugin("test/C", ControlCounter)
        env = mjfast.MujocoEnv(arm_xml(), params=plugins_param({{"type": "test/C", "name": "c"}}))
        with env.acquire_plugin("c") as plugin:
            try:
                {call}
                print("returned", plugin.calls)
            except mjfast.LogicError:
                print("LogicError", plugin.calls)
        print("released")
        env.close()
    """)
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=4)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{call}` inside `with env.acquire_plugin(...)` dead-locked")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [outcome, "0", "released"]


# -- review fixes: a plugin asking the env from its own callback --------------------------------


class AsksFromLastStage(mjfast.MujocoPlugin):
    """From its own callback, reads the env's plugin list and statistics and tries to acquire."""

    seen: ClassVar[list[Any]] = []

    def load(self, model, data):
        return True

    def last_stage_callback(self, model, data):
        states = [plugin.state for plugin in self.env.plugins]
        calls = self.env.statistics()["plugins"][0]["callbacks"]["last_stage_callback"]["calls"]
        try:
            with self.env.acquire_plugin(self.name):
                pass
        except mjfast.LogicError as error:
            AsksFromLastStage.seen.append((states, calls, str(error)))


def test_a_plugin_may_query_the_env_from_its_callback_but_not_acquire(make_env, arm, register):
    AsksFromLastStage.seen = []
    env = make_env(arm, params=plugins_param(register(AsksFromLastStage)))
    env.step(2)
    assert len(AsksFromLastStage.seen) == 2
    states, calls, message = AsksFromLastStage.seen[-1]
    assert states == [mjfast.PluginState.ACTIVE]
    assert calls == 2
    assert "inside a plugin callback" in message


class SubscribesThenFails(mjfast.MujocoPlugin):
    received: ClassVar[list[Any]] = []

    def load(self, model, data):
        self.node.subscribe("/topic", SubscribesThenFails.received.append)
        self.node.advertise_service("ping", lambda request: "pong")
        return False


def test_a_plugin_that_fails_to_load_leaves_no_subscription_or_service(make_env, arm, register):
    SubscribesThenFails.received = []
    env = make_env(arm, params=plugins_param(register(SubscribesThenFails)))
    assert env.plugins[0].failure.phase == "load"
    env.bus.publish("/topic", 1)
    assert SubscribesThenFails.received == []
    with pytest.raises(KeyError):
        env.bus.call("/mujoco_server/SubscribesThenFails/ping", None)
    env.reload()  # the new instance can advertise the same service again
    assert env.plugins[0].failure.message == "load() returned false"


class OpensFromLoad(mjfast.MujocoPlugin):
    seen: ClassVar[list[Any]] = []

    def load(self, model, data):
        OpensFromLoad.seen.append([plugin.name for plugin in self.env.plugins])
        return True


def test_a_plugin_may_read_the_plugin_list_from_its_load(make_env, arm, register):
    OpensFromLoad.seen = []
    make_env(arm, params=plugins_param({"name": "first", "type": register(OpensFromLoad)}))
    assert OpensFromLoad.seen == [["first"]]  # itself, being loaded: no deadlock


class ResetsFromUpdateRead(mjfast.ControlPlugin):
    errors: ClassVar[list[str]] = []

    def init(self, node, model, data):
        return True

    def update_read(self, model, data):
        try:
            self.env.reset()
        except mjfast.LogicError as error:
            ResetsFromUpdateRead.errors.append(str(error))

    def cleanup(self):
        pass


def test_a_control_plugin_resetting_the_env_from_update_read_is_refused(make_env, arm, register):
    ResetsFromUpdateRead.errors = []
    env = make_env(arm, params=plugins_param(register(ResetsFromUpdateRead)))
    env.step(2)
    env.control.read()
    assert len(ResetsFromUpdateRead.errors) == 1
    assert "inside a plugin callback" in ResetsFromUpdateRead.errors[0]


class DrawsAMarker(mjfast.MujocoPlugin):
    scenes: ClassVar[list[Any]] = []

    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        DrawsAMarker.scenes.append(scene)
        scene.ngeom += 1


def test_dispatch_render_from_python_hands_plugins_a_real_scene(make_env, arm, register):
    DrawsAMarker.scenes = []
    env = make_env(arm, params=plugins_param(register(DrawsAMarker)))
    scene = mujoco.MjvScene(env.model, maxgeom=10)
    env.host.dispatch_render(scene=scene)
    assert DrawsAMarker.scenes == [scene]
    assert scene.ngeom == 1
    env.host.dispatch_render()  # makes its own scene
    assert len(DrawsAMarker.scenes) == 2
    assert env.plugins[0].state == PluginState.ACTIVE


def test_replacing_the_generation_directly_while_the_physics_thread_runs(make_env, arm, register,
                                                                         journal):
    env = make_env(arm, params=plugins_param(register(ControlCounter)))
    env.start(None)
    try:
        env.host.load_generation(env.model_generation, env.plugin_generation + 1)
        env.host.load_generation(env.model_generation + 1, env.plugin_generation + 2)
        # Tagged with a generation the env does not have: every dispatch is stale. The physics
        # thread survives it (the process does not abort) and keeps stepping.
        time_before = env.data.time
        assert wait_for(lambda: env.data.time > time_before)
        assert env.running
    finally:
        env.stop()


def test_the_acquired_plugin_is_its_class_and_its_methods_expire_with_the_block(make_env, arm,
                                                                               register):
    env = make_env(arm, params=plugins_param({"name": "c", "type": register(ControlCounter)}))
    with env.acquire_plugin("c") as plugin:
        assert isinstance(plugin, ControlCounter)
        note = plugin.note
        note("inside")
    with pytest.raises(mjfast.LogicError):
        note("outside")


# -- issue 18: a plugin's statistics() is a plugin callback --------------------------------------

# What a plugin's statistics() calls back into its env, and what each must do there: every one
# would wait for the physics thread or the host the report holds, so each raises LogicError
# (SPEC §18), whether or not the physics thread runs; `stop` has nothing to wait for when it
# does not run, and returns.
REENTRANT_FROM_STATISTICS = ("reset", "set_joint_state", "step", "reload", "close", "stop",
                             "pause", "start", "set_geom_properties", "acquire_plugin")


@pytest.mark.parametrize("running", [False, True], ids=["idle", "running"])
def test_reentrant_calls_from_statistics_raise_logic_error_not_hang(running):
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        import mjfast
        from support import arm_xml

        def acquire(env):
            with env.acquire_plugin("reentrant"):
                pass

        CALLS = {{
            "reset": lambda env: env.reset(),
            "set_joint_state": lambda env: env.set_joint_state({{"j0": 0.1}}),
            "step": lambda env: env.step(1),
            "reload": lambda env: env.reload(),
            "close": lambda env: env.close(),
            "stop": lambda env: env.stop(),
            "pause": lambda env: env.pause(),
            "start": lambda env: env.start(None),
            "set_geom_properties": lambda env: env.set_geom_properties("ball", rgba=[1, 0, 0, 1]),
            "acquire_plugin": acquire,
        }}

        class Reentrant(mjfast.MujocoPlugin):
            call = None
            outcomes = {{}}
            def load(self, model, data):
                return True
            def statistics(self):
                if Reentrant.call is not None:
                    try:
                        CALLS[Reentrant.call](self.env)
                        outcome = "returned"
                    except mjfast.LogicError:
                        outcome = "LogicError"
                    Reentrant.outcomes.setdefault(Reentrant.call, []).append(outcome)
                return {{"reports": 1.0}}

        mjfast.register_plugin("test/Reentrant", Reentrant)
        env = mjfast.MujocoEnv(arm_xml(), params={{"MujocoPlugins": [
            {{"type": "test/Reentrant", "name": "reentrant"}}, {{"type": "mjfast/NoOp"}}]}})
        if {running}:
            env.start(None)
        for name in CALLS:
            Reentrant.call = name
            env.statistics()
            env.bus.call("/mujoco_server/statistics", {{}})
        Reentrant.call = None
        states = [plugin.state.name for plugin in env.plugins]
        if {running}:
            env.stop()
        env.step(3)  # the env is as usable as before
        print(json.dumps({{"outcomes": Reentrant.outcomes, "states": states,
                          "running": env.running, "steps": env.step_count > 0}}))
        env.close()
    """)
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a call from a plugin's statistics() dead-locked")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = {name: ["LogicError"] * 2 for name in REENTRANT_FROM_STATISTICS}
    if not running:
        expected["stop"] = ["returned"] * 2
    assert report == {"outcomes": expected, "states": ["ACTIVE", "ACTIVE"], "running": False,
                      "steps": True}


def test_statistics_that_raise_live_are_recorded_not_failed():
    # In a child: without the fix, the reset from statistics() dead-locks the report.
    result = run_python("""
        import json, mjfast
        from support import arm_xml

        class StatisticsCallsBack(mjfast.MujocoPlugin):
            # statistics() that lets what its env raises escape, and reads the env's report.
            def load(self, model, data):
                self.calls = 0
                return True

            def statistics(self):
                self.calls += 1
                nested = [p["name"] for p in self.env.statistics()["plugins"]]  # no recursion
                if self.calls > 1:
                    self.env.reset()
                return {"calls": float(self.calls), "seen": float(len(nested))}

        mjfast.register_plugin("test/StatisticsCallsBack", StatisticsCallsBack)
        env = mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [
            {"type": "test/StatisticsCallsBack", "name": "s"}, {"type": "mjfast/NoOp"}]})
        entry = env.statistics()["plugins"][0]  # the second call: it raises LogicError
        env.step(2)  # still dispatched, still loaded
        print(json.dumps({"entry": entry, "states": [p.state.name for p in env.plugins],
                          "info": env.plugins[0].stats["statistics_error"]}))
        env.close()
    """, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    entry = report["entry"]
    assert entry["state"] == "ACTIVE" and entry["failure"] is None
    assert entry["statistics_error"].startswith("LogicError: reset() called from inside a plugin")
    # What it last returned: at load, when it was the only plugin loaded so far.
    assert entry["custom"] == {"calls": 1.0, "seen": 1.0}
    assert report["info"] is not None
    assert report["states"] == ["ACTIVE", "ACTIVE"]


# -- issue 18: interrupts while a generation is created ---------------------------------------

INTERRUPTED_PHASES = ["__init__", "load", "init"]


def _interrupted_plugin(phase: str, interrupt: type[BaseException]) -> type:
    if phase == "init":
        class InterruptedInit(mjfast.ControlPlugin):
            def init(self, node, model, data):
                raise interrupt()

            def cleanup(self):
                pass

        return InterruptedInit

    class Interrupted(Recording):
        def __init__(self) -> None:
            super().__init__()
            if phase == "__init__":
                raise interrupt()

        def load(self, model, data):
            if phase == "load":
                raise interrupt()
            return super().load(model, data)

    return Interrupted


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("phase", INTERRUPTED_PHASES)
def test_an_interrupt_while_a_plugin_is_created_leaves_the_others_loaded(
        make_env, arm, register, journal, phase, interrupt):
    bad, good = register(_interrupted_plugin(phase, interrupt), "test/Bad"), register(First)
    configured = plugins_param({"type": good, "name": "before"}, {"type": bad, "name": "bad"},
                               "mjfast/NoOp")
    env = make_env(arm)
    env.params.set("/mujoco_server/MujocoPlugins", configured["MujocoPlugins"])
    with pytest.raises(interrupt):
        env.reload()
    # Every plugin visible, the others loaded (the unrelated native NoOp too), the interrupted
    # one left unloaded and not failed (SPEC §6, §18).
    assert [(p.name, p.state, p.failure) for p in env.plugins] == [
        ("before", PluginState.ACTIVE, None), ("bad", PluginState.UNLOADED, None),
        ("NoOp", PluginState.ACTIVE, None)]
    env.step(2)
    assert env.plugins[2].stats["callbacks"]["control_callback"]["calls"] == 2

    # At construction: the others load, then the interrupt is raised and the env is closed
    # (nobody gets it), its loaded plugins unloaded.
    journal.clear()
    with pytest.raises(interrupt):
        mjfast.MujocoEnv(arm, params=configured)
    assert journal.names("load") == ["before"]
    assert journal.names("unload") == ["before"]


# -- issue 18: a plugin's traceback is kept -----------------------------------------------------


def _raises_here() -> None:
    raise ValueError("deep inside the plugin")


class FailsDeep(ControlCounter):
    def load(self, model, data):
        _raises_here()


class FailsDeepInInit(ControlCounter):
    def __init__(self) -> None:
        super().__init__()
        _raises_here()


class FailsDeepLive(ControlCounter):
    def control_callback(self, model, data):
        super().control_callback(model, data)
        _raises_here()


def test_a_load_failure_keeps_its_traceback_and_logs_it(make_env, arm, register, caplog):
    with caplog.at_level(logging.DEBUG, logger="mjfast"):
        env = make_env(arm, params=plugins_param(
            {"type": register(FailsDeep), "name": "load_fails"},
            {"type": register(FailsDeepInInit), "name": "init_fails"},
            {"type": "nowhere/Missing", "name": "missing"}))
    failures = {p.name: p.failure for p in env.plugins}
    for name, phase in (("load_fails", "load"), ("init_fails", "factory")):
        failure = failures[name]
        assert failure.phase == phase
        assert failure.message == "ValueError: deep inside the plugin"
        assert "Traceback (most recent call last)" in failure.traceback
        assert "in _raises_here" in failure.traceback and "test_host.py" in failure.traceback
        logged = [r.getMessage() for r in caplog.records
                  if r.levelno == logging.DEBUG and name in r.getMessage()]
        assert any("in _raises_here" in message for message in logged), logged
    assert failures["missing"].phase == "factory"
    # The statistics carry it too, and stay JSON-able.
    entry = env.statistics()["plugins"][0]
    assert entry["failure"]["traceback"] == failures["load_fails"].traceback
    json.dumps(env.statistics())


def test_a_live_failure_keeps_its_traceback(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(FailsDeepLive), "name": "live"}))
    with pytest.raises(mjfast.PluginError) as raised:
        env.step(1)
    cause = raised.value.__cause__
    assert isinstance(cause, ValueError) and cause.__traceback__ is not None
    frames = [frame.name for frame in traceback.extract_tb(cause.__traceback__)]
    assert frames[-2:] == ["control_callback", "_raises_here"]
    failure = env.plugins[0].failure
    assert failure.phase == "control_callback" and "in _raises_here" in failure.traceback
    # The record is the same failure whatever its traceback (equality ignores it).
    assert failure == mjfast.PluginLoadFailure("live", failure.type, "control_callback",
                                               "ValueError: deep inside the plugin")


# -- issue 18: strict=True ----------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "phase"), [(FailsDeep, "load"), (FailsDeepInInit, "factory"),
                                            (StatsRaise, "statistics")])
def test_strict_env_raises_at_construction_naming_the_plugin_and_closes(arm, register, journal,
                                                                       cls, phase):
    configured = plugins_param({"type": register(First), "name": "good"},
                               {"type": register(cls), "name": "bad"})
    with pytest.raises(mjfast.PluginError) as raised:
        mjfast.MujocoEnv(arm, params=configured, strict=True)
    error = raised.value
    assert (error.plugin_name, error.callback) == ("bad", phase)
    assert f"plugin 'bad' ({error.plugin_type}) failed in {phase}: " in str(error)
    # Closed cleanly: whatever loaded was unloaded.
    assert "good" in journal.names("unload")
    assert sorted(journal.names("unload")) == sorted(journal.names("load"))
    # Not strict: the same configuration loads the others and reports the failure.
    with mjfast.MujocoEnv(arm, params=configured) as env:
        assert [p.state for p in env.plugins] == [PluginState.ACTIVE, PluginState.FAILED]


def test_strict_env_raises_at_reload_and_stays_usable(make_env, arm, register):
    env = make_env(arm, params=plugins_param({"type": register(First), "name": "good"}),
                   strict=True)
    env.params.set("/mujoco_server/MujocoPlugins",
                   plugins_param({"type": register(First), "name": "good"},
                                 {"type": register(FailsDeep), "name": "bad"})["MujocoPlugins"])
    with pytest.raises(mjfast.PluginError, match=r"plugin 'bad' .* failed in load: ValueError"):
        env.reload()
    assert [p.state for p in env.plugins] == [PluginState.ACTIVE, PluginState.FAILED]
    env.step(1)
    with pytest.raises(TypeError, match="strict must be a bool"):
        mjfast.MujocoEnv(arm, strict="yes")


# -- smaller defects ------------------------------------------------------------------------


@pytest.mark.parametrize("returned", [False, np.False_, 0, 0.0, "", []],
                         ids=lambda v: repr(v))
def test_a_false_load_result_is_a_load_failure(make_env: Any, register: Any, arm: str,
                                               returned: object) -> None:
    class FalseLoad(Recording):
        def load(self, model: Any, data: Any) -> Any:
            return returned

    env = make_env(arm, params=plugins_param(register(FalseLoad)))
    plugin = env.plugins[0]
    assert plugin.state == mjfast.PluginState.FAILED
    assert (plugin.failure.phase, plugin.failure.message) == ("load", "load() returned false")


@pytest.mark.parametrize("returned", [None, True, np.True_, 1])
def test_a_true_or_missing_load_result_loads(make_env: Any, register: Any, arm: str,
                                             returned: object) -> None:
    class TrueLoad(Recording):
        def load(self, model: Any, data: Any) -> Any:
            return returned

    env = make_env(arm, params=plugins_param(register(TrueLoad)))
    assert env.plugins[0].state == mjfast.PluginState.ACTIVE


@pytest.mark.parametrize("figures", [[1, 2], {"a": "x"}, {"a": 1j}, {"a": True}, {1: 2.0},
                                     {"a": None}], ids=repr)
def test_odd_statistics_results_name_what_was_expected(make_env: Any, register: Any, arm: str,
                                                       figures: object) -> None:
    class OddStatistics(Recording):
        def statistics(self) -> Any:
            return figures

    env = make_env(arm, params=plugins_param(register(OddStatistics)))
    failure = env.plugins[0].failure
    assert failure is not None and failure.phase == "statistics"
    assert "statistics() must return a dict of str to real numbers" in failure.message


def test_statistics_accept_numpy_numbers(make_env: Any, register: Any, arm: str) -> None:
    class NumpyStatistics(Recording):
        def statistics(self) -> Any:
            return {"count": np.int64(3), "rate": np.float32(0.5), "plain": 2}

    env = make_env(arm, params=plugins_param(register(NumpyStatistics)))
    assert env.plugins[0].stats["custom"] == {"count": 3.0, "rate": 0.5, "plain": 2.0}


def test_mujoco_warnings_are_counted_in_statistics(make_env: Any) -> None:
    env = make_env(WARNING_ARENA_XML)
    assert env.statistics()["env"]["warnings"]["contactfull"] == 0
    env.step(400)
    warnings = env.statistics()["env"]["warnings"]
    assert warnings["contactfull"] > 0
    assert set(warnings) == {name[len("mjWARN_"):].lower()
                             for name in mujoco.mjtWarning.__members__
                             if name.startswith("mjWARN_")}
