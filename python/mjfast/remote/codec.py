"""The wire encoding of the remote bus: msgpack, with one extension type for numpy arrays.

Owns turning a bus message (dicts, lists, strings, numbers, booleans, None, numpy arrays and
numpy scalars) into bytes and back, bit-exact for arrays. It knows nothing of Zenoh or of key
names (`mjfast.remote.keys`); docs/remote.md describes the format for non-Python clients.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack
import numpy as np

__all__ = ["NDARRAY_EXT", "decode", "encode"]

# msgpack extension type code of an ndarray (application codes are 0..127).
NDARRAY_EXT = 1

# The array kinds that travel: bool, signed and unsigned integers, floats, complex numbers.
_KINDS = frozenset("biufc")

# Header flags (the third header item): how the raw bytes map onto the shape.
_C_ORDER = "C"
_F_ORDER = "F"
_SCALAR = "S"  # a numpy scalar (np.float32(1.5)), sent as a 0-d array and given back as a scalar


def _header_and_bytes(array: np.ndarray, flag: str) -> tuple[list[Any], Any]:
    if array.dtype.kind not in _KINDS or array.dtype.fields is not None:
        raise TypeError(f"cannot encode a numpy array of dtype {array.dtype}: only bool, integer, "
                        f"float and complex arrays travel")
    if flag != _SCALAR and array.ndim > 1 and array.flags.f_contiguous \
            and not array.flags.c_contiguous:
        # A Fortran-ordered array travels as the bytes of its (C-ordered) transpose: no copy.
        raw = array.T
        flag = _F_ORDER
    else:
        raw = np.ascontiguousarray(array)  # a copy only for a non-contiguous view
    return [array.dtype.str, list(array.shape), flag], raw


def _default(value: Any) -> msgpack.ExtType:
    if isinstance(value, np.ndarray):
        header, raw = _header_and_bytes(value, _C_ORDER)
    elif isinstance(value, np.generic):
        header, raw = _header_and_bytes(np.asarray(value), _SCALAR)
    else:
        raise TypeError(f"cannot encode a {type(value).__name__} in a bus message: expected "
                        f"dicts, lists, strings, numbers, booleans, None or numpy arrays")
    # One copy of the array's bytes: the header and the raw bytes joined into the ext payload.
    return msgpack.ExtType(NDARRAY_EXT, b"".join((msgpack.packb(header),
                                                  raw.reshape(-1).view(np.uint8))))


def _ext_hook(code: int, payload: bytes) -> Any:
    if code != NDARRAY_EXT:
        return msgpack.ExtType(code, payload)
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(payload)
    dtype_str, shape, flag = unpacker.unpack()
    offset = unpacker.tell()
    dtype = np.dtype(dtype_str)
    if dtype.kind not in _KINDS:
        raise ValueError(f"ndarray extension with dtype {dtype_str!r}: expected bool, integer, "
                         f"float or complex")
    # A view of the received bytes (read-only); no copy.
    flat = np.frombuffer(payload, dtype=dtype, offset=offset)
    if flag == _F_ORDER:
        return flat.reshape(tuple(reversed(shape))).T
    array = flat.reshape(tuple(shape))
    if flag == _SCALAR:
        return array[()]
    return array


class _Packers(threading.local):
    """One packer per thread, kept: msgpack.packb grows a fresh buffer for every message, which
    for a camera frame costs several copies of it."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(default=_default, use_bin_type=True, autoreset=False)


_packers = _Packers()


def encode(message: Any) -> bytes:
    """`message` as msgpack bytes; TypeError naming what cannot travel."""
    packer = _packers.packer
    packer.reset()
    try:
        packer.pack(message)
        return packer.bytes()
    finally:
        packer.reset()


def decode(payload: bytes | bytearray | memoryview) -> Any:
    """The message encoded in `payload`; arrays are read-only views of the received bytes."""
    return msgpack.unpackb(payload, ext_hook=_ext_hook, raw=False, strict_map_key=False,
                           use_list=True)
