"""mjfast refuses to import its compiled core against another mujoco than it was built for."""

from __future__ import annotations

import subprocess
import sys

import mujoco

from mjfast._build_info import MUJOCO_VERSION_BUILT


def test_the_core_is_built_against_the_running_mujoco() -> None:
    from mjfast._core_loader import _core

    assert MUJOCO_VERSION_BUILT == mujoco.__version__ == _core.MUJOCO_VERSION_BUILT


def test_a_mujoco_version_mismatch_is_an_import_error_naming_both_versions() -> None:
    script = (
        "import mujoco\n"
        "mujoco.__version__ = '0.0.1'\n"
        "try:\n"
        "    import mjfast\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    print('imported')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    message = result.stdout.strip()
    assert f"built against mujoco {MUJOCO_VERSION_BUILT}" in message
    assert "mujoco 0.0.1 is installed" in message
