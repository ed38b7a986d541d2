"""VectorEnv: many worlds of one model, stepped together on a pool of C++ worker threads (SPEC §21).

Each world is a MujocoEnv of its own (its data, its plugins, its bus), built here and stepped by
the compiled VectorCore, which owns the worker pool and runs each world's own EnvCore step: there is
no second stepping loop. It does not own randomisation or the Gymnasium wrappers (they build on
this), nor any world's plugin lifecycle (each world's MujocoEnv does).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import operator
import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from mjfast._core_loader import _core
from mjfast.bus.node import Bus
from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import LogicError, MjfastError
from mjfast.model.state import SimState
from mjfast.plugin.base import PluginInfo
from mjfast.sim.calls import SimCall, world_calls
from mjfast.sim.config import ModelSource, compile_model, parameter_server
from mjfast.sim.env import ModelLike, MujocoEnv
from mjfast.sim.host import EnvHost

__all__ = ["VectorEnv", "World"]

# The batched arrays, each gathered by the core into a new (num_envs, width) array.
BATCHED_FIELDS = ("qpos", "qvel", "ctrl", "sensordata", "time")
# Worker threads are capped at this many per usable CPU (SPEC §18: a limit checked, not
# discovered): more only contend for the CPUs, and each costs a thread's stack and Python state.
THREADS_PER_CPU = 4
# A lower bound on what one world costs besides its model's arena (its mjData header and
# buffers, its env, bus and plugin host in Python: about 1 MiB measured for a small arm), used to
# refuse a num_envs that cannot fit before building any world.
MIN_WORLD_BYTES = 256 * 1024


class _WorldEnv(MujocoEnv):
    """One world of a VectorEnv: a MujocoEnv that knows its index and reads its model from the
    vector's one source."""

    def __init__(self, world_index: int, source: ModelSource, model: mujoco.MjModel, *,
                 params: ParameterServer, namespace: str, seed: int | None) -> None:
        self._world_index = world_index
        self._world_seed = seed
        self._shared_source = source
        super().__init__(model, params=params, namespace=namespace)

    def _model_source(self, model: ModelLike) -> ModelSource:
        return self._shared_source

    @property
    def world_index(self) -> int:
        return self._world_index

    @property
    def core(self) -> Any:
        """This world's EnvCore, which the VectorCore steps."""
        return self._core


_open_vectors: weakref.WeakSet[VectorEnv] = weakref.WeakSet()


@atexit.register
def _close_open_vectors() -> None:
    # The workers are attached to Python: end them before the interpreter goes (registered after
    # MujocoEnv's own atexit hook, so this runs first).
    for vector in list(_open_vectors):
        vector.close()


def _integer(value: object, what: str) -> int:
    """An integer (TypeError for a non-integer or a bool)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None


def _count(value: object, what: str, minimum: int) -> int:
    """An integer >= minimum (TypeError for a non-integer or a bool, ValueError below it)."""
    number = _integer(value, what)
    if number < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {number}")
    return number


def _seed(value: object) -> int | None:
    if value is None:
        return None
    return _count(value, "seed", 0)


def _physical_memory() -> int | None:
    """This machine's physical memory in bytes, where the OS says."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX, or not known
        return None


