"""Domain randomisation (SPEC §21): the `<namespace>/randomize` terms, checked together against a
model, drawn at every reset from a world's generator onto that world's own model and data.

It owns the table of randomisable fields, the terms' validation, the nominal values every draw
starts from, and the record of the last draw. Which model a world owns, when a reset happens and
which generator a world has are the env's (MujocoEnv) and the vector env's business.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.bus.params import resolve_name
from mjfast.errors import ConfigError
from mjfast.model.names import object_id, object_labels
from mjfast.names import close_matches, suggestion

__all__ = ["FIELDS", "STATE_FIELDS", "Randomizer", "checked_seed", "world_generator"]


@dataclass(frozen=True)
class _Field:
    """One randomisable model field: where its values are and how one draw covers them."""

    attribute: str  # the MjModel array
    obj_type: mujoco.mjtObj  # the objects that `names` names
    noun: str  # for messages, and the unnamed objects' label prefix
    columns: slice  # the columns of the attribute's row that the field is
    per_object: bool  # one draw per object for all its columns (else one per column)
    bounds: tuple[float, float]  # the values a draw is clipped to
    skip_world: bool = False  # without `names`: every object but the world body
    dofs: bool = False  # the objects are joints, the rows their dofs


_ANY = (-math.inf, math.inf)
_NONNEGATIVE = (0.0, math.inf)
_UNIT = (0.0, 1.0)
_ALL = slice(None)

# The one table of randomisable fields. geom_friction is the sliding coefficient (column 0), as
# in most domain randomisation: the torsional and rolling ones, often 0.005 and 0.0001, keep their
# nominal values (an `add` of a sliding-friction size would make them negative). body_inertia is
# one draw per body (the principal moments keep their ratios, so the triangle inequality MuJoCo
# checks at compile time still holds);
# actuator_gain is gainprm[0], and a position servo's bias (biasprm[1] == -gainprm[0], as MJCF
# <position> compiles it) follows the drawn gain, so the servo stays a servo (PoseHoldPD and a
# ros2_control position interface recognise it as one); actuator_bias is biasprm[0:3] (the
# constant, length and velocity terms), one draw each.
FIELDS: dict[str, _Field] = {
    "body_mass": _Field("body_mass", mujoco.mjtObj.mjOBJ_BODY, "body", _ALL, True, _NONNEGATIVE,
                        skip_world=True),
    "body_inertia": _Field("body_inertia", mujoco.mjtObj.mjOBJ_BODY, "body", _ALL, True,
                           _NONNEGATIVE, skip_world=True),
    "geom_friction": _Field("geom_friction", mujoco.mjtObj.mjOBJ_GEOM, "geom", slice(0, 1),
                            True, _NONNEGATIVE),
    "dof_damping": _Field("dof_damping", mujoco.mjtObj.mjOBJ_JOINT, "joint", _ALL, False,
                          _NONNEGATIVE, dofs=True),
    "dof_armature": _Field("dof_armature", mujoco.mjtObj.mjOBJ_JOINT, "joint", _ALL, False,
                           _NONNEGATIVE, dofs=True),
    "actuator_gain": _Field("actuator_gainprm", mujoco.mjtObj.mjOBJ_ACTUATOR, "actuator",
                            slice(0, 1), True, _ANY),
    "actuator_bias": _Field("actuator_biasprm", mujoco.mjtObj.mjOBJ_ACTUATOR, "actuator",
                            slice(0, 3), False, _ANY),
    "geom_rgba": _Field("geom_rgba", mujoco.mjtObj.mjOBJ_GEOM, "geom", _ALL, False, _UNIT),
    "light_diffuse": _Field("light_diffuse", mujoco.mjtObj.mjOBJ_LIGHT, "light", _ALL, False,
                            _NONNEGATIVE),
}
# Noise on the initial state: `std` (radians or metres; per second for qvel) per joint dof.
STATE_FIELDS = ("qpos", "qvel")

_MODEL_KEYS = ("field", "names", "scale", "add", "dist")
_STATE_KEYS = ("field", "names", "std")
_DISTRIBUTIONS = ("uniform", "loguniform")
_COUNTS = {mujoco.mjtObj.mjOBJ_BODY: "nbody", mujoco.mjtObj.mjOBJ_GEOM: "ngeom",
           mujoco.mjtObj.mjOBJ_JOINT: "njnt", mujoco.mjtObj.mjOBJ_ACTUATOR: "nu",
           mujoco.mjtObj.mjOBJ_LIGHT: "nlight"}


def checked_seed(seed: object, what: str) -> int | None:
    """`seed` as a non-negative int or None; ConfigError naming `what` otherwise."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise ConfigError(f"{what} must be a non-negative integer (or unset), got {seed!r}")


