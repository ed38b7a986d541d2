"""The core's C++ logic that knows nothing of Python, tested in C++ (tests/cpp, GoogleTest):
built with CMake and run here, so that README's one test command covers it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from _native_build import build_cmake_project, build_env

CPP_TESTS = Path(__file__).resolve().parent / "cpp"
GTEST_CONFIG = Path("/usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake")


@pytest.mark.slow_build
def test_core_cpp_tests_pass(tmp_path_factory: pytest.TempPathFactory) -> None:
    if not any(Path(p).is_file() for p in (GTEST_CONFIG, "/usr/lib/cmake/GTest/GTestConfig.cmake")):
        pytest.skip("the C++ tests need GoogleTest (apt-get install libgtest-dev; .ci/run does)")
    build_dir = build_cmake_project(CPP_TESTS, tmp_path_factory.getbasetemp() / "cpp-tests")
    result = subprocess.run([str(build_dir / "mjfast_core_tests")], capture_output=True,
                            text=True, timeout=300, env=build_env())
    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", result.stdout)
    assert passed is not None and int(passed.group(1)) >= 79, result.stdout
    # The hooks' registry again with the readers fencing themselves, as where the kernel offers
    # no membarrier (decided when the library loads: a process of its own).
    fenced = subprocess.run([str(build_dir / "mjfast_core_tests"), "--gtest_filter=HooksTest.*"],
                            capture_output=True, text=True, timeout=300,
                            env={**build_env(), "MJFAST_HOOKS_NO_MEMBARRIER": "1"})
    assert fenced.returncode == 0, fenced.stdout + fenced.stderr
    assert re.search(r"\[  PASSED  \] 7 tests", fenced.stdout), fenced.stdout
