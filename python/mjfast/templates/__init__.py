"""`mjfast new-plugin`: writes a ready-to-install plugin package (Python or native C++).

Owns the package templates and their substitution only. A generated package installs with one
command in the venv that has mjfast, `pip install ./NAME`: its build needs nothing but registry
packages (setuptools, or scikit-build-core and CMake) and finds the installed mjfast's SDK
through that venv's interpreter (see the native CMakeLists.txt).
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.metadata
import importlib.util
import keyword
import re
import shlex
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from string import Template

__all__ = ["WrittenPackage", "check_class_name", "check_package_name", "write_plugin_package"]


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
            f"  pip install {_local_path(self.root)}",
            "and try it with:",
            f"  mjfast run MODEL.xml --params {_local_path(self.root / 'params.yaml')}",
        ])


def _local_path(path: Path) -> str:
    """`path` as pip and a shell take it for a local path: `./my_robot`, not `my_robot` (which
    pip would look up on the package index)."""
    text = str(path)
    if not path.is_absolute() and not text.startswith("."):
        text = f".{'/'}{text}"
    return shlex.quote(text)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


# -- names ------------------------------------------------------------------------------------

# C++20's keywords and alternative tokens (a class cannot be named after one).
_CPP_KEYWORDS = frozenset((
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
    "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
    "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "final", "override",
    "import", "module"
))
# The plugin SDK's classes (mjfast::...). A plugin class named Plugin does not compile (its
# constructor's `Plugin(context)` names itself); the others would read as the SDK's.
_SDK_CLASSES = frozenset(("Plugin", "PluginContext", "Config", "Camera", "FrameLease",
                          "HostHandle", "Message"))
# Names the generated Python plugin module uses itself.
_PYTHON_TEMPLATE_NAMES = frozenset(("mujoco", "mjfast", "annotations"))


def check_package_name(name: str) -> None:
    """ValueError, with the reason, for a package name `new-plugin` must not use: not a valid
    import and distribution name, or one that an installed or standard module already has (the
    new package would replace it or be shadowed by it)."""
    where = f"plugin package name {name!r}"
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name.endswith("_"):
        raise ValueError(f"{where}: expected a lower-case Python identifier such as my_robot, "
                         f"beginning with a letter and not ending with '_' (it is the import "
                         f"name, the plugin type's package part and, with '-' for '_', the "
                         f"distribution name)")
    if keyword.iskeyword(name):
        raise ValueError(f"{where}: a Python keyword cannot be imported as a package")
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        raise ValueError(f"{where}: a module of Python's standard library has that name; the "
                         f"package would be shadowed by it or shadow it: choose another name")


def check_package_name_is_free(name: str) -> None:
    """ValueError, with the reason, when something installed here already has `name`: an
    importable module, a distribution, or plugin types under `name/`."""
    where = f"plugin package name {name!r}"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    # A directory without __init__.py (a namespace package) shadows no regular package.
    if spec is not None and not isinstance(spec.loader, importlib.machinery.NamespaceLoader):
        origin = f" ({spec.origin})" if spec.origin and spec.has_location else ""
        raise ValueError(f"{where}: a module of that name is already importable here{origin}; "
                         f"the package would replace it or be shadowed by it: choose another "
                         f"name")
    wanted = _normalised(name)
    for distribution in importlib.metadata.distributions():
        metadata = distribution.metadata  # None or empty for a broken installation
        installed = (metadata.get("Name") if metadata is not None else None) or ""
        if installed and _normalised(installed) == wanted:
            raise ValueError(f"{where}: the distribution {installed} {distribution.version} is "
                             f"already installed; `pip install` of the new package would "
                             f"replace it: choose another name")
    from mjfast.plugin.discovery import available_plugins

    taken = [t for t in available_plugins() if t.split("/", 1)[0] == name]
    if taken:
        raise ValueError(f"{where}: plugin types under '{name}/' already exist ({', '.join(taken)}"
                         f"): choose another name")


def _normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def check_class_name(cls: str, kind: str) -> None:
    """ValueError, with the reason, for a plugin class name that would not compile (native) or
    would break the generated module (Python)."""
    where = f"plugin class name {cls!r}"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cls):
        raise ValueError(f"{where}: expected an identifier (ASCII letters, digits and "
                         f"underscores, not beginning with a digit) such as MyRobot")
    if keyword.iskeyword(cls):
        raise ValueError(f"{where}: a Python keyword")
    if kind == "python":
        if cls in _PYTHON_TEMPLATE_NAMES or hasattr(builtins, cls):
            raise ValueError(f"{where}: the generated module uses the name {cls!r} itself (an "
                             f"import or a builtin): choose another name such as MyRobot")
        return
    if cls in _CPP_KEYWORDS:
        raise ValueError(f"{where}: a C++ keyword or reserved word")
    if cls.startswith("_") or "__" in cls:
        raise ValueError(f"{where}: reserved in C++ (names beginning with '_' or holding '__' "
                         f"belong to the compiler and its library)")
    if cls in _SDK_CLASSES:
        raise ValueError(f"{where}: the plugin SDK's class mjfast::{cls} has that name (a "
                         f"subclass named Plugin does not compile; the others would read as the "
                         f"SDK's): choose another name such as MyRobot")
    if cls.startswith(("mj", "MJ")):
        raise ValueError(f"{where}: names beginning with 'mj' or 'MJ' are MuJoCo's and the "
                         f"plugin SDK's (types such as mjModel, macros such as MJFAST_PLUGIN)")
    if not re.search(r"[a-z]", cls):
        raise ValueError(f"{where}: an all-capital name may be a macro of the C, C++ or MuJoCo "
                         f"headers (NULL, EOF, INT_MAX, ...): use CamelCase such as MyRobot")
    if not cls[0].isupper():
        raise ValueError(f"{where}: a native plugin class must begin with an upper-case letter "
                         f"(such as MyRobot): lower-case names clash with the C and C++ "
                         f"library's functions and the plugin's own methods (load, control, "
                         f"reset, ...)")


def write_plugin_package(name: str, kind: str, directory: Path,
                         class_name: str | None = None) -> WrittenPackage:
    """Writes package `name` into `directory/name`; ValueError for a bad name (see
    `check_package_name`, `check_class_name`), FileExistsError if that directory exists.
    Nothing is written unless every check passes, and nothing is overwritten."""
    if kind not in _FILES:
        raise ValueError(f"plugin kind {kind!r}: expected 'python' or 'native'")
    check_package_name(name)
    cls = class_name if class_name is not None else _camel(name)
    check_class_name(cls, kind)
    root = directory / name
    if root.exists():
        raise FileExistsError(f"{root} already exists: remove it or choose another --dir")
    check_package_name_is_free(name)
    values = {"name": name, "cls": cls, "type": f"{name}/{cls}",
              "dist": name.replace("_", "-")}
    # Written beside it, then renamed into place: a write that fails (a full disk, a
    # permission) leaves no half package behind.
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f".{name}-{uuid.uuid4().hex[:12]}.partial"
    staging.mkdir()
    try:
        relatives = []
        for relative, text in _FILES[kind].items():
            relative = Template(relative).substitute(values)
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(Template(text).substitute(values))
            relatives.append(relative)
        staging.rename(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return WrittenPackage(root, values["type"], kind, tuple(root / r for r in relatives))


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

from mjfast import NativePlugin

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
