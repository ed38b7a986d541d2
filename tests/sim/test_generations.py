"""Tests of model and plugin generations: stale vs absent dispatch, the callback-free reload gap,
and the reload transaction (re-read sources, prepare first, change nothing on failure) (SPEC §6).
"""

from __future__ import annotations

import logging
import threading

import mujoco
import pytest

import mjfast
from mjfast import PluginState
from support import TIMESTEP, ControlCounter, FullRecorder, Recording, arm_xml, plugins_param

EXTRA_BODY = '<body name="extra" pos="0 1 0.5"><geom type="sphere" size="0.1"/></body>'


def counter_env(make_env, model, register, name="c"):
    return make_env(model, params=plugins_param({"type": register(ControlCounter), "name": name}))


# -- stale vs absent ----------------------------------------------------------------------------


def test_dispatch_with_active_generation_tag_dispatches(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    env.host.dispatch_control()
    env.host.dispatch_control(model_generation=1)
    assert journal.instances[0].calls == 2


def test_dispatch_tagged_with_replaced_generation_is_stale(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    old = env.model_generation
    env.reload()
    assert env.model_generation == old + 1
    for dispatch in (env.host.dispatch_control, env.host.dispatch_passive,
                     env.host.dispatch_last_stage, env.host.reset):
        with pytest.raises(mjfast.StaleGenerationError):
            dispatch(model_generation=old)
    with pytest.raises(mjfast.StaleGenerationError):
        env.host.notify_geometry_changed(0, model_generation=old)
    assert all(p.calls == 0 for p in journal.instances)
    env.host.dispatch_control(model_generation=old + 1)
    assert journal.instances[1].calls == 1


def test_dispatch_without_active_generation_returns_quietly(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    assert env.host.generation_active
    env.host.quiesce_and_destroy()
    assert not env.host.generation_active
    assert journal.instances[0].events == ["load", "unload"]
    for tag in (None, 0, 1, 2, 99):
        env.host.dispatch_control(model_generation=tag)
        env.host.dispatch_passive(model_generation=tag)
        env.host.reset(model_generation=tag)
        env.host.notify_geometry_changed(0, model_generation=tag)
    env.step(3)  # stepping without a generation dispatches nothing either
    assert journal.instances[0].calls == 0
    assert env.data.time == pytest.approx(3 * TIMESTEP)
    # The quiesced plugins stay visible, UNLOADED, until a new generation replaces them.
    assert [plugin.state for plugin in env.plugins] == [mjfast.PluginState.UNLOADED]

    env.host.load_generation(env.model_generation, env.plugin_generation + 1)
    assert env.host.generation_active
    assert env.host.plugin_generation == env.plugin_generation + 1
    assert len(journal.instances) == 2
    fresh = journal.instances[1]
    env.host.dispatch_control()
    env.step(2)
    assert fresh.calls == 3
    assert journal.instances[0].calls == 0
    with pytest.raises(mjfast.StaleGenerationError):
        env.host.dispatch_control(model_generation=env.model_generation + 5)


def test_load_generation_replaces_the_running_generation(make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    env.host.load_generation(env.model_generation, 7)
    old, new = journal.instances
    # The old adapters were unloaded before the new ones were created: they never coexist.
    assert journal.events == [("c", "load"), ("c", "unload"), ("c", "load")]
    env.step(2)
    assert (old.calls, new.calls) == (0, 2)
    assert env.host.plugin_generation == 7


# -- the reload gap -----------------------------------------------------------------------------


def test_reload_runs_callback_free_and_old_instance_gets_nothing_after_unload(
        make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    env.step(3)
    old_model, old_data = env.model, env.data
    env.reload()
    old, new = journal.instances
    assert old.events == ["load"] + ["control"] * 3 + ["unload"]
    assert new.events == ["load"]  # nothing from the reload's mj_forward
    assert new.control_times == []
    assert new.loaded_with == (env.model, env.data)
    assert env.model is not old_model and env.data is not old_data
    assert env.data.time == 0.0
    env.step(2)
    assert new.control_times == pytest.approx([0.0, TIMESTEP])
    assert old.events[-1] == "unload"
    # The old pair belongs to no env any more: MuJoCo calls on it reach nobody.
    mujoco.mj_step(old_model, old_data)
    mujoco.mj_forward(old_model, old_data)
    assert (old.calls, new.calls) == (3, 2)


def test_reload_while_stepping_from_a_thread_never_calls_an_unloaded_plugin(
        make_env, arm, register, journal):
    env = counter_env(make_env, arm, register)
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_stepping():
        try:
            while not stop.is_set():
                env.step(5)
        except BaseException as error:
            errors.append(error)

    stepper = threading.Thread(target=keep_stepping, daemon=True)
    stepper.start()
    try:
        for _ in range(5):
            env.reload()
    finally:
        stop.set()
        stepper.join(10)
    assert errors == []
    assert len(journal.instances) == 6
    for plugin in journal.instances[:-1]:
        assert plugin.events.count("unload") == 1
        assert plugin.events[-1] == "unload"
    assert env.model_generation == 6


# -- the reload transaction ---------------------------------------------------------------------


def test_generations_grow_by_one_per_reload(make_env, arm, register):
    env = counter_env(make_env, arm, register)
    assert (env.model_generation, env.plugin_generation) == (1, 1)
    for expected in (2, 3, 4):
        env.reload()
        assert (env.model_generation, env.plugin_generation) == (expected, expected)
        assert (env.host.model_generation, env.host.plugin_generation) == (expected, expected)
        assert env.host.generation_active


def test_reload_rereads_an_edited_yaml_file(make_env, arm, register, tmp_path, journal):
    first, second = register(ControlCounter), register(FullRecorder)
    path = tmp_path / "params.yaml"
    path.write_text(f"MujocoPlugins:\n  - type: {first}\n")
    env = make_env(arm, params=path)
    assert [p.name for p in env.plugins] == ["ControlCounter"]
    path.write_text(f"MujocoPlugins:\n  - type: {first}\n  - type: {second}\n    gain: 4\n")
    env.reload()
    assert [p.name for p in env.plugins] == ["ControlCounter", "FullRecorder"]
    assert journal.instances_named("FullRecorder")[0].config == {"gain": 4}
    assert env.params.get("/MujocoPlugins")[1]["gain"] == 4
    env.step(2)
    assert [p.calls for p in journal.instances] == [0, 2, 2]


def test_reload_picks_up_changes_to_the_parameter_server(make_env, arm, register):
    first, second = register(ControlCounter), register(FullRecorder)
    env = make_env(arm, params=plugins_param(first))
    env.params.set("/MujocoPlugins", [{"type": second}, {"type": first}])
    assert [p.name for p in env.plugins] == ["ControlCounter"]  # only at the next reload
    env.reload()
    assert [p.name for p in env.plugins] == ["FullRecorder", "ControlCounter"]


def test_reload_rereads_an_edited_model_file(make_env, arm_path, register, journal):
    env = counter_env(make_env, arm_path, register)
    nbody = env.model.nbody
    arm_path.write_text(arm_xml(extra_body=EXTRA_BODY))
    env.reload()
    assert env.model.nbody == nbody + 1
    assert mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, "extra") >= 0
    assert journal.instances[1].loaded_with[0] is env.model
    env.step(1)
    assert journal.instances[1].calls == 1


def test_reload_with_a_new_model(make_env, arm, box, register, journal):
    env = counter_env(make_env, arm, register)
    env.reload(box)
    assert env.model.nq == 7 and env.model.nu == 0
    env.step(2)
    assert journal.instances[1].calls == 2
    env.reload()  # the new model is now the source
    assert env.model.nu == 0
    assert env.model_generation == 3


def test_reload_from_an_mjmodel_source(make_env, arm_model, register):
    env = counter_env(make_env, arm_model, register)
    first = env.model
    env.reload()
    assert env.model is not first
    assert env.model.nbody == arm_model.nbody
    assert env.model_generation == 2


def assert_unchanged(env, model, data, plugin, generations, calls):
    assert env.model is model
    assert env.data is data
    assert (env.model_generation, env.plugin_generation) == generations
    assert env.host.generation_active
    assert [p.state for p in env.plugins] == [PluginState.ACTIVE]
    assert "unload" not in plugin.events
    env.step(1)
    assert plugin.calls == calls + 1  # the same instance still gets callbacks


@pytest.mark.parametrize("bad_model", [
    "<mujoco><worldbody><body><geom type='nope'/></body></worldbody></mujoco>",
    "<mujoco><worldbody><unknown_element/></worldbody></mujoco>",
])
def test_reload_with_a_model_that_does_not_compile_changes_nothing(
        make_env, arm_path, register, journal, bad_model):
    env = counter_env(make_env, arm_path, register)
    env.step(2)
    model, data, generations = env.model, env.data, (1, 1)
    (plugin,) = journal.instances
    with pytest.raises(ValueError):
        env.reload(bad_model)
    assert_unchanged(env, model, data, plugin, generations, 2)
    arm_path.write_text(bad_model)
    with pytest.raises(ValueError, match="arm"):
        env.reload()
    assert_unchanged(env, model, data, plugin, generations, 3)
    assert len(journal.instances) == 1  # no plugin was even instantiated
    arm_path.write_text(arm_xml())
    env.reload()  # the source stayed the file: fixing it is enough
    assert env.model_generation == 2


def test_reload_with_the_model_file_gone_changes_nothing(make_env, arm_path, register, journal):
    env = counter_env(make_env, arm_path, register)
    model, data = env.model, env.data
    arm_path.unlink()
    with pytest.raises(FileNotFoundError):
        env.reload()
    assert_unchanged(env, model, data, journal.instances[0], (1, 1), 0)


@pytest.mark.parametrize("bad_yaml", [
    "MujocoPlugins: 5\n",
    "MujocoPlugins:\n  - name: no_type\n",
    "MujocoPlugins:\n  - type: not_a_package_slash_class\n",
    "MujocoPlugins:\n  names: [a]\n",
])
def test_reload_with_malformed_yaml_config_changes_nothing(
        make_env, arm, register, tmp_path, journal, bad_yaml):
    kind = register(ControlCounter)
    path = tmp_path / "params.yaml"
    path.write_text(f"MujocoPlugins:\n  - type: {kind}\n")
    env = make_env(arm, params=path)
    model, data, params = env.model, env.data, env.params
    path.write_text(bad_yaml)
    with pytest.raises(mjfast.ConfigError):
        env.reload()
    assert env.params is params
    assert_unchanged(env, model, data, journal.instances[0], (1, 1), 0)


def test_reload_with_malformed_server_config_changes_nothing(make_env, arm, register, journal):
    kind = register(ControlCounter)
    env = make_env(arm, params=plugins_param({"type": kind, "name": "c"}))
    model, data = env.model, env.data
    env.params.set("/MujocoPlugins", [{"type": kind, "name": "x"}, {"type": kind, "name": "x"}])
    with pytest.raises(mjfast.ConfigError, match="x"):
        env.reload()
    assert_unchanged(env, model, data, journal.instances[0], (1, 1), 0)


def test_reload_unloads_in_load_order_then_loads_the_new_generation(
        make_env, arm, register, journal):
    kind = register(Recording)
    make_env(arm, params=plugins_param(*({"type": kind, "name": n} for n in "abc"))).reload()
    assert journal.events == [(n, "load") for n in "abc"] + [(n, "unload") for n in "abc"] + [
        (n, "load") for n in "abc"]


def test_an_unload_that_raises_is_logged_and_does_not_stop_the_reload(
        make_env, arm, register, journal, caplog):
    class BadUnload(Recording):
        def unload(self):
            super().unload()
            raise RuntimeError("unload exploded")

    env = make_env(arm, params=plugins_param(register(BadUnload), register(ControlCounter)))
    with caplog.at_level(logging.ERROR, logger="mjfast.host"):
        env.reload()
    assert journal.events == [("BadUnload", "load"), ("ControlCounter", "load"),
                              ("BadUnload", "unload"), ("ControlCounter", "unload"),
                              ("BadUnload", "load"), ("ControlCounter", "load")]
    assert [p.state for p in env.plugins] == [PluginState.ACTIVE, PluginState.ACTIVE]
    assert any("unload exploded" in r.getMessage() for r in caplog.records
               if r.name == "mjfast.host")
    env.step(1)
    assert journal.instances[-1].calls == 1
