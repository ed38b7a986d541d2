"""`mjfast new-plugin`: writes a ready-to-install plugin package (Python or native C++).

Owns the package templates and their substitution only. A generated package installs with one
command in the venv that has mjfast, `pip install ./NAME`: its build needs nothing but registry
packages (setuptools, or scikit-build-core and CMake) and finds the installed mjfast's SDK
through that venv's interpreter (see the native CMakeLists.txt).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

__all__ = ["WrittenPackage", "write_plugin_package"]


@dataclass(frozen=True)
class WrittenPackage:
    root: Path
    plugin_type: str
    kind: str
    files: tuple[Path, ...]

    def summary(self) -> str:
        return "\n".join([
            f"wrote {self.kind} plugin package {self.root} (plugin type {self.plugin_type}):",
            *(f"  {path.relative_to(self.root.parent)}" for path in self.files),
            "install it into this environment (then `mjfast plugins` lists it) with:",
            f"  pip install {self.root}",
            "and try it with:",
            f"  mjfast run MODEL.xml --params {self.root / 'params.yaml'}",
        ])


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def write_plugin_package(name: str, kind: str, directory: Path,
                         class_name: str | None = None) -> WrittenPackage:
    """Writes package `name` into `directory/name`; ValueError for a bad name, FileExistsError
    if that directory exists (nothing is overwritten)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ValueError(f"plugin package name {name!r}: expected a lower-case Python "
                         f"identifier such as my_robot (it is the import name and the plugin "
                         f"type's package part)")
    cls = class_name or _camel(name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cls) or keyword.iskeyword(cls):
        raise ValueError(f"plugin class name {cls!r}: expected a Python/C++ identifier")
    if kind not in _FILES:
        raise ValueError(f"plugin kind {kind!r}: expected 'python' or 'native'")
    root = directory / name
    if root.exists():
        raise FileExistsError(f"{root} already exists: remove it or choose another --dir")
    values = {"name": name, "cls": cls, "type": f"{name}/{cls}",
              "dist": name.replace("_", "-")}
    written = []
    for relative, text in _FILES[kind].items():
        path = root / Template(relative).substitute(values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(text).substitute(values))
        written.append(path)
    return WrittenPackage(root, values["type"], kind, tuple(written))


_PARAMS = """\
# Parameters for `mjfast run MODEL.xml --params params.yaml`: the env (namespace /mujoco_server)
# loads the plugins listed under MujocoPlugins.
mujoco_server:
  MujocoPlugins:
    - type: $type
      name: $name
      gain: 1.0        # a configuration key the plugin declares (config_keys)
"""


def _pyproject(build_system: str, description: str, found_by: str, entry_point: str,
               tool: str = "") -> str:
    """A package's pyproject.toml: its kind's [build-system] and [tool] tables around the
    [project] table both kinds share (the distribution, and the entry point mjfast finds the
    plugin type by, `found_by` saying how)."""
    return f"""\
[build-system]
{build_system}
[project]
name = "$dist"
version = "0.1.0"
description = "{description}"
requires-python = ">=3.10"
dependencies = ["mjfast"]

# How mjfast finds the plugin type{found_by}
[project.entry-points."mjfast.plugins"]
"$type" = "{entry_point}"
{tool}"""


def _readme(about: str, edit: str) -> str:
    """A package's README.md: what it is, the commands that install and try it (those
    `WrittenPackage.summary` prints), and how to change it."""
    return f"""\
# $name

{about}

```bash
pip install ./$name
mjfast plugins                      # lists $type
mjfast run MODEL.xml --params $name/params.yaml
```

{edit}
"""


