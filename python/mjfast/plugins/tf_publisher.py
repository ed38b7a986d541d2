"""mjfast/TfPublisher: every body's pose relative to its parent body, as ROS's /tf (SPEC §19).

Configuration keys: `rate_hz` (simulated time, default 50), `bodies` (body names; default every
body but the world), `topic` (default `/tf`) and `static_topic` (default `/tf_static`). A body with
joints (or a mocap body) goes on `topic` at `rate_hz`; a body welded to its parent (no joint) has
a constant pose there and goes once on `static_topic` when the plugin loads (transient local over
ROS 2, so that late joiners get it). A message is `{"time", "transforms": [{"frame_id",
"child_frame_id", "translation", "quaternion"}]}`: the parent's name (`world` for the world
body) and the body's (`body_<id>` when unnamed), the body frame's position in the parent's frame
and its orientation as MuJoCo's (w, x, y, z). With the ROS 2 bridge it is tf2_msgs/TFMessage.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.plugins._sensing import RatePublisher, listed_ids, names_of, number
from mjfast.plugins.clock_publisher import topic_name

__all__ = ["TfPublisher"]

_KEYS = ("rate_hz", "bodies", "topic", "static_topic")


class TfPublisher(RatePublisher):
    # Checked before load (mjfast.config_schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        rate_hz = number(who, "rate_hz", self.config.get("rate_hz", 50.0), minimum=0.0,
                         strict=True)
        names = names_of(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
        ids = listed_ids(who, self.config, "bodies", model, mujoco.mjtObj.mjOBJ_BODY, "body",
                         names)
        ids = [b for b in (ids if ids is not None else range(1, model.nbody)) if b > 0]
        frame = ["world"] + [names[b] or f"body_{b}" for b in range(1, model.nbody)]
        self._topic = topic_name(who, self.config.get("topic", "/tf"))
        static_topic = topic_name(who, self.config.get("static_topic", "/tf_static"))
        moving = [b for b in ids if model.body_jntnum[b] > 0 or model.body_mocapid[b] >= 0]
        welded = [b for b in ids if b not in moving]
        self._moving = np.array(moving, dtype=np.intp)
        self._parents = np.array([model.body_parentid[b] for b in moving], dtype=np.intp)
        self._frames = [(frame[int(model.body_parentid[b])], frame[b]) for b in moving]
        # Poses of the published state: after mj_step, data.xpos/xquat still describe the state
        # before the integration, so the kinematics run again on a scratch copy of qpos.
        self._model = model
        self._scratch = mujoco.MjData(model)
        self._start_schedule(rate_hz, model, data)
        if welded:
            # A welded body's pose in its parent's frame is its constant offset in the model.
            self.node.publish(static_topic, {"time": float(data.time), "transforms": [
                {"frame_id": frame[int(model.body_parentid[b])], "child_frame_id": frame[b],
                 "translation": model.body_pos[b].copy(), "quaternion": model.body_quat[b].copy()}
                for b in welded]}, latched=True)
        return True

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        if not len(self._moving):
            return
        scratch = self._scratch
        scratch.qpos[:] = data.qpos
        scratch.mocap_pos[:] = data.mocap_pos
        scratch.mocap_quat[:] = data.mocap_quat
        mujoco.mj_kinematics(self._model, scratch)
        parent_pos, parent_quat = scratch.xpos[self._parents], scratch.xquat[self._parents]
        body_pos, body_quat = scratch.xpos[self._moving], scratch.xquat[self._moving]
        transforms = []
        inverse, relative, translation = np.empty(4), np.empty(4), np.empty(3)
        for i, (parent, child) in enumerate(self._frames):
            mujoco.mju_negQuat(inverse, parent_quat[i])
            mujoco.mju_mulQuat(relative, inverse, body_quat[i])
            mujoco.mju_rotVecQuat(translation, body_pos[i] - parent_pos[i], inverse)
            transforms.append({"frame_id": parent, "child_frame_id": child,
                               "translation": translation.copy(), "quaternion": relative.copy()})
        self.node.publish(self._topic, {"time": float(time), "transforms": transforms})
