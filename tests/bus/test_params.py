"""Tests of mjfast.bus.params: the ParameterServer store, YAML loading, search and name
resolution."""

from __future__ import annotations

import re
import threading

import pytest

from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import ConfigError

# -- resolve_name ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/a/b", "/a/b"),
        ("//a///b/", "/a/b"),
        ("/", "/"),
        ("b", "/ns/b"),
        ("b/c/", "/ns/b/c"),
        ("", "/ns"),
    ],
)
def test_resolve_name_absolute_and_relative(name: str, expected: str) -> None:
    assert resolve_name(name, "/ns") == expected


def test_resolve_name_relative_to_root_by_default() -> None:
    assert resolve_name("a/b") == "/a/b"


def test_resolve_name_private_joins_private_namespace() -> None:
    assert resolve_name("~p", "/ns", "/ns/node") == "/ns/node/p"
    assert resolve_name("~/p/q", "/ns", "/ns/node/") == "/ns/node/p/q"


def test_resolve_name_private_without_private_namespace_is_value_error() -> None:
    with pytest.raises(ValueError, match="~p"):
        resolve_name("~p", "/ns")


# -- get / set / has / delete ---------------------------------------------------------------------


def test_initial_dict_is_set_at_root() -> None:
    params = ParameterServer({"a": {"b": 1}, "c": "x"})
    assert params.get("/a/b") == 1
    assert params.get("c") == "x"
    assert params.to_dict() == {"a": {"b": 1}, "c": "x"}


def test_set_then_get_relative_is_relative_to_root() -> None:
    params = ParameterServer()
    params.set("gain", 2.5)
    assert params.get("/gain") == 2.5


def test_mapping_set_at_a_is_visible_as_a_b() -> None:
    params = ParameterServer()
    params.set("/a", {"b": {"c": [1, 2]}})
    assert params.get("/a/b") == {"c": [1, 2]}
    assert params.get("/a/b/c") == [1, 2]
    assert params.has("/a/b/c")


def test_set_deep_name_creates_intermediate_mappings() -> None:
    params = ParameterServer()
    params.set("/a/b/c", True)
    assert params.get("/a") == {"b": {"c": True}}


def test_set_replaces_instead_of_merging() -> None:
    params = ParameterServer({"a": {"x": 1, "y": 2}})
    params.set("/a", {"z": 3})
    assert params.get("/a") == {"z": 3}
    assert not params.has("/a/x")


def test_set_below_a_scalar_replaces_the_scalar_with_a_namespace() -> None:
    params = ParameterServer({"a": 1})
    params.set("/a/b", 2)
    assert params.get("/a") == {"b": 2}


def test_get_missing_raises_key_error_naming_the_key() -> None:
    params = ParameterServer({"a": {"b": 1}})
    with pytest.raises(KeyError, match="/a/missing"):
        params.get("/a/missing")
    with pytest.raises(KeyError, match="/a/b/c"):
        params.get("/a/b/c")  # below a scalar


def test_get_missing_with_default_returns_default() -> None:
    params = ParameterServer()
    assert params.get("/nope", None) is None
    assert params.get("/nope", default=7) == 7


def test_get_returns_deep_copies() -> None:
    params = ParameterServer({"a": {"list": [1, {"k": 2}]}})
    value = params.get("/a")
    value["list"][1]["k"] = 99
    value["new"] = 1
    assert params.get("/a") == {"list": [1, {"k": 2}]}


def test_set_stores_a_copy_of_the_callers_value() -> None:
    params = ParameterServer()
    value = {"x": [1]}
    params.set("/a", value)
    value["x"].append(2)
    assert params.get("/a/x") == [1]


def test_has() -> None:
    params = ParameterServer({"a": {"b": 0}})
    assert params.has("/a")
    assert params.has("a/b")
    assert params.has("/")
    assert not params.has("/a/c")


def test_delete_removes_subtree() -> None:
    params = ParameterServer({"a": {"b": {"c": 1}, "d": 2}})
    params.delete("/a/b")
    assert params.to_dict() == {"a": {"d": 2}}


def test_delete_missing_raises_key_error_naming_it() -> None:
    params = ParameterServer()
    with pytest.raises(KeyError, match="/ghost"):
        params.delete("/ghost")


