"""The bag process's CPU per recorded message (run by hand, not pytest): what the recording's
writer process (mjfast.interop.record.writer) spends on each message it is sent, which it takes
on the vCPU beside the physics thread.

A humanoid with JointStatePublisher at 100 Hz records 20,000 steps (a state every 100); the
batches its writer thread sent are kept, then written again through the bag process's `_Bag` in
this process, timed (and, with --profile, under cProfile). Run:
    .venv/bin/python bench/bag_process.py [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pickle
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from mjfast.interop.record import writer
from test_bench_record import joint_state_env

STEPS = 20_000


def recorded_batches(folder: Path) -> list[bytes]:
    """The batches a recording's writer thread sent to its bag process, pickled as it sent them."""
    sent: list[bytes] = []
    send = writer.BagWriterProcess.send

    def keep(self: writer.BagWriterProcess, batch: list[Any]) -> None:
        sent.append(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
        send(self, batch)

    writer.BagWriterProcess.send = keep  # type: ignore[method-assign]
    try:
        with joint_state_env() as env:  # (the recording benchmark's env)
            recording = env.record(folder / "recorded", state_every=100)
            env.step(STEPS)
            recording.stop()
    finally:
        writer.BagWriterProcess.send = send  # type: ignore[method-assign]
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        batches = [pickle.loads(data) for data in recorded_batches(Path(folder))]
        items = sum(1 for batch in batches for _ in writer.batch_items(batch))
        bag = writer._Bag({"path": str(Path(folder) / "again"), "custom_data": {}, "clock": True})
        profile = cProfile.Profile() if options.profile else None
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        for batch in batches:
            bag.write_batch(batch)
        if profile is not None:
            profile.disable()
        seconds = time.perf_counter() - start
        written = sum(bag._writer.counts.values())
        bag.close()
    print(f"{items} items sent ({written} messages written, /clock included): "
          f"{seconds / items * 1e6:.1f} us of the bag process per item")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
