"""The interactive viewer (SPEC §15): MuJoCo's own passive viewer on a running env.

Owns the viewer window's thread of sync turns: at the viewer's rate it holds stepping at a step
boundary just long enough to copy the state into the viewer's own model and data and to collect
the plugins' `render_callback` geometry into the viewer's user scene, so the window never reads
`env.data` mid-step. Keys become section 13's calls (Space pause/resume, Right one step while
paused, Backspace reset). It does not step the env (its physics thread does) and does not own the
env's lifetime; closing the window ends the viewer, and `mjfast view` stops the env then.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers
import os
import queue
import threading
import time
from typing import Any

import mujoco

from mjfast._waiting import wait_interruptibly
from mjfast.errors import LogicError, MjfastError

__all__ = ["DEFAULT_RATE_HZ", "NoDisplayError", "Viewer", "check_display", "launch_viewer"]

DEFAULT_RATE_HZ = 60.0
# GLFW key codes (glfw.KEY_*), which MuJoCo's viewer hands to key_callback.
KEY_SPACE = 32
KEY_RIGHT = 262
KEY_BACKSPACE = 259
# How long the window's own thread may take to end once the window is closed.
_UI_EXIT_TIMEOUT_S = 10.0

_log = logging.getLogger("mjfast.viewer")

# The one viewer window of this process. MuJoCo's passive viewer runs GLFW, which is
# process-wide: a second `launch_passive` while a window is open crashes the process (bare
# MuJoCo too), so a second viewer is refused until the first has ended, whatever env it is on.
_window_lock = threading.Lock()
_window_owner: Viewer | None = None


def _claim_window(viewer: Viewer) -> None:
    """Makes `viewer` the process's viewer, or LogicError while another one's window is open."""
    global _window_owner
    with _window_lock:
        owner = _window_owner
        if owner is not None and not (owner._ended.is_set() and owner._window_gone()):
            raise LogicError(
                "a viewer is already open in this process (MuJoCo's viewer runs one window per "
                "process): close it first (viewer.close(), or close its window)")
        _window_owner = viewer


def _release_window(viewer: Viewer) -> None:
    global _window_owner
    with _window_lock:
        if _window_owner is viewer:
            _window_owner = None


class NoDisplayError(RuntimeError):
    """No display to open a window on (DISPLAY unset, or the X server refused)."""


def check_display() -> None:
    """NoDisplayError, naming DISPLAY, when there is no display to open a window on."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        raise NoDisplayError("no display: DISPLAY is not set (the viewer needs an X server; "
                             "under CI run it inside Xvfb, e.g. xvfb-run)")


def _passive_viewer() -> Any:
    try:
        import mujoco.viewer as passive
    except (ImportError, RuntimeError) as error:  # GLFW missing, or its library not loadable
        raise NoDisplayError(f"cannot open MuJoCo's viewer on DISPLAY="
                             f"{os.environ.get('DISPLAY', '')!r}: {error}") from error
    return passive


