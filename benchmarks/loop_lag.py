"""Event-loop stalls while a 100,000-partition Metadata refresh is absorbed.

    .venv/bin/python benchmarks/loop_lag.py [--partitions N]

A probe task sleeps 1 ms in a loop and records how late it wakes; the largest
lateness is the longest stall any connection would have seen. Printed for the
proxy's way (read and merge on a worker thread) and, for comparison, for doing
both on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.micro import metadata_frame  # noqa: E402
from protocol.metadata import read_metadata  # noqa: E402
from proxy.cluster_view import ClusterViewStore  # noqa: E402
from proxy.view_feeder import ViewFeeder  # noqa: E402


async def probe(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - start - 0.001)


async def measure(frame: bytes, on_loop: bool) -> tuple[float, float]:
    store = ClusterViewStore(time.monotonic)
    feeder = ViewFeeder(store)
    stop = asyncio.Event()
    lags: list[float] = []
    task = asyncio.ensure_future(probe(stop, lags))
    await asyncio.sleep(0.05)
    start = time.perf_counter()
    if on_loop:
        store.apply_metadata(read_metadata(frame, 12), full=True)
    else:
        await feeder.absorb(frame, 12, full=True)
    took = time.perf_counter() - start
    await asyncio.sleep(0.05)
    stop.set()
    await task
    feeder.close()
    assert store.view.partition_count > 0
    return max(lags), took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="event-loop stalls during a metadata refresh")
    parser.add_argument("--partitions", type=int, default=100_000)
    args = parser.parse_args(argv)
    frame = metadata_frame(args.partitions)
    for label, on_loop in (("worker thread (rackguard)", False), ("on the event loop", True)):
        stall, took = asyncio.run(measure(frame, on_loop))
        print(f"{args.partitions:,} partitions, {label:<26} longest stall {stall * 1e3:7.1f} ms"
              f"  (refresh took {took * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
