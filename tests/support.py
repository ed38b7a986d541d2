"""Shared test material: small MJCF models built in code and plugin classes that record what the
host does to them. Fixtures built on these live in conftest.py; test modules import the classes
from here to subclass them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

import mjfast

TESTS_DIR = Path(__file__).resolve().parent
# What pytest puts on sys.path for the tests (each test module's folder, which mirrors the
# package's): a child interpreter gets the same, so it imports `support` and a test module's names.
TEST_PATHS = [TESTS_DIR, *sorted({module.parent for module in TESTS_DIR.rglob("test_*.py")
                                 if module.parent != TESTS_DIR})]
N_ARM_JOINTS = 7
TIMESTEP = 0.002
HOME_QPOS = [0.1 * (i + 1) for i in range(N_ARM_JOINTS)]


def arm_xml(extra_body: str = "") -> str:
    """A fixed-base 7-dof arm: hinge joints, motors with ctrlrange, keyframe "home", a joint
    sensor, and a free-standing sphere "ball" whose size tests change. `extra_body` is MJCF put
    into the worldbody (to edit the model between reloads)."""
    links = []
    for i in range(N_ARM_JOINTS):
        axis = "0 0 1" if i % 2 == 0 else "0 1 0"
        links.append(
            f'<body name="link{i}" pos="0 0 {0.1 if i else 0.0}">'
            f'<joint name="j{i}" type="hinge" axis="{axis}" range="-3 3" damping="0.1"/>'
            f'<geom name="g{i}" type="capsule" fromto="0 0 0 0 0 0.1" size="0.02" '
            f'contype="0" conaffinity="0"/>'
        )
    chain = "".join(links) + "</body>" * N_ARM_JOINTS
    motors = "".join(
        f'<motor name="m{i}" joint="j{i}" ctrlrange="-1 1" ctrllimited="true"/>'
        for i in range(N_ARM_JOINTS)
    )
    home = " ".join(str(q) for q in HOME_QPOS)
    return f"""
<mujoco model="arm7">
  <option timestep="{TIMESTEP}"/>
  <worldbody>
    {chain}
    <body name="ball_body" pos="1 0 0.5">
      <geom name="ball" type="sphere" size="0.05" contype="0" conaffinity="0"/>
    </body>
    {extra_body}
  </worldbody>
  <actuator>{motors}</actuator>
  <sensor><jointpos name="j0_pos" joint="j0"/></sensor>
  <keyframe><key name="home" qpos="{home}"/></keyframe>
</mujoco>
"""


# A two-link planar arm (joints "shoulder" and "elbow", a motor each) on a floor it never touches:
# the model of the CLI and first-hour tests, which configure plugins by those joint names.
TWO_LINK_ARM_XML = f"""
<mujoco model="two_link_arm">
  <compiler angle="radian"/>
  <option timestep="{TIMESTEP}"/>
  <default>
    <joint type="hinge" damping="0.5" armature="0.1"/>
    <geom type="capsule" size="0.03" contype="0" conaffinity="0"/>
    <motor ctrlrange="-20 20"/>
  </default>
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body name="upper" pos="0 0 0.1">
      <joint name="shoulder" axis="0 1 0"/>
      <geom fromto="0 0 0 0 0 0.3"/>
      <body name="lower" pos="0 0 0.3">
        <joint name="elbow" axis="0 1 0"/>
        <geom fromto="0 0 0 0 0 0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder"/>
    <motor joint="elbow"/>
  </actuator>
</mujoco>
"""


def attached_arms_model() -> mujoco.MjModel:
    """Two copies of one arm attached under the prefixes `left/` and `right/` (MjSpec.attach),
    as composed models name things: `left/pan_pos`, `left/link`, `left/pan_sensor`."""
    parent = mujoco.MjSpec.from_string("""
    <mujoco><option gravity="0 0 0"/><worldbody>
      <body name="free/box" pos="0 0 2"><freejoint name="free/joint"/>
        <geom type="box" size=".1 .1 .1" pos=".2 0 0" mass="1"/></body>
    </worldbody></mujoco>""")
    for prefix, y in (("left/", 0.3), ("right/", -0.3)):
        arm = mujoco.MjSpec.from_string("""
        <mujoco><worldbody><body name="base"><body name="link" pos="0 0 .1">
          <joint name="pan_pos" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 .2 0 0" size=".02" mass=".5"/>
          <site name="tip" pos=".2 0 0"/>
        </body></body></worldbody>
        <actuator><motor name="pan_motor" joint="pan_pos"/></actuator>
        <sensor><jointpos name="pan_sensor" joint="pan_pos"/></sensor></mujoco>""")
        parent.worldbody.add_frame(pos=[0, y, 0]).attach_body(arm.body("base"), prefix, "")
    return parent.compile()


BOX_XML = f"""
<mujoco model="box">
  <option timestep="{TIMESTEP}"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="box" pos="0 0 0.2">
      <freejoint name="box_free"/>
      <geom name="box_geom" type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


