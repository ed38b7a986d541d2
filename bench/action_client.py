"""The ROS 2 client of bench/test_bench_actions.py's round trips, in a process of its own as a
ROS 2 client (MoveIt, `ros2 action send_goal`) is: zenoh-ros2-sdk's service clients, with the
action types tests/interop/ros2/test_actions.py derives from control_msgs' definitions.

Run as `python bench/action_client.py ROUTER_PORT FOLDER DOMAIN` by the benchmark; it prints
`ready`, then answers each line `send_goal N` or `std_srvs N` on stdin with one JSON line: the
seconds per call of N calls in a row, and for send_goal the ids of the goals (all accepted).
In the benchmark's own process the client would share the server's interpreter lock, so each
round trip would also pay for the server's work after its reply (the status arrays), which a
client elsewhere does not wait for.

Imported as `action_client` too, for `fjt_goal` (pytest puts bench/ on sys.path).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

TESTS = Path(__file__).resolve().parent.parent / "tests"
FJT = "control_msgs/action/FollowJointTrajectory"
ACTION = "/mujoco_server/arm/follow_joint_trajectory"
JOINTS = [f"j{i}" for i in range(1, 8)]


def fjt_goal(client: Any) -> Any:
    """A FollowJointTrajectory goal of two 7-joint points (positions only), as the SDK types it."""
    from test_actions import goal_message

    types = client.send_goal.session_mgr.store.types
    point = types["trajectory_msgs/msg/JointTrajectoryPoint"]
    duration = types["builtin_interfaces/msg/Duration"]
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](
        sec=0, nanosec=0), frame_id="")
    trajectory = types["trajectory_msgs/msg/JointTrajectory"](
        header=header, joint_names=JOINTS,
        points=[point(positions=np.full(7, 0.1 * k), velocities=np.zeros(0),
                      accelerations=np.zeros(0), effort=np.zeros(0),
                      time_from_start=duration(sec=k, nanosec=0)) for k in (1, 2)])
    return goal_message(client, FJT, trajectory=trajectory,
                        multi_dof_trajectory=types["trajectory_msgs/msg/MultiDOFJointTrajectory"](
                            header=header, joint_names=[], points=[]),
                        path_tolerance=[], component_path_tolerance=[], goal_tolerance=[],
                        component_goal_tolerance=[],
                        goal_time_tolerance=duration(sec=0, nanosec=0))


def main(port: int, folder: Path, domain: int) -> None:
    from test_actions import ActionClient, sdk_session

    router = (f"tcp/127.0.0.1:{port}", port)
    with sdk_session(router, folder) as sdk:
        # The services only, as the std_srvs client: no status or feedback subscriber.
        client = ActionClient(sdk, router, domain, ACTION, FJT, topics=False)
        pause = sdk.ROS2ServiceClient("/mujoco_server/pause", "std_srvs/srv/SetBool",
                                      node_name="bench", domain_id=domain, router_port=port,
                                      timeout=10.0)
        goal = fjt_goal(client)
        print("ready", flush=True)
        for line in sys.stdin:
            command, count = line.split()
            calls = int(count)
            if command == "send_goal":
                raw = [uuid.uuid4().bytes for _ in range(calls)]
                ids = [client.uuid(goal_id) for goal_id in raw]
                start = time.perf_counter()
                replies = [client.send_goal.call(goal_id=goal_id, goal=goal) for goal_id in ids]
                elapsed = time.perf_counter() - start
                accepted = all(reply is not None and reply.accepted for reply in replies)
                answer = {"s": elapsed / calls, "ok": accepted, "ids": [r.hex() for r in raw]}
            else:
                start = time.perf_counter()
                replies = [pause.call(data=False) for _ in range(calls)]
                elapsed = time.perf_counter() - start
                answer = {"s": elapsed / calls,
                          "ok": all(reply is not None and reply.success for reply in replies)}
            print(json.dumps(answer), flush=True)
        client.close()
        pause.close()


if __name__ == "__main__":
    sys.path[:0] = [str(TESTS), str(TESTS / "interop" / "ros2")]
    main(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
