"""The short soak (issue 8): bench/soak.py's soak with 50 reloads and 15 envs, in a child process.

The full soak (1,000 reloads, 1,000 envs, memory next to bare MuJoCo) is `python bench/soak.py`;
this is the version CI runs. Each part of it runs in a grandchild interpreter, so a crash or a
hang is reported with how far it got instead of taking the test run down.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parent.parent / "bench" / "soak.py"
RELOADS, ENVS = 50, 15


def test_soak_survives_reloads_and_env_lifecycles_with_no_command_lost(tmp_path):
    report = tmp_path / "soak.json"
    result = subprocess.run(
        [sys.executable, str(SOAK), "--only", "soak", "--reloads", str(RELOADS),
         "--envs", str(ENVS), "--timeout", "55", "--json", str(report)],
        capture_output=True, text=True, timeout=150, check=False)
    output = result.stdout + result.stderr
    reloads, envs = json.loads(report.read_text())["soak"]
    for part, count in ((reloads, RELOADS), (envs, ENVS)):
        assert "died" not in part, output
        assert part["survived"] == count, output
        assert part["lost"] == 0, output
        assert part["reordered"] == 0, output
        assert part["unexpected"] == [], output
        # It soaked: commands went through, and the other threads did their work meanwhile.
        assert part["applied"] > count, output
        assert part["resets"] > 0, output
        assert part["statistics"] > 0, output
    assert reloads["relay"]["state"].endswith("ACTIVE"), output
    assert result.returncode == 0, output