# Eight boxes falling onto a floor with an arena too small for their contacts: the first contacts
# (step 101, t = 0.202) make mj_step call mju_error("mj_stackAlloc: out of memory ...").
# A mocap body `target` holding the free `box` by a weld (set_mocap_pose moves both), and a
# plain body `post`.
MOCAP_XML = f"""
<mujoco model="mocap">
  <option timestep="{TIMESTEP}"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="target" mocap="true" pos="0 0 1">
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
    </body>
    <body name="box" pos="0 0 1">
      <freejoint/>
      <geom name="box" type="box" size=".05 .05 .05" mass="1"/>
    </body>
    <body name="post" pos="1 0 0.5">
      <geom type="cylinder" size=".05 .5"/>
    </body>
  </worldbody>
  <equality><weld name="grab" body1="box" body2="target"/></equality>
</mujoco>
"""

SMALL_ARENA_STEPS_OK = 100
SMALL_ARENA_XML = """
<mujoco>
  <size memory="16K"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    {}
  </worldbody>
</mujoco>
""".format("".join(
    f'<body pos="{0.05 * i} 0 {0.3 + 0.25 * i}"><freejoint/><geom type="box" size=".1 .1 .1"/>'
    f"</body>" for i in range(8)))

# The same boxes with a smaller arena: MuJoCo warns (contacts dropped) instead of failing.
WARNING_ARENA_XML = SMALL_ARENA_XML.replace('memory="16K"', 'memory="8K"')



