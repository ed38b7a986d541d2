"""Record a run, then rewind it and look again (SPEC §20; needs `pip install "mjfast[ros2]"`).

An arm is pushed by control writes and knocked once through a service call while everything is
recorded into a rosbag2 bag (MCAP). The bag is then opened: its JointState messages are read back,
an env is made at the moment just before the knock (`env_at`), and the rest of the run is replayed
from there and checked against the recording, bit for bit:

    python examples/record_and_rewind.py [--dir /tmp/mjfast-run]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import mjfast
from mjfast.recording import replay

ARM = """
<mujoco model="two-link arm">
  <option timestep="0.002"/>
  <worldbody>
    <body name="upper"><joint name="shoulder" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03"/>
      <body name="lower" pos="0 0 -0.4"><joint name="elbow" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.025"/></body></body>
  </worldbody>
  <actuator><motor joint="shoulder"/><motor joint="elbow"/></actuator>
</mujoco>
"""
PARAMS = {"mujoco_server": {"MujocoPlugins": [
    {"type": "mjfast/JointStatePublisher", "rate_hz": 50, "topic": "/joint_states"}]}}


def main(directory: Path) -> None:
    bag = directory / "run"
    with mjfast.MujocoEnv(ARM, params=PARAMS) as env:
        recording = env.record(bag)  # a new directory: metadata.yaml + one .mcap file
        env.control.write(ctrl=np.array([0.4, -0.2]))
        env.step(500)  # 1 s
        knock_time = float(env.data.time)
        env.set_joint_state(velocities={"elbow": 8.0})  # recorded as a command at this step
        env.step(750)
        final = env.data.qpos.copy()
        recording.stop()  # (env.close() stops it too)

    run = mjfast.open_recording(bag)
    print("topics:", ", ".join(f"{topic} ({kind})" for topic, kind in run.topics().items()))
    states = run.messages("/joint_states")
    # Log times are simulated time in nanoseconds: the last message at or before the knock.
    before = [message for time, message in states if time <= knock_time + 1e-9][-1]
    print(f"{len(states)} JointState messages; at t={knock_time:.3f} s the elbow was at "
          f"{before['position'][1]:+.4f} rad")

    # Rewind: a new env at the knock (the last state before it, stepped with the recorded
    # commands), then look again: knock it harder this time and step to the same end.
    rewound = run.env_at(knock_time)
    try:
        print(f"rewound to t={rewound.data.time:.3f} s, elbow {rewound.data.qpos[1]:+.4f} rad")
        rewound.set_joint_state(velocities={"elbow": 12.0})
        rewound.step(750)
        print(f"with a harder knock the elbow ends at {rewound.data.qpos[1]:+.4f} rad "
              f"instead of {final[1]:+.4f}")
    finally:
        rewound.close()

    result = replay(bag, check=True)  # what `mjfast replay DIR --check` does
    assert result.first_difference is None, result
    print(f"replay matches {result.states} states")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to write the bag (default: a temporary directory)")
    arguments = parser.parse_args()
    if arguments.dir is None:
        with tempfile.TemporaryDirectory() as temporary:
            main(Path(temporary))
    else:
        main(arguments.dir)
