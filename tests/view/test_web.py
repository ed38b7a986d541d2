"""Tests of the browser viewer (mjfast.web, SPEC §22).

In a real headless browser (Debian's `chromium`, driven by Selenium through `chromedriver`, with
WebGL on SwiftShader): the page draws the model, the plugins' render geometry and a camera's
frame (pixels of a screenshot), its Pause/Step/Reset buttons drive the run (read back through
section 13's calls), two tabs watch at once and closing tabs leaves the run as it was. Without a
browser: the CLI's `--web`, the extra's one line, the port checks, and the geometry (shapes,
colours, poses, the first view) against MuJoCo's own. One browser serves the whole module.

`MJFAST_UPDATE_SCREENSHOT=1` also writes the page's screenshot to docs/web_viewer.png (README).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast
from support import (
    TESTS_DIR,
    finish_python,
    run_python,
    signal_a_thread,
    start_python,
    wait_for,
    wait_until_blocked,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WINDOW = (1024, 768)
DOCS_SCREENSHOT = TESTS_DIR.parent / "docs" / "web_viewer.png"
TIMESTEP = 0.002
CAMERA_SIZE = (160, 120)
# The colours the screenshot is searched for: a big green block in the middle of the first view
# and the magenta sphere that only the plugin's render_callback draws, left of it.
GREEN = (0.1, 0.8, 0.1)
MAGENTA = (1.0, 0.0, 1.0)

SCENE_XML = f"""
<mujoco model="web_scene">
  <option timestep="{TIMESTEP}"/>
  <visual><global offwidth="{CAMERA_SIZE[0]}" offheight="{CAMERA_SIZE[1]}"/></visual>
  <asset>
    <texture name="checker" type="2d" builtin="checker" width="64" height="64"
             rgb1=".25 .25 .27" rgb2=".8 .8 .82"/>
    <material name="floor" texture="checker" texrepeat="3 3"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <camera name="watch" pos="0 -3 1.5" xyaxes="1 0 0 0 .5 1"/>
    <geom name="floor" type="plane" size="3 3 .1" material="floor"/>
    <geom name="block" type="box" pos="0 0 .5" size=".5 .5 .5"
          rgba="{GREEN[0]} {GREEN[1]} {GREEN[2]} 1"/>
    <body name="upper" pos=".9 0 .05">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping=".2"/>
      <geom type="capsule" fromto="0 0 0 0 0 .5" size=".06" rgba=".9 .5 .1 1"/>
      <body name="lower" pos="0 0 .5">
        <joint name="elbow" type="hinge" axis="0 1 0" damping=".2"/>
        <geom type="capsule" fromto="0 0 0 .4 0 0" size=".05" rgba=".2 .4 .9 1"/>
        <geom type="ellipsoid" pos=".45 0 0" size=".08 .05 .05" rgba=".9 .9 .2 1"/>
      </body>
    </body>
    <body name="puck" pos="-.9 .6 .3">
      <freejoint/>
      <geom type="cylinder" size=".12 .06" rgba=".35 .35 .4 1"/>
    </body>
    <geom name="hidden" type="sphere" pos="0 0 1.4" size=".3" group="3" rgba="0 1 1 1"/>
  </worldbody>
</mujoco>
"""

MARKER = "test/WebMarker"


class Marker(mjfast.MujocoPlugin):
    """Draws a magenta sphere from its render_callback: only the viewer's dispatch of the
    plugins' render geometry can put those pixels on the page."""

    def load(self, model: Any, data: Any) -> bool:
        return True

    def render_callback(self, model: Any, data: Any, scene: Any) -> None:
        if scene.ngeom < scene.maxgeom:
            mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE,
                                np.array([0.22, 0.0, 0.0]), np.array([-0.95, 0.0, 0.5]),
                                np.eye(3).ravel(), np.array([*MAGENTA, 1.0], np.float32))
            scene.ngeom += 1


