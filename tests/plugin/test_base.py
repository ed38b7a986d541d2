"""Tests of the plugin base classes: the ros2_control-style ControlPlugin's lifecycle under the env
(init, pre_step, on_reset, cleanup), the deprecated update() alias, which callbacks a class
counts as overriding, and that the core's callback table, overridden_callbacks and the host's
dispatch agree (SPEC §4)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast import PluginState
from mjfast._core_loader import _core
from mjfast.plugin.base import overridden_callbacks
from support import JOURNAL, TIMESTEP, TWO_LINK_ARM_XML, ControlCounter, FullRecorder, plugins_param


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure





class Cyclic(mjfast.ControlPlugin):
    """A ControlPlugin that records its lifecycle in the journal."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.pre_step_times: list[float] = []
        self.reset_times: list[float] = []
        JOURNAL.instances.append(self)

    def note(self, event: str) -> None:
        self.events.append(event)
        JOURNAL.add(self.name, event)

    def init(self, node, model, data):
        self.init_args = (node, model, data)
        self.seen_before_init = (self.name, self.type, dict(self.config), self.node, self.env.model)
        self.note("init")
        return True

    def pre_step(self, data):
        self.pre_step_data = data
        self.pre_step_times.append(float(data.time))
        self.note("pre_step")

    def on_reset(self, data):
        self.reset_data = data
        self.reset_times.append(float(data.time))
        self.note("on_reset")

    def cleanup(self):
        self.note("cleanup")


class InitFalse(Cyclic):
    def init(self, node, model, data):
        super().init(node, model, data)
        return False


class InitRaises(Cyclic):
    def init(self, node, model, data):
        raise RuntimeError("init exploded")


class NoInit(mjfast.ControlPlugin):
    def cleanup(self):
        pass


def test_control_plugin_init_gets_node_model_data_after_the_host_set_it(
        make_env, arm, register, journal):
    kind = register(Cyclic)
    env = make_env(arm, params=plugins_param({"type": kind, "name": "cyc", "rate": 100}))
    (plugin,) = journal.instances
    node, model, data = plugin.init_args
    assert node is plugin.node
    assert node.namespace == "/mujoco_server/cyc"
    assert model is env.model and data is env.data
    assert plugin.seen_before_init == ("cyc", kind, {"rate": 100}, node, env.model)
    assert env.plugins[0].state is PluginState.ACTIVE


@pytest.mark.parametrize(("cls", "text"), [
    (InitFalse, "returned false"),
    (InitRaises, "init exploded"),
    (NoInit, "must implement init"),
])
def test_control_plugin_init_failure_is_a_load_failure(make_env, arm, register, journal, cls,
                                                        text):
    env = make_env(arm, params=plugins_param(register(cls), register(ControlCounter)))
    failed, neighbour = env.plugins
    assert failed.state is PluginState.FAILED
    assert failed.failure.phase == "load"
    assert text in failed.failure.message
    assert neighbour.state is PluginState.ACTIVE
    env.step(2)
    for plugin in journal.instances:
        if isinstance(plugin, Cyclic):
            assert plugin.pre_step_times == []
    env.close()
    assert failed.name not in journal.names("cleanup")  # it never initialised: nothing to clean


def test_pre_step_runs_once_per_step_before_mj_step(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(ControlCounter), register(Cyclic)))
    env.step(3)
    _, cyclic = journal.instances
    # pre_step sees each step's state before mj_step advanced it...
    assert cyclic.pre_step_times == pytest.approx([0.0, TIMESTEP, 2 * TIMESTEP])
    assert cyclic.pre_step_data is env.data
    # ...and runs before that step's control callback, whatever the load order.
    step_events = [event for _, event in journal.events if event in ("pre_step", "control")]
    assert step_events == ["pre_step", "control"] * 3
    assert env.statistics()["plugins"][1]["callbacks"]["pre_step"]["calls"] == 3


