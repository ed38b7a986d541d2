"""`mjfast plugins` and `mjfast new-plugin` (mjfast.cli.plugin_commands): an entry point that fails
to import is flagged, bad names and existing directories are refused with nothing written, and a new
plugin package installs with the one pip command it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mjfast
from support import run_cli


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure



# -- mjfast plugins -----------------------------------------------------------------------------


def test_plugins_flags_an_entry_point_that_fails_to_import(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "broken_pkg-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-pkg\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(
        "[mjfast.plugins]\nbroken/Thing = no_such_module_xyz:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli(capsys, "plugins")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert rows["broken/Thing"] == ["BROKEN", "broken-pkg", "1.2"]
    assert rows["mjfast/NoOp"] == ["native", "mjfast", mjfast.__version__]
    assert rows["mjfast/HeartbeatPublisher"][:2] == ["Python", "ControlPlugin"]
    assert err.splitlines() == [
        "mjfast: warning: plugin type 'broken/Thing' (broken-pkg 1.2): entry point "
        "'no_such_module_xyz:Thing' fails to import: ModuleNotFoundError: No module named "
        "'no_such_module_xyz'"]


# -- mjfast new-plugin --------------------------------------------------------------------------


def test_new_plugin_refuses_bad_names_and_existing_directories(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "new-plugin", "My-Robot", "--python", "--dir", str(tmp_path))
    assert code == 1 and err.startswith("mjfast: error: plugin package name 'My-Robot': ")
    (tmp_path / "taken").mkdir()
    code, _, err = run_cli(capsys, "new-plugin", "taken", "--native", "--dir", str(tmp_path))
    assert code == 1 and err == (f"mjfast: error: {tmp_path / 'taken'} already exists: remove "
                                 f"it or choose another --dir\n")
    code, _, err = run_cli(capsys, "new-plugin", "x", "--dir", str(tmp_path))
    assert code == 2 and "one of the arguments --python --native is required" in err


@pytest.mark.parametrize(("args", "reason"), [
    # Installed or standard modules: the package would replace them or be shadowed by them.
    (["mjfast", "--python"], "a module of that name is already importable here ("),
    (["mujoco", "--native"], "a module of that name is already importable here ("),
    (["numpy", "--python"], "a module of that name is already importable here ("),
    (["json", "--python"], "a module of Python's standard library has that name"),
    (["pyyaml", "--python"], "the distribution PyYAML "),  # installed; imported as yaml
    # Names pip refuses as a distribution name (-x, x-).
    (["_robot", "--python"], "expected a lower-case Python identifier such as my_robot"),
    (["robot_", "--native"], "expected a lower-case Python identifier such as my_robot"),
    # C++ that would not compile.
    (["robot", "--native", "--class", "delete"], "a C++ keyword or reserved word"),
    (["robot", "--native", "--class", "Plugin"], "the plugin SDK's class mjfast::Plugin has"),
    (["robot", "--native", "--class", "mjData"], "names beginning with 'mj' or 'MJ' are MuJoCo's"),
    (["robot", "--native", "--class", "EOF"], "an all-capital name may be a macro"),
    (["robot", "--native", "--class", "load"], "must begin with an upper-case letter"),
    (["robot", "--native", "--class", "My__Robot"], "reserved in C++"),
    (["robot", "--native", "--class", "Robot-1"], "expected an identifier"),
    (["robot", "--native", "--class", "Rob\u00f6t"], "expected an identifier"),
    # Python that would break the generated module.
    (["robot", "--python", "--class", "float"], "the generated module uses the name 'float'"),
    (["robot", "--python", "--class", "class"], "a Python keyword"),
])
def test_new_plugin_refuses_names_that_clash_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], reason: str) -> None:
    code, out, err = run_cli(capsys, "new-plugin", *args, "--dir", str(tmp_path))
    assert code == 1 and out == "", err
    assert err.startswith("mjfast: error: plugin ") and err.count("\n") == 1, err
    assert reason in err
    assert list(tmp_path.iterdir()) == []


def test_new_plugin_that_cannot_write_leaves_nothing_behind(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    write_text = Path.write_text
    calls = []

    def full_disk_on_the_third_file(path: Path, *args: Any, **kwargs: Any) -> int:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk_on_the_third_file)
    code, out, err = run_cli(capsys, "new-plugin", "hour_full", "--native", "--dir",
                             str(tmp_path))
    assert code == 1 and out == ""
    assert err.startswith("mjfast: error: cannot write the package: ") and "No space" in err
    assert len(calls) == 3 and list(tmp_path.iterdir()) == []


def test_new_plugin_prints_a_pip_command_for_the_local_directory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `pip install hour_local` would ask the package index; `./hour_local` is the directory.
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "new-plugin", "hour_local", "--python")
    assert code == 0
    assert "  pip install ./hour_local\n" in out
    assert "  mjfast run MODEL.xml --params ./hour_local/params.yaml\n" in out
    (tmp_path / "in dir").mkdir()
    code, out, _ = run_cli(capsys, "new-plugin", "spaced", "--python", "--dir", "in dir")
    assert code == 0 and "  pip install './in dir/spaced'\n" in out


@pytest.mark.slow_build
@pytest.mark.parametrize(("kind", "name", "cls"), [
    ("python", "hour_python", None),
    # (A native package with the default class name is built, installed and run by
    # tools/check_wheel, in CI's run too: `mjfast new-plugin wheel_native --native`.)
    # Odd but good: a digit, a double underscore (distribution hour9--odd), a class named like
    # a callback but capitalised, and a C++ contextual keyword's capitalised form.
    ("native", "hour9__odd", "Control_"),
    ("native", "hour_final", "Final"),
])
def test_a_new_plugin_package_installs_with_one_pip_command(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, arm_file: Path, kind: str,
        name: str, cls: str | None) -> None:
    """Takes some seconds: `mjfast new-plugin`, then the documented `pip install ./NAME` (with
    pip's build isolation, which must not need mjfast from an index), then discovery and a run.
    --target and --no-deps keep the test's own environment untouched."""
    cls = cls or f"Hour{kind.title()}"
    extra = [] if cls == f"Hour{kind.title()}" else ["--class", cls]
    code, out, _ = run_cli(capsys, "new-plugin", name, f"--{kind}", "--dir", str(tmp_path),
                           *extra)
    assert code == 0 and f"pip install {tmp_path / name}" in out
    site = tmp_path / "site"
    build_path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--target", str(site), "--no-deps",
         f"./{name}"], capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**os.environ, "PATH": build_path})
    assert result.returncode == 0, result.stdout + result.stderr
    env = {**os.environ, "PYTHONPATH": str(site)}
    listing = subprocess.run([sys.executable, "-m", "mjfast", "plugins"], capture_output=True,
                             text=True, env=env, timeout=120)
    kinds = {"python": "Python MujocoPlugin", "native": "native"}
    assert f"{name}/{cls}" in listing.stdout
    row = next(line for line in listing.stdout.splitlines() if line.startswith(f"{name}/"))
    assert kinds[kind] in row and f"{name.replace('_', '-')} 0.1.0" in row, row
    run = subprocess.run(
        [sys.executable, "-m", "mjfast", "run", str(arm_file), "--params",
         str(tmp_path / name / "params.yaml"), "--steps", "20", "--no-progress", "--strict"],
        capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [name, f"{name}/{cls}", "ACTIVE"] in \
        [line.split()[:3] for line in run.stdout.splitlines()]