def test_private_names_are_rejected_by_the_server() -> None:
    params = ParameterServer()
    with pytest.raises(ValueError, match="~x"):
        params.get("~x")


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (object(), "object"),
        ({1, 2}, "set"),
        ({"ok": [1, b"raw"]}, "bytes"),
    ],
)
def test_invalid_values_raise_config_error_naming_parameter_and_type(
    value: object, type_name: str
) -> None:
    params = ParameterServer()
    with pytest.raises(ConfigError, match=type_name) as info:
        params.set("/bad/param", value)
    assert "/bad/param" in str(info.value)
    assert not params.has("/bad")


def test_non_str_mapping_key_raises_config_error() -> None:
    params = ParameterServer()
    with pytest.raises(ConfigError, match=r"/p.*mapping key 3 is a int"):
        params.set("/p", {3: "x"})


def test_all_yaml_types_round_trip() -> None:
    value = {"b": True, "i": 3, "f": 1.5, "s": "x", "n": None, "l": [1, [2, {"d": "e"}]]}
    params = ParameterServer()
    params.set("/v", value)
    assert params.get("/v") == value


def test_tuple_is_stored_as_list() -> None:
    params = ParameterServer()
    params.set("/t", (1, 2))
    assert params.get("/t") == [1, 2]


# -- to_dict --------------------------------------------------------------------------------------


def test_to_dict_of_namespace_is_deep_copy() -> None:
    params = ParameterServer({"ns": {"a": {"b": 1}}})
    snapshot = params.to_dict("/ns")
    snapshot["a"]["b"] = 2
    assert snapshot != params.to_dict("/ns")
    assert params.to_dict("ns") == {"a": {"b": 1}}


def test_to_dict_of_absent_namespace_is_empty() -> None:
    assert ParameterServer().to_dict("/nothing/here") == {}


def test_to_dict_of_scalar_is_value_error() -> None:
    params = ParameterServer({"a": 1})
    with pytest.raises(ValueError, match="/a"):
        params.to_dict("/a")


# -- load_yaml ------------------------------------------------------------------------------------


def test_load_yaml_from_text() -> None:
    params = ParameterServer()
    params.load_yaml("a:\n  b: 1\n  c: [x, y]\n")
    assert params.get("/a/b") == 1
    assert params.get("/a/c") == ["x", "y"]


def test_load_yaml_from_path_object_and_str_path(tmp_path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("rate: 500\nrobot:\n  name: arm\n", encoding="utf-8")
    params = ParameterServer()
    params.load_yaml(path)
    assert params.get("/robot/name") == "arm"
    other = ParameterServer()
    other.load_yaml(str(path), namespace="/sim")
    assert other.get("/sim/rate") == 500


def test_load_yaml_into_namespace() -> None:
    params = ParameterServer()
    params.load_yaml("gain: 2.0\n", namespace="/sim/robot")
    assert params.to_dict() == {"sim": {"robot": {"gain": 2.0}}}


def test_load_yaml_merges_recursively() -> None:
    params = ParameterServer({"a": {"keep": 1, "inner": {"x": 1, "y": 2}}, "b": [1]})
    params.load_yaml("a:\n  inner:\n    y: 20\n    z: 30\nb: [2]\n")
    assert params.to_dict() == {"a": {"keep": 1, "inner": {"x": 1, "y": 20, "z": 30}}, "b": [2]}


def test_load_yaml_syntax_error_is_config_error_with_line() -> None:
    params = ParameterServer()
    with pytest.raises(ConfigError, match=r"<yaml text>: invalid YAML at line 3") as info:
        params.load_yaml("a: 1\nb: 2\n  c: 3\n")
    assert isinstance(info.value, ValueError)
    assert params.to_dict() == {}


def test_load_yaml_syntax_error_names_the_file(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("a:\n  b: 1\n c: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml.*line"):
        ParameterServer().load_yaml(path)


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "just a string", ""])
def test_load_yaml_top_level_must_be_mapping(text: str) -> None:
    with pytest.raises(ConfigError, match=r"<yaml text>.*expected a mapping"):
        ParameterServer().load_yaml(text)


