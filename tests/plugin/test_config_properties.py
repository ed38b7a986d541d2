"""Hardening of MujocoPlugins parsing (SPEC §2, §12): any value, given directly or through the
parameter server the env reads it from, gives specs that satisfy SPEC §2 or a ConfigError naming
the entry, never another exception. Regression tests first, then Hypothesis properties."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mjfast
from mjfast.bus.params import MAX_DEPTH, ParameterServer
from mjfast.errors import ConfigError
from mjfast.plugin.config import (
    PLUGIN_TYPE_PATTERN,
    PluginSpec,
    load_plugin_specs,
    parse_plugin_specs,
)
from mjfast.plugin.native import config_json
from support import arm_xml

PROPERTY = settings(max_examples=200, deadline=None, database=None)
NAMESPACE = "/mujoco_server"


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


def self_containing_entry() -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "pkg/A"}
    entry["opts"] = {"again": entry}
    return entry


def self_containing_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


# -- regressions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "pattern"), [
    ([{"type": "pkg/A"}, {"type": "pkg/B", "gains": nested(500)}],
     rf"^MujocoPlugins\[1\]\.gains.*: nested deeper than {MAX_DEPTH} levels"),
    ({"names": ["a"], "a": {"type": "pkg/A", "deep": nested(500)}},
     rf"^MujocoPlugins\.a\.deep.*: nested deeper than {MAX_DEPTH} levels"),
    ([self_containing_entry()], r"^MujocoPlugins\[0\]\.opts\.again: contains a reference"),
    ({"names": ["a"], "a": {"type": "pkg/A", "l": self_containing_list()}},
     r"^MujocoPlugins\.a\.l\[1\]: contains a reference to itself"),
    ({"names": nested(500)}, r"^MujocoPlugins\.names.*: nested deeper than"),
    ([[{"type": "pkg/A"}]] * 3 + [self_containing_list()], r"^MujocoPlugins\[3\]\[1\]: contains"),
])
def test_deep_or_self_containing_configuration_is_a_config_error(value: object,
                                                                 pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        parse_plugin_specs(value)


def test_deep_or_self_containing_configuration_through_the_parameter_server() -> None:
    with pytest.raises(ConfigError, match=r"'/MujocoPlugins\[0\]/opts/again': contains a ref"):
        ParameterServer({"MujocoPlugins": [self_containing_entry()]})
    params = ParameterServer()
    with pytest.raises(ConfigError, match=r"^<yaml text>: nested deeper than .* at line 3"):
        params.load_yaml("MujocoPlugins:\n  - type: pkg/A\n    deep: "
                         + "[" * 500 + "]" * 500 + "\n")
    with pytest.raises(ConfigError, match="contains a reference to itself"):
        params.load_yaml("MujocoPlugins:\n  - &e {type: pkg/A, self: *e}\n")
    assert load_plugin_specs(params, NAMESPACE) == []


@pytest.mark.parametrize("make", [self_containing_entry,
                                  lambda: {"type": "pkg/A", "deep": nested(500)}])
def test_the_env_refuses_such_configuration_with_a_config_error(make) -> None:
    with pytest.raises(ConfigError, match=r"MujocoPlugins\[0\]"):
        mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [make()]})


def test_config_json_refuses_deep_or_self_containing_configuration() -> None:
    entry = self_containing_entry()
    with pytest.raises(ConfigError, match=r"^plugin configuration\.opts\.again: contains"):
        config_json(entry)
    with pytest.raises(ConfigError, match=r"^plugin configuration\.d.*: nested deeper than"):
        config_json({"d": nested(500)})
    assert config_json({"d": nested(MAX_DEPTH - 1)}).count("[") == (MAX_DEPTH) // 2


def test_a_value_that_cannot_be_copied_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^MujocoPlugins\[0\]: the value of 'lock' cannot be "
                                          r"copied \(TypeError"):
        parse_plugin_specs([{"type": "pkg/A", "lock": threading.Lock()}])


@pytest.mark.parametrize("value", [
    [{"type": "pkg/A", "name": "~a"}],
    {"names": ["~a"], "~a": {"type": "pkg/A"}},
])
def test_a_plugin_name_starting_with_tilde_is_refused(value: object) -> None:
    # Its node namespace `<env namespace>/~a` would read as a private name.
    with pytest.raises(ConfigError, match=r"invalid plugin name '~a' .*not starting with '~'"):
        parse_plugin_specs(value)


# -- properties -----------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=4))
keys = st.one_of(st.sampled_from(["opt", "gains", "a", "b", "type", "name", "names", "~t",
                                  "a/b", ""]),
                 st.text(max_size=3), st.integers(-1, 2))
VALID_TYPES = ["pkg/A", "pkg/B", "other.pkg-1/A", "p/_C9"]
BAD_TYPES = ["pkg/A/B", "A", "/A", "pkg/1A", "pkg/", ""]
VALID_NAMES = ["a", "b", "A", "B", "A_0", "x y"]
BAD_NAMES = ["~x", "x/y", ""]
anything = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)


def one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in `n` draws (sampled_from is close to uniform; small integer ranges
    are not)."""
    return draw(st.sampled_from(range(n))) == 0


