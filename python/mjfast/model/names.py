"""How mjfast names a model's objects and finds them by name (SPEC §13): the one lookup of
keyframes, geoms, joints, bodies, cameras, sensors and equality constraints, unnamed objects as
`<kind>_<id>`, the coordinate frames that ROS 2 messages name (`frame_names`), and name-keyed
mappings with '/' namespaces flattened. The wording of a refusal is `mjfast.names`'; this module
owns no simulation state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from mjfast.names import unknown_name

__all__ = ["Frames", "frame_names", "labelled_id", "named_entries", "object_id", "object_labels",
           "object_names"]


def object_names(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int) -> list[str]:
    """The names of the model's objects of `obj_type`, in id order, unnamed ones left out."""
    return [name for i in range(count) if (name := mujoco.mj_id2name(model, obj_type, i))]


def object_labels(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int, prefix: str
                  ) -> list[str | None]:
    """Per id, how mjfast names the model's objects of `obj_type`: its name, or for an unnamed
    one `<prefix>_<id>` (`sensor_3`, `camera_0`); None where a named object already has that
    name (the name means the named one). `labelled_id` reads these names back."""
    names = [mujoco.mj_id2name(model, obj_type, i) or "" for i in range(count)]
    taken = set(names)
    return [name or (None if f"{prefix}_{i}" in taken else f"{prefix}_{i}")
            for i, name in enumerate(names)]


def labelled_id(model: mujoco.MjModel, obj_type: mujoco.mjtObj, count: int, prefix: str,
                name: object) -> int:
    """The id of the object of `obj_type` that `object_labels` calls `name`, or -1."""
    if not isinstance(name, str):
        return -1
    found = mujoco.mj_name2id(model, obj_type, name)
    if found >= 0:
        return int(found)
    digits = name[len(prefix) + 1:] if name.startswith(f"{prefix}_") else ""
    if digits.isdigit() and digits.isascii() and str(int(digits)) == digits:
        index = int(digits)
        if index < count and not mujoco.mj_id2name(model, obj_type, index):
            return index
    return -1


def object_id(model: mujoco.MjModel, obj_type: mujoco.mjtObj, noun: str, count: int,
              key: object, *, prefix: str | None = None) -> int:
    """The id of the model's `noun` named (or indexed) by `key`: the one lookup of keyframes,
    geoms, joints, bodies, cameras and equality constraints by the env and this module. With
    `prefix`, an unnamed object is named `<prefix>_<id>` too (`object_labels`).

    KeyError for an unknown name (with its close matches and the model's names) or index;
    ValueError for a key that is neither a str nor an int.
    """
    if isinstance(key, str):
        if prefix is None:
            object_id_ = mujoco.mj_name2id(model, obj_type, key)
            known = object_names(model, obj_type, count) if object_id_ < 0 else []
        else:
            object_id_ = labelled_id(model, obj_type, count, prefix, key)
            known = ([label for label in object_labels(model, obj_type, count, prefix) if label]
                     if object_id_ < 0 else [])
        if object_id_ >= 0:
            return int(object_id_)
        raise unknown_name(noun, key, known)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if 0 <= key < count:
            return int(key)
        raise KeyError(f"no {noun} with index {key} (the model has {count})")
    raise ValueError(f"a {noun} is named by a string (or an index), got {key!r}")


@dataclass(frozen=True)
class Frames:
    """The frame ids of a model's bodies, sites and cameras, per id (`frame_names`)."""

    bodies: list[str]  # [0] is `world`
    sites: list[str]
    cameras: list[str]  # MuJoCo's camera frame: x right, y up, looking along -z
    optical: list[str]  # `<camera>_optical`: ROS's optical frame, x right, y down, z forward

    def of(self, obj_type: mujoco.mjtObj | int, obj_id: int) -> str | None:
        """The frame of a body, site or camera (an inertial frame: its body's), else None."""
        kind = int(obj_type)
        if kind in (int(mujoco.mjtObj.mjOBJ_BODY), int(mujoco.mjtObj.mjOBJ_XBODY)):
            return self.bodies[obj_id]
        if kind == int(mujoco.mjtObj.mjOBJ_SITE):
            return self.sites[obj_id]
        if kind == int(mujoco.mjtObj.mjOBJ_CAMERA):
            return self.cameras[obj_id]
        return None


