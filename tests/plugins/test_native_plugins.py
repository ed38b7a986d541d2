"""Native (C++) plugins: loading and its failures, dispatch and errors, the shipped plugins, and the
example package built and installed end to end (SPEC §9)."""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from _native_build import build_env, plugin_library_path
from mjfast._core_loader import _core
from mjfast.plugin.native import NativePlugin
from support import TESTS_DIR

PLUGIN_ABI_VERSION = int(_core.PLUGIN_ABI_VERSION)

ARM = """
<mujoco>
  <option timestep="0.002"/>
  <size nuserdata="16"/>
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" size="0.04" fromto="0 0 0 0.4 0 0" mass="1"/>
      <body name="lower" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0.4 0 0" mass="1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder_motor" joint="shoulder"/>
    <motor name="elbow_motor" joint="elbow" ctrllimited="true" ctrlrange="-50 50"/>
  </actuator>
</mujoco>
"""

FREE_BODY = """
<mujoco>
  <option timestep="0.001" gravity="0 0 0"/>
  <worldbody>
    <body name="puck" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="2"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin_library_path(tmp_path_factory)


@pytest.fixture
def native(library: Path) -> Iterator[Any]:
    """Registers test plugin classes from the test library under `tests/<Class>`."""
    registered: list[str] = []

    def register(class_name: str, *, symbol: str | None = None,
                 path: Path | str | None = None) -> str:
        type_name = f"tests/{class_name}"
        descriptor = (NativePlugin(path or library, symbol=symbol) if symbol
                      else NativePlugin(path or library, class_name))
        mjfast.register_plugin(type_name, descriptor)
        registered.append(type_name)
        return type_name

    yield register
    for type_name in registered:
        mjfast.unregister_plugin(type_name)


def _failure(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = {p.name: p for p in env.plugins}[name]
    assert info.state is mjfast.PluginState.FAILED
    assert info.failure is not None
    return info.failure


# -- loading ------------------------------------------------------------------------------------


def test_native_plugin_loads_and_is_dispatched(native: Any) -> None:
    noop = "mjfast/NoOp"
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": noop}]}) as env:
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE
        env.step(10)
        calls = env.statistics()["plugins"][0]["callbacks"]
        for callback in ("pre_step", "control_callback", "passive_callback",
                         "last_stage_callback"):
            assert calls[callback]["calls"] == 10, callback


def test_missing_library_is_a_factory_failure(native: Any, tmp_path: Path) -> None:
    missing = tmp_path / "libnothere.so"
    type_name = native("Nothing", path=missing)
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name},
                                                         {"type": "mjfast/NoOp"}]}) as env:
        failure = _failure(env, "Nothing")
        assert failure.phase == "factory"
        assert str(missing) in failure.message and "does not exist" in failure.message
        assert env.plugins[1].state is mjfast.PluginState.ACTIVE  # isolated


def test_library_that_fails_to_dlopen_is_a_factory_failure(native: Any, tmp_path: Path) -> None:
    bogus = tmp_path / "libbogus.so"
    bogus.write_text("not an ELF file")
    type_name = native("Bogus", path=bogus)
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        failure = _failure(env, "Bogus")
        assert failure.phase == "factory"
        assert str(bogus) in failure.message and "failed to load" in failure.message


def test_missing_symbol_is_a_factory_failure(native: Any, library: Path) -> None:
    type_name = native("NoSuchClass")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        failure = _failure(env, "NoSuchClass")
        assert failure.phase == "factory"
        assert str(library) in failure.message
        assert "has no symbol 'mjfast_plugin_NoSuchClass'" in failure.message


def test_abi_mismatch_is_a_factory_failure(native: Any, library: Path) -> None:
    type_name = native("FutureAbi")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        failure = _failure(env, "FutureAbi")
        assert failure.phase == "factory"
        assert str(library) in failure.message
        version = PLUGIN_ABI_VERSION
        assert f"ABI version {version + 1}" in failure.message
        assert f"supports version {version}" in failure.message


def test_version_1_table_from_before_host_services_loads(native: Any) -> None:
    type_name = native("LegacyAbi")  # its table ends before set_host, which is a trap
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE
        env.step(3)
        env.statistics()  # its table has no call entry: no figures, no crash
        with env.acquire_plugin(env.plugins[0].name) as plugin, \
                pytest.raises(mjfast.LogicError, match="implements no commands"):
            plugin.call("anything")


def test_table_from_before_plugin_state_loads_without_state(native: Any) -> None:
    type_name = native("HostEraAbi")  # its table ends before get_state/set_state, both traps
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        assert env.plugins[0].state is mjfast.PluginState.ACTIVE
        env.step(3)
        state = env.get_state()
        assert state.plugins == {}
        env.step(2)
        env.set_state(state)
        assert env.get_state() == state


def test_load_returning_false_is_a_load_failure(native: Any) -> None:
    type_name = native("LoadFalse")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        failure = _failure(env, "LoadFalse")
        assert (failure.phase, failure.message) == ("load", "load() returned false")
        env.step(3)  # a failed plugin never receives a callback, and the env runs


def test_throwing_constructor_is_a_factory_failure(native: Any) -> None:
    type_name = native("ThrowingCtor")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name}]}) as env:
        failure = _failure(env, "ThrowingCtor")
        assert failure.phase == "factory"
        assert "constructor exploded" in failure.message


def test_typed_configuration(native: Any) -> None:
    type_name = native("Configured")
    entry = {"type": type_name, "gains": {"kp": 2.5}, "label": "héllo", "list": [7, 8]}
    with (mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [entry]}) as env,
          env.acquire_plugin("Configured") as plugin):
        assert plugin.call("describe") == "2.500000 héllo 7"


@pytest.mark.parametrize(("config", "message"), [
    ({"list": [1]}, "config key 'gains.kp' is missing"),
    ({"gains": {"kd": 1}, "list": [1]}, "config key 'gains.kp' is missing"),
    ({"gains": {"kp": "high"}, "list": [1]}, "config key 'gains.kp' must be a number, got string"),
    ({"gains": 3, "list": [1]}, "config key 'gains' must be a mapping, got number"),
    ({"gains": {"kp": 1}, "label": 5, "list": [1]},
     "config key 'label' must be a string, got number"),
    ({"gains": {"kp": 1}, "list": []}, "config key 'list' has 0 items, index 0 is out of range"),
    ({"gains": {"kp": 1}, "list": [1.5]}, "config key 'list[0]' must be an integer"),
])
def test_configuration_errors_name_the_key(native: Any, config: dict[str, Any],
                                           message: str) -> None:
    type_name = native("Configured")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name, **config}]}) as env:
        failure = _failure(env, "Configured")
        assert failure.phase == "factory"
        assert message in failure.message


@pytest.fixture
def echo(native: Any) -> str:
    """The type name of ConfigEcho, registered for this test."""
    return native("ConfigEcho")


@contextlib.contextmanager
def _echo(type_name: str, config: dict[str, Any]) -> Iterator[Any]:
    """A loaded ConfigEcho with `config`, as an acquired handle."""
    with (mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name, **config}]}) as env,
          env.acquire_plugin("ConfigEcho") as plugin):
        yield plugin


def _echo_failure(type_name: str, config: dict[str, Any]) -> str:
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name, **config}]}) as env:
        failure = _failure(env, "ConfigEcho")
        assert failure.phase == "factory"
        return failure.message


def test_configuration_numbers_in_every_json_spelling(echo: str) -> None:
    text = '{"a": 1e-3, "b": -0.0, "c": 1E+2, "d": 0.5, "e": -12.25e-1, "f": 0, "g": 2.5E3}'
    with _echo(echo, {"json": text}) as plugin:
        values = {key: float(plugin.call("number", key)) for key in "abcdefg"}
        assert values == {"a": 0.001, "b": 0.0, "c": 100.0, "d": 0.5, "e": -1.225, "f": 0.0,
                          "g": 2500.0}
        assert math.copysign(1.0, values["b"]) == -1.0
        assert plugin.call("integer", "c") == "100"
        assert plugin.call("integer", "b") == "0"


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": .5}', "offset 6: unexpected character"),
    ('{"a": 1.}', "offset 8: expected a digit after '.'"),
    ('{"a": 1e}', "offset 8: expected a digit in the exponent"),
    ('{"a": +1}', "offset 6: unexpected character"),
    ('{"a": 1e999}', "offset 6: number 1e999 is out of the range of a double"),
    # Mappings and lists.
    ('{"a": 1 "b": 2}', "offset 8: expected ',' or '}'"),
    ('{"a": 1', "offset 7: expected ',' or '}'"),
    ('{"a": [1 2]}', "offset 9: expected ',' or ']'"),
    ('{"a": [1', "offset 8: expected ',' or ']'"),
    ('{"a": 1,}', "offset 8: expected a key"),
    ('{1: 2}', "offset 1: expected a key"),
    ('{"a" 1}', "offset 5: expected ':'"),
    ('{"a": [1,]}', "offset 9: unexpected character"),
    ('{"a": [', "offset 7: unexpected end"),
])
def test_malformed_configuration_numbers_and_structure_fail_the_factory(echo: str, text: str,
                                                                        message: str) -> None:
    failure = _echo_failure(echo, {"json": text})
    assert "invalid plugin configuration JSON at " + message in failure


def test_configuration_nests_mappings_and_lists(echo: str) -> None:
    text = ' { "a" : { "b" : 3 } , "l" : [ 1 , [ ] , { } , [ 2 , { "c" : 4 } ] ] , "e" : { } } '
    with _echo(echo, {"json": text}) as plugin:
        assert plugin.call("number", "a.b") == "3"


def test_configuration_unicode_escapes_decode_to_utf8(echo: str) -> None:
    # Python's json.dumps escapes every non-ASCII character: é as \u00e9, 😀 as a surrogate pair.
    assert "\\u00e9" in json.dumps("é") and "\\ud83d\\ude00" in json.dumps("😀")
    with _echo(echo, {"accent": "é", "emoji": "a😀b", "mixed": "\u20ac/\"\\"}) as plugin:
        assert plugin.call("string", "accent") == "é"
        assert plugin.call("string", "emoji") == "a😀b"
        assert plugin.call("string", "mixed") == "€/\"\\"
    with _echo(echo, {"json": '{"s": "\\u00E9\\uD83D\\uDE00\\/"}'}) as plugin:
        assert plugin.call("string", "s") == "é😀/"


@pytest.mark.parametrize(("text", "message"), [
    ('{"s": "\\u12zz"}', "offset 7: invalid \\u escape '\\u12zz': expected 4 hex digits"),
    ('{"s": "\\u12"}', "offset 7: invalid \\u escape '\\u12\"}': expected 4 hex digits"),
    ('{"s": "\\x41"}', "offset 7: invalid escape '\\x'"),
    ('{"s": "\\ud83dx"}',
     "offset 7: high surrogate \\ud83d is not followed by a \\u low surrogate escape"),
    ('{"s": "\\ud83d\\u0041"}',
     "offset 7: high surrogate \\ud83d is followed by \\u0041, not a low surrogate"),
    ('{"s": "\\ude00"}', "offset 7: unpaired low surrogate \\ude00"),
])
def test_bad_configuration_escapes_fail_the_factory(echo: str, text: str,
                                                    message: str) -> None:
    failure = _echo_failure(echo, {"json": text})
    assert "invalid plugin configuration JSON at " + message in failure


def test_lone_surrogate_in_a_configured_string_fails_the_factory(echo: str) -> None:
    # json.dumps writes a lone surrogate as the escape it is: the plugin's own config is refused.
    failure = _echo_failure(echo, {"label": "x\ud800"})
    assert "is not followed by a \\u low surrogate escape" in failure


@pytest.mark.parametrize(("after", "message"), [
    (2.5, "config key 'after' must be an integer, got 2.5"),
    (3e9, "config key 'after' must be an integer in [-2147483648, 2147483647], got 3000000000"),
    (-1e300, "config key 'after' must be an integer in [-2147483648, 2147483647], got -1e+300"),
    (math.inf, "config key 'after' must be an integer, got inf"),
    (math.nan, "config key 'after' must be an integer, got nan"),
])
def test_integer_configuration_must_be_an_int(native: Any, after: float, message: str) -> None:
    type_name = native("ThrowingControl")
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": type_name,
                                                          "after": after}]}) as env:
        failure = _failure(env, "ThrowingControl")
        assert failure.phase == "factory"
        assert failure.message.endswith("could not be created: " + message)


def _comma_locale(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]] | None:
    """A locale whose decimal point is ',' and the environment that makes it available: an
    installed one, else de_DE compiled with localedef into a temporary LOCPATH; None if neither."""
    listed = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False)
    for name in listed.stdout.split():
        if name.lower().startswith(("de_de.utf", "fr_fr.utf")):
            return name, {}
    localedef = shutil.which("localedef")
    if localedef is None or not Path("/usr/share/i18n/locales/de_DE").is_file():
        return None
    locales = tmp_path_factory.mktemp("locales")
    result = subprocess.run([localedef, "-i", "de_DE", "-f", "UTF-8",
                             str(locales / "de_DE.UTF-8")], capture_output=True, check=False)
    if result.returncode not in (0, 1):  # 1: built, with warnings
        return None
    return "de_DE.UTF-8", {"LOCPATH": str(locales)}


LOCALE_SCRIPT = """
import locale, sys
import mujoco
import mjfast
from mjfast.plugin.native import NativePlugin

