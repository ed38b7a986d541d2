"""Tests of the viewer (mjfast.view.viewer, SPEC §15) under Xvfb: `mjfast view` shows the scene and
a plugin's render geometry, keys drive the running env (checked through the remote bus), closing
the window ends the run with the statistics, and without a display it is one line naming
DISPLAY. Screenshots come from `xwd` (x11-apps), keys from `xdotool`."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mjfast
from support import finish_python, run_cli, start_python, wait_for

TOOLS = ("Xvfb", "xdotool", "xwd")
SCREEN = (1024, 768)
MAGENTA = (255, 0, 255)

# A lit floor and a small arm, so a working viewer shows more than a blank window.
SCENE_XML = """
<mujoco model="viewer_scene">
  <option timestep="0.002"/>
  <visual><headlight ambient="0.3 0.3 0.3"/></visual>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1=".2 .3 .4" rgb2=".1 .15 .2"
             width="256" height="256"/>
    <material name="grid" texture="grid" texrepeat="4 4"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="1 1 .1" material="grid"/>
    <body name="upper" pos="0 0 .1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping=".5"/>
      <geom type="capsule" fromto="0 0 0 0 0 .3" size=".03" rgba=".8 .6 .2 1"/>
      <body name="lower" pos="0 0 .3">
        <joint name="elbow" type="hinge" axis="0 1 0" damping=".5"/>
        <geom type="capsule" fromto="0 0 0 .25 0 0" size=".03" rgba=".2 .6 .8 1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# A plugin whose render_callback draws a magenta sphere: only the viewer's dispatch of the
# plugins' render geometry can put those pixels on the screen.
MARKER_PLUGIN = """
import mujoco
import numpy as np
import mjfast

class Marker(mjfast.MujocoPlugin):
    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        if scene.ngeom < scene.maxgeom:
            mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE,
                                np.array([0.08, 0.0, 0.0]), np.array([0.0, 0.0, 0.6]),
                                np.eye(3).ravel(), np.array([1, 0, 1, 1], dtype=np.float32))
            scene.ngeom += 1

mjfast.register_plugin("test/Marker", Marker)
"""


# -- the display ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    """An Xvfb server on a display number it picks itself (-displayfd), for this module.

    Once in a CI run the first viewer of the module failed to open the display the server had
    just named, so the fixture waits until a client (xdotool) has connected before handing it out,
    and -noreset keeps the server from resetting, and refusing connections meanwhile, each time
    its last client (a viewer, xdotool, xwd) disconnects."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the viewer tests need {', '.join(missing)} (apt-get install xvfb xdotool "
                    f"x11-apps; .ci/run installs them)")
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24",
         "-nolisten", "tcp", "-noreset"], pass_fds=(write_end,), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        with os.fdopen(read_end) as pipe:
            number = pipe.readline().strip()  # written once the server accepts clients
        assert number, "Xvfb did not start"
        display = f":{number}"
        assert wait_for(lambda: server.poll() is not None
                        or bool(xdotool(display, "getdisplaygeometry")), timeout=20), (
            f"Xvfb on {display} accepts no client")
        assert server.poll() is None, f"Xvfb on {display} exited with {server.returncode}"
        yield display
    finally:
        server.terminate()
        server.wait(10)


def x_env(display: str) -> dict[str, str]:
    return dict(os.environ, DISPLAY=display)


def xdotool(display: str, *args: str) -> str:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=10,
                          env=x_env(display), check=False).stdout


def viewer_window(display: str) -> str | None:
    ids = xdotool(display, "search", "--name", "^MuJoCo").split()
    return ids[0] if ids else None


def press(display: str, *keys: str) -> None:
    window = viewer_window(display)
    assert window is not None, "no viewer window"
    xdotool(display, "windowfocus", "--sync", window, "key", *keys)