def world_generator(seed: int | None, world_index: int) -> np.random.Generator:
    """World `world_index`'s generator: seeded with `seed + world_index`, or from fresh entropy
    where no seed is given."""
    return np.random.default_rng(None if seed is None else seed + world_index)


@dataclass(frozen=True)
class _ModelTerm:
    index: int
    field: str
    labels: tuple[str, ...]  # the objects' names, as info() reports them
    flat: np.ndarray  # indices into the attribute's flattened array
    group: np.ndarray  # per flat index, the draw it takes (per object or per element)
    draws: int
    objects: tuple[tuple[int, int], ...]  # per object, its [start, stop) in `flat`
    scale: tuple[float, float] | None
    add: tuple[float, float] | None
    loguniform: bool


@dataclass(frozen=True)
class _StateTerm:
    index: int
    field: str
    labels: tuple[str, ...]
    joints: tuple[int, ...]
    std: float


class Randomizer:
    """The terms of one `randomize` parameter, checked against one model (ConfigError naming the
    first bad term; nothing is kept on failure), and the nominal values of the fields they draw.

    `draw_model` restores the nominal values, draws, and recomputes the model's derived constants
    (`mj_setConst`); `perturb_state` adds the qpos/qvel noise. `last` is what the last reset drew.
    """

    def __init__(self, model: mujoco.MjModel, terms: object, where: str) -> None:
        self.where = where
        if terms is None:
            terms = []
        if not isinstance(terms, Sequence) or isinstance(terms, (str, bytes)):
            raise ConfigError(f"{where} must be a list of terms ({{field, names?, scale?, add?, "
                              f"dist?}} or {{field: qpos|qvel, names?, std}}), got {terms!r}")
        self.model_terms: list[_ModelTerm] = []
        self.state_terms: list[_StateTerm] = []
        for index, term in enumerate(terms):
            checked = _checked_term(model, term, f"{where}[{index}]", index)
            if isinstance(checked, _ModelTerm):
                self.model_terms.append(checked)
            else:
                self.state_terms.append(checked)
        attributes = sorted({FIELDS[term.field].attribute for term in self.model_terms})
        if any(term.field == "actuator_gain" for term in self.model_terms):
            attributes = sorted({*attributes, "actuator_biasprm"})
        self._nominal = {name: np.array(getattr(model, name), copy=True) for name in attributes}
        self._check_reachable(model)
        # Position servos whose bias mirrors their gain (see FIELDS): the bias follows a draw.
        self._servos = np.flatnonzero(
            (model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE)
            & (model.actuator_biasprm[:, 1] == -model.actuator_gainprm[:, 0])
            & (model.actuator_gainprm[:, 0] != 0.0)) if model.nu else np.zeros(0, int)
        self.last: list[dict[str, Any]] = []

    @classmethod
    def from_params(cls, model: mujoco.MjModel, params: Any, namespace: str) -> Randomizer:
        where = resolve_name("randomize", namespace)
        return cls(model, params.get(where, None), where)

    @property
    def randomizes_model(self) -> bool:
        return bool(self.model_terms)

    def __bool__(self) -> bool:
        return bool(self.model_terms or self.state_terms)

    def note_edit(self, model: mujoco.MjModel, attribute: str, row: int) -> None:
        """A user's edit of `attribute[row]` (`set_geom_properties`) becomes its nominal value."""
        if attribute in self._nominal:
            self._nominal[attribute][row] = getattr(model, attribute)[row]

    def _term_where(self, term: _ModelTerm) -> str:
        return f"{self.where}[{term.index}] ({term.field})"

    def _check_reachable(self, model: mujoco.MjModel) -> None:
        """ConfigError naming the first term whose draws, from the nominal values and after the
        terms before it, could leave a value that is not finite, or a moving body (its welded
        group) with no mass or inertia, which MuJoCo requires (its compiler refuses such a
        model): the terms are checked together, from each value's lowest and highest reach."""
        low = {name: values.astype(float).reshape(-1) for name, values in self._nominal.items()}
        high = {name: values.copy() for name, values in low.items()}
        with np.errstate(over="ignore", invalid="ignore"):
            for term in self.model_terms:
                field = FIELDS[term.field]
                lo, hi = low[field.attribute][term.flat], high[field.attribute][term.flat]
                if term.scale is not None:
                    ends = [lo * term.scale[0], lo * term.scale[1], hi * term.scale[0],
                            hi * term.scale[1]]
                    lo, hi = np.minimum.reduce(ends), np.maximum.reduce(ends)
                if term.add is not None:
                    lo, hi = lo + term.add[0], hi + term.add[1]
                lo, hi = np.clip(lo, *field.bounds), np.clip(hi, *field.bounds)
                unbounded = ~(np.isfinite(lo) & np.isfinite(hi))
                if unbounded.any():
                    at = int(np.flatnonzero(unbounded)[0])
                    raise ConfigError(
                        f"{self._term_where(term)}: its draws could reach "
                        f"{hi[at] if not np.isfinite(hi[at]) else lo[at]} for "
                        f"{_label_of(term, at)} (with the terms before it); expected scale and "
                        f"add that keep every value finite")
                low[field.attribute][term.flat], high[field.attribute][term.flat] = lo, hi
                self._check_moving_bodies(model, term, low)

    def _check_moving_bodies(self, model: mujoco.MjModel, term: _ModelTerm,
                             low: Mapping[str, np.ndarray]) -> None:
        if term.field not in ("body_mass", "body_inertia"):
            return
        lowest = low[FIELDS[term.field].attribute].reshape(model.nbody, -1).sum(axis=1)
        nominal = np.asarray(getattr(model, FIELDS[term.field].attribute)).reshape(
            model.nbody, -1).sum(axis=1)
        for body in range(1, model.nbody):
            if model.body_dofnum[body] == 0 or model.body_weldid[body] != body:
                continue
            group = np.flatnonzero(model.body_weldid == body)  # it and the bodies welded to it
            if (float(nominal[group].sum()) >= mujoco.mjMINVAL
                    and float(lowest[group].sum()) < mujoco.mjMINVAL):
                what = "mass" if term.field == "body_mass" else "inertia"
                name = object_labels(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody, "body")[body]
                raise ConfigError(
                    f"{self._term_where(term)}: its draws could leave the moving body "
                    f"{name or f'body_{body}'!r} with no {what} (MuJoCo requires a moving body's "
                    f"{what} > {mujoco.mjMINVAL}); expected scale and add that keep it above that")

    def draw_model(self, model: mujoco.MjModel, rng: np.random.Generator) -> None:
        """The nominal values of every randomised field, then each term's draw over them, in
        order; then `mj_setConst`, so that the simulation uses the drawn values. The draws are
        made on copies, written only once all are finite (a ConfigError naming the term
        otherwise, the model unchanged)."""
        if not self.model_terms:
            self.last = []
            return
        drawn = {attribute: nominal.copy() for attribute, nominal in self._nominal.items()}
        with np.errstate(over="ignore", invalid="ignore"):
            for term in self.model_terms:
                field = FIELDS[term.field]
                values = drawn[field.attribute].reshape(-1)
                current = values[term.flat]
                if term.scale is not None:
                    current = current * _sample(rng, term.scale, term.draws, term.loguniform)[
                        term.group]
                if term.add is not None:
                    current = current + _sample(rng, term.add, term.draws, term.loguniform)[
                        term.group]
                current = np.clip(current, *field.bounds)
                if not np.isfinite(current).all():
                    at = int(np.flatnonzero(~np.isfinite(current))[0])
                    raise ConfigError(f"{self._term_where(term)}: it drew {current[at]} for "
                                      f"{_label_of(term, at)}; expected finite values (the model "
                                      f"is unchanged)")
                values[term.flat] = current
        if "actuator_biasprm" in drawn and "actuator_gainprm" in drawn:
            drawn["actuator_biasprm"][self._servos, 1] = -drawn["actuator_gainprm"][
                self._servos, 0]
        for attribute, values in drawn.items():
            getattr(model, attribute)[...] = values
        records: list[dict[str, Any]] = [{"term": term.index, "field": term.field}
                                         for term in self.model_terms]
        for term, record in zip(self.model_terms, records, strict=True):
            values = getattr(model, FIELDS[term.field].attribute).reshape(-1)
            record["values"] = {label: _plain(values[term.flat[start:stop]])
                                for label, (start, stop) in zip(term.labels, term.objects,
                                                                strict=True)}
        scratch = mujoco.MjData(model)
        with _core.CallbackFree():  # the constants' kinematics are no step of any plugin's
            mujoco.mj_setConst(model, scratch)
        self.last = records

    def perturb_state(self, model: mujoco.MjModel, data: mujoco.MjData,
                      rng: np.random.Generator) -> None:
        """Adds each qpos/qvel term's Gaussian noise to the state in `data` (a ball or free
        joint's orientation is turned by a random rotation vector of that deviation, and stays a
        unit quaternion), and appends its record to `last`."""
        records = []
        for term in self.state_terms:
            noise: dict[str, Any] = {}
            for label, joint in zip(term.labels, term.joints, strict=True):
                kind = mujoco.mjtJoint(model.jnt_type[joint])
                dofs = 6 if kind == mujoco.mjtJoint.mjJNT_FREE else (
                    3 if kind == mujoco.mjtJoint.mjJNT_BALL else 1)
                sample = rng.normal(0.0, term.std, dofs) if term.std > 0 else np.zeros(dofs)
                if term.field == "qvel":
                    start = int(model.jnt_dofadr[joint])
                    data.qvel[start:start + dofs] += sample
                else:
                    _perturb_position(model, data, joint, kind, sample)
                noise[label] = _plain(sample)
            records.append({"term": term.index, "field": term.field, "noise": noise})
        self.last = sorted([*self.last, *records], key=lambda record: record["term"])



