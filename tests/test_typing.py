"""Typing (SPEC §16): `py.typed`, `_core.pyi` in sync with the extension, a user's plugin file
type-checked with mypy.

The stub is generated with pybind11-stubgen; when a binding changes, regenerate it with
`pybind11-stubgen mjfast._core --exit-code -o python` (from the repository root).
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mjfast

PACKAGE = Path(mjfast.__file__).resolve().parent
REGENERATE = "pybind11-stubgen mjfast._core --exit-code -o python"


def test_the_package_is_marked_typed() -> None:
    assert (PACKAGE / "py.typed").is_file()


def test_core_stub_matches_the_built_extension(tmp_path: Path) -> None:
    stub = PACKAGE / "_core.pyi"
    assert stub.is_file(), f"mjfast/_core.pyi is missing: run `{REGENERATE}`"
    result = subprocess.run(
        [sys.executable, "-m", "pybind11_stubgen", "mjfast._core", "--exit-code",
         "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    fresh = (tmp_path / "mjfast" / "_core.pyi").read_text()
    committed = stub.read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True),
                                        "python/mjfast/_core.pyi", "regenerated"))
    assert not diff, f"_core.pyi is out of date with the extension; run `{REGENERATE}`:\n{diff}"


_MYPY_CONFIG = """\
[mypy]
strict = True
# mujoco ships no type information; a user's project says the same.
[mypy-mujoco.*]
ignore_missing_imports = True
"""

_USER_PLUGIN = '''\
from __future__ import annotations

import mujoco

import mjfast


class GripperLogger(mjfast.MujocoPlugin):
    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.every = int(self.config.get("every", 500))
        self.steps = 0
        self.camera: mjfast.OffscreenCamera = self.env.open_offscreen_camera("front")
        self.camera.enable_frames(history=2)
        self.node.logger.info("loaded %s", self.name)
        return True

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.steps += 1
        if self.steps % self.every == 0:
            self.node.publish("~contacts", {"time": data.time, "ncon": int(data.ncon)})

    def statistics(self) -> dict[str, float]:
        return {"steps": float(self.steps)}


class Gravity(mjfast.ControlPlugin):
    def init(self, node: mjfast.Node, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        return True

    def pre_step(self, data: mujoco.MjData) -> None:
        pass

    def cleanup(self) -> None:
        pass


def run() -> None:
    mjfast.register_plugin("my_robot/GripperLogger", GripperLogger)
    with mjfast.MujocoEnv("robot.xml", params="params.yaml") as env:
        env.step(10)
        info: mjfast.PluginInfo = env.plugins[0]
        state: mjfast.PluginState = info.state
        print(state, mjfast.format_statistics(env.statistics()))
'''

# Each a mistake mypy must find, so the check above is not vacuous (everything Any would pass).
_MISTAKES = {
    "a load that returns no bool": (
        "    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> str:\n"
        "        return 'ok'\n",
        "[override]",
    ),
    "a method the camera handle lacks": (
        "    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:\n"
        "        self.env.open_offscreen_camera('front').take_latestt('rgb')\n"
        "        return True\n",
        '"OffscreenCamera" has no attribute "take_latestt"',
    ),
    "an int for the camera name": (
        "    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:\n"
        "        self.env.open_offscreen_camera(3)\n"
        "        return True\n",
        "incompatible type",
    ),
}


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mypy.ini").write_text(_MYPY_CONFIG)
    (tmp_path / "my_plugin.py").write_text(source)
    env = dict(os.environ)
    # mjfast as a user's mypy finds an installed wheel: the package directory with py.typed and
    # _core.pyi. A regular install is in site-packages, where mypy looks by itself (and refuses
    # it on MYPYPATH); an editable install is an import hook, which mypy does not follow, so the
    # source directory is named.
    if "site-packages" not in PACKAGE.parts:
        env["MYPYPATH"] = str(PACKAGE.parent)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
         "--no-incremental", "--follow-imports=silent", "my_plugin.py"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


@pytest.mark.slow_build
def test_a_users_plugin_file_type_checks_under_mypy(tmp_path: Path) -> None:
    result = _mypy(tmp_path, _USER_PLUGIN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


@pytest.mark.slow_build
@pytest.mark.parametrize("mistake", sorted(_MISTAKES))
def test_mypy_finds_a_mistake_in_a_users_plugin(tmp_path: Path, mistake: str) -> None:
    body, expected = _MISTAKES[mistake]
    source = _USER_PLUGIN + textwrap.dedent("""

        class Broken(mjfast.MujocoPlugin):
        """) + body
    result = _mypy(tmp_path, source)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    assert result.stdout.count("error:") == 1, result.stdout