class Journal:
    """Everything the recording plugins saw, in order, across instances and envs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.instances: list[Any] = []

    def add(self, name: str, event: str) -> None:
        with self.lock:
            self.events.append((name, event))

    def names(self, event: str) -> list[str]:
        """The plugin names that received `event`, in order."""
        return [name for name, seen in self.events if seen == event]

    def instances_named(self, name: str) -> list[Any]:
        return [p for p in self.instances if getattr(p, "name", None) == name]


JOURNAL = Journal()


class Recording(mjfast.MujocoPlugin):
    """Records load/unload (and whatever subclasses note) on itself and in JOURNAL."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.loaded_with: tuple[Any, Any] | None = None
        JOURNAL.instances.append(self)

    def note(self, event: str) -> None:
        self.events.append(event)
        JOURNAL.add(self.name, event)

    def load(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        self.loaded_with = (model, data)
        self.note("load")
        return True

    def unload(self) -> None:
        self.note("unload")


class ControlCounter(Recording):
    """Counts control callbacks and keeps data.time of each."""

    def __init__(self) -> None:
        super().__init__()
        self.control_times: list[float] = []

    @property
    def calls(self) -> int:
        return len(self.control_times)

    def control_callback(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.control_times.append(float(data.time))
        self.note("control")


class FullRecorder(ControlCounter):
    """Records reset and geometry notifications too."""

    def __init__(self) -> None:
        super().__init__()
        self.geoms_changed: list[int] = []
        self.reset_times: list[float] = []

    def reset(self) -> None:
        self.reset_times.append(float(self.env.data.time))
        self.note("reset")

    def on_geom_changed(self, model: mujoco.MjModel, data: mujoco.MjData, geom_id: int) -> None:
        self.geoms_changed.append(geom_id)
        self.note("geom_changed")


def plugins_param(*entries: str | dict[str, Any]) -> dict[str, Any]:
    """A params dict with a ROS 1 style MujocoPlugins list; a str entry is a bare type."""
    listed = [{"type": e} if isinstance(e, str) else dict(e) for e in entries]
    return {"MujocoPlugins": listed}


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Polls `condition` until it holds or `timeout` seconds pass; returns whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.002)
    return condition()


# Offscreen camera tests: a red box (geom group 2) falling onto a grey floor, seen by two cameras.
CAMERA_UNAVAILABLE = "camera is unavailable during reload"
CAMERA_WIDTH, CAMERA_HEIGHT = 64, 48
CAMERA_XML = f"""
<mujoco>
  <visual><global offwidth="{CAMERA_WIDTH}" offheight="{CAMERA_HEIGHT}"/></visual>
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="floor" type="plane" size="2 2 .1" rgba=".5 .5 .5 1"/>
    <camera name="front" pos="0 -2 1" xyaxes="1 0 0 0 0.5 1"/>
    <camera name="side" pos="2 0 1" xyaxes="0 1 0 -0.5 0 1"/>
    <body name="box" pos="0 0 1">
      <freejoint/>
      <geom name="box" type="box" size=".2 .2 .2" rgba="1 0 0 1" group="2"/>
    </body>
  </worldbody>
</mujoco>
"""


def run_python(script: str, *, timeout: float = 60.0,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `script` in a fresh interpreter (cwd: the repository, tests/ importable) and returns
    the finished process; a hang fails the calling test through TimeoutExpired."""
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [*map(str, TEST_PATHS), os.environ.get("PYTHONPATH", "")]), MUJOCO_GL="egl")
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=timeout, cwd=TESTS_DIR.parent, env=child_env)


def start_python(script: str, *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Starts `script` as run_python does, with pipes, for tests that talk to it; with Python's
    faulthandler on, so that finish_python can have a hung child say where its threads are."""
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [*map(str, TEST_PATHS), os.environ.get("PYTHONPATH", "")]), MUJOCO_GL="egl")
    child_env.update(env or {})
    return subprocess.Popen([sys.executable, "-u", "-X", "faulthandler", "-c",
                             textwrap.dedent(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=TESTS_DIR.parent, env=child_env)


def finish_python(child: subprocess.Popen[str], timeout: float = 30.0) -> tuple[str, str]:
    """Waits for a start_python child and returns the rest of its stdout (what earlier
    readline() calls left) and its stderr. The child writes little, so its pipes cannot fill
    while it runs. A child still running after `timeout` is made to dump every thread's stack
    (SIGABRT, which faulthandler reports), killed if that does not end it, and the test fails
    with its stderr: no child outlives its test, and a hang says where it hung."""
    assert child.stdout is not None and child.stderr is not None
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired as hung:
        child.send_signal(signal.SIGABRT)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        with child.stdout, child.stderr:
            child.stdout.read()
            stderr = child.stderr.read()
        raise AssertionError(f"the child did not exit within {timeout} s; its stderr, with "
                             f"its threads' stacks:\n{stderr[-20000:]}") from hung
    with child.stdout, child.stderr:
        return child.stdout.read(), child.stderr.read()


# System call numbers: tgkill(2), a signal to one thread of another process (signal.pthread_kill
# reaches only this process's threads); futex(2), what a thread waiting on a lock or an Event is
# asleep in.
_TGKILL = {"x86_64": 234, "aarch64": 131}
_FUTEX = {"x86_64": 202, "aarch64": 98}


def wait_until_blocked(pid: int, looks: int = 5, timeout: float = 30.0) -> None:
    """Returns once the main thread of process `pid` has been asleep in futex(2) (a lock's, an
    Event's wait) at `looks` looks in a row, 10 ms apart: a signal sent now finds it waiting, not
    on its way to the wait (where its interpreter loop would run the handler anyway)."""
    number = str(_FUTEX[platform.machine()])
    where = Path(f"/proc/{pid}/task/{pid}/syscall")
    deadline = time.monotonic() + timeout
    seen = 0
    while seen < looks:
        assert time.monotonic() < deadline, f"process {pid}'s main thread never waited"
        seen = seen + 1 if where.read_text().split()[0] == number else 0
        time.sleep(0.01)


def signal_a_thread(pid: int, signum: int) -> int:
    """Sends `signum` to a thread of process `pid` other than its main one, as the kernel may
    deliver a signal sent to the whole process (Linux does when the main thread has one pending
    already); returns that thread's id. Only a thread that does not block `signum` is chosen."""
    number = _TGKILL.get(platform.machine())
    if number is None:
        raise NotImplementedError(f"tgkill's system call number on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
        tid = int(task.name)
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        mask = re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.MULTILINE)
        assert mask is not None, status
        if tid == pid or int(mask[1], 16) >> (signum - 1) & 1:
            continue
        if libc.syscall(number, pid, tid, signum) == 0:
            return tid
    raise AssertionError(f"process {pid} has no thread but its main one that takes signal "
                         f"{signum}")


def write(tmp_path: Path, name: str, text: str) -> Path:
    """Writes `text` to tmp_path/name and returns the path."""
    path = tmp_path / name
    path.write_text(text)
    return path


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """Runs the mjfast command line in-process; its exit status, stdout and stderr."""
    from mjfast import cli

    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- remote bus payloads (mjfast.interop.remote.codec) ---------------------------------------------

DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16",
          ">i4", ">f8", "<u2"]


def sample_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    arrays = []
    for dtype in DTYPES:
        raw = rng.integers(0, 256, size=5 * 3 * np.dtype(dtype).itemsize, dtype=np.uint8)
        # Any bit pattern, NaNs and infinities included: bit-exact means the bytes.
        arrays.append(raw.view(np.dtype(dtype)).reshape(5, 3))
    arrays += [
        np.array(3.5),  # 0-d
        np.array(True),
        np.zeros((0, 4), dtype=np.float32),  # empty
        np.zeros(0, dtype=np.int16),
        np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),  # Fortran order
        np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2],  # a non-contiguous view
        np.array([np.nan, -np.inf, -0.0]),
    ]
    return arrays


