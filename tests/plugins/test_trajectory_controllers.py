"""mjfast/JointTrajectoryController and mjfast/GripperActionController without ROS (SPEC §23):
the joints follow the sampled trajectory (against the analytic polynomials, per command
interface), every control_msgs result code, rcl_action's goal semantics on the Python handle and
the bus (statuses in order, cancel codes, get_result before and after the end, result_timeout),
preemption, reset and reload, and the gripper reaching a position and stalling on an object."""

from __future__ import annotations

import math
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import mjfast
from mjfast.plugin.actions import CancelResponse, GoalStatus
from mjfast.plugins.joint_trajectory_controller import (
    GOAL_TOLERANCE_VIOLATED,
    INVALID_GOAL,
    INVALID_JOINTS,
    OLD_HEADER_TIMESTAMP,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
)
from support import (
    CONTROLLER_DT,
    FINGER_ON_OBJECT_XML,
    controller_arm_xml,
    finish_python,
    signal_a_thread,
    start_python,
    wait_for,
    wait_until_blocked,
)

NS = "/mujoco_server"
ACTION = f"{NS}/arm/follow_joint_trajectory"
TIMEOUT = 10.0
DT = CONTROLLER_DT
GRIPPER_XML = FINGER_ON_OBJECT_XML
arm = controller_arm_xml

def controller(**config: Any) -> dict[str, Any]:
    entry = {"type": "mjfast/JointTrajectoryController", "name": "arm", "joints": ["a", "b"],
             "constraints": {"goal_time": 1.0, "a": {"goal": 0.01}, "b": {"goal": 0.01}}}
    entry.update(config)
    return {"mujoco_server": {"MujocoPlugins": [entry]}}


@pytest.fixture
def env() -> Iterator[mjfast.MujocoEnv]:
    with mjfast.MujocoEnv(arm("position"), params=controller()) as e:
        yield e


def send(env: mjfast.MujocoEnv, goal: dict[str, Any], name: str = "arm") -> Any:
    with env.acquire_plugin(name) as plugin:
        return plugin.send_goal(goal)


def goal(points: list[dict[str, Any]], names: tuple[str, ...] = ("a", "b"),
         **extra: Any) -> dict[str, Any]:
    return {"trajectory": {"joint_names": list(names), "points": points}, **extra}


def run_until_done(env: mjfast.MujocoEnv, handle: Any, limit_s: float = 10.0) -> Any:
    assert wait_for(lambda: env.step(50) or handle.done() or env.data.time > limit_s, TIMEOUT)
    return handle.result(timeout=TIMEOUT)


# -- motion -------------------------------------------------------------------------------------

# One polynomial per joint and kind; the points are sampled from it, so between them the spline
# of that kind is the polynomial itself (two points: a linear, cubic or quintic segment).
POLYNOMIALS = {
    "linear": [np.array([0.0, 0.4]), np.array([0.0, -0.3])],
    "cubic": [np.array([0.0, 0.0, 0.6, -0.2]), np.array([0.0, 0.0, -0.3, 0.1])],
    "quintic": [np.array([0.0, 0.0, 0.0, 0.5, -0.3, 0.05]),
                np.array([0.0, 0.0, 0.0, -0.2, 0.1, -0.01])],
}


def poly(coefficients: np.ndarray, t: float, derivative: int = 0) -> float:
    c = np.polynomial.polynomial.polyder(coefficients, derivative) if derivative else coefficients
    return float(np.polynomial.polynomial.polyval(t, c))


