"""Builds native plugin sources during the test session, with the installed mjfast's SDK.

Shared by the native test modules: the test plugin library (tests/native) is built once per
session with cmake against `mjfast.get_cmake_dir()`, as a plugin author would build it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import mjfast

NATIVE_SOURCES = Path(__file__).resolve().parent / "native"
_built: dict[str, Path] = {}


def tool(name: str) -> str:
    """A build tool from this interpreter's environment first (pip's cmake/ninja), then PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"the native tests need {name} (pip install '.[test]')")
    return found


def build_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def build_cmake_project(source: Path, build_dir: Path) -> Path:
    """Configures and builds `source` into `build_dir` (cached per session); returns build_dir."""
    key = str(source)
    if key in _built:
        return _built[key]
    build_dir.mkdir(parents=True, exist_ok=True)
    configure = [
        tool("cmake"), "-S", str(source), "-B", str(build_dir),
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-Dmjfast_DIR={mjfast.get_cmake_dir()}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    ninja = Path(sys.executable).parent / "ninja"
    if ninja.is_file() or shutil.which("ninja"):
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}"]
    for command in (configure, [tool("cmake"), "--build", str(build_dir)]):
        result = subprocess.run(command, capture_output=True, text=True, env=build_env())
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    _built[key] = build_dir
    return build_dir


def plugin_library_path(tmp_path_factory: object) -> Path:
    """The path of libmjfast_test_plugins.so, built from tests/native."""
    build_dir = build_cmake_project(
        NATIVE_SOURCES, tmp_path_factory.getbasetemp() / "native-test-plugins"  # type: ignore[attr-defined]
    )
    return build_dir / "libmjfast_test_plugins.so"
