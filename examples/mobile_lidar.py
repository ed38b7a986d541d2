"""A small wheeled base with a 2-D and a 3-D lidar (mjfast/Lidar) driving in a room with obstacles.

    python examples/mobile_lidar.py [--out DIR] [--duration S]

The base drives a curve for `--duration` simulated seconds (default 2) with a 2-D lidar (one ring
of 720 rays, 10 Hz, synchronous) and a 3-D lidar (16 x 512 rays, 10 Hz, asynchronous) on its
mast, then writes two pictures of the latest scans: `scan_2d.png`, the 2-D scan as a polar plot
(azimuth counter-clockwise from the base's forward axis), and `scan_3d.png`, the 3-D point cloud
in the lidar's frame, coloured by height. Needs matplotlib (`pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import mjfast

ROOM_XML = """
<mujoco model="mobile_lidar">
  <!-- implicitfast: the wheels' velocity servos are stiff for their small inertia -->
  <option timestep="0.002" integrator="implicitfast"/>
  <default>
    <geom rgba="0.7 0.7 0.7 1"/>
  </default>
  <worldbody>
    <light pos="0 0 4" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="4 3 0.1" rgba="0.9 0.9 0.9 1"/>
    <geom name="wall_east" type="box" pos="3 0 0.6" size="0.05 2 0.6"/>
    <geom name="wall_west" type="box" pos="-3 0 0.6" size="0.05 2 0.6"/>
    <geom name="wall_north" type="box" pos="0 2 0.6" size="3 0.05 0.6"/>
    <geom name="wall_south" type="box" pos="0 -2 0.6" size="3 0.05 0.6"/>
    <geom name="crate" type="box" pos="1.4 0.6 0.25" size="0.25 0.25 0.25" euler="0 0 20"/>
    <geom name="pillar" type="cylinder" pos="-1.2 -0.8 0.6" size="0.15 0.6"/>
    <geom name="barrel" type="cylinder" pos="0.6 -1.2 0.3" size="0.25 0.3"/>
    <geom name="table_top" type="box" pos="-1.5 1.1 0.7" size="0.5 0.35 0.03"/>
    <geom name="table_leg" type="cylinder" pos="-1.5 1.1 0.35" size="0.05 0.35"/>
    <geom name="ball" type="sphere" pos="2.2 -1.0 0.3" size="0.3"/>
    <body name="base" pos="-0.5 0 0.08">
      <freejoint/>
      <geom name="chassis" type="box" size="0.2 0.14 0.04" mass="4" rgba="0.2 0.4 0.8 1"/>
      <geom name="caster" type="sphere" pos="-0.15 0 -0.04" size="0.04" friction="0 0 0"/>
      <geom name="mast" type="cylinder" pos="0.05 0 0.12" size="0.03 0.08"/>
      <site name="lidar_2d" pos="0.05 0 0.22"/>
      <site name="lidar_3d" pos="0.05 0 0.25"/>
      <body name="wheel_left" pos="0.05 0.17 -0.02" zaxis="0 1 0">
        <joint name="left" type="hinge" axis="0 0 1"/>
        <geom type="cylinder" size="0.06 0.02" mass="0.3" rgba="0.1 0.1 0.1 1"/>
      </body>
      <body name="wheel_right" pos="0.05 -0.17 -0.02" zaxis="0 1 0">
        <joint name="right" type="hinge" axis="0 0 1"/>
        <geom type="cylinder" size="0.06 0.02" mass="0.3" rgba="0.1 0.1 0.1 1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <velocity name="left" joint="left" kv="2"/>
    <velocity name="right" joint="right" kv="2"/>
  </actuator>
</mujoco>
"""

PLUGINS: list[dict[str, Any]] = [
    {"type": "mjfast/Lidar", "name": "lidar_2d", "site": "lidar_2d",
     "horizontal": {"samples": 720}, "range": {"min": 0.12, "max": 6.0}, "rate_hz": 10,
     "noise_std": 0.005, "seed": 1},
    {"type": "mjfast/Lidar", "name": "lidar_3d", "site": "lidar_3d", "async": True,
     "horizontal": {"samples": 512},
     "vertical": {"samples": 16, "min_angle": -0.26, "max_angle": 0.26},
     "range": {"min": 0.12, "max": 6.0}, "rate_hz": 10},
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("mobile_lidar_out"))
    parser.add_argument("--duration", type=float, default=2.0)
    args = parser.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("mobile_lidar: this example plots with matplotlib: pip install matplotlib",
              file=sys.stderr)
        return 1

    params = {"mujoco_server": {"MujocoPlugins": PLUGINS}}
    with mjfast.MujocoEnv(ROOM_XML, params=params) as env:
        for info in env.plugins:
            if info.failure is not None:
                print(f"mobile_lidar: {info.name} failed: {info.failure.message}",
                      file=sys.stderr)
                return 1
        env.data.ctrl[:] = [4.0, 6.0]  # wheel speeds (left, right), rad/s: a left curve
        env.step(round(args.duration / env.model.opt.timestep))
        scan = env.bus.latest("/mujoco_server/lidar_2d/scan")
        cloud = env.bus.latest("/mujoco_server/lidar_3d/points")
        base = env.data.body("base").xpos.copy()

    args.out.mkdir(parents=True, exist_ok=True)
    ranges = scan["ranges"]
    azimuth = scan["angle_min"] + scan["angle_increment"] * np.arange(ranges.size)
    hit = np.isfinite(ranges)
    figure = plt.figure(figsize=(6, 6))
    axes = figure.add_subplot(projection="polar")
    axes.scatter(azimuth[hit], ranges[hit], s=3, c="tab:red")
    axes.set_rmax(scan["range_max"])
    axes.set_title(f"2-D scan at t = {scan['time']:.2f} s ({hit.sum()} of {ranges.size} returns)"
                   f"\nbase at x = {base[0]:.2f}, y = {base[1]:.2f}; 0 rad = forward")
    figure.savefig(args.out / "scan_2d.png", dpi=100)
    plt.close(figure)

    points = cloud["points"].reshape(-1, 3)
    points = points[np.isfinite(points).all(axis=1)]
    figure = plt.figure(figsize=(8, 6))
    axes = figure.add_subplot(projection="3d")
    axes.scatter(points[:, 0], points[:, 1], points[:, 2], s=1, c=points[:, 2], cmap="viridis")
    axes.set_xlabel("x (forward), m")
    axes.set_ylabel("y (left), m")
    axes.set_zlabel("z (up), m")
    axes.set_box_aspect((np.ptp(points[:, 0]), np.ptp(points[:, 1]),
                         max(np.ptp(points[:, 2]), 0.5)))
    axes.view_init(elev=35, azim=-60)
    axes.set_title(f"3-D scan at t = {cloud['time']:.2f} s, frame '{cloud['frame']}' "
                   f"({len(points)} points)")
    figure.savefig(args.out / "scan_3d.png", dpi=100)
    plt.close(figure)
    print(f"wrote {args.out / 'scan_2d.png'} and {args.out / 'scan_3d.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
