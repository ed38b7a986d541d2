"""Tests of the `mjfast` command line (mjfast.cli): output, exit status, one-line errors."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mjfast
from mjfast import cli
from support import SMALL_ARENA_XML, TWO_LINK_ARM_XML, run_cli, write


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure





def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("mjfast: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def table_row(out: str, first_cell: str) -> list[str]:
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == [first_cell]]
    assert rows, f"no table row starting with {first_cell!r} in:\n{out}"
    return rows[0]


# -- demo ------------------------------------------------------------------------------------


def test_demo_holds_the_pose_and_prints_the_statistics(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    code, out, _ = run_cli(capsys, "demo", "--duration", "2", "--no-progress")
    assert code == 0
    assert table_row(out, "steps")[1] == "1,000"  # 2 s at the demo's 2 ms timestep
    plugin = table_row(out, "pose_hold")
    assert plugin[1:3] == ["mjfast/PoseHoldPD", "ACTIVE"]
    assert plugin[-1] == "-"  # no failure
    callback = [row for row in (line.split() for line in out.splitlines())
                if row[:2] == ["pose_hold", "control_callback"]]
    assert callback and callback[0][2] == "1,000"
    # The arm starts away from the target and ends near it (a PD law droops under gravity): the
    # plugin's own statistics() figures, as of the end of the run.
    figures = {row[1]: float(row[2].replace(",", "")) for row in
               (line.split() for line in out.splitlines()) if row[:1] == ["pose_hold"]
               and len(row) == 3}
    assert figures["held_joints"] == 7
    assert figures["max_error_rad"] < 0.05


def test_demo_files_ship_inside_the_package() -> None:
    model, params = cli.running.demo_files()
    assert model.parent.name == "data" and model.parent.parent.name == "mjfast"
    with mjfast.MujocoEnv(model, params=params) as env:
        (plugin,) = env.plugins
        assert (plugin.type, plugin.state) == ("mjfast/PoseHoldPD", mjfast.PluginState.ACTIVE)
        assert env.model.nu == 7 and env.model.nsensor >= 1 and env.model.nlight >= 1


def test_python_dash_m_runs_the_demo_in_a_fresh_process() -> None:
    result = subprocess.run([sys.executable, "-m", "mjfast", "demo", "--duration", "0.2"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "pose_hold" in result.stdout and "ACTIVE" in result.stdout
    assert "Traceback" not in result.stderr


# -- run -------------------------------------------------------------------------------------


def test_run_steps_exactly_the_requested_number(capsys: pytest.CaptureFixture[str],
                                                arm_file: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(arm_file), "--steps", "123", "--no-progress")
    assert code == 0, err
    assert table_row(out, "steps")[1] == "123"
    assert "plugins: none configured" in out


def test_run_with_both_config_layouts(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      arm_file: Path) -> None:
    ros1 = write(tmp_path, "ros1.yaml", "MujocoPlugins:\n  - type: mjfast/PoseHoldPD\n"
                                        "    target: {elbow: 0.5}\n")
    ros2 = write(tmp_path, "ros2.yaml", "MujocoPlugins:\n  names: [hold]\n"
                                        "  hold: {type: mjfast/PoseHoldPD, target: {elbow: 0.5}}\n")
    for params, name in ((ros1, "PoseHoldPD"), (ros2, "hold")):
        code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                                 "--duration", "0.5")
        assert code == 0, err
        assert table_row(out, name)[2] == "ACTIVE"
        assert [name, "held_joints"] in [line.split()[:2] for line in out.splitlines()]


def test_realtime_run_is_paced_and_stops(capsys: pytest.CaptureFixture[str],
                                         arm_file: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(arm_file), "--duration", "0.2",
                             "--realtime", "2", "--no-progress")
    assert code == 0, err
    steps = int(table_row(out, "steps")[1].replace(",", ""))
    assert steps == 100  # exactly what was asked for: 0.2 s of 2 ms steps
    wall = float(table_row(out, "wall")[2])
    assert wall >= 0.09  # 0.2 simulated s at 2x real time
    factor = float(table_row(out, "real-time")[2].rstrip("x"))
    assert factor <= 2.2  # the run's own pace, waits included


def test_a_plugin_load_failure_is_shown_not_an_error(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path, arm_file: Path) -> None:
    params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: nowhere/Missing\n"
                                       "  - type: mjfast/PoseHoldPD\n")
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                             "--steps", "10")
    assert code == 0
    missing = table_row(out, "Missing")
    assert missing[2] == "FAILED" and "factory:" in missing
    assert table_row(out, "PoseHoldPD")[2] == "ACTIVE"
    assert "Traceback" not in err


# Paced, the run is the env's physics thread's: the same one warning per failed plugin (the
# thread's own log of the failure is not repeated), the same exact step count.
@pytest.mark.parametrize("pacing", [[], ["--realtime", "100"]], ids=["unpaced", "paced"])
def test_a_plugin_raising_while_stepping_is_a_warning(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path, arm_file: Path,
                                                      pacing: list[str]) -> None:
    class Raising(mjfast.MujocoPlugin):
        def load(self, model: object, data: object) -> bool:
            return True

        def control_callback(self, model: object, data: object) -> None:
            raise RuntimeError("deliberate failure")

    mjfast.register_plugin("test_cli/Raising", Raising)
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: test_cli/Raising\n")
        code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                                 "--steps", "50", "--no-progress", *pacing)
    finally:
        mjfast.unregister_plugin("test_cli/Raising")
    assert code == 0
    assert table_row(out, "steps")[1] == "50"
    assert table_row(out, "Raising")[2] == "FAILED"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mjfast: warning: ")
    assert "deliberate failure" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("pacing", [[], ["--realtime", "100"]], ids=["unpaced", "paced"])
def test_a_mujoco_error_ends_the_run_with_one_error_line(tmp_path: Path,
                                                         pacing: list[str]) -> None:
    # In a child: MuJoCo's fatal error. Paced, the physics thread ends on it and stop() raises it.
    model = tmp_path / "arena.xml"
    model.write_text(SMALL_ARENA_XML)
    result = subprocess.run([sys.executable, "-m", "mjfast", "run", str(model), "--steps", "300",
                             "--no-progress", *pacing], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert_one_error_line(result.stderr, "MuJoCo error in mj_step at time 0.202000")


def _raise_deep() -> None:
    raise RuntimeError("deliberate failure")


@pytest.mark.parametrize("verbosity", [[], ["-v"], ["-vv"]], ids=["quiet", "-v", "-vv"])
def test_a_plugin_failure_traceback_is_printed_with_v(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path, arm_file: Path,
                                                      verbosity: list[str]) -> None:
    class DeepRaising(mjfast.MujocoPlugin):
        def load(self, model: object, data: object) -> bool:
            _raise_deep()
            return True

    mjfast.register_plugin("test_cli/DeepRaising", DeepRaising)
    try:
        params = write(tmp_path, "p.yaml", "MujocoPlugins:\n  - type: test_cli/DeepRaising\n")
        code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params),
                                 "--steps", "5", "--no-progress", *verbosity)
    finally:
        mjfast.unregister_plugin("test_cli/DeepRaising")
    assert code == 0
    assert table_row(out, "DeepRaising")[2] == "FAILED"
    if not verbosity:
        assert "Traceback" not in err
    else:
        # Once: from the failure report at -v, from the host's debug log at -vv.
        assert err.count("Traceback (most recent call last)") == 1, err
        assert "in _raise_deep" in err and "RuntimeError: deliberate failure" in err


# -- plugins -----------------------------------------------------------------------------------


def test_plugins_lists_the_discovered_types(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "plugins")
    assert code == 0
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [row[0] for row in rows] == sorted(mjfast.available_plugins())
    assert ["mjfast/PoseHoldPD", "Python", "MujocoPlugin", "mjfast", mjfast.__version__] in rows


# -- errors ------------------------------------------------------------------------------------


def test_missing_model_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(tmp_path / "absent.xml"))
    assert code == 1 and out == ""
    assert_one_error_line(err, "model file not found", "absent.xml")


def test_model_that_does_not_compile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = write(tmp_path, "broken.xml",
                  "<mujoco>\n<worldbody>\n<geom type='nonsense'/>\n</worldbody>\n</mujoco>\n")
    code, out, err = run_cli(capsys, "run", str(model))
    assert code == 1 and out == ""
    assert_one_error_line(err, "does not compile", "nonsense")


def test_missing_parameter_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                arm_file: Path) -> None:
    code, _, err = run_cli(capsys, "run", str(arm_file), "--params", str(tmp_path / "no.yaml"))
    assert code == 1
    assert_one_error_line(err, "parameter file not found", "no.yaml")


def test_malformed_yaml_parameters(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                   arm_file: Path) -> None:
    params = write(tmp_path, "bad.yaml", "MujocoPlugins: [unclosed\n  - : :\n")
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params))
    assert code == 1 and out == ""
    assert_one_error_line(err, "bad.yaml", "invalid YAML")


@pytest.mark.parametrize(("text", "fragment"), [
    ("MujocoPlugins: 5\n", "expected a list of plugin entries"),
    ("MujocoPlugins:\n  - kp: 1.0\n", "missing required key 'type'"),
    ("MujocoPlugins:\n  - type: not-a-type\n", "invalid plugin type"),
    ("MujocoPlugins:\n  names: [a]\n", "listed in 'names' but has no mapping"),
])
def test_malformed_plugin_configuration(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        arm_file: Path, text: str, fragment: str) -> None:
    params = write(tmp_path, "plugins.yaml", text)
    code, out, err = run_cli(capsys, "run", str(arm_file), "--params", str(params))
    assert code == 1 and out == ""
    assert_one_error_line(err, fragment)


def test_initial_position_of_an_unknown_joint(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, arm_file: Path) -> None:
    params = write(tmp_path, "init.yaml",
                   "mujoco_server:\n  initial_joint_positions: {wrist: 1.0}\n")
    code, _, err = run_cli(capsys, "run", str(arm_file), "--params", str(params))
    assert code == 1
    assert_one_error_line(err, "no joint named 'wrist'")


@pytest.mark.parametrize("argv", [
    [],
    ["bogus"],
    ["run"],
    ["run", "m.xml", "--steps", "10", "--duration", "1"],
    ["run", "m.xml", "--steps", "0"],
    ["demo", "--duration", "-1"],
    ["demo", "--realtime", "nan"],
])
def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str],
                                           argv: list[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert_one_error_line(err)


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
                        r"stepping, in control_callback at tests/cli/test_cli\.py:\d+: "
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
