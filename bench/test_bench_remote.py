"""Benchmarks of the viewer and the remote bus (SPEC §15) against their baselines, in one run.

1. A remote `info` call (`Client.call`, through `mjfast serve`'s BusServer in another process)
   beside a bare Zenoh query to an echo queryable in that same server process: at most 1.5x.
2. A 640x480 RGB camera at 30 Hz (simulated, paced at real time) streamed by CameraPublisher
   through a served env to a subscriber in this process: frames delivered / frames rendered
   (capture ids) at least 0.95.
3. The cost of sending one such frame from the bus (the BusServer's encode + put on the
   publishing thread) beside a bare Zenoh put of the same encoded bytes, with one remote
   subscriber on both keys: at most 1.2x.
4. Physics steps per second under `env.start(None)` with the viewer open beside the same
   without it, both with DISPLAY on an Xvfb server: at least 0.9x (skipped without Xvfb).
All go through conftest.py's `record.measured` (ratios printed in the one table at the end).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zenoh", reason="the remote benchmarks need the extra mjfast[server]")

import zenoh

import mjfast
from mjfast.interop.remote.server import zenoh_config
from mjfast.remote import BusServer, codec
from models import arm7_xml

GROUP_REMOTE_INFO = "remote info round trip"
GROUP_CAMERA_STREAM = "30 Hz 640x480 camera streamed"
GROUP_FRAME_SEND = "640x480 frame encode+send"
GROUP_VIEWER_RATE = "viewer open"

CALLS = 200  # round trips per round
CALL_ROUNDS = 5
STREAM_WINDOW_S = 4.0  # simulated = wall seconds of camera stream per round
STREAM_ROUNDS = 2
FRAMES = 30  # frames sent per round
SEND_ROUNDS = 5
SEND_PERIOD_S = 1 / 30  # frames go out at the camera's rate, not back to back
WINDOW_S = 0.5  # physics-rate window per round
RATE_ROUNDS = 3
WIDTH, HEIGHT = 640, 480
CAMERA = "watch"

pytestmark = pytest.mark.parametrize("bench_model", ["arm7"], indirect=True)


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp/127.0.0.1:{probe.getsockname()[1]}"


SERVER_SCRIPT = """
import signal, sys, threading, zenoh
import mjfast
from mjfast.remote import BusServer
from mjfast.interop.remote.server import zenoh_config

