"""Recording and replay (SPEC §20): `env.record()`, `mjfast.open_recording()`, `mjfast replay`.

Every bag is read with independent readers too (rosbags' rosbag2 reader with its typestore, and
the `mcap` package with mcap-ros2-support's decoder), never only with mjfast's; replay is checked
bit for bit against what the live run did."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from time import time_ns
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")
mcap_reader = pytest.importorskip("mcap.reader")
mcap_ros2_decoder = pytest.importorskip("mcap_ros2.decoder")

import mjfast  # noqa: E402
from mjfast.errors import LogicError  # noqa: E402
from mjfast.model.state import SimState, decode_value  # noqa: E402
from mjfast.recording import replay  # noqa: E402
from support import (  # noqa: E402
    MOCAP_XML,
    TESTS_DIR,
    arm_xml,
    plugins_param,
    run_cli,
    run_python,
    wait_for,
)

JOINT_STATES = "/mujoco_server/JointStatePublisher/joint_states"
COMMANDS = "/mujoco_server/ForwardCommand/commands"


def recorded_params() -> dict[str, Any]:
    return {"mujoco_server": plugins_param(
        {"type": "mjfast/JointStatePublisher", "rate_hz": 100},
        {"type": "mjfast/ForwardCommand", "actuators": ["m0", "m1"]})}


@pytest.fixture
def make_env() -> Any:
    envs: list[Any] = []

    def make(params: dict[str, Any] | None = None) -> Any:
        env = mjfast.MujocoEnv(arm_xml(), params=recorded_params() if params is None else params)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def read_with_rosbags(path: Path) -> dict[str, list[tuple[int, Any]]]:
    """topic -> [(timestamp, message)] through rosbags' rosbag2 reader and its Jazzy typestore."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    out: dict[str, list[tuple[int, Any]]] = {}
    with Reader(path) as reader:
        for connection in reader.connections:
            out.setdefault(connection.topic, [])
        for connection, timestamp, raw in reader.messages():
            out[connection.topic].append(
                (timestamp, store.deserialize_cdr(raw, connection.msgtype)))
    return out


