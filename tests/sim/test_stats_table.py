"""mjfast.sim.stats_table: `env.statistics()` as the table `mjfast run` prints, from a statistics
mapping built here (no env), every line within WIDTH columns."""

from __future__ import annotations

import json
from typing import Any

import mujoco
import pytest

import mjfast
from mjfast.sim.stats_table import WIDTH, format_statistics, one_line
from support import TWO_LINK_ARM_XML


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure





def statistics(*plugins: dict[str, Any], **env: Any) -> dict[str, Any]:
    return {"env": {"steps": 12345, "simulated_s": 24.69, "mean_step_ns": 3456.7,
                    "realtime_factor": 1234.56, "model_generation": 2, "plugin_generation": 3,
                    "timing_sample_interval": 64, **env},
            "plugins": list(plugins), "render": {}}


def plugin(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": f"test/{name.title()}", "state": mjfast.PluginState.ACTIVE,
            "load_time_s": 0.00125, "failure": None, "custom": {}, "callbacks": {}, **fields}


def test_the_env_section_shows_its_figures() -> None:
    lines = format_statistics(statistics()).splitlines()
    assert lines[:9] == [
        "environment",
        "  steps                 12,345",
        "  simulated time        24.690 s",
        "  mean step time        3,457 ns",
        "  real-time factor      1,234.6x (simulated / wall time)",
        "  model generation      2",
        "  plugin generation     3",
        "",
        "plugins: none configured",
    ]


def test_wall_and_running_time_add_lines_and_name_the_factors_basis() -> None:
    table = format_statistics(statistics(), 2.5, running_s=2.0).splitlines()
    assert "  wall time             2.500 s" in table
    assert "  running time          2.000 s (pauses excluded)" in table
    assert "  real-time factor      1,234.6x (simulated / running time)" in table


def test_warnings_list_the_kinds_raised_only() -> None:
    quiet = format_statistics(statistics(warnings={"badqacc": 0})).splitlines()
    assert "  MuJoCo warnings       none" in quiet
    loud = format_statistics(statistics(warnings={"inertia": 2, "badqacc": 1500, "contactfull": 0}))
    assert "  MuJoCo warnings       badqacc 1,500, inertia 2" in loud.splitlines()


def test_plugins_figures_and_callbacks_each_get_a_section() -> None:
    hold = plugin("hold", custom={"error": 0.000123456, "held_joints": 7.0, "ok": True},
                  callbacks={"control_callback": {"calls": 1000, "timed_calls": 16,
                                                  "mean_ns": 812.4, "last_ns": 790.0},
                             "reset": {"calls": 0, "timed_calls": 0, "mean_ns": 0.0,
                                       "last_ns": 0.0}})
    rows = [line.split() for line in format_statistics(statistics(hold)).splitlines()]
    assert ["hold", "test/Hold", "ACTIVE", "1.25", "-"] in rows
    assert ["hold", "error", "0.000123456"] in rows
    assert ["hold", "held_joints", "7"] in rows  # a whole number reads as one
    assert ["hold", "ok", "True"] in rows
    assert ["hold", "control_callback", "1,000", "812", "790"] in rows
    assert ["hold", "reset", "0", "-", "-"] in rows  # never timed: no mean to show
    assert ["callbacks", "(wall", "time", "sampled", "on", "1", "dispatch", "in", "64", "per",
            "callback)"] in rows


def test_a_long_failure_wraps_within_the_width_and_keeps_all_of_its_message() -> None:
    message = "load() returned false because " + " ".join(f"word{i}" for i in range(60))
    failed = plugin("logger", type="test/" + "N" * 40, state="FAILED",
                    failure={"phase": "load", "message": message, "traceback": ""})
    table = format_statistics(statistics(failed))
    assert max(len(line) for line in table.splitlines()) <= WIDTH, table
    assert " ".join(table.split()).count("word59") == 1
    assert "load: load() returned false because word0" in " ".join(table.split())


def test_a_json_round_trip_formats_the_same() -> None:
    stats = statistics(plugin("hold", custom={"error": 0.5}),
                       plugin("gone", state=mjfast.PluginState.FAILED,
                              failure={"phase": "factory", "message": "no such type",
                                       "traceback": ""}),
                       warnings={"badqacc": 1})
    assert format_statistics(json.loads(json.dumps(stats))) == format_statistics(stats)


@pytest.mark.parametrize(("text", "line"), [
    ("one\n  two  \n\nthree", "one two three"),
    ("bad value\n\nAt:\n  File x.py, line 3", "bad value"),  # pybind11's Python stack cut off
    (ValueError("plain"), "plain"),
])
def test_one_line_joins_a_message_of_several(text: object, line: str) -> None:
    assert one_line(text) == line


def test_long_names_types_and_figures_wrap_inside_their_columns_within_the_width() -> None:
    name = "arm_" + "Z" * 150
    kind = "acme/" + "Q" * 90
    failed = plugin(name, type=kind, state="FAILED", custom={"note": "whose value is long " * 8},
                    failure={"phase": "update", "message": "it failed " * 30, "traceback": ""},
                    callbacks={"control_callback": {"calls": 3, "timed_calls": 3, "mean_ns": 5.0,
                                                    "last_ns": 5.0}})
    table = format_statistics(statistics(failed))
    assert max(len(line) for line in table.splitlines()) <= WIDTH, table
    # Wrapped, nothing cut: the name in each of the three sections, the type, the value and
    # the failure, every character of them.
    assert table.count("Z") == 3 * 150
    assert table.count("Q") == 90
    assert table.count("whose") == 8
    assert table.count("failed") == 30
    assert "arm_" in table and "acme/" in table


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