def _perturb_position(model: mujoco.MjModel, data: mujoco.MjData, joint: int,
                      kind: mujoco.mjtJoint, sample: np.ndarray) -> None:
    address = int(model.jnt_qposadr[joint])
    if kind in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
        data.qpos[address] += sample[0]
        return
    if kind == mujoco.mjtJoint.mjJNT_FREE:
        data.qpos[address:address + 3] += sample[:3]
        address, sample = address + 3, sample[3:]
    quat = np.array(data.qpos[address:address + 4], dtype=float)
    if not np.linalg.norm(quat) > 0:
        quat = np.array([1.0, 0.0, 0.0, 0.0])
    # Integrating the rotation vector for unit time turns the orientation by it (local axes).
    mujoco.mju_quatIntegrate(quat, np.asarray(sample, dtype=float), 1.0)
    mujoco.mju_normalize4(quat)
    data.qpos[address:address + 4] = quat


def _label_of(term: _ModelTerm, at: int) -> str:
    """The object of `term` whose values include its `at`-th flat index."""
    for label, (start, stop) in zip(term.labels, term.objects, strict=True):
        if start <= at < stop:
            return repr(label)
    return "a value"


def _sample(rng: np.random.Generator, bounds: tuple[float, float], count: int,
            loguniform: bool) -> np.ndarray:
    low, high = bounds
    if loguniform:
        return np.exp(rng.uniform(math.log(low), math.log(high), count))
    return rng.uniform(low, high, count)


