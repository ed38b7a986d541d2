"""Tests of the plugin host through the env: load order for both configuration layouts, what the
host sets on a plugin, dispatch of overridden callbacks only, failure isolation at load and at
live dispatch, and scoped access with acquire_plugin (SPEC §2, §4, §6)."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import pytest

import mjfast
from mjfast import PluginState
from support import TIMESTEP, ControlCounter, FullRecorder, Recording, plugins_param, wait_for

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
        sys.path.insert(0, {str(Path(__file__).parent)!r})
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