def screenshot(display: str) -> np.ndarray:
    """The whole screen as an H x W x 3 uint8 array, from xwd's ZPixmap dump."""
    data = subprocess.run(["xwd", "-root", "-silent"], capture_output=True, timeout=10,
                          env=x_env(display), check=True).stdout
    header = struct.unpack(">25I", data[:100])
    header_size, version, pixmap_format, _, width, height = header[:6]
    byte_order, bits_per_pixel, bytes_per_line, colours = (header[7], header[11], header[12],
                                                           header[19])
    step = bits_per_pixel // 8
    assert version == 7 and pixmap_format == 2 and step in (3, 4), header
    pixels = np.frombuffer(data, np.uint8, count=bytes_per_line * height,
                           offset=header_size + colours * 12).reshape(height, bytes_per_line)
    pixels = pixels[:, :width * step].reshape(height, width, step)
    order = [2, 1, 0] if byte_order == 0 else [step - 3, step - 2, step - 1]  # LSB first: BGR
    return np.ascontiguousarray(pixels[..., order])


def write_png(path: Path, rgb: np.ndarray) -> None:
    """A plain 8-bit RGB PNG (for looking at what the test saw)."""
    height, width, _ = rgb.shape
    rows = b"".join(b"\0" + rgb[y].tobytes() for y in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def magenta_pixels(image: np.ndarray) -> int:
    r, g, b = (image[..., i].astype(int) for i in range(3))
    return int(np.count_nonzero((r > 120) & (b > 120) & (g < 0.35 * np.minimum(r, b))))


def window_region(display: str, image: np.ndarray) -> np.ndarray:
    window = viewer_window(display)
    assert window is not None
    geometry = dict(line.split("=", 1) for line in xdotool(
        display, "getwindowgeometry", "--shell", window).split())
    x, y, w, h = (int(geometry[k]) for k in ("X", "Y", "WIDTH", "HEIGHT"))
    return image[max(y, 0):y + h, max(x, 0):x + w]


# -- no display -----------------------------------------------------------------------------------


def test_view_without_a_display_is_one_line_naming_display(tmp_path: Path) -> None:
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = subprocess.run([sys.executable, "-m", "mjfast", "view", str(model)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "DISPLAY" in result.stderr
    assert result.stderr.startswith("mjfast: error: ")


def test_launch_viewer_without_a_display_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfast.view.viewer import NoDisplayError

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with mjfast.MujocoEnv(SCENE_XML) as env, pytest.raises(NoDisplayError, match="DISPLAY"):
        env.launch_viewer()


@pytest.mark.parametrize("rate_hz", [0, -1.0, float("nan"), float("inf"), "60", True, None])
def test_launch_viewer_refuses_a_bad_rate(monkeypatch: pytest.MonkeyPatch, rate_hz: Any) -> None:
    # inf would sync the window without a pause, holding stepping at every turn.
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with mjfast.MujocoEnv(SCENE_XML) as env, pytest.raises(
            ValueError, match="rate_hz must be a finite positive number of frames per second, "
                              "got "):
        env.launch_viewer(rate_hz=rate_hz)


# -- mjfast view under Xvfb -----------------------------------------------------------------------

VIEW_SCRIPT = """
import sys
{plugin}
from mjfast import cli
sys.exit(cli.main(["view", {model!r}, "--params", {params!r}]))
"""


def test_view_shows_the_scene_and_the_plugins_render_geometry(display: str,
                                                              tmp_path: Path) -> None:
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    params = tmp_path / "params.yaml"
    params.write_text("MujocoPlugins:\n  - type: test/Marker\n")
    child = start_python(VIEW_SCRIPT.format(plugin=MARKER_PLUGIN, model=str(model),
                                            params=str(params)), env={"DISPLAY": display})
    try:
        assert wait_for(lambda: viewer_window(display) is not None or child.poll() is not None,
                        timeout=30), "no window"
        assert child.poll() is None, finish_python(child)
        shots: list[np.ndarray] = []

        def marker_on_screen() -> bool:
            shots.append(screenshot(display))
            return magenta_pixels(shots[-1]) > 200

        shown = wait_for(marker_on_screen, timeout=30)
        write_png(tmp_path / "viewer.png", shots[-1])
        if os.environ.get("MJFAST_VIEWER_SCREENSHOT"):  # how docs/viewer.png is made
            write_png(Path(os.environ["MJFAST_VIEWER_SCREENSHOT"]), shots[-1])
        assert shown, f"no render_callback geometry on screen (see {tmp_path / 'viewer.png'})"
        window = window_region(display, shots[-1])
        assert window.size and window.std() > 15  # a scene, not a blank window
        # The overlay: light text in the window's top-left corner.
        corner = window[:100, :250].max(axis=2)
        assert np.count_nonzero(corner > 200) > 100
        press(display, "ctrl+q")  # the viewer's Quit: closes the window
        out, err = finish_python(child, timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            finish_python(child)
    assert child.returncode == 0, err
    assert "environment" in out and "test/Marker" in out
    assert "render_callback" in out  # dispatched by the viewer, counted in the statistics
    assert "(simulated / running time)" in out  # paused time is not running time


KEYS_SCRIPT = """
import sys
import mjfast
from mjfast.remote import BusServer
env = mjfast.MujocoEnv({model!r})
env.start(1.0)
server = BusServer(env, {endpoint!r})
viewer = env.launch_viewer()
print("ready", flush=True)
viewer.wait()
print("closed", viewer.is_running(), env.running, flush=True)
server.close()
env.close()
"""


def test_keys_pause_step_and_reset_the_running_env(display: str, tmp_path: Path) -> None:
    pytest.importorskip("zenoh", reason="step_count is read through the remote bus (Zenoh)")
    from support import free_port

    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    child = start_python(KEYS_SCRIPT.format(model=str(model), endpoint=endpoint),
                         env={"DISPLAY": display})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        assert wait_for(lambda: viewer_window(display) is not None, timeout=30)
        with mjfast.connect(endpoint, timeout=10) as client:

            def info() -> dict[str, Any]:
                return dict(client.call("/mujoco_server/info"))

            assert wait_for(lambda: info()["step_count"] > 50, timeout=10)
            press(display, "space")
            assert wait_for(lambda: info()["paused"], timeout=10)
            paused_at = info()["step_count"]
            assert not wait_for(lambda: info()["step_count"] != paused_at, timeout=0.3)
            press(display, "Right")
            assert wait_for(lambda: info()["step_count"] == paused_at + 1, timeout=10)
            press(display, "Right", "Right")
            assert wait_for(lambda: info()["step_count"] == paused_at + 3, timeout=10)
            assert info()["paused"]
            press(display, "BackSpace")
            assert wait_for(lambda: info()["step_count"] == 0, timeout=10)
            assert info()["time"] == 0.0 and info()["paused"]
            press(display, "space")
            assert wait_for(lambda: not info()["paused"] and info()["step_count"] > 10,
                            timeout=10)
        press(display, "ctrl+q")
        out, err = finish_python(child, timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            finish_python(child)
    assert child.returncode == 0, err
    assert out.strip() == "closed False True"  # the window ended; the env ran on


HANDLE_SCRIPT = """
import mjfast
env = mjfast.MujocoEnv({model!r})
env.start(None)
viewer = env.launch_viewer(rate_hz=30)
assert viewer.is_running()
assert viewer.wait(1.0) is False
viewer.close()
assert not viewer.is_running()
viewer.close()  # idempotent
before = env.step_count
while env.step_count == before:
    pass
second = env.launch_viewer()
env.close()  # closing the env ends its viewer
assert second.wait(10), "the viewer outlived its env"
print("ok", flush=True)
"""


def test_the_handle_closes_and_the_env_closing_ends_it(display: str, tmp_path: Path) -> None:
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    child = start_python(HANDLE_SCRIPT.format(model=str(model)), env={"DISPLAY": display})
    out, err = finish_python(child, timeout=60)
    assert child.returncode == 0, err
    assert out.strip() == "ok"


TWICE_SCRIPT = """
import mjfast
first_env = mjfast.MujocoEnv({model!r})
other_env = mjfast.MujocoEnv({model!r})
first_env.start(None)
first = first_env.launch_viewer()
for env in (first_env, other_env):  # GLFW is process-wide: any env's second viewer is refused
    try:
        env.launch_viewer()
    except mjfast.LogicError as error:
        print("refused:", error, flush=True)
assert first.is_running()
first.close()
second = other_env.launch_viewer()  # the first has ended: a new one opens
assert second.is_running()
try:
    first_env.launch_viewer()
except mjfast.LogicError:
    print("refused again", flush=True)
other_env.close()  # closing its env ends the viewer ...
assert second.wait(10)
third = first_env.launch_viewer()  # ... and frees the window too
third.close()
first_env.close()
print("ok", flush=True)
"""


def test_a_second_viewer_is_refused_while_one_is_open(display: str, tmp_path: Path) -> None:
    """MuJoCo's passive viewer crashes the process (SIGSEGV in launch_passive) when a second
    window opens while one is open: mjfast refuses the second with LogicError."""
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    child = start_python(TWICE_SCRIPT.format(model=str(model)), env={"DISPLAY": display})
    out, err = finish_python(child, timeout=90)
    assert child.returncode == 0, f"exit {child.returncode}: {err}"
    message = ("refused: a viewer is already open in this process (MuJoCo's viewer runs one "
               "window per process): close it first (viewer.close(), or close its window)")
    assert out.splitlines() == [message, message, "refused again", "ok"]


class _PausingWindow:
    """Stands in for the viewer's window in `mjfast view`: lets the paced run reach 0.3 s of
    simulated time, pauses it (as Space does), then is closed after PAUSED_S of wall time."""

    PAUSED_S = 2.0

    def __init__(self, env: mjfast.MujocoEnv) -> None:
        self.env = env
        self.paused_at: float | None = None

    def wait(self, timeout: float | None = None) -> bool:
        if self.paused_at is None:
            assert wait_for(lambda: self.env.data.time >= 0.3, timeout=30)
            self.env.pause()
            self.paused_at = time.monotonic()
            return False
        time.sleep(timeout or 0.0)  # paused time passing: what the figure must leave out
        return time.monotonic() - self.paused_at >= self.PAUSED_S

    def close(self) -> None:
        pass


def test_view_statistics_leave_paused_time_out_of_the_real_time_factor(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfast.view import viewer

    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    monkeypatch.setattr(viewer, "check_display", lambda: None)
    monkeypatch.setattr(mjfast.MujocoEnv, "launch_viewer", lambda env, **_: _PausingWindow(env))
    code, out, err = run_cli(capsys, "view", str(model), "--realtime", "1")

    assert code == 0, err
    figures = {line[:24].strip(): line[24:].strip() for line in out.splitlines()
               if line.startswith("  ")}
    # Simulated time over the time it ran (about 1, paced at 1.0), not over the whole run's
    # wall time, which holds the pause (about 0.3 s / 2.3 s).
    simulated_s = float(figures["simulated time"].split()[0])
    wall_s = float(figures["wall time"].split()[0])
    running_s = float(figures["running time"].split()[0])
    factor = float(figures["real-time factor"].split("x")[0])
    assert simulated_s >= 0.3 and wall_s >= _PausingWindow.PAUSED_S + 0.3, out
    assert running_s <= wall_s - _PausingWindow.PAUSED_S + 0.3, out  # the pause is left out
    assert factor == pytest.approx(simulated_s / running_s, abs=0.06), out
    assert factor > 1.5 * simulated_s / wall_s, out
    assert figures["real-time factor"].endswith("(simulated / running time)")
