"""The house style, checked with the tools the pre-commit hooks run (.pre-commit-config.yaml):
ruff on the Python, clang-format (.clang-format) on the C++. Both are pinned in the test extra,
so a formatting difference here is a difference in the code, not in the tool."""

from __future__ import annotations

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
