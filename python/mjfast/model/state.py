"""SimState: one simulation state (SPEC §20), the type that `env.get_state()` returns and
`env.set_state()`, the recorder, replay and VectorEnv take, and its byte format.

It owns the format and the plugin-value encoding; taking and restoring a state at a step boundary
is the compiled core's (`EnvCore.get_state` / `EnvCore.set_state`), and `capture` / `restore`
below are the one way Python reaches them.

The byte format, version 1 (`SimState.to_bytes()`; every integer little-endian):

    b"MJFSTATE"                   magic (8 bytes)
    u32 version                   1
    u32 spec                      the mujoco.mjtState bits of `physics` (mjSTATE_INTEGRATION)
    u64 step_count
    str model_signature           (a str is u32 byte length + UTF-8)
    str model_description
    u64 n, then n float64         physics (`time` is its first value)
    u32 plugin count, then per plugin, in load order:
        str name, str type, u64 length + that many bytes: the plugin's value, encoded as below

A plugin's value is encoded as one tag byte and its payload (lengths u64 unless noted):

    N None, T True, F False
    i int          u32 length + two's complement bytes
    f float        8 bytes IEEE 754 (bit for bit: -0.0 and NaN payloads survive)
    s str / b bytes   length + UTF-8 / raw bytes
    l list / t tuple  count + items;   d dict: count + key, value pairs
    a ndarray      str dtype (numpy's dtype.str: bool, int, uint, float or complex only),
                   u32 ndim, ndim x u64 shape, raw C-order data
    g numpy scalar str dtype as for `a`, then its raw bytes

Decoding builds only these types (no pickle, no imports, no code), checks every length against
the bytes left and nests at most 64 deep; anything else is a ValueError naming what is wrong and
where. A native plugin's state is its own bytes, encoded as a `b` value.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import mujoco
import numpy as np

__all__ = ["FORMAT_VERSION", "STATE_SPEC", "SimState", "decode_value", "encode_value"]

FORMAT_VERSION = 1
# What `physics` holds: everything mj_step reads that it does not recompute (time, qpos, qvel,
# act, history, mocap, userdata, plugin state, ctrl, applied forces, equality switches, the
# constraint solver's warm start).
STATE_SPEC = int(mujoco.mjtState.mjSTATE_INTEGRATION)

_MAGIC = b"MJFSTATE"
_MAX_DEPTH = 64
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_HEADER = struct.Struct("<8sIIQ")  # magic, version, spec, step_count
_DTYPE = re.compile(r"[<>|=][biufc][0-9]{1,2}\Z")


# -- the plugin-value encoding ------------------------------------------------------------------

def encode_value(value: Any) -> bytes:
    """`value` in the plugin-value encoding (module docstring). TypeError naming the first part
    that has no encoding (a set, an object array, a class instance, ...)."""
    out: list[bytes] = []
    _encode(value, out, "value", 0)
    return b"".join(out)


def _encode_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _U64.pack(len(raw)) + raw


def _dtype_text(dtype: np.dtype[Any], where: str) -> bytes:
    text = dtype.str
    if dtype.fields is not None or dtype.subdtype is not None or not _DTYPE.match(text):
        raise TypeError(f"{where}: a numpy dtype of bool, integers, floats or complex numbers "
                        f"has an encoding, {dtype!r} has none")
    raw = text.encode("ascii")
    return bytes((len(raw),)) + raw


def _encode(value: Any, out: list[bytes], where: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise TypeError(f"{where}: nested more than {_MAX_DEPTH} deep")
    kind = type(value)
    if value is None:
        out.append(b"N")
    elif kind is bool:
        out.append(b"T" if value else b"F")
    elif kind is int:
        length = (value.bit_length() + 8) // 8  # room for the sign bit
        out.append(b"i" + _U32.pack(length) + value.to_bytes(length, "little", signed=True))
    elif kind is float:
        out.append(b"f" + _F64.pack(value))
    elif kind is str:
        out.append(b"s" + _encode_str(value))
    elif kind is bytes or kind is bytearray or kind is memoryview:
        raw = bytes(value)
        out.append(b"b" + _U64.pack(len(raw)) + raw)
    elif kind is list or kind is tuple:
        out.append((b"l" if kind is list else b"t") + _U64.pack(len(value)))
        for index, item in enumerate(value):
            _encode(item, out, f"{where}[{index}]", depth + 1)
    elif kind is dict:
        out.append(b"d" + _U64.pack(len(value)))
        for key, item in value.items():
            _encode(key, out, f"{where} key {key!r}", depth + 1)
            _encode(item, out, f"{where}[{key!r}]", depth + 1)
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        out.append(b"a" + _dtype_text(array.dtype, where) + _U32.pack(array.ndim)
                   + b"".join(_U64.pack(n) for n in array.shape) + array.tobytes())
    elif isinstance(value, np.generic):
        out.append(b"g" + _dtype_text(value.dtype, where) + value.tobytes())
    else:
        raise TypeError(f"{where}: a plugin state value is made of None, bool, int, float, str, "
                        f"bytes, list, tuple, dict and numpy arrays or scalars of numbers; "
                        f"{kind.__name__} has no encoding")


def decode_value(data: bytes | memoryview) -> Any:
    """The value `encode_value` encoded as `data`; ValueError naming what is wrong and where."""
    reader = _Reader(memoryview(data), "plugin value")
    value = reader.value(0)
    reader.end()
    return value


class _Reader:
    """Reads the byte format front to back, every length checked against what is left."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: memoryview, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def fail(self, problem: str) -> ValueError:
        return ValueError(f"bad SimState bytes: {self.what} at offset {self.pos}: {problem}")

    def take(self, size: int, what: str) -> memoryview:
        if size > len(self.data) - self.pos:
            raise self.fail(f"{what} needs {size} bytes, only {len(self.data) - self.pos} left")
        start = self.pos
        self.pos += size
        return self.data[start:self.pos]

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])

    def u64(self, what: str) -> int:
        return int(_U64.unpack(self.take(8, what))[0])

    def text(self, what: str, wide: bool = False) -> str:
        size = self.u64(what) if wide else self.u32(what)
        try:
            return str(self.take(size, what), "utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(f"{what} is not UTF-8 ({error.reason})") from None

    def dtype(self) -> np.dtype[Any]:
        size = self.take(1, "a dtype's length")[0]
        text = str(self.take(size, "a dtype"), "latin-1")
        if not _DTYPE.match(text):
            raise self.fail(f"dtype {text!r} is not one of numbers (bool, int, uint, float, "
                            f"complex)")
        try:
            return np.dtype(text)
        except TypeError:
            raise self.fail(f"dtype {text!r} is not a numpy dtype") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} bytes left over after the end")

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nested more than {_MAX_DEPTH} deep")
        tag = bytes(self.take(1, "a value's tag"))
        if tag == b"N":
            return None
        if tag == b"T":
            return True
        if tag == b"F":
            return False
        if tag == b"i":
            return int.from_bytes(self.take(self.u32("an int's length"), "an int"), "little",
                                  signed=True)
        if tag == b"f":
            return float(_F64.unpack(self.take(8, "a float"))[0])
        if tag == b"s":
            return self.text("a str", wide=True)
        if tag == b"b":
            return bytes(self.take(self.u64("a bytes' length"), "bytes"))
        if tag in (b"l", b"t"):
            count = self.u64("a list's length")
            if count > len(self.data) - self.pos:  # each item takes at least its tag byte
                raise self.fail(f"a list of {count} items does not fit the bytes left")
            items = [self.value(depth + 1) for _ in range(count)]
            return items if tag == b"l" else tuple(items)
        if tag == b"d":
            count = self.u64("a dict's length")
            if count > len(self.data) - self.pos:
                raise self.fail(f"a dict of {count} items does not fit the bytes left")
            result = {}
            for _ in range(count):
                key = self.value(depth + 1)
                try:
                    result[key] = self.value(depth + 1)
                except TypeError:
                    raise self.fail(f"dict key {key!r} is not hashable") from None
            return result
        if tag == b"a":
            dtype = self.dtype()
            ndim = self.u32("an array's ndim")
            if ndim > 32:
                raise self.fail(f"an array of {ndim} dimensions (numpy allows 32)")
            shape = tuple(self.u64("an array's shape") for _ in range(ndim))
            count = math.prod(shape)
            raw = self.take(count * dtype.itemsize, f"an array of shape {shape}")
            return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape).copy()
        if tag == b"g":
            dtype = self.dtype()
            return np.frombuffer(self.take(dtype.itemsize, "a numpy scalar"), dtype=dtype)[0]
        self.pos -= 1
        raise self.fail(f"unknown value tag {tag!r}")


