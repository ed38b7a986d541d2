"""The house style, checked with the tools the pre-commit hooks run (.pre-commit-config.yaml):
ruff on the Python, clang-format (.clang-format) on the C++. Both are pinned in the test extra,
so a formatting difference here is a difference in the code, not in the tool. And the one lock
order: every lock of the core and of the package is placed in it."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CXX_SUFFIXES = {".cc", ".h", ".hpp", ".cpp"}
CXX_ROOTS = ["src", "tests/cpp", "tests/native", "examples", "python/mjfast/include"]


def _tool(name: str) -> str:
    # The venv's bin/ first: the pinned version, not whatever else is on PATH.
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]' installs it"
    return found


def test_python_passes_ruff() -> None:
    result = subprocess.run([_tool("ruff"), "check", "python", "tests", "bench", "tools",
                             "examples"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cxx_is_clang_formatted() -> None:
    files = sorted(str(path.relative_to(ROOT)) for root in CXX_ROOTS
                   for path in (ROOT / root).rglob("*")
                   if path.suffix in CXX_SUFFIXES and "build" not in path.parts)
    assert len(files) > 40, files  # the core, the plugins and the tests' plugins are all here
    result = subprocess.run([_tool("clang-format"), "--dry-run", "--Werror", *files], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (
        "not clang-formatted (run `clang-format -i` on these, or `pre-commit run -a`):\n"
        + result.stderr[-4000:])


def _lock_order() -> str:
    header = (ROOT / "src/_core/env/env_core.h").read_text()
    start = header.index("THE LOCK ORDER")
    return header[start:header.index("#pragma once", start)]


def _cxx_locks() -> list[tuple[str, str]]:
    """(owner, name) of every mutex the core declares: the class of a member (the nearest class
    or struct above it in a header), the file of a .cc's namespace-scope one."""
    found = []
    for path in sorted((ROOT / "src/_core").rglob("*.[hc]*")):
        text = path.read_text()
        for match in re.finditer(r"std::(?:recursive_|shared_|timed_)?mutex\s+(\w+)\s*;", text):
            owner = path.name
            if path.suffix == ".h":
                classes = re.findall(r"^(?:class|struct) (\w+)", text[:match.start()], re.M)
                owner = classes[-1] if classes else path.name
            found.append((owner, match.group(1)))
    return found


def _python_locks() -> list[tuple[str, str]]:
    """(owner, name) of every threading Lock, RLock and Condition the package makes: the class of
    an attribute, the module of a module-level or local one."""
    found = []
    for path in sorted((ROOT / "python/mjfast").rglob("*.py")):
        tree = ast.parse(path.read_text())
        owners = {id(node): cls.name for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                  for node in ast.walk(cls)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr in ("Lock", "RLock", "Condition")):
                continue
            target = node.targets[0]
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            found.append((owners.get(id(node), path.stem), name))
    return found


def test_the_lock_order_places_every_lock() -> None:
    order = _lock_order()
    locks = _cxx_locks() + _python_locks()
    assert len(locks) > 25, locks  # the grep found the core's mutexes and the package's locks
    missing = [f"{owner}: {name}" for owner, name in locks
               if owner.rsplit(".", 1)[0] not in order or name not in order]
    assert not missing, ("locks not placed in the lock order at the top of "
                         f"src/_core/env/env_core.h (name each with its owner): {missing}")


# The env's own layer: env.py and the modules split out of it, each one concept of the env that
# reads its members as env.py does (SPEC §5; README's architecture table).
ENV_LAYER = {"sim/env.py", "sim/config.py", "sim/requests.py", "sim/interrupts.py",
             "sim/reports.py", "sim/recording_tap.py"}
# Reaches into an env's private members outside that layer, each with the reason it stays:
# (module, attribute). None are left.
ENV_REACHES_ALLOWED: set[tuple[str, str]] = set()


def _receiver_name(node: ast.expr) -> str:
    """The last name of an attribute's object: `env`, `self._env` -> `_env`, `world`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _env_reaches(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every `<env>._private` in `source`, where <env> is a name or an
    attribute that holds an env: `env`, `_env`, `mujoco_env`, `world` (a VectorEnv's)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        name = _receiver_name(node.value).lstrip("_")
        if name == "env" or name.endswith("_env") or name in ("world", "worlds"):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_env_reach_check_finds_a_reach() -> None:
    reaches = _env_reaches("env._core.step()\nself._env._specs\nx = self.mujoco_env._cameras\n"
                           "world._core\nenv.model\nself._env.data\nself._core\n")
    assert [line for line, _ in reaches] == [1, 2, 3, 4], reaches


def test_no_module_reaches_into_the_envs_private_members() -> None:
    # Layers point one way (STYLE.md): the recorder, replay, the bridge and the viewers use the
    # env's public API, or what the env hands them (the RecordingTap of env.record()).
    package = ROOT / "python/mjfast"
    reaches = []
    for path in sorted(package.rglob("*.py")):
        module = str(path.relative_to(package))
        if module in ENV_LAYER:
            continue
        reaches += [f"{module}:{line}: {expression}"
                    for line, expression in _env_reaches(path.read_text())
                    if (module, expression.rsplit(".", 1)[1]) not in ENV_REACHES_ALLOWED]
    assert not reaches, ("modules outside the env's layer reach into its private members "
                         "(give the env a small public API, or hand the collaborator what it "
                         "needs):\n" + "\n".join(reaches))


def test_no_module_imports_another_modules_private_names() -> None:
    # A leading underscore says "this module's own": a name another module needs is made public
    # in its module (the package's private modules, `mjfast.sim.config` and the like, are
    # whole rooms of one concept and import freely). `_core` is the compiled extension itself.
    package = ROOT / "python/mjfast"
    imports = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mjfast"):
                imports += [f"{path.relative_to(package)}:{node.lineno}: {alias.name} from "
                            f"{node.module}" for alias in node.names
                            if alias.name.startswith("_") and alias.name != "_core"
                            and not alias.name.endswith("__")]  # __version__ is public
    assert not imports, "private names imported across modules:\n" + "\n".join(imports)