# -- the browser ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (its tabs are what the tests open and close)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("Chromium is not installed: the browser viewer's tests need Debian's "
                    "chromium and chromium-driver (apt-get install chromium chromium-driver; "
                    ".ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # WebGL in software: ANGLE on SwiftShader, which headless Chromium only offers when asked.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                     f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars",
                     "--no-first-run", "--mute-audio"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def running() -> Iterator[tuple[mjfast.MujocoEnv, Any]]:
    """The scene with the marker plugin and a camera, running at real time, and its page on an
    ephemeral loopback port."""
    mjfast.register_plugin(MARKER, Marker)
    env = mjfast.MujocoEnv(SCENE_XML, params={"MujocoPlugins": [{"type": MARKER}]})
    camera = env.open_offscreen_camera("watch")
    camera.enable_frames()
    env.start(1.0)
    viewer = env.launch_web_viewer(port=0)
    try:
        yield env, viewer
    finally:
        viewer.close()
        env.close()
        del camera
        mjfast.unregister_plugin(MARKER)


def open_page(browser: Any, viewer: Any, clients: int = 1) -> None:
    browser.get(viewer.url)
    assert wait_for(lambda: viewer.clients == clients, timeout=60), (
        f"{viewer.clients} browsers connected, expected {clients}")


def field(browser: Any, label: str) -> str:
    """The value of the panel's read-only field `label`."""
    from selenium.webdriver.common.by import By

    return str(browser.find_element(
        By.XPATH, f"//label[normalize-space(.)='{label}']/following::input[1]"
    ).get_attribute("value"))


def button(browser: Any, label: str) -> Any:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.XPATH, f"//button[normalize-space(.)='{label}']")


def page_shows(browser: Any, condition: Any, timeout: float = 30.0) -> bool:
    """wait_for on what the page shows (each look is a round trip to the browser)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except Exception:  # the element is not there yet, or was just re-rendered
            pass
        time.sleep(0.1)
    return bool(condition())


def page_follows_the_run(browser: Any) -> bool:
    """The panel's step count moves on."""
    seen = int(field(browser, "steps"))
    return page_shows(browser, lambda: int(field(browser, "steps")) > seen)


def screenshot(browser: Any) -> tuple[bytes, np.ndarray]:
    """The page as PNG bytes and as an H x W x 3 array."""
    import imageio.v3 as iio  # viser's own dependency

    png = browser.get_screenshot_as_png()
    return png, np.asarray(iio.imread(io.BytesIO(png)))[..., :3]


def close_notifications(browser: Any) -> None:
    """Closes the page's notices (Chromium's "software WebGL" one covers a corner)."""
    browser.execute_script(
        "document.querySelectorAll('[class*=\"Notification-close\"]')"
        ".forEach(button => button.click());")


def coloured(image: np.ndarray, colour: str) -> np.ndarray:
    """The pixels of a colour under the page's lighting (which brightens a face towards white or
    darkens it): told by which channels lead, not by their values."""
    r, g, b = (image[..., i].astype(int) for i in range(3))
    if colour == "green":
        return g - np.maximum(r, b) > 40
    if colour == "magenta":
        return (np.minimum(r, b) - g > 100) & (np.abs(r - b) < 60)
    if colour == "orange":
        return (r - g > 40) & (g - b > 40)
    assert colour == "cyan"
    return np.minimum(g, b) - r > 80


# -- in the browser -------------------------------------------------------------------------------


