"""`mjfast serve SCENE --spawn NAME=MODEL[@x,y,z]` and `mjfast entities` (SPEC §25)."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from support import TWO_LINK_ARM_XML, finish_python, run_cli, start_python

SCENE_XML = """
<mujoco model="scene"><worldbody>
  <geom name="floor" type="plane" size="5 5 0.1"/>
  <body name="table" pos="0 0 0.4"><geom type="box" size="0.5 0.5 0.02"/></body>
</worldbody></mujoco>
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_spawns_and_entities_lists_them(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("zenoh")
    scene, arm = tmp_path / "scene.xml", tmp_path / "arm.xml"
    scene.write_text(SCENE_XML)
    arm.write_text(TWO_LINK_ARM_XML)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    child = start_python(f"""
        import sys
        from mjfast import cli
        sys.exit(cli.main(["serve", {str(scene)!r}, "--listen", {endpoint!r},
                           "--spawn", "left={arm}@0,0.5,0.42", "--spawn", "right={arm}"]))
        """)
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        assert "serving" in line, line + child.stderr.read()
        code, out, _ = run_cli(capsys, "entities", "--connect", endpoint)
        assert code == 0, out
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
        assert set(rows) == {"table", "left", "right"}
        assert rows["left"][1:6] == ["yes", "/left", "2", "2", "2"]
        assert rows["table"][1:3] == ["no", "/mujoco_server"]
        code, out, _ = run_cli(capsys, "entities", "--connect", endpoint, "--json")
        assert code == 0 and '"left/upper"' in out
    finally:
        child.send_signal(signal.SIGTERM)
        finish_python(child, timeout=60)
    assert child.returncode == 0


@pytest.mark.parametrize(("spawn", "message"), [
    ("left", "expected NAME=MODEL[@x,y,z]"),
    ("left=arm.xml@1,2", "three finite numbers after '@'"),
])
def test_a_malformed_spawn_is_a_usage_error(tmp_path: Path, capsys: Any, spawn: str,
                                            message: str) -> None:
    code, _, err = run_cli(capsys, "serve", str(tmp_path / "scene.xml"), "--spawn", spawn)
    assert code == 2 and message in err


def test_a_spawn_that_fails_is_one_line_naming_it(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("zenoh")
    scene = tmp_path / "scene.xml"
    scene.write_text(SCENE_XML)
    code, _, err = run_cli(capsys, "serve", str(scene), "--listen",
                           f"tcp/127.0.0.1:{free_port()}", "--spawn", f"table={scene}")
    assert code == 1
    assert err.startswith(f"mjfast: error: --spawn table={scene}: entity name 'table' is taken")
    assert len(err.splitlines()) == 1
