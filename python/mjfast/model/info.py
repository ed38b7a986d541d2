"""What `env.info()` says about a model (SPEC §13): its name, and where it came from; and the one
test of whether a string given as a model is MJCF text or a file's path.
"""

from __future__ import annotations

import os

import mujoco

__all__ = ["is_mjcf_string", "model_name", "source_label"]


def model_name(model: mujoco.MjModel) -> str:
    """The model's name (MJCF `<mujoco model=...>`): the first string of its names buffer."""
    return bytes(model.names).split(b"\0", 1)[0].decode()


def is_mjcf_string(model: object) -> bool:
    """Whether `model`, a str or path given where a model is taken, is MJCF text rather than a
    file's path: the one place that decides (the env, env.info() and mjfast.interop.ray ask
    here)."""
    return isinstance(model, str) and model.lstrip().startswith("<")


def source_label(model: object) -> str:
    """How env.info() names where a model came from: the path as given, or what it was."""
    if isinstance(model, mujoco.MjModel):
        return "<MjModel>"
    return "<string>" if is_mjcf_string(model) else os.fspath(model)  # type: ignore[arg-type]
