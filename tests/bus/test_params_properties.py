"""Hardening of mjfast.bus.params (SPEC §2, §12): names, values and YAML documents a user gives the
parameter server are stored and read back exactly, or refused with a clear error (ConfigError
for values and documents, ValueError/TypeError/KeyError for names), never another exception.
Regression tests for what was found first, then Hypothesis properties."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mjfast.bus.params import MAX_DEPTH, ParameterServer, check_nesting, resolve_name
from mjfast.errors import ConfigError

# Each property runs in well under a second; no example database is written into the tree.
PROPERTY = settings(max_examples=200, deadline=None, database=None)


def nested(depth: int, leaf: Any = 1) -> Any:
    """`leaf` inside `depth` containers, alternating mappings and lists."""
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


def self_containing_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["x"] = {"back": value}
    return value


def self_containing_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


# -- regressions: depth and self-reference --------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: nested(500), lambda: nested(MAX_DEPTH)])
def test_a_value_nested_too_deep_is_a_config_error_and_stores_nothing(make) -> None:
    params = ParameterServer({"keep": 1})
    with pytest.raises(ConfigError, match=rf"'/p/.*': nested deeper than {MAX_DEPTH} levels"):
        params.set("/p", make())  # the value's leaf sits at level MAX_DEPTH + 1 (or far below)
    assert params.to_dict() == {"keep": 1}


def test_the_depth_limit_counts_name_segments_and_nested_values() -> None:
    params = ParameterServer()
    params.set("/a/b", nested(MAX_DEPTH - 2))  # the leaf at exactly MAX_DEPTH: accepted
    assert params.get("/a/b") == nested(MAX_DEPTH - 2)
    assert params.to_dict() == {"a": {"b": nested(MAX_DEPTH - 2)}}
    with pytest.raises(ConfigError, match="nested deeper than"):
        params.set("/a/b/c", nested(MAX_DEPTH - 2))
    deepest = "/" + "/".join(["n"] * MAX_DEPTH)
    params.set(deepest, 1)
    assert params.get(deepest) == 1
    with pytest.raises(ConfigError, match="nested deeper than"):
        params.set(deepest + "/one_more", 1)
    assert not params.has(deepest + "/one_more")


@pytest.mark.parametrize("make", [self_containing_dict, self_containing_list])
def test_a_value_containing_itself_is_a_config_error(make) -> None:
    params = ParameterServer()
    with pytest.raises(ConfigError, match=r"'/p.*': contains a reference to itself") as info:
        params.set("/p", make())
    assert isinstance(info.value, ValueError)
    assert not params.has("/p")
    with pytest.raises(ConfigError, match="reference to itself"):
        ParameterServer({"p": make()})


def test_a_value_shared_but_not_cyclic_is_stored_as_copies() -> None:
    shared = {"x": [1, 2]}
    params = ParameterServer()
    params.set("/p", {"a": shared, "b": shared, "c": [shared, shared]})
    assert params.get("/p/c") == [{"x": [1, 2]}, {"x": [1, 2]}]


def test_yaml_nested_too_deep_is_a_config_error_with_its_line() -> None:
    params = ParameterServer({"keep": 1})
    text = "ok: 1\ndeep: " + "[" * 500 + "]" * 500 + "\n"
    with pytest.raises(ConfigError, match=rf"<yaml text>: nested deeper than {MAX_DEPTH} levels "
                                          r"at line 2"):
        params.load_yaml(text)
    assert params.to_dict() == {"keep": 1}


def test_yaml_depth_counts_the_namespace() -> None:
    # The top-level mapping is the namespace itself: its innermost list holds a scalar at level
    # len(namespace) + MAX_DEPTH - 1 + 1.
    text = "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "\n"
    params = ParameterServer()
    params.load_yaml(text)
    assert params.get("/a") == yaml.safe_load(text)["a"]
    with pytest.raises(ConfigError, match=r"'/ns/a.*': nested deeper than"):
        params.load_yaml(text, namespace="/ns")
    assert not params.has("/ns")
    # An empty list at exactly MAX_DEPTH holds nothing deeper: accepted, as by set().
    params.load_yaml("b: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n")
    assert params.get("/b") == yaml.safe_load("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(ConfigError, match=rf"at line 1, column {MAX_DEPTH + 4} "):
        params.load_yaml("c: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n")


@pytest.mark.parametrize("text", ["a: &x [1, *x]\n", "a: &x {b: *x}\n",
                                  "MujocoPlugins:\n  - &e {type: p/A, self: *e}\n"])
def test_yaml_alias_to_itself_is_a_config_error(text: str) -> None:
    params = ParameterServer()
    with pytest.raises(ConfigError, match="contains a reference to itself"):
        params.load_yaml(text)
    assert params.to_dict() == {}


@pytest.mark.parametrize(("text", "fragment"), [
    ("a: 2001-13-45\n", "month must be in 1..12"),
    ("a: !!int x\n", "invalid literal"),
    ("a: !!int ''\n", "IndexError"),
])
def test_yaml_values_the_constructor_refuses_are_config_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=rf"<yaml text>: invalid YAML value: .*{fragment}"):
        ParameterServer().load_yaml(text)


def test_check_nesting_names_the_path_and_ignores_other_objects() -> None:
    check_nesting({"a": [object(), {"b": nested(MAX_DEPTH - 3)}]}, "cfg")
    with pytest.raises(ConfigError, match=r"^cfg\.a\[1\]\.b.*: nested deeper than"):
        check_nesting({"a": [0, {"b": nested(MAX_DEPTH - 2)}]}, "cfg")
    with pytest.raises(ConfigError, match=r"^cfg\.x\.back: contains a reference to itself"):
        check_nesting(self_containing_dict(), "cfg")
    with pytest.raises(ConfigError, match=r"^cfg\[1\]: contains a reference to itself"):
        check_nesting(self_containing_list(), "cfg")


# -- regressions: names ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["/a/~b", "a/~b", "~p/~q", "/~"])
def test_a_tilde_starting_a_later_segment_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=r"invalid name .*segment '~.*' starts with '~'"):
        resolve_name(name, "/ns", "/ns/node")
    params = ParameterServer()
    for call in (lambda: params.set(name, 1), lambda: params.get(name), lambda: params.has(name),
                 lambda: params.delete(name)):
        with pytest.raises(ValueError, match=r"(invalid|private) name '~?[/a]*~"):
            call()


def test_a_tilde_inside_a_segment_is_an_ordinary_character() -> None:
    params = ParameterServer()
    params.set("/a~b/c~", 1)
    assert params.get("a~b") == {"c~": 1}


def test_a_mapping_key_starting_with_tilde_is_refused() -> None:
    # It could never be read back by name.
    with pytest.raises(ConfigError, match=r"'/p': mapping key '~x' is not a valid name segment"):
        ParameterServer().set("/p", {"~x": 1})


@pytest.mark.parametrize("key", [3, None, b"k", ("a",)])
def test_search_with_a_key_that_is_not_a_str_is_a_type_error(key: object) -> None:
    with pytest.raises(TypeError, match="search key must be a str"):
        ParameterServer().search("/a", key)  # type: ignore[arg-type]


# -- properties: names ----------------------------------------------------------------------------

NAME_CHARS = st.sampled_from(["a", "b", "/", "/", "~", " ", ".", "é"])
names = st.one_of(
    st.text(NAME_CHARS, max_size=12),
    st.lists(st.sampled_from(["a", "b", "~c", "", "d~"]), max_size=MAX_DEPTH + 3).map("/".join),
    st.integers(), st.none(), st.binary(max_size=3), st.lists(st.text(max_size=2), max_size=2),
)


def expected_absolute(name: object) -> str | type[Exception]:
    """What the server should resolve `name` to, or the error it should raise."""
    if not isinstance(name, str):
        return TypeError
    if name.startswith("~"):
        return ValueError  # a private name, and the server has no private namespace
    segments = [s for s in name.split("/") if s]
    if any(s.startswith("~") for s in segments):
        return ValueError
    return "/" + "/".join(segments)


@PROPERTY
@given(name=names)
def test_names_round_trip_through_every_call_or_are_refused(name: Any) -> None:
    params = ParameterServer()
    absolute = expected_absolute(name)
    if not isinstance(absolute, str):
        for call in (lambda: params.set(name, 1), lambda: params.get(name),
                     lambda: params.get(name, None), lambda: params.has(name),
                     lambda: params.delete(name), lambda: params.to_dict(name),
                     lambda: params.search(name, "k")):
            with pytest.raises(absolute) as info:
                call()
            assert str(info.value) and not isinstance(info.value, KeyError)
        return
    segments = [s for s in absolute.split("/") if s]
    if not segments:  # the root: only a mapping can be stored there, and it cannot be deleted
        with pytest.raises(ConfigError, match="root must be a mapping"):
            params.set(name, 1)
        params.set(name, {"k": 1})
        assert params.get(name) == {"k": 1} == params.to_dict(name)
        with pytest.raises(ValueError, match="root"):
            params.delete(name)
        return
    if len(segments) > MAX_DEPTH:
        with pytest.raises(ConfigError, match="nested deeper than"):
            params.set(name, 1)
        assert params.to_dict() == {}
        return
    params.set(name, 1)
    assert params.get(name) == 1 == params.get(absolute)
    assert params.has(name)
    parent = "/" + "/".join(segments[:-1])
    assert params.search(parent, segments[-1]) == absolute
    assert params.search(absolute, segments[-1]) == absolute  # found in the parent
    params.delete(name)
    assert not params.has(name)
    assert params.get(name, "gone") == "gone"
    with pytest.raises(KeyError, match=absolute):
        params.get(name)
    with pytest.raises(KeyError, match=absolute):
        params.delete(name)


# -- properties: values ---------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.text(max_size=5),
)
good_keys = st.text(st.sampled_from(["a", "b", "é", " ", "~"]), min_size=1, max_size=3).filter(
    lambda key: not key.startswith("~"))
# Keys the server refuses: not a str, empty, with a '/', or starting with '~'.
bad_keys = st.one_of(st.text(st.sampled_from(["a", "/", "~"]), max_size=2).filter(
    lambda key: not key or "/" in key or key.startswith("~")), st.integers(-2, 2), st.none())
oddities = st.one_of(st.binary(max_size=2), st.sets(st.integers(), max_size=2),
                     st.builds(object), st.complex_numbers(allow_nan=False))


def trees(leaves: st.SearchStrategy[Any], keys: st.SearchStrategy[Any],
          tuples: bool = True) -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        containers = st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)
        return (containers | st.tuples(children, children)) if tuples else containers
    return st.recursive(leaves, extend, max_leaves=20)


# Half storable values, half with something the server refuses somewhere (or not: by chance).
values = st.one_of(trees(scalars, good_keys),
                   trees(st.one_of(scalars, scalars, scalars, oddities), good_keys | bad_keys))
yaml_values = st.one_of(trees(scalars, good_keys, tuples=False),
                        trees(scalars, good_keys | bad_keys, tuples=False))


def expected_value(value: Any) -> Any:
    """`value` as the server stores it (tuples become lists); ConfigError if it is refused."""
    if isinstance(value, bool | int | float | str | type(None)):
        return value
    if isinstance(value, list | tuple):
        return [expected_value(item) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key or "/" in key or key.startswith("~"):
                raise ConfigError(f"bad key {key!r}")
            out[key] = expected_value(item)
        return out
    raise ConfigError(f"bad type {type(value).__name__}")


def outcome(value: Any) -> Any:
    try:
        return expected_value(value)
    except ConfigError:
        return ConfigError


@PROPERTY
@given(value=values, name=st.sampled_from(["/p", "p/q", "/a/b/c"]))
def test_values_round_trip_or_are_config_errors_storing_nothing(value: Any, name: str) -> None:
    params = ParameterServer({"keep": True})
    expected = outcome(value)
    if expected is ConfigError:
        with pytest.raises(ConfigError, match=r"parameter '/"):
            params.set(name, value)
        assert params.to_dict() == {"keep": True}
        with pytest.raises(ConfigError):
            ParameterServer({"p": value})
        return
    params.set(name, value)
    got = params.get(name)
    assert got == expected
    assert params.to_dict() == {"keep": True, **_tree(resolve_name(name), expected)}
    if isinstance(got, dict | list) and got:
        # Reads are copies: changing one changes nothing stored.
        got.clear()
        assert params.get(name) == expected
    assert ParameterServer({"p": value}).get("/p") == expected


def _tree(absolute: str, leaf: Any) -> dict[str, Any]:
    for segment in reversed(absolute.strip("/").split("/")):
        leaf = {segment: leaf}
    return leaf


@PROPERTY
@given(depth=st.integers(0, MAX_DEPTH + 5), segments=st.integers(1, 8))
def test_depth_limit_holds_exactly(depth: int, segments: int) -> None:
    name = "/" + "/".join(["s"] * segments)
    params = ParameterServer()
    if segments + depth <= MAX_DEPTH:
        params.set(name, nested(depth))
        assert params.get(name) == nested(depth)
        assert params.to_dict() == _tree(name, nested(depth))
    else:
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
            params.set(name, nested(depth))
        assert params.to_dict() == {}


# -- properties: YAML documents -------------------------------------------------------------------

YAML_CHARS = st.sampled_from([*"ab1.:-[]{},&*!<>|#'\"\n ?%@`~", "\n  ", "!!int ", "<<: "])


@PROPERTY
@given(text=st.lists(YAML_CHARS, max_size=40).map("".join))
def test_any_yaml_text_is_stored_or_a_config_error(text: str) -> None:
    params = ParameterServer({"keep": 1})
    try:
        document = yaml.safe_load(text)
    except Exception:
        document = ConfigError
    try:
        params.load_yaml(text, namespace="/ns")
    except ConfigError as error:
        assert str(error).startswith("<yaml text>") or "parameter '/ns" in str(error)
        assert params.to_dict() == {"keep": 1}
        return
    assert isinstance(document, dict)
    assert _same(params.get("/ns"), document)


@PROPERTY
@given(value=yaml_values)
def test_yaml_documents_round_trip_or_are_config_errors(value: Any) -> None:
    text = yaml.safe_dump({"p": value})
    expected = outcome(value)
    params = ParameterServer()
    if expected is ConfigError:
        with pytest.raises(ConfigError, match=r"parameter '/p"):
            params.load_yaml(text)
        assert params.to_dict() == {}
    else:
        params.load_yaml(text)
        assert params.get("/p") == expected


def _same(a: Any, b: Any) -> bool:
    """Equality in which NaN equals NaN (YAML's .nan)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)
