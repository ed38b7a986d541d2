"""tools/sanitize's split into a build step and a test step (MJFAST_SANITIZE_STEP), which .ci/run
uses to build the sanitizer core while the normal tests run: what it refuses, before it builds
anything. The build and test steps themselves run in every CI run (.ci/run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "sanitize"


def run(tmp_path: Path, step: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MJFAST_SANITIZE_STEP": step,
           "MJFAST_SANITIZE_VENV": str(tmp_path / "no-venv"),
           "MJFAST_SANITIZE_BUILD_DIR": str(tmp_path / "no-build")}
    return subprocess.run(["bash", str(SCRIPT), "address,undefined"], env=env, text=True,
                          capture_output=True, timeout=60)


def test_an_unknown_step_is_refused_by_name(tmp_path: Path) -> None:
    result = run(tmp_path, "compile")
    assert result.returncode == 2
    assert "MJFAST_SANITIZE_STEP is build, test or unset, got 'compile'" in result.stderr
    assert not (tmp_path / "no-venv").exists()


def test_the_test_step_needs_what_a_build_step_made(tmp_path: Path) -> None:
    result = run(tmp_path, "test")
    assert result.returncode == 2
    assert "MJFAST_SANITIZE_STEP=test tests what a build step made" in result.stderr
    assert str(tmp_path / "no-venv") in result.stderr
    assert not (tmp_path / "no-venv").exists()  # nothing was built instead