def _check_fits(num_envs: int, model: mujoco.MjModel, own_models: bool) -> None:
    """MemoryError, before any world is built, where `num_envs` worlds cannot fit in this
    machine's memory even at the least a world costs (MuJoCo would fail one allocation in, or
    the machine would swap for hours first)."""
    total = _physical_memory()
    per_world = MIN_WORLD_BYTES + (int(model.nbuffer) if own_models else 0)
    if total is not None and num_envs * per_world > total:
        raise MemoryError(f"num_envs={num_envs} worlds need at least {num_envs * per_world:,} "
                          f"bytes of memory; this machine has {total:,}")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class VectorEnv:
    """`num_envs` worlds of one model, each with its own data and plugins, stepped together on
    `threads` C++ worker threads (SPEC §21)."""

    def __init__(
        self,
        model: ModelLike,
        num_envs: int,
        params: ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        seed: int | None = None,
        namespace: str = "/mujoco_server",
        own_models: bool = False,
    ) -> None:
        """`own_models=True` gives every world a copy of the model of its own (for per-world
        model edits such as randomisation); by default the worlds share one `MjModel`, as
        `mujoco.rollout` does, and a model edit through one world (`apply_options`, geometry)
        reaches them all. `threads` defaults to the CPUs this process may use, and is capped at
        `num_envs` and at THREADS_PER_CPU times them (`threads` says how many there are)."""
        self._closed = True  # until construction succeeds: close() and __del__ do nothing
        self._num_envs = _count(num_envs, "num_envs", 1)
        requested = usable_cpus() if threads is None else _count(threads, "threads", 1)
        requested = min(requested, self._num_envs, THREADS_PER_CPU * usable_cpus())
        self._seed = _seed(seed)
        if not isinstance(own_models, bool):
            raise TypeError(f"own_models must be a bool, got {type(own_models).__name__}")
        self._own_models = own_models
        self._params, _ = parameter_server(params)
        self._source = ModelSource.of(model)
        # The nominal model: the worlds' shared one, or what each world's copy starts from.
        self._model = compile_model(self._source, self._params, resolve_name(namespace))
        _check_fits(self._num_envs, self._model, own_models)
        self._worlds: list[_WorldEnv] = []
        try:
            for index in range(self._num_envs):
                world_model = copy.copy(self._model) if own_models else self._model
                self._worlds.append(_WorldEnv(index, self._source, world_model,
                                              params=self._params, namespace=namespace,
                                              seed=self._seed))
            self._core = _core.VectorCore([world.core for world in self._worlds], requested)
        except BaseException:
            for world in self._worlds:
                with contextlib.suppress(Exception):
                    world.close()
            raise
        self._namespace = self._worlds[0].namespace
        # A world that randomises model fields made its model its own (SPEC §21).
        self._own_models = own_models or any(world.model is not self._model
                                             for world in self._worlds)
        self._closed = False
        _open_vectors.add(self)

    # -- properties ---------------------------------------------------------------------------

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def threads(self) -> int:
        """The worker threads that step the worlds."""
        return int(self._core.threads) if not self._closed else 0

    @property
    def seed(self) -> int | None:
        """The base seed (world i draws from seed + i); the last reset(seed=...) replaces it."""
        return self._seed

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def params(self) -> ParameterServer:
        return self._params

    @property
    def model(self) -> mujoco.MjModel:
        """The nominal model: the one the worlds share, or the one their copies started from."""
        return self._model

    @property
    def own_models(self) -> bool:
        """Whether every world has a copy of the model of its own."""
        return self._own_models

    @property
    def models(self) -> tuple[mujoco.MjModel, ...]:
        """Each world's model (the same object for all unless `own_models`)."""
        return tuple(world.model for world in self._worlds)

    def _gathered(self, field: str) -> np.ndarray:
        self._check_open()
        return self._core.gather(field)

    def gather(self, fields: Sequence[str], out: np.ndarray | None = None) -> np.ndarray:
        """Every world's `fields` (of qpos, qvel, ctrl, sensordata, time) side by side, one row
        per world, in one call: into `out` (a writable float64 array of shape (num_envs, their
        total width), filled in place and returned) or a new array. An observation of qpos and
        qvel is `gather(("qpos", "qvel"))`."""
        self._check_open()
        if isinstance(fields, str):
            fields = (fields,)
        unknown = [f for f in fields if f not in BATCHED_FIELDS]
        if unknown or not fields:
            raise ValueError(f"gather() takes fields of {', '.join(BATCHED_FIELDS)}, got "
                             f"{list(fields)!r}")
        return self._core.gather_rows(list(fields), out)

    @property
    def qpos(self) -> np.ndarray:
        """(num_envs, nq), a new array of every world's current qpos."""
        return self._gathered("qpos")

    @property
    def qvel(self) -> np.ndarray:
        """(num_envs, nv)."""
        return self._gathered("qvel")

    @property
    def ctrl(self) -> np.ndarray:
        """(num_envs, nu)."""
        return self._gathered("ctrl")

    @property
    def sensordata(self) -> np.ndarray:
        """(num_envs, nsensordata)."""
        return self._gathered("sensordata")

    @property
    def time(self) -> np.ndarray:
        """(num_envs,) simulated time of each world."""
        return self._gathered("time")

    # -- stepping -----------------------------------------------------------------------------

    def step(self, n: int = 1, ctrl: Any = None) -> None:
        """Writes `ctrl` (shape (num_envs, nu)) into every world, then steps every world `n`
        steps on the worker threads, the GIL released while no Python plugin runs. A world whose
        plugin raises stops after that step (SPEC §6) while the others run their `n` steps; then
        that world's error is raised, with `world_index` set on it."""
        self._check_open()
        rows = None if ctrl is None else self._checked_ctrl(ctrl)
        try:
            self._core.step(n, rows)
        except MjfastError as error:
            failed = self._core.failed_worlds()
            if failed:
                error.world_index = failed[0]  # type: ignore[attr-defined]
                error.add_note(f"in world {failed[0]} of the VectorEnv"
                               + (f" (failed too: worlds {list(failed[1:])})"
                                  if len(failed) > 1 else ""))
            raise

    def _checked_ctrl(self, ctrl: Any) -> np.ndarray:
        nu = self._worlds[0].model.nu
        expected = f"shape (num_envs, nu) = ({self._num_envs}, {nu})"
        try:
            array = np.asarray(ctrl)
        except (TypeError, ValueError) as error:
            raise ValueError(f"ctrl must be an array of {expected}: {error}") from None
        if array.dtype.kind not in "fiu":
            raise TypeError(f"ctrl must be a real numeric array of {expected}, got dtype "
                            f"{array.dtype}")
        if array.shape != (self._num_envs, nu):
            raise ValueError(f"ctrl must have {expected}, got shape {array.shape}")
        rows = np.ascontiguousarray(array, dtype=np.float64)
        if not np.isfinite(rows).all():
            world, column = np.argwhere(~np.isfinite(rows))[0]
            raise ValueError(f"ctrl must be finite, got {rows[world, column]} for world {world}, "
                             f"actuator {column}")
        return rows

    # -- worlds -------------------------------------------------------------------------------

    def _indices(self, indices: Any) -> list[int]:
        """Worlds named by `indices`: None (all), an index, a sequence of indices or a boolean
        mask of length num_envs; in order, each once."""
        if indices is None:
            return list(range(self._num_envs))
        array = np.asarray(indices)
        if array.dtype == np.bool_:
            if array.shape != (self._num_envs,):
                raise ValueError(f"a boolean mask of worlds must have shape ({self._num_envs},), "
                                 f"got {array.shape}")
            return [int(i) for i in np.flatnonzero(array)]
        if array.ndim > 1 or (array.size and array.dtype.kind not in "iu"):
            raise TypeError(f"indices must be None, a world index, a sequence of world indices or "
                            f"a boolean mask, got {indices!r}")
        chosen: list[int] = []
        for value in array.reshape(-1).tolist():
            index = self._in_range(value)
            if index not in chosen:
                chosen.append(index)
        return chosen

    def _in_range(self, number: int) -> int:
        """World `number` (negative: counted from the end), or one IndexError naming the range."""
        if not -self._num_envs <= number < self._num_envs:
            raise IndexError(f"world index {number} out of range for {self._num_envs} worlds: "
                             f"expected 0..{self._num_envs - 1} (or -{self._num_envs}..-1 from "
                             f"the end)")
        return number % self._num_envs

    def _index(self, index: object) -> int:
        return self._in_range(_integer(index, "world index"))

    def reset(self, indices: Any = None, *, seed: int | None = None) -> None:
        """Resets the worlds named by `indices` (None: all) as `MujocoEnv.reset()` does, each
        with its plugins' reset/on_reset; the others are untouched. `seed` replaces the base
        seed first (world i draws from seed + i)."""
        self._check_open()
        chosen = self._indices(indices)
        new_seed = _seed(seed)
        with self._core.hold("VectorEnv.reset()"):
            if new_seed is not None:
                self._seed = new_seed
            # Each world draws its `randomize` terms, seeded anew with seed + its index.
            self._each_world(chosen, lambda world: world.reset(
                seed=None if new_seed is None else new_seed + world.world_index))

    def _each_world(self, chosen: Sequence[int], operation: Any) -> None:
        """Runs `operation(world)` on every chosen world; the first world's error is raised once
        all have run, with `world_index` set on it."""
        first: BaseException | None = None
        for index in chosen:
            try:
                operation(self._worlds[index])
            except Exception as error:
                if first is None:
                    error.world_index = index  # type: ignore[attr-defined]
                    error.add_note(f"in world {index} of the VectorEnv")
                    first = error
        if first is not None:
            raise first

    def get_state(self, index: int) -> SimState:
        """World `index`'s state (SPEC §20): physics, step count and its plugins' states."""
        self._check_open()
        world = self._worlds[self._index(index)]
        with self._core.hold("VectorEnv.get_state()"):
            return world.get_state()

    def set_state(self, index: int, state: SimState) -> None:
        """Restores `state` (of any world of this model, or of a MujocoEnv of it) into world
        `index` as `MujocoEnv.set_state` does; the other worlds are untouched."""
        self._check_open()
        world = self._worlds[self._index(index)]
        with self._core.hold("VectorEnv.set_state()"):
            world.set_state(state)

    def world(self, index: int) -> World:
        """World `index`: its simulation-control calls (SPEC §13), plugins and statistics."""
        self._check_open()
        return World(self, self._index(index))

    def worlds(self) -> Iterator[World]:
        """Every world, in index order."""
        self._check_open()
        return (World(self, index) for index in range(self._num_envs))

    # -- lifecycle ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogicError("the VectorEnv is closed")

    def close(self) -> None:
        """Ends the worker threads, then closes every world (its plugins unloaded); idempotent."""
        if getattr(self, "_closed", True):
            return
        self._core.close()  # after a step in progress; refused from a world's plugin callback
        self._closed = True
        _open_vectors.discard(self)
        errors = []
        for world in self._worlds:
            try:
                world.close()
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __len__(self) -> int:
        return self._num_envs

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"threads={self.threads}"
        return (f"<VectorEnv {self._namespace} num_envs={self._num_envs} nq={self._model.nq} "
                f"{state}>")


