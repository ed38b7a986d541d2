"""mjfast/ForwardCommand: ros2_control's forward_command_controller, commands -> `ctrl`.

Configuration keys: `joints` (joint names, each driven by one actuator) or `actuators` (actuator
names), exactly one of them, and `topic` (default `~commands`). A message is `{"data": [...]}`
(as std_msgs/Float64MultiArray brings it over ROS 2) or a plain sequence, one finite value per
listed joint/actuator in that order; it is written to those actuators' `ctrl` through
`env.control.write` and holds until the next command (the other entries keep their values). A
message of the wrong length or with a non-finite value is counted (`rejected` in the plugin's
statistics), logged, and never applied. Commands are applied one at a time; one that is still
waiting when a newer one arrives is counted as `superseded` and not applied.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast._throttled_log import ThrottledLog
from mjfast.plugin.base import MujocoPlugin
from mjfast.plugins._sensing import id_of, names_of
from mjfast.plugins.clock_publisher import topic_name

__all__ = ["ForwardCommand"]

_log = logging.getLogger("mjfast.plugins.forward_command")


class ForwardCommand(MujocoPlugin):
    config_keys: ClassVar[dict[str, Any]] = {"joints": list[str], "actuators": list[str],
                                             "topic": str}

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        joints, actuators = self.config.get("joints"), self.config.get("actuators")
        if (joints is None) == (actuators is None):
            raise ValueError(f"{who}: give exactly one of joints or actuators (the names the "
                             f"command's values go to, in order)")
        actuator_names = names_of(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
        if actuators is not None:
            ids = [id_of(who, model, mujoco.mjtObj.mjOBJ_ACTUATOR, "actuator", name,
                         actuator_names) for name in actuators]
        else:
            joint_names = names_of(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
            ids = []
            for name in joints:
                joint = id_of(who, model, mujoco.mjtObj.mjOBJ_JOINT, "joint", name, joint_names)
                driving = [a for a in range(model.nu)
                           if int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                           and int(model.actuator_trnid[a, 0]) == joint]
                if len(driving) != 1:
                    raise ValueError(f"{who}: joint {name!r} is driven by {len(driving)} "
                                     f"actuators; expected exactly one (or list actuators)")
                ids.append(driving[0])
        if not ids:
            raise ValueError(f"{who}: the list of joints or actuators is empty")
        self._ids = np.array(ids, dtype=np.intp)
        # A leaf lock (src/_core/env/env_core.h's order), never held across a control call: a
        # command is applied by whichever thread finds none being applied (it drains `_pending`),
        # so a physics-thread publish never waits for a thread that waits for the physics thread.
        self._lock = threading.Lock()
        self._pending: np.ndarray | None = None
        self._applying = False
        # A publisher sending bad commands at a high rate gets a line a second with the count, not
        # a line a message (SPEC §18: bad inbound input is logged at most once a second per topic).
        self._rejections = ThrottledLog(_log)
        self._applied = 0
        self._superseded = 0
        self._rejected = 0
        self.subscription = self.node.subscribe(
            topic_name(who, self.config.get("topic", "~commands")), self.command)
        return True

    def command(self, message: Any) -> None:
        """One command: applied at once through the control interface, or rejected. While
        another thread is applying one, that thread applies this one next (a command still
        waiting when a newer one comes is superseded, as in forward_command_controller's
        realtime buffer)."""
        values = message.get("data") if isinstance(message, Mapping) else message
        try:
            if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
                raise ValueError(f"expected a sequence of {len(self._ids)} numbers")
            command = np.asarray(values, dtype=np.float64).reshape(-1)
            if command.size != len(self._ids):
                raise ValueError(f"expected {len(self._ids)} values, got {command.size}")
            if not np.all(np.isfinite(command)):
                raise ValueError("the values must be finite")
        except (TypeError, ValueError) as error:
            with self._lock:
                self._rejected += 1
            self._rejections.report("command", "%s: command rejected, not applied: %s",
                                    self.name, error)
            return
        with self._lock:
            if self._pending is not None:
                self._superseded += 1  # never reached ctrl: the newest command wins
            self._pending = command
            if self._applying:
                return  # the thread applying commands takes this one next
            self._applying = True
        self._apply_pending()

    def _apply_pending(self) -> None:
        """Applies the newest pending command until none is left (one thread at a time: the one
        that set `_applying`). A read-modify-write of ctrl, so the other entries keep theirs."""
        try:
            while True:
                with self._lock:
                    command, self._pending = self._pending, None
                    if command is None:
                        self._applying = False
                        return
                ctrl = self.env.control.read().ctrl
                ctrl[self._ids] = command
                self.env.control.write(ctrl=ctrl)
                with self._lock:
                    self._applied += 1
        except BaseException:
            with self._lock:
                self._pending = None
                self._applying = False
            raise

    def statistics(self) -> dict[str, Any]:
        return {"applied": float(getattr(self, "_applied", 0)),
                "rejected": float(getattr(self, "_rejected", 0)),
                "superseded": float(getattr(self, "_superseded", 0))}

    def unload(self) -> None:
        subscription = getattr(self, "subscription", None)
        if subscription is not None:
            subscription.unsubscribe()
