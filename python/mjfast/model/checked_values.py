"""The checks of values given to the simulation-control calls (SPEC §13): a mapping, a vector of
finite numbers of one size, a quaternion scaled to unit length. Each raises ValueError naming
what was given and what was expected; nothing here writes to a model or data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["checked_mapping", "finite_vector", "unit_quaternion"]


def checked_mapping(value: object, what: str) -> Mapping[Any, Any]:
    """`value` if it is a mapping, or ValueError naming `what`."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def finite_vector(value: object, size: int, what: str) -> np.ndarray:
    """`value` as a float64 vector of `size` finite numbers, or ValueError naming `what`."""
    if isinstance(value, (str, bytes, bool, Mapping)):
        array = None
    else:
        try:
            array = np.atleast_1d(np.asarray(value, dtype=float)).astype(float, copy=True)
        except (TypeError, ValueError):
            array = None
    if array is None or array.shape != (size,):
        raise ValueError(f"{what}: expected {size} number{'s' if size > 1 else ''}, got {value!r}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: expected finite numbers, got {array.tolist()}")
    return array


def unit_quaternion(quat: np.ndarray, what: str) -> np.ndarray:
    """`quat` (finite) scaled to unit length; ValueError for a zero quaternion.

    Scaled by its largest component first, so that neither huge components (1e308, whose
    squares overflow) nor tiny ones (1e-200, whose squares underflow) lose the orientation.
    """
    scale = float(np.max(np.abs(quat)))
    if scale == 0.0:
        raise ValueError(f"{what}: a zero quaternion has no orientation")
    scaled = quat / scale
    return scaled / float(np.linalg.norm(scaled))