def mostly(draw: st.DrawFn, good: list[Any], bad: list[Any]) -> Any:
    """Mostly one of `good`, else one of `bad` or anything at all."""
    if not one_in(draw, 12):
        return draw(st.sampled_from(good))
    return draw(st.sampled_from(bad) | anything)


@st.composite
def entries(draw: st.DrawFn) -> Any:
    """Mostly plausible entries (a mapping with a type), sometimes anything at all."""
    if one_in(draw, 30):
        return draw(anything)
    entry = draw(st.dictionaries(keys, anything, max_size=3))
    if not one_in(draw, 30):
        entry["type"] = mostly(draw, VALID_TYPES, BAD_TYPES)
    else:
        entry.pop("type", None)
    if one_in(draw, 3):
        entry["name"] = mostly(draw, VALID_NAMES, BAD_NAMES)
    else:
        entry.pop("name", None)
    return entry


@st.composite
def named_layouts(draw: st.DrawFn) -> Any:
    names = draw(st.lists(st.sampled_from(VALID_NAMES), max_size=4, unique=True))
    if one_in(draw, 8):
        names.append(mostly(draw, VALID_NAMES, BAD_NAMES))
    value: dict[Any, Any] = {"names": names}
    for name in names:
        if isinstance(name, str) and not one_in(draw, 30):
            value[name] = draw(entries())
    if one_in(draw, 10):
        value[draw(keys)] = draw(entries())
    return value


@st.composite
def plugin_configs(draw: st.DrawFn) -> Any:
    """A ROS 1 list or a ROS 2 mapping, or now and then any value at all."""
    if one_in(draw, 8):
        return draw(anything)
    if draw(st.booleans()):
        return draw(st.lists(entries(), max_size=5))
    return draw(named_layouts())




def check_spec_section_2(value: Any, specs: list[PluginSpec]) -> None:
    """What SPEC §2 says of the specs `value` configures."""
    assert all(PLUGIN_TYPE_PATTERN.fullmatch(spec.type) for spec in specs)
    names = [spec.name for spec in specs]
    assert len(set(names)) == len(names)
    assert all(isinstance(n, str) and n and "/" not in n and not n.startswith("~")
               for n in names)
    assert [spec.index for spec in specs] == list(range(len(specs)))
    if isinstance(value, list):  # ROS 1: list order; `name` is consumed, not configuration
        assert len(specs) == len(value)
        unnamed = Counter(e["type"].split("/")[1] for e in value if "name" not in e)
        for i, (spec, entry) in enumerate(zip(specs, value, strict=True)):
            assert spec.type == entry["type"]
            assert spec.config == {k: v for k, v in entry.items() if k not in ("type", "name")}
            if "name" in entry:
                assert spec.name == entry["name"]
            else:  # "<ClassName>", or "<ClassName>_<index>" if repeated
                class_name = entry["type"].split("/")[1]
                assert spec.name == (class_name if unnamed[class_name] == 1
                                     else f"{class_name}_{i}")
    else:  # ROS 2: `names` order; `name` inside an entry is configuration
        assert names == value["names"]
        for spec in specs:
            entry = value[spec.name]
            assert spec.type == entry["type"]
            assert spec.config == {k: v for k, v in entry.items() if k != "type"}


@PROPERTY
@given(value=plugin_configs())
def test_any_value_gives_specs_satisfying_spec_2_or_a_config_error(value: Any) -> None:
    try:
        specs = parse_plugin_specs(value)
    except ConfigError as error:
        assert str(error).startswith("MujocoPlugins")
        return
    check_spec_section_2(value, specs)


@PROPERTY
@given(value=plugin_configs(), where=st.sampled_from(["/", NAMESPACE, "/elsewhere"]))
def test_through_the_parameter_server_as_the_env_reads_it(value: Any, where: str) -> None:
    name = f"{where.rstrip('/')}/MujocoPlugins"
    params = ParameterServer()
    try:
        params.set(name, value)
    except ConfigError as error:
        assert str(error).startswith(f"parameter '{name}")
        return
    try:
        specs = load_plugin_specs(params, NAMESPACE)
    except ConfigError as error:
        assert str(error).startswith(name)
        return
    if where == "/elsewhere":  # not on the env's search path
        assert specs == []
    else:
        check_spec_section_2(params.get(name), specs)


@PROPERTY
@given(depth=st.integers(0, MAX_DEPTH + 3))
def test_configuration_depth_limit_is_exact(depth: int) -> None:
    # The entry's value sits at level 2 (list, entry); its own containers add the rest.
    value = [{"type": "pkg/A", "v": nested(depth)}]
    if depth + 2 <= MAX_DEPTH:
        (spec,) = parse_plugin_specs(value)
        assert spec.config == {"v": nested(depth)}
        assert config_json(spec.config)
    else:
        with pytest.raises(ConfigError, match=r"^MujocoPlugins\[0\]\.v.*nested deeper than"):
            parse_plugin_specs(value)
