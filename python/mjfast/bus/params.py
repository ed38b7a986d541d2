"""The ROS-style parameter server: a namespaced tree of YAML-typed values, and name resolution.

Owns storage, `/`-separated name resolution, YAML loading and the nearest-key search. It does not
know what any parameter means: `plugin_config` interprets `MujocoPlugins`, `node` scopes names.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import pathlib
import reprlib
import threading
from collections.abc import Iterator
from typing import Any

import yaml

from mjfast.errors import ConfigError

__all__ = ["MAX_DEPTH", "ParameterServer", "check_nesting", "resolve_name"]

MAX_DEPTH = 100
"""How many levels parameters may nest, counting from `/`: each name segment and each nested list
or mapping is one level (`/a/b` = [[1]] puts the 1 at level 4). Deeper values, and values that
contain themselves, are refused with ConfigError, so that every walk and copy of the tree (and of
a plugin's configuration) stays well inside Python's recursion limit."""

_MISSING: Any = object()
# Bounds what an error message shows of a user's value, however large or deep it is.
_brief = reprlib.Repr()
_brief.maxstring = _brief.maxother = 60

# None is included because YAML's `key:` with no value loads as None; dropping it would make
# ordinary parameter files fail to load.
_SCALAR_TYPES = (bool, int, float, str, type(None))
_ALLOWED = "bool, int, float, str, None, list or mapping with str keys"


# Cached: every bus publish resolves its topic, twice (an action's goal publishes its status
# three times), and the same few names come back.
@functools.lru_cache(maxsize=4096)
def _normalise(name: str, original: str) -> str:
    """Absolute form of `name`: one leading slash, no empty segments, no trailing slash.

    ValueError naming `original` for a segment that starts with '~': only a whole name may be
    private, and such a segment would be read as a private name when used as a relative one.
    """
    segments = [s for s in name.split("/") if s]
    for segment in segments:
        if segment.startswith("~"):
            raise ValueError(
                f"invalid name {_brief.repr(original)}: segment {_brief.repr(segment)} starts "
                f"with '~' (only a whole name may be private, as '~p' or '~p/q')"
            )
    return "/" + "/".join(segments)


def resolve_name(name: str, namespace: str = "/", private_namespace: str | None = None) -> str:
    """Resolve `name` the way ROS does: `/abs` stays, `rel` joins `namespace`, `~p` joins the
    private namespace (ValueError when none is given).

    Empty segments are dropped (`//a/` is `/a`); a segment starting with '~' anywhere but at
    the start of `name` is a ValueError; a `name` that is not a str is a TypeError.
    """
    if not isinstance(name, str):
        raise TypeError(f"a parameter/topic name must be a str, got {type(name).__name__}")
    if name.startswith("~"):
        if private_namespace is None:
            raise ValueError(
                f"private name {_brief.repr(name)} needs a private namespace to resolve in"
            )
        return _normalise(f"{private_namespace}/{name[1:]}", name)
    if name.startswith("/"):
        return _normalise(name, name)
    return _normalise(f"{namespace}/{name}", name)


def _segments(absolute: str) -> list[str]:
    return [s for s in absolute.split("/") if s]


def _join(parent: str, key: str) -> str:
    return f"{parent.rstrip('/')}/{key}"


def _shown(name: str) -> str:
    # A name at the depth limit is hundreds of characters long; its two ends say where it is.
    return name if len(name) <= 120 else f"{name[:60]}...{name[-50:]}"


def _validated(value: Any, name: str, level: int, ancestors: set[int] | None = None) -> Any:
    """A private copy of `value` in YAML types (tuples become lists); ConfigError otherwise.

    `level` is the nesting level of `value` itself (see MAX_DEPTH); `ancestors` holds the ids of
    the lists and mappings that enclose it, so that one containing itself is caught.
    """
    if level > MAX_DEPTH:
        raise ConfigError(
            f"parameter '{_shown(name)}': nested deeper than {MAX_DEPTH} levels (name segments "
            f"plus nested lists and mappings; see mjfast.bus.params.MAX_DEPTH)"
        )
    if isinstance(value, _SCALAR_TYPES):
        return value
    if not isinstance(value, list | tuple | dict):
        raise ConfigError(
            f"parameter '{_shown(name)}': unsupported value type '{type(value).__name__}' "
            f"(expected {_ALLOWED})"
        )
    if ancestors is None:
        ancestors = set()
    if id(value) in ancestors:
        raise ConfigError(
            f"parameter '{_shown(name)}': contains a reference to itself (a list or mapping "
            f"that contains itself cannot be stored)"
        )
    ancestors.add(id(value))
    try:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                _check_key(key, name)
                segments = key.split("/")
                stored = _validated(item, _join(name, key), level + len(segments), ancestors)
                _insert(out, segments, stored, name, key)
            return out
        return [
            _validated(item, f"{name}[{i}]", level + 1, ancestors)
            for i, item in enumerate(value)
        ]
    finally:
        ancestors.discard(id(value))


def _check_key(key: object, name: str) -> None:
    if not isinstance(key, str):
        raise ConfigError(
            f"parameter '{_shown(name)}': mapping key {_brief.repr(key)} is a "
            f"{type(key).__name__} (expected str keys)"
        )
    if any(not segment or segment.startswith("~") for segment in key.split("/")):
        # Such a key would be unreachable by name, or read back under a different name.
        raise ConfigError(
            f"parameter '{_shown(name)}': mapping key {_brief.repr(key)} is not a valid name "
            f"segment (expected a non-empty str, or '/'-separated ones, none starting with '~')"
        )


def _insert(out: dict[str, Any], segments: list[str], value: Any, name: str, key: str) -> None:
    """Stores `value` at the relative name `segments` inside `out`, as ROS reads a mapping key
    with '/' (`left/pan_pos: 1` is `left: {pan_pos: 1}`, reachable as `<name>/left/pan_pos`).
    Mappings that meet merge; ConfigError naming `key` where a value would replace another."""

    def clash() -> ConfigError:
        return ConfigError(
            f"parameter '{_shown(name)}': mapping key {_brief.repr(key)} sets "
            f"'{_shown(_join(name, '/'.join(segments)))}', which another key of the same mapping "
            f"sets too"
        )

    node = out
    for segment in segments[:-1]:
        child = node.setdefault(segment, {})
        if not isinstance(child, dict):
            raise clash()
        node = child
    last = segments[-1]
    if last not in node:
        node[last] = value
    elif isinstance(node[last], dict) and isinstance(value, dict):
        _merge_disjoint(node[last], value, clash)
    else:
        raise clash()


def _merge_disjoint(target: dict[str, Any], source: dict[str, Any], clash: Any) -> None:
    for key, value in source.items():
        if key not in target:
            target[key] = value
        elif isinstance(target[key], dict) and isinstance(value, dict):
            _merge_disjoint(target[key], value, clash)
        else:
            raise clash()


def check_nesting(value: object, where: str, *, level: int = 0) -> None:
    """ConfigError naming `where` and the path below it if the lists, tuples and mappings in
    `value` (itself at `level`) nest deeper than MAX_DEPTH levels, or if one contains itself.

    Only containers are walked; what else `value` holds is not judged here.
    """
    path: list[str] = []
    ancestors: set[int] = set()

    def walk(item: object, item_level: int) -> None:
        if item_level > MAX_DEPTH:
            raise ConfigError(
                f"{_shown(where + ''.join(path))}: nested deeper than {MAX_DEPTH} levels "
                f"(see mjfast.bus.params.MAX_DEPTH)"
            )
        if not isinstance(item, list | tuple | dict):
            return
        if id(item) in ancestors:
            raise ConfigError(
                f"{_shown(where + ''.join(path))}: contains a reference to itself (a list or "
                f"mapping that contains itself is not a valid configuration)"
            )
        ancestors.add(id(item))
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            path.append(f".{key}" if isinstance(item, dict) and isinstance(key, str)
                        else f"[{_brief.repr(key)}]")
            walk(child, item_level + 1)
            path.pop()
        ancestors.discard(id(item))

    walk(value, level)


def _parse_yaml(text: str, source: str) -> Any:
    """The one YAML document in `text`; ConfigError naming `source` for whatever is refused."""
    try:
        _check_yaml_depth(text, source)
        return yaml.safe_load(text)
    except ConfigError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: invalid YAML{where}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from exc
    except Exception as exc:
        # PyYAML's constructors let builtin errors through for malformed scalars (ValueError for
        # `2001-13-45`, IndexError for `!!int ''`); reading a document has no side effects, so
        # whatever it raises means the document is malformed.
        raise ConfigError(
            f"{source}: invalid YAML value: {type(exc).__name__}: {exc}"
        ) from exc


def _check_yaml_depth(text: str, source: str) -> None:
    # PyYAML composes nested collections recursively, so a document nested a few hundred levels
    # deep would end in RecursionError; the event stream is flat, so it is checked first. The
    # top-level mapping is the namespace itself (level 0 at `/`), so a collection `depth` events
    # deep sits at level depth - 1; `_validated` then counts the namespace's segments too.
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth - 1 > MAX_DEPTH:
                mark = event.start_mark
                raise ConfigError(
                    f"{source}: nested deeper than {MAX_DEPTH} levels at line {mark.line + 1}, "
                    f"column {mark.column + 1} (see mjfast.bus.params.MAX_DEPTH)"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _merge(target: dict[str, Any], source: dict[str, Any]) -> None:
    """Merge `source` into `target` recursively: mappings merge, everything else replaces."""
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


class ParameterServer:
    """A thread-safe, hierarchical parameter store with ROS naming (`/a/b`, relative to `/`).

    `set` replaces the value at a name (like `rosparam set`); `load_yaml` merges mappings
    recursively (like `rosparam load`). Reads return deep copies. A mapping key with '/' is a
    relative name (`{"left/pan": 1}` is stored as `{"left": {"pan": 1}}`, read back at
    `.../left/pan`), so that model names from composed models can key parameters; a key with an
    empty segment or one starting with '~', or one that sets what another key of the same
    mapping sets, is a ConfigError.
    """

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        # Plugins read and write parameters through their nodes on whatever thread runs their
        # callbacks (the physics thread among them) while user code does too. A plain Lock: each
        # public method takes it once, and what runs under it (the private helpers that expect
        # it held, copies of YAML-typed values) never calls back into the server.
        self._lock = threading.Lock()  # a leaf of the lock order (src/_core/env/env_core.h)
        self._root: dict[str, Any] = {}
        # The open reads_recorded() blocks' sets (under the lock): each read adds its name.
        self._read_logs: list[set[str]] = []
        if initial is not None:
            if not isinstance(initial, dict):
                raise ConfigError(
                    f"initial parameters must be a mapping, got {type(initial).__name__}"
                )
            self._root = _validated(initial, "/", 0)

    # -- lookup -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def reads_recorded(self) -> Iterator[set[str]]:
        """For the block: the set of absolute names read (get, has, search hits, to_dict), from
        any thread; a name stands for everything under it. The env learns this way which of its
        parameters a plugin's load read."""
        log: set[str] = set()
        with self._lock:
            self._read_logs.append(log)
        try:
            yield log
        finally:
            with self._lock:
                self._read_logs.remove(log)

    def _read(self, absolute: str) -> None:
        """Notes a read of `absolute` for the open reads_recorded() blocks. Caller holds the
        lock."""
        for log in self._read_logs:
            log.add(absolute)

    def _find(self, absolute: str) -> Any:
        """The stored (not copied) value at `absolute`, or _MISSING. Caller holds the lock."""
        node: Any = self._root
        for segment in _segments(absolute):
            if not isinstance(node, dict) or segment not in node:
                return _MISSING
            node = node[segment]
        return node

    def get(self, name: str, default: Any = _MISSING) -> Any:
        """The value at `name` (a deep copy); `default` if absent, else KeyError naming it."""
        absolute = resolve_name(name)
        with self._lock:
            self._read(absolute)
            value = self._find(absolute)
            if value is _MISSING:
                if default is _MISSING:
                    raise KeyError(f"parameter '{absolute}' is not set")
                return default
            return copy.deepcopy(value)

    def has(self, name: str) -> bool:
        """Whether `name` is set (a namespace with parameters under it counts)."""
        absolute = resolve_name(name)
        with self._lock:
            self._read(absolute)
            return self._find(absolute) is not _MISSING

    def search(self, namespace: str, key: str) -> str | None:
        """Full name of the nearest `key`: in `namespace`, then each parent up to `/`; else None."""
        if not isinstance(key, str):
            raise TypeError(f"search key must be a str, got {type(key).__name__}")
        if not key or key.startswith(("/", "~")):
            raise ValueError(f"search key must be a relative name, got {_brief.repr(key)}")
        segments = _segments(resolve_name(namespace))
        with self._lock:
            for depth in range(len(segments), -1, -1):
                candidate = resolve_name(key, "/" + "/".join(segments[:depth]))
                if self._find(candidate) is not _MISSING:
                    self._read(candidate)
                    return candidate
        return None

    def to_dict(self, namespace: str = "/") -> dict[str, Any]:
        """A deep copy of the mapping at `namespace`; `{}` when nothing is set there."""
        absolute = resolve_name(namespace)
        with self._lock:
            self._read(absolute)
            value = self._find(absolute)
            if value is _MISSING:
                return {}
            if not isinstance(value, dict):
                raise ValueError(
                    f"'{absolute}' holds a {type(value).__name__} parameter, not a namespace"
                )
            return copy.deepcopy(value)

    # -- mutation -----------------------------------------------------------------------------

    def set(self, name: str, value: Any) -> None:
        """Replace the value at `name`, creating intermediate namespaces.

        A non-mapping value on the way (e.g. `/a` = 1 when setting `/a/b`) is replaced by a
        namespace, as `rosparam set` does.
        """
        absolute = resolve_name(name)
        segments = _segments(absolute)
        stored = _validated(value, absolute, len(segments))
        with self._lock:
            if not segments:
                if not isinstance(stored, dict):
                    raise ConfigError(
                        f"parameter '/': the root must be a mapping, got {type(value).__name__}"
                    )
                self._root = stored
                return
            self._namespace_dict(segments[:-1])[segments[-1]] = stored

    def delete(self, name: str) -> None:
        """Remove `name` and everything under it; KeyError naming it if absent."""
        absolute = resolve_name(name)
        segments = _segments(absolute)
        if not segments:
            raise ValueError("cannot delete the root namespace '/'")
        with self._lock:
            parent = self._find("/" + "/".join(segments[:-1]))
            if not isinstance(parent, dict) or segments[-1] not in parent:
                raise KeyError(f"parameter '{absolute}' is not set")
            del parent[segments[-1]]

    def load_yaml(self, path_or_text: str | os.PathLike[str], namespace: str = "/") -> None:
        """Merge a YAML mapping (a file path, a `Path`, or YAML text) into `namespace`.

        Raises ConfigError naming the source for a syntax error (with the parser's line), a
        top level that is not a mapping, or a document nested deeper than MAX_DEPTH levels
        (counting the namespace's segments) or containing itself through an alias; nothing is
        stored unless the whole document is valid.
        """
        text, source = self._read_source(path_or_text)
        document = _parse_yaml(text, source)
        if not isinstance(document, dict):
            found = "an empty document" if document is None else f"a {type(document).__name__}"
            hint = ""
            if isinstance(path_or_text, str) and path_or_text.endswith((".yaml", ".yml")):
                # A mistyped file path is read as YAML text and lands here as a scalar.
                hint = " (read as YAML text: no file exists at that path)"
            raise ConfigError(f"{source}: expected a mapping at the top level, found {found}{hint}")
        absolute = resolve_name(namespace)
        stored = _validated(document, absolute, len(_segments(absolute)))
        with self._lock:
            _merge(self._namespace_dict(_segments(absolute)), stored)

    # -- helpers ------------------------------------------------------------------------------

    def _namespace_dict(self, segments: list[str]) -> dict[str, Any]:
        """The mapping at `segments`, created (replacing non-mappings). Caller holds the lock."""
        node = self._root
        for segment in segments:
            child = node.get(segment)
            if not isinstance(child, dict):
                child = {}
                node[segment] = child
            node = child
        return node

    @staticmethod
    def _read_source(path_or_text: str | os.PathLike[str]) -> tuple[str, str]:
        """(text, source name for messages) of a path or YAML text."""
        if isinstance(path_or_text, os.PathLike):
            path = pathlib.Path(path_or_text)
            return path.read_text(encoding="utf-8"), str(path)
        if not isinstance(path_or_text, str):
            raise TypeError(
                f"load_yaml expects a path or YAML text, got {type(path_or_text).__name__}"
            )
        if os.path.isfile(path_or_text):
            return pathlib.Path(path_or_text).read_text(encoding="utf-8"), path_or_text
        return path_or_text, "<yaml text>"