def _plain(values: np.ndarray) -> float | list[float]:
    """One value as a float, several as a list (JSON-able)."""
    return float(values[0]) if values.size == 1 else [float(v) for v in values]


def _checked_term(model: mujoco.MjModel, term: object, where: str, index: int
                  ) -> _ModelTerm | _StateTerm:
    if not isinstance(term, Mapping):
        raise ConfigError(f"{where}: a term is a mapping ({{field, names?, scale?, add?, dist?}} "
                          f"or {{field: qpos|qvel, names?, std}}), got {term!r}")
    field = term.get("field")
    known = [*FIELDS, *STATE_FIELDS]
    if not isinstance(field, str) or field not in known:
        hint = suggestion(close_matches(field, known)) if isinstance(field, str) else ""
        shown = "no 'field'" if field is None else f"field {field!r}"
        raise ConfigError(f"{where}: {shown} is not randomisable{hint}; the fields: "
                          f"{', '.join(known)}")
    allowed = _STATE_KEYS if field in STATE_FIELDS else _MODEL_KEYS
    for key in term:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r} for field {field!r}"
                              f"{suggestion(close_matches(key, allowed))}; its keys: "
                              f"{', '.join(allowed)}")
    if field in STATE_FIELDS:
        return _checked_state_term(model, term, field, where, index)
    return _checked_model_term(model, term, field, where, index)


