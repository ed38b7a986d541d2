"""Geometry editing: one geom's size, colour, friction and collision bitmasks changed in place in
a live model, with the derived quantities the collision broad and mid phases read (bounding
radius, axis-aligned box, the body's bounding-volume hierarchy) brought up to date.

These functions work on a model that the caller holds still (MujocoEnv.set_geom_properties runs
them with stepping paused, then tells the plugins); they check the whole request before writing
anything. Pausing and notifying plugins are the env's business.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from mjfast.model.names import object_id

__all__ = ["set_geom_properties"]

_INT32_MAX = int(np.iinfo(np.int32).max)


def set_geom_properties(
    model: mujoco.MjModel,
    geom: object,
    *,
    size: Sequence[float] | None = None,
    rgba: Sequence[float] | None = None,
    friction: Sequence[float] | None = None,
    contype: int | None = None,
    conaffinity: int | None = None,
) -> int:
    """Writes the given properties of `geom` (name or id) into `model` and returns its id.

    KeyError for an unknown geom, ValueError naming the field for a wrong shape, range or
    non-finite value, or a size change on a shape whose size is not a plain parameter; nothing
    is written on error.
    """
    geom_id = object_id(model, mujoco.mjtObj.mjOBJ_GEOM, "geom", model.ngeom, geom)
    changes = _checked_geom_changes(model, geom_id, size=size, rgba=rgba, friction=friction,
                                    contype=contype, conaffinity=conaffinity)
    if "size" in changes:
        geom_type = mujoco.mjtGeom(model.geom_type[geom_id])
        model.geom_size[geom_id] = changes["size"]
        rbound, half_extent = _PRIMITIVE_BOUNDS[geom_type](changes["size"])
        model.geom_rbound[geom_id] = rbound
        model.geom_aabb[geom_id] = np.concatenate([np.zeros(3), half_extent])
        _refresh_body_bvh(model, int(model.geom_bodyid[geom_id]))
    for field in ("rgba", "friction", "contype", "conaffinity"):
        if field in changes:
            getattr(model, f"geom_{field}")[geom_id] = changes[field]
    return geom_id


def _checked_geom_changes(model: mujoco.MjModel, geom_id: int, **values: Any) -> dict[str, Any]:
    """The requested geom changes as arrays/ints, or ValueError naming the field and the
    expected shape or range; nothing is written."""
    changes: dict[str, Any] = {}
    for field, width in (("size", 3), ("rgba", 4), ("friction", 3)):
        if values[field] is None:
            continue
        array = np.asarray(values[field], dtype=float)
        if array.shape != (width,):
            raise ValueError(f"{field} must have shape ({width},), got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{field} must be finite, got {array.tolist()}")
        changes[field] = array
    for field in ("contype", "conaffinity"):
        value = values[field]
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                or not 0 <= value <= _INT32_MAX):
            raise ValueError(f"{field} must be an int bitmask in [0, {_INT32_MAX}], got {value!r}")
        changes[field] = int(value)
    if "size" in changes:
        geom_type = mujoco.mjtGeom(model.geom_type[geom_id])
        if geom_type not in _PRIMITIVE_BOUNDS:
            raise ValueError(f"the size of a {geom_type.name} geom cannot be changed")
        if np.any(changes["size"] < 0):
            raise ValueError(f"size must be non-negative, got {changes['size'].tolist()}")
        used = _USED_SIZES[geom_type]
        if np.any(changes["size"][:used] <= 0):
            # As MuJoCo's compiler: a zero extent makes the collision functions divide by zero.
            raise ValueError(f"size: the first {used} value{'s' if used > 1 else ''} of a "
                             f"{geom_type.name} geom must be positive, got "
                             f"{changes['size'].tolist()}")
    return changes


def _rotation(quaternion: np.ndarray) -> np.ndarray:
    matrix = np.zeros(9)
    mujoco.mju_quat2Mat(matrix, quaternion)
    return matrix.reshape(3, 3)


def _refresh_body_bvh(model: mujoco.MjModel, body: int) -> None:
    """Recomputes `body`'s bounding-volume hierarchy (the boxes the mid-phase reads) from its
    geoms' boxes, keeping the tree the compiler built. The boxes are in the body's inertial frame,
    each leaf the box of one geom and each inner node the union of its two children."""
    root, count = int(model.body_bvhadr[body]), int(model.body_bvhnum[body])
    if count <= 0:
        return
    inertial = _rotation(model.body_iquat[body])

    def refresh(node: int) -> tuple[np.ndarray, np.ndarray]:
        left, right = model.bvh_child[node]
        if left < 0 and right < 0:
            geom = int(model.bvh_nodeid[node])
            rotation = inertial.T @ _rotation(model.geom_quat[geom])
            centre = (inertial.T @ (model.geom_pos[geom] - model.body_ipos[body])
                      + rotation @ model.geom_aabb[geom, :3])
            half = np.abs(rotation) @ model.geom_aabb[geom, 3:]
            low, high = centre - half, centre + half
        else:
            bounds = [refresh(root + int(child)) for child in (left, right) if child >= 0]
            low = np.min([b[0] for b in bounds], axis=0)
            high = np.max([b[1] for b in bounds], axis=0)
        model.bvh_aabb[node] = np.concatenate([(low + high) / 2, (high - low) / 2])
        return low, high

    refresh(root)


def _sphere(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(size[0]), np.full(3, size[0])


def _capsule(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(size[0] + size[1]), np.array([size[0], size[0], size[0] + size[1]])


def _cylinder(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(math.hypot(size[0], size[1])), np.array([size[0], size[0], size[1]])


def _box(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(np.linalg.norm(size)), size.copy()


def _ellipsoid(size: np.ndarray) -> tuple[float, np.ndarray]:
    return float(np.max(size)), size.copy()


# Bounding radius and axis-aligned half extents (in the geom frame) that collision detection's
# broad phase reads, for the primitive shapes whose size is a plain parameter.
_PRIMITIVE_BOUNDS = {
    mujoco.mjtGeom.mjGEOM_SPHERE: _sphere,
    mujoco.mjtGeom.mjGEOM_CAPSULE: _capsule,
    mujoco.mjtGeom.mjGEOM_CYLINDER: _cylinder,
    mujoco.mjtGeom.mjGEOM_BOX: _box,
    mujoco.mjtGeom.mjGEOM_ELLIPSOID: _ellipsoid,
}

# How many of a primitive's three size values are its dimensions (the rest are unused).
_USED_SIZES = {
    mujoco.mjtGeom.mjGEOM_SPHERE: 1,
    mujoco.mjtGeom.mjGEOM_CAPSULE: 2,
    mujoco.mjtGeom.mjGEOM_CYLINDER: 2,
    mujoco.mjtGeom.mjGEOM_BOX: 3,
    mujoco.mjtGeom.mjGEOM_ELLIPSOID: 3,
}