def frame_names(model: mujoco.MjModel) -> Frames:
    """The one naming of the frames that mjfast's ROS 2 messages stamp and /tf carries (SPEC
    §19): the world body is `world`; a body, site or camera is its name (`object_labels`:
    `body_<id>`, `site_<id>`, `camera_<id>` when unnamed); a camera's optical frame is
    `<camera>_optical`. Frame ids are one namespace while MuJoCo's names are one per kind, so a
    name already taken (bodies first, then sites, cameras, optical frames) falls back to
    `<kind>_<id>` (then `_2`, `_3`, ...): every frame id is unique."""
    taken: set[str] = set()

    def unique(wanted: str | None, fallback: str) -> str:
        name = wanted if wanted and wanted not in taken else fallback
        suffix = 2
        while name in taken:
            name, suffix = f"{fallback}_{suffix}", suffix + 1
        taken.add(name)
        return name

    def labels(obj_type: mujoco.mjtObj, count: int, kind: str) -> list[str]:
        named = object_labels(model, obj_type, count, kind)
        if obj_type == mujoco.mjtObj.mjOBJ_BODY:
            named[0] = "world"
        # The named first, so that an unnamed one's fallback never takes a name of its kind.
        out = [unique(label, f"{kind}_{i}") if label else "" for i, label in enumerate(named)]
        return [name or unique(None, f"{kind}_{i}") for i, name in enumerate(out)]

    bodies = labels(mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body")
    sites = labels(mujoco.mjtObj.mjOBJ_SITE, model.nsite, "site")
    cameras = labels(mujoco.mjtObj.mjOBJ_CAMERA, model.ncam, "camera")
    optical = [unique(f"{camera}_optical", f"camera_{i}_optical")
               for i, camera in enumerate(cameras)]
    return Frames(bodies, sites, cameras, optical)


def named_entries(values: Mapping[Any, Any], names: Iterable[str], what: str,
                  is_value: Callable[[Mapping[Any, Any]], bool] | None = None
                  ) -> list[tuple[Any, Any]]:
    """The (name, value) pairs of a mapping keyed by model names, nested mappings flattened.

    Names may contain '/' (`MjSpec.attach` prefixes, composed models: `left/pan_pos`). The
    parameter server stores a key `left/pan_pos` as the namespace `left` holding `pan_pos`, so a
    mapping under a key that is not one of `names`, or that begins others of them (`left` when
    `left/pan_pos` is one), is read as such a namespace, its keys joined to it with '/', unless
    `is_value` says it is a value (a sensor's `{std, bias}`); an empty one is a ValueError (it
    names nothing). A name given twice (`left/pan_pos` beside `left: {pan_pos}`) is a ValueError
    naming it; other keys pass through as they are (an int index).
    """
    known = set(names)
    parents = {"/".join(parts[:i]) for parts in (name.split("/") for name in known)
               for i in range(1, len(parts))}
    entries: list[tuple[Any, Any]] = []
    seen: set[Any] = set()

    def walk(mapping: Mapping[Any, Any], prefix: str) -> None:
        for key, value in mapping.items():
            if prefix and not isinstance(key, str):
                raise ValueError(f"{what}: key {key!r} under {prefix[:-1]!r} is not a name")
            name = prefix + key if isinstance(key, str) else key
            if (isinstance(name, str) and isinstance(value, Mapping)
                    and (name not in known or name in parents)
                    and not (is_value is not None and is_value(value))):
                if not value:
                    raise ValueError(f"{what}: {name!r} is an empty mapping (expected a value, "
                                     f"or the names under {name!r})")
                walk(value, name + "/")
                continue
            if name in seen:
                raise ValueError(f"{what}: {name!r} is given twice")
            seen.add(name)
            entries.append((name, value))

    walk(values, "")
    return entries