class Viewer:
    """A viewer window on `env` (use `env.launch_viewer()`); `is_running()`, `close()`, `wait()`."""

    def __init__(self, env: Any, *, rate_hz: float = DEFAULT_RATE_HZ,
                 show_ui: bool = False) -> None:
        if (isinstance(rate_hz, bool) or not isinstance(rate_hz, numbers.Real)
                or not math.isfinite(rate_hz) or not rate_hz > 0):
            # inf would sync without pause, holding stepping at every turn
            raise ValueError(f"rate_hz must be a finite positive number of frames per second, "
                             f"got {rate_hz!r}")
        check_display()
        self._passive = _passive_viewer()
        self._env = env
        self._period = 1.0 / rate_hz
        self._show_ui = show_ui
        self._keys: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._ended = threading.Event()
        self.frames = 0  # sync turns done (statistics and tests)
        self._handle: Any = None
        self._ui_thread: threading.Thread | None = None
        _claim_window(self)  # LogicError while another viewer's window is open
        try:
            self._open_window()  # on the caller's thread: a failure to open raises from here
        except BaseException:
            self._close_window()
            _release_window(self)
            raise
        self._thread = threading.Thread(target=self._run, name="mjfast-viewer", daemon=True)
        self._thread.start()

    # -- the window -----------------------------------------------------------------------------

    def _open_window(self) -> None:
        env = self._env
        # The viewer's own model and data: the window reads these, never the env's.
        with env.hold_stepping("launch_viewer"):
            self._generation = env.model_generation
            self._model = copy.copy(env.model)
            self._data = mujoco.MjData(self._model)
            mujoco.mj_copyData(self._data, self._model, env.data)
        before = set(threading.enumerate())
        try:
            self._handle = self._passive.launch_passive(
                self._model, self._data, key_callback=self._keys.put,
                show_left_ui=self._show_ui, show_right_ui=self._show_ui)
        except Exception as error:  # GLFW could not initialise or make the window
            raise NoDisplayError(f"cannot open a window on DISPLAY="
                                 f"{os.environ.get('DISPLAY', '')!r}: {error}") from error
        # The window's render loop runs on the thread launch_passive started.
        started = [t for t in threading.enumerate() if t not in before]
        self._ui_thread = started[0] if started else None

    def _close_window(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        handle.close()
        # The render loop must be gone before GLFW is terminated at exit, or the process can
        # crash on the way out. (Thread.join does not see it end; polling does.)
        deadline = time.monotonic() + _UI_EXIT_TIMEOUT_S
        while (self._ui_thread is not None and self._ui_thread.is_alive()
               and time.monotonic() < deadline):
            time.sleep(0.01)

    # -- the sync thread ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            next_turn = time.monotonic()
            while not self._stop.is_set():
                handle = self._handle
                if handle is None or not handle.is_running() or not self._window_alive():
                    break
                self._handle_keys()
                with handle.lock():
                    outcome = self._sync_turn(handle)
                if outcome == "closed":
                    break
                if outcome == "reloaded":
                    # A reload swapped the model: a new window on the new model.
                    self._close_window()
                    self._open_window()
                    continue
                # The window's turn: MuJoCo hands the texts over in its render loop, under the
                # mutex, so this returns once the loop has picked up the synced frame.
                handle.set_texts(self._overlay())
                next_turn += self._period
                now = time.monotonic()
                if next_turn < now:  # late (a long reload): no burst of turns to catch up
                    next_turn = now
                self._hold_window(handle, next_turn)
        except Exception:
            _log.exception("the viewer stopped on an error")
        finally:
            self._close_window()
            if self._window_gone():
                _release_window(self)
            else:  # stays claimed: _claim_window frees it once the window's thread has ended
                _log.warning("the viewer's window thread did not end within %.0f s",
                             _UI_EXIT_TIMEOUT_S)
            self._ended.set()

    def _hold_window(self, handle: Any, until: float) -> None:
        """Holds the viewer's mutex until `until`, so the window renders once per turn.

        MuJoCo's window renders in a loop that only vsync slows down; without vsync (Xvfb, some
        remote displays) it would render as fast as the CPU allows and take the cores from the
        physics thread. Each pass of that loop takes the mutex; held here between turns, the
        loop renders the frame it has just picked up and then waits for the next turn.
        """
        mutex = handle.lock()
        mutex.__enter__()
        try:
            self._stop.wait(max(0.0, until - time.monotonic()))
        finally:
            mutex.__exit__(None, None, None)

    def _window_alive(self) -> bool:
        return self._ui_thread is None or self._ui_thread.is_alive()

    def _window_gone(self) -> bool:
        """No window of this viewer is open or ending: another may be opened."""
        return self._handle is None and (self._ui_thread is None
                                         or not self._ui_thread.is_alive())

    def _sync_turn(self, handle: Any) -> str:
        """One frame, with the viewer's mutex held: copy the state and the plugins' geometry in.
        Returns "synced", "reloaded" (the env has a new model) or "closed" (the env is)."""
        env = self._env
        try:
            with env.hold_stepping("viewer"):
                if env.model_generation != self._generation:
                    return "reloaded"
                self._copy_state(handle)
        except LogicError:
            return "closed"
        handle.sync()
        self.frames += 1
        return "synced"

    def _copy_state(self, handle: Any) -> None:
        """With stepping held: the env's state, its geoms' size and colour (set_geom_properties
        changes them), and the plugins' render geometry."""
        env, model = self._env, self._model
        mujoco.mj_copyData(self._data, model, env.data)
        model.geom_rgba[:] = env.model.geom_rgba
        model.geom_size[:] = env.model.geom_size
        # The caller holds the viewer's mutex: the window reads the user scene when it renders.
        scene = handle.user_scn
        scene.ngeom = 0
        try:
            env.host.dispatch_render(scene=scene)
        except MjfastError as error:
            # The host has marked the plugin failed; the others keep drawing.
            _log.warning("render_callback failed in the viewer: %s", error)

    def _overlay(self) -> tuple[int, int, str, str]:
        info = self._env.info()
        state = "paused" if info["paused"] else ("running" if info["running"] else "stopped")
        return (int(mujoco.mjtFontScale.mjFONTSCALE_150), int(mujoco.mjtGridPos.mjGRID_TOPLEFT),
                "time\nstep_count\nreal-time factor\nstate",
                f"{self._data.time:.3f} s\n{info['step_count']}\n"
                f"{info['measured_realtime_factor']:.2f}x\n{state}")

    def _handle_keys(self) -> None:
        """Keys from the window's thread, run here: a step waits for the physics thread, which
        the window's render loop must never do."""
        env = self._env
        while True:
            try:
                key = self._keys.get_nowait()
            except queue.Empty:
                return
            try:
                if key == KEY_SPACE:
                    if env.paused:
                        env.resume()
                    else:
                        env.pause()
                elif key == KEY_RIGHT and (env.paused or not env.running):
                    env.step(1)
                elif key == KEY_BACKSPACE:
                    env.reset()
            except Exception as error:  # e.g. a plugin failing in that step: shown, not fatal
                _log.warning("viewer key %d: %s: %s", key, type(error).__name__, error)

    # -- the handle ----------------------------------------------------------------------------

    def is_running(self) -> bool:
        """True until the window is closed (by the user or `close()`) or the env is closed."""
        return not self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the viewer has ended; returns whether it has (Ctrl-C gets through)."""
        return wait_interruptibly(self._ended, timeout)

    def close(self) -> None:
        """Closes the window; idempotent. The env keeps running."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._ended.wait(_UI_EXIT_TIMEOUT_S + 5.0)

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<mjfast.Viewer {'open' if self.is_running() else 'closed'}>"


def launch_viewer(env: Any, *, rate_hz: float = DEFAULT_RATE_HZ, show_ui: bool = False) -> Viewer:
    """Opens MuJoCo's viewer on `env` (see `Viewer`); NoDisplayError without a display."""
    return Viewer(env, rate_hz=rate_hz, show_ui=show_ui)