# -- SimState -----------------------------------------------------------------------------------

class SimState:
    """One simulation state (SPEC §20), immutable.

    `time`, `step_count`, `model_signature` (a hash of the model's sizes and names, not of its
    parameter values: a state moves between models that differ only in e.g. masses),
    `model_description` (the model's name and sizes, for messages), `physics` (read-only float64
    array of `mj_getState(..., mjSTATE_INTEGRATION)`) and `plugins` (plugin name -> the value its
    `get_state()` returned, a fresh copy on each access; `bytes` for a native plugin).

    `to_bytes()` / `SimState.from_bytes(b)` (the versioned format of this module's docstring); it
    pickles through those bytes; `==` compares bit for bit. Made by `env.get_state()` or
    `from_bytes`, restored by `env.set_state(state)`.
    """

    __slots__ = ("__weakref__", "_bytes", "_description", "_physics", "_plugins", "_signature",
                 "_step_count")

    def __init__(self) -> None:
        raise TypeError("a SimState comes from env.get_state() or SimState.from_bytes()")

    @classmethod
    def _make(cls, physics: np.ndarray, step_count: int, signature: str, description: str,
              plugins: tuple[tuple[str, str, bytes], ...]) -> SimState:
        """A state from its parts, as the core hands them over (physics read-only float64)."""
        state = object.__new__(cls)
        _set_physics(state, physics)
        _set_step_count(state, step_count)
        _set_signature(state, signature)
        _set_description(state, description)
        _set_plugins(state, plugins)
        _set_bytes(state, None)
        return state

    # -- fields --------------------------------------------------------------------------------

    @property
    def time(self) -> float:
        """Simulated time (seconds), the first value of `physics`."""
        return float(self._physics[0])

    @property
    def step_count(self) -> int:
        return self._step_count

    @property
    def model_signature(self) -> str:
        return self._signature

    @property
    def model_description(self) -> str:
        return self._description

    @property
    def physics(self) -> np.ndarray:
        return self._physics

    @property
    def plugins(self) -> dict[str, Any]:
        return {name: decode_value(value) for name, _, value in self._plugins}

    @property
    def plugin_types(self) -> dict[str, str]:
        """Plugin name -> its type, for the plugins in `plugins`."""
        return {name: type_name for name, type_name, _ in self._plugins}

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SimState is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"SimState is immutable: cannot delete {name!r}")

    # -- comparison, hashing, pickling --------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SimState):
            return NotImplemented
        return (self._step_count == other._step_count and self._signature == other._signature
                and self._description == other._description
                and self._physics.tobytes() == other._physics.tobytes()
                and self._plugins == other._plugins)

    def __hash__(self) -> int:
        return hash((self._signature, self._step_count, self._physics.tobytes()))

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return (SimState.from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        names = ", ".join(name for name, _, _ in self._plugins)
        return (f"<SimState time={self.time!r} step_count={self._step_count} of "
                f"{self._description} ({self._physics.size} values; plugins: {names or 'none'})>")

    # -- bytes --------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The state in the versioned byte format of this module's docstring."""
        cached = self._bytes
        if cached is not None:
            return cached
        parts = [_HEADER.pack(_MAGIC, FORMAT_VERSION, STATE_SPEC, self._step_count),
                 _short_str(self._signature), _short_str(self._description),
                 _U64.pack(self._physics.size),
                 self._physics.astype("<f8", copy=False).tobytes(),
                 _U32.pack(len(self._plugins))]
        for name, type_name, value in self._plugins:
            parts += [_short_str(name), _short_str(type_name), _U64.pack(len(value)), value]
        data = b"".join(parts)
        _set_bytes(self, data)
        return data

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> SimState:
        """The state `to_bytes()` wrote. ValueError naming what is wrong (magic, version, a length
        past the end, a plugin value that does not decode, ...); TypeError for non-bytes."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"SimState.from_bytes takes bytes, got {type(data).__name__}")
        data = bytes(data)
        reader = _Reader(memoryview(data), "header")
        magic = bytes(reader.take(8, "the magic"))
        if magic != _MAGIC:
            raise ValueError(f"bad SimState bytes: they start with {magic!r}, not {_MAGIC!r} "
                             f"(not a SimState)")
        version = reader.u32("the format version")
        if version != FORMAT_VERSION:
            raise ValueError(f"bad SimState bytes: format version {version}, but this mjfast "
                             f"reads version {FORMAT_VERSION}")
        spec = reader.u32("the state spec")
        if spec != STATE_SPEC:
            raise ValueError(f"bad SimState bytes: physics spec {spec:#x}, expected "
                             f"mjSTATE_INTEGRATION ({STATE_SPEC:#x}) of this mujoco")
        step_count = reader.u64("step_count")
        reader.what = "model signature"
        signature = reader.text("the model signature")
        description = reader.text("the model description")
        reader.what = "physics"
        size = reader.u64("the physics length")
        if size < 1:
            raise reader.fail("no physics values (time is the first)")
        raw = reader.take(size * 8, f"{size} physics values")
        physics = np.frombuffer(raw, dtype="<f8").astype(np.float64, copy=False)
        if physics.flags.writeable:  # a big-endian machine's converted copy
            physics.flags.writeable = False
        reader.what = "plugins"
        count = reader.u32("the plugin count")
        plugins = []
        for index in range(count):
            reader.what = f"plugin #{index}"
            name = reader.text("its name")
            type_name = reader.text("its type")
            reader.what = f"plugin {name!r}"
            value = bytes(reader.take(reader.u64("its value's length"), "its value"))
            try:
                decode_value(value)
            except ValueError as error:
                raise ValueError(f"bad SimState bytes: the value of plugin {name!r} does not "
                                 f"decode: {error}") from None
            plugins.append((name, type_name, value))
        reader.what = "the end"
        reader.end()
        state = cls._make(physics, step_count, signature, description, tuple(plugins))
        _set_bytes(state, data)
        return state


def _short_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _U32.pack(len(raw)) + raw


# Slot setters: SimState refuses attribute assignment, so its own code writes through these.
_set_physics = SimState._physics.__set__  # type: ignore[attr-defined]
_set_step_count = SimState._step_count.__set__  # type: ignore[attr-defined]
_set_signature = SimState._signature.__set__  # type: ignore[attr-defined]
_set_description = SimState._description.__set__  # type: ignore[attr-defined]
_set_plugins = SimState._plugins.__set__  # type: ignore[attr-defined]
_set_bytes = SimState._bytes.__set__  # type: ignore[attr-defined]


# -- to and from the compiled core --------------------------------------------------------------

def capture(core: Any) -> SimState:
    """The state of `core` (an EnvCore) at a step boundary."""
    return SimState._make(*core.get_state())


def restore(core: Any, state: SimState, model: mujoco.MjModel) -> None:
    """Puts `state` into `core` (on `model`) at a step boundary (see MujocoEnv.set_state)."""
    if type(state) is not SimState:
        raise TypeError(f"set_state takes a mjfast.SimState (from get_state() or "
                        f"SimState.from_bytes()), got {type(state).__name__}")
    physics = state._physics
    not_finite = np.flatnonzero(~np.isfinite(physics))
    if not_finite.size:
        # A NaN time or qpos would be taken as it is and break the next step's readers (a
        # publisher's stamp, mj_step's own checks): refused before anything changes.
        index = int(not_finite[0])
        raise ValueError(f"set_state: the state's {_physics_entry(model, physics.size, index)} is "
                         f"{float(physics[index])!r}, expected a finite number ({not_finite.size} "
                         f"non-finite value(s) in physics); nothing changed")
    core.set_state(state._physics, state._step_count, state._signature, state._description,
                   state._plugins)



def _physics_entry(model: mujoco.MjModel, size: int, index: int) -> str:
    """Which part of a `physics` array of `size` values `index` is: `time`, `qpos[3]`, ... (or
    `physics[i]` when the size is not this model's)."""
    if size != mujoco.mj_stateSize(model, STATE_SPEC):
        return f"physics[{index}]"
    start = 0
    for bit in range(int(mujoco.mjtState.mjNSTATE)):
        part = 1 << bit
        if not STATE_SPEC & part:
            continue
        length = mujoco.mj_stateSize(model, part)
        if index < start + length:
            name = mujoco.mjtState(part).name.removeprefix("mjSTATE_").lower()
            return "time" if name == "time" else f"{name}[{index - start}]"
        start += length
    return f"physics[{index}]"
