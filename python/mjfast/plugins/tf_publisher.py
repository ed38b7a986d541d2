"""mjfast/TfPublisher: the model's frames as ROS's /tf and /tf_static (SPEC §19): every body's
pose relative to its parent body, and every site and camera as a child of its body, so that each
frame_id mjfast's messages stamp resolves to `world`.

Configuration keys: `rate_hz` (simulated time, default 50), `bodies` (body names; default every
body but the world), `topic` (default `/tf`) and `static_topic` (default `/tf_static`). A body with
joints (or a mocap body) goes on `topic` at `rate_hz`; a body welded to its parent (no joint) has
a constant pose there. The sites and cameras of the world and of the published bodies go with
them: a site, and a camera fixed to its body (MuJoCo's default `mode`), at its constant pose in
the body's frame; a camera that tracks or targets something on `topic` at `rate_hz`. Each camera
also has an optical frame `<camera>_optical`, its child turned half a turn about x: MuJoCo's
camera frame has x right, y up and looks along -z; the optical frame is ROS's (REP 103) for
images, x right, y down, z forward, and the frame CameraPublisher's images and CameraInfo are
stamped with. Everything constant goes once, in one message, on `static_topic` when the plugin
loads (transient local over ROS 2, so that late joiners get it).

A message is `{"time", "transforms": [{"frame_id", "child_frame_id", "translation",
"quaternion"}]}`: the parent's frame and the child's, as `mjfast.model.names.frame_names` names
them (`world` for the world body, an object's name, `body_<id>` / `site_<id>` / `camera_<id>`
when unnamed), the child frame's position in the parent's frame and its orientation as MuJoCo's
(w, x, y, z). With the ROS 2 bridge it is tf2_msgs/TFMessage.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from mjfast.model.names import frame_names
from mjfast.plugins._sensing import RatePublisher, listed_ids, names_of, number
from mjfast.plugins.clock_publisher import topic_name

__all__ = ["OPTICAL_QUAT", "TfPublisher"]

_KEYS = ("rate_hz", "bodies", "topic", "static_topic")

# A camera's optical frame in its MuJoCo frame: half a turn about x (y and z flip), w x y z.
OPTICAL_QUAT = np.array([0.0, 1.0, 0.0, 0.0])


def _transform(parent: str, child: str, translation: Any, quaternion: Any) -> dict[str, Any]:
    return {"frame_id": parent, "child_frame_id": child,
            "translation": np.array(translation, dtype=np.float64),
            "quaternion": np.array(quaternion, dtype=np.float64)}


class TfPublisher(RatePublisher):
    # Checked before load (mjfast.plugin.schema); the values' types by load, with its messages.
    config_keys: ClassVar[dict[str, Any]] = dict.fromkeys(_KEYS, object)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        who = self.name
        rate_hz = number(who, "rate_hz", self.config.get("rate_hz", 50.0), minimum=0.0,
                         strict=True)
        names = names_of(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
        ids = listed_ids(who, self.config, "bodies", model, mujoco.mjtObj.mjOBJ_BODY, "body",
                         names)
        ids = [b for b in (ids if ids is not None else range(1, model.nbody)) if b > 0]
        frames = frame_names(model)
        body = frames.bodies
        self._topic = topic_name(who, self.config.get("topic", "/tf"))
        static_topic = topic_name(who, self.config.get("static_topic", "/tf_static"))
        moving = [b for b in ids if model.body_jntnum[b] > 0 or model.body_mocapid[b] >= 0]
        welded = [b for b in ids if b not in moving]
        # The world and the published bodies carry their sites and cameras.
        carried = {0, *ids}
        cameras = [c for c in range(model.ncam) if int(model.cam_bodyid[c]) in carried]
        fixed = int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED)
        tracking = [c for c in cameras if int(model.cam_mode[c]) != fixed]
        # The frames on `topic`: moving bodies (parent: their parent body), then tracking
        # cameras (parent: their body); _frames holds their (parent, child) ids in that order.
        self._moving = np.array(moving, dtype=np.intp)
        self._parents = np.array([model.body_parentid[b] for b in moving], dtype=np.intp)
        self._frames = [(body[int(model.body_parentid[b])], body[b]) for b in moving]
        self._cameras = np.array(tracking, dtype=np.intp)
        self._camera_bodies = np.array([model.cam_bodyid[c] for c in tracking], dtype=np.intp)
        self._frames += [(body[int(model.cam_bodyid[c])], frames.cameras[c]) for c in tracking]
        self._all_parents = np.concatenate([self._parents, self._camera_bodies])
        # Poses of the published state: after mj_step, data.xpos/xquat still describe the state
        # before the integration, so the kinematics run again on a scratch copy of qpos.
        self._model = model
        self._scratch = mujoco.MjData(model)
        self._start_schedule(rate_hz, model, data)
        # A welded body's, a site's and a fixed camera's pose in its parent's frame is its
        # constant offset in the model; an optical frame's is a constant turn.
        static = [_transform(body[int(model.body_parentid[b])], body[b], model.body_pos[b],
                             model.body_quat[b]) for b in welded]
        static += [_transform(body[int(model.site_bodyid[s])], frames.sites[s], model.site_pos[s],
                              model.site_quat[s])
                   for s in range(model.nsite) if int(model.site_bodyid[s]) in carried]
        static += [_transform(body[int(model.cam_bodyid[c])], frames.cameras[c], model.cam_pos[c],
                              model.cam_quat[c]) for c in cameras if c not in tracking]
        static += [_transform(frames.cameras[c], frames.optical[c], (0.0, 0.0, 0.0), OPTICAL_QUAT)
                   for c in cameras]
        if static:
            self.node.publish(static_topic, {"time": float(data.time), "transforms": static},
                              latched=True)
        return True

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        if not self._frames:
            return
        model, scratch = self._model, self._scratch
        scratch.qpos[:] = data.qpos
        scratch.mocap_pos[:] = data.mocap_pos
        scratch.mocap_quat[:] = data.mocap_quat
        mujoco.mj_kinematics(model, scratch)
        if len(self._cameras):
            # A tracking camera's pose needs the subtrees' centres of mass (mj_fwdPosition's
            # order: kinematics, com, then cameras and lights).
            mujoco.mj_comPos(model, scratch)
            mujoco.mj_camlight(model, scratch)
        camera_quat = np.empty((len(self._cameras), 4))
        for i, c in enumerate(self._cameras):
            mujoco.mju_mat2Quat(camera_quat[i], scratch.cam_xmat[c])
        parent_pos = scratch.xpos[self._all_parents]
        parent_quat = scratch.xquat[self._all_parents]
        child_pos = np.concatenate([scratch.xpos[self._moving], scratch.cam_xpos[self._cameras]])
        child_quat = np.concatenate([scratch.xquat[self._moving], camera_quat])
        transforms = []
        inverse, relative, translation = np.empty(4), np.empty(4), np.empty(3)
        for i, (parent, child) in enumerate(self._frames):
            mujoco.mju_negQuat(inverse, parent_quat[i])
            mujoco.mju_mulQuat(relative, inverse, child_quat[i])
            mujoco.mju_rotVecQuat(translation, child_pos[i] - parent_pos[i], inverse)
            transforms.append({"frame_id": parent, "child_frame_id": child,
                               "translation": translation.copy(), "quaternion": relative.copy()})
        self.node.publish(self._topic, {"time": float(time), "transforms": transforms})
