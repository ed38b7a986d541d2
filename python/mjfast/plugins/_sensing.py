"""What the shipped sensor, clock and lidar plugins share (SPEC §14).

Owns the simulated-time rate schedule and the due check of the plugins that publish on it
(`RatePublisher`), configuration checks whose messages name the key and what was expected, and
model name lookups, whose refusals are worded by mjfast.names. Nothing here publishes or casts:
what a due step publishes is each plugin's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import mujoco

from mjfast._core_loader import _core
from mjfast.model.names import labelled_id
from mjfast.names import no_such_name, unknown
from mjfast.plugin.base import MujocoPlugin

__all__ = [
    "RatePublisher",
    "RateSchedule",
    "check_keys",
    "checked_state",
    "id_of",
    "listed_ids",
    "number",
    "positive_int",
    "seed_of",
    "topic_of",
]

# Keys the host may leave in a plugin's configuration besides its own.
_HOST_KEYS = frozenset({"type", "name"})


def check_keys(plugin: str, config: Mapping[str, Any], allowed: Iterable[str],
               where: str = "") -> None:
    """Refuses a key outside `allowed`, naming it and listing the accepted ones (the keys of a
    nested section, `where`; a plugin's own keys are its `config_keys`, checked before load)."""
    allowed = frozenset(allowed)
    refused = sorted(str(k) for k in config if k not in allowed and
                     (where or k not in _HOST_KEYS))
    if refused:
        raise ValueError(f"{plugin}: " + unknown(
            "unknown configuration key", refused[0], sorted(str(key) for key in allowed), n=1,
            section=f"{where}." if where else "", exists="its keys are"))


def checked_state(plugin: str, value: Any, kinds: Mapping[str, Any]) -> dict[str, Any]:
    """A plugin's state value (SPEC §20) checked before anything is set from it: a dict with
    exactly the keys of `kinds`, each value an instance of its kind (a type or a tuple of them;
    `float` takes an int too). ValueError naming the key and what was expected otherwise."""
    if not isinstance(value, dict) or set(value) != set(kinds):
        got = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise ValueError(f"{plugin}: a state is a dict with keys {sorted(kinds)}, got {got}")
    for key, kind in kinds.items():
        item = value[key]
        kinds_ = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds_ and isinstance(item, int) and not isinstance(item, bool):
            continue
        if not isinstance(item, kinds_) or (isinstance(item, bool) and bool not in kinds_):
            names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds_)
            raise ValueError(f"{plugin}: state[{key!r}] must be {names}, got {item!r}")
    return value


