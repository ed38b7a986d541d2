"""Installs mjfast's compiled trampolines in MuJoCo's global mjcb_control / mjcb_passive.

They go in through mujoco's own setters with a ctypes function pointer, so that
`mujoco.get_mjcb_control()` reports them; the trampolines themselves live in the compiled core.
"""

from __future__ import annotations

import ctypes
import logging

import mujoco

from mjfast._native import _core

__all__ = ["hooks_owned", "install_hooks"]

_log = logging.getLogger("mjfast.hooks")
_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
# Kept for the life of the process: mujoco holds the pointers these wrap.
_control_pointer = _CALLBACK_TYPE(_core.control_trampoline_address())
_passive_pointer = _CALLBACK_TYPE(_core.passive_trampoline_address())


def hooks_owned() -> bool:
    """Whether both global callbacks hold mjfast's trampolines."""
    return bool(_core.hooks_owned())


def install_hooks() -> None:
    """Claims MuJoCo's global control and passive callbacks for mjfast.

    mjfast owns them while an env exists (SPEC §5); a callback someone else installed is
    replaced, and said so in the log.
    """
    if hooks_owned():
        return
    for name, getter in (("mjcb_control", mujoco.get_mjcb_control),
                         ("mjcb_passive", mujoco.get_mjcb_passive)):
        current = getter()
        if current is not None and current not in (_control_pointer, _passive_pointer):
            _log.warning("replacing %s=%r with mjfast's trampoline", name, current)
    mujoco.set_mjcb_control(_control_pointer)
    mujoco.set_mjcb_passive(_passive_pointer)
