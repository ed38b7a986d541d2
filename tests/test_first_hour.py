"""The first hour of a user and a plugin author (issue 12): declared configuration keys,
misnamed callbacks, JSON-able statistics and their table, the CLI's messages by their text,
`mjfast plugins`, `mjfast demo --export`, `--duration inf`, `--strict`, `-v/-q`,
`mjfast new-plugin` packages built with the one documented pip command, and README.md's
examples run as written."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast.stats_table import WIDTH
from support import TWO_LINK_ARM_XML, run_cli, write


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure


# -- declared configuration keys ------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "fragments"), [
    ({"Kp": 600.0}, ["unknown configuration key 'Kp'", "did you mean 'kp'?"]),
    ({"kp": "abc"}, ["configuration key 'kp' must be a number, got 'abc' (str)"]),
    ({"target": {"elbow": "up"}}, ["configuration key 'target.elbow' must be a number"]),
])
def test_a_shipped_plugins_bad_key_is_a_load_failure_naming_it(entry: dict[str, Any],
                                                                fragments: list[str]) -> None:
    params = {"MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold", **entry}]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params=params) as env:
        failure = failure_of(env, "hold")
        assert failure.phase == "factory"
        for fragment in fragments:
            assert fragment in failure.message


def test_a_native_shipped_plugins_unknown_key_is_a_load_failure() -> None:
    entry = {"type": "mjfast/PDController", "name": "pd", "joints": ["elbow"],
             "gains": {"kp": 1.0, "kd": 0.1}, "target": [0.3]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": [entry]}) as env:
        assert "unknown configuration key 'target' (did you mean 'targets'?)" in \
            failure_of(env, "pd").message


def test_a_user_plugin_declares_its_keys() -> None:
    class Gain(mjfast.MujocoPlugin):
        config_keys: ClassVar[dict[str, Any]] = {"gain": float, "joints": list[str],
                                                 "mode": ("fast", "slow")}

        def load(self, model: Any, data: Any) -> bool:
            return True

    mjfast.register_plugin("hour/Gain", Gain)
    try:
        entries = [{"type": "hour/Gain", "name": "ok", "gain": 2, "joints": ["a"]},
                   {"type": "hour/Gain", "name": "typo", "gian": 2.0},
                   {"type": "hour/Gain", "name": "list", "joints": ["a", 3]},
                   {"type": "hour/Gain", "name": "mode", "mode": "medium"}]
        with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": entries}) as env:
            assert env.plugins[0].state is mjfast.PluginState.ACTIVE
            assert "'gian' (did you mean 'gain'?)" in failure_of(env, "typo").message
            assert "'joints[1]' must be a string, got 3 (int)" in failure_of(env, "list").message
            assert "'mode' must be one of 'fast', 'slow'" in failure_of(env, "mode").message
    finally:
        mjfast.unregister_plugin("hour/Gain")


# -- misnamed callbacks -------------------------------------------------------------------------


def test_a_misnamed_callback_is_a_warning_with_the_close_match(
        caplog: pytest.LogCaptureFixture) -> None:
    class Typo(mjfast.MujocoPlugin):
        def load(self, model: Any, data: Any) -> bool:
            return True

        def control_callbak(self, model: Any, data: Any) -> None:
            pass

        def pre_step(self, data: Any) -> None:
            pass

        def helper(self) -> None:
            pass

    mjfast.register_plugin("hour/Typo", Typo)
    try:
        with caplog.at_level(logging.WARNING, logger="mjfast"), \
                mjfast.MujocoEnv(TWO_LINK_ARM_XML,
                                 params={"MujocoPlugins": [{"type": "hour/Typo"}]}):
            pass
    finally:
        mjfast.unregister_plugin("hour/Typo")
    messages = [r.getMessage() for r in caplog.records if "hour/Typo" in r.getMessage()]
    assert len(messages) == 2, messages
    assert any("control_callbak() is never called" in m and "did you mean control_callback()?"
               in m for m in messages)
    assert any("pre_step()" in m and "a ControlPlugin callback" in m for m in messages)


# -- statistics ---------------------------------------------------------------------------------


def test_statistics_are_json_able_with_states_as_strings() -> None:
    entries = [{"type": "mjfast/PoseHoldPD", "name": "hold"},
               {"type": "nowhere/Missing", "name": "missing"}]
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": entries}) as env:
        env.step(5)
        stats = env.statistics()
    round_trip = json.loads(json.dumps(stats))
    hold, missing = round_trip["plugins"]
    assert hold["state"] == "ACTIVE" and stats["plugins"][0]["state"] is mjfast.PluginState.ACTIVE
    assert missing["state"] == "FAILED" and missing["failure"]["phase"] == "factory"
    assert "nowhere/Missing" in missing["failure"]["message"]
    # The public table reads a JSON round trip as well as the original.
    assert mjfast.format_statistics(round_trip) == mjfast.format_statistics(stats)


def test_the_table_stays_narrow_and_shows_warnings_and_figures() -> None:
    long_type = "hour/" + "N" * 40
    entries = [{"type": "mjfast/PoseHoldPD", "name": "hold"}, {"type": long_type, "name": "x"}]
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params={"MujocoPlugins": entries}) as env:
        env.step(5)
        env.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number = 3
        table = mjfast.format_statistics(env.statistics(), 1.5)
    assert max(len(line) for line in table.splitlines()) <= WIDTH, table
    assert "  MuJoCo warnings       badqacc 3" in table.splitlines()
    assert "  wall time             1.500 s" in table.splitlines()
    assert ["hold", "held_joints", "2"] in [line.split() for line in table.splitlines()]
    # The wrapped failure keeps all of its message.
    assert "".join(table.split()).count("N" * 40) >= 1


def test_pose_hold_figures_follow_a_moved_target() -> None:
    params = {"MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold", "kp": 200.0,
                                 "kd": 10.0, "target": {"elbow": 1.0}}]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML.replace('<option timestep="0.002"/>',
                                          '<option timestep="0.002" gravity="0 0 0"/>'),
                          params=params) as env:
        env.bus.publish("/mujoco_server/hold/target", {"elbow": -0.5})
        env.step(2000)
        assert abs(env.data.qpos[1] + 0.5) < 0.02
        with env.acquire_plugin("hold") as hold:
            figures = hold.statistics()
    assert figures["held_joints"] == 2
    assert figures["max_error_rad"] < 0.02  # against -0.5, the current target, not 1.0


# -- the CLI's messages -------------------------------------------------------------------------


def test_a_load_failure_is_one_warning_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            arm_file: Path) -> None:
    params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - {type: mjfast/PoseHoldPD, Kp: 6}\n")
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                             "--steps", "10", "--no-progress")
    assert code == 0
    assert err.splitlines() == [
        "mjfast: warning: plugin 'PoseHoldPD' (mjfast/PoseHoldPD) failed to load, in factory: "
        "ConfigError: unknown configuration key 'Kp' (did you mean 'kp'?); its keys are: "
        "joints, kd, kp, target, topic"]
    assert "FAILED" in out


def _register_raising() -> None:
    class Raising(mjfast.MujocoPlugin):
        def load(self, model: Any, data: Any) -> bool:
            return True

        def control_callback(self, model: Any, data: Any) -> None:
            raise RuntimeError("deliberate failure")

    mjfast.register_plugin("hour/Raising", Raising)


def test_a_stepping_failure_has_the_same_wording(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, arm_file: Path) -> None:
    _register_raising()
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: hour/Raising\n")
        code, _, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                               "--steps", "10", "--no-progress")
    finally:
        mjfast.unregister_plugin("hour/Raising")
    assert code == 0
    [line] = err.splitlines()
    assert re.fullmatch(r"mjfast: warning: plugin 'Raising' \(hour/Raising\) failed while "
                        r"stepping, in control_callback at tests/test_first_hour\.py:\d+: "
                        r"RuntimeError: deliberate failure", line), line


# A plugin package whose callback fails inside a helper of its own, below which numpy raises.
ACME_FILES = {
    "acme/__init__.py": "",
    "acme/helpers.py": "import numpy as np\n\n\ndef square(values):\n"
                       "    return np.reshape(values, (5, 5))\n",
    "acme/plugin.py": "import mjfast\n\nfrom acme.helpers import square\n\n\n"
                      "class Squarer(mjfast.MujocoPlugin):\n"
                      "    def load(self, model, data):\n"
                      "        if self.config.get('in_load'):\n"
                      "            raise RuntimeError('no load today')\n"
                      "        return True\n\n"
                      "    def control_callback(self, model, data):\n"
                      "        square([1.0, 2.0])\n",
}


@pytest.mark.parametrize(("in_load", "where"), [
    (False, "while stepping, in control_callback at {root}/acme/helpers.py:5: ValueError: "
            "cannot reshape"),
    (True, "to load, in load at {root}/acme/plugin.py:9: RuntimeError: no load today"),
])
def test_the_one_line_failure_names_where_the_plugin_raised(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, arm_file: Path,
        monkeypatch: pytest.MonkeyPatch, in_load: bool, where: str) -> None:
    (tmp_path / "acme").mkdir()
    for name, text in ACME_FILES.items():
        write(tmp_path, name, text)
    monkeypatch.syspath_prepend(str(tmp_path))
    from acme.plugin import Squarer  # type: ignore[import-not-found]

    mjfast.register_plugin("acme/Squarer", Squarer)
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: acme/Squarer\n"
                                           f"    in_load: {str(in_load).lower()}\n")
        code, _, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                               "--steps", "10", "--no-progress")
    finally:
        mjfast.unregister_plugin("acme/Squarer")
        for module in ("acme.plugin", "acme.helpers", "acme"):
            sys.modules.pop(module, None)
    assert code == 0
    [line] = err.splitlines()
    expected = f"mjfast: warning: plugin 'Squarer' (acme/Squarer) failed {where}"
    assert line.startswith(expected.format(root=tmp_path.resolve())), line


def test_acquiring_a_plugin_that_failed_says_it_failed_and_why() -> None:
    params = {"MujocoPlugins": [{"type": "mjfast/PoseHoldPD", "name": "hold", "Kp": 6.0}]}
    with mjfast.MujocoEnv(TWO_LINK_ARM_XML, params=params) as env:
        with pytest.raises(KeyError) as raised, env.acquire_plugin("hold"):
            pass
        message = raised.value.args[0]
        assert message.startswith("plugin 'hold' (mjfast/PoseHoldPD) failed to load, in "
                                  "factory: ConfigError: unknown configuration key 'Kp'"), message
        assert "did you mean 'hold'" not in message
        with pytest.raises(KeyError, match=r"no active plugin named 'hodl' \(did you mean "
                                           r"'hold'\?\)"), env.acquire_plugin("hodl"):
            pass
        env.step(1)  # the scope was released


def test_strict_exits_1_on_a_load_failure(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          arm_file: Path) -> None:
    params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - {type: mjfast/PoseHoldPD, kp: x}\n")
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                             "--steps", "10", "--no-progress", "--strict")
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith("mjfast: warning: plugin 'PoseHoldPD' (mjfast/PoseHoldPD) failed "
                               "to load, in factory: ConfigError: configuration key 'kp'")
    assert lines[1:] == ["mjfast: error: plugin 'PoseHoldPD' failed (--strict)"]
    assert "steps                 0" in out


def test_strict_exits_1_on_a_stepping_failure(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, arm_file: Path) -> None:
    _register_raising()
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: hour/Raising\n")
        code, _, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                               "--steps", "1000", "--no-progress", "--strict")
    finally:
        mjfast.unregister_plugin("hour/Raising")
    assert code == 1
    assert err.splitlines()[-1] == "mjfast: error: plugin 'Raising' failed (--strict)"


@pytest.mark.parametrize(("text", "suggestion"), [
    ("mujoco_server:\n  MujocoPlugin:\n    - type: mjfast/PoseHoldPD\n",
     "did you mean 'mujoco_server/MujocoPlugin'?"),
    ("mujoco_sever:\n  MujocoPlugins:\n    - type: mjfast/PoseHoldPD\n",
     "did you mean 'mujoco_sever/MujocoPlugins'?"),
])
def test_no_plugins_found_says_where_it_looked(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path, arm_file: Path, text: str,
                                               suggestion: str) -> None:
    params = write(tmp_path, "p.yaml", text)
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                             "--steps", "10", "--no-progress")
    assert code == 0 and "plugins: none configured" in out
    assert err.splitlines() == [
        f"mjfast: warning: no MujocoPlugins in {params} (looked for "
        f"/mujoco_server/MujocoPlugins, /MujocoPlugins): no plugins are loaded ({suggestion})"]


def test_verbose_shows_plugin_loggers_by_name_and_quiet_hides_warnings(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, arm_file: Path) -> None:
    class Chatty(mjfast.MujocoPlugin):
        def load(self, model: Any, data: Any) -> bool:
            self.node.logger.info("hello from load")
            self.node.logger.warning("careful")
            return True

    mjfast.register_plugin("hour/Chatty", Chatty)
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - {type: hour/Chatty, name: chat}\n")
        args = ["run", str(arm_file), "--params", str(params), "--steps", "5", "--no-progress"]
        _, _, plain = run_cli(capsys, *args)
        _, _, verbose = run_cli(capsys, *args, "-v")
        _, _, quiet = run_cli(capsys, "-q", *args)
    finally:
        mjfast.unregister_plugin("hour/Chatty")
    assert plain.splitlines() == ["mjfast: warning: [chat] careful"]
    assert verbose.splitlines() == ["mjfast: info: [chat] hello from load",
                                    "mjfast: warning: [chat] careful"]
    assert quiet == ""


def test_demo_export_writes_files_that_run(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "demo", "--export", str(tmp_path / "start"))
    assert code == 0
    model, params = tmp_path / "start" / "demo_arm.xml", tmp_path / "start" / "demo.yaml"
    assert f"mjfast run {model} --params {params}" in out
    code, out, err = run_cli(capsys, "run", str(model), "--params", str(params),
                             "--duration", "0.1", "--no-progress")
    assert code == 0 and err == "" and "ACTIVE" in out
    # What README's later sections use is there too, and runs.
    scene, ros2 = tmp_path / "start" / "demo_scene.xml", tmp_path / "start" / "ros2_params.yaml"
    with mjfast.MujocoEnv(scene, params=ros2) as env:
        assert {"box", "table"} <= {env.model.body(i).name for i in range(env.model.nbody)}
        env.reset("home")
        env.set_equality_active("gripper_weld", True)
        env.step(10)
        assert all(p.state is mjfast.PluginState.ACTIVE for p in env.plugins), env.plugins
    # Exporting again (each README section starts with it) keeps files that are unchanged ...
    code, out, _ = run_cli(capsys, "demo", "--export", str(tmp_path / "start"))
    assert code == 0 and f"mjfast run {model} --params {params}" in out
    # ... and overwrites none that was changed: nothing is written then.
    params.write_text(params.read_text() + "# mine\n")
    scene.unlink()
    code, _, err = run_cli(capsys, "demo", "--export", str(tmp_path / "start"))
    assert code == 1
    assert err == f"mjfast: error: not overwriting {params}: remove it or choose " \
                  f"another --export directory\n"
    assert not scene.exists()


def test_duration_inf_runs_until_ctrl_c(arm_file: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mjfast", "run", str(arm_file), "--duration", "inf",
         "--realtime", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # a progress line per wall second: it is running
        assert first.startswith("mjfast: sim "), first
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "mjfast: interrupted" in err and "Traceback" not in err
    steps = int(next(line.split()[1] for line in out.splitlines()
                     if line.split()[:1] == ["steps"]).replace(",", ""))
    assert steps >= 400  # at least the second of real time before the first line


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
    ("native", "hour_native", None),
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


# -- examples -----------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["record_camera", "control_loop"])
def test_every_flag_of_the_examples_has_help(name: str) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    options = [i for i, line in enumerate(lines) if line.startswith("  -")]
    assert len(options) >= 3
    for i in options:
        # "  --flag VALUE   help..." or the help on the next, deeper indented line.
        has_help = "   " in lines[i].strip() or (
            i + 1 < len(lines) and lines[i + 1].startswith("    ")
            and not lines[i + 1].lstrip().startswith("-"))
        assert has_help, f"{name}.py: no help for {lines[i].strip()!r}"


def test_record_camera_scales_depth_to_the_scene_not_the_far_plane() -> None:
    record = _example("record_camera")
    model = mujoco.MjModel.from_xml_string(record.DEMO_XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    near, far = record.scene_depth_range(model, data, 0)
    assert 0 <= near < 2.0 < far < 10.0  # the camera is ~2.7 m from a scene a few metres wide
    # The scene at 2-3 m, the background at the far plane (mujoco's default: 50 x extent).
    depth = np.full((4, 4), 50.0 * float(model.stat.extent), dtype=np.float32)
    depth[:2] = np.linspace(2.0, 3.0, 8, dtype=np.float32).reshape(2, 4)
    grey = record.to_rgb("depth", depth, (near, far))[..., 0].astype(int)
    assert (grey[2:] == 0).all()  # the background is black
    assert grey[:2].max() - grey[:2].min() >= 30  # the scene spans visible greys
    assert grey[0, 0] > grey[1, 3]  # nearer is brighter


# -- the README, run as written (issue 28) --------------------------------------------------------

README = Path(__file__).resolve().parent.parent / "README.md"
# A fenced block's directive: the HTML comment on the line before its fence.
_DIRECTIVE = re.compile(r"<!-- readme-test: (?P<what>skip|while serving)(?:: (?P<why>.+))? -->")
# A block whose first line is `# <path>` with a file name is that file's text: it is written.
_FILE_HEADER = re.compile(r"# (?P<path>[\w./-]+\.(?:py|toml|yaml))\s*(?:,.*)?$")
_SERVING = "mjfast: serving "


@dataclass
class Snippet:
    language: str
    line: int  # README line of the block's first line (after the fence)
    text: str
    directive: str | None = None
    reason: str | None = None


def readme_snippets() -> list[Snippet]:
    snippets: list[Snippet] = []
    lines = README.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = re.fullmatch(r"```(\w+)", lines[index])
        if fence is None:
            index += 1
            continue
        end = lines.index("```", index + 1)
        directive = _DIRECTIVE.fullmatch(lines[index - 1].strip())
        snippets.append(Snippet(fence[1], index + 2, "\n".join(lines[index + 1:end]) + "\n",
                                directive["what"] if directive else None,
                                directive["why"] if directive else None))
        index = end + 1
    return snippets


class ReadmeRun:
    """README's snippets run in order in one scratch directory, as a user of the venv would:
    `mjfast` and `python` are this interpreter's (through small scripts on PATH), and
    `pip install ./X` installs into a directory of the run's own (`--target`, no dependencies:
    the venv is shared), which is on the snippets' PYTHONPATH."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.site = directory / ".site"
        shims = directory / ".bin"
        shims.mkdir(parents=True)
        for name, command in (("mjfast", f'"{sys.executable}" -m mjfast'),
                              ("python", f'"{sys.executable}"'),
                              ("pip", f'"{sys.executable}" -m pip')):
            shim = shims / name
            shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
            shim.chmod(0o755)
        repository_python = Path(mjfast.__file__).resolve().parent.parent
        self.environment = {
            **os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(repository_python), str(self.site)]),
            "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),  # as tests/conftest.py sets it
        }
        self.server: subprocess.Popen[str] | None = None
        self.not_run: list[str] = []
        self.configurations: list[Snippet] = []

    def where(self, snippet: Snippet) -> str:
        return f"README.md:{snippet.line} ({snippet.language})"

    # -- shell ----------------------------------------------------------------------------------

    def shell(self, snippet: Snippet) -> None:
        for command in (line.strip() for line in snippet.text.splitlines()):
            if not command or command.startswith("#"):
                continue
            if command.startswith("pip install ./"):
                command = (f"pip install --quiet --no-deps --target {self.site} "
                           f"{command.removeprefix('pip install ')}")
            if command.startswith("mjfast serve "):
                self.serve(snippet, command)
            elif "--duration inf" in command:
                self.until_ctrl_c(snippet, command)
            else:
                result = subprocess.run(["bash", "-c", command], cwd=self.directory,
                                        env=self.environment, capture_output=True, text=True,
                                        timeout=120)
                assert result.returncode == 0, (f"{self.where(snippet)}: `{command}` exited "
                                                f"{result.returncode}:\n{result.stderr}")

    def until_ctrl_c(self, snippet: Snippet, command: str) -> None:
        """A run that the README stops with Ctrl-C: stopped so once it runs (it says so on
        stderr once a wall second)."""
        process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.directory,
                                   env=self.environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        said = []
        for line in process.stderr:
            said.append(line)
            if line.startswith("mjfast: sim "):
                process.send_signal(signal.SIGINT)
                break
        out, err = process.communicate(timeout=60)
        assert process.returncode == 130 and "steps" in out, (
            f"{self.where(snippet)}: `{command}` exited {process.returncode}:\n"
            f"{''.join(said)}{err}")

    def serve(self, snippet: Snippet, command: str) -> None:
        """`mjfast serve`, which the README leaves running for the commands after it: started,
        and waited for until it says it serves."""
        process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.directory,
                                   env=self.environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        self.server = process
        assert process.stderr is not None
        said = []
        for line in process.stderr:  # (the child ends the stream if it fails)
            said.append(line)
            if line.startswith(_SERVING):
                return
        process.wait(timeout=60)
        pytest.fail(f"{self.where(snippet)}: `{command}` exited {process.returncode}:\n"
                    f"{''.join(said)}")

    def stop_serving(self) -> None:
        process, self.server = self.server, None
        if process is None:
            return
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0 and "remote bus" in out, (process.returncode, err)

    # -- python, files, configuration -------------------------------------------------------

    def python(self, snippet: Snippet) -> None:
        tree = ast.parse(snippet.text)
        names = [node for node in ast.walk(tree) if isinstance(node, ast.Name)]
        makes_env = any(n.id == "env" and isinstance(n.ctx, ast.Store) for n in names)
        uses_env = any(n.id == "env" for n in names)
        prelude = "import mjfast\nimport numpy as np\n"
        if uses_env and not makes_env:
            prelude += 'env = mjfast.MujocoEnv("robot.xml", params="params.yaml")\n'
        # The snippet keeps its README line numbers in a traceback.
        source = "\n" * (snippet.line - 1) + snippet.text
        program = (f"{prelude}exec(compile({source!r}, 'README.md', 'exec'))\n")
        result = subprocess.run([sys.executable, "-c", program], cwd=self.directory,
                                env=self.environment, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, f"{self.where(snippet)} failed:\n{result.stderr}"

    def write_file(self, snippet: Snippet, path: str) -> None:
        target = self.directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(snippet.text)

    def configuration(self, snippet: Snippet) -> None:
        """A YAML fragment that is no file: parameters that an env on the demo arm accepts, every
        plugin loaded (`strict`)."""
        result = subprocess.run(
            [sys.executable, "-c", "import sys, yaml, mjfast\n"
             "params = yaml.safe_load(sys.stdin)\n"
             "mjfast.MujocoEnv('start/demo_arm.xml', params=params, strict=True)"],
            input=snippet.text, cwd=self.directory, env=self.environment, capture_output=True,
            text=True, timeout=60)
        assert result.returncode == 0, f"{self.where(snippet)} is refused:\n{result.stderr}"

    def run(self, snippet: Snippet) -> None:
        if snippet.directive != "while serving":
            self.stop_serving()
        if snippet.directive == "skip":
            assert snippet.reason, f"{self.where(snippet)}: a skip says why"
            return
        header = _FILE_HEADER.match(snippet.text.splitlines()[0])
        if header is not None and snippet.language in ("python", "toml", "yaml"):
            self.write_file(snippet, header["path"])
        elif snippet.language == "bash":
            if "mjfast serve" in snippet.text and not _port_is_free(7447):
                # The README's server listens on the default endpoint, which the machine's other
                # work may hold: then it and its client are not run.
                self.not_run.append(f"{self.where(snippet)}: tcp/127.0.0.1:7447 is taken")
                self.server = None
                return
            self.shell(snippet)
        elif snippet.language == "python":
            if snippet.directive == "while serving" and self.server is None:
                return  # its server was not run (above)
            self.python(snippet)
        elif snippet.language == "yaml":
            self.configurations.append(snippet)  # checked at the end, its plugins installed
        elif snippet.language != "toml":
            pytest.fail(f"{self.where(snippet)}: no way to run a {snippet.language} block")


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    """Every snippet of README.md, in order, in one scratch directory (README "A five-minute
    tour"): a snippet that stops working fails here. Blocks that cannot run here say why in an
    HTML comment above them."""
    pytest.importorskip("zenoh", reason="README's remote bus needs mjfast[server]")
    pytest.importorskip("gymnasium", reason="README's Gymnasium example needs mjfast[gym]")
    pytest.importorskip("rosbags", reason="README's recordings need mjfast[ros2]")
    snippets = readme_snippets()
    skipped = [s for s in snippets if s.directive == "skip"]
    assert len(snippets) > 25 and len(skipped) <= 13, "keep skips few (13 now, each with a reason)"
    run = ReadmeRun(tmp_path / "tour")
    try:
        for snippet in snippets:
            started = time.monotonic()
            run.run(snippet)
            print(f"{run.where(snippet)}: {snippet.directive or 'ran'} "
                  f"({time.monotonic() - started:.1f} s)")
        run.stop_serving()
        for snippet in run.configurations:
            run.configuration(snippet)
    finally:
        if run.server is not None:
            run.server.kill()
            run.server.communicate()
    for line in run.not_run:
        print(f"not run: {line}")