class ResetRaises(Cyclic):
    def on_reset(self, data):
        raise RuntimeError("on_reset exploded")


def test_control_plugin_callbacks_go_by_their_method_names(make_env, arm, register):
    # Statistics, failure phases and PluginError.callback name a ControlPlugin's callbacks as
    # the class spells them (on_reset), not as a MujocoPlugin's (reset).
    env = make_env(arm, params=plugins_param(register(Cyclic), register(ResetRaises)))
    assert set(env.statistics()["plugins"][0]["callbacks"]) == {"pre_step", "on_reset"}
    with pytest.raises(mjfast.PluginError) as caught:
        env.reset()
    assert caught.value.callback == "on_reset"
    assert env.plugins[1].failure.phase == "on_reset"


def test_pre_step_writes_reach_the_step(make_env, arm, register):
    class Drive(Cyclic):
        def pre_step(self, data):
            data.ctrl[:] = 1.0

    env = make_env(arm, params=plugins_param(register(Drive)))
    env.step(5)
    assert env.data.qvel[0] > 0  # the motor pushed during the steps
    assert env.data.actuator_force[0] == pytest.approx(1.0)


def test_on_reset_gets_the_live_post_reset_data_in_load_order(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(
        {"type": register(Cyclic), "name": "first"},
        {"type": register(FullRecorder), "name": "second"},
        {"type": register(Cyclic), "name": "third"}))
    env.step(4)
    env.reset("home")
    assert [n for n, e in journal.events if e in ("on_reset", "reset")] == [
        "first", "second", "third"]
    first = journal.instances_named("first")[0]
    assert first.reset_data is env.data
    assert first.reset_times == [0.0]
    env.reset()
    assert first.reset_times == [0.0, 0.0]


def test_cleanup_on_reload_and_close(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(Cyclic)))
    env.reload()
    old, new = journal.instances
    assert old.events == ["init", "cleanup"]
    assert new.events == ["init"]
    env.close()
    assert new.events == ["init", "cleanup"]


# -- the deprecated update() -----------------------------------------------------------------------


class OldStyle(mjfast.ControlPlugin):
    def __init__(self) -> None:
        self.updates = 0

    def init(self, node, model, data):
        return True

    def update(self, model, data):
        self.updates += 1

    def cleanup(self):
        pass


class OtherOldStyle(OldStyle):
    pass


class NewStyle(OldStyle):
    def update_write(self, model, data):
        self.writes = getattr(self, "writes", 0) + 1


class Neither(mjfast.ControlPlugin):
    def init(self, node, model, data):
        return True

    def cleanup(self):
        pass


def test_update_only_class_is_forwarded_with_one_warning_per_class(arm_model):
    data = mujoco.MjData(arm_model)
    first, second = OldStyle(), OldStyle()
    with pytest.warns(DeprecationWarning, match="update_write") as caught:
        first.update_write(arm_model, data)
        first.update_write(arm_model, data)
        second.update_write(arm_model, data)
    assert len(caught) == 1
    assert "OldStyle" in str(caught[0].message)
    assert (first.updates, second.updates) == (2, 1)
    # Once warned, a class stays quiet (filterwarnings=error would turn a warning into a failure).
    first.update_write(arm_model, data)
    assert first.updates == 3
    # A subclass is a class of its own: it is warned about once too.
    with pytest.warns(DeprecationWarning, match="OtherOldStyle") as caught:
        OtherOldStyle().update_write(arm_model, data)
        OtherOldStyle().update_write(arm_model, data)
    assert len(caught) == 1


def test_update_write_override_is_not_deprecated(arm_model):
    data = mujoco.MjData(arm_model)
    plugin = NewStyle()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plugin.update_write(arm_model, data)
    assert (plugin.writes, plugin.updates) == (1, 0)


def test_default_update_write_without_update_is_quiet(arm_model):
    # Nothing to forward to and nothing deprecated in use: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Neither().update_write(arm_model, mujoco.MjData(arm_model))


