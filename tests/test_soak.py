"""The short soak (issue 8): bench/soak.py's soak with 50 reloads and 15 envs, in a child process.

The full soak (1,000 reloads, 1,000 envs, memory next to bare MuJoCo) is `python bench/soak.py`;
this is the version CI runs. Each part of it runs in a grandchild interpreter, so a crash or a
hang is reported with how far it got instead of taking the test run down. A hang is a part that
makes no progress (a reload, an env) for STALL_S: a loaded machine makes each step slower, not
none.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SOAK = Path(__file__).resolve().parent.parent / "bench" / "soak.py"
RELOADS, ENVS = 50, 15
STALL_S, TIMEOUT_S = 45, 240


def _soak() -> Any:
    """bench/soak.py as a module (its run_child), loaded once."""
    soak = sys.modules.get("mjfast_bench_soak")
    if soak is None:
        spec = importlib.util.spec_from_file_location("mjfast_bench_soak", SOAK)
        assert spec is not None and spec.loader is not None
        soak = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = soak  # (its dataclasses look their module up)
        spec.loader.exec_module(soak)
    return soak


def test_soak_survives_reloads_and_env_lifecycles_with_no_command_lost(tmp_path):
    report = tmp_path / "soak.json"
    result = subprocess.run(
        [sys.executable, str(SOAK), "--only", "soak", "--reloads", str(RELOADS),
         "--envs", str(ENVS), "--stall", str(STALL_S), "--timeout", str(TIMEOUT_S),
         "--json", str(report)],
        capture_output=True, text=True, timeout=2 * TIMEOUT_S + 60, check=False)
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


def test_a_child_that_stops_making_progress_is_reported_as_hung_with_its_stacks(tmp_path):
    """The soak's watchdog: a child that says one step and then waits forever (on a lock no
    one releases, in a thread of its own too) is ended and reported with its progress and
    every thread's stack, not waited for until the test's timeout."""
    soak = _soak()
    script = tmp_path / "hangs.py"
    script.write_text(textwrap.dedent("""
        import threading
        print("progress reloads 7", flush=True)
        stuck = threading.Lock()
        stuck.acquire()
        def waiter_thread():
            stuck.acquire()
        threading.Thread(target=waiter_thread, daemon=True).start()
        stuck.acquire()
    """))
    result = soak.run_child(["soak-reloads"], stall=2.0, timeout=60.0, script=str(script))
    assert result["died"] == "no progress for 2 s (hang)"
    assert result["progress"] == "reloads 7"
    assert "Fatal Python error: Aborted" in result["stderr_tail"]
    assert "waiter_thread" in result["stderr_tail"]  # every thread's stack, not only the main's
    assert result["seconds"] < 30


def test_a_child_that_keeps_making_progress_past_the_stall_time_is_not_hung(tmp_path):
    soak = _soak()
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent("""
        import json, time
        for done in range(1, 9):
            time.sleep(0.5)  # each step well within the stall time, all of them past it
            print(f"progress reloads {done}", flush=True)
        print("result " + json.dumps({"part": "reloads", "survived": 8}), flush=True)
    """))
    result = soak.run_child(["soak-reloads"], stall=2.0, timeout=60.0, script=str(script))
    assert result["part"] == "reloads" and result["survived"] == 8, result
    assert result["seconds"] >= 4.0