def assert_same_array(got: Any, expected: np.ndarray) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
    if expected.ndim > 1 and expected.flags.f_contiguous and not expected.flags.c_contiguous:
        assert got.flags.f_contiguous


def ndarray_ext(header: Any, data: bytes = b"") -> bytes:
    """A message that is one ndarray extension of mjfast.interop.remote.codec, with this header and
    element bytes (needs msgpack)."""
    import msgpack

    from mjfast.interop.remote.codec import NDARRAY_EXT

    return msgpack.packb(msgpack.ExtType(NDARRAY_EXT, msgpack.packb(header) + data))


# A plain Zenoh router (as a ROS 2 router, rmw_zenohd, is one) listening on argv[1] and, given
# argv[2], connected to it; it prints "up" and runs until its stdin closes.
_ZENOH_ROUTER = """
import json, sys, zenoh
config = zenoh.Config()
config.insert_json5("mode", '"router"')
config.insert_json5("listen/endpoints", json.dumps([sys.argv[1]]))
config.insert_json5("connect/endpoints", json.dumps(sys.argv[2:]))
config.insert_json5("scouting/multicast/enabled", "false")
config.insert_json5("scouting/gossip/enabled", "false")
session = zenoh.open(config)
print("up", flush=True)
sys.stdin.read()
session.close()
"""


