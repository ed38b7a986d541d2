"""Installs mjfast's compiled trampolines in MuJoCo's global mjcb_control / mjcb_passive, and
takes them out again when the last env closes.

They go in through mujoco's own setters with a ctypes function pointer, so that
`mujoco.get_mjcb_control()` reports them; the trampolines themselves live in the compiled core.

Lifetime: each env holds the hooks from construction to close (`hold_hooks` / `release_hooks`).
When the last holder releases them, every slot that still holds mjfast's trampoline is set back
to MuJoCo's default, no callback; a slot that someone else has set meanwhile is left as it is.
What mjfast replaced when it installed them is not restored (it was replaced with a warning in
the log: mjfast owns both hooks while an env exists, SPEC §5).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import mujoco

from mjfast._core_loader import _core

__all__ = ["hold_hooks", "hooks_owned", "install_hooks", "release_hooks"]

_log = logging.getLogger("mjfast.hooks")
_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
# Kept for the life of the process: mujoco holds the pointers these wrap.
_control_pointer = _CALLBACK_TYPE(_core.control_trampoline_address())
_passive_pointer = _CALLBACK_TYPE(_core.passive_trampoline_address())
# name, getter, setter, our pointer, whether the C global holds our trampoline now.
_SLOTS: tuple[tuple[str, Callable[[], Any], Callable[[Any], None], Any, Callable[[], bool]],
              ...] = (
    ("mjcb_control", mujoco.get_mjcb_control, mujoco.set_mjcb_control, _control_pointer,
     _core.control_hook_owned),
    ("mjcb_passive", mujoco.get_mjcb_passive, mujoco.set_mjcb_passive, _passive_pointer,
     _core.passive_hook_owned),
)

# Serialises installing and uninstalling against each other, so that an env constructed on one
# thread while the last one closes on another never finds its hooks taken away after it has
# installed them. Held weakly: an env that fails halfway through construction and is dropped
# does not keep the hooks forever (they go at the next release). Reentrant: an env that was
# dropped without close() is closed by its __del__, which the collector may run on this thread
# in the middle of hold/release; the inner call sees a consistent set and the outer one ends
# with the state its own call asks for. A leaf of the lock order (src/_core/env/env_core.h).
_holders_lock = threading.RLock()
_holders: weakref.WeakSet[object] = weakref.WeakSet()


def hooks_owned() -> bool:
    """Whether both global callbacks hold mjfast's trampolines."""
    return bool(_core.hooks_owned())


def _install() -> None:
    if hooks_owned():
        return
    for name, getter, _, ours, _ in _SLOTS:
        current = getter()
        if current is not None and current is not ours:
            _log.warning("replacing %s=%r with mjfast's trampoline", name, current)
    for _, _, setter, ours, _ in _SLOTS:
        setter(ours)


def install_hooks() -> None:
    """Claims MuJoCo's global control and passive callbacks for mjfast.

    mjfast owns them while an env exists (SPEC §5); a callback someone else installed is
    replaced, and said so in the log. Every env does this itself; call it to take the hooks
    back after something replaced them.
    """
    with _holders_lock:
        _install()


def hold_hooks(owner: object) -> None:
    """Installs the hooks and keeps them installed until `owner` releases them (an env)."""
    with _holders_lock:
        _holders.add(owner)
        _install()


def release_hooks(owner: object) -> None:
    """Ends `owner`'s hold; after the last one, takes mjfast's trampolines out of MuJoCo.

    A slot that no longer holds mjfast's trampoline (a user's own `set_mjcb_control`) is not
    touched.
    """
    with _holders_lock:
        _holders.discard(owner)
        if len(_holders):
            return
        for _, _, setter, _, owned in _SLOTS:
            if owned():
                setter(None)
