"""The world's entities as the env changes them while it runs (SPEC §25): what a spawn and a
removal do to the model (an `mujoco.MjSpec` edited and recompiled keeping the state), the
spawned entities' records (what a recording and a reload need to make them again), and the
entities' root states.

It owns the env's `EntityBook`; the spec edits and the entity membership are
`mjfast.model.entities`', the swap of model, data and plugin generation is the env's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from mjfast.bus.params import resolve_name
from mjfast.model import kinematics
from mjfast.model.checked_values import checked_mapping, finite_vector
from mjfast.model.entities import (
    EntityInfo,
    EntitySource,
    Placement,
    attach_entity,
    checked_entity_name,
    checked_pose,
    compose,
    default_classes,
    entities_of,
    entity_of_bodies,
    entity_source,
    has_free_root,
    relative,
    remove_from_spec,
    root_bodies,
    unknown_entity,
)
from mjfast.model.kinematics import BodyState
from mjfast.names import unknown
from mjfast.plugin.config import PluginSpec, parse_plugin_specs

if TYPE_CHECKING:
    from mjfast.sim.config import ModelSource

__all__ = ["EntityBook", "SpawnRecord", "recompiled", "spawn_call"]

# MuJoCo keeps a copy of every model attached to a spec for the spec's life, removed or not
# (mjCModel::AppendSpec): after this many removals of spawned entities the env's spec is made
# anew from the source and the world's history, which bounds what a long spawn/remove cycle
# holds (at the cost of one compile).
_REBUILD_AFTER = 8


@dataclass(frozen=True)
class SpawnRecord:
    """One spawned entity: its source, where it is attached, its namespace, its parameters and
    its plugins' specs (named `<name>/<plugin>`, their nodes under the entity's namespace)."""

    name: str
    source: EntitySource
    placement: Placement
    namespace: str
    params: dict[str, Any] | None
    specs: tuple[PluginSpec, ...] = ()

    @property
    def classes(self) -> tuple[str, ...]:
        """The default classes its model declares (attached as `<name>/<class>`)."""
        return default_classes(self.source.text)

    def call_args(self) -> dict[str, Any]:
        """The spawn as a recording holds it and replay makes it again: the model's text and
        the pose in the body it is attached to (the same model again, wherever that body is by
        then); `source` is read back by `EntitySource.from_record`."""
        return {"model": self.source.text, "name": self.name, "pose": self.placement.pose(),
                "frame": self.placement.parent, "namespace": self.namespace,
                "params": self.params, "source": self.source.record()}


def spawn_call(args: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded spawn's arguments as `env.spawn` takes them (the source read back)."""
    call = dict(args)
    source = call.pop("source", None)
    if source is not None:
        call["model"] = EntitySource.from_record(source)
    return call


@dataclass(frozen=True)
class PendingSpawn:
    """A spawn checked as far as it can be without the world: the record (its placement not yet
    resolved against the world), the parsed model, whether a root has a free joint."""

    record: SpawnRecord
    child: mujoco.MjSpec
    free_root: bool


def recompiled(spec: mujoco.MjSpec, model: mujoco.MjModel, data: mujoco.MjData
               ) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """`spec` compiled into a new model and data that keep `data`'s state for everything that
    existed (MuJoCo's `mj_recompile`); ValueError with MuJoCo's message."""
    try:
        return spec.recompile(model, data)
    except ValueError as error:
        raise ValueError(f"the model does not compile: {error}") from None


