"""A mass-randomisation sweep on one VectorEnv: the demo arm held in its pose by mjfast/PoseHoldPD
in many worlds at once, each with its link masses drawn anew.

    python examples/vector_sweep.py [--worlds N] [--duration S] [--seed K] [--threads T]
        [--out DIR] [--no-plot]

Builds an `mjfast.VectorEnv` of N worlds (64) of the bundled demo arm (python/mjfast/data), with
the demo's PoseHoldPD plugin in every world and the `randomize` parameter scaling each link's mass
by a factor drawn from [0.5, 2.0] (world i seeded with K + i, so a run is reproducible). Steps all
worlds S simulated seconds (2.0) from their initial pose on T worker threads, then measures how
far each arm is from the held pose: a fixed-gain PD settles with a gravity sag that grows with the
links' weight. Writes DIR/vector_sweep.csv (world, mass factor of the arm, final RMS error) and
DIR/vector_sweep.png (the distribution of the final errors, and the error against the arm's mass
factor; needs matplotlib).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

MASS_SCALE = (0.5, 2.0)


def sweep(worlds: int, duration: float, seed: int, threads: int | None) -> list[dict[str, Any]]:
    """Runs the worlds and returns one row per world."""
    import mjfast

    data = files("mjfast") / "data"
    xml = (data / "demo_arm.xml").read_text()
    params = yaml.safe_load((data / "demo.yaml").read_text())
    namespace = params["mujoco_server"]
    target: dict[str, float] = namespace["MujocoPlugins"][0]["target"]
    links = [f"link{i}" for i in range(1, 8)]
    namespace["randomize"] = [{"field": "body_mass", "names": links, "scale": list(MASS_SCALE)}]

    nominal = mujoco.MjModel.from_xml_string(xml)
    link_ids = [nominal.body(name).id for name in links]
    nominal_mass = float(nominal.body_mass[link_ids].sum())
    addresses = [nominal.jnt_qposadr[nominal.joint(name).id] for name in target]
    held = np.array(list(target.values()))

    with mjfast.VectorEnv(xml, worlds, params, threads=threads, seed=seed) as vector:
        steps = round(duration / nominal.opt.timestep)
        vector.step(steps)
        errors = np.sqrt(np.mean(np.square(vector.qpos[:, addresses] - held), axis=1))
        rows = []
        for index, model in enumerate(vector.models):
            failed = [info.name for info in vector.world(index).plugins
                      if info.state is not mjfast.PluginState.ACTIVE]
            if failed:
                raise RuntimeError(f"world {index}: plugins not active: {failed}")
            rows.append({"world": index,
                         "mass_factor": float(model.body_mass[link_ids].sum()) / nominal_mass,
                         "final_error_rad": float(errors[index]),
                         "time": float(vector.time[index])})
    return rows


def plot(rows: list[dict[str, Any]], duration: float, path: Path) -> None:
    import matplotlib  # lazily: only the plot needs it

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    errors = np.array([row["final_error_rad"] for row in rows])
    factors = np.array([row["mass_factor"] for row in rows])
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    left.hist(errors * 1e3, bins=min(20, max(5, len(rows) // 3)), color="tab:blue",
              edgecolor="white")
    left.axvline(float(np.median(errors)) * 1e3, color="black", linestyle="--",
                 label=f"median {np.median(errors) * 1e3:.2f} mrad")
    left.set_xlabel(f"RMS joint error after {duration:g} s (mrad)")
    left.set_ylabel("worlds")
    left.set_title(f"Final error over {len(rows)} worlds")
    left.legend()
    right.scatter(factors, errors * 1e3, s=18, color="tab:orange")
    right.set_xlabel("arm mass / nominal (links' masses drawn from "
                     f"{MASS_SCALE[0]:g}x to {MASS_SCALE[1]:g}x)")
    right.set_ylabel("RMS joint error (mrad)")
    right.set_title("Heavier arms sag further under the same gains")
    right.grid(True, alpha=0.3)
    figure.suptitle("mjfast.VectorEnv: demo arm held by PoseHoldPD (kp 600, kd 20), "
                    "link masses randomised per world")
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=64, help="number of worlds (64)")
    parser.add_argument("--duration", type=float, default=2.0,
                        help="simulated seconds per world (2.0)")
    parser.add_argument("--seed", type=int, default=0, help="base seed: world i draws from K+i")
    parser.add_argument("--threads", type=int, default=None,
                        help="worker threads (default: the usable CPUs)")
    parser.add_argument("--out", type=Path, default=Path("vector_sweep_out"),
                        help="output folder (vector_sweep_out)")
    parser.add_argument("--no-plot", action="store_true", help="write the table only")
    args = parser.parse_args(argv)
    if args.worlds < 1 or not args.duration > 0 or args.seed < 0:
        parser.error("--worlds must be >= 1, --duration > 0 and --seed >= 0")
    # Checked before any work: a missing plotting library should not cost a whole sweep.
    if not args.no_plot and importlib.util.find_spec("matplotlib") is None:
        print("vector_sweep: the plot needs matplotlib, which is not installed: "
              "pip install matplotlib (or pass --no-plot for the table only)", file=sys.stderr)
        return 1

    rows = sweep(args.worlds, args.duration, args.seed, args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "vector_sweep.csv"
    with table.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"vector_sweep: wrote {table}")
    if not args.no_plot:
        figure = args.out / "vector_sweep.png"
        plot(rows, args.duration, figure)
        print(f"vector_sweep: wrote {figure}")
    errors = [row["final_error_rad"] for row in rows]
    print(f"vector_sweep: {len(rows)} worlds, final RMS error {min(errors):.2e} to "
          f"{max(errors):.2e} rad (median {float(np.median(errors)):.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
