"""mjfast/JointTrajectoryController: ros2_controllers' joint_trajectory_controller (SPEC §23).

A goal of `control_msgs/action/FollowJointTrajectory` (in Python `send_goal(goal)`, on the bus
`~/follow_joint_trajectory/send_goal`, on ROS 2 the action `<node>/follow_joint_trajectory`) or
a `trajectory_msgs/msg/JointTrajectory` on `~/joint_trajectory` (no goal: it replaces the
current trajectory) is checked here, then handed to the compiled JointTrajectoryCore
(src/_core/control), which samples it every step, writes the configured command interface's
`ctrl` (a position servo, a velocity servo, a motor) and checks the goal's tolerances, with
no Python per step. This module keeps the goals (mjfast.plugin.actions' ActionServer, rcl_action
semantics), maps the core's outcomes to control_msgs result codes, and publishes the feedback
and `~/controller_state` the core copies out at `action_monitor_rate` / `state_publish_rate`
(simulated time). Where SPEC is silent it does what joint_trajectory_controller
(ros2_controllers, Jazzy: joint_trajectory_controller.cpp, trajectory.cpp, validate_*) does.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.plugin.actions import ActionServer, GoalHandle, seconds_of, time_message
from mjfast.plugin.base import MujocoPlugin
from mjfast.plugins._controller_events import watch_events
from mjfast.plugins._sensing import id_of, names_of

__all__ = [
    "GOAL_TOLERANCE_VIOLATED",
    "INVALID_GOAL",
    "INVALID_JOINTS",
    "OLD_HEADER_TIMESTAMP",
    "PATH_TOLERANCE_VIOLATED",
    "SUCCESSFUL",
    "JointTrajectoryController",
    "command_actuator",
]

_log = logging.getLogger("mjfast.plugins.joint_trajectory_controller")

# control_msgs/action/FollowJointTrajectory's result codes.
SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5

_INTERFACES = {("position",): "position", ("velocity",): "velocity", ("effort",): "effort",
               ("position", "velocity"): "position_velocity"}


def command_actuator(model: mujoco.MjModel, joint: int, interface: str) -> int | None:
    """The actuator that drives `joint` through command interface `interface`: a position servo
    (fixed gain kp, affine bias -kp * length) for `position`, a velocity servo (bias -kv *
    velocity) for `velocity`, a motor (no bias) for `effort`; None if the joint has none."""
    for a in range(model.nu):
        if (int(model.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT)
                or int(model.actuator_trnid[a, 0]) != joint
                or int(model.actuator_gaintype[a]) != int(mujoco.mjtGain.mjGAIN_FIXED)):
            continue
        gain = float(model.actuator_gainprm[a, 0])
        bias_type = int(model.actuator_biastype[a])
        b0, b1, b2 = (float(x) for x in model.actuator_biasprm[a, :3])
        if interface == "effort" and bias_type == int(mujoco.mjtBias.mjBIAS_NONE):
            return a
        if bias_type != int(mujoco.mjtBias.mjBIAS_AFFINE) or gain <= 0.0 or b0 != 0.0:
            continue
        if interface == "position" and math.isclose(b1, -gain):
            return a
        if interface == "velocity" and b1 == 0.0 and math.isclose(b2, -gain):
            return a
    return None


def _result(code: int, text: str) -> dict[str, Any]:
    return {"error_code": code, "error_string": text}


def _values(value: Any) -> np.ndarray:
    return np.asarray(value if value is not None else [], dtype=float).reshape(-1)


# control_msgs/JointTolerance's "erase" value (tolerances.hpp compares it within float epsilon).
_ERASE = -1.0


def _resolve_tolerance(default: float, given: float, what: str) -> float:
    """tolerances.hpp's resolve_tolerance_source: > 0 is the tolerance, 0 keeps the default, -1
    erases it (0: not checked); ValueError naming `what` for any other value."""
    if given > 0.0:
        return given
    if abs(given - _ERASE) < float(np.finfo(np.float32).eps):
        return 0.0
    if given == 0.0:
        return default
    raise ValueError(f"{what} is {given}, an illegal tolerance (> 0, 0 for the default or -1 "
                     f"for none)")


def _given(value: Any) -> bool:
    """Whether a goal's optional part has content: a non-empty list, or a trajectory with
    points."""
    if isinstance(value, Mapping):
        return bool(value.get("points")) or bool(value.get("joint_names"))
    return value is not None and len(value) > 0


class _Rejected(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.result = _result(code, text)


class JointTrajectoryController(MujocoPlugin):
    """See the module docstring and README "Drive it from MoveIt" for the configuration."""

    config_keys: ClassVar[dict[str, Any]] = {
        "joints": list[str], "command_interfaces": list[str], "state_interfaces": list[str],
        "gains": dict, "constraints": dict, "allow_partial_joints_goal": bool,
        "open_loop_control": bool, "state_publish_rate": float, "action_monitor_rate": float,
        "interpolation_method": ("splines", "none"), "result_timeout": float}
    ros_types: ClassVar[dict[str, str]] = {
        "~/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
        "~/controller_state": "control_msgs/msg/JointTrajectoryControllerState"}
    ros_actions: ClassVar[dict[str, str]] = {
        "~/follow_joint_trajectory": "control_msgs/action/FollowJointTrajectory"}

    # -- lifecycle ------------------------------------------------------------------------------

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        config = self.config
        joints = list(config.get("joints") or [])
        if not joints:
            raise ValueError(f"{who}: 'joints' is required (the joints this controller drives)")
        if len(set(joints)) != len(joints):
            raise ValueError(f"{who}: 'joints' lists a joint twice: {joints}")
        interfaces = tuple(config.get("command_interfaces", ["position"]))
        if interfaces not in _INTERFACES:
            raise ValueError(f"{who}: command_interfaces must be [position], [velocity], "
                             f"[effort] or [position, velocity], got {list(interfaces)}")
        command = _INTERFACES[interfaces]
        # Which JointTrajectoryPoint field of controller_state's `output` the command goes in.
        self._output_field = {"velocity": "velocities", "effort": "effort"}.get(command,
                                                                               "positions")
        states = list(config.get("state_interfaces", ["position", "velocity"]))
        if "position" not in states or not set(states) <= {"position", "velocity"}:
            raise ValueError(f"{who}: state_interfaces must be [position] or [position, "
                             f"velocity], got {states}")
        joint_names = names_of(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
        self.joints = joints
        self._index = {name: i for i, name in enumerate(joints)}
        qpos, dof, actuator, velocity_actuator = [], [], [], []
        for name in joints:
            joint = id_of(who, model, mujoco.mjtObj.mjOBJ_JOINT, "joint", name, joint_names)
            if int(model.jnt_type[joint]) not in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                                  int(mujoco.mjtJoint.mjJNT_SLIDE)):
                raise ValueError(f"{who}: joint {name!r} is not a hinge or slide joint")
            qpos.append(int(model.jnt_qposadr[joint]))
            dof.append(int(model.jnt_dofadr[joint]))
            for interface in interfaces:
                found = command_actuator(model, joint, interface)
                if found is None:
                    kind = {"position": "a position servo (<position>)",
                            "velocity": "a velocity servo (<velocity>)",
                            "effort": "a motor (<motor>)"}[interface]
                    raise ValueError(f"{who}: joint {name!r} has no actuator for command "
                                     f"interface {interface!r} (expected {kind} on it)")
                (velocity_actuator if interface == "velocity" and command ==
                 "position_velocity" else actuator).append(found)
        gains, ff = self._gains(command)
        self._constraints(config.get("constraints") or {})
        self.allow_partial = bool(config.get("allow_partial_joints_goal", False))
        state_rate = float(config.get("state_publish_rate", 50.0))
        monitor_rate = float(config.get("action_monitor_rate", 20.0))
        for key, rate in (("state_publish_rate", state_rate),
                          ("action_monitor_rate", monitor_rate)):
            if not (math.isfinite(rate) and rate >= 0.0):
                raise ValueError(f"{who}: {key} must be a rate in Hz >= 0, got {rate}")
        self.core = _core.JointTrajectoryCore(
            qpos=qpos, dof=dof, actuator=actuator, velocity_actuator=velocity_actuator,
            command=command, gains=gains, ff_velocity_scale=ff,
            open_loop=bool(config.get("open_loop_control", False)),
            interpolate=config.get("interpolation_method", "splines") == "splines",
            state_period=1.0 / state_rate if state_rate > 0 else 0.0,
            feedback_period=1.0 / monitor_rate if monitor_rate > 0 else 0.0)
        # The adapter hands the core's control() to the host: the step never enters Python here.
        self.__mjfast_native_control__ = self.core
        self._data = data
        self._numbers = itertools.count(1)
        self._active: tuple[int, GoalHandle] | None = None
        self._checked: tuple[Any, dict[str, Any]] | None = None  # the goal validated last
        self._lock = threading.Lock()  # the active goal; a leaf, never held across a call out
        self.server = ActionServer(
            self.node, "~/follow_joint_trajectory", validate=self._validate,
            on_accepted=self._on_accepted, on_cancel=self._on_cancel,
            clock=lambda: float(self._data.time),
            result_timeout=float(config.get("result_timeout", 900.0)))
        self.node.subscribe("~/joint_trajectory", self._on_trajectory_topic)
        self._stopping = False
        self._monitor = threading.Thread(target=self._watch, daemon=True,
                                         name=f"mjfast-jtc-{who}")
        self._monitor.start()
        return True

    def _gains(self, command: str) -> tuple[list[tuple[float, float, float, float]],
                                            list[float]]:
        configured = self.config.get("gains") or {}
        unknown = sorted(set(configured) - set(self.joints))
        if unknown:
            raise ValueError(f"{self.name}: gains name joints this controller does not drive: "
                             f"{unknown} (its joints: {self.joints})")
        gains, ff = [], []
        for name in self.joints:
            joint = configured.get(name)
            if joint is None:
                if command in ("velocity", "effort"):
                    raise ValueError(f"{self.name}: gains for joint {name!r} are required with "
                                     f"the {command} command interface ({{p, i, d, i_clamp, "
                                     f"ff_velocity_scale}})")
                joint = {}
            values = [float(joint.get(key, 0.0)) for key in ("p", "i", "d", "i_clamp")]
            if not all(math.isfinite(v) for v in values) or values[3] < 0:
                raise ValueError(f"{self.name}: gains of {name!r} must be finite, i_clamp >= 0")
            gains.append(tuple(values))
            ff.append(float(joint.get("ff_velocity_scale", 0.0)))
        return gains, ff

    def _constraints(self, constraints: Mapping[str, Any]) -> None:
        self.stopped_velocity_tolerance = float(
            constraints.get("stopped_velocity_tolerance", 0.01))
        self.goal_time = float(constraints.get("goal_time", 0.0))
        unknown = sorted(set(constraints) - set(self.joints)
                         - {"stopped_velocity_tolerance", "goal_time"})
        if unknown:
            raise ValueError(f"{self.name}: constraints name joints this controller does not "
                             f"drive: {unknown} (its joints: {self.joints})")
        # Per joint (position, velocity): the path's, and the goal's with
        # stopped_velocity_tolerance as its velocity (joint_trajectory_controller's defaults).
        self.path_tolerance = [(float((constraints.get(j) or {}).get("trajectory", 0.0)), 0.0)
                               for j in self.joints]
        self.goal_tolerance = [(float((constraints.get(j) or {}).get("goal", 0.0)),
                                self.stopped_velocity_tolerance) for j in self.joints]

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        # Declared so the host dispatches the control callback; the adapter gives the host the
        # core's compiled control() instead (__mjfast_native_control__), so this runs only where
        # that is unavailable.
        self.core.control(model._address, data._address)

    def reset(self) -> None:
        """A world reset aborts the active goal; the joints are held where the reset put them."""
        self._end_active("abort", _result(INVALID_GOAL, "aborted: the simulation was reset"))
        self.core.hold()

    def unload(self) -> None:
        self.server.shutdown(_result(INVALID_GOAL, "aborted: the controller was unloaded "
                                                   "(a reload, or the env closed)"))
        self._stopping = True
        self.core.close()
        self._monitor.join(timeout=5.0)

    # -- goals ----------------------------------------------------------------------------------

    def send_goal(self, goal: Mapping[str, Any], goal_id: Any = None) -> GoalHandle:
        """A FollowJointTrajectory goal (its fields as a dict: `trajectory` with `joint_names`
        and `points`, each point's `time_from_start` in seconds or `{sec, nanosec}`; optionally
        `path_tolerance`, `goal_tolerance`, `goal_time_tolerance`)."""
        return self.server.send_goal(goal, goal_id)

    def _validate(self, goal: Any) -> dict[str, Any] | None:
        try:
            # Kept for _on_accepted, which the server calls next with this very goal.
            self._checked = (goal, self._prepare(goal))
        except _Rejected as rejected:
            return rejected.result
        return None

    def _prepare(self, goal: Any) -> dict[str, Any]:
        """The goal as the core takes it; _Rejected with its control_msgs code otherwise (the
        checks of joint_trajectory_controller's validate_trajectory_msg, SPEC §23's codes)."""
        if not isinstance(goal, Mapping) or "trajectory" not in goal:
            raise _Rejected(INVALID_GOAL, f"a goal is a mapping with 'trajectory', got "
                                          f"{type(goal).__name__}")
        prepared = self._trajectory(goal["trajectory"])
        path, final, goal_time = self._goal_tolerances(goal)
        prepared.update(path=path, goal_tolerance=final, goal_time=goal_time)
        return prepared

    def _goal_tolerances(self, goal: Mapping[str, Any]) -> tuple[list[tuple[float, float]],
                                                                 list[tuple[float, float]],
                                                                 float]:
        """The goal's tolerances over the parameters', as joint_trajectory_controller's
        get_segment_tolerances(default_tolerances, goal, joints) (ros2_controllers, Jazzy,
        tolerances.hpp) applies them: each of a JointTolerance's position, velocity and
        acceleration, and goal_time_tolerance, > 0 replaces the default, 0 keeps it, -1 erases
        it (no limit); a joint this controller does not drive, or any other negative value,
        is logged and the goal runs with the default tolerances, all of them (not rejected).
        Accelerations are checked only against an acceleration state interface, which this
        controller has not (as there: the error's accelerations are empty, never over)."""
        defaults = (list(self.path_tolerance), list(self.goal_tolerance), self.goal_time)
        path, final = list(self.path_tolerance), list(self.goal_tolerance)
        try:
            goal_time = _resolve_tolerance(self.goal_time,
                                           seconds_of(goal.get("goal_time_tolerance", 0.0)),
                                           "goal_time_tolerance")
            for key, tolerances in (("path_tolerance", path), ("goal_tolerance", final)):
                for entry in goal.get(key) or []:
                    name = entry.get("name")
                    if name not in self._index:
                        raise ValueError(f"joint {name!r} specified in goal.{key} does not "
                                         f"exist (this controller drives {self.joints})")
                    i = self._index[name]
                    position, velocity = tolerances[i]
                    where = f"goal.{key} of joint {name!r}"
                    tolerances[i] = (
                        _resolve_tolerance(position, float(entry.get("position", 0.0)),
                                           f"{where}: position"),
                        _resolve_tolerance(velocity, float(entry.get("velocity", 0.0)),
                                           f"{where}: velocity"))
                    _resolve_tolerance(0.0, float(entry.get("acceleration", 0.0)),
                                       f"{where}: acceleration")
        except ValueError as error:
            _log.error("%s: %s; using the default tolerances", self.name, error)
            return defaults
        # Not read by joint_trajectory_controller (Jazzy nor later): a goal's multi-DOF
        # trajectory and its component tolerances are ignored there, and here, said once a goal.
        ignored = [key for key in ("multi_dof_trajectory", "component_path_tolerance",
                                   "component_goal_tolerance") if _given(goal.get(key))]
        if ignored:
            _log.warning("%s: ignored %s of a goal, as joint_trajectory_controller does",
                         self.name, ", ".join(ignored))
        return path, final, goal_time

    def _trajectory(self, trajectory: Any) -> dict[str, Any]:
        names = [str(n) for n in trajectory.get("joint_names", [])]
        points = list(trajectory.get("points", []))
        if not points:
            raise _Rejected(INVALID_GOAL, "the trajectory has no points")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise _Rejected(INVALID_JOINTS, f"unknown joint(s) {unknown}: this controller "
                                            f"drives {self.joints}")
        if len(set(names)) != len(names):
            raise _Rejected(INVALID_JOINTS, f"joint_names lists a joint twice: {names}")
        missing = [j for j in self.joints if j not in names]
        if missing and not self.allow_partial:
            raise _Rejected(INVALID_JOINTS, f"the trajectory lacks joint(s) {missing} "
                                            f"(allow_partial_joints_goal is false)")
        k, m = len(names), len(points)
        tables = {field: self._table(points, field, k) for field in
                  ("positions", "velocities", "accelerations")}
        times = []
        for i, point in enumerate(points):
            if _values(point.get("effort")).size:
                raise _Rejected(INVALID_GOAL, f"point {i} has efforts, which "
                                              f"joint_trajectory_controller does not take")
            at = seconds_of(point.get("time_from_start", 0.0))
            if not math.isfinite(at) or (times and at <= times[-1]):
                raise _Rejected(INVALID_GOAL, f"time_from_start must increase from point to "
                                              f"point: point {i} is at {at} s after "
                                              f"{times[-1] if times else 0.0} s")
            times.append(at)
        if tables["accelerations"] is not None and tables["velocities"] is None:
            raise _Rejected(INVALID_GOAL, "points with accelerations need velocities too")
        header = trajectory.get("header") or {}
        start = seconds_of(header.get("stamp", 0.0)) if isinstance(header, Mapping) else 0.0
        now = float(self._data.time)
        if start != 0.0 and start + times[-1] < now:
            raise _Rejected(OLD_HEADER_TIMESTAMP, f"the trajectory ends at {start + times[-1]} "
                                                  f"s, before now ({now} s)")
        # In the controller's joint order; a joint the goal leaves out holds its last command.
        order = [self._index[name] for name in names]
        out: dict[str, list[float]] = {}
        for field, table in tables.items():
            if table is None:
                out[field] = []
                continue
            if order == list(range(len(self.joints))):
                full = table
            else:
                full = np.zeros((m, len(self.joints)))
                if field == "positions":
                    full[:] = self.core.snapshot()["desired_position"]
                full[:, order] = table
            out[field] = full.ravel().tolist()
        return {"start": math.nan if start == 0.0 else start, "times": times, **out}

    @staticmethod
    def _table(points: list[Any], field: str, k: int) -> np.ndarray | None:
        """One field of every point as an (m, k) table (None: no point has it); _Rejected with
        the first point at fault otherwise."""
        rows = [point.get(field) for point in points]
        if all(row is not None for row in rows):
            try:  # the common case at once: every point has k finite values
                table = np.array(rows, dtype=float)
            except (TypeError, ValueError):
                table = None
            if table is not None and table.shape == (len(points), k) and np.isfinite(table).all():
                return table
            if table is not None and table.shape == (len(points), 0) and field != "positions":
                return None
        values = [_values(row) for row in rows]
        sizes = [v.size for v in values]
        for i, size in enumerate(sizes):
            if field == "positions" and size != k:
                raise _Rejected(INVALID_GOAL, f"point {i} has {size} positions for {k} joint "
                                              f"names")
            if field != "positions" and size not in (0, k):
                raise _Rejected(INVALID_GOAL, f"point {i} has {size} {field} for {k} joint "
                                              f"names (expected {k} or none)")
        if field != "positions" and len(set(sizes)) > 1:
            raise _Rejected(INVALID_GOAL, f"some points have {field} and some do not")
        if sizes[0] == 0:
            return None if field != "positions" else np.zeros((len(points), 0))
        table = np.vstack(values)
        finite = np.isfinite(table).all(axis=1)
        if not finite.all():
            raise _Rejected(INVALID_GOAL, f"point {int(np.argmin(finite))} has a {field[:-1]} "
                                          f"that is not finite")
        return table

    def _on_accepted(self, handle: GoalHandle) -> None:
        checked, self._checked = self._checked, None
        if checked is not None and checked[0] is handle.goal:
            prepared = checked[1]
        else:
            try:
                prepared = self._prepare(handle.goal)
            except _Rejected as rejected:
                handle.abort(rejected.result)
                return
        number = next(self._numbers)
        # A new goal preempts the active one, which ends CANCELED (joint_trajectory_controller's
        # preempt_active_goal).
        self._end_active("cancel", _result(SUCCESSFUL, "canceled: preempted by a new goal"))
        with self._lock:
            self._active = (number, handle)
        handle.execute()
        self.core.set_trajectory(number, prepared["start"], prepared["times"],
                                 prepared["positions"], prepared["velocities"],
                                 prepared["accelerations"], prepared["path"],
                                 prepared["goal_tolerance"], prepared["goal_time"])

    def _on_cancel(self, handle: GoalHandle) -> None:
        with self._lock:
            active = self._active is not None and self._active[1] is handle
            if active:
                self._active = None
        if active:
            self.core.hold()  # a cancel holds the current position
        handle.canceled(_result(SUCCESSFUL, "canceled: holding position"))

    def _end_active(self, how: str, result: dict[str, Any]) -> None:
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            (active[1].canceled if how == "cancel" else active[1].abort)(result)

    def _on_trajectory_topic(self, message: Any) -> None:
        try:
            prepared = self._prepare({"trajectory": message})
        except _Rejected as rejected:
            _log.warning("%s: ignored a trajectory on %s: %s", self.name,
                         self.node.resolve_name("~/joint_trajectory"),
                         rejected.result["error_string"])
            return
        self._end_active("cancel", _result(SUCCESSFUL, "canceled: replaced by a trajectory "
                                                       "on ~/joint_trajectory"))
        self.core.set_trajectory(0, prepared["start"], prepared["times"], prepared["positions"],
                                 prepared["velocities"], prepared["accelerations"],
                                 prepared["path"], prepared["goal_tolerance"], 0.0)

    # -- what the core copies out ----------------------------------------------------------------

    def _watch(self) -> None:
        watch_events(self.core, self._handle, lambda: self._stopping, self.name, _log)

    def _handle(self, seen: tuple[int, int, int], counts: tuple[int, int, int]) -> None:
        with self._lock:
            active = self._active
        if counts[1] != seen[1]:
            self.node.publish("~/controller_state", self._state_message(self.core.snapshot()))
        if counts[0] != seen[0] and active is not None:
            feedback = self.core.feedback()
            if feedback["goal"] == active[0]:
                active[1].publish_feedback(self._feedback(feedback))
        if counts[2] != seen[2]:
            end = self.core.last_end()
            if active is None or end["goal"] != active[0]:
                return  # a goal that ended otherwise already (preempted, canceled)
            with self._lock:
                if self._active is active:
                    self._active = None
            handle = active[1]
            if end["outcome"] == "succeeded":
                handle.succeed(_result(SUCCESSFUL, ""))
                return
            joint = self.joints[end["joint"]]
            what = "velocity" if end["velocity"] else "position"
            if end["outcome"] == "path_tolerance_violated":
                handle.abort(_result(PATH_TOLERANCE_VIOLATED,
                                     f"path tolerance violated: joint {joint!r} {what} error "
                                     f"{end['error']:.6g} at t = {end['time']:.6g} s"))
            else:
                handle.abort(_result(GOAL_TOLERANCE_VIOLATED,
                                     f"goal tolerance violated: joint {joint!r} {what} error "
                                     f"{end['error']:.6g}, goal_time exceeded at t = "
                                     f"{end['time']:.6g} s"))

    def _point(self, positions: Any, velocities: Any, accelerations: Any = None,
               at: float = 0.0) -> dict[str, Any]:
        point = {"positions": np.asarray(positions, dtype=float),
                 "velocities": np.asarray(velocities, dtype=float),
                 "time_from_start": time_message(max(at, 0.0))}
        if accelerations is not None:
            point["accelerations"] = np.asarray(accelerations, dtype=float)
        return point

    def _feedback(self, s: Mapping[str, Any]) -> dict[str, Any]:
        return {"header": {"stamp": time_message(s["time"]), "frame_id": ""},
                "joint_names": list(self.joints),
                "desired": self._point(s["desired_position"], s["desired_velocity"],
                                       s["desired_acceleration"]),
                "actual": self._point(s["actual_position"], s["actual_velocity"]),
                "error": self._point(s["error_position"], s["error_velocity"])}

    def _state_message(self, s: Mapping[str, Any]) -> dict[str, Any]:
        return {"time": s["time"], "joint_names": list(self.joints),
                "reference": self._point(s["desired_position"], s["desired_velocity"],
                                         s["desired_acceleration"]),
                "feedback": self._point(s["actual_position"], s["actual_velocity"]),
                "error": self._point(s["error_position"], s["error_velocity"]),
                "output": {self._output_field: np.asarray(s["output"], dtype=float)},
                "speed_scaling_factor": 1.0}
