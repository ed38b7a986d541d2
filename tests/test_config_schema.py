"""mjfast.config_schema: nested sections and model names in declared configuration keys."""

from __future__ import annotations

import mujoco
import pytest

import mjfast
from mjfast.config_schema import ModelName, check_config, describe_type

KEYS = {"site": ModelName("site"), "range": {"min": float, "max": float}, "gain": float}
MODEL = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><body name="robot"><site name="lidar"/><geom size="0.1"/></body>'
    "</worldbody></mujoco>")


def test_a_nested_sections_keys_are_checked_with_their_dotted_path() -> None:
    check_config("", {"range": {"min": 0.5, "max": 2}}, KEYS)
    check_config("", {"range": None}, KEYS)  # null counts as absent
    with pytest.raises(mjfast.ConfigError) as raised:
        check_config("p", {"range": {"mni": 0.5}}, KEYS)
    assert str(raised.value) == ("p: unknown configuration key 'range.mni' (did you mean "
                                 "'range.min'?); its keys are: range.max, range.min")


def test_a_nested_sections_values_are_typed() -> None:
    with pytest.raises(mjfast.ConfigError, match=r"^configuration key 'range.max' must be a "
                                                 r"number, got 'far' \(str\)$"):
        check_config("", {"range": {"max": "far"}}, KEYS)
    with pytest.raises(mjfast.ConfigError, match=r"^configuration key 'range' must be a mapping "
                                                 r"with keys max, min, got 3 \(int\)$"):
        check_config("", {"range": 3}, KEYS)


def test_a_model_name_is_checked_against_the_model_when_there_is_one() -> None:
    check_config("", {"site": "nowhere"}, KEYS)  # no model: its type only
    check_config("", {"site": "lidar"}, KEYS, MODEL)
    with pytest.raises(mjfast.ConfigError) as raised:
        check_config("p", {"site": "lidr"}, KEYS, MODEL)
    assert str(raised.value) == ("p: configuration key 'site': no site named 'lidr' (did you mean "
                                 "'lidar'?); the model's sites: lidar")
    with pytest.raises(mjfast.ConfigError, match="'site' must be the name of a site, got 3"):
        check_config("", {"site": 3}, KEYS, MODEL)


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
