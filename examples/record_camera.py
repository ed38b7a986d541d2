"""Records a short PNG image sequence from one offscreen camera, to look at what the server sees.

    python examples/record_camera.py [MODEL] [--camera NAME] [--frames N] [--out DIR]
        [--width W --height H] [--rate HZ] [--plane rgb|depth|segmentation]

Without MODEL it records a bundled scene (a box falling onto a floor). Frames are rendered on
mjfast's render thread with render_sync=True, so a run is reproducible. PNGs are written with
zlib and struct only (no imaging dependency); depth is scaled to 8-bit grey over the scene's
depth range as seen from the camera (from the model's centre and extent, the same for every
frame: near is white, the far side of the scene dark, the background beyond it black), not over
the camera's far plane; segmentation shows each object id in its own colour.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import zlib
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np

import mjfast

DEMO_XML = """
<mujoco>
  <visual><global offwidth="320" offheight="240"/></visual>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1=".2 .3 .4" rgb2=".3 .4 .5"
             width="256" height="256"/>
    <material name="grid" texture="grid" texrepeat="4 4"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom type="plane" size="2 2 .1" material="grid"/>
    <camera name="front" pos="0 -2.5 1.2" xyaxes="1 0 0 0 0.45 1"/>
    <body pos="0 0 1.2" euler="20 30 0">
      <freejoint/>
      <geom type="box" size=".2 .2 .2" rgba=".9 .2 .1 1"/>
    </body>
    <body pos=".5 .2 .6">
      <freejoint/>
      <geom type="sphere" size=".12" rgba=".1 .7 .2 1"/>
    </body>
  </worldbody>
</mujoco>
"""


def write_png(path: Path, pixels: np.ndarray) -> None:
    """Writes an H x W x 3 uint8 image as an 8-bit RGB PNG."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))  # filter 0 rows

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def scene_depth_range(model: mujoco.MjModel, data: mujoco.MjData, camera: int
                      ) -> tuple[float, float]:
    """(near, far) in metres: the depths at which the scene (the model's bounding sphere,
    `stat.center` and `stat.extent`) can appear to `camera`."""
    distance = float(np.linalg.norm(data.cam_xpos[camera] - model.stat.center))
    extent = float(model.stat.extent)
    return max(0.0, distance - extent), distance + extent


def to_rgb(plane: str, data: np.ndarray,
           depth_range: tuple[float, float] | None = None) -> np.ndarray:
    if plane == "rgb":
        return np.ascontiguousarray(data)
    if plane == "depth":
        near, far = depth_range or (float(data.min()), float(data.max()))
        grey = 40 + 215 * (1 - np.clip((data - near) / max(far - near, 1e-9), 0, 1))
        grey[data >= far] = 0  # the background, out to the far plane
        return np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    ids = data[..., 0].astype(np.int64) + 1  # background -1 -> 0 (black)
    palette = np.random.default_rng(0).integers(40, 256, size=(int(ids.max()) + 1, 3))
    palette[0] = 0
    return palette[ids].astype(np.uint8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", help="MJCF file (default: a bundled scene)")
    parser.add_argument("--camera", help="camera name (default: the model's first camera)")
    parser.add_argument("--frames", type=int, default=10, help="PNGs to write (default 10)")
    parser.add_argument("--out", type=Path, default=Path("camera_frames"),
                        help="directory for the PNGs (default camera_frames)")
    parser.add_argument("--width", type=int,
                        help="image width in pixels (default: the model's offscreen width)")
    parser.add_argument("--height", type=int,
                        help="image height in pixels (default: the model's offscreen height)")
    parser.add_argument("--rate", type=float, default=30.0,
                        help="frames per simulated second (default 30)")
    parser.add_argument("--plane", choices=("rgb", "depth", "segmentation"), default="rgb",
                        help="what to record (default rgb; depth is scaled to the scene)")
    args = parser.parse_args(argv)

    model_source = args.model or DEMO_XML
    probe = (mujoco.MjModel.from_xml_path(args.model) if args.model
             else mujoco.MjModel.from_xml_string(DEMO_XML))
    if probe.ncam == 0:
        print("the model has no camera to record from", file=sys.stderr)
        return 1
    camera_name = args.camera or mujoco.mj_id2name(probe, mujoco.mjtObj.mjOBJ_CAMERA, 0)
    camera_params = {"rate_hz": args.rate, "planes": [args.plane]}
    if args.width:
        camera_params["width"] = args.width
    if args.height:
        camera_params["height"] = args.height
    params = {"mujoco_server": {"cameras": {camera_name: camera_params}}}

    args.out.mkdir(parents=True, exist_ok=True)
    with mjfast.MujocoEnv(model_source, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera(camera_name)
        camera.enable_frames()
        steps_per_frame = max(1, round(1.0 / (args.rate * env.model.opt.timestep)))
        camera_id = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_CAMERA, camera_name)
        for index in range(args.frames):
            env.step(steps_per_frame)
            with camera.take_latest(args.plane) as lease:
                path = args.out / f"{camera_name}_{index:04d}.png"
                depth_range = scene_depth_range(env.model, env.data, camera_id)
                write_png(path, to_rgb(args.plane, lease.data, depth_range))
                print(f"{path}  t={lease.simulation_time_ns / 1e9:.3f}s  "
                      f"{lease.width}x{lease.height}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
