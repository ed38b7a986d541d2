"""A Python PD controller on its own thread at 1 kHz (wall clock) against `env.start()`.

It reads and writes only through `env.control` (SPEC §7), tracks a sinusoidal joint trajectory on
a 7-dof arm built here, and prints the tracking error at the end:

    python examples/control_loop.py --duration 2
"""

from __future__ import annotations

import argparse
import math
import threading
import time

import mujoco
import numpy as np

import mjfast

N_JOINTS = 7


def arm_xml() -> str:
    """A 7-dof arm with torque motors, under gravity, without contacts."""
    lengths = [0.3, 0.3, 0.3, 0.25, 0.2, 0.1]
    axes = ["0 0 1", "0 1 0"]
    body = ('<joint name="j7" axis="0 0 1"/>'
            '<geom type="box" size="0.04 0.04 0.02"/><site name="tool"/>')
    for index in range(len(lengths), 0, -1):  # built inside out: each link wraps the rest
        length = lengths[index - 1]
        body = (f'<joint name="j{index}" axis="{axes[(index - 1) % 2]}"/>'
                f'<geom fromto="0 0 0 0 0 {length}"/>'
                f'<body name="link{index + 1}" pos="0 0 {length}">{body}</body>')
    motors = "".join(f'<motor name="m{i}" joint="j{i}"/>' for i in range(1, N_JOINTS + 1))
    return f"""
<mujoco model="control_loop_arm">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <default>
    <joint type="hinge" damping="0.1" armature="0.02" range="-2.8 2.8" limited="true"/>
    <geom type="capsule" size="0.03" density="500" contype="0" conaffinity="0"/>
    <motor ctrlrange="-80 80" ctrllimited="true"/>
  </default>
  <worldbody>
    <body name="link1" pos="0 0 0.1">{body}</body>
  </worldbody>
  <actuator>{motors}</actuator>
</mujoco>
"""


def target(t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Desired joint positions, velocities and accelerations at simulated time t: slow sines,
    each joint its own phase, starting away from the arm's initial pose so that the loop has an
    error to remove."""
    joints = np.arange(N_JOINTS)
    omega = 2 * math.pi * 0.5
    phase = 0.7 * joints
    amplitude = 0.3
    offset = 0.2
    angle = omega * t + phase
    return (offset + amplitude * np.sin(angle), amplitude * omega * np.cos(angle),
            -amplitude * omega**2 * np.sin(angle))


class PDController:
    """Joint-space PD in computed-torque form: M(q) (qdd_d + kp e + kd de) + bias(q, qd), with the
    mass matrix and bias (gravity + Coriolis) from a private MjData, so that one pair of gains
    suits every joint whatever inertia it carries."""

    def __init__(self, env: mjfast.MujocoEnv, kp: float = 400.0, kd: float = 40.0) -> None:
        self.env = env
        self.kp, self.kd = kp, kd
        # The controller's own model copy and data: it never touches the simulation's.
        self.model = mujoco.MjModel.from_xml_string(arm_xml())
        self.data = mujoco.MjData(self.model)
        self.errors: list[tuple[float, float]] = []  # (simulated time, max |error|)
        self.cycles = 0
        self.late_cycles = 0
        self.stop = threading.Event()
        self.failure: BaseException | None = None

        self.mass_matrix = np.zeros((self.model.nv, self.model.nv))
        self.bias = np.zeros(self.model.nv)
        self.low, self.high = self.model.actuator_ctrlrange.T

    def dynamics(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Mass matrix and bias forces at (qpos, qvel), into self.mass_matrix and self.bias."""
        model, data = self.model, self.data
        data.qpos[:] = qpos
        data.qvel[:] = qvel
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_crb(model, data)
        mujoco.mj_fullM(model, data, self.mass_matrix)
        mujoco.mj_comVel(model, data)
        mujoco.mj_rne(model, data, 0, self.bias)

    def step(self) -> None:
        state = self.env.control.read()
        desired, desired_velocity, desired_acceleration = target(state.time)
        error = desired - state.qpos
        self.dynamics(state.qpos, state.qvel)
        acceleration = (desired_acceleration + self.kp * error
                        + self.kd * (desired_velocity - state.qvel))
        torque = self.mass_matrix @ acceleration + self.bias
        self.env.control.write(ctrl=np.clip(torque, self.low, self.high))
        self.errors.append((state.time, float(np.max(np.abs(error)))))
        self.cycles += 1

    def run(self, rate_hz: float) -> None:
        try:
            self._loop(rate_hz)
        except BaseException as error:  # reported by main(), not lost with the thread
            self.failure = error
            raise

    def _loop(self, rate_hz: float) -> None:
        period = 1.0 / rate_hz
        next_tick = time.perf_counter()
        while not self.stop.is_set():
            self.step()
            next_tick += period
            delay = next_tick - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                self.late_cycles += 1
                if delay < -10 * period:  # far behind (a stall): do not try to catch up
                    next_tick = time.perf_counter()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="wall-clock seconds to run")
    parser.add_argument("--rate", type=float, default=1000.0, help="control rate in Hz")
    parser.add_argument("--realtime-factor", type=float, default=1.0,
                        help="physics pacing (simulated seconds per wall second)")
    args = parser.parse_args(argv)

    with mjfast.MujocoEnv(arm_xml()) as env:
        controller = PDController(env)
        env.start(args.realtime_factor)
        thread = threading.Thread(target=controller.run, args=(args.rate,), name="pd-controller")
        thread.start()
        try:
            time.sleep(args.duration)
        finally:
            controller.stop.set()
            thread.join()
            env.stop()
        steps = env.statistics()["env"]["steps"]

    if controller.failure is not None:
        print(f"the controller failed: {type(controller.failure).__name__}: "
              f"{controller.failure}")
        return 1
    if not controller.errors:
        print("no control cycle ran")
        return 1
    times = np.array([t for t, _ in controller.errors])
    errors = np.array([e for _, e in controller.errors])
    last_half = errors[times >= times[-1] / 2] if times[-1] > 0 else errors
    print(f"control cycles: {controller.cycles} in {args.duration:.2f} s "
          f"({controller.cycles / args.duration:.0f} Hz, {controller.late_cycles} late); "
          f"physics steps: {steps}")
    print(f"initial tracking error: {errors[0]:.4f} rad")
    print(f"tracking error (max |q_d - q| over the last half, {times[-1]:.2f} s simulated): "
          f"{float(np.max(last_half)):.4f} rad")
    print(f"final tracking error: {errors[-1]:.4f} rad")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