def test_overridden_callbacks():
    assert overridden_callbacks(OldStyle) == {"update_write"}
    assert overridden_callbacks(NewStyle) == {"update_write"}
    assert overridden_callbacks(Neither) == set()
    assert overridden_callbacks(Cyclic) == {"pre_step", "on_reset"}
    assert overridden_callbacks(ControlCounter) == {"control_callback"}
    assert overridden_callbacks(FullRecorder) == {"control_callback", "reset", "on_geom_changed"}
    with pytest.raises(TypeError):
        overridden_callbacks(int)


# -- the callback table ---------------------------------------------------------------------------

# Every (base class, callback method) the core's table lists.
TABLE_METHODS = [
    (base, method)
    for _, mujoco_method, control_method in _core.CALLBACKS
    for base, method in ((mjfast.MujocoPlugin, mujoco_method),
                         (mjfast.ControlPlugin, control_method))
    if method is not None
]
# What each base class has besides its per-event callbacks: its lifecycle (and the deprecated
# alias of update_write).
LIFECYCLE = {mjfast.MujocoPlugin: {"load", "unload"},
             mjfast.ControlPlugin: {"init", "cleanup", "update"}}


def test_callback_table_lists_every_callback_method_of_both_bases():
    for base, lifecycle in LIFECYCLE.items():
        methods = {name for name, value in vars(base).items()
                   if callable(value) and not name.startswith("_")}
        assert {m for b, m in TABLE_METHODS if b is base} == methods - lifecycle
    names = [name for name, _, _ in _core.CALLBACKS]
    assert len(set(names)) == len(names)


def test_the_lifecycle_table_names_methods_both_bases_have_and_misspellings_are_caught():
    # _core.LIFECYCLE is what the adapter calls besides the callbacks: (MujocoPlugin method,
    # ControlPlugin method) rows, from which mjfast.plugin.base knows the names to check against.
    from mjfast.plugin.base import misnamed_callbacks

    for mujoco_method, control_method in _core.LIFECYCLE:
        assert callable(getattr(mjfast.MujocoPlugin, mujoco_method))
        assert callable(getattr(mjfast.ControlPlugin, control_method))
    assert [row[0] for row in _core.LIFECYCLE] == ["load", "unload", "statistics", "activate",
                                                 "get_state", "set_state"]

    class Loading(mjfast.MujocoPlugin):
        def lod(self, model: Any, data: Any) -> bool:
            return True

        def statistcs(self) -> dict[str, float]:
            return {}

    class Cleaning(mjfast.ControlPlugin):
        def clenup(self) -> None:
            pass

    assert misnamed_callbacks(Loading) == [("lod", "did you mean load()?"),
                                           ("statistcs", "did you mean statistics()?")]
    assert misnamed_callbacks(Cleaning) == [("clenup", "did you mean cleanup()?")]


def only_overriding(base: type, method: str, calls: list[str]) -> type:
    """A plugin class of `base` overriding `method` alone, noting each call in `calls`."""

    def callback(self: Any, *args: Any) -> None:
        calls.append(method)

    body: dict[str, Any] = {method: callback}
    if base is mjfast.MujocoPlugin:
        body["load"] = lambda self, model, data: True
    else:
        body["init"] = lambda self, node, model, data: True
        body["cleanup"] = lambda self: None
    return type(f"Only_{method}", (base,), body)


@pytest.mark.parametrize(("base", "method"), TABLE_METHODS,
                         ids=[f"{b.__name__}.{m}" for b, m in TABLE_METHODS])