library, name, xml = sys.argv[1:4]
model = mujoco.MjModel.from_xml_string(xml)  # compiled before the locale changes
locale.setlocale(locale.LC_NUMERIC, name)
assert locale.localeconv()["decimal_point"] == ",", locale.localeconv()
mjfast.register_plugin("tests/ConfigEcho", NativePlugin(library, "ConfigEcho"))
entry = {"type": "tests/ConfigEcho", "kp": 0.5, "json": '{"kp": 0.5, "e": 1.5e-3}'}
with mjfast.MujocoEnv(model, params={"MujocoPlugins": [entry]}) as env:
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    with env.acquire_plugin("ConfigEcho") as plugin:
        print(plugin.call("number", "kp"), plugin.call("number", "e"))
"""


def test_configuration_numbers_ignore_the_process_locale(
        library: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under LC_NUMERIC=de_DE, strtod reads "0.5" as 0: the parser must not follow the locale."""
    found = _comma_locale(tmp_path_factory)
    if found is None:
        pytest.skip("no locale with a ',' decimal point, and no localedef to build one")
    name, extra = found
    result = subprocess.run([sys.executable, "-c", LOCALE_SCRIPT, str(library), name, ARM],
                            capture_output=True, text=True, env={**os.environ, **extra},
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.5", "0.0015"]


def test_unload_errors_are_reported_on_stderr(native: Any,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    type_name = native("ThrowingUnload")
    params = {"MujocoPlugins": [{"type": type_name}, {"type": "mjfast/NoOp"}]}
    env = mjfast.MujocoEnv(ARM, params=params)
    env.step(2)
    env.close()  # does not raise
    lines = [line for line in capfd.readouterr().err.splitlines() if "unload()" in line]
    assert lines == ["mjfast: plugin 'ThrowingUnload' raised in unload(): unload exploded"]


# -- dispatch -----------------------------------------------------------------------------------


def test_throwing_callback_surfaces_as_plugin_error(native: Any) -> None:
    type_name = native("ThrowingControl")
    params = {"MujocoPlugins": [{"type": type_name, "after": 4}, {"type": "mjfast/NoOp"}]}
    with mjfast.MujocoEnv(ARM, params=params) as env:
        with pytest.raises(mjfast.PluginError) as raised:
            env.step(100)
        error = raised.value
        assert (error.plugin_name, error.plugin_type, error.callback) == (
            "ThrowingControl", type_name, "control_callback")
        assert isinstance(error.__cause__, RuntimeError)
        assert str(error.__cause__) == "control exploded"
        assert env.data.time == pytest.approx(5 * env.model.opt.timestep)  # stopped after it
        failure = _failure(env, "ThrowingControl")
        assert (failure.phase, failure.message) == ("control_callback", "control exploded")
        env.step(5)  # the env stays usable; the failed plugin is out of the generation
        assert env.plugins[1].state is mjfast.PluginState.ACTIVE


class PyTagger(mjfast.MujocoPlugin):
    """Appends its `tag` to the userdata ordering log, like the native Tagger."""

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        count = int(data.userdata[0])
        data.userdata[1 + count] = float(self.config["tag"])
        data.userdata[0] = count + 1


def test_native_and_python_plugins_mix_in_configured_order(native: Any) -> None:
    tagger = native("Tagger")
    mjfast.register_plugin("tests/PyTagger", PyTagger)
    try:
        order = [(tagger, 1), ("tests/PyTagger", 2), (tagger, 3), ("tests/PyTagger", 4),
                 (tagger, 5)]
        params = {"MujocoPlugins": [{"type": t, "tag": tag} for t, tag in order]}
        with mjfast.MujocoEnv(ARM, params=params) as env:
            assert [p.state for p in env.plugins] == [mjfast.PluginState.ACTIVE] * 5
            env.data.userdata[:] = 0
            env.step(1)
            assert env.data.userdata[0] == 5
            assert env.data.userdata[1:6].tolist() == [1, 2, 3, 4, 5]
    finally:
        mjfast.unregister_plugin("tests/PyTagger")


def test_acquire_plugin_yields_a_handle_refusing_use_after_the_block(native: Any) -> None:
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [{"type": "mjfast/NoOp"}]}) as env:
        with env.acquire_plugin("NoOp") as plugin:
            assert (plugin.name, plugin.type) == ("NoOp", "mjfast/NoOp")
            assert plugin.address != 0
            with pytest.raises(RuntimeError, match="has no command 'frobnicate'"):
                plugin.call("frobnicate")
            raw = object.__getattribute__(plugin, "_target")
        with pytest.raises(mjfast.LogicError):
            plugin.call("anything")
        with pytest.raises(mjfast.LogicError, match="outside the acquire_plugin"):
            raw.call("anything")


