"""Benchmark of the browser viewer (SPEC §22) against the same run without a browser, in one run.

The page's load time: from the start of the navigation to the control panel's Pause button in
the page, in headless Chromium drawing WebGL in software (SwiftShader, the slowest case: no GPU)
at 1024x768, on the humanoid running at real time; the median of PAGE_LOADS loads after a warm-up
load is at most PANEL_BOUND_S (5 s).

Physics steps per second under `env.start(None)` on the humanoid while one headless Chromium
shows the env's web viewer (poses at 30 Hz: a short hold at a step boundary per turn, the rest on
the viewer's own thread), beside the same env with the viewer serving and no browser connected
(the tab navigated away): at least 0.9x. Both sides alternate round by round through
conftest.py's `record.measured`. The browser draws WebGL in software (SwiftShader) on the same
machine, so, like the MuJoCo viewer's figure, the ratio is gated only where a core is free for it
(MJFAST_BENCH_GATE_PARALLEL=1). Needs Debian's chromium and chromium-driver (skipped without).
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mjfast

pytest.importorskip("viser", reason="the web viewer benchmark needs the extra mjfast[web]")
pytest.importorskip("selenium", reason="the web viewer benchmark drives Chromium with Selenium")

GROUP_WEB_RATE = "web viewer watched"
WINDOW_S = 0.5  # physics-rate window per round
SETTLE_S = 0.3  # after start(): the first turns, the pacing's first figures
RATE_ROUNDS = 10
BROWSER_WINDOW = (400, 300)  # small: the page is drawn in software on the same cores
PAGE_WINDOW = (1024, 768)  # the page-load figure: a usual window, the panel beside the scene
PAGE_LOADS = 5  # timed page loads, after one warm-up load
PANEL_BOUND_S = 5.0
# Run in the page before its own scripts: the time (ms since the navigation started) at which a
# button labelled Pause first appears.
PANEL_WATCH = """
new MutationObserver((changes, observer) => {
  for (const button of document.querySelectorAll("button")) {
    if (button.textContent.trim() === "Pause") {
      window.mjfastPanelMs = performance.now();
      observer.disconnect();
      return;
    }
  }
}).observe(document, {childList: true, subtree: true});
"""

pytestmark = pytest.mark.parametrize("bench_model", ["humanoid"], indirect=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no Chromium: the web viewer benchmark needs Debian's chromium and "
                    "chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                     f"--window-size={BROWSER_WINDOW[0]},{BROWSER_WINDOW[1]}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def seconds_per_physics_step(env: mjfast.MujocoEnv, viewer: Any, browser: Any, watched: bool,
                             turns: list[int]) -> float:
    """Wall time per physics step of env.start(None) over WINDOW_S, with the viewer's page open
    in the browser or not (the viewer's turns in the window go to `turns`)."""
    browser.get(viewer.url if watched else "about:blank")
    wait_until(lambda: viewer.clients == (1 if watched else 0), 60,
               f"{viewer.clients} browsers connected")
    env.start(None)
    try:
        time.sleep(SETTLE_S)
        before, turned = env.statistics()["env"]["steps"], viewer.turns
        start = time.perf_counter()
        time.sleep(WINDOW_S)
        steps = env.statistics()["env"]["steps"] - before
        elapsed = time.perf_counter() - start
        if watched:
            turns.append(viewer.turns - turned)
    finally:
        env.stop()
    assert steps > 0
    return elapsed / steps


def test_physics_rate_with_a_browser_watching(benchmark: Any, record: Any, bench_model: Any,
                                              browser: Any) -> None:
    env = mjfast.MujocoEnv(bench_model.model)
    viewer = env.launch_web_viewer(port=0)
    turns: list[int] = []
    try:
        timings = record.measured(
            benchmark, bench_model.name, GROUP_WEB_RATE, RATE_ROUNDS,
            {"without": lambda: seconds_per_physics_step(env, viewer, browser, False, turns),
             "with_browser": lambda: seconds_per_physics_step(env, viewer, browser, True,
                                                              turns)})
    finally:
        browser.get("about:blank")
        viewer.close()
        env.close()
    # The page really followed the run (at least half of its 30 Hz).
    assert min(turns) > 0.5 * WINDOW_S * 30, turns
    benchmark.extra_info.update(without_steps_per_s=1 / timings["without"].min_s,
                                with_browser_steps_per_s=1 / timings["with_browser"].min_s,
                                turns_per_window=min(turns))


def seconds_to_panel(browser: Any, viewer: Any) -> float:
    """One load of the page, from a blank tab: seconds from the navigation's start to the panel's
    Pause button in the page (timed by the page itself, so the polling here adds nothing)."""
    browser.get("about:blank")
    wait_until(lambda: viewer.clients == 0, 30, f"{viewer.clients} browsers still connected")
    browser.get(viewer.url)
    deadline = time.monotonic() + 60
    while (panel_ms := browser.execute_script("return window.mjfastPanelMs ?? null")) is None:
        assert time.monotonic() < deadline, "the panel never appeared"
        time.sleep(0.05)
    return float(panel_ms) / 1000


def test_page_load_to_panel(benchmark: Any, bench_model: Any, browser: Any) -> None:
    env = mjfast.MujocoEnv(bench_model.model)
    env.start(1.0)
    viewer = env.launch_web_viewer(port=0)
    browser.set_window_size(*PAGE_WINDOW)
    watch = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                    {"source": PANEL_WATCH})
    disabled = bool(getattr(benchmark, "disabled", False))
    try:
        def loads() -> list[float]:
            return [seconds_to_panel(browser, viewer)
                    for _ in range(1 + (1 if disabled else PAGE_LOADS))][1:]

        benchmark.group = f"{bench_model.name}: web viewer page load"
        seconds = benchmark.pedantic(loads, rounds=1, iterations=1)
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                                {"identifier": watch["identifier"]})
        browser.get("about:blank")
        browser.set_window_size(*BROWSER_WINDOW)
        viewer.close()
        env.close()
    median = statistics.median(seconds)
    benchmark.extra_info.update(panel_s=seconds, panel_median_s=median)
    loads = ", ".join(f"{s:.2f}" for s in seconds)
    assert median <= PANEL_BOUND_S, (
        f"the panel took {median:.2f} s to appear (median of {loads} s): more than "
        f"{PANEL_BOUND_S} s")