def number(plugin: str, key: str, value: Any, *, minimum: float | None = None,
           strict: bool = False, finite: bool = True) -> float:
    """A real number (bool refused), optionally bounded below; ValueError naming `key` else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{plugin}: {key} must be a number, got {value!r}")
    result = float(value)
    if math.isnan(result) or (finite and math.isinf(result)):
        raise ValueError(f"{plugin}: {key} must be a finite number, got {value!r}")
    if minimum is not None and (result <= minimum if strict else result < minimum):
        relation = ">" if strict else ">="
        raise ValueError(f"{plugin}: {key} must be {relation} {minimum:g}, got {value!r}")
    return result


def positive_int(plugin: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{plugin}: {key} must be a positive integer, got {value!r}")
    return value


def topic_of(plugin: str, node: Any, topic: Any) -> str:
    """`topic` checked at load: a non-empty str that resolves (in `node`) to a topic, not `/`;
    ValueError naming it otherwise (rather than an error from the first publish, mid-step)."""
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"{plugin}: topic must be a non-empty topic name, got {topic!r}")
    try:
        resolved = node.resolve_name(topic)
    except ValueError as error:
        raise ValueError(f"{plugin}: topic {topic!r} is not a valid name: {error}") from None
    if resolved == "/":
        raise ValueError(f"{plugin}: topic {topic!r} names no topic (it resolves to '/')")
    return topic


def seed_of(plugin: str, config: Mapping[str, Any]) -> int:
    """The noise seed: an integer >= 0, default 0 (so that an unseeded run is reproducible too)."""
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{plugin}: seed must be a non-negative integer, got {seed!r}")
    return seed


def id_of(plugin: str, model: mujoco.MjModel, kind: mujoco.mjtObj, what: str,
          name: Any, candidates: Iterable[str], prefix: str | None = None) -> int:
    """The id of the `what` named `name` (with `prefix`, an unnamed one is `<prefix>_<id>`);
    ValueError naming it and the closest names if absent."""
    if prefix is not None:
        index = labelled_id(model, kind, _count(model, kind), prefix, name)
    else:
        index = mujoco.mj_name2id(model, kind, str(name)) if isinstance(name, str) else -1
    if index < 0:
        raise ValueError(f"{plugin}: {no_such_name(what, name, [c for c in candidates if c])}")
    return int(index)


def _count(model: mujoco.MjModel, kind: mujoco.mjtObj) -> int:
    counts = {mujoco.mjtObj.mjOBJ_SENSOR: model.nsensor, mujoco.mjtObj.mjOBJ_JOINT: model.njnt,
              mujoco.mjtObj.mjOBJ_CAMERA: model.ncam, mujoco.mjtObj.mjOBJ_SITE: model.nsite,
              mujoco.mjtObj.mjOBJ_BODY: model.nbody}
    return int(counts[kind])


def listed_ids(plugin: str, config: Mapping[str, Any], key: str, model: mujoco.MjModel,
               kind: mujoco.mjtObj, what: str, candidates: list[str],
               prefix: str | None = None) -> list[int] | None:
    """The ids of the `what`s that `config[key]` lists by name, in that order; None if `key` is
    absent. ValueError naming `key` for anything but a list of names, or an unknown name."""
    wanted = config.get(key)
    if wanted is None:
        return None
    if not isinstance(wanted, (list, tuple)) or not all(isinstance(n, str) for n in wanted):
        raise ValueError(f"{plugin}: {key} must be a list of {what} names, got {wanted!r}")
    repeated = sorted({n for n in wanted if wanted.count(n) > 1})
    if repeated:
        raise ValueError(f"{plugin}: {key} lists {what} {repeated[0]!r} more than once")
    return [id_of(plugin, model, kind, what, n, candidates, prefix) for n in wanted]


def names_of(model: mujoco.MjModel, kind: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, kind, i) or "" for i in range(count)]


class RateSchedule:
    """Due times at whole multiples of `period` in simulated time (SPEC §14).

    A step is due when its time reaches the next due time (within half a step, so that a period
    that is a whole number of steps is not missed to rounding). `restart(time)` returns the window
    of times that are not due, [the previous due time, the next one): a plugin's per-step test is
    one chained comparison against it, and a time below the window (time went back: a reset, or
    user code writing `data.time`) counts as due and restarts the schedule, as a due step does.
    """

    __slots__ = ("_half_step", "period")

    def __init__(self, rate_hz: float, timestep: float) -> None:
        self.period = 1.0 / rate_hz
        self._half_step = 0.5 * timestep

    def restart(self, time: float) -> tuple[float, float]:
        """(low, high): not due iff low <= t < high; the next due time is the first multiple of
        the period strictly after `time` (within half a step)."""
        index = math.floor((time + self._half_step) / self.period)
        return (index * self.period - self._half_step,
                (index + 1) * self.period - self._half_step)


def open_due_window(plugin: MujocoPlugin, base: type) -> None:
    """Gives `plugin` the core's window of times with nothing due (`_core.DueWindow`, as its
    `__mjfast_due_window__`), so that the stepping thread skips its `last_stage_callback`
    without the GIL between due steps; unless its class overrides `base`'s
    `last_stage_callback`, which is then called at every step as any plugin's is. Load only:
    the adapter picks the window up when `load` returns."""
    if type(plugin).last_stage_callback is base.last_stage_callback:
        plugin.__mjfast_due_window__ = _core.DueWindow()


def set_due_window(plugin: MujocoPlugin, low: float, high: float) -> None:
    """Moves `plugin`'s due window (if `open_due_window` gave it one): the steps whose time t
    has low <= t < high are skipped."""
    window = plugin.__dict__.get("__mjfast_due_window__")
    if window is not None:
        window.set(low, high)


class RatePublisher(MujocoPlugin):
    """A plugin that publishes from `last_stage_callback` at the first step whose time reaches
    each multiple of 1/rate_hz (SPEC §14), the schedule following the clock across resets.

    `load` calls `_start_schedule`; `_publish_due` publishes what a due step has. A step that is
    not due costs the stepping thread one comparison in the core and neither the GIL nor a call:
    the window of times with nothing due is also the core's (`__mjfast_due_window__`, a
    `_core.DueWindow`), unless a subclass overrides `last_stage_callback`, which is then called
    at every step as any plugin's is.
    """

    def _start_schedule(self, rate_hz: float, model: mujoco.MjModel,
                        data: mujoco.MjData) -> None:
        self._schedule = RateSchedule(rate_hz, float(model.opt.timestep))
        open_due_window(self, RatePublisher)
        self._set_window(*self._schedule.restart(float(data.time)))

    def _set_window(self, low: float, high: float) -> None:
        self._low, self._high = low, high
        set_due_window(self, low, high)

    def _publish_due(self, data: mujoco.MjData, time: float) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _publish_due")

    def last_stage_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        time = data.time
        if self._low <= time < self._high:
            return
        self._set_window(*self._schedule.restart(time))
        self._publish_due(data, time)

    def reset(self) -> None:
        self._set_window(*self._schedule.restart(float(self.env.data.time)))

    # State (SPEC §20): the schedule's window, so that a restored run publishes at the same steps.
    def get_state(self) -> dict[str, Any]:
        return {"low": self._low, "high": self._high}

    def set_state(self, value: Any) -> None:
        state = checked_state(self.name, value, {"low": float, "high": float})
        self._set_window(float(state["low"]), float(state["high"]))
