"""mjfast.config_schema: a plugin's configuration checked against its declared `config_keys`,
the declared types in words for the messages, nested sections and model names."""

from __future__ import annotations

import math
import types
from typing import Any, ClassVar

import mujoco
import pytest

import mjfast
from mjfast.config_schema import ModelName, check_config, describe_type
from support import TWO_LINK_ARM_XML


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure




KEYS = {"kp": float, "steps": int, "enabled": bool, "name": str, "joints": list[str],
        "target": dict[str, float], "mode": ("position", "velocity"), "limit": (int, str),
        "extra": object, "raw": list, "table": dict}


@pytest.mark.parametrize(("spec", "words"), [
    (float, "a number"), (int, "an integer"), (bool, "true or false"), (str, "a string"),
    (list, "a list"), (dict, "a mapping"), (object, "any value"),
    (list[str], "a list of strings"), (list[float], "a list of numbers"),
    (dict[str, float], "a mapping of strings to numbers"),
    (list[list[float]], "a list of lists of numbers"), (list[bool], "a list of true/false values"),
    (dict[str, list[int]], "a mapping of strings to lists of integers"),
    (list[ModelName("site")], "a list of names of sites"),
    (types.GenericAlias(list, ({"kp": float},)), "a list of mappings with keys kp"),
    (("position", "velocity"), "one of 'position', 'velocity'"),
    ((int, str), "an integer or a string"),
])
def test_declared_types_read_as_words(spec: Any, words: str) -> None:
    assert describe_type(spec) == words


def test_a_declaration_that_is_no_type_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"config_keys: 3 is not a type"):
        describe_type(3)
    with pytest.raises(TypeError, match=r"config_keys: 3 is not a type"):
        describe_type(list[3])


def test_a_configuration_of_declared_keys_and_types_passes() -> None:
    check_config("plugin 'p'", {"kp": 2, "steps": 3, "enabled": False, "name": "x",
                                "joints": ["a", "b"], "target": {"a": 1.5}, "mode": "velocity",
                                "limit": "none", "extra": object(), "raw": [1, "a"],
                                "table": {"k": [1]}}, KEYS)
    check_config("plugin 'p'", {}, KEYS)  # every key is optional


def test_undeclared_keys_check_nothing() -> None:
    check_config("", {"anything": object()}, None)
    with pytest.raises(mjfast.ConfigError, match=r"^plugin 'p': configuration key 'b' must be "
                                                 r"true or false, got 1 \(int\)$"):
        check_config("plugin 'p'", {"b": 1}, {"b": bool})


@pytest.mark.parametrize(("key", "meant"), [("Kp", "kp"), ("stepz", "steps"), ("joint", "joints")])
def test_an_unknown_key_is_named_with_its_close_match_and_the_declared_keys(key: str,
                                                                           meant: str) -> None:
    with pytest.raises(mjfast.ConfigError) as refused:
        check_config("plugin 'p' (test/P)", {key: 1}, KEYS)
    message = str(refused.value)
    assert message.startswith(f"plugin 'p' (test/P): unknown configuration key {key!r}")
    assert repr(meant) in message
    assert all(declared in message for declared in KEYS)


def test_an_unknown_key_far_from_any_is_named_without_a_guess() -> None:
    with pytest.raises(mjfast.ConfigError) as refused:
        check_config("", {"zzz": 1}, {"kp": float})
    assert str(refused.value).startswith("unknown configuration key 'zzz'")
    assert "did you mean" not in str(refused.value)


@pytest.mark.parametrize(("config", "expected"), [
    ({"kp": "abc"}, "'kp' must be a number, got 'abc' (str)"),
    ({"kp": True}, "'kp' must be a number, got True (bool)"),  # a bool is no number
    ({"kp": math.nan}, "'kp' must be a number, got nan (float)"),
    ({"steps": 2.0}, "'steps' must be an integer, got 2.0 (float)"),
    ({"steps": False}, "'steps' must be an integer, got False (bool)"),
    ({"joints": "a"}, "'joints' must be a list of strings, got 'a' (str)"),
    ({"joints": ["a", 3]}, "'joints[1]' must be a string, got 3 (int)"),
    ({"target": {"a": "x"}}, "'target.a' must be a number, got 'x' (str)"),
    ({"target": {1: 2.0}}, "'target key' must be a string, got 1 (int)"),
    ({"mode": "torque"}, "'mode' must be one of 'position', 'velocity', got 'torque' (str)"),
    ({"limit": 1.5}, "'limit' must be an integer or a string, got 1.5 (float)"),
    ({"table": [1]}, "'table' must be a mapping, got [1] (list)"),
])
def test_a_mistyped_value_is_named_with_where_and_what_was_due(config: dict[str, Any],
                                                               expected: str) -> None:
    with pytest.raises(mjfast.ConfigError) as refused:
        check_config("", config, KEYS)
    assert str(refused.value) == f"configuration key {expected}"


def test_unknown_keys_are_reported_before_mistyped_ones() -> None:
    with pytest.raises(mjfast.ConfigError, match="unknown configuration key 'Kp'"):
        check_config("", {"kp": "abc", "Kp": 1.0}, KEYS)