@pytest.mark.parametrize("kind", ["linear", "cubic", "quintic"])
def test_position_commands_are_the_sampled_polynomials(env: mjfast.MujocoEnv, kind: str) -> None:
    coefficients = POLYNOMIALS[kind]
    knots = [0.0, 1.0, 2.0]

    def point(t: float) -> dict[str, Any]:
        p: dict[str, Any] = {"positions": [poly(c, t) for c in coefficients],
                             "time_from_start": t}
        if kind != "linear":
            p["velocities"] = [poly(c, t, 1) for c in coefficients]
        if kind == "quintic":
            p["accelerations"] = [poly(c, t, 2) for c in coefficients]
        return p

    env.step(1)
    # The first point is at the start, where the joints are: the state before it is that point.
    handle = send(env, goal([point(t) for t in knots]))
    start = env.data.time
    worst = 0.0
    while env.data.time < start + knots[-1] - DT / 2:
        t = env.data.time - start
        env.step(1)  # its control callback ran at `t`
        expected = [poly(c, t) for c in coefficients]
        worst = max(worst, float(np.max(np.abs(env.data.ctrl - expected))))
    assert worst < 1e-9
    result = run_until_done(env, handle)
    assert result == {"error_code": SUCCESSFUL, "error_string": ""}
    assert handle.status == GoalStatus.SUCCEEDED
    np.testing.assert_allclose(env.data.qpos, [poly(c, knots[-1]) for c in coefficients],
                               atol=0.01)


@pytest.mark.parametrize("interfaces", [["velocity"], ["effort"], ["position", "velocity"]])
def test_each_command_interface_reaches_the_goal(interfaces: list[str]) -> None:
    gains = {j: {"p": 60.0, "i": 5.0, "d": 2.0, "i_clamp": 1.0, "ff_velocity_scale": 1.0}
             for j in ("a", "b")}
    if interfaces == ["velocity"]:
        gains = {j: {"p": 20.0, "ff_velocity_scale": 1.0} for j in ("a", "b")}
    params = controller(command_interfaces=interfaces, gains=gains)
    with mjfast.MujocoEnv(arm(*interfaces), params=params) as env:
        handle = send(env, goal([{"positions": [0.3, -0.2], "velocities": [0.0, 0.0],
                                  "time_from_start": 1.0}]))
        assert run_until_done(env, handle)["error_code"] == SUCCESSFUL
        np.testing.assert_allclose(env.data.qpos, [0.3, -0.2], atol=0.01)
        if interfaces == ["position", "velocity"]:
            assert env.data.ctrl.size == 4  # both actuators of each joint were commanded
            np.testing.assert_allclose(env.data.ctrl[[0, 2]], [0.3, -0.2], atol=1e-9)


def test_a_joint_without_the_interfaces_actuator_is_a_load_failure() -> None:
    with mjfast.MujocoEnv(arm("position"), params=controller(command_interfaces=["effort"])) as env:
        failure = env.plugins[0].failure
        assert failure is not None and failure.phase == "load"
        assert "joint 'a' has no actuator for command interface 'effort'" in failure.message


# -- result codes ---------------------------------------------------------------------------------


