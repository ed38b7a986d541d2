"""Tests of mjfast.plugin.config: both MujocoPlugins layouts, default names, and every malformed
case naming its entry."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from mjfast.bus.params import ParameterServer
from mjfast.errors import ConfigError
from mjfast.plugin.config import (
    PluginSpec,
    check_plugin_type,
    load_plugin_specs,
    parse_plugin_specs,
)


def _yaml(text: str) -> object:
    return yaml.safe_load(textwrap.dedent(text))["MujocoPlugins"]


# -- ROS 1 list layout ----------------------------------------------------------------------------


def test_list_layout_in_list_order_with_nested_config() -> None:
    specs = parse_plugin_specs(
        _yaml(
            """
            MujocoPlugins:
              - type: package_name/PluginClass
                custom_option: 1.0
                nested: {gains: [1, 2], inner: {deep: true}}
              - type: other_package/OtherPlugin
                name: other
            """
        )
    )
    assert specs == [
        PluginSpec(
            name="PluginClass",
            type="package_name/PluginClass",
            config={"custom_option": 1.0, "nested": {"gains": [1, 2], "inner": {"deep": True}}},
            index=0,
        ),
        PluginSpec(name="other", type="other_package/OtherPlugin", config={}, index=1),
    ]


def test_list_layout_repeated_class_gets_index_suffix() -> None:
    specs = parse_plugin_specs(
        [
            {"type": "pkg/Sensor"},
            {"type": "pkg/Other"},
            {"type": "other_pkg/Sensor"},
        ]
    )
    assert [s.name for s in specs] == ["Sensor_0", "Other", "Sensor_2"]


def test_explicitly_named_entries_do_not_count_as_repeats() -> None:
    specs = parse_plugin_specs([{"type": "pkg/Sensor"}, {"type": "pkg/Sensor", "name": "left"}])
    assert [s.name for s in specs] == ["Sensor", "left"]


def test_list_layout_config_is_a_copy() -> None:
    entry = {"type": "pkg/A", "opts": {"x": [1]}}
    spec = parse_plugin_specs([entry])[0]
    entry["opts"]["x"].append(2)
    assert spec.config == {"opts": {"x": [1]}}


def test_empty_list_is_no_plugins() -> None:
    assert parse_plugin_specs([]) == []


def test_spec_is_frozen_and_hashable() -> None:
    spec = parse_plugin_specs([{"type": "pkg/A", "k": 1}])[0]
    with pytest.raises(AttributeError):
        spec.name = "B"  # type: ignore[misc]
    assert hash(spec) == hash(PluginSpec("A", "pkg/A", {"other": 2}, 0))


# -- ROS 2 names layout ---------------------------------------------------------------------------


def test_names_layout_order_follows_names() -> None:
    specs = parse_plugin_specs(
        _yaml(
            """
            MujocoPlugins:
              second: {type: other_package/OtherPlugin}
              names: [first, second]
              first:  {type: package_name/PluginClass, custom_option: 1.0, deep: {a: [1, {b: 2}]}}
            """
        )
    )
    assert specs == [
        PluginSpec(
            name="first",
            type="package_name/PluginClass",
            config={"custom_option": 1.0, "deep": {"a": [1, {"b": 2}]}},
            index=0,
        ),
        PluginSpec(name="second", type="other_package/OtherPlugin", config={}, index=1),
    ]


def test_names_layout_keeps_name_key_as_config() -> None:
    spec = parse_plugin_specs({"names": ["p"], "p": {"type": "pkg/A", "name": "cfg"}})[0]
    assert spec.name == "p"
    assert spec.config == {"name": "cfg"}


# -- malformed configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ("pkg/A", r"^MujocoPlugins: expected a list .* or a mapping with 'names', found a str"),
        ({"first": {"type": "pkg/A"}}, r"^MujocoPlugins: .*found a mapping without 'names'"),
        (None, r"^MujocoPlugins: .*found a NoneType"),
        ({"names": "a"}, r"^MujocoPlugins\.names: expected a list of plugin names"),
        ({"names": ["a", 2]}, r"^MujocoPlugins\.names: expected a list of plugin names"),
        (
            [{"type": "pkg/A"}, "pkg/B"],
            r"^MujocoPlugins\[1\]: entry is a str "
            r"\(expected a mapping with 'type: package/Class'\)",
        ),
        (
            [{"type": "pkg/A"}, {"opt": 1}],
            r"^MujocoPlugins\[1\]: missing required key 'type' "
            r"\(expected a mapping with 'type: package/Class'\)",
        ),
        (
            {"names": ["a"], "a": {"opt": 1}},
            r"^MujocoPlugins\.a: missing required key 'type'",
        ),
        ({"names": ["a"], "a": 5}, r"^MujocoPlugins\.a: entry is a int"),
        ({"names": ["a", "b"], "a": {"type": "p/A"}}, r"^MujocoPlugins\.b: listed in 'names' but"),
        (
            {"names": ["a"], "a": {"type": "p/A"}, "typo": {"type": "p/B"}},
            r"^MujocoPlugins: key\(s\) 'typo' not listed in 'names'",
        ),
        ({"names": ["a", "a"], "a": {"type": "p/A"}}, r"^MujocoPlugins\.names\[1\]: duplicate"),
        ({"names": ["a/b"], "a/b": {"type": "p/A"}}, r"^MujocoPlugins\.names\[0\]: invalid plugin"),
        (
            [{"type": "p/A", "name": "x"}, {"type": "q/B", "name": "x"}],
            r"^MujocoPlugins\[1\]: duplicate plugin name 'x' \(already used by MujocoPlugins\[0\]",
        ),
        (
            [{"type": "p/A"}, {"type": "q/B", "name": "A"}],
            r"^MujocoPlugins\[1\]: duplicate plugin name 'A'",
        ),
        ([{"type": "p/A", "name": ""}], r"^MujocoPlugins\[0\]\.name: invalid plugin name ''"),
        ([{"type": "p/A", "name": 3}], r"^MujocoPlugins\[0\]\.name: invalid plugin name 3"),
        ([{"type": "p/A", "name": "a/b"}], r"^MujocoPlugins\[0\]\.name: .*without '/'"),
    ],
)
def test_malformed_configuration_names_the_entry(value: object, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_plugin_specs(value)


@pytest.mark.parametrize(
    "bad_type",
    ["NoSlash", "a/b/C", "/Class", "pkg/", "pkg/1Class", "pk g/Class", "pkg/Cla-ss", 7],
)
def test_malformed_type_names_the_entry(bad_type: object) -> None:
    with pytest.raises(ConfigError, match=r"^MujocoPlugins\[1\]\.type: .*expected 'package/Class'"):
        parse_plugin_specs([{"type": "ok/Fine"}, {"type": bad_type}])


@pytest.mark.parametrize("good_type", ["my-pkg.sub_1/Class_2", "p/_Private", "9pkg/C"])
def test_well_formed_types(good_type: str) -> None:
    assert check_plugin_type(good_type, "here") == good_type


def test_source_prefixes_messages() -> None:
    with pytest.raises(ConfigError, match=r"^/sim/MujocoPlugins\[0\]: missing"):
        parse_plugin_specs([{}], source="/sim/MujocoPlugins")


# -- load_plugin_specs ----------------------------------------------------------------------------


def test_load_plugin_specs_uses_nearest_parameter() -> None:
    params = ParameterServer(
        {
            "MujocoPlugins": [{"type": "global/Plugin"}],
            "sim": {"MujocoPlugins": {"names": ["n"], "n": {"type": "sim/Plugin", "k": 1}}},
        }
    )
    assert load_plugin_specs(params, "/sim/robot") == [
        PluginSpec(name="n", type="sim/Plugin", config={"k": 1}, index=0)
    ]
    assert [s.type for s in load_plugin_specs(params, "/elsewhere")] == ["global/Plugin"]


def test_load_plugin_specs_none_configured_is_empty() -> None:
    assert load_plugin_specs(ParameterServer({"other": 1}), "/sim") == []


def test_load_plugin_specs_error_names_full_parameter() -> None:
    params = ParameterServer({"sim": {"MujocoPlugins": [{"type": "p/A"}, {"nope": 1}]}})
    with pytest.raises(ConfigError, match=r"^/sim/MujocoPlugins\[1\]: missing required key"):
        load_plugin_specs(params, "/sim")
