"""`mjfast run --params FILE` with parameter files that are malformed in the ways the hardening
found (SPEC §11, §18): nested too deep, containing themselves through an alias, values PyYAML's
constructors refuse. Each prints one `mjfast: error:` line naming the file and exits 1, never a
traceback; a Hypothesis property feeds it arbitrary YAML text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mjfast import cli
from mjfast.bus.params import MAX_DEPTH
from support import arm_xml

EXIT_RUNTIME = 1


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cli_config")
    (directory / "arm.xml").write_text(arm_xml())
    return directory


def run(capsys: pytest.CaptureFixture[str], files: Path, text: str) -> tuple[int, str, str]:
    params = files / "params.yaml"
    params.write_text(text, encoding="utf-8")
    code = cli.main(["run", str(files / "arm.xml"), "--params", str(params), "--steps", "1"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("mjfast: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(("text", "fragments"), [
    ("a: " + "[" * 500 + "]" * 500 + "\n",
     ["params.yaml: nested deeper than", "at line 1"]),
    ("MujocoPlugins:\n  - type: mjfast/NoOp\n    gains: " + "{k: " * 300 + "1" + "}" * 300 + "\n",
     ["params.yaml: nested deeper than", "at line 3"]),
    ("MujocoPlugins:\n  - &entry {type: mjfast/NoOp, again: *entry}\n",
     ["'/MujocoPlugins[0]/again': contains a reference to itself"]),
    ("a: &x [1, *x]\n", ["'/a[1]': contains a reference to itself"]),
    ("a: 2001-13-45\n", ["params.yaml: invalid YAML value", "month must be in 1..12"]),
    ("a: !!int ''\n", ["params.yaml: invalid YAML value: IndexError"]),
    ("a:\n  ~b: 1\n", ["mapping key '~b' is not a valid name segment"]),
    ("MujocoPlugins:\n  - {type: mjfast/NoOp, name: '~noop'}\n", ["invalid plugin name '~noop'"]),
], ids=["deep", "deep plugin config", "plugin entry containing itself", "list containing itself",
        "bad date", "empty int", "tilde key", "tilde plugin name"])
def test_malformed_parameter_files_are_one_line_and_exit_1(capsys, files: Path, text: str,
                                                          fragments: list[str]) -> None:
    code, out, err = run(capsys, files, text)
    assert code == EXIT_RUNTIME
    assert out == ""
    assert_one_error_line(err, *fragments)


def test_a_deep_parameter_file_in_a_fresh_process(files: Path) -> None:
    # Exactly what a user types; a RecursionError would print a traceback here.
    params = files / "deep.yaml"
    params.write_text("a: " + "[" * 500 + "]" * 500 + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "mjfast", "run", str(files / "arm.xml"), "--params", str(params),
         "--steps", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == EXIT_RUNTIME, result.stderr
    assert result.stdout == ""
    assert result.stderr == (f"mjfast: error: {params}: nested deeper than {MAX_DEPTH} levels at "
                             f"line 1, column {MAX_DEPTH + 4} (see mjfast.bus.params.MAX_DEPTH)\n")


YAML_PIECES = st.sampled_from([
    "a", "b", "1", ".", ":", ": ", "-", "- ", "[", "]", "{", "}", ",", "&x ", "*x", "!!int ",
    "!!str ", "<<: ", "~", "'", '"', "\n", "\n  ", "#", "?", "|", ">", "%", "@", "MujocoPlugins: ",
    "type: mjfast/NoOp", "names: ",
])


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(YAML_PIECES, max_size=25).map("".join))
def test_any_parameter_file_runs_or_is_one_error_line(capsys, files: Path, text: str) -> None:
    code, out, err = run(capsys, files, text)
    if code == 0:
        assert "steps" in out
        assert all(line.startswith("mjfast: warning: ") for line in err.splitlines())
    else:
        assert code == EXIT_RUNTIME
        assert_one_error_line(err, "mjfast: error: ")
