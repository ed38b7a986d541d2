"""mjfast.plugin.native: the descriptor of a native plugin type (which library, which entry symbol,
where a relative library is looked for), the SDK's locations, and a configuration as the JSON
its constructor parses. Loading the libraries is the core's (test_native_plugins.py)."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mjfast
from mjfast.bus.params import MAX_DEPTH
from mjfast.plugin.native import NativePlugin, config_json, get_cmake_dir, get_include
from support import (
    run_python,
)


def _check(result: Any) -> str:
    assert result.returncode == 0, f"child failed ({result.returncode}):\n{result.stderr}"
    return result.stdout





def test_the_sdk_is_where_get_include_and_get_cmake_dir_say() -> None:
    include = Path(get_include())
    assert (include / "mjfast" / "plugin_abi.h").is_file()
    assert (include / "mjfast" / "plugin.hpp").is_file()
    assert (Path(get_cmake_dir()) / "mjfastConfig.cmake").is_file()
    assert mjfast.get_include() == get_include() and mjfast.get_cmake_dir() == get_cmake_dir()


def test_a_class_name_gives_its_entry_symbol() -> None:
    plugin = NativePlugin("/opt/plugins/libmy.so", "MyPlugin")
    assert (plugin.class_name, plugin.symbol) == ("MyPlugin", "mjfast_plugin_MyPlugin")
    direct = NativePlugin("/opt/plugins/libmy.so", symbol="make_my_plugin")
    assert (direct.class_name, direct.symbol) == (None, "make_my_plugin")
    assert repr(direct) == ("NativePlugin(library='/opt/plugins/libmy.so', "
                            "symbol='make_my_plugin', package=None)")
    assert NativePlugin.__mjfast_native__  # what discovery tells a native type by


@pytest.mark.parametrize("names", [{}, {"class_name": "A", "symbol": "make_a"}])
def test_exactly_one_of_class_name_and_symbol(names: dict[str, str]) -> None:
    with pytest.raises(TypeError, match="exactly one of class_name= and symbol="):
        NativePlugin("/opt/plugins/libmy.so", **names)


def test_an_absolute_library_must_exist(tmp_path: Path) -> None:
    library = tmp_path / "libthere.so"
    library.write_bytes(b"")
    assert NativePlugin(library, "There").library_path() == str(library)
    with pytest.raises(FileNotFoundError, match=f"'{tmp_path / 'libgone.so'}' does not exist"):
        NativePlugin(tmp_path / "libgone.so", "Gone").library_path()


def test_a_relative_library_is_found_in_the_package_that_made_the_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "my_native_pkg"
    (package / "lib").mkdir(parents=True)
    (package / "lib" / "libmine.so").write_bytes(b"")
    (package / "__init__.py").write_text(
        "from mjfast.plugin.native import NativePlugin\n"
        "MINE = NativePlugin('lib/libmine.so', 'Mine')\n"
        "MISSING = NativePlugin('lib/libmissing.so', 'Missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module: Any = importlib.import_module("my_native_pkg")
    try:
        assert module.MINE.package == "my_native_pkg"
        assert module.MINE.library_path() == str((package / "lib" / "libmine.so").resolve())
        with pytest.raises(FileNotFoundError) as missing:
            module.MISSING.library_path()
        assert "'lib/libmissing.so' not found" in str(missing.value)
        assert str(package / "lib" / "libmissing.so") in str(missing.value)  # where it looked
    finally:
        sys.modules.pop("my_native_pkg", None)


def test_a_relative_library_without_a_package_says_it_looked_nowhere() -> None:
    plugin = NativePlugin("libmine.so", "Mine", package="")
    with pytest.raises(FileNotFoundError, match=r"looked in: nowhere \(no package\)"):
        plugin.library_path()


def test_config_keys_are_kept_for_the_env_to_check() -> None:
    keys = {"kp": float}
    assert NativePlugin("/x/liby.so", "Y", config_keys=keys).config_keys is keys
    assert NativePlugin("/x/liby.so", "Y").config_keys is None


def test_a_configuration_becomes_the_json_the_constructor_parses() -> None:
    config = {"kp": 2.5, "joints": ["a", "b"], "target": {"a": 1}, "on": True, "none": None,
              "gains": np.array([1.0, 2.0]), "count": np.int64(3), "inf": math.inf}
    text = config_json(config)
    assert '"inf": Infinity' in text  # non-finite numbers travel, as json writes them
    assert json.loads(text) == {"kp": 2.5, "joints": ["a", "b"], "target": {"a": 1}, "on": True,
                                "none": None, "gains": [1.0, 2.0], "count": 3, "inf": math.inf}


def test_a_value_json_cannot_write_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"configuration value .* is not a YAML/JSON type"):
        config_json({"when": object()})


def test_a_configuration_nested_too_deep_or_containing_itself_is_a_config_error() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(mjfast.ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
        config_json({"deep": deep})
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(mjfast.ConfigError, match="contains a reference to itself"):
        config_json({"looped": looped})


# -- MuJoCo errors in native plugin code on user threads (issue 18, item 6, beyond the list) ----


@pytest.fixture(scope="module")
def mujoco_error_library(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from _native_build import plugin_library_path

    return plugin_library_path(tmp_path_factory)


def test_a_mujoco_error_in_native_load_reset_or_call_is_the_plugins_failure(
        mujoco_error_library: Any) -> None:
    # load() at construction, on_reset at env.reset() and call() from an acquire_plugin block run
    # on the user's thread, outside any step: MuJoCo's error there ended the process.
    out = _check(run_python(f"""
        import mjfast
        from mjfast.plugin.native import NativePlugin
        from support import arm_xml
        mjfast.register_plugin("tests/MujocoError",
                               NativePlugin({str(mujoco_error_library)!r}, "MujocoError"))
        def env_with(where):
            params = {{"MujocoPlugins": [{{"type": "tests/MujocoError", "name": "broken",
                                          "in": where}}]}}
            return mjfast.MujocoEnv(arm_xml(), params=params)
        with env_with("load") as env:
            info = env.plugins[0]
            print("load", info.state.name, info.failure.phase, "gave up in load" in
                  info.failure.message)
            env.step(3)
        with env_with("on_reset") as env:
            try:
                env.reset()
            except mjfast.PluginError as error:
                print("reset", error.callback, "gave up in on_reset" in str(error))
            env.step(3)
        with env_with("call") as env:
            with env.acquire_plugin("broken") as plugin:
                try:
                    plugin.call("fail")
                except RuntimeError as error:
                    print("call", "gave up in call" in str(error))
            env.step(3)
        print("alive")
    """, timeout=120))
    assert out.splitlines() == ["load FAILED load True", "reset reset True", "call True",
                                "alive"]