# -- shipped plugins ----------------------------------------------------------------------------


def test_pd_controller_converges_to_configured_and_written_targets() -> None:
    entry = {"type": "mjfast/PDController", "joints": ["shoulder", "elbow"],
             "gains": {"kp": [200.0, 50.0], "kd": [15.0, 2.0]}, "targets": [0.4, -0.3]}
    weightless = ARM.replace('timestep="0.002"', 'timestep="0.002" gravity="0 0 0"')
    with mjfast.MujocoEnv(weightless, params={"MujocoPlugins": [entry]}) as env:
        env.step(1)
        assert env.data.ctrl[0] == pytest.approx(200.0 * 0.4)  # the law, from rest
        assert env.data.ctrl[1] == pytest.approx(50.0 * -0.3)
        env.step(3000)
        np.testing.assert_allclose(env.data.qpos, [0.4, -0.3], atol=1e-3)
        with env.acquire_plugin("PDController") as pd:
            assert json.loads(pd.call("targets")) == [0.4, -0.3]
            assert pd.call("set_targets", '{"elbow": 0.2}') == "ok"
            with pytest.raises(RuntimeError, match="not one of this controller's joints"):
                pd.call("set_targets", '{"wrist": 0.2}')
        env.step(3000)
        np.testing.assert_allclose(env.data.qpos, [0.4, 0.2], atol=1e-3)
        np.testing.assert_allclose(env.data.qvel, [0, 0], atol=1e-3)