_PYTHON_FILES = {
    "pyproject.toml": _pyproject(
        build_system='''\
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
''',
        description="The mjfast plugin $type",
        found_by=" (`mjfast plugins` lists it once installed).",
        entry_point="$name.plugin:$cls"),
    "src/$name/__init__.py": """\
\"\"\"The mjfast plugin $type.\"\"\"

from $name.plugin import $cls

__all__ = ["$cls"]
""",
    "src/$name/py.typed": "",
    "src/$name/plugin.py": """\
\"\"\"$type: a mujoco_ros-style mjfast plugin.

Configuration keys (declared in `config_keys`; any other key is a load failure naming it):
`gain` (default 1.0).
\"\"\"

from __future__ import annotations

import mujoco

import mjfast


class $cls(mjfast.MujocoPlugin):
    config_keys = {"gain": float}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.gain = float(self.config.get("gain", 1.0))
        self.steps = 0
        self.node.logger.info("loaded with gain %g", self.gain)
        return True  # False: a load failure, shown in the statistics

    # Override only the callbacks you need: only those are ever dispatched.
    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.steps += 1

    def statistics(self) -> dict[str, float]:
        return {"steps": float(self.steps)}
""",
    "params.yaml": _PARAMS,
    "README.md": _readme(
        "The mjfast plugin `$type` (Python). Install it into the environment that has mjfast:",
        "Edit `src/$name/plugin.py`; `pip install -e ./$name` makes edits take effect without "
        "reinstalling."),
}

_NATIVE_FILES = {
    "pyproject.toml": _pyproject(
        build_system='''\
# Only registry packages: the plugin SDK comes from the mjfast installed in the environment that
# runs pip (CMakeLists.txt asks that interpreter), not from an index.
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"
''',
        description="The native mjfast plugin $type",
        found_by=": the descriptor in python/$name/__init__.py.",
        entry_point="$name:$cls",
        tool='''
[tool.scikit-build]
wheel.packages = ["python/$name"]
cmake.build-type = "Release"
'''),
    "CMakeLists.txt": """\
cmake_minimum_required(VERSION 3.18)
project($name LANGUAGES CXX)

# mjfast's SDK (headers, CMake package, the libmujoco it runs with) from the interpreter that
# builds this package. Under pip's build isolation that interpreter's own site-packages are
# hidden through PYTHON* variables, which `-E` ignores: the mjfast installed in the environment
# that runs pip is found either way.
find_package(Python REQUIRED COMPONENTS Interpreter)
foreach(_flags "" "-E")
  execute_process(
    COMMAND "$${Python_EXECUTABLE}" $${_flags} -c "import mjfast; print(mjfast.get_cmake_dir())"
    OUTPUT_VARIABLE mjfast_DIR
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _mjfast_result
    ERROR_QUIET)
  if(_mjfast_result EQUAL 0)
    set(MJFAST_PYTHON_FLAGS "$${_flags}")
    break()
  endif()
endforeach()
if(NOT _mjfast_result EQUAL 0)
  message(FATAL_ERROR "$${Python_EXECUTABLE} cannot import mjfast: install mjfast first")
endif()
find_package(mjfast CONFIG REQUIRED)

mjfast_add_plugin($${PROJECT_NAME}_plugins src/$name.cc)
install(TARGETS $${PROJECT_NAME}_plugins LIBRARY DESTINATION $name)
""",
    "src/$name.cc": """\
// $type: a native mjfast plugin (see mjfast/plugin.hpp for every callback).
//
// Configuration:
//   gain: number (default 1.0)
#include <mjfast/plugin.hpp>

class $cls final : public mjfast::Plugin {
 public:
  explicit $cls(const mjfast::PluginContext& context)
      : Plugin(context), gain_(config().number("gain", 1.0)) {}

  bool load(const mjModel*, mjData*) override { return true; }

  // Called from MuJoCo's mjcb_control on the stepping thread, with no Python and no GIL.
  void control(const mjModel*, mjData*) override { ++steps_; }

 private:
  double gain_;
  long long steps_ = 0;
};

MJFAST_PLUGIN($cls)
""",
    "python/$name/__init__.py": """\
\"\"\"The native mjfast plugin $type: names the compiled library for mjfast's discovery.\"\"\"

from __future__ import annotations

from mjfast.native import NativePlugin

__all__ = ["$cls"]

# lib${name}_plugins.so is installed next to this file by CMakeLists.txt.
$cls = NativePlugin("lib${name}_plugins.so", "$cls", config_keys={"gain": float})
""",
    "params.yaml": _PARAMS,
    "README.md": _readme(
        "The native (C++) mjfast plugin `$type`. Install it into the environment that has mjfast "
        "(a C++17\ncompiler is needed; CMake comes from the package index if there is none):",
        "Edit `src/$name.cc` and install again. The SDK: mjfast's docs/native_plugins.md."),
}

_FILES = {"python": _PYTHON_FILES, "native": _NATIVE_FILES}