class World:
    """One world of a VectorEnv: the simulation-control calls of SPEC §13 on its own data, its
    plugins and statistics. Stepping is the VectorEnv's (no step/start here); each call holds
    the vector, so it never interleaves with a VectorEnv.step."""

    def __init__(self, vector: VectorEnv, index: int) -> None:
        self._vector = vector
        self._index = index
        self._env: _WorldEnv = vector._worlds[index]

    @property
    def index(self) -> int:
        return self._index

    @contextlib.contextmanager
    def _held(self, what: str) -> Iterator[_WorldEnv]:
        self._vector._check_open()
        with self._vector._core.hold(what):
            yield self._env

    # -- what the world is -------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        return self._env.model

    @property
    def data(self) -> mujoco.MjData:
        return self._env.data

    @property
    def bus(self) -> Bus:
        """The world's own in-process bus (its plugins' topics and services)."""
        return self._env.bus

    @property
    def host(self) -> EnvHost:
        return self._env.host

    @property
    def plugins(self) -> tuple[PluginInfo, ...]:
        return self._env.plugins

    @property
    def step_count(self) -> int:
        return self._env.step_count

    @contextlib.contextmanager
    def acquire_plugin(self, name: str, model_generation: int | None = None,
                       plugin_generation: int | None = None) -> Iterator[Any]:
        """Scoped access to one of this world's plugins (no dispatch of this world meanwhile)."""
        self._vector._check_open()
        with self._env.acquire_plugin(name, model_generation, plugin_generation) as plugin:
            yield plugin

    # The simulation-control calls (SPEC §13) of the calls table's world rows, and statistics()
    # and info(), are made below from the table (`_world_call`): each holds the vector and runs
    # the world env's method. `reset(seed=...)` reseeds this world's generator (the VectorEnv's
    # base seed stays as it is); `apply_options` changes every world's options unless the
    # VectorEnv was built with `own_models=True` (they share one model); `spawn` and `remove`
    # (SPEC §25) give this world a model of its own, and the batched fields whose widths then
    # differ are refused by the core (VectorCore::check_widths, under the vector's lock).
    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...

    def __repr__(self) -> str:
        return f"<World {self._index} of {self._vector!r}>"


def _world_call(call: SimCall) -> Callable[..., Any]:
    """World's method for the calls table's row `call`: the world env's own, with the vector held
    (its signature and docs are the env method's)."""
    name = call.name

    @functools.wraps(getattr(MujocoEnv, name))
    def method(self: World, *args: Any, **kwargs: Any) -> Any:
        with self._held(f"world {name}()") as env:
            return getattr(env, name)(*args, **kwargs)

    return method


for _call in world_calls():
    setattr(World, _call.name, _world_call(_call))
