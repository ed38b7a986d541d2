"""mjfast/GripperActionController: ros2_controllers' gripper_action_controller (SPEC §23).

A `control_msgs/action/GripperCommand` goal (`command.position`, `command.max_effort`; in Python
`send_goal(goal)`, on the bus `~/gripper_cmd/send_goal`, on ROS 2 the action `<node>/gripper_cmd`)
drives one joint toward the position, with the actuator's force kept within `max_effort` (0: the
actuator's own limits), through one of gripper_action_controller's two command interfaces
(`command_interface`): `position` (default; position_controllers/GripperActionController) writes
the position to the joint's position servo; `effort` (effort_controllers/GripperActionController)
runs a PID with `gains: {<joint>: {p, i, d, i_clamp}}` on the position error and writes its force,
clamped to max_effort, to the joint's motor (ros2_controllers, Jazzy:
gripper_controllers/hardware_interface_adapter.hpp). The compiled GripperCore (src/_core/control)
does that every step and decides the goal as gripper_action_controller's check_for_success does:
reached within `goal_tolerance`; stalled when the joint moved slower than
`stall_velocity_threshold` for `stall_timeout` simulated seconds without reaching it, which
succeeds with `allow_stalling` and aborts otherwise; either way the command stays (a gripper
stalled on an object keeps squeezing it at max_effort). Results and feedback carry `position`,
`effort` (the actuator's force), `stalled` and `reached_goal`. A new goal preempts the active one
(CANCELED); a cancel, a reset or a reload holds the joint where it is.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

import mujoco

from mjfast._core_loader import _core
from mjfast.plugin.actions import ActionServer, GoalHandle
from mjfast.plugin.base import MujocoPlugin
from mjfast.plugins._controller_events import watch_events
from mjfast.plugins._sensing import id_of, names_of
from mjfast.plugins.joint_trajectory_controller import command_actuator

__all__ = ["GripperActionController"]

_log = logging.getLogger("mjfast.plugins.gripper_action_controller")


def _result(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"position": float(state["position"]), "effort": float(state["effort"]),
            "stalled": bool(state["stalled"]), "reached_goal": bool(state["reached_goal"])}


class GripperActionController(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {
        "joint": str, "command_interface": ("position", "effort"), "gains": dict,
        "goal_tolerance": float, "stall_velocity_threshold": float,
        "stall_timeout": float, "allow_stalling": bool, "action_monitor_rate": float,
        "result_timeout": float}
    ros_actions: ClassVar[dict[str, str]] = {"~/gripper_cmd": "control_msgs/action/GripperCommand"}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        name = self.config.get("joint")
        if not name:
            raise ValueError(f"{who}: 'joint' is required (the gripper's joint)")
        joint = id_of(who, model, mujoco.mjtObj.mjOBJ_JOINT, "joint", name,
                      names_of(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt))
        interface = str(self.config.get("command_interface", "position"))
        if interface not in ("position", "effort"):
            raise ValueError(f"{who}: command_interface must be 'position' or 'effort', got "
                             f"{interface!r}")
        actuator = command_actuator(model, joint, interface)
        if actuator is None:
            kind = "a position servo (<position>)" if interface == "position" else \
                "a motor (<motor>)"
            raise ValueError(f"{who}: joint {name!r} has no actuator for command interface "
                             f"{interface!r} (expected {kind} on it)")
        gains = self._gains(name, interface)
        values = {key: float(self.config.get(key, default)) for key, default in (
            ("goal_tolerance", 0.01), ("stall_velocity_threshold", 0.001),
            ("stall_timeout", 1.0), ("action_monitor_rate", 20.0))}
        for key, value in values.items():
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{who}: {key} must be a number >= 0, got {value}")
        self.allow_stalling = bool(self.config.get("allow_stalling", False))
        rate = values["action_monitor_rate"]
        self.core = _core.GripperCore(
            qpos=int(model.jnt_qposadr[joint]), dof=int(model.jnt_dofadr[joint]),
            actuator=actuator, gain=float(model.actuator_gainprm[actuator, 0]),
            bias=tuple(float(x) for x in model.actuator_biasprm[actuator, :3]),
            goal_tolerance=values["goal_tolerance"],
            stall_velocity_threshold=values["stall_velocity_threshold"],
            stall_timeout=values["stall_timeout"],
            feedback_period=1.0 / rate if rate > 0 else 0.0,
            effort=interface == "effort", gains=gains)
        self.__mjfast_native_control__ = self.core  # see JointTrajectoryController
        self.joint = name
        self._qpos_address = int(model.jnt_qposadr[joint])
        self._data = data
        self._numbers = itertools.count(1)
        self._active: tuple[int, GoalHandle] | None = None
        self._lock = threading.Lock()  # the active goal; a leaf
        self.server = ActionServer(
            self.node, "~/gripper_cmd", validate=self._validate, on_accepted=self._on_accepted,
            on_cancel=self._on_cancel, clock=lambda: float(self._data.time),
            result_timeout=float(self.config.get("result_timeout", 900.0)))
        self._stopping = False
        self._monitor = threading.Thread(target=self._watch, daemon=True,
                                         name=f"mjfast-gripper-{who}")
        self._monitor.start()
        return True

    def _gains(self, joint: str, interface: str) -> tuple[float, float, float, float]:
        """The effort interface's PID gains, `gains: {<joint>: {p, i, d, i_clamp}}` as
        hardware_interface_adapter.hpp reads them (`gains.<joint>.p` ...)."""
        configured = self.config.get("gains") or {}
        unknown = sorted(set(configured) - {joint})
        if unknown:
            raise ValueError(f"{self.name}: gains name joints this controller does not drive: "
                             f"{unknown} (its joint: {joint!r})")
        if interface != "effort":
            if configured:
                raise ValueError(f"{self.name}: gains are for command_interface 'effort' "
                                 f"(the position interface writes the position to the servo)")
            return (0.0, 0.0, 0.0, 0.0)
        entry = configured.get(joint)
        if not isinstance(entry, Mapping) or "p" not in entry:
            raise ValueError(f"{self.name}: gains for joint {joint!r} are required with the "
                             f"effort command interface ({{p, i, d, i_clamp}}, p at least)")
        values = tuple(float(entry.get(key, 0.0)) for key in ("p", "i", "d", "i_clamp"))
        if not all(math.isfinite(v) for v in values) or values[3] < 0:
            raise ValueError(f"{self.name}: gains of {joint!r} must be finite, i_clamp >= 0, "
                             f"got {dict(entry)}")
        return values  # type: ignore[return-value]

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        # As JointTrajectoryController's: the compiled control() runs instead.
        self.core.control(model._address, data._address)

    def send_goal(self, goal: Mapping[str, Any], goal_id: Any = None) -> GoalHandle:
        """A GripperCommand goal: `{"command": {"position": x, "max_effort": e}}`."""
        return self.server.send_goal(goal, goal_id)

    def reset(self) -> None:
        self._end_active("abort")
        self.core.hold()

    def unload(self) -> None:
        self.server.shutdown(self._now())
        self._stopping = True
        self.core.close()
        self._monitor.join(timeout=5.0)

    def _now(self) -> dict[str, Any]:
        state = self.core.feedback()
        return _result({**state, "position": float(self._data.qpos[self._qpos_address])})

    def _validate(self, goal: Any) -> dict[str, Any] | None:
        command = goal.get("command") if isinstance(goal, Mapping) else None
        try:
            position = float(command["position"])
            effort = float(command.get("max_effort", 0.0))
        except (TypeError, KeyError, ValueError):
            position = effort = math.nan
        if not (math.isfinite(position) and math.isfinite(effort)):
            return {"position": math.nan, "effort": 0.0, "stalled": False, "reached_goal": False}
        return None

    def _on_accepted(self, handle: GoalHandle) -> None:
        command = handle.goal["command"]
        number = next(self._numbers)
        self._end_active("cancel")  # preempted (gripper_action_controller's preempt)
        with self._lock:
            self._active = (number, handle)
        handle.execute()
        self.core.command(number, float(command["position"]),
                          float(command.get("max_effort", 0.0)))

    def _on_cancel(self, handle: GoalHandle) -> None:
        with self._lock:
            active = self._active is not None and self._active[1] is handle
            if active:
                self._active = None
        if active:
            self.core.hold()
        handle.canceled(self._now())

    def _end_active(self, how: str) -> None:
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            (active[1].canceled if how == "cancel" else active[1].abort)(self._now())

    def _watch(self) -> None:
        watch_events(self.core, self._handle, lambda: self._stopping, self.name, _log)

    def _handle(self, seen: tuple[int, int, int], counts: tuple[int, int, int]) -> None:
        with self._lock:
            active = self._active
        if counts[0] != seen[0] and active is not None:
            state = self.core.feedback()
            if state["goal"] == active[0]:
                active[1].publish_feedback(_result(state))
        if counts[2] != seen[2]:
            end = self.core.last_end()
            if active is None or end["goal"] != active[0]:
                return
            with self._lock:
                if self._active is active:
                    self._active = None
            result = _result(end)
            if end["reached_goal"] or self.allow_stalling:
                active[1].succeed(result)
            else:
                active[1].abort(result)