class EntityBook:
    """What the env knows of its entities beyond its model: the spec that compiles to the live
    model (read from the source on first use), the spawned entities in spawn order, the
    original entities removed."""

    def __init__(self, source: ModelSource) -> None:
        self.source = source
        self.spec: mujoco.MjSpec | None = None
        self.spawned: dict[str, SpawnRecord] = {}
        self.removed: list[str] = []
        self._dropped = 0  # spawned entities removed since the spec was made

    @property
    def changed(self) -> bool:
        """Whether the world differs from its source's (something spawned or removed)."""
        return bool(self.spawned or self.removed)

    def plugin_specs(self) -> tuple[PluginSpec, ...]:
        return tuple(spec for record in self.spawned.values() for spec in record.specs)

    def history(self) -> list[dict[str, Any]]:
        """How to make this world from its source again: the removals of originals, then the
        spawns in order (as recorded calls)."""
        return ([{"name": "remove", "args": {"name": name}} for name in self.removed]
                + [{"name": "spawn", "args": record.call_args()}
                   for record in self.spawned.values()])

    def infos(self, model: mujoco.MjModel, namespace: str, label: str) -> dict[str, EntityInfo]:
        spawned = {name: (record.namespace, record.source.label)
                   for name, record in self.spawned.items()}
        return entities_of(model, spawned, namespace, label)

    def _working(self, model: mujoco.MjModel) -> mujoco.MjSpec:
        """A copy of the spec of the live `model` with its live values (the options the
        parameters set, randomised or edited values: MuJoCo's `copy_back`)."""
        if self.spec is None or self._dropped >= _REBUILD_AFTER:
            spec = self.rebuilt_spec(self.source)
            spec.compile()  # what copy_back and recompile map the live model by
            self.spec, self._dropped = spec, 0
        working = self.spec.copy()
        working.copy_back(model)
        return working

    def commit_spawn(self, record: SpawnRecord, spec: mujoco.MjSpec) -> None:
        self.spec = spec
        self.spawned[record.name] = record

    def commit_remove(self, name: str, spawned: list[str], spec: mujoco.MjSpec
                      ) -> list[SpawnRecord]:
        """Books the removal of `name` and the spawned entities `spawned` that went with it;
        returns their records."""
        self.spec = spec
        records = [self.spawned.pop(other) for other in spawned]
        if name not in spawned:
            self.removed.append(name)
        self._dropped += len(records)
        return records

    # -- spawn ----------------------------------------------------------------------------------

    def prepare_spawn(self, model: object, name: object, pose: object, frame: object,
                      namespace: object, params: object) -> PendingSpawn:
        """Everything of a spawn that is checked before the world is held: the model read, the
        name, the pose, the frame's form, the namespace and the entity's plugin list."""
        source = entity_source(model)
        entity = checked_entity_name(name)
        pos, quat = checked_pose(pose)
        if not isinstance(frame, str) or not frame:
            raise ValueError(f"frame must be the name of a body or an entity, or 'world', got "
                             f"{frame!r}")
        if namespace is None:
            namespace = f"/{entity}"
        if not isinstance(namespace, str):
            raise ValueError(f"namespace must be a str, got {namespace!r}")
        try:
            resolved = resolve_name(namespace)
        except ValueError as error:
            raise ValueError(f"invalid namespace {namespace!r}: {error}") from None
        plain: dict[str, Any] | None = None
        specs: tuple[PluginSpec, ...] = ()
        if params is not None:
            plain = dict(checked_mapping(params, "params"))
            if "MujocoPlugins" in plain:
                # The entity's own list, read in its namespace only (no search upwards).
                base = resolved.rstrip("/")
                specs = tuple(replace(spec, name=f"{entity}/{spec.name}",
                                      namespace=f"{base}/{spec.name}")
                              for spec in parse_plugin_specs(
                                  plain["MujocoPlugins"], source=f"{base}/MujocoPlugins"))
        child = source.spec()
        placement = Placement(frame, tuple(pos.tolist()), tuple(quat.tolist()))
        record = SpawnRecord(entity, source, placement, resolved, plain, specs)
        return PendingSpawn(record, child, has_free_root(child))

    def spawned_spec(self, model: mujoco.MjModel, data: mujoco.MjData, pending: PendingSpawn
                     ) -> tuple[SpawnRecord, mujoco.MjSpec]:
        """The record placed in the live world (stepping held) and the spec with it attached:
        ValueError for a taken name, KeyError for an unknown frame. An entity with a free root
        given a frame other than the world goes to the world at that frame's current pose
        (MuJoCo allows a free joint only in a child of the world body)."""
        record = pending.record
        taken = set(root_bodies(model, list(self.spawned))) | set(self.spawned)
        if record.name in taken:
            raise ValueError(f"entity name {record.name!r} is taken (the world's entities: "
                             f"{', '.join(sorted(taken))})")
        prefix = f"{record.name}/"
        for kind, count in ((mujoco.mjtObj.mjOBJ_BODY, model.nbody),
                            (mujoco.mjtObj.mjOBJ_JOINT, model.njnt),
                            (mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
            for index in range(count):
                if (mujoco.mj_id2name(model, kind, index) or "").startswith(prefix):
                    raise ValueError(f"entity name {record.name!r} is taken: the model already "
                                     f"has names under {prefix!r}")
        placement = record.placement
        body = self.frame_body(model, placement.parent)
        body_name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or ""
        if body == 0:
            placement = replace(placement, parent="world")
        elif pending.free_root or not body_name:
            pos, quat = compose(data.xpos[body], data.xquat[body], np.asarray(placement.pos),
                                np.asarray(placement.quat))
            placement = Placement("world", tuple(pos.tolist()), tuple(quat.tolist()))
        else:
            placement = replace(placement, parent=body_name)
        record = replace(record, placement=placement)
        working = self._working(model)
        attach_entity(working, pending.child, record.name, placement)
        return record, working

    def frame_body(self, model: mujoco.MjModel, frame: str) -> int:
        """The body `frame` names: "world", a body, or an entity (its root); KeyError."""
        if frame == "world":
            return 0
        found = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, frame)
        if found >= 0:
            return int(found)
        roots = root_bodies(model, list(self.spawned))
        if roots.get(frame):
            return roots[frame][0]
        bodies = [name for i in range(1, model.nbody)
                  if (name := mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i))]
        raise KeyError(unknown("unknown frame", frame, ["world", *sorted(roots), *bodies],
                               exists="the frames are 'world', the entities and the bodies"))

    # -- remove ---------------------------------------------------------------------------------

    def removed_spec(self, model: mujoco.MjModel, name: object
                     ) -> tuple[mujoco.MjSpec, list[str]]:
        """The spec without entity `name` and the spawned entities attached under its bodies
        (those go with it), and the spawned entities removed; KeyError for an unknown one."""
        roots = root_bodies(model, list(self.spawned))
        if not isinstance(name, str) or name not in roots:
            raise unknown_entity(name, list(roots))
        owner = entity_of_bodies(model, list(self.spawned))
        gone = {name}
        grew = True
        while grew:  # what hangs from what goes, transitively
            grew = False
            for other, record in self.spawned.items():
                body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY,
                                         record.placement.parent)
                if other not in gone and body > 0 and owner[body] in gone:
                    gone.add(other)
                    grew = True
        spawned = [other for other in self.spawned if other in gone]
        working = self._working(model)
        for other in reversed(spawned):
            remove_from_spec(working, other, spawned=True,
                             classes=self.spawned[other].classes)
        if name not in self.spawned:
            names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or ""
                     for body in roots[name]]
            if not all(names):
                raise ValueError(f"entity {name!r} has an unnamed root body, which its spec "
                                 f"cannot name: it cannot be removed")
            remove_from_spec(working, name, spawned=False, roots=names)
        return working, spawned

    # -- reload ---------------------------------------------------------------------------------

    def rebuilt_spec(self, source: ModelSource) -> mujoco.MjSpec:
        """`source`'s model with this world's removals and spawns made again (a reload): the
        originals removed, then each spawned entity from its recorded text at its recorded
        placement. ValueError where one no longer fits (its parent body is gone)."""
        spec = source.spec()
        for name in self.removed:
            remove_from_spec(spec, name, spawned=False, roots=[name])
        for record in self.spawned.values():
            if record.placement.parent != "world" and spec.body(record.placement.parent) is None:
                raise ValueError(f"spawned entity {record.name!r} hangs from body "
                                 f"{record.placement.parent!r}, which the model no longer has")
            attach_entity(spec, record.source.spec(), record.name, record.placement)
        return spec

    # -- entity state ---------------------------------------------------------------------------

    def root_of(self, model: mujoco.MjModel, name: object) -> int:
        """The root body of entity `name` (its first); KeyError for an unknown entity."""
        roots = root_bodies(model, list(self.spawned))
        if not isinstance(name, str) or name not in roots:
            raise unknown_entity(name, list(roots))
        if not roots[name]:
            raise ValueError(f"entity {name!r} has no body")
        return roots[name][0]

    def state(self, snapshot: kinematics.StateSnapshot, name: object, frame: object
              ) -> BodyState:
        """Entity `name`'s root pose and twist (SPEC §13's conventions) in the world or in
        `frame` (a body or an entity)."""
        model = snapshot.model
        root = self.root_of(model, name)
        reference = None
        if frame is not None and frame != "world":
            if not isinstance(frame, str):
                raise ValueError(f"frame must be a body or entity name, got {frame!r}")
            reference = self.frame_body(model, frame)
        return kinematics.body_state(snapshot, root, reference or None)

    def set_state(self, model: mujoco.MjModel, data: mujoco.MjData, name: object,
                  pose: object, twist: object, frame: object) -> None:
        """Moves entity `name`'s root (stepping held), everything checked first: a root with a
        free joint through its joint's state, a mocap root through its mocap pose, any other
        root through its pose in the model; a twist only for a free root. Pose and twist in
        the world or in `frame`'s axes."""
        root = self.root_of(model, name)
        position = None if pose is None else checked_pose(pose, f"entity {name!r} pose")
        velocities: dict[str, np.ndarray] = {}
        if twist is not None:
            for key, value in checked_mapping(twist, f"entity {name!r} twist").items():
                if key not in ("linvel", "angvel"):
                    raise ValueError(unknown(f"entity {name!r} twist: unknown field", key,
                                             ("linvel", "angvel"), exists="its fields are"))
                velocities[key] = finite_vector(value, 3, f"entity {name!r} twist {key}")
        reference = 0
        if frame is not None and frame != "world":
            if not isinstance(frame, str):
                raise ValueError(f"frame must be a body or entity name, got {frame!r}")
            reference = self.frame_body(model, frame)
        joint = int(model.body_jntadr[root])
        if joint >= 0 and model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_FREE:
            entry: dict[str, Any] = dict(velocities)
            if position is not None:
                entry["pos"], entry["quat"] = position
            if entry:
                kinematics.set_body_states(model, data, {root: entry}, reference or None)
            return
        if any(np.any(value != 0.0) for value in velocities.values()):
            raise ValueError(f"entity {name!r} has no free joint at its root: it takes a pose, "
                             f"and a twist of zero only")
        if position is None:
            return
        pos, quat = position
        kinematics.forward(model, data)  # the frames' poses of the current state
        if reference:
            pos, quat = compose(data.xpos[reference], data.xquat[reference], pos, quat)
        parent = int(model.body_parentid[root])
        if parent:
            pos, quat = relative(data.xpos[parent], data.xquat[parent], pos, quat)
        mocap = int(model.body_mocapid[root])
        if mocap >= 0:
            data.mocap_pos[mocap], data.mocap_quat[mocap] = pos, quat
        else:
            model.body_pos[root], model.body_quat[root] = pos, quat
        kinematics.forward(model, data)