INVALID = {
    "no points": (goal([]), INVALID_GOAL),
    "sizes": (goal([{"positions": [0.1], "time_from_start": 1.0}]), INVALID_GOAL),
    "time not increasing": (goal([{"positions": [0.1, 0.1], "time_from_start": 1.0},
                                  {"positions": [0.2, 0.2], "time_from_start": 1.0}]),
                            INVALID_GOAL),
    "non-finite": (goal([{"positions": [math.nan, 0.1], "time_from_start": 1.0}]),
                   INVALID_GOAL),
    "unknown joint": (goal([{"positions": [0.1, 0.1], "time_from_start": 1.0}], ("a", "z")),
                      INVALID_JOINTS),
    "missing joint": (goal([{"positions": [0.1], "time_from_start": 1.0}], ("a",)),
                      INVALID_JOINTS),
    "old header": ({"trajectory": {"header": {"stamp": {"sec": 0, "nanosec": 1000}},
                                   "joint_names": ["a", "b"],
                                   "points": [{"positions": [0.1, 0.1],
                                               "time_from_start": 0.01}]}},
                   OLD_HEADER_TIMESTAMP),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_goals_are_rejected_with_their_code_and_change_nothing(
        env: mjfast.MujocoEnv, case: str) -> None:
    env.step(100)  # 0.1 s: the old header's trajectory ended before now
    before = env.data.ctrl.copy()
    bad, code = INVALID[case]
    handle = send(env, bad)
    assert not handle.accepted
    assert handle.result(timeout=0)["error_code"] == code
    assert env.bus.latest(f"{ACTION}/_action/status")["status_list"] == []
    env.step(100)
    np.testing.assert_array_equal(env.data.ctrl, before)


def test_a_partial_goal_holds_the_joints_it_leaves_out() -> None:
    with mjfast.MujocoEnv(arm("position"),
                          params=controller(allow_partial_joints_goal=True)) as env:
        handle = send(env, goal([{"positions": [0.2], "time_from_start": 0.5}], ("b",)))
        assert run_until_done(env, handle)["error_code"] == SUCCESSFUL
        np.testing.assert_allclose(env.data.qpos, [0.0, 0.2], atol=0.01)


def test_path_tolerance_violation_aborts_and_holds(env: mjfast.MujocoEnv) -> None:
    # A jump no servo follows within 1 mrad.
    handle = send(env, goal([{"positions": [1.0, 0.0], "time_from_start": 0.2}],
                            path_tolerance=[{"name": "a", "position": 0.001}]))
    result = run_until_done(env, handle)
    assert handle.status == GoalStatus.ABORTED
    assert result["error_code"] == PATH_TOLERANCE_VIOLATED
    assert "joint 'a' position error" in result["error_string"]
    held = env.data.ctrl.copy()
    env.step(500)
    np.testing.assert_array_equal(env.data.ctrl, held)  # holding where it was
    assert env.data.qpos[0] < 0.5


def test_goal_tolerance_not_met_within_goal_time_aborts() -> None:
    with mjfast.MujocoEnv(arm("position"), params=controller()) as env:
        env.data.qfrc_applied[0] = 30.0  # the servo settles 10 mrad off
        handle = send(env, goal([{"positions": [0.2, 0.0], "time_from_start": 0.2}],
                                goal_tolerance=[{"name": "a", "position": 0.001}],
                                goal_time_tolerance={"sec": 0, "nanosec": 300_000_000}))
        result = run_until_done(env, handle)
        assert result["error_code"] == GOAL_TOLERANCE_VIOLATED
        assert handle.status == GoalStatus.ABORTED
        assert env.data.time > 0.5


# -- the goal's tolerances over the parameters' (tolerances.hpp's get_segment_tolerances) --------

OFFSET_TORQUE = 15.0  # joint a's servo settles ~5 mrad past its target under it
TIGHT = {"goal_time": 0.3, "a": {"goal": 0.001}, "b": {"goal": 0.01}}
LOOSE = {"goal_time": 0.3, "a": {"goal": 0.01}, "b": {"goal": 0.01}}


def settle_off_target(constraints: dict[str, Any], **extra: Any) -> tuple[Any, float]:
    """A goal to (0.2, 0) whose joint a settles ~5 mrad off; its result and the simulated time
    it ended at (said by an abort's error_string; the stepping goes on until its monitor
    thread has seen the end)."""
    with mjfast.MujocoEnv(arm("position"), params=controller(constraints=constraints)) as env:
        env.data.qfrc_applied[0] = OFFSET_TORQUE
        handle = send(env, goal([{"positions": [0.2, 0.0], "time_from_start": 0.2}], **extra))
        assert handle.accepted
        result = run_until_done(env, handle, limit_s=3.0)
        found = re.search(r"at t = ([0-9.]+) s", result["error_string"])
        ended = float(found.group(1)) if found else math.nan
        if result["error_code"] == SUCCESSFUL:  # the offset these cases rely on, once settled
            env.step(int(1.0 / DT))
            assert 0.003 < abs(env.data.qpos[0] - 0.2) < 0.008
        else:  # aborted (and holding where it was): joint a was off by more than 1 mrad
            assert abs(env.data.qpos[0] - 0.2) > 0.001
        return result, ended


@pytest.mark.parametrize(("constraints", "tolerance", "code"), [
    (LOOSE, [], SUCCESSFUL),
    (LOOSE, [{"name": "a", "position": 0.001}], GOAL_TOLERANCE_VIOLATED),  # tighter: aborts
    (LOOSE, [{"name": "a", "position": 0.0}], SUCCESSFUL),  # 0 keeps the parameter
    (TIGHT, [], GOAL_TOLERANCE_VIOLATED),
    (TIGHT, [{"name": "a", "position": 0.02}], SUCCESSFUL),  # looser
    (TIGHT, [{"name": "a", "position": -1.0}], SUCCESSFUL),  # -1 erases it
    # Illegal values, unknown joints: the goal runs with the parameters' tolerances, all of them.
    (TIGHT, [{"name": "a", "position": 0.02}, {"name": "b", "position": -2.0}],
     GOAL_TOLERANCE_VIOLATED),
    (TIGHT, [{"name": "a", "position": 0.02}, {"name": "zz", "position": 0.02}],
     GOAL_TOLERANCE_VIOLATED),
    (TIGHT, [{"name": "a", "position": 0.02, "acceleration": -3.0}], GOAL_TOLERANCE_VIOLATED),
], ids=["loose", "tighter", "zero", "tight", "looser", "erased", "illegal", "unknown",
        "illegal-acceleration"])
def test_goal_tolerances_from_the_goal_apply_over_the_parameters(
        constraints: dict[str, Any], tolerance: list[dict[str, Any]], code: int) -> None:
    result, _ = settle_off_target(constraints, goal_tolerance=tolerance)
    assert result["error_code"] == code, result


def test_goal_time_tolerance_from_the_goal() -> None:
    tight_goal = [{"name": "a", "position": 0.001}]
    _, ended = settle_off_target(LOOSE, goal_tolerance=tight_goal)
    assert ended == pytest.approx(0.5, abs=1.5 * DT)  # the parameter's goal_time after the end
    _, ended = settle_off_target(LOOSE, goal_tolerance=tight_goal,
                                 goal_time_tolerance={"sec": 1, "nanosec": 0})
    assert ended == pytest.approx(1.2, abs=1.5 * DT)
    with mjfast.MujocoEnv(arm("position"), params=controller(constraints=LOOSE)) as env:
        env.data.qfrc_applied[0] = OFFSET_TORQUE
        handle = send(env, goal([{"positions": [0.2, 0.0], "time_from_start": 0.2}],
                                goal_tolerance=tight_goal,
                                goal_time_tolerance={"sec": -1, "nanosec": 0}))  # no limit
        env.step(int(3.0 / DT))
        assert handle.status == GoalStatus.EXECUTING  # still waiting to get within 1 mrad


def test_path_tolerances_from_the_goal_apply_over_the_parameters() -> None:
    jump = [{"positions": [1.0, 0.0], "time_from_start": 0.2}]  # no servo follows it closely
    strict = {**LOOSE, "a": {"goal": 0.01, "trajectory": 0.001}}
    for tolerance, code in (([], PATH_TOLERANCE_VIOLATED),
                            ([{"name": "a", "position": -1.0}], SUCCESSFUL),
                            ([{"name": "a", "position": -1.0, "velocity": 0.001}],
                             PATH_TOLERANCE_VIOLATED)):
        with mjfast.MujocoEnv(arm("position"), params=controller(constraints=strict)) as env:
            handle = send(env, goal(jump, path_tolerance=tolerance))
            result = run_until_done(env, handle)
            assert result["error_code"] == code, (tolerance, result)
            if tolerance and "velocity" in tolerance[0]:
                assert "joint 'a' velocity error" in result["error_string"]


def test_multi_dof_parts_of_a_goal_are_ignored_as_joint_trajectory_controller_does(
        env: mjfast.MujocoEnv) -> None:
    multi_dof = {"joint_names": ["base"], "points": [
        {"transforms": [{"translation": {"x": 1.0}}], "time_from_start": 0.5}]}
    component = [{"joint_name": "base", "component": 1, "position": 0.1}]
    handle = send(env, goal([{"positions": [0.2, 0.1], "time_from_start": 0.3}],
                            multi_dof_trajectory=multi_dof, component_path_tolerance=component,
                            component_goal_tolerance=component))
    assert handle.accepted
    assert run_until_done(env, handle)["error_code"] == SUCCESSFUL
    np.testing.assert_allclose(env.data.qpos, [0.2, 0.1], atol=0.01)
    # A goal of a multi-DOF trajectory only: its joint trajectory has no points.
    handle = send(env, {"trajectory": {"joint_names": [], "points": []},
                        "multi_dof_trajectory": multi_dof})
    assert not handle.accepted
    assert handle.result(timeout=0)["error_code"] == INVALID_GOAL


# -- rcl_action semantics -------------------------------------------------------------------------


def statuses(env: mjfast.MujocoEnv) -> list[list[int]]:
    seen: list[list[int]] = []
    env.bus.subscribe(f"{ACTION}/_action/status",
                      lambda m: seen.append([int(s["status"]) for s in m["status_list"]]))
    return seen


def test_send_goal_responds_first_and_a_cancel_waits_for_the_goals_start(
        env: mjfast.MujocoEnv) -> None:
    # rcl_action's order: the response as soon as the goal is accepted, its status arrays after.
    # A cancel sent on that response (from another thread) is carried out after the start, so
    # the trajectory is handed over and then held, never left running for a canceled goal.
    seen = statuses(env)
    responded: list[tuple[int, GoalStatus]] = []
    cancels: list[Any] = []
    threads: list[threading.Thread] = []

    def respond(handle: Any) -> None:
        responded.append((len(seen), handle.status))
        threads.append(threading.Thread(target=lambda: cancels.append(handle.cancel())))
        threads[-1].start()

    env.step(1)
    with env.acquire_plugin("arm") as plugin:
        handle = plugin.server.send_goal(
            goal([{"positions": [0.5, 0.5], "time_from_start": 0.5}]), respond=respond)
    threads[0].join(TIMEOUT)
    assert responded == [(0, GoalStatus.ACCEPTED)]
    assert cancels == [CancelResponse.ERROR_NONE]
    assert handle.status == GoalStatus.CANCELED
    assert seen == [[GoalStatus.ACCEPTED], [GoalStatus.EXECUTING], [GoalStatus.CANCELING],
                    [GoalStatus.CANCELED]]
    env.step(300)
    np.testing.assert_allclose(env.data.qpos, [0.0, 0.0], atol=1e-3)  # held, not moved


def test_statuses_in_order_and_feedback_at_the_monitor_rate(env: mjfast.MujocoEnv) -> None:
    seen = statuses(env)
    feedback: list[Any] = []
    env.bus.subscribe(f"{ACTION}/_action/feedback", feedback.append)
    handle = send(env, goal([{"positions": [0.2, 0.1], "time_from_start": 0.5}]))
    assert seen == [[GoalStatus.ACCEPTED], [GoalStatus.EXECUTING]]
    # 20 Hz of simulated time: one feedback per 50 steps (stepped in those chunks, each awaited).
    for k in range(1, 6):
        env.step(50)
        assert wait_for(lambda k=k: len(feedback) >= k, TIMEOUT)
    stamps = [f["feedback"]["header"]["stamp"] for f in feedback]
    times = [s["sec"] + s["nanosec"] * 1e-9 for s in stamps]
    np.testing.assert_allclose(np.diff(times), 0.05, atol=1.5 * DT)
    last = feedback[-1]["feedback"]
    assert last["joint_names"] == ["a", "b"]
    np.testing.assert_allclose(last["error"]["positions"],
                               last["desired"]["positions"] - last["actual"]["positions"])
    assert bytes(feedback[-1]["goal_id"]["uuid"]) == handle.goal_id
    run_until_done(env, handle)
    assert seen[-1] == [GoalStatus.SUCCEEDED]
    assert handle.feedback is not None


def test_ctrl_c_ends_a_wait_for_a_result_whichever_thread_receives_it() -> None:
    # Nothing steps the env: only the signal ends the wait. Sent to a thread that is not the
    # main one, as the kernel may deliver a process's SIGINT: an untimed wait never saw it.
    child = start_python("""
        import mjfast
        from support import controller_arm_xml

        params = {"mujoco_server": {"MujocoPlugins": [
            {"type": "mjfast/JointTrajectoryController", "name": "arm", "joints": ["a", "b"]}]}}
        with mjfast.MujocoEnv(controller_arm_xml("position"), params=params) as env:
            with env.acquire_plugin("arm") as plugin:
                handle = plugin.send_goal({"trajectory": {"joint_names": ["a", "b"], "points": [
                    {"positions": [0.5, 0.5], "time_from_start": 1.0}]}})
            try:
                print("waiting", flush=True)
                handle.result()
            except KeyboardInterrupt:
                print("interrupted", handle.status.name, flush=True)
    """)
    assert child.stdout is not None
    assert child.stdout.readline() == "waiting\n"
    wait_until_blocked(child.pid)
    signal_a_thread(child.pid, signal.SIGINT)
    out, err = finish_python(child)
    assert child.returncode == 0, err
    assert out == "interrupted EXECUTING\n", err


def test_a_new_goal_preempts_the_active_one(env: mjfast.MujocoEnv) -> None:
    first = send(env, goal([{"positions": [0.5, 0.5], "time_from_start": 2.0}]))
    env.step(100)
    second = send(env, goal([{"positions": [-0.1, 0.1], "time_from_start": 0.5}]))
    assert first.status == GoalStatus.CANCELED
    assert first.result(timeout=0)["error_code"] == SUCCESSFUL
    assert run_until_done(env, second)["error_code"] == SUCCESSFUL
    np.testing.assert_allclose(env.data.qpos, [-0.1, 0.1], atol=0.01)


def test_cancel_holds_and_answers_with_action_msgs_codes(env: mjfast.MujocoEnv) -> None:
    seen = statuses(env)
    handle = send(env, goal([{"positions": [1.0, 1.0], "time_from_start": 2.0}]))
    env.step(300)
    assert handle.cancel() == CancelResponse.ERROR_NONE
    assert handle.status == GoalStatus.CANCELED
    assert seen[-2:] == [[GoalStatus.CANCELING], [GoalStatus.CANCELED]]
    env.step(1)
    held = env.data.ctrl.copy()
    env.step(500)
    np.testing.assert_array_equal(env.data.ctrl, held)
    assert 0.0 < env.data.qpos[0] < 0.5
    cancel = f"{ACTION}/cancel_goal"
    zero = {"uuid": [0] * 16}
    assert handle.cancel() == CancelResponse.ERROR_GOAL_TERMINATED
    unknown = env.bus.call(cancel, {"goal_info": {"goal_id": {"uuid": list(range(16))}}})
    assert unknown["return_code"] == CancelResponse.ERROR_UNKNOWN_GOAL_ID
    nothing = env.bus.call(cancel, {"goal_info": {"goal_id": zero}})
    assert nothing["return_code"] == CancelResponse.ERROR_REJECTED
    # By stamp: goals accepted at or before it.
    running = send(env, goal([{"positions": [0.1, 0.1], "time_from_start": 5.0}]))
    early = {"goal_info": {"goal_id": zero, "stamp": {"sec": 0, "nanosec": 1000}}}
    assert env.bus.call(cancel, early)["return_code"] == CancelResponse.ERROR_REJECTED
    late = {"goal_info": {"goal_id": zero, "stamp": {"sec": 100, "nanosec": 0}}}
    reply = env.bus.call(cancel, late)
    assert reply["return_code"] == CancelResponse.ERROR_NONE
    assert [bytes(g["goal_id"]["uuid"]) for g in reply["goals_canceling"]] == [running.goal_id]
    assert running.status == GoalStatus.CANCELED


def test_get_result_before_and_after_the_end_on_the_bus(env: mjfast.MujocoEnv) -> None:
    reply = env.bus.call(f"{ACTION}/send_goal",
                         {"goal_id": {"uuid": list(range(16))},
                          "goal": goal([{"positions": [0.1, 0.1], "time_from_start": 0.3}])})
    assert reply["accepted"]
    waited: list[Any] = []
    asker = threading.Thread(target=lambda: waited.append(env.bus.call(
        f"{ACTION}/get_result", {"goal_id": bytes(range(16))})))
    asker.start()  # before the end: answered when it ends
    assert wait_for(lambda: env.step(50) or bool(waited), TIMEOUT)
    asker.join()
    after = env.bus.call(f"{ACTION}/get_result", {"goal_id": bytes(range(16))})
    assert waited[0] == after
    assert after["status"] == GoalStatus.SUCCEEDED and after["result"]["error_code"] == 0
    unknown = env.bus.call(f"{ACTION}/get_result", {"goal_id": bytes(16)})
    assert unknown == {"status": GoalStatus.UNKNOWN, "result": None}


def test_results_are_kept_for_result_timeout() -> None:
    with mjfast.MujocoEnv(arm("position"), params=controller(result_timeout=0.2)) as env:
        handle = send(env, goal([{"positions": [0.1, 0.1], "time_from_start": 0.1}]))
        run_until_done(env, handle)
        request = {"goal_id": handle.goal_id}
        assert env.bus.call(f"{ACTION}/get_result", request)["status"] == GoalStatus.SUCCEEDED
        assert wait_for(lambda: env.bus.call(f"{ACTION}/get_result", request)["status"]
                        == GoalStatus.UNKNOWN, TIMEOUT)


def test_reset_aborts_the_active_goal(env: mjfast.MujocoEnv) -> None:
    handle = send(env, goal([{"positions": [1.0, 1.0], "time_from_start": 2.0}]))
    env.step(200)
    env.reset()
    assert handle.status == GoalStatus.ABORTED
    assert "reset" in handle.result(timeout=0)["error_string"]
    env.step(300)
    np.testing.assert_allclose(env.data.qpos, [0.0, 0.0], atol=1e-3)  # held where reset put it


def test_reload_aborts_the_active_goal_and_the_new_model_takes_goals(
        env: mjfast.MujocoEnv) -> None:
    handle = send(env, goal([{"positions": [1.0, 1.0], "time_from_start": 2.0}]))
    env.step(200)
    env.reload()
    assert handle.status == GoalStatus.ABORTED
    assert "unloaded" in handle.result(timeout=0)["error_string"]
    again = send(env, goal([{"positions": [0.1, -0.1], "time_from_start": 0.3}]))
    assert run_until_done(env, again)["error_code"] == SUCCESSFUL


def test_a_trajectory_on_the_topic_replaces_the_current_one(env: mjfast.MujocoEnv) -> None:
    handle = send(env, goal([{"positions": [1.0, 1.0], "time_from_start": 2.0}]))
    env.step(10)
    env.bus.publish(f"{NS}/arm/joint_trajectory",
                    {"joint_names": ["b", "a"],
                     "points": [{"positions": [0.2, -0.1],
                                 "time_from_start": {"sec": 0, "nanosec": 300_000_000}}]})
    assert handle.status == GoalStatus.CANCELED
    env.step(1500)
    np.testing.assert_allclose(env.data.qpos, [-0.1, 0.2], atol=0.01)


def test_controller_state_at_the_state_publish_rate(env: mjfast.MujocoEnv) -> None:
    states: list[Any] = []
    env.bus.subscribe(f"{NS}/arm/controller_state", states.append)
    env.step(20)  # 50 Hz: one per 20 steps
    assert wait_for(lambda: len(states) >= 1, TIMEOUT)
    state = states[-1]
    assert state["joint_names"] == ["a", "b"]
    assert set(state["reference"]) >= {"positions", "velocities"}


# -- gripper ------------------------------------------------------------------------------------

# The finger driven by a motor, for the effort command interface (gripper_action_controller's
# effort variant: a PID on the position error writes the force).
GRIPPER_MOTOR_XML = GRIPPER_XML.replace(
    '<position name="finger" joint="finger" kp="300" forcerange="-50 50"/>',
    '<motor name="finger" joint="finger" ctrlrange="-50 50"/>')
GRIPPER_MODELS = {"position": GRIPPER_XML, "effort": GRIPPER_MOTOR_XML}
EFFORT_GAINS = {"finger": {"p": 300.0, "d": 3.0, "i": 0.0, "i_clamp": 0.0}}


def gripper(interface: str = "position", **config: Any) -> dict[str, Any]:
    entry = {"type": "mjfast/GripperActionController", "name": "gripper", "joint": "finger",
             "stall_timeout": 0.2, **config}
    if interface == "effort":
        entry.update(command_interface="effort", gains=EFFORT_GAINS)
    return {"mujoco_server": {"MujocoPlugins": [entry]}}


def test_the_gripper_models_drive_the_finger_as_their_interface_says() -> None:
    assert GRIPPER_MOTOR_XML != GRIPPER_XML  # the replacement found its actuator


@pytest.mark.parametrize("interface", ["position", "effort"])
def test_gripper_reaches_a_free_position(interface: str) -> None:
    with mjfast.MujocoEnv(GRIPPER_MODELS[interface], params=gripper(interface)) as env:
        handle = send(env, {"command": {"position": 0.03, "max_effort": 0.0}}, "gripper")
        result = run_until_done(env, handle)
        assert handle.status == GoalStatus.SUCCEEDED
        assert result["reached_goal"] and not result["stalled"]
        assert abs(result["position"] - 0.03) < 0.01
        assert abs(env.data.qpos[1] - 0.03) < 0.01  # the finger's joint is there


@pytest.mark.parametrize("interface", ["position", "effort"])
@pytest.mark.parametrize("allow_stalling", [True, False])
def test_gripper_stalls_on_the_object_with_the_effort_capped(interface: str,
                                                             allow_stalling: bool) -> None:
    with mjfast.MujocoEnv(GRIPPER_MODELS[interface],
                          params=gripper(interface, allow_stalling=allow_stalling)) as env:
        handle = send(env, {"command": {"position": 0.2, "max_effort": 4.0}}, "gripper")
        result = run_until_done(env, handle)
        assert handle.status == (GoalStatus.SUCCEEDED if allow_stalling else GoalStatus.ABORTED)
        assert result["stalled"] and not result["reached_goal"]
        # The object's face is at 0.08 and the finger 0.01 thick: it stopped there.
        assert abs(result["position"] - 0.07) < 0.005
        assert abs(result["effort"]) <= 4.0 + 1e-9
        assert abs(result["effort"]) > 3.5  # squeezing at max_effort
        env.step(200)
        assert abs(env.data.actuator_force[0]) <= 4.0 + 1e-9  # and it goes on squeezing
        assert abs(env.data.actuator_force[0]) > 3.5


def test_the_effort_interface_writes_the_pid_force_to_the_motor() -> None:
    # One step from rest at 0 toward 0.03: the PID's first output is p * error (no integral,
    # no velocity yet), the force of the motor (gain 1).
    with mjfast.MujocoEnv(GRIPPER_MOTOR_XML, params=gripper("effort")) as env:
        send(env, {"command": {"position": 0.03, "max_effort": 0.0}}, "gripper")
        env.step(1)
        assert env.data.ctrl[0] == pytest.approx(300.0 * 0.03)
        send(env, {"command": {"position": 0.03, "max_effort": 2.0}}, "gripper")
        env.step(1)
        assert abs(env.data.ctrl[0]) == pytest.approx(2.0)  # clamped to max_effort


@pytest.mark.parametrize(("xml", "config", "message"), [
    (GRIPPER_XML, {"command_interface": "effort", "gains": EFFORT_GAINS},
     "no actuator for command interface 'effort' (expected a motor"),
    (GRIPPER_MOTOR_XML, {"command_interface": "effort"}, "gains for joint 'finger' are required"),
    (GRIPPER_MOTOR_XML, {"command_interface": "effort",
                         "gains": {"thumb": {"p": 1.0}}}, "gains name joints"),
    (GRIPPER_XML, {"gains": EFFORT_GAINS}, "gains are for command_interface 'effort'"),
])
def test_gripper_configurations_that_cannot_work_fail_to_load(xml: str, config: dict[str, Any],
                                                              message: str) -> None:
    entry = {"type": "mjfast/GripperActionController", "name": "gripper", "joint": "finger",
             **config}
    with mjfast.MujocoEnv(xml, params={"mujoco_server": {"MujocoPlugins": [entry]}}) as env:
        failure = env.plugins[0].failure
        assert failure is not None and failure.phase == "load"
        assert message in failure.message
