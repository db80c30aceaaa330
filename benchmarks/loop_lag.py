"""Event-loop stalls while a 100,000-partition Metadata refresh is absorbed.

    .venv/bin/python benchmarks/loop_lag.py [--partitions N] [--repeat R] [--no-on-loop]

A probe task sleeps 1 ms in a loop and records how late it wakes; the largest
lateness is the longest stall any connection would have seen. Each repetition
absorbs the refresh twice on the proxy's way (read and merge on a worker
thread): into an empty view, then replacing that view (the steady state, when
the old view is freed as well), and keeps probing until that old view is gone.
Printed per repetition, then the median and the maximum over repetitions
(other processes on the machine add stalls of their own, so one run proves
little); and, for comparison, once for doing both on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.micro import metadata_frame  # noqa: E402
from protocol.metadata import read_metadata  # noqa: E402
from proxy.cluster_view import ClusterViewStore  # noqa: E402
from proxy.view_feeder import ViewFeeder  # noqa: E402

_SETTLE_S = 0.15  # probing goes on this long after the last absorb (the old view's release)


async def probe(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - start - 0.001)


async def measure(frame: bytes, on_loop: bool) -> tuple[list[float], float]:
    """Probe lags over the whole run, and the time the refreshes took (ms, each)."""
    store = ClusterViewStore(time.monotonic)
    feeder = ViewFeeder(store)
    stop = asyncio.Event()
    lags: list[float] = []
    task = asyncio.ensure_future(probe(stop, lags))
    await asyncio.sleep(0.05)
    took = []
    for _ in range(1 if on_loop else 2):
        start = time.perf_counter()
        if on_loop:
            store.apply_metadata(read_metadata(frame, 12), full=True)
        else:
            await feeder.absorb(frame, 12, full=True)
        took.append(time.perf_counter() - start)
        await asyncio.sleep(_SETTLE_S)
    stop.set()
    await task
    feeder.close()
    assert store.view.partition_count > 0
    return lags, statistics.mean(took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="event-loop stalls during a metadata refresh")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-on-loop", action="store_true",
                        help="skip the comparison run on the event loop")
    args = parser.parse_args(argv)
    frame = metadata_frame(args.partitions)
    label = f"{args.partitions:,} partitions"
    stalls = []
    for i in range(args.repeat):
        lags, took = asyncio.run(measure(frame, on_loop=False))
        lags.sort()
        stalls.append(lags[-1])
        print(f"{label}, worker thread (rackguard), run {i + 1}: longest stall "
              f"{lags[-1] * 1e3:6.1f} ms, p99 {lags[int(len(lags) * 0.99)] * 1e3:5.1f} ms"
              f"  (refresh took {took * 1e3:.0f} ms)")
    print(f"{label}, worker thread (rackguard): longest stall median "
          f"{statistics.median(stalls) * 1e3:.1f} ms, max {max(stalls) * 1e3:.1f} ms "
          f"over {args.repeat} run(s)")
    if not args.no_on_loop:
        lags, took = asyncio.run(measure(frame, on_loop=True))
        print(f"{label}, on the event loop: longest stall {max(lags) * 1e3:.1f} ms"
              f"  (refresh took {took * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