params = {params!r}
env = mjfast.MujocoEnv({model!r}, params=params)
server = BusServer(env, {endpoint!r})
# The baseline in the same process layout: a bare session and an echo queryable.
bare = zenoh.open(zenoh_config("router", {bare_endpoint!r}))
echo = bare.declare_queryable("bench/echo", lambda q: q.reply(q.key_expr, q.payload or b""))
env.start(1.0)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print("ready", flush=True)
stop.wait()
env.stop()
echo.undeclare()
bare.close()
server.close()
env.close()
"""


class ServedEnv:
    """An env served in a child process, with a bare Zenoh echo queryable beside it."""

    def __init__(self, model: str, params: dict[str, Any]) -> None:
        self.endpoint, self.bare_endpoint = free_endpoint(), free_endpoint()
        script = SERVER_SCRIPT.format(params=params, model=model, endpoint=self.endpoint,
                                      bare_endpoint=self.bare_endpoint)
        self.child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                                      stdout=subprocess.PIPE, text=True,
                                      env=dict(os.environ, MUJOCO_GL="egl"))
        assert self.child.stdout is not None
        assert self.child.stdout.readline().strip() == "ready"

    def close(self) -> None:
        self.child.send_signal(signal.SIGTERM)
        try:
            self.child.wait(30)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()
        assert self.child.stdout is not None
        self.child.stdout.close()


# -- 1. a remote service round trip ---------------------------------------------------------------


@pytest.fixture
def served_arm(bench_model: Any) -> Iterator[ServedEnv]:
    served = ServedEnv(arm7_xml(), {})
    yield served
    served.close()


def test_remote_info_round_trip(benchmark: Any, record: Any, bench_model: Any,
                                served_arm: ServedEnv) -> None:
    client = mjfast.connect(served_arm.endpoint, timeout=10)
    bare = zenoh.open(zenoh_config("client", served_arm.bare_endpoint))
    request = codec.encode({})  # what a remote call sends for `info`: an empty request

    def remote_call() -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            info = client.call("/mujoco_server/info")
        elapsed = time.perf_counter() - start
        assert info["model_name"] == "bench_arm7" and info["running"]
        return elapsed / CALLS

    def bare_query() -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            replies = [reply.ok for reply in bare.get("bench/echo", payload=request,
                                                       timeout=5)]
        elapsed = time.perf_counter() - start
        assert replies[0] is not None and replies[0].payload.to_bytes() == request
        return elapsed / CALLS

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_REMOTE_INFO, CALL_ROUNDS,
                                  {"bare_query": bare_query, "remote_info": remote_call})
    finally:
        client.close()
        bare.close()
    benchmark.extra_info.update(remote_info_us=timings["remote_info"].min_s * 1e6,
                                bare_query_us=timings["bare_query"].min_s * 1e6)


# -- 2. a camera streamed ----------------------------------------------------------------------


@pytest.fixture
def served_camera(bench_model: Any) -> Iterator[ServedEnv]:
    params = {
        "mujoco_server": {"cameras": {CAMERA: {"width": WIDTH, "height": HEIGHT,
                                               "rate_hz": 30.0, "planes": ["rgb"]}}},
        "MujocoPlugins": [{"type": "mjfast/CameraPublisher", "name": "frames",
                           "cameras": [CAMERA], "topic": "/bench/frames"}],
    }
    served = ServedEnv(arm7_xml(camera=CAMERA, offscreen=(WIDTH, HEIGHT)), params)
    yield served
    served.close()


def test_camera_stream_delivery(benchmark: Any, record: Any, bench_model: Any,
                                served_camera: ServedEnv) -> None:
    client = mjfast.connect(served_camera.endpoint, timeout=10)
    topic = f"/bench/frames/{CAMERA}/rgb"
    figures: dict[str, float] = {}

    def stream_window() -> float:
        """Seconds per delivered frame over one window; the rendered figure is kept for the
        baseline of the same window."""
        received: list[Any] = []
        lock = threading.Lock()

        def keep(message: Any) -> None:
            with lock:
                received.append((message["capture_id"], message["data"].shape,
                                 message["data"].dtype))

        subscription = client.subscribe(topic, keep)
        time.sleep(0.5)  # the subscription reaches the server; the window starts after it
        with lock:
            received.clear()
        time.sleep(STREAM_WINDOW_S)
        subscription.close()
        with lock:
            frames = list(received)
        assert frames, "no frame arrived"
        assert all(shape == (HEIGHT, WIDTH, 3) and dtype == np.uint8 for _, shape, dtype in frames)
        ids = [capture for capture, _, _ in frames]
        assert ids == sorted(ids)
        rendered = ids[-1] - ids[0] + 1  # the camera's captures are numbered one by one
        figures["rendered"] = STREAM_WINDOW_S / rendered
        return STREAM_WINDOW_S / len(frames)

    try:
        timings = record.measured(benchmark, bench_model.name, GROUP_CAMERA_STREAM,
                                  STREAM_ROUNDS, {"delivered": stream_window,
                                                  "rendered": lambda: figures["rendered"]})
    finally:
        client.close()
    benchmark.extra_info.update(delivered_hz=1 / timings["delivered"].min_s,
                                rendered_hz=1 / timings["rendered"].min_s)


# -- 3. one frame sent ----------------------------------------------------------------------

SUBSCRIBER_SCRIPT = """
import sys, threading, zenoh
import mjfast
from mjfast.interop.remote.server import zenoh_config
client = mjfast.connect({endpoint!r}, timeout=10)
counts = {{"bus": 0, "bare": 0}}
client.subscribe("/bench/frame", lambda m: counts.__setitem__("bus", counts["bus"] + 1))
bare = zenoh.open(zenoh_config("client", {endpoint!r}))
sub = bare.declare_subscriber("bench/bare",
                              lambda s: counts.__setitem__("bare", counts["bare"] + 1))
