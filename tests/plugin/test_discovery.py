"""Tests of mjfast.plugin.discovery: in-process registration, entry points of an "installed" test
distribution, and the errors for missing, broken or wrong-kind plugins."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from mjfast.errors import ConfigError, PluginNotFoundError
from mjfast.plugin import discovery
from mjfast.plugin.base import ControlPlugin, MujocoPlugin
from mjfast.plugin.discovery import (
    available_plugins,
    register_plugin,
    resolve_plugin,
    unregister_plugin,
)


class Hello(MujocoPlugin):
    def load(self, model: object, data: object) -> bool:
        return True


class Joint(ControlPlugin):
    pass


class NativeDescriptor:
    __mjfast_native__ = True


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "_registry", {})
    monkeypatch.setattr(discovery, "_warned_duplicates", set())
    monkeypatch.setattr(discovery, "_entry_point_cache", None)


@pytest.fixture
def clean_modules():
    """Drop the test packages a test imported, so nothing leaks into later tests."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("mjfast_testpkg_"):
            del sys.modules[name]


def _install_dist(
    root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Write an importable, "installed" distribution (a .dist-info folder) into `root`."""
    for module, source in modules.items():
        package = root / module
        package.mkdir()
        (package / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[mjfast.plugins]\n{lines}", encoding="utf-8")


def _unique(prefix: str = "mjfast_testpkg_") -> str:
    return prefix + uuid.uuid4().hex[:10]


# -- in-process registration ----------------------------------------------------------------------


@pytest.mark.parametrize("obj", [Hello, Joint, NativeDescriptor, NativeDescriptor()])
def test_register_resolve_unregister(obj: object) -> None:
    register_plugin("test_pkg/Thing", obj)
    assert "test_pkg/Thing" in available_plugins()
    assert resolve_plugin("test_pkg/Thing") is obj
    unregister_plugin("test_pkg/Thing")
    assert "test_pkg/Thing" not in available_plugins()
    with pytest.raises(PluginNotFoundError, match="test_pkg/Thing"):
        resolve_plugin("test_pkg/Thing")


def test_unregister_unknown_is_plugin_not_found() -> None:
    with pytest.raises(PluginNotFoundError, match="nobody/Here"):
        unregister_plugin("nobody/Here")


@pytest.mark.parametrize("bad_name", ["NoSlash", "a/b/C", "pkg/", "/Cls", 3])
def test_register_bad_type_name_is_config_error(bad_name: object) -> None:
    with pytest.raises(ConfigError, match="expected 'package/Class'"):
        register_plugin(bad_name, Hello)  # type: ignore[arg-type]


class _Falsy:
    __mjfast_native__ = False


@pytest.mark.parametrize(
    ("obj", "shown"),
    [
        (object, "class builtins.object"),
        (MujocoPlugin, "MujocoPlugin"),
        (Hello(), "Hello object"),
        (_Falsy, "_Falsy"),
        (42, "int object 42"),
    ],
)
def test_register_wrong_kind_is_type_error(obj: object, shown: str) -> None:
    expected = "expected a MujocoPlugin or ControlPlugin subclass"
    with pytest.raises(TypeError, match=expected) as info:
        register_plugin("pkg/Bad", obj)
    assert shown in str(info.value)
    assert "pkg/Bad" not in available_plugins()


# -- not found messages ---------------------------------------------------------------------------


def test_not_found_suggests_close_matches() -> None:
    register_plugin("pkg/Class", Hello)
    register_plugin("zzz/Unrelated", Joint)
    with pytest.raises(PluginNotFoundError) as info:
        resolve_plugin("pkg/Clss")
    assert str(info.value).startswith(
        "no plugin type 'pkg/Clss' is registered (did you mean 'pkg/Class'?); available: ")
    # The listing is cut as without a close match: ten names, then how many more.
    assert str(info.value).endswith(f"and {len(available_plugins()) - 10} more")


def test_not_found_lists_available_without_close_match() -> None:
    register_plugin("aaa/One", Hello)
    register_plugin("bbb/Two", Joint)
    with pytest.raises(PluginNotFoundError, match=r"'zz/Q' is registered; available: .*aaa/One"):
        resolve_plugin("zz/Q")


def test_not_found_lists_at_most_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "_entry_points", dict)
    for i in range(12):
        register_plugin(f"p{i:02d}/C", Hello)
    with pytest.raises(PluginNotFoundError) as info:
        resolve_plugin("zzzzzz/Nothing")
    message = str(info.value)
    assert "p09/C" in message
    assert "p10/C" not in message
    assert "2 more" in message


def test_not_found_with_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "_entry_points", dict)
    with pytest.raises(PluginNotFoundError) as info:
        resolve_plugin("pkg/Any")
    assert str(info.value) == (
        "no plugin type 'pkg/Any' is registered; no plugin types are installed"
    )


# -- entry points ---------------------------------------------------------------------------------


def test_entry_point_from_installed_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    module = _unique()
    _install_dist(
        tmp_path,
        "mjfast_testpkg_x",
        {"testpkg/Hello": f"{module}:Hello"},
        {
            module: """
                from mjfast.plugin.base import MujocoPlugin

                class Hello(MujocoPlugin):
                    def load(self, model, data):
                        return True
            """
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    assert "testpkg/Hello" in available_plugins()
    assert module not in sys.modules  # listing must not import the plugin's module
    cls = resolve_plugin("testpkg/Hello")
    assert isinstance(cls, type) and issubclass(cls, MujocoPlugin)
    assert cls.__module__ == module and cls.__name__ == "Hello"


def test_registration_overrides_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    module = _unique()
    source = "from mjfast.plugin.base import MujocoPlugin\nclass Hello(MujocoPlugin):\n    pass\n"
    entry_points = {"testpkg/Hello": f"{module}:Hello"}
    _install_dist(tmp_path, "mjfast_testpkg_o", entry_points, {module: source})
    monkeypatch.syspath_prepend(str(tmp_path))
    register_plugin("testpkg/Hello", Joint)
    assert resolve_plugin("testpkg/Hello") is Joint
    assert available_plugins().count("testpkg/Hello") == 1


def test_entry_point_import_error_names_type_value_and_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    module = _unique()
    missing = _unique("no_such_module_")
    _install_dist(
        tmp_path,
        "mjfast_testpkg_broken",
        {"testpkg/Broken": f"{module}:Broken"},
        {module: f"import {missing}\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    assert "testpkg/Broken" in available_plugins()
    with pytest.raises(PluginNotFoundError) as info:
        resolve_plugin("testpkg/Broken")
    message = str(info.value)
    assert "testpkg/Broken" in message
    assert f"{module}:Broken" in message
    assert "ModuleNotFoundError" in message and missing in message
    assert isinstance(info.value.__cause__, ImportError)


def test_entry_point_of_wrong_kind_says_what_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    module = _unique()
    _install_dist(
        tmp_path,
        "mjfast_testpkg_wrong",
        {"testpkg/Wrong": f"{module}:NotAPlugin"},
        {module: "class NotAPlugin:\n    pass\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginNotFoundError, match=r"testpkg/Wrong.*class .*NotAPlugin.*expected"):
        resolve_plugin("testpkg/Wrong")


def test_duplicate_entry_points_first_wins_with_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    clean_modules: None,
) -> None:
    first_module, second_module = _unique(), _unique()
    source = "from mjfast.plugin.base import MujocoPlugin\nclass Dup(MujocoPlugin):\n    pass\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _install_dist(
        tmp_path / "a",
        "mjfast_testpkg_first",
        {"testpkg/Dup": f"{first_module}:Dup"},
        {first_module: source},
    )
    _install_dist(
        tmp_path / "b",
        "mjfast_testpkg_second",
        {"testpkg/Dup": f"{second_module}:Dup"},
        {second_module: source},
    )
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    monkeypatch.syspath_prepend(str(tmp_path / "a"))  # now first on sys.path

    with caplog.at_level(logging.WARNING, logger="mjfast.discovery"):
        assert resolve_plugin("testpkg/Dup").__module__ == first_module
        available_plugins()
    warnings = [r.getMessage() for r in caplog.records if r.name == "mjfast.discovery"]
    assert len(warnings) == 1  # reported once, not on every lookup
    assert "mjfast_testpkg_first" in warnings[0] and "mjfast_testpkg_second" in warnings[0]
    assert "testpkg/Dup" in warnings[0]


def test_entry_points_are_read_fresh_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    assert "testpkg/Late" not in available_plugins()
    module = _unique()
    source = "from mjfast.plugin.base import ControlPlugin\nclass Late(ControlPlugin):\n    pass\n"
    entry_points = {"testpkg/Late": f"{module}:Late"}
    _install_dist(tmp_path, "mjfast_testpkg_late", entry_points, {module: source})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "testpkg/Late" in available_plugins()
    assert issubclass(resolve_plugin("testpkg/Late"), ControlPlugin)


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each read of the entry points that discovery makes, as a list that grows by one."""
    reads: list[str] = []
    read = discovery.metadata.entry_points

    def counting(**selection: str) -> object:
        reads.append(selection.get("group", ""))
        return read(**selection)

    monkeypatch.setattr(discovery.metadata, "entry_points", counting)
    return reads


def _settle(folder: Path, age_s: float = 3600.0) -> None:
    """Stamp `folder` as modified `age_s` ago (0: now), as an install long past leaves it."""
    stamp = time.time_ns() - int(age_s * 1e9)
    os.utime(folder, ns=(stamp, stamp))


def test_entry_points_are_read_once_while_nothing_on_sys_path_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None,
    counted_reads: list[str]
) -> None:
    # Reading them costs ~5 ms, and importlib.metadata rebuilds its index of any sys.path entry
    # it cannot stat on each read: three reads an env made the memory of 300 envs grow 5 MB.
    # sys.path is the test's own (the real one's folders get __pycache__ folders at collection,
    # which makes their mtimes too recent to keep a read); mjfast is imported already.
    first, second = _unique(), _unique()
    source = "from mjfast.plugin.base import ControlPlugin\nclass P(ControlPlugin):\n    pass\n"
    _install_dist(tmp_path, "mjfast_testpkg_one", {"testpkg/One": f"{first}:P"},
                  {first: source})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _settle(elsewhere)
    _settle(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(elsewhere)])
    assert "testpkg/One" in available_plugins()
    assert issubclass(resolve_plugin("testpkg/One"), ControlPlugin)
    available_plugins()
    assert len(counted_reads) == 1, counted_reads
    # An install into a folder already on sys.path moves the folder's mtime: read again.
    _install_dist(tmp_path, "mjfast_testpkg_two", {"testpkg/Two": f"{second}:P"},
                  {second: source})
    assert "testpkg/Two" in available_plugins()
    assert len(counted_reads) == 2, counted_reads
    # So does a change of sys.path itself.
    monkeypatch.setattr(sys, "path", [str(elsewhere)])
    assert "testpkg/One" not in available_plugins()
    assert len(counted_reads) == 3, counted_reads


def test_a_read_in_the_same_clock_tick_as_an_install_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None,
    counted_reads: list[str]
) -> None:
    # File systems stamp mtimes from a coarse clock: an install just after a read can leave the
    # folder's mtime as the read saw it. A read of a folder modified just now is not kept.
    module = _unique()
    source = "from mjfast.plugin.base import ControlPlugin\nclass Late(ControlPlugin):\n    pass\n"
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    _settle(tmp_path, age_s=0)
    stamp = tmp_path.stat().st_mtime_ns
    assert "testpkg/Late" not in available_plugins()
    _install_dist(tmp_path, "mjfast_testpkg_late", {"testpkg/Late": f"{module}:Late"},
                  {module: source})
    os.utime(tmp_path, ns=(stamp, stamp))  # the install within the read's clock tick
    # Read again (the first read was not kept), and past importlib.metadata's own index of the
    # folder, which it keys by the same mtime.
    assert "testpkg/Late" in available_plugins()
    assert issubclass(resolve_plugin("testpkg/Late"), ControlPlugin)
    assert len(counted_reads) >= 2, counted_reads