def test_pd_controller_limits_clamp_the_output() -> None:
    entry = {"type": "mjfast/PDController", "joints": ["shoulder"], "gains": {"kp": 1e4, "kd": 0},
             "targets": [1.0], "limits": {"min": -2.0, "max": 2.0}}
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [entry]}) as env:
        env.step(1)
        assert env.data.ctrl[0] == 2.0
    entry = {"type": "mjfast/PDController", "joints": ["elbow"], "gains": {"kp": 1e4, "kd": 0},
             "targets": [-1.0]}
    with mjfast.MujocoEnv(ARM, params={"MujocoPlugins": [entry]}) as env:
        env.step(1)
        assert env.data.ctrl[1] == -50.0  # no configured limits: the actuator's ctrlrange


@pytest.mark.parametrize(("ramp", "effective"), [(0.0, 0.1), (0.04, 0.1 - 0.02)])
def test_external_wrench_imparts_its_impulse_then_releases(ramp: float, effective: float) -> None:
    force = np.array([3.0, -1.0, 2.0])
    entry = {"type": "mjfast/ExternalWrench", "body": "puck", "force": force.tolist(),
             "start": 0.05, "duration": 0.1, "ramp_down": ramp}
    with mjfast.MujocoEnv(FREE_BODY, params={"MujocoPlugins": [entry]}) as env:
        env.step(40)
        np.testing.assert_allclose(env.data.qvel, 0, atol=1e-12)  # not started yet
        env.step(200)  # past start + duration
        momentum = 2.0 * env.data.qvel[:3]
        dt = env.model.opt.timestep
        np.testing.assert_allclose(momentum, force * effective, atol=np.abs(force).max() * 2 * dt)
        np.testing.assert_allclose(env.data.qvel[3:], 0, atol=1e-9)  # through the centre of mass
        np.testing.assert_array_equal(env.data.xfrc_applied, 0)  # explicitly released
        before = env.data.qvel.copy()
        env.step(100)
        np.testing.assert_allclose(env.data.qvel, before, atol=1e-12)  # and stays released


# -- the example package ------------------------------------------------------------------------


@pytest.mark.slow_build
def test_example_package_builds_installs_and_loads(tmp_path: Path) -> None:
    """Takes some seconds: builds examples/native_plugin with pip against the installed mjfast."""
    example = TESTS_DIR.parent / "examples" / "native_plugin"
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
         "--no-index", "--target", str(target), str(example)],
        capture_output=True, text=True, env=build_env())
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    try:
        assert "mjfast_example/Spring" in mjfast.available_plugins()
        entry = {"type": "mjfast_example/Spring", "joints": ["shoulder"], "stiffness": 40.0,
                 "rest": 0.5}
        xml = ARM.replace('<option timestep="0.002"/>',
                          '<option timestep="0.002" gravity="0 0 0"/>')
        with mjfast.MujocoEnv(xml, params={"MujocoPlugins": [entry]}) as env:
            assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
            env.step(1)
            assert env.data.qfrc_passive[0] == pytest.approx(40.0 * 0.5, rel=1e-6)
            env.step(500)
            assert env.data.qpos[0] > 0.1  # the spring pulls it towards its rest position
    finally:
        sys.path.remove(str(target))
        sys.modules.pop("mjfast_example_plugin", None)
        importlib.invalidate_caches()