print("ready", flush=True)
sys.stdin.readline()
print(counts["bus"], counts["bare"], flush=True)
sub.undeclare()
bare.close()
client.close()
"""


def test_frame_encode_and_send(benchmark: Any, record: Any, bench_model: Any) -> None:
    endpoint = free_endpoint()
    env = mjfast.MujocoEnv(arm7_xml())
    server = BusServer(env, endpoint)
    bare = server._session.declare_publisher("bench/bare")  # the same session and link
    rng = np.random.default_rng(3)
    frame = {"camera": CAMERA, "plane": "rgb", "simulation_time_ns": 0, "capture_id": 0,
             "width": WIDTH, "height": HEIGHT, "frame_generation": 1,
             "data": rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)}
    encoded = codec.encode(frame)
    subscriber = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SUBSCRIBER_SCRIPT.format(endpoint=endpoint))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert subscriber.stdout is not None and subscriber.stdin is not None
    sent = {"bus": 0, "bare": 0}
    try:
        assert subscriber.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not server._publisher("/bench/frame").matching_status.matching or \
                not bare.matching_status.matching:
            assert time.monotonic() < deadline, "the subscriber never matched"
            time.sleep(0.01)

        def paced(send: Any, kind: str) -> float:
            spent = 0.0
            for _ in range(FRAMES):
                start = time.perf_counter()
                send()
                spent += time.perf_counter() - start
                sent[kind] += 1
                time.sleep(SEND_PERIOD_S)
            return spent / FRAMES

        timings = record.measured(
            benchmark, bench_model.name, GROUP_FRAME_SEND, SEND_ROUNDS,
            {"bare_put": lambda: paced(lambda: bare.put(encoded), "bare"),
             "bus_send": lambda: paced(lambda: env.bus.publish("/bench/frame", frame), "bus")})
        time.sleep(1.0)  # the last frames in flight
        subscriber.stdin.write("\n")
        subscriber.stdin.flush()
        bus_received, bare_received = map(int, subscriber.stdout.readline().split())
    finally:
        subscriber.kill()
        subscriber.communicate()
        server.close()
        env.close()
    # Every frame arrived both ways: the timings are of frames really sent.
    assert bus_received >= 0.95 * sent["bus"] and bare_received >= 0.95 * sent["bare"]
    benchmark.extra_info.update(bus_send_us=timings["bus_send"].min_s * 1e6,
                                bare_put_us=timings["bare_put"].min_s * 1e6,
                                frame_bytes=len(encoded))


# -- 4. physics rate with the viewer open ---------------------------------------------------------


@pytest.fixture(scope="module")
def xvfb_display() -> Iterator[str]:
    if shutil.which("Xvfb") is None:
        pytest.skip("no Xvfb: the viewer benchmark opens MuJoCo's viewer on a virtual X server "
                    "(apt-get install xvfb; .ci/run installs it)")
    read_end, write_end = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0",
                               "1024x768x24", "-nolisten", "tcp"], pass_fds=(write_end,),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        with os.fdopen(read_end) as pipe:
            number = pipe.readline().strip()
        assert number, "Xvfb did not start"
        yield f":{number}"
    finally:
        if "glfw" in sys.modules:
            # The viewer left GLFW connected to this server: disconnect before it goes, or
            # Xlib's I/O error handler ends the process at exit with status 1.
            sys.modules["glfw"].terminate()
        server.terminate()
        server.wait(10)


def seconds_per_physics_step(env: mjfast.MujocoEnv, with_viewer: bool,
                             frames: list[int]) -> float:
    """Wall time per physics step of env.start(None) over WINDOW_S, with or without the viewer
    open (the number of viewer frames in the window goes to `frames`)."""
    viewer = env.launch_viewer() if with_viewer else None
    env.start(None)
    try:
        time.sleep(0.3)  # settle: the window's first frames
        before = env.statistics()["env"]["steps"]
        drawn = viewer.frames if viewer is not None else 0
        start = time.perf_counter()
        time.sleep(WINDOW_S)
        steps = env.statistics()["env"]["steps"] - before
        elapsed = time.perf_counter() - start
        if viewer is not None:
            frames.append(viewer.frames - drawn)
            assert viewer.is_running()
    finally:
        env.stop()
        if viewer is not None:
            viewer.close()
    assert steps > 0
    return elapsed / steps


def test_physics_rate_with_the_viewer_open(benchmark: Any, record: Any, bench_model: Any,
                                           xvfb_display: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", xvfb_display)  # both sides: the same display, only the window
    env = mjfast.MujocoEnv(bench_model.model)
    frames: list[int] = []
    try:
        timings = record.measured(
            benchmark, bench_model.name, GROUP_VIEWER_RATE, RATE_ROUNDS,
            {"without": lambda: seconds_per_physics_step(env, False, frames),
             "with_viewer": lambda: seconds_per_physics_step(env, True, frames)})
    finally:
        env.close()
    assert min(frames) > 0.5 * WINDOW_S * 30  # the viewer really drew (>= 30 Hz of its 60)
    benchmark.extra_info.update(without_steps_per_s=1 / timings["without"].min_s,
                                with_viewer_steps_per_s=1 / timings["with_viewer"].min_s,
                                viewer_fps=max(frames) / WINDOW_S)