def test_the_host_dispatches_exactly_the_table_callback_a_class_overrides(make_env, arm, register,
                                                                          base, method):
    calls: list[str] = []
    cls = only_overriding(base, method, calls)
    assert overridden_callbacks(cls) == {method}
    env = make_env(arm, params=plugins_param(register(cls)))
    # Every event a plugin can receive, each at least once.
    env.step(2)
    env.reset()
    env.set_geom_properties(0, rgba=[1, 0, 0, 1])
    env.host.dispatch_render()
    env.control.read()
    env.control.write(ctrl=np.zeros(env.model.nu))
    assert calls and set(calls) == {method}
    (plugin,) = env.statistics()["plugins"]
    assert plugin["state"] == "ACTIVE"
    # The host reports the callback under the method's name, counting each dispatch.
    assert {name: stats["calls"] for name, stats in plugin["callbacks"].items()} == {
        method: len(calls)}


def test_plugin_records():
    assert {s.name for s in PluginState} == {
        "REGISTERED", "INSTANTIATED", "LOADED", "ACTIVE", "FAILED", "UNLOADED"}
    failure = mjfast.PluginLoadFailure("p", "pkg/P", "load", "boom")
    info = mjfast.PluginInfo("p", "pkg/P", PluginState.FAILED, failure)
    assert (info.name, info.type, info.state, info.failure.phase) == (
        "p", "pkg/P", PluginState.FAILED, "load")
    assert info.stats == {}


def test_error_hierarchy():
    for error, builtin in [
        (mjfast.ConfigError, ValueError),
        (mjfast.PluginNotFoundError, LookupError),
        (mjfast.PluginError, RuntimeError),
        (mjfast.StaleGenerationError, RuntimeError),
        (mjfast.HookOwnershipError, RuntimeError),
        (mjfast.CameraUnavailableError, RuntimeError),
    ]:
        assert issubclass(error, mjfast.MjfastError)
        assert issubclass(error, builtin)
    assert issubclass(mjfast.LogicError, mjfast.MjfastError)


class PreStepRaisesOnFourth(Cyclic):
    def pre_step(self, data):
        super().pre_step(data)
        if len(self.pre_step_times) == 4:
            raise ValueError("pre_step failed on its 4th call")


def test_pre_step_raising_stops_step_after_that_step(make_env, arm, register, journal):
    env = make_env(arm, params=plugins_param(register(PreStepRaisesOnFourth),
                                             register(ControlCounter)))
    with pytest.raises(mjfast.PluginError) as caught:
        env.step(10)
    assert (caught.value.plugin_name, caught.value.callback) == ("PreStepRaisesOnFourth",
                                                                  "pre_step")
    assert isinstance(caught.value.__cause__, ValueError)
    assert env.data.time == pytest.approx(4 * TIMESTEP)  # the 4th physics step still completed
    failing, counter = journal.instances
    assert counter.calls == 4
    env.step(2)
    assert len(failing.pre_step_times) == 4
    assert counter.calls == 6


# -- misnamed callbacks -------------------------------------------------------------------------


def test_a_misnamed_callback_is_a_warning_with_the_close_match(
        caplog: pytest.LogCaptureFixture) -> None:
    class Typo(mjfast.MujocoPlugin):
        def load(self, model: Any, data: Any) -> bool:
            return True

        def control_callbak(self, model: Any, data: Any) -> None:
            pass

        def pre_step(self, data: Any) -> None:
            pass

        def helper(self) -> None:
            pass

    mjfast.register_plugin("hour/Typo", Typo)
    try:
        with caplog.at_level(logging.WARNING, logger="mjfast"), \
                mjfast.MujocoEnv(TWO_LINK_ARM_XML,
                                 params={"MujocoPlugins": [{"type": "hour/Typo"}]}):
            pass
    finally:
        mjfast.unregister_plugin("hour/Typo")
    messages = [r.getMessage() for r in caplog.records if "hour/Typo" in r.getMessage()]
    assert len(messages) == 2, messages
    assert any("control_callbak() is never called" in m and "did you mean control_callback()?"
               in m for m in messages)
    assert any("pre_step()" in m and "a ControlPlugin callback" in m for m in messages)