def _selected(model: mujoco.MjModel, names: object, obj_type: mujoco.mjtObj, noun: str,
              skip_world: bool, where: str) -> list[tuple[str, int]]:
    """The (label, id) of the objects `names` names (all of them, without `names`)."""
    count = int(getattr(model, _COUNTS[obj_type]))
    labels = object_labels(model, obj_type, count, noun)
    if names is None:
        first = 1 if skip_world else 0
        return [(labels[i] or f"{noun}_{i}", i) for i in range(first, count)]
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Sequence) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: names must be a non-empty list of {noun} names, "
                          f"got {names!r}")
    chosen: list[tuple[str, int]] = []
    for name in names:
        try:
            found = object_id(model, obj_type, noun, count, name, prefix=noun)
        except KeyError as error:
            raise ConfigError(f"{where}: {error.args[0]}") from error
        if any(found == seen for _, seen in chosen):
            raise ConfigError(f"{where}: names lists the {noun} {name!r} twice")
        chosen.append((name, found))
    return chosen


def _checked_range(term: Mapping[str, Any], key: str, where: str) -> tuple[float, float] | None:
    value = term.get(key)
    if value is None:
        return None
    try:
        low, high = (float(v) for v in value)  # type: ignore[union-attr]
        numeric = not any(isinstance(v, (bool, str)) for v in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        numeric = False
    if not numeric or not (math.isfinite(low) and math.isfinite(high)):
        raise ConfigError(f"{where}: {key} must be [lo, hi], two finite numbers, got {value!r}")
    if low > high:
        raise ConfigError(f"{where}: {key} must be [lo, hi] with lo <= hi, got {value!r}")
    return low, high


def _checked_model_term(model: mujoco.MjModel, term: Mapping[str, Any], field_name: str,
                        where: str, index: int) -> _ModelTerm:
    field = FIELDS[field_name]
    where = f"{where} ({field_name})"
    scale = _checked_range(term, "scale", where)
    add = _checked_range(term, "add", where)
    if scale is None and add is None:
        raise ConfigError(f"{where}: expected scale: [lo, hi] or add: [lo, hi] (or both), "
                          f"got neither")
    dist = term.get("dist", "uniform")
    if dist not in _DISTRIBUTIONS:
        raise ConfigError(f"{where}: dist must be one of {', '.join(_DISTRIBUTIONS)}, got "
                          f"{dist!r}{suggestion(close_matches(dist, _DISTRIBUTIONS))}")
    loguniform = dist == "loguniform"
    for key, bounds in (("scale", scale), ("add", add)):
        if bounds is not None and loguniform and bounds[0] <= 0:
            raise ConfigError(f"{where}: a loguniform {key} needs 0 < lo <= hi, got "
                              f"{list(bounds)}")
    if scale is not None and scale[0] < 0 and field.bounds[0] >= 0:
        raise ConfigError(f"{where}: scale must be [lo, hi] with lo >= 0 ({field_name} is not "
                          f"negative), got {list(scale)}")
    objects = _selected(model, term.get("names"), field.obj_type, field.noun, field.skip_world,
                        where)
    if not objects:
        raise ConfigError(f"{where}: the model has no {field.noun}s to randomise")
    array = getattr(model, field.attribute)
    width = 1 if array.ndim == 1 else array.shape[1]
    columns = np.arange(width)[field.columns]
    flat: list[int] = []
    group: list[int] = []
    spans = []
    draws = 0
    for _, object_index in objects:
        rows = (range(int(model.jnt_dofadr[object_index]),
                      int(model.jnt_dofadr[object_index]) + _joint_dofs(model, object_index))
                if field.dofs else [object_index])
        start = len(flat)
        for row in rows:
            for column in columns:
                flat.append(row * width + int(column))
                group.append(draws)
                if not field.per_object:
                    draws += 1
        if field.per_object:
            draws += 1
        spans.append((start, len(flat)))
    flat_array = np.asarray(flat, dtype=int)
    if field.bounds[0] >= 0 and add is not None:
        # The lowest value a draw can give, from the nominal values (never negative): a term that
        # could make a mass or a damping negative is refused rather than clipped unseen.
        nominal = array.reshape(-1)[flat_array]
        lowest = float(np.min(nominal * (scale[0] if scale else 1.0))) + add[0]
        if lowest < field.bounds[0] and field.bounds != _UNIT:
            raise ConfigError(f"{where}: add {list(add)} could make a value negative (the "
                              f"lowest nominal value is {float(np.min(nominal))}); expected "
                              f"lo >= {-float(np.min(nominal * (scale[0] if scale else 1.0)))}")
    return _ModelTerm(index, field_name, tuple(label for label, _ in objects), flat_array,
                      np.asarray(group, dtype=int), draws, tuple(spans), scale, add, loguniform)


def _joint_dofs(model: mujoco.MjModel, joint: int) -> int:
    kind = mujoco.mjtJoint(model.jnt_type[joint])
    return {mujoco.mjtJoint.mjJNT_FREE: 6, mujoco.mjtJoint.mjJNT_BALL: 3}.get(kind, 1)


def _checked_state_term(model: mujoco.MjModel, term: Mapping[str, Any], field: str, where: str,
                        index: int) -> _StateTerm:
    where = f"{where} ({field})"
    std = term.get("std")
    if (not isinstance(std, (int, float)) or isinstance(std, bool) or not math.isfinite(std)
            or std < 0):
        raise ConfigError(f"{where}: std must be a finite number >= 0, got {std!r}")
    joints = _selected(model, term.get("names"), mujoco.mjtObj.mjOBJ_JOINT, "joint", False, where)
    if not joints:
        raise ConfigError(f"{where}: the model has no joints to perturb")
    return _StateTerm(index, field, tuple(label for label, _ in joints),
                      tuple(joint for _, joint in joints), float(std))
