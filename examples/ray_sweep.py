"""A PD gain sweep on Ray: the demo arm held in its pose by mjfast/PoseHoldPD, one job per (kp, kd).

    python examples/ray_sweep.py [--jobs N] [--duration S] [--address ADDR] [--out DIR]
        [--num-cpus-per-job C] [--no-plot]

Runs N jobs with mjfast.ray.run_many on whatever cluster ray.init() finds: a new local one by
default (or the one RAY_ADDRESS names), an existing cluster with --address (e.g. "auto" on one of
its nodes, or "ray://head:10001"). Each job steps the bundled demo arm (python/mjfast/data) for
S simulated seconds from its initial pose and reports how far the arm still is from the held
pose. Writes DIR/ray_sweep.csv (kp, kd, final error, error message) and DIR/ray_sweep.png (final
error against kp, one line per kd; needs matplotlib). The model goes to the workers as MJCF text
and the plugin is mjfast's own, so the workers need only mjfast installed (pip install
'mjfast[ray]').
"""

from __future__ import annotations

import argparse
import copy
import csv
import importlib.util
import math
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

KD_VALUES = (2.0, 10.0, 40.0, 120.0)  # the damping levels; kp is spread over the rest of N
KP_RANGE = (5.0, 5000.0)  # log-spaced


def gain_grid(jobs: int) -> list[tuple[float, float]]:
    """(kp, kd) pairs: up to four kd levels, each with the same log-spaced kps; N at most."""
    kds = KD_VALUES[:max(1, min(len(KD_VALUES), jobs))]
    per_kd = max(1, jobs // len(kds))
    kps = np.geomspace(*KP_RANGE, per_kd) if per_kd > 1 else np.array([math.sqrt(math.prod(
        KP_RANGE))])
    return [(float(kp), kd) for kd in kds for kp in kps]


def final_error(model: mujoco.MjModel, qpos: np.ndarray, target: dict[str, float]) -> float:
    """RMS distance (rad) of the held joints from their targets."""
    errors = [qpos[model.jnt_qposadr[model.joint(name).id]] - value
              for name, value in target.items()]
    return float(np.sqrt(np.mean(np.square(errors))))


def plot(rows: list[dict[str, Any]], duration: float, path: Path) -> None:
    import matplotlib  # lazily: only the plot needs it

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for kd in sorted({row["kd"] for row in rows}):
        done = [row for row in rows if row["kd"] == kd and row["error"] is None]
        axes.plot([row["kp"] for row in done], [row["final_error_rad"] for row in done],
                  marker="o", label=f"kd = {kd:g}")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("kp (N·m/rad)")
    axes.set_ylabel(f"RMS joint error after {duration:g} s (rad)")
    axes.set_title("mjfast/PoseHoldPD on the demo arm: final error against PD gains")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(title="damping")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=32, help="number of (kp, kd) jobs (32)")
    parser.add_argument("--duration", type=float, default=2.0,
                        help="simulated seconds per job (2.0)")
    parser.add_argument("--address", default=None,
                        help="a Ray cluster to connect to (default: what ray.init() finds)")
    parser.add_argument("--num-cpus-per-job", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("ray_sweep_out"),
                        help="output folder (ray_sweep_out)")
    parser.add_argument("--no-plot", action="store_true", help="write the table only")
    args = parser.parse_args(argv)
    if args.jobs < 1 or not args.duration > 0:
        parser.error("--jobs must be >= 1 and --duration > 0")
    # Checked before any work: a missing plotting library should not cost a whole sweep.
    if not args.no_plot and importlib.util.find_spec("matplotlib") is None:
        print("ray_sweep: the plot needs matplotlib, which is not installed: "
              "pip install matplotlib (or pass --no-plot for the table only)", file=sys.stderr)
        return 1
    try:
        import ray

        import mjfast.ray
    except ImportError:
        print("ray_sweep: needs Ray: pip install 'mjfast[ray]'", file=sys.stderr)
        return 1

    data = files("mjfast") / "data"
    xml = (data / "demo_arm.xml").read_text()  # text, not a path: workers may be other machines
    base_params = yaml.safe_load((data / "demo.yaml").read_text())
    target = base_params["mujoco_server"]["MujocoPlugins"][0]["target"]
    grid = gain_grid(args.jobs)
    jobs = []
    for kp, kd in grid:
        params = copy.deepcopy(base_params)
        params["mujoco_server"]["MujocoPlugins"][0].update(kp=kp, kd=kd)
        jobs.append({"model": xml, "params": params, "duration": args.duration})

    ray.init(address=args.address, include_dashboard=False, logging_level="WARNING")
    try:
        print(f"ray_sweep: {len(jobs)} jobs of {args.duration:g} s on a cluster of "
              f"{ray.cluster_resources().get('CPU', 0):g} CPUs", file=sys.stderr)
        results = mjfast.ray.run_many(jobs, num_cpus_per_job=args.num_cpus_per_job)
    finally:
        ray.shutdown()

    model = mujoco.MjModel.from_xml_string(xml)
    rows = []
    for (kp, kd), result in zip(grid, results, strict=True):
        error = None if result["error"] else final_error(model, result["qpos"], target)
        rows.append({"kp": kp, "kd": kd, "final_error_rad": error, "time": result["time"],
                     "error": result["error"]})
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "ray_sweep.csv"
    with table.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"ray_sweep: wrote {table}")
    failed = [row for row in rows if row["error"]]
    for row in failed:
        print(f"ray_sweep: kp={row['kp']:g} kd={row['kd']:g} failed: {row['error']}",
              file=sys.stderr)
    if not args.no_plot:
        figure = args.out / "ray_sweep.png"
        plot(rows, args.duration, figure)
        print(f"ray_sweep: wrote {figure}")
    best = min((row for row in rows if not row["error"]), key=lambda row: row["final_error_rad"],
               default=None)
    if best is not None:
        print(f"ray_sweep: smallest final error {best['final_error_rad']:.2e} rad at "
              f"kp={best['kp']:g}, kd={best['kd']:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
