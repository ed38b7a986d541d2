"""`env.control`: the ros2_control-style hardware interface of an env (SPEC §7).

A thin face over the compiled control bridge: snapshots, command staging, update_read and
update_write dispatch all happen in `mjfast._core`. It owns no state of its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ControlInterface"]


class ControlInterface:
    """`read()` the newest completed step; `write(ctrl=, qfrc_applied=, xfrc_applied=)` commands.

    Both are safe from any thread, never wait for a physics step and never hold a lock across
    `mj_step`. The first use arms the bridge (from then on every step publishes a snapshot), which
    pauses stepping once, for one step at most.
    """

    __slots__ = ("read", "write")

    def __init__(self, core: Any) -> None:
        # The compiled methods themselves, bound once: a control loop at kHz pays no Python frame.
        self.read = core.control_read
        self.write = core.control_write