def test_the_page_draws_the_scene_the_plugins_geometry_and_the_camera(
        browser: Any, running: tuple[mjfast.MujocoEnv, Any], tmp_path: Path) -> None:
    _, viewer = running
    assert viewer.url.startswith("http://127.0.0.1:")  # loopback by default
    open_page(browser, viewer)
    # The panel: the labelled figures, moving with the run.
    assert page_shows(browser, lambda: int(field(browser, "steps")) > 0)
    assert field(browser, "time").endswith(" s")
    assert field(browser, "paused") == "no"
    # The camera's latest frame, as an image in the panel.
    assert page_shows(browser, lambda: browser.execute_script(
        "return Array.from(document.images).some(i => i.naturalWidth === arguments[0] "
        "&& i.naturalHeight === arguments[1]);", *CAMERA_SIZE))
    close_notifications(browser)
    # The first view frames the model as MuJoCo's free camera does: the green block fills the
    # middle of the page, the plugin's magenta sphere is beside it.
    # Looked at until the page has settled: a notice's closing transition can wash the whole
    # canvas out for a moment.
    shot: list[tuple[bytes, np.ndarray]] = []

    def middle_is_green() -> bool:
        shot[:] = [screenshot(browser)]
        height, width, _ = shot[0][1].shape
        middle = shot[0][1][height // 2 - 40:height // 2 + 40, width // 2 - 40:width // 2 + 40]
        return bool(coloured(middle, "green").mean() > 0.9)

    settled = page_shows(browser, middle_is_green, timeout=10.0)
    png, image = shot[0]
    (tmp_path / "web_viewer.png").write_bytes(png)
    width = image.shape[1]
    assert settled, (
        f"the middle of the page is not the green block (see {tmp_path / 'web_viewer.png'})")
    assert coloured(image[:, :width // 2], "magenta").sum() > 500, (
        f"no magenta sphere from the plugin's render_callback (see {tmp_path})")
    scene = image[:, : width * 2 // 3]  # left of the panel (its buttons are blue)
    assert coloured(scene, "orange").sum() > 200, "no orange arm"
    assert coloured(scene, "cyan").sum() < 50, "a geom of group 3 was drawn"
    # The floor's checker texture: dark and light squares side by side in front of the block.
    floor = image[image.shape[0] * 3 // 4:, : width // 2].astype(int)
    grey = (floor.max(axis=2) - floor.min(axis=2)) < 25
    brightness = floor.mean(axis=2)
    dark, light = grey & (brightness < 110), grey & (brightness > 150)
    assert dark.mean() > 0.1 and light.mean() > 0.1, (
        f"no checker floor: {dark.mean():.2f} dark, {light.mean():.2f} light (see {tmp_path})")
    if os.environ.get("MJFAST_UPDATE_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        DOCS_SCREENSHOT.write_bytes(png)


def test_pause_step_and_reset_buttons_drive_the_run(
        browser: Any, running: tuple[mjfast.MujocoEnv, Any]) -> None:
    env, viewer = running
    open_page(browser, viewer)
    assert page_shows(browser, lambda: button(browser, "Pause").is_enabled())
    button(browser, "Pause").click()
    assert wait_for(lambda: env.paused, timeout=10)
    assert env.info()["running"]
    env.get_body_state("upper")  # waits for a step boundary: a step in progress is done
    frozen = env.info()["time"]
    assert not wait_for(lambda: env.info()["time"] != frozen, timeout=0.3)  # time stands still
    assert page_shows(browser, lambda: field(browser, "paused") == "yes")

    steps = env.step_count
    assert page_shows(browser, lambda: button(browser, "Step").is_enabled())
    button(browser, "Step").click()
    assert wait_for(lambda: env.step_count == steps + 1, timeout=10)
    assert not wait_for(lambda: env.step_count != steps + 1, timeout=0.3)  # exactly one
    assert env.info()["time"] == pytest.approx(frozen + TIMESTEP)
    assert env.paused
    assert page_shows(browser, lambda: field(browser, "steps") == str(steps + 1))

    button(browser, "Reset").click()
    assert wait_for(lambda: env.info()["time"] == 0.0 and env.step_count == 0, timeout=10)
    assert env.paused  # a reset keeps the user's pause
    assert page_shows(browser, lambda: field(browser, "time") == "0.000 s")

    assert page_shows(browser, lambda: button(browser, "Resume").is_enabled())
    button(browser, "Resume").click()
    assert wait_for(lambda: not env.paused and env.info()["time"] > 0.05, timeout=10)


def test_two_tabs_watch_at_once_and_closing_tabs_leaves_the_run_alone(
        browser: Any, running: tuple[mjfast.MujocoEnv, Any]) -> None:
    env, viewer = running
    open_page(browser, viewer)
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_page(browser, viewer, clients=2)
    second = browser.current_window_handle
    for tab in (first, second):  # both pages follow the run
        browser.switch_to.window(tab)
        assert page_follows_the_run(browser)

    browser.switch_to.window(second)
    browser.close()
    browser.switch_to.window(first)
    assert wait_for(lambda: viewer.clients == 1, timeout=30)
    info = env.info()
    assert info["running"] and not info["paused"]
    assert wait_for(lambda: env.info()["time"] > info["time"] + 0.1, timeout=10)
    turns = viewer.turns
    assert wait_for(lambda: viewer.turns > turns + 3, timeout=10)  # the other tab still served
    assert page_follows_the_run(browser)

    # The last tab navigated away (Chromium keeps the page in its back/forward cache): no more
    # turns (no hold of stepping, no work), and the run goes on.
    browser.get("about:blank")
    assert wait_for(lambda: viewer.clients == 0, timeout=5)
    turns = viewer.turns
    time_before = env.info()["time"]
    assert wait_for(lambda: env.info()["time"] > time_before + 0.3, timeout=10)
    assert viewer.turns <= turns + 1  # at most the turn that was in progress
    assert viewer.is_running() and env.running and not env.paused
    # Back again: the page connects afresh and follows the run.
    browser.back()
    assert wait_for(lambda: viewer.clients == 1, timeout=60)
    assert page_follows_the_run(browser)


# -- the command line -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read().decode(errors="replace")


CLI_SCRIPT = """
import sys
from mjfast.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("command", ["serve", "view"])
def test_cli_web_serves_the_page_until_sigterm(command: str, tmp_path: Path) -> None:
    if command == "serve":
        pytest.importorskip("zenoh", reason="mjfast serve needs the extra mjfast[server]")
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    port = free_port()
    argv = [command, str(model), "--web", f"127.0.0.1:{port}"]
    if command == "serve":
        argv += ["--listen", f"tcp/127.0.0.1:{free_port()}"]
    # `view --web` is for machines without a display.
    child_env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    child = start_python(CLI_SCRIPT.format(argv=argv), env=child_env)
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        assert line == f"mjfast: browser viewer at http://127.0.0.1:{port}/\n", line
        page = fetch(f"http://127.0.0.1:{port}/")
        assert "<html" in page.lower()
    finally:
        # To a thread but the main one, as the kernel may deliver a signal sent to the process:
        # the command still stops (it used to wait on for ever).
        wait_until_blocked(child.pid)
        signal_a_thread(child.pid, signal.SIGTERM)
        out, err = finish_python(child)
    assert child.returncode == 0, err
    assert "steps" in out  # the statistics table


def test_cli_web_address_defaults_and_bad_values(capsys: pytest.CaptureFixture[str]) -> None:
    from mjfast import cli

    parser = cli.parsing.parser()
    model = "scene.xml"
    assert parser.parse_args(["serve", model, "--web"]).web == ("127.0.0.1", 8080)
    assert parser.parse_args(["view", model, "--web", ":9000"]).web == ("127.0.0.1", 9000)
    assert parser.parse_args(["view", model, "--web", "9001"]).web == ("127.0.0.1", 9001)
    assert parser.parse_args(["serve", model, "--web", "0.0.0.0:80"]).web == ("0.0.0.0", 80)
    assert parser.parse_args(["serve", model, "--web", "[::1]:81"]).web == ("::1", 81)
    assert parser.parse_args(["serve", model]).web is None
    for bad in ("http", "host:", "127.0.0.1:99999", ":-1"):
        assert cli.main(["view", model, "--web", bad]) == 2
        err = capsys.readouterr().err
        assert "[HOST:]PORT" in err and repr(bad) in err


def test_cli_web_on_a_taken_port_is_one_line(tmp_path: Path) -> None:
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_python(CLI_SCRIPT.format(argv=["view", str(model), "--web", f":{port}"]))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"mjfast: error: cannot serve the browser viewer on "
                                    f"127.0.0.1:{port}: ")


# -- without the extra ----------------------------------------------------------------------------

NO_VISER = "import sys; sys.modules['viser'] = None  # as if mjfast[web] were not installed\n"


def test_without_the_extra_import_works_and_launching_names_it() -> None:
    result = run_python(NO_VISER + """
import mjfast
with mjfast.MujocoEnv("<mujoco/>") as env:
    try:
        env.launch_web_viewer(port=0)
    except ImportError as error:
        print(error)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert "mjfast[web]" in result.stdout


@pytest.mark.parametrize("command", ["serve", "view"])
def test_cli_without_the_extra_is_one_line_naming_it(command: str, tmp_path: Path) -> None:
    model = tmp_path / "scene.xml"
    model.write_text(SCENE_XML)
    result = run_python(NO_VISER + CLI_SCRIPT.format(argv=[command, str(model), "--web"]))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("mjfast: error: ") and "mjfast[web]" in result.stderr


# -- the handle -----------------------------------------------------------------------------------


def test_a_taken_port_or_unknown_host_is_an_error_and_changes_nothing() -> None:
    with mjfast.MujocoEnv(SCENE_XML) as env, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            env.launch_web_viewer(port=port)
        with pytest.raises(OSError, match=r"cannot listen on nonexistent\.invalid:0: unknown host"):
            env.launch_web_viewer(port=0, host="nonexistent.invalid")
        with pytest.raises(ValueError, match="port"):
            env.launch_web_viewer(port=70000)
        with pytest.raises(ValueError, match="port"):
            env.launch_web_viewer(port="8080")  # type: ignore[arg-type]
        env.step(3)
        assert env.step_count == 3


def test_closing_the_env_stops_the_page() -> None:
    env = mjfast.MujocoEnv(SCENE_XML)
    viewer = env.launch_web_viewer(port=0)
    assert viewer.is_running()
    assert "<html" in fetch(viewer.url).lower()
    env.close()
    assert viewer.wait(10)
    viewer.close()  # idempotent
    with pytest.raises(OSError):
        fetch(viewer.url)


def ws_attempt(viewer: Any, origin: str | None, subprotocol: bool = True) -> str:
    """Opens a websocket to the viewer as a browser page at `origin` would (None: a client that
    is not a browser), with viser's own subprotocol; "accepted: N bytes" (the first message: the
    scene) or "refused: HTTP <status>"."""
    import asyncio

    import viser
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async def attempt() -> str:
        try:
            async with connect(f"ws://127.0.0.1:{viewer.port}/", origin=origin,
                               subprotocols=[f"viser-v{viser.__version__}"] if subprotocol
                               else None) as socket:
                return f"accepted: {len(await asyncio.wait_for(socket.recv(), 10))} bytes"
        except InvalidStatus as error:
            return f"refused: HTTP {error.response.status_code}"

    return asyncio.run(attempt())


def test_only_the_viewers_own_page_may_connect() -> None:
    """A web page from elsewhere, open in a browser on the same machine, cannot read the scene or
    press the buttons: its websocket carries its own Origin and is refused at the handshake."""
    with mjfast.MujocoEnv(SCENE_XML) as env, env.launch_web_viewer(port=0) as viewer:
        for foreign in ("http://evil.example.com", f"http://evil.example.com:{viewer.port}",
                        f"http://localhost:{viewer.port}",  # another name: another origin
                        f"http://127.0.0.1:{viewer.port + 1}", "null"):
            assert ws_attempt(viewer, foreign) == "refused: HTTP 403", foreign
        own = f"http://127.0.0.1:{viewer.port}"
        for origin in (own, None):  # the page itself, or a client that is not a browser
            result = ws_attempt(viewer, origin)
            assert result.startswith("accepted: "), (origin, result)
        # Not a page of this viser (viser itself would print the version mismatch on stdout).
        assert ws_attempt(viewer, own, subprotocol=False) == "refused: HTTP 403"
        assert not env.paused and env.step_count == 0


def test_a_name_rebound_to_loopback_is_not_the_viewers_own() -> None:
    """DNS rebinding: a page at http://evil.example.com:PORT whose name now resolves to
    127.0.0.1 sends a matching Origin and Host; on loopback the host must be a loopback name."""
    import viser
    from websockets.datastructures import Headers
    from websockets.http11 import Request

    from mjfast.view.web.server import _Guard

    protocol = f"viser-v{viser.__version__}"
    guard = _Guard(None, loopback=True)
    rebound = Request("/", Headers({"Host": "evil.example.com:8080", "Sec-WebSocket-Protocol":
                                    protocol, "Origin": "http://evil.example.com:8080"}))
    assert "loopback" in str(guard.foreign(rebound))
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080"):
        page = Request("/", Headers({"Host": host, "Origin": f"http://{host}",
                                     "Sec-WebSocket-Protocol": protocol}))
        assert guard.foreign(page) is None, host
        other = Request("/", Headers({"Host": host, "Sec-WebSocket-Protocol": "viser-v0.0.1"}))
        assert "subprotocol" in str(guard.foreign(other)), host  # another viser's page
    anywhere = _Guard(None, loopback=False)  # --web 0.0.0.0:PORT: the machine's own names
    assert anywhere.foreign(rebound) is None


def test_the_viewer_never_touches_stdout() -> None:
    """A browser that never answers the close handshake keeps the server's stop waiting for
    seconds; meanwhile the program's prints reach its stdout, and viser's banner and its "Server
    stopped" never do."""
    result = run_python(f"""
import socket, sys, time
import viser
import mjfast
env = mjfast.MujocoEnv({SCENE_XML!r})
viewer = env.launch_web_viewer(port=0)
print("launched", flush=True)
# A client that completes the websocket handshake, then never reads or answers anything.
silent = socket.create_connection(("127.0.0.1", viewer.port))
silent.sendall((
    "GET / HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\n"
    "Sec-WebSocket-Protocol: viser-v%s\\r\\n\\r\\n" % (viewer.port, viser.__version__)).encode())
assert b" 101 " in silent.recv(4096)
env.close()  # the viewer's thread stops the server, waiting on that client
deadline = time.monotonic() + 3.0
count = 0
while time.monotonic() < deadline:
    print("tick", count, flush=True)
    count += 1
    time.sleep(0.02)
assert viewer.wait(30)
viewer.close()
print("end", count, flush=True)
""", timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "launched", result.stdout
    assert lines[-1].startswith("end "), result.stdout
    ticks = int(lines[-1].split()[1])
    assert lines[1:-1] == [f"tick {i}" for i in range(ticks)], result.stdout
    assert "viser" not in result.stdout.lower() and "server stopped" not in result.stdout.lower()
    assert "viser" not in result.stderr.lower(), result.stderr


# -- geometry -------------------------------------------------------------------------------------


def test_the_first_view_is_mujocos_free_camera() -> None:
    from mjfast.view.web.scene import free_camera

    model = mujoco.MjModel.from_xml_string(SCENE_XML)
    camera = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, camera)
    view = free_camera(model)
    np.testing.assert_allclose(view.look_at, camera.lookat)
    assert np.linalg.norm(view.position - view.look_at) == pytest.approx(camera.distance)
    # MuJoCo's camera frame for that azimuth and elevation: its forward axis.
    azimuth, elevation = np.radians(camera.azimuth), np.radians(camera.elevation)
    forward = (view.look_at - view.position) / camera.distance
    np.testing.assert_allclose(forward, [np.cos(elevation) * np.cos(azimuth),
                                         np.cos(elevation) * np.sin(azimuth),
                                         np.sin(elevation)], atol=1e-12)
    assert view.fov == pytest.approx(np.radians(model.vis.global_.fovy))


def test_quaternions_match_mujoco_including_half_turns() -> None:
    from mjfast.view.web.scene import matrices_to_quaternions

    rng = np.random.default_rng(7)
    quats = rng.normal(size=(200, 4))
    axes = np.array([[1, -1, 0], [1, 1, 0], [0, 1, -1], [1, 0, 0], [0, 0, 1], [1, 1, 1]], float)
    half_turns = np.hstack([np.zeros((len(axes), 1)), axes])
    quats = np.vstack([quats, half_turns, [[1, 0, 0, 0]]])
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    matrices = np.zeros((len(quats), 9))
    for quat, matrix in zip(quats, matrices, strict=True):
        mujoco.mju_quat2Mat(matrix, quat)
    result = matrices_to_quaternions(matrices)
    same = np.minimum(np.abs(result - quats).max(axis=1), np.abs(result + quats).max(axis=1))
    assert same.max() < 1e-12


def test_geom_shapes_and_colours_are_the_renderers() -> None:
    from mjfast.view.web.scene import geom_shape

    model = mujoco.MjModel.from_xml_string("""
<mujoco>
  <asset>
    <material name="blue" rgba="0 0 1 1"/>
    <mesh name="tetra" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/>
    <hfield name="hills" nrow="3" ncol="4" size="1 2 .5 .1"/>
  </asset>
  <worldbody>
    <geom name="box" type="box" size=".1 .2 .3" rgba="1 0 0 .5"/>
    <geom name="ball" type="sphere" size=".4" material="blue"/>
    <geom name="tinted" type="sphere" size=".4" material="blue" rgba="0 1 0 1"/>
    <geom name="can" type="cylinder" size=".1 .2"/>
    <geom name="pill" type="capsule" size=".1 .2"/>
    <geom name="egg" type="ellipsoid" size=".1 .2 .3"/>
    <geom name="floor" type="plane" size="0 0 1"/>
    <geom name="tetra" type="mesh" mesh="tetra"/>
    <geom name="hills" type="hfield" hfield="hills"/>
    <geom name="group3" type="sphere" size=".1" group="3"/>
    <geom name="invisible" type="sphere" size=".1" rgba="1 1 1 0"/>
  </worldbody>
</mujoco>""")

    def shape(name: str) -> Any:
        return geom_shape(model, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name))

    box = shape("box")
    assert (box.kind, box.size, box.rgb, box.opacity) == ("box", pytest.approx((.1, .2, .3)),
                                                          (255, 0, 0), 0.5)
    assert shape("ball").rgb == (0, 0, 255)  # the material's colour
    assert shape("tinted").rgb == (0, 255, 0)  # a geom's own rgba wins
    assert (shape("can").kind, shape("can").size) == ("cylinder", pytest.approx((.1, .2)))
    pill = shape("pill")
    assert pill.kind == "mesh"
    assert pill.vertices[:, 2].max() == pytest.approx(0.3, abs=1e-6)  # half-length + radius
    assert np.linalg.norm(pill.vertices[:, :2], axis=1).max() == pytest.approx(0.1, abs=1e-6)
    egg = shape("egg")
    np.testing.assert_allclose(np.abs(egg.vertices).max(axis=0), [.1, .2, .3], atol=1e-6)
    floor = shape("floor")  # infinite: drawn large
    assert floor.kind == "mesh" and np.abs(floor.vertices[:, 0]).max() >= 5.0
    tetra = shape("tetra")
    assert tetra.kind == "mesh" and len(tetra.faces) == 4 and len(tetra.vertices) == 4
    hills = shape("hills")
    assert len(hills.vertices) == 3 * 4 and len(hills.faces) == 2 * 2 * 3
    assert shape("group3") is None and shape("invisible") is None
    # Every face of a closed shape winds counter-clockwise seen from outside.
    for name in ("pill", "egg"):
        vertices, faces = shape(name).vertices, shape(name).faces
        a, b, c = (vertices[faces[:, i]] for i in range(3))
        normals = np.cross(b - a, c - a)
        centres = (a + b + c) / 3
        big = np.linalg.norm(normals, axis=1) > 1e-9
        assert ((normals * centres).sum(axis=1)[big] > 0).all(), name


def test_2d_textures_map_as_mujocos_renderer() -> None:
    """A 2D texture on a plane or box is drawn with its image, at the texture coordinates MuJoCo's
    renderer gives it (render_gl3.c, settexture: s = repeat/2 * x/size - 1/2, t = -repeat/2 *
    y/size - 1/2, per unit of length with texuniform, the size left out on an infinite plane);
    cube maps are not drawn here."""
    from mjfast.view.web.scene import geom_shape

    model = mujoco.MjModel.from_xml_string("""
<mujoco>
  <asset>
    <texture name="checker" type="2d" builtin="checker" width="4" height="6"
             rgb1="1 0 0" rgb2="0 0 1"/>
    <texture name="cube" type="cube" builtin="flat" width="8" height="8" rgb1="0 1 0"/>
    <material name="stretched" texture="checker" texrepeat="8 4"/>
    <material name="uniform" texture="checker" texrepeat="2 3" texuniform="true"/>
    <material name="cubic" texture="cube"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 1 .1" material="stretched"/>
    <geom name="crate" type="box" size=".5 .25 .1" material="uniform" rgba=".5 1 1 1"/>
    <geom name="endless" type="plane" size="0 0 1" material="stretched"/>
    <geom name="cubed" type="box" size=".1 .1 .1" material="cubic"/>
  </worldbody>
</mujoco>""")

    def shape(name: str) -> Any:
        return geom_shape(model, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name))

    image = np.asarray(model.tex_data[:4 * 6 * 3]).reshape(6, 4, 3)
    floor = shape("floor")
    assert floor.kind == "mesh" and floor.double_sided
    np.testing.assert_array_equal(floor.texture, image)
    corner = np.flatnonzero((floor.vertices[:, 0] > 0) & (floor.vertices[:, 1] > 0))[0]
    np.testing.assert_allclose(floor.vertices[corner, :2], [2, 1])
    np.testing.assert_allclose(floor.uv[corner], [8 / 2 - 0.5, -4 / 2 - 0.5])  # 8 and 4 across
    crate = shape("crate")
    assert crate.kind == "mesh" and len(crate.vertices) == 24 and len(crate.faces) == 12
    assert crate.rgb == (128, 255, 255)  # the texture multiplies the geom's colour
    np.testing.assert_allclose(crate.uv, np.stack([  # per unit of length
        2 / 2 * crate.vertices[:, 0] - 0.5, -3 / 2 * crate.vertices[:, 1] - 0.5], axis=1),
        atol=1e-6)
    endless = shape("endless")
    np.testing.assert_allclose(endless.uv, np.stack([
        8 / 2 * endless.vertices[:, 0] - 0.5, -4 / 2 * endless.vertices[:, 1] - 0.5], axis=1),
        rtol=1e-5)
    cubed = shape("cubed")
    assert cubed.kind == "box" and cubed.texture is None


def test_scene_nodes_follow_the_geoms(running: tuple[mjfast.MujocoEnv, Any]) -> None:
    """One node per drawn geom, at the pose of the state the turn copied (no browser needed to
    run a turn by hand)."""
    env, viewer = running
    env.stop()  # the state the turn copies is the one read here
    viewer._turn()
    model, data = env.model, mujoco.MjData(env.model)
    with env.hold_stepping("test"):
        data.qpos[:] = env.data.qpos
    mujoco.mj_kinematics(model, data)
    drawn = [i for i in range(model.ngeom) if model.geom_group[i] < 3]
    assert [i for i, node in enumerate(viewer._nodes) if node is not None] == drawn
    for geom_id in drawn:  # viser itself skips a change within np.allclose's 1e-5
        node = viewer._nodes[geom_id]
        np.testing.assert_allclose(node.position, data.geom_xpos[geom_id], atol=1e-4)
        matrix = np.zeros(9)
        mujoco.mju_quat2Mat(matrix, node.wxyz)
        np.testing.assert_allclose(matrix, data.geom_xmat[geom_id], atol=1e-4)
    assert len(viewer._user_nodes) == 1  # the marker plugin's sphere


def test_a_reload_and_a_geom_edit_remake_the_nodes(running: tuple[mjfast.MujocoEnv, Any]) -> None:
    env, viewer = running
    env.stop()
    env.set_geom_properties("block", rgba=[0.0, 0.0, 1.0, 1.0], size=[0.2, 0.3, 0.4])
    viewer._turn()
    block = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "block")
    assert viewer._shapes[block].rgb == (0, 0, 255)
    assert viewer._shapes[block].size == pytest.approx((0.2, 0.3, 0.4))
    assert tuple(viewer._nodes[block].dimensions) == pytest.approx((0.4, 0.6, 0.8))

    env.reload("""<mujoco><worldbody>
        <camera name="watch" pos="0 -3 1.5" xyaxes="1 0 0 0 .5 1"/>
        <geom name="only" type="sphere" pos="0 0 1" size=".25" rgba="1 1 0 1"/>
    </worldbody></mujoco>""")
    viewer._turn()
    assert [node.name for node in viewer._nodes] == ["/mjfast/geoms/0_only"]
    np.testing.assert_allclose(viewer._nodes[0].position, [0, 0, 1])
    np.testing.assert_allclose(viewer._server.initial_camera.look_at, env.model.stat.center)


def test_a_slow_page_never_holds_the_physics_thread(running: tuple[mjfast.MujocoEnv, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Stepping is held only for the copy: a turn stuck sending (a slow network, a busy event
    loop) leaves the physics thread stepping."""
    import contextlib
    import threading

    env, viewer = running
    sending, release = threading.Event(), threading.Event()

    @contextlib.contextmanager
    def stuck() -> Iterator[None]:
        sending.set()
        release.wait(10)
        yield

    monkeypatch.setattr(viewer._server, "atomic", stuck)
    turn = threading.Thread(target=viewer._turn)
    turn.start()
    try:
        assert sending.wait(10)
        steps = env.step_count
        assert wait_for(lambda: env.step_count > steps + 50, timeout=10)
        assert not env.paused
    finally:
        release.set()
        turn.join(10)