def read_with_mcap(path: Path) -> dict[str, list[tuple[int, Any]]]:
    """topic -> [(log time, message)] through the mcap package's ROS 2 decoder."""
    (file,) = path.glob("*.mcap")
    out: dict[str, list[tuple[int, Any]]] = {}
    with file.open("rb") as stream:
        reader = mcap_reader.make_reader(
            stream, decoder_factories=[mcap_ros2_decoder.DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages():
            out.setdefault(channel.topic, []).append((message.log_time, decoded))
    return out


def run_with_commands(env: Any, live: dict[int, tuple[float, np.ndarray, np.ndarray]]) -> None:
    """Steps `env` with control writes, section-13 calls through the bus and a command publish,
    noting (time, qpos, qvel) at some step counts in `live`."""
    def note() -> None:
        live[len(live)] = (float(env.data.time), env.data.qpos.copy(), env.data.qvel.copy())

    env.step(37)
    env.control.write(ctrl=np.full(7, 0.3))
    env.step(120)
    note()
    env.bus.call("/mujoco_server/set_joint_state", {"positions": {"j2": 0.7},
                                                   "velocities": {"j3": -1.5}})
    env.step(1)
    note()
    env.control.write(qfrc_applied=np.linspace(-0.2, 0.2, env.model.nv))
    env.step(251)
    note()
    env.bus.publish_inbound(COMMANDS, {"data": np.array([-0.5, 0.25])})  # ForwardCommand writes
    env.control.write(ctrl=np.full(7, -0.1))  # at the same boundary: the step applies this one
    env.step(300)
    note()
    env.bus.call("/mujoco_server/reset", {"keyframe": "home", "keep_time": True})
    env.step(88)
    note()


# -- what a bag holds --------------------------------------------------------------------------

def test_the_bag_holds_what_the_run_published_read_by_independent_readers(
        make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    live: list[Any] = []
    env.bus.subscribe(JOINT_STATES, live.append)
    started_ns = time_ns()
    recording = env.record(tmp_path / "bag")
    run_with_commands(env, {})
    recording.stop()
    stopped_ns = time_ns()
    assert not recording.recording
    bag = tmp_path / "bag"
    assert sorted(p.name for p in bag.iterdir()) == ["bag.mcap", "metadata.yaml"]

    by_rosbags = read_with_rosbags(bag)
    by_mcap = read_with_mcap(bag)
    metadata = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["ros_distro"] == "jazzy"
    # ros2 bag info shows when it was recorded (the run starts at simulated time 0).
    offset = metadata["starting_time"]["nanoseconds_since_epoch"]
    assert started_ns <= offset <= stopped_ns
    for topics in (by_rosbags, by_mcap):
        assert {JOINT_STATES, "/clock", "/mjfast/commands", "/mjfast/state"} <= set(topics)
        recorded = topics[JOINT_STATES]
        assert len(recorded) == len(live) > 50
        for (stamp_ns, message), seen in zip(recorded, live, strict=True):
            assert list(message.name) == list(seen["name"])
            np.testing.assert_array_equal(np.asarray(message.position), seen["position"])
            np.testing.assert_array_equal(np.asarray(message.velocity), seen["velocity"])
            stamp = message.header.stamp
            assert stamp.sec * 10**9 + stamp.nanosec == round(seen["time"] * 1e9)
            # Log time: the wall clock at the start plus the simulated time since then.
            assert stamp_ns - round(seen["time"] * 1e9) == offset
        clock = [(t, m.clock.sec * 10**9 + m.clock.nanosec) for t, m in topics["/clock"]]
        assert len(clock) > 10
        assert all(t - simulated == offset for t, simulated in clock)
    # mjfast's reader sees the same.
    opened = mjfast.open_recording(bag)
    assert opened.topics()[JOINT_STATES] == "sensor_msgs/msg/JointState"
    mine = opened.messages(JOINT_STATES)
    assert [round(t * 1e9) for t, _ in mine] == [round(seen["time"] * 1e9) for seen in live]
    np.testing.assert_array_equal(mine[-1][1]["position"], live[-1]["position"])

    custom = metadata["custom_data"]
    assert custom["mjfast.mjcf"] == arm_xml()
    assert custom["mujoco.version"] == "4.0.0"
    assert custom["mjfast.version"] == mjfast.__version__
    assert "JointStatePublisher" in custom["mjfast.params"]
    assert metadata["relative_file_paths"] == ["bag.mcap"]
    assert metadata["storage_identifier"] == "mcap"


def test_states_and_commands_are_uint8_multi_arrays_with_state_bytes(
        make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    recording = env.record(tmp_path / "bag", state_every=100)
    env.step(450)
    env.control.write(ctrl=np.full(7, 0.1))
    env.step(60)
    recording.stop()
    topics = read_with_rosbags(tmp_path / "bag")
    states = topics["/mjfast/state"]
    # The first, one every 100 steps, and the last (where stop() ended it).
    assert len(states) == 1 + 5 + 1
    decoded = [SimState.from_bytes(bytes(m.data)) for _, m in states]
    assert [s.step_count for s in decoded] == [0, 100, 200, 300, 400, 500, 510]
    assert [ts - states[0][0] for ts, _ in states] == [round(s.time * 1e9) for s in decoded]
    assert len(topics["/mjfast/commands"]) == 1
    (_, command), = topics["/mjfast/commands"]
    assert type(command).__name__ == "std_msgs__msg__UInt8MultiArray"
    entry = decode_value(bytes(command.data))
    assert entry["kind"] == "control" and entry["step"] == 450
    np.testing.assert_array_equal(entry["fields"]["ctrl"], np.full(7, 0.1))


def test_default_states_are_at_the_start_and_every_simulated_second(
        make_env: Any, tmp_path: Path) -> None:
    env = make_env({})
    recording = env.record(tmp_path / "bag")
    env.step(1600)  # 3.2 s
    recording.stop()
    times = [s.time for s in mjfast.open_recording(tmp_path / "bag").states()]
    assert times[0] == 0.0
    assert [round(t, 9) for t in times[1:-1]] == [1.0, 2.0, 3.0]
    assert times[-1] == pytest.approx(3.2)


def test_topics_limits_what_is_recorded(make_env: Any, tmp_path: Path) -> None:
    env = make_env({"mujoco_server": plugins_param(
        {"type": "mjfast/JointStatePublisher", "rate_hz": 100},
        {"type": "mjfast/ClockPublisher", "every_steps": 10})})
    recording = env.record(tmp_path / "bag", topics=["/clock"])
    env.step(100)
    recording.stop()
    topics = read_with_rosbags(tmp_path / "bag")
    assert JOINT_STATES not in topics
    assert len(topics["/clock"]) == 10  # the plugin's own /clock, none made up besides


def test_an_unknown_topic_is_a_key_error_naming_close_matches(make_env: Any,
                                                               tmp_path: Path) -> None:
    env = make_env({"mujoco_server": plugins_param(
        {"type": "mjfast/ClockPublisher", "every_steps": 10})})
    recording = env.record(tmp_path / "bag", topics=["/clock"])
    env.step(20)
    recording.stop()
    with pytest.raises(KeyError, match=r"no topic '/clok' in the recording \(did you mean "
                                       r"'/clock'\?\); its topics: .*/clock"):
        mjfast.open_recording(tmp_path / "bag").messages("/clok")


UNNAMED_CAMERA_XML = """
<mujoco><visual><global offwidth="64" offheight="48"/></visual><worldbody>
  <camera name="front" pos="0 -1 1" fovy="60"/>
  <camera pos="0 0 2" fovy="70"/>
</worldbody></mujoco>"""


@pytest.mark.parametrize("cameras", [None, ["camera_1"]])
def test_an_unnamed_cameras_frames_are_recorded_with_its_fovy(
        tmp_path: Path, cameras: list[str] | None) -> None:
    # Issue 29: an unnamed camera's frames reached no bag (the table dropped unnamed cameras),
    # and `camera_1` got a 45° fovy; the plugin now declares what it opened.
    import math

    plugin = {"name": "cams", "type": "mjfast/CameraPublisher", "planes": ["rgb"]}
    if cameras is not None:
        plugin["cameras"] = cameras
    params = {"mujoco_server": {"MujocoPlugins": [plugin],
                                "cameras": {"camera_1": {"rate_hz": 100.0}}}}
    with mjfast.MujocoEnv(UNNAMED_CAMERA_XML, params=params, render_sync=True) as env:
        recording = env.record(tmp_path / "bag")
        env.step(20)
        recording.stop()
    topics = read_with_rosbags(tmp_path / "bag")
    images = topics["/mujoco_server/cams/camera_1/rgb"]
    infos = topics["/mujoco_server/cams/camera_1/camera_info"]
    assert images and len(infos) == len(images)
    _, image = images[-1]
    _, info = infos[-1]
    assert (image.width, image.height, image.encoding) == (64, 48, "rgb8")
    assert image.header.frame_id == info.header.frame_id == "camera_1_optical"
    fy = 24 / math.tan(math.radians(70) / 2)
    np.testing.assert_allclose(info.k, [fy, 0, 32, 0, fy, 24, 0, 0, 1])


@pytest.mark.parametrize("writer", ["as it comes", "held until the reload"])
def test_a_reload_while_recording_records_the_new_tf_static(
        make_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    # /tf_static is published (latched) in the TfPublisher's load, before the reloaded plugins
    # declare their topics: the recording writes it once they have, and once only. A message
    # handed over before the reload and taken after it (a writer late on a loaded machine) goes
    # by the routes it was published under: the first /tf_static, which the reloaded plugins do
    # not declare, was lost that way.
    from mjfast.interop.record import recorder

    held = threading.Event()
    if writer == "held until the reload":
        flush = recorder.Recording._flush

        def late_flush(self: Any, messages: Any) -> None:
            assert held.wait(30)
            flush(self, messages)

        monkeypatch.setattr(recorder.Recording, "_flush", late_flush)
    else:
        held.set()
    params = {"mujoco_server": plugins_param({"type": "mjfast/TfPublisher", "rate_hz": 50})}
    env = make_env(params)
    recording = env.record(tmp_path / "bag")
    env.step(10)
    env.params.set("/mujoco_server/MujocoPlugins", [
        {"name": "tf", "type": "mjfast/TfPublisher", "rate_hz": 50,
         "static_topic": "/tf_static_2"}])
    env.reload()
    held.set()
    env.step(10)
    env.reload()  # the same topic again: its old route records the new message, once
    env.step(10)
    recording.stop()
    topics = read_with_rosbags(tmp_path / "bag")
    assert len(topics["/tf_static"]) == 1
    assert len(topics["/tf_static_2"]) == 2
    _, static = topics["/tf_static_2"][0]
    assert {t.child_frame_id for t in static.transforms} == {
        t.child_frame_id for t in topics["/tf_static"][0][1].transforms}


# -- env_at and replay -------------------------------------------------------------------------

def test_env_at_equals_the_live_run_bit_for_bit(make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    live: dict[int, tuple[float, np.ndarray, np.ndarray]] = {}
    recording = env.record(tmp_path / "bag", state_every=64)
    run_with_commands(env, live)
    recording.stop()
    opened = mjfast.open_recording(tmp_path / "bag")
    commands = opened.commands()
    assert [c["kind"] for c in commands] == ["control", "call", "control", "publish", "control",
                                             "call"]
    np.testing.assert_array_equal(commands[4]["fields"]["ctrl"], np.full(7, -0.1))
    assert [c["name"] for c in commands if c["kind"] == "call"] == ["set_joint_state", "reset"]
    for time, qpos, qvel in live.values():
        restored = opened.env_at(time)
        try:
            assert restored.data.time == time
            np.testing.assert_array_equal(restored.data.qpos, qpos)
            np.testing.assert_array_equal(restored.data.qvel, qvel)
        finally:
            restored.close()


def test_replay_check_passes_and_names_the_first_tampered_state(
        make_env: Any, tmp_path: Path, capsys: Any) -> None:
    env = make_env()
    recording = env.record(tmp_path / "bag", state_every=50)
    run_with_commands(env, {})
    recording.stop()
    states = mjfast.open_recording(tmp_path / "bag").states()
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert (code, out, err) == (0, f"replay matches {len(states)} states\n", "")

    tampered = tmp_path / "tampered"
    target = states[5]
    rewrite_bag(tmp_path / "bag", tampered, target.time)
    code, out, _ = run_cli(capsys, "replay", str(tampered), "--check")
    assert code == 1
    assert f"replay differs at time {target.time!r}" in out


def copy_bag(source: Path, target: Path,
             edit: Callable[[str, str, int, bytes, Any], bytes]) -> None:
    """A copy of the bag written through rosbags, its custom metadata kept and each message's CDR
    passed through `edit(topic, msgtype, log_time, raw, typestore)`."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(source) as reader, Writer(target, version=9,
                                          storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in custom_data(source).items():
            writer.set_custom_data(key, value)
        connections = {c.id: writer.add_connection(c.topic, c.msgtype, typestore=store)
                       for c in reader.connections}
        for connection, timestamp, raw in reader.messages():
            raw = edit(connection.topic, connection.msgtype, timestamp, raw, store)
            writer.write(connections[connection.id], timestamp, raw)


def custom_data(bag: Path) -> dict[str, str]:
    return yaml.safe_load((bag / "metadata.yaml").read_text())[
        "rosbag2_bagfile_information"]["custom_data"]


def rewrite_bag(source: Path, target: Path, time: float) -> None:
    """A copy of the bag, through rosbags, with the last physics value of the state at `time`
    nudged by one ulp."""
    stamp = int(custom_data(source)["mjfast.log_time_offset_ns"]) + round(time * 1e9)

    def nudge(topic: str, msgtype: str, log_time: int, raw: bytes, store: Any) -> bytes:
        if topic != "/mjfast/state" or log_time != stamp:
            return raw
        message = store.deserialize_cdr(raw, msgtype)
        data = bytearray(bytes(message.data))
        last = np.frombuffer(bytes(data[-8 - 4:-4]), dtype="<f8")[0]
        data[-8 - 4:-4] = np.nextafter(last, np.inf).astype("<f8").tobytes()
        message.data = np.frombuffer(bytes(data), dtype=np.uint8)
        return bytes(store.serialize_cdr(message, msgtype))

    copy_bag(source, target, nudge)


def test_commands_from_a_control_thread_replay_exactly_on_the_physics_thread(
        make_env: Any, tmp_path: Path, capsys: Any) -> None:
    env = make_env()
    recording = env.record(tmp_path / "bag", state_every=25)
    env.start(None)
    stop = threading.Event()

    def control_loop() -> None:
        value = 0.0
        while not stop.is_set():
            value = -value + 0.01
            env.control.write(ctrl=np.full(7, value))

    controller = threading.Thread(target=control_loop)
    controller.start()
    try:
        assert wait_for(lambda: env.step_count > 3000, timeout=30)
        env.set_joint_state({"j1": 0.2})
        env.bus.publish_inbound(COMMANDS, {"data": [0.9, -0.9]})
        assert wait_for(lambda: env.step_count > 6000, timeout=30)
    finally:
        stop.set()
        controller.join()
        env.stop()
    qpos, time = env.data.qpos.copy(), float(env.data.time)
    recording.stop()
    opened = mjfast.open_recording(tmp_path / "bag")
    assert sum(c["kind"] == "control" for c in opened.commands()) > 5
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0, out
    restored = opened.env_at(time)
    try:
        np.testing.assert_array_equal(restored.data.qpos, qpos)
    finally:
        restored.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_remote_publishes_are_recorded_at_the_step_they_took_effect(
        make_env: Any, tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("zenoh")
    from mjfast.interop.remote.server import BusServer

    env = make_env()
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    server = BusServer(env, endpoint)
    try:
        recording = env.record(tmp_path / "bag", state_every=20)
        env.start(1.0)
        with mjfast.connect(endpoint, timeout=10) as client:
            for value in (0.4, -0.6, 0.8):
                client.publish(COMMANDS, {"data": [value, value]})
                assert wait_for(lambda v=value: env.control.read().ctrl[0] == v)
        env.stop()
        recording.stop()
    finally:
        server.close()
    commands = mjfast.open_recording(tmp_path / "bag").commands()
    published = [c for c in commands if c["kind"] == "publish"]
    assert [list(c["message"]["data"]) for c in published] == [[0.4, 0.4], [-0.6, -0.6],
                                                              [0.8, 0.8]]
    assert all(c["topic"] == COMMANDS for c in published)
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0, out


def test_a_reload_and_a_rewind_with_set_state_replay_exactly(
        make_env: Any, tmp_path: Path, capsys: Any) -> None:
    env = make_env()
    recording = env.record(tmp_path / "bag", state_every=40)
    env.control.write(ctrl=np.full(7, 0.2))
    env.step(100)
    earlier = env.get_state()
    env.step(100)
    env.set_state(earlier)  # rewind and look again
    env.control.write(ctrl=np.full(7, -0.2))
    env.step(150)
    env.reload()
    env.step(30)
    recording.stop()
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0, out


def test_set_mocap_pose_is_recorded_and_replays_bit_for_bit(tmp_path: Path,
                                                              capsys: Any) -> None:
    with mjfast.MujocoEnv(MOCAP_XML) as env:
        recording = env.record(tmp_path / "bag", state_every=25)
        for k in range(6):  # the weld drags the free box after its mocap target
            env.step(20)
            env.set_mocap_pose("target", pos=[0.05 * k, 0.0, 1.0 + 0.02 * k],
                               quat=None if k % 2 else [1.0, 0.0, 0.1 * k, 0.0])
        env.step(40)
        recording.stop()
    calls = [c for c in mjfast.open_recording(tmp_path / "bag").commands() if c["kind"] == "call"]
    assert [c["name"] for c in calls] == ["set_mocap_pose"] * 6
    assert (calls[2]["step"], calls[2]["args"]) == (
        60, {"body": "target", "pos": [0.1, 0.0, 1.04], "quat": [1.0, 0.0, 0.2, 0.0]})
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0, out
    assert "replay matches" in out
    # A recorded pose changed by hand: replay differs, so the check above is not vacuous.
    edit_bag(tmp_path / "bag", tmp_path / "edited", command=edit_first(
        "call", lambda entry: entry["args"].update(pos=[0.0, 0.0, 1.5])))
    assert replay(tmp_path / "edited", check=True).first_difference is not None


# -- lifecycle and bad input -------------------------------------------------------------------

def test_close_stops_the_recording_and_closes_the_bag(make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    recording = env.record(tmp_path / "bag")
    env.step(500)
    env.close()
    assert not recording.recording
    recording.stop()  # idempotent
    states = mjfast.open_recording(tmp_path / "bag").states()
    assert states[-1].step_count == 500


def test_one_recording_at_a_time_and_none_after_stop(make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    recording = env.record(tmp_path / "one")
    with pytest.raises(LogicError, match=r"recording to .*one already"):
        env.record(tmp_path / "two")
    assert not (tmp_path / "two").exists()
    recording.stop()
    env.step(10)
    second = env.record(tmp_path / "two")
    second.stop()
    assert len(mjfast.open_recording(tmp_path / "one").states()) == 2


@pytest.mark.parametrize("kind", ["directory", "file", "bag"])
def test_an_existing_target_is_refused_and_left_as_it_was(
        make_env: Any, tmp_path: Path, kind: str) -> None:
    env = make_env()
    target = tmp_path / "target"
    if kind == "file":
        target.write_text("keep me")
    else:
        target.mkdir()
        (target / "metadata.yaml" if kind == "bag" else target / "notes.txt").write_text("keep")
    before = sorted((p.name, p.read_text()) for p in target.iterdir()) if target.is_dir() else (
        target.read_text())
    with pytest.raises(FileExistsError, match="exists already"):
        env.record(target)
    after = sorted((p.name, p.read_text()) for p in target.iterdir()) if target.is_dir() else (
        target.read_text())
    assert after == before
    assert env._recording is None
    env.step(1)


@pytest.mark.parametrize(("options", "error", "match"), [
    ({"state_every": 0}, ValueError, "state_every must be an integer >= 1"),
    ({"state_every": 2.5}, ValueError, "state_every must be an integer >= 1"),
    ({"topics": ["/nope"]}, ValueError, "no bridged topic '/nope'"),
    ({"topics": "/clock"}, TypeError, "topics must be a list"),
])
def test_bad_options_are_refused_before_anything_is_written(
        make_env: Any, tmp_path: Path, options: dict[str, Any], error: type,
        match: str) -> None:
    env = make_env()
    with pytest.raises(error, match=match):
        env.record(tmp_path / "bag", **options)
    assert not (tmp_path / "bag").exists()


def test_bad_recordings_are_clear_errors(make_env: Any, tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(FileNotFoundError, match="recording not found"):
        mjfast.open_recording(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="is not a rosbag2 bag"):
        mjfast.open_recording(tmp_path / "plain")
    env = make_env()
    recording = env.record(tmp_path / "bag")
    env.step(2000)
    recording.stop()
    truncated = tmp_path / "truncated"
    shutil.copytree(tmp_path / "bag", truncated)
    mcap = truncated / "bag.mcap"
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    with pytest.raises(ValueError, match="cannot read the bag"):
        mjfast.open_recording(truncated)
    for path, message in ((tmp_path / "missing", "recording not found"),
                          (tmp_path / "plain", "is not a rosbag2 bag"),
                          (truncated, "cannot read the bag")):
        code, out, err = run_cli(capsys, "replay", str(path), "--check")
        assert code == 1 and out == ""
        assert err.startswith("mjfast: error: ") and message in err and err.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == []


# -- the command line --------------------------------------------------------------------------

def test_run_record_then_replay_check(tmp_path: Path, capsys: Any) -> None:
    model = tmp_path / "arm.xml"
    model.write_text(arm_xml())
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(recorded_params()))
    code, _, err = run_cli(capsys, "run", str(model), "--params", str(params), "--duration", "2.5",
                           "--no-progress", "--record", str(tmp_path / "bag"))
    assert code == 0, err
    assert f"recording to {tmp_path / 'bag'}" in err
    opened = mjfast.open_recording(tmp_path / "bag")
    assert opened.metadata["mjfast.model_path"] == str(model.resolve())
    assert len(opened.messages(JOINT_STATES)) == 250
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert (code, out) == (0, "replay matches 4 states\n")
    # A second run into the same directory is refused before anything runs.
    code, out, err = run_cli(capsys, "run", str(model), "--duration", "1", "--record",
                             str(tmp_path / "bag"))
    assert code == 1 and "exists already" in err and out == ""
    assert len(mjfast.open_recording(tmp_path / "bag").messages(JOINT_STATES)) == 250


def test_the_record_and_rewind_example_runs(tmp_path: Path, capsys: Any) -> None:
    import runpy
    import sys

    argv = sys.argv
    sys.argv = ["record_and_rewind.py", "--dir", str(tmp_path)]
    try:
        runpy.run_path(str(TESTS_DIR.parent / "examples" /
                           "record_and_rewind.py"), run_name="__main__")
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "rewound to t=1.000 s" in out
    assert "replay matches 4 states" in out


SERVE_RECORDING = '''
import sys
from mjfast import cli
sys.exit(cli.main(["serve", {model!r}, "--params", {params!r}, "--listen", {endpoint!r},
                   "--realtime", "1", "--record", {bag!r}]))
'''


def test_serve_record_writes_what_remote_clients_did(tmp_path: Path) -> None:
    pytest.importorskip("zenoh")
    import signal

    from support import finish_python, start_python

    model = tmp_path / "arm.xml"
    model.write_text(arm_xml())
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(recorded_params()))
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    bag = tmp_path / "bag"
    child = start_python(SERVE_RECORDING.format(model=str(model), params=str(params),
                                                endpoint=endpoint, bag=str(bag)))
    try:
        assert child.stderr is not None
        lines = [child.stderr.readline(), child.stderr.readline()]
        assert f"recording to {bag}" in lines[0] and "serving" in lines[1], lines
        with mjfast.connect(endpoint, timeout=10) as client:
            client.publish(COMMANDS, {"data": [0.3, -0.3]})
            client.call("/mujoco_server/set_joint_state", {"positions": {"j4": 0.5}})
            assert wait_for(lambda: client.call("/mujoco_server/info")["time"] > 0.3)
    finally:
        child.send_signal(signal.SIGTERM)
        finish_python(child, timeout=60)
    assert child.returncode == 0
    opened = mjfast.open_recording(bag)
    kinds = [(c["kind"], c.get("name", c.get("topic"))) for c in opened.commands()
             if c["kind"] != "control"]
    # (A put and a query travel separately: either may arrive first.)
    assert sorted(kinds) == [("call", "set_joint_state"), ("publish", COMMANDS)]
    assert len(opened.messages(JOINT_STATES)) > 20
    result = replay(bag, check=True)
    assert result.first_difference is None and result.states >= 2


class StatusPublisher(mjfast.MujocoPlugin):
    """A plugin with a declared ROS 2 type (its converter is a closure, run in this process)."""

    ros_types: ClassVar[dict[str, str]] = {"~status": "std_msgs/msg/String"}

    def load(self, model: Any, data: Any) -> bool:
        self.steps = 0
        return True

    def last_stage_callback(self, model: Any, data: Any) -> None:
        self.steps += 1
        if self.steps % 50 == 0:
            self.node.publish("~status", {"data": f"step {self.steps}"})


def test_a_plugins_declared_types_are_recorded(make_env: Any, tmp_path: Path) -> None:
    mjfast.register_plugin("test/StatusPublisher", StatusPublisher)
    try:
        env = make_env({"mujoco_server": plugins_param({"type": "test/StatusPublisher"})})
        recording = env.record(tmp_path / "bag")
        env.step(200)
        recording.stop()
    finally:
        mjfast.unregister_plugin("test/StatusPublisher")
    topic = "/mujoco_server/StatusPublisher/status"
    for topics in (read_with_rosbags(tmp_path / "bag"), read_with_mcap(tmp_path / "bag")):
        assert [m.data for _, m in topics[topic]] == [f"step {n}" for n in (50, 100, 150, 200)]
    assert [t for t, _ in mjfast.open_recording(tmp_path / "bag").messages(topic)] == [
        0.1, 0.2, 0.3, 0.4]


def test_every_recorded_call_replays(tmp_path: Path, capsys: Any) -> None:
    coupled = arm_xml().replace("</mujoco>", '<equality><joint name="couple" joint1="j0" '
                                              'joint2="j1" active="false"/></equality></mujoco>')
    with mjfast.MujocoEnv(coupled, params=recorded_params()) as env:
        recording = env.record(tmp_path / "bag", state_every=30)
        run_every_call(env)
        recording.stop()
    names = [c["name"] for c in mjfast.open_recording(tmp_path / "bag").commands()
             if c["kind"] == "call"]
    assert names == ["apply_options", "set_equality_active", "set_geom_properties",
                     "set_joint_state", "reset"]
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "bag"), "--check")
    assert code == 0, out


def run_every_call(env: Any) -> None:
    env.step(20)
    env.apply_options({"gravity": [0.0, 0.0, -5.0]})
    env.set_equality_active("couple", True)
    env.step(20)
    env.set_geom_properties("ball", size=[0.08, 0.0, 0.0])
    env.step(20)
    env.set_joint_state({"j0": 0.4}, {"j1": 1.0})
    env.step(20)
    env.reset(joint_positions={"j5": -0.3})
    env.step(45)


# -- nothing is lost to a signal (SPEC §18) ----------------------------------------------------

INTERRUPTED_SCRIPT = '''
import sys, time
import numpy as np
import mjfast
from support import arm_xml
env = mjfast.MujocoEnv(arm_xml(), params={params!r})
recording = env.record({bag!r})
print("recording", flush=True)
try:
    while True:
        env.control.write(ctrl=np.full(7, np.sin(env.data.time)))
        env.step(5)
        time.sleep(0.01)
except KeyboardInterrupt:
    recording.stop()
    print("stopped", flush=True)
'''

RAISING_SCRIPT = '''
import time
import mjfast
from support import arm_xml
env = mjfast.MujocoEnv(arm_xml(), params={params!r})
recording = env.record({bag!r})
deadline = time.monotonic() + 2.5
while time.monotonic() < deadline:
    env.step(10)
    time.sleep(0.01)
raise RuntimeError("the script fails with its recording running")
'''


def start_group(argv: list[str]) -> Any:
    """A child in a process group of its own (as a shell starts a job), so that a signal can go
    to the whole group, the bag writer included, as Ctrl-C or `kill -TERM -PGID` sends it."""
    import os
    import subprocess

    from support import TESTS_DIR

    # The mjfast that runs the tests (installed, or a checkout on PYTHONPATH), as run_python.
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=TESTS_DIR.parent, env=environment, start_new_session=True)


def check_complete_bag(bag: Path, capsys: Any) -> None:
    """The bag is complete: metadata.yaml, read by both independent readers, and replay
    --check matches."""
    assert (bag / "metadata.yaml").is_file()
    by_rosbags, by_mcap = read_with_rosbags(bag), read_with_mcap(bag)
    for topics in (by_rosbags, by_mcap):
        assert len(topics[JOINT_STATES]) > 20
        assert len(topics["/mjfast/state"]) >= 1  # (a process killed records no last state)
    code, out, err = run_cli(capsys, "replay", str(bag), "--check")
    assert code == 0 and out.startswith("replay matches"), (out, err)


@pytest.mark.parametrize("how", ["run-sigint", "run-sigterm", "serve-sigterm", "script-sigint",
                                 "exception"])
def test_a_signal_to_the_process_group_leaves_a_complete_bag(
        tmp_path: Path, capsys: Any, how: str) -> None:
    import os
    import signal
    import sys

    model = tmp_path / "arm.xml"
    model.write_text(arm_xml())
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(recorded_params()))
    bag = tmp_path / "bag"
    python = [sys.executable, "-u"]
    if how.startswith("run-"):
        argv = [*python, "-m", "mjfast", "run", str(model), "--params", str(params),
                "--duration", "inf", "--realtime", "1", "--no-progress", "--record", str(bag)]
    elif how == "serve-sigterm":
        pytest.importorskip("zenoh")
        argv = [*python, "-m", "mjfast", "serve", str(model), "--params", str(params),
                "--listen", f"tcp/127.0.0.1:{free_port()}", "--realtime", "1",
                "--record", str(bag)]
    else:
        script = INTERRUPTED_SCRIPT if how == "script-sigint" else RAISING_SCRIPT
        argv = [*python, "-c", script.format(params=recorded_params(), bag=str(bag))]
    child = start_group(argv)
    try:
        # A short recording (far less than a chunk of the MCAP file) is on disk within a second
        # of wall time.
        assert wait_for(lambda: (bag / "bag.mcap").is_file()
                        and (bag / "bag.mcap").stat().st_size > 4096, timeout=60), (
            child.poll(), child.stderr.read() if child.poll() is not None else "")
        if how != "exception":
            os.killpg(child.pid, signal.SIGTERM if how.endswith("sigterm") else signal.SIGINT)
        out, err = child.communicate(timeout=60)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise
    # (`run` leaves SIGTERM to its default: the process ends there, and the writer, whose pipe
    # closes, closes the bag.)
    expected = {"run-sigint": 130, "run-sigterm": -signal.SIGTERM, "serve-sigterm": 0,
                "script-sigint": 0, "exception": 1}[how]
    assert child.returncode == expected, err
    assert "Traceback" not in err or how == "exception", err
    if how == "script-sigint":
        assert out.splitlines() == ["recording", "stopped"]
    check_complete_bag(bag, capsys)


def test_a_full_disk_ends_the_recording_at_once_and_leaves_a_readable_bag(
        tmp_path: Path, capsys: Any) -> None:
    """The bag on an 8 MiB tmpfs (mounted in a user namespace of the child's own)."""
    import subprocess
    import sys

    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -rm (user namespaces) to mount a small tmpfs")
    disk, tiny, copy = tmp_path / "disk", tmp_path / "tiny", tmp_path / "copy"
    disk.mkdir()
    tiny.mkdir()
    script = FULL_DISK_SCRIPT.format(params=recorded_params(), bag=str(disk / "bag"),
                                     tiny=str(tiny))
    shell = ('mount -t tmpfs -o size=8m tmpfs "$1" && mount -t tmpfs -o size=16k tmpfs "$5" '
             '|| exit 99; "$2" -u -c "$3"; status=$?; cp -r "$1/bag" "$4"; exit $status')
    child = start_group(["unshare", "-rm", "sh", "-c", shell, "sh", str(disk), sys.executable,
                         script, str(copy), str(tiny)])
    out, err = child.communicate(timeout=300)
    if child.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs in a user namespace: {err.strip()}")
    assert child.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == "ended at once True", (out, err)
    assert lines[1].startswith(f"stop: the recording to {disk / 'bag'} failed: No space left "
                               f"on device (the bag holds what came before)"), lines
    assert lines[2] == "the env steps on"
    # A disk too full to start a recording on: an OSError, and nothing left there.
    assert lines[3].startswith(f"record: cannot write the bag {tiny / 'bag'}: ") and (
        "No space left on device" in lines[3]), lines
    assert lines[4] == "left: []"
    assert err.count("recording to") == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in copy.iterdir()) == ["bag.mcap", "metadata.yaml"]
    check_complete_bag(copy, capsys)


FULL_DISK_SCRIPT = '''
import os
import time
import mjfast
from support import arm_xml
env = mjfast.MujocoEnv(arm_xml(), params={params!r})
recording = env.record({bag!r}, state_every=50)
deadline = time.monotonic() + 120
while recording.recording and time.monotonic() < deadline:
    env.step(500)
print("ended at once", not recording.recording, flush=True)
try:
    recording.stop()
except OSError as error:
    print("stop:", error, flush=True)
env.step(100)
print("the env steps on", flush=True)
try:
    env.record({tiny!r} + "/bag")
except OSError as error:
    print("record:", error, flush=True)
print("left:", sorted(os.listdir({tiny!r})), flush=True)
env.close()
'''


# -- damaged and hand-edited bags (SPEC §18) ---------------------------------------------------

@pytest.fixture(scope="module")
def good_bag(tmp_path_factory: Any) -> Path:
    bag = tmp_path_factory.mktemp("good") / "bag"
    with mjfast.MujocoEnv(arm_xml(), params=recorded_params()) as env:
        recording = env.record(bag, state_every=100)
        run_with_commands(env, {})
        recording.stop()
    return bag


def edit_bag(source: Path, target: Path, metadata: Any = None, command: Any = None,
             state: Any = None) -> None:
    """A copy of the bag: `metadata(info)` edits metadata.yaml's bag information; the MCAP is
    rewritten through rosbags when `command(entry)` edits decoded commands or `state(raw)`
    replaces a state message's CDR."""
    from mjfast.model.state import encode_value

    def edited(topic: str, msgtype: str, log_time: int, raw: bytes, store: Any) -> bytes:
        if topic == "/mjfast/commands" and command is not None:
            message = store.deserialize_cdr(raw, msgtype)
            entry = decode_value(bytes(message.data))
            command(entry)
            message.data = np.frombuffer(encode_value(entry), dtype=np.uint8)
            return bytes(store.serialize_cdr(message, msgtype))
        if topic == "/mjfast/state" and state is not None:
            return state(raw)
        return raw

    if command is None and state is None:
        shutil.copytree(source, target)
    else:
        copy_bag(source, target, edited)
    if metadata is not None:
        path = target / "metadata.yaml"
        info = yaml.safe_load(path.read_text())
        edited = metadata(info["rosbag2_bagfile_information"])
        path.write_text(edited if isinstance(edited, str) else yaml.safe_dump(info))


def set_custom(key: str, value: Any) -> Any:
    def edit(info: dict[str, Any]) -> None:
        if value is None:
            del info["custom_data"][key]
        else:
            info["custom_data"][key] = value
    return edit


def edit_first(kind: str, change: Any) -> Any:
    """A command edit: `change(entry)` on the first command of `kind`."""
    done: list[bool] = []

    def edit(entry: dict[str, Any]) -> None:
        if entry["kind"] == kind and not done:
            done.append(True)
            change(entry)
    return edit


DAMAGED: dict[str, tuple[dict[str, Any], str]] = {
    "custom_data a list": ({"metadata": lambda info: info.update(custom_data=["x"])},
                           "its custom_data must map names to strings"),
    "params a list": ({"metadata": set_custom("mjfast.params", "[1, 2]")},
                      "its mjfast.params must be a JSON object, got [1, 2]"),
    "params a number": ({"metadata": set_custom("mjfast.params", "3")},
                        "its mjfast.params must be a JSON object, got 3"),
    "params not JSON": ({"metadata": set_custom("mjfast.params", "{")},
                        "its mjfast.params is not JSON"),
    "no model": ({"metadata": set_custom("mjfast.mjcf", None)}, "holds no model"),
    "a model that does not compile": ({"metadata": set_custom("mjfast.mjcf", "<mujoco><oops/>")},
                                      "its model does not load"),
    "negative state_every": ({"metadata": set_custom("mjfast.state_every", "-5")},
                             "its mjfast.state_every must be finite and >= 0, got '-5'"),
    "state_every not a number": ({"metadata": set_custom("mjfast.state_every", "often")},
                                 "its mjfast.state_every must be an integer, got 'often'"),
    "state_period nan": ({"metadata": set_custom("mjfast.state_period", "nan")},
                         "its mjfast.state_period must be finite"),
    "metadata not YAML": ({"metadata": lambda info: "{: ["}, "does not read as YAML"),
    "metadata a list": ({"metadata": lambda info: "- 1\n"}, "no rosbag2_bagfile_information"),
    "a file outside the bag": (
        {"metadata": lambda info: info.update(relative_file_paths=["../good/bag/bag.mcap"])},
        "relative_file_paths must name a file inside the bag's directory"),
    "an absolute file": (
        {"metadata": lambda info: info.update(relative_file_paths=["/etc/passwd.mcap"])},
        "relative_file_paths must name a file inside the bag's directory"),
    "two files": ({"metadata": lambda info: info.update(relative_file_paths=["a.mcap"] * 2)},
                  "expected one MCAP file"),
    "a command without step": ({"command": edit_first("call", lambda e: e.pop("step"))},
                               "has no step"),
    "a negative step": ({"command": edit_first("control", lambda e: e.update(step=-3))},
                        "has no step"),
    "a command of no known kind": ({"command": edit_first("call", lambda e: e.update(kind=7))},
                                   "has kind 7, not control, call or publish"),
    "a call of no recorded method": (
        {"command": edit_first("call", lambda e: e.update(name="__init__"))},
        "a recording holds calls of"),
    "a control write as a list": (
        {"command": edit_first("control", lambda e: e.update(fields=[1.0]))},
        "has no fields mapping names to float64 arrays"),
    "a control write to another field": (
        {"command": edit_first("control", lambda e: e.update(fields={"qpos": np.zeros(7)}))},
        "its control command at step 37 does not apply: no control field 'qpos'"),
    "a control write of the wrong size": (
        {"command": edit_first("control", lambda e: e.update(fields={"ctrl": np.zeros(3)}))},
        "its control command at step 37 does not apply: no control field 'ctrl' of 3 values"),
    "call arguments that do not fit": (
        {"command": edit_first("call", lambda e: e.update(args={"nope": 1}))},
        "its call command at step 157 does not apply"),
    "a non-CDR state": ({"state": lambda raw: b"\x00\x01\x00\x00garbage"},
                        "is not a std_msgs/msg/UInt8MultiArray in CDR"),
    "a state that is no SimState": (
        {"state": lambda raw: raw[:-16] + b"\xff" * 16}, "is not a SimState"),
}


@pytest.mark.parametrize("variant", sorted(DAMAGED))
def test_a_damaged_or_hand_edited_bag_is_one_value_error_naming_it(
        good_bag: Path, tmp_path: Path, capsys: Any, variant: str) -> None:
    edits, what = DAMAGED[variant]
    target = tmp_path / "edited"
    edit_bag(good_bag, target, **edits)
    with pytest.raises(ValueError) as caught:
        replay(target, check=True)
    assert str(caught.value).startswith(f"cannot read the bag {target}: ")
    assert what in str(caught.value)
    if "does not apply" not in what and "does not load" not in what:
        with pytest.raises(ValueError, match=f"cannot read the bag {target}: "):
            mjfast.open_recording(target)
    code, out, err = run_cli(capsys, "replay", str(target), "--check")
    assert (code, out) == (1, "")
    assert err.startswith("mjfast: error: cannot read the bag") and err.count("\n") == 1, err
    assert what in err


def test_replay_never_runs_past_the_last_state(good_bag: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    target = tmp_path / "edited"
    last = {"done": False}

    def far_away(entry: dict[str, Any]) -> None:  # the last control write, at step 10**12
        if entry["kind"] == "control" and entry["step"] > 400 and not last["done"]:
            last["done"] = True
            entry["step"] = 10**12

    edit_bag(good_bag, target, command=far_away)
    assert last["done"]
    states = mjfast.open_recording(target).states()
    done = subprocess.run([sys.executable, "-m", "mjfast", "replay", str(target), "--check"],
                          capture_output=True, text=True, timeout=120)
    # It stops at the last state: the states after step 409 differ without that write.
    assert done.returncode == 1 and "the state at step 500 " in done.stdout, (
        done.stdout, done.stderr)
    restored = mjfast.open_recording(target).env_at(states[-1].time)
    try:
        assert restored.step_count == states[-1].step_count
    finally:
        restored.close()


@pytest.mark.parametrize("time", [float("nan"), float("inf"), -float("inf")])
def test_env_at_a_time_that_is_not_finite_is_a_value_error(good_bag: Path, time: float) -> None:
    with pytest.raises(ValueError, match=r"env_at: time must be finite, got -?(nan|inf)"):
        mjfast.open_recording(good_bag).env_at(time)


@pytest.mark.parametrize("beyond", [1e-3, 1e6])
def test_env_at_beyond_the_recording_names_its_span(good_bag: Path, beyond: float) -> None:
    opened = mjfast.open_recording(good_bag)
    end = max(s.time for s in opened.states())
    with pytest.raises(ValueError, match=rf"env_at: time .* is outside the recording's span "
                                         rf"\[0\.0 s, {end!r} s\]"):
        opened.env_at(end + beyond)
    with pytest.raises(ValueError, match="outside the recording's span"):
        opened.env_at(-1)
    with pytest.raises(TypeError, match="env_at: time must be a number of seconds, got '1'"):
        opened.env_at("1")


def test_env_at_after_a_reload_to_another_model(make_env: Any, tmp_path: Path) -> None:
    env = make_env()
    other = arm_xml('<body name="extra" pos="1 0 1"><freejoint/><geom size="0.05"/></body>')
    recording = env.record(tmp_path / "bag", state_every=100)
    env.control.write(ctrl=np.full(7, 0.2))
    env.step(250)
    env.reload(other)
    env.control.write(ctrl=np.full(7, -0.3))
    env.step(230)
    time, qpos = float(env.data.time), env.data.qpos.copy()
    env.step(40)
    recording.stop()
    restored = mjfast.open_recording(tmp_path / "bag").env_at(time)
    try:
        assert restored.model.nq == env.model.nq
        assert restored.data.time == time
        np.testing.assert_array_equal(restored.data.qpos, qpos)
    finally:
        restored.close()


def test_drainers_on_several_threads_each_get_their_own_entries() -> None:
    # A recording's StepRecorder is drained by its writer thread; two drainers at once (each
    # waiting for the ring with the GIL released) once shared the binding's scratch entries, one
    # refilling them while the other read them. Each entry now goes to exactly one drainer. In a
    # child, as what it guards against is a crash.
    result = run_python("""
        import threading
        import mjfast
        from mjfast._core_loader import _core
        from support import arm_xml

        env = mjfast.MujocoEnv(arm_xml())
        recorder = _core.StepRecorder(64, 1, 0.0, wait_when_full=True)
        recorder.attach(env._core)
        steps = 20_000
        got = [[] for _ in range(3)]
        done = threading.Event()

        def drain(out):
            while not done.is_set():
                out.extend(entry[2] for entry in recorder.drain() if entry[0] == "state")
            out.extend(entry[2] for entry in recorder.drain() if entry[0] == "state")

        threads = [threading.Thread(target=drain, args=(out,)) for out in got]
        for thread in threads:
            thread.start()
        env.step(steps)
        done.set()
        for thread in threads:
            thread.join(30)
        _core.StepRecorder.detach(env._core)
        counts = sorted(count for out in got for count in out)
        # One state a step, each drained once: consecutive step counts, none twice.
        assert len(counts) == steps, len(counts)
        assert counts == list(range(counts[0], counts[0] + steps)), counts[:5]
        print("ok")
    """, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