def free_port() -> int:
    """A TCP port on the loopback interface that was free a moment ago (for a Zenoh endpoint)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def zenoh_router(endpoint: str, connect: str | None = None) -> Iterator[None]:
    """A Zenoh router that is not mjfast, in a child process, for the block's length."""
    router = subprocess.Popen([sys.executable, "-c", _ZENOH_ROUTER, endpoint,
                               *([connect] if connect else [])], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert router.stdout is not None and router.stdout.readline() == "up\n"
        yield
    finally:
        assert router.stdin is not None and router.stdout is not None
        router.stdin.close()
        router.stdout.close()
        try:
            router.wait(timeout=20)
        except subprocess.TimeoutExpired:
            router.kill()
            router.wait()


# -- an independent ROS 2 client (zenoh-ros2-sdk), offline ----------------------------------------


def _msg_field_type(desc: Any) -> str:
    kind, rest = desc
    if kind.name == "NAME":
        package, _, name = rest.split("/")
        return f"{package}/{name}"
    if kind.name == "BASE":
        return f"string<={rest[1]}" if rest[0] == "string" and rest[1] else rest[0]
    inner, count = rest
    if kind.name == "ARRAY":
        return f"{_msg_field_type(inner)}[{count}]"
    return f"{_msg_field_type(inner)}[<={count}]" if count else f"{_msg_field_type(inner)}[]"


def write_ros_definitions(folder: Path, packages: dict[str, str]) -> None:
    """The .msg/.srv files zenoh-ros2-sdk looks up (`<pkg>/msg/<Name>.msg`): every message of
    rosbags' Jazzy typestore (written from its field definitions), then `packages` ({"pkg/srv/
    Name": text}), which the caller brings itself (they replace what the store would give)."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    for ros_type, (consts, fields) in store.fielddefs.items():
        package, kind, base = ros_type.split("/")
        if kind != "msg":
            continue
        lines = [f"{typ} {name}={value}" for name, typ, value in consts]
        lines += [f"{_msg_field_type(desc)} {name}" for name, desc in fields
                  if name != "structure_needs_at_least_one_member"]
        path = folder / package / kind / f"{base}.msg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    for name, text in packages.items():
        package, kind, base = name.split("/")
        path = folder / package / kind / f"{base}.{kind}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@contextlib.contextmanager
def ros_sdk(folder: Path, router_port: int) -> Iterator[Any]:
    """zenoh-ros2-sdk connected (as a Zenoh client) to the router on `router_port`, reading
    its definitions from `folder` (write_ros_definitions), never from the network."""
    import zenoh_ros2_sdk
    from zenoh_ros2_sdk import message_registry
    from zenoh_ros2_sdk.session import ZenohSession

    saved = os.environ.get("ZENOH_CONFIG_OVERRIDE")
    os.environ["ZENOH_CONFIG_OVERRIDE"] = 'mode="client";listen/endpoints=[]'
    os.environ["ZENOH_ROS2_SDK_CACHE"] = str(folder / "no-downloads")
    message_registry._registry = message_registry.MessageRegistry(str(folder))
    ZenohSession._instance = None
    ZenohSession.get_instance("127.0.0.1", router_port)
    try:
        yield zenoh_ros2_sdk
    finally:
        if ZenohSession._instance is not None:
            ZenohSession._instance.close()
            ZenohSession._instance = None
        message_registry._registry = None
        if saved is None:
            os.environ.pop("ZENOH_CONFIG_OVERRIDE", None)
        else:
            os.environ["ZENOH_CONFIG_OVERRIDE"] = saved


# -- SPEC §23's controllers (tests/plugins/test_trajectory_controllers.py, tests/interop/ros2) ---

CONTROLLER_DT = 0.001
# The actuator of each command interface, on joint {j}.
ACTUATORS = {
    "position": '<position joint="{j}" kp="3000" kv="80"/>',
    "velocity": '<velocity joint="{j}" kv="200"/>',
    "effort": '<motor joint="{j}"/>',
}


def controller_arm_xml(*interfaces: str) -> str:
    """Two hinges ("a", "b") without gravity, each with an actuator of each interface given."""
    actuators = "".join(ACTUATORS[i].format(j=j) for j in ("a", "b") for i in interfaces)
    return f"""
<mujoco>
  <option gravity="0 0 0" timestep="{CONTROLLER_DT}" integrator="implicitfast"/>
  <worldbody>
    <body><joint name="a" type="hinge" axis="0 0 1" damping="0.5"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1" contype="0" conaffinity="0"/>
      <body pos=".3 0 0"><joint name="b" type="hinge" axis="0 0 1" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" mass="1" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>{actuators}</actuator>
</mujoco>"""


# A slide "finger" driven by a position servo toward a block (the object) whose face is at
# x = 0.08: the finger (0.01 thick) stops at 0.07 and squeezes it.
FINGER_ON_OBJECT_XML = f"""
<mujoco>
  <option gravity="0 0 0" timestep="{CONTROLLER_DT}" integrator="implicitfast"/>
  <worldbody>
    <body name="object" pos="0.1 0 0">
      <joint name="object" type="slide" axis="1 0 0" range="0 0.001"/>
      <geom type="box" size="0.02 0.05 0.05" mass="0.2"/>
    </body>
    <body name="finger">
      <joint name="finger" type="slide" axis="1 0 0" damping="5"/>
      <geom type="box" size="0.01 0.02 0.02" mass="0.1"/>
    </body>
  </worldbody>
  <actuator><position name="finger" joint="finger" kp="300" forcerange="-50 50"/></actuator>
</mujoco>"""
