"""The wire encoding of the remote bus: msgpack, with one extension type for numpy arrays.

Owns turning a bus message (dicts, lists, strings, numbers, booleans, None, numpy arrays and
numpy scalars) into bytes and back, bit-exact for arrays. It knows nothing of Zenoh or of key
names (`mjfast.interop.remote.keys`); docs/remote.md describes the format for non-Python clients.
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
_FLAGS = frozenset((_C_ORDER, _F_ORDER, _SCALAR))
# The most bytes an array's header may take: a dtype string, up to 64 sizes, a flag.
_MAX_HEADER = 4096
# A thread's packer keeps its buffer between messages; past this size the buffer is let go
# after the message (a one-off 150 MiB array must not stay allocated on every thread that once
# sent one).
_KEEP_BUFFER = 4 << 20


class _Malformed(ValueError):
    """What is wrong with an array (or an extension) in an otherwise readable message."""


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
    elif isinstance(value, int):  # MessagePack's integers are 64-bit
        raise TypeError(f"cannot encode the integer {value} in a bus message: integers travel "
                        f"from -2**63 to 2**64-1")
    else:
        raise TypeError(f"cannot encode a {type(value).__name__} in a bus message: expected "
                        f"dicts, lists, strings, numbers, booleans, None or numpy arrays")
    # One copy of the array's bytes: the header and the raw bytes joined into the ext payload.
    return msgpack.ExtType(NDARRAY_EXT, b"".join((msgpack.packb(header),
                                                  raw.reshape(-1).view(np.uint8))))


def _ext_hook(code: int, payload: bytes) -> Any:
    if code != NDARRAY_EXT:
        raise _Malformed(f"MessagePack extension type {code}: only type {NDARRAY_EXT} (a numpy "
                         f"array) travels")
    # The header is a few dozen bytes at the front: only those go through an Unpacker (whose
    # buffer is capped at 100 MiB by default, and which copies what it is fed), the array's
    # bytes are viewed where they are, whatever their size.
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=_MAX_HEADER)
    unpacker.feed(memoryview(payload)[:_MAX_HEADER])
    try:
        header = unpacker.unpack()
    except msgpack.OutOfData:
        raise _Malformed("ndarray extension without a complete [dtype, shape, order] header"
                         ) from None
    offset = unpacker.tell()
    if not (isinstance(header, list) and len(header) == 3 and isinstance(header[0], str)
            and isinstance(header[1], list) and header[2] in _FLAGS
            and all(type(size) is int and size >= 0 for size in header[1])):
        raise _Malformed(f"ndarray extension header {header!r}: expected [dtype, shape, order] "
                         f"(a dtype string, a list of sizes >= 0, one of {sorted(_FLAGS)})")
    dtype_str, shape, flag = header
    try:
        dtype = np.dtype(dtype_str)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in _KINDS or dtype.fields is not None \
            or dtype.subdtype is not None:
        raise _Malformed(f"ndarray extension with dtype {dtype_str!r}: expected bool, integer, "
                         f"float or complex")
    if flag == _SCALAR and shape:
        raise _Malformed(f"ndarray extension of a scalar with shape {shape}: expected []")
    count = 1
    for size in shape:
        count *= size
    if count * dtype.itemsize != len(payload) - offset:
        raise _Malformed(f"ndarray extension of {dtype_str} {shape}: expected "
                         f"{count * dtype.itemsize} bytes of elements, got {len(payload) - offset}")
    # A view of the received bytes (read-only); no copy.
    flat = np.frombuffer(payload, dtype=dtype, offset=offset, count=count)
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
        if len(packer.getbuffer()) > _KEEP_BUFFER:
            _packers.packer = _Packers().packer
        else:
            packer.reset()


def decode(payload: bytes | bytearray | memoryview) -> Any:
    """The message encoded in `payload`; arrays are read-only views of the received bytes.
    ValueError (or msgpack's own errors, all ValueError) for bytes that are not one message."""
    # msgpack caps each string, bin, ext, array and map at the payload's own length (no more
    # can be in it): any size goes, and a forged length cannot allocate past the payload.
    try:
        return msgpack.unpackb(payload, ext_hook=_ext_hook, raw=False, strict_map_key=False,
                               use_list=True)
    except _Malformed as error:
        raise ValueError(str(error)) from None
    except (ValueError, TypeError) as error:  # msgpack's own (FormatError, StackError, ...)
        what = str(error) or type(error).__name__  # some of msgpack's have no text
        raise ValueError(f"undecodable message: {what} (expected one MessagePack value; "
                         f"docs/remote.md describes the format)") from None