def test_load_yaml_mistyped_path_hints_that_no_file_exists(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no file exists"):
        ParameterServer().load_yaml(str(tmp_path / "missing.yaml"))


def test_load_yaml_invalid_key_is_atomic() -> None:
    params = ParameterServer({"keep": 1})
    with pytest.raises(ConfigError, match="/ns/good"):
        params.load_yaml("good:\n  1: x\nother: 2\n", namespace="/ns")
    assert params.to_dict() == {"keep": 1}


# -- search ---------------------------------------------------------------------------------------


def _plugins_params() -> ParameterServer:
    return ParameterServer(
        {"MujocoPlugins": ["global"], "sim": {"MujocoPlugins": ["sim"], "robot": {"x": 1}}}
    )


def test_search_finds_nearest_parent() -> None:
    assert _plugins_params().search("/sim/robot", "MujocoPlugins") == "/sim/MujocoPlugins"


def test_search_prefers_the_namespace_itself() -> None:
    params = _plugins_params()
    params.set("/sim/robot/MujocoPlugins", ["own"])
    assert params.search("/sim/robot", "MujocoPlugins") == "/sim/robot/MujocoPlugins"


def test_search_falls_back_to_global() -> None:
    assert _plugins_params().search("/other/deep", "MujocoPlugins") == "/MujocoPlugins"


def test_search_returns_none_when_absent() -> None:
    assert ParameterServer({"a": {"b": 1}}).search("/a", "MujocoPlugins") is None


def test_search_rejects_absolute_key() -> None:
    with pytest.raises(ValueError, match="/abs"):
        ParameterServer().search("/a", "/abs")


# -- thread safety --------------------------------------------------------------------------------


def test_concurrent_sets_all_land() -> None:
    params = ParameterServer()

    def writer(i: int) -> None:
        for j in range(200):
            params.set(f"/w{i}/k{j}", j)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snapshot = params.to_dict()
    assert len(snapshot) == 8
    assert all(len(v) == 200 for v in snapshot.values())


def test_a_mapping_key_with_a_slash_is_a_relative_name() -> None:
    # Names from MjSpec.attach prefixes and composed models (`left/pan_pos`) are keys of
    # name-keyed parameters; the key is read as ROS reads a relative name: nested namespaces.
    params = ParameterServer({"ns": {"initial": {"left/pan_pos": 1, "left/tilt": 2,
                                                 "right": {"pan_pos": 3}, "a/b/c": [4]}}})
    assert params.get("/ns/initial") == {"left": {"pan_pos": 1, "tilt": 2},
                                         "right": {"pan_pos": 3}, "a": {"b": {"c": [4]}}}
    assert params.get("/ns/initial/left/pan_pos") == 1
    params.load_yaml("ns:\n  initial:\n    right/tilt: 5\n    left: {roll: 6}\n")
    assert params.get("/ns/initial/right") == {"pan_pos": 3, "tilt": 5}
    assert params.get("/ns/initial/left") == {"pan_pos": 1, "tilt": 2, "roll": 6}
    params.set("/x", {"p/q": {"r": 1}, "p": {"q": {"s": 2}}})  # meeting mappings merge
    assert params.get("/x") == {"p": {"q": {"r": 1, "s": 2}}}


@pytest.mark.parametrize(("value", "fragment"), [
    ({"a/b": 1, "a": 2}, "mapping key 'a' sets '/p/a', which another key"),
    ({"a": {"b": 1}, "a/b": 2}, "mapping key 'a/b' sets '/p/a/b', which another key"),
    ({"a/b": {"c": 1}, "a": {"b": {"c": 2}}}, "mapping key 'a' sets '/p/a'"),
    ({"a/": 1}, "mapping key 'a/' is not a valid name segment"),
    ({"/a": 1}, "mapping key '/a' is not a valid name segment"),
    ({"a//b": 1}, "mapping key 'a//b' is not a valid name segment"),
    ({"a/~b": 1}, "mapping key 'a/~b' is not a valid name segment"),
])
def test_a_slash_key_that_clashes_or_has_an_empty_segment_is_refused(value, fragment) -> None:
    params = ParameterServer({"keep": 1})
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        params.set("/p", value)
    assert params.to_dict() == {"keep": 1}
