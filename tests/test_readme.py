"""README.md run as written: every fenced block of a command or a program runs, in order, in a
fresh directory; the blocks that cannot run here say why (issue 28)."""

from __future__ import annotations

import ast
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import mjfast
from support import finish_python


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure



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
            "PYTHONFAULTHANDLER": "1",  # a hung `serve` says where (see stop_serving)
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
        out, err = finish_python(process, timeout=60)  # (one that hangs: its threads' stacks)
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
            if snippet.directive == "while serving" and self.server is None:
                return  # its server was not run (below)
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
    assert len(snippets) > 25 and len(skipped) <= 15, "keep skips few (15 now, each with a reason)"
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