NESTED_KEYS = {"site": ModelName("site"), "range": {"min": float, "max": float}, "gain": float}
MODEL = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><body name="robot"><site name="lidar"/><geom size="0.1"/></body>'
    "</worldbody></mujoco>")


def test_a_nested_sections_keys_are_checked_with_their_dotted_path() -> None:
    check_config("", {"range": {"min": 0.5, "max": 2}}, NESTED_KEYS)
    check_config("", {"range": None}, NESTED_KEYS)  # null counts as absent
    with pytest.raises(mjfast.ConfigError) as raised:
        check_config("p", {"range": {"mni": 0.5}}, NESTED_KEYS)
    assert str(raised.value) == ("p: unknown configuration key 'range.mni' (did you mean "
                                 "'range.min'?); its keys are: range.max, range.min")


def test_a_nested_sections_values_are_typed() -> None:
    with pytest.raises(mjfast.ConfigError, match=r"^configuration key 'range.max' must be a "
                                                 r"number, got 'far' \(str\)$"):
        check_config("", {"range": {"max": "far"}}, NESTED_KEYS)
    with pytest.raises(mjfast.ConfigError, match=r"^configuration key 'range' must be a mapping "
                                                 r"with keys max, min, got 3 \(int\)$"):
        check_config("", {"range": 3}, NESTED_KEYS)


def test_a_model_name_is_checked_against_the_model_when_there_is_one() -> None:
    check_config("", {"site": "nowhere"}, NESTED_KEYS)  # no model: its type only
    check_config("", {"site": "lidar"}, NESTED_KEYS, MODEL)
    with pytest.raises(mjfast.ConfigError) as raised:
        check_config("p", {"site": "lidr"}, NESTED_KEYS, MODEL)
    assert str(raised.value) == ("p: configuration key 'site': no site named 'lidr' (did you mean "
                                 "'lidar'?); the model's sites: lidar")
    with pytest.raises(mjfast.ConfigError, match="'site' must be the name of a site, got 3"):
        check_config("", {"site": 3}, NESTED_KEYS, MODEL)


def test_a_model_name_in_a_nested_section() -> None:
    keys = {"mount": {"body": ModelName("body")}}
    check_config("", {"mount": {"body": "robot"}}, keys, MODEL)
    with pytest.raises(mjfast.ConfigError, match=r"'mount.body': no body named 'robt' \(did you "
                                                 r"mean 'robot'\?\); the model's bodies: world, "
                                                 r"robot"):
        check_config("", {"mount": {"body": "robt"}}, keys, MODEL)


def test_the_new_specs_in_words() -> None:
    assert describe_type(ModelName("joint")) == "the name of a joint"
    assert describe_type({"b": int, "a": int}) == "a mapping with keys a, b"


# -- declared configuration keys ------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "fragments"), [
    ({"Kp": 600.0}, ["unknown configuration key 'Kp'", "did you mean 'kp'?"]),
    ({"kp": "abc"}, ["configuration key 'kp' must be a number, got 'abc' (str)"]),
    ({"target": {"elbow": "up"}}, ["configuration key 'target.elbow' must be a number"]),
])
def test_a_shipped_plugins_bad_key_is_a_load_failure_naming_it(entry: dict[str, Any],
                                                                fragments: list[str]) -> None:
    params = {"MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold", **entry}]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params=params) as env:
        failure = failure_of(env, "hold")
        assert failure.phase == "factory"
        for fragment in fragments:
            assert fragment in failure.message


def test_a_native_shipped_plugins_unknown_key_is_a_load_failure() -> None:
    entry = {"type": "mjfast/PDController", "name": "pd", "joints": ["elbow"],
             "gains": {"kp": 1.0, "kd": 0.1}, "target": [0.3]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": [entry]}) as env:
        assert "unknown configuration key 'target' (did you mean 'targets'?)" in \
            failure_of(env, "pd").message


def test_a_user_plugin_declares_its_keys() -> None:
    class Gain(mjfast.MujocoPlugin):
        config_keys: ClassVar[dict[str, Any]] = {"gain": float, "joints": list[str],
                                                 "mode": ("fast", "slow")}

        def load(self, model: Any, data: Any) -> bool:
            return True

    mjfast.register_plugin("hour/Gain", Gain)
    try:
        entries = [{"type": "hour/Gain", "name": "ok", "gain": 2, "joints": ["a"]},
                   {"type": "hour/Gain", "name": "typo", "gian": 2.0},
                   {"type": "hour/Gain", "name": "list", "joints": ["a", 3]},
                   {"type": "hour/Gain", "name": "mode", "mode": "medium"}]
        with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": entries}) as env:
            assert env.plugins[0].state is mjfast.PluginState.ACTIVE
            assert "'gian' (did you mean 'gain'?)" in failure_of(env, "typo").message
            assert "'joints[1]' must be a string, got 3 (int)" in failure_of(env, "list").message
            assert "'mode' must be one of 'fast', 'slow'" in failure_of(env, "mode").message
    finally:
        mjfast.unregister_plugin("hour/Gain")
